//! The park word: Table I's *block* and *signal* for one user thread, with
//! a wake-up token so that a signal that arrives before the block is not
//! lost and needs no lock.
//!
//! ```text
//! RUNNING --begin_park--> PARKING --commit_park (after the switch)--> PARKED --unpark (CAS)--> RUNNING, waker readies it
//!    |                       +--unpark--> NOTIFIED --commit_park fails (swap)--> RUNNING, processor readies it
//!    +--unpark--> NOTIFIED --begin_park (swap)--> RUNNING (token consumed, no switch)
//! NOTIFIED --unpark (swap)--> NOTIFIED (token renewed: the consumer syncs with the last waker)
//! ```
//!
//! Invariants:
//! * Only the thread itself calls `begin_park`, only the processor that
//!   switched away from it calls `commit_park`, and only after the switch
//!   is complete, so a waker that observes `PARKED` may hand the thread to
//!   any processor at once.
//! * Every park that switches away is followed by exactly one *ready*:
//!   by the waker (`unpark` returns true) or by the processor
//!   (`commit_park` returns false), never both, never neither once an
//!   unpark has happened.
//!
//! This module is model-checked with loom (`tests/loom_park.rs`).

use symmetry_locks::sync::{AtomicU8, Ordering};

const RUNNING: u8 = 0;
const PARKING: u8 = 1;
const PARKED: u8 = 2;
const NOTIFIED: u8 = 3;

/// See the module docs.
#[derive(Debug)]
pub struct ParkWord(AtomicU8);

impl Default for ParkWord {
    fn default() -> Self {
        Self::new()
    }
}

impl ParkWord {
    /// A word in state `RUNNING`.
    pub fn new() -> Self {
        ParkWord(AtomicU8::new(RUNNING))
    }

    /// Starts a new life (the owner of a free control block only).
    #[inline(always)]
    pub fn reset(&self) {
        // Relaxed: the cb is not shared yet; publishing it (a locked queue
        // push) orders this store.
        self.0.store(RUNNING, Ordering::Relaxed);
    }

    /// Thread side: `true` if the thread must switch away (now
    /// `PARKING`), `false` if a pending token was consumed instead.
    #[inline(always)]
    pub fn begin_park(&self) -> bool {
        // Relaxed on success: nothing is read through the word yet; the
        // switch is published by `commit_park`'s Release.
        if self
            .0
            .compare_exchange(RUNNING, PARKING, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            return true;
        }
        // NOTIFIED (the only other state a running thread can see).
        // Consume it with an RMW, not a store: a second waker may have
        // renewed the token since the CAS read it, and the thread must
        // synchronize with that *last* waker (Acquire; pairs with the
        // Release part of its swap in `unpark`), or it may re-check its
        // condition, miss that waker's writes and park with the token gone
        // (a lost wake-up that loom found; tests/loom_park.rs).
        self.0.swap(RUNNING, Ordering::Acquire);
        false
    }

    /// Processor side, after the switch: `true` if the thread is now
    /// `PARKED` (a waker will ready it), `false` if it was unparked in the
    /// meantime (the caller must ready it).
    #[inline(always)]
    pub fn commit_park(&self) -> bool {
        // Release (success): the completed switch happens-before a waker's
        // CAS that reads PARKED, so the waker may run the thread elsewhere.
        if self
            .0
            .compare_exchange(PARKING, PARKED, Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            return true;
        }
        // NOTIFIED: consume the token with an RMW for the reason given in
        // `begin_park` (Acquire; pairs with the wakers' Release swaps).
        self.0.swap(RUNNING, Ordering::Acquire);
        false
    }

    /// Waker side: `true` if the caller must ready the thread (it was
    /// `PARKED`, now `RUNNING`); otherwise a token is left for the thread.
    #[inline(always)]
    pub fn unpark(&self) -> bool {
        // Relaxed: a first guess, every transition below is a CAS or swap.
        let mut s = self.0.load(Ordering::Relaxed);
        loop {
            match s {
                // Take the parked thread: exactly one waker wins this CAS,
                // and a later one finds RUNNING and leaves a token, which
                // the thread consumes with Acquire. AcqRel: Release
                // publishes our writes (the ready-queue push that follows
                // publishes them too); Acquire pairs with the Release of
                // `commit_park` (the switch is complete).
                PARKED => match self.0.compare_exchange(
                    PARKED,
                    RUNNING,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return true,
                    Err(now) => s = now,
                },
                // A token is pending: renew it with an RMW so that the
                // thread's consuming swap reads our write and synchronizes
                // with us (Release), not only with the earlier waker.
                NOTIFIED => {
                    s = self.0.swap(NOTIFIED, Ordering::AcqRel);
                    if s == NOTIFIED || s == RUNNING || s == PARKING {
                        return false;
                    }
                    // It was PARKED again in between (the thread consumed
                    // the token, parked, and committed): our swap left
                    // NOTIFIED over PARKED, which nobody would ready; take
                    // it back and ready the thread ourselves.
                    return self
                        .0
                        .compare_exchange(NOTIFIED, RUNNING, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                        || self.unpark();
                }
                // RUNNING or PARKING: leave a token. Release: pairs with
                // the thread's Acquire consumption.
                _ => match self
                    .0
                    .compare_exchange(s, NOTIFIED, Ordering::AcqRel, Ordering::Relaxed)
                {
                    Ok(_) => return false,
                    Err(now) => s = now,
                },
            }
        }
    }
}
