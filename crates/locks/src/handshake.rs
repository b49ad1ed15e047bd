//! `handshake`: the Queued-Handshaking lock of SMARTQ Figs. 1-2, an MCS
//! queue lock that avoids handing the lock to a preempted waiter using
//! only the one-way (Symunix) scheduler interface: a non-preemption
//! request and the warning flag.
//!
//! State word: `tail`, the last node or null when free. A node is `{pred,
//! next, next_done, status}`; `status` is one of `NotYet`, `CanGo`,
//! `GotIt`, `LostIt`, `Ack`, `Nack`. Invariants: the lock is held iff
//! `tail` is non-null; exactly one of the queued nodes is the holder; a
//! waiter owns its node again only after the releaser's final `Ack` or
//! `Nack`, the releaser's last access to it.
//!
//! `lock`: ask not to be preempted, swap our node into `tail`; with no
//! predecessor we hold the lock. Otherwise link behind the predecessor and
//! spin until our status leaves `NotYet`, becoming preemptable for a
//! moment on every iteration (and yielding there if the scheduler warned
//! us). Then exchange our status with `GotIt`: if it was `CanGo` the lock
//! is ours; we tell the releaser we are done with its node
//! (`pred.next_done`) and wait for its `Ack`. If it was `LostIt` the
//! releaser gave up on us: we wait for its `Nack` and enqueue again.
//!
//! `unlock`: offer the lock to the successor (`CanGo`) and wait up to
//! [`TIMEOUT_NS`] for its `next_done`. If it does not answer, rescind
//! with an exchange to `LostIt`; if the exchange finds `GotIt` the
//! successor was awake after all and gets the lock, otherwise we remove it
//! from the queue (its successor's `pred` becomes our node), send `Nack`,
//! and offer the lock to the next waiter. Both sides exchange the status
//! word, so exactly one of "granted" and "rescinded" happens.
//!
//! Like `smart-q`, the lock gives up FIFO order for waiters that are not
//! running.
//!
//! On every scheduler, including those that never warn (`Stock`,
//! `RseqSlice` without the extension, `Emulated` with no emulation
//! running), the rescinding releaser is what keeps the lock alive with
//! more runnable threads than cores: a successor the kernel descheduled
//! answers no `CanGo` within [`TIMEOUT_NS`] and is removed. Every other
//! wait (a waiter for its status, `Ack` or `Nack`; a releaser for a late
//! `next_done` or a successor's link) spins for about a microsecond and
//! then yields ([`SpinThenYield`]), so a descheduled peer gets a core.

use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use crossbeam_utils::CachePadded;

use crate::backoff::{SpinThenYield, Wait, Waiting};
use crate::list_queue::{self, Linked, NodeToken};
use crate::sched::{ContextBlock, NpGuard, Scheduler, Stock, current};
use crate::sync::{AtomicBool, AtomicPtr, AtomicU8, Ordering, release_store};

const NOT_YET: u8 = 0;
const CAN_GO: u8 = 1;
const GOT_IT: u8 = 2;
const LOST_IT: u8 = 3;
const ACK: u8 = 4;
const NACK: u8 = 5;

/// How long (ns) a releaser spins for the successor's answer before it
/// decides the successor is not running. A running successor answers
/// within three cache-line transfers (it reads `CanGo`, exchanges it,
/// writes `next_done`), well under a microsecond on a machine whose
/// transfers take up to a few hundred nanoseconds; a preempted one not
/// before its next time slice. Rescinding a successor that was running
/// after all costs it one re-enqueue, while waiting out a preempted one
/// stalls every waiter behind it, so the timeout is short. It is a time,
/// not a spin count: a spin-wait hint lasts from about 10 to 140 cycles
/// across x86 generations, and a count of 1,024 hints (this lock's old
/// timeout) made the lock up to 5x slower than `tas` with 8 threads on 2
/// cores (`tests/oversubscribed.rs`). Under loom the timeout is one poll.
pub const TIMEOUT_NS: u64 = 2_000;

/// A Queued-Handshaking node, alone on its cache line.
#[derive(Debug, Default)]
pub struct HsNode {
    /// The node whose `next_done` we set when granted (the releaser's).
    pred: AtomicPtr<CachePadded<HsNode>>,
    /// Successor, set by the successor after its swap.
    next: AtomicPtr<CachePadded<HsNode>>,
    /// Set by the granted successor: it will not read our node again.
    next_done: AtomicBool,
    /// The handshake word (see the module docs).
    status: AtomicU8,
}

type Node = CachePadded<HsNode>;

crate::node_pool::node_pool!(Node);

/// Queued-Handshaking lock over scheduler interface `S`.
#[derive(Debug)]
pub struct Handshake<S: Scheduler = Stock> {
    tail: AtomicPtr<Node>,
    _sched: PhantomData<fn() -> S>,
}

/// Guard state of a Queued-Handshaking acquisition: the holder's node.
pub type HsToken = NodeToken<HsNode>;

impl Linked for HsNode {
    #[inline(always)]
    fn next(&self) -> &AtomicPtr<Node> {
        &self.next
    }
}

/// Waits until `word` holds `want`.
#[inline]
fn await_u8(word: &AtomicU8, want: u8) {
    let mut w = Waiting::new();
    // Acquire: pairs with the Release store of `want`.
    while word.load(Ordering::Acquire) != want {
        SpinThenYield::pause(&mut w);
    }
}

impl<S: Scheduler> Handshake<S> {
    crate::sync::maybe_const_fn! {
        /// A free lock.
        pub fn new() -> Self {
            Self { tail: AtomicPtr::new(ptr::null_mut()), _sched: PhantomData }
        }
    }

