//! Blockers: how a waiter of a [`SpinThenBlock`](super::SpinThenBlock)
//! gives up its processor, and how the releaser wakes it.
//!
//! A blocker offers futex semantics on the lock's state word: `wait(word,
//! expected)` blocks the caller only if `word` still holds `expected`
//! (checked atomically with respect to `wake_one`), and `wake_one` wakes at
//! most one waiter. Spurious returns from `wait` are allowed; the lock
//! re-checks its word in a loop. A blocker keeps whatever per-lock state it
//! needs in [`Blocker::Queue`], which lives inside the lock (zero-sized for
//! the futex, whose queue is the kernel's).
//!
//! | blocker | who waits | C comes from |
//! |---|---|---|
//! | [`Futex`] | OS threads, blocked in the kernel (`FUTEX_WAIT_PRIVATE`) | [`Calibration::c_spins_os`](super::calibration::Calibration::c_spins_os) |
//! | [`SpinWait`] | nobody blocks: `wait` is one spin hint (tests, loom) | `c_spins_os` |
//! | `symmetry_threads::sync::UserBlocker` | user threads of `symmetry-threads`: the thread blocks, its processor runs another | `c_spins_user` |

#[cfg(all(target_os = "linux", not(loom)))]
use crate::platform::futex;
use crate::sync::AtomicU32;

/// How waiters block and are woken (see the module docs).
///
/// # Safety
/// `wait(q, word, expected)` must not miss a `wake_one(q, word)` issued
/// after a store that changed `word` from `expected`: either `wait` sees the
/// changed word and returns, or the later `wake_one` finds the waiter and
/// makes it return. The lock's mutual exclusion does not depend on the
/// blocker (it re-checks the word), but its progress does.
pub unsafe trait Blocker: 'static {
    /// Registry name, e.g. `os` or `user`.
    const NAME: &'static str;
    /// Per-lock waiting state.
    type Queue: Send + Sync;
    /// An empty queue (the lock's `INIT` needs a constant).
    #[cfg(not(loom))]
    #[allow(clippy::declare_interior_mutable_const)]
    const QUEUE_INIT: Self::Queue;

    /// An empty queue. Under loom, whose primitives have no `const`
    /// constructors, locks are built with this instead of `QUEUE_INIT`.
    #[cfg(loom)]
    fn new_queue() -> Self::Queue;

    /// Blocks the caller while `word == expected`; may return spuriously.
    fn wait(queue: &Self::Queue, word: &AtomicU32, expected: u32);

    /// Wakes at most one thread blocked in [`Blocker::wait`] on `word`.
    fn wake_one(queue: &Self::Queue, word: &AtomicU32);

    /// C: this blocker's block+wake cost in spins, from
    /// [`calibration`](super::calibration).
    fn c_spins() -> u32;
}

/// OS threads blocked in the kernel: Linux `futex(2)` on the lock word.
#[cfg(all(target_os = "linux", not(loom)))]
#[derive(Debug, Clone, Copy, Default)]
pub struct Futex;

// SAFETY: FUTEX_WAIT compares the word with `expected` and queues the
// caller atomically with respect to FUTEX_WAKE on the same address (the
// kernel's hash-bucket lock), which is the contract.
#[cfg(all(target_os = "linux", not(loom)))]
unsafe impl Blocker for Futex {
    const NAME: &'static str = "os";
    type Queue = ();
    const QUEUE_INIT: Self::Queue = ();

    #[inline]
    fn wait(_queue: &(), word: &AtomicU32, expected: u32) {
        futex::wait(word, expected, futex::Scope::Private);
    }

    #[inline]
    fn wake_one(_queue: &(), word: &AtomicU32) {
        futex::wake(word, 1, futex::Scope::Private);
    }

    #[inline]
    fn c_spins() -> u32 {
        super::calibration::c_spins_os()
    }
}

/// A stand-in that never blocks: `wait` is one spin hint and `wake_one`
/// does nothing. The lock stays correct (every wait is a spurious
/// return), it just never gives its processor away. For loom models and
/// for platforms without a futex.
#[derive(Debug, Clone, Copy, Default)]
pub struct SpinWait;

// SAFETY: `wait` returns at once, so no wake-up can be missed.
unsafe impl Blocker for SpinWait {
    const NAME: &'static str = "spin";
    type Queue = ();
    #[cfg(not(loom))]
    const QUEUE_INIT: Self::Queue = ();
    #[cfg(loom)]
    fn new_queue() {}

    #[inline]
    fn wait(_queue: &(), _word: &AtomicU32, _expected: u32) {
        crate::sync::spin_hint();
    }

    #[inline]
    fn wake_one(_queue: &(), _word: &AtomicU32) {}

    #[inline]
    fn c_spins() -> u32 {
        super::calibration::c_spins_os()
    }
}
