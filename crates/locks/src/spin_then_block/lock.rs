//! [`SpinThenBlock<P, B>`]: KLMO91's `P.Variable_Spin` / `V.Variable_Spin`
//! (§2.5) over a futex-style state word.
//!
//! State word (`u32`):
//!
//! | value | meaning |
//! |---|---|
//! | `0` UNLOCKED | free |
//! | `1` LOCKED | held, and no waiter has blocked since it was taken |
//! | `2` CONTENDED | held, and some waiter may be blocked in the blocker |
//!
//! Invariant: a blocked waiter exists only while the word is CONTENDED, or
//! between an unlock that saw CONTENDED and that unlock's `wake_one`.
//!
//! Transitions:
//! * `lock` fast path: CAS `0 -> 1` (the only atomic of an uncontended
//!   acquisition; KLMO91's `TestAndSet`).
//! * slow path, spin phase: poll the word up to the policy's threshold;
//!   when it reads 0, CAS `0 -> 1`.
//! * slow path, block phase: `swap(2)` (a `TestAndSet` that also marks the
//!   lock contended); if it returned 0 the lock is ours (left CONTENDED,
//!   which at worst costs one needless wake-up); otherwise
//!   `B::wait(word, 2)`, and on return `swap(2)` again. As in KLMO91's
//!   `REPEAT ... UNTIL TestAndSet(lock)`, a woken waiter does not spin
//!   again: its count is spent.
//! * `unlock`: `swap(0)`; if it returned CONTENDED, stamp the release time
//!   and `B::wake_one` (KLMO91's `V.Variable_Spin`, which records
//!   `releaseTime` for the thread it wakes).
//!
//! Waiting time. A contended acquisition reports to its policy and to the
//! profiler KLMO91's `spinsWaited`: the polls it made, plus for every
//! block the time from blocking to the release that woke it, converted to
//! spins ([`calibration`](super::calibration)). Like KLMO91 this measures
//! "time until the lock is next released", exact with at most two
//! contenders. The release stamp is one word per lock, not per woken
//! thread; with several blocked waiters a waiter may read a later
//! release's stamp (over-counting by the extra hold time) or, after a
//! spurious wake-up, an earlier one (counted as zero).

use core::panic::Location;
use std::sync::atomic::{AtomicPtr, AtomicU64};

use super::LockName;
use super::blocker::Blocker;
use super::calibration::ns_to_spins;
use super::policy::SpinPolicy;
use super::profiler::{self, LockProfile};
use crate::clock::now_ns;
use crate::sync::{AtomicU32, Ordering, spin_hint};

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;

/// A spin-then-block mutex: spins up to `P`'s threshold, then blocks
/// through `B` (see the module docs). Use it through `lock_api`:
/// `lock_api::Mutex::from_raw(SpinThenBlock::named("queue"), value)` to
/// give it a name (or `new()` for its creation site), or
/// `lock_api::Mutex::<SpinThenBlock<P, B>, T>::new(value)` for an unnamed
/// one.
///
/// ```
/// use std::sync::Arc;
/// use symmetry_locks::lock_api::Mutex;
/// use symmetry_locks::spin_then_block::{Futex, SpinThenBlock, policy::FixedSpinC, profiler};
///
/// // Spin for C (a futex block + wake, in spins), then block on a futex.
/// type Lock = SpinThenBlock<FixedSpinC, Futex>;
/// let m = Arc::new(Mutex::from_raw(Lock::named("doc.jobs"), Vec::new()));
/// let threads: Vec<_> = (0..4)
///     .map(|i| {
///         let m = Arc::clone(&m);
///         std::thread::spawn(move || m.lock().push(i))
///     })
///     .collect();
/// threads.into_iter().for_each(|t| t.join().unwrap());
/// assert_eq!(m.lock().len(), 4);
/// // Contended waits, if any, are in the profile under the lock's name.
/// let waits = profiler::snapshot().locks.iter().filter(|l| l.name == "doc.jobs").count();
/// assert!(waits <= 1);
/// ```
pub struct SpinThenBlock<P: SpinPolicy, B: Blocker> {
    /// UNLOCKED / LOCKED / CONTENDED (module docs).
    state: AtomicU32,
    /// [`now_ns`] of the last unlock that woke a waiter. A measurement,
    /// not synchronization: Relaxed.
    release_ns: AtomicU64,
    /// This lock's profiler entry, resolved at its first contended
    /// acquisition (null before, or while profiling is off).
    profile: AtomicPtr<LockProfile>,
    name: LockName,
    policy: P,
    queue: B::Queue,
}

impl<P: SpinPolicy, B: Blocker> core::fmt::Debug for SpinThenBlock<P, B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SpinThenBlock")
            .field("policy", &P::NAME)
            .field("blocker", &B::NAME)
            .field("name", &self.name)
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish()
    }
}

impl<P: SpinPolicy, B: Blocker> SpinThenBlock<P, B> {
    crate::sync::maybe_const_fn! {
        /// A free lock named by its creation site (the caller's
        /// `file:line:column`).
        #[track_caller]
        pub fn new() -> Self {
            Self::with_name(LockName::Site(Location::caller()))
        }
    }

    crate::sync::maybe_const_fn! {
        /// A free lock named `name` in profiles and `opt-known` tables.
        pub fn named(name: &'static str) -> Self {
            Self::with_name(LockName::Named(name))
        }
    }

