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
//! # Processor-local state
//!
//! A processor publishes a pointer to its [`ProcCtx`] in a thread-local.
//! User code running on that processor reaches the strategy's local state
//! (its free lists, its random generator) through [`Handle`], which checks
//! that the processor belongs to the same runtime; from any other OS thread
//! the strategy's shared path is used. User threads never run concurrently
//! with their processor's loop (switches are cooperative), so the local
//! state has one user at a time; `&mut` references to it never outlive a
//! strategy call.
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

use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};
use symmetry_locks::sync::{AtomicBool, AtomicU64, Ordering};

use corosensei::CoroutineResult;
use crossbeam_utils::CachePadded;

use crate::cb::{CbRef, RuntimeHooks, Switch};
use crate::join::{JoinHandle, Packet};
use crate::sleepers::Sleepers;
use crate::stack::{AltStack, StackError};
use crate::strategy::{Allocator, Dispatch, Env, Finished, Idle, ProcStats, Strategy};

/// PRESTO's processor object, as hooks a user can implement: called on the
/// processor's OS thread at start, before each dispatch, and at exit. The
/// default does nothing and compiles to nothing.
pub trait Processor: Default + Send + Sync + 'static {
    /// The processor `index` starts (on its own OS thread).
    fn on_start(&self, _index: usize) {}
    /// Processor `index` is about to run thread `t`.
    #[inline(always)]
    fn on_dispatch(&self, _index: usize, _t: CbRef) {}
    /// The processor `index` exits.
    fn on_exit(&self, _index: usize) {}
}

/// The built-in processor: no hooks.
#[derive(Debug, Default, Clone, Copy)]
pub struct DefaultProcessor;

impl Processor for DefaultProcessor {}

/// The runtime-independent header of a processor's context; the TLS
/// pointer points at it.
#[repr(C)]
pub(crate) struct ProcHeader {
    /// The runtime (`*const Shared<S, P>`), for identity checks.
    rt: *const (),
    /// `TypeId` of that `Shared<S, P>`, for typed access by type alone.
    rt_type: std::any::TypeId,
    /// Processor index.
    pub(crate) index: usize,
    /// The user thread running on this processor, if any.
    pub(crate) current: Cell<Option<CbRef>>,
}

#[repr(C)]
struct ProcCtx<S: Strategy> {
    header: ProcHeader,
    local: UnsafeCell<S::Local>,
}

thread_local! {
    /// Why the thread whose closure is being dropped unrun could not start
    /// (set by `fail_start` around the drop; read by [`StartFailure`]).
    static START_FAILURE: Cell<Option<StackError>> = const { Cell::new(None) };
}

/// The join packet as the spawned closure holds it. If the closure is
/// dropped unrun because the thread could not start, the packet is
/// completed with the reason, so the joiner is told instead of waiting
/// for a thread that will never run. (Dropped unrun for any other reason,
/// a deleted or abandoned thread, it leaves the packet to the handle.)
struct StartFailure<T>(Option<Arc<Packet<T>>>);

impl<T> Drop for StartFailure<T> {
    fn drop(&mut self) {
        if let Some(p) = self.0.take()
            && let Some(e) = START_FAILURE.with(|f| f.take())
        {
            p.complete(Err(Box::new(crate::join::NoStack(e))));
        }
    }
}

thread_local! {
    static PROC: Cell<*const ProcHeader> = const { Cell::new(std::ptr::null()) };
}

/// The processor header of this OS thread, if it is a processor.
#[inline(never)]
pub(crate) fn proc_header() -> *const ProcHeader {
    // Not inlined: a user thread may migrate between OS threads across a
    // switch, so the TLS address must be recomputed on every call.
    PROC.with(|p| p.get())
}

/// The user thread running on this OS thread, if any.
#[inline(never)]
pub(crate) fn current_cb() -> Option<CbRef> {
    let h = proc_header();
    if h.is_null() {
        None
    } else {
        // SAFETY: a non-null PROC points at the live context of the
        // processor running on this OS thread.
        unsafe { (*h).current.get() }
    }
}

