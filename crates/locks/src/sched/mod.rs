//! The scheduler interface of SMARTQ §3: the *context block* a worker
//! shares with the scheduler that runs it, and the trait through which a
//! preemption-safe lock talks to that scheduler.
//!
//! ## The context block
//!
//! SMARTQ Fig. 3 gives every worker one word of state, written by the
//! worker, by the scheduler and by lock releasers on other processors:
//!
//! | [`State`] | set by | meaning |
//! |---|---|---|
//! | `Preemptable` | the worker | it may be descheduled at any time |
//! | `UnpreemptableSelf` | the worker | it asked not to be preempted (it is about to enqueue, or holds a lock) |
//! | `UnpreemptableOther` | a releaser, by CAS | a releaser chose it as the next holder and made it unpreemptable on its behalf |
//! | `Preempted` | the scheduler, by CAS from `Preemptable` (or by force) | it is not running |
//!
//! Transitions: the scheduler deschedules a worker by CAS `Preemptable ->
//! Preempted`; a releaser claims a waiter by CAS `UnpreemptableSelf ->
//! UnpreemptableOther` or `Preemptable -> UnpreemptableOther`, in that
//! order, so that a waiter moving from the first to the second between the
//! two attempts is still caught. Because both the scheduler and the
//! releaser CAS from the same values, exactly one of them wins: a waiter
//! is never given the lock after the scheduler took its processor, and
//! never descheduled after a releaser chose it. A request for
//! non-preemption is honoured at most once per quantum: the scheduler then
//! sets the *warning* flag, and a worker that leaves its critical section
//! with the warning set gives its processor back ([`Scheduler::yield_now`]).
//!
//! The block also counts the preemption-safe locks the worker holds
//! (`depth`), so that a worker holding one lock stays unpreemptable while
//! it waits for a second (SMARTQ assumes one lock at a time; with nesting,
//! the inner lock must not make the outer critical section preemptable).
//!
//! Each OS thread has one context block ([`current`]), shared by every
//! scheduler: a scheduler interface is a way of *using* it.
//!
//! ## Schedulers
//!
//! [`Scheduler`] is a type parameter of every preemption-safe lock, so the
//! hooks compile to nothing where a scheduler does not need them:
//!
//! * [`Stock`]: stock Linux, no kernel help. Nothing ever reads the block;
//!   the locks detect preemption themselves, from their waiters'
//!   heartbeats (`mcs-tp`, and `smart-q` and `mcs-np` through it), or
//!   outlast it (`handshake` rescinds a silent successor; every waiter
//!   spins for a bounded time and then yields).
//! * [`emulated::Emulated`] (Linux): SMARTQ §4.1's user-level scheduler,
//!   which multiprograms worker OS threads by signal.
//! * [`rseq::RseqSlice`] (Linux): the kernel's rseq time-slice extension,
//!   where the running kernel offers it ([`rseq::available`]).

use core::sync::atomic::compiler_fence;

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicBool, AtomicU8, AtomicU32, Ordering};

#[cfg(all(target_os = "linux", not(loom)))]
pub mod emulated;
#[cfg(all(target_os = "linux", not(loom)))]
pub mod rseq;

/// A worker's scheduling state (SMARTQ Fig. 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    /// Not running: the scheduler took its processor.
    Preempted = 0,
    /// Running, and may be descheduled.
    Preemptable = 1,
    /// Running, and asked not to be descheduled.
    UnpreemptableSelf = 2,
    /// Running, and made unpreemptable by a releaser that chose it.
    UnpreemptableOther = 3,
}

impl State {
    fn from_u8(v: u8) -> State {
        match v {
            0 => State::Preempted,
            1 => State::Preemptable,
            2 => State::UnpreemptableSelf,
            _ => State::UnpreemptableOther,
        }
    }
}

/// SMARTQ's context block: one per worker, shared with its scheduler and
/// with the releasers of the locks it waits for.
///
/// A preemption-safe lock marks its holder unpreemptable in the holder's
/// block ([`current`]) for as long as it holds the lock:
///
/// ```
/// use symmetry_locks::sched::{self, State};
/// use symmetry_locks::{TasNp, lock_api::Mutex};
///
/// let m: Mutex<TasNp, u32> = Mutex::new(0);
/// let cb = sched::current();
/// assert_eq!(cb.state(), State::Preemptable);
/// {
///     let mut n = m.lock();
///     *n += 1;
///     assert_eq!(cb.state(), State::UnpreemptableSelf); // do not preempt me now
/// }
/// assert_eq!(cb.state(), State::Preemptable);
/// ```
#[derive(Debug)]
pub struct ContextBlock {
    /// A [`State`]; see the module docs for who writes which value.
    state: AtomicU8,
    /// Set by the scheduler when it extended the quantum (honoured a
    /// non-preemption request); cleared at the start of each quantum.
    warning: AtomicBool,
    /// Preemption-safe locks held (or being acquired) by the owner;
    /// touched only by the owner.
    depth: AtomicU32,
}

