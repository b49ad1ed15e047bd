//! Hand-written SVG charts for the experiments' figures.
//!
//! A [`Figure`] is a title, a caption (typically the machine summary) and a
//! grid of panels, each about 520x360 px: [`LinePanel`]s (series of points,
//! e.g. time vs threads per lock) and [`BarPanel`]s (one bar per label,
//! coloured by group, with optional labelled reference lines).
//! [`render_svg`] turns it into a self-contained SVG document; the output is
//! a pure function of the figure (no fonts, clocks or hash order involved),
//! so the same data always gives byte-identical files.
//!
//! Conventions:
//! - Linear axes get "nice" ticks (1-2-5 steps); when every x is an integer
//!   (thread counts) the x ticks are integers. A linear y axis always shows 0.
//! - Log axes get decade ticks (with 1-2-5 ticks when the span is short);
//!   non-positive values cannot be shown on a log axis and are skipped, as
//!   are NaN and infinite values everywhere. A panel with nothing to show
//!   says "no data".
//! - Oversubscribed points (more threads than cores) are drawn as hollow
//!   markers over a lightly shaded band; the figure caption says so.
//! - Up to 16 series get distinct colours; markers (6 shapes) and dash
//!   patterns vary as well, so more series stay distinguishable.
//! - All text is XML-escaped.

use std::fmt::Write as _;
use std::path::Path;

use crate::output::data::Row;

/// Width of one panel, in px.
pub const PANEL_WIDTH: f64 = 520.0;
/// Height of one panel, in px.
pub const PANEL_HEIGHT: f64 = 360.0;

/// The sentence the caption gains when a figure shows oversubscribed points.
pub const OVERSUBSCRIBED_NOTE: &str =
    "Hollow markers and shaded band: oversubscribed (more threads than cores).";

/// One point of a [`Series`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// x value (e.g. threads).
    pub x: f64,
    /// y value (the metric).
    pub y: f64,
    /// Drawn hollow, over the shaded band, when true.
    pub oversubscribed: bool,
}

impl Point {
    /// A point.
    pub fn new(x: f64, y: f64, oversubscribed: bool) -> Point {
        Point {
            x,
            y,
            oversubscribed,
        }
    }
}

/// A named line of points. Points are drawn in x order; invalid points
/// (NaN, infinite, non-positive on a log axis) leave a gap in the line.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend entry (lock, strategy, ... by registry name).
    pub name: String,
    /// The points, in any order.
    pub points: Vec<Point>,
}

impl Series {
    /// An empty series.
    pub fn new(name: impl Into<String>) -> Series {
        Series {
            name: name.into(),
            points: Vec::new(),
        }
    }

    /// Builder: appends a point.
    pub fn point(mut self, x: f64, y: f64, oversubscribed: bool) -> Series {
        self.points.push(Point::new(x, y, oversubscribed));
        self
    }
}

/// Groups rows into series by their `series` column (first-seen order), with
/// x = `threads`, y = `value` and the row's `oversubscribed` flag. Filter the
/// rows to one metric first (see [`crate::output::data::filter`]).
pub fn series_from_rows<'a>(rows: impl IntoIterator<Item = &'a Row>) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for row in rows {
        let point = Point::new(f64::from(row.threads), row.value, row.oversubscribed);
        match out.iter_mut().find(|s| s.name == row.series) {
            Some(series) => series.points.push(point),
            None => out.push(Series {
                name: row.series.clone(),
                points: vec![point],
            }),
        }
    }
    out
}

/// Axis scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scale {
    /// Linear, with 1-2-5 ticks.
    #[default]
    Linear,
    /// Base-10 logarithmic; non-positive values are skipped.
    Log,
}

/// A panel of lines: y against x for each series.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinePanel {
    /// Panel title.
    pub title: String,
    /// x-axis label, e.g. `threads`.
    pub x_label: String,
    /// y-axis label, with unit, e.g. `elapsed (ms)`.
    pub y_label: String,
    /// x scale.
    pub x_scale: Scale,
    /// y scale.
    pub y_scale: Scale,
    /// The lines.
    pub series: Vec<Series>,
    /// A vertical dashed line at x with a label, e.g. `(2.0, "cores = 2")`.
    pub x_marker: Option<(f64, String)>,
}

impl LinePanel {
    /// A panel with linear axes, no series and no marker.
    pub fn new(title: &str, x_label: &str, y_label: &str) -> LinePanel {
        LinePanel {
            title: title.to_string(),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            ..LinePanel::default()
        }
    }
}

/// One bar of a [`BarPanel`].
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Label under the bar (rotated when long).
    pub label: String,
    /// Bar height.
    pub value: f64,
    /// Bars of the same group share a colour and a legend entry; an empty
    /// group name gets no legend entry.
    pub group: String,
}

impl Bar {
    /// A bar.
    pub fn new(label: &str, value: f64, group: &str) -> Bar {
        Bar {
            label: label.to_string(),
            value,
            group: group.to_string(),
        }
    }
}

/// A panel of bars, in the given order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BarPanel {
    /// Panel title.
    pub title: String,
    /// y-axis label, with unit.
    pub y_label: String,
    /// y scale.
    pub y_scale: Scale,
    /// The bars.
    pub bars: Vec<Bar>,
    /// Horizontal dashed lines `(label, y)`, e.g. a paper's number or a
    /// physical limit.
    pub reference_lines: Vec<(String, f64)>,
}

/// A panel of a [`Figure`].
#[derive(Debug, Clone, PartialEq)]
pub enum Panel {
    /// Lines.
    Line(LinePanel),
    /// Bars.
    Bar(BarPanel),
}

/// A figure: title, caption and a grid of panels.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Figure {
    /// Title at the top.
    pub title: String,
    /// Small text under the title (e.g. the machine summary); `\n` starts a
    /// new line, long lines are wrapped.
    pub caption: String,
    /// The panels, laid out row by row.
    pub panels: Vec<Panel>,
    /// Panels per row (0 is treated as 1).
    pub columns: usize,
}

