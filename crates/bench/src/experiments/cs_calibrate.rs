//! `cs-calibrate` — KLMO91 §5: C, the cost of a block+wake in spins, for
//! OS threads (futex hand-off between a pair of cores) and for user
//! threads (`symmetry-threads` park/unpark), and the length of one spin.
//! The numbers come from [`crate::kernels::machine::measure`] (one code
//! path for `symmetry calibrate`, `calibrate` and this experiment); they
//! are installed by [`klmo91::measure_and_install`] so the experiments that
//! follow (`cs-analytic`, `cs-elapsed`, `interpose-apps`, `peer-locks`)
//! run their spin-then-block locks with the measured C: in the same
//! process, or, under `reproduce`, which runs each experiment in a process
//! of its own, through the environment (its `Schedule::installs`).
//!
//! Rows: series `os` (threads 2: a pair of cores) and `user` (threads =
//! the runtime's processors, 1 and 2), metrics `c_spins`,
//! `block_wake_ns`, `ns_per_spin`, each with the spread of its repeats;
//! parameter `installed` says which user C is in force (the one of a
//! runtime with more than one processor, as the workloads build, when the
//! run had one).

use crate::harness::Env;
use crate::harness::prelude::*;
use crate::kernels::klmo91;
use crate::kernels::machine::Constant;
use symmetry_locks::spin_then_block::calibration::Calibration;

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "cs-calibrate",
    title: "C in spins: block+wake cost of OS threads (futex) and user threads, and the length of a spin",
    source: "KLMO91 §5",
    schedule: Schedule {
        installs: Some(install_env),
        ..Schedule::PLAIN
    },
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// KLMO91's C on the Firefly: "the time for a context-switch (C) is
/// equivalent to about 200 spins" (§5), "assumed to be a constant 200
/// usec" (§4).
const FIREFLY_C_SPINS: f64 = 200.0;
/// KLMO91's context-switch time on the Firefly, us.
const FIREFLY_C_US: f64 = 200.0;
/// "Of the same order" as the Firefly's C: within this factor either way.
const SAME_ORDER: f64 = 5.0;

/// KLMO91 §5 and §7.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "c-os-order",
        paper: "\"Since the time for a context-switch (C) is equivalent to about 200 spins, we measured our programs \
                with both 100 (C/2) and 200 (C) spins\" (KLMO91 §5); \"the time for a context switch is assumed to \
                be a constant 200 usec\" (§4). The policies fixed-spin(C), fixed-spin(C/2), random-walk (capped at \
                C) and the off-line optimum are all defined in terms of C.",
        rule: "C for OS threads (a futex block+wake hand-off between a pair of cores, in spin-wait iterations) is \
               of the Firefly's order: within 5x of 200 spins either way",
        needs: Needs::cores(2),
        judge: c_os_order,
    },
    Claim {
        key: "c-user-smaller",
        paper: "\"The thread system used in our measurements is a kernel-level implementation. The cost of a \
                context-switch is larger than it would be with a user-level implementation of threads\" (KLMO91 §7).",
        rule: "the C installed for user threads (park/unpark, in spins) is below the C for OS threads",
        needs: Needs::cores(2),
        judge: c_user_smaller,
    },
];

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let bar = ctx.bar(EXPERIMENT.id, 1);
    let (cal, m) = klmo91::measure_and_install(ctx.quick);
    let get = |k: &str| {
        m.iter()
            .find(|c| c.metric == k)
            .map(|c: &Constant| c.spread)
    };
    let spin = get("spin_iter_ns").unwrap_or_else(|| Spread::single(cal.ns_per_spin));
    let mut rows = Vec::new();
    let mut push =
        |series: &str, p: u32, bw: Option<Spread>, c: Option<Spread>, installed: bool| {
            let (Some(bw), Some(c)) = (bw, c) else { return };
            for (metric, s, unit) in [
                ("c_spins", c, "spins"),
                ("block_wake_ns", bw, "ns"),
                ("ns_per_spin", spin, "ns"),
            ] {
                rows.push(
                    Row::new(EXPERIMENT.id, series, p, false, metric, s.median, unit)
                        .param("processors", p)
                        .param("installed", installed)
                        .param(
                            "c_installed",
                            if series == "os" {
                                cal.c_spins_os
                            } else {
                                cal.c_spins_user
                            },
                        )
                        .with_spread(&s),
                );
            }
        };
    push("os", 2, get("block_wake_ns"), get("c_spins_os"), true);
    let two = get("c_spins_user_2p").is_some();
    push(
        "user",
        1,
        get("user_block_wake_1p_ns"),
        get("c_spins_user_1p"),
        !two,
    );
    push(
        "user",
        2,
        get("user_block_wake_2p_ns"),
        get("c_spins_user_2p"),
        true,
    );
    bar.finish_and_clear();
    Ok(rows)
}

/// The environment that installs, in the experiments after this one,
/// the calibration its rows record ([`Schedule::installs`]).
fn install_env(rows: &[Row]) -> Option<Env> {
    installed_calibration(rows).map(|cal| klmo91::calibration_env(&cal))
}

