//! `tm-user-work` — ALL89 Fig. 3: the Table III chain of
//! [`tm-null-threads`](super::tm_null_threads), but each thread first does
//! user work drawn uniformly from `0..=2 x mean` (the kernel's `work_iters`),
//! per strategy x processors. Two settings of the mean (`setting`,
//! `work_us`):
//!
//! - `300us`: the paper's mean of 300 us, as is. Where a null thread costs
//!   far less than the Symmetry's tens of microseconds, this is a far
//!   coarser grain than the paper's (the report gives the measured share).
//! - `paper-ratio`: the paper's work-to-overhead ratio, scaled to the
//!   machine the run is on. ALL89 does not print its thread latency as a number (Fig. 1
//!   is a plot), but §III-F says "Threads in Presto cost 600 us on the same
//!   Symmetry hardware, an order of magnitude worse than our threads", i.e.
//!   about 60 us per null thread, so 300 us of work was `PAPER_RATIO` = 5
//!   null threads' worth. (Its other bound, "only an order of magnitude
//!   more expensive than a procedure call" at 3.6 us in Table II, gives
//!   ~36 us and a ratio of 8.3; 5 is the finer grain of the two.) The mean
//!   work is then 5 x the null-thread latency of `single-lock` on one
//!   processor, measured first in the same run (row `null_ns_per_thread`).
//!
//! Metrics: `ns_per_thread` (work included), `elapsed_s` (only for points
//! that ran every thread within the budget) and `speedup`: ALL89's
//! definition, time of `single-lock` on 1 processor over each strategy's on
//! P processors, within the same setting (as a ratio of ns per thread, so
//! equal numbers of threads are compared). The work of a thread is drawn
//! from a seeded generator per chain, so every strategy runs the same work
//! sequence at a given P; between different P the draws differ (each chain
//! has its own seed), which moves the total work by about
//! 1/sqrt(3 x total) (~1.5% at 1,000 threads).
//!
//! Each setting's `total` is sized by a pilot run (`single-lock`, one
//! processor) so that a 1-processor point takes about 0.2 s in `--quick`
//! (1.5 s otherwise), between 1,000 and 1,000,000 threads; `--quick` takes
//! the median of at most 3 runs per point, taken repeat-major across the
//! setting's points ([`chain_grid`]). Every point records the spread
//! of its repeats (`lo`, `hi`, `repeats`: ns per thread; `elapsed_s` the
//! same scaled to the threads that ran; `speedup` the quotient of its two
//! points' spreads).

use crate::harness::fmt::ascending;
use crate::harness::prelude::*;
use crate::kernels::locks::{work_iters_for_ns, work_ns_per_iter};
use crate::registry::threads::{
    NAMES, SPEEDUP_BASE as BASE, chain_cfg, chain_grid, chain_point, elapsed_row, processors,
    speedup_rows,
};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "tm-user-work",
    title: "Null-thread chain with uniform random user work per thread: speedup per strategy",
    source: "ALL89 Fig. 3",
    schedule: Schedule::LAST,
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// ALL89 §III-F, Fig. 3 (up to 18-20 processors). The start of the curves
/// is judged at P = 2, the smallest parallel point; their separation at
/// many processors needs a machine with more than "a few" (8) cores, as
/// in `tm-null-threads`. Throughput orderings compare ns per thread (the
/// whole run's time per thread) at one P, where every strategy ran the
/// same work draws.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "coarse-start-linear",
        paper: "\"We modified the test in Table III so that each thread performs an average of 300 us of \
                user work, taken from a uniform distribution. [...] Fig. 3 graphs speedup for this modified \
                benchmark. Differences appear as the number of processors increases\" (ALL89 §III-F): at \
                few processors every alternative speeds up nearly linearly.",
        rule: "with the paper's 300 us of mean work, every strategy's speedup at P = 2 is at least 0.8 x 2",
        needs: Needs::cores(2),
        judge: coarse_start_linear,
    },
    Claim {
        key: "local-free-lists-win",
        paper: "With local free lists, \"since only accesses to the ready queue are serialized, throughput \
                is better\" (ALL89 §III-C); Fig. 3 orders the alternatives with per-processor free lists \
                above those with shared ones.",
        rule: "at the paper's work-to-overhead ratio and P = all cores, the lowest throughput of \
               `local-freelist`, `idle-queue` and `local-readyq` is above the highest of `single-lock` \
               and `multi-lock`",
        needs: Needs::cores(2),
        judge: local_free_lists_win,
    },
    Claim {
        key: "differences-grow",
        paper: "\"Differences appear as the number of processors increases\" (ALL89 §III-F, Fig. 3).",
        rule: "at the paper's work-to-overhead ratio, the highest strategy speedup over the lowest is larger \
               at P = all cores than at P = 2",
        needs: Needs::cores(8),
        judge: differences_grow,
    },
];

