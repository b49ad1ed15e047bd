//! `symmetry analyze PROFILE [--c N] [--top N]`: prices every KLMO91 spin
//! policy on a recorded lock-wait profile and recommends a threshold per
//! lock.

use std::path::PathBuf;

use symmetry_locks::spin_then_block::profiler::Profile;

use crate::kernels::klmo91;

/// Arguments of `symmetry analyze`.
#[derive(clap::Args, Debug)]
pub struct AnalyzeArgs {
    /// The profile file (`# symmetry lock-wait profile, version 1`).
    pub profile: PathBuf,
    /// C in spins for every lock, instead of the C each lock recorded.
    #[arg(long, value_parser = parse_c)]
    pub c: Option<u32>,
    /// How many locks to list.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
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
    print!("{}", klmo91::analyze_text(&p, &label, args.c, args.top));
    Ok(())
}
