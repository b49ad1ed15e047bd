//! `tas-np`: SMARTQ §4.1's "TAS-no preempt", a test-and-test-and-set lock
//! whose critical section is marked non-preemptable with the Symunix
//! request (Edler et al.), through a scheduler interface `S`.
//!
//! State word: one byte, `0` free, `1` held; the holder's context block is
//! `Unpreemptable*` from just before its winning exchange until its
//! release (invariant: a holder never asked to be preemptable).
//!
//! `lock`: read the byte while preemptable (spinning for about a
//! microsecond, then yielding at every read: [`SpinThenYield`], so that
//! a preempted holder gets a core back on schedulers that do not protect
//! it, `Stock` and the others); when it reads free,
//! ask not to be preempted, then exchange. A lost exchange withdraws the
//! request and goes back to reading, so a waiter never holds a
//! non-preemption request it does not need (the scheduler honours one per
//! quantum). `unlock`: store `0`, withdraw the request, and yield if the
//! scheduler extended the quantum meanwhile (the warning flag).

use core::marker::PhantomData;

use crate::backoff::{SpinThenYield, Wait, Waiting};
use crate::sched::{NpGuard, Scheduler, Stock, current};
use crate::sync::{AtomicU8, Ordering, release_store};

/// Test-and-test-and-set lock with non-preemptable critical sections.
#[derive(Debug)]
pub struct TasNp<S: Scheduler = Stock> {
    /// `0` free, `1` held.
    state: AtomicU8,
    _sched: PhantomData<fn() -> S>,
}

impl<S: Scheduler> TasNp<S> {
    crate::sync::maybe_const_fn! {
        /// A free lock.
        pub fn new() -> Self {
            Self { state: AtomicU8::new(0), _sched: PhantomData }
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self) {
        let cb = current();
        let mut w = Waiting::new();
        loop {
            // Relaxed: only a hint that an exchange may succeed.
            while self.state.load(Ordering::Relaxed) != 0 {
                SpinThenYield::pause(&mut w);
            }
            // Acquire: pairs with the Release store in `unlock`.
            if cb.try_enter::<S>(|| self.state.swap(1, Ordering::Acquire) == 0) {
                return;
            }
        }
    }
}

impl<S: Scheduler> Default for TasNp<S> {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: the lock is held exactly while the byte is 1, moved 0 -> 1 by an
// Acquire exchange and back by a Release store; the context block only
// changes when the holder may be preempted.
unsafe impl<S: Scheduler> lock_api::RawMutex for TasNp<S> {
    crate::raw_init!();
    /// Not `Send`: the release updates the acquiring thread's context block.
    type Guard = NpGuard;

    #[inline]
    fn lock(&self) -> Self::Guard {
        // Acquire: pairs with the Release store in `unlock`.
        if !current().try_enter::<S>(|| self.state.swap(1, Ordering::Acquire) == 0) {
            self.lock_slow();
        }
        NpGuard::new(())
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        // Acquire: pairs with the Release store in `unlock`.
        current()
            .try_enter::<S>(|| self.state.swap(1, Ordering::Acquire) == 0)
            .then(|| NpGuard::new(()))
    }

    #[inline]
    unsafe fn unlock(&self, _guard: Self::Guard) {
        // Release: publishes the critical section to the next Acquire swap.
        release_store(&self.state, 0);
        current().leave::<S>();
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != 0
    }
}