/// The paper's mean user work per thread, in microseconds.
const PAPER_WORK_US: f64 = 300.0;
/// The paper's null-thread latency on the Symmetry, in microseconds, as
/// derived from §III-F (Presto's 600 us being "an order of magnitude worse
/// than our threads").
const PAPER_THREAD_US: f64 = 60.0;
/// Mean work / null-thread latency on the Symmetry: 300 / 60.
const PAPER_RATIO: f64 = PAPER_WORK_US / PAPER_THREAD_US;

const SETTINGS: [&str; 2] = ["300us", "paper-ratio"];
/// Strategies whose control-block and stack free lists are per processor.
const LOCAL_FREE_LISTS: [&str; 3] = ["local-freelist", "idle-queue", "local-readyq"];
/// Strategies whose free lists are shared (under one lock or their own).
const CENTRAL_FREE_LISTS: [&str; 2] = ["single-lock", "multi-lock"];
/// The coarse setting's speedup at P = 2, as a fraction of 2, that counts
/// as nearly linear.
const NEAR_LINEAR: f64 = 0.8;
/// ns per thread.
const NS: &str = "ns_per_thread";

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let sweep = processors(ctx);
    let budget = ctx.budget(1_000, 20_000);
    // Time a point should take on one processor: the total is sized to it.
    let target_s = if ctx.quick { 0.2 } else { 1.5 };
    // --quick: at most 3 repeats (a 1-processor point costs `target_s`).
    let repeats = |p: usize| {
        if ctx.quick {
            ctx.repeats(p).min(ctx.rounds(3))
        } else {
            ctx.repeats(p)
        }
    };
    let runs_per_setting: usize = NAMES.len() * sweep.iter().map(|&p| repeats(p)).sum::<usize>();
    let bar = ctx.bar(EXPERIMENT.id, 1 + SETTINGS.len() * runs_per_setting);
    bar.set_message("null single-lock x1");
    // The null-thread latency the paper-ratio work is scaled from.
    let null_total: u64 = if ctx.quick { 200_000 } else { 1_000_000 };
    let null_cfg = chain_cfg(ctx, 1, null_total, 0, budget);
    let (null, null_spread) = chain_point(BASE, ctx.repeats(1), &null_cfg)?;
    let null_ns = null.ns_per_thread();
    let null_row = Row::new(
        EXPERIMENT.id,
        BASE,
        1,
        false,
        "null_ns_per_thread",
        null_ns,
        "ns",
    );
    let mut rows = vec![
        null_row
            .param("setting", "null")
            .param("work_us", 0)
            .param("total", null_total)
            .param("threads_run", null.threads)
            .param("completed", null.completed)
            .with_spread(&null_spread),
    ];
    bar.inc(1);
    for setting in SETTINGS {
        let work_ns = match setting {
            "300us" => PAPER_WORK_US * 1e3,
            _ => PAPER_RATIO * null_ns,
        };
        let work_iters = work_iters_for_ns(work_ns);
        // Work actually asked for, after rounding to whole iterations.
        let work_us = work_iters as f64 * work_ns_per_iter() / 1e3;
        // Size the total by a pilot run of a tenth of the expected size
        // (it sees the machine's load as the points will).
        let expected = (target_s * 1e9 / (work_ns + null_ns)) as u64;
        let pilot_cfg = chain_cfg(ctx, 1, (expected / 10).max(100), work_iters, budget);
        let (pilot, _) = chain_point(BASE, 1, &pilot_cfg)?;
        let total = ((target_s * 1e9 / pilot.ns_per_thread()) as u64).clamp(1_000, 1_000_000);
        let total = total.div_ceil(1_000) * 1_000;
        let cfg = |p| chain_cfg(ctx, p, total, work_iters, budget);
        let grid = chain_grid(&sweep, repeats, cfg, |name, p| {
            bar.set_message(format!("{setting} {name} x{p}"));
            bar.inc(1);
        })?;
        for g in grid {
            let base = g.row(EXPERIMENT.id, ctx, |r| {
                r.param("setting", setting)
                    .param("work_us", format!("{work_us:.3}"))
                    .param("work_ratio", format!("{:.2}", work_ns / null_ns))
                    .param("work_iters", work_iters)
            });
            rows.extend(elapsed_row(&base, &g.out, &g.spread));
            rows.push(base.with_spread(&g.spread));
        }
    }
    bar.finish_and_clear();
    for setting in SETTINGS {
        let sp = speedup_rows(&rows, EXPERIMENT.id, Some(("setting", setting)));
        rows.extend(sp);
    }
    Ok(rows)
}

