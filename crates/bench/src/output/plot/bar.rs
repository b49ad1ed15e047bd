//! Bar panels: one bar per label, coloured by group, with value labels,
//! labels under the bars (rotated when long) and dashed reference lines.

use std::fmt::Write as _;

use super::axis::{draw_y_axis, format_value, linear_axis, log_axis};
use super::legend::{LegendEntry, draw_legend, legend_width};
use super::model::{BarPanel, Scale};
use super::svg::{
    Area, CHAR_W, PANEL_WIDTH, color, escape_xml, fit, frame, line, n, no_data, panel_title, text,
    text_width, truncate, y_label,
};

/// Draws a bar panel at (`x0`, `y0`), `h` px high.
pub(super) fn render(s: &mut String, p: &BarPanel, x0: f64, y0: f64, h: f64) {
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

    let ok = |v: f64| p.y_scale.shows(v);
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
