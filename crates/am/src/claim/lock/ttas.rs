//! `ttas`: LC98's test-and-test-and-set lock (§3.1), with the holder's
//! pid as the lock word.
//!
//! As [`tas`](super::tas) (the same [`PidWord`]), but a waiter spins
//! reading the word (in its own cache) and tries the CAS only when it
//! reads 0. A dead holder is taken over the same way, after
//! [`CHECK_SPINS`] reads.

use super::tas::PidWord;
use super::{CHECK_SPINS, Holder};
use crate::claim::locked::ShmLock;

/// Test-and-test-and-set with the holder's pid as the lock word.
#[repr(C)]
#[derive(Debug)]
pub struct TtasPid {
    word: PidWord,
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
                word: PidWord::new(),
            })
        }
    }

    #[inline]
    fn lock(&self, me: Holder) {
        let mut spins = 0u32;
        loop {
            let holder = self.word.peek();
            if holder == 0 {
                if self.word.try_take(me).is_ok() {
                    return;
                }
                continue;
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(CHECK_SPINS) && self.word.take_over(holder, me) {
                return;
            }
            crate::sync::spin_hint();
        }
    }

    #[inline]
    unsafe fn unlock(&self, _guard: ()) {
        self.word.release();
    }
}
