//! Running unmodified programs under `libsymmetry_interpose.so`: finding
//! the library and the program, refusing what `LD_PRELOAD` cannot reach,
//! naming recorded locks by their source lines, timing a run in each of
//! the library's modes with its output digested, and choosing the spin
//! policy a recorded profile recommends. `symmetry profile` and the
//! `interpose-apps` experiment are built on it.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use symmetry_locks::spin_then_block::profiler::Profile;
use symmetry_models::competitive::{Analysis, Strategy};

/// Name of the interposition library.
pub const LIBRARY: &str = "libsymmetry_interpose.so";

/// Environment variable that names the library's path explicitly.
pub const LIBRARY_ENV: &str = "SYMMETRY_INTERPOSE_LIB";

/// `LD_PRELOAD` with the library first, keeping what was there.
pub fn preload_with(lib: &Path) -> OsString {
    match std::env::var_os("LD_PRELOAD") {
        Some(p) if !p.is_empty() => {
            let mut v = lib.as_os_str().to_owned();
            v.push(":");
            v.push(p);
            v
        }
        _ => lib.as_os_str().to_owned(),
    }
}

/// The library: `--lib`, `$SYMMETRY_INTERPOSE_LIB`, or next to this binary
/// (cargo puts both in `target/<profile>/`).
pub fn library(given: Option<&Path>) -> Result<PathBuf, String> {
    let candidate = match given {
        Some(p) => p.to_path_buf(),
        None => match std::env::var_os(LIBRARY_ENV) {
            Some(p) => PathBuf::from(p),
            None => {
                let exe = std::env::current_exe()
                    .map_err(|e| format!("cannot locate this binary: {e}"))?;
                let dir = exe.parent().unwrap_or(Path::new("."));
                // `cargo build -p symmetry-interpose` puts it beside this
                // binary; building this binary (which depends on it) leaves
                // it in deps/; test binaries run from deps/ themselves.
                [
                    dir.join(LIBRARY),
                    dir.join("deps").join(LIBRARY),
                    dir.join("..").join(LIBRARY),
                ]
                .into_iter()
                .find(|p| p.is_file())
                .unwrap_or_else(|| dir.join(LIBRARY))
            }
        },
    };
    if candidate.is_file() {
        absolute(&candidate)
    } else {
        Err(format!(
            "the interposition library {} does not exist; build it with `cargo build \
             --release -p symmetry-interpose`, or name it with --lib or ${LIBRARY_ENV}",
            candidate.display()
        ))
    }
}

pub fn absolute(p: &Path) -> Result<PathBuf, String> {
    std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()))
}

/// The program as `execvp` would find it.
pub fn resolve(program: &OsStr) -> Result<PathBuf, String> {
    let p = Path::new(program);
    if p.components().count() > 1 {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(format!("{}: no such file", p.display()))
        };
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(p))
        .find(|c| c.is_file())
        .ok_or_else(|| format!("{}: not found in PATH", p.display()))
}

/// Refuses a statically linked ELF program: `LD_PRELOAD` cannot reach it.
/// Scripts and dynamically linked programs pass.
pub fn check_dynamic(path: &Path) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    match elf_is_dynamic(&bytes) {
        Some(false) => Err(format!(
            "{} is statically linked: LD_PRELOAD cannot interpose its pthread mutexes \
             (profile a dynamically linked build)",
            path.display()
        )),
        Some(true) | None => Ok(()),
    }
}

/// For an ELF file, whether it has a program interpreter (`PT_INTERP`),
/// i.e. is dynamically linked; `None` if it is not ELF (a script).
pub fn elf_is_dynamic(b: &[u8]) -> Option<bool> {
    if b.len() < 0x34 || &b[..4] != b"\x7fELF" {
        return None;
    }
    let wide = b[4] == 2;
    let le = b[5] == 1;
    // The `n`-byte unsigned integer at offset `o`, in the file's byte order.
    let int_at = |o: usize, n: usize| -> Option<u64> {
        let s = b.get(o..o + n)?;
        let fold = |v: u64, x: &u8| (v << 8) | u64::from(*x);
        Some(if le {
            s.iter().rev().fold(0, fold)
        } else {
            s.iter().fold(0, fold)
        })
    };
    let u16_at = |o: usize| int_at(o, 2);
    let u32_at = |o: usize| int_at(o, 4);
    let u64_at = |o: usize| int_at(o, 8);
    let (phoff, phentsize, phnum) = if wide {
        (u64_at(0x20)?, u16_at(0x36)?, u16_at(0x38)?)
    } else {
        (u32_at(0x1C)?, u16_at(0x2A)?, u16_at(0x2C)?)
    };
    const PT_INTERP: u64 = 3;
    let dynamic = (0..phnum).any(|i| {
        i.checked_mul(phentsize)
            .and_then(|o| o.checked_add(phoff))
            .and_then(|o| usize::try_from(o).ok())
            .and_then(u32_at)
            .is_some_and(|t| t == PT_INTERP)
    });
    Some(dynamic)
}