/// The `work_us` of a setting's rows, for titles.
fn work_of(d: &Data<'_>, setting: &str) -> String {
    let params = [("setting", setting)];
    let work = d
        .row(Sel::default().params(&params))
        .and_then(|r| r.get_param("work_us"));
    work.unwrap_or("?").to_string()
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let d = Data::new(rows);
    let lines = Lines::new(rows, m).x("processors");
    let panels = SETTINGS
        .iter()
        .map(|s| {
            let title = match *s {
                "300us" => format!("mean work {} us (paper's 300 us)", work_of(&d, s)),
                _ => format!(
                    "mean work {} us (paper's work:thread ratio {PAPER_RATIO})",
                    work_of(&d, s)
                ),
            };
            let y = "speedup vs single-lock on 1 processor";
            lines.at(("setting", s), "speedup", &title, y, Scale::Linear)
        })
        .collect();
    figure(
        "tm-user-work (ALL89 Fig. 3): speedup with uniform random user work per thread",
        m,
        panels,
    )
}

/// The `metric` estimate of `series` at `p` processors in `setting`, if
/// the run has the point without oversubscription.
fn point(d: &Data<'_>, metric: &str, setting: &str, series: &str, p: u32) -> Option<Estimate> {
    d.at(Sel::point(metric, series, p).params(&[("setting", setting)]))
}

/// `(name, ns per thread)` of every strategy of `setting` at `p`.
fn all_at<'n>(d: &Data<'_>, setting: &str, names: &[&'n str], p: u32) -> Vec<Named<'n>> {
    names
        .iter()
        .filter_map(|n| point(d, NS, setting, n, p).map(|e| (*n, e)))
        .collect()
}

/// A strategy and its ns per thread.
type Named<'n> = (&'n str, Estimate);

/// The fastest and the slowest of `v` by ns per thread.
fn extremes<'n>(v: &[Named<'n>]) -> Option<(Named<'n>, Named<'n>)> {
    let by = |a: &&Named<'_>, b: &&Named<'_>| a.1.value.total_cmp(&b.1.value);
    Some((*v.iter().min_by(by)?, *v.iter().max_by(by)?))
}

/// Highest speedup over lowest at `p` (slowest ns per thread over
/// fastest), with the names.
fn divergence(d: &Data<'_>, p: u32) -> Option<(Estimate, &'static str, &'static str)> {
    let v = all_at(d, "paper-ratio", NAMES, p);
    if v.len() < 2 {
        return None;
    }
    let ((fast, f), (slow, s)) = extremes(&v)?;
    Some((s.ratio(f), fast, slow))
}

/// `coarse-start-linear`: every speedup of the 300 us setting at P = 2
/// at least [`NEAR_LINEAR`] x 2.
fn coarse_start_linear(d: &Data<'_>, _m: &Machine) -> Finding {
    let target = NEAR_LINEAR * 2.0;
    let coarse: Vec<(&str, Estimate)> = NAMES
        .iter()
        .filter_map(|n| point(d, "speedup", "300us", n, 2).map(|e| (*n, e)))
        .collect();
    if coarse.is_empty() {
        return Finding::missing("speedups of the 300 us setting at P = 2");
    }
    Finding::new(
        Outcome::all(coarse.iter().map(|(_, e)| rule::at_least(*e, target))),
        format!(
            "speedups at P = 2 (threshold {target:.1}): {}",
            join(
                coarse.iter().map(|(n, e)| format!("`{n}` {}", e.show(2))),
                ", "
            )
        ),
    )
}

