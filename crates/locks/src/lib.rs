//! # symmetry-locks
//!
//! The mutual-exclusion algorithms of the classic shared-memory
//! multiprocessor papers, each usable as a [`lock_api::RawMutex`] so that
//! `lock_api::Mutex<symmetry_locks::Mcs, T>` (or the alias
//! [`McsMutex<T>`](McsMutex)) works wherever a mutex does.
//!
//! | registry name | type | source | order |
//! |---|---|---|---|
//! | `tas` | [`Tas`] | ALL89 §IV-B "spin on xchgb" | none |
//! | `ttas` | [`Ttas`] | ALL89 §IV-C "spin on read" | none |
//! | `backoff` | [`Backoff`] | ALL89 §IV-D Ethernet-style backoff | none |
//! | `backoff-persistent` | [`BackoffPersistent`] | ALL89 §IV-D "persistence" | none |
//! | `ticket` | [`Ticket`] | LC98 §3.1, Mellor-Crummey & Scott | FIFO |
//! | `ticket-proportional` | [`TicketProportional`] | ticket with proportional backoff | FIFO |
//! | `anderson` | [`Anderson`] | ALL89 Table IV array queue lock | FIFO |
//! | `graunke-thakkar` | [`GraunkeThakkar`] | PRESTO §3.1 HP_Spinlock | FIFO |
//! | `mcs` | [`Mcs`] | Mellor-Crummey & Scott list lock | FIFO |
//! | `clh` | [`Clh`] | Craig, Landin & Hagersten list lock | FIFO |
//! | `tas-np` | [`TasNp`] | SMARTQ §4.1 TAS-no preempt | none |
//! | `mcs-np` | [`McsNp`] | SMARTQ §4.1 Queued-no preempt | FIFO among running waiters |
//! | `handshake` | [`Handshake`] | SMARTQ Figs. 1-2 Queued-Handshaking | FIFO among running waiters |
//! | `smart-q` | [`SmartQ`] | SMARTQ Fig. 3 Smart-Q | FIFO among running waiters |
//! | `native-np` | [`NativeNp`] | SMARTQ §4.1 Native-no preempt (pthread) | none |
//! | `mcs-tp` | [`McsTp`] | He, Scherer & Scott 2005, time-published MCS | FIFO among running waiters |
//! | `std` | [`StdMutex`] | `std::sync::Mutex<()>` baseline | none |
//! | `parking_lot` | [`ParkingLot`] | `parking_lot::RawMutex` baseline | none |
//! | `pthread` | [`Pthread`] | `pthread_mutex_t`, default kind | none |
//! | `pthread-adaptive` | [`PthreadAdaptive`] | `PTHREAD_MUTEX_ADAPTIVE_NP` | none |
//!
//! The FIFO locks (ticket, Anderson, Graunke-Thakkar, MCS, CLH) also
//! implement `lock_api::RawMutexFair`: their ordinary unlock already hands
//! the lock to the next waiter. None implements `RawMutexTimed`: a queued
//! waiter of these algorithms cannot leave the queue (abortable queue locks
//! are a different algorithm).
//!
//! Every lock, including the baselines, goes through the same
//! `lock_api::RawMutex` interface, so a comparison between them pays the same
//! interface cost. [`for_each_lock!`] names every lock exactly once; tests
//! and the `symmetry` harness instantiate themselves for each entry.
//!
//! ## Spin-then-block
//!
//! [`spin_then_block`] holds KLMO91's blocking lock
//! [`SpinThenBlock<P, B>`](spin_then_block::SpinThenBlock), generic over
//! a spin policy `P` (the eight policies of KLMO91, listed by
//! [`for_each_spin_policy!`]) and a blocker `B` (futex for OS threads; the
//! user-thread blocker lives in `symmetry-threads`), with C measured by
//! [`spin_then_block::calibration`] and every contended wait recorded by
//! the [`spin_then_block::profiler`].
//!
//! ## Preemption-safe locks (SMARTQ)
//!
//! [`sched`] holds SMARTQ's scheduler interface: the per-thread context
//! block ([`sched::ContextBlock`]) and the [`sched::Scheduler`] trait, with
//! three implementations: [`sched::Stock`] (no kernel help),
//! `sched::emulated::Emulated` (SMARTQ §4.1's signal-driven user-level
//! scheduler, which multiprograms worker threads) and
//! `sched::rseq::RseqSlice` (the Linux 7.0 rseq time-slice extension,
//! detected at run time). `tas-np`, `mcs-np`, `handshake`, `smart-q` and
//! `native-np` take the scheduler as a type parameter (default `Stock`);
//! their guards are not `Send`, because the release updates the acquiring
//! thread's context block. `mcs-tp` needs no scheduler. The registry lists
//! the `Stock` instances; [`for_each_preempt_lock!`] lists SMARTQ's eight
//! locks plus `mcs-tp` and `parking_lot` over any scheduler. The harness's
//! experiments over the classic family leave these out unless named.
//!
//! What each lock does on each scheduler, with more runnable threads than
//! cores (issue 43; `tests/oversubscribed.rs` holds every entry but the
//! marked ones to 5x `tas`, 8 threads on 2 cores, with and without CPU
//! hogs):
//!
//! | lock | `Stock`, `RseqSlice` without the extension, `Emulated` with no emulation running | `RseqSlice` with the extension | `Emulated`, emulation running |
//! |---|---|---|---|
//! | `tas-np` | TTAS; waiters spin ~1 us, then yield at every poll | same, holder not preempted | same, holder protected by the emulation (Symunix request) |
//! | `mcs-np` | MCS skipping waiters with a stale heartbeat (time publishing) | same, holder not preempted | hands over to waiters the emulation descheduled: SMARTQ's collapse (not held to the ratio); skips those the kernel descheduled |
//! | `handshake` | Figs. 1-2: a silent successor is rescinded after [`handshake::TIMEOUT_NS`] (2 µs); waiters spin, then yield | same | same, plus the warning flag |
//! | `smart-q` | Fig. 3 claim plus heartbeats: waiters with a stale stamp are skipped | same, holder not preempted | Fig. 3: skips `Preempted` waiters and stale heartbeats |
//! | `native-np` | the pthread mutex (futex) | same, holder not preempted | same, holder protected |
//! | `mcs-tp` | time publishing, no scheduler | same | same |
//! | `mcs` (not of the family) | the paper's MCS: convoys (SMARTQ's "Queued", measured by `pq-oversubscribed`); [`McsYield`] spins then yields, still FIFO | same | same |
//!
//! How a waiter waits is a policy ([`backoff::Wait`]): [`Spin`] (the
//! papers') or [`SpinThenYield`]; `Mcs<W>` takes it as a type parameter.
//!
//! ## Queue locks behind `RawMutex`
//!
//! The list-based locks (MCS, CLH, Graunke-Thakkar) need a queue node per
//! acquisition. lock_api 0.5 hands per-acquisition state back to `unlock`
//! (`RawMutex::Guard`), so the node travels in the guard, and nodes come from
//! a per-thread free list (as Linux qspinlock draws them from per-CPU
//! arrays). Any number of queue locks may be held at once and released in
//! any order (hold A, hold B, release A, release B).
//!
//! ## Which `lock_api`
//!
//! These locks implement **lock_api 0.5**, whose `RawMutex::Guard` carries
//! the queue node of an acquisition back to `unlock`. A crate that depends
//! on lock_api 0.4 (as parking_lot 0.12 does) sees different traits, and
//! `lock_api::Mutex<Mcs, T>` from 0.4 fails with E0599 (`lock`, `new` not
//! found). Depend on `lock_api = "0.5"`, or use the re-export
//! `symmetry_locks::lock_api` (`symmetry_locks::lock_api::Mutex<Mcs, T>`),
//! or the aliases such as [`McsMutex<T>`](McsMutex), which always match.
//!
//! ## Shared memory
//!
//! The pointer-free locks ([`Tas`], [`Ttas`], [`Backoff`],
//! [`BackoffPersistent`], [`Ticket`], [`Anderson`]) are `#[repr(C)]`, hold
//! no pointers and no per-process state, and so are valid inside a
//! shared-memory segment mapped by several processes.
//!
//! ## Stability
//!
//! Under semver from 0.1 (before 1.0, a breaking change bumps the minor
//! version): the lock types, their `lock_api` impls and the `*Mutex<T>`
//! aliases; the waiting policies ([`Wait`], [`Spin`], [`SpinThenYield`]);
//! [`SpinThenBlock`](spin_then_block::SpinThenBlock) with its
//! [`SpinPolicy`](spin_then_block::SpinPolicy) and
//! [`Blocker`](spin_then_block::Blocker) traits and policies; the profiler's
//! entry points ([`snapshot`](spin_then_block::profiler::snapshot),
//! [`write`](fn@spin_then_block::profiler::write),
//! [`dump_at_exit`](spin_then_block::profiler::dump_at_exit),
//! [`Profile::read`](spin_then_block::profiler::Profile::read));
//! [`AtomicInt`]; the scheduler interface ([`sched::Scheduler`],
//! [`sched::ContextBlock`], [`sched::Stock`]).
//!
//! Experimental, and free to change in any release:
//!
//! * [`platform`]: the workspace's shared platform primitives (futex,
//!   affinity, `/proc`, SplitMix64), public only so every symmetry crate
//!   uses one copy;
//! * the harness-facing parts: [`registry`] and the `for_each_*!` macros
//!   (entries are added as algorithms are), [`sync`] (the loom shim),
//!   [`clock`], [`list_queue`];
//! * the profiler's recording internals and file format details
//!   ([`spin_then_block::profiler`]: shards, entries, the CSV's columns; the
//!   file carries its version), and [`spin_then_block::calibration`];
//! * [`sched::emulated`] (SMARTQ's user-level scheduler emulation, a
//!   measurement tool) and [`sched::rseq`] (it follows a Linux 7.0 ABI).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod sync;

