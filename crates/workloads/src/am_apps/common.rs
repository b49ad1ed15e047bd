//! Pieces shared by the Split-C style applications: a seeded generator,
//! position hashes (so every rank and every verifier derive the same input
//! without communicating), the timed region, and collectives built from
//! [`Endpoint::allreduce`].

use std::time::{Duration, Instant};

use symmetry_am::{AmError, Claim, Endpoint, ReduceOp};

pub(crate) use symmetry_locks::platform::rng::{SplitMix64, mix};

/// A value that depends on a seed and one position only.
#[inline]
pub(crate) fn hash2(seed: u64, a: u64) -> u64 {
    mix(seed ^ mix(a.wrapping_add(0xD1B5_4A32_D192_ED03)))
}

/// A uniform `f64` in `[-1, 1)` from 64 random bits.
#[inline]
pub(crate) fn unit_f64(bits: u64) -> f64 {
    ((bits >> 11) as f64) * (2.0 / (1u64 << 53) as f64) - 1.0
}

/// A configuration error of an application (bad size for this job, a
/// malformed message): says what was wrong and what is accepted.
pub(crate) fn bad(detail: impl Into<String>) -> AmError {
    AmError::Config {
        detail: detail.into(),
    }
}

/// The timed region of a run: from a barrier after setup to a barrier
/// after the last phase. Its message count is the endpoint's
/// [`symmetry_am::Stats::sent`] over the region: the application's
/// requests and replies and those of the all-reduces and of the closing
/// barrier.
#[derive(Debug)]
pub(crate) struct Timed {
    start: Instant,
    sent0: u64,
}

impl Timed {
    /// Barrier, then start the clock.
    pub(crate) fn start<C: Claim, S>(ep: &mut Endpoint<C, S>) -> Result<Self, AmError> {
        ep.barrier()?;
        Ok(Timed {
            start: Instant::now(),
            sent0: ep.stats().sent,
        })
    }

    /// Barrier, then stop the clock: (elapsed, messages sent meanwhile).
    pub(crate) fn stop<C: Claim, S>(
        self,
        ep: &mut Endpoint<C, S>,
    ) -> Result<(Duration, u64), AmError> {
        ep.barrier()?;
        Ok((self.start.elapsed(), ep.stats().sent - self.sent0))
    }
}

/// Every rank's `value`, in rank order, on every rank (one all-reduce per
/// rank; for verification only).
pub(crate) fn allgather<C: Claim, S>(
    ep: &mut Endpoint<C, S>,
    value: u64,
) -> Result<Vec<u64>, AmError> {
    let (rank, size) = (ep.rank(), ep.size());
    (0..size)
        .map(|r| ep.allreduce(if r == rank { value } else { 0 }, ReduceOp::Sum))
        .collect()
}

/// The sum of every rank's `value`, added in rank order (so every rank
/// gets the same bits).
pub(crate) fn sum_f64<C: Claim, S>(ep: &mut Endpoint<C, S>, value: f64) -> Result<f64, AmError> {
    Ok(allgather(ep, value.to_bits())?
        .into_iter()
        .map(f64::from_bits)
        .sum())
}

/// Whether `ok` holds on every rank.
pub(crate) fn all_ok<C: Claim, S>(ep: &mut Endpoint<C, S>, ok: bool) -> Result<bool, AmError> {
    Ok(ep.allreduce(u64::from(!ok), ReduceOp::Or)? == 0)
}

/// `(key, value)` parameter pairs from string slices.
pub(crate) fn params(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_f64_range() {
        let mut g = SplitMix64::new(7);
        for _ in 0..10_000 {
            let v = unit_f64(g.next_u64());
            assert!((-1.0..1.0).contains(&v));
        }
        assert_eq!(unit_f64(0), -1.0);
        assert!(unit_f64(u64::MAX) < 1.0);
    }
}
