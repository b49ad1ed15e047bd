//! `symmetry`: re-runs the experiments of the symmetry papers on this
//! machine and writes CSV results, SVG plots and a report (SPEC §3).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};

use symmetry_bench::experiments::{self, Ctx, Experiment};
use symmetry_bench::output::machine::{Machine, iso8601_utc};
use symmetry_bench::output::provenance::{Provenance, one_placement, probe_span};
use symmetry_bench::output::{data, plot, report};
use symmetry_bench::registry::locks as locks_table;

#[derive(Parser, Debug)]
#[command(
    name = "symmetry",
    version,
    about = "Synchronization and lightweight-thread experiments of five classic papers, re-run on this machine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Debug, Clone)]
struct Common {
    /// Shorter budgets and fewer points: every verdict in minutes, not hours (README: measured times).
    #[arg(long)]
    quick: bool,
    /// Output directory.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Do not draw progress bars.
    #[arg(long)]
    no_progress: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the experiments, one per line: id, then title.
    List,
    /// List the lock registry: name, family, FIFO or not.
    Locks,
    /// Run experiments by id, writing OUT/ID.csv, OUT/ID.svg and OUT/machine.json.
    Run {
        /// Experiment ids (see `symmetry list`).
        #[arg(required = true)]
        ids: Vec<String>,
        /// Thread counts, e.g. `1,2,4` or `1-4,8` (default: 1..2x cores plus 4x cores).
        #[arg(long, value_parser = parse_threads)]
        threads: Option<ThreadList>,
        /// Locks to include, comma-separated registry names (see `symmetry locks`).
        #[arg(long, value_delimiter = ',')]
        locks: Option<Vec<String>>,
        /// Record the run under OUT/machine.json as it is instead of writing a new one. `reproduce`
        /// passes it to the process it starts for each experiment, so every result names the
        /// `reproduce` command and its start.
        #[arg(long, hide = true)]
        keep_machine: bool,
        /// When the placement probe moves during an experiment, exit with status 75 and write
        /// nothing instead of running it again in this process (`reproduce` then starts a
        /// fresh one with `--second-run`).
        #[arg(long, hide = true, conflicts_with = "second_run")]
        retake_by_exit: bool,
        /// This is the second run of the experiment (`reproduce`'s retake): record it as such
        /// and do not run it again.
        #[arg(long, hide = true)]
        second_run: bool,
        /// One of the two passes `reproduce` measures each experiment in: take about half the
        /// repeats (`Ctx::half`).
        #[arg(long, hide = true)]
        half: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Run every experiment, each in a process of its own, then write OUT/REPORT.md and
    /// OUT/REPORT.html.
    Reproduce {
        #[command(flatten)]
        common: Common,
    },
    /// Measure this machine's constants (atomic RMW, cache-line round trip, block+wake, C in spins).
    Calibrate {
        #[command(flatten)]
        common: Common,
    },
    /// Price every KLMO91 spin policy on a recorded lock-wait profile (Tables 1-2) and recommend a spin
    /// threshold per lock. Record one with SYMMETRY_LOCK_PROFILE=FILE (or the profiler API).
    Analyze {
        /// The profile file (`# symmetry lock-wait profile, version 1`).
        profile: PathBuf,
        /// C in spins for every lock, instead of the C each lock recorded.
        #[arg(long, value_parser = parse_c)]
        c: Option<u32>,
        /// How many locks to list.
        #[arg(long, default_value_t = 10)]
        top: usize,
    },
    /// Run an unmodified program with its pthread mutexes profiled (LD_PRELOAD), then price every
    /// spin policy per lock as `analyze` does: `symmetry profile [--out FILE] -- CMD ARGS...`.
    Profile(symmetry_bench::cli::profile::ProfileArgs),
    /// Shared-memory Active Messages jobs: `am spawn -n N APP` starts N processes that run one of
    /// LC98's applications; `am list`, `am clean`.
    #[command(subcommand)]
    Am(symmetry_bench::cli::am::AmCommand),
    /// Judge two result directories (e.g. `reference` and `results`) with this build's rules and
    /// list the experiments whose verdicts differ, each rule that moved, and each run's placement
    /// probe. Exit status 0 when every verdict agrees, 1 when some differ, 2 when it cannot compare
    /// (no machine.json, an unreadable CSV, no experiment in common).
    Compare(symmetry_bench::cli::compare::CompareArgs),
    /// Rebuild OUT/REPORT.md and OUT/REPORT.html from the CSV files already in OUT.
    Report {
        /// Directory holding the CSV files and machine.json.
        #[arg(long, default_value = "results")]
        out: PathBuf,
    },
}

/// A `--threads` value: one argument holding a whole list. (A bare
/// `Vec<usize>` would make clap expect one count per occurrence.)
#[derive(Debug, Clone)]
struct ThreadList(Vec<usize>);

/// Parses `1,2,4` and ranges `1-4`; refuses 0, empty lists and empty
/// items (`1,,2`, a trailing comma).
fn parse_threads(s: &str) -> Result<ThreadList, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(format!(
                "`{s}` has an empty item (expected counts separated by single commas, e.g. `1,2,4` or `1-4,8`)"
            ));
        }
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let num = |x: &str| {
            x.parse::<usize>().map_err(|_| {
                format!("`{x}` is not a thread count (expected e.g. `1,2,4` or `1-4`)")
            })
        };
        let (lo, hi) = (num(lo)?, num(hi)?);
        if lo == 0 {
            return Err("thread counts start at 1 (`0` threads cannot run anything)".into());
        }
        if hi < lo {
            return Err(format!(
                "range `{part}` is empty (its end is below its start)"
            ));
        }
        if hi > 4096 {
            return Err(format!(
                "{hi} threads is more than this harness will start (at most 4096)"
            ));
        }
        out.extend(lo..=hi);
    }
    if out.is_empty() {
        return Err("no thread counts given".into());
    }
    out.sort_unstable();
    out.dedup();
    Ok(ThreadList(out))
}

