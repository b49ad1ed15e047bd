//! Spin-then-block locks (KLMO91): mutual exclusion under every policy
//! with the futex blocker, at and beyond the core count; the profiler's
//! records and file format; the adaptive policies' state machines; the
//! calibration and `opt-known` tables.
#![cfg(not(loom))]

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use symmetry_locks::lock_api::{self, RawMutex};
use symmetry_locks::spin_then_block::blocker::SpinWait;
use symmetry_locks::spin_then_block::policy::{
    self, AlwaysBlock, AlwaysSpin, Last3, OptApprox, OptKnown, RandomWalk, SpinPolicy,
};
use symmetry_locks::spin_then_block::{Blocker, Futex, LockName, SpinThenBlock, profiler};

/// Serializes the tests (they oversubscribe the cores and share the
/// global profiler).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

struct Counter<R> {
    lock: R,
    value: UnsafeCell<u64>,
}

// SAFETY: `value` is only touched with `lock` held.
unsafe impl<R: Sync> Sync for Counter<R> {}

/// `threads` threads each add `per_thread` to a non-atomic counter under
/// the lock, with a critical section of `cs` spin hints; the total must be
/// exact. Fails (instead of hanging) if the run takes over a minute.
fn stress<R: RawMutex + Send + Sync + 'static>(lock: R, threads: usize, per_thread: u64, cs: u32) {
    let c = Arc::new(Counter {
        lock,
        value: UnsafeCell::new(0),
    });
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            while !done.load(Ordering::Relaxed) {
                assert!(t.elapsed() < Duration::from_secs(60), "stress run hung");
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || {
                for _ in 0..per_thread {
                    let g = c.lock.lock();
                    // SAFETY: the lock is held.
                    unsafe { *c.value.get() += 1 };
                    for _ in 0..cs {
                        std::hint::spin_loop();
                    }
                    // SAFETY: locked just above by this thread.
                    unsafe { c.lock.unlock(g) };
                }
            })
        })
        .collect();
    for h in hs {
        h.join().expect("worker");
    }
    done.store(true, Ordering::Relaxed);
    watchdog.join().expect("watchdog");
    // SAFETY: all workers joined.
    assert_eq!(unsafe { *c.value.get() }, threads as u64 * per_thread);
}

macro_rules! policy_stress {
    ($($name:literal => $ty:ty;)*) => {
        #[test]
        fn every_policy_excludes_with_futex() {
            let _s = serial();
            $(
                for threads in [1, 2, 4, 8] {
                    // Short and long critical sections: waits below and above C.
                    for cs in [0, 2_000] {
                        let per = if cs == 0 { 20_000 } else { 400 };
                        stress(SpinThenBlock::<$ty, Futex>::named($name), threads, per, cs);
                    }
                }
                stress(SpinThenBlock::<$ty, SpinWait>::named($name), 3, 5_000, 10);
            )*
        }

        #[test]
        fn registry_names_match_types() {
            $( assert_eq!(<$ty as SpinPolicy>::NAME, $name); )*
        }
    };
}
symmetry_locks::for_each_spin_policy!(policy_stress);

#[test]
fn lock_api_mutex_and_try_lock() {
    let _s = serial();
    let m = lock_api::Mutex::<SpinThenBlock<RandomWalk, Futex>, Vec<u32>>::new(Vec::new());
    m.lock().push(1);
    {
        let g = m.lock();
        assert!(m.try_lock().is_none(), "held lock must refuse try_lock");
        assert!(m.is_locked());
        drop(g);
    }
    assert!(m.try_lock().is_some());
    assert_eq!(*m.lock(), vec![1]);
}

#[test]
fn names() {
    let site = SpinThenBlock::<AlwaysBlock, Futex>::new();
    let key = site.name().key();
    assert!(key.contains("spin_then_block.rs:"), "{key}");
    let named = SpinThenBlock::<AlwaysBlock, Futex>::named("x.y");
    assert_eq!(named.name().key(), "x.y");
    let anon: SpinThenBlock<AlwaysBlock, Futex> = RawMutex::INIT;
    assert_eq!(anon.name(), LockName::Anonymous);
}

/// Two threads: one holds the lock, the other contends once. The holder
/// keeps the lock for `hold` after the other thread announced that it is
/// about to lock, so the acquisition is contended unless that thread is
/// descheduled for longer than `hold` between the announcement and its
/// first CAS (keep `hold` in milliseconds: CI runs tests beside builds).
fn one_contended_wait<P: SpinPolicy, B: Blocker>(lock: &SpinThenBlock<P, B>, hold: Duration) {
    let held = AtomicBool::new(false);
    let trying = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let g = lock.lock();
            held.store(true, Ordering::Release);
            while !trying.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            let t = Instant::now();
            while t.elapsed() < hold {
                std::hint::spin_loop();
            }
            // SAFETY: locked above by this thread.
            unsafe { lock.unlock(g) };
        });
        while !held.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        trying.store(true, Ordering::Release);
        let g = lock.lock();
        // SAFETY: locked just above.
        unsafe { lock.unlock(g) };
    });
}

