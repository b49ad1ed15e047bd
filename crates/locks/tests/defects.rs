//! Regression tests for three defects:
//!
//! 1. CLH `try_lock` could wait for a holder (the tail node it saw released
//!    was adopted, re-enqueued and locked again before its CAS: ABA), so a
//!    thread that holds lock A and only `try_lock`s lock B could deadlock.
//!    [`clh`] checks that `try_lock` never waits, that `lock` and `try_lock`
//!    stay mutually exclusive, and that the "hold A, try B, back off"
//!    protocol finishes; [`clh::try_lock_after_aba_does_not_wait`] forces
//!    the ABA interleaving with a signal that freezes the `try_lock`ing
//!    thread at a random instruction.
//! 2. The guards of the queue locks (MCS, CLH, Graunke-Thakkar) were not
//!    `Sync` for `T: Sync`: [`guard_sync`].
//! 3. The `std` baseline reported a poisoned, free mutex as locked:
//!    [`std_poison`].
//!
//! Every wait that a broken lock would turn into a hang runs under a
//! watchdog with a generous limit, so a regression fails instead of hanging.
//! Nothing asserts on the speed of a working lock.
//!
//! Under `RUSTFLAGS="--cfg loom"` only [`loom_clh`] is built: loom explores
//! every interleaving of the CLH ABA case (see there); the other modules
//! need `RawMutex::INIT` or the baselines, which loom builds lack.

#[cfg(not(loom))]
use std::sync::mpsc;
#[cfg(not(loom))]
use std::thread;
#[cfg(not(loom))]
use std::time::Duration;

#[cfg(not(loom))]
/// How long a step may take before the test calls it hung. Only a broken
/// lock gets near it.
const HANG: Duration = Duration::from_secs(30);

#[cfg(not(loom))]
/// Serializes the tests of this binary: the timing-sensitive ones (a
/// watchdog, the signal-driven ABA test) should not share the two cores of
/// the CI machine with a stress test.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(not(loom))]
/// Runs `f` on its own thread and returns its result, failing the test if
/// it panics or does not return within [`HANG`] (a hung thread is left
/// behind; the test binary still exits).
fn watchdog<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = thread::spawn(move || {
        let out = f();
        let _ = tx.send(());
        out
    });
    match rx.recv_timeout(HANG) {
        Ok(()) => worker.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Ok(out) => out,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: still running after {HANG:?}: a lock operation is stuck")
        }
    }
}

