//! `mcs`: the list-based queue lock of Mellor-Crummey and Scott (1991).
//!
//! State word: `tail`, a pointer to the last node in the queue, or null when
//! the lock is free. Each acquisition brings its own node `{next, locked}`
//! (from the thread's pool, see `node_pool`). Invariants: the lock is held
//! iff `tail` is non-null; the holder's node is the head of the list linked
//! by `next`; every waiter spins only on its own node's `locked`.
//!
//! `lock`: init node (`next = null`, `locked = true`), swap it into `tail`;
//! if there was a predecessor, link `pred.next = node` and spin on
//! `node.locked`. `unlock`: if `next` is null, try to CAS `tail` from our
//! node back to null (no waiter); if that fails a waiter is linking itself,
//! so wait for `next`, then clear `next.locked`. O(1) remote references per
//! acquisition, FIFO, a node per holder: any number of MCS locks may be held
//! and released in any order.
//!
//! ## Waiting: `Mcs<W>`
//!
//! How a waiter passes the time on `node.locked` (and a releaser on a
//! successor's link) is the type parameter `W` ([`Wait`]); the protocol
//! above is the same for both:
//!
//! * `Mcs` = `Mcs<Spin>`: the paper's lock, spinning until its turn. With
//!   more runnable threads than cores, the FIFO hand-off usually goes to a
//!   waiter that is not running, and everybody behind it waits until the
//!   kernel runs it again: SMARTQ's convoy (each hand-over costs about a
//!   time slice). This is the registry's `mcs` and SMARTQ's "Queued"
//!   lock; the harness's `pq-oversubscribed` measures exactly that convoy
//!   with it (claim `queue-collapses`), so it stays the default.
//! * `Mcs<SpinThenYield>` ([`McsYield`]): spins for
//!   [`SpinThenYield::SPIN_NS`](crate::backoff::SpinThenYield::SPIN_NS),
//!   then yields at every poll, so a descheduled next owner gets a core
//!   back within a few yields. Still FIFO. It keeps pace when a program's
//!   own threads outnumber the cores (about 1.1-2.7x `tas` with 8 threads
//!   on 2 cores, `tests/oversubscribed.rs`), but beside CPU-bound
//!   processes of others a yielding next owner waits out their time
//!   slices and the queue convoys again: strict FIFO cannot skip it. The
//!   locks that must stay alive there skip waiters that are not running
//!   instead (`mcs-tp`, `mcs-np`, `smart-q`).

use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use crossbeam_utils::CachePadded;

use crate::backoff::{Spin, SpinThenYield, Wait, Waiting};
use crate::list_queue::{self, Linked, NodeToken};
use crate::sync::{AtomicBool, AtomicPtr, Ordering, maybe_const_fn};

/// A queue node, alone on its cache line.
#[derive(Debug, Default)]
pub struct McsNode {
    /// Successor in the queue, set by the successor after its swap.
    next: AtomicPtr<CachePadded<McsNode>>,
    /// True while the owner must wait; cleared by the predecessor.
    locked: AtomicBool,
}

type Node = CachePadded<McsNode>;

crate::node_pool::node_pool!(Node);

/// MCS queue lock (Mellor-Crummey & Scott): FIFO, each waiter spins on a
/// flag in its own queue node, so a release touches one waiter's cache line.
/// Use it through `lock_api` (or the alias [`McsMutex`](crate::McsMutex));
/// the queue node comes from a per-thread pool and travels in the guard.
/// `W` is how a waiter waits (module docs): the paper's [`Spin`] by
/// default, [`SpinThenYield`] for busy machines ([`McsYield`]).
///
/// ```
/// use symmetry_locks::{Mcs, lock_api::Mutex};
///
/// let m: Mutex<Mcs, Vec<u32>> = Mutex::new(Vec::new());
/// m.lock().push(7);
/// assert!(m.try_lock().is_some());
/// let held = m.lock();
/// assert!(m.try_lock().is_none(), "held: try_lock fails, it never waits");
/// drop(held);
/// assert_eq!(*m.lock(), [7]);
/// ```
#[derive(Debug)]
pub struct Mcs<W: Wait = Spin> {
    /// Last node in the queue; null when free.
    tail: AtomicPtr<Node>,
    _wait: PhantomData<fn() -> W>,
}

/// MCS whose waiters yield their processor after a bounded spin: FIFO,
/// and alive when threads outnumber cores (module docs).
pub type McsYield = Mcs<SpinThenYield>;

/// Guard state of an MCS acquisition: the holder's node.
pub type McsToken = NodeToken<McsNode>;

impl Linked for McsNode {
    #[inline(always)]
    fn next(&self) -> &AtomicPtr<Node> {
        &self.next
    }
}

impl Mcs {
    maybe_const_fn! {
        /// A free lock (the paper's, spinning waiters).
        pub fn new() -> Self {
            Self::waiting()
        }
    }
}

impl<W: Wait> Mcs<W> {
    maybe_const_fn! {
        /// A free lock whose waiters wait by `W`.
        pub fn waiting() -> Self {
            Self { tail: AtomicPtr::new(ptr::null_mut()), _wait: PhantomData }
        }
    }

    #[cold]
    #[inline(never)]
    fn wait_behind(pred: NonNull<Node>, node: NonNull<Node>) {
        // SAFETY: `node` is ours.
        let me = unsafe { node.as_ref() };
        // The predecessor then sees our `locked = true` before it clears it.
        list_queue::link(pred, me);
        let mut w = Waiting::new();
        // Acquire: pairs with the Release store in `unlock`.
        while me.locked.load(Ordering::Acquire) {
            W::pause(&mut w);
        }
    }
}

impl<W: Wait> Default for Mcs<W> {
    fn default() -> Self {
        Self::waiting()
    }
}

// SAFETY: `tail` orders all acquisitions; a thread returns from `lock` only
// when `tail` was null at its swap or its predecessor cleared its `locked`
// flag in `unlock` (Release/Acquire), so holders are serialized.
unsafe impl<W: Wait> lock_api::RawMutex for Mcs<W> {
    crate::raw_init!(waiting);
    type Guard = McsToken;

    #[inline]
    fn lock(&self) -> Self::Guard {
        let node = take_node();
        // SAFETY: the node is ours and in no queue.
        let me = unsafe { node.as_ref() };
        me.next.store(ptr::null_mut(), Ordering::Relaxed);
        me.locked.store(true, Ordering::Relaxed);
        if let Some(pred) = list_queue::enqueue(&self.tail, node) {
            Self::wait_behind(pred, node);
        }
        NodeToken(node)
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        list_queue::try_enqueue(&self.tail, take_node, give_node, |_, node| {
            list_queue::enqueue_if_free(&self.tail, node)
        })
    }

    #[inline]
    unsafe fn unlock(&self, guard: Self::Guard) {
        let node = guard.0;
        if let Some(next) = list_queue::successor_or_free::<W, _>(&self.tail, node) {
            // SAFETY: the successor's node stays allocated while it waits.
            // Release: pairs with the successor's Acquire load of `locked`.
            unsafe { next.as_ref() }
                .locked
                .store(false, Ordering::Release);
        }
        // Nobody references our node any more: the successor linked itself
        // and has been released.
        give_node(node);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        !self.tail.load(Ordering::Relaxed).is_null()
    }
}

// FIFO: `unlock` hands the lock to the successor linked behind our node.
crate::fifo_fair!([W: Wait] Mcs<W>);
