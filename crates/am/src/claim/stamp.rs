//! `stamp`: positions handed out by one CAS on the tail, each guarded by
//! a per-slot lap stamp, and a receiver that never writes the packets (the
//! form of Vyukov's bounded MPMC queue, here many-to-one); the modern
//! comparison point for LC98's algorithms (and the default before
//! [`Rings`](super::Rings)).
//!
//! # Packets
//!
//! The receiver does not free packets ([`Claim::RECEIVER_FREES`] is
//! false): it reads a message, runs its handler and publishes its head
//! (the next position to deliver); the packet's word stays as the sender
//! wrote it. Publishing position `p` (slot `p mod len`, lap `L = p / len`)
//! stamps the word READY with lap `L + 1`, so a word stamped `L` says
//! "the previous position of this slot, `p - len`, was published", and it
//! is consumed once the head is past it. The receiver delivers a word
//! only if it carries its head position's lap, `L + 1`. A sender reads the
//! tail `p`:
//!
//! * if the head (cached in the sender's [`Hint`], re-read only when the
//!   cached value says the ring is full) is past `p - len`, the sender
//!   records its intent to take `p` (its own line of [`StampTail`], with
//!   its pid) and one CAS of the tail from `p` to `p + 1` makes `p` its
//!   own (a `p` that another sender took meanwhile fails the CAS, which
//!   returns the tail to try next); it then writes the body and the READY
//!   word (publish);
//! * if the head is not past `p - len`, the ring is full: back off and
//!   poll.
//!
//! The sender never reads the packet's word: the head alone says the slot
//! is free, because the receiver moves its head past a position only once
//! it has copied the message out (or skipped a dead owner's position),
//! after which nobody but the next owner writes the slot.
//!
//! Why this order: the receiver polls the packet it waits for, so the
//! packet's line is in its cache. The only access a sender makes to that
//! line is the publishing write, so a message costs one line transfer, as
//! a cache-line ping-pong does. Reading the word to check its stamp (the
//! previous form of this algorithm) cost a transfer more on every
//! message, claiming with a CAS on the word (the form before it) a whole
//! coherence round trip, and under LC98's handshake the receiver also
//! dirties every packet when it frees it.
//!
//! Why the intents: between its tail CAS and its READY store a sender
//! owns a position the packet does not show. The receiver, finding its
//! head position handed out (below the tail) and still unpublished, looks
//! the position up among the intents; if every sender that announced it
//! is dead, the position is skipped (its word stamped `L + 1`, FREE); a
//! live one is waited for. A sender killed at any instruction costs at
//! most its own message.
//!
//! # Bulk blocks
//!
//! Blocks are freed out of order (with the packets that name them), so
//! the bulk ring keeps LC98's handshake: the receiver writes a block's
//! word FREE for its next lap, and a sender claims position `b` when the
//! word is FREE for lap `b / blocks`, by a CAS on the word (with its pid)
//! and then on the bulk tail; a dead sender's block is swept by pid.
//!
//! State: [`StampTail`]: the two running positions and the intents.
//! Invariants: each packet position is handed out by exactly one tail
//! CAS, only when the head is past the slot's previous position; a packet
//! is written only by the owner of its position (or, for a dead owner,
//! stamped once by the receiver); the reuse of a packet is ordered after
//! the receiver's copy of its body by the head's Release store and the
//! sender's Acquire load; FIFO order of positions is the order of
//! delivery.

use crossbeam_utils::CachePadded;

use super::{Claim, Claimed, Hint, Holder, POS_BITS, POS_MASK, dead, intent};
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
    /// Per sender rank: the packet position it is taking or last took, and
    /// its pid ([`intent`]); 0 if it never sent here. Each sender writes
    /// only its own, on its own line.
    intents: [CachePadded<AtomicU64>; crate::MAX_RANKS],
}

