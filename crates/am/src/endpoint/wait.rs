//! Waiting: a sender facing a full queue, and a receiver polling until
//! a condition holds, poll and back off; now and then they check the
//! peers they wait on, and the receiver repairs what dead senders left
//! at the heads of its queues.

use std::time::{Duration, Instant};

use super::{Core, Need, REPLIES, REQUESTS, Scope};
use crate::claim::Claim;
use crate::error::AmError;
use crate::sync::delay;

/// Full-queue waits between checks of the receiver's liveness.
const PEER_CHECK: u32 = 1 << 8;

impl<C: Claim, S> Core<C, S> {
    /// One wait of a sender facing a full queue: poll, back off, and now
    /// and then make sure the receiver still exists.
    #[cold]
    #[inline(never)]
    pub(super) fn wait_full(
        core: &mut Self,
        state: &mut S,
        dest: u32,
        scope: Scope,
        waits: &mut u32,
    ) -> Result<(), AmError> {
        if *waits == 0 {
            core.stats.full_waits += 1;
        }
        *waits = waits.wrapping_add(1);
        Core::poll_queues(core, state, scope)?;
        backoff(*waits);
        if (*waits).is_multiple_of(PEER_CHECK) {
            core.check_peer(dest)?;
        }
        Ok(())
    }

    /// Polls until `done`; every 20 ms of idling, repairs the heads of its
    /// own queues (dead senders' claims, stranded positions) and checks
    /// the peers that `need` names. A failed check is reported only if
    /// one more poll does not finish the wait (a peer may send its last
    /// message and close right away).
    pub(super) fn poll_until(
        core: &mut Self,
        state: &mut S,
        need: Need,
        mut done: impl FnMut(&Self, &S) -> bool,
    ) -> Result<(), AmError> {
        let mut idle = 0u32;
        let mut last_check = Instant::now();
        loop {
            if done(core, state) {
                return Ok(());
            }
            if Core::poll_queues(core, state, Scope::Both)? > 0 {
                idle = 0;
                continue;
            }
            idle = idle.saturating_add(1);
            backoff(idle);
            if idle.is_multiple_of(64) && last_check.elapsed() >= Duration::from_millis(20) {
                last_check = Instant::now();
                // Repair the heads first: messages of live senders may be
                // queued behind a dead one's claim.
                let before = core.stats.recovered_packets;
                for which in [REQUESTS, REPLIES] {
                    let q = core.own_queue(which);
                    let pos = core.head[which];
                    let w = q.word_at(pos);
                    core.unstick(q, which, pos, w);
                    core.sweep_dead_bulk(q, which);
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
}

/// Backoff of the `n`-th consecutive unsuccessful wait: exponential spins
/// up to 1024 pause instructions, then yield the processor too (waiting
/// threads may outnumber cores).
///
/// Not the locks crate's [`ExpBackoff`](symmetry_locks::ExpBackoff), which
/// never yields and draws each delay at random from the upper half of a
/// doubling limit. The yield is a guarantee here: a rank that waits on a
/// descheduled peer (a thread job with more ranks than cores) gives up
/// its core, as `poll_until` promises. And the schedule, fixed, is the
/// one the AM experiments were measured with. The spinning itself is the
/// locks crate's [`delay`].
#[inline]
fn backoff(n: u32) {
    delay(1u32 << n.min(10));
    if n > 10 {
        std::thread::yield_now();
    }
}
