//! SMARTQ §4.1's synthetic program, generic over the lock: each worker
//! loops over a non-critical section and a critical section that updates
//! a shared counter, with a little random variation in both lengths.
//! SMARTQ ran a fixed number of iterations; runs here are bounded by time
//! and count the iterations that end inside the window, so the time per
//! iteration is the paper's completion time over its iterations. The same
//! loop runs on the emulated multiprogramming scheduler
//! (workers = virtual processors) or on plain OS threads under the
//! kernel's own scheduler.

use std::cell::UnsafeCell;
use std::time::{Duration, Instant};

use lock_api::RawMutex;
use symmetry_locks::platform::rng::SplitMix64;
use symmetry_locks::sched::emulated;

use crate::kernels::locks::{local_work, pin_to, work_iters_for_ns};

/// One run of the synthetic loop.
#[derive(Debug, Clone)]
pub struct LoopCfg {
    /// Workers (OS threads).
    pub workers: usize,
    /// Critical-section length (ns of local work).
    pub cs_ns: f64,
    /// Non-critical-section length (ns of local work).
    pub ncs_ns: f64,
    /// Random variation of both lengths, as a fraction.
    pub variation: f64,
    /// Wall-clock bound: workers stop at the first iteration past it.
    pub budget: Duration,
    /// Time each phase (work, acquire, critical section, release): four
    /// clock reads per iteration, for `pq-breakdown` only.
    pub phases: bool,
    /// Pin worker `i` to the allowed CPU of its virtual processor,
    /// `i mod processors` (given here), modulo the allowed CPUs.
    pub pin: Option<usize>,
}

/// Where the workers' time went (sums over workers, descheduled time
/// excluded from each phase when the emulation reports it).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Phases {
    /// Non-critical work.
    pub work: Duration,
    /// Inside `lock`.
    pub acquire: Duration,
    /// Inside the critical section.
    pub cs: Duration,
    /// Inside `unlock`.
    pub release: Duration,
    /// Descheduled by the emulation.
    pub preempted: Duration,
}

/// What one run measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoopOut {
    /// Iterations that ended inside the budget.
    pub iterations: u64,
    /// The budget: the window the iterations were counted in.
    pub elapsed: Duration,
    /// Phase times, if requested.
    pub phases: Phases,
    /// Non-preemption requests the emulation honoured.
    pub extensions: u64,
}

impl LoopOut {
    /// Microseconds of wall time per iteration.
    pub fn us_per_iteration(&self) -> f64 {
        self.elapsed.as_secs_f64() * 1e6 / self.iterations.max(1) as f64
    }
}

struct Shared<R> {
    lock: R,
    counter: UnsafeCell<u64>,
}

// SAFETY: `counter` is only touched with `lock` held.
unsafe impl<R: Sync> Sync for Shared<R> {}

/// About `iters`, varied uniformly by +/- `variation` (a fraction).
fn around(rng: &mut SplitMix64, iters: u64, variation: f64) -> u64 {
    (iters as f64 * (1.0 + variation * (2.0 * rng.unit() - 1.0))).round() as u64
}

/// The body of worker `i`: (iterations done inside the window, phases).
fn worker<R: RawMutex + Sync>(
    s: &Shared<R>,
    cfg: &LoopCfg,
    i: usize,
    start: Instant,
) -> (u64, Phases) {
    if let Some(p) = cfg.pin {
        pin_processor(i, p);
    }
    let (cs, ncs) = (work_iters_for_ns(cfg.cs_ns), work_iters_for_ns(cfg.ncs_ns));
    let mut rng = SplitMix64::new(i as u64 + 1);
    let deadline = start + cfg.budget;
    let mut done = 0;
    let mut ph = Phases::default();
    let mut mark = Mark::now(cfg.phases);
    loop {
        let n = around(&mut rng, ncs, cfg.variation);
        let c = around(&mut rng, cs, cfg.variation);
        std::hint::black_box(local_work(n));
        mark.lap(&mut ph.work);
        let guard = s.lock.lock();
        mark.lap(&mut ph.acquire);
        // SAFETY: we hold the lock.
        unsafe { *s.counter.get() += 1 };
        std::hint::black_box(local_work(c));
        mark.lap(&mut ph.cs);
        // SAFETY: held with `guard`.
        unsafe { s.lock.unlock(guard) };
        mark.lap(&mut ph.release);
        // Only iterations that end inside the window count: a worker
        // descheduled across the deadline must not stretch the run.
        if Instant::now() > deadline {
            break;
        }
        done += 1;
    }
    (done, ph)
}

/// A phase clock: wall time since the last lap minus the time the
/// emulation kept the worker descheduled meanwhile (a no-op when phases
/// are not timed).
struct Mark(Option<(Instant, Duration)>);

