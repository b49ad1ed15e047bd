//! # symmetry-models
//!
//! Analytic models from the symmetry papers. So far:
//!
//! * [`expected_queues_examined`]: ALL89 equation (3.1), E(r, q), the
//!   expected number of ready queues an idle processor examines to find one
//!   of `r` ready threads spread uniformly over `q` queues.
//! * [`expected_queues_examined_tail_sum`]: the same E(r, q) by the
//!   tail-sum identity, an independent check of equation (3.1).
//! * [`expected_queues_examined_monte_carlo`]: E(r, q) estimated by
//!   simulating the placement of threads and the idle processor's scan, a
//!   third check that needs no algebra at all.
//!
//! * [`competitive`]: KLMO91's competitive analysis: the cost of every
//!   spin-then-block policy on a recorded lock-waiting-time profile against
//!   the optimal off-line algorithm (Tables 1-2).
//!
//! * [`mva`]: ALL89 §V's exact mean value analysis of closed queueing
//!   networks, and its hierarchical model of a thread package (lock
//!   contention over bus contention, iterated to a fixed point).
//!
//! ## Stability
//!
//! Under semver from 0.1 (before 1.0, a breaking change bumps the minor
//! version): the E(r, q) functions, [`mva`]'s [`Network`], [`Solution`] and
//! [`Hierarchical`] model, and [`competitive`]'s costs ([`Strategy`],
//! [`sequence_cost`], [`analyze`]).
//!
//! Experimental, and free to change in any release: [`mva::systems`] (the
//! harness's parameterization of ALL89's two systems from measured costs),
//! the text tables of [`competitive`] (`table1_text`, `table2_text`,
//! `locks_text`, formatted for the harness's report), and [`rng`] (a
//! re-export of `symmetry_locks::platform::rng`).
//!
//! [`Network`]: mva::Network
//! [`Solution`]: mva::Solution
//! [`Hierarchical`]: mva::Hierarchical
//! [`Strategy`]: competitive::Strategy
//! [`sequence_cost`]: competitive::sequence_cost
//! [`analyze`]: competitive::analyze
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod competitive;
pub mod mva;
pub mod rng;

/// The crate README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

use rng::SplitMix64;

/// E(r, q) by ALL89 equation (3.1), term by term as printed:
/// `(q + Σ_{j=1..r} Σ_{i=1..q-1} i (q-i)^{j-1} (q-i+1)^{r-j}) / q^r`.
///
/// Returns `None` for `q == 0`. For `r == 0` no thread can be found; the
/// formula then gives `q` (the processor examines every queue and finds them
/// all empty), and so does the tail sum.
/// Computed in `f64` with each term scaled by `q^r` first, so it stays finite
/// for any `r` and `q` the experiments use.
///
/// ```
/// use symmetry_models::{expected_queues_examined, expected_queues_examined_tail_sum};
///
/// // One ready thread in one of 4 queues: on average 2.5 queues examined.
/// assert!((expected_queues_examined(1, 4).unwrap() - 2.5).abs() < 1e-12);
/// // More ready threads, fewer queues to examine; both formulas agree.
/// let e = expected_queues_examined(8, 16).unwrap();
/// assert!(e < 2.5);
/// assert!((e - expected_queues_examined_tail_sum(8, 16).unwrap()).abs() < 1e-9);
/// ```
pub fn expected_queues_examined(r: u32, q: u32) -> Option<f64> {
    if q == 0 {
        return None;
    }
    let qf = f64::from(q);
    let mut sum = qf / qf.powi(r as i32);
    for j in 1..=r {
        for i in 1..q {
            let i = f64::from(i);
            let term =
                i * ((qf - i) / qf).powi(j as i32 - 1) * ((qf - i + 1.0) / qf).powi((r - j) as i32)
                    / qf;
            sum += term;
        }
    }
    Some(sum)
}

/// E(r, q) by the tail-sum identity `Σ_{k=1..q} ((q-k+1)/q)^r`
/// (the minimum of r uniform queue numbers is at least k with probability
/// `((q-k+1)/q)^r`): an independent check of equation (3.1).
pub fn expected_queues_examined_tail_sum(r: u32, q: u32) -> Option<f64> {
    if q == 0 {
        return None;
    }
    let qf = f64::from(q);
    Some(
        (1..=q)
            .map(|k| ((qf - f64::from(k) + 1.0) / qf).powi(r as i32))
            .sum(),
    )
}

