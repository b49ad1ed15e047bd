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
