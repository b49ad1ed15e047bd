//! Loom model checks of every lock algorithm (SPEC §4).
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p symmetry-locks --release --test loom`.
//!
//! Under `cfg(loom)` the crate's atomics, spin hints and thread-locals are
//! loom's (see `src/sync.rs`), so these models explore the interleavings and
//! the weak-memory behaviours (within loom's C11 model) of the code that
//! ships. The critical section writes a `loom::cell::UnsafeCell`: loom
//! reports any two accesses to it that are not ordered by happens-before,
//! which is exactly a mutual-exclusion or memory-ordering failure of the
//! lock. `RawMutex::INIT` panics under loom, so locks are built with
//! `new()`. The baselines (std, parking_lot, pthread) are not compiled under
//! loom and are not checked here.
//!
//! Models for each queue lock (ticket, ticket-proportional, Anderson,
//! Graunke-Thakkar, MCS, CLH), all preemption-bounded (see [`builder`]):
//! two threads with one, two and three acquisitions each; three threads with
//! one and two each; two lockers beside a `try_lock`er; `try_lock` racing
//! `lock`, against a held lock, and against repeated acquisitions (which can
//! reach the CLH node-adoption ABA case); two locks held at once and
//! released in acquisition order, with a node reused across them. Anderson
//! is also checked with fewer slots than contenders. The one-byte spin locks
//! (TAS, TTAS, backoff) hit a loom bug; what is and is not checked for them
//! is explained on [`tas_family`].
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use symmetry_locks::lock_api::RawMutex;
use symmetry_locks::sched::{self, ContextBlock, State};
use symmetry_locks::{
    Anderson, Clh, GraunkeThakkar, Handshake, Mcs, McsNp, McsTp, SmartQ, Ticket, TicketProportional,
};

/// A lock and the counter it guards.
struct Shared<R> {
    lock: R,
    value: UnsafeCell<usize>,
}

// SAFETY: `value` is accessed only with `lock` held; loom checks that claim.
unsafe impl<R: Sync> Sync for Shared<R> {}
// SAFETY: as above.
unsafe impl<R: Send> Send for Shared<R> {}

impl<R: RawMutex> Shared<R> {
    fn new(lock: R) -> Arc<Self> {
        Arc::new(Self {
            lock,
            value: UnsafeCell::new(0),
        })
    }

    /// Read-modify-write of the counter; the caller holds the lock.
    fn bump_held(&self) {
        // A racing access from another thread is a loom failure.
        self.value.with_mut(|v| {
            // SAFETY: loom's cell hands out the pointer for this access only.
            unsafe { *v += 1 }
        });
    }

    fn locked_bump(&self) {
        let guard = self.lock.lock();
        self.bump_held();
        // SAFETY: held with `guard`.
        unsafe { self.lock.unlock(guard) };
    }

    fn try_bump(&self) -> bool {
        match self.lock.try_lock() {
            Some(guard) => {
                self.bump_held();
                // SAFETY: held with `guard`.
                unsafe { self.lock.unlock(guard) };
                true
            }
            None => false,
        }
    }

    /// The counter; every other thread must have been joined.
    fn value(&self) -> usize {
        // SAFETY: all other threads are joined, which orders their accesses
        // before this one (loom checks it).
        self.value.with(|v| unsafe { *v })
    }
}

/// A model builder exploring every interleaving with at most `preemptions`
/// preemptions (`LOOM_MAX_PREEMPTIONS` in the environment overrides it).
///
/// Every model is bounded: all these locks spin, and a spinner yields to
/// loom on each round; with unbounded preemptions loom may switch back to
/// a yielded spinner before the holder has moved, round after round, and
/// such a path exceeds loom's branch limit without being a bug. Each model
/// gets the largest bound that still finishes (2 threads: 3 to 6; 3 threads:
/// 1 or 2); loom's documentation notes that most concurrency bugs need only
/// 2 or 3 preemptions to show.
fn builder(preemptions: usize) -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    // The removal paths of `handshake` and `mcs-tp` (a waiter removed
    // re-queues) make executions longer than loom's default 1,000 branches.
    b.max_branches = 20_000;
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(preemptions);
    }
    b
}

/// `lockers` threads (the model's main thread among them) each acquire the
/// lock `each` times with `lock` and `try_lockers` more threads each try
/// `each` times with `try_lock`; every holder increments the counter. The
/// final count is exact, loom finds no unsynchronized access to the counter,
/// and the lock ends free.
fn contend<R, F>(new: F, lockers: usize, try_lockers: usize, each: usize, preemptions: usize)
where
    R: RawMutex + Send + Sync + 'static,
    F: Fn() -> R + Send + Sync + 'static,
{
    assert!(lockers >= 1);
    builder(preemptions).check(move || {
        let shared = Shared::new(new());
        let wins = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::new();
        for _ in 1..lockers {
            let shared = shared.clone();
            handles.push(thread::spawn(move || {
                for _ in 0..each {
                    shared.locked_bump();
                }
            }));
        }
        for _ in 0..try_lockers {
            let (shared, wins) = (shared.clone(), wins.clone());
            handles.push(thread::spawn(move || {
                for _ in 0..each {
                    if shared.try_bump() {
                        wins.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        for _ in 0..each {
            shared.locked_bump();
        }
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(
            shared.value(),
            lockers * each + wins.load(Ordering::Relaxed)
        );
        assert!(!shared.lock.is_locked());
    });
}

/// Only `try_lock`, from `threads` threads, `each` attempts each: count and
/// happens-before are checked, but not that the lock ends free (see
/// [`tas_family`] for why).
fn try_only<R, F>(new: F, threads: usize, each: usize, preemptions: usize)
where
    R: RawMutex + Send + Sync + 'static,
    F: Fn() -> R + Send + Sync + 'static,
{
    builder(preemptions).check(move || {
        let shared = Shared::new(new());
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let shared = shared.clone();
                thread::spawn(move || (0..each).filter(|_| shared.try_bump()).count())
            })
            .collect();
        let wins: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert!(wins >= 1, "the first try_lock of all found the lock held");
        assert_eq!(shared.value(), wins);
    });
}

/// `try_lock` on one thread races `lock` on another: a successful
/// `try_lock` is mutually exclusive with the holder, the count is exact, and
/// afterwards the lock is free (`try_lock` succeeds).
fn try_lock_vs_lock<R, F>(new: F, preemptions: usize)
where
    R: RawMutex + Send + Sync + 'static,
    F: Fn() -> R + Send + Sync + 'static,
{
    builder(preemptions).check(move || {
        let shared = Shared::new(new());
        let other = {
            let shared = shared.clone();
            thread::spawn(move || shared.try_bump())
        };
        shared.locked_bump();
        let won = other.join().unwrap();
        assert_eq!(shared.value(), 1 + usize::from(won));
        assert!(!shared.lock.is_locked());
        assert!(shared.try_bump(), "try_lock failed on a free lock");
    });
}

/// `try_lock` from another thread while the main thread holds the lock
/// must fail (and must return: a blocking `try_lock` deadlocks the model).
fn try_lock_while_held<R, F>(new: F, preemptions: usize)
where
    R: RawMutex + Send + Sync + 'static,
    F: Fn() -> R + Send + Sync + 'static,
{
    builder(preemptions).check(move || {
        let shared = Shared::new(new());
        // One earlier acquisition so that queue locks have a released node
        // in their tail, not just the initial state.
        shared.locked_bump();
        let guard = shared.lock.lock();
        assert!(shared.lock.is_locked());
        let other = {
            let shared = shared.clone();
            thread::spawn(move || shared.try_bump())
        };
        let won = other.join().unwrap();
        // SAFETY: held with `guard`.
        unsafe { shared.lock.unlock(guard) };
        assert!(!won, "try_lock succeeded while the lock was held");
        assert_eq!(shared.value(), 1);
    });
}

/// `try_lock` (twice) races three back-to-back acquisitions by the main
/// thread. For CLH this reaches the case the module docs describe: the tail
/// node `try_lock` read is adopted and re-enqueued before its CAS. Whatever
/// happens, the count is exact and accesses are ordered.
fn try_lock_vs_reacquire<R, F>(new: F, preemptions: usize)
where
    R: RawMutex + Send + Sync + 'static,
    F: Fn() -> R + Send + Sync + 'static,
{
    builder(preemptions).check(move || {
        let shared = Shared::new(new());
        let wins = Arc::new(AtomicUsize::new(0));
        let other = {
            let (shared, wins) = (shared.clone(), wins.clone());
            thread::spawn(move || {
                for _ in 0..2 {
                    if shared.try_bump() {
                        wins.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        for _ in 0..3 {
            shared.locked_bump();
        }
        other.join().unwrap();
        assert_eq!(shared.value(), 3 + wins.load(Ordering::Relaxed));
        assert!(!shared.lock.is_locked());
    });
}

/// Two locks of one type. The main thread holds both and releases them in
/// acquisition order (not LIFO), then takes the first again, which for the
/// queue locks reuses on it the node just released on the second lock
/// (Graunke-Thakkar's generation argument, CLH's node adoption, MCS's pool);
/// the other thread takes each lock in turn.
fn two_locks_non_lifo<R, F>(new: F, preemptions: usize)
where
    R: RawMutex + Send + Sync + 'static,
    F: Fn() -> R + Send + Sync + 'static,
{
    builder(preemptions).check(move || {
        let (a, b) = (Shared::new(new()), Shared::new(new()));
        let other = {
            let (a, b) = (a.clone(), b.clone());
            thread::spawn(move || {
                a.locked_bump();
                b.locked_bump();
            })
        };
        let ga = a.lock.lock();
        let gb = b.lock.lock();
        a.bump_held();
        b.bump_held();
        // SAFETY: held with `ga`; `b` stays held.
        unsafe { a.lock.unlock(ga) };
        // SAFETY: held with `gb`.
        unsafe { b.lock.unlock(gb) };
        a.locked_bump();
        other.join().unwrap();
        assert_eq!((a.value(), b.value()), (3, 2));
        assert!(!a.lock.is_locked() && !b.lock.is_locked());
    });
}

/// The full set of models, for locks whose waiters each spin on a word of
/// their own (or, with `three_lockers = false`, share one).
macro_rules! full_models {
    ($new:expr, three_lockers = $three:literal) => {
        #[test]
        fn two_threads_one_each() {
            contend($new, 2, 0, 1, 6);
        }

        #[test]
        fn two_threads_two_each() {
            contend($new, 2, 0, 2, 5);
        }

        #[test]
        fn two_threads_three_each() {
            contend($new, 2, 0, 3, 3);
        }

        #[test]
        fn two_locks_non_lifo() {
            super::two_locks_non_lifo($new, 4);
        }

        /// Three threads that all call `lock`. With two waiters spinning,
        /// loom at 3 preemptions can alternate the two yielded spinners
        /// forever without running the holder, which exceeds its branch
        /// limit without being a bug (likewise at 2 where they spin on one
        /// shared word, as in the ticket lock, which therefore gets 1).
        #[test]
        fn three_threads_one_each() {
            contend($new, 3, 0, 1, if $three { 2 } else { 1 });
        }

        /// Three threads, two acquisitions each: 1 preemption (with two
        /// waiters for longer, 2 already lets loom alternate spinners).
        #[test]
        fn three_threads_two_each() {
            contend($new, 3, 0, 2, 1);
        }

        /// Two threads call `lock`, a third `try_lock`.
        #[test]
        fn two_lockers_one_try_locker() {
            contend($new, 2, 1, 1, 2);
        }

        #[test]
        fn try_lock_vs_lock() {
            super::try_lock_vs_lock($new, 6);
        }

        #[test]
        fn try_lock_while_held() {
            super::try_lock_while_held($new, 6);
        }

        #[test]
        fn try_lock_vs_reacquire() {
            super::try_lock_vs_reacquire($new, 5);
        }
    };
}

mod ticket {
    use super::*;
    full_models!(Ticket::new, three_lockers = false);
}

mod ticket_proportional {
    use super::*;
    full_models!(TicketProportional::new, three_lockers = false);
}

mod anderson {
    use super::*;
    full_models!(Anderson::<2>::new, three_lockers = true);
}

mod graunke_thakkar {
    use super::*;
    full_models!(GraunkeThakkar::new, three_lockers = true);
}

mod mcs {
    use super::*;
    full_models!(Mcs::new, three_lockers = true);
}

/// MCS whose waiters yield after a few polls (under loom the spin budget
/// is two polls): the same protocol, another waiting loop.
mod mcs_yield {
    use super::*;
    full_models!(symmetry_locks::McsYield::waiting, three_lockers = true);
}

mod clh {
    use super::*;
    full_models!(Clh::new, three_lockers = true);
}

/// Smart-Q over `Stock` (no preemption is ever shown): the MCS path plus
/// the context-block CAS of Fig. 3.
mod smart_q {
    use super::*;
    full_models!(SmartQ::<sched::Stock>::new, three_lockers = true);
}

/// Queued-Handshaking; under loom `TIMEOUT_NS` is one poll, so releasers
/// rescind and remove running successors all the time and every branch of
/// Fig. 2 (grant, late `GotIt`, removal, removal of the last waiter) is
/// explored.
mod handshake {
    use super::*;
    full_models!(Handshake::<sched::Stock>::new, three_lockers = false);
}

/// MCS-TP; under loom a first attempt counts as preempted, so every
/// waiter is removed once and re-queues (see `mcs_tp::fresh`).
mod mcs_tp {
    use super::*;
    full_models!(McsTp::new, three_lockers = false);
}

mod mcs_np {
    use super::*;
    full_models!(
        || McsNp::<sched::Stock>::with(McsTp::over()),
        three_lockers = false
    );
}

/// A context block pointer handed to the "kernel" thread of a model.
#[derive(Clone, Copy)]
struct Cb(*const ContextBlock);
// SAFETY: the block is read only while its thread lives (joined last).
unsafe impl Send for Cb {}

/// Smart-Q with a scheduler that shows preemption: a third thread plays
/// SMARTQ's kernel and deschedules the waiter (CAS `Preemptable ->
/// Preempted`) at any point, then resumes it. The releaser's claim races
/// that CAS: either the waiter is granted (and the kernel's CAS fails), or
/// it is skipped and re-queues. Mutual exclusion, the count, and a free
/// lock at the end hold in every interleaving.
#[test]
fn smart_q_with_a_preempting_kernel() {
    builder(3).check(|| {
        let shared = Shared::new(SmartQ::<sched::Stock>::new());
        let (tx, rx) = loom::sync::mpsc::channel::<Cb>();
        let (done_tx, done_rx) = loom::sync::mpsc::channel::<()>();
        let waiter = {
            let shared = shared.clone();
            thread::spawn(move || {
                tx.send(Cb(sched::current())).unwrap();
                shared.locked_bump();
                // Keep the thread (and its context block) alive until the
                // kernel is done with it.
                done_rx.recv().unwrap();
            })
        };
        let kernel = thread::spawn(move || {
            let Cb(cb) = rx.recv().unwrap();
            // SAFETY: the waiter thread waits for `done` before it exits.
            let cb = unsafe { &*cb };
            if cb.try_preempt().is_ok() {
                thread::yield_now();
                cb.resume(State::Preemptable);
            }
            done_tx.send(()).unwrap();
        });
        shared.locked_bump();
        kernel.join().unwrap();
        waiter.join().unwrap();
        assert_eq!(shared.value(), 2);
        assert!(!shared.lock.is_locked());
    });
}

