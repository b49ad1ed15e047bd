//! Thread-management kernels on symmetry-threads, shared by the `tm-*`,
//! `presto-create-start-delete` and `peer-threads` experiments, and the
//! helpers those experiments share around them: repeated chain points
//! with their spreads ([`chain_point`], [`chain_points`], [`chain_grid`],
//! [`elapsed_row`]), the processor sweep and pinning
//! policy ([`processors`], [`pin`]), ALL89's speedup rows
//! ([`speedup_rows`]) and two small formatting helpers for their figures
//! ([`thousands`], [`processors_axis`]).
//!
//! [`null_chain`] is ALL89 Table III: P chains run at once; each thread
//! increments its chain's count and, unless the chain has run its share
//! (total / P), creates the next thread, then finishes. Here the
//! per-processor count of the paper travels with the chain (a thread may
//! run on any processor), and the initial threads are created by a first
//! user thread, as the paper's main program does. The timer starts before
//! that first thread is created and stops when the last chain ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use symmetry_threads::{
    Builder, DefaultProcessor, Processor, ShutdownReport, Strategy, spawn_detached_here,
};

use crate::harness::{Ctx, Data, Sel, Spread, median_of};
use crate::kernels::locks::local_work;
use crate::output::data::Row;
use crate::output::plot::Panel;
use crate::registry::threads::NAMES;

/// Parameters of a chain run.
#[derive(Debug, Clone, Copy)]
pub struct ChainCfg {
    /// Processors of the runtime.
    pub processors: usize,
    /// Threads in all (split evenly over `processors` chains).
    pub total: u64,
    /// Mean user work per thread, in `local_work` iterations; each thread
    /// draws uniformly from `0..=2*mean` (ALL89 Fig. 3). 0: null threads.
    pub work_iters: u64,
    /// Wall-clock budget; chains stop early past it.
    pub budget: Duration,
    /// Pin processors to CPUs.
    pub pin: bool,
}

/// What a chain run measured.
#[derive(Debug, Clone, Copy)]
pub struct ChainOut {
    /// Threads that ran.
    pub threads: u64,
    /// From the first create to the end of the last chain.
    pub elapsed: Duration,
    /// Whether every chain ran its share within the budget.
    pub completed: bool,
    /// The runtime's counters and free-list census at shutdown.
    pub report: ShutdownReport,
}

impl ChainOut {
    /// Nanoseconds per thread (create + start + finish, plus work).
    pub fn ns_per_thread(&self) -> f64 {
        self.elapsed.as_nanos() as f64 / self.threads.max(1) as f64
    }
}

struct Ctl {
    t0: Instant,
    stop: AtomicBool,
    chains_left: AtomicUsize,
    ran: AtomicU64,
    end_ns: AtomicU64,
    waiter: std::thread::Thread,
    work_iters: u64,
}

#[derive(Clone, Copy)]
struct CtlPtr(*const Ctl);
// SAFETY: `Ctl` is Sync and outlives every thread that holds the pointer
// (the kernel keeps it alive until all chains end, or leaks it).
unsafe impl Send for CtlPtr {}

impl CtlPtr {
    fn get(&self) -> &Ctl {
        // SAFETY: see the Send impl.
        unsafe { &*self.0 }
    }
}

fn link<S: Strategy, P: Processor>(ctl: CtlPtr, left: u64, ran: u64, mut rng: u64) {
    let c = ctl.get();
    if c.work_iters > 0 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let iters = ((u128::from(rng) * u128::from(2 * c.work_iters + 1)) >> 64) as u64;
        std::hint::black_box(local_work(iters));
    }
    // Relaxed: the stop flag is a hint; late links are simply counted.
    if left > 1 && !c.stop.load(Ordering::Relaxed) {
        let spawned =
            spawn_detached_here::<S, P, _>(move || link::<S, P>(ctl, left - 1, ran + 1, rng));
        if spawned.is_ok() {
            return;
        }
    }
    // Chain end.
    c.ran.fetch_add(ran, Ordering::Relaxed);
    let now = c.t0.elapsed().as_nanos() as u64;
    c.end_ns.fetch_max(now, Ordering::Relaxed);
    // AcqRel: the last chain's decrement publishes every chain's counts to
    // the waiter's Acquire load.
    if c.chains_left.fetch_sub(1, Ordering::AcqRel) == 1 {
        c.waiter.unpark();
    }
}

/// ALL89 Table III on strategy `S` with the default processor.
pub fn null_chain<S: Strategy>(cfg: &ChainCfg) -> ChainOut {
    null_chain_with::<S, DefaultProcessor>(cfg)
}

