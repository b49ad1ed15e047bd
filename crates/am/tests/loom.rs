//! Loom model checks of the Active Messages queue protocol (SPEC §4).
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p symmetry-am --release --test loom`.
//!
//! Under `cfg(loom)` the crate's atomics and cells are loom's (see
//! `src/sync.rs`) and `symmetry_am::model` builds queues on the heap; its
//! `send` and `recv` are the endpoint's protocol (claim, publish; head,
//! take, handler, free) calling the very functions the endpoint calls. So
//! these models explore the interleavings and weak-memory behaviours
//! (within loom's C11 model) of the code that ships:
//!
//! * packet bodies are `loom::cell::UnsafeCell`s: loom fails any body
//!   access that the FREE -> CLAIMED -> READY -> FREE handshake does not
//!   order (a sender overwriting a packet the receiver still reads, a
//!   receiver reading before the READY store, two senders on one packet);
//! * bulk blocks have a loom-checked shadow cell written and read where the
//!   real bytes are (see `model.rs`), and the bytes are compared on arrival;
//! * every model checks that each message arrives exactly once and intact,
//!   and that the queue ends with every packet and block FREE.
//!
//! The claim algorithms checked are `lock-free` (LC98 Fig. 3), `stamp`
//! and `rings` (whose models give each sender its own lane; `dead_sender`
//! is not one of them: a dead sender of `rings` leaves nothing in anyone
//! else's way).
//! The locking ones (Fig. 2 under tas/ttas/ticket/anderson/pthread) are the
//! locks of `symmetry-locks`, which have their own loom models, around a
//! critical section that is plain loads and stores; they are not compiled
//! under loom here.
//!
//! Models (each for both algorithms; "bound" is the preemption bound):
//!
//! | model | queue | senders | bound | shows |
//! |---|---|---|---|---|
//! | `two_senders` | 2 packets | 1 + 1 short | 3 | both delivered once, bodies intact |
//! | `mixed` | 2 packets, 1 block | 1 bulk + 1 short | 3 | READY and READY_BULK side by side; the payload goes with its packet |
//! | `full_ring` | 1 packet | 1 + 1 short | 2 | one sender waits (yielding) until the receiver frees the packet; for `lock-free` both senders are assigned the one packet and compete for it in the claim CAS |
//! | `full_ring_one_sender` | 1 packet | 3 short | 8 | the packet reused for laps 1 and 2 while the receiver drains |
//! | `bulk_two_senders` | 2 packets, 1 block | 1 + 1 bulk | 3 | the second sender waits for the block (claimed before the packet); each payload intact with its packet |
//! | `bulk_reuse` | 2 packets, 1 block | 3 bulk | 8 | the block freed and reused (laps 1 and 2 of its stamp) |
//! | `wrap_around` | 2 packets | 3 short | 8 | the ring wraps: slot 0 reused for lap 1 (the lap stamp of `stamp`) |
//! | `sender_order` | 2 packets | 2 + 1 short | 2 | `stamp` keeps each sender's messages in order; `lock-free` does not always (below) |
//! | `dead_sender` | 2 packets | 1 killed after its claim (`stamp`) or between assignment and claim (`lock-free`) + 1 live with 2 short | 2 | the killed sender's position is skipped once it is dead, never before; the live sender's messages all arrive once (in order under `stamp`), and the ring wraps past the skipped slot |
//!
//! | `doorbell` (stamp) | 2 packets | 1 or 2 short, each rings after it publishes | 3 | a receiver that dozes and then finds no message was rung: no message is slept through (`bell.rs`) |
//! | `announcements` (rings) | 2 packets per lane | 1 or 2 senders of 2 short, each announces and rings after it publishes | 3 | the receiver clears the announcements while senders announce: no message is slept through or left unannounced (`claim::rings`) |
//!
//! In every model with two senders and none dead, the receiver, whenever
//! its head holds no message, also runs the endpoint's repair of a stuck
//! head, and
//! fails if it skips a position: a live sender, however slow, is waited
//! for (issue 43: `lock-free` once skipped a position that stayed FREE for
//! 20 ms, and the late sender's message was stranded).
//!
//! Models with one sender have two threads and are explored nearly
//! exhaustively (bound 8; raising it changes nothing that shows). The
//! others have three or four threads; their bounds keep each model within
//! seconds. Where two threads can spin at once (a sender on a full queue
//! and the receiver on a CLAIMED head, while a third thread holds the
//! packet), loom would alternate the spinners forever without running the
//! holder; [`Watch`] recognizes those unfair schedules and gives them up
//! (each model prints how many executions ran to the end and how many were
//! given up). `LOOM_MAX_PREEMPTIONS` overrides every bound.
//!
//! `lock-free` can deliver one sender's messages out of order: with a ring
//! of 2, sender B is assigned position 0 (slot 0) and stalls before its
//! claim CAS; sender A sends its first message (position 1, slot 1), then
//! its second (position 2, slot 0), whose claim CAS finds slot 0 still
//! FREE and takes it; the receiver delivers position 0 (A's second
//! message) before position 1 (A's first), and B's message, once B claims
//! slot 0 for lap 1, at position 2. Fig. 3 lets "multiple senders compete
//! for a single packet", so this is the algorithm, not a slip of the
//! implementation; `lock_free::sender_order` asserts that loom finds this
//! schedule (and that every message still arrives exactly once). The
//! locked claims and `stamp` hand out one packet per position, in order.
#![cfg(loom)]

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use loom::sync::Arc;
use loom::thread;
use symmetry_am::AmError;
use symmetry_am::claim::{Claim, Hint, LockFree, Rings, Stamp};
use symmetry_am::layout::{Body, MAX_ARGS};
use symmetry_am::model::ModelQueue;

/// A model builder with at most `preemptions` preemptions
/// (`LOOM_MAX_PREEMPTIONS` in the environment overrides it).
///
/// Each model gets the largest bound that keeps it within seconds (module
/// docs); loom's documentation notes that most concurrency bugs need only
/// two or three preemptions to show.
fn builder(preemptions: usize) -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(preemptions);
    }
    b
}

/// The body of message `seq` of sender `src`: every word is a function of
/// the two, so a torn or stale body is noticed.
fn body(src: u32, seq: u64) -> Body {
    let tag = u64::from(src) << 32 | seq;
    let mut args = [0; MAX_ARGS];
    args[0] = seq;
    args[1] = tag;
    args[2] = !tag;
    args[MAX_ARGS - 1] = tag.rotate_left(17);
    Body {
        handler: 7,
        nargs: MAX_ARGS as u8,
        reserved: 0,
        src,
        bulk_len: 0,
        bulk_slot: 0,
        args,
    }
}

/// Bytes of every bulk payload (and of a bulk block in these models).
const PAYLOAD: usize = 24;

/// The bulk payload of message `seq` of sender `src`.
fn payload(src: u32, seq: u64) -> Vec<u8> {
    (0..PAYLOAD as u8)
        .map(|i| (src as u8).wrapping_mul(64) ^ (seq as u8).wrapping_mul(16) ^ i)
        .collect()
}

/// Checks a delivered body (and its bulk bytes); returns (src, seq).
fn check(b: &Body, bulk: &[u8], with_bulk: bool) -> (u32, u64) {
    let (src, seq) = (b.src, b.args[0]);
    let expected = body(src, seq);
    assert_eq!(
        (b.handler, b.nargs, b.args),
        (expected.handler, expected.nargs, expected.args),
        "damaged body"
    );
    if with_bulk {
        assert_eq!(bulk, payload(src, seq), "damaged bulk data");
        assert_eq!(b.bulk_len as usize, bulk.len());
    } else {
        assert!(bulk.is_empty());
    }
    (src, seq)
}

/// Consecutive fruitless spins after which a spinner may give up (see
/// [`Watch`]).
const PATIENCE: u32 = 3;

/// Bookkeeping of one execution that loom does not model: plain std
/// atomics, which add no happens-before edges to the loom execution (loom
/// runs all model threads on one OS thread, so they simply hold the true
/// current state). It lets spinners recognize loom's unfair schedules.
///
/// A thread spins by yielding to loom: the receiver on a head that is not
/// READY, a sender (in `wait`) on a full queue. After a yield loom may pick
/// any thread without spending a preemption, so with two spinners and a
/// third thread that holds the packet they wait on, loom can alternate the
/// spinners forever and never run the holder; such paths exceed loom's
/// branch limit without being bugs. So a thread that has spun
/// [`PATIENCE`] times in a row while some other thread is runnable and
/// *not* spinning (the starved holder) abandons the execution: it sets
/// `abandoned`, and every spinner then stops (a sender's `wait` returns an
/// error, which `claim` passes on; the receiver returns what it has). A
/// spin changes no shared state, so the same execution without the extra
/// spins, in which the holder runs, is explored too; but a real lost
/// message, where every unfinished thread spins, is never abandoned and
/// still fails (at the branch limit). Abandoned executions are checked for
/// races and damaged or duplicated messages up to the point they stop.
#[derive(Debug)]
struct Watch {
    abandoned: AtomicBool,
    /// Per thread (senders, then the receiver): inside its yield.
    spinning: Vec<AtomicBool>,
    /// Per thread: finished.
    done: Vec<AtomicBool>,
    /// Whether a sender waited on a full queue.
    waited: AtomicBool,
}

impl Watch {
    fn new(threads: usize) -> Self {
        Self {
            abandoned: AtomicBool::new(false),
            spinning: (0..threads).map(|_| AtomicBool::new(false)).collect(),
            done: (0..threads).map(|_| AtomicBool::new(false)).collect(),
            waited: AtomicBool::new(false),
        }
    }

    /// One fruitless spin of thread `me` (`fruitless` counts them in a
    /// row): yields to loom, or returns false if the execution is given up.
    fn spin(&self, me: usize, fruitless: &Cell<u32>) -> bool {
        fruitless.set(fruitless.get() + 1);
        if self.abandoned.load(Ordering::Relaxed) {
            return false;
        }
        let starved = (0..self.done.len()).any(|t| {
            t != me
                && !self.done[t].load(Ordering::Relaxed)
                && !self.spinning[t].load(Ordering::Relaxed)
        });
        if fruitless.get() >= PATIENCE && starved {
            self.abandoned.store(true, Ordering::Relaxed);
            return false;
        }
        self.spinning[me].store(true, Ordering::Relaxed);
        thread::yield_now();
        self.spinning[me].store(false, Ordering::Relaxed);
        true
    }
}

/// One sender of a model: how many messages, and whether with bulk data.
#[derive(Clone, Copy, Debug)]
struct Sender {
    count: u64,
    bulk: bool,
}

/// `n` short messages.
const fn short(count: u64) -> Sender {
    Sender { count, bulk: false }
}

/// `n` messages with bulk data.
const fn bulk(count: u64) -> Sender {
    Sender { count, bulk: true }
}

/// A model: a queue, its senders (each on its own thread; the receiver is
/// the model's main thread) and the preemption bound.
#[derive(Clone, Copy, Debug)]
struct Plan {
    packets: usize,
    bulk_blocks: usize,
    senders: &'static [Sender],
    preemptions: usize,
}

/// Sender `src` sends its messages `0..count` in order (or until the
/// execution is abandoned). Its `wait` on a full queue is the model's
/// stand-in for the endpoint's backoff and poll: a yield.
fn send_all<C: Claim>(q: &ModelQueue<C>, src: u32, s: Sender, watch: &Watch) {
    let me = src as usize;
    let fruitless = Cell::new(0);
    let mut wait = || {
        watch.waited.store(true, Ordering::Relaxed);
        if watch.spin(me, &fruitless) {
            Ok(())
        } else {
            Err(AmError::Timeout {
                what: "a fair schedule".into(),
            })
        }
    };
    let mut hint = Hint::default();
    for seq in 0..s.count {
        let data = s.bulk.then(|| payload(src, seq));
        // Pids are non-zero in real use; 100 + src keeps them distinct.
        match q.send(
            100 + src,
            &mut hint,
            body(src, seq),
            data.as_deref(),
            &mut wait,
        ) {
            Ok(_) => {}
            Err(AmError::Timeout { .. }) => break,
            Err(e) => panic!("send failed: {e}"),
        }
        fruitless.set(0);
    }
    watch.done[me].store(true, Ordering::Relaxed);
}

/// The receiver: polls (yielding while the head is not READY) until `n`
/// messages arrived or the execution is abandoned; returns them in
/// delivery order.
fn drain<C: Claim>(q: &ModelQueue<C>, plan: &Plan, n: usize, watch: &Watch) -> Vec<(u32, u64)> {
    let me = plan.senders.len();
    let mut got = Vec::with_capacity(n);
    let fruitless = Cell::new(0);
    while got.len() < n {
        let m = q.recv(|b, data| {
            let with_bulk = plan.senders.get(b.src as usize).is_some_and(|s| s.bulk);
            check(b, data, with_bulk)
        });
        match m {
            Some(m) => {
                got.push(m);
                fruitless.set(0);
            }
            // No sender dies here: the endpoint's repair of a stuck head
            // must never skip a position (a live sender's, however slow),
            // unless the execution is given up: a sender whose `wait`
            // failed gives its position up, as a dead one. (Only with two
            // senders or more, whose claims of one slot interleave: the
            // one-sender models' high bounds would not finish with it.)
            None if plan.senders.len() > 1 && q.repair() => assert!(
                watch.abandoned.load(Ordering::Relaxed),
                "skipped a live sender's position after {got:?}"
            ),
            None if watch.spin(me, &fruitless) => {}
            None => break,
        }
    }
    watch.done[me].store(true, Ordering::Relaxed);
    got
}

/// What the executions of a model did.
#[derive(Debug, Default)]
struct Outcome {
    /// Executions run to the end (every message delivered).
    complete: AtomicUsize,
    /// Executions given up in an unfair schedule (see [`Watch`]).
    abandoned: AtomicUsize,
    /// Whether some execution had a sender wait on a full queue.
    waited: AtomicBool,
}

/// Runs `plan` under loom: every message arrives exactly once and intact,
/// nothing more arrives, and the queue ends with every packet and block
/// FREE. `seen` is called with each complete execution's delivery order.
fn run<C: Claim>(
    plan: Plan,
    seen: impl Fn(&[(u32, u64)]) + Send + Sync + 'static,
) -> std::sync::Arc<Outcome> {
    let outcome = std::sync::Arc::new(Outcome::default());
    let out = outcome.clone();
    builder(plan.preemptions).check(move || {
        // Nobody is dead here (an earlier model on this thread may have
        // killed pid 100, and the receiver's repair asks who is).
        symmetry_am::model::revive_all();
        let q = Arc::new(ModelQueue::<C>::for_senders(
            plan.senders.len() as u32,
            plan.packets,
            plan.bulk_blocks,
            PAYLOAD,
        ));
        let watch = std::sync::Arc::new(Watch::new(plan.senders.len() + 1));
        let senders: Vec<_> = plan
            .senders
            .iter()
            .enumerate()
            .map(|(src, &s)| {
                let (q, watch) = (q.clone(), watch.clone());
                thread::spawn(move || send_all(&q, src as u32, s, &watch))
            })
            .collect();
        let total: u64 = plan.senders.iter().map(|s| s.count).sum();
        let got = drain(&q, &plan, total as usize, &watch);
        for s in senders {
            s.join().unwrap();
        }
        if watch.waited.load(Ordering::Relaxed) {
            out.waited.store(true, Ordering::Relaxed);
        }
        let mut sorted = got.clone();
        sorted.sort_unstable();
        if watch.abandoned.load(Ordering::Relaxed) {
            sorted.dedup();
            assert_eq!(sorted.len(), got.len(), "a message was duplicated: {got:?}");
            out.abandoned.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let expected: Vec<(u32, u64)> = plan
            .senders
            .iter()
            .enumerate()
            .flat_map(|(src, s)| (0..s.count).map(move |seq| (src as u32, seq)))
            .collect();
        assert_eq!(sorted, expected, "a message was lost or duplicated");
        assert_eq!(q.delivered(), total);
        assert!(q.recv(|_, _| ()).is_none(), "a message beyond those sent");
        assert!(q.is_quiescent(), "a packet or block was left claimed");
        seen(&got);
        out.complete.fetch_add(1, Ordering::Relaxed);
    });
    let (complete, abandoned) = (
        outcome.complete.load(Ordering::Relaxed),
        outcome.abandoned.load(Ordering::Relaxed),
    );
    println!("{complete} executions complete, {abandoned} abandoned as unfair");
    assert!(complete > 0, "no execution ran to the end");
    outcome
}

/// Whether each sender's messages arrived in the order it sent them.
fn per_sender_fifo(got: &[(u32, u64)]) -> bool {
    let mut next = std::collections::HashMap::new();
    got.iter().all(|&(src, seq)| {
        let n = next.entry(src).or_insert(0);
        let ok = *n == seq;
        *n += 1;
        ok
    })
}

/// Runs a model with one sender: its messages must also arrive in order.
fn run_fifo<C: Claim>(plan: Plan) -> std::sync::Arc<Outcome> {
    run::<C>(plan, |got| {
        assert!(per_sender_fifo(got), "out of order: {got:?}");
    })
}

fn two_senders<C: Claim>() {
    run::<C>(
        Plan {
            packets: 2,
            bulk_blocks: 0,
            senders: const { &[short(1), short(1)] },
            preemptions: 3,
        },
        |_| {},
    );
}

fn mixed<C: Claim>() {
    run::<C>(
        Plan {
            packets: 2,
            bulk_blocks: 1,
            senders: const { &[bulk(1), short(1)] },
            preemptions: 3,
        },
        |_| {},
    );
}

fn full_ring<C: Claim>() {
    let outcome = run::<C>(
        Plan {
            packets: 1,
            bulk_blocks: 0,
            senders: const { &[short(1), short(1)] },
            preemptions: 2,
        },
        |_| {},
    );
    // With a lane per sender, one message each never fills a lane
    // (`full_ring_one_sender` fills one).
    assert!(
        C::PER_SENDER || outcome.waited.load(Ordering::Relaxed),
        "no execution found the one-packet ring full"
    );
}

fn full_ring_one_sender<C: Claim>() {
    let outcome = run_fifo::<C>(Plan {
        packets: 1,
        bulk_blocks: 0,
        senders: const { &[short(3)] },
        preemptions: 8,
    });
    // With a lane per sender, one message each never fills a lane
    // (`full_ring_one_sender` fills one).
    assert!(
        C::PER_SENDER || outcome.waited.load(Ordering::Relaxed),
        "no execution found the one-packet ring full"
    );
}

fn bulk_two_senders<C: Claim>() {
    let outcome = run::<C>(
        Plan {
            packets: 2,
            bulk_blocks: 1,
            senders: const { &[bulk(1), bulk(1)] },
            preemptions: 3,
        },
        |_| {},
    );
    assert!(
        outcome.waited.load(Ordering::Relaxed),
        "no execution found the one-block bulk ring full"
    );
}

fn bulk_reuse<C: Claim>() {
    let outcome = run_fifo::<C>(Plan {
        packets: 2,
        bulk_blocks: 1,
        senders: const { &[bulk(3)] },
        preemptions: 8,
    });
    assert!(
        outcome.waited.load(Ordering::Relaxed),
        "no execution found the one-block bulk ring full"
    );
}

fn wrap_around<C: Claim>() {
    let outcome = run_fifo::<C>(Plan {
        packets: 2,
        bulk_blocks: 0,
        senders: const { &[short(3)] },
        preemptions: 8,
    });
    assert!(
        outcome.waited.load(Ordering::Relaxed),
        "no execution found the ring full"
    );
}

/// Sender 0 sends two messages, sender 1 one. Returns whether some
/// execution delivered sender 0's messages out of order; with `fifo`,
/// fails on the first such execution.
fn sender_order<C: Claim>(fifo: bool) -> bool {
    let reordered = std::sync::Arc::new(AtomicBool::new(false));
    let r = reordered.clone();
    run::<C>(
        Plan {
            packets: 2,
            bulk_blocks: 0,
            senders: const { &[short(2), short(1)] },
            preemptions: 2,
        },
        move |got| {
            if !per_sender_fifo(got) {
                assert!(!fifo, "out of order: {got:?}");
                r.store(true, Ordering::Relaxed);
            }
        },
    );
    reordered.load(Ordering::Relaxed)
}

/// A sender (pid 100) takes a position and is killed before it publishes
/// (`stamp`) or before it claims the packet of its position (`lock-free`,
/// between Fig. 3's two steps); a live sender (rank 1) sends two short
/// messages; the receiver polls and, when its head is stuck, runs the
/// endpoint's repair. Every execution must deliver exactly the live
/// sender's messages (in order where the algorithm keeps a sender's
/// order), skip at most the dead position, and end quiescent. A skip while the owner is alive would lose or mangle the
/// live sender's message (a ring of 2 makes the live sender reuse the
/// dead slot); no skip at all would leave the receiver stuck, which loom
/// reports as a livelock.
fn dead_sender<C: Claim>() {
    let outcome = std::sync::Arc::new(Outcome::default());
    let out = outcome.clone();
    builder(2).check(move || {
        symmetry_am::model::revive_all();
        let q = Arc::new(ModelQueue::<C>::new(2, 0, PAYLOAD));
        let watch = std::sync::Arc::new(Watch::new(3));
        let dying = {
            let (q, watch) = (q.clone(), watch.clone());
            thread::spawn(move || {
                let fruitless = Cell::new(0);
                let mut wait = || {
                    if watch.spin(0, &fruitless) {
                        Ok(())
                    } else {
                        Err(AmError::Timeout {
                            what: "a fair schedule".into(),
                        })
                    }
                };
                let mut hint = Hint::default();
                if q.assign_and_die(100)
                    || q.claim_and_die(100, &mut hint, false, &mut wait).is_ok()
                {
                    symmetry_am::model::kill(100);
                }
                watch.done[0].store(true, Ordering::Relaxed);
            })
        };
        let live = {
            let (q, watch) = (q.clone(), watch.clone());
            thread::spawn(move || send_all(&q, 1, short(2), &watch))
        };
        let mut got = Vec::new();
        let mut skipped = 0;
        let fruitless = Cell::new(0);
        while got.len() < 2 {
            match q.recv(|b, data| check(b, data, false)) {
                Some(m) => {
                    got.push(m);
                    fruitless.set(0);
                }
                None if q.repair() => {
                    skipped += 1;
                    fruitless.set(0);
                }
                None if watch.spin(2, &fruitless) => {}
                None => break,
            }
        }
        watch.done[2].store(true, Ordering::Relaxed);
        dying.join().unwrap();
        live.join().unwrap();
        if watch.abandoned.load(Ordering::Relaxed) {
            out.abandoned.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if !C::SENDER_FIFO {
            got.sort_unstable();
        }
        assert_eq!(got, vec![(1, 0), (1, 1)], "the live sender's messages");
        assert!(
            skipped <= 1,
            "skipped {skipped} positions for one dead sender"
        );
        // The dead position, if the receiver has not reached it yet, is
        // not a message either.
        assert!(q.recv(|_, _| ()).is_none(), "a message beyond those sent");
        assert!(q.is_quiescent(), "a packet was left claimed");
        out.complete.fetch_add(1, Ordering::Relaxed);
    });
    let (complete, abandoned) = (
        outcome.complete.load(Ordering::Relaxed),
        outcome.abandoned.load(Ordering::Relaxed),
    );
    println!("{complete} executions complete, {abandoned} abandoned as unfair");
    assert!(complete > 0, "no execution ran to the end");
}

/// Every model of this file for claim algorithm `$claim`, each test
/// named after its model.
macro_rules! models {
    ($claim:ty) => {
        models!(@each $claim; two_senders, mixed, full_ring, full_ring_one_sender,
            bulk_two_senders, bulk_reuse, wrap_around);
    };
    (@each $claim:ty; $($model:ident),*) => {$(
        #[test]
        fn $model() {
            super::$model::<$claim>();
        }
    )*};
}

mod lock_free {
    use super::*;
    models!(LockFree);

    /// Fig. 3 may reorder one sender's messages (module docs): loom finds
    /// the schedule, and every message still arrives exactly once.
    #[test]
    fn sender_order() {
        assert!(
            super::sender_order::<LockFree>(false),
            "expected an execution that reorders sender 0's messages"
        );
    }

    /// A sender killed between its assignment and its claim costs its own
    /// message only: its position is skipped once it is dead, never
    /// before (issue 43).
    #[test]
    fn dead_sender() {
        super::dead_sender::<LockFree>();
    }
}

mod stamp {
    use super::*;
    models!(Stamp);

    /// One position per message, consumed in position order: each
    /// sender's messages arrive in the order sent.
    #[test]
    fn sender_order() {
        assert!(!super::sender_order::<Stamp>(true));
    }

    /// A sender killed between its claim and its publication costs its
    /// own message only.
    #[test]
    fn dead_sender() {
        super::dead_sender::<Stamp>();
    }
}

/// The doorbell (`bell.rs`): `senders` senders each publish one message
/// and ring; the receiver, idle, dozes (announces it may sleep), polls
/// once, and would sleep if that poll found nothing. Every execution in
/// which it would sleep must have been rung (a sender found it dozing and
/// swapped AWAKE in, which is what wakes the futex), so no message is
/// slept through. Loom has no `membarrier`: both sides' fences are full
/// fences here, which order no more than the asymmetric pair does.
fn doorbell(senders: u32) {
    builder(3).check(move || {
        let q = Arc::new(ModelQueue::<Stamp>::new(2, 0, PAYLOAD));
        let bell = Arc::new(loom::sync::atomic::AtomicU32::new(
            symmetry_am::model::AWAKE,
        ));
        let handles: Vec<_> = (0..senders)
            .map(|s| {
                let (q, bell) = (q.clone(), bell.clone());
                thread::spawn(move || {
                    let mut hint = Hint::default();
                    symmetry_am::model::send::<Stamp, _>(
                        &q.queue(),
                        100 + s,
                        &mut hint,
                        body(s, 0),
                        None,
                        &mut || Ok(()),
                        |_| {},
                    )
                    .expect("a ring of two has room for every sender");
                    symmetry_am::model::ring(&bell);
                })
            })
            .collect();
        symmetry_am::model::doze(&bell);
        let found = q.recv(|b, bulk| check(b, bulk, false)).is_some();
        for h in handles {
            h.join().unwrap();
        }
        if !found {
            assert_eq!(
                bell.load(Ordering::Relaxed),
                symmetry_am::model::AWAKE,
                "the receiver would sleep through a message nobody rang for"
            );
        }
        // Whatever the bell, every message is there to deliver.
        let mut n = u32::from(found);
        while q.recv(|b, bulk| check(b, bulk, false)).is_some() {
            n += 1;
        }
        assert_eq!(n, senders);
    });
}

#[test]
fn doorbell_one_sender() {
    doorbell(1);
}

#[test]
fn doorbell_two_senders() {
    doorbell(2);
}

mod rings {
    use super::*;
    models!(Rings);

    /// Each sender has its own lane, delivered in position order: its
    /// messages arrive in the order sent.
    #[test]
    fn sender_order() {
        assert!(!super::sender_order::<Rings>(true));
    }
}

/// The lanes' announcements (`claim::rings`): `senders` senders each send
/// two messages into their lane of two, announcing and ringing after each;
/// the receiver takes what is announced, dozes (clears the announcements,
/// then the doorbell's fence), polls once, and would sleep if that found
/// nothing. It must have been rung whenever it would sleep, and afterwards
/// every message must be found by polling only the announced lanes and
/// those the doze cleared: no message is left unannounced, though the
/// receiver cleared its sender's bit while it announced. With the
/// sender's fence removed both models fail, as the doorbell's do; an
/// announcement moved before the fence (the load of the summary word
/// ahead of it) is not caught: loom does not produce the store-buffering
/// outcome that would lose it, so that order rests on the fence pair's
/// argument (`claim::rings`, "Announcements").
fn announcements(senders: u32) {
    builder(3).check(move || {
        let q = Arc::new(ModelQueue::<Rings>::for_senders(senders, 2, 0, PAYLOAD));
        let handles: Vec<_> = (0..senders)
            .map(|s| {
                let q = q.clone();
                thread::spawn(move || {
                    let mut hint = Hint::default();
                    for seq in 0..2 {
                        q.send(100 + s, &mut hint, body(s, seq), None, &mut || Ok(()))
                            .expect("a lane of two has room for both messages");
                    }
                })
            })
            .collect();
        let mut n = u32::from(q.recv(|b, bulk| check(b, bulk, false)).is_some());
        q.doze();
        let found = q.recv(|b, bulk| check(b, bulk, false)).is_some();
        n += u32::from(found);
        for h in handles {
            h.join().unwrap();
        }
        if !found {
            assert_eq!(
                q.bell().load(Ordering::Relaxed),
                symmetry_am::model::AWAKE,
                "the receiver would sleep through a message nobody rang for"
            );
        }
        while q.recv(|b, bulk| check(b, bulk, false)).is_some() {
            n += 1;
        }
        assert_eq!(n, 2 * senders, "a message was left unannounced");
    });
}

#[test]
fn announcements_one_sender() {
    announcements(1);
}

#[test]
fn announcements_two_senders() {
    announcements(2);
}