#[cfg(not(loom))]
mod clh {
    use super::{serial, watchdog};
    use std::cell::UnsafeCell;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Barrier};
    use std::thread;
    use std::time::{Duration, Instant};
    use symmetry_locks::ClhMutex;

    /// A thread holds the lock (after some traffic, so the tail node is a
    /// recycled one) until another has finished 100 000 `try_lock` calls;
    /// every call must fail. A `try_lock` that waited for the holder would
    /// deadlock, which the watchdog reports.
    #[test]
    fn try_lock_fails_without_waiting_while_held() {
        let _serial = serial();
        watchdog("try_lock vs a long hold", || {
            let m = Arc::new(ClhMutex::new(0u64));
            // Traffic from two threads first: nodes migrate between them.
            thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        for _ in 0..10_000 {
                            *m.lock() += 1;
                            if let Some(mut g) = m.try_lock() {
                                *g += 1;
                            }
                        }
                    });
                }
            });
            let held = Arc::new(Barrier::new(2));
            let done = Arc::new(AtomicBool::new(false));
            let holder = {
                let (m, held, done) = (m.clone(), held.clone(), done.clone());
                thread::spawn(move || {
                    let g = m.lock();
                    held.wait();
                    // Hold until the try_locker is done: if one of its calls
                    // waited for us, neither would ever finish.
                    while !done.load(Ordering::Acquire) {
                        thread::sleep(Duration::from_millis(1));
                    }
                    drop(g);
                })
            };
            held.wait();
            for i in 0..100_000 {
                assert!(
                    m.try_lock().is_none(),
                    "try_lock #{i} succeeded while another thread holds the lock"
                );
                assert!(m.is_locked());
            }
            done.store(true, Ordering::Release);
            holder.join().unwrap();
            assert!(!m.is_locked());
            assert!(m.try_lock().is_some());
        });
    }

    /// A counter that is deliberately not atomic: two holders at once show up
    /// as a lost update or as `inside` seen set.
    struct Checked {
        lock: ClhMutex<()>,
        inside: AtomicBool,
        count: UnsafeCell<u64>,
    }

    // SAFETY: `count` is accessed only with `lock` held (which is what the
    // test checks).
    unsafe impl Sync for Checked {}

    impl Checked {
        fn critical_section(&self) {
            assert!(
                !self.inside.swap(true, Ordering::Relaxed),
                "two holders at once"
            );
            // SAFETY: the lock is held by the caller.
            unsafe {
                let v = std::ptr::read_volatile(self.count.get());
                std::hint::spin_loop();
                std::ptr::write_volatile(self.count.get(), v + 1);
            }
            self.inside.store(false, Ordering::Relaxed);
        }
    }

    /// Three threads mix `lock` and `try_lock` on one CLH lock (two cores:
    /// preemption lands in every window). The count is exact.
    #[test]
    fn lock_and_try_lock_are_mutually_exclusive() {
        let _serial = serial();
        watchdog("lock/try_lock stress", || {
            let shared = Checked {
                lock: ClhMutex::new(()),
                inside: AtomicBool::new(false),
                count: UnsafeCell::new(0),
            };
            let deadline = Instant::now() + Duration::from_millis(600);
            let total: u64 = thread::scope(|s| {
                let workers: Vec<_> = (0..3)
                    .map(|t| {
                        let shared = &shared;
                        s.spawn(move || {
                            let mut done = 0u64;
                            let mut i = 0u64;
                            while i < 200_000
                                && (!i.is_multiple_of(64) || Instant::now() < deadline)
                            {
                                // Thread 0 only locks, thread 1 only tries,
                                // thread 2 alternates.
                                let try_it = t == 1 || (t == 2 && i.is_multiple_of(2));
                                if try_it {
                                    if let Some(_g) = shared.lock.try_lock() {
                                        shared.critical_section();
                                        done += 1;
                                    }
                                } else {
                                    let _g = shared.lock.lock();
                                    shared.critical_section();
                                    done += 1;
                                }
                                i += 1;
                            }
                            done
                        })
                    })
                    .collect();
                workers.into_iter().map(|w| w.join().unwrap()).sum()
            });
            assert!(!shared.lock.is_locked());
            let _g = shared.lock.lock();
            // SAFETY: all workers are joined and we hold the lock.
            assert_eq!(unsafe { *shared.count.get() }, total);
        });
    }

    /// `rounds` times: take `first`, try `second`; on failure release
    /// `first`, yield and start over. Returns how often it backed off.
    fn back_off_rounds(first: &ClhMutex<u64>, second: &ClhMutex<u64>, rounds: u64) -> u64 {
        let mut backoffs = 0u64;
        for _ in 0..rounds {
            loop {
                let mut g1 = first.lock();
                if let Some(mut g2) = second.try_lock() {
                    *g1 += 1;
                    *g2 += 1;
                    break;
                }
                drop(g1);
                backoffs += 1;
                thread::yield_now();
            }
        }
        backoffs
    }

    /// Lock-order inversion resolved by back-off: one thread takes A and
    /// tries B, the other takes B and tries A, and each backs off when its
    /// try fails. A third thread takes A and B one at a time, which
    /// re-enqueues released nodes and so makes the ABA interleaving
    /// reachable. All must finish.
    #[test]
    fn hold_one_try_other_back_off_finishes() {
        let _serial = serial();
        watchdog("hold A, try_lock B, back off", || {
            let (a, b) = (ClhMutex::new(0u64), ClhMutex::new(0u64));
            let stop = AtomicBool::new(false);
            const ROUNDS: u64 = 20_000;
            thread::scope(|s| {
                let churn = s.spawn(|| {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        *a.lock() += 1;
                        *b.lock() += 1;
                        n += 1;
                    }
                    n
                });
                let t1 = s.spawn(|| back_off_rounds(&a, &b, ROUNDS));
                let t2 = s.spawn(|| back_off_rounds(&b, &a, ROUNDS));
                t1.join().unwrap();
                t2.join().unwrap();
                stop.store(true, Ordering::Relaxed);
                let n = churn.join().unwrap();
                assert_eq!(*a.lock(), 2 * ROUNDS + n);
                assert_eq!(*b.lock(), 2 * ROUNDS + n);
            });
        });
    }

    /// More nodes than the slab's static first chunk (1023): one thread
    /// holds 2 500 locks at once, so nodes come from directory chunks too;
    /// while they are held `try_lock` fails on each from another thread;
    /// then two threads mix `lock` and `try_lock` over them (nodes from
    /// every chunk migrate between threads and locks). Counts are exact.
    #[test]
    fn nodes_beyond_the_first_chunk() {
        let _serial = serial();
        watchdog("many CLH nodes", || {
            const LOCKS: usize = 2_500;
            let locks: Vec<ClhMutex<u64>> = (0..LOCKS).map(|_| ClhMutex::new(0)).collect();
            let mut guards: Vec<_> = locks.iter().map(|l| l.lock()).collect();
            thread::scope(|s| {
                s.spawn(|| {
                    for l in &locks {
                        assert!(l.is_locked());
                        assert!(l.try_lock().is_none());
                    }
                });
            });
            for g in &mut guards {
                **g += 1;
            }
            // Release in an interleaved order (not LIFO).
            let mut guards: Vec<_> = guards.into_iter().map(Some).collect();
            for start in 0..7 {
                for g in guards.iter_mut().skip(start).step_by(7) {
                    drop(g.take());
                }
            }
            let extra: u64 = thread::scope(|s| {
                let workers: Vec<_> = (0..2)
                    .map(|t| {
                        let locks = &locks;
                        s.spawn(move || {
                            let mut wins = 0u64;
                            for round in 0..4 {
                                for (i, l) in locks.iter().enumerate() {
                                    if (i + round + t) % 2 == 0 {
                                        *l.lock() += 1;
                                    } else if let Some(mut g) = l.try_lock() {
                                        *g += 1;
                                        wins += 1;
                                    }
                                }
                            }
                            wins
                        })
                    })
                    .collect();
                workers.into_iter().map(|w| w.join().unwrap()).sum()
            });
            let total: u64 = locks
                .iter()
                .map(|l| {
                    assert!(!l.is_locked());
                    *l.try_lock().expect("free lock")
                })
                .sum();
            // Each thread locks half of the locks in each of 4 rounds.
            assert_eq!(total, LOCKS as u64 + 2 * 4 * (LOCKS as u64 / 2) + extra);
        });
    }

    /// The ABA interleaving of the old `try_lock`, forced.
    ///
    /// The `try_lock`ing thread T loops `try_lock`/`unlock` on a free lock.
    /// Each round, the controller (this thread) sends T a signal whose
    /// handler parks T at whatever instruction it was on. If the lock is free
    /// at that point, the controller then acquires, releases and acquires
    /// it again: the first acquisition enqueues behind the released tail
    /// node X, its release adopts X, and the second acquisition takes X
    /// (the top of the thread's node stack) and enqueues it again, so
    /// `tail` once more names X, now locked. The controller lets T go and
    /// holds the lock until T has finished two more calls. If T was parked
    /// between its load of `tail` (which saw X released) and its CAS, a CAS
    /// on the node address succeeds behind the holder and `try_lock` waits
    /// for it: no progress for a second while the holder sleeps. With a
    /// working lock T's calls just fail while the controller holds.
    ///
    /// Before the fix this failed within the first few dozen rounds (the
    /// window, which includes taking a node from the thread's pool, is a
    /// sizable part of an iteration of T's loop).
    #[cfg(target_os = "linux")]
    #[test]
    fn try_lock_after_aba_does_not_wait() {
        use std::sync::atomic::AtomicU64;

        static PARKED: AtomicBool = AtomicBool::new(false);
        static GO: AtomicBool = AtomicBool::new(false);

        /// Parks the interrupted thread until `GO` (or 200 ms, so that a
        /// thread parked while holding the lock cannot block the controller
        /// for long); `PARKED` is set meanwhile. Only atomics and
        /// `clock_gettime`: async-signal-safe.
        extern "C" fn park(_: libc::c_int) {
            let start = Instant::now();
            PARKED.store(true, Ordering::SeqCst);
            while !GO.load(Ordering::SeqCst) && start.elapsed() < Duration::from_millis(200) {
                std::hint::spin_loop();
            }
            PARKED.store(false, Ordering::SeqCst);
        }

        /// Waits (at most [`super::HANG`]) until `PARKED` reads `parked`.
        fn wait_parked(parked: bool) {
            let wait = Instant::now();
            while PARKED.load(Ordering::SeqCst) != parked {
                assert!(wait.elapsed() < super::HANG, "signal handler stuck");
                thread::yield_now();
            }
        }

        let _serial = serial();
        // SAFETY: installs a handler that only touches atomics and reads
        // the monotonic clock; `sigaction` is zeroed (empty mask) first.
        let old = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = park as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, &mut old), 0);
            old
        };

        let m = Arc::new(ClhMutex::new(0u64));
        let calls = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let try_locker = {
            let (m, calls, stop) = (m.clone(), calls.clone(), stop.clone());
            thread::spawn(move || {
                let mut wins = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if let Some(mut g) = m.try_lock() {
                        *g += 1;
                        wins += 1;
                    }
                    calls.fetch_add(1, Ordering::SeqCst);
                }
                wins
            })
        };
        let target = {
            use std::os::unix::thread::JoinHandleExt;
            try_locker.as_pthread_t()
        };

        let start = Instant::now();
        let (mut rounds, mut setups, mut stuck) = (0u32, 0u32, None);
        let mut mine = 0u64;
        while rounds < 20_000 && start.elapsed() < Duration::from_secs(2) {
            rounds += 1;
            // Let T make two calls on the free lock, so that it is somewhere
            // in its loop with a released tail (on a busy machine T may
            // otherwise run only while we hold the lock or it is parked).
            let free_since = calls.load(Ordering::SeqCst);
            let wait = Instant::now();
            while calls.load(Ordering::SeqCst) < free_since + 2 {
                assert!(
                    wait.elapsed() < super::HANG,
                    "try_lock stuck on a free lock"
                );
                thread::yield_now();
            }
            GO.store(false, Ordering::SeqCst);
            // SAFETY: `target` is a live thread (joined only below).
            assert_eq!(unsafe { libc::pthread_kill(target, libc::SIGUSR1) }, 0);
            wait_parked(true);
            // T is parked. If it holds the lock, this round cannot set up
            // the interleaving: let it go.
            if m.is_locked() {
                GO.store(true, Ordering::SeqCst);
                wait_parked(false);
                continue;
            }
            // Enqueue behind the released tail node, adopt it, enqueue it
            // again: `tail` names the same node as when T may have read it.
            *m.lock() += 1;
            let mut g = m.lock();
            *g += 1;
            mine += 2;
            setups += 1;
            let before = calls.load(Ordering::SeqCst);
            GO.store(true, Ordering::SeqCst);
            // While we hold, each of T's calls must return (fail) at once.
            let held_since = Instant::now();
            while calls.load(Ordering::SeqCst) < before + 2 {
                if held_since.elapsed() > Duration::from_secs(1) {
                    stuck = Some(rounds);
                    break;
                }
                thread::yield_now();
            }
            drop(g);
            wait_parked(false);
            if stuck.is_some() {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let wins = try_locker.join().unwrap();
        // SAFETY: restores the previous disposition.
        unsafe {
            assert_eq!(
                libc::sigaction(libc::SIGUSR1, &old, std::ptr::null_mut()),
                0
            )
        };
        assert_eq!(*m.lock(), mine + wins);
        assert!(
            setups > 0 && wins > 0,
            "the interleaving was never set up ({setups} rounds, {wins} wins)"
        );
        if let Some(round) = stuck {
            panic!(
                "try_lock waited for the holder after the ABA interleaving \
                 (round {round} of {rounds}, {setups} set up)"
            );
        }
    }
}

