//! A Regsim-like logic simulator (KLMO91 §3). TODO(helper): implement.

use std::time::Duration;

use crate::{Exec, WorkloadLock};

/// Parameters.
#[derive(Debug, Clone)]
pub struct RegsimCfg {
    /// Worker threads (KLMO91: threads = processors).
    pub threads: usize,
    /// Objects (gates) in the circuit.
    pub objects: usize,
    /// Inputs per object.
    pub fanin: usize,
    /// Simulated clock cycles.
    pub cycles: usize,
    /// Work per evaluation, `spin_work` iterations.
    pub eval_work: u64,
    /// Seed of the circuit and its stimuli.
    pub seed: u64,
}

/// Result of a run.
#[derive(Debug, Clone)]
pub struct RegsimOut {
    /// Wall time.
    pub elapsed: Duration,
    /// Object evaluations.
    pub evaluations: u64,
    /// Phases run (all cycles).
    pub phases: u64,
    /// Objects moved between threads by rebalancing.
    pub rebalances: u64,
    /// Hash of the final outputs (equal to [`reference_checksum`]).
    pub checksum: u64,
}

/// Runs the simulation with lock `L` on executor `E`.
pub fn run<L: WorkloadLock, E: Exec>(cfg: &RegsimCfg, exec: &E) -> RegsimOut {
    let _ = (cfg, exec);
    todo!()
}

/// The checksum of a sequential run (what every parallel run must give).
pub fn reference_checksum(cfg: &RegsimCfg) -> u64 {
    let _ = cfg;
    todo!()
}
