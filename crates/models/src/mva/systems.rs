//! The two systems ALL89 §V models with [`Hierarchical`], built from the
//! costs a run measures ([`Costs`]): a thread package, whose cycle is one
//! thread's life ([`thread_package`]), and a spin lock in the paper's
//! counter, whose cycle is one acquisition ([`spin_lock`]).
//!
//! **The thread package** (ALL89 Diagram 5.2). A thread visits the ready
//! queue's lock twice ([`QUEUE_OPS_PER_THREAD`]: a push when it is
//! created, a pop when a processor takes it): one central queue, or one
//! per processor with a thread placed on a random one ([`ReadyQueue`]).
//! Each visit holds the lock for one `queue_op` of cache-local time and
//! [`TRANSFERS_PER_QUEUE_OP`] cache-line transfer (the queue's line, with
//! its lock word, ends and length) whenever the previous visitor was
//! another processor, with probability `(P - 1) / P` ([`moved`]). The
//! rest of the thread management and the user work hold no lock. Waiters
//! spin on a test-and-set lock, one bus transaction per spin iteration.
//!
//! The bus is one queueing centre whose service time is a transfer's
//! latency, as on the Symmetry's bus. A modern interconnect serves
//! transfers between different pairs of cores at once, so on such a
//! machine the model is that of one whose transfers serialise:
//! pessimistic where the bus is the bottleneck.
//!
//! **The spin locks** (ALL89 Fig. 6's counter): a cycle is one
//! acquisition with an empty critical section and no work outside it,
//! held for its one-processor time. At P > 1 the line holding the lock
//! word and the counter moves to the next holder: for the unfair
//! test-and-set locks another processor with probability `(P - 1) / P`;
//! a queue lock (MCS) hands over in FIFO order to a waiter, always on
//! another processor, and that hand-off writes the waiter's flag (two
//! transfers). Test-and-set spinners attempt once per spin iteration,
//! test-and-test-and-set spinners make two transactions per release
//! (re-read and attempt), queue-lock spinners spin on their own flag.

use super::{Hierarchical, Lock, MvaError, Prediction, Spinning};

/// The costs both models are built from, measured on one processor (or
/// one pair of cores), in one time unit (ns in the harness).
///
/// ```
/// use symmetry_models::mva::systems::{self, Costs, ReadyQueue};
///
/// // 10 ns per queue operation and per line transfer, 30 ns per spin.
/// let c = Costs::new(10.0, 10.0, 30.0);
/// // 300 ns of thread management and 1 us of work per thread.
/// let one = systems::thread_package(ReadyQueue::Central, 1, &c, 300.0, 1000.0, 0.0)?;
/// let many = systems::thread_package(ReadyQueue::PerProcessor, 16, &c, 300.0, 1000.0, 0.0)?;
/// assert!(many.throughput > 8.0 * one.throughput);
/// # Ok::<(), symmetry_models::mva::MvaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Costs {
    /// One uncontended locked queue operation.
    pub queue_op: f64,
    /// One cache-line transfer (half a round trip); 0 without a pair of
    /// cores, where the model has no bus.
    pub transfer: f64,
    /// One spin-wait iteration: the gap between a test-and-set spinner's
    /// attempts.
    pub spin: f64,
}

impl Costs {
    /// The costs of a queue operation, a cache-line transfer (0 without a
    /// pair of cores) and a spin-wait iteration.
    pub const fn new(queue_op: f64, transfer: f64, spin: f64) -> Costs {
        Costs {
            queue_op,
            transfer,
            spin,
        }
    }
}

/// Ready-queue operations per thread (push, pop).
pub const QUEUE_OPS_PER_THREAD: f64 = 2.0;

/// Cache-line transfers in one ready-queue operation by a processor that
/// did not make the previous one: the queue's lock word, ends and length
/// fit in one line (as in `symmetry-threads`' `LockedPool`), so one line
/// moves. (A migrated thread's control block and stack move too, but
/// outside the lock, and the model leaves them out as ALL89's does.)
pub const TRANSFERS_PER_QUEUE_OP: f64 = 1.0;

