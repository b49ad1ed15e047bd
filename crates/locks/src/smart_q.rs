//! `smart-q`: the Smart-Q lock of SMARTQ Fig. 3, an MCS queue lock that
//! never hands the lock to a preempted waiter, using the two-way scheduler
//! interface (the context block's four-valued state).
//!
//! State word: `tail`, the last node of the queue or null when free. A
//! node is `{cb, next, status}`: the owner's context block, its successor,
//! and `Waiting`, `Success` (granted) or `Failure` (skipped). Invariants:
//! the lock is held iff `tail` is non-null; the holder is unpreemptable
//! from just before its swap (the request) until its release; a node with
//! status `Waiting` belongs to a live thread spinning on it.
//!
//! `lock` (Fig. 3 `acquire_lock`): ask not to be preempted, swap our node
//! into `tail`; with no predecessor we hold the lock. Otherwise link behind
//! the predecessor, withdraw the request (CAS `UnpreemptableSelf ->
//! Preemptable`: a releaser may already have made us
//! `UnpreemptableOther`), and spin on our status: `Success` means we hold
//! the lock, `Failure` that a releaser found us preempted and removed us,
//! and we enqueue again.
//!
//! `unlock` (Fig. 3 `release_lock`): walk from our successor; claim the
//! first candidate that is running (the context block's claim: the
//! CAS that the scheduler's preemption CAS races, so a claimed waiter
//! cannot be descheduled and a descheduled one cannot be claimed) and set
//! its status to `Success`; skip the others. With no candidate left, swing
//! `tail` back to null. Then withdraw our own request and yield if warned.
//!
//! One change to Fig. 3: a skipped node's `Failure` is written only after
//! the releaser's last read of that node (its `next`). In the figure the
//! releaser writes `shadow->status := failure` and may then spin on
//! `shadow->next`; the skipped owner, resumed, re-enqueues the same node
//! and clears `next`, so the releaser can miss the link of the waiter that
//! was behind it and strand that waiter. Here the owner gets its node back
//! only when nobody will read it again.
//!
//! Nesting: a thread waiting for a Smart-Q lock while it holds another
//! preemption-safe lock stays unpreemptable (its block's lock count is
//! non-zero), and a releaser treats `UnpreemptableOther` as running.
//!
//! SMARTQ notes that removing preempted waiters gives up FIFO order: a
//! waiter skipped again and again could starve.
//!
//! ## Preemption by the kernel: heartbeats
//!
//! Over [`Stock`], over `RseqSlice` and over `Emulated` outside a running
//! emulation ([`Scheduler::shows_preemption`] false), nobody ever marks a
//! waiter `Preempted`, and Fig. 3 alone would be plain MCS: on a machine
//! with more runnable threads than cores it hands the lock to descheduled
//! waiters and convoys. Even under a running emulation the kernel may
//! deschedule a worker the emulation thinks is running. So the lock also
//! learns who runs the way `mcs-tp` does: every waiter publishes a
//! heartbeat (`stamp`, see [`mcs_tp`](crate::mcs_tp)) and yields now and
//! then, and a releaser grants a waiter only if its heartbeat is fresher
//! than [`PATIENCE_NS`](crate::mcs_tp::PATIENCE_NS) *and* the claim of
//! Fig. 3 succeeds; it skips and removes the others, which re-queue.
//! Order: FIFO among running waiters, as with a scheduler that shows
//! preemption. The cost is one clock read per 16 polls of a waiter.

use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use crossbeam_utils::CachePadded;

use crate::backoff::SpinThenYield;
use crate::list_queue::{self, Linked, NodeToken};
use crate::mcs_tp::{fresh, wait_publishing};
use crate::sched::{ContextBlock, NpGuard, Scheduler, Stock, current};
use crate::sync::{AtomicPtr, AtomicU8, AtomicU64, Ordering};

const WAITING: u8 = 0;
const SUCCESS: u8 = 1;
const FAILURE: u8 = 2;

/// A Smart-Q queue node, alone on its cache line.
#[derive(Debug, Default)]
pub struct SqNode {
    /// The owner's context block, set before the node is linked.
    cb: AtomicPtr<ContextBlock>,
    /// Successor, set by the successor after its swap.
    next: AtomicPtr<CachePadded<SqNode>>,
    /// `WAITING`, `SUCCESS` or `FAILURE`, written by a releaser.
    status: AtomicU8,
    /// The owner's heartbeat while it waits (module docs).
    stamp: AtomicU64,
}

type Node = CachePadded<SqNode>;

crate::node_pool::node_pool!(Node);

