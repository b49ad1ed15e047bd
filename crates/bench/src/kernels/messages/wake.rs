//! The idle receiver's wake-up ([`wake_ns`]): how long a message takes
//! to reach a receiver that sleeps in `Endpoint::poll_until`.
//!
//! Two ranks of the default claim algorithm, pinned to the first two
//! allowed CPUs (when there are two). Rank 0 waits in `poll_until` for
//! each message in turn; rank 1, before each message, sleeps for
//! [`GAP`] (far past the receiver's spin budget, so the receiver has
//! gone to sleep on its doorbell), reads the clock and sends it. Rank 0's
//! handler reads the clock on arrival: the sample is the difference (both
//! ranks are threads of this process, so they share the clock). The
//! result is the median sample: the latency of one futex wake-up plus a
//! poll, which `am-logp` compares with the futex hand-off of
//! [`crate::kernels::machine::futex_handoff_ns`] measured beside it.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use symmetry_am::claim::DefaultClaim;
use symmetry_am::{AmError, Claim, Endpoint, Msg, Token, job};

use super::{cpus, one_result, pin_to_core, run_rank};
use crate::stats::median;

/// The claim algorithm measured (the endpoints' default).
pub const WAKE_ALGORITHM: &str = DefaultClaim::NAME;

/// The sender's pause before each message.
const GAP: Duration = Duration::from_micros(500);

const H_TIME: u16 = 0;

/// Rank 0's state: when each message was sent (ns after `epoch`), and the
/// latencies seen.
struct WakeState {
    epoch: Instant,
    samples: Vec<f64>,
}

fn on_time(t: &mut Token<'_, DefaultClaim, WakeState>, m: &Msg<'_>) -> Result<(), AmError> {
    let st = t.state();
    let now = st.epoch.elapsed().as_nanos() as f64;
    st.samples.push(now - m.args[0] as f64);
    Ok(())
}

/// Median latency, in ns, of `samples` messages, each sent to a receiver
/// asleep in `poll_until` (module docs).
pub fn wake_ns(samples: u32) -> Result<f64, String> {
    let samples = samples.max(1);
    let epoch = Instant::now();
    let gate = Barrier::new(2);
    let pin = cpus() >= 2;
    let results = job::run_threads(2, |job| {
        if pin {
            pin_to_core(job.rank as usize);
        }
        let state = WakeState {
            epoch,
            samples: Vec::with_capacity(samples as usize),
        };
        run_rank::<DefaultClaim, _, _>(&job, &gate, state, |ep| wake_rank(ep, job.rank, samples))
    });
    let v = one_result("wake", WAKE_ALGORITHM, results)?;
    median(&v).ok_or_else(|| "wake: no sample".to_string())
}

fn wake_rank(
    ep: &mut Endpoint<DefaultClaim, WakeState>,
    rank: u32,
    samples: u32,
) -> Result<Option<Vec<f64>>, AmError> {
    ep.register(H_TIME, on_time)?;
    ep.barrier()?;
    if rank == 1 {
        for _ in 0..samples {
            std::thread::sleep(GAP);
            let sent = ep.state().epoch.elapsed().as_nanos() as u64;
            ep.request(0, H_TIME, &[sent])?;
        }
        return Ok(None);
    }
    for i in 1..=samples as usize {
        ep.poll_until(|s| s.samples.len() >= i)?;
    }
    Ok(Some(std::mem::take(&mut ep.state_mut().samples)))
}