impl Mark {
    fn now(on: bool) -> Mark {
        Mark(on.then(|| (Instant::now(), emulated::preempted_so_far())))
    }

    #[inline]
    fn lap(&mut self, acc: &mut Duration) {
        if let Some((t, p)) = &mut self.0 {
            let (t1, p1) = (Instant::now(), emulated::preempted_so_far());
            *acc += (t1 - *t).saturating_sub(p1 - *p);
            (*t, *p) = (t1, p1);
        }
    }
}

/// Pins worker `i` to the allowed CPU of virtual processor `i mod p`.
fn pin_processor(i: usize, p: usize) {
    let cpus = crate::kernels::locks::allowed_cpus();
    if !cpus.is_empty() {
        pin_to(cpus[(i % p.max(1)) % cpus.len()]);
    }
}

fn finish(out: Vec<((u64, Phases), Duration)>, cfg: &LoopCfg) -> LoopOut {
    let mut o = LoopOut {
        elapsed: cfg.budget,
        ..LoopOut::default()
    };
    for ((n, ph), pre) in out {
        o.iterations += n;
        o.phases.work += ph.work;
        o.phases.acquire += ph.acquire;
        o.phases.cs += ph.cs;
        o.phases.release += ph.release;
        o.phases.preempted += pre;
    }
    o
}

/// Runs the loop on `cfg.workers` OS threads under the kernel's scheduler.
pub fn on_os_threads<R: RawMutex + Sync>(cfg: &LoopCfg) -> LoopOut {
    let s = Shared {
        lock: R::INIT,
        counter: UnsafeCell::new(0),
    };
    let gate = std::sync::Barrier::new(cfg.workers);
    let start = std::sync::OnceLock::new();
    let out: Vec<_> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..cfg.workers)
            .map(|i| {
                let (s, gate, start) = (&s, &gate, &start);
                sc.spawn(move || {
                    gate.wait();
                    let t0 = *start.get_or_init(Instant::now);
                    (worker(s, cfg, i, t0), Duration::ZERO)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("synthetic worker panicked"))
            .collect()
    });
    finish(out, cfg)
}

/// Runs the loop on the workers of the emulated multiprogramming
/// scheduler `emu` (`cfg.workers` is ignored: the emulation decides).
pub fn emulated<R: RawMutex + Sync>(
    cfg: &LoopCfg,
    emu: &emulated::Config,
) -> Result<LoopOut, String> {
    let s = Shared {
        lock: R::INIT,
        counter: UnsafeCell::new(0),
    };
    let start = std::sync::OnceLock::new();
    let cfg = &LoopCfg {
        workers: emu.workers(),
        pin: Some(emu.processors),
        ..cfg.clone()
    };
    let out = emulated::run(emu, |i| {
        worker(&s, cfg, i, *start.get_or_init(Instant::now))
    })
    .map_err(|e| e.to_string())?;
    let extensions = out.iter().map(|(_, st)| st.extensions).sum();
    let out: Vec<_> = out.into_iter().map(|(r, st)| (r, st.preempted)).collect();
    let mut o = finish(out, cfg);
    o.extensions = extensions;
    Ok(o)
}

/// One run of an application (SMARTQ §4.4) on the emulated scheduler.
#[derive(Debug, Clone, Copy, Default)]
pub struct AppOut {
    /// Completion time; with `stopped`, the time at which the run was
    /// stopped (a lower bound of its completion time).
    pub elapsed: Duration,
    /// Lock acquisitions the run made.
    pub acquisitions: u64,
    /// Time the workers spent descheduled, summed.
    pub preempted: Duration,
    /// Whether the run was stopped at its time limit, unfinished (and so
    /// not verified).
    pub stopped: bool,
}

impl AppOut {
    /// Completion time in milliseconds.
    pub fn ms(&self) -> f64 {
        self.elapsed.as_secs_f64() * 1e3
    }
}

/// Runs `work` on every worker of the emulation, timing from the first
/// worker's start to the last worker's end. With a `limit`, a watchdog
/// calls `stop` once the limit has passed and the workers have not all
/// returned (the application then makes its workers return unfinished).
fn app_run(
    emu: &emulated::Config,
    limit: Option<Duration>,
    stop: impl Fn() + Sync,
    work: impl Fn() + Sync,
) -> Result<(Duration, Duration), String> {
    let start = std::sync::OnceLock::new();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let out = std::thread::scope(|scope| {
        if let Some(limit) = limit {
            let stop = &stop;
            scope.spawn(move || {
                // Disconnected (the run returned first) means no stop.
                if finished.recv_timeout(limit) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                    stop();
                }
            });
        }
        let out = emulated::run(emu, |i| {
            pin_processor(i, emu.processors);
            let _ = start.get_or_init(Instant::now);
            work();
            Instant::now()
        });
        drop(done);
        out
    })
    .map_err(|e| e.to_string())?;
    let t0 = *start.get().expect("workers started");
    let end = out.iter().map(|(t, _)| *t).max().unwrap_or(t0);
    Ok((end - t0, out.iter().map(|(_, s)| s.preempted).sum()))
}

