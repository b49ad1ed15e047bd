//! Competitive analysis of spin-then-block policies (KLMO91 §2, §4):
//! the cost of every policy on a recorded lock-waiting-time distribution,
//! against the optimal off-line algorithm. TODO(helper): implement.

use symmetry_locks::spin_then_block::profiler::{LockRecord, Profile};

/// The strategies of KLMO91 Table 1, plus the optimal off-line baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Optimal off-line: per wait, `min(t, C)`.
    Offline,
    /// `always-block`: `C` per wait.
    AlwaysBlock,
    /// `always-spin`: `t` per wait.
    AlwaysSpin,
    /// `fixed-spin-c2`.
    FixedHalfC,
    /// `fixed-spin-c`.
    FixedC,
    /// `opt-known`: the best fixed threshold for the lock's distribution.
    OptKnown,
    /// `opt-approx` (replayed through the lock's own policy code).
    OptApprox,
    /// `last-3` (replayed).
    Last3,
    /// `random-walk` (replayed).
    RandomWalk,
}

impl Strategy {
    /// The on-line policies in KLMO91 Table 1 order.
    pub const POLICIES: [Strategy; 8] = [
        Strategy::AlwaysBlock,
        Strategy::AlwaysSpin,
        Strategy::FixedHalfC,
        Strategy::FixedC,
        Strategy::OptKnown,
        Strategy::OptApprox,
        Strategy::Last3,
        Strategy::RandomWalk,
    ];

    /// Registry name (`offline` for the baseline).
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Offline => "offline",
            Strategy::AlwaysBlock => "always-block",
            Strategy::AlwaysSpin => "always-spin",
            Strategy::FixedHalfC => "fixed-spin-c2",
            Strategy::FixedC => "fixed-spin-c",
            Strategy::OptKnown => "opt-known",
            Strategy::OptApprox => "opt-approx",
            Strategy::Last3 => "last-3",
            Strategy::RandomWalk => "random-walk",
        }
    }
}

/// Synchronization cost of one lock under every strategy, in spins.
#[derive(Debug, Clone)]
pub struct LockCosts {
    /// Lock name.
    pub name: String,
    /// C used, spins.
    pub c_spins: u32,
    /// Contended waits.
    pub waits: u64,
    /// Total cost per strategy (spins), indexed like [`Strategy::POLICIES`].
    pub policy_cost: [f64; 8],
    /// Total optimal off-line cost, spins.
    pub offline_cost: f64,
    /// Waits where off-line blocks (`t >= C`).
    pub offline_blocks: u64,
    /// Sum of waits where off-line spins (`t < C`), spins.
    pub offline_spin_sum: f64,
}

/// KLMO91 Tables 1 and 2 for one input (a whole profile).
#[derive(Debug, Clone)]
pub struct Analysis {
    /// Per-lock costs.
    pub locks: Vec<LockCosts>,
    /// Length of a spin, ns (to state Table 2 in microseconds).
    pub ns_per_spin: f64,
}

impl Analysis {
    /// Table 1: total cost of `s` over total off-line cost.
    pub fn cost_vs_offline(&self, s: Strategy) -> f64 {
        let _ = s;
        todo!()
    }
    /// Table 2: percentage of waits where off-line blocks.
    pub fn offline_block_pct(&self) -> f64 {
        todo!()
    }
    /// Table 2: mean wait where off-line spins, in spins.
    pub fn offline_mean_spin_spins(&self) -> f64 {
        todo!()
    }
}

/// Prices every strategy on every lock of `profile` (each lock with its
/// own C from the profile, or `c_override`). Order-dependent policies are
/// replayed on a seeded shuffle of the lock's waits.
pub fn analyze(profile: &Profile, c_override: Option<u32>, seed: u64) -> Analysis {
    let _ = (profile, c_override, seed);
    todo!()
}

/// One lock's costs (see [`analyze`]).
pub fn lock_costs(rec: &LockRecord, c: u32, seed: u64) -> LockCosts {
    let _ = (rec, c, seed);
    todo!()
}

/// Exact cost of `s` on a waiting-time sequence (spins), in order.
pub fn sequence_cost(s: Strategy, waits: &[u64], c: u32) -> f64 {
    let _ = (s, waits, c);
    todo!()
}

/// A synthetic bimodal lock: `n` waits, a fraction `long_frac` of them
/// long (uniform in `long` spins), the rest short (uniform in `short`).
pub fn bimodal(
    name: &str,
    n: u64,
    short: (u64, u64),
    long: (u64, u64),
    long_frac: f64,
    c: u32,
    seed: u64,
) -> LockRecord {
    let _ = (name, n, short, long, long_frac, c, seed);
    todo!()
}
