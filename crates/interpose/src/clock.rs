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

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use symmetry_locks::clock;

/// How long the counter's rate is measured against the monotonic clock.
/// Each end is a paired reading (the counter read between two monotonic
/// reads, the tightest of a few tries), whose error is half its bracket:
/// tens of nanoseconds unless every try was interrupted, so the rate is
/// good to about 0.01%. The measurement runs once per process, at the
/// first conversion.
pub const RATE_WINDOW_NS: u64 = 1_000_000;

/// Where ticks come from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Source {
    /// The time-stamp counter.
    Tsc,
    /// The monotonic clock, in nanoseconds.
    Monotonic,
}

/// [`SOURCE`] before it is decided.
const UNDECIDED: u8 = 0;
const TSC: u8 = 1;
const MONOTONIC: u8 = 2;

/// The decided [`Source`]; [`UNDECIDED`] at first. Decided by the
/// library's constructor, before the program runs; a thread that finds it
/// undecided (one started by another library's constructor) decides it
/// itself, without waiting for anybody: the clock is read on lock paths,
/// and a signal handler that waited for its own thread's decision would
/// wait forever. Every decider reads the same file and agrees.
static SOURCE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// The source this process uses.
#[inline]
pub fn source() -> Source {
    // Relaxed: the value is self-contained, and every decider agrees.
    match SOURCE.load(Ordering::Relaxed) {
        TSC => Source::Tsc,
        MONOTONIC => Source::Monotonic,
        _ => decide(),
    }
}

#[cold]
fn decide() -> Source {
    let kernel =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .unwrap_or_default();
    let (source, code) = if cfg!(target_arch = "x86_64") && kernel.trim() == "tsc" {
        (Source::Tsc, TSC)
    } else {
        (Source::Monotonic, MONOTONIC)
    };
    SOURCE.store(code, Ordering::Relaxed);
    source
}

/// Now, in ticks of [`source`].
#[inline]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if source() == Source::Tsc {
        // SAFETY: rdtsc has no preconditions; x86-64 always has it.
        return unsafe { core::arch::x86_64::_rdtsc() };
    }
    clock::now_ns()
}

/// The bits of the measured nanoseconds per tick; 0 before the first
/// measurement.
static RATE: AtomicU64 = AtomicU64::new(0);

/// Nanoseconds per tick (measured at the first call for the counter). As
/// with [`source`], nobody waits for another's measurement: a caller that
/// finds none measures, and the first stored measurement is kept.
fn ns_per_tick() -> f64 {
    // Relaxed: a self-contained number, kept once stored.
    match RATE.load(Ordering::Relaxed) {
        0 => measure_rate(),
        bits => f64::from_bits(bits),
    }
}

/// One reading of both clocks at (nearly) the same instant: the counter
/// read between two monotonic reads, in the tightest of a few tries, so a
/// preemption or an interrupt between two reads (on a virtual machine,
/// microseconds) does not skew the pair. Returns the counter and the
/// midpoint of the monotonic reads.
fn paired_reading() -> (u64, u64) {
    let mut best = (0, 0, u64::MAX);
    for _ in 0..PAIR_TRIES {
        let before = clock::now_ns();
        let t = ticks();
        let after = clock::now_ns();
        let width = after - before;
        if width < best.2 {
            best = (t, before + width / 2, width);
        }
    }
    (best.0, best.1)
}

/// How many tries [`paired_reading`] takes the tightest of.
const PAIR_TRIES: usize = 16;

#[cold]
fn measure_rate() -> f64 {
    let rate = match source() {
        Source::Monotonic => 1.0,
        Source::Tsc => {
            let (t0, n0) = paired_reading();
            let mut n1 = n0;
            while n1 - n0 < RATE_WINDOW_NS {
                std::hint::spin_loop();
                n1 = clock::now_ns();
            }
            let (t1, n1) = paired_reading();
            if t1 > t0 && n1 > n0 {
                (n1 - n0) as f64 / (t1 - t0) as f64
            } else {
                1.0
            }
        }
    };
    // Only the first measurement sticks, so every conversion agrees.
    match RATE.compare_exchange(0, rate.to_bits(), Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => rate,
        Err(kept) => f64::from_bits(kept),
    }
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
        // The interval's ends are paired readings too, and the check is
        // the best of three: a vCPU descheduled for longer than every
        // bracket is the machine's noise, not the conversion's error.
        let mut errors = Vec::new();
        for _ in 0..3 {
            let (t0, n0) = paired_reading();
            std::thread::sleep(std::time::Duration::from_millis(20));
            let (t1, n1) = paired_reading();
            let measured = to_ns(t1 - t0) as f64;
            let real = (n1 - n0) as f64;
            let error = (measured / real - 1.0).abs();
            if error < 0.01 {
                return;
            }
            errors.push(format!("{measured} ns by {:?} against {real} ns", source()));
        }
        panic!("off by over 1% three times: {errors:?}");
    }
}
