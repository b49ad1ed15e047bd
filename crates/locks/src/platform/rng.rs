//! symmetry's one seeded generator: SplitMix64 (Steele, Lea, Flood,
//! "Fast splittable pseudorandom number generators", OOPSLA 2014), a tiny,
//! fast generator whose output passes BigCrush, with Lemire's unbiased
//! bounded integers. Seeded explicitly, so every Monte Carlo estimate,
//! workload input and replay is reproducible; one `u64` of state, so it fits
//! in a lock's waiter or a shared-memory record.

/// SplitMix64 state; seed it with any value (zero included).
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

/// The golden-ratio increment of SplitMix64 (also a good multiplicative
/// hash constant).
pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's finalizer: a bijective, well-mixing map of 64-bit words
/// (distinct inputs give distinct outputs).
#[inline]
pub const fn mix(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SplitMix64 {
    /// A generator started at `seed`.
    #[inline]
    pub const fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix(self.0)
    }

    /// Uniform in `0..n` (`n > 0`), unbiased: Lemire, "Fast Random Integer
    /// Generation in an Interval" (2019), multiply and reject.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        if (m as u64) < n {
            // 2^64 mod n: low words below it belong to an incomplete band.
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }

    /// Uniform in `lo..=hi` (`lo <= hi`).
    pub fn in_range(&mut self, lo: u64, hi: u64) -> u64 {
        match (hi - lo).checked_add(1) {
            Some(span) => lo + self.below(span),
            None => self.next_u64(), // the whole u64 range
        }
    }

    /// Uniform in `[0, 1)`, with 53 random bits.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_stream() {
        // First outputs of the reference splitmix64.c seeded with 0.
        let mut g = SplitMix64::new(0);
        assert_eq!(g.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(g.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn bounded_draws_stay_in_bounds_and_cover_them() {
        let mut g = SplitMix64::new(7);
        let mut seen = [false; 6];
        for _ in 0..1000 {
            let x = g.below(6);
            seen[x as usize] = true;
            let y = g.in_range(10, 12);
            assert!((10..=12).contains(&y));
            let u = g.unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert!(seen.iter().all(|&s| s));
        g.in_range(0, u64::MAX); // the whole range: no overflow
    }

    #[test]
    fn mix_is_a_bijection_on_a_sample() {
        let outs: std::collections::HashSet<u64> = (0..10_000).map(mix).collect();
        assert_eq!(outs.len(), 10_000);
    }
}
