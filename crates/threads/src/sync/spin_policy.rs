//! Spin-then-block policies of the relinquishing [`Mutex`](super::Mutex).
//!
//! A thread that finds the mutex held first polls the lock word (keeping
//! its processor), and only then blocks (giving the processor to another
//! user thread). How long to poll is the question of Karlin, Li, Manasse
//! and Owicki (KLMO91, "Empirical Studies of Competitive Spinning for a
//! Shared-Memory Multiprocessor"): spinning wastes the processor if the
//! holder keeps the lock long, blocking wastes a block and a wake-up if it
//! releases it soon. Spinning for about as long as a block costs is
//! 2-competitive; their randomized and adaptive policies do better.
//!
//! A policy is a type parameter of the mutex, stored in it (so an adaptive
//! policy can keep per-lock history; give it with
//! [`Mutex::with_policy`](super::Mutex::with_policy)) and called only on the contended
//! path: [`SpinPolicy::spin_limit`] before an acquisition starts polling,
//! [`SpinPolicy::record`] once it has the lock. The built-in policy is
//! [`FixedSpin<N>`]: always `N` polls, no state, compiled to a constant.
//!
//! KLMO91's eight policies (always-block ... random-walk), with C measured
//! for user threads, the waiting-time profiler and `opt-known` tables,
//! live in `symmetry_locks::spin_then_block`; use them on user threads as
//! [`UserSpinThenBlock<P>`](super::UserSpinThenBlock) (a `lock_api` raw
//! mutex whose waiters block through [`UserBlocker`](super::UserBlocker)).
//! This trait stays the hook of [`Mutex`](super::Mutex), whose FIFO wait
//! queue and fair unlock the KLMO91 lock does not have.

/// Default number of polls of [`FixedSpin`], chosen by KLMO91's rule:
/// spin for about as long as blocking costs. On the 2-core development
/// machine one poll (a load and a `pause`) takes about 44 ns, and a
/// user-level block plus wake-up (a condition-variable ping-pong) about
/// 0.3 µs between threads of one processor and 1.2 µs across two, i.e.
/// 6 to 27 polls; 16 polls is in between.
pub const DEFAULT_SPINS: u32 = 16;

/// How long a contended acquisition of a relinquishing
/// [`Mutex`](super::Mutex) polls the lock word before blocking (see the
/// module docs).
pub trait SpinPolicy: Send + Sync {
    /// Polls of the lock word allowed before blocking, for one contended
    /// acquisition (asked again after each wake-up that has to retry).
    /// `0` blocks at once.
    fn spin_limit(&self) -> u32;

    /// Feedback after a contended acquisition: the polls it made in all,
    /// and whether it had to block. An adaptive policy updates its
    /// history here. It runs concurrently with other threads'
    /// `spin_limit` calls (the policy is shared, hence `Sync`), so such
    /// history lives in atomics.
    #[inline(always)]
    fn record(&self, _polls: u32, _blocked: bool) {}
}

/// Spin `N` polls, then block: KLMO91's fixed spin-then-block.
/// `FixedSpin<0>` is the pure blocking lock ([`NoSpin`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FixedSpin<const N: u32 = DEFAULT_SPINS>;

impl<const N: u32> SpinPolicy for FixedSpin<N> {
    #[inline(always)]
    fn spin_limit(&self) -> u32 {
        N
    }
}

/// Block at once when the mutex is held (no polling).
pub type NoSpin = FixedSpin<0>;
