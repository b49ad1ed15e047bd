//! Measurement kernels of the Active Messages experiments (`am-logp`,
//! `am-stress`, `am-bulk`, `peer-messages`): each runs ranks of a thread-mode job
//! (`symmetry_am::job::run_threads`: every rank maps the segments itself,
//! so the memory traffic is that of separate processes) and returns plain
//! numbers. Algorithms are chosen by registry name and monomorphized
//! through `symmetry_am::for_each_claim!`.
//!
//! # How LogP is measured ([`logp`])
//!
//! The microbenchmark of Culler, Liu, Martin and Yoshikawa (IEEE Micro
//! 1996) that LC98 §4.1 uses, between two ranks pinned to the first two
//! allowed CPUs (when there are two): rank 0 is the client, rank 1 an RPC
//! server that polls in a tight loop.
//!
//! 1. Warm-up: round trips and a short stream, untimed.
//! 2. **RTT**: `rounds` ping-pongs (rank 0 requests, rank 1's handler
//!    replies, rank 0 polls until the reply is delivered), with no clock
//!    read inside a block.
//! 3. **o_s, o_r**: another `rounds` ping-pongs, instrumented: o_s is the
//!    mean time inside `request` (the queue is never full in a ping-pong),
//!    o_r the mean time inside the `poll` call that delivers the reply (the
//!    reply handler does nothing; the empty polls before it are not
//!    counted). Each call is timed with a pair of `Instant::now()` reads
//!    (clock reads through the vDSO where the kernel offers one), and the
//!    mean cost of an empty pair of reads, measured first, is subtracted
//!    (clamped at 0).
//! 4. **g**: rank 0 sends `rounds` one-way requests as fast as it can (the
//!    queue is full most of the time: a full queue makes `request` back off
//!    and poll, as LC98's Fig. 2 does; in that steady state the sender
//!    goes at the receiver's pace), then one request whose reply says that
//!    rank 1 has delivered everything before it (queues are FIFO).
//! 5. **L** = RTT / 2 - o_s - o_r (negative where the overheads overlap,
//!    as in LC98 Table 1).
//!
//! Each phase is timed in blocks of up to 1,000 messages and reports the
//! median block's time per message: a block in which the scheduler
//! preempted one of the ranks (or another program ran) is an outlier
//! instead of a bias, which matters wherever the ranks share their CPUs
//! with other load.
//!
//! # Cache-line ping-pong ([`pingpong_rtt_ns`])
//!
//! The physical limit of a shared-memory message: two pinned threads
//! bounce one `AtomicU64` on its own cache line (`CachePadded`), each
//! writing the next value when it sees the other's; RTT = time per round
//! trip of the median block, after a warm-up.
//!
//! # Many-to-one stress ([`stress`])
//!
//! LC98 §4.2: rank 0 receives, ranks `1..=writers` send `ints` integers in
//! total (split evenly, one per short request). The integers are
//! `splitmix64(i)` for the global index `i`. Each writer ends with a
//! message carrying how many integers it sent and their wrapping sum;
//! queues are FIFO, so when every writer's end has been delivered the
//! receiver holds all the integers, and its own count and sum must match
//! the writers' totals (and, for a complete run, the sum of all `ints`
//! values): every integer arrived exactly once. Every rank passes two
//! barriers before sending: the first makes sure every rank has joined the
//! job (opening a peer's segment backs off by sleeping up to
//! milliseconds, which must not be timed), and rank 0 starts its clock
//! between the two, so no integer is sent before it. The time runs to the delivery of the last writer's end (right after
//! its last integer); the second barrier's few microseconds are counted
//! (under oversubscription its messages queue behind the integers).
//! [`stress_within`] adds a time budget, after which the writers are
//! asked to stop and the run reports what was delivered. Ranks are pinned one
//! per CPU when every rank has a CPU of its own; when they outnumber the
//! CPUs they are left to the kernel's scheduler and the receiver yields the
//! CPU after 64 consecutive empty polls (the senders already back off and
//! yield on a full queue).
//!
//! # Bulk transfers ([`bulk`], [`memcpy_run`], [`cross_core_run`])
//!
//! LC98 §4.1's peak bulk bandwidth: two ranks stream `request_bulk`
//! messages of one size, the receiver copying each block out of the queue
//! and checking its sequence number (see [`bulk`]). Two baselines of the
//! same shape and size: one thread copying between two ring-shaped buffers
//! ([`memcpy_run`], "the memory copy rate"), and the same chunks handed
//! between two pinned threads through a ring of the same blocks with a
//! sequence word per block ([`cross_core_run`]: both copies and the
//! cache-line migration of a bulk message, without claim, packet or
//! dispatch).
//!
//! # Teardown
//!
//! Every rank ends with an Active Messages barrier and closes its endpoint
//! only once all ranks have left it (see `run_rank` for why
//! `Endpoint::finish` is not used).

use std::cell::UnsafeCell;
use std::hint::spin_loop;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use symmetry_am::{AmError, Claim, Config, Endpoint, Job, MAX_RANKS, Msg, Token, job};

use crate::kernels::locks::allowed_cpus;
use crate::stats::median;

/// LC98 Table 1's parameters of one algorithm, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogP {
    /// Round trip of a short request and its reply.
    pub rtt_ns: f64,
    /// Send overhead: time inside `request`.
    pub os_ns: f64,
    /// Receive overhead: time inside a `poll` that delivers one message.
    pub or_ns: f64,
    /// Gap: time per message of a long one-way stream.
    pub g_ns: f64,
    /// Latency: `rtt/2 - os - or` (negative when the overheads overlap).
    pub l_ns: f64,
}

