//! `spin-counter` — ALL89 Fig. 6: elapsed time for P threads to increment a
//! shared counter to 1,000,000 inside a critical section, per lock.

use std::time::Duration;

use crate::harness::prelude::*;
use crate::kernels::locks::CounterOut;
use crate::registry::locks::{self as locks_table, acquire_row, counter_cfg, counter_sweep};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "spin-counter",
    title: "Shared counter to 1,000,000 per lock x threads",
    source: "ALL89 Fig. 6",
    uses_locks: true,
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// ALL89 §IV-E and §IV-F. The "moderate number of spinning processors" is
/// judged at P = min(all cores, 11): the most threads the machine runs
/// without oversubscription, but no more than the ten waiters up to which
/// ALL89 says backoff degrades only slightly.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "spin-degrades",
        paper: "\"Both spinning on the xchgb instruction and spinning on a read degrade processor performance \
                badly for even a moderate number of spinning processors\"; with no parallelism to gain, \"if \
                spinning processors did not slow the processor holding the lock, the curve would be flat\" \
                (ALL89 §IV-E, Fig. 6, up to 20 processors).",
        rule: "`tas` and `ttas` each take longer per acquisition at P = min(all cores, 11) than at P = 1",
        needs: Needs::cores(2),
        judge: |d, m| spin_degrades(d, moderate_p(m)),
    },
    Claim {
        key: "backoff-slight",
        paper: "\"By contrast, the backoff algorithm results in only slight degradation unless the number of \
                spin-waiting processors exceeds ten\" (ALL89 §IV-E).",
        rule: "at P = min(all cores, 11) (at most ten waiters), `backoff` takes less time per acquisition than \
               both `tas` and `ttas`",
        needs: Needs::cores(4),
        judge: |d, m| backoff_slight(d, moderate_p(m)),
    },
    Claim {
        key: "queue-beats-tas",
        paper: "\"Explicitly queueing spinning processors can further improve performance\": a queue-based \
                algorithm \"uses only O(1) bus transactions per execution of the critical section\" (ALL89 \
                §IV-F).",
        rule: "at P = all cores, each O(1) queue lock that ran (`anderson`, `graunke-thakkar`, `mcs`, `clh`) \
               takes less time per acquisition than `tas`",
        needs: Needs::cores(8),
        judge: |d, m| queue_beats_tas(d, m.cores() as u32),
    },
];

/// Acquisitions per point (ALL89's counter target).
const TARGET: u64 = 1_000_000;

/// The metric every rule reads.
const METRIC: &str = "ns_per_acquire";

/// Waiters up to which ALL89 says backoff degrades only slightly.
const MODERATE_WAITERS: u32 = 10;

/// The queue locks whose hand-over touches O(1) cache lines (each waiter
/// spins on its own flag); `ticket` and `ticket-proportional` are queue
/// locks too, but every waiter reads the one `now serving` word.
const O1_QUEUE: &[&str] = &["anderson", "graunke-thakkar", "mcs", "clh"];

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let locks = locks_table::select(ctx.locks.as_deref())?;
    let sweep = ctx.sweep();
    let budget = ctx.budget(400, 3000);
    let bar = ctx.bar(EXPERIMENT.id, locks.len() * sweep.len());
    let points = counter_sweep(ctx, &bar, &locks, &sweep, |t| {
        counter_cfg(t, TARGET, budget)
    });
    bar.finish_and_clear();
    Ok(points
        .iter()
        .flat_map(|(lock, t, out, s)| counter_rows(ctx, lock.name, *t, out, s, budget))
        .collect())
}

/// Rows for one contended-counter point: `ns_per_acquire` always, and
/// `elapsed_s` only when the median run reached the full target (never
/// extrapolated). Both carry the repeats' spread; for `elapsed_s` it is
/// the repeats' time per acquisition times the target.
fn counter_rows(
    ctx: &Ctx,
    series: &str,
    threads: usize,
    out: &CounterOut,
    spread: &Spread,
    budget: Duration,
) -> Vec<Row> {
    let base = acquire_row(EXPERIMENT.id, series, ctx, threads, out, spread)
        .param("target", TARGET)
        .param("budget_ms", budget.as_millis());
    let mut rows = vec![base.clone()];
    if out.completed {
        rows.push(
            Row {
                metric: "elapsed_s".into(),
                value: out.elapsed.as_secs_f64(),
                unit: "s".into(),
                ..base
            }
            .with_spread(&spread.map(|ns| ns * TARGET as f64 / 1e9)),
        );
    }
    rows
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let lines = Lines::new(rows, m);
    let panel = lines.of(METRIC, "ns per acquisition", "ns (log)", Scale::Log);
    figure("spin-counter (ALL89 Fig. 6)", m, vec![panel])
}

/// The P at which ALL89's "moderate number" of waiters is judged:
/// min(all cores, 11).
fn moderate_p(m: &Machine) -> u32 {
    (m.cores() as u32).min(MODERATE_WAITERS + 1)
}

