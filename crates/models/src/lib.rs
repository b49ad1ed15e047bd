//! # symmetry-models
//!
//! Analytic models from the symmetry papers. So far:
//!
//! * [`expected_queues_examined`]: ALL89 equation (3.1), E(r, q), the
//!   expected number of ready queues an idle processor examines to find one
//!   of `r` ready threads spread uniformly over `q` queues.
//!
//! The MVA model (ALL89 §V) and the competitive analysis of KLMO91 land
//! here with their issues.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

/// E(r, q) by ALL89 equation (3.1), term by term as printed:
/// `(q + Σ_{j=1..r} Σ_{i=1..q-1} i (q-i)^{j-1} (q-i+1)^{r-j}) / q^r`.
///
/// Returns `None` for `q == 0`. For `r == 0` no thread can be found; the
/// formula then gives `1` (the processor looks at its own queue once).
/// Computed in `f64` with each term scaled by `q^r` first, so it stays finite
/// for any `r` and `q` the experiments use.
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
        // One thread: uniform position, mean (q+1)/2.
        assert!((expected_queues_examined(1, 18).unwrap() - 9.5).abs() < 1e-12);
        // Many threads: almost surely in queue 1.
        assert!(expected_queues_examined(400, 18).unwrap() < 1.0 + 1e-6);
    }
}
