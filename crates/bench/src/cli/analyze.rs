//! `symmetry analyze PROFILE [--c N] [--top N] [--stacks N] [--json]`:
//! prices every KLMO91 spin policy on a recorded lock-wait profile (a file
//! of format version 2, or an older version-1 file, whose counts show as
//! unknown) and recommends a policy and a threshold per lock.

use std::path::PathBuf;

use symmetry_locks::spin_then_block::profiler::Profile;

use crate::kernels::interpose::Symbols;
use crate::kernels::klmo91;

/// Arguments of `symmetry analyze`.
#[derive(clap::Args, Debug)]
pub struct AnalyzeArgs {
    /// The profile file (`# symmetry lock-wait profile, version 2`, or
    /// version 1), as `symmetry profile` writes it.
    pub profile: PathBuf,
    /// C in spins for every lock, instead of the C each lock recorded.
    #[arg(long, value_parser = parse_c)]
    pub c: Option<u32>,
    /// How many locks to list.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// After the first table, the stacks of this many locks (those with the
    /// most total wait), symbolized with addr2line; wrapper frames, skipped
    /// in the lock's name, are marked `·`.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub stacks: usize,
    /// Print one JSON document instead of the tables: the machine
    /// constants, the policies' prices and every lock (all of them, by
    /// total wait) with the table's fields, its prices and its raw and
    /// symbolized stack.
    #[arg(long)]
    pub json: bool,
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

/// Runs `symmetry analyze`: prints the analysis, or fails naming the file
/// that could not be read or parsed.
pub fn analyze(args: &AnalyzeArgs) -> Result<(), String> {
    let profile = &args.profile;
    // Read here rather than with `Profile::read`, whose I/O error already
    // names the file: every message names it once.
    let text = std::fs::read_to_string(profile)
        .map_err(|e| format!("cannot read {}: {e}", profile.display()))?;
    let p = Profile::parse(&text).map_err(|e| format!("{}: {e}", profile.display()))?;
    let label = profile.file_name().map_or_else(
        || profile.display().to_string(),
        |f| f.to_string_lossy().into_owned(),
    );
    // The stacks are symbolized only where they are shown.
    let symbols = if args.json || args.stacks > 0 {
        Symbols::of(&p)
    } else {
        Symbols::default()
    };
    let priced = klmo91::price(&p, &label, args.c, &symbols);
    if args.json {
        print!("{}", priced.report.to_json());
    } else {
        print!(
            "{}",
            klmo91::analyze_text(&p, &priced, args.top, args.stacks)
        );
    }
    Ok(())
}
