//! Verdict rules: a claim of a paper becomes a rule over measured
//! quantities (an ordering, a ratio against a threshold, a trend), and each
//! quantity carries the interval its repeats spanned. A rule holds only when
//! the whole interval is on the claimed side, fails only when it is wholly
//! on the other side, and is a tie ("not distinguishable here") when the
//! interval straddles the line: a difference inside the run's own repeat
//! spread decides nothing.

use std::fmt;

use crate::stats::{quotient, quotient_range};

/// A measured quantity and the interval its repeats (widened by the
/// experiment's pooled noise, see [`super::rows::Data::estimate`]) span.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// The point value (a median).
    pub value: f64,
    /// Lower end of the interval.
    pub lo: f64,
    /// Upper end of the interval.
    pub hi: f64,
}

impl Estimate {
    /// A value known exactly (computed, not measured).
    pub fn exact(value: f64) -> Estimate {
        Estimate {
            value,
            lo: value,
            hi: value,
        }
    }

    /// A value with its interval; the ends are ordered and made to contain
    /// the value.
    pub fn new(value: f64, lo: f64, hi: f64) -> Estimate {
        let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        Estimate {
            value,
            lo: lo.min(value),
            hi: hi.max(value),
        }
    }

    /// The interval widened by a relative noise `rel` (a repeat range over
    /// its value). A positive value is widened by the factor `1 + rel`
    /// either way (`[v / (1 + rel), v * (1 + rel)]`): the timings and rates
    /// measured here vary by factors, and a positive quantity never gets a
    /// negative lower end, which would flip the sign of a ratio. Other
    /// values are widened by `rel * |v|` on each side.
    pub fn widen(self, rel: f64) -> Estimate {
        let rel = rel.abs();
        let (lo, hi) = if self.value > 0.0 {
            (self.value / (1.0 + rel), self.value * (1.0 + rel))
        } else {
            let d = (self.value * rel).abs();
            (self.value - d, self.value + d)
        };
        Estimate::new(self.value, self.lo.min(lo), self.hi.max(hi))
    }

    /// `self / other`: every quotient of the two intervals (`other` taken
    /// as positive).
    pub fn ratio(self, other: Estimate) -> Estimate {
        let (lo, hi) = quotient_range((self.lo, self.hi), (other.lo, other.hi));
        Estimate::new(quotient(self.value, other.value), lo, hi)
    }

    /// The mean of `es`: their values, lower and upper ends each averaged;
    /// `None` for an empty list.
    pub fn mean(es: &[Estimate]) -> Option<Estimate> {
        let n = es.len() as f64;
        let avg = |f: fn(&Estimate) -> f64| es.iter().map(f).sum::<f64>() / n;
        (!es.is_empty()).then(|| Estimate::new(avg(|e| e.value), avg(|e| e.lo), avg(|e| e.hi)))
    }

    /// `self - other` with the interval of every difference.
    pub fn minus(self, other: Estimate) -> Estimate {
        Estimate::new(
            self.value - other.value,
            self.lo - other.hi,
            self.hi - other.lo,
        )
    }

    /// The value and interval with `digits` decimals, e.g. `1.23 [1.10, 1.30]`.
    pub fn show(&self, digits: usize) -> String {
        if self.lo == self.hi {
            format!("{:.*}", digits, self.value)
        } else {
            format!(
                "{:.*} [{:.*}, {:.*}]",
                digits, self.value, digits, self.lo, digits, self.hi
            )
        }
    }

    /// The value and both ends of the interval, each written by `f`, e.g.
    /// `1.20 us [1.10 us, 1.30 us]` (always with the interval).
    pub fn show_with(&self, f: impl Fn(f64) -> String) -> String {
        format!("{} [{}, {}]", f(self.value), f(self.lo), f(self.hi))
    }
}

/// What a rule found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The data are on the claimed side beyond the repeat spread.
    Holds,
    /// The data are on the other side beyond the repeat spread.
    Fails,
    /// The difference is inside the repeat spread.
    Tie,
    /// The rule cannot be judged from this run; the reason is generated
    /// from the data or `machine.json` (a declared requirement the machine
    /// does not meet, a series that was not run).
    NotMeasurable(String),
}

