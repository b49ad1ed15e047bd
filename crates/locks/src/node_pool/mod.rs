//! Per-thread free lists of queue nodes.
//!
//! MCS, CLH and Graunke-Thakkar need one queue node per acquisition, and
//! the node must stay at a fixed address while other threads may touch it,
//! so it cannot live in the (movable) guard. Each thread keeps a stack of
//! free nodes: `lock` pops one (drawing from the shared [`Slab`] only when
//! the stack is empty, i.e. on first use or at a new nesting depth),
//! `unlock` pushes one. Because a node is found through the guard, not
//! through its position in a per-thread array, locks can be released in
//! any order.
//!
//! Nodes are *type-stable*: once handed out, a node is never freed. At
//! thread exit the stack's nodes go back to the slab's recycle list, which
//! later threads draw from. This is what makes it safe for
//! `try_lock`/`is_locked` of CLH to read the node found in `tail` without
//! owning it, and for Graunke-Thakkar to compare against a predecessor's
//! flag at any time. Nodes still in use (a guard leaked with `mem::forget`)
//! are not in the stack and simply stay where they are. When the thread has
//! exited its stack (a lock used from a thread-local's destructor), nodes
//! go straight to the recycle list.
//!
//! # Signal handlers
//!
//! A program's signal handler may take a lock (`symmetry-interpose` runs
//! unmodified C programs on these locks, and C programs do), and it
//! interrupts its thread anywhere: inside this thread's own pool, or
//! inside `malloc`, also while the thread exits. Three rules keep the pool
//! whole and free of self-deadlock there:
//!
//! * **The hot path is guarded by a per-thread `busy` flag** set around
//!   each push and pop, behind compiler fences (a handler runs on the same
//!   thread, so ordering against it is the compiler's, not the CPU's). A
//!   handler that finds the flag set leaves the stack alone and takes the
//!   cold path, so a node is never popped twice or lost in a half-done
//!   push.
//! * **The cold path runs with every signal blocked**: the slab's mutex
//!   and registering the thread's exit hook. A handler therefore never
//!   finds its own thread holding that mutex.
//! * **Nothing a handler reaches allocates.** Nodes and the recycle list
//!   live in the slab's `mmap`ped chunks, never in `malloc`ed memory (a
//!   handler that allocated while its thread was inside `malloc`, or inside
//!   glibc's freeing of a thread's cache at exit, would deadlock on the
//!   arena's lock). The per-thread stack is a fixed array inside a
//!   `const`-initialised thread-local without a destructor (no lazy state
//!   a handler could find half-made, no buffer to grow; more than
//!   [`CAPACITY`] free nodes go to the recycle list), and the exit hook is
//!   a pthread key's destructor: glibc keeps a thread's values of the
//!   process's first 32 keys inside the thread, so registering allocates
//!   nothing, where a Rust thread-local destructor's registration calls
//!   `calloc`. (Unlike such a destructor, a key does not keep its library
//!   loaded, so the key is deleted when the code is unloaded: a
//!   `.fini_array` entry.)
//!
//! Under loom, nodes hold loom atomics that belong to one model execution,
//! so nothing is recycled: nodes are boxed and leaked, and nothing blocks
//! signals.

#[cfg(not(loom))]
mod slab;
#[cfg(not(loom))]
pub(crate) use slab::{LIMIT as SLAB_LIMIT, Slab};

use core::cell::{Cell, UnsafeCell};
use core::ptr::NonNull;
use core::sync::atomic::{Ordering, compiler_fence};

/// Free nodes a thread keeps; more go to the recycle list. Inline, so
/// keeping a node never allocates (module docs).
const CAPACITY: usize = 32;

/// The exit hook has not been registered.
const FRESH: u8 = 0;
/// The exit hook is registered; the stack is in use.
const LIVE: u8 = 1;
/// The exit hook ran: the stack is empty and takes no more nodes.
#[cfg_attr(loom, allow(dead_code))]
const EXITED: u8 = 2;

/// A thread's stack of free nodes of type `N`.
pub(crate) struct NodeStack<N: 'static> {
    /// `free[..len]` are free nodes; the rest is unused.
    free: UnsafeCell<[Option<NonNull<N>>; CAPACITY]>,
    len: Cell<usize>,
    /// Set while this thread is inside `pop` or `push`; a signal handler
    /// that finds it set does not touch `free` or `len`.
    busy: Cell<bool>,
    /// [`FRESH`], [`LIVE`] or [`EXITED`].
    state: Cell<u8>,
}

