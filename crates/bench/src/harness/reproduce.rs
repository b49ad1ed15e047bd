//! `symmetry reproduce`: every experiment of a catalogue in two passes,
//! each pass of each experiment in a child process of its own, the two
//! passes' points joined, then the report.
//!
//! **A process per experiment.** Each child is `symmetry run ID
//! --keep-machine --retake-by-exit [--half]`, so each experiment runs under
//! the conditions of a `symmetry run ID`: no heap layout, thread pool,
//! page cache or mapping left over from the experiments before it. It also
//! keeps one experiment's crash from ending the others: a failed
//! experiment's old files are removed, the report lists it as not run, and
//! the command fails naming it. When the placement probe moves during a
//! child's run, the child keeps nothing and exits with [`RETAKE_EXIT`],
//! and the experiment is run again in a fresh process (`--second-run`),
//! like every experiment's first run gets.
//!
//! **Two passes**, because the repeats of one process do not show how much
//! a result moves between processes and over minutes: back-to-back
//! reproductions in one pass each disagreed on rules whose intervals, from
//! one process's repeats, did not overlap between the runs (notes of #12).
//! The second pass runs every experiment again, after the rest of its
//! group's first pass, each pass with about half the repeats
//! ([`Ctx::rounds`]); [`data::join_passes`] then makes each point's
//! interval span both processes, and the rules judge the joined points.
//! Both passes over the other experiments come first, then both over the
//! ones that run last ([`Schedule::last`]). An experiment measured in one
//! process when quick ([`Schedule::one_process_when_quick`]) is, in a
//! quick run, with all its repeats.
//!
//! **Calibration hand-off.** An experiment whose rows install an
//! environment in the ones after it ([`Schedule::installs`]:
//! `cs-calibrate`'s spin-then-block constants, which one process would
//! share in memory) passes it to every later child of the first pass and
//! to the whole second pass.
//!
//! **Each file written once.** A first-pass child hands its rows and
//! provenance to this process ([`Keep::HandOff`], a private scratch
//! directory) instead of writing `OUT/ID.csv`; a second-pass child writes
//! `OUT/second-pass/` as a `symmetry run` does (the pass as measured, with
//! its figure). Once an experiment's last pass is done, this process
//! writes its `OUT/ID.csv` (the joined points, or the first pass's file
//! as it was) and its provenance, which records the second pass or why
//! there is none; the report then draws every figure of `OUT` from its
//! CSV. So every CSV and provenance record of a directory is written once
//! and every figure drawn once.

use std::path::Path;
use std::time::Instant;

use super::results::{self, Written};
use super::run::{self, RETAKE_EXIT};
use super::{Ctx, Env, Experiment};
#[cfg(doc)]
use super::{Schedule, run::Keep};
use crate::output::data;
use crate::scratch::ScratchDir;

/// The folder under `reproduce`'s output that holds the second pass's
/// files (its CSVs, plots and provenance as measured, before the join).
pub const SECOND_PASS: &str = "second-pass";

/// Why a quick reproduction has one pass of an experiment measured in one
/// process when quick.
const ONE_PROCESS: &str = "a quick reproduction measures this experiment in one process, with all its \
                           repeats (one run of it takes minutes)";

/// One step of a reproduction: one pass of one experiment.
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    /// The experiment.
    pub experiment: &'a Experiment,
    /// Whether this is its second pass.
    pub second_pass: bool,
}

/// The steps of reproducing `catalogue`: the first pass over the
/// experiments that do not run last, in catalogue order, then their
/// second pass (each one measured in two passes), then the same over the
/// ones that run last ([`Schedule::last`]), which leave the kernel's
/// memory in another state for whatever runs after them. `quick`: a
/// `--quick` run, where an experiment measured in one process when quick
/// has no second pass.
pub fn steps(catalogue: &[Experiment], quick: bool) -> Vec<Step<'_>> {
    let (last, others): (Vec<&Experiment>, Vec<&Experiment>) =
        catalogue.iter().partition(|e| e.schedule.last);
    let mut steps = Vec::new();
    for group in [others, last] {
        steps.extend(group.iter().map(|&experiment| Step {
            experiment,
            second_pass: false,
        }));
        steps.extend(
            group
                .iter()
                .filter(|e| two_passes(e, quick))
                .map(|&experiment| Step {
                    experiment,
                    second_pass: true,
                }),
        );
    }
    steps
}

