//! Thread-management strategies (ALL89 §III) and the scheduler object
//! (PRESTO §2): where control blocks, stacks and ready threads live, and
//! which locks guard them.
//!
//! A [`Strategy`] implements the Table I operations that touch shared data:
//! *create* (allocate a control block, copy the arguments in, make it
//! ready), *signal* (make a blocked thread ready), and *finish + start*
//! (free the finished thread's stack and control block, take the next ready
//! thread, bind a stack to it if it has none). The runtime does the rest
//! (context switches, the park word, idling).
//!
//! Strategies are type parameters of [`crate::Runtime`], and each is itself
//! generic over the spin lock `L` that guards its shared structures and the
//! ready-pool discipline `Q` ([`ReadyPool`], PRESTO's customizable
//! scheduler). Everything is monomorphized: a user-written pool costs what
//! a built-in one costs.
//!
//! | strategy | ALL89 | ready threads | control blocks, stacks |
//! |---|---|---|---|
//! | [`SingleLock`] | §III-A | central | central; one lock for all three |
//! | [`MultiLock`] | §III-B | central, own lock | central, a lock each |
//! | [`LocalFreelist`] | §III-C | central, locked | per processor, unlocked, balanced through a locked global pool (threshold T, half a list moves); at most one local stack |
//! | [`IdleQueue`] | §III-D | central, locked, plus a central queue of idle processors that spin on their own flags | as local-freelist |
//! | [`LocalReadyq`] | §III-E | per processor, locked, random placement, idle processors scan from their own | as local-freelist |

use std::sync::Arc;
use symmetry_locks::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use lock_api::RawMutex;

use crate::cb::{CbList, CbRef, Stack};
use crate::stack::StackError;

mod idle_queue;
mod local_freelist;
mod local_readyq;
mod multi_lock;
mod newest_first;
mod single_lock;

pub use idle_queue::IdleQueue;
pub use local_freelist::LocalFreelist;
pub use local_readyq::LocalReadyq;
pub use multi_lock::MultiLock;
pub use newest_first::NewestFirst;
pub use single_lock::SingleLock;

/// PRESTO's scheduler object: the discipline of a pool of ready threads.
/// The strategy guards each pool with its lock, so methods take `&mut self`.
///
/// Implement it to plug a custom discipline (LIFO, priorities, ...) into
/// any strategy: `Runtime<LocalReadyq<Tas, MyPool>>`.
pub trait ReadyPool: Default + Send + 'static {
    /// Whether a processor keeps the threads it makes ready in its own
    /// pool, where the strategy has one per processor (`local-readyq`),
    /// rather than spreading them over the pools at random as ALL89's
    /// Table III runs do (§III-E). Idle processors scan every pool either
    /// way, so no ready thread waits on a busy processor for long; local
    /// placement keeps a thread's control block and stack in the cache of
    /// the processor that made it.
    const LOCAL_FIRST: bool = false;
    /// Adds a ready thread.
    fn push(&mut self, t: CbRef);
    /// Removes the thread to run next.
    fn pop(&mut self) -> Option<CbRef>;
    /// Number of ready threads in the pool.
    fn len(&self) -> usize;
    /// Whether the pool is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// ALL89's discipline: first in, first out, on the intrusive link. The
/// papers' experiments run every strategy with it
/// (`SingleLock<Tas, Fifo>`, ...); the strategies' default is
/// [`NewestFirst`], which runs fan-out programs depth-first.
#[derive(Debug, Default)]
pub struct Fifo(CbList);

impl ReadyPool for Fifo {
    #[inline(always)]
    fn push(&mut self, t: CbRef) {
        self.0.push_back(t)
    }
    #[inline(always)]
    fn pop(&mut self) -> Option<CbRef> {
        self.0.pop_front()
    }
    #[inline(always)]
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// A ready pool behind a spin lock, with its length mirrored in an atomic
/// so that idle processors can check "is it empty?" without taking the
/// lock (ALL89 §III-A: "check that the ready queue is not empty before
/// acquiring the lock").
pub(crate) struct LockedPool<Q, L: RawMutex> {
    lock: lock_api::Mutex<L, Q>,
    /// Mirror of the pool's length, written under the lock.
    len: AtomicUsize,
}

impl<Q: ReadyPool, L: RawMutex> LockedPool<Q, L> {
    pub(crate) fn new() -> Self {
        LockedPool {
            lock: lock_api::Mutex::new(Q::default()),
            len: AtomicUsize::new(0),
        }
    }

    /// Pushes under the lock.
    #[inline(always)]
    pub(crate) fn push(&self, t: CbRef) {
        let mut q = self.lock.lock();
        q.push(t);
        // Relaxed: the lock orders the pool itself; the mirror is a hint
        // for lock-free emptiness checks, re-checked under the lock.
        self.len.store(q.len(), Ordering::Relaxed);
    }

    /// Pops under the lock, skipping the lock when the pool looks empty.
    #[inline(always)]
    pub(crate) fn pop(&self) -> Option<CbRef> {
        if self.looks_empty() {
            return None;
        }
        let mut q = self.lock.lock();
        let t = q.pop();
        // Relaxed: see `push`.
        self.len.store(q.len(), Ordering::Relaxed);
        t
    }