/// The user thread running on this OS thread, for the stack-overflow
/// handler (which runs on this thread, interrupting it).
pub(crate) fn running_for_fault() -> Option<CbRef> {
    // `try_with`: the TLS slot may be gone while the thread exits.
    let h = PROC.try_with(|p| p.get()).ok()?;
    // SAFETY: a non-null PROC points at the live context of the processor
    // running on this OS thread (it is cleared before the context goes);
    // `current` is written only by this thread, which the handler
    // interrupted between instructions.
    (!h.is_null())
        .then(|| unsafe { (*h).current.get() })
        .flatten()
}

/// Chains a note in front of the panic hook in force (once per process):
/// a panic on a processor is announced with the user thread that
/// panicked (`user thread 'name' (id N)`), since the hook itself names
/// only the carrier OS thread (`symmetry-proc-0`). The previous hook still
/// runs, so a hook the program installed keeps working.
fn install_panic_note() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(cb) = current_cb() {
                eprintln!(
                    "symmetry-threads: user thread '{}' (id {}) panicked:",
                    cb.name().unwrap_or("<unnamed>"),
                    cb.id()
                );
            }
            previous(info);
        }));
    });
}

/// Shared state of a runtime.
pub(crate) struct Shared<S: Strategy, P: Processor> {
    pub(crate) strategy: S,
    env: Env,
    hooks: RuntimeHooks,
    sleepers: Sleepers,
    processor: P,
    next_id: AtomicU64,
    created_outside: AtomicU64,
    /// Set once every processor has exited (or been given up on).
    pub(crate) stopped: Arc<AtomicBool>,
    /// Set by [`Runtime::shutdown_timeout`] when its time is nearly out:
    /// processors stop dispatching and exit, leaving ready threads
    /// unrun (abandoned).
    stop_now: AtomicBool,
    pin: bool,
}

// SAFETY: `hooks.rt` is a pointer to this very `Shared`, which is Sync;
// everything else is Send + Sync by construction.
unsafe impl<S: Strategy, P: Processor> Send for Shared<S, P> {}
// SAFETY: as above.
unsafe impl<S: Strategy, P: Processor> Sync for Shared<S, P> {}

impl<S: Strategy, P: Processor> Drop for Shared<S, P> {
    fn drop(&mut self) {
        for cb in self.env.alloc.take_arena() {
            // Control blocks are never freed: a `Thread` handle (Copy,
            // 'static) may outlive the runtime, and must then still point
            // at valid memory. Their wake hooks become no-ops, so a stale
            // `unpark` does nothing. This leaks the runtime's few free
            // control blocks (a few per processor plus the threshold).
            // SAFETY: the last reference to the runtime is going away; the
            // processors have exited and abandoned threads were cleaned up
            // by `shutdown`, so no thread runs on these control blocks.
            unsafe {
                drop((*cb.cb().stack.get()).take());
                cb.drop_entry();
            }
            cb.cb().hooks.set(&NOOP_HOOKS);
        }
    }
}

unsafe fn ready_hook<S: Strategy, P: Processor>(rt: *const (), t: CbRef) {
    // SAFETY: `rt` is the `Shared` whose hooks these are; it outlives its
    // control blocks' parks (the arena is freed with it).
    let shared = unsafe { &*(rt as *const Shared<S, P>) };
    shared.make_ready(t);
}

impl<S: Strategy, P: Processor> Shared<S, P> {
    /// This runtime's context, if the calling OS thread is one of its
    /// processors.
    #[inline(always)]
    fn local_ctx(&self) -> Option<&ProcCtx<S>> {
        let h = proc_header();
        // SAFETY: a non-null PROC points at a live processor context; the
        // `rt` comparison proves it is one of ours, so the cast to our
        // `ProcCtx<S>` is to its real type.
        unsafe {
            if !h.is_null() && (*h).rt == self as *const Self as *const () {
                Some(&*(h as *const ProcCtx<S>))
            } else {
                None
            }
        }
    }

    /// Runs `f` with this processor's strategy-local state, or `None` from
    /// outside.
    #[inline(always)]
    fn with_local<R>(&self, f: impl FnOnce(Option<&mut S::Local>) -> R) -> R {
        match self.local_ctx() {
            // SAFETY: see the module docs: one user of the local state at a
            // time, and the reference ends with `f`.
            Some(ctx) => f(Some(unsafe { &mut *ctx.local.get() })),
            None => f(None),
        }
    }

    /// Table I signal, from anywhere.
    fn make_ready(&self, t: CbRef) {
        self.with_local(|l| self.strategy.ready(l, t));
        if !S::OWN_IDLE {
            self.sleepers.notify_one();
        }
    }

