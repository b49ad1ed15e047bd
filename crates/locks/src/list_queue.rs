//! What the MCS-style list locks (`mcs` and SMARTQ's family built on it:
//! `mcs-np` through `mcs`, `handshake`, `smart-q`, `mcs-tp`) share: an MCS
//! tail (the last node,
//! or null when the lock is free), nodes linked by their successor's
//! store into `next`, the holder's node carried in the guard, and, for
//! `smart-q` and `mcs-tp`, the release walk that grants the first running
//! waiter and removes the others.
//!
//! A releaser waits for one thing only: the link of a successor that has
//! swapped itself into `tail` but not yet written `pred.next` (a few
//! instructions, unless it is preempted between them, which on a busy
//! machine happens). That wait follows the lock's waiting policy `W`
//! ([`Wait`]): [`Spin`](crate::backoff::Spin) for the paper's locks,
//! [`SpinThenYield`](crate::backoff::SpinThenYield) where a descheduled
//! successor must get a core back.

use core::ptr::{self, NonNull};

use crossbeam_utils::CachePadded;

use crate::backoff::{Wait, Waiting};
use crate::registry::GuardWord;
use crate::sync::{AtomicPtr, Ordering};

/// A queue node with a successor link.
pub(crate) trait Linked: Sized {
    /// The successor, set by the successor after its swap.
    fn next(&self) -> &AtomicPtr<CachePadded<Self>>;
}

/// Guard state of a queue-lock acquisition (the list locks here, `clh`
/// and `graunke-thakkar`): the holder's node, from its `node_pool`.
#[derive(Debug)]
pub struct NodeToken<N>(pub(crate) NonNull<CachePadded<N>>);

// SAFETY: a shared `&NodeToken` (inside a `&MutexGuard` shared between
// threads) gives access to the pointer value only: nothing reads or writes
// the node through `&self` (`Debug` prints the address). The node is used
// only by `unlock`, which takes the token by value, i.e. needs the guard
// itself, not a reference to it. So sharing the guard lets other threads
// read `T` (hence lock_api's `T: Sync` bound) and nothing else. The token
// stays `!Send`.
unsafe impl<N> Sync for NodeToken<N> {}

// SAFETY: the word is the node pointer, which is never null.
unsafe impl<N> GuardWord for NodeToken<N> {
    #[inline(always)]
    fn into_word(self) -> usize {
        self.0.as_ptr() as usize
    }
    #[inline(always)]
    unsafe fn from_word(w: usize) -> Self {
        // SAFETY: `w` came from `into_word`, a non-null pointer.
        NodeToken(unsafe { NonNull::new_unchecked(w as *mut CachePadded<N>) })
    }
}

/// The successor of `node`, waiting (by `W`) for its link if `tail` has
/// moved past `node`.
#[cold]
#[inline(never)]
pub(crate) fn wait_next<W: Wait, N: Linked>(node: &N) -> NonNull<CachePadded<N>> {
    let mut w = Waiting::new();
    loop {
        // Acquire: pairs with the successor's Release store of the link.
        if let Some(n) = NonNull::new(node.next().load(Ordering::Acquire)) {
            return n;
        }
        W::pause(&mut w);
    }
}

/// Swings `tail` from `node` to null (the lock is free); Release pairs
/// with the next acquirer's Acquire swap or CAS.
#[inline]
pub(crate) fn free<N>(tail: &AtomicPtr<CachePadded<N>>, node: NonNull<CachePadded<N>>) -> bool {
    tail.compare_exchange(
        node.as_ptr(),
        ptr::null_mut(),
        Ordering::Release,
        Ordering::Relaxed,
    )
    .is_ok()
}

/// The start of every release: the holder's successor, or `None` if there
/// is none and the lock is now free.
#[inline]
pub(crate) fn successor_or_free<W: Wait, N: Linked>(
    tail: &AtomicPtr<CachePadded<N>>,
    node: NonNull<CachePadded<N>>,
) -> Option<NonNull<CachePadded<N>>> {
    // SAFETY: the caller holds the lock through `node`.
    let me = unsafe { node.as_ref() };
    // Acquire: pairs with the successor's Release link.
    match NonNull::new(me.next().load(Ordering::Acquire)) {
        Some(n) => Some(n),
        None if free(tail, node) => None,
        None => Some(wait_next::<W, N>(&**me)),
    }
}