#[test]
fn profiler_records_contended_waits_by_name() {
    let _s = serial();
    profiler::set_enabled(true);
    let lock = SpinThenBlock::<AlwaysBlock, Futex>::named("test.profiled");
    // Uncontended acquisitions record nothing.
    for _ in 0..100 {
        let g = lock.lock();
        // SAFETY: locked just above.
        unsafe { lock.unlock(g) };
    }
    let before = profiler::snapshot();
    assert!(before.locks.iter().all(|l| l.name != "test.profiled"));
    // A blocked waiter learns the hold time from the releaser: a 20 ms
    // hold is far beyond the 1008-spin cap, so it lands in overflow and
    // counts as blocked.
    one_contended_wait(&lock, Duration::from_millis(20));
    let p = profiler::snapshot();
    let rec = p
        .locks
        .iter()
        .find(|l| l.name == "test.profiled")
        .expect("recorded");
    assert_eq!(rec.blocker, "os");
    assert_eq!(rec.contended(), 1);
    assert_eq!(rec.counts[profiler::BUCKETS - 1], 1, "{rec:?}");
    assert_eq!(rec.blocked_total(), 1);
    // The recorded wait is of the order of the hold (blocked time in
    // spins), not zero.
    let waited_ns = rec.sums[profiler::BUCKETS - 1] as f64 * p.ns_per_spin;
    assert!(waited_ns > 1e6, "waited {waited_ns} ns");
    // The file round-trips.
    let back = profiler::Profile::parse(&p.to_csv()).expect("parses");
    assert_eq!(back.locks.len(), p.locks.len());
    // Off: nothing more is recorded.
    profiler::set_enabled(false);
    one_contended_wait(&lock, Duration::from_millis(2));
    profiler::set_enabled(true);
    let again = profiler::snapshot();
    let rec2 = again
        .locks
        .iter()
        .find(|l| l.name == "test.profiled")
        .expect("still there");
    assert_eq!(rec2.contended(), 1);
}

#[test]
fn profile_file_written_and_read() {
    let _s = serial();
    let lock = SpinThenBlock::<AlwaysSpin, Futex>::named("test.file");
    one_contended_wait(&lock, Duration::from_millis(5));
    let path = std::env::temp_dir().join(format!("symmetry-profile-{}.csv", std::process::id()));
    profiler::write(&path).expect("written");
    let p = profiler::Profile::read(&path).expect("read back");
    let rec = p
        .locks
        .iter()
        .find(|l| l.name == "test.file")
        .expect("recorded");
    assert_eq!(rec.blocked_total(), 0, "always-spin never blocks");
    let _ = std::fs::remove_file(&path);
    let err = profiler::Profile::read(std::path::Path::new("/nonexistent/x.csv")).unwrap_err();
    assert!(err.to_string().contains("cannot read"), "{err}");
}

#[test]
fn random_walk_steps_within_zero_and_c() {
    let p = RandomWalk::INIT;
    let n = LockName::Anonymous;
    let c = 100;
    assert_eq!(p.threshold(c, &n), c, "starts at C");
    p.record(500, c); // long wait: step down
    assert_eq!(p.threshold(c, &n), c - 16);
    for _ in 0..100 {
        p.record(500, c);
    }
    assert_eq!(p.threshold(c, &n), 0, "not below 0");
    p.record(5, c); // short wait: step up
    assert_eq!(p.threshold(c, &n), 16);
    for _ in 0..100 {
        p.record(5, c);
    }
    assert_eq!(p.threshold(c, &n), c, "not above C");
}

#[test]
fn last3_uses_the_last_three_samples() {
    let p = Last3::INIT;
    let n = LockName::Anonymous;
    let c = 400;
    assert_eq!(p.threshold(c, &n), c, "C before any sample");
    for w in [20, 40, 33] {
        p.record(w, c);
    }
    // Short waits: spin up to the longest, rounded up to 16 spins.
    assert_eq!(p.threshold(c, &n), 48);
    for _ in 0..3 {
        p.record(10_000, c);
    }
    assert_eq!(p.threshold(c, &n), 0, "three long waits: block at once");
}

