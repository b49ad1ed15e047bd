//! Behaviour of the runtime under every strategy (the issue's "must
//! show"): a million threads with recycled control blocks and stacks,
//! panics at join, misuse outside the runtime, shutdown with blocked
//! threads, park/unpark, create-without-start, idle processors parking.
//!
//! No test asserts wall-clock time. Operations that could deadlock run
//! under a watchdog ([`within`]) whose timeout only turns a hang into a
//! failure.
//!
//! The stack-overflow test is in `tests/overflow.rs` (it runs a child
//! process).
#![cfg(not(loom))]

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use symmetry_threads::{
    DefaultProcessor, Fifo, JoinError, JoinHandle, LocalReadyq, NotInRuntime, Runtime,
    ShutdownReport, SingleLock, Strategy, Thread, current, park, spawn_detached_here, try_park,
    yield_now,
};

/// A test body run once per strategy.
trait PerStrategy {
    fn run<S: Strategy>(&self, name: &'static str);
}

macro_rules! define_each {
    ($($name:literal => $t:ty),* $(,)?) => {
        /// Runs `case` under every strategy of the registry macro.
        fn each<C: PerStrategy>(case: C) {
            $(
                eprintln!("-- {}", $name);
                case.run::<$t>($name);
            )*
        }
    };
}
symmetry_threads::for_each_strategy!(define_each);

/// Runs `f` on a fresh OS thread and waits for it at most `secs`: a hang
/// (deadlock, lost wake-up) fails the test instead of stalling it. The
/// timeout bounds a hang, it does not time the code.
fn within<T: Send + 'static>(what: &str, secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name(format!("watched: {what}"))
        .spawn(move || {
            let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
        })
        .expect("spawn watched thread");
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => resume_unwind(p),
        Err(_) => panic!("{what}: did not finish within {secs} s (deadlock or lost wake-up)"),
    }
}

/// Polls `cond` until it holds; fails after `secs` (a hang guard only).
fn wait_until(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "{what}: not reached within {secs} s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn assert_clean(name: &str, r: &ShutdownReport) {
    assert!(r.nothing_leaked(), "{name}: {r:?}");
    assert_eq!(r.abandoned, 0, "{name}: {r:?}");
    assert_eq!(r.stats.created, r.stats.finished, "{name}: {r:?}");
}

// ---------------------------------------------------------------------
// A million threads (ALL89 Table III chains).

/// One link of a chain: counts itself and creates the next link from
/// inside the runtime, without a handle.
fn link<S: Strategy>(left: u64, ran: u64, done: mpsc::Sender<u64>) {
    if left > 1 {
        spawn_detached_here::<S, DefaultProcessor, _>(move || link::<S>(left - 1, ran + 1, done))
            .expect("a user thread runs on a processor");
    } else {
        done.send(ran).expect("the test waits for every chain");
    }
}

struct Million;

impl PerStrategy for Million {
    fn run<S: Strategy>(&self, name: &'static str) {
        const TOTAL: u64 = 1_000_000;
        const P: usize = 2;
        let mut rt: Runtime<S> = Runtime::new(P).unwrap();
        let (tx, rx) = mpsc::channel();
        // The root thread starts P chains of TOTAL / P threads each.
        rt.spawn_detached(move || {
            for _ in 0..P {
                let tx = tx.clone();
                spawn_detached_here::<S, DefaultProcessor, _>(move || {
                    link::<S>(TOTAL / P as u64, 1, tx)
                })
                .expect("the root runs on a processor");
            }
        });
        let ran = within(name, 300, move || {
            (0..P)
                .map(|_| rx.recv().expect("every chain reports"))
                .sum::<u64>()
        });
        assert_eq!(ran, TOTAL, "{name}");
        let r = rt.shutdown();
        eprintln!("{name}: {r:?}");
        assert_clean(name, &r);
        assert_eq!(r.stats.created, TOTAL + 1, "{name}: {r:?}");
        assert_eq!(r.stats.finished, TOTAL + 1, "{name}: {r:?}");
        // Control blocks and stacks are recycled through the free lists:
        // a few per processor (plus the free-list threshold), not one per
        // thread.
        assert!(r.stats.cbs_allocated < 64, "{name}: {r:?}");
        assert!(r.stats.stacks_allocated < 64, "{name}: {r:?}");
        assert_eq!(r.cbs_free, r.stats.cbs_allocated, "{name}: {r:?}");
        assert_eq!(r.stacks_free, r.stats.stacks_allocated, "{name}: {r:?}");
    }
}

