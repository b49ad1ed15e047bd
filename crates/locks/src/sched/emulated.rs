//! `emulated`: SMARTQ §4.1's user-level scheduler, which multiprograms
//! worker OS threads so that preemption-safe locks can be measured without
//! kernel changes.
//!
//! As in the paper, every worker runs on its own *virtual processor*, and a
//! multiprogramming level above 1 puts simulated competing processes on the
//! processors: "A multiprogramming level of 2.0 indicates one additional
//! (simulated) process on each available processor. Fractional
//! multiprogramming levels indicate additional processes on some, but not
//! all, of the processors." At level `L` with `P` processors there are
//! `round(L * P)` processes; processor `i` holds `floor` or `ceil` of `L`
//! of them ([`Config::processes`]), served round-robin in quanta with random
//! jitter. While a simulated process has the processor, its worker is
//! descheduled.
//!
//! Who the competing processes are is [`Config::competitors`]:
//! [`Competitors::Simulated`] (the paper's: one worker per processor, the
//! others are simulated and only take time) or [`Competitors::Workers`]
//! (every process is a worker of the application: `round(L * P)` workers,
//! worker `w` on processor `w mod P`, so more workers than virtual
//! processors share the lock and a queue can hold several descheduled
//! ones, as on a machine whose application runs more processes than it
//! has processors).
//!
//! A scheduler thread keeps the time line. At the end of a worker's quantum
//! it raises the worker's `off` word and sends it a signal (`SIGRTMIN+1`).
//! The handler, on the worker's own thread, plays the kernel:
//!
//! * if the worker's context block is `Preemptable`, it CASes it to
//!   `Preempted` and blocks on a futex until the scheduler resumes it (a
//!   descheduled worker never spins: it must leave its core to the
//!   others);
//! * if the worker asked not to be preempted, it honours the request once
//!   per quantum: it sets the warning flag and returns; the scheduler comes
//!   back after the extension and then deschedules the worker whatever its
//!   state;
//! * a worker that leaves its critical section with the warning set yields
//!   ([`Emulated::yield_now`]) and blocks right away.
//!
//! At resume the scheduler clears the warning (a new quantum begins) and
//! the worker's state is restored. Each worker counts the time it spent
//! descheduled (SMARTQ Table 1's "preempted" column).
//!
//! Differences from the paper: its scheduler had a processor of its own;
//! here the scheduler thread sleeps between events and borrows a worker's
//! core at each event. Its descheduled workers spun on a flag;
//! here they sleep in the kernel, because on a machine with few cores a
//! spinning descheduled worker would take the core of a running one.

use core::cell::Cell;
use core::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

use crate::platform::rng::SplitMix64;

use super::{ContextBlock, Scheduler, State};
use crate::spin_then_block::{Blocker, Futex};

/// SMARTQ's emulated multiprogramming scheduler as a lock's scheduler
/// interface: the context block is read by the signal handler, and
/// [`Scheduler::yield_now`] gives the virtual processor back.
///
/// ```
/// use std::time::Duration;
/// use symmetry_locks::sched::emulated::{self, Config, Emulated};
/// use symmetry_locks::{SmartQ, lock_api::Mutex};
///
/// // Two workers on two virtual processors, each shared with a simulated
/// // competitor (level 2.0); the lock hands over only to running workers.
/// let m: Mutex<SmartQ<Emulated>, u64> = Mutex::new(0);
/// let cfg = Config::new(2, 2.0).with_quantum(Duration::from_millis(2));
/// let out = emulated::run(&cfg, |_| (0..10_000).for_each(|_| *m.lock() += 1)).unwrap();
/// assert_eq!(out.len(), 2);
/// assert_eq!(*m.lock(), 20_000);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Emulated;

impl Scheduler for Emulated {
    const NAME: &'static str = "emulated";
    const SHOWS_PREEMPTION: bool = true;

