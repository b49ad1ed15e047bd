//! Running unmodified programs under `libsymmetry_interpose.so`: finding
//! the library and the program, refusing what `LD_PRELOAD` cannot reach,
//! naming recorded locks by their users' source lines (past the wrappers
//! of libc and of the C++ and Rust standard libraries), timing a run in
//! each of the library's modes with its output digested, and choosing the
//! spin policy a recorded profile recommends. `symmetry profile` and the
//! `interpose-apps` experiment are built on it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use symmetry_locks::spin_then_block::profiler::{LockKind, Profile};
use symmetry_models::competitive::{Analysis, LockCosts, Strategy};

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

// ---------------------------------------------------------------------------
// Naming locks by their users' source lines.

/// Objects whose frames are never a lock's user (by file name): the C and
/// C++ runtimes, the loader and the interposition library.
const WRAPPER_OBJECTS: &[&str] = &[
    "libc.so",
    "libc-",
    "libpthread",
    "libstdc++",
    "libgcc_s",
    "ld-linux",
    "libsymmetry_interpose",
];

/// Top-level namespaces whose functions wrap a lock for its user: Rust's
/// standard library and lock crates, C++'s standard library.
const WRAPPER_NAMESPACES: &[&str] = &[
    "std",
    "core",
    "alloc",
    "parking_lot",
    "parking_lot_core",
    "lock_api",
    "__gnu_cxx",
];

/// Whether frames in `object` are wrappers: its file is libc, libpthread,
/// libstdc++, libgcc_s, the loader or the interposition library.
pub fn wrapper_object(object: &Path) -> bool {
    let file = object.file_name().unwrap_or_default().to_string_lossy();
    WRAPPER_OBJECTS.iter().any(|w| file.starts_with(w))
}

/// Whether the demangled function `name` wraps a lock for its user: it is
/// in Rust's `std`, `core`, `alloc`, `parking_lot`, `parking_lot_core` or
/// `lock_api`, or in C++'s `std` or `__gnu_cxx`, or is a `__gthread_`
/// helper. A trait method (`<T as Trait>::f`) belongs to the type's
/// namespace, so a guard's `Drop` counts and a user type's does not; a
/// C++ function template's return type is skipped.
pub fn wrapper_function(name: &str) -> bool {
    let name = without_return_type(name).trim_start_matches('<');
    if name.starts_with("__gthread_") {
        return true;
    }
    // The first path segment, without a v0 crate disambiguator (`std[1a2b]`).
    let first = name.split("::").next().unwrap_or_default();
    let first = first.split('[').next().unwrap_or_default();
    name.contains("::") && WRAPPER_NAMESPACES.contains(&first)
}

/// A demangled C++ name without the return type a function template's name
/// starts with (`void std::f<int>(int)` is `std::f<int>(int)`): what
/// follows the last blank outside brackets before the arguments.
fn without_return_type(name: &str) -> &str {
    let mut depth = 0usize;
    let mut from = 0;
    for (i, ch) in name.char_indices() {
        match ch {
            '<' | '[' => depth += 1,
            '>' | ']' => depth = depth.saturating_sub(1),
            '(' if depth == 0 => break,
            ' ' if depth == 0 => from = i + 1,
            _ => {}
        }
    }
    &name[from..]
}

/// One function of a recorded stack frame, symbolized. A frame whose call
/// was inlined gives several, innermost first, all with the frame's `raw`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Frame {
    /// The frame as the library recorded it: `symbol+0xOFF (OBJECT+0xOFF)`,
    /// or `(OBJECT+0xOFF)` where `dladdr` found no symbol.
    pub raw: String,
    /// The function (demangled), where `addr2line` knows it.
    pub function: Option<String>,
    /// Its `file:line`, where the object has debug information.
    pub line: Option<String>,
    /// Inlined into the function of the next entry (the same raw frame).
    pub inlined: bool,
    /// A wrapper frame ([`wrapper_object`], [`wrapper_function`]), skipped
    /// when the lock is named.
    pub wrapper: bool,
}

impl Frame {
    /// `function at file:line (OBJECT+0xOFF)`, as much of it as is known
    /// (the raw frame when nothing is).
    pub fn text(&self) -> String {
        let site = self.raw.rfind("(/").map_or("", |i| &self.raw[i..]);
        match (&self.function, &self.line) {
            (Some(f), Some(l)) => format!("{f} at {l} {site}"),
            (Some(f), None) => format!("{f} {site}"),
            _ => self.raw.clone(),
        }
    }
}