#[cfg(not(loom))]
/// The guards of the queue locks are `Sync` when `T: Sync` (as std's and
/// parking_lot's are) and, as before, not `Send`.
mod guard_sync {
    use super::serial;
    use std::thread;
    use symmetry_locks::lock_api::{self, RawMutex};
    use symmetry_locks::{Clh, GraunkeThakkar, Mcs};

    fn assert_sync<T: Sync>() {}

    /// Compiles only if `T` is not `Send` (two impls apply to a `Send` type
    /// and the call is ambiguous).
    fn assert_not_send<T>() {
        trait AmbiguousIfSend<A> {
            fn check() {}
        }
        impl<T: ?Sized> AmbiguousIfSend<()> for T {}
        impl<T: ?Sized + Send> AmbiguousIfSend<u8> for T {}
        <T as AmbiguousIfSend<_>>::check();
    }

    #[test]
    fn queue_lock_guards_are_sync_and_still_not_send() {
        assert_sync::<lock_api::MutexGuard<'static, Mcs, u64>>();
        assert_sync::<lock_api::MutexGuard<'static, Clh, u64>>();
        assert_sync::<lock_api::MutexGuard<'static, GraunkeThakkar, u64>>();
        assert_not_send::<lock_api::MutexGuard<'static, Mcs, u64>>();
        assert_not_send::<lock_api::MutexGuard<'static, Clh, u64>>();
        assert_not_send::<lock_api::MutexGuard<'static, GraunkeThakkar, u64>>();
    }