impl ContextBlock {
    crate::sync::maybe_const_fn! {
        /// A block in state `Preemptable`, no warning, no lock held.
        pub fn new() -> ContextBlock {
            ContextBlock {
                state: AtomicU8::new(State::Preemptable as u8),
                warning: AtomicBool::new(false),
                depth: AtomicU32::new(0),
            }
        }
    }

    /// The current state.
    #[inline]
    pub fn state(&self) -> State {
        // Acquire: pairs with the Release transitions below, so a releaser
        // that sees `Preemptable` also sees the waiter's node set up.
        State::from_u8(self.state.load(Ordering::Acquire))
    }

    /// Whether the scheduler has warned the worker (extended its quantum).
    #[inline]
    pub fn warned(&self) -> bool {
        // Relaxed: a hint; a late read costs one extension, never safety.
        self.warning.load(Ordering::Relaxed)
    }

    /// Scheduler side: sets the warning flag (a non-preemption request was
    /// honoured this quantum).
    pub fn warn(&self) {
        self.warning.store(true, Ordering::Relaxed);
    }

    /// Scheduler side: clears the warning flag (a new quantum begins).
    pub fn clear_warning(&self) {
        self.warning.store(false, Ordering::Relaxed);
    }

    /// Scheduler side: deschedules a `Preemptable` worker (CAS to
    /// `Preempted`). Returns the state that prevented it otherwise.
    pub fn try_preempt(&self) -> Result<(), State> {
        // AcqRel: the CAS races releasers' CAS from the same value; exactly
        // one wins, and the winner sees the other's earlier writes.
        self.state
            .compare_exchange(
                State::Preemptable as u8,
                State::Preempted as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .map(|_| ())
            .map_err(State::from_u8)
    }

    /// Scheduler side: deschedules the worker whatever it asked (the
    /// request was already honoured once this quantum). Returns the state
    /// to give back at [`ContextBlock::resume`].
    pub fn force_preempt(&self) -> State {
        // AcqRel: as in `try_preempt`.
        State::from_u8(self.state.swap(State::Preempted as u8, Ordering::AcqRel))
    }

    /// Scheduler side: the worker runs again, in the state it had.
    pub fn resume(&self, previous: State) {
        // Release: a releaser that claims the worker after this sees
        // everything the scheduler did before.
        self.state.store(previous as u8, Ordering::Release);
    }

    /// Releaser side (SMARTQ Fig. 3): makes a waiter the next holder if it
    /// is running, making it unpreemptable on its behalf. `false`: it is
    /// preempted, skip it.
    ///
    /// The order of the two CAS matters: a waiter that moves from
    /// `UnpreemptableSelf` to `Preemptable` between them is caught by the
    /// second. A waiter already `UnpreemptableOther` holds another lock
    /// (it waits with `depth > 0`) and is running.
    #[inline]
    pub(crate) fn claim_waiter(&self) -> bool {
        for from in [State::UnpreemptableSelf, State::Preemptable] {
            // AcqRel: pairs with the scheduler's CAS in `try_preempt`
            // (one of the two wins) and with the waiter's Release CAS.
            if self
                .state
                .compare_exchange(
                    from as u8,
                    State::UnpreemptableOther as u8,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
            {
                return true;
            }
        }
        self.state() == State::UnpreemptableOther
    }

    /// Locks held (or being acquired) by the owner.
    #[inline]
    pub(crate) fn depth(&self) -> u32 {
        // Relaxed: only the owner writes it.
        self.depth.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set_depth(&self, d: u32) {
        // Relaxed: only the owner reads it.
        self.depth.store(d, Ordering::Relaxed);
    }

    /// Worker side: asks not to be preempted (state `UnpreemptableSelf`),
    /// unless it already holds a lock (then it already is). Returns whether
    /// this call made the request.
    #[inline]
    pub(crate) fn request<S: Scheduler>(&self) -> bool {
        if self.depth() > 0 {
            return false;
        }
        // Relaxed + compiler fence: the state word is read by this
        // thread's signal handler (the emulated scheduler) or by the
        // kernel at preemption, both of which see this thread's program
        // order once the compiler keeps the store ahead of the lock
        // operation that follows. Releasers on other processors see it
        // through the Release that publishes the queue node.
        self.state
            .store(State::UnpreemptableSelf as u8, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        S::request(self);
        true
    }

    /// Worker side: withdraws a request made by [`request`](Self::request)
    /// (state `Preemptable`) without yielding: used while waiting.
    #[inline]
    pub(crate) fn withdraw<S: Scheduler>(&self) {
        compiler_fence(Ordering::SeqCst);
        // Release: pairs with the Acquire of a releaser's or the
        // scheduler's CAS.
        self.state
            .store(State::Preemptable as u8, Ordering::Release);
        S::relinquish(self);
    }

    /// Worker side, waiting in a queue (SMARTQ Fig. 3,
    /// `compare_and_swap(&cb->state, unpreemptable_self, preemptable)`):
    /// withdraws the request unless a releaser already claimed the worker
    /// (`UnpreemptableOther`).
    #[inline]
    pub(crate) fn withdraw_unless_claimed<S: Scheduler>(&self) {
        compiler_fence(Ordering::SeqCst);
        // AcqRel: races the releaser's claim CAS from the same value.
        if self
            .state
            .compare_exchange(
                State::UnpreemptableSelf as u8,
                State::Preemptable as u8,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            S::relinquish(self);
        }
    }

    /// Worker side: one attempt at a lock that does not wait (`attempt`
    /// says whether it took the lock), under a non-preemption request: on
    /// success the critical section begins ([`enter`](Self::enter)),
    /// otherwise the request made here is withdrawn.
    #[inline]
    pub(crate) fn try_enter<S: Scheduler>(&self, attempt: impl FnOnce() -> bool) -> bool {
        let asked = self.request::<S>();
        if attempt() {
            self.enter();
            true
        } else {
            if asked {
                self.withdraw::<S>();
            }
            false
        }
    }

    /// Worker side: the critical section of one more lock begins.
    #[inline]
    pub(crate) fn enter(&self) {
        self.set_depth(self.depth() + 1);
    }

    /// Worker side: the critical section of a lock ends. When it was the
    /// last lock held, the worker becomes preemptable again and, if the
    /// scheduler warned it, gives its processor back (SMARTQ Figs. 2-3,
    /// end of `release_lock`).
    #[inline]
    pub(crate) fn leave<S: Scheduler>(&self) {
        let d = self.depth().saturating_sub(1);
        self.set_depth(d);
        if d == 0 {
            self.withdraw::<S>();
            if S::warned(self) {
                S::yield_now(self);
            }
        }
    }
}

impl Default for ContextBlock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(not(loom))]
std::thread_local! {
    static CONTEXT: CachePadded<ContextBlock> = const { CachePadded::new(ContextBlock::new()) };
}
#[cfg(loom)]
loom::thread_local! {
    static CONTEXT: CachePadded<ContextBlock> = CachePadded::new(ContextBlock::new());
}

/// The calling thread's context block.
///
/// The reference is `'static` in type only: the block lives until the
/// calling thread exits. Locks store it in queue nodes, which are read only
/// while their owner waits in the queue (so is alive); schedulers keep it
/// only for workers they run and join.
#[inline(never)]
pub fn current() -> &'static ContextBlock {
    // Not inlined, for the same reason as `node_pool::take_node`: a user
    // thread may move between OS threads between two calls.
    let p: *const ContextBlock = CONTEXT.with(|c| &**c as *const ContextBlock);
    // SAFETY: the thread-local lives until this thread exits; see above
    // for why no user keeps it longer.
    unsafe { &*p }
}

/// A scheduler as seen by a preemption-safe lock. Chosen at compile time
/// (a type parameter of every such lock), so a hook that a scheduler does
/// not need costs nothing.
///
/// A scheduler that only counts the non-preemption requests of its
/// workers:
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use symmetry_locks::sched::{ContextBlock, Scheduler};
/// use symmetry_locks::{TasNp, lock_api::Mutex};
///
/// static REQUESTS: AtomicU32 = AtomicU32::new(0);
///
/// struct Counting;
///
/// impl Scheduler for Counting {
///     const NAME: &'static str = "counting";
///     const SHOWS_PREEMPTION: bool = false;
///     fn request(_cb: &ContextBlock) {
///         REQUESTS.fetch_add(1, Ordering::Relaxed);
///     }
///     fn yield_now(_cb: &ContextBlock) {
///         std::thread::yield_now();
///     }
/// }
///
/// let m: Mutex<TasNp<Counting>, ()> = Mutex::new(());
/// drop(m.lock());
/// assert_eq!(REQUESTS.load(Ordering::Relaxed), 1);
/// ```
pub trait Scheduler: 'static {
    /// Registry name (`stock`, `emulated`, `rseq`).
    const NAME: &'static str;
    /// Whether the scheduler marks a descheduled worker `Preempted` in its
    /// context block (SMARTQ's two-way interface). Only then can a
    /// releaser see that a waiter is not running.
    const SHOWS_PREEMPTION: bool;

    /// Whether, for the calling thread, a scheduler reads the context
    /// block now and marks it `Preempted` when it deschedules the thread.
    /// [`Stock`] and [`rseq::RseqSlice`] never do; an
    /// [`emulated::Emulated`] scheduler does for the workers of a running
    /// emulation only. Where nobody does, the preemption-safe locks fall
    /// back on time publishing (`mcs_tp`): they learn who runs from the
    /// waiters' heartbeats instead of from the scheduler.
    #[inline(always)]
    fn shows_preemption() -> bool {
        Self::SHOWS_PREEMPTION
    }

    /// The worker just asked not to be preempted.
    #[inline(always)]
    fn request(_cb: &ContextBlock) {}

    /// The worker just withdrew its request.
    #[inline(always)]
    fn relinquish(_cb: &ContextBlock) {}

    /// Whether the scheduler extended the worker's quantum (it must yield
    /// once it leaves its critical section).
    #[inline(always)]
    fn warned(cb: &ContextBlock) -> bool {
        cb.warned()
    }

    /// Gives the processor back after an extension.
    fn yield_now(cb: &ContextBlock);
}

/// Stock Linux: the kernel reads no context block, never extends a quantum
/// on request and never says who is running. The default scheduler of
/// every preemption-safe lock, which then detects preemption itself.
///
/// ```
/// use std::sync::Arc;
/// use symmetry_locks::{McsNp, lock_api::Mutex, sched::Stock};
///
/// // `McsNp` is `McsNp<Stock>`: waiters publish heartbeats, and a releaser
/// // skips one that has stopped beating (it was preempted).
/// let m: Arc<Mutex<McsNp<Stock>, u64>> = Arc::new(Mutex::new(0));
/// let threads: Vec<_> = (0..4)
///     .map(|_| {
///         let m = Arc::clone(&m);
///         std::thread::spawn(move || (0..1000).for_each(|_| *m.lock() += 1))
///     })
///     .collect();
/// threads.into_iter().for_each(|t| t.join().unwrap());
/// assert_eq!(*m.lock(), 4000);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Stock;

impl Scheduler for Stock {
    const NAME: &'static str = "stock";
    const SHOWS_PREEMPTION: bool = false;

