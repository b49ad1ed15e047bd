//! The type-stable home of one node type's queue nodes, and the list of
//! free nodes that exited threads left behind.
//!
//! Nodes live in chunks of [`CHUNK`] that are mapped with `mmap` when the
//! first of their nodes is handed out and never unmapped, so a node's
//! address stays valid for the life of the process (CLH and
//! Graunke-Thakkar read nodes they do not own) and an index names it (the
//! `tail` words of CLH and Graunke-Thakkar pack an index, not an address).
//! The directory of chunks is a static array read without a lock.
//!
//! The recycle list is a stack of node pointers kept *inside the chunks*:
//! each chunk carries one pointer slot per node it holds, so the stack,
//! which never holds more nodes than were handed out, never needs memory of
//! its own. Nothing here calls `malloc`: a signal handler that needs a node
//! while its thread is inside the program's `malloc` would deadlock there
//! (the pool's module docs). Handing out and recycling take one mutex,
//! always with every signal blocked ([`super::SignalsBlocked`]), so a
//! handler never finds its own thread holding it.

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, Ordering};

/// Nodes per chunk.
const CHUNK: usize = 1024;
/// Chunks per node type: at most `CHUNK * CHUNKS` nodes of one type exist
/// at once, held, waiting or free (4,194,304).
const CHUNKS: usize = 4096;
/// Nodes one type can have.
pub(crate) const LIMIT: usize = CHUNK * CHUNKS;

/// One mapping: `CHUNK` nodes (initialised when handed out) and the
/// recycle stack's slots for as many nodes.
#[repr(C)]
struct Chunk<N> {
    nodes: [UnsafeCell<MaybeUninit<N>>; CHUNK],
    recycled: [UnsafeCell<MaybeUninit<NonNull<N>>>; CHUNK],
}

/// Under the mutex: how far the slab has been handed out and how deep the
/// recycle stack is (`free <= made`: a node is recycled at most once
/// between two hand-outs).
struct Counts {
    /// Indices `0..made` have been handed out.
    made: usize,
    /// Recycle stack slots `0..free` hold free nodes.
    free: usize,
}

/// The nodes of one type (module docs).
pub(crate) struct Slab<N> {
    /// Chunk `i` holds nodes `i * CHUNK ..`; null until its first node is
    /// handed out. Written under `counts`; read anywhere.
    chunks: [AtomicPtr<Chunk<N>>; CHUNKS],
    counts: std::sync::Mutex<Counts>,
}

// SAFETY: the slab hands each node to one thread at a time (under the
// mutex); the nodes themselves are shared as their lock protocol says.
unsafe impl<N> Sync for Slab<N> {}

impl<N: Default> Slab<N> {
    pub(crate) const fn new() -> Self {
        Self {
            chunks: [const { AtomicPtr::new(core::ptr::null_mut()) }; CHUNKS],
            counts: std::sync::Mutex::new(Counts { made: 0, free: 0 }),
        }
    }

    /// A free node: the most recently recycled one, else a fresh
    /// `N::default()` passed to `name` with its index first. Call with
    /// every signal blocked.
    #[cold]
    pub(crate) fn take(&self, name: impl FnOnce(&mut N, usize)) -> NonNull<N> {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if counts.free > 0 {
            counts.free -= 1;
            // SAFETY: slot `free` was written by `give` (the stack holds
            // `free` nodes), in a chunk installed before its first node
            // was handed out (`free <= made`).
            return unsafe { (*self.recycled(counts.free)).assume_init() };
        }
        let index = counts.made;
        assert!(
            index < LIMIT,
            "symmetry-locks: more than {LIMIT} queue nodes of {} at once",
            core::any::type_name::<N>()
        );
        let chunk = if index.is_multiple_of(CHUNK) {
            self.install(index / CHUNK)
        } else {
            self.chunks[index / CHUNK].load(Ordering::Relaxed) // under the mutex
        };
        counts.made += 1;
        // SAFETY: `chunk` is mapped and holds CHUNK nodes; slot `index` was
        // never handed out, so nobody else refers to it.
        unsafe {
            let slot = (*chunk).nodes[index % CHUNK].get();
            let node = (*slot).write(N::default());
            name(node, index);
            NonNull::from(node)
        }
    }

    /// Puts free nodes on the recycle stack. Call with every signal
    /// blocked.
    #[cold]
    pub(crate) fn give(&self, nodes: impl IntoIterator<Item = NonNull<N>>) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        for node in nodes {
            assert!(counts.free < counts.made, "a queue node recycled twice");
            // SAFETY: `free < made`, so slot `free` lies in an installed
            // chunk; the stack's slots are touched only under the mutex.
            unsafe { (*self.recycled(counts.free)).write(node) };
            counts.free += 1;
        }
    }

    /// The node with index `index`, which `take` handed out.
    #[inline(always)]
    pub(crate) fn get(&self, index: usize) -> NonNull<N> {
        // Acquire: pairs with the Release store in `install`. (The index
        // itself reached the caller through the lock's own Release and
        // Acquire, after the hand-out, so the chunk is always there.)
        let chunk = self.chunks[index / CHUNK].load(Ordering::Acquire);
        debug_assert!(!chunk.is_null(), "node {index} was never handed out");
        // SAFETY: handed-out indices lie in installed chunks, which are
        // never unmapped; the node was initialised when handed out.
        unsafe { NonNull::new_unchecked((*chunk).nodes[index % CHUNK].get().cast()) }
    }

    /// Recycle stack slot `i`. Under the mutex, `i < made`.
    fn recycled(&self, i: usize) -> *mut MaybeUninit<NonNull<N>> {
        let chunk = self.chunks[i / CHUNK].load(Ordering::Relaxed); // under the mutex
        // SAFETY: `i < made`, so chunk `i / CHUNK` is installed.
        unsafe { (*chunk).recycled[i % CHUNK].get() }
    }

    /// Maps chunk `c` (under the mutex, its first hand-out).
    #[cold]
    fn install(&self, c: usize) -> *mut Chunk<N> {
        const { assert!(align_of::<Chunk<N>>() <= 4096, "nodes aligned past a page") };
        let size = size_of::<Chunk<N>>();
        // SAFETY: an anonymous private mapping; no pointer is passed in.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            std::alloc::handle_alloc_error(core::alloc::Layout::new::<Chunk<N>>());
        }
        let chunk = p.cast::<Chunk<N>>();
        // Release: pairs with the Acquire load in `get`, so a reader that
        // finds the chunk finds it mapped.
        self.chunks[c].store(chunk, Ordering::Release);
        chunk
    }
}
