//! `opt-approx` (KLMO91 §2.5): the optimal on-line approximation. Each
//! lock keeps a running histogram of its waiting times, rounded up to
//! multiples of 64 spins and capped at 1008 (KLMO91 §5), and recomputes
//! the optimal threshold for it (KLMO91 §2.4 formula,
//! [`optimal_threshold`](super::optimal_threshold)) after every wait.
//!
//! State: 16 bucket counters (`(0,64]`, ..., `(896,960]`, `(960,1008]`),
//! an overflow counter (> 1008) and the current threshold. Counters are
//! halved when their total passes 2^16, so the estimate follows a
//! distribution that drifts. Until the first wait the threshold is C.

use std::sync::atomic::{AtomicU32, Ordering};

use super::{Bucket, LockName, SpinPolicy, optimal_threshold, round_up_index};

/// Rounding unit, spins.
const UNIT: u64 = 64;
/// Longest wait kept in a bucket, spins.
const CAP: u64 = 1008;
/// Buckets `(0,64]` ... `(960,1008]`.
const BUCKETS: usize = 16;
/// Index of the overflow counter.
const OVERFLOW: usize = BUCKETS;
/// Threshold word before the first wait: use C.
const UNSET: u32 = u32::MAX;
/// Total count that triggers halving.
const AGE_AT: u32 = 1 << 16;

/// Running-histogram approximation of the optimal on-line policy.
#[derive(Debug)]
pub struct OptApprox {
    counts: [AtomicU32; BUCKETS + 1],
    threshold: AtomicU32,
}

impl Default for OptApprox {
    fn default() -> Self {
        Self::INIT
    }
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU32 = AtomicU32::new(0);

impl SpinPolicy for OptApprox {
    const NAME: &'static str = "opt-approx";
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = OptApprox {
        counts: [ZERO; BUCKETS + 1],
        threshold: AtomicU32::new(UNSET),
    };

    #[inline]
    fn threshold(&self, c: u32, _lock: &LockName) -> u32 {
        match self.threshold.load(Ordering::Relaxed) {
            UNSET => c,
            t => t,
        }
    }

    fn record(&self, waited: u64, c: u32) {
        // Index: ceil(w/64) - 1, zero waits in the first bucket.
        let i = round_up_index(waited, UNIT, CAP, OVERFLOW + 1).saturating_sub(1);
        let n = self.counts[i].fetch_add(1, Ordering::Relaxed) + 1;
        let mut buckets = [Bucket::default(); BUCKETS + 1];
        let mut total = 0u64;
        for (j, b) in buckets.iter_mut().enumerate() {
            let count = u64::from(self.counts[j].load(Ordering::Relaxed));
            let upper = if j == OVERFLOW {
                u64::MAX
            } else {
                ((j as u64 + 1) * UNIT).min(CAP)
            };
            // KLMO91's formula charges a rounded wait its bucket's bound.
            *b = Bucket {
                upper,
                count,
                sum: count.saturating_mul(upper.min(CAP)),
            };
            total += count;
        }
        if let Some((k, _)) = optimal_threshold(&buckets, u64::from(c)) {
            self.threshold.store(k as u32, Ordering::Relaxed);
        }
        if n >= AGE_AT || total >= u64::from(AGE_AT) {
            for ctr in &self.counts {
                let v = ctr.load(Ordering::Relaxed);
                ctr.store(v / 2, Ordering::Relaxed);
            }
        }
    }
}
