//! The generic correctness suite (SPEC §4, §5: "one generic correctness
//! test, instantiated for every lock by the registry macro").
//!
//! [`symmetry_locks::for_each_lock!`] expands `lock_suites!` once with every
//! registered lock; each entry becomes a module `lock::<name>` whose tests
//! call the generic functions of [`suite`] with the entry's type. The
//! registry is the only source of types and promises (`fifo`); the list of
//! module names below only spells each name as an identifier, is zipped with
//! the registry in lockstep (a length mismatch is a compile error), and each
//! module checks that its identifier spells its registry name.
//!
//! Every test takes [`serial`] first: the stress tests oversubscribe the
//! cores on purpose, and two of them running side by side (or one beside the
//! arrival-order test, which relies on an otherwise idle machine) would
//! measure the scheduler rather than the lock.
#![cfg(not(loom))]

mod common;

/// Serializes the tests of this binary (see the crate docs).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The generic tests, written once against `lock_api::RawMutex`.
mod suite {
    use std::hint::black_box;
    use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
    use std::sync::{Barrier, mpsc};
    use std::thread;
    use std::time::{Duration, Instant};

    use symmetry_locks::lock_api::{self, RawMutex};
    use symmetry_locks::platform::rng::SplitMix64;
    use symmetry_locks::{AtomicInt, AtomicIntDyn, GuardWord};

    use crate::common::Guarded;

    /// Acquisitions per thread while threads <= cores, and for locks
    /// without FIFO hand-over at any thread count.
    const PER_THREAD: usize = 20_000;
    /// Total acquisitions over all threads for a FIFO lock when the cores
    /// are oversubscribed. Once the queue forms, the next owner is usually
    /// descheduled, so each hand-over waits for a time slice (about 5 ms on
    /// a 2-core VM: 800 hand-overs can take 4 s); the total, not the
    /// per-thread count, is what bounds the test's run time.
    const OVERSUBSCRIBED_FIFO_TOTAL: usize = 800;
    /// How long a thread may take to report back before the test calls it
    /// blocked (only reached when a lock is broken; never a timing assertion
    /// on a working lock).
    const HANG: Duration = Duration::from_secs(60);
    /// Wall-clock bound on the work of one stress run. The counts above are
    /// sized to finish far inside it on an idle machine; when other
    /// processes take the cores, a FIFO lock hands over once per time slice
    /// and the run stops early instead of taking minutes. The checks stay
    /// exact: each thread counts what it did. Nothing asserts on time.
    const RUN_BUDGET: Duration = Duration::from_millis(750);

    /// The end of one stress run's [`RUN_BUDGET`].
    #[derive(Clone, Copy)]
    struct Budget(Instant);

    impl Budget {
        fn start() -> Self {
            Self(Instant::now() + RUN_BUDGET)
        }

        /// `0..n`, cut short (after at least one round) once the budget
        /// is spent; the clock is read every 16 rounds.
        fn rounds(self, n: usize) -> impl Iterator<Item = usize> {
            (0..n).take_while(move |&i| i == 0 || i % 16 != 0 || Instant::now() < self.0)
        }

        /// Runs `f` for each of [`Budget::rounds`]`(n)`; returns how often.
        fn run(self, n: usize, mut f: impl FnMut()) -> usize {
            let mut done = 0;
            for _ in self.rounds(n) {
                f();
                done += 1;
            }
            done
        }
    }

    /// Cores of this machine.
    pub(crate) fn cores() -> usize {
        thread::available_parallelism().map_or(2, |n| n.get())
    }

