//! A reusable barrier for user threads.
//!
//! # State
//!
//! Under a `symmetry_locks::Tas` spin lock: `arrived`, the parties that
//! have arrived in the current generation and wait, the list of their
//! `Waiter` nodes (on their stacks), and `generation`, the number of
//! completed generations.
//!
//! # Transitions
//!
//! * An arrival that is not the last: `arrived += 1`, push its node,
//!   release the spin lock, park until popped.
//! * The last arrival (the leader): `arrived = 0`, `generation += 1`, take
//!   the whole list, release the spin lock, wake every node.
//!
//! The barrier is reusable at once: the leader empties the list before
//! anyone can arrive for the next generation, and each waiter is released
//! by its own node, not by re-reading shared state, so a fast thread that
//! re-enters the barrier cannot confuse a slow one of the previous
//! generation. Memory: each arrival's writes are published to the leader
//! by the spin lock, and the leader's to each waiter by the Release store
//! of its wake (paired with the Acquire load in `Waiter::wait`).

use std::fmt;

use symmetry_locks::Tas;

use super::mutex::not_in_runtime;
use super::wait_queue::{WOKEN, WaitList, Waiter};
use crate::NotInRuntime;
use crate::runtime::context::current_cb;

struct State {
    /// Waiting arrivals of the current generation.
    arrived: usize,
    /// Completed generations.
    generation: u64,
    /// The nodes of the waiting arrivals.
    waiters: WaitList,
}

/// A barrier for `n` user threads: each [`wait`](Barrier::wait) blocks
/// (relinquishing the processor) until `n` threads have called it, then
/// all return, one of them as the leader. Reusable: the next `n` calls
/// form the next generation.
///
/// Only the `n`-th arrival returns without blocking, so only it may be a
/// thread that is not a user thread; an earlier arrival from such a
/// thread gets [`NotInRuntime`] from [`Barrier::wait_checked`] (and is not
/// counted), or a panic from [`Barrier::wait`].
///
/// ```
/// use std::sync::Arc;
/// use symmetry_threads::sync::Barrier;
/// use symmetry_threads::{IdleQueue, Runtime};
///
/// let rt: Runtime<IdleQueue> = Runtime::new(2).unwrap();
/// let b = Arc::new(Barrier::new(4));
/// let hs: Vec<_> = (0..4)
///     .map(|_| {
///         let b = Arc::clone(&b);
///         rt.spawn(move || b.wait().is_leader())
///     })
///     .collect();
/// let mut leaders = 0;
/// for h in hs {
///     leaders += h.join().unwrap() as usize;
/// }
/// assert_eq!(leaders, 1);
/// ```
pub struct Barrier {
    n: usize,
    state: lock_api::Mutex<Tas, State>,
}

/// What [`Barrier::wait`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierWaitResult {
    leader: bool,
    generation: u64,
}

impl BarrierWaitResult {
    /// Whether this thread was the leader of its generation (the last to
    /// arrive; exactly one per generation).
    pub fn is_leader(&self) -> bool {
        self.leader
    }

    /// The generation this wait completed, counting from 0.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

impl Barrier {
    /// A barrier for `n` threads (`0` behaves as `1`: every call returns
    /// at once as the leader).
    pub const fn new(n: usize) -> Self {
        Barrier {
            n,
            state: lock_api::Mutex::new(State {
                arrived: 0,
                generation: 0,
                waiters: WaitList::new(),
            }),
        }
    }

    /// Blocks the calling user thread until `n` threads have arrived.
    ///
    /// # Panics
    /// If the caller is not a user thread and is not the last arrival (see
    /// the type docs); [`Barrier::wait_checked`] returns the error instead.
    #[track_caller]
    pub fn wait(&self) -> BarrierWaitResult {
        match self.wait_checked() {
            Ok(r) => r,
            Err(e) => not_in_runtime(e),
        }
    }

    /// [`Barrier::wait`] that returns [`NotInRuntime`] instead of blocking
    /// outside a user thread (the call then does not count as an arrival).
    pub fn wait_checked(&self) -> Result<BarrierWaitResult, NotInRuntime> {
        let mut st = self.state.lock();
        let generation = st.generation;
        if st.arrived + 1 >= self.n {
            st.arrived = 0;
            st.generation = generation.wrapping_add(1);
            let all = st.waiters.take();
            drop(st);
            all.wake_all(WOKEN);
            return Ok(BarrierWaitResult {
                leader: true,
                generation,
            });
        }
        let Some(me) = current_cb() else {
            return Err(NotInRuntime {
                op: "Barrier::wait before the last party arrived",
            });
        };
        let waiter = Waiter::new(me);
        st.arrived += 1;
        // SAFETY: a fresh node, kept in this frame until `wait` below has
        // seen it popped.
        unsafe { st.waiters.push_back(&waiter) };
        drop(st);
        waiter.wait();
        Ok(BarrierWaitResult {
            leader: false,
            generation,
        })
    }

    /// The number of parties.
    pub fn parties(&self) -> usize {
        self.n
    }

    /// Parties that have arrived at the current generation and wait.
    pub fn waiting(&self) -> usize {
        self.state.lock().arrived
    }
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state.lock();
        f.debug_struct("Barrier")
            .field("parties", &self.n)
            .field("arrived", &st.arrived)
            .field("generation", &st.generation)
            .finish()
    }
}
