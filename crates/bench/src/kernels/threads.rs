//! Thread-management kernels on symmetry-threads, shared by the `tm-*`,
//! `presto-create-start-delete` and `peer-threads` experiments (which run
//! them by strategy name through `registry::threads`).
//!
//! [`null_chain`] is ALL89 Table III: P chains run at once; each thread
//! increments its chain's count and, unless the chain has run its share
//! (total / P), creates the next thread, then finishes. Here the
//! per-processor count of the paper travels with the chain (a thread may
//! run on any processor), and the initial threads are created by a first
//! user thread, as the paper's main program does. The timer starts before
//! that first thread is created and stops when the last chain ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use symmetry_threads::{
    Builder, DefaultProcessor, Processor, ShutdownReport, Strategy, spawn_detached_here,
};

use crate::kernels::locks::local_work;

/// Parameters of a chain run.
#[derive(Debug, Clone, Copy)]
pub struct ChainCfg {
    /// Processors of the runtime.
    pub processors: usize,
    /// Threads in all (split evenly over `processors` chains).
    pub total: u64,
    /// Mean user work per thread, in `local_work` iterations; each thread
    /// draws uniformly from `0..=2*mean` (ALL89 Fig. 3). 0: null threads.
    pub work_iters: u64,
    /// Wall-clock budget; chains stop early past it.
    pub budget: Duration,
    /// Pin processors to CPUs.
    pub pin: bool,
}

/// What a chain run measured.
#[derive(Debug, Clone, Copy)]
pub struct ChainOut {
    /// Threads that ran.
    pub threads: u64,
    /// From the first create to the end of the last chain.
    pub elapsed: Duration,
    /// Whether every chain ran its share within the budget.
    pub completed: bool,
    /// The runtime's counters and free-list census at shutdown.
    pub report: ShutdownReport,
}

impl ChainOut {
    /// Nanoseconds per thread (create + start + finish, plus work).
    pub fn ns_per_thread(&self) -> f64 {
        self.elapsed.as_nanos() as f64 / self.threads.max(1) as f64
    }
}

struct Ctl {
    t0: Instant,
    stop: AtomicBool,
    chains_left: AtomicUsize,
    ran: AtomicU64,
    end_ns: AtomicU64,
    waiter: std::thread::Thread,
    work_iters: u64,
}

#[derive(Clone, Copy)]
struct CtlPtr(*const Ctl);
// SAFETY: `Ctl` is Sync and outlives every thread that holds the pointer
// (the kernel keeps it alive until all chains end, or leaks it).
unsafe impl Send for CtlPtr {}

impl CtlPtr {
    fn get(&self) -> &Ctl {
        // SAFETY: see the Send impl.
        unsafe { &*self.0 }
    }
}

fn link<S: Strategy, P: Processor>(ctl: CtlPtr, left: u64, ran: u64, mut rng: u64) {
    let c = ctl.get();
    if c.work_iters > 0 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let iters = ((u128::from(rng) * u128::from(2 * c.work_iters + 1)) >> 64) as u64;
        std::hint::black_box(local_work(iters));
    }
    // Relaxed: the stop flag is a hint; late links are simply counted.
    if left > 1 && !c.stop.load(Ordering::Relaxed) {
        let spawned =
            spawn_detached_here::<S, P, _>(move || link::<S, P>(ctl, left - 1, ran + 1, rng));
        if spawned.is_ok() {
            return;
        }
    }
    // Chain end.
    c.ran.fetch_add(ran, Ordering::Relaxed);
    let now = c.t0.elapsed().as_nanos() as u64;
    c.end_ns.fetch_max(now, Ordering::Relaxed);
    // AcqRel: the last chain's decrement publishes every chain's counts to
    // the waiter's Acquire load.
    if c.chains_left.fetch_sub(1, Ordering::AcqRel) == 1 {
        c.waiter.unpark();
    }
}

/// ALL89 Table III on strategy `S` with the default processor.
pub fn null_chain<S: Strategy>(cfg: &ChainCfg) -> ChainOut {
    null_chain_with::<S, DefaultProcessor>(cfg)
}

/// ALL89 Table III on strategy `S` and processor `P`.
pub fn null_chain_with<S: Strategy, P: Processor>(cfg: &ChainCfg) -> ChainOut {
    let p = cfg.processors.max(1);
    let mut rt = Builder::<S, P>::default()
        .processors(p)
        .pin(cfg.pin)
        .warm(4 * p, 2 * p)
        .build()
        .expect("runtime");
    let per = (cfg.total / p as u64).max(1);
    let ctl = Arc::new(Ctl {
        t0: Instant::now(),
        stop: AtomicBool::new(false),
        chains_left: AtomicUsize::new(p),
        ran: AtomicU64::new(0),
        end_ns: AtomicU64::new(0),
        waiter: std::thread::current(),
        work_iters: cfg.work_iters,
    });
    let ptr = CtlPtr(Arc::as_ptr(&ctl));
    // The clock starts at `ctl.t0`, just before the first create.
    let t0 = ctl.t0;
    rt.handle().spawn_detached(move || {
        for i in 1..p {
            let seed = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(i as u64 + 1) | 1;
            let _ = spawn_detached_here::<S, P, _>(move || link::<S, P>(ptr, per, 1, seed));
        }
        link::<S, P>(ptr, per, 1, 0x2545_F491_4F6C_DD1D);
    });
    let deadline = t0 + cfg.budget;
    // Acquire: pairs with the last chain's AcqRel decrement.
    while ctl.chains_left.load(Ordering::Acquire) != 0 {
        let now = Instant::now();
        if now >= deadline {
            ctl.stop.store(true, Ordering::Relaxed);
            if now >= deadline + Duration::from_secs(2) {
                break;
            }
            std::thread::park_timeout(Duration::from_millis(5));
        } else {
            std::thread::park_timeout(deadline - now);
        }
    }
    let finished = ctl.chains_left.load(Ordering::Acquire) == 0;
    let ran = ctl.ran.load(Ordering::Relaxed);
    let end = Duration::from_nanos(ctl.end_ns.load(Ordering::Relaxed));
    let elapsed = end;
    let report = rt.shutdown();
    if !finished {
        // Some chain never ended (it cannot have, after shutdown, unless
        // abandoned): keep `Ctl` alive forever rather than risk a dangling
        // pointer in a leaked closure.
        std::mem::forget(Arc::clone(&ctl));
    }
    ChainOut {
        threads: ran,
        elapsed,
        completed: finished && ran >= per * p as u64 && !ctl.stop.load(Ordering::Relaxed),
        report,
    }
}
