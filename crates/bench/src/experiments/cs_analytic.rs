//! `cs-analytic` — KLMO91 Tables 1-2: the synchronization cost of every
//! spin-then-block policy on recorded lock-waiting-time distributions,
//! relative to the optimal off-line algorithm.
//!
//! Inputs:
//! - recorded profiles: the Regsim-like workload at threads = cores and the
//!   Hanoi-like workload at 4x cores, each on OS threads (futex blocker)
//!   and on user threads (`UserBlocker`), recorded as KLMO91 §3 did with
//!   the profiling policy `Fixed<1008>` (spin up to 1008, then block):
//!   `profiler::reset()`, run, `profiler::snapshot()`. Each profile is
//!   also written to the output directory as
//!   `cs-analytic-<workload>-<os|user>.profile.csv` (results are data:
//!   `symmetry analyze FILE` prices it again);
//! - synthetic bimodal distributions (`symmetry_models::competitive::bimodal`)
//!   with C = the measured OS-thread C: `bimodal-short` (5% long waits),
//!   `bimodal-mixed` (30% long waits, >> C), `bimodal-long` (80% long), and
//!   `locks-differ` (two locks, one almost always short, one almost always
//!   long: KLMO91's observation that locks differ).
//!
//! Each lock is priced with its own C (the C its blocker had when the
//! profile was taken), by `symmetry_models::competitive::analyze`.
//!
//! Metrics (parameter `input`, plus `exec`, `workload`, `c_spins`,
//! `waits`, `locks`): `cost_vs_offline` (series = policy), and KLMO91
//! Table 2's `offline_block_pct`, `offline_mean_spin_us` (series
//! `offline`), and `contended_waits` (series `profile`).

use symmetry_locks::spin_then_block::profiler::{LockRecord, Profile};
use symmetry_models::competitive::{self, Analysis, Strategy};

use super::cs_elapsed::{COMPETITIVE, ExecKind, FIXED, Point, Workload, family, record_profile};
use crate::harness::{Ctx, Experiment, figure};
use crate::output::data::Row;
use crate::output::machine::Machine;
use crate::output::plot::{Bar, BarPanel, Figure, Panel, Scale};
use crate::output::report::{Section, Table, Verdict};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "cs-analytic",
    title: "Cost of each spin-then-block policy relative to the optimal off-line, on recorded and synthetic waits",
    source: "KLMO91 Tables 1-2",
    uses_locks: false,
    claims: &[],
    run,
    figure: draw,
    assess,
};

/// Seed of the synthetic inputs and of the replay order.
const SEED: u64 = 0x4B4C_4D4F_3931;

/// The file a recorded profile is written to.
pub fn profile_file(workload: &str, exec: &str) -> String {
    format!("cs-analytic-{workload}-{exec}.profile.csv")
}

/// One input of the analysis.
struct Input {
    name: String,
    exec: &'static str,
    workload: &'static str,
    threads: u32,
    oversubscribed: bool,
    profile: Profile,
}

/// The synthetic inputs with C = `c` spins.
fn synthetic(c: u32, ns_per_spin: f64, n: u64) -> Vec<Input> {
    let c64 = u64::from(c.max(8));
    let short = (1, (c64 / 8).max(2));
    let long = (2 * c64, 20 * c64);
    let one = |name: &str, frac: f64, seed: u64| Input {
        name: name.into(),
        exec: "synthetic",
        workload: "synthetic",
        threads: 0,
        oversubscribed: false,
        profile: Profile {
            ns_per_spin,
            locks: vec![competitive::bimodal(name, n, short, long, frac, c, seed)],
        },
    };
    vec![
        one("bimodal-short", 0.05, SEED),
        one("bimodal-mixed", 0.30, SEED + 1),
        one("bimodal-long", 0.80, SEED + 2),
        Input {
            name: "locks-differ".into(),
            exec: "synthetic",
            workload: "synthetic",
            threads: 0,
            oversubscribed: false,
            profile: Profile {
                ns_per_spin,
                locks: vec![
                    competitive::bimodal("short-lock", n / 2, short, long, 0.02, c, SEED + 3),
                    competitive::bimodal("long-lock", n / 2, short, long, 0.90, c, SEED + 4),
                ],
            },
        },
    ]
}

fn waits(p: &Profile) -> u64 {
    p.locks.iter().map(LockRecord::contended).sum()
}

