//! Benchmark kernels, generic over the lock type so that every lock is
//! monomorphized and inlined into its timed loop (no virtual call inside a
//! measurement, SPEC §1). The harness reaches them through the name table in
//! [`crate::registry::locks`], whose function pointers are called once per
//! measured point, outside the timed loops.

use std::cell::UnsafeCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use lock_api::{Mutex, RawMutex};
use symmetry_locks::platform::affinity;

/// Local, cache-resident work: a dependent multiply-add chain of `iters`
/// steps. Calibrated by [`work_ns_per_iter`].
#[inline(never)]
pub fn local_work(iters: u64) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..iters {
        // black_box keeps the optimizer from collapsing the recurrence.
        x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
    }
    x
}

/// Nanoseconds per [`local_work`] iteration on this machine (measured once,
/// best of five runs of 2 million iterations).
pub fn work_ns_per_iter() -> f64 {
    static CAL: OnceLock<f64> = OnceLock::new();
    *CAL.get_or_init(|| {
        let iters = 2_000_000;
        (0..5)
            .map(|_| {
                let t = Instant::now();
                local_work(iters);
                t.elapsed().as_nanos() as f64 / iters as f64
            })
            .fold(f64::INFINITY, f64::min)
            .max(0.01)
    })
}

/// Iterations of [`local_work`] that take about `ns` nanoseconds.
pub fn work_iters_for_ns(ns: f64) -> u64 {
    if ns <= 0.0 {
        0
    } else {
        (ns / work_ns_per_iter()).round().max(1.0) as u64
    }
}

/// The CPUs this process may run on, in order: `sched_getaffinity` of the
/// first caller, cached, so that a thread pinned later does not shrink the
/// set for everyone (`main` calls this before any pinning).
pub fn allowed_cpus() -> Vec<usize> {
    static CPUS: OnceLock<Vec<usize>> = OnceLock::new();
    CPUS.get_or_init(affinity::allowed_cpus).clone()
}

/// Runs `f` on a fresh thread pinned to the first allowed CPU (so the
/// caller's own affinity is never changed).
pub fn on_pinned_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let cpu = allowed_cpus().first().copied();
    std::thread::scope(|s| {
        s.spawn(move || {
            if let Some(c) = cpu {
                pin_to(c);
            }
            f()
        })
        .join()
        .expect("measurement thread panicked")
    })
}

/// Pins the calling thread to `cpu`; failures are ignored (the measurement
/// is still valid, only less repeatable).
pub fn pin_to(cpu: usize) {
    let _ = affinity::pin_current(cpu);
}

/// Runs `body(i)` on `threads` pinned threads (thread i on allowed CPU
/// `i mod cpus`), released together by a barrier; returns the wall time from
/// the first thread's release until the last thread finished (each thread
/// reads the clock itself, so a descheduled parent cannot skew it), and the
/// bodies' results.
pub fn run_threads<T: Send>(
    threads: usize,
    body: impl Fn(usize) -> T + Sync,
) -> (Duration, Vec<T>) {
    let cpus = allowed_cpus();
    let start_gate = Barrier::new(threads);
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (gate, body, cpus) = (&start_gate, &body, &cpus);
                s.spawn(move || {
                    if !cpus.is_empty() {
                        pin_to(cpus[i % cpus.len()]);
                    }
                    gate.wait();
                    let start = Instant::now();
                    let r = body(i);
                    (start, Instant::now(), r)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("benchmark thread panicked"))
            .collect::<Vec<_>>()
    });
    let start = results.iter().map(|(s, _, _)| *s).min();
    let end = results.iter().map(|(_, e, _)| *e).max();
    let elapsed = match (start, end) {
        (Some(s), Some(e)) => e.saturating_duration_since(s),
        _ => Duration::ZERO,
    };
    (elapsed, results.into_iter().map(|(_, _, r)| r).collect())
}

