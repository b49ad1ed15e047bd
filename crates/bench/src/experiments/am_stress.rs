//! `am-stress` — LC98 Table 2: the many-to-one communication stress test.
//! One rank receives; `writers` ranks send it `ints` integers in total
//! (1,000,000 as in LC98; fewer in `--quick`), one per short request
//! ([`crate::kernels::messages::stress_within`]), for every claim algorithm and
//! writers = 1..=max(2 x cores - 1, 3) plus 4 x cores - 1 (or
//! `--threads` minus the receiver), up to the job's rank limit. Ranks are
//! threads of this process, each mapping the endpoint segments itself (the
//! memory traffic of LC98's processes); `threads` = writers + 1, and a
//! point is oversubscribed when that exceeds the cores.
//!
//! Metrics: `elapsed_ms` (from the start barrier to the last integer
//! delivered), `ns_per_msg` (elapsed / integers delivered: LC98's measure)
//! and `block_ns_per_msg` (the receiver's time per integer in the median
//! block of about 1,000: the rate while every rank runs, which a whole run
//! mixes with any time a rank spends descheduled by other load), with
//! parameters `writers`, `ints`, `delivered`, `completed`, `full_waits`,
//! `verified` (the receiver's count and sum matched the writers'),
//! `budget_ms`, and the spread of the runs of each metric (`lo`, `hi`,
//! `repeats`: [`Ctx::repeats`] back-to-back runs, or for one writer the
//! runs of the pairing rounds below); the value and the other parameters
//! are those of the median run by `ns_per_msg` (the upper middle one for an
//! even count).
//! Spin and queue locks can convoy when their holder or next waiter is
//! descheduled, which under oversubscription can stretch a run by orders of
//! magnitude: each run has a time budget after which the writers are asked
//! to stop, and the row reports what was delivered in that time
//! (`completed` = false), never an extrapolation.
//!
//! For LC98's first claim (one writer = the LogP gap) the run also measures
//! each algorithm's gap g with [`crate::kernels::messages::logp`] (metric
//! `logp_g_ns`, threads = 2; its parameter `rounds` is the LogP round
//! trips of each measurement). The gap and the one-writer runs are taken
//! in pairing rounds ([`OWN_MIN`] in `--quick`, 15 in full; their count is
//! the rows' `repeats`), each round measuring every algorithm's gap and
//! then its one-writer run back to back; metric `one_writer_vs_g`
//! (threads = 2) is the median of the rounds' ratios of the one-writer
//! median block to the gap, with their median interval, over the rounds
//! whose run was long enough to have a block rate (none such: no row).
//! Without a one-writer point (`--threads` leaving out 2), three rounds
//! measure the gap alone.

use std::fmt::Display;

use crate::harness::prelude::*;
use crate::kernels::messages::{self as am_kernels, StressRun};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "am-stress",
    title: "Many-to-one stress test: writers send 1,000,000 integers to one receiver",
    source: "LC98 Table 2",
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// Writers LC98's contention claims start at (its Table 2: 3 and 7 writers,
/// one process per processor); the contention rules need a receiver and
/// this many writers, each on its own core.
const CONTENDED: u32 = 3;

/// LC98 §4.2-4.3 on Table 2.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "one-writer-is-gap",
        paper: "\"The test with a single writer is equivalent to the LogP gap measurement\" (LC98 §4.2, \
                Table 2: 2.96 to 3.54 s per 1,000,000 integers against g = 2.9 to 3.5 us).",
        rule: "for every algorithm, the time per integer with one writer (median block) agrees with the LogP \
               gap g measured just before it within 1.3x (their ratio's median over rounds, with its interval)",
        needs: Needs::cores(2),
        judge: |d, _| gap_ratios(d).map_or_else(|f| f, |q| one_writer_is_gap(&q)),
    },
    Claim {
        key: "locks-degrade",
        paper: "\"With three and seven writers, the processes contend for access, and performance degrades for \
                the locking algorithms\" (LC98 §4.2, Table 2, one process per processor: e.g. Posix mutex \
                3.54 / 10.0 / 14.1 s at 1 / 3 / 7 writers).",
        rule: "at the most writers (3 or more) that leave every rank a core, each of LC98's locking algorithms \
               takes longer per integer (median block) than with one writer",
        needs: Needs::cores(CONTENDED as usize + 1),
        judge: locks_degrade,
    },
    Claim {
        key: "lock-free-improves",
        paper: "\"Surprisingly, the performance of the lock-free algorithm improves with more writers\" (LC98 \
                §4.2, Table 2: 3.19 / 3.08 / 3.03 s at 1 / 3 / 7 writers).",
        rule: "at the most writers (3 or more) that leave every rank a core, `lock-free` takes less time per \
               integer (median block) than with one writer",
        needs: Needs::cores(CONTENDED as usize + 1),
        judge: lock_free_improves,
    },
    Claim {
        key: "lock-free-robust",
        paper: "\"Only the lock-free algorithm is both fast and robust to multiprogramming\" (LC98 §4.3).",
        rule: "at the most writers measured, with more ranks than cores, `lock-free`'s whole-run time per \
               integer is below every locking algorithm's",
        needs: Needs::NONE,
        judge: |d, _| robust_point(d).map_or_else(|f| f, |p| lock_free_robust(&p)),
    },
];

