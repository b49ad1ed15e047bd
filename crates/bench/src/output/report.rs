//! The reproduction report: `REPORT.md` and a self-contained `REPORT.html`.
//!
//! For each experiment a [`Section`] puts the paper's claim beside what this
//! machine measured and a [`Verdict`] (SPEC §3). [`write_report`] writes
//!
//! - `REPORT.md`: title, intro, a machine block, a summary table
//!   (experiment | source | verdict), then per section its heading, source,
//!   claim, measurement, verdict with the reason, the table and the plot
//!   (`![id](id.svg)`, linked relative to the report directory);
//! - `REPORT.html`: the same content on one page with inline CSS and the SVG
//!   plots inlined from the report directory, so the file can be mailed or
//!   archived alone. A missing plot is reported in the page, not as an
//!   error.
//!
//! Free text (intro, claim, measured, why) is a small subset of markdown:
//! paragraphs, `**bold**`, `` `code` ``, `[links](url)`, bullet lists
//! (`- `), numbered lists (`1. `), `> ` quotes, `#` headings, fenced code
//! and `|` tables. [`markdown_to_html`] converts exactly that subset and
//! escapes everything else.

use std::fmt::Write as _;
use std::path::Path;

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

    /// Colour of the verdict in the HTML report.
    pub fn color(&self) -> &'static str {
        match self {
            Verdict::Holds => "#2e7d32",
            Verdict::Partial => "#e65100",
            Verdict::Indistinct => "#5c6bc0",
            Verdict::Differs => "#c62828",
            Verdict::NotMeasurable => "#757575",
        }
    }

    /// CSS class of the verdict in the HTML report.
    fn css_class(&self) -> &'static str {
        match self {
            Verdict::Holds => "v-holds",
            Verdict::Partial => "v-partial",
            Verdict::Indistinct => "v-tie",
            Verdict::Differs => "v-differs",
            Verdict::NotMeasurable => "v-na",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// A table of a section: header cells and rows of cells (plain text; rows
/// shorter than the widest are padded with empty cells).
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
    fn width(&self) -> usize {
        self.rows
            .iter()
            .map(Vec::len)
            .chain(std::iter::once(self.header.len()))
            .max()
            .unwrap_or(0)
    }

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

    /// The table as an HTML `<table>`, cells rendered as inline markdown
    /// (the report's tables put names in `code`); empty for an empty table.
    pub fn to_html(&self) -> String {
        if self.width() == 0 {
            return String::new();
        }
        table_html_inline(&self.header, &self.rows)
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
    let md = render_markdown(dir, title, intro, machine, sections);
    let html = render_html(dir, title, intro, machine, sections);
    for (name, text) in [(REPORT_MD, md), (REPORT_HTML, html)] {
        let path = dir.join(name);
        std::fs::write(&path, text)
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Shared pieces

/// "3 hold, 1 partly holds, ..." over the sections.
fn verdict_counts(sections: &[Section]) -> String {
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
fn machine_items(m: &Machine) -> Vec<(&'static str, String)> {
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
fn code_span(text: &str) -> String {
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

/// The plot file of a section, if it names one and the file exists.
fn plot_path(dir: &Path, svg: &str) -> Option<std::path::PathBuf> {
    let path = dir.join(svg);
    path.is_file().then_some(path)
}

/// A string usable as an HTML id.
fn anchor(id: &str) -> String {
    let s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("sec-{s}")
}

// ---------------------------------------------------------------------------
// Markdown

fn render_markdown(
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
        if plot_path(dir, svg).is_none() {
            let _ = writeln!(
                md,
                "(The plot {} was not found in the report directory when this report was written.)\n",
                code_span(svg)
            );
        }
    }
    md
}

// ---------------------------------------------------------------------------
// HTML

const CSS: &str = "\
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; color: #222; \
background: #fff; margin: 0; line-height: 1.5; }
main { max-width: 1100px; margin: 0 auto; padding: 1em 2em 4em; }
h1 { border-bottom: 2px solid #ddd; padding-bottom: .3em; }
h2 { border-bottom: 1px solid #eee; padding-bottom: .2em; margin-top: 2em; }
h3 { font-size: 1em; margin: 1.2em 0 .3em; }
code, pre { font-family: ui-monospace, 'SFMono-Regular', Menlo, Consolas, monospace; \
font-size: .9em; background: #f4f4f4; border-radius: 3px; }
code { padding: .1em .3em; }
pre { padding: .6em; overflow-x: auto; }
pre code { padding: 0; background: none; }
blockquote { margin: .5em 0; padding: .2em 1em; border-left: 4px solid #c9d6e8; \
background: #f7f9fc; color: #333; }
table { border-collapse: collapse; margin: .8em 0; font-size: .92em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #fafafa; }
.source { color: #555; margin: 0; }
.verdict { margin: 1em 0; padding: .5em .9em; border-left: 5px solid; border-radius: 3px; }
.verdict p { margin: .3em 0; }
.badge { display: inline-block; padding: .05em .6em; border-radius: 1em; color: #fff; \
font-weight: bold; font-size: .9em; white-space: nowrap; }
.v-holds { border-color: #2e7d32; background: #edf7ee; }
.v-partial { border-color: #e65100; background: #fff3e6; }
.v-differs { border-color: #c62828; background: #fdecec; }
.v-na { border-color: #757575; background: #f3f3f3; }
.v-tie { border-color: #5c6bc0; background: #eef0fa; }
.badge.v-tie { background: #5c6bc0; }
.badge.v-holds { background: #2e7d32; }
.badge.v-partial { background: #e65100; }
.badge.v-differs { background: #c62828; }
.badge.v-na { background: #757575; }
.machine li { margin: .15em 0; }
figure { margin: 1em 0; overflow-x: auto; }
figure svg { max-width: 100%; height: auto; }
.missing { color: #c62828; font-style: italic; }
";

fn render_html(dir: &Path, title: &str, intro: &str, m: &Machine, sections: &[Section]) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(h, "<title>{}</title>", escape_html(title.trim()));
    let _ = writeln!(h, "<style>\n{CSS}</style>\n</head>\n<body>\n<main>");
    let _ = writeln!(h, "<h1>{}</h1>", escape_html(title.trim()));
    h.push_str(&markdown_to_html(intro));

    h.push_str("<h2>Machine</h2>\n<ul class=\"machine\">\n");
    for (label, value) in machine_items(m) {
        let _ = writeln!(
            h,
            "<li><strong>{label}:</strong> {}</li>",
            inline_html(&value)
        );
    }
    h.push_str("</ul>\n");

    h.push_str("<h2>Summary</h2>\n");
    let _ = writeln!(
        h,
        "<p>Verdicts: {}.</p>",
        escape_html(&verdict_counts(sections))
    );
    if !sections.is_empty() {
        h.push_str("<table class=\"summary\">\n<thead><tr><th>experiment</th><th>source</th><th>verdict</th></tr></thead>\n<tbody>\n");
        for s in sections {
            let _ = writeln!(
                h,
                "<tr><td><a href=\"#{}\">{}</a></td><td>{}</td><td><span class=\"badge {}\">{}</span></td></tr>",
                anchor(&s.id),
                escape_html(&s.id),
                escape_html(&s.source),
                s.verdict.css_class(),
                s.verdict.label()
            );
        }
        h.push_str("</tbody>\n</table>\n");
    }

    for s in sections {
        let _ = writeln!(h, "<section id=\"{}\">", anchor(&s.id));
        let _ = writeln!(
            h,
            "<h2>{} — {}</h2>",
            escape_html(&s.id),
            escape_html(&s.title)
        );
        let _ = writeln!(
            h,
            "<p class=\"source\">Source: {}</p>",
            inline_html(&s.source)
        );
        if let Some(p) = &s.provenance {
            let _ = writeln!(h, "<p class=\"source\">Data: {}</p>", inline_html(p));
        }
        let _ = writeln!(
            h,
            "<h3>Claim</h3>\n<blockquote>\n{}</blockquote>",
            markdown_to_html(&s.claim)
        );
        let _ = writeln!(h, "<h3>Measured</h3>\n{}", markdown_to_html(&s.measured));
        let _ = writeln!(
            h,
            "<div class=\"verdict {c}\">\n<p><span class=\"badge {c}\">Verdict: {}</span></p>\n{}</div>",
            s.verdict.label(),
            markdown_to_html(&s.why),
            c = s.verdict.css_class()
        );
        if let Some(t) = &s.table {
            h.push_str(&t.to_html());
        }
        if let Some(svg) = &s.svg {
            h.push_str("<figure>\n");
            h.push_str(&inline_svg(dir, svg));
            h.push_str("</figure>\n");
        }
        h.push_str("</section>\n");
    }
    h.push_str("</main>\n</body>\n</html>\n");
    h
}

/// The SVG file `dir/name` ready to inline, or a note saying why it is not.
fn inline_svg(dir: &Path, name: &str) -> String {
    let path = dir.join(name);
    let missing = |why: &str| {
        format!(
            "<p class=\"missing\">Plot <code>{}</code> is not available: {}.</p>\n",
            escape_html(name),
            escape_html(why)
        )
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => match text.find("<svg") {
            // Drop an XML declaration or doctype before the root element.
            Some(start) => {
                let mut svg = text[start..].trim_end().to_string();
                svg.push('\n');
                svg
            }
            None => missing(&format!("{} is not an SVG file", path.display())),
        },
        Err(e) => missing(&format!("cannot read {}: {e}", path.display())),
    }
}

/// Escapes `& < > " '` for HTML text and attributes (the XML escaping of
/// the plots, which HTML5 accepts as is).
pub fn escape_html(s: &str) -> String {
    crate::output::plot::escape_xml(s)
}

/// Whether a table cell holds a number (right-aligned in HTML).
fn looks_numeric(s: &str) -> bool {
    let t = s
        .trim()
        .trim_end_matches(|c: char| c.is_alphabetic() || c == '%' || c == '/' || c == '×');
    let t = t.trim().trim_start_matches(['+', '-', '~', '≈']);
    !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_digit() || c == '.' || c == ',' || c == 'e' || c == '-' || c == '+')
        && t.chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '.')
}

/// Converts the small markdown subset of the module docs to HTML. Anything
/// else is shown literally (escaped).
pub fn markdown_to_html(md: &str) -> String {
    let lines: Vec<&str> = md.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim();
        if trimmed.is_empty() {
            i += 1;
            continue;
        }
        // Fenced code.
        if trimmed.starts_with("```") {
            let mut code = String::new();
            i += 1;
            while i < lines.len() && !lines[i].trim().starts_with("```") {
                code.push_str(lines[i]);
                code.push('\n');
                i += 1;
            }
            i += 1; // closing fence (or end of text)
            let _ = writeln!(out, "<pre><code>{}</code></pre>", escape_html(&code));
            continue;
        }
        // Heading: `#` .. `######`, shifted below the section's h2.
        let hashes = trimmed.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
            let level = (hashes + 2).min(6);
            let _ = writeln!(
                out,
                "<h{level}>{}</h{level}>",
                inline_html(trimmed[hashes..].trim())
            );
            i += 1;
            continue;
        }
        // Quote.
        if trimmed.starts_with('>') {
            let mut inner = String::new();
            while i < lines.len() && lines[i].trim().starts_with('>') {
                let l = lines[i].trim().trim_start_matches('>');
                inner.push_str(l.strip_prefix(' ').unwrap_or(l));
                inner.push('\n');
                i += 1;
            }
            let _ = write!(
                out,
                "<blockquote>\n{}</blockquote>\n",
                markdown_to_html(&inner)
            );
            continue;
        }
        // Table: a header row followed by a separator row.
        if trimmed.starts_with('|') && i + 1 < lines.len() && is_table_separator(lines[i + 1]) {
            let header = split_table_row(trimmed);
            i += 2;
            let mut rows = Vec::new();
            while i < lines.len() && lines[i].trim().starts_with('|') {
                rows.push(split_table_row(lines[i].trim()));
                i += 1;
            }
            out.push_str(&table_html_inline(&header, &rows));
            continue;
        }
        // Lists.
        if let Some(ordered) = list_marker(line).map(|(o, _)| o) {
            let tag = if ordered { "ol" } else { "ul" };
            let _ = writeln!(out, "<{tag}>");
            let mut item: Option<String> = None;
            while i < lines.len() {
                let l = lines[i];
                if l.trim().is_empty() {
                    // A blank line ends the list unless another item follows.
                    if i + 1 < lines.len()
                        && list_marker(lines[i + 1]).is_some_and(|(o, _)| o == ordered)
                    {
                        i += 1;
                        continue;
                    }
                    break;
                }
                match list_marker(l) {
                    Some((o, rest)) if o == ordered => {
                        if let Some(prev) = item.take() {
                            let _ = writeln!(out, "<li>{}</li>", inline_html(&prev));
                        }
                        item = Some(rest.to_string());
                    }
                    Some(_) => break,
                    None if l.starts_with(' ') || l.starts_with('\t') => {
                        // Continuation of the current item.
                        let cur = item.get_or_insert_with(String::new);
                        cur.push(' ');
                        cur.push_str(l.trim());
                    }
                    None => break,
                }
                i += 1;
            }
            if let Some(prev) = item.take() {
                let _ = writeln!(out, "<li>{}</li>", inline_html(&prev));
            }
            let _ = writeln!(out, "</{tag}>");
            continue;
        }
        // Paragraph: up to a blank line or the start of another block.
        let mut para: Vec<&str> = Vec::new();
        while i < lines.len() {
            let l = lines[i];
            let t = l.trim();
            if t.is_empty()
                || (!para.is_empty()
                    && (t.starts_with("```")
                        || t.starts_with('>')
                        || list_marker(l).is_some()
                        || (t.starts_with('|')
                            && i + 1 < lines.len()
                            && is_table_separator(lines[i + 1]))))
            {
                break;
            }
            para.push(t);
            i += 1;
        }
        let _ = writeln!(out, "<p>{}</p>", inline_html(&para.join("\n")));
    }
    out
}

/// `Some((ordered, rest))` if `line` starts a list item (`- `, `* `, `1. `).
fn list_marker(line: &str) -> Option<(bool, &str)> {
    let t = line.trim_start();
    if line.len() - t.len() > 3 && !t.starts_with('-') && !t.starts_with('*') {
        return None;
    }
    if let Some(rest) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) {
        return Some((false, rest));
    }
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    if digits > 0
        && digits < 10
        && let Some(rest) = t[digits..].strip_prefix(". ")
    {
        return Some((true, rest));
    }
    None
}

/// Whether `line` is a table separator row such as `|---|:--:|`.
fn is_table_separator(line: &str) -> bool {
    let t = line.trim();
    if !t.starts_with('|') {
        return false;
    }
    let cells = split_table_row(t);
    !cells.is_empty()
        && cells.iter().all(|c| {
            let c = c.trim();
            !c.is_empty() && c.contains('-') && c.chars().all(|ch| ch == '-' || ch == ':')
        })
}

/// Splits `| a | b \| c |` into `["a", "b | c"]`.
fn split_table_row(line: &str) -> Vec<String> {
    let t = line.trim();
    let t = t.strip_prefix('|').unwrap_or(t);
    let mut cells = Vec::new();
    let mut cur = String::new();
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cur.push('|');
                chars.next();
            }
            '|' => cells.push(std::mem::take(&mut cur).trim().to_string()),
            c => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        cells.push(cur.trim().to_string());
    }
    cells
}

/// An HTML table whose cells are inline markdown.
fn table_html_inline(header: &[String], rows: &[Vec<String>]) -> String {
    let width = rows
        .iter()
        .map(Vec::len)
        .chain(std::iter::once(header.len()))
        .max()
        .unwrap_or(0);
    let mut out = String::from("<table>\n<thead><tr>");
    for i in 0..width {
        let _ = write!(
            out,
            "<th>{}</th>",
            inline_html(header.get(i).map(String::as_str).unwrap_or(""))
        );
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for r in rows {
        out.push_str("<tr>");
        for i in 0..width {
            let c = r.get(i).map(String::as_str).unwrap_or("");
            let class = if looks_numeric(c) {
                r#" class="num""#
            } else {
                ""
            };
            let _ = write!(out, "<td{class}>{}</td>", inline_html(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// Inline markdown: `` `code` ``, `**bold**`, `[text](url)`; the rest is
/// escaped. Unmatched markers are shown literally.
fn inline_html(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let find = |from: usize, pat: &[char]| -> Option<usize> {
        (from..chars.len().saturating_sub(pat.len() - 1)).find(|&j| chars[j..].starts_with(pat))
    };
    let mut out = String::new();
    let mut bold = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '`' {
            // A code span closes with the same number of backticks.
            let n = chars[i..].iter().take_while(|&&c| c == '`').count();
            let fence = vec!['`'; n];
            if let Some(j) = find(i + n, &fence) {
                let code: String = chars[i + n..j].iter().collect();
                let code = code
                    .strip_prefix(' ')
                    .and_then(|c| c.strip_suffix(' '))
                    .unwrap_or(&code);
                let _ = write!(out, "<code>{}</code>", escape_html(code));
                i = j + n;
                continue;
            }
            out.push_str(&"`".repeat(n));
            i += n;
            continue;
        }
        if c == '*' && chars.get(i + 1) == Some(&'*') {
            if bold {
                out.push_str("</strong>");
                bold = false;
                i += 2;
                continue;
            }
            if find(i + 2, &['*', '*']).is_some() {
                out.push_str("<strong>");
                bold = true;
                i += 2;
                continue;
            }
        }
        if c == '['
            && let Some(close) = find(i + 1, &[']', '('])
            && let Some(end) = find(close + 2, &[')'])
        {
            let text: String = chars[i + 1..close].iter().collect();
            let url: String = chars[close + 2..end].iter().collect();
            if !text.contains(']') && safe_url(&url) {
                let _ = write!(
                    out,
                    "<a href=\"{}\">{}</a>",
                    escape_html(url.trim()),
                    inline_html(&text)
                );
                i = end + 1;
                continue;
            }
        }
        if c == '\n' {
            out.push('\n');
        } else {
            out.push_str(&escape_html(&c.to_string()));
        }
        i += 1;
    }
    if bold {
        out.push_str("</strong>");
    }
    out
}

/// Links may be web links, in-page anchors or relative paths; no other
/// scheme (`javascript:`, `data:`, ...).
fn safe_url(url: &str) -> bool {
    let u = url.trim();
    if u.is_empty() || u.contains(char::is_whitespace) {
        return false;
    }
    let lower = u.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with('#') {
        return true;
    }
    match (u.find(':'), u.find('/')) {
        (None, _) => true,
        (Some(colon), Some(slash)) => slash < colon,
        (Some(_), None) => false,
    }
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

    #[test]
    fn markdown_subset() {
        let html = markdown_to_html(
            "Para one\ncontinues.\n\n- a\n  more a\n- b\n\n1. x\n2. y\n\n| h1 | h2 |\n|---|--:|\n| `c` | 2 |\n\n> quoted **q**\n\n```\n<raw>\n```\n### Head\n[link](https://example.org) [bad](javascript:alert(1)) **unclosed",
        );
        assert!(html.contains("<p>Para one\ncontinues.</p>"), "{html}");
        assert!(
            html.contains("<ul>\n<li>a more a</li>\n<li>b</li>\n</ul>"),
            "{html}"
        );
        assert!(
            html.contains("<ol>\n<li>x</li>\n<li>y</li>\n</ol>"),
            "{html}"
        );
        assert!(html.contains("<th>h1</th>"), "{html}");
        assert!(html.contains("<td class=\"num\">2</td>"), "{html}");
        assert!(
            html.contains("<blockquote>\n<p>quoted <strong>q</strong></p>\n</blockquote>"),
            "{html}"
        );
        assert!(
            html.contains("<pre><code>&lt;raw&gt;\n</code></pre>"),
            "{html}"
        );
        assert!(html.contains("<h5>Head</h5>"), "{html}");
        assert!(
            html.contains("<a href=\"https://example.org\">link</a>"),
            "{html}"
        );
        assert!(!html.contains("href=\"javascript"), "{html}");
        assert!(html.contains("**unclosed"), "{html}");
        assert_eq!(markdown_to_html(""), "");
        assert_eq!(inline_html("a < b & `x`"), "a &lt; b &amp; <code>x</code>");
        assert_eq!(inline_html("`unclosed"), "`unclosed");
    }

    #[test]
    fn verdict_labels() {
        assert_eq!(Verdict::Holds.label(), "holds");
        assert_eq!(Verdict::Differs.label(), "differs");
        assert_eq!(Verdict::NotMeasurable.label(), "not measurable here");
        assert_eq!(Verdict::Partial.label(), "partly holds");
        assert_eq!(Verdict::Partial.to_string(), "partly holds");
    }
}
