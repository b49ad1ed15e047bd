//! LC98 Fig. 2: the generic mutual-exclusion claim, one algorithm for the
//! five locking variants (`tas`, `ttas`, `ticket`, `anderson`, `pthread`),
//! the lock being a type parameter.
//!
//! Under the queue's lock, CLAIMPACKET looks at the packet at the tail: if
//! it is FREE it is claimed and the tail advances; otherwise (the queue is
//! full) the lock is released and the sender backs off and polls. A bulk
//! claim checks the bulk block at the bulk tail and the packet at the
//! packet tail inside one critical section and takes both or neither.
//!
//! State: [`LockedTail`]: the lock and two tail counters (positions; slot =
//! position mod ring length), read and written only under the lock, so
//! Relaxed accesses suffice (the lock's Acquire/Release orders them).
//! Invariant: the packet at `packets % len` is the next one to hand out, and
//! every position below `packets` has been handed out exactly once.
//!
//! Failure: a sender killed while holding a spin lock (`tas`, `ttas`,
//! `ticket`, `anderson`) wedges the other senders of that queue, which spin
//! on the lock without polling; a spin lock records no owner to check.
//! Only `pthread`'s robust mutex is reclaimed (LC98 notes the same of
//! Solaris mutexes). The window is the few instructions of Fig. 2's
//! critical section.

use core::marker::PhantomData;

use lock_api::RawMutex;

use super::{Claim, Claimed};
use crate::error::AmError;
use crate::layout::{CLAIMED, FREE, Queue, lap_of, state_of, word};
use crate::sync::{AtomicU64, Ordering};

/// A lock that can live in a shared segment and be initialized in place.
///
/// # Safety
///
/// `lock`/`unlock` must provide mutual exclusion across processes mapping
/// the same memory, with Acquire semantics on `lock` and Release on
/// `unlock`.
pub unsafe trait ShmLock: Send + Sync + core::fmt::Debug + 'static {
    /// Registry name of the claim algorithm built on it.
    const NAME: &'static str;
    /// What `lock` hands to `unlock`.
    type Guard;
    /// Initializes a lock in place.
    ///
    /// # Safety
    ///
    /// `at` is valid for writes, aligned, and unused by anyone else.
    unsafe fn init(at: *mut Self);
    /// Acquires the lock.
    fn lock(&self) -> Self::Guard;
    /// Releases the lock.
    ///
    /// # Safety
    ///
    /// `guard` comes from `lock` on this lock and is used once.
    unsafe fn unlock(&self, guard: Self::Guard);
}

macro_rules! shm_raw_mutex {
    ($($ty:ty => $name:literal;)*) => {$(
        // SAFETY: these symmetry-locks algorithms are `#[repr(C)]` and
        // pointer-free (their docs), so they exclude across processes too.
        unsafe impl ShmLock for $ty {
            const NAME: &'static str = $name;
            type Guard = <$ty as RawMutex>::Guard;
            unsafe fn init(at: *mut Self) {
                // SAFETY: the caller's contract.
                unsafe { at.write(<$ty as RawMutex>::INIT) }
            }
            #[inline(always)]
            fn lock(&self) -> Self::Guard {
                RawMutex::lock(self)
            }
            #[inline(always)]
            unsafe fn unlock(&self, guard: Self::Guard) {
                // SAFETY: forwarded caller's contract.
                unsafe { RawMutex::unlock(self, guard) }
            }
        }
    )*};
}

/// Anderson's array lock with one flag per possible waiter: at most
/// [`crate::MAX_RANKS`] endpoints send to one queue.
pub type AndersonShm = symmetry_locks::Anderson<{ crate::MAX_RANKS }>;

shm_raw_mutex! {
    symmetry_locks::Tas => "tas";
    symmetry_locks::Ttas => "ttas";
    symmetry_locks::Ticket => "ticket";
    AndersonShm => "anderson";
}

/// Sender state of a queue under a lock.
#[repr(C)]
#[derive(Debug)]
pub struct LockedTail<L> {
    /// The queue's lock.
    lock: L,
    /// Next packet position to hand out (under `lock`).
    packets: AtomicU64,
    /// Next bulk position to hand out (under `lock`).
    bulk: AtomicU64,
}

/// LC98 Fig. 2 under lock `L`.
#[derive(Debug)]
pub struct Locked<L>(PhantomData<fn() -> L>);

/// `tas`.
pub type TasClaim = Locked<symmetry_locks::Tas>;
/// `ttas`.
pub type TtasClaim = Locked<symmetry_locks::Ttas>;
/// `ticket`.
pub type TicketClaim = Locked<symmetry_locks::Ticket>;
/// `anderson`.
pub type AndersonClaim = Locked<AndersonShm>;

impl<L: ShmLock> Claim for Locked<L> {
    const NAME: &'static str = L::NAME;
    type Tail = LockedTail<L>;

    unsafe fn init(tail: *mut Self::Tail) {
        // SAFETY: the caller's contract; the fields are in bounds of `tail`.
        unsafe {
            L::init(&raw mut (*tail).lock);
            (&raw mut (*tail).packets).write(AtomicU64::new(0));
            (&raw mut (*tail).bulk).write(AtomicU64::new(0));
        }
    }

    #[inline]
    fn claim<W>(
        q: &Queue<'_, Self::Tail>,
        pid: u32,
        bulk: bool,
        wait: &mut W,
    ) -> Result<Claimed, AmError>
    where
        W: FnMut() -> Result<(), AmError>,
    {
        let tail = q.tail;
        loop {
            let guard = tail.lock.lock();
            // Relaxed: `packets`/`bulk` are only touched under the lock.
            let pos = tail.packets.load(Ordering::Relaxed);
            let slot = (pos % q.packets.len() as u64) as usize;
            let packet = &q.packets[slot];
            // Acquire: pairs with the receiver's Release store that freed
            // the packet, so its reads of the old body happen before our
            // writes of the new one.
            let w = packet.state.load(Ordering::Acquire);
            let mut got = None;
            if state_of(w) == FREE {
                if bulk {
                    let bpos = tail.bulk.load(Ordering::Relaxed);
                    let b = (bpos % q.bulk.len() as u64) as usize;
                    // Acquire: as for the packet.
                    let bw = q.bulk[b].load(Ordering::Acquire);
                    if state_of(bw) == FREE {
                        let bc = word(lap_of(bw), pid, CLAIMED);
                        // Relaxed: only we write a CLAIMED block; the
                        // receiver reads it after our READY (Release).
                        q.bulk[b].store(bc, Ordering::Relaxed);
                        tail.bulk.store(bpos + 1, Ordering::Relaxed);
                        got = Some(Some((b, bc)));
                    }
                } else {
                    got = Some(None);
                }
            }
            if let Some(bulk) = got {
                let c = word(lap_of(w), pid, CLAIMED);
                // Relaxed: the next claimer reads it under the lock (whose
                // Release/Acquire orders it); the receiver waits for READY.
                packet.state.store(c, Ordering::Relaxed);
                tail.packets.store(pos + 1, Ordering::Relaxed);
                // SAFETY: `guard` is this lock's, used once.
                unsafe { tail.lock.unlock(guard) };
                return Ok(Claimed {
                    slot,
                    word: c,
                    bulk,
                });
            }
            // SAFETY: `guard` is this lock's, used once.
            unsafe { tail.lock.unlock(guard) };
            wait()?;
        }
    }
}
