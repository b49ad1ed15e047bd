//! Shutting a runtime down: [`Runtime::shutdown`],
//! [`Runtime::shutdown_timeout`], and dropping a runtime ([`DROP_GRACE`]).
//!
//! Ready threads run to completion or until they block; threads still
//! blocked when the processors stop are *abandoned*: their stacks and
//! control blocks are leaked and counted in the [`ShutdownReport`] (see
//! the `runtime` module docs, # Shutdown).

use std::time::{Duration, Instant};
use symmetry_locks::sync::Ordering;

use super::Runtime;
use super::processor::Processor;
use super::shared::NOOP_HOOKS;
use super::stats::ShutdownReport;
use crate::cb::CbRef;
use crate::strategy::Strategy;

impl<S: Strategy, P: Processor> Runtime<S, P> {
    /// Lets ready threads finish, stops the processors, and reports what
    /// is left (see the module docs). Idempotent.
    ///
    /// It waits for as long as threads stay ready: a thread that yields in
    /// a loop until a condition nobody will set, or a stream of new
    /// threads, keeps it waiting for ever. [`Runtime::shutdown_timeout`]
    /// returns within a bound whatever the threads do.
    pub fn shutdown(&mut self) -> ShutdownReport {
        if let Some(r) = self.report {
            return r;
        }
        self.begin_shutdown();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        self.finish_shutdown(0)
    }

    /// [`Runtime::shutdown`] that returns within about `limit`, whatever
    /// the user threads do. Ready threads run until three quarters of
    /// `limit` have passed; then each processor stops at its next switch
    /// (a thread that blocks, yields or finishes), leaving the threads
    /// still ready unrun. A thread that runs on without ever switching
    /// keeps its processor: that processor's OS thread is left to it
    /// (detached), and the report counts it in
    /// [`ShutdownReport::still_running`]. Threads that did not finish
    /// are counted in [`ShutdownReport::abandoned`]; their join handles
    /// return [`JoinError::Abandoned`](crate::JoinError::Abandoned).
    /// Idempotent.
    pub fn shutdown_timeout(&mut self, limit: Duration) -> ShutdownReport {
        if let Some(r) = self.report {
            return r;
        }
        let start = Instant::now();
        self.begin_shutdown();
        let wait = |workers: &mut Vec<std::thread::JoinHandle<()>>, until: Duration| {
            while start.elapsed() < until && workers.iter().any(|w| !w.is_finished()) {
                std::thread::sleep(Duration::from_micros(200));
            }
            let (done, left): (Vec<_>, Vec<_>) = std::mem::take(workers)
                .into_iter()
                .partition(|w| w.is_finished());
            for w in done {
                let _ = w.join();
            }
            *workers = left;
        };
        wait(&mut self.workers, limit * 3 / 4);
        if !self.workers.is_empty() {
            // Release: pairs with the processors' Acquire loads.
            self.shared.stop_now.store(true, Ordering::Release);
            self.shared.sleepers.wake_all();
            self.shared.strategy.wake_all();
            wait(&mut self.workers, limit);
        }
        let running = self.workers.len() as u64;
        // Detached: a processor still running a thread that never
        // switches keeps its OS thread (and its reference to the runtime).
        self.workers.clear();
        self.finish_shutdown(running)
    }

    /// Sets the shutdown flag and wakes every idle processor.
    fn begin_shutdown(&self) {
        let sh = &self.shared;
        // SeqCst: pairs with the idle processors' SeqCst fence and loads.
        sh.env.shutdown.store(true, Ordering::SeqCst);
        sh.sleepers.wake_all();
        sh.strategy.wake_all();
    }

    /// Counts what is left once the processors have exited (all but
    /// `running`, which never switched back) and completes the shutdown.
    fn finish_shutdown(&mut self, running: u64) -> ShutdownReport {
        let sh = &self.shared;
        if running > 0 {
            // A processor still runs a user thread: control blocks are
            // not ours to walk. Count without touching them.
            let s = sh.stats();
            // Release: pairs with the Acquire load in `JoinHandle::join`.
            sh.stopped.store(true, Ordering::Release);
            let r = ShutdownReport {
                stats: s,
                cbs_free: 0,
                stacks_free: 0,
                abandoned: s.created.saturating_sub(s.finished).saturating_sub(running),
                still_running: running,
            };
            self.report = Some(r);
            return r;
        }
        let (cbs_free, stacks_free) = sh.strategy.free_counts();
        // Abandoned threads: anything that still has a coroutine or an
        // unrun closure.
        let mut abandoned = 0;
        let mut forgotten = Vec::new();
        let arena: Vec<CbRef> = sh.env.alloc.arena_snapshot();
        for cb in arena {
            // SAFETY: the processors have exited; no thread runs, and no
            // one else touches control blocks.
            unsafe {
                let bound = &mut *cb.cb().stack.get();
                if let Some(c) = bound.take() {
                    // Never unwind a suspended thread from here: its
                    // destructors could call into a stopped runtime. Its
                    // stack is leaked, not unmapped, and its control
                    // block outlives the runtime: a wait node on that
                    // stack may still sit in a sync object's queue, and a
                    // later wake-up through it must find valid memory (the
                    // no-op hooks make that wake-up do nothing).
                    std::mem::forget(c);
                    cb.cb().hooks.set(&NOOP_HOOKS);
                    forgotten.push(cb);
                    abandoned += 1;
                } else if cb.has_entry() {
                    cb.drop_entry();
                    abandoned += 1;
                }
            }
        }
        sh.env.alloc.forget_cbs(&forgotten);
        // Release: pairs with the Acquire load in `JoinHandle::join`.
        sh.stopped.store(true, Ordering::Release);
        let r = ShutdownReport {
            stats: sh.stats(),
            cbs_free,
            stacks_free,
            abandoned,
            still_running: 0,
        };
        self.report = Some(r);
        r
    }
}

/// How long dropping a runtime waits for its ready threads
/// ([`Runtime::shutdown_timeout`]).
pub const DROP_GRACE: Duration = Duration::from_secs(5);

impl<S: Strategy, P: Processor> Drop for Runtime<S, P> {
    /// Shuts down with [`Runtime::shutdown_timeout`]`(`[`DROP_GRACE`]`)`
    /// unless already shut down: ready threads get up to that long to
    /// finish, and dropping never hangs. What is left is not reported;
    /// call [`Runtime::shutdown`] or [`Runtime::shutdown_timeout`] first
    /// to see it.
    fn drop(&mut self) {
        self.shutdown_timeout(DROP_GRACE);
    }
}