/// A measured object on the heap at byte `OFFSET` of a 4 KiB-aligned
/// block of its own, so the low twelve bits of its address are the same in
/// every process.
///
/// On the main thread's stack an object's offset within its page is drawn
/// anew by each process's stack randomization, while the measured threads'
/// stacks and the locks' queue nodes sit at fixed offsets in theirs. With
/// the lock on the stack, a few fresh processes in a dozen measured the
/// inlined queue locks' uncontended increment markedly slower than the
/// rest, with a tight spread inside the process, and the `dyn` version
/// beside it unchanged; placed, none did. Addresses that agree in those
/// twelve bits are the trigger of x86's 4K-aliasing stalls (a load taken as
/// dependent on an earlier store until the full addresses resolve), the
/// likely cause; this VM has no hardware counters to confirm it.
#[repr(C, align(4096))]
pub struct Placed<T, const OFFSET: usize> {
    _pad: [u8; OFFSET],
    inner: T,
}

impl<T, const OFFSET: usize> Placed<T, OFFSET> {
    /// `value`, placed.
    pub fn new(value: T) -> Box<Self> {
        // The field lands at OFFSET only if T's alignment divides it.
        const { assert!(OFFSET.is_multiple_of(std::mem::align_of::<T>())) };
        Box::new(Placed {
            _pad: [0; OFFSET],
            inner: value,
        })
    }

    /// The value, out of its place.
    pub fn into_inner(self) -> T {
        self.inner
    }
}

impl<T: std::fmt::Debug, const OFFSET: usize> std::fmt::Debug for Placed<T, OFFSET> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placed")
            .field("offset", &OFFSET)
            .field("inner", &self.inner)
            .finish()
    }
}

impl<T, const OFFSET: usize> std::ops::Deref for Placed<T, OFFSET> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

/// Where the measured object of a kernel goes in its page (see [`Placed`]).
pub const OBJECT_AT: usize = 0;
/// A kernel's object type placed at [`OBJECT_AT`].
pub type Object<T> = Placed<T, OBJECT_AT>;
/// Where a kernel's [`Watchdog`] goes in its page: half a page from the
/// object, so the flag every thread reads never aliases the lock.
const WATCHDOG_AT: usize = 2048;

/// Stops a run after `budget`, from a watchdog thread that sleeps (so it
/// takes no CPU from the measured threads).
///
/// Aligned to, and padded to, 128 bytes (two x86 lines, which the adjacent
/// line prefetcher fetches together): every measured thread reads `stop`
/// on each iteration, so it must not share a line with the lock or data
/// they contend for. Placed on the stack next to them, whether it did
/// depended on the stack's offset, which moves with the command line and
/// environment, and timings moved between processes with it. Kernels put
/// it at [`WATCHDOG_AT`] of a page of its own (see [`Placed`]).
#[repr(align(128))]
struct Watchdog {
    stop: AtomicBool,
    done: AtomicUsize,
}

