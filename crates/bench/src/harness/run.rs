//! Running experiments in this process (`symmetry run`, and each child
//! process of `symmetry reproduce`).
//!
//! An experiment is measured between two readings of the placement probe
//! (the cache-line round trip between CPUs 0 and 1). If the probe moved by
//! more than [`PROBE_CHANGE`], the host moved the virtual CPUs during the
//! run and its points were measured on two different machines, so the
//! experiment is run once more ([`Retake`]): in this process, or, for
//! `reproduce`, in a fresh one. The second run is kept: the choice rests
//! on the probe and the experiment's declaration, never on what the run
//! measured or how long it took, so a retake cannot select a verdict.
//!
//! What a run measured is kept ([`Keep`]) in a results directory (the CSV
//! and its provenance, then the figure drawn from the CSV), or handed to
//! the `reproduce` that started this process, which writes the results
//! itself once it has both of an experiment's passes.

use std::path::Path;
use std::time::Instant;

use super::results;
use super::{Ctx, Experiment};
use crate::kernels::machine::core_probe_ns;
use crate::output::data::Row;
use crate::output::machine::{Machine, iso8601_utc};
#[cfg(doc)]
use crate::output::provenance::PROBE_CHANGE;
use crate::output::provenance::Provenance;

/// How [`run`] runs an experiment again when the placement probe moved
/// during it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retake {
    /// In this process (`symmetry run`).
    InProcess,
    /// By exiting with [`RETAKE_EXIT`] and keeping nothing, for
    /// `reproduce` to start a fresh process with [`Retake::Never`]: a
    /// reproduction runs every experiment in a process of its own, and a
    /// retake in the same process would run after a whole run's heap,
    /// threads and installed constants.
    ByExit,
    /// Not at all: this is the second run (`reproduce`'s fresh process).
    Never,
}

/// The exit status of `run ... --retake-by-exit` when the probe moved and
/// the experiment is to be run again in a new process.
pub const RETAKE_EXIT: u8 = 75;

/// What [`run`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// Kept every experiment's results.
    Kept,
    /// Kept nothing of the last experiment: the probe moved and
    /// [`Retake::ByExit`] asks for a new process.
    RunAgain,
}