/// Handler ids of the LogP benchmark.
const H_PING: u16 = 0;
const H_PONG: u16 = 1;
const H_STREAM: u16 = 2;
const H_STOP: u16 = 3;
/// Handler ids of the stress test: an integer, a writer's end (with its
/// totals), the receiver's request to stop writing.
const H_INT: u16 = 0;
const H_DONE: u16 = 1;
const H_STOP_WRITING: u16 = 2;

/// Empty polls between two checks that the peers are still open (a rank
/// that failed drops its endpoint, which marks it closed).
const PEER_CHECK: u64 = 1 << 12;
/// Consecutive empty polls after which a polite waiter yields the CPU.
const YIELD_AFTER: u64 = 64;

/// Number of CPUs this process may run on.
fn cpus() -> usize {
    allowed_cpus().len().max(1)
}

/// Unknown-algorithm error, listing the accepted names.
fn unknown(alg: &str) -> String {
    format!(
        "unknown claim algorithm `{alg}` (accepted: {})",
        symmetry_am::claim::NAMES.join(", ")
    )
}

/// One wait step after an empty poll: spin, or yield once `polite` and the
/// queue has stayed empty for a while; check the peers now and then.
#[inline]
fn idle<C: Claim, S>(ep: &Endpoint<C, S>, empty: &mut u64, polite: bool) -> Result<(), AmError> {
    *empty += 1;
    if (*empty).is_multiple_of(PEER_CHECK) {
        ep.check_peers()?;
    }
    if polite && *empty >= YIELD_AFTER {
        std::thread::yield_now();
    } else {
        spin_loop();
    }
    Ok(())
}

/// Polls until one call delivers something.
#[inline]
fn poll_one<C: Claim, S>(ep: &mut Endpoint<C, S>, polite: bool) -> Result<(), AmError> {
    let mut empty = 0u64;
    while ep.poll()? == 0 {
        idle(ep, &mut empty, polite)?;
    }
    Ok(())
}

/// Mean cost of a back-to-back pair of `Instant::now()` reads, in ns.
fn timer_overhead_ns() -> f64 {
    let n = 20_000u32;
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let mut sum = Duration::ZERO;
        for _ in 0..n {
            let a = Instant::now();
            let b = Instant::now();
            sum += b - a;
        }
        best = best.min(sum.as_nanos() as f64 / f64::from(n));
    }
    best
}

/// The error of a failed job, if any: the first rank's error that is not
/// a consequence of another rank's failure (a peer closed or dead), else
/// the first one.
fn root_cause(what: &str, alg: &str, errors: Vec<(usize, AmError)>) -> Result<(), String> {
    let secondary =
        |e: &AmError| matches!(e, AmError::PeerClosed { .. } | AmError::PeerDead { .. });
    let pick = errors
        .iter()
        .position(|(_, e)| !secondary(e))
        .or((!errors.is_empty()).then_some(0));
    match pick {
        Some(i) => {
            let (rank, e) = &errors[i];
            Err(format!("{what} {alg} rank {rank}: {e}"))
        }
        None => Ok(()),
    }
}

/// Waits on a process-local barrier when dropped.
struct Gate<'a>(&'a Barrier);

impl Drop for Gate<'_> {
    fn drop(&mut self) {
        self.0.wait();
    }
}

/// Runs one rank of a thread-mode job: joins its endpoint, runs `body`,
/// ends with an Active Messages barrier, and closes the endpoint only once
/// every rank of the job has left that barrier (`gate`, sized to the job).
///
/// `Endpoint::finish` (barrier, then close) is not used: in its
/// dissemination barrier a rank may leave while another still waits for
/// the message of its last round from a third rank, and the waiting rank's
/// periodic liveness check then reports the closed endpoint of the rank
/// that left as an error (`PeerClosed`); with eight ranks on two cores this
/// happened within a few runs. Thread ranks can wait for each other on a
/// process-local barrier before closing instead. A rank whose body fails
/// (or panics) closes its endpoint first, so that peers waiting on it see
/// the error, and then waits at the gate.
fn run_rank<C: Claim, S, R>(
    job: &Job,
    gate: &Barrier,
    state: S,
    body: impl FnOnce(&mut Endpoint<C, S>) -> Result<R, AmError>,
) -> Result<R, AmError> {
    // Declared before the endpoint, so dropped after it on an early return.
    let gate = Gate(gate);
    let mut ep = Endpoint::<C, S>::join(job, &Config::default(), state)?;
    let r = body(&mut ep).and_then(|r| ep.barrier().map(|()| r));
    if r.is_ok() {
        // Everyone has left the barrier: now the endpoint may close.
        drop(gate);
    }
    r
}

// ---------------------------------------------------------------------------
// LogP

/// State of a LogP rank.
#[derive(Debug, Default)]
struct LogpState {
    /// Rank 1: stream messages delivered.
    streamed: u64,
    /// Rank 1: rank 0 said it is done.
    stop: bool,
}

/// Rank 1: answer a ping.
fn on_ping<C: Claim>(t: &mut Token<'_, C, LogpState>, m: &Msg<'_>) -> Result<(), AmError> {
    t.reply(H_PONG, &[m.args[0]])
}

/// Rank 0: a reply; does nothing (rank 0 sees it in `poll`'s count).
fn on_pong<C: Claim>(_t: &mut Token<'_, C, LogpState>, _m: &Msg<'_>) -> Result<(), AmError> {
    Ok(())
}

/// Rank 1: one message of the stream.
fn on_stream<C: Claim>(t: &mut Token<'_, C, LogpState>, _m: &Msg<'_>) -> Result<(), AmError> {
    t.state().streamed += 1;
    Ok(())
}

/// Rank 1: the end of the benchmark.
fn on_stop<C: Claim>(t: &mut Token<'_, C, LogpState>, _m: &Msg<'_>) -> Result<(), AmError> {
    t.state().stop = true;
    Ok(())
}

