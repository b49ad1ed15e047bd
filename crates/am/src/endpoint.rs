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
//! finishes the wait); call it again to go on serving the others, and
//! [`Endpoint::failed_peers`] lists who is gone. A request to a peer known
//! to be gone, or that has closed, fails at once with the same error; a
//! death is noticed by the periodic checks of `poll_until`, or by a
//! sender that waits on the dead peer's full queue. `barrier`,
//! `allreduce` and `finish` need every rank and fail if one is gone.
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
//! A job whose [`Job::net`] places ranks on several hosts keeps these
//! queues for the ranks of this endpoint's host and sends to the others
//! over the job's [`Wire`] (see [`crate::net`] for what changes: order
//! across transports, failures). Requests, replies, bulk data, polling,
//! `barrier` and `allreduce` mean the same on both.
//!
//! Handlers are plain functions registered by id, with typed access to the
//! endpoint's state `S` (the Split-C/AM-II style: a handler updates the
//! program's data). Ids `0..USER_HANDLERS` are the user's; the rest are
//! used by [`Endpoint::barrier`] and [`Endpoint::allreduce`].

use std::time::{Duration, Instant};

use crate::claim::{Claim, Claimed, Hint, Holder};
use crate::error::AmError;
use crate::job::Job;
use crate::layout::{
    Body, CLAIMED, FREE, MAX_ARGS, Queue, READY_BULK, lap_of, pid_of, state_of, word,
};
use crate::net::{self, Kind, MAX_IN_FLIGHT, Wire};
use crate::segment::{Config, Segment, pid_alive, segment_name};
use crate::sync::{AtomicU32, Ordering};

/// Most ranks in one job (Anderson's lock has one flag per possible sender).
pub const MAX_RANKS: usize = 64;
/// User handler ids are `0..USER_HANDLERS`.
pub const USER_HANDLERS: u16 = 240;
const HANDLERS: usize = 256;
const H_BARRIER: u16 = 255;
const H_REDUCE: u16 = 254;
const H_RESULT: u16 = 253;

const REQUESTS: usize = 0;
const REPLIES: usize = 1;

/// Empty polls on a CLAIMED head packet before its owner's pid is checked.
const STALL_CHECK: u32 = 1 << 12;
/// Polls of the shared-memory queues per poll of the wire to other hosts.
const WIRE_EVERY: u32 = 8;
/// Full-queue waits between checks of the receiver's liveness.
const PEER_CHECK: u32 = 1 << 8;

/// A message handler: gets a token (reply, source, state) and the message.
pub type Handler<C, S> = fn(&mut Token<'_, C, S>, &Msg<'_>) -> Result<(), AmError>;

/// A delivered message.
#[derive(Debug)]
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

/// Operation of [`Endpoint::allreduce`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum ReduceOp {
    /// Wrapping sum.
    Sum = 0,
    /// Maximum.
    Max = 1,
    /// Minimum.
    Min = 2,
    /// Bitwise or.
    Or = 3,
}

impl ReduceOp {
    fn from_word(w: u64) -> Option<Self> {
        Some(match w {
            0 => ReduceOp::Sum,
            1 => ReduceOp::Max,
            2 => ReduceOp::Min,
            3 => ReduceOp::Or,
            _ => return None,
        })
    }
    fn apply(self, a: u64, b: u64) -> u64 {
        match self {
            ReduceOp::Sum => a.wrapping_add(b),
            ReduceOp::Max => a.max(b),
            ReduceOp::Min => a.min(b),
            ReduceOp::Or => a | b,
        }
    }
}

/// Counters of one endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Messages sent (requests and replies).
    pub sent: u64,
    /// Messages delivered to handlers.
    pub delivered: u64,
    /// Times a send found the destination queue full and waited.
    pub full_waits: u64,
    /// Positions of dead senders recovered by this receiver: packets left
    /// CLAIMED, and (`stamp`, `lock-free`) positions handed out and never
    /// claimed or published.
    pub recovered_packets: u64,
    /// Bulk blocks of dead senders recovered by this receiver.
    pub recovered_bulk: u64,
    /// Malformed messages dropped.
    pub garbage: u64,
}

#[derive(Debug, Default, Clone, Copy)]
struct Stall {
    pos: u64,
    word: u64,
    count: u32,
}

impl Stall {
    /// Starts counting afresh if the head moved or its word changed;
    /// whether it did.
    #[inline(always)]
    fn restart(&mut self, pos: u64, word: u64) -> bool {
        let fresh = self.pos != pos || self.word != word;
        if fresh {
            *self = Stall {
                pos,
                word,
                count: 0,
            };
        }
        fresh
    }
}

/// What makes a taken packet's body garbage (see `Core::defect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    /// A source rank outside the job.
    Source,
    /// More words than a message holds.
    Words,
    /// A handler id no sender may name.
    Handler,
    /// A bulk block or length outside the queue's.
    Bulk,
}

/// What is known of a peer that is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gone {
    /// Its process died (pid).
    Dead(u32),
    /// It closed its endpoint.
    Closed,
}

