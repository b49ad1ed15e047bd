//! What the lock test binaries (`locks`, `preempt`, `oversubscribed`)
//! share: a lock and a plain counter it guards, with an overlap detector.

// Each binary uses part of it.
#![allow(dead_code)]

use std::cell::UnsafeCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use symmetry_locks::lock_api::RawMutex;

/// A lock and a plain (non-atomic) counter it guards, with a flag that
/// detects two contexts inside the critical section at once.
pub(crate) struct Guarded<R> {
    pub(crate) lock: R,
    value: UnsafeCell<u64>,
    inside: AtomicBool,
    /// Times a context found another inside.
    pub(crate) violations: AtomicUsize,
}

// SAFETY: `value` is only touched with `lock` held (that is what the
// tests check); the rest is atomic.
unsafe impl<R: Sync> Sync for Guarded<R> {}

impl<R: RawMutex> Guarded<R> {
    pub(crate) fn new() -> Self {
        Self {
            lock: R::INIT,
            value: UnsafeCell::new(0),
            inside: AtomicBool::new(false),
            violations: AtomicUsize::new(0),
        }
    }

    /// Read-modify-write of the counter with `work` spin hints and a
    /// `black_box` between the read and the write to widen the window a
    /// broken lock (or a preempted holder) would open. A violation is
    /// counted rather than panicked on, so that a broken lock fails the
    /// test instead of hanging the other threads.
    ///
    /// # Safety
    ///
    /// The caller holds `self.lock` (the test checks exactly that).
    pub(crate) unsafe fn bump(&self, work: u32) {
        // A swap reads the latest value in modification order whatever
        // the ordering, so of two holders inside at once the later one
        // always sees the earlier one's flag.
        if self.inside.swap(true, Ordering::Relaxed) {
            self.violations.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller holds the lock.
        let v = unsafe { *self.value.get() };
        for _ in 0..work {
            std::hint::spin_loop();
        }
        let v = black_box(v) + 1;
        // SAFETY: as above.
        unsafe { *self.value.get() = v };
        self.inside.store(false, Ordering::Relaxed);
    }

    /// Locks, bumps (with `work` spin hints inside), unlocks.
    pub(crate) fn locked_bump(&self, work: u32) {
        let guard = self.lock.lock();
        // SAFETY: we hold the lock.
        unsafe { self.bump(work) };
        // SAFETY: we hold the lock with this guard.
        unsafe { self.lock.unlock(guard) };
    }

    /// Tries to lock; bumps and unlocks on success.
    pub(crate) fn try_bump(&self) -> bool {
        match self.lock.try_lock() {
            Some(guard) => {
                // SAFETY: we hold the lock.
                unsafe { self.bump(0) };
                // SAFETY: we hold the lock with this guard.
                unsafe { self.lock.unlock(guard) };
                true
            }
            None => false,
        }
    }

    /// The counter, checking that mutual exclusion was never violated.
    pub(crate) fn count(&mut self, name: &str) -> u64 {
        assert_eq!(
            *self.violations.get_mut(),
            0,
            "{name}: two contexts were inside the critical section at once"
        );
        assert!(
            !self.lock.is_locked(),
            "{name}: lock still held after all guards were released"
        );
        *self.value.get_mut()
    }
}