pub mod anderson;
pub mod atomic_int;
pub mod backoff;
pub mod baselines;
pub mod clh;
pub mod clock;
pub mod graunke_thakkar;
pub mod handshake;
pub mod list_queue;
pub mod mcs;
pub mod mcs_tp;
pub mod no_preempt;
mod node_pool;
pub mod platform;
pub mod registry;
pub mod sched;
pub mod smart_q;
pub mod spin_then_block;
pub mod tas;
pub mod tas_np;
pub mod ticket;
pub mod ttas;

pub use anderson::Anderson;
pub use atomic_int::{AtomicInt, AtomicIntDyn, DynLock};
pub use backoff::{Backoff, BackoffLock, BackoffPersistent, ExpBackoff, Spin, SpinThenYield, Wait};
#[cfg(not(loom))]
pub use baselines::{ParkingLot, Pthread, PthreadAdaptive, StdMutex};
pub use clh::Clh;
pub use graunke_thakkar::GraunkeThakkar;
pub use handshake::Handshake;
pub use mcs::{Mcs, McsYield};
pub use mcs_tp::McsTp;
#[cfg(not(loom))]
pub use no_preempt::NativeNp;
pub use no_preempt::{McsNp, NoPreempt};
pub use node_pool::SignalsBlocked;
pub use registry::{GuardWord, LockInfo, LockKind};
pub use smart_q::SmartQ;
pub use tas::Tas;
pub use tas_np::TasNp;
pub use ticket::{Ticket, TicketLock, TicketProportional};
pub use ttas::Ttas;

