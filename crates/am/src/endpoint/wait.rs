//! Waiting: a sender facing a full queue, and a receiver polling until
//! a condition holds, poll and back off; now and then they check the
//! peers they wait on, and the receiver repairs what dead senders left
//! at the heads of its queues.

use std::time::{Duration, Instant};

use symmetry_locks::backoff::Waiting;
use symmetry_locks::spin_then_block::{LockName, SpinPolicy, calibration};

use super::{Core, Need, REPLIES, REQUESTS, Scope};
use crate::bell;
use crate::claim::Claim;
use crate::claim::lock::LookTimer;
use crate::error::AmError;
use crate::sync::{AtomicU32, delay};

/// Full-queue waits between checks of the receiver's liveness (or less:
/// see [`Core::wait_full`]).
const PEER_CHECK: u32 = 1 << 8;

/// A sender's run of waits on one full queue: how many, and when it last
/// made sure the receiver still exists.
#[derive(Debug, Default)]
pub(super) struct FullWait {
    waits: u32,
    checked: LookTimer,
}

impl<C: Claim, S> Core<C, S> {
    /// One wait of a sender facing a full queue: poll, back off, and make
    /// sure the receiver still exists every [`PEER_CHECK`] waits or
    /// [`CHECK_EVERY`] of yielding, whichever comes first.
    ///
    /// Each wait from the fifth on yields, and on a busy machine (more
    /// runnable threads than cores) a yield can last a whole time slice:
    /// by the count alone, a sender blocked on a dead receiver's full
    /// queue took most of a second to notice. A clock read beside a yield
    /// costs next to nothing.
    #[cold]
    #[inline(never)]
    pub(super) fn wait_full(
        core: &mut Self,
        state: &mut S,
        dest: u32,
        scope: Scope,
        w: &mut FullWait,
    ) -> Result<(), AmError> {
        if w.waits == 0 {
            core.stats.full_waits += 1;
        }
        w.waits = w.waits.saturating_add(1);
        Core::poll_queues(core, state, scope)?;
        let counted = w.waits.is_multiple_of(PEER_CHECK);
        // The clock only beside a yield, not after a short spin.
        let due = if backoff(w.waits) {
            w.checked.due(CHECK_EVERY, counted)
        } else {
            counted
        };
        if due {
            core.check_peer(dest)?;
        }
        Ok(())
    }

