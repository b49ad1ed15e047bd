//! The relinquishing mutex (PRESTO's `Lock`, Bershad, Lazowska and Levy
//! 1988): a thread that cannot get the lock gives its processor to another
//! user thread instead of spinning on it.
//!
//! # State word
//!
//! One byte, two bits:
//!
//! * `LOCKED` (1): some thread holds the mutex.
//! * `QUEUED` (2): the wait queue is not empty.
//!
//! Invariants: `QUEUED` changes only under the wait queue's spin lock, and
//! under that lock it is set exactly when the queue is non-empty. While
//! `LOCKED` is set, only the holder of the queue lock writes the word
//! (lockers CAS it only when `LOCKED` is clear, enqueuers only under the
//! queue lock).
//!
//! # Transitions
//!
//! * `lock`, fast path: one CAS `0 -> LOCKED`.
//! * `lock`, contended (`Mutex::lock_slow`, cold): poll the word up to
//!   [`SpinPolicy::spin_limit`] times, CASing `LOCKED` in whenever it is
//!   clear; then take the queue lock, re-check (take the mutex if it was
//!   freed meanwhile), set `QUEUED`, push a `Waiter` node that lives on
//!   the caller's stack, release the queue lock and park until woken.
//!   A woken thread retries from the top (and, if it loses to a thread
//!   that barged in, re-queues at the head, keeping its turn); a thread
//!   handed the lock returns with it.
//! * `unlock`, fast path: one CAS `LOCKED -> 0`, which fails exactly when
//!   `QUEUED` is set.
//! * `unlock`, slow path (`Mutex::unlock_slow`, cold): under the queue
//!   lock pop the first waiter and store `0` or `QUEUED`; release the
//!   queue lock and wake the waiter, which competes for the mutex again
//!   (throughput: the releaser may re-take the lock without a switch).
//!   [`MutexGuard::unlock_fair`] instead keeps `LOCKED` set and hands the
//!   mutex to the waiter (FIFO, at the price of a switch per hand-off).
//!
//! No wake-up is lost: a locker sets `QUEUED` by an RMW on the word, so
//! either the releaser's fast-path CAS comes first (and the locker's
//! re-check under the queue lock sees the mutex free) or it fails and the
//! releaser takes the queue lock after the locker has pushed its node. A
//! wake that reaches the thread before it parks is kept by the park word.

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use symmetry_locks::sync::{AtomicU8, Ordering};

use symmetry_locks::Tas;

use super::spin_policy::{FixedSpin, SpinPolicy};
use super::wait_queue::{HANDED_OFF, WOKEN, WaitList, Waiter};
use crate::NotInRuntime;
use crate::cb::CbRef;
use crate::runtime::context::current_cb;

/// Some thread holds the mutex.
const LOCKED: u8 = 1;
/// Threads wait in the queue.
const QUEUED: u8 = 2;

/// A mutual-exclusion lock for user threads that *relinquishes* the
/// processor: a contended [`lock`](Mutex::lock) polls the lock for a while
/// (as long as the [`SpinPolicy`] `P` says) and then blocks the user
/// thread, letting its processor run others, until an unlock wakes it.
/// For a lock that keeps the processor, see [`SpinMutex`](super::SpinMutex).
///
/// Waiters queue in FIFO order on an intrusive list of nodes kept on their
/// own stacks, guarded by a `symmetry_locks::Tas` spin lock. An unlock
/// wakes the first waiter, which competes again for the mutex;
/// [`MutexGuard::unlock_fair`] hands the mutex to it instead.
///
/// # Outside the runtime
///
/// Only *blocking* needs a user thread. Any thread may take a free mutex
/// ([`try_lock`](Mutex::try_lock), or `lock` when the lock is free or is
/// freed within the spin) and may unlock it, waking user threads. When a
/// thread that is not a user thread would have to block,
/// [`lock_checked`](Mutex::lock_checked) returns [`NotInRuntime`] and
/// [`lock`](Mutex::lock) panics with its message; neither hangs.
///
/// The mutex is not reentrant (a user thread that locks it twice blocks
/// forever) and not poisoned by a panic in a critical section.
///
/// ```
/// use std::sync::Arc;
/// use symmetry_threads::sync::Mutex;
/// use symmetry_threads::{LocalReadyq, Runtime};
///
/// let rt: Runtime<LocalReadyq> = Runtime::new(2).unwrap();
/// let h = rt.handle();
/// let m = Arc::new(Mutex::new(0u64));
/// let m2 = Arc::clone(&m);
/// rt.block_on(move || {
///     let kids: Vec<_> = (0..8)
///         .map(|_| {
///             let m = Arc::clone(&m2);
///             h.spawn(move || {
///                 for _ in 0..100 {
///                     *m.lock() += 1;
///                     symmetry_threads::yield_now();
///                 }
///             })
///         })
///         .collect();
///     kids.into_iter().for_each(|k| k.join().unwrap());
/// })
/// .unwrap();
/// assert_eq!(*m.lock(), 800); // free: fine from outside too
/// ```
pub struct Mutex<T: ?Sized, P: SpinPolicy = FixedSpin> {
    /// `LOCKED | QUEUED` (see the module docs).
    state: AtomicU8,
    /// Waiting user threads.
    queue: lock_api::Mutex<Tas, WaitList>,
    /// The spin-then-block policy (and its per-lock history).
    policy: P,
    data: UnsafeCell<T>,
}

