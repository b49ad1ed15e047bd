//! LogP ([`logp()`]), as LC98 §4.1 measures it.
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

use std::sync::Barrier;
use std::time::{Duration, Instant};

use symmetry_am::{AmError, Claim, Endpoint, Msg, Token, job};

use super::{
    Blocks, cpus, idle, median_block, one_result, per_msg, pin_to_core, poll_one, run_rank,
};
use crate::kernels::am_job::unknown_algo;

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
                _ => Err(unknown_algo(alg)),
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
    let o = one_result("logp", C::NAME, results)?;
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
    fn an_unknown_algorithm_is_an_error() {
        assert!(logp("nope", 10).unwrap_err().contains("accepted"));
    }
}
