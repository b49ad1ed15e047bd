//! `tas`: spin on the atomic exchange (ALL89 §IV-B, "spin on xchgb").
//!
//! State word: one byte, `0` = free, `1` = held. Invariant: the byte is `1`
//! exactly while some context holds the lock.
//!
//! Transitions: `lock` loops `swap(1)` until it returns `0`
//! (free -> held); `unlock` stores `0` (held -> free). ALL89 releases with an
//! exchange; a plain release store is enough on every coherent machine and
//! is what the paper's successors (and this crate's `bare-atomic` reference)
//! do.
//!
//! Every failed attempt is a read-for-ownership that invalidates the line in
//! all other caches, including the holder's: this is the bus degradation that
//! ALL89 Fig. 6 measures. `#[repr(C)]`, pointer-free: valid in shared memory.

use crate::sync::{AtomicU8, Ordering, maybe_const_fn, release_store, spin_hint};

/// Test-and-set spin lock.
#[repr(C)]
#[derive(Debug)]
pub struct Tas {
    /// `0` free, `1` held.
    state: AtomicU8,
}

impl Tas {
    maybe_const_fn! {
        /// A free lock.
        pub fn new() -> Self {
            Self { state: AtomicU8::new(0) }
        }
    }
}

impl Default for Tas {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: `lock`/`try_lock` return only after moving the state word 0 -> 1
// with Acquire, and `unlock` stores 0 with Release, so at most one context
// holds the lock and each critical section happens-before the next.
unsafe impl lock_api::RawMutex for Tas {
    crate::raw_init!();
    type Guard = lock_api::GuardSend;

    #[inline]
    fn lock(&self) -> Self::Guard {
        // Acquire: pairs with the Release store in `unlock`.
        while self.state.swap(1, Ordering::Acquire) != 0 {
            spin_hint();
        }
        lock_api::GuardSend::new()
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        // Acquire: pairs with the Release store in `unlock`.
        (self.state.swap(1, Ordering::Acquire) == 0).then(lock_api::GuardSend::new)
    }

    #[inline]
    unsafe fn unlock(&self, _guard: Self::Guard) {
        // Release: publishes the critical section to the next Acquire swap.
        release_store(&self.state, 0);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != 0
    }
}
