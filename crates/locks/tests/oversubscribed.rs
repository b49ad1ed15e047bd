//! The preemption-safe family on a machine with more runnable threads than
//! cores (issue 43): 8 OS threads pinned to 2 CPUs, 20,000 short critical
//! sections each, for every lock of the family over every scheduler
//! interface this machine can construct:
//!
//! * `Stock` (nobody reads the context block);
//! * `Emulated` with no emulation running (the same, through the emulated
//!   scheduler's hooks);
//! * `RseqSlice`, whether or not the kernel offers the extension;
//! * `Emulated` running: SMARTQ §4.1's multiprogramming, 8 workers on 2
//!   virtual processors (level 4, the workers are the competitors), and an
//!   emulation at level 1 over 8 virtual processors, which reads the
//!   context blocks but never preempts, so the kernel does all the
//!   multiprogramming.
//!
//! Each lock must finish within [`RATIO`] times `tas` measured in the same
//! mode of the same run, the only timing assertion the project allows (a
//! ratio against a peer). It is made robust: the `tas` reference is the
//! slowest `tas` run of the mode so far, and a lock over the ratio is
//! measured again, with a fresh `tas` run, before the test fails. A run
//! that makes no progress for [`STALL`] fails as a hang; a run past the
//! ratio is stopped (its workers leave after their current acquisition)
//! instead of waiting out a convoy.
//!
//! Not held to the ratio, run and reported only: `mcs-np` under a running
//! emulation that deschedules waiters, which is SMARTQ's "Queued-no
//! preempt": it hands the lock to waiters the emulation descheduled and
//! collapses (SMARTQ Figs. 4-7, what the harness's `pq-multiprogramming`
//! measures), by design; and `mcs-yield` (strict FIFO MCS whose waiters
//! spin then yield), which is no member of the family: it keeps pace when
//! the program's own threads oversubscribe the cores, but beside CPU hogs
//! a yielding next owner waits out the hogs' time slices.
#![cfg(all(target_os = "linux", not(loom)))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use symmetry_locks::lock_api::RawMutex;
use symmetry_locks::platform::affinity;
use symmetry_locks::sched::Stock;
use symmetry_locks::sched::emulated::{self, Competitors, Config, Emulated};
use symmetry_locks::sched::rseq::{self, RseqSlice};
use symmetry_locks::{Handshake, McsNp, McsTp, McsYield, NativeNp, SmartQ, Tas, TasNp};

mod common;

use common::Guarded;

/// OS threads.
const THREADS: usize = 8;
/// CPUs they are pinned to (fewer if the process has fewer).
const CPUS: usize = 2;
/// Critical sections per thread.
const ROUNDS: u64 = 20_000;
/// Allowed time over `tas` in the same mode.
const RATIO: f64 = 5.0;
/// A run with no acquisition for this long is hung.
const STALL: Duration = Duration::from_secs(30);
/// Spin hints inside a critical section and between two.
const INSIDE: u32 = 20;
const OUTSIDE: u32 = 100;

/// A lock, the counter it guards, and what the monitor watches.
struct Shared<R> {
    guarded: Guarded<R>,
    /// Acquisitions so far (written inside the critical section).
    done: AtomicU64,
    /// Workers ready to start, and finished.
    ready: AtomicUsize,
    finished: AtomicUsize,
    go: AtomicBool,
    stop: AtomicBool,
}

impl<R: RawMutex> Shared<R> {
    fn new() -> Self {
        Self {
            guarded: Guarded::new(),
            done: AtomicU64::new(0),
            ready: AtomicUsize::new(0),
            finished: AtomicUsize::new(0),
            go: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        }
    }

    /// One worker: pin, wait for the start, `ROUNDS` critical sections
    /// (fewer if stopped).
    fn work(&self) {
        pin();
        self.ready.fetch_add(1, Ordering::AcqRel);
        while !self.go.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        for _ in 0..ROUNDS {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            let g = self.guarded.lock.lock();
            // SAFETY: we hold the lock.
            unsafe { self.guarded.bump(INSIDE) };
            self.done.fetch_add(1, Ordering::Relaxed);
            // SAFETY: held with `g`, on this thread.
            unsafe { self.guarded.lock.unlock(g) };
            spin(OUTSIDE);
        }
        self.finished.fetch_add(1, Ordering::AcqRel);
    }
}

fn spin(n: u32) {
    for _ in 0..n {
        std::hint::spin_loop();
    }
}

