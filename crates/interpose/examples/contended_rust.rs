//! The profiler's test program for issue 41: a Rust program whose locks
//! wait in the futex system call (through libc's `syscall()`), not in
//! pthread, so only the library's futex view sees them.
//!
//! Four threads (`contended_rust [THREADS]`, at least 3) contend on three
//! locks, each taken on its own line of this file so that a profile names
//! them apart by `file:line` (the step functions are never inlined, so a
//! return address in one is that line's, whether or not a symboliser
//! reads inlined frames): a `std::sync::Mutex` (`std_mutex_step`), a
//! `std::sync::RwLock` (threads 0 and 1 write in `rwlock_write_step`, the
//! others read in `rwlock_read_step`) and a `parking_lot::Mutex`
//! (`parking_lot_step`). Each is held for 5-25 microseconds of
//! arithmetic, longer than std's and parking_lot's spinning before they
//! sleep, so their futex waits really happen on a 2-core machine (std's
//! waits are on the lock's own word; parking_lot's on a futex of the
//! waiting thread's, so only the call site ties them to the lock). Prints
//! the final counters, the same on every run, with or without the
//! library; writes a progress dot to stderr now and then, as the C test
//! programs do (`tests/c/progress.h`).

use std::hint::black_box;
use std::sync::{Mutex, RwLock};

/// Acquisitions of each lock per thread.
const STEPS: u64 = 3_000;

static STD_MUTEX: Mutex<u64> = Mutex::new(0);
/// Two counters written together: a reader sees them equal.
static STD_RWLOCK: RwLock<(u64, u64)> = RwLock::new((0, 0));
static PARKING_LOT_MUTEX: parking_lot::Mutex<u64> = parking_lot::Mutex::new(0);

/// `n` rounds of arithmetic the compiler cannot drop.
fn work(n: u64) -> u64 {
    (0..n).fold(1, |a, k| black_box(a.wrapping_mul(31).wrapping_add(k)))
}

#[inline(never)]
fn std_mutex_step() {
    let mut g = STD_MUTEX.lock().unwrap();
    black_box(work(20_000));
    *g += 1;
}

#[inline(never)]
fn rwlock_write_step() {
    let mut g = STD_RWLOCK.write().unwrap();
    g.0 += 1;
    black_box(work(40_000));
    g.1 += 1;
}

/// Whether the reader saw both counters equal.
#[inline(never)]
fn rwlock_read_step() -> bool {
    let g = STD_RWLOCK.read().unwrap();
    let first = g.0;
    black_box(work(10_000));
    g.1 == first
}

#[inline(never)]
fn parking_lot_step() {
    let mut g = PARKING_LOT_MUTEX.lock();
    black_box(work(30_000));
    *g += 1;
}

/// One byte on stderr every 256 steps, for a test's watchdog; `write(2)`
/// takes no lock (`eprint!` would take stderr's).
fn progress(step: u64) {
    if step.is_multiple_of(256) {
        // SAFETY: writes one byte from a live static buffer to fd 2; a
        // failed write is harmless here.
        unsafe { libc::write(2, b".".as_ptr().cast(), 1) };
    }
}

fn main() {
    let threads: usize = std::env::args()
        .nth(1)
        .map_or(4, |a| a.parse().expect("THREADS is a number"))
        .max(3);
    let torn: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut torn = 0;
                    for step in 0..STEPS {
                        std_mutex_step();
                        black_box(work(2_000));
                        if t < 2 {
                            rwlock_write_step();
                        } else if !rwlock_read_step() {
                            torn += 1;
                        }
                        black_box(work(2_000));
                        parking_lot_step();
                        black_box(work(2_000));
                        progress(step);
                    }
                    torn
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    println!("std mutex: {}", STD_MUTEX.lock().unwrap());
    let rw = *STD_RWLOCK.read().unwrap();
    println!("std rwlock: {} {} torn reads: {torn}", rw.0, rw.1);
    println!("parking_lot mutex: {}", PARKING_LOT_MUTEX.lock());
}