    /// 1, 2, cores and 4 x cores threads (deduplicated, ascending).
    fn thread_counts() -> Vec<usize> {
        let c = cores();
        let mut v = vec![1, 2, c, 4 * c];
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Acquisitions per thread for `threads` threads.
    fn per_thread(threads: usize, fifo: bool) -> usize {
        if threads > cores() && fifo {
            (OVERSUBSCRIBED_FIFO_TOTAL / threads).max(1)
        } else {
            PER_THREAD
        }
    }

    /// A Fisher-Yates shuffle of `v`, drawn from `rng`.
    fn shuffle<T>(rng: &mut SplitMix64, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, rng.below(i as u64 + 1) as usize);
        }
    }

    /// (1) Mutual exclusion: a non-atomic counter incremented under the lock
    /// by 1, 2, cores and 4 x cores threads ends exactly at the number of
    /// acquisitions, and no two threads are ever inside at once. A last run
    /// mixes `try_lock` with `lock`.
    pub(crate) fn mutual_exclusion<R: RawMutex + Sync>(name: &str, fifo: bool) {
        for threads in thread_counts() {
            let n = per_thread(threads, fifo);
            let mut g = Guarded::<R>::new();
            let start = Barrier::new(threads);
            let done = AtomicUsize::new(0);
            let budget = Budget::start();
            thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| {
                        start.wait();
                        let mine = budget.run(n, || g.locked_bump(0));
                        done.fetch_add(mine, Ordering::Relaxed);
                    });
                }
            });
            assert_eq!(
                g.count(name),
                done.into_inner() as u64,
                "{name}: lost updates with {threads} threads"
            );
        }

        // Mixed lock / try_lock at `cores` threads.
        let threads = cores().max(2);
        let n = per_thread(threads, fifo) / 2;
        let mut g = Guarded::<R>::new();
        let successes = AtomicUsize::new(0);
        let start = Barrier::new(threads);
        let budget = Budget::start();
        thread::scope(|s| {
            for t in 0..threads {
                let (g, successes, start) = (&g, &successes, &start);
                s.spawn(move || {
                    start.wait();
                    let mut mine = 0;
                    for i in budget.rounds(n) {
                        if (i + t) % 2 == 0 {
                            g.locked_bump(0);
                            mine += 1;
                        } else if g.try_bump() {
                            mine += 1;
                        }
                    }
                    successes.fetch_add(mine, Ordering::Relaxed);
                });
            }
        });
        assert_eq!(
            g.count(name),
            successes.into_inner() as u64,
            "{name}: lost updates with lock and try_lock mixed"
        );
    }

    /// Runs `f` on another thread and returns its result, or `None` if it
    /// did not come back within [`HANG`] (the thread is left running; the
    /// caller must release whatever it blocks on).
    fn elsewhere<'s, 'e, T: Send + 's>(
        s: &'s thread::Scope<'s, 'e>,
        f: impl FnOnce() -> T + Send + 's,
    ) -> Option<T> {
        let (tx, rx) = mpsc::channel();
        s.spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(HANG).ok()
    }

    /// (2) `try_lock` succeeds on a free lock, fails without blocking while
    /// the lock is held (by this thread, by another thread, with a waiter
    /// queued), succeeds again after unlock; `is_locked` follows the state.
    pub(crate) fn try_lock_semantics<R: RawMutex + Sync>(name: &str) {
        let lock = R::INIT;
        assert!(!lock.is_locked(), "{name}: a new lock is locked");
        let guard = lock
            .try_lock()
            .unwrap_or_else(|| panic!("{name}: try_lock failed on a free lock"));
        assert!(lock.is_locked(), "{name}: is_locked false while held");
        assert!(
            lock.try_lock().is_none(),
            "{name}: try_lock succeeded while held by this thread"
        );

        // Held by this thread; try from another one. A try_lock that
        // succeeded there is released at once (the test has failed anyway).
        let mut guard = Some(guard);
        let other = thread::scope(|s| {
            let got = elsewhere(s, || {
                let g = lock.try_lock();
                let ok = g.is_some();
                if let Some(g) = g {
                    // SAFETY: just acquired by this thread.
                    unsafe { lock.unlock(g) };
                }
                ok
            });
            if got.is_none() {
                // SAFETY: the main thread holds it with `guard`; releasing
                // lets the blocked try_lock return so the scope can end.
                unsafe { lock.unlock(guard.take().expect("held")) };
            }
            got
        });
        match other {
            Some(false) => {}
            Some(true) => panic!("{name}: try_lock on another thread succeeded while held"),
            None => panic!("{name}: try_lock on another thread blocked"),
        }
        // SAFETY: held with `guard`.
        unsafe { lock.unlock(guard.take().expect("held")) };
        assert!(!lock.is_locked(), "{name}: is_locked true after unlock");
        let guard = lock
            .try_lock()
            .unwrap_or_else(|| panic!("{name}: try_lock failed after unlock"));
        // SAFETY: held with `guard`.
        unsafe { lock.unlock(guard) };

        // Held by another thread.
        thread::scope(|s| {
            let (locked_tx, locked_rx) = mpsc::channel();
            let (go_tx, go_rx) = mpsc::channel::<()>();
            let lock = &lock;
            s.spawn(move || {
                let g = lock.lock();
                locked_tx.send(()).unwrap();
                let _ = go_rx.recv();
                // SAFETY: acquired above on this thread.
                unsafe { lock.unlock(g) };
            });
            locked_rx
                .recv_timeout(HANG)
                .unwrap_or_else(|_| panic!("{name}: lock on a free lock blocked"));
            assert!(
                lock.is_locked(),
                "{name}: is_locked false while another thread holds it"
            );
            let mut stolen = 0;
            for _ in 0..100 {
                if let Some(g) = lock.try_lock() {
                    stolen += 1;
                    // SAFETY: just acquired.
                    unsafe { lock.unlock(g) };
                }
            }
            go_tx.send(()).unwrap();
            assert_eq!(
                stolen, 0,
                "{name}: try_lock succeeded while another thread held the lock"
            );
        });
        assert!(
            !lock.is_locked(),
            "{name}: is_locked true after the other thread released"
        );

        // Held, with a waiter queued behind the holder.
        let guard = lock.lock();
        let started = AtomicBool::new(false);
        thread::scope(|s| {
            s.spawn(|| {
                started.store(true, Ordering::SeqCst);
                let g = lock.lock();
                // SAFETY: acquired above on this thread.
                unsafe { lock.unlock(g) };
            });
            while !started.load(Ordering::SeqCst) {
                thread::yield_now();
            }
            thread::sleep(Duration::from_millis(5));
            let stolen = lock.try_lock().map(|g| {
                // SAFETY: just acquired.
                unsafe { lock.unlock(g) };
            });
            assert!(
                lock.is_locked(),
                "{name}: is_locked false with a holder and a waiter"
            );
            // SAFETY: held with `guard` (released before asserting so a
            // failure cannot leave the waiter stuck).
            unsafe { lock.unlock(guard) };
            assert!(
                stolen.is_none(),
                "{name}: try_lock succeeded past a holder and a waiter"
            );
        });
        assert!(
            !lock.is_locked(),
            "{name}: is_locked true after holder and waiter released"
        );

        // Alternating lock and try_lock on one thread reuses queue nodes.
        for i in 0..1_000 {
            let g = if i % 2 == 0 {
                lock.lock()
            } else {
                lock.try_lock()
                    .unwrap_or_else(|| panic!("{name}: try_lock failed on a free lock (round {i})"))
            };
            assert!(lock.is_locked());
            // SAFETY: held with `g`.
            unsafe { lock.unlock(g) };
            assert!(!lock.is_locked());
        }
    }

    /// (3) Arrival order. The main thread holds the lock; waiters start one
    /// at a time, each given time to enqueue before the next starts (the
    /// queue of a ticket or list lock is not observable from outside, so
    /// this is "started, then a pause", which [`crate::serial`] keeps
    /// reliable). For a FIFO lock the waiters must enter in arrival order;
    /// for the others, each must enter exactly once. Because "arrival" is
    /// only inferred from the pause, a wrong order is retried with longer
    /// pauses: a starved or reordered waiter in a FIFO lock fails all of
    /// them, a waiter preempted before its enqueue by a busy machine does
    /// not.
    pub(crate) fn arrival_order<R: RawMutex + Sync>(name: &str, fifo: bool) {
        const WAITERS: usize = 4;
        let expected: Vec<usize> = (0..WAITERS).collect();
        let mut observed = Vec::new();
        for pause_ms in [40, 120, 360] {
            let m = lock_api::Mutex::<R, Vec<usize>>::new(Vec::new());
            let started = AtomicUsize::new(0);
            thread::scope(|s| {
                let held = m.lock();
                for k in 0..WAITERS {
                    let (m, started) = (&m, &started);
                    s.spawn(move || {
                        started.fetch_add(1, Ordering::SeqCst);
                        m.lock().push(k);
                    });
                    while started.load(Ordering::SeqCst) <= k {
                        thread::yield_now();
                    }
                    if fifo {
                        thread::sleep(Duration::from_millis(pause_ms));
                    }
                }
                let locked = m.is_locked();
                drop(held);
                assert!(locked, "{name}: is_locked false while held with waiters");
            });
            let mut order = m.into_inner();
            if !fifo {
                order.sort_unstable();
                assert_eq!(order, expected, "{name}: a waiter was lost or served twice");
                return;
            }
            if order == expected {
                return;
            }
            observed.push(order);
        }
        panic!("{name}: waiters not served in arrival order; orders seen: {observed:?}");
    }

    /// (4a) Non-LIFO release: lock A, lock B, unlock A, unlock B, on one
    /// thread, then while a second thread contends on A and B in every
    /// pattern (each lock alone, both nested LIFO, both non-LIFO).
    pub(crate) fn non_lifo_release<R: RawMutex + Sync>(name: &str) {
        const ROUNDS: usize = 5_000;
        let mut a = Guarded::<R>::new();
        let mut b = Guarded::<R>::new();
        let overlapping = |a: &Guarded<R>, b: &Guarded<R>| {
            let ga = a.lock.lock();
            let gb = b.lock.lock();
            // SAFETY: both held.
            unsafe {
                a.bump(0);
                b.bump(0);
                a.lock.unlock(ga);
            }
            // A is free again while B is still held.
            // SAFETY: B held with `gb`.
            unsafe {
                b.bump(0);
                b.lock.unlock(gb);
            }
        };
        for _ in 0..ROUNDS {
            overlapping(&a, &b);
        }
        assert_eq!(
            a.count(name),
            ROUNDS as u64,
            "{name}: lock A, single thread"
        );
        assert_eq!(
            b.count(name),
            2 * ROUNDS as u64,
            "{name}: lock B, single thread"
        );

        // Each thread returns how many times it bumped A and B.
        let mut a = Guarded::<R>::new();
        let mut b = Guarded::<R>::new();
        let budget = Budget::start();
        let (expect_a, expect_b) = thread::scope(|s| {
            let (a, b) = (&a, &b);
            let first = s.spawn(move || {
                let rounds = budget.run(ROUNDS, || overlapping(a, b));
                (rounds, 2 * rounds)
            });
            let second = s.spawn(move || {
                let (mut na, mut nb) = (0, 0);
                for i in budget.rounds(ROUNDS) {
                    match i % 4 {
                        0 => {
                            a.locked_bump(0);
                            na += 1;
                        }
                        1 => {
                            b.locked_bump(0);
                            nb += 1;
                        }
                        2 => {
                            // Nested, LIFO release (same A-then-B order as
                            // the other thread: no deadlock).
                            let ga = a.lock.lock();
                            let gb = b.lock.lock();
                            // SAFETY: both held.
                            unsafe {
                                a.bump(0);
                                b.bump(0);
                                b.lock.unlock(gb);
                                a.lock.unlock(ga);
                            }
                            na += 1;
                            nb += 1;
                        }
                        _ => {
                            overlapping(a, b);
                            na += 1;
                            nb += 2;
                        }
                    }
                }
                (na, nb)
            });
            let (a1, b1) = first.join().unwrap();
            let (a2, b2) = second.join().unwrap();
            (a1 + a2, b1 + b2)
        });
        assert_eq!(a.count(name), expect_a as u64, "{name}: lock A, contended");
        assert_eq!(b.count(name), expect_b as u64, "{name}: lock B, contended");
    }

    /// (4b) Many locks at once: two threads each take 20 locks of the same
    /// type in index order (so they cannot deadlock) and release them in a
    /// random order, many times.
    pub(crate) fn many_held_shuffled_release<R: RawMutex + Sync>(name: &str) {
        const LOCKS: usize = 20;
        const ROUNDS: usize = 300;
        const THREADS: usize = 2;
        let mut locks: Vec<Guarded<R>> = (0..LOCKS).map(|_| Guarded::new()).collect();
        let done = AtomicUsize::new(0);
        let budget = Budget::start();
        thread::scope(|s| {
            for t in 0..THREADS {
                let (locks, done) = (&locks, &done);
                s.spawn(move || {
                    let mut rng = SplitMix64::new(t as u64 + 1);
                    let mut order: Vec<usize> = (0..LOCKS).collect();
                    for _ in budget.rounds(ROUNDS) {
                        done.fetch_add(1, Ordering::Relaxed);
                        let mut guards: Vec<Option<R::Guard>> =
                            locks.iter().map(|l| Some(l.lock.lock())).collect();
                        for l in locks {
                            // SAFETY: all LOCKS are held.
                            unsafe { l.bump(0) };
                        }
                        shuffle(&mut rng, &mut order);
                        for &i in &order {
                            let g = guards[i].take().expect("released twice");
                            // SAFETY: lock i is held with `g`.
                            unsafe { locks[i].lock.unlock(g) };
                        }
                    }
                });
            }
        });
        let done = done.into_inner() as u64;
        for (i, l) in locks.iter_mut().enumerate() {
            assert_eq!(l.count(name), done, "{name}: lock {i} of {LOCKS}");
        }
    }

    /// (5a) Many short-lived threads (node pools are recycled at thread
    /// exit), in waves of 2 x cores, each holding two locks nested at once
    /// a few times.
    pub(crate) fn short_lived_threads<R: RawMutex + Sync>(name: &str) {
        const THREADS: usize = 200;
        const TIMES: usize = 5;
        let wave = cores().max(2);
        let mut a = Guarded::<R>::new();
        let mut b = Guarded::<R>::new();
        let mut spawned = 0;
        let budget = Budget::start();
        for _ in budget.rounds(THREADS.div_ceil(wave)) {
            let this_wave = wave.min(THREADS - spawned);
            thread::scope(|s| {
                for t in 0..this_wave {
                    let (a, b) = (&a, &b);
                    s.spawn(move || {
                        for i in 0..TIMES {
                            let ga = a.lock.lock();
                            let gb = b.lock.lock();
                            // SAFETY: both held.
                            unsafe {
                                a.bump(0);
                                b.bump(0);
                            }
                            // Alternate LIFO and non-LIFO release.
                            // SAFETY: held with these guards.
                            unsafe {
                                if (i + t) % 2 == 0 {
                                    b.lock.unlock(gb);
                                    a.lock.unlock(ga);
                                } else {
                                    a.lock.unlock(ga);
                                    b.lock.unlock(gb);
                                }
                            }
                        }
                    });
                }
            });
            spawned += this_wave;
        }
        assert_eq!(a.count(name), (spawned * TIMES) as u64, "{name}: lock A");
        assert_eq!(b.count(name), (spawned * TIMES) as u64, "{name}: lock B");
    }

    /// (5b) Locks dropped after contended use (a CLH lock hands its last
    /// node to the dropping thread), many times over, with the threads
    /// that used each lock gone before it is dropped; the recycled nodes
    /// must keep working on fresh locks.
    pub(crate) fn drop_after_use<R: RawMutex + Sync>(name: &str) {
        const LOCKS: usize = 50;
        const TIMES: usize = 200;
        let budget = Budget::start();
        for round in budget.rounds(LOCKS) {
            let mut g = Box::new(Guarded::<R>::new());
            let done = AtomicUsize::new(0);
            thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        let mine = budget.run(TIMES, || g.locked_bump(0));
                        done.fetch_add(mine, Ordering::Relaxed);
                    });
                }
            });
            // The main thread takes it last on odd rounds, so the lock's
            // last node is sometimes this thread's and sometimes an exited
            // thread's.
            if round % 2 == 1 {
                g.locked_bump(0);
            }
            assert_eq!(
                g.count(name),
                (done.into_inner() + round % 2) as u64,
                "{name}: round {round}"
            );
            drop(g);
        }
    }

    /// (6) `lock_api::Mutex<R, T>`: guard drop unlocks, `try_lock`, and
    /// concurrent increments through guards.
    pub(crate) fn mutex_api<R: RawMutex + Sync>(name: &str, m: lock_api::Mutex<R, u64>) {
        const N: usize = 10_000;
        {
            let mut g = m.lock();
            *g += 1;
            assert!(
                m.is_locked(),
                "{name}: Mutex not locked while a guard lives"
            );
            assert!(
                m.try_lock().is_none(),
                "{name}: Mutex::try_lock succeeded while locked"
            );
        }
        assert!(
            !m.is_locked(),
            "{name}: dropping the MutexGuard did not unlock"
        );
        *m.try_lock()
            .unwrap_or_else(|| panic!("{name}: Mutex::try_lock failed on a free mutex")) += 1;
        assert!(!m.is_locked());
        let threads = cores().max(2);
        let done = AtomicUsize::new(0);
        let budget = Budget::start();
        thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let mine = budget.run(N, || {
                        let mut g = m.lock();
                        *g = black_box(*g) + 1;
                    });
                    done.fetch_add(mine, Ordering::Relaxed);
                });
            }
        });
        assert!(!m.is_locked());
        assert_eq!(
            m.into_inner(),
            2 + done.into_inner() as u64,
            "{name}: lost updates through Mutex"
        );
    }

    /// (7) `AtomicInt<R>` (inlined lock) and `AtomicIntDyn` (lock through
    /// `dyn DynLock`): concurrent `fetch_add` totals, and each previous
    /// value is returned exactly once.
    pub(crate) fn atomic_int<R>(name: &str)
    where
        R: RawMutex + Send + Sync + 'static,
        R::Guard: GuardWord,
    {
        const N: usize = 5_000;
        let threads = cores().max(2);

        let int = AtomicInt::<R>::new(0);
        let seen: Vec<AtomicBool> = (0..threads * N).map(|_| AtomicBool::new(false)).collect();
        let done = AtomicUsize::new(0);
        let budget = Budget::start();
        thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for _ in budget.rounds(N) {
                        done.fetch_add(1, Ordering::Relaxed);
                        let old = int.fetch_add(1);
                        assert!(
                            !seen[old as usize].swap(true, Ordering::Relaxed),
                            "{name}: value {old} twice"
                        );
                    }
                });
            }
        });
        assert_eq!(
            int.get(),
            done.into_inner() as i64,
            "{name}: AtomicInt total"
        );
        int.set(-3);
        assert_eq!(int.fetch_add(5), -3);
        assert_eq!(int.update(|v| *v), 2);

        let dyn_int = AtomicIntDyn::new(Box::new(R::INIT), 0);
        let expected = AtomicI64::new(0);
        let budget = Budget::start();
        thread::scope(|s| {
            for t in 0..threads {
                let (dyn_int, expected) = (&dyn_int, &expected);
                s.spawn(move || {
                    let delta = t as i64 + 1;
                    let rounds = budget.run(N, || {
                        dyn_int.fetch_add(delta);
                    });
                    expected.fetch_add(rounds as i64 * delta, Ordering::Relaxed);
                });
            }
        });
        let expected = expected.into_inner();
        assert_eq!(dyn_int.get(), expected, "{name}: AtomicIntDyn total");
    }
}

