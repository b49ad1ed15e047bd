//! LC98 §4.3's Split-C applications on symmetry-am: bulk-synchronous
//! phases separated by barriers built on Active Messages.
//!
//! Every rank of a job calls [`run_rank`] with the same application and
//! size; it builds its part of the input (from a seed, so every rank and
//! every verifier agree without communicating), joins an endpoint with
//! [`symmetry_am::Config::default`], runs the timed phases, verifies its
//! part of the result (untimed) and closes with `finish`.
//!
//! | app | module | LC98 | communication |
//! |---|---|---|---|
//! | [`App::Fft`] | [`fft`] | 3-D FFT, 256^3 | bulk transposes, all-to-all as P-1 one-to-one phases |
//! | [`App::ConComm`] | [`con`] | CON, 3-D lattice, 25% edges | fine-grained label updates, many rounds |
//! | [`App::ConComp`] | [`con`] | CON, 2-D lattice, 40% edges | few cut edges, mostly local union-find |
//! | [`App::Sample`] | [`sample`] | SAMPLE, 32-bit keys | fine-grained all-to-all key scatter |
//!
//! Inputs at [`Size::Full`] are LC98 Table 3's, scaled to about 1-4 s per
//! application at two ranks on a 2-core machine; each run reports its
//! parameters in [`AppOut::params`]. Each module's docs give the
//! algorithm, the input and the checks.

use std::time::Duration;

use symmetry_am::{AmError, Claim, Job};

mod common;
pub mod con;
pub mod fft;
pub mod sample;

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
///
/// Errors: a job size the input cannot be divided by (the FFT needs `P`
/// to divide `n`), and any failure of the message layer (a dead or
/// closed peer, a malformed message).
pub fn run_rank<C: Claim>(app: App, size: Size, job: &Job) -> Result<AppOut, AmError> {
    match app {
        App::Fft => fft::run::<C>(&fft::FftCfg::of(size), job),
        App::ConComm => con::run::<C>(&con::ConCfg::comm(size), job),
        App::ConComp => con::run::<C>(&con::ConCfg::comp(size), job),
        App::Sample => sample::run::<C>(&sample::SampleCfg::of(size), job),
    }
}
