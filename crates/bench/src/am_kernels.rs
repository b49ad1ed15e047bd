//! Measurement kernels of the Active Messages experiments (`am-logp`,
//! `am-stress`, `peer-messages`): each runs ranks of a thread-mode job
//! (`symmetry_am::job::run_threads`: every rank maps the segments itself,
//! so the memory traffic is that of separate processes) and returns plain
//! numbers. Algorithms are chosen by registry name and monomorphized
//! through `symmetry_am::for_each_claim!`.
//!
//! TODO(helper): bodies.

use std::time::Duration;

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

/// Measures LogP for claim algorithm `alg` over `rounds` round trips (and
/// as many stream messages).
pub fn logp(alg: &str, rounds: u64) -> Result<LogP, String> {
    let _ = (alg, rounds);
    todo!("helper")
}

/// Round trip of one cache line bounced between two threads on two cores
/// (the physical limit of a shared-memory message), in nanoseconds.
pub fn pingpong_rtt_ns(rounds: u64) -> f64 {
    let _ = rounds;
    todo!("helper")
}

/// Result of a many-to-one stress run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StressOut {
    /// From the start barrier to the receiver holding every integer.
    pub elapsed: Duration,
    /// `elapsed / ints`.
    pub ns_per_msg: f64,
    /// Sends that found the queue full, summed over writers.
    pub full_waits: u64,
    /// Whether the receiver's sum matched the writers' sum.
    pub verified: bool,
}

/// LC98 §4.2: `writers` ranks send `ints` integers in total (one per short
/// request) to one receiving rank, with claim algorithm `alg`.
pub fn stress(alg: &str, writers: u32, ints: u64) -> Result<StressOut, String> {
    let _ = (alg, writers, ints);
    todo!("helper")
}

/// Pins the calling thread to `core` (best effort: ignored where not
/// permitted), so a two-rank measurement runs on two distinct cores.
pub fn pin_to_core(core: usize) {
    let _ = core;
    todo!("helper")
}