/// Anderson with fewer slots than contenders: waiters share a slot and must
/// still each wait for their own number.
mod anderson_past_p {
    use super::*;

    #[test]
    fn one_slot_two_threads() {
        contend(Anderson::<1>::new, 2, 0, 1, 6);
    }

    #[test]
    fn one_slot_two_threads_two_each() {
        contend(Anderson::<1>::new, 2, 0, 2, 5);
    }

    #[test]
    fn two_slots_three_threads() {
        contend(Anderson::<2>::new, 3, 0, 1, 2);
    }

    /// Two waiters on the one slot: loom gets 1 preemption, as for the
    /// ticket lock (see `three_threads_one_each`).
    #[test]
    fn one_slot_three_threads() {
        contend(Anderson::<1>::new, 3, 0, 1, 1);
    }

    #[test]
    fn one_slot_try_lock_vs_lock() {
        try_lock_vs_lock(Anderson::<1>::new, 6);
    }
}

/// The one-byte locks (TAS, TTAS, the two backoff locks) take the lock with
/// an atomic exchange and release it with a plain store. loom 0.7.2 does not
/// enforce RMW atomicity against a racing plain store (tokio-rs/loom#254,
/// #389; fix proposed in #391, unreleased): it may order the release store
/// *before* a waiter's failed `swap(1)` that read the held value, so the
/// release is lost and every later `lock` spins until loom's branch limit;
/// and after a relaxed pre-read (TTAS, backoff `try_lock`) it lets a `swap`
/// read a release store that an earlier `swap` already consumed, so two
/// holders "enter" and loom reports concurrent writes to the counter. Real
/// hardware and the C11 model allow neither (an RMW reads the value
/// immediately before it in modification order). Textbook TAS and TTAS
/// locks written directly against loom fail the same way, and pass once the
/// release store is an RMW.
///
/// The locks therefore release with `swap(0, Release)` under `cfg(loom)`
/// (a plain store natively), and every model below runs.
mod tas_family {
    macro_rules! family_models {
        ($new:expr) => {
            #[test]
            fn two_threads_one_each() {
                contend($new, 2, 0, 1, 3);
            }

            #[test]
            fn two_threads_two_each() {
                contend($new, 2, 0, 2, 2);
            }

            /// Bound 1: with two waiters swapping on one byte, loom at 2
            /// preemptions alternates yielded spinners without end.
            #[test]
            fn three_threads_one_each() {
                contend($new, 3, 0, 1, 1);
            }

            #[test]
            fn two_lockers_one_try_locker() {
                contend($new, 2, 1, 1, 1);
            }

            #[test]
            fn try_lock_vs_lock() {
                crate::try_lock_vs_lock($new, 3);
            }
        };
    }

