//! SMARTQ §4.4's applications, Cholesky and Quicksort, with one lock as
//! their only synchronization: results are right with every lock kind
//! (including one whose guard is not `Send`) and 1, 2 or 4 workers, and
//! the edge cases neither panic nor hang. Sizes are small; nothing here
//! asserts a time.

use std::time::Instant;

use lock_api::RawMutex;
use symmetry_locks::{Mcs, Tas, TasNp};
use symmetry_workloads::cholesky::{self, Cholesky};
use symmetry_workloads::quicksort::{self, CUTOFF, Quicksort};

/// Runs `f` on `threads` scoped threads at once.
fn on_threads(threads: usize, f: impl Fn() + Sync) {
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(&f);
        }
    });
}

fn lock_name<R>() -> &'static str {
    std::any::type_name::<R>()
}

/// Factors an `n x n` matrix in blocks of `block` with `threads` workers
/// and checks it.
fn cholesky_case<R: RawMutex + Send + Sync>(n: usize, block: usize, threads: usize) {
    let what = format!(
        "cholesky n={n} block={block} threads={threads} lock={}",
        lock_name::<R>()
    );
    let c = Cholesky::<R>::new(n, block, 7 + n as u64);
    if n > 0 {
        assert!(c.verify().is_err(), "{what}: verify before work");
    }
    on_threads(threads, || c.work());
    c.verify().unwrap_or_else(|e| panic!("{what}: {e}"));
    let taken = c.lock_acquisitions();
    // Each task: one pop and one completion; each worker: a last look.
    assert!(
        taken >= 2 * c.tasks() + threads as u64,
        "{what}: {taken} acquisitions"
    );
    // One value is one run: work again returns at once.
    c.work();
    assert_eq!(c.lock_acquisitions(), taken + 1, "{what}: second work");
    c.verify()
        .unwrap_or_else(|e| panic!("{what}: after second work: {e}"));
}

/// Sorts `q` with `threads` workers and checks it.
fn quicksort_run<R: RawMutex + Send + Sync>(q: Quicksort<R>, threads: usize, what: &str) {
    let what = format!("{what} threads={threads} lock={}", lock_name::<R>());
    on_threads(threads, || q.work());
    q.verify().unwrap_or_else(|e| panic!("{what}: {e}"));
    let taken = q.lock_acquisitions();
    assert!(taken >= threads as u64, "{what}: {taken} acquisitions");
    q.work();
    assert_eq!(q.lock_acquisitions(), taken + 1, "{what}: second work");
}

fn quicksort_case<R: RawMutex + Send + Sync>(len: usize, threads: usize) {
    let q = Quicksort::<R>::new(len, 11 + len as u64);
    if len > 0 {
        assert!(
            q.verify().is_err(),
            "quicksort len={len}: verify before work"
        );
    }
    quicksort_run(q, threads, &format!("quicksort len={len}"));
}

fn apps_with<R: RawMutex + Send + Sync>() {
    for threads in [1, 2, 4] {
        // 10 x 10 blocks, and a ragged last block.
        cholesky_case::<R>(160, 16, threads);
        cholesky_case::<R>(100, 16, threads);
        quicksort_case::<R>(200_000, threads);
        // Many equal keys, and already ordered input.
        quicksort_run(
            Quicksort::<R>::from_vec((0..50_000u64).map(|i| i % 7).collect()),
            threads,
            "quicksort few distinct",
        );
        quicksort_run(
            Quicksort::<R>::from_vec(vec![42; 20_000]),
            threads,
            "quicksort all equal",
        );
        quicksort_run(
            Quicksort::<R>::from_vec((0..30_000).collect()),
            threads,
            "quicksort sorted",
        );
        quicksort_run(
            Quicksort::<R>::from_vec((0..30_000).rev().collect()),
            threads,
            "quicksort reversed",
        );
    }
}

#[test]
fn apps_tas() {
    apps_with::<Tas>();
}

