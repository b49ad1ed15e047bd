//! Sending: a request from the program or a reply from a request handler
//! is checked, claims a packet (and first a bulk block) of the
//! destination's queue with the claim algorithm `C`, and is published
//! there; to a peer known to be gone it fails at once.

use super::wait::FullWait;
use super::{Core, REPLIES, Scope, Token, USER_HANDLERS};
use crate::claim::{Claim, Claimed, Holder};
use crate::error::AmError;
use crate::layout::{MAX_ARGS, Queue};
use crate::sync::Ordering;

impl<C: Claim, S> Token<'_, C, S> {
    /// The rank that sent the message.
    pub fn src(&self) -> u32 {
        self.src
    }

    /// This endpoint's rank.
    pub fn rank(&self) -> u32 {
        self.core.rank
    }

    /// The endpoint's state.
    pub fn state(&mut self) -> &mut S {
        self.state
    }

    /// Replies to the request being handled with a short message.
    pub fn reply(&mut self, handler: u16, args: &[u64]) -> Result<(), AmError> {
        self.reply_inner(handler, args, None)
    }

    /// Replies with bulk data (at most one bulk block).
    pub fn reply_bulk(&mut self, handler: u16, args: &[u64], data: &[u8]) -> Result<(), AmError> {
        self.reply_inner(handler, args, Some(data))
    }

    fn reply_inner(
        &mut self,
        handler: u16,
        args: &[u64],
        data: Option<&[u8]>,
    ) -> Result<(), AmError> {
        if !self.is_request {
            return Err(AmError::BadReply {
                why: "reply handlers cannot send (only request handlers reply)",
            });
        }
        if self.replied {
            return Err(AmError::BadReply {
                why: "a request handler replies at most once",
            });
        }
        self.core.check_user(handler, args, data)?;
        Core::send(
            self.core,
            self.state,
            self.src,
            REPLIES,
            handler,
            args,
            data,
            Scope::Replies,
        )?;
        self.replied = true;
        Ok(())
    }
}

impl<C: Claim, S> Core<C, S> {
    /// Checks what the user asks to send: a user handler id, at most
    /// [`MAX_ARGS`] words, at most one bulk block of data.
    pub(super) fn check_user(
        &self,
        handler: u16,
        args: &[u64],
        data: Option<&[u8]>,
    ) -> Result<(), AmError> {
        if handler >= USER_HANDLERS {
            return Err(AmError::HandlerOutOfRange {
                id: handler,
                limit: USER_HANDLERS,
            });
        }
        if args.len() > MAX_ARGS {
            return Err(AmError::TooManyArgs { given: args.len() });
        }
        if let Some(d) = data {
            let max = self.own.config().bulk_bytes as usize;
            if d.len() > max {
                return Err(AmError::BulkTooLarge {
                    given: d.len(),
                    max,
                });
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn send(
        core: &mut Self,
        state: &mut S,
        dest: u32,
        which: usize,
        handler: u16,
        args: &[u64],
        data: Option<&[u8]>,
        scope: Scope,
    ) -> Result<(), AmError> {
        let Some(route) = core.routes.get_mut(dest as usize) else {
            return Err(AmError::NoSuchRank {
                rank: dest,
                size: core.size,
            });
        };
        let (Some(views), Some(closed), Some(bell)) = (&route.views, route.closed, route.bell)
        else {
            return Core::send_wire(core, state, dest, which, handler, args, data, scope);
        };
        let q = Self::unbound(&views[which]);
        // Acquire: pairs with the Release store in `Segment::mark_closed`.
        if route.gone.is_some() || closed.load(Ordering::Acquire) != 0 {
            return Core::refuse(core, dest);
        }
        let me = Holder {
            pid: core.pid,
            rank: core.rank,
        };
        let fast = match data {
            None => C::try_claim(q, me, &mut route.hints[which]),
            Some(_) => None,
        };
        let c = match fast {
            Some(c) => c,
            None => Core::claim_slow(core, state, q, me, dest, which, data.is_some(), scope)?,
        };
        q.publish(&c, handler, core.rank, args, data);
        crate::bell::ring(bell, || C::announce(q, me));
        core.stats.sent += 1;
        if dest == core.rank {
            core.self_unread += 1;
        }
        Ok(())
    }

    /// A claim that may wait (a full queue, a lost race, a bulk block):
    /// [`Claim::claim`] with the waiting closure, and the sender's hint of
    /// the queue brought up to date.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn claim_slow(
        core: &mut Self,
        state: &mut S,
        q: &Queue<'_, C::Tail>,
        me: Holder,
        dest: u32,
        which: usize,
        bulk: bool,
        scope: Scope,
    ) -> Result<Claimed, AmError> {
        let mut hint = core.routes[dest as usize].hints[which];
        let mut waits = FullWait::default();
        let mut wait = || Core::wait_full(core, state, dest, scope, &mut waits);
        let c = C::claim(q, me, &mut hint, bulk, &mut wait)?;
        core.routes[dest as usize].hints[which] = hint;
        Ok(c)
    }

    /// The error of a request to a peer that is gone.
    #[cold]
    #[inline(never)]
    fn refuse(core: &mut Self, dest: u32) -> Result<(), AmError> {
        core.check_peer(dest)?;
        // Closed between the two looks: report it as closed.
        Err(AmError::PeerClosed { rank: dest })
    }
}
