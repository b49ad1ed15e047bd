//! The reproduction report: `REPORT.md` and a self-contained `REPORT.html`.
//!
//! For each experiment a [`Section`] puts the paper's claim beside what this
//! machine measured and a [`Verdict`] (SPEC §3). [`write_report`] writes
//! both files from the same sections:
//!
//! - `model`: the verdicts, sections and tables, and the lines both
//!   formats share;
//! - `markdown`: `REPORT.md`;
//! - `html`: `REPORT.html`, whose free text goes through pulldown-cmark,
//!   styled by `style.css`.

mod html;
mod markdown;
mod model;

use std::path::Path;

pub use markdown::section_markdown;
pub use model::{Section, Table, Verdict};

use crate::output::machine::Machine;

/// File name of the markdown report.
pub const REPORT_MD: &str = "REPORT.md";
/// File name of the HTML report.
pub const REPORT_HTML: &str = "REPORT.html";

/// Writes `dir/REPORT.md` and `dir/REPORT.html` (creating `dir` if needed).
/// Plots named by the sections are read from `dir` and inlined in the HTML;
/// a missing plot is noted in both files instead of failing.
pub fn write_report(
    dir: &Path,
    title: &str,
    intro: &str,
    machine: &Machine,
    sections: &[Section],
) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("{}: cannot create directory: {e}", dir.display()))?;
    let md = markdown::render(dir, title, intro, machine, sections);
    let html = html::render(dir, title, intro, machine, sections);
    for (name, text) in [(REPORT_MD, md), (REPORT_HTML, html)] {
        let path = dir.join(name);
        std::fs::write(&path, text)
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Machine {
        Machine {
            cpu_model: "Test CPU <x>".into(),
            logical_cpus: 2,
            online_cpus: 2,
            kernel: "6.1.0".into(),
            os: "Debian".into(),
            virtualized: true,
            hypervisor: Some("kvm".into()),
            memory_gib: 23.5,
            rustc: "rustc 1.95.0 (abc 2026-01-01)".into(),
            git_commit: "abc1234-dirty".into(),
            profile: "release".into(),
            timestamp_utc: "2026-01-01T00:00:00Z".into(),
            quick: true,
            command: "symmetry reproduce --quick".into(),
        }
    }

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        std::env::temp_dir().join(format!(
            "symmetry-report-{tag}-{}-{nanos}",
            std::process::id()
        ))
    }

    fn sections() -> Vec<Section> {
        let mut table = Table::new(&["lock", "1 thread", "2 threads"]);
        table.push(&["tas", "12.5", "30.1"]);
        table.push(&["a|b", "1"]);
        vec![
            Section {
                id: "spin-counter".into(),
                title: "Shared counter".into(),
                source: "ALL89 Fig. 6".into(),
                claim: "\"spinning on xchgb degrades badly\"".into(),
                measured: "First **bold** and `code <T>` paragraph.\n\n- item one\n- item *two*\n\nMore & more."
                    .into(),
                verdict: Verdict::Holds,
                why: "queue locks stay flat".into(),
                table: Some(table),
                svg: Some("spin-counter.svg".into()),
                provenance: None,
            },
            Section {
                id: "missing-plot".into(),
                title: "No plot file".into(),
                source: "PRESTO Fig. 1".into(),
                claim: "a claim".into(),
                measured: "nothing".into(),
                verdict: Verdict::NotMeasurable,
                why: "needs more cores".into(),
                table: None,
                svg: Some("missing-plot.svg".into()),
                provenance: None,
            },
            Section {
                id: "partial".into(),
                title: "Partly".into(),
                source: "KLMO91".into(),
                claim: "x".into(),
                measured: "y".into(),
                verdict: Verdict::Partial,
                why: "z".into(),
                table: Some(Table::default()),
                svg: None,
                provenance: None,
            },
        ]
    }

    #[test]
    fn writes_markdown_and_html() {
        let dir = temp_dir("full");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("spin-counter.svg"),
            "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"><text>PLOT-MARK</text></svg>\n",
        )
        .unwrap();
        write_report(
            &dir,
            "symmetry report",
            "Intro with `code`.",
            &machine(),
            &sections(),
        )
        .unwrap();

        let md = std::fs::read_to_string(dir.join(REPORT_MD)).unwrap();
        assert!(md.starts_with("# symmetry report\n"));
        assert!(
            md.contains("| spin-counter | ALL89 Fig. 6 | holds |"),
            "{md}"
        );
        assert!(md.contains("## spin-counter — Shared counter"));
        assert!(md.contains("**Verdict: holds** — queue locks stay flat"));
        assert!(md.contains("**Verdict: not measurable here** — needs more cores"));
        assert!(md.contains("| tas | 12.5 | 30.1 |"));
        assert!(md.contains("| a\\|b | 1 |  |"), "{md}");
        assert!(md.contains("![spin-counter](spin-counter.svg)"));
        assert!(md.contains("`missing-plot.svg` was not found"));
        assert!(md.contains("1 holds, 1 partly holds, 1 not measurable here"));
        assert!(md.contains("kvm") && md.contains("abc1234-dirty"));

        let html = std::fs::read_to_string(dir.join(REPORT_HTML)).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("PLOT-MARK"), "SVG inlined");
        assert!(!html.contains("<?xml"), "XML declaration dropped");
        assert!(html.contains("missing-plot.svg</code> is not available"));
        assert!(html.contains("<strong>bold</strong>"));
        assert!(html.contains("<code>code &lt;T&gt;</code>"));
        assert!(html.contains("<li>item one</li>"));
        assert!(html.contains("More &amp; more."));
        assert!(html.contains("Test CPU &lt;x&gt;"));
        assert!(html.contains("class=\"badge v-holds\""));
        assert!(html.contains("<td>a|b</td>"));
        assert!(!html.contains("http://") || html.contains("http://www.w3.org/2000/svg"));
        assert!(!html.contains("<link") && !html.contains("<script"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn empty_report_and_unwritable_dir() {
        let dir = temp_dir("empty");
        write_report(&dir, "t", "", &machine(), &[]).unwrap();
        let md = std::fs::read_to_string(dir.join(REPORT_MD)).unwrap();
        assert!(md.contains("no experiments"));
        // A file in place of the directory gives an error naming it.
        let file = dir.join("file");
        std::fs::write(&file, "x").unwrap();
        let err = write_report(&file, "t", "", &machine(), &[]).unwrap_err();
        assert!(err.contains("file"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
