//! Peers that are gone, and what dead senders leave behind.
//!
//! A peer is gone when its segment says it closed or its process is
//! dead; a failure found is remembered, so that requests to the peer fail
//! at once, and reported once to a wait that needs the peer. A receiver
//! whose queue head is held up by a sender repairs it only when the
//! sender is dead: a packet left CLAIMED is freed, a position handed out
//! and never shown is skipped, a bulk block claimed and never sent is
//! freed; a live sender, however slow, is waited for.

use super::{Core, Endpoint, Gone, Need, REPLIES, REQUESTS, Route, Stall, bump};
use crate::claim::Claim;
use crate::error::AmError;
use crate::layout::{CLAIMED, FREE, Queue, READY_BULK, lap_of, pid_of, state_of, word};
use crate::segment::pid_alive;
use crate::sync::Ordering;

/// Empty polls on a CLAIMED head packet before its owner's pid is checked.
const STALL_CHECK: u32 = 1 << 12;

impl<C: Claim, S> Endpoint<C, S> {
    /// The peers known to be gone (dead or closed), in rank order.
    pub fn failed_peers(&self) -> Vec<u32> {
        (0..self.core.size)
            .filter(|&r| self.core.routes[r as usize].gone.is_some())
            .collect()
    }

    /// Checks that every peer is alive and open.
    pub fn check_peers(&self) -> Result<(), AmError> {
        (0..self.core.size).try_for_each(|r| match self.core.look(r) {
            Some(g) => Err(g.error(r)),
            None => Ok(()),
        })
    }
}

impl Stall {
    /// Starts counting afresh if the head moved or its word changed;
    /// whether it did.
    #[inline(always)]
    fn restart(&mut self, pos: u64, word: u64) -> bool {
        let fresh = self.pos != pos || self.word != word;
        if fresh {
            *self = Stall {
                pos,
                word,
                count: 0,
            };
        }
        fresh
    }
}

impl Gone {
    fn error(self, rank: u32) -> AmError {
        match self {
            Gone::Dead(pid) => AmError::PeerDead { rank, pid },
            Gone::Closed => AmError::PeerClosed { rank },
        }
    }
}

impl<C: Claim, S> Core<C, S> {
    /// Whether `rank` is alive and open; a failure is remembered (so later
    /// requests to it fail at once) and returned.
    pub(super) fn check_peer(&mut self, rank: u32) -> Result<(), AmError> {
        let Some(g) = self.look(rank) else {
            return Ok(());
        };
        self.routes[rank as usize].gone.get_or_insert((g, false));
        Err(g.error(rank))
    }

    /// Whether `rank` is gone: as remembered, else looked up (a closed
    /// flag, a dead owner) without remembering it.
    fn look(&self, rank: u32) -> Option<Gone> {
        if rank == self.rank {
            return None;
        }
        if matches!(
            self.routes.get(rank as usize),
            Some(Route { views: None, .. })
        ) {
            // On another host: its failures are the wire's to report.
            return None;
        }
        if let Some((g, _)) = self.routes.get(rank as usize).and_then(|r| r.gone) {
            return Some(g);
        }
        let seg = self.segment(rank);
        // Death is looked at before the closed flag: a peer that closes
        // sets the flag before it exits, so a flag read after its death
        // is final. Read the other way round, a peer that closes and exits
        // between the two reads would be taken for one that died.
        let pid = seg.owner_pid();
        let dead = pid != self.pid && !pid_alive(pid);
        if seg.is_closed() {
            return Some(Gone::Closed);
        }
        dead.then_some(Gone::Dead(pid))
    }

    /// `rank`'s failure, if it is gone and nothing it sent us waits in
    /// our queues (see [`Core::undelivered_from`]).
    fn failed(&mut self, rank: u32) -> Option<AmError> {
        let e = self.check_peer(rank).err()?;
        (!self.undelivered_from(rank)).then_some(e)
    }

    /// The first failed peer that `need` says ends a wait (checking the
    /// peers it names first), marking it reported. A peer is reported
    /// only once every message it published to us has been delivered:
    /// its failure comes after its messages, as it happened after them.
    pub(super) fn failed_for(&mut self, need: Need) -> Option<AmError> {
        match need {
            Need::Rank(r) => self.failed(r),
            Need::Everyone => (0..self.size).find_map(|r| self.failed(r)),
            Need::Report => {
                for r in 0..self.size {
                    let _ = self.check_peer(r);
                }
                let r = (0..self.size).find(|&r| {
                    matches!(self.routes[r as usize].gone, Some((_, false)))
                        && !self.undelivered_from(r)
                })? as usize;
                let g = self.routes[r].gone.as_mut()?;
                g.1 = true;
                Some(g.0.error(r as u32))
            }
        }
    }

