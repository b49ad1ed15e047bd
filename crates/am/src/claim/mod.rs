//! Claim algorithms: how concurrent senders take a packet (and a bulk
//! block) of a destination queue (LC98 §3).
//!
//! Every algorithm implements [`Claim`], selected at compile time
//! (`Endpoint<Stamp>`) or by name through [`for_each_claim!`](crate::for_each_claim). The
//! receiver's side (poll, free, recovery) is one code for all of them,
//! steered by the trait's constants and hooks: whether the receiver frees
//! packets ([`Claim::RECEIVER_FREES`]), and how it tells a position a
//! dead sender holds up ([`Claim::stranded`], [`Claim::owner_dead`]);
//! the handshake words are
//! described in [`crate::layout`].
//!
//! | name | type | LC98 | claim |
//! |---|---|---|---|
//! | `tas` | [`TasClaim`] | §3.1 | Fig. 2 under a test-and-set lock |
//! | `ttas` | [`TtasClaim`] | §3.1 | Fig. 2 under a test-and-test-and-set lock |
//! | `ticket` | [`TicketClaim`] | §3.1 | Fig. 2 under a ticket lock |
//! | `anderson` | [`AndersonClaim`] | §3.1 | Fig. 2 under Anderson's array lock |
//! | `pthread` | [`PthreadClaim`] | §3.1 | Fig. 2 under a process-shared, robust pthread mutex |
//! | `lock-free` | [`LockFree`] | §3.2, Fig. 3 | CAS the tail, then CAS the packet FREE -> CLAIMED |
//! | `stamp` | [`Stamp`] | (modern) | one CAS on the tail, guarded by a per-slot lap stamp; the receiver publishes its head instead of freeing packets |
//! | `rings` | [`Rings`] | (modern) | no atomic step: one single-producer ring (lane) per sender, `stamp`'s lap stamps, a summary word of the lanes to poll |

//!
//! # Cache-line transfers per message
//!
//! What a message costs in coherence traffic, counted from the code as
//! Linux's qspinlock documents its transitions: lines that move between
//! the sender's core and the receiver's (a read of a line the other last
//! wrote, or a write to a line the other holds), per message, in the
//! steady state of one sender and one receiver whose ring is never full
//! (`len` packets). The floor is the message itself: the sender takes the
//! packet's line, which the receiver holds because it polls the head
//! packet's word, and the receiver pulls it back: 2, the one-way trip of
//! a cache-line ping-pong. A round trip (request and reply) is twice a
//! message.
//!
//! | algorithm | packet line | other lines | per message | with `k` senders, more |
//! |---|---|---|---|---|
//! | `stamp` | sender writes READY (1), receiver reads it (1) | head: the receiver's store, which the sender reads once per lap (2 / `len`) | 2 + 2/`len` | the tail line moves between senders at each CAS (about 1) |
//! | `lock-free` | sender's CAS FREE -> CLAIMED takes the line the receiver freed (1), receiver reads READY (1), frees it (1) | none | 3 | as `stamp` |
//! | `rings` | as `stamp` (2) | head: as `stamp` (2 / `len`); the summary word, while the sender's bit stays set, is only read | 2 + 2/`len` | none: each sender has its own lane, and the summary line moves only when the receiver dozes |
//! | locked (`tas` ... `pthread`) | sender reads FREE (1) and writes CLAIMED (1), receiver reads READY (1), frees it (1) | the lock's line stays with a lone sender | 4 | the lock's line moves at each acquisition, and waiters' reads add more |
//!
//! `stamp` and `rings` are at the floor with one sender; with several,
//! only `rings` is.
//! The doorbell ([`crate::endpoint`]'s "Idle waits") adds nothing while
//! the receiver polls: its word shares the segment header's line with the
//! closed flag, which every sender reads already and nobody writes.

use crate::error::AmError;
use crate::layout::Queue;

#[cfg(not(loom))]
pub mod lock;
pub mod lock_free;
#[cfg(not(loom))]
pub mod locked;
#[cfg(not(loom))]
pub mod pthread;
pub mod rings;
pub mod stamp;

