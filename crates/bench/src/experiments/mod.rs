//! The experiment catalogue (SPEC §3): each experiment runs, writes tidy
//! rows, draws its figure from rows and judges the paper's claim from rows,
//! so the report can be rebuilt from the CSV files alone.

use std::path::PathBuf;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::data::Row;
use crate::kernels::{CounterCfg, CounterOut};
use crate::locks_table::LockEntry;
use crate::machine::Machine;
use crate::plot::{Figure, LinePanel, Panel, Point, Scale, Series};
use crate::report::Section;

pub mod am_apps;
pub mod am_bulk;
pub mod am_logp;
pub mod am_stress;
pub mod calibrate;
pub mod cs_analytic;
pub mod cs_calibrate;
pub mod cs_elapsed;
pub mod peer_locks;
pub mod peer_messages;
pub mod peer_threads;
pub mod presto_atomic_int;
pub mod presto_create_delete;
pub mod presto_create_start_delete;
pub mod presto_spinlock;
pub mod spin_barrier;
pub mod spin_counter;
pub mod spin_cs_size;
pub mod tm_latency_vs_runnable;
pub mod tm_null_threads;
pub mod tm_queue_search;
pub mod tm_user_work;

/// What an experiment is run with.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// `--quick`: shorter budgets, fewer points; same code paths.
    pub quick: bool,
    /// `--threads`, if given.
    pub threads: Option<Vec<usize>>,
    /// `--locks`, if given (validated names).
    pub locks: Option<Vec<String>>,
    /// Logical CPUs available.
    pub cores: usize,
    /// Show progress bars.
    pub progress: bool,
    /// The output directory (`--out`), for experiments whose results
    /// include files besides the CSV (e.g. `cs-analytic`'s recorded lock
    /// profiles); `None`: such files are not written.
    pub out: Option<PathBuf>,
}

impl Ctx {
    /// Thread counts to sweep: `--threads`, else 1..=2*cores plus 4*cores
    /// (the 4x oversubscription point).
    pub fn sweep(&self) -> Vec<usize> {
        if let Some(t) = &self.threads {
            return t.clone();
        }
        let mut v: Vec<usize> = (1..=2 * self.cores).collect();
        v.push(4 * self.cores);
        v.dedup();
        v
    }

    /// Repeats per point: the median of 5 single-thread runs (cheap, and
    /// the base of every ratio), of 3 where every thread has a core, and one
    /// run for oversubscribed points (dominated by the scheduler, and the
    /// most expensive to run).
    pub fn repeats(&self, threads: usize) -> usize {
        match threads {
            1 => 5,
            t if self.over(t) => 1,
            _ => 3,
        }
    }

    /// Whether `threads` exceeds the cores.
    pub fn over(&self, threads: usize) -> bool {
        threads > self.cores
    }

    /// Per-point time budget: `quick` or `full`.
    pub fn budget(&self, quick_ms: u64, full_ms: u64) -> Duration {
        Duration::from_millis(if self.quick { quick_ms } else { full_ms })
    }

