//! `graunke-thakkar`: the queue lock of Graunke & Thakkar (1990) that PRESTO
//! §3.1 adopted as `HP_Spinlock`.
//!
//! The lock is one word, `tail`, naming the last requester's flag together
//! with the value that flag had when it enqueued. To lock, a requester swaps
//! in (its own flag, that flag's current value) and gets back its
//! predecessor's pair; it then spins until the predecessor's flag differs
//! from the recorded value. To unlock, the holder changes its own flag: one
//! plain store, no atomic read-modify-write. The queue is implicit.
//!
//! In the original every processor owns one flag per lock and toggles it.
//! Behind `RawMutex` a thread may hold many locks at once, so flags are queue
//! nodes drawn from a per-thread pool (like MCS/CLH), and a node may be
//! reused on another lock right after its release. A toggled bit would then
//! be ambiguous (two releases look like none), so the flag is a *generation
//! counter* that each release increments, and `tail` packs
//! `(node index + 1) << 40 | generation mod 2^40` (`0` = no requester yet).
//! A waiter proceeds once the predecessor's generation differs from the
//! recorded one, i.e. once the predecessor has released at least once since
//! it enqueued, which is exactly the hold we wait for. Mutual exclusion never
//! depends on the width; liveness would fail only if a node were reused
//! exactly 2^40 times (about a day of back-to-back 80 ns hand-overs on one
//! node) while one waiter never looked, and then left idle.
//!
//! Nodes live in the type-stable slab of `node_pool`, indexed, so that 24
//! bits name one; a node is never freed, so a waiter may read a
//! predecessor's flag at any time. Under loom, nodes are individually boxed
//! and named by pointer.

use crossbeam_utils::CachePadded;

use crate::backoff::{Spin, wait_until};
use crate::list_queue::NodeToken;
use crate::sync::{AtomicU64, Ordering, maybe_const_fn};

#[cfg(not(loom))]
const GEN_BITS: u32 = 40;
#[cfg(not(loom))]
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;

/// A flag: the generation counter of one queue node, alone on its line.
#[derive(Debug, Default)]
pub struct GtNode {
    /// Incremented by the owner at each release; read by its successor.
    generation: AtomicU64,
    /// Slab index of this node (immutable after allocation).
    #[cfg_attr(loom, allow(dead_code))]
    index: u32,
}

type Node = CachePadded<GtNode>;

#[cfg(not(loom))]
#[inline]
fn encode(node: &Node, generation: u64) -> u64 {
    (u64::from(node.index) + 1) << GEN_BITS | (generation & GEN_MASK)
}

#[cfg(not(loom))]
#[inline]
fn decode(word: u64) -> (&'static Node, u64) {
    let index = (word >> GEN_BITS) as usize - 1;
    // SAFETY: an index in a `tail` word names a node the slab handed out;
    // slab nodes are never freed.
    (unsafe { SLAB.get(index).as_ref() }, word & GEN_MASK)
}

/// Records a fresh node's slab index, which `tail` words carry.
#[cfg(not(loom))]
fn name(node: &mut Node, index: usize) {
    // The slab's limit is far inside the `64 - GEN_BITS` bits of a name.
    const { assert!(crate::node_pool::SLAB_LIMIT < 1 << (64 - GEN_BITS)) };
    node.index = index as u32;
}

// Loom: boxed nodes named by `address >> 7` (they are 128-byte aligned on
// x86_64) with 23 bits of generation; models never get near a wrap.
#[cfg(loom)]
const LOOM_GEN_BITS: u32 = 23;

#[cfg(loom)]
#[inline]
fn encode(node: &Node, generation: u64) -> u64 {
    ((node as *const Node as u64) >> 7) << LOOM_GEN_BITS | (generation & ((1 << LOOM_GEN_BITS) - 1))
}

#[cfg(loom)]
#[inline]
fn decode(word: u64) -> (&'static Node, u64) {
    let ptr = ((word >> LOOM_GEN_BITS) << 7) as *const Node;
    // SAFETY: boxed nodes are leaked, never freed.
    (unsafe { &*ptr }, word & ((1 << LOOM_GEN_BITS) - 1))
}

