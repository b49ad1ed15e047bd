//! `lock-free`: LC98 §3.2, Fig. 3.
//!
//! CLAIMPACKET in two steps. *Assignment*: CAS the queue tail from `index`
//! to `index + 1` (retrying on failure), which gives the sender a packet
//! index. *Claim*: CAS that packet's type from FREE to CLAIMED; while it
//! fails (the queue is full and the receiver has not freed the packet, or
//! a sender assigned the same index one lap earlier or later won it), back
//! off and poll. The window of vulnerability to contention is the time
//! between the tail load and its CAS, not a whole critical section.
//!
//! A bulk claim runs the same two steps on the bulk ring first, then on
//! the packet ring (four CAS when uncontended), so that a sender never
//! holds the head packet while waiting for a bulk block (LC98 §3.2).
//!
//! State: [`LockFreeTail`]: two position counters (the paper's `tail`
//! index mod ring length, kept as a running count so that the receiver can
//! tell assigned positions from unassigned ones). Invariant: every position
//! below `packets` has been assigned to exactly one sender; several
//! assigned senders may compete for one packet, and the CAS on its type
//! lets exactly one of them have it per lap.
//!
//! The tail increment is a CAS loop as in the paper (FETCH&ADD would never
//! fail on x86, but it is not LC98's algorithm).

use crossbeam_utils::CachePadded;

use super::{Claim, Claimed, Hint, Holder};
use crate::error::AmError;
use crate::layout::{CLAIMED, FREE, Queue, lap_of, state_of, word};
use crate::sync::{AtomicU64, Ordering};

/// Sender state of a queue for [`LockFree`].
#[repr(C)]
#[derive(Debug)]
pub struct LockFreeTail {
    /// Next packet position to assign.
    packets: CachePadded<AtomicU64>,
    /// Next bulk position to assign.
    bulk: CachePadded<AtomicU64>,
}

impl LockFreeTail {
    /// A fresh tail (loom tests build queues on the heap).
    pub fn new() -> Self {
        Self {
            packets: CachePadded::new(AtomicU64::new(0)),
            bulk: CachePadded::new(AtomicU64::new(0)),
        }
    }
}

impl Default for LockFreeTail {
    fn default() -> Self {
        Self::new()
    }
}

/// LC98's lock-free claim (Fig. 3).
#[derive(Debug)]
pub struct LockFree;

/// Step 1: assignment by CAS on `tail`.
#[inline(always)]
fn assign(tail: &AtomicU64) -> u64 {
    // Relaxed: the position only has to be unique; the Acquire that orders
    // our writes after the receiver's reads is on the claim CAS.
    let mut index = tail.load(Ordering::Relaxed);
    loop {
        match tail.compare_exchange_weak(index, index + 1, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return index,
            Err(now) => index = now,
        }
    }
}

/// Step 2: CAS the handshake word FREE -> CLAIMED, waiting while not free.
#[inline(always)]
fn take<W>(state: &AtomicU64, pid: u32, wait: &mut W) -> Result<u64, AmError>
where
    W: FnMut() -> Result<(), AmError>,
{
    loop {
        // Relaxed: a snapshot for the CAS below.
        let w = state.load(Ordering::Relaxed);
        if state_of(w) == FREE {
            let c = word(lap_of(w), pid, CLAIMED);
            // Acquire: pairs with the receiver's Release store that freed
            // the slot (its reads of the old contents happen before our
            // writes).
            if state
                .compare_exchange(w, c, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return Ok(c);
            }
            continue;
        }
        take_slow(wait)?;
    }
}

#[cold]
#[inline(never)]
fn take_slow<W>(wait: &mut W) -> Result<(), AmError>
where
    W: FnMut() -> Result<(), AmError>,
{
    wait()
}

impl Claim for LockFree {
    const NAME: &'static str = "lock-free";
    const SENDER_FIFO: bool = false;
    const SKIP_SLOW: bool = true;
    type Tail = LockFreeTail;

    unsafe fn init(tail: *mut Self::Tail) {
        // SAFETY: the caller's contract.
        unsafe { tail.write(LockFreeTail::new()) }
    }

    /// A FREE head position below the packet tail was handed out and its
    /// packet not claimed: its sender is dead or descheduled. Skipping it
    /// is safe here and only here: the claim CAS takes whatever FREE lap
    /// it finds, so a live sender of that position claims a later lap.
    #[inline(always)]
    fn stranded(tail: &Self::Tail, pos: u64) -> bool {
        // Relaxed: a stale (smaller) tail only delays the skip.
        tail.packets.load(Ordering::Relaxed) > pos
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
        let bulk = if bulk {
            let b = (assign(&q.tail.bulk) % q.bulk.len() as u64) as usize;
            Some((b, take(&q.bulk[b], me.pid, wait)?))
        } else {
            None
        };
        let slot = q.slot_of(assign(&q.tail.packets));
        let word = take(&q.packets[slot].state, me.pid, wait)?;
        Ok(Claimed { slot, word, bulk })
    }
}
