//! ALL89 Table III, "null thread chain", run on modern peer thread systems.
//!
//! Table III of ALL89 times the life of a null thread: initially `P`
//! threads are created; each thread increments a per-processor count and,
//! unless the count has reached `total / P`, creates the next thread, then
//! finishes. So `P` independent chains run concurrently, each creating its
//! share of the threads strictly one after another, and the timer covers
//! everything from the creation of the first threads to the completion of
//! the last chain. The metric is `elapsed / total`: the cost of creating,
//! starting and finishing one null thread, in nanoseconds
//! ([`ChainOut::ns_per_thread`]).
//!
//! Here a chain's count travels with the chain (each link passes it to the
//! next), so no two chains share anything per link; a chain touches shared
//! state once, when it ends. `total` is split as evenly as possible over the
//! chains (the first `total % chains` chains run one link more).
//!
//! What a "thread" is for each peer:
//!
//! * [`tokio_chain`]: a tokio task on a multi-thread runtime with `workers`
//!   worker threads, created by `tokio::spawn` from the previous task and
//!   detached (its `JoinHandle` is dropped at once: that is what a detached
//!   thread costs in tokio). A task is stackless: a heap-allocated future.
//! * [`std_thread_chain`]: an OS thread created by `std::thread::Builder::spawn`
//!   (default stack size) from the previous thread, detached the same way.
//!   Around ten to thirty microseconds each, so this peer leans on `budget`.
//! * [`may_chain`]: a `may` 0.3 stackful coroutine (default coroutine stack,
//!   taken from may's stack pool) spawned from the previous coroutine on
//!   may's global scheduler, detached. may's scheduler is configured once per
//!   process: see [`may_chain`].
//!
//! Every peer honours a wall-clock `budget`: the caller's thread sleeps until
//! the chains finish or the budget runs out; in the latter case it raises a
//! stop flag that every link reads before creating the next one, so each
//! chain ends after at most one more link. The result then says
//! `completed == false` and counts only the threads that actually ran; the
//! rate is over that work, never extrapolated.
//!
//! These functions create their own runtimes and block the calling thread:
//! call them from a plain OS thread, not from inside an async runtime or a
//! may coroutine.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Once, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long past the budget the caller waits for stopped chains to drain
/// before it gives up on them and reports what has finished so far. A
/// stopped chain runs at most one more link, so this only matters if a peer
/// stalls outright.
const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// Result of one run.
#[derive(Debug, Clone, Copy)]
pub struct ChainOut {
    /// Null threads that were created, started and finished.
    pub threads: u64,
    /// Wall-clock time from just before the first threads were created to
    /// the moment the last chain finished (or, if the chains never drained,
    /// to when the caller gave up on them).
    pub elapsed: Duration,
    /// `true` when every chain ran to its full length; `false` when the
    /// budget ran out (or a peer refused to create a thread) first.
    pub completed: bool,
}

impl ChainOut {
    /// Nanoseconds per null thread over the work actually done:
    /// `elapsed / threads`. `NaN` when no thread ran.
    pub fn ns_per_thread(&self) -> f64 {
        if self.threads == 0 {
            return f64::NAN;
        }
        self.elapsed.as_nanos() as f64 / self.threads as f64
    }
}

impl From<crate::kernels::threads::ChainOut> for ChainOut {
    /// A symmetry-threads chain run, to compare with the peers'.
    fn from(o: crate::kernels::threads::ChainOut) -> Self {
        ChainOut {
            threads: o.threads,
            elapsed: o.elapsed,
            completed: o.completed,
        }
    }
}

/// State shared by all chains of one run and the caller waiting on them.
struct Shared {
    /// When the timed region began.
    start: Instant,
    /// Raised by the caller when the budget is spent; read by every link.
    stop: AtomicBool,
    /// Raised by a link whose peer refused to create the next thread.
    failed: AtomicBool,
    /// Chains still running; the chain that takes it to 0 wakes `waiter`.
    chains_left: AtomicUsize,
    /// Links run, summed over the finished chains.
    ran: AtomicU64,
    /// Nanoseconds from `start` to the end of the latest finished chain.
    end_ns: AtomicU64,
    /// The caller's thread, parked until the chains finish.
    waiter: Thread,
}

impl Shared {
    fn new(chains: usize) -> Self {
        Shared {
            start: Instant::now(),
            stop: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            chains_left: AtomicUsize::new(chains),
            ran: AtomicU64::new(0),
            end_ns: AtomicU64::new(0),
            waiter: std::thread::current(),
        }
    }

