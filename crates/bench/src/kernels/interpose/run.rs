//! Timed runs of a program under the library, in each of its modes: its
//! output digested, its time taken at its exit, killed at its timeout.

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::preload_with;

/// How a run uses the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode<'a> {
    /// Without the library: the program on glibc's own mutexes.
    Glibc,
    /// Profile mode, the profile written to the path at exit.
    Profile(&'a Path),
    /// Replace mode on the named algorithm.
    Replace(&'a str),
    /// The library loaded in pass-through: every call straight to glibc
    /// (what interposition alone costs).
    Passthrough,
}

/// One run of a program.
#[derive(Debug, Clone, Copy)]
pub struct Launch<'a> {
    /// The program (a path; see [`resolve`](super::resolve)).
    pub program: &'a Path,
    /// Its arguments.
    pub args: &'a [String],
    /// The interposition library.
    pub lib: &'a Path,
    /// How the library is used.
    pub mode: Mode<'a>,
    /// Further environment, e.g. [`crate::kernels::klmo91::calibration_env`].
    pub env: &'a [(String, String)],
    /// The program is killed (`SIGKILL`) when it runs longer.
    pub timeout: Duration,
}

/// A program's standard output, digested while it runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Digest {
    /// Bytes written.
    pub len: u64,
    /// FNV-1a (64-bit) of every byte.
    pub hash: u64,
    /// The first [`Digest::HEAD`] bytes, as text (lossy).
    pub head: String,
}

impl Digest {
    /// How much of the output is kept as text.
    pub const HEAD: usize = 64 * 1024;

    /// The first line of the kept text that starts (after blanks) with
    /// `prefix`, trimmed.
    pub fn line(&self, prefix: &str) -> Option<&str> {
        self.head
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with(prefix))
    }
}

/// What one run did.
#[derive(Debug)]
pub struct Ran {
    /// From the start of the process to its exit.
    pub elapsed: Duration,
    /// Its exit status; `None` if it was killed at the timeout.
    pub status: Option<ExitStatus>,
    /// Its standard output.
    pub out: Digest,
    /// The end of its standard error (for messages).
    pub stderr_tail: String,
}

impl Ran {
    /// Exited by itself with status 0.
    pub fn ok(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// Why the run did not succeed, in words; `None` if it did.
    pub fn failure(&self) -> Option<String> {
        match self.status {
            None => Some(format!(
                "killed after {:.1} s (timed out)",
                self.elapsed.as_secs_f64()
            )),
            Some(s) if s.success() => None,
            Some(s) => {
                let last = self.stderr_tail.lines().last().unwrap_or("").trim();
                Some(if last.is_empty() {
                    format!("{s}")
                } else {
                    format!("{s}: {last}")
                })
            }
        }
    }
}

/// Runs `l` to completion (or its timeout), timing it from spawn to exit
/// and digesting its standard output; standard input is empty. The
/// environment's own `LD_PRELOAD` is kept (the library goes first), and
/// the library's own variables are set only by the mode.
pub fn run(l: &Launch<'_>) -> Result<Ran, String> {
    let mut cmd = Command::new(l.program);
    cmd.args(l.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove(symmetry_interpose::PROFILE_ENV)
        .env_remove(symmetry_interpose::LOCK_ENV)
        // Each replacement lock waits as `symmetry profile --lock` runs it
        // by default (FIFO locks politely, the others as the paper wrote
        // them), whatever the caller's environment says.
        .env_remove(symmetry_interpose::replace::WAIT_ENV);
    for (k, v) in l.env {
        cmd.env(k, v);
    }
    match l.mode {
        Mode::Glibc => {}
        Mode::Profile(p) => {
            cmd.env("LD_PRELOAD", preload_with(l.lib))
                .env(symmetry_interpose::PROFILE_ENV, p);
        }
        Mode::Replace(name) => {
            cmd.env("LD_PRELOAD", preload_with(l.lib))
                .env(symmetry_interpose::LOCK_ENV, name);
        }
        Mode::Passthrough => {
            cmd.env("LD_PRELOAD", preload_with(l.lib))
                .env(symmetry_interpose::LOCK_ENV, symmetry_interpose::OFF);
        }
    }
    // Its own process group, so a timeout kills whatever it started too
    // (a shell's children would otherwise keep the output pipes open).
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", l.program.display()))?;
    let pid = child.id();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out = std::thread::spawn(move || stdout.map(digest).unwrap_or_default());
    let err = std::thread::spawn(move || stderr.map(tail).unwrap_or_default());
    // The exit is noticed without reaping (WNOWAIT), so the pid stays this
    // child's until `child.wait()` below: a kill at the timeout cannot hit
    // a recycled pid.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(exited(pid));
    });
    let mut timed_out = false;
    let end = match rx.recv_timeout(l.timeout) {
        Ok(end) => end,
        Err(_) => {
            timed_out = true;
            let pid = libc::pid_t::try_from(pid).map_err(|_| "child pid out of range")?;
            // SAFETY: kill(2) has no memory effects. `pid` is our unreaped
            // child (see above) and the leader of its own process group, so
            // the signal reaches only that group.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            rx.recv()
                .map_err(|_| "the exit watcher of a killed child died".to_string())?
        }
    };
    let status = child
        .wait()
        .map_err(|e| format!("waiting for {}: {e}", l.program.display()))?;
    let out = out.join().unwrap_or_default();
    let stderr_tail = err.join().unwrap_or_default();
    Ok(Ran {
        elapsed: end.saturating_duration_since(t0),
        status: (!timed_out).then_some(status),
        out,
        stderr_tail,
    })
}

