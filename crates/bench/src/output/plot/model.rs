//! The figure model: a [`Figure`] is a title, a caption and a grid of
//! [`Panel`]s, each lines ([`LinePanel`]: [`Series`] of [`Point`]s) or bars
//! ([`BarPanel`]: [`Bar`]s and reference lines), on linear or log
//! [`Scale`]s. The experiments build these; the other files of `plot` draw
//! them.

use crate::output::data::Row;

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

impl Scale {
    /// Whether `v` can be placed on an axis of this scale: finite, and
    /// positive on a log axis.
    pub fn shows(self, v: f64) -> bool {
        v.is_finite() && (self == Scale::Linear || v > 0.0)
    }
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

    /// Whether the panel has an oversubscribed point that will be drawn.
    pub fn has_oversubscribed(&self) -> bool {
        self.series.iter().any(|s| {
            s.points
                .iter()
                .any(|pt| pt.oversubscribed && self.x_scale.shows(pt.x) && self.y_scale.shows(pt.y))
        })
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

impl Panel {
    /// Whether the panel has an oversubscribed point that will be drawn.
    pub fn has_oversubscribed(&self) -> bool {
        match self {
            Panel::Line(p) => p.has_oversubscribed(),
            Panel::Bar(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
