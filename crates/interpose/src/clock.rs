//! The clock that times waits in profile mode.
//!
//! A wait is timed by two reads of the clock, both on the lock path, so
//! the clock's cost is the profiler's: on a virtual machine
//! `clock_gettime` through the vDSO costs tens of nanoseconds, a large
//! part of a contended hand-off. Where the kernel itself keeps time with
//! the time-stamp counter (its clocksource is `tsc`, so the counter is
//! invariant and synchronised across CPUs), waits are read from the
//! counter (`rdtsc`) and converted to nanoseconds outside the lock path,
//! with a rate measured once, at the first conversion, against the
//! monotonic clock over [`RATE_WINDOW_NS`]. Elsewhere (another
//! clocksource, another architecture) the ticks are nanoseconds of the
//! monotonic clock.

use std::sync::OnceLock;

use symmetry_locks::spin_then_block::calibration;

/// How long the counter's rate is measured against the monotonic clock.
/// The clock reads at the two ends are a few tens of nanoseconds each, so
/// the rate is good to about 0.05%.
pub const RATE_WINDOW_NS: u64 = 200_000;

/// Where ticks come from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Source {
    /// The time-stamp counter.
    Tsc,
    /// The monotonic clock, in nanoseconds.
    Monotonic,
}

/// The source this process uses (decided once).
pub fn source() -> Source {
    static SOURCE: OnceLock<Source> = OnceLock::new();
    *SOURCE.get_or_init(|| {
        let kernel = std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .unwrap_or_default();
        if cfg!(target_arch = "x86_64") && kernel.trim() == "tsc" {
            Source::Tsc
        } else {
            Source::Monotonic
        }
    })
}

/// Now, in ticks of [`source`].
#[inline]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if source() == Source::Tsc {
        // SAFETY: rdtsc has no preconditions; x86-64 always has it.
        return unsafe { core::arch::x86_64::_rdtsc() };
    }
    calibration::now_ns()
}

/// Nanoseconds per tick (measured at the first call for the counter).
#[cold]
fn ns_per_tick() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(|| match source() {
        Source::Monotonic => 1.0,
        Source::Tsc => {
            let (t0, n0) = (ticks(), calibration::now_ns());
            let mut n1 = n0;
            while n1 - n0 < RATE_WINDOW_NS {
                std::hint::spin_loop();
                n1 = calibration::now_ns();
            }
            let t1 = ticks();
            if t1 > t0 {
                (n1 - n0) as f64 / (t1 - t0) as f64
            } else {
                1.0
            }
        }
    })
}

/// `ticks` (a difference of two [`ticks`]) in nanoseconds.
pub fn to_ns(ticks: u64) -> u64 {
    match source() {
        Source::Monotonic => ticks,
        Source::Tsc => (ticks as f64 * ns_per_tick()) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_convert_to_the_monotonic_clock_within_a_percent() {
        let (t0, n0) = (ticks(), calibration::now_ns());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (t1, n1) = (ticks(), calibration::now_ns());
        let measured = to_ns(t1 - t0) as f64;
        let real = (n1 - n0) as f64;
        assert!(
            (measured / real - 1.0).abs() < 0.01,
            "{measured} ns by {:?} against {real} ns",
            source()
        );
    }
}
