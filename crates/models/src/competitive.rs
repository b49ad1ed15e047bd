//! Competitive analysis of spin-then-block policies (Karlin, Li, Manasse,
//! Owicki, "Empirical Studies of Competitive Spinning for a Shared-Memory
//! Multiprocessor", SOSP 1991, §2 and §4; "KLMO91" below): the cost of
//! every spin policy on a recorded lock-waiting-time profile, against the
//! optimal off-line algorithm. This is KLMO91 Tables 1 and 2 for any
//! profile the [`profiler`](symmetry_locks::spin_then_block::profiler)
//! wrote, and a lock profiler's verdict for a user's own program: which
//! locks should spin, and for how long ([`locks_text`]).
//!
//! # Cost model (KLMO91 §2)
//!
//! Everything is counted in *spins* (polls of the lock word). C is the cost
//! of a block and its wake-up, in spins. A contended acquisition waits `t`
//! spins: the lock is released `t` polls after the waiter first finds it
//! held. A policy spins up to a threshold of `k` polls, then blocks:
//!
//! ```text
//!   cost(t, k) = t        if t <= k   (spun until the release)
//!              = k + C    if t >  k   (spun k, then blocked)
//! ```
//!
//! exactly what `SpinThenBlock::lock_contended` does: it polls, acquires
//! when it sees the lock free, and blocks once `k` polls are spent. In
//! particular a zero wait (the first poll finds the lock free) costs 0 even
//! with `k = 0`: the lock code never blocks then. The strategies:
//!
//! | [`Strategy`] | KLMO91 | cost of a wait `t` |
//! |---|---|---|
//! | `Offline` | §2.3 optimal off-line | `min(t, C)` |
//! | `AlwaysBlock` | §2.2 | `cost(t, 0)`: `C`, or 0 for a zero wait |
//! | `AlwaysSpin` | §2.2 busywait | `t` |
//! | `FixedHalfC` | §2.4 fixed spin C/2 | `cost(t, floor(C/2))` |
//! | `FixedC` | §2.4 fixed spin C | `cost(t, C)` |
//! | `OptKnown` | §2.4 optimal on-line, known distribution | `cost(t, k*)` |
//! | `OptApprox`, `Last3`, `RandomWalk` | §2.5 adaptive | replayed (below) |
//!
//! `k*` minimizes KLMO91's expected cost
//! `Σ_{i<=k} i·D[i] + (k + C)·Σ_{i>k} D[i]`. For a profile it is the
//! threshold the lock would run with, [`optimal_threshold`] over the
//! lock's own 16-spin histogram (what `opt_known::install_from_profile`
//! installs); for a raw sequence ([`sequence_cost`]) it is the exact
//! minimizer, found among `0` and the sequence's distinct values
//! ([`best_fixed_threshold`]), since the cost is increasing in `k` between
//! them.
//!
//! The adaptive policies are not re-implemented: the analyzer *replays*
//! the policy objects of `symmetry_locks` ([`replay_cost`]): a fresh
//! `P::INIT`, and for each wait `threshold(C, &LockName::Anonymous)`, the
//! cost above, then `record(t, C)`, as the lock calls them. The analysis
//! prices the code that runs.
//!
//! Competitive ratios (KLMO91 §2.4, after KMMO89): with waits counted in
//! whole spins, `fixed-spin-c` costs at most `2×` off-line on every
//! sequence, and `fixed-spin-c2` at most `(k + C) / min(k + 1, C)` with
//! `k = floor(C/2)`, which is below `3C / (C + 1) < 3` for every C (even or
//! odd): the worst wait is `t = k + 1`.
//!
//! # Pricing a histogram (KLMO91 §4)
//!
//! A [`LockRecord`] keeps, per 16-spin bucket, the number of waits and
//! their exact sum. Each bucket is expanded into its `count` waits, each
//! valued at the bucket's mean rounded down or up so that the values add up
//! to the recorded sum exactly (`sum mod count` of them get the rounded-up
//! value; see [`wait_atoms`]). Where a bucket's waits were all equal this
//! is exact; otherwise a threshold that falls inside a bucket classifies
//! the whole bucket by its mean. In particular the profiler files zero
//! waits with the waits of up to 16 spins, so a bucket mixing zeros and
//! short waits is priced as if none were zero.
//!
//! * Off-line, always-block, always-spin, both fixed spins and opt-known do
//!   not depend on the order of the waits: they are computed in closed
//!   form over the (value, count) atoms, in 128-bit saturating integers.
//! * The adaptive policies do: they are replayed on a seeded shuffle
//!   ([`SplitMix64`-based](https://prng.di.unimi.it/splitmix64.c)
//!   Fisher-Yates) of the expanded waits, KLMO91's "no locality"
//!   assumption (their analysis of §4 takes waits as independent draws
//!   from the distribution; it is pessimistic when real waits cluster). A
//!   lock with more than [`REPLAY_SAMPLE`] waits is replayed on a
//!   proportional sample of exactly [`REPLAY_SAMPLE`] waits (each atom's
//!   share rounded by largest remainder), and the replayed cost is scaled
//!   by `waits / REPLAY_SAMPLE`.
//!
//! # What the numbers show about the policies
//!
//! Because the policies are priced as implemented, their limits show up in
//! the tables rather than being modelled away:
//!
//! * opt-known, opt-approx and last-3 consider thresholds of at most 1008
//!   spins (KLMO91's recording cap). With C above 1008 and waits between
//!   1008 and C, fixed-spin-c can beat opt-known.
//! * opt-approx charges every wait its 64-spin bucket's upper bound, so
//!   with `C <= 64` even a lock whose waits are all short prices spinning
//!   at 64 per wait and blocks at once (likewise last-3, with 16-spin
//!   rounding, for `C <= 16`).
//! * `optimal_threshold` prices `k = 0` as C for every wait, zero waits
//!   included, whereas the lock never blocks a zero wait; on a lock with
//!   many zero waits opt-known may then pick 16 where 0 is cheaper.
//!
//! Nothing here panics: empty profiles, locks without waits, `C = 0`,
//! counts and sums near `u64::MAX` all give finite or documented
//! (`f64::INFINITY`) results.