#[test]
fn a_million_threads_complete_and_recycle_control_blocks_and_stacks() {
    each(Million);
}

// ---------------------------------------------------------------------
// Panics.

struct Panics;

impl PerStrategy for Panics {
    fn run<S: Strategy>(&self, name: &'static str) {
        let mut rt: Runtime<S> = Runtime::new(2).unwrap();
        let h = rt.handle();
        within(name, 60, move || {
            // From outside: a named thread's panic comes out at join.
            let e = h
                .builder()
                .name("boom")
                .spawn(|| -> u32 { panic!("kaput {}", 7) })
                .join()
                .unwrap_err();
            match &e {
                JoinError::Panicked { name, .. } => assert_eq!(name.as_deref(), Some("boom")),
                other => panic!("expected a panic, got {other}"),
            }
            assert_eq!(e.panic_message(), Some("kaput 7"));
            assert_eq!(e.to_string(), "user thread 'boom' panicked: kaput 7");

            // A `&'static str` payload, an unnamed thread.
            let e = h.spawn(|| panic!("static")).join().unwrap_err();
            assert_eq!(e.panic_message(), Some("static"));
            assert_eq!(e.to_string(), "user thread '<unnamed>' panicked: static");

            // A non-string payload.
            let e = h
                .builder()
                .name("any")
                .spawn(|| std::panic::panic_any(42u32))
                .join()
                .unwrap_err();
            assert_eq!(e.panic_message(), None);
            assert_eq!(e.to_string(), "user thread 'any' panicked");
            match e {
                JoinError::Panicked { payload, .. } => {
                    assert_eq!(payload.downcast_ref::<u32>(), Some(&42))
                }
                other => unreachable!("{other}"),
            }

            // Joined from inside a user thread (the joiner parks).
            let h2 = h.clone();
            let inner = h
                .spawn(move || {
                    let e = h2
                        .builder()
                        .name("inner")
                        .spawn(|| -> u8 { panic!("from the inside") })
                        .join()
                        .unwrap_err();
                    e.to_string()
                })
                .join()
                .unwrap();
            assert_eq!(inner, "user thread 'inner' panicked: from the inside");

            // Detached panicking threads, from outside and from inside,
            // kill neither their processor nor the runtime.
            for i in 0..8 {
                h.spawn_detached(move || panic!("detached {i}"));
            }
            h.spawn(|| {
                for i in 0..8 {
                    spawn_detached_here::<S, DefaultProcessor, _>(move || {
                        panic!("detached inside {i}")
                    })
                    .unwrap();
                }
            })
            .join()
            .unwrap();

            // Still running: many more threads, on both processors.
            for round in 0..3u64 {
                let kids: Vec<JoinHandle<u64>> = (0..100u64)
                    .map(|i| {
                        h.spawn(move || {
                            yield_now();
                            i * round
                        })
                    })
                    .collect();
                let sum: u64 = kids.into_iter().map(|k| k.join().unwrap()).sum();
                assert_eq!(sum, 4950 * round);
            }
        });
        let r = rt.shutdown();
        // The detached panics finished (their thread ended, the stack and
        // control block went back to the free lists).
        assert_clean(name, &r);
    }
}

#[test]
fn a_panic_comes_out_at_join_and_the_runtime_keeps_running() {
    each(Panics);
}

