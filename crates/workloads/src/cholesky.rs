//! A dense blocked Cholesky factorization whose only synchronization is
//! one lock (SMARTQ §4.4, the "Cholesky" application).
//!
//! SMARTQ §4.4 measured its locks in two applications "that use a lock as
//! their only form of synchronization": the SPLASH Cholesky and a
//! multiprocessor Quicksort ([`crate::quicksort`]). SPLASH Cholesky factors
//! a *sparse* matrix with a supernodal method, its workers taking
//! supernodes from a task queue under a lock. This module is a **dense
//! blocked substitute** with the same structure — a shared task queue and
//! dependency counters under one lock, the arithmetic outside it — not a
//! port of the SPLASH code.
//!
//! # The factorization
//!
//! `A` is a symmetric positive-definite `n x n` matrix, cut into
//! `nb = ceil(n / block)` block rows and columns; the last block row and
//! column are ragged when `block` does not divide `n`. Only the lower
//! triangle of blocks, `(i, j)` with `i >= j`, is stored (each block
//! row-major, on its own). The right-looking blocked algorithm overwrites
//! it with `L` (`A = L * L^T`) through three kinds of task:
//!
//! * `potrf(k)`: factor the diagonal block, `A_kk = L_kk * L_kk^T`;
//! * `trsm(i, k)`, `i > k`: `L_ik = A_ik * L_kk^-T`;
//! * `update(i, j, k)`, `i >= j > k`: `A_ij -= L_ik * L_jk^T` (a `syrk`
//!   when `i == j`, a `gemm` otherwise).
//!
//! # The task graph
//!
//! Block `(i, j)` goes through `j + 1` *stages*, in order: the updates by
//! columns `k = 0, 1, ..., j - 1`, then its final task (`potrf(j)` when
//! `i == j`, `trsm(i, j)` otherwise), after which it is *final* and never
//! written again. Stage `s` of `(i, j)` is ready when stage `s - 1` of the
//! same block is done (so the updates of one block are applied one at a
//! time, in the order of `k`, and the result does not depend on the
//! number of workers) and
//!
//! * an update by column `k`: blocks `(i, k)` and `(j, k)` are final;
//! * `trsm(i, j)`: block `(j, j)` is final;
//! * `potrf(j)`: nothing more.
//!
//! The counters behind this — each block's count of completed stages, a
//! flag "queued or running", the FIFO of ready blocks and the count of
//! final blocks — are guarded by the one lock. Completing a stage
//! re-examines the blocks whose readiness can have changed: the block
//! itself; when `(k, k)` becomes final, the blocks `(i, k)` below it; when
//! `(i, k)` becomes final, the blocks `(i, j)` of its row and `(m, i)` of
//! column `i`. Only `(0, 0)` is ready at the start.
//!
//! # A worker
//!
//! [`Cholesky::work`] is run by every worker thread, on threads the caller
//! creates. A worker repeats:
//!
//! 1. lock; if every block is final, unlock and return; otherwise pop a
//!    ready block (or, if none is ready, unlock, spin [`IDLE_SPINS`] times
//!    with [`std::hint::spin_loop`] and start again); unlock;
//! 2. run the block's next stage, no lock held (the block is written by
//!    this task alone, its operands are final and only read);
//! 3. lock; count the stage done and queue the blocks it made ready;
//!    unlock.
//!
//! Every acquisition of the lock is counted inside its critical section
//! ([`Cholesky::lock_acquisitions`]). The lock is released on the thread
//! that took it (some locks' guards are not `Send`).

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use lock_api::RawMutex;

/// `n` of the experiment's matrix. One worker, release mode, on a 2-core
/// x86-64 VM: `work` took about 70 ms with `DEFAULT_BLOCK` (about 23 000
/// lock acquisitions); `n = 384` took only about 2.5 ms, `n = 1024` about
/// 37 ms. The time grows as `n^3`.
pub const DEFAULT_N: usize = 1280;
/// Block size of the experiment (`block = 16` at `n = 1024`: about 50 ms
/// and four times the acquisitions).
pub const DEFAULT_BLOCK: usize = 32;
/// Spin-loop hints an idle worker spends between two looks at the queue.
pub const IDLE_SPINS: u32 = 64;
/// Largest accepted `max |L * L^T - A| / max |A|` in [`Cholesky::verify`].
pub const TOLERANCE: f64 = 1e-8;

