//! Endpoints: the Active Messages API over the queue blocks (LC98 §2-3).
//!
//! An [`Endpoint`] owns one segment (its request and reply queues, which
//! only it receives from) and maps the segments of every other rank of its
//! job (whose queues it sends to). Messages are short (up to eight words)
//! or bulk (words plus up to one bulk block of data):
//!
//! * [`Endpoint::request`] / [`Endpoint::request_bulk`] claim a packet (and
//!   first a bulk block) of the destination's request queue with the claim
//!   algorithm `C`, fill it and mark it READY. While the queue is full they
//!   back off and poll their own endpoint (LC98's deadlock avoidance), and
//!   they return [`AmError::PeerDead`] / [`AmError::PeerClosed`] instead of
//!   waiting forever for a receiver that is gone.
//! * [`Endpoint::poll`] delivers READY messages from the head of both of its
//!   queues to the handlers named by the packets, then frees the packets.
//!   A request handler may [`Token::reply`] once, to the requester's reply
//!   queue; while that queue is full it polls only its own reply queue, and
//!   reply handlers cannot send, so cycles of full queues always drain.
//! * A packet left CLAIMED by a sender that has died (its pid is in the
//!   handshake word) is recovered by the receiver after it has stalled on
//!   it for a while: the packet is freed and counted in [`Stats`]. Under
//!   `lock-free` and `stamp`, whose senders are handed a position before
//!   their packet shows it, a head position handed out and never shown is
//!   skipped only once the claim algorithm finds a sender that will never
//!   show it dead ([`Claim::owner_dead`]); a live sender is waited for,
//!   however long it is descheduled, so every message of a live sender is
//!   delivered exactly once.
//!
//! # Failures are events
//!
//! A dead or closed peer does not end the endpoint. [`Endpoint::poll`]
//! keeps delivering what live peers send. [`Endpoint::poll_until`] returns
//! [`AmError::PeerDead`] or [`AmError::PeerClosed`] once for each peer it
//! finds gone (after one more poll, in case the peer's last message
//! finishes the wait, and only once every message the peer published to
//! it is delivered, even one queued behind a slow sender's claim); call
//! it again to go on serving the others, and
//! [`Endpoint::failed_peers`] lists who is gone. A request to a peer known
//! to be gone, or that has closed, fails at once with the same error; a
//! death is noticed by the periodic checks of `poll_until`, or by a
//! sender that waits on the dead peer's full queue. `barrier`,
//! `allreduce` and `finish` need every rank and fail if one is gone.
//!
//! # Idle waits
//!
//! [`Endpoint::poll_until`] and the collectives poll while messages come,
//! and keep polling for C after the last one, C being the cost of a
//! futex block and wake-up ([KLMO91]'s `fixed-spin(C)`; other policies
//! through [`Endpoint::poll_until_by`]). Then the receiver sleeps on the
//! doorbell word in its own segment, a process-shared futex, and a sender
//! wakes it after its message is in the queue. A sender pays for this one
//! load of a line it reads already, unless the receiver sleeps (the
//! protocol and why no message is slept through: `bell.rs`'s docs). A
//! sleeping receiver still wakes every 100 ms, and whenever a sender
//! rings without a message it can deliver (one queued behind a dead
//! sender's claim), to repair its queues and check its peers. With
//! ranks on other hosts, whose messages come by the wire and ring no
//! bell, it polls and yields the CPU instead of sleeping.
//!
//! [KLMO91]: symmetry_locks::spin_then_block
//!
//! # Collectives complete
//!
//! While [`Endpoint::barrier`], [`Endpoint::allreduce`] or
//! [`Endpoint::finish`] wait, they deliver whatever else arrives. An
//! error of such a message (its handler returned one, it named no
//! registered handler, it was garbage) does not end the collective: it
//! completes on every rank, and the error is kept, counted in
//! [`Stats::deferred`], and returned by the next [`Endpoint::poll`] or
//! [`Endpoint::poll_until`] (one per call, before anything else is
//! polled). So an `Err` from a collective always means that it did not
//! complete (a peer is gone, a send failed), and retrying it is never one
//! collective too many. Errors raised during `finish` are only counted in
//! the [`Stats`] it returns.
//!
//! A malformed packet in one of our queues (a handler id, word count,
//! source rank, bulk block or length no honest sender writes) is dropped
//! and reported as [`AmError::Garbage`] naming the rank it claims to be
//! from; the next poll goes on with the next message. Nothing a peer
//! writes into shared memory can make this endpoint access memory out of
//! bounds (see [`crate::segment`]'s "Trust").
//!
//! # Ranks on other hosts
//!
//! A job whose [`Job::net`](crate::job::Job::net) places ranks on several
//! hosts keeps these queues for the ranks of this endpoint's host and
//! sends to the others over the job's [`Wire`] (see [`crate::net`] for
//! what changes: order across transports, failures). Requests, replies, bulk data, polling,
//! `barrier` and `allreduce` mean the same on both.
//!
//! Handlers are plain functions registered by id, with typed access to the
//! endpoint's state `S` (the Split-C/AM-II style: a handler updates the
//! program's data). Ids `0..USER_HANDLERS` are the user's; the rest are
//! used by [`Endpoint::barrier`] and [`Endpoint::allreduce`].