/// The C of a profile for the rows: the one value if all locks agree,
/// else their range.
fn c_label(p: &Profile) -> String {
    let lo = p.locks.iter().map(|l| l.c_spins).min();
    let hi = p.locks.iter().map(|l| l.c_spins).max();
    match (lo, hi) {
        (Some(a), Some(b)) if a == b => a.to_string(),
        (Some(a), Some(b)) => format!("{a}-{b}"),
        _ => String::new(),
    }
}

fn rows_of(input: &Input, a: &Analysis) -> Vec<Row> {
    let base = |series: &str, metric: &str, v: f64, unit: &str| {
        Row::new(
            EXPERIMENT.id,
            series,
            input.threads,
            input.oversubscribed,
            metric,
            v,
            unit,
        )
        .param("input", &input.name)
        .param("exec", input.exec)
        .param("workload", input.workload)
        .param("c_spins", c_label(&input.profile))
        .param("waits", waits(&input.profile))
        .param("locks", input.profile.locks.len())
        .param("ns_per_spin", format!("{:.3}", input.profile.ns_per_spin))
    };
    let mut rows = vec![base(
        "profile",
        "contended_waits",
        waits(&input.profile) as f64,
        "waits",
    )];
    if waits(&input.profile) == 0 {
        return rows;
    }
    for s in Strategy::POLICIES {
        rows.push(base(
            s.name(),
            "cost_vs_offline",
            a.cost_vs_offline(s),
            "ratio",
        ));
    }
    rows.push(base(
        "offline",
        "offline_block_pct",
        a.offline_block_pct(),
        "%",
    ));
    let spins = a.offline_mean_spin_spins();
    rows.push(base(
        "offline",
        "offline_mean_spin_us",
        a.offline_mean_spin_us(),
        "us",
    ));
    rows.push(base("offline", "offline_mean_spin_spins", spins, "spins"));
    rows
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let cal = super::cs_calibrate::ensure(ctx.quick);
    let recorded: Vec<(Workload, ExecKind, usize)> = ExecKind::ALL
        .iter()
        .flat_map(|&e| {
            [
                (Workload::Regsim, e, ctx.cores),
                (Workload::Hanoi, e, 4 * ctx.cores),
            ]
        })
        .collect();
    let bar = ctx.bar(EXPERIMENT.id, recorded.len() + 1);
    let mut inputs = Vec::new();
    for (w, e, t) in recorded {
        bar.set_message(format!("{} {} x{t}: profile", w.name(), e.name()));
        let (_, profile) = record_profile(&Point {
            workload: w,
            exec: e,
            threads: t,
            processors: ctx.cores,
            quick: ctx.quick,
            work_fraction: 1.0,
        })?;
        if let Some(dir) = &ctx.out {
            std::fs::create_dir_all(dir)
                .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
            let path = dir.join(profile_file(w.name(), e.name()));
            std::fs::write(&path, profile.to_csv())
                .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
        }
        inputs.push(Input {
            name: format!("{}-{}", w.name(), e.name()),
            exec: e.name(),
            workload: w.name(),
            threads: t as u32,
            oversubscribed: ctx.over(t),
            profile,
        });
        bar.inc(1);
    }
    bar.set_message("synthetic");
    let n = if ctx.quick { 20_000 } else { 200_000 };
    inputs.extend(synthetic(cal.c_spins_os, cal.ns_per_spin, n));
    let mut rows = Vec::new();
    for input in &inputs {
        let a = competitive::analyze(&input.profile, None, SEED);
        rows.extend(rows_of(input, &a));
    }
    bar.inc(1);
    bar.finish_and_clear();
    Ok(rows)
}

/// Inputs of `rows` in first-seen order.
fn inputs(rows: &[Row]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if let Some(i) = r.get_param("input")
            && !out.iter().any(|x| x == i)
        {
            out.push(i.to_string());
        }
    }
    out
}

fn get(rows: &[Row], input: &str, series: &str, metric: &str) -> Option<f64> {
    rows.iter()
        .find(|r| r.series == series && r.metric == metric && r.get_param("input") == Some(input))
        .map(|r| r.value)
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let panels = inputs(rows)
        .into_iter()
        .filter(|i| get(rows, i, "always-block", "cost_vs_offline").is_some())
        .map(|i| {
            let bars = rows
                .iter()
                .filter(|r| r.metric == "cost_vs_offline" && r.get_param("input") == Some(&i))
                .map(|r| Bar {
                    label: r.series.clone(),
                    value: r.value,
                    group: family(&r.series).into(),
                })
                .collect();
            let c = rows
                .iter()
                .find(|r| r.get_param("input") == Some(&i))
                .and_then(|r| r.get_param("c_spins"))
                .unwrap_or("?")
                .to_string();
            Panel::Bar(BarPanel {
                title: format!("{i} (C = {c} spins)"),
                y_label: "cost / optimal off-line (log)".into(),
                y_scale: Scale::Log,
                bars,
                reference_lines: vec![
                    ("off-line".into(), 1.0),
                    ("2x (fixed-spin-c bound)".into(), 2.0),
                ],
            })
        })
        .collect();
    figure(
        "cs-analytic (KLMO91 Table 1): synchronization cost relative to the optimal off-line",
        m,
        panels,
    )
}

