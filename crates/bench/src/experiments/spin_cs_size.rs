//! `spin-cs-size` — ALL89 Fig. 7: relative processor speed (time for one
//! thread over time for P threads, same number of acquisitions) versus
//! critical-section size. With no parallelism to gain, 1.0 means waiters do
//! not slow the holder at all.

use crate::harness::prelude::*;
use crate::kernels::locks::{CounterCfg, work_iters_for_ns};
use crate::registry::locks::{self as locks_table, acquire_row, counter_cfg};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "spin-cs-size",
    title: "Relative speed (P threads vs 1) vs critical-section size",
    source: "ALL89 Fig. 7",
    uses_locks: true,
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// ALL89 §IV-E, judged at P = all cores (the most waiters the machine runs
/// without oversubscription).
const CLAIMS: &[Claim] = &[
    Claim {
        key: "ttas-recovers",
        paper: "\"Spinning on a read degrades performance less as the size of the critical section grows\" \
                (ALL89 §IV-E, 8 processors vs 1).",
        rule: "the relative speed of `ttas` at P = all cores rises from the smallest to the largest critical \
               section",
        needs: Needs::cores(2),
        judge: ttas_recovers,
    },
    Claim {
        key: "ttas-over-tas",
        paper: "\"... while spinning on the xchgb instruction degrades performance evenly throughout the \
                critical section\" (ALL89 §IV-E).",
        rule: "from the smallest to the largest critical section, the relative speed of `ttas` gains more than \
               that of `tas` (P = all cores)",
        needs: Needs::cores(2),
        judge: ttas_over_tas,
    },
];

fn cs_sizes(ctx: &Ctx) -> Vec<u64> {
    if ctx.quick {
        vec![0, 250, 1000, 4000]
    } else {
        vec![0, 100, 250, 500, 1000, 2000, 4000, 8000]
    }
}

