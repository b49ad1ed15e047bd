//! Thread-management kernels on symmetry-threads, shared by the `tm-*`,
//! `presto-create-*` and `peer-threads` experiments (which run them by
//! strategy name through `registry::threads`).
//!
//! [`null_chain`] is ALL89 Table III: P chains run at once; each thread
//! increments its chain's count and, unless the chain has run its share
//! (total / P), creates the next thread, then finishes. Here the
//! per-processor count of the paper travels with the chain (a thread may
//! run on any processor), and the initial threads are created by a first
//! user thread, as the paper's main program does. The timer starts before
//! that first thread is created and stops when the last chain ends.
//! [`runnable_chains`] runs r such chains on P processors (ALL89 Fig. 4),
//! [`create_delete`] creates and deletes threads without starting them
//! (PRESTO Fig. 3), [`fresh_stack`] and [`pooled_stack`] time a stack made
//! fresh against one taken from a pool, and [`queue_search`] counts the
//! queues one dequeue examines (ALL89 Fig. 5).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use symmetry_threads::{
    Builder, DEFAULT_STACK_SIZE, DefaultProcessor, Fifo, Handle, LocalReadyq, Processor, Runtime,
    ShutdownReport, Stack, Strategy, Thread, spawn_detached_here,
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
    let rt = Builder::<S, P>::default()
        .processors(p)
        .pin(cfg.pin)
        .warm(4 * p, 2 * p)
        .build()
        .expect("runtime");
    let grace = Some(Duration::from_secs(2));
    chains_on(rt, p, cfg.total, cfg.work_iters, cfg.budget, grace)
}

/// ALL89 Fig. 4 on strategy `S`: `chains` chains of null threads (each
/// thread creates its successor and finishes) on `processors` processors,
/// `total` threads in all; `queues` ready queues where given.
pub fn runnable_chains<S: Strategy>(
    processors: usize,
    chains: usize,
    total: u64,
    queues: Option<usize>,
    budget: Duration,
) -> ChainOut {
    let (p, r) = (processors.max(1), chains.max(1));
    let mut b = Builder::<S>::default()
        .processors(p)
        .warm(4 * (p + r), 2 * (p + r));
    if let Some(q) = queues {
        b = b.queues(q);
    }
    chains_on(b.build().expect("runtime"), r, total, 0, budget, None)
}

/// Runs `chains` chains of `total / chains` threads on `rt` and shuts it
/// down; past `budget` the chains are asked to stop, and waited for at
/// most `grace` longer (without end where `None`).
fn chains_on<S: Strategy, P: Processor>(
    mut rt: Runtime<S, P>,
    chains: usize,
    total: u64,
    work_iters: u64,
    budget: Duration,
    grace: Option<Duration>,
) -> ChainOut {
    let per = (total / chains as u64).max(1);
    let ctl = Arc::new(Ctl {
        t0: Instant::now(),
        stop: AtomicBool::new(false),
        chains_left: AtomicUsize::new(chains),
        ran: AtomicU64::new(0),
        end_ns: AtomicU64::new(0),
        waiter: std::thread::current(),
        work_iters,
    });
    let ptr = CtlPtr(Arc::as_ptr(&ctl));
    // The clock starts at `ctl.t0`, just before the first create.
    rt.handle().spawn_detached(move || {
        for i in 1..chains {
            let seed = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(i as u64 + 1) | 1;
            let _ = spawn_detached_here::<S, P, _>(move || link::<S, P>(ptr, per, 1, seed));
        }
        link::<S, P>(ptr, per, 1, 0x2545_F491_4F6C_DD1D);
    });
    // Acquire: pairs with the last chain's AcqRel decrement.
    let finished = || ctl.chains_left.load(Ordering::Acquire) == 0;
    wait(finished, ctl.t0 + budget, &ctl.stop, grace);
    let finished = finished();
    let ran = ctl.ran.load(Ordering::Relaxed);
    let elapsed = Duration::from_nanos(ctl.end_ns.load(Ordering::Relaxed));
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
        completed: finished && ran >= per * chains as u64 && !ctl.stop.load(Ordering::Relaxed),
        report,
    }
}

