//! Baselines: other libraries' and the OS's mutexes behind the same
//! `lock_api::RawMutex` interface as the algorithms, so that every
//! comparison pays the same interface cost.
//!
//! * [`StdMutex`] wraps `std::sync::Mutex<()>` (a futex lock on Linux).
//!   std has no raw unlock, so the std guard is parked inside the wrapper
//!   while the lock is held: one extra pointer-sized store per acquisition.
//! * [`ParkingLot`] is `parking_lot::RawMutex` (spin a little, then park).
//! * [`Pthread`] is a default `pthread_mutex_t`.
//! * [`PthreadAdaptive`] is a `PTHREAD_MUTEX_ADAPTIVE_NP` mutex (glibc spins
//!   briefly before sleeping); on targets other than 64-bit glibc it is a
//!   default pthread mutex (documented by [`PthreadAdaptive::IS_ADAPTIVE`]).
//!
//! The baselines are not available under loom.

#[cfg(not(loom))]
mod imp {
    use core::cell::UnsafeCell;
    use core::fmt;
    use core::mem::MaybeUninit;

    /// `std::sync::Mutex<()>` as a raw lock.
    pub struct StdMutex {
        mutex: std::sync::Mutex<()>,
        /// The std guard while the lock is held; written and read only by
        /// the holder.
        held: UnsafeCell<MaybeUninit<std::sync::MutexGuard<'static, ()>>>,
    }

    impl StdMutex {
        /// A free lock.
        pub const fn new() -> Self {
            Self {
                mutex: std::sync::Mutex::new(()),
                held: UnsafeCell::new(MaybeUninit::uninit()),
            }
        }

        #[inline]
        fn park_guard(&self, guard: std::sync::MutexGuard<'_, ()>) -> lock_api::GuardNoSend {
            // SAFETY: the lifetime is extended to 'static only for storage:
            // the guard is dropped in `unlock`, while `self` is borrowed by
            // the caller's lock_api guard; if that guard is leaked, the std
            // guard is never dropped (MaybeUninit) and the mutex stays locked,
            // which is what leaking a guard means. Only the holder touches
            // `held`.
            unsafe {
                (*self.held.get()).write(core::mem::transmute::<
                    std::sync::MutexGuard<'_, ()>,
                    std::sync::MutexGuard<'static, ()>,
                >(guard));
            }
            lock_api::GuardNoSend::new()
        }
    }

    impl Default for StdMutex {
        fn default() -> Self {
            Self::new()
        }
    }