    /// Shares `&MutexGuard` with scoped threads that read the data.
    fn share_guard<R>()
    where
        R: RawMutex + Send + Sync,
        R::Guard: Sync,
    {
        let m = lock_api::Mutex::<R, u64>::new(0);
        let mut g = m.lock();
        *g = 21;
        let g = &g;
        let sum: u64 = thread::scope(|s| {
            let readers: Vec<_> = (0..2).map(|_| s.spawn(move || **g)).collect();
            readers.into_iter().map(|r| r.join().unwrap()).sum()
        });
        assert_eq!(sum, 42);
        assert!(m.is_locked());
        assert!(m.try_lock().is_none());
    }

    #[test]
    fn shared_guard_readable_from_other_threads() {
        let _serial = serial();
        share_guard::<Mcs>();
        share_guard::<Clh>();
        share_guard::<GraunkeThakkar>();
    }
}

#[cfg(not(loom))]
/// A panic while holding the `std` baseline poisons the inner
/// `std::sync::Mutex`; the lock must still read as free and be usable.
mod std_poison {
    use super::serial;
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::Arc;
    use std::thread;
    use symmetry_locks::StdMutex;
    use symmetry_locks::lock_api::Mutex;

    fn check_free(m: &Mutex<StdMutex, u64>, expect: u64) {
        assert!(
            !m.is_locked(),
            "a poisoned, free std baseline reads as locked"
        );
        let g = m.try_lock().expect("try_lock on the free (poisoned) lock");
        assert_eq!(*g, expect);
        drop(g);
        assert!(!m.is_locked());
        let mut g = m.lock();
        assert!(m.is_locked());
        *g += 1;
        drop(g);
        assert!(!m.is_locked());
    }

