//! Loom model of the park word (block/signal without lost wake-ups).
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p symmetry-threads --release --test loom_park`.
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use symmetry_threads::park_word::ParkWord;

/// One park racing one unpark: if the thread switched away, exactly one
/// side readies it; if it consumed the token, nobody does.
#[test]
fn park_vs_unpark() {
    loom::model(|| {
        let w = Arc::new(ParkWord::new());
        let readies = Arc::new(AtomicUsize::new(0));
        let (w2, r2) = (w.clone(), readies.clone());
        let waker = thread::spawn(move || {
            if w2.unpark() {
                r2.fetch_add(1, Ordering::Relaxed);
            }
        });
        let switched = w.begin_park();
        if switched && !w.commit_park() {
            readies.fetch_add(1, Ordering::Relaxed);
        }
        waker.join().unwrap();
        let n = readies.load(Ordering::Relaxed);
        if switched {
            assert_eq!(n, 1, "a parked thread must be readied exactly once");
        } else {
            assert_eq!(n, 0, "a consumed token readies nothing");
        }
    });
}

/// Two wakers: a switched-away thread is readied exactly once.
#[test]
fn park_vs_two_unparks() {
    loom::model(|| {
        let w = Arc::new(ParkWord::new());
        let readies = Arc::new(AtomicUsize::new(0));
        let wakers: Vec<_> = (0..2)
            .map(|_| {
                let (w2, r2) = (w.clone(), readies.clone());
                thread::spawn(move || {
                    if w2.unpark() {
                        r2.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let switched = w.begin_park();
        if switched && !w.commit_park() {
            readies.fetch_add(1, Ordering::Relaxed);
        }
        for h in wakers {
            h.join().unwrap();
        }
        let n = readies.load(Ordering::Relaxed);
        assert_eq!(n, usize::from(switched));
    });
}
