//! Heap-allocated queues for the loom model checks (`cfg(loom)` only).
//!
//! Under loom there are no segments: a [`ModelQueue`] holds the parts of one
//! queue (LC98 Fig. 1) in ordinary allocations (the claim algorithm's tail,
//! built by `C::init`; the [`HeadInfo`]; the packet ring; the bulk
//! handshake words and the bulk data) and hands out the same
//! [`Queue`] view that an endpoint gets from its segment. [`send`] and
//! [`recv`] are the endpoint's protocol, step for step, on that view:
//!
//! * `send` = `C::claim` (bulk block first, then packet; `wait` while full),
//!   then [`Queue::publish`] (copy the bulk data, write the body, Release
//!   store of READY / READY_BULK): what `Endpoint::request` does;
//! * `recv` = [`Queue::head`] (Acquire load of the head packet's word), the
//!   [`Queue::ready`] check, [`Queue::take`] (read the body), the handler
//!   with the bulk block's bytes, then [`Queue::free`] (Release stores of
//!   FREE for the next lap where the algorithm's receiver frees packets,
//!   and the Release store of the head): one iteration of the endpoint's
//!   `poll_queue`.
//!
//! Under an algorithm with a lane per sender (`rings`), a queue made
//! [`ModelQueue::for_senders`] has one lane per sender: the method
//! [`ModelQueue::send`] claims in the lane of the body's source rank and
//! rings the queue's doorbell with the lane's announcement, and
//! [`ModelQueue::recv`] polls the announced lanes (and those a
//! [`ModelQueue::doze`] cleared, until found drained), as the endpoint's
//! `poll_lanes` does.
//!
//! Nothing of the protocol is written twice: these functions only call the
//! `pub(crate)` methods of [`crate::layout`] and the claim algorithm that
//! the endpoint calls.
//!
//! The packet bodies live in the crate's `sync::Cell`, which under loom is
//! a `loom::cell::UnsafeCell`, so loom reports any body access that the
//! handshake does not order. The bulk data is raw bytes that loom cannot
//! see; to check its hand-over too, every bulk block has a *shadow* loom
//! cell that [`send`] writes where `publish` copies the data (after the
//! claim, before the READY store) and [`recv`] reads where the handler
//! reads the data (after `take`, before `free`). The shadow holds a
//! checksum of the bytes, which `recv` compares with what it read.

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;

use crate::claim::{Claim, Claimed, Hint};
use crate::error::AmError;
use crate::layout::{
    Body, BulkSlot, CLAIMED, FREE, HeadInfo, Packet, Queue, READY_BULK, state_of, word,
};
use crate::sync::{AtomicU64, Ordering};

/// One queue on the heap, for claim algorithm `C`.
pub struct ModelQueue<C: Claim> {
    /// The senders' state, initialized in place by `C::init` (as in a
    /// segment) and dropped with the queue.
    tail: Box<MaybeUninit<C::Tail>>,
    head: HeadInfo,
    packets: Vec<Packet>,
    bulk: Vec<BulkSlot>,
    /// `bulk.len() * bulk_bytes` bytes of bulk data, written through the
    /// view's raw pointer (hence the `UnsafeCell`s).
    data: Box<[UnsafeCell<u8>]>,
    bulk_bytes: usize,
    /// One loom-checked cell per bulk block (module docs).
    shadow: Vec<loom::cell::UnsafeCell<u64>>,
    /// Senders (lanes, under an algorithm with lanes).
    senders: u32,
    /// The receiver's lanes to poll besides the announced ones (only the
    /// receiver's thread touches it, so it is not a loom atomic).
    unannounced: std::sync::atomic::AtomicU64,
    /// The queue owner's doorbell (rung by [`ModelQueue::send`] under an
    /// algorithm with lanes).
    bell: crate::sync::AtomicU32,
}

// SAFETY: the tail, head, packets and bulk words are `Sync` (atomics and
// loom cells); the bulk bytes are only touched through `Queue` views by
// whoever owns the block under the handshake protocol, and the shadow
// cells at the same points (loom checks those accesses).
unsafe impl<C: Claim> Sync for ModelQueue<C> {}
// SAFETY: nothing in it is tied to a thread.
unsafe impl<C: Claim> Send for ModelQueue<C> {}

impl<C: Claim> core::fmt::Debug for ModelQueue<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ModelQueue")
            .field("algorithm", &C::NAME)
            .field("packets", &self.packets.len())
            .field("bulk_blocks", &self.bulk.len())
            .field("bulk_bytes", &self.bulk_bytes)
            .finish_non_exhaustive()
    }
}

