//! How a replaced mutex's lock is taken and released: the algorithm's own
//! `lock` ([`Waiting::Pure`]), polite polling then a futex sleep
//! ([`Waiting::Polite`]), and the same with a deadline.

use std::ffi::c_int;
use std::sync::atomic::{Ordering, fence};

use symmetry_locks::backoff::ExpBackoff;
use symmetry_locks::spin_then_block::{Blocker, Futex};

use super::mode::{Mode, Waiting};
use super::replaced::Replaced;

/// Takes `r`'s algorithm lock with the mode's [`Waiting`] policy.
#[inline]
pub(super) fn acquire(mode: &Mode, r: &Replaced) {
    match mode.waiting {
        // SAFETY: the lock object is the algorithm's own.
        Waiting::Pure => unsafe { (mode.algo.lock)(r.lock) },
        Waiting::Polite => {
            // SAFETY: as above.
            if !unsafe { (mode.algo.try_lock)(r.lock) } {
                acquire_politely(mode, r);
            }
        }
    }
}

/// [`Waiting::Polite`]'s contended path: poll `try_lock` with exponential
/// backoff for about C spins, then sleep until an unlock wakes us.
///
/// No wake-up is lost: a sleeper announces itself in `parked` and then
/// (SeqCst fence) tries the lock; [`release`] unlocks and then (SeqCst
/// fence) reads `parked`. Of two fenced store-then-load sequences at
/// least one sees the other's store: either the sleeper's `try_lock` sees
/// the unlock, or the releaser sees the sleeper and bumps `seq` before its
/// wake, so the sleeper's `FUTEX_WAIT` on the `seq` it read before trying
/// returns at once or is woken.
#[cold]
fn acquire_politely(mode: &Mode, r: &Replaced) {
    let mut backoff = ExpBackoff::new(16, 1024);
    let mut spent = 0u32;
    while spent < mode.budget {
        spent = spent.saturating_add(backoff.limit());
        backoff.wait();
        // SAFETY: the lock object is the algorithm's own.
        if unsafe { (mode.algo.try_lock)(r.lock) } {
            return;
        }
    }
    loop {
        // Relaxed: the fence below orders it before the try.
        r.parked.fetch_add(1, Ordering::Relaxed);
        // Relaxed: a stale `seq` only makes the wait return at once.
        let seen = r.seq.load(Ordering::Relaxed);
        // SeqCst: pairs with the fence in `release` (doc comment above).
        fence(Ordering::SeqCst);
        // SAFETY: as above.
        let got = unsafe { (mode.algo.try_lock)(r.lock) };
        if !got {
            Futex::wait(&(), &r.seq, seen);
        }
        // Relaxed: only a count of sleepers; an extra wake is harmless.
        r.parked.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: as above.
        if got || unsafe { (mode.algo.try_lock)(r.lock) } {
            return;
        }
    }
}

/// Releases `r`'s algorithm lock, waking a polite sleeper if any.
#[inline]
pub(super) fn release(mode: &Mode, r: &Replaced) {
    // SAFETY: the caller holds the lock (POSIX makes the unlocker the
    // holder; the condition wait releases what its caller holds).
    unsafe { (mode.algo.unlock)(r.lock) };
    if mode.waiting == Waiting::Polite {
        // SeqCst: pairs with the fence in `acquire_politely`.
        fence(Ordering::SeqCst);
        if r.parked.load(Ordering::Relaxed) != 0 {
            wake(r);
        }
    }
}

#[cold]
fn wake(r: &Replaced) {
    // Relaxed: the futex call orders the word with the sleeper's check.
    r.seq.fetch_add(1, Ordering::Relaxed);
    Futex::wake_one(&(), &r.seq);
}

/// Whether `clock` has reached `deadline`.
fn passed(clock: libc::clockid_t, deadline: &libc::timespec) -> bool {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; `clock` is REALTIME or MONOTONIC.
    unsafe { libc::clock_gettime(clock, &mut now) };
    (now.tv_sec, now.tv_nsec) >= (deadline.tv_sec, deadline.tv_nsec)
}

/// [`timed_lock`](super::timed_lock)'s contended path: 0 or `ETIMEDOUT`.
#[cold]
pub(super) fn timed_acquire(
    mode: &Mode,
    r: &Replaced,
    clock: libc::clockid_t,
    deadline: &libc::timespec,
) -> c_int {
    let try_lock = || {
        // SAFETY: the lock object is the algorithm's own.
        unsafe { (mode.algo.try_lock)(r.lock) }
    };
    if mode.waiting == Waiting::Pure {
        // The algorithm's own `lock` cannot be abandoned at a deadline:
        // poll its `try_lock`.
        loop {
            if try_lock() {
                return 0;
            }
            if passed(clock, deadline) {
                return libc::ETIMEDOUT;
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
    let mut backoff = ExpBackoff::new(16, 1024);
    let mut spent = 0u32;
    while spent < mode.budget {
        spent = spent.saturating_add(backoff.limit());
        backoff.wait();
        if try_lock() {
            return 0;
        }
    }
    // As in `acquire_politely`, with a deadline on the sleep.
    let flags = libc::FUTEX_WAIT_BITSET
        | libc::FUTEX_PRIVATE_FLAG
        | if clock == libc::CLOCK_REALTIME {
            libc::FUTEX_CLOCK_REALTIME
        } else {
            0
        };
    loop {
        // Relaxed, SeqCst: as in `acquire_politely`.
        r.parked.fetch_add(1, Ordering::Relaxed);
        let seen = r.seq.load(Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let got = try_lock();
        if !got && deadline.tv_sec >= 0 {
            // SAFETY: FUTEX_WAIT_BITSET on a valid, aligned u32 that
            // outlives the call, with an absolute timeout on `clock`; every
            // return is re-checked below.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    r.seq.as_ptr(),
                    flags,
                    seen,
                    deadline as *const libc::timespec,
                    std::ptr::null::<u32>(),
                    u32::MAX,
                );
            }
        }
        r.parked.fetch_sub(1, Ordering::Relaxed);
        if got || try_lock() {
            return 0;
        }
        if passed(clock, deadline) {
            return libc::ETIMEDOUT;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replace::algo::algorithms;
    use crate::replace::mode::waiting;

    /// Every algorithm, with its default waiting policy, keeps a plain
    /// counter exact when C-style lock and unlock calls (token kept in the
    /// entry) come from two threads. (Not more than a 2-core machine has:
    /// `tas` spins without yielding.)
    #[test]
    fn every_algorithm_excludes_through_the_erased_entry_points() {
        for a in algorithms() {
            let w = waiting(a, None).expect("the default policy");
            assert_eq!(w == Waiting::Polite, a.fifo, "{}", a.name);
            let mode: &'static Mode = Box::leak(Box::new(Mode::new(a, w)));
            // SAFETY: `fresh` returns a leaked `Replaced`, never freed.
            let r: &'static Replaced = unsafe { &*Replaced::fresh(mode.algo) };
            let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let count = count.clone();
                    std::thread::spawn(move || {
                        for _ in 0..20_000 {
                            acquire(mode, r);
                            let v = count.load(Ordering::Relaxed);
                            count.store(v + 1, Ordering::Relaxed);
                            release(mode, r);
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(count.load(Ordering::Relaxed), 40_000, "{}", a.name);
        }
    }
}