/// Measures LogP for claim algorithm `alg` over `rounds` round trips (and
/// as many stream messages).
pub fn logp(alg: &str, rounds: u64) -> Result<LogP, String> {
    if rounds == 0 {
        return Err("logp: rounds must be at least 1".into());
    }
    macro_rules! by_name {
        ($($name:literal => $ty:ty;)*) => {
            match alg {
                $($name => logp_with::<$ty>(rounds),)*
                _ => Err(unknown(alg)),
            }
        };
    }
    symmetry_am::for_each_claim!(by_name)
}

/// What rank 0 measured: ns per message of each block of each phase.
struct LogpOut {
    rtt: Vec<f64>,
    os: Vec<f64>,
    or: Vec<f64>,
    g: Vec<f64>,
}

/// Messages per timed block: `rounds` in blocks of [`BLOCK`] (fewer when
/// `rounds` is small: at least 5 blocks where possible), the last block
/// taking the remainder.
#[derive(Debug, Clone, Copy)]
struct Blocks {
    rounds: u64,
    size: u64,
}

/// Messages per timed block.
const BLOCK: u64 = 1_000;

impl Blocks {
    fn new(rounds: u64) -> Self {
        Self {
            rounds,
            size: (rounds / 5).clamp(1, BLOCK),
        }
    }
    fn count(&self) -> usize {
        self.rounds.div_ceil(self.size) as usize
    }
    /// `(first index, length)` of each block.
    fn iter(self) -> impl Iterator<Item = (u64, u64)> {
        (0..self.rounds)
            .step_by(self.size as usize)
            .map(move |s| (s, self.size.min(self.rounds - s)))
    }
}

/// Nanoseconds per message of `len` messages taking `d`.
fn per_msg(d: Duration, len: u64) -> f64 {
    d.as_nanos() as f64 / len.max(1) as f64
}

/// The median of per-block times (NaN when there is no block, so that a
/// run too short to time stays visibly unmeasured).
fn median_block(v: &[f64]) -> f64 {
    median(v).unwrap_or(f64::NAN)
}

fn logp_with<C: Claim>(rounds: u64) -> Result<LogP, String> {
    let pin = cpus() >= 2;
    let polite = !pin;
    let warm = (rounds / 5).clamp(100, 20_000);
    let timer = timer_overhead_ns();
    let gate = Barrier::new(2);
    let results = job::run_threads(2, |job| {
        if pin {
            pin_to_core(job.rank as usize);
        }
        run_rank::<C, _, _>(&job, &gate, LogpState::default(), |ep| {
            logp_rank(ep, job.rank, rounds, warm, polite)
        })
    });
    let mut out = None;
    let mut errors = Vec::new();
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Ok(Some(o)) => out = Some(o),
            Ok(None) => {}
            Err(e) => errors.push((rank, e)),
        }
    }
    root_cause("logp", C::NAME, errors)?;
    let o = out.ok_or_else(|| format!("logp {}: rank 0 returned no result", C::NAME))?;
    let rtt_ns = median_block(&o.rtt);
    let os_ns = (median_block(&o.os) - timer).max(0.0);
    let or_ns = (median_block(&o.or) - timer).max(0.0);
    Ok(LogP {
        rtt_ns,
        os_ns,
        or_ns,
        g_ns: median_block(&o.g),
        l_ns: rtt_ns / 2.0 - os_ns - or_ns,
    })
}

/// The body of a LogP rank (rank 0 the client, rank 1 the server).
fn logp_rank<C: Claim>(
    ep: &mut Endpoint<C, LogpState>,
    rank: u32,
    rounds: u64,
    warm: u64,
    polite: bool,
) -> Result<Option<LogpOut>, AmError> {
    ep.register(H_PING, on_ping::<C>)?;
    ep.register(H_PONG, on_pong::<C>)?;
    ep.register(H_STREAM, on_stream::<C>)?;
    ep.register(H_STOP, on_stop::<C>)?;
    ep.barrier()?;
    if rank == 1 {
        // The server: poll in a tight loop until told to stop.
        let mut empty = 0u64;
        while !ep.state().stop {
            if ep.poll()? == 0 {
                idle(ep, &mut empty, polite)?;
            } else {
                empty = 0;
            }
        }
        let want = warm + rounds;
        if ep.state().streamed != want {
            return Err(AmError::Config {
                detail: format!(
                    "logp: rank 1 delivered {} stream messages, expected {want}",
                    ep.state().streamed
                ),
            });
        }
        return Ok(None);
    }
    // Warm-up: round trips and a short stream.
    for i in 0..warm {
        ep.request(1, H_PING, &[i])?;
        poll_one(ep, polite)?;
    }
    for i in 0..warm {
        ep.request(1, H_STREAM, &[i])?;
    }
    ep.request(1, H_PING, &[0])?;
    poll_one(ep, polite)?;
    // RTT: uninstrumented ping-pong, timed per block.
    let blocks = Blocks::new(rounds);
    let mut rtt = Vec::with_capacity(blocks.count());
    for (start, len) in blocks.iter() {
        let t0 = Instant::now();
        for i in start..start + len {
            ep.request(1, H_PING, &[i])?;
            poll_one(ep, polite)?;
        }
        rtt.push(per_msg(t0.elapsed(), len));
    }
    // o_s and o_r: instrumented ping-pong, summed per block.
    let (mut os, mut or) = (Vec::new(), Vec::new());
    for (start, len) in blocks.iter() {
        let (mut os_sum, mut or_sum) = (Duration::ZERO, Duration::ZERO);
        for i in start..start + len {
            let a = Instant::now();
            ep.request(1, H_PING, &[i])?;
            let b = Instant::now();
            os_sum += b - a;
            let mut empty = 0u64;
            loop {
                let a = Instant::now();
                let n = ep.poll()?;
                let b = Instant::now();
                if n > 0 {
                    or_sum += b - a;
                    break;
                }
                idle(ep, &mut empty, polite)?;
            }
        }
        os.push(per_msg(os_sum, len));
        or.push(per_msg(or_sum, len));
    }
    // g: a one-way stream, the sender's time per block of sends (in the
    // steady state the queue is full, so the sender goes at the
    // receiver's pace); closed by a round trip (FIFO: its reply comes
    // after rank 1 delivered the whole stream).
    let mut g = Vec::with_capacity(blocks.count());
    for (start, len) in blocks.iter() {
        let t0 = Instant::now();
        for i in start..start + len {
            ep.request(1, H_STREAM, &[i])?;
        }
        g.push(per_msg(t0.elapsed(), len));
    }
    ep.request(1, H_PING, &[rounds])?;
    poll_one(ep, polite)?;
    ep.request(1, H_STOP, &[])?;
    Ok(Some(LogpOut { rtt, os, or, g }))
}

