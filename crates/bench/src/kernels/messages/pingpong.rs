//! Cache-line ping-pong ([`pingpong_rtt_ns`]).
//!
//! The physical limit of a shared-memory message: two pinned threads
//! bounce one `AtomicU64` on its own cache line (`CachePadded`), each
//! writing the next value when it sees the other's; RTT = time per round
//! trip of the median block, after a warm-up.

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
    let wait_for = |v: u64| {
        while line.load(Ordering::Acquire) != v {
            if pin {
                spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pingpong_measures_something() {
        assert!(pingpong_rtt_ns(1_000) > 0.0);
    }
}
