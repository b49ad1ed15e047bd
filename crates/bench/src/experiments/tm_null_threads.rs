//! `tm-null-threads` — ALL89 Fig. 1-2 and Table III: create, start and
//! finish 1,000,000 null threads on each of the five thread-management
//! strategies, for a sweep of processors.
//!
//! Each point runs [`crate::kernels::threads::null_chain`]: P chains of null
//! threads, each thread creating the next one and finishing, until every
//! chain has run total / P threads. Metrics:
//!
//! - `elapsed_s` (Fig. 1): seconds for the whole run, only for points that
//!   ran every thread within the time budget (never extrapolated);
//! - `ns_per_thread`: elapsed / threads that ran; at one processor this is
//!   the latency of one thread's create + start + finish without contention;
//! - `speedup` (Fig. 2): ALL89's definition, "the ratio of the time for the
//!   fastest alternative on one processor (single lock) to the time each
//!   alternative takes on P processors", computed as
//!   `ns_per_thread(single-lock, 1) / ns_per_thread(strategy, P)`, which is
//!   that ratio of times for an equal number of threads and stays exact
//!   when a point ran short of its budget;
//! - `queues_examined_per_dequeue`: the runtime's counters, to show what
//!   `local-readyq`'s scan costs (1 for the central-queue strategies);
//! - `ns_vs` (P = 1 only): a strategy's ns per thread over that of the
//!   strategy named in the `over` parameter in the same round, the median
//!   of these paired quotients with its median interval; the one-processor
//!   rules judge it.
//!
//! Parameters: `total` (threads asked for), `threads_run`, `completed`,
//! `pinned`, `parks` (idle processors that parked in the kernel),
//! `budget_ms` and the repeat spread (`lo`, `hi`, `repeats`: of ns per
//! thread over [`Ctx::repeats`] runs, taken repeat-major across all the
//! points (the first run of every point, then the second, ...: see
//! [`chain_grid`]); `elapsed_s` carries it scaled to the threads that
//! ran, `speedup` the quotient of its two points' spreads).
//! Processors are pinned one per CPU where every processor has a core;
//! oversubscribed points are left to the OS scheduler (pinning several
//! spinning processors to one CPU would measure the pinning).

use symmetry_locks::Tas;
use symmetry_threads::{Fifo, SingleLock};

use crate::harness::fmt::ascending;
use crate::harness::prelude::*;
use crate::kernels::threads::null_chain;
use crate::registry::threads::{
    GridPoint, NAMES, SPEEDUP_BASE, chain_cfg, chain_grid, elapsed_row, processors, speedup_rows,
    thousands,
};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "tm-null-threads",
    title: "Create, start and finish 1,000,000 null threads per strategy x processors",
    source: "ALL89 Fig. 1-2, Table III",
    schedule: Schedule::LAST,
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// ALL89 §III-C..F. The latency claims are judged at one processor (Fig.
/// 1's "latency for a single thread ... when there is no contention for
/// locks"); throughput compares ns per thread of the whole run (its
/// inverse), which for one strategy at two P is the ratio of its speedups.
/// The central ready queue is said to allow "a few" concurrent operations,
/// so telling local ready queues apart from it needs more processors than
/// a few: 8.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "single-lock-fastest",
        paper: "Speedup is defined against \"the fastest alternative on one processor (single lock)\" \
                (ALL89 §III-F, Fig. 2).",
        rule: "at P = 1, the ns per thread of `single-lock` is below every other strategy's \
               (their quotient paired by round)",
        needs: Needs::NONE,
        judge: single_lock_fastest,
    },
    Claim {
        key: "multi-lock-latency",
        paper: "\"Locking each of the data structures separately results in a much higher latency than \
                locking all data structures under the same lock\" (ALL89 §III-F).",
        rule: "at P = 1, the ns per thread of `multi-lock` is above that of `single-lock` \
               (their quotient paired by round)",
        needs: Needs::NONE,
        judge: |d, _| at_one(d, "multi-lock", SPEEDUP_BASE, rule::greater, "vs"),
    },
    Claim {
        key: "local-freelist-latency",
        paper: "With local free lists \"fewer lock acquisitions are needed per thread, [so] latency is \
                lower than with multiple locks\" (ALL89 §III-C).",
        rule: "at P = 1, the ns per thread of `local-freelist` is below that of `multi-lock` \
               (their quotient paired by round)",
        needs: Needs::NONE,
        judge: |d, _| at_one(d, "local-freelist", "multi-lock", rule::less, "vs"),
    },
    Claim {
        key: "idle-check-cost",
        paper: "The idle queue's check for idle processors on thread creation, with the idle queue always \
                empty, \"markedly increases [the] cost of threads\" (ALL89 §III-F).",
        rule: "at P = 1, the ns per thread of `idle-queue` is above that of `local-freelist` \
               (their quotient paired by round)",
        needs: Needs::NONE,
        judge: |d, _| at_one(d, "idle-queue", "local-freelist", rule::greater, "vs"),
    },
    Claim {
        key: "central-queue-a-few",
        paper: "\"Even with local free lists, the lock on the ready queue limits throughput to a few \
                concurrent thread operations\" (ALL89 §III-F, Fig. 2).",
        rule: "the throughput of `local-freelist` (1 / ns per thread) at its best P from 2 to all cores is \
               above its throughput at P = 1",
        needs: Needs::cores(2),
        judge: central_queue_a_few,
    },
    Claim {
        key: "only-local-readyq-scales",
        paper: "\"Only local ready queues can support higher throughput\" (ALL89 §III-F, Fig. 2, up to 20 \
                processors).",
        rule: "at P = all cores, the throughput of `local-readyq` is above its own at P = 1 and above every \
               other strategy's",
        needs: Needs::cores(8),
        judge: only_local_readyq_scales,
    },
];

