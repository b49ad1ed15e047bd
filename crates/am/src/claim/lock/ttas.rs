//! `ttas`: LC98's test-and-test-and-set lock (§3.1), with the holder's
//! pid as the lock word.
//!
//! As [`tas`](super::tas) (the same [`PidWord`]), but a waiter spins
//! reading the word (in its own cache) and tries the CAS only when it
//! reads 0; it spins, then yields (`Waiter`: the module docs of
//! [`super`]). A dead holder is taken over the same way, after
//! [`CHECK_SPINS`](super::CHECK_SPINS) reads (or [`CHECK_YIELDS`](super::CHECK_YIELDS)
//! yields).

use super::tas::PidWord;
use super::{Holder, Waiter};
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
        let mut waiter = Waiter::new();
        loop {
            let holder = self.word.peek();
            if holder == 0 {
                if self.word.try_take(me).is_ok() {
                    return;
                }
                continue;
            }
            if waiter.pause(Self::NAME) && self.word.take_over(holder, me) {
                return;
            }
        }
    }

    #[inline]
    unsafe fn unlock(&self, _guard: ()) {
        self.word.release();
    }
}
