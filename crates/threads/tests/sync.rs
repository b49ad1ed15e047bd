//! Tests of the blocking synchronization objects (`symmetry_threads::sync`).
//!
//! None depends on timing: where a test needs a thread to be blocked, it
//! runs on one processor, where a thread that does not yield keeps the
//! processor until it blocks.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use symmetry_locks::{Backoff, Ttas};
use symmetry_threads::sync::{
    AtomicInt, Barrier, Condvar, FixedSpin, Mutex, MutexGuard, NoSpin, SpinMutex, SpinPolicy,
};
use symmetry_threads::{
    IdleQueue, LocalFreelist, LocalReadyq, MultiLock, NotInRuntime, Runtime, SingleLock, Strategy,
    yield_now,
};

// ---------------------------------------------------------------- mutex

/// `threads` user threads each add 1 to a plain counter `iters` times
/// under the mutex, reading and writing it in two steps (and yielding
/// outside the lock now and then, so that holders and waiters interleave).
fn exclusion<S: Strategy, P: SpinPolicy + Default + 'static>(
    procs: usize,
    threads: usize,
    iters: usize,
) {
    let rt: Runtime<S> = Runtime::new(procs).unwrap();
    let h = rt.handle();
    let m: Arc<Mutex<u64, P>> = Arc::new(Mutex::with_policy(0, P::default()));
    let m2 = Arc::clone(&m);
    rt.block_on(move || {
        let kids: Vec<_> = (0..threads)
            .map(|t| {
                let m = Arc::clone(&m2);
                h.spawn(move || {
                    for i in 0..iters {
                        {
                            let mut g = m.lock();
                            let v = std::hint::black_box(*g);
                            if (i + t) % 97 == 0 {
                                // Hold the lock across a switch: waiters
                                // must block, not spin forever.
                                yield_now();
                            }
                            *g = v + 1;
                        }
                        if i % 16 == 0 {
                            yield_now();
                        }
                    }
                })
            })
            .collect();
        for k in kids {
            k.join().unwrap();
        }
    })
    .unwrap();
    assert!(!m.is_locked());
    assert_eq!(*m.lock(), (threads * iters) as u64, "{} P={procs}", S::NAME);
}

#[test]
fn mutex_exclusion_single_lock() {
    for p in [1, 2, 4] {
        exclusion::<SingleLock, FixedSpin>(p, 200, 1000);
    }
}

#[test]
fn mutex_exclusion_local_readyq() {
    for p in [1, 2, 4] {
        exclusion::<LocalReadyq, FixedSpin>(p, 200, 1000);
    }
}

#[test]
fn mutex_exclusion_idle_queue_no_spin() {
    for p in [1, 2, 4] {
        exclusion::<IdleQueue, NoSpin>(p, 200, 1000);
    }
}

#[test]
fn mutex_exclusion_other_strategies() {
    for p in [1, 2] {
        exclusion::<MultiLock, FixedSpin>(p, 50, 500);
        exclusion::<LocalFreelist, FixedSpin<1000>>(p, 50, 500);
    }
}

/// A spin policy that counts what `record` reports.
struct Counting {
    contended: AtomicU32,
    blocked: AtomicU32,
}

