//! `tm-user-work` — placeholder, being implemented.

use super::{Ctx, Experiment};
use crate::data::Row;
use crate::machine::Machine;
use crate::plot::Figure;
use crate::report::Section;

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "tm-user-work",
    title: "(being implemented)",
    source: "ALL89",
    uses_locks: false,
    run,
    figure: draw,
    assess,
};

fn run(_ctx: &Ctx) -> Result<Vec<Row>, String> {
    Err("not implemented yet".into())
}

fn draw(_rows: &[Row], _m: &Machine) -> Figure {
    super::figure("tm-user-work", _m, vec![])
}

fn assess(_rows: &[Row], _m: &Machine) -> Section {
    unimplemented!()
}