/// An inline chain from `addr2line`, innermost first: function and
/// `file:line`, each where known.
type Chain = Vec<(Option<String>, Option<String>)>;

/// What `addr2line` says about the code sites of a profile (return
/// addresses, looked up at the byte before: the call).
#[derive(Debug, Default)]
pub struct Symbols {
    sites: HashMap<(PathBuf, u64), Chain>,
}

impl Symbols {
    /// Looks up the site of every frame or lock name of `frames` that has
    /// one (`... (OBJECT+0xOFF)`), with inline expansion, in one
    /// `addr2line` run per object. Without `addr2line`, or for an object it
    /// cannot read, nothing is known of those sites.
    pub fn lookup<'a>(frames: impl IntoIterator<Item = &'a str>) -> Symbols {
        let mut by_object: BTreeMap<PathBuf, BTreeSet<u64>> = BTreeMap::new();
        for (object, offset) in frames.into_iter().filter_map(site_of) {
            by_object.entry(object).or_default().insert(offset);
        }
        let mut sites = HashMap::new();
        for (object, offsets) in by_object {
            let calls: Vec<u64> = offsets.iter().map(|o| o.saturating_sub(1)).collect();
            let Ok(out) = Command::new("addr2line")
                .args(["-a", "-f", "-i", "-C", "-e"])
                .arg(&object)
                .args(calls.iter().map(|a| format!("{a:#x}")))
                .output()
            else {
                break; // no addr2line: nothing is known
            };
            let found = parse_addr2line(&String::from_utf8_lossy(&out.stdout));
            for ((offset, call), (addr, chain)) in offsets.iter().zip(&calls).zip(found) {
                if addr == *call {
                    sites.insert((object.clone(), *offset), chain);
                }
            }
        }
        Symbols { sites }
    }

    /// The frames of a profile: its locks' names and stacks.
    pub fn of(profile: &Profile) -> Symbols {
        Symbols::lookup(profile.locks.iter().flat_map(|l| {
            std::iter::once(l.name.as_str()).chain(l.stack.iter().map(String::as_str))
        }))
    }

    /// `raw` symbolized: one [`Frame`] per function of its inline chain
    /// (one with neither function nor line where nothing is known).
    pub fn frames(&self, raw: &str) -> Vec<Frame> {
        let site = site_of(raw);
        let in_wrapper = site.as_ref().is_some_and(|(o, _)| wrapper_object(o));
        let chain = site
            .and_then(|s| self.sites.get(&s))
            .filter(|c| !c.is_empty());
        let Some(chain) = chain else {
            return vec![Frame {
                raw: raw.to_owned(),
                function: None,
                line: None,
                inlined: false,
                wrapper: in_wrapper,
            }];
        };
        chain
            .iter()
            .enumerate()
            .map(|(i, (function, line))| Frame {
                raw: raw.to_owned(),
                function: function.clone(),
                line: line.clone(),
                inlined: i + 1 < chain.len(),
                wrapper: in_wrapper || function.as_deref().is_some_and(wrapper_function),
            })
            .collect()
    }

    /// A recorded stack symbolized, innermost first.
    pub fn stack(&self, stack: &[String]) -> Vec<Frame> {
        stack.iter().flat_map(|f| self.frames(f)).collect()
    }

    /// What a futex entry's wrapper frames say it is: a `Condvar`'s wait,
    /// a reader-writer lock's read or write side, or a mutex (std's or
    /// `parking_lot`'s); `None` where no wrapper says (a program's own
    /// futex lock).
    pub fn futex_kind(&self, stack: &[String]) -> Option<LockKind> {
        let frames = self.stack(stack);
        let wrappers = frames
            .iter()
            .take_while(|f| f.wrapper)
            .filter_map(|f| f.function.as_deref());
        let mut kind = None;
        for f in wrappers {
            let f = f.to_ascii_lowercase();
            let this = if f.contains("condvar") {
                LockKind::Condvar
            } else if f.contains("rwlock") && (f.contains("read") || f.contains("shared")) {
                LockKind::Read
            } else if f.contains("rwlock") && (f.contains("write") || f.contains("exclusive")) {
                LockKind::Write
            } else if f.contains("mutex") {
                LockKind::Mutex
            } else {
                continue;
            };
            // The outermost wrapper that says is the one the user called
            // (a condition's wait re-takes its mutex inside).
            kind = Some(this);
        }
        kind
    }

    /// The name of a lock whose stack is `stack`: its first frame that is
    /// not a wrapper, as `function at file:line (OBJECT+0xOFF)`; `None`
    /// when there is none or it has no debug information.
    pub fn user_site(&self, stack: &[String]) -> Option<String> {
        let f = self.stack(stack).into_iter().find(|f| !f.wrapper)?;
        (f.function.is_some() && f.line.is_some()).then(|| f.text())
    }

    /// A lock name `... (OBJECT+0xOFF)` as `function at file:line
    /// (OBJECT+0xOFF)` of its own site (the innermost function there);
    /// `None` without debug information.
    fn site_name(&self, name: &str) -> Option<String> {
        let (function, line) = self.sites.get(&site_of(name)?)?.first()?;
        let site = &name[name.rfind("(/")?..];
        Some(format!(
            "{} at {} {site}",
            function.as_ref()?,
            line.as_ref()?
        ))
    }
}

