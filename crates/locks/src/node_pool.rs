//! Per-thread free lists of queue nodes.
//!
//! MCS, CLH and Graunke-Thakkar need one queue node per acquisition, and
//! the node must stay at a fixed address while other threads may touch it,
//! so it cannot live in the (movable) guard. Each thread keeps a stack of
//! heap-allocated nodes: `lock` pops one (allocating only when the stack is
//! empty, i.e. on first use or at a new nesting depth), `unlock` pushes one.
//! Because a node is found through the guard, not through its position in a
//! per-thread array, locks can be released in any order.
//!
//! Nodes are *type-stable*: once allocated, a node is never freed. At thread
//! exit the stack's nodes move to a global recycle list that later threads
//! draw from. This is what makes it safe for `try_lock`/`is_locked` of CLH
//! to read the node found in `tail` without owning it, and for
//! Graunke-Thakkar to compare against a predecessor's flag at any time.
//! Nodes still in use (a guard leaked with `mem::forget`) are not in the
//! stack and simply stay where they are. When the thread-local is already
//! destroyed (a lock used from another thread-local's destructor), nodes
//! go straight to the recycle list.
//!
//! Under loom, nodes hold loom atomics that belong to one model execution,
//! so nothing is recycled: nodes are leaked at thread exit.

use core::cell::UnsafeCell;
use core::ptr::NonNull;

/// A thread's stack of free nodes of type `N`.
pub(crate) struct NodeStack<N: 'static> {
    free: UnsafeCell<Vec<NonNull<N>>>,
    recycle: &'static Recycle<N>,
}

/// Global list of free nodes left behind by exited threads.
pub(crate) struct Recycle<N>(std::sync::Mutex<Vec<SendPtr<N>>>);

/// A node pointer moved between threads through [`Recycle`].
pub(crate) struct SendPtr<N>(NonNull<N>);
// SAFETY: a recycled node is owned by nobody; the mutex hands it to one
// thread at a time.
unsafe impl<N> Send for SendPtr<N> {}

impl<N> Recycle<N> {
    pub(crate) const fn new() -> Self {
        Self(std::sync::Mutex::new(Vec::new()))
    }

    /// A node an exited thread left behind, if any.
    #[cold]
    pub(crate) fn take(&self) -> Option<NonNull<N>> {
        if cfg!(loom) {
            return None;
        }
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .map(|p| p.0)
    }

    /// Makes free nodes available to other threads.
    #[cold]
    pub(crate) fn give(&self, nodes: impl Iterator<Item = NonNull<N>>) {
        if cfg!(loom) {
            return; // leaked: see the module docs
        }
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(nodes.map(SendPtr));
    }
}

impl<N> NodeStack<N> {
    pub(crate) const fn new(recycle: &'static Recycle<N>) -> Self {
        Self {
            free: UnsafeCell::new(Vec::new()),
            recycle,
        }
    }

    #[inline]
    pub(crate) fn pop(&self) -> Option<NonNull<N>> {
        // SAFETY: the stack is thread-local and neither `pop` nor `push`
        // calls out while the `&mut` exists, so the borrow is unique.
        unsafe { (*self.free.get()).pop() }
    }

    #[inline]
    pub(crate) fn push(&self, node: NonNull<N>) {
        // SAFETY: as in `pop`.
        unsafe { (*self.free.get()).push(node) }
    }
}

impl<N> Drop for NodeStack<N> {
    fn drop(&mut self) {
        self.recycle.give(self.free.get_mut().drain(..));
    }
}

/// Declares a thread-local node pool and `take_node`/`give_node` functions
/// for node type `$node`. `$alloc` is a `fn() -> NonNull<$node>` that makes
/// a new node (called when neither the thread's stack nor the recycle list
/// has one).
macro_rules! node_pool {
    ($node:ty, $alloc:path) => {
        static RECYCLE: crate::node_pool::Recycle<$node> = crate::node_pool::Recycle::new();

        crate::sync::thread_local! {
            static POOL: crate::node_pool::NodeStack<$node> =
                crate::node_pool::NodeStack::new(&RECYCLE);
        }

        #[cold]
        #[inline(never)]
        fn refill() -> core::ptr::NonNull<$node> {
            RECYCLE.take().unwrap_or_else($alloc)
        }

        /// A node owned by the calling thread, not in any queue.
        ///
        /// Not inlined: a user-level thread (symmetry-threads) can move
        /// to another OS thread between two lock operations, and an
        /// inlined TLS access lets the compiler reuse the thread-local
        /// base computed before the move, so two OS threads would share
        /// one pool. A call recomputes it every time.
        #[inline(never)]
        fn take_node() -> core::ptr::NonNull<$node> {
            match POOL.try_with(|p| p.pop()) {
                Ok(Some(node)) => node,
                _ => refill(),
            }
        }

        /// Returns a node that no queue protocol will write any more.
        /// Not inlined, for the reason given at `take_node`.
        #[inline(never)]
        fn give_node(node: core::ptr::NonNull<$node>) {
            if POOL.try_with(|p| p.push(node)).is_err() {
                RECYCLE.give(core::iter::once(node));
            }
        }
    };
}
pub(crate) use node_pool;

/// Allocates a default node on the heap; it is never freed (type-stable).
pub(crate) fn boxed_node<N: Default>() -> NonNull<N> {
    let node: Box<N> = Box::default();
    NonNull::from(Box::leak(node))
}
