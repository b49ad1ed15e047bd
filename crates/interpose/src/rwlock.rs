//! Reader-writer locks (`pthread_rwlock_*`) and spin locks
//! (`pthread_spin_*`) in profile mode.
//!
//! Each entry point (and glibc's old `__pthread_rwlock_*` aliases) is
//! profiled as a mutex is (see the crate docs): the real `try`
//! call first, and where it would wait, the real blocking call timed. A
//! reader-writer lock's read and write acquisitions are two entries
//! ([`LockKind::Read`], [`LockKind::Write`]) of one address; a spin
//! lock's waits never block (glibc spins on it), so its whole wait is the
//! spinning. `pthread_rwlock_unlock` and `pthread_spin_unlock` end a
//! timed hold and record the thread's pending wait; `init` and `destroy`
//! forget the address's entries.
//!
//! Replace mode does not touch them: every call goes to glibc unchanged
//! (the registry's locks are mutexes; a reader-writer lock run on one
//! would lose its readers' concurrency).
//!
//! A process-shared reader-writer or spin lock is not told apart (its
//! attribute lives in glibc's private layout): its waits are this
//! process's, as for a process-shared mutex.

use std::ffi::{CStr, c_int, c_void};
use std::sync::OnceLock;

use symmetry_locks::spin_then_block::profiler::LockKind;

use crate::profile::{self, Lock};
use crate::{next, next_opt, replace};

type Rw = libc::pthread_rwlock_t;
type Spin = libc::pthread_spinlock_t;
type RwFn = unsafe extern "C" fn(*mut Rw) -> c_int;
type RwTimedFn = unsafe extern "C" fn(*mut Rw, *const libc::timespec) -> c_int;
type RwClockFn = unsafe extern "C" fn(*mut Rw, libc::clockid_t, *const libc::timespec) -> c_int;
type RwInitFn = unsafe extern "C" fn(*mut Rw, *const libc::pthread_rwlockattr_t) -> c_int;
type SpinFn = unsafe extern "C" fn(*mut Spin) -> c_int;
type SpinInitFn = unsafe extern "C" fn(*mut Spin, c_int) -> c_int;

/// glibc's functions.
pub(crate) struct Real {
    rdlock: RwFn,
    wrlock: RwFn,
    tryrdlock: RwFn,
    trywrlock: RwFn,
    timedrdlock: RwTimedFn,
    timedwrlock: RwTimedFn,
    /// glibc 2.30 and later.
    clockrdlock: Option<RwClockFn>,
    /// glibc 2.30 and later.
    clockwrlock: Option<RwClockFn>,
    unlock: RwFn,
    init: RwInitFn,
    destroy: RwFn,
    spin_lock: SpinFn,
    spin_trylock: SpinFn,
    spin_unlock: SpinFn,
    spin_init: SpinInitFn,
    spin_destroy: SpinFn,
}

static REAL: OnceLock<Real> = OnceLock::new();

/// The function `name` of the next object, as type `F`.
///
/// # Safety
/// `F` is the function pointer type of glibc's function `name`.
unsafe fn f<F: Copy>(name: &CStr) -> F {
    let p = next(name);
    // SAFETY: the caller's contract; `p` is a non-null function address.
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
}

/// As [`f`], for functions newer than the oldest glibc supported.
///
/// # Safety
/// As [`f`].
unsafe fn f_opt<F: Copy>(name: &CStr) -> Option<F> {
    // SAFETY: as in `f`.
    next_opt(name).map(|p| unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
}

/// glibc's functions (resolved by the library's constructor).
pub(crate) fn real() -> &'static Real {
    // SAFETY: each name is glibc's function of the field's type.
    REAL.get_or_init(|| unsafe {
        Real {
            rdlock: f(c"pthread_rwlock_rdlock"),
            wrlock: f(c"pthread_rwlock_wrlock"),
            tryrdlock: f(c"pthread_rwlock_tryrdlock"),
            trywrlock: f(c"pthread_rwlock_trywrlock"),
            timedrdlock: f(c"pthread_rwlock_timedrdlock"),
            timedwrlock: f(c"pthread_rwlock_timedwrlock"),
            clockrdlock: f_opt(c"pthread_rwlock_clockrdlock"),
            clockwrlock: f_opt(c"pthread_rwlock_clockwrlock"),
            unlock: f(c"pthread_rwlock_unlock"),
            init: f(c"pthread_rwlock_init"),
            destroy: f(c"pthread_rwlock_destroy"),
            spin_lock: f(c"pthread_spin_lock"),
            spin_trylock: f(c"pthread_spin_trylock"),
            spin_unlock: f(c"pthread_spin_unlock"),
            spin_init: f(c"pthread_spin_init"),
            spin_destroy: f(c"pthread_spin_destroy"),
        }
    })
}