/// Table III's one million threads.
const TOTAL: u64 = 1_000_000;
/// The smallest total `--quick` shrinks to on a slow machine.
const MIN_TOTAL: u64 = 100_000;
/// ALL89's null-thread latency on the Symmetry, in microseconds: Presto's
/// 600 us was "an order of magnitude worse than our threads" (§III-F).
const PAPER_THREAD_US: f64 = 60.0;
/// ns per thread.
const NS: &str = "ns_per_thread";
/// Speedup against `single-lock` on one processor.
const SPEEDUP: &str = "speedup";
/// The runtime's scan counter.
const EXAMINED: &str = "queues_examined_per_dequeue";
/// Metric at P = 1: a strategy's ns per thread over that of the strategy
/// named in `over`, paired by round ([`paired_at_one`]).
const VS: &str = "ns_vs";

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let sweep = processors(ctx);
    let budget = ctx.budget(1_500, 30_000);
    let runs: usize = NAMES.len() * sweep.iter().map(|&p| ctx.repeats(p)).sum::<usize>();
    // --quick keeps Table III's million threads when the whole grid fits
    // in about 25 s at the one-processor rate of a pilot run; else it
    // shrinks the total (recorded in `total`).
    let total = if ctx.quick {
        let pilot = null_chain::<SingleLock<Tas, Fifo>>(&chain_cfg(ctx, 1, MIN_TOTAL, 0, budget));
        let fit = (25.0 / (pilot.ns_per_thread() * 1e-9 * runs as f64)) as u64;
        (fit / MIN_TOTAL * MIN_TOTAL).clamp(MIN_TOTAL, TOTAL)
    } else {
        TOTAL
    };
    let bar = ctx.bar(EXPERIMENT.id, runs);
    let cfg = |p| chain_cfg(ctx, p, total, 0, budget);
    let grid = chain_grid(
        &sweep,
        |p| ctx.repeats(p),
        cfg,
        |name, p| {
            bar.set_message(format!("{name} x{p}"));
            bar.inc(1);
        },
    )?;
    let mut rows = paired_at_one(&grid, ctx);
    for g in grid {
        let s = g.out.report.stats;
        let base = g.row(EXPERIMENT.id, ctx, |r| r);
        rows.extend(elapsed_row(&base, &g.out, &g.spread));
        rows.push(Row {
            metric: EXAMINED.into(),
            value: s.queues_examined as f64 / s.dequeues.max(1) as f64,
            unit: "queues".into(),
            ..base.clone()
        });
        rows.push(base.with_spread(&g.spread));
    }
    bar.finish_and_clear();
    rows.extend(speedup_rows(&rows, EXPERIMENT.id, None));
    Ok(rows)
}

