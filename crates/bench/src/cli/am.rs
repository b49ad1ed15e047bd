//! `symmetry am ...`: the SPMD launcher of the shared-memory Active
//! Messages applications (SPEC §2.3; LC98 §4.3).
//!
//! - `symmetry am spawn -n N APP [--algo NAME] [--size quick|full]` starts
//!   N processes (re-executions of this binary as `symmetry am rank APP
//!   ...`, the rank in their environment, see [`symmetry_am::job::spawn`])
//!   that find each other's endpoints by the job name, run one of the
//!   Split-C applications of `symmetry_workloads::am_apps` with the chosen
//!   claim algorithm, and report. Each rank prints one line; the launcher,
//!   which sees every rank's result and exit status, prints the summary
//!   (elapsed time, whether every rank's part verified, the parameters) and
//!   exits non-zero if a rank failed or did not verify. Rank 0 alone could
//!   not say "verified on all ranks" without more messages after the
//!   measured run.
//! - `symmetry am list`: the applications and the claim algorithms.
//! - `symmetry am clean`: removes every segment whose creating process (or
//!   launcher) is gone, whatever its job's name
//!   ([`symmetry_am::job::cleanup_stale`]).
//! - `symmetry am spawn --mpi -n N APP [--transport T] [--hosts H]` runs
//!   the same job under `mpiexec` (built with the `mpi` feature): ranks on
//!   one host talk through shared memory, ranks on different hosts over MPI
//!   (`--transport hierarchical`, the default), or every pair over MPI
//!   (`--transport mpi`); `--hosts H` splits this machine into H emulated
//!   hosts. On a cluster, start `mpiexec -f HOSTFILE -n N symmetry am rank
//!   APP ...` directly (with `-genv UCX_MM_FIFO_SIZE 1024`, which `--mpi`
//!   sets, see [`UCX_FIFO`]); every rank prints its line.
//! - `symmetry am rank APP ...` (hidden): the body of one rank; refuses to
//!   run outside a job started by `am spawn` or an MPI launcher.
//!
//! Ranks hand their results to the launcher through a private directory
//! (`--result-dir`): one small JSON file per rank (see [`encode`]). The
//! `am-apps` experiment uses the same path ([`spawn_app`]), so its numbers
//! come from separate processes, as LC98's did.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use symmetry_am::{Job, MAX_RANKS, claim, job};
use symmetry_workloads::am_apps::{App, Size};

pub use crate::kernels::am_job::{
    UCX_FIFO, encode, failed_file, parse_algo, pid_file, processes, result_file, run_named,
    size_name, spawn_app, spawn_app_mpi, summarize, symmetry_exe,
};

/// Exit status of `am rank` and `am spawn` for argument and environment
/// errors (clap's own convention).
const EXIT_USAGE: u8 = 2;
/// Exit status of `am rank` when its result did not verify and no launcher
/// collects the result.
const EXIT_NOT_VERIFIED: u8 = 3;

/// The `symmetry am` subcommands.
#[derive(Subcommand, Debug)]
pub enum AmCommand {
    /// Start an SPMD job: N processes (re-executions of this binary) that find each other's endpoints
    /// and run one application with one claim algorithm.
    Spawn(SpawnArgs),
    /// List the applications and the claim algorithms.
    List,
    /// Remove the shared-memory segments of jobs whose launcher is gone.
    Clean,
    /// One rank of a job started by `symmetry am spawn` (internal).
    #[command(hide = true)]
    Rank(RankArgs),
    /// One rank of the `am-clumps` measurement under mpiexec (internal).
    #[command(hide = true)]
    Clumps(ClumpsArgs),
}

