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
        }
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

    /// One line for the report: commit, mode, start, duration, command.
    pub fn markdown(&self) -> String {
        format!(
            "commit `{}`, {} mode, started {}, {:.0} s, command `{}`",
            self.commit,
            self.mode,
            self.started_utc,
            self.seconds,
            self.command.replace('`', "'")
        )
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
        assert_eq!(Provenance::read(&dir, "spin-counter").unwrap(), Some(p));
        assert_eq!(Provenance::read(&dir, "nope").unwrap(), None);
        std::fs::write(dir.join("bad.provenance.json"), "{").unwrap();
        assert!(
            Provenance::read(&dir, "bad")
                .unwrap_err()
                .contains("bad.provenance.json")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