impl Outcome {
    /// Words for the report.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Holds => "holds",
            Outcome::Fails => "does not hold",
            Outcome::Tie => "not distinguishable here",
            Outcome::NotMeasurable(_) => "not measurable here",
        }
    }

    /// `true` -> holds, `false` -> fails.
    pub fn from_bool(b: bool) -> Outcome {
        if b { Outcome::Holds } else { Outcome::Fails }
    }

    /// Every outcome must hold: fails if any fails, not measurable if any
    /// is (and none fails), a tie if any is a tie (and none fails or is not
    /// measurable), else holds. An empty list is not measurable.
    pub fn all(outcomes: impl IntoIterator<Item = Outcome>) -> Outcome {
        let mut seen = Vec::new();
        for o in outcomes {
            seen.push(o);
        }
        if seen.is_empty() {
            return Outcome::NotMeasurable("no points to judge".into());
        }
        if seen.contains(&Outcome::Fails) {
            return Outcome::Fails;
        }
        if let Some(o) = seen.iter().find(|o| matches!(o, Outcome::NotMeasurable(_))) {
            return o.clone();
        }
        if seen.contains(&Outcome::Tie) {
            return Outcome::Tie;
        }
        Outcome::Holds
    }
}

impl Outcome {
    /// [`Outcome::all`] over a slice (a `combine` of [`Finding::counted`]).
    pub fn every(outcomes: &[Outcome]) -> Outcome {
        Outcome::all(outcomes.iter().cloned())
    }