    /// Whether one of our queues holds a message of `rank` that is
    /// published (READY) and not yet delivered: one that waits behind a
    /// position the head has not passed (a live sender's claim, however
    /// long its process is descheduled). A peer that closes, or dies,
    /// right after its last send is found gone by a wait whose one more
    /// poll cannot deliver that message yet; reporting the peer then
    /// would fail a wait (a barrier the peer completed) that the message
    /// finishes as soon as the head moves.
    ///
    /// Every message of a closed peer is READY by now: a peer publishes
    /// each message before its send returns, and closes after, with a
    /// Release store of its closed flag that our look at the flag
    /// acquired, so the scan's loads below see every READY store it
    /// made. (A dead peer's messages are READY or never will be; one it
    /// left CLAIMED is the recovery's.)
    #[cold]
    #[inline(never)]
    fn undelivered_from(&self, rank: u32) -> bool {
        let from = |q: &Queue<'_, C::Tail>, head: u64| {
            (head..head + q.packets.len() as u64).any(|pos| {
                let p = &q.packets[q.slot_of(pos)];
                // Acquire: as in `poll_queue`, for the body read below.
                let w = p.state.load(Ordering::Acquire);
                q.ready(w, pos, C::RECEIVER_FREES).is_some()
                    // SAFETY: a message not yet delivered is not written
                    // until the head passes it, which only we move.
                    && unsafe { p.body.read() }.src == rank
            })
        };
        [REQUESTS, REPLIES].into_iter().any(|which| {
            if C::PER_SENDER {
                // Its messages are in its own lane only.
                let (lanes, heads) = (&self.lanes[which], &self.lane_heads[which]);
                lanes
                    .get(rank as usize)
                    .zip(heads.get(rank as usize))
                    .is_some_and(|(lane, &head)| from(lane, head))
            } else {
                from(self.own_queue(which), self.head[which])
            }
        })
    }

    /// No lane of own queue `which` (an algorithm with lanes) held a
    /// message: every [`STALL_CHECK`] such polls, frees the bulk blocks
    /// dead senders left claimed (nothing else of theirs holds anyone up:
    /// each lane has one sender).
    #[inline(always)]
    pub(super) fn idle_lanes(&mut self, q: &Queue<'_, C::Tail>, which: usize) {
        let s = &mut self.stall[which];
        s.count = s.count.wrapping_add(1);
        if s.count.is_multiple_of(STALL_CHECK) {
            self.sweep_dead_bulk(q, which);
        }
    }

    /// Repairs what dead senders left in own queue `which`: a stuck head
    /// ([`Core::unstick`], where senders share one ring) and bulk blocks.
    #[cold]
    pub(super) fn repair(&mut self, which: usize) {
        let q = self.own_queue(which);
        if !C::PER_SENDER {
            let pos = self.head[which];
            let w = q.word_at(pos);
            self.unstick(q, which, pos, w);
        }
        self.sweep_dead_bulk(q, which);
    }

    /// The head holds no message: after a while, repair it if a sender
    /// holds it up and can be got past.
    #[inline(always)]
    pub(super) fn stalled(&mut self, q: &Queue<'_, C::Tail>, which: usize, pos: u64, w: u64) {
        let s = &mut self.stall[which];
        if s.restart(pos, w) {
            return;
        }
        s.count = s.count.wrapping_add(1);
        if s.count.is_multiple_of(STALL_CHECK) {
            self.unstick(q, which, pos, w);
        }
    }

    /// Repairs the head of own queue `which` at `pos` (word `w`, not a
    /// message) if a sender holds it up and can be got past: a packet
    /// CLAIMED for this position by a dead process is recovered; a
    /// position handed out and not shown by its packet is skipped only if
    /// the claim algorithm finds a sender that will never show it dead
    /// ([`Claim::owner_dead`]; `poll_until` looks every 20 ms, a polling
    /// loop every [`STALL_CHECK`] polls). A live sender, however slow, is
    /// waited for.
    #[cold]
    #[inline(never)]
    pub(super) fn unstick(&mut self, q: &Queue<'_, C::Tail>, which: usize, pos: u64, w: u64) {
        match state_of(w) {
            CLAIMED if C::RECEIVER_FREES || lap_of(w) == q.claimed_lap(pos) => {
                self.recover(q, which, pos, w);
            }
            // A READY word (a message that came since the caller's poll,
            // whose sender may have died since) is never skippable.
            _ if crate::claim::skippable::<C>(q, pos, w) => {
                // A dead sender's position: counted as its claim would be,
                // and its bulk block (taken before the position) swept.
                if self.skip(q, which, pos, w) {
                    self.stats.recovered_packets += 1;
                    bump(&q.head.recovered);
                }
                self.sweep_dead_bulk(q, which);
            }
            _ => {}
        }
    }

    /// Skips the head position `pos` (word `w`, which does not show it) of
    /// a dead sender: stamps its slot FREE for the next lap. Under
    /// `lock-free` the slot's next lap is then owed by its next sender;
    /// under `stamp` the slot's next position finds it stamped as a
    /// consumed one.
    #[cold]
    fn skip(&mut self, q: &Queue<'_, C::Tail>, which: usize, pos: u64, w: u64) -> bool {
        if !q.next_lap(pos, w) {
            return false;
        }
        self.head[which] = pos + 1;
        q.advance(pos);
        true
    }

    #[cold]
    #[inline(never)]
    fn recover(&mut self, q: &Queue<'_, C::Tail>, which: usize, pos: u64, w: u64) {
        let pid = pid_of(w);
        if pid == 0 || pid == self.pid & 0x00ff_ffff || pid_alive(pid) {
            return;
        }
        if C::RECEIVER_FREES && !q.next_lap(pos, w) {
            return;
        }
        // Where the receiver does not free packets, moving the head past
        // the dead claim is all: the word, stamped for this lap, reads as
        // consumed for the slot's next position once the head is past it.
        self.head[which] = pos + 1;
        q.advance(pos);
        self.stats.recovered_packets += 1;
        bump(&q.head.recovered);
        self.sweep_dead_bulk(q, which);
    }

    /// Frees the bulk blocks that dead senders claimed and that no READY
    /// packet refers to. A dead process never makes anything READY again,
    /// so such a block can only be one it claimed before (or without)
    /// claiming its packet; without this sweep, a sender killed between
    /// its bulk claim and its packet claim would leak the block.
    #[cold]
    #[inline(never)]
    pub(super) fn sweep_dead_bulk(&mut self, q: &Queue<'_, C::Tail>, which: usize) {
        self.sweep_dead_bulk_with(q, which, || {});
    }

    /// [`Core::sweep_dead_bulk`], running `between` between its look at
    /// the senders' deaths and its scan of the packets (a test hook's
    /// stand-in for a receiver that loses its CPU there).
    ///
    /// Deaths are looked at before the packets, as in [`Core::look`]: a
    /// sender publishes its message (naming its block) before it exits,
    /// so a scan made after its death was seen finds that message. Read
    /// the other way round, a sender that published and exited between
    /// the scan and the look at its death would have its block, named by
    /// a message still in the queue, freed under that message (and
    /// claimed by another sender, and freed again after the delivery).
    pub(super) fn sweep_dead_bulk_with(
        &mut self,
        q: &Queue<'_, C::Tail>,
        which: usize,
        between: impl FnOnce(),
    ) {
        let own = self.pid & 0x00ff_ffff;
        // The blocks claimed by dead processes, with their words as seen.
        // Relaxed: the CAS below, from exactly this word, is what frees a
        // block (it fails if the block was freed and claimed since); what
        // orders the scan after the owner's publication is that its death
        // was seen first (above).
        let dead: Vec<(usize, u64)> = q
            .bulk
            .iter()
            .enumerate()
            .map(|(b, slot)| (b, slot.load(Ordering::Relaxed)))
            .filter(|&(_, bw)| {
                state_of(bw) == CLAIMED && pid_of(bw) != own && !pid_alive(pid_of(bw))
            })
            .collect();
        if dead.is_empty() {
            return;
        }
        between();
        let mut referenced = vec![false; q.bulk.len()];
        let mut mark = |q: &Queue<'_, C::Tail>, head: u64| {
            for pos in head..head + q.packets.len() as u64 {
                let p = &q.packets[q.slot_of(pos)];
                // Acquire: as in `poll_queue`, for the body read below.
                let w = p.state.load(Ordering::Acquire);
                if q.ready(w, pos, C::RECEIVER_FREES) == Some(READY_BULK) {
                    // SAFETY: a message not yet delivered is not written
                    // until the head passes it, which only we move.
                    let b = unsafe { p.body.read() }.bulk_slot as usize;
                    if b < referenced.len() {
                        referenced[b] = true;
                    }
                }
            }
        };
        if C::PER_SENDER {
            for (lane, &head) in self.lanes[which].iter().zip(&self.lane_heads[which]) {
                mark(lane, head);
            }
        } else {
            mark(q, self.head[which]);
        }
        for (b, bw) in dead {
            if referenced[b] {
                continue;
            }
            let free = word(lap_of(bw).wrapping_add(1), 0, FREE);
            // AcqRel: Acquire for what the dead owner wrote, Release for
            // the sender that claims the block next.
            if q.bulk[b]
                .compare_exchange(bw, free, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.stats.recovered_bulk += 1;
                bump(&q.head.recovered_bulk);
            }
        }
    }
}
