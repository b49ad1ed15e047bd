//! SVG charts for the experiments' figures, written for them.
//!
//! A [`Figure`] is a title, a caption (typically the machine summary) and a
//! grid of panels, each about 520x360 px: [`LinePanel`]s (series of points,
//! e.g. time vs threads per lock) and [`BarPanel`]s (one bar per label,
//! coloured by group, with optional labelled reference lines).
//! [`write_svg`] turns it into a self-contained SVG document; the output is
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
//!
//! This file lays a figure out; `model` holds the figure model, `svg` the
//! drawing primitives, `axis` the scales and ticks, `legend` the legends,
//! and `line` and `bar` draw the two kinds of panel.
//!
//! # Why not plotters
//!
//! Tried (issue 39): the same `Figure`s of `spin-counter` (16 series, log
//! y, oversubscribed points), `peer-locks` (bar and line panels, a
//! reference line, long labels) and `tm-null-threads` (two line panels)
//! drawn with plotters 0.3.7 (`default-features = false`, `svg_backend`
//! and `line_series`; 370 lines of glue), side by side with these:
//!
//! - Readability: plotters' legend is a box inside the plot, over the data
//!   (in spin-counter, over the climb from 2 to 3 threads); moved beside
//!   the plot by pixel offsets, its symbols overlap the names, and it has
//!   no legend in columns below the plot. Text turns only by multiples of
//!   90°, so long bar labels overlap when flat and are cut off when
//!   upright, where these are at 45°. It has 4 ready marker shapes (these
//!   figures use 6), and without a font crate it shrinks text by 1.24 and
//!   measures it by byte count, so its layout cannot keep labels apart.
//! - Size: SVGs 2.6-3.5 times larger (spin-counter 20,335 -> 64,721
//!   bytes, peer-locks 32,166 -> 113,334, tm-null-threads 20,932 ->
//!   55,227): each dash of a dashed line is its own `<polyline>`, and
//!   `REPORT.html` inlines every figure.
//! - Build: plotters, plotters-backend, plotters-svg and num-traits add
//!   5 s of CPU to a clean release build (14 s wall on the 2-core
//!   machine, shared).
//!
//! Reaching this readability would take our own legend and label layout
//! on top of plotters, so it would replace only the axes and the drawing
//! primitives (about 500 of these lines).

mod axis;
mod bar;
mod legend;
mod line;
mod model;
mod svg;

use std::fmt::Write as _;
use std::path::Path;

use legend::legend_below_height;
pub use model::{Bar, BarPanel, Figure, LinePanel, Panel, Point, Scale, Series, series_from_rows};
pub use svg::escape_xml;
use svg::{CHAR_W, PANEL_HEIGHT, PANEL_WIDTH, fit, n, text, wrap};

/// The sentence the caption gains when a figure shows oversubscribed points.
const OVERSUBSCRIBED_NOTE: &str =
    "Hollow markers and shaded band: oversubscribed (more threads than cores).";

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
fn render_svg(fig: &Figure) -> String {
    let columns = fig.columns.clamp(1, fig.panels.len().max(1));
    let rows = fig.panels.len().div_ceil(columns);
    let width = columns as f64 * PANEL_WIDTH;

    let mut caption_lines: Vec<String> = Vec::new();
    let max_chars = ((width - 24.0) / (11.0 * CHAR_W)).max(20.0) as usize;
    for line in fig.caption.lines() {
        caption_lines.extend(wrap(line, max_chars));
    }
    if fig.panels.iter().any(Panel::has_oversubscribed) {
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
            Panel::Line(p) => line::render(&mut s, p, x0, y0, panel_h),
            Panel::Bar(p) => bar::render(&mut s, p, x0, y0, panel_h),
        }
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::svg::{SHAPES, color, dash};
    use super::*;

    impl Series {
        /// An empty series.
        fn new(name: impl Into<String>) -> Series {
            Series {
                name: name.into(),
                points: Vec::new(),
            }
        }

        /// Builder: appends a point.
        fn point(mut self, x: f64, y: f64, oversubscribed: bool) -> Series {
            self.points.push(Point::new(x, y, oversubscribed));
            self
        }
    }

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
