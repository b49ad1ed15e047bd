//! `tm-user-work` — ALL89 Fig. 3: the Table III chain of
//! [`tm-null-threads`](super::tm_null_threads), but each thread first does
//! user work drawn uniformly from `0..=2 x mean` (the kernel's `work_iters`),
//! per strategy x processors. Two settings of the mean (`setting`,
//! `work_us`):
//!
//! - `300us`: the paper's mean of 300 us, as is. Threads are then a few
//!   hundred nanoseconds of overhead beside 300 us of work (ratio ~1000:1),
//!   far coarser than the paper's grain.
//! - `paper-ratio`: the paper's work-to-overhead ratio, scaled to this
//!   machine. ALL89 does not print its thread latency as a number (Fig. 1
//!   is a plot), but §III-F says "Threads in Presto cost 600 us on the same
//!   Symmetry hardware, an order of magnitude worse than our threads", i.e.
//!   about 60 us per null thread, so 300 us of work was [`PAPER_RATIO`] = 5
//!   null threads' worth. (Its other bound, "only an order of magnitude
//!   more expensive than a procedure call" at 3.6 us in Table II, gives
//!   ~36 us and a ratio of 8.3; 5 is the finer grain of the two.) The mean
//!   work is then 5 x the null-thread latency of `single-lock` on one
//!   processor, measured first in the same run (row `null_ns_per_thread`).
//!
//! Metrics: `ns_per_thread` (work included), `elapsed_s` (only for points
//! that ran every thread within the budget) and `speedup`: ALL89's
//! definition, time of `single-lock` on 1 processor over each strategy's on
//! P processors, within the same setting (as a ratio of ns per thread, so
//! equal numbers of threads are compared). The work of a thread is drawn
//! from a seeded generator per chain, so every strategy runs the same work
//! sequence at a given P; between different P the draws differ (each chain
//! has its own seed), which moves the total work by about
//! 1/sqrt(3 x total) (~1.5% at 1,000 threads).
//!
//! Each setting's `total` is sized by a pilot run (`single-lock`, one
//! processor) so that a 1-processor point takes about 0.2 s in `--quick`
//! (1.5 s otherwise), between 1,000 and 1,000,000 threads; `--quick` takes
//! the median of at most 3 runs per point.

use super::tm_null_threads::{
    chain_point, cmp_word, pin, processors, processors_axis, speedup_rows,
};
use crate::harness::{Ctx, Experiment, figure, ns, ratio, threads_panel, value};
use crate::kernels::locks::{work_iters_for_ns, work_ns_per_iter};
use crate::kernels::threads::ChainCfg;
use crate::output::data::Row;
use crate::output::machine::Machine;
use crate::output::plot::{Figure, Scale};
use crate::output::report::{Section, Table, Verdict};
use crate::registry::threads::NAMES;

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "tm-user-work",
    title: "Null-thread chain with uniform random user work per thread: speedup per strategy",
    source: "ALL89 Fig. 3",
    uses_locks: false,
    claims: &[],
    run,
    figure: draw,
    assess,
};

/// The paper's mean user work per thread, in microseconds.
const PAPER_WORK_US: f64 = 300.0;
/// The paper's null-thread latency on the Symmetry, in microseconds, as
/// derived from §III-F (Presto's 600 us being "an order of magnitude worse
/// than our threads").
const PAPER_THREAD_US: f64 = 60.0;
/// Mean work / null-thread latency on the Symmetry: 300 / 60.
const PAPER_RATIO: f64 = PAPER_WORK_US / PAPER_THREAD_US;