/// Expands to one module per registered lock; see the crate docs.
macro_rules! lock_suites {
    ($($name:literal => $ty:ty, kind = $kind:ident, fifo = $fifo:literal;)*) => {
        lock_suites! {
            @zip [
                tas ttas backoff backoff_persistent ticket ticket_proportional anderson
                graunke_thakkar mcs clh tas_np mcs_np handshake smart_q native_np mcs_tp
                std parking_lot pthread pthread_adaptive
            ]
            $($name => $ty, $kind, $fifo;)*
        }
    };
    (@zip [$($module:ident)*] $($name:literal => $ty:ty, $kind:ident, $fifo:literal;)*) => {
        /// Registry names that have a generated module, in registry order.
        const COVERED: &[&str] = &[$($name),*];

        /// One module per registered lock (nested, so that the module
        /// named `std` shadows nothing at the crate root).
        mod lock {
            $(
                mod $module {
                    use crate::suite;

                    type L = $ty;
                    const NAME: &str = $name;
                    const FIFO: bool = $fifo;

                    #[test]
                    fn registry_entry() {
                        assert_eq!(
                            stringify!($module),
                            NAME.replace('-', "_"),
                            "module list out of step with the registry"
                        );
                        let info = symmetry_locks::registry::find(NAME)
                            .expect("name not in registry::ALL");
                        assert_eq!(info.fifo, FIFO);
                        assert_eq!(info.kind, symmetry_locks::LockKind::$kind);
                        assert!(
                            !FIFO
                                || matches!(
                                    info.kind,
                                    symmetry_locks::LockKind::Queue
                                        | symmetry_locks::LockKind::PreemptSafe
                                )
                        );
                    }

                    #[test]
                    fn mutual_exclusion() {
                        let _serial = crate::serial();
                        suite::mutual_exclusion::<L>(NAME, FIFO);
                    }

                    #[test]
                    fn try_lock_semantics() {
                        let _serial = crate::serial();
                        suite::try_lock_semantics::<L>(NAME);
                    }

                    #[test]
                    fn arrival_order() {
                        let _serial = crate::serial();
                        suite::arrival_order::<L>(NAME, FIFO);
                    }

                    #[test]
                    fn non_lifo_release() {
                        let _serial = crate::serial();
                        suite::non_lifo_release::<L>(NAME);
                    }

                    #[test]
                    fn many_held_shuffled_release() {
                        let _serial = crate::serial();
                        suite::many_held_shuffled_release::<L>(NAME);
                    }

                    #[test]
                    fn short_lived_threads() {
                        let _serial = crate::serial();
                        suite::short_lived_threads::<L>(NAME);
                    }

                    #[test]
                    fn drop_after_use() {
                        let _serial = crate::serial();
                        suite::drop_after_use::<L>(NAME);
                    }

                    #[test]
                    fn mutex_api() {
                        let _serial = crate::serial();
                        suite::mutex_api::<L>(NAME, symmetry_locks::lock_api::Mutex::new(0));
                    }

                    #[test]
                    fn atomic_int() {
                        let _serial = crate::serial();
                        suite::atomic_int::<L>(NAME);
                    }
                }
            )*
        }
    };
}

