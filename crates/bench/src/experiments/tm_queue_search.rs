//! `tm-queue-search` — ALL89 Fig. 5 and equation (3.1): E(r, q), the
//! expected number of ready queues a newly idle processor examines to find
//! one of r ready threads placed at random among q queues, for q = 18 (the
//! paper's processors), three ways:
//!
//! - `eq-3.1`: the closed form, term by term as printed
//!   ([`symmetry_models::expected_queues_examined`]);
//! - `monte-carlo`: simulated placement and scan
//!   ([`symmetry_models::expected_queues_examined_monte_carlo`]);
//! - `measured`: the `local-readyq` runtime's own dequeue code and counters.
//!
//! # The measurement
//!
//! A runtime with 18 ready queues and one processor (home queue 0) runs a
//! driver user thread. Per trial the driver reads the runtime's
//! `queues_examined` and `dequeues` counters, creates r null threads (the
//! runtime places each in a uniformly random queue; the processor cannot
//! dequeue any of them, because it is busy running the driver), and parks.
//! Parking is a switch that readies nothing, so the processor's very next
//! action is one scan from queue 0; the thread it finds is the first to run
//! and reads the counters again. The difference is the queues examined by
//! exactly that one dequeue (the trial is discarded unless `dequeues` moved
//! by exactly one). The other r - 1 threads just finish; the last one
//! unparks the driver, which starts the next trial.
//!
//! # Spread
//!
//! The Monte Carlo and the measurement each split their trials into
//! `BATCHES` equal batches (the Monte Carlo with a seed per batch): the
//! row's value is the mean over all trials and its spread (`lo`, `hi`,
//! `repeats`) the smallest and largest batch mean. The measured rows also
//! carry the standard error of the mean (`std_err`).

use symmetry_models::{expected_queues_examined, expected_queues_examined_monte_carlo};

use crate::harness::prelude::*;
use crate::kernels::threads::{Searched, queue_search};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "tm-queue-search",
    title: "Queues examined vs runnable threads: E(r,q) exact, Monte Carlo, measured",
    source: "ALL89 Fig. 5, eq. (3.1)",
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// ALL89 §III-G. The measurement needs 18 queues, not 18 processors (one
/// processor scans them), so every machine can judge every rule.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "fig5-shape",
        paper: "E(r, q), the expected number of queues a newly idle processor examines to find one of r \
                ready threads randomly distributed among q queues, is equation (3.1); Fig. 5 plots it for 18 \
                processors: \"when there is only a single ready but not yet running thread, the processor \
                will have to examine on average half of the queues\", falling toward one as the threads \
                grow (ALL89 §III-E, §III-G).",
        rule: "eq. (3.1) as implemented gives E(1, 18) = 9.5 and falls at every step to below 1.2 at r = 40",
        needs: Needs::NONE,
        judge: |d, _| fig5_shape(d),
    },
    Claim {
        key: "monte-carlo-agrees",
        paper: "(3.1) counts \"the lowest numbered nonempty queue\" over all q^r placements of r threads \
                (ALL89 §III-G).",
        rule: "a Monte Carlo simulation of random placement and scan is within 1% of eq. (3.1) at every r",
        needs: Needs::NONE,
        judge: |d, _| agrees(d.rows(), "monte-carlo", MC_TOL),
    },
    Claim {
        key: "runtime-agrees",
        paper: "The spike of per-processor ready queues in Fig. 4 is the search that (3.1) counts: \"the \
                curves in Figs. 4 and 5 correspond well\" (ALL89 §III-G).",
        rule: "the `local-readyq` runtime's first dequeue after r random placements among 18 queues examines \
               on average within 3% of eq. (3.1) queues at every r",
        needs: Needs::NONE,
        judge: |d, _| agrees(d.rows(), "measured", MEASURED_TOL),
    },
];

/// Queues, as ALL89's 18 processors.
const Q: u32 = 18;
/// Largest number of runnable threads.
const R_MAX: u32 = 40;
/// Tolerance of the Monte Carlo estimate against (3.1), relative.
const MC_TOL: f64 = 0.01;
/// Tolerance of the measurement against (3.1), relative.
const MEASURED_TOL: f64 = 0.03;
/// Batches the trials of a point are split into, for its spread.
const BATCHES: u64 = 5;
/// E(1, q) = (q + 1) / 2 for q = 18.
const E1: f64 = 9.5;
/// E(40, 18) is below this.
const E40_BELOW: f64 = 1.2;

const METRIC: &str = "queues_examined";

/// Measured E(r, 18) for each r in `rs`, `trials` trials each.
fn measure(rs: &[u32], trials: u64, tick: &dyn Fn()) -> Result<Vec<Searched>, String> {
    queue_search(rs, Q as usize, trials, BATCHES, tick)
        .map_err(|e| format!("{}: {e}", EXPERIMENT.id))
}