impl Gone {
    fn error(self, rank: u32) -> AmError {
        match self {
            Gone::Dead(pid) => AmError::PeerDead { rank, pid },
            Gone::Closed => AmError::PeerClosed { rank },
        }
    }
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
    /// [`WIRE_EVERY`] with peers on this host, else 1.
    every: u32,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("wire", &self.name).finish()
    }
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
    barrier_epoch: u64,
    barrier_arrivals: Vec<u64>,
    reduce_epoch: u64,
    reduce: Reduce,
    unlinked: bool,
}

/// What a rank knows of one rank of its job, in one entry, so that a send
/// looks one place up.
///
/// The views and the closed flag borrow the mappings in [`Core`]'s `own`
/// and `peers`, which live exactly as long as the core and are never
/// replaced, so the `'static` is never observable outside `Core` (it
/// hands out references only to code that holds `&self` or `&mut self`).
#[derive(Debug)]
struct Route<T: 'static> {
    /// Views of the rank's two queues (`None` for a rank on another host).
    views: Option<[Queue<'static, T>; 2]>,
    /// The closed flag in its segment's header (`None` on another host).
    closed: Option<&'static AtomicU32>,
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

impl<C: Claim, S> Token<'_, C, S> {
    /// The rank that sent the message.
    pub fn src(&self) -> u32 {
        self.src
    }

    /// This endpoint's rank.
    pub fn rank(&self) -> u32 {
        self.core.rank
    }

    /// The endpoint's state.
    pub fn state(&mut self) -> &mut S {
        self.state
    }

    /// Replies to the request being handled with a short message.
    pub fn reply(&mut self, handler: u16, args: &[u64]) -> Result<(), AmError> {
        self.reply_inner(handler, args, None)
    }

    /// Replies with bulk data (at most one bulk block).
    pub fn reply_bulk(&mut self, handler: u16, args: &[u64], data: &[u8]) -> Result<(), AmError> {
        self.reply_inner(handler, args, Some(data))
    }

    fn reply_inner(
        &mut self,
        handler: u16,
        args: &[u64],
        data: Option<&[u8]>,
    ) -> Result<(), AmError> {
        if !self.is_request {
            return Err(AmError::BadReply {
                why: "reply handlers cannot send (only request handlers reply)",
            });
        }
        if self.replied {
            return Err(AmError::BadReply {
                why: "a request handler replies at most once",
            });
        }
        check_user(handler, args, data, self.core)?;
        Core::send(
            self.core,
            self.state,
            self.src,
            REPLIES,
            handler,
            args,
            data,
            Scope::Replies,
        )?;
        self.replied = true;
        Ok(())
    }
}

fn check_user<C: Claim, S>(
    handler: u16,
    args: &[u64],
    data: Option<&[u8]>,
    core: &Core<C, S>,
) -> Result<(), AmError> {
    if handler >= USER_HANDLERS {
        return Err(AmError::HandlerOutOfRange {
            id: handler,
            limit: USER_HANDLERS,
        });
    }
    if args.len() > MAX_ARGS {
        return Err(AmError::TooManyArgs { given: args.len() });
    }
    if let Some(d) = data {
        let max = core.own.config().bulk_bytes as usize;
        if d.len() > max {
            return Err(AmError::BulkTooLarge {
                given: d.len(),
                max,
            });
        }
    }
    Ok(())
}

