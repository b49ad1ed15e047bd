//! A Hanoi-like program (KLMO91 §3, "Hanoi"; elapsed times in KLMO91 §5,
//! Table 4).
//!
//! KLMO91's Hanoi is "a parallel program that solves the well-known
//! problem of the Buddhist monks of Hanoi. The program uses five pegs and
//! 64 disks ... a larger disk is never placed atop a smaller one. A large
//! number of threads are used in the program, and there is frequent
//! synchronization." Most of its 207 locks came from "managing the
//! display". Its lock waits were mostly short (Fig. 3b), yet §5 reports
//! that "there are some locks that are held for a very long time" (so
//! always-spin lost to always-block) and that "the number of active
//! threads in Hanoi is quite bursty ... intervals during execution when
//! all processors are busy, and others where only half are busy".
//!
//! This program keeps that shape; it does not solve the puzzle (the order
//! of moves is random), it only moves disks legally, many threads at once,
//! and draws every move.
//!
//! # What it does
//!
//! [`PEGS`] pegs hold [`HanoiCfg::disks`] disks, all on peg 0 at the
//! start, largest at the bottom. [`HanoiCfg::threads`] threads (many: the
//! presets' callers use several per processor) each repeat:
//!
//! 1. *think*: [`THINK_WORK`] iterations of [`spin_work`], no lock held;
//! 2. *move*: pick two pegs at random, lock them (`hanoi.peg`, one lock
//!    per peg, always the lower index first), and make the one legal move
//!    between them — the smaller top disk goes onto the other peg — with
//!    [`MOVE_WORK`] iterations of work while both are held; if both pegs
//!    are empty, pick again;
//! 3. *draw*: erase the disk at its old place and draw it at its new one,
//!    each in the display region of that place (`hanoi.display`,
//!    [`REGIONS`] locks, [`DRAW_WORK`] iterations held);
//! 4. every [`FLUSH_EVERY`] of its moves, post its damage count to the
//!    frame (`hanoi.refresh`, a few instructions held);
//! 5. every [`REDRAW_EVERY`] of its moves, redraw the whole display: hold
//!    `hanoi.refresh` while taking each region in turn and spending
//!    [`REDRAW_WORK`] iterations in all (tens of microseconds: the lock
//!    held "for a very long time" that punishes always-spin).
//!
//! So the waiting times mix many short waits (pegs, regions, damage
//! posts) with long ones (whoever meets a redraw in progress).
//!
//! # Burstiness
//!
//! The moves ([`HanoiCfg::moves`] in all) are split over [`ROUNDS`] rounds
//! separated by the executor's barrier. Even rounds are *full*: every
//! thread works. Odd rounds are *lean*: only half the threads (a different
//! half each time) work, while the other half wait, blocked on the barrier
//! (a blocking wait of the executor: they give their processors away). A
//! round's moves are divided equally among its working threads, so the
//! number of runnable threads alternates between `threads` and
//! `threads / 2`.
//!
//! # Checks
//!
//! A drawn disk is an XOR of a hash of (disk, peg, height) into its
//! region, an erased one the same XOR again, so after the run the display
//! must equal the picture of the final pegs. [`HanoiOut::valid`] checks
//! that, that every disk is on exactly one peg, that no disk lies on a
//! smaller one, and that the moves add up.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;

use symmetry_locks::platform::rng::SplitMix64;

use crate::{Exec, WorkloadLock, spin_work};

/// Pegs (KLMO91: five).
pub const PEGS: usize = 5;
/// Display regions, one `hanoi.display` lock each.
pub const REGIONS: usize = 8;
/// Rounds: alternately full (all threads work) and lean (half work).
pub const ROUNDS: usize = 12;
/// `spin_work` iterations between two moves, no lock held.
pub const THINK_WORK: u64 = 600;
/// `spin_work` iterations of a move, both peg locks held.
pub const MOVE_WORK: u64 = 300;
/// `spin_work` iterations of drawing or erasing one disk, a region held.
pub const DRAW_WORK: u64 = 30;
/// A thread posts its damage to the frame every this many of its moves.
pub const FLUSH_EVERY: u64 = 8;
/// A thread redraws the whole display every this many of its moves.
pub const REDRAW_EVERY: u64 = 256;
/// `spin_work` iterations of a full redraw (about 60 us), `hanoi.refresh`
/// held throughout, each region held for its eighth.
pub const REDRAW_WORK: u64 = 60_000;

/// Parameters.
#[derive(Debug, Clone)]
pub struct HanoiCfg {
    /// Worker threads (KLMO91: many, more than processors).
    pub threads: usize,
    /// Disks.
    pub disks: u32,
    /// Moves in all (split among threads).
    pub moves: u64,
    /// Seed.
    pub seed: u64,
}

impl HanoiCfg {
    /// A short run (about 0.1 s with 8 OS threads on a 2-core machine,
    /// about twice that with always-spin): 64 disks, 100,000 moves.
    pub fn quick(threads: usize) -> Self {
        HanoiCfg {
            threads: threads.max(1),
            disks: 64,
            moves: 100_000,
            seed: 0x4A40_0001,
        }
    }