// ---------------------------------------------------------------------
// Misuse outside the runtime.

#[test]
fn blocking_outside_the_runtime_is_a_clear_error() {
    // A plain OS thread (the test's), with and without a runtime around.
    let check = || {
        let e: NotInRuntime = try_park().unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("user thread"), "{msg}");
        assert!(msg.contains("block_on"), "{msg}");
        assert!(msg.contains("park"), "{msg}");

        let p = catch_unwind(park).unwrap_err();
        let pm = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .expect("a string panic");
        assert!(pm.contains("user thread"), "{pm}");
        assert!(pm.contains("block_on"), "{pm}");

        // Harmless outside: yields the OS thread.
        yield_now();
        assert!(current().is_none());
        assert!(!symmetry_threads::in_user_thread());

        let e = spawn_detached_here::<LocalReadyq, DefaultProcessor, _>(|| ()).unwrap_err();
        assert_eq!(e.op, "spawn_detached_here");
    };
    check();
    let mut rt: Runtime<LocalReadyq> = Runtime::new(2).unwrap();
    check();
    // The runtime's own threads can park, and know who they are.
    let ok = rt
        .block_on(|| {
            let me = current().expect("inside");
            me.unpark();
            try_park().is_ok() && symmetry_threads::in_user_thread()
        })
        .unwrap();
    assert!(ok);
    // `spawn_detached_here` for another runtime type than the caller's is
    // refused, not misinterpreted.
    let e = rt
        .block_on(|| spawn_detached_here::<SingleLock, DefaultProcessor, _>(|| ()))
        .unwrap()
        .unwrap_err();
    assert_eq!(e.op, "spawn_detached_here");
    assert_clean("local-readyq", &rt.shutdown());
}

// ---------------------------------------------------------------------
// Shutdown with blocked threads.

/// Blocked threads of a runtime about to shut down.
struct Blocked {
    /// Threads that will be abandoned.
    count: u64,
    /// Join handles of parked threads, to join from outside afterwards.
    handles: Vec<JoinHandle<u32>>,
    /// An OS thread already blocked in `join` of a parked thread.
    os_joiner: std::thread::JoinHandle<Result<u32, JoinError>>,
}

/// Spawns threads that block forever: parked detached threads, parked
/// joinable threads, a user thread blocked on the join handle of a parked
/// one, and an OS thread blocked in `join`. Returns once they all block.
fn block_some<S: Strategy>(rt: &Runtime<S>) -> Blocked {
    let h = rt.handle();
    let parked = Arc::new(AtomicUsize::new(0));
    let forever = |parked: &Arc<AtomicUsize>| {
        let parked = parked.clone();
        move || -> u32 {
            parked.fetch_add(1, Ordering::SeqCst);
            loop {
                park();
            }
        }
    };
    for _ in 0..4 {
        let f = forever(&parked);
        h.spawn_detached(move || {
            f();
        });
    }
    let mut handles: Vec<JoinHandle<u32>> = (0..3).map(|_| h.spawn(forever(&parked))).collect();
    // A user thread blocked on the join handle of a parked thread.
    let target = h.spawn(forever(&parked));
    let p2 = parked.clone();
    handles.push(h.spawn(move || {
        p2.fetch_add(1, Ordering::SeqCst);
        target.join().unwrap_or(0)
    }));
    // An OS thread blocked in join of a parked thread.
    let os_target = h.spawn(forever(&parked));
    let os_joiner = std::thread::spawn(move || os_target.join());
    wait_until("blocked threads start", 30, || {
        parked.load(Ordering::SeqCst) == 4 + 3 + 1 + 1 + 1
    });
    // Some ready work that must still run to completion at shutdown.
    for _ in 0..10 {
        h.spawn_detached(yield_now);
    }
    Blocked {
        count: 10,
        handles,
        os_joiner,
    }
}

struct ShutdownBlocked;

