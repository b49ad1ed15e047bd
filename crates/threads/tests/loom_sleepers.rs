//! Loom model of the idle protocol (`symmetry_threads::sleepers`): a
//! processor that finds no work goes to sleep in the kernel; whoever
//! publishes work wakes one. A lost wake-up shows up as a deadlock (every
//! thread parked with work published), which loom reports.
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p symmetry-threads --release --test loom_sleepers`.
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use symmetry_threads::sleepers::Sleepers;

/// The ready queue of the model, shaped like the strategies' locked
/// pools: items under a lock, their number mirrored in an atomic that
/// idle processors read without the lock (`has_ready`), written Relaxed
/// under the lock. The protocol's fences, not the queue, must order it.
struct Queue {
    items: loom::sync::Mutex<usize>,
    len: AtomicUsize,
}

impl Queue {
    fn new() -> Self {
        Queue {
            items: loom::sync::Mutex::new(0),
            len: AtomicUsize::new(0),
        }
    }
    fn publish(&self) {
        let mut i = self.items.lock().unwrap();
        *i += 1;
        self.len.store(*i, Ordering::Relaxed);
    }
    fn has_work(&self) -> bool {
        self.len.load(Ordering::Relaxed) > 0
    }
    fn take(&self) -> bool {
        let mut i = self.items.lock().unwrap();
        if *i == 0 {
            return false;
        }
        *i -= 1;
        self.len.store(*i, Ordering::Relaxed);
        true
    }
}

/// A processor: takes work until it has taken `want` items, sleeping
/// whenever the queue is empty.
fn processor(s: &Sleepers, q: &Queue, me: usize, want: usize) {
    s.register(me);
    let mut got = 0;
    while got < want {
        if q.take() {
            got += 1;
            continue;
        }
        s.sleep(me, || q.has_work(), || {});
    }
}

/// One sleeper, one waker: the published item is always taken.
#[test]
fn one_sleeper_one_waker() {
    let mut b = loom::model::Builder::new();
    b.max_branches = 100_000;
    b.check(|| {
        let s = Arc::new(Sleepers::new(1));
        let q = Arc::new(Queue::new());
        let (s2, q2) = (s.clone(), q.clone());
        let p = thread::spawn(move || processor(&s2, &q2, 0, 1));
        q.publish();
        s.notify_one();
        p.join().unwrap();
    });
}

/// Two sleepers, two items published by one waker: both are taken, no
/// processor is left asleep with work in the queue.
#[test]
fn two_sleepers_two_items() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.max_branches = 100_000;
    b.check(|| {
        let s = Arc::new(Sleepers::new(2));
        let q = Arc::new(Queue::new());
        let taken = Arc::new(AtomicUsize::new(0));
        let procs: Vec<_> = (0..2)
            .map(|me| {
                let (s, q, taken) = (s.clone(), q.clone(), taken.clone());
                thread::spawn(move || {
                    s.register(me);
                    loop {
                        if q.take() {
                            if taken.fetch_add(1, Ordering::Relaxed) + 1 == 2 {
                                // The last item: release the other.
                                s.wake_all();
                                return;
                            }
                            continue;
                        }
                        if taken.load(Ordering::Relaxed) == 2 {
                            return;
                        }
                        s.sleep(
                            me,
                            || q.has_work() || taken.load(Ordering::Relaxed) == 2,
                            || {},
                        );
                    }
                })
            })
            .collect();
        for _ in 0..2 {
            q.publish();
            s.notify_one();
        }
        for p in procs {
            p.join().unwrap();
        }
        assert_eq!(taken.load(Ordering::Relaxed), 2);
    });
}

/// The store-buffering litmus test with SeqCst fences, as this loom
/// models it: both loads cannot read 0.
#[test]
fn store_buffering_with_fences() {
    loom::model(|| {
        let x = Arc::new(AtomicUsize::new(0));
        let y = Arc::new(AtomicUsize::new(0));
        let (x2, y2) = (x.clone(), y.clone());
        let t = thread::spawn(move || {
            x2.store(1, Ordering::Relaxed);
            loom::sync::atomic::fence(Ordering::SeqCst);
            y2.load(Ordering::Relaxed)
        });
        y.store(1, Ordering::Relaxed);
        loom::sync::atomic::fence(Ordering::SeqCst);
        let a = x.load(Ordering::Relaxed);
        let b = t.join().unwrap();
        assert!(a == 1 || b == 1, "both loads read 0");
    });
}

/// The same with read-modify-writes in place of the stores.
#[test]
fn store_buffering_with_fences_rmw() {
    loom::model(|| {
        let x = Arc::new(AtomicUsize::new(0));
        let y = Arc::new(AtomicUsize::new(0));
        let (x2, y2) = (x.clone(), y.clone());
        let t = thread::spawn(move || {
            x2.fetch_add(1, Ordering::Relaxed);
            loom::sync::atomic::fence(Ordering::SeqCst);
            y2.load(Ordering::Relaxed)
        });
        y.fetch_add(1, Ordering::Relaxed);
        loom::sync::atomic::fence(Ordering::SeqCst);
        let a = x.load(Ordering::Relaxed);
        let b = t.join().unwrap();
        assert!(a == 1 || b == 1, "both loads read 0");
    });
}
