//! `peer-threads` — the ALL89 Table III null-thread chain (create, start and
//! finish a thread that does nothing but create the next one) on every
//! symmetry-threads strategy and on the modern peers in one run:
//!
//! - the five strategies of [`crate::registry::threads::NAMES`], P processors;
//! - `tokio`: detached `tokio::spawn` of a null task on a multi-thread
//!   runtime with P workers ([`crate::peers::threads::tokio_chain`]);
//! - `may`: detached stackful may coroutines
//!   ([`crate::peers::threads::may_chain`]); may's scheduler is configured
//!   once per process, so it runs only at the worker count it was first
//!   given (`cores`, unless other code in the process started may first:
//!   the row's `workers` and `threads` say what was in force);
//! - `std-thread`: detached OS threads, each spawned by its predecessor
//!   ([`crate::peers::threads::std_thread_chain`]), under a time budget: tens
//!   of microseconds each, so a run usually stops early with
//!   `completed = false`, and the rate is over the threads that ran (the
//!   median of up to 3 runs of a 0.5 s budget in `--quick`, 3 s otherwise;
//!   several short runs resist a burst of other load better than one long
//!   one).
//!
//! P chains run at once at P = 1 and P = cores (or `--threads`). The metric
//! is `ns_per_thread` = elapsed / threads that ran (create + start + finish
//! of one null thread), the median of [`Ctx::repeats`] runs interleaved
//! across series so drift hits every series alike. In `--quick`, a peer
//! whose million threads would take over 2 s (by a 20,000-thread pilot:
//! may, here) runs as many as fit in about 1 s (`total` says how many).
//! For each peer, `ratio_to_best` = its `ns_per_thread` / the best
//! strategy's at the same P (parameter `best`).

use crate::harness::{Ctx, Experiment, figure, ns, ratio, value};
use crate::kernels::locks::median_run;
use crate::kernels::threads::{ChainCfg, null_chain};
use crate::output::data::Row;
use crate::output::machine::Machine;
use crate::output::plot::{Bar, BarPanel, Figure, Panel, Scale};
use crate::output::report::{Section, Table, Verdict};
use crate::peers::threads::{self as peers_threads, may_chain, std_thread_chain, tokio_chain};
use crate::registry::threads::NAMES;

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "peer-threads",
    title: "Null thread create+start+finish: every strategy vs tokio, may, std::thread",
    source: "modern peers (ALL89 Table III workload)",
    uses_locks: false,
    claims: &[],
    run,
    figure: draw,
    assess,
};

const TOTAL: u64 = 1_000_000;
/// Threads of the pilot run that sizes a slow peer's total in `--quick`.
const PILOT: u64 = 20_000;
const TOKIO: &str = "tokio";
const MAY: &str = "may";
const STD: &str = "std-thread";
const PEERS: [&str; 3] = [TOKIO, MAY, STD];
/// The targets: the best strategy this many times cheaper.
const TOKIO_TARGET: f64 = 5.0;
const STD_TARGET: f64 = 100.0;

/// One measured run, normalized across the kernels.
#[derive(Clone, Copy)]
struct Out {
    threads: u64,
    ns_per_thread: f64,
    completed: bool,
}

impl From<crate::kernels::threads::ChainOut> for Out {
    fn from(o: crate::kernels::threads::ChainOut) -> Self {
        Out {
            threads: o.threads,
            ns_per_thread: o.ns_per_thread(),
            completed: o.completed,
        }
    }
}