    /// Only a worker of a running emulation is ever marked `Preempted`.
    #[inline]
    fn shows_preemption() -> bool {
        !WORKER.with(Cell::get).is_null()
    }

    fn yield_now(cb: &ContextBlock) {
        let w = WORKER.with(Cell::get);
        if w.is_null() {
            // Not a worker of a running emulation: nobody to yield to.
            cb.clear_warning();
            return;
        }
        // SAFETY: a registered worker outlives its registration (see `run`).
        unsafe { &*w }.deschedule(false);
    }
}

/// Time the calling worker has spent descheduled so far in the running
/// emulation (zero on a thread that is not a worker). Lets a worker split
/// its own wall time into running and descheduled parts.
pub fn preempted_so_far() -> Duration {
    let w = WORKER.with(Cell::get);
    if w.is_null() {
        return Duration::ZERO;
    }
    // SAFETY: a registered worker outlives its registration.
    Duration::from_nanos(unsafe { &*w }.preempted_ns.load(Ordering::Relaxed))
}

/// Who the competing processes on a processor are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Competitors {
    /// SMARTQ's: one worker per processor, the others simulated (they only
    /// take the processor's time).
    Simulated,
    /// All processes are workers of the application.
    Workers,
}

/// What the emulation runs.
///
/// [`Config::new`] gives SMARTQ's settings for a number of processors and a
/// multiprogramming level; the `with_*` methods change the others.
///
/// ```
/// use std::time::Duration;
/// use symmetry_locks::sched::emulated::{Competitors, Config};
///
/// let cfg = Config::new(2, 2.5)
///     .with_competitors(Competitors::Workers)
///     .with_quantum(Duration::from_millis(4))
///     .with_extension(Duration::from_micros(400));
/// assert_eq!(cfg.processes(), [3, 2]); // round(2.5 * 2) processes
/// assert_eq!(cfg.workers(), 5); // every one a worker
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Config {
    /// Who the competing processes are.
    pub competitors: Competitors,
    /// Virtual processors, one worker each.
    pub processors: usize,
    /// Multiprogramming level: processes per processor (1.0 or more).
    pub level: f64,
    /// Mean quantum.
    pub quantum: Duration,
    /// Random variation of each quantum, as a fraction (0.1: +/-10%).
    pub jitter: f64,
    /// How long a non-preemption request is honoured (once per quantum).
    pub extension: Duration,
    /// Seed of the jitter.
    pub seed: u64,
}

impl Config {
    /// `processors` workers at `level`, SMARTQ's 20 ms quantum with 10%
    /// jitter and a 1 ms extension.
    pub fn new(processors: usize, level: f64) -> Config {
        Config {
            competitors: Competitors::Simulated,
            processors,
            level,
            quantum: Duration::from_millis(20),
            jitter: 0.1,
            extension: Duration::from_millis(1),
            seed: 0x5eed,
        }
    }

    /// Sets [`competitors`](Config::competitors).
    #[must_use]
    pub fn with_competitors(mut self, competitors: Competitors) -> Config {
        self.competitors = competitors;
        self
    }

    /// Sets the mean [`quantum`](Config::quantum).
    #[must_use]
    pub fn with_quantum(mut self, quantum: Duration) -> Config {
        self.quantum = quantum;
        self
    }

    /// Sets the quantum's [`jitter`](Config::jitter).
    #[must_use]
    pub fn with_jitter(mut self, jitter: f64) -> Config {
        self.jitter = jitter;
        self
    }

    /// Sets the non-preemption [`extension`](Config::extension).
    #[must_use]
    pub fn with_extension(mut self, extension: Duration) -> Config {
        self.extension = extension;
        self
    }

    /// Sets the jitter's [`seed`](Config::seed).
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Config {
        self.seed = seed;
        self
    }

    /// Processes (the worker plus simulated ones) on each processor:
    /// `round(level * processors)` in all, spread as evenly as possible.
    pub fn processes(&self) -> Vec<usize> {
        let p = self.processors.max(1);
        let total = ((self.level * p as f64).round() as usize).max(p);
        (0..p)
            .map(|i| total / p + usize::from(i < total % p))
            .collect()
    }

