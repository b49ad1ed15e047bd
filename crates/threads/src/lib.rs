//! # symmetry-threads
//!
//! A user-level (M:N) threads runtime: P processors (worker OS threads,
//! optionally pinned) run many user threads, each with its own stack,
//! switching between them in user space (corosensei's context switch).
//!
//! It implements the thread package of Anderson, Lazowska and Levy (ALL89,
//! "The Performance Implications of Thread Management Alternatives for
//! Shared-Memory Multiprocessors") with the operations of its Table I —
//! create, start, block, signal, resume, finish, join — and all five of its
//! thread-management strategies, selectable as a type parameter:
//!
//! | name | type | ALL89 |
//! |---|---|---|
//! | `single-lock` | [`SingleLock`] | §III-A |
//! | `multi-lock` | [`MultiLock`] | §III-B |
//! | `local-freelist` | [`LocalFreelist`] | §III-C |
//! | `idle-queue` | [`IdleQueue`] | §III-D |
//! | `local-readyq` | [`LocalReadyq`] | §III-E |
//!
//! Arguments live in the control block (the closure is stored inline when
//! it fits [`INLINE_ARGS`] bytes), a stack is bound only when the thread
//! starts, and finished control blocks and stacks go to free lists. Stacks
//! are carved from large slabs, each with a guard region below it that
//! costs no kernel mapping (`MADV_GUARD_INSTALL`), so a million threads
//! can be alive at once; overflowing one is reported with the thread's
//! name (see [`stack`] docs) instead of a bare `SIGSEGV`.
//!
//! Every strategy takes its ready-pool discipline as a type parameter.
//! The default, [`NewestFirst`], starts the newest created thread first
//! (Go's `runnext`, tokio's LIFO slot, extended to every unstarted
//! thread), so a program that forks children and joins them runs
//! depth-first; ALL89's FIFO is [`Fifo`] (`LocalReadyq<Tas, Fifo>`), and
//! the papers' experiments use it.
//!
//! Presto's object model (Faust & Levy 1990) maps to traits chosen at
//! compile time: the scheduler object is a [`ReadyPool`] (a user can write
//! a LIFO or priority pool and plug it into any strategy), the processor
//! object is a [`Processor`] (hooks at start, dispatch, exit). Both are
//! monomorphized, so customization costs nothing at run time — the cost
//! Presto paid for its flexibility.
//!
//! ```
//! use symmetry_threads::{LocalReadyq, Runtime};
//!
//! let rt: Runtime<LocalReadyq> = Runtime::new(2).unwrap();
//! let h = rt.handle();
//! let sum = rt
//!     .block_on(move || {
//!         let kids: Vec<_> = (0..10u64).map(|i| h.spawn(move || i * i)).collect();
//!         kids.into_iter().map(|k| k.join().unwrap()).sum::<u64>()
//!     })
//!     .unwrap();
//! assert_eq!(sum, 285);
//! ```
//!
//! Blocking primitives for user threads are in [`sync`]: a relinquishing
//! mutex, a condition variable, a barrier; any `symmetry-locks` lock is the
//! non-relinquishing spin lock.
//!
//! ## Caveats
//!
//! * Switches are cooperative: a user thread that never blocks or yields
//!   keeps its processor.
//! * A user thread may resume on another OS thread after it blocks, so it
//!   must not hold references to OS-thread-local data (`thread_local!`
//!   values, `std::sync::MutexGuard`s) across a blocking call.
//!
//! ## Stability
//!
//! Under semver from 0.1 (before 1.0, a breaking change bumps the minor
//! version): [`Runtime`], [`Builder`], [`Handle`], [`JoinHandle`] and
//! [`JoinError`]; the five strategies and the [`ReadyPool`] and
//! [`Processor`] traits a user implements (with [`CbRef`]'s link accessors);
//! the blocking objects of [`sync`]; the free functions ([`yield_now`],
//! [`park`], [`current`]).
//!
//! Experimental, and free to change in any release: the [`Strategy`] trait's
//! methods (implementing a strategy of your own), [`Unstarted`] and
//! [`spawn_detached_here`] (PRESTO's separate create and start, used by the
//! harness), the counters of [`Stats`] and [`ShutdownReport`], and the
//! hidden `park_word` and `sleepers` modules.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[doc(hidden)]
pub mod park_word;
#[doc(hidden)]
pub mod sleepers;

#[cfg(not(loom))]
mod cb;
#[cfg(not(loom))]
mod fiber;
#[cfg(not(loom))]
mod join;
#[cfg(not(loom))]
mod runtime;
#[cfg(not(loom))]
pub mod stack;
#[cfg(not(loom))]
pub mod strategy;
#[cfg(not(loom))]
pub mod sync;

