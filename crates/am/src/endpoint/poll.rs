//! Receiving: a poll looks at the head of each own queue (and now and
//! then at the wire), and delivers the READY messages there to their
//! handlers, checking first that each is one an honest sender writes.

use super::collective::{H_BARRIER, H_REDUCE, H_RESULT};
use super::{Core, Msg, REPLIES, REQUESTS, Scope, Token, USER_HANDLERS, add};
use crate::claim::Claim;
use crate::error::AmError;
use crate::layout::{Body, MAX_ARGS, Queue, READY_BULK};

/// What makes a taken packet's body garbage (see `Core::defect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    /// A source rank outside the job.
    Source,
    /// More words than a message holds.
    Words,
    /// A handler id no sender may name.
    Handler,
    /// A bulk block or length outside the queue's.
    Bulk,
}

impl<C: Claim, S> Core<C, S> {
    #[inline]
    pub(super) fn poll_queues(
        core: &mut Self,
        state: &mut S,
        scope: Scope,
    ) -> Result<usize, AmError> {
        let mut n = 0;
        if !core.alone || core.self_unread > 0 {
            n += Core::poll_queue(core, state, REPLIES)?;
            if scope == Scope::Both {
                n += Core::poll_queue(core, state, REQUESTS)?;
            }
        }
        n += Core::tick_wire(core, state, scope)?;
        Ok(n)
    }

    /// Polls own queue `which`: a look at its head's word, inline; the
    /// delivery loop only if a message is there.
    #[inline(always)]
    fn poll_queue(core: &mut Self, state: &mut S, which: usize) -> Result<usize, AmError> {
        if C::PER_SENDER {
            return Core::poll_lanes(core, state, which);
        }
        let q = core.own_queue(which);
        let pos = core.head[which];
        let w = q.word_at(pos);
        if q.ready(w, pos, C::RECEIVER_FREES).is_none() {
            // Counted only: whether a sender holds the head up (which may
            // mean reading the senders' tail line, and pulling it away
            // from them) is looked at every STALL_CHECK polls.
            core.stalled(q, which, pos, w);
            return Ok(0);
        }
        Core::deliver(core, state, which, q, 0)
    }

    /// Polls own queue `which` of an algorithm with a lane per sender:
    /// the lanes announced in its summary word (one line), and those whose
    /// announcements a doze cleared until a poll finds them drained.
    #[inline(always)]
    fn poll_lanes(core: &mut Self, state: &mut S, which: usize) -> Result<usize, AmError> {
        let q = core.own_queue(which);
        let mut todo = (C::announced(q.tail) | core.unannounced[which]) & core.lane_mask;
        let mut n = 0;
        while todo != 0 {
            let r = todo.trailing_zeros() as usize;
            todo &= todo - 1;
            let lane = Self::unbound(&core.lanes[which][r]);
            let pos = core.lane_heads[which][r];
            let got = match lane.ready(lane.word_at(pos), pos, false) {
                Some(_) => Core::deliver(core, state, which, lane, r)?,
                None => 0,
            };
            // Drained (the delivery stopped short of its limit at a word
            // that is no message): an unannounced lane needs no more
            // looks; its sender's next message announces it again.
            if got < lane.len() {
                core.unannounced[which] &= !(1 << r);
            }
            n += got;
        }
        if n == 0 {
            core.idle_lanes(q, which);
        }
        Ok(n)
    }

    /// Delivers the messages at the head of own queue `which` (of its lane
    /// `lane`, under an algorithm with lanes), at most one ring's worth
    /// (so a flood cannot starve the caller).
    ///
    /// Where the receiver does not free packets (`stamp`, `rings`), the
    /// head is published in batches: every quarter ring, and when the
    /// loop ends (however it ends). A sender reads the head only when its
    /// cached copy says the ring is full, and a sender that keeps the
    /// ring full reads it after every message it sends: with a store per
    /// message the head's line would move twice per message, a batch
    /// moves it twice per quarter ring.
    #[inline(never)]
    fn deliver(
        core: &mut Self,
        state: &mut S,
        which: usize,
        q: &Queue<'_, C::Tail>,
        lane: usize,
    ) -> Result<usize, AmError> {
        let len = q.packets.len();
        let batch = (len as u64 / 4).max(1);
        let mut delivered = 0usize;
        let mut result = Ok(());
        while delivered < len {
            let pos = *core.head_mut(which, lane);
            let w = q.word_at(pos);
            let Some(st) = q.ready(w, pos, C::RECEIVER_FREES) else {
                break;
            };
            let body = q.take(pos, st == READY_BULK);
            *core.head_mut(which, lane) = pos + 1;
            // The packet goes back to the senders now that its body is
            // copied (its word freed, or the head published, every batch);
            // a bulk block, read in place, after the handler.
            if C::RECEIVER_FREES {
                q.release(pos, w, true);
            } else if (pos + 1).is_multiple_of(batch) {
                q.advance(pos);
            }
            core.stats.delivered += 1;
            core.self_unread = core.self_unread.saturating_sub(1);
            delivered += 1;
            if let Some(d) = core.defect(q, st, &body) {
                let e = core.garbage_of(q, &body, d);
                if let Err(e) = core.event(e) {
                    result = Err(e);
                    break;
                }
                continue;
            }
            let (bulk, bulk_slot) = Self::bulk_of(q, st, &body);
            let nargs = (body.nargs as usize).min(MAX_ARGS);
            let r = Core::dispatch(
                core,
                state,
                which,
                body.src,
                body.handler,
                &body.args[..nargs],
                bulk,
            );
            if let Some(b) = bulk_slot {
                q.free_bulk(b);
            }
            if let Err(e) = r.or_else(|e| core.event(e)) {
                result = Err(e);
                break;
            }
        }
        if delivered > 0 {
            if !C::RECEIVER_FREES {
                q.advance(*core.head_mut(which, lane) - 1);
            }
            add(&q.head.delivered, delivered as u64);
        }
        result.map(|()| delivered)
    }