/// Writes the figure to `path` as SVG, creating the parent directory if
/// needed.
pub fn write_svg(path: &Path, fig: &Figure) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{}: cannot create directory: {e}", dir.display()))?;
    }
    std::fs::write(path, render_svg(fig))
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

/// Renders the figure as a standalone SVG document (starts with `<svg`).
pub fn render_svg(fig: &Figure) -> String {
    let columns = fig.columns.clamp(1, fig.panels.len().max(1));
    let rows = fig.panels.len().div_ceil(columns);
    let width = columns as f64 * PANEL_WIDTH;

    let mut caption_lines: Vec<String> = Vec::new();
    let max_chars = ((width - 24.0) / (11.0 * CHAR_W)).max(20.0) as usize;
    for line in fig.caption.lines() {
        caption_lines.extend(wrap(line, max_chars));
    }
    if fig.panels.iter().any(panel_has_oversubscribed) {
        caption_lines.extend(wrap(OVERSUBSCRIBED_NOTE, max_chars));
    }
    let title_h = if fig.title.trim().is_empty() {
        8.0
    } else {
        30.0
    };
    let header = title_h + caption_lines.len() as f64 * 15.0 + 6.0;
    let panel_h = PANEL_HEIGHT
        + fig
            .panels
            .iter()
            .map(legend_below_height)
            .fold(0.0, f64::max);
    let body = if rows == 0 {
        60.0
    } else {
        rows as f64 * panel_h
    };
    let height = header + body;

    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif">"#,
        w = n(width),
        h = n(height)
    );
    s.push('\n');
    let _ = writeln!(
        s,
        r##"<rect x="0" y="0" width="{}" height="{}" fill="#ffffff"/>"##,
        n(width),
        n(height)
    );
    if !fig.title.trim().is_empty() {
        let title = fit(&fig.title, width - 24.0, 16.0);
        text(&mut s, 12.0, 22.0, 16.0, "start", "bold", "#000000", &title);
    }
    for (i, line) in caption_lines.iter().enumerate() {
        let y = title_h + 11.0 + i as f64 * 15.0;
        text(&mut s, 12.0, y, 11.0, "start", "normal", "#444444", line);
    }
    if rows == 0 {
        text(
            &mut s,
            width / 2.0,
            header + 34.0,
            14.0,
            "middle",
            "normal",
            "#888888",
            "no data",
        );
    }
    for (i, panel) in fig.panels.iter().enumerate() {
        let x0 = (i % columns) as f64 * PANEL_WIDTH;
        let y0 = header + (i / columns) as f64 * panel_h;
        match panel {
            Panel::Line(p) => render_line_panel(&mut s, p, x0, y0, panel_h),
            Panel::Bar(p) => render_bar_panel(&mut s, p, x0, y0, panel_h),
        }
    }
    s.push_str("</svg>\n");
    s
}

// ---------------------------------------------------------------------------
// Styles

/// 16 distinguishable colours (Tableau 10 and six darker ones).
const PALETTE: [&str; 16] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#e7ba52", "#637939", "#843c39", "#7b4173", "#000000",
];

/// Dash patterns: the first 8 series solid, then dashed, then dotted.
const DASHES: [&str; 3] = ["", "6 3", "2 2"];

/// Number of marker shapes (see [`marker`]).
const SHAPES: usize = 6;

/// Average glyph width of sans-serif text, as a fraction of the font size.
const CHAR_W: f64 = 0.58;

fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

fn dash(i: usize) -> &'static str {
    DASHES[(i / 8) % DASHES.len()]
}

// ---------------------------------------------------------------------------
// Small SVG helpers

