//! What the report says, before it is written in any format: the
//! [`Verdict`]s, the [`Section`]s with their [`Table`]s, and the summary
//! lines both writers share (the verdict counts and the machine block).

use crate::output::machine::Machine;

/// How a paper's claim fared on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The claim holds here.
    Holds,
    /// This machine measures something else (the section says why).
    Differs,
    /// The effect cannot be shown here (e.g. it needs more cores).
    NotMeasurable,
    /// Part of the claim holds.
    Partial,
    /// Every judged difference was inside the run's repeat spread.
    Indistinct,
}

impl Verdict {
    /// Every verdict, in the order the summary counts them.
    pub const ALL: [Verdict; 5] = [
        Verdict::Holds,
        Verdict::Partial,
        Verdict::Indistinct,
        Verdict::Differs,
        Verdict::NotMeasurable,
    ];

    /// The words the report uses.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::Differs => "differs",
            Verdict::NotMeasurable => "not measurable here",
            Verdict::Partial => "partly holds",
            Verdict::Indistinct => "not distinguishable here",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// A table of a section: header cells and rows of cells (inline markdown;
/// rows shorter than the widest are padded with empty cells).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Table {
    /// Header cells.
    pub header: Vec<String>,
    /// Body rows.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with the given header and no rows.
    pub fn new<S: ToString>(header: &[S]) -> Table {
        Table {
            header: header.iter().map(ToString::to_string).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn push<S: ToString>(&mut self, row: &[S]) {
        self.rows
            .push(row.iter().map(ToString::to_string).collect());
    }

    /// Number of columns: the widest of header and rows.
    pub fn width(&self) -> usize {
        self.rows
            .iter()
            .map(Vec::len)
            .chain(std::iter::once(self.header.len()))
            .max()
            .unwrap_or(0)
    }
}

/// One experiment in the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Experiment id, e.g. `spin-counter`.
    pub id: String,
    /// Experiment title.
    pub title: String,
    /// Paper and figure, e.g. `ALL89 Fig. 6`.
    pub source: String,
    /// The paper's claim, quoted (markdown).
    pub claim: String,
    /// What this machine measured (markdown paragraphs).
    pub measured: String,
    /// The verdict.
    pub verdict: Verdict,
    /// The reason for the verdict (markdown).
    pub why: String,
    /// An optional table of the key numbers.
    pub table: Option<Table>,
    /// Plot file name relative to the report directory, e.g. `spin-counter.svg`.
    pub svg: Option<String>,
    /// Where the section's CSV came from (markdown: commit, mode, time,
    /// command; see [`crate::output::provenance`]), if recorded.
    pub provenance: Option<String>,
}

/// "3 hold, 1 partly holds, ..." over the sections.
pub(super) fn verdict_counts(sections: &[Section]) -> String {
    let parts: Vec<String> = Verdict::ALL
        .iter()
        .filter_map(|v| {
            let count = sections.iter().filter(|s| s.verdict == *v).count();
            (count > 0).then(|| format!("{count} {}", v.label()))
        })
        .collect();
    if parts.is_empty() {
        "no experiments".to_string()
    } else {
        parts.join(", ")
    }
}

/// The machine block as (label, markdown value) pairs.
pub(super) fn machine_items(m: &Machine) -> Vec<(&'static str, String)> {
    let virt = match (&m.virtualized, &m.hypervisor) {
        (true, Some(h)) => format!("virtualized ({h})"),
        (true, None) => "virtualized (hypervisor unknown)".to_string(),
        (false, _) => "not virtualized".to_string(),
    };
    let cpus = if m.online_cpus != m.logical_cpus {
        format!(
            "{} logical CPUs available ({} online)",
            m.logical_cpus, m.online_cpus
        )
    } else {
        format!("{} logical CPUs", m.logical_cpus)
    };
    vec![
        ("CPU", format!("{}, {cpus}", m.cpu_model)),
        (
            "System",
            format!(
                "kernel {}, {}, {virt}, {:.1} GiB memory",
                m.kernel, m.os, m.memory_gib
            ),
        ),
        (
            "Build",
            format!(
                "{}, commit `{}`, {} profile",
                m.rustc, m.git_commit, m.profile
            ),
        ),
        (
            "Run",
            format!(
                "{}{}, command {}",
                m.timestamp_utc,
                if m.quick {
                    ", quick mode (`--quick`)"
                } else {
                    ""
                },
                code_span(&m.command)
            ),
        ),
    ]
}

/// `text` as a markdown code span, with enough backticks to hold it.
pub(super) fn code_span(text: &str) -> String {
    let text = text.replace(['\n', '\r'], " ");
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_labels() {
        assert_eq!(Verdict::Holds.label(), "holds");
        assert_eq!(Verdict::Differs.label(), "differs");
        assert_eq!(Verdict::NotMeasurable.label(), "not measurable here");
        assert_eq!(Verdict::Partial.label(), "partly holds");
        assert_eq!(Verdict::Partial.to_string(), "partly holds");
    }

    #[test]
    fn code_spans_hold_their_backticks() {
        assert_eq!(code_span("a b"), "`a b`");
        assert_eq!(code_span("a `b`"), "`` a `b` ``");
        assert_eq!(code_span("x\ny"), "`x y`");
    }
}
