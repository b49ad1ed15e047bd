//! What the process tests share: the `am-selftest` rank program, its
//! queue sizes, and a child rank driven through its stdin and stdout.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use symmetry_am::{Config, Job, job};

pub(crate) const SELFTEST: &str = env!("CARGO_BIN_EXE_am-selftest");

/// The queue sizes of `am-selftest` (a test that is a rank must agree).
pub(crate) const CFG: Config = Config::new()
    .with_packets(4)
    .with_bulk_blocks(2)
    .with_bulk_bytes(1024);

/// How long an open waits for a segment that will never be right (the
/// outcome does not depend on it: nothing else creates these names).
pub(crate) const SHORT: Duration = Duration::from_millis(20);

/// Hang guard for anything that waits on another process.
pub(crate) const GUARD: Duration = Duration::from_secs(60);

/// A hang guard that follows progress, not the wall clock: a wait is
/// stuck only when the count it watches has not moved for [`GUARD`]. On
/// a busy machine (more runnable threads than cores) a run may take many
/// times its idle time without being stuck.
#[derive(Debug)]
pub(crate) struct Stall {
    last: u64,
    since: Instant,
}

impl Stall {
    /// A guard that has seen no progress yet.
    pub(crate) fn new() -> Stall {
        Stall {
            last: 0,
            since: Instant::now(),
        }
    }

    /// Records the watched count `now`: whether it has stood still for
    /// [`GUARD`].
    pub(crate) fn stuck(&mut self, now: u64) -> bool {
        if now != self.last {
            self.last = now;
            self.since = Instant::now();
        }
        self.since.elapsed() > GUARD
    }
}

/// A child rank running `am-selftest`, killed if the test fails.
pub(crate) struct Kid {
    what: String,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Kid {
    pub(crate) fn start(job: &Job, rank: u32, args: &[&str]) -> Kid {
        Kid::start_with(job, rank, args, Stdio::inherit())
    }

    /// As [`Kid::start`], with the child's stderr sent to `stderr` (tests
    /// whose children are expected to fail loudly pass `Stdio::null()`).
    pub(crate) fn start_with(job: &Job, rank: u32, args: &[&str], stderr: Stdio) -> Kid {
        let mut cmd = Command::new(SELFTEST);
        cmd.args(args)
            .env(job::ENV_JOB, &job.name)
            .env(job::ENV_RANK, rank.to_string())
            .env(job::ENV_SIZE, job.size.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        // SAFETY: prctl is async-signal-safe and only sets the child's
        // parent-death signal, so a test killed midway takes its ranks along.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                Ok(())
            });
        }
        let what = format!("rank {rank} (am-selftest {})", args.join(" "));
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {what}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Kid {
            what,
            child: Some(child),
            stdin,
            lines,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("running child").id()
    }

    /// Waits for the child to print `want` (hang guard: [`GUARD`]).
    pub(crate) fn expect(&mut self, want: &str) {
        loop {
            match self.lines.recv_timeout(GUARD) {
                Ok(line) if line == want => return,
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("{}: no {want:?} line within {GUARD:?}", self.what)
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let st = self.child.take().map(|mut c| c.wait());
                    panic!(
                        "{} closed its stdout before printing {want:?} (status {st:?})",
                        self.what
                    )
                }
            }
        }
    }

    pub(crate) fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("piped stdin");
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("writing to {}: {e}", self.what));
    }

    /// Whether the child is still running.
    pub(crate) fn running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().expect("try_wait").is_none(),
            None => false,
        }
    }

    /// SIGKILLs the child and reaps it.
    pub(crate) fn kill(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running child");
        child.kill().expect("kill");
        child.wait().expect("wait")
    }

    /// Waits for the child to exit by itself (hang guard: [`GUARD`]).
    pub(crate) fn wait(&mut self) -> ExitStatus {
        let child = self.child.as_mut().expect("running child");
        let start = Instant::now();
        loop {
            if let Some(st) = child.try_wait().expect("try_wait") {
                self.child = None;
                return st;
            }
            if start.elapsed() > GUARD {
                let _ = child.kill();
                panic!("{} did not exit within {GUARD:?}", self.what);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A job in which this test process is rank 0.
pub(crate) fn own_job(size: u32) -> Job {
    Job::new(Job::new_name(), 0, size).with_timeout(GUARD)
}

/// Removes what the killed ranks left and checks that nothing remains.
pub(crate) fn assert_cleaned(job: &str) {
    job::cleanup_job(job);
    let left = job::job_segments(job);
    assert!(left.is_empty(), "segments left: {left:?}");
}