use std::fmt::Write as _;

use symmetry_locks::spin_then_block::LockName;
use symmetry_locks::spin_then_block::policy::{
    Last3, OptApprox, RandomWalk, SpinPolicy, optimal_threshold,
};
use symmetry_locks::spin_then_block::profiler::{BUCKETS, LockKind, LockRecord, Profile};

use crate::rng::SplitMix64;

/// The strategies of KLMO91 Table 1, plus the optimal off-line baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Optimal off-line: per wait, `min(t, C)`.
    Offline,
    /// `always-block`: threshold 0, so `C` per wait (a zero wait, which
    /// finds the lock free at its first poll, costs 0).
    AlwaysBlock,
    /// `always-spin`: `t` per wait.
    AlwaysSpin,
    /// `fixed-spin-c2`: threshold `floor(C/2)`.
    FixedHalfC,
    /// `fixed-spin-c`: threshold `C`.
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

    /// Every strategy: [`Strategy::Offline`], then [`Strategy::POLICIES`].
    pub const ALL: [Strategy; 9] = [
        Strategy::Offline,
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

    /// The strategy whose [`name`](Strategy::name) is `name`.
    pub fn from_name(name: &str) -> Option<Strategy> {
        Strategy::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Column heading in KLMO91's Table 1 layout (`Block`, `Spin`,
    /// `Fixed C/2`, ..., `R-walk`; `Off-line` for the baseline).
    pub fn label(self) -> &'static str {
        match self {
            Strategy::Offline => "Off-line",
            Strategy::AlwaysBlock => "Block",
            Strategy::AlwaysSpin => "Spin",
            Strategy::FixedHalfC => "Fixed C/2",
            Strategy::FixedC => "Fixed C",
            Strategy::OptKnown => "Opt Known",
            Strategy::OptApprox => "Opt Approx",
            Strategy::Last3 => "3-samples",
            Strategy::RandomWalk => "R-walk",
        }
    }

    /// Index into [`Strategy::POLICIES`] (and [`LockCosts::policy_cost`]);
    /// `None` for [`Strategy::Offline`].
    pub fn policy_index(self) -> Option<usize> {
        Strategy::POLICIES.iter().position(|&p| p == self)
    }

    /// Whether the cost depends on the order of the waits (the adaptive
    /// policies of KLMO91 §2.5, which the analysis replays).
    pub fn order_dependent(self) -> bool {
        matches!(
            self,
            Strategy::OptApprox | Strategy::Last3 | Strategy::RandomWalk
        )
    }
}

