//! The thread-management strategies by registry name, for the `tm-*`,
//! `presto-create-*` and `peer-threads` experiments, and what those
//! experiments share around the chain kernel
//! ([`null_chain`]): repeated chain
//! points with their spreads ([`chain_point`], [`chain_points`],
//! [`chain_grid`], [`elapsed_row`]), the processor sweep and pinning policy
//! ([`processors`], [`pin`], [`chain_cfg`]), the points judged ([`ends`]), ALL89's speedup rows
//! ([`speedup_rows`]) and a number format for their figures
//! ([`thousands`]).
//!
//! Kernels are generic functions over [`symmetry_threads::Strategy`];
//! [`with_strategy!`](crate::with_strategy) turns a name into a call of the
//! monomorphized kernel, so no virtual call sits inside a timed loop.

use std::time::Duration;

use crate::harness::{Ctx, Data, Sel, Spread, median_of, spread_of};
use crate::kernels::threads::{ChainCfg, ChainOut, null_chain};
use crate::output::data::Row;

/// Registry names of the strategies, in ALL89's order (§III-A..E), from
/// [`symmetry_threads::for_each_strategy!`].
pub const NAMES: &[&str] = {
    macro_rules! names {
        ($($name:literal => $t:ty,)*) => { &[$($name),*] };
    }
    symmetry_threads::for_each_strategy!(names)
};

/// Calls `$kernel::<Strategy>(args...)` for the strategy named `$name`
/// with ready pools `$pool` (and `Tas` locks); evaluates to
/// `Some(result)`, or `None` for an unknown name. `with_strategy!` and
/// `with_strategy_newest!` name the pool. The arms come from
/// [`symmetry_threads::for_each_strategy!`], so a new strategy needs no
/// edit here.
#[macro_export]
macro_rules! with_strategy_pool {
    ($name:expr, $pool:ty, $kernel:ident $args:tt) => {
        symmetry_threads::for_each_strategy!($crate::strategy_arms, $name, $pool, $kernel $args)
    };
}

/// The `match` of [`with_strategy_pool!`](crate::with_strategy_pool), one
/// arm per strategy of [`symmetry_threads::for_each_strategy!`].
#[doc(hidden)]
#[macro_export]
macro_rules! strategy_arms {
    ([$name:expr, $pool:ty, $kernel:ident $args:tt] $($n:literal => $($s:tt)::+,)*) => {
        match $name {
            $($n => Some($kernel::<$($s)::+<symmetry_locks::Tas, $pool>> $args),)*
            _ => None,
        }
    };
}

/// `with_strategy_pool!` with ALL89's FIFO ready pools
/// ([`symmetry_threads::Fifo`], what the papers' experiments measure).
///
/// ```ignore
/// let out = with_strategy!(name, null_chain(procs, total));
/// ```
#[macro_export]
macro_rules! with_strategy {
    ($name:expr, $kernel:ident ( $($arg:expr),* $(,)? )) => {
        $crate::with_strategy_pool!($name, symmetry_threads::Fifo, $kernel($($arg),*))
    };
}

/// `with_strategy_pool!` with the pools the strategies ship with
/// ([`symmetry_threads::NewestFirst`]).
#[macro_export]
macro_rules! with_strategy_newest {
    ($name:expr, $kernel:ident ( $($arg:expr),* $(,)? )) => {
        $crate::with_strategy_pool!($name, symmetry_threads::NewestFirst, $kernel($($arg),*))
    };
}

/// The base of ALL89's speedup: "the fastest alternative on one processor
/// (single lock)".
pub const SPEEDUP_BASE: &str = "single-lock";

/// Runs one point: `repeats` chain runs of strategy `name` (a name of
/// [`NAMES`]); returns the run with the median ns per thread and the
/// spread of ns per thread over all runs.
pub fn chain_point(
    name: &str,
    repeats: usize,
    cfg: &ChainCfg,
) -> Result<(ChainOut, Spread), String> {
    let mut out = chain_points(&[(name, repeats, *cfg)], |_| {})?;
    let (run, spread, _) = out.pop().expect("one point in, one out");
    Ok((run, spread))
}

