//! A model's rows beside the measured ones, told apart by their `kind`
//! parameter: `measured`, `model` (predicted where the machine can also
//! measure: within its cores) or `projected` (beyond them). The look-ups
//! pair each measured point with the model's, read a model's curve, and
//! [`kinds_panel`] draws each kind of each series as its own line.

use super::rows::{Data, Sel};
use super::rule::Estimate;
use crate::output::data::Row;
use crate::output::plot::{LinePanel, Panel, Point, Series};

/// The parameter that says what a row is.
pub const KIND: &str = "kind";

/// A prediction's kind at `p` processors: `model` within the `cores`,
/// `projected` beyond them.
pub fn kind_of(p: u32, cores: u32) -> &'static str {
    if p <= cores { "model" } else { "projected" }
}

/// Whether `r` is a prediction (`model` or `projected`).
fn predicted(r: &Row) -> bool {
    matches!(r.get_param(KIND), Some("model" | "projected"))
}

/// `(p, model, measured)` of `metric` for `series` at every P measured
/// (ascending) that the model predicts too: the first prediction's value
/// and the first measured row as an estimate ([`Data::estimate`]).
pub fn pairs(d: &Data<'_>, metric: &str, series: &str) -> Vec<(u32, f64, Estimate)> {
    let measured = [(KIND, "measured")];
    let sel = Sel::metric(metric).series(series).params(&measured);
    d.threads(sel)
        .into_iter()
        .filter_map(|(p, _)| {
            let model = d
                .select(Sel::metric(metric).series(series).threads(p))
                .find(|r| predicted(r))?;
            Some((p, model.value, d.estimate(sel.threads(p))?))
        })
        .collect()
}

/// The predictions of `metric` for `series` as `(x, value)`, x the
/// numeric parameter `key` (or the processors if `None`), sorted by x.
pub fn curve(d: &Data<'_>, metric: &str, series: &str, key: Option<&str>) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = d
        .select(Sel::metric(metric).series(series))
        .filter(|r| predicted(r))
        .filter_map(|r| {
            let x = match key {
                Some(k) => r.get_param(k)?.parse().ok()?,
                None => f64::from(r.threads),
            };
            Some((x, r.value))
        })
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// A row's x: its processors.
pub fn threads_x(r: &Row) -> Option<f64> {
    Some(f64::from(r.threads))
}

/// A row's x: its numeric parameter `key` times `factor`.
pub fn param_x(key: &'static str, factor: f64) -> impl Fn(&Row) -> Option<f64> {
    move |r: &Row| Some(r.get_param(key)?.parse::<f64>().ok()? * factor)
}

/// A line panel of `metric` laid out as `look`: for each of `names`, one
/// line per kind of `kinds` that has points (named `"name (kind)"`), x
/// from `x`, sorted by x.
pub fn kinds_panel(
    rows: &[Row],
    metric: &str,
    names: &[&str],
    kinds: &[&str],
    x: &dyn Fn(&Row) -> Option<f64>,
    look: LinePanel,
) -> Panel {
    let mut series = Vec::new();
    for n in names {
        for k in kinds {
            let mut points: Vec<Point> = rows
                .iter()
                .filter(|r| r.metric == metric && r.series == *n && r.get_param(KIND) == Some(k))
                .filter_map(|r| Some(Point::new(x(r)?, r.value, false)))
                .collect();
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            if !points.is_empty() {
                series.push(Series {
                    name: format!("{n} ({k})"),
                    points,
                });
            }
        }
    }
    Panel::Line(LinePanel { series, ..look })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kind: &str, p: u32, v: f64) -> Row {
        Row::new("x", "s", p, false, "m", v, "ns").param(KIND, kind)
    }

    #[test]
    fn measured_points_pair_with_the_first_prediction() {
        let rows = vec![
            row("measured", 2, 110.0),
            row("model", 2, 100.0),
            row("model", 1, 50.0),
            row("measured", 1, 55.0),
            row("projected", 4, 200.0),
            row("measured", 8, 1.0),
        ];
        let d = Data::new(&rows);
        let p = pairs(&d, "m", "s");
        let got: Vec<(u32, f64, f64)> = p.iter().map(|(t, m, e)| (*t, *m, e.value)).collect();
        assert_eq!(got, vec![(1, 50.0, 55.0), (2, 100.0, 110.0)]);
        assert_eq!(
            curve(&d, "m", "s", None),
            vec![(1.0, 50.0), (2.0, 100.0), (4.0, 200.0)]
        );
        assert_eq!((kind_of(2, 2), kind_of(4, 2)), ("model", "projected"));
        let Panel::Line(l) = kinds_panel(
            &rows,
            "m",
            &["s"],
            &["measured", "projected"],
            &threads_x,
            LinePanel::new("t", "x", "y"),
        ) else {
            panic!("a line panel");
        };
        let names: Vec<&str> = l.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["s (measured)", "s (projected)"]);
        assert_eq!(l.series[0].points.len(), 3);
    }
}
