//! `am-selftest`: a rank program for the process tests of `symmetry-am`.
//!
//! Started by [`symmetry_am::job::spawn`] (or by a test that sets
//! `SYMMETRY_AM_JOB`, `SYMMETRY_AM_RANK` and `SYMMETRY_AM_SIZE` itself), it
//! reads its job from the environment and runs one mode:
//!
//! | mode | what the rank does |
//! |---|---|
//! | `exchange ALG N [--bulk] [--verbose]` | prints `joined` once every rank has joined, then all-to-all: N checked requests to every rank (itself included), each echoed by a reply; every delivery is checked, counted once, and the checksums are compared across ranks with `allreduce`; `--verbose` prints each rank's counters |
//! | `hold-claim ALG DEST [--bulk]` | claims a request packet (and a bulk block) at DEST and never fills it; prints `claimed`, then sleeps forever (the test kills it) |
//! | `hold-lock ALG DEST` | takes the claim lock of DEST's request queue and never releases it; prints `held`, then sleeps forever (the test kills it) |
//! | `idle ALG` | joins, prints `joined`, sleeps forever without polling |
//! | `send ALG DEST K [--bulk] [--go]` | joins, prints `joined`, (with `--go`, waits for a line on stdin,) sends K requests `[seq]` to handler 0 of DEST, prints `done`, exits |
//! | `slow-send ALG DEST` | joins, prints `joined`, claims a request packet at DEST, prints `claimed` and waits for a line on stdin before it fills and publishes it (a sender descheduled between its claim and its READY store), prints `done`, exits |
//! | `abort-after-join ALG [RANK]` | every rank joins; rank RANK (default 1) then aborts, the others sleep forever |
//! | `from-env` | prints what `Job::from_env` makes of the environment (`none`, `job NAME RANK SIZE`, or `error: ...`) |
//!
//! Every mode uses `CONFIG` (tiny queues, so that they are full most of
//! the time). Exit status: 0 success, 1 a failed check or an Active
//! Messages error (with a message on stderr), 2 bad arguments (with the
//! accepted forms).
//!
//! Under `cfg(loom)` the crate has no endpoints, so the binary is empty.

#[cfg(not(loom))]
mod imp;

#[cfg(not(loom))]
fn main() -> std::process::ExitCode {
    imp::main()
}

#[cfg(loom)]
fn main() {}
