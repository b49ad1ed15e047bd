//! `clh`: the list-based queue lock of Craig (1993) and Landin & Hagersten
//! (1994).
//!
//! A node is one flag `locked`, true while its owner holds or waits for the
//! lock, plus two fields only its current owner touches: the predecessor it
//! will adopt and an *enqueue counter*. Each attempt to enqueue a node (by
//! `lock` or `try_lock`, on any CLH lock) first increments its counter.
//!
//! State word: `tail`, a `u64` that names one *enqueue* of the last
//! acquirer's node, `slot << 44 | counter mod 2^44`, where `slot`, from 1
//! to 2^20 - 1, is one more than the node's index in the type-stable slab
//! of `node_pool` (under loom, where nodes are boxed, the node's address
//! `>> 7` and 23 counter bits);
//! `0` before the first acquisition. Invariants:
//!
//! * the lock is held iff `tail` is non-zero and its node's `locked` is
//!   true: that node's owner holds or waits, and the holder is the first of
//!   the chain of `locked` nodes ending there; each waiter spins on its
//!   predecessor's node only;
//! * no two enqueues write the same word into `tail` (up to a wrap of the
//!   counter: one node enqueued 2^44 times);
//! * a released node stays referenced by `tail` or by its successor's
//!   `pred` until that successor adopts it in its own `unlock`; only then
//!   can it be enqueued again (so a node is in at most one queue position).
//!
//! `lock`: take a node, set `locked = true`, bump its counter, swap its word
//! into `tail`, spin while the predecessor's `locked` is true. `unlock`:
//! clear our `locked` (the successor, if any, now runs) and *adopt the
//! predecessor's node*, which nobody else references any more; our own node
//! now belongs to the successor or, if there is none, stays in `tail` until
//! the next acquirer adopts it, or until the lock is dropped and the node
//! goes to the dropping thread's pool. Nodes are type-stable (never freed,
//! see `node_pool`). Nodes therefore migrate between threads, which is why
//! the per-thread pool holds heap nodes and the guard carries the node.
//!
//! `try_lock` never waits for a holder. It reads `tail` = `w`, fails if
//! `w`'s node is locked, and otherwise CASes `w` to its own word. A
//! successful CAS read the very write of `w` the load read (no other
//! enqueue writes `w`) and, being a read-modify-write, nothing was written
//! to `tail` in between: nobody enqueued behind `w`, so `w`'s node was not
//! adopted, not enqueued again, and its `locked` is still the `false` the
//! load saw. The new holder has nobody to wait for. (With the node address
//! alone in `tail`, the node seen released could be adopted, enqueued again
//! on this lock and be the tail, *locked*, by the time of the CAS, which
//! then succeeded behind a holder, and `try_lock` waited for it: a thread
//! holding lock A and only trying lock B could deadlock.) Only if one node
//! were enqueued a multiple of 2^44 times, about a day of back-to-back
//! acquisitions, between `try_lock`'s load and its CAS, and were then the
//! tail again, could the CAS succeed behind a holder; `try_lock` re-checks
//! the predecessor and then waits, so mutual exclusion never depends on the
//! width of the counter.

use core::cell::Cell;
use core::ptr::NonNull;

use crossbeam_utils::CachePadded;

use crate::backoff::{Spin, wait_until};
use crate::list_queue::NodeToken;
use crate::sync::{AtomicBool, AtomicU64, Ordering, maybe_const_fn};

/// A queue node, alone on its cache line.
#[derive(Debug, Default)]
pub struct ClhNode {
    /// True while the node's owner holds or waits for the lock.
    locked: AtomicBool,
    /// The predecessor node, adopted at `unlock`; touched only by the owner.
    pred: Cell<Option<NonNull<Node>>>,
    /// The `tail` word of the node's latest enqueue attempt: its name (set
    /// when the node is allocated) and, in the low `COUNT_BITS`, its enqueue
    /// counter. Touched only by the owner.
    word: Cell<u64>,
}

type Node = CachePadded<ClhNode>;