/// Renames `sym+0xA (OBJECT+0xOFF)` locks to `function at file:line
/// (OBJECT+0xOFF)` where `addr2line` finds debug information; the rest
/// keep their names.
pub fn symbolize(profile: &mut Profile) {
    for l in &mut profile.locks {
        let Some((object, offset)) = site_of(&l.name) else {
            continue;
        };
        // The site is a return address: the call is the byte before it.
        let Ok(out) = Command::new("addr2line")
            .args(["-f", "-C", "-e"])
            .arg(&object)
            .arg(format!("{:#x}", offset.saturating_sub(1)))
            .output()
        else {
            return; // no addr2line: keep every name as it is
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        let (Some(func), Some(line)) = (lines.next(), lines.next()) else {
            continue;
        };
        if func == "??" || line.starts_with("??") {
            continue;
        }
        let line = line.split(" (discriminator").next().unwrap_or(line);
        let paren = l.name.find('(').unwrap_or(0);
        l.name = format!("{func} at {line} {}", &l.name[paren..]);
    }
}

/// `(OBJECT+0xOFF)` in a lock name: the object's path and the offset.
pub fn site_of(name: &str) -> Option<(PathBuf, u64)> {
    let inner = name.get(name.find('(')? + 1..)?;
    let inner = &inner[..inner.find(')')?];
    let (object, off) = inner.rsplit_once("+0x")?;
    let off = u64::from_str_radix(off, 16).ok()?;
    object
        .starts_with('/')
        .then(|| (PathBuf::from(object), off))
}

// ---------------------------------------------------------------------------
// Timed runs.

/// How a run uses the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode<'a> {
    /// Without the library: the program on glibc's own mutexes.
    Glibc,
    /// Profile mode, the profile written to the path at exit.
    Profile(&'a Path),
    /// Replace mode on the named algorithm.
    Replace(&'a str),
}

/// One run of a program.
#[derive(Debug, Clone, Copy)]
pub struct Launch<'a> {
    /// The program (a path; see [`resolve`]).
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

// ---------------------------------------------------------------------------
// The recommendation.

/// The on-line policy `analysis` prices cheapest against the optimal
/// off-line, with that ratio, among the policies replace mode runs as
/// priced: all but `opt-known`, whose per-lock thresholds are looked up by
/// lock name, which replace mode's anonymous locks do not have (it runs
/// there as `fixed-spin-c`). Ties go to the earlier policy of KLMO91's
/// Table 1. `None` when the profile recorded no contended wait.
pub fn recommend(analysis: &Analysis) -> Option<(Strategy, f64)> {
    if analysis.waits() == 0 {
        return None;
    }
    Strategy::POLICIES
        .into_iter()
        .filter(|&s| s != Strategy::OptKnown)
        .map(|s| (s, analysis.cost_vs_offline(s)))
        .fold(None, |best: Option<(Strategy, f64)>, (s, r)| match best {
            Some((_, b)) if b <= r => best,
            _ => Some((s, r)),
        })
}

/// The replace-mode name of KLMO91's lock with policy `s`.
pub fn spin_then_block_name(s: Strategy) -> String {
    format!("spin-then-block:{}", s.name())
}

/// Reads the profile a [`Mode::Profile`] run wrote; `Ok(None)` when it
/// wrote none (no contended wait).
pub fn read_profile(path: &Path) -> Result<Option<Profile>, String> {
    if !path.exists() {
        return Ok(None);
    }
    Profile::read(path)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_are_read_from_lock_names() {
        assert_eq!(
            site_of("(/usr/bin/pigz+0x11082)"),
            Some((PathBuf::from("/usr/bin/pigz"), 0x11082))
        );
        assert_eq!(
            site_of("possess+0x12 (/usr/bin/pigz+0x1a) #2"),
            Some((PathBuf::from("/usr/bin/pigz"), 0x1a))
        );
        assert_eq!(site_of("(unknown site)"), None);
        assert_eq!(site_of("queue"), None);
    }

    #[test]
    fn elf_headers_say_static_or_dynamic() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(elf_is_dynamic(&me), Some(true));
        assert_eq!(elf_is_dynamic(b"#!/bin/sh\necho hi\n"), None);
        // A 64-bit header with no program headers: static.
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        assert_eq!(elf_is_dynamic(&h), Some(false));
        // Truncated or hostile headers do not panic.
        h[0x38] = 0xff;
        h[0x20] = 0xff;
        assert_eq!(elf_is_dynamic(&h), Some(false));
        assert_eq!(elf_is_dynamic(&h[..10]), None);
    }

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
