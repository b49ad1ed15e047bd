//! A runtime's counters: [`Stats`], [`ShutdownReport`], and how the
//! processors' counters are summed.

use symmetry_locks::sync::{AtomicU64, Ordering};

use super::processor::Processor;
use super::shared::Shared;
use crate::strategy::Strategy;

/// Counters of a runtime (see [`Runtime::stats`](super::Runtime::stats)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Processors.
    pub processors: usize,
    /// Threads created (on processors and from outside).
    pub created: u64,
    /// Threads finished.
    pub finished: u64,
    /// Dispatches from ready queues (starts and resumes).
    pub dequeues: u64,
    /// Ready queues examined by those dispatches.
    pub queues_examined: u64,
    /// Scans that found every queue empty.
    pub empty_scans: u64,
    /// Times an idle processor parked in the kernel.
    pub parks: u64,
    /// Control blocks allocated from the heap.
    pub cbs_allocated: u64,
    /// Stacks allocated by `mmap`.
    pub stacks_allocated: u64,
}

/// What [`Runtime::shutdown`](super::Runtime::shutdown) found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Final counters.
    pub stats: Stats,
    /// Control blocks on the free lists after the processors exited.
    pub cbs_free: u64,
    /// Stacks on the free lists after the processors exited.
    pub stacks_free: u64,
    /// Threads still blocked, ready or never started when the processors
    /// stopped; they never ran to completion.
    pub abandoned: u64,
    /// Threads still running on a processor that did not stop by the
    /// deadline of
    /// [`Runtime::shutdown_timeout`](super::Runtime::shutdown_timeout)
    /// (they never switched); always 0 after
    /// [`Runtime::shutdown`](super::Runtime::shutdown).
    pub still_running: u64,
}

impl ShutdownReport {
    /// Whether every control block and stack is accounted for: on a free
    /// list, or held by an abandoned thread.
    pub fn nothing_leaked(&self) -> bool {
        self.cbs_free + self.abandoned == self.stats.cbs_allocated
            && self.stacks_free <= self.stats.stacks_allocated
            && self.stats.stacks_allocated - self.stacks_free <= self.abandoned
    }
}

impl<S: Strategy, P: Processor> Shared<S, P> {
    pub(super) fn stats(&self) -> Stats {
        let mut s = Stats {
            processors: self.env.processors,
            // Relaxed: statistics.
            created: self.created_outside.load(Ordering::Relaxed),
            cbs_allocated: self.env.alloc.cbs_allocated(),
            stacks_allocated: self.env.alloc.stacks_allocated(),
            ..Stats::default()
        };
        for p in self.env.stats.iter() {
            let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
            s.created += l(&p.created);
            s.finished += l(&p.finished);
            s.dequeues += l(&p.dequeues);
            s.queues_examined += l(&p.queues_examined);
            s.empty_scans += l(&p.empty_scans);
            s.parks += l(&p.parks);
        }
        s
    }
}