// SAFETY: the mutex hands `&mut T` to one thread at a time, possibly a
// different one from the thread that created it, hence `T: Send`; the
// state word, the spin-locked queue and the `Sync` policy are thread-safe.
unsafe impl<T: ?Sized + Send, P: SpinPolicy> Sync for Mutex<T, P> {}

impl<T> Mutex<T> {
    /// A free mutex holding `value`, with the default spin policy
    /// ([`FixedSpin`]`<`[`DEFAULT_SPINS`](super::DEFAULT_SPINS)`>`).
    pub const fn new(value: T) -> Self {
        Mutex::with_policy(value, FixedSpin)
    }
}

impl<T, P: SpinPolicy> Mutex<T, P> {
    /// A free mutex holding `value`, spinning by `policy` before it
    /// blocks (e.g. `Mutex::with_policy(v, NoSpin::default())`).
    pub const fn with_policy(value: T, policy: P) -> Self {
        Mutex {
            state: AtomicU8::new(0),
            queue: lock_api::Mutex::new(WaitList::new()),
            policy,
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the mutex, returning the value.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized, P: SpinPolicy> Mutex<T, P> {
    /// Takes the mutex, blocking the calling user thread while another
    /// holds it (after polling for as long as the spin policy says).
    ///
    /// # Panics
    /// If the caller is not a user thread and would have to block (see
    /// the type docs); [`Mutex::lock_checked`] returns the error instead.
    #[inline]
    #[track_caller]
    pub fn lock(&self) -> MutexGuard<'_, T, P> {
        match self.lock_checked() {
            Ok(g) => g,
            Err(e) => not_in_runtime(e),
        }
    }

    /// Takes the mutex like [`Mutex::lock`], but returns [`NotInRuntime`]
    /// instead of blocking when the caller is not a user thread and the
    /// mutex stays held through the spin.
    #[inline]
    pub fn lock_checked(&self) -> Result<MutexGuard<'_, T, P>, NotInRuntime> {
        // Acquire: pairs with the Release CAS or store of the previous
        // holder's unlock (fast or slow path), so its critical section
        // happens-before ours.
        if self
            .state
            .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow(None)?;
        }
        Ok(MutexGuard::new(self))
    }