    /// Table I create, from anywhere.
    #[inline(always)]
    fn create<F: FnOnce() + Send + 'static>(&self, f: F, name: Option<Box<str>>, prio: i64) {
        match self.local_ctx() {
            Some(ctx) => self.create_here(ctx, f, name, prio),
            None => self.create_outside(f, name, prio),
        }
    }

    /// Table I create, on processor `ctx` of this runtime.
    #[inline(always)]
    fn create_here<F: FnOnce() + Send + 'static>(
        &self,
        ctx: &ProcCtx<S>,
        f: F,
        name: Option<Box<str>>,
        prio: i64,
    ) {
        let hooks = &self.hooks as *const RuntimeHooks;
        let st = &self.env.stats[ctx.header.index];
        let id = proc_thread_id(ctx.header.index, &st.created);
        let init = move |cb: CbRef| {
            // SAFETY: the strategy hands `init` a free cb it owns.
            unsafe { cb.init(f, id, name, prio, hooks) }
        };
        // SAFETY: as in `with_local`.
        let l = unsafe { &mut *ctx.local.get() };
        self.strategy.create(Some(l), init);
        ProcStats::bump(&st.created, 1);
        // A lone processor that creates a thread is awake and will find
        // it: there is nobody else to wake.
        if !S::OWN_IDLE && self.env.processors > 1 {
            self.sleepers.notify_one();
        }
    }

    /// Table I create, from an OS thread that is not one of our processors.
    fn create_outside<F: FnOnce() + Send + 'static>(
        &self,
        f: F,
        name: Option<Box<str>>,
        prio: i64,
    ) {
        let hooks = &self.hooks as *const RuntimeHooks;
        let id = self.outside_thread_id();
        let init = move |cb: CbRef| {
            // SAFETY: the strategy hands `init` a free cb it owns.
            unsafe { cb.init(f, id, name, prio, hooks) }
        };
        self.strategy.create(None, init);
        // Relaxed: a statistic.
        self.created_outside.fetch_add(1, Ordering::Relaxed);
        if !S::OWN_IDLE {
            self.sleepers.notify_one();
        }
    }

    /// A thread id for a thread created outside the processors.
    #[cold]
    fn outside_thread_id(&self) -> u64 {
        // Relaxed: ids only need to be unique. Low bits 0 = "outside".
        self.next_id.fetch_add(1, Ordering::Relaxed) << ID_PROC_BITS
    }

    /// A processor's main loop.
    fn worker(self: Arc<Self>, index: usize) {
        let _alt = AltStack::ensure();
        if self.pin {
            pin_to(index);
        }
        self.sleepers.register(index);
        let ctx = Box::new(ProcCtx::<S> {
            header: ProcHeader {
                rt: Arc::as_ptr(&self) as *const (),
                rt_type: std::any::TypeId::of::<Shared<S, P>>(),
                index,
                current: Cell::new(None),
            },
            local: UnsafeCell::new(self.strategy.new_local(index)),
        });
        PROC.with(|p| p.set(&ctx.header));
        self.processor.on_start(index);
        let mut done: Option<Finished> = None;
        loop {
            // SAFETY: no user thread runs while the loop holds this
            // reference; it ends with the statement.
            let next = self
                .strategy
                .schedule(unsafe { &mut *ctx.local.get() }, done.take());
            let d = match next {
                Some(d) => d,
                None => match self.idle(&ctx) {
                    Some(d) => d,
                    None => break,
                },
            };
            // Acquire: pairs with the Release store in `shutdown_timeout`.
            if self.stop_now.load(Ordering::Acquire) {
                // Out of time: the thread goes back to the ready pool
                // unrun (a stack bound for its start returns to the slab
                // pool), and the shutdown counts it as abandoned.
                drop(d.stack);
                self.with_local(|l| self.strategy.ready(l, d.cb));
                break;
            }
            done = self.run(&ctx, d);
        }
        debug_assert!(done.is_none());
        self.processor.on_exit(index);
        PROC.with(|p| p.set(std::ptr::null()));
        let ctx = *ctx;
        self.strategy.retire_local(ctx.local.into_inner());
    }

    /// Idles until a thread is dispatched, or `None` at shutdown.
    fn idle(&self, ctx: &ProcCtx<S>) -> Option<Dispatch> {
        if S::OWN_IDLE {
            // SAFETY: as in `worker`.
            return match self.strategy.idle(unsafe { &mut *ctx.local.get() }) {
                Idle::Run(d) => Some(d),
                Idle::Exit => None,
            };
        }
        let me = ctx.header.index;
        let mut spins = 0u32;
        loop {
            if self.strategy.has_ready() {
                // SAFETY: as in `worker` (one user of the local state).
                let local = unsafe { &mut *ctx.local.get() };
                if let Some(d) = self.strategy.schedule(local, None) {
                    return Some(d);
                }
            }
            // Acquire: pairs with the SeqCst store in `shutdown`.
            if self.env.shutdown.load(Ordering::Acquire) {
                // Acquire: as in `worker`.
                if self.strategy.has_ready() && !self.stop_now.load(Ordering::Acquire) {
                    continue;
                }
                return None;
            }
            if spins < self.env.idle_spins {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            spins = 0;
            // SeqCst load: the re-check after the sleeper's fence (see `Sleepers`).
            self.sleepers.sleep(
                me,
                || self.strategy.has_ready() || self.env.shutdown.load(Ordering::SeqCst),
                || ProcStats::bump(&self.env.stats[me].parks, 1),
            );
        }
    }

    /// A thread that was dispatched to start but got no stack: its
    /// closure is dropped unrun, which (for a thread with a join handle)
    /// completes the handle with [`JoinError::NoStack`](crate::JoinError)
    /// through [`StartFailure`]; a detached thread's failure is written to
    /// stderr. The control block stays in the arena (freed with the
    /// runtime), off every free list.
    #[cold]
    #[inline(never)]
    fn fail_start(&self, cb: CbRef) {
        let err = self.env.alloc.stack_error().unwrap_or_else(|| {
            StackError::Os("the strategy dispatched a new thread without a stack".into())
        });
        START_FAILURE.with(|f| f.replace(Some(err.clone())));
        // SAFETY: the dispatched cb is ours alone and never ran.
        unsafe { cb.drop_entry() };
        if START_FAILURE.with(|f| f.take()).is_some() {
            eprintln!(
                "symmetry-threads: user thread '{}' (id {}) could not start: {err}",
                cb.name().unwrap_or("<unnamed>"),
                cb.id()
            );
        }
    }

    /// Switches to a dispatched thread and handles its return.
    #[inline]
    fn run(&self, ctx: &ProcCtx<S>, d: Dispatch) -> Option<Finished> {
        let cb = d.cb;
        // SAFETY: the dispatched cb is ours alone: it is out of every queue
        // and not running anywhere.
        let bound = unsafe { &mut *cb.cb().stack.get() };
        match d.stack {
            Some(stack) => {
                cb.cb().guard.set(stack.guard());
                *bound = Some(stack);
            }
            None if bound.is_none() => {
                self.fail_start(cb);
                return None;
            }
            None => {}
        }
        let Some(stack) = bound.as_mut() else {
            // Unreachable: bound above, or already bound at its start.
            return None;
        };
        self.processor.on_dispatch(ctx.header.index, cb);
        ctx.header.current.set(Some(cb));
        let r = stack.resume(cb);
        ctx.header.current.set(None);
        match r {
            CoroutineResult::Yield(Switch::Park) => {
                // The switch is complete: publish PARKED so that a waker
                // may hand the thread to any processor (see
                // `ParkWord::commit_park` for the orderings).
                if !cb.cb().state.commit_park() {
                    // Unparked before we got here: resume it.
                    self.make_ready(cb);
                }
                None
            }
            CoroutineResult::Yield(Switch::Yield) => {
                self.make_ready(cb);
                None
            }
            CoroutineResult::Yield(Switch::Finished) | CoroutineResult::Return(()) => {
                // The fiber is idle (or gone): the stack, with it, goes
                // back to the strategy's free list.
                let stack = bound.take()?;
                // SAFETY: the thread finished; we own its cb.
                unsafe { cb.reset() };
                ProcStats::bump(&self.env.stats[ctx.header.index].finished, 1);
                Some(Finished { cb, stack })
            }
        }
    }
}

