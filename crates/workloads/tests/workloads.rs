//! Behaviour of the KLMO91 workloads on both executors: a parallel Regsim
//! run gives exactly the sequential outputs, and Hanoi keeps its
//! invariants, whatever the lock, policy, executor and thread count.
//! Sizes are small; nothing here asserts a time.

use symmetry_locks::spin_then_block::policy::{
    AlwaysBlock, AlwaysSpin, FixedSpinHalfC, Last3, RandomWalk,
};
use symmetry_locks::spin_then_block::{Futex, SpinThenBlock};
use symmetry_threads::sync::UserBlocker;
use symmetry_workloads::hanoi::{self, HanoiCfg};
use symmetry_workloads::regsim::{self, RegsimCfg};
use symmetry_workloads::{Exec, OsThreads, UserThreads, WorkloadLock};

/// A small circuit: 200 objects, 30 cycles.
fn small_regsim(threads: usize) -> RegsimCfg {
    RegsimCfg {
        threads,
        objects: 200,
        fanin: 3,
        cycles: 30,
        eval_work: 20,
        seed: 42 + threads as u64,
    }
}

/// Three circuits with `threads` workers: the parallel run must give the
/// sequential outputs, phases and evaluation count exactly.
fn check_regsim<L: WorkloadLock, E: Exec>(exec: &E, threads: usize) {
    for seed in 0..3 {
        let cfg = RegsimCfg {
            seed: small_regsim(threads).seed * 1000 + seed,
            ..small_regsim(threads)
        };
        let out = regsim::run::<L, E>(&cfg, exec);
        let what = format!(
            "{} threads={threads} seed={} lock={}",
            E::NAME,
            cfg.seed,
            std::any::type_name::<L>()
        );
        assert_eq!(out.checksum, regsim::reference_checksum(&cfg), "{what}");
        assert_eq!(out.phases, regsim::reference_phases(&cfg), "{what}");
        assert_eq!(out.evaluations, out.phases * cfg.objects as u64, "{what}");
        if threads > 1 {
            assert!(out.rebalances > 0, "{what}: no object moved");
        } else {
            assert_eq!(out.rebalances, 0, "{what}");
        }
    }
}

fn check_hanoi<L: WorkloadLock, E: Exec>(exec: &E, threads: usize) {
    let cfg = HanoiCfg {
        threads,
        disks: 16,
        moves: 20_000,
        seed: threads as u64,
    };
    let out = hanoi::run::<L, E>(&cfg, exec);
    let what = format!(
        "{} threads={threads} lock={}",
        E::NAME,
        std::any::type_name::<L>()
    );
    assert!(out.valid, "{what}: invariants broken");
    assert_eq!(out.moves, cfg.moves, "{what}");
}

type Os<P> = SpinThenBlock<P, Futex>;
type User<P> = SpinThenBlock<P, UserBlocker>;

#[test]
fn regsim_os_threads_match_the_reference() {
    for threads in [1, 2, 4] {
        check_regsim::<Os<RandomWalk>, _>(&OsThreads, threads);
        check_regsim::<Os<AlwaysBlock>, _>(&OsThreads, threads);
        check_regsim::<Os<FixedSpinHalfC>, _>(&OsThreads, threads);
        check_regsim::<symmetry_locks::ParkingLot, _>(&OsThreads, threads);
    }
}

#[test]
fn regsim_user_threads_match_the_reference() {
    for threads in [1, 2, 4] {
        let exec = UserThreads::new(threads.min(2));
        check_regsim::<User<RandomWalk>, _>(&exec, threads);
        check_regsim::<User<AlwaysBlock>, _>(&exec, threads);
        check_regsim::<User<Last3>, _>(&exec, threads);
    }
}

#[test]
fn regsim_baselines_match_the_reference() {
    check_regsim::<symmetry_locks::StdMutex, _>(&OsThreads, 2);
    check_regsim::<symmetry_locks::PthreadAdaptive, _>(&OsThreads, 2);
    check_regsim::<Os<AlwaysSpin>, _>(&OsThreads, 2);
}

