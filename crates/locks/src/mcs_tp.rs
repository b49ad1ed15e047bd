//! `mcs-tp`: a time-published MCS lock after He, Scherer and Scott,
//! "Preemption Adaptivity in Time-Published Queue-Based Spin Locks"
//! (HiPC 2005): the stock-Linux answer to SMARTQ's problem, because it
//! needs no help from the scheduler.
//!
//! State word: `tail`, the last node or null when free. A node is `{next,
//! status, stamp}`: its successor, `Waiting`, `Granted` or `Removed`, and
//! the last time its owner was seen running. Invariants: the lock is held
//! iff `tail` is non-null; a `Waiting` node belongs to a live thread; a
//! waiter that is running rewrites its `stamp` at least every
//! [`PUBLISH_SPINS`] spins, so a stamp older than [`PATIENCE_NS`] means
//! its owner has not run for that long: the kernel preempted it.
//!
//! `lock`: swap our node into `tail`; with no predecessor we hold the lock.
//! Otherwise link behind the predecessor and spin on our status,
//! publishing the time, and yielding the processor now and then
//! ([`YIELD_AFTER_NS`]: spinners must not keep a descheduled holder off
//! its core). `Granted`: we hold the lock. `Removed`: a releaser
//! saw a stale stamp and took us out of the queue; enqueue again.
//!
//! `unlock`: walk from our successor; grant the first waiter whose stamp
//! is fresh, skip (remove) the stale ones; with nobody fresh left, swing
//! `tail` to null. As in `smart-q`, a removed node's `Removed` is written
//! after the releaser's last read of it, so its owner may reuse it at once.
//!
//! ## Over a scheduler: `McsTp<S>`
//!
//! The registry's `mcs-tp` is `McsTp<Stock>`: no scheduler says who runs,
//! so the stamps decide. `mcs-np` ([`McsNp<S>`](crate::McsNp)) is
//! `NoPreempt<McsTp<S>, S>`: a releaser skips a waiter with a stale stamp
//! (the kernel descheduled it) on every scheduler, except a waiter that
//! the scheduler itself marked `Preempted` in its context block
//! ([`Scheduler::shows_preemption`]: a worker of a running `Emulated`
//! emulation), which it grants the lock as plain MCS would. That keeps
//! SMARTQ's "Queued-no preempt", and the collapse the paper measures
//! (`pq-multiprogramming`), where the emulation deschedules waiters, and
//! keeps the lock alive where the kernel does (`Stock`, `RseqSlice`,
//! `Emulated` with no emulation running, or an emulation with more
//! virtual processors than cores).
//!
//! What it cannot fix: a *holder* preempted inside its critical section
//! (only a scheduler interface can prevent that), and a waiter preempted
//! between its swap and its link (a few instructions), which the releaser
//! must wait for. It gives up FIFO order for waiters that are not running.
//! The original also lets a waiter leave the queue after a time-out; this
//! lock has no timed acquisition.

use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use crossbeam_utils::CachePadded;

use crate::backoff::SpinThenYield;
#[cfg(not(loom))]
use crate::clock::now_ns;
use crate::list_queue::{self, Linked, NodeToken};
use crate::sched::{ContextBlock, Scheduler, State, Stock};
use crate::sync::{AtomicPtr, AtomicU8, AtomicU64, Ordering, spin_hint};

const WAITING: u8 = 0;
const GRANTED: u8 = 1;
const REMOVED: u8 = 2;

/// A waiter publishes the time once per this many spins, so the clock
/// read is paid once per 16 spin hints.
pub const PUBLISH_SPINS: u32 = 16;

/// A stamp older than this (ns) marks its waiter as preempted: it must
/// exceed the gap between two publications of a running waiter
/// ([`PUBLISH_SPINS`] spin hints and a clock read) and stay well below a
/// scheduler time slice. The two mistakes cost very differently: a running waiter taken
/// for preempted re-queues (microseconds), a preempted waiter taken for
/// running receives the lock and stalls everybody until it runs again (a
/// time slice), so the threshold sits low.
pub const PATIENCE_NS: u64 = 10_000;