/// Synchronization cost of one lock under every strategy, in spins.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LockCosts {
    /// Lock name.
    pub name: String,
    /// Its kind: a reader-writer lock's readers and writers are two
    /// entries of one name.
    pub kind: LockKind,
    /// The lock's blocker (`os`, `user`, `synthetic`, ...); a profile
    /// keeps one entry per name and blocker.
    pub blocker: String,
    /// C used, spins.
    pub c_spins: u32,
    /// Contended waits (saturating at `u64::MAX`).
    pub waits: u64,
    /// Total cost per strategy (spins), indexed like [`Strategy::POLICIES`].
    pub policy_cost: [f64; 8],
    /// Total optimal off-line cost, spins.
    pub offline_cost: f64,
    /// Waits where off-line blocks (`t >= C`).
    pub offline_blocks: u64,
    /// Sum of waits where off-line spins (`t < C`), spins.
    pub offline_spin_sum: f64,
    /// The `opt-known` threshold for this lock, spins: KLMO91's optimal
    /// on-line threshold for its distribution (what the lock would be
    /// given by `opt_known::install_from_profile`), or C if it never
    /// waited. The recommendation of [`locks_text`].
    pub opt_known_threshold: u64,
}

impl LockCosts {
    /// Total cost of `s`, spins.
    pub fn cost(&self, s: Strategy) -> f64 {
        match s.policy_index() {
            Some(i) => self.policy_cost[i],
            None => self.offline_cost,
        }
    }

    /// Cost of `s` over the off-line cost (see [`Analysis::cost_vs_offline`]
    /// for the conventions when the off-line cost is 0).
    pub fn ratio(&self, s: Strategy) -> f64 {
        if s == Strategy::Offline {
            return 1.0;
        }
        ratio(self.cost(s), self.offline_cost)
    }
}

/// KLMO91 Tables 1 and 2 for one input (a whole profile).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Analysis {
    /// Per-lock costs.
    pub locks: Vec<LockCosts>,
    /// Length of a spin, ns (to state Table 2 in microseconds).
    pub ns_per_spin: f64,
}

/// `cost / offline`, NaN-free: `1.0` for `0 / 0`, infinity for `x / 0`.
fn ratio(cost: f64, offline: f64) -> f64 {
    if offline > 0.0 {
        cost / offline
    } else if cost > 0.0 {
        f64::INFINITY
    } else {
        1.0
    }
}

impl Analysis {
    /// Total cost of `s` over all locks, spins.
    pub fn cost(&self, s: Strategy) -> f64 {
        self.locks.iter().map(|l| l.cost(s)).sum()
    }

    /// All contended waits (saturating).
    pub fn waits(&self) -> u64 {
        self.locks
            .iter()
            .fold(0u64, |a, l| a.saturating_add(l.waits))
    }

    /// Table 1: total cost of `s` over total off-line cost. `1.0` for
    /// [`Strategy::Offline`]; if the off-line total is 0 (no waits, or only
    /// zero waits), `1.0` when `s` costs nothing either, else
    /// `f64::INFINITY`. Never NaN.
    pub fn cost_vs_offline(&self, s: Strategy) -> f64 {
        if s == Strategy::Offline {
            return 1.0;
        }
        ratio(self.cost(s), self.cost(Strategy::Offline))
    }

