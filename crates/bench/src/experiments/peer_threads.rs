//! `peer-threads` — the ALL89 Table III null-thread chain (create, start and
//! finish a thread that does nothing but create the next one) on every
//! symmetry-threads strategy and on the modern peers in one run:
//!
//! - the five strategies of [`crate::registry::threads::NAMES`], P
//!   processors, as the crate ships them (their default [`NewestFirst`]
//!   ready pools, which keep a new thread on its creator's queue in
//!   `local-readyq`; `tm-null-threads` measures ALL89's FIFO pools and
//!   random placement);
//!
//! [`NewestFirst`]: symmetry_threads::NewestFirst
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
//! of one null thread), the median of runs interleaved across series so
//! drift hits every series alike: [`Ctx::judged_rounds`] at the points the
//! rules judge (P = 1 and all cores), [`Ctx::repeats`] at others. In `--quick`, a peer
//! whose million threads would take over 2 s (by a 20,000-thread pilot,
//! e.g. may) runs as many as fit in about 1 s (`total` says how many).
//! For each peer, `ratio_to_best` = its `ns_per_thread` / the best
//! strategy's at the same P (parameter `best`). Every row records the
//! spread of its repeats (`lo`, `hi`, `repeats`; for `ratio_to_best` the
//! quotient of the two points' spreads). For the peers that ran in the
//! strategies' rounds (tokio, may), `vs_best_paired` is the median of the
//! per-round quotients over the best strategy, so a drift of the machine
//! between rounds cancels; the rules judge it where it is recorded.

use crate::harness::prelude::*;
use crate::kernels::threads::null_chain;
use crate::peers::threads::{
    self as peers_threads, ChainOut, may_chain, std_thread_chain, tokio_chain,
};
use crate::registry::threads::{NAMES, chain_cfg, ends};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "peer-threads",
    title: "Null thread create+start+finish: every strategy vs tokio, may, std::thread",
    source: "modern peers (ALL89 Table III workload)",
    schedule: Schedule::LAST,
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// The project's targets for the Table III chain with processors = workers
/// = chains = all cores (the largest P without oversubscription), set from
/// ALL89's own comparison of its threads with the alternatives of its day.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "cheaper-than-tokio",
        paper: "Target: the best strategy creates, starts and finishes a null thread at least 5x cheaper \
                than tokio spawns a null task; ALL89 §III-F puts its threads \"only an order of magnitude \
                more expensive than a procedure call\".",
        rule: "at P = 1 and at P = all cores, tokio's ns per thread over the best strategy's is at least 5",
        needs: Needs::NONE,
        judge: |d, m| target(d, TOKIO, TOKIO_TARGET, &ends(m.cores() as u32)),
    },
    Claim {
        key: "cheaper-than-std-thread",
        paper: "Target: at least 100x cheaper than std::thread; ALL89 §III-F finds its threads \"500 times \
                less expensive than normal DYNIX processes\".",
        rule: "at P = all cores, std-thread's ns per thread over the best strategy's is at least 100",
        needs: Needs::NONE,
        judge: |d, m| target(d, STD, STD_TARGET, &[m.cores() as u32]),
    },
];

const TOTAL: u64 = 1_000_000;
/// Threads of the pilot run that sizes a slow peer's total in `--quick`.
const PILOT: u64 = 20_000;
const TOKIO: &str = "tokio";
const MAY: &str = "may";
const STD: &str = "std-thread";
const PEERS: [&str; 3] = [TOKIO, MAY, STD];
/// Metric: a peer's time per thread over the best strategy's, paired by
/// round (module docs).
const VS_BEST_PAIRED: &str = "vs_best_paired";