impl PerStrategy for ShutdownBlocked {
    fn run<S: Strategy>(&self, name: &'static str) {
        let rt: Runtime<S> = Runtime::new(2).unwrap();
        let h = rt.handle();
        let b = block_some(&rt);
        let r = within(&format!("{name}: shutdown"), 10, move || {
            let mut rt = rt;
            rt.shutdown()
        });
        eprintln!("{name}: {r:?}");
        assert_eq!(r.abandoned, b.count, "{name}: {r:?}");
        assert!(r.nothing_leaked(), "{name}: {r:?}");
        // Everything else ran to completion.
        assert_eq!(
            r.stats.finished + r.abandoned,
            r.stats.created,
            "{name}: {r:?}"
        );
        within(&format!("{name}: joins"), 10, move || {
            for jh in b.handles {
                assert!(matches!(jh.join(), Err(JoinError::Abandoned)));
            }
            let e = b.os_joiner.join().unwrap().unwrap_err();
            assert!(matches!(e, JoinError::Abandoned), "{e}");
            assert_eq!(
                e.to_string(),
                "the runtime shut down before the user thread finished"
            );
            // A thread spawned on a stopped runtime never runs: joining it
            // reports that instead of hanging.
            assert!(matches!(h.spawn(|| 1).join(), Err(JoinError::Abandoned)));
        });
    }
}

#[test]
fn shutdown_with_blocked_threads_returns_and_reports_them() {
    each(ShutdownBlocked);
}

struct DropBlocked;

impl PerStrategy for DropBlocked {
    fn run<S: Strategy>(&self, name: &'static str) {
        let rt: Runtime<S> = Runtime::new(2).unwrap();
        let b = block_some(&rt);
        within(&format!("{name}: drop"), 10, move || drop(rt));
        within(&format!("{name}: joins"), 10, move || {
            for jh in b.handles {
                assert!(matches!(jh.join(), Err(JoinError::Abandoned)));
            }
            assert!(matches!(
                b.os_joiner.join().unwrap(),
                Err(JoinError::Abandoned)
            ));
        });
    }
}

#[test]
fn dropping_a_runtime_with_blocked_threads_does_not_hang() {
    each(DropBlocked);
}

// ---------------------------------------------------------------------
// Park / unpark.

#[test]
fn unpark_before_park_leaves_one_token() {
    // One processor: nothing else runs while the thread runs, so whether
    // `park` returned on a token or on a wake-up is deterministic.
    let mut rt: Runtime<LocalReadyq> = Runtime::new(1).unwrap();
    let h = rt.handle();
    let woke_by_helper = within("tokens", 10, move || {
        rt_block_on_handle(&h, {
            let h = h.clone();
            move || {
                let me = current().unwrap();
                me.unpark();
                park(); // the token: returns at once
                // Two unparks leave one token, not two.
                me.unpark();
                me.unpark();
                park();
                let flag = Arc::new(AtomicBool::new(false));
                let f2 = flag.clone();
                h.spawn_detached(move || {
                    f2.store(true, Ordering::SeqCst);
                    me.unpark();
                });
                // No token left: this blocks until the helper ran.
                park();
                flag.load(Ordering::SeqCst)
            }
        })
    });
    assert!(woke_by_helper, "a second park consumed a second token");
    assert_clean("local-readyq", &rt.shutdown());
}

/// `Runtime::block_on` through a handle (the runtime stays on the caller).
fn rt_block_on_handle<S: Strategy, T: Send + 'static>(
    h: &symmetry_threads::Handle<S>,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    h.spawn(f).join().unwrap()
}

