//! Result files and what is drawn from them: tidy CSV rows, the machine
//! description, per-file provenance, SVG plots and the report.

pub mod data;
pub mod machine;
pub mod plot;
pub mod provenance;
pub mod report;
