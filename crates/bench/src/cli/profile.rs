//! `symmetry profile [--out FILE] [--lock NAME] -- CMD ARGS...`: runs an unmodified
//! program under `libsymmetry_interpose.so` (its pthread mutexes profiled
//! in KLMO91's lock-waiting-time format), names each lock by its
//! acquisition site (a function and line where the object has debug
//! information), and prices every spin-or-block policy on the result, as
//! `symmetry analyze` does. The analysis goes to stderr, so the program's
//! own output is untouched. With `--lock NAME` the program runs instead on
//! that registry lock (the library's replace mode) and its wall time is
//! printed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus};

use symmetry_locks::spin_then_block::profiler::Profile;

/// Name of the interposition library.
pub const LIBRARY: &str = "libsymmetry_interpose.so";

/// Environment variable that names the library's path explicitly.
pub const LIBRARY_ENV: &str = "SYMMETRY_INTERPOSE_LIB";

/// Arguments of `symmetry profile`.
#[derive(clap::Args, Debug)]
pub struct ProfileArgs {
    /// Where the profile is written (CSV, the `symmetry analyze` format).
    #[arg(long, default_value = "lock-profile.csv")]
    pub out: PathBuf,
    /// The interposition library (default: $SYMMETRY_INTERPOSE_LIB, else
    /// libsymmetry_interpose.so next to this binary).
    #[arg(long)]
    pub lib: Option<PathBuf>,
    /// How many locks to list.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Replace mode: run every normal pthread mutex of the program on this
    /// registry lock (`mcs`, `clh`, `ticket`, `spin-then-block:random-walk`,
    /// ...) instead of profiling glibc's; prints the wall time.
    #[arg(long, value_name = "NAME")]
    pub lock: Option<String>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// Runs `symmetry profile`: exits with the program's own status (128 +
/// the signal if a signal ended it), or 1 with a message on stderr if the
/// profile could not be taken.
pub fn main(args: ProfileArgs) -> ExitCode {
    match run(args) {
        Ok(status) => exit_code(status),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The exit code a shell would report for `status`.
fn exit_code(status: ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => ExitCode::from(c.clamp(0, 255) as u8),
        (None, Some(sig)) => ExitCode::from((128 + sig).clamp(0, 255) as u8),
        _ => ExitCode::FAILURE,
    }
}

fn run(args: ProfileArgs) -> Result<ExitStatus, String> {
    let lib = library(args.lib.as_deref())?;
    let (program, rest) = args
        .command
        .split_first()
        .ok_or("no command given: `symmetry profile -- CMD ARGS...`")?;
    let path = resolve(program)?;
    check_dynamic(&path)?;
    if let Some(name) = &args.lock {
        return replace(&lib, &path, program, rest, name);
    }
    match std::fs::remove_file(&args.out) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot replace {}: {e}", args.out.display())),
    }
    let out = absolute(&args.out)?;
    let status = Command::new(&path)
        .args(rest)
        .env("LD_PRELOAD", preload_with(&lib))
        .env(symmetry_interpose::PROFILE_ENV, &out)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", path.display()))?;
    let shown = program.to_string_lossy();
    if !out.exists() {
        let why = format!(
            "{shown} recorded no contended pthread mutex acquisition: it uses no \
             pthread mutex, its threads never waited for one, or it ended without \
             exit() (killed, or _exit), so no profile was written to {}",
            out.display()
        );
        if status.success() {
            return Err(why);
        }
        // The program failed: its status is the answer, with the note.
        eprintln!("{why}; {shown} exited with {status}");
        return Ok(status);
    }
    let mut profile = Profile::read(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    symbolize(&mut profile);
    std::fs::write(&out, profile.to_csv())
        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    // On stderr: the program's stdout stays its own (pipes and
    // redirections see exactly what it wrote).
    eprint!(
        "{}",
        crate::kernels::klmo91::analyze_text(&profile, &shown, None, args.top)
    );
    eprintln!("profile: {}", out.display());
    if !status.success() {
        eprintln!("{shown} exited with {status}");
    }
    Ok(status)
}

/// Replace mode: runs the program with every normal mutex on `name`.
fn replace(
    lib: &Path,
    path: &Path,
    program: &OsString,
    rest: &[OsString],
    name: &str,
) -> Result<ExitStatus, String> {
    if name != "glibc" && symmetry_interpose::replace::algorithm(name).is_none() {
        let names: Vec<&str> = symmetry_interpose::replace::algorithms()
            .map(|a| a.name)
            .collect();
        return Err(format!(
            "--lock {name}: not a lock the library can run; accepted: glibc, {}",
            names.join(", ")
        ));
    }
    let t0 = std::time::Instant::now();
    let status = Command::new(path)
        .args(rest)
        .env("LD_PRELOAD", preload_with(lib))
        .env(symmetry_interpose::LOCK_ENV, name)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", path.display()))?;
    let shown = program.to_string_lossy();
    eprintln!(
        "{shown} ran on `{name}` in {:.3} s ({status})",
        t0.elapsed().as_secs_f64()
    );
    Ok(status)
}

/// `LD_PRELOAD` with the library first, keeping what was there.
fn preload_with(lib: &Path) -> OsString {
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
fn library(given: Option<&Path>) -> Result<PathBuf, String> {
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

fn absolute(p: &Path) -> Result<PathBuf, String> {
    std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()))
}

/// The program as `execvp` would find it.
fn resolve(program: &OsString) -> Result<PathBuf, String> {
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
fn check_dynamic(path: &Path) -> Result<(), String> {
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
    let u16_at = |o: usize| -> Option<u64> {
        let s: [u8; 2] = b.get(o..o + 2)?.try_into().ok()?;
        Some(u64::from(if le {
            u16::from_le_bytes(s)
        } else {
            u16::from_be_bytes(s)
        }))
    };
    let u32_at = |o: usize| -> Option<u64> {
        let s: [u8; 4] = b.get(o..o + 4)?.try_into().ok()?;
        Some(u64::from(if le {
            u32::from_le_bytes(s)
        } else {
            u32::from_be_bytes(s)
        }))
    };
    let u64_at = |o: usize| -> Option<u64> {
        let s: [u8; 8] = b.get(o..o + 8)?.try_into().ok()?;
        Some(if le {
            u64::from_le_bytes(s)
        } else {
            u64::from_be_bytes(s)
        })
    };
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
fn symbolize(profile: &mut Profile) {
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
fn site_of(name: &str) -> Option<(PathBuf, u64)> {
    let inner = name.get(name.find('(')? + 1..)?;
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
}
