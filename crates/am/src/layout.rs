//! The queue block (LC98 Fig. 1): what lives in a shared segment, and the
//! handshake word of every packet and bulk block.
//!
//! A segment holds one [`SegHeader`](crate::segment::SegHeader) and two queues (requests, replies).
//! A queue is, in order:
//!
//! | part | owner | contents |
//! |---|---|---|
//! | tail | senders | the claim algorithm's state (`C::Tail`: lock, tail counters) |
//! | head | the receiver | [`HeadInfo`]: next position to deliver, counters |
//! | packet ring | both | `packets` x [`Packet`], one per 128-byte line |
//! | bulk states | both | `bulk_blocks` x [`BulkSlot`] |
//! | bulk data | both | `bulk_blocks` x `bulk_bytes`, 128-byte aligned |
//!
//! Tail and head are on separate lines (LC98: tail information is touched
//! only by senders, head information only by the recipient); packets are
//! 128 bytes so no two share the pair of lines that x86's adjacent-line
//! prefetcher moves together (the same reason crossbeam's `CachePadded` is
//! 128 bytes there).
//!
//! # The handshake word
//!
//! Every packet and bulk block has one 64-bit word:
//!
//! ```text
//!  63            32 31              8 7        0
//! +----------------+-----------------+----------+
//! |      lap       |   owner pid     |  state   |
//! +----------------+-----------------+----------+
//! ```
//!
//! Under LC98's handshake (every algorithm but `stamp`), `state` is FREE ->
//! CLAIMED -> READY (or READY_BULK) -> FREE (LC98 §3). Senders move FREE ->
//! CLAIMED (the claim algorithm) and CLAIMED -> READY (after filling the
//! packet, with a Release store); the receiver moves READY -> FREE once it
//! has copied the body out, before the handler runs (Release store), and
//! bumps `lap`, which counts how many times the receiver has freed the
//! slot. `owner pid` is written by
//! the claim so that a receiver facing a CLAIMED slot whose owner has died
//! can recover it.
//!
//! Under `stamp` the receiver never writes a packet's word
//! ([`Claim::RECEIVER_FREES`](crate::Claim::RECEIVER_FREES) is false): the
//! sender of position `p` stores READY with lap `p / len + 1`, the
//! receiver delivers a word only if it carries its head position's lap,
//! and it publishes its head (`HeadInfo::pos`, Release, once it has copied
//! the body out) so that senders know which packets are consumed. Bulk
//! blocks keep LC98's handshake under every algorithm (they are freed out
//! of order).

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, Cell, Ordering};

/// First word of every endpoint segment once it is fully initialized.
pub const MAGIC: u64 = 0x5359_4d41_4d51_424b; // "SYMAMQBK"

/// Free: the slot may be claimed.
pub const FREE: u64 = 0;
/// Claimed: one sender owns it and is filling it.
pub const CLAIMED: u64 = 1;
/// Ready: a short message waits for delivery.
pub const READY: u64 = 2;
/// Ready: a message with a bulk block waits for delivery.
pub const READY_BULK: u64 = 3;

/// Builds a handshake word.
#[inline(always)]
pub const fn word(lap: u32, pid: u32, state: u64) -> u64 {
    ((lap as u64) << 32) | (((pid as u64) & 0x00ff_ffff) << 8) | state
}
/// The state field of a handshake word.
#[inline(always)]
pub const fn state_of(w: u64) -> u64 {
    w & 0xff
}
/// The lap field of a handshake word.
#[inline(always)]
pub const fn lap_of(w: u64) -> u32 {
    (w >> 32) as u32
}
/// The owner pid field of a handshake word (24 bits: Linux `pid_max` is at
/// most 2^22).
#[inline(always)]
pub const fn pid_of(w: u64) -> u32 {
    ((w >> 8) & 0x00ff_ffff) as u32
}

/// Maximum words of a short message (LC98: up to eight).
pub const MAX_ARGS: usize = 8;

