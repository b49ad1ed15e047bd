//! Thread control blocks (ALL89 §II, Table I).
//!
//! A control block ("cb") holds everything a thread needs before it has a
//! stack: its entry function and arguments (stored inline, as ALL89 and
//! WorkCrews do, so that the stack can be bound at start), its name, its
//! priority for user schedulers, and, once started, its stack (with the
//! fiber that runs it, see [`crate::fiber`]).
//!
//! Control blocks are *type-stable*: a runtime allocates each one once and
//! records it in its arena; it is never freed, not even when the runtime
//! is dropped (its wake hooks then become no-ops), so a `Thread` handle
//! that outlives its runtime stays memory-safe. Between lives a cb sits on
//! a free list. This is what lets wait
//! queues and ready queues hold plain pointers ([`CbRef`]) and lets a stray
//! wake-up of a recycled thread be harmless (it is a spurious wake-up, which
//! every blocking primitive tolerates).
//!
//! The park word (block/signal) is in [`crate::park_word`].

use std::cell::{Cell, UnsafeCell};
use std::mem::{MaybeUninit, align_of, size_of};
use std::ptr::NonNull;

use crate::park_word::ParkWord;
pub use crate::stack::Stack;

/// Why a user thread switched back to its processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Switch {
    /// `park()`: block until unparked.
    Park,
    /// `yield_now()`: put back on the ready pool.
    Yield,
    /// The thread's entry returned; the fiber is idle at its loop's top.
    Finished,
}

/// Bytes of closure stored inline in a control block; larger closures are
/// boxed (one allocation) and the box pointer is stored instead.
pub const INLINE_ARGS: usize = 48;

#[repr(C, align(16))]
struct Args([MaybeUninit<u8>; INLINE_ARGS]);

/// Run and drop functions of a stored closure.
type EntryFns = (unsafe fn(*mut u8), unsafe fn(*mut u8));

/// The runtime-side hooks of a control block: how to make it ready again
/// (the Table I "signal"), type-erased so that blocking primitives do not
/// depend on the runtime's strategy type.
pub(crate) struct RuntimeHooks {
    /// Makes a parked thread ready (called at most once per park).
    pub(crate) ready: unsafe fn(*const (), CbRef),
    /// The runtime, passed back to `ready`.
    pub(crate) rt: *const (),
}

// SAFETY: `rt` points at a runtime's `Shared`, which is Sync, or is null
// (the no-op hooks of abandoned threads); it is only passed back to
// `ready`.
unsafe impl Sync for RuntimeHooks {}

/// A thread control block. See the module docs.
pub(crate) struct Cb {
    /// Intrusive link for whichever list (ready pool, free list, wait
    /// queue) holds the cb. Owned by the holder of that list's lock.
    next: Cell<Option<CbRef>>,
    /// Block/signal state (see [`crate::park_word`]).
    pub(crate) state: ParkWord,
    /// Runs (`.0`) or drops unrun (`.1`) the closure stored in `args`;
    /// `None` while the cb is free or its closure has been taken.
    entry: Cell<Option<EntryFns>>,
    args: UnsafeCell<Args>,
    /// The stack bound at start, with its fiber, until finish; `None`
    /// before start.
    pub(crate) stack: UnsafeCell<Option<Stack>>,
    /// Yielder of the fiber running this thread (valid while it runs).
    pub(crate) yielder: Cell<*const corosensei::Yielder<CbRef, Switch>>,
    /// Guard page of the bound stack, `[lo, hi)`, for the overflow report.
    pub(crate) guard: Cell<(usize, usize)>,
    name: UnsafeCell<Option<Box<str>>>,
    id: Cell<u64>,
    priority: Cell<i64>,
    pub(crate) hooks: Cell<*const RuntimeHooks>,
}

/// A pointer to a control block. Control blocks are type-stable (see the
/// module docs), so a `CbRef` never dangles.
///
/// Ready pools ([`crate::ReadyPool`]) store `CbRef`s; they may use the
/// intrusive link ([`CbRef::next`], [`CbRef::set_next`]) while they own the
/// thread, which saves them any allocation.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CbRef(NonNull<Cb>);

// SAFETY: a control block is handed between processors only through locked
// queues, free lists and the park word, which order every access; its
// `Cell` fields are only touched by the current owner of the cb (the
// processor running the thread, or the holder of the lock of the list
// that holds it).
unsafe impl Send for CbRef {}
// SAFETY: as above; shared `CbRef`s only read immutable-while-shared
// fields (id, name, priority) or use the atomic park word.
unsafe impl Sync for CbRef {}

impl std::fmt::Debug for CbRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Thread#{}", self.id())
    }
}