impl<N> NodeStack<N> {
    pub(crate) const fn new() -> Self {
        Self {
            free: UnsafeCell::new([None; CAPACITY]),
            len: Cell::new(0),
            busy: Cell::new(false),
            state: Cell::new(FRESH),
        }
    }

    /// Runs `f` on the stack unless a signal handler interrupted this
    /// thread inside another call (then `None`).
    #[inline(always)]
    fn exclusive<R>(
        &self,
        f: impl FnOnce(&mut [Option<NonNull<N>>; CAPACITY], &Cell<usize>) -> R,
    ) -> Option<R> {
        if self.busy.get() {
            return None;
        }
        self.busy.set(true);
        // A handler that interrupts from here on sees `busy`; one that
        // interrupted before ran to completion and left the stack whole.
        compiler_fence(Ordering::SeqCst);
        // SAFETY: the stack is thread-local, a handler on this thread
        // leaves it alone while `busy` is set (above), and `f` does not
        // call back into the pool; so this is the only reference.
        let r = f(unsafe { &mut *self.free.get() }, &self.len);
        compiler_fence(Ordering::SeqCst);
        self.busy.set(false);
        Some(r)
    }

    /// One of the thread's free nodes, if it has one and is not busy.
    #[inline]
    pub(crate) fn pop(&self) -> Option<NonNull<N>> {
        self.exclusive(|free, len| {
            let n = len.get().checked_sub(1)?;
            len.set(n);
            free[n].take()
        })
        .flatten()
    }

    /// Keeps `node`, or gives it back when the stack is busy, full or not
    /// live (never registered, or exited).
    #[inline]
    pub(crate) fn push(&self, node: NonNull<N>) -> Result<(), NonNull<N>> {
        if self.state.get() != LIVE {
            return Err(node);
        }
        match self.exclusive(|free, len| {
            let n = len.get();
            if n == CAPACITY {
                return false;
            }
            free[n] = Some(node);
            len.set(n + 1);
            true
        }) {
            Some(true) => Ok(()),
            _ => Err(node),
        }
    }

    /// Cold path, signals blocked: whether the exit hook must be
    /// registered now (first call on this thread; under loom there is no
    /// hook, and this only makes the stack live).
    pub(crate) fn needs_exit_hook(&self) -> bool {
        if self.state.get() == FRESH {
            self.state.set(LIVE);
            return true;
        }
        false
    }

    /// Exit hook, signals blocked: empties the stack for good.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn drain(&self) -> impl Iterator<Item = NonNull<N>> {
        self.state.set(EXITED);
        // Never busy here: the hook runs after the thread's own code, with
        // signals blocked.
        self.exclusive(|free, len| {
            len.set(0);
            core::mem::replace(free, [None; CAPACITY])
        })
        .into_iter()
        .flatten()
        .flatten()
    }
}

/// Registers `drain` to run at this thread's exit through the pthread key
/// in `key` (made on first use; `0` = none yet, else key + 1). Cold path,
/// signals blocked. A pthread key, not a Rust thread-local with a
/// destructor: glibc keeps a thread's first 32 keys' values inside the
/// thread, so registering allocates nothing (module docs), where a
/// thread-local destructor's registration calls `calloc`.
#[cfg(not(loom))]
pub(crate) fn register_exit(
    key: &core::sync::atomic::AtomicUsize,
    drain: unsafe extern "C" fn(*mut core::ffi::c_void),
) {
    // Acquire: pairs with the AcqRel CAS below, so the key is made.
    let mut k = key.load(Ordering::Acquire);
    if k == 0 {
        let mut new: libc::pthread_key_t = 0;
        // SAFETY: valid out-pointer; `drain` is a plain function.
        if unsafe { libc::pthread_key_create(&mut new, Some(drain)) } != 0 {
            return; // no keys left: this thread's free nodes leak at exit
        }
        let mine = new as usize + 1;
        // AcqRel: Release publishes our key; Acquire (on failure) pairs
        // with the winner's Release.
        k = match key.compare_exchange(0, mine, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => mine,
            Err(theirs) => {
                // SAFETY: our key, never set on any thread.
                unsafe { libc::pthread_key_delete(new) };
                theirs
            }
        };
    }
    // SAFETY: a key made above; any non-null value makes glibc call
    // `drain` at this thread's exit.
    unsafe {
        libc::pthread_setspecific(
            (k - 1) as libc::pthread_key_t,
            NonNull::<u8>::dangling().as_ptr().cast(),
        )
    };
}

