//! `pq-multiprogramming` — SMARTQ Figs. 4-5: completion time of the
//! synthetic loop against the multiprogramming level, for SMARTQ's eight
//! locks plus `mcs-tp` and `parking_lot`, on the emulated multiprogramming
//! scheduler with one worker per core.

use crate::harness::prelude::*;
use crate::kernels::preempt::{self as kernel, LoopOut};
use crate::registry::preempt::{emulated_row, medians_vs, mpl, select_emulated};
use symmetry_locks::sched::emulated::Config;

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "pq-multiprogramming",
    title: "Completion time vs multiprogramming level, SMARTQ's locks on the emulated scheduler",
    source: "SMARTQ Figs. 4-5",
    ..Experiment::new(CLAIMS, run, draw, assess)
};

const CLAIMS: &[Claim] = &[
    Claim {
        key: "queued-collapse",
        paper: "\"The Queued and Queued-no preempt locks, however, show much greater degradation, as processes \
                begin to queue up behind a de-scheduled peer\" (SMARTQ §4.2, Figs. 4-5).",
        rule: "`mcs` takes at least 3x as long per iteration at level 2.0 as at level 1.0",
        needs: Needs::cores(2),
        judge: |d, _| queued_collapse(d),
    },
    Claim {
        key: "smart-q-near-tas-np",
        paper: "\"the Queued-Handshaking and Smart-Q locks perform far better than the other Queued locks ... They \
                do not outperform the TAS-no preempt lock on the SGI, but only because the small number of \
                processors available does not give the contention-reducing property of queuing an opportunity\" \
                (SMARTQ §4.2).",
        rule: "at level 2.0, `smart-q` and `handshake` each take at most 1.2x the time per iteration of `tas-np`",
        needs: Needs::cores(2),
        judge: |d, _| near_tas_np(d),
    },
    Claim {
        key: "preemption-safe-beats-queued",
        paper: "\"Much better behavior is obtained by preventing critical section preemption and ensuring that the \
                lock is not given to a blocked process waiting in the queue\"; \"Preventing preemption in the \
                critical section helps a little, but not much\" (SMARTQ §4.2).",
        rule: "at level 2.0, `smart-q` and `handshake` each take less time per iteration than `mcs` and `mcs-np`",
        needs: Needs::cores(2),
        judge: |d, _| beats_queued(d),
    },
    Claim {
        key: "native-np-best",
        paper: "\"the native lock performs best of all ... though only when modified (Native-no preempt) to \
                prevent preemption in the critical section\" (SMARTQ §4.2).",
        rule: "at level 2.0, `native-np` takes less time per iteration than `native`",
        needs: Needs::cores(2),
        judge: |d, _| native_np_best(d),
    },
];

const METRIC: &str = "us_per_iteration";

/// Metric: a lock's time per iteration over `tas-np`'s in the same round
/// (same level, same seed).
const VS_TAS_NP: &str = "vs_tas_np";

/// Runs of each point (seeds 1, 2, ...).
const REPEATS: usize = 3;

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let locks = select_emulated(None)?;
    let p = ctx.cores;
    let levels = Config::levels(p, 4.0, if ctx.quick { p } else { 1 });
    let ncs = kernel::scaled_ncs_ns(p);
    let budget = ctx.budget(250, 2000);
    let repeats = ctx.rounds(REPEATS);
    let bar = ctx.bar(EXPERIMENT.id, locks.len() * levels.len() * repeats);
    let tas_np = locks.iter().position(|l| l.name == "tas-np");
    // Rows per lock, so the file keeps one lock's curve together.
    let mut rows: Vec<Vec<Row>> = vec![Vec::new(); locks.len()];
    let cfg = kernel::loop_cfg(p, ncs, budget, false);
    for &level in &levels {
        // Rounds: seed `s` of every lock, then seed `s + 1`, so a change of
        // the VM's speed between rounds hits every lock alike and each
        // lock's run is paired with `tas-np`'s of the same round and seed.
        let runs = try_in_rounds(repeats, locks.len(), |round, i| {
            bar.set_message(format!("{} at {level:.2}", locks[i].name));
            let seed = round as u64 + 1;
            let run = (locks[i].synthetic)(&cfg, &kernel::emu_config(p, level, seed));
            bar.inc(1);
            run
        })?;
        let points = medians_vs(runs, LoopOut::us_per_iteration, tas_np);
        for ((lock, rows), (out, spread, vs)) in locks.iter().zip(&mut rows).zip(points) {
            let v = out.us_per_iteration();
            rows.push(
                emulated_row(EXPERIMENT.id, lock.name, (p, level, ncs), (METRIC, v, "us"))
                    .param("scheduler", "emulated")
                    .param("iterations", out.iterations)
                    .param("extensions", out.extensions)
                    .with_spread(&spread),
            );
            if let Some(r) = vs {
                let t = p as u32;
                let row = Row::new(EXPERIMENT.id, lock.name, t, false, VS_TAS_NP, r.median, "x");
                rows.push(row.param("mpl", mpl(level)).with_spread(&r));
            }
        }
    }
    bar.finish_and_clear();
    Ok(rows.into_iter().flatten().collect())
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    figure(
        "pq-multiprogramming (SMARTQ Figs. 4-5)",
        m,
        vec![param_panel(
            rows,
            METRIC,
            "mpl",
            None,
            (
                "time per iteration vs multiprogramming level",
                "multiprogramming level",
                "us per iteration (log)",
            ),
            Scale::Log,
        )],
    )
}

