//! `cs-elapsed` — KLMO91 Tables 3-4: elapsed time of a Regsim-like and a
//! Hanoi-like workload (`symmetry-workloads`) under each of the eight
//! spin-then-block policies, on OS threads (futex blocker) and on user
//! threads (`UserBlocker`), at threads = cores and at 4x cores.
//!
//! For every (executor, workload, threads) point the experiment first
//! records a lock-waiting-time profile of that very configuration with
//! KLMO91's profiling policy (`Fixed<1008>`: spin 1008, then block) and
//! installs each lock's optimal threshold for `opt-known`
//! (`opt_known::install_from_profile`), as KLMO91 §5 did ("the exact
//! optimal on-line method uses the lock-waiting distributions collected
//! for the analytic computation"). Then every policy runs
//! [`Ctx::repeats`] times (interleaved across policies, so drift hits all
//! of them alike) and the median is kept with the spread of the repeats.
//!
//! Metrics (parameters `workload`, `exec`, `processors`, `repeats`, `lo`,
//! `hi`, and the workload's size):
//! - `elapsed_ms`: median wall time of a run;
//! - `vs_block`: the policy's elapsed time over `always-block`'s, the
//!   median of the per-round quotients (both ran in the same rounds); the
//!   rules judge this;
//! - `vs_block_unpaired`: the same for `always-spin` where it ran after
//!   the others (oversubscribed OS threads): the quotient of the two
//!   medians and spreads;
//! - `improvement_pct`: KLMO91's "Improvement" column,
//!   `(always-block - policy) / always-block * 100`, from `vs_block`.
//!
//! `always-spin` with more OS threads than cores can take a long time
//! (a preempted holder leaves its spinners burning whole time slices): at
//! oversubscribed OS points it first runs a pilot on 1/8 of the work; if
//! the full run would exceed the cap, the row keeps the pilot, scaled
//! linearly to the full work, and says so (`work_fraction`, `capped=true`).
//!
//! The workload runners live in [`crate::kernels::klmo91`].

use crate::harness::prelude::*;
use crate::kernels::klmo91::{
    self, ADAPTIVE, COMPETITIVE, ExecKind, FIXED, POLICIES, Point, Runner, Timed, Workload, family,
    hanoi_cfg, install_opt_known, median_runs, policy, regsim_cfg,
};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "cs-elapsed",
    title: "Elapsed time of Regsim-like and Hanoi-like workloads per spin-then-block policy, OS and user threads",
    source: "KLMO91 Tables 3-4",
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// KLMO91 §5 and §8 (judged on OS threads, as KLMO91 measured kernel
/// threads) and §7 (user threads), at the configurations with at least as
/// many threads as cores.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "block-beaten",
        paper: "\"Always-block performed poorly in both the analysis and elapsed-time measurements\" (KLMO91 §8); \
                in Tables 3 and 4 all six competitive policies beat it, by 11.9% to 37.0%.",
        rule: "on OS threads, in most configurations (workload x threads, threads >= cores), most of the six \
               competitive policies take less time than `always-block`",
        needs: Needs::cores(2),
        judge: block_beaten,
    },
    Claim {
        key: "adaptive-beats-fixed",
        paper: "\"The simple fixed spin algorithm produces somewhat better performance than blocking, but somewhat \
                worse performance than adaptive algorithms\" (KLMO91 §8).",
        rule: "on OS threads, in most configurations (threads >= cores), the fastest adaptive policy takes less \
               time than the fastest fixed-threshold policy",
        needs: Needs::cores(2),
        judge: adaptive_beats_fixed,
    },
    Claim {
        key: "spin-good-regsim",
        paper: "\"For Regsim, always-spin performs quite well ... because the number of computational threads in \
                the program is the same as the number of processors\" (KLMO91 §5; Table 3: +21.5% over \
                always-block).",
        rule: "Regsim on OS threads at threads = all cores: `always-spin` takes less time than `always-block`",
        needs: Needs::cores(2),
        judge: spin_good_regsim,
    },
    Claim {
        key: "spin-bad-hanoi",
        paper: "For Hanoi (many threads) \"always-spin performs badly. In fact, it is worse than always-block\" \
                (KLMO91 §5; Table 4: -24.4%).",
        rule: "Hanoi on OS threads at the most oversubscribed point (threads > cores): `always-spin` takes more \
               time than `always-block`",
        needs: Needs::NONE,
        judge: spin_bad_hanoi,
    },
    Claim {
        key: "user-gain-smaller",
        paper: "\"Reduced context-switch time might be expected to decrease the value of competitive algorithms, \
                since the penalty for blocking inappropriately is reduced\" (KLMO91 §7, on user-level threads).",
        rule: "in most (workload, threads) pairs with threads >= cores, the fastest competitive policy's time \
               relative to `always-block` is larger on user threads than on OS threads (a smaller gain)",
        needs: Needs::cores(2),
        judge: user_gain_smaller,
    },
];