#[cfg(loom)]
fn name(_: &mut Node, _: usize) {}

#[cfg(loom)]
#[inline]
fn generation_eq(a: u64, b: u64) -> bool {
    (a & ((1 << LOOM_GEN_BITS) - 1)) == b
}

#[cfg(not(loom))]
#[inline]
fn generation_eq(a: u64, b: u64) -> bool {
    (a & GEN_MASK) == b
}

crate::node_pool::node_pool!(Node, name);

/// Graunke-Thakkar queue lock (PRESTO's `HP_Spinlock`).
#[derive(Debug)]
pub struct GraunkeThakkar {
    /// `(node index + 1) << 40 | generation`; `0` before the first request.
    tail: AtomicU64,
}

/// Guard state of a Graunke-Thakkar acquisition: the holder's flag node.
pub type GtToken = NodeToken<GtNode>;

impl GraunkeThakkar {
    maybe_const_fn! {
        /// A free lock.
        pub fn new() -> Self {
            Self { tail: AtomicU64::new(0) }
        }
    }
}

impl Default for GraunkeThakkar {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: the swap on `tail` totally orders requesters; each returns from
// `lock` only once its predecessor's generation moved past the value
// recorded at the predecessor's request, i.e. after its Release in `unlock`.
unsafe impl lock_api::RawMutex for GraunkeThakkar {
    crate::raw_init!();
    type Guard = GtToken;

    #[inline]
    fn lock(&self) -> Self::Guard {
        let node = take_node();
        // SAFETY: type-stable node owned by us.
        let me = unsafe { node.as_ref() };
        // Relaxed: only we write our own generation.
        let generation = me.generation.load(Ordering::Relaxed);
        // AcqRel: Release orders our read of our generation before the
        // successor's reads of it (so it cannot see an older value);
        // Acquire does the same for our predecessor's.
        let pred = self.tail.swap(encode(me, generation), Ordering::AcqRel);
        if pred != 0 {
            let (pred, recorded) = decode(pred);
            // Acquire: pairs with the Release store in the predecessor's
            // `unlock` (or a later one of the same node, which follows it).
            wait_until::<Spin>(|| {
                !generation_eq(pred.generation.load(Ordering::Acquire), recorded)
            });
        }
        NodeToken(node)
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        // Acquire: as the swap in `lock`.
        let pred = self.tail.load(Ordering::Acquire);
        if pred != 0 {
            let (pred, recorded) = decode(pred);
            // Acquire: pairs with the predecessor's Release in `unlock`.
            if generation_eq(pred.generation.load(Ordering::Acquire), recorded) {
                return None;
            }
        }
        let node = take_node();
        // SAFETY: type-stable node owned by us.
        let me = unsafe { node.as_ref() };
        let generation = me.generation.load(Ordering::Relaxed);
        // AcqRel: as the swap in `lock`. Success means the word was still
        // the released predecessor's, so nobody holds or waits.
        match self.tail.compare_exchange(
            pred,
            encode(me, generation),
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => Some(NodeToken(node)),
            Err(_) => {
                give_node(node);
                None
            }
        }
    }

    #[inline]
    unsafe fn unlock(&self, guard: Self::Guard) {
        // SAFETY: type-stable node owned by the caller (who holds the lock).
        let me = unsafe { guard.0.as_ref() };
        let generation = me.generation.load(Ordering::Relaxed);
        // Release: pairs with the successor's Acquire load of our flag.
        me.generation
            .store(generation.wrapping_add(1), Ordering::Release);
        // The node may be reused at once, on any lock: a waiter compares
        // generations, which only grow.
        give_node(guard.0);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        let tail = self.tail.load(Ordering::Acquire);
        if tail == 0 {
            return false;
        }
        let (node, recorded) = decode(tail);
        generation_eq(node.generation.load(Ordering::Relaxed), recorded)
    }
}

// FIFO: `unlock` hands the lock to the successor spinning on our flag.
crate::fifo_fair!([] GraunkeThakkar);
