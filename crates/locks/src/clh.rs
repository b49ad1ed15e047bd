//! `clh`: the list-based queue lock of Craig (1993) and Landin & Hagersten
//! (1994).
//!
//! State word: `tail`, the node of the last acquirer, or null before the
//! first acquisition. A node is one flag `locked`, true while its owner holds
//! or waits for the lock. Invariants: the lock is held iff `tail` is non-null
//! and `tail.locked` is reachable through a chain of `locked = true` nodes
//! whose first element belongs to the holder; each waiter spins on its
//! predecessor's node only.
//!
//! `lock`: take a node, set `locked = true`, swap it into `tail`, spin while
//! the predecessor's `locked` is true. `unlock`: clear our `locked` (the
//! successor, if any, now runs) and *adopt the predecessor's node*, which
//! nobody else references any more; our own node now belongs to the
//! successor or, if there is none, stays in `tail` until the next acquirer
//! adopts it, or until the lock is dropped and the node goes to the dropping
//! thread's pool. Nodes are type-stable (never freed, see `node_pool`). Nodes therefore migrate between
//! threads, which is why the per-thread pool holds heap nodes and the guard
//! carries the node. The predecessor pointer is stored in our node, read only
//! by us.
//!
//! `try_lock` succeeds only if `tail` is null or its node is unlocked and a
//! CAS installs our node in its place. If, between the check and the CAS,
//! that node was adopted, re-enqueued on this same lock and made tail again
//! (ABA: two full hand-overs in a few instructions), the CAS still linked us
//! correctly behind it, and `try_lock` then waits for that holder: mutual
//! exclusion holds, but this vanishingly rare case waits instead of failing.

use core::cell::Cell;
use core::ptr::{self, NonNull};

use crossbeam_utils::CachePadded;

use crate::registry::GuardWord;
use crate::sync::{AtomicBool, AtomicPtr, Ordering, maybe_const_fn, spin_hint};

/// A queue node, alone on its cache line.
#[derive(Debug, Default)]
pub struct ClhNode {
    /// True while the node's owner holds or waits for the lock.
    locked: AtomicBool,
    /// The predecessor node, adopted at `unlock`; touched only by the owner.
    pred: Cell<*mut CachePadded<ClhNode>>,
}

type Node = CachePadded<ClhNode>;

fn new_node() -> NonNull<Node> {
    crate::node_pool::boxed_node()
}

crate::node_pool::node_pool!(Node, new_node);

/// CLH queue lock.
#[derive(Debug)]
pub struct Clh {
    /// Node of the last acquirer; null before the first acquisition.
    tail: AtomicPtr<Node>,
}

/// Guard state of a CLH acquisition: the holder's node.
#[derive(Debug)]
pub struct ClhToken(NonNull<Node>);

// SAFETY: the word is the node pointer, which is never null.
unsafe impl GuardWord for ClhToken {
    #[inline(always)]
    fn into_word(self) -> usize {
        self.0.as_ptr() as usize
    }
    #[inline(always)]
    unsafe fn from_word(w: usize) -> Self {
        // SAFETY: `w` came from `into_word`, a non-null pointer.
        ClhToken(unsafe { NonNull::new_unchecked(w as *mut Node) })
    }
}

impl Clh {
    maybe_const_fn! {
        /// A free lock.
        pub fn new() -> Self {
            Self { tail: AtomicPtr::new(ptr::null_mut()) }
        }
    }

    #[cold]
    #[inline(never)]
    fn wait_on(pred: &ClhNode) {
        // Acquire: pairs with the Release store in the predecessor's `unlock`.
        while pred.locked.load(Ordering::Acquire) {
            spin_hint();
        }
    }

    /// Prepares one of our nodes for enqueueing.
    #[inline(always)]
    fn fresh_node() -> NonNull<Node> {
        let node = take_node();
        // SAFETY: the node is ours and in no queue.
        unsafe { node.as_ref() }
            .locked
            .store(true, Ordering::Relaxed);
        node
    }
}

impl Default for Clh {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: the swap on `tail` totally orders acquirers; each returns from
// `lock` only after its predecessor's Release store of `locked = false`,
// which the predecessor makes only in `unlock`.
unsafe impl lock_api::RawMutex for Clh {
    crate::raw_init!();
    type Guard = ClhToken;

    #[inline]
    fn lock(&self) -> Self::Guard {
        let node = Self::fresh_node();
        // AcqRel: Release publishes `locked = true` to the successor that
        // swaps us out; Acquire pairs with the predecessor's swap so its
        // node is initialised when we read it.
        let pred = self.tail.swap(node.as_ptr(), Ordering::AcqRel);
        // SAFETY: our node, read only by us.
        unsafe { node.as_ref() }.pred.set(pred);
        // SAFETY: the predecessor's node is not freed before we adopt it.
        if let Some(p) = unsafe { pred.as_ref() }
            && p.locked.load(Ordering::Acquire)
        {
            Self::wait_on(p);
        }
        ClhToken(node)
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        // Acquire: the tail node's initialisation and, through `locked`,
        // the previous critical section.
        let pred = self.tail.load(Ordering::Acquire);
        // SAFETY: nodes are type-stable (never freed), so reading one we do
        // not own is sound even if it was adopted meanwhile.
        if let Some(p) = unsafe { pred.as_ref() }
            && p.locked.load(Ordering::Acquire)
        {
            return None;
        }
        let node = Self::fresh_node();
        // AcqRel: as the swap in `lock`.
        match self
            .tail
            .compare_exchange(pred, node.as_ptr(), Ordering::AcqRel, Ordering::Relaxed)
        {
            Ok(_) => {
                // SAFETY: our node, read only by us.
                unsafe { node.as_ref() }.pred.set(pred);
                // SAFETY: as above; normally free, see the module docs for
                // the ABA case in which this waits.
                if let Some(p) = unsafe { pred.as_ref() } {
                    Self::wait_on(p);
                }
                Some(ClhToken(node))
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
        let pred = me.pred.get();
        // Release: pairs with the successor's Acquire load of `locked`.
        me.locked.store(false, Ordering::Release);
        if let Some(pred) = NonNull::new(pred) {
            // The predecessor released it and we were its only waiter.
            give_node(pred);
        }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        let tail = self.tail.load(Ordering::Acquire);
        // SAFETY: as in `try_lock`.
        unsafe { tail.as_ref() }.is_some_and(|t| t.locked.load(Ordering::Relaxed))
    }
}

impl Drop for Clh {
    fn drop(&mut self) {
        // With `&mut self` nobody waits on or reads the tail node: it is the
        // lock's, released and not adopted.
        if let Some(tail) = NonNull::new(self.tail.load(Ordering::Relaxed)) {
            give_node(tail);
        }
    }
}

// SAFETY: the only non-Sync part is the `pred` cell inside nodes, which is
// accessed only by the node's current owner.
unsafe impl Send for Clh {}
// SAFETY: as above.
unsafe impl Sync for Clh {}

// SAFETY: `unlock` already hands the lock to the successor spinning on our node (FIFO), so
// a fair unlock is the ordinary one.
unsafe impl lock_api::RawMutexFair for Clh {
    #[inline]
    unsafe fn unlock_fair(&self, guard: Self::Guard) {
        // SAFETY: forwarded caller's contract.
        unsafe { lock_api::RawMutex::unlock(self, guard) }
    }
}
