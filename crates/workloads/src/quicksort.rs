//! A multiprocessor Quicksort whose only synchronization is one lock
//! (SMARTQ §4.4, the "Quicksort" application).
//!
//! SMARTQ §4.4 measured its locks in two applications "that use a lock as
//! their only form of synchronization": Cholesky ([`crate::cholesky`]) and
//! a multiprocessor Quicksort, whose workers share a stack of sub-arrays
//! still to sort. This module follows that description.
//!
//! # The algorithm
//!
//! The array holds `len` random `u64`s made from a seed. One lock guards a
//! stack of ranges `[lo, hi)` still to sort and the count of *finalized*
//! elements (those in their final place). At the start the stack holds the
//! whole array. A worker ([`Quicksort::work`], run on every worker
//! thread) repeats:
//!
//! 1. lock; if every element is finalized, unlock and return; otherwise
//!    pop a range (or, if the stack is empty, unlock, spin [`IDLE_SPINS`]
//!    times with [`std::hint::spin_loop`] and start again); unlock;
//! 2. a range of at most [`CUTOFF`] elements is sorted with
//!    `sort_unstable`, then (lock) its elements are counted finalized
//!    (unlock);
//! 3. a larger range is partitioned (Hoare's scheme, median-of-three
//!    pivot; both parts are non-empty), no lock held: the popper owns the
//!    range. Parts larger than [`CUTOFF`] are pushed on the stack (lock,
//!    push, unlock); the others are then sorted locally with
//!    `sort_unstable` and counted finalized (lock, add, unlock).
//!
//! The ranges on the stack and those being worked on are disjoint, so a
//! range is touched by one worker at a time. The run is over when the
//! finalized count reaches `len`; idle workers re-check it under the lock.
//! Every acquisition of the lock is counted inside its critical section
//! ([`Quicksort::lock_acquisitions`]), and the lock is released on the
//! thread that took it.
//!
//! # Checks
//!
//! [`Quicksort::verify`] checks that the array is sorted and that it is a
//! permutation of the input, by comparing order-independent checksums
//! (the wrapping sum of the elements and of a mix of each) with those
//! taken at construction.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::{fmt, ptr};

use lock_api::RawMutex;

use symmetry_locks::platform::rng;

use crate::cholesky::{LockedCell, SplitMix64};

/// `len` of the experiment's array. One worker, release mode, on a 2-core
/// x86-64 VM: `work` took about 41 ms for 1 000 000 elements and 90 ms for
/// 2 000 000 (about 4 700 and 9 200 lock acquisitions).
pub const DEFAULT_LEN: usize = 1_500_000;
/// Ranges of at most this many elements are sorted locally, not pushed.
pub const CUTOFF: usize = 1000;
/// Spin-loop hints an idle worker spends between two looks at the stack.
pub const IDLE_SPINS: u32 = 64;

/// The shared state, guarded by the lock.
struct Stack {
    /// Ranges `[lo, hi)` still to sort, each longer than [`CUTOFF`]
    /// (except possibly the initial one).
    ranges: Vec<(usize, usize)>,
    /// Elements in their final place.
    finalized: usize,
    /// Acquisitions of the lock (counted inside it).
    acquisitions: u64,
    /// A worker panicked while sorting: the others give up.
    poisoned: bool,
}

/// What a worker found on the stack.
enum Step {
    /// Every element is finalized (or a worker panicked).
    Finished,
    /// Nothing on the stack now.
    Idle,
    /// Sort `[lo, hi)`.
    Run(usize, usize),
}

/// Marks the run poisoned if sorting panics, so the other workers return
/// instead of waiting for elements that will never be finalized.
struct PoisonOnUnwind<'a, R: RawMutex>(&'a LockedCell<R, Stack>);

impl<R: RawMutex> Drop for PoisonOnUnwind<'_, R> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.with(|s| s.poisoned = true);
        }
    }
}