    /// The lock-free emptiness hint.
    #[inline(always)]
    pub(crate) fn looks_empty(&self) -> bool {
        // Relaxed: a hint; callers that must not miss work pair it with a
        // SeqCst fence (see `runtime::Sleepers`).
        self.len.load(Ordering::Relaxed) == 0
    }
}

/// Per-processor counters, written only by their processor (relaxed load
/// and store, no read-modify-write) and read by anyone.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ProcStats {
    /// Threads created on this processor.
    pub created: AtomicU64,
    /// Threads that finished on this processor.
    pub finished: AtomicU64,
    /// Threads dispatched (started or resumed) from a ready queue.
    pub dequeues: AtomicU64,
    /// Ready queues examined by those dequeues (ALL89 §III-G; 1 per
    /// dequeue for the central strategies).
    pub queues_examined: AtomicU64,
    /// Scans of every queue that found nothing.
    pub empty_scans: AtomicU64,
    /// Times the processor parked (went to sleep in the kernel) when idle.
    pub parks: AtomicU64,
}

impl ProcStats {
    /// Adds `n` to a counter owned by the calling processor.
    #[inline(always)]
    pub(crate) fn bump(c: &AtomicU64, n: u64) {
        // Relaxed load + store: only the owning processor writes.
        c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }
}

/// Allocation of fresh control blocks and stacks, shared by a runtime and
/// its strategy. Fresh allocations are the slow path; free lists are the
/// fast one. Every control block is recorded in the arena, which frees them
/// when the runtime is dropped.
#[derive(Debug)]
pub struct Allocator {
    stack_size: usize,
    arena: std::sync::Mutex<Vec<CbRef>>,
    cbs: AtomicU64,
    stacks: AtomicU64,
    stack_error: std::sync::Mutex<Option<StackError>>,
}

impl Allocator {
    pub(crate) fn new(stack_size: usize) -> Self {
        Allocator {
            stack_size,
            arena: std::sync::Mutex::new(Vec::new()),
            cbs: AtomicU64::new(0),
            stacks: AtomicU64::new(0),
            stack_error: std::sync::Mutex::new(None),
        }
    }

    /// A new control block from the heap (free lists were empty).
    #[cold]
    #[inline(never)]
    pub fn fresh_cb(&self) -> CbRef {
        let cb = CbRef::alloc();
        self.arena
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(cb);
        self.cbs.fetch_add(1, Ordering::Relaxed);
        cb
    }

    /// A new stack from the process-wide slabs (free lists were empty),
    /// or `None` if none could be had: the error is kept (see
    /// [`Allocator::stack_error`]), and a strategy dispatches the starting
    /// thread without a stack, which makes the runtime fail that thread's
    /// start with this error (its join handle returns
    /// [`JoinError::NoStack`](crate::JoinError::NoStack)).
    #[cold]
    #[inline(never)]
    pub fn fresh_stack(&self) -> Option<Stack> {
        match Stack::new(self.stack_size) {
            Ok(s) => {
                self.stacks.fetch_add(1, Ordering::Relaxed);
                Some(s)
            }
            Err(e) => {
                *self.stack_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                None
            }
        }
    }

