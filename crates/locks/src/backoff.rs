//! `backoff` and `backoff-persistent`: ALL89 §IV-D Ethernet-style backoff.
//!
//! State word: one byte, `0` = free, `1` = held, with the invariant of
//! [`crate::Tas`]. The difference is how a waiter decides *when* to try the
//! exchange, which ALL89 frames as estimating its chance of success from
//! experience:
//!
//! * [`Backoff`] (`PERSISTENT = false`): spin reading until the lock is seen
//!   free, then delay for a randomized period that grows exponentially with
//!   the number of past failures, and only then, if the lock is still free,
//!   try the exchange. Waiters still miss once per release.
//! * [`BackoffPersistent`] (`PERSISTENT = true`): delay whenever the lock is
//!   read busy; when it is read free, try at once. Waiters miss once per
//!   expired delay rather than once per release, at the price of a longer
//!   hand-over ("persistence", after the Ethernet notion).
//!
//! The delay limit starts at `MIN` spin iterations, doubles per failure and is
//! bounded by `MAX`; the delay itself is drawn uniformly from
//! `[limit/2, limit)` so colliding waiters spread out. The random source is a
//! per-wait SplitMix64 seeded from the waiter's stack address: no shared or
//! per-process state, so the lock stays `#[repr(C)]` and pointer-free (valid
//! in shared memory). The algorithms are unfair, as ALL89 says.

use crate::sync::{AtomicU8, Ordering, delay, maybe_const_fn, spin_hint};

/// Exponential, randomized, bounded backoff: the waiting side of the ALL89
/// Ethernet-style locks, reusable by other spin loops (e.g. LC98's claim).
#[derive(Debug)]
pub struct ExpBackoff {
    limit: u32,
    max: u32,
    rng: u64,
}

impl ExpBackoff {
    /// A backoff whose first delay is drawn from `[min/2, min)` spin
    /// iterations and whose limit doubles up to `max`.
    #[inline]
    pub fn new(min: u32, max: u32) -> Self {
        let seed = 0u8;
        // The waiter's stack address differs between concurrent waiters,
        // which is all the randomness collision avoidance needs.
        let rng = (&seed as *const u8 as u64) ^ 0x9e37_79b9_7f4a_7c15;
        Self {
            limit: min.max(2),
            max: max.max(min.max(2)),
            rng,
        }
    }

    /// Number of spin iterations the next [`ExpBackoff::wait`] would use as
    /// its upper bound.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    #[inline]
    fn next_random(&mut self) -> u64 {
        // SplitMix64.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Delays for a random number of spin iterations in `[limit/2, limit)`
    /// and doubles the limit (bounded by `max`): one more failure.
    #[inline]
    pub fn wait(&mut self) {
        let half = self.limit / 2;
        let n = half + (self.next_random() % u64::from(half.max(1))) as u32;
        delay(n);
        self.limit = self.limit.saturating_mul(2).min(self.max);
    }
}

/// Ethernet-style backoff lock; see the module docs. `MIN` and `MAX` bound
/// the delay in spin iterations (calibrate one with `symmetry calibrate`).
#[repr(C)]
#[derive(Debug)]
pub struct BackoffLock<const PERSISTENT: bool, const MIN: u32 = 8, const MAX: u32 = 4096> {
    /// `0` free, `1` held.
    state: AtomicU8,
}

/// ALL89 Ethernet-style backoff: delay after seeing a release.
pub type Backoff = BackoffLock<false>;
/// ALL89 backoff with persistence: delay on every busy read.
pub type BackoffPersistent = BackoffLock<true>;

impl<const P: bool, const MIN: u32, const MAX: u32> BackoffLock<P, MIN, MAX> {
    maybe_const_fn! {
        /// A free lock.
        pub fn new() -> Self {
            Self { state: AtomicU8::new(0) }
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self) {
        let mut backoff = ExpBackoff::new(MIN, MAX);
        if P {
            loop {
                // Relaxed: a hint; the swap carries the Acquire.
                if self.state.load(Ordering::Relaxed) == 0 {
                    // Acquire: pairs with the Release store in `unlock`.
                    if self.state.swap(1, Ordering::Acquire) == 0 {
                        return;
                    }
                }
                backoff.wait();
            }
        } else {
            loop {
                while self.state.load(Ordering::Relaxed) != 0 {
                    spin_hint();
                }
                backoff.wait();
                if self.state.load(Ordering::Relaxed) == 0
                    // Acquire: pairs with the Release store in `unlock`.
                    && self.state.swap(1, Ordering::Acquire) == 0
                {
                    return;
                }
            }
        }
    }
}

impl<const P: bool, const MIN: u32, const MAX: u32> Default for BackoffLock<P, MIN, MAX> {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: taken only by a 0 -> 1 exchange with Acquire, released by a
// Release store of 0: mutual exclusion and happens-before as for `Tas`.
unsafe impl<const P: bool, const MIN: u32, const MAX: u32> lock_api::RawMutex
    for BackoffLock<P, MIN, MAX>
{
    crate::raw_init!();
    type Guard = lock_api::GuardSend;

    #[inline]
    fn lock(&self) -> Self::Guard {
        // Acquire: pairs with the Release store in `unlock`.
        if self.state.swap(1, Ordering::Acquire) != 0 {
            self.lock_slow();
        }
        lock_api::GuardSend::new()
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        if self.state.load(Ordering::Relaxed) != 0 {
            return None;
        }
        // Acquire: pairs with the Release store in `unlock`.
        (self.state.swap(1, Ordering::Acquire) == 0).then(lock_api::GuardSend::new)
    }

    #[inline]
    unsafe fn unlock(&self, _guard: Self::Guard) {
        // Release: pairs with the Acquire swap of the next holder.
        #[cfg(not(loom))]
        self.state.store(0, Ordering::Release);
        // loom 0.7.2 can let a plain store land inside a racing swap and
        // lose it (tokio-rs/loom#254, fixed upstream but unreleased); an RMW
        // release is equivalent here and lets loom check the rest.
        #[cfg(loom)]
        self.state.swap(0, Ordering::Release);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != 0
    }
}