/// Parses `--c`: a positive number of spins.
fn parse_c(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(0) => Err("C must be at least 1 spin".into()),
        Ok(c) => Ok(c),
        Err(_) => Err(format!(
            "`{s}` is not a number of spins (expected a positive integer, e.g. 400)"
        )),
    }
}

fn ctx(common: &Common, threads: Option<Vec<usize>>, locks: Option<Vec<String>>) -> Ctx {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ctx {
        quick: common.quick,
        threads,
        locks,
        cores,
        progress: !common.no_progress,
        out: Some(common.out.clone()),
        half: false,
    }
}

fn ensure_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create output directory {}: {e}", dir.display()))
}

/// How `run_one` runs an experiment again when the placement probe moved
/// during it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retake {
    /// In this process (`symmetry run`).
    InProcess,
    /// By exiting with [`RETAKE_EXIT`] and writing nothing, for `reproduce`
    /// to start a fresh process with [`Retake::Never`]: a reproduction
    /// runs every experiment in a process of its own, and a retake in the
    /// same process would run after a whole run's heap, threads and
    /// installed constants.
    ByExit,
    /// Not at all: this is the second run (`reproduce`'s fresh process).
    Never,
}

/// The exit status of `run ... --retake-by-exit` when the probe moved and
/// the experiment is to be run again in a new process.
const RETAKE_EXIT: u8 = 75;

/// What `run_one` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ran {
    /// Wrote the experiment's results.
    Kept,
    /// Wrote nothing: the probe moved and [`Retake::ByExit`] asks for a
    /// new process.
    RunAgain,
}