impl Watchdog {
    fn new() -> Self {
        Self {
            stop: AtomicBool::new(false),
            done: AtomicUsize::new(0),
        }
    }
    fn watch(&self, threads: usize, budget: Duration) {
        let t0 = Instant::now();
        while self.done.load(Ordering::Acquire) < threads {
            if t0.elapsed() >= budget {
                self.stop.store(true, Ordering::Release);
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    #[inline]
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Parameters of the contended-counter kernel (ALL89 Figs 6-7, PRESTO
/// Fig 1): `threads` threads repeatedly lock, bump a shared counter and do
/// `cs_iters` steps of [`local_work`] folded into the protected data, unlock, then do
/// `post_iters` steps of local work; until the counter reaches `target` or
/// `budget` expires.
#[derive(Debug, Clone, Copy)]
pub struct CounterCfg {
    /// Threads.
    pub threads: usize,
    /// Acquisitions to perform in total.
    pub target: u64,
    /// Work inside the critical section, in steps on protected data.
    pub cs_iters: u64,
    /// Local work after each release, in [`local_work`] steps.
    pub post_iters: u64,
    /// Wall-clock cap.
    pub budget: Duration,
}

/// Result of a contended run.
#[derive(Debug, Clone, Copy)]
pub struct CounterOut {
    /// Acquisitions performed (equals the counter: checked).
    pub ops: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Whether `target` was reached within the budget.
    pub completed: bool,
}

impl CounterOut {
    /// Nanoseconds per acquisition (elapsed / ops).
    pub fn ns_per_op(&self) -> f64 {
        self.elapsed.as_nanos() as f64 / self.ops.max(1) as f64
    }
}

/// Data protected by the lock in the contended kernels.
struct Shared {
    counter: u64,
    cells: [u64; 8],
}

/// Critical-section work: `iters` steps of [`local_work`] folded into the
/// protected data (ALL89 Fig. 7: "the critical section contains varying
/// amounts of other work").
#[inline(always)]
fn cs_work(s: &mut Shared, iters: u64) {
    if iters > 0 {
        s.cells[(s.counter & 7) as usize] ^= local_work(iters);
    }
}

/// The contended counter: see [`CounterCfg`].
pub fn counter<R: RawMutex + Send + Sync>(cfg: &CounterCfg) -> CounterOut {
    // At a fixed place in a page of its own, as the watchdog (see `Placed`).
    let placed = Object::new(Mutex::<R, _>::new(Shared {
        counter: 0,
        cells: [0; 8],
    }));
    let placed_dog = Placed::<_, WATCHDOG_AT>::new(Watchdog::new());
    // References to the placed objects, so no loop reads a pointer from
    // the stack to reach them.
    let (mutex, dog) = (&**placed, &**placed_dog);
    let (elapsed, per_thread) = std::thread::scope(|s| {
        s.spawn(|| dog.watch(cfg.threads, cfg.budget));
        let out = run_threads(cfg.threads, |_| {
            let mut mine = 0u64;
            loop {
                if dog.stopped() {
                    break;
                }
                let mut g = mutex.lock();
                if g.counter >= cfg.target {
                    break;
                }
                g.counter += 1;
                cs_work(&mut g, cfg.cs_iters);
                drop(g);
                mine += 1;
                local_work(cfg.post_iters);
            }
            dog.done.fetch_add(1, Ordering::Release);
            mine
        });
        dog.done.store(usize::MAX, Ordering::Release);
        out
    });
    let ops: u64 = per_thread.iter().sum();
    let counted = (*placed).into_inner().into_inner().counter;
    assert_eq!(
        ops, counted,
        "mutual exclusion violated: {ops} acquisitions, counter {counted}"
    );
    CounterOut {
        ops,
        elapsed,
        completed: counted >= cfg.target,
    }
}

/// Uncontended cost: one thread locks, increments the protected value and
/// unlocks `iters` times through `lock_api::Mutex`. Returns ns per
/// lock/unlock pair.
pub fn uncontended<R: RawMutex>(iters: u64) -> f64 {
    // At a fixed place in a page, whatever the stack's offset (see `Placed`).
    let mutex = Object::new(Mutex::<R, u64>::new(0));
    let m = black_box(&**mutex);
    let t = Instant::now();
    for _ in 0..iters {
        *m.lock() += 1;
    }
    let ns = t.elapsed().as_nanos() as f64 / iters as f64;
    assert_eq!(*mutex.lock(), iters);
    ns
}

/// The same loop with no lock abstraction at all: an exchange to take a
/// byte flag and a release store to drop it (the physical floor for any
/// lock that needs one atomic read-modify-write).
pub fn uncontended_bare_atomic(iters: u64) -> f64 {
    struct Bare {
        flag: AtomicU8,
        value: UnsafeCell<u64>,
    }
    // SAFETY: `value` is only touched between a successful swap and the store.
    unsafe impl Sync for Bare {}
    let bare = Object::new(Bare {
        flag: AtomicU8::new(0),
        value: UnsafeCell::new(0),
    });
    let b = black_box(&**bare);
    let t = Instant::now();
    for _ in 0..iters {
        while b.flag.swap(1, Ordering::Acquire) != 0 {
            std::hint::spin_loop();
        }
        // SAFETY: we hold the flag.
        unsafe { *b.value.get() += 1 };
        b.flag.store(0, Ordering::Release);
    }
    let ns = t.elapsed().as_nanos() as f64 / iters as f64;
    // SAFETY: single-threaded here.
    assert_eq!(unsafe { *bare.value.get() }, iters);
    ns
}

/// Lock-based barrier (ALL89 Fig 8): in each episode every thread takes the
/// lock once to bump a counter, then spins until all `threads` have. Returns
/// (episodes completed, wall time). Waiting between episodes reads the
/// counter (yielding the CPU after a while, so oversubscribed points finish);
/// the lock itself spins as the algorithm does.
pub fn barrier<R: RawMutex + Send + Sync>(
    threads: usize,
    episodes: u64,
    budget: Duration,
) -> (u64, Duration) {
    // Each on lines of its own, at fixed places in a page of their own
    // (see `Watchdog` and `Placed`).
    struct State<R: RawMutex> {
        mutex: CachePadded<Mutex<R, u64>>,
        arrived: CachePadded<AtomicU64>,
        // Episode after which everyone stops (moved earlier by the watchdog).
        last: CachePadded<AtomicU64>,
    }
    let state = Object::new(State::<R> {
        mutex: CachePadded::new(Mutex::new(0)),
        arrived: CachePadded::new(AtomicU64::new(0)),
        last: CachePadded::new(AtomicU64::new(episodes)),
    });
    let State {
        mutex,
        arrived,
        last,
    } = &**state;
    let t0 = Instant::now();
    let (elapsed, done) = run_threads(threads, |i| {
        let mut e = 0u64;
        while e < last.load(Ordering::Acquire) {
            e += 1;
            {
                let mut g = mutex.lock();
                *g += 1;
                arrived.store(*g, Ordering::Release);
            }
            let goal = e * threads as u64;
            let mut spins = 0u32;
            while arrived.load(Ordering::Acquire) < goal {
                spins += 1;
                if spins > 2000 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            if i == 0 && t0.elapsed() > budget {
                // Everyone may already be in episode e + 1; stop after it.
                last.fetch_min(e + 1, Ordering::AcqRel);
            }
        }
        e
    });
    (done.into_iter().min().unwrap_or(0), elapsed)
}

/// PRESTO Fig 2 kernel: `threads` threads increment an integer `target`
/// times in total through `inc`, doing `post_iters` of local work after each
/// increment. `inc` is generic, so it inlines: a `dyn` cost is measured only
/// where the integer type itself makes a virtual call. Callers keep the
/// integer in an [`Object`], at a fixed place in a page of its own (see
/// [`Placed`]). Returns (increments, wall time).
pub fn increments<F: Fn() -> i64 + Sync>(
    threads: usize,
    target: u64,
    post_iters: u64,
    budget: Duration,
    inc: &F,
) -> (u64, Duration) {
    let placed_dog = Placed::<_, WATCHDOG_AT>::new(Watchdog::new());
    let dog = &**placed_dog;
    let (elapsed, per_thread) = std::thread::scope(|s| {
        s.spawn(|| dog.watch(threads, budget));
        let out = run_threads(threads, |_| {
            let mut mine = 0u64;
            while !dog.stopped() {
                let before = inc();
                if before as u64 >= target {
                    break;
                }
                mine += 1;
                local_work(post_iters);
            }
            dog.done.fetch_add(1, Ordering::Release);
            mine
        });
        dog.done.store(usize::MAX, Ordering::Release);
        out
    });
    (per_thread.iter().sum(), elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placed_objects_sit_at_their_offset() {
        let o = Object::new(AtomicU64::new(7));
        assert_eq!(&**o as *const AtomicU64 as usize % 4096, OBJECT_AT);
        let d = Placed::<_, WATCHDOG_AT>::new(Watchdog::new());
        assert_eq!(&**d as *const Watchdog as usize % 4096, WATCHDOG_AT);
        assert!(!d.stopped());
        assert_eq!((*o).into_inner().into_inner(), 7);
    }
}
