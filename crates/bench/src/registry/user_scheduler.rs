//! User-written schedulers: ready pools written the way a user outside
//! `symmetry-threads` writes them, against its public API only.
//!
//! PRESTO (Faust & Levy 1990, §2 and §3.4) lets an application replace the
//! scheduler object's default discipline (FIFO) with its own; Presto paid
//! for that flexibility with "extra layers of abstraction" that cost 24% of
//! thread startup. In `symmetry-threads` the scheduler object is the
//! [`ReadyPool`] trait, a type parameter of the strategy, so a user's pool is
//! monomorphized into the dispatch path exactly as the built-in
//! [`Fifo`](symmetry_threads::Fifo) is. `presto-create-start-delete`
//! measures that claim: [`Lifo`] and [`Priority`] plugged into
//! [`LocalReadyq`] against the built-in pool.
//!
//! - [`Lifo`]: a stack threaded through the control blocks' intrusive link
//!   ([`CbRef::next`], [`CbRef::set_next`]); push and pop are two pointer
//!   writes, no allocation. The invariant: `top` heads a chain of exactly
//!   `len` control blocks linked by `next`, all owned by this pool.
//! - [`Priority`]: highest [`CbRef::priority`] first, FIFO among equal
//!   priorities (a sequence number breaks ties), on a binary heap. The heap
//!   allocates as it grows (amortized; it keeps its capacity), which is the
//!   price of a general priority queue.
//!
//! The strategy guards each pool with its spin lock, so the pools
//! themselves are plain single-threaded data structures.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use symmetry_locks::Tas;
use symmetry_threads::{CbRef, LocalReadyq, ReadyPool};

/// Last in, first out, on the intrusive link: the most recently readied
/// thread runs first (its control block is the most likely to be in cache).
#[derive(Debug, Default)]
pub struct Lifo {
    top: Option<CbRef>,
    len: usize,
}

impl ReadyPool for Lifo {
    #[inline(always)]
    fn push(&mut self, t: CbRef) {
        // We own `t` from now until `pop` hands it out, so its link is ours.
        t.set_next(self.top);
        self.top = Some(t);
        self.len += 1;
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<CbRef> {
        let t = self.top?;
        self.top = t.next();
        self.len -= 1;
        Some(t)
    }

    #[inline(always)]
    fn len(&self) -> usize {
        self.len
    }
}

/// One entry of the [`Priority`] heap.
#[derive(Debug, Clone, Copy)]
struct Entry {
    prio: i64,
    seq: u64,
    cb: CbRef,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    /// Greater = runs first: higher priority, then the older entry.
    fn cmp(&self, other: &Self) -> Ordering {
        self.prio
            .cmp(&other.prio)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// Highest priority first ([`CbRef::priority`], set with
/// `Handle::builder().priority(p)`), FIFO among equals.
#[derive(Debug, Default)]
pub struct Priority {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl ReadyPool for Priority {
    #[inline]
    fn push(&mut self, t: CbRef) {
        let seq = self.seq;
        self.seq = seq.wrapping_add(1);
        self.heap.push(Entry {
            prio: t.priority(),
            seq,
            cb: t,
        });
    }

    #[inline]
    fn pop(&mut self) -> Option<CbRef> {
        self.heap.pop().map(|e| e.cb)
    }

    #[inline(always)]
    fn len(&self) -> usize {
        self.heap.len()
    }
}

/// `local-readyq` with the user's [`Lifo`] in every ready queue.
pub type LocalReadyqLifo = LocalReadyq<Tas, Lifo>;

/// `local-readyq` with the user's [`Priority`] pool in every ready queue.
pub type LocalReadyqPriority = LocalReadyq<Tas, Priority>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use symmetry_threads::{Runtime, Strategy};

    /// Runs, on one processor with one ready queue, a driver that readies
    /// threads with the given priorities while it keeps the processor, then
    /// returns the indices of the threads in the order they ran.
    fn order<S: Strategy>(prios: &[i64]) -> Vec<usize> {
        let rt: Runtime<S> = Runtime::builder().processors(1).queues(1).build().unwrap();
        let h = rt.handle();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (log2, prios) = (Arc::clone(&log), prios.to_vec());
        rt.block_on(move || {
            let kids: Vec<_> = prios
                .iter()
                .enumerate()
                .map(|(i, &p)| {
                    let log = Arc::clone(&log2);
                    h.builder()
                        .priority(p)
                        .spawn(move || log.lock().unwrap().push(i))
                })
                .collect();
            for k in kids {
                k.join().unwrap();
            }
        })
        .unwrap();
        log.lock().unwrap().clone()
    }

    #[test]
    fn lifo_runs_the_last_readied_first() {
        assert_eq!(order::<LocalReadyqLifo>(&[0; 4]), vec![3, 2, 1, 0]);
    }

    #[test]
    fn priority_runs_highest_first_fifo_among_equals() {
        assert_eq!(
            order::<LocalReadyqPriority>(&[1, 5, 3, 9, 3]),
            vec![3, 1, 2, 4, 0]
        );
        assert_eq!(order::<LocalReadyqPriority>(&[0, 0, 0]), vec![0, 1, 2]);
    }

    #[test]
    fn builtin_fifo_for_comparison() {
        assert_eq!(
            order::<LocalReadyq<Tas, symmetry_threads::Fifo>>(&[3, 2, 1]),
            vec![0, 1, 2]
        );
    }

    #[test]
    fn user_pools_run_many_threads_on_many_processors() {
        fn fan_out<S: Strategy>() {
            let rt: Runtime<S> = Runtime::new(2).unwrap();
            let h = rt.handle();
            let sum = rt
                .block_on(move || {
                    let kids: Vec<_> = (0..1000u64).map(|i| h.spawn(move || i)).collect();
                    kids.into_iter().map(|k| k.join().unwrap()).sum::<u64>()
                })
                .unwrap();
            assert_eq!(sum, 999 * 1000 / 2);
        }
        fan_out::<LocalReadyqLifo>();
        fan_out::<LocalReadyqPriority>();
    }
}
