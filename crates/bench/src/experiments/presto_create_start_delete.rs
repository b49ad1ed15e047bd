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
//! alike, and each series' time per thread is divided by the built-in
//! pool's in the same repeat (`cost_vs_builtin`): the spread of those
//! paired ratios is the noise the verdicts are judged against. The points
//! at 1 processor and at the core count get extra repeats because the
//! user/built-in ratio is judged there.
//!
//! [`Lifo`]: crate::registry::user_scheduler::Lifo
//! [`Priority`]: crate::registry::user_scheduler::Priority

use symmetry_locks::Tas;
use symmetry_threads::{Fifo, LocalFreelist, LocalReadyq, SingleLock};

use crate::harness::prelude::*;
use crate::kernels::threads::{ChainCfg, ChainOut, null_chain};
use crate::registry::threads::{chain_cfg, ends};
use crate::registry::user_scheduler::{LocalReadyqLifo, LocalReadyqPriority};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "presto-create-start-delete",
    title: "Create, start, delete 1,000,000 null threads: central vs local ready queues, user vs built-in scheduler",
    source: "PRESTO Figs. 4-5",
    schedule: Schedule::LAST,
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// PRESTO §3.4 (Figs. 4-5) and the SPEC's requirement on user-written
/// schedulers (§2.2). Both compare series run in the same repeat.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "local-readyq-wins",
        paper: "Per-processor ready queues (LTQ-FSS-LRQ) \"eliminate the performance degradation caused by \
                contention for the lock protecting the single, shared ready queue\"; \"the figure shows \
                improved performance from 2 processors on upwards\" (PRESTO §3.4, Fig. 4).",
        rule: "at every P from 2 to all cores, `central-readyq` takes longer per thread than `local-readyq` \
               in the same repeat (their ratio is above 1 beyond its repeat spread)",
        needs: Needs::cores(2),
        judge: local_readyq_wins,
    },
    Claim {
        key: "user-scheduler-free",
        paper: "Presto's flexibility cost latency: 24% of thread startup went to \"extra layers of \
                abstraction\" that let an application replace the default FIFO scheduling discipline; \
                create + start + delete took 270 us, against 76.74 us for a less general package and about \
                40 us for FastThreads (PRESTO §3.4). The SPEC's requirement (§2.2): a user-written scheduler \
                costs no more than the built-in one.",
        rule: "at P = 1 and at P = all cores, the user-written LIFO pool (`local-readyq+user-lifo`) takes at \
               most 1.05x the time per thread of the built-in FIFO pool (`local-readyq`) in the same repeat",
        needs: Needs::NONE,
        judge: user_scheduler_free,
    },
];

/// The metric of the paired ratios: a series' time per thread over the
/// built-in pool's in the same repeat.
const COST: &str = "cost_vs_builtin";
/// The central ready queue of PRESTO's LTQ-FSS.
const CENTRAL: &str = "central-readyq";
const BUILTIN: &str = "local-readyq";
const LIFO: &str = "local-readyq+user-lifo";
const PRIO: &str = "local-readyq+user-priority";
const SERIES: &[&str] = &["single-lock", CENTRAL, BUILTIN, LIFO, PRIO];
/// A user scheduler "costs no more than the built-in one" when its time per
/// thread is at most this multiple of the built-in's
/// (`user-scheduler-free`).
const SAME_COST: f64 = 1.05;
const TOTAL: u64 = 1_000_000;

fn chain(name: &str, cfg: &ChainCfg) -> Option<ChainOut> {
    Some(match name {
        "single-lock" => null_chain::<SingleLock<Tas, Fifo>>(cfg),
        CENTRAL => null_chain::<LocalFreelist<Tas, Fifo>>(cfg),
        BUILTIN => null_chain::<LocalReadyq<Tas, Fifo>>(cfg),
        LIFO => null_chain::<LocalReadyqLifo>(cfg),
        PRIO => null_chain::<LocalReadyqPriority>(cfg),
        _ => return None,
    })
}