/// LC98's locking algorithms.
const LOCKING: [&str; 5] = ["tas", "ttas", "ticket", "anderson", "pthread"];
const LOCK_FREE: &str = "lock-free";
/// One writer's time per message within this factor of g.
const GAP_MATCH: f64 = 1.3;
/// Metric: one writer's median block over the gap g of the same round.
const VS_GAP: &str = "one_writer_vs_g";

/// LC98 Table 2 (seconds for 1,000,000 integers): 1, 3 and 7 writers.
const LC98: [(&str, [f64; 3]); 6] = [
    ("tas", [2.98, 3.03, 4.37]),
    ("ttas", [3.01, 3.46, 3.83]),
    ("ticket", [2.96, 3.18, 3.50]),
    ("anderson", [3.05, 3.22, 3.75]),
    ("pthread", [3.54, 10.00, 14.10]),
    ("lock-free", [3.19, 3.08, 3.03]),
];

/// Writer counts: `--threads` minus the receiver, else 1..=max(2 cores - 1,
/// 3) and 4 cores - 1 (LC98: 1, 3, 7 writers on 8 processors), below the
/// job's rank limit.
fn writer_counts(ctx: &Ctx) -> Vec<u32> {
    let mut w: Vec<u32> = match &ctx.threads {
        Some(t) => t
            .iter()
            .filter(|&&t| t >= 2)
            .map(|&t| (t - 1) as u32)
            .collect(),
        None => {
            let c = ctx.cores as u32;
            let mut w: Vec<u32> = (1..=(2 * c).saturating_sub(1).max(3)).collect();
            w.push(4 * c - 1);
            w
        }
    };
    w.retain(|&x| x >= 1 && (x as usize) < symmetry_am::MAX_RANKS);
    w.sort_unstable();
    w.dedup();
    w
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let names = symmetry_am::claim::NAMES;
    let writers = writer_counts(ctx);
    if writers.is_empty() {
        return Err(format!(
            "am-stress needs at least 2 threads (a receiver and a writer); --threads gave {:?}",
            ctx.threads.as_deref().unwrap_or_default()
        ));
    }
    let ints: u64 = if ctx.quick { 100_000 } else { 1_000_000 };
    let budget = ctx.budget(1_000, 8_000);
    let g_rounds: u64 = if ctx.quick { 20_000 } else { 100_000 };
    // LC98's first claim compares two one-writer streams, the LogP gap and
    // the stress test's single writer. On a VM both rates move with the
    // placement of the two vCPUs (by 2x between runs, with tight repeats
    // inside each), so a gap measured before the stress runs could pair
    // one placement with another. Each round therefore measures every
    // algorithm's gap and, back to back, its one-writer stress run; the
    // rule judges their ratio round by round (`one_writer_vs_g`). Nine
    // rounds at least, so the ratios' median interval leaves out the
    // outermost round on each side.
    let one = writers.contains(&1);
    let rounds = ctx.own_rounds(match (one, ctx.quick) {
        (false, _) => 3,
        (true, true) => OWN_MIN,
        (true, false) => 15,
    });
    let bar = ctx.bar(EXPERIMENT.id, names.len() * (rounds + writers.len()));
    let paired: Vec<Vec<(f64, Option<StressRun>)>> = try_in_rounds(rounds, names.len(), |_, i| {
        let alg = names[i];
        bar.set_message(if one {
            format!("{alg} gap and 1 writer")
        } else {
            format!("{alg} gap")
        });
        let g = am_kernels::logp(alg, g_rounds)?.g_ns;
        let s = if one {
            Some(am_kernels::stress_within(alg, 1, ints, Some(budget))?)
        } else {
            None
        };
        bar.inc(1);
        Ok::<_, String>((g, s))
    })?;
    let mut rows = Vec::new();
    for (alg, pairs) in names.iter().zip(paired) {
        let gs: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        let g = Spread::of(&gs).ok_or_else(|| format!("am-stress {alg}: no valid gap"))?;
        let over = ctx.over(2);
        let g_row = Row::new(EXPERIMENT.id, alg, 2, over, "logp_g_ns", g.median, "ns");
        rows.push(
            g_row
                .param("writers", 1)
                .param("rounds", g_rounds)
                .with_spread(&g),
        );
        let ones: Vec<StressRun> = pairs.iter().filter_map(|p| p.1).collect();
        if one {
            // The rounds whose run was long enough to have a block rate.
            let (blocks, round_gs): (Vec<f64>, Vec<f64>) = ones
                .iter()
                .zip(&gs)
                .map(|(r, g)| (r.block_ns_per_msg, *g))
                .filter(|(b, _)| b.is_finite() && *b > 0.0)
                .unzip();
            if let Some(q) = Spread::paired_ratio(&blocks, &round_gs) {
                rows.push(
                    Row::new(EXPERIMENT.id, alg, 2, ctx.over(2), VS_GAP, q.median, "x")
                        .param("writers", 1)
                        .param("ints", ints)
                        .with_spread(&q),
                );
            }
        }
        for &w in &writers {
            let runs = if w == 1 {
                ones.clone()
            } else {
                bar.set_message(format!("{alg} x{w} writers"));
                let repeats = ctx.repeats(w as usize + 1);
                (0..repeats)
                    .map(|_| am_kernels::stress_within(alg, w, ints, Some(budget)))
                    .collect::<Result<_, _>>()?
            };
            rows.extend(stress_rows(ctx, alg, w, ints, budget, runs)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// A metric of a stress run: its name, how to read it, its unit.
type Metric = (&'static str, fn(&StressRun) -> f64, &'static str);

/// The rows of `alg`'s `runs` with `w` writers: the median run by
/// `ns_per_msg` (the upper middle one for an even count), with the spread
/// of every run of each metric.
fn stress_rows(
    ctx: &Ctx,
    alg: &str,
    w: u32,
    ints: u64,
    budget: std::time::Duration,
    mut runs: Vec<StressRun>,
) -> Result<Vec<Row>, String> {
    runs.sort_by(|a, b| a.out.ns_per_msg.total_cmp(&b.out.ns_per_msg));
    // The spread of one metric over the runs (finite values only: a run
    // shorter than a block has no block rate).
    let spread = |f: fn(&StressRun) -> f64| {
        let v: Vec<f64> = runs.iter().map(f).filter(|v| v.is_finite()).collect();
        Spread::of(&v)
    };
    let r = *runs
        .get(runs.len() / 2)
        .ok_or_else(|| format!("am-stress {alg} x{w}: no run"))?;
    let threads = w as usize + 1;
    let over = ctx.over(threads);
    let point = |metric: &str, v: f64, unit: &str, s: Option<Spread>| {
        let row = Row::new(EXPERIMENT.id, alg, threads as u32, over, metric, v, unit)
            .param("writers", w)
            .param("ints", ints)
            .param("delivered", r.delivered)
            .param("completed", r.completed)
            .param("full_waits", r.out.full_waits)
            .param("verified", runs.iter().all(|r| r.out.verified))
            .param("budget_ms", budget.as_millis())
            .param("repeats", runs.len());
        match s {
            Some(s) => row.with_spread(&s),
            None => row,
        }
    };
    let metrics: [Metric; 3] = [
        ("elapsed_ms", |r| r.out.elapsed.as_secs_f64() * 1e3, "ms"),
        ("ns_per_msg", |r| r.out.ns_per_msg, "ns"),
        ("block_ns_per_msg", |r| r.block_ns_per_msg, "ns"),
    ];
    Ok(metrics
        .into_iter()
        .map(|(metric, f, unit)| point(metric, f(&r), unit, spread(f)))
        .collect())
}

/// Writer counts present in the rows, ascending.
fn measured_writers(rows: &[Row]) -> Vec<u32> {
    let mut v: Vec<u32> = rows
        .iter()
        .filter(|r| r.metric == "ns_per_msg")
        .filter_map(|r| r.get_param("writers")?.parse().ok())
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The `metric` row of `alg` with `w` writers.
fn point_of<'a>(rows: &'a [Row], metric: &str, alg: &str, w: u32) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.series == alg && r.metric == metric && r.get_param("writers") == Some(&w.to_string())
    })
}

/// The `ns_per_msg` row of `alg` with `w` writers.
fn point<'a>(rows: &'a [Row], alg: &str, w: u32) -> Option<&'a Row> {
    point_of(rows, "ns_per_msg", alg, w)
}

