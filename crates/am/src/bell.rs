//! The doorbell: an idle receiver sleeps on a futex word in its own
//! segment, and a sender issues the wake-up only when the receiver has
//! announced that it sleeps, so a message to a busy receiver costs one
//! load more than before.
//!
//! State: one 32-bit word per endpoint, in its segment's header
//! (`SegHeader::bell`): [`AWAKE`] or [`ASLEEP`]. Only the owner (the
//! receiver) stores ASLEEP; anyone may store AWAKE.
//!
//! Transitions:
//!
//! * the receiver, idle past its spin budget, [`doze`]s (stores ASLEEP,
//!   then a heavy fence), polls its queues once more, and only if they are
//!   still empty [`sleep`]s (a shared futex wait while the word is
//!   ASLEEP, with a timeout); whatever wakes it, it [`rise`]s (stores
//!   AWAKE) before it polls;
//! * a sender, after its READY store, [`ring`]s: a light fence and a load
//!   of the word; only a word that is not AWAKE sends it to the slow path,
//!   which swaps AWAKE in and, if it took the word from someone else's
//!   value, wakes the receiver.
//!
//! Why no message is slept through: it is Dekker's pattern. The sender
//! stores READY, then loads the bell; the receiver stores ASLEEP, then
//! loads the READY word (its last poll). The fences between each store
//! and load ([`symmetry_locks::platform::fence`]: the sender's is a compiler
//! fence, the receiver's a `membarrier(2)` that makes every sender's CPU
//! run a full barrier) forbid both loads to miss both stores. So either
//! the receiver's last poll finds the message, or the sender finds ASLEEP
//! and wakes it; and the futex wait sleeps only while the word is still
//! ASLEEP, so a wake-up between the last poll and the wait is not lost.
//!
//! What a peer can do to the word (it is in shared memory): any value.
//! The receiver then wakes early (a futex wait on a word that differs
//! returns at once) or sleeps until its timeout; a sender issues a
//! needless wake. Nothing else reads the word, so a hostile peer can cost
//! an idle receiver CPU time or latency, never a message.

use std::time::Duration;

use crate::sync::{AtomicU32, Ordering};

/// The receiver is polling (or about to).
pub(crate) const AWAKE: u32 = 0;
/// The receiver has announced that it may sleep on the word.
pub(crate) const ASLEEP: u32 = 1;

/// Sender, after publishing a message into the bell owner's queues: wakes
/// the owner if it sleeps. `announce` runs after the light fence, before
/// the bell is loaded: a store-load ordering that the same fence pair
/// gives (the lanes' announcements, `claim::rings`).
#[inline(always)]
pub(crate) fn ring(bell: &AtomicU32, announce: impl FnOnce()) {
    light();
    announce();
    // Relaxed: ordered after our READY store by the fence pair (module
    // docs); nothing else is published through the word.
    if bell.load(Ordering::Relaxed) != AWAKE {
        wake(bell);
    }
}

#[cold]
#[inline(never)]
fn wake(bell: &AtomicU32) {
    // Relaxed: the futex call orders nothing we need; the receiver polls
    // after it wakes, and our READY store was made before our load above.
    // The swap lets one sender of many make the system call.
    if bell.swap(AWAKE, Ordering::Relaxed) != AWAKE {
        futex_wake(bell);
    }
}

/// Receiver: announces that it may sleep. Poll once more after it, and
/// [`sleep`] only if that poll finds nothing.
#[inline]
pub(crate) fn doze(bell: &AtomicU32) {
    // Relaxed: ordered before our next poll's loads by the heavy fence.
    bell.store(ASLEEP, Ordering::Relaxed);
    heavy();
}

/// Receiver, after [`doze`] and a fruitless poll: sleeps until a sender
/// rings, `timeout` passes, or a spurious wake-up; then call [`rise`].
#[inline]
pub(crate) fn sleep(bell: &AtomicU32, timeout: Duration) {
    futex_wait(bell, timeout);
}

/// Receiver: back to polling (senders need not wake it).
#[inline]
pub(crate) fn rise(bell: &AtomicU32) {
    // Relaxed: a sender that still sees ASLEEP only issues a needless
    // wake-up.
    bell.store(AWAKE, Ordering::Relaxed);
}

#[cfg(not(loom))]
fn light() {
    symmetry_locks::platform::fence::light();
}
#[cfg(not(loom))]
fn heavy() {
    symmetry_locks::platform::fence::heavy();
}
#[cfg(not(loom))]
fn futex_wake(bell: &AtomicU32) {
    symmetry_locks::platform::futex::wake(bell, 1, symmetry_locks::platform::futex::Scope::Shared);
}
#[cfg(not(loom))]
fn futex_wait(bell: &AtomicU32, timeout: Duration) {
    symmetry_locks::platform::futex::wait_timeout(
        bell,
        ASLEEP,
        symmetry_locks::platform::futex::Scope::Shared,
        timeout,
    );
}

// Under loom both fences are full fences (loom has no membarrier; the
// asymmetric pair orders no less than two full fences), the futex wait
// returns at once and the wake does nothing: a model checks that a
// receiver that would sleep was rung.
#[cfg(loom)]
fn light() {
    crate::sync::fence(Ordering::SeqCst);
}
#[cfg(loom)]
fn heavy() {
    crate::sync::fence(Ordering::SeqCst);
}
#[cfg(loom)]
fn futex_wake(_bell: &AtomicU32) {}
#[cfg(loom)]
fn futex_wait(_bell: &AtomicU32, _timeout: Duration) {}
