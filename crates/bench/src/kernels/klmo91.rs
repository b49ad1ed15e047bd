//! KLMO91 kernels shared by `cs-calibrate`, `cs-analytic`, `cs-elapsed`,
//! `peer-locks` and the CLI (`symmetry calibrate`, `symmetry analyze`):
//!
//! - the calibration of the spin-then-block locks (C in spins, the length
//!   of a spin) from [`super::machine::measure`], installed once per
//!   process ([`ensure`], [`measure_and_install`]);
//! - the two KLMO91 programs (a Regsim-like and a Hanoi-like workload from
//!   `symmetry-workloads`) run on OS or user threads under each of the
//!   eight spin-then-block policies ([`POLICIES`], [`run_point`],
//!   [`median_runs`]), and their lock-waiting-time profiles recorded with
//!   KLMO91's profiling policy ([`record_profile`], [`install_opt_known`]);
//! - the pricing of a recorded profile against the optimal off-line
//!   ([`price`], [`analyze_text`]: the per-lock table, then KLMO91
//!   Tables 1-2).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use symmetry_locks::spin_then_block::calibration::{self, Calibration};
use symmetry_locks::spin_then_block::policy::{Fixed, opt_known};
use symmetry_locks::spin_then_block::profiler::{self, LockRecord, Profile};
use symmetry_locks::spin_then_block::{Futex, SpinThenBlock};
use symmetry_models::competitive;
use symmetry_threads::sync::UserBlocker;
use symmetry_workloads::hanoi::{self, HanoiCfg};
use symmetry_workloads::regsim::{self, RegsimCfg};
use symmetry_workloads::{OsThreads, UserThreads, WorkloadLock};

use super::interpose::Symbols;
use super::lock_report::LockReport;
use super::machine::{self, Constant};
use crate::stats::Spread;

// ---------------------------------------------------------------------------
// Calibration: C in spins.

/// The constants a spin-then-block lock needs, from the machine's
/// measurements ([`machine::measure`], looked up by metric name):
/// `ns_per_spin` = `spin_iter_ns`, C for OS threads = `c_spins_os`, C for
/// user threads = `c_spins_user_2p` (a runtime with two processors, as the
/// workloads build) or else `c_spins_user_1p`. `None` if the spin length
/// is missing.
pub fn calibration_from(get: impl Fn(&str) -> Option<f64>) -> Option<Calibration> {
    let ns_per_spin = get("spin_iter_ns").filter(|v| v.is_finite() && *v > 0.0)?;
    let c = |v: Option<f64>| {
        v.filter(|v| v.is_finite())
            .map_or(0, |v| v.round().max(1.0) as u32)
    };
    Some(Calibration::new(
        ns_per_spin,
        c(get("c_spins_os")),
        c(get("c_spins_user_2p").or_else(|| get("c_spins_user_1p"))),
    ))
}

/// The `export ...` line `symmetry calibrate` prints, for shells and for
/// `calibration`'s environment variables.
pub fn export_line(cal: &Calibration) -> String {
    let vars: Vec<String> = calibration_env(cal)
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!("export {}", vars.join(" "))
}

/// `calibration`'s environment variables for `cal`: what a child process
/// (a program run under the interposition library) needs to use this
/// process's constants instead of measuring its own.
pub fn calibration_env(cal: &Calibration) -> Vec<(String, String)> {
    vec![
        (
            "SYMMETRY_NS_PER_SPIN".into(),
            format!("{:.3}", cal.ns_per_spin),
        ),
        ("SYMMETRY_C_OS".into(), cal.c_spins_os.to_string()),
        ("SYMMETRY_C_USER".into(), cal.c_spins_user.to_string()),
    ]
}

/// The constants in force in this process, once measured (or taken from
/// the environment).
static IN_FORCE: Mutex<Option<Calibration>> = Mutex::new(None);