/// Whether `e` is measured in two passes.
fn two_passes(e: &Experiment, quick: bool) -> bool {
    !(quick && e.schedule.one_process_when_quick)
}

/// Reproduces `catalogue` into `out` (see the module docs), then writes
/// the report, whose introduction names the `pending` ids. `ctx` gives
/// the mode (`quick`) and whether children draw progress bars. Fails if a
/// step failed (after the report), naming each, or if a child could not
/// be started or a file of `out` not written.
pub fn reproduce(
    catalogue: &[Experiment],
    pending: &[&str],
    ctx: &Ctx,
    out: &Path,
) -> Result<(), String> {
    let t = Instant::now();
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find this program's own path to re-run it: {e}"))?;
    let machine = run::machine(out, ctx.quick, false)?;
    let second = out.join(SECOND_PASS);
    results::ensure_dir(&second)?;
    machine.write_json(&second)?;
    let hand_off = ScratchDir::new("symmetry-reproduce")?;
    let mut child = Child {
        exe: &exe,
        ctx,
        hand_off: hand_off.path(),
        env: Vec::new(),
    };
    for e in catalogue {
        results::remove(&second, e.id);
    }
    let steps = steps(catalogue, ctx.quick);
    let mut failed: Vec<String> = Vec::new();
    // First passes waiting for their second.
    let mut waiting: Vec<(&str, Written)> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let e = step.experiment;
        let two = two_passes(e, ctx.quick);
        let first = if step.second_pass {
            let Some(at) = waiting.iter().position(|(id, _)| *id == e.id) else {
                continue; // its first pass failed
            };
            eprintln!(
                "[{}/{}] {} (second pass) — {}",
                i + 1,
                steps.len(),
                e.id,
                e.title
            );
            if !child.run(e, &second, true, false)? {
                results::remove(&second, e.id);
                failed.push(format!("{} (second pass)", e.id));
            }
            waiting.swap_remove(at).1
        } else {
            eprintln!("[{}/{}] {} — {}", i + 1, steps.len(), e.id, e.title);
            let Some(first) = child.first_pass(e, out, two)? else {
                results::remove(out, e.id);
                failed.push(e.id.to_string());
                continue;
            };
            child.install(e, &first, out);
            if two {
                waiting.push((e.id, first));
                continue;
            }
            first
        };
        // Its last pass is done: write its results.
        let kept = if two {
            join(out, &second, &first)
        } else {
            keep_alone(out, &first, ONE_PROCESS)
        };
        if let Err(err) = kept {
            eprintln!(
                "      {}: cannot join its two passes ({err}); the report shows what is there",
                e.id
            );
            let why = format!("joining its two passes failed: {err}");
            if let Err(w) = keep_alone(out, &first, &why) {
                eprintln!("      {w}");
            }
            failed.push(format!("{} (join)", e.id));
        }
    }
    results::report(out, catalogue, pending)?;
    eprintln!("reproduce finished in {:.0} s", t.elapsed().as_secs_f64());
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} steps failed: {} (see their errors above; the report lists an experiment whose \
             first pass failed as not run)",
            failed.len(),
            steps.len(),
            failed.join(", ")
        ))
    }
}

/// Writes an experiment's results to `out` from its `first` pass and its
/// second pass as written to `second`: the joined points and a provenance
/// that records both passes, or, where the second pass failed, the first
/// pass's alone.
fn join(out: &Path, second: &Path, first: &Written) -> Result<(), String> {
    let id = &first.provenance.experiment;
    let Some(other) = Written::read(second, id)? else {
        return keep_alone(out, first, "its second process failed");
    };
    let joined = data::join_passes(&first.rows, &other.rows);
    let mut provenance = first.provenance.clone();
    provenance.second_pass = Some(Box::new(other.provenance));
    provenance.one_pass_points = joined.one_pass;
    results::write(out, &joined.rows, &provenance)
}

/// Writes an experiment's results to `out` from its first pass alone: its
/// CSV as the child wrote it, and its provenance saying why (`why`) it
/// has no second pass joined.
fn keep_alone(out: &Path, first: &Written, why: &str) -> Result<(), String> {
    let mut provenance = first.provenance.clone();
    provenance.not_joined = Some(why.to_string());
    let csv = results::csv(out, &provenance.experiment);
    std::fs::copy(&first.csv, &csv).map_err(|e| format!("{}: cannot write: {e}", csv.display()))?;
    provenance.write(out)
}

