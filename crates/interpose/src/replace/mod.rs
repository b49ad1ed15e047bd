//! Replace mode: `SYMMETRY_LOCK=NAME` runs every normal pthread mutex of
//! the program on lock algorithm `NAME` from the registry.
//!
//! # Mutexes
//!
//! A mutex's identity is its memory, not its address. A replaced mutex
//! carries a mark of this library's own in its `pthread_mutex_t` bytes:
//! glibc's `__list` pair (bytes 24..40 on x86-64 and aarch64), which
//! glibc uses only for robust mutexes (never replaced) and which every
//! way of making a mutex clears: `pthread_mutex_init` (it zeroes the whole
//! object), assignment of any static initializer (`PTHREAD_MUTEX_INITIALIZER`,
//! `PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP`, ...: zeros there), and zeroed
//! memory. The first word is `MARK ^ address` (so a copy of a mutex's
//! bytes elsewhere is not taken for the original), the second points at
//! the mutex's `Replaced`: the algorithm's lock, the token its `lock`
//! returned (kept by the holder until `unlock`), the polite waiters' futex
//! and a real glibc mutex used only around condition waits. The fast path
//! of every call is two loads from the mutex itself.
//!
//! A mutex without the mark is new memory. Its kind is read from the
//! memory (glibc's `__kind`, which every initializer writes): a normal,
//! process-private, non-robust mutex without priority protocol is
//! replaced; anything else (recursive, error-checking, adaptive, robust,
//! process-shared, priority-inheritance or -protection, or destroyed)
//! goes to glibc, with glibc's semantics, and stderr says so once per
//! reason (the fail-safe rule: what replace mode cannot serve is glibc's).
//! Marking is serialized per mutex by a CAS of the mark word to a busy
//! value, so two threads that meet a new mutex agree on its lock.
//!
//! A fixed open-address table ([`SLOTS`] entries, keys never removed)
//! maps each address to the last `Replaced` made there, and a new mutex at
//! that address reuses it if its lock is free, so a program that makes
//! and drops mutexes at the same few addresses (C++ objects, heap chunks)
//! does not grow. A lock still held (its mutex's memory re-made while
//! locked) is not reused: the new mutex gets a fresh one. When the table
//! is full a new mutex gets a fresh lock that is never reused (memory
//! grows; nothing stops). `pthread_mutex_destroy` clears the mark (glibc
//! also sets `__kind` to -1: a destroyed mutex used again goes to glibc,
//! which refuses it, as without the library), and answers `EBUSY` for a
//! held mutex, as glibc does.
//!
//! # Waiting
//!
//! A FIFO spin lock (`ticket`, `anderson`, `mcs`, `clh`,
//! `graunke-thakkar`, and the registry's other `fifo = true` locks) hands
//! the lock to the next waiter in line, running or not; with more
//! runnable threads than cores that waiter is often descheduled, and the
//! whole queue spins until the scheduler runs it (SMARTQ's convoy): a
//! program can slow down by orders of magnitude. So by default replace
//! mode runs those locks with [`Waiting::Polite`]: acquisitions go
//! through the algorithm's `try_lock`, polled for about C spins and then
//! asleep on a futex beside the lock, woken by an unlock that sees a
//! sleeper. Exclusion is still the algorithm's; FIFO order is given up
//! (a waiter cannot keep a queue position without the algorithm's own
//! `lock`, and a position held by a descheduled waiter is the convoy).
//! `SYMMETRY_LOCK_WAIT=pure` (`symmetry profile --pure`) runs the
//! algorithm's own `lock`, as the paper measured it; `polite` applies the
//! policy to any lock. Non-FIFO locks default to `pure`: their waiters
//! hold no position, so a descheduled one holds nobody up.
//!
//! Better placed in `symmetry-locks`: a waiting hook in each queue lock
//! (as `ticket`'s `TicketWait` already is), so a waiter could sleep while
//! keeping its queue position and the policy could keep FIFO order where
//! a program wants it at the price of the convoy.
//!
//! # Condition variables
//!
//! glibc's `pthread_cond_wait` needs a glibc mutex, so a wait on a
//! replaced mutex `m` goes: lock `m`'s inner glibc mutex, record `m` as
//! the condition's mutex, release `m`'s algorithm lock, wait on the
//! condition with the inner mutex, release the inner mutex, take the
//! algorithm lock again. `pthread_cond_signal`/`_broadcast` take the
//! inner mutex of the condition's recorded mutex around the real call. A
//! signaller that changed the predicate held `m`, which the waiter only
//! released after taking the inner mutex; so the signal's inner lock
//! waits until the waiter is inside `pthread_cond_wait`, and no wake-up is
//! lost. Timed waits (`_timedwait`, `_clockwait`) are the same with the
//! real timed call; `pthread_mutex_timedlock` and `_clocklock` poll
//! `try_lock` and, politely, sleep on the lock's futex with the caller's
//! deadline (`FUTEX_WAIT_BITSET` on its clock), so a wake-up or the
//! deadline ends the wait. The condition table maps at most [`SLOTS`]
//! conditions; a wait on one more uses one inner mutex shared by all such
//! conditions (their signals take it too), slower but still without a
//! lost wake-up.
//!
//! # Signal handlers
//!
//! POSIX does not promise that `pthread_mutex_lock` is async-signal-safe,
//! but programs take mutexes in handlers, and glibc's mutex survives it as
//! long as the interrupted thread does not hold the handler's mutex: its
//! whole state is the lock word. The registry's algorithms keep that
//! property except `parking_lot`, whose waiters queue in process-wide
//! hash buckets behind internal locks: a handler whose mutex is contended
//! while its thread was interrupted inside a bucket's lock (the same
//! bucket, by hash) waits for itself forever. Do not run a program whose
//! signal handlers take mutexes on `parking_lot`; the tests run such a
//! program on every other algorithm.
//!
//! A thread marks a new mutex with every signal blocked, so a handler
//! cannot find its own thread's half-made mark and wait for it.
//!
//! Nothing on a lock path waits for a one-time initialisation (a
//! `OnceLock`, a `Once`) that the interrupted thread may be running: the
//! locks read `clock_gettime` directly ([`symmetry_locks::clock`]), and the
//! constants that are decided lazily (the profile clock's source and
//! rate, spin-then-block's calibration) never make a handler wait for
//! its own thread's decision. `mcs-tp` once hung here: its clock's epoch
//! was a `OnceLock`, and a handler that took a mutex while its thread was
//! setting the epoch waited for itself.
//!
//! The queue locks (`mcs`, `clh`, `graunke-thakkar` and those built on
//! them) take queue nodes from a per-thread pool, which a handler may
//! interrupt. The pool is safe there (`symmetry-locks`' `node_pool` docs):
//! a handler leaves a busy stack alone, the pool's cold path (the shared
//! slab's mutex) runs with every signal blocked, and nodes live in memory
//! the pool maps itself, so no handler calls `malloc` (which would
//! deadlock when its thread was interrupted inside `malloc`). `clh` once
//! hung here: a handler interrupted a new thread while it drew its first
//! node from the shared list's mutex, and needed one itself.
//!
//! # Files
//!
//! One role per file: `algo.rs` the registry's locks, type-erased;
//! `mode.rs` the algorithm and waiting policy the environment chose;
//! `table.rs` the address tables; `replaced.rs` a replaced mutex's lock
//! object; `kind.rs` what glibc's memory says a mutex is (and what is left
//! to glibc, said once); `mark.rs` the mark that makes a mutex ours;
//! `wait.rs` how a lock is taken and released (pure, polite, timed);
//! `mutex.rs` and `cond.rs` the entry points `lib.rs` calls.

mod algo;
mod cond;
mod kind;
mod mark;
mod mode;
mod mutex;
mod replaced;
mod table;
mod wait;

pub use algo::{Algo, algorithm, algorithms};
pub(crate) use cond::{cond_signal, cond_wait};
pub(crate) use kind::{PSHARED_BIT, glibc_kind};
pub use mode::{WAIT_ENV, Waiting, waiting};
pub(crate) use mode::{mode, profiling_decided};
pub(crate) use mutex::{destroy, lock, timed_lock, try_lock, unlock};
pub use table::SLOTS;
