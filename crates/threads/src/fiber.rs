//! Fibers: the coroutine that lives on a pooled stack and runs one user
//! thread after another.
//!
//! ALL89 binds a stack to a thread at *start* and returns it at *finish*.
//! Setting up a fresh coroutine on every start and tearing it down at
//! every finish costs far more than the switch itself (a new frame is
//! entered by a `ret` the return predictor has never seen, and the finish
//! path leaves through a different exit than it came in). So a stack does
//! not go back to the free list bare: it keeps a *fiber*, a coroutine
//! parked at the top of [`fiber_main`]'s loop. Starting a thread on that
//! stack resumes the fiber with the thread's control block; the fiber runs
//! the thread's entry and, when it returns, suspends with
//! [`Switch::Finished`], parked again at the loop's top. A thread's
//! create + start + finish then costs two plain switches.
//!
//! Fiber state (in [`Stack`](crate::Stack)):
//!
//! ```text
//! none --first start (coroutine set up, resume(cb))--> busy
//! busy --thread parks or yields (suspend Park/Yield)--> busy (not running)
//! busy --thread finishes (suspend Finished)--> idle (parked at loop top)
//! idle --next start (resume(cb))--> busy
//! ```
//!
//! An idle fiber holds nothing that needs dropping (its frame holds the
//! yielder reference and the loop's `CbRef`), so a pooled stack may drop
//! it without unwinding ([`Fiber::reset`]). A busy fiber is a thread in
//! the middle of its life: it is never unwound from outside (its
//! destructors could call into a stopped runtime), only leaked with its
//! stack (see the runtime's shutdown).
//!
//! The memory a fiber's coroutine runs on, [`SlotMem`], is declared here
//! too (the fiber says what memory it runs on); the `stack` module builds
//! it from a slot for every resume.

use std::panic::{AssertUnwindSafe, catch_unwind};

use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::cb::{CbRef, Switch};

/// The memory a fiber's coroutine runs on: a slot below its fiber header,
/// as corosensei sees it. A view that owns nothing (the
/// [`Stack`](crate::Stack) returns the slot); the stack builds it for
/// every [`Fiber::resume`].
#[derive(Clone, Copy)]
pub(crate) struct SlotMem {
    /// Low end of the slot (the guard's first byte).
    pub(crate) lo: usize,
    /// The fiber header's address: the coroutine stack's base.
    pub(crate) top: usize,
}

// SAFETY: `base` is the fiber header's address, 64-byte aligned, with
// the slot's usable bytes below it above a guard region; `limit` is the
// slot's low end, guard included, as the trait asks. The slot belongs to
// the `Stack` whose fiber holds this view, and only that fiber runs on it.
unsafe impl corosensei::stack::Stack for SlotMem {
    #[inline]
    fn base(&self) -> corosensei::stack::StackPointer {
        // `top` is a mapped address, never zero.
        corosensei::stack::StackPointer::new(self.top)
            .unwrap_or(corosensei::stack::StackPointer::MIN)
    }

    #[inline]
    fn limit(&self) -> corosensei::stack::StackPointer {
        corosensei::stack::StackPointer::new(self.lo)
            .unwrap_or(corosensei::stack::StackPointer::MIN)
    }
}

/// The coroutine of a fiber: resumed with the thread to start (or, for a
/// started thread, with itself, ignored), suspends with why it switched.
pub(crate) type Coro = Coroutine<CbRef, Switch, (), SlotMem>;

/// A fiber's coroutine and whether a thread is in the middle of it.
pub(crate) struct Fiber {
    coro: Option<Coro>,
    /// A thread has started on this fiber and not finished.
    busy: bool,
}

impl Fiber {
    /// No coroutine yet (set up at the first start).
    pub(crate) const fn new() -> Self {
        Fiber {
            coro: None,
            busy: false,
        }
    }

    /// Whether a thread is in the middle of this fiber.
    #[inline(always)]
    pub(crate) fn is_busy(&self) -> bool {
        self.busy
    }

    /// Starts `cb` on this fiber (idle or new), or resumes the thread in
    /// it (busy), until it switches back.
    #[inline(always)]
    pub(crate) fn resume(&mut self, mem: SlotMem, cb: CbRef) -> CoroutineResult<Switch, ()> {
        self.busy = true;
        let c = match self.coro {
            Some(ref mut c) => c,
            None => Self::set_up(&mut self.coro, mem),
        };
        let r = c.resume(cb);
        match r {
            CoroutineResult::Yield(Switch::Finished) => self.busy = false,
            CoroutineResult::Yield(_) => {}
            CoroutineResult::Return(()) => {
                // `fiber_main` never returns; if it ever did, the next
                // start sets up a new coroutine.
                self.busy = false;
                self.coro = None;
            }
        }
        r
    }

    #[cold]
    #[inline(never)]
    fn set_up(coro: &mut Option<Coro>, mem: SlotMem) -> &mut Coro {
        coro.insert(Coro::with_stack(mem, fiber_main))
    }

    /// Drops an idle fiber's coroutine without unwinding it.
    ///
    /// # Panics
    /// If the fiber is busy (a thread in the middle of its life must be
    /// leaked, not reset).
    pub(crate) fn reset(&mut self) {
        assert!(!self.busy, "a busy fiber cannot be reset");
        if let Some(mut c) = self.coro.take() {
            // SAFETY: an idle fiber is suspended at the top of
            // `fiber_main`'s loop, whose frame holds only a `CbRef` (Copy)
            // and the yielder reference: nothing on its stack needs Drop,
            // which is `force_reset`'s condition.
            unsafe { c.force_reset() };
            // Done now: dropping it does not touch the stack.
            drop(c);
        }
    }
}

/// The loop every fiber runs: one user thread per turn.
fn fiber_main(y: &Yielder<CbRef, Switch>, first: CbRef) {
    let mut cb = first;
    loop {
        run_thread(cb, y);
        // Parked here between threads; resumed with the next one.
        cb = y.suspend(Switch::Finished);
    }
}

/// One thread's life on the fiber: from its first instruction to its end.
#[inline(always)]
fn run_thread(cb: CbRef, y: &Yielder<CbRef, Switch>) {
    cb.cb().yielder.set(y);
    // A panic must not unwind into the fiber's loop. Threads with a
    // JoinHandle catch their own panic first (the result goes to join);
    // this catches panics of detached threads, which the panic hook has
    // already reported.
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: called once per life, by the thread itself.
        unsafe { cb.run_entry() }
    }));
    if let Err(payload) = r {
        // Dropping a payload can itself panic; do not let that escape.
        let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
    }
}
