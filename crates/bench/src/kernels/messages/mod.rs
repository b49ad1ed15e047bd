//! Measurement kernels of the Active Messages experiments (`am-logp`,
//! `am-stress`, `am-bulk`, `peer-messages`): each runs ranks of a thread-mode job
//! (`symmetry_am::job::run_threads`: every rank maps the segments itself,
//! so the memory traffic is that of separate processes) and returns plain
//! numbers. Algorithms are chosen by registry name and monomorphized
//! through `symmetry_am::for_each_claim!`.
//!
//! One file per kernel: LogP ([`logp()`]), the floors of a round trip
//! ([`pingpong_rtt_ns`], [`bare_rings_rtt_ns`]), the many-to-one stress test ([`stress()`],
//! [`stress_within`]), bulk transfers ([`bulk()`]) and their two copy
//! baselines ([`memcpy_run`], [`cross_core_run`]), and the wake-up of a
//! receiver asleep in `poll_until` ([`wake_ns`]). This file holds what
//! they share: a rank's life in a job, its waiting, timed blocks and
//! pinning.
//!
//! # Teardown
//!
//! Every rank ends with an Active Messages barrier and closes its endpoint
//! only once all ranks have left it (see `run_rank` for why
//! `Endpoint::finish` is not used).

use std::hint::spin_loop;
use std::sync::Barrier;
use std::time::Duration;

use symmetry_am::{AmError, Claim, Config, Endpoint, Job};

use crate::kernels::locks::{allowed_cpus, pin_to};
use crate::stats::median;

mod bulk;
mod copy;
mod logp;
mod pingpong;
mod stress;
mod wake;

pub use bulk::{BULK_WARMUP_BYTES, BulkOut, bulk, bulk_ring_shape};
pub use copy::{cross_core_run, memcpy_run};
pub use logp::{LogP, logp};
pub use pingpong::{bare_rings_rtt_ns, pingpong_rtt_ns};
pub use stress::{STOP_POLL, StressOut, StressRun, stress, stress_within};
pub use wake::{WAKE_ALGORITHM, wake_ns};

/// Empty polls between two checks that the peers are still open (a rank
/// that failed drops its endpoint, which marks it closed).
const PEER_CHECK: u64 = 1 << 12;
/// Consecutive empty polls after which a polite waiter yields the CPU.
const YIELD_AFTER: u64 = 64;

/// Number of CPUs this process may run on.
fn cpus() -> usize {
    allowed_cpus().len().max(1)
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

/// The one result of a job whose ranks return `Some` on one rank and
/// `None` on the others, or the job's error ([`root_cause`]).
fn one_result<R>(
    what: &str,
    alg: &str,
    results: Vec<Result<Option<R>, AmError>>,
) -> Result<R, String> {
    let mut out = None;
    let mut errors = Vec::new();
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Ok(Some(o)) => out = Some(o),
            Ok(None) => {}
            Err(e) => errors.push((rank, e)),
        }
    }
    root_cause(what, alg, errors)?;
    out.ok_or_else(|| format!("{what} {alg}: no rank returned a result"))
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
    pin_to(cpu);
}
