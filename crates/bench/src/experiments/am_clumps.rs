//! `am-clumps` — LC98's "Clumps" (clusters of SMPs): Active Messages over
//! shared memory within a host and over MPI between hosts, beside MPI's
//! own `MPI_Send`/`MPI_Recv` ping-pong measured in the same run.
//!
//! Each repeat runs three MPI jobs of `symmetry am clumps` under `mpiexec`
//! (the `kernels::clumps` module, built with the `mpi` feature): four
//! ranks over shared memory only (`shm`, the pair of ranks 0 and 1), two
//! ranks over MPI only (`mpi`), and four ranks on two emulated hosts
//! (`hierarchical`: shared memory between ranks 0 and 1, MPI between rank
//! 0 and rank 2). The `shm` job has the hierarchical job's shape (the same
//! pair measured, the same two idle ranks beside it), so that the
//! same-host ratio measures what the transport adds, not what two more
//! processes cost where they outnumber the cores. Each job gives, per
//! pair, the AM round trip, the time per message of a one-way stream, the
//! bulk bandwidth and MPI's own ping-pong; a row is the median over the
//! repeats of each job's median block, with the repeats' range. The two
//! ratios the goals judge pair each repeat with the same repeat's
//! reference (AM over MPI against the MPI ping-pong of the same job, block
//! by block: the job alternates a block of each, and the repeat's ratio is
//! the median of the blocks' ratios; hierarchical same-host against the
//! `shm` job just before it), and carry [`Spread::median_interval`]'s 95%
//! interval for their median, which from [`OWN_MIN`] repeats on leaves out
//! the outermost repeats. Then the three applications run once per
//! transport at four ranks (`hierarchical` on two emulated hosts).
//!
//! Needs a build with `--features mpi` and `mpiexec` on the `PATH`;
//! otherwise the rows say why nothing was measured.

use std::path::Path;
use std::time::Duration;

use crate::harness::prelude::*;

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "am-clumps",
    title: "Active Messages within and between hosts: shared memory, MPI and both, against MPI's ping-pong",
    source: "LC98 §1 (Clumps); issue: AM over MPI",
    ..Experiment::new(CLAIMS, run, draw, assess)
};

const CLAIMS: &[Claim] = &[
    Claim {
        key: "am-over-mpi-rtt",
        paper: "Target (this project's): a round trip of Active Messages carried over MPI costs at most 1.5x \
                MPI's own `MPI_Send`/`MPI_Recv` ping-pong between the same ranks in the same run.",
        rule: "the `mpi` transport's round trip over the MPI ping-pong's is at most 1.5",
        needs: Needs::cores(2),
        judge: |d, _| {
            let what = "`mpi` round trip / MPI ping-pong";
            ratio_at_most(d, (MPI, 2, "rtt_vs_mpi_pingpong"), RTT_GOAL, what)
        },
    },
    Claim {
        key: "hierarchical-keeps-shm",
        paper: "Target (this project's): the hierarchical transport keeps the shared-memory round trip for \
                ranks on the same host (LC98's Clumps: shared memory inside a box).",
        rule: "the hierarchical transport's same-host round trip over the `shm` transport's (both four-rank \
               jobs, the pair of ranks 0 and 1) is at most 1.1",
        needs: Needs::cores(2),
        judge: |d, _| {
            let what = "hierarchical same-host round trip / `shm` round trip";
            ratio_at_most(d, (HIER_SAME, 4, "rtt_vs_shm"), SAME_HOST_GOAL, what)
        },
    },
];

/// Series: the transports and pairs, and the peer.
const SHM: &str = "shm";
const MPI: &str = "mpi";
const HIER_SAME: &str = "hierarchical-same-host";
const HIER_CROSS: &str = "hierarchical-cross-host";
const PEER: &str = "mpi-pingpong";
const SERIES: [&str; 5] = [SHM, MPI, HIER_SAME, HIER_CROSS, PEER];
const RTT_GOAL: f64 = 1.5;
const SAME_HOST_GOAL: f64 = 1.1;
/// Ranks of the application runs.
const APP_RANKS: u32 = 4;
/// Claim algorithm of the application runs' shared-memory queues.
const APP_ALGO: &str = "stamp";