/// What a sender writes between CLAIMED and READY.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Body {
    /// Handler id at the receiver.
    pub handler: u16,
    /// Number of valid words in `args`.
    pub nargs: u8,
    /// Reserved, zero.
    pub reserved: u8,
    /// Sender's rank (replies go to its reply queue).
    pub src: u32,
    /// Bulk data length in bytes (READY_BULK only).
    pub bulk_len: u32,
    /// Bulk block index (READY_BULK only): LC98's "bulk index".
    pub bulk_slot: u32,
    /// The words.
    pub args: [u64; MAX_ARGS],
}

/// One packet: the handshake word and the body, alone on 128 bytes.
#[repr(C, align(128))]
#[derive(Debug)]
pub struct Packet {
    /// Handshake word (see the module docs).
    pub(crate) state: AtomicU64,
    /// Written by the owner of a CLAIMED packet, read by the receiver of a
    /// READY one; the state word's Release/Acquire pairs order the two.
    pub(crate) body: Cell<Body>,
}

impl Packet {
    pub(crate) fn new() -> Self {
        Self {
            state: AtomicU64::new(word(0, 0, FREE)),
            body: Cell::new(Body::default()),
        }
    }
}

/// The handshake word of one bulk block (LC98's "claimed flag").
pub type BulkSlot = CachePadded<AtomicU64>;

/// The receiver's side of a queue.
#[repr(C)]
#[derive(Debug)]
pub struct HeadInfo {
    /// Every position below it is consumed: the receiver stores it (Release)
    /// once it has copied the messages out (after each one under LC98's
    /// handshake; every quarter ring and at the end of each delivery where
    /// it does not free packets), and `stamp`'s and `rings`' senders load it
    /// (Acquire) to know a packet may be reused. The receiver's own copy of
    /// its head is private ([`Queue::word_at`]); this one is only
    /// published.
    pub(crate) pos: AtomicU64,
    /// Messages delivered from this queue.
    pub(crate) delivered: AtomicU64,
    /// CLAIMED packets of dead senders recovered by the receiver.
    pub(crate) recovered: AtomicU64,
    /// Bulk blocks of dead senders recovered by the receiver.
    pub(crate) recovered_bulk: AtomicU64,
}

impl HeadInfo {
    pub(crate) fn new() -> Self {
        Self {
            pos: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            recovered: AtomicU64::new(0),
            recovered_bulk: AtomicU64::new(0),
        }
    }
}

/// A view of one queue: borrowed parts of a segment (or, under loom, of
/// heap allocations). `C` is the claim algorithm whose tail state it has.
#[derive(Debug)]
pub struct Queue<'a, T> {
    /// Sender-side state of the claim algorithm.
    pub tail: &'a T,
    /// Receiver-side state.
    pub head: &'a HeadInfo,
    /// The packet ring.
    pub packets: &'a [Packet],
    /// The bulk blocks' handshake words.
    pub bulk: &'a [BulkSlot],
    /// Start of the bulk data (`bulk.len() * bulk_bytes` bytes).
    pub bulk_data: *mut u8,
    /// Bytes per bulk block.
    pub bulk_bytes: usize,
    /// `log2(packets.len())` if that is a power of two, else 64: positions
    /// are split into slot and lap with a mask and a shift instead of a
    /// 64-bit division (tens of cycles, several per message).
    pub shift: u32,
}

/// The [`Queue::shift`] of a ring of `len` packets.
pub const fn shift_for(len: usize) -> u32 {
    if len.is_power_of_two() {
        len.trailing_zeros()
    } else {
        64
    }
}

// SAFETY: a queue view only reaches shared memory through atomics, cells
// whose accesses the handshake words order, and the bulk pointer, whose
// blocks are owned by whoever holds them CLAIMED (or by the receiver while
// READY); none of that depends on which thread holds the view.
unsafe impl<T: Sync> Send for Queue<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Queue<'_, T> {}

impl<T> Clone for Queue<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Queue<'_, T> {}

