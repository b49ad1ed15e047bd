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

use symmetry_locks::spin_then_block::profiler::Profile;
use symmetry_models::competitive::{self, Analysis, Strategy};

use crate::harness::prelude::*;
use crate::kernels::klmo91::{
    self, COMPETITIVE, ExecKind, FIXED, Point, SEED, Workload, c_label, family, record_profile,
    waits,
};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "cs-analytic",
    title: "Cost of each spin-then-block policy relative to the optimal off-line, on recorded and synthetic waits",
    source: "KLMO91 Tables 1-2",
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// KLMO91 §4, judged on every input with contended waits (recorded and
/// synthetic). The costs are computed from the recorded waits, so they
/// carry no repeat spread: a rule ties only on equal costs.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "block-worst",
        paper: "\"It is obvious that always-block and always-spin perform poorly in almost all cases\" (KLMO91 \
                §4); in Table 1 always-block costs 1.58x to 7.24x the off-line optimum, where off-line blocks in \
                3.2% to 47% of the waits.",
        rule: "on every input where off-line blocks in at most half of the waits, `always-block` costs more than \
               every competitive policy",
        needs: Needs::NONE,
        judge: block_worst,
    },
    Claim {
        key: "adaptive-beats-fixed",
        paper: "\"The fixed-spin approach is significantly better than always-block or always-spin, but generally \
                not as good as the adaptive strategies\" (KLMO91 §4).",
        rule: "on most inputs, the cheapest on-line adaptive policy (`opt-approx`, `last-3`, `random-walk`) costs \
               less than the cheapest fixed threshold (`fixed-spin-c2`, `fixed-spin-c`)",
        needs: Needs::NONE,
        judge: adaptive_beats_fixed,
    },
    Claim {
        key: "within-2x",
        paper: "\"All the competitive methods have competitive ratios less than 1.8 for all programs\" (KLMO91 §4); \
                fixed-spin(C) is 2-competitive (§2.4).",
        rule: "on every input, every competitive policy costs at most 2x the off-line optimum",
        needs: Needs::NONE,
        judge: within_2x,
    },
];

/// The file a recorded profile is written to.
fn profile_file(workload: &str, exec: &str) -> String {
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
    let (short, long) = ((1, (c64 / 8).max(2)), (2 * c64, 20 * c64));
    let lock =
        |name: &str, n, frac, seed| competitive::bimodal(name, n, short, long, frac, c, seed);
    let input = |name: &str, locks| Input {
        name: name.into(),
        exec: "synthetic",
        workload: "synthetic",
        threads: 0,
        oversubscribed: false,
        profile: Profile::new(ns_per_spin, locks),
    };
    let one = |name: &str, frac, seed| input(name, vec![lock(name, n, frac, seed)]);
    vec![
        one("bimodal-short", 0.05, SEED),
        one("bimodal-mixed", 0.30, SEED + 1),
        one("bimodal-long", 0.80, SEED + 2),
        input(
            "locks-differ",
            vec![
                lock("short-lock", n / 2, 0.02, SEED + 3),
                lock("long-lock", n / 2, 0.90, SEED + 4),
            ],
        ),
    ]
}

