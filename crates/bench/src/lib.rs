//! The `symmetry` harness as a library. The binary (`src/main.rs`) is a
//! thin CLI over it. Its parts, one folder each:
//!
//! - [`harness`]: what every experiment is built from: the run context,
//!   the declaration of an experiment and its claims, verdict rules judged
//!   with the run's own repeat spread, statistics, row look-ups, figures;
//!   and the runner, which runs a catalogue given to it (`run`,
//!   `reproduce`) and writes a results directory and its report.
//! - [`experiments`]: the catalogue; one file per experiment, holding its
//!   declaration, its run and its assessment, importing only the harness,
//!   the kernels, the registries and the peers (never another experiment).
//! - [`kernels`]: measurement kernels by subject (locks, threads, messages,
//!   KLMO91 workloads, machine constants).
//! - [`registry`]: name tables that monomorphize every lock and strategy.
//! - [`peers`]: the modern peers (tokio, may, rayon, crossbeam, sockets).
//! - [`output`]: result files (tidy CSV, `machine.json`, provenance), plots
//!   and the report.
//! - [`stats`] and [`scratch`]: medians and repeat spreads, and private
//!   scratch directories, which every layer above may use.
//! - [`cli`]: the sub-commands, each parsing its arguments and calling the
//!   layers below with the catalogue (`run`, `reproduce`, `report`, `am`,
//!   `compare`, ...).
#![deny(unsafe_op_in_unsafe_fn)]

pub mod cli;
pub mod experiments;
pub mod harness;
pub mod kernels;
pub mod output;
pub mod peers;
pub mod registry;
pub mod scratch;
pub mod stats;

/// The README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The guides' code blocks (`docs/*.md`), one struct per guide, compiled
/// and run as doctests; `tests/doc_links.rs` checks their links.
#[cfg(doctest)]
pub mod guides {
    #[doc = include_str!("../../../docs/README.md")]
    pub struct DocsIndexDoctests;
    #[doc = include_str!("../../../docs/choosing-a-lock.md")]
    pub struct ChoosingALockDoctests;
    #[doc = include_str!("../../../docs/spin-then-block.md")]
    pub struct SpinThenBlockDoctests;
    #[doc = include_str!("../../../docs/preemption-safe-locks.md")]
    pub struct PreemptionSafeLocksDoctests;
    #[doc = include_str!("../../../docs/threads.md")]
    pub struct ThreadsDoctests;
    #[doc = include_str!("../../../docs/active-messages.md")]
    pub struct ActiveMessagesDoctests;
    #[doc = include_str!("../../../docs/unmodified-programs.md")]
    pub struct UnmodifiedProgramsDoctests;
    #[doc = include_str!("../../../docs/harness.md")]
    pub struct HarnessDoctests;
    #[doc = include_str!("../../../docs/models.md")]
    pub struct ModelsDoctests;
}