impl std::fmt::Debug for Cb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cb")
            .field("id", &self.id.get())
            .finish_non_exhaustive()
    }
}

impl Cb {
    /// A fresh, free control block.
    pub(crate) fn new() -> Self {
        Cb {
            next: Cell::new(None),
            state: ParkWord::new(),
            entry: Cell::new(None),
            args: UnsafeCell::new(Args([MaybeUninit::uninit(); INLINE_ARGS])),
            stack: UnsafeCell::new(None),
            yielder: Cell::new(std::ptr::null()),
            guard: Cell::new((0, 0)),
            name: UnsafeCell::new(None),
            id: Cell::new(0),
            priority: Cell::new(0),
            hooks: Cell::new(std::ptr::null()),
        }
    }
}

impl CbRef {
    /// Leaks a fresh control block (the runtime's arena frees it).
    pub(crate) fn alloc() -> CbRef {
        CbRef(NonNull::from(Box::leak(Box::new(Cb::new()))))
    }

    /// The `CbRef` at an address obtained from [`CbRef::as_ptr`].
    ///
    /// # Safety
    /// `addr` came from `as_ptr` of a live runtime's control block.
    pub(crate) unsafe fn from_addr(addr: usize) -> CbRef {
        // SAFETY: per the contract the address is a non-null cb.
        CbRef(unsafe { NonNull::new_unchecked(addr as *mut Cb) })
    }

    #[inline(always)]
    pub(crate) fn cb(&self) -> &Cb {
        // SAFETY: control blocks are type-stable: allocated once and never
        // freed (see the module docs), so a `CbRef` never dangles.
        unsafe { self.0.as_ref() }
    }

    /// The raw pointer (for identity and logs).
    pub fn as_ptr(&self) -> *const () {
        self.0.as_ptr().cast()
    }

    /// The intrusive link. Only the owner of the list that holds this
    /// thread may read or write it.
    #[inline(always)]
    pub fn next(&self) -> Option<CbRef> {
        self.cb().next.get()
    }

    /// Sets the intrusive link (see [`CbRef::next`]).
    #[inline(always)]
    pub fn set_next(&self, next: Option<CbRef>) {
        self.cb().next.set(next)
    }

    /// The thread's id (unique within its runtime for its current life).
    #[inline]
    pub fn id(&self) -> u64 {
        self.cb().id.get()
    }

    /// The priority given at creation (default 0). Schedulers may use it.
    #[inline(always)]
    pub fn priority(&self) -> i64 {
        self.cb().priority.get()
    }

    /// The thread's name, if it was given one.
    pub fn name(&self) -> Option<&str> {
        // SAFETY: the name is written only while the cb is being created
        // (before any other party can see it) and cleared when it is freed.
        unsafe { (*self.cb().name.get()).as_deref() }
    }

    /// Whether the thread has been started (has a stack).
    #[inline(always)]
    pub(crate) fn is_started(&self) -> bool {
        // SAFETY: only the owner of the cb (the dispatching processor)
        // asks, with the cb out of every queue.
        unsafe { (*self.cb().stack.get()).is_some() }
    }