/// KLMO91 Table 1: program, then Block, Spin, Fixed C/2, Fixed C, Opt
/// Online, 3-samples, R-walk; and Table 2: off-line % block, average spin
/// cost (us), opt % elapsed time.
const TABLE1: [(&str, [f64; 7], f64, f64, &str); 9] = [
    (
        "Nub (2h)",
        [1.943, 2.962, 1.503, 1.559, 1.078, 1.225, 1.093],
        28.7,
        63.77,
        "",
    ),
    (
        "Taos (24h)",
        [1.715, 3.366, 1.492, 1.757, 1.141, 1.212, 1.213],
        44.1,
        50.66,
        "",
    ),
    (
        "Taos (M2+)",
        [1.776, 3.535, 1.483, 1.750, 1.106, 1.177, 1.160],
        42.2,
        48.75,
        "",
    ),
    (
        "Taos (Regsim)",
        [1.578, 3.293, 1.499, 1.748, 1.161, 1.260, 1.268],
        47.0,
        60.66,
        "",
    ),
    (
        "Ivy (100m)",
        [5.171, 2.298, 1.341, 1.438, 1.133, 1.212, 1.167],
        8.4,
        23.7,
        "",
    ),
    (
        "Ivy (18h)",
        [7.243, 1.562, 1.274, 1.233, 1.109, 1.233, 1.141],
        3.2,
        21.87,
        "",
    ),
    (
        "Galaxy",
        [2.897, 2.667, 1.419, 1.740, 1.237, 1.390, 1.693],
        25.5,
        24.06,
        "4.1",
    ),
    (
        "Hanoi",
        [2.997, 2.976, 1.418, 1.726, 1.200, 1.366, 1.642],
        16.5,
        24.02,
        "8.5",
    ),
    (
        "Regsim",
        [4.675, 1.302, 1.423, 1.374, 1.183, 1.393, 1.366],
        8.3,
        27.88,
        "9.9",
    ),
];

fn paper_table() -> String {
    let mut s = String::from(
        "| program | Block | Spin | Fixed C/2 | Fixed C | Opt Online | 3-samples | R-walk | off-line % block | \
         off-line avg spin (us) | opt % elapsed |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (p, v, b, sp, el) in TABLE1 {
        s.push_str(&format!(
            "| {p} | {} | {b} | {sp} | {el} |\n",
            v.iter()
                .map(|x| format!("{x:.3}"))
                .collect::<Vec<_>>()
                .join(" | ")
        ));
    }
    s
}

fn assess(rows: &[Row], m: &Machine) -> crate::harness::Assessment {
    crate::harness::legacy(assess_old(rows, m))
}

