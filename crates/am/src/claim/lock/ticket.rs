//! `ticket`: LC98's ticket lock (§3.1), with per-rank records of who took
//! which ticket.
//!
//! State: `next` (the next ticket to hand out), `serving` (the ticket
//! allowed in), and [`Records`]. Acquire: announce, take a ticket with a
//! fetch-and-add on `next`, record it, spin until `serving` equals it.
//! Release: `serving` = ticket + 1, then the record goes idle. Invariant:
//! tickets are handed out once each; only the owner of `serving` is inside
//! the critical section or about to enter it.
//!
//! A dead owner of the served ticket (holding the lock, or waiting for it
//! and never coming in) stops everyone behind it. A waiter spins, then
//! yields (`Waiter`: the module docs of [`super`]); one that has spun
//! [`CHECK_SPINS`](super::CHECK_SPINS) times (or yielded [`CHECK_YIELDS`](super::CHECK_YIELDS)
//! times) looks the served ticket up in
//! the records; if its owner is dead, one CAS moves `serving` past it (two
//! waiters racing: one CAS wins). The claim's critical section repairs
//! what a holder left half done.

use crossbeam_utils::CachePadded;

use super::{Holder, Owner, Records, Waiter};
use crate::claim::locked::ShmLock;
use crate::sync::{AtomicU32, Ordering};

/// A ticket lock whose waiters get past dead ticket owners.
#[repr(C)]
#[derive(Debug)]
pub struct TicketPid {
    next: CachePadded<AtomicU32>,
    serving: CachePadded<AtomicU32>,
    records: Records,
}

// SAFETY: `serving` admits one ticket at a time and each ticket has one
// owner; moving `serving` past a dead owner admits the next one only once
// (a CAS), and a dead process is no longer inside. Acquire on entry (the
// load of `serving`), Release on exit (its store).
unsafe impl ShmLock for TicketPid {
    const NAME: &'static str = "ticket";
    type Guard = (Holder, u32);

    unsafe fn init(at: *mut Self) {
        // SAFETY: the caller's contract; the fields are in bounds.
        unsafe {
            (&raw mut (*at).next).write(CachePadded::new(AtomicU32::new(0)));
            (&raw mut (*at).serving).write(CachePadded::new(AtomicU32::new(0)));
            Records::init(&raw mut (*at).records);
        }
    }

    #[inline]
    fn lock(&self, me: Holder) -> (Holder, u32) {
        let t = self.records.take(&self.next, me);
        let mut waiter = Waiter::new();
        // Acquire: pairs with the previous holder's Release store.
        while self.serving.load(Ordering::Acquire) != t {
            if waiter.pause(Self::NAME) {
                self.repair();
            }
        }
        (me, t)
    }

    #[inline]
    unsafe fn unlock(&self, (me, t): (Holder, u32)) {
        // Release: our critical section happens before the next holder's.
        self.serving.store(t.wrapping_add(1), Ordering::Release);
        self.records.idle(me);
    }
}

impl TicketPid {
    /// Moves `serving` past its ticket if that ticket's owner is dead.
    #[cold]
    #[inline(never)]
    fn repair(&self) {
        // Acquire: we may enter right after moving it.
        let s = self.serving.load(Ordering::Acquire);
        if self.records.owner(s) == Owner::Dead {
            // AcqRel: Acquire for what the dead holder wrote; Release
            // for the next owner, which loads `serving`.
            let _ = self.serving.compare_exchange(
                s,
                s.wrapping_add(1),
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
    }
}
