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
//! tell assigned positions from unassigned ones), and one intent word per
//! sender rank. Invariant: every position below `packets` has been
//! assigned to exactly one sender; several assigned senders may compete
//! for one packet, and the CAS on its type lets exactly one of them have
//! it per lap.
//!
//! The tail increment is a CAS loop as in the paper (FETCH&ADD would never
//! fail on x86, but it is not LC98's algorithm).
//!
//! # A sender that dies between its two steps
//!
//! LC98 does not handle failures. A sender killed after its assignment and
//! before its claim leaves a handed-out position whose packet stays FREE:
//! the receiver, delivering in position order, would wait at it forever.
//! It may skip that lap (stamp the packet FREE for the next lap without a
//! message) only if a sender that will never claim is dead: the senders
//! assigned to the packet's slot claim its laps in any order, so the lap
//! the receiver waits at is owed by whichever of them has not claimed yet,
//! and a skip while they are all alive leaves one of them a lap that the
//! receiver reaches only if another position of the slot is ever handed
//! out (issue 43: a sender descheduled for 20 ms, the skip this crate once
//! made, found its message stranded, and the senders after it on the
//! slot waited for good).
//!
//! So each sender announces the position it is about to CAS the tail
//! from in its rank's intent word (its own line; a Relaxed store before
//! the Release CAS), and clears the word (Release) once its claim CAS has
//! won, or when it gives the claim up with an error. The receiver at head
//! position `pos` (slot `s`, packet FREE, `pos` below the tail `T`) counts
//! (`owner_dead`):
//!
//! * `owed`: the positions of slot `s` in `pos..T`. Every lap of `s`
//!   before the current one was consumed once (delivered, recovered or
//!   skipped), one per earlier position of `s`, so `owed` is the number of
//!   senders assigned to `s` that have not claimed, less the dead ones
//!   already skipped for;
//! * `live`: the intents of live processes naming a position of `s` below
//!   `T`. Every live sender assigned to `s` that has not claimed is one of
//!   them (its intent was stored before the CAS that handed it out, which
//!   the receiver's Acquire load of `T` follows); a stale intent of a live
//!   sender that lost the tail CAS only adds to `live`.
//!
//! If `owed > live`, a sender of `s` that will never claim is dead and not
//! yet skipped for, and the lap is skipped (one CAS from the FREE word
//! seen, which fails if a claim took the lap meanwhile; a sender that
//! cleared its intent after winning that claim made its CAS visible to the
//! receiver's Acquire load of the intent). Otherwise the receiver waits:
//! a live sender, however long it is descheduled, finds the lap still
//! FREE and its message is delivered once. The cost on the send path is
//! two stores to the sender's own line (three with a lost tail CAS).

use crossbeam_utils::CachePadded;

use super::{Claim, Claimed, Hint, Holder, POS_MASK, dead, intent};
use crate::MAX_RANKS;
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
    /// Per sender rank: the packet position it is being assigned, or was
    /// assigned and has not claimed, with its pid ([`intent`]); 0 when
    /// none. Each sender writes only its own, on its own line; the
    /// receiver reads them only while its head is stuck.
    intents: [CachePadded<AtomicU64>; MAX_RANKS],
}