/// Whole-run time per integer.
fn per_msg(rows: &[Row], alg: &str, w: u32) -> Option<f64> {
    point(rows, alg, w).map(|r| r.value)
}

/// Median-block time per integer (finite values only).
fn block(rows: &[Row], alg: &str, w: u32) -> Option<f64> {
    point_of(rows, "block_ns_per_msg", alg, w)
        .map(|r| r.value)
        .filter(|v| v.is_finite())
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let algs = series_names(rows, "ns_per_msg");
    let line = |title: &str, y_label: &str, metric: &str, f: &dyn Fn(&Row) -> Option<f64>| {
        let series = algs
            .iter()
            .map(|a| Series {
                name: a.clone(),
                points: rows
                    .iter()
                    .filter(|r| r.series == *a && r.metric == metric)
                    .filter_map(|r| {
                        let w: f64 = r.get_param("writers")?.parse().ok()?;
                        Some(Point::new(w, f(r)?, r.oversubscribed))
                    })
                    .collect(),
            })
            .collect();
        Panel::Line(LinePanel {
            title: title.to_string(),
            x_label: "writers (threads = writers + 1)".into(),
            y_label: y_label.to_string(),
            x_scale: Scale::Linear,
            y_scale: Scale::Log,
            series,
            x_marker: Some((
                m.cores().saturating_sub(1) as f64,
                format!("cores = {}", m.cores()),
            )),
        })
    };
    let p1 = line(
        "whole run: elapsed / integers (partial runs: those delivered)",
        "ns per integer (log)",
        "ns_per_msg",
        &|r| Some(r.value),
    );
    let p2 = line(
        "median block of ~1,000 integers",
        "ns per integer (log)",
        "block_ns_per_msg",
        &|r| Some(r.value).filter(|v| v.is_finite()),
    );
    let p3 = line(
        "whole run relative to 1 writer",
        "ns per integer / same at 1 writer (log)",
        "ns_per_msg",
        &|r| Some(r.value / per_msg(rows, &r.series, 1)?),
    );
    let mut bars = Vec::new();
    for a in &algs {
        let Some(g) = value(rows, a, 2, "logp_g_ns", None) else {
            continue;
        };
        if let Some(b) = block(rows, a, 1) {
            // The rule's ratio (paired by round) where the run has it.
            let q = value(rows, a, 2, VS_GAP, None).unwrap_or(b / g);
            bars.push(Bar::new(a, q, "median block / g"));
        }
        if let Some(w) = per_msg(rows, a, 1) {
            bars.push(Bar::new(a, w / g, "whole run / g"));
        }
    }
    let p4 = Panel::Bar(BarPanel {
        title: "1 writer: time per integer / LogP gap g".into(),
        y_label: "ratio".into(),
        y_scale: Scale::Linear,
        bars,
        reference_lines: vec![("equal".into(), 1.0)],
    });
    figure(
        "am-stress (LC98 Table 2): many-to-one, one receiver",
        m,
        vec![p1, p2, p3, p4],
    )
}

