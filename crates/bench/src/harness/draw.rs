//! The figures most experiments draw: a metric against threads, one series
//! per lock or strategy, with the machine's cores marked.

use crate::output::data::Row;
use crate::output::machine::Machine;
use crate::output::plot::{Bar, BarPanel, Figure, LinePanel, Panel, Point, Scale, Series};

/// A "metric vs threads" panel with one series per series name, taking the
/// rows of `metric` that match `param` if given. The cores line is drawn
/// from `machine.json`'s core count.
pub fn threads_panel(
    rows: &[Row],
    metric: &str,
    param: Option<(&str, &str)>,
    title: &str,
    y_label: &str,
    y_scale: Scale,
    cores: usize,
) -> Panel {
    let points: Vec<(&Row, f64)> = rows
        .iter()
        .filter(|r| r.metric == metric && param.is_none_or(|(k, v)| r.get_param(k) == Some(v)))
        .map(|r| (r, f64::from(r.threads)))
        .collect();
    let marker = (cores as f64, format!("cores = {cores}"));
    line_panel(&points, (title, "threads", y_label), y_scale, Some(marker))
}

/// A line panel of `points` (each a row and its x), one series per series
/// name in the order the names first appear.
fn line_panel(
    points: &[(&Row, f64)],
    (title, x_label, y_label): (&str, &str, &str),
    y_scale: Scale,
    x_marker: Option<(f64, String)>,
) -> Panel {
    let mut names: Vec<&str> = Vec::new();
    for (r, _) in points {
        if !names.contains(&r.series.as_str()) {
            names.push(&r.series);
        }
    }
    let series = names
        .iter()
        .map(|n| Series {
            name: n.to_string(),
            points: points
                .iter()
                .filter(|(r, _)| r.series == *n)
                .map(|(r, x)| Point {
                    x: *x,
                    y: r.value,
                    oversubscribed: r.oversubscribed,
                })
                .collect(),
        })
        .collect();
    Panel::Line(LinePanel {
        title: title.to_string(),
        x_label: x_label.to_string(),
        y_label: y_label.to_string(),
        x_scale: Scale::Linear,
        y_scale,
        series,
        x_marker,
    })
}

/// Panels of one metric against threads each ([`threads_panel`]) over one
/// experiment's rows, with the machine's cores marked.
#[derive(Debug, Clone, Copy)]
pub struct Lines<'a> {
    rows: &'a [Row],
    cores: usize,
    x_label: &'a str,
}

impl<'a> Lines<'a> {
    /// Panels of `rows` on machine `m`, the x axis called "threads".
    pub fn new(rows: &'a [Row], m: &Machine) -> Lines<'a> {
        Lines {
            rows,
            cores: m.cores(),
            x_label: "threads",
        }
    }

    /// With the x axis called `label` (the `tm-*` figures sweep processors
    /// of the runtime, not OS threads).
    pub fn x(self, label: &'a str) -> Lines<'a> {
        Lines {
            x_label: label,
            ..self
        }
    }

    /// The rows of `metric`, titled `title`, on a `y_label` axis of `scale`.
    pub fn of(&self, metric: &str, title: &str, y_label: &str, scale: Scale) -> Panel {
        self.panel(metric, None, title, y_label, scale)
    }

    /// [`Lines::of`] the rows whose parameter `key` is `value`.
    pub fn at(
        &self,
        (key, value): (&str, &str),
        metric: &str,
        title: &str,
        y: &str,
        scale: Scale,
    ) -> Panel {
        self.panel(metric, Some((key, value)), title, y, scale)
    }

    fn panel(
        &self,
        metric: &str,
        param: Option<(&str, &str)>,
        title: &str,
        y: &str,
        scale: Scale,
    ) -> Panel {
        let mut panel = threads_panel(self.rows, metric, param, title, y, scale, self.cores);
        if let Panel::Line(l) = &mut panel {
            l.x_label = self.x_label.to_string();
        }
        panel
    }
}

/// A figure with the machine summary (from `machine.json`) as caption, two
/// panels a row when there is more than one.
pub fn figure(title: &str, machine: &Machine, panels: Vec<Panel>) -> Figure {
    let columns = if panels.len() > 1 { 2 } else { 1 };
    Figure {
        title: title.to_string(),
        caption: machine.summary(),
        panels,
        columns,
    }
}

/// One bar panel per processor count in the rows of `metric` (titled by
/// `title(p)`), a bar per row made by `bar`, on a log scale, with the
/// reference lines `lines(p)`: the shape of the peer comparisons.
pub fn bar_panels(
    rows: &[Row],
    metric: &str,
    y_label: &str,
    title: impl Fn(u32) -> String,
    bar: impl Fn(&Row) -> Bar,
    lines: impl Fn(u32) -> Vec<(String, f64)>,
) -> Vec<Panel> {
    let mut ps: Vec<u32> = rows
        .iter()
        .filter(|r| r.metric == metric)
        .map(|r| r.threads)
        .collect();
    ps.sort_unstable();
    ps.dedup();
    ps.into_iter()
        .map(|p| {
            Panel::Bar(BarPanel {
                title: title(p),
                y_label: y_label.to_string(),
                y_scale: Scale::Log,
                bars: rows
                    .iter()
                    .filter(|r| r.metric == metric && r.threads == p)
                    .map(&bar)
                    .collect(),
                reference_lines: lines(p),
            })
        })
        .collect()
}

/// A "metric vs parameter" panel: one series per series name over the
/// rows of `metric` (and `threads`, if given), x read from parameter
/// column `x_param` (rows without a numeric value are left out).
pub fn param_panel(
    rows: &[Row],
    metric: &str,
    x_param: &str,
    threads: Option<u32>,
    (title, x_label, y_label): (&str, &str, &str),
    y_scale: Scale,
) -> Panel {
    let points: Vec<(&Row, f64)> = rows
        .iter()
        .filter(|r| r.metric == metric && threads.is_none_or(|t| r.threads == t))
        .filter_map(|r| Some((r, r.get_param(x_param)?.parse::<f64>().ok()?)))
        .collect();
    line_panel(&points, (title, x_label, y_label), y_scale, None)
}
