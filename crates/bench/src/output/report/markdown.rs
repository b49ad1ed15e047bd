//! `REPORT.md`: title, intro, the machine block, the summary table
//! (experiment | source | verdict), then per section its heading, source,
//! claim, measurement, verdict with the reason, the table and the plot
//! (`![id](id.svg)`, linked relative to the report directory).

use std::fmt::Write as _;
use std::path::Path;

use super::model::{Section, Table, code_span, machine_items, verdict_counts};
use crate::output::machine::Machine;

impl Table {
    /// The table as a markdown (GFM) table; empty for an empty table.
    pub fn to_markdown(&self) -> String {
        let width = self.width();
        if width == 0 {
            return String::new();
        }
        let cell = |c: &str| {
            c.replace('\\', "\\\\")
                .replace('|', "\\|")
                .replace(['\n', '\r'], " ")
        };
        let row = |cells: &[String]| {
            let mut line = String::from("|");
            for i in 0..width {
                line.push(' ');
                line.push_str(&cell(cells.get(i).map(String::as_str).unwrap_or("")));
                line.push_str(" |");
            }
            line.push('\n');
            line
        };
        let mut out = row(&self.header);
        out.push('|');
        out.push_str(&"---|".repeat(width));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&row(r));
        }
        out
    }
}

/// The whole markdown report.
pub(super) fn render(
    dir: &Path,
    title: &str,
    intro: &str,
    m: &Machine,
    sections: &[Section],
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# {}\n", title.trim());
    if !intro.trim().is_empty() {
        let _ = writeln!(md, "{}\n", intro.trim());
    }
    md.push_str("## Machine\n\n");
    for (label, value) in machine_items(m) {
        let _ = writeln!(md, "- **{label}:** {value}");
    }
    md.push('\n');

    md.push_str("## Summary\n\n");
    let _ = writeln!(md, "Verdicts: {}.\n", verdict_counts(sections));
    if !sections.is_empty() {
        let mut summary = Table::new(&["experiment", "source", "verdict"]);
        for s in sections {
            summary.push(&[s.id.as_str(), s.source.as_str(), s.verdict.label()]);
        }
        md.push_str(&summary.to_markdown());
        md.push('\n');
    }

    for s in sections {
        md.push_str(&section_markdown(dir, s));
    }
    md
}

/// One section as markdown: heading, source and provenance, claim, measured
/// (with its rules), verdict, table, plot.
pub fn section_markdown(dir: &Path, s: &Section) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "## {} — {}\n", s.id, s.title);
    let _ = writeln!(md, "**Source:** {}\n", s.source);
    if let Some(p) = &s.provenance {
        let _ = writeln!(md, "**Data:** {}\n", p.trim());
    }
    md.push_str("**Claim:**\n\n");
    for line in s.claim.trim().lines() {
        if line.trim().is_empty() {
            md.push_str(">\n");
        } else {
            let _ = writeln!(md, "> {line}");
        }
    }
    md.push('\n');
    let _ = writeln!(md, "**Measured:**\n\n{}\n", s.measured.trim());
    let _ = writeln!(
        md,
        "**Verdict: {}** — {}\n",
        s.verdict.label(),
        s.why.trim()
    );
    if let Some(t) = &s.table {
        let t = t.to_markdown();
        if !t.is_empty() {
            md.push_str(&t);
            md.push('\n');
        }
    }
    if let Some(svg) = &s.svg {
        let _ = writeln!(md, "![{}]({})\n", s.id, svg.replace(' ', "%20"));
        if !dir.join(svg).is_file() {
            let _ = writeln!(
                md,
                "(The plot {} was not found in the report directory when this report was written.)\n",
                code_span(svg)
            );
        }
    }
    md
}
