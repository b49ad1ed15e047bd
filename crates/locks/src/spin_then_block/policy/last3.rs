//! `last-3` (KLMO91 §2.5, "last three samples"): the optimal threshold for
//! the distribution made of the lock's last three waiting times, each a
//! point mass of weight 1/3. Waits are rounded up to multiples of 16 spins
//! and capped at 1008 (KLMO91 §5).
//!
//! State: one 32-bit word, four bytes: the last three waits in 16-spin
//! units (`0..=63`; `64` = over 1008 spins; `0xFF` = no sample yet) and the
//! threshold in units (`0xFF` = none yet: use C). Updated by one CAS loop.
//! For point masses the optimal threshold is 0 or one of the samples, so
//! `Adjust` tries those four.

use std::sync::atomic::{AtomicU32, Ordering};

use super::{LockName, SpinPolicy, round_up_index};

const UNIT: u64 = 16;
const CAP: u64 = 1008;
/// Sample code of a wait over the cap.
const OVER: u8 = 64;
const EMPTY: u8 = 0xFF;

/// Last-three-samples policy.
#[derive(Debug)]
pub struct Last3 {
    /// `[t1, t2, t3, threshold]`, little-endian bytes (module docs).
    word: AtomicU32,
}

impl Default for Last3 {
    fn default() -> Self {
        Self::INIT
    }
}

/// The best threshold (in units) for the given samples, or `EMPTY`.
fn best_units(samples: [u8; 3], c: u64) -> u8 {
    let present = samples.iter().copied().filter(|&s| s != EMPTY);
    let mut best: Option<(u64, u8)> = None;
    for k in std::iter::once(0u8).chain(present.clone().filter(|&s| s != OVER)) {
        let ks = u64::from(k) * UNIT;
        let cost: u64 = present
            .clone()
            .map(|s| {
                if s != OVER && u64::from(s) <= u64::from(k) {
                    u64::from(s) * UNIT
                } else {
                    ks + c
                }
            })
            .sum();
        if best.is_none_or(|(bc, bk)| cost < bc || (cost == bc && k < bk)) {
            best = Some((cost, k));
        }
    }
    best.map_or(EMPTY, |(_, k)| k)
}

impl SpinPolicy for Last3 {
    const NAME: &'static str = "last-3";
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Last3 {
        word: AtomicU32::new(u32::MAX),
    };

    #[inline]
    fn threshold(&self, c: u32, _lock: &LockName) -> u32 {
        match self.word.load(Ordering::Relaxed).to_le_bytes()[3] {
            EMPTY => c,
            k => u32::from(k) * UNIT as u32,
        }
    }

    fn record(&self, waited: u64, c: u32) {
        let unit = round_up_index(waited, UNIT, CAP, usize::from(OVER)) as u8;
        // Relaxed: the word is self-contained; the CAS only keeps the
        // three samples and the threshold consistent with each other.
        let _ = self
            .word
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                let [t1, t2, _, _] = w.to_le_bytes();
                let samples = [unit, t1, t2];
                let k = best_units(samples, u64::from(c));
                Some(u32::from_le_bytes([unit, t1, t2, k]))
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_masses() {
        // Three short waits: spin up to the longest.
        assert_eq!(best_units([2, 3, 1], 100), 3);
        // Three long waits: block at once.
        assert_eq!(best_units([OVER, OVER, OVER], 100), 0);
        // Empty history.
        assert_eq!(best_units([EMPTY; 3], 100), 0);
    }
}