/// `lock`'s time per acquisition at `p` threads, if measured without
/// oversubscription.
fn at(d: &Data<'_>, lock: &str, p: u32) -> Option<Estimate> {
    d.at(Sel::point(METRIC, lock, p))
}

/// `spin-degrades`: `tas` and `ttas` slower at `p` than alone.
fn spin_degrades(d: &Data<'_>, p: u32) -> Finding {
    let mut parts = Vec::new();
    for lock in ["tas", "ttas"] {
        let (Some(one), Some(many)) = (at(d, lock, 1), at(d, lock, p)) else {
            return Finding::missing(&format!("`tas` and `ttas` at P = 1 and P = {p}"));
        };
        let (one_ns, many_ns) = (est(one, 1, "ns"), est(many, 1, "ns"));
        parts.push((
            rule::greater(many, one),
            format!("`{lock}` {one_ns} alone, {many_ns} at P = {p}"),
        ));
    }
    Finding::all(parts, "; ")
}

/// `backoff-slight`: `backoff` faster than `tas` and `ttas` at `p`.
fn backoff_slight(d: &Data<'_>, p: u32) -> Finding {
    let (Some(b), Some(t), Some(tt)) = (at(d, "backoff", p), at(d, "tas", p), at(d, "ttas", p))
    else {
        return Finding::missing(&format!("`backoff`, `tas` and `ttas` at P = {p}"));
    };
    Finding::new(
        Outcome::all([rule::less(b, t), rule::less(b, tt)]),
        format!(
            "at P = {p}: `backoff` {}, `tas` {}, `ttas` {}",
            est(b, 1, "ns"),
            est(t, 1, "ns"),
            est(tt, 1, "ns")
        ),
    )
}

/// `queue-beats-tas`: every O(1) queue lock that ran faster than `tas`
/// at `p`.
fn queue_beats_tas(d: &Data<'_>, p: u32) -> Finding {
    let queues: Vec<(&str, Estimate)> = O1_QUEUE
        .iter()
        .filter_map(|q| Some((*q, at(d, q, p)?)))
        .collect();
    let Some(tas) = at(d, "tas", p).filter(|_| !queues.is_empty()) else {
        return Finding::missing(&format!("`tas` and an O(1) queue lock at P = {p}"));
    };
    let each = queues
        .iter()
        .map(|(n, q)| format!("`{n}` {}", est(*q, 1, "ns")));
    Finding::new(
        Outcome::all(queues.iter().map(|(_, q)| rule::less(*q, tas))),
        format!(
            "at P = {p}: `tas` {}; {}",
            est(tas, 1, "ns"),
            join(each, ", ")
        ),
    )
}

/// The locks that take less time than `tas` at `p` beyond the spread, and
/// those that do not.
fn beats_tas(d: &Data<'_>, locks: &[String], p: u32) -> (Vec<String>, Vec<String>) {
    let e = |n: &str| d.estimate(Sel::point(METRIC, n, p));
    let Some(tas) = e("tas") else {
        return (Vec::new(), Vec::new());
    };
    let (mut better, mut rest) = (Vec::new(), Vec::new());
    for n in locks.iter().filter(|n| n.as_str() != "tas") {
        match e(n).map(|x| rule::less(x, tas)) {
            Some(Outcome::Holds) => better.push(n.clone()),
            Some(_) => rest.push(n.clone()),
            None => {}
        }
    }
    (better, rest)
}