    /// The next position to deliver of own queue `which`, or of its lane
    /// `lane` under an algorithm with lanes.
    #[inline(always)]
    fn head_mut(&mut self, which: usize, lane: usize) -> &mut u64 {
        if C::PER_SENDER {
            &mut self.lane_heads[which][lane]
        } else {
            &mut self.head[which]
        }
    }

    /// What is wrong with a taken packet's body, if anything, against
    /// what an honest sender writes (a few compares, inline; the error is
    /// built by [`Core::garbage_of`], out of line).
    #[inline(always)]
    fn defect(&self, q: &Queue<'_, C::Tail>, st: u64, body: &Body) -> Option<Defect> {
        if body.src >= self.size {
            Some(Defect::Source)
        } else if body.nargs as usize > MAX_ARGS {
            Some(Defect::Words)
        } else if body.handler >= USER_HANDLERS
            && !matches!(body.handler, H_BARRIER | H_REDUCE | H_RESULT)
        {
            Some(Defect::Handler)
        } else if st == READY_BULK
            && ((body.bulk_slot as usize) >= q.bulk.len() || body.bulk_len as usize > q.bulk_bytes)
        {
            Some(Defect::Bulk)
        } else {
            None
        }
    }

    /// Counts a body with a [`defect`](Core::defect) (dropped) and returns
    /// the error that says what it is.
    #[cold]
    #[inline(never)]
    fn garbage_of(&mut self, q: &Queue<'_, C::Tail>, body: &Body, d: Defect) -> AmError {
        self.stats.garbage += 1;
        let detail = match d {
            Defect::Source => format!("source rank {} (the job has {})", body.src, self.size),
            Defect::Words => format!("{} words (at most {MAX_ARGS})", body.nargs),
            Defect::Handler => format!("handler id {}", body.handler),
            Defect::Bulk => format!(
                "bulk block {} of {} bytes (the queue has {} blocks of {} bytes)",
                body.bulk_slot,
                body.bulk_len,
                q.bulk.len(),
                q.bulk_bytes
            ),
        };
        AmError::Garbage {
            src: body.src,
            detail,
        }
    }

    /// The bulk data and block of a bulk message without a defect (`st` is
    /// READY_BULK); none for a short one.
    #[inline(always)]
    fn bulk_of<'q>(q: &Queue<'q, C::Tail>, st: u64, body: &Body) -> (&'q [u8], Option<usize>) {
        if st != READY_BULK {
            return (&[], None);
        }
        let b = body.bulk_slot as usize;
        debug_assert!(b < q.bulk.len() && body.bulk_len as usize <= q.bulk_bytes);
        // SAFETY: the block is in bounds (`defect` checked it, against
        // our own configuration) and was filled before the READY store we
        // acquired; it stays untouched until we free it after the handler
        // (whose borrow cannot escape the call).
        let data = unsafe { core::slice::from_raw_parts(q.bulk_ptr(b), body.bulk_len as usize) };
        (data, Some(b))
    }

    #[inline(always)]
    pub(super) fn dispatch(
        core: &mut Self,
        state: &mut S,
        which: usize,
        src: u32,
        handler: u16,
        args: &[u64],
        bulk: &[u8],
    ) -> Result<(), AmError> {
        if handler >= USER_HANDLERS {
            return core.internal(handler, src, args);
        }
        let Some(h) = core.handlers[handler as usize] else {
            return Err(AmError::NoHandler { id: handler, src });
        };
        let msg = Msg {
            src,
            handler,
            args,
            bulk,
        };
        let mut token = Token {
            core,
            state,
            src,
            is_request: which == REQUESTS,
            replied: false,
        };
        h(&mut token, &msg)
    }
}