// The code, by role. This file holds the endpoint's types and the calls
// at the heart of its API (join aside); the files below add methods to
// `Endpoint` and `Core`. They import this file's types, and this file
// imports none of theirs (so each reads after this one):
//
// - `join`: joining a job (making the segment, mapping the peers'), and
//   leaving it (`finish`, and the close on drop);
// - `send`: requests and replies into a queue (check, claim, publish);
// - `poll`: polling own queues and delivering to handlers;
// - `wait`: the waits (a sender's on a full queue, `poll_until`) and
//   their backoff;
// - `recovery`: dead and closed peers, and what dead senders leave in
//   own queues;
// - `bridge`: ranks on other hosts, over the job's wire;
// - `collective`: `barrier` and `allreduce`, and their messages' ids and
//   handling;
// - `hooks`: test hooks that leave a queue as a killed sender would.

mod bridge;
mod collective;
mod hooks;
mod join;
mod poll;
mod recovery;
mod send;
mod wait;

use std::time::Duration;

use symmetry_locks::spin_then_block::SpinPolicy;
use symmetry_locks::spin_then_block::policy::FixedSpinC;

use crate::claim::{Claim, Hint, Holder};
use crate::error::AmError;
use crate::layout::Queue;
use crate::net::Wire;
use crate::segment::{Config, Segment};
use crate::sync::{AtomicU32, Ordering};

pub use self::collective::ReduceOp;

/// Most ranks in one job (Anderson's lock has one flag per possible sender).
pub const MAX_RANKS: usize = 64;
/// User handler ids are `0..USER_HANDLERS`.
pub const USER_HANDLERS: u16 = 240;
const HANDLERS: usize = 256;

const REQUESTS: usize = 0;
const REPLIES: usize = 1;

/// A message handler: gets a token (reply, source, state) and the message.
pub type Handler<C, S> = fn(&mut Token<'_, C, S>, &Msg<'_>) -> Result<(), AmError>;

/// A delivered message.
#[derive(Debug)]
#[non_exhaustive]
pub struct Msg<'a> {
    /// Sender's rank.
    pub src: u32,
    /// Handler id it named.
    pub handler: u16,
    /// Its words.
    pub args: &'a [u64],
    /// Its bulk data (empty for a short message). Valid only during the
    /// handler: the block is freed when the handler returns.
    pub bulk: &'a [u8],
}

