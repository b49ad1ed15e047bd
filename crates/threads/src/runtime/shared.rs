//! A runtime's shared state ([`Shared`]) and the Table I operations on it
//! that any thread may call: create and signal (make ready).
//!
//! # Processor-local state
//!
//! A processor publishes a pointer to its [`ProcCtx`] in a thread-local.
//! User code running on that processor reaches the strategy's local state
//! (its free lists, its random generator) through
//! [`Handle`](super::Handle), which checks that the processor belongs to
//! the same runtime; from any other OS thread the strategy's shared path
//! is used. User threads never run concurrently
//! with their processor's loop (switches are cooperative), so the local
//! state has one user at a time; `&mut` references to it never outlive a
//! strategy call.

use std::sync::Arc;
use symmetry_locks::sync::{AtomicBool, AtomicU64, Ordering};

use super::context::{ProcCtx, proc_header};
use super::processor::Processor;
use crate::cb::{CbRef, RuntimeHooks};
use crate::sleepers::Sleepers;
use crate::strategy::{Env, ProcStats, Strategy};

/// Shared state of a runtime.
pub(crate) struct Shared<S: Strategy, P: Processor> {
    pub(crate) strategy: S,
    pub(super) env: Env,
    pub(super) hooks: RuntimeHooks,
    pub(super) sleepers: Sleepers,
    pub(super) processor: P,
    pub(super) next_id: AtomicU64,
    pub(super) created_outside: AtomicU64,
    /// Set once every processor has exited (or been given up on).
    pub(crate) stopped: Arc<AtomicBool>,
    /// Set by [`Runtime::shutdown_timeout`](super::Runtime::shutdown_timeout)
    /// when its time is nearly out: processors stop dispatching and exit,
    /// leaving ready threads unrun (abandoned).
    pub(super) stop_now: AtomicBool,
    pub(super) pin: bool,
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

pub(super) unsafe fn ready_hook<S: Strategy, P: Processor>(rt: *const (), t: CbRef) {
    // SAFETY: `rt` is the `Shared` whose hooks these are; it outlives its
    // control blocks' parks (the arena is freed with it).
    let shared = unsafe { &*(rt as *const Shared<S, P>) };
    shared.make_ready(t);
}

impl<S: Strategy, P: Processor> Shared<S, P> {
    /// This runtime's context, if the calling OS thread is one of its
    /// processors.
    #[inline(always)]
    pub(super) fn local_ctx(&self) -> Option<&ProcCtx<S>> {
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
    pub(super) fn with_local<R>(&self, f: impl FnOnce(Option<&mut S::Local>) -> R) -> R {
        match self.local_ctx() {
            // SAFETY: see the module docs: one user of the local state at a
            // time, and the reference ends with `f`.
            Some(ctx) => f(Some(unsafe { &mut *ctx.local.get() })),
            None => f(None),
        }
    }

    /// Table I signal, from anywhere.
    pub(super) fn make_ready(&self, t: CbRef) {
        self.with_local(|l| self.strategy.ready(l, t));
        if !S::OWN_IDLE {
            self.sleepers.notify_one();
        }
    }

    /// Table I create, from anywhere.
    #[inline(always)]
    pub(super) fn create<F: FnOnce() + Send + 'static>(
        &self,
        f: F,
        name: Option<Box<str>>,
        prio: i64,
    ) {
        match self.local_ctx() {
            Some(ctx) => self.create_here(ctx, f, name, prio),
            None => self.create_outside(f, name, prio),
        }
    }

    /// Table I create, on processor `ctx` of this runtime.
    #[inline(always)]
    pub(super) fn create_here<F: FnOnce() + Send + 'static>(
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
    pub(super) fn outside_thread_id(&self) -> u64 {
        // Relaxed: ids only need to be unique. Low bits 0 = "outside".
        self.next_id.fetch_add(1, Ordering::Relaxed) << ID_PROC_BITS
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
pub(super) static NOOP_HOOKS: RuntimeHooks = RuntimeHooks {
    ready: noop_ready,
    rt: std::ptr::null(),
};

unsafe fn noop_ready(_rt: *const (), _t: CbRef) {}
