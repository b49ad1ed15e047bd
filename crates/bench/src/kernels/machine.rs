//! Constants of the machine a run is on: uncontended atomic RMW and CAS
//! cost, one spin-wait iteration, a cache-line round trip between a pair of
//! cores, the futex block+wake hand-off and C (KLMO91: the cost of
//! blocking, in spins) for OS threads and for user threads
//! (`symmetry-threads` park/unpark, on a runtime of one processor and of
//! two), and one locked queue operation (the ready queue's critical
//! section, an input of ALL89's model). One code path backs `symmetry
//! calibrate`, the `calibrate` experiment, the KLMO91 calibration
//! ([`super::klmo91::ensure`]) and `model-mva`'s calibration.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use symmetry_locks::Tas;
use symmetry_locks::platform::futex;
use symmetry_threads::{Fifo, LocalReadyq, Runtime, Thread};

use crate::kernels::locks::{
    allowed_cpus, on_pinned_thread, pin_to, run_threads, work_ns_per_iter,
};
use crate::stats::Spread;

/// One measured constant: its metric name, the spread of its repeats
/// (median, smallest, largest, count), its unit and the threads (or
/// processors) the measurement used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Constant {
    /// Metric name (`atomic_rmw_ns`, `c_spins_os`, ...; see [`describe`]).
    pub metric: &'static str,
    /// The repeats: the constant is their median.
    pub spread: Spread,
    /// Unit (`ns`, `spins`).
    pub unit: &'static str,
    /// Threads or processors the measurement ran on.
    pub threads: u32,
}

impl Constant {
    /// The constant (the median of its repeats).
    pub fn value(&self) -> f64 {
        self.spread.median
    }
}

/// The value of `metric` among `constants`, if it was measured.
pub fn lookup(constants: &[Constant], metric: &str) -> Option<f64> {
    constants
        .iter()
        .find(|c| c.metric == metric)
        .map(Constant::value)
}

/// Repeats of the two-thread measurements (cache line, futex, user
/// threads).
const PAIR_REPEATS: usize = 3;
/// Repeats of the single-thread measurements.
const SINGLE_REPEATS: usize = 5;

/// The spread of `n` runs of `f`; a NaN median if a run gave NaN (the
/// `calibrate` experiment reports such a constant as not finite).
fn repeat(n: usize, mut f: impl FnMut() -> f64) -> Spread {
    let samples: Vec<f64> = (0..n.max(1)).map(|_| f()).collect();
    Spread::of(&samples).unwrap_or_else(|| Spread::single(f64::NAN))
}

/// Nanoseconds per call of `f` over `iters` calls.
fn per_op(iters: u64, f: impl Fn()) -> f64 {
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    t.elapsed().as_nanos() as f64 / iters as f64
}

/// The harness's placement probe: the median of three cache-line round
/// trips between CPUs 0 and 1 (a few milliseconds), in ns; `None` on a
/// machine with one CPU. Taken before and after each experiment and kept
/// in its provenance: on a virtual machine the host may move the virtual
/// CPUs between runs (or during one), which changes every timing that
/// involves two cores together, and the probe shows when it happened.
pub fn core_probe_ns() -> Option<f64> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus >= 2).then(|| {
        let s = repeat(3, || cacheline_rtt((0, 1), 20_000));
        s.median
    })
}

/// Two pinned threads bounce one cache line: ns per round trip.
fn cacheline_rtt(cpus: (usize, usize), rounds: u64) -> f64 {
    let line = CachePadded::new(AtomicU64::new(0));
    let (elapsed, _) = run_threads(2, |i| {
        pin_to(if i == 0 { cpus.0 } else { cpus.1 });
        if i == 0 {
            for r in 0..rounds {
                line.store(2 * r + 1, Ordering::Release);
                while line.load(Ordering::Acquire) != 2 * r + 2 {
                    std::hint::spin_loop();
                }
            }
        } else {
            for r in 0..rounds {
                while line.load(Ordering::Acquire) != 2 * r + 1 {
                    std::hint::spin_loop();
                }
                line.store(2 * r + 2, Ordering::Release);
            }
        }
    });
    elapsed.as_nanos() as f64 / rounds as f64
}

