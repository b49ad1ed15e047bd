//! Statistics of repeated measurements: the one median of the harness and
//! the spread of a point's repeats, which the verdict rules use to tell a
//! difference from noise.

/// `a / b`, infinite where `b` is 0.
pub fn quotient(a: f64, b: f64) -> f64 {
    if b == 0.0 { f64::INFINITY } else { a / b }
}

/// The smallest and the largest quotient of a value in `a` (its lower and
/// upper end) by one in `b`: the range of `a / b` where both are positive.
pub fn quotient_range(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    let ends = [
        quotient(a.0, b.0),
        quotient(a.0, b.1),
        quotient(a.1, b.0),
        quotient(a.1, b.1),
    ];
    let lo = ends.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ends.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

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
        let (lo, hi) = quotient_range((self.lo, self.hi), (other.lo, other.hi));
        Spread {
            median: quotient(self.median, other.median),
            lo,
            hi,
            n: self.n.min(other.n),
        }
    }
}

impl Spread {
    /// The spread of the paired quotients `a[i] / b[i]`: each repeat of a
    /// series over the repeat of its reference taken beside it (same
    /// round, same placement of the CPUs). A drift of the machine's speed
    /// between rounds moves both sides of a pair and cancels, where the
    /// quotient of two separately taken medians carries both ranges. The
    /// interval is [`Spread::median_interval`]'s (the full range up to 8
    /// pairs). `None` if the lengths differ, nothing is paired, a value is
    /// NaN or a reference is not positive.
    pub fn paired_ratio(a: &[f64], b: &[f64]) -> Option<Spread> {
        if a.len() != b.len() || b.iter().any(|&x| x.is_nan() || x <= 0.0) {
            return None;
        }
        let q: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
        Spread::median_interval(&q)
    }
}

impl Spread {
    /// The median of `values` with a distribution-free interval for it
    /// instead of the full range: the `k`-th smallest and `k`-th largest
    /// value, for the largest `k` at which the interval still holds the
    /// population's median with probability at least 95% (the number of
    /// values below the median is Binomial(n, 1/2)). With 9 repeats that is
    /// the 2nd to the 8th value, with 15 the 4th to the 12th. Up to 8
    /// values no narrower interval reaches 95%, and the full range is kept
    /// (which holds the median with probability 1 - 2^(1-n): 75% for 3,
    /// 94% for 5). One disturbed repeat, which the full range would carry
    /// into every rule, then moves the interval by one rank only. `None`
    /// if empty or any value is NaN.
    pub fn median_interval(values: &[f64]) -> Option<Spread> {
        let median = median(values)?;
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        // The interval from the k-th smallest to the k-th largest misses
        // the median with probability 2 P(Binomial(n, 1/2) <= k - 1).
        // `below` is P(B <= j), `term` is P(B = j) = C(n, j) / 2^n.
        // The terms are carried as logarithms: 2^-n underflows for large n.
        let mut k = 1;
        let mut ln_term = -(n as f64) * std::f64::consts::LN_2;
        let mut below = ln_term.exp();
        for j in 1..n {
            ln_term += ((n - j + 1) as f64 / j as f64).ln();
            below += ln_term.exp();
            if 2.0 * below > 0.05 || j + 1 > n - j {
                break;
            }
            k = j + 1;
        }
        Some(Spread {
            median,
            lo: v[k - 1],
            hi: v[n - k],
            n,
        })
    }
}