/// The Monte Carlo seed of batch `b` at `r`. The generator is SplitMix64,
/// whose state advances by the golden-ratio constant per draw: seeds that
/// differ by a multiple of it would replay one stream shifted, so the
/// batch number is spread by another odd constant instead.
fn mc_seed(r: u32, b: u64) -> u64 {
    (0x5EED ^ u64::from(r)) ^ (b + 1).wrapping_mul(0xD1B5_4A32_D192_ED03)
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let rs: Vec<u32> = (1..=R_MAX).collect();
    let mc_trials: u64 = if ctx.quick { 200_000 } else { 2_000_000 };
    let measured_trials: u64 = if ctx.quick { 20_000 } else { 200_000 };
    let bar = ctx.bar(EXPERIMENT.id, 2 * rs.len());
    let mut rows = Vec::new();
    let row = |series: &str, r: u32, v: f64, trials: u64| {
        Row::new(EXPERIMENT.id, series, r, false, METRIC, v, "queues")
            .param("queues", Q)
            .param("processors", 1)
            .param("trials", trials)
    };
    bar.set_message("eq-3.1, monte-carlo");
    let per_batch = (mc_trials / BATCHES).max(1);
    for &r in &rs {
        let exact = expected_queues_examined(r, Q).ok_or("E(r,q) needs q > 0")?;
        rows.push(row("eq-3.1", r, exact, 0));
        let batches = (0..BATCHES)
            .map(|b| {
                expected_queues_examined_monte_carlo(r, Q, per_batch, mc_seed(r, b))
                    .ok_or("Monte Carlo needs trials > 0")
            })
            .collect::<Result<Vec<f64>, _>>()?;
        let spread = Spread::of(&batches).ok_or("Monte Carlo gave no estimate")?;
        let mean = batches.iter().sum::<f64>() / batches.len() as f64;
        rows.push(row("monte-carlo", r, mean, per_batch * BATCHES).with_spread(&spread));
        bar.inc(1);
    }
    bar.set_message("measured (local-readyq runtime)");
    let measured = measure(&rs, measured_trials, &|| bar.inc(1))?;
    for (&r, m) in rs.iter().zip(&measured) {
        let row = row("measured", r, m.mean, m.trials).param("std_err", m.std_err);
        rows.push(match Spread::of(&m.batches) {
            Some(spread) => row.with_spread(&spread),
            None => row,
        });
    }
    bar.finish_and_clear();
    Ok(rows)
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let line = |name: &str, points: Vec<(u32, f64)>| Series {
        name: name.to_string(),
        points: (points.into_iter())
            .map(|(r, y)| Point::new(f64::from(r), y, false))
            .collect(),
    };
    let series = ["eq-3.1", "monte-carlo", "measured"].map(|s| {
        let points = rows.iter().filter(|r| r.metric == METRIC && r.series == s);
        line(s, points.map(|r| (r.threads, r.value)).collect())
    });
    let mut err = LinePanel::new(
        "relative error vs eq. (3.1)",
        "runnable threads r",
        "relative error (%)",
    );
    for s in ["monte-carlo", "measured"] {
        let points = errors(rows, s).into_iter().map(|(r, e)| (r, 100.0 * e));
        err.series.push(line(s, points.collect()));
    }
    figure(
        "tm-queue-search (ALL89 Fig. 5): queues examined vs runnable threads, q = 18",
        m,
        vec![
            Panel::Line(LinePanel {
                series: series.to_vec(),
                ..LinePanel::new(
                    "E(r, 18): expected queues examined per dequeue",
                    "runnable threads r",
                    "queues examined",
                )
            }),
            Panel::Line(err),
        ],
    )
}

/// (r, signed relative error against eq. 3.1) of `series`.
fn errors(rows: &[Row], series: &str) -> Vec<(u32, f64)> {
    let d = Data::new(rows);
    d.select(Sel::metric(METRIC).series(series))
        .filter_map(|r| {
            let exact = d.value(Sel::point(METRIC, "eq-3.1", r.threads))?;
            Some((r.threads, (r.value - exact) / exact))
        })
        .collect()
}

/// The rows of `series` (each series is judged against its own repeat
/// noise: the Monte Carlo's and the measurement's trial counts differ).
fn series_rows(rows: &[Row], series: &str) -> Vec<Row> {
    rows.iter()
        .filter(|r| r.metric == METRIC && r.series == series)
        .cloned()
        .collect()
}

