//! `ttas`: test-and-test-and-set (ALL89 §IV-C, "spin on read").
//!
//! State word: one byte, `0` = free, `1` = held; the same invariant as
//! [`crate::Tas`]. `lock` tries the exchange once; on failure it spins
//! reading the byte in its own cache until it reads `0`, then tries the
//! exchange again. Waiters generate no coherence traffic while the lock is
//! held, but every release triggers the "cascade" of misses and failed
//! exchanges that ALL89 §IV-C describes. `#[repr(C)]`, pointer-free.

use crate::sync::{AtomicU8, Ordering, maybe_const_fn, release_store, spin_hint};

/// Test-and-test-and-set spin lock.
#[repr(C)]
#[derive(Debug)]
pub struct Ttas {
    /// `0` free, `1` held.
    state: AtomicU8,
}

impl Ttas {
    maybe_const_fn! {
        /// A free lock.
        pub fn new() -> Self {
            Self { state: AtomicU8::new(0) }
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self) {
        loop {
            // Relaxed: only a hint; the swap below carries the Acquire.
            while self.state.load(Ordering::Relaxed) != 0 {
                spin_hint();
            }
            // Acquire: pairs with the Release store in `unlock`.
            if self.state.swap(1, Ordering::Acquire) == 0 {
                return;
            }
        }
    }
}

impl Default for Ttas {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: the lock is only taken by a 0 -> 1 exchange with Acquire and
// released by a Release store of 0, as for `Tas`.
unsafe impl lock_api::RawMutex for Ttas {
    crate::raw_init!();
    type Guard = lock_api::GuardSend;

    #[inline]
    fn lock(&self) -> Self::Guard {
        // Acquire: pairs with the Release store in `unlock`.
        if self.state.swap(1, Ordering::Acquire) != 0 {
            self.lock_slow();
        }
        lock_api::GuardSend::new()
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        // Relaxed read first: a held lock costs no ownership request.
        if self.state.load(Ordering::Relaxed) != 0 {
            return None;
        }
        // Acquire: pairs with the Release store in `unlock`.
        (self.state.swap(1, Ordering::Acquire) == 0).then(lock_api::GuardSend::new)
    }

    #[inline]
    unsafe fn unlock(&self, _guard: Self::Guard) {
        // Release: pairs with the Acquire swap of the next holder.
        release_store(&self.state, 0);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != 0
    }
}