/// Runs one experiment: CSV and its provenance first, then the figure
/// drawn from the CSV.
///
/// The placement probe is taken before and after the run. If it moved by
/// more than [`symmetry_bench::output::provenance::PROBE_CHANGE`] (the host
/// moved the virtual CPUs during the run, so the points were measured on
/// two different machines), the experiment is run once more (`retake`),
/// except in a `--quick` run of one measured in one process (its
/// `Schedule::one_process_when_quick`). The second run is kept: the choice
/// rests on the probe and the experiment's declaration, never on what the
/// run measured or how long it took, so a retake cannot select a verdict.
/// Its provenance counts the runs and says whether the placement still
/// moved.
fn run_one(
    e: &Experiment,
    ctx: &Ctx,
    out: &Path,
    machine: &Machine,
    retake: Retake,
) -> Result<Ran, String> {
    let mut runs = if retake == Retake::Never { 2 } else { 1 };
    let (rows, provenance) = loop {
        let probe_before = symmetry_bench::kernels::machine::core_probe_ns();
        let started = iso8601_utc(std::time::SystemTime::now());
        let t = Instant::now();
        let rows = (e.run)(ctx).map_err(|err| format!("{}: {err}", e.id))?;
        let seconds = t.elapsed().as_secs_f64();
        let probe_after = symmetry_bench::kernels::machine::core_probe_ns();
        let p = Provenance::new(e.id, machine, started, seconds)
            .with_probe(probe_before, probe_after)
            .with_runs(runs);
        if runs == 2 || !p.placement_changed() {
            break (rows, p);
        }
        let moved = format!(
            "      {}: the cache-line round trip between CPUs 0 and 1 moved from {:.0} to {:.0} ns during the run",
            e.id,
            probe_before.unwrap_or(f64::NAN),
            probe_after.unwrap_or(f64::NAN)
        );
        if ctx.quick && e.schedule.one_process_when_quick {
            eprintln!("{moved}; a quick run does not run it again");
            break (rows, p);
        }
        if retake == Retake::ByExit {
            eprintln!("{moved}; running it again in a new process");
            return Ok(Ran::RunAgain);
        }
        eprintln!("{moved}; running it again");
        runs += 1;
    };
    let csv = out.join(format!("{}.csv", e.id));
    data::write_csv(&csv, &rows)?;
    provenance.write(out)?;
    let rows = data::read_csv(&csv)?;
    plot::write_svg(
        &out.join(format!("{}.svg", e.id)),
        &(e.figure)(&rows, machine),
    )?;
    Ok(Ran::Kept)
}

/// `--keep-machine`: the kept description must name this build and mode,
/// or the results would be recorded under another commit or mode.
fn kept_machine_matches(m: Machine, ctx: &Ctx) -> Result<Machine, String> {
    let commit = option_env!("SYMMETRY_GIT").unwrap_or("unknown");
    let mode = |quick: bool| if quick { "quick" } else { "full" };
    if m.git_commit != commit || m.quick != ctx.quick {
        return Err(format!(
            "--keep-machine: machine.json records commit {} ({} mode), but this is commit {commit} ({} mode)",
            m.git_commit,
            mode(m.quick),
            mode(ctx.quick)
        ));
    }
    Ok(m)
}

/// Describes this machine and this run, and writes it to `out/machine.json`.
fn new_machine(ctx: &Ctx, out: &Path) -> Result<Machine, String> {
    ensure_dir(out)?;
    let machine = Machine::detect(ctx.quick);
    machine.write_json(out)?;
    Ok(machine)
}