/// Two threads pinned to a pair of cores hand a turn back and forth, each
/// blocking in the kernel until woken: ns per round trip (two block+wake
/// hand-offs).
fn futex_rtt(cpus: (usize, usize), rounds: u64) -> f64 {
    let turn = CachePadded::new(AtomicU32::new(0));
    let (elapsed, _) = run_threads(2, |i| {
        pin_to(if i == 0 { cpus.0 } else { cpus.1 });
        let (mine, theirs) = if i == 0 { (0, 1) } else { (1, 0) };
        for _ in 0..rounds {
            while turn.load(Ordering::Acquire) != mine {
                futex::wait(&turn, theirs, futex::Scope::Private);
            }
            turn.store(theirs, Ordering::Release);
            futex::wake(&turn, 1, futex::Scope::Private);
        }
    });
    elapsed.as_nanos() as f64 / rounds as f64
}

/// A turn handed back and forth between two user threads.
struct UserPingPong {
    /// Even: side 0's turn, odd: side 1's.
    turn: CachePadded<AtomicU64>,
    /// Each side's handle, for the other to unpark.
    sides: [OnceLock<Thread>; 2],
}

impl UserPingPong {
    /// One side: waits for its turn (parking), passes it on, wakes the
    /// other side. Side 0 times the rounds after `warm` up to the other
    /// side's last pass.
    fn play(&self, side: usize, warm: u64, total: u64) -> Option<Duration> {
        let me = symmetry_threads::current().expect("runs as a user thread");
        let _ = self.sides[side].set(me);
        let other = loop {
            if let Some(t) = self.sides[1 - side].get() {
                break *t;
            }
            symmetry_threads::yield_now();
        };
        let wait_for = |turn: u64| {
            // Acquire: pairs with the other side's Release store of the turn.
            while self.turn.load(Ordering::Acquire) != turn {
                symmetry_threads::park();
            }
        };
        let mut t0 = None;
        for r in 0..total {
            if side == 0 && r == warm {
                t0 = Some(Instant::now());
            }
            let mine = 2 * r + side as u64;
            wait_for(mine);
            // Release: publishes the turn to the other side's Acquire load.
            self.turn.store(mine + 1, Ordering::Release);
            other.unpark();
        }
        if side == 0 {
            wait_for(2 * total);
            t0.map(|t| t.elapsed())
        } else {
            None
        }
    }
}

/// Two user threads on a `processors`-processor `local-readyq` runtime
/// (processors pinned) hand a turn back and forth, each parking until the
/// other unparks it: ns per round trip (two block+wake hand-offs).
fn user_rtt(processors: usize, rounds: u64) -> f64 {
    let rt: Runtime<LocalReadyq<Tas, Fifo>> = Runtime::builder()
        .processors(processors)
        .pin(true)
        .build()
        .expect("a symmetry-threads runtime");
    let game = Arc::new(UserPingPong {
        turn: CachePadded::new(AtomicU64::new(0)),
        sides: [OnceLock::new(), OnceLock::new()],
    });
    let warm = rounds / 10 + 100;
    let players: Vec<_> = (0..2)
        .map(|side| {
            let g = Arc::clone(&game);
            rt.spawn(move || g.play(side, warm, warm + rounds))
        })
        .collect();
    let elapsed = players
        .into_iter()
        .filter_map(|p| p.join().expect("ping-pong player panicked"))
        .next()
        .expect("side 0 times the rounds");
    elapsed.as_nanos() as f64 / rounds as f64
}

/// Uncontended fetch_add, CAS and spin-iteration costs, each over
/// `SINGLE_REPEATS` runs.
fn single_thread_costs(iters: u64) -> (Spread, Spread, Spread) {
    let word = AtomicU64::new(0);
    let rmw = repeat(SINGLE_REPEATS, || {
        per_op(iters, || {
            black_box(black_box(&word).fetch_add(1, Ordering::AcqRel));
        })
    });
    let cas = repeat(SINGLE_REPEATS, || {
        per_op(iters, || {
            let w = black_box(&word);
            let v = w.load(Ordering::Relaxed);
            let _ = w.compare_exchange(v, v + 1, Ordering::AcqRel, Ordering::Relaxed);
        })
    });
    let spin = spin_iter(iters / 4);
    (rmw, cas, spin)
}