    /// A longer run (about 1 s with 8 OS threads on a 2-core machine):
    /// 64 disks, 1,000,000 moves.
    pub fn full(threads: usize) -> Self {
        HanoiCfg {
            threads: threads.max(1),
            disks: 64,
            moves: 1_000_000,
            seed: 0x4A40_0001,
        }
    }
}

/// Result of a run.
#[derive(Debug, Clone)]
pub struct HanoiOut {
    /// Wall time.
    pub elapsed: Duration,
    /// Moves made.
    pub moves: u64,
    /// Whether every invariant held at the end (disks conserved, no disk
    /// on a smaller one).
    pub valid: bool,
}

/// The picture of disk `disk` at height `height` of peg `peg`, and the
/// region it is drawn in.
fn pixel(disk: u32, peg: usize, height: usize) -> (usize, u64) {
    let region = (height * PEGS + peg) % REGIONS;
    let s = (u64::from(disk) << 32) ^ ((peg as u64) << 16) ^ height as u64;
    (region, SplitMix64::new(s).next_u64())
}

/// One display region, under its `hanoi.display` lock.
#[derive(Debug, Default)]
struct Region {
    /// XOR of the pictures of the disks drawn here.
    picture: u64,
    /// Draws and erases.
    updates: u64,
}

/// The frame, under `hanoi.refresh`.
#[derive(Debug, Default)]
struct Frame {
    /// Moves posted since the last redraw.
    damage: u64,
    /// Full redraws.
    redraws: u64,
    /// Digest of the last redraw (the "screen").
    screen: u64,
}

struct Shared<L: WorkloadLock> {
    /// Disks of each peg, bottom first.
    pegs: Vec<CachePadded<lock_api::Mutex<L, Vec<u32>>>>,
    regions: Vec<CachePadded<lock_api::Mutex<L, Region>>>,
    refresh: CachePadded<lock_api::Mutex<L, Frame>>,
    /// Moves of each thread in each round: `quota[round][thread]`.
    quota: Vec<Vec<u64>>,
    /// Moves made, summed by the threads as they finish.
    made: AtomicU64,
    barrier: Arc<dyn crate::ExecBarrier>,
    seed: u64,
}

/// A move: `disk` went from `from` (where it was at height `hf`) to `to`
/// (where it is at height `ht`).
struct Move {
    disk: u32,
    from: usize,
    hf: usize,
    to: usize,
    ht: usize,
}

impl<L: WorkloadLock> Shared<L> {
    /// The legal move between pegs `a < b`, made; `None` if both are empty.
    fn move_between(&self, a: usize, b: usize) -> Option<Move> {
        let mut pa = self.pegs[a].lock();
        let mut pb = self.pegs[b].lock();
        spin_work(MOVE_WORK);
        let (from, to, src, dst) = match (pa.last(), pb.last()) {
            (None, None) => return None,
            (Some(_), None) => (a, b, &mut *pa, &mut *pb),
            (None, Some(_)) => (b, a, &mut *pb, &mut *pa),
            (Some(x), Some(y)) if x < y => (a, b, &mut *pa, &mut *pb),
            _ => (b, a, &mut *pb, &mut *pa),
        };
        let disk = src.pop()?;
        let hf = src.len();
        let ht = dst.len();
        dst.push(disk);
        Some(Move {
            disk,
            from,
            hf,
            to,
            ht,
        })
    }

    /// Erases or draws `disk` at (`peg`, `height`).
    fn draw(&self, disk: u32, peg: usize, height: usize) {
        let (r, pic) = pixel(disk, peg, height);
        let mut g = self.regions[r].lock();
        spin_work(DRAW_WORK);
        g.picture ^= pic;
        g.updates += 1;
    }

    /// Redraws the whole display, holding `hanoi.refresh` throughout.
    fn redraw(&self) {
        let mut f = self.refresh.lock();
        let mut screen = f.screen;
        for region in &self.regions {
            let g = region.lock();
            screen = screen.rotate_left(9) ^ g.picture ^ spin_work(REDRAW_WORK / REGIONS as u64);
        }
        f.screen = screen;
        f.redraws += 1;
        f.damage = 0;
    }

    /// Worker `i`.
    fn work(&self, i: usize) {
        let mut rng = SplitMix64::new(self.seed ^ (i as u64).wrapping_mul(0xD134_2543_DE82_EF95));
        let mut mine = 0u64;
        for round in &self.quota {
            let mut left = round[i];
            while left > 0 {
                spin_work(THINK_WORK);
                let r = rng.next_u64();
                // One of the 10 unordered pairs of distinct pegs.
                let x = (r % PEGS as u64) as usize;
                let y = (x + 1 + ((r >> 8) % (PEGS as u64 - 1)) as usize) % PEGS;
                let Some(m) = self.move_between(x.min(y), x.max(y)) else {
                    continue;
                };
                left -= 1;
                mine += 1;
                self.draw(m.disk, m.from, m.hf);
                self.draw(m.disk, m.to, m.ht);
                if mine.is_multiple_of(FLUSH_EVERY) {
                    self.refresh.lock().damage += FLUSH_EVERY;
                }
                if mine.is_multiple_of(REDRAW_EVERY) {
                    self.redraw();
                }
            }
            self.barrier.wait();
        }
        // Relaxed: read after the executor joined every thread.
        self.made.fetch_add(mine, Ordering::Relaxed);
    }