    /// Whether a link may create the next one.
    fn go_on(&self) -> bool {
        // Relaxed: the flag publishes no data; it only asks the chains to
        // end. A link that reads it late runs one more null thread, which is
        // counted like any other.
        !self.stop.load(Ordering::Relaxed)
    }

    /// The last link of a chain (`ran` links in all) is done.
    fn chain_finished(&self, ran: u64) {
        let now = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        // Relaxed for both: they are published by the Release decrement of
        // `chains_left` below, which the caller reads with Acquire.
        self.ran.fetch_add(ran, Ordering::Relaxed);
        self.end_ns.fetch_max(now, Ordering::Relaxed);
        // Release: publishes this chain's `ran` and `end_ns` updates. Every
        // chain's decrement is an RMW on the same counter, so the caller's
        // Acquire load that reads 0 synchronizes with all of them (each
        // Release RMW heads a release sequence the later RMWs continue).
        if self.chains_left.fetch_sub(1, Ordering::Release) == 1 {
            // `self` is borrowed from the link's own `Arc`, so the handle
            // stays valid even if the caller has already returned.
            self.waiter.unpark();
        }
    }

    /// Ends a chain because the peer could not create its next thread.
    fn chain_failed(&self, ran: u64) {
        // Relaxed: read by the caller only after its Acquire load of
        // `chains_left`, which this chain's Release decrement publishes to.
        self.failed.store(true, Ordering::Relaxed);
        self.chain_finished(ran);
    }

    /// Blocks the caller until every chain has finished, raising the stop
    /// flag once `budget` is spent, and turns the shared counters into a
    /// result.
    fn wait(&self, total: u64, budget: Duration) -> ChainOut {
        let deadline = self.start + budget;
        let give_up = deadline + DRAIN_GRACE;
        let mut stopped = false;
        loop {
            // Acquire: pairs with each chain's Release decrement, making its
            // `ran`, `end_ns` and `failed` stores visible below.
            if self.chains_left.load(Ordering::Acquire) == 0 {
                // Relaxed: ordered by the Acquire load above.
                let threads = self.ran.load(Ordering::Relaxed);
                let failed = self.failed.load(Ordering::Relaxed);
                let end_ns = self.end_ns.load(Ordering::Relaxed);
                return ChainOut {
                    threads,
                    elapsed: Duration::from_nanos(end_ns),
                    completed: !failed && threads == total,
                };
            }
            let now = Instant::now();
            if !stopped && now >= deadline {
                // Relaxed: see `go_on`.
                self.stop.store(true, Ordering::Relaxed);
                stopped = true;
            }
            if now >= give_up {
                // The chains did not drain: report what has finished. The
                // loads race with chains still running, which only makes the
                // count smaller than the work done, never larger.
                let threads = self.ran.load(Ordering::Relaxed);
                return ChainOut {
                    threads,
                    elapsed: now - self.start,
                    completed: false,
                };
            }
            let wake = if stopped { give_up } else { deadline };
            // Spurious and early wake-ups just go round the loop again.
            std::thread::park_timeout(wake - now);
        }
    }
}

/// Length of chain `i` of `chains` when `total` links are split evenly.
fn chain_len(i: usize, chains: usize, total: u64) -> u64 {
    let chains64 = chains as u64;
    total / chains64 + u64::from((i as u64) < total % chains64)
}

/// Runs `chains` chains of `total` links in all under `budget`; `start`
/// launches the first link of one chain (given the shared state and the
/// chain's length). Handles the degenerate sizes: no link at all is an
/// immediate, completed, empty run; more chains than links are cut down to
/// one link each.
fn run_chains(
    chains: usize,
    total: u64,
    budget: Duration,
    start: impl Fn(Arc<Shared>, u64),
) -> ChainOut {
    if total == 0 {
        return ChainOut {
            threads: 0,
            elapsed: Duration::ZERO,
            completed: true,
        };
    }
    let chains = chains.clamp(1, usize::try_from(total).unwrap_or(usize::MAX));
    let shared = Arc::new(Shared::new(chains));
    for i in 0..chains {
        start(Arc::clone(&shared), chain_len(i, chains, total));
    }
    shared.wait(total, budget)
}

// ---------------------------------------------------------------- tokio

/// The body of one tokio task: link `done + 1` of a chain with `left` links
/// still to run (this one included).
fn tokio_link(shared: Arc<Shared>, left: u64, done: u64) {
    let done = done + 1;
    if left > 1 && shared.go_on() {
        // Detached: the JoinHandle is dropped at once.
        drop(tokio::spawn(async move {
            tokio_link(shared, left - 1, done);
        }));
    } else {
        shared.chain_finished(done);
    }
}