/// How the steps' child processes are started.
#[derive(Debug)]
struct Child<'a> {
    /// This program.
    exe: &'a Path,
    /// The mode and whether to draw progress bars.
    ctx: &'a Ctx,
    /// Where first passes hand their results over.
    hand_off: &'a Path,
    /// The environment installed by the experiments so far
    /// ([`Schedule::installs`]).
    env: Env,
}

impl Child<'_> {
    /// Takes the environment `e`'s `first` pass installs in the steps
    /// after it, if `e` installs one ([`Schedule::installs`]); `out`: the
    /// directory its results go to, named if the rows lack it.
    fn install(&mut self, e: &Experiment, first: &Written, out: &Path) {
        let Some(installs) = e.schedule.installs else {
            return;
        };
        match installs(&first.rows) {
            Some(env) => self.env = env,
            None => eprintln!(
                "      {}: nothing to install in it; the experiments after it measure their own constants",
                results::csv(out, e.id).display()
            ),
        }
    }

    /// Runs `e`'s first pass (`half`: one of two) and reads what it
    /// handed over; `None` if it failed.
    fn first_pass(
        &self,
        e: &Experiment,
        out: &Path,
        half: bool,
    ) -> Result<Option<Written>, String> {
        if !self.run(e, out, half, true)? {
            return Ok(None);
        }
        match Written::read(self.hand_off, e.id) {
            Ok(Some(w)) => Ok(Some(w)),
            Ok(None) => {
                eprintln!("      {}: no provenance record after its run", e.id);
                Ok(None)
            }
            Err(err) => {
                eprintln!("      {}: {err}", e.id);
                Ok(None)
            }
        }
    }

    /// Runs experiment `e` in a child process for the results directory
    /// `out` (retaken in a fresh process if the placement probe moved,
    /// see [`run::run`]), with `--half` if `half`, handing its results
    /// over if `hand_off`; whether it succeeded. An error only if the
    /// child could not be started.
    fn run(&self, e: &Experiment, out: &Path, half: bool, hand_off: bool) -> Result<bool, String> {
        let started = Instant::now();
        let spawn = |retake: &str| {
            let mut child = std::process::Command::new(self.exe);
            child
                .args(["run", e.id, "--keep-machine", retake, "--out"])
                .arg(out);
            if hand_off {
                child.arg("--hand-off").arg(self.hand_off);
            }
            if half {
                child.arg("--half");
            }
            if self.ctx.quick {
                child.arg("--quick");
            }
            if !self.ctx.progress {
                child.arg("--no-progress");
            }
            child.envs(self.env.iter().map(|(k, v)| (k, v)));
            end_with_parent(&mut child);
            // The child prints its own `[1/1]` line; the caller's numbers
            // the whole reproduction.
            child.status()
        };
        // A moved placement probe: the child kept nothing and asks for a
        // fresh process, like every experiment's first run gets.
        let status = match spawn("--retake-by-exit") {
            Ok(s) if s.code() == Some(i32::from(RETAKE_EXIT)) => spawn("--second-run"),
            other => other,
        };
        match status {
            Ok(s) if s.success() => {
                eprintln!(
                    "      {} finished in {:.1} s",
                    e.id,
                    started.elapsed().as_secs_f64()
                );
                Ok(true)
            }
            Ok(s) => {
                eprintln!("      {} failed ({s}); going on with the others", e.id);
                Ok(false)
            }
            Err(err) => Err(format!(
                "cannot start {} for {}: {err}",
                self.exe.display(),
                e.id
            )),
        }
    }
}

/// Makes `child` receive SIGTERM when this process ends, so that killing
/// `reproduce` (a `timeout`, a `kill` of its pid) does not leave an
/// experiment measuring and writing its CSV on its own. (A child ended
/// so runs no destructors: a scratch directory or a program it started
/// may be left behind, as after any SIGTERM.)
fn end_with_parent(child: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid is async-signal-safe; it runs here, before the fork.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: prctl, getppid and _exit
    // are, and it touches no lock or allocation.
    unsafe {
        child.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have ended before the prctl took effect.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}