/// Bits of a thread id that name the creating processor (plus one; zero
/// means "created outside the runtime"). The rest is that processor's
/// creation count, so ids are unique without a shared counter.
const ID_PROC_BITS: u32 = 20;

#[inline(always)]
fn proc_thread_id(index: usize, created: &AtomicU64) -> u64 {
    // Relaxed: only this processor writes its `created` counter.
    (created.load(Ordering::Relaxed) << ID_PROC_BITS) | (index as u64 + 1)
}

/// Hooks of an abandoned thread: waking it does nothing.
static NOOP_HOOKS: RuntimeHooks = RuntimeHooks {
    ready: noop_ready,
    rt: std::ptr::null(),
};

unsafe fn noop_ready(_rt: *const (), _t: CbRef) {}

/// Pins the calling OS thread to the `index`-th allowed CPU (modulo).
fn pin_to(index: usize) {
    // SAFETY: plain affinity syscalls on the calling thread with a
    // properly sized cpu_set_t.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return;
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect();
        if cpus.is_empty() {
            return;
        }
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus[index % cpus.len()], &mut one);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one);
    }
}

/// Spawns a detached thread on the runtime of the calling processor,
/// whose strategy must be `S` (and processor `P`): no handle to clone.
#[inline]
pub fn spawn_detached_here<S: Strategy, P: Processor, F: FnOnce() + Send + 'static>(
    f: F,
) -> Result<(), crate::NotInRuntime> {
    let h = proc_header();
    // SAFETY: a non-null PROC points at a live processor context whose
    // `rt` is a `Shared` of type `rt_type`; we cast only if it is ours, and
    // then the header is the first field of that runtime's `ProcCtx<S>`
    // (`repr(C)`).
    let (shared, ctx) = unsafe {
        if h.is_null() || (*h).rt_type != std::any::TypeId::of::<Shared<S, P>>() {
            return Err(crate::NotInRuntime {
                op: "spawn_detached_here",
            });
        }
        (
            &*((*h).rt as *const Shared<S, P>),
            &*(h as *const ProcCtx<S>),
        )
    };
    shared.create_here(ctx, f, None, 0);
    Ok(())
}

