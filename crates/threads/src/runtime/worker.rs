//! A processor's main loop: PRESTO's processor object.
//!
//! Each turn asks the strategy for the next thread (*finish* of the
//! previous one and *start* or *resume* of the next in one call), switches
//! to it, and handles why it switched back (finished, parked, yielded);
//! with nothing ready it idles (see `idle`). A thread dispatched to start
//! without a stack fails here: the reason goes to `START_FAILURE` for the
//! spawn side, which owns the join packet (this file does not import
//! `join`).

use std::cell::{Cell, UnsafeCell};
use std::sync::Arc;
use symmetry_locks::sync::Ordering;

use corosensei::CoroutineResult;

use super::context::{PROC, ProcCtx, ProcHeader};
use super::pin::pin_to;
use super::processor::Processor;
use super::shared::Shared;
use crate::cb::{CbRef, Switch};
use crate::stack::{AltStack, StackError};
use crate::strategy::{Dispatch, Finished, ProcStats, Strategy};

thread_local! {
    /// Why the thread whose closure is being dropped unrun could not start
    /// (set by `fail_start` around the drop; read by the spawn side's
    /// `StartFailure`).
    pub(super) static START_FAILURE: Cell<Option<StackError>> = const { Cell::new(None) };
}

impl<S: Strategy, P: Processor> Shared<S, P> {
    /// A processor's main loop.
    pub(super) fn worker(self: Arc<Self>, index: usize) {
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

    /// A thread that was dispatched to start but got no stack: its
    /// closure is dropped unrun, which (for a thread with a join handle)
    /// completes the handle with [`JoinError::NoStack`](crate::JoinError)
    /// through `StartFailure` (in `spawn`); a detached thread's failure is
    /// written to stderr. The control block stays in the arena (freed with
    /// the runtime), off every free list.
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