/// The estimate of `metric` of `alg` with `w` writers (finite values
/// only).
fn est(d: &Data<'_>, metric: &str, alg: &str, w: u32) -> Option<Estimate> {
    let r = point_of(d.rows(), metric, alg, w)?;
    r.value.is_finite().then(|| d.estimate_of(r))
}

/// The LogP gap g of `alg`.
fn gap(d: &Data<'_>, alg: &str) -> Option<Estimate> {
    d.estimate(Sel::metric("logp_g_ns").series(alg).threads(2))
}

/// `` `name` x `` pairs, comma-separated.
fn list<A: Display, X: Display>(xs: impl IntoIterator<Item = (A, X)>) -> String {
    fmt::join(xs.into_iter().map(|(a, x)| format!("`{a}` {x}")), ", ")
}

/// One writer's median block over the LogP gap per algorithm (both rates
/// while every rank runs): paired by round (`true`) where the run has it,
/// else (a CSV written before the rounds existed) the ratio of the
/// medians, else none (no run long enough for a block rate). What the
/// rule finds instead where the one-writer points were oversubscribed or
/// no algorithm has a ratio.
type GapRatios = Vec<(String, Option<(Estimate, bool)>)>;

/// [`GapRatios`] of the run, or what `one-writer-is-gap` finds instead.
fn gap_ratios(d: &Data<'_>) -> Result<GapRatios, Finding> {
    let rows = d.rows();
    let q = |a: &str| match d.estimate_own(Sel::metric(VS_GAP).series(a)) {
        Some(q) => Some((q, true)),
        None => Some((est(d, "block_ns_per_msg", a, 1)?.ratio(gap(d, a)?), false)),
    };
    let pairs: GapRatios = series_names(rows, "ns_per_msg")
        .into_iter()
        .map(|a| {
            let q = q(&a);
            (a, q)
        })
        .collect();
    if point(rows, LOCK_FREE, 1).is_some_and(|r| r.oversubscribed) {
        Err(Finding::not_measurable(
            "the one-writer points ran with more threads than cores",
        ))
    } else if pairs.iter().all(|(_, q)| q.is_none()) {
        Err(Finding::missing(
            "a one-writer block rate with its LogP gap",
        ))
    } else {
        Ok(pairs)
    }
}