/// Counters of one endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Messages sent (requests and replies).
    pub sent: u64,
    /// Messages delivered to handlers.
    pub delivered: u64,
    /// Times a send found the destination queue full and waited.
    pub full_waits: u64,
    /// Positions of dead senders recovered by this receiver: packets left
    /// CLAIMED, and (`stamp`, `lock-free`) positions handed out and never
    /// claimed or published. (None under `rings`: what a dead sender
    /// leaves is in its own lane, in nobody's way.)
    pub recovered_packets: u64,
    /// Bulk blocks of dead senders recovered by this receiver.
    pub recovered_bulk: u64,
    /// Malformed messages dropped.
    pub garbage: u64,
    /// Errors of other messages (a handler's error, garbage) raised while
    /// a collective or `finish` waited: the collective completed, and up
    /// to 64 of them are kept at a time and returned by the following
    /// `poll` or `poll_until` calls, one per call (module docs,
    /// "Collectives complete").
    pub deferred: u64,
}

#[derive(Debug, Default, Clone, Copy)]
struct Stall {
    pos: u64,
    word: u64,
    count: u32,
}

/// What is known of a peer that is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gone {
    /// Its process died (pid).
    Dead(u32),
    /// It closed its endpoint.
    Closed,
}

/// Which failed peers end a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Only this rank's (its message is awaited).
    Rank(u32),
    /// Every rank's (a collective).
    Everyone,
    /// None: each failure is reported once and the wait can be resumed
    /// (the user's `poll_until`).
    Report,
}

#[derive(Debug, Default)]
struct Reduce {
    /// Root: accumulated value and contributions, by epoch parity.
    acc: [u64; 2],
    count: [u32; 2],
    /// Non-root: results received so far and the last one.
    results: u64,
    result: u64,
}

/// Where a full-queue wait polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Both queues (a request from the program).
    Both,
    /// Only the reply queue (a reply from inside a request handler).
    Replies,
}

/// The wire to the ranks on other hosts.
struct Remote {
    wire: Box<dyn Wire>,
    name: &'static str,
    /// The message being delivered (reused).
    buf: Vec<u8>,
    /// How long closing waits for sends in flight.
    timeout: Duration,
    /// Calls of `poll_queues` since the wire was last polled (it is
    /// polled on every `every`-th).
    tick: u32,
    /// [`WIRE_EVERY`](bridge::WIRE_EVERY) with peers on this host, else 1.
    every: u32,
}