// ---------------------------------------------------------------------------
// Cache-line ping-pong

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

// ---------------------------------------------------------------------------
// Stress

/// Result of a many-to-one stress run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StressOut {
    /// From the start barrier to the receiver holding every integer.
    pub elapsed: Duration,
    /// `elapsed / ints` (strictly, / the integers delivered while the
    /// clock ran: all of them).
    pub ns_per_msg: f64,
    /// Sends that found the queue full, summed over writers.
    pub full_waits: u64,
    /// Whether the receiver's sum matched the writers' sum.
    pub verified: bool,
}

/// The stress test's integer number `i` (splitmix64: distinct, well mixed
/// values, so a lost and a duplicated message do not cancel in the sum).
fn value_of(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// State of a stress rank.
#[derive(Debug, Default)]
struct StressState {
    /// Receiver: integers delivered and their wrapping sum.
    count: u64,
    sum: u64,
    /// Receiver: writers that said they are done, with the totals they
    /// reported (integers sent and their wrapping sum).
    done: u32,
    sent: u64,
    sent_sum: u64,
    /// Writer: the receiver asked it to stop (budget spent).
    stop: bool,
}

/// Receiver: one integer.
fn on_int<C: Claim>(t: &mut Token<'_, C, StressState>, m: &Msg<'_>) -> Result<(), AmError> {
    let s = t.state();
    s.count += 1;
    s.sum = s.sum.wrapping_add(m.args[0]);
    Ok(())
}

/// Receiver: a writer is done; `args = [sent, sum]`. Queues are FIFO, so
/// its integers were all delivered before this.
fn on_done<C: Claim>(t: &mut Token<'_, C, StressState>, m: &Msg<'_>) -> Result<(), AmError> {
    let s = t.state();
    s.done += 1;
    s.sent += m.args[0];
    s.sent_sum = s.sent_sum.wrapping_add(m.args[1]);
    Ok(())
}

/// Writer: stop sending.
fn on_stop_writing<C: Claim>(
    t: &mut Token<'_, C, StressState>,
    _m: &Msg<'_>,
) -> Result<(), AmError> {
    t.state().stop = true;
    Ok(())
}

/// LC98 §4.2: `writers` ranks send `ints` integers in total (one per short
/// request) to one receiving rank, with claim algorithm `alg`.
pub fn stress(alg: &str, writers: u32, ints: u64) -> Result<StressOut, String> {
    stress_within(alg, writers, ints, None).map(|r| r.out)
}

/// A [`stress_within`] run: the result and how much of the work was done.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StressRun {
    /// Times and checks; `elapsed` and `ns_per_msg` cover the `delivered`
    /// integers.
    pub out: StressOut,
    /// Integers delivered (`ints` when `completed`).
    pub delivered: u64,
    /// Whether every integer was sent before the budget ran out.
    pub completed: bool,
    /// The receiver's time per integer in the median block of about 1,000
    /// deliveries (NaN for runs shorter than a block): the rate while all
    /// ranks run, which a whole-run average mixes with the time the
    /// machine's other load takes.
    pub block_ns_per_msg: f64,
}

/// [`stress`] with an optional time budget: once it is spent, the receiver
/// asks the writers (by an Active Message) to stop after their current
/// send, delivers what they sent, and the run reports the integers
/// delivered and the time they took (never an extrapolation). Writers
/// poll their endpoint every [`STOP_POLL`] sends to see the request (only
/// when a budget is given). Queue-lock convoys under oversubscription can
/// make a run take orders of magnitude longer than usual; the budget keeps
/// such a point affordable.
pub fn stress_within(
    alg: &str,
    writers: u32,
    ints: u64,
    budget: Option<Duration>,
) -> Result<StressRun, String> {
    if writers == 0 || writers as usize + 1 > MAX_RANKS {
        return Err(format!(
            "stress: {writers} writers (accepted: 1..={})",
            MAX_RANKS - 1
        ));
    }
    if ints == 0 {
        return Err("stress: ints must be at least 1".into());
    }
    macro_rules! by_name {
        ($($name:literal => $ty:ty;)*) => {
            match alg {
                $($name => stress_with::<$ty>(writers, ints, budget),)*
                _ => Err(unknown(alg)),
            }
        };
    }
    symmetry_am::for_each_claim!(by_name)
}

/// Sends between two polls of a writer's own endpoint in a budgeted run.
pub const STOP_POLL: u64 = 32;

/// What one stress rank reports.
enum StressRank {
    Receiver {
        elapsed: Duration,
        delivered: u64,
        /// Delivered after the clock started.
        timed: u64,
        /// Median block's ns per integer.
        block_ns: f64,
        verified: bool,
    },
    Writer {
        full_waits: u64,
    },
}