/// At P = 1, every strategy's ns per thread over every other's in the
/// same round ([`VS`], the other named in `over`): the median of these
/// paired quotients with its interval. One processor's rules compare
/// strategies 2x apart whose separate medians, in a run the host
/// disturbed, each carried a 90% pooled noise (a tie at 1.87x); the
/// rounds' quotients stayed within a few percent.
fn paired_at_one(grid: &[GridPoint], ctx: &Ctx) -> Vec<Row> {
    let one: Vec<&GridPoint> = grid.iter().filter(|g| g.cfg.processors == 1).collect();
    let mut rows = Vec::new();
    for a in &one {
        for b in one.iter().filter(|b| b.name != a.name) {
            if let Some(q) = Spread::paired_ratio(&a.rounds, &b.rounds) {
                rows.push(
                    Row::new(EXPERIMENT.id, a.name, 1, ctx.over(1), VS, q.median, "x")
                        .param("over", b.name)
                        .with_spread(&q),
                );
            }
        }
    }
    rows
}

/// The threads asked for per point, e.g. `1,000,000`.
fn total(d: &Data<'_>) -> String {
    thousands(d.param(Sel::default(), "total").unwrap_or("?"))
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let total = total(&Data::new(rows));
    let lines = Lines::new(rows, m).x("processors");
    figure(
        &format!("tm-null-threads (ALL89 Fig. 1-2): create, start, finish {total} null threads"),
        m,
        vec![
            lines.of(
                "elapsed_s",
                &format!("Fig. 1: elapsed time for {total} threads"),
                "seconds",
                Scale::Linear,
            ),
            lines.of(
                SPEEDUP,
                "Fig. 2: speedup vs single-lock on 1 processor",
                "speedup (x)",
                Scale::Linear,
            ),
        ],
    )
}

/// Strategies ordered by ns per thread at `p`, ascending, as "`a` 123 ns <
/// `b` 130 ns ...".
fn ordering(d: &Data<'_>, p: u32) -> String {
    let v = NAMES
        .iter()
        .filter_map(|n| Some((*n, d.value(Sel::point(NS, n, p))?)));
    ascending(v.collect(), ns, " < ", "n/a")
}

/// `a`'s ns per thread over `b`'s at P = 1, paired by round, if the run
/// recorded it: widened by the pooled noise of the paired quotients.
fn paired(d: &Data<'_>, a: &str, b: &str) -> Option<Estimate> {
    d.at(Sel::point(VS, a, 1).params(&[("over", b)]))
}

/// `a` against `b` at P = 1 with `rule`, as a finding: on their quotient
/// paired by round where the run recorded it, else (older CSVs) on the
/// two separate medians.
fn at_one(
    d: &Data<'_>,
    a: &str,
    b: &str,
    rule: fn(Estimate, Estimate) -> Outcome,
    word: &str,
) -> Finding {
    let (Some(x), Some(y)) = (d.at(Sel::point(NS, a, 1)), d.at(Sel::point(NS, b, 1))) else {
        return Finding::missing(&format!("`{a}` and `{b}` at P = 1"));
    };
    let (outcome, q) = match paired(d, a, b) {
        Some(q) => (
            rule(q, Estimate::exact(1.0)),
            format!("paired by round {}", q.show(2)),
        ),
        None => (rule(x, y), x.ratio(y).show(2)),
    };
    let (x, y) = (x.show(1), y.show(1));
    Finding::new(
        outcome,
        format!("`{a}` {x} ns {word} `{b}` {y} ns at P = 1 (ratio {q})"),
    )
}

