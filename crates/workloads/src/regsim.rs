//! A Regsim-like register-transfer logic simulator (KLMO91 §3, "Regsim";
//! elapsed times in KLMO91 §5, Table 3).
//!
//! KLMO91 describe Regsim as a parallel simulator of synchronous digital
//! logic that "models collections of connected objects. Each object has a
//! single output, which may connect to inputs of other objects, and an
//! evaluation procedure. The procedures are evaluated in parallel until
//! the output values stabilize. The objects are initially divided evenly
//! among the available threads. During each phase, the thread that
//! finishes last gives one of its objects to another thread." It ran as
//! many compute threads as processors, and its lock waits were almost all
//! short (KLMO91 Fig. 4): spinning pays off.
//!
//! # The circuit
//!
//! A seeded random circuit of [`RegsimCfg::objects`] objects, each with
//! one 64-bit output word:
//!
//! * *inputs* (1/16 of the objects, at least one): driven by stimuli; the
//!   first [`HOT_NETS`] of them are global nets (think clock enable, reset,
//!   a bus) that every gate input picks with probability 1/8, so a few
//!   objects are read by many evaluations at once;
//! * *registers* (1/8): at each clock edge they latch their D input into
//!   their own state (`state.rotate_left(1) ^ d`);
//! * *gates* (the rest): combinational, [`RegsimCfg::fanin`] inputs each,
//!   one of four word-level functions, spread over [`LEVELS`] levels; a
//!   gate's inputs come from lower levels (half of them from the level
//!   just below), so the combinational part is acyclic and settles; only
//!   registers close loops, from one cycle to the next.
//!
//! Every evaluation also does [`RegsimCfg::eval_work`] iterations of
//! [`spin_work`] (the procedure's computation), outside any lock.
//!
//! # A clock cycle
//!
//! Phase 0 of a cycle is the clock edge: inputs take new stimuli (each
//! input changes with probability 1/2, from the seed and the cycle number)
//! and registers latch; gates evaluate as in every phase. Then phases
//! follow until one changes no output (settled) or the cycle has run
//! [`MAX_PHASES`] phases. In every phase *every* object is evaluated from
//! the previous phase's outputs and writes the next phase's: each object
//! keeps two output words and phase `g` (counted over the whole run)
//! reads word `g % 2` and writes word `(g + 1) % 2`. So the result does
//! not depend on which thread evaluates what, nor when: a parallel run
//! gives exactly the outputs of the sequential [`reference_checksum`].
//!
//! # Threads and locks
//!
//! [`RegsimCfg::threads`] workers (KLMO91: as many as processors). The
//! objects start divided evenly into contiguous blocks, one per thread.
//! Locks, by class name (the profiler's key):
//!
//! * `regsim.object`, one per object, guards its two output words. An
//!   evaluation locks each input object in turn to read one word (a
//!   critical section of a load), then its own to compare and write: very
//!   many very short holds, contended now and then when two threads touch
//!   one object at once (most often a hot net).
//! * `regsim.phase`, one, guards phase control. Each thread takes it at
//!   the start of a phase (to read the decision: go on, next cycle, or
//!   stop), every [`REPORT_EVERY`] evaluations (to post its count of
//!   changed outputs, with [`REPORT_WORK`] iterations of bookkeeping held)
//!   and when it finishes its share (final count and finish order). The
//!   last thread to report decides the next phase (settled? next cycle?
//!   done?) and rebalances: it gives one of its objects to the first
//!   finisher (KLMO91's "the thread that finishes last gives one of its
//!   objects to another thread"). Every thread takes it often, and all
//!   at the same moments after the barrier: a hot spot with short holds.
//! * `regsim.list`, one per thread, guards the thread's inbox of objects
//!   given to it; touched once per phase by its owner and once per
//!   rebalance by the giver, before the barrier (the owner drains it after).
//!
//! Phases are separated by the executor's barrier. The locks are never
//! nested.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use symmetry_locks::platform::rng::{SplitMix64, mix};

use crate::{Exec, WorkloadLock, spin_work};

/// Levels of combinational gates: a cycle settles in about `LEVELS + 2`
/// phases (the edge, one per level, one that changes nothing).
pub const LEVELS: usize = 8;

/// Most phases a cycle may run before the simulator moves on unsettled
/// (never reached by the acyclic circuits built here; a guard).
pub const MAX_PHASES: usize = 4 * LEVELS + 4;