/// Park: blocks the current user thread until [`Thread::unpark`] (see the
/// park word in `cb.rs`). Returns at once if a token is pending.
pub(crate) fn park_current(cb: CbRef) {
    if cb.cb().state.begin_park() {
        suspend(cb, Switch::Park);
    }
}

#[inline(always)]
pub(crate) fn suspend(cb: CbRef, why: Switch) {
    let y = cb.cb().yielder.get();
    // SAFETY: the yielder was set by the fiber running this very thread,
    // which is running (we are on its stack), so it is valid.
    unsafe { (*y).suspend(why) };
}

/// Unparks a user thread (Table I signal). See the park word in `cb.rs`.
pub(crate) fn unpark(cb: CbRef) {
    // Orderings: see `ParkWord::unpark`. A readied thread is published to
    // the processor that will run it through the strategy's locked queue.
    if cb.cb().state.unpark() {
        let hooks = cb.cb().hooks.get();
        // SAFETY: a parked thread's hooks point at its runtime's `Shared`,
        // alive while the thread exists.
        unsafe { ((*hooks).ready)((*hooks).rt, cb) };
    }
}

/// Configures and builds a [`Runtime`].
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

/// Counters of a runtime (see [`Runtime::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Processors.
    pub processors: usize,
    /// Threads created (on processors and from outside).
    pub created: u64,
    /// Threads finished.
    pub finished: u64,
    /// Dispatches from ready queues (starts and resumes).
    pub dequeues: u64,
    /// Ready queues examined by those dispatches.
    pub queues_examined: u64,
    /// Scans that found every queue empty.
    pub empty_scans: u64,
    /// Times an idle processor parked in the kernel.
    pub parks: u64,
    /// Control blocks allocated from the heap.
    pub cbs_allocated: u64,
    /// Stacks allocated by `mmap`.
    pub stacks_allocated: u64,
}

/// What [`Runtime::shutdown`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Final counters.
    pub stats: Stats,
    /// Control blocks on the free lists after the processors exited.
    pub cbs_free: u64,
    /// Stacks on the free lists after the processors exited.
    pub stacks_free: u64,
    /// Threads still blocked, ready or never started when the processors
    /// stopped; they never ran to completion.
    pub abandoned: u64,
    /// Threads still running on a processor that did not stop by the
    /// deadline of [`Runtime::shutdown_timeout`] (they never switched);
    /// always 0 after [`Runtime::shutdown`].
    pub still_running: u64,
}