fn stress_with<C: Claim>(
    writers: u32,
    ints: u64,
    budget: Option<Duration>,
) -> Result<StressRun, String> {
    let ranks = writers + 1;
    let pin = ranks as usize <= cpus();
    let polite = !pin;
    let gate = Barrier::new(ranks as usize);
    let results = job::run_threads(ranks, |job| {
        if pin {
            pin_to_core(job.rank as usize);
        }
        run_rank::<C, _, _>(&job, &gate, StressState::default(), |ep| {
            stress_rank(ep, job.rank, writers, ints, budget, polite)
        })
    });
    let mut receiver = None;
    let mut full_waits = 0u64;
    let mut errors = Vec::new();
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Ok(StressRank::Receiver {
                elapsed,
                delivered,
                timed,
                block_ns,
                verified,
            }) => receiver = Some((elapsed, delivered, timed, block_ns, verified)),
            Ok(StressRank::Writer { full_waits: f }) => full_waits += f,
            Err(e) => errors.push((rank, e)),
        }
    }
    root_cause("stress", C::NAME, errors)?;
    let (elapsed, delivered, timed, block_ns, verified) =
        receiver.ok_or_else(|| format!("stress {}: no receiver result", C::NAME))?;
    Ok(StressRun {
        out: StressOut {
            elapsed,
            ns_per_msg: elapsed.as_nanos() as f64 / timed.max(1) as f64,
            full_waits,
            verified,
        },
        delivered,
        completed: delivered == ints,
        block_ns_per_msg: block_ns,
    })
}

/// The body of a stress rank (rank 0 the receiver, the others writers).
fn stress_rank<C: Claim>(
    ep: &mut Endpoint<C, StressState>,
    rank: u32,
    writers: u32,
    ints: u64,
    budget: Option<Duration>,
    polite: bool,
) -> Result<StressRank, AmError> {
    let ranks = writers + 1;
    ep.register(H_INT, on_int::<C>)?;
    ep.register(H_DONE, on_done::<C>)?;
    ep.register(H_STOP_WRITING, on_stop_writing::<C>)?;
    if rank == 0 {
        // Two barriers: after the first every rank has joined, so the
        // clock does not run while a rank is still opening segments; no
        // integer is sent before every rank has entered the second.
        ep.barrier()?;
        let before = ep.state().count;
        let t0 = Instant::now();
        ep.barrier()?;
        let mut empty = 0u64;
        let mut busy = 0u64;
        let mut stopped = budget.is_none();
        // Block marks: (integers delivered, time) about every BLOCK.
        let mut marks = vec![(before, t0)];
        let mut next_mark = before + BLOCK;
        while ep.state().done < writers {
            // The clock is read after every empty poll (cheap next to a
            // yield), every 64 busy ones, and at each block mark.
            let check = if ep.poll()? == 0 {
                idle(ep, &mut empty, polite)?;
                true
            } else {
                empty = 0;
                busy += 1;
                let count = ep.state().count;
                if count >= next_mark {
                    marks.push((count, Instant::now()));
                    next_mark = count + BLOCK;
                }
                busy.is_multiple_of(64)
            };
            if !stopped && check && budget.is_some_and(|b| t0.elapsed() >= b) {
                stopped = true;
                for w in 1..ranks {
                    ep.request(w, H_STOP_WRITING, &[])?;
                }
            }
        }
        let elapsed = t0.elapsed();
        let st = ep.state();
        let mut verified = st.count == st.sent && st.sum == st.sent_sum;
        if st.sent == ints {
            let expected = (0..ints).fold(0u64, |s, i| s.wrapping_add(value_of(i)));
            verified &= st.sum == expected;
        }
        let blocks: Vec<f64> = marks
            .windows(2)
            .map(|w| per_msg(w[1].1 - w[0].1, w[1].0 - w[0].0))
            .collect();
        Ok(StressRank::Receiver {
            elapsed,
            delivered: st.count,
            timed: st.count - before,
            block_ns: median_block(&blocks),
            verified,
        })
    } else {
        ep.barrier()?;
        ep.barrier()?;
        let (mut sent, mut sum) = (0u64, 0u64);
        let mut i = u64::from(rank - 1);
        while i < ints {
            if budget.is_some() && sent.is_multiple_of(STOP_POLL) {
                ep.poll()?;
                if ep.state().stop {
                    break;
                }
            }
            let v = value_of(i);
            ep.request(0, H_INT, &[v])?;
            sent += 1;
            sum = sum.wrapping_add(v);
            i += u64::from(writers);
        }
        ep.request(0, H_DONE, &[sent, sum])?;
        let full_waits = ep.stats().full_waits;
        Ok(StressRank::Writer { full_waits })
    }
}

// ---------------------------------------------------------------------------
// Bulk transfers

/// Untimed bytes streamed (or copied) before each timed size.
pub const BULK_WARMUP_BYTES: u64 = 1 << 20;

/// Handler ids of the bulk benchmark: a block of the stream, and the
/// receiver's reply when a phase has arrived.
const H_BULK: u16 = 0;
const H_BULK_DONE: u16 = 1;

/// One measured bulk stream or baseline copy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BulkOut {
    /// From the first send (copy) to the reply that the last block arrived.
    pub elapsed: Duration,
    /// Bytes that arrived.
    pub bytes: u64,
    /// Whether every block arrived with the sequence number it was sent
    /// with, and all of them arrived.
    pub verified: bool,
}

impl BulkOut {
    /// Bandwidth in MB/s (10^6 bytes per second, as LC98).
    pub fn mb_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-12) / 1e6
    }
}