/// Global nets: the first inputs, read by 1/8 of all gate inputs.
pub const HOT_NETS: usize = 4;

/// A thread posts its count of changed outputs to phase control every
/// this many evaluations (and when it finishes its share).
pub const REPORT_EVERY: usize = 16;

/// `spin_work` iterations of phase control's bookkeeping per report, done
/// under `regsim.phase`: a hold of about 1 us, so a thread that finds the
/// lock held waits a fraction of a futex block+wake (~5 us): short, not
/// trivial (KLMO91 Table 2: Regsim's waits, when spinning is optimal,
/// averaged about 1/7 of a context switch).
pub const REPORT_WORK: u64 = 1000;

/// Parameters.
#[derive(Debug, Clone)]
pub struct RegsimCfg {
    /// Worker threads (KLMO91: threads = processors).
    pub threads: usize,
    /// Objects (gates) in the circuit.
    pub objects: usize,
    /// Inputs per object.
    pub fanin: usize,
    /// Simulated clock cycles.
    pub cycles: usize,
    /// Work per evaluation, `spin_work` iterations.
    pub eval_work: u64,
    /// Seed of the circuit and its stimuli.
    pub seed: u64,
}

impl RegsimCfg {
    /// A short run (50-100 ms with OS threads on a 2-core machine):
    /// 512 objects, fan-in 3, 60 cycles.
    pub fn quick(threads: usize) -> Self {
        RegsimCfg {
            threads: threads.max(1),
            objects: 512,
            fanin: 3,
            cycles: 60,
            eval_work: 300,
            seed: 0x5EED_0001,
        }
    }

    /// A longer run (about 1 s with OS threads on a 2-core machine):
    /// 2048 objects, fan-in 3, 200 cycles (13x [`RegsimCfg::quick`]).
    pub fn full(threads: usize) -> Self {
        RegsimCfg {
            threads: threads.max(1),
            objects: 2048,
            fanin: 3,
            cycles: 200,
            eval_work: 300,
            seed: 0x5EED_0001,
        }
    }
}

/// Result of a run.
#[derive(Debug, Clone)]
pub struct RegsimOut {
    /// Wall time.
    pub elapsed: Duration,
    /// Object evaluations.
    pub evaluations: u64,
    /// Phases run (all cycles).
    pub phases: u64,
    /// Objects moved between threads by rebalancing.
    pub rebalances: u64,
    /// Hash of the final outputs (equal to [`reference_checksum`]).
    pub checksum: u64,
}

// ---------------------------------------------------------------------
// The circuit.

/// What an object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Driven by stimuli at the clock edge.
    Input,
    /// Latches its single input at the clock edge.
    Register,
    /// Combinational, with one of four functions.
    Gate(u8),
}

#[derive(Debug, Clone, Copy)]
struct Object {
    kind: Kind,
    /// A per-object constant of its function.
    salt: u64,
    /// Its inputs: `Circuit::inputs[first..first + len]`.
    first: u32,
    len: u32,
}

/// The immutable part of a simulation: objects and their wiring.
#[derive(Debug)]
struct Circuit {
    objects: Vec<Object>,
    inputs: Vec<u32>,
    /// Output of every object before the first cycle.
    initial: Vec<u64>,
    seed: u64,
}

/// A value that depends on a seed and two coordinates only.
fn hash3(seed: u64, a: u64, b: u64) -> u64 {
    mix(mix(seed ^ a.wrapping_mul(0xA24B_AED4_963E_E407)) ^ b.wrapping_mul(0x9FB2_1C65_1E98_DF25))
}