/// The calibration in force, measured and installed on first use.
/// `cs-calibrate` measures ([`measure_and_install`]); the experiments after
/// it in the same process reuse its values, and `reproduce`, which runs
/// each experiment in a process of its own, passes them on through the
/// environment. Run alone, they measure here (about a second), unless the
/// environment sets `SYMMETRY_C_OS`, which then wins, as it does for any
/// program using the locks.
pub fn ensure(quick: bool) -> Calibration {
    let mut in_force = IN_FORCE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(cal) = *in_force {
        return cal;
    }
    let cal = if std::env::var_os("SYMMETRY_C_OS").is_some() {
        calibration::current()
    } else {
        measure_now(quick).0
    };
    *in_force = Some(cal);
    cal
}

/// Measures the machine's constants, installs the calibration they give
/// (keeping the one in force if the spin length was not measured) and
/// makes it the one [`ensure`] returns; returns it with the measurements.
pub fn measure_and_install(quick: bool) -> (Calibration, Vec<Constant>) {
    let (cal, m) = measure_now(quick);
    *IN_FORCE.lock().unwrap_or_else(|e| e.into_inner()) = Some(cal);
    (cal, m)
}

fn measure_now(quick: bool) -> (Calibration, Vec<Constant>) {
    let m = machine::measure(quick);
    let cal = calibration_from(|k| machine::lookup(&m, k)).unwrap_or_else(calibration::current);
    calibration::install(cal);
    (calibration::current(), m)
}

// ---------------------------------------------------------------------------
// The workloads.

/// The two KLMO91 programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Regsim-like logic simulator (threads = processors).
    Regsim,
    /// Hanoi-like program (many bursty threads).
    Hanoi,
}

impl Workload {
    /// Both, in report order.
    pub const ALL: [Workload; 2] = [Workload::Regsim, Workload::Hanoi];

    /// The name in rows and file names (`regsim`, `hanoi`).
    pub fn name(self) -> &'static str {
        match self {
            Workload::Regsim => "regsim",
            Workload::Hanoi => "hanoi",
        }
    }
}

/// Where the workload's threads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecKind {
    /// OS threads, locks block through the futex.
    Os,
    /// User threads of a `symmetry-threads` runtime with one processor per
    /// core, locks block the user thread.
    User,
}

impl ExecKind {
    /// Both, in report order.
    pub const ALL: [ExecKind; 2] = [ExecKind::Os, ExecKind::User];

    /// The blocker name (`os` / `user`), as in profiles.
    pub fn name(self) -> &'static str {
        match self {
            ExecKind::Os => "os",
            ExecKind::User => "user",
        }
    }
}

/// One workload run to make.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    /// The program.
    pub workload: Workload,
    /// OS or user threads.
    pub exec: ExecKind,
    /// Worker threads.
    pub threads: usize,
    /// Processors of the user-thread runtime (cores).
    pub processors: usize,
    /// `--quick` sizes.
    pub quick: bool,
    /// Fraction of the full work (1.0 normally; less for capped pilots).
    pub work_fraction: f64,
}

/// What one run gave.
#[derive(Debug, Clone, Copy)]
pub struct RunOut {
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Evaluations (regsim) or moves (hanoi).
    pub work: u64,
}

/// How many times the workloads' `quick` presets (about 0.1 s a run) a
/// `--quick` run does: long enough that a run is not dominated by thread
/// start-up and scheduler noise, short enough for the time budget.
pub const QUICK_SCALE: f64 = 3.0;

/// Regsim's size at `threads` workers: the workload's preset (`quick`
/// times [`QUICK_SCALE`], or `full`), its cycles scaled by `fraction`.
pub fn regsim_cfg(threads: usize, quick: bool, fraction: f64) -> RegsimCfg {
    let (mut c, scale) = if quick {
        (RegsimCfg::quick(threads), QUICK_SCALE * fraction)
    } else {
        (RegsimCfg::full(threads), fraction)
    };
    c.cycles = ((c.cycles as f64 * scale).round() as usize).max(1);
    c
}

/// Hanoi's size at `threads` workers: the workload's preset (as for
/// [`regsim_cfg`]), its moves scaled by `fraction`.
pub fn hanoi_cfg(threads: usize, quick: bool, fraction: f64) -> HanoiCfg {
    let (mut c, scale) = if quick {
        (HanoiCfg::quick(threads), QUICK_SCALE * fraction)
    } else {
        (HanoiCfg::full(threads), fraction)
    };
    c.moves = ((c.moves as f64 * scale).round() as u64).max(threads as u64);
    c
}