    #[inline(always)]
    fn warned(_cb: &ContextBlock) -> bool {
        false
    }

    fn yield_now(_cb: &ContextBlock) {
        #[cfg(not(loom))]
        std::thread::yield_now();
        #[cfg(loom)]
        loom::thread::yield_now();
    }
}

/// The guard state of a preemption-safe lock: the inner lock's guard state
/// `G`, and not `Send`, because the release updates the context block of
/// the thread that acquired (its lock count and non-preemption request).
/// `Sync` when `G` is: sharing `&MutexGuard` lets other threads read the
/// data, never release.
#[derive(Debug)]
pub struct NpGuard<G = ()> {
    inner: G,
    _not_send: core::marker::PhantomData<*const ()>,
}

impl<G> NpGuard<G> {
    #[inline(always)]
    pub(crate) fn new(inner: G) -> Self {
        Self {
            inner,
            _not_send: core::marker::PhantomData,
        }
    }

    #[inline(always)]
    pub(crate) fn into_inner(self) -> G {
        self.inner
    }
}

// SAFETY: a shared guard gives no access to `inner` beyond `&G`, and the
// marker only exists to forbid `Send`.
unsafe impl<G: Sync> Sync for NpGuard<G> {}

// SAFETY: the word is the inner guard's word.
unsafe impl<G: crate::registry::GuardWord> crate::registry::GuardWord for NpGuard<G> {
    #[inline(always)]
    fn into_word(self) -> usize {
        self.inner.into_word()
    }
    #[inline(always)]
    unsafe fn from_word(w: usize) -> Self {
        // SAFETY: forwarded contract.
        Self::new(unsafe { G::from_word(w) })
    }
}

// SAFETY: `()` carries no information.
unsafe impl crate::registry::GuardWord for () {
    #[inline(always)]
    fn into_word(self) -> usize {
        0
    }
    #[inline(always)]
    unsafe fn from_word(_: usize) -> Self {}
}
