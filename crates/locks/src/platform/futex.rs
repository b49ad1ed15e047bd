//! Linux `futex(2)` on a 32-bit word: the kernel half of every blocking
//! wait in symmetry (the spin-then-block locks' OS blocker, the harness's
//! block+wake calibration).
//!
//! `wait(word, expected)` sleeps only while `*word == expected`, checked by
//! the kernel atomically with respect to `wake` on the same word (under the
//! futex hash bucket's lock), so a waker that changes the word and then
//! calls `wake` cannot be missed. Returns may be spurious (a signal, a
//! changed word, a wake meant for another waiter): callers re-check their
//! condition in a loop.
//!
//! [`Scope::Private`] keys the futex by the address in this process's
//! address space (cheaper); [`Scope::Shared`] keys it by the underlying page,
//! so processes that map the same shared memory wait and wake together.

use std::sync::atomic::AtomicU32;

/// Whose waiters a futex word reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Threads of this process only (`FUTEX_PRIVATE_FLAG`).
    Private,
    /// Every process that maps the word's memory (shared memory segments).
    Shared,
}

impl Scope {
    #[inline]
    fn flag(self) -> libc::c_int {
        match self {
            Scope::Private => libc::FUTEX_PRIVATE_FLAG,
            Scope::Shared => 0,
        }
    }
}

/// Blocks the calling thread while `word` holds `expected`; may return
/// spuriously (see the module docs).
#[inline]
pub fn wait(word: &AtomicU32, expected: u32, scope: Scope) {
    futex_wait(word, expected, scope, core::ptr::null());
}

/// As [`wait`], but for at most `timeout` (a relative time on the
/// monotonic clock); may return early, spuriously or at the deadline
/// alike: callers re-check their condition and their clock.
#[inline]
pub fn wait_timeout(word: &AtomicU32, expected: u32, scope: Scope, timeout: std::time::Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    futex_wait(word, expected, scope, &raw const ts);
}

/// FUTEX_WAIT with a relative timeout (`ts` null: none).
#[inline]
fn futex_wait(word: &AtomicU32, expected: u32, scope: Scope, ts: *const libc::timespec) {
    // SAFETY: FUTEX_WAIT on a valid, aligned u32 that outlives the call;
    // `ts` is null or a valid timespec that outlives the call (both
    // callers). ETIMEDOUT, EINTR and EAGAIN are returns the caller's loop
    // handles.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | scope.flag(),
            expected,
            ts,
        );
    }
}

/// Wakes at most `count` threads blocked in [`wait`] on `word` (with the
/// same `scope`); returns how many were woken.
#[inline]
pub fn wake(word: &AtomicU32, count: u32, scope: Scope) -> usize {
    let count = count.min(i32::MAX as u32) as libc::c_int;
    // SAFETY: FUTEX_WAKE on a valid, aligned u32; the kernel uses the
    // address only as a key.
    let woken = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | scope.flag(),
            count,
        )
    };
    usize::try_from(woken).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    #[test]
    fn wait_returns_at_once_when_the_word_differs() {
        let w = AtomicU32::new(1);
        wait(&w, 0, Scope::Private);
        wait(&w, 0, Scope::Shared);
    }

    #[test]
    fn wake_reaches_a_waiter() {
        for scope in [Scope::Private, Scope::Shared] {
            let w = Arc::new(AtomicU32::new(0));
            let w2 = Arc::clone(&w);
            let t = std::thread::spawn(move || {
                while w2.load(Ordering::Acquire) == 0 {
                    wait(&w2, 0, scope);
                }
            });
            w.store(1, Ordering::Release);
            wake(&w, 1, scope);
            t.join().unwrap();
        }
    }

    #[test]
    fn wait_timeout_returns_by_the_deadline() {
        let w = AtomicU32::new(0);
        let start = std::time::Instant::now();
        wait_timeout(&w, 0, Scope::Shared, std::time::Duration::from_millis(5));
        // Returned (the test would hang otherwise); not before the
        // deadline unless spuriously, which a signal-free test never is.
        assert!(start.elapsed() >= std::time::Duration::from_millis(4));
    }

    #[test]
    fn wake_without_waiters_wakes_nobody() {
        assert_eq!(wake(&AtomicU32::new(0), u32::MAX, Scope::Private), 0);
    }
}
