//! Where a workload's threads run: OS threads or user threads.
//!
//! A workload is written once against [`Exec`] and runs on either
//! executor:
//!
//! | executor | workers | barrier | yield | locks to pair it with |
//! |---|---|---|---|---|
//! | [`OsThreads`] | `std::thread::scope` threads | `std::sync::Barrier` | `std::thread::yield_now` | `SpinThenBlock<P, Futex>`, std, parking_lot, pthread |
//! | [`UserThreads`] | user threads of a `symmetry-threads` runtime (`single-lock` strategy) | `symmetry_threads::sync::Barrier` | `symmetry_threads::yield_now` | `SpinThenBlock<P, UserBlocker>` |
//!
//! On [`UserThreads`] the workers must block only through primitives that
//! block *user* threads (the executor's barrier, `UserBlocker` locks): a
//! std primitive would block the whole processor (KLMO91 §5: a blocked
//! thread should hand its processor to a ready one).
//!
//! Timing. [`Exec::run`] measures from just before the first worker is
//! spawned to just after the last one is joined. Building and shutting
//! down a user-thread runtime is outside the measured interval.

use std::sync::Arc;
use std::time::{Duration, Instant};

use symmetry_threads::{Fifo, Runtime, SingleLock};

/// A barrier of the executor's kind (blocking for its threads).
pub trait ExecBarrier: Send + Sync {
    /// Waits until all parties arrived; returns `true` in one of them.
    fn wait(&self) -> bool;
}

/// Runs a workload's threads.
pub trait Exec: Send + Sync + 'static {
    /// `os` or `user` (the blocker name of the matching locks).
    const NAME: &'static str;
    /// Runs `threads` workers `body(i)`, `i in 0..threads`, to completion;
    /// returns the wall time from the first start to the last finish.
    fn run(&self, threads: usize, body: Arc<dyn Fn(usize) + Send + Sync>) -> Duration;
    /// A barrier for `parties` threads of this executor.
    fn barrier(&self, parties: usize) -> Arc<dyn ExecBarrier>;
    /// Gives the processor to another thread of this executor.
    fn yield_now(&self);
    /// Processors (OS: cores used; user: the runtime's processors).
    fn processors(&self) -> usize;
}

/// Workers are OS threads (`std::thread::scope`).
#[derive(Debug, Clone, Copy, Default)]
pub struct OsThreads;

/// Workers are user threads of a `symmetry-threads` runtime with
/// `processors` processors, built per run.
#[derive(Debug, Clone, Copy)]
pub struct UserThreads {
    /// Processors (OS threads) of the runtime.
    pub processors: usize,
}

/// The thread-management strategy of the runtime [`UserThreads`] builds
/// (ALL89 §III-A, one central ready queue under one lock: the simplest,
/// and on 2 to 8 processors not a bottleneck for these workloads).
pub type UserStrategy = SingleLock<symmetry_locks::Tas, Fifo>;

/// [`std::sync::Barrier`] as an [`ExecBarrier`].
struct OsBarrier(std::sync::Barrier);

impl ExecBarrier for OsBarrier {
    fn wait(&self) -> bool {
        self.0.wait().is_leader()
    }
}

/// [`symmetry_threads::sync::Barrier`] as an [`ExecBarrier`].
struct UserBarrier(symmetry_threads::sync::Barrier);

impl ExecBarrier for UserBarrier {
    fn wait(&self) -> bool {
        self.0.wait().is_leader()
    }
}

impl Exec for OsThreads {
    const NAME: &'static str = "os";

    /// Spawns `threads` (at least one) scoped OS threads and joins them.
    /// A panic in a worker is re-raised here once all workers finished.
    fn run(&self, threads: usize, body: Arc<dyn Fn(usize) + Send + Sync>) -> Duration {
        let threads = threads.max(1);
        let start = Instant::now();
        std::thread::scope(|s| {
            for i in 0..threads {
                let body = Arc::clone(&body);
                std::thread::Builder::new()
                    .name(format!("workload-{i}"))
                    .spawn_scoped(s, move || body(i))
                    .expect("the OS refused to start a workload thread");
            }
        });
        start.elapsed()
    }

    fn barrier(&self, parties: usize) -> Arc<dyn ExecBarrier> {
        Arc::new(OsBarrier(std::sync::Barrier::new(parties.max(1))))
    }

    fn yield_now(&self) {
        std::thread::yield_now();
    }

    fn processors(&self) -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

impl UserThreads {
    /// An executor with `processors` processors (`0` is taken as 1).
    pub fn new(processors: usize) -> Self {
        UserThreads {
            processors: processors.max(1),
        }
    }

    /// An executor with one processor per available CPU.
    pub fn per_cpu() -> Self {
        Self::new(OsThreads.processors())
    }
}

impl Exec for UserThreads {
    const NAME: &'static str = "user";

    /// Builds a runtime of [`UserStrategy`] with `processors` processors,
    /// spawns `threads` (at least one) user threads from this OS thread,
    /// joins them all, and shuts the runtime down. Only spawn-to-join is
    /// timed.
    ///
    /// # Panics
    /// If the OS refuses to start the runtime's processors, or a worker
    /// panicked (its panic is re-raised after every worker was joined).
    fn run(&self, threads: usize, body: Arc<dyn Fn(usize) + Send + Sync>) -> Duration {
        let threads = threads.max(1);
        let mut rt: Runtime<UserStrategy> = Runtime::builder()
            .processors(self.processors.max(1))
            .name("workload-proc")
            .build()
            .unwrap_or_else(|e| panic!("cannot start a user-thread runtime: {e}"));
        let handle = rt.handle();
        let start = Instant::now();
        let joins: Vec<_> = (0..threads)
            .map(|i| {
                let body = Arc::clone(&body);
                handle
                    .builder()
                    .name(format!("workload-{i}"))
                    .spawn(move || body(i))
            })
            .collect();
        let mut failure = None;
        for j in joins {
            if let Err(e) = j.join() {
                failure.get_or_insert(e);
            }
        }
        let elapsed = start.elapsed();
        rt.shutdown();
        if let Some(e) = failure {
            match e {
                symmetry_threads::JoinError::Panicked { payload, .. } => {
                    std::panic::resume_unwind(payload)
                }
                other => panic!("workload user thread failed: {other}"),
            }
        }
        elapsed
    }

    fn barrier(&self, parties: usize) -> Arc<dyn ExecBarrier> {
        Arc::new(UserBarrier(symmetry_threads::sync::Barrier::new(
            parties.max(1),
        )))
    }

    fn yield_now(&self) {
        symmetry_threads::yield_now();
    }

    fn processors(&self) -> usize {
        self.processors.max(1)
    }
}