    /// Table 2: percentage of waits where off-line blocks (`t >= C`);
    /// 0 without waits.
    pub fn offline_block_pct(&self) -> f64 {
        let waits: f64 = self.locks.iter().map(|l| l.waits as f64).sum();
        if waits > 0.0 {
            let blocks: f64 = self.locks.iter().map(|l| l.offline_blocks as f64).sum();
            100.0 * blocks / waits
        } else {
            0.0
        }
    }

    /// Table 2: mean wait where off-line spins (`t < C`), in spins; 0 if
    /// off-line never spins.
    pub fn offline_mean_spin_spins(&self) -> f64 {
        let spun: f64 = self
            .locks
            .iter()
            .map(|l| l.waits.saturating_sub(l.offline_blocks) as f64)
            .sum();
        if spun > 0.0 {
            self.locks.iter().map(|l| l.offline_spin_sum).sum::<f64>() / spun
        } else {
            0.0
        }
    }

    /// Table 2: [`offline_mean_spin_spins`](Analysis::offline_mean_spin_spins)
    /// in microseconds (`spins * ns_per_spin / 1000`).
    pub fn offline_mean_spin_us(&self) -> f64 {
        self.offline_mean_spin_spins() * self.ns_per_spin / 1000.0
    }
}

/// Largest number of waits replayed per lock for the order-dependent
/// policies; a lock with more is replayed on a proportional sample of this
/// size and its replayed cost scaled up (module docs).
pub const REPLAY_SAMPLE: u64 = 1_000_000;

/// Prices every strategy on every lock of `profile` (each lock with its
/// own C from the profile, or `c_override`; a C of 0 is taken as 1).
/// Order-dependent policies are replayed on a seeded shuffle of the lock's
/// waits (module docs); each lock's shuffle is seeded from `seed` and the
/// lock's name and blocker, so a lock's costs do not depend on the other
/// locks of the profile.
///
/// ```
/// use symmetry_locks::spin_then_block::profiler::{LockRecord, Profile};
/// use symmetry_models::competitive::{Strategy, analyze};
///
/// // A lock whose waits are all short (C = 400 spins): spinning is best.
/// let mut rec = LockRecord::new("queue", "os", 400);
/// (0..1000u64).for_each(|w| rec.add(w % 40, false));
/// let a = analyze(&Profile::new(10.0, vec![rec]), None, 1);
/// assert_eq!(a.cost_vs_offline(Strategy::AlwaysSpin), 1.0);
/// assert!(a.cost_vs_offline(Strategy::AlwaysBlock) > 10.0);
/// ```
pub fn analyze(profile: &Profile, c_override: Option<u32>, seed: u64) -> Analysis {
    let locks = profile
        .locks
        .iter()
        .map(|rec| {
            let c = c_override.unwrap_or(rec.c_spins).max(1);
            let s =
                seed ^ fnv1a(rec.name.as_bytes()) ^ fnv1a(rec.blocker.as_bytes()).rotate_left(17);
            lock_costs(rec, c, s)
        })
        .collect();
    Analysis {
        locks,
        ns_per_spin: profile.ns_per_spin,
    }
}

/// One lock's costs (see [`analyze`]), with C = `c` as given (a zero C is
/// priced as zero: every off-line cost is then 0). The adaptive policies
/// are replayed on a shuffle seeded with `seed`.
pub fn lock_costs(rec: &LockRecord, c: u32, seed: u64) -> LockCosts {
    let atoms = wait_atoms(rec);
    let c64 = u64::from(c);
    let total: u128 = atoms.iter().map(|&(_, n)| u128::from(n)).sum();

    let opt_k = opt_known_threshold(rec, c64);
    let closed = |k: u64| atoms_cost(&atoms, |t| wait_cost(t, k, c64));

    let mut offline_blocks: u128 = 0;
    let mut offline_spin_sum: u128 = 0;
    for &(v, n) in &atoms {
        if v >= c64 {
            offline_blocks += u128::from(n);
        } else {
            offline_spin_sum = offline_spin_sum.saturating_add(u128::from(v) * u128::from(n));
        }
    }

    let replayed = replay_atoms(&atoms, total, c, seed);
    // In `Strategy::POLICIES` order (a test checks it against `cost`).
    let policy_cost = [
        closed(0),                      // always-block
        atoms_cost(&atoms, u128::from), // always-spin
        closed(c64 / 2),                // fixed-spin-c2
        closed(c64),                    // fixed-spin-c
        closed(opt_k),                  // opt-known
        replayed[0],                    // opt-approx
        replayed[1],                    // last-3
        replayed[2],                    // random-walk
    ];

    LockCosts {
        name: rec.name.clone(),
        kind: rec.kind,
        blocker: rec.blocker.clone(),
        c_spins: c,
        waits: sat_u64(total),
        policy_cost,
        offline_cost: atoms_cost(&atoms, |t| u128::from(t.min(c64))),
        offline_blocks: sat_u64(offline_blocks),
        offline_spin_sum: offline_spin_sum as f64,
        opt_known_threshold: opt_k,
    }
}