/// Everything of an endpoint except the user state.
#[derive(Debug)]
pub struct Core<C: Claim, S> {
    rank: u32,
    size: u32,
    pid: u32,
    own: Segment,
    /// Mappings of the other ranks' segments (`None` at our own rank and
    /// at ranks on other hosts).
    peers: Vec<Option<Segment>>,
    /// What this rank knows of every rank of the job (itself included),
    /// made at join; see [`Route`].
    routes: Vec<Route<C::Tail>>,
    /// Views of our own two queues (a copy of our route's, read on every
    /// poll without a lookup).
    own_views: [Queue<'static, C::Tail>; 2],
    /// The wire to ranks on other hosts, if the job has any.
    remote: Option<Remote>,
    /// No other rank shares this host: only this rank's own requests to
    /// itself reach its queues, and `poll` skips them while none is
    /// unread (two empty queues polled on every call showed in profiles
    /// of the MPI-only round trip).
    alone: bool,
    /// Requests and replies this rank sent itself and has not delivered
    /// yet (counted while `alone`).
    self_unread: u64,
    handlers: Vec<Option<Handler<C, S>>>,
    stats: Stats,
    stall: [Stall; 2],
    /// Next position to deliver of each own queue. Kept here, not in the
    /// shared head (which only mirrors it), so no peer can move it.
    head: [u64; 2],
    /// Under an algorithm with a lane per sender ([`Claim::PER_SENDER`]):
    /// each own queue's lanes, by sender rank (empty otherwise).
    lanes: [Vec<Queue<'static, C::Tail>>; 2],
    /// The next position to deliver of each lane (as `head`).
    lane_heads: [Vec<u64>; 2],
    /// Lanes to poll besides those announced: those whose announcements
    /// a doze cleared, until a poll finds them drained (see `poll`).
    unannounced: [u64; 2],
    /// The lanes a sender may announce: the ranks on this host.
    lane_mask: u64,
    barrier_epoch: u64,
    barrier_arrivals: Vec<u64>,
    reduce_epoch: u64,
    reduce: Reduce,
    /// Set while a collective (or `finish`) waits: errors of other
    /// messages' handlers, and garbage, are kept in `deferred` instead of
    /// ending the wait (see [`Core::event`]).
    deferring: bool,
    /// Errors kept while `deferring`, oldest first (at most
    /// [`DEFERRED_KEPT`]); `poll` and `poll_until` return them first.
    deferred: std::collections::VecDeque<AmError>,
    unlinked: bool,
}

/// Most errors kept for later report while a collective runs (a flood of
/// garbage must not grow the endpoint without bound); further ones are
/// only counted in [`Stats::deferred`].
const DEFERRED_KEPT: usize = 64;

/// What a rank knows of one rank of its job, in one entry, so that a send
/// looks one place up.
///
/// The views and the closed flag borrow the mappings in [`Core`]'s `own`
/// and `peers`, which live exactly as long as the core and are never
/// replaced, so the `'static` is never observable outside `Core` (it
/// hands out references only to code that holds `&self` or `&mut self`).
#[derive(Debug)]
struct Route<T: 'static> {
    /// Views of the rank's two queues (`None` for a rank on another
    /// host): the lanes this rank claims in, under an algorithm with a
    /// lane per sender ([`Claim::lane`]).
    views: Option<[Queue<'static, T>; 2]>,
    /// The closed flag in its segment's header (`None` on another host).
    closed: Option<&'static AtomicU32>,
    /// Its doorbell (`None` on another host): rung after every send, in
    /// case it sleeps (see `crate::bell`).
    bell: Option<&'static AtomicU32>,
    /// What this sender remembers of the rank's two queues.
    hints: [Hint; 2],
    /// Whether it is known to be gone, and whether a wait has reported it.
    gone: Option<(Gone, bool)>,
}

/// An Active Messages endpoint with claim algorithm `C` and handler state `S`.
///
/// Each rank of a job joins with the same [`Config`], registers its handlers,
/// sends requests (a handler may reply), polls to run the handlers of the
/// messages it received, and finishes; `finish` waits for its peers.
///
/// ```
/// use symmetry_am::{claim::Stamp, job, AmError, Config, Endpoint, Msg, Token};
///
/// // Handler 0 adds its argument to the rank's state.
/// fn add(t: &mut Token<'_, Stamp, u64>, m: &Msg<'_>) -> Result<(), AmError> {
///     *t.state() += m.args[0];
///     Ok(())
/// }
///
/// let sums = job::run_threads(3, |job| -> Result<u64, AmError> {
///     let mut ep = Endpoint::<Stamp, u64>::join(&job, &Config::default(), 0)?;
///     ep.register(0, add)?;
///     for dest in 0..job.size {
///         ep.request(dest, 0, &[u64::from(job.rank) + 1])?;
///     }
///     // Poll (run received handlers) until all three have arrived.
///     while *ep.state() < 1 + 2 + 3 {
///         ep.poll()?;
///     }
///     let total = *ep.state();
///     ep.finish()?;
///     Ok(total)
/// });
/// for s in sums {
///     assert_eq!(s.unwrap(), 1 + 2 + 3);
/// }
/// ```
#[derive(Debug)]
pub struct Endpoint<C: Claim, S = ()> {
    core: Core<C, S>,
    state: S,
}

/// What a handler can do: reply, see its source, use the endpoint's state.
#[derive(Debug)]
pub struct Token<'a, C: Claim, S> {
    core: &'a mut Core<C, S>,
    state: &'a mut S,
    src: u32,
    is_request: bool,
    replied: bool,
}

impl<C: Claim, S> Endpoint<C, S> {
    /// This endpoint's rank.
    pub fn rank(&self) -> u32 {
        self.core.rank
    }

    /// Number of ranks in the job.
    pub fn size(&self) -> u32 {
        self.core.size
    }

    /// The handler state.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// The handler state, mutably.
    pub fn state_mut(&mut self) -> &mut S {
        &mut self.state
    }

    /// Counters, including the recovered packets of dead senders.
    pub fn stats(&self) -> Stats {
        self.core.stats
    }