    /// Most outcomes must hold (the not-measurable ones left out): holds if
    /// more than half hold, fails if at most half would hold even were
    /// every tie to hold, else a tie. Nothing judged is not measurable.
    pub fn majority(outcomes: &[Outcome]) -> Outcome {
        let judged: Vec<&Outcome> = outcomes
            .iter()
            .filter(|o| !matches!(o, Outcome::NotMeasurable(_)))
            .collect();
        let n = judged.len();
        let holds = judged.iter().filter(|o| ***o == Outcome::Holds).count();
        let ties = judged.iter().filter(|o| ***o == Outcome::Tie).count();
        if n == 0 {
            Outcome::NotMeasurable("nothing to judge".into())
        } else if 2 * holds > n {
            Outcome::Holds
        } else if 2 * (holds + ties) <= n {
            Outcome::Fails
        } else {
            Outcome::Tie
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// A rule's outcome with the numbers that decided it.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The outcome.
    pub outcome: Outcome,
    /// The compared quantities, in words (markdown).
    pub evidence: String,
}

impl Finding {
    /// A finding from an outcome and its evidence.
    pub fn new(outcome: Outcome, evidence: impl Into<String>) -> Finding {
        Finding {
            outcome,
            evidence: evidence.into(),
        }
    }

    /// Not measurable, for `reason`.
    pub fn not_measurable(reason: impl Into<String>) -> Finding {
        let reason = reason.into();
        Finding {
            outcome: Outcome::NotMeasurable(reason.clone()),
            evidence: reason,
        }
    }

    /// Not measurable because `what` is missing from the data (e.g. a lock
    /// left out with `--locks`).
    pub fn missing(what: &str) -> Finding {
        Finding::not_measurable(format!("{what} not in this run's data"))
    }

    /// Parts that must all hold ([`Outcome::all`]), each an outcome with
    /// its evidence; the evidence is theirs, joined by `sep`.
    pub fn all(parts: impl IntoIterator<Item = (Outcome, String)>, sep: &str) -> Finding {
        let (outcomes, evidence): (Vec<Outcome>, Vec<String>) = parts.into_iter().unzip();
        Finding::new(Outcome::all(outcomes), evidence.join(sep))
    }

    /// Parts judged one by one (an input, a configuration) and combined by
    /// `combine` ([`Outcome::all`] over a slice, [`Outcome::majority`]),
    /// with how many held: `holds {on} 2 of 3: ...` (`on`: the word before
    /// the count); not measurable, `what` missing, without any part.
    pub fn counted(
        parts: Vec<(Outcome, String)>,
        combine: fn(&[Outcome]) -> Outcome,
        on: &str,
        what: &str,
    ) -> Finding {
        if parts.is_empty() {
            return Finding::missing(what);
        }
        let (outcomes, evidence): (Vec<Outcome>, Vec<String>) = parts.into_iter().unzip();
        let held = outcomes.iter().filter(|o| **o == Outcome::Holds).count();
        Finding::new(
            combine(&outcomes),
            format!(
                "holds {on} {held} of {}: {}",
                outcomes.len(),
                evidence.join("; ")
            ),
        )
    }

    /// The same outcome, its evidence rewritten by `f` (given a heading, a
    /// note).
    pub fn map_evidence(self, f: impl FnOnce(String) -> String) -> Finding {
        Finding::new(self.outcome, f(self.evidence))
    }
}

/// `a < b` beyond the spread: holds if `a.hi < b.lo`, fails if
/// `a.lo > b.hi`, else a tie.
pub fn less(a: Estimate, b: Estimate) -> Outcome {
    if a.hi < b.lo {
        Outcome::Holds
    } else if a.lo > b.hi {
        Outcome::Fails
    } else {
        Outcome::Tie
    }
}

/// `a > b` beyond the spread.
pub fn greater(a: Estimate, b: Estimate) -> Outcome {
    less(b, a)
}

/// `x >= t`: holds if the whole interval is at or above `t`, fails if it
/// is wholly below, else a tie.
pub fn at_least(x: Estimate, t: f64) -> Outcome {
    if x.lo >= t {
        Outcome::Holds
    } else if x.hi < t {
        Outcome::Fails
    } else {
        Outcome::Tie
    }
}

/// `x <= t`: holds if the whole interval is at or below `t`, fails if it
/// is wholly above, else a tie.
pub fn at_most(x: Estimate, t: f64) -> Outcome {
    if x.hi <= t {
        Outcome::Holds
    } else if x.lo > t {
        Outcome::Fails
    } else {
        Outcome::Tie
    }
}

/// `a` and `b` agree within a factor `f` (>= 1): holds if every ratio of
/// the intervals is within `[1/f, f]`, fails if none is, else a tie.
pub fn within_factor(a: Estimate, b: Estimate, f: f64) -> Outcome {
    let r = a.ratio(b);
    if r.lo >= 1.0 / f && r.hi <= f {
        Outcome::Holds
    } else if r.hi < 1.0 / f || r.lo > f {
        Outcome::Fails
    } else {
        Outcome::Tie
    }
}

/// The points rise from first to last: the last is above the first beyond
/// the spread and no step falls beyond it. Fails if the last is below the
/// first beyond the spread; otherwise a tie. Fewer than two points are not
/// measurable.
pub fn increasing(points: &[Estimate]) -> Outcome {
    trend(points, less)
}

/// The points fall from first to last (see [`increasing`]).
pub fn decreasing(points: &[Estimate]) -> Outcome {
    trend(points, greater)
}

fn trend(points: &[Estimate], up: fn(Estimate, Estimate) -> Outcome) -> Outcome {
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return Outcome::NotMeasurable("no points".into());
    };
    if points.len() < 2 {
        return Outcome::NotMeasurable("one point is no trend".into());
    }
    match up(*first, *last) {
        Outcome::Holds => {
            if points.windows(2).any(|w| up(w[0], w[1]) == Outcome::Fails) {
                Outcome::Tie
            } else {
                Outcome::Holds
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(v: f64, lo: f64, hi: f64) -> Estimate {
        Estimate::new(v, lo, hi)
    }

    #[test]
    fn ordering_uses_the_spread() {
        assert_eq!(less(e(1.0, 0.9, 1.1), e(2.0, 1.9, 2.1)), Outcome::Holds);
        assert_eq!(less(e(2.0, 1.9, 2.1), e(1.0, 0.9, 1.1)), Outcome::Fails);
        assert_eq!(less(e(1.0, 0.9, 1.5), e(1.2, 1.1, 1.3)), Outcome::Tie);
    }

    #[test]
    fn thresholds_and_factors() {
        assert_eq!(at_least(e(2.0, 1.6, 2.4), 1.5), Outcome::Holds);
        assert_eq!(at_least(e(1.4, 1.3, 1.45), 1.5), Outcome::Fails);
        assert_eq!(at_least(e(1.5, 1.4, 1.6), 1.5), Outcome::Tie);
        assert_eq!(at_most(e(1.0, 0.9, 1.1), 1.2), Outcome::Holds);
        assert_eq!(
            within_factor(e(1.0, 1.0, 1.0), e(1.1, 1.0, 1.2), 1.5),
            Outcome::Holds
        );
        assert_eq!(
            within_factor(e(1.0, 1.0, 1.0), e(3.0, 2.9, 3.1), 1.5),
            Outcome::Fails
        );
    }

    #[test]
    fn trends() {
        let up = [e(1.0, 0.9, 1.1), e(2.0, 1.9, 2.1), e(3.0, 2.9, 3.1)];
        assert_eq!(increasing(&up), Outcome::Holds);
        assert_eq!(decreasing(&up), Outcome::Fails);
        let flat = [e(1.0, 0.8, 1.2), e(1.1, 0.9, 1.3)];
        assert_eq!(increasing(&flat), Outcome::Tie);
        assert!(matches!(increasing(&up[..1]), Outcome::NotMeasurable(_)));
    }

    #[test]
    fn widening_keeps_positive_values_positive() {
        let w = Estimate::exact(10.0).widen(1.5);
        assert_eq!((w.lo, w.hi), (4.0, 25.0));
        let w = Estimate::exact(-2.0).widen(0.5);
        assert_eq!((w.lo, w.hi), (-3.0, -1.0));
        let r = Estimate::exact(1.0)
            .widen(3.0)
            .ratio(Estimate::exact(1.0).widen(3.0));
        assert!(r.lo > 0.0);
    }

    #[test]
    fn ratio_interval() {
        let r = e(4.0, 3.0, 5.0).ratio(e(2.0, 1.0, 2.5));
        assert_eq!((r.value, r.lo, r.hi), (2.0, 1.2, 5.0));
        let d = e(4.0, 3.0, 5.0).minus(e(2.0, 1.0, 2.5));
        assert_eq!((d.value, d.lo, d.hi), (2.0, 0.5, 4.0));
    }

    #[test]
    fn majority_counts_ties_as_undecided() {
        use Outcome::*;
        assert_eq!(Outcome::majority(&[Holds, Holds, Fails]), Holds);
        assert_eq!(Outcome::majority(&[Holds, Tie, Fails]), Tie);
        assert_eq!(Outcome::majority(&[Holds, Fails, Fails]), Fails);
        assert!(matches!(Outcome::majority(&[]), NotMeasurable(_)));
    }

    #[test]
    fn findings_from_parts() {
        use Outcome::*;
        let parts = || vec![(Holds, "a".to_string()), (Tie, "b".to_string())];
        let f = Finding::all(parts(), ", ");
        assert_eq!((f.outcome, f.evidence.as_str()), (Tie, "a, b"));
        let f = Finding::counted(parts(), Outcome::every, "in", "x");
        assert_eq!(f.evidence, "holds in 1 of 2: a; b");
        assert!(matches!(
            Finding::counted(vec![], Outcome::majority, "on", "x").outcome,
            NotMeasurable(_)
        ));
        let f = Finding::new(Holds, "b").map_evidence(|e| format!("a: {e}"));
        assert_eq!(f.evidence, "a: b");
        let e = Estimate::new(2.0, 1.0, 3.0);
        assert_eq!(e.show_with(|v| format!("{v}s")), "2s [1s, 3s]");
    }

    #[test]
    fn all_combines() {
        assert_eq!(
            Outcome::all([Outcome::Holds, Outcome::Holds]),
            Outcome::Holds
        );
        assert_eq!(Outcome::all([Outcome::Holds, Outcome::Tie]), Outcome::Tie);
        assert_eq!(Outcome::all([Outcome::Tie, Outcome::Fails]), Outcome::Fails);
        assert!(matches!(Outcome::all([]), Outcome::NotMeasurable(_)));
    }
}