/// Runs many points, each `(strategy, repeats, cfg)` as [`chain_point`]
/// does, but repeat-major: the first run of every point, then the second
/// of every point, and so on (a point with fewer repeats drops out
/// early). A change of the machine's state during the sweep (this
/// project's virtual machines change how fast a core is for a while)
/// then falls on every series alike and shows in their spreads, instead
/// of shifting one series' whole set of runs against another's; run one
/// point after another, two back-to-back quick runs ordered the strategies
/// at one processor in opposite ways. `tick` is called with each point's
/// index before each of its runs. Returns, in the order given, each
/// point's median run, spread, and ns per thread of every run in round
/// order (so that two points' runs of one round can be paired).
pub fn chain_points(
    points: &[(&str, usize, ChainCfg)],
    mut tick: impl FnMut(usize),
) -> Result<Vec<(ChainOut, Spread, Vec<f64>)>, String> {
    let most = points.iter().map(|p| p.1.max(1)).max().unwrap_or(0);
    let mut runs: Vec<Vec<ChainOut>> = vec![Vec::new(); points.len()];
    for rep in 0..most {
        for (i, (name, repeats, cfg)) in points.iter().enumerate() {
            if rep >= (*repeats).max(1) {
                continue;
            }
            tick(i);
            let out = crate::with_strategy!(*name, null_chain(cfg)).ok_or_else(|| {
                format!("unknown strategy `{name}` (known: {})", NAMES.join(", "))
            })?;
            runs[i].push(out);
        }
    }
    Ok(runs
        .into_iter()
        .map(|r| {
            let ns: Vec<f64> = r.iter().map(ChainOut::ns_per_thread).collect();
            let (run, spread) = median_of(r, ChainOut::ns_per_thread);
            (run, spread, ns)
        })
        .collect())
}

/// One point of [`chain_grid`]: strategy, configuration, median run and
/// spread of ns per thread.
#[derive(Debug)]
pub struct GridPoint {
    /// A name of [`NAMES`].
    pub name: &'static str,
    /// The point's configuration.
    pub cfg: ChainCfg,
    /// The run with the median ns per thread.
    pub out: ChainOut,
    /// The spread of ns per thread over the point's runs.
    pub spread: Spread,
    /// Ns per thread of each run, in round order: the `k`-th runs of two
    /// points of one grid were taken in the same round.
    pub rounds: Vec<f64>,
}

impl GridPoint {
    /// Its `ns_per_thread` row of experiment `id` (without its spread): the
    /// parameters `first` sets, then `total` (threads asked for),
    /// `threads_run`, `completed`, `pinned`, `parks` and `budget_ms`.
    pub fn row(&self, id: &str, ctx: &Ctx, first: impl FnOnce(Row) -> Row) -> Row {
        let p = self.cfg.processors;
        let ns = self.out.ns_per_thread();
        first(Row::new(
            id,
            self.name,
            p as u32,
            ctx.over(p),
            "ns_per_thread",
            ns,
            "ns",
        ))
        .param("total", self.cfg.total)
        .param("threads_run", self.out.threads)
        .param("completed", self.out.completed)
        .param("pinned", self.cfg.pin)
        .param("parks", self.out.report.stats.parks)
        .param("budget_ms", self.cfg.budget.as_millis())
    }
}