/// `addr2line -a -f -i` output: per address, the inline chain found there.
fn parse_addr2line(text: &str) -> Vec<(u64, Chain)> {
    let mut out: Vec<(u64, Chain)> = Vec::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if let Some(a) = l
            .strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
        {
            out.push((a, Vec::new()));
            continue;
        }
        let function = (l != "??").then(|| l.to_owned());
        let line = lines
            .next()
            .map(|p| p.split(" (discriminator").next().unwrap_or(p))
            .filter(|p| !p.starts_with("??") && !p.ends_with(":?") && !p.ends_with(":0"))
            .map(str::to_owned);
        if let Some((_, chain)) = out.last_mut() {
            chain.push((function, line));
        }
    }
    out
}

/// A lock name without the library's suffixes: the name, and whether it
/// ended with ` [process-shared]` (a ` #k` before it is dropped).
fn split_suffixes(name: &str) -> (&str, bool) {
    let (name, shared) = match name.strip_suffix(" [process-shared]") {
        Some(n) => (n, true),
        None => (name, false),
    };
    let base = name
        .rsplit_once(" #")
        .filter(|(_, k)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
        .map_or(name, |(b, _)| b);
    (base, shared)
}

/// Names every lock of an interposition profile by its user's source line
/// and returns what `addr2line` said about its sites. A lock is named by
/// the first frame of its stack (innermost first, inlined functions
/// first) that is not a wrapper ([`Frame::wrapper`]), as `function at
/// file:line (OBJECT+0xOFF)`; where its stack is empty or that frame has
/// no debug information, by its own site (`sym+0xA (OBJECT+0xOFF)`
/// becomes `function at file:line (OBJECT+0xOFF)`, or stays as it is).
/// The library's ` #k` suffixes number the locks of one raw site; they are
/// numbered again among the locks of one final name (the first none, then
/// ` #2`, ` #3` in file order; a reader-writer lock's two entries keep one
/// number), and ` [process-shared]` is kept. Stacks stay as recorded.
pub fn symbolize(profile: &mut Profile) -> Symbols {
    let symbols = Symbols::of(profile);
    rename(profile, &symbols);
    symbols
}

/// [`symbolize`]'s renaming, with the sites already looked up.
fn rename(profile: &mut Profile, symbols: &Symbols) {
    // Per final name and sharing: the original names given a number, in
    // order (an original name is one lock, read and write sides alike).
    let mut numbered: HashMap<(String, bool), Vec<String>> = HashMap::new();
    for l in &mut profile.locks {
        if l.kind == LockKind::Futex
            && let Some(k) = symbols.futex_kind(&l.stack)
        {
            l.kind = k;
        }
        let (base, shared) = split_suffixes(&l.name);
        let mut name = symbols
            .user_site(&l.stack)
            .or_else(|| symbols.site_name(base))
            .unwrap_or_else(|| base.to_owned());
        let seen = numbered.entry((name.clone(), shared)).or_default();
        let k = match seen.iter().position(|n| *n == l.name) {
            Some(i) => i + 1,
            None => {
                seen.push(l.name.clone());
                seen.len()
            }
        };
        if k > 1 {
            name.push_str(&format!(" #{k}"));
        }
        if shared {
            name.push_str(" [process-shared]");
        }
        l.name = name;
    }
}

/// `(OBJECT+0xOFF)` in a lock name or frame (the last parenthesis that
/// opens a path: a C++ function's own come before it): the object's path
/// and the offset.
pub fn site_of(name: &str) -> Option<(PathBuf, u64)> {
    let inner = name.get(name.rfind("(/")? + 1..)?;
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
    cheapest(analysis.waits(), |s| analysis.cost_vs_offline(s))
}

/// [`recommend`] for one lock: the policy cheapest on its own waits.
pub fn recommend_lock(lock: &LockCosts) -> Option<(Strategy, f64)> {
    cheapest(lock.waits, |s| lock.ratio(s))
}

/// The policy of [`recommend`]'s choice, given `waits` and each policy's
/// cost over off-line.
fn cheapest(waits: u64, vs_offline: impl Fn(Strategy) -> f64) -> Option<(Strategy, f64)> {
    if waits == 0 {
        return None;
    }
    Strategy::POLICIES
        .into_iter()
        .filter(|&s| s != Strategy::OptKnown)
        .map(|s| (s, vs_offline(s)))
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
    use symmetry_locks::spin_then_block::profiler::LockKind;

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
    fn wrapper_frames_are_told_from_users() {
        for w in [
            "std::sys::pal::unix::futex::futex_wait",
            "std::sync::poison::mutex::Mutex<T>::lock",
            "<std::sync::poison::mutex::MutexGuard<T> as core::ops::drop::Drop>::drop",
            "core::ptr::drop_in_place<std::sync::poison::mutex::MutexGuard<()>>",
            "alloc::sync::Arc<T,A>::drop_slow",
            "parking_lot::raw_mutex::RawMutex::lock_slow",
            "parking_lot_core::parking_lot::park",
            "lock_api::mutex::Mutex<R,T>::lock",
            "std[a1b2c3]::sync::rwlock::RwLock<T>::read",
            "std::mutex::lock()",
            "std::unique_lock<std::mutex>::lock()",
            "void std::__invoke_impl<void, F>(std::__invoke_other, F&&)",
            "__gnu_cxx::__mutex::lock()",
            "__gthread_mutex_lock(pthread_mutex_t*)",
        ] {
            assert!(wrapper_function(w), "{w}");
        }
        for u in [
            "main",
            "contended::main::{{closure}}",
            "<contended::Queue as core::ops::drop::Drop>::drop",
            "Queue::push(int)",
            "void worker<std::mutex>(std::mutex&)",
            "stdout_flush",
            "possess",
        ] {
            assert!(!wrapper_function(u), "{u}");
        }
        for o in [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/libpthread.so.0",
            "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
            "/lib/libgcc_s.so.1",
            "/lib64/ld-linux-x86-64.so.2",
            "/t/release/libsymmetry_interpose.so",
        ] {
            assert!(wrapper_object(Path::new(o)), "{o}");
        }
        assert!(!wrapper_object(Path::new("/usr/bin/pigz")));
        assert!(!wrapper_object(Path::new("/usr/lib/liblzma.so.5")));
    }

    #[test]
    fn addr2line_output_is_read_per_address() {
        let text = "0x0000000000001173\ninner\n/t/t.c:2\nouter\n/t/t.c:3 (discriminator 1)\n\
                    0x0000000000001050\nmain\n??:0\n0x0000000000099999\n??\n??:0\n";
        let s = |x: &str| Some(x.to_owned());
        assert_eq!(
            parse_addr2line(text),
            vec![
                (
                    0x1173,
                    vec![(s("inner"), s("/t/t.c:2")), (s("outer"), s("/t/t.c:3"))]
                ),
                (0x1050, vec![(s("main"), None)]),
                (0x99999, vec![(None, None)]),
            ]
        );
    }

    /// A site known by hand: object, offset of the return address, and the
    /// inline chain there (function, `file:line`).
    type Site<'a> = (&'a str, u64, &'a [(&'a str, &'a str)]);

    fn known(sites: &[Site<'_>]) -> Symbols {
        let sites = sites
            .iter()
            .map(|&(o, off, chain)| {
                let chain = chain
                    .iter()
                    .map(|&(f, l)| (Some(f.to_owned()), Some(l.to_owned())))
                    .collect();
                ((PathBuf::from(o), off), chain)
            })
            .collect();
        Symbols { sites }
    }

    #[test]
    fn locks_are_named_past_wrappers_and_numbered_again() {
        let symbols = known(&[
            (
                "/p",
                0x100,
                &[
                    (
                        "std::sys::sync::mutex::futex::Mutex::lock_contended",
                        "/rustc/futex.rs:63",
                    ),
                    (
                        "std::sync::poison::mutex::Mutex<T>::lock",
                        "/rustc/mutex.rs:317",
                    ),
                    ("prog::worker", "src/main.rs:10"),
                ],
            ),
            ("/p", 0x200, &[("prog::reader", "src/main.rs:20")]),
            (
                "/p",
                0x50,
                &[(
                    "std::sys::pal::unix::futex::futex_wait",
                    "/rustc/futex.rs:1",
                )],
            ),
            ("/p", 0x300, &[("Queue::push(int)", "src/queue.cc:30")]),
            ("/p", 0x400, &[("std::thread::spawn", "/rustc/thread.rs:1")]),
        ]);
        let raw = "std::sys::pal::unix::futex::futex_wait+0x5 (/p+0x50)";
        let lock = |name: &str, kind: LockKind, stack: &[&str]| {
            let mut l = symmetry_locks::spin_then_block::profiler::LockRecord::new(name, "os", 1);
            l.kind = kind;
            l.stack = stack.iter().map(|f| f.to_string()).collect();
            l
        };
        let libc = "syscall+0x1d (/lib/libc.so.6+0x11)";
        let mut p = Profile::new(
            1.0,
            vec![
                // Two futex locks taken at one line, one elsewhere: the
                // library numbered all three at its one raw site.
                lock(raw, LockKind::Futex, &[libc, raw, "(/p+0x100)"]),
                lock(
                    &format!("{raw} #2"),
                    LockKind::Futex,
                    &[libc, raw, "(/p+0x300)"],
                ),
                lock(
                    &format!("{raw} #3"),
                    LockKind::Futex,
                    &[libc, raw, "(/p+0x100)"],
                ),
                // A rwlock's two sides keep one number.
                lock("x+0x1 (/p+0x200) #4", LockKind::Read, &["(/p+0x200)"]),
                lock("x+0x1 (/p+0x200) #4", LockKind::Write, &["(/p+0x200)"]),
                lock("x+0x1 (/p+0x200) #5", LockKind::Read, &["(/p+0x200)"]),
                // No stack: its own site, the suffix kept.
                lock("y+0x2 (/p+0x300) #2 [process-shared]", LockKind::Mutex, &[]),
                // Only wrappers, or no debug information: as today.
                lock("z+0x3 (/p+0x999)", LockKind::Mutex, &["(/p+0x400)"]),
                lock("(/q+0x10)", LockKind::Spin, &["(/q+0x10)"]),
            ],
        );
        rename(&mut p, &symbols);
        let names: Vec<&str> = p.locks.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "prog::worker at src/main.rs:10 (/p+0x100)",
                "Queue::push(int) at src/queue.cc:30 (/p+0x300)",
                "prog::worker at src/main.rs:10 (/p+0x100) #2",
                "prog::reader at src/main.rs:20 (/p+0x200)",
                "prog::reader at src/main.rs:20 (/p+0x200)",
                "prog::reader at src/main.rs:20 (/p+0x200) #2",
                "Queue::push(int) at src/queue.cc:30 (/p+0x300) [process-shared]",
                "z+0x3 (/p+0x999)",
                "(/q+0x10)",
            ]
        );
        // Stacks stay raw; renaming again changes nothing.
        assert_eq!(p.locks[0].stack[1], raw);
        let again = p.clone();
        rename(&mut p, &symbols);
        assert_eq!(p, again);
        // The frames of a stack, wrappers marked, inlined functions first.
        let frames = symbols.stack(&again.locks[0].stack);
        let marks: Vec<(bool, bool)> = frames.iter().map(|f| (f.wrapper, f.inlined)).collect();
        assert_eq!(
            marks,
            [
                (true, false),
                (true, false),
                (true, true),
                (true, true),
                (false, false)
            ]
        );
        assert_eq!(frames[0].text(), libc);
        assert_eq!(
            frames[4].text(),
            "prog::worker at src/main.rs:10 (/p+0x100)"
        );
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