/// Exact cost of `s` on a waiting-time sequence (spins), in order: the
/// closed forms of the module docs, `opt-known` with the exact best fixed
/// threshold of the sequence ([`best_fixed_threshold`]), and the adaptive
/// policies replayed from fresh state through their `symmetry_locks` code.
pub fn sequence_cost(s: Strategy, waits: &[u64], c: u32) -> f64 {
    let c64 = u64::from(c);
    let sum = |f: &dyn Fn(u64) -> u128| -> f64 {
        waits.iter().fold(0u128, |a, &t| a.saturating_add(f(t))) as f64
    };
    match s {
        Strategy::Offline => sum(&|t| u128::from(t.min(c64))),
        Strategy::AlwaysBlock => sum(&|t| wait_cost(t, 0, c64)),
        Strategy::AlwaysSpin => sum(&u128::from),
        Strategy::FixedHalfC => sum(&|t| wait_cost(t, c64 / 2, c64)),
        Strategy::FixedC => sum(&|t| wait_cost(t, c64, c64)),
        Strategy::OptKnown => {
            let k = best_fixed_threshold(waits, c).unwrap_or(c64);
            sum(&|t| wait_cost(t, k, c64))
        }
        Strategy::OptApprox => replay_fresh::<OptApprox>(waits.iter().copied(), c),
        Strategy::Last3 => replay_fresh::<Last3>(waits.iter().copied(), c),
        Strategy::RandomWalk => replay_fresh::<RandomWalk>(waits.iter().copied(), c),
    }
}

/// Cost of one wait of `t` spins under a threshold of `k` spins with
/// block+wake cost `c`: `t` if `t <= k`, else `k + c` (module docs).
#[inline]
pub fn wait_cost(t: u64, k: u64, c: u64) -> u128 {
    if t <= k {
        u128::from(t)
    } else {
        u128::from(k) + u128::from(c)
    }
}

/// Cost of spinning up to a fixed `k` spins on every wait of `waits`
/// (KLMO91 §2.4 `P_Constant_Spin`), spins.
pub fn fixed_threshold_cost(waits: &[u64], k: u64, c: u32) -> f64 {
    let c = u64::from(c);
    waits
        .iter()
        .fold(0u128, |a, &t| a.saturating_add(wait_cost(t, k, c))) as f64
}

/// The cheapest fixed threshold for the sequence `waits` (opt-known on a
/// raw sequence): the `k` minimizing `Σ_{t<=k} t + (k + C)·#{t > k}`,
/// searched over 0 and the distinct values of `waits` (between two of them
/// the cost only grows with `k`). Ties go to the smaller threshold.
/// `None` for an empty sequence.
pub fn best_fixed_threshold(waits: &[u64], c: u32) -> Option<u64> {
    if waits.is_empty() {
        return None;
    }
    let c = u128::from(c);
    let mut sorted = waits.to_vec();
    sorted.sort_unstable();
    let n = sorted.len() as u128;
    // k = 0: zero waits are free, the rest block at once.
    let zeros = sorted.iter().take_while(|&&t| t == 0).count() as u128;
    let mut best = (c.saturating_mul(n - zeros), 0u64);
    let mut spun: u128 = 0; // sum of waits <= k
    let mut i = 0;
    while i < sorted.len() {
        let k = sorted[i];
        while i < sorted.len() && sorted[i] == k {
            spun += u128::from(sorted[i]);
            i += 1;
        }
        let left = n - i as u128;
        let cost = spun.saturating_add((u128::from(k) + c).saturating_mul(left));
        if cost < best.0 {
            best = (cost, k);
        }
    }
    Some(best.1)
}

