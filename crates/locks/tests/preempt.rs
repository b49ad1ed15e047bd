//! The preemption-safe locks under SMARTQ's emulated multiprogramming
//! scheduler: mutual exclusion while workers are descheduled by signal at
//! any point (waiting, inside the critical section, in the middle of a
//! release), nested acquisitions, and the scheduler's own guarantees.
#![cfg(all(target_os = "linux", not(loom)))]

use std::time::{Duration, Instant};

use symmetry_locks::lock_api::RawMutex;
use symmetry_locks::sched::emulated::{self, Config, Emulated};
use symmetry_locks::sched::{self, State};
use symmetry_locks::{Handshake, McsNp, McsTp, NativeNp, SmartQ, TasNp};

mod common;

use common::Guarded;

fn cfg(level: f64) -> Config {
    Config::new(2, level)
        .with_quantum(Duration::from_millis(2))
        .with_extension(Duration::from_micros(200))
}

/// Two workers on two virtual processors at level 2.0 bump a counter for
/// `run`; returns (total bumps, preemptions, extensions).
fn multiprogrammed<R: RawMutex + Sync>(name: &str, level: f64, run: Duration) -> (u64, u64, u64) {
    let mut g = Guarded::<R>::new();
    let out = emulated::run(&cfg(level), |i| {
        let end = Instant::now() + run;
        let mut n = 0u64;
        while Instant::now() < end {
            g.locked_bump(if i == 0 { 50 } else { 200 });
            n += 1;
            for _ in 0..100 {
                std::hint::spin_loop();
            }
        }
        n
    })
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    let total: u64 = out.iter().map(|(n, _)| n).sum();
    assert_eq!(g.count(name), total, "{name}: lost updates");
    let pre = out.iter().map(|(_, s)| s.preemptions).sum();
    let ext = out.iter().map(|(_, s)| s.extensions).sum();
    (total, pre, ext)
}

#[test]
fn every_lock_stays_exclusive_while_workers_are_descheduled() {
    let run = Duration::from_millis(150);
    for (name, (n, pre, _)) in [
        (
            "tas-np",
            multiprogrammed::<TasNp<Emulated>>("tas-np", 2.0, run),
        ),
        (
            "mcs-np",
            multiprogrammed::<McsNp<Emulated>>("mcs-np", 2.0, run),
        ),
        (
            "handshake",
            multiprogrammed::<Handshake<Emulated>>("handshake", 2.0, run),
        ),
        (
            "smart-q",
            multiprogrammed::<SmartQ<Emulated>>("smart-q", 2.0, run),
        ),
        (
            "native-np",
            multiprogrammed::<NativeNp<Emulated>>("native-np", 2.0, run),
        ),
        ("mcs-tp", multiprogrammed::<McsTp>("mcs-tp", 2.0, run)),
        (
            "smart-q@1.5",
            multiprogrammed::<SmartQ<Emulated>>("smart-q", 1.5, run),
        ),
        (
            "handshake@3",
            multiprogrammed::<Handshake<Emulated>>("handshake", 3.0, run),
        ),
    ] {
        assert!(n > 0, "{name}: no progress");
        assert!(pre > 0, "{name}: the scheduler never descheduled a worker");
    }
}

#[test]
fn non_preemption_requests_are_honoured_and_warned() {
    // Long critical sections under tas-np: quantum ends often find the
    // holder inside, so extensions must be granted (and warned).
    let mut g = Guarded::<TasNp<Emulated>>::new();
    let out = emulated::run(&cfg(2.0), |_| {
        let end = Instant::now() + Duration::from_millis(150);
        while Instant::now() < end {
            g.locked_bump(20_000);
        }
    })
    .unwrap();
    let ext: u64 = out.iter().map(|(_, s)| s.extensions).sum();
    assert!(ext > 0, "no extension was ever granted: {out:?}");
    g.count("tas-np");
}