/// Table III on tokio: `chains` chains of detached `tokio::spawn`ed null
/// tasks, `total` tasks in all, on a fresh multi-thread runtime with
/// `workers` worker threads (at least 1).
///
/// The runtime is built before the timer starts and shut down after it
/// stops; the first task of each chain is spawned from the calling thread
/// (through the runtime's injection queue), every later one from inside the
/// runtime by its predecessor. Stops creating tasks once `budget` is spent.
///
/// # Panics
///
/// If the runtime cannot be built (the OS refuses its worker threads), or if
/// called from inside an async runtime (the runtime cannot be dropped there).
pub fn tokio_chain(workers: usize, chains: usize, total: u64, budget: Duration) -> ChainOut {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .build()
        .expect("tokio_chain: cannot build the tokio runtime");
    let out = run_chains(chains, total, budget, |shared, len| {
        drop(rt.spawn(async move {
            tokio_link(shared, len, 0);
        }));
    });
    // Null tasks yield nowhere, so anything left (only after a drain
    // timeout) is dropped at once; bound the wait all the same.
    rt.shutdown_timeout(DRAIN_GRACE);
    out
}

// ---------------------------------------------------------------- std::thread

/// The body of one OS thread: link `done + 1` of a chain with `left` links
/// still to run (this one included).
fn std_link(shared: Arc<Shared>, left: u64, done: u64) {
    let done = done + 1;
    if left > 1 && shared.go_on() {
        let next = Arc::clone(&shared);
        // Detached: the JoinHandle is dropped at once.
        match std::thread::Builder::new().spawn(move || std_link(next, left - 1, done)) {
            Ok(handle) => drop(handle),
            Err(_) => shared.chain_failed(done),
        }
    } else {
        shared.chain_finished(done);
    }
}

/// Table III on OS threads: `chains` chains of detached
/// `std::thread::Builder::spawn`ed null threads (default stack size),
/// `total` threads in all, each created by its predecessor.
///
/// OS threads cost tens of microseconds each, so a large `total` usually
/// runs into `budget`: the chains then stop, `completed` is `false` and
/// `threads` counts the threads that ran. If the OS refuses a thread, that
/// chain ends there and `completed` is `false` too.
///
/// A chain's end is timed when its last thread's closure returns; the OS's
/// tear-down of that one detached thread is left outside the timer.
pub fn std_thread_chain(chains: usize, total: u64, budget: Duration) -> ChainOut {
    run_chains(chains, total, budget, |shared, len| {
        let next = Arc::clone(&shared);
        match std::thread::Builder::new().spawn(move || std_link(next, len, 0)) {
            Ok(handle) => drop(handle),
            Err(_) => shared.chain_failed(0),
        }
    })
}

// ---------------------------------------------------------------- may

/// may's worker count, fixed by the first call to [`may_chain`].
static MAY_WORKERS: OnceLock<usize> = OnceLock::new();

/// Spawns a detached may coroutine running `f`.
fn may_spawn(f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    // SAFETY: may 0.3 marks spawning unsafe for two reasons: a coroutine
    // must not access thread-local storage (it can move to another worker
    // thread at any yield point, so TLS it saw may belong to a different
    // thread afterwards), and it must not overflow its fixed stack. Every closure spawned here is a
    // null link: it touches only an `Arc<Shared>` (atomics, `Instant`, and
    // `Thread::unpark` on a handle captured by the caller), calls back into
    // may to spawn, and uses a few hundred bytes of stack, far below may's
    // default coroutine stack. No TLS is read or written by this code.
    let handle = unsafe { may::coroutine::Builder::new().spawn(f) }?;
    // Detached: may's JoinHandle has no Drop side effect beyond releasing
    // its reference to the coroutine's result.
    drop(handle);
    Ok(())
}

/// The body of one may coroutine: link `done + 1` of a chain with `left`
/// links still to run (this one included).
fn may_link(shared: Arc<Shared>, left: u64, done: u64) {
    let done = done + 1;
    if left > 1 && shared.go_on() {
        let next = Arc::clone(&shared);
        if may_spawn(move || may_link(next, left - 1, done)).is_err() {
            shared.chain_failed(done);
        }
    } else {
        shared.chain_finished(done);
    }
}

/// Configures may's global scheduler on the first call only and starts it
/// (outside any timer); returns the worker count in force.
fn may_init(workers: usize) -> usize {
    static START: Once = Once::new();
    let configured = *MAY_WORKERS.get_or_init(|| {
        let workers = workers.max(1);
        may::config().set_workers(workers);
        workers
    });
    START.call_once(|| {
        // may creates its scheduler and worker threads lazily on the first
        // spawn; do that here with a null coroutine so no run times it.
        let (tx, rx) = std::sync::mpsc::channel();
        may_spawn(move || {
            let _ = tx.send(());
        })
        .expect("may_chain: cannot start may's scheduler");
        rx.recv()
            .expect("may_chain: may's first coroutine never ran");
    });
    configured
}