/// Cost of `policy` on `waits`, replayed in order as the lock calls it:
/// for each wait `t`, `k = policy.threshold(c, &LockName::Anonymous)`, the
/// wait costs `t` if `t <= k` else `k + c`, then `policy.record(t, c)`.
/// Pass a fresh `P::INIT` to price a new lock. (`OptKnown::INIT` looks the
/// anonymous lock up in the process-wide `opt-known` table; replay
/// `OptKnown::with_threshold(k)` instead.)
pub fn replay_cost<P: SpinPolicy>(policy: &P, waits: impl IntoIterator<Item = u64>, c: u32) -> f64 {
    let c64 = u64::from(c);
    let mut cost: u128 = 0;
    for t in waits {
        let k = u64::from(policy.threshold(c, &LockName::Anonymous));
        cost = cost.saturating_add(wait_cost(t, k, c64));
        policy.record(t, c);
    }
    cost as f64
}

/// The opt-known threshold of a lock: [`optimal_threshold`] over its
/// buckets, or `c` if it never waited. `optimal_threshold` adds the counts
/// in `u64`; should they overflow (only a hand-made record can), counts and
/// sums are all shifted right by the same 7 bits first (64 buckets of at
/// most `2^57` then add up without overflow), which keeps the shape of the
/// distribution.
fn opt_known_threshold(rec: &LockRecord, c: u64) -> u64 {
    let mut buckets = rec.buckets();
    let fits = buckets
        .iter()
        .try_fold(0u64, |a, b| a.checked_add(b.count))
        .is_some();
    if !fits {
        for b in &mut buckets {
            b.count >>= 7;
            b.sum >>= 7;
        }
    }
    optimal_threshold(&buckets, c).map_or(c, |(k, _)| k)
}

/// [`replay_cost`] from a fresh lock's state, `P::INIT`.
fn replay_fresh<P: SpinPolicy>(waits: impl IntoIterator<Item = u64>, c: u32) -> f64 {
    let policy = P::INIT;
    replay_cost(&policy, waits, c)
}

/// The waits of a histogram as `(value, count)` atoms (module docs): each
/// non-empty bucket with `count` waits summing to `sum` gives
/// `count - sum % count` waits of `sum / count` and `sum % count` waits of
/// `sum / count + 1`, so the values keep the recorded sum exactly. Atoms
/// with a zero count are left out; buckets in order.
pub fn wait_atoms(rec: &LockRecord) -> Vec<(u64, u64)> {
    let mut atoms = Vec::with_capacity(2 * BUCKETS);
    for (&n, &s) in rec.counts.iter().zip(rec.sums.iter()) {
        if n == 0 {
            continue;
        }
        let (q, r) = (s / n, s % n);
        if n - r > 0 {
            atoms.push((q, n - r));
        }
        if r > 0 {
            // r > 0 implies n >= 2, so q < u64::MAX.
            atoms.push((q + 1, r));
        }
    }
    atoms
}

fn atoms_cost(atoms: &[(u64, u64)], f: impl Fn(u64) -> u128) -> f64 {
    atoms.iter().fold(0u128, |a, &(v, n)| {
        a.saturating_add(f(v).saturating_mul(u128::from(n)))
    }) as f64
}

fn sat_u64(x: u128) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}