    mod tas {
        use crate::*;
        use symmetry_locks::Tas;

        #[test]
        fn try_lock_while_held() {
            crate::try_lock_while_held(Tas::new, 3);
        }

        #[test]
        fn try_only_two_threads_two_each() {
            try_only(Tas::new, 2, 2, 3);
        }

        #[test]
        fn try_only_three_threads() {
            try_only(Tas::new, 3, 1, 2);
        }

        family_models!(Tas::new);
    }

    macro_rules! pre_read_locks {
        ($($module:ident => $ty:ty;)*) => {
            $(
                mod $module {
                    use crate::*;

                    #[test]
                    fn try_lock_while_held() {
                        crate::try_lock_while_held(<$ty>::new, 3);
                    }

                    #[test]
                    fn try_only_two_threads_two_each() {
                        try_only(<$ty>::new, 2, 2, 3);
                    }

                    #[test]
                    fn try_only_three_threads() {
                        try_only(<$ty>::new, 3, 1, 2);
                    }

                    family_models!(<$ty>::new);
                }
            )*
        };
    }

    pre_read_locks! {
        ttas => symmetry_locks::Ttas;
        backoff => symmetry_locks::Backoff;
        backoff_persistent => symmetry_locks::BackoffPersistent;
    }
}

/// KLMO91's spin-then-block lock ([`SpinThenBlock`](symmetry_locks::spin_then_block::SpinThenBlock))
/// with a blocker that really blocks: a futex modelled by a loom mutex and
/// condition variable (the word is checked under the mutex, as the kernel
/// checks it under its hash-bucket lock). Loom checks mutual exclusion,
/// the happens-before edges of the critical sections, and that no
/// wake-up is lost (a lost wake-up leaves a thread blocked forever, which
/// loom reports as a deadlock). Policies: block at once, and spin one or
/// two polls first (so both the spin-phase CAS and the block-phase swap
/// race the releaser).
mod spin_then_block {
    use crate::*;
    use loom::sync::{Condvar, Mutex};
    use symmetry_locks::spin_then_block::policy::{AlwaysBlock, Fixed};
    use symmetry_locks::spin_then_block::{Blocker, SpinThenBlock};

