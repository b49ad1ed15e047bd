//! The user-thread blocker of KLMO91's spin-then-block locks: a waiter of
//! a `symmetry_locks::spin_then_block::SpinThenBlock<P, UserBlocker>`
//! that stops spinning blocks its *user* thread, and its processor runs
//! another ready user thread (KLMO91 §7 anticipated this: the same
//! policies with a much smaller C).
//!
//! It gives the lock futex semantics with a per-lock FIFO [`WaitList`]
//! (nodes on the waiters' stacks, see `wait_queue`) under a `Tas` spin
//! lock: `wait` checks the lock word *under the list's lock* and only then
//! queues itself, and `wake_one` pops under the same lock, so a release
//! between the waiter's decision and its queueing is never missed.
//!
//! A caller that is not a user thread (the main thread, another OS
//! thread) cannot block a user thread: its `wait` spins once and yields
//! the OS thread, a spurious return the lock's loop absorbs. Such a
//! caller works, it just polls.

use symmetry_locks::sync::Ordering;

use symmetry_locks::Tas;
use symmetry_locks::spin_then_block::{Blocker, calibration};

use super::wait_queue::{WOKEN, WaitList, Waiter};

/// Blocks user threads of `symmetry-threads` (module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct UserBlocker;

/// The per-lock wait list of [`UserBlocker`].
#[derive(Debug)]
pub struct UserQueue {
    list: lock_api::Mutex<Tas, WaitList>,
}

// SAFETY: the list is only touched under its `Tas` lock; its nodes belong
// to parked user threads that any OS thread may wake.
unsafe impl Sync for UserQueue {}

// SAFETY: `wait` re-reads the word under the list's lock before queueing
// and `wake_one` pops under the same lock after the unlocker changed the
// word, so either the waiter sees the change or the waker finds the node
// (see the module docs).
unsafe impl Blocker for UserBlocker {
    const NAME: &'static str = "user";
    type Queue = UserQueue;
    #[allow(clippy::declare_interior_mutable_const)]
    const QUEUE_INIT: UserQueue = UserQueue {
        list: lock_api::Mutex::from_raw(Tas::new(), WaitList::new()),
    };

    fn wait(queue: &UserQueue, word: &std::sync::atomic::AtomicU32, expected: u32) {
        let Some(me) = crate::current() else {
            std::hint::spin_loop();
            std::thread::yield_now();
            return;
        };
        let node = Waiter::new(me.cb());
        {
            let mut list = queue.list.lock();
            // Relaxed: ordered by the list lock (module docs); an unlock
            // whose wake-up took the list lock before us is visible here.
            if word.load(Ordering::Relaxed) != expected {
                return;
            }
            // SAFETY: the node is on no list; this frame keeps it alive
            // and unmoved until `wait` below returns, which happens only
            // after a waker popped it.
            unsafe { list.push_back(&node) };
        }
        node.wait();
    }

    fn wake_one(queue: &UserQueue, _word: &std::sync::atomic::AtomicU32) {
        let node = queue.list.lock().pop_front();
        if let Some(node) = node {
            // SAFETY: popped just now under the lock, woken once, not
            // touched again.
            unsafe { Waiter::wake(node, WOKEN) };
        }
    }

    #[inline]
    fn c_spins() -> u32 {
        calibration::c_spins_user()
    }
}

/// A spin-then-block mutex for user threads with policy `P`.
pub type UserSpinThenBlock<P> = symmetry_locks::spin_then_block::SpinThenBlock<P, UserBlocker>;