#[cfg(not(loom))]
pub use cb::{CbList, CbRef, INLINE_ARGS, Stack};
#[cfg(not(loom))]
pub use join::{JoinError, JoinHandle};
#[cfg(not(loom))]
pub use runtime::{
    Builder, DEFAULT_STACK_SIZE, DROP_GRACE, DefaultProcessor, Handle, Processor, Runtime,
    ShutdownReport, Stats, ThreadBuilder, Unstarted, spawn_detached_here,
};
#[cfg(not(loom))]
pub use stack::StackError;
#[cfg(not(loom))]
pub use strategy::{
    Fifo, IdleQueue, LocalFreelist, LocalReadyq, MultiLock, NewestFirst, ReadyPool, SingleLock,
    Strategy,
};

/// The crate README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[cfg(not(loom))]
/// A blocking operation was called where no user thread runs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NotInRuntime {
    /// The operation.
    pub op: &'static str,
}

#[cfg(not(loom))]
impl std::fmt::Display for NotInRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = std::thread::current();
        write!(
            f,
            "{} blocks a user thread, so it must be called from a thread spawned on a \
             symmetry-threads runtime; it was called from OS thread '{}'. Use \
             Runtime::block_on to enter the runtime.",
            self.op,
            t.name().unwrap_or("<unnamed>")
        )
    }
}

#[cfg(not(loom))]
impl std::error::Error for NotInRuntime {}

#[cfg(not(loom))]
/// A user thread, for waking it ([`Thread::unpark`]) or naming it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thread(CbRef);

#[cfg(not(loom))]
impl Thread {
    /// Makes a pending or future [`park`] of this thread return (Table I
    /// signal). Safe to call from any thread, any number of times.
    pub fn unpark(&self) {
        runtime::context::unpark(self.0)
    }

    /// The thread's id.
    pub fn id(&self) -> u64 {
        self.0.id()
    }

    /// The thread's name.
    pub fn name(&self) -> Option<&str> {
        self.0.name()
    }

    /// The control block.
    pub fn cb(&self) -> CbRef {
        self.0
    }
}

#[cfg(not(loom))]
/// The calling user thread, or `None` outside the runtime.
pub fn current() -> Option<Thread> {
    runtime::context::current_cb().map(Thread)
}

#[cfg(not(loom))]
/// Whether the caller runs as a user thread.
pub fn in_user_thread() -> bool {
    runtime::context::current_cb().is_some()
}

#[cfg(not(loom))]
/// Blocks the calling user thread until [`Thread::unpark`] (Table I block);
/// may return spuriously, so call it in a loop around a condition.
///
/// Errors if called outside a user thread.
pub fn try_park() -> Result<(), NotInRuntime> {
    match runtime::context::current_cb() {
        Some(cb) => {
            runtime::context::park_current(cb);
            Ok(())
        }
        None => Err(NotInRuntime { op: "park" }),
    }
}

#[cfg(not(loom))]
/// [`try_park`], panicking with a clear message outside a user thread.
pub fn park() {
    if let Err(e) = try_park() {
        panic!("{e}");
    }
}

#[cfg(not(loom))]
/// Puts the calling user thread back on the ready pool and runs another.
/// Outside a user thread it yields the OS thread instead.
pub fn yield_now() {
    match runtime::context::current_cb() {
        Some(cb) => runtime::context::suspend(cb, cb::Switch::Yield),
        None => std::thread::yield_now(),
    }
}

/// Calls `$m!` with every strategy as `"name" => Type,`, so a harness can
/// build a name table whose entries are monomorphized per strategy. `$m`
/// may be a path (`$crate::my_callback`); tokens after a comma are handed
/// to the callback first, in brackets (`$m! { [tokens] "name" => Type, ... }`),
/// so a callback can use its caller's arguments.
///
/// ```
/// macro_rules! names {
///     ($($name:literal => $t:ty,)*) => { [$($name),*] };
/// }
/// assert_eq!(symmetry_threads::for_each_strategy!(names)[0], "single-lock");
/// ```
#[macro_export]
macro_rules! for_each_strategy {
    (@emit [$($m:tt)*] [$($pre:tt)*]) => {
        $($m)*! {
            $($pre)*
            "single-lock" => $crate::SingleLock,
            "multi-lock" => $crate::MultiLock,
            "local-freelist" => $crate::LocalFreelist,
            "idle-queue" => $crate::IdleQueue,
            "local-readyq" => $crate::LocalReadyq,
        }
    };
    ($($m:tt)::+) => {
        $crate::for_each_strategy! { @emit [$($m)::+] [] }
    };
    ($($m:tt)::+, $($extra:tt)*) => {
        $crate::for_each_strategy! { @emit [$($m)::+] [[$($extra)*]] }
    };
}