/// Whether profile mode records (replace mode leaves these locks alone,
/// and an inert library, [`crate::inert`], every lock).
#[inline]
fn profiling() -> bool {
    match crate::route() {
        crate::PROFILE => true,
        crate::PASS => false,
        // Not decided yet (or replace mode): ask.
        _ => !crate::inert() && replace::mode().is_none(),
    }
}

/// A profiled acquisition of `rw` as `kind`, `try_lock` first, then
/// `wait`.
#[inline]
fn rw_acquire(rw: *mut Rw, kind: LockKind, try_lock: RwFn, wait: impl FnOnce() -> c_int) -> c_int {
    if !profiling() {
        return wait();
    }
    // SAFETY: the caller's lock, to glibc's own `try` call.
    let try_ = || unsafe { try_lock(rw) };
    profile::acquire(Lock::at(rw as usize, kind), 0, try_, wait, || false)
}

/// Interposed `pthread_rwlock_rdlock`.
///
/// # Safety
/// As glibc's: `rw` is an initialized reader-writer lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_rdlock(rw: *mut Rw) -> c_int {
    let r = real();
    // SAFETY: the caller's argument, unchanged, to glibc.
    rw_acquire(rw, LockKind::Read, r.tryrdlock, || unsafe {
        (r.rdlock)(rw)
    })
}

/// Interposed `pthread_rwlock_wrlock`.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_wrlock(rw: *mut Rw) -> c_int {
    let r = real();
    // SAFETY: as above.
    rw_acquire(rw, LockKind::Write, r.trywrlock, || unsafe {
        (r.wrlock)(rw)
    })
}

/// Interposed `pthread_rwlock_timedrdlock`.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_timedrdlock(
    rw: *mut Rw,
    abstime: *const libc::timespec,
) -> c_int {
    let r = real();
    // SAFETY: as above.
    rw_acquire(rw, LockKind::Read, r.tryrdlock, || unsafe {
        (r.timedrdlock)(rw, abstime)
    })
}

/// Interposed `pthread_rwlock_timedwrlock`.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_timedwrlock(
    rw: *mut Rw,
    abstime: *const libc::timespec,
) -> c_int {
    let r = real();
    // SAFETY: as above.
    rw_acquire(rw, LockKind::Write, r.trywrlock, || unsafe {
        (r.timedwrlock)(rw, abstime)
    })
}

/// Interposed `pthread_rwlock_clockrdlock` (glibc 2.30).
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_clockrdlock(
    rw: *mut Rw,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
) -> c_int {
    let r = real();
    // A program that calls it was linked against a glibc that has it.
    let Some(g) = r.clockrdlock else {
        return libc::ENOSYS;
    };
    // SAFETY: as above.
    rw_acquire(rw, LockKind::Read, r.tryrdlock, || unsafe {
        g(rw, clock, abstime)
    })
}

/// Interposed `pthread_rwlock_clockwrlock` (glibc 2.30).
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_clockwrlock(
    rw: *mut Rw,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
) -> c_int {
    let r = real();
    let Some(g) = r.clockwrlock else {
        return libc::ENOSYS;
    };
    // SAFETY: as above.
    rw_acquire(rw, LockKind::Write, r.trywrlock, || unsafe {
        g(rw, clock, abstime)
    })
}

/// Interposed `pthread_rwlock_tryrdlock`: glibc's, counted when it
/// acquires.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_tryrdlock(rw: *mut Rw) -> c_int {
    // SAFETY: as above.
    let rc = unsafe { (real().tryrdlock)(rw) };
    if rc == 0 && profiling() {
        profile::acquired(Lock::at(rw as usize, LockKind::Read));
    }
    rc
}

/// Interposed `pthread_rwlock_trywrlock`: glibc's, counted when it
/// acquires.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_trywrlock(rw: *mut Rw) -> c_int {
    // SAFETY: as above.
    let rc = unsafe { (real().trywrlock)(rw) };
    if rc == 0 && profiling() {
        profile::acquired(Lock::at(rw as usize, LockKind::Write));
    }
    rc
}

/// Interposed `pthread_rwlock_unlock`: glibc's, then the thread's timed
/// hold and pending wait.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_unlock(rw: *mut Rw) -> c_int {
    // SAFETY: as above.
    let rc = unsafe { (real().unlock)(rw) };
    if profiling() {
        profile::released(rw as usize, None);
    }
    rc
}

