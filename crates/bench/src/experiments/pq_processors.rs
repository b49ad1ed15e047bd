//! `pq-processors` — SMARTQ Figs. 6-7: time per iteration against the
//! number of processors at multiprogramming level 2.0, for SMARTQ's locks
//! plus `mcs-tp` and `parking_lot`, on the emulated scheduler.

use crate::harness::fmt::counts;
use crate::harness::prelude::*;
use crate::kernels::preempt as kernel;
use crate::registry::preempt::{emulated_row, lock_sweep, median_point, select_emulated};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "pq-processors",
    title: "Time per iteration vs processors at multiprogramming level 2.0, SMARTQ's locks",
    source: "SMARTQ Figs. 6-7",
    ..Experiment::new(CLAIMS, run, draw, assess)
};

const CLAIMS: &[Claim] = &[
    Claim {
        key: "queued-bad",
        paper: "\"results on the SGI again show the Queued and Queued-no preempt locks performing very badly, as a \
                result of untimely preemption\" (SMARTQ §4.3, Figs. 6-7, level 2.0).",
        rule: "at level 2.0 on all the cores, `mcs` and `mcs-np` each take at least 3x the time per processor \
               iteration of `smart-q`",
        needs: Needs::cores(2),
        judge: |d, m| queued_bad(d, m.cores() as u32),
    },
    Claim {
        key: "even-performance",
        paper: "\"The Smart-Q, TAS-no preempt, and Native-no preempt locks display more-or-less even performance\" \
                as processors are added (SMARTQ §4.3).",
        rule: "`smart-q`, `tas-np` and `native-np` each keep their time per processor iteration within 1.5x from \
               one processor to all the cores",
        needs: Needs::cores(2),
        judge: |d, m| even(d, m.cores() as u32),
    },
    Claim {
        key: "smart-q-overtakes-tas-np",
        paper: "\"the larger number of processors and the higher cost of remote operations allow the Smart-Q lock \
                to overtake the TAS-no preempt lock\" (SMARTQ §4.3, KSR, 31 processors).",
        rule: "at level 2.0 on all the cores, `smart-q` takes less time per processor iteration than `tas-np`",
        needs: Needs::cores(16),
        judge: |d, m| overtakes(d, m.cores() as u32),
    },
];

/// Time per iteration times the processors: what each processor spends
/// per iteration of its own (constant for a lock that scales).
const METRIC: &str = "us_per_processor_iteration";
const LEVEL: f64 = 2.0;

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let locks = select_emulated(None)?;
    let ps: Vec<usize> = if ctx.quick {
        ctx.ends()
    } else {
        (1..=ctx.cores).collect()
    };
    // SMARTQ keeps the critical to non-critical ratio fixed as processors
    // are added: the ratio that loads the lock on all the cores.
    let ncs = kernel::scaled_ncs_ns(ctx.cores);
    let budget = ctx.budget(250, 2000);
    lock_sweep(ctx, EXPERIMENT.id, (&locks, &ps), " on ", |lock, p| {
        let cfg = kernel::loop_cfg(p, ncs, budget, false);
        let (out, spread) = median_point(ctx.rounds(3), |seed| {
            (lock.synthetic)(&cfg, &kernel::emu_config(p, LEVEL, seed))
        })?;
        let k = p as f64;
        let v = out.us_per_iteration() * k;
        Ok(
            emulated_row(EXPERIMENT.id, lock.name, (p, LEVEL, ncs), (METRIC, v, "us"))
                .param("iterations", out.iterations)
                .with_spread(&spread.map(|v| v * k)),
        )
    })
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let title = "level 2.0: time per processor iteration vs processors";
    let panel = Lines::new(rows, m).of(METRIC, title, "us (log)", Scale::Log);
    figure("pq-processors (SMARTQ Figs. 6-7)", m, vec![panel])
}

fn at(d: &Data<'_>, lock: &str, p: u32) -> Option<Estimate> {
    d.estimate(Sel::metric(METRIC).series(lock).threads(p))
}

