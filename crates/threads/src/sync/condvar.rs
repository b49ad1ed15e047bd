//! Condition variables for the relinquishing [`Mutex`] (Mesa semantics,
//! Lampson and Redell 1980): a notified thread is only made ready; it
//! re-acquires the mutex like any other thread and must re-check its
//! condition, which may have changed again in the meantime.
//!
//! # State
//!
//! A FIFO list of `Waiter` nodes (on the waiters' stacks) under a
//! `symmetry_locks::Tas` spin lock, and `waiters`, the list's length,
//! written only under that lock and read without it by notifiers so that a
//! notify with nobody waiting costs one load.
//!
//! # Transitions
//!
//! * `wait`: push the node (under the spin lock), *then* release the
//!   mutex, park until popped, re-acquire the mutex. Since the node is
//!   queued before the mutex is released, a notifier that changes the
//!   condition under the mutex after that release finds the node: no
//!   wake-up is lost.
//! * `notify_one` / `notify_all`: pop one node / take the whole list under
//!   the spin lock; wake them after releasing it.
//!
//! `notify_all` wakes every waiter, and they then compete for the mutex
//! (no requeueing onto the mutex's queue: each waiter spins or blocks on
//! the mutex by its own policy).

use std::fmt;
use symmetry_locks::sync::{AtomicUsize, Ordering};

use symmetry_locks::Tas;

use super::mutex::{Mutex, MutexGuard, not_in_runtime};
use super::spin_policy::SpinPolicy;
use super::wait_queue::{WOKEN, WaitList, Waiter};
use crate::NotInRuntime;
use crate::runtime::context::current_cb;

/// A condition variable for user threads, used with [`Mutex`]. Waiting
/// blocks the user thread (its processor runs others). Mesa semantics: a
/// woken thread re-checks its condition, so wait in a loop or use
/// [`Condvar::wait_while`]. Spurious wake-ups may occur.
///
/// Waiting needs a user thread: [`Condvar::wait_checked`] returns
/// [`NotInRuntime`] elsewhere, and [`Condvar::wait`] panics with its
/// message. Notifying works from any thread.
///
/// ```
/// use std::sync::Arc;
/// use symmetry_threads::sync::{Condvar, Mutex};
/// use symmetry_threads::{Runtime, SingleLock};
///
/// let rt: Runtime<SingleLock> = Runtime::new(2).unwrap();
/// let pair = Arc::new((Mutex::new(false), Condvar::new()));
/// let p2 = Arc::clone(&pair);
/// let waiter = rt.spawn(move || {
///     let (m, cv) = &*p2;
///     let ready = cv.wait_while(m.lock(), |ready| !*ready);
///     *ready
/// });
/// rt.block_on(move || {
///     let (m, cv) = &*pair;
///     *m.lock() = true;
///     cv.notify_all();
/// })
/// .unwrap();
/// assert!(waiter.join().unwrap());
/// ```
pub struct Condvar {
    /// Waiting threads.
    queue: lock_api::Mutex<Tas, WaitList>,
    /// The queue's length; written under its lock (see the module docs).
    waiters: AtomicUsize,
}

impl Condvar {
    /// A condition variable with no waiters.
    pub const fn new() -> Self {
        Condvar {
            queue: lock_api::Mutex::new(WaitList::new()),
            waiters: AtomicUsize::new(0),
        }
    }

