//! `multi-lock` — ALL89 §III-B: the same central structures as
//! `single-lock`, each behind its own lock.
//!
//! *create* locks the control-block free list, then the ready queue;
//! *finish + start* locks the stack free list and the control-block free
//! list to free, the ready queue to dequeue and, for a thread that has not
//! started, the stack free list again. More lock acquisitions per thread
//! (higher latency) but shorter, separate critical sections (higher
//! throughput).

use lock_api::RawMutex;
use symmetry_locks::Tas;

use super::single_lock::ProcIndex;
use super::{
    Dispatch, Env, Finished, LockedPool, NewestFirst, ProcStats, ReadyPool, Strategy, warm_cbs,
    warm_stacks,
};
use crate::cb::{CbList, CbRef, Stack};

/// ALL89 §III-B. See the module docs.
pub struct MultiLock<L: RawMutex = Tas, Q: ReadyPool = NewestFirst> {
    env: Env,
    ready: LockedPool<Q, L>,
    cbs: lock_api::Mutex<L, CbList>,
    stacks: lock_api::Mutex<L, Vec<Stack>>,
}

impl<L: RawMutex, Q: ReadyPool> std::fmt::Debug for MultiLock<L, Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLock").finish_non_exhaustive()
    }
}

impl<L: RawMutex + Send + Sync + 'static, Q: ReadyPool> Strategy for MultiLock<L, Q> {
    const NAME: &'static str = "multi-lock";
    type Local = ProcIndex;

    fn new(env: Env) -> Self {
        MultiLock {
            env,
            ready: LockedPool::new(),
            cbs: lock_api::Mutex::new(CbList::new()),
            stacks: lock_api::Mutex::new(Vec::new()),
        }
    }

    fn new_local(&self, proc: usize) -> ProcIndex {
        ProcIndex(proc)
    }

    fn warm(&self, cbs: usize, stacks: usize) {
        let mut l = warm_cbs(&self.env.alloc, cbs);
        self.cbs.lock().append(&mut l);
        let s = warm_stacks(&self.env.alloc, stacks);
        self.stacks.lock().extend(s);
    }

    #[inline(always)]
    fn create<I: FnOnce(CbRef)>(&self, cx: Option<&mut ProcIndex>, init: I) {
        let cb = self.alloc_cb(cx);
        init(cb);
        self.ready.push(cb);
    }

    #[inline]
    fn ready(&self, _cx: Option<&mut ProcIndex>, t: CbRef) {
        self.ready.push(t);
    }

    #[inline(always)]
    fn schedule(&self, cx: &mut ProcIndex, done: Option<Finished>) -> Option<Dispatch> {
        if let Some(f) = done {
            self.stacks.lock().push(f.stack);
            self.cbs.lock().push_front(f.cb);
        }
        let cb = self.ready.pop()?;
        let stack = if cb.is_started() {
            None
        } else {
            let s = self.stacks.lock().pop();
            s.or_else(|| self.env.alloc.fresh_stack())
        };
        let st = &self.env.stats[cx.0];
        ProcStats::bump(&st.dequeues, 1);
        ProcStats::bump(&st.queues_examined, 1);
        Some(Dispatch { cb, stack })
    }

    #[inline(always)]
    fn has_ready(&self) -> bool {
        !self.ready.looks_empty()
    }

    #[inline]
    fn alloc_cb(&self, _cx: Option<&mut ProcIndex>) -> CbRef {
        let cb = self.cbs.lock().pop_front();
        match cb {
            Some(cb) => cb,
            None => self.env.alloc.fresh_cb(),
        }
    }

    fn release_cb(&self, _cx: Option<&mut ProcIndex>, cb: CbRef) {
        self.cbs.lock().push_front(cb);
    }

    fn retire_local(&self, _cx: ProcIndex) {}

    fn free_counts(&self) -> (u64, u64) {
        (
            self.cbs.lock().len() as u64,
            self.stacks.lock().len() as u64,
        )
    }
}