fn run_many(
    list: &[&'static Experiment],
    ctx: &Ctx,
    out: &Path,
    machine: &Machine,
    retake: Retake,
) -> Result<Ran, String> {
    ensure_dir(out)?;
    for (i, e) in list.iter().enumerate() {
        let t = Instant::now();
        eprintln!("[{}/{}] {} — {}", i + 1, list.len(), e.id, e.title);
        if run_one(e, ctx, out, machine, retake)? == Ran::RunAgain {
            return Ok(Ran::RunAgain);
        }
        eprintln!(
            "      done in {:.1} s -> {}",
            t.elapsed().as_secs_f64(),
            out.join(format!("{}.csv", e.id)).display()
        );
    }
    Ok(Ran::Kept)
}

/// The folder under `reproduce`'s output that holds the second pass's
/// files (its CSVs, plots and provenance as measured, before the join).
const SECOND_PASS: &str = "second-pass";

/// `symmetry reproduce`: every experiment in two passes, each experiment
/// in a child process of its own (`symmetry run ID --keep-machine
/// --half`), then the two passes' points joined, then the report.
///
/// A fresh process per experiment makes each one's conditions those of a
/// `symmetry run ID`: no heap layout, thread pool, page cache or mapping
/// left over from the experiments before it. It also keeps one
/// experiment's crash from ending the others: a failed experiment's old
/// files are removed, the report lists it as not run, and the command
/// fails naming it.
///
/// Two passes, because the repeats of one process do not show how much a
/// result moves between processes and over minutes: back-to-back
/// reproductions in one pass each disagreed on rules whose intervals, from
/// one process's repeats, did not overlap between the runs (notes of #12).
/// The second pass runs every experiment again, after the rest of its
/// group's first pass, each pass with about half the repeats
/// ([`Ctx::rounds`]); [`data::join_passes`] then makes each point's
/// interval span both processes. The rules judge the joined points. Both
/// passes over the other experiments come first, then both over
/// the ones that run last (`Schedule::last`). An experiment measured in
/// one process when quick (`Schedule::one_process_when_quick`) is, in a
/// quick run, with all its repeats.
fn reproduce(common: &Common) -> Result<(), String> {
    let t = Instant::now();
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find this program's own path to re-run it: {e}"))?;
    let ctx = ctx(common, None, None);
    let machine = new_machine(&ctx, &common.out)?;
    let second = common.out.join(SECOND_PASS);
    ensure_dir(&second)?;
    machine.write_json(&second)?;
    let order = experiments::run_order();
    let two = |e: &Experiment| !(common.quick && e.schedule.one_process_when_quick);
    // Both passes over the other experiments, then both over the ones
    // that run last, which leave the kernel's memory in another state
    // for whatever runs after them.
    let (heavy, light): (Vec<&Experiment>, Vec<&Experiment>) =
        order.iter().copied().partition(|e| e.schedule.last);
    let mut steps: Vec<(&Experiment, bool)> = Vec::new();
    for group in [light, heavy] {
        steps.extend(group.iter().map(|&e| (e, false)));
        steps.extend(group.iter().filter(|e| two(e)).map(|&e| (e, true)));
    }
    for e in &order {
        remove_results(&second, e.id);
    }
    let mut failed: Vec<String> = Vec::new();
    // The environment an experiment of the first pass installs
    // (`cs-calibrate`'s constants), for the experiments after it and for
    // the whole second pass (in one process they were shared in memory).
    let mut calibration: Vec<(String, String)> = Vec::new();
    for (i, &(e, second_pass)) in steps.iter().enumerate() {
        if !second_pass {
            eprintln!("[{}/{}] {} — {}", i + 1, steps.len(), e.id, e.title);
            if !run_child(&exe, common, e, &common.out, two(e), &calibration)? {
                remove_results(&common.out, e.id);
                failed.push(e.id.to_string());
            } else if let Some(installs) = e.schedule.installs {
                match installed_env(&common.out, e, installs) {
                    Ok(env) => calibration = env,
                    Err(err) => eprintln!(
                        "      {err}; the experiments after it measure their own constants"
                    ),
                }
            }
        } else if !failed.iter().any(|f| f == e.id) {
            eprintln!(
                "[{}/{}] {} (second pass) — {}",
                i + 1,
                steps.len(),
                e.id,
                e.title
            );
            if !run_child(&exe, common, e, &second, true, &calibration)? {
                remove_results(&second, e.id);
                failed.push(format!("{} (second pass)", e.id));
            }
        }
    }
    for e in &order {
        if failed.iter().any(|f| f == e.id) {
            continue;
        }
        if let Err(err) = join_second_pass(e, &common.out, &second, &machine, two(e)) {
            eprintln!(
                "      {}: cannot join its two passes ({err}); the report shows what is there",
                e.id
            );
            // Say so in its provenance, if there is one to amend.
            if let Ok(Some(mut p)) = Provenance::read(&common.out, e.id) {
                p.second_pass = None;
                p.one_pass_points = 0;
                p.not_joined = Some(format!("joining its two passes failed: {err}"));
                if let Err(w) = p.write(&common.out) {
                    eprintln!("      {w}");
                }
            }
            failed.push(format!("{} (join)", e.id));
        }
    }
    build_report(&common.out)?;
    eprintln!("reproduce finished in {:.0} s", t.elapsed().as_secs_f64());
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} steps failed: {} (see their errors above; the report lists an experiment whose \
             first pass failed as not run)",
            failed.len(),
            steps.len(),
            failed.join(", ")
        ))
    }
}