/// Blocks until child `pid` has exited, leaving it unreaped; returns when.
fn exited(pid: u32) -> Instant {
    loop {
        // SAFETY: an all-zero siginfo_t is a valid value to be overwritten.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid, writable siginfo_t; waitid with
        // WNOWAIT only reads the child's state.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Instant::now();
        }
    }
}

/// FNV-1a over a stream, with its head kept as text.
fn digest(mut r: impl Read) -> Digest {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    let mut len = 0u64;
    let mut head = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let chunk = &buf[..n];
                for &b in chunk {
                    hash = (hash ^ u64::from(b)).wrapping_mul(PRIME);
                }
                len += n as u64;
                let room = Digest::HEAD.saturating_sub(head.len());
                head.extend_from_slice(&chunk[..room.min(n)]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    Digest {
        len,
        hash,
        head: String::from_utf8_lossy(&head).into_owned(),
    }
}

/// The last 2 KiB of a stream, as text.
fn tail(mut r: impl Read) -> String {
    const KEEP: usize = 2048;
    let mut kept = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > 2 * KEEP {
                    kept.drain(..kept.len() - KEEP);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let from = kept.len().saturating_sub(KEEP);
    String::from_utf8_lossy(&kept[from..]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, timeout: Duration) -> Ran {
        let args = vec!["-c".to_string(), script.to_string()];
        run(&Launch {
            program: Path::new("/bin/sh"),
            args: &args,
            lib: Path::new("/nonexistent"),
            mode: Mode::Glibc,
            env: &[("SYMMETRY_TEST_VAR".into(), "seen".into())],
            timeout,
        })
        .unwrap()
    }

    #[test]
    fn runs_are_digested_timed_and_killed_at_their_timeout() {
        let r = sh(
            "printf abc; echo \"$SYMMETRY_TEST_VAR\"",
            Duration::from_secs(30),
        );
        assert!(r.ok());
        assert_eq!(r.out.len, 8);
        assert_eq!(r.out.head, "abcseen\n");
        assert_eq!(r.out.line("abc"), Some("abcseen"));
        assert_eq!(r.failure(), None);
        // FNV-1a of the same bytes, computed here independently.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in b"abcseen\n" {
            h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
        assert_eq!(r.out.hash, h);

        let r = sh(
            "echo first >&2; echo oops >&2; exit 3",
            Duration::from_secs(30),
        );
        assert!(!r.ok());
        let why = r.failure().unwrap();
        assert!(why.contains('3') && why.contains("oops"), "{why}");

        let r = sh("sleep 30", Duration::from_millis(200));
        assert!(r.status.is_none());
        assert!(r.elapsed < Duration::from_secs(20), "{:?}", r.elapsed);
        assert!(r.failure().unwrap().contains("timed out"));
    }

    #[test]
    fn a_missing_program_is_an_error() {
        let e = run(&Launch {
            program: Path::new("/nonexistent/program"),
            args: &[],
            lib: Path::new("/nonexistent"),
            mode: Mode::Glibc,
            env: &[],
            timeout: Duration::from_secs(1),
        })
        .unwrap_err();
        assert!(e.contains("/nonexistent/program"), "{e}");
    }
}
