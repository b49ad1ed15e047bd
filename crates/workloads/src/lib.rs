//! # symmetry-workloads
//!
//! The papers' applications, written against the symmetry crates so that
//! the same program runs with any lock and on OS threads or user threads.
//!
//! | workload | source | what it stresses |
//! |---|---|---|
//! | [`regsim`] | KLMO91 §3 "Regsim" | per-object locks, threads = processors, phases until outputs settle, load rebalancing |
//! | [`hanoi`] | KLMO91 §3 "Hanoi" | 5 pegs, many threads, frequent synchronization, bursty activity |
//! | [`cholesky`] | SMARTQ §4.4 "Cholesky" (dense blocked substitute for SPLASH's sparse one) | one lock, the only synchronization: task queue and dependency counters |
//! | [`quicksort`] | SMARTQ §4.4 "Quicksort" | one lock, the only synchronization: shared stack of ranges, finalized count |
//!
//! A workload is generic over its lock ([`WorkloadLock`]: any
//! `lock_api::RawMutex` that can be built with a name, so the profiler
//! and `opt-known` see the workload's lock names) and over where its
//! threads run ([`Exec`]: [`OsThreads`] or [`UserThreads`]).

pub mod am_apps;
pub mod cholesky;
pub mod exec;
pub mod hanoi;
pub mod quicksort;
pub mod regsim;

pub use exec::{Exec, ExecBarrier, OsThreads, UserThreads};

use symmetry_locks::spin_then_block::{Blocker, SpinPolicy, SpinThenBlock};

/// A lock a workload can use: a `lock_api::RawMutex` built with a name
/// (locks that have no names ignore it).
pub trait WorkloadLock: lock_api::RawMutex + Send + Sync + 'static {
    /// A free lock called `name` (the key of its profile entry).
    fn named(name: &'static str) -> Self;
}

impl<P: SpinPolicy, B: Blocker> WorkloadLock for SpinThenBlock<P, B> {
    fn named(name: &'static str) -> Self {
        SpinThenBlock::named(name)
    }
}

macro_rules! unnamed_lock {
    ($($t:ty),*) => {$(
        impl WorkloadLock for $t {
            fn named(_name: &'static str) -> Self {
                <$t as lock_api::RawMutex>::INIT
            }
        }
    )*};
}
unnamed_lock!(
    symmetry_locks::StdMutex,
    symmetry_locks::ParkingLot,
    symmetry_locks::Pthread,
    symmetry_locks::PthreadAdaptive,
    symmetry_locks::Tas,
    symmetry_locks::Ttas
);

/// Busy work of about `iters` loop iterations that the compiler cannot
/// remove (the workloads' "computation").
#[inline]
pub fn spin_work(iters: u64) -> u64 {
    let mut x = iters ^ 0x9E37_79B9_7F4A_7C15;
    for _ in 0..iters {
        x = std::hint::black_box(x.rotate_left(5) ^ 0x2545_F491);
    }
    x
}
