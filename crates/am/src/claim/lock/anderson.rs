//! `anderson`: Anderson's array lock (LC98 §3.1), one flag per possible
//! sender, with per-rank records of who took which ticket.
//!
//! State: `next` (ticket counter), `flags` (slot `t mod N` says "ticket `t`
//! may enter"), `serving` (a hint: the ticket the lock was last handed to,
//! written at release and read only by stuck waiters), and [`Records`].
//! Acquire: announce, take a ticket, record it, spin on its own flag, then
//! clear the flag for the next lap. Release: `serving` = ticket + 1, then
//! set the next slot's flag. Invariant: at most one flag is set; with
//! `N` = [`MAX_RANKS`] and one ticket per rank at a time,
//! no two outstanding tickets share a slot.
//!
//! A waiter spins on its flag, then yields (`Waiter`: the module docs
//! of [`super`]). A dead owner of ticket `s = serving` (it died holding
//! the lock, or before coming in after being handed it) stops everyone
//! behind it. A waiter that has spun [`CHECK_SPINS`](super::CHECK_SPINS) times (or yielded
//! [`CHECK_YIELDS`](super::CHECK_YIELDS) times) looks
//! `s` up: if `s` is its own ticket and the previous holder is dead, that
//! holder died between its two release stores and the waiter enters; if
//! the owner of `s` is
//! dead, a CAS of `serving` from `s` to `s + 1` (one racer wins) lets the
//! winner clear `s`'s flag and set the next one.

use crossbeam_utils::CachePadded;

use super::{Holder, Owner, Records, Waiter};
use crate::MAX_RANKS;
use crate::claim::locked::ShmLock;
use crate::sync::{AtomicU32, Ordering};

/// Anderson's array lock whose waiters get past dead ticket owners.
#[repr(C)]
#[derive(Debug)]
pub struct AndersonPid {
    next: CachePadded<AtomicU32>,
    serving: CachePadded<AtomicU32>,
    flags: [CachePadded<AtomicU32>; MAX_RANKS],
    records: Records,
}

const N: u32 = MAX_RANKS as u32;

// SAFETY: one flag is set at a time and only the owner of its ticket
// clears it and enters; a hand-over past a dead owner happens once (the
// CAS on `serving`). Acquire on entry (the flag load), Release on exit
// (the flag store).
unsafe impl ShmLock for AndersonPid {
    const NAME: &'static str = "anderson";
    type Guard = (Holder, u32);

    unsafe fn init(at: *mut Self) {
        // SAFETY: the caller's contract; the fields are in bounds.
        unsafe {
            (&raw mut (*at).next).write(CachePadded::new(AtomicU32::new(0)));
            (&raw mut (*at).serving).write(CachePadded::new(AtomicU32::new(0)));
            for i in 0..MAX_RANKS {
                (&raw mut (*at).flags[i])
                    .write(CachePadded::new(AtomicU32::new(u32::from(i == 0))));
            }
            Records::init(&raw mut (*at).records);
        }
    }

    #[inline]
    fn lock(&self, me: Holder) -> (Holder, u32) {
        let t = self.records.take(&self.next, me);
        let flag = &self.flags[(t % N) as usize];
        let mut waiter = Waiter::new();
        // Acquire: pairs with the Release store that handed us the flag.
        while flag.load(Ordering::Acquire) == 0 {
            if waiter.pause(Self::NAME) && self.repair(t) {
                break;
            }
        }
        // Relaxed: our own slot, next used by ticket t + N, which cannot
        // be handed the lock before we release.
        flag.store(0, Ordering::Relaxed);
        (me, t)
    }

    #[inline]
    unsafe fn unlock(&self, (me, t): (Holder, u32)) {
        let n = t.wrapping_add(1);
        // Release: a stuck waiter that reads the hint and enters (its
        // predecessor died before the flag store) sees our section.
        self.serving.store(n, Ordering::Release);
        // Release: our critical section happens before the next holder's.
        self.flags[(n % N) as usize].store(1, Ordering::Release);
        self.records.idle(me);
    }
}

impl AndersonPid {
    /// Gets past a dead owner of the served ticket; true if the lock is
    /// now ours (ticket `mine` is being served and its flag was lost).
    #[cold]
    #[inline(never)]
    fn repair(&self, mine: u32) -> bool {
        // Acquire: pairs with the Release flag stores of the hand-overs.
        let s = self.serving.load(Ordering::Acquire);
        if s == mine {
            // Handed to us (the hint says so) but the flag has not come:
            // enter only if the previous holder died between its two
            // release stores; a live one is about to store the flag (and
            // entering now would leave it set for ticket `mine + N`).
            return self.records.owner(mine.wrapping_sub(1)) == Owner::Dead;
        }
        if self.records.owner(s) == Owner::Dead
            && self
                .serving
                .compare_exchange(s, s.wrapping_add(1), Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            // Relaxed: the dead owner's slot, next used by ticket s + N.
            self.flags[(s % N) as usize].store(0, Ordering::Relaxed);
            // Release: what the dead holder wrote before dying (acquired
            // by our CAS) happens before the next holder's section.
            self.flags[(s.wrapping_add(1) % N) as usize].store(1, Ordering::Release);
        }
        false
    }
}
