//! `presto-create-delete` — PRESTO Fig. 3 (Faust & Levy 1990, §3.3):
//! processors cooperatively create and delete 1,000,000 threads that are
//! never started, so only the thread caches (free lists) are exercised.
//!
//! Each of P processors runs one user thread that loops
//! `Handle::create(null)` (PRESTO's create without start: a control block
//! from the free lists, the closure stored in it) and drops the result
//! (delete: the control block goes back). The user threads meet at a spin
//! barrier first, so the P loops overlap; the clock runs from the barrier to
//! the last loop's end. Series map PRESTO's curves:
//!
//! | series | free lists | PRESTO |
//! |---|---|---|
//! | `single-lock` | one central list, under the one lock | Original (shared, locked caches) |
//! | `multi-lock` | central list with its own lock | Original |
//! | `local-freelist` | per processor, balanced through a locked pool | LTQ (local thread caches + central pool) |
//!
//! Stacks: in this runtime, as in ALL89, a stack is bound only when a
//! thread starts, so create + delete without start touches no stack at
//! all; that is what PRESTO's LTQ-FSS (fixed-size stacks bound once) was
//! after. The second part measures why stacks are pooled in the first
//! place: `stack-fresh-mmap` (a stack as a mapping of its own: `mmap`,
//! `mprotect` of all but the guard page, `munmap`; symmetry-threads now
//! carves stacks from slabs instead, see `tm-million`),
//! `stack-fresh-mmap-touch` (the same system calls, plus the first write to
//! the top page, i.e. the page fault a starting thread takes) and
//! `stack-pooled` (pop a stack from a free list, push it back).

use symmetry_threads::DEFAULT_STACK_SIZE;

use crate::harness::prelude::*;
use crate::kernels::threads::{CreateDeleteOut, create_delete, fresh_stack, pooled_stack};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "presto-create-delete",
    title: "Create and delete 1,000,000 threads without start; fresh vs pooled stacks",
    source: "PRESTO Fig. 3",
    schedule: Schedule::LAST,
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// PRESTO §3.3 (Fig. 3) and the SPEC's stack pooling (§2.2, after ALL89).
/// The cache claims compare 1 processor with P = all cores, the most
/// processors the machine runs without time-sharing cores.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "local-caches-scale",
        paper: "\"The local thread caches with fixed stacks (curve LTQ-FSS) version shows no performance \
                degradation. An inverse plot of this curve, giving throughput instead of elapsed time, would \
                show an almost linear increase in the rate of thread creation\" (PRESTO §3.3, Fig. 3, up to \
                20 processors).",
        rule: "the creation rate of `local-freelist` (threads created and deleted per second) at P = all \
               cores is at least 1.2x its rate at P = 1",
        needs: Needs::cores(2),
        judge: local_caches_scale,
    },
    Claim {
        key: "local-beats-central",
        paper: "Original Presto's performance \"degrades due to contention for the spinlocks protecting the \
                shared caches of threads and stacks\"; \"the local thread cache implementation (curve LTQ) \
                eliminates this lock contention\" (PRESTO §3.3, Fig. 3).",
        rule: "from P = 1 to P = all cores, the creation rate of `local-freelist` gains more (a larger ratio) \
               than that of `single-lock`",
        needs: Needs::cores(2),
        judge: local_beats_central,
    },
    Claim {
        key: "stacks-pooled",
        paper: "Stacks are pooled because a fresh one is expensive: \"a fresh mmap costs ~10 us here, a reused \
                stack ~6 ns\" (SPEC §2.2, after ALL89 §II); PRESTO bound fixed-size stacks once to avoid \
                stack allocation on create (§3.3).",
        rule: "a fresh stack (`stack-fresh-mmap`: mmap + mprotect + munmap) costs at least 100x a pooled one \
               (`stack-pooled`)",
        needs: Needs::NONE,
        judge: |d, _| stacks_pooled(d),
    },
];

