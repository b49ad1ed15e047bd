//! Looking measured points up in an experiment's rows, as estimates with
//! their repeat spread.
//!
//! A point measured with repeats carries the parameters `lo`, `hi` and
//! `repeats` ([`crate::output::data::Row::spread`]). Points measured once
//! (oversubscribed points, expensive runs) have no spread of their own, so
//! [`Data::estimate`] widens every point of a metric to at least the
//! experiment's *pooled* noise: the median relative range `(hi - lo) /
//! value` of that metric's repeated points in the same run. The verdict
//! rules ([`super::rule`]) then treat differences inside those intervals as
//! ties.

use super::rule::Estimate;
use super::stats::{Spread, median};
use crate::output::data::Row;

/// An experiment's rows, with look-ups.
#[derive(Debug, Clone, Copy)]
pub struct Data<'a> {
    rows: &'a [Row],
}

/// A selection of rows: series, threads, metric and parameters that must
/// match (`None`: any).
#[derive(Debug, Clone, Copy, Default)]
pub struct Sel<'s> {
    /// Series name.
    pub series: Option<&'s str>,
    /// Thread count.
    pub threads: Option<u32>,
    /// Metric name.
    pub metric: Option<&'s str>,
    /// Parameters `(key, value)` that must match.
    pub params: &'s [(&'s str, &'s str)],
}

impl<'s> Sel<'s> {
    /// Rows of `metric`.
    pub fn metric(metric: &'s str) -> Sel<'s> {
        Sel {
            metric: Some(metric),
            ..Sel::default()
        }
    }

    /// One point: `metric` of `series` at `threads`.
    pub fn point(metric: &'s str, series: &'s str, threads: u32) -> Sel<'s> {
        Sel::metric(metric).series(series).threads(threads)
    }

    /// Narrowed to `series`.
    pub fn series(mut self, series: &'s str) -> Sel<'s> {
        self.series = Some(series);
        self
    }

    /// Narrowed to `threads`.
    pub fn threads(mut self, threads: u32) -> Sel<'s> {
        self.threads = Some(threads);
        self
    }

    /// Narrowed to rows with these parameter values.
    pub fn params(mut self, params: &'s [(&'s str, &'s str)]) -> Sel<'s> {
        self.params = params;
        self
    }

    /// Whether `r` is selected.
    pub fn matches(&self, r: &Row) -> bool {
        self.series.is_none_or(|s| r.series == s)
            && self.threads.is_none_or(|t| r.threads == t)
            && self.metric.is_none_or(|m| r.metric == m)
            && self.params.iter().all(|(k, v)| r.get_param(k) == Some(*v))
    }
}

/// The least relative noise an estimate is given, either side of its
/// value, however quiet the run: two measurements must differ by about
/// 4% before a rule orders them. Below that, code layout, clock frequency
/// and cache placement move a timing between builds and between runs, and
/// the repeats of one run do not see it (they share the build and the
/// placement), so a 2-3% gap decided a rule one way in one run and the
/// other way in the next. The smallest effect any claim here rests on is
/// LC98's 5% bulk-bandwidth spread, which stays decidable.
pub const NOISE_FLOOR: f64 = 0.02;

/// The fewest repeats at which [`Data::estimate_own`] trusts a row's own
/// interval: from 9 values on, [`super::stats::Spread::median_interval`]
/// drops the outermost ranks, so no single repeat sets an end.
pub const OWN_MIN: usize = 9;

impl<'a> Data<'a> {
    /// Look-ups over `rows`.
    pub fn new(rows: &'a [Row]) -> Data<'a> {
        Data { rows }
    }

    /// The rows.
    pub fn rows(&self) -> &'a [Row] {
        self.rows
    }

