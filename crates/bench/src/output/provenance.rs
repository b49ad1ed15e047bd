//! Provenance per result file: `ID.provenance.json` beside `ID.csv` says
//! which build, command and mode produced that CSV and when, so a report
//! rebuilt from a directory whose files came from several runs names the
//! right run for each section.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::machine::Machine;

/// Where one experiment's CSV came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// Experiment id.
    pub experiment: String,
    /// Short git commit of the build (`-dirty` if the tree had changes).
    pub commit: String,
    /// The command line of the run.
    pub command: String,
    /// `quick` or `full`.
    pub mode: String,
    /// When the experiment started, ISO-8601 UTC.
    pub started_utc: String,
    /// How long it ran, in seconds.
    pub seconds: f64,
    /// Logical CPUs of the machine it ran on.
    pub cores: usize,
    /// The CPU model of the machine it ran on (`machine.json`'s
    /// `cpu_model`), so that a directory whose files came from several
    /// machines says which ran what; empty in records written before it
    /// was kept.
    #[serde(default)]
    pub cpu_model: String,
    /// The placement probe ([`crate::kernels::machine::core_probe_ns`]):
    /// the cache-line round trip between CPUs 0 and 1 just before and just
    /// after the experiment, in ns; empty if not taken (one CPU, or a
    /// record written before the probe existed).
    #[serde(default)]
    pub core_rtt_ns: Vec<f64>,
    /// How many times the experiment was run for this record: 2 when the
    /// probe moved during the first run and the harness ran it again (see
    /// `harness::run`); the record is the second run's. `None` in
    /// records written before runs were counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<usize>,
    /// The second of the two processes `symmetry reproduce` measures an
    /// experiment in, whose rows were joined with this one's
    /// ([`super::data::join_passes`]); `None` for a run in one process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second_pass: Option<Box<Provenance>>,
    /// Why there is no second pass (it failed, or a quick reproduction
    /// measures the experiment in one process): the rows are this record's
    /// alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_joined: Option<String>,
    /// With a second pass: how many points were written in one of the two
    /// processes only (see [`super::data::join_passes`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub one_pass_points: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// How much the probe may move during an experiment before the report
/// says the placement changed (the probe's own spread between repeats is
/// a few percent; a host moving virtual CPUs changes it severalfold).
pub const PROBE_CHANGE: f64 = 1.5;

/// The smallest and the largest of `probes`, leaving out what is not a
/// positive reading (a probe not taken, NaN); `None` if none is left.
pub fn probe_span(probes: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    probes
        .into_iter()
        .filter(|x| *x > 0.0)
        .fold(None, |span, x| match span {
            None => Some((x, x)),
            Some((lo, hi)) => Some((f64::min(lo, x), f64::max(hi, x))),
        })
}

/// Whether probes spanning `(lo, hi)` ([`probe_span`]) were all taken at
/// one placement: the largest within [`PROBE_CHANGE`] of the smallest.
pub fn one_placement((lo, hi): (f64, f64)) -> bool {
    hi / lo <= PROBE_CHANGE
}

impl Provenance {
    /// The provenance of experiment `id` run on `m` (whose commit, command
    /// and mode it copies), started at `started_utc`, lasting `seconds`.
    pub fn new(id: &str, m: &Machine, started_utc: String, seconds: f64) -> Provenance {
        Provenance {
            experiment: id.to_string(),
            commit: m.git_commit.clone(),
            command: m.command.clone(),
            mode: if m.quick { "quick" } else { "full" }.to_string(),
            started_utc,
            seconds,
            cores: m.cores(),
            cpu_model: m.cpu_model.clone(),
            core_rtt_ns: Vec::new(),
            runs: Some(1),
            second_pass: None,
            not_joined: None,
            one_pass_points: 0,
        }
    }

    /// With the placement probe taken before and after the run.
    pub fn with_probe(mut self, before: Option<f64>, after: Option<f64>) -> Provenance {
        self.core_rtt_ns = before.into_iter().chain(after).collect();
        self
    }

    /// Records that this was run `n` (1 or more) of the experiment.
    pub fn with_runs(mut self, n: usize) -> Provenance {
        self.runs = Some(n.max(1));
        self
    }

    /// Whether the probe moved by more than [`PROBE_CHANGE`] during the run.
    pub fn placement_changed(&self) -> bool {
        probe_span(self.core_rtt_ns.iter().copied()).is_some_and(|s| !one_placement(s))
    }