/// Width of the enqueue counter in a `tail` word.
#[cfg(not(loom))]
const COUNT_BITS: u32 = 44;
/// Under loom, nodes are boxed (loom atomics cannot live in a static slab)
/// and named by `address >> 7`, leaving 23 counter bits; models never get
/// near a wrap.
#[cfg(loom)]
const COUNT_BITS: u32 = 23;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

impl ClhNode {
    /// Counts one more enqueue attempt; returns its `tail` word.
    #[inline(always)]
    fn next_word(&self) -> u64 {
        let word = self.word.get();
        let next = (word & !COUNT_MASK) | (word.wrapping_add(1) & COUNT_MASK);
        self.word.set(next);
        next
    }
}

/// Slab indices `0..LIMIT` are named `1..=LIMIT` in a `tail` word, whose
/// top `64 - COUNT_BITS` bits hold the name.
#[cfg(not(loom))]
const LIMIT: usize = (1 << (64 - COUNT_BITS)) - 1;

/// Names a fresh node: its slab index plus one, so that the initial `tail`
/// word `0` names no node.
#[cfg(not(loom))]
fn name(node: &mut Node, index: usize) {
    assert!(
        index < LIMIT,
        "clh: more than {LIMIT} queue nodes in use at once"
    );
    node.word.set(((index + 1) as u64) << COUNT_BITS);
}

/// The node a `tail` word names (`None` for `0`, the initial word).
#[cfg(not(loom))]
#[inline(always)]
fn decode(word: u64) -> Option<NonNull<Node>> {
    match word >> COUNT_BITS {
        0 => None,
        slot => Some(SLAB.get(slot as usize - 1)),
    }
}

/// Loom: `address >> LOOM_SHIFT` names a boxed node; `CachePadded` nodes
/// are 128-byte aligned where loom runs.
#[cfg(loom)]
const LOOM_SHIFT: u32 = 7;
#[cfg(loom)]
const _: () = assert!(align_of::<Node>() >= 1 << LOOM_SHIFT);

#[cfg(loom)]
#[inline(always)]
fn decode(word: u64) -> Option<NonNull<Node>> {
    let addr = (word >> COUNT_BITS) << LOOM_SHIFT;
    NonNull::new(core::ptr::with_exposed_provenance_mut(addr as usize))
}

#[cfg(loom)]
fn name(node: &mut Node, _: usize) {
    let at = NonNull::from(&mut *node);
    let name = (at.as_ptr().expose_provenance() as u64 >> LOOM_SHIFT) << COUNT_BITS;
    assert_eq!(decode(name), Some(at), "node address too wide to pack");
    node.word.set(name);
}

crate::node_pool::node_pool!(Node, name);

/// CLH queue lock.
#[derive(Debug)]
pub struct Clh {
    /// The last enqueue: `slot << 44 | counter`; `0` before the first
    /// acquisition (see the module docs).
    tail: AtomicU64,
}

/// Guard state of a CLH acquisition: the holder's node.
pub type ClhToken = NodeToken<ClhNode>;

impl Clh {
    maybe_const_fn! {
        /// A free lock.
        pub fn new() -> Self {
            Self { tail: AtomicU64::new(0) }
        }
    }

    /// Takes one of our nodes, marks it locked and counts an enqueue
    /// attempt; returns it and the `tail` word of that attempt.
    #[inline(always)]
    fn fresh_node() -> (NonNull<Node>, u64) {
        let node = take_node();
        // SAFETY: the node is ours and in no queue.
        let me = unsafe { node.as_ref() };
        // Relaxed: published by the Release half of the swap or CAS that
        // enqueues the node.
        me.locked.store(true, Ordering::Relaxed);
        (node, me.next_word())
    }
}

impl Default for Clh {
    fn default() -> Self {
        Self::new()
    }
}

// `Clh` itself is one atomic word and so `Send + Sync` automatically; the
// nodes' cells are touched only by each node's current owner, handed over
// with Release/Acquire (the swap on `tail`, `locked`) or a mutex (the
// recycle list).