    /// Checks the invariants after the run (module docs).
    fn check(&self, disks: u32, moves: u64) -> bool {
        let mut seen = vec![false; disks as usize];
        let mut picture = [0u64; REGIONS];
        for (p, peg) in self.pegs.iter().enumerate() {
            let peg = peg.lock();
            if peg.windows(2).any(|w| w[0] <= w[1]) {
                return false;
            }
            for (h, &d) in peg.iter().enumerate() {
                match seen.get_mut(d as usize) {
                    Some(s) if !*s => *s = true,
                    _ => return false,
                }
                let (r, pic) = pixel(d, p, h);
                picture[r] ^= pic;
            }
        }
        let drawn_ok = self
            .regions
            .iter()
            .zip(picture)
            .all(|(r, pic)| r.lock().picture == pic);
        let updates: u64 = self.regions.iter().map(|r| r.lock().updates).sum();
        seen.iter().all(|&s| s) && drawn_ok && updates == 2 * moves
    }
}

/// `quota[round][thread]`: `moves` divided over the working threads of
/// every round (module docs), remainders to the earliest slots.
fn schedule(threads: usize, moves: u64) -> Vec<Vec<u64>> {
    let lean = (threads / 2).max(1);
    let works =
        |round: usize, i: usize| round.is_multiple_of(2) || (i + round / 2 * lean) % threads < lean;
    let slots: u64 = (0..ROUNDS)
        .map(|r| (0..threads).filter(|&i| works(r, i)).count() as u64)
        .sum();
    let (each, mut extra) = (moves / slots, moves % slots);
    (0..ROUNDS)
        .map(|r| {
            (0..threads)
                .map(|i| {
                    if !works(r, i) {
                        return 0;
                    }
                    let bonus = u64::from(extra > 0);
                    extra -= bonus;
                    each + bonus
                })
                .collect()
        })
        .collect()
}

/// Runs the program with lock `L` on executor `E`.
pub fn run<L: WorkloadLock, E: Exec>(cfg: &HanoiCfg, exec: &E) -> HanoiOut {
    let threads = cfg.threads.max(1);
    let disks = cfg.disks.max(1);
    let mut initial = Vec::with_capacity(PEGS);
    initial.push((0..disks).rev().collect::<Vec<u32>>());
    initial.resize(PEGS, Vec::new());
    let mut regions: Vec<Region> = (0..REGIONS).map(|_| Region::default()).collect();
    for (h, &d) in initial[0].iter().enumerate() {
        let (r, pic) = pixel(d, 0, h);
        regions[r].picture ^= pic;
    }
    let shared = Arc::new(Shared::<L> {
        pegs: initial
            .into_iter()
            .map(|p| CachePadded::new(lock_api::Mutex::from_raw(L::named("hanoi.peg"), p)))
            .collect(),
        regions: regions
            .into_iter()
            .map(|r| CachePadded::new(lock_api::Mutex::from_raw(L::named("hanoi.display"), r)))
            .collect(),
        refresh: CachePadded::new(lock_api::Mutex::from_raw(
            L::named("hanoi.refresh"),
            Frame::default(),
        )),
        quota: schedule(threads, cfg.moves),
        made: AtomicU64::new(0),
        barrier: exec.barrier(threads),
        seed: cfg.seed,
    });
    let body = {
        let shared = Arc::clone(&shared);
        Arc::new(move |i: usize| shared.work(i))
    };
    let elapsed = exec.run(threads, body);
    let moves = shared.made.load(Ordering::Relaxed);
    let valid = moves == cfg.moves && shared.check(disks, moves);
    HanoiOut {
        elapsed,
        moves,
        valid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_adds_up_and_alternates() {
        for threads in 1..=9 {
            for moves in [0, 1, 7, 1000, 40_001] {
                let q = schedule(threads, moves);
                assert_eq!(q.len(), ROUNDS);
                assert_eq!(q.iter().flatten().sum::<u64>(), moves);
                if moves >= 1000 {
                    for (r, round) in q.iter().enumerate() {
                        let working = round.iter().filter(|&&m| m > 0).count();
                        let want = if r % 2 == 0 {
                            threads
                        } else {
                            (threads / 2).max(1)
                        };
                        assert_eq!(working, want, "threads {threads} round {r}");
                    }
                }
            }
        }
    }

    #[test]
    fn lean_rounds_rotate_the_working_half() {
        let q = schedule(8, 10_000);
        assert_ne!(q[1], q[3]);
    }
}