impl Circuit {
    fn build(cfg: &RegsimCfg) -> Circuit {
        let n = cfg.objects.max(1);
        let n_in = (n / 16).max(1);
        let n_reg = (n / 8).min(n - n_in);
        let n_gates = n - n_in - n_reg;
        let base = n_in + n_reg; // first gate
        let hot = HOT_NETS.min(n_in);
        // Gates of level `l` (1..=LEVELS) are `lo(l)..lo(l + 1)`.
        let lo = |l: usize| base + (l - 1) * n_gates / LEVELS;
        let level_of = |g: usize| 1 + (g - base) * LEVELS / n_gates.max(1);
        let mut rng = SplitMix64::new(cfg.seed ^ 0x0123_4567_89AB_CDEF);
        let mut objects = Vec::with_capacity(n);
        let mut inputs = Vec::new();
        for o in 0..n {
            let salt = rng.next_u64();
            let first = inputs.len() as u32;
            let kind = if o < n_in {
                Kind::Input
            } else if o < base {
                // D input: any gate (a loop through the next cycle), or an
                // input if there are no gates.
                let d = if n_gates > 0 {
                    base + (rng.next_u64() % n_gates as u64) as usize
                } else {
                    (rng.next_u64() % n_in as u64) as usize
                };
                inputs.push(d as u32);
                Kind::Register
            } else {
                let level = level_of(o);
                for _ in 0..cfg.fanin {
                    let r = rng.next_u64();
                    let pick = if r.is_multiple_of(8) {
                        // A global net.
                        (r >> 8) as usize % hot
                    } else if level > 1 && (r >> 3) & 1 == 1 {
                        // The level just below.
                        let (a, b) = (lo(level - 1), lo(level));
                        a + (r >> 8) as usize % (b - a).max(1)
                    } else {
                        // Anything below this level.
                        (r >> 8) as usize % lo(level)
                    };
                    inputs.push(pick as u32);
                }
                Kind::Gate((salt >> 60) as u8 & 3)
            };
            let len = inputs.len() as u32 - first;
            objects.push(Object {
                kind,
                salt,
                first,
                len,
            });
        }
        let initial = (0..n as u64)
            .map(|o| hash3(cfg.seed, o, u64::MAX))
            .collect();
        Circuit {
            objects,
            inputs,
            initial,
            seed: cfg.seed,
        }
    }

    fn len(&self) -> usize {
        self.objects.len()
    }

    fn inputs_of(&self, o: usize) -> &[u32] {
        let ob = &self.objects[o];
        &self.inputs[ob.first as usize..(ob.first + ob.len) as usize]
    }

    /// What object `o` will output, given `read(k)` = input `k`'s output of
    /// the previous phase, whether this phase is the clock edge, the
    /// cycle, and `w` = the result of the evaluation's `spin_work`.
    #[inline]
    fn next(
        &self,
        o: usize,
        mut read: impl FnMut(usize) -> u64,
        edge: bool,
        cycle: u64,
        w: u64,
    ) -> Next {
        let ob = &self.objects[o];
        match ob.kind {
            Kind::Input => {
                let h = hash3(self.seed, o as u64, cycle);
                if edge && h & 1 == 1 {
                    Next::Value(mix(h ^ w))
                } else {
                    Next::Keep
                }
            }
            Kind::Register => {
                if edge {
                    let d = self.inputs_of(o).first().map_or(0, |&k| read(k as usize));
                    Next::Latch(d)
                } else {
                    Next::Keep
                }
            }
            Kind::Gate(op) => {
                let mut acc = ob.salt;
                for &k in self.inputs_of(o) {
                    let x = read(k as usize);
                    acc = match op {
                        0 => acc ^ x.rotate_left(7),
                        1 => acc.wrapping_add(x).rotate_left(13),
                        2 => (acc & x) | (!acc & x.rotate_left(17)),
                        _ => acc.wrapping_mul(x | 1) ^ (x >> 7),
                    };
                }
                // `w` depends only on `eval_work`: the same in every
                // evaluation, so folding it in keeps the result
                // deterministic and the work observable.
                Next::Value(mix(acc ^ w))
            }
        }
    }
}

/// An object's next output as a function of its current one.
#[derive(Debug, Clone, Copy)]
enum Next {
    /// A new value.
    Value(u64),
    /// A register's latch of `d`: `old.rotate_left(1) ^ d`.
    Latch(u64),
    /// Unchanged.
    Keep,
}

impl Next {
    #[inline]
    fn apply(self, old: u64) -> u64 {
        match self {
            Next::Value(v) => v,
            Next::Latch(d) => old.rotate_left(1) ^ d,
            Next::Keep => old,
        }
    }
}

/// The checksum of a set of outputs.
fn checksum_of(outputs: impl Iterator<Item = u64>) -> u64 {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    for (i, v) in outputs.enumerate() {
        h = mix(h ^ v ^ (i as u64).rotate_left(32));
    }
    h
}

/// Where the simulation stands: the phase to run next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Position {
    /// Phases run so far (over all cycles): the next phase reads output
    /// word `global % 2`.
    global: u64,
    /// Cycle of the next phase.
    cycle: u64,
    /// Index of the next phase within its cycle (0: the clock edge).
    in_cycle: usize,
    /// Whether all cycles are done.
    done: bool,
}