/// The P values: all cores, and 4x cores (oversubscribed), unless
/// `--threads` names others.
fn ps(ctx: &Ctx) -> Vec<usize> {
    match &ctx.threads {
        Some(t) => t.iter().copied().filter(|&p| p > 1).collect(),
        None => {
            let mut v = vec![ctx.cores.max(2), 4 * ctx.cores];
            v.dedup();
            v
        }
    }
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let locks = locks_table::select(ctx.locks.as_deref())?;
    let sizes = cs_sizes(ctx);
    let ps = ps(ctx);
    let budget = ctx.budget(100, 1000);
    let target = 1_000_000;
    let bar = ctx.bar(EXPERIMENT.id, locks.len() * sizes.len() * (ps.len() + 1));
    let mut rows = Vec::new();
    for lock in &locks {
        for &cs in &sizes {
            let cs_iters = work_iters_for_ns(cs as f64);
            let mut one = None;
            for &t in std::iter::once(&1).chain(&ps) {
                bar.set_message(format!("{} cs={cs}ns x{t}", lock.name));
                let cfg = counter_cfg(t, target, budget);
                let (out, spread) = lock.counter_point(ctx, CounterCfg { cs_iters, ..cfg });
                rows.push(
                    acquire_row(EXPERIMENT.id, lock.name, ctx, t, &out, &spread).param("cs_ns", cs),
                );
                match one {
                    None => one = Some(spread),
                    Some(base) => rows.push(
                        Row::new(
                            EXPERIMENT.id,
                            lock.name,
                            t as u32,
                            ctx.over(t),
                            "relative_speed",
                            base.median / out.ns_per_op(),
                            "ratio",
                        )
                        .param("cs_ns", cs)
                        .param("ops", out.ops)
                        .param("completed", out.completed)
                        .with_spread(&base.ratio(spread)),
                    ),
                }
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

fn panel_for(rows: &[Row], p: u32, over: bool) -> Panel {
    let title = format!(
        "{p} threads vs 1{}",
        if over { " (oversubscribed)" } else { "" }
    );
    let (x, y) = (
        "critical section work (ns)",
        "relative speed (1 = no degradation)",
    );
    param_panel(
        rows,
        "relative_speed",
        "cs_ns",
        Some(p),
        (&title, x, y),
        Scale::Linear,
    )
}

fn threads_of(rows: &[Row]) -> Vec<(u32, bool)> {
    let mut ps: Vec<(u32, bool)> = Vec::new();
    for r in rows.iter().filter(|r| r.metric == "relative_speed") {
        if !ps.iter().any(|(p, _)| *p == r.threads) {
            ps.push((r.threads, r.oversubscribed));
        }
    }
    ps
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let panels = threads_of(rows)
        .into_iter()
        .map(|(p, o)| panel_for(rows, p, o))
        .collect();
    figure(
        "spin-cs-size (ALL89 Fig. 7): relative speed vs critical-section size",
        m,
        panels,
    )
}

/// The critical-section sizes of the relative-speed points at P = all
/// cores of `m`.
fn sizes(d: &Data<'_>, m: &Machine) -> Vec<String> {
    d.param_values(
        Sel::metric("relative_speed").threads(m.cores() as u32),
        "cs_ns",
    )
}

/// The relative speeds of `lock` at P = all cores of `m`, one per
/// critical-section size of [`sizes`], in that order; `None` if it lacks
/// any of them, so that a rule read "from the smallest to the largest"
/// never starts or ends at another size for one lock than for the rest.
fn curve(d: &Data<'_>, m: &Machine, lock: &str) -> Option<Vec<Estimate>> {
    let sel = Sel::metric("relative_speed")
        .threads(m.cores() as u32)
        .series(lock);
    sizes(d, m)
        .iter()
        .map(|c| d.estimate(sel.params(&[("cs_ns", c.as_str())])))
        .collect()
}

/// What the relative speed of `lock` at P = all cores of `m` gains from
/// the smallest critical-section size to the largest.
fn gain(d: &Data<'_>, m: &Machine, lock: &str) -> Option<Estimate> {
    let c = curve(d, m, lock).filter(|c| c.len() >= 2)?;
    Some(c.last()?.minus(*c.first()?))
}

/// "from S ns to L ns": the smallest and largest critical-section sizes
/// at P = all cores of `m` (the range the rules read: all of a quick run's
/// or a full run's sizes).
fn range(d: &Data<'_>, m: &Machine) -> String {
    let s = sizes(d, m);
    match (s.first(), s.last()) {
        (Some(a), Some(b)) => format!("from {a} ns to {b} ns"),
        _ => "no sizes".into(),
    }
}

/// Whether the points at P = all cores of `m` are oversubscribed (data
/// from a machine with fewer cores).
fn oversubscribed(d: &Data<'_>, m: &Machine) -> bool {
    let p = m.cores() as u32;
    d.threads(Sel::metric("relative_speed"))
        .iter()
        .any(|&(t, o)| t == p && o)
}

/// `ttas-recovers`: the relative speed of `ttas` at P = all cores rises
/// from the smallest to the largest critical section.
fn ttas_recovers(d: &Data<'_>, m: &Machine) -> Finding {
    let p = m.cores() as u32;
    match curve(d, m, "ttas") {
        Some(ttas) if ttas.len() >= 2 && !oversubscribed(d, m) => Finding::new(
            rule::increasing(&ttas),
            format!(
                "`ttas` relative speed {}: {}",
                range(d, m),
                join(ttas.iter().map(|e| e.show(2)), " -> ")
            ),
        ),
        _ => Finding::missing(&format!(
            "`ttas` at {p} threads at each of two or more critical-section sizes"
        )),
    }
}

/// `ttas-over-tas`: from the smallest to the largest critical section,
/// the relative speed of `ttas` at P = all cores gains more than that of
/// `tas`.
fn ttas_over_tas(d: &Data<'_>, m: &Machine) -> Finding {
    let p = m.cores() as u32;
    match (gain(d, m, "ttas"), gain(d, m, "tas")) {
        (Some(gr), Some(gt)) if !oversubscribed(d, m) => Finding::new(
            rule::greater(gr, gt),
            format!(
                "{}: gain of `ttas` {}, of `tas` {}",
                range(d, m),
                gr.show(2),
                gt.show(2)
            ),
        ),
        _ => Finding::missing(&format!(
            "`tas` and `ttas` at {p} threads at each critical-section size"
        )),
    }
}

fn assess(rows: &[Row], m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let p = m.cores() as u32;
    let sel = Sel::metric("relative_speed").threads(p);
    let sizes = d.param_values(sel, "cs_ns");
    let mut table = Table::new(&["lock"]);
    for c in &sizes {
        table.header.push(format!("cs {c} ns, {p} thr"));
    }
    let rs = |lock: &str, cs: &str| d.estimate(sel.series(lock).params(&[("cs_ns", cs)]));
    let locks = d.series(sel);
    for n in &locks {
        let mut row = vec![n.clone()];
        for c in &sizes {
            row.push(na(rs(n, c), |v| v.show(2)));
        }
        table.rows.push(row);
    }
    let improving: Vec<String> = locks
        .iter()
        .filter(|n| gain(&d, m, n).is_some_and(|g| g.lo > 0.0))
        .cloned()
        .collect();
    let measured = match (sizes.first(), sizes.last()) {
        (Some(small), Some(large)) => format!(
            "At P = {p} threads (all cores), from {small} ns to {large} ns of critical-section work. Locks whose \
             relative speed rises beyond the repeat spread: {}.",
            names(&improving)
        ),
        _ => format!("No relative-speed points at P = {p} threads."),
    };
    Assessment {
        measured,
        notes: format!(
            "With P = {p}, {} waiter{} spin{} against the holder; ALL89 measured 7. On a write-back, \
             invalidation-based cache the holder is slowed only when it touches the lock's line.",
            p.saturating_sub(1),
            if p == 2 { "" } else { "s" },
            if p == 2 { "s" } else { "" },
        ),
        table: Some(table),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::testing::{self, Rows, assert_verdict, big_metal, small_vm};
    use crate::output::report::Verdict::*;

    /// Relative speeds at P = all cores of `m`: `ttas` from `t0` to `t1`,
    /// `tas` from `s0` to `s1`, over three critical-section sizes.
    fn rows(m: &Machine, [t0, t1, s0, s1]: [f64; 4]) -> Vec<Row> {
        let at = Rows::new(&EXPERIMENT, m);
        let mut out = Vec::new();
        for (i, cs) in ["0", "1000", "4000"].iter().enumerate() {
            let f = i as f64 / 2.0;
            for (lock, a, b) in [("ttas", t0, t1), ("tas", s0, s1)] {
                let r = at.row(lock, m.cores() as u32, "relative_speed", a + (b - a) * f);
                out.push(r.param("cs_ns", cs));
            }
        }
        out
    }

    /// ALL89's picture: `ttas` recovers as the critical section grows,
    /// `tas` hardly.
    const PAPER: [f64; 4] = [0.3, 0.9, 0.3, 0.35];

    #[test]
    fn verdicts_reach_every_case() {
        let cases = [
            (PAPER, Holds),
            ([0.6, 0.3, 0.3, 0.9], Differs),
            ([0.5, 0.505, 0.5, 0.5], Indistinct),
        ];
        testing::assert_verdicts(&EXPERIMENT, &testing::small_and_big(), rows, &cases);
        // One core: no waiter to spin against the holder.
        let one = testing::machine(1, true);
        assert_verdict(&EXPERIMENT, &rows(&one, PAPER), &one, NotMeasurable);
        // Data from a small machine judged for a big one: no points at P = 64.
        let small = rows(&small_vm(), PAPER);
        assert_verdict(&EXPERIMENT, &small, &big_metal(), NotMeasurable);
    }

    #[test]
    fn the_rules_read_every_size_for_every_lock() {
        let m = small_vm();
        let all = rows(&m, PAPER);
        let f = testing::findings(&EXPERIMENT, &all, &m);
        for i in 0..2 {
            testing::assert_outcome(&f, i, Outcome::Holds);
            testing::assert_says(&f[i].evidence, "from 0 ns to 4000 ns");
        }
        // `ttas` without its smallest size: neither rule is judged from
        // its next size up, where the other lock starts at 0 ns.
        let some: Vec<Row> = (all.into_iter())
            .filter(|r| !(r.series == "ttas" && r.get_param("cs_ns") == Some("0")))
            .collect();
        testing::assert_nothing_judged(&EXPERIMENT, &some, &m);
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, PAPER));
    }
}