impl<C: Claim, S> Endpoint<C, S> {
    /// Creates this rank's endpoint in `job` and maps every other rank's
    /// (waiting up to `job.timeout` for them to appear).
    pub fn join(job: &Job, cfg: &Config, state: S) -> Result<Self, AmError> {
        if job.size == 0 || job.size as usize > MAX_RANKS || job.rank >= job.size {
            return Err(AmError::Config {
                detail: format!(
                    "rank {} of {} ranks (accepted: 1..={MAX_RANKS} ranks, rank < size)",
                    job.rank, job.size
                ),
            });
        }
        if let Some(net) = &job.net
            && net.hosts().len() != job.size as usize
        {
            return Err(AmError::Config {
                detail: format!(
                    "a host map of {} ranks for a job of {}",
                    net.hosts().len(),
                    job.size
                ),
            });
        }
        // The claim locks' spin budget comes from the locks crate's
        // calibration, measured once per process on first use (about a
        // millisecond): here, not inside the first contended wait.
        crate::claim::lock::spin_budget("join");
        let local = |r: u32| job.net.as_ref().is_none_or(|n| n.same_host(r, job.rank));
        // The wire first: connecting may be collective, and every rank
        // reaches it before anything that can time out.
        let remote = match &job.net {
            Some(net) if (0..job.size).any(|r| !local(r)) => Some(Remote {
                wire: net.wiring().connect()?,
                name: net.wiring().name(),
                buf: Vec::new(),
                timeout: job.timeout,
                tick: 0,
                every: if (0..job.size).any(|r| r != job.rank && local(r)) {
                    WIRE_EVERY
                } else {
                    1
                },
            }),
            _ => None,
        };
        let alone = !(0..job.size).any(|r| r != job.rank && local(r));
        let shm = job.shm_name();
        let own = Segment::create::<C>(&segment_name(&shm, job.rank), cfg, job.rank, job.size)?;
        // SAFETY: our own segment was created for `C`; the views live in
        // `core` with the mapping (see `Route`).
        let own_views = unsafe { [own.queue::<C>(REQUESTS), own.queue::<C>(REPLIES)] };
        let mut core = Core {
            rank: job.rank,
            size: job.size,
            pid: std::process::id(),
            own,
            peers: Vec::with_capacity(job.size as usize),
            routes: Vec::with_capacity(job.size as usize),
            own_views,
            remote,
            alone,
            self_unread: 0,
            handlers: vec![None; HANDLERS],
            stats: Stats::default(),
            stall: [Stall::default(); 2],
            head: [0; 2],
            barrier_epoch: 0,
            barrier_arrivals: vec![0; 64],
            reduce_epoch: 0,
            reduce: Reduce::default(),
            unlinked: false,
        };
        for r in 0..job.size {
            if r == job.rank || !local(r) {
                core.peers.push(None);
            } else {
                let seg = Segment::open::<C>(&segment_name(&shm, r), job.timeout)?;
                let snap = seg.snapshot();
                if snap.rank != r || snap.size != job.size {
                    return Err(AmError::Untrusted {
                        name: seg.name().to_string(),
                        detail: format!(
                            "its header says rank {} of {}, the job expects rank {r} of {}",
                            snap.rank, snap.size, job.size
                        ),
                    });
                }
                if seg.config() != *cfg {
                    return Err(AmError::Config {
                        detail: format!(
                            "rank {r} has queue sizes {:?}, rank {} has {cfg:?} (all ranks must agree)",
                            seg.config(),
                            job.rank
                        ),
                    });
                }
                core.peers.push(Some(seg));
            }
        }
        for r in 0..job.size {
            let mut route = Route {
                views: None,
                closed: None,
                hints: [Hint::default(); 2],
                gone: None,
            };
            if local(r) {
                let seg = core.segment(r);
                // SAFETY: every segment was created or validated for `C`;
                // the views live in `core` with the mappings (see `Route`).
                route.views = Some(unsafe { [seg.queue::<C>(REQUESTS), seg.queue::<C>(REPLIES)] });
                let closed: *const AtomicU32 = seg.closed_flag();
                // SAFETY: the flag is in the mapping, which lives as long
                // as `core` (see `Route`).
                route.closed = Some(unsafe { &*closed });
            }
            core.routes.push(route);
        }
        Ok(Self { core, state })
    }

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
        check_user(handler, args, None, &self.core)?;
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
        check_user(handler, args, Some(data), &self.core)?;
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
        Core::poll_queues(&mut self.core, &mut self.state, Scope::Both)
    }

    /// Polls until `done(state)` holds, backing off (and yielding the CPU)
    /// while nothing arrives. Every 20 ms of idling it recovers what dead
    /// senders left in its queues (so that live senders' messages queued
    /// behind them are delivered) and checks the peers: a peer found dead
    /// or closed is returned as [`AmError::PeerDead`] /
    /// [`AmError::PeerClosed`], once per peer; calling `poll_until` again
    /// resumes the wait with the remaining peers (module docs, "Failures
    /// are events"). A malformed message is dropped and returned as
    /// [`AmError::Garbage`]; calling again goes on as well.
    pub fn poll_until(&mut self, mut done: impl FnMut(&S) -> bool) -> Result<(), AmError> {
        Core::poll_until(&mut self.core, &mut self.state, Need::Report, |_, s| {
            done(s)
        })
    }

    /// The peers known to be gone (dead or closed), in rank order.
    pub fn failed_peers(&self) -> Vec<u32> {
        (0..self.core.size)
            .filter(|&r| self.core.routes[r as usize].gone.is_some())
            .collect()
    }

    /// A barrier over all ranks, built on Active Messages (dissemination:
    /// ceil(log2 size) rounds of one request each).
    pub fn barrier(&mut self) -> Result<(), AmError> {
        let core = &mut self.core;
        let epoch = core.barrier_epoch;
        core.barrier_epoch += 1;
        let (rank, size) = (core.rank, core.size);
        let mut round = 0usize;
        let mut dist = 1u32;
        while dist < size {
            let to = (rank + dist) % size;
            let from = (rank + size - dist) % size;
            Core::send(
                core,
                &mut self.state,
                to,
                REQUESTS,
                H_BARRIER,
                &[round as u64],
                None,
                Scope::Both,
            )?;
            Core::poll_until(core, &mut self.state, Need::Rank(from), |c, _| {
                c.barrier_arrivals[round] > epoch
            })?;
            round += 1;
            dist *= 2;
        }
        Ok(())
    }

    /// Combines `value` of every rank with `op`; every rank gets the result.
    pub fn allreduce(&mut self, value: u64, op: ReduceOp) -> Result<u64, AmError> {
        let core = &mut self.core;
        let epoch = core.reduce_epoch;
        core.reduce_epoch += 1;
        let parity = (epoch % 2) as usize;
        if core.size == 1 {
            return Ok(value);
        }
        if core.rank == 0 {
            let need = core.size - 1;
            Core::poll_until(core, &mut self.state, Need::Everyone, |c, _| {
                c.reduce.count[parity] >= need
            })?;
            let mut result = value;
            if core.reduce.count[parity] > 0 {
                result = op.apply(result, core.reduce.acc[parity]);
            }
            core.reduce.acc[parity] = 0;
            core.reduce.count[parity] = 0;
            for r in 1..core.size {
                Core::send(
                    core,
                    &mut self.state,
                    r,
                    REQUESTS,
                    H_RESULT,
                    &[result],
                    None,
                    Scope::Both,
                )?;
            }
            Ok(result)
        } else {
            Core::send(
                core,
                &mut self.state,
                0,
                REQUESTS,
                H_REDUCE,
                &[op as u64, value, epoch],
                None,
                Scope::Both,
            )?;
            Core::poll_until(core, &mut self.state, Need::Rank(0), |c, _| {
                c.reduce.results > epoch
            })?;
            Ok(core.reduce.result)
        }
    }

    /// Barrier, then close: the usual end of an SPMD program (no rank
    /// leaves while another may still send to it).
    pub fn finish(mut self) -> Result<Stats, AmError> {
        self.barrier()?;
        let stats = self.core.stats;
        drop(self);
        Ok(stats)
    }

    /// Test hook: claims a request packet (and a bulk block if `bulk`) at
    /// `dest` and leaves it CLAIMED, as a sender killed between its claim
    /// and its READY store would. Crash tests call it in a child process
    /// and then kill the child.
    #[doc(hidden)]
    pub fn debug_abandon_claim(&mut self, dest: u32, bulk: bool) -> Result<(), AmError> {
        let Some(q) = self.core.queue(dest, REQUESTS)? else {
            return Ok(());
        };
        let me = Holder {
            pid: self.core.pid,
            rank: self.core.rank,
        };
        let mut hint = self.core.routes[dest as usize].hints[REQUESTS];
        let (core, state) = (&mut self.core, &mut self.state);
        let mut waits = 0u32;
        let mut wait = || Core::wait_full(core, state, dest, Scope::Both, &mut waits);
        C::claim(q, me, &mut hint, bulk, &mut wait).map(|_| ())
    }

    /// Test hook: takes the claim lock of `dest`'s request queue and never
    /// releases it (a sender killed inside LC98 Fig. 2's critical section);
    /// `false` for algorithms without a lock.
    #[doc(hidden)]
    pub fn debug_hold_lock(&mut self, dest: u32) -> Result<bool, AmError> {
        let Some(q) = self.core.queue(dest, REQUESTS)? else {
            return Ok(false);
        };
        let me = Holder {
            pid: self.core.pid,
            rank: self.core.rank,
        };
        Ok(C::debug_hold_lock(q, me))
    }

    /// Checks that every peer is alive and open.
    pub fn check_peers(&self) -> Result<(), AmError> {
        (0..self.core.size).try_for_each(|r| match self.core.look(r) {
            Some(g) => Err(g.error(r)),
            None => Ok(()),
        })
    }
}