/// `(hi - lo) / median` of a spread (the CSV's `spread` column); 0 for a
/// median of 0.
fn relative_range(s: &Spread) -> f64 {
    if s.median == 0.0 {
        0.0
    } else {
        ((s.hi - s.lo) / s.median).abs()
    }
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let sweep = ctx.sweep();
    let budget = ctx.budget(4_000, 30_000);
    let bar = ctx.bar(EXPERIMENT.id, sweep.len() * SERIES.len());
    let mut rows = Vec::new();
    for &p in &sweep {
        let judged = p == 1 || p == ctx.cores;
        let repeats = if judged {
            ctx.rounds(if ctx.quick { 9 } else { 15 })
        } else {
            ctx.repeats(p)
        };
        let cfg = ChainCfg {
            pin: false,
            ..chain_cfg(ctx, p, TOTAL, 0, budget)
        };
        // Every series once per repeat, in turn.
        let runs = try_in_rounds(repeats, SERIES.len(), |k, i| {
            if i == 0 {
                bar.set_message(format!("{p} processors, repeat {}/{repeats}", k + 1));
            }
            chain(SERIES[i], &cfg).ok_or_else(|| format!("unknown series {}", SERIES[i]))
        })?;
        let per_thread =
            |outs: &[ChainOut]| -> Vec<f64> { outs.iter().map(ChainOut::ns_per_thread).collect() };
        let builtin = SERIES
            .iter()
            .position(|s| *s == BUILTIN)
            .map(|i| per_thread(&runs[i]))
            .ok_or("the built-in pool is not among the series")?;
        for (name, outs) in SERIES.iter().zip(&runs) {
            let per = per_thread(outs);
            let secs: Vec<f64> = outs.iter().map(|o| o.elapsed.as_secs_f64()).collect();
            // The median repeat by time per thread (the upper middle one
            // for an even count) and the fastest one.
            let mut sorted = outs.clone();
            sorted.sort_by(|a, b| a.ns_per_thread().total_cmp(&b.ns_per_thread()));
            let (Some(per_spread), Some(secs_spread), Some(med), Some(best)) = (
                Spread::of(&per),
                Spread::of(&secs),
                sorted.get(sorted.len() / 2),
                sorted.first(),
            ) else {
                return Err(format!("{name}, {p} processors: no repeat measured"));
            };
            let st = med.report.stats;
            // `spread`: the relative range of the time per thread (of the
            // paired ratio for `cost_vs_builtin`); `lo`/`hi`: the point's
            // own repeats, where it has them.
            let row = |metric: &str, v: f64, unit: &str, s: Option<&Spread>, range: &Spread| {
                let examined = st.queues_examined as f64 / st.dequeues.max(1) as f64;
                let row = Row::new(EXPERIMENT.id, name, p as u32, ctx.over(p), metric, v, unit)
                    .param("total", med.threads)
                    .param("completed", outs.iter().all(|o| o.completed))
                    .param("repeats", repeats)
                    .param("spread", format!("{:.4}", relative_range(range)))
                    .param("queues_examined_per_dequeue", format!("{examined:.3}"));
                match s {
                    Some(s) => row.with_spread(s),
                    None => row,
                }
            };
            let secs = med.elapsed.as_secs_f64();
            rows.push(row("elapsed_s", secs, "s", Some(&secs_spread), &per_spread));
            let ns = med.ns_per_thread();
            rows.push(row(NS, ns, "ns", Some(&per_spread), &per_spread));
            // The least disturbed repeat: other load on the machine only
            // ever adds time to a fixed amount of work.
            let min = row(
                "ns_per_thread_min",
                best.ns_per_thread(),
                "ns",
                None,
                &per_spread,
            );
            rows.push(min.param(crate::output::data::STAT, "min"));
            if *name != BUILTIN {
                // Paired with the built-in pool's run of the same repeat,
                // so a drift of the machine during the sweep cancels; the
                // interval is the median's 95% one, not the full range, so
                // that one disturbed repeat among 9 or 15 does not decide.
                let s = Spread::paired_ratio(&per, &builtin)
                    .ok_or_else(|| format!("{name}, {p} processors: no paired repeat"))?;
                rows.push(row(COST, s.median, "ratio", Some(&s), &s));
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let lines = Lines::new(rows, m);
    let per_thread = "time per thread (elapsed / threads)";
    figure(
        "presto-create-start-delete (PRESTO Figs. 4-5): create, start, delete 1,000,000 null threads",
        m,
        vec![
            lines.of(
                "elapsed_s",
                "elapsed time, 1,000,000 null threads",
                "elapsed (s)",
                Scale::Linear,
            ),
            lines.of(NS, per_thread, "ns per thread (log)", Scale::Log),
        ],
    )
}

/// Time per thread.
const NS: &str = "ns_per_thread";

/// The first row of `metric` for `series` at `p` processors measured with
/// every processor on a core of its own (a point oversubscribed where it
/// was measured says nothing of contention between processors).
fn point<'a>(d: &Data<'a>, metric: &str, series: &str, p: u32) -> Option<&'a Row> {
    d.select(Sel::point(metric, series, p))
        .find(|r| !r.oversubscribed)
}

/// `series`' time per thread over the built-in pool's in the same repeat,
/// at `p` processors (see [`point`]).
fn cost(d: &Data<'_>, series: &str, p: u32) -> Option<Estimate> {
    d.at(Sel::point(COST, series, p))
}

/// Processor counts as text, e.g. `2, 3, 5`, the first six and how many
/// more.
fn list_ps(ps: &[u32]) -> String {
    let shown = join(ps.iter().take(6).map(u32::to_string), ", ");
    match ps.len().saturating_sub(6) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// The paired ratios of `series` at `ps`, judged each by `judge` and
/// combined with [`Outcome::all`]; missing points make it not measurable.
fn judge_points(
    d: &Data<'_>,
    series: &str,
    ps: &[u32],
    judge: impl Fn(Estimate) -> Outcome,
) -> Finding {
    let what = format!("`{series}` / `{BUILTIN}` per thread");
    let missing: Vec<u32> = ps
        .iter()
        .copied()
        .filter(|&t| cost(d, series, t).is_none())
        .collect();
    if ps.is_empty() {
        return Finding::not_measurable("no processor count to judge");
    }
    if !missing.is_empty() {
        return Finding::missing(&format!(
            "{what} at P = {} (not oversubscribed)",
            list_ps(&missing)
        ));
    }
    let pts: Vec<(u32, Estimate)> = ps
        .iter()
        .filter_map(|&t| Some((t, cost(d, series, t)?)))
        .collect();
    let outcomes: Vec<Outcome> = pts.iter().map(|&(_, e)| judge(e)).collect();
    let evidence = if pts.len() <= 4 {
        let each = pts.iter().map(|(t, e)| format!("P = {t}: {}", e.show(2)));
        format!("{what}, same repeat: {}", join(each, "; "))
    } else {
        let held = outcomes.iter().filter(|o| **o == Outcome::Holds).count();
        let by = |a: &&(u32, Estimate), b: &&(u32, Estimate)| a.1.value.total_cmp(&b.1.value);
        let show =
            |p: Option<&(u32, Estimate)>| na(p, |(t, e)| format!("{} at P = {t}", e.show(2)));
        format!(
            "{what}, same repeat: holds at {held} of {} points; lowest {}, highest {}",
            pts.len(),
            show(pts.iter().min_by(by)),
            show(pts.iter().max_by(by)),
        )
    };
    Finding::new(Outcome::all(outcomes), evidence)
}

/// `local-readyq-wins`: at every P from 2 to all cores, `central-readyq`
/// takes longer per thread than `local-readyq` in the same repeat.
fn local_readyq_wins(d: &Data<'_>, m: &Machine) -> Finding {
    let p = m.cores() as u32;
    let from_2: Vec<u32> = (2..=p).collect();
    judge_points(d, CENTRAL, &from_2, |e| {
        rule::greater(e, Estimate::exact(1.0))
    })
}

/// `user-scheduler-free`: at P = 1 and at all cores, the user-written LIFO
/// pool takes at most [`SAME_COST`] times the built-in pool's time per
/// thread in the same repeat.
fn user_scheduler_free(d: &Data<'_>, m: &Machine) -> Finding {
    let ends = ends(m.cores() as u32);
    judge_points(d, LIFO, &ends, |e| rule::at_most(e, SAME_COST))
}

fn assess(rows: &[Row], m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let p = m.cores() as u32;
    Assessment {
        measured: measured(&d, p),
        notes: notes(&d, p, m),
        table: Some(table(&d, p)),
    }
}

/// What was measured, from the rows.
fn measured(d: &Data<'_>, p: u32) -> String {
    let v = |s: &str, t: u32| na(point(d, NS, s, t), |r| ns(r.value));
    let c = |s: &str, t: u32| na(cost(d, s, t), |e| e.show(2));
    let paired = ["single-lock", CENTRAL, LIFO, PRIO].iter().map(|s| {
        if p > 1 {
            format!("`{s}` {} at 1, {} at {p}", c(s, 1), c(s, p))
        } else {
            format!("`{s}` {}", c(s, 1))
        }
    });
    format!(
        "Latency at 1 processor (create + start + finish of one null thread, median of the repeats): \
         `single-lock` {}, `{CENTRAL}` {}, `{BUILTIN}` {} (PRESTO: 270 us for modified Presto, 76.74 us \
         for its FastThreads-style package, FastThreads about 40 us). At {p} processor{}: `{CENTRAL}` {} \
         per thread, `{BUILTIN}` {}. Each series' time per thread over `{BUILTIN}`'s in the same \
         repeat (median, and the median's 95% interval, or the range of fewer than 9 repeats): {}.",
        v("single-lock", 1),
        v(CENTRAL, 1),
        v(BUILTIN, 1),
        if p == 1 { "" } else { "s" },
        v(CENTRAL, p),
        v(BUILTIN, p),
        join(paired, "; "),
    )
}

/// Explanations drawn from the rows and the machine's core count.
fn notes(d: &Data<'_>, p: u32, m: &Machine) -> String {
    let mut out = Vec::new();
    let examined = point(d, NS, BUILTIN, p).and_then(|r| {
        r.get_param("queues_examined_per_dequeue")?
            .parse::<f64>()
            .ok()
    });
    if p >= 2
        && let Some(q) = examined
    {
        out.push(format!(
            "With random placement over {p} ready queues, a new thread lands on another processor's \
             queue with probability {:.0}%; `{BUILTIN}` examined {q:.2} queues per dequeue at {p} \
             processors.",
            100.0 * f64::from(p - 1) / f64::from(p)
        ));
    }
    out.push(format!(
        "The pools are type parameters, compiled into the dispatch path alike; the priority heap \
         (`{PRIO}`) is reported, not judged: a heap does more work per operation than a FIFO by design."
    ));
    if let Some((lo, hi)) = d.over_range(Sel::metric(NS), m.cores()) {
        out.push(format!(
            "Points from {lo} to {hi} processors are oversubscribed (processors share cores) and are \
             not judged."
        ));
    }
    out.join(" ")
}

/// Time per thread at 1 processor, at all cores and at the largest count
/// measured; the paired ratio to the built-in pool at 1 and all cores.
fn table(d: &Data<'_>, p: u32) -> Table {
    let cols = d.columns(Sel::metric(NS), p);
    let mut header = vec!["series".to_string()];
    header.extend(cols.iter().map(|&(t, o)| {
        format!(
            "ns/thread, {t} proc{}",
            if o { " (oversubscribed)" } else { "" }
        )
    }));
    let ends = ends(p);
    header.extend(ends.iter().map(|t| format!("vs `{BUILTIN}`, {t} proc")));
    let mut table = Table::new(&header);
    for &s in SERIES {
        let mut row = vec![s.to_string()];
        for &(t, _) in &cols {
            row.push(na(d.estimate(Sel::point(NS, s, t)), |e| e.show(0)));
        }
        for &t in &ends {
            row.push(if s == BUILTIN {
                "1".into()
            } else {
                na(cost(d, s, t), |e| e.show(2))
            });
        }
        table.rows.push(row);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::testing::{self, Rows, big_metal, small_vm, verdict};
    use crate::output::report::Verdict;

    /// Rows for `m` at every P from 1 to all cores and at 2x cores: time per
    /// thread for every series and the paired ratios, `central-readyq` at
    /// `central` and the LIFO pool at `lifo` times the built-in pool from
    /// P = 2 on (`lifo` also at P = 1), with a repeat spread of `rel`.
    fn rows(m: &Machine, central: f64, lifo: f64, rel: f64) -> Vec<Row> {
        let cores = m.cores() as u32;
        let at = Rows::new(&EXPERIMENT, m).rel(rel);
        let mut out = Vec::new();
        for t in (1..=cores).chain([2 * cores]) {
            for &s in SERIES {
                let ratio = match s {
                    BUILTIN => 1.0,
                    CENTRAL if t == 1 => 1.0,
                    CENTRAL => central,
                    LIFO => lifo,
                    _ => 1.5,
                };
                let per = 100.0 * ratio * f64::from(t).sqrt();
                let row = |metric: &str, v: f64| {
                    let r = at.row(s, t, metric, v).param("total", "1000000");
                    r.param("completed", "true")
                };
                out.push(row("elapsed_s", per * 1e-3));
                out.push(row(NS, per));
                if s != BUILTIN {
                    out.push(row(COST, ratio));
                }
            }
        }
        out
    }

    #[test]
    fn verdicts_reach_every_case() {
        for m in [small_vm(), big_metal()] {
            let v = |central, lifo, rel| verdict(&EXPERIMENT, &rows(&m, central, lifo, rel), &m);
            assert_eq!(v(1.5, 1.0, 0.01), Verdict::Holds);
            assert_eq!(v(0.7, 1.3, 0.01), Verdict::Differs);
            assert_eq!(v(1.5, 1.3, 0.01), Verdict::Partial);
            // Differences inside the repeat spread are ties, not verdicts.
            assert_eq!(v(1.1, 1.05, 0.2), Verdict::Indistinct);
        }
        // Data from the small machine judged for the big one: no point at
        // P = all cores that was not oversubscribed.
        let small = rows(&small_vm(), 1.5, 1.0, 0.01);
        let s = EXPERIMENT.section(&small, &big_metal());
        assert_eq!(s.verdict, Verdict::NotMeasurable);
        testing::assert_says(&s.measured, "not in this run's data");
        // One core: the ready-queue rule needs two; the scheduler rule is
        // judged at P = 1 alone.
        let one = testing::machine(1, true);
        assert_eq!(
            verdict(&EXPERIMENT, &rows(&one, 1.5, 1.0, 0.01), &one),
            Verdict::Holds
        );
    }

    #[test]
    fn one_tie_among_many_points_is_a_tie() {
        let m = big_metal();
        let mut rows = rows(&m, 1.5, 1.0, 0.01);
        for r in rows
            .iter_mut()
            .filter(|r| r.metric == COST && r.series == CENTRAL && r.threads == 17)
        {
            *r = Rows::new(&EXPERIMENT, &m)
                .rel(0.05)
                .row(CENTRAL, 17, COST, 1.01);
        }
        let f = testing::findings(&EXPERIMENT, &rows, &m);
        assert_eq!(f[0].outcome, Outcome::Tie);
        assert!(f[0].evidence.contains("62 of 63"), "{}", f[0].evidence);
    }

    #[test]
    fn hostile_rows_do_not_panic() {
        let m = small_vm();
        testing::assert_hostile_rows_do_not_panic(&EXPERIMENT, rows(&m, 1.5, 1.0, 0.01), &m);
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, 1.5, 1.0, 0.01));
    }

    #[test]
    fn rule_text_states_the_threshold() {
        assert!(CLAIMS[1].rule.contains(&format!("{SAME_COST}x")));
    }

    #[test]
    fn list_of_processor_counts() {
        assert_eq!(list_ps(&[2, 3]), "2, 3");
        assert_eq!(
            list_ps(&(2..=10).collect::<Vec<_>>()),
            "2, 3, 4, 5, 6, 7 and 3 more"
        );
    }
}