impl<C: Claim> ModelQueue<C> {
    /// A fresh queue of `packets` packets and `bulk_blocks` blocks of
    /// `bulk_bytes` bytes, every handshake word FREE for lap 0. Sizes the
    /// endpoint's `Config` would reject (one packet, tiny blocks) are fine
    /// here: the protocol does not depend on them. Call it inside a loom
    /// model (the atomics and cells are loom's).
    pub fn new(packets: usize, bulk_blocks: usize, bulk_bytes: usize) -> Self {
        Self::for_senders(1, packets, bulk_blocks, bulk_bytes)
    }

    /// A queue for `senders` senders (ranks `0..senders`) of `packets`
    /// packets (per sender, under an algorithm with lanes).
    pub fn for_senders(
        senders: u32,
        packets: usize,
        bulk_blocks: usize,
        bulk_bytes: usize,
    ) -> Self {
        assert!(packets >= 1, "a queue needs a packet");
        let packets = packets * crate::claim::lanes::<C>(senders);
        let mut tail = Box::new(MaybeUninit::<C::Tail>::uninit());
        // SAFETY: a fresh, aligned allocation that nobody else uses.
        unsafe { C::init(tail.as_mut_ptr()) };
        Self {
            tail,
            head: HeadInfo::new(),
            packets: (0..packets).map(|_| Packet::new()).collect(),
            bulk: (0..bulk_blocks)
                .map(|_| BulkSlot::new(AtomicU64::new(word(0, 0, FREE))))
                .collect(),
            data: (0..bulk_blocks * bulk_bytes)
                .map(|_| UnsafeCell::new(0))
                .collect(),
            bulk_bytes,
            shadow: (0..bulk_blocks)
                .map(|_| loom::cell::UnsafeCell::new(0))
                .collect(),
            senders,
            unannounced: std::sync::atomic::AtomicU64::new(0),
            bell: crate::sync::AtomicU32::new(crate::bell::AWAKE),
        }
    }

    /// The doorbell of the queue's owner.
    pub fn bell(&self) -> &crate::sync::AtomicU32 {
        &self.bell
    }

    /// Receiver: announces that it may sleep (`bell::doze`), first
    /// clearing the lanes' announcements (under an algorithm with lanes),
    /// which the following [`recv`](ModelQueue::recv) calls poll until
    /// found drained; as the endpoint's `sleep` does.
    pub fn doze(&self) {
        let forgot = C::forget(self.queue().tail);
        self.unannounced
            .fetch_or(forgot, std::sync::atomic::Ordering::Relaxed);
        crate::bell::doze(&self.bell);
    }