/// Pins the calling thread to the first [`CPUS`] CPUs the process may use.
fn pin() {
    let cpus = affinity::allowed_cpus();
    // Best effort: an unpinned run is still a valid test.
    let _ = affinity::pin_current_to(&cpus[..cpus.len().min(CPUS)]);
}

/// How the 8 threads are scheduled.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    /// Plain OS threads; the kernel multiprograms them.
    Os,
    /// SMARTQ's emulation over `processors` virtual processors at `level`,
    /// the workers being the competing processes.
    Emulation { processors: usize, level: f64 },
}

impl Mode {
    fn config(self) -> Option<Config> {
        match self {
            Mode::Os => None,
            Mode::Emulation { processors, level } => {
                let cfg = Config::new(processors, level)
                    .with_competitors(Competitors::Workers)
                    .with_quantum(Duration::from_millis(4))
                    .with_extension(Duration::from_micros(400));
                assert_eq!(cfg.workers(), THREADS);
                Some(cfg)
            }
        }
    }
}

/// Why a run did not count.
#[derive(Debug)]
enum Failed {
    /// Past the limit: stopped with this many acquisitions done.
    Slow(Duration, u64),
    /// No acquisition for [`STALL`].
    Hung(u64),
}

/// Runs the 8 workers over `R` in `mode`; the wall time from the start
/// signal to the last worker's end. Stops early past `limit`.
fn measure<R: RawMutex + Sync + Send + 'static>(
    mode: Mode,
    limit: Option<Duration>,
) -> Result<Duration, Failed> {
    let mut shared = Arc::new(Shared::<R>::new());
    let runner = {
        let s = Arc::clone(&shared);
        std::thread::spawn(move || match mode.config() {
            None => {
                let ws: Vec<_> = (0..THREADS)
                    .map(|_| {
                        let s = Arc::clone(&s);
                        std::thread::spawn(move || s.work())
                    })
                    .collect();
                for w in ws {
                    w.join().expect("worker panicked");
                }
            }
            Some(cfg) => {
                emulated::run(&cfg, |_| s.work()).expect("emulation");
            }
        })
    };
    // Workers of an emulation that start descheduled count as ready when
    // they first run; start as soon as the running ones are.
    let want_ready = if mode == Mode::Os { THREADS } else { 1 };
    while shared.ready.load(Ordering::Acquire) < want_ready {
        std::thread::sleep(Duration::from_millis(1));
    }
    let start = Instant::now();
    shared.go.store(true, Ordering::Release);
    let mut last = (0u64, start);
    loop {
        std::thread::sleep(Duration::from_millis(2));
        let now = Instant::now();
        if shared.finished.load(Ordering::Acquire) == THREADS {
            let took = now - start;
            runner.join().expect("runner panicked");
            let total = THREADS as u64 * ROUNDS;
            let guarded = &mut Arc::get_mut(&mut shared).expect("joined").guarded;
            assert_eq!(guarded.count("the lock"), total, "lost updates");
            return Ok(took);
        }
        let done = shared.done.load(Ordering::Relaxed);
        if done != last.0 {
            last = (done, now);
        } else if now - last.1 > STALL {
            shared.stop.store(true, Ordering::Relaxed);
            // The workers may never come back: leave them.
            return Err(Failed::Hung(done));
        }
        if limit.is_some_and(|l| now - start > l) {
            shared.stop.store(true, Ordering::Relaxed);
            runner.join().expect("runner panicked");
            assert_eq!(
                shared.guarded.violations.load(Ordering::Relaxed),
                0,
                "two holders"
            );
            return Err(Failed::Slow(now - start, done));
        }
    }
}

/// One lock of the family over one scheduler.
struct Case {
    name: &'static str,
    /// The registry name of the lock (coverage check).
    lock: &'static str,
    run: fn(Mode, Option<Duration>) -> Result<Duration, Failed>,
    /// Held to the ratio (false only for SMARTQ's intended collapse).
    judged: bool,
}

macro_rules! case {
    ($name:expr, $lock:literal, $ty:ty) => {
        Case {
            name: $name,
            lock: $lock,
            run: measure::<$ty>,
            judged: true,
        }
    };
}

/// The family over scheduler `$s`, for modes where no emulation runs.
macro_rules! family {
    ($s:ty, $sn:literal) => {
        vec![
            case!(concat!("tas-np<", $sn, ">"), "tas-np", TasNp<$s>),
            case!(concat!("mcs-np<", $sn, ">"), "mcs-np", McsNp<$s>),
            case!(concat!("handshake<", $sn, ">"), "handshake", Handshake<$s>),
            case!(concat!("smart-q<", $sn, ">"), "smart-q", SmartQ<$s>),
            case!(concat!("native-np<", $sn, ">"), "native-np", NativeNp<$s>),
        ]
    };
}

