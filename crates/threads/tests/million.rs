//! A million user threads alive at once, under every strategy: all
//! blocked on one barrier, then all released. Each runtime runs alone
//! (five million-thread runtimes side by side would not fit in memory).
//!
//! Also checks what the slabs promise: kernel mappings grow with slabs,
//! not with threads, and the memory of a blocked thread stays small.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use symmetry_threads::stack::{self, GuardMode};
use symmetry_threads::sync::Barrier;
use symmetry_threads::{
    IdleQueue, LocalFreelist, LocalReadyq, MultiLock, Runtime, SingleLock, Strategy,
};

/// Threads per run (`SYMMETRY_MILLION_N` overrides, for a quick local try).
fn threads() -> usize {
    std::env::var("SYMMETRY_MILLION_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

/// Resident bytes of this process now.
fn rss() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

struct Seen {
    rss_per_thread: f64,
    mappings_added: usize,
    slabs_added: usize,
}

fn million<S: Strategy>(n: usize, procs: usize) -> Seen {
    let mut rt: Runtime<S> = Runtime::builder()
        // Small stacks: what a blocked thread touches does not depend on
        // the size, but the address space does (n x stack).
        .stack_size(32 * 1024)
        .processors(procs)
        .build()
        .unwrap();
    let h = rt.handle();
    let base_rss = rss();
    let base_maps = stack::kernel_mappings().unwrap();
    let base_slabs = stack::slabs();
    let barrier = Arc::new(Barrier::new(n + 1));
    let done = Arc::new(AtomicUsize::new(0));
    for _ in 0..n {
        let (b, d) = (Arc::clone(&barrier), Arc::clone(&done));
        h.spawn_detached(move || {
            b.wait();
            d.fetch_add(1, Ordering::Relaxed);
        });
    }
    let mut stall = common::Stall::new();
    while barrier.waiting() < n {
        let w = barrier.waiting();
        stall.check(w, || format!("only {w} of {n} threads blocked"));
        std::thread::sleep(Duration::from_millis(5));
    }
    let seen = Seen {
        rss_per_thread: rss().saturating_sub(base_rss) as f64 / n as f64,
        mappings_added: stack::kernel_mappings().unwrap().saturating_sub(base_maps),
        slabs_added: stack::slabs() - base_slabs,
    };
    // The last party: an OS thread may arrive last without blocking.
    barrier.wait();
    let mut stall = common::Stall::new();
    while done.load(Ordering::Relaxed) < n {
        let d = done.load(Ordering::Relaxed);
        stall.check(d, || format!("{d} of {n} released threads finished"));
        std::thread::sleep(Duration::from_millis(5));
    }
    let report = rt.shutdown();
    assert!(report.nothing_leaked(), "{report:?}");
    seen
}

/// One million-thread runtime at a time, whatever the test harness does.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn check<S: Strategy>(name: &str) {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let n = threads();
    for procs in [1, 2] {
        let t = Instant::now();
        let s = million::<S>(n, procs);
        eprintln!(
            "{name} P={procs}: {n} blocked threads in {:.1} s, {:.0} bytes resident per thread, \
             {} mappings and {} slabs added",
            t.elapsed().as_secs_f64(),
            s.rss_per_thread,
            s.mappings_added,
            s.slabs_added
        );
        assert!(
            s.rss_per_thread <= 8192.0,
            "{name}: {} bytes per blocked thread",
            s.rss_per_thread
        );
        if stack::guard_mode() == GuardMode::Madvise {
            // One mapping per slab, plus allocator arenas and the like.
            assert!(
                s.mappings_added <= s.slabs_added + 64,
                "{name}: {} mappings for {} slabs",
                s.mappings_added,
                s.slabs_added
            );
        }
    }
}

#[test]
fn a_million_blocked_threads_single_lock() {
    check::<SingleLock>("single-lock");
}

#[test]
fn a_million_blocked_threads_multi_lock() {
    check::<MultiLock>("multi-lock");
}

#[test]
fn a_million_blocked_threads_local_freelist() {
    check::<LocalFreelist>("local-freelist");
}

#[test]
fn a_million_blocked_threads_idle_queue() {
    check::<IdleQueue>("idle-queue");
}

#[test]
fn a_million_blocked_threads_local_readyq() {
    check::<LocalReadyq>("local-readyq");
}