    /// The queue sizes.
    pub fn config(&self) -> Config {
        self.core.own.config()
    }

    /// Registers `handler` under `id` (replacing any previous one).
    pub fn register(&mut self, id: u16, handler: Handler<C, S>) -> Result<(), AmError> {
        if id >= USER_HANDLERS {
            return Err(AmError::HandlerOutOfRange {
                id,
                limit: USER_HANDLERS,
            });
        }
        self.core.handlers[id as usize] = Some(handler);
        Ok(())
    }

    /// Sends a short request to `dest`'s handler `handler`.
    #[inline]
    pub fn request(&mut self, dest: u32, handler: u16, args: &[u64]) -> Result<(), AmError> {
        self.core.check_user(handler, args, None)?;
        Core::send(
            &mut self.core,
            &mut self.state,
            dest,
            REQUESTS,
            handler,
            args,
            None,
            Scope::Both,
        )
    }

    /// Sends a request with bulk data (at most one bulk block).
    #[inline]
    pub fn request_bulk(
        &mut self,
        dest: u32,
        handler: u16,
        args: &[u64],
        data: &[u8],
    ) -> Result<(), AmError> {
        self.core.check_user(handler, args, Some(data))?;
        Core::send(
            &mut self.core,
            &mut self.state,
            dest,
            REQUESTS,
            handler,
            args,
            Some(data),
            Scope::Both,
        )
    }

    /// Delivers the messages waiting in both queues, and the one message
    /// a look at the wire finds (if the job has ranks on other hosts; with
    /// peers on this host too, the wire is looked at on every eighth poll
    /// while it is idle, and on every poll while messages come); returns
    /// how many.
    #[inline]
    pub fn poll(&mut self) -> Result<usize, AmError> {
        self.core.take_deferred()?;
        Core::poll_queues(&mut self.core, &mut self.state, Scope::Both)
    }

    /// Polls until `done(state)` holds, waiting between messages as
    /// KLMO91's `fixed-spin(C)` does: it polls for C, the cost of a
    /// futex block and wake-up as [`calibration`] knows it, then sleeps on
    /// its doorbell until a sender rings it (module docs, "Idle waits").
    /// So an idle receiver costs no CPU, and a wait costs at most twice
    /// what the best choice, knowing when the next message comes, would.
    ///
    /// Every 20 ms of idling (100 ms once asleep, see the module docs) it
    /// recovers what dead senders left in its
    /// queues (so that live senders' messages queued behind them are
    /// delivered) and checks the peers: a peer found dead or closed is
    /// returned as [`AmError::PeerDead`] / [`AmError::PeerClosed`], once
    /// per peer; calling `poll_until` again resumes the wait with the
    /// remaining peers (module docs, "Failures are events"). A malformed
    /// message is dropped and returned as [`AmError::Garbage`]; calling
    /// again goes on as well.
    ///
    /// [`calibration`]: symmetry_locks::spin_then_block::calibration
    pub fn poll_until(&mut self, done: impl FnMut(&S) -> bool) -> Result<(), AmError> {
        self.poll_until_by(&FixedSpinC, done)
    }

