//! `interpose-apps` — KLMO91's method on programs nobody here wrote: each
//! program runs under glibc's own mutexes, under the interposition
//! library's profile mode, with the library passing every call straight
//! through (the floor of any interposer), and with every pthread mutex
//! replaced by each registry lock ([`crate::kernels::interpose`]); the
//! recorded profile is priced against the optimal off-line, and the
//! policy it prices cheapest runs as well.
//!
//! The programs (`pigz`, `pbzip2`, `xz`, `sysbench-mutex`,
//! `sysbench-threads`, `kcprototest`, whose database sits behind one
//! pthread reader-writer lock), their input, the rounds each series runs and the
//! metrics they give are [`crate::registry::programs`]'s; each runs with
//! `threads` = the cores (`--threads` overrides) as its worker count, on
//! 8 MiB of input (64 MiB in a full run).
//!
//! Series: `glibc`, `profile`, `passthrough`, and the replacement locks:
//! in a quick run [`QUICK_LOCKS`], in a full run every algorithm replace
//! mode accepts; `--locks` narrows them. The recommended policy's lock is
//! always run.

use crate::harness::ScratchDir;
use crate::harness::prelude::*;
use crate::kernels::{interpose, klmo91};
use crate::registry::programs::{
    GLIBC, PASSTHROUGH, PRICE, PROFILE, PROGRAMS, ProgramRun, RECOMMENDED_OVER, STB, VS_GLIBC,
    VS_PASSTHROUGH, least_steps, write_input,
};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "interpose-apps",
    title: "Debian programs under glibc, the profiler, each lock and the recommended policy",
    source: "KLMO91 on real programs (LD_PRELOAD interposition)",
    uses_locks: true,
    schedule: Schedule::ONE_PROCESS_WHEN_QUICK,
    ..Experiment::new(CLAIMS, run, draw, assess)
};

const CLAIMS: &[Claim] = &[
    Claim {
        key: "identical",
        paper: "Target (this project): the library changes nothing but timing. Each program's output is \
                byte-identical with and without it, in profile mode and on every replacement lock (for \
                sysbench, whose report carries timings, the same event count; for kcprototest, every line but its \
                seed, memory and time lines).",
        rule: "every run that completed wrote the same output as the program's run under glibc",
        needs: Needs::NONE,
        judge: identical,
    },
    Claim {
        key: "profiler-overhead",
        paper: "Target: profiling costs under 5% of a program's run time. KLMO91 recorded waiting times \
                inside the lock code so that the profile would not change what it measures.",
        rule: "per program, profile-mode `ms` over glibc `ms` (paired by round) is at most 1.05",
        needs: Needs::NONE,
        judge: profiler_overhead,
    },
    Claim {
        key: "recommended",
        paper: "KLMO91 §4-5: a lock's waiting-time distribution decides which spin policy is cheapest, \
                and pricing the recorded waits against the optimal off-line finds it. The price is processor \
                time spent waiting; elapsed time shows it only in part (\"The analytic results do not \
                include the implementation overhead of the algorithms\", §5).",
        rule: "per program with at least 100 contended waits (fewer are no distribution to price), the \
               policy the analysis prices cheapest runs it no slower than each other spin-then-block policy \
               run that the analysis prices at least 2x as high, their times paired by round; policies \
               priced under 2x (or not priced) are not judged, and a program with none priced 2x is a tie",
        needs: Needs::NONE,
        judge: recommended,
    },
    Claim {
        key: "recording-overhead",
        paper: "Target: what the profiler records costs under 5% of a program's run time beyond what \
                interposing its lock calls costs at all. The library loaded in pass-through \
                (`SYMMETRY_LOCK=off`: every call straight to glibc) is the floor no interposing profiler \
                goes under; on a program that does little but lock and unlock, that floor alone can \
                exceed 5%.",
        rule: "per program, profile-mode `ms` over pass-through `ms` (paired by round) is at most 1.05",
        needs: Needs::NONE,
        judge: recording_overhead,
    },
];

/// Fewest contended waits whose profile the `recommended` rule judges.
const MIN_WAITS: f64 = 100.0;
/// A policy priced under this many times the recommended policy's price is
/// no claim about run time: the price is the processor time spent
/// waiting, and KLMO91 §5 warns that it leaves out the policies' own
/// overhead and that processor time saved shows in elapsed time only
/// where another thread could use the processor. A chosen threshold: a
/// difference of price this large is one the rule expects elapsed time
/// to show.
const PRICE_TIE: f64 = 2.0;

