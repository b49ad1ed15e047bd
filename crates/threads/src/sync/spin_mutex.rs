//! The non-relinquishing lock: any spin lock of `symmetry-locks` behind
//! `lock_api`.

/// A *non-relinquishing* mutex (PRESTO's spin lock): a thread that finds it
/// held spins, keeping its processor, until the holder releases it. It
/// never blocks a user thread, so it works from any thread, inside the
/// runtime or not.
///
/// `L` is any lock of `symmetry-locks` (TAS by default; `Ttas`, `Backoff`,
/// `Ticket`, `Anderson`, `Mcs`, `Clh`, ...); this is just
/// `lock_api::Mutex<L, T>`, with its whole API.
///
/// Hold it only for short critical sections, and never across a blocking
/// call or [`yield_now`](crate::yield_now): switches are cooperative, so
/// a user thread that waits for a holder that has been switched out (or
/// waits on the same processor) spins until the holder's processor runs
/// it again, or forever with one processor. Use the relinquishing
/// [`Mutex`](super::Mutex) for critical sections that block.
///
/// ```
/// use symmetry_locks::Mcs;
/// use symmetry_threads::sync::SpinMutex;
///
/// let tas: SpinMutex<u32> = SpinMutex::new(1);
/// let mcs: SpinMutex<u32, Mcs> = SpinMutex::new(2);
/// assert_eq!(*tas.lock() + *mcs.lock(), 3);
/// ```
pub type SpinMutex<T, L = symmetry_locks::Tas> = lock_api::Mutex<L, T>;

/// The guard of a [`SpinMutex`].
pub type SpinMutexGuard<'a, T, L = symmetry_locks::Tas> = lock_api::MutexGuard<'a, L, T>;