/// The calibration this experiment installed, read back from its rows:
/// the spin length and the two C values in force (`c_installed`). `None`
/// if the rows lack them.
fn installed_calibration(rows: &[Row]) -> Option<Calibration> {
    let os = rows
        .iter()
        .find(|r| r.series == "os" && r.metric == "ns_per_spin")?;
    let user = rows.iter().find(|r| r.series == "user")?;
    let c = |r: &Row| r.get_param("c_installed")?.parse::<u32>().ok();
    Some(Calibration::new(os.value, c(os)?, c(user)?))
        .filter(|cal| cal.ns_per_spin.is_finite() && cal.ns_per_spin > 0.0)
}

fn label(r: &Row) -> String {
    format!("{} ({}p)", r.series, r.threads)
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let bars = |metric: &str| {
        rows.iter()
            .filter(|r| r.metric == metric)
            .map(|r| Bar {
                label: label(r),
                value: r.value,
                group: r.series.clone(),
            })
            .collect()
    };
    figure(
        "cs-calibrate (KLMO91 §5): C, the block+wake cost, in this run",
        m,
        vec![
            Panel::Bar(BarPanel {
                title: "C in spins".into(),
                y_label: "spins (log)".into(),
                y_scale: Scale::Log,
                bars: bars("c_spins"),
                reference_lines: vec![("Firefly C = 200 spins".into(), FIREFLY_C_SPINS)],
            }),
            Panel::Bar(BarPanel {
                title: "block + wake hand-off".into(),
                y_label: "ns (log)".into(),
                y_scale: Scale::Log,
                bars: bars("block_wake_ns"),
                reference_lines: vec![(
                    "Firefly context switch, 200 us".into(),
                    FIREFLY_C_US * 1e3,
                )],
            }),
        ],
    )
}

/// The installed row of `series` and `metric` (the first if none is
/// marked installed).
fn installed<'a>(d: &Data<'a>, series: &str, metric: &str) -> Option<&'a Row> {
    let sel = Sel::metric(metric).series(series);
    d.row(sel.params(&[("installed", "true")]))
        .or_else(|| d.row(sel))
}

/// The estimate of the installed row of `series` and `metric`
/// ([`installed`]).
fn installed_estimate(d: &Data<'_>, series: &str, metric: &str) -> Option<Estimate> {
    installed(d, series, metric).map(|r| d.estimate_of(r))
}

/// `c-os-order`: C for OS threads within [`SAME_ORDER`] of the Firefly's
/// 200 spins either way.
fn c_os_order(d: &Data<'_>, _m: &Machine) -> Finding {
    let Some(c) = installed_estimate(d, "os", "c_spins") else {
        return Finding::missing("C for OS threads");
    };
    let firefly = Estimate::exact(FIREFLY_C_SPINS);
    let (shown, r) = (c.show(0), c.ratio(firefly).show(2));
    Finding::new(
        rule::within_factor(c, firefly, SAME_ORDER),
        format!("C for OS threads {shown} spins = {r}x the Firefly's 200"),
    )
}

/// `c-user-smaller`: the installed C for user threads below the C for OS
/// threads.
fn c_user_smaller(d: &Data<'_>, _m: &Machine) -> Finding {
    let c = |series| installed_estimate(d, series, "c_spins");
    let (Some(u), Some(o)) = (c("user"), c("os")) else {
        return Finding::missing("C for user threads and for OS threads");
    };
    let (us, os) = (u.show(0), o.show(0));
    Finding::new(
        rule::less(u, o),
        format!("C for user threads {us} spins, for OS threads {os} spins"),
    )
}