/// One sorting run: the array and the stack of ranges.
///
/// Build it with [`Quicksort::new`], call [`Quicksort::work`] on each of
/// the worker threads, then [`Quicksort::verify`].
pub struct Quicksort<R> {
    /// The array; element `x` is written only by the worker that owns a
    /// range containing `x` (see `range_ptr`).
    data: Box<[UnsafeCell<u64>]>,
    /// Wrapping sum of the input.
    sum: u64,
    /// Wrapping sum of `mix(x)` over the input.
    mixed: u64,
    /// Set by [`Quicksort::stop`]: the workers return unfinished.
    stop: AtomicBool,
    stack: LockedCell<R, Stack>,
}

// SAFETY: the elements are shared between workers only through ranges:
// a range is owned by the worker that popped it (or, for the initial
// range, by the first popper), which alone touches it until it splits it
// into disjoint parts that it pushes (giving them away) or finalizes.
// Pushes and pops happen under the lock, whose release/acquire orders the
// accesses of successive owners. Everything else is read-only or inside
// the `LockedCell`.
unsafe impl<R: RawMutex + Send + Sync> Sync for Quicksort<R> {}

impl<R> fmt::Debug for Quicksort<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Quicksort")
            .field("len", &self.data.len())
            .finish_non_exhaustive()
    }
}

/// An order-independent fingerprint of one element (for the checksum).
#[inline]
fn mix(x: u64) -> u64 {
    rng::mix(x.wrapping_add(rng::GOLDEN))
}

