//! The "run the newest thread next" discipline: threads that have not
//! started yet are taken newest first (a stack), in front of a FIFO queue
//! of threads made ready again; Go's scheduler keeps the newest goroutine
//! in `runnext` and tokio its newest task in a LIFO slot for the same
//! reason, and this extends the slot to every unstarted thread.
//!
//! A fan-out program (a thread that creates children and joins them)
//! then runs depth-first: when the parent blocks, the child it created
//! last runs at once, on a warm cache, and its own children before its
//! siblings; far fewer threads have started (and bound a stack) at any
//! time. ALL89's strategies are FIFO, and [`Fifo`](super::Fifo) stays
//! what the papers' experiments measure.
//!
//! Invariants:
//! - only threads that have not started enter the stack of new threads; a
//!   thread made ready again after blocking or yielding goes to the FIFO
//!   tail, so a thread that yields in a loop cannot keep the processor;
//! - after [`MAX_STREAK`] pops of new threads in a row, one pop takes the
//!   FIFO head (if any), so neither a chain of threads that each create
//!   the next nor a flood of creations can starve the threads that were
//!   woken (tokio bounds its LIFO slot the same way).

use super::ReadyPool;
use crate::cb::{CbList, CbRef};

/// Consecutive pops of new threads before the FIFO head gets one.
pub(crate) const MAX_STREAK: u32 = 16;

/// A ready pool that runs unstarted threads newest first, ahead of a
/// FIFO queue of resumed ones. See the module docs.
#[derive(Debug, Default)]
pub struct NewestFirst {
    /// Unstarted threads, newest at the front.
    new: CbList,
    /// Threads made ready again, oldest at the front.
    resumed: CbList,
    /// New threads popped since the FIFO head last had a turn.
    streak: u32,
}

impl ReadyPool for NewestFirst {
    /// The newest thread runs next on the processor that made it, as
    /// Go's `runnext` is per processor.
    const LOCAL_FIRST: bool = true;

    #[inline(always)]
    fn push(&mut self, t: CbRef) {
        if t.is_started() {
            self.resumed.push_back(t);
        } else {
            self.new.push_front(t);
        }
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<CbRef> {
        if self.streak < MAX_STREAK
            && let Some(t) = self.new.pop_front()
        {
            self.streak += 1;
            return Some(t);
        }
        self.streak = 0;
        self.resumed.pop_front().or_else(|| self.new.pop_front())
    }

    #[inline(always)]
    fn len(&self) -> usize {
        self.new.len() + self.resumed.len()
    }
}
