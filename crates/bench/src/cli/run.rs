//! The commands that run the catalogue and report on it: `symmetry run`,
//! `reproduce`, `report` and `calibrate`. Each parses its arguments and
//! calls the harness's runner ([`crate::harness::run`],
//! [`crate::harness::reproduce`], [`crate::harness::results`]) with the
//! catalogue of [`crate::experiments`].

use std::path::PathBuf;
use std::process::ExitCode;

use crate::experiments::{self, Ctx};
use crate::harness::reproduce;
use crate::harness::results;
use crate::harness::run::{self, Keep, RETAKE_EXIT, Ran, Retake};
use crate::kernels::{klmo91, machine};
use crate::output::data;
use crate::registry::locks as locks_table;

/// The options every running command takes.
#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    /// Shorter budgets and fewer points: every verdict in minutes, not hours (reference/README.md: measured times).
    #[arg(long)]
    pub quick: bool,
    /// Output directory.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Do not draw progress bars.
    #[arg(long)]
    pub no_progress: bool,
}

impl Common {
    /// The context to run experiments with: these options, `threads` and
    /// `locks` (`--threads`, `--locks`) and every logical CPU.
    fn ctx(&self, threads: Option<Vec<usize>>, locks: Option<Vec<String>>) -> Ctx {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ctx {
            quick: self.quick,
            threads,
            locks,
            cores,
            progress: !self.no_progress,
            out: Some(self.out.clone()),
            half: false,
        }
    }
}

/// Arguments of `symmetry run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Experiment ids (see `symmetry list`).
    #[arg(required = true)]
    pub ids: Vec<String>,
    /// Thread counts, e.g. `1,2,4` or `1-4,8` (default: 1..2x cores plus 4x cores).
    #[arg(long, value_parser = parse_threads)]
    pub threads: Option<ThreadList>,
    /// Locks to include, comma-separated registry names (see `symmetry locks`).
    #[arg(long, value_delimiter = ',')]
    pub locks: Option<Vec<String>>,
    /// Record the run under OUT/machine.json as it is instead of writing a new one. `reproduce`
    /// passes it to the process it starts for each experiment, so every result names the
    /// `reproduce` command and its start.
    #[arg(long, hide = true)]
    pub keep_machine: bool,
    /// When the placement probe moves during an experiment, exit with status 75 and write
    /// nothing instead of running it again in this process (`reproduce` then starts a
    /// fresh one with `--second-run`).
    #[arg(long, hide = true, conflicts_with = "second_run")]
    pub retake_by_exit: bool,
    /// This is the second run of the experiment (`reproduce`'s retake): record it as such
    /// and do not run it again.
    #[arg(long, hide = true)]
    pub second_run: bool,
    /// One of the two passes `reproduce` measures each experiment in: take about half the
    /// repeats (`Ctx::half`).
    #[arg(long, hide = true)]
    pub half: bool,
    /// Write each experiment's CSV and provenance to this directory, and no figure, for the
    /// `reproduce` that started this process, which writes the results to OUT itself once it
    /// has both passes (files an experiment writes besides, such as lock profiles, still go
    /// to OUT).
    #[arg(long, hide = true, value_name = "DIR")]
    pub hand_off: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

/// A `--threads` value: one argument holding a whole list. (A bare
/// `Vec<usize>` would make clap expect one count per occurrence.)
#[derive(Debug, Clone)]
pub struct ThreadList(pub Vec<usize>);

/// Parses `1,2,4` and ranges `1-4`; refuses 0, empty lists and empty
/// items (`1,,2`, a trailing comma).
pub fn parse_threads(s: &str) -> Result<ThreadList, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(format!(
                "`{s}` has an empty item (expected counts separated by single commas, e.g. `1,2,4` or `1-4,8`)"
            ));
        }
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let num = |x: &str| {
            x.parse::<usize>().map_err(|_| {
                format!("`{x}` is not a thread count (expected e.g. `1,2,4` or `1-4`)")
            })
        };
        let (lo, hi) = (num(lo)?, num(hi)?);
        if lo == 0 {
            return Err("thread counts start at 1 (`0` threads cannot run anything)".into());
        }
        if hi < lo {
            return Err(format!(
                "range `{part}` is empty (its end is below its start)"
            ));
        }
        if hi > 4096 {
            return Err(format!(
                "{hi} threads is more than this harness will start (at most 4096)"
            ));
        }
        out.extend(lo..=hi);
    }
    if out.is_empty() {
        return Err("no thread counts given".into());
    }
    out.sort_unstable();
    out.dedup();
    Ok(ThreadList(out))
}