/// Every (mode, cases) pair of the test.
fn plan() -> Vec<(&'static str, Mode, Vec<Case>)> {
    let mut os = family!(Stock, "stock");
    os.push(case!("mcs-tp", "mcs-tp", McsTp));
    os.push(Case {
        judged: false,
        ..case!("mcs-yield", "mcs", McsYield)
    });
    let emulated4 = {
        let mut v = family!(Emulated, "emulated");
        v.push(case!("mcs-tp", "mcs-tp", McsTp));
        for c in &mut v {
            // SMARTQ's "Queued-no preempt" collapse (module docs).
            c.judged = c.lock != "mcs-np";
        }
        v
    };
    let mut emulated1 = family!(Emulated, "emulated");
    emulated1.push(case!("mcs-tp", "mcs-tp", McsTp));
    vec![
        ("os threads", Mode::Os, os),
        (
            "os threads, no emulation running",
            Mode::Os,
            family!(Emulated, "emulated"),
        ),
        ("os threads", Mode::Os, family!(RseqSlice, "rseq")),
        (
            "emulation, 2 processors at level 4",
            Mode::Emulation {
                processors: 2,
                level: 4.0,
            },
            emulated4,
        ),
        (
            "emulation, 8 processors at level 1",
            Mode::Emulation {
                processors: 8,
                level: 1.0,
            },
            emulated1,
        ),
    ]
}

fn tas(mode: Mode) -> Duration {
    match measure::<Tas>(mode, None) {
        Ok(d) => d,
        Err(e) => panic!("tas in {mode:?}: {e:?}"),
    }
}

#[test]
fn the_family_keeps_pace_with_tas_on_oversubscribed_cores() {
    let rseq = match rseq::available() {
        rseq::Availability::Available => "available".to_string(),
        rseq::Availability::Absent(why) => format!("absent: {why}"),
    };
    eprintln!("rseq time-slice extension: {rseq}");
    let mut failures = Vec::new();
    for (what, mode, cases) in plan() {
        // The slowest tas of this mode so far: the generous reference.
        let mut reference = tas(mode);
        eprintln!("-- {what}: tas {:.3} s", reference.as_secs_f64());
        for c in cases {
            let mut verdict = None;
            for attempt in 0..2 {
                if attempt > 0 {
                    let t = tas(mode);
                    eprintln!("   tas again {:.3} s", t.as_secs_f64());
                    reference = reference.max(t);
                }
                // Unjudged cases stop there as well, to bound the test.
                let r = (c.run)(mode, Some(reference.mul_f64(RATIO)));
                let line = match &r {
                    Ok(d) => format!(
                        "{:.3} s = {:.2}x tas",
                        d.as_secs_f64(),
                        d.as_secs_f64() / reference.as_secs_f64()
                    ),
                    Err(Failed::Slow(d, n)) => format!(
                        "stopped at {:.3} s (> {RATIO}x tas) after {n} of {} acquisitions",
                        d.as_secs_f64(),
                        THREADS as u64 * ROUNDS
                    ),
                    Err(Failed::Hung(n)) => {
                        format!("no progress for {STALL:?} after {n} acquisitions")
                    }
                };
                eprintln!(
                    "   {:<22} {line}{}",
                    c.name,
                    if c.judged { "" } else { " (not judged)" }
                );
                let ok = match r {
                    Ok(d) => d.as_secs_f64() <= RATIO * reference.as_secs_f64(),
                    Err(Failed::Hung(_)) => {
                        verdict = Some(false);
                        break;
                    }
                    Err(Failed::Slow(..)) => false,
                };
                verdict = Some(ok);
                if ok || !c.judged {
                    break;
                }
            }
            if c.judged && verdict != Some(true) {
                failures.push(format!("{} ({what})", c.name));
            }
        }
    }
    assert!(failures.is_empty(), "not within {RATIO}x tas: {failures:?}");
}

/// The test's table covers every lock the registry files as
/// preemption-safe.
#[test]
fn every_preempt_safe_lock_of_the_registry_is_covered() {
    let covered: Vec<&str> = plan()
        .iter()
        .flat_map(|(_, _, cases)| cases.iter().map(|c| c.lock))
        .collect();
    for info in symmetry_locks::registry::ALL {
        if info.kind == symmetry_locks::LockKind::PreemptSafe {
            assert!(
                covered.contains(&info.name),
                "{} is not in the oversubscription test",
                info.name
            );
        }
    }
}