/// `single-lock-fastest`: `single-lock` below every other strategy at
/// P = 1.
fn single_lock_fastest(d: &Data<'_>, _m: &Machine) -> Finding {
    let others: Vec<(&str, Estimate)> = (NAMES.iter().filter(|n| **n != SPEEDUP_BASE))
        .filter_map(|n| Some((*n, d.at(Sel::point(NS, n, 1))?)))
        .collect();
    let Some(sl) = d
        .at(Sel::point(NS, SPEEDUP_BASE, 1))
        .filter(|_| !others.is_empty())
    else {
        return Finding::missing("`single-lock` and another strategy at P = 1");
    };
    Finding::new(
        Outcome::all(
            others
                .iter()
                .map(|(n, e)| match paired(d, SPEEDUP_BASE, n) {
                    Some(q) => rule::less(q, Estimate::exact(1.0)),
                    None => rule::less(sl, *e),
                }),
        ),
        format!(
            "`{SPEEDUP_BASE}` {} ns; {}",
            sl.show(1),
            join(
                others
                    .iter()
                    .map(|(n, e)| format!("`{n}` {} ns", e.show(1))),
                ", "
            )
        ),
    )
}

/// `central-queue-a-few`: `local-freelist`'s best P from 2 to all cores
/// beats P = 1.
fn central_queue_a_few(d: &Data<'_>, m: &Machine) -> Finding {
    let cores = m.cores() as u32;
    let lf_best = (2..=cores)
        .filter_map(|p| Some((p, d.at(Sel::point(NS, "local-freelist", p))?)))
        .min_by(|a, b| a.1.value.total_cmp(&b.1.value));
    match (d.at(Sel::point(NS, "local-freelist", 1)), lf_best) {
        (Some(one), Some((p, best))) => Finding::new(
            rule::less(best, one),
            format!(
                "`local-freelist` {} ns per thread at its best P = {p}, {} ns at P = 1 (throughput {} of \
                 P = 1)",
                best.show(1),
                one.show(1),
                one.ratio(best).show(2)
            ),
        ),
        _ => Finding::missing(&format!(
            "`local-freelist` at P = 1 and at some P from 2 to {cores}"
        )),
    }
}

/// `only-local-readyq-scales`: at P = all cores, `local-readyq` above its
/// own P = 1 and every other strategy.
fn only_local_readyq_scales(d: &Data<'_>, m: &Machine) -> Finding {
    let cores = m.cores() as u32;
    let rivals: Vec<(&str, Estimate)> = (NAMES.iter().filter(|n| **n != "local-readyq"))
        .filter_map(|n| Some((*n, d.at(Sel::point(NS, n, cores))?)))
        .collect();
    let lr = |p| d.at(Sel::point(NS, "local-readyq", p));
    let (Some(one), Some(lr)) = (lr(1), lr(cores).filter(|_| !rivals.is_empty())) else {
        return Finding::missing(&format!(
            "`local-readyq` and another strategy at P = {cores} without oversubscription"
        ));
    };
    let best_rival = (rivals.iter().min_by(|a, b| a.1.value.total_cmp(&b.1.value)))
        .map_or(String::new(), |(n, e)| {
            format!("; fastest other: `{n}` {} ns", e.show(1))
        });
    Finding::new(
        Outcome::all(
            std::iter::once(rule::less(lr, one))
                .chain(rivals.iter().map(|(_, e)| rule::less(lr, *e))),
        ),
        format!(
            "`local-readyq` {} ns per thread at P = {cores}, {} ns at P = 1{best_rival}",
            lr.show(1),
            one.show(1)
        ),
    )
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
    let ps = d.threads(Sel::metric(NS));
    let max_p = ps.last().map_or(1, |&(p, _)| p);
    let over = ps.iter().any(|&(p, o)| p == max_p && o);
    let mut table = Table::new(&[
        "strategy".to_string(),
        "ns/thread, 1 proc".into(),
        format!("ns/thread, {cores} procs"),
        format!(
            "ns/thread, {max_p} procs{}",
            if over { " (over)" } else { "" }
        ),
        format!("speedup, {cores} procs"),
        format!("speedup, {max_p} procs"),
        format!("queues examined/dequeue, {cores} procs"),
    ]);
    let cell = |metric: &str, n: &str, p: u32, digits: usize| {
        (d.estimate(Sel::point(metric, n, p))).map_or("n/a".to_string(), |e| e.show(digits))
    };
    for n in NAMES {
        table.push(&[
            format!("`{n}`"),
            cell(NS, n, 1, 1),
            cell(NS, n, cores, 1),
            cell(NS, n, max_p, 1),
            cell(SPEEDUP, n, cores, 2),
            cell(SPEEDUP, n, max_p, 2),
            cell(EXAMINED, n, cores, 2),
        ]);
    }
    table
}

