//! The clock the locks read on their paths: nanoseconds of
//! `CLOCK_MONOTONIC`, read with one `clock_gettime` and no lazy state.
//!
//! A lock may be taken in a signal handler (programs do it, and the
//! interposition library runs every mutex of a program on these locks),
//! so nothing on a lock path may wait for a one-time initialisation that
//! the interrupted thread itself might be running: a `OnceLock` epoch did
//! exactly that (`mcs-tp` hung when `SIGALRM` landed inside the first
//! `Instant::now()` and the handler took a mutex). `clock_gettime` is
//! async-signal-safe (POSIX.1-2008) and, through the vDSO, costs what
//! `Instant::now()` costs.

/// Nanoseconds of the monotonic clock (since boot on Linux).
///
/// Async-signal-safe: one `clock_gettime(CLOCK_MONOTONIC)`, no state.
/// Saturates after 584 years of uptime.
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC exists
    // on every platform this crate builds for, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::now_ns;

    #[test]
    fn the_clock_moves_forward_with_real_time() {
        let (t0, i0) = (now_ns(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(5));
        let (t1, i1) = (now_ns(), std::time::Instant::now());
        assert!(t1 > t0);
        let real = i1.duration_since(i0).as_nanos() as f64;
        let ours = (t1 - t0) as f64;
        assert!(
            (ours / real - 1.0).abs() < 0.05,
            "{ours} ns against {real} ns"
        );
    }
}