/// "`series` within `tol` of (3.1) at every r", with the worst point.
fn agrees(rows: &[Row], series: &str, tol: f64) -> Finding {
    let own = series_rows(rows, series);
    let d = Data::new(&own);
    let all = Data::new(rows);
    let mut outcomes = Vec::new();
    let mut worst: Option<(u32, Estimate)> = None;
    for r in &own {
        let Some(exact) = all.value(Sel::point(METRIC, "eq-3.1", r.threads)) else {
            continue;
        };
        let est = d.estimate_of(r);
        outcomes.push(rule::within_factor(est, Estimate::exact(exact), 1.0 + tol));
        let rel = est.ratio(Estimate::exact(exact));
        if worst.is_none_or(|(_, w)| (rel.value - 1.0).abs() > (w.value - 1.0).abs()) {
            worst = Some((r.threads, rel));
        }
    }
    match worst {
        Some((r, rel)) => Finding::new(
            Outcome::all(outcomes),
            format!(
                "{} r values; worst at r = {r}: {} of eq. (3.1) (tolerance {:.0}%)",
                own.len(),
                rel.show(4),
                100.0 * tol
            ),
        ),
        None => Finding::missing(&format!("`{series}` and `eq-3.1`")),
    }
}

/// `fig5-shape`: eq. (3.1) gives E(1, 18) = [`E1`] and falls at every
/// step to below [`E40_BELOW`] at r = [`R_MAX`].
fn fig5_shape(d: &Data<'_>) -> Finding {
    let exact: Vec<(u32, Estimate)> = d
        .select(Sel::metric(METRIC).series("eq-3.1"))
        .map(|r| (r.threads, Estimate::exact(r.value)))
        .collect();
    let at = |r: u32| exact.iter().find(|(x, _)| *x == r).map(|(_, e)| *e);
    match (at(1), at(R_MAX)) {
        (Some(e1), Some(e40)) => Finding::new(
            Outcome::all([
                rule::within_factor(e1, Estimate::exact(E1), 1.0 + 1e-9),
                rule::decreasing(&exact.iter().map(|(_, e)| *e).collect::<Vec<_>>()),
                rule::at_most(e40, E40_BELOW),
            ]),
            format!(
                "E(1, 18) = {:.3}, E(18, 18) = {}, E({R_MAX}, 18) = {:.3}",
                e1.value,
                na(at(18), |e| format!("{:.3}", e.value)),
                e40.value
            ),
        ),
        _ => Finding::missing(&format!("`eq-3.1` at r = 1 and r = {R_MAX}")),
    }
}

fn assess(rows: &[Row], _m: &Machine) -> Assessment {
    Assessment {
        measured: measured(rows),
        notes: "The formula, an independent simulation and the runtime's scan all count the same thing: the \
                lowest-numbered non-empty queue, scanning from the processor's own. The measurement needs 18 \
                queues, not 18 processors (`Builder::queues(18)`, one processor), so it validates the \
                runtime's random placement and its counters on any machine. The time each examined queue \
                costs (Fig. 4's spike) is the subject of `tm-latency-vs-runnable`."
            .into(),
        table: Some(table(rows)),
    }
}

fn table(rows: &[Row]) -> Table {
    let d = Data::new(rows);
    let v = |s: &str, r: u32| d.value(Sel::point(METRIC, s, r));
    let std_err = |r: u32| {
        let x = d.row(Sel::point(METRIC, "measured", r))?;
        x.get_param("std_err")?.parse::<f64>().ok()
    };
    let mut table = Table::new(&[
        "r",
        "eq. (3.1)",
        "Monte Carlo",
        "measured",
        "measured ± s.e.",
        "measured error",
    ]);
    let f = |x: Option<f64>| na(x, |x| format!("{x:.3}"));
    for r in [1u32, 2, 3, 4, 6, 8, 12, 16, 18, 24, 32, 40] {
        if v("eq-3.1", r).is_none() {
            continue;
        }
        let err = match (v("measured", r), v("eq-3.1", r)) {
            (Some(m), Some(e)) => format!("{:+.2}%", 100.0 * (m - e) / e),
            _ => "n/a".into(),
        };
        table.push(&[
            r.to_string(),
            f(v("eq-3.1", r)),
            f(v("monte-carlo", r)),
            f(v("measured", r)),
            na(std_err(r), |s| format!("{s:.3}")),
            err,
        ]);
    }
    table
}