/// Block stride and count of the bulk ring of a default [`Config`] (the
/// shape the baselines' buffers copy).
pub fn bulk_ring_shape() -> (usize, usize) {
    let c = Config::default();
    (c.bulk_bytes as usize, c.bulk_blocks as usize)
}

/// Checks a message size of the bulk kernels: at least the 8 bytes of the
/// sequence number each block carries, at most one bulk block.
fn check_bulk_size(size: usize) -> Result<(), String> {
    let (stride, _) = bulk_ring_shape();
    if (8..=stride).contains(&size) {
        Ok(())
    } else {
        Err(format!(
            "bulk: message size {size} B (accepted: 8..={stride} B, one bulk block)"
        ))
    }
}

/// Handler state of both bulk ranks.
struct BulkState {
    /// Receiver: the destination of the copy (one block).
    buf: Vec<u8>,
    /// Receiver: bytes of the current phase so far, and bad blocks.
    bytes: u64,
    errors: u64,
    /// Receiver: phases completed.
    phases: u64,
    /// Sender: replies received, and the last one's words.
    acks: u64,
    acked: [u64; 2],
}

/// Receiver: copy the block out, check its sequence number (`args[0]`),
/// and reply when the phase's bytes (`args[1]`) have arrived.
fn on_bulk<C: Claim>(t: &mut Token<'_, C, BulkState>, m: &Msg<'_>) -> Result<(), AmError> {
    let s = t.state();
    let n = m.bulk.len().min(s.buf.len());
    s.buf[..n].copy_from_slice(&m.bulk[..n]);
    let seq = s
        .buf
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map_or(!0, u64::from_le_bytes);
    s.errors += u64::from(seq != m.args[0] || n != m.bulk.len());
    s.bytes += n as u64;
    if s.bytes >= m.args[1] {
        let words = [s.bytes, s.errors];
        (s.bytes, s.errors) = (0, 0);
        s.phases += 1;
        t.reply(H_BULK_DONE, &words)
    } else {
        Ok(())
    }
}

/// Sender: a phase has arrived.
fn on_bulk_done<C: Claim>(t: &mut Token<'_, C, BulkState>, m: &Msg<'_>) -> Result<(), AmError> {
    let s = t.state();
    s.acks += 1;
    s.acked = [m.args[0], m.args[1]];
    Ok(())
}

/// LC98 §4.1's bulk stream with claim algorithm `alg`: two ranks of a
/// thread-mode job, pinned to two CPUs when there are two. For each of
/// `sizes`, rank 0 streams an untimed warm-up of [`BULK_WARMUP_BYTES`] and
/// then `total` bytes of `request_bulk` messages of that size to rank 1,
/// which copies every block out of the queue into its own buffer (one
/// block long, so the destination stays in cache), checks the sequence
/// number the sender wrote into its first word, and replies when the
/// phase's bytes have arrived; rank 0 times from its first send to that
/// reply. Rank 1 polls in a tight loop, as LC98's microbenchmarks do, and
/// yields only without a CPU of its own. One [`BulkOut`] per size.
pub fn bulk(alg: &str, sizes: &[usize], total: u64) -> Result<Vec<BulkOut>, String> {
    for &s in sizes {
        check_bulk_size(s)?;
    }
    if total == 0 {
        return Err("bulk: total must be at least 1 byte".into());
    }
    macro_rules! by_name {
        ($($name:literal => $ty:ty;)*) => {
            match alg {
                $($name => bulk_with::<$ty>(sizes, total),)*
                _ => Err(unknown(alg)),
            }
        };
    }
    symmetry_am::for_each_claim!(by_name)
}

fn bulk_with<C: Claim>(sizes: &[usize], total: u64) -> Result<Vec<BulkOut>, String> {
    let pin = cpus() >= 2;
    let polite = !pin;
    let (stride, _) = bulk_ring_shape();
    let gate = Barrier::new(2);
    let results = job::run_threads(2, |job| {
        if pin {
            pin_to_core(job.rank as usize);
        }
        let state = BulkState {
            buf: vec![0; stride],
            bytes: 0,
            errors: 0,
            phases: 0,
            acks: 0,
            acked: [0; 2],
        };
        run_rank::<C, _, _>(&job, &gate, state, |ep| {
            bulk_rank(ep, job.rank, sizes, total, polite)
        })
    });
    let mut outs = None;
    let mut errors = Vec::new();
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Ok(o) if rank == 0 => outs = Some(o),
            Ok(_) => {}
            Err(e) => errors.push((rank, e)),
        }
    }
    root_cause("bulk", C::NAME, errors)?;
    outs.ok_or_else(|| format!("bulk {}: rank 0 returned no result", C::NAME))
}

/// The body of a bulk rank (rank 0 the sender, rank 1 the receiver).
fn bulk_rank<C: Claim>(
    ep: &mut Endpoint<C, BulkState>,
    rank: u32,
    sizes: &[usize],
    total: u64,
    polite: bool,
) -> Result<Vec<BulkOut>, AmError> {
    ep.register(H_BULK, on_bulk::<C>)?;
    ep.register(H_BULK_DONE, on_bulk_done::<C>)?;
    ep.barrier()?;
    let mut outs = Vec::new();
    if rank == 1 {
        let phases = 2 * sizes.len() as u64;
        let mut empty = 0u64;
        while ep.state().phases < phases {
            if ep.poll()? > 0 {
                empty = 0;
            } else {
                idle(ep, &mut empty, polite)?;
            }
        }
        return Ok(outs);
    }
    let mut src = vec![0xa5u8; ep.state().buf.len()];
    for &size in sizes {
        for (bytes, timed) in [(BULK_WARMUP_BYTES, false), (total, true)] {
            let n = bytes.div_ceil(size as u64);
            let want = n * size as u64;
            let acks = ep.state().acks;
            let start = Instant::now();
            for k in 0..n {
                src[..8].copy_from_slice(&k.to_le_bytes());
                ep.request_bulk(1, H_BULK, &[k, want], &src[..size])?;
            }
            let mut empty = 0u64;
            while ep.state().acks == acks {
                if ep.poll()? == 0 {
                    idle(ep, &mut empty, polite)?;
                }
            }
            let elapsed = start.elapsed();
            let [got, errors] = ep.state().acked;
            if timed {
                outs.push(BulkOut {
                    elapsed,
                    bytes: got,
                    verified: got == want && errors == 0,
                });
            }
        }
    }
    Ok(outs)
}