    #[test]
    fn poisoned_std_baseline_is_free() {
        let _serial = serial();
        let m = Arc::new(Mutex::<StdMutex, u64>::new(0));
        let panicked = {
            let m = m.clone();
            thread::spawn(move || {
                let mut g = m.lock();
                *g = 1;
                panic!("holder panics (expected by the test)");
            })
            .join()
        };
        assert!(panicked.is_err());
        check_free(&m, 1);

        // Again on this thread, through catch_unwind.
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut g = m.lock();
            *g += 1;
            panic!("holder panics (expected by the test)");
        }));
        assert!(r.is_err());
        check_free(&m, 3);

        // Held by another thread: is_locked and try_lock agree.
        let g = m.lock();
        thread::scope(|s| {
            s.spawn(|| {
                assert!(m.is_locked());
                assert!(m.try_lock().is_none());
            });
        });
        drop(g);
        check_free(&m, 4);
    }
}

/// The CLH ABA case under loom, which explores every interleaving (up to
/// three preemptions) and so reaches it deterministically: a `try_lock`
/// preempted between its load of `tail` (a released node X) and its CAS
/// while the main thread acquires (enqueuing behind X), releases (adopting
/// X) and acquires again (enqueuing X again, locked). The main thread then
/// joins the `try_lock`er *while holding*: a `try_lock` that waited for the
/// holder spins forever and loom fails the model (branch limit), as the old
/// address-only CAS did.
///
/// Run with `RUSTFLAGS="--cfg loom" cargo test --release -p symmetry-locks
/// --test defects`.
#[cfg(loom)]
mod loom_clh {
    use loom::sync::Arc;
    use loom::thread;
    use symmetry_locks::Clh;
    use symmetry_locks::lock_api::RawMutex;

    #[test]
    fn try_lock_never_waits_for_a_reenqueued_node() {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(3);
        }
        builder.check(|| {
            let lock = Arc::new(Clh::new());
            // A released node, X, in `tail`.
            let g = lock.lock();
            // SAFETY: held with `g`.
            unsafe { lock.unlock(g) };
            let try_locker = {
                let lock = lock.clone();
                thread::spawn(move || match lock.try_lock() {
                    Some(g) => {
                        // SAFETY: held with `g`.
                        unsafe { lock.unlock(g) };
                        true
                    }
                    None => false,
                })
            };
            // Enqueue behind X, adopt X, enqueue X again, and hold.
            let g = lock.lock();
            // SAFETY: held with `g`.
            unsafe { lock.unlock(g) };
            let g = lock.lock();
            let _won = try_locker.join().unwrap();
            // SAFETY: held with `g`.
            unsafe { lock.unlock(g) };
            assert!(!lock.is_locked());
        });
    }
}