fn at(d: &Data<'_>, lock: &str, level: f64) -> Option<Estimate> {
    let l = mpl(level);
    d.estimate(Sel::metric(METRIC).series(lock).params(&[("mpl", &l)]))
}

/// `lock`'s time per iteration over `tas-np`'s at `level`, paired by
/// round, widened by the lock's own noise over its levels: a queue lock
/// that collapses under preemption varies between runs as the quiet ones
/// do not ([`Data::estimate_by_series`]).
fn vs_tas_np(d: &Data<'_>, lock: &str, level: f64) -> Option<Estimate> {
    let l = mpl(level);
    d.estimate_by_series(Sel::metric(VS_TAS_NP).series(lock).params(&[("mpl", &l)]))
}

fn queued_collapse(d: &Data<'_>) -> Finding {
    let (Some(one), Some(two)) = (at(d, "mcs", 1.0), at(d, "mcs", 2.0)) else {
        return Finding::missing("`mcs` at levels 1.0 and 2.0");
    };
    let r = two.ratio(one);
    let (a, b) = (est(one, 1, "us"), est(two, 1, "us"));
    Finding::new(
        rule::at_least(r, 3.0),
        format!("`mcs` {a} at 1.0, {b} at 2.0: {}x", r.show(2)),
    )
}

fn near_tas_np(d: &Data<'_>) -> Finding {
    let Some(tas) = at(d, "tas-np", 2.0) else {
        return Finding::missing("`tas-np` at level 2.0");
    };
    let mut parts = Vec::new();
    for lock in ["smart-q", "handshake"] {
        let (Some(e), Some(r)) = (at(d, lock, 2.0), vs_tas_np(d, lock, 2.0)) else {
            return Finding::missing(&format!("`{lock}` at level 2.0"));
        };
        parts.push((
            rule::at_most(r, 1.2),
            format!("`{lock}` {} ({}x)", est(e, 1, "us"), r.show(2)),
        ));
    }
    let tas = est(tas, 1, "us");
    Finding::all(parts, ", ")
        .map_evidence(|e| format!("at 2.0: `tas-np` {tas}, {e} (ratios paired by round)"))
}

fn beats_queued(d: &Data<'_>) -> Finding {
    // Every lock the rule names, with its time and its ratio over `tas-np`
    // of the same rounds; a lock without either leaves the rule unjudged,
    // so that it never holds on fewer locks than it names.
    let mut evidence = Vec::new();
    let mut ratios = Vec::new();
    for lock in ["smart-q", "handshake", "mcs", "mcs-np"] {
        let (Some(e), Some(r)) = (at(d, lock, 2.0), vs_tas_np(d, lock, 2.0)) else {
            return Finding::missing(&format!(
                "`{lock}` at level 2.0 with its ratio over `tas-np` paired by round"
            ));
        };
        evidence.push(format!(
            "`{lock}` {} ({}x `tas-np`)",
            est(e, 1, "us"),
            r.show(2)
        ));
        ratios.push(r);
    }
    // Both sides over `tas-np` of their own rounds, so a drift between
    // rounds cancels.
    let (safe, queued) = ratios.split_at(2);
    let outcomes = safe
        .iter()
        .flat_map(|s| queued.iter().map(|q| rule::less(*s, *q)));
    Finding::new(
        Outcome::all(outcomes),
        format!("at 2.0: {} (ratios paired by round)", evidence.join(", ")),
    )
}

fn native_np_best(d: &Data<'_>) -> Finding {
    let (Some(np), Some(n), Some(np_r), Some(n_r)) = (
        at(d, "native-np", 2.0),
        at(d, "native", 2.0),
        vs_tas_np(d, "native-np", 2.0),
        vs_tas_np(d, "native", 2.0),
    ) else {
        return Finding::missing("`native` and `native-np` at level 2.0");
    };
    Finding::new(
        rule::less(np_r, n_r),
        format!(
            "at 2.0: `native-np` {} ({}x `tas-np`), `native` {} ({}x `tas-np`)",
            est(np, 1, "us"),
            np_r.show(2),
            est(n, 1, "us"),
            n_r.show(2)
        ),
    )
}