/// The least gain in creation rate from 1 processor to all cores that
/// counts as scaling (`local-caches-scale`).
const MIN_SCALING: f64 = 1.2;
/// The least cost of a fresh stack, as a multiple of a pooled one, that
/// makes pooling worth it (`stacks-pooled`).
const MIN_FRESH_OVER_POOLED: f64 = 100.0;

const STRATEGIES: &[&str] = &["single-lock", "multi-lock", "local-freelist"];
const TOTAL: u64 = 1_000_000;
const STACK_SERIES: &[&str] = &["stack-fresh-mmap", "stack-fresh-mmap-touch", "stack-pooled"];

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let sweep = ctx.sweep();
    let budget = ctx.budget(3_000, 30_000);
    let bar = ctx.bar(
        EXPERIMENT.id,
        STRATEGIES.len() * sweep.len() + STACK_SERIES.len(),
    );
    let per_thread = |o: &CreateDeleteOut| o.elapsed.as_nanos() as f64 / o.threads.max(1) as f64;
    let mut rows = Vec::new();
    for &p in &sweep {
        for &name in STRATEGIES {
            bar.set_message(format!("{name}, {p} processors"));
            let outs = (0..ctx.repeats(p))
                .map(|_| {
                    crate::with_strategy!(name, create_delete(p, TOTAL, budget))
                        .ok_or_else(|| format!("unknown strategy {name}"))
                })
                .collect::<Result<Vec<_>, String>>()?;
            let secs: Vec<f64> = outs.iter().map(|o| o.elapsed.as_secs_f64()).collect();
            let secs_spread = Spread::of(&secs)
                .ok_or_else(|| format!("{name}, {p} processors: no repeat measured"))?;
            // The reported run: the median by time per thread (the upper
            // middle one for an even count).
            let (o, per_spread) = median_of(outs, per_thread);
            let row = |metric: &str, v: f64, unit: &str, s: &Spread| {
                Row::new(EXPERIMENT.id, name, p as u32, ctx.over(p), metric, v, unit)
                    .param("total", o.threads)
                    .param("completed", o.completed)
                    .with_spread(s)
            };
            rows.push(row("elapsed_s", o.elapsed.as_secs_f64(), "s", &secs_spread));
            rows.push(row("ns_per_thread", per_thread(&o), "ns", &per_spread));
            bar.inc(1);
        }
    }
    let (fresh_iters, pooled_iters) = if ctx.quick {
        (2_000, 2_000_000)
    } else {
        (20_000, 20_000_000)
    };
    let reps = if ctx.quick { 3 } else { 5 };
    type StackFn = fn(u64) -> f64;
    let kernels: [(&str, StackFn, u64); 3] = [
        ("stack-fresh-mmap", |n| fresh_stack(n, false), fresh_iters),
        (
            "stack-fresh-mmap-touch",
            |n| fresh_stack(n, true),
            fresh_iters,
        ),
        ("stack-pooled", pooled_stack, pooled_iters),
    ];
    for (name, f, iters) in kernels {
        bar.set_message(name);
        let samples: Vec<f64> = (0..reps).map(|_| f(iters)).collect();
        let spread = Spread::of(&samples).ok_or_else(|| format!("{name}: no repeat measured"))?;
        let row = Row::new(EXPERIMENT.id, name, 1, false, STACK, spread.median, "ns");
        rows.push(
            row.param("total", iters)
                .param("completed", true)
                .param("stack_bytes", DEFAULT_STACK_SIZE)
                .with_spread(&spread),
        );
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(rows)
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let d = Data::new(rows);
    let stacks = STACK_SERIES
        .iter()
        .filter_map(|s| {
            let v = d.value(Sel::point(STACK, s, 1))?;
            let group = if s.contains("fresh") {
                "fresh"
            } else {
                "pooled"
            };
            Some(Bar::new(s, v, group))
        })
        .collect();
    let title = "elapsed time, 1,000,000 threads";
    figure(
        "presto-create-delete (PRESTO Fig. 3): create + delete 1,000,000 threads, no start",
        m,
        vec![
            Lines::new(rows, m).of("elapsed_s", title, "elapsed (s)", Scale::Linear),
            Panel::Bar(BarPanel {
                title: format!(
                    "one {} KiB stack: fresh vs pooled",
                    DEFAULT_STACK_SIZE / 1024
                ),
                y_label: "ns per stack (log)".into(),
                y_scale: Scale::Log,
                bars: stacks,
                reference_lines: vec![],
            }),
        ],
    )
}

