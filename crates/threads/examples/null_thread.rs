//! Times create + start + finish of a null thread on one processor for
//! every built-in strategy (ALL89 Table III's chain, one chain): a loop
//! for profiling the runtime's hot path under `perf` or `callgrind`.
//! The measured comparison with tokio is `symmetry run peer-threads`.
//!
//! ```text
//! cargo run --release -p symmetry-threads --example null_thread [THREADS]
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use symmetry_threads::{Builder, DefaultProcessor, Strategy, spawn_detached_here};

static DONE: AtomicBool = AtomicBool::new(false);

/// One link of the chain: spawns the next link, then finishes.
fn link<S: Strategy>(left: u64) {
    if left > 1 {
        spawn_detached_here::<S, DefaultProcessor, _>(move || link::<S>(left - 1))
            .expect("runs on a processor of an `S` runtime");
    } else {
        // Release: pairs with the Acquire load in `chain`.
        DONE.store(true, Ordering::Release);
    }
}

fn chain<S: Strategy>(name: &str, threads: u64) {
    DONE.store(false, Ordering::Relaxed);
    let mut rt = Builder::<S>::default()
        .processors(1)
        .warm(4, 2)
        .build()
        .expect("a one-processor runtime");
    let t0 = Instant::now();
    rt.handle().spawn_detached(move || link::<S>(threads));
    while !DONE.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_micros(100));
    }
    let ns = t0.elapsed().as_nanos() as f64 / threads as f64;
    rt.shutdown();
    println!("{name:>15}: {ns:6.2} ns per null thread");
}

macro_rules! each {
    ($($name:literal => $t:ty,)*) => {
        fn all(threads: u64) {
            $(chain::<$t>($name, threads);)*
        }
    };
}
symmetry_threads::for_each_strategy!(each);

fn main() {
    let threads = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("THREADS is a number"))
        .unwrap_or(10_000_000);
    all(threads);
}