/// A value of type `T` guarded by a raw lock `R`, accessed only through
/// [`LockedCell::with`] (shared with [`crate::quicksort`]).
pub(crate) struct LockedCell<R, T> {
    lock: R,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is only reached through `with`, which holds `lock` for
// as long as the `&mut T` it hands out lives, so at most one thread at a
// time touches it, and the lock's acquire/release orders those accesses.
// `T: Send` because the value is used by whichever thread holds the lock.
unsafe impl<R: RawMutex + Sync, T: Send> Sync for LockedCell<R, T> {}

impl<R: RawMutex, T> LockedCell<R, T> {
    /// `value`, with a free lock.
    pub(crate) fn new(value: T) -> Self {
        Self {
            lock: R::INIT,
            value: UnsafeCell::new(value),
        }
    }

    /// Runs `f` on the value with the lock held; unlocks on this thread,
    /// also when `f` panics.
    #[inline]
    pub(crate) fn with<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
        let held = Held {
            lock: &self.lock,
            guard: Some(self.lock.lock()),
        };
        // SAFETY: we hold the lock until `held` drops, after `f` (and with
        // it the only reference to the value) is gone.
        let value = unsafe { &mut *self.value.get() };
        let out = f(value);
        drop(held);
        out
    }
}

/// Releases a lock when dropped, on the thread that took it: a `Held`
/// never leaves the stack frame of [`LockedCell::with`].
struct Held<'a, R: RawMutex> {
    lock: &'a R,
    guard: Option<R::Guard>,
}

impl<R: RawMutex> Drop for Held<'_, R> {
    fn drop(&mut self) {
        if let Some(guard) = self.guard.take() {
            // SAFETY: `guard` came from `self.lock.lock()` on this thread
            // (see the type's invariant) and is given back exactly once.
            unsafe { self.lock.unlock(guard) };
        }
    }
}

/// Index of block `(i, j)`, `i >= j`, in the packed lower triangle.
#[inline]
fn tri(i: usize, j: usize) -> usize {
    debug_assert!(i >= j);
    i * (i + 1) / 2 + j
}

/// The scheduling state, guarded by the lock.
struct Sched {
    /// Block rows (and columns).
    nb: usize,
    /// Per block (packed lower triangle): stages completed, `0..=j + 1`.
    stage: Vec<u32>,
    /// Per block: in `ready` or being worked on.
    queued: Vec<bool>,
    /// Blocks whose next stage can run.
    ready: VecDeque<(u32, u32)>,
    /// Blocks whose every stage is done.
    finalized: usize,
    /// Blocks in all.
    total: usize,
    /// Acquisitions of the lock (counted inside it).
    acquisitions: u64,
    /// A worker panicked in a task: the others give up.
    poisoned: bool,
}

impl Sched {
    fn new(nb: usize) -> Self {
        let total = nb * (nb + 1) / 2;
        let mut s = Self {
            nb,
            stage: vec![0; total],
            queued: vec![false; total],
            ready: VecDeque::new(),
            finalized: 0,
            total,
            acquisitions: 0,
            poisoned: false,
        };
        if nb > 0 {
            s.consider(0, 0);
        }
        s
    }

    fn is_final(&self, i: usize, j: usize) -> bool {
        self.stage[tri(i, j)] as usize == j + 1
    }

    /// Queues block `(i, j)` if it is idle and its next stage can run.
    fn consider(&mut self, i: usize, j: usize) {
        let id = tri(i, j);
        if self.queued[id] {
            return;
        }
        let s = self.stage[id] as usize;
        let ready = if s < j {
            self.is_final(i, s) && self.is_final(j, s)
        } else if s == j {
            i == j || self.is_final(j, j)
        } else {
            false
        };
        if ready {
            self.queued[id] = true;
            // Block indices are below `nb`, which fits a `u32` (checked in
            // `Cholesky::new`).
            self.ready.push_back((i as u32, j as u32));
        }
    }

    /// Records that the running stage of `(i, j)` is done and queues what
    /// it made ready.
    fn complete(&mut self, i: usize, j: usize) {
        let id = tri(i, j);
        self.queued[id] = false;
        self.stage[id] += 1;
        if !self.is_final(i, j) {
            self.consider(i, j);
            return;
        }
        self.finalized += 1;
        if i == j {
            // `(j, j)` final: the `trsm`s of column `j`.
            for m in j + 1..self.nb {
                self.consider(m, j);
            }
        } else {
            // `(i, k)` final, `k = j`: updates by column `k` of row `i` and
            // of column `i`.
            for jj in j + 1..=i {
                self.consider(i, jj);
            }
            for m in i..self.nb {
                self.consider(m, i);
            }
        }
    }
}

