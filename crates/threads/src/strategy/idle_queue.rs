//! `idle-queue` — ALL89 §III-D: a central queue of idle processors beside
//! the central ready queue, and per-processor free lists.
//!
//! A processor that finds no ready thread preallocates what a new thread
//! needs from it (a stack, bound from its local slot or the pool), puts
//! itself on the idle queue and spins on its *own* flag word, so idle
//! processors cause no coherence traffic on shared data. Creating or
//! signalling a thread first checks the idle queue: if a processor waits
//! there, the thread is handed straight to it (its flag word receives the
//! control block); otherwise the thread goes on the ready queue. Work
//! searches for processors instead of processors searching for work.
//!
//! The ready queue and the idle queue share one lock: a processor moves
//! from "found the ready queue empty" to "queued as idle" atomically, so a
//! thread made ready in between cannot be missed.
//!
//! Flag word of processor `p` (`slots[p].word`):
//!
//! ```text
//! WAITING --handoff (swap cb)--> cb pointer --taken by p--> (p leaves the idle queue)
//! WAITING --p gives up spinning (CAS)--> SLEEPING --handoff (swap cb, then unpark p)--> cb pointer
//! WAITING/SLEEPING --shutdown (swap EXIT, unpark)--> EXIT
//! ```
//!
//! An idle processor spins for `idle_spins` polls of its word, then parks
//! in the kernel, so an idle runtime uses no CPU.

use std::collections::VecDeque;
use std::sync::OnceLock;
use symmetry_locks::sync::{AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use lock_api::RawMutex;
use symmetry_locks::Tas;

use super::local_freelist::{LocalLists, Pools};
use super::{Dispatch, Env, Finished, Idle, NewestFirst, ProcStats, ReadyPool, Strategy};
use crate::cb::CbRef;

const WAITING: usize = 0;
const SLEEPING: usize = 1;
const EXIT: usize = 2;

struct Slot {
    /// `WAITING`, `SLEEPING`, `EXIT`, or the address of a handed-off cb.
    word: AtomicUsize,
    /// The processor's OS thread, for unpark.
    thread: OnceLock<std::thread::Thread>,
}

struct Central<Q> {
    ready: Q,
    idle: VecDeque<usize>,
}

/// ALL89 §III-D. See the module docs.
pub struct IdleQueue<L: RawMutex = Tas, Q: ReadyPool = NewestFirst> {
    env: Env,
    central: lock_api::Mutex<L, Central<Q>>,
    /// Mirror of the ready queue's length, written under the lock.
    ready_len: AtomicUsize,
    slots: Box<[CachePadded<Slot>]>,
    pools: Pools<L>,
}

impl<L: RawMutex, Q: ReadyPool> std::fmt::Debug for IdleQueue<L, Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdleQueue").finish_non_exhaustive()
    }
}

/// Per-processor state of `idle-queue`.
#[derive(Debug)]
pub struct IdleLocal {
    lists: LocalLists,
}

impl<L: RawMutex + Send + Sync + 'static, Q: ReadyPool> IdleQueue<L, Q> {
    /// Hands `t` to an idle processor, or queues it as ready.
    #[inline(always)]
    fn make_ready(&self, t: CbRef) {
        let mut c = self.central.lock();
        match c.idle.pop_front() {
            Some(p) => {
                drop(c);
                self.hand_off(p, t);
            }
            None => {
                c.ready.push(t);
                // Relaxed: a hint (see `LockedPool`).
                self.ready_len.store(c.ready.len(), Ordering::Relaxed);
            }
        }
    }

    #[inline(always)]
    fn hand_off(&self, p: usize, t: CbRef) {
        let slot = &self.slots[p];
        // Release: publishes the initialized control block to `p`, whose
        // Acquire load in `idle` pairs with it. Acquire: pairs with `p`'s
        // SLEEPING CAS so that `p` is known to be (about to be) parked.
        let prev = slot.word.swap(t.as_ptr() as usize, Ordering::AcqRel);
        if prev == SLEEPING
            && let Some(th) = slot.thread.get()
        {
            th.unpark();
        }
    }

    #[inline(always)]
    fn dispatch(&self, cx: &mut IdleLocal, cb: CbRef, examined: u64) -> Dispatch {
        let stack = if cb.is_started() {
            None
        } else {
            self.pools.take_stack(&self.env, &mut cx.lists)
        };
        let st = &self.env.stats[cx.lists.proc];
        ProcStats::bump(&st.dequeues, 1);
        ProcStats::bump(&st.queues_examined, examined);
        Dispatch { cb, stack }
    }
}