// ---------------------------------------------------------------------------
// The run.

/// The workload size parameters of a row.
fn size_params(row: Row, pt: &Point) -> Row {
    match pt.workload {
        Workload::Regsim => {
            let c = regsim_cfg(pt.threads, pt.quick, 1.0);
            row.param("objects", c.objects)
                .param("cycles", c.cycles)
                .param("eval_work", c.eval_work)
        }
        Workload::Hanoi => {
            let c = hanoi_cfg(pt.threads, pt.quick, 1.0);
            row.param("disks", c.disks).param("moves", c.moves)
        }
    }
}

/// Metric: a policy's elapsed time over `always-block`'s, paired by round
/// (module docs).
const VS_BLOCK: &str = "vs_block";

/// Metric: the same quotient for a run outside `always-block`'s rounds
/// (the quotient of the two medians, with the quotient of their ranges):
/// its own metric, so its wider noise is not pooled with the paired one.
const VS_BLOCK_UNPAIRED: &str = "vs_block_unpaired";

/// The cap on one capped `always-spin` run: this many times the slowest
/// other policy at the same point, at least `MIN_CAP_MS`.
const CAP_FACTOR: f64 = 4.0;
const MIN_CAP_MS: f64 = 1_500.0;
/// The pilot's share of the work.
const PILOT_FRACTION: f64 = 0.125;

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let cal = klmo91::ensure(ctx.quick);
    let threads: Vec<usize> = match &ctx.threads {
        Some(t) => t.clone(),
        None => vec![ctx.cores, 4 * ctx.cores],
    };
    let mut points = Vec::new();
    for exec in ExecKind::ALL {
        for w in Workload::ALL {
            for &t in &threads {
                points.push(Point {
                    workload: w,
                    exec,
                    threads: t,
                    processors: ctx.cores,
                    quick: ctx.quick,
                    work_fraction: 1.0,
                });
            }
        }
    }
    let runs: usize = points
        .iter()
        .map(|p| 1 + POLICIES.len() * ctx.repeats(p.threads))
        .sum();
    let bar = ctx.bar(EXPERIMENT.id, runs);
    let mut rows = Vec::new();
    for pt in &points {
        let label = format!("{} {} x{}", pt.workload.name(), pt.exec.name(), pt.threads);
        bar.set_message(format!("{label}: profile"));
        let locks = install_opt_known(pt)?;
        bar.inc(1);
        let capped_spin = pt.exec == ExecKind::Os && ctx.over(pt.threads);
        let runners: Vec<(&'static str, Runner)> = POLICIES
            .iter()
            .filter(|p| !(capped_spin && p.name == "always-spin"))
            .map(|p| (p.name, p.runner(pt.exec)))
            .collect();
        let repeats = ctx.repeats(pt.threads);
        // Each policy's times over the repeats, and the fraction of the
        // work it ran (below 1: a capped pilot, scaled to the full work).
        let mut results: Vec<(Timed, f64)> = median_runs(pt, &runners, repeats, |n| {
            bar.set_message(format!("{label}: {n}"));
            bar.inc(1);
        })?
        .into_iter()
        .map(|t| (t, 1.0))
        .collect();
        if capped_spin {
            bar.set_message(format!("{label}: always-spin (pilot)"));
            let slowest = results.iter().map(|r| r.0.ms.median).fold(0.0, f64::max);
            results.extend(always_spin(pt, slowest, repeats)?);
            bar.inc(repeats as u64);
        }
        // Table order.
        results.sort_by_key(|(r, _)| POLICIES.iter().position(|p| p.name == r.name));
        let block = results
            .iter()
            .find(|(r, _)| r.name == "always-block")
            .map(|(r, _)| (r.ms, r.samples.clone()));
        let c_spins = match pt.exec {
            ExecKind::Os => cal.c_spins_os,
            ExecKind::User => cal.c_spins_user,
        };
        for (r, fraction) in results {
            let (t, over, ms) = (pt.threads as u32, ctx.over(pt.threads), r.ms.median);
            let base = Row::new(EXPERIMENT.id, r.name, t, over, "elapsed_ms", ms, "ms");
            let base = size_params(base, pt)
                .param("workload", pt.workload.name())
                .param("exec", pt.exec.name())
                .param("processors", ctx.cores)
                .param("repeats", r.ms.n)
                .param("work_done", r.work)
                .param("work_fraction", fraction)
                .param("capped", fraction < 1.0)
                .param("c_spins", c_spins)
                .param("opt_known_locks", locks);
            let derived = |metric: &str, unit: &str, s: &Spread| {
                let mut r = base.clone();
                (r.metric, r.value, r.unit) = (metric.into(), s.median, unit.into());
                r.with_spread(s)
            };
            if let Some((b, b_rounds)) = &block {
                // The policy's time over `always-block`'s: the per-round
                // quotients where both ran in the same rounds (a drift of
                // the machine between rounds cancels), else the quotient
                // of the two spreads.
                let paired = Spread::paired_ratio(&r.samples, b_rounds);
                let q = paired.unwrap_or_else(|| r.ms.ratio(*b));
                // `always-block` over itself is 1 in every round, which
                // would narrow the pooled noise of the others: no row.
                if r.name != "always-block" {
                    let metric = if paired.is_some() {
                        VS_BLOCK
                    } else {
                        VS_BLOCK_UNPAIRED
                    };
                    rows.push(derived(metric, "x", &q));
                }
                // (block - policy) / block * 100 = 100 * (1 - policy / block).
                rows.push(derived(
                    "improvement_pct",
                    "%",
                    &q.map(|q| (1.0 - q) * 100.0),
                ));
            }
            rows.push(base.with_spread(&r.ms));
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// `always-spin` at an oversubscribed point on OS threads, after the other
/// policies (so not in their rounds: its `samples` are left empty), with
/// the fraction of the work it ran: a pilot on [`PILOT_FRACTION`] of the
/// work first; the full runs if the pilot, scaled to the full work, stays
/// within the cap ([`CAP_FACTOR`] times `slowest`, the slowest other
/// policy's ms, at least [`MIN_CAP_MS`]), else the pilot scaled.
fn always_spin(pt: &Point, slowest: f64, repeats: usize) -> Result<Vec<(Timed, f64)>, String> {
    let spin =
        policy("always-spin").ok_or_else(|| "always-spin is not among the policies".to_string())?;
    let cap = (CAP_FACTOR * slowest).max(MIN_CAP_MS);
    let pilot_pt = Point {
        work_fraction: PILOT_FRACTION,
        ..*pt
    };
    let pilot = (spin.runner(pt.exec))(&pilot_pt).map_err(|e| format!("always-spin: {e}"))?;
    let pilot_ms = pilot.elapsed.as_secs_f64() * 1e3;
    if pilot_ms / PILOT_FRACTION <= cap {
        let full = median_runs(
            pt,
            &[("always-spin", spin.runner(pt.exec))],
            repeats,
            |_| {},
        )?;
        // Its own rounds, after the others': not paired.
        Ok(full
            .into_iter()
            .map(|mut t| {
                t.samples.clear();
                (t, 1.0)
            })
            .collect())
    } else {
        let scaled = Timed {
            name: "always-spin",
            ms: Spread::single(pilot_ms / PILOT_FRACTION),
            samples: Vec::new(),
            work: pilot.work,
        };
        Ok(vec![(scaled, PILOT_FRACTION)])
    }
}

// ---------------------------------------------------------------------------
// Figure and assessment.

/// A configuration of the rows: workload, exec, threads, oversubscribed.
type Config = (String, String, u32, bool);

/// The configurations of `rows` of `metric`, in first-seen order.
fn configs(rows: &[Row], metric: &str) -> Vec<Config> {
    let mut out: Vec<Config> = Vec::new();
    for r in rows.iter().filter(|r| r.metric == metric) {
        let k = (
            r.get_param("workload").unwrap_or("?").to_string(),
            r.get_param("exec").unwrap_or("?").to_string(),
            r.threads,
            r.oversubscribed,
        );
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// The row of `metric` for `series` at configuration `c`.
fn at<'a>(rows: &'a [Row], series: &str, metric: &str, c: &Config) -> Option<&'a Row> {
    let ps = [("workload", c.0.as_str()), ("exec", c.1.as_str())];
    Data::new(rows).row(Sel::metric(metric).series(series).threads(c.2).params(&ps))
}

/// A configuration in words, e.g. `hanoi/os/8 (over)`.
fn tag(c: &Config) -> String {
    let over = if c.3 { " (over)" } else { "" };
    format!("{}/{}/{}{over}", c.0, c.1, c.2)
}

/// Whether `r` is a capped `always-spin` pilot.
fn capped(r: &Row) -> bool {
    r.get_param("capped") == Some("true")
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let panels = configs(rows, "elapsed_ms")
        .into_iter()
        .map(|c| {
            let bars = rows
                .iter()
                .filter(|r| {
                    r.metric == "elapsed_ms"
                        && r.threads == c.2
                        && r.get_param("workload") == Some(&c.0)
                        && r.get_param("exec") == Some(&c.1)
                })
                .map(|r| {
                    let label = if capped(r) {
                        format!("{} (capped)", r.series)
                    } else {
                        r.series.clone()
                    };
                    Bar::new(&label, r.value, family(&r.series))
                })
                .collect();
            let reference = at(rows, "always-block", "elapsed_ms", &c)
                .map(|b| vec![("always-block".to_string(), b.value)])
                .unwrap_or_default();
            let over = if c.3 { " (oversubscribed)" } else { "" };
            Panel::Bar(BarPanel {
                title: format!("{}, {} threads, {} threads{over}", c.0, c.1, c.2),
                y_label: "elapsed ms (median)".into(),
                y_scale: Scale::Linear,
                bars,
                reference_lines: reference,
            })
        })
        .collect();
    figure(
        "cs-elapsed (KLMO91 Tables 3-4): elapsed time per spin-then-block policy",
        m,
        panels,
    )
}

/// KLMO91 Table 3 (Regsim) and Table 4 (Hanoi): (policy, max spins,
/// elapsed seconds, improvement %).
const TABLE3: [(&str, &str, f64, f64); 8] = [
    ("always-block", "N/A", 10529.5, 0.0),
    ("always-spin", "N/A", 8256.3, 21.5),
    ("fixed-spin-c2", "100", 9108.0, 13.5),
    ("fixed-spin-c", "200", 8000.0, 24.0),
    ("opt-known", "1008", 7881.4, 25.1),
    ("opt-approx", "1008", 8171.2, 22.3),
    ("last-3", "1008", 8011.6, 23.9),
    ("random-walk", "1008", 7929.7, 24.7),
];
const TABLE4: [(&str, &str, f64, f64); 8] = [
    ("always-block", "N/A", 193.9, 0.0),
    ("always-spin", "N/A", 241.2, -24.4),
    ("fixed-spin-c2", "100", 170.8, 11.9),
    ("fixed-spin-c", "200", 164.8, 15.0),
    ("opt-known", "1008", 122.1, 37.0),
    ("opt-approx", "1008", 135.6, 30.1),
    ("last-3", "1008", 134.6, 30.5),
    ("random-walk", "1008", 131.6, 32.1),
];

/// KLMO91 Tables 3 and 4 side by side (markdown).
fn paper_tables() -> String {
    let mut s = String::from(
        "| policy | max spins | Regsim elapsed (s) | Regsim improvement | Hanoi elapsed (s) | Hanoi improvement |\n\
         |---|---|---|---|---|---|\n",
    );
    for (a, b) in TABLE3.iter().zip(TABLE4.iter()) {
        s.push_str(&format!(
            "| `{}` | {} | {:.1} | {:.1}% | {:.1} | {:.1}% |\n",
            a.0, a.1, a.2, a.3, b.2, b.3
        ));
    }
    s
}

/// The estimate of `metric` of `policy` at configuration `c`.
fn est(d: &Data<'_>, metric: &str, policy: &str, c: &Config) -> Option<Estimate> {
    let ps = [("workload", c.0.as_str()), ("exec", c.1.as_str())];
    d.estimate(Sel::metric(metric).series(policy).threads(c.2).params(&ps))
}

/// `policy`'s elapsed time at `c`.
fn time(d: &Data<'_>, policy: &str, c: &Config) -> Option<Estimate> {
    est(d, "elapsed_ms", policy, c)
}

/// The fastest (by median) of `names` at `c`.
fn fastest(d: &Data<'_>, names: &[&'static str], c: &Config) -> Option<(&'static str, Estimate)> {
    names
        .iter()
        .filter_map(|n| Some((*n, time(d, n, c)?)))
        .min_by(|a, b| a.1.value.total_cmp(&b.1.value))
}

/// `policy`'s time over `always-block`'s at `c`: the recorded `vs_block`
/// (paired by round) or `vs_block_unpaired`, else the quotient of the two
/// estimates (data from before these metrics).
fn vs_block(d: &Data<'_>, policy: &str, c: &Config) -> Option<Estimate> {
    est(d, VS_BLOCK, policy, c)
        .or_else(|| est(d, VS_BLOCK_UNPAIRED, policy, c))
        .or_else(|| Some(time(d, policy, c)?.ratio(time(d, "always-block", c)?)))
}

/// The fastest competitive policy's time over `always-block`'s at `c`.
fn best_over_block(d: &Data<'_>, c: &Config) -> Option<Estimate> {
    vs_block(d, fastest(d, &COMPETITIVE, c)?.0, c)
}

/// The configurations on OS threads the rules judge, those with at least
/// the cores of `m` as threads (first-seen order), and a finding of their
/// parts ([`Finding::counted`] by [`Outcome::majority`]; `what` names them
/// where there are none).
fn on_os(
    d: &Data<'_>,
    m: &Machine,
    what: &str,
    part: impl Fn(&Config) -> Option<(Outcome, String)>,
) -> Finding {
    let cores = m.cores() as u32;
    let parts = judged(d, cores)
        .iter()
        .filter(|c| c.1 == "os")
        .filter_map(part)
        .collect();
    let what = format!("{what} on OS threads at {cores} or more threads");
    Finding::counted(parts, Outcome::majority, "in", &what)
}

/// The configurations the rules judge: those with at least `cores`
/// threads, in first-seen order.
fn judged(d: &Data<'_>, cores: u32) -> Vec<Config> {
    configs(d.rows(), "elapsed_ms")
        .into_iter()
        .filter(|c| c.2 >= cores)
        .collect()
}

/// `block-beaten`: on OS threads, in most judged configurations, most of
/// the competitive policies faster than `always-block`.
fn block_beaten(d: &Data<'_>, m: &Machine) -> Finding {
    let what = "`always-block` and the competitive policies";
    on_os(d, m, what, |c| {
        time(d, "always-block", c)?;
        let one = Estimate::exact(1.0);
        let outs: Vec<Outcome> = COMPETITIVE
            .iter()
            .filter_map(|n| Some(rule::less(vs_block(d, n, c)?, one)))
            .collect();
        let faster = outs.iter().filter(|o| **o == Outcome::Holds).count();
        let ev = format!("{}: {faster} of {} faster", tag(c), outs.len());
        Some((Outcome::majority(&outs), ev))
    })
}

/// `adaptive-beats-fixed`: on OS threads, in most judged configurations,
/// the fastest adaptive policy faster than the fastest fixed threshold,
/// each over `always-block` of its own rounds, so that a drift of the
/// machine between rounds cancels.
fn adaptive_beats_fixed(d: &Data<'_>, m: &Machine) -> Finding {
    on_os(d, m, "adaptive and fixed policies", |c| {
        let (a, f) = (fastest(d, &ADAPTIVE, c)?, fastest(d, &FIXED, c)?);
        let (ab, fb) = (vs_block(d, a.0, c)?, vs_block(d, f.0, c)?);
        let ev = format!(
            "{}: `{}` {} ms ({}x block) vs `{}` {} ms ({}x block)",
            tag(c),
            a.0,
            a.1.value.round(),
            ab.show(2),
            f.0,
            f.1.value.round(),
            fb.show(2)
        );
        Some((rule::less(ab, fb), ev))
    })
}

/// `always-spin` against `always-block` at `c` with `claim`, as a finding.
fn spin_vs_block(d: &Data<'_>, c: &Config, claim: fn(Estimate, Estimate) -> Outcome) -> Finding {
    let spin = (time(d, "always-spin", c), time(d, "always-block", c));
    let (Some(s), Some(b), Some(q)) = (spin.0, spin.1, vs_block(d, "always-spin", c)) else {
        return Finding::missing(&format!("`always-spin` and `always-block` at {}", tag(c)));
    };
    let pilot = at(d.rows(), "always-spin", "elapsed_ms", c).is_some_and(capped);
    Finding::new(
        claim(q, Estimate::exact(1.0)),
        format!(
            "{}: `always-spin` {} ms{}, `always-block` {} ms: {}x",
            tag(c),
            s.value.round(),
            if pilot { " (capped pilot)" } else { "" },
            b.value.round(),
            q.show(2)
        ),
    )
}

/// `spin-good-regsim`: Regsim on OS threads at threads = all cores,
/// `always-spin` faster than `always-block`.
fn spin_good_regsim(d: &Data<'_>, m: &Machine) -> Finding {
    let cores = m.cores() as u32;
    let cfgs = configs(d.rows(), "elapsed_ms");
    match cfgs
        .iter()
        .find(|c| c.0 == "regsim" && c.1 == "os" && c.2 == cores && !c.3)
    {
        Some(c) => spin_vs_block(d, c, rule::less),
        None => Finding::missing(&format!("Regsim on OS threads at {cores} threads")),
    }
}

/// `spin-bad-hanoi`: Hanoi on OS threads at the most oversubscribed
/// point, `always-spin` slower than `always-block`.
fn spin_bad_hanoi(d: &Data<'_>, m: &Machine) -> Finding {
    let cores = m.cores() as u32;
    let cfgs = configs(d.rows(), "elapsed_ms");
    match cfgs
        .iter()
        .filter(|c| c.0 == "hanoi" && c.1 == "os" && c.2 > cores && c.3)
        .max_by_key(|c| c.2)
    {
        Some(c) => spin_vs_block(d, c, rule::greater),
        None => Finding::missing(&format!("Hanoi on OS threads at more than {cores} threads")),
    }
}

/// `user-gain-smaller`: in most judged (workload, threads) pairs, the
/// fastest competitive policy's time over `always-block`'s larger on user
/// threads than on OS threads.
fn user_gain_smaller(d: &Data<'_>, m: &Machine) -> Finding {
    let judged = judged(d, m.cores() as u32);
    let what = "the same configurations on OS and user threads";
    on_os(d, m, what, |c| {
        let user = judged
            .iter()
            .find(|u| u.1 == "user" && u.0 == c.0 && u.2 == c.2)?;
        let (o, u) = (best_over_block(d, c)?, best_over_block(d, user)?);
        let ev = format!(
            "{}/{}: fastest / always-block os {}, user {}",
            c.0,
            c.2,
            o.show(2),
            u.show(2)
        );
        Some((rule::greater(u, o), ev))
    })
}

fn assess(rows: &[Row], m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let cores = m.cores() as u32;
    let cfgs = configs(rows, "elapsed_ms");
    let header = table::header(
        "policy",
        cfgs.iter().map(|(w, e, t, over)| {
            let over = if *over { " (over)" } else { "" };
            format!("{w} {e} {t} thr{over}: ms (impr.)")
        }),
    );
    let policies: Vec<&str> = POLICIES.iter().map(|p| p.name).collect();
    let table = table::by_series(&header, &policies, |p| {
        cfgs.iter()
            .map(|c| {
                let imp = at(rows, p, "improvement_pct", c).map(|r| r.value);
                match (at(rows, p, "elapsed_ms", c), imp) {
                    (Some(r), Some(i)) => {
                        let capped = if capped(r) { " capped" } else { "" };
                        format!("{:.0} ({i:+.1}%){capped}", r.value)
                    }
                    (Some(r), None) => format!("{:.0}", r.value),
                    _ => "-".into(),
                }
            })
            .collect()
    });
    let c_of = |e: &str| {
        d.param(Sel::default().params(&[("exec", e)]), "c_spins")
            .unwrap_or("?")
    };
    let mut measured = format!(
        "Elapsed time (median of the repeats) of each policy at {} configuration{} (workload / threads kind / \
         threads); the rules judge those with at least as many threads as cores ({cores}). C in force: {} spins \
         for OS threads (futex), {} spins for user threads (see `cs-calibrate`).",
        cfgs.len(),
        if cfgs.len() == 1 { "" } else { "s" },
        c_of("os"),
        c_of("user")
    );
    if d.select(Sel::metric("elapsed_ms")).any(capped) {
        measured.push_str(
            " Rows marked `capped` are `always-spin` on oversubscribed OS threads: a pilot on 1/8 of the work \
             would have run past the cap, so the value is the pilot scaled to the full work (a linear \
             extrapolation, marked `work_fraction` in the CSV).",
        );
    }
    measured.push_str(&format!(
        "\n\nKLMO91 Tables 3 and 4 (a six-processor Firefly, averages of three runs):\n\n{}",
        paper_tables()
    ));
    let mut notes = format!(
        "KLMO91 ran Regsim and Hanoi on a 6-processor Firefly whose context switch cost C ~ 200 spins (~200 us); \
         this run had {cores} core{}, an OS-thread C of {} spins and a user-thread C of {} spins. With threads = \
         processors (Regsim) there is seldom a ready thread to use a processor freed by blocking, so spinning wins \
         when waits are short; with 4x threads (oversubscribed) a spinner can burn the time slice its lock holder \
         needs. A small C (user threads) makes blocking cheap, so always-block loses little and the policies \
         bunch together. Our workloads are synthetic stand-ins, sized to run in seconds, not hours; differences \
         inside the repeat spread (here a policy's time over always-block's, round by round, spanned {:.1}% of \
         it, the median over points) are ties.",
        if cores == 1 { "" } else { "s" },
        c_of("os"),
        c_of("user"),
        d.pooled_noise_of(VS_BLOCK, None)
            .unwrap_or_else(|| d.pooled_noise("elapsed_ms"))
            * 100.0
    );
    if c_of("user").parse::<u32>().is_ok_and(|c| c < 64) {
        notes.push_str(
            " On user threads C is below 64 spins, so `opt-approx` (waits rounded up to 64 spins, KLMO91 §5) \
             always computes a threshold of 0 and behaves like always-block plus its bookkeeping (see \
             `cs-analytic`).",
        );
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
    use crate::harness::testing::{self, big_metal, small_vm};
    use crate::output::report::Verdict::*;

    /// Rows of every policy at regsim/hanoi x os/user x (cores, 4x cores)
    /// of `m`, elapsed ms from `shape`.
    fn rows(m: &Machine, shape: &Shape) -> Vec<Row> {
        let (p, synth) = (m.cores() as u32, testing::Rows::new(&EXPERIMENT, m));
        let mut out = Vec::new();
        for e in ["os", "user"] {
            for w in ["regsim", "hanoi"] {
                for t in [p, 4 * p] {
                    let block = ms(shape, e, w, t > p, "always-block");
                    for pol in POLICIES {
                        let v = ms(shape, e, w, t > p, pol.name);
                        let r = |metric: &str, v: f64| {
                            let c = if e == "os" { "342" } else { "31" };
                            let r = synth.row(pol.name, t, metric, v).param("workload", w);
                            r.param("exec", e).param("c_spins", c)
                        };
                        if pol.name != "always-block" {
                            out.push(r(VS_BLOCK, v / block));
                        }
                        out.push(r("improvement_pct", (block - v) / block * 100.0));
                        out.push(r("elapsed_ms", v));
                    }
                }
            }
        }
        out
    }

    /// Elapsed ms of always-block, of always-spin on oversubscribed Hanoi
    /// and elsewhere, of the fixed spins on user and OS threads, and of the
    /// other policies on user and OS threads.
    type Shape = [f64; 7];

    /// KLMO91-like data: competitive policies beat always-block, adaptive
    /// beat fixed, always-spin wins at Regsim and loses oversubscribed
    /// Hanoi, and user threads gain less.
    const PAPER_LIKE: Shape = [100.0, 150.0, 70.0, 95.0, 80.0, 90.0, 60.0];

    /// Everything the other way round.
    const CONTRARY: Shape = [50.0, 30.0, 80.0, 55.0, 70.0, 56.0, 90.0];

    /// Elapsed ms of policy `p` in `shape` on `e` threads running `w`.
    fn ms(shape: &Shape, e: &str, w: &str, over: bool, p: &str) -> f64 {
        let user = e == "user";
        shape[match p {
            "always-block" => 0,
            "always-spin" if w == "hanoi" && over => 1,
            "always-spin" => 2,
            "fixed-spin-c2" | "fixed-spin-c" if user => 3,
            "fixed-spin-c2" | "fixed-spin-c" => 4,
            _ if user => 5,
            _ => 6,
        }]
    }

    #[test]
    fn verdicts_reach_every_case() {
        let cases = [
            (&PAPER_LIKE, Holds),
            (&CONTRARY, Differs),
            (&[100.0; 7], Indistinct),
        ];
        testing::assert_verdicts(&EXPERIMENT, &testing::small_and_big(), rows, &cases);
        // Data from a small machine judged for a big one: no point at
        // threads >= cores.
        let small = rows(&small_vm(), &PAPER_LIKE);
        testing::assert_verdict(&EXPERIMENT, &small, &big_metal(), NotMeasurable);
    }

    #[test]
    fn data_without_vs_block_is_judged_from_the_elapsed_times() {
        let m = small_vm();
        let without = |shape: &Shape| {
            let r: Vec<Row> = rows(&m, shape)
                .into_iter()
                .filter(|r| r.metric != VS_BLOCK)
                .collect();
            EXPERIMENT.section(&r, &m).verdict
        };
        assert_eq!(without(&PAPER_LIKE), Holds);
        assert_eq!(without(&CONTRARY), Differs);
    }

    #[test]
    fn table_and_figure_cover_every_configuration() {
        let m = small_vm();
        let r = rows(&m, &PAPER_LIKE);
        assert_eq!(draw(&r, &m).panels.len(), 8);
        let a = assess(&r, &m);
        assert_eq!(a.table.map(|t| t.rows.len()), Some(8));
        assert!(a.measured.contains("10529.5"));
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, &PAPER_LIKE));
    }
}
