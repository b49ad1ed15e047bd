//! What an experiment file imports, in one line
//! (`use crate::harness::prelude::*;`): the declaration's types, the
//! look-ups, rules and drawing helpers of the harness, and the output
//! types that runs, figures and assessments are made of. Whatever else an
//! experiment uses (its kernels, registries and peers) it names itself.

pub use super::fmt::{self, est, join, na};
pub use super::{
    Assessment, Claim, Ctx, Data, Estimate, Experiment, Finding, Lines, Needs, OWN_MIN, Outcome,
    Schedule, Sel, Spread, bar_panels, figure, in_rounds, median, median_of, median_run, names, ns,
    param_panel, ratio, rule, series_names, spread_of, table, try_in_rounds, value,
};
pub use crate::output::data::Row;
pub use crate::output::machine::Machine;
pub use crate::output::plot::{Bar, BarPanel, Figure, LinePanel, Panel, Point, Scale, Series};
pub use crate::output::report::Table;
