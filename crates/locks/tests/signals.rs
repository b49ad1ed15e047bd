//! Signal handlers that take a queue lock. C programs do this (POSIX does
//! not promise it works, glibc's mutex survives it), and
//! `symmetry-interpose` runs them on these locks. A handler interrupts its
//! thread anywhere, also inside the queue locks' per-thread node pool, and
//! a new thread's first acquisition draws its node from the shared
//! recycle list: a handler that needed a node there once waited forever
//! for its own thread (`node_pool`'s docs).
//!
//! For each lock with a node pool: rounds of two fresh threads that take a
//! lock 500 times each (with `try_lock` between), while an interval timer
//! fires `SIGALRM` every 50 µs and the handler takes a second lock of the
//! same algorithm (at most [`IN_FLIGHT`] handler runs at once). Checks that
//! both counts are exact, that the run never stops making progress (a hang
//! aborts the test binary after [`STALL`], since a thread stuck in a
//! handler cannot be unwound), and that no handler allocated: a handler
//! that calls `malloc` while its thread was inside `malloc` (Linux delivers
//! a process's signals to its main thread first, and this one spawns
//! threads) deadlocks on the arena's lock. The test's global allocator
//! counts what handlers allocate, so that hazard is seen every time, not
//! only when the timing is unlucky.
#![cfg(all(target_os = "linux", not(loom)))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::c_int;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use symmetry_locks::lock_api::{Mutex, RawMutex};
use symmetry_locks::{Clh, GraunkeThakkar, Handshake, Mcs, McsTp, SmartQ};

/// Rounds of two new threads per lock.
const ROUNDS: u64 = 3_000;
/// Acquisitions per thread per round.
const PER_THREAD: u64 = 500;
/// No finished round for this long is a hang.
const STALL: Duration = Duration::from_secs(60);

/// The handler's lock (a leaked `Mutex<L, u64>`) and the function that
/// takes it, for the algorithm under test; null between algorithms.
static HANDLER_LOCK: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());
static HANDLER_TAKE: AtomicUsize = AtomicUsize::new(0);
/// Handler runs that took the lock.
static RUNS: AtomicU64 = AtomicU64::new(0);
/// Handler runs under way; more than [`IN_FLIGHT`] return at once.
static RUNNING: AtomicUsize = AtomicUsize::new(0);
/// Handler runs that may wait for the lock together. Without a cap, on a
/// busy machine every thread spends all its time in the handler: a FIFO
/// lock hands over to a descheduled waiter once per time slice, far less
/// often than the timer fires, so a signal is always pending and the
/// workers' own code never runs (a livelock of the test, not of the locks:
/// CI saw no round finish for 60 s).
const IN_FLIGHT: usize = 2;
/// Rounds finished, all algorithms together (the watchdog's progress).
static PROGRESS: AtomicU64 = AtomicU64::new(0);

std::thread_local! {
    /// True while this thread runs `on_alarm`.
    static IN_HANDLER: Cell<bool> = const { Cell::new(false) };
}
/// Allocations and frees made inside `on_alarm`, by the locks.
static HANDLER_ALLOCS: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting calls made inside the handler.
struct Counting;

