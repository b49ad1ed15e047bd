//! `always-spin` (KLMO91 §2.2, busywait): poll until the lock is free.
//!
//! The threshold is `u32::MAX` polls (about a minute at tens of ns a
//! poll), after which even this policy blocks rather than spin forever:
//! KLMO91 warn that unbounded spinning on a descheduled holder can
//! deadlock. With user threads (no preemption) a holder that blocks inside
//! its critical section while every processor spins on its lock stalls
//! the program for that minute; keep critical sections non-blocking when
//! using this policy there.

use super::{LockName, SpinPolicy};

/// Spin (practically) forever.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysSpin;

impl SpinPolicy for AlwaysSpin {
    const NAME: &'static str = "always-spin";
    const INIT: Self = AlwaysSpin;

    #[inline(always)]
    fn threshold(&self, _c: u32, _lock: &LockName) -> u32 {
        u32::MAX
    }
}