    /// Worker threads the emulation runs: one per processor with
    /// simulated competitors, one per process otherwise.
    pub fn workers(&self) -> usize {
        match self.competitors {
            Competitors::Simulated => self.processors.max(1),
            Competitors::Workers => self.processes().iter().sum(),
        }
    }

    /// Each processor's round-robin: worker indices, `None` for a
    /// simulated process.
    fn rings(&self) -> Vec<Vec<Option<usize>>> {
        let p = self.processors.max(1);
        self.processes()
            .iter()
            .enumerate()
            .map(|(i, &n)| match self.competitors {
                Competitors::Simulated => {
                    let mut ring = vec![Some(i)];
                    ring.resize(n, None);
                    ring
                }
                Competitors::Workers => (0..n).map(|k| Some(i + k * p)).collect(),
            })
            .collect()
    }

    /// The levels this many processors can give between 1 and `max`: the
    /// multiples of `1 / processors`, every `step`-th of them.
    pub fn levels(processors: usize, max: f64, step: usize) -> Vec<f64> {
        let p = processors.max(1);
        let top = (max * p as f64).round() as usize;
        (p..=top)
            .step_by(step.max(1))
            .map(|n| n as f64 / p as f64)
            .collect()
    }

    fn check(&self) -> Result<(), Error> {
        let bad = |why: String| Err(Error::Config(why));
        if !(1..=1024).contains(&self.processors) {
            return bad(format!(
                "processors must be 1..=1024, got {}",
                self.processors
            ));
        }
        if !self.level.is_finite() || !(1.0..=64.0).contains(&self.level) {
            return bad(format!("level must be in 1.0..=64.0, got {}", self.level));
        }
        if self.quantum < Duration::from_micros(100) || self.quantum > Duration::from_secs(10) {
            return bad(format!(
                "quantum must be 100 us..=10 s, got {:?}",
                self.quantum
            ));
        }
        if !(0.0..0.9).contains(&self.jitter) {
            return bad(format!("jitter must be in 0.0..0.9, got {}", self.jitter));
        }
        if self.extension > self.quantum {
            return bad(format!(
                "extension ({:?}) must not exceed the quantum ({:?})",
                self.extension, self.quantum
            ));
        }
        Ok(())
    }
}

