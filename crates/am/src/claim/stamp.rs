//! `stamp`: one CAS per claim, guarded by a per-slot lap stamp (the form
//! of Vyukov's bounded MPMC queue, here many-to-one); the modern
//! comparison point for LC98's algorithms.
//!
//! A sender reads the tail position `p` and the handshake word of slot
//! `p mod len`. If the word says FREE for lap `p / len`, the slot is
//! available to position `p`, and one CAS of the tail from `p` to `p + 1`
//! makes it the sender's; the sender then records CLAIMED with its pid.
//! If the word still carries an older lap, the receiver has not consumed
//! the slot yet: the queue is full, so the sender backs off and polls. Any
//! other word means another sender took `p` meanwhile: re-read the tail.
//!
//! Compared with `lock-free`, the claim costs one CAS instead of two (three
//! shared lines touched become two) and senders never compete for one
//! packet, at the price of the stamp check. Between the tail CAS and the
//! CLAIMED store the slot is owned but still reads FREE; a sender killed in
//! that window of a few instructions is not recoverable by pid (documented
//! limitation; LC98's lock-free claim has the same window between its two
//! CAS).
//!
//! State: [`StampTail`], the same two running positions as `lock-free`.
//! Invariant: position `p` is handed out once, by the CAS from `p` to
//! `p + 1`, and only after slot `p mod len` was freed for lap `p / len`.

use crossbeam_utils::CachePadded;

use super::{Claim, Claimed};
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
    // Relaxed: the position is validated by the stamp and the CAS.
    let mut p = tail.load(Ordering::Relaxed);
    loop {
        let slot = (p % len64) as usize;
        let lap = (p / len64) as u32;
        let state = words(slot);
        // Acquire: pairs with the receiver's Release store that freed the
        // slot for this lap, so its reads of the old contents happen
        // before our writes.
        let w = state.load(Ordering::Acquire);
        if w == word(lap, 0, FREE) {
            // Relaxed: the Acquire above already ordered the slot; the CAS
            // only has to make `p` ours alone.
            match tail.compare_exchange_weak(p, p + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    let c = word(lap, pid, CLAIMED);
                    // Release: pairs with the Acquire load above in a
                    // sender that still holds the old tail `p`: once it
                    // sees CLAIMED, our tail CAS happens before its next
                    // tail load, which therefore returns at least `p + 1`.
                    // With Relaxed, the C11 model lets that sender re-read
                    // the stale `p` forever (loom finds the livelock).
                    // The pid is for the receiver's dead-sender recovery.
                    state.store(c, Ordering::Release);
                    return Ok((slot, c));
                }
                Err(now) => p = now,
            }
        } else if (lap.wrapping_sub(lap_of(w)) as i32) > 0 {
            // The slot still holds lap - 1: full.
            full(wait)?;
            p = tail.load(Ordering::Relaxed);
        } else {
            // Another sender took `p`: the tail is past it, and this load
            // sees that (the Release store of CLAIMED, or the later Release
            // stores of READY and FREE, orders the tail CAS before it).
            p = tail.load(Ordering::Relaxed);
        }
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
        pid: u32,
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
                pid,
                wait,
            )?)
        } else {
            None
        };
        let (slot, word) = take(
            &q.tail.packets,
            q.packets.len(),
            |i| &q.packets[i].state,
            pid,
            wait,
        )?;
        Ok(Claimed { slot, word, bulk })
    }
}
