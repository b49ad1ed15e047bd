//! `presto-spinlock` — PRESTO Fig. 1: one million acquisitions of a tiny
//! critical section, each followed by a compute phase, per lock x threads.
//! PRESTO's curves are "Original" (test-and-set: our `tas`), "HP_Spinlock"
//! (Graunke-Thakkar: `graunke-thakkar`) and FastThreads (Anderson's
//! queue-based lock: `anderson`).

use crate::harness::{Ctx, Experiment, figure, ns, ratio, threads_panel, value};
use crate::kernels::locks::{CounterCfg, work_iters_for_ns};
use crate::output::data::Row;
use crate::output::machine::Machine;
use crate::output::plot::{Figure, Scale};
use crate::output::report::{Section, Table, Verdict};
use crate::registry::locks as locks_table;

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "presto-spinlock",
    title: "1,000,000 acquisitions, tiny critical section, compute phase after release",
    source: "PRESTO Fig. 1",
    uses_locks: true,
    claims: &[],
    run,
    figure: draw,
    assess,
};

const DEFAULT_LOCKS: &[&str] = &[
    "tas",
    "ttas",
    "graunke-thakkar",
    "anderson",
    "mcs",
    "parking_lot",
];

/// Compute phases: PRESTO's 20 us (on a 16 MHz i386) and a phase 100x
/// shorter, which puts today's ~100x faster CPUs back into contention.
fn computes(ctx: &Ctx) -> Vec<u64> {
    if ctx.quick {
        vec![200]
    } else {
        vec![200, 20_000]
    }
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let wanted: Vec<String> = ctx
        .locks
        .clone()
        .unwrap_or_else(|| DEFAULT_LOCKS.iter().map(|s| s.to_string()).collect());
    let locks = locks_table::select(Some(&wanted))?;
    let sweep = ctx.sweep();
    let computes = computes(ctx);
    let budget = ctx.budget(300, 2000);
    let bar = ctx.bar(EXPERIMENT.id, locks.len() * sweep.len() * computes.len());
    let mut rows = Vec::new();
    for &compute in &computes {
        let post_iters = work_iters_for_ns(compute as f64);
        for lock in &locks {
            for &t in &sweep {
                bar.set_message(format!("{} x{t} compute={compute}ns", lock.name));
                let out = super::counter_point(
                    ctx,
                    lock,
                    CounterCfg {
                        threads: t,
                        target: 1_000_000,
                        cs_iters: 0,
                        post_iters,
                        budget,
                    },
                );
                rows.push(
                    super::acquire_row(EXPERIMENT.id, lock.name, ctx, t, &out)
                        .param("compute_ns", compute),
                );
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

fn compute_values(rows: &[Row]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in rows {
        if let Some(c) = r.get_param("compute_ns")
            && !v.iter().any(|x| x == c)
        {
            v.push(c.to_string());
        }
    }
    v
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let panels = compute_values(rows)
        .iter()
        .map(|c| {
            threads_panel(
                rows,
                "ns_per_acquire",
                Some(("compute_ns", c)),
                &format!("compute phase {c} ns"),
                "elapsed / acquisitions (ns, log)",
                Scale::Log,
                m.cores(),
            )
        })
        .collect();
    figure(
        "presto-spinlock (PRESTO Fig. 1): time per acquisition",
        m,
        panels,
    )
}

fn assess(rows: &[Row], m: &Machine) -> crate::harness::Assessment {
    crate::harness::legacy(assess_old(rows, m))
}

fn assess_old(rows: &[Row], m: &Machine) -> Section {
    let cores = m.cores() as u32;
    let over = 4 * cores;
    let c = compute_values(rows)
        .first()
        .cloned()
        .unwrap_or_else(|| "200".into());
    let v = |l: &str, t: u32| value(rows, l, t, "ns_per_acquire", Some(("compute_ns", &c)));
    let mut table = Table {
        header: vec![
            "lock".into(),
            "1 thread".into(),
            format!("{cores} threads"),
            format!("{over} threads (over)"),
            format!("{cores} thr vs 1"),
        ],
        rows: vec![],
    };
    for n in crate::harness::series_names(rows, "ns_per_acquire") {
        table.rows.push(vec![
            n.clone(),
            v(&n, 1).map_or("n/a".into(), ns),
            v(&n, cores).map_or("n/a".into(), ns),
            v(&n, over).map_or("n/a".into(), ns),
            match (v(&n, cores), v(&n, 1)) {
                (Some(a), Some(b)) => ratio(a / b),
                _ => "n/a".into(),
            },
        ]);
    }
    let (verdict, measured) = match (
        v("tas", 1),
        v("graunke-thakkar", 1),
        v("tas", cores),
        v("graunke-thakkar", cores),
    ) {
        (Some(t1), Some(g1), Some(tc), Some(gc)) => {
            let low = g1 >= t1;
            let high = gc <= tc;
            (
                if low || high {
                    Verdict::Partial
                } else {
                    Verdict::Differs
                },
                format!(
                    "With a {c} ns compute phase: uncontended (1 thread) `graunke-thakkar` costs {} vs `tas` {} \
                     ({}: PRESTO expects the queue lock to be slightly slower); at {cores} threads `graunke-thakkar` \
                     costs {} vs `tas` {} ({}: PRESTO expects the queue lock not to degrade).",
                    ns(g1),
                    ns(t1),
                    if low {
                        "as expected"
                    } else {
                        "queue lock not slower"
                    },
                    ns(gc),
                    ns(tc),
                    if high {
                        "as expected"
                    } else {
                        "tas still ahead"
                    }
                ),
            )
        }
        _ => (
            Verdict::NotMeasurable,
            "tas and graunke-thakkar were not both run (see --locks).".into(),
        ),
    };
    Section {
        id: EXPERIMENT.id.into(),
        title: EXPERIMENT.title.into(),
        source: EXPERIMENT.source.into(),
        claim: "The test-and-set lock of original Presto degrades as contention increases; FastThreads and Presto \
                with HP_Spinlock \"show a levelling off of performance but no degradation\", with \"slightly higher \
                latency ... when there is little contention\" (PRESTO §3.1, up to 12 processors, 20 us compute)."
            .into(),
        measured,
        verdict,
        why: format!(
            "PRESTO's 20 us compute phase on a 16 MHz i386 is about 100x shorter in instructions on this CPU, so the \
             quick run uses a {c} ns phase (the full run adds the literal 20 us). With {cores} cores the contention \
             that grows with processors in Fig. 1 stops at {cores}; beyond that, points are oversubscribed."
        ),
        table: Some(table),
        svg: Some(format!("{}.svg", EXPERIMENT.id)),
        provenance: None,
    }
}
