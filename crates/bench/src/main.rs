//! `symmetry`: re-runs the experiments of the symmetry papers on this
//! machine and writes CSV results, SVG plots and a report (SPEC §3).
//!
//! This file only parses the command line; each sub-command is a function
//! of the library's [`cli`](symmetry_bench::cli) modules, which call the
//! harness's runner with the experiment catalogue.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use symmetry_bench::cli::run::{Common, RunArgs, done};
use symmetry_bench::cli::{am, analyze, compare, list, profile, run};

#[derive(Parser, Debug)]
#[command(
    name = "symmetry",
    version,
    about = "Synchronization and lightweight-thread experiments of five classic papers, re-run on this machine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the experiments, one per line: id, then title.
    List,
    /// List the lock registry: name, family, FIFO or not.
    Locks,
    /// Run experiments by id, writing OUT/ID.csv, OUT/ID.svg and OUT/machine.json.
    Run(RunArgs),
    /// Run every experiment, each in a process of its own, then write OUT/REPORT.md and
    /// OUT/REPORT.html.
    Reproduce {
        #[command(flatten)]
        common: Common,
    },
    /// Measure this machine's constants (atomic RMW, cache-line round trip, block+wake, C in spins).
    Calibrate {
        #[command(flatten)]
        common: Common,
    },
    /// Price every KLMO91 spin policy on a recorded lock-wait profile (Tables 1-2) and recommend a spin
    /// threshold per lock. Record one with SYMMETRY_LOCK_PROFILE=FILE (or the profiler API).
    Analyze(analyze::AnalyzeArgs),
    /// Run an unmodified program with every lock profiled (pthread mutexes, rwlocks and spin locks,
    /// futex waits of Rust and parking_lot locks; LD_PRELOAD), then list its locks by total wait and
    /// price every spin policy per lock as `analyze` does: `symmetry profile [--out FILE] -- CMD ARGS...`.
    Profile(profile::ProfileArgs),
    /// Shared-memory Active Messages jobs: `am spawn -n N APP` starts N processes that run one of
    /// LC98's applications; `am list`, `am clean`.
    #[command(subcommand)]
    Am(am::AmCommand),
    /// Judge two result directories (e.g. `reference` and `results`) with this build's rules and
    /// list the experiments whose verdicts differ, each rule that moved, and each run's placement
    /// probe. Exit status 0 when every verdict agrees, 1 when some differ, 2 when it cannot compare
    /// (no machine.json, an unreadable CSV, no experiment in common).
    Compare(compare::CompareArgs),
    /// Rebuild OUT/REPORT.md and OUT/REPORT.html from the CSV files already in OUT.
    Report {
        /// Directory holding the CSV files and machine.json.
        #[arg(long, default_value = "results")]
        out: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `am-apps` may re-execute this binary as `symmetry am rank ...`.
    symmetry_bench::kernels::am_job::mark_harness_binary();
    // Record the process's CPU set before any measurement pins a thread.
    let _ = symmetry_bench::kernels::locks::allowed_cpus();
    match cli.command {
        Command::List => {
            list::list();
            ExitCode::SUCCESS
        }
        Command::Locks => {
            list::locks();
            ExitCode::SUCCESS
        }
        Command::Run(args) => run::main(args),
        Command::Reproduce { common } => done(run::reproduce(&common)),
        Command::Calibrate { common } => done(run::calibrate(&common)),
        Command::Analyze(args) => done(analyze::analyze(&args)),
        Command::Report { out } => done(run::report(&out)),
        Command::Profile(args) => profile::main(args),
        Command::Am(cmd) => am::main(cmd),
        Command::Compare(args) => compare::main(args),
    }
}

#[cfg(test)]
mod tests {
    use super::{Cli, Command};
    use clap::Parser;

    /// The whole command line parses, including `--threads` (clap checks
    /// the field type only when the value is read).
    #[test]
    fn run_command_line_parses() {
        let cli = Cli::try_parse_from([
            "symmetry",
            "run",
            "spin-counter",
            "--threads",
            "1-2,8",
            "--locks",
            "tas,mcs",
            "--quick",
        ])
        .expect("valid command line");
        match cli.command {
            Command::Run(args) => {
                assert_eq!(args.ids, vec!["spin-counter".to_string()]);
                assert!(!args.retake_by_exit && !args.second_run && !args.half);
                assert!(
                    !args.keep_machine && args.hand_off.is_none(),
                    "only reproduce's children keep machine.json and hand their results over"
                );
                assert_eq!(args.threads.map(|t| t.0), Some(vec![1, 2, 8]));
                assert_eq!(args.locks, Some(vec!["tas".to_string(), "mcs".to_string()]));
                assert!(args.common.quick);
            }
            other => panic!("parsed as {other:?}"),
        }
        assert!(
            Cli::try_parse_from(["symmetry", "run", "spin-counter", "--threads", "0"]).is_err()
        );
    }
}
