//! Name tables: every lock and thread-management strategy, monomorphized
//! once and selected by name with no virtual call in a timed loop, and the
//! Debian programs the interposition library runs ([`programs`]).

pub mod locks;
pub mod preempt;
pub mod programs;
pub mod threads;
pub mod user_scheduler;
