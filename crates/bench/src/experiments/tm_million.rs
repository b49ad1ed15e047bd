//! `tm-million` — many user threads alive at once: `n` threads (10,000,
//! 100,000 and, outside `--quick`, 1,000,000) all blocked on one barrier,
//! then all released, for every strategy at P = 1 and P = all cores
//! ([`crate::kernels::fanout::blocked`]).
//!
//! Metrics: `ms` (spawn, block, release and finish of all `n`),
//! `completed` (1 if all `n` blocked and then finished within the
//! budget), `rss_bytes_per_thread` (peak resident memory above the start
//! of the run, per thread) and `kernel_mappings` (mappings the process
//! gained, read while all `n` wait). One run per point: the memory figures
//! are counts, not timings.

use std::time::Duration;

use crate::harness::prelude::*;
use crate::kernels::fanout::blocked;
use crate::registry::threads::NAMES;

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "tm-million",
    title: "A million blocked user threads: memory and kernel mappings per thread",
    source: "ALL89 §III (stacks bound at start, free lists) at scale",
    schedule: Schedule::LAST,
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// The project's targets for threads at scale.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "million-alive",
        paper: "Target: a million user threads blocked at once, on every strategy, on a machine of 24 GiB \
                (Go keeps a million blocked goroutines in a few GiB).",
        rule: "with 1,000,000 threads, every strategy's `completed` is 1 at every P",
        needs: Needs::NONE,
        judge: million_alive,
    },
    Claim {
        key: "small-blocked-thread",
        paper: "Target: a blocked user thread costs at most 8 KiB of resident memory beyond the runtime's \
                baseline.",
        rule: "at the largest `n` run, every strategy's `rss_bytes_per_thread` is at most 8192",
        needs: Needs::NONE,
        judge: small_blocked_thread,
    },
    Claim {
        key: "mappings-per-slab",
        paper: "Target: kernel mappings grow with stack slabs, not with threads (Linux caps a process at \
                `vm.max_map_count` mappings).",
        rule: "at the largest `n` run, every strategy gains at most one kernel mapping per 1,000 threads",
        needs: Needs::NONE,
        judge: mappings_per_slab,
    },
];

/// The thread counts of a run.
fn sizes(ctx: &Ctx) -> Vec<usize> {
    if ctx.quick {
        vec![10_000, 100_000]
    } else {
        vec![10_000, 100_000, 1_000_000]
    }
}