    /// Initializes a free cb for a new life: stores the closure inline (or
    /// boxed), its id, name and priority.
    ///
    /// # Safety
    /// The cb is free and owned by the caller.
    #[inline(always)]
    pub(crate) unsafe fn init<F: FnOnce() + Send + 'static>(
        self,
        f: F,
        id: u64,
        name: Option<Box<str>>,
        priority: i64,
        hooks: *const RuntimeHooks,
    ) {
        let cb = self.cb();
        cb.next.set(None);
        cb.state.reset();
        cb.id.set(id);
        cb.priority.set(priority);
        cb.hooks.set(hooks);
        if name.is_some() {
            // SAFETY: the cb is owned by the caller.
            unsafe { *cb.name.get() = name };
        }
        if size_of::<F>() <= INLINE_ARGS && align_of::<F>() <= align_of::<Args>() {
            // SAFETY: the inline buffer is large and aligned enough for F,
            // and is free (entry is None) per the contract.
            unsafe { cb.args.get().cast::<F>().write(f) };
            cb.entry.set(Some((call_inline::<F>, drop_inline::<F>)));
        } else {
            let boxed = Box::into_raw(Box::new(f));
            // SAFETY: a pointer always fits the buffer.
            unsafe { cb.args.get().cast::<*mut F>().write(boxed) };
            cb.entry.set(Some((call_boxed::<F>, drop_boxed::<F>)));
        }
    }

    /// Runs the stored closure once. Called on the thread's own stack.
    ///
    /// # Safety
    /// Called once per life, by the thread itself.
    pub(crate) unsafe fn run_entry(self) {
        let cb = self.cb();
        if let Some((call, _)) = cb.entry.take() {
            // SAFETY: `call` matches the closure type written by `init`,
            // and `take` makes this the only call.
            unsafe { call(cb.args.get().cast()) }
        }
    }

    /// Whether a closure is stored and not yet run.
    pub(crate) fn has_entry(self) -> bool {
        let e = self.cb().entry.take();
        let has = e.is_some();
        self.cb().entry.set(e);
        has
    }

    /// Drops a stored closure that was never run (a thread deleted before
    /// start, or abandoned at shutdown before start).
    ///
    /// # Safety
    /// The caller owns the cb and it is not running.
    pub(crate) unsafe fn drop_entry(self) {
        let cb = self.cb();
        if let Some((_, drop_fn)) = cb.entry.take() {
            // SAFETY: `drop_fn` matches the closure type written by
            // `init`; `take` makes this the only use of the closure.
            unsafe { drop_fn(cb.args.get().cast()) }
        }
    }

    /// Clears per-life state before the cb goes back to a free list.
    ///
    /// # Safety
    /// The caller owns the cb; its stack has been taken.
    #[inline(always)]
    pub(crate) unsafe fn reset(self) {
        let cb = self.cb();
        // SAFETY: owned by the caller.
        let name = unsafe { &mut *cb.name.get() };
        if name.is_some() {
            *name = None;
        }
        // `guard` and `yielder` are left as they are: both are read only
        // while the cb runs, and set again at its next start.
    }
}

unsafe fn call_inline<F: FnOnce()>(p: *mut u8) {
    // SAFETY: `init` wrote an F here and `run_entry` calls this once.
    let f = unsafe { p.cast::<F>().read() };
    f()
}

unsafe fn drop_inline<F>(p: *mut u8) {
    // SAFETY: `init` wrote an F here; it is dropped once, unrun.
    unsafe { p.cast::<F>().drop_in_place() }
}

unsafe fn drop_boxed<F>(p: *mut u8) {
    // SAFETY: `init` wrote a `Box<F>` pointer here; dropped once, unrun.
    drop(unsafe { Box::from_raw(p.cast::<*mut F>().read()) })
}

unsafe fn call_boxed<F: FnOnce()>(p: *mut u8) {
    // SAFETY: `init` wrote a `Box<F>` pointer here; called once.
    let f = unsafe { Box::from_raw(p.cast::<*mut F>().read()) };
    f()
}

/// An intrusive FIFO list of control blocks (head, tail, length). The
/// building block of the built-in ready pools and free lists.
#[derive(Debug, Default)]
pub struct CbList {
    head: Option<CbRef>,
    tail: Option<CbRef>,
    len: usize,
}

// SAFETY: the list only holds `CbRef`s (Send); it is moved between
// processors under locks.
unsafe impl Send for CbList {}

impl CbList {
    /// An empty list.
    pub const fn new() -> Self {
        CbList {
            head: None,
            tail: None,
            len: 0,
        }
    }

    /// Number of control blocks on the list.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the list is empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends at the tail.
    #[inline(always)]
    pub fn push_back(&mut self, t: CbRef) {
        t.set_next(None);
        match self.tail {
            Some(tail) => tail.set_next(Some(t)),
            None => self.head = Some(t),
        }
        self.tail = Some(t);
        self.len += 1;
    }

    /// Prepends at the head.
    #[inline(always)]
    pub fn push_front(&mut self, t: CbRef) {
        t.set_next(self.head);
        if self.head.is_none() {
            self.tail = Some(t);
        }
        self.head = Some(t);
        self.len += 1;
    }

    /// Removes the head.
    #[inline(always)]
    pub fn pop_front(&mut self) -> Option<CbRef> {
        let h = self.head?;
        self.head = h.next();
        if self.head.is_none() {
            self.tail = None;
        }
        self.len -= 1;
        Some(h)
    }

    /// Splits off the first `n` entries (all if fewer) as a new list.
    pub fn split_front(&mut self, n: usize) -> CbList {
        let mut out = CbList::new();
        for _ in 0..n {
            match self.pop_front() {
                Some(t) => out.push_back(t),
                None => break,
            }
        }
        out
    }

    /// Moves every entry of `other` to the tail of `self`.
    pub fn append(&mut self, other: &mut CbList) {
        if let Some(h) = other.head.take() {
            match self.tail {
                Some(t) => t.set_next(Some(h)),
                None => self.head = Some(h),
            }
            self.tail = other.tail.take();
            self.len += std::mem::take(&mut other.len);
        }
    }
}