/// `lock`'s enqueue: swaps `node` into `tail`; returns the predecessor,
/// or `None` when the lock was free and is now ours. AcqRel: Acquire
/// pairs with the Release CAS of a releaser that freed the lock and with
/// the predecessor's swap; Release publishes the node's initialisation to
/// the successor that swaps it out.
#[inline(always)]
pub(crate) fn enqueue<N>(
    tail: &AtomicPtr<CachePadded<N>>,
    node: NonNull<CachePadded<N>>,
) -> Option<NonNull<CachePadded<N>>> {
    NonNull::new(tail.swap(node.as_ptr(), Ordering::AcqRel))
}

/// Links `me` behind `pred`, the predecessor that [`enqueue`] returned.
#[inline(always)]
pub(crate) fn link<N: Linked>(pred: NonNull<CachePadded<N>>, me: &CachePadded<N>) {
    // SAFETY: nodes are type-stable, and the predecessor's owner reads
    // this link before it gives its node up (it waits for the link in
    // `successor_or_free`).
    let pred = unsafe { pred.as_ref() };
    // Release: the releaser's Acquire load of `next` sees our node's
    // fields (and the owner's state written before).
    pred.next()
        .store(ptr::from_ref(me).cast_mut(), Ordering::Release);
}

/// `try_lock` of a list queue: `None` at once if `tail` shows a holder;
/// otherwise a node from `take` with its `next` cleared, which `install`
/// finishes and puts in `tail` only if the lock is free (by
/// [`enqueue_if_free`], perhaps inside a non-preemption request). A node
/// not installed goes back by `give`.
#[inline(always)]
pub(crate) fn try_enqueue<N: Linked>(
    tail: &AtomicPtr<CachePadded<N>>,
    take: impl FnOnce() -> NonNull<CachePadded<N>>,
    give: impl FnOnce(NonNull<CachePadded<N>>),
    install: impl FnOnce(&N, NonNull<CachePadded<N>>) -> bool,
) -> Option<NodeToken<N>> {
    // Relaxed: a held lock costs no ownership request; the CAS orders.
    if !tail.load(Ordering::Relaxed).is_null() {
        return None;
    }
    let node = take();
    // SAFETY: the node is ours and in no queue.
    let me = unsafe { node.as_ref() };
    me.next().store(ptr::null_mut(), Ordering::Relaxed);
    if install(me, node) {
        Some(NodeToken(node))
    } else {
        give(node);
        None
    }
}

/// `try_lock`'s enqueue: installs `node` only if the lock is free.
/// AcqRel: Acquire pairs with the releaser's Release of `tail`; Release
/// publishes the node's initialisation.
#[inline]
pub(crate) fn enqueue_if_free<N>(
    tail: &AtomicPtr<CachePadded<N>>,
    node: NonNull<CachePadded<N>>,
) -> bool {
    tail.compare_exchange(
        ptr::null_mut(),
        node.as_ptr(),
        Ordering::AcqRel,
        Ordering::Relaxed,
    )
    .is_ok()
}

/// The release walk of `smart-q` (SMARTQ Fig. 3) and `mcs-tp`: from the
/// holder's successor `first`, give the lock to the first waiter for which
/// `claim` succeeds (`claim` makes it the holder, e.g. by its status
/// store), and remove the waiters before it with `remove`. With nobody
/// left, the lock is freed.
///
/// A removed node's `remove` is called only after the walk's last read of
/// it (its `next`), so its owner, which re-queues the same node once it
/// sees itself removed, never clears a link the walk still needs. (SMARTQ
/// Fig. 3 writes `failure` first and may then spin on that node's `next`.)
#[cold]
#[inline(never)]
pub(crate) fn grant_first_running<W: Wait, N: Linked>(
    tail: &AtomicPtr<CachePadded<N>>,
    first: NonNull<CachePadded<N>>,
    claim: impl Fn(&N) -> bool,
    remove: impl Fn(&N),
) {
    let mut candidate = first;
    // The skipped node whose removal is still to be written.
    let mut skipped: Option<NonNull<CachePadded<N>>> = None;
    loop {
        // SAFETY: a linked waiter's node stays live (type-stable pool) and
        // its owner waits in the queue until we write its status.
        let c = unsafe { candidate.as_ref() };
        if claim(c) {
            break;
        }
        if let Some(s) = skipped.replace(candidate) {
            // SAFETY: as above; we have read its `next`.
            remove(unsafe { s.as_ref() });
        }
        // Acquire: pairs with the successor's Release link.
        match NonNull::new(c.next().load(Ordering::Acquire)) {
            Some(n) => candidate = n,
            None if free(tail, candidate) => break,
            None => candidate = wait_next::<W, N>(&**c),
        }
    }
    if let Some(s) = skipped {
        // SAFETY: as above.
        remove(unsafe { s.as_ref() });
    }
}