    crate::sync::maybe_const_fn! {
        /// A free lock with the given name and a fresh policy state.
        pub fn with_name(name: LockName) -> Self {
            Self::with_policy(name, P::INIT)
        }
    }

    /// A free lock with an explicit policy state (e.g.
    /// `OptKnown::with_threshold(k)`).
    #[cfg(not(loom))]
    pub const fn with_policy(name: LockName, policy: P) -> Self {
        SpinThenBlock {
            state: AtomicU32::new(UNLOCKED),
            release_ns: AtomicU64::new(0),
            profile: AtomicPtr::new(core::ptr::null_mut()),
            name,
            policy,
            queue: B::QUEUE_INIT,
        }
    }

    /// A free lock with an explicit policy state (loom build).
    #[cfg(loom)]
    pub fn with_policy(name: LockName, policy: P) -> Self {
        SpinThenBlock {
            state: AtomicU32::new(UNLOCKED),
            release_ns: AtomicU64::new(0),
            profile: AtomicPtr::new(core::ptr::null_mut()),
            name,
            policy,
            queue: B::new_queue(),
        }
    }

    /// The lock's name.
    pub fn name(&self) -> LockName {
        self.name
    }

    /// The lock's policy state (e.g. to read an adaptive threshold).
    pub fn policy(&self) -> &P {
        &self.policy
    }

    /// The threshold the next contended acquisition would use.
    pub fn current_threshold(&self) -> u32 {
        self.policy.threshold(B::c_spins(), &self.name)
    }

    #[inline]
    fn try_acquire(&self) -> bool {
        // Acquire: pairs with the Release swap in `unlock`, so the last
        // critical section happens-before ours.
        self.state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// KLMO91's `P.Variable_Spin` after a failed `TestAndSet`.
    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let c = B::c_spins();
        let threshold = self.policy.threshold(c, &self.name);
        let mut spins: u64 = 0;
        let mut blocked_spins: u64 = 0;
        let mut blocked = false;
        let mut count = threshold;
        // Spin phase: poll the word (a plain load keeps the line shared
        // while the holder works), try when it reads free.
        let acquired = loop {
            // Relaxed: only a hint; the CAS below acquires.
            if self.state.load(Ordering::Relaxed) == UNLOCKED {
                if self.try_acquire() {
                    break true;
                }
                continue;
            }
            if count == 0 {
                break false;
            }
            count -= 1;
            spins += 1;
            spin_hint();
        };
        if !acquired {
            // Block phase.
            // Acquire: pairs with the Release swap in `unlock`.
            while self.state.swap(CONTENDED, Ordering::Acquire) != UNLOCKED {
                let t0 = now_ns();
                B::wait(&self.queue, &self.state, CONTENDED);
                blocked = true;
                let released = self.release_ns.load(Ordering::Relaxed);
                blocked_spins += ns_to_spins(released.saturating_sub(t0));
            }
        }
        let waited = spins + blocked_spins;
        self.policy.record(waited, c);
        if profiler::enabled() {
            self.profile_entry().record(waited, blocked);
        }
    }

    #[inline]
    fn profile_entry(&self) -> &'static LockProfile {
        // Acquire: pairs with the Release store below (another waiter may
        // have registered the entry).
        let p = self.profile.load(Ordering::Acquire);
        if p.is_null() {
            return self.register_profile();
        }
        // SAFETY: entries are leaked (`&'static`) and never freed; a
        // non-null pointer came from `register_profile`.
        unsafe { &*p }
    }

    #[cold]
    fn register_profile(&self) -> &'static LockProfile {
        let entry = profiler::entry(&self.name, B::NAME, B::c_spins);
        // Release: publishes the (already initialized) entry; racing
        // registrations find the same entry by name.
        self.profile
            .store(core::ptr::from_ref(entry).cast_mut(), Ordering::Release);
        entry
    }

    #[cold]
    #[inline(never)]
    fn wake(&self) {
        self.release_ns.store(now_ns(), Ordering::Relaxed);
        B::wake_one(&self.queue, &self.state);
    }
}

impl<P: SpinPolicy, B: Blocker> Default for SpinThenBlock<P, B> {
    #[track_caller]
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: `lock` and `try_lock` return only after moving the word from
// UNLOCKED to LOCKED or CONTENDED with Acquire (the CAS or the swap), and
// `unlock` moves it back to UNLOCKED with a Release swap; nothing else
// writes UNLOCKED. So at most one context holds the lock and each
// critical section happens-before the next.
unsafe impl<P: SpinPolicy, B: Blocker> lock_api::RawMutex for SpinThenBlock<P, B> {
    #[cfg(not(loom))]
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::with_name(LockName::Anonymous);
    #[cfg(loom)]
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = panic!("under loom, construct locks with new()");
    type Guard = lock_api::GuardSend;

    #[inline]
    fn lock(&self) -> Self::Guard {
        if !self.try_acquire() {
            self.lock_contended();
        }
        lock_api::GuardSend::new()
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        self.try_acquire().then(lock_api::GuardSend::new)
    }

    #[inline]
    unsafe fn unlock(&self, _guard: Self::Guard) {
        // Release: publishes the critical section to the next acquirer's
        // Acquire CAS or swap.
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            self.wake();
        }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != UNLOCKED
    }
}