/// The sequential reference checksum of a Regsim configuration (cached:
/// computing it costs a sequential run).
fn regsim_reference(cfg: &RegsimCfg) -> u64 {
    static CACHE: OnceLock<Mutex<HashMap<String, u64>>> = OnceLock::new();
    let key = format!("{cfg:?}");
    let cache = CACHE.get_or_init(Default::default);
    if let Some(v) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return *v;
    }
    let v = regsim::reference_checksum(cfg);
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, v);
    v
}

/// Runs `pt` with lock `L`, checking the workload's result (a wrong result
/// is a lock bug, reported as an error naming the lock).
pub fn run_point<L: WorkloadLock>(pt: &Point) -> Result<RunOut, String> {
    fn go<L: WorkloadLock, E: symmetry_workloads::Exec>(
        pt: &Point,
        exec: &E,
    ) -> Result<RunOut, String> {
        match pt.workload {
            Workload::Regsim => {
                let cfg = regsim_cfg(pt.threads, pt.quick, pt.work_fraction);
                let out = regsim::run::<L, E>(&cfg, exec);
                let want = regsim_reference(&cfg);
                if out.checksum != want {
                    return Err(format!(
                        "regsim on {} threads ({}) computed checksum {:#x}, the sequential run {want:#x}",
                        pt.threads,
                        E::NAME,
                        out.checksum
                    ));
                }
                Ok(RunOut {
                    elapsed: out.elapsed,
                    work: out.evaluations,
                })
            }
            Workload::Hanoi => {
                let cfg = hanoi_cfg(pt.threads, pt.quick, pt.work_fraction);
                let out = hanoi::run::<L, E>(&cfg, exec);
                if !out.valid {
                    return Err(format!(
                        "hanoi on {} threads ({}) ended with a broken invariant",
                        pt.threads,
                        E::NAME
                    ));
                }
                Ok(RunOut {
                    elapsed: out.elapsed,
                    work: out.moves,
                })
            }
        }
    }
    match pt.exec {
        ExecKind::Os => go::<L, _>(pt, &OsThreads),
        ExecKind::User => go::<L, _>(
            pt,
            &UserThreads {
                processors: pt.processors,
            },
        ),
    }
}

/// A runner for one lock type.
pub type Runner = fn(&Point) -> Result<RunOut, String>;

/// A spin policy with its runners for each executor.
#[derive(Clone, Copy)]
pub struct PolicyEntry {
    /// Registry name (`always-block`, ...).
    pub name: &'static str,
    /// `SpinThenBlock<P, Futex>` on OS threads.
    pub os: Runner,
    /// `SpinThenBlock<P, UserBlocker>` on user threads.
    pub user: Runner,
}

impl std::fmt::Debug for PolicyEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyEntry")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl PolicyEntry {
    /// The runner for `exec`.
    pub fn runner(&self, exec: ExecKind) -> Runner {
        match exec {
            ExecKind::Os => self.os,
            ExecKind::User => self.user,
        }
    }
}

macro_rules! policy_table {
    ($($name:literal => $ty:ty;)*) => {
        /// The eight KLMO91 policies, in Table 1 order.
        pub const POLICIES: &[PolicyEntry] = &[$(
            PolicyEntry {
                name: $name,
                os: run_point::<SpinThenBlock<$ty, Futex>>,
                user: run_point::<SpinThenBlock<$ty, UserBlocker>>,
            },
        )*];
    };
}
symmetry_locks::for_each_spin_policy!(policy_table);

/// The profiling policy: KLMO91 §3's "spin up to 1008, then block".
pub const PROFILING: PolicyEntry = PolicyEntry {
    name: "fixed-1008",
    os: run_point::<SpinThenBlock<Fixed<1008>, Futex>>,
    user: run_point::<SpinThenBlock<Fixed<1008>, UserBlocker>>,
};