impl<T> Queue<'_, T> {
    /// Number of packets in the ring.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.packets.len()
    }

    /// Whether the ring has no packets (never, for a valid queue).
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }

    /// The packet slot of position `pos`.
    #[inline(always)]
    pub fn slot_of(&self, pos: u64) -> usize {
        if self.shift < 64 {
            (pos & ((1u64 << self.shift) - 1)) as usize
        } else {
            (pos % self.packets.len() as u64) as usize
        }
    }

    /// The lap of position `pos` (how many times the ring came round
    /// before it), truncated to 32 bits as in the handshake words.
    #[inline(always)]
    pub fn lap_at(&self, pos: u64) -> u32 {
        if self.shift < 64 {
            (pos >> self.shift) as u32
        } else {
            (pos / self.packets.len() as u64) as u32
        }
    }

    /// Pointer to bulk block `i`.
    #[inline(always)]
    pub(crate) fn bulk_ptr(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.bulk.len());
        self.bulk_data.wrapping_add(i * self.bulk_bytes)
    }

    /// Sender, after a claim: copies the bulk data into the claimed block,
    /// writes the body and marks the packet READY (or READY_BULK).
    ///
    /// `data` must fit a block and be given exactly when `c` has a block.
    #[inline(always)]
    pub(crate) fn publish(
        &self,
        c: &Claimed,
        handler: u16,
        src: u32,
        args: &[u64],
        data: Option<&[u8]>,
    ) {
        assert!(args.len() <= MAX_ARGS);
        let packet = &self.packets[c.slot];
        let bulk = match (data, c.bulk) {
            (Some(d), Some((b, _))) => {
                assert!(d.len() <= self.bulk_bytes);
                // SAFETY: the block is ours (CLAIMED by us) until the
                // receiver frees it after delivery, and `d` fits in it.
                unsafe { core::ptr::copy_nonoverlapping(d.as_ptr(), self.bulk_ptr(b), d.len()) };
                Some((d.len() as u32, b as u32))
            }
            _ => None,
        };
        // Only the parts in use are written: a message of up to five words
        // stays on the packet's first cache line with its handshake word,
        // so the receiver moves one line, not two.
        // SAFETY: the packet is CLAIMED by us: nobody else reads or writes
        // its body until our READY store below; the writes are in bounds
        // of the body (at most MAX_ARGS words, asserted above).
        unsafe {
            packet.body.with_mut(|b| {
                (&raw mut (*b).handler).write(handler);
                (&raw mut (*b).nargs).write(args.len() as u8);
                (&raw mut (*b).reserved).write(0);
                (&raw mut (*b).src).write(src);
                if let Some((len, slot)) = bulk {
                    (&raw mut (*b).bulk_len).write(len);
                    (&raw mut (*b).bulk_slot).write(slot);
                }
                copy_words(
                    args.as_ptr(),
                    (&raw mut (*b).args).cast::<u64>(),
                    args.len(),
                );
            })
        };
        let ready = if bulk.is_some() { READY_BULK } else { READY };
        // Release: pairs with the receiver's Acquire load of the word,
        // publishing the body and the bulk data.
        packet
            .state
            .store(word(lap_of(c.word), 0, ready), Ordering::Release);
    }

    /// Receiver: the head position (from the shared mirror) and its
    /// handshake word. The loom model's receiver uses it; an endpoint keeps
    /// its head in private memory ([`Queue::word_at`]).
    #[cfg_attr(not(loom), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn head(&self) -> (u64, u64) {
        // Relaxed: only the receiver writes its head.
        let pos = self.head.pos.load(Ordering::Relaxed);
        let packet = &self.packets[self.slot_of(pos)];
        // Acquire: pairs with the sender's Release store of READY in
        // `publish`.
        (pos, packet.state.load(Ordering::Acquire))
    }

    /// Receiver: the handshake word of the packet at position `pos`.
    #[inline(always)]
    pub(crate) fn word_at(&self, pos: u64) -> u64 {
        let packet = &self.packets[self.slot_of(pos)];
        // Acquire: pairs with the sender's Release store of READY in
        // `publish`.
        packet.state.load(Ordering::Acquire)
    }

    /// Receiver: takes the packet at `pos`, READY (or READY_BULK if
    /// `bulk`): reads the parts of its body in use (the bulk fields only
    /// for a bulk message, at most [`MAX_ARGS`] words) and advances the
    /// shared head mirror. The packet stays READY (its bulk block
    /// untouched) until [`Queue::free`].
    #[inline(always)]
    pub(crate) fn take(&self, pos: u64, bulk: bool) -> Body {
        let packet = &self.packets[self.slot_of(pos)];
        // SAFETY: the packet is READY (the caller saw it with Acquire): its
        // owner finished writing and nobody writes it until `free`; the
        // reads are in bounds of the body.
        unsafe {
            packet.body.with(|b| {
                let mut body = Body {
                    handler: (&raw const (*b).handler).read(),
                    nargs: (&raw const (*b).nargs).read(),
                    reserved: 0,
                    src: (&raw const (*b).src).read(),
                    bulk_len: 0,
                    bulk_slot: 0,
                    args: [0; MAX_ARGS],
                };
                if bulk {
                    body.bulk_len = (&raw const (*b).bulk_len).read();
                    body.bulk_slot = (&raw const (*b).bulk_slot).read();
                }
                let nargs = (body.nargs as usize).min(MAX_ARGS);
                copy_words(
                    (&raw const (*b).args).cast::<u64>(),
                    body.args.as_mut_ptr(),
                    nargs,
                );
                body
            })
        }
    }

    /// Receiver: the state of the packet at `pos` whose word is `w`, if it
    /// holds a message for `pos` (READY or READY_BULK). Where the receiver
    /// frees packets, a READY word is always the current lap's; where it
    /// does not (it publishes its head instead), the word must also carry
    /// the lap a claim of `pos` writes, `pos / len + 1`.
    #[inline(always)]
    pub(crate) fn ready(&self, w: u64, pos: u64, frees: bool) -> Option<u64> {
        let st = state_of(w);
        let current = frees || lap_of(w) == self.claimed_lap(pos);
        ((st == READY || st == READY_BULK) && current).then_some(st)
    }

    /// The lap a claim of position `pos` writes into its packet's word
    /// when the receiver does not free packets: one more than the lap of
    /// the position (so the word of a consumed packet, left as it was,
    /// reads as "free" for the same slot's next position).
    #[inline(always)]
    pub(crate) fn claimed_lap(&self, pos: u64) -> u32 {
        self.lap_at(pos).wrapping_add(1)
    }

    /// Receiver: hands back the packet taken at `pos` (word `w`), as soon
    /// as [`take`](Queue::take) has copied its body out (before the
    /// handler runs, which reads only the copy): the packet's word goes
    /// FREE for its next lap if `frees` (LC98's handshake), and in every
    /// case the head moves past `pos` (the shared head, which the senders
    /// of algorithms whose receiver does not free packets read to know
    /// which packets are consumed). Handing it back before the handler
    /// keeps the handler's own sends (a reply) off the path of the next
    /// sender to this slot.
    #[inline(always)]
    pub(crate) fn release(&self, pos: u64, w: u64, frees: bool) {
        if frees {
            let packet = &self.packets[self.slot_of(pos)];
            // Release: pairs with the claimer's Acquire load of the word;
            // our reads of the body (in `take`) happen before its next
            // writes.
            packet
                .state
                .store(word(lap_of(w).wrapping_add(1), 0, FREE), Ordering::Release);
        }
        self.advance(pos);
    }

    /// Receiver: hands back bulk block `b` after the handler that read it
    /// in place returned: its word goes FREE for its next lap.
    #[inline(always)]
    pub(crate) fn free_bulk(&self, b: usize) {
        let bw = self.bulk[b].load(Ordering::Relaxed);
        // Release: pairs with the claimer's Acquire; our reads of the
        // block happen before its next writes.
        self.bulk[b].store(word(lap_of(bw).wrapping_add(1), 0, FREE), Ordering::Release);
    }

    /// Receiver: moves the word `w` of the packet at `pos` to FREE for its
    /// next lap, if it still is `w` (nobody else writes it: its owner is
    /// dead, or it was handed out and never claimed); whether it did.
    #[inline]
    pub(crate) fn next_lap(&self, pos: u64, w: u64) -> bool {
        // AcqRel: Acquire for what a dead owner wrote, Release for the
        // sender that claims the next lap.
        self.packets[self.slot_of(pos)]
            .state
            .compare_exchange(
                w,
                word(lap_of(w).wrapping_add(1), 0, FREE),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// Receiver: publishes that every position up to `pos` is consumed.
    #[inline(always)]
    pub(crate) fn advance(&self, pos: u64) {
        // Release: pairs with the Acquire load of the head in a sender's
        // claim: our reads of the packet at `pos` happen before the
        // sender's writes to it on the next lap.
        self.head.pos.store(pos + 1, Ordering::Release);
    }
}

/// Copies `n` (at most [`MAX_ARGS`]) words from `src` to `dst` with
/// fixed-size moves: a `copy_nonoverlapping` of a run-time length is a
/// call to `memcpy`, whose wide stores the next loads of the copy cannot
/// forward from (a stall of a dozen cycles per message).
///
/// # Safety
///
/// `src` is valid for reads and `dst` for writes of `n` words, both
/// aligned, not overlapping.
#[inline(always)]
unsafe fn copy_words(src: *const u64, dst: *mut u64, n: usize) {
    debug_assert!(n <= MAX_ARGS);
    // SAFETY: each arm moves exactly `n` words (the caller's contract).
    unsafe {
        match n {
            0 => {}
            1 => dst.cast::<[u64; 1]>().write(src.cast::<[u64; 1]>().read()),
            2 => dst.cast::<[u64; 2]>().write(src.cast::<[u64; 2]>().read()),
            3 => dst.cast::<[u64; 3]>().write(src.cast::<[u64; 3]>().read()),
            4 => dst.cast::<[u64; 4]>().write(src.cast::<[u64; 4]>().read()),
            5 => dst.cast::<[u64; 5]>().write(src.cast::<[u64; 5]>().read()),
            6 => dst.cast::<[u64; 6]>().write(src.cast::<[u64; 6]>().read()),
            7 => dst.cast::<[u64; 7]>().write(src.cast::<[u64; 7]>().read()),
            _ => dst.cast::<[u64; 8]>().write(src.cast::<[u64; 8]>().read()),
        }
    }
}

/// Rounds `x` up to a multiple of `a` (a power of two).
pub(crate) const fn align_up(x: usize, a: usize) -> usize {
    (x + a - 1) & !(a - 1)
}

/// Byte offsets of a queue's parts, relative to the queue's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLayout {
    /// Offset of the head info.
    pub head: usize,
    /// Offset of the packet ring.
    pub packets: usize,
    /// Offset of the bulk states.
    pub bulk: usize,
    /// Offset of the bulk data.
    pub data: usize,
    /// Total bytes of the queue (a multiple of 4096).
    pub bytes: usize,
}

impl QueueLayout {
    /// The layout for a tail of `tail_bytes` and the given ring sizes.
    pub const fn new(
        tail_bytes: usize,
        packets: usize,
        bulk_blocks: usize,
        bulk_bytes: usize,
    ) -> Self {
        let head = align_up(tail_bytes, 128);
        let packets_off = align_up(head + core::mem::size_of::<CachePadded<HeadInfo>>(), 128);
        let bulk = packets_off + packets * core::mem::size_of::<Packet>();
        let data = align_up(bulk + bulk_blocks * core::mem::size_of::<BulkSlot>(), 128);
        let bytes = align_up(data + bulk_blocks * bulk_bytes, 4096);
        Self {
            head,
            packets: packets_off,
            bulk,
            data,
            bytes,
        }
    }
}

/// What a successful claim owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claimed {
    /// Index of the claimed packet in the ring.
    pub slot: usize,
    /// The packet's handshake word as claimed: state CLAIMED, the lap its
    /// publication carries, the claimer's pid. (`stamp` never stores it:
    /// its first store to the packet is the READY one, with this lap.)
    pub word: u64,
    /// Index and claimed word of the bulk block, for a bulk claim.
    pub bulk: Option<(usize, u64)>,
}