    /// The view that [`send`], [`recv`] and the claim algorithms work on.
    pub fn queue(&self) -> Queue<'_, C::Tail> {
        Queue {
            // SAFETY: initialized by `C::init` in `new`.
            tail: unsafe { self.tail.assume_init_ref() },
            head: &self.head,
            packets: &self.packets,
            bulk: &self.bulk,
            // The cells make the bytes writable through a pointer derived
            // from a shared reference.
            bulk_data: UnsafeCell::raw_get(self.data.as_ptr()),
            bulk_bytes: self.bulk_bytes,
            shift: crate::layout::shift_for(self.packets.len()),
        }
    }

    /// Position of the next message to deliver (messages delivered so far).
    pub fn delivered(&self) -> u64 {
        if C::PER_SENDER {
            let q = self.queue();
            return (0..self.senders)
                .map(|r| {
                    C::lane(&q, r, self.senders)
                        .head
                        .pos
                        .load(Ordering::Relaxed)
                })
                .sum();
        }
        self.head.pos.load(Ordering::Relaxed)
    }

    /// Whether nothing is claimed or waiting: every bulk block FREE, and
    /// every packet FREE (where the receiver frees packets) or at least
    /// not CLAIMED (where it leaves consumed words as they were).
    /// Meaningful once every sender has been joined and every message
    /// delivered.
    pub fn is_quiescent(&self) -> bool {
        // Acquire: pairs with the last Release store of each word (the
        // joined senders' are ordered by the join anyway).
        let packets_done = self.packets.iter().all(|p| {
            let st = state_of(p.state.load(Ordering::Acquire));
            if C::RECEIVER_FREES {
                st == FREE
            } else {
                st != CLAIMED
            }
        });
        packets_done
            && self
                .bulk
                .iter()
                .all(|b| state_of(b.load(Ordering::Acquire)) == FREE)
    }

    /// Sends one message (with bulk `data` if given) from sender `pid`:
    /// the endpoint's send, plus the shadow write of the bulk block.
    pub fn send<W>(
        &self,
        pid: u32,
        hint: &mut Hint,
        body: Body,
        data: Option<&[u8]>,
        wait: &mut W,
    ) -> Result<Claimed, AmError>
    where
        W: FnMut() -> Result<(), AmError>,
    {
        let lane = C::lane(&self.queue(), body.src, self.senders);
        let c = send::<C, W>(&lane, pid, hint, body, data, wait, |c| {
            if let (Some(d), Some((b, _))) = (data, c.bulk) {
                // The block is ours from the claim until the receiver frees
                // it: loom checks that no other access races this one.
                self.shadow[b].with_mut(|p| {
                    // SAFETY: loom's cell hands out the pointer for this
                    // access only.
                    unsafe { *p = checksum(d) }
                });
            }
        })?;
        if C::PER_SENDER {
            let me = crate::claim::Holder {
                pid,
                rank: body.src,
            };
            crate::bell::ring(&self.bell, || C::announce(&lane, me));
        }
        Ok(c)
    }

    /// Sends as [`ModelQueue::send`] up to the point where the claim is
    /// owned, then stops as a killed sender would: the position (and
    /// bulk block) is taken and never published. The caller then marks
    /// `pid` dead ([`kill`]).
    pub fn claim_and_die<W>(
        &self,
        pid: u32,
        hint: &mut Hint,
        bulk: bool,
        wait: &mut W,
    ) -> Result<Claimed, AmError>
    where
        W: FnMut() -> Result<(), AmError>,
    {
        C::claim(&self.queue(), holder(pid), hint, bulk, wait)
    }

    /// Has sender `pid` handed a packet position that it never claims, as
    /// a sender killed between assignment and claim would (LC98 Fig. 3's
    /// two steps); the caller then marks `pid` dead ([`kill`]). False for
    /// algorithms without such a step.
    pub fn assign_and_die(&self, pid: u32) -> bool {
        C::debug_assign_only(&self.queue(), holder(pid))
    }

    /// The endpoint's repair of a stuck head (`Endpoint::unstick`'s skip of
    /// a position handed out and never shown): if the head position is
    /// handed out, its packet shows no claim of it, and the claim
    /// algorithm finds a sender that will never show it dead
    /// ([`Claim::owner_dead`]), stamp its slot for the next lap and
    /// advance the head past it. Whether it skipped. (A CLAIMED packet of
    /// a dead sender, which the endpoint recovers by its pid, is not
    /// modelled.)
    pub fn repair(&self) -> bool {
        let q = self.queue();
        let (pos, w) = q.head();
        if crate::claim::skippable::<C>(&q, pos, w) && q.next_lap(pos, w) {
            q.advance(pos);
            return true;
        }
        false
    }

    /// Delivers the head message, if READY, to `handler` (body and bulk
    /// bytes), then frees it; `None` when the head is not READY. Panics if
    /// the bulk bytes differ from what the sender wrote.
    pub fn recv<R>(&self, handler: impl FnOnce(&Body, &[u8]) -> R) -> Option<R> {
        let mut q = self.queue();
        if C::PER_SENDER {
            q = self.announced_lane()?;
        }
        recv::<C, _>(&q, |body, bulk, slot| {
            if let Some(b) = slot {
                // After `take`, before `free`: where the handler reads the
                // block.
                // SAFETY: loom's cell hands out the pointer for this access
                // only.
                let sum = self.shadow[b].with(|p| unsafe { *p });
                assert_eq!(sum, checksum(bulk), "bulk block {b} arrived damaged");
            }
            handler(body, bulk)
        })
    }
}

impl<C: Claim> ModelQueue<C> {
    /// The first lane, among those announced or left to poll after a doze,
    /// whose head holds a message; lanes left to poll that hold none are
    /// dropped from that list.
    fn announced_lane(&self) -> Option<Queue<'_, C::Tail>> {
        use std::sync::atomic::Ordering::Relaxed;
        let q = self.queue();
        let all = (1u64 << self.senders) - 1;
        let mut todo = (C::announced(q.tail) | self.unannounced.load(Relaxed)) & all;
        while todo != 0 {
            let r = todo.trailing_zeros();
            todo &= todo - 1;
            let lane = C::lane(&q, r, self.senders);
            let (pos, w) = lane.head();
            if lane.ready(w, pos, C::RECEIVER_FREES).is_some() {
                return Some(lane);
            }
            self.unannounced.fetch_and(!(1 << r), Relaxed);
        }
        None
    }
}

