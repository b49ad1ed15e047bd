//! `rings`: one single-producer ring per sender in each receiver queue,
//! so that a send is plain stores and one Release store, with no
//! read-modify-write on a word another sender writes (beyond LC98, whose
//! senders all share one ring; the layout iceoryx2 and GASNet-EX's PSHM
//! give each connection).
//!
//! # Lanes
//!
//! A queue of a job of `size` ranks holds `size` lanes of `packets`
//! packets each ([`Config::packets`](crate::Config::packets) is then per
//! sender): lane `r` is written only by rank `r` and read only by the
//! receiver. A lane is a [`Queue`] view ([`Claim::lane`]) over its slice of
//! the packet ring, with its own [`HeadInfo`] in [`RingsTail`], so the
//! receiver's delivery and the lap stamps are `stamp`'s:
//!
//! * the sender keeps its lane's tail in private memory
//!   ([`Hint::tail`]): position `p` is its own with no atomic step; it
//!   writes the body and then the READY word stamped with lap
//!   `p / len + 1` (Release), on the packet's line;
//! * the receiver delivers a word only if it carries its head position's
//!   lap, never writes a packet, and publishes its head (Release, to the
//!   lane's head line) every quarter lane and at the end of each
//!   delivery, once it copied the messages out; the sender reads it
//!   (Acquire, into [`Hint::head`]) only when its cached head says the
//!   lane is full, so the head's line moves per publication the sender
//!   reads, never per message.
//!
//! # Announcements
//!
//! One word per queue ([`RingsTail`]'s `summary`, one bit per sender
//! rank) says which lanes may hold messages, so that an idle poll over
//! many senders reads one line, not one per sender. After its READY store
//! (and the doorbell's light fence, `crate::bell::ring`) a sender loads the
//! word and sets its bit (one `fetch_or`) only if it is clear: while the
//! receiver keeps the bit set, announcing costs a load of a line nobody
//! writes. The receiver polls the lanes whose bits are set. It clears bits
//! only when it dozes ([`Claim::forget`], before the doorbell's heavy
//! fence), and then polls every lane it cleared once more: by the fence
//! pair (Dekker's pattern, as for the doorbell) either that poll sees a
//! message published before the clear, or its sender's load sees the
//! cleared bit and sets it again. So a message is never left unannounced.
//!
//! # Dead senders
//!
//! A sender killed at any instruction leaves at most a packet it never
//! published in its own lane, which nobody else writes or waits behind:
//! there is nothing to recover and nothing to skip ([`Claim::stranded`]
//! stays false). Every message a live sender publishes is delivered
//! exactly once, in the order sent.
//!
//! # Bulk blocks
//!
//! Bulk blocks are shared by all senders of the queue and claimed as under
//! `stamp` (LC98's handshake on the block's word, a CAS with the
//! claimer's pid, then the bulk tail), before the packet; a dead sender's
//! block is swept by pid.
//!
//! State: [`RingsTail`]: the bulk tail, the summary word, and one
//! [`HeadInfo`] per lane. Invariants: only rank `r` writes lane `r`'s
//! packets, at positions `p < head + len` (as it last read the head); the
//! receiver moves a lane's head past `p` only after it copied `p` out, and
//! delivers lane `r`'s positions in order; bit `r` of the summary is set
//! whenever lane `r` holds a message the receiver has not polled since it
//! last cleared the bit.

use crossbeam_utils::CachePadded;

use super::stamp::bulk_block;
use super::{Claim, Claimed, Hint, Holder};
use crate::error::AmError;
use crate::layout::{CLAIMED, HeadInfo, Queue, word};
use crate::sync::{AtomicU64, Ordering};

/// Sender and lane state of a queue for [`Rings`].
#[repr(C)]
#[derive(Debug)]
pub struct RingsTail {
    /// Next bulk position.
    bulk: CachePadded<AtomicU64>,
    /// Bit `r`: lane `r` may hold a message (module docs,
    /// "Announcements"). Senders set their own bit; the receiver clears.
    summary: CachePadded<AtomicU64>,
    /// Lane `r`'s receiver state (its head, counters), on its own line:
    /// written by the receiver, read by sender `r` about once per lap.
    heads: [CachePadded<HeadInfo>; crate::MAX_RANKS],
}

