//! Legends: beside the plot when the entries are few and short, else in
//! columns below it (the panel grows to hold them).

use std::fmt::Write as _;

use super::model::{LinePanel, Panel};
use super::svg::{Area, CHAR_W, PANEL_WIDTH, line, marker, n, text, truncate};

/// Legend entries: (name, colour, shape, dash, hollow).
pub(super) type LegendEntry = (String, &'static str, Option<usize>, &'static str, bool);

/// Most legend entries drawn beside the plot; more go below it, in columns.
const LEGEND_BESIDE_MAX: usize = 9;
/// Height of one legend row below the plot.
pub(super) const LEGEND_ROW_H: f64 = 15.0;

/// Width the legend needs for `names` (every name in full, up to 40
/// characters), or 0 without entries.
pub(super) fn legend_width(names: &[&str]) -> f64 {
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
pub(super) fn legend_names(p: &LinePanel) -> Vec<&str> {
    let mut names: Vec<&str> = p.series.iter().map(|s| s.name.as_str()).collect();
    if p.has_oversubscribed() {
        names.push("oversubscribed");
    }
    names
}

/// Whether the legend of `names` goes below the plot: too many entries,
/// or names too long to leave the plot its width beside them.
pub(super) fn legend_below(names: &[&str]) -> bool {
    names.len() > LEGEND_BESIDE_MAX || legend_width(names) > 180.0
}

/// Columns and rows of a legend below the plot.
pub(super) fn legend_grid(names: &[&str]) -> (usize, usize) {
    let col_w = legend_width(names).max(1.0);
    let cols = (((PANEL_WIDTH - 70.0) / col_w) as usize).clamp(1, names.len().max(1));
    (cols, names.len().div_ceil(cols))
}

/// Extra panel height a legend below the plot needs (0 if beside).
pub(super) fn legend_below_height(panel: &Panel) -> f64 {
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
pub(super) fn draw_legend(s: &mut String, entries: &[LegendEntry], x: f64, width: f64, a: Area) {
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
pub(super) fn draw_legend_below(
    s: &mut String,
    entries: &[LegendEntry],
    left: f64,
    top: f64,
    names: &[&str],
) {
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
