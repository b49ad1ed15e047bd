//! `symmetry profile [--out FILE] [--json FILE] [--lock NAME] -- CMD ARGS...`:
//! runs an unmodified program under `libsymmetry_interpose.so` (its locks
//! profiled in KLMO91's lock-waiting-time format), names each lock by its
//! user's acquisition site (the first frame of its first contended stack
//! past libc, the C++ and Rust standard libraries and lock crates: a
//! function and line where the object has debug information), and prices
//! every spin-or-block policy on the result, as `symmetry analyze` does.
//! The analysis goes to stderr, so the program's own output is untouched;
//! for the same reason `--json` names a file rather than printing to
//! stdout. With `--lock NAME` the program runs instead on
//! that registry lock (the library's replace mode) and its wall time is
//! printed. A FIFO lock (`ticket`, `mcs`, ...) then waits politely (its
//! `try_lock` polled for about C spins, then a futex sleep), so a
//! program with more threads than cores is not slowed by orders of
//! magnitude by a descheduled waiter at the head of the queue; `--pure`
//! runs the algorithm's own waiting, as the paper wrote it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus};

use symmetry_locks::spin_then_block::profiler::Profile;

use crate::kernels::interpose::{
    absolute, check_dynamic, library, preload_with, resolve, symbolize,
};
use crate::kernels::klmo91;

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
    /// After the first table, the stacks of this many locks (those with the
    /// most total wait); wrapper frames, skipped in the lock's name, are
    /// marked `·`. The profile file keeps every lock's raw stack.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub stacks: usize,
    /// Also write the analysis as one JSON document to this file (as
    /// `symmetry analyze --json` prints it; a file, so that nothing is
    /// added to the program's standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Replace mode: run every normal pthread mutex of the program on this
    /// registry lock (`mcs`, `clh`, `ticket`, `spin-then-block:random-walk`,
    /// ...) instead of profiling glibc's; prints the wall time.
    #[arg(long, value_name = "NAME")]
    pub lock: Option<String>,
    /// With `--lock`: wait as the algorithm itself does (a FIFO spin lock
    /// spins in its queue, and convoys behind a descheduled waiter when
    /// threads outnumber cores) instead of replace mode's default for FIFO
    /// locks, which polls `try_lock` and then sleeps, giving up FIFO order.
    #[arg(long, requires = "lock")]
    pub pure: bool,
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
        return replace(&lib, &path, program, rest, name, args.pure);
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
            "{shown} recorded no contended lock acquisition: it takes no pthread \
             mutex, rwlock or spin lock and blocks on no futex, its threads never \
             waited for one, or it ended without exit() (killed, or _exit), so no \
             profile was written to {}",
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
    let symbols = symbolize(&mut profile);
    std::fs::write(&out, profile.to_csv())
        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    let priced = klmo91::price(&profile, &shown, None, &symbols);
    // On stderr: the program's stdout stays its own (pipes and
    // redirections see exactly what it wrote).
    eprint!(
        "{}",
        klmo91::analyze_text(&profile, &priced, args.top, args.stacks)
    );
    eprintln!("profile: {}", out.display());
    if let Some(json) = &args.json {
        std::fs::write(json, priced.report.to_json())
            .map_err(|e| format!("cannot write {}: {e}", json.display()))?;
        eprintln!("json: {}", json.display());
    }
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
    pure: bool,
) -> Result<ExitStatus, String> {
    use symmetry_interpose::replace::{WAIT_ENV, Waiting, algorithm, waiting};
    let wait = if pure { "pure" } else { "" };
    let policy = match algorithm(name) {
        Some(a) => match waiting(a, Some(wait))? {
            Waiting::Pure => ", the algorithm's own waiting",
            Waiting::Polite => {
                ", polite waiting (try_lock for C spins, then sleep; not FIFO; --pure for the paper's)"
            }
        },
        None => "",
    };
    if name != "glibc" && algorithm(name).is_none() {
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
        .env(WAIT_ENV, wait)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", path.display()))?;
    let shown = program.to_string_lossy();
    eprintln!(
        "{shown} ran on `{name}`{policy} in {:.3} s ({status})",
        t0.elapsed().as_secs_f64()
    );
    Ok(status)
}