/// ALL89 Table III on strategy `S` and processor `P`.
pub fn null_chain_with<S: Strategy, P: Processor>(cfg: &ChainCfg) -> ChainOut {
    let p = cfg.processors.max(1);
    let mut rt = Builder::<S, P>::default()
        .processors(p)
        .pin(cfg.pin)
        .warm(4 * p, 2 * p)
        .build()
        .expect("runtime");
    let per = (cfg.total / p as u64).max(1);
    let ctl = Arc::new(Ctl {
        t0: Instant::now(),
        stop: AtomicBool::new(false),
        chains_left: AtomicUsize::new(p),
        ran: AtomicU64::new(0),
        end_ns: AtomicU64::new(0),
        waiter: std::thread::current(),
        work_iters: cfg.work_iters,
    });
    let ptr = CtlPtr(Arc::as_ptr(&ctl));
    // The clock starts at `ctl.t0`, just before the first create.
    let t0 = ctl.t0;
    rt.handle().spawn_detached(move || {
        for i in 1..p {
            let seed = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(i as u64 + 1) | 1;
            let _ = spawn_detached_here::<S, P, _>(move || link::<S, P>(ptr, per, 1, seed));
        }
        link::<S, P>(ptr, per, 1, 0x2545_F491_4F6C_DD1D);
    });
    let deadline = t0 + cfg.budget;
    // Acquire: pairs with the last chain's AcqRel decrement.
    while ctl.chains_left.load(Ordering::Acquire) != 0 {
        let now = Instant::now();
        if now >= deadline {
            ctl.stop.store(true, Ordering::Relaxed);
            if now >= deadline + Duration::from_secs(2) {
                break;
            }
            std::thread::park_timeout(Duration::from_millis(5));
        } else {
            std::thread::park_timeout(deadline - now);
        }
    }
    let finished = ctl.chains_left.load(Ordering::Acquire) == 0;
    let ran = ctl.ran.load(Ordering::Relaxed);
    let end = Duration::from_nanos(ctl.end_ns.load(Ordering::Relaxed));
    let elapsed = end;
    let report = rt.shutdown();
    if !finished {
        // Some chain never ended (it cannot have, after shutdown, unless
        // abandoned): keep `Ctl` alive forever rather than risk a dangling
        // pointer in a leaked closure.
        std::mem::forget(Arc::clone(&ctl));
    }
    ChainOut {
        threads: ran,
        elapsed,
        completed: finished && ran >= per * p as u64 && !ctl.stop.load(Ordering::Relaxed),
        report,
    }
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

/// Whether to pin `p` processors to CPUs: only where each has its own core
/// (pinning several spinning processors to one CPU would measure the
/// pinning).
pub fn pin(ctx: &Ctx, p: usize) -> bool {
    !ctx.over(p)
}

/// The spread a row recorded with [`Row::with_spread`], or none (a single
/// measurement of its value).
fn spread_of(r: &Row) -> Spread {
    match r.spread() {
        Some((lo, hi, n)) => Spread {
            median: r.value,
            lo,
            hi,
            n,
        },
        None => Spread::single(r.value),
    }
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

/// `panel` with its x axis called "processors" (the `tm-*` figures sweep
/// processors of the runtime, not OS threads).
pub fn processors_axis(mut panel: Panel) -> Panel {
    if let Panel::Line(l) = &mut panel {
        l.x_label = "processors".into();
    }
    panel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_runs_the_chain() {
        for name in crate::registry::threads::NAMES {
            let cfg = ChainCfg {
                processors: 2,
                total: 20_000,
                work_iters: 0,
                budget: Duration::from_secs(20),
                pin: false,
            };
            let out = crate::with_strategy!(*name, null_chain(&cfg)).unwrap();
            assert!(out.completed, "{name}: {out:?}");
            assert_eq!(out.threads, 20_000, "{name}");
            assert!(out.report.nothing_leaked(), "{name}: {:?}", out.report);
        }
    }

    #[test]
    fn chain_point_takes_the_median_and_refuses_unknown_names() {
        let cfg = ChainCfg {
            processors: 1,
            total: 2_000,
            work_iters: 0,
            budget: Duration::from_secs(20),
            pin: false,
        };
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
}

#[cfg(test)]
mod probe {
    use super::*;
    #[test]
    #[ignore]
    fn probe_speed() {
        for p in [1, 2] {
            for name in crate::registry::threads::NAMES {
                let cfg = ChainCfg {
                    processors: p,
                    total: 1_000_000,
                    work_iters: 0,
                    budget: Duration::from_secs(20),
                    pin: false,
                };
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