pub use lock_free::LockFree;
#[cfg(not(loom))]
pub use locked::{AndersonClaim, Locked, ShmLock, TasClaim, TicketClaim, TtasClaim};
#[cfg(not(loom))]
pub use pthread::{PthreadClaim, PthreadShm};
pub use rings::Rings;
pub use stamp::Stamp;

/// The default claim algorithm: [`Rings`], which keeps every guarantee of
/// [`Stamp`] (a killed sender costs only its own message; each sender's
/// messages arrive in order) with no atomic step per send. `Config::packets`
/// is per sender under it, so a segment grows with the job's size.
pub type DefaultClaim = Rings;

pub use crate::layout::Claimed;

/// Whether `pid` is a dead process (under loom, one the model killed:
/// [`kill`]).
#[cfg(not(loom))]
pub(crate) fn dead(pid: u32) -> bool {
    lock::dead(pid)
}
#[cfg(loom)]
pub(crate) fn dead(pid: u32) -> bool {
    DEAD.with(|d| d.borrow().contains(&pid))
}

std::thread_local! {
    /// Pids the running model has killed. Loom runs a model's threads on
    /// the test's OS thread, one at a time, so this is the model's view of
    /// the operating system: a death is seen by every step after it.
    static DEAD: core::cell::RefCell<Vec<u32>> = const { core::cell::RefCell::new(Vec::new()) };
}
/// Marks `pid` dead for the rest of the model's execution (the loom
/// models' `model` module re-exports it).
pub fn kill(pid: u32) {
    DEAD.with(|d| d.borrow_mut().push(pid));
}
/// Forgets every death (call at the start of each execution).
pub fn revive_all() {
    DEAD.with(|d| d.borrow_mut().clear());
}

/// Whether the receiver may skip its head position `pos`, whose packet
/// word is `w`: the word shows neither a message for `pos` nor a claim
/// the receiver recovers by its pid, the position was handed out
/// ([`Claim::stranded`]), and every sender that may hold it is dead
/// ([`Claim::owner_dead`]). The endpoint's repair and the loom models'
/// ask this one question; a READY word is never skipped, even if its
/// sender has died since it published.
pub(crate) fn skippable<C: Claim>(q: &Queue<'_, C::Tail>, pos: u64, w: u64) -> bool {
    q.ready(w, pos, C::RECEIVER_FREES).is_none()
        && !(C::RECEIVER_FREES && crate::layout::state_of(w) == crate::layout::CLAIMED)
        && C::stranded(q.tail, pos)
        && C::owner_dead(q, pos, w)
}

/// Bits of a position kept in an intent word (`stamp`, `lock-free`):
/// positions are compared modulo 2^40 (a stale intent would have to be
/// 10^12 messages old to match).
pub(crate) const POS_BITS: u32 = 40;
/// The position bits of an intent word.
pub(crate) const POS_MASK: u64 = (1 << POS_BITS) - 1;

/// An intent word: the pid's low 24 bits, then position + 1 (0: none).
#[inline(always)]
pub(crate) const fn intent(pid: u32, pos: u64) -> u64 {
    (((pid as u64) & 0x00ff_ffff) << POS_BITS) | (pos.wrapping_add(1) & POS_MASK)
}

/// Who is taking a lock or a packet: the process and its rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    /// The process id (the low 24 bits are recorded in handshake words).
    pub pid: u32,
    /// The rank of the endpoint that sends (`< MAX_RANKS`).
    pub rank: u32,
}

/// What a sender remembers of one destination queue between claims, in
/// its private memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hint {
    /// The receiver's head as last read: every position below it is
    /// consumed (used where the receiver does not free packets, so that
    /// the shared head is read once per ring, not once per message).
    pub head: u64,
    /// The next position of the sender's own lane (`rings`, whose lanes
    /// have one sender and so keep their tail in its private memory).
    pub tail: u64,
}

/// How many lanes a queue of a job of `size` ranks has: one per sender
/// under an algorithm with [`Claim::PER_SENDER`], else one, shared.
#[inline(always)]
pub fn lanes<C: Claim>(size: u32) -> usize {
    if C::PER_SENDER { size as usize } else { 1 }
}

