//! Measurement kernels, by subject. Experiments call them; they know
//! nothing of rows or reports.

pub mod am_job;
#[cfg(feature = "mpi")]
pub mod clumps;
pub mod fanout;
pub mod interpose;
pub mod klmo91;
pub mod lock_report;
pub mod locks;
pub mod machine;
pub mod messages;
pub mod preempt;
pub mod threads;