#[test]
fn apps_mcs() {
    apps_with::<Mcs>();
}

/// `TasNp`'s guard is not `Send`: every unlock must happen on the thread
/// that locked.
#[test]
fn apps_tas_np() {
    apps_with::<TasNp>();
}

#[test]
fn cholesky_edge_cases() {
    for threads in [1, 4] {
        for (n, block) in [
            (0, 0),
            (0, 32),
            (1, 0),
            (1, 1),
            (1, 32),
            (5, 0),
            (7, 100),
            (33, 32),
            (40, 1),
            (64, 16),
        ] {
            cholesky_case::<Tas>(n, block, threads);
            cholesky_case::<TasNp>(n, block, threads);
        }
    }
    // More workers than there is work for.
    cholesky_case::<Mcs>(16, 8, 8);
    assert_eq!(Cholesky::<Tas>::new(5, 0, 1).block(), 1);
    assert_eq!(Cholesky::<Tas>::new(7, 100, 1).block(), 7);
}

#[test]
fn quicksort_edge_cases() {
    for threads in [1, 4] {
        for len in [
            0,
            1,
            2,
            3,
            CUTOFF - 1,
            CUTOFF,
            CUTOFF + 1,
            2 * CUTOFF + 1,
            5000,
        ] {
            quicksort_case::<Tas>(len, threads);
            quicksort_case::<TasNp>(len, threads);
        }
    }
    quicksort_case::<Mcs>(10, 8);
    let empty = Quicksort::<Tas>::new(0, 1);
    assert!(empty.is_empty());
    empty.verify().unwrap();
}

// The exported defaults are usable sizes.
const _: () = {
    assert!(cholesky::DEFAULT_BLOCK > 0);
    assert!(cholesky::DEFAULT_N >= cholesky::DEFAULT_BLOCK);
    assert!(quicksort::DEFAULT_LEN > CUTOFF);
};

/// One-thread times of the experiment's default sizes (run with
/// `cargo test --release -p symmetry-workloads --test pq_apps -- --ignored
/// --nocapture`).
#[test]
#[ignore = "timing, not a check"]
fn single_thread_times() {
    for _ in 0..3 {
        let t = Instant::now();
        let c = Cholesky::<Tas>::new(cholesky::DEFAULT_N, cholesky::DEFAULT_BLOCK, 1);
        let built = t.elapsed();
        let t = Instant::now();
        c.work();
        let ran = t.elapsed();
        c.verify().unwrap();
        println!(
            "cholesky n={} block={}: new {built:?}, work {ran:?}, {} acquisitions",
            cholesky::DEFAULT_N,
            cholesky::DEFAULT_BLOCK,
            c.lock_acquisitions()
        );
        let t = Instant::now();
        let q = Quicksort::<Tas>::new(quicksort::DEFAULT_LEN, 1);
        let built = t.elapsed();
        let t = Instant::now();
        q.work();
        let ran = t.elapsed();
        q.verify().unwrap();
        println!(
            "quicksort len={}: new {built:?}, work {ran:?}, {} acquisitions",
            quicksort::DEFAULT_LEN,
            q.lock_acquisitions()
        );
    }
}

/// A stopped run returns at the workers' next look at the queue, leaves
/// the work unfinished (so `verify` refuses it) and says it was stopped;
/// a stop from another thread mid-run ends every worker.
#[test]
fn stop_ends_a_run_unfinished() {
    let c = Cholesky::<Tas>::new(256, 16, 3);
    c.stop();
    c.work();
    assert!(c.stopped());
    assert!(c.verify().is_err());

    let q = Quicksort::<Tas>::new(1 << 20, 4);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| q.work());
        }
        q.stop();
    });
    assert!(q.stopped());

    // Not stopped: the run finishes and verifies as before.
    let c = Cholesky::<Tas>::new(64, 8, 5);
    c.work();
    assert!(!c.stopped());
    c.verify().unwrap();
}