fn queued_bad(d: &Data<'_>, p: u32) -> Finding {
    let Some(sq) = at(d, "smart-q", p) else {
        return Finding::missing(&format!("`smart-q` on {p} processors"));
    };
    let mut parts = Vec::new();
    for q in ["mcs", "mcs-np"] {
        let Some(e) = at(d, q, p) else {
            return Finding::missing(&format!("`{q}` on {p} processors"));
        };
        let r = e.ratio(sq);
        parts.push((
            rule::at_least(r, 3.0),
            format!("`{q}` {} ({}x)", est(e, 1, "us"), r.show(2)),
        ));
    }
    let sq = est(sq, 1, "us");
    Finding::all(parts, ", ").map_evidence(|e| format!("on {p}: `smart-q` {sq}, {e}"))
}

fn even(d: &Data<'_>, p: u32) -> Finding {
    let mut parts = Vec::new();
    for lock in ["smart-q", "tas-np", "native-np"] {
        let (Some(one), Some(all)) = (at(d, lock, 1), at(d, lock, p)) else {
            return Finding::missing(&format!("`{lock}` on 1 and {p} processors"));
        };
        let (a, b) = (est(one, 1, "us"), est(all, 1, "us"));
        parts.push((
            rule::within_factor(all, one, 1.5),
            format!("`{lock}` {a} on 1, {b} on {p}"),
        ));
    }
    Finding::all(parts, "; ")
}

fn overtakes(d: &Data<'_>, p: u32) -> Finding {
    let (Some(sq), Some(t)) = (at(d, "smart-q", p), at(d, "tas-np", p)) else {
        return Finding::missing(&format!("`smart-q` and `tas-np` on {p} processors"));
    };
    let (a, b) = (est(sq, 1, "us"), est(t, 1, "us"));
    Finding::new(
        rule::less(sq, t),
        format!("on {p}: `smart-q` {a}, `tas-np` {b}"),
    )
}

fn assess(rows: &[Row], _m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let sel = Sel::metric(METRIC);
    let locks = d.series(sel);
    let ps = d.counts(sel);
    let header = table::header("lock", ps.iter().map(|p| format!("{p} processor(s) (us)")));
    let table = table::by_series(&header, &locks, |n| {
        ps.iter()
            .map(|&q| na(at(&d, n, q), |e| format!("{:.1}", e.value)))
            .collect()
    });
    let param = |k: &str| d.param(sel, k).unwrap_or_default();
    let measured = if locks.is_empty() {
        format!("No `{METRIC}` points in this run's data.")
    } else {
        format!(
            "SMARTQ's synthetic loop (critical section {} ns, non-critical section {} ns, fixed for every \
             processor count as in the paper) at level 2.0 on the emulated scheduler (quantum {} ms), two workers \
             per virtual processor, on {} processor(s). Time per iteration times the processors, median of 3 runs:",
            param("cs_ns"),
            param("ncs_ns"),
            param("quantum_ms"),
            counts(&ps)
        )
    };
    let notes = "SMARTQ runs a number of iterations proportional to the processors, so its completion time is \
                 ideally flat; the time per iteration times the processors is the same quantity for runs bounded \
                 by time. With one processor there is no lock contention between running workers, only between \
                 a running worker and its descheduled peer."
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
    use crate::harness::testing;
    use crate::output::report::Verdict::*;

    fn rows(m: &Machine, curve: fn(&str, u32) -> f64) -> Vec<Row> {
        let ps = [1, m.cores() as u32];
        ["tas-np", "mcs", "mcs-np", "smart-q", "native-np"]
            .iter()
            .flat_map(|l| {
                ps.map(|p| testing::row(EXPERIMENT.id, l, p, m, METRIC, curve(l, p), 0.02, &[]))
            })
            .collect()
    }

    fn paper(lock: &str, p: u32) -> f64 {
        match lock {
            "mcs" | "mcs-np" => 100.0 * f64::from(p),
            "tas-np" => 50.0 + f64::from(p) / 64.0,
            _ => 40.0,
        }
    }

    #[test]
    fn verdicts_reach_every_case() {
        let opposite: fn(&str, u32) -> f64 = |lock, p| {
            if lock == "smart-q" {
                500.0 * f64::from(p)
            } else {
                40.0
            }
        };
        let cases = [(paper as _, Holds), (opposite, Differs)];
        testing::assert_verdicts(&EXPERIMENT, &testing::small_and_big(), rows, &cases);
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, paper));
    }
}
