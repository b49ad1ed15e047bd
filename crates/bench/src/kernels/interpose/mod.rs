//! Running unmodified programs under `libsymmetry_interpose.so`: finding
//! the library and the program, refusing what `LD_PRELOAD` cannot reach,
//! naming recorded locks by their users' source lines (past the wrappers
//! of libc and of the C++ and Rust standard libraries), timing a run in
//! each of the library's modes with its output digested, and choosing the
//! spin policy a recorded profile recommends. `symmetry profile` and the
//! `interpose-apps` experiment are built on it.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use symmetry_locks::spin_then_block::profiler::Profile;
use symmetry_models::competitive::{Analysis, LockCosts, Strategy};

mod run;
mod symbols;
pub use run::*;
pub use symbols::*;

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

    /// The library is linked into this harness (for its names and
    /// constants), and with it its exported `pthread_*` and `syscall`
    /// wrappers: linked into an executable instead of preloaded, it must
    /// pass every call straight through and record nothing, or the
    /// harness would profile its own locks (a cost in every measurement,
    /// entries in the profiles its experiments read, and recording from
    /// inside the emulated scheduler's signal handler, which can wait for
    /// the allocator's lock the interrupted code holds).
    #[test]
    fn linked_into_the_harness_the_library_records_nothing() {
        use symmetry_locks::spin_then_block::profiler;
        let m = std::sync::Mutex::new(0u64);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..50_000 {
                        *m.lock().unwrap() += 1;
                    }
                });
            }
        });
        let theirs: Vec<String> = profiler::snapshot()
            .locks
            .iter()
            .filter(|l| {
                l.blocker == symmetry_interpose::BLOCKER
                    || l.blocker == symmetry_interpose::FUTEX_BLOCKER
            })
            .map(|l| l.name.clone())
            .collect();
        assert!(
            theirs.is_empty(),
            "the harness profiled its own locks: {theirs:?}"
        );
    }
}
