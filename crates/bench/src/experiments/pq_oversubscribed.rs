//! `pq-oversubscribed` — SMARTQ's problem on stock Linux: the synthetic
//! loop on real OS threads at 1-8x the cores, no emulation, where queue
//! locks, time publishing (`mcs-tp`), spin-then-block and the modern peers
//! meet the kernel's own scheduler.

use crate::harness::prelude::*;
use crate::kernels::preempt::{self as kernel, PAPER_CS_NS};
use crate::registry::preempt::{STOCK, lock_sweep, median_point};
use symmetry_locks::sched::rseq::{self, Availability};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "pq-oversubscribed",
    title: "SMARTQ's synthetic loop on oversubscribed OS threads: queue locks vs time publishing vs peers",
    source: "SMARTQ §1, §2.3 on stock Linux",
    ..Experiment::new(CLAIMS, run, draw, assess)
};

const CLAIMS: &[Claim] = &[
    Claim {
        key: "queue-collapses",
        paper: "\"queued locks exhibit poor behavior in the presence of multiprogramming: a process near the end \
                of the queue, in addition to waiting for any process that is preempted during its critical \
                section, must also wait for any preempted processes ahead of it in the queue\" (SMARTQ abstract).",
        rule: "`mcs` takes at least 10x as long per iteration at 4x the cores as at one thread per core",
        needs: Needs::NONE,
        judge: |d, m| {
            let c = m.cores() as u32;
            compare(d, ("mcs", 4 * c), ("mcs", c), |r| rule::at_least(r, 10.0))
        },
    },
    Claim {
        key: "mcs-tp-near-tas",
        paper: "SMARTQ's goal is a queue lock with which \"no process waits for a process that isn't running\" \
                (§2.3); time publishing (He, Scherer & Scott 2005) reaches it without kernel help by skipping \
                waiters whose published time is stale.",
        rule: "at 4x the cores, `mcs-tp` takes at most 2x the time per iteration of `tas`",
        needs: Needs::NONE,
        judge: |d, m| at_4x(d, m, "mcs-tp", "tas", |r| rule::at_most(r, 2.0)),
    },
    Claim {
        key: "mcs-tp-beats-mcs",
        paper: "Skipping preempted waiters removes the queue's collapse (SMARTQ §3, §4.2).",
        rule: "at 4x the cores, `mcs` takes at least 10x as long per iteration as `mcs-tp`",
        needs: Needs::NONE,
        judge: |d, m| at_4x(d, m, "mcs", "mcs-tp", |r| rule::at_least(r, 10.0)),
    },
    Claim {
        key: "rseq-np",
        paper: "\"The Symunix scheduler allows a process to request that it not be preempted during a critical \
                section, and will honor that request, within reason\" (SMARTQ §2.3); Linux 7.0's rseq time-slice \
                extension is that request.",
        rule: "with the kernel's time-slice extension, `tas-np-rseq` takes no longer per iteration than `tas` at \
               4x the cores",
        needs: Needs::NONE,
        judge: |d, m| rseq_np(d, 4 * m.cores() as u32),
    },
];

const METRIC: &str = "us_per_iteration";

/// The locks the rules compare at 4x the cores.
const JUDGED: &[&str] = &["tas", "mcs", "mcs-tp", "tas-np-rseq"];