/// Why an emulation could not run.
#[derive(Debug)]
pub enum Error {
    /// A [`Config`] field is out of range.
    Config(String),
    /// The preemption signal could not be installed or sent.
    Os(std::io::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Config(why) => write!(f, "emulated scheduler: {why}"),
            Error::Os(e) => write!(f, "emulated scheduler: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// What one worker experienced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Time spent descheduled.
    pub preempted: Duration,
    /// Times descheduled.
    pub preemptions: u64,
    /// Non-preemption requests honoured (quanta extended).
    pub extensions: u64,
}

/// One worker as the scheduler sees it.
#[derive(Debug)]
struct Worker {
    /// The worker thread's context block (set before the schedule starts).
    cb: AtomicPtr<ContextBlock>,
    /// The worker thread, for `pthread_kill`.
    thread: AtomicU64,
    /// Futex word: 1 while the scheduler wants the worker off its
    /// processor, 0 while it may run.
    off: AtomicU32,
    /// The next signal deschedules whatever the state (extension used).
    force: AtomicBool,
    /// The worker finished its work (it waits for the end of the run).
    done: AtomicBool,
    /// The worker is blocked in `deschedule`.
    parked: AtomicBool,
    preempted_ns: AtomicU64,
    preemptions: AtomicU64,
    extensions: AtomicU64,
}

std::thread_local! {
    /// The worker record of the calling thread while it runs in an
    /// emulation; null otherwise. Const-initialized without a destructor,
    /// so reading it from the signal handler takes no lock and allocates
    /// nothing.
    static WORKER: Cell<*const Worker> = const { Cell::new(ptr::null()) };
}

impl Worker {
    fn new() -> Worker {
        Worker {
            cb: AtomicPtr::new(ptr::null_mut()),
            thread: AtomicU64::new(0),
            off: AtomicU32::new(0),
            force: AtomicBool::new(false),
            done: AtomicBool::new(false),
            parked: AtomicBool::new(false),
            preempted_ns: AtomicU64::new(0),
            preemptions: AtomicU64::new(0),
            extensions: AtomicU64::new(0),
        }
    }

    fn cb(&self) -> &ContextBlock {
        // SAFETY: set by the worker before the schedule starts; the block
        // lives as long as the worker thread, which outlives the schedule.
        unsafe { &*self.cb.load(Ordering::Acquire) }
    }

    /// The kernel's side of a preemption, run on the worker's own thread
    /// (from the signal handler, or from `yield_now` with `from_signal`
    /// false). Async-signal-safe: atomics, `clock_gettime` and futex only.
    fn deschedule(&self, from_signal: bool) {
        // Acquire: pairs with the scheduler's Release stores of `off`.
        if self.done.load(Ordering::Relaxed) || self.off.load(Ordering::Acquire) == 0 {
            if !from_signal {
                // A yield after the scheduler already took and gave back
                // the processor: the warning belongs to an old quantum.
                self.cb().clear_warning();
            }
            return;
        }
        let cb = self.cb();
        let previous = match cb.try_preempt() {
            Ok(()) => State::Preemptable,
            // Already descheduled by an outer frame (a yield in progress).
            Err(State::Preempted) => return,
            Err(_) if self.force.load(Ordering::Acquire) => cb.force_preempt(),
            Err(_) => {
                // Honour the request once in this quantum.
                cb.warn();
                self.extensions.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let start = Instant::now();
        self.parked.store(true, Ordering::Release);
        while self.off.load(Ordering::Acquire) == 1 {
            Futex::wait(&(), &self.off, 1);
        }
        self.parked.store(false, Ordering::Release);
        self.preempted_ns
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.preemptions.fetch_add(1, Ordering::Relaxed);
        cb.resume(previous);
    }

    fn stats(&self) -> WorkerStats {
        WorkerStats {
            preempted: Duration::from_nanos(self.preempted_ns.load(Ordering::Relaxed)),
            preemptions: self.preemptions.load(Ordering::Relaxed),
            extensions: self.extensions.load(Ordering::Relaxed),
        }
    }
}

/// The preemption signal.
fn signal() -> libc::c_int {
    libc::SIGRTMIN() + 1
}

extern "C" fn on_signal(_sig: libc::c_int) {
    // SAFETY: errno is thread-local; saved and restored around the
    // handler so the interrupted code never sees our futex's errno.
    let errno = unsafe { *libc::__errno_location() };
    if let Ok(w) = WORKER.try_with(Cell::get)
        && !w.is_null()
    {
        // SAFETY: registered workers outlive their registration.
        unsafe { &*w }.deschedule(true);
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Installs the handler once per process.
fn install() -> Result<(), Error> {
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
    let r = INSTALLED.get_or_init(|| {
        // SAFETY: a zeroed sigaction is valid; we set the handler, an
        // empty mask and SA_RESTART so interrupted system calls resume.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(signal(), &sa, ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
            }
        }
        Ok(())
    });
    r.map_err(|e| Error::Os(std::io::Error::from_raw_os_error(e)))
}

/// A quantum of `mean` +/- `jitter`, drawn from `rng`.
fn quantum(rng: &mut SplitMix64, mean: Duration, jitter: f64) -> Duration {
    mean.mul_f64(1.0 + jitter * (2.0 * rng.unit() - 1.0))
}

/// Where a processor is in its round-robin.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// The current slot runs until the processor's `next`.
    Running,
    /// The current slot's worker was asked to leave; `next` is the end of
    /// its extension.
    Leaving,
}

/// One virtual processor's round-robin.
struct Proc<'a> {
    ring: &'a [Option<usize>],
    slot: usize,
    phase: Phase,
    next: Instant,
}

/// Runs `work(i)` on [`Config::workers`] worker threads, multiprogrammed
/// at `cfg.level`, and returns each worker's result with what it experienced.
/// The locks the workers use must take [`Emulated`] as their scheduler for
/// their non-preemption requests to be seen.
///
/// ```
/// use symmetry_locks::sched::emulated::{self, Config};
/// use std::time::Duration;
///
/// let cfg = Config::new(2, 2.0).with_quantum(Duration::from_millis(2));
/// let out = emulated::run(&cfg, |i| {
///     let t = std::time::Instant::now();
///     while t.elapsed() < Duration::from_millis(30) {}
///     i
/// })
/// .unwrap();
/// assert_eq!(out.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [0, 1]);
/// // Each worker was descheduled about half of the time.
/// assert!(out.iter().all(|(_, s)| s.preemptions > 0));
/// ```
pub fn run<R: Send>(
    cfg: &Config,
    work: impl Fn(usize) -> R + Sync,
) -> Result<Vec<(R, WorkerStats)>, Error> {
    cfg.check()?;
    install()?;
    let p = cfg.workers();
    let rings = cfg.rings();
    let workers: Vec<Worker> = (0..p).map(|_| Worker::new()).collect();
    // Workers that are not first in their processor's ring start
    // descheduled.
    for ring in &rings {
        for w in ring.iter().skip(1).flatten() {
            workers[*w].off.store(1, Ordering::Relaxed);
        }
    }
    let start = Barrier::new(p + 1);
    let end = Barrier::new(p + 1);
    let sig = signal();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..p)
            .map(|i| {
                let (w, start, end, work) = (&workers[i], &start, &end, &work);
                s.spawn(move || {
                    let cb = super::current();
                    w.cb.store(ptr::from_ref(cb).cast_mut(), Ordering::Release);
                    // SAFETY: pthread_self has no preconditions.
                    w.thread
                        .store(unsafe { libc::pthread_self() } as u64, Ordering::Release);
                    WORKER.with(|c| c.set(w));
                    start.wait();
                    // Not first in its ring: wait for its first quantum.
                    w.deschedule(false);
                    // Done, even if `work` panics: the scheduler must not
                    // wait for this worker, nor the others at the barrier.
                    let _finish = Finish { w, end };
                    work(i)
                })
            })
            .collect();
        start.wait();
        schedule(cfg, &rings, &workers, sig);
        end.wait();
        let results: Vec<R> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect();
        Ok(results
            .into_iter()
            .zip(&workers)
            .map(|(r, w)| (r, w.stats()))
            .collect())
    })
}

