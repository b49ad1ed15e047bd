//! Replace mode's condition-variable entry points: a wait on a replaced
//! mutex waits in glibc on the mutex's inner glibc mutex, and a signal
//! takes that inner mutex ([`replace`](super)'s docs, "Condition
//! variables").

use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::atomic::Ordering;

use super::kind::{Note, note};
use super::mark::replaced;
use super::mode::Mode;
use super::replaced::Replaced;
use super::wait::{acquire, release};

/// The glibc mutex around condition waits whose condition did not fit in
/// the table: shared by all of them (`replace`'s docs).
struct Overflow(UnsafeCell<libc::pthread_mutex_t>);
// SAFETY: a glibc mutex, made to be shared between threads.
unsafe impl Sync for Overflow {}
static OVERFLOW: Overflow = Overflow(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
/// Whether some condition wait used [`OVERFLOW`].
static CONDS_FULL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Replace-mode condition wait (`replace`'s docs); `wait` is the real
/// `pthread_cond_wait`, `_timedwait` or `_clockwait` on the inner mutex.
pub(crate) fn cond_wait(
    mode: &Mode,
    c: *mut libc::pthread_cond_t,
    m: *mut libc::pthread_mutex_t,
    wait: impl FnOnce(*mut libc::pthread_mutex_t) -> c_int,
) -> Option<c_int> {
    let r = replaced(mode, m)?;
    let inner = if mode
        .conds
        .set(c as usize, (r as *const Replaced).cast_mut())
    {
        r.inner.get()
    } else {
        note(Note::CondsFull);
        // Relaxed: a signaller that changed the predicate did it under
        // `m`, which this thread releases only below.
        CONDS_FULL.store(true, Ordering::Relaxed);
        OVERFLOW.0.get()
    };
    let real = crate::real();
    // SAFETY: `inner` is a normal glibc mutex; the algorithm lock is held
    // by the caller (POSIX).
    unsafe {
        (real.lock)(inner);
        release(mode, r);
        let rc = wait(inner);
        (real.unlock)(inner);
        acquire(mode, r);
        Some(rc)
    }
}

/// Replace-mode signal or broadcast: the real call, inside the inner mutex
/// of the condition's mutex if a waiter recorded one.
pub(crate) fn cond_signal(
    mode: &Mode,
    c: *mut libc::pthread_cond_t,
    signal: impl FnOnce() -> c_int,
) -> c_int {
    let inner = match mode.conds.get(c as usize) {
        // SAFETY: a leaked `Replaced` recorded by a waiter.
        Some(r) => unsafe { (*r).inner.get() },
        // Relaxed: see `cond_wait`.
        None if CONDS_FULL.load(Ordering::Relaxed) => OVERFLOW.0.get(),
        None => return signal(),
    };
    let real = crate::real();
    // SAFETY: the inner mutex is a normal glibc mutex.
    unsafe {
        (real.lock)(inner);
        let rc = signal();
        (real.unlock)(inner);
        rc
    }
}
