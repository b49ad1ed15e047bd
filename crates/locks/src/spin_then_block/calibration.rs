//! C, measured: the constants a spin-then-block lock needs.
//!
//! KLMO91 count everything in *spins*, iterations of the polling loop. A
//! spin here is one iteration of [`SpinThenBlock`](super::SpinThenBlock)'s
//! loop: a relaxed load of the lock word and a spin-wait hint (`pause` on
//! x86), whose length differs by an order of magnitude between CPUs. So:
//!
//! * `ns_per_spin` converts blocked time into spins (a waiter that blocked
//!   learns from the releaser how long the lock stayed held).
//! * `c_spins_os` is C for OS threads: a futex block+wake hand-off between
//!   two cores, in spins.
//! * `c_spins_user` is C for user threads of `symmetry-threads`: a user
//!   thread's block+wake, in spins.
//!
//! Where they come from, first match wins:
//! 1. [`install`], e.g. with the values `symmetry calibrate` measured (it
//!    prints them as environment variables);
//! 2. the environment variables `SYMMETRY_NS_PER_SPIN`, `SYMMETRY_C_OS` and
//!    `SYMMETRY_C_USER`, read once;
//! 3. defaults: `ns_per_spin` is measured on first use (about 1 ms, once
//!    per process); C is [`DEFAULT_BLOCK_WAKE_OS_NS`] (resp.
//!    [`DEFAULT_BLOCK_WAKE_USER_NS`]) divided by `ns_per_spin`. The default
//!    block+wake costs are those `symmetry calibrate` measured on the
//!    2-core development VM, rounded; measure your own machine.

use std::sync::Once;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

/// Default futex block+wake hand-off, ns (see the module docs).
pub const DEFAULT_BLOCK_WAKE_OS_NS: f64 = 5_000.0;
/// Default user-thread block+wake, ns (see the module docs).
pub const DEFAULT_BLOCK_WAKE_USER_NS: f64 = 200.0;

/// The constants of one machine.
///
/// ```
/// use symmetry_locks::spin_then_block::calibration::{self, Calibration};
///
/// // What `symmetry calibrate` measured here: 2.5 ns per spin, C = 2000
/// // spins for OS threads; 0 keeps C for user threads as it is.
/// calibration::install(Calibration::new(2.5, 2000, 0));
/// assert_eq!(calibration::c_spins_os(), 2000);
/// assert_eq!(calibration::current().ns_per_spin, 2.5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Calibration {
    /// Length of one polling iteration, ns.
    pub ns_per_spin: f64,
    /// C for OS threads (futex), in spins.
    pub c_spins_os: u32,
    /// C for user threads, in spins.
    pub c_spins_user: u32,
}

impl Calibration {
    /// The constants: the length of a spin in ns, and C for OS and for
    /// user threads in spins. For [`install`], a zero or non-finite value
    /// leaves the one in force.
    pub const fn new(ns_per_spin: f64, c_spins_os: u32, c_spins_user: u32) -> Calibration {
        Calibration {
            ns_per_spin,
            c_spins_os,
            c_spins_user,
        }
    }
}

// Relaxed everywhere: each value is a self-contained number; a reader
// that sees an older one uses a slightly different constant, never an
// inconsistent structure. 0 means "not set yet".
static PS_PER_SPIN: AtomicU32 = AtomicU32::new(0);
static C_OS: AtomicU32 = AtomicU32::new(0);
static C_USER: AtomicU32 = AtomicU32::new(0);
static ENV: Once = Once::new();

/// Installs measured constants for this process (overrides the
/// environment and the defaults). Zero or non-finite fields are ignored.
pub fn install(cal: Calibration) {
    read_env();
    set_ns_per_spin(cal.ns_per_spin);
    if cal.c_spins_os > 0 {
        C_OS.store(cal.c_spins_os, Ordering::Relaxed);
    }
    if cal.c_spins_user > 0 {
        C_USER.store(cal.c_spins_user, Ordering::Relaxed);
    }
}

/// The constants in force (measuring `ns_per_spin` if nothing set it).
pub fn current() -> Calibration {
    Calibration {
        ns_per_spin: ns_per_spin(),
        c_spins_os: c_spins_os(),
        c_spins_user: c_spins_user(),
    }
}

