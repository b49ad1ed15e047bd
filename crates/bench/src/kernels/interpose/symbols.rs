//! Naming recorded locks by their users' source lines: the first frame
//! past the wrappers of libc and of the C++ and Rust standard libraries,
//! symbolized with `addr2line`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use symmetry_locks::spin_then_block::profiler::{LockKind, Profile};

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
}