fn assess(rows: &[Row], _m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let sel = Sel::metric(METRIC);
    let locks = d.series(sel);
    let mut levels: Vec<f64> = d
        .param_values(sel, "mpl")
        .iter()
        .filter_map(|v| v.parse().ok())
        .collect();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    let mut header = table::header(
        "lock",
        levels.iter().map(|l| format!("level {l:.2} (us/iter)")),
    );
    header.push("2.0 vs 1.0".into());
    let table = table::by_series(&header, &locks, |n| {
        let mut cells: Vec<String> = levels
            .iter()
            .map(|&l| na(at(&d, n, l), |e| format!("{:.1}", e.value)))
            .collect();
        let vs = at(&d, n, 1.0).zip(at(&d, n, 2.0));
        cells.push(na(vs, |(a, b)| ratio(b.value / a.value)));
        cells
    });
    let workers = d.threads(sel).first().map_or(0, |(t, _)| *t);
    let param = |k: &str| d.param(sel, k).unwrap_or_default();
    let measured = if locks.is_empty() {
        format!("No `{METRIC}` points in this run's data.")
    } else {
        format!(
            "{workers} virtual processor(s) ran SMARTQ's synthetic loop (critical section {} ns, \
             non-critical section {} ns, each +/-10%) on the emulated scheduler (quantum {} ms +/-10%, one \
             extension of a tenth of a quantum per quantum) at levels {}, with round(level x processors) workers. Time per completed iteration, median of 3 \
             runs each:",
            param("cs_ns"),
            param("ncs_ns"),
            param("quantum_ms"),
            fmt::join(levels.iter().map(|l| format!("{l:.2}")), ", ")
        )
    };
    let notes = format!(
        "The non-critical section is scaled so that {workers} processor(s) load the lock as SMARTQ's 7 did (64% \
         busy if nobody waited); levels are the multiples of 1/{workers} the processors allow. At level L each processor \
         round-robins L workers of the application in quanta; a worker whose quantum is over is descheduled by \
         signal and sleeps in the kernel. SMARTQ's competing processes were simulated (they only took time); \
         with the application's own workers a lock queue holds several descheduled waiters even on few \
         processors. The same total work is shared by more workers at higher levels, so an unaffected lock keeps \
         its time per iteration, where the paper's completion time (iterations proportional to processes) grows \
         with the level. Unlike the paper's, the scheduler thread has no processor of its own; it sleeps between \
         events. `native` is the platform's pthread mutex, whose waiters sleep in the kernel rather than spin."
    );
    Assessment {
        measured,
        notes,
        table: Some(table),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::testing::{self, SMARTQ_LOCKS, small_vm};
    use crate::output::report::Verdict::*;

    fn rows(m: &Machine, curve: fn(&str, f64) -> f64) -> Vec<Row> {
        let r = testing::Rows::new(&EXPERIMENT, m);
        let mut out = Vec::new();
        for lock in SMARTQ_LOCKS {
            for level in [1.0, 2.0, 4.0] {
                let row = |metric: &str, v: f64| {
                    r.row(lock, m.cores() as u32, metric, v)
                        .param("mpl", mpl(level))
                        .param("cs_ns", "15000")
                        .param("ncs_ns", "32000")
                        .param("quantum_ms", "5")
                };
                out.push(row(METRIC, curve(lock, level)));
                if lock != "tas-np" {
                    out.push(row(VS_TAS_NP, curve(lock, level) / curve("tas-np", level)));
                }
            }
        }
        out
    }

    fn paper(lock: &str, level: f64) -> f64 {
        match lock {
            "mcs" | "mcs-np" | "native" => 50.0 * level * level * 2.0,
            "native-np" => 45.0 * level,
            _ => 50.0 * level,
        }
    }

    #[test]
    fn verdicts_reach_every_case() {
        // Queues unharmed, the preemption-safe locks slow, the
        // non-preemption request a burden.
        let opposite: fn(&str, f64) -> f64 = |lock, l| match lock {
            "smart-q" | "handshake" => 300.0 * l,
            "native-np" => 100.0 * l,
            _ => 50.0 * l,
        };
        let cases = [(paper as _, Holds), (opposite, Differs)];
        testing::assert_verdicts(&EXPERIMENT, &testing::small_and_big(), rows, &cases);
        let one = testing::machine(1, true);
        testing::assert_verdict(&EXPERIMENT, &rows(&one, paper), &one, NotMeasurable);
        testing::assert_nothing_judged(&EXPERIMENT, &[], &small_vm());
    }

    #[test]
    fn a_lock_without_its_paired_ratio_leaves_the_rule_unjudged() {
        let m = small_vm();
        let all = rows(&m, paper);
        let i = (CLAIMS.iter())
            .position(|c| c.key == "preemption-safe-beats-queued")
            .unwrap();
        testing::assert_outcome(&testing::findings(&EXPERIMENT, &all, &m), i, Outcome::Holds);
        // `handshake` and `mcs-np` still have their times but no ratio over
        // `tas-np`: the rule is not judged on the two pairs left.
        for lock in ["handshake", "mcs-np"] {
            let some: Vec<Row> = (all.iter())
                .filter(|r| !(r.series == lock && r.metric == VS_TAS_NP))
                .cloned()
                .collect();
            let f = &testing::findings(&EXPERIMENT, &some, &m)[i];
            assert!(matches!(f.outcome, Outcome::NotMeasurable(_)), "{f:?}");
            testing::assert_says(
                &f.evidence,
                &format!("`{lock}` at level 2.0 with its ratio"),
            );
        }
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, paper));
    }
}
