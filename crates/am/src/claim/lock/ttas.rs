//! `ttas`: LC98's test-and-test-and-set lock (§3.1), with the holder's
//! pid as the lock word.
//!
//! As [`tas`](super::tas), but a waiter spins reading the word (in its own
//! cache) and tries the CAS only when it reads 0. A dead holder is taken
//! over the same way, after [`CHECK_SPINS`] reads.

use super::{CHECK_SPINS, Holder, tas::take_over};
use crate::claim::locked::ShmLock;
use crate::sync::{AtomicU32, Ordering};

/// Test-and-test-and-set with the holder's pid as the lock word.
#[repr(C)]
#[derive(Debug)]
pub struct TtasPid {
    word: AtomicU32,
}

// SAFETY: as `TasPid`: one CAS from 0 (or from a dead pid) admits one
// holder; Acquire on success, Release on unlock.
unsafe impl ShmLock for TtasPid {
    const NAME: &'static str = "ttas";
    type Guard = ();

    unsafe fn init(at: *mut Self) {
        // SAFETY: the caller's contract.
        unsafe {
            at.write(TtasPid {
                word: AtomicU32::new(0),
            })
        }
    }

    #[inline]
    fn lock(&self, me: Holder) {
        let mut spins = 0u32;
        loop {
            // Relaxed: only a hint; the CAS below decides.
            let holder = self.word.load(Ordering::Relaxed);
            if holder == 0 {
                // Acquire: pairs with the previous holder's Release store.
                if self
                    .word
                    .compare_exchange(0, me.pid, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
                continue;
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(CHECK_SPINS) && take_over(&self.word, holder, me) {
                return;
            }
            crate::sync::spin_hint();
        }
    }

    #[inline]
    unsafe fn unlock(&self, _guard: ()) {
        // Release: our critical section happens before the next holder's.
        self.word.store(0, Ordering::Release);
    }
}