/// The number of may worker threads in force in this process, once
/// [`may_chain`] has configured it (`None` before its first call).
pub fn may_workers() -> Option<usize> {
    MAY_WORKERS.get().copied()
}

/// Table III on may: `chains` chains of detached may coroutines (default
/// coroutine stack), `total` coroutines in all, each spawned by its
/// predecessor. Stops creating coroutines once `budget` is spent.
///
/// may's scheduler is global to the process and reads its configuration
/// only when it starts, which it does on first use and never again. So the
/// first call to `may_chain` sets `may::config().set_workers(workers)`
/// (at least 1) and starts the scheduler outside the timer; **every later
/// call reuses that first configuration, whatever `workers` it passes**.
/// [`may_workers`] tells the count actually in force. If other code in the
/// process used may first, its configuration wins instead. may's other
/// settings keep their defaults, including pinning its workers to cores.
///
/// # Panics
///
/// If may's scheduler cannot be started on the first call.
pub fn may_chain(workers: usize, chains: usize, total: u64, budget: Duration) -> ChainOut {
    may_init(workers);
    run_chains(chains, total, budget, |shared, len| {
        let next = Arc::clone(&shared);
        if may_spawn(move || may_link(next, len, 0)).is_err() {
            shared.chain_failed(0);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: Duration = Duration::from_secs(20);

    fn check_complete(out: ChainOut, total: u64) {
        assert!(out.completed, "{out:?}");
        assert_eq!(out.threads, total, "{out:?}");
        assert!(out.elapsed > Duration::ZERO, "{out:?}");
        assert!(out.ns_per_thread().is_finite() && out.ns_per_thread() > 0.0);
    }

    #[test]
    fn chain_lengths_split_total() {
        for chains in 1..=7 {
            for total in [1u64, 2, 5, 100, 2_001] {
                let lens: Vec<u64> = (0..chains).map(|i| chain_len(i, chains, total)).collect();
                assert_eq!(lens.iter().sum::<u64>(), total);
                let (min, max) = (lens.iter().min().unwrap(), lens.iter().max().unwrap());
                assert!(max - min <= 1, "{lens:?}");
            }
        }
    }

    #[test]
    fn empty_run_is_complete() {
        let out = std_thread_chain(2, 0, BUDGET);
        assert!(out.completed && out.threads == 0);
        assert!(out.ns_per_thread().is_nan());
    }

    #[test]
    fn tokio_runs_every_link() {
        check_complete(tokio_chain(2, 2, 2_000, BUDGET), 2_000);
        check_complete(tokio_chain(1, 3, 1_001, BUDGET), 1_001);
        // More chains than links: one link each.
        check_complete(tokio_chain(2, 8, 5, BUDGET), 5);
    }

    #[test]
    fn std_threads_run_every_link() {
        check_complete(std_thread_chain(2, 2_000, BUDGET), 2_000);
        check_complete(std_thread_chain(3, 7, BUDGET), 7);
    }

    #[test]
    fn may_runs_every_link() {
        check_complete(may_chain(2, 2, 2_000, BUDGET), 2_000);
        check_complete(may_chain(2, 3, 1_001, BUDGET), 1_001);
        assert_eq!(may_workers(), Some(2));
        // Later calls keep the first configuration.
        check_complete(may_chain(1, 1, 10, BUDGET), 10);
        assert_eq!(may_workers(), Some(2));
    }

    #[test]
    fn std_threads_honour_the_budget() {
        let wall = Instant::now();
        let out = std_thread_chain(2, u64::MAX / 2, Duration::from_millis(1));
        let wall = wall.elapsed();
        assert!(!out.completed, "{out:?}");
        assert!(out.threads >= 2, "every chain runs its first link: {out:?}");
        assert!(out.threads < 1_000_000, "{out:?}");
        assert!(wall < Duration::from_millis(500), "took {wall:?}");
        assert!(out.ns_per_thread().is_finite());
    }

    #[test]
    fn tokio_and_may_honour_the_budget() {
        let out = tokio_chain(2, 2, u64::MAX / 2, Duration::from_millis(5));
        assert!(!out.completed && out.threads >= 2, "{out:?}");
        assert!(out.elapsed < Duration::from_millis(500), "{out:?}");
        let out = may_chain(2, 2, u64::MAX / 2, Duration::from_millis(5));
        assert!(!out.completed && out.threads >= 2, "{out:?}");
        assert!(out.elapsed < Duration::from_millis(500), "{out:?}");
    }
}