impl From<peers_threads::ChainOut> for Out {
    fn from(o: peers_threads::ChainOut) -> Self {
        Out {
            threads: o.threads,
            ns_per_thread: o.ns_per_thread(),
            completed: o.completed,
        }
    }
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let mut points: Vec<usize> = ctx.threads.clone().unwrap_or_else(|| vec![1, ctx.cores]);
    points.sort_unstable();
    points.dedup();
    let budget = ctx.budget(3_000, 20_000);
    let std_budget = ctx.budget(500, 3_000);
    let std_repeats = |p: usize| ctx.repeats(p).min(3);
    // may runs at the worker count in force: the first configuration wins.
    let may_at = peers_threads::may_workers().unwrap_or(ctx.cores);
    let cheap: Vec<&str> = NAMES.iter().copied().chain([TOKIO, MAY]).collect();
    let len: usize = points
        .iter()
        .map(|&p| ctx.repeats(p) * cheap.len() + 1)
        .sum();
    let bar = ctx.bar(EXPERIMENT.id, len);
    let mut rows = Vec::new();
    for &p in &points {
        let runs = ctx.repeats(p);
        // --quick: a slow peer, whose million threads would take over 2 s
        // by a 20,000-thread pilot, runs as many as fit in about 1 s
        // instead; the total is recorded.
        let sized = |pilot: Out| {
            let ns = pilot.ns_per_thread;
            if ctx.quick && ns.is_finite() && ns * TOTAL as f64 > 2e9 {
                ((1e9 / ns) as u64 / 10_000 * 10_000).clamp(PILOT, TOTAL)
            } else {
                TOTAL
            }
        };
        let tokio_total = sized(tokio_chain(p, p, PILOT, budget).into());
        let may_total = if p == may_at {
            sized(may_chain(p, p, PILOT, budget).into())
        } else {
            TOTAL
        };
        let total_of = |name: &str| match name {
            TOKIO => tokio_total,
            MAY => may_total,
            _ => TOTAL,
        };
        let mut samples: Vec<Vec<Out>> = vec![Vec::new(); cheap.len()];
        for _ in 0..runs {
            for (i, name) in cheap.iter().enumerate() {
                bar.set_message(format!("{name} x{p}"));
                let out: Option<Out> = match *name {
                    TOKIO => Some(tokio_chain(p, p, tokio_total, budget).into()),
                    MAY if p == may_at => Some(may_chain(p, p, may_total, budget).into()),
                    MAY => None,
                    _ => {
                        let cfg = ChainCfg {
                            processors: p,
                            total: TOTAL,
                            work_iters: 0,
                            budget,
                            pin: super::tm_null_threads::pin(ctx, p),
                        };
                        crate::with_strategy!(*name, null_chain(&cfg)).map(Out::from)
                    }
                };
                samples[i].extend(out);
                bar.inc(1);
            }
        }
        for (name, s) in cheap.iter().zip(samples) {
            if s.is_empty() {
                continue;
            }
            let n = s.len();
            let mut it = s.into_iter();
            // The samples are already measured: the median of them.
            let out = median_run(n, || it.next().expect("n samples"), |o| o.ns_per_thread);
            let workers = if *name == MAY {
                peers_threads::may_workers().unwrap_or(p)
            } else {
                p
            };
            rows.push(row(
                ctx,
                name,
                workers,
                p,
                total_of(name),
                &out,
                budget.as_millis(),
                n,
            ));
        }
        bar.set_message(format!("{STD} x{p}"));
        let n = std_repeats(p);
        let out: Out = median_run(
            n,
            || std_thread_chain(p, TOTAL, std_budget).into(),
            |o: &Out| o.ns_per_thread,
        );
        rows.push(row(ctx, STD, p, p, TOTAL, &out, std_budget.as_millis(), n));
        bar.inc(1);
    }
    bar.finish_and_clear();
    // Ratios of each peer to the best strategy at the same P.
    let mut ratios = Vec::new();
    for &p in &points {
        let Some((best, best_ns)) = best_strategy(&rows, p as u32) else {
            continue;
        };
        for r in rows
            .iter()
            .filter(|r| r.threads == p as u32 && PEERS.contains(&r.series.as_str()))
        {
            ratios.push(
                Row {
                    metric: "ratio_to_best".into(),
                    value: r.value / best_ns,
                    unit: "x".into(),
                    ..r.clone()
                }
                .param("best", best),
            );
        }
    }
    rows.extend(ratios);
    Ok(rows)
}

/// An `ns_per_thread` row. `threads` is the workers in force (may's may
/// differ from `chains`).
#[allow(clippy::too_many_arguments)]
fn row(
    ctx: &Ctx,
    series: &str,
    threads: usize,
    chains: usize,
    total: u64,
    out: &Out,
    budget_ms: u128,
    repeats: usize,
) -> Row {
    Row::new(
        EXPERIMENT.id,
        series,
        threads as u32,
        ctx.over(threads),
        "ns_per_thread",
        out.ns_per_thread,
        "ns",
    )
    .param("workers", threads)
    .param("chains", chains)
    .param("total", total)
    .param("threads_run", out.threads)
    .param("completed", out.completed)
    .param("repeats", repeats)
    .param("budget_ms", budget_ms)
}

