//! Helpers shared by the threads crate's integration tests.

use std::time::{Duration, Instant};

/// A hang guard that follows progress, not the wall clock: a test fails
/// only when the count it watches has not moved for [`Stall::LIMIT`]. On
/// a busy machine (more runnable threads than cores) a run may take many
/// times its idle time; it is a hang only when it stops advancing.
#[derive(Debug)]
pub(crate) struct Stall {
    last: usize,
    since: Instant,
}

impl Stall {
    /// How long a watched count may stay put before the test fails.
    pub(crate) const LIMIT: Duration = Duration::from_secs(120);

    /// A guard that has seen no progress yet.
    pub(crate) fn new() -> Stall {
        Stall {
            last: 0,
            since: Instant::now(),
        }
    }

    /// Records the watched count `now`; panics with `what` when it has not
    /// changed for [`Stall::LIMIT`].
    pub(crate) fn check(&mut self, now: usize, what: impl FnOnce() -> String) {
        if now != self.last {
            self.last = now;
            self.since = Instant::now();
        } else if self.since.elapsed() > Self::LIMIT {
            panic!("no progress for {:?}: {}", Self::LIMIT, what());
        }
    }
}