/// The metric of the stack rows.
const STACK: &str = "ns_per_stack";

/// The gain in creation rate of `series` from 1 to `p` processors: time
/// per thread at 1 over time per thread at `p` (elapsed at 1 over elapsed
/// at `p` for the same number of threads), each measured with every
/// processor on a core of its own (a point that was oversubscribed where
/// it was measured says nothing of contention).
fn gain(d: &Data<'_>, series: &str, p: u32) -> Option<Estimate> {
    let at = |p| d.at(Sel::point("ns_per_thread", series, p));
    Some(at(1)?.ratio(at(p)?))
}

/// "Not measured" for `series` at 1 and at `p` processors.
fn missing(series: &str, p: u32) -> Finding {
    Finding::missing(&format!(
        "`{series}` at 1 and at {p} processors (all cores, not oversubscribed)"
    ))
}

/// `local-caches-scale`: the creation rate of `local-freelist` at all
/// cores is at least [`MIN_SCALING`] times its rate at 1 processor.
fn local_caches_scale(d: &Data<'_>, m: &Machine) -> Finding {
    let p = m.cores() as u32;
    let Some(g) = gain(d, "local-freelist", p) else {
        return missing("local-freelist", p);
    };
    Finding::new(
        rule::at_least(g, MIN_SCALING),
        format!(
            "`local-freelist` creation rate at {p} processors / at 1: {}",
            g.show(2)
        ),
    )
}

/// `local-beats-central`: from 1 processor to all cores, `local-freelist`
/// gains more in creation rate than `single-lock`.
fn local_beats_central(d: &Data<'_>, m: &Machine) -> Finding {
    let p = m.cores() as u32;
    match (gain(d, "local-freelist", p), gain(d, "single-lock", p)) {
        (Some(l), Some(c)) => Finding::new(
            rule::greater(l, c),
            format!(
                "gain from 1 to {p} processors: `local-freelist` {}, `single-lock` {}",
                l.show(2),
                c.show(2)
            ),
        ),
        (None, _) => missing("local-freelist", p),
        (_, None) => missing("single-lock", p),
    }
}

/// `stacks-pooled`: a fresh stack costs at least
/// [`MIN_FRESH_OVER_POOLED`] times a pooled one.
fn stacks_pooled(d: &Data<'_>) -> Finding {
    let stack = |s: &str| d.estimate(Sel::point(STACK, s, 1));
    let (Some(f), Some(q)) = (stack("stack-fresh-mmap"), stack("stack-pooled")) else {
        return Finding::missing("`stack-fresh-mmap` and `stack-pooled`");
    };
    let r = f.ratio(q);
    Finding::new(
        rule::at_least(r, MIN_FRESH_OVER_POOLED),
        format!(
            "fresh {} ns, pooled {} ns per stack: {}x",
            f.show(0),
            q.show(1),
            r.show(0)
        ),
    )
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
    let v = |s: &str, t: u32| na(d.value(Sel::point("ns_per_thread", s, t)), ns);
    let st = |s: &str| d.value(Sel::point(STACK, s, 1));
    let gains = STRATEGIES
        .iter()
        .map(|s| format!("`{s}` {}", na(gain(d, s, p), |g| g.show(2))));
    let fewer = match (
        st("stack-fresh-mmap-touch").or(st("stack-fresh-mmap")),
        st("stack-pooled"),
    ) {
        (Some(f), Some(q)) if q > 0.0 => format!("{:.0}x less", f / q),
        _ => "n/a".into(),
    };
    format!(
        "Create + delete without start, 1,000,000 threads split over P processors: at 1 processor \
         `single-lock` {} per thread (PRESTO's modified Presto: about 70 us on the Symmetry), \
         `local-freelist` {}. Gain in creation rate from 1 to {p} processors (time per thread at 1 \
         over time per thread at {p}, with the interval of the repeats): {}. No stack is touched: \
         stacks are bound at start, so this path is PRESTO's LTQ-FSS without binding a stack to every \
         created thread. A fresh {} KiB stack costs {} (mmap + mprotect + munmap) and {} with its first \
         page touched; a pooled one {}, {fewer}.",
        v("single-lock", 1),
        v("local-freelist", 1),
        join(gains, ", "),
        DEFAULT_STACK_SIZE / 1024,
        na(st("stack-fresh-mmap"), ns),
        na(st("stack-fresh-mmap-touch"), ns),
        na(st("stack-pooled"), ns),
    )
}

