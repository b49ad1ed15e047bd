//! `local-readyq` — ALL89 §III-E (and PRESTO §3.4's LRQ): per-processor
//! ready queues, each behind its own spin lock, plus the per-processor
//! free lists of `local-freelist`.
//!
//! A thread made ready (created or signalled) goes to a queue chosen
//! uniformly at random, so no queue becomes a central one. A processor
//! looking for work scans the queues starting with its own; each queue it
//! looks at counts as *examined*, up to and including the one it takes a
//! thread from. Those counts are what ALL89 equation (3.1), E(r, q),
//! predicts, and `tm-queue-search` compares them.
//!
//! Emptiness is checked on each queue's length mirror before its lock is
//! taken, so a scan over empty queues takes no lock at all.
//!
//! The number of queues defaults to the number of processors (as in the
//! paper) and can be set apart from it ([`crate::Builder::queues`]).

use symmetry_locks::sync::{AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use lock_api::RawMutex;
use symmetry_locks::Tas;

use super::local_freelist::{LocalLists, Pools};
use super::{
    Dispatch, Env, Finished, LockedPool, NewestFirst, ProcStats, ReadyPool, Rng, Strategy,
};
use crate::cb::CbRef;

/// ALL89 §III-E. See the module docs.
pub struct LocalReadyq<L: RawMutex = Tas, Q: ReadyPool = NewestFirst> {
    env: Env,
    queues: Box<[CachePadded<LockedPool<Q, L>>]>,
    pools: Pools<L>,
    /// Round-robin placement for threads made ready from outside the
    /// runtime (which have no processor-local generator).
    outside: AtomicUsize,
}

impl<L: RawMutex, Q: ReadyPool> std::fmt::Debug for LocalReadyq<L, Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalReadyq")
            .field("queues", &self.queues.len())
            .finish_non_exhaustive()
    }
}

/// Per-processor state of `local-readyq`.
#[derive(Debug)]
pub struct ReadyqLocal {
    lists: LocalLists,
    rng: Rng,
    /// The queue this processor scans first.
    home: usize,
}

impl<L: RawMutex + Send + Sync + 'static, Q: ReadyPool> LocalReadyq<L, Q> {
    #[inline(always)]
    fn place(&self, cx: Option<&mut ReadyqLocal>, t: CbRef) {
        let n = self.queues.len();
        let q = match cx {
            Some(l) if Q::LOCAL_FIRST => l.home,
            Some(l) => l.rng.below(n as u64) as usize,
            // Relaxed: only spreads outside submissions; no ordering.
            None => self.outside.fetch_add(1, Ordering::Relaxed) % n,
        };
        self.queues[q].push(t);
    }
}

impl<L: RawMutex + Send + Sync + 'static, Q: ReadyPool> Strategy for LocalReadyq<L, Q> {
    const NAME: &'static str = "local-readyq";
    type Local = ReadyqLocal;

    fn new(env: Env) -> Self {
        let n = env.queues.max(1);
        LocalReadyq {
            queues: (0..n)
                .map(|_| CachePadded::new(LockedPool::new()))
                .collect(),
            pools: Pools::new(env.threshold),
            outside: AtomicUsize::new(0),
            env,
        }
    }

    fn new_local(&self, proc: usize) -> ReadyqLocal {
        ReadyqLocal {
            lists: self.pools.new_local(proc),
            rng: Rng::new(self.env.seed ^ (proc as u64).wrapping_mul(0x9E37_79B9)),
            home: proc % self.queues.len(),
        }
    }

    fn warm(&self, cbs: usize, stacks: usize) {
        self.pools.warm(&self.env, cbs, stacks);
    }

    #[inline(always)]
    fn create<I: FnOnce(CbRef)>(&self, mut cx: Option<&mut ReadyqLocal>, init: I) {
        let cb = self
            .pools
            .alloc_cb(&self.env, cx.as_deref_mut().map(|l| &mut l.lists));
        init(cb);
        self.place(cx, cb);
    }

    #[inline]
    fn ready(&self, cx: Option<&mut ReadyqLocal>, t: CbRef) {
        self.place(cx, t);
    }

    #[inline(always)]
    fn schedule(&self, cx: &mut ReadyqLocal, done: Option<Finished>) -> Option<Dispatch> {
        if let Some(f) = done {
            self.pools.finish(&mut cx.lists, f);
        }
        let n = self.queues.len();
        let mut idx = cx.home;
        for examined in 1..=n {
            if let Some(cb) = self.queues[idx].pop() {
                let stack = if cb.is_started() {
                    None
                } else {
                    self.pools.take_stack(&self.env, &mut cx.lists)
                };
                let st = &self.env.stats[cx.lists.proc];
                ProcStats::bump(&st.dequeues, 1);
                ProcStats::bump(&st.queues_examined, examined as u64);
                return Some(Dispatch { cb, stack });
            }
            idx += 1;
            if idx == n {
                idx = 0;
            }
        }
        ProcStats::bump(&self.env.stats[cx.lists.proc].empty_scans, 1);
        None
    }

    #[inline]
    fn has_ready(&self) -> bool {
        self.queues.iter().any(|q| !q.looks_empty())
    }

    fn alloc_cb(&self, cx: Option<&mut ReadyqLocal>) -> CbRef {
        self.pools.alloc_cb(&self.env, cx.map(|l| &mut l.lists))
    }

    fn release_cb(&self, cx: Option<&mut ReadyqLocal>, cb: CbRef) {
        self.pools.free_cb(cx.map(|l| &mut l.lists), cb)
    }

    fn retire_local(&self, cx: ReadyqLocal) {
        self.pools.retire(cx.lists)
    }

    fn free_counts(&self) -> (u64, u64) {
        self.pools.counts()
    }
}