impl RingsTail {
    /// A fresh tail (loom tests build queues on the heap).
    pub fn new() -> Self {
        Self {
            bulk: CachePadded::new(AtomicU64::new(0)),
            summary: CachePadded::new(AtomicU64::new(0)),
            heads: core::array::from_fn(|_| CachePadded::new(HeadInfo::new())),
        }
    }
}

impl Default for RingsTail {
    fn default() -> Self {
        Self::new()
    }
}

/// One single-producer ring per sender.
#[derive(Debug)]
pub struct Rings;

/// The bit of sender rank `r` in the summary word.
#[inline(always)]
const fn bit(r: u32) -> u64 {
    1 << (r as usize % crate::MAX_RANKS)
}

impl Claim for Rings {
    const NAME: &'static str = "rings";
    const RECEIVER_FREES: bool = false;
    const PER_SENDER: bool = true;
    type Tail = RingsTail;

    unsafe fn init(tail: *mut Self::Tail) {
        // SAFETY: the caller's contract.
        unsafe { tail.write(RingsTail::new()) }
    }

    /// Lane `r`: packets `r * len .. (r + 1) * len` of the ring (`len` =
    /// the ring's packets / `size`), with lane `r`'s head.
    fn lane<'a>(q: &Queue<'a, Self::Tail>, r: u32, size: u32) -> Queue<'a, Self::Tail> {
        let len = q.packets.len() / size.max(1) as usize;
        let r = r as usize % crate::MAX_RANKS;
        Queue {
            tail: q.tail,
            head: &q.tail.heads[r],
            packets: &q.packets
                [(r * len).min(q.packets.len())..((r + 1) * len).min(q.packets.len())],
            bulk: q.bulk,
            bulk_data: q.bulk_data,
            bulk_bytes: q.bulk_bytes,
            shift: crate::layout::shift_for(len),
        }
    }

    /// Room in the lane as `hint` knows it: the position is ours at once.
    #[inline(always)]
    fn try_claim(q: &Queue<'_, Self::Tail>, me: Holder, hint: &mut Hint) -> Option<Claimed> {
        let p = hint.tail;
        if p >= hint.head.saturating_add(q.len() as u64) {
            return None;
        }
        hint.tail = p + 1;
        Some(Claimed {
            slot: q.slot_of(p),
            word: word(q.claimed_lap(p), me.pid, CLAIMED),
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
        loop {
            if let Some(c) = Self::try_claim(q, me, hint) {
                return Ok(Claimed { bulk, ..c });
            }
            // Acquire: pairs with the receiver's Release store of the
            // lane's head after it copied position `tail - len` out
            // (`Queue::advance`); our writes to that packet come after its
            // reads.
            hint.head = q.head.pos.load(Ordering::Acquire);
            if hint.tail >= hint.head.saturating_add(q.len() as u64) {
                wait()?;
            }
        }
    }

    /// Sets our bit of the summary if it is clear (a load of a line the
    /// receiver leaves alone while it polls us).
    #[inline(always)]
    fn announce(q: &Queue<'_, Self::Tail>, me: Holder) {
        let b = bit(me.rank);
        // Relaxed: ordered after our READY store by the doorbell's fence
        // pair with `forget` (module docs); the message itself is
        // published by its READY word.
        if q.tail.summary.load(Ordering::Relaxed) & b == 0 {
            q.tail.summary.fetch_or(b, Ordering::Relaxed);
        }
    }

    #[inline(always)]
    fn announced(tail: &Self::Tail) -> u64 {
        // Relaxed: only says which lanes to look at; each lane's READY
        // word is loaded with Acquire.
        tail.summary.load(Ordering::Relaxed)
    }

    #[inline]
    fn forget(tail: &Self::Tail) -> u64 {
        // Relaxed: ordered before our next poll by the doorbell's heavy
        // fence (module docs).
        tail.summary.swap(0, Ordering::Relaxed)
    }
}