/// Parks until `done()`; past `deadline`, raises `stop` (the loops' hint
/// to end early) and checks every 5 ms, for at most `grace` longer
/// (without end where `None`).
fn wait(done: impl Fn() -> bool, deadline: Instant, stop: &AtomicBool, grace: Option<Duration>) {
    while !done() {
        let now = Instant::now();
        if now >= deadline {
            stop.store(true, Ordering::Relaxed);
            if grace.is_some_and(|g| now >= deadline + g) {
                break;
            }
            std::thread::park_timeout(Duration::from_millis(5));
        } else {
            std::thread::park_timeout(deadline - now);
        }
    }
}

/// What one [`create_delete`] run measured.
#[derive(Debug, Clone, Copy)]
pub struct CreateDeleteOut {
    /// Threads created and deleted.
    pub threads: u64,
    /// From the last processor's arrival at the barrier to the last
    /// loop's end.
    pub elapsed: Duration,
    /// Whether every loop ran its share within the budget.
    pub completed: bool,
}

struct CreateCtl {
    arrived: AtomicUsize,
    /// Nanoseconds since `base` at which the last processor arrived.
    start_ns: AtomicU64,
    end_ns: AtomicU64,
    done: AtomicUsize,
    ran: AtomicU64,
    stop: AtomicBool,
    base: Instant,
    waiter: std::thread::Thread,
}

/// One processor's loop: create and delete `n` threads.
fn create_delete_loop<S: Strategy>(h: &Handle<S>, n: u64, stop: &AtomicBool) -> u64 {
    let mut i = 0;
    while i < n {
        // Relaxed: a hint, checked every 4096 threads.
        if i % 4096 == 0 && stop.load(Ordering::Relaxed) {
            break;
        }
        // Create (a control block with the null closure stored in it) and
        // delete (drop returns it to the free lists) without starting it.
        drop(std::hint::black_box(h.create(|| {})));
        i += 1;
    }
    i
}

