//! A Hanoi-like program (KLMO91 §3). TODO(helper): implement.

use std::time::Duration;

use crate::{Exec, WorkloadLock};

/// Parameters.
#[derive(Debug, Clone)]
pub struct HanoiCfg {
    /// Worker threads (KLMO91: many, more than processors).
    pub threads: usize,
    /// Disks.
    pub disks: u32,
    /// Moves in all (split among threads).
    pub moves: u64,
    /// Seed.
    pub seed: u64,
}

/// Result of a run.
#[derive(Debug, Clone)]
pub struct HanoiOut {
    /// Wall time.
    pub elapsed: Duration,
    /// Moves made.
    pub moves: u64,
    /// Whether every invariant held at the end (disks conserved, no disk
    /// on a smaller one).
    pub valid: bool,
}

/// Runs the program with lock `L` on executor `E`.
pub fn run<L: WorkloadLock, E: Exec>(cfg: &HanoiCfg, exec: &E) -> HanoiOut {
    let _ = (cfg, exec);
    todo!()
}
