//! The wait queue shared by the blocking objects: an intrusive FIFO list
//! of [`Waiter`] nodes that live on the waiting user threads' own stacks.
//!
//! # Why nodes on the stack, not the control block's link
//!
//! A control block's intrusive link ([`crate::CbRef::next`]) belongs to
//! whichever ready pool holds the thread. A parked thread can be readied
//! at any time by a stray [`Thread::unpark`](crate::Thread::unpark) (a
//! user's, or a late one from an earlier wait), which pushes it on a ready
//! pool through that link; if a wait queue threaded its list through the
//! same link, the list would be cut. A node on the waiter's stack has its
//! own link, owned by the queue alone.
//!
//! # Node life
//!
//! ```text
//! waiter: node = Waiter::new(me); push (under the owner's spin lock);
//!         release the spin lock; loop { state != WAITING => leave; park }
//! waker:  pop (under the spin lock); release it; wake(node, how):
//!         read node.cb, store node.state = how (Release), unpark(cb)
//! ```
//!
//! Invariants:
//! * A node is on at most one list, and only between its push and its pop;
//!   its `next` link is read and written only by the holder of that
//!   list's spin lock.
//! * The waiter does not leave the frame that holds its node while the
//!   node's state is `WAITING`; a node leaves `WAITING` only after it has
//!   been popped. So a popped node stays valid until the waker's `state`
//!   store, which is the waker's last access to it: the waker reads the
//!   control block *before* that store and unparks it after.
//! * A late unpark hits a thread that has already left: the park word
//!   keeps it as a token, and the thread's next park returns at once.
//!   Every park in this module is in a loop that re-checks `state`, so
//!   such a spurious return is harmless.

use std::cell::Cell;
use std::marker::PhantomPinned;
use std::ptr;
use symmetry_locks::sync::{AtomicU8, Ordering};

use crate::cb::CbRef;
use crate::runtime::context::{park_current, unpark};

/// The node is queued (or about to be); its thread must keep waiting.
pub(crate) const WAITING: u8 = 0;
/// The waker popped the node and woke the thread: retry (or return).
pub(crate) const WOKEN: u8 = 1;
/// The waker popped the node and handed the thread ownership of the
/// object (the mutex's fair unlock).
pub(crate) const HANDED_OFF: u8 = 2;

/// One waiting user thread: a node on its own stack (see the module docs).
#[derive(Debug)]
pub(crate) struct Waiter {
    /// The waiting thread.
    cb: CbRef,
    /// Next node of the list; owned by the holder of the list's lock.
    next: Cell<*const Waiter>,
    /// `WAITING`, `WOKEN` or `HANDED_OFF`.
    state: AtomicU8,
    /// Lists point at the node: it must not move while queued.
    _pin: PhantomPinned,
}

impl Waiter {
    /// A node for the calling user thread `cb`.
    #[inline]
    pub(crate) fn new(cb: CbRef) -> Self {
        Waiter {
            cb,
            next: Cell::new(ptr::null()),
            state: AtomicU8::new(WAITING),
            _pin: PhantomPinned,
        }
    }

    /// Parks the calling thread (the node's own) until a waker has popped
    /// the node; returns how it was woken (`WOKEN` or `HANDED_OFF`).
    /// Afterwards the node is off every list and may be reused
    /// ([`Waiter::rearm`]) or dropped.
    #[inline]
    pub(crate) fn wait(&self) -> u8 {
        loop {
            // Acquire: pairs with the Release store in `wake`, so that
            // what the waker did before waking us (a critical section it
            // handed off, a barrier generation, a condition it set under
            // the mutex) is visible when we go on.
            let s = self.state.load(Ordering::Acquire);
            if s != WAITING {
                return s;
            }
            // May return spuriously (a stale token): the loop re-checks.
            park_current(self.cb);
        }
    }

    /// Makes a woken node ready to be queued again (same thread, same
    /// frame).
    #[inline]
    pub(crate) fn rearm(&self) {
        // Relaxed: the node is off every list (its waker's last access,
        // the Release store, happened-before our Acquire load in `wait`),
        // and the next push publishes it under the list's spin lock.
        self.state.store(WAITING, Ordering::Relaxed);
    }