/// PRESTO Fig. 3 on strategy `S`: each of `procs` processors runs one
/// user thread that creates and drops `total / procs` threads without
/// starting them, after a spin barrier, so that the loops overlap.
pub fn create_delete<S: Strategy>(procs: usize, total: u64, budget: Duration) -> CreateDeleteOut {
    let p = procs.max(1);
    let rt = Builder::<S>::default()
        .processors(p)
        .warm(4 * p, 0)
        .build()
        .expect("runtime");
    let per = total / p as u64;
    let ctl = Arc::new(CreateCtl {
        arrived: AtomicUsize::new(0),
        start_ns: AtomicU64::new(0),
        end_ns: AtomicU64::new(0),
        done: AtomicUsize::new(0),
        ran: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        base: Instant::now(),
        waiter: std::thread::current(),
    });
    for _ in 0..p {
        let (c, h) = (Arc::clone(&ctl), rt.handle());
        rt.spawn_detached(move || {
            // Spin barrier: none of these threads blocks, so all P
            // arriving means one runs on each processor. AcqRel/Acquire:
            // the arrivals order the start time's store before the loops.
            if c.arrived.fetch_add(1, Ordering::AcqRel) + 1 == p {
                c.start_ns
                    .store(c.base.elapsed().as_nanos() as u64, Ordering::Relaxed);
            }
            let mut spins = 0u32;
            while c.arrived.load(Ordering::Acquire) < p {
                spins += 1;
                if spins.is_multiple_of(1024) {
                    // More processors than cores: let the OS run the others.
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            let n = create_delete_loop(&h, per, &c.stop);
            c.ran.fetch_add(n, Ordering::Relaxed);
            c.end_ns
                .fetch_max(c.base.elapsed().as_nanos() as u64, Ordering::Relaxed);
            // AcqRel: the last one publishes every count to the waiter.
            if c.done.fetch_add(1, Ordering::AcqRel) + 1 == p {
                c.waiter.unpark();
            }
        });
    }
    // Acquire: pairs with the last AcqRel increment of `done`.
    let done = || ctl.done.load(Ordering::Acquire) >= p;
    wait(done, ctl.base + budget, &ctl.stop, None);
    drop(rt);
    let start = ctl.start_ns.load(Ordering::Relaxed);
    CreateDeleteOut {
        threads: ctl.ran.load(Ordering::Relaxed),
        elapsed: Duration::from_nanos(ctl.end_ns.load(Ordering::Relaxed).saturating_sub(start)),
        completed: !ctl.stop.load(Ordering::Relaxed),
    }
}

/// Nanoseconds per stack made as a mapping of its own: `mmap`, `mprotect`
/// of all but the guard page, `munmap` (a stack of its own per thread, as
/// runtimes without pools or slabs make it); with `touch`, plus one write
/// to the top page: the page fault a starting thread takes. Done with
/// libc: symmetry-threads itself carves stacks from slabs, whose take and
/// give are a free-list operation.
pub fn fresh_stack(iters: u64, touch: bool) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let len = DEFAULT_STACK_SIZE + page;
    let t = Instant::now();
    for _ in 0..iters {
        // SAFETY: an anonymous private mapping of `len` bytes, made
        // accessible above its first (guard) page, written at most once
        // inside that range, and unmapped by us alone; nothing else knows
        // the address.
        unsafe {
            let m = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert!(m != libc::MAP_FAILED, "mmap a stack");
            let usable = m.cast::<u8>().add(page);
            let rc = libc::mprotect(
                usable.cast(),
                DEFAULT_STACK_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
            );
            assert_eq!(rc, 0, "mprotect a stack");
            if touch {
                // The first frame goes at the top of the stack.
                usable.add(DEFAULT_STACK_SIZE - 64).write_volatile(1);
            }
            libc::munmap(m, len);
        }
    }
    t.elapsed().as_nanos() as f64 / iters as f64
}

/// Nanoseconds per pooled stack: pop one from a free list, push it back.
pub fn pooled_stack(iters: u64) -> f64 {
    let mut pool: Vec<Stack> = (0..4)
        .map(|_| Stack::new(DEFAULT_STACK_SIZE).expect("mmap a stack"))
        .collect();
    let t = Instant::now();
    for _ in 0..iters {
        let s = pool.pop().expect("pool is never empty");
        pool.push(std::hint::black_box(s));
    }
    t.elapsed().as_nanos() as f64 / iters as f64
}

/// The runtime of [`queue_search`].
type Rq = LocalReadyq<symmetry_locks::Tas, Fifo>;

/// State shared by the driver and the threads of one trial (reused).
struct Trial {
    handle: Handle<Rq>,
    driver: Thread,
    /// No thread of this trial has run yet.
    first: AtomicBool,
    /// Threads of this trial that have not finished.
    remaining: AtomicUsize,
    /// Counters before the trial's threads were created.
    examined0: AtomicU64,
    dequeues0: AtomicU64,
    /// The first dequeue's count, or `u64::MAX` if another dequeue
    /// happened in between (never expected).
    result: AtomicU64,
}

/// The body of each of a trial's threads. All of a trial runs on one
/// processor (one OS thread), so Relaxed orderings suffice: program order
/// on that OS thread orders everything.
fn trial_thread(t: &Trial) {
    if t.first.swap(false, Ordering::Relaxed) {
        let s = t.handle.stats();
        let deq = s.dequeues - t.dequeues0.load(Ordering::Relaxed);
        let ex = s.queues_examined - t.examined0.load(Ordering::Relaxed);
        t.result
            .store(if deq == 1 { ex } else { u64::MAX }, Ordering::Relaxed);
    }
    if t.remaining.fetch_sub(1, Ordering::Relaxed) == 1 {
        t.driver.unpark();
    }
}

/// Queues examined by one dequeue at one r, over many trials.
#[derive(Debug, Clone)]
pub struct Searched {
    /// Mean queues examined over the valid trials.
    pub mean: f64,
    /// Its standard error.
    pub std_err: f64,
    /// Valid trials.
    pub trials: u64,
    /// The mean of each of the consecutive batches of trials.
    pub batches: Vec<f64>,
}

/// ALL89 Fig. 5 measured: a `local-readyq` runtime with `queues` ready
/// queues and one processor runs a driver that, per trial, creates r null
/// threads (each placed in a uniformly random queue) and parks, so that
/// the processor's next action is one scan from its own queue; the first
/// thread to run reads how many queues that dequeue examined (the trial
/// is discarded unless exactly one dequeue happened). For each r in `rs`,
/// `trials` trials split into `batches` batches; `tick` is called once per
/// r done.
pub fn queue_search(
    rs: &[u32],
    queues: usize,
    trials: u64,
    batches: u64,
    tick: &dyn Fn(),
) -> Result<Vec<Searched>, String> {
    let rt: Runtime<Rq> = Runtime::builder()
        .processors(1)
        .queues(queues)
        .warm(64, 64)
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let handle = rt.handle();
    let rs = rs.to_vec();
    // The driver runs on the runtime; the progress bar is ticked from it
    // (indicatif is thread-safe), so it needs a 'static callback: collect
    // progress in an atomic and tick from here instead.
    let done = Arc::new(AtomicUsize::new(0));
    let done2 = Arc::clone(&done);
    let job = rt.spawn(move || {
        let driver = symmetry_threads::current().expect("driver runs on the runtime");
        let t = Arc::new(Trial {
            handle,
            driver,
            first: AtomicBool::new(false),
            remaining: AtomicUsize::new(0),
            examined0: AtomicU64::new(0),
            dequeues0: AtomicU64::new(0),
            result: AtomicU64::new(0),
        });
        let mut out = Vec::with_capacity(rs.len());
        for &r in &rs {
            let (mut n, mut sum, mut sum2) = (0u64, 0f64, 0f64);
            let mut batch = vec![(0u64, 0f64); batches as usize];
            for i in 0..trials {
                let s = t.handle.stats();
                t.examined0.store(s.queues_examined, Ordering::Relaxed);
                t.dequeues0.store(s.dequeues, Ordering::Relaxed);
                t.first.store(true, Ordering::Relaxed);
                t.remaining.store(r as usize, Ordering::Relaxed);
                for _ in 0..r {
                    let tt = Arc::clone(&t);
                    t.handle.spawn_detached(move || trial_thread(&tt));
                }
                while t.remaining.load(Ordering::Relaxed) != 0 {
                    symmetry_threads::park();
                }
                let x = t.result.load(Ordering::Relaxed);
                if x != u64::MAX {
                    n += 1;
                    sum += x as f64;
                    sum2 += (x * x) as f64;
                    let b = &mut batch[(i * batches / trials.max(1)) as usize];
                    b.0 += 1;
                    b.1 += x as f64;
                }
            }
            let mean = sum / n.max(1) as f64;
            let var = (sum2 / n.max(1) as f64 - mean * mean).max(0.0);
            out.push(Searched {
                mean,
                std_err: (var / n.max(1) as f64).sqrt(),
                trials: n,
                batches: batch
                    .iter()
                    .filter(|b| b.0 > 0)
                    .map(|b| b.1 / b.0 as f64)
                    .collect(),
            });
            done2.fetch_add(1, Ordering::Relaxed);
        }
        out
    });
    let mut seen = 0;
    while !job.is_finished() {
        std::thread::sleep(Duration::from_millis(20));
        let d = done.load(Ordering::Relaxed);
        while seen < d {
            tick();
            seen += 1;
        }
    }
    let out = job.join().map_err(|e| format!("the driver failed: {e}"))?;
    while seen < out.len() {
        tick();
        seen += 1;
    }
    Ok(out)
}
