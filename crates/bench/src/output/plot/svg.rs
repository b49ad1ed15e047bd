//! Drawing: SVG elements with deterministic numbers and escaped text, the
//! styles that tell series apart (colour, marker shape, dash), text
//! fitting, and the parts every panel has (title, y label, frame).

use std::fmt::Write as _;

/// Width of one panel, in px.
pub(super) const PANEL_WIDTH: f64 = 520.0;
/// Height of one panel, in px, before a legend below the plot.
pub(super) const PANEL_HEIGHT: f64 = 360.0;

/// 16 distinguishable colours (Tableau 10 and six darker ones).
const PALETTE: [&str; 16] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#e7ba52", "#637939", "#843c39", "#7b4173", "#000000",
];

/// Dash patterns: the first 8 series solid, then dashed, then dotted.
const DASHES: [&str; 3] = ["", "6 3", "2 2"];

/// Number of marker shapes (see [`marker`]).
pub(super) const SHAPES: usize = 6;

/// Average glyph width of sans-serif text, as a fraction of the font size.
pub(super) const CHAR_W: f64 = 0.58;

/// The colour of series (or group) `i`.
pub(super) fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// The dash pattern of series `i` (empty: solid).
pub(super) fn dash(i: usize) -> &'static str {
    DASHES[(i / 8) % DASHES.len()]
}

/// A coordinate with one decimal (deterministic, compact).
pub(super) fn n(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// Escapes XML special characters.
pub fn escape_xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' && c != '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
pub(super) fn text(
    s: &mut String,
    x: f64,
    y: f64,
    size: f64,
    anchor: &str,
    weight: &str,
    fill: &str,
    t: &str,
) {
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" font-size="{}" text-anchor="{anchor}" font-weight="{weight}" fill="{fill}">{}</text>"#,
        n(x),
        n(y),
        n(size),
        escape_xml(t)
    );
}

#[allow(clippy::too_many_arguments)]
pub(super) fn line(
    s: &mut String,
    x1: f64,
    y1: f64,
    x2: f64,
    y2: f64,
    stroke: &str,
    width: f64,
    dash: &str,
) {
    let dash = if dash.is_empty() {
        String::new()
    } else {
        format!(r#" stroke-dasharray="{dash}""#)
    };
    let _ = writeln!(
        s,
        r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{stroke}" stroke-width="{}"{dash}/>"#,
        n(x1),
        n(y1),
        n(x2),
        n(y2),
        n(width)
    );
}

pub(super) fn text_width(t: &str, size: f64) -> f64 {
    t.chars().count() as f64 * size * CHAR_W
}

/// Shortens `t` with an ellipsis to at most `max` characters.
pub(super) fn truncate(t: &str, max: usize) -> String {
    let max = max.max(2);
    if t.chars().count() <= max {
        t.to_string()
    } else {
        let mut s: String = t.chars().take(max - 1).collect();
        s.push('…');
        s
    }
}

/// Shortens `t` to fit `width` px at font `size`.
pub(super) fn fit(t: &str, width: f64, size: f64) -> String {
    truncate(t, (width / (size * CHAR_W)).max(2.0) as usize)
}

/// Greedy word wrap to lines of at most `max` characters (long words are cut).
pub(super) fn wrap(t: &str, max: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in t.split_whitespace() {
        let word = truncate(word, max);
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > max {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(&word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

/// A marker of shape `shape % 6` (circle, square, triangle up, diamond,
/// triangle down, cross) centred at (x, y); hollow markers are white inside.
pub(super) fn marker(
    s: &mut String,
    shape: usize,
    x: f64,
    y: f64,
    r: f64,
    color: &str,
    hollow: bool,
) {
    let fill = if hollow { "#ffffff" } else { color };
    let style = format!(r#"fill="{fill}" stroke="{color}" stroke-width="1.5""#);
    let poly = |pts: &[(f64, f64)]| -> String {
        let p: Vec<String> = pts
            .iter()
            .map(|(dx, dy)| format!("{},{}", n(x + dx * r), n(y + dy * r)))
            .collect();
        format!(r#"<polygon points="{}" {style}/>"#, p.join(" "))
    };
    let el = match shape % SHAPES {
        0 => format!(
            r#"<circle cx="{}" cy="{}" r="{}" {style}/>"#,
            n(x),
            n(y),
            n(r)
        ),
        1 => {
            let h = r * 0.85;
            format!(
                r#"<rect x="{}" y="{}" width="{}" height="{}" {style}/>"#,
                n(x - h),
                n(y - h),
                n(2.0 * h),
                n(2.0 * h)
            )
        }
        2 => poly(&[(0.0, -1.15), (1.05, 0.75), (-1.05, 0.75)]),
        3 => poly(&[(0.0, -1.2), (1.2, 0.0), (0.0, 1.2), (-1.2, 0.0)]),
        4 => poly(&[(0.0, 1.15), (1.05, -0.75), (-1.05, -0.75)]),
        _ => {
            let a = 0.4;
            let b = 1.1;
            poly(&[
                (-a, -b),
                (a, -b),
                (a, -a),
                (b, -a),
                (b, a),
                (a, a),
                (a, b),
                (-a, b),
                (-a, a),
                (-b, a),
                (-b, -a),
                (-a, -a),
            ])
        }
    };
    s.push_str(&el);
    s.push('\n');
}

/// The plot area of a panel.
#[derive(Debug, Clone, Copy)]
pub(super) struct Area {
    pub(super) left: f64,
    pub(super) top: f64,
    pub(super) right: f64,
    pub(super) bottom: f64,
}

impl Area {
    pub(super) fn width(&self) -> f64 {
        self.right - self.left
    }
    pub(super) fn height(&self) -> f64 {
        self.bottom - self.top
    }
}

pub(super) fn panel_title(s: &mut String, title: &str, x0: f64, y0: f64) {
    let t = fit(title, PANEL_WIDTH - 20.0, 13.0);
    text(
        s,
        x0 + PANEL_WIDTH / 2.0,
        y0 + 20.0,
        13.0,
        "middle",
        "bold",
        "#000000",
        &t,
    );
}

pub(super) fn y_label(s: &mut String, label: &str, x0: f64, area: Area) {
    let t = fit(label, area.height(), 11.0);
    let (x, y) = (x0 + 14.0, (area.top + area.bottom) / 2.0);
    let _ = writeln!(
        s,
        r##"<text x="0" y="0" font-size="11" text-anchor="middle" fill="#222222" transform="translate({},{}) rotate(-90)">{}</text>"##,
        n(x),
        n(y),
        escape_xml(&t)
    );
}

pub(super) fn frame(s: &mut String, a: Area) {
    let _ = writeln!(
        s,
        r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#333333" stroke-width="1"/>"##,
        n(a.left),
        n(a.top),
        n(a.width()),
        n(a.height())
    );
}

pub(super) fn no_data(s: &mut String, a: Area) {
    frame(s, a);
    let (x, y) = ((a.left + a.right) / 2.0, (a.top + a.bottom) / 2.0);
    text(s, x, y, 14.0, "middle", "normal", "#888888", "no data");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_fitting() {
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(n(1.25), "1.3");
        assert_eq!(n(2.0), "2");
        assert_eq!(escape_xml("a<'&\"\u{1}"), "a&lt;&apos;&amp;&quot; ");
    }
}
