//! Measurement kernels, by subject. Experiments call them; they know
//! nothing of experiments, rows or reports.

pub mod locks;
pub mod messages;
pub mod threads;