fn assess_old(rows: &[Row], _m: &Machine) -> Section {
    let all = inputs(rows);
    let priced: Vec<&String> = all
        .iter()
        .filter(|i| get(rows, i, "always-block", "cost_vs_offline").is_some())
        .collect();
    let mut header = vec!["input".to_string(), "C (spins)".into(), "waits".into()];
    header.extend(Strategy::POLICIES.iter().map(|s| s.name().to_string()));
    header.extend(["off-line % block".to_string(), "off-line avg spin".into()]);
    let mut table = Table::new(&header);
    for i in &all {
        let first = rows
            .iter()
            .find(|r| r.get_param("input") == Some(i.as_str()));
        let mut cells = vec![
            i.clone(),
            first
                .and_then(|r| r.get_param("c_spins"))
                .unwrap_or("?")
                .to_string(),
            first
                .and_then(|r| r.get_param("waits"))
                .unwrap_or("?")
                .to_string(),
        ];
        for s in Strategy::POLICIES {
            cells.push(
                get(rows, i, s.name(), "cost_vs_offline").map_or("-".into(), |v| format!("{v:.3}")),
            );
        }
        cells.push(
            get(rows, i, "offline", "offline_block_pct").map_or("-".into(), |v| format!("{v:.1}")),
        );
        cells.push(
            match (
                get(rows, i, "offline", "offline_mean_spin_us"),
                get(rows, i, "offline", "offline_mean_spin_spins"),
            ) {
                (Some(us), Some(sp)) => format!("{us:.2} us ({sp:.0} spins)"),
                (Some(us), None) => format!("{us:.2} us"),
                _ => "-".into(),
            },
        );
        table.rows.push(cells);
    }
    let ratio = |i: &str, n: &str| get(rows, i, n, "cost_vs_offline");
    // Claim 1: always-block is worse than every competitive policy on the
    // inputs like KLMO91's programs, where off-line blocks in at most half
    // of the waits (theirs: 3.2% to 47%). Where most waits are long,
    // blocking at once is near-optimal by construction (KLMO91 on Taos:
    // "always-block can give acceptable efficiency").
    let mixed: Vec<&&String> = priced
        .iter()
        .filter(|i| get(rows, i, "offline", "offline_block_pct").is_some_and(|p| p <= 50.0))
        .collect();
    let block_worst: Vec<(String, bool)> = mixed
        .iter()
        .map(|i| {
            let b = ratio(i, "always-block").unwrap_or(f64::NAN);
            let worst_comp = COMPETITIVE
                .iter()
                .filter_map(|n| ratio(i, n))
                .fold(0.0, f64::max);
            ((**i).clone(), b > worst_comp)
        })
        .collect();
    // Claim 2: adaptive beats fixed (the paper's Table 1 adaptive columns,
    // which learn on line: opt-approx, last-3, random-walk; opt-known is
    // the best fixed threshold by construction).
    let online = ["opt-approx", "last-3", "random-walk"];
    let best = |i: &str, names: &[&'static str]| {
        names
            .iter()
            .filter_map(|n| ratio(i, n).map(|v| (*n, v)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    };
    let adaptive_wins: Vec<(String, String, bool)> = priced
        .iter()
        .filter_map(|i| {
            let a = best(i, &online)?;
            let f = best(i, &FIXED)?;
            Some((
                (*i).clone(),
                format!("`{}` {:.3} vs `{}` {:.3}", a.0, a.1, f.0, f.1),
                a.1 < f.1,
            ))
        })
        .collect();
    let opt_known_ok = priced
        .iter()
        .filter(|i| {
            let k = ratio(i, "opt-known").unwrap_or(f64::NAN);
            FIXED
                .iter()
                .filter_map(|n| ratio(i, n))
                .all(|f| k <= f * 1.001)
        })
        .count();
    // Claim 3: every competitive policy within 2x of off-line.
    let worst: Vec<(String, &str, f64)> = priced
        .iter()
        .filter_map(|i| {
            COMPETITIVE
                .iter()
                .filter_map(|n| ratio(i, n).map(|v| (*n, v)))
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(n, v)| ((*i).clone(), n, v))
        })
        .collect();
    let under2 = worst.iter().filter(|w| w.2 < 2.0).count();

    let n1 = block_worst.iter().filter(|x| x.1).count();
    let n2 = adaptive_wins.iter().filter(|x| x.2).count();
    let claims: [(String, Option<bool>); 3] = [
        (
            format!(
                "always-block is worse than every competitive policy on the inputs where off-line blocks in at most \
                 half of the waits, as in all of KLMO91's programs (3.2-47%): {n1} of {} ({})",
                block_worst.len(),
                block_worst
                    .iter()
                    .map(|(i, ok)| format!("{i}: {}", if *ok { "yes" } else { "no" }))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            (!block_worst.is_empty()).then_some(n1 == block_worst.len()),
        ),
        (
            format!(
                "adaptive beats fixed: the best on-line adaptive policy costs less than the best fixed threshold on \
                 {n2} of {} inputs ({}); `opt-known` is at or below both fixed policies on {opt_known_ok} of {}",
                adaptive_wins.len(),
                adaptive_wins
                    .iter()
                    .map(|(i, t, _)| format!("{i}: {t}"))
                    .collect::<Vec<_>>()
                    .join("; "),
                priced.len()
            ),
            (!adaptive_wins.is_empty()).then_some(n2 * 2 > adaptive_wins.len()),
        ),
        (
            format!(
                "every competitive policy is within 2x of the off-line optimum on {under2} of {} inputs (worst: {})",
                worst.len(),
                worst
                    .iter()
                    .map(|(i, n, v)| format!("{i} `{n}` {v:.2}x"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            (!worst.is_empty()).then_some(under2 == worst.len()),
        ),
    ];
    let verdict = Verdict::of_claims(claims.iter().map(|c| c.1));
    let mut measured = crate::output::report::claims_list(&claims);
    let empty: Vec<&String> = all.iter().filter(|i| !priced.contains(i)).collect();
    if !empty.is_empty() {
        measured.push_str(&format!(
            "\nNo contended waits were recorded for: {} (nothing to price).\n",
            empty
                .iter()
                .map(|i| format!("`{i}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // Where most waits are long, always-block is near-optimal.
    for i in &priced {
        if let (Some(p), Some(b)) = (
            get(rows, i, "offline", "offline_block_pct"),
            ratio(i, "always-block"),
        ) && p > 50.0
        {
            measured.push_str(&format!(
                "\nOn `{i}` off-line blocks in {p:.0}% of the waits, and always-block costs {b:.2}x off-line: with \
                 mostly long waits, blocking at once is near-optimal, as KLMO91 found for Taos (\"always-block can \
                 give acceptable efficiency\").\n"
            ));
        }
    }
    // opt-approx's 64-spin rounding against a small C.
    let coarse: Vec<String> = priced
        .iter()
        .filter(|i| {
            let c = rows
                .iter()
                .find(|r| r.get_param("input") == Some(i.as_str()))
                .and_then(|r| r.get_param("c_spins"))
                .and_then(|c| c.parse::<u32>().ok());
            c.is_some_and(|c| c < 64)
                && ratio(i, "opt-approx")
                    .zip(ratio(i, "always-block"))
                    .is_some_and(|(a, b)| (a / b - 1.0).abs() < 0.02)
        })
        .map(|i| format!("`{i}`"))
        .collect();
    if !coarse.is_empty() {
        measured.push_str(&format!(
            "\nOn {} (C below 64 spins) `opt-approx` costs what always-block costs: it rounds every wait up to a \
             multiple of 64 spins (KLMO91 §5, sized for C = 200), so each recorded wait looks at least 64 spins \
             long, more than C, and its optimal threshold is always 0. The rounding unit has to shrink with C.\n",
            coarse.join(", ")
        ));
    }
    // KLMO91's Regsim and Hanoi rows beside ours.
    let paper_cols: [(&str, usize); 7] = [
        ("always-block", 0),
        ("always-spin", 1),
        ("fixed-spin-c2", 2),
        ("fixed-spin-c", 3),
        ("opt-known", 4),
        ("last-3", 5),
        ("random-walk", 6),
    ];
    let mut side = String::from(
        "\nKLMO91's Regsim and Hanoi rows of Table 1 beside ours (cost / off-line):\n\n| policy | KLMO91 Regsim | \
         regsim-os | regsim-user | KLMO91 Hanoi | hanoi-os | hanoi-user |\n|---|---|---|---|---|---|---|\n",
    );
    let cell = |i: &str, n: &str| ratio(i, n).map_or("-".to_string(), |v| format!("{v:.3}"));
    for (n, k) in paper_cols {
        side.push_str(&format!(
            "| `{n}` | {:.3} | {} | {} | {:.3} | {} | {} |\n",
            TABLE1[8].1[k],
            cell("regsim-os", n),
            cell("regsim-user", n),
            TABLE1[7].1[k],
            cell("hanoi-os", n),
            cell("hanoi-user", n)
        ));
    }
    side.push_str(&format!(
        "| off-line % block | {:.1} | {} | {} | {:.1} | {} | {} |\n",
        TABLE1[8].2,
        get(rows, "regsim-os", "offline", "offline_block_pct")
            .map_or("-".into(), |v| format!("{v:.1}")),
        get(rows, "regsim-user", "offline", "offline_block_pct")
            .map_or("-".into(), |v| format!("{v:.1}")),
        TABLE1[7].2,
        get(rows, "hanoi-os", "offline", "offline_block_pct")
            .map_or("-".into(), |v| format!("{v:.1}")),
        get(rows, "hanoi-user", "offline", "offline_block_pct")
            .map_or("-".into(), |v| format!("{v:.1}")),
    ));
    measured.push_str(&side);
    let c_of = |e: &str| {
        rows.iter()
            .find(|r| r.get_param("exec") == Some(e))
            .and_then(|r| r.get_param("c_spins"))
            .unwrap_or("?")
            .to_string()
    };
    measured.push_str(&format!(
        "\nRecorded profiles are written next to the CSV as `cs-analytic-<workload>-<os|user>.profile.csv`; \
         `symmetry analyze FILE` prints these tables for any of them. C: {} spins on OS threads, {} on user \
         threads; the synthetic inputs use the OS C.",
        c_of("os"),
        c_of("user")
    ));
    let why = "Where it agrees: the competitive analysis is a property of the cost model, not of the machine, so \
               fixed-spin(C) stays within 2x of off-line and always-block pays C on every short wait. Where it \
               differs, the reasons are: (1) C differs: KLMO91 priced a 200 us context switch of 200 spins; here the \
               OS C is a futex hand-off and the user C is a user-level switch, both measured (`cs-calibrate`), and \
               a small C shrinks every ratio's spread; (2) our programs are stand-ins run for seconds on 2 cores \
               with 2 or 8 threads, not 6 processors running for hours, so their distributions hold fewer, more \
               uniform locks (Regsim at threads = cores rarely waits long, Hanoi at 4x cores waits on preempted \
               holders); (3) the adaptive policies are replayed in a seeded random order of each lock's waits, so, \
               as KLMO91 note, they lose any locality the real sequence had; (4) synthetic bimodal inputs are \
               chosen to show the mechanisms, not to match a program."
        .to_string();
    Section {
        id: EXPERIMENT.id.into(),
        title: EXPERIMENT.title.into(),
        source: EXPERIMENT.source.into(),
        claim: format!(
            "\"always-block and always-spin perform poorly in almost all cases. The fixed-spin approach is \
             significantly better than always-block or always-spin, but generally not as good as the adaptive \
             strategies ... all the competitive methods have competitive ratios less than 1.8 for all programs\" \
             (KLMO91 §4). KLMO91 Tables 1 and 2 (cost relative to the optimal off-line; behaviour of the off-line):\n\n{}",
            paper_table()
        ),
        measured,
        verdict,
        why,
        table: Some(table),
        svg: Some(format!("{}.svg", EXPERIMENT.id)),
        provenance: None,
    }
}

/// `symmetry analyze`: KLMO91 Tables 1 and 2 for a recorded profile
/// (labelled `label`), and its `top` locks by off-line synchronization cost
/// with the spin threshold each should use. `c` overrides every lock's
/// recorded C.
pub fn analyze_text(profile: &Profile, label: &str, c: Option<u32>, top: usize) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let total = waits(profile);
    let _ = writeln!(
        s,
        "{label}: {} lock(s), {total} contended wait(s), one spin = {:.3} ns; C = {}",
        profile.locks.len(),
        profile.ns_per_spin,
        match c {
            Some(c) => format!("{c} spins for every lock (--c)"),
            None => format!("each lock's recorded C ({} spins)", c_label(profile)),
        }
    );
    if total == 0 {
        let _ = writeln!(s, "\nNo contended waits recorded: nothing to price.");
        return s;
    }
    let a = competitive::analyze(profile, c, SEED);
    let _ = writeln!(
        s,
        "\nTable 1 (KLMO91): synchronization cost relative to the optimal off-line\n"
    );
    s.push_str(&competitive::table1_text(&[(label, &a)]));
    let _ = writeln!(s, "\nTable 2 (KLMO91): behaviour of the optimal off-line\n");
    s.push_str(&competitive::table2_text(&[(label, &a)]));
    let _ = writeln!(s, "\nLocks (which should spin, and for how long):\n");
    s.push_str(&competitive::locks_text(&a, top));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(input: &str, series: &str, metric: &str, v: f64) -> Row {
        Row::new(EXPERIMENT.id, series, 0, false, metric, v, "ratio")
            .param("input", input)
            .param("exec", "synthetic")
            .param("c_spins", 400)
            .param("waits", 100)
    }

    #[test]
    fn assess_reads_the_three_claims() {
        let ratios = [3.0, 5.0, 1.5, 1.6, 1.1, 1.2, 1.3, 1.25];
        let mut rows = Vec::new();
        for (s, v) in Strategy::POLICIES.iter().zip(ratios) {
            rows.push(r("mixed", s.name(), "cost_vs_offline", v));
        }
        rows.push(r("mixed", "offline", "offline_block_pct", 30.0));
        rows.push(r("mixed", "offline", "offline_mean_spin_us", 0.5));
        let m = Machine::detect(true);
        let s = assess_old(&rows, &m);
        assert_eq!(s.verdict, Verdict::Holds, "{}", s.measured);
        assert_eq!(draw(&rows, &m).panels.len(), 1);
        assert!(s.claim.contains("4.675"));
    }
}