#[test]
fn regsim_degenerate_configurations_run() {
    // No threads (taken as one), no cycles, fewer objects than threads,
    // no fan-in.
    for cfg in [
        RegsimCfg {
            threads: 0,
            ..small_regsim(1)
        },
        RegsimCfg {
            cycles: 0,
            ..small_regsim(2)
        },
        RegsimCfg {
            objects: 3,
            ..small_regsim(4)
        },
        RegsimCfg {
            objects: 0,
            fanin: 0,
            ..small_regsim(2)
        },
    ] {
        let out = regsim::run::<Os<RandomWalk>, _>(&cfg, &OsThreads);
        assert_eq!(out.checksum, regsim::reference_checksum(&cfg), "{cfg:?}");
        let out = regsim::run::<User<RandomWalk>, _>(&cfg, &UserThreads::new(2));
        assert_eq!(out.checksum, regsim::reference_checksum(&cfg), "{cfg:?}");
    }
}

#[test]
fn regsim_presets_are_consistent() {
    for threads in [0, 1, 2] {
        for cfg in [RegsimCfg::quick(threads), RegsimCfg::full(threads)] {
            assert!(cfg.threads >= 1);
            assert!(cfg.objects > cfg.threads);
        }
    }
    let q = RegsimCfg::quick(2);
    let f = RegsimCfg::full(2);
    assert!(f.objects * f.cycles > q.objects * q.cycles);
}

#[test]
fn hanoi_os_threads_keep_the_invariants() {
    for threads in 1..=8 {
        check_hanoi::<Os<RandomWalk>, _>(&OsThreads, threads);
        check_hanoi::<Os<AlwaysBlock>, _>(&OsThreads, threads);
    }
    check_hanoi::<symmetry_locks::ParkingLot, _>(&OsThreads, 8);
    check_hanoi::<Os<AlwaysSpin>, _>(&OsThreads, 4);
}

#[test]
fn hanoi_user_threads_keep_the_invariants() {
    let exec = UserThreads::new(2);
    for threads in 1..=8 {
        check_hanoi::<User<RandomWalk>, _>(&exec, threads);
        check_hanoi::<User<AlwaysBlock>, _>(&exec, threads);
    }
    check_hanoi::<User<AlwaysSpin>, _>(&exec, 8);
    check_hanoi::<User<Last3>, _>(&UserThreads::new(1), 6);
}

#[test]
fn hanoi_degenerate_configurations_run() {
    for cfg in [
        HanoiCfg {
            threads: 0,
            disks: 0,
            moves: 50,
            seed: 1,
        },
        HanoiCfg {
            threads: 3,
            disks: 1,
            moves: 200,
            seed: 2,
        },
        HanoiCfg {
            threads: 5,
            disks: 200,
            moves: 0,
            seed: 3,
        },
    ] {
        let out = hanoi::run::<Os<RandomWalk>, _>(&cfg, &OsThreads);
        assert!(out.valid, "{cfg:?}");
        assert_eq!(out.moves, cfg.moves);
        let out = hanoi::run::<User<RandomWalk>, _>(&cfg, &UserThreads::new(2));
        assert!(out.valid, "{cfg:?}");
    }
}

#[test]
fn executors_run_every_worker_once() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn count<E: Exec>(exec: &E, threads: usize) -> usize {
        let seen = Arc::new(AtomicUsize::new(0));
        let barrier = exec.barrier(threads.max(1));
        let leaders = Arc::new(AtomicUsize::new(0));
        let body = {
            let (seen, leaders) = (Arc::clone(&seen), Arc::clone(&leaders));
            Arc::new(move |i: usize| {
                seen.fetch_add(1 << (2 * i), Ordering::Relaxed);
                if barrier.wait() {
                    leaders.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        exec.run(threads, body);
        assert_eq!(leaders.load(Ordering::Relaxed), 1);
        seen.load(Ordering::Relaxed)
    }
    for threads in [1, 3, 8] {
        let want: usize = (0..threads).map(|i| 1 << (2 * i)).sum();
        assert_eq!(count(&OsThreads, threads), want);
        assert_eq!(count(&UserThreads::new(2), threads), want);
    }
    // Zero workers are taken as one.
    assert_eq!(count(&OsThreads, 0), 1);
    assert_eq!(count(&UserThreads::new(0), 0), 1);
    assert!(UserThreads::new(0).processors() >= 1);
    assert!(OsThreads.processors() >= 1);
}