/// Runs experiment `e` in a child process writing to `out` (retaken in a
/// fresh process if the placement probe moved, see `run_one`), with
/// `--half` if `half`; whether it succeeded. An error only if the child
/// could not be started.
fn run_child(
    exe: &Path,
    common: &Common,
    e: &Experiment,
    out: &Path,
    half: bool,
    calibration: &[(String, String)],
) -> Result<bool, String> {
    let started = Instant::now();
    let spawn = |retake: &str| {
        let mut child = std::process::Command::new(exe);
        child
            .args(["run", e.id, "--keep-machine", retake, "--out"])
            .arg(out);
        if half {
            child.arg("--half");
        }
        if common.quick {
            child.arg("--quick");
        }
        if common.no_progress {
            child.arg("--no-progress");
        }
        child.envs(calibration.iter().map(|(k, v)| (k, v)));
        end_with_parent(&mut child);
        // The child prints its own `[1/1]` line; the caller's numbers the
        // whole reproduction.
        child.status()
    };
    // A moved placement probe: the child wrote nothing and asks for a
    // fresh process, like every experiment's first run gets.
    let status = match spawn("--retake-by-exit") {
        Ok(s) if s.code() == Some(i32::from(RETAKE_EXIT)) => spawn("--second-run"),
        other => other,
    };
    match status {
        Ok(s) if s.success() => {
            eprintln!(
                "      {} finished in {:.1} s",
                e.id,
                started.elapsed().as_secs_f64()
            );
            Ok(true)
        }
        Ok(s) => {
            eprintln!("      {} failed ({s}); going on with the others", e.id);
            Ok(false)
        }
        Err(err) => Err(format!(
            "cannot start {} for {}: {err}",
            exe.display(),
            e.id
        )),
    }
}

/// Joins experiment `e`'s second pass (in `second`) into its first (in
/// `out`): the joined rows replace the first pass's CSV, its provenance
/// records the second pass, and the plot is drawn again from the joined
/// CSV. Where there is no second pass (`two` false, or it failed), the
/// first pass's rows stand and the provenance says why.
fn join_second_pass(
    e: &Experiment,
    out: &Path,
    second: &Path,
    machine: &Machine,
    two: bool,
) -> Result<(), String> {
    let Some(mut first) = Provenance::read(out, e.id)? else {
        return Err(format!("{}: no provenance record after its run", e.id));
    };
    let csv = out.join(format!("{}.csv", e.id));
    let rows = data::read_csv(&csv)?;
    let joined = match (two, Provenance::read(second, e.id)?) {
        (false, _) => {
            first.not_joined = Some(
                "a quick reproduction measures this experiment in one process, with all its repeats \
                 (one run of it takes minutes)"
                    .into(),
            );
            None
        }
        (true, None) => {
            first.not_joined = Some("its second process failed".into());
            None
        }
        (true, Some(p)) => {
            let other = data::read_csv(&second.join(format!("{}.csv", e.id)))?;
            let joined = data::join_passes(&rows, &other);
            first.second_pass = Some(Box::new(p));
            first.one_pass_points = joined.one_pass;
            Some(joined.rows)
        }
    };
    if let Some(rows) = &joined {
        data::write_csv(&csv, rows)?;
    }
    first.write(out)?;
    let rows = data::read_csv(&csv)?;
    plot::write_svg(
        &out.join(format!("{}.svg", e.id)),
        &(e.figure)(&rows, machine),
    )
}

/// The environment experiment `e` installs (`Schedule::installs`), read
/// from the CSV it wrote to `out`.
fn installed_env(
    out: &Path,
    e: &Experiment,
    installs: symmetry_bench::harness::Installs,
) -> Result<symmetry_bench::harness::Env, String> {
    let csv = out.join(format!("{}.csv", e.id));
    installs(&data::read_csv(&csv)?)
        .ok_or_else(|| format!("{}: nothing to install in it", csv.display()))
}