/// The `memcpy` baseline: one thread pinned to the first allowed CPU
/// copies `total` bytes in chunks of `size` between two buffers shaped
/// like the bulk ring ([`bulk_ring_shape`]: chunk `k` at block `k mod
/// blocks`), after an untimed warm-up; the faster of two layouts.
///
/// The layouts differ in where the destination lies in its page relative
/// to the source: at the same offset, and half a page plus a cache line
/// away. A copy whose source and destination alias within the page can
/// run many times slower on some CPUs and copy routines (the committed
/// reference's `memcpy` of 8 KiB chunks, same offsets, ran at a fifteenth
/// of its 1 KiB rate and a sixth of the cross-core copy's), which is a
/// property of that placement, not the machine's copy rate, so the rate is
/// the better of the two.
pub fn memcpy_run(size: usize, total: u64) -> Result<BulkOut, String> {
    check_bulk_size(size)?;
    let (stride, blocks) = bulk_ring_shape();
    const PAGE: usize = 4096;
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            pin_to_core(0);
            let len = stride * blocks;
            let src = vec![0x5au8; len + PAGE];
            let mut dst = vec![0u8; len + 2 * PAGE];
            // `dst[base..]` starts at the page offset of `src`.
            let src_in_page = src.as_ptr() as usize % PAGE;
            let dst_in_page = dst.as_ptr() as usize % PAGE;
            let base = (src_in_page + PAGE - dst_in_page) % PAGE;
            let n = total.div_ceil(size as u64);
            let mut best: Option<BulkOut> = None;
            for shift in [0, PAGE / 2 + 64] {
                let d0 = base + shift;
                let mut pass = |n: u64| {
                    for k in 0..n {
                        let off = (k as usize % blocks) * stride;
                        dst[d0 + off..d0 + off + size].copy_from_slice(&src[off..off + size]);
                        std::hint::black_box(&mut dst);
                    }
                };
                pass((BULK_WARMUP_BYTES / size as u64).max(blocks as u64));
                let start = Instant::now();
                pass(n);
                let out = BulkOut {
                    elapsed: start.elapsed(),
                    bytes: n * size as u64,
                    verified: dst[d0..d0 + size] == src[..size],
                };
                // A verified copy beats an unverified one; then the faster.
                if best.as_ref().is_none_or(|b| {
                    (out.verified, std::cmp::Reverse(out.elapsed))
                        > (b.verified, std::cmp::Reverse(b.elapsed))
                }) {
                    best = Some(out);
                }
            }
            best.expect("two layouts were measured")
        })
        .join()
    });
    out.map_err(|_| "memcpy: the copying thread panicked".to_string())
}

/// The blocks of the cross-core ring, written and read under the protocol
/// of the sequence words in [`cross_core_run`].
struct Ring(Box<[UnsafeCell<u8>]>);

// SAFETY: the bytes of block `b` are accessed by one thread at a time, as
// handed over by the Release/Acquire sequence words of `cross_core_run`.
unsafe impl Sync for Ring {}

impl Ring {
    fn new(bytes: usize) -> Self {
        Self((0..bytes).map(|_| UnsafeCell::new(0)).collect())
    }

    /// Start of block `b` of `stride` bytes; the pointer may be used for
    /// the whole block (it derives from the slice, not from one byte).
    fn block(&self, b: usize, stride: usize) -> *mut u8 {
        assert!((b + 1) * stride <= self.0.len());
        UnsafeCell::raw_get(self.0.as_ptr().wrapping_add(b * stride))
    }
}