/// Cholesky's matrix order and block for `pq-apps`: some 15,000 lock
/// acquisitions around tasks of tens of microseconds, tens of
/// milliseconds in all on two processors.
pub const CHOLESKY_N: usize = 1024;
/// See [`CHOLESKY_N`].
pub const CHOLESKY_BLOCK: usize = 32;
/// Quicksort's array length for `pq-apps` (some 7,000 lock
/// acquisitions).
pub const QUICKSORT_LEN: usize = 1_500_000;

/// Cholesky factorization ([`CHOLESKY_N`]) with lock `R`, stopped
/// unfinished once `limit` (if any) has passed. A finished result is
/// verified.
pub fn cholesky<R: RawMutex + Send + Sync>(
    emu: &emulated::Config,
    limit: Option<Duration>,
) -> Result<AppOut, String> {
    use symmetry_workloads::cholesky::Cholesky;
    let app = Cholesky::<R>::new(CHOLESKY_N, CHOLESKY_BLOCK, 0x5eed);
    let (elapsed, preempted) = app_run(emu, limit, || app.stop(), || app.work())?;
    if !app.stopped() {
        app.verify()
            .map_err(|e| format!("cholesky: wrong result: {e}"))?;
    }
    Ok(AppOut {
        elapsed,
        acquisitions: app.lock_acquisitions(),
        preempted,
        stopped: app.stopped(),
    })
}

/// Parallel quicksort ([`QUICKSORT_LEN`]) with lock `R`, stopped
/// unfinished once `limit` (if any) has passed. A finished result is
/// verified.
pub fn quicksort<R: RawMutex + Send + Sync>(
    emu: &emulated::Config,
    limit: Option<Duration>,
) -> Result<AppOut, String> {
    use symmetry_workloads::quicksort::Quicksort;
    let app = Quicksort::<R>::new(QUICKSORT_LEN, 0x5eed);
    let (elapsed, preempted) = app_run(emu, limit, || app.stop(), || app.work())?;
    if !app.stopped() {
        app.verify()
            .map_err(|e| format!("quicksort: wrong result: {e}"))?;
    }
    Ok(AppOut {
        elapsed,
        acquisitions: app.lock_acquisitions(),
        preempted,
        stopped: app.stopped(),
    })
}

/// SMARTQ's synthetic critical section (SGI runs, §4.2): about 15 us.
pub const PAPER_CS_NS: f64 = 15_000.0;
/// SMARTQ's non-critical section on the SGI: about 150 us.
pub const PAPER_NCS_NS: f64 = 150_000.0;
/// Processors of SMARTQ's SGI runs.
pub const PAPER_PROCESSORS: f64 = 7.0;

/// The non-critical section that gives `p` processors the lock load of
/// SMARTQ's SGI runs: there, 7 processors each wanting the lock for 15 of
/// every 165 us kept it busy 64% of the time if nobody waited. Keeping
/// that load with `p` processors: `ncs = cs * (p * 165 / (7 * 15) - 1)`
/// (150 us at p = 7; 0 at p = 1, where there is no contention to scale).
pub fn scaled_ncs_ns(p: usize) -> f64 {
    let load = PAPER_PROCESSORS * PAPER_CS_NS / (PAPER_CS_NS + PAPER_NCS_NS);
    (PAPER_CS_NS * (p as f64 / load - 1.0)).max(0.0)
}

/// The emulated scheduler's quantum for these experiments. SMARTQ used
/// 20 ms for runs of tens of seconds; runs here last a fraction of a
/// second, so the quantum is scaled down to give each run dozens of
/// quanta, still more than 300 critical sections long.
pub const QUANTUM: Duration = Duration::from_millis(5);

/// The emulated scheduler for `p` virtual processors at `level`, every
/// process a worker of the application (so `round(level * p)` workers).
pub fn emu_config(p: usize, level: f64, seed: u64) -> emulated::Config {
    emulated::Config::new(p, level)
        .with_competitors(emulated::Competitors::Workers)
        .with_quantum(QUANTUM)
        .with_extension(QUANTUM / 10)
        .with_seed(seed)
}

/// The synthetic loop for `p` workers, budget-bounded.
pub fn loop_cfg(p: usize, ncs_ns: f64, budget: Duration, phases: bool) -> LoopCfg {
    LoopCfg {
        workers: p,
        cs_ns: PAPER_CS_NS,
        ncs_ns,
        variation: 0.1,
        budget,
        phases,
        pin: Some(p),
    }
}