impl Position {
    fn start(cycles: usize) -> Self {
        Position {
            global: 0,
            cycle: 0,
            in_cycle: 0,
            done: cycles == 0,
        }
    }

    /// The position after a phase that changed `changes` outputs.
    fn advance(self, changes: u64, cycles: usize) -> Self {
        let mut p = self;
        p.global += 1;
        p.in_cycle += 1;
        if changes == 0 || p.in_cycle >= MAX_PHASES {
            p.cycle += 1;
            p.in_cycle = 0;
            p.done = p.cycle >= cycles as u64;
        }
        p
    }
}

// ---------------------------------------------------------------------
// The sequential reference.

/// Runs the simulation on the calling thread, without locks; returns the
/// checksum and the phases run.
fn simulate_sequential(cfg: &RegsimCfg) -> (u64, u64) {
    let c = Circuit::build(cfg);
    // `spin_work` depends only on its argument; compute it once.
    let w = spin_work(cfg.eval_work);
    let mut words: Vec<[u64; 2]> = c.initial.iter().map(|&v| [v, v]).collect();
    let mut pos = Position::start(cfg.cycles);
    while !pos.done {
        let cur = (pos.global % 2) as usize;
        let edge = pos.in_cycle == 0;
        let mut changes = 0u64;
        for o in 0..c.len() {
            let next = c.next(o, |k| words[k][cur], edge, pos.cycle, w);
            let old = words[o][cur];
            let new = next.apply(old);
            words[o][1 - cur] = new;
            changes += u64::from(new != old);
        }
        pos = pos.advance(changes, cfg.cycles);
    }
    let fin = (pos.global % 2) as usize;
    (checksum_of(words.iter().map(|w| w[fin])), pos.global)
}

/// The checksum of a sequential run (what every parallel run must give).
pub fn reference_checksum(cfg: &RegsimCfg) -> u64 {
    simulate_sequential(cfg).0
}

/// The phases a run of `cfg` takes (the same sequentially and in parallel).
pub fn reference_phases(cfg: &RegsimCfg) -> u64 {
    simulate_sequential(cfg).1
}

// ---------------------------------------------------------------------
// The parallel simulator.

/// Phase control, under `regsim.phase`.
#[derive(Debug)]
struct Control {
    /// The phase to run next (written by the last reporter of a phase).
    pos: Position,
    /// Threads that reported in the phase in progress.
    reported: usize,
    /// Outputs changed in the phase in progress, so far.
    changes: u64,
    /// First thread to report in the phase in progress.
    first: usize,
    /// Objects moved so far.
    rebalances: u64,
    /// Evaluations so far.
    evaluations: u64,
}

struct Shared<L: WorkloadLock> {
    circuit: Circuit,
    threads: usize,
    cycles: usize,
    eval_work: u64,
    /// Each object's two output words, under its `regsim.object` lock.
    words: Vec<CachePadded<lock_api::Mutex<L, [u64; 2]>>>,
    control: CachePadded<lock_api::Mutex<L, Control>>,
    /// Objects given to each thread, under its `regsim.list` lock.
    inbox: Vec<CachePadded<lock_api::Mutex<L, Vec<u32>>>>,
    /// Each thread's initial share.
    shares: Vec<Vec<u32>>,
    barrier: Arc<dyn crate::ExecBarrier>,
}

impl<L: WorkloadLock> Shared<L> {
    /// Evaluates object `o` at `pos`; returns whether its output changed.
    #[inline]
    fn evaluate(&self, o: usize, pos: Position) -> bool {
        let cur = (pos.global % 2) as usize;
        let next = self.circuit.next(
            o,
            |k| self.words[k].lock()[cur],
            pos.in_cycle == 0,
            pos.cycle,
            spin_work(self.eval_work),
        );
        let mut me = self.words[o].lock();
        let old = me[cur];
        let new = next.apply(old);
        me[1 - cur] = new;
        new != old
    }