/// A waiter that has waited this long (ns) yields its processor
/// (`sched_yield`), and again after each further such interval: with more
/// threads than cores the holder, or the next fresh waiter, may be
/// runnable but descheduled on this core; with a core per thread the call
/// returns at once. Its stamp then ages and a releaser removes it; it
/// re-queues when it runs again.
pub const YIELD_AFTER_NS: u64 = 50_000;

/// A time-published queue node, alone on its cache line.
#[derive(Debug, Default)]
pub struct TpNode {
    /// Successor, set by the successor after its swap.
    next: AtomicPtr<CachePadded<TpNode>>,
    /// `WAITING`, `GRANTED` or `REMOVED`, written by a releaser.
    status: AtomicU8,
    /// When the owner last ran (see [`crate::clock::now_ns`]); under loom, the attempt.
    stamp: AtomicU64,
    /// The owner's context block, set only where the scheduler may show
    /// preemption (`S::SHOWS_PREEMPTION`); null otherwise.
    cb: AtomicPtr<ContextBlock>,
}

type Node = CachePadded<TpNode>;

crate::node_pool::node_pool!(Node);

/// Time-published MCS lock; `S` decides whether stale waiters are
/// skipped (module docs).
#[derive(Debug)]
pub struct McsTp<S: Scheduler = Stock> {
    tail: AtomicPtr<Node>,
    _sched: PhantomData<fn() -> S>,
}

/// Guard state of an MCS-TP acquisition: the holder's node.
pub type TpToken = NodeToken<TpNode>;

impl Linked for TpNode {
    #[inline(always)]
    fn next(&self) -> &AtomicPtr<Node> {
        &self.next
    }
}

/// Whether a waiter with this stamp is to be treated as running.
#[inline]
pub(crate) fn fresh(stamp: u64) -> bool {
    #[cfg(not(loom))]
    {
        now_ns().saturating_sub(stamp) <= PATIENCE_NS
    }
    // Under loom there is no time: a first attempt (stamp 0) counts as
    // preempted and a retry (stamp 1) as running, so the models cover
    // both the skip and the grant with bounded retries.
    #[cfg(loom)]
    {
        stamp > 0
    }
}

impl McsTp {
    crate::sync::maybe_const_fn! {
        /// A free lock.
        pub fn new() -> Self {
            Self::over()
        }
    }
}

impl<S: Scheduler> McsTp<S> {
    crate::sync::maybe_const_fn! {
        /// A free lock over scheduler interface `S`.
        pub fn over() -> Self {
            Self { tail: AtomicPtr::new(ptr::null_mut()), _sched: PhantomData }
        }
    }

    /// One attempt; true when we hold the lock.
    #[inline(always)]
    fn attempt(&self, node: NonNull<Node>, round: u64) -> bool {
        // SAFETY: the node is ours and in no queue.
        let me = unsafe { node.as_ref() };
        me.next.store(ptr::null_mut(), Ordering::Relaxed);
        me.status.store(WAITING, Ordering::Relaxed);
        #[cfg(not(loom))]
        let _ = round;
        #[cfg(not(loom))]
        me.stamp.store(now_ns(), Ordering::Relaxed);
        #[cfg(loom)]
        me.stamp.store(round.min(1), Ordering::Relaxed);
        if S::SHOWS_PREEMPTION {
            // Relaxed: published with the node by the Release swap below.
            let cb = ptr::from_ref(crate::sched::current()).cast_mut();
            me.cb.store(cb, Ordering::Relaxed);
        }
        match list_queue::enqueue(&self.tail, node) {
            None => true,
            Some(pred) => Self::wait_behind(pred, me),
        }
    }

    #[cold]
    #[inline(never)]
    fn wait_behind(pred: NonNull<Node>, me: &Node) -> bool {
        list_queue::link(pred, me);
        wait_publishing(&me.status, WAITING, &me.stamp) == GRANTED
    }
}

