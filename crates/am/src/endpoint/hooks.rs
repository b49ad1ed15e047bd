//! Test hooks (hidden from the docs): they leave a queue as a sender
//! killed, or a sender or receiver descheduled, at the worst moment
//! would, so that crash and race tests can check what receivers recover.

use super::wait::FullWait;
use super::{Core, Endpoint, REQUESTS, Scope};
use crate::claim::{Claim, Claimed};
use crate::error::AmError;

impl<C: Claim, S> Endpoint<C, S> {
    /// Claims a request packet (and a bulk block if `bulk`) at `dest` as
    /// a send does, saving the claim's hint; `None` for a destination on
    /// another host.
    fn debug_claim(&mut self, dest: u32, bulk: bool) -> Result<Option<Claimed>, AmError> {
        let Some(q) = self.core.queue(dest, REQUESTS)? else {
            return Ok(None);
        };
        let me = self.core.holder();
        let mut hint = self.core.routes[dest as usize].hints[REQUESTS];
        let (core, state) = (&mut self.core, &mut self.state);
        let mut waits = FullWait::default();
        let mut wait = || Core::wait_full(core, state, dest, Scope::Both, &mut waits);
        let c = C::claim(q, me, &mut hint, bulk, &mut wait)?;
        self.core.routes[dest as usize].hints[REQUESTS] = hint;
        Ok(Some(c))
    }

    /// Test hook: claims a request packet (and a bulk block if `bulk`) at
    /// `dest` and leaves it CLAIMED, as a sender killed between its claim
    /// and its READY store would. Crash tests call it in a child process
    /// and then kill the child.
    #[doc(hidden)]
    pub fn debug_abandon_claim(&mut self, dest: u32, bulk: bool) -> Result<(), AmError> {
        self.debug_claim(dest, bulk).map(|_| ())
    }

    /// Test hook: takes the claim lock of `dest`'s request queue and never
    /// releases it (a sender killed inside LC98 Fig. 2's critical section);
    /// `false` for algorithms without a lock.
    #[doc(hidden)]
    pub fn debug_hold_lock(&mut self, dest: u32) -> Result<bool, AmError> {
        let Some(q) = self.core.queue(dest, REQUESTS)? else {
            return Ok(false);
        };
        Ok(C::debug_hold_lock(q, self.core.holder()))
    }

    /// Test hook: a short request to `dest` whose sender is descheduled
    /// between its claim and its READY store (as a busy machine can do to
    /// any sender, for as long as it likes): claims the packet, runs
    /// `between` (the caller's stand-in for the lost CPU), then publishes
    /// and rings as [`Endpoint::request`] does.
    #[doc(hidden)]
    pub fn debug_slow_request(
        &mut self,
        dest: u32,
        handler: u16,
        args: &[u64],
        between: impl FnOnce(),
    ) -> Result<(), AmError> {
        self.core.check_user(handler, args, None)?;
        self.core.check_peer(dest)?;
        let (me, rank) = (self.core.holder(), self.core.rank);
        let (Some(q), Some(bell)) = (
            self.core.queue(dest, REQUESTS)?,
            self.core.routes[dest as usize].bell,
        ) else {
            return Ok(());
        };
        let Some(c) = self.debug_claim(dest, false)? else {
            return Ok(());
        };
        between();
        q.publish(&c, handler, rank, args, None);
        crate::bell::ring(bell, || C::announce(q, me));
        self.core.stats.sent += 1;
        Ok(())
    }

    /// Test hook: frees the bulk blocks of own request queue that dead
    /// senders claimed and no message names, as the receiver's repair
    /// does, running `between` in the middle of the sweep (as a receiver
    /// that loses its CPU there); how many it freed.
    #[doc(hidden)]
    pub fn debug_sweep_bulk(&mut self, between: impl FnOnce()) -> u64 {
        let before = self.core.stats.recovered_bulk;
        let q = self.core.own_queue(REQUESTS);
        self.core.sweep_dead_bulk_with(q, REQUESTS, between);
        self.core.stats.recovered_bulk - before
    }
}