// SAFETY: the swap on `tail` totally orders acquirers; each returns from
// `lock` only after its predecessor's Release store of `locked = false`,
// which the predecessor makes only in `unlock`. `try_lock` takes the lock
// only behind a released node (see the module docs).
unsafe impl lock_api::RawMutex for Clh {
    crate::raw_init!();
    type Guard = ClhToken;

    #[inline]
    fn lock(&self) -> Self::Guard {
        let (node, word) = Self::fresh_node();
        // AcqRel: Release publishes `locked = true` to the successor that
        // swaps us out; Acquire pairs with the predecessor's swap (or CAS)
        // so its `locked = true` is visible when we read it.
        let pred = decode(self.tail.swap(word, Ordering::AcqRel));
        // SAFETY: our node, read only by us.
        unsafe { node.as_ref() }.pred.set(pred);
        if let Some(p) = pred {
            // SAFETY: type-stable node, not reused before we adopt it.
            let p = unsafe { p.as_ref() };
            // Acquire: pairs with the Release store in the predecessor's
            // `unlock`.
            wait_until::<Spin>(|| !p.locked.load(Ordering::Acquire));
        }
        NodeToken(node)
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        // Acquire: pairs with the Release half of the swap or CAS that wrote
        // `seen`, so that enqueue's `locked = true` happens-before our load
        // of `locked` below, which therefore cannot return the `false` of
        // an older enqueue of the same node.
        let seen = self.tail.load(Ordering::Acquire);
        let pred = decode(seen);
        if let Some(p) = pred {
            // SAFETY: nodes are type-stable (never freed), so reading one we
            // do not own is sound even if it was adopted meanwhile.
            // Acquire: pairs with the Release store in the owner's `unlock`,
            // so its critical section happens-before ours if we go on.
            if unsafe { p.as_ref() }.locked.load(Ordering::Acquire) {
                return None;
            }
        }
        let (node, word) = Self::fresh_node();
        // Success AcqRel: Release as the swap in `lock`; Acquire, as there,
        // makes the replaced enqueue's `locked = true` visible to the
        // re-check below (needed only after a counter wrap; normally the
        // CAS reads the same write the load acquired). Failure Relaxed: we
        // read nothing through the value.
        match self
            .tail
            .compare_exchange(seen, word, Ordering::AcqRel, Ordering::Relaxed)
        {
            Ok(_) => {
                // SAFETY: our node, read only by us.
                unsafe { node.as_ref() }.pred.set(pred);
                if let Some(p) = pred {
                    // SAFETY: as above; we adopt it at `unlock`.
                    let p = unsafe { p.as_ref() };
                    // Acquire: as in `lock`. Still the `false` read above,
                    // unless the counter wrapped (module docs): then wait,
                    // for mutual exclusion.
                    wait_until::<Spin>(|| !p.locked.load(Ordering::Acquire));
                }
                Some(NodeToken(node))
            }
            Err(_) => {
                give_node(node);
                None
            }
        }
    }

    #[inline]
    unsafe fn unlock(&self, guard: Self::Guard) {
        // SAFETY: the caller holds the lock through this node.
        let me = unsafe { guard.0.as_ref() };
        // Read before the store below: from then on the successor may adopt
        // and reuse our node.
        let pred = me.pred.get();
        // Release: pairs with the successor's Acquire load of `locked`.
        me.locked.store(false, Ordering::Release);
        if let Some(pred) = pred {
            // The predecessor released it and we were its only waiter.
            give_node(pred);
        }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        // Acquire: as in `try_lock`.
        let tail = decode(self.tail.load(Ordering::Acquire));
        // SAFETY: as in `try_lock`.
        tail.is_some_and(|t| unsafe { t.as_ref() }.locked.load(Ordering::Relaxed))
    }
}

impl Drop for Clh {
    fn drop(&mut self) {
        // With `&mut self` nobody waits on or reads the tail node: it is the
        // lock's, released and not adopted.
        if let Some(tail) = decode(self.tail.load(Ordering::Relaxed)) {
            give_node(tail);
        }
    }
}

// FIFO: `unlock` hands the lock to the successor spinning on our node.
crate::fifo_fair!([] Clh);