    /// One pass of Fig. 2's `acquire_lock` loop; true when we hold the lock.
    #[inline(always)]
    fn attempt(&self, cb: &ContextBlock, node: NonNull<Node>) -> bool {
        // SAFETY: the node is ours and in no queue.
        let me = unsafe { node.as_ref() };
        me.next.store(ptr::null_mut(), Ordering::Relaxed);
        me.status.store(NOT_YET, Ordering::Relaxed);
        let asked = cb.request::<S>();
        match list_queue::enqueue(&self.tail, node) {
            None => true,
            Some(pred) => Self::wait_behind(cb, asked, pred, me),
        }
    }

    #[cold]
    #[inline(never)]
    fn wait_behind(cb: &ContextBlock, asked: bool, pred: NonNull<Node>, me: &Node) -> bool {
        me.pred.store(pred.as_ptr(), Ordering::Relaxed);
        list_queue::link(pred, me);
        let mut w = Waiting::new();
        loop {
            if asked {
                // "cb->preemptable := true; if cb->warning yield;
                // cb->preemptable := false".
                cb.withdraw::<S>();
                if S::warned(cb) {
                    S::yield_now(cb);
                }
                cb.request::<S>();
            }
            // Acquire: pairs with the releaser's Release stores.
            if me.status.load(Ordering::Acquire) != NOT_YET {
                break;
            }
            SpinThenYield::pause(&mut w);
        }
        // AcqRel: races the releaser's rescinding exchange.
        let mut val = me.status.swap(GOT_IT, Ordering::AcqRel);
        if val == CAN_GO {
            // Acquire: a releaser that moved us behind its node wrote
            // `pred` before its Release store of `CanGo`.
            let pred = me.pred.load(Ordering::Acquire);
            // SAFETY: the granting releaser waits for this flag, so its
            // node is live.
            unsafe { &*pred }.next_done.store(true, Ordering::Release);
            await_u8(&me.status, ACK);
            return true;
        }
        let mut w = Waiting::new();
        while val != NACK {
            SpinThenYield::pause(&mut w);
            // Acquire: pairs with the releaser's Release `Nack`.
            val = me.status.load(Ordering::Acquire);
        }
        false
    }

    /// Fig. 2's `release_lock` from the first successor on.
    #[cold]
    #[inline(never)]
    fn hand_over(&self, me: &HsNode, node: NonNull<Node>, mut next: NonNull<Node>) {
        me.next_done.store(false, Ordering::Relaxed);
        loop {
            // SAFETY: a linked waiter's node stays live until our final
            // `Ack`/`Nack`.
            let n = unsafe { next.as_ref() };
            // Release: the successor sees our critical section and its
            // updated `pred`.
            release_store(&n.status, CAN_GO);
            let mut w = Waiting::new();
            loop {
                // Acquire: pairs with the successor's Release store.
                if me.next_done.load(Ordering::Acquire) {
                    release_store(&n.status, ACK);
                    return;
                }
                if !w.spin_within(TIMEOUT_NS) {
                    break;
                }
            }
            // AcqRel: races the successor's exchange to `GotIt`.
            if n.status.swap(LOST_IT, Ordering::AcqRel) == GOT_IT {
                // The successor was awake after all; it may be preempted
                // before it answers.
                let mut w = Waiting::new();
                while !me.next_done.load(Ordering::Acquire) {
                    SpinThenYield::pause(&mut w);
                }
                release_store(&n.status, ACK);
                return;
            }
            // Remove the silent successor from the queue.
            // Acquire: pairs with its successor's Release link.
            let succ = match NonNull::new(n.next.load(Ordering::Acquire)) {
                Some(s) => s,
                None if list_queue::free(&self.tail, next) => {
                    release_store(&n.status, NACK);
                    return;
                }
                None => list_queue::wait_next::<SpinThenYield, _>(&**n),
            };
            // SAFETY: `succ` waits in the queue (status `NotYet`) and reads
            // `pred` only after our next `CanGo`.
            unsafe { succ.as_ref() }
                .pred
                .store(node.as_ptr(), Ordering::Relaxed);
            // Release: the removed waiter may reuse its node now.
            release_store(&n.status, NACK);
            next = succ;
        }
    }
}

impl<S: Scheduler> Default for Handshake<S> {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: `tail` orders acquirers as in MCS. A waiter returns from `lock`
// only after exchanging `CanGo` for `GotIt` (the releaser, after its
// critical section, stored `CanGo` with Release); a releaser that rescinds
// exchanges `LostIt` and either finds `GotIt` (then that waiter is the
// holder and the releaser stops) or removes the waiter, which then never
// returns from this attempt. So exactly one waiter is granted per release.
unsafe impl<S: Scheduler> lock_api::RawMutex for Handshake<S> {
    crate::raw_init!();
    type Guard = NpGuard<HsToken>;

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
        list_queue::try_enqueue(&self.tail, take_node, give_node, |_, node| {
            current().try_enter::<S>(|| list_queue::enqueue_if_free(&self.tail, node))
        })
        .map(NpGuard::new)
    }

    #[inline]
    unsafe fn unlock(&self, guard: Self::Guard) {
        let node = guard.into_inner().0;
        // SAFETY: the caller holds the lock through this node.
        let me = unsafe { node.as_ref() };
        let next = list_queue::successor_or_free::<SpinThenYield, _>(&self.tail, node);
        if let Some(first) = next {
            self.hand_over(me, node, first);
        }
        // Nobody reads our node any more: the granted successor set
        // `next_done` before our `Ack`.
        give_node(node);
        current().leave::<S>();
    }

    #[inline]
    fn is_locked(&self) -> bool {
        !self.tail.load(Ordering::Relaxed).is_null()
    }
}