/// The adaptive policies (KLMO91 §2.4-2.5).
pub const ADAPTIVE: [&str; 4] = ["opt-known", "opt-approx", "last-3", "random-walk"];
/// The fixed-threshold policies.
pub const FIXED: [&str; 2] = ["fixed-spin-c2", "fixed-spin-c"];
/// Every policy with a constant competitive ratio.
pub const COMPETITIVE: [&str; 6] = [
    "fixed-spin-c2",
    "fixed-spin-c",
    "opt-known",
    "opt-approx",
    "last-3",
    "random-walk",
];

/// The policy named `name`.
pub fn policy(name: &str) -> Option<&'static PolicyEntry> {
    POLICIES.iter().find(|p| p.name == name)
}

/// `adaptive`, `fixed` or `non-competitive`: the family of a policy.
pub fn family(name: &str) -> &'static str {
    if ADAPTIVE.contains(&name) {
        "adaptive"
    } else if FIXED.contains(&name) {
        "fixed"
    } else {
        "non-competitive"
    }
}

/// Records the lock-waiting profile of one run of `pt` with the profiling
/// policy: the run's output and the profile of its locks (those of `pt`'s
/// blocker only).
pub fn record_profile(pt: &Point) -> Result<(RunOut, Profile), String> {
    profiler::set_enabled(true);
    profiler::reset();
    let out = (PROFILING.runner(pt.exec))(pt)?;
    let mut profile = profiler::snapshot();
    profile.locks.retain(|l| l.blocker == pt.exec.name());
    Ok((out, profile))
}

/// Records a profile of `pt` and installs its thresholds for `opt-known`;
/// returns how many locks got one.
pub fn install_opt_known(pt: &Point) -> Result<usize, String> {
    let (_, profile) = record_profile(pt)?;
    Ok(opt_known::install_from_profile(&profile))
}

/// The timed runs of one runner at one point.
#[derive(Debug, Clone, PartialEq)]
pub struct Timed {
    /// The runner's name.
    pub name: &'static str,
    /// Elapsed milliseconds over the repeats (median, smallest, largest).
    pub ms: Spread,
    /// Elapsed milliseconds of each repeat, in round order: entry `k` of
    /// every runner of one [`median_runs`] call ran in the same round.
    pub samples: Vec<f64>,
    /// The work of the last run (evaluations or moves).
    pub work: u64,
}

/// Runs every runner `repeats` times at `pt`, interleaved (so drift hits
/// all of them alike), calling `tick` before each run; returns each
/// runner's elapsed time over its repeats, in `runners` order.
pub fn median_runs(
    pt: &Point,
    runners: &[(&'static str, Runner)],
    repeats: usize,
    mut tick: impl FnMut(&str),
) -> Result<Vec<Timed>, String> {
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); runners.len()];
    let mut work = vec![0u64; runners.len()];
    for _ in 0..repeats.max(1) {
        for (i, (name, r)) in runners.iter().enumerate() {
            tick(name);
            let out = r(pt).map_err(|e| format!("{name}: {e}"))?;
            samples[i].push(out.elapsed.as_secs_f64() * 1e3);
            work[i] = out.work;
        }
    }
    Ok(runners
        .iter()
        .zip(samples)
        .zip(work)
        .map(|(((name, _), s), work)| Timed {
            name,
            ms: Spread::of(&s).unwrap_or_else(|| Spread::single(f64::NAN)),
            samples: s,
            work,
        })
        .collect())
}

// ---------------------------------------------------------------------------
// Pricing a recorded profile (KLMO91 Tables 1-2).

/// Seed of the synthetic inputs and of the replay order of the analysis.
pub const SEED: u64 = 0x4B4C_4D4F_3931;

/// Contended waits recorded in `p`.
pub fn waits(p: &Profile) -> u64 {
    p.locks.iter().map(LockRecord::contended).sum()
}

/// The C of a profile: the one value if all locks agree, else their range;
/// empty for a profile without locks.
pub fn c_label(p: &Profile) -> String {
    let lo = p.locks.iter().map(|l| l.c_spins).min();
    let hi = p.locks.iter().map(|l| l.c_spins).max();
    match (lo, hi) {
        (Some(a), Some(b)) if a == b => a.to_string(),
        (Some(a), Some(b)) => format!("{a}-{b}"),
        _ => String::new(),
    }
}

