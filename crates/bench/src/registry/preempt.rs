//! The name tables of the `pq-*` experiments: SMARTQ's eight locks plus
//! `mcs-tp` and `parking_lot` over the emulated multiprogramming
//! scheduler ([`EMULATED`], from
//! [`symmetry_locks::for_each_preempt_lock!`]), and the locks that meet
//! the kernel's own scheduler on oversubscribed OS threads ([`STOCK`]);
//! and what their sweeps share: a level's spelling ([`mpl`]), a point's
//! row ([`emulated_row`]), seeded runs and their medians, each paired by
//! round with a reference lock's ([`medians_vs`]).

use std::time::Duration;

use lock_api::RawMutex;
use symmetry_locks::sched::Stock;
use symmetry_locks::sched::emulated::{self, Emulated};
use symmetry_locks::sched::rseq::RseqSlice;
use symmetry_locks::spin_then_block::policy::FixedSpinC;
use symmetry_locks::spin_then_block::{Futex, SpinThenBlock};
use symmetry_locks::{Mcs, McsNp, McsTp, ParkingLot, Pthread, SmartQ, StdMutex, Tas, TasNp};

use crate::harness::run::by_name;
use crate::harness::{Ctx, Spread, median_of};
use crate::kernels::preempt::{self as kernel, LoopCfg, LoopOut};
use crate::output::data::Row;

/// A lock of the emulated-scheduler experiments.
#[derive(Clone, Copy)]
pub struct EmulatedLock {
    /// Series name (SMARTQ's lock, by registry name).
    pub name: &'static str,
    /// The synthetic loop on the emulated scheduler.
    pub synthetic: fn(&LoopCfg, &emulated::Config) -> Result<LoopOut, String>,
    /// Cholesky (SMARTQ §4.4) on the emulated scheduler, with an
    /// optional time limit.
    pub cholesky: fn(&emulated::Config, Option<Duration>) -> Result<kernel::AppOut, String>,
    /// Quicksort (SMARTQ §4.4) on the emulated scheduler, with an
    /// optional time limit.
    pub quicksort: fn(&emulated::Config, Option<Duration>) -> Result<kernel::AppOut, String>,
}

impl std::fmt::Debug for EmulatedLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

macro_rules! emulated_table {
    ($($name:literal => $ty:ty;)*) => {
        &[$(EmulatedLock {
            name: $name,
            synthetic: kernel::emulated::<$ty>,
            cholesky: kernel::cholesky::<$ty>,
            quicksort: kernel::quicksort::<$ty>,
        }),*]
    };
}

/// SMARTQ's locks, `mcs-tp` and `parking_lot` over [`Emulated`].
pub const EMULATED: &[EmulatedLock] =
    symmetry_locks::for_each_preempt_lock!(emulated_table, Emulated);

/// A lock of `pq-oversubscribed`.
#[derive(Clone, Copy)]
pub struct StockLock {
    /// Series name.
    pub name: &'static str,
    /// The synthetic loop on plain OS threads.
    pub synthetic: fn(&LoopCfg) -> LoopOut,
    /// Whether the lock needs the rseq time-slice extension to be more
    /// than its base lock (left out where the kernel lacks it).
    pub needs_rseq: bool,
}

/// `L` on plain OS threads, named `name`.
const fn stock<L: RawMutex + Sync>(name: &'static str, needs_rseq: bool) -> StockLock {
    StockLock {
        name,
        synthetic: kernel::on_os_threads::<L>,
        needs_rseq,
    }
}

impl std::fmt::Debug for StockLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// The locks that meet the kernel's scheduler on oversubscribed threads:
/// `tas` and `mcs` (SMARTQ's extremes), `mcs-tp` (time publishing, no
/// kernel help), KLMO91's spin-then-block with `fixed-spin(C)`, the
/// modern peers, and `smart-q`/`tas-np` over the rseq time-slice extension
/// where the kernel has it.
pub const STOCK: &[StockLock] = &[
    stock::<Tas>("tas", false),
    stock::<Mcs>("mcs", false),
    stock::<McsTp>("mcs-tp", false),
    stock::<SmartQ<Stock>>("smart-q", false),
    stock::<SpinThenBlock<FixedSpinC, Futex>>("spin-then-block", false),
    stock::<StdMutex>("std", false),
    stock::<ParkingLot>("parking_lot", false),
    stock::<Pthread>("pthread", false),
    stock::<TasNp<RseqSlice>>("tas-np-rseq", true),
    stock::<McsNp<RseqSlice>>("mcs-np-rseq", true),
];

