//! `peer-skynet` — the skynet fan-out on every symmetry-threads strategy
//! and on the modern peers in one run. The root spawns 10 children, each
//! spawns 10, down to `leaves` leaves (1,000,000; 100,000 in `--quick`,
//! recorded as the `leaves` parameter); every node joins its children and
//! returns their sum (499,999,500,000 for a million leaves).
//!
//! - the five strategies of [`crate::registry::threads::NAMES`], in their
//!   default order (`order` parameter), P processors, every node a user
//!   thread with a join handle ([`crate::kernels::fanout::skynet`]);
//! - `tokio`: every node a `tokio::spawn`ed task awaiting its children's
//!   join handles, P workers;
//! - `go`: goroutines and channels, `GOMAXPROCS` = P, a small Go program
//!   compiled from the repository once per run into a private scratch
//!   directory that is removed afterwards; where no `go` toolchain is
//!   installed its row says so (`status`) and nothing is measured.
//!
//! Metrics: `ms` (median of the repeats, with their spread), `completed`
//! (1 if the sum was right), `peak_rss_mb` (peak resident memory above the
//! start of the run, the median run's). P = 1 and P = all cores.

use crate::harness::prelude::*;
use crate::kernels::fanout::{ScaleOut, skynet};
use crate::peers::fanout::{GoError, GoSkynet, tokio_skynet};
use crate::registry::threads::NAMES;

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "peer-skynet",
    title: "skynet fan-out (1M leaves): every strategy vs tokio and Go",
    source: "modern peers (the skynet benchmark)",
    schedule: Schedule::LAST,
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// The project's targets for fan-out programs.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "completes",
        paper: "Target: a fan-out of a million user threads, each joining its children, completes on every \
                strategy (ALL89's runtime binds stacks only at start, so unstarted threads cost a control \
                block).",
        rule: "at the largest size run, every strategy's `completed` is 1 at every P",
        needs: Needs::NONE,
        judge: completes,
    },
    Claim {
        key: "within-tokio",
        paper: "Target: the best built-in strategy runs skynet in at most tokio's time.",
        rule: "at P = 1 and at P = all cores, the best strategy's `ms` over tokio's is at most 1",
        needs: Needs::NONE,
        judge: within_tokio,
    },
];

const TOKIO: &str = "tokio";
const GO: &str = "go";
/// The orders the built-in strategies run in: ALL89's FIFO ready pools,
/// and a slot for the newest created thread in front of them.
const ORDERS: [&str; 2] = ["newest", "fifo"];
/// The order of the crate's default strategy types.
const DEFAULT_ORDER: &str = "newest";
/// The `order` of a peer's rows.
const PEER: &str = "-";

fn leaves(ctx: &Ctx) -> u64 {
    if ctx.quick { 100_000 } else { 1_000_000 }
}

