//! The harness's lock name table, expanded from
//! [`symmetry_locks::for_each_lock!`]: every registered lock with its
//! kernels monomorphized. A function pointer from this table is called once
//! per measured point; inside, the lock is a concrete type.

use std::time::Duration;

use indicatif::ProgressBar;
use symmetry_locks::registry::LockKind;
use symmetry_locks::{AtomicInt, AtomicIntDyn};

use crate::harness::run::by_name;
use crate::harness::{Ctx, Spread, median_run};
use crate::kernels::locks::{self as kernels, CounterCfg, CounterOut};
use crate::output::data::Row;

/// One lock and its monomorphized kernels.
#[derive(Clone, Copy)]
pub struct LockEntry {
    /// Registry name.
    pub name: &'static str,
    /// Family.
    pub kind: LockKind,
    /// Whether the lock is FIFO.
    pub fifo: bool,
    /// [`kernels::counter`] for this lock.
    pub counter: fn(&CounterCfg) -> CounterOut,
    /// [`kernels::uncontended`] for this lock.
    pub uncontended: fn(u64) -> f64,
    /// [`kernels::barrier`] for this lock.
    pub barrier: fn(usize, u64, Duration) -> (u64, Duration),
    /// PRESTO AtomicInt with the lock inlined: (threads, target, post, budget).
    pub atomic_int: fn(usize, u64, u64, Duration) -> (u64, Duration),
    /// PRESTO AtomicInt with the lock behind `dyn`.
    pub atomic_int_dyn: fn(usize, u64, u64, Duration) -> (u64, Duration),
}

impl std::fmt::Debug for LockEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockEntry")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn atomic_int<R: lock_api::RawMutex + Send + Sync>(
    threads: usize,
    target: u64,
    post: u64,
    budget: Duration,
) -> (u64, Duration) {
    // At a fixed place in a page of its own (see `kernels::locks::Placed`).
    let n = kernels::Object::new(AtomicInt::<R>::with_lock(R::INIT, 0));
    let n = &**n;
    kernels::increments(threads, target, post, budget, &|| n.fetch_add(1))
}

fn atomic_int_dyn<R>(threads: usize, target: u64, post: u64, budget: Duration) -> (u64, Duration)
where
    R: lock_api::RawMutex + Send + Sync + 'static,
    R::Guard: symmetry_locks::GuardWord,
{
    let n = kernels::Object::new(AtomicIntDyn::new(
        std::hint::black_box(Box::new(R::INIT)),
        0,
    ));
    let n = &**n;
    kernels::increments(threads, target, post, budget, &|| n.fetch_add(1))
}

macro_rules! table {
    ($($name:literal => $ty:ty, kind = $kind:ident, fifo = $fifo:literal;)*) => {
        &[$(LockEntry {
            name: $name,
            kind: LockKind::$kind,
            fifo: $fifo,
            counter: kernels::counter::<$ty>,
            uncontended: kernels::uncontended::<$ty>,
            barrier: kernels::barrier::<$ty>,
            atomic_int: atomic_int::<$ty>,
            atomic_int_dyn: atomic_int_dyn::<$ty>,
        }),*]
    };
}

/// Every registered lock, in registry order.
pub const LOCKS: &[LockEntry] = symmetry_locks::for_each_lock!(table);

/// Looks up a lock by name.
pub fn find(name: &str) -> Option<&'static LockEntry> {
    LOCKS.iter().find(|l| l.name == name)
}

/// Resolves a user's `--locks` list, with a clear error naming the
/// accepted names; `None` gives the classic family (every lock but the
/// preemption-safe ones, which the `pq-*` experiments measure under a
/// scheduler of their own).
pub fn select(names_wanted: Option<&[String]>) -> Result<Vec<&'static LockEntry>, String> {
    match names_wanted {
        None => Ok(LOCKS
            .iter()
            .filter(|l| l.kind != LockKind::PreemptSafe)
            .collect()),
        Some(list) => by_name(LOCKS, |l| l.name, list, "lock", "names"),
    }
}

/// [`select`] of the user's `--locks` list, or of `default` where none
/// was given.
pub fn select_or(
    names_wanted: Option<&[String]>,
    default: &[&str],
) -> Result<Vec<&'static LockEntry>, String> {
    let default: Vec<String> = default.iter().map(|s| s.to_string()).collect();
    select(Some(names_wanted.unwrap_or(&default)))
}

impl LockEntry {
    /// One contended-counter point: the median of [`Ctx::repeats`] runs of
    /// [`kernels::counter`] for this lock, with the spread of `ns_per_op`
    /// over the runs.
    pub fn counter_point(&self, ctx: &Ctx, cfg: CounterCfg) -> (CounterOut, Spread) {
        median_run(
            ctx.repeats(cfg.threads),
            || (self.counter)(&cfg),
            CounterOut::ns_per_op,
        )
    }
}

/// A contended counter of `target` acquisitions by `threads` threads with
/// no work inside the critical section or after it, stopped after
/// `budget`.
pub fn counter_cfg(threads: usize, target: u64, budget: Duration) -> CounterCfg {
    CounterCfg {
        threads,
        target,
        cs_iters: 0,
        post_iters: 0,
        budget,
    }
}

/// A contended-counter point ([`LockEntry::counter_point`]) of every lock
/// of `locks` at every count of `threads` (lock-major), configured by
/// `cfg(threads)`: `(lock, threads, median run, spread)` each, with the
/// bar's message naming the point while it runs.
pub fn counter_sweep(
    ctx: &Ctx,
    bar: &ProgressBar,
    locks: &[&'static LockEntry],
    threads: &[usize],
    cfg: impl Fn(usize) -> CounterCfg,
) -> Vec<(&'static LockEntry, usize, CounterOut, Spread)> {
    let mut points = Vec::new();
    for lock in locks {
        for &t in threads {
            bar.set_message(format!("{} x{t}", lock.name));
            let (out, spread) = lock.counter_point(ctx, cfg(t));
            points.push((*lock, t, out, spread));
            bar.inc(1);
        }
    }
    points
}

/// The `ns_per_acquire` row of a counter point, with its `ops` and
/// `completed` parameters and the spread of its repeats.
pub fn acquire_row(
    id: &str,
    series: &str,
    ctx: &Ctx,
    threads: usize,
    out: &CounterOut,
    spread: &Spread,
) -> Row {
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
    .with_spread(spread)
}