#[test]
fn opt_approx_converges_to_the_optimum() {
    let p = OptApprox::INIT;
    let n = LockName::Anonymous;
    let c = 500;
    // 90% waits of ~100 spins, 10% very long: spin through the short ones.
    for i in 0..1000 {
        p.record(if i % 10 == 0 { 1_000_000 } else { 100 }, c);
    }
    assert_eq!(p.threshold(c, &n), 128);
    // All long: block at once.
    let q = OptApprox::INIT;
    for _ in 0..100 {
        q.record(1_000_000, c);
    }
    assert_eq!(q.threshold(c, &n), 0);
}

#[test]
fn optimal_threshold_formula() {
    use policy::{Bucket, optimal_threshold};
    assert_eq!(optimal_threshold(&[], 10), None);
    let b = |upper, count, sum| Bucket { upper, count, sum };
    // All waits 5 spins, C = 100: spin to 5, cost 5.
    assert_eq!(optimal_threshold(&[b(5, 10, 50)], 100), Some((5, 5.0)));
    // All waits overflow: block at once, cost C.
    assert_eq!(
        optimal_threshold(&[b(u64::MAX, 3, 0)], 100),
        Some((0, 100.0))
    );
}

#[test]
fn opt_known_reads_the_installed_table() {
    let _s = serial();
    policy::opt_known::install([("test.known", 77u32)]);
    let n = LockName::Named("test.known");
    let p = OptKnown::INIT;
    assert_eq!(p.threshold(500, &n), 77);
    let other = OptKnown::INIT;
    assert_eq!(
        other.threshold(500, &LockName::Named("test.unknown")),
        500,
        "falls back to C"
    );
    assert_eq!(OptKnown::with_threshold(9).threshold(500, &n), 9);
    // From a profile: the lock's optimal threshold.
    let mut rec = profiler::LockRecord::new("test.fromprofile", "os", 300);
    for _ in 0..100 {
        rec.add(40, false);
    }
    let prof = profiler::Profile::new(1.0, vec![rec]);
    assert_eq!(policy::opt_known::install_from_profile(&prof), 1);
    assert_eq!(policy::opt_known::lookup("test.fromprofile"), Some(48));
}

#[test]
fn calibration_install_and_conversions() {
    let _s = serial();
    use symmetry_locks::spin_then_block::calibration::{self, Calibration};
    let before = calibration::current();
    assert!(before.ns_per_spin > 0.0 && before.c_spins_os > 0 && before.c_spins_user > 0);
    calibration::install(Calibration::new(10.0, 321, 12));
    assert_eq!(calibration::c_spins_os(), 321);
    assert_eq!(calibration::c_spins_user(), 12);
    assert_eq!(calibration::ns_to_spins(1_000), 100);
    // Nonsense is ignored.
    calibration::install(Calibration::new(f64::NAN, 0, 0));
    assert_eq!(calibration::c_spins_os(), 321);
    calibration::install(before);
}

#[test]
fn shards_add_to_their_lock_and_are_reused() {
    let _s = serial();
    let entry = profiler::entry(&LockName::Named("test.sharded"), "os", || 100);
    let find = |p: &profiler::Profile| p.locks.iter().find(|l| l.name == "test.sharded").cloned();
    entry.record(5, false);
    // Four threads, each with its own shard, record 1,000 waits apiece
    // into the bucket of a 20-spin wait (bucket 1).
    let shards: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(move || {
                    let sh = profiler::take_shard(entry);
                    assert!(std::ptr::eq(sh.lock(), entry));
                    for _ in 0..1_000 {
                        sh.record(20, false);
                    }
                    sh.record(5_000, true);
                    sh as *const profiler::Shard as usize
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let distinct: std::collections::HashSet<_> = shards.iter().collect();
    assert_eq!(distinct.len(), 4, "a shard is one thread's only");
    let rec = find(&profiler::snapshot()).expect("recorded");
    assert_eq!(rec.counts[0], 1);
    assert_eq!(rec.counts[1], 4_000);
    assert_eq!(rec.sums[1], 80_000);
    assert_eq!(rec.blocked[profiler::BUCKETS - 1], 4);
    assert_eq!(rec.contended(), 4_005);
    // A released shard keeps its counts and is handed to the next taker.
    let sh = profiler::take_shard(entry);
    profiler::release_shard(sh);
    let again = profiler::take_shard(entry);
    assert!(std::ptr::eq(sh, again));
    profiler::release_shard(again);
    assert_eq!(
        find(&profiler::snapshot()).expect("kept").contended(),
        4_005
    );
    // Reset clears shards too.
    profiler::reset();
    assert!(find(&profiler::snapshot()).is_none());
}
