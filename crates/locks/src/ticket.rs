//! `ticket` and `ticket-proportional`: the ticket lock (LC98 §3.1;
//! Mellor-Crummey & Scott 1991), with optional proportional backoff.
//!
//! State words, both in one cache line as LC98 found fastest:
//! `next` (the next ticket to hand out) and `serving` (the ticket now
//! allowed in). Invariants: `serving <= next` (mod 2^32); the lock is held
//! iff `serving != next`; the holder is the owner of ticket `serving`.
//!
//! `lock` takes a ticket with one `fetch_add` (hardware FETCH&ADD on x86 and
//! Arm, so, unlike LC98's CAS-built one, strictly FIFO and starvation-free)
//! and waits until `serving` reaches it; `unlock` stores `ticket + 1` into
//! `serving`. With [`Proportional`] waiting, a waiter `d` places from the
//! front pauses `d * UNIT` spin iterations between reads, so that the line
//! is read roughly once per hand-over instead of continuously.
//! `#[repr(C)]`, pointer-free: valid in shared memory.

use core::marker::PhantomData;

use crate::registry::GuardWord;
use crate::sync::{AtomicU32, Ordering, delay, maybe_const_fn, spin_hint};

/// How a ticket-lock waiter paces its reads of `serving`.
pub trait TicketWait {
    /// Called between reads; `distance` is how many tickets are ahead of
    /// the waiter (at least 1).
    fn wait(distance: u32);
}

/// Re-read `serving` continuously (one spin hint between reads).
#[derive(Debug)]
pub struct Spin;
impl TicketWait for Spin {
    #[inline(always)]
    fn wait(_distance: u32) {
        spin_hint();
    }
}

/// Proportional backoff: pause `distance * UNIT` spin iterations.
#[derive(Debug)]
pub struct Proportional<const UNIT: u32 = 32>;
impl<const UNIT: u32> TicketWait for Proportional<UNIT> {
    #[inline(always)]
    fn wait(distance: u32) {
        delay(distance.saturating_mul(UNIT));
    }
}

/// Ticket lock generic over its waiting policy.
#[repr(C)]
#[derive(Debug)]
pub struct TicketLock<W: TicketWait = Spin> {
    /// Next ticket to hand out.
    next: AtomicU32,
    /// Ticket currently allowed to hold the lock.
    serving: AtomicU32,
    _wait: PhantomData<fn() -> W>,
}

/// Ticket lock that spins on `serving`.
pub type Ticket = TicketLock<Spin>;
/// Ticket lock with proportional backoff.
pub type TicketProportional = TicketLock<Proportional>;

/// Guard state of a ticket lock: the holder's ticket.
#[derive(Debug)]
pub struct TicketToken(u32);

// SAFETY: the word is the ticket itself.
unsafe impl GuardWord for TicketToken {
    #[inline(always)]
    fn into_word(self) -> usize {
        self.0 as usize
    }
    #[inline(always)]
    unsafe fn from_word(w: usize) -> Self {
        TicketToken(w as u32)
    }
}

impl<W: TicketWait> TicketLock<W> {
    maybe_const_fn! {
        /// A free lock.
        pub fn new() -> Self {
            Self { next: AtomicU32::new(0), serving: AtomicU32::new(0), _wait: PhantomData }
        }
    }

    #[cold]
    #[inline(never)]
    fn wait_for(&self, ticket: u32) {
        loop {
            // Acquire: pairs with the Release store of `serving` in `unlock`.
            let serving = self.serving.load(Ordering::Acquire);
            if serving == ticket {
                return;
            }
            W::wait(ticket.wrapping_sub(serving));
        }
    }
}

impl<W: TicketWait> Default for TicketLock<W> {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: tickets are unique (fetch_add / CAS on `next`), and only the owner
// of ticket `serving` returns from `lock`; `unlock` advances `serving` with
// Release and waiters read it with Acquire.
unsafe impl<W: TicketWait> lock_api::RawMutex for TicketLock<W> {
    crate::raw_init!();
    type Guard = TicketToken;

    #[inline]
    fn lock(&self) -> Self::Guard {
        // Relaxed: the ticket only needs to be unique; the Acquire is on
        // the read of `serving`.
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        // Acquire: pairs with the Release store in `unlock`.
        if self.serving.load(Ordering::Acquire) != ticket {
            self.wait_for(ticket);
        }
        TicketToken(ticket)
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        // Acquire: pairs with the Release store in `unlock`; if the CAS
        // below succeeds, nobody else took ticket `serving`, so it is ours
        // and granted.
        let serving = self.serving.load(Ordering::Acquire);
        self.next
            .compare_exchange(
                serving,
                serving.wrapping_add(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .ok()
            .map(TicketToken)
    }

    #[inline]
    unsafe fn unlock(&self, guard: Self::Guard) {
        // Release: pairs with the Acquire load of the next ticket holder.
        self.serving
            .store(guard.0.wrapping_add(1), Ordering::Release);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.serving.load(Ordering::Relaxed) != self.next.load(Ordering::Relaxed)
    }
}

// FIFO: `unlock` hands the lock to the next ticket holder.
crate::fifo_fair!([W: TicketWait] TicketLock<W>);
