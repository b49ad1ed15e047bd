//! Name tables: every lock and thread-management strategy, monomorphized
//! once and selected by name with no virtual call in a timed loop.

pub mod locks;
pub mod preempt;
pub mod threads;
pub mod user_scheduler;