/// Smart-Q lock over scheduler interface `S` (use
/// [`Emulated`](crate::sched::emulated::Emulated) to see preemptions).
#[derive(Debug)]
pub struct SmartQ<S: Scheduler = Stock> {
    tail: AtomicPtr<Node>,
    _sched: PhantomData<fn() -> S>,
}

/// Guard state of a Smart-Q acquisition: the holder's node.
pub type SqToken = NodeToken<SqNode>;

impl Linked for SqNode {
    #[inline(always)]
    fn next(&self) -> &AtomicPtr<Node> {
        &self.next
    }
}

impl<S: Scheduler> SmartQ<S> {
    crate::sync::maybe_const_fn! {
        /// A free lock.
        pub fn new() -> Self {
            Self { tail: AtomicPtr::new(ptr::null_mut()), _sched: PhantomData }
        }
    }

    /// One attempt of Fig. 3's `acquire_lock` loop; true when we hold the
    /// lock.
    #[inline(always)]
    fn attempt(&self, cb: &ContextBlock, node: NonNull<Node>) -> bool {
        // SAFETY: the node is ours and in no queue.
        let me = unsafe { node.as_ref() };
        me.next.store(ptr::null_mut(), Ordering::Relaxed);
        me.cb.store(ptr::from_ref(cb).cast_mut(), Ordering::Relaxed);
        me.status.store(WAITING, Ordering::Relaxed);
        // Relaxed: published with the node by the Release swap below.
        // Under loom (no time) every waiter counts as running; the skip is
        // modelled by `smart_q_with_a_preempting_kernel` and `mcs_tp`.
        #[cfg(not(loom))]
        me.stamp.store(crate::clock::now_ns(), Ordering::Relaxed);
        #[cfg(loom)]
        me.stamp.store(1, Ordering::Relaxed);
        let asked = cb.request::<S>();
        match list_queue::enqueue(&self.tail, node) {
            None => true,
            Some(pred) => Self::wait_behind(cb, asked, pred, me),
        }
    }

    #[cold]
    #[inline(never)]
    fn wait_behind(cb: &ContextBlock, asked: bool, pred: NonNull<Node>, me: &Node) -> bool {
        // The releaser sees our node's fields and our state.
        list_queue::link(pred, me);
        if asked {
            cb.withdraw_unless_claimed::<S>();
        }
        wait_publishing(&me.status, WAITING, &me.stamp) == SUCCESS
    }
}

impl<S: Scheduler> Default for SmartQ<S> {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: `tail` orders acquirers as in MCS; a thread returns from `lock`
// only when `tail` was null at its swap or a releaser, after its critical
// section, stored `SUCCESS` in its node (Release/Acquire), and a releaser
// grants exactly one node per release. A `FAILURE` node's owner re-enters
// the queue and does not hold the lock.
unsafe impl<S: Scheduler> lock_api::RawMutex for SmartQ<S> {
    crate::raw_init!();
    type Guard = NpGuard<SqToken>;

    #[inline]
    fn lock(&self) -> Self::Guard {
        let cb = current();
        let node = take_node();
        while !self.attempt(cb, node) {}
        cb.enter();
        NpGuard::new(NodeToken(node))
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        list_queue::try_enqueue(&self.tail, take_node, give_node, |me, node| {
            let cb = current();
            me.cb.store(ptr::from_ref(cb).cast_mut(), Ordering::Relaxed);
            cb.try_enter::<S>(|| list_queue::enqueue_if_free(&self.tail, node))
        })
        .map(NpGuard::new)
    }

    #[inline]
    unsafe fn unlock(&self, guard: Self::Guard) {
        let node = guard.into_inner().0;
        if let Some(first) = list_queue::successor_or_free::<SpinThenYield, _>(&self.tail, node) {
            list_queue::grant_first_running::<SpinThenYield, _>(
                &self.tail,
                first,
                |c| {
                    // Relaxed: the stamp is a heartbeat, read for its age.
                    if !fresh(c.stamp.load(Ordering::Relaxed)) {
                        return false;
                    }
                    // SAFETY: the block of a waiting thread lives while it
                    // waits; Relaxed suffices: the Acquire load of the link
                    // ordered it.
                    let cb = unsafe { &*c.cb.load(Ordering::Relaxed) };
                    let running = cb.claim_waiter();
                    if running {
                        // Release: the new holder's Acquire load of its
                        // status sees our critical section.
                        c.status.store(SUCCESS, Ordering::Release);
                    }
                    running
                },
                // Release: pairs with the removed owner's Acquire load.
                |s| s.status.store(FAILURE, Ordering::Release),
            );
        }
        // Nobody reads our node any more: the successor linked itself, and
        // the walk is over.
        give_node(node);
        current().leave::<S>();
    }

    #[inline]
    fn is_locked(&self) -> bool {
        !self.tail.load(Ordering::Relaxed).is_null()
    }
}
