//! SPMD jobs: N ranks that find each other's endpoints by name.
//!
//! A job has a name (`<launcher pid>-<128 random bits>`), which is its
//! secret: rank `r`'s segment is `/symmetry-am.<launcher pid>-<tag>.<r>`,
//! where `<tag>` is a keyed pseudo-random function of `r` under the name
//! ([`segment_name`]). `/dev/shm` is listable by every user, so once rank
//! 0's segment exists its name is public; the other ranks' names still
//! cannot be derived from it, and another user's process cannot create
//! one first to deny the job (an `O_EXCL` create would refuse it). The
//! name reaches the ranks only through their environment ([`ENV_JOB`]),
//! which `/proc/PID/environ` shows only to the same user (and root),
//! never through a command line. A process of the same user can still do
//! anything: read the name there, create or write the segments, or ptrace
//! the ranks; the layer keeps its memory accesses in bounds and reports
//! errors against any bytes such a process writes, but does not protect a
//! job from its own user.
//!
//! Ranks are processes started by [`spawn`] (the launcher behind
//! `symmetry am spawn -n N APP`, which re-executes a program with the rank
//! in its environment) or threads of one process started by
//! [`run_threads`] (for tests: the segments and the protocol are the same;
//! only dead-process detection needs processes).
//!
//! No segment outlives its job: an endpoint unlinks its name when it is
//! dropped, the launcher unlinks whatever a crashed rank left, children
//! die with their launcher (`PR_SET_PDEATHSIG`), and [`cleanup_stale`]
//! removes the segments of jobs whose launcher is gone.

use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use crate::error::AmError;
use crate::net::Net;
use crate::segment::{pid_alive, segment_name};

/// Environment variable holding the job name.
pub const ENV_JOB: &str = "SYMMETRY_AM_JOB";
/// Environment variable holding the rank.
pub const ENV_RANK: &str = "SYMMETRY_AM_RANK";
/// Environment variable holding the number of ranks.
pub const ENV_SIZE: &str = "SYMMETRY_AM_SIZE";

const SHM_DIR: &str = "/dev/shm";
const PREFIX: &str = "symmetry-am.";

/// One rank's view of its job.
///
/// A rank started by [`spawn`] finds its job in the environment
/// ([`Job::from_env`]); one of [`run_threads`] is handed it. To join a job
/// by hand, build one with [`Job::new`]:
///
/// ```
/// use std::time::Duration;
/// use symmetry_am::{Config, Endpoint, Job, claim::Stamp};
///
/// // A job of one rank, under a fresh name.
/// let job = Job::new(Job::new_name(), 0, 1).with_timeout(Duration::from_secs(5));
/// assert_eq!((job.rank, job.size), (0, 1));
/// let ep = Endpoint::<Stamp>::join(&job, &Config::default(), ()).unwrap();
/// ep.finish().unwrap();
/// ```
///
/// `Job` is `#[non_exhaustive]`, so that a field can be added without
/// breaking users: outside this crate its fields can be read and
/// assigned, but a struct literal does not compile.
///
/// ```compile_fail,E0639
/// use std::time::Duration;
/// use symmetry_am::Job;
///
/// // error[E0639]: cannot create non-exhaustive struct using struct expression
/// let job = Job {
///     name: Job::new_name(),
///     rank: 0,
///     size: 1,
///     timeout: Duration::from_secs(30),
///     net: None,
/// };
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Job {
    /// Job name (part of every segment name).
    pub name: String,
    /// This rank.
    pub rank: u32,
    /// Number of ranks.
    pub size: u32,
    /// How long to wait for the other ranks' segments to appear.
    pub timeout: Duration,
    /// The ranks' hosts and the transport between hosts; `None`: every
    /// rank on this host, shared memory only (see [`crate::net`]).
    pub net: Option<Net>,
}

impl Job {
    /// How long [`Job::new`] lets a rank wait for the other ranks'
    /// segments.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

    /// Rank `rank` of a job of `size` ranks named `name`, all on this host
    /// (no [`Net`]), waiting up to [`Job::DEFAULT_TIMEOUT`] for the other
    /// ranks. Every rank must use the same `name`, e.g. one from
    /// [`Job::new_name`]; ranks and sizes are checked when the job is
    /// joined.
    ///
    /// A name is for one run. A run under the name of an earlier one whose
    /// segments are still there (it crashed and nobody ran
    /// [`cleanup_stale`], or one of its ranks is between its close and the
    /// removal of its name) can map that run's segment for a rank before
    /// the new rank replaces it, and then reports the live rank as dead or
    /// closed. [`Job::new_name`] gives a fresh name each run.
    pub fn new(name: impl Into<String>, rank: u32, size: u32) -> Job {
        Job {
            name: name.into(),
            rank,
            size,
            timeout: Self::DEFAULT_TIMEOUT,
            net: None,
        }
    }

