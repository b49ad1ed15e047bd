//! `spin-barrier` — ALL89 Fig. 8: a barrier built from a lock. In each
//! episode every thread takes the lock once to bump a counter, then waits
//! until all have; time per episode divided by the number of threads.

use crate::harness::fmt::ascending;
use crate::harness::prelude::*;
use crate::registry::locks as locks_table;

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "spin-barrier",
    title: "Lock-based barrier, time per processor",
    source: "ALL89 Fig. 8",
    uses_locks: true,
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// ALL89 §IV-E on Fig. 8: each end of the curve judged where it lies on
/// the machine at hand, the small-P end at P = 2 and the large-P end at
/// P = all cores.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "tas-fastest-small-p",
        paper: "\"For small numbers of processors, spinning on the xchgb instruction is fastest, since a processor \
                immediately acquires the lock when it is released\" (ALL89 §IV-E, Fig. 8).",
        rule: "at P = 2, `tas` takes less time per processor than each of `ttas`, `backoff` and \
               `backoff-persistent` that ran",
        needs: Needs::cores(2),
        judge: |d, _| tas_fastest(d, 2),
    },
    Claim {
        key: "tas-outweighed-large-p",
        paper: "\"As more processors are added, however, even though the lock is acquired faster, this is \
                outweighed by the degradation of the processor holding the lock\" (ALL89 §IV-E, Fig. 8, up to \
                20 processors).",
        rule: "at P = all cores, `ttas` or `backoff` takes less time per processor than `tas`",
        needs: Needs::cores(8),
        judge: |d, m| tas_outweighed(d, m.cores() as u32),
    },
];

/// The metric every rule reads.
const METRIC: &str = "us_per_processor";

/// The spin-waiting alternatives of ALL89 Fig. 8 that `tas` is compared
/// with at small P.
const OTHER_SPINS: &[&str] = &["ttas", "backoff", "backoff-persistent"];

/// The alternatives of which one should overtake `tas` at large P.
const OVERTAKERS: &[&str] = &["ttas", "backoff"];

/// Metric: a lock's time per processor over `tas`'s in the same round.
const VS_TAS: &str = "vs_tas";

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let locks = locks_table::select(ctx.locks.as_deref())?;
    let sweep = ctx.sweep();
    let budget = ctx.budget(300, 2000);
    // The points the rules judge (P = 2 and P = all cores) take
    // [`Ctx::judged_rounds`] rounds of 20,000 episodes (50,000 in a full
    // run). At P = 2 an episode takes a few hundred nanoseconds, so 2,000
    // were under a millisecond, the order of starting the threads: five
    // such rounds put `ttas` over `tas` at 1.01 in one reproduction and
    // 1.11 in the next, and the interval's ends at the fastest and the
    // slowest round. Points only drawn keep 2,000 (20,000) and
    // [`Ctx::repeats`].
    let judged = |t: usize| !ctx.over(t) && (t == 2 || t == ctx.cores);
    let rounds = |t: usize| {
        if judged(t) {
            ctx.judged_rounds()
        } else {
            ctx.repeats(t)
        }
    };
    let episodes = |t: usize| match (judged(t), ctx.quick) {
        (true, true) => 20_000,
        (true, false) => 50_000,
        (false, true) => 2_000,
        (false, false) => 20_000,
    };
    let bar = ctx.bar(
        EXPERIMENT.id,
        sweep.iter().map(|&t| rounds(t)).sum::<usize>() * locks.len(),
    );
    let tas = locks.iter().position(|l| l.name == "tas");
    // Rows per lock, so the file keeps one lock's curve together.
    let mut rows: Vec<Vec<Row>> = vec![Vec::new(); locks.len()];
    for &t in &sweep {
        // Rounds: every lock once per round, so a change of the VM's speed
        // or of its CPUs' placement between rounds hits every lock alike,
        // and each lock's round is paired with `tas`'s of the same round.
        let episodes = episodes(t);
        let mut runs = in_rounds(rounds(t), locks.len(), |_, i| {
            bar.set_message(format!("{} x{t}", locks[i].name));
            let run = (locks[i].barrier)(t, episodes, budget);
            bar.inc(1);
            run
        });
        let per_processor = |(d, e): &(u64, std::time::Duration)| {
            e.as_nanos() as f64 / (*d).max(1) as f64 / t as f64 / 1e3
        };
        let times: Vec<Vec<f64>> = runs
            .iter()
            .map(|r| r.iter().map(per_processor).collect())
            .collect();
        for (i, lock) in locks.iter().enumerate() {
            let row = |metric: &str, v: f64, unit: &str| {
                Row::new(
                    EXPERIMENT.id,
                    lock.name,
                    t as u32,
                    ctx.over(t),
                    metric,
                    v,
                    unit,
                )
            };
            let ((done, elapsed), spread) = median_of(std::mem::take(&mut runs[i]), per_processor);
            rows[i].push(
                row(METRIC, per_processor(&(done, elapsed)), "us")
                    .param("episodes", done)
                    .param("completed", done >= episodes)
                    .with_spread(&spread),
            );
            if let Some(tas) = tas.filter(|&k| k != i)
                && let Some(p) = Spread::paired_ratio(&times[i], &times[tas])
            {
                rows[i].push(row(VS_TAS, p.median, "x").with_spread(&p));
            }
        }
    }
    bar.finish_and_clear();
    Ok(rows.into_iter().flatten().collect())
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let lines = Lines::new(rows, m);
    let panel = lines.of(
        METRIC,
        "time per processor per barrier",
        "us (log)",
        Scale::Log,
    );
    figure("spin-barrier (ALL89 Fig. 8)", m, vec![panel])
}

