//! `pthread`: LC98 Fig. 2 under a POSIX mutex shared between processes
//! (LC98's "Posix Mutex", the operating-system-supported lock).
//!
//! The mutex is `PTHREAD_PROCESS_SHARED` and `PTHREAD_MUTEX_ROBUST`: like
//! the Solaris mutexes of the paper it is "implicitly reclaimed after
//! abnormal termination". When the holder dies inside the critical section
//! the next `lock` gets `EOWNERDEAD`, marks the mutex consistent and counts
//! it (`owner_died`). The Fig. 2 critical section stores the packet's
//! CLAIMED word before advancing the tail, so a holder killed between the
//! two leaves a CLAIMED packet with a dead owner (which the receiver
//! recovers) and an unadvanced tail (which the next claimer waits on until
//! then): the queue stays consistent.

use core::cell::UnsafeCell;

use super::lock::Holder;
use super::locked::{Locked, ShmLock};
use crate::sync::{AtomicU64, Ordering};

/// A robust, process-shared `pthread_mutex_t`.
#[repr(C)]
pub struct PthreadShm {
    mutex: UnsafeCell<libc::pthread_mutex_t>,
    /// How many times a holder died with the mutex held.
    owner_died: AtomicU64,
}

impl core::fmt::Debug for PthreadShm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PthreadShm")
            .field("owner_died", &self.owner_died.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

// SAFETY: the pthread mutex is designed for concurrent use from many
// threads and processes; `owner_died` is atomic.
unsafe impl Send for PthreadShm {}
// SAFETY: as above.
unsafe impl Sync for PthreadShm {}

impl PthreadShm {
    /// How many holders died with the mutex held (recovered by `lock`).
    pub fn owner_died(&self) -> u64 {
        self.owner_died.load(Ordering::Relaxed)
    }
}

// SAFETY: pthread mutexes exclude across processes when initialized
// PTHREAD_PROCESS_SHARED, and lock/unlock are Acquire/Release.
unsafe impl ShmLock for PthreadShm {
    const NAME: &'static str = "pthread";
    type Guard = ();

    unsafe fn init(at: *mut Self) {
        // SAFETY: `at` is valid for writes (caller); attr is initialized by
        // pthread_mutexattr_init before use and destroyed after.
        unsafe {
            (&raw mut (*at).owner_died).write(AtomicU64::new(0));
            let mut attr = core::mem::MaybeUninit::<libc::pthread_mutexattr_t>::uninit();
            let rc = libc::pthread_mutexattr_init(attr.as_mut_ptr());
            assert_eq!(rc, 0, "pthread_mutexattr_init");
            let rc =
                libc::pthread_mutexattr_setpshared(attr.as_mut_ptr(), libc::PTHREAD_PROCESS_SHARED);
            assert_eq!(rc, 0, "pthread_mutexattr_setpshared");
            let rc =
                libc::pthread_mutexattr_setrobust(attr.as_mut_ptr(), libc::PTHREAD_MUTEX_ROBUST);
            assert_eq!(rc, 0, "pthread_mutexattr_setrobust");
            let rc = libc::pthread_mutex_init(
                UnsafeCell::raw_get(&raw const (*at).mutex),
                attr.as_ptr(),
            );
            assert_eq!(rc, 0, "pthread_mutex_init");
            libc::pthread_mutexattr_destroy(attr.as_mut_ptr());
        }
    }

    #[inline]
    fn lock(&self, _me: Holder) {
        // SAFETY: the mutex was initialized by `init` and is never moved
        // (it lives in the shared segment).
        let rc = unsafe { libc::pthread_mutex_lock(self.mutex.get()) };
        if rc != 0 {
            self.lock_failed(rc);
        }
    }

    #[inline]
    unsafe fn unlock(&self, (): ()) {
        // SAFETY: we hold the mutex (caller's contract).
        unsafe { libc::pthread_mutex_unlock(self.mutex.get()) };
    }
}

impl PthreadShm {
    #[cold]
    #[inline(never)]
    fn lock_failed(&self, rc: i32) {
        if rc == libc::EOWNERDEAD {
            // We hold the mutex; the protected tail is consistent (module
            // docs), so mark it usable again.
            // SAFETY: we hold the mutex after EOWNERDEAD.
            unsafe { libc::pthread_mutex_consistent(self.mutex.get()) };
            self.owner_died.fetch_add(1, Ordering::Relaxed);
        } else {
            // EINVAL/EDEADLK/ENOTRECOVERABLE: a corrupted segment; nothing
            // sensible can continue.
            panic!(
                "pthread_mutex_lock failed: {}",
                std::io::Error::from_raw_os_error(rc)
            );
        }
    }
}

/// `pthread`.
pub type PthreadClaim = Locked<PthreadShm>;
