//! `local-freelist` — ALL89 §III-C: per-processor free lists without
//! locks, and a central, locked ready queue.
//!
//! Control blocks live on per-processor lists. A list that reaches the
//! threshold T gives half of itself (T/2 entries) to a locked global pool,
//! organized as a list of lists; an empty list takes one T/2-list back, so
//! the balancing cost is one locked pool access per T/2 free-list accesses
//! and the space overhead is O(P x T). Stacks are too large for that trade:
//! a processor keeps at most one free stack locally (the one the thread it
//! just finished used, handed straight to the next thread it starts) and
//! everything else goes through a locked global stack pool.
//!
//! Only the ready queue is locked on the common path: one lock per create
//! and one per finish + start.

use lock_api::RawMutex;
use symmetry_locks::Tas;

use super::{
    Dispatch, Env, Finished, LockedPool, NewestFirst, ProcStats, ReadyPool, Strategy, warm_stacks,
};
use crate::cb::{CbList, CbRef, Stack};

/// A processor's private free lists (ALL89 §III-C), used by
/// `local-freelist`, `idle-queue` and `local-readyq`.
pub struct LocalLists {
    pub(crate) proc: usize,
    cbs: CbList,
    stack: Option<Stack>,
}

impl std::fmt::Debug for LocalLists {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalLists")
            .field("proc", &self.proc)
            .field("cbs", &self.cbs.len())
            .field("stack", &self.stack.is_some())
            .finish()
    }
}

/// The locked global pools that balance [`LocalLists`].
pub(crate) struct Pools<L: RawMutex> {
    /// Lists of T/2 control blocks.
    cbs: lock_api::Mutex<L, Vec<CbList>>,
    stacks: lock_api::Mutex<L, Vec<Stack>>,
    /// Threshold T.
    threshold: usize,
}

impl<L: RawMutex> Pools<L> {
    pub(crate) fn new(threshold: usize) -> Self {
        Pools {
            cbs: lock_api::Mutex::new(Vec::new()),
            stacks: lock_api::Mutex::new(Vec::new()),
            threshold: threshold.max(2),
        }
    }

    pub(crate) fn new_local(&self, proc: usize) -> LocalLists {
        LocalLists {
            proc,
            cbs: CbList::new(),
            stack: None,
        }
    }

    pub(crate) fn warm(&self, env: &Env, cbs: usize, stacks: usize) {
        let half = (self.threshold / 2).max(1);
        let mut left = cbs;
        let mut lists = Vec::new();
        while left > 0 {
            let n = half.min(left);
            lists.push(super::warm_cbs(&env.alloc, n));
            left -= n;
        }
        self.cbs.lock().extend(lists);
        let s = warm_stacks(&env.alloc, stacks);
        self.stacks.lock().extend(s);
    }

    /// A free control block: local list, else a T/2-list from the pool,
    /// else the heap.
    #[inline(always)]
    pub(crate) fn alloc_cb(&self, env: &Env, cx: Option<&mut LocalLists>) -> CbRef {
        match cx {
            Some(l) => match l.cbs.pop_front() {
                Some(cb) => cb,
                None => self.refill(env, l),
            },
            None => self.alloc_cb_shared(env),
        }
    }

    #[cold]
    fn refill(&self, env: &Env, l: &mut LocalLists) -> CbRef {
        let list = self.cbs.lock().pop();
        if let Some(mut list) = list {
            l.cbs.append(&mut list);
            if let Some(cb) = l.cbs.pop_front() {
                return cb;
            }
        }
        env.alloc.fresh_cb()
    }

    #[cold]
    fn alloc_cb_shared(&self, env: &Env) -> CbRef {
        let mut pool = self.cbs.lock();
        while let Some(mut list) = pool.pop() {
            if let Some(cb) = list.pop_front() {
                if !list.is_empty() {
                    pool.push(list);
                }
                return cb;
            }
        }
        drop(pool);
        env.alloc.fresh_cb()
    }

    /// Frees a control block to the local list, moving half of it to the
    /// pool at the threshold.
    #[inline(always)]
    pub(crate) fn free_cb(&self, cx: Option<&mut LocalLists>, cb: CbRef) {
        match cx {
            Some(l) => {
                l.cbs.push_front(cb);
                if l.cbs.len() >= self.threshold {
                    self.spill(l);
                }
            }
            None => {
                let mut one = CbList::new();
                one.push_back(cb);
                self.cbs.lock().push(one);
            }
        }
    }