/// Interposed `pthread_rwlock_init`: a lock at a reused address starts
/// without entries.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_init(
    rw: *mut Rw,
    attr: *const libc::pthread_rwlockattr_t,
) -> c_int {
    profile::forget(rw as usize, &[LockKind::Read, LockKind::Write]);
    // SAFETY: as above.
    unsafe { (real().init)(rw, attr) }
}

/// Interposed `pthread_rwlock_destroy`: the address loses its entries.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_destroy(rw: *mut Rw) -> c_int {
    profile::forget(rw as usize, &[LockKind::Read, LockKind::Write]);
    // SAFETY: as above.
    unsafe { (real().destroy)(rw) }
}

/// Interposed `__pthread_rwlock_rdlock`, glibc's old exported alias: as
/// `pthread_rwlock_rdlock`.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pthread_rwlock_rdlock(rw: *mut Rw) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { pthread_rwlock_rdlock(rw) }
}

/// Interposed `__pthread_rwlock_wrlock`, glibc's old exported alias: as
/// `pthread_rwlock_wrlock`.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pthread_rwlock_wrlock(rw: *mut Rw) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { pthread_rwlock_wrlock(rw) }
}

/// Interposed `__pthread_rwlock_tryrdlock`, glibc's old exported alias: as
/// `pthread_rwlock_tryrdlock`.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pthread_rwlock_tryrdlock(rw: *mut Rw) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { pthread_rwlock_tryrdlock(rw) }
}

/// Interposed `__pthread_rwlock_trywrlock`, glibc's old exported alias: as
/// `pthread_rwlock_trywrlock`.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pthread_rwlock_trywrlock(rw: *mut Rw) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { pthread_rwlock_trywrlock(rw) }
}

/// Interposed `__pthread_rwlock_unlock`, glibc's old exported alias: as
/// `pthread_rwlock_unlock`.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pthread_rwlock_unlock(rw: *mut Rw) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { pthread_rwlock_unlock(rw) }
}

/// Interposed `__pthread_rwlock_destroy`, glibc's old exported alias: as
/// `pthread_rwlock_destroy`.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pthread_rwlock_destroy(rw: *mut Rw) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { pthread_rwlock_destroy(rw) }
}

/// Interposed `__pthread_rwlock_init`, glibc's old exported alias: as
/// `pthread_rwlock_init`.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pthread_rwlock_init(
    rw: *mut Rw,
    attr: *const libc::pthread_rwlockattr_t,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { pthread_rwlock_init(rw, attr) }
}

/// Interposed `pthread_spin_lock`.
///
/// # Safety
/// As glibc's: `s` is an initialized spin lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_spin_lock(s: *mut Spin) -> c_int {
    let r = real();
    // SAFETY: the caller's argument, unchanged, to glibc.
    let wait = || unsafe { (r.spin_lock)(s) };
    if !profiling() {
        return wait();
    }
    // SAFETY: as above.
    let try_ = || unsafe { (r.spin_trylock)(s) };
    profile::acquire(Lock::at(s as usize, LockKind::Spin), 0, try_, wait, || {
        false
    })
}

/// Interposed `pthread_spin_trylock`: glibc's, counted when it acquires.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_spin_trylock(s: *mut Spin) -> c_int {
    // SAFETY: as above.
    // Counted at its unlock, as every spin lock acquisition.
    unsafe { (real().spin_trylock)(s) }
}

/// Interposed `pthread_spin_unlock`: glibc's, then the thread's timed
/// hold and pending wait.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_spin_unlock(s: *mut Spin) -> c_int {
    // SAFETY: as above.
    let rc = unsafe { (real().spin_unlock)(s) };
    if profiling() {
        profile::released(s as usize, Some(LockKind::Spin));
    }
    rc
}

/// Interposed `pthread_spin_init`: a lock at a reused address starts
/// without an entry.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_spin_init(s: *mut Spin, pshared: c_int) -> c_int {
    profile::forget(s as usize, &[LockKind::Spin]);
    // SAFETY: as above.
    unsafe { (real().spin_init)(s, pshared) }
}

/// Interposed `pthread_spin_destroy`: the address loses its entry.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_spin_destroy(s: *mut Spin) -> c_int {
    profile::forget(s as usize, &[LockKind::Spin]);
    // SAFETY: as above.
    unsafe { (real().spin_destroy)(s) }
}
