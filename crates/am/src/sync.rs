//! The loom shim of the crate (SPEC §1): every atomic and cell of the
//! queue protocol comes from here, so `RUSTFLAGS="--cfg loom" cargo test
//! --release -p symmetry-am --test loom` checks the claim and poll code
//! that ships (on heap-allocated queues instead of a shared segment).

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicU32, AtomicU64};
#[cfg(loom)]
#[allow(unused_imports)] // AtomicU32 is used by the segment header only
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64};

pub(crate) use core::sync::atomic::Ordering;

/// One iteration of a busy-wait loop (a model-checker yield under loom).
#[cfg_attr(loom, allow(dead_code))] // used by the endpoint's backoff only
#[inline(always)]
pub(crate) fn spin_hint() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// An `UnsafeCell` whose accesses loom checks for data races.
#[derive(Debug)]
pub(crate) struct Cell<T>(
    #[cfg(not(loom))] core::cell::UnsafeCell<T>,
    #[cfg(loom)] loom::cell::UnsafeCell<T>,
);

impl<T> Cell<T> {
    pub(crate) fn new(v: T) -> Self {
        #[cfg(not(loom))]
        return Self(core::cell::UnsafeCell::new(v));
        #[cfg(loom)]
        return Self(loom::cell::UnsafeCell::new(v));
    }

    /// Reads the value.
    ///
    /// # Safety
    ///
    /// No write may run concurrently (the handshake state says who owns it).
    #[inline(always)]
    pub(crate) unsafe fn read(&self) -> T
    where
        T: Copy,
    {
        #[cfg(not(loom))]
        // SAFETY: forwarded caller's contract.
        return unsafe { *self.0.get() };
        #[cfg(loom)]
        // SAFETY: forwarded caller's contract.
        return self.0.with(|p| unsafe { *p });
    }

    /// Writes the value.
    ///
    /// # Safety
    ///
    /// No other access may run concurrently.
    #[inline(always)]
    pub(crate) unsafe fn write(&self, v: T) {
        #[cfg(not(loom))]
        // SAFETY: forwarded caller's contract.
        unsafe {
            *self.0.get() = v;
        }
        #[cfg(loom)]
        // SAFETY: forwarded caller's contract.
        self.0.with_mut(|p| unsafe { *p = v });
    }
}