/// Deletes the pthread key in `key`, if made: no thread's exit calls its
/// destructor any more (their free nodes are left where they are). Run
/// when the code is unloaded, so that `dlclose` of a library holding these
/// locks does not leave glibc a destructor that points into unmapped
/// code.
#[cfg(not(loom))]
pub(crate) fn unregister_exit(key: &core::sync::atomic::AtomicUsize) {
    // AcqRel: Acquire pairs with the CAS that made the key.
    let k = key.swap(0, Ordering::AcqRel);
    if k != 0 {
        // SAFETY: a key made by `register_exit`, deleted once (the swap).
        unsafe { libc::pthread_key_delete((k - 1) as libc::pthread_key_t) };
    }
}

/// Every signal blocked on the calling thread while alive, the previous
/// mask restored on drop: for code a signal handler of the same thread
/// must not interrupt (the queue locks' node pool, module docs; a
/// lock-library shim marking a mutex). Nothing under loom.
#[derive(Debug)]
pub struct SignalsBlocked {
    #[cfg(not(loom))]
    old: libc::sigset_t,
}

impl SignalsBlocked {
    /// Blocks every signal until the guard is dropped.
    #[must_use]
    pub fn new() -> Self {
        #[cfg(not(loom))]
        // SAFETY: `sigset_t` is plain data that `sigfillset` initialises;
        // `pthread_sigmask` gets valid pointers and cannot fail with
        // `SIG_BLOCK`.
        unsafe {
            let mut all: libc::sigset_t = core::mem::zeroed();
            let mut old: libc::sigset_t = core::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
            SignalsBlocked { old }
        }
        #[cfg(loom)]
        SignalsBlocked {}
    }
}

impl Default for SignalsBlocked {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        #[cfg(not(loom))]
        // SAFETY: restores the mask saved in `new`.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, core::ptr::null_mut());
        }
    }
}

/// Declares a thread-local node pool and `take_node`/`give_node` functions
/// for node type `$node`, whose free nodes are `<$node>::default()`.
/// `$name`, an `FnOnce(&mut $node, usize)`, is given each node handed out
/// fresh with its slab index (under loom, `0`): CLH and Graunke-Thakkar
/// name their nodes by index. It also declares `SLAB`, the type's
/// [`Slab`] (not under loom), where `SLAB.get(index)` finds a node again.
macro_rules! node_pool {
    ($node:ty) => {
        crate::node_pool::node_pool!($node, |_: &mut $node, _: usize| {});
    };
    ($node:ty, $name:expr) => {
        /// Every node of this type, held, waiting or free.
        #[cfg(not(loom))]
        static SLAB: crate::node_pool::Slab<$node> = crate::node_pool::Slab::new();

        #[cfg(not(loom))]
        std::thread_local! {
            // `const` and without a destructor: no lazy state (module docs).
            static POOL: crate::node_pool::NodeStack<$node> =
                const { crate::node_pool::NodeStack::new() };
        }
        #[cfg(loom)]
        loom::thread_local! {
            static POOL: crate::node_pool::NodeStack<$node> =
                crate::node_pool::NodeStack::new();
        }

        /// The pthread key whose destructor empties a thread's [`POOL`]
        /// at its exit (`node_pool::register_exit`).
        #[cfg(not(loom))]
        static EXIT_KEY: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

        /// Runs `node_pool::unregister_exit` when this code is unloaded
        /// (`dlclose`, or the end of the process).
        #[cfg(not(loom))]
        #[used]
        #[unsafe(link_section = ".fini_array")]
        static UNREGISTER: extern "C" fn() = {
            extern "C" fn unregister() {
                crate::node_pool::unregister_exit(&EXIT_KEY);
            }
            unregister
        };

        /// Moves the exiting thread's free nodes to [`SLAB`]'s recycle
        /// list.
        #[cfg(not(loom))]
        unsafe extern "C" fn on_exit(_: *mut core::ffi::c_void) {
            let _quiet = crate::node_pool::SignalsBlocked::new();
            let _ = POOL.try_with(|p| SLAB.give(p.drain()));
        }

        /// The cold half of `take_node`, with every signal blocked: a
        /// recycled node or a fresh one; registers the exit hook on the
        /// thread's first call.
        #[cold]
        #[inline(never)]
        fn refill() -> core::ptr::NonNull<$node> {
            let _quiet = crate::node_pool::SignalsBlocked::new();
            if matches!(POOL.try_with(|p| p.needs_exit_hook()), Ok(true)) {
                #[cfg(not(loom))]
                crate::node_pool::register_exit(&EXIT_KEY, on_exit);
            }
            #[cfg(not(loom))]
            return SLAB.take($name);
            #[cfg(loom)]
            return crate::node_pool::boxed($name);
        }

        /// The cold half of `give_node`, with every signal blocked: the
        /// thread's stack is full, busy (a handler interrupted it) or
        /// gone, so the node goes to the recycle list (under loom, it is
        /// leaked).
        #[cold]
        #[inline(never)]
        fn give_cold(node: core::ptr::NonNull<$node>) {
            #[cfg(not(loom))]
            {
                let _quiet = crate::node_pool::SignalsBlocked::new();
                SLAB.give(core::iter::once(node));
            }
            #[cfg(loom)]
            let _ = node;
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
            if let Ok(Ok(())) = POOL.try_with(|p| p.push(node)) {
                return;
            }
            give_cold(node);
        }
    };
}
pub(crate) use node_pool;