#[test]
fn unpark_from_an_os_thread_wakes_a_user_thread() {
    let mut rt: Runtime<LocalReadyq> = Runtime::new(2).unwrap();
    let (tx, rx) = mpsc::channel::<Thread>();
    let go = Arc::new(AtomicBool::new(false));
    let g2 = go.clone();
    let jh = rt.spawn(move || {
        tx.send(current().unwrap()).unwrap();
        let mut parks = 0u64;
        // Acquire: pairs with the Release store below.
        while !g2.load(Ordering::Acquire) {
            park();
            parks += 1;
        }
        parks
    });
    let t = rx.recv().unwrap();
    // Let it park for real (its processor goes idle), then wake it.
    std::thread::sleep(Duration::from_millis(20));
    go.store(true, Ordering::Release);
    t.unpark();
    let parks = within("wake from OS thread", 10, move || jh.join().unwrap());
    assert!(parks >= 1);
    assert_clean("local-readyq", &rt.shutdown());
}

/// One player of a ping-pong pair: waits for its turn (parking), passes
/// the turn, wakes the partner.
fn player(pair: Arc<Pair>, side: usize, rounds: u64) -> u64 {
    pair.slots[side].set(current().unwrap()).unwrap();
    while pair.slots[1 - side].get().is_none() {
        yield_now();
    }
    let partner = *pair.slots[1 - side].get().unwrap();
    let mut parks = 0;
    for r in 0..rounds {
        let mine = 2 * r + side as u64;
        // Acquire: pairs with the partner's Release store of our turn.
        while pair.turn.load(Ordering::Acquire) != mine {
            park();
            parks += 1;
        }
        pair.turn.store(mine + 1, Ordering::Release);
        partner.unpark();
    }
    parks
}

struct Pair {
    turn: AtomicU64,
    slots: [OnceLock<Thread>; 2],
}

/// `PAIRS` pairs of user threads ping-pong `ROUND_TRIPS` round trips in
/// all on `PROCS` processors.
struct PingPong<const PROCS: usize, const PAIRS: u64, const ROUND_TRIPS: u64>;

impl<const PROCS: usize, const PAIRS: u64, const ROUND_TRIPS: u64> PerStrategy
    for PingPong<PROCS, PAIRS, ROUND_TRIPS>
{
    fn run<S: Strategy>(&self, name: &'static str) {
        let rounds = ROUND_TRIPS / PAIRS;
        let mut rt: Runtime<S> = Runtime::new(PROCS).unwrap();
        let h = rt.handle();
        let pairs: Vec<Arc<Pair>> = (0..PAIRS)
            .map(|_| {
                Arc::new(Pair {
                    turn: AtomicU64::new(0),
                    slots: [OnceLock::new(), OnceLock::new()],
                })
            })
            .collect();
        let handles: Vec<JoinHandle<u64>> = pairs
            .iter()
            .flat_map(|p| {
                let h = &h;
                (0..2).map(move |side| {
                    let p = p.clone();
                    h.spawn(move || player(p, side, rounds))
                })
            })
            .collect();
        let parks: u64 = within(name, 120, move || {
            handles.into_iter().map(|j| j.join().unwrap()).sum()
        });
        for p in &pairs {
            assert_eq!(p.turn.load(Ordering::Relaxed), 2 * rounds);
        }
        let r = rt.shutdown();
        eprintln!("{name}: {parks} parks; {r:?}");
        assert!(parks > 0, "{name}: nobody ever blocked");
        assert_clean(name, &r);
    }
}

#[test]
fn park_unpark_ping_pong_100k_round_trips() {
    // Across two processors (the case), and on one, where every
    // hand-off is a switch through the ready queue.
    each(PingPong::<2, 4, 100_000>);
    each(PingPong::<1, 2, 20_000>);
}

// ---------------------------------------------------------------------
// PRESTO's create without start.

struct CreateWithoutStart;