    /// Takes the mutex for `me`, the calling user thread (a condition
    /// variable re-locking); blocks as [`Mutex::lock`] does, never fails.
    #[inline]
    pub(super) fn lock_as(&self, me: CbRef) {
        // Acquire: as in `lock_checked`.
        if self
            .state
            .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            // With the thread known, the slow path blocks instead of
            // reporting `NotInRuntime`: the result is always `Ok`.
            let _ = self.lock_slow(Some(me));
        }
    }

    /// Takes the mutex if no one holds it; never blocks, from any thread.
    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T, P>> {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & LOCKED != 0 {
                return None;
            }
            // Acquire: as in `lock_checked`. `QUEUED` is kept: waiters
            // stay queued and the next unlock wakes one.
            match self.state.compare_exchange_weak(
                state,
                state | LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(MutexGuard::new(self)),
                Err(s) => state = s,
            }
        }
    }

    /// Whether some thread holds the mutex (a racy snapshot).
    #[inline]
    pub fn is_locked(&self) -> bool {
        // Relaxed: a hint, ordered with nothing.
        self.state.load(Ordering::Relaxed) & LOCKED != 0
    }

    /// The value, through `&mut self` (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    /// The spin policy (e.g. to read an adaptive policy's history).
    pub fn spin_policy(&self) -> &P {
        &self.policy
    }

    /// The contended path of `lock`: spin, then queue and park, until the
    /// mutex is ours. `me` is the calling user thread if already known
    /// (a condition variable re-locking); otherwise it is looked up only
    /// if the caller has to block, and its absence is the error.
    #[cold]
    #[inline(never)]
    fn lock_slow(&self, mut me: Option<CbRef>) -> Result<(), NotInRuntime> {
        let mut polls = 0u32;
        let mut blocked = false;
        let mut at_front = false;
        // The node lives in this frame; it is pushed only while it is off
        // every list, and `wait` returns only once it has been popped, so
        // it is on no list when the frame ends.
        let mut node: Option<Waiter> = None;
        loop {
            // Spin: poll (reads only, as TTAS does) and CAS when free.
            let limit = self.policy.spin_limit();
            let mut spun = 0u32;
            let mut state = self.state.load(Ordering::Relaxed);
            loop {
                if state & LOCKED == 0 {
                    // Acquire: as in `lock_checked`.
                    match self.state.compare_exchange_weak(
                        state,
                        state | LOCKED,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => {
                            self.policy.record(polls, blocked);
                            return Ok(());
                        }
                        Err(s) => {
                            state = s;
                            continue;
                        }
                    }
                }
                if spun >= limit {
                    break;
                }
                spun += 1;
                std::hint::spin_loop();
                // Relaxed: a poll; the CAS above orders the acquisition.
                state = self.state.load(Ordering::Relaxed);
            }
            polls = polls.saturating_add(spun);

            // Block: only a user thread may.
            let cb = match me {
                Some(cb) => cb,
                None => match current_cb() {
                    Some(cb) => {
                        me = Some(cb);
                        cb
                    }
                    None => {
                        return Err(NotInRuntime {
                            op: "Mutex::lock on a held mutex",
                        });
                    }
                },
            };
            let waiter = &*node.get_or_insert_with(|| Waiter::new(cb));
            {
                let mut q = self.queue.lock();
                // Relaxed loads and CASes that set `QUEUED`: `QUEUED` is
                // published to releasers by the queue lock (see the module
                // invariants); the RMW order on the word is what rules
                // out a lost wake-up (module docs).
                let mut state = self.state.load(Ordering::Relaxed);
                loop {
                    if state & LOCKED == 0 {
                        // Freed since the spin: take it instead of queueing.
                        // Acquire: as in `lock_checked`.
                        match self.state.compare_exchange_weak(
                            state,
                            state | LOCKED,
                            Ordering::Acquire,
                            Ordering::Relaxed,
                        ) {
                            Ok(_) => {
                                drop(q);
                                self.policy.record(polls, blocked);
                                return Ok(());
                            }
                            Err(s) => {
                                state = s;
                                continue;
                            }
                        }
                    }
                    if state & QUEUED != 0 {
                        break;
                    }
                    match self.state.compare_exchange_weak(
                        state,
                        state | QUEUED,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => break,
                        Err(s) => state = s,
                    }
                }
                // SAFETY: the node is off every list (fresh, or popped and
                // re-armed) and stays in this frame until `wait` below has
                // seen it popped.
                unsafe {
                    if at_front {
                        q.push_front(waiter);
                    } else {
                        q.push_back(waiter);
                    }
                }
            }
            blocked = true;
            if waiter.wait() == HANDED_OFF {
                // The releaser kept `LOCKED` set for us; `wait`'s Acquire
                // load paired with its Release store of `HANDED_OFF`.
                self.policy.record(polls, blocked);
                return Ok(());
            }
            // Woken: compete again, and keep our turn if we lose.
            waiter.rearm();
            at_front = true;
        }
    }

    /// Releases the mutex.
    ///
    /// # Safety
    /// The caller holds the mutex (and gives up its guard).
    #[inline]
    pub(super) unsafe fn unlock(&self) {
        // SAFETY: the caller's contract.
        unsafe { self.release(false) }
    }

    /// The shared fast path of `unlock` and `unlock_fair`.
    ///
    /// # Safety
    /// As [`Mutex::unlock`].
    #[inline(always)]
    unsafe fn release(&self, fair: bool) {
        // Release: publishes the critical section to the next holder's
        // Acquire CAS. Fails exactly when `QUEUED` is set.
        if self
            .state
            .compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            // SAFETY: we hold the mutex (the caller's contract).
            unsafe { self.unlock_slow(fair) };
        }
    }

    /// Releases the mutex, handing it to the first waiter if there is one.
    ///
    /// # Safety
    /// As [`Mutex::unlock`].
    #[inline]
    unsafe fn unlock_fair(&self) {
        // SAFETY: the caller's contract.
        unsafe { self.release(true) }
    }

    /// The unlock path with waiters: wake one, or hand it the mutex
    /// (`fair`).
    ///
    /// # Safety
    /// As [`Mutex::unlock`].
    #[cold]
    #[inline(never)]
    unsafe fn unlock_slow(&self, fair: bool) {
        let mut q = self.queue.lock();
        let first = q.pop_front();
        let left = if q.is_empty() { 0 } else { QUEUED };
        // Plain stores below, not RMWs: `LOCKED` is set and we hold the
        // queue lock, so no one else writes the word (module invariants).
        match first {
            Some(node) if fair => {
                // Keep `LOCKED` for the waiter. Relaxed: the new holder is
                // synchronized by the Release store in `Waiter::wake`, and
                // the next enqueuer by the queue lock.
                self.state.store(LOCKED | left, Ordering::Relaxed);
                drop(q);
                // SAFETY: popped just now, under the queue lock; woken once.
                unsafe { Waiter::wake(node, HANDED_OFF) };
            }
            Some(node) => {
                // Release: as in `unlock`, for whoever takes the mutex next
                // (the woken waiter, a spinner, or a thread barging in).
                self.state.store(left, Ordering::Release);
                drop(q);
                // SAFETY: popped just now, under the queue lock; woken once.
                unsafe { Waiter::wake(node, WOKEN) };
            }
            None => {
                // Unreachable by the invariants (`QUEUED` set with an empty
                // queue), but freeing the mutex is the right answer anyway.
                // Release: as in `unlock`.
                self.state.store(0, Ordering::Release);
            }
        }
    }
}