pub use lock_api;

/// The crate README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// `lock_api::Mutex` over [`Tas`]: test-and-set, the simplest spin lock.
///
/// ```
/// use symmetry_locks::TasMutex;
///
/// let m = TasMutex::new(0u32);
/// *m.lock() += 1;
/// let held = m.lock();
/// assert!(m.try_lock().is_none()); // held: `try_lock` fails at once
/// drop(held);
/// assert_eq!(m.into_inner(), 1);
/// ```
pub type TasMutex<T> = lock_api::Mutex<Tas, T>;
/// `lock_api::Mutex` over [`Ttas`]: test-and-test-and-set, which spins on
/// a read of its word.
///
/// ```
/// use symmetry_locks::TtasMutex;
///
/// let m = TtasMutex::new(Vec::new());
/// std::thread::scope(|s| {
///     for i in 0..4 {
///         let m = &m;
///         s.spawn(move || m.lock().push(i));
///     }
/// });
/// assert_eq!(m.lock().len(), 4);
/// ```
pub type TtasMutex<T> = lock_api::Mutex<Ttas, T>;
/// `lock_api::Mutex` over [`Backoff`]: test-and-set with randomized
/// exponential backoff after each release it sees.
///
/// ```
/// use symmetry_locks::BackoffMutex;
///
/// // `new` is `const`: a lock in a static needs no lazy initialisation.
/// static HITS: BackoffMutex<u64> = BackoffMutex::new(0);
/// std::thread::scope(|s| {
///     for _ in 0..4 {
///         s.spawn(|| *HITS.lock() += 1);
///     }
/// });
/// assert_eq!(*HITS.lock(), 4);
/// ```
pub type BackoffMutex<T> = lock_api::Mutex<Backoff, T>;
/// `lock_api::Mutex` over [`BackoffPersistent`]: exponential backoff on
/// every busy read, not only after a release.
///
/// ```
/// use symmetry_locks::BackoffPersistentMutex;
///
/// let m = BackoffPersistentMutex::new(String::new());
/// m.lock().push_str("hello");
/// assert!(!m.is_locked());
/// assert_eq!(*m.lock(), "hello");
/// ```
pub type BackoffPersistentMutex<T> = lock_api::Mutex<BackoffPersistent, T>;
/// `lock_api::Mutex` over [`Ticket`]: a ticket lock, FIFO among its
/// waiters.
///
/// ```
/// use symmetry_locks::TicketMutex;
///
/// let m = TicketMutex::new(0u64);
/// std::thread::scope(|s| {
///     for _ in 0..4 {
///         s.spawn(|| (0..1000).for_each(|_| *m.lock() += 1));
///     }
/// });
/// assert_eq!(*m.lock(), 4000);
/// ```
pub type TicketMutex<T> = lock_api::Mutex<Ticket, T>;
/// `lock_api::Mutex` over [`TicketProportional`]: a ticket lock whose
/// waiters pause in proportion to their distance from the holder.
///
/// ```
/// use symmetry_locks::TicketProportionalMutex;
///
/// let m = TicketProportionalMutex::new([0u32; 4]);
/// std::thread::scope(|s| {
///     for i in 0..4 {
///         let m = &m;
///         s.spawn(move || m.lock()[i] += 1);
///     }
/// });
/// assert_eq!(*m.lock(), [1; 4]);
/// ```
pub type TicketProportionalMutex<T> = lock_api::Mutex<TicketProportional, T>;
/// `lock_api::Mutex` over [`Anderson`] (32 slots): an array queue lock,
/// each waiter spinning on its own slot.
///
/// ```
/// use symmetry_locks::{Anderson, AndersonMutex, lock_api::Mutex};
///
/// let m = AndersonMutex::new(0u64);
/// *m.lock() += 1;
/// assert_eq!(*m.lock(), 1);
/// // More slots for more contenders: `Anderson<P>` directly.
/// let wide: Mutex<Anderson<128>, u64> = Mutex::new(0);
/// *wide.lock() += 1;
/// ```
pub type AndersonMutex<T> = lock_api::Mutex<Anderson, T>;
/// `lock_api::Mutex` over [`GraunkeThakkar`]: a queue lock in which each
/// waiter spins on its predecessor's flag.
///
/// ```
/// use symmetry_locks::GraunkeThakkarMutex;
///
/// let m = GraunkeThakkarMutex::new(0u64);
/// std::thread::scope(|s| {
///     for _ in 0..4 {
///         s.spawn(|| (0..1000).for_each(|_| *m.lock() += 1));
///     }
/// });
/// assert_eq!(*m.lock(), 4000);
/// ```
pub type GraunkeThakkarMutex<T> = lock_api::Mutex<GraunkeThakkar, T>;
/// `lock_api::Mutex` over [`Mcs`]: a FIFO queue lock whose waiters each
/// spin on their own cache line.
///
/// ```
/// use std::sync::Arc;
/// use symmetry_locks::McsMutex;
///
/// let counter = Arc::new(McsMutex::new(0u64));
/// let workers: Vec<_> = (0..4)
///     .map(|_| {
///         let c = Arc::clone(&counter);
///         std::thread::spawn(move || {
///             for _ in 0..1000 {
///                 *c.lock() += 1;
///             }
///         })
///     })
///     .collect();
/// for w in workers {
///     w.join().unwrap();
/// }
/// assert_eq!(*counter.lock(), 4000);
/// // Any number of queue locks may be held at once, released in any order.
/// let other = McsMutex::new(());
/// let (a, b) = (counter.lock(), other.lock());
/// drop(a);
/// drop(b);
/// ```
pub type McsMutex<T> = lock_api::Mutex<Mcs, T>;
/// `lock_api::Mutex` over [`Clh`]: a FIFO queue lock whose waiters each
/// spin on their predecessor's node.
///
/// ```
/// use symmetry_locks::ClhMutex;
///
/// let (a, b) = (ClhMutex::new(1u32), ClhMutex::new(2u32));
/// // Queue locks may be held together and released in any order.
/// let (ga, gb) = (a.lock(), b.lock());
/// assert_eq!(*ga + *gb, 3);
/// drop(ga);
/// drop(gb);
/// ```
pub type ClhMutex<T> = lock_api::Mutex<Clh, T>;