/// `symmetry am clumps` (internal; see `kernels::clumps`).
#[derive(Args, Debug, Clone)]
pub struct ClumpsArgs {
    /// Round trips per block.
    #[arg(long, default_value_t = 2000)]
    pub rounds: u32,
    /// Blocks of each measurement.
    #[arg(long, default_value_t = 5)]
    pub blocks: u32,
    /// Short messages per one-way burst.
    #[arg(long, default_value_t = 20000)]
    pub burst: u32,
    /// Bulk messages per bandwidth burst.
    #[arg(long, default_value_t = 500)]
    pub bulk: u32,
    /// The endpoints' bulk block size in bytes (a multiple of 128): every
    /// bulk message is one block.
    #[arg(long, default_value_t = symmetry_am::Config::default().bulk_bytes)]
    pub bulk_bytes: u32,
    /// Where rank 0 writes its results (JSON lines); else standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// The claim algorithm of `am spawn` and `am rank` unless `--algo` names
/// one: the library's default (`rings`: a killed sender costs only its own
/// message, per-sender FIFO, no atomic step per send; the guarantees table
/// of `docs/active-messages.md`).
pub const DEFAULT_ALGO: &str = <symmetry_am::claim::DefaultClaim as symmetry_am::Claim>::NAME;

/// The application and how to run it (shared by `spawn` and `rank`).
#[derive(Args, Debug, Clone)]
pub struct AppArgs {
    /// The application: fft, con-comm, con-comp or sample (LC98 Table 3).
    #[arg(value_parser = parse_app)]
    pub app: App,
    /// Claim algorithm (see `symmetry am list`).
    #[arg(long, default_value = DEFAULT_ALGO, value_parser = parse_algo)]
    pub algo: &'static str,
    /// Problem size: quick (tests, `--quick`) or full.
    #[arg(long, default_value = "full", value_parser = parse_size)]
    pub size: Size,
}

/// `symmetry am spawn`.
#[derive(Args, Debug, Clone)]
pub struct SpawnArgs {
    /// Number of processes (ranks), 1..=64 (default: the cores, 2 to 8).
    #[arg(short = 'n', long = "ranks", value_parser = parse_ranks, default_value_t = default_ranks())]
    pub ranks: u32,
    #[command(flatten)]
    pub app: AppArgs,
    /// Launch with `mpiexec` (needs a build with `--features mpi` and an
    /// MPI installation); ranks on other hosts are reached over MPI. Sets
    /// UCX_MM_FIFO_SIZE=1024 for the ranks unless it is set.
    #[arg(long)]
    pub mpi: bool,
    /// With --mpi: hierarchical (shared memory within a host, MPI between
    /// hosts), mpi (MPI between every pair) or shm (shared memory only).
    #[arg(long, default_value = "hierarchical", value_parser = parse_transport, requires = "mpi")]
    pub transport: &'static str,
    /// With --mpi: split this machine into this many emulated hosts.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64), requires = "mpi")]
    pub hosts: u32,
}

/// The transports of `am spawn --mpi`.
pub const TRANSPORTS: [&str; 3] = ["hierarchical", "mpi", "shm"];

/// Parses a transport name, listing the accepted ones on error.
pub fn parse_transport(s: &str) -> Result<&'static str, String> {
    TRANSPORTS
        .iter()
        .find(|t| **t == s)
        .copied()
        .ok_or_else(|| {
            format!(
                "unknown transport {s:?} (accepted: {})",
                TRANSPORTS.join(", ")
            )
        })
}

/// `symmetry am rank` (internal).
#[derive(Args, Debug, Clone)]
pub struct RankArgs {
    #[command(flatten)]
    pub app: AppArgs,
    /// Directory where this rank writes its result (`rank-R.json`) for the launcher.
    #[arg(long, hide = true)]
    pub result_dir: Option<PathBuf>,
    /// Do not print the rank's line (the launcher reports).
    #[arg(long, hide = true)]
    pub quiet: bool,
}

/// Parses an application name, listing the accepted ones on error.
pub fn parse_app(s: &str) -> Result<App, String> {
    App::from_name(s).ok_or_else(|| {
        format!(
            "unknown application `{s}`; accepted: {}",
            App::ALL.map(App::name).join(", ")
        )
    })
}

/// Parses `quick` or `full`.
pub fn parse_size(s: &str) -> Result<Size, String> {
    match s {
        "quick" => Ok(Size::Quick),
        "full" => Ok(Size::Full),
        _ => Err(format!("unknown size `{s}`; accepted: quick, full")),
    }
}

/// Parses a rank count: 1..=[`MAX_RANKS`].
pub fn parse_ranks(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if n >= 1 && n as usize <= MAX_RANKS => Ok(n),
        Ok(n) => Err(format!(
            "{n} ranks is out of range; accepted: 1 to {MAX_RANKS} processes"
        )),
        Err(_) => Err(format!(
            "`{s}` is not a number of ranks; accepted: 1 to {MAX_RANKS}"
        )),
    }
}

/// The default job size: this machine's cores, at least 2 (so there is
/// communication) and at most 8 (LC98's processors).
pub fn default_ranks() -> u32 {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    cores.clamp(2, 8) as u32
}

/// `key=value` pairs joined by spaces.
fn params_text(params: &[(String, String)]) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `symmetry am ...`.
pub fn main(cmd: AmCommand) -> ExitCode {
    match cmd {
        AmCommand::List => {
            println!("applications (LC98 Table 3):");
            for a in App::ALL {
                println!("  {:<10} {}", a.name(), describe(a));
            }
            println!("claim algorithms (--algo, default {DEFAULT_ALGO}):");
            for n in claim::NAMES {
                println!("  {n}");
            }
            println!("sizes (--size, default full): quick, full");
            ExitCode::SUCCESS
        }
        AmCommand::Clean => {
            let n = job::cleanup_stale();
            println!(
                "removed {n} stale shared-memory segment{} (jobs whose launcher is gone)",
                if n == 1 { "" } else { "s" }
            );
            ExitCode::SUCCESS
        }
        AmCommand::Spawn(args) => spawn_main(&args),
        AmCommand::Rank(args) => rank_main(&args),
        AmCommand::Clumps(args) => clumps_main(&args),
    }
}