/// Runs every one of `series` series once per round, `rounds` rounds in
/// all (at least one): `f(round, series)` in the order round 0 of series
/// 0, 1, ..., then round 1, and so on. Returns each series' runs in round
/// order, so that `runs[a][k]` and `runs[b][k]` were taken side by side and
/// can be paired ([`Spread::paired_ratio`]): a change of the machine's
/// speed or of the placement of its CPUs between rounds then moves both
/// sides of a pair, where measuring all of one series and then all of the
/// next would put it between the two. The first error stops the loop
/// (see [`in_rounds`] for runs that cannot fail).
pub fn try_in_rounds<T, E>(
    rounds: usize,
    series: usize,
    mut f: impl FnMut(usize, usize) -> Result<T, E>,
) -> Result<Vec<Vec<T>>, E> {
    let rounds = rounds.max(1);
    let mut runs: Vec<Vec<T>> = (0..series).map(|_| Vec::with_capacity(rounds)).collect();
    for k in 0..rounds {
        for (i, r) in runs.iter_mut().enumerate() {
            r.push(f(k, i)?);
        }
    }
    Ok(runs)
}

/// [`try_in_rounds`] for runs that cannot fail.
pub fn in_rounds<T>(
    rounds: usize,
    series: usize,
    mut f: impl FnMut(usize, usize) -> T,
) -> Vec<Vec<T>> {
    let Ok(runs) = try_in_rounds(rounds, series, |k, i| {
        Ok::<T, std::convert::Infallible>(f(k, i))
    });
    runs
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
    fn median_interval_drops_outlying_ranks() {
        let ranks = |n: usize| {
            let v: Vec<f64> = (1..=n).map(|i| i as f64).collect();
            let s = Spread::median_interval(&v).unwrap();
            (s.lo as usize, s.hi as usize)
        };
        // Up to 8 values: the full range (no narrower interval reaches 95%).
        assert_eq!(ranks(1), (1, 1));
        assert_eq!(ranks(5), (1, 5));
        assert_eq!(ranks(8), (1, 8));
        assert_eq!(ranks(9), (2, 8));
        assert_eq!(ranks(15), (4, 12));
        // Large n: 2^-n underflows, the interval must not collapse.
        let (lo, hi) = ranks(2000);
        assert!(lo > 900 && lo < 960 && hi == 2001 - lo, "{lo} {hi}");
        // One disturbed repeat does not reach the interval.
        let s =
            Spread::median_interval(&[1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0, 1.02, 26.0]).unwrap();
        assert!(s.hi <= 1.1 && s.lo >= 0.95, "{s:?}");
        assert!(Spread::median_interval(&[]).is_none());
    }

    #[test]
    fn paired_ratio_cancels_a_shared_drift() {
        // Both series slow down by 2x in the second round: the paired
        // quotient stays 1.5, the quotient of ranges would span 0.75-3.
        let a = [3.0, 6.0, 3.3];
        let b = [2.0, 4.0, 2.2];
        let p = Spread::paired_ratio(&a, &b).unwrap();
        assert!((p.lo - 1.5).abs() < 1e-12 && (p.hi - 1.5).abs() < 1e-12);
        assert_eq!(p.n, 3);
        assert!(Spread::paired_ratio(&a, &b[..2]).is_none());
        assert!(Spread::paired_ratio(&[1.0], &[0.0]).is_none());
        assert!(Spread::paired_ratio(&[], &[]).is_none());
    }

    #[test]
    fn in_rounds_interleaves_the_series() {
        let mut order = Vec::new();
        let runs = in_rounds(2, 3, |k, i| {
            order.push((k, i));
            10 * k + i
        });
        assert_eq!(order, [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]);
        assert_eq!(runs, vec![vec![0, 10], vec![1, 11], vec![2, 12]]);
        // At least one round; the first error stops the loop.
        assert_eq!(in_rounds(0, 1, |_, _| 1), vec![vec![1]]);
        let mut calls = 0;
        let e = try_in_rounds(3, 2, |k, _| {
            calls += 1;
            if k == 1 { Err("stop") } else { Ok(()) }
        });
        assert_eq!((e, calls), (Err("stop"), 3));
    }

    #[test]
    fn median_run_returns_the_middle_run() {
        let mut it = [5.0, 1.0, 3.0].into_iter();
        let (run, s) = median_run(3, || it.next().unwrap(), |x| *x);
        assert_eq!(run, 3.0);
        assert_eq!((s.lo, s.hi), (1.0, 5.0));
    }
}
