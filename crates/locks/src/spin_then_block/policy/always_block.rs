//! `always-block` (KLMO91 §2.2): block as soon as the lock is found held,
//! the traditional approach and the baseline of KLMO91 Tables 3-4.

use super::{LockName, SpinPolicy};

/// Never spin: threshold 0.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysBlock;

impl SpinPolicy for AlwaysBlock {
    const NAME: &'static str = "always-block";
    const INIT: Self = AlwaysBlock;

    #[inline(always)]
    fn threshold(&self, _c: u32, _lock: &LockName) -> u32 {
        0
    }
}
