//! Which algorithm replace mode runs and how its waiters wait, read once
//! from the environment (`SYMMETRY_LOCK`, `SYMMETRY_LOCK_WAIT`).

use std::sync::OnceLock;

use symmetry_locks::spin_then_block::calibration;

use super::algo::{Algo, algorithm, algorithms};
use super::replaced::Replaced;
use super::table::Table;

/// How a replaced mutex's waiter waits (`SYMMETRY_LOCK_WAIT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// The algorithm's own `lock`, exactly as the paper wrote it: a FIFO
    /// spin lock hands the lock to its next waiter even when that waiter
    /// is descheduled, and everyone behind it spins through their time
    /// slices (the convoy SMARTQ describes).
    Pure,
    /// Polite waiting, KLMO91's spin-then-block with the fixed-spin-C
    /// threshold: the algorithm's `try_lock` polled with [`ExpBackoff`](symmetry_locks::backoff::ExpBackoff)
    /// for about C spins (the block+wake cost,
    /// [`calibration::c_spins_os`]), then the waiter sleeps on a futex
    /// beside the lock ([`Futex`](symmetry_locks::spin_then_block::Futex)) and an unlock that sees a sleeper wakes
    /// one. Mutual exclusion is the algorithm's (every acquisition is its
    /// `try_lock`), but arrival order is not kept: a waiter that was
    /// descheduled does not hold up the others, which is the point on a
    /// machine with more runnable threads than cores, and the price is
    /// that a FIFO lock stops being FIFO. (A futex sleep rather than
    /// `sched_yield`: a yielder stays runnable and can wait out a CPU
    /// hog's whole time slice after each yield, where a woken sleeper is
    /// scheduled promptly.)
    Polite,
}

/// Environment variable choosing [`Waiting`]: `pure` or `polite`; unset
/// or empty: `polite` for the locks the registry calls FIFO, `pure` for
/// the others (whose waiters need no queue position to make progress).
pub const WAIT_ENV: &str = "SYMMETRY_LOCK_WAIT";

/// The waiting policy for `algo` given the value of [`WAIT_ENV`]
/// (`None`: unset), or the reason the value is refused.
pub fn waiting(algo: &Algo, env: Option<&str>) -> Result<Waiting, String> {
    match env.map(str::trim) {
        None | Some("") => Ok(if algo.fifo {
            Waiting::Polite
        } else {
            Waiting::Pure
        }),
        Some("pure") => Ok(Waiting::Pure),
        Some("polite") => Ok(Waiting::Polite),
        Some(other) => Err(format!(
            "{WAIT_ENV}={other} is not a waiting policy; accepted: pure, polite"
        )),
    }
}

/// Replace mode as the environment chose it, with its address tables.
pub(crate) struct Mode {
    /// The lock algorithm.
    pub(super) algo: &'static Algo,
    /// How its waiters wait.
    pub(super) waiting: Waiting,
    /// Spins a polite waiter polls before it sleeps.
    pub(super) budget: u32,
    /// Each mutex address's last lock (`replace`'s docs, "Mutexes").
    pub(super) mutexes: Table<Replaced>,
    /// Each waited-on condition's mutex.
    pub(super) conds: Table<Replaced>,
}

static MODE: OnceLock<Option<Mode>> = OnceLock::new();

/// Replace mode, if `SYMMETRY_LOCK` names an algorithm (aborting with the
/// accepted names if it names none, or if `SYMMETRY_LOCK_WAIT` is not a
/// policy).
pub(crate) fn mode() -> Option<&'static Mode> {
    MODE.get_or_init(|| {
        if crate::inert() {
            return None;
        }
        let name = std::env::var(crate::LOCK_ENV).ok()?;
        let name = name.trim();
        if name.is_empty() || name == "glibc" {
            return None;
        }
        if name == crate::OFF {
            // Relaxed: see `crate::inert`.
            crate::INERT.store(true, std::sync::atomic::Ordering::Relaxed);
            return None;
        }
        let Some(algo) = algorithm(name) else {
            let names: Vec<&str> = algorithms().map(|a| a.name).collect();
            eprintln!(
                "symmetry-interpose: {}={name} is not a lock this library can run; accepted: glibc, {}, {}",
                crate::LOCK_ENV,
                crate::OFF,
                names.join(", ")
            );
            std::process::abort();
        };
        let waiting = match waiting(algo, std::env::var(WAIT_ENV).ok().as_deref()) {
            Ok(w) => w,
            Err(e) => {
                eprintln!("symmetry-interpose: {e}");
                std::process::abort();
            }
        };
        Some(Mode::new(algo, waiting))
    })
    .as_ref()
}

/// Whether profile mode is known to be on, without waiting: false while
/// [`mode`] is still being decided (by the constructor, or by a thread
/// that came before it), and in an inert library ([`crate::inert`]). For
/// callers that must never wait, such as the futex wait the decision's
/// own waiters make.
pub(crate) fn profiling_decided() -> bool {
    !crate::inert() && matches!(MODE.get(), Some(None))
}

impl Mode {
    /// Replace mode on `algo`, waiting by `waiting`.
    pub(super) fn new(algo: &'static Algo, waiting: Waiting) -> Self {
        Mode {
            algo,
            waiting,
            // Decided here, in the library's constructor, so no lock path
            // waits for the calibration (`replace`'s docs, signal handlers).
            budget: calibration::c_spins_os(),
            mutexes: Table::new(),
            conds: Table::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_waiting_policy_is_read_from_its_variable() {
        let ticket = algorithm("ticket").expect("ticket");
        let tas = algorithm("tas").expect("tas");
        assert_eq!(waiting(ticket, None), Ok(Waiting::Polite));
        assert_eq!(waiting(ticket, Some("")), Ok(Waiting::Polite));
        assert_eq!(waiting(ticket, Some("pure")), Ok(Waiting::Pure));
        assert_eq!(waiting(tas, None), Ok(Waiting::Pure));
        assert_eq!(waiting(tas, Some(" polite ")), Ok(Waiting::Polite));
        let e = waiting(tas, Some("fast")).unwrap_err();
        assert!(e.contains("pure, polite"), "{e}");
    }
}