    struct LoomFutex;

    struct Queue {
        m: Mutex<()>,
        cv: Condvar,
    }

    // SAFETY: `wait` checks the word under `m` and sleeps on `cv` without
    // releasing `m` in between; `wake_one` notifies under `m`; so a wake
    // after a word change either precedes the check (which then sees the
    // change) or finds the sleeper.
    unsafe impl Blocker for LoomFutex {
        const NAME: &'static str = "loom-futex";
        type Queue = Queue;

        fn new_queue() -> Queue {
            Queue {
                m: Mutex::new(()),
                cv: Condvar::new(),
            }
        }

        fn wait(q: &Queue, word: &loom::sync::atomic::AtomicU32, expected: u32) {
            let g = q.m.lock().unwrap();
            if word.load(Ordering::SeqCst) == expected {
                drop(q.cv.wait(g).unwrap());
            }
        }

        fn wake_one(q: &Queue, _word: &loom::sync::atomic::AtomicU32) {
            let _g = q.m.lock().unwrap();
            q.cv.notify_one();
        }

        fn c_spins() -> u32 {
            4
        }
    }

    type Block = SpinThenBlock<AlwaysBlock, LoomFutex>;
    type Spin1 = SpinThenBlock<Fixed<1>, LoomFutex>;
    type Spin2 = SpinThenBlock<Fixed<2>, LoomFutex>;

    #[test]
    fn always_block_two_threads_two_each() {
        contend(|| Block::named("loom"), 2, 0, 2, 3);
    }

    #[test]
    fn always_block_three_threads() {
        contend(|| Block::named("loom"), 3, 0, 1, 2);
    }

    #[test]
    fn spin_one_then_block_two_threads_two_each() {
        contend(|| Spin1::named("loom"), 2, 0, 2, 3);
    }

    #[test]
    fn spin_two_then_block_three_threads() {
        contend(|| Spin2::named("loom"), 3, 0, 1, 2);
    }

    #[test]
    fn with_try_locker() {
        contend(|| Spin1::named("loom"), 2, 1, 1, 2);
    }

    #[test]
    fn try_lock_while_held() {
        crate::try_lock_while_held(|| Block::named("loom"), 4);
    }
}