fn rows_of(
    series: &str,
    order: &str,
    p: usize,
    ctx: &Ctx,
    leaves: u64,
    out: &ScaleOut,
    s: &crate::harness::Spread,
) -> Vec<Row> {
    let row = |metric: &str, v: f64, unit: &str| {
        Row::new(
            EXPERIMENT.id,
            series,
            p as u32,
            ctx.over(p),
            metric,
            v,
            unit,
        )
        .param("leaves", leaves)
        .param("order", order)
    };
    vec![
        row("ms", out.elapsed.as_secs_f64() * 1e3, "ms").with_spread(s),
        row("completed", f64::from(u8::from(out.completed)), "bool"),
        row("peak_rss_mb", out.peak_rss_bytes as f64 / 1e6, "MB"),
    ]
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let leaves = leaves(ctx);
    let ps = ctx.ends();
    let bar = ctx.bar(EXPERIMENT.id, ps.len() * (ORDERS.len() * NAMES.len() + 2));
    let mut rows = Vec::new();
    let ms = |o: &ScaleOut| o.elapsed.as_secs_f64() * 1e3;
    // Built once; its directory goes when `go` is dropped.
    let go = GoSkynet::build();
    for &p in &ps {
        let repeats = ctx.repeats(p).min(ctx.rounds(3));
        for name in NAMES {
            for order in ORDERS {
                bar.set_message(format!("{name} ({order}) x{p}"));
                let one = || match order {
                    "fifo" => crate::with_strategy!(*name, skynet(p, leaves)),
                    _ => crate::with_strategy_newest!(*name, skynet(p, leaves)),
                };
                let (out, s) = median_run(repeats, || one().expect("registry name"), ms);
                rows.extend(rows_of(name, order, p, ctx, leaves, &out, &s));
                bar.inc(1);
            }
        }
        bar.set_message(format!("tokio x{p}"));
        let (out, s) = median_run(repeats, || tokio_skynet(p, leaves), ms);
        rows.extend(rows_of(TOKIO, PEER, p, ctx, leaves, &out, &s));
        bar.inc(1);
        bar.set_message(format!("go x{p}"));
        // The repeats stop at the first error.
        let runs: Result<Vec<ScaleOut>, GoError> = (0..repeats)
            .map(|_| go.as_ref().map_err(Clone::clone)?.run(p, leaves))
            .collect();
        match runs {
            Ok(runs) => {
                let (out, s) = median_of(runs, ms);
                rows.extend(rows_of(GO, PEER, p, ctx, leaves, &out, &s));
            }
            Err(e) => {
                let status = match e {
                    GoError::NotInstalled => "not installed".to_string(),
                    GoError::Failed(m) => format!("failed: {m}"),
                };
                rows.push(
                    Row::new(
                        EXPERIMENT.id,
                        GO,
                        p as u32,
                        ctx.over(p),
                        "completed",
                        0.0,
                        "bool",
                    )
                    .param("leaves", leaves)
                    .param("order", PEER)
                    .param("status", status),
                );
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// The largest `leaves` in the data, and the processor counts run.
fn extent(d: &Data<'_>) -> Option<(String, Vec<u32>)> {
    let largest = d.param_values(Sel::metric("completed"), "leaves").pop()?;
    Some((largest, d.counts(Sel::metric("completed"))))
}

/// What a rule finds where the data holds no skynet run.
fn no_run() -> Finding {
    Finding::missing("a skynet run (a `completed` row with its `leaves`)")
}

/// The estimate of `metric` for `series` in `order` at `p` processors,
/// `leaves` leaves: [`Data::estimate`], not [`Data::at`], as `completes`
/// reads every P run, oversubscribed or not, and `within-tokio` only
/// P = 1 and all cores, which are never oversubscribed where they ran; its
/// `ms` is the median of at most three repeats, too few for the row's own
/// interval ([`OWN_MIN`]), so it is widened by the pooled noise.
fn point(
    d: &Data<'_>,
    leaves: &str,
    metric: &str,
    series: &str,
    p: u32,
    order: &str,
) -> Option<Estimate> {
    d.estimate(Sel::point(metric, series, p).params(&[("leaves", leaves), ("order", order)]))
}

/// The fastest strategy in `order` at `p` processors, `leaves` leaves,
/// among those that completed, with its `ms`.
fn best_at(d: &Data<'_>, leaves: &str, p: u32, order: &str) -> Option<(&'static str, Estimate)> {
    NAMES
        .iter()
        .filter(|n| point(d, leaves, "completed", n, p, order).is_some_and(|c| c.value >= 1.0))
        .filter_map(|n| Some((*n, point(d, leaves, "ms", n, p, order)?)))
        .min_by(|a, b| a.1.value.total_cmp(&b.1.value))
}

/// The processor counts of `ps` that `within-tokio` judges: 1 and all
/// cores of `m`.
fn judged_ps(ps: &[u32], m: &Machine) -> Vec<u32> {
    let cores = m.cores() as u32;
    ps.iter()
        .copied()
        .filter(|&p| p == 1 || p == cores)
        .collect()
}

/// `completes`: at the largest size, every strategy, every order run,
/// every P completed with the right sum.
fn completes(d: &Data<'_>, _m: &Machine) -> Finding {
    let Some((l, ps)) = extent(d) else {
        return no_run();
    };
    let mut failed = Vec::new();
    let mut seen = 0;
    for name in NAMES {
        for order in ORDERS {
            for &p in &ps {
                if let Some(v) = point(d, &l, "completed", name, p, order) {
                    seen += 1;
                    if v.value < 1.0 {
                        failed.push(format!("`{name}` ({order}) at P = {p}"));
                    }
                }
            }
        }
    }
    if seen == 0 {
        Finding::missing("a strategy's skynet run")
    } else if failed.is_empty() {
        Finding::new(
            Outcome::Holds,
            format!("{seen} strategy runs of {l} leaves, all with the right sum"),
        )
    } else {
        Finding::new(
            Outcome::Fails,
            format!("not completed: {}", join(failed, ", ")),
        )
    }
}

/// `within-tokio`: in the default order, at P = 1 and at P = all cores,
/// the best strategy's `ms` over tokio's is at most 1.
fn within_tokio(d: &Data<'_>, m: &Machine) -> Finding {
    let Some((l, ps)) = extent(d) else {
        return no_run();
    };
    let mut outcomes = Vec::new();
    let mut ev = Vec::new();
    for p in judged_ps(&ps, m) {
        let tokio = point(d, &l, "ms", TOKIO, p, PEER);
        if let (Some((n, b)), Some(t)) = (best_at(d, &l, p, DEFAULT_ORDER), tokio) {
            let r = b.ratio(t);
            outcomes.push(rule::at_most(r, 1.0));
            ev.push(format!(
                "P = {p}: best `{n}` {} ms, `tokio` {} ms: {}",
                b.show(1),
                t.show(1),
                r.show(2)
            ));
        }
    }
    if outcomes.is_empty() {
        Finding::missing("tokio and a completed strategy at P = 1 or all cores")
    } else {
        Finding::new(Outcome::all(outcomes), ev.join("; "))
    }
}

fn assess(rows: &[Row], m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let Some((l, ps)) = extent(&d) else {
        return Assessment {
            measured: "No skynet run in the data.".into(),
            ..Assessment::default()
        };
    };
    let pick =
        |metric: &str, series: &str, p: u32, order: &str| point(&d, &l, metric, series, p, order);
    let judged = judged_ps(&ps, m);
    // The table: ms and peak memory per series, order and P.
    let mut header = vec!["series".to_string()];
    for p in &ps {
        header.push(format!("P = {p}: ms"));
        header.push(format!("P = {p}: peak MB"));
    }
    let mut table = Table::new(&header);
    let lines: Vec<(&str, &'static str)> = NAMES
        .iter()
        .flat_map(|n| ORDERS.iter().map(move |o| (*n, *o)))
        .chain([(TOKIO, PEER), (GO, PEER)])
        .collect();
    for (s, order) in lines {
        let label = if order == PEER {
            s.to_string()
        } else {
            format!("{s} ({order})")
        };
        let mut row = vec![label];
        let mut any = false;
        for &p in &ps {
            let status = rows
                .iter()
                .find(|r| r.series == s && r.threads == p)
                .and_then(|r| r.get_param("status"));
            let ms = pick("ms", s, p, order);
            let done = pick("completed", s, p, order).is_some_and(|c| c.value >= 1.0);
            any |= status.is_some() || ms.is_some();
            row.push(match (status, ms) {
                (Some(st), _) => st.to_string(),
                (None, Some(e)) if done => format!("{:.1}", e.value),
                (None, Some(e)) => format!("{:.1} (wrong sum)", e.value),
                (None, None) => "n/a".into(),
            });
            row.push(na(pick("peak_rss_mb", s, p, order), |v| {
                format!("{:.0}", v.value)
            }));
        }
        if any {
            table.rows.push(row);
        }
    }
    let go: Vec<String> = judged
        .iter()
        .filter_map(|&p| {
            let g = pick("ms", GO, p, PEER)?;
            let (n, b) = best_at(&d, &l, p, DEFAULT_ORDER)?;
            Some(format!(
                "P = {p}: best strategy (`{n}`) / Go = {:.2}",
                b.value / g.value
            ))
        })
        .collect();
    let go_line = if go.is_empty() {
        let st = rows
            .iter()
            .find(|r| r.series == GO)
            .and_then(|r| r.get_param("status"))
            .unwrap_or("not run");
        format!("Go: {st}.")
    } else {
        format!("Go: {}.", go.join("; "))
    };
    let fifo: Vec<String> = judged
        .iter()
        .filter_map(|&p| {
            let (_, f) = best_at(&d, &l, p, "fifo")?;
            let (_, n) = best_at(&d, &l, p, DEFAULT_ORDER)?;
            Some(format!("P = {p}: {:.2}", f.value / n.value))
        })
        .collect();
    Assessment {
        measured: format!(
            "skynet with {l} leaves ({} nodes); built-in strategies in both orders, `{DEFAULT_ORDER}` \
             (the default, a slot for the newest created thread) and `fifo` (ALL89's). Best `fifo` time \
             over best `{DEFAULT_ORDER}`: {}. {go_line}",
            nodes(l.parse().unwrap_or(0)),
            if fifo.is_empty() {
                "n/a".into()
            } else {
                join(fifo, "; ")
            }
        ),
        notes: String::new(),
        table: Some(table),
    }
}

/// Nodes of a skynet tree with `leaves` leaves (a power of ten).
fn nodes(leaves: u64) -> u64 {
    let mut n = 0;
    let mut level = leaves;
    while level >= 1 {
        n += level;
        if level == 1 {
            break;
        }
        level /= 10;
    }
    n
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let panels = bar_panels(
        rows,
        "ms",
        "ms per skynet run (log)",
        |p| format!("{p} processor{}", if p == 1 { "" } else { "s" }),
        |r| {
            let group = if NAMES.contains(&r.series.as_str()) {
                "symmetry-threads"
            } else {
                "peer"
            };
            let label = match r.get_param("order") {
                Some(o) if o != PEER => format!("{} ({o})", r.series),
                _ => r.series.clone(),
            };
            Bar::new(&label, r.value, group)
        },
        |_| Vec::new(),
    );
    figure(
        "peer-skynet: skynet fan-out, every strategy vs tokio and Go",
        m,
        panels,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::testing::{self, Rows, big_metal, small_vm};
    use crate::output::report::Verdict;

    /// Rows for machine `m`: every strategy at `strategy_ms`, tokio at
    /// `tokio_ms`, at P = 1 and all cores; `done` for every completed.
    fn rows(m: &Machine, strategy_ms: f64, tokio_ms: f64, done: bool) -> Vec<Row> {
        let mut out = Vec::new();
        let at = Rows::new(&EXPERIMENT, m);
        for p in [1, m.cores() as u32] {
            let lines = NAMES
                .iter()
                .flat_map(|n| ORDERS.iter().map(move |o| (*n, *o, strategy_ms)))
                .chain([(TOKIO, PEER, tokio_ms)]);
            for (s, order, v) in lines {
                let r = |metric: &str, v: f64, rel: f64| {
                    let r = at.rel(rel).row(s, p, metric, v);
                    r.param("leaves", "1000000").param("order", order)
                };
                out.push(r("ms", v, 0.02));
                out.push(r("completed", if done { 1.0 } else { 0.0 }, 0.0));
                out.push(r("peak_rss_mb", 100.0, 0.0));
            }
            out.push(
                Row::new(EXPERIMENT.id, GO, p, false, "completed", 0.0, "bool")
                    .param("leaves", 1_000_000)
                    .param("order", PEER)
                    .param("status", "not installed"),
            );
        }
        out
    }

    #[test]
    fn verdicts_reach_every_case() {
        for m in [small_vm(), big_metal()] {
            let s = EXPERIMENT.section(&rows(&m, 300.0, 400.0, true), &m);
            assert_eq!(s.verdict, Verdict::Holds, "{}", s.measured);
            testing::assert_says(&s.measured, "Go: not installed");
            let s = EXPERIMENT.section(&rows(&m, 800.0, 400.0, false), &m);
            assert_eq!(s.verdict, Verdict::Differs, "{}", s.measured);
            let s = EXPERIMENT.section(&rows(&m, 800.0, 400.0, true), &m);
            assert_eq!(s.verdict, Verdict::Partial, "{}", s.measured);
            let s = EXPERIMENT.section(&rows(&m, 400.0, 401.0, true), &m);
            assert_eq!(
                s.verdict,
                Verdict::Holds,
                "a tie does not move it: {}",
                s.measured
            );
            let none = EXPERIMENT.section(&[], &m);
            assert_eq!(none.verdict, Verdict::NotMeasurable);
            testing::assert_says(&none.measured, "a skynet run (a `completed` row");
        }
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, 300.0, 400.0, true));
    }

    #[test]
    fn tree_sizes() {
        assert_eq!(nodes(1_000_000), 1_111_111);
        assert_eq!(nodes(100), 111);
    }
}
