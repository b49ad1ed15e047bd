//! `single-lock` — ALL89 §III-A: the ready queue, the control-block free
//! list and the stack free list are central and guarded by one lock.
//!
//! Each Table I operation takes the lock once: *create* pops a control
//! block and pushes the new thread; *finish + start* pushes the finished
//! thread's control block and stack, pops the next ready thread and, if it
//! has no stack, pops one, all in one critical section. Low latency (one
//! lock per operation), but the whole thread-management path is serial.
//!
//! Idle processors check the ready queue's length mirror before taking the
//! lock, as the paper recommends.

use symmetry_locks::sync::{AtomicUsize, Ordering};

use lock_api::RawMutex;
use symmetry_locks::Tas;

use super::{
    Dispatch, Env, Finished, NewestFirst, ProcStats, ReadyPool, Strategy, warm_cbs, warm_stacks,
};
use crate::cb::{CbList, CbRef, Stack};

struct Central<Q> {
    ready: Q,
    cbs: CbList,
    stacks: Vec<Stack>,
}

/// ALL89 §III-A. See the module docs.
pub struct SingleLock<L: RawMutex = Tas, Q: ReadyPool = NewestFirst> {
    env: Env,
    central: lock_api::Mutex<L, Central<Q>>,
    /// Mirror of `central.ready.len()`, written under the lock.
    ready_len: AtomicUsize,
}

impl<L: RawMutex, Q: ReadyPool> std::fmt::Debug for SingleLock<L, Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SingleLock").finish_non_exhaustive()
    }
}

/// Per-processor state: just the processor's index.
#[derive(Debug)]
pub struct ProcIndex(pub(crate) usize);

impl<L: RawMutex + Send + Sync + 'static, Q: ReadyPool> Strategy for SingleLock<L, Q> {
    const NAME: &'static str = "single-lock";
    type Local = ProcIndex;

    fn new(env: Env) -> Self {
        SingleLock {
            env,
            central: lock_api::Mutex::new(Central {
                ready: Q::default(),
                cbs: CbList::new(),
                stacks: Vec::new(),
            }),
            ready_len: AtomicUsize::new(0),
        }
    }

    fn new_local(&self, proc: usize) -> ProcIndex {
        ProcIndex(proc)
    }

    fn warm(&self, cbs: usize, stacks: usize) {
        let mut l = warm_cbs(&self.env.alloc, cbs);
        let s = warm_stacks(&self.env.alloc, stacks);
        let mut c = self.central.lock();
        c.cbs.append(&mut l);
        c.stacks.extend(s);
    }

    #[inline(always)]
    fn create<I: FnOnce(CbRef)>(&self, _cx: Option<&mut ProcIndex>, init: I) {
        let mut c = self.central.lock();
        let cb = match c.cbs.pop_front() {
            Some(cb) => cb,
            None => self.env.alloc.fresh_cb(),
        };
        init(cb);
        c.ready.push(cb);
        // Relaxed: a hint for idle processors (see `LockedPool`).
        self.ready_len.store(c.ready.len(), Ordering::Relaxed);
    }

    #[inline]
    fn ready(&self, _cx: Option<&mut ProcIndex>, t: CbRef) {
        let mut c = self.central.lock();
        c.ready.push(t);
        // Relaxed: see `create`.
        self.ready_len.store(c.ready.len(), Ordering::Relaxed);
    }

    #[inline(always)]
    fn schedule(&self, cx: &mut ProcIndex, done: Option<Finished>) -> Option<Dispatch> {
        if done.is_none() && !self.has_ready() {
            return None;
        }
        let mut c = self.central.lock();
        if let Some(f) = done {
            c.cbs.push_front(f.cb);
            c.stacks.push(f.stack);
        }
        let cb = c.ready.pop()?;
        // Relaxed: see `create`.
        self.ready_len.store(c.ready.len(), Ordering::Relaxed);
        let stack = if cb.is_started() {
            None
        } else {
            c.stacks.pop().or_else(|| self.env.alloc.fresh_stack())
        };
        drop(c);
        let st = &self.env.stats[cx.0];
        ProcStats::bump(&st.dequeues, 1);
        ProcStats::bump(&st.queues_examined, 1);
        Some(Dispatch { cb, stack })
    }

    #[inline(always)]
    fn has_ready(&self) -> bool {
        // Relaxed: see `create`.
        self.ready_len.load(Ordering::Relaxed) != 0
    }

    fn alloc_cb(&self, _cx: Option<&mut ProcIndex>) -> CbRef {
        let cb = self.central.lock().cbs.pop_front();
        cb.unwrap_or_else(|| self.env.alloc.fresh_cb())
    }

    fn release_cb(&self, _cx: Option<&mut ProcIndex>, cb: CbRef) {
        self.central.lock().cbs.push_front(cb);
    }

    fn retire_local(&self, _cx: ProcIndex) {}

    fn free_counts(&self) -> (u64, u64) {
        let c = self.central.lock();
        (c.cbs.len() as u64, c.stacks.len() as u64)
    }
}