/// Every strategy of [`NAMES`] at every processor count of `sweep`,
/// returned strategy-major (the order experiments write their rows in)
/// and measured repeat-major by [`chain_points`]: `repeats(p)` runs of a
/// point at `p` processors, configured by `cfg(p)`; `tick(name, p)` is
/// called before each run.
pub fn chain_grid(
    sweep: &[usize],
    repeats: impl Fn(usize) -> usize,
    cfg: impl Fn(usize) -> ChainCfg,
    mut tick: impl FnMut(&str, usize),
) -> Result<Vec<GridPoint>, String> {
    let points: Vec<(&'static str, usize, ChainCfg)> = NAMES
        .iter()
        .flat_map(|&name| sweep.iter().map(move |&p| (name, p)))
        .map(|(name, p)| (name, repeats(p), cfg(p)))
        .collect();
    let measured = chain_points(&points, |i| tick(points[i].0, points[i].2.processors))?;
    Ok(points
        .iter()
        .zip(measured)
        .map(|(&(name, _, cfg), (out, spread, rounds))| GridPoint {
            name,
            cfg,
            out,
            spread,
            rounds,
        })
        .collect())
}

/// The `elapsed_s` row of a point whose chains completed: `base` (its ns
/// per thread row) with the elapsed time, and the spread scaled to the
/// threads that ran; `None` if the point did not complete.
pub fn elapsed_row(base: &Row, out: &ChainOut, spread: &Spread) -> Option<Row> {
    out.completed.then(|| {
        let threads = out.threads as f64;
        Row {
            metric: "elapsed_s".into(),
            value: out.elapsed.as_secs_f64(),
            unit: "s".into(),
            ..base.clone()
        }
        .with_spread(&spread.map(|ns| ns * threads * 1e-9))
    })
}

/// The processors to sweep: `ctx.sweep()`, with 1 added if missing (the
/// base of the speedup).
pub fn processors(ctx: &Ctx) -> Vec<usize> {
    let mut v = ctx.sweep();
    if !v.contains(&1) {
        v.insert(0, 1);
    }
    v
}

/// P = 1 and P = all `cores` (once, on one core): the points the rules
/// that compare one processor with all judge.
pub fn ends(cores: u32) -> Vec<u32> {
    let mut p = vec![1, cores];
    p.dedup();
    p
}

/// A chain of `total` threads with `work_iters` of work each on `p`
/// processors, pinned as [`pin`] says, stopped after `budget`.
pub fn chain_cfg(ctx: &Ctx, p: usize, total: u64, work_iters: u64, budget: Duration) -> ChainCfg {
    ChainCfg {
        processors: p,
        total,
        work_iters,
        budget,
        pin: pin(ctx, p),
    }
}

/// Whether to pin `p` processors to CPUs: only where each has its own core
/// (pinning several spinning processors to one CPU would measure the
/// pinning).
pub fn pin(ctx: &Ctx, p: usize) -> bool {
    !ctx.over(p)
}

/// ALL89's speedup rows: for every `ns_per_thread` row of experiment `id`
/// (matching `param` if given), `ns_per_thread(single-lock, 1) /
/// ns_per_thread`, with the row's parameters, the base in `base_ns` and the
/// spread of the quotient of the two points' spreads. No base, no rows.
pub fn speedup_rows(rows: &[Row], id: &str, param: Option<(&str, &str)>) -> Vec<Row> {
    let params: Vec<(&str, &str)> = param.into_iter().collect();
    let sel = Sel::metric("ns_per_thread").params(&params);
    let d = Data::new(rows);
    let Some(base) = d.row(sel.series(SPEEDUP_BASE).threads(1)) else {
        return Vec::new();
    };
    let base_spread = spread_of(base);
    d.select(sel)
        .filter(|r| r.experiment == id)
        .map(|r| {
            Row {
                metric: "speedup".into(),
                value: base.value / r.value,
                unit: "x".into(),
                ..r.clone()
            }
            .param("base_ns", format!("{:.1}", base.value))
            .with_spread(&base_spread.ratio(spread_of(r)))
        })
        .collect()
}

/// `n` with thousands separators: `1,000,000`; anything that is not a
/// whole number is returned as is.
pub fn thousands(n: &str) -> String {
    let Ok(v) = n.parse::<u64>() else {
        return n.to_string();
    };
    let digits = v.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Null threads, unpinned, with 20 s to run.
    fn cfg(processors: usize, total: u64) -> ChainCfg {
        ChainCfg {
            processors,
            total,
            work_iters: 0,
            budget: Duration::from_secs(20),
            pin: false,
        }
    }

    #[test]
    fn every_strategy_runs_the_chain() {
        for name in crate::registry::threads::NAMES {
            let cfg = cfg(2, 20_000);
            let out = crate::with_strategy!(*name, null_chain(&cfg)).unwrap();
            assert!(out.completed, "{name}: {out:?}");
            assert_eq!(out.threads, 20_000, "{name}");
            assert!(out.report.nothing_leaked(), "{name}: {:?}", out.report);
        }
    }

    #[test]
    fn chain_point_takes_the_median_and_refuses_unknown_names() {
        let cfg = cfg(1, 2_000);
        let (out, spread) = chain_point("local-readyq", 3, &cfg).unwrap();
        assert_eq!(spread.n, 3);
        assert!(spread.lo <= out.ns_per_thread() && out.ns_per_thread() <= spread.hi);
        assert!(chain_point("no-such-strategy", 1, &cfg).is_err());
    }

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands("1000000"), "1,000,000");
        assert_eq!(thousands("100000"), "100,000");
        assert_eq!(thousands("999"), "999");
        assert_eq!(thousands("?"), "?");
    }

    fn ns_row(series: &str, p: u32, v: f64) -> Row {
        Row::new("x", series, p, false, "ns_per_thread", v, "ns").with_spread(&Spread {
            median: v,
            lo: 0.9 * v,
            hi: 1.1 * v,
            n: 3,
        })
    }

    #[test]
    fn speedup_is_single_lock_on_one_processor_over_each_point() {
        let rows = vec![
            ns_row("single-lock", 1, 100.0),
            ns_row("single-lock", 2, 80.0),
            ns_row("local-readyq", 2, 50.0),
        ];
        let sp = speedup_rows(&rows, "x", None);
        assert_eq!(sp.len(), 3);
        let get = |s: &str, p: u32| sp.iter().find(|r| r.series == s && r.threads == p).unwrap();
        assert_eq!(get("single-lock", 1).value, 1.0);
        assert_eq!(get("single-lock", 2).value, 1.25);
        let lr = get("local-readyq", 2);
        assert_eq!(lr.value, 2.0);
        // The quotient's spread spans both points' spreads.
        let (lo, hi, n) = lr.spread().unwrap();
        assert!((lo - 90.0 / 55.0).abs() < 1e-9 && (hi - 110.0 / 45.0).abs() < 1e-9);
        assert_eq!(n, 3);
        // No base, no speedup; another experiment's rows are left out.
        assert!(speedup_rows(&rows[1..], "x", None).is_empty());
        assert!(speedup_rows(&rows, "y", None).is_empty());
    }

    /// Every registry name dispatches to a kernel; other names do not.
    #[test]
    fn every_name_dispatches() {
        fn name_of<S: symmetry_threads::Strategy>() -> &'static str {
            std::any::type_name::<S>()
        }
        for name in super::NAMES {
            let t = crate::with_strategy!(*name, name_of()).expect("a registry name");
            assert!(t.contains("symmetry_locks::tas::Tas"), "{t}");
        }
        assert_eq!(super::NAMES.len(), 5);
        assert!(crate::with_strategy!("nope", name_of()).is_none());
    }

    #[test]
    #[ignore]
    fn probe_speed() {
        for p in [1, 2] {
            for name in crate::registry::threads::NAMES {
                let cfg = cfg(p, 1_000_000);
                let out = crate::with_strategy!(*name, null_chain(&cfg)).unwrap();
                eprintln!(
                    "{name} p={p}: {:.1} ns/thread, examined/deq {:.2}",
                    out.ns_per_thread(),
                    out.report.stats.queues_examined as f64 / out.report.stats.dequeues as f64
                );
            }
        }
    }
}