/// The `memcpy-cross-core` baseline: a producer pinned to the first allowed
/// CPU copies chunks of `size` into a ring shaped like the bulk ring; a
/// consumer pinned to the second copies them out and checks the sequence
/// number in each (a per-block sequence word hands each block over, with
/// no claim algorithm, packet or dispatch). Timed from the common start,
/// after an untimed warm-up, to the consumer's last copy.
pub fn cross_core_run(size: usize, total: u64) -> Result<BulkOut, String> {
    check_bulk_size(size)?;
    let (stride, blocks) = bulk_ring_shape();
    let ring = Ring::new(stride * blocks);
    // Block b is free for message k when seq[b] == k and holds it when
    // seq[b] == k + 1; the consumer frees it for message k + blocks.
    let seq: Vec<CachePadded<AtomicU64>> = (0..blocks as u64)
        .map(|b| CachePadded::new(AtomicU64::new(b)))
        .collect();
    let gate = Barrier::new(2);
    // Messages `from..to`, as producer (copy in) or consumer (copy out and
    // check the sequence number); whether every check passed.
    let stream = |from: u64, to: u64, produce: bool| -> bool {
        let mut ok = true;
        let mut buf = vec![0u8; size];
        let mut src = vec![0xa5u8; size];
        for k in from..to {
            let b = k as usize % blocks;
            let want = if produce { k } else { k + 1 };
            let mut spins = 0u32;
            // Acquire: pairs with the other side's Release store below, so
            // its accesses to the block happen before ours.
            while seq[b].load(Ordering::Acquire) != want {
                spins += 1;
                if spins < 1 << 12 {
                    spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            if produce {
                src[..8].copy_from_slice(&k.to_le_bytes());
            }
            // SAFETY: the sequence word hands block b to this side alone
            // until our Release store below; `size <= stride`
            // (`check_bulk_size`) keeps the range inside block b of the
            // ring, which outlives both threads and is never resized.
            unsafe {
                let block = ring.block(b, stride);
                if produce {
                    std::ptr::copy_nonoverlapping(src.as_ptr(), block, size);
                } else {
                    std::ptr::copy_nonoverlapping(block, buf.as_mut_ptr(), size);
                }
            }
            if !produce {
                ok &= buf[..8] == k.to_le_bytes();
            }
            let next = if produce { k + 1 } else { k + blocks as u64 };
            // Release: publishes our accesses to the block to the other side.
            seq[b].store(next, Ordering::Release);
        }
        ok
    };
    let warm = (BULK_WARMUP_BYTES / size as u64).max(blocks as u64);
    let n = total.div_ceil(size as u64);
    let joined = std::thread::scope(|s| {
        let (stream, gate) = (&stream, &gate);
        let producer = s.spawn(move || {
            pin_to_core(0);
            stream(0, warm, true);
            gate.wait();
            let start = Instant::now();
            stream(warm, warm + n, true);
            start
        });
        let consumer = s.spawn(move || {
            pin_to_core(1);
            let warm_ok = stream(0, warm, false);
            gate.wait();
            let ok = stream(warm, warm + n, false);
            (Instant::now(), warm_ok && ok)
        });
        (producer.join(), consumer.join())
    });
    match joined {
        (Ok(start), Ok((end, ok))) => Ok(BulkOut {
            elapsed: end.saturating_duration_since(start),
            bytes: n * size as u64,
            verified: ok,
        }),
        _ => Err("memcpy-cross-core: a copying thread panicked".into()),
    }
}

/// Pins the calling thread to `core` (best effort: ignored where not
/// permitted), so a two-rank measurement runs on two distinct cores.
///
/// `core` indexes the CPUs this process may run on
/// ([`crate::kernels::locks::allowed_cpus`], modulo their number), so the pinning
/// stays inside a restricted CPU set.
pub fn pin_to_core(core: usize) {
    let allowed = allowed_cpus();
    let cpu = if allowed.is_empty() {
        core
    } else {
        allowed[core % allowed.len()]
    };
    if cpu >= libc::CPU_SETSIZE as usize {
        return;
    }
    // SAFETY: `cpu_set_t` is plain bytes, for which all-zero is a valid
    // (empty) set; `cpu` is below CPU_SETSIZE, so CPU_SET stays in bounds;
    // sched_setaffinity(0, ...) reads `set` (of the size we pass) and only
    // changes the calling thread's affinity. A failure (EPERM, EINVAL) is
    // ignored: the measurement remains valid, only less repeatable.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logp_is_positive_and_consistent() {
        let p = logp("stamp", 2_000).unwrap();
        assert!(p.rtt_ns > 0.0 && p.g_ns > 0.0, "{p:?}");
        assert!(p.os_ns >= 0.0 && p.or_ns >= 0.0, "{p:?}");
        assert!((p.l_ns - (p.rtt_ns / 2.0 - p.os_ns - p.or_ns)).abs() < 1e-9);
    }

    #[test]
    fn stress_counts_every_integer_once() {
        for alg in symmetry_am::claim::NAMES {
            let out = stress(alg, 2, 5_001).unwrap();
            assert!(out.verified, "{alg}: {out:?}");
            assert!(out.ns_per_msg > 0.0);
        }
    }

    #[test]
    fn a_budget_stops_the_writers_and_counts_what_arrived() {
        let r = stress_within("stamp", 2, u64::MAX / 4, Some(Duration::from_millis(50))).unwrap();
        assert!(!r.completed && r.delivered > 0, "{r:?}");
        assert!(r.out.verified, "{r:?}");
        let r = stress_within("ticket", 1, 1_000, Some(Duration::from_secs(60))).unwrap();
        assert!(
            r.completed && r.delivered == 1_000 && r.out.verified,
            "{r:?}"
        );
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert!(logp("nope", 10).unwrap_err().contains("accepted"));
        assert!(stress("tas", 0, 10).is_err());
        assert!(stress("tas", 64, 10).is_err());
        assert!(stress("nope", 1, 10).unwrap_err().contains("lock-free"));
    }

    #[test]
    fn every_algorithm_streams_verified_bulk_data() {
        for alg in symmetry_am::claim::NAMES {
            let outs = bulk(alg, &[256, 8192], 1 << 18).unwrap();
            assert_eq!(outs.len(), 2, "{alg}");
            assert!(
                outs.iter().all(|o| o.verified && o.bytes == 1 << 18),
                "{alg}: {outs:?}"
            );
        }
    }

    #[test]
    fn bulk_baselines_copy_everything() {
        for size in [256, 8192] {
            assert!(memcpy_run(size, 1 << 18).unwrap().verified);
            let c = cross_core_run(size, 1 << 18).unwrap();
            assert!(c.verified && c.bytes == 1 << 18, "{c:?}");
        }
    }

    #[test]
    fn bulk_sizes_are_checked() {
        let (stride, _) = bulk_ring_shape();
        assert!(bulk("stamp", &[4], 1024).unwrap_err().contains("accepted"));
        assert!(bulk("stamp", &[stride + 1], 1024).is_err());
        assert!(bulk("nope", &[256], 1024).unwrap_err().contains("accepted"));
        assert!(memcpy_run(0, 1024).is_err());
        assert!(cross_core_run(stride * 2, 1024).is_err());
    }

    #[test]
    fn pingpong_measures_something() {
        assert!(pingpong_rtt_ns(1_000) > 0.0);
    }
}