impl LockFreeTail {
    /// A fresh tail (loom tests build queues on the heap).
    pub fn new() -> Self {
        Self {
            packets: CachePadded::new(AtomicU64::new(0)),
            bulk: CachePadded::new(AtomicU64::new(0)),
            intents: core::array::from_fn(|_| CachePadded::new(AtomicU64::new(0))),
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

/// Step 1 for a bulk block: assignment by CAS on `tail` (no intent: the
/// receiver frees blocks out of order and never waits for a position of
/// the bulk ring; a block a dead sender claimed is swept by its pid).
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

/// Step 1 for a packet: assignment by CAS on `tail`, each try announced
/// in the sender's intent word `mine` first (see the module docs).
#[inline(always)]
fn assign_packet(tail: &AtomicU64, mine: &AtomicU64, pid: u32) -> u64 {
    // Relaxed: the position only has to be unique; the Acquire that orders
    // our writes after the receiver's reads is on the claim CAS.
    let mut index = tail.load(Ordering::Relaxed);
    loop {
        // Relaxed: ordered before the tail CAS below (Release), which the
        // receiver's Acquire tail load in `owner_dead` pairs with.
        mine.store(intent(pid, index), Ordering::Relaxed);
        // Release: publishes the intent above to the receiver's Acquire
        // tail load (the tail's CASes form one release sequence, so a load
        // that reads any later tail sees it too). Weak: a spurious failure
        // only costs a retry.
        match tail.compare_exchange_weak(index, index + 1, Ordering::Release, Ordering::Relaxed) {
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
    type Tail = LockFreeTail;

    unsafe fn init(tail: *mut Self::Tail) {
        // SAFETY: the caller's contract.
        unsafe { tail.write(LockFreeTail::new()) }
    }

    /// A FREE head position below the packet tail was handed out and its
    /// packet not claimed (yet): its sender is slow, or dead.
    #[inline(always)]
    fn stranded(tail: &Self::Tail, pos: u64) -> bool {
        // Relaxed: a hint; `owner_dead` loads the tail again, Acquire.
        tail.packets.load(Ordering::Relaxed) > pos
    }

    /// More positions of `pos`'s slot from `pos` on are handed out than
    /// live senders have intents on the slot (module docs): one of the
    /// slot's senders that never claimed is dead, and not yet skipped for.
    #[cold]
    fn owner_dead(q: &Queue<'_, Self::Tail>, pos: u64, w: u64) -> bool {
        if state_of(w) != FREE {
            return false;
        }
        // Acquire: pairs with the senders' Release tail CASes, so that the
        // intent each stored before the CAS that handed it a position
        // below `tail` is visible to the loads below.
        let tail = q.tail.packets.load(Ordering::Acquire);
        if tail <= pos {
            return false;
        }
        let len = q.packets.len() as u64;
        let owed = (tail - pos).div_ceil(len);
        let slot = q.slot_of(pos);
        let mut live = 0u64;
        for i in &q.tail.intents {
            // Acquire: pairs with a sender's Release clearing of its intent
            // after its claim CAS, so that a claim of this lap is visible
            // to the skip CAS that follows (which then fails).
            let v = i.load(Ordering::Acquire);
            if v == 0 {
                continue;
            }
            // How far below the tail the announced position is (modulo
            // 2^40): 0 for the tail itself (not handed out yet), more than
            // half the range for a position announced after our tail load.
            let below = tail.wrapping_sub((v & POS_MASK).wrapping_sub(1)) & POS_MASK;
            if below == 0 || below > POS_MASK / 2 || below > tail {
                continue;
            }
            if q.slot_of(tail - below) == slot && !dead((v >> super::POS_BITS) as u32) {
                live += 1;
                if live >= owed {
                    return false;
                }
            }
        }
        owed > live
    }

    fn debug_assign_only(q: &Queue<'_, Self::Tail>, me: Holder) -> bool {
        let mine = &*q.tail.intents[me.rank as usize % MAX_RANKS];
        assign_packet(&q.tail.packets, mine, me.pid);
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
        let bulk = if bulk {
            let b = (assign(&q.tail.bulk) % q.bulk.len() as u64) as usize;
            Some((b, take(&q.bulk[b], me.pid, wait)?))
        } else {
            None
        };
        let mine = &*q.tail.intents[me.rank as usize % MAX_RANKS];
        let slot = q.slot_of(assign_packet(&q.tail.packets, mine, me.pid));
        let got = take(&q.packets[slot].state, me.pid, wait);
        // Release: pairs with the receiver's Acquire load of the intent in
        // `owner_dead`: our claim CAS happens before its skip CAS, which
        // then fails. After an error the position is given up for good,
        // and the receiver skips it as a dead sender's.
        mine.store(0, Ordering::Release);
        let word = got?;
        Ok(Claimed { slot, word, bulk })
    }
}
