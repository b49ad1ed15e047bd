//! A replaced mutex: the algorithm's lock object, the futex its polite
//! waiters sleep on, and the glibc mutex its condition waits use.

use std::cell::UnsafeCell;
use std::sync::atomic::AtomicU32;

use super::algo::Algo;

/// A replaced mutex.
pub(super) struct Replaced {
    /// The algorithm's lock object.
    pub(super) lock: *mut (),
    /// Polite waiters asleep or about to sleep on `seq` ([`Waiting`](super::Waiting)).
    pub(super) parked: AtomicU32,
    /// The futex word polite waiters sleep on; bumped by each wake.
    pub(super) seq: AtomicU32,
    /// A glibc mutex used only around condition waits (`replace`'s docs).
    pub(super) inner: UnsafeCell<libc::pthread_mutex_t>,
}

impl Replaced {
    /// A new replaced mutex on a new lock object of `algo`, leaked (never
    /// freed: a mutex's memory may be re-made while a thread still reads
    /// its words).
    pub(super) fn fresh(algo: &Algo) -> *mut Replaced {
        let r = Box::new(Replaced {
            lock: (algo.new)(),
            parked: AtomicU32::new(0),
            seq: AtomicU32::new(0),
            inner: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
        });
        Box::into_raw(r)
    }
}

// SAFETY: `Replaced` is shared between threads only through its lock
// algorithm and the inner glibc mutex, both made for that.
unsafe impl Sync for Replaced {}
