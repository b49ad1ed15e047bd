//! Where a workload's threads run: OS threads or user threads.
//!
//! TODO(helper): implement.

use std::sync::Arc;
use std::time::Duration;

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