/// `one-writer-is-gap`: for every algorithm, one writer's median block
/// agrees with the LogP gap within 1.3x; an algorithm without a ratio
/// keeps the rule from holding.
fn one_writer_is_gap(pairs: &GapRatios) -> Finding {
    let all_paired = pairs.iter().all(|(_, q)| q.is_some_and(|(_, p)| p));
    let outcomes = pairs.iter().map(|(a, q)| match q {
        Some((q, _)) => rule::within_factor(*q, Estimate::exact(1.0), GAP_MATCH),
        None => Outcome::NotMeasurable(format!("`{a}` has no one-writer block rate")),
    });
    let shown = pairs.iter().map(|(a, q)| {
        let x = match q {
            Some((q, true)) => q.show(2),
            Some((q, false)) => format!("{} (medians)", q.show(2)),
            None => "no block rate".into(),
        };
        (a, x)
    });
    let paired = if all_paired {
        ", paired by round"
    } else {
        ", paired by round where not marked"
    };
    Finding::new(
        Outcome::all(outcomes),
        format!("one writer's median block / g{paired}: {}", list(shown)),
    )
}

/// The note the one-writer rule calls for where it is judged: the whole
/// run against g.
fn whole_run_note(d: &Data<'_>) -> Option<String> {
    gap_ratios(d).ok()?;
    let rows = d.rows();
    let algs = series_names(rows, "ns_per_msg");
    let whole = algs
        .iter()
        .filter_map(|a| Some((a, ratio(per_msg(rows, a, 1)? / gap(d, a)?.value))));
    Some(format!(
        "Over the whole one-writer run (elapsed / integers, LC98's measure) the time per integer over g is {} \
         (ratios of medians): a whole run also counts the time either rank spent descheduled by other load.",
        list(whole)
    ))
}

/// Contention with one rank per core: the most writers (3 or more) that
/// leave every rank a core of `m`.
fn fit(d: &Data<'_>, m: &Machine) -> Option<u32> {
    let rows = d.rows();
    let cores = m.cores() as u32;
    measured_writers(rows)
        .iter()
        .copied()
        .filter(|&w| w >= CONTENDED && w < cores)
        .filter(|&w| point(rows, LOCK_FREE, w).is_none_or(|r| !r.oversubscribed))
        .max()
}

/// The median blocks of `a` with `w` writers and with one.
fn versus_one(d: &Data<'_>, a: &str, w: u32) -> Option<(Estimate, Estimate)> {
    Some((
        est(d, "block_ns_per_msg", a, w)?,
        est(d, "block_ns_per_msg", a, 1)?,
    ))
}

/// The [`fit`] of the run, or why the contention rules cannot be judged.
fn fit_or_why(d: &Data<'_>, m: &Machine) -> Result<u32, Finding> {
    fit(d, m).ok_or_else(|| {
        Finding::not_measurable(format!(
            "no point with {CONTENDED} or more writers where every rank has a core (writers measured: {})",
            fmt::counts(&measured_writers(d.rows()))
        ))
    })
}

/// `locks-degrade`: at the [`fit`], each of LC98's locking algorithms
/// takes longer per integer (median block) than with one writer.
fn locks_degrade(d: &Data<'_>, m: &Machine) -> Finding {
    let w = match fit_or_why(d, m) {
        Ok(w) => w,
        Err(f) => return f,
    };
    let locks: Vec<(&str, (Estimate, Estimate))> = LOCKING
        .iter()
        .filter_map(|a| Some((*a, versus_one(d, a, w)?)))
        .collect();
    if locks.len() < LOCKING.len() {
        return Finding::missing(&format!("the locking algorithms at 1 and {w} writers"));
    }
    let shown = locks.iter().map(|(a, (at_w, at_1))| {
        let x = format!("{} ({} with 1)", at_w.ratio(*at_1).show(2), ns(at_1.value));
        (a, x)
    });
    Finding::new(
        Outcome::all(locks.iter().map(|(_, (x, one))| rule::greater(*x, *one))),
        format!(
            "at {w} writers, time per integer over one writer's (median blocks): {} (LC98 at 7 writers: \
             1.15x to 3.98x)",
            list(shown)
        ),
    )
}

/// `lock-free-improves`: at the [`fit`], `lock-free` takes less time per
/// integer (median block) than with one writer.
fn lock_free_improves(d: &Data<'_>, m: &Machine) -> Finding {
    let w = match fit_or_why(d, m) {
        Ok(w) => w,
        Err(f) => return f,
    };
    let Some((x, one)) = versus_one(d, LOCK_FREE, w) else {
        return Finding::missing(&format!("`lock-free` at 1 and {w} writers"));
    };
    Finding::new(
        rule::less(x, one),
        format!(
            "at {w} writers, `lock-free` {} per integer against {} with one writer: {} (LC98 at 7 writers: \
             0.95x)",
            ns(x.value),
            ns(one.value),
            x.ratio(one).show(2)
        ),
    )
}