impl<C: Claim, S> Drop for Core<C, S> {
    fn drop(&mut self) {
        if let Some(r) = self.remote.as_mut() {
            // Best effort: a send still in flight after the timeout means
            // a receiver that stopped polling (the job is failing anyway).
            let _ = r.wire.close(r.timeout);
        }
        self.own.mark_closed();
        if !self.unlinked {
            self.unlinked = true;
            // Best effort: a launcher's cleanup removes it otherwise.
            let _ = crate::segment::unlink(self.own.name());
        }
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

    /// Whether `rank` is alive and open; a failure is remembered (so later
    /// requests to it fail at once) and returned.
    fn check_peer(&mut self, rank: u32) -> Result<(), AmError> {
        let Some(g) = self.look(rank) else {
            return Ok(());
        };
        self.routes[rank as usize].gone.get_or_insert((g, false));
        Err(g.error(rank))
    }

    /// Whether `rank` is gone: as remembered, else looked up (a closed
    /// flag, a dead owner) without remembering it.
    fn look(&self, rank: u32) -> Option<Gone> {
        if rank == self.rank {
            return None;
        }
        if matches!(
            self.routes.get(rank as usize),
            Some(Route { views: None, .. })
        ) {
            // On another host: its failures are the wire's to report.
            return None;
        }
        if let Some((g, _)) = self.routes.get(rank as usize).and_then(|r| r.gone) {
            return Some(g);
        }
        let seg = self.segment(rank);
        if seg.is_closed() {
            return Some(Gone::Closed);
        }
        let pid = seg.owner_pid();
        (pid != self.pid && !pid_alive(pid)).then_some(Gone::Dead(pid))
    }

    fn check_all_peers(&mut self) -> Result<(), AmError> {
        (0..self.size).try_for_each(|r| self.check_peer(r))
    }

    /// The first failed peer that `need` says ends a wait (checking the
    /// peers it names first), marking it reported.
    fn failed_for(&mut self, need: Need) -> Option<AmError> {
        match need {
            Need::Rank(r) => self.check_peer(r).err(),
            Need::Everyone => self.check_all_peers().err(),
            Need::Report => {
                for r in 0..self.size {
                    let _ = self.check_peer(r);
                }
                let r = self
                    .routes
                    .iter()
                    .position(|r| matches!(r.gone, Some((_, false))))?;
                let g = self.routes[r].gone.as_mut()?;
                g.1 = true;
                Some(g.0.error(r as u32))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn send(
        core: &mut Self,
        state: &mut S,
        dest: u32,
        which: usize,
        handler: u16,
        args: &[u64],
        data: Option<&[u8]>,
        scope: Scope,
    ) -> Result<(), AmError> {
        let Some(route) = core.routes.get(dest as usize) else {
            return Err(AmError::NoSuchRank {
                rank: dest,
                size: core.size,
            });
        };
        let (Some(views), Some(closed)) = (&route.views, route.closed) else {
            return Core::send_wire(core, state, dest, which, handler, args, data, scope);
        };
        let q = Self::unbound(&views[which]);
        // Acquire: pairs with the Release store in `Segment::mark_closed`.
        if route.gone.is_some() || closed.load(Ordering::Acquire) != 0 {
            return Core::refuse(core, dest);
        }
        let me = Holder {
            pid: core.pid,
            rank: core.rank,
        };
        let fast = match data {
            None => C::try_claim(q, me, &route.hints[which]),
            Some(_) => None,
        };
        let c = match fast {
            Some(c) => c,
            None => Core::claim_slow(core, state, q, me, dest, which, data.is_some(), scope)?,
        };
        q.publish(&c, handler, core.rank, args, data);
        core.stats.sent += 1;
        if dest == core.rank {
            core.self_unread += 1;
        }
        Ok(())
    }

    /// A claim that may wait (a full queue, a lost race, a bulk block):
    /// [`Claim::claim`] with the waiting closure, and the sender's hint of
    /// the queue brought up to date.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn claim_slow(
        core: &mut Self,
        state: &mut S,
        q: &Queue<'_, C::Tail>,
        me: Holder,
        dest: u32,
        which: usize,
        bulk: bool,
        scope: Scope,
    ) -> Result<Claimed, AmError> {
        let mut hint = core.routes[dest as usize].hints[which];
        let mut waits = 0u32;
        let mut wait = || Core::wait_full(core, state, dest, scope, &mut waits);
        let c = C::claim(q, me, &mut hint, bulk, &mut wait)?;
        core.routes[dest as usize].hints[which] = hint;
        Ok(c)
    }

    /// Sends to a rank on another host: one wire message holding the
    /// header, the words and the bulk data. Past [`MAX_IN_FLIGHT`]
    /// unfinished sends it waits as on a full queue (polling).
    #[allow(clippy::too_many_arguments)]
    #[cold]
    #[inline(never)]
    fn send_wire(
        core: &mut Self,
        state: &mut S,
        dest: u32,
        which: usize,
        handler: u16,
        args: &[u64],
        data: Option<&[u8]>,
        scope: Scope,
    ) -> Result<(), AmError> {
        let mut waits = 0u32;
        loop {
            let Some(r) = core.remote.as_mut() else {
                unreachable!("a rank without a view is on another host, so there is a wire");
            };
            if r.wire.in_flight() < MAX_IN_FLIGHT {
                break;
            }
            Core::wait_full(core, state, dest, scope, &mut waits)?;
        }
        let Some(r) = core.remote.as_mut() else {
            unreachable!("checked above");
        };
        let bulk = data.unwrap_or(&[]);
        let head = net::header(handler, args.len(), bulk.len());
        let mut w = [0u8; 8 * MAX_ARGS];
        let n = net::words(args, &mut w);
        let kind = if which == REQUESTS {
            Kind::Request
        } else {
            Kind::Reply
        };
        r.wire.send(dest, kind, [&head, &w[..n], bulk])?;
        core.stats.sent += 1;
        Ok(())
    }

    /// Delivers the message one look at the wire finds, if any (one per
    /// call: see [`Wire::recv`]); returns how many (0 or 1).
    #[inline]
    fn poll_wire(core: &mut Self, state: &mut S, scope: Scope) -> Result<usize, AmError> {
        let Some(r) = core.remote.as_mut() else {
            return Ok(0);
        };
        let only = (scope == Scope::Replies).then_some(Kind::Reply);
        let mut buf = std::mem::take(&mut r.buf);
        let result = Core::deliver_wire(core, state, only, &mut buf);
        if let Some(r) = core.remote.as_mut() {
            r.buf = buf;
        }
        result
    }

    /// `poll_wire`'s look and delivery, with the message buffer taken out
    /// of `core.remote` (so a handler can send while it is borrowed).
    #[inline]
    fn deliver_wire(
        core: &mut Self,
        state: &mut S,
        only: Option<Kind>,
        buf: &mut Vec<u8>,
    ) -> Result<usize, AmError> {
        let Some(r) = core.remote.as_mut() else {
            return Ok(0);
        };
        let Some((src, kind)) = r.wire.recv(only, buf)? else {
            return Ok(0);
        };
        core.stats.delivered += 1;
        let which = if kind == Kind::Request {
            REQUESTS
        } else {
            REPLIES
        };
        let msg = match net::decode(buf) {
            Ok(m)
                if m.handler < USER_HANDLERS
                    || matches!(m.handler, H_BARRIER | H_REDUCE | H_RESULT) =>
            {
                m
            }
            Ok(m) => {
                core.stats.garbage += 1;
                return Err(AmError::Garbage {
                    src,
                    detail: format!("handler id {}", m.handler),
                });
            }
            Err(detail) => {
                core.stats.garbage += 1;
                return Err(AmError::Garbage { src, detail });
            }
        };
        let args = msg.args;
        Core::dispatch(
            core,
            state,
            which,
            src,
            msg.handler,
            &args[..msg.nargs],
            msg.bulk,
        )?;
        Ok(1)
    }

    /// The error of a request to a peer that is gone.
    #[cold]
    #[inline(never)]
    fn refuse(core: &mut Self, dest: u32) -> Result<(), AmError> {
        core.check_peer(dest)?;
        // Closed between the two looks: report it as closed.
        Err(AmError::PeerClosed { rank: dest })
    }

    /// One wait of a sender facing a full queue: poll, back off, and now
    /// and then make sure the receiver still exists.
    #[cold]
    #[inline(never)]
    fn wait_full(
        core: &mut Self,
        state: &mut S,
        dest: u32,
        scope: Scope,
        waits: &mut u32,
    ) -> Result<(), AmError> {
        if *waits == 0 {
            core.stats.full_waits += 1;
        }
        *waits = waits.wrapping_add(1);
        Core::poll_queues(core, state, scope)?;
        backoff(*waits);
        if (*waits).is_multiple_of(PEER_CHECK) {
            core.check_peer(dest)?;
        }
        Ok(())
    }

    /// Polls until `done`; every 20 ms of idling, repairs the heads of its
    /// own queues (dead senders' claims, stranded positions) and checks
    /// the peers that `need` names. A failed check is reported only if
    /// one more poll does not finish the wait (a peer may send its last
    /// message and close right away).
    fn poll_until(
        core: &mut Self,
        state: &mut S,
        need: Need,
        mut done: impl FnMut(&Self, &S) -> bool,
    ) -> Result<(), AmError> {
        let mut idle = 0u32;
        let mut last_check = Instant::now();
        loop {
            if done(core, state) {
                return Ok(());
            }
            if Core::poll_queues(core, state, Scope::Both)? > 0 {
                idle = 0;
                continue;
            }
            idle = idle.saturating_add(1);
            backoff(idle);
            if idle.is_multiple_of(64) && last_check.elapsed() >= Duration::from_millis(20) {
                last_check = Instant::now();
                // Repair the heads first: messages of live senders may be
                // queued behind a dead one's claim.
                let before = core.stats.recovered_packets;
                for which in [REQUESTS, REPLIES] {
                    let q = core.own_queue(which);
                    let pos = core.head[which];
                    let w = q.word_at(pos);
                    core.unstick(q, which, pos, w);
                    core.sweep_dead_bulk(q, which);
                }
                if core.stats.recovered_packets > before {
                    idle = 0;
                    continue;
                }
                if let Some(e) = core.failed_for(need) {
                    Core::poll_queues(core, state, Scope::Both)?;
                    if done(core, state) {
                        return Ok(());
                    }
                    return Err(e);
                }
            }
        }
    }

    #[inline]
    fn poll_queues(core: &mut Self, state: &mut S, scope: Scope) -> Result<usize, AmError> {
        let mut n = 0;
        if !core.alone || core.self_unread > 0 {
            n += Core::poll_queue(core, state, REPLIES)?;
            if scope == Scope::Both {
                n += Core::poll_queue(core, state, REQUESTS)?;
            }
        }
        if let Some(r) = core.remote.as_mut() {
            // With peers on this host the wire is polled on one call in
            // WIRE_EVERY: a probe of MPI costs several times a poll of the
            // queues, and would slow the same-host round trip on every poll.
            // A countdown, not a remainder: a division on every poll
            // showed in profiles of the MPI-only round trip.
            r.tick += 1;
            if r.tick >= r.every {
                r.tick = 0;
                let got = Core::poll_wire(core, state, scope)?;
                if got > 0
                    && let Some(r) = core.remote.as_mut()
                {
                    // A look delivers one message: while they come, the
                    // wire is looked at on every poll.
                    r.tick = r.every;
                }
                n += got;
            }
        }
        Ok(n)
    }

    /// Polls own queue `which`: a look at its head's word, inline; the
    /// delivery loop only if a message is there.
    #[inline(always)]
    fn poll_queue(core: &mut Self, state: &mut S, which: usize) -> Result<usize, AmError> {
        let q = core.own_queue(which);
        let pos = core.head[which];
        let w = q.word_at(pos);
        if q.ready(w, pos, C::RECEIVER_FREES).is_none() {
            // Counted only: whether a sender holds the head up (which may
            // mean reading the senders' tail line, and pulling it away
            // from them) is looked at every STALL_CHECK polls.
            core.stalled(q, which, pos, w);
            return Ok(0);
        }
        Core::deliver(core, state, which, q)
    }

    /// Delivers the messages at the head of own queue `which`, at most one
    /// ring's worth (so a flood cannot starve the caller).
    #[inline(never)]
    fn deliver(
        core: &mut Self,
        state: &mut S,
        which: usize,
        q: &Queue<'_, C::Tail>,
    ) -> Result<usize, AmError> {
        let len = q.packets.len();
        let mut delivered = 0usize;
        while delivered < len {
            let pos = core.head[which];
            let w = q.word_at(pos);
            let Some(st) = q.ready(w, pos, C::RECEIVER_FREES) else {
                break;
            };
            let body = q.take(pos, st == READY_BULK);
            core.head[which] = pos + 1;
            // The packet goes back to the senders now that its body is
            // copied; a bulk block, read in place, after the handler.
            q.release(pos, w, C::RECEIVER_FREES);
            core.stats.delivered += 1;
            core.self_unread = core.self_unread.saturating_sub(1);
            bump(&q.head.delivered);
            delivered += 1;
            if let Some(d) = core.defect(q, st, &body) {
                return Err(core.garbage_of(q, &body, d));
            }
            let (bulk, bulk_slot) = Self::bulk_of(q, st, &body);
            let nargs = (body.nargs as usize).min(MAX_ARGS);
            let r = Core::dispatch(
                core,
                state,
                which,
                body.src,
                body.handler,
                &body.args[..nargs],
                bulk,
            );
            if let Some(b) = bulk_slot {
                q.free_bulk(b);
            }
            r?;
        }
        Ok(delivered)
    }

    /// What is wrong with a taken packet's body, if anything, against
    /// what an honest sender writes (a few compares, inline; the error is
    /// built by [`Core::garbage_of`], out of line).
    #[inline(always)]
    fn defect(&self, q: &Queue<'_, C::Tail>, st: u64, body: &Body) -> Option<Defect> {
        if body.src >= self.size {
            Some(Defect::Source)
        } else if body.nargs as usize > MAX_ARGS {
            Some(Defect::Words)
        } else if body.handler >= USER_HANDLERS
            && !matches!(body.handler, H_BARRIER | H_REDUCE | H_RESULT)
        {
            Some(Defect::Handler)
        } else if st == READY_BULK
            && ((body.bulk_slot as usize) >= q.bulk.len() || body.bulk_len as usize > q.bulk_bytes)
        {
            Some(Defect::Bulk)
        } else {
            None
        }
    }

    /// Counts a body with a [`defect`](Core::defect) (dropped) and returns
    /// the error that says what it is.
    #[cold]
    #[inline(never)]
    fn garbage_of(&mut self, q: &Queue<'_, C::Tail>, body: &Body, d: Defect) -> AmError {
        self.stats.garbage += 1;
        let detail = match d {
            Defect::Source => format!("source rank {} (the job has {})", body.src, self.size),
            Defect::Words => format!("{} words (at most {MAX_ARGS})", body.nargs),
            Defect::Handler => format!("handler id {}", body.handler),
            Defect::Bulk => format!(
                "bulk block {} of {} bytes (the queue has {} blocks of {} bytes)",
                body.bulk_slot,
                body.bulk_len,
                q.bulk.len(),
                q.bulk_bytes
            ),
        };
        AmError::Garbage {
            src: body.src,
            detail,
        }
    }

    /// The bulk data and block of a bulk message without a defect (`st` is
    /// READY_BULK); none for a short one.
    #[inline(always)]
    fn bulk_of<'q>(q: &Queue<'q, C::Tail>, st: u64, body: &Body) -> (&'q [u8], Option<usize>) {
        if st != READY_BULK {
            return (&[], None);
        }
        let b = body.bulk_slot as usize;
        debug_assert!(b < q.bulk.len() && body.bulk_len as usize <= q.bulk_bytes);
        // SAFETY: the block is in bounds (`defect` checked it, against
        // our own configuration) and was filled before the READY store we
        // acquired; it stays untouched until we free it after the handler
        // (whose borrow cannot escape the call).
        let data = unsafe { core::slice::from_raw_parts(q.bulk_ptr(b), body.bulk_len as usize) };
        (data, Some(b))
    }

    #[inline(always)]
    fn dispatch(
        core: &mut Self,
        state: &mut S,
        which: usize,
        src: u32,
        handler: u16,
        args: &[u64],
        bulk: &[u8],
    ) -> Result<(), AmError> {
        if handler >= USER_HANDLERS {
            return core.internal(handler, src, args);
        }
        let Some(h) = core.handlers[handler as usize] else {
            return Err(AmError::NoHandler { id: handler, src });
        };
        let msg = Msg {
            src,
            handler,
            args,
            bulk,
        };
        let mut token = Token {
            core,
            state,
            src,
            is_request: which == REQUESTS,
            replied: false,
        };
        h(&mut token, &msg)
    }

    fn internal(&mut self, id: u16, src: u32, args: &[u64]) -> Result<(), AmError> {
        match (id, args) {
            (H_BARRIER, [round]) if (*round as usize) < self.barrier_arrivals.len() => {
                self.barrier_arrivals[*round as usize] += 1;
            }
            (H_REDUCE, [op, value, epoch]) if self.rank == 0 => {
                let op = ReduceOp::from_word(*op).ok_or_else(|| AmError::Garbage {
                    src,
                    detail: format!("all-reduce operation {op}"),
                })?;
                let p = (*epoch % 2) as usize;
                self.reduce.acc[p] = if self.reduce.count[p] == 0 {
                    *value
                } else {
                    op.apply(self.reduce.acc[p], *value)
                };
                self.reduce.count[p] += 1;
            }
            (H_RESULT, [value]) => {
                self.reduce.result = *value;
                self.reduce.results += 1;
            }
            _ => {
                return Err(AmError::Garbage {
                    src,
                    detail: format!(
                        "internal message {id} with {} words at rank {}",
                        args.len(),
                        self.rank
                    ),
                });
            }
        }
        Ok(())
    }

    /// The head holds no message: after a while, repair it if a sender
    /// holds it up and can be got past.
    #[inline(always)]
    fn stalled(&mut self, q: &Queue<'_, C::Tail>, which: usize, pos: u64, w: u64) {
        let s = &mut self.stall[which];
        if s.restart(pos, w) {
            return;
        }
        s.count = s.count.wrapping_add(1);
        if s.count.is_multiple_of(STALL_CHECK) {
            self.unstick(q, which, pos, w);
        }
    }

    /// Repairs the head of own queue `which` at `pos` (word `w`, not a
    /// message) if a sender holds it up and can be got past: a packet
    /// CLAIMED for this position by a dead process is recovered; a
    /// position handed out and not shown by its packet is skipped only if
    /// the claim algorithm finds a sender that will never show it dead
    /// ([`Claim::owner_dead`]; `poll_until` looks every 20 ms, a polling
    /// loop every [`STALL_CHECK`] polls). A live sender, however slow, is
    /// waited for.
    #[cold]
    #[inline(never)]
    fn unstick(&mut self, q: &Queue<'_, C::Tail>, which: usize, pos: u64, w: u64) {
        match state_of(w) {
            CLAIMED if C::RECEIVER_FREES || lap_of(w) == q.claimed_lap(pos) => {
                self.recover(q, which, pos, w);
            }
            _ if !C::stranded(q.tail, pos) => {}
            _ if C::owner_dead(q, pos, w) => {
                // A dead sender's position: counted as its claim would be,
                // and its bulk block (taken before the position) swept.
                if self.skip(q, which, pos, w) {
                    self.stats.recovered_packets += 1;
                    bump(&q.head.recovered);
                }
                self.sweep_dead_bulk(q, which);
            }
            _ => {}
        }
    }

    /// Skips the head position `pos` (word `w`, which does not show it) of
    /// a dead sender: stamps its slot FREE for the next lap. Under
    /// `lock-free` the slot's next lap is then owed by its next sender;
    /// under `stamp` the slot's next position finds it stamped as a
    /// consumed one.
    #[cold]
    fn skip(&mut self, q: &Queue<'_, C::Tail>, which: usize, pos: u64, w: u64) -> bool {
        if !q.next_lap(pos, w) {
            return false;
        }
        self.head[which] = pos + 1;
        q.advance(pos);
        true
    }

    #[cold]
    #[inline(never)]
    fn recover(&mut self, q: &Queue<'_, C::Tail>, which: usize, pos: u64, w: u64) {
        let pid = pid_of(w);
        if pid == 0 || pid == self.pid & 0x00ff_ffff || pid_alive(pid) {
            return;
        }
        if C::RECEIVER_FREES && !q.next_lap(pos, w) {
            return;
        }
        // Where the receiver does not free packets, moving the head past
        // the dead claim is all: the word, stamped for this lap, reads as
        // consumed for the slot's next position once the head is past it.
        self.head[which] = pos + 1;
        q.advance(pos);
        self.stats.recovered_packets += 1;
        bump(&q.head.recovered);
        self.sweep_dead_bulk(q, which);
    }

    /// Frees the bulk blocks that dead senders claimed and that no READY
    /// packet refers to. A dead process never makes anything READY again,
    /// so such a block can only be one it claimed before (or without)
    /// claiming its packet; without this sweep, a sender killed between
    /// its bulk claim and its packet claim would leak the block.
    #[cold]
    #[inline(never)]
    fn sweep_dead_bulk(&mut self, q: &Queue<'_, C::Tail>, which: usize) {
        let own = self.pid & 0x00ff_ffff;
        let claimed_by_dead =
            |bw: u64| state_of(bw) == CLAIMED && pid_of(bw) != own && !pid_alive(pid_of(bw));
        if !q
            .bulk
            .iter()
            .any(|b| claimed_by_dead(b.load(Ordering::Relaxed)))
        {
            return;
        }
        let mut referenced = vec![false; q.bulk.len()];
        let head = self.head[which];
        for pos in head..head + q.packets.len() as u64 {
            let p = &q.packets[q.slot_of(pos)];
            // Acquire: as in `poll_queue`, for the body read below.
            let w = p.state.load(Ordering::Acquire);
            if q.ready(w, pos, C::RECEIVER_FREES) == Some(READY_BULK) {
                // SAFETY: a message not yet delivered is not written until
                // the head passes it, which only we move.
                let b = unsafe { p.body.read() }.bulk_slot as usize;
                if b < referenced.len() {
                    referenced[b] = true;
                }
            }
        }
        for (b, slot) in q.bulk.iter().enumerate() {
            let bw = slot.load(Ordering::Acquire);
            if !referenced[b] && claimed_by_dead(bw) {
                let free = word(lap_of(bw).wrapping_add(1), 0, FREE);
                if slot
                    .compare_exchange(bw, free, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    self.stats.recovered_bulk += 1;
                    bump(&q.head.recovered_bulk);
                }
            }
        }
    }
}

/// Adds one to a counter that only this receiver writes (a mirror of its
/// statistics in the shared head, for diagnostics).
#[inline(always)]
fn bump(counter: &crate::sync::AtomicU64) {
    // Relaxed: only we write it, and nothing is ordered by it.
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// Backoff of the `n`-th consecutive unsuccessful wait: exponential spins
/// up to 1024 pause instructions, then yield the processor too (waiting
/// threads may outnumber cores).
#[inline]
fn backoff(n: u32) {
    let spins = 1u32 << n.min(10);
    for _ in 0..spins {
        crate::sync::spin_hint();
    }
    if n > 10 {
        std::thread::yield_now();
    }
}
