//! Many-to-one stress ([`stress()`], [`stress_within`]).
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

use std::sync::Barrier;
use std::time::{Duration, Instant};

use symmetry_am::{AmError, Claim, Endpoint, MAX_RANKS, Msg, Token, job};

use super::{BLOCK, cpus, idle, median_block, per_msg, pin_to_core, root_cause, run_rank};
use crate::kernels::am_job::unknown_algo;

/// Handler ids of the stress test: an integer, a writer's end (with its
/// totals), the receiver's request to stop writing.
const H_INT: u16 = 0;
const H_DONE: u16 = 1;
const H_STOP_WRITING: u16 = 2;

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
    symmetry_locks::platform::rng::SplitMix64::new(i).next_u64()
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
                _ => Err(unknown_algo(alg)),
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(stress("tas", 0, 10).is_err());
        assert!(stress("tas", 64, 10).is_err());
        assert!(stress("nope", 1, 10).unwrap_err().contains("lock-free"));
    }
}
