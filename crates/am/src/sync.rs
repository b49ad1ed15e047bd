//! The crate's view of the workspace's loom shim ([`symmetry_locks::sync`],
//! SPEC §1): every atomic of the queue protocol comes from there, and the
//! checked cell from here, so `RUSTFLAGS="--cfg loom" cargo test --release
//! -p symmetry-am --test loom` checks the claim and poll code that ships
//! (on heap-allocated queues instead of a shared segment).

/// The doorbell's fences under loom (see `bell.rs`).
#[cfg(loom)]
pub(crate) use symmetry_locks::sync::fence;
#[cfg_attr(loom, allow(unused_imports))] // AtomicU32: the segment header only
pub(crate) use symmetry_locks::sync::{AtomicU32, AtomicU64, Ordering};

/// One iteration of a busy-wait loop (a model-checker yield under loom),
/// and a run of them (a backoff delay).
#[cfg_attr(loom, allow(unused_imports))]
// spin waits outside the loom models (backoff, claim locks)
pub(crate) use symmetry_locks::sync::{delay, spin_hint};

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

    /// Runs `f` with a pointer for reading parts of the value.
    ///
    /// # Safety
    ///
    /// No write may run concurrently with `f`'s reads.
    #[inline(always)]
    pub(crate) unsafe fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        #[cfg(not(loom))]
        return f(self.0.get());
        #[cfg(loom)]
        return self.0.with(f);
    }

    /// Runs `f` with a pointer for writing parts of the value.
    ///
    /// # Safety
    ///
    /// No other access may run concurrently with `f`'s.
    #[inline(always)]
    pub(crate) unsafe fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(not(loom))]
        return f(self.0.get());
        #[cfg(loom)]
        return self.0.with_mut(f);
    }
}