impl PerStrategy for CreateWithoutStart {
    fn run<S: Strategy>(&self, name: &'static str) {
        let mut rt: Runtime<S> = Runtime::new(2).unwrap();
        let h = rt.handle();
        let token = Arc::new(());

        // Deleted before start: the closure (and what it captured) is
        // dropped, it never runs.
        let ran = Arc::new(AtomicBool::new(false));
        let (t2, r2) = (token.clone(), ran.clone());
        let u = h.create(move || {
            drop(t2);
            r2.store(true, Ordering::SeqCst);
        });
        assert_eq!(Arc::strong_count(&token), 2, "{name}");
        drop(u);
        assert_eq!(Arc::strong_count(&token), 1, "{name}");
        // Large closures are boxed in the control block: same thing.
        let (t2, big) = (token.clone(), [7u8; 4 * symmetry_threads::INLINE_ARGS]);
        let u = h.create(move || {
            drop(t2);
            std::hint::black_box(big);
        });
        assert_eq!(Arc::strong_count(&token), 2, "{name}");
        drop(u);
        assert_eq!(Arc::strong_count(&token), 1, "{name}");

        // Started: it runs.
        let (tx, rx) = mpsc::channel();
        let t3 = token.clone();
        let u = h.create(move || tx.send(Arc::strong_count(&t3)).unwrap());
        u.start();
        let seen = within(name, 10, move || rx.recv().unwrap());
        assert_eq!(seen, 2, "{name}");

        // From inside a user thread (the processor-local path).
        let (t4, h2) = (token.clone(), h.clone());
        let (before, with, after) = within(name, 10, move || {
            rt_block_on_handle(&h, move || {
                let before = Arc::strong_count(&t4);
                let t5 = t4.clone();
                let u = h2.create(move || drop(t5));
                let with = Arc::strong_count(&t4);
                drop(u);
                let after = Arc::strong_count(&t4);
                let (tx, rx) = mpsc::channel();
                let t6 = t4.clone();
                h2.create(move || {
                    tx.send(()).unwrap();
                    drop(t6)
                })
                .start();
                while rx.try_recv().is_err() {
                    yield_now();
                }
                (before, with, after)
            })
        });
        assert_eq!((with, after), (before + 1, before), "{name}");
        assert!(!ran.load(Ordering::SeqCst), "{name}: a deleted thread ran");

        let r = rt.shutdown();
        eprintln!("{name}: {r:?}");
        assert_eq!(Arc::strong_count(&token), 1, "{name}");
        assert!(r.nothing_leaked(), "{name}: {r:?}");
        assert_eq!(r.abandoned, 0, "{name}: {r:?}");
        // Started threads count as created like any other.
        assert_eq!(r.stats.created, r.stats.finished, "{name}: {r:?}");
    }
}

#[test]
fn create_without_start_then_delete_or_start() {
    each(CreateWithoutStart);
}

#[test]
fn an_unstarted_thread_outliving_shutdown_is_dropped_once() {
    let mut rt: Runtime<LocalReadyq> = Runtime::new(2).unwrap();
    let token = Arc::new(());
    let t2 = token.clone();
    let u = rt.handle().create(move || drop(t2));
    let r = within("shutdown", 10, move || {
        let r = rt.shutdown();
        (rt, r)
    });
    let (rt, r) = r;
    assert_eq!(r.abandoned, 1, "{r:?}");
    assert!(r.nothing_leaked(), "{r:?}");
    assert_eq!(Arc::strong_count(&token), 1);
    drop(u);
    assert_eq!(Arc::strong_count(&token), 1);
    drop(rt);
    assert_eq!(Arc::strong_count(&token), 1);
}

// ---------------------------------------------------------------------
// Idle processors park.

struct IdleParks;