/// The strategy with the lowest `ns_per_thread` at `threads`.
fn best_strategy(rows: &[Row], threads: u32) -> Option<(&'static str, f64)> {
    NAMES
        .iter()
        .filter_map(|n| value(rows, n, threads, "ns_per_thread", None).map(|x| (*n, x)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// The P values measured, ascending.
fn measured_points(rows: &[Row]) -> Vec<u32> {
    let mut v: Vec<u32> = rows
        .iter()
        .filter(|r| r.metric == "ns_per_thread")
        .map(|r| r.threads)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let panels = measured_points(rows)
        .into_iter()
        .map(|p| {
            let bars = rows
                .iter()
                .filter(|r| r.metric == "ns_per_thread" && r.threads == p)
                .map(|r| {
                    let group = if PEERS.contains(&r.series.as_str()) {
                        "peer"
                    } else {
                        "symmetry-threads"
                    };
                    let label = if r.get_param("completed") == Some("false") {
                        format!("{} (partial)", r.series)
                    } else {
                        r.series.clone()
                    };
                    Bar::new(&label, r.value, group)
                })
                .collect();
            let mut reference_lines = Vec::new();
            if let Some(t) = value(rows, TOKIO, p, "ns_per_thread", None) {
                reference_lines.push((format!("tokio / {TOKIO_TARGET}"), t / TOKIO_TARGET));
            }
            if let Some(s) = value(rows, STD, p, "ns_per_thread", None) {
                reference_lines.push((format!("std-thread / {STD_TARGET}"), s / STD_TARGET));
            }
            Panel::Bar(BarPanel {
                title: format!(
                    "{p} processor{} / worker{}",
                    if p == 1 { "" } else { "s" },
                    if p == 1 { "" } else { "s" }
                ),
                y_label: "ns per null thread (log)".into(),
                y_scale: Scale::Log,
                bars,
                reference_lines,
            })
        })
        .collect();
    figure(
        "peer-threads: create + start + finish one null thread (ALL89 Table III chain)",
        m,
        panels,
    )
}

fn assess(rows: &[Row], m: &Machine) -> crate::harness::Assessment {
    crate::harness::legacy(assess_old(rows, m))
}

fn assess_old(rows: &[Row], m: &Machine) -> Section {
    let cores = m.cores() as u32;
    let points = measured_points(rows);
    let get = |s: &str, p: u32| value(rows, s, p, "ns_per_thread", None);
    let param = |s: &str, p: u32, k: &str| {
        rows.iter()
            .find(|r| r.series == s && r.threads == p && r.metric == "ns_per_thread")
            .and_then(|r| r.get_param(k).map(str::to_string))
    };
    let mut header = vec!["series".to_string()];
    for p in &points {
        header.push(format!("ns/thread, P={p}"));
        header.push(format!("vs best, P={p}"));
    }
    let mut table = Table::new(&header);
    for s in NAMES.iter().chain(PEERS.iter()) {
        let mut cells = vec![format!("`{s}`")];
        for &p in &points {
            let best = best_strategy(rows, p).map(|b| b.1);
            let v = get(s, p);
            let partial = if param(s, p, "completed").as_deref() == Some("false") {
                format!(
                    " ({} threads in budget)",
                    param(s, p, "threads_run").unwrap_or_default()
                )
            } else {
                String::new()
            };
            cells.push(v.map_or("not run".into(), |x| format!("{}{partial}", ns(x))));
            cells.push(match (v, best) {
                (Some(a), Some(b)) => ratio(a / b),
                _ => "n/a".into(),
            });
        }
        table.push(&cells);
    }
    // The targets at P = cores (the configuration).
    let main_p = if points.contains(&cores) {
        cores
    } else {
        points.last().copied().unwrap_or(cores)
    };
    let best = best_strategy(rows, main_p);
    let tokio_r = best.zip(get(TOKIO, main_p)).map(|((_, b), t)| t / b);
    let std_r = best.zip(get(STD, main_p)).map(|((_, b), s)| s / b);
    let may_r = best.zip(get(MAY, main_p)).map(|((_, b), s)| s / b);
    let tokio_ok = tokio_r.map(|r| r >= TOKIO_TARGET);
    let std_ok = std_r.map(|r| r >= STD_TARGET);
    let met = [tokio_ok, std_ok]
        .iter()
        .filter(|x| **x == Some(true))
        .count();
    let known = [tokio_ok, std_ok].iter().filter(|x| x.is_some()).count();
    let verdict = if known < 2 {
        Verdict::NotMeasurable
    } else if met == 2 {
        Verdict::Holds
    } else if met == 0 {
        Verdict::Differs
    } else {
        Verdict::Partial
    };
    let word = |ok: Option<bool>| match ok {
        Some(true) => "met",
        Some(false) => "missed",
        None => "not measured",
    };
    let mut measured = format!(
        "At P = {main_p} (processors = workers = chains), the best strategy is {}. tokio / best = {} \
         (target >= {TOKIO_TARGET}x: {}); std-thread / best = {} (target >= {STD_TARGET}x: {}); \
         may / best = {}.",
        best.map_or("n/a".into(), |(n, x)| format!("`{n}` at {}", ns(x))),
        tokio_r.map_or("n/a".into(), ratio),
        word(tokio_ok),
        std_r.map_or("n/a".into(), ratio),
        word(std_ok),
        may_r.map_or("n/a".into(), ratio),
    );
    for &p in points.iter().filter(|&&p| p != main_p) {
        if let Some((n, b)) = best_strategy(rows, p) {
            measured.push_str(&format!(
                " At P = {p}: best `{n}` {}, tokio / best = {}, std-thread / best = {}{}.",
                ns(b),
                get(TOKIO, p).map_or("n/a".into(), |t| ratio(t / b)),
                get(STD, p).map_or("n/a".into(), |s| ratio(s / b)),
                get(MAY, p).map_or(" (may not run at this P)".into(), |s| format!(
                    ", may / best = {}",
                    ratio(s / b)
                )),
            ));
        }
    }
    if let Some(t) = param(STD, main_p, "threads_run") {
        measured.push_str(&format!(
            " std-thread ran {t} of {} threads within its {} ms budget (completed = {}); its rate is over \
             those threads, not extrapolated.",
            param(STD, main_p, "total").unwrap_or_default(),
            param(STD, main_p, "budget_ms").unwrap_or_default(),
            param(STD, main_p, "completed").unwrap_or_default(),
        ));
    }
    let may_workers = rows
        .iter()
        .find(|r| r.series == MAY)
        .and_then(|r| r.get_param("workers").map(str::to_string));
    let why = format!(
        "The ratios are taken within one run (median of interleaved repeats), so they do not depend on this \
         machine's absolute speed. A symmetry-threads null thread is a control block and a pooled stack \
         taken from free lists and a context switch; a tokio task is a heap-allocated future pushed on a \
         work-stealing queue (no stack, no switch, but an allocation and a reference-counted header per \
         task); may's coroutine is stackful like ours; an OS thread pays clone(2), a kernel stack, the \
         scheduler and the exit path. may's scheduler is configured once per process: it ran with {} \
         worker(s) and is reported only at that P (it cannot be measured at another worker count in the \
         same process). With {cores} cores the P = {cores} point is the largest without oversubscription.",
        may_workers.unwrap_or_else(|| "no".into())
    );
    Section {
        id: EXPERIMENT.id.into(),
        title: EXPERIMENT.title.into(),
        source: EXPERIMENT.source.into(),
        claim: format!(
            "Targets (issue): on the Table III null-thread chain with processors = workers = cores, the best \
             strategy is at least {TOKIO_TARGET}x cheaper per thread than tokio's spawn of a null task, and at \
             least {STD_TARGET}x cheaper than std::thread. ALL89 §III-F puts its threads \"only an order of \
             magnitude more expensive than a procedure call, and 500 times less expensive than normal DYNIX \
             processes\"."
        ),
        measured,
        verdict,
        why,
        table: Some(table),
        svg: Some(format!("{}.svg", EXPERIMENT.id)),
        provenance: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(tokio: f64, std: f64) -> Vec<Row> {
        let mut v: Vec<Row> = NAMES
            .iter()
            .enumerate()
            .map(|(i, n)| {
                Row::new(
                    EXPERIMENT.id,
                    n,
                    2,
                    false,
                    "ns_per_thread",
                    100.0 + i as f64,
                    "ns",
                )
                .param("completed", true)
            })
            .collect();
        for (s, x) in [(TOKIO, tokio), (STD, std), (MAY, 1000.0)] {
            v.push(
                Row::new(EXPERIMENT.id, s, 2, false, "ns_per_thread", x, "ns")
                    .param("completed", s != STD)
                    .param("threads_run", 10)
                    .param("total", TOTAL)
                    .param("workers", 2),
            );
        }
        v
    }

    #[test]
    fn verdict_follows_the_targets() {
        let m = Machine {
            logical_cpus: 2,
            ..Machine::detect(true)
        };
        assert_eq!(
            assess_old(&rows(600.0, 20_000.0), &m).verdict,
            Verdict::Holds
        );
        assert_eq!(
            assess_old(&rows(300.0, 20_000.0), &m).verdict,
            Verdict::Partial
        );
        assert_eq!(
            assess_old(&rows(300.0, 2_000.0), &m).verdict,
            Verdict::Differs
        );
        assert_eq!(draw(&rows(300.0, 2_000.0), &m).panels.len(), 1);
    }
}