symmetry_locks::for_each_lock!(lock_suites);

#[test]
fn every_registered_lock_is_covered() {
    let registered: Vec<&str> = symmetry_locks::registry::ALL
        .iter()
        .map(|l| l.name)
        .collect();
    assert_eq!(COVERED, registered.as_slice());
    let mut unique = registered.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), registered.len(), "duplicate registry names");
}

/// The crate's `Mutex` aliases are the registry's types behind
/// `lock_api::Mutex`.
#[test]
fn mutex_aliases() {
    let _serial = serial();
    use symmetry_locks::*;
    suite::mutex_api("TasMutex", TasMutex::<u64>::new(0));
    suite::mutex_api("TtasMutex", TtasMutex::<u64>::new(0));
    suite::mutex_api("BackoffMutex", BackoffMutex::<u64>::new(0));
    suite::mutex_api(
        "BackoffPersistentMutex",
        BackoffPersistentMutex::<u64>::new(0),
    );
    suite::mutex_api("TicketMutex", TicketMutex::<u64>::new(0));
    suite::mutex_api(
        "TicketProportionalMutex",
        TicketProportionalMutex::<u64>::new(0),
    );
    suite::mutex_api("AndersonMutex", AndersonMutex::<u64>::new(0));
    suite::mutex_api("GraunkeThakkarMutex", GraunkeThakkarMutex::<u64>::new(0));
    suite::mutex_api("McsMutex", McsMutex::<u64>::new(0));
    suite::mutex_api("ClhMutex", ClhMutex::<u64>::new(0));
}