/// Whether the scheduler itself descheduled the owner of `c` (its block
/// says `Preempted`): `mcs-np` under a running emulation hands the lock
/// to such a waiter, which is SMARTQ's "Queued-no preempt" (module docs),
/// while a waiter that the *kernel* descheduled (stale stamp, block not
/// `Preempted`) is skipped as on `Stock`.
#[inline]
fn descheduled_by_scheduler(c: &TpNode) -> bool {
    // Relaxed: the Acquire load of the link that led to `c` ordered it.
    let cb = c.cb.load(Ordering::Relaxed);
    // SAFETY: a waiting owner's block lives while it waits in the queue.
    !cb.is_null() && unsafe { &*cb }.state() == State::Preempted
}

/// A time-published waiter's loop (`mcs-tp`, and `smart-q` where no
/// scheduler shows preemption): waits while `status` holds `waiting`,
/// rewriting `stamp` every [`PUBLISH_SPINS`] polls and yielding every
/// [`YIELD_AFTER_NS`]; returns the status that ended the wait. `stamp`
/// holds the time the wait began.
#[cold]
#[inline(never)]
pub(crate) fn wait_publishing(status: &AtomicU8, waiting: u8, stamp: &AtomicU64) -> u8 {
    let mut spins = 0u32;
    #[cfg(not(loom))]
    let mut yield_at = stamp.load(Ordering::Relaxed) + YIELD_AFTER_NS;
    #[cfg(loom)]
    let _ = stamp;
    loop {
        // Acquire: pairs with the releaser's Release status store.
        match status.load(Ordering::Acquire) {
            s if s == waiting => {}
            s => return s,
        }
        spins = spins.wrapping_add(1);
        #[cfg(not(loom))]
        if spins.is_multiple_of(PUBLISH_SPINS) {
            let mut now = now_ns();
            if now >= yield_at {
                std::thread::yield_now();
                now = now_ns();
                yield_at = now + YIELD_AFTER_NS;
            }
            // Relaxed: a heartbeat; its age is all that matters.
            stamp.store(now, Ordering::Relaxed);
        }
        spin_hint();
    }
}

impl<S: Scheduler> Default for McsTp<S> {
    fn default() -> Self {
        Self::over()
    }
}

// SAFETY: `tail` orders acquirers as in MCS; a thread returns from `lock`
// only when `tail` was null at its swap or a releaser, after its critical
// section, stored `GRANTED` in its node (Release/Acquire), and each
// release grants at most one node or frees the lock. A `REMOVED` waiter
// holds nothing and enqueues again.
unsafe impl<S: Scheduler> lock_api::RawMutex for McsTp<S> {
    crate::raw_init!(over);
    type Guard = TpToken;

    #[inline]
    fn lock(&self) -> Self::Guard {
        let node = take_node();
        let mut round = 0;
        while !self.attempt(node, round) {
            round += 1;
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
        if let Some(first) = list_queue::successor_or_free::<SpinThenYield, _>(&self.tail, node) {
            // A scheduler that shows preemption leaves the order to the
            // queue: SMARTQ's "Queued" hand-off (module docs).
            let shown = S::shows_preemption();
            list_queue::grant_first_running::<SpinThenYield, _>(
                &self.tail,
                first,
                |c| {
                    // Relaxed: the stamp is a heartbeat, read for its age.
                    let running = fresh(c.stamp.load(Ordering::Relaxed))
                        || (shown && descheduled_by_scheduler(c));
                    if running {
                        // Release: the new holder sees our critical section.
                        c.status.store(GRANTED, Ordering::Release);
                    }
                    running
                },
                // Release: pairs with the removed owner's Acquire load.
                |r| r.status.store(REMOVED, Ordering::Release),
            );
        }
        // Nobody reads our node any more.
        give_node(node);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        !self.tail.load(Ordering::Relaxed).is_null()
    }
}