/// Explanations drawn from the rows and the machine's core count: how the
/// time of one processor's create + delete changed when `p` processors ran
/// at once, and which points were oversubscribed.
fn notes(d: &Data<'_>, p: u32, m: &Machine) -> String {
    let mut out = Vec::new();
    if p >= 2 {
        // Time per thread is elapsed / all threads; each processor did
        // 1/P of them, so one processor's own time per create + delete is
        // P times that.
        let at = |s, t| d.at(Sel::point("ns_per_thread", s, t));
        let own: Vec<String> = STRATEGIES
            .iter()
            .filter_map(|s| {
                let (one, all) = (at(s, 1)?.value, at(s, p)?.value * f64::from(p));
                Some(format!("`{s}` {} -> {}", ns(one), ns(all)))
            })
            .collect();
        if !own.is_empty() {
            out.push(format!(
                "One processor's own time per create + delete (time per thread x P), alone and with \
                 {p} processors running the loop at once: {}. A rise means the processors slow each \
                 other down; with perfectly local caches it would stay flat.",
                own.join(", ")
            ));
        }
    }
    if let Some((lo, hi)) = d.over_range(Sel::metric("ns_per_thread"), m.cores()) {
        out.push(format!(
            "Points from {lo} to {hi} processors are oversubscribed (processors share cores, so \
             their elapsed time measures time-sharing, not contention) and are not judged."
        ));
    }
    out.join(" ")
}

