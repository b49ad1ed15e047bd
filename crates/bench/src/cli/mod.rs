//! Sub-commands beyond the experiment runner.

pub mod am;
pub mod compare;
pub mod profile;