impl StampTail {
    /// A fresh tail (loom tests build queues on the heap).
    pub fn new() -> Self {
        Self {
            packets: CachePadded::new(AtomicU64::new(0)),
            bulk: CachePadded::new(AtomicU64::new(0)),
            intents: core::array::from_fn(|_| CachePadded::new(AtomicU64::new(0))),
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

/// Takes a packet position for sender `me` (see the module docs): returns
/// its slot and the word its publication will carry (lap `L + 1`).
///
/// The packet's line is not read: the receiver is polling it (it is the
/// head, or soon will be), so a read would cost a line transfer and the
/// publishing write a second one. That `p - len` is consumed, which the
/// head tells, is all a sender needs: the receiver's head passes a
/// position only once its message is delivered (or its owner is dead),
/// so nobody else writes the slot after that, and the tail CAS makes `p`
/// ours alone (a stale `p`, published by another sender since, fails it).
#[inline(always)]
fn take_packet<W>(
    q: &Queue<'_, StampTail>,
    me: Holder,
    hint: &mut Hint,
    wait: &mut W,
) -> Result<(usize, u64), AmError>
where
    W: FnMut() -> Result<(), AmError>,
{
    let tail = &*q.tail.packets;
    let len = q.packets.len() as u64;
    // Relaxed (every tail load here): the position is only a guess until
    // the CAS in `claim_at`; what the packet may hold is ordered by the
    // head.
    let mut p = tail.load(Ordering::Relaxed);
    loop {
        if p >= hint.head.saturating_add(len) && !consumed(q, hint, p) {
            // `p - len` is not consumed yet: full.
            full(wait)?;
            p = tail.load(Ordering::Relaxed);
            continue;
        }
        match claim_at(q, me, p) {
            Ok(claimed) => return Ok(claimed),
            Err(now) => p = now,
        }
    }
}

/// Announces `me`'s intent to take position `p` and tries once to move the
/// tail from `p` to `p + 1`: the slot and the word its publication will
/// carry, or the tail as found.
#[inline(always)]
fn claim_at(q: &Queue<'_, StampTail>, me: Holder, p: u64) -> Result<(usize, u64), u64> {
    let tail = &*q.tail.packets;
    let mine = &*q.tail.intents[me.rank as usize % crate::MAX_RANKS];
    // Relaxed: ordered before the tail CAS below (Release), which the
    // receiver's Acquire tail load in `stranded` pairs with.
    mine.store(intent(me.pid, p), Ordering::Relaxed);
    // Release: publishes the intent above to the receiver's Acquire tail
    // load in `stranded` (the tail's CASes form one release sequence, so a
    // load that reads any later tail sees it too). No Acquire: what the
    // packet may hold is ordered by the head. Weak: a spurious failure
    // only costs a retry.
    match tail.compare_exchange_weak(p, p + 1, Ordering::Release, Ordering::Relaxed) {
        Ok(_) => Ok((
            q.slot_of(p),
            word(q.lap_at(p).wrapping_add(1), me.pid, CLAIMED),
        )),
        Err(now) => Err(now),
    }
}

/// Whether position `p - len` is consumed, re-reading the receiver's head
/// into `hint`.
#[cold]
#[inline(never)]
fn consumed(q: &Queue<'_, StampTail>, hint: &mut Hint, p: u64) -> bool {
    // Acquire: pairs with the receiver's Release store of its head after
    // it copied position `p - len` out; our writes to the packet come
    // after its reads. (A cached head was loaded the same way.)
    hint.head = q.head.pos.load(Ordering::Acquire);
    p < hint.head.saturating_add(q.packets.len() as u64)
}

/// A bulk block of queue `q` for sender `pid` if `bulk` (positions
/// handed out by the bulk tail `tail`, see [`take_freed`]), claimed
/// before the packet (LC98 §3.2).
#[inline(always)]
pub(super) fn bulk_block<T, W>(
    q: &Queue<'_, T>,
    tail: &AtomicU64,
    bulk: bool,
    pid: u32,
    wait: &mut W,
) -> Result<Option<(usize, u64)>, AmError>
where
    W: FnMut() -> Result<(), AmError>,
{
    if !bulk {
        return Ok(None);
    }
    take_freed(tail, q.bulk.len(), |i| &*q.bulk[i], pid, wait).map(Some)
}

/// Claims one position of a ring whose words the receiver frees (the
/// bulk ring): `words(i)` is the handshake word of slot `i`.
#[inline(always)]
fn take_freed<'q, F, W>(
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
        // our writes).
        let w = state.load(Ordering::Acquire);
        let behind = lap.wrapping_sub(lap_of(w)) as i32;
        if w == word(lap, 0, FREE) {
            let c = word(lap, pid, CLAIMED);
            // Acquire on success: as for the load above. Relaxed on
            // failure: we re-read the word.
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
    const RECEIVER_FREES: bool = false;
    type Tail = StampTail;

    /// Handed out: below the tail (and, as the caller knows, unpublished).
    #[inline(always)]
    fn stranded(tail: &Self::Tail, pos: u64) -> bool {
        // Acquire: pairs with the senders' Release tail CAS, so the intent
        // stored before it is visible to `owner_dead`.
        tail.packets.load(Ordering::Acquire) > pos
    }

    /// Every sender whose intent names `pos` is dead (and there is one).
    /// A live one may own it and be about to publish; a stale intent of a
    /// live sender (it lost the tail CAS for `pos` and has not announced
    /// its next try yet) is waited for too, so a live owner is never
    /// skipped.
    #[cold]
    fn owner_dead(q: &Queue<'_, Self::Tail>, pos: u64, _w: u64) -> bool {
        let want = pos.wrapping_add(1) & POS_MASK;
        let mut any = false;
        for i in &q.tail.intents {
            // Relaxed: see `stranded`.
            let v = i.load(Ordering::Relaxed);
            if v & POS_MASK == want {
                if !dead((v >> POS_BITS) as u32) {
                    return false;
                }
                any = true;
            }
        }
        any
    }

    unsafe fn init(tail: *mut Self::Tail) {
        // SAFETY: the caller's contract.
        unsafe { tail.write(StampTail::new()) }
    }

    /// Room in the ring as `hint` knows it, and the first tail CAS won. A
    /// lost CAS leaves an intent naming a position someone else took: the
    /// receiver waits for a live sender's stale intent as for a claim
    /// (see `owner_dead`), and the next claim overwrites it.
    #[inline(always)]
    fn try_claim(q: &Queue<'_, Self::Tail>, me: Holder, hint: &mut Hint) -> Option<Claimed> {
        // Relaxed: a guess until the CAS, as in `take_packet`.
        let p = q.tail.packets.load(Ordering::Relaxed);
        if p >= hint.head.saturating_add(q.packets.len() as u64) {
            return None;
        }
        let (slot, word) = claim_at(q, me, p).ok()?;
        Some(Claimed {
            slot,
            word,
            bulk: None,
        })
    }

    #[inline]
    fn claim<W>(
        q: &Queue<'_, Self::Tail>,
        me: Holder,
        hint: &mut Hint,
        bulk: bool,
        wait: &mut W,
    ) -> Result<Claimed, AmError>
    where
        W: FnMut() -> Result<(), AmError>,
    {
        let bulk = bulk_block(q, &q.tail.bulk, bulk, me.pid, wait)?;
        let (slot, word) = take_packet(q, me, hint, wait)?;
        Ok(Claimed { slot, word, bulk })
    }
}
