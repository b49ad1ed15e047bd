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
//! spins (or, once yielding, [`CHECK_YIELDS`] yields or [`CHECK_EVERY`],
//! whichever comes first; below), so the fast paths are the
//! plain algorithms; the check reads `/proc` (the holder's pid), never the
//! waiter's hot lines.
//!
//! # What a waiter does while it waits
//!
//! The locks' protocols are LC98's; only the waiting between two polls is
//! this crate's (`Waiter`): KLMO91's fixed-spin(C) with `sched_yield` as
//! the block. A waiter spins (one spin-wait hint per poll) for C polls,
//! C being the locks crate's calibrated block+wake cost of an OS thread
//! ([`calibration::c_spins_os`]: measured by `symmetry calibrate`, or the
//! documented default of 5 us), then yields the processor at every poll.
//! A process preempted holding a claim lock (or, under `ticket` and
//! `anderson`, handed it while descheduled) is then held up by its
//! waiters for one spin budget per turn on a core, not for their whole
//! time slices: a job of more ranks than cores finishes in time
//! proportional to its work (issue 43).
//!
//! The experiments still measure the paper's locks: the budget (about
//! 5 us) is tens of times an uncontended hand-off of these locks (a cache
//! line moving between cores, 0.1-0.3 us, and a critical section of a few
//! loads and stores), so on a machine with a core per rank a waiter
//! finds the lock within its budget and never yields, and the numbers
//! are those of pure spinning. Only waits for a descheduled process,
//! which the paper's dedicated machine did not have, are cut short.
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

use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

pub use super::Holder;

use symmetry_locks::spin_then_block::LockName;
use symmetry_locks::spin_then_block::calibration;
use symmetry_locks::spin_then_block::policy::{FixedSpinC, SpinPolicy};

use crate::segment::pid_alive;
use crate::sync::{AtomicU32, AtomicU64, Ordering, spin_hint};

/// Fruitless spins between two looks for a dead holder.
pub const CHECK_SPINS: u32 = 1 << 14;

/// Yields between two looks for a dead holder once a waiter has spent its
/// spin budget (a yield can last a time slice on a busy machine, so far
/// fewer than [`CHECK_SPINS`]).
pub const CHECK_YIELDS: u32 = 1 << 8;

/// Longest a yielding waiter goes between two looks for a dead holder,
/// however few yields that is: on a busy machine (more runnable threads
/// than cores) each yield can last a whole time slice, and
/// [`CHECK_YIELDS`] of them took most of a second, for which a dead
/// holder (or a dead waiter handed the lock) held up every waiter behind
/// it. On an idle machine the count comes first.
pub const CHECK_EVERY: Duration = Duration::from_millis(5);

/// When a waiter last looked for a gone peer (a dead holder, a dead
/// receiver), so that it looks at least every so long of waiting.
#[derive(Debug, Default)]
pub(crate) struct LookTimer(Option<Instant>);

impl LookTimer {
    /// A timer that starts at its first [`due`](Self::due).
    pub(crate) const fn new() -> LookTimer {
        LookTimer(None)
    }

    /// Whether to look now: `counted` (the caller's count of waits says
    /// so) or `every` has passed since the last look (or since the first
    /// call). Reads the clock: call it beside a yield, not in a spin.
    #[inline]
    pub(crate) fn due(&mut self, every: Duration, counted: bool) -> bool {
        let now = Instant::now();
        let last = *self.0.get_or_insert(now);
        let due = counted || now.duration_since(last) >= every;
        if due {
            self.0 = Some(now);
        }
        due
    }
}

/// The spin budget of a waiter for lock `name`, in polls: KLMO91's
/// fixed-spin(C) threshold for the calibrated C of an OS thread.
#[cold]
#[inline(never)]
pub(crate) fn spin_budget(name: &'static str) -> u32 {
    FixedSpinC
        .threshold(calibration::c_spins_os(), &LockName::Named(name))
        .max(1)
}

/// What a waiter for a claim lock does between two fruitless polls (see
/// the module docs): spin within its budget, then yield at every poll.
#[derive(Debug)]
pub(crate) struct Waiter {
    /// Fruitless polls so far.
    polls: u32,
    /// Polls to spin before yielding (0 until the first pause: an
    /// acquisition that does not wait never reads the calibration).
    budget: u32,
    /// When the waiter last looked for a dead holder, or began to yield.
    looked: LookTimer,
}

impl Waiter {
    /// A wait that has not polled yet.
    #[inline(always)]
    pub(crate) const fn new() -> Waiter {
        Waiter {
            polls: 0,
            budget: 0,
            looked: LookTimer::new(),
        }
    }

    /// One fruitless poll of a wait for lock `name`: a spin-wait hint
    /// within the budget, a `sched_yield` after it. Whether the waiter
    /// should now look for a dead holder (every [`CHECK_SPINS`] spins;
    /// once yielding, every [`CHECK_YIELDS`] yields or [`CHECK_EVERY`],
    /// whichever comes first).
    #[inline(always)]
    pub(crate) fn pause(&mut self, name: &'static str) -> bool {
        self.polls = self.polls.wrapping_add(1);
        if self.polls < self.budget {
            spin_hint();
            return self.polls.is_multiple_of(CHECK_SPINS);
        }
        self.pause_slow(name)
    }

    #[cold]
    #[inline(never)]
    fn pause_slow(&mut self, name: &'static str) -> bool {
        if self.budget == 0 {
            self.budget = spin_budget(name);
            if self.polls < self.budget {
                spin_hint();
                return false;
            }
        }
        std::thread::yield_now();
        let counted = self
            .polls
            .wrapping_sub(self.budget)
            .is_multiple_of(CHECK_YIELDS);
        self.looked.due(CHECK_EVERY, counted)
    }
}

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