/// `local-free-lists-win`: at P = all cores, the slowest strategy with
/// local free lists faster than the fastest with shared ones.
fn local_free_lists_win(d: &Data<'_>, m: &Machine) -> Finding {
    let cores = m.cores() as u32;
    let local = all_at(d, "paper-ratio", &LOCAL_FREE_LISTS, cores);
    let central = all_at(d, "paper-ratio", &CENTRAL_FREE_LISTS, cores);
    match (extremes(&local), extremes(&central)) {
        (Some((_, (ln, slowest_local))), Some(((cn, fastest_central), _))) => Finding::new(
            rule::less(slowest_local, fastest_central),
            format!(
                "at P = {cores}, slowest with local free lists `{ln}` {} ns per thread, fastest with shared \
                 free lists `{cn}` {} ns per thread",
                slowest_local.show(0),
                fastest_central.show(0)
            ),
        ),
        _ => Finding::missing(&format!(
            "the paper-ratio setting at P = {cores} without oversubscription"
        )),
    }
}

/// `differences-grow`: the divergence of the speedups at P = all cores
/// above that at P = 2.
fn differences_grow(d: &Data<'_>, m: &Machine) -> Finding {
    let cores = m.cores() as u32;
    match (divergence(d, 2), divergence(d, cores)) {
        (Some((two, f2, s2)), Some((all, fa, sa))) if cores > 2 => Finding::new(
            rule::greater(all, two),
            format!(
                "highest / lowest speedup {} at P = {cores} (`{fa}` / `{sa}`), {} at P = 2 (`{f2}` / `{s2}`)",
                all.show(2),
                two.show(2)
            ),
        ),
        _ => Finding::missing(&format!(
            "the paper-ratio setting at P = 2 and P = {cores} without oversubscription"
        )),
    }
}

fn assess(rows: &[Row], m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let cores = m.cores() as u32;
    Assessment {
        measured: measured(&d, cores),
        notes: notes(&d, cores),
        table: Some(table(&d, cores)),
    }
}

fn table(d: &Data<'_>, cores: u32) -> Table {
    let over = 4 * cores;
    let mut table = Table::new(&[
        "setting".to_string(),
        "strategy".into(),
        "ns/thread, 1 proc".into(),
        format!("ns/thread, {cores} procs"),
        format!("speedup, {cores} procs"),
        format!("speedup, {over} procs (over)"),
    ]);
    let cell = |metric: &str, s: &str, n: &str, p: u32, digits: usize| {
        let params = [("setting", s)];
        na(d.estimate(Sel::point(metric, n, p).params(&params)), |e| {
            e.show(digits)
        })
    };
    for s in SETTINGS {
        for n in NAMES {
            table.push(&[
                format!("{s} ({} us)", work_of(d, s)),
                format!("`{n}`"),
                cell(NS, s, n, 1, 0),
                cell(NS, s, n, cores, 0),
                cell("speedup", s, n, cores, 2),
                cell("speedup", s, n, over, 2),
            ]);
        }
    }
    table
}

fn measured(d: &Data<'_>, cores: u32) -> String {
    let null_ns = d.value(Sel::point("null_ns_per_thread", BASE, 1));
    let describe = |s: &str| {
        let v = NAMES
            .iter()
            .filter_map(|n| Some((*n, point(d, "speedup", s, n, cores)?.value)));
        ascending(v.collect(), |x| format!("{x:.2}x"), " < ", "n/a")
    };
    format!(
        "Null `single-lock` latency on one processor, measured first: {}, so the paper-ratio setting uses \
         {} us of mean work ({PAPER_RATIO} x). Speedup at P = {cores} (all cores; against `single-lock` on \
         one processor, same setting): with 300 us of work {}; at the paper's ratio {}.",
        na(null_ns, ns),
        work_of(d, "paper-ratio"),
        describe("300us"),
        describe("paper-ratio"),
    )
}