fn measured(rows: &[Row]) -> String {
    let d = Data::new(rows);
    let v = |s: &str, r: u32| d.value(Sel::point(METRIC, s, r));
    let trials = |s: &str| {
        let x = d.row(Sel::metric(METRIC).series(s));
        x.and_then(|x| x.get_param("trials"))
            .unwrap_or("?")
            .to_string()
    };
    let f = |x: Option<f64>| na(x, |x| format!("{x:.3}"));
    let worst = |s: &str| {
        let worst = (errors(rows, s).into_iter()).max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()));
        na(worst, |(r, e)| format!("{:.2}% (r = {r})", 100.0 * e.abs()))
    };
    // How many standard errors the measurement is off, at its worst point.
    let worst_z = d
        .select(Sel::metric(METRIC).series("measured"))
        .filter_map(|x| {
            let e = v("eq-3.1", x.threads)?;
            let se: f64 = x.get_param("std_err")?.parse().ok()?;
            (se > 0.0).then(|| ((x.value - e) / se).abs())
        })
        .fold(0.0f64, f64::max);
    format!(
        "Equation (3.1) gives E(1,18) = {} falling to E(18,18) = {} and E(40,18) = {}. Monte Carlo ({} trials \
         per r in {BATCHES} batches) differs by {} at worst. The `local-readyq` runtime's own dequeue path, \
         with 18 queues and one processor ({} trials per r, each reading the counters of exactly one \
         dequeue), differs by {} at worst; its worst point is {worst_z:.1} standard errors from the formula.",
        f(v("eq-3.1", 1)),
        f(v("eq-3.1", 18)),
        f(v("eq-3.1", 40)),
        trials("monte-carlo"),
        worst("monte-carlo"),
        trials("measured"),
        worst("measured"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::testing::{self, Rows, big_metal, small_vm, verdict};
    use crate::output::report::Verdict;

    /// Rows for r = 1..=40: `eq-3.1` from `formula`, the Monte Carlo and
    /// the measurement at `(1 + bias)` times it with relative spreads
    /// `mc_rel` and `me_rel`.
    fn rows(m: &Machine, formula: impl Fn(u32) -> f64, mc: (f64, f64), me: (f64, f64)) -> Vec<Row> {
        let mut out = Vec::new();
        for r in 1..=R_MAX {
            let e = formula(r);
            out.push(Row::new(
                EXPERIMENT.id,
                "eq-3.1",
                r,
                false,
                METRIC,
                e,
                "queues",
            ));
            for (s, (bias, rel)) in [("monte-carlo", mc), ("measured", me)] {
                let row = Rows::new(&EXPERIMENT, m)
                    .rel(rel)
                    .row(s, r, METRIC, e * (1.0 + bias));
                out.push(row.param("trials", "20000").param("std_err", "0.01"));
            }
        }
        out
    }

    fn eq(r: u32) -> f64 {
        expected_queues_examined(r, Q).unwrap_or(f64::NAN)
    }

    #[test]
    fn verdicts_reach_every_case() {
        for m in [small_vm(), big_metal()] {
            let holds = rows(&m, eq, (0.001, 0.001), (0.005, 0.005));
            assert_eq!(verdict(&EXPERIMENT, &holds, &m), Verdict::Holds);
            // A formula that does not fall, and neither estimate near it.
            let differs = rows(&m, |_| 5.0, (0.05, 0.001), (-0.1, 0.005));
            assert_eq!(verdict(&EXPERIMENT, &differs, &m), Verdict::Differs);
            // The Monte Carlo's offset is inside its own spread: a tie.
            let tie = rows(&m, eq, (0.01, 0.01), (0.005, 0.005));
            let f = testing::findings(&EXPERIMENT, &tie, &m);
            assert_eq!(f[1].outcome, Outcome::Tie);
            // A tie neither supports nor refutes: the other rules decide.
            assert_eq!(verdict(&EXPERIMENT, &tie, &m), Verdict::Holds);
            assert_eq!(verdict(&EXPERIMENT, &[], &m), Verdict::NotMeasurable);
        }
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, eq, (0.001, 0.001), (0.005, 0.005)));
    }

    /// The Monte Carlo's batches are independent: their means differ by
    /// about their standard error, not by a replayed stream's rounding.
    #[test]
    fn monte_carlo_batches_are_independent() {
        let means: Vec<f64> = (0..BATCHES)
            .map(|b| expected_queues_examined_monte_carlo(1, Q, 10_000, mc_seed(1, b)).unwrap())
            .collect();
        let s = Spread::of(&means).unwrap();
        // One trial's standard deviation at r = 1 is about 5.2 queues, so a
        // batch mean's is about 0.05; five of them span more than 0.01
        // except with negligible probability.
        assert!(s.hi - s.lo > 0.01, "{means:?}");
    }

    /// The runtime's first dequeue after uniform placement matches (3.1)
    /// (a thousand trials: far from the run's precision, but a broken
    /// placement or counter is off by much more than 15%).
    #[test]
    fn measurement_counts_one_dequeue() {
        let m = measure(&[1, 18], 1_000, &|| ()).unwrap();
        for (r, x) in [1u32, 18].iter().zip(&m) {
            assert_eq!(x.trials, 1_000, "r = {r}");
            assert_eq!(x.batches.len(), BATCHES as usize);
            let e = eq(*r);
            assert!((x.mean - e).abs() < 0.15 * e, "r = {r}: {} vs {e}", x.mean);
        }
    }
}