    #[cold]
    fn spill(&self, l: &mut LocalLists) {
        let half = l.cbs.split_front(self.threshold / 2);
        self.cbs.lock().push(half);
    }

    /// A stack for a starting thread: the local one, else the pool, else
    /// a fresh one (`None` if none could be had; see
    /// [`Allocator::fresh_stack`](super::Allocator::fresh_stack)).
    #[inline(always)]
    pub(crate) fn take_stack(&self, env: &Env, l: &mut LocalLists) -> Option<Stack> {
        match l.stack.take() {
            Some(s) => Some(s),
            None => self.take_stack_slow(env),
        }
    }

    #[cold]
    fn take_stack_slow(&self, env: &Env) -> Option<Stack> {
        let s = self.stacks.lock().pop();
        s.or_else(|| env.alloc.fresh_stack())
    }

    /// Frees a stack: kept locally if the local slot is empty.
    #[inline(always)]
    pub(crate) fn free_stack(&self, l: &mut LocalLists, s: Stack) {
        if l.stack.is_none() {
            l.stack = Some(s);
        } else {
            self.stacks.lock().push(s);
        }
    }

    /// Frees a finished thread into the local lists.
    #[inline(always)]
    pub(crate) fn finish(&self, l: &mut LocalLists, f: Finished) {
        self.free_stack(l, f.stack);
        self.free_cb(Some(l), f.cb);
    }

    /// Moves a processor's lists to the pools.
    pub(crate) fn retire(&self, mut l: LocalLists) {
        if !l.cbs.is_empty() {
            let list = std::mem::take(&mut l.cbs);
            self.cbs.lock().push(list);
        }
        if let Some(s) = l.stack.take() {
            self.stacks.lock().push(s);
        }
    }

    pub(crate) fn counts(&self) -> (u64, u64) {
        let cbs = self.cbs.lock().iter().map(|l| l.len() as u64).sum();
        (cbs, self.stacks.lock().len() as u64)
    }
}

/// ALL89 §III-C. See the module docs.
pub struct LocalFreelist<L: RawMutex = Tas, Q: ReadyPool = NewestFirst> {
    env: Env,
    ready: LockedPool<Q, L>,
    pools: Pools<L>,
}

impl<L: RawMutex, Q: ReadyPool> std::fmt::Debug for LocalFreelist<L, Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalFreelist").finish_non_exhaustive()
    }
}

impl<L: RawMutex + Send + Sync + 'static, Q: ReadyPool> Strategy for LocalFreelist<L, Q> {
    const NAME: &'static str = "local-freelist";
    type Local = LocalLists;

    fn new(env: Env) -> Self {
        let pools = Pools::new(env.threshold);
        LocalFreelist {
            env,
            ready: LockedPool::new(),
            pools,
        }
    }

    fn new_local(&self, proc: usize) -> LocalLists {
        self.pools.new_local(proc)
    }

    fn warm(&self, cbs: usize, stacks: usize) {
        self.pools.warm(&self.env, cbs, stacks);
    }

    #[inline(always)]
    fn create<I: FnOnce(CbRef)>(&self, cx: Option<&mut LocalLists>, init: I) {
        let cb = self.pools.alloc_cb(&self.env, cx);
        init(cb);
        self.ready.push(cb);
    }

    #[inline]
    fn ready(&self, _cx: Option<&mut LocalLists>, t: CbRef) {
        self.ready.push(t);
    }

    #[inline(always)]
    fn schedule(&self, cx: &mut LocalLists, done: Option<Finished>) -> Option<Dispatch> {
        if let Some(f) = done {
            self.pools.finish(cx, f);
        }
        let cb = self.ready.pop()?;
        let stack = if cb.is_started() {
            None
        } else {
            self.pools.take_stack(&self.env, cx)
        };
        let st = &self.env.stats[cx.proc];
        ProcStats::bump(&st.dequeues, 1);
        ProcStats::bump(&st.queues_examined, 1);
        Some(Dispatch { cb, stack })
    }

    #[inline(always)]
    fn has_ready(&self) -> bool {
        !self.ready.looks_empty()
    }

    fn alloc_cb(&self, cx: Option<&mut LocalLists>) -> CbRef {
        self.pools.alloc_cb(&self.env, cx)
    }

    fn release_cb(&self, cx: Option<&mut LocalLists>, cb: CbRef) {
        self.pools.free_cb(cx, cb)
    }

    fn retire_local(&self, cx: LocalLists) {
        self.pools.retire(cx)
    }

    fn free_counts(&self) -> (u64, u64) {
        self.pools.counts()
    }
}