/// The point `lock-free-robust` judges (the most writers measured, with
/// more ranks than cores): the writers, `lock-free`'s whole-run time per
/// integer and every locking algorithm's; or what the rule finds instead.
type RobustPoint = (u32, Estimate, Vec<(&'static str, Estimate)>);

/// The [`RobustPoint`] of the run, or what `lock-free-robust` finds.
fn robust_point(d: &Data<'_>) -> Result<RobustPoint, Finding> {
    let rows = d.rows();
    let max_w = measured_writers(rows).last().copied();
    let over_w = max_w.filter(|&w| point(rows, LOCK_FREE, w).is_some_and(|r| r.oversubscribed));
    let w = match (max_w, over_w) {
        (None, _) => return Err(Finding::missing("many-to-one points")),
        (Some(w), None) => {
            return Err(Finding::not_measurable(format!(
                "the most writers measured ({w}) leave every rank a core; a job has at most {} ranks",
                symmetry_am::MAX_RANKS
            )));
        }
        (_, Some(w)) => w,
    };
    let locks: Vec<(&str, Estimate)> = LOCKING
        .iter()
        .filter_map(|a| Some((*a, est(d, "ns_per_msg", a, w)?)))
        .collect();
    match est(d, "ns_per_msg", LOCK_FREE, w) {
        Some(lf) if locks.len() == LOCKING.len() => Ok((w, lf, locks)),
        _ => Err(Finding::missing(&format!(
            "`lock-free` and the locking algorithms at {w} writers"
        ))),
    }
}

/// `lock-free-robust`: at the [`RobustPoint`], `lock-free`'s whole-run
/// time per integer below every locking algorithm's.
fn lock_free_robust((w, lf, locks): &RobustPoint) -> Finding {
    Finding::new(
        Outcome::all(locks.iter().map(|(_, x)| rule::less(*lf, *x))),
        format!(
            "at {w} writers ({} ranks), whole-run time per integer: `lock-free` {}; {}",
            w + 1,
            lf.show_with(ns),
            list(locks.iter().map(|(a, x)| (a, x.show_with(ns))))
        ),
    )
}

/// The notes the robustness rule calls for where it is judged: the runs
/// the budget stopped and the full-queue waits at its point.
fn robust_notes(d: &Data<'_>) -> Vec<String> {
    let Ok((w, ..)) = robust_point(d) else {
        return Vec::new();
    };
    let rows = d.rows();
    let mut notes = Vec::new();
    let partial: Vec<String> = series_names(rows, "ns_per_msg")
        .into_iter()
        .filter(|a| point(rows, a, w).and_then(|r| r.get_param("completed")) == Some("false"))
        .collect();
    if !partial.is_empty() {
        notes.push(format!(
            "At {w} writers {} did not finish within the time budget (a convoy: the lock, or the next turn of a \
             queue lock, belongs to a descheduled thread, and every other sender waits for the scheduler); their \
             rate is over the integers delivered.",
            names(&partial)
        ));
    }
    let waits = |a: &str| point(rows, a, w).and_then(|r| r.get_param("full_waits"));
    if let Some(lw) = waits(LOCK_FREE) {
        notes.push(format!(
            "Full-queue waits at {w} writers: `lock-free` {lw}; {} (LC98 Fig. 3: once the tail has been advanced \
             past a full ring, several senders wait on the same packet).",
            list(LOCKING.iter().filter_map(|a| Some((a, waits(a)?))))
        ));
    }
    notes
}

fn assess(rows: &[Row], m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let cores = m.cores() as u32;
    let writers = measured_writers(rows);
    let algs = series_names(rows, "ns_per_msg");
    let slowdown = |a: &str, w: u32| Some(per_msg(rows, a, w)? / per_msg(rows, a, 1)?);
    // The notes the rules' outcomes call for, in the rules' order.
    let mut notes: Vec<String> = whole_run_note(&d).into_iter().collect();
    notes.extend(robust_notes(&d));
    let max_w = writers.last().copied().filter(|&w| w > 1);

    // Table: ns per integer per writer count, slowdown, gap.
    let mut header = table::header(
        "algorithm",
        writers.iter().map(|&w| {
            let over = point(rows, LOCK_FREE, w)
                .or_else(|| algs.first().and_then(|a| point(rows, a, w)))
                .is_some_and(|r| r.oversubscribed);
            let s = if w == 1 { "" } else { "s" };
            format!("{w} writer{s}{}", if over { " (over)" } else { "" })
        }),
    );
    header.extend(max_w.map(|w| format!("{w} writers / 1")));
    header.extend(
        [
            "1 writer, median block",
            "LogP g",
            "block / g, paired by round",
            "LC98 1/3/7 writers (s per 10^6)",
        ]
        .map(String::from),
    );
    let table = table::by_series(&header, &algs, |a| {
        let mut cells: Vec<String> = writers
            .iter()
            .map(|&w| match point(rows, a, w) {
                Some(r) if r.get_param("completed") == Some("false") => format!(
                    "{} ({} of {} in budget)",
                    ns(r.value),
                    r.get_param("delivered").unwrap_or("?"),
                    r.get_param("ints").unwrap_or("?")
                ),
                Some(r) => ns(r.value),
                None => "n/a".into(),
            })
            .collect();
        cells.extend(max_w.map(|w| na(slowdown(a, w), ratio)));
        cells.push(na(block(rows, a, 1), ns));
        cells.push(na(value(rows, a, 2, "logp_g_ns", None), ns));
        cells.push(na(d.value(Sel::metric(VS_GAP).series(a)), ratio));
        cells.push(
            LC98.iter()
                .find(|(n, _)| *n == a)
                .map_or("(not in LC98)".into(), |(_, p)| {
                    format!("{} / {} / {}", p[0], p[1], p[2])
                }),
        );
        cells
    });

    let ints = d
        .row(Sel::metric("ns_per_msg"))
        .and_then(|r| r.get_param("ints"))
        .unwrap_or("?");
    let mut measured = if writers.is_empty() {
        "No many-to-one points.".to_string()
    } else {
        format!(
            "{ints} integers per run, writers {}; the table gives the whole-run time per integer (elapsed / \
             integers), the median-block rate at 1 writer and the LogP gap.",
            fmt::counts(&writers)
        )
    };
    let unverified: Vec<String> = d
        .select(Sel::metric("ns_per_msg"))
        .filter(|r| r.get_param("verified") == Some("false"))
        .map(|r| format!("`{}` x{}", r.series, r.get_param("writers").unwrap_or("?")))
        .collect();
    if !unverified.is_empty() {
        measured.push_str(&format!(
            " **The receiver's count or sum did not match the writers' for {}** (a delivery bug).",
            unverified.join(", ")
        ));
    } else if !writers.is_empty() {
        measured
            .push_str(" Every run delivered each integer exactly once (count and sum checked).");
    }
    notes.push(format!(
        "Ranks are threads of one process, each mapping the endpoint segments itself (the memory traffic of \
         LC98's processes). With {cores} cores, points with more than {} writer{} are oversubscribed (marked in \
         the table and the plot) and measure time-sharing as much as contention. Ranks are pinned one per core \
         when they fit; otherwise the kernel schedules them, the receiver yields after 64 empty polls and a \
         sender facing a full queue backs off, polls and yields.",
        cores.saturating_sub(1),
        if cores == 2 { "" } else { "s" }
    ));
    Assessment {
        measured,
        notes: notes.join("\n\n"),
        table: Some(table),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::testing::{self, big_metal, small_vm};
    use crate::output::report::Verdict;

    /// Rows on `m` (writers 1, 3, cores - 1 and 4 cores - 1): g = 100 ns;
    /// one writer at `one` ns per integer; with more writers than one the
    /// locking algorithms at `locks` and `lock-free` at `lf` (median blocks
    /// and whole runs alike); every point with a spread of `rel` either side.
    fn rows(m: &Machine, one: f64, locks: f64, lf: f64, rel: f64) -> Vec<Row> {
        let c = m.cores() as u32;
        let mut ws = vec![1, 3, c.saturating_sub(1).max(1), 4 * c - 1];
        ws.sort_unstable();
        ws.dedup();
        let r = testing::Rows::new(&EXPERIMENT, m).rel(rel);
        let mut v = Vec::new();
        for a in symmetry_am::claim::NAMES {
            v.push(r.row(a, 2, "logp_g_ns", 100.0).param("writers", "1"));
            for &w in &ws {
                let x = match (*a, w) {
                    (_, 1) => one,
                    ("lock-free" | "stamp", _) => lf,
                    _ => locks,
                };
                for metric in ["ns_per_msg", "block_ns_per_msg"] {
                    let row = r.row(a, w + 1, metric, x).param("writers", w);
                    v.push(
                        row.param("ints", "1000")
                            .param("delivered", 1000)
                            .param("completed", true)
                            .param("verified", true),
                    );
                }
            }
        }
        v
    }

    fn holds(m: &Machine) -> Vec<Row> {
        rows(m, 110.0, 300.0, 80.0, 0.01)
    }

    #[test]
    fn verdicts_reach_every_case() {
        for m in [small_vm(), big_metal()] {
            let v = |rows: &[Row]| testing::verdict(&EXPERIMENT, rows, &m);
            assert_eq!(v(&holds(&m)), Verdict::Holds);
            assert_eq!(v(&rows(&m, 300.0, 100.0, 400.0, 0.01)), Verdict::Differs);
            assert_eq!(v(&rows(&m, 130.0, 130.0, 130.0, 0.1)), Verdict::Indistinct);
            assert_eq!(v(&[]), Verdict::NotMeasurable);
        }
        // A small machine cannot separate contention from time-sharing.
        let m = small_vm();
        let s = EXPERIMENT.section(&holds(&m), &m);
        testing::assert_says(&s.measured, "needs 4 or more cores");
        assert_eq!(draw(&holds(&m), &m).panels.len(), 4);
    }

    /// Every algorithm's `one_writer_vs_g` row over nine rounds.
    fn with_paired(mut v: Vec<Row>, m: &Machine, q: f64, lo: f64, hi: f64) -> Vec<Row> {
        for a in symmetry_am::claim::NAMES {
            let s = Spread {
                median: q,
                lo,
                hi,
                n: OWN_MIN,
            };
            let row = Row::new(EXPERIMENT.id, a, 2, 2 > m.cores(), VS_GAP, q, "x");
            v.push(row.param("writers", 1).with_spread(&s));
        }
        v
    }

    #[test]
    fn the_gap_rule_judges_ratios_paired_by_round() {
        let m = small_vm();
        let gap_rule = |rows: &[Row]| testing::findings(&EXPERIMENT, rows, &m).remove(0);
        // The medians alone (one writer 2x g) fail; paired by round they
        // agree within 1.3x.
        let base = rows(&m, 200.0, 300.0, 80.0, 0.01);
        assert_eq!(gap_rule(&base).outcome, Outcome::Fails);
        let paired = gap_rule(&with_paired(base.clone(), &m, 1.05, 1.0, 1.1));
        assert_eq!(paired.outcome, Outcome::Holds, "{}", paired.evidence);
        assert!(paired.evidence.contains("paired by round"));
        // Rounds that span both sides of the line tie; rounds wholly
        // outside it fail.
        let spread = gap_rule(&with_paired(base.clone(), &m, 1.1, 0.7, 1.6));
        assert_eq!(spread.outcome, Outcome::Tie);
        let off = gap_rule(&with_paired(base.clone(), &m, 2.0, 1.8, 2.2));
        assert_eq!(off.outcome, Outcome::Fails);
        // One algorithm without its paired row is judged on the medians,
        // and marked so.
        let mut mixed = with_paired(base.clone(), &m, 1.05, 1.0, 1.1);
        mixed.retain(|r| !(r.metric == VS_GAP && r.series == "tas"));
        let f = gap_rule(&mixed);
        assert_eq!(f.outcome, Outcome::Fails, "{}", f.evidence);
        assert!(f.evidence.contains("`tas` 2.00 [") && f.evidence.contains("(medians)"));
        // One without any block rate keeps the rule from holding.
        let mut none = with_paired(base, &m, 1.05, 1.0, 1.1);
        none.retain(|r| {
            r.series != "ttas" || !(r.metric == VS_GAP || r.metric == "block_ns_per_msg")
        });
        let f = gap_rule(&none);
        assert!(
            matches!(f.outcome, Outcome::NotMeasurable(_)),
            "{:?}",
            f.outcome
        );
        assert!(f.evidence.contains("`ttas` no block rate"));
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, holds);
    }

    #[test]
    fn writer_counts_cover_lc98_points() {
        let ctx = Ctx::new(true, 2);
        assert_eq!(writer_counts(&ctx), vec![1, 2, 3, 7]);
        let ctx = Ctx {
            threads: Some(vec![1, 2, 4]),
            ..ctx
        };
        assert_eq!(writer_counts(&ctx), vec![1, 3]);
    }

    #[test]
    fn a_run_records_the_spread_of_its_repeats() {
        let ctx = Ctx {
            threads: Some(vec![2]),
            ..Ctx::new(true, 2)
        };
        let rows = run(&ctx).unwrap();
        let d = Data::new(&rows);
        // A one-writer run of 100,000 integers has block rates: every
        // algorithm gets its paired row.
        assert_eq!(
            d.select(Sel::metric(VS_GAP)).count(),
            symmetry_am::claim::NAMES.len()
        );
        for metric in ["logp_g_ns", "ns_per_msg", "elapsed_ms", VS_GAP] {
            for r in d.select(Sel::metric(metric)) {
                let (lo, hi, n) = r.spread().unwrap_or_else(|| panic!("{metric}: {r:?}"));
                assert!(lo <= r.value && r.value <= hi && n >= 2, "{r:?}");
            }
        }
    }
}
