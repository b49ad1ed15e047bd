//! The spin locks of LC98 Fig. 2's claim, built for shared memory that a
//! process can die in: each records who holds (or waits for) it, so that
//! the waiters of a lock whose holder was SIGKILLed detect the death and
//! take the lock over, and the queue goes on (LC98 §3.1 names the locks;
//! it does not handle failures).
//!
//! | lock | file | holder identity | a dead ... is got past by |
//! |---|---|---|---|
//! | `tas` | [`tas`] | the lock word is the holder's pid | holder: a waiter CASes the dead pid to its own |
//! | `ttas` | [`ttas`] | as `tas` | as `tas` |
//! | `ticket` | [`ticket`] | per-rank records `(ticket, pid)` | holder or waiter: the waiter that finds the served ticket's owner dead serves the next one |
//! | `anderson` | [`anderson`] | per-rank records, a served-ticket hint | holder or waiter: as `ticket`, handing the flag on |
//!
//! A waiter looks for a dead holder only after [`CHECK_SPINS`] fruitless
//! spins, so the fast paths are the plain algorithms; the check reads
//! `/proc` (the holder's pid), never the waiter's hot lines.
//!
//! What is not handled: a pid reused by a new process before anyone
//! notices the death (the lock then waits for the new process, which never
//! releases it; Linux reuses pids only after `pid_max` others), and a
//! process that writes garbage into the lock (nothing written by a peer is
//! trusted to be honest, only to stay in bounds).

pub mod anderson;
pub mod tas;
pub mod ticket;
pub mod ttas;

pub use anderson::AndersonPid;
pub use tas::TasPid;
pub use ticket::TicketPid;
pub use ttas::TtasPid;

use crossbeam_utils::CachePadded;

pub use super::Holder;

use crate::segment::pid_alive;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// Fruitless spins between two looks for a dead holder.
pub const CHECK_SPINS: u32 = 1 << 14;

/// Whether `pid` names a process that has died (0 never does: it is
/// nobody's).
#[inline]
pub(crate) fn dead(pid: u32) -> bool {
    pid != 0 && !pid_alive(pid)
}

/// What a rank's record says.
const IDLE: u64 = 0;
/// Between announcing and taking a ticket.
const PENDING: u64 = 1;
/// Holding (or waiting with) the recorded ticket.
const TICKETED: u64 = 2;

/// A record word: `ticket << 32 | pid << 8 | state`.
#[inline(always)]
const fn record(ticket: u32, pid: u32, state: u64) -> u64 {
    ((ticket as u64) << 32) | (((pid as u64) & 0x00ff_ffff) << 8) | state
}

/// One record per rank of who takes tickets of a ticket-ordered lock, so
/// that a waiter can find the owner of the ticket being served. Each rank
/// writes only its own record (on its own line: the writes stay in the
/// writer's cache); waiters read them only when stuck.
#[repr(C)]
#[derive(Debug)]
pub struct Records {
    slots: [CachePadded<AtomicU64>; crate::MAX_RANKS],
}

/// Who owns a ticket, as far as the records tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// A live process holds or waits with it, or may (a live rank is
    /// between announcing and taking a ticket): wait.
    Live,
    /// Its owner has died (recorded with it, or the only ranks that can
    /// hold it are dead ones that announced and never recorded).
    Dead,
}

impl Records {
    /// Initializes the records in place.
    ///
    /// # Safety
    ///
    /// `at` is valid for writes, aligned and unused by anyone else.
    pub(crate) unsafe fn init(at: *mut Records) {
        for i in 0..crate::MAX_RANKS {
            // SAFETY: in bounds of `at` (caller).
            unsafe {
                (&raw mut (*at).slots[i]).write(CachePadded::new(AtomicU64::new(IDLE)));
            }
        }
    }

    fn slot(&self, me: Holder) -> &AtomicU64 {
        &self.slots[me.rank as usize % crate::MAX_RANKS]
    }

    /// Takes a ticket from `next` for `me`, recorded: announces first
    /// (PENDING), then the fetch-and-add, then the ticket (TICKETED), so
    /// that whoever holds a ticket is always found, or is one of the
    /// announced ranks.
    #[inline(always)]
    pub(crate) fn take(&self, next: &AtomicU32, me: Holder) -> u32 {
        let slot = self.slot(me);
        // Relaxed: ordered before the ticket RMW's Release (a waiter that
        // acquires a ticket counter past ours sees the announcement).
        slot.store(record(0, me.pid, PENDING), Ordering::Relaxed);
        // AcqRel: Release for the announcement above.
        let t = next.fetch_add(1, Ordering::AcqRel);
        // Release: a stuck waiter's Acquire scan sees the record with the
        // ticket RMW before it.
        slot.store(record(t, me.pid, TICKETED), Ordering::Release);
        t
    }

    /// Records that `me` has released its ticket.
    #[inline(always)]
    pub(crate) fn idle(&self, me: Holder) {
        // Relaxed: a stale TICKETED record of a served ticket is ignored.
        self.slot(me).store(IDLE, Ordering::Relaxed);
    }

    /// Who owns `ticket` (being served now, so handed out already).
    #[cold]
    pub(crate) fn owner(&self, ticket: u32) -> Owner {
        let mut pending_dead = false;
        let mut pending_live = false;
        for s in &self.slots {
            // Acquire: pairs with the TICKETED record's Release in `take`.
            let w = s.load(Ordering::Acquire);
            let pid = ((w >> 8) & 0x00ff_ffff) as u32;
            match w & 0xff {
                TICKETED if (w >> 32) as u32 == ticket => {
                    return if dead(pid) { Owner::Dead } else { Owner::Live };
                }
                PENDING if dead(pid) => pending_dead = true,
                PENDING => pending_live = true,
                _ => {}
            }
        }
        // Nobody recorded the ticket: its owner is between announcing and
        // recording. If every such rank is dead, the owner is dead.
        if pending_dead && !pending_live {
            Owner::Dead
        } else {
            Owner::Live
        }
    }
}
