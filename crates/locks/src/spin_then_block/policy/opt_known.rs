//! `opt-known` (KLMO91 §2.4): the optimal on-line threshold for a *known*
//! distribution, precomputed per lock from a recorded profile.
//!
//! Record a profile of the program (the [`profiler`](crate::spin_then_block::profiler)),
//! compute each lock's threshold with [`optimal_threshold`](super::optimal_threshold)
//! (what [`install_from_profile`] does), and run again: each lock looks its
//! name up in the installed table at its first contended acquisition and
//! keeps the value. A lock missing from the table uses C (fixed-spin-c),
//! the 2-competitive choice when nothing is known. Install the table
//! before the locks first contend; a lock that already looked never looks
//! again. [`OptKnown::with_threshold`] fixes a lock's threshold directly.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU32, Ordering};

use super::{LockName, SpinPolicy};
use crate::spin_then_block::profiler::Profile;

/// `u32::MAX` in the cache word: not looked up yet.
const UNSET: u32 = u32::MAX;

static TABLE: RwLock<Option<HashMap<String, u32>>> = RwLock::new(None);

/// Installs per-lock thresholds (spins), replacing any earlier table.
pub fn install<I, S>(thresholds: I)
where
    I: IntoIterator<Item = (S, u32)>,
    S: Into<String>,
{
    let map = thresholds.into_iter().map(|(k, v)| (k.into(), v)).collect();
    *TABLE.write().unwrap_or_else(|e| e.into_inner()) = Some(map);
}

/// Installs the optimal threshold of every lock of `profile`, for its
/// blocker's C as recorded in the profile; returns how many locks.
pub fn install_from_profile(profile: &Profile) -> usize {
    let t = profile.optimal_thresholds();
    let n = t.len();
    install(t);
    n
}

/// The installed threshold of `name`, if any.
pub fn lookup(name: &str) -> Option<u32> {
    TABLE
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()?
        .get(name)
        .copied()
}

/// Optimal on-line for a known distribution: one word, the threshold.
#[derive(Debug)]
pub struct OptKnown {
    /// Threshold in spins, or [`UNSET`].
    threshold: AtomicU32,
}

impl OptKnown {
    /// A lock whose threshold is `spins`, whatever the table says.
    pub const fn with_threshold(spins: u32) -> Self {
        OptKnown {
            threshold: AtomicU32::new(if spins == UNSET { UNSET - 1 } else { spins }),
        }
    }
}

impl Default for OptKnown {
    fn default() -> Self {
        Self::INIT
    }
}

impl SpinPolicy for OptKnown {
    const NAME: &'static str = "opt-known";
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = OptKnown {
        threshold: AtomicU32::new(UNSET),
    };

    #[inline]
    fn threshold(&self, c: u32, lock: &LockName) -> u32 {
        // Relaxed: the word is a self-contained number.
        match self.threshold.load(Ordering::Relaxed) {
            UNSET => {
                let t = lookup(&lock.key()).unwrap_or(c).min(UNSET - 1);
                self.threshold.store(t, Ordering::Relaxed);
                t
            }
            t => t,
        }
    }
}