/// Implements the `INIT` constant of `lock_api::RawMutex` from the type's
/// `new()` (or the constructor named). Under loom (whose atomics are not
/// `const`) the constant panics if evaluated; loom tests construct locks
/// with `new()`.
macro_rules! raw_init {
    () => {
        crate::raw_init!(new);
    };
    ($ctor:ident) => {
        #[cfg(not(loom))]
        #[allow(clippy::declare_interior_mutable_const)]
        const INIT: Self = Self::$ctor();
        #[cfg(loom)]
        #[allow(clippy::declare_interior_mutable_const)]
        const INIT: Self = panic!("under loom, construct locks with new()");
    };
}
pub(crate) use raw_init;

/// Implements `Default` and `lock_api::RawMutex`, and defines `new()`, for
/// a one-byte spin lock (`tas`, `ttas`, `backoff`): a `state: AtomicU8`
/// field, `0` free and `1` held, taken only by a `0 -> 1` exchange with
/// Acquire and released by a Release store of `0`. `lock` tries the
/// exchange once and otherwise runs the type's `lock_slow`, its own
/// protocol, which must return only after an Acquire exchange of its own
/// found `0`. `test_first` says whether `try_lock` reads the byte before
/// it exchanges.
macro_rules! byte_lock {
    ([$($generics:tt)*] $ty:ty, test_first: $test_first:expr) => {
        impl<$($generics)*> $ty {
            crate::sync::maybe_const_fn! {
                /// A free lock.
                pub fn new() -> Self {
                    Self { state: crate::sync::AtomicU8::new(0) }
                }
            }
        }

        impl<$($generics)*> Default for $ty {
            fn default() -> Self {
                Self::new()
            }
        }

        // SAFETY: the byte moves 0 -> 1 only by an Acquire exchange that
        // found 0 (here, or in `lock_slow`, whose contract that is) and back
        // only by `unlock`'s Release store of 0, so at most one context
        // holds the lock and each critical section happens-before the next.
        unsafe impl<$($generics)*> lock_api::RawMutex for $ty {
            crate::raw_init!();
            type Guard = lock_api::GuardSend;

            #[inline]
            fn lock(&self) -> Self::Guard {
                // Acquire: pairs with the Release store in `unlock`.
                if self.state.swap(1, crate::sync::Ordering::Acquire) != 0 {
                    self.lock_slow();
                }
                lock_api::GuardSend::new()
            }

            #[inline]
            fn try_lock(&self) -> Option<Self::Guard> {
                // Relaxed read first (`test_first`): a held lock costs no
                // ownership request.
                if $test_first && self.state.load(crate::sync::Ordering::Relaxed) != 0 {
                    return None;
                }
                // Acquire: pairs with the Release store in `unlock`.
                (self.state.swap(1, crate::sync::Ordering::Acquire) == 0)
                    .then(lock_api::GuardSend::new)
            }

            #[inline]
            unsafe fn unlock(&self, _guard: Self::Guard) {
                // Release: publishes the critical section to the next
                // holder's Acquire exchange.
                crate::sync::release_store(&self.state, 0);
            }

            #[inline]
            fn is_locked(&self) -> bool {
                self.state.load(crate::sync::Ordering::Relaxed) != 0
            }
        }
    };
}
pub(crate) use byte_lock;

/// Implements `lock_api::RawMutexFair` for a FIFO lock (the `impl`
/// generics in brackets, then the type) whose ordinary `unlock` already
/// hands the lock to the next waiter in order, so that a fair unlock is
/// the ordinary one.
macro_rules! fifo_fair {
    ([$($generics:tt)*] $ty:ty) => {
        // SAFETY: `unlock` already hands the lock to the next waiter in
        // FIFO order (the macro's contract), so a fair unlock is the
        // ordinary one.
        unsafe impl<$($generics)*> lock_api::RawMutexFair for $ty {
            #[inline]
            unsafe fn unlock_fair(&self, guard: Self::Guard) {
                // SAFETY: forwarded caller's contract.
                unsafe { lock_api::RawMutex::unlock(self, guard) }
            }
        }
    };
}
pub(crate) use fifo_fair;