    /// Worker `i`.
    fn work(&self, i: usize) {
        let mut list = self.shares[i].clone();
        loop {
            // Read the decision for this phase.
            let pos = self.control.lock().pos;
            if pos.done {
                break;
            }
            // Take the objects given to us at the end of the last phase.
            {
                let mut inbox = self.inbox[i].lock();
                if !inbox.is_empty() {
                    list.append(&mut inbox);
                }
            }
            let mut changes = 0u64;
            for (k, &o) in list.iter().enumerate() {
                changes += u64::from(self.evaluate(o as usize, pos));
                if (k + 1).is_multiple_of(REPORT_EVERY) {
                    // Progress report.
                    let mut c = self.control.lock();
                    spin_work(REPORT_WORK);
                    c.evaluations += REPORT_EVERY as u64;
                    c.changes += changes;
                    changes = 0;
                }
            }
            // Final report; the last reporter decides and rebalances.
            let give = {
                let mut c = self.control.lock();
                spin_work(REPORT_WORK);
                c.evaluations += (list.len() % REPORT_EVERY) as u64;
                c.changes += changes;
                if c.reported == 0 {
                    c.first = i;
                }
                c.reported += 1;
                if c.reported == self.threads {
                    let next = pos.advance(c.changes, self.cycles);
                    c.pos = next;
                    c.reported = 0;
                    c.changes = 0;
                    if !next.done && c.first != i && !list.is_empty() {
                        c.rebalances += 1;
                        Some(c.first)
                    } else {
                        None
                    }
                } else {
                    None
                }
            };
            if let Some(to) = give {
                // Nobody reads an inbox before the barrier below.
                if let Some(o) = list.pop() {
                    self.inbox[to].lock().push(o);
                }
            }
            self.barrier.wait();
        }
    }
}

/// Runs the simulation with lock `L` on executor `E`.
pub fn run<L: WorkloadLock, E: Exec>(cfg: &RegsimCfg, exec: &E) -> RegsimOut {
    let threads = cfg.threads.max(1);
    let circuit = Circuit::build(cfg);
    let n = circuit.len();
    let words = circuit
        .initial
        .iter()
        .map(|&v| CachePadded::new(lock_api::Mutex::from_raw(L::named("regsim.object"), [v, v])))
        .collect();
    // Even contiguous blocks: thread `t` gets `t*n/threads..(t+1)*n/threads`.
    let shares = (0..threads)
        .map(|t| ((t * n / threads) as u32..((t + 1) * n / threads) as u32).collect())
        .collect();
    let shared = Arc::new(Shared::<L> {
        threads,
        cycles: cfg.cycles,
        eval_work: cfg.eval_work,
        words,
        control: CachePadded::new(lock_api::Mutex::from_raw(
            L::named("regsim.phase"),
            Control {
                pos: Position::start(cfg.cycles),
                reported: 0,
                changes: 0,
                first: 0,
                rebalances: 0,
                evaluations: 0,
            },
        )),
        inbox: (0..threads)
            .map(|_| {
                CachePadded::new(lock_api::Mutex::from_raw(
                    L::named("regsim.list"),
                    Vec::new(),
                ))
            })
            .collect(),
        shares,
        barrier: exec.barrier(threads),
        circuit,
    });
    let body = {
        let shared = Arc::clone(&shared);
        Arc::new(move |i: usize| shared.work(i))
    };
    let elapsed = exec.run(threads, body);
    let c = shared.control.lock();
    let fin = (c.pos.global % 2) as usize;
    let checksum = checksum_of(shared.words.iter().map(|w| w.lock()[fin]));
    RegsimOut {
        elapsed,
        evaluations: c.evaluations,
        phases: c.pos.global,
        rebalances: c.rebalances,
        checksum,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_settles_in_about_levels_plus_two_phases() {
        let cfg = RegsimCfg {
            cycles: 10,
            ..RegsimCfg::quick(1)
        };
        let phases = reference_phases(&cfg);
        assert!(phases >= 10 * 2, "{phases}");
        assert!(phases <= 10 * (LEVELS as u64 + 2), "{phases}");
    }

    #[test]
    fn degenerate_sizes_do_not_panic() {
        for objects in [0, 1, 2, 3, 17] {
            for fanin in [0, 1, 5] {
                let cfg = RegsimCfg {
                    threads: 0,
                    objects,
                    fanin,
                    cycles: 3,
                    eval_work: 1,
                    seed: 7,
                };
                let _ = reference_checksum(&cfg);
            }
        }
    }

    #[test]
    fn seeds_change_the_circuit() {
        let a = RegsimCfg {
            cycles: 5,
            ..RegsimCfg::quick(1)
        };
        let b = RegsimCfg {
            seed: 99,
            ..a.clone()
        };
        assert_ne!(reference_checksum(&a), reference_checksum(&b));
    }
}