/// What a worker found in the queue.
enum Step {
    /// Every block is final (or a worker panicked).
    Finished,
    /// Nothing ready now.
    Idle,
    /// Run stage `stage` of block `(i, j)`.
    Run { i: usize, j: usize, stage: usize },
}

/// Marks the run poisoned if a task panics, so the other workers return
/// instead of waiting for a block that will never be done.
struct PoisonOnUnwind<'a, R: RawMutex>(&'a LockedCell<R, Sched>);

impl<R: RawMutex> Drop for PoisonOnUnwind<'_, R> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.with(|s| s.poisoned = true);
        }
    }
}

/// One factorization run: the matrix, its blocks and the task queue.
///
/// Build it with [`Cholesky::new`], call [`Cholesky::work`] on each of
/// the worker threads, then [`Cholesky::verify`].
pub struct Cholesky<R> {
    n: usize,
    block: usize,
    nb: usize,
    /// The original matrix, dense row-major `n x n` (read-only).
    a: Box<[f64]>,
    /// The lower triangle of blocks, packed ([`tri`]); block `(i, j)` is
    /// `size(i) x size(j)`, row-major. Written only by the task that runs
    /// its current stage, read only once final (see `run_stage`).
    blocks: Box<[UnsafeCell<Box<[f64]>>]>,
    /// Set by [`Cholesky::stop`]: the workers return unfinished.
    stop: AtomicBool,
    sched: LockedCell<R, Sched>,
}

// SAFETY: the blocks are shared between workers only as the task graph
// allows: a block is written by the one worker that popped it from the
// queue (the `queued` flag keeps it out of the queue until that stage is
// recorded done), and read by other tasks only after it became final,
// when nobody writes it any more; both the pop and the recording happen
// under the lock, whose release/acquire orders the accesses. Everything
// else is read-only or inside the `LockedCell`.
unsafe impl<R: RawMutex + Send + Sync> Sync for Cholesky<R> {}

impl<R> fmt::Debug for Cholesky<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cholesky")
            .field("n", &self.n)
            .field("block", &self.block)
            .field("block_rows", &self.nb)
            .finish_non_exhaustive()
    }
}

pub(crate) use symmetry_locks::platform::rng::SplitMix64;

impl<R: RawMutex + Send + Sync> Cholesky<R> {
    /// A run on a random symmetric positive-definite `n x n` matrix made
    /// from `seed` (off-diagonal entries uniform in `[-1, 1)`, diagonal
    /// entries `n + u` with `u` uniform in `[0, 1)`: strictly diagonally
    /// dominant, hence positive definite and well conditioned), in blocks
    /// of `block x block`.
    ///
    /// `block == 0` is taken as `1`, and a `block` larger than `n` as `n`;
    /// `n == 0` gives a run with nothing to do. The last block row and
    /// column are smaller when `block` does not divide `n`.
    ///
    /// # Panics
    ///
    /// If `n / block` needs more than 32 bits (a matrix far too big for
    /// memory anyway).
    pub fn new(n: usize, block: usize, seed: u64) -> Self {
        let block = block.max(1).min(n.max(1));
        let nb = n.div_ceil(block);
        assert!(u32::try_from(nb).is_ok(), "too many block rows");
        let mut rng = SplitMix64(seed);
        let mut a = vec![0.0; n * n].into_boxed_slice();
        for r in 0..n {
            for c in 0..r {
                let v = 2.0 * rng.unit() - 1.0;
                a[r * n + c] = v;
                a[c * n + r] = v;
            }
            a[r * n + r] = n as f64 + rng.unit();
        }
        let size = |b: usize| block.min(n - b * block);
        let mut blocks = Vec::with_capacity(nb * (nb + 1) / 2);
        for i in 0..nb {
            for j in 0..=i {
                let (rows, cols) = (size(i), size(j));
                let mut data = Vec::with_capacity(rows * cols);
                for r in 0..rows {
                    let row = (i * block + r) * n + j * block;
                    data.extend_from_slice(&a[row..row + cols]);
                }
                blocks.push(UnsafeCell::new(data.into_boxed_slice()));
            }
        }
        Self {
            n,
            block,
            nb,
            a,
            blocks: blocks.into_boxed_slice(),
            stop: AtomicBool::new(false),
            sched: LockedCell::new(Sched::new(nb)),
        }
    }

