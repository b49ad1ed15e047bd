//! The platform code every symmetry crate calls, written once (SPEC §1,
//! "platform code once"): the bottom of the workspace, depending on `libc`
//! only.
//!
//! | module | what |
//! |---|---|
//! | [`futex`] | Linux `futex(2)` wait and wake on a 32-bit word, process-private or shared |
//! | [`fence`] | asymmetric fences: a cheap side and a `membarrier(2)` side |
//! | [`affinity`] | the CPUs this thread may run on; pinning the calling thread |
//! | [`proc`] | a process's state and flags from `/proc/PID/stat`; whether it is alive |
//! | [`rng`] | SplitMix64, the one seeded generator, with unbiased bounded integers |
//!
//! Everything here is a thin, documented wrapper: no policy lives in this
//! crate. The functions never allocate unless their docs say so, because
//! callers use them inside signal handlers and between `fork` and `exec`.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod affinity;
pub mod fence;
pub mod futex;
pub mod proc;
pub mod rng;