    /// A progress bar over `len` points, hidden unless enabled and on a TTY.
    pub fn bar(&self, id: &str, len: usize) -> ProgressBar {
        let bar = if self.progress {
            ProgressBar::new(len as u64)
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(
            ProgressStyle::with_template("{prefix:>24} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix(id.to_string());
        bar
    }
}

/// One entry of the catalogue.
#[derive(Clone, Copy)]
pub struct Experiment {
    /// Stable id (CLI, file names).
    pub id: &'static str,
    /// One-line title.
    pub title: &'static str,
    /// Paper and figure/table reproduced.
    pub source: &'static str,
    /// Whether `--locks` narrows it.
    pub uses_locks: bool,
    /// Runs the experiment.
    pub run: fn(&Ctx) -> Result<Vec<Row>, String>,
    /// Draws its figure from rows.
    pub figure: fn(&[Row], &Machine) -> Figure,
    /// States claim, measurement and verdict from rows.
    pub assess: fn(&[Row], &Machine) -> Section,
}

impl std::fmt::Debug for Experiment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Experiment")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// The catalogue, in report order.
pub const ALL: &[Experiment] = &[
    calibrate::EXPERIMENT,
    tm_null_threads::EXPERIMENT,
    tm_user_work::EXPERIMENT,
    tm_latency_vs_runnable::EXPERIMENT,
    tm_queue_search::EXPERIMENT,
    spin_counter::EXPERIMENT,
    spin_cs_size::EXPERIMENT,
    spin_barrier::EXPERIMENT,
    presto_spinlock::EXPERIMENT,
    presto_atomic_int::EXPERIMENT,
    presto_create_delete::EXPERIMENT,
    presto_create_start_delete::EXPERIMENT,
    cs_calibrate::EXPERIMENT,
    cs_analytic::EXPERIMENT,
    cs_elapsed::EXPERIMENT,
    am_apps::EXPERIMENT,
    am_bulk::EXPERIMENT,
    am_logp::EXPERIMENT,
    am_stress::EXPERIMENT,
    peer_locks::EXPERIMENT,
    peer_threads::EXPERIMENT,
    peer_messages::EXPERIMENT,
];

/// Looks an experiment up by id.
pub fn find(id: &str) -> Option<&'static Experiment> {
    ALL.iter().find(|e| e.id == id)
}

/// Ids of the SPEC §3 catalogue that belong to later issues and are not
/// implemented yet (named in the report so the gap is visible).
pub const PENDING: &[&str] = &[
    "model-mva",
    "pq-multiprogramming",
    "pq-processors",
    "pq-breakdown",
    "pq-apps",
];

/// One contended-counter point for `lock`: the median of
/// [`Ctx::repeats`] runs of [`crate::kernels::counter`].
pub fn counter_point(ctx: &Ctx, lock: &LockEntry, cfg: CounterCfg) -> CounterOut {
    crate::kernels::median_run(
        ctx.repeats(cfg.threads),
        || (lock.counter)(&cfg),
        CounterOut::ns_per_op,
    )
}

/// The `ns_per_acquire` row of a counter point, with its `ops` and
/// `completed` parameters.
pub fn acquire_row(id: &str, series: &str, ctx: &Ctx, threads: usize, out: &CounterOut) -> Row {
    Row::new(
        id,
        series,
        threads as u32,
        ctx.over(threads),
        "ns_per_acquire",
        out.ns_per_op(),
        "ns",
    )
    .param("ops", out.ops)
    .param("completed", out.completed)
}

// ---------------------------------------------------------------------------
// Helpers shared by the experiments: looking values up in rows and drawing
// the usual "metric vs threads, one series per lock" panel.

/// The value of `metric` for `series` at `threads` (first match), filtered
/// by an optional parameter `(key, value)`.
pub fn value(
    rows: &[Row],
    series: &str,
    threads: u32,
    metric: &str,
    param: Option<(&str, &str)>,
) -> Option<f64> {
    rows.iter()
        .find(|r| {
            r.series == series
                && r.threads == threads
                && r.metric == metric
                && param.is_none_or(|(k, v)| r.get_param(k) == Some(v))
        })
        .map(|r| r.value)
}

/// Distinct series names in first-seen order.
pub fn series_names(rows: &[Row], metric: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows.iter().filter(|r| r.metric == metric) {
        if !out.contains(&r.series) {
            out.push(r.series.clone());
        }
    }
    out
}

/// A "metric vs threads" panel with one series per `series` name, taking
/// rows that match `param` if given.
pub fn threads_panel(
    rows: &[Row],
    metric: &str,
    param: Option<(&str, &str)>,
    title: &str,
    y_label: &str,
    y_scale: Scale,
    cores: usize,
) -> Panel {
    let selected: Vec<&Row> = rows
        .iter()
        .filter(|r| r.metric == metric && param.is_none_or(|(k, v)| r.get_param(k) == Some(v)))
        .collect();
    let mut names: Vec<&str> = Vec::new();
    for r in &selected {
        if !names.contains(&r.series.as_str()) {
            names.push(&r.series);
        }
    }
    let series = names
        .iter()
        .map(|n| Series {
            name: n.to_string(),
            points: selected
                .iter()
                .filter(|r| r.series == *n)
                .map(|r| Point {
                    x: f64::from(r.threads),
                    y: r.value,
                    oversubscribed: r.oversubscribed,
                })
                .collect(),
        })
        .collect();
    Panel::Line(LinePanel {
        title: title.to_string(),
        x_label: "threads".to_string(),
        y_label: y_label.to_string(),
        x_scale: Scale::Linear,
        y_scale,
        series,
        x_marker: Some((cores as f64, format!("cores = {cores}"))),
    })
}

/// A figure with the machine summary as caption.
pub fn figure(title: &str, machine: &Machine, panels: Vec<Panel>) -> Figure {
    let columns = if panels.len() > 1 { 2 } else { 1 };
    Figure {
        title: title.to_string(),
        caption: machine.summary(),
        panels,
        columns,
    }
}

/// Formats a ratio like `1.23x`.
pub fn ratio(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}x")
    } else {
        "n/a".to_string()
    }
}

/// Formats nanoseconds compactly.
pub fn ns(x: f64) -> String {
    if !x.is_finite() {
        "n/a".to_string()
    } else if x >= 1e6 {
        format!("{:.2} ms", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.2} us", x / 1e3)
    } else {
        format!("{x:.1} ns")
    }
}