/// E(r, q) estimated by Monte Carlo: in each of `trials` trials, `r` threads
/// are placed independently and uniformly at random into queues `1..=q`, and
/// an idle processor scans from queue 1 up to and including the
/// lowest-numbered non-empty queue; the estimate is the mean number of queues
/// it examined (the minimum of the `r` queue numbers).
///
/// Returns `None` for `q == 0` or `trials == 0`. For `r == 0` it returns
/// `q`, the value of [`expected_queues_examined`] there: with no thread
/// anywhere the processor examines every queue and finds them all empty.
///
/// The generator is a self-contained SplitMix64 seeded with `seed`, so a
/// given `(r, q, trials, seed)` always gives the same estimate; queue numbers
/// are drawn without modulo bias by Lemire's multiply-and-reject method.
pub fn expected_queues_examined_monte_carlo(r: u32, q: u32, trials: u64, seed: u64) -> Option<f64> {
    if q == 0 || trials == 0 {
        return None;
    }
    if r == 0 {
        return Some(f64::from(q));
    }
    let mut rng = SplitMix64(seed);
    let mut total: u64 = 0;
    for _ in 0..trials {
        let mut lowest = q; // 0-based queue index of the lowest non-empty queue
        for _ in 0..r {
            lowest = lowest.min(rng.below(u64::from(q)) as u32);
            if lowest == 0 {
                // Queue 1 is non-empty: the scan stops there whatever the
                // remaining threads do, so their draws cannot change the
                // result.
                break;
            }
        }
        total += u64::from(lowest) + 1;
    }
    Some(total as f64 / trials as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equation_3_1_matches_tail_sum() {
        for q in 1..=24 {
            for r in 0..=40 {
                let a = expected_queues_examined(r, q).unwrap();
                let b = expected_queues_examined_tail_sum(r, q).unwrap();
                assert!((a - b).abs() < 1e-9 * b.max(1.0), "r={r} q={q}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn limits() {
        assert_eq!(expected_queues_examined(3, 0), None);
        // No thread: every queue is examined and found empty.
        assert!((expected_queues_examined(0, 18).unwrap() - 18.0).abs() < 1e-12);
        // One thread: uniform position, mean (q+1)/2.
        assert!((expected_queues_examined(1, 18).unwrap() - 9.5).abs() < 1e-12);
        // Many threads: almost surely in queue 1.
        assert!(expected_queues_examined(400, 18).unwrap() < 1.0 + 1e-6);
    }

    #[test]
    fn monte_carlo_edge_cases() {
        assert_eq!(expected_queues_examined_monte_carlo(3, 0, 10, 1), None);
        assert_eq!(expected_queues_examined_monte_carlo(3, 18, 0, 1), None);
        assert_eq!(
            expected_queues_examined_monte_carlo(0, 18, 10, 1),
            Some(18.0)
        );
        assert_eq!(expected_queues_examined_monte_carlo(7, 1, 10, 1), Some(1.0));
    }

    #[test]
    fn unbiased_bounded_sampling_covers_range_evenly() {
        let mut rng = SplitMix64(42);
        let mut counts = [0u32; 18];
        let draws = 180_000;
        for _ in 0..draws {
            counts[rng.below(18) as usize] += 1;
        }
        // Each bin expects 10_000 (sd ~ 97): 5 sd either way.
        for (i, &c) in counts.iter().enumerate() {
            assert!((9_500..=10_500).contains(&c), "bin {i}: {c}");
        }
    }

    #[test]
    fn monte_carlo_agrees_with_closed_form_for_q_18() {
        let q = 18;
        for r in 0..=40 {
            let exact = expected_queues_examined(r, q).unwrap();
            let mc =
                expected_queues_examined_monte_carlo(r, q, 200_000, 0x5EED ^ u64::from(r)).unwrap();
            let rel = (mc - exact).abs() / exact;
            assert!(
                rel < 0.01,
                "r={r}: monte carlo {mc} vs closed form {exact} ({rel:.4})"
            );
        }
    }

    #[test]
    fn fig_5_shape_for_q_18() {
        // ALL89 Fig. 5: E(1,18) = 9.5, strictly decreasing in r, tending to 1.
        let q = 18;
        let e = |r| expected_queues_examined(r, q).unwrap();
        assert!((e(1) - 9.5).abs() < 1e-12);
        for r in 1..=40 {
            assert!(
                e(r + 1) < e(r),
                "E({},18)={} !< E({r},18)={}",
                r + 1,
                e(r + 1),
                e(r)
            );
            assert!(e(r) >= 1.0);
        }
        assert!(e(40) < 1.2, "E(40,18) = {}", e(40));
        assert!(e(200) - 1.0 < 1e-4);
        // The Monte Carlo estimate shows the same shape.
        let mc = |r| expected_queues_examined_monte_carlo(r, q, 200_000, 7).unwrap();
        assert!((mc(1) - 9.5).abs() < 0.1);
        let mut prev = mc(1);
        for r in 2..=40 {
            let cur = mc(r);
            assert!(
                cur < prev,
                "monte carlo E({r},18)={cur} !< E({},18)={prev}",
                r - 1
            );
            prev = cur;
        }
        assert!(prev < 1.2);
    }
}
