//! Replace mode's mutex entry points: lock, trylock, timed lock, unlock
//! and destroy of a mutex, each `None` where the mutex is glibc's.

use std::ffi::c_int;
use std::sync::atomic::Ordering;

use super::mark::{mark_of, replaced, words};
use super::mode::Mode;
use super::replaced::Replaced;
use super::wait::{acquire, release, timed_acquire};

/// Replace-mode `pthread_mutex_destroy` of a marked mutex: `EBUSY` if it
/// is held (as glibc answers), else the mark is cleared and glibc
/// destroys the memory (`None`: glibc's alone).
pub(crate) fn destroy(mode: &Mode, m: *mut libc::pthread_mutex_t) -> Option<c_int> {
    let addr = m as usize;
    let (mark, ptr) = words(m);
    // Acquire: as in `replaced`.
    if mark.load(Ordering::Acquire) != mark_of(addr) {
        return None;
    }
    // SAFETY: as in `replaced`.
    let r = unsafe { &*(ptr.load(Ordering::Relaxed) as *const Replaced) };
    // SAFETY: the lock object is the algorithm's own.
    if !unsafe { (mode.algo.try_lock)(r.lock) } {
        return Some(libc::EBUSY);
    }
    release(mode, r);
    // Relaxed: a program that uses a mutex it destroyed races anyway.
    mark.store(0, Ordering::Relaxed);
    None
}

/// Replace-mode lock; `None`: left to glibc.
#[inline]
pub(crate) fn lock(mode: &Mode, m: *mut libc::pthread_mutex_t) -> Option<c_int> {
    let r = replaced(mode, m)?;
    acquire(mode, r);
    Some(0)
}

/// Replace-mode trylock.
#[inline]
pub(crate) fn try_lock(mode: &Mode, m: *mut libc::pthread_mutex_t) -> Option<c_int> {
    let r = replaced(mode, m)?;
    // SAFETY: as in `lock`.
    Some(if unsafe { (mode.algo.try_lock)(r.lock) } {
        0
    } else {
        libc::EBUSY
    })
}

/// Replace-mode unlock.
#[inline]
pub(crate) fn unlock(mode: &Mode, m: *mut libc::pthread_mutex_t) -> Option<c_int> {
    let r = replaced(mode, m)?;
    release(mode, r);
    Some(0)
}

/// Replace-mode timed lock: `clock` is `CLOCK_REALTIME`
/// (`pthread_mutex_timedlock`) or the caller's (`_clocklock`), `abstime`
/// an absolute time on it. Answers as glibc: `EINVAL` for another clock,
/// or, when the lock is not free at once, for a bad `abstime`.
pub(crate) fn timed_lock(
    mode: &Mode,
    m: *mut libc::pthread_mutex_t,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
) -> Option<c_int> {
    let r = replaced(mode, m)?;
    if clock != libc::CLOCK_REALTIME && clock != libc::CLOCK_MONOTONIC {
        return Some(libc::EINVAL);
    }
    // SAFETY: the lock object is the algorithm's own.
    if unsafe { (mode.algo.try_lock)(r.lock) } {
        return Some(0);
    }
    if abstime.is_null() {
        return Some(libc::EINVAL);
    }
    // SAFETY: the caller's timespec.
    let deadline = unsafe { *abstime };
    if deadline.tv_nsec < 0 || deadline.tv_nsec >= 1_000_000_000 {
        return Some(libc::EINVAL);
    }
    Some(timed_acquire(mode, r, clock, &deadline))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replace::algo::algorithm;
    use crate::replace::mode::Waiting;

    /// A mutex marked, then re-made by assignment of an initializer, has
    /// no mark, so the next call sees new memory; a held one is not
    /// destroyed.
    #[test]
    fn a_remade_mutex_is_new() {
        let a = algorithm("mcs").expect("mcs");
        let mode: &'static Mode = Box::leak(Box::new(Mode::new(a, Waiting::Polite)));
        let m: &'static mut libc::pthread_mutex_t =
            Box::leak(Box::new(libc::PTHREAD_MUTEX_INITIALIZER));
        let p: *mut libc::pthread_mutex_t = m;
        let r1 = replaced(mode, p).expect("a normal mutex is replaced") as *const Replaced;
        assert_eq!(words(p).0.load(Ordering::Relaxed), mark_of(p as usize));
        assert_eq!(mark_of(p as usize) & 1, 1, "marks are odd, busy words even");
        // SAFETY: `p` is this test's own mutex, not in use.
        unsafe { p.write(libc::PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP) };
        assert!(replaced(mode, p).is_none(), "a recursive one is glibc's");
        // SAFETY: as above.
        unsafe { p.write(libc::PTHREAD_MUTEX_INITIALIZER) };
        let r2 = replaced(mode, p).expect("normal again") as *const Replaced;
        assert_eq!(r1, r2, "the free lock at the address is reused");
        assert_eq!(lock(mode, p), Some(0));
        // Re-made while held: a fresh lock, not a hang.
        // SAFETY: as above.
        unsafe { p.write(libc::PTHREAD_MUTEX_INITIALIZER) };
        let r3 = replaced(mode, p).expect("normal") as *const Replaced;
        assert_ne!(r3, r1);
        assert_eq!(try_lock(mode, p), Some(0));
        assert_eq!(destroy(mode, p), Some(libc::EBUSY));
        assert_eq!(unlock(mode, p), Some(0));
        assert_eq!(destroy(mode, p), None, "then glibc's destroy");
        assert_eq!(words(p).0.load(Ordering::Relaxed), 0);
    }
}