/// The targets: the best strategy this many times cheaper.
const TOKIO_TARGET: f64 = 5.0;
const STD_TARGET: f64 = 100.0;

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let points = ctx.ends();
    let budget = ctx.budget(3_000, 20_000);
    let std_budget = ctx.budget(500, 3_000);
    let std_repeats = |p: usize| ctx.repeats(p).min(ctx.rounds(3));
    // may runs at the worker count in force: the first configuration wins.
    let may_at = peers_threads::may_workers().unwrap_or(ctx.cores);
    let cheap: Vec<&str> = NAMES.iter().copied().chain([TOKIO, MAY]).collect();
    // The points the rules judge (P = 1 and all cores) take
    // `judged_rounds` rounds; others that `--threads` asks for, which are
    // only drawn, `Ctx::repeats`. With five rounds the median interval ran
    // from the fastest round to the slowest, and one disturbed round made
    // `cheaper-than-tokio` a tie in one of two back-to-back runs whose
    // medians agreed (notes of #12).
    let rounds = |p: usize| {
        if p == 1 || p == ctx.cores {
            ctx.judged_rounds()
        } else {
            ctx.repeats(p)
        }
    };
    let len: usize = points.iter().map(|&p| rounds(p) * cheap.len() + 1).sum();
    let bar = ctx.bar(EXPERIMENT.id, len);
    let mut rows = Vec::new();
    // Peers that ran in the strategies' rounds over the best strategy of
    // their point, paired by round.
    let mut paired = Vec::new();
    for &p in &points {
        let runs = rounds(p);
        // --quick: a slow peer, whose million threads would take over 2 s
        // by a 20,000-thread pilot, runs as many as fit in about 1 s
        // instead; the total is recorded.
        let sized = |pilot: ChainOut| {
            let ns = pilot.ns_per_thread();
            if ctx.quick && ns.is_finite() && ns * TOTAL as f64 > 2e9 {
                ((1e9 / ns) as u64 / 10_000 * 10_000).clamp(PILOT, TOTAL)
            } else {
                TOTAL
            }
        };
        let tokio_total = sized(tokio_chain(p, p, PILOT, budget));
        let may_total = if p == may_at {
            sized(may_chain(p, p, PILOT, budget))
        } else {
            TOTAL
        };
        let total_of = |name: &str| match name {
            TOKIO => tokio_total,
            MAY => may_total,
            _ => TOTAL,
        };
        let mut samples: Vec<Vec<ChainOut>> = vec![Vec::new(); cheap.len()];
        for _ in 0..runs {
            for (i, name) in cheap.iter().enumerate() {
                bar.set_message(format!("{name} x{p}"));
                let out: Option<ChainOut> = match *name {
                    TOKIO => Some(tokio_chain(p, p, tokio_total, budget)),
                    MAY if p == may_at => Some(may_chain(p, p, may_total, budget)),
                    MAY => None,
                    _ => {
                        let cfg = chain_cfg(ctx, p, TOTAL, 0, budget);
                        crate::with_strategy_newest!(*name, null_chain(&cfg)).map(ChainOut::from)
                    }
                };
                samples[i].extend(out);
                bar.inc(1);
            }
        }
        // The best strategy of this point by median; a peer measured in the
        // same rounds is paired with it round by round (below).
        let ns: Vec<Vec<f64>> = samples
            .iter()
            .map(|s| s.iter().map(ChainOut::ns_per_thread).collect())
            .collect();
        // By the value its row records (the upper middle repeat, as
        // `median_run` keeps it), so that the rule's best is this one.
        let upper_middle = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied()
        };
        let best = cheap
            .iter()
            .enumerate()
            .filter(|(_, n)| NAMES.contains(n))
            .filter_map(|(i, _)| Some((i, upper_middle(&ns[i])?)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i);
        for (i, (name, s)) in cheap.iter().zip(samples).enumerate() {
            if s.is_empty() {
                continue;
            }
            // The samples are already measured: the median of them.
            let (out, spread) = median_of(s, ChainOut::ns_per_thread);
            let workers = if *name == MAY {
                peers_threads::may_workers().unwrap_or(p)
            } else {
                p
            };
            let r = row(
                ctx,
                name,
                workers,
                p,
                total_of(name),
                &out,
                budget.as_millis(),
                &spread,
            );
            if let Some(b) = best.filter(|_| PEERS.contains(name))
                && let Some(q) = Spread::paired_ratio(&ns[i], &ns[b])
            {
                paired.push(
                    Row {
                        metric: VS_BEST_PAIRED.into(),
                        value: q.median,
                        unit: "x".into(),
                        ..r.clone()
                    }
                    .param("best", cheap[b])
                    .with_spread(&q),
                );
            }
            rows.push(r);
        }
        bar.set_message(format!("{STD} x{p}"));
        let n = std_repeats(p);
        let (out, spread) = median_run(
            n,
            || std_thread_chain(p, TOTAL, std_budget),
            ChainOut::ns_per_thread,
        );
        rows.push(row(
            ctx,
            STD,
            p,
            p,
            TOTAL,
            &out,
            std_budget.as_millis(),
            &spread,
        ));
        bar.inc(1);
    }
    bar.finish_and_clear();
    // Ratios of each peer to the best strategy at the same P.
    let mut ratios = Vec::new();
    for &p in &points {
        let Some(best) = best_strategy(&rows, p as u32) else {
            continue;
        };
        let best_spread = spread_of(best);
        for r in rows
            .iter()
            .filter(|r| r.threads == p as u32 && PEERS.contains(&r.series.as_str()))
        {
            ratios.push(
                Row {
                    metric: "ratio_to_best".into(),
                    value: r.value / best.value,
                    unit: "x".into(),
                    ..r.clone()
                }
                .param("best", &best.series)
                .with_spread(&spread_of(r).ratio(best_spread)),
            );
        }
    }
    rows.extend(paired);
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
    out: &ChainOut,
    budget_ms: u128,
    spread: &Spread,
) -> Row {
    Row::new(
        EXPERIMENT.id,
        series,
        threads as u32,
        ctx.over(threads),
        "ns_per_thread",
        out.ns_per_thread(),
        "ns",
    )
    .param("workers", threads)
    .param("chains", chains)
    .param("total", total)
    .param("threads_run", out.threads)
    .param("completed", out.completed)
    .param("repeats", spread.n)
    .param("budget_ms", budget_ms)
    .with_spread(spread)
}