const MILLION: u32 = 1_000_000;

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let ps = ctx.ends();
    let sizes = sizes(ctx);
    let budget = Duration::from_secs(if ctx.quick { 60 } else { 300 });
    let bar = ctx.bar(EXPERIMENT.id, ps.len() * sizes.len() * NAMES.len());
    let mut rows = Vec::new();
    for &p in &ps {
        for &n in &sizes {
            for name in NAMES {
                bar.set_message(format!("{name} x{p} n={n}"));
                let o = crate::with_strategy!(*name, blocked(p, n, budget)).expect("registry name");
                let row = |metric: &str, v: f64, unit: &str| {
                    Row::new(EXPERIMENT.id, name, p as u32, ctx.over(p), metric, v, unit)
                        .param("n", n)
                };
                rows.push(row("ms", o.elapsed.as_secs_f64() * 1e3, "ms"));
                rows.push(row("completed", f64::from(u8::from(o.completed)), "bool"));
                rows.push(row(
                    "rss_bytes_per_thread",
                    o.peak_rss_bytes as f64 / n as f64,
                    "bytes",
                ));
                rows.push(row("kernel_mappings", o.mappings_added as f64, "mappings"));
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// The thread counts run, ascending.
fn ns_of(d: &Data<'_>) -> Vec<u32> {
    d.param_values(Sel::metric("completed"), "n")
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// The processor counts run.
fn procs(d: &Data<'_>) -> Vec<u32> {
    d.counts(Sel::metric("completed"))
}

/// Every (strategy, P) value of `metric` at `n`, judged by `ok`.
fn every(d: &Data<'_>, metric: &str, n: &str, ok: impl Fn(f64) -> bool) -> (usize, Vec<String>) {
    let np = [("n", n)];
    let mut seen = 0;
    let mut bad = Vec::new();
    for name in NAMES {
        for p in procs(d) {
            if let Some(v) = d.value(Sel::metric(metric).series(name).threads(p).params(&np)) {
                seen += 1;
                if !ok(v) {
                    bad.push(format!("`{name}` at P = {p}: {v:.0}"));
                }
            }
        }
    }
    (seen, bad)
}

/// The largest thread count run, if the data hold a blocked-threads run.
fn largest(d: &Data<'_>) -> Option<u32> {
    ns_of(d).last().copied()
}

/// What each claim finds when the data hold no blocked-threads run.
fn no_run() -> Finding {
    Finding::missing("a run of blocked threads (a `completed` row with its `n`)")
}

/// `million-alive`: at 1,000,000 threads every run completed.
fn million_alive(d: &Data<'_>, _m: &Machine) -> Finding {
    let Some(largest) = largest(d) else {
        return no_run();
    };
    let l = largest.to_string();
    if largest < MILLION {
        Finding::not_measurable(format!(
            "the run went up to {largest} threads (a --quick run stops at 100,000)"
        ))
    } else {
        match every(d, "completed", &l, |v| v >= 1.0) {
            (0, _) => Finding::missing("a strategy's million-thread run"),
            (k, bad) if bad.is_empty() => Finding::new(
                Outcome::Holds,
                format!("{k} runs of {largest} blocked threads completed"),
            ),
            (_, bad) => Finding::new(
                Outcome::Fails,
                format!("not completed: {}", join(bad, ", ")),
            ),
        }
    }
}

/// `small-blocked-thread`: at the largest `n`, at most 8 KiB resident per
/// blocked thread.
fn small_blocked_thread(d: &Data<'_>, _m: &Machine) -> Finding {
    let Some(largest) = largest(d) else {
        return no_run();
    };
    let l = largest.to_string();
    let np = [("n", l.as_str())];
    let mut outcomes = Vec::new();
    let mut ev = Vec::new();
    for name in NAMES {
        for p in procs(d) {
            let sel = Sel::metric("rss_bytes_per_thread")
                .series(name)
                .threads(p)
                .params(&np);
            if let Some(e) = d.estimate(sel) {
                outcomes.push(rule::at_most(e, 8192.0));
                ev.push(format!("`{name}` P = {p}: {:.0}", e.value));
            }
        }
    }
    if outcomes.is_empty() {
        Finding::missing("memory per thread")
    } else {
        Finding::new(
            Outcome::all(outcomes),
            format!(
                "bytes per blocked thread at n = {largest}: {}",
                join(ev, ", ")
            ),
        )
    }
}

/// `mappings-per-slab`: at the largest `n`, at most one kernel mapping
/// gained per 1,000 threads.
fn mappings_per_slab(d: &Data<'_>, _m: &Machine) -> Finding {
    let Some(largest) = largest(d) else {
        return no_run();
    };
    let l = largest.to_string();
    let per = f64::from(largest) / 1000.0;
    match every(d, "kernel_mappings", &l, |v| v <= per) {
        (0, _) => Finding::missing("kernel mappings"),
        (k, bad) if bad.is_empty() => Finding::new(
            Outcome::Holds,
            format!("{k} runs of {largest} threads each gained at most {per:.0} mappings"),
        ),
        (_, bad) => Finding::new(
            Outcome::Fails,
            format!(
                "more than {per:.0} mappings for {largest} threads: {}",
                bad.join(", ")
            ),
        ),
    }
}

fn assess(rows: &[Row], _m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let ns = ns_of(&d);
    let Some(&largest) = ns.last() else {
        return Assessment {
            measured: "No blocked-threads run in the data.".into(),
            ..Assessment::default()
        };
    };
    let mut header = vec!["strategy".to_string(), "P".to_string()];
    for n in &ns {
        header.push(format!("n = {n}: bytes/thread"));
        header.push(format!("n = {n}: mappings"));
        header.push(format!("n = {n}: ms"));
    }
    let mut table = Table::new(&header);
    for name in NAMES {
        for p in procs(&d) {
            let mut row = vec![name.to_string(), p.to_string()];
            for n in &ns {
                let ns = n.to_string();
                let np = [("n", ns.as_str())];
                let v =
                    |metric: &str| d.value(Sel::metric(metric).series(name).threads(p).params(&np));
                let done = v("completed") == Some(1.0);
                row.push(na(v("rss_bytes_per_thread"), |x| format!("{x:.0}")));
                row.push(na(v("kernel_mappings"), |x| format!("{x:.0}")));
                row.push(match v("ms") {
                    Some(x) if done => format!("{x:.0}"),
                    Some(x) => format!("{x:.0} (not completed)"),
                    None => "n/a".into(),
                });
            }
            if row.len() > 2 {
                table.rows.push(row);
            }
        }
    }
    Assessment {
        measured: format!(
            "Up to {largest} user threads blocked on one barrier at once, then released; memory and \
             mappings read while all wait."
        ),
        notes: String::new(),
        table: Some(table),
    }
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let ns = ns_of(&Data::new(rows));
    let largest = ns.last().map(u32::to_string).unwrap_or_default();
    let (lines, n) = (Lines::new(rows, m), ("n", largest.as_str()));
    let panels = vec![
        lines.at(
            n,
            "rss_bytes_per_thread",
            &format!("resident bytes per blocked thread, n = {largest}"),
            "bytes per thread",
            Scale::Linear,
        ),
        lines.at(
            n,
            "ms",
            &format!("spawn, block, release and finish of n = {largest}"),
            "ms",
            Scale::Log,
        ),
    ];
    figure("tm-million: many blocked user threads", m, panels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::testing::{self, Rows, big_metal, small_vm};
    use crate::output::report::Verdict;

    fn rows(m: &Machine, n: u32, bytes: f64, maps: f64, done: bool) -> Vec<Row> {
        let mut out = Vec::new();
        let at = Rows::new(&EXPERIMENT, m).rel(0.0);
        for p in [1, m.cores() as u32] {
            for s in NAMES {
                let r = |metric: &str, v: f64| at.row(s, p, metric, v).param("n", n);
                out.push(r("ms", 900.0));
                out.push(r("completed", if done { 1.0 } else { 0.0 }));
                out.push(r("rss_bytes_per_thread", bytes));
                out.push(r("kernel_mappings", maps));
            }
        }
        out
    }

    #[test]
    fn verdicts_reach_every_case() {
        for m in [small_vm(), big_metal()] {
            let s = EXPERIMENT.section(&rows(&m, MILLION, 5000.0, 300.0, true), &m);
            assert_eq!(s.verdict, Verdict::Holds, "{}", s.measured);
            let s = EXPERIMENT.section(&rows(&m, MILLION, 50_000.0, 2e6, false), &m);
            assert_eq!(s.verdict, Verdict::Differs, "{}", s.measured);
            let s = EXPERIMENT.section(&rows(&m, MILLION, 50_000.0, 300.0, true), &m);
            assert_eq!(s.verdict, Verdict::Partial, "{}", s.measured);
            // A quick run cannot judge the million.
            let s = EXPERIMENT.section(&rows(&m, 100_000, 5000.0, 30.0, true), &m);
            assert_eq!(s.verdict, Verdict::Holds, "{}", s.measured);
            testing::assert_says(&s.measured, "100000 threads");
            let none = EXPERIMENT.section(&[], &m);
            assert_eq!(none.verdict, Verdict::NotMeasurable);
            testing::assert_says(
                &none.measured,
                "a run of blocked threads (a `completed` row",
            );
        }
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, MILLION, 5000.0, 300.0, true));
    }
}
