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

use crate::sync::{AtomicU8, Ordering, spin_hint};

/// Test-and-set spin lock.
#[repr(C)]
#[derive(Debug)]
pub struct Tas {
    /// `0` free, `1` held.
    state: AtomicU8,
}

impl Tas {
    /// Exchanges again after each failure until an exchange finds the lock
    /// free: the paper's spin on `xchgb`.
    #[cold]
    #[inline(never)]
    fn lock_slow(&self) {
        loop {
            spin_hint();
            // Acquire: pairs with the Release store in `unlock`.
            if self.state.swap(1, Ordering::Acquire) == 0 {
                return;
            }
        }
    }
}

// A `try_lock` is one exchange, as every attempt of this lock is.
crate::byte_lock!([] Tas, test_first: false);
