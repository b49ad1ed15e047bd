//! The processor context, and the primitives that act on the user thread
//! running on this OS thread.
//!
//! A processor publishes a pointer to its [`ProcCtx`] (its [`ProcHeader`]
//! first) in the thread-local `PROC`. From it, [`current_cb`] names the
//! user thread running on this OS thread, and [`park_current`],
//! [`suspend`] and [`unpark`] are Table I block and signal: what the crate
//! root, `join` and `sync` call. [`running_for_fault`] is the hook the
//! stack-overflow handler calls (registered by the builder, see
//! `stack::install_overflow_handler`).
//!
//! This file imports no other file of the runtime, so blocking primitives
//! and join handles depend on it without depending on spawning (which
//! depends on `join`).

use std::cell::{Cell, UnsafeCell};

use crate::cb::{CbRef, Switch};
use crate::strategy::Strategy;

/// The runtime-independent header of a processor's context; the TLS
/// pointer points at it.
#[repr(C)]
pub(crate) struct ProcHeader {
    /// The runtime (`*const Shared<S, P>`), for identity checks.
    pub(super) rt: *const (),
    /// `TypeId` of that `Shared<S, P>`, for typed access by type alone.
    pub(super) rt_type: std::any::TypeId,
    /// Processor index.
    pub(crate) index: usize,
    /// The user thread running on this processor, if any.
    pub(crate) current: Cell<Option<CbRef>>,
}

/// A processor's context: the header the TLS pointer points at, then the
/// strategy's processor-local state (see the `shared` module docs).
#[repr(C)]
pub(super) struct ProcCtx<S: Strategy> {
    pub(super) header: ProcHeader,
    pub(super) local: UnsafeCell<S::Local>,
}

thread_local! {
    /// This OS thread's processor header, null unless it is a processor
    /// (set and cleared by the processor's loop).
    pub(super) static PROC: Cell<*const ProcHeader> = const { Cell::new(std::ptr::null()) };
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

/// Park: blocks the current user thread until
/// [`Thread::unpark`](crate::Thread::unpark) (see the park word in
/// `cb.rs`). Returns at once if a token is pending.
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