impl ShutdownReport {
    /// Whether every control block and stack is accounted for: on a free
    /// list, or held by an abandoned thread.
    pub fn nothing_leaked(&self) -> bool {
        self.cbs_free + self.abandoned == self.stats.cbs_allocated
            && self.stacks_free <= self.stats.stacks_allocated
            && self.stats.stacks_allocated - self.stacks_free <= self.abandoned
    }
}

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

    /// A cloneable handle for spawning (usable from any thread).
    pub fn handle(&self) -> Handle<S, P> {
        Handle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Creates a thread that runs `f`; see [`Handle::spawn`].
    pub fn spawn<T, F>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.handle().spawn(f)
    }

    /// Creates a thread without a join handle; see [`Handle::spawn_detached`].
    pub fn spawn_detached<F: FnOnce() + Send + 'static>(&self, f: F) {
        self.handle().spawn_detached(f)
    }

    /// Runs `f` as a user thread and waits (blocking this OS thread) for
    /// its result. A panic in `f` comes back as `Err`.
    pub fn block_on<T, F>(&self, f: F) -> Result<T, crate::JoinError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn(f).join()
    }

    /// The processors' counters, summed.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Lets ready threads finish, stops the processors, and reports what
    /// is left (see the module docs). Idempotent.
    ///
    /// It waits for as long as threads stay ready: a thread that yields in
    /// a loop until a condition nobody will set, or a stream of new
    /// threads, keeps it waiting for ever. [`Runtime::shutdown_timeout`]
    /// returns within a bound whatever the threads do.
    pub fn shutdown(&mut self) -> ShutdownReport {
        if let Some(r) = self.report {
            return r;
        }
        self.begin_shutdown();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        self.finish_shutdown(0)
    }

    /// [`Runtime::shutdown`] that returns within about `limit`, whatever
    /// the user threads do. Ready threads run until three quarters of
    /// `limit` have passed; then each processor stops at its next switch
    /// (a thread that blocks, yields or finishes), leaving the threads
    /// still ready unrun. A thread that runs on without ever switching
    /// keeps its processor: that processor's OS thread is left to it
    /// (detached), and the report counts it in
    /// [`ShutdownReport::still_running`]. Threads that did not finish
    /// are counted in [`ShutdownReport::abandoned`]; their join handles
    /// return [`JoinError::Abandoned`](crate::JoinError::Abandoned).
    /// Idempotent.
    pub fn shutdown_timeout(&mut self, limit: Duration) -> ShutdownReport {
        if let Some(r) = self.report {
            return r;
        }
        let start = Instant::now();
        self.begin_shutdown();
        let wait = |workers: &mut Vec<std::thread::JoinHandle<()>>, until: Duration| {
            while start.elapsed() < until && workers.iter().any(|w| !w.is_finished()) {
                std::thread::sleep(Duration::from_micros(200));
            }
            let (done, left): (Vec<_>, Vec<_>) = std::mem::take(workers)
                .into_iter()
                .partition(|w| w.is_finished());
            for w in done {
                let _ = w.join();
            }
            *workers = left;
        };
        wait(&mut self.workers, limit * 3 / 4);
        if !self.workers.is_empty() {
            // Release: pairs with the processors' Acquire loads.
            self.shared.stop_now.store(true, Ordering::Release);
            self.shared.sleepers.wake_all();
            self.shared.strategy.wake_all();
            wait(&mut self.workers, limit);
        }
        let running = self.workers.len() as u64;
        // Detached: a processor still running a thread that never
        // switches keeps its OS thread (and its reference to the runtime).
        self.workers.clear();
        self.finish_shutdown(running)
    }

    /// Sets the shutdown flag and wakes every idle processor.
    fn begin_shutdown(&self) {
        let sh = &self.shared;
        // SeqCst: pairs with the idle processors' SeqCst fence and loads.
        sh.env.shutdown.store(true, Ordering::SeqCst);
        sh.sleepers.wake_all();
        sh.strategy.wake_all();
    }

    /// Counts what is left once the processors have exited (all but
    /// `running`, which never switched back) and completes the shutdown.
    fn finish_shutdown(&mut self, running: u64) -> ShutdownReport {
        let sh = &self.shared;
        if running > 0 {
            // A processor still runs a user thread: control blocks are
            // not ours to walk. Count without touching them.
            let s = sh.stats();
            // Release: pairs with the Acquire load in `JoinHandle::join`.
            sh.stopped.store(true, Ordering::Release);
            let r = ShutdownReport {
                stats: s,
                cbs_free: 0,
                stacks_free: 0,
                abandoned: s.created.saturating_sub(s.finished).saturating_sub(running),
                still_running: running,
            };
            self.report = Some(r);
            return r;
        }
        let (cbs_free, stacks_free) = sh.strategy.free_counts();
        // Abandoned threads: anything that still has a coroutine or an
        // unrun closure.
        let mut abandoned = 0;
        let mut forgotten = Vec::new();
        let arena: Vec<CbRef> = sh.env.alloc.arena_snapshot();
        for cb in arena {
            // SAFETY: the processors have exited; no thread runs, and no
            // one else touches control blocks.
            unsafe {
                let bound = &mut *cb.cb().stack.get();
                if let Some(c) = bound.take() {
                    // Never unwind a suspended thread from here: its
                    // destructors could call into a stopped runtime. Its
                    // stack is leaked, not unmapped, and its control
                    // block outlives the runtime: a wait node on that
                    // stack may still sit in a sync object's queue, and a
                    // later wake-up through it must find valid memory (the
                    // no-op hooks make that wake-up do nothing).
                    std::mem::forget(c);
                    cb.cb().hooks.set(&NOOP_HOOKS);
                    forgotten.push(cb);
                    abandoned += 1;
                } else if cb.has_entry() {
                    cb.drop_entry();
                    abandoned += 1;
                }
            }
        }
        sh.env.alloc.forget_cbs(&forgotten);
        // Release: pairs with the Acquire load in `JoinHandle::join`.
        sh.stopped.store(true, Ordering::Release);
        let r = ShutdownReport {
            stats: sh.stats(),
            cbs_free,
            stacks_free,
            abandoned,
            still_running: 0,
        };
        self.report = Some(r);
        r
    }
}