impl<R: RawMutex + Send + Sync> Quicksort<R> {
    /// A run on `len` random `u64`s made from `seed`. `len` may be `0`.
    pub fn new(len: usize, seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed);
        Self::from_vec((0..len).map(|_| rng.next_u64()).collect())
    }

    /// A run on the given values (for tests: duplicates, sorted input).
    pub fn from_vec(values: Vec<u64>) -> Self {
        let sum = values.iter().fold(0u64, |s, &x| s.wrapping_add(x));
        let mixed = values.iter().fold(0u64, |s, &x| s.wrapping_add(mix(x)));
        let len = values.len();
        let ranges = if len > 0 { vec![(0, len)] } else { Vec::new() };
        Self {
            data: values.into_iter().map(UnsafeCell::new).collect(),
            sum,
            mixed,
            stop: AtomicBool::new(false),
            stack: LockedCell::new(Stack {
                ranges,
                finalized: 0,
                acquisitions: 0,
                poisoned: false,
            }),
        }
    }

    /// Elements to sort.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether there is nothing to sort.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The elements `[lo, hi)` (in bounds, or this panics) as a raw
    /// slice. Turning it into a `&mut [u64]` needs the range to be owned
    /// (popped from the stack, or split from an owned range and not given
    /// away), so that no other reference to these elements exists while
    /// the slice lives.
    fn range_ptr(&self, lo: usize, hi: usize) -> *mut [u64] {
        let cells = &self.data[lo..hi];
        // `UnsafeCell<u64>` has the layout of `u64`, and the cells allow
        // writes through a shared borrow.
        ptr::slice_from_raw_parts_mut(UnsafeCell::raw_get(cells.as_ptr()), cells.len())
    }

    /// The body of one worker: takes ranges from the stack and sorts them
    /// until every element is finalized. Call it on each worker thread,
    /// any number of them; it returns once the array is sorted (at once if
    /// it already was, so a value is one run), or at its next look at the
    /// stack after [`Quicksort::stop`].
    pub fn work(&self) {
        let len = self.data.len();
        loop {
            let step = self.stack.with(|s| {
                s.acquisitions += 1;
                if s.poisoned || s.finalized == len || self.stopped() {
                    Step::Finished
                } else if let Some((lo, hi)) = s.ranges.pop() {
                    Step::Run(lo, hi)
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
                Step::Run(lo, hi) => {
                    let poison = PoisonOnUnwind(&self.stack);
                    self.sort_range(lo, hi);
                    drop(poison);
                }
            }
        }
    }

    /// Sorts or splits the popped range `[lo, hi)`.
    fn sort_range(&self, lo: usize, hi: usize) {
        // SAFETY: this worker popped [lo, hi) from the stack under the
        // lock: no other worker has it (ranges on the stack and in work
        // are disjoint), and it was in bounds when pushed.
        let v = unsafe { &mut *self.range_ptr(lo, hi) };
        if v.len() <= CUTOFF {
            v.sort_unstable();
            self.stack.with(|s| {
                s.acquisitions += 1;
                s.finalized += hi - lo;
            });
            return;
        }
        let p = partition(v);
        let (left, right) = v.split_at_mut(p);
        let parts = [(lo, lo + p), (lo + p, hi)];
        let big = parts.map(|(a, b)| b - a > CUTOFF);
        if big[0] || big[1] {
            self.stack.with(|s| {
                s.acquisitions += 1;
                for (part, &b) in parts.iter().zip(&big) {
                    if b {
                        s.ranges.push(*part);
                    }
                }
            });
        }
        // The pushed parts now belong to whoever pops them: touch only
        // the small ones from here on.
        let mut done = 0;
        for (part, b) in [left, right].into_iter().zip(big) {
            if !b {
                part.sort_unstable();
                done += part.len();
            }
        }
        if done > 0 {
            self.stack.with(|s| {
                s.acquisitions += 1;
                s.finalized += done;
            });
        }
    }

    /// Asks the workers to give up: each returns at its next look at the
    /// stack (which it takes under the lock, as ever), leaving the work
    /// unfinished (unless it was done), so [`Quicksort::verify`] then fails. For a caller that bounds
    /// a run's time: under a lock that hands itself to descheduled
    /// waiters, the rest of a run can take a scheduling quantum per
    /// acquisition.
    pub fn stop(&self) {
        // Relaxed: the flag publishes no data, and the workers read it
        // under the lock; a worker that misses it takes one more task.
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether [`Quicksort::stop`] was called.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Times the lock was taken so far (by [`Quicksort::work`]; this
    /// call's own acquisition is not counted).
    pub fn lock_acquisitions(&self) -> u64 {
        self.stack.with(|s| s.acquisitions)
    }

    /// Checks, after every worker returned, that the array is sorted and
    /// has the input's checksums.
    pub fn verify(&self) -> Result<(), String> {
        let len = self.data.len();
        let (finalized, poisoned) = self.stack.with(|s| (s.finalized, s.poisoned));
        if poisoned {
            return Err("a worker panicked".into());
        }
        if finalized != len {
            return Err(format!("{finalized} of {len} elements finalized"));
        }
        // SAFETY: every element is finalized (checked under the lock
        // above, which orders the workers' writes before this read), so no
        // range is owned by a worker and nobody writes the array. A shared
        // slice over the whole array: no `&mut` exists.
        let v: &[u64] = unsafe { &*self.range_ptr(0, len) };
        if let Some(i) = v.windows(2).position(|w| w[0] > w[1]) {
            return Err(format!("not sorted at {i}: {} > {}", v[i], v[i + 1]));
        }
        let sum = v.iter().fold(0u64, |s, &x| s.wrapping_add(x));
        let mixed = v.iter().fold(0u64, |s, &x| s.wrapping_add(mix(x)));
        if sum != self.sum || mixed != self.mixed {
            return Err("not a permutation of the input (checksums differ)".into());
        }
        Ok(())
    }
}

/// Hoare's partition (CLRS 7-1) around the median of the first, middle and
/// last elements, moved to the front. Returns `p` with `0 < p < v.len()`,
/// every element of `v[..p]` `<=` every element of `v[p..]`.
/// `v.len() >= 2`.
fn partition(v: &mut [u64]) -> usize {
    let n = v.len();
    debug_assert!(n >= 2);
    let (a, b, c) = (0, n / 2, n - 1);
    let m = if (v[a] <= v[b]) == (v[b] <= v[c]) {
        b
    } else if (v[b] <= v[a]) == (v[a] <= v[c]) {
        a
    } else {
        c
    };
    v.swap(0, m);
    let pivot = v[0];
    // CLRS's i = -1, j = n; `i` is the next to examine from the left.
    let mut i = 0;
    let mut j = n;
    loop {
        // Stops at the latest at the pivot (first pass) or at an element
        // swapped right (later passes).
        while v[i] < pivot {
            i += 1;
        }
        j -= 1;
        while v[j] > pivot {
            j -= 1;
        }
        if i >= j {
            // CLRS: with the pivot taken from v[0], 0 <= j < n - 1.
            return j + 1;
        }
        v.swap(i, j);
        i += 1;
    }
}
