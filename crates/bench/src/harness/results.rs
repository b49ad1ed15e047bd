//! A results directory (SPEC §3): for each experiment run into it,
//! `ID.csv` (its tidy rows), `ID.provenance.json` (which build, command
//! and run wrote them) and `ID.svg` (its figure), beside `machine.json`;
//! and the report built from those files.
//!
//! Results are data: a figure is drawn from the CSV as it was written,
//! never from rows in memory, and the report reads every CSV it judges.
//! Each file of a directory is written once per command: `symmetry run`
//! writes the CSV and the provenance, then draws the figure
//! ([`write()`], [`draw()`]); `symmetry reproduce` writes the CSVs and the
//! provenance (joined from its two passes) and leaves every figure to the
//! report ([`report()`]), which draws each one as it reads its CSV.

use std::path::{Path, PathBuf};

use super::Experiment;
use crate::output::data::{self, Row};
use crate::output::machine::Machine;
use crate::output::plot;
use crate::output::provenance::{Provenance, one_placement, probe_span};
use crate::output::report;

/// `dir/ID.csv`.
pub fn csv(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.csv"))
}

/// Creates `dir` (and its parents) if it does not exist.
pub fn ensure_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create output directory {}: {e}", dir.display()))
}

/// Writes experiment `provenance.experiment`'s rows and provenance to
/// `dir` (no figure: see [`draw`]).
pub fn write(dir: &Path, rows: &[Row], provenance: &Provenance) -> Result<(), String> {
    data::write_csv(&csv(dir, &provenance.experiment), rows)?;
    provenance.write(dir)
}

/// Draws `e`'s figure `dir/ID.svg` from its CSV in `dir`, and returns the
/// rows it was drawn from.
pub fn draw(dir: &Path, e: &Experiment, machine: &Machine) -> Result<Vec<Row>, String> {
    let rows = data::read_csv(&csv(dir, e.id))?;
    plot::write_svg(
        &dir.join(format!("{}.svg", e.id)),
        &(e.figure)(&rows, machine),
    )?;
    Ok(rows)
}

/// One experiment's results as a run wrote them to a directory: the CSV
/// file, the rows read from it and its provenance.
#[derive(Debug, Clone)]
pub struct Written {
    /// The CSV file.
    pub csv: PathBuf,
    /// Its rows.
    pub rows: Vec<Row>,
    /// Its provenance record.
    pub provenance: Provenance,
}

impl Written {
    /// Reads experiment `id`'s results from `dir`; `Ok(None)` if it has no
    /// provenance record there (no run of it finished writing).
    pub fn read(dir: &Path, id: &str) -> Result<Option<Written>, String> {
        let Some(provenance) = Provenance::read(dir, id)? else {
            return Ok(None);
        };
        let csv = csv(dir, id);
        let rows = data::read_csv(&csv)?;
        Ok(Some(Written {
            csv,
            rows,
            provenance,
        }))
    }
}

/// Removes an experiment's result files from `dir`, so that a failed run
/// does not leave an earlier run's CSV to be reported as this one's.
pub fn remove(dir: &Path, id: &str) {
    // Besides the CSV, its plot and provenance, the recorded lock profiles
    // some experiments write beside them (`ID-NAME.profile.csv`).
    let prefix = format!("{id}-");
    let profiles = std::fs::read_dir(dir)
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
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => eprintln!("      cannot remove {}: {e}", path.display()),
        }
    }
}

/// Builds `dir/REPORT.md` and `dir/REPORT.html` from the files in `dir`
/// (never from memory), one section for each experiment of `catalogue`
/// that has a CSV there, drawing each one's figure from its CSV; the
/// introduction names the experiments without one and the `pending` ids
/// (planned, not built yet).
pub fn report(dir: &Path, catalogue: &[Experiment], pending: &[&str]) -> Result<(), String> {
    let machine = Machine::read_results(dir)?;
    let mut sections = Vec::new();
    let mut missing = Vec::new();
    let mut probes = Vec::new();
    for e in catalogue {
        if !csv(dir, e.id).exists() {
            missing.push(e.id);
            continue;
        }
        let rows = draw(dir, e, &machine)?;
        let mut section = e.section(&rows, &machine);
        let provenance = Provenance::read(dir, e.id)?;
        if let Some(p) = &provenance {
            probes.extend(p.probes());
        }
        section.provenance = provenance.map(|p| p.markdown());
        sections.push(section);
    }
    if sections.is_empty() {
        return Err(format!(
            "no experiment results in {} (run `symmetry run ID --out {0}` or `symmetry reproduce --out {0}` first)",
            dir.display()
        ));
    }
    let intro = intro(&machine, &missing, pending, &probes);
    report::write_report(
        dir,
        "symmetry — reproduction report",
        &intro,
        &machine,
        &sections,
    )?;
    eprintln!(
        "report: {} and {}",
        dir.join(report::REPORT_MD).display(),
        dir.join(report::REPORT_HTML).display()
    );
    Ok(())
}

/// The report's introduction, generated from `machine.json`, the
/// experiments not found, the ones planned and the placement probes
/// their provenance recorded.
fn intro(machine: &Machine, missing: &[&str], pending: &[&str], probes: &[f64]) -> String {
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
    if !pending.is_empty() {
        intro.push_str(&format!(
            "Planned experiments not built yet: {}.\n",
            code_list(pending)
        ));
    }
    intro
}

/// What the placement probes of a directory's runs say, as a paragraph of
/// the report's introduction (empty without a probe): the range they
/// span, and whether the CPUs stayed at one placement (every probe within
/// [`PROBE_CHANGE`](crate::output::provenance::PROBE_CHANGE) of every
/// other, [`one_placement`]) or moved between the runs.
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

#[cfg(test)]
mod tests {
    use super::placement_words;

    #[test]
    fn the_intro_says_whether_the_placement_moved() {
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
}
