//! `peer-locks` — every lock of the family against the modern peers (std,
//! parking_lot, pthread, pthread-adaptive), all through the same
//! `lock_api::RawMutex` interface: uncontended cost beside a `bare-atomic`
//! reference measured in the same run, and contended time per acquisition.

use symmetry_locks::registry::LockKind;

use super::{Ctx, Experiment, figure, ns, ratio, threads_panel, value};
use crate::data::Row;
use crate::kernels::{CounterCfg, on_pinned_thread, uncontended_bare_atomic};
use crate::locks_table;
use crate::machine::Machine;
use crate::plot::{Bar, BarPanel, Figure, Panel, Scale};
use crate::report::{Section, Table, Verdict};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "peer-locks",
    title: "Uncontended cost and contended throughput of every lock and baseline",
    source: "modern peers",
    uses_locks: true,
    run,
    figure: draw,
    assess,
};

const BARE: &str = "bare-atomic";
const REPEATS: usize = 7;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let locks = locks_table::select(ctx.locks.as_deref())?;
    let iters: u64 = if ctx.quick { 2_000_000 } else { 10_000_000 };
    let contended_threads: Vec<usize> = match &ctx.threads {
        Some(t) => t.clone(),
        None => vec![ctx.cores, 4 * ctx.cores],
    };
    let budget = ctx.budget(300, 2000);
    let bar = ctx.bar(
        EXPERIMENT.id,
        REPEATS * (locks.len() + 1) + locks.len() * contended_threads.len(),
    );
    // Uncontended: repeats interleaved across locks so that drift (turbo,
    // a noisy neighbour) hits every lock alike; median of the repeats.
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); locks.len() + 1];
    bar.set_message("uncontended");
    on_pinned_thread(|| {
        for _ in 0..REPEATS {
            samples[0].push(uncontended_bare_atomic(iters));
            bar.inc(1);
            for (i, lock) in locks.iter().enumerate() {
                samples[i + 1].push((lock.uncontended)(iters));
                bar.inc(1);
            }
        }
    });
    let mut rows = Vec::new();
    let names = std::iter::once(BARE).chain(locks.iter().map(|l| l.name));
    for (name, s) in names.zip(samples) {
        let (lo, hi) = (
            s.iter().copied().fold(f64::INFINITY, f64::min),
            s.iter().copied().fold(0.0, f64::max),
        );
        rows.push(
            Row::new(
                EXPERIMENT.id,
                name,
                1,
                false,
                "uncontended_ns",
                median(s),
                "ns",
            )
            .param("iters", iters)
            .param("repeats", REPEATS)
            .param("min_ns", format!("{lo:.3}"))
            .param("max_ns", format!("{hi:.3}")),
        );
    }
    for lock in &locks {
        for &t in &contended_threads {
            bar.set_message(format!("{} x{t}", lock.name));
            let out = super::counter_point(
                ctx,
                lock,
                CounterCfg {
                    threads: t,
                    target: 2_000_000,
                    cs_iters: 0,
                    post_iters: 0,
                    budget,
                },
            );
            rows.push(super::acquire_row(EXPERIMENT.id, lock.name, ctx, t, &out));
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

fn group(name: &str) -> String {
    if name == BARE {
        return "reference".into();
    }
    match symmetry_locks::registry::find(name).map(|l| l.kind) {
        Some(LockKind::Spin) => "spin".into(),
        Some(LockKind::Queue) => "queue".into(),
        Some(LockKind::Baseline) => "baseline".into(),
        None => "other".into(),
    }
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let bars: Vec<Bar> = rows
        .iter()
        .filter(|r| r.metric == "uncontended_ns")
        .map(|r| Bar {
            label: r.series.clone(),
            value: r.value,
            group: group(&r.series),
        })
        .collect();
    let reference = value(rows, BARE, 1, "uncontended_ns", None)
        .map(|b| vec![(format!("{BARE} ({})", ns(b)), b)]);
    figure(
        "peer-locks: uncontended lock+unlock, and contended time per acquisition",
        m,
        vec![
            Panel::Bar(BarPanel {
                title: "uncontended lock + unlock (median)".into(),
                y_label: "ns".into(),
                y_scale: Scale::Linear,
                bars,
                reference_lines: reference.unwrap_or_default(),
            }),
            threads_panel(
                rows,
                "ns_per_acquire",
                None,
                "contended (no work)",
                "ns per acquisition (log)",
                Scale::Log,
                m.cores(),
            ),
        ],
    )
}

fn assess(rows: &[Row], m: &Machine) -> Section {
    let cores = m.cores() as u32;
    let u = |s: &str| value(rows, s, 1, "uncontended_ns", None);
    let bare = u(BARE);
    let mut table = Table {
        header: vec![
            "lock".into(),
            "uncontended".into(),
            "vs bare-atomic".into(),
            format!("contended, {cores} thr"),
            format!("contended, {} thr (over)", 4 * cores),
        ],
        rows: vec![],
    };
    for n in super::series_names(rows, "uncontended_ns") {
        table.rows.push(vec![
            n.clone(),
            u(&n).map_or("n/a".into(), ns),
            match (u(&n), bare) {
                (Some(a), Some(b)) => ratio(a / b),
                _ => "n/a".into(),
            },
            value(rows, &n, cores, "ns_per_acquire", None).map_or("-".into(), ns),
            value(rows, &n, 4 * cores, "ns_per_acquire", None).map_or("-".into(), ns),
        ]);
    }
    let mut checks: Vec<(String, Option<bool>)> = Vec::new();
    let rel = |s: &str| Some(u(s)? / bare?);
    checks.push((
        format!(
            "`tas` within 1.3x of `bare-atomic`: {}",
            rel("tas").map_or("n/a".into(), ratio)
        ),
        rel("tas").map(|r| r <= 1.3),
    ));
    for q in ["mcs", "clh"] {
        checks.push((
            format!(
                "`{q}` within 3x of `bare-atomic`: {}",
                rel(q).map_or("n/a".into(), ratio)
            ),
            rel(q).map(|r| r <= 3.0),
        ));
    }
    let best = super::series_names(rows, "uncontended_ns")
        .into_iter()
        .filter(|n| {
            matches!(
                symmetry_locks::registry::find(n).map(|l| l.kind),
                Some(LockKind::Spin | LockKind::Queue)
            )
        })
        .filter_map(|n| Some((u(&n)?, n)))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    let pl = u("parking_lot");
    checks.push((
        format!(
            "best symmetry lock (`{}`, {}) at or below `parking_lot` ({})",
            best.as_ref().map_or("n/a", |b| b.1.as_str()),
            best.as_ref().map_or("n/a".into(), |b| ns(b.0)),
            pl.map_or("n/a".into(), ns)
        ),
        match (&best, pl) {
            (Some(b), Some(p)) => Some(b.0 <= p),
            _ => None,
        },
    ));
    let met = checks.iter().filter(|c| c.1 == Some(true)).count();
    let known = checks.iter().filter(|c| c.1.is_some()).count();
    let verdict = if known == 0 {
        Verdict::NotMeasurable
    } else if met == known {
        Verdict::Holds
    } else if met == 0 {
        Verdict::Differs
    } else {
        Verdict::Partial
    };
    let measured = checks
        .iter()
        .map(|(t, ok)| {
            format!(
                "- {t} — {}",
                match ok {
                    Some(true) => "met",
                    Some(false) => "missed",
                    None => "not run",
                }
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    Section {
        id: EXPERIMENT.id.into(),
        title: EXPERIMENT.title.into(),
        source: EXPERIMENT.source.into(),
        claim: "Targets (issue #2): `tas` uncontended within 1.3x of a bare exchange + release store; `mcs` and `clh` \
                within 3x; the best symmetry lock at or below `parking_lot`. All locks pay the same \
                `lock_api::Mutex` interface cost."
            .into(),
        measured,
        verdict,
        why: "Ratios are taken within one run on one core (median of 7 interleaved repeats), so they do not depend on \
              this machine's absolute speed. The queue locks pay for a thread-local node pool on every acquisition."
            .into(),
        table: Some(table),
        svg: Some(format!("{}.svg", EXPERIMENT.id)),
    }
}
