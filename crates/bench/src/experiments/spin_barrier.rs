//! `spin-barrier` — ALL89 Fig. 8: a barrier built from a lock. In each
//! episode every thread takes the lock once to bump a counter, then waits
//! until all have; time per episode divided by the number of threads.

use crate::harness::names as list;
use crate::harness::{Ctx, Experiment, figure, ns, threads_panel, value};
use crate::output::data::Row;
use crate::output::machine::Machine;
use crate::output::plot::{Figure, Scale};
use crate::output::report::{Section, Table, Verdict};
use crate::registry::locks as locks_table;

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "spin-barrier",
    title: "Lock-based barrier, time per processor",
    source: "ALL89 Fig. 8",
    uses_locks: true,
    claims: &[],
    run,
    figure: draw,
    assess,
};

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let locks = locks_table::select(ctx.locks.as_deref())?;
    let sweep = ctx.sweep();
    let budget = ctx.budget(300, 2000);
    let episodes = if ctx.quick { 2_000 } else { 20_000 };
    let bar = ctx.bar(EXPERIMENT.id, locks.len() * sweep.len());
    let mut rows = Vec::new();
    for lock in &locks {
        for &t in &sweep {
            bar.set_message(format!("{} x{t}", lock.name));
            let (done, elapsed) = crate::kernels::locks::median_run(
                ctx.repeats(t),
                || (lock.barrier)(t, episodes, budget),
                |(d, e)| e.as_nanos() as f64 / (*d).max(1) as f64,
            );
            let per = elapsed.as_nanos() as f64 / done.max(1) as f64 / t as f64 / 1e3;
            rows.push(
                Row::new(
                    EXPERIMENT.id,
                    lock.name,
                    t as u32,
                    ctx.over(t),
                    "us_per_processor",
                    per,
                    "us",
                )
                .param("episodes", done)
                .param("completed", done >= episodes),
            );
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    figure(
        "spin-barrier (ALL89 Fig. 8)",
        m,
        vec![threads_panel(
            rows,
            "us_per_processor",
            None,
            "time per processor per barrier",
            "us (log)",
            Scale::Log,
            m.cores(),
        )],
    )
}

fn assess(rows: &[Row], m: &Machine) -> crate::harness::Assessment {
    crate::harness::legacy(assess_old(rows, m))
}

fn assess_old(rows: &[Row], m: &Machine) -> Section {
    let cores = m.cores() as u32;
    let metric = "us_per_processor";
    let names = crate::harness::series_names(rows, metric);
    let sweep: Vec<u32> = {
        let mut v: Vec<u32> = rows
            .iter()
            .filter(|r| r.metric == metric)
            .map(|r| r.threads)
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let mut table = Table {
        header: vec!["lock".into()],
        rows: vec![],
    };
    for t in &sweep {
        table.header.push(format!(
            "{t} thr{}",
            if *t > cores { " (over)" } else { "" }
        ));
    }
    for n in &names {
        let mut row = vec![n.clone()];
        for &t in &sweep {
            row.push(value(rows, n, t, metric, None).map_or("n/a".into(), |v| ns(v * 1e3)));
        }
        table.rows.push(row);
    }
    let spin = ["tas", "ttas", "backoff", "backoff-persistent"];
    let at = |t: u32| -> Vec<(String, f64)> {
        let mut v: Vec<(String, f64)> = spin
            .iter()
            .filter_map(|s| Some((s.to_string(), value(rows, s, t, metric, None)?)))
            .collect();
        v.sort_by(|a, b| a.1.total_cmp(&b.1));
        v
    };
    let ranked = at(cores);
    let fastest = ranked.first().map(|(n, _)| n.clone());
    let verdict = match &fastest {
        None => Verdict::NotMeasurable,
        Some(f) if f == "tas" => Verdict::Partial,
        Some(_) => Verdict::Differs,
    };
    let order: Vec<String> = ranked
        .iter()
        .map(|(n, v)| format!("{n} {}", ns(v * 1e3)))
        .collect();
    Section {
        id: EXPERIMENT.id.into(),
        title: EXPERIMENT.title.into(),
        source: EXPERIMENT.source.into(),
        claim: "\"For small numbers of processors, spinning on the xchgb instruction is fastest, since a processor \
                immediately acquires the lock when it is released. As more processors are added ... this is \
                outweighed by the degradation of the processor holding the lock\" (ALL89 §IV-E)."
            .into(),
        measured: format!(
            "Spin locks at {cores} threads, fastest first: {}. Fastest of all locks at {cores} threads: {}.",
            list(&order),
            names
                .iter()
                .filter_map(|n| Some((n, value(rows, n, cores, metric, None)?)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map_or("n/a".into(), |(n, v)| format!("`{n}` ({})", ns(v * 1e3)))
        ),
        verdict,
        why: format!(
            "Only the small-P end of Fig. 8 exists on {cores} cores; the crossover where the holder's degradation \
             outweighs tas's fast hand-over needs more processors than this machine has. Oversubscribed points \
             are dominated by descheduled waiters (the barrier waits yield after 2,000 spins)."
        ),
        table: Some(table),
        svg: Some(format!("{}.svg", EXPERIMENT.id)),
        provenance: None,
    }
}