/// Repeats of a point: [`OWN_MIN`] (15 in a full run) at the points the
/// rules read (the locks of [`JUDGED`] at 4x the cores, and `mcs` at the
/// cores, the baseline of its collapse), so the median is a middle run
/// and the rules read the point's own interval (the range of its runs);
/// elsewhere [`Ctx::repeats`]. At 4x a run falls into one of two modes
/// several times apart, and the median of two repeats is the upper one.
fn repeats(ctx: &Ctx, lock: &str, t: usize) -> usize {
    let judged =
        (t == 4 * ctx.cores && JUDGED.contains(&lock)) || (t == ctx.cores && lock == "mcs");
    match (judged, ctx.quick) {
        (true, true) => ctx.own_rounds(OWN_MIN),
        (true, false) => ctx.own_rounds(15),
        (false, _) => ctx.repeats(t),
    }
}
const RSEQ: &str = "rseq_available";

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let c = ctx.cores;
    let counts: Vec<usize> = ctx
        .threads
        .clone()
        .unwrap_or_else(|| [1, 2, 4, 8].iter().map(|k| k * c).collect());
    let avail = rseq::available().clone();
    let on = avail == Availability::Available;
    let mut rseq_row = Row::new(EXPERIMENT.id, "rseq", c as u32, false, RSEQ, 0.0, "bool");
    match &avail {
        Availability::Available => rseq_row.value = 1.0,
        Availability::Absent(why) => rseq_row = rseq_row.param("reason", why),
    }
    let mut rows = vec![rseq_row];
    let locks: Vec<_> = STOCK.iter().filter(|l| !l.needs_rseq || on).collect();
    let ncs = kernel::scaled_ncs_ns(c);
    let budget = ctx.budget(250, 2000);
    symmetry_locks::spin_then_block::profiler::set_enabled(false);
    let points = lock_sweep(ctx, EXPERIMENT.id, (&locks, &counts), " x", |lock, t| {
        let cfg = kernel::LoopCfg {
            workers: t,
            ..kernel::loop_cfg(c, ncs, budget, false)
        };
        let (out, spread) =
            median_point(repeats(ctx, lock.name, t), |_| Ok((lock.synthetic)(&cfg)))?;
        let (v, over) = (out.us_per_iteration(), ctx.over(t));
        Ok(
            Row::new(EXPERIMENT.id, lock.name, t as u32, over, METRIC, v, "us")
                .param("cs_ns", PAPER_CS_NS)
                .param("ncs_ns", ncs.round())
                .param("scheduler", "stock")
                .param("iterations", out.iterations)
                .with_spread(&spread),
        )
    })?;
    symmetry_locks::spin_then_block::profiler::set_enabled(true);
    rows.extend(points);
    Ok(rows)
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let title = "time per iteration vs OS threads";
    let panel = Lines::new(rows, m).of(METRIC, title, "us per iteration (log)", Scale::Log);
    figure("pq-oversubscribed (SMARTQ on stock Linux)", m, vec![panel])
}

/// `lock` at `t` threads: with the point's own interval (the range of
/// its runs, widened to the noise floor) where it has [`OWN_MIN`] repeats
/// (the judged points), else widened by the run's noise.
fn at(d: &Data<'_>, lock: &str, t: u32) -> Option<Estimate> {
    d.estimate_own(Sel::metric(METRIC).series(lock).threads(t))
}

/// `a` at `ta` threads over `b` at `tb`, judged by `judge` (`>= 10`, or
/// `<= 2` with `at_most`), with evidence. `queue-collapses` reads `mcs` at
/// 4x the cores over itself at the cores: against `tas` at 4x, which
/// degrades as well (its holders are preempted too), `mcs` was 8.8x in one
/// run and 34x in another, as it fell into one mode or the other; against
/// itself with a core per thread, the collapse is measured from the same
/// lock's own baseline.
fn compare(
    d: &Data<'_>,
    (a, ta): (&str, u32),
    (b, tb): (&str, u32),
    judge: impl Fn(Estimate) -> Outcome,
) -> Finding {
    let (Some(x), Some(y)) = (at(d, a, ta), at(d, b, tb)) else {
        return Finding::missing(&format!("`{a}` at {ta} threads and `{b}` at {tb} threads"));
    };
    let r = x.ratio(y);
    let (x, y) = (est(x, 1, "us"), est(y, 1, "us"));
    Finding::new(
        judge(r),
        format!(
            "`{a}` at {ta} threads {x}, `{b}` at {tb} threads {y}: {}x",
            r.show(2)
        ),
    )
}

/// [`compare`] of `a` and `b` both at 4x the cores of `m`.
fn at_4x(d: &Data<'_>, m: &Machine, a: &str, b: &str, judge: fn(Estimate) -> Outcome) -> Finding {
    let over = 4 * m.cores() as u32;
    compare(d, (a, over), (b, over), judge)
}

fn rseq_np(d: &Data<'_>, t: u32) -> Finding {
    let Some(r) = d.row(Sel::metric(RSEQ)) else {
        return Finding::missing("the rseq availability row");
    };
    if r.value == 0.0 {
        return Finding::not_measurable(
            r.get_param("reason")
                .unwrap_or("the time-slice extension is absent"),
        );
    }
    compare(d, ("tas-np-rseq", t), ("tas", t), |x| rule::at_most(x, 1.0))
}