impl SpinPolicy for Counting {
    fn spin_limit(&self) -> u32 {
        8
    }
    fn record(&self, _polls: u32, blocked: bool) {
        self.contended.fetch_add(1, Ordering::Relaxed);
        if blocked {
            self.blocked.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One processor: the holder yields with the lock held; each waiter runs
/// until it blocks (it never yields), so the holder runs again only once
/// every waiter has blocked. A spinning lock would hang here.
fn holder_yields<S: Strategy>() {
    const WAITERS: usize = 10;
    let rt: Runtime<S> = Runtime::new(1).unwrap();
    let h = rt.handle();
    let policy = Counting {
        contended: AtomicU32::new(0),
        blocked: AtomicU32::new(0),
    };
    let m = Arc::new(Mutex::with_policy(Vec::new(), policy));
    let arrived = Arc::new(AtomicUsize::new(0));
    let (m2, a2) = (Arc::clone(&m), Arc::clone(&arrived));
    rt.block_on(move || {
        let g = m2.lock();
        let kids: Vec<_> = (0..WAITERS)
            .map(|i| {
                let (m, a) = (Arc::clone(&m2), Arc::clone(&a2));
                h.spawn(move || {
                    a.fetch_add(1, Ordering::Relaxed);
                    m.lock().push(i);
                })
            })
            .collect();
        while a2.load(Ordering::Relaxed) < WAITERS {
            yield_now();
        }
        // Every waiter has run and, not holding the lock, blocked.
        assert!(g.is_empty());
        assert_eq!(m2.spin_policy().blocked.load(Ordering::Relaxed), 0);
        drop(g);
        for k in kids {
            k.join().unwrap();
        }
    })
    .unwrap();
    let v = m.lock();
    assert_eq!(v.len(), WAITERS);
    let p = m.spin_policy();
    assert_eq!(p.blocked.load(Ordering::Relaxed) as usize, WAITERS);
    assert!(p.contended.load(Ordering::Relaxed) as usize >= WAITERS);
}

#[test]
fn mutex_blocks_instead_of_spinning() {
    holder_yields::<SingleLock>();
    holder_yields::<LocalReadyq>();
    holder_yields::<IdleQueue>();
}

/// One processor, fair unlocks: waiters get the mutex in the order they
/// queued.
#[test]
fn mutex_unlock_fair_is_fifo() {
    const WAITERS: usize = 12;
    let rt: Runtime<SingleLock> = Runtime::new(1).unwrap();
    let h = rt.handle();
    let m: Arc<Mutex<Vec<usize>>> = Arc::new(Mutex::new(Vec::new()));
    let arrivals = Arc::new(SpinMutex::<Vec<usize>>::new(Vec::new()));
    let (m2, ar2) = (Arc::clone(&m), Arc::clone(&arrivals));
    rt.block_on(move || {
        let g = m2.lock();
        let kids: Vec<_> = (0..WAITERS)
            .map(|i| {
                let (m, ar) = (Arc::clone(&m2), Arc::clone(&ar2));
                h.spawn(move || {
                    // No switch between this and blocking in `lock`.
                    ar.lock().push(i);
                    let mut g = m.lock();
                    g.push(i);
                    MutexGuard::unlock_fair(g);
                })
            })
            .collect();
        while ar2.lock().len() < WAITERS {
            yield_now();
        }
        MutexGuard::unlock_fair(g);
        for k in kids {
            k.join().unwrap();
        }
    })
    .unwrap();
    assert_eq!(*m.lock(), *arrivals.lock());
}

/// Fair and unfair unlocks mixed, several processors: still exclusive.
#[test]
fn mutex_fair_and_unfair_mixed() {
    let rt: Runtime<LocalReadyq> = Runtime::new(2).unwrap();
    let h = rt.handle();
    let m = Arc::new(Mutex::new(0u64));
    let m2 = Arc::clone(&m);
    rt.block_on(move || {
        let kids: Vec<_> = (0..32)
            .map(|t| {
                let m = Arc::clone(&m2);
                h.spawn(move || {
                    for i in 0..500 {
                        let mut g = m.lock();
                        *g = std::hint::black_box(*g) + 1;
                        if (i + t) % 3 == 0 {
                            MutexGuard::unlock_fair(g);
                        } else {
                            drop(g);
                        }
                        if i % 8 == 0 {
                            yield_now();
                        }
                    }
                })
            })
            .collect();
        kids.into_iter().for_each(|k| k.join().unwrap());
    })
    .unwrap();
    assert_eq!(Arc::try_unwrap(m).unwrap().into_inner(), 32 * 500);
}

#[test]
fn mutex_try_lock() {
    let m = Mutex::<u8>::new(1);
    let g = m.try_lock().unwrap();
    assert!(m.is_locked());
    assert!(m.try_lock().is_none());
    assert_eq!(format!("{m:?}"), "Mutex { data: <locked>, .. }");
    drop(g);
    assert!(!m.is_locked());
    assert_eq!(format!("{m:?}"), "Mutex { data: 1, .. }");
}

/// An OS thread holds the mutex while user threads queue on it; its
/// unlock wakes them from outside the runtime.
#[test]
fn mutex_unlocked_from_os_thread_wakes_user_threads() {
    let rt: Runtime<MultiLock> = Runtime::new(2).unwrap();
    let m = Arc::new(Mutex::new(0u32));
    let arrived = Arc::new(AtomicUsize::new(0));
    let g = m.lock(); // free: fine from outside
    let kids: Vec<_> = (0..20)
        .map(|_| {
            let (m, a) = (Arc::clone(&m), Arc::clone(&arrived));
            rt.spawn(move || {
                a.fetch_add(1, Ordering::Relaxed);
                *m.lock() += 1;
            })
        })
        .collect();
    while arrived.load(Ordering::Relaxed) < 20 {
        std::thread::yield_now();
    }
    assert_eq!(*g, 0);
    drop(g);
    for k in kids {
        k.join().unwrap();
    }
    assert_eq!(*m.lock(), 20);
}

// ------------------------------------------------------------- condvar

struct Bounded {
    q: Mutex<VecDeque<u64>>,
    not_empty: Condvar,
    not_full: Condvar,
    cap: usize,
}

fn producer_consumer<S: Strategy>(procs: usize) {
    const PRODUCERS: u64 = 4;
    const CONSUMERS: u64 = 4;
    const ITEMS: u64 = 2000;
    let rt: Runtime<S> = Runtime::new(procs).unwrap();
    let h = rt.handle();
    let b = Arc::new(Bounded {
        q: Mutex::new(VecDeque::new()),
        not_empty: Condvar::new(),
        not_full: Condvar::new(),
        cap: 4,
    });
    let total = rt
        .block_on(move || {
            let consumers: Vec<_> = (0..CONSUMERS)
                .map(|_| {
                    let b = Arc::clone(&b);
                    h.spawn(move || {
                        let mut sum = 0u64;
                        loop {
                            let mut q = b.not_empty.wait_while(b.q.lock(), |q| q.is_empty());
                            let v = q.pop_front().unwrap();
                            drop(q);
                            b.not_full.notify_one();
                            if v == u64::MAX {
                                return sum;
                            }
                            sum += v;
                        }
                    })
                })
                .collect();
            let put = |b: &Bounded, v: u64| {
                let mut q = b.q.lock();
                while q.len() >= b.cap {
                    q = b.not_full.wait(q);
                }
                q.push_back(v);
                drop(q);
                b.not_empty.notify_one();
            };
            let producers: Vec<_> = (0..PRODUCERS)
                .map(|p| {
                    let b = Arc::clone(&b);
                    h.spawn(move || {
                        for i in 0..ITEMS {
                            put(&b, p * ITEMS + i);
                        }
                    })
                })
                .collect();
            producers.into_iter().for_each(|p| p.join().unwrap());
            for _ in 0..CONSUMERS {
                put(&b, u64::MAX);
            }
            consumers
                .into_iter()
                .map(|c| c.join().unwrap())
                .sum::<u64>()
        })
        .unwrap();
    let n = PRODUCERS * ITEMS;
    assert_eq!(total, n * (n - 1) / 2, "{} P={procs}", S::NAME);
}

#[test]
fn condvar_producer_consumer() {
    for p in [1, 2, 4] {
        producer_consumer::<SingleLock>(p);
        producer_consumer::<LocalReadyq>(p);
    }
    producer_consumer::<IdleQueue>(2);
}

/// One processor: every waiter blocks before the notifier runs again, so
/// `notify_all` wakes all of them, and `notify_one` then finds nobody.
#[test]
fn condvar_notify_all() {
    const WAITERS: usize = 16;
    let rt: Runtime<LocalReadyq> = Runtime::new(1).unwrap();
    let h = rt.handle();
    let pair = Arc::new((Mutex::new((false, 0usize)), Condvar::new()));
    let p2 = Arc::clone(&pair);
    let woken = rt
        .block_on(move || {
            let (m, cv) = &*p2;
            assert!(!cv.notify_one());
            let kids: Vec<_> = (0..WAITERS)
                .map(|_| {
                    let p = Arc::clone(&p2);
                    h.spawn(move || {
                        let (m, cv) = &*p;
                        let mut g = m.lock();
                        g.1 += 1;
                        let mut g = cv.wait_while(g, |s| !s.0);
                        g.1 -= 1;
                    })
                })
                .collect();
            while m.lock().1 < WAITERS {
                yield_now();
            }
            m.lock().0 = true;
            let n = cv.notify_all();
            assert_eq!(cv.notify_all(), 0);
            assert!(!cv.notify_one());
            kids.into_iter().for_each(|k| k.join().unwrap());
            assert_eq!(m.lock().1, 0);
            n
        })
        .unwrap();
    assert_eq!(woken, WAITERS);
}

/// A condvar works with any spin policy of the mutex.
#[test]
fn condvar_with_no_spin_mutex() {
    let rt: Runtime<IdleQueue> = Runtime::new(2).unwrap();
    let h = rt.handle();
    let pair = Arc::new((Mutex::with_policy(0u32, NoSpin::default()), Condvar::new()));
    let p2 = Arc::clone(&pair);
    rt.block_on(move || {
        let kids: Vec<_> = (0..8u32)
            .map(|i| {
                let p = Arc::clone(&p2);
                h.spawn(move || {
                    let (m, cv) = &*p;
                    // Turn taking: thread i goes when the counter is i.
                    let mut g = cv.wait_while(m.lock(), |c| *c != i);
                    *g += 1;
                    drop(g);
                    cv.notify_all();
                })
            })
            .collect();
        kids.into_iter().for_each(|k| k.join().unwrap());
    })
    .unwrap();
    assert_eq!(*pair.0.lock(), 8);
}

// ------------------------------------------------------------- barrier

fn barrier_generations<S: Strategy>(procs: usize, parties: usize, rounds: u64) {
    let rt: Runtime<S> = Runtime::new(procs).unwrap();
    let b = Arc::new(Barrier::new(parties));
    let slots: Arc<Vec<AtomicU32>> = Arc::new((0..parties).map(|_| AtomicU32::new(0)).collect());
    let leaders: Arc<Vec<AtomicU32>> = Arc::new((0..rounds).map(|_| AtomicU32::new(0)).collect());
    let kids: Vec<_> = (0..parties)
        .map(|me| {
            let (b, slots, leaders) = (Arc::clone(&b), Arc::clone(&slots), Arc::clone(&leaders));
            rt.spawn(move || {
                for g in 0..rounds {
                    slots[me].store(g as u32 + 1, Ordering::Relaxed);
                    if me % 3 == 0 {
                        yield_now();
                    }
                    let r = b.wait();
                    assert_eq!(r.generation(), 2 * g);
                    if r.is_leader() {
                        leaders[g as usize].fetch_add(1, Ordering::Relaxed);
                    }
                    // Everyone has written generation g, and no one can
                    // have written g + 1 before the barrier below.
                    for s in slots.iter() {
                        assert_eq!(s.load(Ordering::Relaxed), g as u32 + 1);
                    }
                    assert_eq!(b.wait().generation(), 2 * g + 1);
                }
            })
        })
        .collect();
    for k in kids {
        k.join().unwrap();
    }
    for l in leaders.iter() {
        assert_eq!(l.load(Ordering::Relaxed), 1, "one leader per generation");
    }
}

#[test]
fn barrier_reusable_across_generations() {
    for p in [1, 2, 4] {
        barrier_generations::<SingleLock>(p, 8, 50);
        barrier_generations::<LocalReadyq>(p, 8, 50);
    }
    barrier_generations::<IdleQueue>(2, 5, 30);
    barrier_generations::<MultiLock>(2, 1, 10);
}

// ---------------------------------------------- outside the runtime

fn assert_user_thread_message(e: &NotInRuntime, op: &str) {
    let msg = e.to_string();
    assert!(msg.contains("user thread"), "{msg}");
    assert!(msg.contains(op), "{msg}");
}

fn panic_message(r: std::thread::Result<()>) -> String {
    let p = r.unwrap_err();
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap()
}

#[test]
fn mutex_outside_runtime() {
    let m = Arc::new(Mutex::new(5u32));
    // Free: taking it from a plain OS thread is fine.
    assert_eq!(*m.lock_checked().unwrap(), 5);
    let g = m.lock();
    let m2 = Arc::clone(&m);
    std::thread::spawn(move || {
        let e = m2.lock_checked().unwrap_err();
        assert_user_thread_message(&e, "Mutex::lock");
        assert!(m2.try_lock().is_none());
        let msg = panic_message(catch_unwind(AssertUnwindSafe(|| drop(m2.lock()))));
        assert!(msg.contains("user thread"), "{msg}");
    })
    .join()
    .unwrap();
    // The failed attempts left nothing behind.
    drop(g);
    assert!(!m.is_locked());
    let m2 = Arc::clone(&m);
    std::thread::spawn(move || *m2.lock_checked().unwrap() += 1)
        .join()
        .unwrap();
    assert_eq!(*m.lock(), 6);
}

/// A user thread holds the mutex (blocked on a barrier) while a plain OS
/// thread tries to lock it.
#[test]
fn mutex_held_by_user_thread_outside() {
    let rt: Runtime<LocalReadyq> = Runtime::new(2).unwrap();
    let m = Arc::new(Mutex::new(0u32));
    let locked = Arc::new(AtomicBool::new(false));
    let go = Arc::new(Barrier::new(2));
    let (m2, l2, go2) = (Arc::clone(&m), Arc::clone(&locked), Arc::clone(&go));
    let holder = rt.spawn(move || {
        let mut g = m2.lock();
        l2.store(true, Ordering::Release);
        go2.wait(); // blocks, holding the mutex, until the last party
        *g += 1;
    });
    while !locked.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    let e = m.lock_checked().unwrap_err();
    assert_user_thread_message(&e, "Mutex::lock");
    // The last party may be an OS thread: it does not block. (Until the
    // holder has arrived we would be the first party: an error, and the
    // call does not count.)
    loop {
        match go.wait_checked() {
            Ok(r) => {
                assert!(r.is_leader());
                break;
            }
            Err(e) => {
                assert_user_thread_message(&e, "Barrier::wait");
                std::thread::yield_now();
            }
        }
    }
    holder.join().unwrap();
    assert_eq!(*m.lock(), 1);
}

#[test]
fn condvar_outside_runtime() {
    let m = Mutex::new(0u32);
    let cv = Condvar::new();
    let mut g = m.lock();
    let e = cv.wait_checked(&mut g).unwrap_err();
    assert_user_thread_message(&e, "Condvar::wait");
    // Still held, nothing queued.
    assert!(m.is_locked());
    *g += 1;
    let e = cv.wait_while_checked(&mut g, |v| *v < 10).unwrap_err();
    assert_user_thread_message(&e, "Condvar::wait");
    // No wait needed: fine.
    cv.wait_while_checked(&mut g, |v| *v > 10).unwrap();
    assert_eq!(cv.notify_all(), 0);
    drop(g);
    let msg = panic_message(catch_unwind(AssertUnwindSafe(|| drop(cv.wait(m.lock())))));
    assert!(msg.contains("user thread"), "{msg}");
    // The panicking wait dropped its guard.
    assert!(!m.is_locked());
}

#[test]
fn barrier_outside_runtime() {
    let rt: Runtime<SingleLock> = Runtime::new(2).unwrap();
    let b = Arc::new(Barrier::new(2));
    let e = b.wait_checked().unwrap_err();
    assert_user_thread_message(&e, "Barrier::wait");
    let msg = panic_message(catch_unwind(AssertUnwindSafe(|| {
        b.wait();
    })));
    assert!(msg.contains("user thread"), "{msg}");
    // The failed calls did not count: two user threads form generation 0.
    let hs: Vec<_> = (0..2)
        .map(|_| {
            let b = Arc::clone(&b);
            rt.spawn(move || b.wait())
        })
        .collect();
    let rs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(rs.iter().filter(|r| r.is_leader()).count(), 1);
    assert!(rs.iter().all(|r| r.generation() == 0));
    // A one-party barrier never blocks: fine from anywhere.
    let one = Barrier::new(1);
    assert!(one.wait().is_leader());
    assert_eq!(one.wait().generation(), 1);
}

// ------------------------------------------------- non-relinquishing

/// Spin locks without per-OS-thread state, in user threads that migrate
/// between processors (see the `SpinMutex` docs for the queue locks).
/// Unfair locks only: with more processors than free cores (CI), a fair
/// lock's hand-off waits for a preempted processor's next time slice.
#[test]
fn spin_mutex_and_atomic_int() {
    let rt: Runtime<LocalReadyq> = Runtime::new(2).unwrap();
    let h = rt.handle();
    let tas: Arc<SpinMutex<u64>> = Arc::new(SpinMutex::new(0));
    let backoff: Arc<SpinMutex<u64, Backoff>> = Arc::new(SpinMutex::new(0));
    let ai: Arc<AtomicInt<Ttas>> = Arc::new(AtomicInt::new(0));
    let (t2, m2, a2) = (Arc::clone(&tas), Arc::clone(&backoff), Arc::clone(&ai));
    rt.block_on(move || {
        let kids: Vec<_> = (0..16)
            .map(|_| {
                let (t, m, a) = (Arc::clone(&t2), Arc::clone(&m2), Arc::clone(&a2));
                h.spawn(move || {
                    for i in 0..1000 {
                        *t.lock() += 1;
                        *m.lock() += 1;
                        a.fetch_add(1);
                        if i % 64 == 0 {
                            yield_now();
                        }
                    }
                })
            })
            .collect();
        kids.into_iter().for_each(|k| k.join().unwrap());
    })
    .unwrap();
    assert_eq!(*tas.lock(), 16_000);
    assert_eq!(*backoff.lock(), 16_000);
    assert_eq!(ai.fetch_add(0), 16_000);
}