    /// The selected rows, in file order.
    pub fn select<'b>(&self, sel: Sel<'b>) -> impl Iterator<Item = &'a Row> + use<'a, 'b> {
        self.rows.iter().filter(move |r| sel.matches(r))
    }

    /// The first selected row.
    pub fn row(&self, sel: Sel<'_>) -> Option<&'a Row> {
        self.rows.iter().find(|r| sel.matches(r))
    }

    /// The value of the first selected row.
    pub fn value(&self, sel: Sel<'_>) -> Option<f64> {
        self.row(sel).map(|r| r.value)
    }

    /// The value of parameter `key` in the first selected row that has it.
    pub fn param(&self, sel: Sel<'_>, key: &str) -> Option<&'a str> {
        self.select(sel).find_map(|r| r.get_param(key))
    }

    /// The first selected row measured with a core for every thread, as
    /// [`Data::estimate_of`]: a point oversubscribed where it was measured
    /// says nothing of contention between threads that each have a core.
    pub fn at(&self, sel: Sel<'_>) -> Option<Estimate> {
        let r = self.select(sel).find(|r| !r.oversubscribed)?;
        Some(self.estimate_of(r))
    }

    /// [`Data::at`] with the row's own interval ([`Data::estimate_own_of`]).
    pub fn at_own(&self, sel: Sel<'_>) -> Option<Estimate> {
        let r = self.select(sel).find(|r| !r.oversubscribed)?;
        Some(self.estimate_own_of(r))
    }

    /// The first selected row as an estimate: its own `lo`/`hi` if it has
    /// them, widened to the pooled noise of the most specific set of
    /// repeated points of the same metric: its series' points that are
    /// oversubscribed as it is, else any series' such points, else its
    /// series', else the metric's.
    pub fn estimate(&self, sel: Sel<'_>) -> Option<Estimate> {
        let r = self.row(sel)?;
        Some(self.estimate_of(r))
    }

    /// `r` as an estimate (see [`Data::estimate`]): its median, multiplied
    /// and divided by one plus the pooled noise of its kind: the median
    /// relative repeat range of the metric's repeated points that are
    /// oversubscribed as `r` is (else of all the metric's points).
    ///
    /// Why pooled rather than each point's own range: three to five repeats
    /// give a range that swings from run to run (one descheduled repeat
    /// widens it a hundredfold, while the median it surrounds hardly
    /// moves), so rules judged on own ranges flipped between a decision
    /// and a tie across back-to-back runs. The median range over all of a
    /// metric's points is stable across runs. The point's own repeats are
    /// kept in the CSV and the plot's error bars, not in the interval.
    ///
    /// The noise is never taken below [`NOISE_FLOOR`].
    pub fn estimate_of(&self, r: &Row) -> Estimate {
        let pooled = self
            .pool(&r.metric, None, Some(r.oversubscribed))
            .unwrap_or_else(|| self.pooled_noise(&r.metric));
        Estimate::exact(r.value).widen(pooled.max(NOISE_FLOOR))
    }

    /// The first selected row as an estimate widened by the pooled noise
    /// of its own series (the median relative range of that series'
    /// repeated points of the metric, oversubscribed as it is), else as
    /// [`Data::estimate_of`]. For experiments whose series differ in kind,
    /// not just in value: a queue lock that collapses under preemption
    /// varies by tens of percent between runs, while a preemption-safe one
    /// beside it varies by one, and pooling the two would make every
    /// comparison of the quiet ones a tie. The series still pools over its
    /// points, so one point's outlying repeat does not decide.
    pub fn estimate_by_series(&self, sel: Sel<'_>) -> Option<Estimate> {
        let r = self.row(sel)?;
        Some(
            match self.pool(&r.metric, Some(&r.series), Some(r.oversubscribed)) {
                Some(noise) => Estimate::exact(r.value).widen(noise.max(NOISE_FLOOR)),
                None => self.estimate_of(r),
            },
        )
    }

    /// The first selected row as an estimate with its own interval (its
    /// `lo` and `hi`), widened to at least [`NOISE_FLOOR`]; as
    /// [`Data::estimate_of`] if it has none or fewer than [`OWN_MIN`]
    /// repeats. For a paired ratio over enough rounds that its spread is
    /// [`Spread::median_interval`]'s, a 95% interval for the median that
    /// one disturbed round moves by one rank only: it needs no pooling,
    /// and pooling would be wrong where the series is bimodal (a queue
    /// lock that convoys in some rounds and not in others) and its own
    /// interval is the honest statement of what a run can tell.
    ///
    /// [`Spread::median_interval`]: super::stats::Spread::median_interval
    pub fn estimate_own(&self, sel: Sel<'_>) -> Option<Estimate> {
        Some(self.estimate_own_of(self.row(sel)?))
    }

    /// [`Data::estimate_own`] of a row already found.
    pub fn estimate_own_of(&self, r: &Row) -> Estimate {
        match r.spread() {
            Some((lo, hi, n)) if n >= OWN_MIN => Estimate::new(r.value, lo, hi).widen(NOISE_FLOOR),
            _ => self.estimate_of(r),
        }
    }

    /// The first row of `sel` widened by the pooled noise of the repeated
    /// rows of `pool` (at least [`NOISE_FLOOR`]), else as
    /// [`Data::estimate_of`]: for a rule judged on points of one kind (one
    /// thread, nothing contended) whose noise the contended points of the
    /// same metric would swamp.
    pub fn estimate_pooled(&self, sel: Sel<'_>, pool: Sel<'_>) -> Option<Estimate> {
        let r = self.row(sel)?;
        let rel: Vec<f64> = self
            .select(pool)
            .filter(|p| p.value != 0.0 && p.value.is_finite())
            .filter_map(|p| {
                let (lo, hi, n) = p.spread()?;
                (n >= 2).then(|| ((hi - lo) / p.value).abs())
            })
            .collect();
        Some(match median(&rel) {
            Some(noise) => Estimate::exact(r.value).widen(noise.max(NOISE_FLOOR)),
            None => self.estimate_of(r),
        })
    }

    /// The pooled relative noise of `metric` in this run: the median over
    /// its points measured more than once of `(hi - lo) / |value|`; 0 when
    /// no point of the metric was repeated.
    pub fn pooled_noise(&self, metric: &str) -> f64 {
        self.pooled_noise_of(metric, None).unwrap_or(0.0)
    }

    /// The pooled relative noise of `metric` among the points of `series`
    /// (all series if `None`); `None` if none of them was repeated. A
    /// series is pooled on its own first, as noise differs between series
    /// (a lock that parks waiters varies more than one that spins).
    pub fn pooled_noise_of(&self, metric: &str, series: Option<&str>) -> Option<f64> {
        self.pool(metric, series, None)
    }

    /// The median relative range of the repeated points of `metric`,
    /// narrowed to `series` and to oversubscribed or not if given. An
    /// oversubscribed point is noisier (the scheduler decides who runs) and
    /// must neither widen nor be narrowed by points where each thread had
    /// its own core.
    fn pool(&self, metric: &str, series: Option<&str>, over: Option<bool>) -> Option<f64> {
        let rel: Vec<f64> = self
            .rows
            .iter()
            .filter(|r| r.metric == metric && r.value != 0.0 && r.value.is_finite())
            .filter(|r| series.is_none_or(|s| r.series == s))
            .filter(|r| over.is_none_or(|o| r.oversubscribed == o))
            .filter_map(|r| {
                let (lo, hi, n) = r.spread()?;
                (n >= 2).then(|| ((hi - lo) / r.value).abs())
            })
            .collect();
        median(&rel)
    }

    /// Distinct series of the selected rows, in first-seen order.
    pub fn series(&self, sel: Sel<'_>) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in self.select(sel) {
            if !out.contains(&r.series) {
                out.push(r.series.clone());
            }
        }
        out
    }

    /// Distinct thread counts of the selected rows, ascending, each with
    /// whether it was oversubscribed.
    pub fn threads(&self, sel: Sel<'_>) -> Vec<(u32, bool)> {
        let mut out: Vec<(u32, bool)> = Vec::new();
        for r in self.select(sel) {
            if !out.iter().any(|(t, _)| *t == r.threads) {
                out.push((r.threads, r.oversubscribed));
            }
        }
        out.sort_unstable();
        out
    }

    /// Distinct thread counts of the selected rows, ascending.
    pub fn counts(&self, sel: Sel<'_>) -> Vec<u32> {
        self.threads(sel).into_iter().map(|(t, _)| t).collect()
    }

    /// The least and the largest thread count of the selected rows that
    /// were oversubscribed where they were measured or are on a machine of
    /// `cores`; `None` if there is none.
    pub fn over_range(&self, sel: Sel<'_>, cores: usize) -> Option<(u32, u32)> {
        let over: Vec<u32> = (self.threads(sel).into_iter())
            .filter(|&(t, o)| o || t as usize > cores)
            .map(|(t, _)| t)
            .collect();
        Some((*over.first()?, *over.last()?))
    }

    /// The columns of a table of the selected rows on a machine of `cores`:
    /// the thread counts 1 and `cores` where measured, and the largest one
    /// measured, ascending, each with whether it was oversubscribed (where
    /// it was measured, or on this machine).
    pub fn columns(&self, sel: Sel<'_>, cores: u32) -> Vec<(u32, bool)> {
        let points = self.threads(sel);
        let mut cols: Vec<(u32, bool)> = (points.iter().copied())
            .filter(|&(t, _)| t == 1 || t == cores)
            .collect();
        if let Some(&last) = points.last()
            && !cols.contains(&last)
        {
            cols.push(last);
        }
        cols.into_iter().map(|(t, o)| (t, o || t > cores)).collect()
    }

    /// Distinct values of parameter `key` in the selected rows, sorted
    /// numerically where they parse as numbers (else as text).
    pub fn param_values(&self, sel: Sel<'_>, key: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in self.select(sel) {
            if let Some(v) = r.get_param(key)
                && !out.iter().any(|o| o == v)
            {
                out.push(v.to_string());
            }
        }
        out.sort_by(|a, b| match (a.parse::<f64>(), b.parse::<f64>()) {
            (Ok(x), Ok(y)) => x.total_cmp(&y),
            _ => a.cmp(b),
        });
        out
    }
}