impl PerStrategy for IdleParks {
    fn run<S: Strategy>(&self, name: &'static str) {
        const P: usize = 2;
        let mut rt: Runtime<S> = Runtime::new(P).unwrap();
        let h = rt.handle();
        let burst = move |h: &symmetry_threads::Handle<S>| {
            let kids: Vec<JoinHandle<u64>> = (0..1000u64)
                .map(|i| {
                    h.spawn(move || {
                        yield_now();
                        i
                    })
                })
                .collect();
            kids.into_iter().map(|k| k.join().unwrap()).sum::<u64>()
        };
        let h2 = h.clone();
        assert_eq!(within(name, 30, move || burst(&h2)), 499_500);
        // Idle now: every processor gives up polling and parks in the
        // kernel. (The poll loop only guards against a hang.)
        std::thread::sleep(Duration::from_millis(100));
        wait_until(&format!("{name}: processors park"), 10, || {
            rt.stats().parks >= P as u64
        });
        // And parked processors wake up for new work.
        let h2 = h.clone();
        assert_eq!(within(name, 30, move || burst(&h2)), 499_500);
        assert_clean(name, &rt.shutdown());
    }
}

#[test]
fn an_idle_runtime_parks_its_processors() {
    each(IdleParks);
}

/// The default discipline starts the newest created thread first; ALL89's
/// `Fifo` starts the oldest first. One processor, so the order is exact.
#[test]
fn new_threads_start_newest_first_by_default_and_fifo_on_request() {
    fn order<S: Strategy>() -> Vec<u32> {
        let rt: Runtime<S> = Runtime::new(1).unwrap();
        let h = rt.handle();
        rt.block_on(move || {
            let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
            let kids: Vec<_> = (1..=3u32)
                .map(|i| {
                    let seen = Arc::clone(&seen);
                    h.spawn(move || seen.lock().unwrap().push(i))
                })
                .collect();
            for k in kids {
                k.join().unwrap();
            }
            seen.lock().unwrap().clone()
        })
        .unwrap()
    }
    assert_eq!(order::<LocalReadyq>(), vec![3, 2, 1]);
    assert_eq!(order::<SingleLock>(), vec![3, 2, 1]);
    assert_eq!(
        order::<LocalReadyq<symmetry_locks::Tas, Fifo>>(),
        vec![1, 2, 3]
    );
}

/// A thread that yields in a loop goes behind the others, whatever the
/// discipline: it cannot keep a lone processor from the thread it waits
/// for, nor can a stream of new threads keep it from running.
#[test]
fn newest_first_starves_neither_a_yielder_nor_the_threads_it_waits_for() {
    within("newest-first fairness", 60, || {
        let rt: Runtime<SingleLock> = Runtime::new(1).unwrap();
        let h = rt.handle();
        rt.block_on(move || {
            let flag = Arc::new(AtomicBool::new(false));
            let f2 = Arc::clone(&flag);
            let waiter = h.spawn(move || {
                while !f2.load(Ordering::Acquire) {
                    yield_now();
                }
            });
            // A flood of creations, each creating the next: the waiter
            // and the setter still get turns.
            let h2 = h.clone();
            let flood = h.spawn(move || {
                fn chain(h: symmetry_threads::Handle<SingleLock>, left: u32) {
                    if left > 0 {
                        let h2 = h.clone();
                        h.spawn_detached(move || chain(h2, left - 1));
                    }
                }
                chain(h2, 10_000);
            });
            let setter = h.spawn(move || flag.store(true, Ordering::Release));
            flood.join().unwrap();
            setter.join().unwrap();
            waiter.join().unwrap();
        })
        .unwrap();
    });
}