fn notes(d: &Data<'_>, cores: u32) -> String {
    let mut notes = Vec::new();
    if let Some(null) = d.value(Sel::point("null_ns_per_thread", BASE, 1)) {
        let share = null / (PAPER_WORK_US * 1e3 + null);
        let paper_share = PAPER_THREAD_US / (PAPER_WORK_US + PAPER_THREAD_US);
        notes.push(format!(
            "With the paper's 300 us of work a null thread ({} in this run, about {PAPER_THREAD_US:.0} us on \
             the Symmetry) is {:.2}% of a thread's time, against {:.0}% on the Symmetry{}; the paper-ratio \
             setting keeps the Symmetry's grain (work = {PAPER_RATIO} null threads).",
            ns(null),
            100.0 * share,
            100.0 * paper_share,
            if share < paper_share / 2.0 {
                ": the 300 us setting is coarser grained than the paper's"
            } else {
                ""
            },
        ));
    }
    if d.threads(Sel::metric(NS)).iter().any(|&(_, o)| o) {
        notes.push(format!(
            "Points beyond {cores} processors (hollow) time-share the cores and cannot speed up further."
        ));
    }
    notes.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::testing::{self, Rows, big_metal, small_vm, verdict};
    use crate::output::report::Verdict;

    /// ns per thread of a strategy at one P, by setting and group.
    #[derive(Clone, Copy)]
    struct At {
        coarse: f64,
        local: f64,
        central: f64,
    }

    /// [`At`] in the order of its fields.
    fn at(coarse: f64, local: f64, central: f64) -> At {
        At {
            coarse,
            local,
            central,
        }
    }

    /// Rows of `m`: every strategy at 1000 ns per thread on one processor
    /// in both settings, then `two` at P = 2 and `all` at P = all cores
    /// (one point when they coincide), 2% repeat spread, with the null
    /// latency and the speedup rows.
    fn rows(m: &Machine, two: At, all: At) -> Vec<Row> {
        let cores = m.cores() as u32;
        let mut ps = vec![(1, at(1000.0, 1000.0, 1000.0)), (2, two)];
        if cores > 2 {
            ps.push((cores, all));
        }
        let r = Rows::new(&EXPERIMENT, m);
        let mut out = vec![
            r.row(BASE, 1, "null_ns_per_thread", 100.0)
                .param("setting", "null"),
        ];
        for setting in SETTINGS {
            for n in NAMES {
                for &(p, at) in &ps {
                    let v = match (setting, LOCAL_FREE_LISTS.contains(n)) {
                        ("300us", _) => at.coarse,
                        (_, true) => at.local,
                        (_, false) => at.central,
                    };
                    let row = r.row(n, p, NS, v).param("setting", setting);
                    out.push(row.param("work_us", "1"));
                }
            }
        }
        for setting in SETTINGS {
            let sp = speedup_rows(&out, EXPERIMENT.id, Some(("setting", setting)));
            assert_eq!(sp.len(), ps.len() * NAMES.len());
            out.extend(sp);
        }
        out
    }

    fn paper(m: &Machine) -> Vec<Row> {
        let c = m.cores() as f64;
        let all = at(1000.0 / (0.9 * c), 1000.0 / (0.5 * c), 1000.0 / (0.1 * c));
        rows(m, at(550.0, 700.0, 850.0), all)
    }

    #[test]
    fn verdicts_reach_every_case() {
        for m in [small_vm(), big_metal()] {
            assert_eq!(verdict(&EXPERIMENT, &paper(&m), &m), Verdict::Holds);
            let c = m.cores() as f64;
            // No speedup with coarse work, shared free lists ahead, and the
            // strategies converging as P grows.
            let all = at(1000.0, 1000.0 / (0.2 * c), 1000.0 / (0.22 * c));
            let differs = rows(&m, at(1000.0, 900.0, 500.0), all);
            assert_eq!(verdict(&EXPERIMENT, &differs, &m), Verdict::Differs);
            let flat = rows(&m, at(625.0, 625.0, 625.0), at(100.0, 100.0, 100.0));
            assert_eq!(verdict(&EXPERIMENT, &flat, &m), Verdict::Indistinct);
        }
        // One core: no parallel point to judge.
        let one = testing::machine(1, true);
        assert_eq!(
            verdict(&EXPERIMENT, &paper(&one), &one),
            Verdict::NotMeasurable
        );
        // No rows at all.
        let m = big_metal();
        assert_eq!(verdict(&EXPERIMENT, &[], &m), Verdict::NotMeasurable);
    }

    #[test]
    fn every_claim_is_judged_on_a_big_machine() {
        let m = big_metal();
        let rows = paper(&m);
        let f = testing::findings(&EXPERIMENT, &rows, &m);
        assert_eq!(f.len(), CLAIMS.len());
        assert!(f.iter().all(|f| f.outcome == Outcome::Holds), "{f:?}");
        assert_eq!(draw(&rows, &m).panels.len(), 2);
    }

    #[test]
    fn machine_neutral() {
        testing::assert_machine_neutral(&EXPERIMENT, &paper(&small_vm()), &paper(&big_metal()));
    }
}