    /// Wakes the thread of a popped node, telling it `how`.
    ///
    /// # Safety
    /// `node` was popped from a [`WaitList`] by the caller and has not
    /// been woken since; the caller does not touch it afterwards.
    #[inline]
    pub(crate) unsafe fn wake(node: *const Waiter, how: u8) {
        // SAFETY: per the contract the node was popped and not yet woken,
        // so its waiter is still in `wait` and the node is alive (module
        // invariants). Read the thread before the store below, after
        // which the node may be gone.
        let cb = unsafe { (*node).cb };
        // SAFETY: as above; this store is our last access to the node.
        // Release: pairs with the Acquire load in `Waiter::wait`.
        unsafe { (*node).state.store(how, Ordering::Release) };
        // Control blocks are type-stable: if the thread has already seen
        // the store and moved on, this leaves it a harmless token.
        unpark(cb);
    }
}

/// An intrusive FIFO list of [`Waiter`]s. It is not synchronized itself:
/// every blocking object keeps its list under a `symmetry_locks::Tas`
/// spin lock (held for a few instructions: push, pop, a flag update).
#[derive(Debug)]
pub(crate) struct WaitList {
    head: *const Waiter,
    tail: *const Waiter,
    len: usize,
}

// SAFETY: the list holds pointers to nodes of parked user threads, which
// may be woken from any OS thread; it is only touched under its owner's
// spin lock, which orders those accesses.
unsafe impl Send for WaitList {}

impl WaitList {
    /// An empty list.
    pub(crate) const fn new() -> Self {
        WaitList {
            head: ptr::null(),
            tail: ptr::null(),
            len: 0,
        }
    }

    /// Whether no thread waits.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    /// Number of waiting threads.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Appends `node` at the tail.
    ///
    /// # Safety
    /// `node` is on no list and stays alive and unmoved until it is popped
    /// and woken (its thread calls [`Waiter::wait`] before leaving its
    /// frame).
    #[inline]
    pub(crate) unsafe fn push_back(&mut self, node: &Waiter) {
        node.next.set(ptr::null());
        if self.tail.is_null() {
            self.head = node;
        } else {
            // SAFETY: the tail is a queued node, alive per the invariants;
            // we hold the list's lock, which owns its link.
            unsafe { (*self.tail).next.set(node) };
        }
        self.tail = node;
        self.len += 1;
    }

    /// Prepends `node` at the head (a woken waiter that lost the race and
    /// keeps its place).
    ///
    /// # Safety
    /// As [`WaitList::push_back`].
    #[inline]
    pub(crate) unsafe fn push_front(&mut self, node: &Waiter) {
        node.next.set(self.head);
        if self.head.is_null() {
            self.tail = node;
        }
        self.head = node;
        self.len += 1;
    }

    /// Removes the head. The caller must [`Waiter::wake`] it.
    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<*const Waiter> {
        if self.head.is_null() {
            return None;
        }
        let h = self.head;
        // SAFETY: a queued node is alive (module invariants) and its link
        // is ours under the list's lock.
        self.head = unsafe { (*h).next.get() };
        if self.head.is_null() {
            self.tail = ptr::null();
        }
        self.len -= 1;
        Some(h)
    }

    /// Takes every node, leaving the list empty. Wake them with
    /// [`WaitList::wake_all`] after releasing the lock.
    #[inline]
    pub(crate) fn take(&mut self) -> WaitList {
        std::mem::replace(self, WaitList::new())
    }

    /// Wakes every node of a list taken with [`WaitList::take`] with `how`;
    /// returns how many.
    pub(crate) fn wake_all(mut self, how: u8) -> usize {
        let n = self.len;
        while let Some(node) = self.pop_front() {
            // SAFETY: popped just now, woken once; `pop_front` read its
            // link before this wake, which is our last access to it.
            unsafe { Waiter::wake(node, how) };
        }
        n
    }
}