    /// Atomically releases the mutex of `guard` and blocks the calling
    /// user thread until notified; re-acquires the mutex before returning.
    ///
    /// # Panics
    /// Outside a user thread (the guard is dropped, unlocking the mutex);
    /// [`Condvar::wait_checked`] returns the error instead.
    #[track_caller]
    pub fn wait<'a, T: ?Sized, P: SpinPolicy>(
        &self,
        mut guard: MutexGuard<'a, T, P>,
    ) -> MutexGuard<'a, T, P> {
        if let Err(e) = self.wait_checked(&mut guard) {
            not_in_runtime(e);
        }
        guard
    }

    /// Waits (as [`Condvar::wait`]) while `condition` holds for the value;
    /// returns with the mutex held and the condition false.
    ///
    /// # Panics
    /// As [`Condvar::wait`], if it has to wait.
    #[track_caller]
    pub fn wait_while<'a, T: ?Sized, P: SpinPolicy, F>(
        &self,
        mut guard: MutexGuard<'a, T, P>,
        condition: F,
    ) -> MutexGuard<'a, T, P>
    where
        F: FnMut(&mut T) -> bool,
    {
        if let Err(e) = self.wait_while_checked(&mut guard, condition) {
            not_in_runtime(e);
        }
        guard
    }

    /// [`Condvar::wait`] that returns [`NotInRuntime`] (with the mutex
    /// still held and nothing changed) outside a user thread.
    pub fn wait_checked<T: ?Sized, P: SpinPolicy>(
        &self,
        guard: &mut MutexGuard<'_, T, P>,
    ) -> Result<(), NotInRuntime> {
        let Some(me) = current_cb() else {
            return Err(NotInRuntime {
                op: "Condvar::wait",
            });
        };
        let mutex: &Mutex<T, P> = MutexGuard::mutex(guard);
        let waiter = Waiter::new(me);
        {
            let mut q = self.queue.lock();
            // SAFETY: a fresh node, kept in this frame until `wait` below
            // has seen it popped.
            unsafe { q.push_back(&waiter) };
            // Relaxed: written under the queue lock; see `notify_one` for
            // the readers.
            self.waiters.store(q.len(), Ordering::Relaxed);
        }
        // SAFETY: the guard proves we hold the mutex; we re-acquire it
        // below before the guard can be used or dropped again.
        unsafe { mutex.unlock() };
        waiter.wait();
        // Re-acquire. A panic from here to the end (only a user-written
        // spin policy can panic) would leave the guard unlocking a mutex
        // it does not hold: abort instead.
        let bomb = AbortOnUnwind;
        mutex.lock_as(me);
        std::mem::forget(bomb);
        Ok(())
    }

    /// [`Condvar::wait_while`] that returns [`NotInRuntime`] outside a
    /// user thread, if it has to wait (with the mutex still held).
    pub fn wait_while_checked<T: ?Sized, P: SpinPolicy, F>(
        &self,
        guard: &mut MutexGuard<'_, T, P>,
        mut condition: F,
    ) -> Result<(), NotInRuntime>
    where
        F: FnMut(&mut T) -> bool,
    {
        while condition(&mut **guard) {
            self.wait_checked(guard)?;
        }
        Ok(())
    }

    /// Wakes one waiting thread (the longest waiting); returns whether
    /// there was one. From any thread.
    #[inline]
    pub fn notify_one(&self) -> bool {
        // Relaxed: a waiter that queued before releasing the mutex that
        // the notifier has since acquired happens-before this load, so it
        // cannot read a count from before that push (read-write
        // coherence); a notify racing with a wait without the mutex may
        // miss it, as with any condition variable.
        if self.waiters.load(Ordering::Relaxed) == 0 {
            return false;
        }
        self.notify_one_slow()
    }

    #[cold]
    #[inline(never)]
    fn notify_one_slow(&self) -> bool {
        let node = {
            let mut q = self.queue.lock();
            let node = q.pop_front();
            // Relaxed: see `wait_checked`.
            self.waiters.store(q.len(), Ordering::Relaxed);
            node
        };
        match node {
            Some(node) => {
                // SAFETY: popped just now under the queue lock; woken once.
                unsafe { Waiter::wake(node, WOKEN) };
                true
            }
            None => false,
        }
    }

    /// Wakes every waiting thread; returns how many. From any thread.
    #[inline]
    pub fn notify_all(&self) -> usize {
        // Relaxed: as in `notify_one`.
        if self.waiters.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        self.notify_all_slow()
    }

    #[cold]
    #[inline(never)]
    fn notify_all_slow(&self) -> usize {
        let all = {
            let mut q = self.queue.lock();
            // Relaxed: see `wait_checked`.
            self.waiters.store(0, Ordering::Relaxed);
            q.take()
        };
        all.wake_all(WOKEN)
    }
}

/// Aborts the process if dropped (during an unwind it must not survive).
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        eprintln!("symmetry-threads: a spin policy panicked while a Condvar re-locked its mutex");
        std::process::abort();
    }
}

impl Default for Condvar {
    fn default() -> Self {
        Condvar::new()
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condvar")
            // Relaxed: a snapshot for display.
            .field("waiters", &self.waiters.load(Ordering::Relaxed))
            .finish()
    }
}