/// The replacement locks of a quick run: `tas`, a FIFO queue lock (`mcs`),
/// and three fixed spin-then-block policies (both extremes and the
/// 2-competitive one).
pub const QUICK_LOCKS: &[&str] = &[
    "tas",
    "mcs",
    "spin-then-block:always-block",
    "spin-then-block:always-spin",
    "spin-then-block:fixed-spin-c",
];

fn input_mb(ctx: &Ctx) -> usize {
    if ctx.quick { 8 } else { 64 }
}

/// The replacement locks to run: `--locks` (those replace mode accepts),
/// else [`QUICK_LOCKS`] or every accepted algorithm.
fn locks(ctx: &Ctx) -> Vec<String> {
    let accepted = |n: &str| symmetry_interpose::replace::algorithm(n).is_some();
    match &ctx.locks {
        Some(l) => l.iter().filter(|n| accepted(n)).cloned().collect(),
        None if ctx.quick => QUICK_LOCKS.iter().map(|s| s.to_string()).collect(),
        None => symmetry_interpose::replace::algorithms()
            .map(|a| a.name.to_string())
            .collect(),
    }
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let lib = interpose::library(None)?;
    let env = klmo91::calibration_env(&klmo91::ensure(ctx.quick));
    let scratch = ScratchDir::new("symmetry-interpose-apps")?;
    let input = scratch.path().join("input.txt");
    let mb = input_mb(ctx);
    write_input(&input, mb)?;
    let threads = ctx.threads.clone().unwrap_or_else(|| vec![ctx.cores]);
    let base_locks = locks(ctx);
    let per_program = least_steps(ctx, &base_locks);
    let bar = ctx.bar(EXPERIMENT.id, PROGRAMS.len() * threads.len() * per_program);
    let mut rows = Vec::new();
    for program in PROGRAMS {
        for &t in &threads {
            bar.set_message(format!("{} x{t}", program.name));
            let one = ProgramRun {
                id: EXPERIMENT.id,
                program,
                t,
                mb,
                ctx,
                lib: &lib,
                env: &env,
                input: &input,
                scratch: scratch.path(),
                bar: &bar,
            };
            rows.extend(one.rows(&base_locks));
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

// ---------------------------------------------------------------------------
// Assessment.

/// The (program, threads) pairs in the data, in [`PROGRAMS`] order.
fn cases(d: &Data<'_>) -> Vec<(&'static str, u32)> {
    let mut out = Vec::new();
    for program in PROGRAMS {
        let params = [("program", program.name)];
        for (t, _) in d.threads(Sel::metric("completed").params(&params)) {
            out.push((program.name, t));
        }
    }
    out
}

/// One case's numbers.
struct Case<'a> {
    program: &'static str,
    t: u32,
    d: &'a Data<'a>,
    /// The program as a parameter to select its rows by.
    params: [(&'static str, &'static str); 1],
}

impl<'a> Case<'a> {
    fn new(program: &'static str, t: u32, d: &'a Data<'a>) -> Case<'a> {
        let params = [("program", program)];
        Case {
            program,
            t,
            d,
            params,
        }
    }

    /// The rows of `metric` for `series` in this case.
    fn sel<'s>(&'s self, metric: &'s str, series: &'s str) -> Sel<'s> {
        Sel::point(metric, series, self.t).params(&self.params)
    }

    fn pick(&self, metric: &str, series: &str) -> Option<Estimate> {
        self.d.estimate(self.sel(metric, series))
    }

    /// A paired ratio of `series` (see [`ProgramRun`]): with its
    /// own median interval where it has [`OWN_MIN`] rounds or more; else
    /// (a CSV of fewer rounds) widened by the noise of that series' ratios
    /// of the same metric over the programs, as a lock that convoys in
    /// some rounds varies far more than the profiler beside it.
    fn paired(&self, metric: &str, series: &str) -> Option<Estimate> {
        let sel = self.sel(metric, series);
        let own = self
            .d
            .row(sel)?
            .spread()
            .is_some_and(|(_, _, n)| n >= OWN_MIN);
        if own {
            self.d.estimate_own(sel)
        } else {
            self.d.estimate_by_series(sel)
        }
    }

    fn status(&self, series: &str) -> Option<&str> {
        let r = self.d.row(self.sel("completed", series))?;
        r.get_param("status")
    }

    fn recommended(&self) -> Option<String> {
        let r = self.d.row(self.sel("waits", PROFILE))?;
        r.get_param("recommended")
            .filter(|p| *p != "none")
            .map(|p| format!("{STB}{p}"))
    }

    /// Every series of this case with an `ms` row.
    fn timed(&self) -> Vec<(String, Estimate)> {
        self.d
            .series(Sel::metric("ms").threads(self.t).params(&self.params))
            .into_iter()
            .filter_map(|s| Some((s.clone(), self.pick("ms", &s)?)))
            .collect()
    }
}

/// The cases of `d` ([`cases`]), each with its numbers.
fn case_list<'a>(d: &'a Data<'a>) -> Vec<Case<'a>> {
    cases(d)
        .into_iter()
        .map(|(program, t)| Case::new(program, t, d))
        .collect()
}

/// What each claim finds when the data hold no program run (not even a
/// "not installed" row).
fn no_run() -> Finding {
    Finding::missing("a program run")
}

/// `identical`: every completed run's output the same as under glibc.
fn identical(d: &Data<'_>, _m: &Machine) -> Finding {
    if cases(d).is_empty() {
        return no_run();
    }
    let mut differed = Vec::new();
    let mut compared = 0;
    for r in d.rows().iter().filter(|r| r.metric == "identical") {
        compared += 1;
        if r.value < 1.0 {
            differed.push(format!(
                "`{}` on `{}`",
                r.get_param("program").unwrap_or("?"),
                r.series
            ));
        }
    }
    if compared == 0 {
        Finding::missing("a completed program run")
    } else if differed.is_empty() {
        Finding::new(
            Outcome::Holds,
            format!("{compared} series, every run's output the same as under glibc"),
        )
    } else {
        Finding::new(
            Outcome::Fails,
            format!("output differed: {}", differed.join(", ")),
        )
    }
}

/// `profiler-overhead`: per program, profile mode at most 1.05x glibc.
fn profiler_overhead(d: &Data<'_>, _m: &Machine) -> Finding {
    overhead(d, VS_GLIBC, GLIBC, "glibc")
}

/// `recording-overhead`: per program, profile mode at most 1.05x
/// pass-through.
fn recording_overhead(d: &Data<'_>, _m: &Machine) -> Finding {
    overhead(d, VS_PASSTHROUGH, PASSTHROUGH, "pass-through")
}

/// Per program, profile mode's time over `base`'s at most 1.05: the
/// paired ratio `metric` where the data have it, else the medians'.
fn overhead(d: &Data<'_>, metric: &str, base: &str, label: &str) -> Finding {
    let cases = case_list(d);
    if cases.is_empty() {
        return no_run();
    }
    let mut paired = false;
    let mut parts = Vec::new();
    for c in &cases {
        let r = match c.paired(metric, PROFILE) {
            Some(r) => {
                paired = true;
                Some(r)
            }
            None => c
                .pick("ms", PROFILE)
                .zip(c.pick("ms", base))
                .map(|(p, g)| p.ratio(g)),
        };
        if let Some(r) = r {
            let ev = format!("{} {}", c.program, r.show(3));
            parts.push((rule::at_most(r, 1.05), ev));
        }
    }
    let how = if paired { " (paired by round)" } else { "" };
    if parts.is_empty() {
        Finding::missing(&format!(
            "a program timed under {label} and in profile mode"
        ))
    } else {
        Finding::all(parts, "; ").map_evidence(|e| format!("profile / {label}{how}: {e}"))
    }
}

/// `recommended`: per program with enough contended waits, the policy
/// the analysis prices cheapest no slower than each policy priced at
/// least [`PRICE_TIE`] times as high.
fn recommended(d: &Data<'_>, _m: &Machine) -> Finding {
    let cases = case_list(d);
    if cases.is_empty() {
        return no_run();
    }
    let mut outcomes = Vec::new();
    let mut ev = Vec::new();
    for c in &cases {
        let Some(rec) = c.recommended() else {
            if c.pick("waits", PROFILE).is_some() {
                ev.push(format!(
                    "{}: no contended wait, nothing to recommend",
                    c.program
                ));
            }
            continue;
        };
        let waits = c.pick("waits", PROFILE).map_or(0.0, |w| w.value);
        if waits < MIN_WAITS {
            ev.push(format!(
                "{}: {waits:.0} contended waits, too few to price (not judged)",
                c.program
            ));
            continue;
        }
        let stb: Vec<(String, Estimate)> = c
            .timed()
            .into_iter()
            .filter(|(s, _)| s.starts_with(STB))
            .collect();
        let Some(r) = stb.iter().find(|(s, _)| *s == rec).map(|x| x.1) else {
            ev.push(format!("{}: `{rec}` did not complete", c.program));
            outcomes.push(Outcome::Fails);
            continue;
        };
        let short = |s: &str| s.trim_start_matches(STB).to_string();
        // Where the data prices the recommended policy, only the policies
        // priced at least PRICE_TIE times its price are a claim about run
        // time to judge (a policy without a price, such as `opt-known`, is
        // none). Data without prices judges every policy.
        let price = |s: &str| c.pick(PRICE, s).map(|e| e.value);
        let priced = price(&rec).is_some();
        let judged_against = |s: &str| match (price(s), price(&rec)) {
            (Some(p), Some(q)) => p >= q * PRICE_TIE,
            _ => !priced,
        };
        let others: Vec<&(String, Estimate)> = stb
            .iter()
            .filter(|(s, _)| *s != rec && judged_against(s))
            .collect();
        if others.is_empty() {
            outcomes.push(Outcome::Tie);
            ev.push(format!(
                "{}: `{}`, and no other policy run priced {PRICE_TIE}x its price or more: \
                 no claim, not judged",
                c.program,
                short(&rec),
            ));
            continue;
        }
        // Paired by round: the recommended policy over each other policy
        // in the same rounds. Which policy is fastest by median is itself
        // a coin toss where two tie.
        let over: Vec<(String, Estimate)> = stb
            .iter()
            .filter(|(s, _)| *s != rec)
            .filter_map(|(s, _)| Some((s.clone(), c.paired(RECOMMENDED_OVER, s)?)))
            .collect();
        if over.len() + 1 == stb.len() {
            outcomes.push(Outcome::all(
                over.iter()
                    .filter(|(s, _)| judged_against(s))
                    .map(|(_, q)| rule::at_most(*q, 1.0)),
            ));
            ev.push(format!(
                "{}: `{}` over {} (paired by round)",
                c.program,
                short(&rec),
                over.iter()
                    .map(|(s, q)| {
                        let mark = if judged_against(s) {
                            ""
                        } else {
                            " (not judged)"
                        };
                        format!("`{}` {}{mark}", short(s), q.show(2))
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            continue;
        }
        // Without paired rows: against the fastest of the policies judged.
        let Some((fs, f)) = others
            .iter()
            .min_by(|a, b| a.1.value.total_cmp(&b.1.value))
            .map(|(s, e)| (s.as_str(), *e))
        else {
            continue;
        };
        if r.value <= f.value {
            outcomes.push(Outcome::Holds);
            ev.push(format!(
                "{}: `{}` is faster than each of {} policies judged ({} ms)",
                c.program,
                short(&rec),
                others.len(),
                r.show(1)
            ));
        } else {
            let (q, how) = match c.paired(RECOMMENDED_OVER, fs) {
                Some(q) => (q, ", paired by round"),
                None => (r.ratio(f), ""),
            };
            outcomes.push(rule::at_most(q, 1.0));
            ev.push(format!(
                "{}: `{}` / fastest judged `{}` = {}{how}",
                c.program,
                short(&rec),
                short(fs),
                q.show(2)
            ));
        }
    }
    if outcomes.is_empty() {
        Finding::not_measurable(if ev.is_empty() {
            "no program recorded a contended wait".to_string()
        } else {
            ev.join("; ")
        })
    } else {
        Finding::new(Outcome::all(outcomes), ev.join("; "))
    }
}

fn assess(rows: &[Row], _m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let cases = case_list(&d);
    if cases.is_empty() {
        return Assessment {
            measured: "No program run in the data.".into(),
            ..Assessment::default()
        };
    }
    // The table and the words.
    let mut table = Table::new(&[
        "program",
        "threads",
        "waits",
        "recommended (cost / off-line)",
        "glibc ms",
        "profile / glibc",
        "pass-through / glibc",
        "recommended / glibc",
        "fastest lock / glibc",
        "slowest lock / glibc",
        "did not complete",
    ]);
    let mut missing = Vec::new();
    for c in &cases {
        if let Some(st) = c.status(GLIBC) {
            missing.push(format!("`{}`: {st}", c.program));
            continue;
        }
        let g = c.pick("ms", GLIBC);
        let vs = |e: Option<Estimate>| match (e, g) {
            (Some(e), Some(g)) => format!("{:.2}", e.value / g.value),
            _ => "n/a".into(),
        };
        let locks: Vec<(String, Estimate)> = c
            .timed()
            .into_iter()
            .filter(|(s, _)| s != GLIBC && s != PROFILE && s != PASSTHROUGH)
            .collect();
        let fastest = locks.iter().min_by(|a, b| a.1.value.total_cmp(&b.1.value));
        let slowest = locks.iter().max_by(|a, b| a.1.value.total_cmp(&b.1.value));
        let named = |x: Option<&(String, Estimate)>| match (x, g) {
            (Some((s, e)), Some(g)) => format!("`{s}` {:.2}", e.value / g.value),
            _ => "n/a".into(),
        };
        let rec = c.recommended();
        let c_spins = d
            .row(c.sel("waits", PROFILE))
            .and_then(|r| r.get_param("c_spins"))
            .filter(|s| !s.is_empty())
            .map_or(String::new(), |s| format!(", C = {s} spins"));
        let rec_ratio = c
            .pick("recommended_vs_offline", PROFILE)
            .map_or(String::new(), |e| format!(" ({:.2}{c_spins})", e.value));
        let dnf: Vec<String> = d
            .rows()
            .iter()
            .filter(|r| {
                r.metric == "completed"
                    && r.value < 1.0
                    && r.threads == c.t
                    && r.get_param("program") == Some(c.program)
            })
            .map(|r| format!("`{}`", r.series))
            .collect();
        table.rows.push(vec![
            c.program.to_string(),
            c.t.to_string(),
            c.pick("waits", PROFILE)
                .map_or("n/a".into(), |w| format!("{:.0}", w.value)),
            rec.as_deref()
                .map_or("none".into(), |r| r.trim_start_matches(STB).to_string())
                + &rec_ratio,
            g.map_or("n/a".into(), |g| g.show(1)),
            vs(c.pick("ms", PROFILE)),
            vs(c.pick("ms", PASSTHROUGH)),
            vs(rec.as_deref().and_then(|r| c.pick("ms", r))),
            named(fastest),
            named(slowest),
            if dnf.is_empty() {
                "-".into()
            } else {
                dnf.join(", ")
            },
        ]);
    }
    let waits: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            let w = c.pick("waits", PROFILE)?;
            Some(format!("{} {:.0}", c.program, w.value))
        })
        .collect();
    let measured = format!(
        "{} program(s) run; contended waits the profiler recorded per run: {}.{}",
        table.rows.len(),
        if waits.is_empty() {
            "none".into()
        } else {
            waits.join(", ")
        },
        if missing.is_empty() {
            String::new()
        } else {
            format!(" Not run: {}.", missing.join("; "))
        }
    );
    Assessment {
        measured,
        notes: "Replace mode runs `opt-known` without per-lock thresholds (its locks have no names to \
                look them up by), so the recommendation is chosen among the other policies. A series \
                whose run outlived 30x the glibc run was killed: the FIFO locks hand the lock to a \
                waiter that may not be running, and a program with more threads than cores can stall \
                on them (SMARTQ's problem)."
            .into(),
        table: Some(table),
    }
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let d = Data::new(rows);
    let panels = cases(&d)
        .into_iter()
        .map(|(program, t)| {
            let c = Case::new(program, t, &d);
            let g = c.pick("ms", GLIBC).map(|e| e.value);
            let bars = c
                .timed()
                .into_iter()
                .map(|(s, e)| {
                    let group = if s == GLIBC || s == PROFILE || s == PASSTHROUGH {
                        s.clone()
                    } else if s.starts_with(STB) {
                        "spin-then-block".to_string()
                    } else {
                        "replacement lock".to_string()
                    };
                    let label = s.trim_start_matches(STB).to_string();
                    Bar::new(&label, g.map_or(f64::NAN, |g| e.value / g), &group)
                })
                .collect();
            Panel::Bar(BarPanel {
                title: format!("{program}, {t} threads"),
                y_label: "run time / glibc's (log)".into(),
                y_scale: Scale::Log,
                bars,
                reference_lines: vec![("glibc".into(), 1.0)],
            })
        })
        .collect();
    figure(
        "interpose-apps: Debian programs on each lock, relative to glibc's mutex",
        m,
        panels,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Spread;
    use crate::harness::testing::{self, big_metal, small_vm};
    use crate::output::report::Verdict;

    /// Rows for two programs: glibc and pass-through at 100 ms, profile at
    /// `profile_ms`, `mcs` at 90, two spin-then-block policies at 80 and
    /// `other_ms`, the recommended one being `fixed-spin-c2` (80 ms).
    fn rows(m: &Machine, profile_ms: f64, other_ms: f64, identical: bool) -> Vec<Row> {
        let t = m.cores() as u32;
        let mut out = Vec::new();
        for program in ["pigz", "sysbench-mutex"] {
            let r = |series: &str, metric: &str, v: f64, rel: f64| {
                testing::row(
                    EXPERIMENT.id,
                    series,
                    t,
                    m,
                    metric,
                    v,
                    rel,
                    &[("program", program), ("input_mb", "16")],
                )
            };
            for (s, ms) in [
                (GLIBC, 100.0),
                (PROFILE, profile_ms),
                (PASSTHROUGH, 100.0),
                ("mcs", 90.0),
                ("spin-then-block:fixed-spin-c2", 80.0),
                ("spin-then-block:always-block", other_ms),
            ] {
                out.push(r(s, "completed", 1.0, 0.0));
                out.push(r(s, "identical", if identical { 1.0 } else { 0.0 }, 0.0));
                out.push(r(s, "ms", ms, 0.01));
            }
            out.push(r("ticket", "completed", 0.0, 0.0).param("status", "killed (timed out)"));
            out.push(r(PROFILE, "waits", 1000.0, 0.0).param("recommended", "fixed-spin-c2"));
            out.push(r(PROFILE, "locks", 2.0, 0.0).param("recommended", "fixed-spin-c2"));
        }
        out
    }

    #[test]
    fn verdicts_reach_every_case() {
        for m in [small_vm(), big_metal()] {
            let s = EXPERIMENT.section(&rows(&m, 101.0, 120.0, true), &m);
            assert_eq!(s.verdict, Verdict::Holds, "{}", s.measured);
            let s = EXPERIMENT.section(&rows(&m, 150.0, 60.0, false), &m);
            assert_eq!(s.verdict, Verdict::Differs, "{}", s.measured);
            let s = EXPERIMENT.section(&rows(&m, 150.0, 120.0, true), &m);
            assert_eq!(s.verdict, Verdict::Partial, "{}", s.measured);
            // The recommended policy within the spread of the fastest: a tie.
            let s = EXPERIMENT.section(&rows(&m, 101.0, 79.9, true), &m);
            assert_ne!(s.verdict, Verdict::Differs, "{}", s.measured);
            assert_eq!(EXPERIMENT.section(&[], &m).verdict, Verdict::NotMeasurable);
        }
        for f in testing::findings(&EXPERIMENT, &[], &small_vm()) {
            assert_eq!(f.evidence, "a program run not in this run's data");
        }
    }

    #[test]
    fn paired_rounds_decide_what_separate_medians_tie() {
        let m = small_vm();
        // Separate medians with a 12% spread: profile 1.00x glibc and the
        // recommended policy 1.15x the fastest both tie.
        let mut v = rows(&m, 100.0, 69.6, true);
        for r in v.iter_mut().filter(|r| r.metric == "ms") {
            *r = r.clone().with_spread(&Spread {
                median: r.value,
                lo: r.value * 0.88,
                hi: r.value * 1.12,
                n: 3,
            });
        }
        let f = testing::findings(&EXPERIMENT, &v, &m);
        testing::assert_outcome(&f, 1, Outcome::Tie);
        testing::assert_outcome(&f, 2, Outcome::Tie);
        // Paired by round, the three rounds agree to 1%.
        for program in ["pigz", "sysbench-mutex"] {
            let params = [("program", program), ("input_mb", "16")];
            let paired = |series: &str, metric: &str, q: f64| {
                let s = Spread::median_interval(&[q * 0.995, q, q * 1.005]).unwrap();
                testing::row(EXPERIMENT.id, series, 2, &m, metric, q, 0.0, &params).with_spread(&s)
            };
            v.push(paired(PROFILE, VS_GLIBC, 1.0));
            v.push(paired(
                "spin-then-block:always-block",
                RECOMMENDED_OVER,
                80.0 / 69.6,
            ));
        }
        let f = testing::findings(&EXPERIMENT, &v, &m);
        testing::assert_outcome(&f, 1, Outcome::Holds);
        assert!(f[1].evidence.contains("paired by round"));
        testing::assert_outcome(&f, 2, Outcome::Fails);
        assert!(f[2].evidence.contains("paired by round"));
    }

    #[test]
    fn every_other_policy_is_judged_with_its_own_rounds() {
        let m = small_vm();
        // The recommended policy (fixed-spin-c2, 80 ms) fastest by median.
        let base = rows(&m, 101.0, 82.0, true);
        let with = |over: &[f64], profile: &[f64]| {
            let mut v = base.clone();
            for program in ["pigz", "sysbench-mutex"] {
                let params = [("program", program), ("input_mb", "16")];
                let paired = |series: &str, metric: &str, q: &[f64]| {
                    let s = Spread::median_interval(q).unwrap();
                    testing::row(EXPERIMENT.id, series, 2, &m, metric, s.median, 0.0, &params)
                        .with_spread(&s)
                };
                v.push(paired(PROFILE, VS_GLIBC, profile));
                v.push(paired(
                    "spin-then-block:always-block",
                    RECOMMENDED_OVER,
                    over,
                ));
            }
            testing::findings(&EXPERIMENT, &v, &m)
        };
        let spread =
            |mid: f64| -> Vec<f64> { (0..9).map(|i| mid - 0.08 + 0.02 * i as f64).collect() };
        // Paired over nine rounds, 0.90-1.06 of always-block: a tie, where
        // the medians alone made it the fastest.
        let f = with(&spread(0.98), &spread(1.0));
        testing::assert_outcome(&f, 2, Outcome::Tie);
        assert!(f[2].evidence.contains("`always-block` 0.98"));
        // Its own nine rounds, not the pooled noise, judge the profiler:
        // 1.04-1.20, whose interval from the 2nd to the 8th (1.06-1.18)
        // fails 1.05.
        let f = with(&spread(0.8), &spread(1.12));
        testing::assert_outcome(&f, 1, Outcome::Fails);
        testing::assert_outcome(&f, 2, Outcome::Holds);
    }

    /// Price rows for both programs: the recommended `fixed-spin-c2` at
    /// 1.01, `always-block` at `block`.
    fn prices(m: &Machine, block: f64) -> Vec<Row> {
        let mut v = Vec::new();
        for program in ["pigz", "sysbench-mutex"] {
            let params = [("program", program), ("input_mb", "16")];
            for (series, p) in [
                ("spin-then-block:fixed-spin-c2", 1.01),
                ("spin-then-block:always-block", block),
            ] {
                v.push(testing::row(
                    EXPERIMENT.id,
                    series,
                    2,
                    m,
                    PRICE,
                    p,
                    0.0,
                    &params,
                ));
            }
        }
        v
    }

    #[test]
    fn only_policies_priced_apart_are_judged() {
        let m = small_vm();
        // fixed-spin-c2 (recommended, 80 ms) over always-block: 1.2, paired.
        let mut base = rows(&m, 101.0, 66.7, true);
        for program in ["pigz", "sysbench-mutex"] {
            let params = [("program", program), ("input_mb", "16")];
            let s = Spread::median_interval(&[1.19, 1.2, 1.21]).unwrap();
            base.push(
                testing::row(
                    EXPERIMENT.id,
                    "spin-then-block:always-block",
                    2,
                    &m,
                    RECOMMENDED_OVER,
                    1.2,
                    0.0,
                    &params,
                )
                .with_spread(&s),
            );
        }
        let priced = |block: f64| {
            let mut v = base.clone();
            v.extend(prices(&m, block));
            testing::findings(&EXPERIMENT, &v, &m)
        };
        // Without prices (older data) every policy is judged: it fails.
        testing::assert_outcome(
            &testing::findings(&EXPERIMENT, &base, &m),
            2,
            Outcome::Fails,
        );
        // Priced 3x dearer, the analysis claims it is slower: it fails.
        testing::assert_outcome(&priced(3.03), 2, Outcome::Fails);
        // Priced under 2x, the analysis makes no claim: a tie.
        let f = priced(1.9);
        testing::assert_outcome(&f, 2, Outcome::Tie);
        assert!(f[2].evidence.contains("no claim"), "{}", f[2].evidence);
        // The rule states the factor the code uses.
        assert!(CLAIMS[2].rule.contains(&format!("{PRICE_TIE}x")));
        // An unpriced policy in priced data (`opt-known`, faster still) is
        // not judged; the policy priced 3x still is.
        let with_opt_known = |block: f64| {
            let mut v = base.clone();
            for program in ["pigz", "sysbench-mutex"] {
                let params = [("program", program), ("input_mb", "16")];
                let r = |series: &str, metric: &str, v: f64, rel: f64| {
                    testing::row(EXPERIMENT.id, series, 2, &m, metric, v, rel, &params)
                };
                let ok = "spin-then-block:opt-known";
                v.push(r(ok, "completed", 1.0, 0.0));
                v.push(r(ok, "identical", 1.0, 0.0));
                v.push(r(ok, "ms", 50.0, 0.01));
                let s = Spread::median_interval(&[1.59, 1.6, 1.61]).unwrap();
                v.push(r(ok, RECOMMENDED_OVER, 1.6, 0.0).with_spread(&s));
            }
            v.extend(prices(&m, block));
            testing::findings(&EXPERIMENT, &v, &m)
        };
        testing::assert_outcome(&with_opt_known(1.9), 2, Outcome::Tie);
        let f = with_opt_known(3.03);
        testing::assert_outcome(&f, 2, Outcome::Fails);
        assert!(
            f[2].evidence
                .contains("`opt-known` 1.60 [1.57, 1.63] (not judged)"),
            "{}",
            f[2].evidence
        );
        // Without paired rows, against the fastest policy judged.
        let medians = |block: f64| {
            let mut v: Vec<Row> = rows(&m, 101.0, 66.7, true);
            v.extend(prices(&m, block));
            testing::findings(&EXPERIMENT, &v, &m)
        };
        testing::assert_outcome(&medians(3.03), 2, Outcome::Fails);
        testing::assert_outcome(&medians(1.9), 2, Outcome::Tie);
    }

    #[test]
    fn a_missing_program_is_named_not_judged() {
        let m = small_vm();
        let mut r = rows(&m, 101.0, 120.0, true);
        r.push(
            Row::new(EXPERIMENT.id, GLIBC, 2, false, "completed", 0.0, "bool")
                .param("program", "xz")
                .param("input_mb", "16")
                .param("status", "not installed"),
        );
        let a = assess(&r, &m);
        assert!(a.measured.contains("`xz`: not installed"), "{}", a.measured);
        let f = testing::findings(&EXPERIMENT, &r, &m);
        assert_eq!(f[0].outcome, Outcome::Holds);
        let table = a.table.unwrap();
        assert!(table.rows.iter().any(|row| row[10].contains("`ticket`")));
    }

    #[test]
    fn too_few_waits_are_not_judged() {
        let m = small_vm();
        let mut r = rows(&m, 101.0, 60.0, true);
        for row in r.iter_mut().filter(|r| r.metric == "waits") {
            row.value = 12.0;
        }
        let f = testing::findings(&EXPERIMENT, &r, &m);
        assert!(
            matches!(f[2].outcome, Outcome::NotMeasurable(_)),
            "{:?}",
            f[2]
        );
        assert!(f[2].evidence.contains("too few"));
    }

    #[test]
    fn machine_neutral() {
        testing::assert_machine_neutral(
            &EXPERIMENT,
            &rows(&small_vm(), 101.0, 120.0, true),
            &rows(&big_metal(), 101.0, 120.0, true),
        );
    }

    #[test]
    fn quick_locks_are_replace_mode_algorithms() {
        for l in QUICK_LOCKS {
            assert!(symmetry_interpose::replace::algorithm(l).is_some(), "{l}");
        }
    }
}