/// Ranks of the job a series is measured in: four for `shm` and the
/// hierarchical pairs, two for `mpi` and its peer.
fn ranks(series: &str) -> u32 {
    if series == SHM || series.starts_with("hierarchical") {
        4
    } else {
        2
    }
}

/// A metric of a pair: its name, how to read it, its unit.
type Metric = (&'static str, fn(&Pair) -> f64, &'static str);

/// One job's medians for one pair.
#[derive(Debug, Clone, Copy, Default)]
struct Pair {
    rtt: f64,
    oneway: f64,
    bulk: f64,
    mpi: f64,
    /// The median over blocks of the round trip over MPI's ping-pong
    /// measured right after it (the kernel alternates the two).
    rtt_vs_mpi: f64,
}

/// The median of `v[num][i] / v[den][i]` over the blocks `i`.
fn block_ratio(v: &serde_json::Value, num: &str, den: &str) -> Option<f64> {
    let (n, d) = (column(v, num)?, column(v, den)?);
    if n.len() != d.len() {
        return None;
    }
    let xs: Vec<f64> = n.iter().zip(&d).map(|(n, d)| n / d).collect();
    Spread::of(&xs).map(|s| s.median)
}

/// The numbers of the array `v[key]` (a job writes one per block).
fn column(v: &serde_json::Value, key: &str) -> Option<Vec<f64>> {
    Some(
        v.get(key)?
            .as_array()?
            .iter()
            .filter_map(serde_json::Value::as_f64)
            .collect(),
    )
}

fn median(v: &serde_json::Value, key: &str) -> Option<f64> {
    Spread::of(&column(v, key)?).map(|s| s.median)
}

/// Runs one `am clumps` job: `n` ranks, `transport`, `hosts` emulated
/// hosts; its pairs in order.
fn job(exe: &Path, n: u32, transport: &str, hosts: u32, quick: bool) -> Result<Vec<Pair>, String> {
    // Rank 0's result file, in a fresh private directory removed on return.
    let dir = crate::harness::ScratchDir::new("symmetry-clumps")?;
    let out = dir.path().join("pairs.jsonl");
    let (rounds, blocks, burst, bulk) = if quick {
        ("2000", "5", "20000", "400")
    } else {
        ("10000", "7", "100000", "2000")
    };
    let mut cmd = crate::kernels::am_job::mpiexec_job(n);
    cmd.arg(exe)
        .args(["am", "clumps", "--rounds", rounds, "--blocks", blocks])
        .args(["--burst", burst, "--bulk", bulk, "--out"])
        .arg(&out)
        .env("SYMMETRY_AM_TRANSPORT", transport)
        .env("SYMMETRY_AM_HOSTS", hosts.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let ran = crate::kernels::am_job::run_bounded(cmd, Duration::from_secs(600), &mut || {});
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    drop(dir);
    ran.map_err(|e| format!("{transport} job failed: {e}"))?;
    text.lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).map_err(|e| format!("bad clumps result: {e}"))?;
            Ok(Pair {
                rtt: median(&v, "rtt_ns").ok_or("no rtt_ns")?,
                oneway: median(&v, "oneway_ns").ok_or("no oneway_ns")?,
                bulk: median(&v, "bulk_mb_s").ok_or("no bulk_mb_s")?,
                mpi: median(&v, "mpi_rtt_ns").ok_or("no mpi_rtt_ns")?,
                rtt_vs_mpi: block_ratio(&v, "rtt_ns", "mpi_rtt_ns")
                    .ok_or("rtt_ns and mpi_rtt_ns do not pair up")?,
            })
        })
        .collect()
}