/// Where [`run`] keeps what it measured.
#[derive(Debug, Clone, Copy)]
pub enum Keep<'a> {
    /// In this results directory: `ID.csv` and its provenance, then the
    /// figure drawn from the CSV.
    Results(&'a Path),
    /// Handed to the process that started this one (`reproduce`): `ID.csv`
    /// and its provenance in this directory, and no figure; that process
    /// writes the results.
    HandOff(&'a Path),
}

/// Runs the experiments of `list` one after the other on `machine`,
/// keeping each one's results before the next starts; on the first that
/// fails, its error naming it.
pub fn run(
    list: &[&Experiment],
    ctx: &Ctx,
    machine: &Machine,
    retake: Retake,
    keep: Keep<'_>,
) -> Result<Ran, String> {
    let dir = match keep {
        Keep::Results(dir) | Keep::HandOff(dir) => dir,
    };
    results::ensure_dir(dir)?;
    for (i, e) in list.iter().enumerate() {
        let t = Instant::now();
        eprintln!("[{}/{}] {} — {}", i + 1, list.len(), e.id, e.title);
        let Some((rows, provenance)) = measure(e, ctx, machine, retake)? else {
            return Ok(Ran::RunAgain);
        };
        results::write(dir, &rows, &provenance)?;
        if let Keep::Results(dir) = keep {
            results::draw(dir, e, machine)?;
        }
        eprintln!(
            "      done in {:.1} s -> {}",
            t.elapsed().as_secs_f64(),
            results::csv(dir, e.id).display()
        );
    }
    Ok(Ran::Kept)
}

/// Measures `e` between two readings of the placement probe, and again
/// as `retake` says if the probe moved (except in a `--quick` run of an
/// experiment measured in one process when quick,
/// [`Schedule::one_process_when_quick`](super::Schedule::one_process_when_quick)):
/// its rows and their provenance, which counts the runs and records the
/// probe of the run kept; `None` if the probe moved and [`Retake::ByExit`]
/// asks for a new process.
fn measure(
    e: &Experiment,
    ctx: &Ctx,
    machine: &Machine,
    retake: Retake,
) -> Result<Option<(Vec<Row>, Provenance)>, String> {
    let mut runs = if retake == Retake::Never { 2 } else { 1 };
    loop {
        let probe_before = core_probe_ns();
        let started = iso8601_utc(std::time::SystemTime::now());
        let t = Instant::now();
        let rows = (e.run)(ctx).map_err(|err| format!("{}: {err}", e.id))?;
        let seconds = t.elapsed().as_secs_f64();
        let probe_after = core_probe_ns();
        let p = Provenance::new(e.id, machine, started, seconds)
            .with_probe(probe_before, probe_after)
            .with_runs(runs);
        if runs == 2 || !p.placement_changed() {
            return Ok(Some((rows, p)));
        }
        let moved = format!(
            "      {}: the cache-line round trip between CPUs 0 and 1 moved from {:.0} to {:.0} ns during the run",
            e.id,
            probe_before.unwrap_or(f64::NAN),
            probe_after.unwrap_or(f64::NAN)
        );
        if ctx.quick && e.schedule.one_process_when_quick {
            eprintln!("{moved}; a quick run does not run it again");
            return Ok(Some((rows, p)));
        }
        if retake == Retake::ByExit {
            eprintln!("{moved}; running it again in a new process");
            return Ok(None);
        }
        eprintln!("{moved}; running it again");
        runs += 1;
    }
}

/// The machine a run in `out` is recorded under: a new description of
/// this machine and run, written to `out/machine.json`, or with `keep`
/// (`--keep-machine`, `reproduce`'s children) the one already there,
/// which must name this build and mode (`quick`), or the results would be
/// recorded under another commit or mode.
pub fn machine(out: &Path, quick: bool, keep: bool) -> Result<Machine, String> {
    if !keep {
        results::ensure_dir(out)?;
        let machine = Machine::detect(quick);
        machine.write_json(out)?;
        return Ok(machine);
    }
    let m = Machine::read_json(out)?;
    let commit = option_env!("SYMMETRY_GIT").unwrap_or("unknown");
    let mode = |quick: bool| if quick { "quick" } else { "full" };
    if m.git_commit != commit || m.quick != quick {
        return Err(format!(
            "--keep-machine: machine.json records commit {} ({} mode), but this is commit {commit} ({} mode)",
            m.git_commit,
            mode(m.quick),
            mode(quick)
        ));
    }
    Ok(m)
}

/// The experiments of `catalogue` named by `ids`, in that order, or an
/// error naming the first unknown id and listing the accepted ones.
pub fn select<'a>(
    catalogue: &'a [Experiment],
    ids: &[String],
) -> Result<Vec<&'a Experiment>, String> {
    by_name(catalogue, |e| e.id, ids, "experiment", "ids")
}

/// The entries of `table` named by `wanted` (`name_of` gives an entry's
/// name), in that order, or the error a user reads for the first unknown
/// one: ``unknown {what} `x`; accepted {plural}: a, b, ...``. The one
/// name look-up of the harness and the registries.
pub fn by_name<'a, T>(
    table: &'a [T],
    name_of: impl Fn(&T) -> &str,
    wanted: &[String],
    what: &str,
    plural: &str,
) -> Result<Vec<&'a T>, String> {
    wanted
        .iter()
        .map(|n| {
            table.iter().find(|e| name_of(e) == n).ok_or_else(|| {
                let accepted: Vec<&str> = table.iter().map(&name_of).collect();
                format!(
                    "unknown {what} `{n}`; accepted {plural}: {}",
                    accepted.join(", ")
                )
            })
        })
        .collect()
}

/// `--locks` narrows only experiments that run locks: refuse it when an
/// experiment of `list` has none (it would be ignored silently), naming
/// the ones of `catalogue` it narrows.
pub fn check_locks_apply(list: &[&Experiment], catalogue: &[Experiment]) -> Result<(), String> {
    let without: Vec<&str> = list
        .iter()
        .filter(|e| !e.uses_locks)
        .map(|e| e.id)
        .collect();
    if without.is_empty() {
        return Ok(());
    }
    let with: Vec<&str> = catalogue
        .iter()
        .filter(|e| e.uses_locks)
        .map(|e| e.id)
        .collect();
    Err(format!(
        "--locks does not apply to {} (no lock is chosen there); it narrows only: {}",
        without.join(", "),
        with.join(", ")
    ))
}