/// Where a thread package keeps its ready threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadyQueue {
    /// One queue for all processors.
    Central,
    /// One queue per processor; a thread goes on a random one.
    PerProcessor,
}

/// How a spin lock hands over and how its waiters spin (ALL89 Fig. 6's
/// three kinds of waiting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpinLock {
    /// `tas`: any processor may take the lock next; spinners attempt once
    /// per spin iteration.
    TestAndSet,
    /// `ttas`: any processor may take the lock next; spinners re-read and
    /// attempt once per release.
    TestAndTestAndSet,
    /// `mcs`: FIFO hand-over to a waiter on another processor; spinners
    /// spin on their own flag.
    Queue,
}

impl SpinLock {
    /// The lock's short name (the registry's).
    pub fn name(self) -> &'static str {
        match self {
            SpinLock::TestAndSet => "tas",
            SpinLock::TestAndTestAndSet => "ttas",
            SpinLock::Queue => "mcs",
        }
    }
}

/// Probability that a visit finds its line in another processor's cache:
/// `(P - 1) / P`.
pub fn moved(p: u32) -> f64 {
    f64::from(p.saturating_sub(1)) / f64::from(p.max(1))
}

/// The thread package at `p` processors: `overhead` of thread management
/// per thread (as one processor pays it, the queue operations included),
/// `work` of user work per thread, `bus_load` of which is bus time.
pub fn thread_package(
    queue: ReadyQueue,
    p: u32,
    c: &Costs,
    overhead: f64,
    work: f64,
    bus_load: f64,
) -> Result<Prediction, MvaError> {
    let held_local = QUEUE_OPS_PER_THREAD * c.queue_op;
    let held_bus = QUEUE_OPS_PER_THREAD * TRANSFERS_PER_QUEUE_OP * c.transfer * moved(p);
    let copies = match queue {
        ReadyQueue::Central => 1,
        ReadyQueue::PerProcessor => p,
    };
    Hierarchical::new(p, Spinning::Continuous { gap: c.spin })
        .with_lock(Lock::new("ready queue", held_local, held_bus).with_copies(copies))
        .with_free(
            (overhead - held_local).max(0.0) + work * (1.0 - bus_load),
            work * bus_load,
        )
        .with_bus_service(c.transfer)
        .solve()
}

/// A spin lock at `p` processors in the counter, one acquisition costing
/// `held` on one processor.
pub fn spin_lock(lock: SpinLock, p: u32, c: &Costs, held: f64) -> Result<Prediction, MvaError> {
    let (transfers, spinning) = match lock {
        SpinLock::TestAndSet => (moved(p), Spinning::Continuous { gap: c.spin }),
        SpinLock::TestAndTestAndSet => (moved(p), Spinning::PerRelease { per_release: 2.0 }),
        SpinLock::Queue => (if p > 1 { 2.0 } else { 0.0 }, Spinning::Local),
    };
    Hierarchical::new(p, spinning)
        .with_lock(Lock::new(lock.name(), held, transfers * c.transfer))
        .with_bus_service(c.transfer)
        .solve()
}

#[cfg(test)]
mod tests {
    use super::*;

    const COSTS: Costs = Costs {
        queue_op: 10.0,
        transfer: 10.0,
        spin: 30.0,
    };

    #[test]
    fn one_processor_model_is_the_sum_of_its_parts() {
        let p = thread_package(ReadyQueue::Central, 1, &COSTS, 300.0, 1000.0, 0.0).unwrap();
        assert!((1.0 / p.throughput - 1300.0).abs() < 1e-6);
        let l = spin_lock(SpinLock::TestAndSet, 1, &COSTS, 20.0).unwrap();
        assert!((1.0 / l.throughput - 20.0).abs() < 1e-9);
        // Without a bus (one CPU) the model still solves.
        let no_bus = Costs {
            transfer: 0.0,
            ..COSTS
        };
        assert!(thread_package(ReadyQueue::PerProcessor, 4, &no_bus, 300.0, 1000.0, 0.05).is_ok());
    }
}