/// One locked queue operation, uncontended, in ns: a thread alternates
/// "lock, push a pointer-sized item at the tail, unlock" and "lock, pop
/// the head, unlock" on a `Tas`-locked queue holding one item (the shape
/// of the runtime's ready queue operations), over `SINGLE_REPEATS`
/// runs; each run times `iters` pairs and reports half a pair.
pub fn queue_op(iters: u64) -> Spread {
    repeat(SINGLE_REPEATS, || {
        let q: lock_api::Mutex<Tas, VecDeque<usize>> =
            lock_api::Mutex::new(VecDeque::with_capacity(8));
        q.lock().push_back(0);
        let pair = per_op(iters, || {
            let q = black_box(&q);
            q.lock().push_back(1);
            black_box(q.lock().pop_front());
        });
        pair / 2.0
    })
}

/// The cache-line round trip between the first two allowed CPUs, over
/// `PAIR_REPEATS` runs; `None` with fewer than two.
pub fn pair_rtt(quick: bool) -> Option<Spread> {
    let cpus = allowed_cpus();
    let rounds = if quick { 200_000 } else { 2_000_000 };
    match cpus[..] {
        [a, b, ..] => Some(repeat(PAIR_REPEATS, || cacheline_rtt((a, b), rounds))),
        _ => None,
    }
}

/// One futex block+wake hand-off (half a futex round trip of `rounds`)
/// between the first two allowed CPUs, as `symmetry calibrate` measures
/// its `block_wake_ns`; `None` with fewer than two.
pub fn futex_handoff_ns(rounds: u64) -> Option<f64> {
    match allowed_cpus()[..] {
        [a, b, ..] => Some(futex_rtt((a, b), rounds) / 2.0),
        _ => None,
    }
}

/// One spin-wait iteration (`core::hint::spin_loop`), over
/// `SINGLE_REPEATS` runs of `iters`.
pub fn spin_iter(iters: u64) -> Spread {
    repeat(SINGLE_REPEATS, || per_op(iters, std::hint::spin_loop))
}

/// Measures the constants, in display order. The pair measurements (cache
/// line, futex) need two allowed CPUs and are left out with fewer; the
/// user-thread hand-off runs on a one-processor runtime always and on a
/// two-processor runtime when two CPUs are allowed. A block+wake is half a
/// round trip; C is a block+wake in spin iterations.
pub fn measure(quick: bool) -> Vec<Constant> {
    let iters: u64 = if quick { 2_000_000 } else { 20_000_000 };
    let cpus = allowed_cpus();
    let (rmw, cas, spin) = on_pinned_thread(|| single_thread_costs(iters));
    let one = |metric, spread, unit, threads| Constant {
        metric,
        spread,
        unit,
        threads,
    };
    let mut out = vec![
        one("atomic_rmw_ns", rmw, "ns", 1),
        one("cas_ns", cas, "ns", 1),
        one("spin_iter_ns", spin, "ns", 1),
        one("work_iter_ns", Spread::single(work_ns_per_iter()), "ns", 1),
        one(
            "queue_op_ns",
            on_pinned_thread(|| queue_op(iters / 4)),
            "ns",
            1,
        ),
    ];
    // A round trip, its half (one block+wake) and that half in spins.
    let hand_off = |out: &mut Vec<Constant>, rtt: Spread, names: [&'static str; 3], p: u32| {
        let half = rtt.map(|v| v / 2.0);
        out.push(one(names[0], rtt, "ns", p));
        out.push(one(names[1], half, "ns", p));
        out.push(one(names[2], half.ratio(spin), "spins", p));
    };
    if let (Some(rtt), [a, b, ..]) = (pair_rtt(quick), &cpus[..]) {
        let (a, b) = (*a, *b);
        out.push(one("cacheline_rtt_ns", rtt, "ns", 2));
        let frounds = if quick { 5_000 } else { 50_000 };
        let rtt = repeat(PAIR_REPEATS, || futex_rtt((a, b), frounds));
        hand_off(
            &mut out,
            rtt,
            ["futex_rtt_ns", "block_wake_ns", "c_spins_os"],
            2,
        );
    }
    // User threads: park/unpark hand-offs on one processor (a pure user
    // space switch through the ready queue) and on two (random placement
    // sends about half the woken threads to the other processor).
    let urounds = if quick { 50_000 } else { 500_000 };
    hand_off(
        &mut out,
        repeat(PAIR_REPEATS, || user_rtt(1, urounds)),
        ["user_rtt_1p_ns", "user_block_wake_1p_ns", "c_spins_user_1p"],
        1,
    );
    if cpus.len() >= 2 {
        hand_off(
            &mut out,
            repeat(PAIR_REPEATS, || user_rtt(2, urounds)),
            ["user_rtt_2p_ns", "user_block_wake_2p_ns", "c_spins_user_2p"],
            2,
        );
    }
    out
}

