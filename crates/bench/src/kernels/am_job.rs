//! The SPMD job launcher of the shared-memory Active Messages
//! applications, as library code: `symmetry am spawn` (the CLI,
//! `cli::am`) and the `am-apps` and `am-clumps` experiments start their
//! jobs here, so the experiments' numbers come from separate processes, as
//! LC98's did.
//!
//! A job is `n` re-executions of the `symmetry` binary as `symmetry am rank
//! APP ...` ([`spawn_app`], through [`symmetry_am::job::spawn`]; or under
//! `mpiexec`, [`spawn_app_mpi`]). Ranks hand their results to the launcher
//! through a private directory: one small JSON file per rank ([`encode`],
//! [`decode`]); [`summarize`] combines them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use symmetry_am::{Job, claim, job};
use symmetry_workloads::am_apps::{self, App, AppOut, Size};

use symmetry_locks::platform::proc::{self, Stat};

use crate::scratch::ScratchDir;

/// Parses a claim algorithm name (a name of `symmetry_am::claim::NAMES`).
pub fn parse_algo(s: &str) -> Result<&'static str, String> {
    claim::NAMES
        .iter()
        .copied()
        .find(|n| *n == s)
        .ok_or_else(|| unknown_algo(s))
}

/// The error for a claim algorithm name that is not in
/// `symmetry_am::claim::NAMES`, listing the accepted ones.
pub fn unknown_algo(s: &str) -> String {
    format!(
        "unknown claim algorithm `{s}`; accepted: {}",
        claim::NAMES.join(", ")
    )
}

/// The name of `size` on the command line (`--size quick|full`).
pub fn size_name(size: Size) -> &'static str {
    match size {
        Size::Quick => "quick",
        Size::Full => "full",
    }
}

macro_rules! claim_dispatch {
    ($($name:literal => $ty:ty;)*) => {
        /// Runs `app` as rank `job.rank` with the claim algorithm named
        /// `algo` (monomorphized per algorithm through
        /// `symmetry_am::for_each_claim!`).
        pub fn run_named(algo: &str, app: App, size: Size, job: &Job) -> Result<AppOut, String> {
            let out = match algo {
                $($name => am_apps::run_rank::<$ty>(app, size, job),)*
                _ => return Err(unknown_algo(algo)),
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

/// One rank's result as the launcher reads it back: a line of JSON.
#[derive(Serialize, Deserialize)]
struct RankResult {
    rank: u32,
    ranks: u32,
    app: String,
    algo: String,
    elapsed_ns: u64,
    verified: bool,
    /// As a hex string: JSON numbers lose u64 precision in many readers.
    #[serde(with = "hex")]
    checksum: u64,
    messages: u64,
    bulk_bytes: u64,
    /// Pairs, not an object: the order of the parameters is kept (it is
    /// the order of the CSV columns).
    params: Vec<(String, String)>,
}

/// A `u64` as `"0x…"` (16 hex digits) in JSON.
mod hex {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub(super) fn serialize<S: Serializer>(x: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{x:#018x}"))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let s = String::deserialize(d)?;
        u64::from_str_radix(s.trim_start_matches("0x"), 16)
            .map_err(|_| D::Error::custom(format!("`{s}` is not a hex checksum")))
    }
}

/// One rank's result as a line of JSON.
pub fn encode(rank: u32, ranks: u32, algo: &str, app: App, out: &AppOut) -> String {
    let r = RankResult {
        rank,
        ranks,
        app: app.name().to_string(),
        algo: algo.to_string(),
        elapsed_ns: out.elapsed.as_nanos() as u64,
        verified: out.verified,
        checksum: out.checksum,
        messages: out.messages,
        bulk_bytes: out.bulk_bytes,
        params: out.params.clone(),
    };
    serde_json::to_string(&r).expect("a rank result serializes")
}

/// Reads a line written by [`encode`]: the rank and its result.
pub fn decode(line: &str) -> Result<(u32, AppOut), String> {
    let r: RankResult =
        serde_json::from_str(line.trim()).map_err(|e| format!("bad result: {e}"))?;
    Ok((
        r.rank,
        AppOut {
            elapsed: Duration::from_nanos(r.elapsed_ns),
            verified: r.verified,
            checksum: r.checksum,
            messages: r.messages,
            bulk_bytes: r.bulk_bytes,
            params: r.params,
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
pub fn processes(n: u32) -> String {
    format!("{n} process{}", if n == 1 { "" } else { "es" })
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
fn scratch_dir() -> Result<ScratchDir, String> {
    ScratchDir::new("symmetry-am")
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
    !proc::alive(pid) || Stat::of(pid).is_some_and(|s| s.exiting())
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let job = Job::new("unused", 0, 1).with_timeout(Duration::from_millis(1));
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
