//! Where guards must be made with `mprotect` (kernels before 6.13, forced
//! here with `SYMMETRY_STACK_GUARD=mprotect`), every stack costs two
//! kernel mappings. Near `vm.max_map_count` a new thread must fail to
//! start with an error that says so, and the process must live on: the
//! threads that did start finish, the others' join handles return
//! `JoinError::NoStack`.
//!
//! The guard mode is fixed per process at its first stack, so the test
//! re-executes its own binary as a child with the variable set.
#![cfg(not(loom))]

mod common;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use symmetry_threads::stack::{self, GuardMode};
use symmetry_threads::{JoinError, LocalReadyq, Runtime, yield_now};

const CHILD: &str = "SYMMETRY_THREADS_MAP_LIMIT_CHILD";
const TEST: &str = "near_the_mapping_limit_threads_fail_to_start_with_a_clear_error";

/// More live stacks than `vm.max_map_count` / 2 allows.
fn threads() -> usize {
    let max: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65_530);
    max / 2 + 5_000
}

fn child() {
    assert_eq!(stack::guard_mode(), GuardMode::Mprotect);
    let n = threads();
    let mut rt: Runtime<LocalReadyq> = Runtime::builder()
        .processors(1)
        .stack_size(16 * 1024)
        .build()
        .unwrap();
    let h = rt.handle();
    let go = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let (go, started) = (Arc::clone(&go), Arc::clone(&started));
            h.spawn(move || {
                started.fetch_add(1, Ordering::Relaxed);
                // Runnable, not blocked: the stack stays live either way.
                while !go.load(Ordering::Relaxed) {
                    yield_now();
                }
            })
        })
        .collect();
    let mut stall = common::Stall::new();
    loop {
        let s = started.load(Ordering::Relaxed);
        let failed = handles.iter().filter(|h| h.is_finished()).count();
        if s + failed >= n {
            break;
        }
        stall.check(s + failed, || {
            format!("{s} started, {failed} failed of {n}")
        });
        std::thread::sleep(Duration::from_millis(100));
    }
    go.store(true, Ordering::Relaxed);
    let (mut ok, mut refused, mut message) = (0, 0, String::new());
    for j in handles {
        match j.join() {
            Ok(()) => ok += 1,
            Err(JoinError::NoStack(e)) => {
                refused += 1;
                message = e.to_string();
            }
            Err(e) => panic!("unexpected: {e}"),
        }
    }
    let report = rt.shutdown();
    println!(
        "started={ok} refused={refused} live_after={}",
        stack::live_stacks()
    );
    println!("message={message}");
    assert!(report.nothing_leaked() || refused > 0, "{report:?}");
}

#[test]
fn near_the_mapping_limit_threads_fail_to_start_with_a_clear_error() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("SYMMETRY_STACK_GUARD", "mprotect")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child failed: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    let num = |key: &str| -> usize {
        stdout
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {stdout}"))
    };
    let (started, refused) = (num("started="), num("refused="));
    assert!(refused > 0, "no thread was refused:\n{stdout}");
    assert!(
        started > 20_000,
        "only {started} threads started:\n{stdout}"
    );
    assert_eq!(started + refused, threads());
    assert!(stdout.contains("vm.max_map_count"), "{stdout}");
}