/// The `ns_per_thread` row of the strategy with the lowest value at
/// `threads` (oversubscribed points included: the run's own P).
fn best_strategy(rows: &[Row], threads: u32) -> Option<&Row> {
    rows.iter()
        .filter(|r| {
            r.metric == "ns_per_thread"
                && r.threads == threads
                && NAMES.contains(&r.series.as_str())
        })
        .min_by(|a, b| a.value.total_cmp(&b.value))
}

/// The processor counts the chain was measured at, ascending.
fn measured_points(d: &Data<'_>) -> Vec<u32> {
    d.counts(Sel::metric(NS))
}

/// Time per thread.
const NS: &str = "ns_per_thread";

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let plural = |p: u32| if p == 1 { "" } else { "s" };
    let panels = bar_panels(
        rows,
        "ns_per_thread",
        "ns per null thread (log)",
        |p| format!("{p} processor{} / worker{}", plural(p), plural(p)),
        |r| {
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
        },
        |p| {
            let d = Data::new(rows);
            let line = |s, target| {
                let v = d.value(Sel::point(NS, s, p))?;
                Some((format!("{s} / {target}"), v / target))
            };
            [line(TOKIO, TOKIO_TARGET), line(STD, STD_TARGET)]
                .into_iter()
                .flatten()
                .collect()
        },
    );
    figure(
        "peer-threads: create + start + finish one null thread (ALL89 Table III chain)",
        m,
        panels,
    )
}

/// The `ns_per_thread` estimate of `series` at `p`, if the run has the
/// point without oversubscription.
fn point(d: &Data<'_>, series: &str, p: u32) -> Option<Estimate> {
    d.at(Sel::point(NS, series, p))
}

/// The best strategy at `p` (lowest ns per thread) as an estimate.
fn best_at(d: &Data<'_>, p: u32) -> Option<(&'static str, Estimate)> {
    NAMES
        .iter()
        .filter_map(|n| point(d, n, p).map(|e| (*n, e)))
        .min_by(|a, b| a.1.value.total_cmp(&b.1.value))
}

