//! `ttas`: test-and-test-and-set (ALL89 §IV-C, "spin on read").
//!
//! State word: one byte, `0` = free, `1` = held; the same invariant as
//! [`crate::Tas`]. `lock` tries the exchange once; on failure it spins
//! reading the byte in its own cache until it reads `0`, then tries the
//! exchange again. Waiters generate no coherence traffic while the lock is
//! held, but every release triggers the "cascade" of misses and failed
//! exchanges that ALL89 §IV-C describes. `#[repr(C)]`, pointer-free.

use crate::sync::{AtomicU8, Ordering, spin_hint};

/// Test-and-test-and-set spin lock.
#[repr(C)]
#[derive(Debug)]
pub struct Ttas {
    /// `0` free, `1` held.
    state: AtomicU8,
}

impl Ttas {
    /// Spins reading until the byte is `0`, then exchanges; again on failure.
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

// `try_lock` reads first, as `lock_slow` does: a held lock costs no
// ownership request.
crate::byte_lock!([] Ttas, test_first: true);