const SETTINGS: [&str; 2] = ["300us", "paper-ratio"];
/// Strategies whose control-block and stack free lists are per processor.
const LOCAL_FREE_LISTS: [&str; 3] = ["local-freelist", "idle-queue", "local-readyq"];
/// Strategies whose free lists are shared (under one lock or their own).
const CENTRAL_FREE_LISTS: [&str; 2] = ["single-lock", "multi-lock"];
const BASE: &str = "single-lock";

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let sweep = processors(ctx);
    let budget = ctx.budget(1_000, 20_000);
    // Time a point should take on one processor: the total is sized to it.
    let target_s = if ctx.quick { 0.2 } else { 1.5 };
    // --quick: at most 3 repeats (a 1-processor point costs `target_s`).
    let repeats = |p: usize| {
        if ctx.quick {
            ctx.repeats(p).min(3)
        } else {
            ctx.repeats(p)
        }
    };
    let bar = ctx.bar(
        EXPERIMENT.id,
        1 + SETTINGS.len() * NAMES.len() * sweep.len(),
    );
    bar.set_message("null single-lock x1");
    // The null-thread latency the paper-ratio work is scaled from.
    let null_total: u64 = if ctx.quick { 200_000 } else { 1_000_000 };
    let null = chain_point(
        BASE,
        ctx.repeats(1),
        &ChainCfg {
            processors: 1,
            total: null_total,
            work_iters: 0,
            budget,
            pin: pin(ctx, 1),
        },
    )?;
    let null_ns = null.ns_per_thread();
    let mut rows = vec![
        Row::new(
            EXPERIMENT.id,
            BASE,
            1,
            false,
            "null_ns_per_thread",
            null_ns,
            "ns",
        )
        .param("setting", "null")
        .param("work_us", 0)
        .param("total", null_total)
        .param("threads_run", null.threads)
        .param("completed", null.completed),
    ];
    bar.inc(1);
    for setting in SETTINGS {
        let work_ns = match setting {
            "300us" => PAPER_WORK_US * 1e3,
            _ => PAPER_RATIO * null_ns,
        };
        let work_iters = work_iters_for_ns(work_ns);
        // Work actually asked for, after rounding to whole iterations.
        let work_us = work_iters as f64 * work_ns_per_iter() / 1e3;
        // Size the total by a pilot run of a tenth of the expected size
        // (it sees the machine's load as the points will).
        let expected = (target_s * 1e9 / (work_ns + null_ns)) as u64;
        let pilot = chain_point(
            BASE,
            1,
            &ChainCfg {
                processors: 1,
                total: (expected / 10).max(100),
                work_iters,
                budget,
                pin: pin(ctx, 1),
            },
        )?;
        let total = ((target_s * 1e9 / pilot.ns_per_thread()) as u64).clamp(1_000, 1_000_000);
        let total = total.div_ceil(1_000) * 1_000;
        for name in NAMES {
            for &p in &sweep {
                bar.set_message(format!("{setting} {name} x{p}"));
                let cfg = ChainCfg {
                    processors: p,
                    total,
                    work_iters,
                    budget,
                    pin: pin(ctx, p),
                };
                let out = chain_point(name, repeats(p), &cfg)?;
                let base = Row::new(
                    EXPERIMENT.id,
                    name,
                    p as u32,
                    ctx.over(p),
                    "ns_per_thread",
                    out.ns_per_thread(),
                    "ns",
                )
                .param("setting", setting)
                .param("work_us", format!("{work_us:.3}"))
                .param("work_ratio", format!("{:.2}", work_ns / null_ns))
                .param("work_iters", work_iters)
                .param("total", total)
                .param("threads_run", out.threads)
                .param("completed", out.completed)
                .param("pinned", cfg.pin)
                .param("parks", out.report.stats.parks)
                .param("budget_ms", budget.as_millis());
                if out.completed {
                    rows.push(Row {
                        metric: "elapsed_s".into(),
                        value: out.elapsed.as_secs_f64(),
                        unit: "s".into(),
                        ..base.clone()
                    });
                }
                rows.push(base);
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    for setting in SETTINGS {
        let sp = speedup_rows(&rows, EXPERIMENT.id, Some(("setting", setting)));
        rows.extend(sp);
    }
    Ok(rows)
}

/// The `work_us` of a setting's rows, for titles.
fn work_of(rows: &[Row], setting: &str) -> String {
    rows.iter()
        .find(|r| r.get_param("setting") == Some(setting))
        .and_then(|r| r.get_param("work_us"))
        .unwrap_or("?")
        .to_string()
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let panels = SETTINGS
        .iter()
        .map(|s| {
            let title = match *s {
                "300us" => format!("mean work {} us (paper's 300 us)", work_of(rows, s)),
                _ => format!(
                    "mean work {} us (paper's work:thread ratio {PAPER_RATIO})",
                    work_of(rows, s)
                ),
            };
            processors_axis(threads_panel(
                rows,
                "speedup",
                Some(("setting", s)),
                &title,
                "speedup vs single-lock on 1 processor",
                Scale::Linear,
                m.cores(),
            ))
        })
        .collect();
    figure(
        "tm-user-work (ALL89 Fig. 3): speedup with uniform random user work per thread",
        m,
        panels,
    )
}

fn assess(rows: &[Row], m: &Machine) -> crate::harness::Assessment {
    crate::harness::legacy(assess_old(rows, m))
}

fn assess_old(rows: &[Row], m: &Machine) -> Section {
    let cores = m.cores() as u32;
    let sp = |s: &str, n: &str, t: u32| value(rows, n, t, "speedup", Some(("setting", s)));
    let nst = |s: &str, n: &str, t: u32| value(rows, n, t, "ns_per_thread", Some(("setting", s)));
    let null_ns = value(rows, BASE, 1, "null_ns_per_thread", None);
    let mut table = Table::new(&[
        "setting".to_string(),
        "strategy".into(),
        "ns/thread, 1 proc".into(),
        format!("ns/thread, {cores} procs"),
        format!("speedup, {cores} procs"),
        format!("speedup, {} procs (over)", 4 * cores),
    ]);
    let cell = |x: Option<f64>, f: fn(f64) -> String| x.map_or("n/a".to_string(), f);
    // Per setting: spread of speedups at the cores (max / min) and the
    // lowest speedup there.
    let mut summary = Vec::new();
    for s in SETTINGS {
        let mut at_cores = Vec::new();
        for n in NAMES {
            table.push(&[
                format!("{s} ({} us)", work_of(rows, s)),
                format!("`{n}`"),
                cell(nst(s, n, 1), ns),
                cell(nst(s, n, cores), ns),
                cell(sp(s, n, cores), ratio),
                cell(sp(s, n, 4 * cores), ratio),
            ]);
            if let Some(x) = sp(s, n, cores) {
                at_cores.push((*n, x));
            }
        }
        at_cores.sort_by(|a, b| a.1.total_cmp(&b.1));
        summary.push((s, at_cores));
    }
    let describe = |v: &[(&str, f64)]| {
        if v.is_empty() {
            return "n/a".to_string();
        }
        v.iter()
            .map(|(n, x)| format!("`{n}` {}", ratio(*x)))
            .collect::<Vec<_>>()
            .join(" < ")
    };
    let spread = |v: &[(&str, f64)]| match (v.first(), v.last()) {
        (Some(lo), Some(hi)) => hi.1 / lo.1,
        _ => f64::NAN,
    };
    let (coarse, fine) = (&summary[0].1, &summary[1].1);
    // (1) The start of Fig. 3: at few processors, with coarse work, every
    // alternative speeds up nearly linearly and they differ little
    // ("differences appear as the number of processors increases").
    let coarse_ok = !coarse.is_empty()
        && coarse.iter().all(|(_, x)| *x >= 0.8 * f64::from(cores))
        && cmp_word(spread(coarse), 1.0) == "tie";
    // (2) At the paper's grain, the throughput ordering of §III-B/C: the
    // strategies with per-processor free lists (only the ready queue
    // shared, or nothing) beat those whose free lists are shared.
    let group = |names: &[&str]| -> Vec<f64> {
        fine.iter()
            .filter(|(n, _)| names.contains(n))
            .map(|(_, x)| *x)
            .collect()
    };
    let (local, central) = (group(&LOCAL_FREE_LISTS), group(&CENTRAL_FREE_LISTS));
    let local_min = local.iter().copied().fold(f64::INFINITY, f64::min);
    let central_max = central.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let fine_known = !local.is_empty() && !central.is_empty();
    let fine_ok = fine_known && cmp_word(local_min, central_max) == "higher";
    let word = |ok: bool| if ok { "holds" } else { "does not hold" };
    let gained: Vec<String> = fine
        .iter()
        .filter(|(_, x)| cmp_word(*x, 1.0) == "higher")
        .map(|(n, _)| format!("`{n}`"))
        .collect();
    let measured = format!(
        "Null single-lock latency on 1 processor, measured first: {}, so the paper-ratio setting uses \
         {} us of mean work ({PAPER_RATIO} x). Speedup at {cores} processors (vs single-lock on 1 \
         processor, same setting):\n\n\
         - 300 us: {} (spread {}). Every strategy near-linear (speedup >= 0.8 x {cores}) and alike \
         (spread within 5%), as at the start of Fig. 3: **{}**\n\
         - paper-ratio: {} (spread {}). The strategies with per-processor free lists (`local-freelist`, \
         `idle-queue`, `local-readyq`: lowest {}) all above those with shared free lists (`single-lock`, \
         `multi-lock`: highest {}), the throughput ordering of ALL89 §III-B/C: **{}**. Faster with \
         {cores} processors than single-lock on one: {}.\n",
        null_ns.map_or("n/a".into(), ns),
        work_of(rows, "paper-ratio"),
        describe(coarse),
        ratio(spread(coarse)),
        word(coarse_ok),
        describe(fine),
        ratio(spread(fine)),
        if fine_known {
            ratio(local_min)
        } else {
            "n/a".into()
        },
        if fine_known {
            ratio(central_max)
        } else {
            "n/a".into()
        },
        if fine_known {
            word(fine_ok)
        } else {
            "not measured"
        },
        if gained.is_empty() {
            "none".into()
        } else {
            gained.join(", ")
        },
    );
    let verdict = if coarse.is_empty() && !fine_known {
        Verdict::NotMeasurable
    } else if coarse_ok || fine_ok {
        // Fig. 3's divergence at many processors is not measurable here.
        Verdict::Partial
    } else {
        Verdict::Differs
    };
    let share = null_ns.map_or("n/a".into(), |n| {
        format!("{:.2}%", 100.0 * n / (PAPER_WORK_US * 1e3))
    });
    let why = format!(
        "Fig. 3's curves separate at many processors (up to 18-20 on the Symmetry), where the central \
         ready-queue lock saturates; this machine has {cores} cores, so only their start can be drawn and \
         the divergence as P grows is not measurable here. With the paper's 300 us a null thread ({} here \
         against ~60 us on the Symmetry) is {share} of a thread's time, far coarser-grained than on the \
         Symmetry (where it was 20%): that setting can only show the linear start. The paper-ratio \
         setting keeps the Symmetry's grain (work = {PAPER_RATIO} null threads). There a thread usually \
         starts on another core than its creator, and every piece of shared thread-management data it \
         touches (a shared free list's head and lock, a control block last freed by the other core) is a \
         cache-line transfer, on the order of 100 ns here (see `calibrate`), as much as the null thread \
         itself; on the Symmetry a thread took 60 us of instructions and such a miss was cheap. So \
         differences between the strategies can show at {cores} processors already{}. Points beyond \
         {cores} processors (hollow) time-share the cores and cannot speed up further.",
        null_ns.map_or("n/a".into(), ns),
        if fine_ok {
            ", and here they do, in the paper's direction"
        } else {
            "; here they do not follow the paper's throughput ordering"
        },
    );
    Section {
        id: EXPERIMENT.id.into(),
        title: EXPERIMENT.title.into(),
        source: EXPERIMENT.source.into(),
        claim: "\"We modified the test in Table III so that each thread performs an average of 300 us of user \
                work, taken from a uniform distribution. This simulates the behavior of an application with \
                fine-grained parallelism. Fig. 3 graphs speedup for this modified benchmark. Differences appear \
                as the number of processors increases.\" (ALL89 §III-F)"
            .into(),
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

    #[test]
    fn near_linear_coarse_speedup_is_the_measurable_part() {
        let m = Machine {
            logical_cpus: 2,
            ..Machine::detect(true)
        };
        let mut rows = vec![Row::new(
            EXPERIMENT.id,
            BASE,
            1,
            false,
            "null_ns_per_thread",
            100.0,
            "ns",
        )];
        for setting in SETTINGS {
            for n in NAMES {
                // paper-ratio: per-processor free lists gain, shared ones lose.
                let two = match (setting, LOCAL_FREE_LISTS.contains(n)) {
                    ("300us", _) => 510.0,
                    (_, true) => 700.0,
                    (_, false) => 1100.0,
                };
                for (p, v) in [(1u32, 1000.0), (2, two)] {
                    rows.push(
                        Row::new(EXPERIMENT.id, n, p, false, "ns_per_thread", v, "ns")
                            .param("setting", setting)
                            .param("work_us", 1),
                    );
                }
            }
        }
        for setting in SETTINGS {
            let sp = speedup_rows(&rows, EXPERIMENT.id, Some(("setting", setting)));
            assert_eq!(sp.len(), 2 * NAMES.len());
            rows.extend(sp);
        }
        let s = assess_old(&rows, &m);
        assert_eq!(s.verdict, Verdict::Partial, "{}", s.measured);
        assert_eq!(s.measured.matches("**holds**").count(), 2, "{}", s.measured);
        assert_eq!(draw(&rows, &m).panels.len(), 2);
    }
}
