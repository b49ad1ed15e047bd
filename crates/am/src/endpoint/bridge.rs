//! The bridge to ranks on other hosts: a send to one is a single message
//! on the job's [`Wire`](net::Wire) (header, words, bulk data), and
//! polling looks at the wire as well as the queues, delivering what it
//! finds to the same handlers (see [`crate::net`]).

use std::time::Duration;

use super::collective::{H_BARRIER, H_REDUCE, H_RESULT};
use super::wait::FullWait;
use super::{Core, REPLIES, REQUESTS, Remote, Scope, USER_HANDLERS};
use crate::claim::Claim;
use crate::error::AmError;
use crate::layout::MAX_ARGS;
use crate::net::{self, Kind, MAX_IN_FLIGHT, Wiring};

/// Polls of the shared-memory queues per poll of the wire to other hosts.
pub(super) const WIRE_EVERY: u32 = 8;

impl Remote {
    /// Connects the job's wire (which may be collective: every rank of
    /// the job calls it). `alone`: no other rank shares this host, so the
    /// wire is polled on every poll.
    pub(super) fn connect(
        wiring: &dyn Wiring,
        timeout: Duration,
        alone: bool,
    ) -> Result<Self, AmError> {
        Ok(Remote {
            wire: wiring.connect()?,
            name: wiring.name(),
            buf: Vec::new(),
            timeout,
            tick: 0,
            every: if alone { 1 } else { WIRE_EVERY },
        })
    }
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("wire", &self.name).finish()
    }
}

impl<C: Claim, S> Core<C, S> {
    /// Sends to a rank on another host: one wire message holding the
    /// header, the words and the bulk data. Past [`MAX_IN_FLIGHT`]
    /// unfinished sends it waits as on a full queue (polling).
    #[allow(clippy::too_many_arguments)]
    #[cold]
    #[inline(never)]
    pub(super) fn send_wire(
        core: &mut Self,
        state: &mut S,
        dest: u32,
        which: usize,
        handler: u16,
        args: &[u64],
        data: Option<&[u8]>,
        scope: Scope,
    ) -> Result<(), AmError> {
        let mut waits = FullWait::default();
        loop {
            let Some(r) = core.remote.as_mut() else {
                unreachable!("a rank without a view is on another host, so there is a wire");
            };
            if r.wire.in_flight() < MAX_IN_FLIGHT {
                break;
            }
            Core::wait_full(core, state, dest, scope, &mut waits)?;
        }
        let Some(r) = core.remote.as_mut() else {
            unreachable!("checked above");
        };
        let bulk = data.unwrap_or(&[]);
        let head = net::header(handler, args.len(), bulk.len());
        let mut w = [0u8; 8 * MAX_ARGS];
        let n = net::words(args, &mut w);
        let kind = if which == REQUESTS {
            Kind::Request
        } else {
            Kind::Reply
        };
        r.wire.send(dest, kind, [&head, &w[..n], bulk])?;
        core.stats.sent += 1;
        Ok(())
    }

    /// Counts a call of `poll_queues` and, on every `every`-th (on each
    /// while messages come), looks at the wire; returns how many messages
    /// the look delivered (0 without a wire or a look).
    #[inline]
    pub(super) fn tick_wire(
        core: &mut Self,
        state: &mut S,
        scope: Scope,
    ) -> Result<usize, AmError> {
        let Some(r) = core.remote.as_mut() else {
            return Ok(0);
        };
        // With peers on this host the wire is polled on one call in
        // WIRE_EVERY: a probe of MPI costs several times a poll of the
        // queues, and would slow the same-host round trip on every poll.
        // A countdown, not a remainder: a division on every poll
        // showed in profiles of the MPI-only round trip.
        r.tick += 1;
        if r.tick < r.every {
            return Ok(0);
        }
        r.tick = 0;
        let got = Core::poll_wire(core, state, scope)?;
        if got > 0
            && let Some(r) = core.remote.as_mut()
        {
            // A look delivers one message: while they come, the
            // wire is looked at on every poll.
            r.tick = r.every;
        }
        Ok(got)
    }

    /// Delivers the message one look at the wire finds, if any (one per
    /// call: see [`Wire::recv`](net::Wire::recv)); returns how many (0 or 1).
    #[inline]
    fn poll_wire(core: &mut Self, state: &mut S, scope: Scope) -> Result<usize, AmError> {
        let Some(r) = core.remote.as_mut() else {
            return Ok(0);
        };
        let only = (scope == Scope::Replies).then_some(Kind::Reply);
        let mut buf = std::mem::take(&mut r.buf);
        let result = Core::deliver_wire(core, state, only, &mut buf);
        if let Some(r) = core.remote.as_mut() {
            r.buf = buf;
        }
        result
    }

    /// `poll_wire`'s look and delivery, with the message buffer taken out
    /// of `core.remote` (so a handler can send while it is borrowed).
    #[inline]
    fn deliver_wire(
        core: &mut Self,
        state: &mut S,
        only: Option<Kind>,
        buf: &mut Vec<u8>,
    ) -> Result<usize, AmError> {
        let Some(r) = core.remote.as_mut() else {
            return Ok(0);
        };
        let Some((src, kind)) = r.wire.recv(only, buf)? else {
            return Ok(0);
        };
        core.stats.delivered += 1;
        let which = if kind == Kind::Request {
            REQUESTS
        } else {
            REPLIES
        };
        let msg = match net::decode(buf) {
            Ok(m)
                if m.handler < USER_HANDLERS
                    || matches!(m.handler, H_BARRIER | H_REDUCE | H_RESULT) =>
            {
                m
            }
            Ok(m) => {
                core.stats.garbage += 1;
                let detail = format!("handler id {}", m.handler);
                core.event(AmError::Garbage { src, detail })?;
                return Ok(1);
            }
            Err(detail) => {
                core.stats.garbage += 1;
                core.event(AmError::Garbage { src, detail })?;
                return Ok(1);
            }
        };
        let args = msg.args;
        let r = Core::dispatch(
            core,
            state,
            which,
            src,
            msg.handler,
            &args[..msg.nargs],
            msg.bulk,
        );
        if let Err(e) = r {
            core.event(e)?;
        }
        Ok(1)
    }
}