/// `shutdown_timeout` returns within its bound whatever the threads do:
/// a thread yielding in a loop, a thread spawning in a loop, and (on a
/// second processor) a thread that never switches at all.
#[test]
fn shutdown_timeout_returns_with_yielders_spawners_and_spinners() {
    struct Case;
    impl PerStrategy for Case {
        fn run<S: Strategy>(&self, name: &'static str) {
            let mut rt: Runtime<S> = Runtime::new(2).unwrap();
            let h = rt.handle();
            let stop = Arc::new(AtomicBool::new(false));
            let s1 = Arc::clone(&stop);
            let yielder = h.spawn(move || {
                while !s1.load(Ordering::Relaxed) {
                    yield_now();
                }
            });
            let h2 = h.clone();
            let s2 = Arc::clone(&stop);
            h.spawn_detached(move || {
                while !s2.load(Ordering::Relaxed) {
                    h2.spawn_detached(|| {});
                    yield_now();
                }
            });
            let s3 = Arc::clone(&stop);
            let spinning = Arc::new(AtomicBool::new(false));
            let sp = Arc::clone(&spinning);
            h.spawn_detached(move || {
                sp.store(true, Ordering::Relaxed);
                // Never switches: keeps its processor until told to stop.
                while !s3.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
            wait_until("the spinner runs", 30, || spinning.load(Ordering::Relaxed));
            let t = Instant::now();
            let r = rt.shutdown_timeout(Duration::from_millis(300));
            let took = t.elapsed();
            assert!(
                took < Duration::from_secs(3),
                "{name}: shutdown_timeout took {took:?}"
            );
            assert_eq!(r.still_running, 1, "{name}: {r:?}");
            assert!(r.abandoned >= 1, "{name}: {r:?}");
            assert!(
                matches!(yielder.join(), Err(JoinError::Abandoned)),
                "{name}"
            );
            // The spinner's processor was left to it; let it go.
            stop.store(true, Ordering::Relaxed);
            // Idempotent: the same report again.
            assert_eq!(rt.shutdown_timeout(Duration::from_millis(1)), r);
        }
    }
    each(Case);
}

/// Dropping a runtime whose thread yields for ever returns (after
/// `DROP_GRACE` at most).
#[test]
fn drop_returns_with_a_yield_looping_thread() {
    within("drop with a yield loop", 30, || {
        let rt: Runtime<LocalReadyq> = Runtime::new(1).unwrap();
        rt.handle().spawn_detached(|| {
            loop {
                yield_now();
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        drop(rt);
    });
}

// ---------------------------------------------------------------------
// Fibers: a pooled stack keeps a coroutine parked between threads.

struct FiberReuse;

impl PerStrategy for FiberReuse {
    fn run<S: Strategy>(&self, name: &'static str) {
        let mut rt = Runtime::<S>::builder()
            .processors(2)
            .build()
            .expect("runtime");
        let h = rt.handle();
        for round in 0..200u64 {
            // A thread that parks and is resumed (possibly on the other
            // processor), one that panics, and one that runs deep: each
            // ends on its fiber, which then starts the next thread.
            let (tx, rx) = mpsc::channel();
            let sleeper = h.spawn(move || {
                tx.send(current().expect("a user thread"))
                    .expect("receiver alive");
                park();
                round
            });
            // A token left before the park is taken by it (no lost wake-up).
            rx.recv().expect("sleeper started").unpark();
            assert_eq!(sleeper.join().expect("no panic"), round, "{name}");
            if round % 50 == 0 {
                // (A few: each panic is printed by the hook.)
                let panicked = h.spawn(move || -> u64 { std::panic::panic_any(round) });
                assert!(
                    matches!(panicked.join(), Err(JoinError::Panicked { .. })),
                    "{name}"
                );
            }
            let deep = h.spawn(move || depth(8, round));
            assert_eq!(deep.join().expect("no panic"), round + 8, "{name}");
        }
        let r = rt.shutdown();
        assert_clean(name, &r);
        // The pooled stacks drop their idle fibers (reset, not unwound)
        // and go back to the slabs.
        drop((h, rt));
    }
}

/// Recurses `n` frames with a page of locals each, then returns `base + n`.
#[inline(never)]
fn depth(n: u64, base: u64) -> u64 {
    let page = std::hint::black_box([1u8; 4096]);
    if n == 0 {
        base
    } else {
        depth(n - 1, base) + u64::from(std::hint::black_box(page)[4095])
    }
}

#[test]
fn pooled_fibers_start_threads_after_parks_panics_and_deep_stacks() {
    each(FiberReuse);
}
