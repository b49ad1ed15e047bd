//! The `symmetry` harness as a library: experiments, result files, plots
//! and the report. The binary (`src/main.rs`) is a thin CLI over it.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod am_cli;
pub mod am_kernels;
pub mod data;
pub mod experiments;
pub mod kernels;
pub mod locks_table;
pub mod machine;
pub mod peers_messages;
pub mod peers_threads;
pub mod plot;
pub mod report;
pub mod threads_table;
pub mod tm_kernels;
pub mod user_scheduler;