fn rows_of(input: &Input, a: &Analysis) -> Vec<Row> {
    let waits = waits(&input.profile);
    let base = |series: &str, metric: &str, v: f64, unit: &str| {
        let (t, over) = (input.threads, input.oversubscribed);
        Row::new(EXPERIMENT.id, series, t, over, metric, v, unit)
            .param("input", &input.name)
            .param("exec", input.exec)
            .param("workload", input.workload)
            .param("c_spins", c_label(&input.profile))
            .param("waits", waits)
            .param("locks", input.profile.locks.len())
            .param("ns_per_spin", format!("{:.3}", input.profile.ns_per_spin))
    };
    let mut rows = vec![base("profile", "contended_waits", waits as f64, "waits")];
    if waits == 0 {
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
    let cal = klmo91::ensure(ctx.quick);
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
    for i in rows.iter().filter_map(|r| r.get_param("input")) {
        if !out.iter().any(|x| x == i) {
            out.push(i.to_string());
        }
    }
    out
}

/// The inputs with contended waits: those whose policies were priced.
fn priced(rows: &[Row]) -> Vec<String> {
    let mut all = inputs(rows);
    all.retain(|i| get(rows, i, "always-block", "cost_vs_offline").is_some());
    all
}

fn get(rows: &[Row], input: &str, series: &str, metric: &str) -> Option<f64> {
    rows.iter()
        .find(|r| r.series == series && r.metric == metric && r.get_param("input") == Some(input))
        .map(|r| r.value)
}

/// Parameter `key` of input `i`'s first row, or `?`.
fn param_of<'a>(rows: &'a [Row], i: &str, key: &str) -> &'a str {
    rows.iter()
        .find(|r| r.get_param("input") == Some(i))
        .and_then(|r| r.get_param(key))
        .unwrap_or("?")
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let panels = priced(rows)
        .into_iter()
        .map(|i| {
            let bars = rows
                .iter()
                .filter(|r| r.metric == "cost_vs_offline" && r.get_param("input") == Some(&i))
                .map(|r| Bar::new(&r.series, r.value, family(&r.series)))
                .collect();
            Panel::Bar(BarPanel {
                title: format!("{i} (C = {} spins)", param_of(rows, &i, "c_spins")),
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
/// Online, 3-samples, R-walk, and Table 2: off-line % block, average spin
/// cost (us); then Table 2's opt % elapsed time.
#[rustfmt::skip]
const TABLE1: [(&str, [f64; 9], &str); 9] = [
    ("Nub (2h)",      [1.943, 2.962, 1.503, 1.559, 1.078, 1.225, 1.093, 28.7, 63.77], ""),
    ("Taos (24h)",    [1.715, 3.366, 1.492, 1.757, 1.141, 1.212, 1.213, 44.1, 50.66], ""),
    ("Taos (M2+)",    [1.776, 3.535, 1.483, 1.750, 1.106, 1.177, 1.160, 42.2, 48.75], ""),
    ("Taos (Regsim)", [1.578, 3.293, 1.499, 1.748, 1.161, 1.260, 1.268, 47.0, 60.66], ""),
    ("Ivy (100m)",    [5.171, 2.298, 1.341, 1.438, 1.133, 1.212, 1.167, 8.4, 23.7], ""),
    ("Ivy (18h)",     [7.243, 1.562, 1.274, 1.233, 1.109, 1.233, 1.141, 3.2, 21.87], ""),
    ("Galaxy",        [2.897, 2.667, 1.419, 1.740, 1.237, 1.390, 1.693, 25.5, 24.06], "4.1"),
    ("Hanoi",         [2.997, 2.976, 1.418, 1.726, 1.200, 1.366, 1.642, 16.5, 24.02], "8.5"),
    ("Regsim",        [4.675, 1.302, 1.423, 1.374, 1.183, 1.393, 1.366, 8.3, 27.88], "9.9"),
];

fn paper_table() -> String {
    let mut s = String::from(
        "| program | Block | Spin | Fixed C/2 | Fixed C | Opt Online | 3-samples | R-walk | off-line % block | \
         off-line avg spin (us) | opt % elapsed |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (p, v, el) in TABLE1 {
        let costs = fmt::join(v[..7].iter().map(|x| format!("{x:.3}")), " | ");
        s.push_str(&format!("| {p} | {costs} | {} | {} | {el} |\n", v[7], v[8]));
    }
    s
}

/// Cost over off-line of policy `n` on input `i`, as an estimate (exact:
/// the analysis has no repeats).
fn cost(d: &Data<'_>, i: &str, n: &str) -> Option<Estimate> {
    d.estimate(
        Sel::metric("cost_vs_offline")
            .series(n)
            .params(&[("input", i)]),
    )
}

/// The costs of `names` on input `i`.
fn costs<'a>(
    d: &'a Data<'_>,
    i: &'a str,
    names: &'a [&'static str],
) -> impl Iterator<Item = (&'static str, Estimate)> + 'a {
    names.iter().filter_map(move |n| Some((*n, cost(d, i, n)?)))
}

/// The cheapest of `names` on input `i`.
fn cheapest(d: &Data<'_>, i: &str, names: &[&'static str]) -> Option<(&'static str, Estimate)> {
    costs(d, i, names).min_by(|a, b| a.1.value.total_cmp(&b.1.value))
}

/// The dearest of `names` on input `i`.
fn dearest(d: &Data<'_>, i: &str, names: &[&'static str]) -> Option<(&'static str, Estimate)> {
    costs(d, i, names).max_by(|a, b| a.1.value.total_cmp(&b.1.value))
}

/// `block-worst`: on every input where off-line blocks in at most half of
/// the waits, `always-block` dearer than every competitive policy. Judged
/// on the inputs like KLMO91's programs (theirs: 3.2% to 47%); where most
/// waits are long, blocking at once is near-optimal by construction
/// (KLMO91 on Taos: "always-block can give acceptable efficiency").
fn block_worst(d: &Data<'_>, _m: &Machine) -> Finding {
    let rows = d.rows();
    let parts = priced(rows)
        .iter()
        .filter(|i| get(rows, i, "offline", "offline_block_pct").is_some_and(|p| p <= 50.0))
        .filter_map(|i| {
            let (b, (n, w)) = (cost(d, i, "always-block")?, dearest(d, i, &COMPETITIVE)?);
            let ev = format!("{i}: `always-block` {:.3} vs `{n}` {:.3}", b.value, w.value);
            Some((rule::greater(b, w), ev))
        })
        .collect();
    let what = "an input where off-line blocks in at most half of the waits";
    Finding::counted(parts, Outcome::every, "on", what)
}

/// `adaptive-beats-fixed`: on most inputs, the cheapest on-line adaptive
/// policy (the paper's Table 1 adaptive columns that learn on line;
/// `opt-known` is the best fixed threshold by construction) cheaper than
/// the cheapest fixed threshold.
fn adaptive_beats_fixed(d: &Data<'_>, _m: &Machine) -> Finding {
    let parts = priced(d.rows())
        .iter()
        .filter_map(|i| {
            let a = cheapest(d, i, &["opt-approx", "last-3", "random-walk"])?;
            let f = cheapest(d, i, &FIXED)?;
            let ev = format!(
                "{i}: `{}` {:.3} vs `{}` {:.3}",
                a.0, a.1.value, f.0, f.1.value
            );
            Some((rule::less(a.1, f.1), ev))
        })
        .collect();
    Finding::counted(
        parts,
        Outcome::majority,
        "on",
        "an input with contended waits",
    )
}

/// `within-2x`: on every input, every competitive policy at most 2x the
/// off-line optimum. fixed-spin(C) on waits all at or above C costs
/// exactly 2x; the tolerance keeps that bound from failing on rounding.
fn within_2x(d: &Data<'_>, _m: &Machine) -> Finding {
    let parts = priced(d.rows())
        .iter()
        .filter_map(|i| {
            let (n, w) = dearest(d, i, &COMPETITIVE)?;
            let ev = format!("{i}: worst `{n}` {:.2}x", w.value);
            Some((rule::at_most(w, 2.0 * (1.0 + 1e-9)), ev))
        })
        .collect();
    Finding::counted(parts, Outcome::every, "on", "an input with contended waits")
}

fn assess(rows: &[Row], m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let all = inputs(rows);
    let priced = priced(rows);
    let mut header = vec!["input".to_string(), "C (spins)".into(), "waits".into()];
    header.extend(Strategy::POLICIES.iter().map(|s| s.name().to_string()));
    header.extend(["off-line % block".to_string(), "off-line avg spin".into()]);
    let mut table = Table::new(&header);
    for i in &all {
        let mut cells = vec![
            i.clone(),
            param_of(rows, i, "c_spins").to_string(),
            param_of(rows, i, "waits").to_string(),
        ];
        let f3 = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
        cells.extend(Strategy::POLICIES.map(|s| f3(get(rows, i, s.name(), "cost_vs_offline"))));
        let off = |metric: &str| get(rows, i, "offline", metric);
        cells.push(off("offline_block_pct").map_or("-".into(), |v| format!("{v:.1}")));
        cells.push(
            match (off("offline_mean_spin_us"), off("offline_mean_spin_spins")) {
                (Some(us), Some(sp)) => format!("{us:.2} us ({sp:.0} spins)"),
                (Some(us), None) => format!("{us:.2} us"),
                _ => "-".into(),
            },
        );
        table.rows.push(cells);
    }
    let ratio = |i: &str, n: &str| get(rows, i, n, "cost_vs_offline");
    let opt_known_ok = priced
        .iter()
        .filter(|i| {
            ratio(i, "opt-known").is_some_and(|k| {
                FIXED
                    .iter()
                    .filter_map(|n| ratio(i, n))
                    .all(|f| k <= f * 1.001)
            })
        })
        .count();
    let mut measured = format!(
        "Each policy's synchronization cost over the optimal off-line's, on {} input{} with contended waits \
         (recorded profiles of the workloads and synthetic bimodal distributions). `opt-known` (the best \
         threshold for the known distribution) is at or below both fixed thresholds on {opt_known_ok} of them.\n",
        priced.len(),
        if priced.len() == 1 { "" } else { "s" }
    );
    let empty: Vec<&String> = all.iter().filter(|i| !priced.contains(i)).collect();
    if !empty.is_empty() {
        measured.push_str(&format!(
            "\nNo contended waits were recorded for: {} (nothing to price).\n",
            names(&empty)
        ));
    }
    // Where most waits are long, always-block is near-optimal.
    let long: Vec<String> = priced
        .iter()
        .filter_map(|i| {
            let p = get(rows, i, "offline", "offline_block_pct").filter(|p| *p > 50.0)?;
            let b = ratio(i, "always-block")?;
            Some(format!(
                "`{i}`: off-line blocks in {p:.0}% of the waits, always-block costs {b:.2}x"
            ))
        })
        .collect();
    if !long.is_empty() {
        measured.push_str(&format!(
            "\nWhere most waits are long ({}), blocking at once is near-optimal, as KLMO91 found for Taos \
             (\"always-block can give acceptable efficiency\"); `block-worst` leaves these inputs out.\n",
            long.join("; ")
        ));
    }
    // opt-approx's 64-spin rounding against a small C.
    let coarse: Vec<String> = priced
        .iter()
        .filter(|i| {
            param_of(rows, i, "c_spins")
                .parse::<u32>()
                .is_ok_and(|c| c < 64)
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
    // Ours beside the paper's on Regsim and Hanoi: `v(input)` in `digits`.
    let ours = |v: &dyn Fn(&str) -> Option<f64>, digits: usize| {
        ["regsim-os", "regsim-user", "hanoi-os", "hanoi-user"]
            .map(|i| v(i).map_or("-".to_string(), |v| format!("{v:.digits$}")))
    };
    let (regsim, hanoi) = (TABLE1[8].1, TABLE1[7].1);
    for (n, k) in paper_cols {
        let [ro, ru, ho, hu] = ours(&|i| ratio(i, n), 3);
        let (r, h) = (regsim[k], hanoi[k]);
        side.push_str(&format!(
            "| `{n}` | {r:.3} | {ro} | {ru} | {h:.3} | {ho} | {hu} |\n"
        ));
    }
    let [ro, ru, ho, hu] = ours(&|i| get(rows, i, "offline", "offline_block_pct"), 1);
    let (r, h) = (regsim[7], hanoi[7]);
    side.push_str(&format!(
        "| off-line % block | {r:.1} | {ro} | {ru} | {h:.1} | {ho} | {hu} |\n"
    ));
    measured.push_str(&side);
    let c_of = |e: &str| {
        d.param(Sel::default().params(&[("exec", e)]), "c_spins")
            .unwrap_or("?")
    };
    measured.push_str(&format!(
        "\nRecorded profiles are written next to the CSV as `cs-analytic-<workload>-<os|user>.profile.csv`; \
         `symmetry analyze FILE` prints these tables for any of them. C: {} spins on OS threads, {} on user \
         threads; the synthetic inputs use the OS C.\n\nKLMO91 Tables 1 and 2 (cost relative to the optimal \
         off-line; behaviour of the off-line):\n\n{}",
        c_of("os"),
        c_of("user"),
        paper_table()
    ));
    let threads_of = |w: &str| {
        let t = d.counts(Sel::default().params(&[("workload", w)]));
        if t.is_empty() {
            "no".to_string()
        } else {
            fmt::join(t.iter().map(u32::to_string), "/")
        }
    };
    let notes = format!(
        "Where it agrees: the competitive analysis is a property of the cost model, not of the machine, so \
         fixed-spin(C) stays within 2x of off-line and always-block pays C on every short wait. Where it differs, \
         the reasons are: (1) C differs: KLMO91 priced a 200 us context switch of 200 spins; here the OS C is a \
         futex hand-off and the user C is a user-level switch, both measured (`cs-calibrate`), and a small C \
         shrinks every ratio's spread; (2) our programs are stand-ins run for seconds on {} core{} (Regsim with \
         {} threads, Hanoi with {}), not 6 processors running for hours, so their distributions hold fewer, more \
         uniform locks (Regsim at threads = cores rarely waits long, Hanoi at 4x cores waits on preempted \
         holders); (3) the adaptive policies are replayed in a seeded random order of each lock's waits, so, as \
         KLMO91 note, they lose any locality the real sequence had; (4) synthetic bimodal inputs are chosen to \
         show the mechanisms, not to match a program. The costs are computed from one recording per input, so \
         they carry no repeat spread.",
        m.cores(),
        if m.cores() == 1 { "" } else { "s" },
        threads_of("regsim"),
        threads_of("hanoi"),
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
    use crate::harness::testing::{self, big_metal, small_vm};
    use crate::output::report::Verdict;

    /// Rows of one input: the eight policies' costs (Table 1 order),
    /// off-line blocking in `block_pct` of the waits.
    fn input(m: &Machine, name: &str, threads: u32, costs: [f64; 8], block_pct: f64) -> Vec<Row> {
        let (workload, exec) = name.split_once('-').unwrap_or(("synthetic", "synthetic"));
        let params = [
            ("input", name),
            ("exec", exec),
            ("workload", workload),
            ("c_spins", "342"),
            ("waits", "100"),
        ];
        let r = |series: &str, metric: &str, v: f64| {
            let mut r = testing::row(EXPERIMENT.id, series, threads, m, metric, v, 0.0, &params);
            r.params
                .retain(|(k, _)| k != "lo" && k != "hi" && k != "repeats");
            r
        };
        let mut out = vec![r("profile", "contended_waits", 100.0)];
        for (s, v) in Strategy::POLICIES.iter().zip(costs) {
            out.push(r(s.name(), "cost_vs_offline", v));
        }
        out.push(r("offline", "offline_block_pct", block_pct));
        out.push(r("offline", "offline_mean_spin_us", 0.5));
        out
    }

    /// Recorded inputs at threads = cores and 4x cores of `m`.
    fn rows(m: &Machine, costs: [f64; 8]) -> Vec<Row> {
        let p = m.cores() as u32;
        let mut out = input(m, "regsim-os", p, costs, 10.0);
        out.extend(input(m, "hanoi-os", 4 * p, costs, 20.0));
        out
    }

    /// Table 1 order: block, spin, fixed C/2, fixed C, opt-known,
    /// opt-approx, last-3, random-walk.
    const PAPER_LIKE: [f64; 8] = [3.0, 5.0, 1.5, 1.6, 1.1, 1.2, 1.3, 1.25];
    const CONTRARY: [f64; 8] = [1.1, 5.0, 1.2, 1.3, 1.15, 2.5, 2.6, 2.7];

    #[test]
    fn verdicts_reach_every_case() {
        for m in [small_vm(), big_metal()] {
            let v = |rows: &[Row]| testing::verdict(&EXPERIMENT, rows, &m);
            assert_eq!(v(&rows(&m, PAPER_LIKE)), Verdict::Holds);
            assert_eq!(v(&rows(&m, CONTRARY)), Verdict::Differs);
            // Equal costs decide nothing (ties do not move a verdict);
            // within 2x still holds.
            let tie = [1.5, 5.0, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5];
            assert_eq!(v(&rows(&m, tie)), Verdict::Holds);
            // Only contended_waits rows with no waits: nothing to price.
            let empty: Vec<Row> = rows(&m, PAPER_LIKE)
                .into_iter()
                .filter(|r| r.metric == "contended_waits")
                .collect();
            assert_eq!(v(&empty), Verdict::NotMeasurable);
        }
    }

    #[test]
    fn figure_and_paper_table() {
        let m = small_vm();
        let r = rows(&m, PAPER_LIKE);
        assert_eq!(draw(&r, &m).panels.len(), 2);
        assert!(assess(&r, &m).measured.contains("4.675"));
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, PAPER_LIKE));
    }
}
