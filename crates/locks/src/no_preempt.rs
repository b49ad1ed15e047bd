//! `mcs-np` and `native-np`: SMARTQ §4.1's "Queued-no preempt" and
//! "Native-no preempt", an existing lock `L` whose critical section is
//! marked non-preemptable through a scheduler interface `S`.
//!
//! State: `L`'s own, plus the holder's context block, which is
//! `Unpreemptable*` from the moment the holder has `L` until it released
//! it (invariant: a holder of a `NoPreempt` lock never asked to be
//! preemptable).
//!
//! `lock`: acquire `L` as usual (waiting stays preemptable: the request
//! covers the critical section only, as in the paper), then ask not to be
//! preempted. `unlock`: release `L`, withdraw the request, and yield if the
//! scheduler extended the quantum meanwhile. This protects the holder, not
//! the queue: a waiter preempted in a queue lock still receives the lock
//! while descheduled, which is the collapse SMARTQ Figs. 4-7 show for
//! "Queued-no preempt" and what `handshake` and `smart-q` fix.
//!
//! `mcs-np`'s queue is [`McsTp<S>`](crate::McsTp): where the scheduler
//! shows preemption (a running `Emulated` emulation) it hands over in
//! plain MCS order, SMARTQ's lock and its collapse; where nobody reads
//! the context block (`Stock`, `RseqSlice`, `Emulated` with no emulation
//! running) a releaser skips waiters whose published time is stale, so
//! the lock stays alive with more runnable threads than cores (order:
//! FIFO among running waiters). With `RseqSlice` on a kernel that has the
//! extension, the holder is protected as well.

use core::marker::PhantomData;

use crate::sched::{NpGuard, Scheduler, Stock, current};

/// Lock `L` with non-preemptable critical sections.
#[derive(Debug)]
pub struct NoPreempt<L, S: Scheduler = Stock> {
    inner: L,
    _sched: PhantomData<fn() -> S>,
}

/// SMARTQ's "Queued-no preempt": MCS with non-preemptable critical
/// sections, time-published where no scheduler shows preemption (module
/// docs).
pub type McsNp<S = Stock> = NoPreempt<crate::McsTp<S>, S>;

/// SMARTQ's "Native-no preempt": the platform's mutex (a default
/// `pthread_mutex_t`, a futex lock on Linux) with non-preemptable critical
/// sections.
#[cfg(not(loom))]
pub type NativeNp<S = Stock> = NoPreempt<crate::Pthread, S>;

impl<L: lock_api::RawMutex, S: Scheduler> NoPreempt<L, S> {
    /// Wraps `inner`.
    pub const fn with(inner: L) -> Self {
        Self {
            inner,
            _sched: PhantomData,
        }
    }

    #[inline(always)]
    fn acquired(g: L::Guard) -> NpGuard<L::Guard> {
        let cb = current();
        cb.request::<S>();
        cb.enter();
        NpGuard::new(g)
    }
}

impl<L: lock_api::RawMutex + Default, S: Scheduler> Default for NoPreempt<L, S> {
    fn default() -> Self {
        Self::with(L::default())
    }
}

// SAFETY: mutual exclusion and ordering are `L`'s; the wrapper only adds
// context-block updates by the holder.
unsafe impl<L: lock_api::RawMutex, S: Scheduler> lock_api::RawMutex for NoPreempt<L, S> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::with(L::INIT);
    type Guard = NpGuard<L::Guard>;

    #[inline]
    fn lock(&self) -> Self::Guard {
        Self::acquired(self.inner.lock())
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        self.inner.try_lock().map(Self::acquired)
    }

    #[inline]
    unsafe fn unlock(&self, guard: Self::Guard) {
        // SAFETY: forwarded caller's contract: `guard` came from this lock.
        unsafe { self.inner.unlock(guard.into_inner()) };
        current().leave::<S>();
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.inner.is_locked()
    }
}