impl<L: RawMutex + Send + Sync + 'static, Q: ReadyPool> Strategy for IdleQueue<L, Q> {
    const NAME: &'static str = "idle-queue";
    const OWN_IDLE: bool = true;
    type Local = IdleLocal;

    fn new(env: Env) -> Self {
        IdleQueue {
            central: lock_api::Mutex::new(Central {
                ready: Q::default(),
                idle: VecDeque::with_capacity(env.processors),
            }),
            ready_len: AtomicUsize::new(0),
            slots: (0..env.processors)
                .map(|_| {
                    CachePadded::new(Slot {
                        word: AtomicUsize::new(WAITING),
                        thread: OnceLock::new(),
                    })
                })
                .collect(),
            pools: Pools::new(env.threshold),
            env,
        }
    }

    fn new_local(&self, proc: usize) -> IdleLocal {
        // Called on the processor's own OS thread.
        let _ = self.slots[proc].thread.set(std::thread::current());
        IdleLocal {
            lists: self.pools.new_local(proc),
        }
    }

    fn warm(&self, cbs: usize, stacks: usize) {
        self.pools.warm(&self.env, cbs, stacks);
    }

    #[inline(always)]
    fn create<I: FnOnce(CbRef)>(&self, cx: Option<&mut IdleLocal>, init: I) {
        let cb = self.pools.alloc_cb(&self.env, cx.map(|l| &mut l.lists));
        init(cb);
        self.make_ready(cb);
    }

    #[inline]
    fn ready(&self, _cx: Option<&mut IdleLocal>, t: CbRef) {
        self.make_ready(t);
    }

    #[inline(always)]
    fn schedule(&self, cx: &mut IdleLocal, done: Option<Finished>) -> Option<Dispatch> {
        if let Some(f) = done {
            self.pools.finish(&mut cx.lists, f);
        }
        let me = cx.lists.proc;
        let mut c = self.central.lock();
        if let Some(cb) = c.ready.pop() {
            // Relaxed: a hint (see `LockedPool`).
            self.ready_len.store(c.ready.len(), Ordering::Relaxed);
            drop(c);
            return Some(self.dispatch(cx, cb, 1));
        }
        // Relaxed: the shutdown flag is set before `wake_all` takes this
        // lock, and we hold it, so the lock orders the two.
        if self.env.shutdown.load(Ordering::Relaxed) {
            drop(c);
            self.slots[me].word.store(EXIT, Ordering::Relaxed);
            return None;
        }
        // Relaxed: our own word; the lock release below publishes it to
        // any creator that pops us from the idle queue.
        self.slots[me].word.store(WAITING, Ordering::Relaxed);
        c.idle.push_back(me);
        drop(c);
        // Preallocate the stack the next thread will need, off the
        // critical path.
        if let Some(s) = self.pools.take_stack(&self.env, &mut cx.lists) {
            self.pools.free_stack(&mut cx.lists, s);
        }
        None
    }

    #[inline]
    fn has_ready(&self) -> bool {
        // Relaxed: a hint.
        self.ready_len.load(Ordering::Relaxed) != 0
    }

    fn idle(&self, cx: &mut IdleLocal) -> Idle {
        let slot = &self.slots[cx.lists.proc];
        let mut spins = 0u32;
        loop {
            // Acquire: pairs with the Release swap in `hand_off`, making
            // the handed-off control block's contents visible.
            let w = slot.word.load(Ordering::Acquire);
            if w == EXIT {
                return Idle::Exit;
            }
            if w > EXIT {
                // SAFETY: non-sentinel values are `CbRef` addresses
                // written by `hand_off`; control blocks are type-stable.
                let cb = unsafe { CbRef::from_addr(w) };
                return Idle::Run(self.dispatch(cx, cb, 1));
            }
            if w == WAITING && spins < self.env.idle_spins {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            if w == WAITING {
                // AcqRel: Release pairs with the creator's Acquire swap
                // (it then knows to unpark us); failure means a handoff
                // arrived, re-read it.
                if slot
                    .word
                    .compare_exchange(WAITING, SLEEPING, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    continue;
                }
                ProcStats::bump(&self.env.stats[cx.lists.proc].parks, 1);
            }
            // SLEEPING: park until the word changes (park may wake
            // spuriously; the loop re-reads the word).
            std::thread::park();
        }
    }

    fn wake_all(&self) {
        let mut c = self.central.lock();
        let idle: Vec<usize> = c.idle.drain(..).collect();
        drop(c);
        for p in idle {
            let slot = &self.slots[p];
            // Release/Acquire as in `hand_off`.
            if slot.word.swap(EXIT, Ordering::AcqRel) == SLEEPING
                && let Some(th) = slot.thread.get()
            {
                th.unpark();
            }
        }
    }

    fn alloc_cb(&self, cx: Option<&mut IdleLocal>) -> CbRef {
        self.pools.alloc_cb(&self.env, cx.map(|l| &mut l.lists))
    }

    fn release_cb(&self, cx: Option<&mut IdleLocal>, cb: CbRef) {
        self.pools.free_cb(cx.map(|l| &mut l.lists), cb)
    }

    fn retire_local(&self, cx: IdleLocal) {
        self.pools.retire(cx.lists)
    }

    fn free_counts(&self) -> (u64, u64) {
        self.pools.counts()
    }
}
