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

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use symmetry_am::{Job, MAX_RANKS, claim, job};
use symmetry_workloads::am_apps::{self, App, AppOut, Size};

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
/// one: `stamp` keeps every guarantee `lock-free` gives (a killed sender
/// costs only its own message), adds per-sender FIFO, and moves a packet's
/// line once per message (the README's table).
pub const DEFAULT_ALGO: &str = "stamp";

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

/// Parses a claim algorithm name (a name of `symmetry_am::claim::NAMES`).
pub fn parse_algo(s: &str) -> Result<&'static str, String> {
    claim::NAMES
        .iter()
        .copied()
        .find(|n| *n == s)
        .ok_or_else(|| {
            format!(
                "unknown claim algorithm `{s}`; accepted: {}",
                claim::NAMES.join(", ")
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

/// The name [`parse_size`] accepts for `size`.
pub fn size_name(size: Size) -> &'static str {
    match size {
        Size::Quick => "quick",
        Size::Full => "full",
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

macro_rules! claim_dispatch {
    ($($name:literal => $ty:ty;)*) => {
        /// Runs `app` as rank `job.rank` with the claim algorithm named
        /// `algo` (monomorphized per algorithm through
        /// `symmetry_am::for_each_claim!`).
        pub fn run_named(algo: &str, app: App, size: Size, job: &Job) -> Result<AppOut, String> {
            let out = match algo {
                $($name => am_apps::run_rank::<$ty>(app, size, job),)*
                _ => return Err(parse_algo(algo).err().unwrap_or_default()),
            };
            out.map_err(|e| e.to_string())
        }
    };
}
symmetry_am::for_each_claim!(claim_dispatch);

/// The file in which rank `rank` leaves its result in `dir`.
pub fn result_file(dir: &Path, rank: u32) -> PathBuf {
    dir.join(format!("rank-{rank}.json"))
}

/// The file in which an MPI rank leaves its pid in `dir`.
pub fn pid_file(dir: &Path, rank: u32) -> PathBuf {
    dir.join(format!("rank-{rank}.pid"))
}

/// The file an MPI rank that failed on its own writes in `dir` before it
/// ends the job with `MPI_Abort` (which has mpiexec kill the other ranks
/// while it still runs).
pub fn failed_file(dir: &Path, rank: u32) -> PathBuf {
    dir.join(format!("rank-{rank}.failed"))
}

/// Names the ranks of the pids that `mpiexec`'s message mentions (Hydra
/// says "PID n RUNNING AT host"), from the pid files in `dir`.
fn ranks_in_message(dir: &Path, n: u32, message: &str) -> Vec<(u32, u32)> {
    (0..n)
        .filter_map(|r| {
            let pid: u32 = std::fs::read_to_string(pid_file(dir, r))
                .ok()?
                .trim()
                .parse()
                .ok()?;
            message.contains(&format!("PID {pid} ")).then_some((r, pid))
        })
        .collect()
}

/// One rank's result as a line of JSON.
pub fn encode(rank: u32, ranks: u32, algo: &str, app: App, out: &AppOut) -> String {
    // Pairs, not an object: the order of the parameters is kept (it is the
    // order of the CSV columns).
    let params: Vec<[&str; 2]> = out.params.iter().map(|(k, v)| [k.as_str(), v]).collect();
    json!({
        "rank": rank,
        "ranks": ranks,
        "app": app.name(),
        "algo": algo,
        "elapsed_ns": out.elapsed.as_nanos() as u64,
        "verified": out.verified,
        // As a string: JSON numbers lose u64 precision in many readers.
        "checksum": format!("{:#018x}", out.checksum),
        "messages": out.messages,
        "bulk_bytes": out.bulk_bytes,
        "params": params,
    })
    .to_string()
}

/// Reads a line written by [`encode`]: the rank and its result.
pub fn decode(line: &str) -> Result<(u32, AppOut), String> {
    let v: Value = serde_json::from_str(line.trim()).map_err(|e| format!("bad result: {e}"))?;
    let u = |k: &str| {
        v.get(k)
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("result lacks the number `{k}`"))
    };
    let checksum = v
        .get("checksum")
        .and_then(Value::as_str)
        .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .ok_or("result lacks a hex `checksum`")?;
    let params = v
        .get("params")
        .and_then(Value::as_array)
        .ok_or("result lacks `params`")?
        .iter()
        .map(|pair| match pair.as_array().map(Vec::as_slice) {
            Some([Value::String(k), Value::String(x)]) => Ok((k.clone(), x.clone())),
            _ => Err(format!("bad parameter {pair} (expected [key, value])")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((
        u32::try_from(u("rank")?).map_err(|_| "rank out of range")?,
        AppOut {
            elapsed: Duration::from_nanos(u("elapsed_ns")?),
            verified: v
                .get("verified")
                .and_then(Value::as_bool)
                .ok_or("result lacks `verified`")?,
            checksum,
            messages: u("messages")?,
            bulk_bytes: u("bulk_bytes")?,
            params,
        },
    ))
}

/// What the ranks of one job measured, combined.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSummary {
    /// The slowest rank's elapsed time (they agree up to barrier skew).
    pub elapsed: Duration,
    /// Whether every rank's part verified.
    pub verified: bool,
    /// Ranks whose part did not verify.
    pub unverified: Vec<u32>,
    /// Rank 0's checksum.
    pub checksum: u64,
    /// Messages sent, all ranks.
    pub messages: u64,
    /// Bulk bytes sent, all ranks.
    pub bulk_bytes: u64,
    /// Rank 0's input parameters.
    pub params: Vec<(String, String)>,
    /// Number of ranks.
    pub ranks: u32,
}

/// Combines the results of ranks `0..outs.len()` (in rank order).
pub fn summarize(outs: &[AppOut]) -> JobSummary {
    JobSummary {
        elapsed: outs.iter().map(|o| o.elapsed).max().unwrap_or_default(),
        verified: !outs.is_empty() && outs.iter().all(|o| o.verified),
        unverified: (0..)
            .zip(outs)
            .filter(|(_, o)| !o.verified)
            .map(|(r, _)| r)
            .collect(),
        checksum: outs.first().map_or(0, |o| o.checksum),
        messages: outs.iter().map(|o| o.messages).sum(),
        bulk_bytes: outs.iter().map(|o| o.bulk_bytes).sum(),
        params: outs.first().map(|o| o.params.clone()).unwrap_or_default(),
        ranks: outs.len() as u32,
    }
}

/// `1 process`, `2 processes`.
fn processes(n: u32) -> String {
    format!("{n} process{}", if n == 1 { "" } else { "es" })
}

/// `key=value` pairs joined by spaces.
fn params_text(params: &[(String, String)]) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Set by the `symmetry` binary's `main`: this process's executable has
/// the `am rank` subcommand.
static HARNESS_BINARY: AtomicBool = AtomicBool::new(false);

/// Declares that this process is the `symmetry` binary, whose executable
/// can be re-executed as `symmetry am rank ...` (called first thing by its
/// `main`; a test binary or another program linking this library never
/// calls it).
pub fn mark_harness_binary() {
    HARNESS_BINARY.store(true, Ordering::Relaxed);
}

/// The path of this process's executable if it is the `symmetry` harness
/// (see [`mark_harness_binary`]), else `None`: ranks then run as threads.
pub fn symmetry_exe() -> Option<PathBuf> {
    if !HARNESS_BINARY.load(Ordering::Relaxed) {
        return None;
    }
    std::env::current_exe().ok()
}

/// A fresh private directory for the ranks' result files (mode 0700, a
/// name no other user can predict or create first), removed when dropped.
fn scratch_dir() -> Result<crate::harness::ScratchDir, String> {
    crate::harness::ScratchDir::new("symmetry-am")
}

/// Runs `app` with `algo` as a job of `n` processes of `exe` (a
/// `symmetry` binary) and collects every rank's result. Fails, naming the
/// failed ranks, if a rank exited non-zero or left no result; the job's
/// segments are removed in every case.
pub fn spawn_app(
    exe: &Path,
    n: u32,
    app: App,
    algo: &str,
    size: Size,
    quiet: bool,
) -> Result<Vec<AppOut>, String> {
    let scratch = scratch_dir()?;
    let dir = scratch.path();
    let mut args: Vec<OsString> = ["am", "rank", app.name(), "--algo", algo, "--size"]
        .iter()
        .map(OsString::from)
        .collect();
    args.push(size_name(size).into());
    args.push("--result-dir".into());
    args.push(dir.as_os_str().to_owned());
    if quiet {
        args.push("--quiet".into());
    }
    let what = format!("{} with {algo} on {}", app.name(), processes(n));
    let result = job::spawn(n, exe, &args)
        .map_err(|e| format!("cannot run the job: {e}"))
        .and_then(|outcome| {
            if !outcome.success() {
                let failed = outcome.statuses.iter().filter(|s| !s.success()).count();
                return Err(format!(
                    "{what} failed (job {}): {}{}; the job's shared-memory segments were removed{}",
                    outcome.job,
                    outcome.failures(),
                    if failed > 1 {
                        " (once a rank fails, the launcher kills the others)"
                    } else {
                        ""
                    },
                    match outcome.cleaned {
                        0 => String::new(),
                        c => format!(" ({c} left behind by the failed ranks)"),
                    }
                ));
            }
            collect(dir, n, &what)
        });
    drop(scratch);
    result
}

/// The results that ranks `0..n` left in `dir`.
fn collect(dir: &Path, n: u32, what: &str) -> Result<Vec<AppOut>, String> {
    (0..n)
        .map(|r| {
            let path = result_file(dir, r);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("{what}: rank {r} exited 0 but left no result ({e})"))?;
            let (got, out) = decode(&text).map_err(|e| format!("{what}: rank {r}: {e}"))?;
            if got != r {
                return Err(format!("{what}: file of rank {r} holds rank {got}"));
            }
            Ok(out)
        })
        .collect()
}

/// The `mpiexec` that `am spawn --mpi` runs (`$MPIEXEC`, else the one on
/// the `PATH`).
pub fn mpiexec() -> OsString {
    std::env::var_os("MPIEXEC").unwrap_or_else(|| "mpiexec".into())
}

/// UCX's shared-memory FIFO, in messages per receiving process, that the
/// `mpiexec` jobs of [`mpiexec_job`] ask for unless `UCX_MM_FIFO_SIZE` is
/// set already.
///
/// Debian's MPICH carries messages between processes of one machine
/// through UCX's shared-memory FIFOs, 64 messages each by default. Past
/// that a send waits in the sender's pending queue until the receiver has
/// run and drained its FIFO and the sender has run again; with more ranks
/// than cores, that is a context switch every few messages, which makes
/// the message-heavy applications (`con-comm`, `sample`) far slower over
/// `mpi` than over `shm`. The variable means nothing to MPI builds
/// without UCX.
pub const UCX_FIFO: &str = "1024";

/// `mpiexec -n n`, with [`UCX_FIFO`] unless the caller's environment sets
/// `UCX_MM_FIFO_SIZE`.
pub fn mpiexec_job(n: u32) -> std::process::Command {
    let mut cmd = std::process::Command::new(mpiexec());
    cmd.arg("-n").arg(n.to_string());
    if std::env::var_os("UCX_MM_FIFO_SIZE").is_none() {
        cmd.env("UCX_MM_FIFO_SIZE", UCX_FIFO);
    }
    cmd
}

/// Runs `app` with `algo` as an MPI job of `n` processes of `exe` under
/// `mpiexec`, over `transport` with this machine split into `hosts`
/// emulated hosts, and collects every rank's result. A rank that fails
/// makes `mpiexec` end the job; its message (naming the rank) is in the
/// error.
#[allow(clippy::too_many_arguments)]
pub fn spawn_app_mpi(
    exe: &Path,
    n: u32,
    app: App,
    algo: &str,
    size: Size,
    transport: &str,
    hosts: u32,
    timeout: Duration,
) -> Result<Vec<AppOut>, String> {
    let scratch = scratch_dir()?;
    let dir = scratch.path();
    let what = format!(
        "{} with {algo} on {} under mpiexec ({transport}, {hosts} host{})",
        app.name(),
        processes(n),
        if hosts == 1 { "" } else { "s" }
    );
    let mut cmd = mpiexec_job(n);
    cmd.arg(exe)
        .args([
            "am",
            "rank",
            app.name(),
            "--algo",
            algo,
            "--size",
            size_name(size),
        ])
        .arg("--result-dir")
        .arg(dir)
        .arg("--quiet")
        .env("SYMMETRY_AM_TRANSPORT", transport)
        .env("SYMMETRY_AM_HOSTS", hosts.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // Once one rank dies, mpiexec kills the others (with or without
    // `-disable-auto-cleanup`), and it names one of them by pid, not
    // always the first to die: the watch names the first itself.
    //
    // A rank killed by a signal: it can still be running its exit
    // (freeing its memory) when the ranks killed after it are gone, so
    // "gone" alone misorders them. The kernel marks a process exiting
    // (`PF_EXITING`) before it closes its files, and mpiexec reacts to
    // that close, so the first rank is marked before any rank mpiexec
    // kills. A rank that fails on its own writes its `failed_file`
    // before `MPI_Abort` has the others killed.
    //
    // A scan reads the ranks one after another, so the first may be
    // marked just after the scan passed it: a second scan, which starts
    // after the first has seen a rank ending, sees it. The named ranks
    // are the union of the two scans: the first always, sometimes others
    // too. The watch runs once more after mpiexec has ended, for a job
    // that ended between two of its calls.
    let mut pids: Vec<Option<u32>> = vec![None; n as usize];
    let mut first_gone: Vec<(u32, u32)> = Vec::new();
    let mut watch = || {
        if !first_gone.is_empty() {
            return;
        }
        for (r, slot) in (0..n).zip(pids.iter_mut()) {
            if slot.is_none() {
                *slot = std::fs::read_to_string(pid_file(dir, r))
                    .ok()
                    .and_then(|t| t.trim().parse().ok());
            }
        }
        // A rank that ended after writing its result ended well.
        let scan = || -> Vec<(u32, u32)> {
            (0..n)
                .zip(&pids)
                .filter_map(|(r, p)| Some((r, (*p)?)))
                .filter(|&(r, pid)| {
                    (ending(pid) || failed_file(dir, r).exists()) && !result_file(dir, r).exists()
                })
                .collect()
        };
        let once = scan();
        if !once.is_empty() {
            first_gone = once;
            for x in scan() {
                if !first_gone.contains(&x) {
                    first_gone.push(x);
                }
            }
        }
    };
    let result = run_bounded(cmd, timeout, &mut watch)
        .map_err(|e| {
            // Name the ranks the watch saw ending; if it saw none, the
            // rank whose pid mpiexec's message names (one of the ranks
            // that ended badly, not always the first).
            let mut named = if first_gone.is_empty() {
                ranks_in_message(dir, n, &e)
            } else {
                first_gone.clone()
            };
            named.sort_unstable();
            let named: Vec<String> = named
                .iter()
                .map(|(r, pid)| format!("rank {r} (pid {pid})"))
                .collect();
            match named.len() {
                0 => format!("{what} failed: {e}"),
                1 => format!("{what} failed: {} ended first: {e}", named[0]),
                _ => format!(
                    "{what} failed: one of {} ended first: {e}",
                    named.join(", ")
                ),
            }
        })
        .and_then(|()| collect(dir, n, &what));
    drop(scratch);
    result
}

/// Whether process `pid` has ended or is ending: gone, a zombie, or
/// marked exiting by the kernel (`PF_EXITING` in the flags of
/// `/proc/PID/stat`, set as it starts to exit, before it frees its memory
/// and closes its files).
fn ending(pid: u32) -> bool {
    /// The kernel's `PF_EXITING` task flag (`include/linux/sched.h`).
    const PF_EXITING: u64 = 0x4;
    if !symmetry_am::segment::pid_alive(pid) {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| stat_flags(&s))
        .is_some_and(|f| f & PF_EXITING != 0)
}

/// The `flags` field of a `/proc/PID/stat` line: after the command name
/// (in parentheses, and itself free to hold spaces and parentheses) come
/// state, ppid, pgrp, session, tty_nr, tpgid, flags.
fn stat_flags(stat: &str) -> Option<u64> {
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(6)?
        .parse()
        .ok()
}

/// Runs `cmd` (stdout and stderr piped) to its end, calling `watch` every
/// 2 ms, or kills it after `timeout`; an error holds the
/// exit status and the end of its output (`mpiexec` reports a failed
/// process on its standard output).
pub fn run_bounded(
    mut cmd: std::process::Command,
    timeout: Duration,
    watch: &mut dyn FnMut(),
) -> Result<(), String> {
    use std::io::Read;
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    fn drain(mut from: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(f) = from.as_mut() {
                let _ = f.read_to_string(&mut s);
            }
            s
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let start = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => {
                watch();
                break Some(st);
            }
            Ok(None) if start.elapsed() < timeout => {
                watch();
                std::thread::sleep(Duration::from_millis(2));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let stderr = err.join().unwrap_or_default() + &out.join().unwrap_or_default();
    let tail: String = {
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(12)..].join("\n")
    };
    match status {
        Some(st) if st.success() => Ok(()),
        Some(st) => Err(format!("{st}; its output ends:\n{tail}")),
        None => Err(format!(
            "no end after {} s, killed; its output ends:\n{tail}",
            timeout.as_secs()
        )),
    }
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
    fn stat_lines_give_their_flags_whatever_the_command_name() {
        let line = |comm: &str, flags: u32| {
            format!("4242 ({comm}) R 1 4242 4242 0 -1 {flags} 120 0 0 0 5 1 0 0 20 0 3 0 99")
        };
        assert_eq!(stat_flags(&line("symmetry", 4_210_756)), Some(4_210_756));
        assert_eq!(stat_flags(&line("a) (b c", 4_210_752)), Some(4_210_752));
        assert_eq!(stat_flags(&line(") R 1 2 3 4 5 6 7", 4)), Some(4));
        assert_eq!(stat_flags("4242 (x) R 1 2"), None);
        assert_eq!(stat_flags(""), None);
    }

    #[test]
    fn a_process_is_ending_once_killed_before_it_is_reaped() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let pid = child.id();
        assert!(!ending(pid), "a sleeping process is not ending");
        child.kill().expect("kill");
        // Not reaped yet: a zombie, or still exiting, counts as ending.
        let start = std::time::Instant::now();
        while !ending(pid) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "never seen ending"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        child.wait().expect("reaped");
        assert!(ending(pid), "a reaped process is gone");
    }

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

    #[test]
    fn results_round_trip_through_json() {
        let out = AppOut {
            elapsed: Duration::from_nanos(123_456_789),
            verified: true,
            checksum: u64::MAX - 7,
            messages: 42,
            bulk_bytes: 8192,
            params: vec![("n".into(), "64".into()), ("keys".into(), "1000".into())],
        };
        let line = encode(1, 2, "stamp", App::Sample, &out);
        assert!(!line.contains('\n'));
        assert_eq!(decode(&line), Ok((1, out.clone())));
        assert!(decode("{}").is_err());
        assert!(decode("not json").is_err());
        let s = summarize(&[
            out.clone(),
            AppOut {
                verified: false,
                elapsed: Duration::from_millis(200),
                ..out
            },
        ]);
        assert!(!s.verified);
        assert_eq!(s.unverified, vec![1]);
        assert_eq!(s.elapsed, Duration::from_millis(200));
        assert_eq!(s.messages, 84);
        assert_eq!(s.ranks, 2);
    }

    #[test]
    fn every_registry_name_dispatches() {
        // An unknown name is refused before any job is touched.
        let job = Job {
            name: "unused".into(),
            rank: 0,
            size: 1,
            timeout: Duration::from_millis(1),
            net: None,
        };
        assert!(
            run_named("nope", App::Fft, Size::Quick, &job)
                .unwrap_err()
                .contains("accepted")
        );
        for n in claim::NAMES {
            assert_eq!(parse_algo(n), Ok(*n));
        }
    }
}
