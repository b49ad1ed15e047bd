//! `AtomicInt` (PRESTO §3.2): an integer whose every operation runs under a
//! lock, in the two forms PRESTO compared.
//!
//! * [`AtomicInt<R>`] is generic over the lock: lock and unlock inline into
//!   the operation (PRESTO's "HP-Base", the lock class as its own base).
//! * [`AtomicIntDyn`] reaches its lock through a `dyn` [`DynLock`]: every
//!   operation pays two virtual calls (PRESTO's "HP-Derived", with `lock`
//!   and `unlock` virtual in the base class).
//!
//! Both sit beside plain hardware `fetch_add` in `presto-atomic-int`.

use core::cell::UnsafeCell;
use core::fmt;

use lock_api::RawMutex;

use crate::registry::GuardWord;

/// An integer protected by a lock of type `R`, with inlined lock calls.
pub struct AtomicInt<R: RawMutex> {
    lock: R,
    value: UnsafeCell<i64>,
}

// SAFETY: `value` is only accessed with `lock` held.
unsafe impl<R: RawMutex + Sync> Sync for AtomicInt<R> {}
// SAFETY: moving the integer and its (unheld) lock is fine if the lock is Send.
unsafe impl<R: RawMutex + Send> Send for AtomicInt<R> {}

impl<R: RawMutex> AtomicInt<R> {
    /// A new integer; `lock` is normally `R::INIT`.
    pub const fn with_lock(lock: R, value: i64) -> Self {
        Self {
            lock,
            value: UnsafeCell::new(value),
        }
    }

    /// A new integer with a fresh lock.
    #[cfg(not(loom))]
    pub const fn new(value: i64) -> Self {
        Self::with_lock(R::INIT, value)
    }

    /// Runs `f` on the value under the lock.
    #[inline]
    pub fn update<T>(&self, f: impl FnOnce(&mut i64) -> T) -> T {
        let guard = self.lock.lock();
        // SAFETY: the lock is held.
        let out = f(unsafe { &mut *self.value.get() });
        // SAFETY: we hold the lock with this guard.
        unsafe { self.lock.unlock(guard) };
        out
    }

    /// Adds `delta`, returning the previous value.
    #[inline]
    pub fn fetch_add(&self, delta: i64) -> i64 {
        self.update(|v| {
            let old = *v;
            *v = old.wrapping_add(delta);
            old
        })
    }

    /// The current value.
    #[inline]
    pub fn get(&self) -> i64 {
        self.update(|v| *v)
    }

    /// Replaces the value.
    #[inline]
    pub fn set(&self, value: i64) {
        self.update(|v| *v = value)
    }
}

impl<R: RawMutex> fmt::Debug for AtomicInt<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AtomicInt")
            .field("value", &self.get())
            .finish()
    }
}

/// A lock driven through virtual calls: what a C++ base class with virtual
/// `lock`/`unlock` gives (PRESTO's HP_AtomicInt derived from AtomicInt).
pub trait DynLock: Send + Sync {
    /// Acquires the lock; the returned word is its guard state.
    fn lock_dyn(&self) -> usize;
    /// Releases the lock.
    ///
    /// # Safety
    ///
    /// `guard` must come from `lock_dyn` on this lock, which must be held.
    unsafe fn unlock_dyn(&self, guard: usize);
}

impl<R> DynLock for R
where
    R: RawMutex + Send + Sync,
    R::Guard: GuardWord,
{
    fn lock_dyn(&self) -> usize {
        self.lock().into_word()
    }

    unsafe fn unlock_dyn(&self, guard: usize) {
        // SAFETY: caller's contract; the word round-trips the guard state.
        unsafe { self.unlock(R::Guard::from_word(guard)) }
    }
}

/// An integer protected by a lock reached through `dyn DynLock`.
pub struct AtomicIntDyn {
    lock: Box<dyn DynLock>,
    value: UnsafeCell<i64>,
}

// SAFETY: `value` is only accessed with `lock` held; `DynLock: Send + Sync`.
unsafe impl Sync for AtomicIntDyn {}
// SAFETY: as above.
unsafe impl Send for AtomicIntDyn {}

impl AtomicIntDyn {
    /// A new integer guarded by `lock`.
    pub fn new(lock: Box<dyn DynLock>, value: i64) -> Self {
        Self {
            lock,
            value: UnsafeCell::new(value),
        }
    }

    /// Adds `delta`, returning the previous value.
    #[inline]
    pub fn fetch_add(&self, delta: i64) -> i64 {
        let guard = self.lock.lock_dyn();
        // SAFETY: the lock is held.
        let v = unsafe { &mut *self.value.get() };
        let old = *v;
        *v = old.wrapping_add(delta);
        // SAFETY: we hold the lock with this guard.
        unsafe { self.lock.unlock_dyn(guard) };
        old
    }

    /// The current value.
    pub fn get(&self) -> i64 {
        let guard = self.lock.lock_dyn();
        // SAFETY: the lock is held.
        let v = unsafe { *self.value.get() };
        // SAFETY: we hold the lock with this guard.
        unsafe { self.lock.unlock_dyn(guard) };
        v
    }
}

impl fmt::Debug for AtomicIntDyn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AtomicIntDyn")
            .field("value", &self.get())
            .finish()
    }
}