/// The finding of "`peer` / best >= `target`" at `p`.
/// `peer` over the best strategy at least `target` at every P of `ps`.
fn target(d: &Data<'_>, peer: &str, target: f64, ps: &[u32]) -> Finding {
    let mut outcomes = Vec::new();
    let mut evidence = Vec::new();
    for &p in ps {
        match (best_at(d, p), point(d, peer, p)) {
            (Some((best, b)), Some(x)) => {
                // The recorded ratio (paired by round where the peer ran in
                // the strategies' rounds), else the quotient of the points.
                let (r, how) = match d
                    .select(Sel::metric(VS_BEST_PAIRED).series(peer).threads(p))
                    .find(|r| !r.oversubscribed && r.get_param("best") == Some(best))
                {
                    // Over `OWN_MIN` rounds or more, the paired ratio's
                    // own median interval (`estimate_own`); fewer (a CSV
                    // of five rounds) are widened by the pooled noise.
                    Some(row) => (d.estimate_own_of(row), ", paired by round"),
                    None => (x.ratio(b), ""),
                };
                outcomes.push(rule::at_least(r, target));
                evidence.push(format!(
                    "P = {p}: `{peer}` {}, best strategy `{best}` {}: ratio {}{how}",
                    ns(x.value),
                    ns(b.value),
                    r.show(2)
                ));
            }
            _ => {
                return Finding::missing(&format!(
                    "`{peer}` and a strategy at P = {p} without oversubscription"
                ));
            }
        }
    }
    Finding::new(
        Outcome::all(outcomes),
        format!("{} (target {target:.0})", evidence.join("; ")),
    )
}

fn assess(rows: &[Row], m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let cores = m.cores() as u32;
    Assessment {
        measured: measured(&d),
        notes: notes(&d, cores),
        table: Some(table(&d)),
    }
}

