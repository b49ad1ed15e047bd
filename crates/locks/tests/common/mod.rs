//! What the scheduler tests (`preempt`, `oversubscribed`) share: a lock
//! and a plain counter it guards, with an overlap detector.

use std::cell::UnsafeCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use symmetry_locks::lock_api::RawMutex;

/// A lock and a plain counter it guards, with an overlap detector.
pub(crate) struct Guarded<R> {
    pub(crate) lock: R,
    pub(crate) value: UnsafeCell<u64>,
    inside: AtomicBool,
    pub(crate) overlaps: AtomicU64,
}

// SAFETY: `value` is touched only with `lock` held (what the tests check).
unsafe impl<R: Sync> Sync for Guarded<R> {}

impl<R: RawMutex> Guarded<R> {
    pub(crate) fn new() -> Self {
        Self {
            lock: R::INIT,
            value: UnsafeCell::new(0),
            inside: AtomicBool::new(false),
            overlaps: AtomicU64::new(0),
        }
    }

    /// Locks, bumps the counter with `work` spin hints between its read and
    /// its write, runs `also` (still inside), unlocks.
    pub(crate) fn bump(&self, work: u32, also: impl FnOnce()) {
        let g = self.lock.lock();
        if self.inside.swap(true, Ordering::Relaxed) {
            self.overlaps.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: we hold the lock.
        let v = unsafe { *self.value.get() };
        for _ in 0..work {
            std::hint::spin_loop();
        }
        // SAFETY: as above.
        unsafe { *self.value.get() = black_box(v) + 1 };
        also();
        self.inside.store(false, Ordering::Relaxed);
        // SAFETY: held with `g`, on this thread.
        unsafe { self.lock.unlock(g) };
    }
}
