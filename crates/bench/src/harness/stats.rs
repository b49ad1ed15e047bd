//! Statistics of repeated measurements: the one median of the harness and
//! the spread of a point's repeats, which the verdict rules use to tell a
//! difference from noise.

/// The median of `values` (the mean of the middle two for an even count);
/// `None` for an empty slice or one holding a NaN.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The repeats of one measured point: their median, smallest and largest
/// value and how many there were. Recorded with the point (row parameters
/// `lo`, `hi`, `repeats`) so a verdict can be judged against the run's own
/// noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Median of the repeats.
    pub median: f64,
    /// Smallest repeat.
    pub lo: f64,
    /// Largest repeat.
    pub hi: f64,
    /// Number of repeats.
    pub n: usize,
}

impl Spread {
    /// The spread of `values`; `None` if empty or any value is NaN.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let median = median(values)?;
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Spread {
            median,
            lo,
            hi,
            n: values.len(),
        })
    }

    /// One measurement: no spread known.
    pub fn single(v: f64) -> Spread {
        Spread {
            median: v,
            lo: v,
            hi: v,
            n: 1,
        }
    }

    /// The spread of `f` applied to every repeat (monotone maps such as a
    /// unit change; a decreasing map swaps the ends).
    pub fn map(self, f: impl Fn(f64) -> f64) -> Spread {
        let (a, b) = (f(self.lo), f(self.hi));
        Spread {
            median: f(self.median),
            lo: a.min(b),
            hi: a.max(b),
            n: self.n,
        }
    }

    /// `self / other` as an interval: the smallest and largest quotient of
    /// the two ranges (both assumed positive), the median of the quotient of
    /// medians, and the fewer of the two repeat counts.
    pub fn ratio(self, other: Spread) -> Spread {
        let q = |a: f64, b: f64| if b == 0.0 { f64::INFINITY } else { a / b };
        let ends = [
            q(self.lo, other.lo),
            q(self.lo, other.hi),
            q(self.hi, other.lo),
            q(self.hi, other.hi),
        ];
        Spread {
            median: q(self.median, other.median),
            lo: ends.iter().copied().fold(f64::INFINITY, f64::min),
            hi: ends.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            n: self.n.min(other.n),
        }
    }
}

/// Runs `f` `repeats` times (at least once) and returns the run whose
/// `key` is the median (the upper middle one for an even count) with the
/// spread of the keys over all runs.
pub fn median_run<T>(
    repeats: usize,
    mut f: impl FnMut() -> T,
    key: impl Fn(&T) -> f64,
) -> (T, Spread) {
    median_of((0..repeats.max(1)).map(|_| f()).collect(), key)
}

/// The run of `runs` whose `key` is the median (the upper middle one for
/// an even count), with the spread of the keys over all runs.
///
/// # Panics
/// If `runs` is empty.
pub fn median_of<T>(mut runs: Vec<T>, key: impl Fn(&T) -> f64) -> (T, Spread) {
    assert!(!runs.is_empty(), "median_of: no runs");
    runs.sort_by(|a, b| key(a).total_cmp(&key(b)));
    let keys: Vec<f64> = runs.iter().map(&key).collect();
    let mid = runs.len() / 2;
    let spread = Spread {
        median: keys[mid],
        lo: keys[0],
        hi: keys[keys.len() - 1],
        n: keys.len(),
    };
    (runs.swap_remove(mid), spread)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_empty_and_nan() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn spread_and_ratio() {
        let a = Spread::of(&[10.0, 12.0, 11.0]).unwrap();
        assert_eq!((a.median, a.lo, a.hi, a.n), (11.0, 10.0, 12.0, 3));
        let b = Spread::of(&[2.0, 4.0]).unwrap();
        let r = a.ratio(b);
        assert_eq!((r.lo, r.hi, r.n), (2.5, 6.0, 2));
        assert!(Spread::of(&[]).is_none());
    }

    #[test]
    fn median_run_returns_the_middle_run() {
        let mut it = [5.0, 1.0, 3.0].into_iter();
        let (run, s) = median_run(3, || it.next().unwrap(), |x| *x);
        assert_eq!(run, 3.0);
        assert_eq!((s.lo, s.hi), (1.0, 5.0));
    }
}