/// Makes `child` receive SIGTERM when this process ends, so that killing
/// `reproduce` (a `timeout`, a `kill` of its pid) does not leave an
/// experiment measuring and writing its CSV on its own. (A child ended
/// so runs no destructors: a scratch directory or a program it started
/// may be left behind, as after any SIGTERM.)
fn end_with_parent(child: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid is async-signal-safe; it runs here, before the fork.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: prctl, getppid and _exit
    // are, and it touches no lock or allocation.
    unsafe {
        child.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have ended before the prctl took effect.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Removes an experiment's result files from `out`, so that a failed run
/// does not leave an earlier run's CSV to be reported as this one's.
fn remove_results(out: &Path, id: &str) {
    // Besides the CSV, its plot and provenance, the recorded lock profiles
    // some experiments write beside them (`ID-NAME.profile.csv`).
    let prefix = format!("{id}-");
    let profiles = std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.starts_with(&prefix) && name.ends_with(".profile.csv"));
    let names: Vec<String> = [
        format!("{id}.csv"),
        format!("{id}.svg"),
        Provenance::file_name(id),
    ]
    .into_iter()
    .chain(profiles)
    .collect();
    for name in names {
        let path = out.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => eprintln!("      cannot remove {}: {e}", path.display()),
        }
    }
}

/// Builds the report from the files in `out` (never from memory).
fn build_report(out: &Path) -> Result<(), String> {
    let machine = Machine::read_results(out)?;
    let mut sections = Vec::new();
    let mut missing = Vec::new();
    let mut probes = Vec::new();
    for e in experiments::ALL {
        let csv = out.join(format!("{}.csv", e.id));
        if !csv.exists() {
            missing.push(e.id);
            continue;
        }
        let rows = data::read_csv(&csv)?;
        plot::write_svg(
            &out.join(format!("{}.svg", e.id)),
            &(e.figure)(&rows, &machine),
        )?;
        let mut section = e.section(&rows, &machine);
        let provenance = Provenance::read(out, e.id)?;
        if let Some(p) = &provenance {
            probes.extend(p.probes());
        }
        section.provenance = provenance.map(|p| p.markdown());
        sections.push(section);
    }
    if sections.is_empty() {
        return Err(format!(
            "no experiment results in {} (run `symmetry run ID --out {0}` or `symmetry reproduce --out {0}` first)",
            out.display()
        ));
    }
    let intro = report_intro(&machine, &missing, &probes);
    report::write_report(
        out,
        "symmetry — reproduction report",
        &intro,
        &machine,
        &sections,
    )?;
    eprintln!(
        "report: {} and {}",
        out.join("REPORT.md").display(),
        out.join("REPORT.html").display()
    );
    Ok(())
}

