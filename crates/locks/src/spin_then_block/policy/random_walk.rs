//! `random-walk` (KLMO91 §2.5): after a wait longer than C, lower the
//! threshold by 16 spins (not below 0); otherwise raise it by 16 spins
//! (not above C). KLMO91's most economical adaptive policy: one word per
//! lock.
//!
//! State: one word, the distance of the threshold *below C* in spins, so
//! a fresh lock (distance 0) starts at C whatever C turns out to be, and a
//! changed C keeps the walk's position relative to it. Updated by a
//! relaxed load and store: two racing waiters may lose one step, which a
//! walk shrugs off.

use std::sync::atomic::{AtomicU32, Ordering};

use super::{LockName, SpinPolicy};

/// Step, spins.
const STEP: u32 = 16;

/// Random-walk policy.
#[derive(Debug)]
pub struct RandomWalk {
    /// C minus the threshold, spins (clamped to C when read).
    below_c: AtomicU32,
}

impl Default for RandomWalk {
    fn default() -> Self {
        Self::INIT
    }
}

impl SpinPolicy for RandomWalk {
    const NAME: &'static str = "random-walk";
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = RandomWalk {
        below_c: AtomicU32::new(0),
    };

    #[inline]
    fn threshold(&self, c: u32, _lock: &LockName) -> u32 {
        c.saturating_sub(self.below_c.load(Ordering::Relaxed))
    }

    #[inline]
    fn record(&self, waited: u64, c: u32) {
        let d = self.below_c.load(Ordering::Relaxed).min(c);
        let next = if waited > u64::from(c) {
            (d + STEP).min(c)
        } else {
            d.saturating_sub(STEP)
        };
        if next != d {
            self.below_c.store(next, Ordering::Relaxed);
        }
    }
}