/// Elapsed time and time per thread at 1 processor, at all cores and at
/// the largest count measured, with the gain; then the stacks.
fn table(d: &Data<'_>, p: u32) -> Table {
    let cols = d.columns(Sel::metric("elapsed_s"), p);
    let mut header = vec!["series".to_string()];
    header.extend(
        cols.iter()
            .map(|&(t, o)| format!("{t} proc{}", if o { " (oversubscribed)" } else { "" })),
    );
    header.push(format!("gain 1 -> {p} proc"));
    let mut table = Table::new(&header);
    for &s in STRATEGIES {
        let mut row = vec![s.to_string()];
        for &(t, _) in &cols {
            let v = |metric| d.value(Sel::point(metric, s, t));
            row.push(match (v("elapsed_s"), v("ns_per_thread")) {
                (Some(el), Some(n)) => format!("{el:.3} s ({})", ns(n)),
                _ => "n/a".into(),
            });
        }
        row.push(na(gain(d, s, p), |g| g.show(2)));
        table.rows.push(row);
    }
    for &s in STACK_SERIES {
        let v = d.value(Sel::point(STACK, s, 1));
        table.rows.push(vec![format!("{s} (per stack)"), na(v, ns)]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::testing::{self, Rows, big_metal, small_vm, verdict};
    use crate::output::report::Verdict;

    /// Rows for `m`: every strategy at 1 processor, at all cores and at 2x
    /// cores (oversubscribed), with `local-freelist` gaining `local` and the
    /// others `central` in creation rate from 1 to all cores; a fresh stack
    /// `fresh` times a pooled one. Every point has a repeat spread of `rel`.
    fn rows(m: &Machine, local: f64, central: f64, fresh: f64, rel: f64) -> Vec<Row> {
        let p = m.cores() as u32;
        let at = Rows::new(&EXPERIMENT, m).rel(rel);
        let mut out = Vec::new();
        for (t, over) in [(1, 1.0), (p, 1.0), (2 * p, 1.5)] {
            for &s in STRATEGIES {
                let (base, g) = match s {
                    "local-freelist" => (30.0, local),
                    _ => (45.0, central),
                };
                let per = if t == 1 { base } else { over * base / g };
                for (metric, v) in [("ns_per_thread", per), ("elapsed_s", per * 1e-3)] {
                    let r = at.row(s, t, metric, v).param("total", "1000000");
                    out.push(r.param("completed", "true"));
                }
            }
        }
        for (s, v) in [
            ("stack-fresh-mmap", 6.0 * fresh),
            ("stack-fresh-mmap-touch", 9.0 * fresh),
            ("stack-pooled", 6.0),
        ] {
            out.push(at.row(s, 1, STACK, v).param("stack_bytes", "262144"));
        }
        out
    }

    #[test]
    fn verdicts_reach_every_case() {
        for m in [small_vm(), big_metal()] {
            let v = |l, c, f, rel| verdict(&EXPERIMENT, &rows(&m, l, c, f, rel), &m);
            assert_eq!(v(1.8, 0.4, 800.0, 0.03), Verdict::Holds);
            assert_eq!(v(0.3, 0.9, 20.0, 0.03), Verdict::Differs);
            assert_eq!(v(0.3, 0.2, 800.0, 0.03), Verdict::Partial);
            assert_eq!(v(1.2, 1.2, 100.0, 0.05), Verdict::Indistinct);
        }
        // Data from the small machine judged for the big one, without the
        // stacks: no point at all cores, nothing to judge.
        let mut small = rows(&small_vm(), 1.8, 0.4, 800.0, 0.03);
        small.retain(|r| r.metric != STACK);
        assert_eq!(
            verdict(&EXPERIMENT, &small, &big_metal()),
            Verdict::NotMeasurable
        );
        // One core: the cache rules need two; the stacks are still judged.
        let one = testing::machine(1, true);
        let s = EXPERIMENT.section(&rows(&one, 1.8, 0.4, 800.0, 0.03), &one);
        assert_eq!(s.verdict, Verdict::Holds);
        testing::assert_says(&s.measured, "needs 2 or more cores");
    }

    #[test]
    fn oversubscribed_points_are_not_judged() {
        // The small machine's 4-processor points, judged as if 4 were all
        // cores of the machine, were oversubscribed where they were run.
        let m = testing::machine(4, true);
        let rows = rows(&small_vm(), 1.8, 0.4, 800.0, 0.03);
        let f = testing::findings(&EXPERIMENT, &rows, &m);
        assert!(matches!(f[0].outcome, rule::Outcome::NotMeasurable(_)));
    }

    #[test]
    fn hostile_rows_do_not_panic() {
        let m = small_vm();
        testing::assert_hostile_rows_do_not_panic(&EXPERIMENT, rows(&m, 1.8, 0.4, 800.0, 0.03), &m);
    }

    #[test]
    fn rule_text_states_the_thresholds() {
        assert!(CLAIMS[0].rule.contains(&format!("{MIN_SCALING}x")));
        assert!(
            CLAIMS[2]
                .rule
                .contains(&format!("{MIN_FRESH_OVER_POOLED}x"))
        );
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, 1.8, 0.4, 800.0, 0.03));
    }

    #[test]
    fn a_quick_run_records_spreads() {
        let ctx = Ctx {
            threads: Some(vec![1, 2]),
            ..Ctx::new(true, 2)
        };
        let rows = run(&ctx).expect("run");
        for r in &rows {
            let (lo, hi, n) = r.spread().expect("every point has its spread");
            assert!(lo <= r.value && r.value <= hi && n >= 2, "{r:?}");
        }
        let d = Data::new(&rows);
        assert!(gain(&d, "local-freelist", 2).is_some());
        assert_eq!(d.series(Sel::metric(STACK)), STACK_SERIES.to_vec());
    }
}