/// A concurrent-access algorithm for claiming packets of a queue.
///
/// # Contract
///
/// `claim` returns each packet position (and bulk block) to exactly one
/// caller, and only once the receiver is done with its previous contents:
/// it observes (Acquire) the receiver's Release store that freed the
/// packet (LC98's handshake) or that moved the head past it (`stamp`), so
/// that the caller may overwrite the body. Where the handshake word is
/// claimed (FREE to CLAIMED, keeping the lap), the claimer's pid goes into
/// it; `stamp` records the pid in its tail's intents instead. While
/// it cannot claim (the queue is full), it calls `wait`, which backs off and
/// polls the caller's own endpoint (LC98's deadlock avoidance) and returns
/// an error when the receiver has died; `claim` passes that error on. A
/// bulk claim takes the bulk block before the packet (LC98 §3.2).
pub trait Claim: Sized + Send + Sync + 'static {
    /// Registry name (`tas`, `lock-free`, ...).
    const NAME: &'static str;
    /// The senders' state of one queue, in shared memory: `#[repr(C)]`,
    /// pointer-free, valid in every process that maps it.
    type Tail: Send + Sync + core::fmt::Debug;

    /// Initializes a tail in place.
    ///
    /// # Safety
    ///
    /// `tail` is valid for writes and aligned, and nobody uses it yet.
    unsafe fn init(tail: *mut Self::Tail);

    /// Whether the receiver frees each packet by writing its word (LC98's
    /// handshake: FREE for the next lap). If not, the receiver leaves the
    /// word as the sender wrote it and only publishes its head; a sender
    /// then knows a packet is consumed from the head ([`Hint`] caches it),
    /// and the publication stamps the word with the next lap. One cache line less
    /// moves per message: the packet's line is not dirtied by the receiver
    /// between two claims of it.
    const RECEIVER_FREES: bool = true;

    /// Whether one sender's messages to one queue are delivered in the
    /// order it sent them. True for every algorithm but LC98's lock-free
    /// claim, whose sender may win its packet only on a later lap than a
    /// message it sends after it.
    const SENDER_FIFO: bool = true;

    /// Whether each sender has its own lane (a single-producer ring) in
    /// each queue, instead of all sharing the queue's one ring. With lanes
    /// the queue's ring holds [`lanes`] x `packets` packets; a sender
    /// claims in its lane ([`Claim::lane`]), announces it after the READY
    /// store ([`Claim::announce`]), and the receiver polls the lanes
    /// announced ([`Claim::announced`]) and clears the announcements when
    /// it dozes ([`Claim::forget`]).
    const PER_SENDER: bool = false;

    /// The view sender rank `r` claims in, of queue `q` of a job of `size`
    /// ranks; the receiver delivers from the same views. The default: the
    /// queue itself (one lane).
    #[inline(always)]
    fn lane<'a>(q: &Queue<'a, Self::Tail>, _r: u32, _size: u32) -> Queue<'a, Self::Tail> {
        *q
    }

    /// Sender, after its READY store and the doorbell's light fence: makes
    /// its lane one the receiver polls. The default: nothing (one lane,
    /// always polled).
    #[inline(always)]
    fn announce(_q: &Queue<'_, Self::Tail>, _me: Holder) {}

    /// Receiver: the lanes that may hold messages, bit `r` for lane `r`
    /// (only read where [`Claim::PER_SENDER`]).
    #[inline(always)]
    fn announced(_tail: &Self::Tail) -> u64 {
        1
    }

    /// Receiver, before the doorbell's heavy fence: clears the
    /// announcements and returns them; the receiver polls those lanes once
    /// more after the fence.
    #[inline(always)]
    fn forget(_tail: &Self::Tail) -> u64 {
        0
    }

    /// Whether the receiver's head position `pos`, which holds no message
    /// and no claim the receiver can see, was handed out to a sender (the
    /// algorithm hands out positions before the packet shows it). The
    /// default: never.
    #[inline(always)]
    fn stranded(_tail: &Self::Tail, _pos: u64) -> bool {
        false
    }

    /// For a [`stranded`](Claim::stranded) position `pos` of queue `q`,
    /// whose packet word `w` holds no message and no claim of it: whether
    /// the receiver may skip it because a sender that holds a position it
    /// will never publish is dead (a sender that gave its position up
    /// after a failed claim counts as dead). It must never say yes while
    /// every such sender may still come: a live sender, however slow, is
    /// waited for (the receiver's skip would strand its message). The
    /// default: no.
    fn owner_dead(_q: &Queue<'_, Self::Tail>, _pos: u64, _w: u64) -> bool {
        false
    }

    /// Claims a packet for a short message at once, without waiting, if
    /// the algorithm has a fast path and it succeeds (for `stamp`: room in
    /// the ring as `hint` knows it, and the tail CAS won at the first try);
    /// `None` sends the caller to [`claim`](Claim::claim), which owes it
    /// nothing (a `None` leaves no claim behind). The default: no fast
    /// path. It keeps the waiting machinery (the closure `claim` takes) off
    /// the path of a send that does not wait.
    #[inline(always)]
    fn try_claim(_q: &Queue<'_, Self::Tail>, _me: Holder, _hint: &mut Hint) -> Option<Claimed> {
        None
    }

    /// Test hook: has `me` handed a packet position and never claims its
    /// packet, as a sender killed between its assignment and its claim
    /// would leave it; `false` for algorithms that hand out no position
    /// before the packet shows it.
    #[doc(hidden)]
    fn debug_assign_only(_q: &Queue<'_, Self::Tail>, _me: Holder) -> bool {
        false
    }

    /// Test hook: takes the queue's claim lock for `me` and never releases
    /// it, as a sender killed inside the critical section would leave it;
    /// `false` for algorithms without a lock.
    #[doc(hidden)]
    fn debug_hold_lock(_q: &Queue<'_, Self::Tail>, _me: Holder) -> bool {
        false
    }

    /// Claims a packet, and first a bulk block if `bulk`, for sender `me`
    /// (its pid goes into the handshake words it claims). `hint` is the
    /// sender's private memory of this queue.
    fn claim<W>(
        q: &Queue<'_, Self::Tail>,
        me: Holder,
        hint: &mut Hint,
        bulk: bool,
        wait: &mut W,
    ) -> Result<Claimed, AmError>
    where
        W: FnMut() -> Result<(), AmError>;
}

