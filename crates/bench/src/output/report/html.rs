//! `REPORT.html`: the content of `REPORT.md` on one page, with the style
//! sheet (`style.css`) and the SVG plots inlined from the report directory,
//! so the file can be mailed or archived alone. The summary table links
//! each experiment to its section and shows its verdict as a coloured
//! badge; a missing plot is noted in the page, not an error.
//!
//! The free text (intro, claim, measured, why, table cells) is markdown
//! with GFM tables, converted by pulldown-cmark with three changes: raw
//! HTML is shown as text, links (and images) to anything but the web,
//! in-page anchors or relative paths show only their text, and table cells
//! that hold a number get `class="num"` (right-aligned).

use std::fmt::Write as _;
use std::path::Path;

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use super::model::{Section, Verdict, machine_items, verdict_counts};
use crate::output::machine::Machine;
use crate::output::plot::escape_xml as escape_html;

/// The report's style sheet.
const CSS: &str = include_str!("style.css");

/// CSS class of a verdict: the colour of its badge and box.
fn css_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Holds => "v-holds",
        Verdict::Partial => "v-partial",
        Verdict::Indistinct => "v-tie",
        Verdict::Differs => "v-differs",
        Verdict::NotMeasurable => "v-na",
    }
}

/// The whole HTML report.
pub(super) fn render(
    dir: &Path,
    title: &str,
    intro: &str,
    m: &Machine,
    sections: &[Section],
) -> String {
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
            "<li>{}</li>",
            inline_html(&format!("**{label}:** {value}"))
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
                css_class(s.verdict),
                s.verdict.label()
            );
        }
        h.push_str("</tbody>\n</table>\n");
    }

    for s in sections {
        h.push_str(&section_html(dir, s));
    }
    h.push_str("</main>\n</body>\n</html>\n");
    h
}

/// One section: heading, source and provenance, claim, measured, the
/// verdict box, table and plot.
fn section_html(dir: &Path, s: &Section) -> String {
    let mut h = String::new();
    let _ = writeln!(h, "<section id=\"{}\">", anchor(&s.id));
    let _ = writeln!(
        h,
        "<h2>{} — {}</h2>",
        escape_html(&s.id),
        escape_html(&s.title)
    );
    let _ = writeln!(
        h,
        "<p class=\"source\">{}</p>",
        inline_html(&format!("Source: {}", s.source))
    );
    if let Some(p) = &s.provenance {
        let _ = writeln!(
            h,
            "<p class=\"source\">{}</p>",
            inline_html(&format!("Data: {}", p.trim()))
        );
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
        c = css_class(s.verdict)
    );
    if let Some(t) = &s.table {
        h.push_str(&markdown_to_html(&t.to_markdown()));
    }
    if let Some(svg) = &s.svg {
        h.push_str("<figure>\n");
        h.push_str(&inline_svg(dir, svg));
        h.push_str("</figure>\n");
    }
    h.push_str("</section>\n");
    h
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

/// Markdown blocks to HTML (see the module docs for what differs from
/// plain pulldown-cmark). Headings sit below the section's `<h2>`.
pub(super) fn markdown_to_html(md: &str) -> String {
    write_html(Parser::new_ext(md, Options::ENABLE_TABLES).collect())
}

/// One line of markdown to inline HTML, without the paragraph around it
/// (start it with a word: a leading `- ` or `1. ` makes a list).
fn inline_html(md: &str) -> String {
    let paragraph = |e: &Event| {
        matches!(
            e,
            Event::Start(Tag::Paragraph) | Event::End(TagEnd::Paragraph)
        )
    };
    write_html(Parser::new(md).filter(|e| !paragraph(e)).collect())
}

/// The parser's events as HTML, with the report's changes.
fn write_html(events: Vec<Event>) -> String {
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, report_events(&events).into_iter());
    out
}