    /// Matrix order.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Block size in use (after the adjustments of [`Cholesky::new`]).
    pub fn block(&self) -> usize {
        self.block
    }

    /// Tasks of the whole factorization (`potrf`, `trsm` and updates).
    pub fn tasks(&self) -> u64 {
        // Block (i, j) has j + 1 stages.
        (0..self.nb as u64).map(|i| (i + 1) * (i + 2) / 2).sum()
    }

    /// Rows (and columns) of block row `b`.
    #[inline]
    fn size(&self, b: usize) -> usize {
        self.block.min(self.n - b * self.block)
    }

    /// The body of one worker: takes ready tasks from the queue and runs
    /// them until every block is final. Call it on each worker thread, any
    /// number of them; it returns once the factorization is done (at once
    /// if it already was, so a value is one run), or at its next look at
    /// the queue after [`Cholesky::stop`].
    pub fn work(&self) {
        loop {
            let step = self.sched.with(|s| {
                s.acquisitions += 1;
                if s.poisoned || s.finalized == s.total || self.stopped() {
                    Step::Finished
                } else if let Some((i, j)) = s.ready.pop_front() {
                    let (i, j) = (i as usize, j as usize);
                    Step::Run {
                        i,
                        j,
                        stage: s.stage[tri(i, j)] as usize,
                    }
                } else {
                    Step::Idle
                }
            });
            match step {
                Step::Finished => return,
                Step::Idle => {
                    for _ in 0..IDLE_SPINS {
                        std::hint::spin_loop();
                    }
                }
                Step::Run { i, j, stage } => {
                    let poison = PoisonOnUnwind(&self.sched);
                    self.run_stage(i, j, stage);
                    drop(poison);
                    self.sched.with(|s| {
                        s.acquisitions += 1;
                        s.complete(i, j);
                    });
                }
            }
        }
    }

    /// Runs stage `stage` of block `(i, j)`; the caller popped it from the
    /// queue, so it is this block's one running stage.
    fn run_stage(&self, i: usize, j: usize, stage: usize) {
        let (rows, cols) = (self.size(i), self.size(j));
        // SAFETY: block (i, j) was popped from the queue by this worker and
        // stays `queued` (so no other worker pops it) until this stage is
        // recorded done after we return; blocks that are not final are
        // read by no task (every operand below is final). So this is the
        // only reference to its data.
        let c = unsafe { &mut *self.blocks[tri(i, j)].get() };
        if stage < j {
            let k = stage;
            // SAFETY: the stage was ready, so (i, k) and (j, k) are final:
            // nobody writes them any more, and k < j means neither is
            // (i, j). Shared references only.
            let (lik, ljk) = unsafe {
                (
                    &*self.blocks[tri(i, k)].get(),
                    &*self.blocks[tri(j, k)].get(),
                )
            };
            update(c, lik, ljk, rows, cols, self.size(k));
        } else if i == j {
            potrf(c, rows);
        } else {
            // SAFETY: the stage was ready, so (j, j) is final and only
            // read; it is not (i, j) since i > j.
            let ljj = unsafe { &*self.blocks[tri(j, j)].get() };
            trsm(c, ljj, rows, cols);
        }
    }