/// `lock`'s `metric` at `p` threads, if measured without
/// oversubscription: with the point's own interval where it ran
/// [`OWN_MIN`](crate::harness::OWN_MIN) rounds or more (the judged points), else widened by the
/// run's pooled noise (a CSV from before the judged points' rounds).
fn at(d: &Data<'_>, metric: &str, lock: &str, p: u32) -> Option<Estimate> {
    d.at_own(Sel::point(metric, lock, p))
}

/// Those of `locks` measured at `p` beside `tas`, with their time per
/// processor and their time over `tas`'s, paired by round.
fn present<'n>(d: &Data<'_>, locks: &[&'n str], p: u32) -> Vec<(&'n str, Estimate, Estimate)> {
    locks
        .iter()
        .filter_map(|n| Some((*n, at(d, METRIC, n, p)?, at(d, VS_TAS, n, p)?)))
        .collect()
}

/// `` at P = 2: `tas` 1.2 us; `ttas` 1.5 us (1.25x `tas`), ... ``.
fn evidence(p: u32, tas: Estimate, others: &[(&str, Estimate, Estimate)]) -> String {
    let each =
        (others.iter()).map(|(n, e, r)| format!("`{n}` {} ({}x)", est(*e, 3, "us"), r.show(2)));
    format!(
        "at P = {p}: `tas` {}; {} (each over `tas` in the same round)",
        est(tas, 3, "us"),
        join(each, ", ")
    )
}

/// `tas-fastest-small-p` at `p`: `tas` faster than every other spin lock.
fn tas_fastest(d: &Data<'_>, p: u32) -> Finding {
    let others = present(d, OTHER_SPINS, p);
    let Some(tas) = at(d, METRIC, "tas", p).filter(|_| !others.is_empty()) else {
        return Finding::missing(&format!("`tas` and another spin lock at P = {p}"));
    };
    Finding::new(
        Outcome::all(
            others
                .iter()
                .map(|(_, _, r)| rule::greater(*r, Estimate::exact(1.0))),
        ),
        evidence(p, tas, &others),
    )
}

