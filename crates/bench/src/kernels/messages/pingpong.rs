//! The floors of a round trip: a cache-line ping-pong
//! ([`pingpong_rtt_ns`]) and a bare request-reply over two rings
//! ([`bare_rings_rtt_ns`]).
//!
//! The physical limit of a shared-memory message: two pinned threads
//! bounce one `AtomicU64` on its own cache line (`CachePadded`), each
//! writing the next value when it sees the other's. The bare rings are
//! the floor of a protocol that, like `symmetry-am`'s, writes each
//! message to the next slot of a ring: the same exchange over two rings
//! of packet-sized slots, one each way, with no claim, dispatch or check.
//! Each reports the time per round trip of the median block, after a
//! warm-up.

use std::hint::spin_loop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crossbeam_utils::CachePadded;

use super::{Blocks, cpus, median_block, per_msg, pin_to_core};

/// Round trip of one cache line bounced between two threads on two cores
/// (the physical limit of a shared-memory message), in nanoseconds.
pub fn pingpong_rtt_ns(rounds: u64) -> f64 {
    let rounds = rounds.max(1);
    let warm = (rounds / 10).clamp(100, 100_000);
    let total = warm + rounds;
    let pin = cpus() >= 2;
    let line = CachePadded::new(AtomicU64::new(0));
    let wait_for = |v: u64| wait_until(pin, || line.load(Ordering::Acquire) == v);
    std::thread::scope(|s| {
        s.spawn(|| {
            if pin {
                pin_to_core(1);
            }
            for i in 0..total {
                wait_for(2 * i + 1);
                // Release: pairs with the other side's Acquire load in
                // `wait_for` (nothing else is published; the ordering only
                // keeps the exchange honest).
                line.store(2 * i + 2, Ordering::Release);
            }
        });
        let a = s.spawn(|| {
            if pin {
                pin_to_core(0);
            }
            for i in 0..warm {
                // Release: pairs with the Acquire load of the other side.
                line.store(2 * i + 1, Ordering::Release);
                wait_for(2 * i + 2);
            }
            let mut blocks = Vec::new();
            for (start, len) in Blocks::new(rounds).iter() {
                let t0 = Instant::now();
                for i in warm + start..warm + start + len {
                    // Release: pairs with the Acquire load of the other side.
                    line.store(2 * i + 1, Ordering::Release);
                    wait_for(2 * i + 2);
                }
                blocks.push(per_msg(t0.elapsed(), len));
            }
            blocks
        });
        median_block(&a.join().expect("ping-pong thread panicked"))
    })
}

/// A slot of [`bare_rings_rtt_ns`]: a sequence word and one argument, on
/// a `symmetry_am::layout::Packet`'s 128 bytes (a test checks the size).
#[repr(C, align(128))]
#[derive(Default)]
struct Slot {
    /// `i + 1` once message `i` is in the slot.
    seq: AtomicU64,
    /// The message's one argument.
    arg: AtomicU64,
}

/// Round trip of a one-word request and its reply over two rings of
/// `slots` slots (rounded up to a power of two), one each way, between two
/// threads on two cores: message `i` goes to slot `i mod slots` of each
/// ring, so the two sides poll and write a different pair of lines for
/// every message, as `symmetry-am`'s queues do. With the default
/// configuration's packets it is the floor of `rings`' round trip in
/// memory traffic alone: what remains above it is the software of a send,
/// a poll, a dispatch and the checks of a hostile sender's packet.
pub fn bare_rings_rtt_ns(rounds: u64, slots: usize) -> f64 {
    let rounds = rounds.max(1);
    let warm = (rounds / 10).clamp(100, 100_000);
    let total = warm + rounds;
    let ring = || Ring::new(slots);
    let (requests, replies) = (ring(), ring());
    let pin = cpus() >= 2;
    std::thread::scope(|s| {
        s.spawn(|| {
            if pin {
                pin_to_core(1);
            }
            for i in 0..total {
                let arg = requests.receive(i, pin);
                replies.send(i, arg);
            }
        });
        let a = s.spawn(|| {
            if pin {
                pin_to_core(0);
            }
            let exchange = |i: u64| {
                requests.send(i, i);
                std::hint::black_box(replies.receive(i, pin));
            };
            (0..warm).for_each(exchange);
            let mut blocks = Vec::new();
            for (start, len) in Blocks::new(rounds).iter() {
                let t0 = Instant::now();
                (warm + start..warm + start + len).for_each(exchange);
                blocks.push(per_msg(t0.elapsed(), len));
            }
            blocks
        });
        median_block(&a.join().expect("bare-rings thread panicked"))
    })
}

/// One ring of [`bare_rings_rtt_ns`]: message `i` in slot `i & mask`.
struct Ring {
    slots: Vec<Slot>,
    mask: u64,
}

impl Ring {
    /// `slots` slots, rounded up to a power of two.
    fn new(slots: usize) -> Self {
        let n = slots.max(1).next_power_of_two();
        Self {
            slots: (0..n).map(|_| Slot::default()).collect(),
            mask: n as u64 - 1,
        }
    }

    fn slot(&self, i: u64) -> &Slot {
        &self.slots[(i & self.mask) as usize]
    }

    /// Puts message `i` with `arg` in its slot.
    #[inline]
    fn send(&self, i: u64, arg: u64) {
        let s = self.slot(i);
        s.arg.store(arg, Ordering::Relaxed);
        // Release: publishes the argument with the sequence word; pairs
        // with the Acquire load in `receive`.
        s.seq.store(i + 1, Ordering::Release);
    }

    /// Waits for message `i` (spinning where `spin`, else yielding) and
    /// returns its argument.
    #[inline]
    fn receive(&self, i: u64, spin: bool) -> u64 {
        let s = self.slot(i);
        // Acquire: pairs with the Release store in `send`, so the
        // argument stored before it is visible.
        wait_until(spin, || s.seq.load(Ordering::Acquire) == i + 1);
        s.arg.load(Ordering::Relaxed)
    }
}

/// Polls `ready` until it holds: spinning where `spin` (each side has a
/// CPU of its own), else yielding between polls.
#[inline]
fn wait_until(spin: bool, mut ready: impl FnMut() -> bool) {
    while !ready() {
        if spin {
            spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pingpong_measures_something() {
        assert!(pingpong_rtt_ns(1_000) > 0.0);
    }

    #[test]
    fn bare_rings_measure_something_with_packet_sized_slots() {
        assert_eq!(size_of::<Slot>(), size_of::<symmetry_am::layout::Packet>());
        assert!(bare_rings_rtt_ns(1_000, 64) > 0.0);
        // Any slot count, wrapping many times.
        assert!(bare_rings_rtt_ns(1_000, 3) > 0.0);
    }
}
