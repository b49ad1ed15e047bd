//! `tas`: LC98's test-and-set lock (§3.1), with the holder's pid as the
//! lock word.
//!
//! State: one word ([`PidWord`]), 0 when free, else the holder's pid.
//! Acquire is a CAS from 0 to the caller's pid, retried (every attempt an
//! atomic RMW on the shared line, as TAS is); release stores 0. Invariant:
//! the word names the one process inside the critical section, or nobody.
//!
//! A waiter spins, then yields (`Waiter`: the module docs of
//! [`super`]). A dead holder: after [`CHECK_SPINS`](super::CHECK_SPINS) failed attempts (or
//! [`CHECK_YIELDS`](super::CHECK_YIELDS) yields) a waiter reads the
//! holder's pid; if that process is dead, one CAS from the dead pid to its
//! own makes the waiter the holder (the claim's critical section repairs
//! what the dead holder left half done).

use super::{Holder, Waiter, dead};
use crate::claim::locked::ShmLock;
use crate::sync::{AtomicU32, Ordering};

/// A lock word holding its holder's pid (0: free); `tas` and `ttas` differ
/// only in how they wait for it.
#[repr(C)]
#[derive(Debug)]
pub struct PidWord(AtomicU32);

impl PidWord {
    /// A free word.
    pub(super) fn new() -> PidWord {
        PidWord(AtomicU32::new(0))
    }

    /// One attempt: 0 -> our pid; on failure, the holder seen.
    #[inline(always)]
    pub(super) fn try_take(&self, me: Holder) -> Result<(), u32> {
        // Acquire: pairs with the Release store of the previous holder.
        self.0
            .compare_exchange(0, me.pid, Ordering::Acquire, Ordering::Relaxed)
            .map(drop)
    }

    /// The holder now (0: free), a hint only.
    #[inline(always)]
    pub(super) fn peek(&self) -> u32 {
        // Relaxed: the CAS in `try_take` decides.
        self.0.load(Ordering::Relaxed)
    }

    /// Releases the word.
    #[inline(always)]
    pub(super) fn release(&self) {
        // Release: our critical section happens before the next holder's.
        self.0.store(0, Ordering::Release);
    }

    /// Takes the word from `holder` if that process is dead; whether we
    /// now hold it.
    #[cold]
    pub(super) fn take_over(&self, holder: u32, me: Holder) -> bool {
        // Acquire on success: whatever the dead holder wrote before dying
        // is visible to the repair in the critical section.
        dead(holder)
            && self
                .0
                .compare_exchange(holder, me.pid, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }
}

/// Test-and-set with the holder's pid as the lock word.
#[repr(C)]
#[derive(Debug)]
pub struct TasPid {
    word: PidWord,
}

// SAFETY: the CAS from 0 (or from a dead holder's pid, whose process can
// no longer be inside) to our pid admits one holder at a time in every
// process mapping the word; Acquire on success, Release on unlock.
unsafe impl ShmLock for TasPid {
    const NAME: &'static str = "tas";
    type Guard = ();

    unsafe fn init(at: *mut Self) {
        // SAFETY: the caller's contract.
        unsafe {
            at.write(TasPid {
                word: PidWord::new(),
            })
        }
    }

    #[inline]
    fn lock(&self, me: Holder) {
        let mut waiter = Waiter::new();
        while let Err(holder) = self.word.try_take(me) {
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
