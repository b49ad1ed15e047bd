//! The platform primitives the symmetry crates share: futex wait and wake,
//! asymmetric fences, CPU affinity, `/proc/PID/stat` and the seeded
//! SplitMix64 generator.
//!
//! This is the workspace's platform code, written once (SPEC §1, "platform
//! code once"): the locks here, the threads runtime, Active Messages, the
//! models, the workloads and the harness all call this module rather than
//! `libc` or a generator of their own. It is public so that every crate
//! uses one copy.
//!
//! **Not covered by semver stability.** These are Linux-specific helpers
//! shaped by what the other symmetry crates need; their signatures may
//! change in any release. Depend on them only if you can follow such
//! changes.
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
//! module. The functions never allocate unless their docs say so, because
//! callers use them inside signal handlers and between `fork` and `exec`.

pub mod affinity;
pub mod fence;
pub mod futex;
pub mod proc;
pub mod rng;