/// Panics with the message of `e` (kept out of line, cold).
#[cold]
#[inline(never)]
#[track_caller]
pub(super) fn not_in_runtime(e: NotInRuntime) -> ! {
    panic!("{e}")
}

impl<T: Default, P: SpinPolicy + Default> Default for Mutex<T, P> {
    fn default() -> Self {
        Mutex::with_policy(T::default(), P::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(value: T) -> Self {
        Mutex::new(value)
    }
}

impl<T: ?Sized + fmt::Debug, P: SpinPolicy> fmt::Debug for Mutex<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Some(g) => d.field("data", &&*g),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish_non_exhaustive()
    }
}

/// Holds a [`Mutex`] until dropped; dereferences to the protected value.
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MutexGuard<'a, T: ?Sized, P: SpinPolicy = FixedSpin> {
    mutex: &'a Mutex<T, P>,
    /// Makes the guard `Sync` only if `T: Sync` (it hands out `&T`); the
    /// reference above alone would make it `Sync` whenever `T: Send`.
    _marker: PhantomData<&'a mut T>,
}

impl<'a, T: ?Sized, P: SpinPolicy> MutexGuard<'a, T, P> {
    #[inline(always)]
    fn new(mutex: &'a Mutex<T, P>) -> Self {
        MutexGuard {
            mutex,
            _marker: PhantomData,
        }
    }

    /// The mutex this guard holds (for [`Condvar`](super::Condvar)).
    #[inline(always)]
    pub(super) fn mutex(this: &Self) -> &'a Mutex<T, P> {
        this.mutex
    }

    /// Unlocks, handing the mutex directly to the first waiting thread
    /// (if any) instead of letting it compete: strict FIFO order, at the
    /// price of a switch per hand-off (no thread can take the lock until
    /// the new owner runs).
    #[inline]
    pub fn unlock_fair(this: Self) {
        let m = this.mutex;
        std::mem::forget(this);
        // SAFETY: the guard proved we hold the mutex, and it is forgotten
        // so it will not unlock again.
        unsafe { m.unlock_fair() };
    }
}

impl<T: ?Sized, P: SpinPolicy> Deref for MutexGuard<'_, T, P> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the mutex: no other reference to the
        // value exists.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T: ?Sized, P: SpinPolicy> DerefMut for MutexGuard<'_, T, P> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only one.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T: ?Sized, P: SpinPolicy> Drop for MutexGuard<'_, T, P> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard holds the mutex and this is its only unlock.
        unsafe { self.mutex.unlock() };
    }
}

impl<T: ?Sized + fmt::Debug, P: SpinPolicy> fmt::Debug for MutexGuard<'_, T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display, P: SpinPolicy> fmt::Display for MutexGuard<'_, T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}