    /// The same job as another rank.
    #[must_use]
    pub fn with_rank(mut self, rank: u32) -> Job {
        self.rank = rank;
        self
    }

    /// Waits up to `timeout` for the other ranks' segments.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Job {
        self.timeout = timeout;
        self
    }

    /// Spreads the ranks over hosts as `net` says (see [`crate::net`]).
    #[must_use]
    pub fn with_net(mut self, net: Net) -> Job {
        self.net = Some(net);
        self
    }

    /// The name of this rank's shared-memory group: the job's name, and
    /// with ranks on several hosts, the host's number after it (emulated
    /// hosts of one machine must not share segment names).
    pub fn shm_name(&self) -> String {
        match &self.net {
            Some(net) if net.host_count() > 1 => {
                let host = net.hosts().get(self.rank as usize).copied().unwrap_or(0);
                format!("{}-h{host}", self.name)
            }
            _ => self.name.clone(),
        }
    }

    /// A fresh job name owned by this process: `<pid>-<128 random bits>`.
    /// The random part comes from the kernel (`getrandom`) and is the
    /// job's secret: it keys every segment name ([`segment_name`]) and
    /// appears in none, so another process of the machine can guess
    /// neither the next job's names nor, from one rank's name, another
    /// rank's. The pid is public and lets [`cleanup_stale`] tell a dead
    /// launcher's jobs.
    pub fn new_name() -> String {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let mut r = [0u8; 16];
        // SAFETY: `r` is valid for 16 bytes of writes.
        let got = unsafe { libc::getrandom(r.as_mut_ptr().cast(), r.len(), 0) };
        let random = if got == r.len() as isize {
            u128::from_ne_bytes(r)
        } else {
            // No getrandom (very old kernels): the clock and a counter
            // still keep names unique, if guessable.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            nanos ^ (u128::from(NEXT.fetch_add(1, Ordering::Relaxed)) << 96)
        };
        format!("{}-{random:032x}", std::process::id())
    }

    /// The job described by the environment, if this process is a rank.
    pub fn from_env() -> Result<Option<Job>, AmError> {
        let Some(name) = std::env::var_os(ENV_JOB) else {
            return Ok(None);
        };
        let name = name.into_string().map_err(|_| AmError::Config {
            detail: format!("{ENV_JOB} is not UTF-8"),
        })?;
        if name.is_empty() || name.contains(['/', '.']) {
            return Err(AmError::Config {
                detail: format!(
                    "{ENV_JOB}={name:?} (accepted: a non-empty name without '/' or '.')"
                ),
            });
        }
        let num = |var: &str| -> Result<u32, AmError> {
            let v = std::env::var(var).map_err(|_| AmError::Config {
                detail: format!("{ENV_JOB} is set but {var} is not"),
            })?;
            v.parse().map_err(|_| AmError::Config {
                detail: format!("{var}={v:?} is not a number"),
            })
        };
        let rank = num(ENV_RANK)?;
        let size = num(ENV_SIZE)?;
        if size == 0 || rank >= size || size as usize > crate::MAX_RANKS {
            return Err(AmError::Config {
                detail: format!(
                    "rank {rank} of {size} (accepted: rank < size <= {})",
                    crate::MAX_RANKS
                ),
            });
        }
        Ok(Some(Job::new(name, rank, size)))
    }
}

