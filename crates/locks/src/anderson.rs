//! `anderson`: the array-based queue lock of ALL89 Table IV (Anderson 1990).
//!
//! State: `next`, the next sequence number ("queueLast" in the paper), and
//! `P` cache-padded slots. ALL89 keeps a HAS_LOCK/MUST_WAIT flag per slot and
//! resets it on entry; here a slot holds the *sequence number it grants*:
//! waiter `t` spins on `slots[t mod P]` until it reads `t`, and the holder of
//! `t` releases by storing `t + 1` into `slots[(t + 1) mod P]`. Invariants:
//! the holder is the owner of the largest granted number; exactly one slot
//! grants a number that has been handed out but not yet released.
//!
//! Behaviour is the paper's (one `fetch_add` per acquisition, each waiter
//! spins on its own cache line, release is a plain store, FIFO) while there
//! are at most `P` contenders. **Past `P` contenders** the paper's boolean
//! flags would let two waiters share one flag and break mutual exclusion;
//! with granted-number slots, waiters `t` and `t + P` share a slot's cache
//! line but each waits for its own number, so the lock stays correct and
//! FIFO and merely loses its locality (it degrades to a ticket lock for the
//! extra waiters). Slot values start one lap behind (`i - P`), so no slot
//! grants a number it has not been handed until the counter wraps a
//! `usize`. `#[repr(C)]`, pointer-free: valid in shared memory.

use crossbeam_utils::CachePadded;

use crate::registry::GuardWord;
use crate::sync::{AtomicUsize, Ordering, spin_hint};

/// Anderson's array queue lock with `P` slots (default 32: 4 KiB).
#[repr(C)]
#[derive(Debug)]
pub struct Anderson<const P: usize = 32> {
    /// Next sequence number to hand out.
    next: CachePadded<AtomicUsize>,
    /// `slots[i]` holds the last sequence number `≡ i (mod P)` granted.
    slots: [CachePadded<AtomicUsize>; P],
}

/// Guard state of the array lock: the holder's sequence number.
#[derive(Debug)]
pub struct AndersonToken(usize);

// SAFETY: the word is the sequence number itself.
unsafe impl GuardWord for AndersonToken {
    #[inline(always)]
    fn into_word(self) -> usize {
        self.0
    }
    #[inline(always)]
    unsafe fn from_word(w: usize) -> Self {
        AndersonToken(w)
    }
}

impl<const P: usize> Anderson<P> {
    const CHECK: () = assert!(P > 0, "Anderson lock needs at least one slot");

    /// A free lock: slot 0 grants number 0, every other slot grants the
    /// number one lap before its first.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        let () = Self::CHECK;
        let mut slots = [const { CachePadded::new(AtomicUsize::new(0)) }; P];
        let mut i = 1;
        while i < P {
            slots[i] = CachePadded::new(AtomicUsize::new(i.wrapping_sub(P)));
            i += 1;
        }
        Self {
            next: CachePadded::new(AtomicUsize::new(0)),
            slots,
        }
    }

    /// A free lock (loom build).
    #[cfg(loom)]
    pub fn new() -> Self {
        let () = Self::CHECK;
        let slots = core::array::from_fn(|i| {
            CachePadded::new(AtomicUsize::new(if i == 0 { 0 } else { i.wrapping_sub(P) }))
        });
        Self {
            next: CachePadded::new(AtomicUsize::new(0)),
            slots,
        }
    }

    #[inline(always)]
    fn slot(&self, n: usize) -> &AtomicUsize {
        &self.slots[n % P]
    }

    #[cold]
    #[inline(never)]
    fn wait_for(&self, n: usize) {
        let slot = self.slot(n);
        // Acquire: pairs with the Release store in `unlock`.
        while slot.load(Ordering::Acquire) != n {
            spin_hint();
        }
    }
}

impl<const P: usize> Default for Anderson<P> {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: sequence numbers are unique (fetch_add / CAS on `next`); number n
// is granted only by the Release store of the holder of n - 1 (or at
// construction for 0), and waiters read it with Acquire.
unsafe impl<const P: usize> lock_api::RawMutex for Anderson<P> {
    crate::raw_init!();
    type Guard = AndersonToken;

    #[inline]
    fn lock(&self) -> Self::Guard {
        // Relaxed: uniqueness only; the Acquire is on the slot read.
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        // Acquire: pairs with the Release store in `unlock`.
        if self.slot(n).load(Ordering::Acquire) != n {
            self.wait_for(n);
        }
        AndersonToken(n)
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        let n = self.next.load(Ordering::Relaxed);
        // Acquire: pairs with the Release store that granted n. If the CAS
        // succeeds, number n is ours and already granted.
        if self.slot(n).load(Ordering::Acquire) != n {
            return None;
        }
        self.next
            .compare_exchange(n, n.wrapping_add(1), Ordering::Relaxed, Ordering::Relaxed)
            .ok()
            .map(AndersonToken)
    }

    #[inline]
    unsafe fn unlock(&self, guard: Self::Guard) {
        let next = guard.0.wrapping_add(1);
        // Release: pairs with the Acquire load of the waiter holding `next`.
        self.slot(next).store(next, Ordering::Release);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        let n = self.next.load(Ordering::Relaxed);
        self.slot(n).load(Ordering::Relaxed) != n
    }
}

// FIFO: `unlock` hands the lock to the next sequence number.
crate::fifo_fair!([const P: usize] Anderson<P>);