/// A coordinate with one decimal (deterministic, compact).
fn n(v: f64) -> String {
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
fn text(
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
fn line(s: &mut String, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, width: f64, dash: &str) {
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

fn text_width(t: &str, size: f64) -> f64 {
    t.chars().count() as f64 * size * CHAR_W
}

/// Shortens `t` with an ellipsis to at most `max` characters.
fn truncate(t: &str, max: usize) -> String {
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
fn fit(t: &str, width: f64, size: f64) -> String {
    truncate(t, (width / (size * CHAR_W)).max(2.0) as usize)
}

/// Greedy word wrap to lines of at most `max` characters (long words are cut).
fn wrap(t: &str, max: usize) -> Vec<String> {
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
fn marker(s: &mut String, shape: usize, x: f64, y: f64, r: f64, color: &str, hollow: bool) {
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

// ---------------------------------------------------------------------------
// Axes

/// A mapped axis: domain, ticks and their labels.
#[derive(Debug, Clone)]
struct Axis {
    scale: Scale,
    lo: f64,
    hi: f64,
    ticks: Vec<(f64, String)>,
    minor: Vec<f64>,
}

impl Axis {
    /// Position of `v` in the domain, 0 at `lo` and 1 at `hi`.
    fn frac(&self, v: f64) -> f64 {
        // Halved so that `hi - lo` cannot overflow for extreme domains.
        let (v, lo, hi) = match self.scale {
            Scale::Linear => (v * 0.5, self.lo * 0.5, self.hi * 0.5),
            Scale::Log => (v.log10(), self.lo.log10(), self.hi.log10()),
        };
        if hi > lo { (v - lo) / (hi - lo) } else { 0.5 }
    }
}

/// Whether `v` can be placed on an axis of `scale`.
fn valid(v: f64, scale: Scale) -> bool {
    v.is_finite() && (scale == Scale::Linear || v > 0.0)
}

/// The 1-2-5 step giving about `target` intervals over `range`.
fn nice_step(range: f64, target: f64) -> f64 {
    let raw = range / target;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let m = if norm < 1.5 {
        1.0
    } else if norm < 3.0 {
        2.0
    } else if norm < 7.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// A linear axis over `values` (finite). `include_zero` extends the domain
/// to 0; `snap` extends it to whole steps (y axes); `integer` keeps ticks on
/// integers.
fn linear_axis(values: &[f64], include_zero: bool, snap: bool, integer: bool) -> Axis {
    let mut lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let mut hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if include_zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    if lo == hi {
        let d = if integer || lo == 0.0 {
            1.0
        } else {
            lo.abs() * 0.5
        };
        if include_zero && lo == 0.0 {
            hi = 1.0;
        } else {
            lo -= d;
            hi += d;
        }
    }
    let mut step = nice_step(hi * 0.5 - lo * 0.5, 2.5);
    if integer {
        step = step.max(1.0).round();
    }
    if !step.is_finite() || step <= 0.0 {
        // A span too wide (or too narrow) for f64 steps: label the ends.
        return Axis {
            scale: Scale::Linear,
            lo,
            hi,
            ticks: vec![(lo, format_value(lo)), (hi, format_value(hi))],
            minor: Vec::new(),
        };
    }
    if snap {
        let (slo, shi) = ((lo / step).floor() * step, (hi / step).ceil() * step);
        if slo.is_finite() && shi.is_finite() {
            (lo, hi) = (slo, shi);
        }
    }
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    let span = hi.abs().max(lo.abs());
    let ticks = (first..=last)
        .take(1000)
        .map(|i| {
            let v = i as f64 * step;
            (v, format_linear_tick(v, step, span))
        })
        .collect();
    Axis {
        scale: Scale::Linear,
        lo,
        hi,
        ticks,
        minor: Vec::new(),
    }
}

/// Decimals needed to show multiples of `step`.
fn decimals(step: f64) -> usize {
    (-(step.log10() + 1e-9).floor()).clamp(0.0, 12.0) as usize
}

/// Labels a linear tick: SI suffixes (k, M, G, T) from 10^4 on, scientific
/// notation for tiny ranges.
fn format_linear_tick(v: f64, step: f64, span: f64) -> String {
    if v.abs() < step * 1e-6 {
        return "0".to_string();
    }
    if span >= 1e4 {
        let exp3 = ((span.log10() / 3.0).floor() as i32).clamp(1, 4);
        let div = 10f64.powi(3 * exp3);
        let suffix = ["k", "M", "G", "T"][(exp3 - 1) as usize];
        return format!("{:.*}{suffix}", decimals(step / div), v / div);
    }
    if span < 1e-3 {
        let e = span.log10().floor() as i32;
        let div = 10f64.powi(e);
        return format!("{:.*}e{e}", decimals(step / div), v / div);
    }
    format!("{:.*}", decimals(step), v)
}

/// Labels a log tick `m * 10^e`.
fn format_log_tick(m: f64, e: i32) -> String {
    let v = m * 10f64.powi(e);
    if e >= 4 {
        let exp3 = (e / 3).clamp(1, 4);
        let suffix = ["k", "M", "G", "T"][(exp3 - 1) as usize];
        if e <= 14 {
            return format!(
                "{:.*}{suffix}",
                decimals(10f64.powi(e - 3 * exp3)),
                v / 10f64.powi(3 * exp3)
            );
        }
    }
    if !(-3..=14).contains(&e) {
        return format!("{m}e{e}");
    }
    format!("{:.*}", decimals(10f64.powi(e)), v)
}

/// A log axis over `values` (finite, positive). `snap` extends the domain to
/// whole decades (y axes); otherwise it is the data range, slightly padded.
fn log_axis(values: &[f64], snap: bool) -> Axis {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (mut llo, mut lhi) = (min.log10(), max.log10());
    if snap {
        llo = llo.floor();
        lhi = lhi.ceil();
        if lhi <= llo {
            lhi = llo + 1.0;
        }
    } else {
        if lhi - llo < 1e-9 {
            llo -= 0.3;
            lhi += 0.3;
        }
        let pad = (lhi - llo) * 0.04;
        llo -= pad;
        lhi += pad;
    }
    let decades = lhi - llo;
    let (e_lo, e_hi) = (llo.floor() as i32, lhi.ceil() as i32);
    let inside = |v: f64| v.log10() >= llo - 1e-9 && v.log10() <= lhi + 1e-9;

    let mut ticks: Vec<(f64, String)> = Vec::new();
    let mut minor = Vec::new();
    let every = (decades / 8.0).ceil().max(1.0) as i32;
    let mantissas: &[f64] = if decades <= 2.5 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    for e in e_lo..=e_hi {
        for m in 1..10 {
            let m = f64::from(m);
            let v = m * 10f64.powi(e);
            if !inside(v) {
                continue;
            }
            if mantissas.contains(&m) && (m != 1.0 || (e - e_lo) % every == 0) {
                ticks.push((v, format_log_tick(m, e)));
            } else if decades <= 5.0 {
                minor.push(v);
            }
        }
    }
    if ticks.len() < 2 {
        // Less than a few ticks inside a short span: label every mantissa,
        // and failing that the ends of the domain.
        ticks.clear();
        for e in e_lo..=e_hi {
            for m in 1..10 {
                let v = f64::from(m) * 10f64.powi(e);
                if inside(v) {
                    ticks.push((v, format_log_tick(f64::from(m), e)));
                }
            }
        }
        if ticks.len() < 2 {
            ticks = vec![(min, format_value(min)), (max, format_value(max))];
            ticks.dedup_by(|a, b| a.1 == b.1);
        }
        minor.clear();
    }
    Axis {
        scale: Scale::Log,
        lo: 10f64.powf(llo),
        hi: 10f64.powf(lhi),
        ticks,
        minor,
    }
}

/// A value with about 3 significant digits and SI suffixes, for bar labels.
pub fn format_value(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".to_string();
    }
    let a = v.abs();
    if a == 0.0 {
        return "0".to_string();
    }
    if a >= 1e4 {
        let exp3 = ((a.log10() / 3.0).floor() as i32).clamp(1, 4);
        let div = 10f64.powi(3 * exp3);
        let suffix = ["k", "M", "G", "T"][(exp3 - 1) as usize];
        let scaled = v / div;
        return format!(
            "{}{suffix}",
            trim_zeros(format!("{:.*}", sig_decimals(scaled), scaled))
        );
    }
    if a < 1e-3 {
        return format!("{v:.2e}");
    }
    trim_zeros(format!("{:.*}", sig_decimals(v), v))
}

/// `"5.20"` -> `"5.2"`, `"9.00"` -> `"9"`; integers are left alone.
fn trim_zeros(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Decimals giving 3 significant digits.
fn sig_decimals(v: f64) -> usize {
    let digits = v.abs().log10().floor() as i32 + 1;
    (3 - digits).clamp(0, 6) as usize
}

// ---------------------------------------------------------------------------
// Panels

/// Whether the panel has an oversubscribed point that will be drawn.
fn panel_has_oversubscribed(panel: &Panel) -> bool {
    match panel {
        Panel::Line(p) => line_has_oversubscribed(p),
        Panel::Bar(_) => false,
    }
}

/// Whether the line panel has an oversubscribed point that will be drawn.
fn line_has_oversubscribed(p: &LinePanel) -> bool {
    p.series.iter().any(|s| {
        s.points
            .iter()
            .any(|pt| pt.oversubscribed && valid(pt.x, p.x_scale) && valid(pt.y, p.y_scale))
    })
}

/// The plot area of a panel.
#[derive(Debug, Clone, Copy)]
struct Area {
    left: f64,
    top: f64,
    right: f64,
    bottom: f64,
}

impl Area {
    fn width(&self) -> f64 {
        self.right - self.left
    }
    fn height(&self) -> f64 {
        self.bottom - self.top
    }
}

fn panel_title(s: &mut String, title: &str, x0: f64, y0: f64) {
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

fn y_label(s: &mut String, label: &str, x0: f64, area: Area) {
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

fn frame(s: &mut String, a: Area) {
    let _ = writeln!(
        s,
        r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#333333" stroke-width="1"/>"##,
        n(a.left),
        n(a.top),
        n(a.width()),
        n(a.height())
    );
}

fn no_data(s: &mut String, a: Area) {
    frame(s, a);
    let (x, y) = ((a.left + a.right) / 2.0, (a.top + a.bottom) / 2.0);
    text(s, x, y, 14.0, "middle", "normal", "#888888", "no data");
}

/// Draws the y axis: grid lines, ticks and labels.
fn draw_y_axis(s: &mut String, axis: &Axis, a: Area, y_of: &dyn Fn(f64) -> f64) {
    for &v in &axis.minor {
        let y = y_of(v);
        line(s, a.left - 3.0, y, a.left, y, "#333333", 0.8, "");
    }
    for (v, label) in &axis.ticks {
        let y = y_of(*v);
        line(s, a.left, y, a.right, y, "#e6e6e6", 1.0, "");
        line(s, a.left - 5.0, y, a.left, y, "#333333", 1.0, "");
        text(
            s,
            a.left - 7.0,
            y + 3.5,
            10.0,
            "end",
            "normal",
            "#222222",
            label,
        );
    }
}

/// Legend entries: (name, colour, shape, dash, hollow).
type LegendEntry = (String, &'static str, Option<usize>, &'static str, bool);

/// Most legend entries drawn beside the plot; more go below it, in columns.
const LEGEND_BESIDE_MAX: usize = 9;
/// Height of one legend row below the plot.
const LEGEND_ROW_H: f64 = 15.0;

/// Width the legend needs for `names` (every name in full, up to 40
/// characters), or 0 without entries.
fn legend_width(names: &[&str]) -> f64 {
    let longest = names
        .iter()
        .map(|n| n.chars().count().min(40))
        .max()
        .unwrap_or(0);
    if names.is_empty() {
        0.0
    } else {
        (longest as f64 * 10.0 * CHAR_W + 34.0).max(70.0)
    }
}

/// The legend names of a line panel (series, then "oversubscribed").
fn legend_names(p: &LinePanel) -> Vec<&str> {
    let mut names: Vec<&str> = p.series.iter().map(|s| s.name.as_str()).collect();
    if line_has_oversubscribed(p) {
        names.push("oversubscribed");
    }
    names
}

/// Whether the legend of `names` goes below the plot: too many entries,
/// or names too long to leave the plot its width beside them.
fn legend_below(names: &[&str]) -> bool {
    names.len() > LEGEND_BESIDE_MAX || legend_width(names) > 180.0
}

/// Columns and rows of a legend below the plot.
fn legend_grid(names: &[&str]) -> (usize, usize) {
    let col_w = legend_width(names).max(1.0);
    let cols = (((PANEL_WIDTH - 70.0) / col_w) as usize).clamp(1, names.len().max(1));
    (cols, names.len().div_ceil(cols))
}

/// Extra panel height a legend below the plot needs (0 if beside).
fn legend_below_height(panel: &Panel) -> f64 {
    match panel {
        Panel::Line(p) => {
            let names = legend_names(p);
            if legend_below(&names) {
                legend_grid(&names).1 as f64 * LEGEND_ROW_H + 8.0
            } else {
                0.0
            }
        }
        Panel::Bar(_) => 0.0,
    }
}

/// Draws the legend to the right of the plot area.
fn draw_legend(s: &mut String, entries: &[LegendEntry], x: f64, width: f64, a: Area) {
    if entries.is_empty() {
        return;
    }
    let step = (a.height() / entries.len() as f64).min(15.0);
    let size = (step - 2.0).clamp(5.0, 10.0);
    let max_chars = ((width - 30.0) / (size * CHAR_W)).max(4.0) as usize;
    for (i, (name, color, shape, dash, hollow)) in entries.iter().enumerate() {
        let y = a.top + step * (i as f64 + 0.5);
        match shape {
            Some(shape) => {
                if !hollow {
                    line(s, x, y, x + 22.0, y, color, 1.8, dash);
                }
                marker(
                    s,
                    *shape,
                    x + 11.0,
                    y,
                    (size * 0.4).max(2.0),
                    color,
                    *hollow,
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    r#"<rect x="{}" y="{}" width="14" height="{}" fill="{color}"/>"#,
                    n(x + 4.0),
                    n(y - size * 0.45),
                    n(size * 0.9)
                );
            }
        }
        text(
            s,
            x + 27.0,
            y + size * 0.35,
            size,
            "start",
            "normal",
            "#222222",
            &truncate(name, max_chars),
        );
    }
}

/// Draws a legend in columns below the plot, rows from `top`.
fn draw_legend_below(s: &mut String, entries: &[LegendEntry], left: f64, top: f64, names: &[&str]) {
    let (cols, _) = legend_grid(names);
    let col_w = legend_width(names);
    for (i, (name, color, shape, dash, hollow)) in entries.iter().enumerate() {
        let x = left + (i % cols) as f64 * col_w;
        let y = top + (i / cols) as f64 * LEGEND_ROW_H + LEGEND_ROW_H / 2.0;
        if let Some(shape) = shape {
            if !hollow {
                line(s, x, y, x + 22.0, y, color, 1.8, dash);
            }
            marker(s, *shape, x + 11.0, y, 3.5, color, *hollow);
        }
        text(
            s,
            x + 27.0,
            y + 3.5,
            10.0,
            "start",
            "normal",
            "#222222",
            name,
        );
    }
}

fn render_line_panel(s: &mut String, p: &LinePanel, x0: f64, y0: f64, h: f64) {
    panel_title(s, &p.title, x0, y0);
    let over = line_has_oversubscribed(p);
    let legend_names = legend_names(p);
    let below = legend_below(&legend_names);
    let lw = if below {
        0.0
    } else {
        legend_width(&legend_names)
    };
    let below_h = if below {
        legend_grid(&legend_names).1 as f64 * LEGEND_ROW_H + 8.0
    } else {
        0.0
    };
    // The strip between the panel title and the frame holds the labels of
    // the cores line and the oversubscribed band, so they never cover data.
    let a = Area {
        left: x0 + 62.0,
        top: y0 + 46.0,
        right: x0 + PANEL_WIDTH - 12.0 - if lw > 0.0 { lw + 8.0 } else { 0.0 },
        bottom: y0 + h - 44.0 - below_h,
    };
    y_label(s, &p.y_label, x0, a);
    let xl = fit(&p.x_label, a.width(), 11.0);
    text(
        s,
        (a.left + a.right) / 2.0,
        a.bottom + 34.0,
        11.0,
        "middle",
        "normal",
        "#222222",
        &xl,
    );

    // Points per series in x order; `None` marks an invalid point (gap).
    let ok = |pt: &Point| valid(pt.x, p.x_scale) && valid(pt.y, p.y_scale);
    let sorted: Vec<Vec<Option<Point>>> = p
        .series
        .iter()
        .map(|series| {
            let mut pts = series.points.clone();
            pts.sort_by(|a, b| a.x.total_cmp(&b.x));
            pts.into_iter().map(|pt| ok(&pt).then_some(pt)).collect()
        })
        .collect();
    let xs: Vec<f64> = sorted.iter().flatten().flatten().map(|pt| pt.x).collect();
    let ys: Vec<f64> = sorted.iter().flatten().flatten().map(|pt| pt.y).collect();

    let entries: Vec<LegendEntry> = p
        .series
        .iter()
        .enumerate()
        .map(|(i, series)| {
            (
                series.name.clone(),
                color(i),
                Some(i % SHAPES),
                dash(i),
                false,
            )
        })
        .chain(over.then(|| ("oversubscribed".to_string(), "#444444", Some(0), "", true)))
        .collect();
    if below {
        draw_legend_below(s, &entries, x0 + 62.0, a.bottom + 44.0, &legend_names);
    } else {
        draw_legend(s, &entries, a.right + 10.0, lw, a);
    }

    if xs.is_empty() {
        no_data(s, a);
        return;
    }
    let integer_x = xs.iter().all(|x| x.fract() == 0.0);
    let x_axis = match p.x_scale {
        Scale::Linear => linear_axis(&xs, false, false, integer_x),
        Scale::Log => log_axis(&xs, false),
    };
    let y_axis = match p.y_scale {
        Scale::Linear => linear_axis(&ys, true, true, false),
        Scale::Log => log_axis(&ys, true),
    };
    const INSET: f64 = 12.0;
    let x_of = |v: f64| a.left + INSET + x_axis.frac(v) * (a.width() - 2.0 * INSET);
    let y_of = |v: f64| a.bottom - y_axis.frac(v) * a.height();

    // Oversubscribed band: from between the last fitting x and the first
    // oversubscribed x (or the cores marker) to the right edge.
    let first_over = sorted
        .iter()
        .flatten()
        .flatten()
        .filter(|pt| pt.oversubscribed)
        .map(|pt| pt.x)
        .fold(f64::INFINITY, f64::min);
    if first_over.is_finite() {
        let below = xs
            .iter()
            .copied()
            .filter(|&x| x < first_over)
            .fold(f64::NEG_INFINITY, f64::max);
        let marker_x = p
            .x_marker
            .as_ref()
            .map(|(x, _)| *x)
            .filter(|&x| valid(x, p.x_scale) && x <= first_over && x >= below);
        let start = match marker_x {
            Some(m) => x_of(m),
            None if below.is_finite() => (x_of(below) + x_of(first_over)) / 2.0,
            None => a.left,
        };
        let start = start.clamp(a.left, a.right);
        let _ = writeln!(
            s,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="#f2e6d9" fill-opacity="0.6"/>"##,
            n(start),
            n(a.top),
            n(a.right - start),
            n(a.height())
        );
        if a.right - start > 80.0 {
            text(
                s,
                start + 4.0,
                a.top - 4.0,
                9.0,
                "start",
                "normal",
                "#8a6d4b",
                "oversubscribed",
            );
        }
    }

    draw_y_axis(s, &y_axis, a, &y_of);
    for &v in &x_axis.minor {
        let x = x_of(v);
        line(s, x, a.bottom, x, a.bottom + 3.0, "#333333", 0.8, "");
    }
    for (v, label) in &x_axis.ticks {
        let x = x_of(*v);
        line(s, x, a.top, x, a.bottom, "#f0f0f0", 1.0, "");
        line(s, x, a.bottom, x, a.bottom + 5.0, "#333333", 1.0, "");
        text(
            s,
            x,
            a.bottom + 16.0,
            10.0,
            "middle",
            "normal",
            "#222222",
            label,
        );
    }
    frame(s, a);

    if let Some((mx, label)) = &p.x_marker
        && valid(*mx, p.x_scale)
        && *mx >= x_axis.lo.min(x_axis.hi)
        && *mx <= x_axis.hi.max(x_axis.lo)
    {
        let x = x_of(*mx);
        line(s, x, a.top, x, a.bottom, "#555555", 1.2, "5 4");
        let t = fit(label, (x - a.left).max(40.0), 10.0);
        text(
            s,
            x - 4.0,
            a.top - 4.0,
            10.0,
            "end",
            "normal",
            "#555555",
            &t,
        );
    }

    for (i, pts) in sorted.iter().enumerate() {
        let c = color(i);
        let d = dash(i);
        // Lines: runs of consecutive valid points.
        for run in pts.split(Option::is_none) {
            if run.len() < 2 {
                continue;
            }
            let coords: Vec<String> = run
                .iter()
                .flatten()
                .map(|pt| format!("{},{}", n(x_of(pt.x)), n(y_of(pt.y))))
                .collect();
            let dash_attr = if d.is_empty() {
                String::new()
            } else {
                format!(r#" stroke-dasharray="{d}""#)
            };
            let _ = writeln!(
                s,
                r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="1.8"{dash_attr}/>"#,
                coords.join(" ")
            );
        }
        for pt in pts.iter().flatten() {
            marker(
                s,
                i % SHAPES,
                x_of(pt.x),
                y_of(pt.y),
                3.8,
                c,
                pt.oversubscribed,
            );
        }
    }
}

fn render_bar_panel(s: &mut String, p: &BarPanel, x0: f64, y0: f64, h: f64) {
    panel_title(s, &p.title, x0, y0);
    let mut groups: Vec<&str> = Vec::new();
    for bar in &p.bars {
        if !groups.contains(&bar.group.as_str()) {
            groups.push(&bar.group);
        }
    }
    let named: Vec<&str> = groups.iter().copied().filter(|g| !g.is_empty()).collect();
    let lw = legend_width(&named);
    let right = x0 + PANEL_WIDTH - 12.0 - if lw > 0.0 { lw + 8.0 } else { 0.0 };
    let left = x0 + 62.0;
    let count = p.bars.len().max(1) as f64;
    let slot = (right - left) / count;

    // Horizontal labels when they fit under their bar, else rotated 45°.
    let longest = p
        .bars
        .iter()
        .map(|b| b.label.chars().count())
        .max()
        .unwrap_or(0);
    let rotate = p
        .bars
        .iter()
        .any(|b| text_width(&b.label, 10.0) > slot - 4.0);
    let max_chars = if rotate { 30 } else { longest.max(1) };
    let label_h = if rotate {
        (longest.min(max_chars) as f64 * 10.0 * CHAR_W * 0.72 + 18.0).min(150.0)
    } else {
        26.0
    };
    let a = Area {
        left,
        top: y0 + 34.0,
        right,
        bottom: y0 + h - 10.0 - label_h,
    };
    y_label(s, &p.y_label, x0, a);

    let entries: Vec<LegendEntry> = groups
        .iter()
        .enumerate()
        .filter(|(_, g)| !g.is_empty())
        .map(|(i, g)| (g.to_string(), color(i), None, "", false))
        .collect();
    draw_legend(s, &entries, a.right + 10.0, lw, a);

    let ok = |v: f64| valid(v, p.y_scale);
    let mut ys: Vec<f64> = p.bars.iter().map(|b| b.value).filter(|&v| ok(v)).collect();
    if ys.is_empty() {
        no_data(s, a);
        return;
    }
    ys.extend(p.reference_lines.iter().map(|(_, v)| *v).filter(|&v| ok(v)));
    if p.y_scale == Scale::Linear {
        // Headroom for the value labels above the tallest bar.
        let (lo, hi) = ys
            .iter()
            .fold((0f64, 0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        ys.push(hi + (hi - lo) * 0.06);
        if lo < 0.0 {
            ys.push(lo - (hi - lo) * 0.06);
        }
    }
    let y_axis = match p.y_scale {
        Scale::Linear => linear_axis(&ys, true, true, false),
        Scale::Log => log_axis(&ys, true),
    };
    let y_of = |v: f64| a.bottom - y_axis.frac(v) * a.height();
    draw_y_axis(s, &y_axis, a, &y_of);
    let base = match p.y_scale {
        Scale::Linear => y_of(0.0),
        Scale::Log => a.bottom,
    };

    let show_values = p.bars.len() <= 24 && slot >= 18.0;
    for (i, bar) in p.bars.iter().enumerate() {
        let cx = a.left + slot * (i as f64 + 0.5);
        let g = groups.iter().position(|g| *g == bar.group).unwrap_or(0);
        if ok(bar.value) {
            let y = y_of(bar.value);
            let (top, h) = if y < base {
                (y, base - y)
            } else {
                (base, y - base)
            };
            let w = (slot * 0.7).max(1.0);
            let _ = writeln!(
                s,
                r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}"/>"#,
                n(cx - w / 2.0),
                n(top),
                n(w),
                n(h.max(0.5)),
                color(g)
            );
            if show_values {
                let ty = if y <= base { y - 3.0 } else { y + 10.0 };
                text(
                    s,
                    cx,
                    ty,
                    9.0,
                    "middle",
                    "normal",
                    "#333333",
                    &format_value(bar.value),
                );
            }
        } else {
            text(
                s,
                cx,
                a.bottom - 4.0,
                9.0,
                "middle",
                "normal",
                "#888888",
                "n/a",
            );
        }
        let label = truncate(&bar.label, max_chars);
        if rotate {
            let _ = writeln!(
                s,
                r##"<text x="0" y="0" font-size="10" text-anchor="end" fill="#222222" transform="translate({},{}) rotate(-45)">{}</text>"##,
                n(cx + 3.0),
                n(a.bottom + 12.0),
                escape_xml(&label)
            );
        } else {
            text(
                s,
                cx,
                a.bottom + 15.0,
                10.0,
                "middle",
                "normal",
                "#222222",
                &label,
            );
        }
    }
    frame(s, a);

    for (label, v) in &p.reference_lines {
        if !ok(*v) {
            continue;
        }
        let y = y_of(*v);
        line(s, a.left, y, a.right, y, "#555555", 1.2, "5 4");
        let t = fit(label, a.width() - 8.0, 9.0);
        text(
            s,
            a.right - 4.0,
            y - 3.0,
            9.0,
            "end",
            "normal",
            "#444444",
            &t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_line() -> LinePanel {
        let mut p = LinePanel::new("Shared counter <1,000,000>", "threads", "elapsed (ms)");
        for (i, name) in ["tas", "ttas", "mcs & clh"].iter().enumerate() {
            let mut s = Series::new(*name);
            for t in 1..=4u32 {
                s.points.push(Point::new(
                    f64::from(t),
                    f64::from(t) * (i as f64 + 1.0),
                    t > 2,
                ));
            }
            p.series.push(s);
        }
        p.x_marker = Some((2.0, "cores = 2".to_string()));
        p
    }

    fn check_svg(svg: &str) {
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        // Balanced text elements and no raw '&' outside entities.
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        for (i, _) in svg.match_indices('&') {
            let rest = &svg[i..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| rest.starts_with(e)),
                "unescaped & at {i}"
            );
        }
    }

    #[test]
    fn line_figure_renders_series_and_escapes() {
        let fig = Figure {
            title: "spin-counter".into(),
            caption: "Intel(R) Xeon(R), 2 logical CPUs".into(),
            panels: vec![Panel::Line(sample_line())],
            columns: 2,
        };
        let svg = render_svg(&fig);
        check_svg(&svg);
        assert!(svg.contains(">tas<") && svg.contains(">ttas<"));
        assert!(svg.contains("mcs &amp; clh"));
        assert!(svg.contains("&lt;1,000,000&gt;"));
        assert!(svg.contains("cores = 2"));
        assert!(svg.contains("oversubscribed (more threads than cores)"));
        assert!(
            svg.contains(r##"fill="#ffffff" stroke="#1f77b4""##),
            "hollow marker"
        );
        // Integer ticks for integer x.
        assert!(svg.contains(">3</text>") && !svg.contains(">1.5</text>"));
        assert_eq!(svg, render_svg(&fig), "deterministic");
    }

    #[test]
    fn log_axes_with_zero_negative_nan_do_not_panic() {
        let mut p = sample_line();
        p.x_scale = Scale::Log;
        p.y_scale = Scale::Log;
        p.series.push(
            Series::new("weird")
                .point(0.0, 1.0, false)
                .point(-1.0, 5.0, false)
                .point(2.0, 0.0, false)
                .point(3.0, -4.0, true)
                .point(f64::NAN, 1.0, false)
                .point(5.0, f64::INFINITY, true)
                .point(6.0, 1e6, true),
        );
        let svg = render_svg(&Figure {
            title: "log".into(),
            caption: String::new(),
            panels: vec![Panel::Line(p)],
            columns: 1,
        });
        check_svg(&svg);
        assert!(svg.contains(">weird<"));

        // A log panel whose only values are non-positive shows "no data".
        let mut only_bad = LinePanel::new("bad", "x", "y");
        only_bad.y_scale = Scale::Log;
        only_bad
            .series
            .push(Series::new("zero").point(1.0, 0.0, false));
        let svg = render_svg(&Figure {
            panels: vec![Panel::Line(only_bad)],
            ..Figure::default()
        });
        check_svg(&svg);
        assert!(svg.contains("no data"));
    }

    #[test]
    fn empty_inputs_do_not_panic() {
        let svg = render_svg(&Figure::default());
        check_svg(&svg);
        assert!(svg.contains("no data"));

        let svg = render_svg(&Figure {
            title: "empty panels".into(),
            caption: "a\nb".into(),
            panels: vec![
                Panel::Line(LinePanel::new("", "", "")),
                Panel::Line(LinePanel {
                    series: vec![Series::new("empty")],
                    ..LinePanel::default()
                }),
                Panel::Bar(BarPanel::default()),
            ],
            columns: 0,
        });
        check_svg(&svg);
        assert_eq!(svg.matches("no data").count(), 3);

        // Single point, constant values.
        let p = LinePanel {
            series: vec![Series::new("one").point(1.0, 5.0, false)],
            ..LinePanel::default()
        };
        let q = LinePanel {
            series: vec![
                Series::new("zeros")
                    .point(1.0, 0.0, false)
                    .point(2.0, 0.0, false),
            ],
            ..LinePanel::default()
        };
        let extreme = LinePanel {
            series: vec![
                Series::new("big")
                    .point(-1e308, -1e308, false)
                    .point(1e308, 1e308, true),
            ],
            ..LinePanel::default()
        };
        let tiny = LinePanel {
            series: vec![
                Series::new("tiny")
                    .point(1.0, 1e-300, false)
                    .point(2.0, 2e-300, false),
            ],
            ..LinePanel::default()
        };
        check_svg(&render_svg(&Figure {
            panels: vec![
                Panel::Line(p),
                Panel::Line(q),
                Panel::Line(extreme),
                Panel::Line(tiny),
            ],
            columns: 2,
            ..Figure::default()
        }));
    }

    #[test]
    fn bars_with_groups_reference_lines_and_long_labels() {
        let mut p = BarPanel {
            title: "AtomicInt".into(),
            y_label: "ns/op".into(),
            y_scale: Scale::Linear,
            bars: vec![
                Bar::new("fetch_add", 5.0, "hardware"),
                Bar::new("tas generic", 20.0, "lock"),
                Bar::new("tas dyn", 25.0, "lock"),
                Bar::new("mcs <generic>", f64::NAN, "lock"),
                Bar::new("negative", -3.0, ""),
            ],
            reference_lines: vec![("paper: 2-7x".into(), 15.0), ("bad".into(), f64::NAN)],
        };
        let svg = render_svg(&Figure {
            title: "bars".into(),
            panels: vec![Panel::Bar(p.clone())],
            columns: 1,
            ..Figure::default()
        });
        check_svg(&svg);
        assert!(svg.contains(">hardware<") && svg.contains(">lock<"));
        assert!(svg.contains("paper: 2-7x") && svg.contains("n/a"));
        assert!(svg.contains("mcs &lt;generic&gt;"));

        p.y_scale = Scale::Log;
        for i in 0..30 {
            p.bars.push(Bar::new(
                &format!("a rather long label number {i}"),
                f64::from(i),
                "x",
            ));
        }
        let svg = render_svg(&Figure {
            panels: vec![Panel::Bar(p)],
            ..Figure::default()
        });
        check_svg(&svg);
        assert!(svg.contains("rotate(-45)"));
    }

    #[test]
    fn many_series_get_distinct_styles() {
        let mut p = LinePanel::new("16 series", "threads", "ops/s");
        for i in 0..16 {
            p.series.push(
                Series::new(format!("s{i}"))
                    .point(1.0, f64::from(i), false)
                    .point(2.0, 1e5, false),
            );
        }
        let styles: std::collections::BTreeSet<(usize, &str, &str)> =
            (0..16).map(|i| (i % SHAPES, color(i), dash(i))).collect();
        assert_eq!(styles.len(), 16);
        let colors: std::collections::BTreeSet<&str> = (0..16).map(color).collect();
        assert_eq!(colors.len(), 16);
        let svg = render_svg(&Figure {
            panels: vec![Panel::Line(p)],
            ..Figure::default()
        });
        check_svg(&svg);
        assert!(svg.contains("100k"), "SI suffix on large ticks");
    }

    #[test]
    fn tick_helpers() {
        assert_eq!(nice_step(10.0, 5.0), 2.0);
        assert_eq!(nice_step(1.0, 5.0), 0.2);
        let ax = linear_axis(&[1.0, 2.0, 3.0, 4.0], false, false, true);
        let labels: Vec<&str> = ax.ticks.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["1", "2", "3", "4"]);
        let ax = linear_axis(&[0.1, 0.7], true, true, false);
        assert_eq!(ax.ticks.first().map(|t| t.1.as_str()), Some("0"));
        assert!(ax.ticks.iter().any(|t| t.1 == "0.2"), "{:?}", ax.ticks);
        let ax = log_axis(&[3.0, 2000.0], true);
        let labels: Vec<&str> = ax.ticks.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["1", "10", "100", "1000", "10k"]);
        let ax = log_axis(&[1.0, 16.0], false);
        let labels: Vec<&str> = ax.ticks.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["1", "2", "5", "10"]);
        let ax = log_axis(&[3.0, 4.0], false);
        assert!(ax.ticks.len() >= 2, "{:?}", ax.ticks);
        let ax = log_axis(&[1e-6, 1e12], true);
        assert!(ax.ticks.len() <= 10, "{:?}", ax.ticks);
        assert_eq!(format_value(1234.0), "1234");
        assert_eq!(format_value(12345.0), "12.3k");
        assert_eq!(format_value(0.5), "0.5");
        assert_eq!(format_value(120.0), "120");
        assert_eq!(format_value(12000.0), "12k");
        assert_eq!(format_value(f64::NAN), "n/a");
        assert_eq!(format_linear_tick(2e-5, 1e-5, 4e-5), "2e-5");
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
    }

    #[test]
    fn series_from_rows_groups_in_order() {
        let rows = [
            Row::new("e", "b", 1, false, "m", 1.0, "u"),
            Row::new("e", "a", 1, false, "m", 2.0, "u"),
            Row::new("e", "b", 4, true, "m", 3.0, "u"),
        ];
        let series = series_from_rows(&rows);
        assert_eq!(series.len(), 2);
        assert_eq!(series[0].name, "b");
        assert_eq!(series[0].points[1], Point::new(4.0, 3.0, true));
    }

    #[test]
    fn write_svg_reports_path() {
        let dir = std::env::temp_dir().join(format!("symmetry-plot-{}", std::process::id()));
        let path = dir.join("fig.svg");
        write_svg(&path, &Figure::default()).unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().starts_with("<svg"));
        // A directory in place of the file cannot be written.
        let err = write_svg(&dir, &Figure::default()).unwrap_err();
        assert!(err.contains(&dir.display().to_string()), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
