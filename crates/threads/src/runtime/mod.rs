//! The runtime: P processors (worker OS threads) running user threads.
//!
//! Each processor runs the loop of PRESTO's processor object: ask the
//! strategy for the next thread (*finish* of the previous one and *start*
//! or *resume* of the next in one call), switch to it, and handle why it
//! switched back (finished, parked, yielded). When no thread is ready the
//! processor idles: it polls for `idle_spins` rounds, then parks in the
//! kernel, so an idle runtime uses no CPU (KLMO91's reasoning: spin about
//! as long as a block + wake costs, then block).
//!
//! # Files
//!
//! The runtime is split by role, as tokio splits its scheduler. Each file
//! imports only files listed above it, so join handles and blocking
//! primitives (which use `context`) never depend on spawning (which uses
//! `join`):
//!
//! * `processor.rs`: [`Processor`], PRESTO's processor object, and
//!   [`DefaultProcessor`].
//! * `pin.rs`: pinning a processor's OS thread to a CPU.
//! * `context.rs`: the processor context in a thread-local, and the
//!   primitives on the running user thread (current, park, unpark).
//! * `shared.rs`: a runtime's shared state, Table I create and signal,
//!   and the processor-local state.
//! * `stats.rs`: [`Stats`] and [`ShutdownReport`].
//! * `idle.rs`: a processor with nothing to run.
//! * `worker.rs`: a processor's main loop.
//! * `panic_note.rs`: naming the user thread in panic messages.
//! * `mod.rs` (this file): [`Runtime`].
//! * `builder.rs`: [`Builder`], which starts the processors.
//! * `spawn.rs`: [`Handle`], [`ThreadBuilder`], [`Unstarted`],
//!   [`spawn_detached_here`]: creating threads, with join handles.
//! * `shutdown.rs`: [`Runtime::shutdown`], [`Runtime::shutdown_timeout`] and
//!   dropping a runtime; abandoned threads.
//!
//! # Processor-local state
//!
//! A processor publishes a pointer to its [`ProcCtx`](context::ProcCtx) in
//! a thread-local; user code on that processor reaches the strategy's
//! local state through [`Handle`] (see the `shared` module docs).
//!
//! # Shutdown
//!
//! [`Runtime::shutdown`] (and `Drop`) lets every ready thread run to
//! completion or until it blocks, then stops the processors. Threads still
//! blocked at that point can never run again: they are *abandoned* — their
//! stacks and control blocks are leaked, not freed (values they own leak, as
//! at process exit) and the [`ShutdownReport`] counts them. A
//! [`JoinHandle`](crate::JoinHandle) of an abandoned thread returns
//! [`JoinError::Abandoned`](crate::JoinError::Abandoned).

mod builder;
pub(crate) mod context;
mod idle;
mod panic_note;
mod pin;
mod processor;
mod shared;
mod shutdown;
mod spawn;
mod stats;
mod worker;

use std::sync::Arc;

pub use builder::{Builder, DEFAULT_STACK_SIZE};
pub use processor::{DefaultProcessor, Processor};
pub use shutdown::DROP_GRACE;
pub use spawn::{Handle, ThreadBuilder, Unstarted, spawn_detached_here};
pub use stats::{ShutdownReport, Stats};

use crate::strategy::Strategy;
use shared::Shared;

/// A user-level threads runtime: `P` processors running user threads
/// under thread-management strategy `S`. See the crate docs.
///
/// ```
/// use symmetry_threads::{JoinError, LocalReadyq, Runtime};
///
/// let mut rt: Runtime<LocalReadyq> = Runtime::new(2).unwrap(); // 2 processors
/// let h = rt.handle();
/// // block_on runs a user thread and waits for it from this OS thread.
/// let sum = rt
///     .block_on(move || {
///         let kids: Vec<_> = (1..=10u64).map(|i| h.spawn(move || i * i)).collect();
///         kids.into_iter().map(|k| k.join().unwrap()).sum::<u64>()
///     })
///     .unwrap();
/// assert_eq!(sum, 385);
/// // A panic in a user thread comes back from join as an error.
/// let r = rt.spawn(|| -> u32 { panic!("boom") }).join();
/// assert!(matches!(r, Err(JoinError::Panicked { .. })));
/// let report = rt.shutdown();
/// assert!(report.nothing_leaked());
/// ```
pub struct Runtime<S: Strategy, P: Processor = DefaultProcessor> {
    shared: Arc<Shared<S, P>>,
    workers: Vec<std::thread::JoinHandle<()>>,
    report: Option<ShutdownReport>,
}

impl<S: Strategy, P: Processor> std::fmt::Debug for Runtime<S, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("strategy", &S::NAME)
            .field("processors", &self.shared.env.processors)
            .finish_non_exhaustive()
    }
}

impl<S: Strategy, P: Processor> Runtime<S, P> {
    /// The processors' counters, summed.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }
}