fn table(d: &Data<'_>) -> Table {
    let rows = d.rows();
    let points = measured_points(d);
    let param = |s: &str, p: u32, k: &str| {
        let r = d.row(Sel::point(NS, s, p))?;
        r.get_param(k).map(str::to_string)
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
            let best = best_strategy(rows, p).map(|b| b.value);
            let v = d.value(Sel::point(NS, s, p));
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
    table
}

fn measured(d: &Data<'_>) -> String {
    let rows = d.rows();
    let mut out = Vec::new();
    for p in measured_points(d) {
        let Some(best) = best_strategy(rows, p) else {
            continue;
        };
        let b = best.value;
        let vs = |s: &str| d.value(Sel::point(NS, s, p)).map(|x| ratio(x / b));
        out.push(format!(
            "At P = {p} (processors = workers = chains): best strategy `{}` {}, tokio / best = {}, \
             std-thread / best = {}, may / best = {}.",
            best.series,
            ns(b),
            vs(TOKIO).unwrap_or_else(|| "n/a".into()),
            vs(STD).unwrap_or_else(|| "n/a".into()),
            vs(MAY).unwrap_or_else(|| "not run at this P".into()),
        ));
        if let Some(r) = d.row(Sel::point(NS, STD, p))
            && r.get_param("completed") == Some("false")
        {
            out.push(format!(
                "std-thread ran {} of {} threads within its {} ms budget; its rate is over those threads, not \
                 extrapolated.",
                r.get_param("threads_run").unwrap_or("?"),
                r.get_param("total").unwrap_or("?"),
                r.get_param("budget_ms").unwrap_or("?"),
            ));
        }
    }
    if out.is_empty() {
        "No strategy was measured.".into()
    } else {
        out.join(" ")
    }
}

fn notes(d: &Data<'_>, cores: u32) -> String {
    let may_workers = d
        .row(Sel::metric("ns_per_thread").series(MAY))
        .and_then(|r| r.get_param("workers").map(str::to_string));
    format!(
        "The ratios are taken within one run (median of interleaved repeats), so they do not depend on the \
         machine's absolute speed. A symmetry-threads null thread is a control block and a pooled stack \
         taken from free lists and a context switch; a tokio task is a heap-allocated future pushed on a \
         work-stealing queue (no stack, no switch, but an allocation and a reference-counted header per \
         task); may's coroutine is stackful like ours; an OS thread pays clone(2), a kernel stack, the \
         scheduler and the exit path. may's scheduler is configured once per process: it ran with {} \
         worker(s) and is reported only at that P. P = {cores} is the largest point without \
         oversubscription.",
        may_workers.unwrap_or_else(|| "no".into())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::testing::{self, Rows, big_metal, small_vm, verdict};
    use crate::output::report::Verdict;

    /// Rows at P = 1 and at P = all cores of `m`: the strategies at
    /// 100..104 ns, tokio and std-thread as given, may at 1000 ns; 2%
    /// repeat spread.
    fn rows(m: &Machine, tokio: f64, std: f64) -> Vec<Row> {
        [1, m.cores() as u32]
            .into_iter()
            .flat_map(|p| rows_at(m, p, tokio, std))
            .collect()
    }

    fn rows_at(m: &Machine, p: u32, tokio: f64, std: f64) -> Vec<Row> {
        let at = Rows::new(&EXPERIMENT, m);
        let mut v: Vec<Row> = (NAMES.iter().enumerate())
            .map(|(i, n)| {
                at.row(n, p, NS, 100.0 + i as f64)
                    .param("completed", "true")
            })
            .collect();
        for (s, x) in [(TOKIO, tokio), (STD, std), (MAY, 1000.0)] {
            let completed = if s == STD { "false" } else { "true" };
            let r = at.row(s, p, NS, x).param("completed", completed);
            let r = r.param("threads_run", "10").param("total", "1000000");
            v.push(r.param("workers", p));
        }
        v
    }

    #[test]
    fn verdict_follows_the_targets() {
        for m in [small_vm(), big_metal()] {
            let verdict = |t: f64, s: f64| verdict(&EXPERIMENT, &rows(&m, t, s), &m);
            assert_eq!(verdict(600.0, 20_000.0), Verdict::Holds);
            assert_eq!(verdict(300.0, 20_000.0), Verdict::Partial);
            assert_eq!(verdict(300.0, 2_000.0), Verdict::Differs);
            assert_eq!(verdict(500.0, 10_000.0), Verdict::Indistinct);
            // One panel per measured P (1 and all cores).
            assert_eq!(draw(&rows(&m, 300.0, 2_000.0), &m).panels.len(), 2);
        }
        // Data from a small machine judged for a big one: no P = all cores.
        let small = rows(&small_vm(), 600.0, 20_000.0);
        assert_eq!(
            verdict(&EXPERIMENT, &small, &big_metal()),
            Verdict::NotMeasurable
        );
    }

    #[test]
    fn a_paired_ratio_decides_where_recorded() {
        let m = small_vm();
        // tokio at exactly 5x the best strategy's median: a tie by the
        // quotient of the two points ...
        let mut rows = rows(&m, 500.0, 20_000.0);
        let ps = ends(m.cores() as u32);
        let judged = |rows: &[Row]| target(&Data::new(rows), TOKIO, TOKIO_TARGET, &ps).outcome;
        assert_eq!(judged(&rows), Outcome::Tie);
        // ... decided by the per-round quotients when they were recorded.
        let at = Rows::new(&EXPERIMENT, &m);
        for &p in &ps {
            rows.push(
                at.row(TOKIO, p, VS_BEST_PAIRED, 5.5)
                    .param("best", NAMES[0]),
            );
        }
        assert_eq!(judged(&rows), Outcome::Holds);
    }

    #[test]
    fn a_paired_ratio_over_enough_rounds_is_judged_on_its_own_interval() {
        let m = small_vm();
        let ps = ends(m.cores() as u32);
        let paired = |series: &str, p: u32, value: f64, rel: f64, n: usize| {
            let r = Rows::new(&EXPERIMENT, &m)
                .rel(rel)
                .row(series, p, VS_BEST_PAIRED, value);
            // Rows records 3 repeats; these are `n`.
            r.param("best", NAMES[0]).param("repeats", n)
        };
        // tokio's per-round quotients 5.2 within 1%; may's, which widen the
        // pooled noise of the metric, within 60%.
        let judged = |n: usize| {
            let mut rows = rows(&m, 520.0, 20_000.0);
            for &p in &ps {
                rows.push(paired(TOKIO, p, 5.2, 0.01, n));
                rows.push(paired(MAY, p, 10.0, 0.6, 3));
            }
            target(&Data::new(&rows), TOKIO, TOKIO_TARGET, &ps).outcome
        };
        assert_eq!(judged(crate::harness::OWN_MIN), Outcome::Holds);
        assert_eq!(judged(3), Outcome::Tie);
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, 600.0, 2_000.0));
    }
}
