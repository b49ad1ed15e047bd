//! `fixed-spin-c` and `fixed-spin-c2` (KLMO91 §2.4, after KMMO89): spin C
//! (resp. C/2) polls, then block.
//!
//! With threshold C a wait of `t < C` costs `t`, as off-line; a wait of
//! `t >= C` costs `2C` where off-line pays `C`: 2-competitive, the best a
//! deterministic policy can be. With C/2 the ratio is 3 (`C/2 + C` against
//! `C/2`), yet KLMO91 found C/2 often cheaper on real distributions,
//! which are mostly short waits.

use super::{LockName, SpinPolicy};

/// Spin C polls, then block.
#[derive(Debug, Clone, Copy, Default)]
pub struct FixedSpinC;

impl SpinPolicy for FixedSpinC {
    const NAME: &'static str = "fixed-spin-c";
    const INIT: Self = FixedSpinC;

    #[inline(always)]
    fn threshold(&self, c: u32, _lock: &LockName) -> u32 {
        c
    }
}

/// Spin C/2 polls, then block.
#[derive(Debug, Clone, Copy, Default)]
pub struct FixedSpinHalfC;

impl SpinPolicy for FixedSpinHalfC {
    const NAME: &'static str = "fixed-spin-c2";
    const INIT: Self = FixedSpinHalfC;

    #[inline(always)]
    fn threshold(&self, c: u32, _lock: &LockName) -> u32 {
        c / 2
    }
}

/// Spin exactly `N` polls, then block, whatever C is. `Fixed<1008>` is
/// how KLMO91 recorded their profiles (§3: spin up to 1008, then block),
/// so `symmetry` records profiles with it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fixed<const N: u32>;

impl<const N: u32> SpinPolicy for Fixed<N> {
    const NAME: &'static str = "fixed";
    const INIT: Self = Fixed;

    #[inline(always)]
    fn threshold(&self, _c: u32, _lock: &LockName) -> u32 {
        N
    }
}