    /// Asks the workers to give up: each returns at its next look at the
    /// queue (which it takes under the lock, as ever), leaving the work
    /// unfinished (unless it was done), so [`Cholesky::verify`] then fails. For a caller that bounds
    /// a run's time: under a lock that hands itself to descheduled
    /// waiters, the rest of a run can take a scheduling quantum per
    /// acquisition.
    pub fn stop(&self) {
        // Relaxed: the flag publishes no data, and the workers read it
        // under the lock; a worker that misses it takes one more task.
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether [`Cholesky::stop`] was called.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Times the lock was taken so far (by [`Cholesky::work`]; this call's
    /// own acquisition is not counted).
    pub fn lock_acquisitions(&self) -> u64 {
        self.sched.with(|s| s.acquisitions)
    }

    /// Checks, after every worker returned, that the blocks hold `L` with
    /// `max |L * L^T - A| / max |A| <= TOLERANCE` over the lower triangle.
    pub fn verify(&self) -> Result<(), String> {
        let (finalized, total, poisoned) = self.sched.with(|s| (s.finalized, s.total, s.poisoned));
        if poisoned {
            return Err("a worker panicked".into());
        }
        if finalized != total {
            return Err(format!("{finalized} of {total} blocks factored"));
        }
        let n = self.n;
        // L, dense row-major, zero above the diagonal.
        let mut l = vec![0.0; n * n];
        for i in 0..self.nb {
            for j in 0..=i {
                // SAFETY: every block is final (checked under the lock
                // above, which orders the workers' writes before this
                // read), and final blocks are written by nobody.
                let data = unsafe { &*self.blocks[tri(i, j)].get() };
                let cols = self.size(j);
                for r in 0..self.size(i) {
                    let gr = i * self.block + r;
                    for c in 0..cols {
                        let gc = j * self.block + c;
                        if gc <= gr {
                            l[gr * n + gc] = data[r * cols + c];
                        }
                    }
                }
            }
        }
        let scale = self.a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let mut worst = 0.0f64;
        let mut at = (0, 0);
        for r in 0..n {
            for c in 0..=r {
                let dot: f64 = l[r * n..r * n + c + 1]
                    .iter()
                    .zip(&l[c * n..c * n + c + 1])
                    .map(|(x, y)| x * y)
                    .sum();
                let err = (dot - self.a[r * n + c]).abs();
                if err.is_nan() {
                    return Err(format!("NaN in L * L^T at {:?}", (r, c)));
                }
                if err > worst {
                    worst = err;
                    at = (r, c);
                }
            }
        }
        let rel = if scale > 0.0 { worst / scale } else { worst };
        if rel <= TOLERANCE {
            Ok(())
        } else {
            Err(format!(
                "max |L*L^T - A| / max |A| = {rel:e} at {at:?} (tolerance {TOLERANCE:e})"
            ))
        }
    }
}

/// `potrf`: in place, the lower triangle of the `m x m` row-major block
/// `a` becomes its Cholesky factor (the strict upper triangle is left as
/// it is and never read).
fn potrf(a: &mut [f64], m: usize) {
    for c in 0..m {
        let row_c = &mut a[c * m..(c + 1) * m];
        let d = row_c[c] - row_c[..c].iter().map(|x| x * x).sum::<f64>();
        // A non-positive pivot gives NaN, which `verify` reports.
        let d = d.sqrt();
        row_c[c] = d;
        for r in c + 1..m {
            let (top, bottom) = a.split_at_mut(r * m);
            let row_c = &top[c * m..c * m + c];
            let row_r = &mut bottom[..m];
            let s: f64 = row_r[..c].iter().zip(row_c).map(|(x, y)| x * y).sum();
            row_r[c] = (row_r[c] - s) / d;
        }
    }
}

/// `trsm`: in place, the `rows x m` block `x` becomes `x * L^-T`, with
/// `L` the lower triangle of the `m x m` block `l`.
fn trsm(x: &mut [f64], l: &[f64], rows: usize, m: usize) {
    for row in x.chunks_exact_mut(m).take(rows) {
        for c in 0..m {
            let lc = &l[c * m..c * m + c];
            let s: f64 = lc.iter().zip(&row[..c]).map(|(a, b)| a * b).sum();
            row[c] = (row[c] - s) / l[c * m + c];
        }
    }
}

/// `syrk`/`gemm`: `c -= a * b^T`, `c` is `rows x cols`, `a` is
/// `rows x k`, `b` is `cols x k`, all row-major.
fn update(c: &mut [f64], a: &[f64], b: &[f64], rows: usize, cols: usize, k: usize) {
    // b^T (k x cols), so that the inner loop runs along rows of c.
    let mut bt = vec![0.0; k * cols];
    for (q, brow) in b.chunks_exact(k).take(cols).enumerate() {
        for (p, &v) in brow.iter().enumerate() {
            bt[p * cols + q] = v;
        }
    }
    for (crow, arow) in c.chunks_exact_mut(cols).zip(a.chunks_exact(k)).take(rows) {
        for (&av, btrow) in arow.iter().zip(bt.chunks_exact(cols)) {
            for (cv, &bv) in crow.iter_mut().zip(btrow) {
                *cv -= av * bv;
            }
        }
    }
}