/// Anderson past its `P` slots: more contenders than slots share slots but
/// must stay mutually exclusive and FIFO (see the `anderson` module docs).
#[test]
fn anderson_more_contenders_than_slots() {
    let _serial = serial();
    suite::mutual_exclusion::<symmetry_locks::Anderson<1>>("anderson<1>", true);
    suite::mutual_exclusion::<symmetry_locks::Anderson<2>>("anderson<2>", true);
    suite::arrival_order::<symmetry_locks::Anderson<2>>("anderson<2>", true);
    suite::non_lifo_release::<symmetry_locks::Anderson<1>>("anderson<1>");
}

/// CLH nodes migrate: the last node of a lock is handed to whichever
/// thread drops it. Drop locks whose last node came from threads that have
/// exited, then keep using the recycled nodes (including a try_lock that
/// reads a recycled tail) from fresh threads.
#[test]
fn clh_drop_and_node_migration() {
    use symmetry_locks::Clh;
    use symmetry_locks::lock_api::RawMutex;
    let _serial = serial();
    for _ in 0..100 {
        let locks: Vec<Clh> = (0..4).map(|_| Clh::new()).collect();
        std::thread::scope(|s| {
            for t in 0..2 {
                let locks = &locks;
                s.spawn(move || {
                    for i in 0..50 {
                        let l = &locks[(i + t) % locks.len()];
                        let g = l.lock();
                        // SAFETY: held with `g`.
                        unsafe { l.unlock(g) };
                    }
                });
            }
        });
        for l in &locks {
            assert!(!l.is_locked());
            let g = l.try_lock().expect("free CLH lock");
            // SAFETY: held with `g`.
            unsafe { l.unlock(g) };
        }
        drop(locks);
        let mut fresh = common::Guarded::<Clh>::new();
        let done = std::thread::scope(|s| {
            let workers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let mut done = 0;
                        for _ in 0..100 {
                            fresh.locked_bump(0);
                            done += 1 + u64::from(fresh.try_bump());
                        }
                        done
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum::<u64>()
        });
        assert_eq!(fresh.count("clh"), done);
    }
}

/// The FIFO locks implement `RawMutexFair`: `unlock_fair` and `bump` work
/// through `lock_api` and keep mutual exclusion.
#[test]
fn fair_unlock_for_fifo_locks() {
    fn check<R: lock_api::RawMutexFair + Send + Sync>() {
        let m = lock_api::Mutex::<R, u64>::new(0);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for i in 0..2_000 {
                        let mut g = m.lock();
                        *g += 1;
                        if i % 2 == 0 {
                            lock_api::MutexGuard::bump(&mut g);
                            *g += 1;
                            lock_api::MutexGuard::unlock_fair(g);
                        }
                    }
                });
            }
        });
        assert_eq!(*m.lock(), 6_000);
    }
    check::<symmetry_locks::Ticket>();
    check::<symmetry_locks::Anderson>();
    check::<symmetry_locks::GraunkeThakkar>();
    check::<symmetry_locks::Mcs>();
    check::<symmetry_locks::Clh>();
}