/// `symmetry run`: exits 2 on an unknown id or a `--locks` that does not
/// apply, [`RETAKE_EXIT`] when `--retake-by-exit` asks for a new process,
/// 1 with a message when a run fails.
pub fn main(args: RunArgs) -> ExitCode {
    let catalogue = experiments::ALL;
    let checked = run::select(catalogue, &args.ids).and_then(|list| {
        if let Some(l) = &args.locks {
            locks_table::select(Some(l))?;
            run::check_locks_apply(&list, catalogue)?;
        }
        Ok(list)
    });
    let list = match checked {
        Ok(list) => list,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let common = &args.common;
    let ctx = Ctx {
        half: args.half,
        ..common.ctx(args.threads.map(|t| t.0), args.locks)
    };
    let retake = match (args.retake_by_exit, args.second_run) {
        (true, _) => Retake::ByExit,
        (_, true) => Retake::Never,
        _ => Retake::InProcess,
    };
    let keep = match &args.hand_off {
        Some(dir) => Keep::HandOff(dir),
        None => Keep::Results(&common.out),
    };
    let ran = run::machine(&common.out, ctx.quick, args.keep_machine)
        .and_then(|m| run::run(&list, &ctx, &m, retake, keep));
    match ran {
        Ok(Ran::RunAgain) => ExitCode::from(RETAKE_EXIT),
        other => done(other.map(|_| ())),
    }
}

/// `symmetry reproduce`.
pub fn reproduce(common: &Common) -> Result<(), String> {
    reproduce::reproduce(
        experiments::ALL,
        experiments::PENDING,
        &common.ctx(None, None),
        &common.out,
    )
}

/// `symmetry report`.
pub fn report(out: &std::path::Path) -> Result<(), String> {
    results::report(out, experiments::ALL, experiments::PENDING)
}

/// `symmetry calibrate`: runs the `calibrate` experiment into `--out`,
/// prints its constants, then the spin-then-block constants as a line to
/// export.
pub fn calibrate(common: &Common) -> Result<(), String> {
    let list = run::select(experiments::ALL, &["calibrate".to_string()])?;
    let ctx = common.ctx(None, None);
    let m = run::machine(&common.out, ctx.quick, false)?;
    run::run(
        &list,
        &ctx,
        &m,
        Retake::InProcess,
        Keep::Results(&common.out),
    )?;
    let rows = data::read_csv(&results::csv(&common.out, "calibrate"))?;
    let cal = klmo91::calibration_from(|m| rows.iter().find(|r| r.metric == m).map(|r| r.value));
    for r in rows {
        println!(
            "{:<18} {:>12.2} {:<6} {}",
            r.metric,
            r.value,
            r.unit,
            machine::describe(&r.metric)
        );
    }
    let cal = cal.ok_or("the spin length was not measured; no constants to export")?;
    println!("# spin-then-block constants (KLMO91's C); set them for any program using the locks:");
    println!("{}", klmo91::export_line(&cal));
    Ok(())
}

/// The exit code of a command that returns `result`: success, or 1 with
/// the error on stderr.
pub fn done(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_threads;

    #[test]
    fn threads_lists_and_ranges() {
        assert_eq!(parse_threads("1,2,4").unwrap().0, vec![1, 2, 4]);
        assert_eq!(parse_threads("1-3,8").unwrap().0, vec![1, 2, 3, 8]);
        assert!(parse_threads("0").unwrap_err().contains("start at 1"));
        assert!(parse_threads("x").is_err());
        assert!(parse_threads("4-2").is_err());
        assert!(parse_threads("").is_err());
    }
}
