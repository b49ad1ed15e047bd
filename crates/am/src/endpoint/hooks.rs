//! Test hooks (hidden from the docs): they leave a destination's queue as
//! a sender killed at the worst moment would, so that crash tests can
//! check what receivers recover.

use super::{Core, Endpoint, REQUESTS, Scope};
use crate::claim::{Claim, Holder};
use crate::error::AmError;

impl<C: Claim, S> Endpoint<C, S> {
    /// Test hook: claims a request packet (and a bulk block if `bulk`) at
    /// `dest` and leaves it CLAIMED, as a sender killed between its claim
    /// and its READY store would. Crash tests call it in a child process
    /// and then kill the child.
    #[doc(hidden)]
    pub fn debug_abandon_claim(&mut self, dest: u32, bulk: bool) -> Result<(), AmError> {
        let Some(q) = self.core.queue(dest, REQUESTS)? else {
            return Ok(());
        };
        let me = Holder {
            pid: self.core.pid,
            rank: self.core.rank,
        };
        let mut hint = self.core.routes[dest as usize].hints[REQUESTS];
        let (core, state) = (&mut self.core, &mut self.state);
        let mut waits = 0u32;
        let mut wait = || Core::wait_full(core, state, dest, Scope::Both, &mut waits);
        C::claim(q, me, &mut hint, bulk, &mut wait).map(|_| ())
    }

    /// Test hook: takes the claim lock of `dest`'s request queue and never
    /// releases it (a sender killed inside LC98 Fig. 2's critical section);
    /// `false` for algorithms without a lock.
    #[doc(hidden)]
    pub fn debug_hold_lock(&mut self, dest: u32) -> Result<bool, AmError> {
        let Some(q) = self.core.queue(dest, REQUESTS)? else {
            return Ok(false);
        };
        let me = Holder {
            pid: self.core.pid,
            rank: self.core.rank,
        };
        Ok(C::debug_hold_lock(q, me))
    }
}