fn assess(rows: &[Row], m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let mut table = Table::new(&[
        "thread kind",
        "processors",
        "block + wake",
        "C (spins)",
        "C over the repeats",
        "spin",
        "C vs Firefly (200 spins)",
        "used by the locks",
    ]);
    for r in d.select(Sel::metric("c_spins")) {
        let at = |metric: &str| d.value(Sel::metric(metric).series(&r.series).threads(r.threads));
        table.push(&[
            r.series.clone(),
            r.threads.to_string(),
            at("block_wake_ns").map_or("n/a".into(), ns),
            format!("{:.0}", r.value),
            r.spread().map_or("-".into(), |(lo, hi, n)| {
                format!("{lo:.0} to {hi:.0} ({n})")
            }),
            at("ns_per_spin").map_or("n/a".into(), ns),
            format!("{:.2}x", r.value / FIREFLY_C_SPINS),
            if r.get_param("installed") == Some("true") {
                "yes".into()
            } else {
                "no".into()
            },
        ]);
    }
    table.push(&[
        "Firefly (KLMO91)",
        "6",
        "200 us",
        "200",
        "-",
        "~1 us",
        "1.00x",
        "-",
    ]);
    let os_c = installed_estimate(&d, "os", "c_spins");
    let v = |series: &str, metric: &str| installed(&d, series, metric).map(|r| r.value);
    let mut measured = String::new();
    if let (Some(c), Some(bw)) = (v("os", "c_spins"), v("os", "block_wake_ns")) {
        measured.push_str(&format!(
            "OS threads: a futex block+wake hand-off between a pair of cores costs {} = **C = {c:.0} spins** \
             ({:.2}x the Firefly's 200 spins; in time {:.0}x shorter than its 200 us). ",
            ns(bw),
            c / FIREFLY_C_SPINS,
            FIREFLY_C_US * 1e3 / bw
        ));
    }
    if let (Some(c), Some(bw)) = (v("user", "c_spins"), v("user", "block_wake_ns")) {
        measured.push_str(&format!(
            "User threads: a park/unpark hand-off costs {} = **C = {c:.0} spins** ({:.2}x the Firefly's). ",
            ns(bw),
            c / FIREFLY_C_SPINS
        ));
    }
    if let Some(s) = v("os", "ns_per_spin").or_else(|| v("user", "ns_per_spin")) {
        measured.push_str(&format!(
            "One spin (a `pause`-style spin-wait iteration) takes {} in this run, against about 1 us on a CVAX. ",
            ns(s)
        ));
    }
    if measured.is_empty() {
        measured.push_str("No C was measured in this run.");
    } else {
        measured.push_str(
            "These values are installed for the experiments that follow (`cs-analytic`, `cs-elapsed`, \
             `peer-locks`).",
        );
    }
    let mut notes = String::from(
        "C is a property of the machine and the thread system, which is why it is measured, never assumed.",
    );
    if let Some(c) = os_c {
        notes.push_str(&format!(
            " Over the repeats C for OS threads spanned {:.0} to {:.0} spins; the experiments record the C they \
             ran with.",
            c.lo, c.hi
        ));
    }
    if m.virtualized {
        notes.push_str(&format!(
            " The run reported a hypervisor ({}): a futex hand-off there includes waking the other virtual CPU.",
            m.hypervisor.as_deref().unwrap_or("unknown")
        ));
    }
    if let (Some(o), Some(u)) = (v("os", "c_spins"), v("user", "c_spins"))
        && u > 0.0
    {
        notes.push_str(&format!(
            " Blocking a user thread costs {:.1}x less than blocking an OS thread; with a small C blocking is \
             cheap, so `always-block` loses little and the policies bunch together, as KLMO91 §7 expected \
             (\"reduced context-switch time might be expected to decrease the value of competitive algorithms, \
             since the penalty for blocking inappropriately is reduced\").",
            o / u
        ));
    }
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

    /// Rows with C = `os` spins for OS threads and `user` for the
    /// installed (two-processor) user runtime; one spin is 20 ns.
    fn rows(m: &Machine, [os, user]: [f64; 2]) -> Vec<Row> {
        let mut out = Vec::new();
        for (series, p, c, installed) in [
            ("os", 2, os, "true"),
            ("user", 1, user / 6.0, "false"),
            ("user", 2, user, "true"),
        ] {
            for (metric, v) in [
                ("c_spins", c),
                ("block_wake_ns", c * 20.0),
                ("ns_per_spin", 20.0),
            ] {
                let row = testing::Rows::new(&EXPERIMENT, m).row(series, p, metric, v);
                out.push(row.param("installed", installed).param("processors", p));
            }
        }
        out
    }

    /// C of a measured run: 342 spins on OS threads, 31 on user threads.
    const C: [f64; 2] = [342.0, 31.0];

    /// What `reproduce` hands to the experiments after this one: the spin
    /// length and the C values in force, read back from the CSV rows.
    #[test]
    fn installed_calibration_reads_back() {
        let m = small_vm();
        let mut rs = rows(&m, C);
        for r in &mut rs {
            let c = if r.series == "os" { "342" } else { "31" };
            r.params.push(("c_installed".into(), c.into()));
        }
        let cal = installed_calibration(&rs).unwrap();
        assert_eq!((cal.c_spins_os, cal.c_spins_user), (342, 31));
        assert!((cal.ns_per_spin - 20.0).abs() < 1e-9);
        assert!(installed_calibration(&rows(&m, C)).is_none());
        assert!(installed_calibration(&[]).is_none());
    }

    #[test]
    fn verdicts_reach_every_case() {
        let cases = [
            (C, Holds),
            ([5000.0, 6000.0], Differs),
            ([1000.0, 1000.0], Indistinct),
        ];
        let machines = testing::small_and_big();
        testing::assert_verdicts(&EXPERIMENT, &machines, rows, &cases);
        for m in &machines {
            testing::assert_verdict(&EXPERIMENT, &[], m, NotMeasurable);
        }
        // One core: no pair of cores for the futex hand-off.
        let one = testing::machine(1, true);
        testing::assert_verdict(&EXPERIMENT, &rows(&one, C), &one, NotMeasurable);
    }

    #[test]
    fn the_installed_user_c_is_judged() {
        let m = small_vm();
        let r = rows(&m, C);
        let d = Data::new(&r);
        assert_eq!(installed(&d, "user", "c_spins").map(|r| r.threads), Some(2));
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, C));
    }
}