    /// Every probe of this record: before and after the run, and in its
    /// second process if it had one.
    pub fn probes(&self) -> impl Iterator<Item = f64> + '_ {
        self.core_rtt_ns
            .iter()
            .chain(self.second_pass.iter().flat_map(|q| &q.core_rtt_ns))
            .copied()
    }

    /// The file name for experiment `id`.
    pub fn file_name(id: &str) -> String {
        format!("{id}.provenance.json")
    }

    /// Writes `dir/ID.provenance.json`.
    pub fn write(&self, dir: &Path) -> Result<(), String> {
        let path = dir.join(Self::file_name(&self.experiment));
        let mut text = serde_json::to_string_pretty(self)
            .map_err(|e| format!("{}: cannot serialize: {e}", path.display()))?;
        text.push('\n');
        std::fs::write(&path, text).map_err(|e| format!("{}: cannot write: {e}", path.display()))
    }

    /// Reads `dir/ID.provenance.json`: `Ok(None)` if there is none,
    /// an error naming the file if it is not a provenance record.
    pub fn read(dir: &Path, id: &str) -> Result<Option<Provenance>, String> {
        let path = dir.join(Self::file_name(id));
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: cannot read: {e}", path.display())),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("{}: not a provenance record: {e}", path.display()))
    }

    /// One line for the report: commit, mode, start, duration, command,
    /// the machine's CPU and the placement probe where recorded, and the
    /// second pass if there was one.
    pub fn markdown(&self) -> String {
        let passes = match (&self.second_pass, &self.not_joined) {
            (Some(p), _) => format!(
                "; measured in two processes, each with about half the repeats, and the points joined \
                 (each point's interval spans both{}): the second started {}, {:.0} s{}",
                match self.one_pass_points {
                    0 => String::new(),
                    1 => "; 1 point was written by one of them only".to_string(),
                    n => format!("; {n} points were written by one of them only"),
                },
                p.started_utc,
                p.seconds,
                p.conditions()
            ),
            (None, Some(why)) => format!("; one process only: {why}"),
            (None, None) => String::new(),
        };
        let cpu = if self.cpu_model.is_empty() {
            String::new()
        } else {
            format!(
                "; ran on {} ({} logical CPU{})",
                self.cpu_model,
                self.cores,
                if self.cores == 1 { "" } else { "s" }
            )
        };
        format!(
            "commit `{}`, {} mode, started {}, {:.0} s, command `{}`{cpu}{}{passes}",
            self.commit,
            self.mode,
            self.started_utc,
            self.seconds,
            self.command.replace('`', "'"),
            self.conditions()
        )
    }

    /// The placement probe and the retake, in words (empty if neither was
    /// recorded).
    fn conditions(&self) -> String {
        let probe = match self.core_rtt_ns[..] {
            [a, b] => format!(
                "; cache-line round trip between CPUs 0 and 1: {a:.0} ns before, {b:.0} ns after{}",
                if self.placement_changed() {
                    " (the placement of the CPUs changed during this run, so its points were not all \
                     measured on the same machine)"
                } else {
                    ""
                }
            ),
            _ => String::new(),
        };
        // `harness::run` runs an experiment at most twice.
        let retaken = match self.runs {
            Some(n) if n > 1 => {
                "; ran twice: the placement changed during the first run, and these \
                                 are the second run's data"
                    .to_string()
            }
            _ => String::new(),
        };
        format!("{probe}{retaken}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_missing() {
        let dir = std::env::temp_dir().join(format!("symmetry-prov-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let m = Machine::detect(true);
        let p = Provenance::new("spin-counter", &m, "2026-01-01T00:00:00Z".into(), 1.5);
        p.write(&dir).unwrap();
        assert_eq!(
            Provenance::read(&dir, "spin-counter").unwrap(),
            Some(p.clone())
        );
        assert!(!p.markdown().contains("round trip"));
        assert!(p.markdown().contains(&format!("ran on {}", m.cpu_model)));
        // A record written before the CPU was kept still reads.
        let old = r#"{"experiment": "x", "commit": "c", "command": "s", "mode": "quick",
            "started_utc": "t", "seconds": 1.0, "cores": 2}"#;
        let old: Provenance = serde_json::from_str(old).unwrap();
        assert!(old.cpu_model.is_empty() && !old.markdown().contains("ran on"));
        assert_eq!(old.runs, None);
        // With the probe; a record without it (older runs) still reads.
        let moved = p.clone().with_probe(Some(65.0), Some(340.0));
        assert!(moved.placement_changed());
        assert!(moved.markdown().contains("65 ns before, 340 ns after"));
        assert!(moved.markdown().contains("changed during this run"));
        let steady = p.clone().with_probe(Some(65.0), Some(70.0));
        assert!(!steady.placement_changed() && !steady.markdown().contains("changed"));
        // One probe missing: nothing to compare.
        assert!(!p.clone().with_probe(Some(65.0), None).placement_changed());
        // Every probe of a record, its second process's included.
        let mut joined = steady.clone();
        joined.second_pass = Some(Box::new(moved.clone()));
        assert_eq!(
            joined.probes().collect::<Vec<_>>(),
            [65.0, 70.0, 65.0, 340.0]
        );
        assert_eq!(probe_span(joined.probes()), Some((65.0, 340.0)));
        assert_eq!(probe_span([f64::NAN, 0.0]), None);
        assert!(one_placement((65.0, 97.5)) && !one_placement((65.0, 98.0)));
        let retaken = steady.clone().with_runs(2);
        assert!(
            retaken
                .markdown()
                .contains("ran twice: the placement changed during the first run")
        );
        assert!(!steady.clone().with_runs(1).markdown().contains("ran twice"));
        steady.write(&dir).unwrap();
        assert_eq!(
            Provenance::read(&dir, "spin-counter").unwrap(),
            Some(steady)
        );
        assert_eq!(Provenance::read(&dir, "nope").unwrap(), None);
        // Two passes: the second is recorded inside the first and named.
        let second = p.clone().with_probe(Some(48.0), Some(410.0)).with_runs(2);
        let joined = Provenance {
            second_pass: Some(Box::new(second)),
            one_pass_points: 2,
            ..p.clone()
        };
        let line = joined.markdown();
        assert!(line.contains("two processes") && line.contains("48 ns before, 410 ns after"));
        assert!(line.contains("2 points were written by one of them only"));
        joined.write(&dir).unwrap();
        assert_eq!(
            Provenance::read(&dir, "spin-counter").unwrap(),
            Some(joined)
        );
        let alone = Provenance {
            not_joined: Some("the second pass failed".into()),
            ..p.clone()
        };
        assert!(
            alone
                .markdown()
                .ends_with("; one process only: the second pass failed")
        );
        std::fs::write(dir.join("bad.provenance.json"), "{").unwrap();
        assert!(
            Provenance::read(&dir, "bad")
                .unwrap_err()
                .contains("bad.provenance.json")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
