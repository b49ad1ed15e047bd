//! LC98 §4.3's Split-C applications on symmetry-am: bulk-synchronous
//! phases separated by barriers built on Active Messages.
//!
//! TODO(helper): fill in; the API below is fixed (the bench and the CLI
//! call it).

use std::time::Duration;

use symmetry_am::{AmError, Claim, Job};

/// The applications of LC98 Table 3/4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum App {
    /// 3-D FFT: all-to-all bulk transposes scheduled as one-to-one phases.
    Fft,
    /// Connected components, communication-bound input.
    ConComm,
    /// Connected components, computation-bound input.
    ConComp,
    /// Sample sort of 32-bit keys: fine-grained all-to-all.
    Sample,
}

impl App {
    /// All four, in LC98 Table 4 order.
    pub const ALL: [App; 4] = [App::Fft, App::ConComm, App::ConComp, App::Sample];

    /// Stable name (`fft`, `con-comm`, `con-comp`, `sample`).
    pub fn name(self) -> &'static str {
        match self {
            App::Fft => "fft",
            App::ConComm => "con-comm",
            App::ConComp => "con-comp",
            App::Sample => "sample",
        }
    }

    /// Parses a name of [`App::name`].
    pub fn from_name(s: &str) -> Option<App> {
        App::ALL.into_iter().find(|a| a.name() == s)
    }
}

/// Problem size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// Small inputs: tests and `--quick`.
    Quick,
    /// The default experiment inputs (scaled to this machine).
    Full,
}

/// What one rank measured.
#[derive(Debug, Clone, PartialEq)]
pub struct AppOut {
    /// Time from the barrier after setup to the barrier after the last
    /// phase (the same on every rank up to barrier skew).
    pub elapsed: Duration,
    /// Whether this rank's part of the result checked out.
    pub verified: bool,
    /// A checksum of the result (equal across algorithms for one input).
    pub checksum: u64,
    /// Messages this rank sent.
    pub messages: u64,
    /// Bulk bytes this rank sent.
    pub bulk_bytes: u64,
    /// Input parameters, `key=value` pairs, for the report.
    pub params: Vec<(String, String)>,
}

/// Runs `app` as rank `job.rank` of `job` with claim algorithm `C`.
pub fn run_rank<C: Claim>(app: App, size: Size, job: &Job) -> Result<AppOut, AmError> {
    let _ = (app, size, job);
    todo!("helper")
}