/// Calls `$callback! { "name" => Type; ... }` with every claim algorithm, in
/// LC98's table order, then `stamp` and `rings`.
///
/// ```
/// macro_rules! names {
///     ($($name:literal => $ty:ty;)*) => { [$($name),*] };
/// }
/// let all = symmetry_am::for_each_claim!(names);
/// assert_eq!(all[0], "tas");
/// assert_eq!(all.len(), 8);
/// ```
#[macro_export]
macro_rules! for_each_claim {
    ($callback:ident) => {
        $callback! {
            "tas" => $crate::claim::TasClaim;
            "ttas" => $crate::claim::TtasClaim;
            "ticket" => $crate::claim::TicketClaim;
            "anderson" => $crate::claim::AndersonClaim;
            "pthread" => $crate::claim::PthreadClaim;
            "lock-free" => $crate::claim::LockFree;
            "stamp" => $crate::claim::Stamp;
            "rings" => $crate::claim::Rings;
        }
    };
}

/// The registry names, in [`for_each_claim!`](crate::for_each_claim) order
/// (generated from it, so a new algorithm is named in one place and in its
/// own `Claim::NAME`, which a test ties to the macro's name).
pub const NAMES: &[&str] = {
    macro_rules! names {
        ($($name:literal => $ty:ty;)*) => { &[$($name),*] };
    }
    crate::for_each_claim!(names)
};

#[cfg(test)]
mod tests {
    /// Each algorithm's `Claim::NAME` (written into the segment and
    /// checked by every joiner) is the name the registry gives it.
    #[test]
    fn every_claim_is_named_as_in_the_registry() {
        macro_rules! check {
            ($($name:literal => $ty:ty;)*) => { $( assert_eq!(<$ty as super::Claim>::NAME, $name); )* };
        }
        crate::for_each_claim!(check);
        assert_eq!(super::NAMES.len(), 8);
    }
}
