//! `stamp`: one CAS on the packet's own handshake word, guarded by a
//! per-slot lap stamp, then the tail is moved past it (the form of
//! Vyukov's bounded MPMC queue, here many-to-one, with the claim on the
//! slot so that an owned slot always names its owner); the modern
//! comparison point for LC98's algorithms.
//!
//! A sender reads the tail position `p` (lap `p / len`, slot `p mod len`)
//! and the slot's handshake word:
//!
//! * FREE for lap `p / len`: one CAS of the word to CLAIMED (with the
//!   sender's pid) makes position `p` the sender's; it then moves the tail
//!   from `p` to `p + 1` (a CAS that fails when another sender helped);
//! * taken for that lap (CLAIMED or READY), or already freed past it:
//!   position `p` is someone's, so the sender helps the tail past it and
//!   re-reads;
//! * still carrying an older lap: the receiver has not consumed the slot
//!   yet; the queue is full, so the sender backs off and polls.
//!
//! Why the slot first: a position is owned from the instant its word says
//! so, and the word names the owner. A sender killed at any instruction
//! leaves either nothing (before its CAS), or a CLAIMED word with its pid
//! (which the receiver recovers once the pid is dead) and possibly a tail
//! that lags by one (which the next sender moves on). No live sender's
//! message is stranded behind a dead one's. Claiming the tail first (the
//! previous form of this algorithm) left a window in which a dead sender
//! owned a position whose word still read FREE, and the receiver waited
//! for it forever.
//!
//! State: [`StampTail`], the same two running positions as `lock-free`.
//! Invariants: a slot's word is FREE for lap `k` exactly until position
//! `k * len + slot` is claimed, and a claim only succeeds on that word, so
//! each position is owned once; the tail is at most one position behind
//! the last claimed position (only the position equal to the tail can be
//! claimed, and a claimed position at the tail is helped past by anyone
//! who sees it); FIFO order of positions is the order of delivery.

use crossbeam_utils::CachePadded;

use super::{Claim, Claimed, Holder};
use crate::error::AmError;
use crate::layout::{CLAIMED, FREE, Queue, lap_of, word};
use crate::sync::{AtomicU64, Ordering};

/// Sender state of a queue for [`Stamp`].
#[repr(C)]
#[derive(Debug)]
pub struct StampTail {
    /// Next packet position.
    packets: CachePadded<AtomicU64>,
    /// Next bulk position.
    bulk: CachePadded<AtomicU64>,
}

impl StampTail {
    /// A fresh tail (loom tests build queues on the heap).
    pub fn new() -> Self {
        Self {
            packets: CachePadded::new(AtomicU64::new(0)),
            bulk: CachePadded::new(AtomicU64::new(0)),
        }
    }
}

impl Default for StampTail {
    fn default() -> Self {
        Self::new()
    }
}

/// One-CAS claim with lap stamps.
#[derive(Debug)]
pub struct Stamp;

/// Claims one position of a ring whose handshake words are `words(i)`.
#[inline(always)]
fn take<'q, F, W>(
    tail: &AtomicU64,
    len: usize,
    words: F,
    pid: u32,
    wait: &mut W,
) -> Result<(usize, u64), AmError>
where
    F: Fn(usize) -> &'q AtomicU64,
    W: FnMut() -> Result<(), AmError>,
{
    let len64 = len as u64;
    // Relaxed: the position is validated by the slot's stamp and CAS.
    let mut p = tail.load(Ordering::Relaxed);
    loop {
        let slot = (p % len64) as usize;
        let lap = (p / len64) as u32;
        let state = words(slot);
        // Acquire: pairs with the receiver's Release store that freed the
        // slot for this lap (its reads of the old contents happen before
        // our writes) and with the claimer's Release tail CAS below (the
        // tail it moved is visible to our next tail load).
        let w = state.load(Ordering::Acquire);
        let behind = lap.wrapping_sub(lap_of(w)) as i32;
        if w == word(lap, 0, FREE) {
            let c = word(lap, pid, CLAIMED);
            // Acquire on success: as for the load above, for the word we
            // replace. Relaxed on failure: we re-read the word.
            if state
                .compare_exchange(w, c, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                // Release: pairs with the Acquire word load of a sender
                // that still holds `p`: once it sees our CLAIMED it helps
                // the tail, and whichever CAS wins, the tail is past `p`.
                let _ = tail.compare_exchange(p, p + 1, Ordering::Release, Ordering::Relaxed);
                return Ok((slot, c));
            }
            continue;
        }
        if behind > 0 {
            // The slot still holds an older lap: full.
            full(wait)?;
            p = tail.load(Ordering::Relaxed);
            continue;
        }
        // Position `p` is taken (this lap's word is CLAIMED or READY) or
        // long gone (the word is at a later lap): help the tail past it.
        // The value a failed CAS reads is never `p` again (the tail only
        // grows), so the loop moves on.
        p = match tail.compare_exchange(p, p + 1, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => p + 1,
            Err(now) => now,
        };
    }
}

#[cold]
#[inline(never)]
fn full<W>(wait: &mut W) -> Result<(), AmError>
where
    W: FnMut() -> Result<(), AmError>,
{
    wait()
}

impl Claim for Stamp {
    const NAME: &'static str = "stamp";
    type Tail = StampTail;

    unsafe fn init(tail: *mut Self::Tail) {
        // SAFETY: the caller's contract.
        unsafe { tail.write(StampTail::new()) }
    }

    #[inline]
    fn claim<W>(
        q: &Queue<'_, Self::Tail>,
        me: Holder,
        bulk: bool,
        wait: &mut W,
    ) -> Result<Claimed, AmError>
    where
        W: FnMut() -> Result<(), AmError>,
    {
        let bulk = if bulk {
            Some(take(
                &q.tail.bulk,
                q.bulk.len(),
                |i| &*q.bulk[i],
                me.pid,
                wait,
            )?)
        } else {
            None
        };
        let (slot, word) = take(
            &q.tail.packets,
            q.packets.len(),
            |i| &q.packets[i].state,
            me.pid,
            wait,
        )?;
        Ok(Claimed { slot, word, bulk })
    }
}