/// A recorded profile priced: KLMO91's analysis and the per-lock report
/// built on it.
#[derive(Debug)]
pub struct Priced {
    /// Every strategy's cost on every lock.
    pub analysis: competitive::Analysis,
    /// The per-lock view (and `--json`'s document).
    pub report: LockReport,
}

/// Prices every strategy on `profile` (labelled `label`); `c` overrides
/// every lock's recorded C; `symbols` symbolizes the locks' stacks.
pub fn price(profile: &Profile, label: &str, c: Option<u32>, symbols: &Symbols) -> Priced {
    let analysis = competitive::analyze(profile, c, SEED);
    let report = LockReport::new(profile, &analysis, label, c, symbols);
    Priced { analysis, report }
}

/// `symmetry analyze`: for a recorded profile priced as `priced`, the
/// `top` locks by total wait with their counts, times and recommended
/// policy and threshold, the stacks of the first `stacks` of them, then
/// KLMO91 Tables 1 and 2 and the `top` locks by off-line synchronization
/// cost with every policy's price.
pub fn analyze_text(profile: &Profile, priced: &Priced, top: usize, stacks: usize) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let total = waits(profile);
    let label = priced.report.label.as_str();
    let _ = writeln!(
        s,
        "{label}: {} lock(s), {total} contended wait(s), one spin = {:.3} ns; C = {}",
        profile.locks.len(),
        profile.ns_per_spin,
        match priced.report.c_override {
            Some(c) => format!("{c} spins for every lock (--c)"),
            None => format!("each lock's recorded C ({} spins)", c_label(profile)),
        }
    );
    if total == 0 {
        let _ = writeln!(s, "\nNo contended waits recorded: nothing to price.");
        return s;
    }
    let a = &priced.analysis;
    let _ = writeln!(s);
    s.push_str(&priced.report.table_text(top));
    s.push_str(&priced.report.stacks_text(stacks));
    let _ = writeln!(
        s,
        "\nTable 1 (KLMO91): synchronization cost relative to the optimal off-line\n"
    );
    s.push_str(&competitive::table1_text(&[(label, a)]));
    let _ = writeln!(s, "\nTable 2 (KLMO91): behaviour of the optimal off-line\n");
    s.push_str(&competitive::table2_text(&[(label, a)]));
    let _ = writeln!(s, "\nLocks (which should spin, and for how long):\n");
    s.push_str(&competitive::locks_text(a, top));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_prefers_the_two_processor_user_c() {
        let m = [
            ("spin_iter_ns", 14.6),
            ("c_spins_os", 406.2),
            ("c_spins_user_1p", 6.6),
            ("c_spins_user_2p", 41.0),
        ];
        let get = |k: &str| m.iter().find(|x| x.0 == k).map(|x| x.1);
        let c = calibration_from(get).unwrap();
        assert_eq!(c.c_spins_os, 406);
        assert_eq!(c.c_spins_user, 41);
        assert_eq!(
            export_line(&c),
            "export SYMMETRY_NS_PER_SPIN=14.600 SYMMETRY_C_OS=406 SYMMETRY_C_USER=41"
        );
        assert!(calibration_from(|_| None).is_none());
    }

    #[test]
    fn policies_are_the_eight() {
        assert_eq!(POLICIES.len(), 8);
        for n in COMPETITIVE.iter().chain(ADAPTIVE.iter()) {
            assert!(policy(n).is_some(), "{n}");
        }
        assert_eq!(family("random-walk"), "adaptive");
        assert_eq!(family("fixed-spin-c"), "fixed");
        assert_eq!(family("always-spin"), "non-competitive");
    }

    #[test]
    fn an_empty_profile_has_nothing_to_price() {
        let p = Profile::new(10.0, Vec::new());
        assert_eq!(waits(&p), 0);
        assert_eq!(c_label(&p), "");
        let priced = price(&p, "x", None, &Symbols::default());
        assert!(analyze_text(&p, &priced, 5, 0).contains("nothing to price"));
    }
}