/// Runs `f` on `n` threads, each a rank of a fresh job; returns the ranks'
/// results in rank order. Segments left by a rank that panicked or failed
/// are removed before returning.
pub fn run_threads<R, F>(n: u32, f: F) -> Vec<R>
where
    R: Send,
    F: Fn(Job) -> R + Sync,
{
    let name = Job::new_name();
    let out = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|rank| {
                let job = Job::new(name.clone(), rank, n);
                let f = &f;
                s.spawn(move || f(job))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    cleanup_job(&name);
    out
}

/// How each rank of a spawned job ended.
#[derive(Debug)]
#[non_exhaustive]
pub struct SpawnOutcome {
    /// The job name.
    pub job: String,
    /// Exit status per rank.
    pub statuses: Vec<ExitStatus>,
    /// Segments the launcher had to remove (left by crashed ranks).
    pub cleaned: usize,
}

impl SpawnOutcome {
    /// Whether every rank exited with status 0.
    pub fn success(&self) -> bool {
        self.statuses.iter().all(ExitStatus::success)
    }

    /// A one-line description of the failed ranks.
    pub fn failures(&self) -> String {
        self.statuses
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.success())
            .map(|(r, s)| match (s.code(), s.signal()) {
                (Some(c), _) => format!("rank {r} exited with status {c}"),
                (None, Some(sig)) => format!("rank {r} was killed by signal {sig}"),
                _ => format!("rank {r} failed"),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Starts `n` processes running `program args`, each with [`ENV_JOB`],
/// [`ENV_RANK`] and [`ENV_SIZE`] set, and waits for them. When a rank
/// fails (non-zero exit or a signal), the others are killed: an SPMD
/// program cannot finish without all its ranks. Then the job's segments
/// are removed, whatever state the ranks left them in.
pub fn spawn(n: u32, program: &Path, args: &[OsString]) -> Result<SpawnOutcome, AmError> {
    if n == 0 || n as usize > crate::MAX_RANKS {
        return Err(AmError::Config {
            detail: format!("-n {n} (accepted: 1..={})", crate::MAX_RANKS),
        });
    }
    cleanup_stale();
    let job = Job::new_name();
    let mut children: Vec<Option<Child>> = Vec::new();
    for rank in 0..n {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env(ENV_JOB, &job)
            .env(ENV_RANK, rank.to_string())
            .env(ENV_SIZE, n.to_string());
        // SAFETY: prctl is async-signal-safe; it only sets this child's
        // parent-death signal, so a killed launcher takes its ranks along.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                Ok(())
            });
        }
        match cmd.spawn() {
            Ok(c) => children.push(Some(c)),
            Err(e) => {
                kill_all(&mut children);
                cleanup_job(&job);
                return Err(AmError::Io {
                    what: format!("starting rank {rank}: {}", program.display()),
                    source: e,
                });
            }
        }
    }
    let mut statuses: Vec<Option<ExitStatus>> = vec![None; n as usize];
    let mut failed = false;
    while statuses.iter().any(Option::is_none) {
        let mut progressed = false;
        for (r, slot) in children.iter_mut().enumerate() {
            if let Some(child) = slot {
                match child.try_wait() {
                    Ok(Some(st)) => {
                        statuses[r] = Some(st);
                        *slot = None;
                        progressed = true;
                        failed |= !st.success();
                    }
                    Ok(None) => {}
                    Err(e) => {
                        kill_all(&mut children);
                        cleanup_job(&job);
                        return Err(AmError::Io {
                            what: format!("waiting for rank {r}"),
                            source: e,
                        });
                    }
                }
            }
        }
        if failed {
            for (r, slot) in children.iter_mut().enumerate() {
                if let Some(child) = slot.take() {
                    let _ = child_kill(child).map(|st| statuses[r] = Some(st));
                }
            }
        }
        if !progressed {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let cleaned = cleanup_job(&job);
    Ok(SpawnOutcome {
        job,
        statuses: statuses
            .into_iter()
            .map(|s| s.unwrap_or_else(|| ExitStatus::from_raw(1)))
            .collect(),
        cleaned,
    })
}

fn child_kill(mut child: Child) -> std::io::Result<ExitStatus> {
    let _ = child.kill();
    child.wait()
}

fn kill_all(children: &mut [Option<Child>]) {
    for c in children.iter_mut().filter_map(Option::take) {
        let _ = child_kill(c);
    }
}

/// Names (without the leading `/`) of the segments in `/dev/shm` that
/// belong to this library.
fn list_segments() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(SHM_DIR) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(PREFIX))
        .collect()
}

/// Removes every segment of `job` (a job's name or a host's
/// [`Job::shm_name`]); returns how many there were.
pub fn cleanup_job(job: &str) -> usize {
    job_segments(job)
        .into_iter()
        .filter(|n| crate::segment::unlink(&format!("/{n}")).is_ok())
        .count()
}

/// Removes the segments nobody will use again; returns how many:
///
/// * every endpoint segment of this user whose creating process has died,
///   whatever its job's name (a rank killed in a job started under a
///   custom name leaves one);
/// * every segment of a job named `<pid>-...` ([`Job::new_name`]) whose
///   launcher `pid` has exited, initialized or not (a launcher killed while
///   its ranks were still creating theirs).
pub fn cleanup_stale() -> usize {
    list_segments()
        .into_iter()
        .filter(|n| {
            let job = &n[PREFIX.len()..];
            let launcher = job.split('-').next().and_then(|p| p.parse::<u32>().ok());
            launcher.is_some_and(|p| !pid_alive(p)) || crate::segment::is_stale(n)
        })
        .filter(|n| crate::segment::unlink(&format!("/{n}")).is_ok())
        .count()
}

/// Segments of `job` (a job's name or a host's [`Job::shm_name`]) that
/// exist now, without the leading `/` (for tests and diagnostics): the
/// names of ranks `0..MAX_RANKS` that are in `/dev/shm`.
pub fn job_segments(job: &str) -> Vec<String> {
    let names: HashSet<String> = (0..crate::MAX_RANKS as u32)
        .map(|r| segment_name(job, r)[1..].to_string())
        .collect();
    list_segments()
        .into_iter()
        .filter(|n| names.contains(n))
        .collect()
}

/// Waits up to `timeout` for `pid` to be gone.
pub fn wait_dead(pid: u32, timeout: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if !pid_alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    !pid_alive(pid)
}