    /// Polls until `done`, waiting by the spin policy `policy` between
    /// messages (module docs); every [`CHECK_EVERY`] of idling, repairs
    /// the heads of its own queues (dead senders' claims, stranded
    /// positions) and checks the peers that `need` names. A failed check
    /// is reported only if one more poll does not finish the wait (a peer
    /// may send its last message and close right away), and not while a
    /// message of the failed peer waits undelivered in our queues
    /// (`Core::failed_for`).
    pub(super) fn poll_until<P: SpinPolicy>(
        core: &mut Self,
        state: &mut S,
        need: Need,
        policy: &P,
        mut done: impl FnMut(&Self, &S) -> bool,
    ) -> Result<(), AmError> {
        let c = calibration::c_spins_os();
        let threshold = policy.threshold(c, &LockName::Named("am-poll"));
        // The policy counts spins; a poll of the queues is not one, so the
        // budget is the time those spins stand for.
        let spin_ns = (f64::from(threshold) * calibration::ns_per_spin()) as u64;
        // Our own doorbell, if we can sleep: not with ranks on other
        // hosts, whose messages come by the wire and ring no bell.
        let bell = match core.remote {
            None => core.routes[core.rank as usize].bell,
            Some(_) => None,
        };
        let mut idle = 0u32;
        let mut waiting = Waiting::new();
        let mut last_check = Instant::now();
        let mut woke = false;
        loop {
            if done(core, state) {
                return Ok(());
            }
            if Core::poll_queues(core, state, Scope::Both)? > 0 {
                if waiting.polls() > 0 {
                    policy.record(calibration::ns_to_spins(waiting.elapsed_ns()), c);
                    waiting = Waiting::new();
                }
                idle = 0;
                woke = false;
                continue;
            }
            idle = idle.saturating_add(1);
            match bell {
                // Spun for the budget (polls, reading the clock once per
                // 16): doze, and sleep unless a last poll finds something.
                Some(bell) if !waiting.spin_within(spin_ns) => {
                    if Core::sleep(core, state, bell, &mut done)? {
                        policy.record(calibration::ns_to_spins(waiting.elapsed_ns()), c);
                        waiting = Waiting::new();
                        idle = 0;
                        continue;
                    }
                    // Woken: poll first; if that finds nothing to deliver
                    // (a timeout, or a sender's message queued behind a
                    // dead sender's claim), check.
                    woke = true;
                    continue;
                }
                Some(_) => {}
                None => {
                    backoff(idle);
                }
            }
            if std::mem::take(&mut woke)
                || (idle.is_multiple_of(64) && last_check.elapsed() >= CHECK_EVERY)
            {
                last_check = Instant::now();
                // Repair the heads first: messages of live senders may be
                // queued behind a dead one's claim.
                let before = core.stats.recovered_packets;
                for which in [REQUESTS, REPLIES] {
                    core.repair(which);
                }
                if core.stats.recovered_packets > before {
                    idle = 0;
                    continue;
                }
                if let Some(e) = core.failed_for(need) {
                    Core::poll_queues(core, state, Scope::Both)?;
                    if done(core, state) {
                        return Ok(());
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Announces that this receiver may sleep, polls once more, and
    /// sleeps (at most [`SLEEP`]) only if that poll found nothing and
    /// `done` still does not hold; whether the poll found something.
    #[cold]
    #[inline(never)]
    fn sleep(
        core: &mut Self,
        state: &mut S,
        bell: &AtomicU32,
        done: &mut impl FnMut(&Self, &S) -> bool,
    ) -> Result<bool, AmError> {
        if C::PER_SENDER {
            // Cleared before the doze's fence, polled after it (see
            // `claim::rings`, "Announcements").
            for which in [REQUESTS, REPLIES] {
                let q = core.own_queue(which);
                core.unannounced[which] |= C::forget(q.tail);
            }
        }
        bell::doze(bell);
        let got = Core::poll_queues(core, state, Scope::Both);
        let found = !matches!(got, Ok(0)) || done(core, state);
        if !found {
            bell::sleep(bell, SLEEP);
        }
        bell::rise(bell);
        got.map(|n| n > 0)
    }
}

/// How often an idle wait that polls repairs its queues' heads and
/// checks its peers.
const CHECK_EVERY: Duration = Duration::from_millis(20);

/// Longest sleep: a sleeping wait checks at every wake-up, so this is how
/// long a dead peer may go unnoticed by a receiver that nothing else
/// wakes. (Each wake-up costs the receiver tens of microseconds of CPU in
/// a virtual machine: at 20 ms, half a percent.)
const SLEEP: Duration = Duration::from_millis(100);

/// Backoff of the `n`-th consecutive unsuccessful wait: exponential spins
/// up to 1024 pause instructions, and from the fifth wait on (after about
/// 30 pauses of spinning) a yield of the processor too.
///
/// A full queue means the receiver has fallen behind, and with waiting
/// threads outnumbering cores it may be waiting for this very core. With
/// 2 or 3 writers and a receiver on 2 cores and the default 64-packet
/// lanes (`symmetry run peer-messages --quick`), yielding from the
/// eleventh wait on (after about 2,000 pauses) left `rings` at 0.9-2.2x
/// `ArrayQueue`'s time per message in four runs, yielding from the fifth
/// at 0.65-0.97x in three. With a core per rank the yield returns at
/// once.
///
/// Not the locks crate's [`ExpBackoff`](symmetry_locks::ExpBackoff), which
/// never yields and draws each delay at random from the upper half of a
/// doubling limit. The yield is a guarantee here: a rank that waits on a
/// descheduled peer (a thread job with more ranks than cores) gives up
/// its core, as `poll_until` promises. The spinning itself is the locks
/// crate's [`delay`].
///
/// Returns whether it yielded.
#[inline]
fn backoff(n: u32) -> bool {
    delay(1u32 << n.min(10));
    let yields = n > 4;
    if yields {
        std::thread::yield_now();
    }
    yields
}