/// How long dropping a runtime waits for its ready threads
/// ([`Runtime::shutdown_timeout`]).
pub const DROP_GRACE: Duration = Duration::from_secs(5);

impl<S: Strategy, P: Processor> Drop for Runtime<S, P> {
    /// Shuts down with [`Runtime::shutdown_timeout`]`(`[`DROP_GRACE`]`)`
    /// unless already shut down: ready threads get up to that long to
    /// finish, and dropping never hangs. What is left is not reported;
    /// call [`Runtime::shutdown`] or [`Runtime::shutdown_timeout`] first
    /// to see it.
    fn drop(&mut self) {
        self.shutdown_timeout(DROP_GRACE);
    }
}

impl<S: Strategy, P: Processor> Shared<S, P> {
    fn stats(&self) -> Stats {
        let mut s = Stats {
            processors: self.env.processors,
            // Relaxed: statistics.
            created: self.created_outside.load(Ordering::Relaxed),
            cbs_allocated: self.env.alloc.cbs_allocated(),
            stacks_allocated: self.env.alloc.stacks_allocated(),
            ..Stats::default()
        };
        for p in self.env.stats.iter() {
            let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
            s.created += l(&p.created);
            s.finished += l(&p.finished);
            s.dequeues += l(&p.dequeues);
            s.queues_examined += l(&p.queues_examined);
            s.empty_scans += l(&p.empty_scans);
            s.parks += l(&p.parks);
        }
        s
    }
}

/// A handle to a runtime: spawns threads from anywhere. Cloning is cheap.
pub struct Handle<S: Strategy, P: Processor = DefaultProcessor> {
    shared: Arc<Shared<S, P>>,
}

impl<S: Strategy, P: Processor> Clone for Handle<S, P> {
    fn clone(&self) -> Self {
        Handle {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: Strategy, P: Processor> std::fmt::Debug for Handle<S, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("strategy", &S::NAME)
            .finish()
    }
}

impl<S: Strategy, P: Processor> Handle<S, P> {
    /// Creates and starts a thread running `f` (Table I create). No join
    /// handle, no allocation beyond the free lists: ALL89's null thread.
    #[inline]
    pub fn spawn_detached<F: FnOnce() + Send + 'static>(&self, f: F) {
        self.shared.create(f, None, 0);
    }

