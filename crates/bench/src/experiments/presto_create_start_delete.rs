//! `presto-create-start-delete` — PRESTO Figs. 4-5 (Faust & Levy 1990,
//! §3.4): create, start and delete 1,000,000 null threads on P processors,
//! with a central ready queue against per-processor ready queues, and a
//! user-written scheduler against the built-in one.
//!
//! The kernel is ALL89 Table III ([`crate::kernels::threads::null_chain`]): P
//! chains, each thread creating the next and finishing. Series map
//! PRESTO's curves:
//!
//! | series | strategy | PRESTO |
//! |---|---|---|
//! | `single-lock` | central caches and ready queue under one lock | Original |
//! | `central-readyq` | `local-freelist`: local caches, central locked ready queue | LTQ-FSS |
//! | `local-readyq` | per-processor TAS-locked ready queues, built-in FIFO pool | LTQ-FSS-LRQ |
//! | `local-readyq+user-lifo` | the same with the user-written [`Lifo`] pool | a user scheduler |
//! | `local-readyq+user-priority` | the same with the user-written [`Priority`] heap | a user scheduler |
//!
//! The user pools ([`crate::registry::user_scheduler`]) are written against the
//! public API only, as an application would. Every repeat runs the series
//! in turn (interleaved), so slow drifts of the machine hit all of them
//! alike; the points at 1 processor and at the core count get extra
//! repeats because the user/built-in ratio is judged there.
//!
//! [`Lifo`]: crate::registry::user_scheduler::Lifo
//! [`Priority`]: crate::registry::user_scheduler::Priority

use symmetry_threads::{LocalFreelist, LocalReadyq, SingleLock};

use crate::harness::{Ctx, Experiment, figure, ns, ratio, threads_panel, value};
use crate::kernels::threads::{ChainCfg, ChainOut, null_chain};
use crate::output::data::Row;
use crate::output::machine::Machine;
use crate::output::plot::{Figure, Scale};
use crate::output::report::{Section, Table, Verdict};
use crate::registry::user_scheduler::{LocalReadyqLifo, LocalReadyqPriority};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "presto-create-start-delete",
    title: "Create, start, delete 1,000,000 null threads: central vs local ready queues, user vs built-in scheduler",
    source: "PRESTO Figs. 4-5",
    uses_locks: false,
    claims: &[],
    run,
    figure: draw,
    assess,
};

const BUILTIN: &str = "local-readyq";
const LIFO: &str = "local-readyq+user-lifo";
const PRIO: &str = "local-readyq+user-priority";
const SERIES: &[&str] = &["single-lock", "central-readyq", BUILTIN, LIFO, PRIO];
/// A user scheduler "costs no more than the built-in one" when its time per
/// thread is at most this multiple of the built-in's.
const SAME_COST: f64 = 1.05;
const TOTAL: u64 = 1_000_000;

