//! The models' one random-number generator: SplitMix64 (Steele, Lea,
//! Flood 2014), a tiny, fast generator whose output passes BigCrush, with
//! Lemire's unbiased bounded integers. Self-contained and seeded, so every
//! Monte Carlo estimate and every replay is reproducible.

/// SplitMix64 state; seed it with any value.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`), unbiased: Lemire, "Fast Random Integer
    /// Generation in an Interval" (2019), multiply and reject.
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
}
