//! [`Builder`]: a runtime's settings, and starting its processors.

use std::marker::PhantomData;
use std::sync::Arc;
use symmetry_locks::sync::{AtomicBool, AtomicU64};

use crossbeam_utils::CachePadded;

use super::Runtime;
use super::context::running_for_fault;
use super::panic_note::install_panic_note;
use super::processor::{DefaultProcessor, Processor};
use super::shared::{Shared, ready_hook};
use crate::cb::RuntimeHooks;
use crate::sleepers::Sleepers;
use crate::strategy::{Allocator, Env, ProcStats, Strategy};

/// Configures and builds a [`Runtime`].
///
/// ```
/// use symmetry_threads::{LocalFreelist, Runtime};
///
/// let mut rt = Runtime::<LocalFreelist>::builder()
///     .processors(2)
///     .stack_size(64 * 1024) // small stacks for many small threads
///     .warm(64, 8) // preallocate 64 control blocks and 8 stacks
///     .name("worker") // the processors' OS threads: worker-0, worker-1
///     .build()?;
/// assert_eq!(rt.block_on(|| 6 * 7).unwrap(), 42);
/// assert!(rt.shutdown().nothing_leaked());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Builder<S, P = DefaultProcessor> {
    processors: usize,
    pin: bool,
    stack_size: usize,
    idle_spins: u32,
    queues: Option<usize>,
    threshold: Option<usize>,
    seed: u64,
    warm: (usize, usize),
    name: String,
    _p: PhantomData<fn() -> (S, P)>,
}

/// Default stack size of a user thread: 256 KiB (plus a guard page).
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;

impl<S: Strategy, P: Processor> Default for Builder<S, P> {
    fn default() -> Self {
        Builder {
            processors: std::thread::available_parallelism().map_or(1, |n| n.get()),
            pin: false,
            stack_size: DEFAULT_STACK_SIZE,
            idle_spins: 2000,
            queues: None,
            threshold: None,
            seed: 0x5EED,
            warm: (0, 0),
            name: "symmetry-proc".into(),
            _p: PhantomData,
        }
    }
}

impl<S: Strategy, P: Processor> Builder<S, P> {
    /// Number of processors (worker OS threads); default: available CPUs.
    pub fn processors(mut self, n: usize) -> Self {
        self.processors = n;
        self
    }
    /// Pin processor i to the i-th allowed CPU.
    pub fn pin(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }
    /// Usable stack bytes per user thread (a guard page is added).
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self
    }
    /// Polls an idle processor makes before it parks in the kernel.
    pub fn idle_spins(mut self, n: u32) -> Self {
        self.idle_spins = n;
        self
    }
    /// Ready queues of `local-readyq` (default: one per processor).
    pub fn queues(mut self, n: usize) -> Self {
        self.queues = Some(n);
        self
    }
    /// Free-list threshold T of the local strategies (default: max(P, 2),
    /// ALL89's T = P).
    pub fn threshold(mut self, t: usize) -> Self {
        self.threshold = Some(t);
        self
    }
    /// Seed of random placement.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    /// Preallocates control blocks and stacks (ALL89's "warm start").
    pub fn warm(mut self, cbs: usize, stacks: usize) -> Self {
        self.warm = (cbs, stacks);
        self
    }
    /// Name prefix of the processors' OS threads.
    pub fn name(mut self, prefix: impl Into<String>) -> Self {
        self.name = prefix.into();
        self
    }

    /// Starts the processors.
    ///
    /// Errors: zero processors or queues, or the OS refused a thread.
    pub fn build(self) -> std::io::Result<Runtime<S, P>> {
        let invalid =
            |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, m.to_string());
        if self.processors == 0 {
            return Err(invalid("a runtime needs at least one processor"));
        }
        if self.queues == Some(0) {
            return Err(invalid("local-readyq needs at least one ready queue"));
        }
        crate::stack::install_overflow_handler(running_for_fault);
        install_panic_note();
        let n = self.processors;
        let env = Env {
            processors: n,
            queues: self.queues.unwrap_or(n),
            threshold: self.threshold.unwrap_or(n.max(2)),
            idle_spins: self.idle_spins,
            seed: self.seed,
            alloc: Arc::new(Allocator::new(self.stack_size)),
            stats: (0..n)
                .map(|_| CachePadded::new(ProcStats::default()))
                .collect(),
            shutdown: Arc::new(AtomicBool::new(false)),
        };
        let strategy = S::new(env.clone());
        strategy.warm(self.warm.0, self.warm.1);
        let shared = Arc::new_cyclic(|weak: &std::sync::Weak<Shared<S, P>>| Shared {
            strategy,
            env,
            hooks: RuntimeHooks {
                ready: ready_hook::<S, P>,
                rt: weak.as_ptr() as *const (),
            },
            sleepers: Sleepers::new(n),
            processor: P::default(),
            next_id: AtomicU64::new(1),
            created_outside: AtomicU64::new(0),
            stopped: Arc::new(AtomicBool::new(false)),
            stop_now: AtomicBool::new(false),
            pin: self.pin,
        });
        let mut workers = Vec::with_capacity(n);
        for i in 0..n {
            let s = Arc::clone(&shared);
            let w = std::thread::Builder::new()
                .name(format!("{}-{i}", self.name))
                .spawn(move || s.worker(i));
            match w {
                Ok(w) => workers.push(w),
                Err(e) => {
                    let rt = Runtime {
                        shared,
                        workers,
                        report: None,
                    };
                    drop(rt);
                    return Err(e);
                }
            }
        }
        Ok(Runtime {
            shared,
            workers,
            report: None,
        })
    }
}

impl<S: Strategy> Runtime<S, DefaultProcessor> {
    /// A runtime with `processors` processors and default settings.
    pub fn new(processors: usize) -> std::io::Result<Self> {
        Builder::default().processors(processors).build()
    }
}

impl<S: Strategy, P: Processor> Runtime<S, P> {
    /// A builder with default settings.
    pub fn builder() -> Builder<S, P> {
        Builder::default()
    }
}