/// The report's introduction, generated from `machine.json`, the set of
/// experiments found and the placement probes their provenance recorded.
fn report_intro(machine: &Machine, missing: &[&str], probes: &[f64]) -> String {
    let code_list = |ids: &[&str]| {
        ids.iter()
            .map(|m| format!("`{m}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut intro = format!(
        "Each section puts a published claim beside what the run measured. Every claim is judged by a \
         declared rule over the data, printed beside its outcome; a rule holds or fails only when the \
         difference is larger than the spread of the run's own repeats, and is \"not distinguishable \
         here\" otherwise. Rules that need more of a machine (more cores, no hypervisor) than the one in \
         `machine.json` are \"not measurable here\". Numbers come from the CSV files next to this report, \
         whose provenance each section names; plots are drawn from them. Hollow markers are \
         oversubscribed points (more threads than the {} logical CPUs of the run).\n\n",
        machine.cores()
    );
    intro.push_str(&placement_words(probes));
    if !missing.is_empty() {
        intro.push_str(&format!(
            "Not run in this directory: {}.\n\n",
            code_list(missing)
        ));
    }
    if !experiments::PENDING.is_empty() {
        intro.push_str(&format!(
            "Planned experiments not built yet: {}.\n",
            code_list(experiments::PENDING)
        ));
    }
    intro
}

/// What the placement probes of a directory's runs say, as a paragraph of
/// the report's introduction (empty without a probe): the range they
/// span, and whether the CPUs stayed at one placement (every probe within
/// [`PROBE_CHANGE`](symmetry_bench::output::provenance::PROBE_CHANGE) of
/// every other, [`one_placement`]) or moved between the runs.
fn placement_words(probes: &[f64]) -> String {
    let Some((lo, hi)) = probe_span(probes.iter().copied()) else {
        return String::new();
    };
    let what = "The placement probe (the cache-line round trip between CPUs 0 and 1, taken before and \
                after each experiment, which tells how close to each other the host placed the two \
                CPUs)";
    if format!("{lo:.0}") == format!("{hi:.0}") {
        format!("{what} read {lo:.0} ns in every run of this directory.\n\n")
    } else if one_placement((lo, hi)) {
        format!("{what} stayed between {lo:.0} and {hi:.0} ns in every run of this directory.\n\n")
    } else {
        format!(
            "{what} ranged from {lo:.0} to {hi:.0} ns over the runs of this directory: the CPUs were \
             not always placed at the same distance from each other, so two sections may describe \
             different placements, and each names its own probe. `symmetry compare` says, for each \
             experiment whose verdict differs between two directories, whether both measured it at \
             one placement.\n\n"
        )
    }
}

/// `--locks` narrows only experiments that run locks: refuse it when an
/// experiment named has none (it would be ignored silently).
fn check_locks_apply(list: &[&Experiment]) -> Result<(), String> {
    let without: Vec<&str> = list
        .iter()
        .filter(|e| !e.uses_locks)
        .map(|e| e.id)
        .collect();
    if without.is_empty() {
        return Ok(());
    }
    let with: Vec<&str> = experiments::ALL
        .iter()
        .filter(|e| e.uses_locks)
        .map(|e| e.id)
        .collect();
    Err(format!(
        "--locks does not apply to {} (no lock is chosen there); it narrows only: {}",
        without.join(", "),
        with.join(", ")
    ))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `am-apps` may re-execute this binary as `symmetry am rank ...`.
    symmetry_bench::kernels::am_job::mark_harness_binary();
    // Record the process's CPU set before any measurement pins a thread.
    let _ = symmetry_bench::kernels::locks::allowed_cpus();
    let result = match cli.command {
        Command::List => {
            for e in experiments::ALL {
                println!("{}\t{} ({})", e.id, e.title, e.source);
            }
            Ok(())
        }
        Command::Locks => {
            for l in symmetry_locks::registry::ALL {
                println!(
                    "{}\t{:?}\t{}",
                    l.name,
                    l.kind,
                    if l.fifo { "fifo" } else { "unordered" }
                );
            }
            Ok(())
        }
        Command::Run {
            ids,
            threads,
            locks,
            keep_machine,
            retake_by_exit,
            second_run,
            half,
            common,
        } => {
            let mut list = Vec::new();
            let mut err = None;
            for id in &ids {
                match experiments::find(id) {
                    Some(e) => list.push(e),
                    None => {
                        err = Some(format!(
                            "unknown experiment `{id}`; accepted ids: {}",
                            experiments::ALL
                                .iter()
                                .map(|e| e.id)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                        break;
                    }
                }
            }
            if let Some(e) = err {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
            if let Some(l) = &locks {
                if let Err(e) = locks_table::select(Some(l)) {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
                if let Err(e) = check_locks_apply(&list) {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            }
            let ctx = Ctx {
                half,
                ..ctx(&common, threads.map(|t| t.0), locks)
            };
            let machine = if keep_machine {
                Machine::read_json(&common.out).and_then(|m| kept_machine_matches(m, &ctx))
            } else {
                new_machine(&ctx, &common.out)
            };
            let retake = match (retake_by_exit, second_run) {
                (true, _) => Retake::ByExit,
                (_, true) => Retake::Never,
                _ => Retake::InProcess,
            };
            match machine.and_then(|m| run_many(&list, &ctx, &common.out, &m, retake)) {
                Ok(Ran::RunAgain) => return ExitCode::from(RETAKE_EXIT),
                other => other.map(|_| ()),
            }
        }
        Command::Reproduce { common } => reproduce(&common),
        Command::Calibrate { common } => {
            let e = experiments::find("calibrate").expect("calibrate is in the catalogue");
            let ctx = ctx(&common, None, None);
            let run = new_machine(&ctx, &common.out)
                .and_then(|m| run_many(&[e], &ctx, &common.out, &m, Retake::InProcess))
                .map(|_| ());
            run.and_then(|()| {
                let rows = data::read_csv(&common.out.join("calibrate.csv"))?;
                let cal = symmetry_bench::kernels::klmo91::calibration_from(|m| {
                    rows.iter().find(|r| r.metric == m).map(|r| r.value)
                });
                for r in rows {
                    println!(
                        "{:<18} {:>12.2} {:<6} {}",
                        r.metric,
                        r.value,
                        r.unit,
                        symmetry_bench::kernels::machine::describe(&r.metric)
                    );
                }
                match cal {
                    Some(cal) => {
                        println!(
                            "# spin-then-block constants (KLMO91's C); set them for any program using the locks:"
                        );
                        println!("{}", symmetry_bench::kernels::klmo91::export_line(&cal));
                        Ok(())
                    }
                    None => Err("the spin length was not measured; no constants to export".into()),
                }
            })
        }
        Command::Analyze { profile, c, top } => {
            // Read here rather than with `Profile::read`, whose I/O error
            // already names the file: every message names it once.
            std::fs::read_to_string(&profile)
                .map_err(|e| format!("cannot read {}: {e}", profile.display()))
                .and_then(|text| {
                    symmetry_locks::spin_then_block::profiler::Profile::parse(&text)
                        .map_err(|e| format!("{}: {e}", profile.display()))
                })
                .map(|p| {
                    let label = profile.file_name().map_or_else(
                        || profile.display().to_string(),
                        |f| f.to_string_lossy().into_owned(),
                    );
                    print!(
                        "{}",
                        symmetry_bench::kernels::klmo91::analyze_text(&p, &label, c, top)
                    );
                })
        }
        Command::Report { out } => build_report(&out),
        Command::Profile(args) => return symmetry_bench::cli::profile::main(args),
        Command::Am(cmd) => return symmetry_bench::cli::am::main(cmd),
        Command::Compare(args) => return symmetry_bench::cli::compare::main(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Cli, Command, parse_threads};
    use clap::Parser;

    #[test]
    fn the_intro_says_whether_the_placement_moved() {
        use super::placement_words;
        assert_eq!(placement_words(&[]), "");
        let same = placement_words(&[80.2, 79.9]);
        assert!(same.contains("read 80 ns in every run"), "{same}");
        let one = placement_words(&[45.0, 50.0, 48.0]);
        assert!(one.contains("stayed between 45 and 50 ns"), "{one}");
        let moved = placement_words(&[45.0, 50.0, 405.0, f64::NAN]);
        assert!(moved.contains("ranged from 45 to 405 ns"), "{moved}");
        assert!(
            moved.contains("not always placed at the same distance"),
            "{moved}"
        );
    }

    #[test]
    fn threads_lists_and_ranges() {
        assert_eq!(parse_threads("1,2,4").unwrap().0, vec![1, 2, 4]);
        assert_eq!(parse_threads("1-3,8").unwrap().0, vec![1, 2, 3, 8]);
        assert!(parse_threads("0").unwrap_err().contains("start at 1"));
        assert!(parse_threads("x").is_err());
        assert!(parse_threads("4-2").is_err());
        assert!(parse_threads("").is_err());
    }

    /// The whole command line parses, including `--threads` (clap checks
    /// the field type only when the value is read).
    #[test]
    fn run_command_line_parses() {
        let cli = Cli::try_parse_from([
            "symmetry",
            "run",
            "spin-counter",
            "--threads",
            "1-2,8",
            "--locks",
            "tas,mcs",
            "--quick",
        ])
        .expect("valid command line");
        match cli.command {
            Command::Run {
                ids,
                threads,
                locks,
                keep_machine,
                retake_by_exit,
                second_run,
                half,
                common,
            } => {
                assert_eq!(ids, vec!["spin-counter".to_string()]);
                assert!(!retake_by_exit && !second_run && !half);
                assert!(!keep_machine, "only reproduce's children keep machine.json");
                assert_eq!(threads.map(|t| t.0), Some(vec![1, 2, 8]));
                assert_eq!(locks, Some(vec!["tas".to_string(), "mcs".to_string()]));
                assert!(common.quick);
            }
            other => panic!("parsed as {other:?}"),
        }
        assert!(
            Cli::try_parse_from(["symmetry", "run", "spin-counter", "--threads", "0"]).is_err()
        );
    }
}
