//! The idle protocol of the generic strategies: how a processor with
//! nothing to run goes to sleep in the kernel, and how whoever makes a
//! thread ready wakes one, without a lost wake-up.
//!
//! State: `count` is the number of processors on `list` (changed only
//! under the list's mutex, read without it by wakers); `flags[p]` is
//! processor p's wake-up token (set by a waker, consumed by p).
//!
//! The two sides form the store-buffering pattern, closed by SeqCst:
//! - a sleeper registers (`count += 1`, SeqCst, under the mutex), issues
//!   a SeqCst fence, then re-checks for work;
//! - a waker publishes work (the ready queue), issues a SeqCst fence,
//!   then reads `count`.
//!
//! In the single total order of the two fences, either the waker's fence
//! comes first, and then the sleeper's re-check sees the work, or the
//! sleeper's comes first, and then the waker sees `count != 0` and wakes
//! someone off the list. No interleaving leaves work published and every
//! processor asleep. `tests/loom_sleepers.rs` model-checks this code with
//! loom, and finds the lost wake-up if either fence is removed.
//!
//! The wake-up token is consumed with a compare-exchange, not a swap: a
//! failed exchange only reads. (Besides sparing a write per poll, this
//! keeps the model checkable: loom 0.7 lets a swap that rewrites the value
//! it read be ordered after a store it did not see, so a later acquire
//! of the token could miss data published before it; a 15-line
//! message-passing test shows it, and the swap-based model "deadlocked"
//! for that reason alone.)
//!
//! Everything atomic comes from the workspace's loom shim
//! ([`symmetry_locks::sync`]), so the model checks this code.

use crossbeam_utils::CachePadded;
use symmetry_locks::sync::thread::{self, Thread};
use symmetry_locks::sync::{AtomicBool, AtomicUsize, Mutex, Ordering, fence};

/// Sleeping processors of the generic idle protocol. See the module docs.
pub struct Sleepers {
    /// Number of processors in `list`. Incremented (SeqCst) by a processor
    /// before its final check for work; read after a SeqCst fence by
    /// wakers.
    count: AtomicUsize,
    list: Mutex<Vec<usize>>,
    flags: Box<[CachePadded<AtomicBool>]>,
    threads: Box<[Mutex<Option<Thread>>]>,
}

impl std::fmt::Debug for Sleepers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sleepers")
            .field("count", &self.count.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Sleepers {
    /// The protocol for `n` processors, none asleep.
    pub fn new(n: usize) -> Self {
        Sleepers {
            count: AtomicUsize::new(0),
            list: Mutex::new(Vec::with_capacity(n)),
            flags: (0..n)
                .map(|_| CachePadded::new(AtomicBool::new(false)))
                .collect(),
            threads: (0..n).map(|_| Mutex::new(None)).collect(),
        }
    }

    /// Records the calling OS thread as processor `p` (before it first
    /// sleeps).
    pub fn register(&self, p: usize) {
        *self.threads[p].lock().unwrap_or_else(|e| e.into_inner()) = Some(thread::current());
    }

    /// Puts processor `me` to sleep unless `has_work` says there is
    /// something to do once it is registered; `parking` runs just before
    /// it blocks (a statistic). Returns whether it slept (and was woken);
    /// `false` if the re-check found work.
    pub fn sleep(&self, me: usize, has_work: impl Fn() -> bool, parking: impl FnOnce()) -> bool {
        {
            let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
            l.push(me);
            self.count.fetch_add(1, Ordering::SeqCst);
        }
        // SeqCst fence: the sleeper's half of the store-buffering pair
        // (see the module docs); pairs with the fence in `notify_one`.
        fence(Ordering::SeqCst);
        if has_work() {
            let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(pos) = l.iter().position(|&p| p == me) {
                l.swap_remove(pos);
                self.count.fetch_sub(1, Ordering::SeqCst);
            }
            // Otherwise a waker already took us off the list and set (or
            // will set) our flag: the next sleep returns at once, which is
            // harmless.
            return false;
        }
        parking();
        // Consume the token if present: a failed exchange only reads, so
        // the token word is written once per wake-up, not once per poll.
        // Acquire (on success): pairs with the Release store in `wake`, so
        // the work published before the wake-up is visible after it.
        while self.flags[me]
            .compare_exchange(true, false, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            thread::park();
        }
        true
    }

    /// Wakes one sleeping processor if there is one. Called after making
    /// a thread ready (after publishing it to a ready queue).
    #[inline(always)]
    pub fn notify_one(&self) {
        // SeqCst fence: the waker's half of the store-buffering pair (see
        // the module docs): either we see the sleeper's increment, or it
        // sees our work.
        fence(Ordering::SeqCst);
        if self.count.load(Ordering::Relaxed) != 0 {
            self.wake_one();
        }
    }

    #[cold]
    fn wake_one(&self) {
        let p = {
            let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
            let p = l.pop();
            if p.is_some() {
                self.count.fetch_sub(1, Ordering::SeqCst);
            }
            p
        };
        if let Some(p) = p {
            self.wake(p);
        }
    }

    fn wake(&self, p: usize) {
        // Release: pairs with the Acquire exchange in `sleep`.
        self.flags[p].store(true, Ordering::Release);
        // Unparked under the slot's lock (only `register` contends for it)
        // rather than cloning the handle: no reference count per wake-up.
        if let Some(t) = self.threads[p]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            t.unpark();
        }
    }

    /// Wakes every sleeping processor (shutdown).
    pub fn wake_all(&self) {
        let all: Vec<usize> = {
            let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
            self.count.store(0, Ordering::SeqCst);
            l.drain(..).collect()
        };
        for p in all {
            self.wake(p);
        }
    }
}