fn assess(rows: &[Row], m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let cores = m.cores() as u32;
    let pm = moderate_p(m);
    let over = 4 * cores;
    let locks = d.series(Sel::metric(METRIC));
    let value = |n: &str, t: u32| d.value(Sel::point(METRIC, n, t));
    let mut ps = vec![1, pm, cores];
    ps.dedup();
    let mut header = vec!["lock".to_string()];
    header.extend(ps.iter().map(|&p| match p {
        1 => "1 thread".to_string(),
        p => format!("{p} threads"),
    }));
    header.push(format!("{over} threads (oversubscribed)"));
    header.push(format!("vs tas at {cores}"));
    header.push(format!("vs tas at {over}"));
    let mut table = Table::new(&header);
    for n in &locks {
        let vs_tas = |t: u32| match (value(n, t), value("tas", t)) {
            (Some(a), Some(b)) => ratio(a / b),
            _ => "n/a".into(),
        };
        let mut row = vec![n.clone()];
        row.extend(ps.iter().map(|&p| na(value(n, p), ns)));
        row.extend([na(value(n, over), ns), vs_tas(cores), vs_tas(over)]);
        table.rows.push(row);
    }
    let (better_c, worse_c) = beats_tas(&d, &locks, cores);
    let (better_o, worse_o) = beats_tas(&d, &locks, over);
    let incomplete = d
        .select(Sel::metric(METRIC))
        .filter(|r| r.get_param("completed") == Some("false"))
        .count();
    let measured = if locks.is_empty() {
        format!("No `{METRIC}` points in this run's data.")
    } else {
        format!(
            "At {cores} threads (all cores) these take less time per acquisition than `tas` beyond the repeat spread: \
         {}; these do not: {}. At {over} threads (4x oversubscribed) these beat `tas`: {}; these do not: {}. \
         {incomplete} point(s) hit the time budget before the target of {TARGET} acquisitions; for them only `{METRIC}` over \
         the acquisitions done is reported (no extrapolated elapsed time).",
            names(&better_c),
            names(&worse_c),
            names(&better_o),
            names(&worse_o)
        )
    };
    let notes = format!(
        "ALL89 measured up to 20 processors on a bus; with {cores} logical CPUs at most {} waiter{} can spin while \
         the holder runs. Oversubscribed points measure something else: a spinning thread occupies a core the \
         holder (or the next FIFO waiter) needs, so FIFO queue locks pay a scheduler quantum per hand-over to a \
         descheduled waiter, while unfair locks (`tas`, `backoff`) let whoever runs take the lock. Even with a core \
         per thread, a FIFO lock hands the lock to another core on every release (at least one cross-core \
         cache-line transfer, see `calibrate`'s `cacheline_rtt_ns`), while `tas`, `ttas` and `backoff` let the \
         releasing thread take it again from its own cache, because this loop does no work outside the critical \
         section: the queue locks' O(1) traffic per hand-over pays off only when many waiters would otherwise \
         collide.",
        cores.saturating_sub(1),
        if cores == 2 { "" } else { "s" }
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

    /// `ns_per_acquire` rows for `m` at P = 1, min(cores, 11), all cores and
    /// 4x cores; `curve(lock)` gives the values at the first three (the
    /// oversubscribed point repeats the last).
    fn rows(m: &Machine, curve: Curve) -> Vec<Row> {
        let at = Rows::new(&EXPERIMENT, m);
        ["tas", "ttas", "backoff", "anderson", "mcs"]
            .iter()
            .flat_map(|l| at.curve(l, METRIC, moderate_p(m), curve(l)))
            .map(|r| r.param("completed", "true"))
            .collect()
    }

    /// ALL89's picture: spins degrade, backoff less, queue locks least.
    fn paper(lock: &str) -> [f64; 3] {
        match lock {
            "tas" => [10.0, 100.0, 200.0],
            "ttas" => [10.0, 80.0, 150.0],
            "backoff" => [10.0, 30.0, 60.0],
            _ => [20.0, 40.0, 50.0],
        }
    }

    /// The opposite: every lock speeds up with P, `tas` fastest.
    fn opposite(lock: &str) -> [f64; 3] {
        match lock {
            "tas" => [50.0, 10.0, 10.0],
            "ttas" => [50.0, 12.0, 12.0],
            _ => [50.0, 30.0, 30.0],
        }
    }

    #[test]
    fn verdicts_reach_every_case() {
        // Two cores judge only the degradation of the spins (one waiter);
        // backoff's and the queue locks' advantages need more waiters.
        let even: Curve = |_| [10.0, 10.1, 10.1];
        let says = "needs 4 or more cores, the run had 2";
        testing::assert_curve_cases(&EXPERIMENT, rows, [paper, opposite, even], says);
        let one = testing::machine(1, true);
        assert_verdict(&EXPERIMENT, &rows(&one, paper), &one, NotMeasurable);
        // Data from a small machine judged for a big one: no points at P = 11 or 64.
        let small = rows(&small_vm(), paper);
        assert_verdict(&EXPERIMENT, &small, &big_metal(), NotMeasurable);
        // Four cores: the moderate-P rules are judged, the queue rule is not.
        let four = testing::machine(4, false);
        let says = "needs 8 or more cores, the run had 4";
        testing::assert_holds_saying(&EXPERIMENT, &rows(&four, paper), &four, says);
    }

    #[test]
    fn missing_locks_are_not_measurable() {
        let m = big_metal();
        let mut only_tas = rows(&m, paper);
        only_tas.retain(|r| r.series == "tas");
        testing::assert_nothing_judged(&EXPERIMENT, &only_tas, &m);
    }

    #[test]
    fn elapsed_only_for_completed_points_with_its_spread() {
        let ctx = Ctx::new(true, 2);
        let spread = Spread::of(&[90.0, 100.0, 110.0]).unwrap();
        let done = CounterOut {
            ops: TARGET,
            elapsed: Duration::from_millis(100),
            completed: true,
        };
        let rows = counter_rows(&ctx, "tas", 2, &done, &spread, Duration::from_secs(1));
        assert_eq!(rows.len(), 2);
        let (lo, hi, n) = rows[1].spread().unwrap();
        assert_eq!(rows[1].metric, "elapsed_s");
        assert!((lo - 0.09).abs() < 1e-9 && (hi - 0.11).abs() < 1e-9 && n == 3);
        let cut = CounterOut {
            completed: false,
            ops: TARGET / 2,
            ..done
        };
        let rows = counter_rows(&ctx, "tas", 2, &cut, &spread, Duration::from_secs(1));
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].metric, METRIC);
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, paper));
    }
}
