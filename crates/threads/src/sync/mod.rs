//! Blocking synchronization for user threads, after PRESTO's
//! synchronization objects (Bershad, Lazowska and Levy 1988, §3.2).
//!
//! | object | kind |
//! |---|---|
//! | [`Mutex`] | *relinquishing* lock: spins for a while ([`SpinPolicy`]), then blocks the user thread |
//! | [`Condvar`] | condition variable for [`Mutex`], Mesa semantics |
//! | [`Barrier`] | `n`-party barrier, reusable across generations |
//! | [`SpinMutex`] | *non-relinquishing* lock: any `symmetry-locks` spin lock, keeps the processor |
//! | [`UserBlocker`] | the blocker that makes `symmetry_locks`' KLMO91 spin-then-block locks block user threads ([`UserSpinThenBlock`]) |
//! | [`AtomicInt`] | PRESTO's `AtomicInt`: an integer updated under a spin lock |
//!
//! # Blocking
//!
//! Blocking objects keep their waiting user threads on intrusive FIFO
//! wait queues whose nodes live on the waiters' own stacks (no
//! allocation), guarded by a `symmetry_locks::Tas` spin lock held for a
//! few instructions, and block them with the runtime's park word, which
//! keeps a wake-up that arrives before the park. A blocked thread
//! gives its processor to the other user threads; waking it makes it
//! ready on its runtime.
//!
//! Blocking needs a user thread. Every blocking operation has a
//! `_checked` form that returns [`NotInRuntime`](crate::NotInRuntime)
//! where a thread that is not a user thread (the main thread, a processor
//! outside a user thread, any other OS thread) would have to block, and a
//! plain form that panics with that error's message; neither hangs.
//! Operations that do not block (taking a free mutex, unlocking,
//! notifying, the last arrival at a barrier) work from any thread.
//!
//! A thread still blocked on one of these objects when its runtime shuts
//! down is abandoned (see [`Runtime::shutdown`](crate::Runtime::shutdown)):
//! its wait-queue node stays on the object's list, but its stack and
//! control block are never freed and waking it does nothing, so using the
//! object after the shutdown is memory-safe (the abandoned thread simply
//! never runs).

mod barrier;
mod condvar;
mod mutex;
mod spin_mutex;
mod spin_policy;
mod user_blocker;
mod wait_queue;

pub use barrier::{Barrier, BarrierWaitResult};
pub use condvar::Condvar;
pub use mutex::{Mutex, MutexGuard};
pub use spin_mutex::{SpinMutex, SpinMutexGuard};
pub use spin_policy::{DEFAULT_SPINS, FixedSpin, NoSpin, SpinPolicy};
pub use user_blocker::{UserBlocker, UserQueue, UserSpinThenBlock};

/// PRESTO's `AtomicInt` (re-exported from `symmetry-locks`): an integer
/// whose every operation runs under a spin lock `R`, inlined; see
/// `symmetry_locks::AtomicIntDyn` for the virtual-call form PRESTO also
/// measured.
pub use symmetry_locks::AtomicInt;