/// `tas-outweighed-large-p` at `p`: some overtaker faster than `tas`
/// (holds if one is beyond the spread, fails if `tas` is faster than all
/// of them beyond it, else a tie).
fn tas_outweighed(d: &Data<'_>, p: u32) -> Finding {
    let others = present(d, OVERTAKERS, p);
    let Some(tas) = at(d, METRIC, "tas", p).filter(|_| !others.is_empty()) else {
        return Finding::missing(&format!("`tas` and `ttas` or `backoff` at P = {p}"));
    };
    let outcomes: Vec<Outcome> = others
        .iter()
        .map(|(_, _, r)| rule::less(*r, Estimate::exact(1.0)))
        .collect();
    let outcome = if outcomes.contains(&Outcome::Holds) {
        Outcome::Holds
    } else if outcomes.iter().all(|o| *o == Outcome::Fails) {
        Outcome::Fails
    } else {
        Outcome::Tie
    };
    Finding::new(outcome, evidence(p, tas, &others))
}

/// The spin locks at `p`, fastest first, as `` `tas` 1.2 us, ... `` (or
/// `none`).
fn ranked(d: &Data<'_>, p: u32) -> String {
    let v = [&["tas"], OTHER_SPINS].concat().into_iter();
    let v = v.filter_map(|n| Some((n, at(d, METRIC, n, p)?.value)));
    ascending(v.collect(), |us| ns(us * 1e3), ", ", "none")
}