/// Under loom: a default node on the heap, named by `name` (index 0), and
/// leaked (module docs).
#[cfg(loom)]
pub(crate) fn boxed<N: Default>(name: impl FnOnce(&mut N, usize)) -> NonNull<N> {
    let node = Box::leak(Box::<N>::default());
    name(node, 0);
    NonNull::from(node)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    static MADE: AtomicUsize = AtomicUsize::new(0);

    #[derive(Default)]
    struct TestNode(u64);

    fn counted(node: &mut TestNode, index: usize) {
        MADE.fetch_add(1, Ordering::Relaxed);
        node.0 = index as u64;
    }

    crate::node_pool::node_pool!(TestNode, counted);

    #[test]
    fn exited_threads_leave_their_nodes_to_later_ones() {
        for _ in 0..200 {
            std::thread::spawn(|| {
                // Three at once, then more free nodes than the stack keeps.
                let held: Vec<_> = (0..3).map(|_| take_node()).collect();
                held.into_iter().for_each(give_node);
                let many: Vec<_> = (0..super::CAPACITY + 5).map(|_| take_node()).collect();
                for &node in &many {
                    // SAFETY: a node handed to this thread, not shared.
                    let index = unsafe { node.as_ref() }.0 as usize;
                    assert_eq!(SLAB.get(index), node, "a node found again by its index");
                }
                many.into_iter().for_each(give_node);
            })
            .join()
            .expect("a pool user panicked");
        }
        // The first thread makes them all; every later one draws the nodes
        // the exited ones left (the exit hook and the full stack's spill).
        assert_eq!(MADE.load(Ordering::Relaxed), super::CAPACITY + 5);
    }

    mod across_chunks {
        use std::collections::HashSet;

        #[derive(Default)]
        struct Wide([u64; 16]);

        crate::node_pool::node_pool!(Wide, |n: &mut Wide, i: usize| n.0[0] = i as u64);

        #[test]
        fn nodes_of_many_chunks_are_distinct_and_found_by_index() {
            for round in 0..3 {
                let held: Vec<_> = (0..2_500).map(|_| take_node()).collect();
                let addresses: HashSet<_> = held.iter().map(|n| n.as_ptr() as usize).collect();
                assert_eq!(
                    addresses.len(),
                    held.len(),
                    "round {round}: a node handed out twice"
                );
                for &node in &held {
                    // SAFETY: held by this thread.
                    let index = unsafe { node.as_ref() }.0[0] as usize;
                    assert!(index < 2_500, "round {round}: no node made after the first");
                    assert_eq!(SLAB.get(index), node);
                }
                held.into_iter().rev().for_each(give_node);
            }
        }
    }
}
