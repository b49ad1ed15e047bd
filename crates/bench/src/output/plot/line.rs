//! Line panels: series against x with markers, gaps for points a scale
//! cannot show, the cores marker, and the shaded oversubscribed band.

use std::fmt::Write as _;

use super::axis::{draw_y_axis, linear_axis, log_axis};
use super::legend::{
    LEGEND_ROW_H, LegendEntry, draw_legend, draw_legend_below, legend_below, legend_grid,
    legend_names, legend_width,
};
use super::model::{LinePanel, Point, Scale};
use super::svg::{
    Area, PANEL_WIDTH, SHAPES, color, dash, fit, frame, line, marker, n, no_data, panel_title,
    text, y_label,
};

/// Draws a line panel at (`x0`, `y0`), `h` px high.
pub(super) fn render(s: &mut String, p: &LinePanel, x0: f64, y0: f64, h: f64) {
    panel_title(s, &p.title, x0, y0);
    let over = p.has_oversubscribed();
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
    let ok = |pt: &Point| p.x_scale.shows(pt.x) && p.y_scale.shows(pt.y);
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
            .filter(|&x| p.x_scale.shows(x) && x <= first_over && x >= below);
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
        && p.x_scale.shows(*mx)
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