/// Why nothing can be measured here, if so.
fn unavailable() -> Option<String> {
    if !cfg!(feature = "mpi") {
        return Some("not built with the `mpi` feature".into());
    }
    if crate::kernels::am_job::symmetry_exe().is_none() {
        return Some("needs the `symmetry` binary to run its ranks".into());
    }
    let ok = std::process::Command::new(crate::kernels::am_job::mpiexec())
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    (!ok).then(|| "mpiexec not installed".into())
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    if let Some(why) = unavailable() {
        return Ok(SERIES
            .iter()
            .map(|s| {
                Row::new(EXPERIMENT.id, s, 2, ctx.over(2), "completed", 0.0, "bool")
                    .param("status", &why)
            })
            .collect());
    }
    let exe = crate::kernels::am_job::symmetry_exe().ok_or("no symmetry binary")?;
    let row = |series: &str, t: u32, metric: &str, v: f64, unit: &str| {
        let over = ctx.over(t as usize);
        Row::new(EXPERIMENT.id, series, t, over, metric, v, unit)
    };
    // The two ratios are judged on their own median intervals, which need
    // `OWN_MIN` repeats: with fewer, the interval is the full range, and
    // one disturbed repeat sets an end of it. Full runs take 15, whose
    // interval leaves out three repeats at each end.
    let repeats = if ctx.quick { OWN_MIN } else { 15 };
    let bar = ctx.bar(EXPERIMENT.id, repeats * 3 + 9);
    // Per series, per repeat.
    let mut got: Vec<Vec<Pair>> = vec![Vec::new(); SERIES.len()];
    let mut same_vs_shm = Vec::new();
    let mut mpi_vs_peer = Vec::new();
    let measure = |n: u32, transport: &str, hosts: u32| {
        bar.set_message(transport.to_string());
        let pairs = job(&exe, n, transport, hosts, ctx.quick);
        bar.inc(1);
        pairs
    };
    for _ in 0..repeats {
        let shm = measure(4, "shm", 1)?;
        let mpi = measure(2, "mpi", 1)?;
        let hier = measure(4, "hierarchical", 2)?;
        let (Some(&s), Some(&m), [h_same, h_cross, ..]) =
            (shm.first(), mpi.first(), hier.as_slice())
        else {
            return Err("am-clumps: a job returned fewer pairs than it measures".into());
        };
        got[0].push(s);
        got[1].push(m);
        got[2].push(*h_same);
        got[3].push(*h_cross);
        got[4].push(Pair {
            rtt: m.mpi,
            ..Pair::default()
        });
        mpi_vs_peer.push(m.rtt_vs_mpi);
        same_vs_shm.push(h_same.rtt / s.rtt);
    }
    let mut rows = Vec::new();
    for (series, pairs) in SERIES.iter().zip(&got) {
        let t = ranks(series);
        let metrics: &[Metric] = if *series == PEER {
            &[("rtt_ns", |p| p.rtt, "ns")]
        } else {
            &[
                ("rtt_ns", |p| p.rtt, "ns"),
                ("oneway_ns", |p| p.oneway, "ns"),
                ("bulk_mb_s", |p| p.bulk, "MB/s"),
            ]
        };
        for (metric, f, unit) in metrics {
            let xs: Vec<f64> = pairs.iter().map(f).collect();
            let s = Spread::of(&xs).ok_or("am-clumps: no repeat")?;
            let transport = series.split('-').next().unwrap_or(series);
            let r = row(series, t, metric, s.median, unit).param("transport", transport);
            rows.push(r.with_spread(&s));
        }
    }
    for (series, t, metric, xs) in [
        (MPI, 2u32, "rtt_vs_mpi_pingpong", &mpi_vs_peer),
        (HIER_SAME, 4, "rtt_vs_shm", &same_vs_shm),
    ] {
        let s = Spread::median_interval(xs).ok_or("am-clumps: no repeat")?;
        rows.push(row(series, t, metric, s.median, "x").with_spread(&s));
    }
    // The applications, once per transport.
    use symmetry_workloads::am_apps::{App, Size};
    for app in [App::Fft, App::ConComm, App::Sample] {
        for (transport, hosts) in [(SHM, 1), (MPI, 1), ("hierarchical", 2)] {
            bar.set_message(format!("{} over {transport}", app.name()));
            let outs = crate::kernels::am_job::spawn_app_mpi(
                &exe,
                APP_RANKS,
                app,
                APP_ALGO,
                Size::Quick,
                transport,
                hosts,
                Duration::from_secs(600),
            )?;
            let s = crate::kernels::am_job::summarize(&outs);
            let ms = s.elapsed.as_secs_f64() * 1e3;
            rows.push(
                row(transport, APP_RANKS, "app_ms", ms, "ms")
                    .param("app", app.name())
                    .param("verified", s.verified)
                    .param("checksum", format!("{:#018x}", s.checksum)),
            );
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let bars = |metric: &str, t: fn(&str) -> u32| -> Vec<Bar> {
        SERIES
            .iter()
            .filter_map(|s| value(rows, s, t(s), metric, None).map(|v| Bar::new(s, v, s)))
            .collect()
    };
    let panel = |title: &str, metric: &str, unit: &str, scale| {
        Panel::Bar(BarPanel {
            title: title.into(),
            y_label: unit.into(),
            y_scale: scale,
            bars: bars(metric, ranks),
            reference_lines: Vec::new(),
        })
    };
    let mut apps: Vec<Bar> = Vec::new();
    for r in rows.iter().filter(|r| r.metric == "app_ms") {
        let app = r.get_param("app").unwrap_or("?");
        apps.push(Bar::new(
            &format!("{app} / {}", r.series),
            r.value,
            &r.series,
        ));
    }
    figure(
        "am-clumps: Active Messages within and between hosts",
        m,
        vec![
            panel("round trip", "rtt_ns", "ns", Scale::Log),
            panel("one-way, time per message", "oneway_ns", "ns", Scale::Log),
            panel("bulk bandwidth", "bulk_mb_s", "MB/s", Scale::Log),
            Panel::Bar(BarPanel {
                title: "applications (quick inputs)".into(),
                y_label: "ms".into(),
                y_scale: Scale::Log,
                bars: apps,
                reference_lines: Vec::new(),
            }),
        ],
    )
}

/// Why nothing was measured, if the run's `completed` rows say so.
fn nothing_measured(d: &Data<'_>) -> Option<String> {
    d.select(Sel::metric("completed"))
        .find_map(|r| r.get_param("status").map(str::to_string))
}

/// `s`'s ratio `metric` at `t` ranks at most `goal` (`what` names it), or
/// not measurable where nothing was measured.
fn ratio_at_most(
    d: &Data<'_>,
    (s, t, metric): (&str, u32, &str),
    goal: f64,
    what: &str,
) -> Finding {
    if let Some(w) = nothing_measured(d) {
        return Finding::not_measurable(format!("nothing was measured: {w}"));
    }
    // Each ratio row is the only row of its metric: with `OWN_MIN` repeats
    // or more it carries its median interval, and is read on it; an older
    // CSV with fewer repeats falls back to `Data::estimate_of` (its
    // relative repeat range either side of the median).
    match d.estimate_own(Sel::metric(metric).series(s).threads(t)) {
        None => Finding::missing(what),
        Some(r) => Finding::new(
            rule::at_most(r, goal),
            format!("{what}: {} (goal at most {goal})", r.show(2)),
        ),
    }
}

fn assess(rows: &[Row], _m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let why = nothing_measured(&d);
    let header = ["series", "round trip", "one-way per message", "bulk MB/s"].map(String::from);
    let table = table::by_series(&header, &SERIES, |s| {
        let cell = |metric: &str| value(rows, s, ranks(s), metric, None);
        let mb = |v: f64| format!("{v:.0}");
        vec![
            na(cell("rtt_ns"), ns),
            na(cell("oneway_ns"), ns),
            na(cell("bulk_mb_s"), mb),
        ]
    });
    let apps: Vec<String> = rows
        .iter()
        .filter(|r| r.metric == "app_ms")
        .map(|r| {
            format!(
                "{} over `{}` {:.1} ms{}",
                r.get_param("app").unwrap_or("?"),
                r.series,
                r.value,
                if r.get_param("verified") == Some("true") {
                    ""
                } else {
                    " (NOT verified)"
                }
            )
        })
        .collect();
    let repeats = match d
        .row(Sel::metric("rtt_vs_mpi_pingpong"))
        .and_then(Row::spread)
    {
        Some((_, _, n)) => format!("{n} repeats"),
        None => "the repeats".to_string(),
    };
    let measured = match &why {
        Some(w) => format!("Not measured: {w}."),
        None => format!(
            "Two ranks for `mpi` and its MPI ping-pong; four for `shm` (rank 0 with rank 1) and for the \
             hierarchical transport on two emulated hosts (rank 0 with rank 1 on its host, and with rank 2 on \
             the other); each value the median over {repeats} of a job's median block. The `mpi` job \
             alternates blocks of its round trip and of MPI's ping-pong, and its ratio is the median of the \
             blocks' ratios; the two ratios' intervals are those of their medians over the repeats. \
             Applications (quick inputs, {APP_RANKS} ranks, shared-memory queues claimed by `{APP_ALGO}`): {}.",
            if apps.is_empty() {
                "none".to_string()
            } else {
                apps.join("; ")
            }
        ),
    };
    let over = d.select(Sel::metric("rtt_ns")).any(|r| r.oversubscribed);
    let notes = if over {
        "Some jobs had more ranks than the run's cores (rows marked oversubscribed): the ranks that are not \
         measuring sleep between polls, but MPI's own progress engine still takes turns with the measured pair."
            .to_string()
    } else {
        String::new()
    };
    Assessment {
        measured,
        notes,
        table: Some(table),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Outcome;
    use crate::harness::testing::{self, big_metal, small_vm};
    use crate::output::report::Verdict;

    fn rows(m: &Machine, over_mpi: f64, same_vs_shm: f64) -> Vec<Row> {
        let r = |s: &str, t: u32, metric: &str, v: f64| {
            testing::row(EXPERIMENT.id, s, t, m, metric, v, 0.02, &[])
        };
        vec![
            r(SHM, 4, "rtt_ns", 500.0),
            r(MPI, 2, "rtt_ns", 3000.0 * over_mpi),
            r(PEER, 2, "rtt_ns", 3000.0),
            r(HIER_SAME, 4, "rtt_ns", 500.0 * same_vs_shm),
            r(HIER_CROSS, 4, "rtt_ns", 4000.0),
            r(MPI, 2, "rtt_vs_mpi_pingpong", over_mpi),
            r(HIER_SAME, 4, "rtt_vs_shm", same_vs_shm),
        ]
    }

    #[test]
    fn verdicts_reach_every_case() {
        let m = big_metal();
        let v = |rows: &[Row]| testing::render(&EXPERIMENT, rows, &m).0;
        assert_eq!(v(&rows(&m, 1.1, 1.02)), Verdict::Holds);
        assert_eq!(v(&rows(&m, 2.0, 1.5)), Verdict::Differs);
        let none: Vec<Row> = SERIES
            .iter()
            .map(|s| {
                Row::new(EXPERIMENT.id, s, 2, false, "completed", 0.0, "bool")
                    .param("status", "not built with the `mpi` feature")
            })
            .collect();
        let (verdict, text) = testing::render(&EXPERIMENT, &none, &m);
        assert_eq!(verdict, Verdict::NotMeasurable);
        assert!(text.contains("not built with the `mpi` feature"), "{text}");
    }

    #[test]
    fn ratios_with_enough_repeats_are_read_on_their_own_interval() {
        let m = small_vm();
        let judged = |lo: f64, hi: f64, n: usize| {
            let mut data = rows(&m, 1.2, 1.06);
            let same = data
                .iter_mut()
                .find(|r| r.metric == "rtt_vs_shm")
                .expect("the same-host ratio row");
            *same = same.clone().with_spread(&Spread {
                median: 1.06,
                lo,
                hi,
                n,
            });
            testing::findings(&EXPERIMENT, &data, &m)
        };
        // The median's interval inside the 1.1 goal, then across it.
        testing::assert_outcome(&judged(1.05, 1.08, OWN_MIN), 1, Outcome::Holds);
        testing::assert_outcome(&judged(1.02, 1.12, OWN_MIN), 1, Outcome::Tie);
        // A low end far below: its own interval stays inside the goal, but
        // read as a relative range either side of the median (fewer
        // repeats) it reaches past the goal.
        testing::assert_outcome(&judged(0.95, 1.08, OWN_MIN), 1, Outcome::Holds);
        testing::assert_outcome(&judged(0.95, 1.08, OWN_MIN - 1), 1, Outcome::Tie);
    }

    #[test]
    fn the_section_states_no_machine_fact() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, 1.2, 1.05));
    }
}
