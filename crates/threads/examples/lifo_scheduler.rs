//! A user-written scheduler (PRESTO's scheduler object, Faust & Levy 1990
//! §2): a LIFO ready pool, written outside the crate against its public
//! API, plugged into the `local-readyq` strategy at compile time.
//!
//! ```text
//! cargo run --release -p symmetry-threads --example lifo_scheduler
//! ```
//!
//! The pool is a stack threaded through the control blocks' intrusive link
//! (`CbRef::next` / `CbRef::set_next`): no allocation, two pointer writes
//! per push or pop. The strategy guards it with its spin lock, so the pool
//! is plain single-threaded code.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use symmetry_locks::Tas;
use symmetry_threads::{CbRef, LocalReadyq, ReadyPool, Runtime};

/// Last in, first out. Invariant: `top` heads a chain of exactly `len`
/// control blocks linked by `next`, all owned by this pool.
#[derive(Debug, Default)]
struct Lifo {
    top: Option<CbRef>,
    len: usize,
}

impl ReadyPool for Lifo {
    #[inline(always)]
    fn push(&mut self, t: CbRef) {
        // The pool owns `t` until `pop` hands it out, so its link is ours.
        t.set_next(self.top);
        self.top = Some(t);
        self.len += 1;
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<CbRef> {
        let t = self.top?;
        self.top = t.next();
        self.len -= 1;
        Some(t)
    }

    #[inline(always)]
    fn len(&self) -> usize {
        self.len
    }
}

/// `local-readyq` (ALL89 §III-E) with a TAS lock per queue and our pool.
type LifoRuntime = Runtime<LocalReadyq<Tas, Lifo>>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. The discipline is visible on one processor with one queue: the
    //    driver readies five threads while it holds the processor, then
    //    waits; they run last-in first-out.
    let rt: LifoRuntime = Runtime::builder().processors(1).queues(1).build()?;
    let h = rt.handle();
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = Arc::clone(&order);
    rt.block_on(move || {
        let kids: Vec<_> = (1..=5)
            .map(|i| {
                let o = Arc::clone(&o);
                h.spawn(move || o.lock().unwrap().push(i))
            })
            .collect();
        for k in kids {
            k.join().unwrap();
        }
    })?;
    let order = order.lock().unwrap().clone();
    println!("created 1..=5, ran in order {order:?}");
    assert_eq!(order, [5, 4, 3, 2, 1], "LIFO order");
    drop(rt);

    // 2. The same pool under load: a parallel fan-out on every CPU.
    let procs = std::thread::available_parallelism().map_or(2, |n| n.get());
    let rt: LifoRuntime = Runtime::new(procs)?;
    let h = rt.handle();
    let n = 100_000u64;
    let t = Instant::now();
    let sum = rt.block_on(move || {
        let kids: Vec<_> = (0..n).map(|i| h.spawn(move || i)).collect();
        kids.into_iter().map(|k| k.join().unwrap()).sum::<u64>()
    })?;
    let elapsed = t.elapsed();
    assert_eq!(sum, n * (n - 1) / 2);
    let s = rt.stats();
    println!(
        "{n} threads on {procs} processors with the LIFO pool: {:.0} ns/thread, \
         {} dequeues, {:.2} queues examined per dequeue",
        elapsed.as_nanos() as f64 / n as f64,
        s.dequeues,
        s.queues_examined as f64 / s.dequeues.max(1) as f64
    );
    Ok(())
}
