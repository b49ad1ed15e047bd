//! The park word: Table I's *block* and *signal* for one user thread, with
//! a wake-up token so that a signal that arrives before the block is not
//! lost and needs no lock.
//!
//! ```text
//! RUNNING --begin_park--> PARKING --commit_park (after the switch)--> PARKED --unpark--> RUNNING, waker readies it
//!    |                       +--unpark--> NOTIFIED --commit_park fails--> RUNNING, processor readies it
//!    +--unpark--> NOTIFIED --begin_park--> RUNNING (token consumed, no switch)
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

#[cfg(loom)]
use loom::sync::atomic::{AtomicU8, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU8, Ordering};

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
        // Acquire on failure: consuming a token must see the waker's
        // writes; pairs with the Release part of the swap in `unpark`.
        match self
            .0
            .compare_exchange(RUNNING, PARKING, Ordering::Relaxed, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(_) => {
                // NOTIFIED (the only other state a running thread can see).
                self.0.store(RUNNING, Ordering::Relaxed);
                false
            }
        }
    }

    /// Processor side, after the switch: `true` if the thread is now
    /// `PARKED` (a waker will ready it), `false` if it was unparked in the
    /// meantime (the caller must ready it).
    #[inline(always)]
    pub fn commit_park(&self) -> bool {
        // Release (success): the completed switch happens-before a waker's
        // Acquire swap that reads PARKED, so the waker may run the thread
        // elsewhere. Acquire (failure): pairs with the waker's Release swap.
        match self
            .0
            .compare_exchange(PARKING, PARKED, Ordering::Release, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(_) => {
                self.0.store(RUNNING, Ordering::Relaxed);
                false
            }
        }
    }

    /// Waker side: `true` if the caller must ready the thread (it was
    /// `PARKED`); otherwise a token is left for the thread.
    #[inline(always)]
    pub fn unpark(&self) -> bool {
        // AcqRel: Release publishes the waker's writes to the thread
        // (pairs with the Acquire in `begin_park`/`commit_park`); Acquire
        // pairs with the Release of `commit_park`.
        if self.0.swap(NOTIFIED, Ordering::AcqRel) == PARKED {
            self.0.store(RUNNING, Ordering::Relaxed);
            true
        } else {
            false
        }
    }
}
