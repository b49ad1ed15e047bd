//! Spin-then-block locks: Karlin, Li, Manasse and Owicki, "Empirical
//! Studies of Competitive Spinning for a Shared-Memory Multiprocessor"
//! (KLMO91).
//!
//! A thread that finds a lock held can *spin* (keep its processor and poll
//! the lock) or *block* (give the processor away and be woken at release).
//! Blocking costs a fixed amount `C`, the block+wake cost, which this crate
//! counts in *spins* (iterations of the polling loop, see [`calibration`]);
//! spinning costs the waiting time itself. [`SpinThenBlock<P, B>`] polls up
//! to a threshold chosen by the spin policy `P`, then blocks through the
//! blocker `B`, exactly as KLMO91's `P.Variable_Spin` (§2.5).
//!
//! | part | where |
//! |---|---|
//! | the lock (`P.Variable_Spin` / `V.Variable_Spin`) | [`lock`] |
//! | policies: `always-block`, `always-spin`, `fixed-spin-c`, `fixed-spin-c2`, `opt-known`, `opt-approx`, `last-3`, `random-walk` | [`policy`] |
//! | blockers: OS threads (futex), a spinning stand-in; user threads live in `symmetry-threads` | [`blocker`] |
//! | C and the length of one spin, measured | [`calibration`] |
//! | the lock-waiting-time profiler | [`profiler`] |
//!
//! Both the policy and the blocker are type parameters: the harness
//! monomorphizes every combination, nothing in the lock is a virtual call.
//!
//! ```
//! use symmetry_locks::spin_then_block::{policy::RandomWalk, blocker::Futex, SpinThenBlock};
//!
//! // A named lock: its waits show up under this name in the profile.
//! let m = lock_api::Mutex::<SpinThenBlock<RandomWalk, Futex>, u64>::from_raw(
//!     SpinThenBlock::named("doc.counter"),
//!     0,
//! );
//! *m.lock() += 1;
//! assert_eq!(*m.lock(), 1);
//! ```

pub mod blocker;
pub mod calibration;
pub mod lock;
pub mod policy;
pub mod profiler;

pub use blocker::Blocker;
#[cfg(all(target_os = "linux", not(loom)))]
pub use blocker::Futex;
pub use lock::SpinThenBlock;
pub use policy::SpinPolicy;

use core::panic::Location;
use std::borrow::Cow;

/// How a lock is named in profiles and in the `opt-known` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockName {
    /// Built through `lock_api::RawMutex::INIT` (e.g. `Mutex::new`): no
    /// name; all such locks share the profile entry `(unnamed)`.
    Anonymous,
    /// Named by the user.
    Named(&'static str),
    /// Named by its creation site, `file:line:column`.
    Site(&'static Location<'static>),
}

impl LockName {
    /// The key of the lock in profiles.
    pub fn key(&self) -> Cow<'static, str> {
        match self {
            LockName::Anonymous => Cow::Borrowed("(unnamed)"),
            LockName::Named(s) => Cow::Borrowed(s),
            LockName::Site(l) => Cow::Owned(format!("{}:{}:{}", l.file(), l.line(), l.column())),
        }
    }
}