fn chain(name: &str, cfg: &ChainCfg) -> Option<ChainOut> {
    Some(match name {
        "single-lock" => null_chain::<SingleLock>(cfg),
        "central-readyq" => null_chain::<LocalFreelist>(cfg),
        BUILTIN => null_chain::<LocalReadyq>(cfg),
        LIFO => null_chain::<LocalReadyqLifo>(cfg),
        PRIO => null_chain::<LocalReadyqPriority>(cfg),
        _ => return None,
    })
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let sweep = ctx.sweep();
    let budget = ctx.budget(4_000, 30_000);
    let bar = ctx.bar(EXPERIMENT.id, sweep.len() * SERIES.len());
    let mut rows = Vec::new();
    for &p in &sweep {
        let judged = p == 1 || p == ctx.cores;
        let repeats = if judged {
            if ctx.quick { 9 } else { 15 }
        } else {
            ctx.repeats(p)
        };
        let cfg = ChainCfg {
            processors: p,
            total: TOTAL,
            work_iters: 0,
            budget,
            pin: false,
        };
        let mut outs: Vec<Vec<ChainOut>> = vec![Vec::with_capacity(repeats); SERIES.len()];
        for k in 0..repeats {
            bar.set_message(format!("{p} processors, repeat {}/{repeats}", k + 1));
            for (i, name) in SERIES.iter().enumerate() {
                outs[i].push(chain(name, &cfg).ok_or_else(|| format!("unknown series {name}"))?);
            }
        }
        for (name, mut o) in SERIES.iter().zip(outs) {
            o.sort_by(|a, b| a.ns_per_thread().total_cmp(&b.ns_per_thread()));
            let med = o[o.len() / 2];
            // Spread of the repeats around the median: the noise the
            // user/built-in ratio is judged against.
            let spread =
                (o[o.len() - 1].ns_per_thread() - o[0].ns_per_thread()) / med.ns_per_thread();
            let s = med.report.stats;
            let row = |metric: &str, v: f64, unit: &str| {
                Row::new(EXPERIMENT.id, name, p as u32, ctx.over(p), metric, v, unit)
                    .param("total", med.threads)
                    .param("completed", med.completed)
                    .param("repeats", repeats)
                    .param("spread", format!("{spread:.4}"))
                    .param(
                        "queues_examined_per_dequeue",
                        format!("{:.3}", s.queues_examined as f64 / s.dequeues.max(1) as f64),
                    )
            };
            rows.push(row("elapsed_s", med.elapsed.as_secs_f64(), "s"));
            rows.push(row("ns_per_thread", med.ns_per_thread(), "ns"));
            // The least disturbed repeat: other load on the machine only
            // ever adds time to a fixed amount of work.
            rows.push(row("ns_per_thread_min", o[0].ns_per_thread(), "ns"));
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    figure(
        "presto-create-start-delete (PRESTO Figs. 4-5): create, start, delete 1,000,000 null threads",
        m,
        vec![
            threads_panel(
                rows,
                "elapsed_s",
                None,
                "elapsed time, 1,000,000 null threads",
                "elapsed (s)",
                Scale::Linear,
                m.cores(),
            ),
            threads_panel(
                rows,
                "ns_per_thread",
                None,
                "time per thread (elapsed / threads)",
                "ns per thread (log)",
                Scale::Log,
                m.cores(),
            ),
        ],
    )
}

fn param(rows: &[Row], series: &str, p: u32, key: &str) -> Option<f64> {
    rows.iter()
        .find(|r| r.series == series && r.threads == p && r.metric == "ns_per_thread")
        .and_then(|r| r.get_param(key)?.parse().ok())
}

fn assess(rows: &[Row], m: &Machine) -> crate::harness::Assessment {
    crate::harness::legacy(assess_old(rows, m))
}

fn assess_old(rows: &[Row], m: &Machine) -> Section {
    let cores = m.cores() as u32;
    let v = |s: &str, p: u32| value(rows, s, p, "ns_per_thread", None);
    let e = |s: &str, p: u32| value(rows, s, p, "elapsed_s", None);
    let pmax = rows.iter().map(|r| r.threads).max().unwrap_or(1);
    let mut cols: Vec<u32> = vec![1, cores, pmax];
    cols.dedup();
    let mut header = vec!["series".to_string()];
    header.extend(
        cols.iter()
            .map(|p| format!("{p} proc{}", if *p > cores { " (over)" } else { "" })),
    );
    header.push(format!("best-of-repeats vs {BUILTIN} at 1 / {cores} proc"));
    let mut table = Table {
        header,
        rows: vec![],
    };
    let best = |s: &str, p: u32| value(rows, s, p, "ns_per_thread_min", None);
    let rel = |s: &str, p: u32| Some(best(s, p)? / best(BUILTIN, p)?);
    for &s in SERIES {
        let mut row = vec![s.to_string()];
        for &p in &cols {
            let spread =
                param(rows, s, p, "spread").filter(|_| param(rows, s, p, "repeats") > Some(1.0));
            row.push(match (e(s, p), v(s, p), spread) {
                (Some(el), Some(n), Some(sp)) => {
                    format!("{el:.3} s ({}, spread {:.0}%)", ns(n), 100.0 * sp)
                }
                (Some(el), Some(n), None) => format!("{el:.3} s ({})", ns(n)),
                _ => "n/a".into(),
            });
        }
        row.push(format!(
            "{} / {}",
            rel(s, 1).map_or("n/a".into(), ratio),
            rel(s, cores).map_or("n/a".into(), ratio)
        ));
        table.rows.push(row);
    }
    // PRESTO: local ready queues beat the central one from 2 processors on
    // (best of the repeats, as for the schedulers).
    let lrq_wins = cores >= 2
        && (2..=cores).all(|p| match (best(BUILTIN, p), best("central-readyq", p)) {
            (Some(l), Some(c)) => l < c,
            _ => false,
        });
    let lifo = (rel(LIFO, 1), rel(LIFO, cores));
    let prio = (rel(PRIO, 1), rel(PRIO, cores));
    let same = |r: (Option<f64>, Option<f64>)| matches!(r, (Some(a), Some(b)) if a <= SAME_COST && b <= SAME_COST);
    let lifo_ok = same(lifo);
    let two = |r: (Option<f64>, Option<f64>)| {
        format!(
            "{} at 1 processor, {} at {cores}",
            r.0.map_or("n/a".into(), ratio),
            r.1.map_or("n/a".into(), ratio)
        )
    };
    let spread = |p: u32| {
        [BUILTIN, LIFO]
            .iter()
            .filter_map(|s| param(rows, s, p, "spread"))
            .fold(0.0f64, f64::max)
    };
    let from_2 = if cores <= 2 {
        format!("at {cores} processors")
    } else {
        format!("at every processor count from 2 to {cores}")
    };
    let measured = format!(
        "Latency at 1 processor (create + start + finish of one null thread): `single-lock` {}, \
         `central-readyq` {}, `local-readyq` {} (PRESTO: 270 us for modified Presto, 76.74 us for its \
         FastThreads-style package, FastThreads about 40 us). At {cores} processors (best of the \
         repeats): `central-readyq` {} per thread, `local-readyq` {} ({}). Best of the interleaved repeats, the user-written LIFO \
         pool costs {} the built-in FIFO pool (the repeats spread up to {:.0}% at 1 processor and \
         {:.0}% at {cores}, from other load on the machine); the user-written priority heap costs {}.",
        v("single-lock", 1).map_or("n/a".into(), ns),
        v("central-readyq", 1).map_or("n/a".into(), ns),
        v(BUILTIN, 1).map_or("n/a".into(), ns),
        best("central-readyq", cores).map_or("n/a".into(), ns),
        best(BUILTIN, cores).map_or("n/a".into(), ns),
        match (best("central-readyq", cores), best(BUILTIN, cores)) {
            (Some(c), Some(l)) => format!("local / central = {}", ratio(l / c)),
            _ => "n/a".into(),
        },
        two(lifo),
        100.0 * spread(1),
        100.0 * spread(cores),
        two(prio),
    );
    let mut measured = measured;
    if !lrq_wins && cores >= 2 {
        measured.push_str(&format!(
            "\n\nLocal ready queues do not beat the central one at {cores} processors here. Random \
             placement sends {:.0}% of the new threads to another processor's queue (`local-readyq` \
             examines {} queues per dequeue at {cores} processors), so a thread's control block \
             usually changes cores; with {cores} processors the central queue's lock, held for a few \
             nanoseconds, is not yet the bottleneck it was on PRESTO's Symmetry.",
            100.0 * f64::from(cores - 1) / f64::from(cores),
            param(rows, BUILTIN, cores, "queues_examined_per_dequeue")
                .map_or("n/a".into(), |x| format!("{x:.2}")),
        ));
    }
    // When the LIFO pool misses the threshold, say whether the run could
    // tell: a gap smaller than the spread of the repeats is noise.
    let lifo_note = if lifo_ok {
        "The pool is a type parameter, so a user's discipline is compiled into the dispatch path like \
         the built-in one, and the measurement shows no cost for it: Presto's abstraction cost does not \
         arise."
            .to_string()
    } else {
        let worst = [lifo.0.map(|r| (1, r)), lifo.1.map(|r| (cores, r))]
            .into_iter()
            .flatten()
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match worst {
            Some((p, r)) if spread(p) > r - 1.0 => format!(
                "The LIFO pool misses the threshold by a gap ({} at {p} processor(s)) smaller than the \
                 spread of the repeats there ({:.0}%): this run cannot tell the two pools apart; run \
                 it on a quiet machine (the pool is a type parameter, compiled into the dispatch path \
                 like the built-in one).",
                ratio(r),
                100.0 * spread(p)
            ),
            _ => {
                "The LIFO pool costs measurably more than the built-in one in this run.".to_string()
            }
        }
    };
    let verdict = match (lrq_wins, lifo_ok) {
        (true, true) => Verdict::Holds,
        (false, false) => Verdict::Differs,
        _ => Verdict::Partial,
    };
    Section {
        id: EXPERIMENT.id.into(),
        title: EXPERIMENT.title.into(),
        source: EXPERIMENT.source.into(),
        claim: "Per-processor ready queues (LTQ-FSS-LRQ) \"eliminate the performance degradation caused by \
                contention for the lock protecting the single, shared ready queue\", improving performance \
                \"from 2 processors on upwards\" (PRESTO §3.4, Fig. 4). Presto's flexibility cost latency: \
                create + start + delete took 270 us, against 76.74 us for a less general package and about \
                40 us for FastThreads; 24% of startup went to the abstraction layers that let a user \
                replace the scheduler. The issue's requirement: a user-written scheduler costs no more \
                than the built-in one."
            .into(),
        measured,
        verdict,
        why: format!(
            "Holds requires: `local-readyq` faster per thread than `central-readyq` (best of the \
             repeats) {from_2}; and the user-written LIFO pool within {SAME_COST}x of the built-in \
             pool at 1 and at {cores} processors, comparing the best of the interleaved repeats (other load \
             only adds time, so the best repeat is the least disturbed; medians are in the CSV). {lifo_note} \
             The priority heap is reported, not judged: it does \
             more work per operation by design. With {cores} cores, only the first steps of PRESTO's \
             20-processor curves can be seen; points past {cores} processors are oversubscribed."
        ),
        table: Some(table),
        svg: Some(format!("{}.svg", EXPERIMENT.id)),
        provenance: None,
    }
}