    /// [`poll_until`](Endpoint::poll_until) with another of KLMO91's
    /// spin policies: how long it polls before it sleeps (`AlwaysSpin`
    /// never sleeps, `AlwaysBlock` sleeps at once, an adaptive policy
    /// learns from the gaps between messages it is told of).
    ///
    /// ```
    /// use symmetry_am::{claim::Stamp, job, Config, Endpoint};
    /// use symmetry_locks::spin_then_block::policy::AlwaysBlock;
    ///
    /// job::run_threads(1, |job| {
    ///     let mut ep = Endpoint::<Stamp, u32>::join(&job, &Config::default(), 0).unwrap();
    ///     ep.register(0, |t, _| { *t.state() += 1; Ok(()) }).unwrap();
    ///     ep.request(0, 0, &[]).unwrap();
    ///     ep.poll_until_by(&AlwaysBlock, |n| *n == 1).unwrap();
    ///     ep.finish().unwrap();
    /// });
    /// ```
    pub fn poll_until_by<P: SpinPolicy>(
        &mut self,
        policy: &P,
        mut done: impl FnMut(&S) -> bool,
    ) -> Result<(), AmError> {
        self.core.take_deferred()?;
        Core::poll_until(
            &mut self.core,
            &mut self.state,
            Need::Report,
            policy,
            |_, s| done(s),
        )
    }
}

impl<C: Claim, S> Core<C, S> {
    /// View of queue `which` of `rank` (own segment for our rank), or
    /// `None` if `rank` is on another host.
    ///
    /// The reference's lifetime is unbounded: it must not outlive `self`.
    /// A reference, not a copy: copying the view (72 bytes) through the
    /// stack on every send and poll stalled the loads that read the copy
    /// back on the stores that made it.
    #[inline(always)]
    fn queue<'x>(
        &self,
        rank: u32,
        which: usize,
    ) -> Result<Option<&'x Queue<'x, C::Tail>>, AmError> {
        match self.routes.get(rank as usize) {
            Some(r) => Ok(r.views.as_ref().map(|v| Self::unbound(&v[which]))),
            None => Err(AmError::NoSuchRank {
                rank,
                size: self.size,
            }),
        }
    }

    /// This process as the holder of a claim it makes.
    #[inline(always)]
    fn holder(&self) -> Holder {
        Holder {
            pid: self.pid,
            rank: self.rank,
        }
    }

    /// View of own queue `which` (unbounded as in [`Core::queue`]).
    #[inline(always)]
    fn own_queue<'x>(&self, which: usize) -> &'x Queue<'x, C::Tail> {
        Self::unbound(&self.own_views[which])
    }

    /// Detaches a view's reference from the borrow of `self`, so that the
    /// endpoint can be mutated while the view is in use.
    #[inline(always)]
    fn unbound<'x>(q: &Queue<'static, C::Tail>) -> &'x Queue<'x, C::Tail> {
        let q: *const Queue<'static, C::Tail> = q;
        // SAFETY: views are made in `join` and never changed after (no
        // push to `routes`, no write to a view), so every view stays at its
        // address, valid, until `self` is dropped with the mappings it
        // borrows; callers only use the reference while they hold `self`
        // (a method's `&self`/`&mut self`), never after.
        unsafe { &*q }
    }

    fn segment(&self, rank: u32) -> &Segment {
        match self.peers.get(rank as usize) {
            Some(Some(s)) => s,
            _ => &self.own,
        }
    }
}

impl<C: Claim, S> Core<C, S> {
    /// An error of one delivered message (its handler's, or its being
    /// garbage): returned at once, or kept for later while a collective
    /// waits, so that the collective completes on every rank.
    #[cold]
    #[inline(never)]
    fn event(&mut self, e: AmError) -> Result<(), AmError> {
        if !self.deferring {
            return Err(e);
        }
        self.stats.deferred += 1;
        if self.deferred.len() < DEFERRED_KEPT {
            self.deferred.push_back(e);
        }
        Ok(())
    }

    /// Returns the oldest error kept by [`Core::event`], if any.
    #[inline(always)]
    fn take_deferred(&mut self) -> Result<(), AmError> {
        match self.deferred.pop_front() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Runs a collective's `body` with errors of other messages deferred.
    fn collective<R>(&mut self, body: impl FnOnce(&mut Self) -> R) -> R {
        let outer = core::mem::replace(&mut self.deferring, true);
        let r = body(self);
        self.deferring = outer;
        r
    }
}

/// Adds one to a counter that only this receiver writes (a mirror of its
/// statistics in the shared head, for diagnostics).
#[inline(always)]
fn bump(counter: &crate::sync::AtomicU64) {
    add(counter, 1);
}

/// Adds `n` to a counter that only this receiver writes (as [`bump`]).
#[inline(always)]
fn add(counter: &crate::sync::AtomicU64, n: u64) {
    // Relaxed: only we write it, and nothing is ordered by it.
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}