/// Replays opt-approx, last-3 and random-walk on one seeded shuffle of the
/// atoms' waits (sampled down to [`REPLAY_SAMPLE`] if needed); returns
/// their costs, scaled to the full count.
fn replay_atoms(atoms: &[(u64, u64)], total: u128, c: u32, seed: u64) -> [f64; 3] {
    if total == 0 {
        return [0.0; 3];
    }
    let sample = u128::from(REPLAY_SAMPLE);
    let counts: Vec<u64> = if total <= sample {
        atoms.iter().map(|&(_, n)| n).collect()
    } else {
        proportional_counts(atoms, total, sample)
    };
    let len: u64 = counts.iter().sum();
    let mut waits = Vec::with_capacity(len as usize);
    for (&(v, _), &n) in atoms.iter().zip(&counts) {
        waits.extend(std::iter::repeat_n(v, n as usize));
    }
    let mut rng = SplitMix64(seed);
    for i in (1..waits.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        waits.swap(i, j);
    }
    let scale = if total <= sample {
        1.0
    } else {
        total as f64 / len as f64
    };
    [
        replay_fresh::<OptApprox>(waits.iter().copied(), c) * scale,
        replay_fresh::<Last3>(waits.iter().copied(), c) * scale,
        replay_fresh::<RandomWalk>(waits.iter().copied(), c) * scale,
    ]
}

/// Each atom's share of a sample of `m` waits out of `total`, by largest
/// remainder, so the shares add up to exactly `m`.
fn proportional_counts(atoms: &[(u64, u64)], total: u128, m: u128) -> Vec<u64> {
    let mut counts = Vec::with_capacity(atoms.len());
    let mut rems = Vec::with_capacity(atoms.len());
    let mut given: u128 = 0;
    for (i, &(_, n)) in atoms.iter().enumerate() {
        // n <= 2^64 and m <= 2^20: the product fits in u128.
        let p = u128::from(n) * m;
        let q = p / total;
        counts.push(q as u64);
        rems.push((p % total, i));
        given += q;
    }
    // Largest remainders first; ties to the earlier atom (deterministic).
    rems.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in rems.iter().take((m - given) as usize) {
        counts[i] += 1;
    }
    counts
}

/// A synthetic bimodal lock: `n` waits, a fraction `long_frac` of them
/// long (uniform in `long` spins), the rest short (uniform in `short`).
///
/// Exactly `round(n * long_frac)` waits are long (`long_frac` is clamped
/// to `[0, 1]`, NaN counts as 0); each value is drawn uniformly from its
/// inclusive range (given as `(lo, hi)`; reversed bounds are swapped) by a
/// generator seeded with `seed`, so the record is deterministic. The
/// record's blocker is `synthetic`, its C is `c`, and no wait is marked
/// blocked. Sums saturate instead of overflowing. Takes `O(n)` time.
pub fn bimodal(
    name: &str,
    n: u64,
    short: (u64, u64),
    long: (u64, u64),
    long_frac: f64,
    c: u32,
    seed: u64,
) -> LockRecord {
    use symmetry_locks::spin_then_block::profiler::bucket_of;
    let mut rec = LockRecord::new(name, "synthetic", c);
    let frac = if long_frac.is_nan() {
        0.0
    } else {
        long_frac.clamp(0.0, 1.0)
    };
    // `as` saturates for floats out of range.
    let n_long = ((n as f64) * frac).round().min(n as f64) as u64;
    let mut rng = SplitMix64(seed);
    let mut put = |w: u64| {
        let j = bucket_of(w);
        rec.counts[j] = rec.counts[j].saturating_add(1);
        rec.sums[j] = rec.sums[j].saturating_add(w);
    };
    for i in 0..n {
        let (lo, hi) = if i < n_long { long } else { short };
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        put(rng.in_range(lo, hi));
    }
    rec
}

/// FNV-1a, to derive a per-lock seed from its name.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xCBF2_9CE4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

// ----- text tables -----

/// A number with 3 decimals; `inf` / `-` for infinite / NaN.
fn fmt3(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else if x.is_infinite() {
        "inf".into()
    } else {
        format!("{x:.3}")
    }
}

fn fmt2(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "-".into()
    }
}