/// The value of `metric` for `series` at `threads` (first match), among
/// rows that have parameter `param` if given.
pub fn value(
    rows: &[Row],
    series: &str,
    threads: u32,
    metric: &str,
    param: Option<(&str, &str)>,
) -> Option<f64> {
    rows.iter()
        .find(|r| {
            r.series == series
                && r.threads == threads
                && r.metric == metric
                && param.is_none_or(|(k, v)| r.get_param(k) == Some(v))
        })
        .map(|r| r.value)
}

/// The spread a row recorded with [`Row::with_spread`], or none (a single
/// measurement of its value).
pub fn spread_of(r: &Row) -> Spread {
    match r.spread() {
        Some((lo, hi, n)) => Spread {
            median: r.value,
            lo,
            hi,
            n,
        },
        None => Spread::single(r.value),
    }
}

/// Distinct series of the rows of `metric`, in first-seen order.
pub fn series_names(rows: &[Row], metric: &str) -> Vec<String> {
    Data::new(rows).series(Sel::metric(metric))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(series: &str, t: u32, v: f64, spread: Option<(f64, f64)>) -> Row {
        let r = Row::new("x", series, t, false, "m", v, "ns");
        match spread {
            Some((lo, hi)) => r.with_spread(&Spread {
                median: v,
                lo,
                hi,
                n: 3,
            }),
            None => r,
        }
    }

    #[test]
    fn pooled_noise_widens_single_points() {
        let rows = vec![
            row("a", 1, 100.0, Some((95.0, 105.0))),
            row("b", 1, 200.0, Some((170.0, 230.0))),
            row("a", 4, 50.0, None),
            row("c", 4, 10.0, None),
        ];
        let d = Data::new(&rows);
        // The median relative range of the repeated points: 10% and 30%.
        assert!((d.pooled_noise("m") - 0.2).abs() < 1e-12);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        // A point measured once is widened by the pooled noise ...
        let e = d.estimate(Sel::metric("m").series("c")).unwrap();
        assert!(close(e.lo, 10.0 / 1.2) && close(e.hi, 12.0), "{e:?}");
        // ... and so is a repeated one, by the pooled noise, not by its
        // own (wider) range: one outlying repeat must not decide a rule.
        let e = d.estimate(Sel::metric("m").series("b")).unwrap();
        assert!(close(e.lo, 200.0 / 1.2) && close(e.hi, 240.0), "{e:?}");
        assert!(d.estimate(Sel::metric("nope")).is_none());
        // By series: `a` pools its own 10% (its one repeated point); `c`,
        // never repeated, falls back to the metric's pooled noise.
        let e = d.estimate_by_series(Sel::metric("m").series("a")).unwrap();
        assert!(close(e.hi, 110.0), "{e:?}");
        let e = d.estimate_by_series(Sel::metric("m").series("c")).unwrap();
        assert!(close(e.hi, 12.0), "{e:?}");
        // Pooled over the points of one thread count only.
        let e = d
            .estimate_pooled(Sel::metric("m").series("c"), Sel::metric("m").series("b"))
            .unwrap();
        assert!(close(e.hi, 13.0), "{e:?}");
        assert_eq!(d.series(Sel::metric("m")), vec!["a", "b", "c"]);
        assert_eq!(d.threads(Sel::metric("m")), vec![(1, false), (4, false)]);
    }
}