    /// Creates and starts a thread running `f`; its result (or panic)
    /// comes back through the [`JoinHandle`].
    pub fn spawn<T, F>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.builder().spawn(f)
    }

    /// A builder for a thread with a name or a priority.
    pub fn builder(&self) -> ThreadBuilder<'_, S, P> {
        ThreadBuilder {
            handle: self,
            name: None,
            priority: 0,
        }
    }

    /// PRESTO's create without start: allocates a control block and
    /// stores `f` in it, without making it ready. Start it with
    /// [`Unstarted::start`]; dropping it deletes the thread.
    pub fn create<F: FnOnce() + Send + 'static>(&self, f: F) -> Unstarted<S, P> {
        let sh = &*self.shared;
        let cb = sh.with_local(|l| sh.strategy.alloc_cb(l));
        let id = sh.outside_thread_id();
        // SAFETY: a freshly allocated cb is ours.
        unsafe { cb.init(f, id, None, 0, &sh.hooks) };
        Unstarted {
            handle: self.clone(),
            cb: Some(cb),
        }
    }

    /// The runtime's counters.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Whether the calling code runs on one of this runtime's processors.
    pub fn is_current(&self) -> bool {
        self.shared.local_ctx().is_some()
    }
}

/// A created thread that has not been started (PRESTO §3.3).
pub struct Unstarted<S: Strategy, P: Processor = DefaultProcessor> {
    handle: Handle<S, P>,
    cb: Option<CbRef>,
}

impl<S: Strategy, P: Processor> std::fmt::Debug for Unstarted<S, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unstarted").field("cb", &self.cb).finish()
    }
}

impl<S: Strategy, P: Processor> Unstarted<S, P> {
    /// Makes the thread ready (PRESTO's start). It counts as created in
    /// [`Stats`] from here on (a thread deleted unstarted never runs).
    pub fn start(mut self) {
        if let Some(cb) = self.cb.take() {
            let sh = &*self.handle.shared;
            match sh.local_ctx() {
                Some(ctx) => ProcStats::bump(&sh.env.stats[ctx.header.index].created, 1),
                // Relaxed: a statistic.
                None => {
                    sh.created_outside.fetch_add(1, Ordering::Relaxed);
                }
            }
            sh.make_ready(cb);
        }
    }
}

impl<S: Strategy, P: Processor> Drop for Unstarted<S, P> {
    fn drop(&mut self) {
        if let Some(cb) = self.cb.take() {
            let sh = &*self.handle.shared;
            // SAFETY: the cb never started; we own it.
            unsafe {
                cb.drop_entry();
                cb.reset();
            }
            sh.with_local(|l| sh.strategy.release_cb(l, cb));
        }
    }
}

/// Builds a thread with a name and a priority.
pub struct ThreadBuilder<'a, S: Strategy, P: Processor = DefaultProcessor> {
    handle: &'a Handle<S, P>,
    name: Option<Box<str>>,
    priority: i64,
}

impl<S: Strategy, P: Processor> std::fmt::Debug for ThreadBuilder<'_, S, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadBuilder")
            .field("name", &self.name)
            .finish()
    }
}

impl<S: Strategy, P: Processor> ThreadBuilder<'_, S, P> {
    /// Names the thread (shown in panics at join and stack-overflow
    /// reports).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into().into_boxed_str());
        self
    }

    /// Sets the priority a custom [`crate::ReadyPool`] may use.
    pub fn priority(mut self, p: i64) -> Self {
        self.priority = p;
        self
    }

    /// Spawns without a join handle.
    pub fn spawn_detached<F: FnOnce() + Send + 'static>(self, f: F) {
        self.handle.shared.create(f, self.name, self.priority);
    }

    /// Spawns with a join handle.
    pub fn spawn<T, F>(self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let name: Option<Arc<str>> = self.name.as_deref().map(Arc::from);
        let packet = Arc::new(Packet::new());
        let mut done = StartFailure(Some(Arc::clone(&packet)));
        self.handle.shared.create(
            move || {
                let r = catch_unwind(AssertUnwindSafe(f));
                if let Some(p) = done.0.take() {
                    p.complete(r);
                }
            },
            self.name,
            self.priority,
        );
        JoinHandle::new(packet, name, Arc::clone(&self.handle.shared.stopped))
    }
}