fn assess(rows: &[Row], m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let over = 4 * m.cores() as u32;
    let sel = Sel::metric(METRIC);
    let locks = d.series(sel);
    let counts = d.counts(sel);
    let mut header = table::header(
        "lock",
        counts.iter().map(|t| format!("{t} threads (us/iter)")),
    );
    header.push(format!("vs tas at {over}"));
    let table = table::by_series(&header, &locks, |n| {
        let mut cells: Vec<String> = counts
            .iter()
            .map(|&t| na(at(&d, n, t), |e| format!("{:.1}", e.value)))
            .collect();
        let vs = at(&d, n, over).zip(at(&d, "tas", over));
        cells.push(na(vs, |(a, b)| ratio(a.value / b.value)));
        cells
    });
    let param = |k: &str| d.param(sel, k).unwrap_or_default();
    let measured = if locks.is_empty() {
        format!("No `{METRIC}` points in this run's data.")
    } else {
        format!(
            "OS threads ran SMARTQ's synthetic loop (critical section {} ns, non-critical section {} ns, each \
             +/-10%) under the kernel's scheduler, no emulation, at {} threads; time per iteration completed \
             inside the budget, median of the repeats:",
            param("cs_ns"),
            param("ncs_ns"),
            fmt::counts(&counts)
        )
    };
    let notes = "Threads beyond the cores are descheduled by the kernel at its own time slices: a FIFO queue lock \
                 hands the lock to a waiter that is not running and everybody behind it waits for its next slice. \
                 `mcs-tp` skips waiters whose heartbeat is stale; `smart-q` over stock Linux cannot see who runs \
                 (the kernel publishes nothing) and behaves as MCS; `spin-then-block` is KLMO91's fixed-spin(C); \
                 `std`, `parking_lot` and `pthread` park waiters in the kernel. Nothing can keep the kernel from \
                 preempting a holder here unless it offers the time-slice extension."
        .to_string();
    Assessment {
        measured,
        notes,
        table: Some(table),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::testing::{self, small_vm};
    use crate::output::report::Verdict::*;

    fn rows(m: &Machine, curve: fn(&str) -> f64, rseq: Option<&str>) -> Vec<Row> {
        let c = m.cores() as u32;
        let mut out = vec![Row::new(EXPERIMENT.id, "rseq", c, false, RSEQ, 1.0, "bool")];
        if let Some(why) = rseq {
            out[0] = out[0].clone().param("reason", why);
            out[0].value = 0.0;
        }
        let r = testing::Rows::new(&EXPERIMENT, m);
        for lock in ["tas", "mcs", "mcs-tp", "tas-np-rseq"] {
            for t in [c, 4 * c] {
                let v = if t == c { 40.0 } else { curve(lock) };
                out.push(r.row(lock, t, METRIC, v).param("cs_ns", "15000"));
            }
        }
        out
    }

    fn paper(lock: &str) -> f64 {
        match lock {
            "mcs" => 5000.0,
            "mcs-tp" => 60.0,
            _ => 40.0,
        }
    }

    #[test]
    fn verdicts_reach_every_case() {
        let opposite: fn(&str) -> f64 = |lock| if lock == "mcs-tp" { 400.0 } else { 40.0 };
        let cases = [(paper as _, Holds), (opposite, Differs)];
        let with_rseq = |m: &Machine, f| rows(m, f, None);
        testing::assert_verdicts(&EXPERIMENT, &testing::small_and_big(), with_rseq, &cases);
        let m = small_vm();
        let absent = rows(&m, paper, Some("not available on this kernel (6.18)"));
        let says = "not available on this kernel";
        testing::assert_holds_saying(&EXPERIMENT, &absent, &m, says);
    }

    #[test]
    fn collapse_reads_mcs_against_itself() {
        let m = small_vm();
        // `mcs` 9.3x `tas` at 4x (whose holders are preempted as well) but
        // 17.5x itself at one thread per core.
        let rows = rows(
            &m,
            |lock| match lock {
                "mcs" => 700.0,
                "tas" => 75.0,
                _ => 40.0,
            },
            None,
        );
        let f = testing::findings(&EXPERIMENT, &rows, &m).remove(0);
        assert_eq!(f.outcome, Outcome::Holds, "{}", f.evidence);
        assert!(f.evidence.contains("at 2 threads 40.0"), "{}", f.evidence);
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, paper, None));
    }
}
