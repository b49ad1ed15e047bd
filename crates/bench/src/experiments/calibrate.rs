//! `calibrate` — the machine's constants: uncontended atomic RMW cost, the
//! cache-line round trip between a pair of cores, one spin-wait iteration,
//! the block+wake hand-off and C (KLMO91: the cost of blocking, in spins)
//! for OS threads (futex) and for user threads (symmetry-threads
//! park/unpark, on a runtime of one processor and of two). The
//! measurements are [`crate::kernels::machine::measure`], which also backs
//! `symmetry calibrate`; every constant is recorded with the spread of its
//! repeats.

use crate::harness::prelude::*;
use crate::kernels::machine::{self, describe};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "calibrate",
    title: "Machine constants: atomic RMW, cache-line round trip, block+wake of OS and user threads, C in spins",
    source: "harness (inputs to ALL89 §V, KLMO91 §5)",
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// The constants every run measures, whatever its CPUs.
const ALWAYS: [&str; 4] = ["atomic_rmw_ns", "cas_ns", "spin_iter_ns", "user_rtt_1p_ns"];

/// What the calibration checks: that its constants were measured, and the
/// premise behind user-level threads that the report's KLMO91 sections
/// lean on.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "constants-measured",
        paper: "The models and the spin-then-block policies take the constants of the machine they run on as \
                inputs: KLMO91's C, \"the time for a context-switch (C) is equivalent to about 200 spins\" on the \
                Firefly (KLMO91 §5), is measured, never assumed.",
        rule: "the run measured the spin length, the atomic RMW and CAS costs and the user-thread hand-off, and \
               every constant it measured is finite and above zero",
        needs: Needs::NONE,
        judge: |d, _| measured_finding(d.rows()),
    },
    Claim {
        key: "user-block-cheaper",
        paper: "\"The thread system used in our measurements is a kernel-level implementation. The cost of a \
                context-switch is larger than it would be with a user-level implementation of threads\" (KLMO91 \
                §7; the premise of ALL89 and PRESTO).",
        rule: "a user-thread block+wake hand-off (park/unpark on a one-processor runtime, \
               `user_block_wake_1p_ns`) costs less than a futex block+wake hand-off between a pair of cores \
               (`block_wake_ns`)",
        needs: Needs::cores(2),
        judge: user_block_cheaper,
    },
];

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let bar = ctx.bar(EXPERIMENT.id, 1);
    let rows = machine::measure(ctx.quick)
        .into_iter()
        .map(|c| {
            let (t, v) = (c.threads, c.value());
            Row::new(EXPERIMENT.id, "machine", t, false, c.metric, v, c.unit).with_spread(&c.spread)
        })
        .collect();
    bar.finish_and_clear();
    Ok(rows)
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let bars = rows
        .iter()
        .filter(|r| r.unit == "ns")
        .map(|r| Bar {
            label: r.metric.clone(),
            value: r.value,
            group: format!("{} thread(s)", r.threads),
        })
        .collect();
    figure(
        "calibrate: machine constants",
        m,
        vec![Panel::Bar(BarPanel {
            title: "cost of primitive operations".into(),
            y_label: "ns (log)".into(),
            y_scale: Scale::Log,
            bars,
            reference_lines: vec![],
        })],
    )
}

/// A constant for the table: `ns` compactly, spins and others as numbers.
fn show(v: f64, unit: &str) -> String {
    if unit == "ns" {
        ns(v)
    } else {
        format!("{v:.0} {unit}")
    }
}

/// `constants-measured`: the constants every run measures are there, and all
/// measured constants are finite and positive.
fn measured_finding(rows: &[Row]) -> Finding {
    let missing: Vec<&str> = ALWAYS
        .iter()
        .copied()
        .filter(|k| !rows.iter().any(|r| r.metric == *k))
        .collect();
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| !(r.value.is_finite() && r.value > 0.0))
        .map(|r| format!("`{}` = {}", r.metric, r.value))
        .collect();
    if !bad.is_empty() {
        return Finding::new(
            Outcome::Fails,
            format!("not finite or not above zero: {}", bad.join(", ")),
        );
    }
    if !missing.is_empty() {
        return Finding::missing(&names(&missing));
    }
    Finding::new(
        Outcome::Holds,
        format!(
            "{} constant{}, all finite and above zero",
            rows.len(),
            if rows.len() == 1 { "" } else { "s" }
        ),
    )
}

/// `user-block-cheaper`: the one-processor user-thread hand-off costs
/// less than the futex hand-off.
fn user_block_cheaper(d: &Data<'_>, _m: &Machine) -> Finding {
    let est = |k: &str| d.estimate(Sel::metric(k));
    match (est("user_block_wake_1p_ns"), est("block_wake_ns")) {
        (Some(u), Some(b)) => Finding::new(
            rule::less(u, b),
            format!(
                "user hand-off {}, futex hand-off {}",
                fmt::est(u, 1, "ns"),
                fmt::est(b, 1, "ns")
            ),
        ),
        (None, _) => Finding::missing("`user_block_wake_1p_ns`"),
        (_, None) => Finding::missing("`block_wake_ns` (a futex hand-off between a pair of CPUs)"),
    }
}

