//! `presto-atomic-int` — PRESTO Fig. 2: an integer incremented one million
//! times by P threads, where the integer is guarded by a lock that is
//! inlined (`atomic-int<L>`, PRESTO's "HP-Base") or reached through virtual
//! calls (`atomic-int-dyn<L>`, "HP-Derived"), beside hardware `fetch_add`.
//! `atomic-int<tas>` plays PRESTO's "Original".

use std::sync::atomic::{AtomicI64, Ordering};

use crate::harness::{Ctx, Experiment, figure, ns, ratio, threads_panel, value};
use crate::kernels::locks::{increments, work_iters_for_ns};
use crate::output::data::Row;
use crate::output::machine::Machine;
use crate::output::plot::{Figure, Scale};
use crate::output::report::{Section, Table, Verdict};
use crate::registry::locks as locks_table;

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "presto-atomic-int",
    title: "AtomicInt: TAS vs queue lock, dyn vs generic, vs fetch_add",
    source: "PRESTO Fig. 2",
    uses_locks: true,
    claims: &[],
    run,
    figure: draw,
    assess,
};

const DEFAULT_LOCKS: &[&str] = &["tas", "graunke-thakkar", "mcs"];
const TARGET: u64 = 1_000_000;

fn per_inc((done, elapsed): &(u64, std::time::Duration)) -> f64 {
    elapsed.as_nanos() as f64 / (*done).max(1) as f64
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let wanted: Vec<String> = ctx
        .locks
        .clone()
        .unwrap_or_else(|| DEFAULT_LOCKS.iter().map(|s| s.to_string()).collect());
    let locks = locks_table::select(Some(&wanted))?;
    let sweep = ctx.sweep();
    let computes = [0u64, 200];
    let budget = ctx.budget(250, 2000);
    let bar = ctx.bar(
        EXPERIMENT.id,
        (2 * locks.len() + 1) * sweep.len() * computes.len(),
    );
    let mut rows = Vec::new();
    let mut push =
        |series: &str, t: usize, compute: u64, (done, elapsed): (u64, std::time::Duration)| {
            rows.push(
                Row::new(
                    EXPERIMENT.id,
                    series,
                    t as u32,
                    ctx.over(t),
                    "ns_per_increment",
                    elapsed.as_nanos() as f64 / done.max(1) as f64,
                    "ns",
                )
                .param("compute_ns", compute)
                .param("ops", done)
                .param("completed", done >= TARGET),
            );
        };
    for &compute in &computes {
        let post = work_iters_for_ns(compute as f64);
        for &t in &sweep {
            bar.set_message(format!("fetch_add x{t}"));
            let hardware = || {
                // A fresh integer per repeat.
                let hw = AtomicI64::new(0);
                increments(t, TARGET, post, budget, &|| {
                    hw.fetch_add(1, Ordering::Relaxed)
                })
            };
            push(
                "fetch_add",
                t,
                compute,
                crate::kernels::locks::median_run(ctx.repeats(t), hardware, per_inc),
            );
            bar.inc(1);
            for lock in &locks {
                bar.set_message(format!("{} x{t}", lock.name));
                push(
                    &format!("atomic-int<{}>", lock.name),
                    t,
                    compute,
                    crate::kernels::locks::median_run(
                        ctx.repeats(t),
                        || (lock.atomic_int)(t, TARGET, post, budget),
                        per_inc,
                    ),
                );
                bar.inc(1);
                push(
                    &format!("atomic-int-dyn<{}>", lock.name),
                    t,
                    compute,
                    crate::kernels::locks::median_run(
                        ctx.repeats(t),
                        || (lock.atomic_int_dyn)(t, TARGET, post, budget),
                        per_inc,
                    ),
                );
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let panels = ["0", "200"]
        .iter()
        .map(|c| {
            threads_panel(
                rows,
                "ns_per_increment",
                Some(("compute_ns", c)),
                &format!("compute phase {c} ns"),
                "ns per increment (log)",
                Scale::Log,
                m.cores(),
            )
        })
        .collect();
    figure(
        "presto-atomic-int (PRESTO Fig. 2): AtomicInt increments",
        m,
        panels,
    )
}

fn assess(rows: &[Row], m: &Machine) -> crate::harness::Assessment {
    crate::harness::legacy(assess_old(rows, m))
}

fn assess_old(rows: &[Row], m: &Machine) -> Section {
    let cores = m.cores() as u32;
    let v =
        |s: &str, t: u32, c: &str| value(rows, s, t, "ns_per_increment", Some(("compute_ns", c)));
    let mut table = Table {
        header: vec![
            "series".into(),
            "1 thr, no compute".into(),
            format!("{cores} thr, no compute"),
            format!("{cores} thr, 200 ns compute"),
            format!("{} thr (over), 200 ns", 4 * cores),
        ],
        rows: vec![],
    };
    for n in crate::harness::series_names(rows, "ns_per_increment") {
        let cell = |x: Option<f64>| x.map_or("n/a".into(), ns);
        table.rows.push(vec![
            n.clone(),
            cell(v(&n, 1, "0")),
            cell(v(&n, cores, "0")),
            cell(v(&n, cores, "200")),
            cell(v(&n, 4 * cores, "200")),
        ]);
    }
    let lock = "graunke-thakkar";
    let (verdict, measured) = match (
        v(&format!("atomic-int-dyn<{lock}>"), 1, "0"),
        v(&format!("atomic-int<{lock}>"), 1, "0"),
    ) {
        (Some(d), Some(g)) => {
            let r = d / g;
            let hw = v("fetch_add", 1, "0");
            (
                // Direction and size: PRESTO's HP-Derived was a large
                // factor slower; a small but positive gap holds partly.
                if r > 1.5 {
                    Verdict::Holds
                } else if r > 1.0 {
                    Verdict::Partial
                } else {
                    Verdict::Differs
                },
                format!(
                    "Uncontended, one increment through `dyn` costs {} and through the generic (inlined) lock {} \
                     ({} the generic cost; hardware `fetch_add` {}). At {cores} threads without compute: dyn {} vs \
                     generic {}.",
                    ns(d),
                    ns(g),
                    ratio(r),
                    hw.map_or("n/a".into(), ns),
                    v(&format!("atomic-int-dyn<{lock}>"), cores, "0").map_or("n/a".into(), ns),
                    v(&format!("atomic-int<{lock}>"), cores, "0").map_or("n/a".into(), ns)
                ),
            )
        }
        _ => (
            Verdict::NotMeasurable,
            "graunke-thakkar was not run (see --locks).".into(),
        ),
    };
    Section {
        id: EXPERIMENT.id.into(),
        title: EXPERIMENT.title.into(),
        source: EXPERIMENT.source.into(),
        claim: "Making lock/unlock virtual (HP-Derived) kept the compiler from inlining them, and \"the observed \
                performance difference is simply due to the two extra routine calls\"; the non-virtual HP-Base \
                \"compares favorably with the HP_Spinlock results\" (PRESTO §3.2)."
            .into(),
        measured,
        verdict,
        why: "The claim is about call overhead, which a single thread shows on any machine; the contended part of \
              Fig. 2 (TAS degrading with processors) is limited by the cores here as in presto-spinlock. A modern \
              CPU predicts the indirect calls, so the gap is a few nanoseconds rather than PRESTO's factor."
            .into(),
        table: Some(table),
        svg: Some(format!("{}.svg", EXPERIMENT.id)),
        provenance: None,
    }
}