/// Experiment `id`'s row of each lock at each count, `point(lock, n)`,
/// lock by lock, under a progress bar that names a point `{lock}{sep}{n}`.
pub fn lock_sweep<L: Copy + std::fmt::Debug>(
    ctx: &Ctx,
    id: &str,
    (locks, counts): (&[L], &[usize]),
    sep: &str,
    mut point: impl FnMut(L, usize) -> Result<Row, String>,
) -> Result<Vec<Row>, String> {
    let bar = ctx.bar(id, locks.len() * counts.len());
    let mut rows = Vec::new();
    for &lock in locks {
        for &n in counts {
            bar.set_message(format!("{lock:?}{sep}{n}"));
            rows.push(point(lock, n)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// The `mpl` column's spelling of a multiprogramming level.
pub fn mpl(level: f64) -> String {
    format!("{level:.2}")
}

/// A row of experiment `id` for `lock` on `p` processors of the emulated
/// scheduler at multiprogramming `level`, the synthetic loop's
/// non-critical section `ncs` ns: `metric`'s `value` in `unit`, with the
/// level, its workers, both sections and the quantum as parameters.
pub fn emulated_row(
    id: &str,
    lock: &str,
    (p, level, ncs): (usize, f64, f64),
    (metric, value, unit): (&str, f64, &str),
) -> Row {
    Row::new(id, lock, p as u32, false, metric, value, unit)
        .param("mpl", mpl(level))
        .param("workers", kernel::emu_config(p, level, 0).workers())
        .param("cs_ns", kernel::PAPER_CS_NS)
        .param("ncs_ns", ncs.round())
        .param("quantum_ms", kernel::QUANTUM.as_millis())
}

/// Each lock's median run by `key`, with the spread of its runs and, for
/// every lock but `reference`, the quotients of its runs over
/// `reference`'s of the same rounds ([`Spread::paired_ratio`]): `runs[l]`
/// holds lock `l`'s runs, one per round.
pub fn medians_vs<T>(
    runs: Vec<Vec<T>>,
    key: impl Fn(&T) -> f64,
    reference: Option<usize>,
) -> Vec<(T, Spread, Option<Spread>)> {
    let keys: Vec<Vec<f64>> = runs.iter().map(|r| r.iter().map(&key).collect()).collect();
    runs.into_iter()
        .enumerate()
        .map(|(l, r)| {
            let vs = reference
                .filter(|&t| t != l)
                .and_then(|t| Spread::paired_ratio(&keys[l], &keys[t]));
            let (median, spread) = median_of(r, &key);
            (median, spread, vs)
        })
        .collect()
}

/// `repeats` runs of `f`, seeded 1, 2, ... (at least one).
pub fn seeded_runs(
    repeats: usize,
    f: impl FnMut(u64) -> Result<LoopOut, String>,
) -> Result<Vec<LoopOut>, String> {
    (1..=repeats.max(1) as u64).map(f).collect()
}

/// [`seeded_runs`]' median run by `us_per_iteration`, with the spread of
/// that metric.
pub fn median_point(
    repeats: usize,
    f: impl FnMut(u64) -> Result<LoopOut, String>,
) -> Result<(LoopOut, Spread), String> {
    let runs = seeded_runs(repeats, f)?;
    Ok(median_of(runs, LoopOut::us_per_iteration))
}

/// Looks an emulated-family lock up by name, or says which names exist.
pub fn select_emulated(wanted: Option<&[String]>) -> Result<Vec<&'static EmulatedLock>, String> {
    match wanted {
        None => Ok(EMULATED.iter().collect()),
        Some(list) => by_name(EMULATED, |l| l.name, list, "lock", "names"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_are_paired_with_the_reference_by_round() {
        // Lock 0 is the reference; lock 1 runs twice as long in every
        // round, though the rounds drift by 10x.
        let runs = vec![vec![1.0, 10.0, 100.0], vec![2.0, 20.0, 200.0]];
        let m = medians_vs(runs, |x| *x, Some(0));
        assert_eq!((m[0].0, m[1].0), (10.0, 20.0));
        assert!(m[0].2.is_none());
        let vs = m[1].2.expect("lock 1 is paired with the reference");
        assert_eq!((vs.median, vs.lo, vs.hi), (2.0, 2.0, 2.0));
        assert!(medians_vs(vec![vec![1.0]], |x| *x, None)[0].2.is_none());
        assert_eq!(mpl(2.0), "2.00");
    }
}
