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
//! Failure: the locks record who holds them ([`super::lock`]; `pthread`'s
//! is a robust mutex), so a sender killed holding or waiting for a lock is
//! got past by the next waiter, and the critical section is written so
//! that every state a holder can die in is repaired by the next holder
//! (see `claim_locked`). A killed sender costs at most its own message.

use core::marker::PhantomData;

use super::lock::{AndersonPid, Holder, TasPid, TicketPid, TtasPid};
use super::{Claim, Claimed, Hint};
use crate::error::AmError;
use crate::layout::{CLAIMED, FREE, Queue, lap_of, word};
use crate::sync::{AtomicU64, Ordering};

/// A lock that can live in a shared segment, be initialized in place, and
/// be got past when a process dies holding or waiting for it.
///
/// # Safety
///
/// `lock`/`unlock` must provide mutual exclusion across processes mapping
/// the same memory, with Acquire semantics on `lock` and Release on
/// `unlock`, among the processes that are alive.
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
    /// Acquires the lock for `me`.
    fn lock(&self, me: Holder) -> Self::Guard;
    /// Releases the lock.
    ///
    /// # Safety
    ///
    /// `guard` comes from `lock` on this lock and is used once.
    unsafe fn unlock(&self, guard: Self::Guard);
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

/// The next claimable position of a ring of `len` slots whose words are
/// `words(i)`, under the queue's lock: the position, its slot and word,
/// after moving `tail` past positions taken for their lap (a holder that
/// died between claiming the slot and moving the tail); `None` while the
/// slot at the tail still holds an older lap (the ring is full).
#[inline(always)]
fn next_free<'q>(
    tail: &AtomicU64,
    len: usize,
    words: impl Fn(usize) -> &'q AtomicU64,
) -> Option<(u64, usize, u64)> {
    loop {
        // Relaxed: the tails are only touched under the lock.
        let pos = tail.load(Ordering::Relaxed);
        let (slot, lap) = ((pos % len as u64) as usize, (pos / len as u64) as u32);
        // Acquire: pairs with the receiver's Release store that freed the
        // slot, so its reads of the old contents happen before our writes.
        let w = words(slot).load(Ordering::Acquire);
        if w == word(lap, 0, FREE) {
            return Some((pos, slot, w));
        }
        if (lap.wrapping_sub(lap_of(w)) as i32) > 0 {
            return None;
        }
        tail.store(pos + 1, Ordering::Relaxed);
    }
}

/// Fig. 2's critical section, run under the queue's lock: claims the bulk
/// block at the bulk tail (if `bulk`) and the packet at the packet tail,
/// both or neither; `None` if the queue is full.
///
/// A previous holder killed inside this section may have marked a slot
/// CLAIMED without moving its tail: the slot then reads as taken for its
/// position's lap, and the tail is moved past it here (the receiver
/// recovers the dead holder's slot by its pid). So the state the section
/// protects is consistent at every instruction a holder can die at.
#[inline(always)]
fn claim_locked<L>(
    q: &Queue<'_, LockedTail<L>>,
    tail: &LockedTail<L>,
    pid: u32,
    bulk: bool,
) -> Option<Claimed> {
    let (pos, slot, w) = next_free(&tail.packets, q.packets.len(), |i| &q.packets[i].state)?;
    let mut got_bulk = None;
    if bulk {
        let (bpos, b, bw) = next_free(&tail.bulk, q.bulk.len(), |i| &*q.bulk[i])?;
        let bc = word(lap_of(bw), pid, CLAIMED);
        // Relaxed: the next claimer reads it under the lock (whose
        // Release/Acquire orders it); the receiver reads the block only
        // after our READY (Release).
        q.bulk[b].store(bc, Ordering::Relaxed);
        tail.bulk.store(bpos + 1, Ordering::Relaxed);
        got_bulk = Some((b, bc));
    }
    let c = word(lap_of(w), pid, CLAIMED);
    // Relaxed: as for the bulk block; the receiver waits for READY.
    q.packets[slot].state.store(c, Ordering::Relaxed);
    tail.packets.store(pos + 1, Ordering::Relaxed);
    Some(Claimed {
        slot,
        word: c,
        bulk: got_bulk,
    })
}

/// `tas`.
pub type TasClaim = Locked<TasPid>;
/// `ttas`.
pub type TtasClaim = Locked<TtasPid>;
/// `ticket`.
pub type TicketClaim = Locked<TicketPid>;
/// `anderson`.
pub type AndersonClaim = Locked<AndersonPid>;

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

    fn debug_hold_lock(q: &Queue<'_, Self::Tail>, me: Holder) -> bool {
        core::mem::forget(q.tail.lock.lock(me));
        true
    }

    #[inline]
    fn claim<W>(
        q: &Queue<'_, Self::Tail>,
        me: Holder,
        _hint: &mut Hint,
        bulk: bool,
        wait: &mut W,
    ) -> Result<Claimed, AmError>
    where
        W: FnMut() -> Result<(), AmError>,
    {
        let tail = q.tail;
        loop {
            let guard = tail.lock.lock(me);
            let got = claim_locked(q, tail, me.pid, bulk);
            // SAFETY: `guard` is this lock's, used once.
            unsafe { tail.lock.unlock(guard) };
            match got {
                Some(c) => return Ok(c),
                None => wait()?,
            }
        }
    }
}