/// Marks a worker done and keeps it alive (and registered) until the
/// scheduler has stopped signalling; runs on return and on unwind.
struct Finish<'a> {
    w: &'a Worker,
    end: &'a Barrier,
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.w.done.store(true, Ordering::Release);
        self.end.wait();
        WORKER.with(|c| c.set(ptr::null()));
    }
}

/// The scheduler thread's loop: returns once every worker is done, with
/// every worker resumed.
fn schedule(cfg: &Config, rings: &[Vec<Option<usize>>], workers: &[Worker], sig: libc::c_int) {
    let mut rng = SplitMix64::new(cfg.seed);
    let now = Instant::now();
    // Random phases, so processors do not switch in lock step.
    let mut procs: Vec<Proc<'_>> = rings
        .iter()
        .map(|ring| Proc {
            ring,
            slot: 0,
            phase: Phase::Running,
            next: now + cfg.quantum.mul_f64(rng.unit()),
        })
        .collect();
    // Only to notice that the workers are done (they time themselves), so
    // long: at level 1.0 every wake-up takes a core from a worker.
    let poll = Duration::from_millis(10);
    let done = |w: usize| workers[w].done.load(Ordering::Acquire);
    while !(0..workers.len()).all(done) {
        let now = Instant::now();
        for p in procs
            .iter_mut()
            .filter(|p| p.ring.len() > 1 && p.next <= now)
        {
            let current = p.ring[p.slot].filter(|&w| !done(w));
            match (p.phase, current) {
                (Phase::Running, Some(w)) => {
                    let w = &workers[w];
                    w.force.store(false, Ordering::Release);
                    // Release: the handler's Acquire load of `off` sees
                    // `force` as set above.
                    w.off.store(1, Ordering::Release);
                    kill(w, sig);
                    p.phase = Phase::Leaving;
                    p.next = now + cfg.extension;
                    continue;
                }
                (Phase::Leaving, Some(w)) if !workers[w].parked.load(Ordering::Acquire) => {
                    workers[w].force.store(true, Ordering::Release);
                    kill(&workers[w], sig);
                }
                _ => {}
            }
            // The next process of the ring gets the processor.
            p.slot = (p.slot + 1) % p.ring.len();
            if let Some(w) = p.ring[p.slot] {
                resume(&workers[w]);
            }
            p.phase = Phase::Running;
            p.next = now + quantum(&mut rng, cfg.quantum, cfg.jitter);
        }
        let wake = procs
            .iter()
            .filter(|p| p.ring.len() > 1)
            .map(|p| p.next)
            .min()
            .unwrap_or(now + poll)
            .min(now + poll);
        if let Some(d) = wake.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    for w in workers {
        resume(w);
    }
}

fn resume(w: &Worker) {
    // SAFETY-free: plain atomics. The warning of the old quantum goes.
    w.cb().clear_warning();
    w.force.store(false, Ordering::Release);
    // Release: pairs with the Acquire load in `deschedule`.
    w.off.store(0, Ordering::Release);
    Futex::wake_one(&(), &w.off);
}

fn kill(w: &Worker, sig: libc::c_int) {
    let t = w.thread.load(Ordering::Acquire) as libc::pthread_t;
    // SAFETY: the worker thread is alive: it waits at the end barrier until
    // the schedule is over, and `t` is its own pthread_self.
    unsafe {
        libc::pthread_kill(t, sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_follow_the_paper() {
        assert_eq!(Config::new(4, 1.0).processes(), [1, 1, 1, 1]);
        assert_eq!(Config::new(4, 2.0).processes(), [2, 2, 2, 2]);
        assert_eq!(Config::new(5, 1.4).processes(), [2, 2, 1, 1, 1]);
        assert_eq!(Config::new(2, 1.5).processes(), [2, 1]);
        assert_eq!(Config::levels(2, 2.0, 1), [1.0, 1.5, 2.0]);
        assert_eq!(Config::levels(1, 4.0, 1), [1.0, 2.0, 3.0, 4.0]);
        let c = Config::new(2, 1.5);
        assert_eq!(c.workers(), 2);
        assert_eq!(c.rings(), [vec![Some(0), None], vec![Some(1)]]);
        let c = Config {
            competitors: Competitors::Workers,
            ..Config::new(2, 2.5)
        };
        assert_eq!(c.workers(), 5);
        assert_eq!(
            c.rings(),
            [vec![Some(0), Some(2), Some(4)], vec![Some(1), Some(3)]]
        );
    }

    #[test]
    fn bad_configs_are_errors() {
        for cfg in [
            Config::new(0, 1.0),
            Config::new(2, 0.5),
            Config::new(2, f64::NAN),
            Config {
                jitter: 2.0,
                ..Config::new(2, 1.0)
            },
            Config {
                extension: Duration::from_secs(1),
                ..Config::new(2, 1.0)
            },
        ] {
            let e = run(&cfg, |_| ()).unwrap_err();
            assert!(matches!(e, Error::Config(_)), "{e}");
        }
    }
}