fn measured(d: &Data<'_>, cores: u32) -> String {
    let incomplete = d
        .select(Sel::metric(NS))
        .filter(|r| r.get_param("completed") == Some("false"))
        .count();
    let mut out = format!(
        "{} null threads per point; {incomplete} point(s) ran out of the time budget (their rate is over \
         the threads that ran). Time per thread at P = 1 (latency, no contention): {}. At P = {cores} (all \
         cores; the whole run's time per thread, i.e. 1/throughput): {}.",
        total(d),
        ordering(d, 1),
        ordering(d, cores),
    );
    if let Some(q) = d.value(Sel::point(EXAMINED, "local-readyq", cores)) {
        out.push_str(&format!(
            " `local-readyq` examined {q:.2} queues per dequeue at P = {cores}."
        ));
    }
    out
}

fn notes(d: &Data<'_>, cores: u32) -> String {
    let mut notes = Vec::new();
    let at = |n: &str, p| d.at(Sel::point(NS, n, p));
    let fastest = (NAMES.iter().filter_map(|n| Some((*n, at(n, 1)?.value))))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((n, x)) = fastest {
        notes.push(format!(
            "ALL89's null thread took tens of microseconds on the Symmetry (about {PAPER_THREAD_US:.0} us: \
             Presto's 600 us was \"an order of magnitude worse than our threads\") and a lock acquisition \
             5.6 us (Table II); in this run the fastest on one processor, `{n}`, took {}, about {:.0} times \
             less, so the ordering at P = 1 is set by code-path length and cache behaviour as much as by the \
             number of lock acquisitions.",
            ns(x),
            PAPER_THREAD_US * 1e3 / x
        ));
    }
    // Whether every strategy's throughput fell from 1 to all cores.
    let fell = NAMES.iter().filter(|n| {
        matches!((at(n, 1), at(n, cores)),
            (Some(one), Some(c)) if cores > 1 && rule::greater(c, one) == Outcome::Holds)
    });
    if fell.count() == NAMES.len() {
        notes.push(format!(
            "Every strategy's throughput fell from 1 to {cores} processors. In the chain each new thread \
             usually starts on another processor than the one that created it (central queue: whichever \
             processor dequeues first; `local-readyq`: a random queue), so its control block and stack move \
             between caches; where such a move costs as much as a whole null thread, adding processors adds \
             transfers rather than throughput. On the Symmetry a thread was tens of microseconds of \
             instructions and a miss was cheap next to it."
        ));
    }
    if d.threads(Sel::metric(NS)).iter().any(|&(_, o)| o) {
        notes.push(format!(
            "Points beyond {cores} processors (hollow) time-share cores: they measure the OS scheduler and \
             idle spinning (idle processors poll before they park, taking CPU from the ones with work; \
             `idle-queue` hands each new thread to an idle processor that may be descheduled), not lock \
             contention."
        ));
    }
    notes.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::testing::{self, Rows, big_metal, small_vm, verdict};
    use crate::output::report::Verdict;

    /// Rows of `m`: ns per thread of each strategy (in [`NAMES`] order) at
    /// P = 1 (`one`) and at P = all cores (`all`), 2% repeat spread, with
    /// their speedup rows.
    fn rows(m: &Machine, one: [f64; 5], all: [f64; 5]) -> Vec<Row> {
        let at = Rows::new(&EXPERIMENT, m);
        let mut out = Vec::new();
        for (i, n) in NAMES.iter().enumerate() {
            for (p, v) in [(1, one[i]), (m.cores() as u32, all[i])] {
                let r = at.row(n, p, NS, v).param("total", "1000000");
                out.push(r.param("completed", "true"));
            }
        }
        out.extend(speedup_rows(&out, EXPERIMENT.id, None));
        out
    }

    /// The paper's shape: single-lock fastest at P = 1, then local-readyq
    /// highest throughput at all cores.
    const PAPER_ONE: [f64; 5] = [100.0, 150.0, 110.0, 130.0, 115.0];
    const PAPER_ALL: [f64; 5] = [60.0, 50.0, 40.0, 45.0, 10.0];
    /// Every ordering reversed, every throughput falling.
    const FALLING: [f64; 5] = [400.0, 300.0, 300.0, 300.0, 500.0];

    #[test]
    fn paired_rounds_decide_what_a_disturbed_run_ties() {
        let m = small_vm();
        // Every point's repeats spread 90%: the separate medians tie.
        let mut v = rows(&m, PAPER_ONE, PAPER_ALL);
        for r in v.iter_mut().filter(|r| r.metric == NS) {
            *r = r.clone().with_spread(&Spread {
                median: r.value,
                lo: r.value * 0.5,
                hi: r.value * 1.4,
                n: 5,
            });
        }
        let f = testing::findings(&EXPERIMENT, &v, &m);
        assert!(f[..4].iter().all(|f| f.outcome == Outcome::Tie), "{f:?}");
        // The rounds' quotients agree to 1%.
        for (i, x) in NAMES.iter().enumerate() {
            for (j, y) in NAMES.iter().enumerate().filter(|(j, _)| *j != i) {
                let q = PAPER_ONE[i] / PAPER_ONE[j];
                let s = Spread::median_interval(&[q * 0.995, q, q, q, q * 1.005]).unwrap();
                let r = Row::new(EXPERIMENT.id, x, 1, false, VS, q, "x").param("over", *y);
                v.push(r.with_spread(&s));
            }
        }
        let f = testing::findings(&EXPERIMENT, &v, &m);
        for f in &f[..4] {
            assert_eq!(f.outcome, Outcome::Holds, "{}", f.evidence);
        }
        assert!(f[1].evidence.contains("paired by round"));
    }

    #[test]
    fn verdicts_reach_every_case() {
        for m in [small_vm(), big_metal()] {
            let v = |one, all| verdict(&EXPERIMENT, &rows(&m, one, all), &m);
            assert_eq!(v(PAPER_ONE, PAPER_ALL), Verdict::Holds);
            assert_eq!(
                v([200.0, 100.0, 150.0, 120.0, 130.0], FALLING),
                Verdict::Differs
            );
            assert_eq!(v([100.0; 5], [100.0; 5]), Verdict::Indistinct);
        }
        // No rows of the experiment: nothing to judge.
        let m = small_vm();
        assert_eq!(verdict(&EXPERIMENT, &[], &m), Verdict::NotMeasurable);
        // Only oversubscribed points (a small machine's data judged for a
        // machine whose cores are the small one's 4x point).
        let four = testing::machine(8, true);
        let mut over = rows(&small_vm(), PAPER_ONE, PAPER_ALL);
        over.retain(|r| r.threads > 1);
        for r in &mut over {
            r.threads = 8;
            r.oversubscribed = true;
        }
        assert_eq!(verdict(&EXPERIMENT, &over, &four), Verdict::NotMeasurable);
    }

    #[test]
    fn the_many_processor_claim_needs_cores() {
        let m = small_vm();
        let s = EXPERIMENT.section(&rows(&m, PAPER_ONE, PAPER_ALL), &m);
        testing::assert_says(&s.measured, "needs 8 or more cores");
        let m = big_metal();
        let f = testing::findings(&EXPERIMENT, &rows(&m, PAPER_ONE, PAPER_ALL), &m);
        assert_eq!(f.len(), CLAIMS.len());
        assert!(f.iter().all(|f| f.outcome == Outcome::Holds));
        let a = assess(&rows(&m, PAPER_ONE, PAPER_ALL), &m);
        assert_eq!(a.table.as_ref().map(|t| t.rows.len()), Some(NAMES.len()));
        assert_eq!(draw(&rows(&m, PAPER_ONE, PAPER_ALL), &m).panels.len(), 2);
    }

    #[test]
    fn machine_neutral() {
        testing::assert_machine_neutral(
            &EXPERIMENT,
            &rows(&small_vm(), PAPER_ONE, FALLING),
            &rows(&big_metal(), PAPER_ONE, PAPER_ALL),
        );
    }
}