fn set_ns_per_spin(ns: f64) {
    if ns.is_finite() && ns > 0.0 {
        let ps = (ns * 1000.0).round().clamp(1.0, f64::from(u32::MAX));
        PS_PER_SPIN.store(ps as u32, Ordering::Relaxed);
    }
}

fn env_f64(name: &str) -> Option<f64> {
    std::env::var(name).ok()?.trim().parse::<f64>().ok()
}

thread_local! {
    /// Set while this thread reads the environment in [`read_env`].
    static READING_ENV: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Reads the environment's constants once per process. A signal handler
/// that takes a lock while its thread is inside this very call does not
/// wait for it (it would wait for itself forever): it goes on with the
/// constants in force; any other thread waits for the one reading. The
/// flag is set before `call_once` is entered, so there is no moment when
/// this thread runs the `Once` without the flag saying so.
#[cold]
fn read_env() {
    if ENV.is_completed() || READING_ENV.with(core::cell::Cell::get) {
        return;
    }
    READING_ENV.with(|r| r.set(true));
    ENV.call_once(|| {
        if let Some(ns) = env_f64("SYMMETRY_NS_PER_SPIN") {
            set_ns_per_spin(ns);
        }
        for (var, slot) in [("SYMMETRY_C_OS", &C_OS), ("SYMMETRY_C_USER", &C_USER)] {
            if let Some(c) = env_f64(var).filter(|c| c.is_finite() && *c >= 1.0) {
                slot.store(c.min(f64::from(u32::MAX)) as u32, Ordering::Relaxed);
            }
        }
    });
    READING_ENV.with(|r| r.set(false));
}

/// Times `iters` polling iterations of the lock's loop shape (a load and a
/// spin hint): ns per iteration, the median of five runs.
pub fn measure_ns_per_spin(iters: u32) -> f64 {
    let word = std::sync::atomic::AtomicU32::new(1);
    let mut runs: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                if std::hint::black_box(&word).load(Ordering::Relaxed) == 0 {
                    break;
                }
                core::hint::spin_loop();
            }
            t.elapsed().as_nanos() as f64 / f64::from(iters.max(1))
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[2].max(0.001)
}

/// Picoseconds per spin (measured once on first use if not set).
#[inline]
pub fn ps_per_spin() -> u32 {
    match PS_PER_SPIN.load(Ordering::Relaxed) {
        0 => ps_per_spin_slow(),
        ps => ps,
    }
}

#[cold]
fn ps_per_spin_slow() -> u32 {
    read_env();
    if PS_PER_SPIN.load(Ordering::Relaxed) == 0 {
        let ns = measure_ns_per_spin(1 << 14);
        // Only the first measurement sticks, so every caller agrees.
        let ps = (ns * 1000.0).round().clamp(1.0, f64::from(u32::MAX)) as u32;
        let _ = PS_PER_SPIN.compare_exchange(0, ps, Ordering::Relaxed, Ordering::Relaxed);
    }
    PS_PER_SPIN.load(Ordering::Relaxed)
}

/// Length of one spin, ns.
pub fn ns_per_spin() -> f64 {
    f64::from(ps_per_spin()) / 1000.0
}

/// Converts a duration in ns into spins (rounded down, saturating).
#[inline]
pub fn ns_to_spins(ns: u64) -> u64 {
    let ps = u128::from(ns) * 1000;
    (ps / u128::from(ps_per_spin())).min(u128::from(u64::MAX)) as u64
}

fn c_from(slot: &AtomicU32, default_ns: f64) -> u32 {
    match slot.load(Ordering::Relaxed) {
        0 => {
            read_env();
            match slot.load(Ordering::Relaxed) {
                0 => (default_ns / ns_per_spin()).round().clamp(1.0, 1e9) as u32,
                c => c,
            }
        }
        c => c,
    }
}

/// C for OS threads, in spins.
#[inline]
pub fn c_spins_os() -> u32 {
    c_from(&C_OS, DEFAULT_BLOCK_WAKE_OS_NS)
}

/// C for user threads, in spins.
#[inline]
pub fn c_spins_user() -> u32 {
    c_from(&C_USER, DEFAULT_BLOCK_WAKE_USER_NS)
}
