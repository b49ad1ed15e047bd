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

/// A thread that parks in a loop until a flag is set, against two wakers
/// of which only the second sets the flag (after writing data): the thread
/// must not stay parked forever: a wake-up lost to the other waker shows
/// as a loom deadlock. (The thread's token consumption must synchronize
/// with the *last* waker, or its re-check of the flag may read the old
/// value and park again with the token gone.) "Parked" is modelled by
/// waiting on a loom
/// condition variable until a waker whose `unpark` returned true readies
/// the thread (what the runtime's ready queue does).
#[test]
fn park_loop_sees_the_last_wakers_data() {
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::AtomicBool;
    use loom::sync::{Condvar, Mutex};

    struct Shared {
        w: ParkWord,
        flag: AtomicBool,
        data: UnsafeCell<u32>,
        ready: Mutex<usize>,
        cv: Condvar,
    }
    // SAFETY: `data` is written once by the second waker before it sets
    // `flag`; loom checks the claimed ordering of the read.
    unsafe impl Sync for Shared {}
    // SAFETY: as above.
    unsafe impl Send for Shared {}

    fn wake(s: &Shared) {
        if s.w.unpark() {
            *s.ready.lock().unwrap() += 1;
            s.cv.notify_one();
        }
    }

    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(|| {
        let s = Arc::new(Shared {
            w: ParkWord::new(),
            flag: AtomicBool::new(false),
            data: UnsafeCell::new(0),
            ready: Mutex::new(0),
            cv: Condvar::new(),
        });
        let a = {
            let s = s.clone();
            thread::spawn(move || wake(&s))
        };
        let bw = {
            let s = s.clone();
            thread::spawn(move || {
                // SAFETY: the only write; the reader waits for `flag`.
                s.data.with_mut(|d| unsafe { *d = 7 });
                s.flag.store(true, Ordering::Release);
                wake(&s);
            })
        };
        loop {
            if s.flag.load(Ordering::Acquire) {
                // SAFETY: written before `flag` by the second waker.
                assert_eq!(s.data.with(|d| unsafe { *d }), 7);
                break;
            }
            if s.w.begin_park() {
                if s.w.commit_park() {
                    let mut r = s.ready.lock().unwrap();
                    while *r == 0 {
                        r = s.cv.wait(r).unwrap();
                    }
                    *r -= 1;
                }
                // else: a token arrived during the switch; the processor
                // readies the thread at once.
            }
        }
        a.join().unwrap();
        bw.join().unwrap();
    });
}