/// What each constant means, for the report and the CLI; empty for an
/// unknown metric.
pub fn describe(metric: &str) -> &'static str {
    match metric {
        "atomic_rmw_ns" => "uncontended fetch_add on a private line",
        "cas_ns" => "uncontended load + compare_exchange",
        "spin_iter_ns" => "one spin-wait iteration (core::hint::spin_loop)",
        "work_iter_ns" => "one step of the harness's local work loop",
        "queue_op_ns" => "one uncontended lock + queue push or pop + unlock (Tas, one item queued)",
        "cacheline_rtt_ns" => "one cache line bounced between a pair of cores and back",
        "futex_rtt_ns" => {
            "two threads pinned to a pair of cores hand a turn back and forth through futex wait/wake"
        }
        "block_wake_ns" => "one block + wake hand-off (half the futex round trip)",
        "c_spins_os" => "KLMO91's C for OS threads: block+wake cost in spin iterations",
        "user_rtt_1p_ns" => {
            "two user threads on a one-processor runtime hand a turn back and forth through park/unpark"
        }
        "user_block_wake_1p_ns" => {
            "one user-thread block + wake hand-off on a one-processor runtime (half the round trip)"
        }
        "c_spins_user_1p" => {
            "KLMO91's C for user threads on a one-processor runtime: block+wake cost in spin iterations"
        }
        "user_rtt_2p_ns" => {
            "two user threads on a two-processor runtime hand a turn back and forth through park/unpark"
        }
        "user_block_wake_2p_ns" => {
            "one user-thread block + wake hand-off on a two-processor runtime (half the round trip)"
        }
        "c_spins_user_2p" => {
            "KLMO91's C for user threads on a two-processor runtime: block+wake cost in spin iterations"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_constant_is_described() {
        for m in [
            "atomic_rmw_ns",
            "cas_ns",
            "spin_iter_ns",
            "work_iter_ns",
            "queue_op_ns",
            "cacheline_rtt_ns",
            "futex_rtt_ns",
            "block_wake_ns",
            "c_spins_os",
            "user_rtt_1p_ns",
            "user_block_wake_1p_ns",
            "c_spins_user_1p",
            "user_rtt_2p_ns",
            "user_block_wake_2p_ns",
            "c_spins_user_2p",
        ] {
            assert!(!describe(m).is_empty(), "{m}");
        }
        assert_eq!(describe("nope"), "");
    }

    #[test]
    fn repeat_keeps_the_spread() {
        let mut it = [3.0, 1.0, 2.0].into_iter();
        let s = repeat(3, || it.next().unwrap_or(f64::NAN));
        assert_eq!((s.median, s.lo, s.hi, s.n), (2.0, 1.0, 3.0, 3));
        assert!(repeat(2, || f64::NAN).median.is_nan());
    }
}