/// Renders rows under headers: the first `left` columns left-aligned, the
/// rest right-aligned, two spaces apart, no trailing blanks.
fn render(headers: &[String], rows: &[Vec<String>], left: usize) -> String {
    let mut width: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for r in std::iter::once(headers).chain(rows.iter().map(Vec::as_slice)) {
        let mut line = String::new();
        for (i, (cell, &w)) in r.iter().zip(&width).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = w.saturating_sub(cell.chars().count());
            if i < left {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', pad));
            } else {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(cell);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// KLMO91 Table 1 as plain text: one row per input (its label and its
/// [`Analysis`]), one column per on-line policy in the paper's order
/// (`Block`, `Spin`, `Fixed C/2`, `Fixed C`, `Opt Known`, `Opt Approx`,
/// `3-samples`, `R-walk`), each the cost relative to the optimal off-line
/// algorithm ([`Analysis::cost_vs_offline`]), 3 decimals.
pub fn table1_text(inputs: &[(&str, &Analysis)]) -> String {
    let mut headers = vec![String::from("Input")];
    headers.extend(Strategy::POLICIES.iter().map(|s| s.label().to_string()));
    let rows: Vec<Vec<String>> = inputs
        .iter()
        .map(|&(name, a)| {
            let mut r = vec![name.to_string()];
            r.extend(
                Strategy::POLICIES
                    .iter()
                    .map(|&s| fmt3(a.cost_vs_offline(s))),
            );
            r
        })
        .collect();
    render(&headers, &rows, 1)
}

/// KLMO91 Table 2 as plain text: per input, the percentage of waits where
/// the optimal off-line algorithm blocks, and its mean spin cost where it
/// spins, in spins and in microseconds (`spins * ns_per_spin / 1000`).
pub fn table2_text(inputs: &[(&str, &Analysis)]) -> String {
    let headers: Vec<String> = [
        "Input",
        "Off-line % block",
        "Mean spin (spins)",
        "Mean spin (us)",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows: Vec<Vec<String>> = inputs
        .iter()
        .map(|&(name, a)| {
            vec![
                name.to_string(),
                format!("{:.1}", a.offline_block_pct()),
                fmt2(a.offline_mean_spin_spins()),
                fmt3(a.offline_mean_spin_us()),
            ]
        })
        .collect();
    render(&headers, &rows, 1)
}

/// Per-lock report, the profiler's answer to "which locks should spin, and
/// for how long": the `top` locks with waits, by off-line cost (the
/// synchronization time no policy can avoid), each with its kind, its blocker, its
/// waits, C, the percentage of its waits where off-line blocks, the
/// recommended threshold (opt-known `k`, spins: spin up to `k`, then
/// block; `0` means block at once), and every policy's cost over
/// off-line. Ties in cost are listed by name, then kind.
pub fn locks_text(analysis: &Analysis, top: usize) -> String {
    let mut locks: Vec<&LockCosts> = analysis.locks.iter().filter(|l| l.waits > 0).collect();
    locks.sort_by(|a, b| {
        b.offline_cost
            .total_cmp(&a.offline_cost)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.kind.cmp(&b.kind))
            .then_with(|| a.blocker.cmp(&b.blocker))
    });
    let mut headers: Vec<String> = ["Lock", "Kind", "Blocker", "Waits", "C", "% block", "Spin k"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    headers.extend(Strategy::POLICIES.iter().map(|s| s.label().to_string()));
    let rows: Vec<Vec<String>> = locks
        .iter()
        .take(top)
        .map(|l| {
            let pct = if l.waits > 0 {
                100.0 * l.offline_blocks as f64 / l.waits as f64
            } else {
                0.0
            };
            let mut r = vec![
                l.name.clone(),
                l.kind.to_string(),
                l.blocker.clone(),
                l.waits.to_string(),
                l.c_spins.to_string(),
                format!("{pct:.1}"),
                l.opt_known_threshold.to_string(),
            ];
            r.extend(Strategy::POLICIES.iter().map(|&s| fmt3(l.ratio(s))));
            r
        })
        .collect();
    let mut out = format!(
        "{} of {} locks with waits, by off-line cost. C and Spin k in spins; \
         % block: waits where off-line blocks (t >= C); \
         Spin k: recommended threshold (opt-known); \
         policy columns: cost / off-line cost.\n",
        rows.len(),
        locks.len()
    );
    out.push_str(&render(&headers, &rows, 3));
    out
}