/// A short description of an application.
pub fn describe(app: App) -> &'static str {
    match app {
        App::Fft => "3-D FFT: all-to-all bulk transposes scheduled as one-to-one phases",
        App::ConComm => "connected components, communication-bound input",
        App::ConComp => "connected components, computation-bound input",
        App::Sample => "sample sort of 32-bit keys: fine-grained all-to-all",
    }
}

fn spawn_main(args: &SpawnArgs) -> ExitCode {
    let AppArgs { app, algo, size } = args.app;
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: cannot find this program to re-execute it: {e}");
            return ExitCode::FAILURE;
        }
    };
    let launched = if args.mpi {
        if !cfg!(feature = "mpi") {
            eprintln!(
                "error: this symmetry was built without MPI; build it with \
                 `cargo build --release -p symmetry-bench --features mpi` (needs libmpich-dev, \
                 libclang-dev and pkg-config)"
            );
            return ExitCode::from(EXIT_USAGE);
        }
        spawn_app_mpi(
            &exe,
            args.ranks,
            app,
            algo,
            size,
            args.transport,
            args.hosts,
            Duration::from_secs(3600),
        )
    } else {
        spawn_app(&exe, args.ranks, app, algo, size, false)
    };
    let outs = match launched {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let s = summarize(&outs);
    println!(
        "{} with {algo} on {} (size {}): {:.3} ms; {}; checksum {:#018x}; {} messages, {} bulk bytes{}",
        app.name(),
        processes(s.ranks),
        size_name(size),
        s.elapsed.as_secs_f64() * 1e3,
        if s.verified {
            match s.ranks {
                1 => "verified".to_string(),
                n => format!("verified on all {n} ranks"),
            }
        } else {
            format!(
                "NOT VERIFIED on rank{} {}",
                if s.unverified.len() == 1 { "" } else { "s" },
                s.unverified
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        s.checksum,
        s.messages,
        s.bulk_bytes,
        if s.params.is_empty() {
            String::new()
        } else {
            format!("; {}", params_text(&s.params))
        }
    );
    if s.verified {
        ExitCode::SUCCESS
    } else {
        eprintln!("error: the result did not verify (the application's own check)");
        ExitCode::FAILURE
    }
}

fn rank_main(args: &RankArgs) -> ExitCode {
    #[cfg(feature = "mpi")]
    if matches!(Job::from_env(), Ok(None)) && symmetry_am::net::mpi::launched() {
        // The launcher names a failed rank by its pid (written before MPI
        // starts, from the launcher's environment, so a rank that dies in
        // MPI_Init is named too).
        let pid = std::process::id();
        let early = ["PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK"]
            .iter()
            .find_map(|v| std::env::var(v).ok()?.parse::<u32>().ok());
        if let (Some(dir), Some(r)) = (&args.result_dir, early) {
            let _ = std::fs::write(pid_file(dir, r), pid.to_string());
        }
        let mpi = match symmetry_am::net::mpi::Mpi::init() {
            Ok(m) => m,
            Err(e) => {
                eprintln!("error: cannot initialise MPI: {e}");
                return ExitCode::FAILURE;
            }
        };
        match &args.result_dir {
            Some(dir) if early != Some(mpi.rank()) => {
                let _ = std::fs::write(pid_file(dir, mpi.rank()), pid.to_string());
            }
            // mpiexec names a failed process by pid: say which rank it is.
            None if !args.quiet => eprintln!("rank {}/{}: pid {pid}", mpi.rank(), mpi.size()),
            _ => {}
        }
        let code = match mpi.job_from_env() {
            Ok(job) => rank_body(args, &job),
            Err(e) => {
                eprintln!("rank {}/{}: bad MPI job: {e}", mpi.rank(), mpi.size());
                ExitCode::from(EXIT_USAGE)
            }
        };
        if code != ExitCode::SUCCESS {
            // The other ranks may wait for this one forever: end the job,
            // saying first that this rank is the one that failed.
            if let Some(dir) = &args.result_dir {
                let _ = std::fs::write(failed_file(dir, mpi.rank()), "");
            }
            mpi.abort(1);
        }
        // Every endpoint is gone: MPI_Finalize.
        drop(mpi);
        return code;
    }
    let job = match Job::from_env() {
        Ok(Some(j)) => j,
        Ok(None) => {
            eprintln!(
                "error: `symmetry am rank` is one process of a job and needs {}, {} and {} from its launcher \
                 (or, built with the `mpi` feature, an MPI launcher); \
                 start the job with `symmetry am spawn -n N {} --algo {}`",
                job::ENV_JOB,
                job::ENV_RANK,
                job::ENV_SIZE,
                args.app.app.name(),
                args.app.algo,
            );
            return ExitCode::from(EXIT_USAGE);
        }
        Err(e) => {
            eprintln!("error: bad job environment: {e}; start jobs with `symmetry am spawn`");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    rank_body(args, &job)
}

#[cfg(not(feature = "mpi"))]
fn clumps_main(_: &ClumpsArgs) -> ExitCode {
    eprintln!("error: `symmetry am clumps` needs a build with `--features mpi`");
    ExitCode::from(EXIT_USAGE)
}

#[cfg(feature = "mpi")]
fn clumps_main(args: &ClumpsArgs) -> ExitCode {
    use crate::kernels::clumps;
    if !symmetry_am::net::mpi::launched() {
        eprintln!("error: `symmetry am clumps` is one rank of an MPI job: run it under mpiexec");
        return ExitCode::from(EXIT_USAGE);
    }
    let mpi = match symmetry_am::net::mpi::Mpi::init() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: cannot initialise MPI: {e}");
            return ExitCode::FAILURE;
        }
    };
    let plan = clumps::Plan {
        rounds: args.rounds.max(1),
        blocks: args.blocks.max(1),
        burst: args.burst.max(1),
        bulk: args.bulk.max(1),
        bulk_bytes: args.bulk_bytes,
    };
    let result = mpi
        .job_from_env()
        .and_then(|job| clumps::run(&mpi, &job, plan));
    match result {
        Ok(lines) => {
            let text: String = lines.iter().map(|l| l.to_string() + "\n").collect();
            let written = match &args.out {
                Some(path) if !text.is_empty() => {
                    std::fs::write(path, text).map_err(|e| e.to_string())
                }
                Some(_) => Ok(()),
                None => {
                    print!("{text}");
                    Ok(())
                }
            };
            if let Err(e) = written {
                eprintln!("rank {}: cannot write the results: {e}", mpi.rank());
                mpi.abort(1);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rank {}/{}: am clumps failed: {e}", mpi.rank(), mpi.size());
            mpi.abort(1);
        }
    }
}

/// Runs one rank of `job` and reports it.
fn rank_body(args: &RankArgs, job: &Job) -> ExitCode {
    let AppArgs { app, algo, size } = args.app;
    let out = match run_named(algo, app, size, job) {
        Ok(o) => o,
        Err(e) => {
            eprintln!(
                "rank {}/{}: {} with {algo} failed: {e}",
                job.rank,
                job.size,
                app.name()
            );
            return ExitCode::FAILURE;
        }
    };
    if let Some(dir) = &args.result_dir {
        let path = result_file(dir, job.rank);
        if let Err(e) = std::fs::write(&path, encode(job.rank, job.size, algo, app, &out) + "\n") {
            eprintln!(
                "rank {}/{}: cannot write {}: {e}",
                job.rank,
                job.size,
                path.display()
            );
            return ExitCode::FAILURE;
        }
    }
    if !args.quiet {
        println!(
            "rank {}/{}: {} with {algo}: {:.3} ms, {}, checksum {:#018x}, {} messages, {} bulk bytes",
            job.rank,
            job.size,
            app.name(),
            out.elapsed.as_secs_f64() * 1e3,
            if out.verified {
                "verified"
            } else {
                "NOT VERIFIED"
            },
            out.checksum,
            out.messages,
            out.bulk_bytes
        );
    }
    // With a launcher collecting results, it judges verification (a rank
    // exiting non-zero would get its peers killed before they report).
    if out.verified || args.result_dir.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_NOT_VERIFIED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_errors_list_what_is_accepted() {
        assert_eq!(parse_app("con-comm"), Ok(App::ConComm));
        let e = parse_app("fft3").unwrap_err();
        assert!(e.contains("fft, con-comm, con-comp, sample"), "{e}");
        assert_eq!(parse_algo("stamp"), Ok("stamp"));
        let e = parse_algo("mcs").unwrap_err();
        assert!(e.contains("lock-free") && e.contains("pthread"), "{e}");
        assert_eq!(parse_size("quick"), Ok(Size::Quick));
        assert!(parse_size("huge").unwrap_err().contains("quick, full"));
        assert_eq!(parse_ranks("64"), Ok(64));
        assert!(parse_ranks("0").unwrap_err().contains("1 to 64"));
        assert!(parse_ranks("65").is_err());
        assert!(parse_ranks("x").is_err());
        assert!((2..=8).contains(&default_ranks()));
    }
}