/// The parser's events with the report's changes: raw HTML as text,
/// unsafe links as their text, headings two levels down, numbers in table
/// bodies marked `num` (column alignments are not used).
fn report_events<'a>(events: &[Event<'a>]) -> Vec<Event<'a>> {
    let mut out = Vec::with_capacity(events.len());
    // Whether each open link or image was dropped.
    let mut links: Vec<bool> = Vec::new();
    let mut in_body = false;
    let mut num_cell = false;
    for (i, event) in events.iter().enumerate() {
        let event = match event.clone() {
            Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
            Event::Start(Tag::Link { ref dest_url, .. } | Tag::Image { ref dest_url, .. }) => {
                links.push(!safe_url(dest_url));
                if links.last() == Some(&true) {
                    continue;
                }
                event.clone()
            }
            Event::End(TagEnd::Link | TagEnd::Image) if links.pop() == Some(true) => continue,
            Event::Start(Tag::Heading {
                level,
                id,
                classes,
                attrs,
            }) => Event::Start(Tag::Heading {
                level: below_h2(level),
                id,
                classes,
                attrs,
            }),
            Event::End(TagEnd::Heading(level)) => Event::End(TagEnd::Heading(below_h2(level))),
            Event::Start(Tag::Table(_)) => {
                in_body = false;
                Event::Start(Tag::Table(Vec::new()))
            }
            Event::End(TagEnd::TableHead) => {
                in_body = true;
                event.clone()
            }
            Event::Start(Tag::TableCell) if in_body && looks_numeric(&cell_text(&events[i..])) => {
                num_cell = true;
                Event::Html(r#"<td class="num">"#.into())
            }
            Event::End(TagEnd::TableCell) if num_cell => {
                num_cell = false;
                Event::Html("</td>".into())
            }
            other => other,
        };
        out.push(event);
    }
    out
}

/// A markdown heading level moved below the report's `<h1>` and `<h2>`.
fn below_h2(level: HeadingLevel) -> HeadingLevel {
    HeadingLevel::try_from(level as usize + 2).unwrap_or(HeadingLevel::H6)
}

/// The text of the table cell whose events start `events`.
fn cell_text(events: &[Event]) -> String {
    events
        .iter()
        .skip(1)
        .take_while(|e| !matches!(e, Event::End(TagEnd::TableCell)))
        .filter_map(|e| match e {
            Event::Text(t) | Event::Code(t) => Some(t.as_ref()),
            _ => None,
        })
        .collect()
}

/// Whether a table cell holds a number (right-aligned).
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

    #[test]
    fn markdown_with_the_report_changes() {
        let html = markdown_to_html(
            "Para one\ncontinues.\n\n- a\n  more a\n- b\n\n1. x\n2. y\n\n| h1 | h2 |\n|---|--:|\n| `c` | 2 |\n\n> quoted **q**\n\n```\n<raw>\n```\n### Head\n[link](https://example.org) [bad](javascript:alert(1)) **unclosed <b>raw</b>",
        );
        assert!(html.contains("<p>Para one\ncontinues.</p>"), "{html}");
        assert!(
            html.contains("<ul>\n<li>a\nmore a</li>\n<li>b</li>\n</ul>"),
            "{html}"
        );
        assert!(
            html.contains("<ol>\n<li>x</li>\n<li>y</li>\n</ol>"),
            "{html}"
        );
        assert!(html.contains("<th>h1</th>"), "{html}");
        assert!(html.contains("<td><code>c</code></td>"), "{html}");
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
        assert!(html.contains(" bad "), "{html}");
        assert!(html.contains("**unclosed &lt;b&gt;raw&lt;/b&gt;"), "{html}");
        assert_eq!(markdown_to_html(""), "");
        assert_eq!(inline_html("a < b & `x`"), "a &lt; b &amp; <code>x</code>");
        assert_eq!(inline_html("`unclosed"), "`unclosed");
        assert_eq!(
            inline_html("**CPU:** x <y>"),
            "<strong>CPU:</strong> x &lt;y&gt;"
        );
    }

    #[test]
    fn numbers_and_urls() {
        for n in ["12.5", "-3", "1,024", "5%", "2.0×", "~40 ns", ".5e-3"] {
            assert!(looks_numeric(n), "{n}");
        }
        for t in ["n/a", "tas", "", "ns 5"] {
            assert!(!looks_numeric(t), "{t}");
        }
        assert!(safe_url("https://x.org/a") && safe_url("#sec-a") && safe_url("a/b.svg"));
        assert!(!safe_url("javascript:alert(1)") && !safe_url("data:x") && !safe_url(""));
    }
}
