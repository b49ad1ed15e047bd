//! The sub-commands of `symmetry`, each parsing its arguments and calling
//! the library: the experiment runner (`run`, `reproduce`, `report`,
//! `calibrate`), listings, and the commands beyond the experiments
//! (`analyze`, `profile`, `am`, `compare`).

pub mod am;
pub mod analyze;
pub mod compare;
pub mod list;
pub mod profile;
pub mod run;