impl Counting {
    fn note(&self) {
        if IN_HANDLER.try_with(Cell::get).unwrap_or(false) {
            HANDLER_ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

// SAFETY: every call is passed to `System` unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.note();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.note();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.note();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.note();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// # Safety
/// `p` is a live `Mutex<L, u64>`.
unsafe fn take<L: RawMutex>(p: *const ()) {
    // SAFETY: per the contract.
    let m = unsafe { &*(p as *const Mutex<L, u64>) };
    *m.lock() += 1;
}

extern "C" fn on_alarm(_: c_int) {
    // SeqCst, with the load of HANDLER_LOCK below and `run`'s clearing
    // store and final wait: a run that saw the lock counted itself in
    // RUNNING before `run` cleared the lock, so `run`'s wait for
    // RUNNING == 0 cannot miss it.
    let running = RUNNING.fetch_add(1, Ordering::SeqCst);
    let p = HANDLER_LOCK.load(Ordering::SeqCst);
    // Acquire: pairs with the Release store in `run`, which publishes the
    // lock's function before the timer starts.
    let f = HANDLER_TAKE.load(Ordering::Acquire);
    if !p.is_null() && f != 0 && running < IN_FLIGHT {
        // SAFETY: `f` was stored from `take::<L>` for the `L` of `p`.
        let f: unsafe fn(*const ()) = unsafe { std::mem::transmute(f) };
        IN_HANDLER.set(true);
        // SAFETY: `p` is leaked, so it outlives every handler run.
        unsafe { f(p) };
        IN_HANDLER.set(false);
        // Relaxed: ordered before the Release decrement below.
        RUNS.fetch_add(1, Ordering::Relaxed);
    }
    // SeqCst (so also Release): pairs with `run`'s wait, which then sees
    // this run's RUNS increment.
    RUNNING.fetch_sub(1, Ordering::SeqCst);
}

fn timer(interval_us: i64) {
    let t = libc::timeval {
        tv_sec: 0,
        tv_usec: interval_us,
    };
    let it = libc::itimerval {
        it_interval: t,
        it_value: t,
    };
    // SAFETY: a valid itimerval; the old value is not wanted.
    let rc = unsafe { libc::setitimer(libc::ITIMER_REAL, &it, std::ptr::null_mut()) };
    assert_eq!(rc, 0, "setitimer");
}

fn run<L: RawMutex + Send + Sync + 'static>(name: &str) {
    let work: &'static Mutex<L, u64> = Box::leak(Box::new(Mutex::new(0)));
    let in_handler: &'static Mutex<L, u64> = Box::leak(Box::new(Mutex::new(0)));
    RUNS.store(0, Ordering::Relaxed);
    HANDLER_ALLOCS.store(0, Ordering::Relaxed);
    HANDLER_TAKE.store(
        take::<L> as unsafe fn(*const ()) as usize,
        Ordering::Release,
    );
    HANDLER_LOCK.store(
        (in_handler as *const Mutex<L, u64>).cast_mut().cast(),
        Ordering::Release,
    );
    timer(50);
    for _ in 0..ROUNDS {
        let threads: Vec<_> = (0..2)
            .map(|_| {
                std::thread::spawn(move || {
                    for i in 0..PER_THREAD {
                        if i % 8 == 0
                            && let Some(mut g) = work.try_lock()
                        {
                            *g += 1;
                            continue;
                        }
                        *work.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a worker panicked");
        }
        PROGRESS.fetch_add(1, Ordering::Relaxed);
    }
    timer(0);
    HANDLER_LOCK.store(std::ptr::null_mut(), Ordering::SeqCst);
    // A signal raised before `timer(0)` may still be running its handler
    // on another thread (the harness's main thread, say): wait until no
    // run that saw the lock is left (see `on_alarm`).
    while RUNNING.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
    let runs = RUNS.load(Ordering::Relaxed);
    assert_eq!(*work.lock(), 2 * PER_THREAD * ROUNDS, "{name}: work count");
    assert_eq!(*in_handler.lock(), runs, "{name}: handler count");
    assert!(runs > 0, "{name}: the handler never ran");
    assert_eq!(
        HANDLER_ALLOCS.load(Ordering::Relaxed),
        0,
        "{name}: a handler taking the lock called the allocator (a deadlock when its thread was inside malloc)"
    );
    eprintln!("{name}: {ROUNDS} rounds, {runs} handler runs took the lock");
}

#[test]
fn a_handler_that_takes_a_queue_lock_never_hangs_or_corrupts_the_node_pool() {
    // SAFETY: a plain handler function; sa_mask empty, SA_RESTART so the
    // workers' joins and the test's own calls resume.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_alarm as extern "C" fn(c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut()), 0);
    }
    // The watchdog: a handler stuck on its own thread cannot be unwound.
    std::thread::spawn(|| {
        let mut last = (0, Instant::now());
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let now = PROGRESS.load(Ordering::Relaxed);
            if now != last.0 {
                last = (now, Instant::now());
            } else if last.1.elapsed() > STALL {
                eprintln!("no round finished for {STALL:?}: a handler hangs");
                std::process::abort();
            }
        }
    });
    run::<Mcs>("mcs");
    run::<Clh>("clh");
    run::<GraunkeThakkar>("graunke-thakkar");
    run::<Handshake>("handshake");
    run::<SmartQ>("smart-q");
    run::<McsTp>("mcs-tp");
}
