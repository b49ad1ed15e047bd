//! Spin policies (KLMO91 §2): how many polls a contended acquisition makes
//! before it blocks.
//!
//! | registry name | type | KLMO91 | state per lock |
//! |---|---|---|---|
//! | `always-block` | [`AlwaysBlock`] | §2.2 always block | none |
//! | `always-spin` | [`AlwaysSpin`] | §2.2 always spin (busywait) | none |
//! | `fixed-spin-c` | [`FixedSpinC`] | §2.4 fixed spin, threshold C | none |
//! | `fixed-spin-c2` | [`FixedSpinHalfC`] | §2.4 fixed spin, threshold C/2 | none |
//! | `opt-known` | [`OptKnown`] | §2.4 optimal on-line for a known distribution | one word (the precomputed threshold) |
//! | `opt-approx` | [`OptApprox`] | §2.5 optimal on-line approximation (64-spin rounding, cap 1008) | 18 words (histogram + threshold) |
//! | `last-3` | [`Last3`] | §2.5 last three samples (16-spin rounding, cap 1008) | one word |
//! | `random-walk` | [`RandomWalk`] | §2.5 random walk (+/-16 spins, at most C) | one word |
//! | (profiling) | [`Fixed<N>`](Fixed) | §3: spin N (KLMO91 recorded with 1008), then block | none |
//!
//! A policy is a type parameter of the lock and is stored in it, so the
//! adaptive policies keep per-lock history. It is called only on the
//! contended path: [`SpinPolicy::threshold`] when an acquisition finds the
//! lock held, [`SpinPolicy::record`] once it has the lock, with the
//! waiting time in spins (KLMO91's `spinsWaited`: polls made plus, if it
//! blocked, the time from blocking until the lock's release, converted to
//! spins). History lives in relaxed atomics: concurrent waiters may race
//! and lose an update, which perturbs an estimate and never the lock.
//!
//! The same objects drive the offline analyzer (`symmetry-models`), which
//! replays a recorded waiting-time sequence through them: the analysis
//! prices the code that runs, not a re-implementation of it.

mod always_block;
mod always_spin;
mod fixed_spin;
mod last3;
mod opt_approx;
pub mod opt_known;
mod random_walk;

pub use always_block::AlwaysBlock;
pub use always_spin::AlwaysSpin;
pub use fixed_spin::{Fixed, FixedSpinC, FixedSpinHalfC};
pub use last3::Last3;
pub use opt_approx::OptApprox;
pub use opt_known::OptKnown;
pub use random_walk::RandomWalk;

use super::LockName;

/// How long a contended acquisition spins before blocking (module docs).
pub trait SpinPolicy: Send + Sync + 'static {
    /// Registry name (`fixed-spin-c`, `random-walk`, ...).
    const NAME: &'static str;
    /// The state of a fresh lock (the lock's `INIT` needs a constant).
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self;

    /// Polls allowed before blocking, given C (the blocker's block+wake
    /// cost in spins) and the lock's name. `0` blocks at once.
    fn threshold(&self, c: u32, lock: &LockName) -> u32;

    /// Feedback after a contended acquisition: the waiting time in spins.
    #[inline(always)]
    fn record(&self, waited: u64, c: u32) {
        let _ = (waited, c);
    }
}

/// One bucket of a waiting-time distribution: waits of at most `upper`
/// spins (and more than the previous bucket's `upper`); `upper ==
/// u64::MAX` is an overflow bucket whose waits are longer than any
/// threshold considered. `sum` is the total of its waits in spins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bucket {
    /// Largest wait of the bucket, spins (`u64::MAX`: overflow).
    pub upper: u64,
    /// Number of waits.
    pub count: u64,
    /// Sum of the waits, spins.
    pub sum: u64,
}

/// The cheapest fixed spin threshold for a distribution, by KLMO91's
/// formula for the optimal on-line algorithm (§2.4): the `k` minimizing
///
/// ```text
///   sum over waits w <= k of w  +  (k + C) * (number of waits w > k)
/// ```
///
/// over `k = 0` and the buckets' upper bounds (a threshold inside a
/// bucket is never better than one at its edge, for the bucket's waits
/// are all paid in full or all cut off). `buckets` are in increasing
/// `upper`. Returns `(k, expected cost per wait)`, or `None` if the
/// distribution is empty. Ties go to the smaller threshold.
pub fn optimal_threshold(buckets: &[Bucket], c: u64) -> Option<(u64, f64)> {
    // f64 throughout: counts from a parsed file may be arbitrarily large.
    let total: f64 = buckets.iter().map(|b| b.count as f64).sum();
    if total == 0.0 {
        return None;
    }
    // k = 0: every wait blocks at once.
    let mut best = (0u64, c as f64 * total);
    let mut spun = 0f64; // sum of waits <= k
    let mut left = total; // waits > k
    for b in buckets {
        if b.upper == u64::MAX {
            break;
        }
        spun += b.sum as f64;
        left -= b.count as f64;
        let cost = spun + (b.upper as f64 + c as f64) * left;
        if cost < best.1 {
            best = (b.upper, cost);
        }
    }
    Some((best.0, best.1 / total))
}

/// Rounds a wait up to a multiple of `unit` spins, capped: the bucket index
/// `ceil(w / unit)` (0 for a zero wait) or `overflow` if `w > cap`.
#[inline]
pub(crate) fn round_up_index(w: u64, unit: u64, cap: u64, overflow: usize) -> usize {
    if w > cap {
        overflow
    } else {
        w.div_ceil(unit) as usize
    }
}

/// Calls `$callback! { "name" => Type; ... }` with every KLMO91 policy, in
/// the order of KLMO91 Table 1 (the profiling policy `Fixed<N>` is not
/// listed). Tests and the harness expand from it.
///
/// ```
/// macro_rules! names {
///     ($($name:literal => $ty:ty;)*) => { &[$($name),*] };
/// }
/// let all: &[&str] = symmetry_locks::for_each_spin_policy!(names);
/// assert_eq!(all.len(), 8);
/// ```
#[macro_export]
macro_rules! for_each_spin_policy {
    ($callback:ident) => {
        $callback! {
            "always-block" => $crate::spin_then_block::policy::AlwaysBlock;
            "always-spin" => $crate::spin_then_block::policy::AlwaysSpin;
            "fixed-spin-c2" => $crate::spin_then_block::policy::FixedSpinHalfC;
            "fixed-spin-c" => $crate::spin_then_block::policy::FixedSpinC;
            "opt-known" => $crate::spin_then_block::policy::OptKnown;
            "opt-approx" => $crate::spin_then_block::policy::OptApprox;
            "last-3" => $crate::spin_then_block::policy::Last3;
            "random-walk" => $crate::spin_then_block::policy::RandomWalk;
        }
    };
}
