//! A processor with no ready thread: it polls for `idle_spins` rounds,
//! then parks in the kernel (KLMO91: spin about as long as a block + wake
//! costs, then block), or, for a strategy that idles its own way
//! (`Strategy::OWN_IDLE`), asks the strategy.

use symmetry_locks::sync::Ordering;

use super::context::ProcCtx;
use super::processor::Processor;
use super::shared::Shared;
use crate::strategy::{Dispatch, Idle, ProcStats, Strategy};

impl<S: Strategy, P: Processor> Shared<S, P> {
    /// Idles until a thread is dispatched, or `None` at shutdown.
    pub(super) fn idle(&self, ctx: &ProcCtx<S>) -> Option<Dispatch> {
        if S::OWN_IDLE {
            // SAFETY: as in `worker`.
            return match self.strategy.idle(unsafe { &mut *ctx.local.get() }) {
                Idle::Run(d) => Some(d),
                Idle::Exit => None,
            };
        }
        let me = ctx.header.index;
        let mut spins = 0u32;
        loop {
            if self.strategy.has_ready() {
                // SAFETY: as in `worker` (one user of the local state).
                let local = unsafe { &mut *ctx.local.get() };
                if let Some(d) = self.strategy.schedule(local, None) {
                    return Some(d);
                }
            }
            // Acquire: pairs with the SeqCst store in `shutdown`.
            if self.env.shutdown.load(Ordering::Acquire) {
                // Acquire: as in `worker`.
                if self.strategy.has_ready() && !self.stop_now.load(Ordering::Acquire) {
                    continue;
                }
                return None;
            }
            if spins < self.env.idle_spins {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            spins = 0;
            // SeqCst load: the re-check after the sleeper's fence (see `Sleepers`).
            self.sleepers.sleep(
                me,
                || self.strategy.has_ready() || self.env.shutdown.load(Ordering::SeqCst),
                || ProcStats::bump(&self.env.stats[me].parks, 1),
            );
        }
    }
}