impl<C: Claim> Drop for ModelQueue<C> {
    fn drop(&mut self) {
        // SAFETY: initialized in `new`, dropped once.
        unsafe { self.tail.assume_init_drop() };
    }
}

/// The sender identity of `pid` in a model: ranks index per-sender state
/// (`stamp`'s intents), so distinct senders need distinct ranks; the
/// models' pids (100 + sender) give them as `pid mod MAX_RANKS`.
fn holder(pid: u32) -> crate::claim::Holder {
    crate::claim::Holder {
        pid,
        rank: pid % crate::MAX_RANKS as u32,
    }
}

pub use crate::claim::{kill, revive_all};

/// The doorbell word's value while its receiver polls (see `bell.rs`).
pub const AWAKE: u32 = crate::bell::AWAKE;

/// A sender's ring after its publication (`bell::ring`; under loom the
/// futex wake is a no-op, and the word shows whether it was rung).
pub fn ring(bell: &crate::sync::AtomicU32) {
    crate::bell::ring(bell, || {});
}

/// A receiver's announcement that it may sleep (`bell::doze`): poll once
/// more after it, and sleep only if that finds nothing.
pub fn doze(bell: &crate::sync::AtomicU32) {
    crate::bell::doze(bell);
}

/// FNV-1a of the bytes, with the length.
fn checksum(d: &[u8]) -> u64 {
    d.iter()
        .fold(0xcbf2_9ce4_8422_2325 ^ d.len() as u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// The endpoint's send on `q`: `C::try_claim` for a short message, else
/// `C::claim` (calling `wait` while the queue is full), `before_publish` (a hook for instrumentation, at the point
/// where the claim is owned but nothing is written yet), then
/// [`Queue::publish`].
pub fn send<C: Claim, W>(
    q: &Queue<'_, C::Tail>,
    pid: u32,
    hint: &mut Hint,
    body: Body,
    data: Option<&[u8]>,
    wait: &mut W,
    before_publish: impl FnOnce(&Claimed),
) -> Result<Claimed, AmError>
where
    W: FnMut() -> Result<(), AmError>,
{
    // As the endpoint: the fast path for a short message, else the claim
    // that may wait.
    let fast = match data {
        None => C::try_claim(q, holder(pid), hint),
        Some(_) => None,
    };
    let c = match fast {
        Some(c) => c,
        None => C::claim(q, holder(pid), hint, data.is_some(), wait)?,
    };
    before_publish(&c);
    let nargs = (body.nargs as usize).min(crate::layout::MAX_ARGS);
    q.publish(&c, body.handler, body.src, &body.args[..nargs], data);
    Ok(c)
}

/// One step of the endpoint's poll on `q`: if the head packet is READY (or
/// READY_BULK), take it, run `handler` with its body, its bulk bytes and
/// its bulk block index (the packet is handed back once its body is copied,
/// the block after the handler), and return the handler's
/// result; otherwise `None`.
pub fn recv<C: Claim, R>(
    q: &Queue<'_, C::Tail>,
    handler: impl FnOnce(&Body, &[u8], Option<usize>) -> R,
) -> Option<R> {
    let (pos, w) = q.head();
    let st = q.ready(w, pos, C::RECEIVER_FREES)?;
    let body = q.take(pos, st == READY_BULK);
    q.release(pos, w, C::RECEIVER_FREES);
    let mut bulk: &[u8] = &[];
    let mut bulk_slot = None;
    if st == READY_BULK {
        let b = body.bulk_slot as usize;
        if b < q.bulk.len() && body.bulk_len as usize <= q.bulk_bytes {
            // SAFETY: as in the endpoint's poll: the block is in bounds and
            // was filled before the READY store we acquired; it stays
            // untouched until we free it below.
            bulk = unsafe { core::slice::from_raw_parts(q.bulk_ptr(b), body.bulk_len as usize) };
            bulk_slot = Some(b);
        }
    }
    let r = handler(&body, bulk, bulk_slot);
    if let Some(b) = bulk_slot {
        q.free_bulk(b);
    }
    Some(r)
}
