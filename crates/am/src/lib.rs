//! Cross-process shared-memory Active Messages (Lumetta & Culler 1998,
//! "Managing Concurrent Access for Shared Memory Active Messages").
//!
//! * [`Endpoint`]: a named endpoint in POSIX shared memory with request and
//!   reply queues (LC98 Fig. 1); `request`, `request_bulk`, `poll`, and
//!   `reply` from inside handlers; a barrier and an all-reduce on top.
//! * [`claim`]: the seven ways senders claim packets, selectable by type
//!   (`Endpoint<LockFree>`) or by name ([`for_each_claim!`](crate::for_each_claim)).
//! * [`job`]: SPMD jobs of processes ([`job::spawn`]) or threads
//!   ([`job::run_threads`]).
//! * [`net`]: the same endpoints between hosts, over a [`net::Wire`]
//!   (MPI with the `mpi` feature), keeping shared memory within a host.
//!
//! ```
//! use symmetry_am::{Config, Endpoint, Job, Msg, Token, claim::Stamp, job};
//!
//! fn ping(t: &mut Token<'_, Stamp, u64>, m: &Msg<'_>) -> Result<(), symmetry_am::AmError> {
//!     t.reply(1, &[m.args[0] + 1])
//! }
//! fn pong(t: &mut Token<'_, Stamp, u64>, m: &Msg<'_>) -> Result<(), symmetry_am::AmError> {
//!     *t.state() = m.args[0];
//!     Ok(())
//! }
//! let got = job::run_threads(2, |job: Job| {
//!     let mut ep = Endpoint::<Stamp, u64>::join(&job, &Config::default(), 0).unwrap();
//!     ep.register(0, ping).unwrap();
//!     ep.register(1, pong).unwrap();
//!     if job.rank == 0 {
//!         ep.request(1, 0, &[41]).unwrap();
//!         ep.poll_until(|v| *v != 0).unwrap();
//!     }
//!     let v = *ep.state();
//!     ep.finish().unwrap();
//!     v
//! });
//! assert_eq!(got[0], 42);
//! ```

//!
//! ## Stability
//!
//! Under semver from 0.1 (before 1.0, a breaking change bumps the minor
//! version): [`Endpoint`] and what handlers see ([`Token`], [`Msg`],
//! [`Handler`]), [`Job`] with [`job::run_threads`], [`job::spawn`] and
//! [`Job::from_env`], [`Config`], [`AmError`], and the claim algorithms as
//! types (`Endpoint<LockFree>`, ...).
//!
//! Experimental, and free to change in any release:
//!
//! * the shared-memory format ([`layout`], [`segment`]): a segment records
//!   its version, and endpoints of different versions refuse each other;
//! * the [`Claim`] trait's methods (writing a claim algorithm of your own)
//!   and [`for_each_claim!`](crate::for_each_claim), which the harness
//!   expands;
//! * [`net`]: transports between hosts, the [`net::Wire`] trait and the
//!   `mpi` feature;
//! * the counters of [`Stats`].
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod bell;
pub mod claim;
#[cfg(not(loom))]
pub mod endpoint;
pub mod error;
#[cfg(not(loom))]
pub mod job;
pub mod layout;
#[cfg(loom)]
#[doc(hidden)]
pub mod model;
#[cfg(not(loom))]
pub mod net;
#[cfg(not(loom))]
pub mod segment;
mod sync;

pub use claim::{Claim, Claimed};
#[cfg(not(loom))]
pub use endpoint::{Endpoint, Handler, MAX_RANKS, Msg, ReduceOp, Stats, Token, USER_HANDLERS};
pub use error::AmError;
#[cfg(not(loom))]
pub use job::Job;
pub use layout::MAX_ARGS;
#[cfg(not(loom))]
pub use segment::Config;

/// The crate README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// Under loom there is no endpoint; the queue protocol is checked directly.
#[cfg(loom)]
pub const MAX_RANKS: usize = 64;
