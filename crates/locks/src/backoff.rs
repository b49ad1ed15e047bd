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

use crate::platform::rng::{GOLDEN, SplitMix64};
use crate::sync::{AtomicU8, Ordering, delay, spin_hint};

/// Exponential, randomized, bounded backoff: the waiting side of the ALL89
/// Ethernet-style locks, reusable by other spin loops (e.g. LC98's claim).
#[derive(Debug)]
pub struct ExpBackoff {
    limit: u32,
    max: u32,
    rng: SplitMix64,
}

impl ExpBackoff {
    /// A backoff whose first delay is drawn from `[min/2, min)` spin
    /// iterations and whose limit doubles up to `max`.
    #[inline]
    pub fn new(min: u32, max: u32) -> Self {
        let seed = 0u8;
        // The waiter's stack address differs between concurrent waiters,
        // which is all the randomness collision avoidance needs.
        let rng = SplitMix64::new((&seed as *const u8 as u64) ^ GOLDEN);
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

    /// Delays for a random number of spin iterations in `[limit/2, limit)`
    /// and doubles the limit (bounded by `max`): one more failure.
    #[inline]
    pub fn wait(&mut self) {
        let half = self.limit / 2;
        let n = half + (self.rng.next_u64() % u64::from(half.max(1))) as u32;
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
    /// Waits with [`ExpBackoff`] between exchanges (module docs): returns
    /// only after an exchange found the lock free.
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

// `try_lock` reads first, as both waits do before they exchange.
crate::byte_lock!([const P: bool, const MIN: u32, const MAX: u32] BackoffLock<P, MIN, MAX>, test_first: true);

/// What a waiter does between two polls of the word it waits on: the
/// waiting side of a lock, separate from its protocol (which word it
/// polls, who hands the lock over). A type parameter of the lock, so the
/// choice costs no call through a pointer.
///
/// | policy | waits by | on a machine with more runnable threads than cores |
/// |---|---|---|
/// | [`Spin`] | spin-wait hints, forever (the papers' locks) | a waiter keeps its core for its whole time slice while the thread it waits for (a holder, or the next owner of a FIFO hand-off) may be descheduled: SMARTQ's convoy |
/// | [`SpinThenYield`] | spin-wait hints for [`SpinThenYield::SPIN_NS`], then `sched_yield` at every poll | the waiter gives its core to the runnable threads after a bounded spin, so a descheduled holder or next owner runs again within a few yields instead of a time slice |
///
/// The yield is KLMO91's "block" made cheap: the waiter stays runnable
/// (no wake-up is needed, so nothing in the lock's release changes), and
/// on a core with nothing else to run `sched_yield` returns at once, so
/// on an idle machine the policy costs one system call per poll after
/// the spin budget. Both policies are async-signal-safe (`clock_gettime`
/// and `sched_yield`), as a lock path must be.
pub trait Wait: 'static {
    /// Name, for tables and series (`spin`, `spin-yield`).
    const NAME: &'static str;

    /// One poll found the word unchanged; `w` counts this wait's polls.
    fn pause(w: &mut Waiting);
}

/// The state of one wait: polls made, and when the waiter stopped
/// spinning (reading the clock once per 16 polls).
#[derive(Debug, Default)]
pub struct Waiting {
    polls: u32,
    /// When the wait started (ns, [`crate::clock::now_ns`]); 0 until the
    /// first clock read. Unread under loom, which has no time.
    #[cfg_attr(loom, allow(dead_code))]
    since: u64,
    /// The spin budget is spent: yield at every poll.
    yielding: bool,
}

impl Waiting {
    /// A wait that has not polled yet.
    #[inline(always)]
    pub const fn new() -> Self {
        Self {
            polls: 0,
            since: 0,
            yielding: false,
        }
    }

    /// Polls made so far.
    #[inline(always)]
    pub fn polls(&self) -> u32 {
        self.polls
    }

    /// Time since the wait's first clock read (ns; 0 before it, and
    /// always under loom): how long a wait bounded by
    /// [`spin_within`](Waiting::spin_within) has spun.
    #[inline]
    pub fn elapsed_ns(&self) -> u64 {
        #[cfg(not(loom))]
        if self.since != 0 {
            return crate::clock::now_ns().saturating_sub(self.since);
        }
        0
    }

    /// Whether the wait has spent its spin budget and now yields.
    #[inline(always)]
    pub fn yielding(&self) -> bool {
        self.yielding
    }

    /// One spinning poll of a wait bounded by `budget_ns`: a spin-wait
    /// hint and `true` while the wait has spun less than `budget_ns`,
    /// `false` (and no hint) once the budget is spent. The clock is read
    /// once per 16 polls, the first read starting the budget. Under loom,
    /// where there is no time, the budget is one poll, so a model sees the
    /// wait both succeed and run out.
    #[inline]
    pub fn spin_within(&mut self, budget_ns: u64) -> bool {
        self.polls = self.polls.wrapping_add(1);
        #[cfg(not(loom))]
        if self.polls.is_multiple_of(CLOCK_EVERY) {
            let now = crate::clock::now_ns();
            if self.since == 0 {
                self.since = now;
            } else if now.saturating_sub(self.since) >= budget_ns {
                return false;
            }
        }
        #[cfg(loom)]
        if self.polls >= 2 {
            let _ = budget_ns;
            return false;
        }
        spin_hint();
        true
    }
}

/// Waits by `W` until `done()`, which reads the awaited word with the
/// ordering its caller documents: the first test inline, for the fast
/// path that finds the word as wanted, the polls out of line.
#[inline(always)]
pub(crate) fn wait_until<W: Wait>(done: impl Fn() -> bool) {
    if !done() {
        poll_until::<W>(done);
    }
}

/// The polls of [`wait_until`].
#[cold]
#[inline(never)]
fn poll_until<W: Wait>(done: impl Fn() -> bool) {
    let mut w = Waiting::new();
    while !done() {
        W::pause(&mut w);
    }
}

/// Polls between two clock reads of a bounded spin.
#[cfg(not(loom))]
const CLOCK_EVERY: u32 = 16;

/// Spin-wait hints for as long as the wait lasts: the behaviour the
/// papers measure (ALL89, MCS, SMARTQ's "Queued" lock).
#[derive(Debug, Clone, Copy, Default)]
pub struct Spin;

impl Wait for Spin {
    const NAME: &'static str = "spin";

    #[inline(always)]
    fn pause(w: &mut Waiting) {
        w.polls = w.polls.wrapping_add(1);
        spin_hint();
    }
}

/// Spin for [`SpinThenYield::SPIN_NS`], then yield the processor at every
/// poll (see [`Wait`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SpinThenYield;

impl SpinThenYield {
    /// The spin budget, ns: about the cost of a context switch (a
    /// `sched_yield` that runs another thread and comes back), so a wait
    /// that ends within it never pays one, and a wait for a descheduled
    /// thread spins at most this long per turn on the core. KLMO91's
    /// fixed-spin(C) with the yield as the block.
    pub const SPIN_NS: u64 = 1_000;
}

impl Wait for SpinThenYield {
    const NAME: &'static str = "spin-yield";

    #[inline]
    fn pause(w: &mut Waiting) {
        if w.yielding {
            w.polls = w.polls.wrapping_add(1);
            yield_now();
        } else if !w.spin_within(Self::SPIN_NS) {
            w.yielding = true;
            yield_now();
        }
    }
}

/// `sched_yield`, or a model-checker yield under loom.
#[inline]
fn yield_now() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}