    impl fmt::Debug for StdMutex {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("StdMutex").finish_non_exhaustive()
        }
    }

    // SAFETY: `held` is only accessed by the thread holding `mutex`.
    unsafe impl Sync for StdMutex {}
    // SAFETY: a std mutex may move between threads when not borrowed.
    unsafe impl Send for StdMutex {}

    // SAFETY: mutual exclusion is std's; the guard is parked while held.
    unsafe impl lock_api::RawMutex for StdMutex {
        crate::raw_init!();
        type Guard = lock_api::GuardNoSend;

        #[inline]
        fn lock(&self) -> Self::Guard {
            // The () payload cannot be left inconsistent: ignore poisoning
            // (a panic in a lock_api critical section releases the lock
            // through `unlock` like any other exit, and std poisons it).
            let guard = self.mutex.lock().unwrap_or_else(|e| {
                self.mutex.clear_poison();
                e.into_inner()
            });
            self.park_guard(guard)
        }

        #[inline]
        fn try_lock(&self) -> Option<Self::Guard> {
            match self.mutex.try_lock() {
                Ok(guard) => Some(self.park_guard(guard)),
                Err(std::sync::TryLockError::Poisoned(e)) => {
                    // As in `lock`; cleared so later calls take the Ok path.
                    self.mutex.clear_poison();
                    Some(self.park_guard(e.into_inner()))
                }
                Err(std::sync::TryLockError::WouldBlock) => None,
            }
        }

        #[inline]
        unsafe fn unlock(&self, _guard: Self::Guard) {
            // SAFETY: the caller holds the lock, so `held` was written by
            // the matching `lock`/`try_lock` and not yet taken.
            drop(unsafe { (*self.held.get()).assume_init_read() });
        }

        #[inline]
        fn is_locked(&self) -> bool {
            // Held exactly when `try_lock` would fail. Poison is not a hold:
            // a poisoned, free mutex hands out its guard (`Poisoned`), which
            // is dropped here at once, as is the guard of `Ok`.
            matches!(
                self.mutex.try_lock(),
                Err(std::sync::TryLockError::WouldBlock)
            )
        }
    }

    /// `parking_lot::RawMutex`, re-exported under the registry's naming.
    pub type ParkingLot = parking_lot::RawMutex;

    /// A `pthread_mutex_t` of a given kind.
    pub struct PthreadLock<const ADAPTIVE: bool> {
        inner: UnsafeCell<libc::pthread_mutex_t>,
    }

    /// Default (`PTHREAD_MUTEX_NORMAL`-like) pthread mutex.
    pub type Pthread = PthreadLock<false>;
    /// glibc's adaptive pthread mutex (spins, then sleeps).
    pub type PthreadAdaptive = PthreadLock<true>;

    /// glibc x86_64/aarch64 layout: `__kind` is the fifth `int`.
    #[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
    const ADAPTIVE_INIT: libc::pthread_mutex_t = {
        const SIZE: usize = core::mem::size_of::<libc::pthread_mutex_t>();
        let mut bytes = [0u8; SIZE];
        let kind = libc::PTHREAD_MUTEX_ADAPTIVE_NP.to_ne_bytes();
        bytes[16] = kind[0];
        bytes[17] = kind[1];
        bytes[18] = kind[2];
        bytes[19] = kind[3];
        // SAFETY: pthread_mutex_t is plain bytes; this is glibc's
        // PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP.
        unsafe { core::mem::transmute::<[u8; SIZE], libc::pthread_mutex_t>(bytes) }
    };
    #[cfg(not(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64")))]
    const ADAPTIVE_INIT: libc::pthread_mutex_t = libc::PTHREAD_MUTEX_INITIALIZER;

    impl<const ADAPTIVE: bool> PthreadLock<ADAPTIVE> {
        /// Whether this build really uses the adaptive kind.
        pub const IS_ADAPTIVE: bool = ADAPTIVE
            && cfg!(all(
                target_os = "linux",
                target_env = "gnu",
                target_pointer_width = "64"
            ));

        /// A free lock.
        pub const fn new() -> Self {
            let init = if ADAPTIVE {
                ADAPTIVE_INIT
            } else {
                libc::PTHREAD_MUTEX_INITIALIZER
            };
            Self {
                inner: UnsafeCell::new(init),
            }
        }
    }

    impl<const ADAPTIVE: bool> Default for PthreadLock<ADAPTIVE> {
        fn default() -> Self {
            Self::new()
        }
    }

    impl<const ADAPTIVE: bool> fmt::Debug for PthreadLock<ADAPTIVE> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("PthreadLock")
                .field("adaptive", &Self::IS_ADAPTIVE)
                .finish_non_exhaustive()
        }
    }

    // SAFETY: pthread mutexes are made to be shared between threads.
    unsafe impl<const A: bool> Sync for PthreadLock<A> {}
    // SAFETY: an unlocked, statically initialised glibc mutex is plain data.
    unsafe impl<const A: bool> Send for PthreadLock<A> {}

    // SAFETY: mutual exclusion is the C library's; the memory orderings of
    // pthread_mutex_lock/unlock are acquire/release.
    unsafe impl<const A: bool> lock_api::RawMutex for PthreadLock<A> {
        crate::raw_init!();
        type Guard = lock_api::GuardNoSend;

        #[inline]
        fn lock(&self) -> Self::Guard {
            // SAFETY: a valid, initialised mutex that does not move while
            // borrowed. Errors (EDEADLK, EINVAL) cannot occur for these kinds.
            let rc = unsafe { libc::pthread_mutex_lock(self.inner.get()) };
            debug_assert_eq!(rc, 0);
            lock_api::GuardNoSend::new()
        }

        #[inline]
        fn try_lock(&self) -> Option<Self::Guard> {
            // SAFETY: as in `lock`.
            (unsafe { libc::pthread_mutex_trylock(self.inner.get()) } == 0)
                .then(lock_api::GuardNoSend::new)
        }

        #[inline]
        unsafe fn unlock(&self, _guard: Self::Guard) {
            // SAFETY: the caller holds the lock on this thread.
            let rc = unsafe { libc::pthread_mutex_unlock(self.inner.get()) };
            debug_assert_eq!(rc, 0);
        }

        #[inline]
        fn is_locked(&self) -> bool {
            // SAFETY: as in `lock`.
            if unsafe { libc::pthread_mutex_trylock(self.inner.get()) } == 0 {
                // SAFETY: we just took it.
                unsafe { libc::pthread_mutex_unlock(self.inner.get()) };
                false
            } else {
                true
            }
        }
    }

    impl<const A: bool> Drop for PthreadLock<A> {
        fn drop(&mut self) {
            // SAFETY: `&mut self`: nobody holds a reference; destroying a
            // locked default/adaptive glibc mutex is harmless (it is memory).
            unsafe { libc::pthread_mutex_destroy(self.inner.get()) };
        }
    }
}

#[cfg(not(loom))]
pub use imp::{ParkingLot, Pthread, PthreadAdaptive, PthreadLock, StdMutex};