/// The application's own workers as the competing processes: 5 workers
/// on 2 processors at level 2.5, each descheduled while the others of its
/// processor run; every worker finishes and the counter is exact.
#[test]
fn workers_as_competitors() {
    use symmetry_locks::sched::emulated::Competitors;
    let mut g = Guarded::<SmartQ<Emulated>>::new();
    let cfg = cfg(2.5).with_competitors(Competitors::Workers);
    assert_eq!(cfg.workers(), 5);
    let out = emulated::run(&cfg, |_| {
        let end = Instant::now() + Duration::from_millis(100);
        let mut n = 0u64;
        while Instant::now() < end {
            g.locked_bump(100);
            n += 1;
        }
        n
    })
    .unwrap();
    assert_eq!(out.len(), 5);
    let total: u64 = out.iter().map(|(n, _)| n).sum();
    assert_eq!(g.count("smart-q"), total);
    assert!(
        out.iter().all(|(n, s)| *n > 0 && s.preemptions > 0),
        "{out:?}"
    );
}

/// A worker that panics ends the run (the panic reaches the caller)
/// instead of hanging the scheduler or the other workers.
#[test]
fn a_panicking_worker_ends_the_run() {
    let r = std::panic::catch_unwind(|| {
        emulated::run(&cfg(2.0), |i| {
            if i == 1 {
                panic!("worker 1 fails");
            }
            let end = Instant::now() + Duration::from_millis(30);
            while Instant::now() < end {}
        })
    });
    assert!(r.is_err(), "the worker's panic must reach the caller");
}

#[test]
fn level_one_never_deschedules() {
    let (_, pre, ext) =
        multiprogrammed::<SmartQ<Emulated>>("smart-q", 1.0, Duration::from_millis(50));
    assert_eq!((pre, ext), (0, 0));
}

#[test]
fn nested_locks_under_emulation() {
    let a = Guarded::<SmartQ<Emulated>>::new();
    let b = Guarded::<Handshake<Emulated>>::new();
    let c = Guarded::<TasNp<Emulated>>::new();
    emulated::run(&cfg(2.0), |i| {
        let end = Instant::now() + Duration::from_millis(100);
        while Instant::now() < end {
            let ga = a.lock.lock();
            let gb = b.lock.lock();
            let gc = c.lock.lock();
            assert_ne!(
                sched::current().state(),
                State::Preemptable,
                "holder must be unpreemptable"
            );
            // SAFETY: all held, released in a non-LIFO order.
            unsafe {
                if i == 0 {
                    a.lock.unlock(ga);
                    c.lock.unlock(gc);
                    b.lock.unlock(gb);
                } else {
                    b.lock.unlock(gb);
                    a.lock.unlock(ga);
                    c.lock.unlock(gc);
                }
            }
            assert_eq!(sched::current().state(), State::Preemptable);
        }
    })
    .unwrap();
    assert!(!a.lock.is_locked() && !b.lock.is_locked() && !c.lock.is_locked());
}

#[test]
fn outside_an_emulation_the_locks_are_plain() {
    // A thread that is no worker: warned or not, yield_now returns.
    let l = SmartQ::<Emulated>::new();
    let g = l.lock();
    assert_eq!(sched::current().state(), State::UnpreemptableSelf);
    sched::current().warn();
    // SAFETY: held with `g`.
    unsafe { l.unlock(g) };
    assert!(
        !sched::current().warned(),
        "the warning of a non-worker is dropped"
    );
    assert_eq!(sched::current().state(), State::Preemptable);
}

#[test]
fn rseq_extension_is_detected_or_explained() {
    match sched::rseq::available() {
        sched::rseq::Availability::Available => {}
        sched::rseq::Availability::Absent(why) => {
            assert!(!why.is_empty());
        }
    }
    // The locks work over it either way.
    let mut g = Guarded::<SmartQ<sched::rseq::RseqSlice>>::new();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| (0..10_000).for_each(|_| g.locked_bump(0)));
        }
    });
    assert_eq!(g.count("smart-q"), 20_000);
}