fn assess(rows: &[Row], _m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let mut table = Table::new(&["constant", "value", "repeats span", "meaning"]);
    for r in rows {
        table.push(&[
            format!("`{}`", r.metric),
            show(r.value, &r.unit),
            r.spread().map_or("-".into(), |(lo, hi, n)| {
                format!("{} to {} ({n})", show(lo, &r.unit), show(hi, &r.unit))
            }),
            describe(&r.metric).to_string(),
        ]);
    }
    let v = |k: &str| d.value(Sel::metric(k));
    let mut measured = Vec::new();
    match (v("block_wake_ns"), v("c_spins_os"), v("cacheline_rtt_ns")) {
        (Some(b), Some(c), Some(l)) => measured.push(format!(
            "A futex block+wake hand-off between a pair of cores costs {} ({c:.0} spin iterations: C for OS \
             threads); a cache line crosses between them and back in {}.",
            ns(b),
            ns(l)
        )),
        _ => measured.push(
            "The run had fewer than two CPUs to pin a pair of threads to: the cache-line round trip and the \
             futex hand-off were not measured."
                .to_string(),
        ),
    }
    if let (Some(u), Some(c)) = (v("user_block_wake_1p_ns"), v("c_spins_user_1p")) {
        measured.push(format!(
            "A user-thread block+wake hand-off (park/unpark on symmetry-threads, local-readyq) costs {} on a \
             one-processor runtime ({c:.1} spin iterations: C for user threads).",
            ns(u)
        ));
    }
    if let (Some(u2), Some(c2)) = (v("user_block_wake_2p_ns"), v("c_spins_user_2p")) {
        measured.push(format!(
            "On a two-processor runtime it costs {} ({c2:.1} spin iterations; random placement keeps some \
             hand-offs on one processor).",
            ns(u2)
        ));
    }
    if let Some(b) = v("block_wake_ns") {
        let times = ["user_block_wake_1p_ns", "user_block_wake_2p_ns"]
            .iter()
            .zip(["one-processor", "two-processor"])
            .filter_map(|(k, label)| Some(format!("{:.1}x the {label} user hand-off", b / v(k)?)))
            .collect::<Vec<_>>();
        if !times.is_empty() {
            measured.push(format!("The futex hand-off costs {}.", times.join(" and ")));
        }
    }
    Assessment {
        measured: measured.join(" "),
        notes: "Every constant is the median of its repeats; the table gives the range they spanned. The \
                spin-then-block experiments use C measured the same way: `cs-calibrate`'s, under `reproduce`."
            .into(),
        table: Some(table),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::testing::{self, small_vm};
    use crate::output::report::Verdict::*;

    /// A run's constants with a futex hand-off of `futex` ns and a
    /// one-processor user hand-off of `user` ns; `cas` as given.
    fn rows(m: &Machine, [futex, user, cas]: [f64; 3]) -> Vec<Row> {
        let r = |metric: &str, v: f64, t: u32| {
            testing::Rows::new(&EXPERIMENT, m).row("machine", t, metric, v)
        };
        let spin = 15.0;
        vec![
            r("atomic_rmw_ns", 9.0, 1),
            r("cas_ns", cas, 1),
            r("spin_iter_ns", spin, 1),
            r("work_iter_ns", 1.5, 1),
            r("cacheline_rtt_ns", 170.0, 2),
            r("futex_rtt_ns", 2.0 * futex, 2),
            r("block_wake_ns", futex, 2),
            r("c_spins_os", futex / spin, 2),
            r("user_rtt_1p_ns", 2.0 * user, 1),
            r("user_block_wake_1p_ns", user, 1),
            r("c_spins_user_1p", user / spin, 1),
        ]
    }

    /// A futex hand-off of 5 us, a user hand-off of 100 ns and a 12 ns
    /// CAS: what the claims expect.
    const PAPER: [f64; 3] = [5000.0, 100.0, 12.0];

    #[test]
    fn verdicts_reach_every_case() {
        let cases = [
            (PAPER, Holds),
            ([100.0, 5000.0, 0.0], Differs),
            ([100.0, 5000.0, 12.0], Partial),
            // A hand-off inside the noise neither supports nor refutes.
            ([100.0, 101.0, 12.0], Holds),
        ];
        let machines = testing::small_and_big();
        testing::assert_verdicts(&EXPERIMENT, &machines, rows, &cases);
        for m in &machines {
            testing::assert_verdict(&EXPERIMENT, &[], m, NotMeasurable);
        }
        // One core: no pair to hand off between; the constants still count.
        let one = testing::machine(1, true);
        let says = "needs 2 or more cores";
        testing::assert_holds_saying(&EXPERIMENT, &rows(&one, PAPER), &one, says);
    }

    #[test]
    fn a_missing_constant_is_not_a_failure() {
        let m = small_vm();
        let mut r = rows(&m, PAPER);
        r.retain(|r| r.metric != "spin_iter_ns");
        let f = measured_finding(&r);
        assert!(matches!(f.outcome, Outcome::NotMeasurable(_)), "{f:?}");
        let nan = Row::new("calibrate", "machine", 1, false, "x", f64::NAN, "ns");
        r.push(nan);
        assert_eq!(measured_finding(&r).outcome, Outcome::Fails);
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, PAPER));
    }
}
