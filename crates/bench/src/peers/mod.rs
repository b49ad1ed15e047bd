//! The modern peers the papers' runtimes are measured against.

pub mod fanout;
pub mod messages;
pub mod threads;