fn assess(rows: &[Row], m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let cores = m.cores() as u32;
    let sel = Sel::metric(METRIC);
    let locks = d.series(sel);
    let measured_ps = d.threads(sel);
    let mut ps: Vec<(u32, bool)> = measured_ps
        .iter()
        .copied()
        .filter(|(t, _)| [1, 2, cores, 2 * cores, 4 * cores].contains(t))
        .collect();
    ps.dedup();
    let mut header = vec!["lock".to_string()];
    header.extend(
        ps.iter()
            .map(|(t, o)| format!("{t} thr{}", if *o { " (over)" } else { "" })),
    );
    let mut table = Table::new(&header);
    for n in &locks {
        let mut row = vec![n.clone()];
        for (t, _) in &ps {
            row.push(na(d.value(sel.series(n).threads(*t)), |v| ns(v * 1e3)));
        }
        table.rows.push(row);
    }
    let fastest = locks
        .iter()
        .filter_map(|n| Some((n, d.value(sel.series(n).threads(cores))?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or("n/a".into(), |(n, v)| format!("`{n}` ({})", ns(v * 1e3)));
    let ranks = if cores == 2 {
        format!("at P = 2 (all cores): {}", ranked(&d, 2))
    } else {
        format!(
            "at P = 2: {}; at P = {cores} (all cores): {}",
            ranked(&d, 2),
            ranked(&d, cores)
        )
    };
    let measured = if locks.is_empty() {
        format!("No `{METRIC}` points in this run's data.")
    } else {
        format!(
            "Time per processor to pass the barrier, spin locks fastest first, {ranks}. Fastest of all locks \
             at P = {cores}: {fastest}."
        )
    };
    let over = measured_ps.iter().filter(|(_, o)| *o).count();
    let notes = format!(
        "Were there neither degradation of the holder nor delay in handing the lock over, the curve would be flat \
         (ALL89). {}",
        match over {
            0 => String::new(),
            1 => format!(
                "The thread count above {cores} is oversubscribed and dominated by descheduled waiters (the \
                 barrier's waits yield after 2,000 spins)."
            ),
            _ => format!(
                "The {over} thread counts above {cores} are oversubscribed and dominated by descheduled waiters \
                 (the barrier's waits yield after 2,000 spins)."
            ),
        }
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
    use crate::harness::testing::{self, Curve, Rows, assert_verdict, big_metal, small_vm};
    use crate::output::report::Verdict::*;

    /// Rows for `m` at P = 1, 2, all cores and 4x cores; `curve(lock)`
    /// gives the values at the first three (the oversubscribed point
    /// repeats the last).
    fn rows(m: &Machine, curve: Curve) -> Vec<Row> {
        rows_spread(m, 0.02, curve)
    }

    /// [`rows`] with 3 repeats spread `rel` of the value either side.
    fn rows_spread(m: &Machine, rel: f64, curve: Curve) -> Vec<Row> {
        let at = Rows::new(&EXPERIMENT, m).rel(rel);
        let tas = curve("tas");
        let mut out = Vec::new();
        for lock in ["tas", "ttas", "backoff", "mcs"] {
            let v = curve(lock);
            out.extend(at.curve(lock, METRIC, 2, v));
            if lock != "tas" {
                let over_tas = [0, 1, 2].map(|i| v[i] / tas[i]);
                out.extend(at.curve(lock, VS_TAS, 2, over_tas));
            }
        }
        out.into_iter()
            .map(|r| r.param("completed", "true"))
            .collect()
    }

    /// ALL89's Fig. 8: `tas` fastest at 2, overtaken at many.
    fn paper(lock: &str) -> [f64; 3] {
        match lock {
            "tas" => [1.0, 1.0, 5.0],
            "ttas" => [1.0, 1.5, 3.0],
            _ => [1.0, 2.0, 3.0],
        }
    }

    /// `tas` slowest at 2 and fastest at many.
    fn opposite(lock: &str) -> [f64; 3] {
        match lock {
            "tas" => [1.0, 3.0, 1.0],
            "ttas" => [1.0, 1.5, 3.0],
            _ => [1.0, 2.0, 3.0],
        }
    }

    #[test]
    fn verdicts_reach_every_case() {
        // Two cores: the small-P end is judged, the large-P end needs cores.
        let even: Curve = |_| [1.0, 1.01, 1.01];
        let says = "needs 8 or more cores, the run had 2";
        testing::assert_curve_cases(&EXPERIMENT, rows, [paper, opposite, even], says);
        let m = small_vm();
        assert_verdict(&EXPERIMENT, &rows(&m, opposite), &m, Differs);
        // One core: P = 2 is oversubscribed, nothing to judge.
        let one = testing::machine(1, true);
        assert_verdict(&EXPERIMENT, &rows(&one, paper), &one, NotMeasurable);
        // Only `tas` and a queue lock ran (`--locks tas,mcs`).
        let m = big_metal();
        let mut narrowed = rows(&m, paper);
        narrowed.retain(|r| r.series == "tas" || r.series == "mcs");
        assert_verdict(&EXPERIMENT, &narrowed, &m, NotMeasurable);
    }

    #[test]
    fn one_overtaker_is_enough() {
        let m = big_metal();
        let rows = rows(&m, |lock| match lock {
            "tas" => [1.0, 1.0, 5.0],
            "ttas" => [1.0, 1.5, 9.0],
            _ => [1.0, 2.0, 3.0],
        });
        assert_eq!(
            tas_outweighed(&Data::new(&rows), 64).outcome,
            Outcome::Holds
        );
    }

    #[test]
    fn judged_points_read_their_own_rounds() {
        let m = small_vm();
        // Every lock 10% over `tas` at P = 2, but the run's points vary by
        // 30% between repeats: with three repeats each, pooled noise ties.
        let wide = rows_spread(&m, 0.3, |lock| match lock {
            "tas" => [1.0, 1.0, 1.0],
            _ => [1.0, 1.1, 1.1],
        });
        assert_eq!(tas_fastest(&Data::new(&wide), 2).outcome, Outcome::Tie);
        // The same medians from 21 rounds at P = 2, whose paired quotients
        // lie within 1.06-1.14: their own interval decides.
        let own = |q: &[f64]| {
            let s = Spread::median_interval(q).unwrap();
            let mut v = wide.clone();
            for r in v
                .iter_mut()
                .filter(|r| r.metric == VS_TAS && r.threads == 2)
            {
                r.value = s.median;
                *r = r.clone().with_spread(&s);
            }
            tas_fastest(&Data::new(&v), 2).outcome
        };
        let rounds: Vec<f64> = (0..21).map(|i| 1.06 + 0.004 * i as f64).collect();
        assert_eq!(own(&rounds), Outcome::Holds);
        let slower: Vec<f64> = rounds.iter().map(|q| q - 0.2).collect();
        assert_eq!(own(&slower), Outcome::Fails);
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, paper));
    }
}