    /// The last error of [`Allocator::fresh_stack`], if any.
    pub fn stack_error(&self) -> Option<StackError> {
        self.stack_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Control blocks allocated so far.
    pub fn cbs_allocated(&self) -> u64 {
        self.cbs.load(Ordering::Relaxed)
    }

    /// Stacks allocated so far.
    pub fn stacks_allocated(&self) -> u64 {
        self.stacks.load(Ordering::Relaxed)
    }

    /// A copy of the arena (at shutdown).
    pub(crate) fn arena_snapshot(&self) -> Vec<CbRef> {
        self.arena.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Removes `cbs` from the arena: they are never freed (an abandoned
    /// thread's control block, which stray wake-ups may still reach).
    pub(crate) fn forget_cbs(&self, cbs: &[CbRef]) {
        if cbs.is_empty() {
            return;
        }
        let gone: std::collections::HashSet<CbRef> = cbs.iter().copied().collect();
        let mut a = self.arena.lock().unwrap_or_else(|e| e.into_inner());
        a.retain(|c| !gone.contains(c));
    }

    /// Takes the arena (at runtime teardown).
    pub(crate) fn take_arena(&self) -> Vec<CbRef> {
        std::mem::take(&mut *self.arena.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// What a runtime hands its strategy at construction.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Env {
    /// Number of processors.
    pub processors: usize,
    /// Number of ready queues for [`LocalReadyq`] (ALL89 uses one per
    /// processor; `tm-queue-search` sets it to 18).
    pub queues: usize,
    /// Free-list threshold T (ALL89 §III-C sets T = P).
    pub threshold: usize,
    /// Polls an idle processor makes before it parks.
    pub idle_spins: u32,
    /// Seed for random placement.
    pub seed: u64,
    /// Fresh control blocks and stacks.
    pub alloc: Arc<Allocator>,
    /// Per-processor counters.
    pub stats: Arc<[CachePadded<ProcStats>]>,
    /// Set when the runtime shuts down.
    pub shutdown: Arc<AtomicBool>,
}

/// A finished thread handed back to the strategy: its control block (reset,
/// ready for a free list) and its stack.
#[non_exhaustive]
pub struct Finished {
    /// The control block.
    pub cb: CbRef,
    /// Its stack.
    pub stack: Stack,
}

/// The next thread for a processor: the control block, plus a stack when
/// the thread has not started yet (bound here, at start, as in ALL89). A
/// thread that has not started and comes without a stack (no stack could
/// be had) fails to start: its join handle returns
/// [`JoinError::NoStack`](crate::JoinError::NoStack).
#[non_exhaustive]
pub struct Dispatch {
    /// The thread.
    pub cb: CbRef,
    /// Its stack, if it is starting.
    pub stack: Option<Stack>,
}

impl Dispatch {
    /// Runs `cb`: starts it on `stack` if it has not started, resumes it
    /// (`stack` is `None`) if it has.
    pub fn new(cb: CbRef, stack: Option<Stack>) -> Dispatch {
        Dispatch { cb, stack }
    }
}

impl std::fmt::Debug for Finished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Finished")
            .field("cb", &self.cb)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Dispatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatch")
            .field("cb", &self.cb)
            .field("starting", &self.stack.is_some())
            .finish()
    }
}

/// What an idle processor does when its strategy manages idling itself
/// ([`Strategy::OWN_IDLE`]).
#[derive(Debug)]
pub enum Idle {
    /// Run this thread.
    Run(Dispatch),
    /// The runtime is shutting down: exit.
    Exit,
}

/// A thread-management strategy. See the module docs.
///
/// `Local` is per-processor state; `None` is passed instead when the
/// operation comes from outside the runtime (an OS thread that is not one
/// of its processors), and the strategy then uses its shared structures.
pub trait Strategy: Sized + Send + Sync + 'static {
    /// Registry name (`single-lock`, ...).
    const NAME: &'static str;
    /// Whether the strategy idles its processors itself (`idle`), rather
    /// than the runtime's poll-then-park loop over [`Strategy::has_ready`].
    const OWN_IDLE: bool = false;
    /// Per-processor state.
    type Local: Send + 'static;

    /// Builds the shared structures.
    fn new(env: Env) -> Self;
    /// Builds processor `proc`'s local state.
    fn new_local(&self, proc: usize) -> Self::Local;
    /// Preallocates ("warm starts", ALL89 §III-F) `cbs` control blocks and
    /// `stacks` stacks into the free lists.
    fn warm(&self, cbs: usize, stacks: usize);

    /// Table I *create*: takes a free control block, calls `init` on it
    /// (which copies in the arguments), and makes it ready.
    fn create<I: FnOnce(CbRef)>(&self, cx: Option<&mut Self::Local>, init: I);
    /// Table I *signal*: makes a blocked (or yielding) thread ready.
    fn ready(&self, cx: Option<&mut Self::Local>, t: CbRef);
    /// Table I *finish* (of `done`, if any) followed by *start*/*resume*
    /// of the next ready thread, binding a stack if it has none. `None`
    /// when no thread is ready.
    fn schedule(&self, cx: &mut Self::Local, done: Option<Finished>) -> Option<Dispatch>;
    /// Whether some thread looks ready (lock-free hint; the runtime pairs
    /// it with a SeqCst fence before parking).
    fn has_ready(&self) -> bool;
    /// The strategy's own idle protocol (only if `OWN_IDLE`).
    fn idle(&self, _cx: &mut Self::Local) -> Idle {
        Idle::Exit
    }
    /// Wakes processors idling in the strategy's own protocol (shutdown).
    fn wake_all(&self) {}
    /// Allocates a control block without making it ready (PRESTO's create
    /// without start); returned by [`Strategy::release_cb`].
    fn alloc_cb(&self, cx: Option<&mut Self::Local>) -> CbRef;
    /// Returns a control block that never started to the free lists.
    fn release_cb(&self, cx: Option<&mut Self::Local>, cb: CbRef);
    /// Moves a processor's local free lists to the shared pools (processor
    /// exit), so they can be counted and reused.
    fn retire_local(&self, cx: Self::Local);
    /// Control blocks and stacks on the shared free lists (all local ones
    /// retired).
    fn free_counts(&self) -> (u64, u64);
}

/// Takes up to `n` stacks from a vector (warm start helper).
pub(crate) fn warm_stacks(alloc: &Allocator, n: usize) -> Vec<Stack> {
    (0..n).map_while(|_| alloc.fresh_stack()).collect()
}

/// Allocates `n` fresh control blocks as a list.
pub(crate) fn warm_cbs(alloc: &Allocator, n: usize) -> CbList {
    let mut l = CbList::new();
    for _ in 0..n {
        l.push_back(alloc.fresh_cb());
    }
    l
}

/// The per-processor random generator for random placement.
pub(crate) use symmetry_locks::platform::rng::SplitMix64 as Rng;
