//! A user thread that overflows its stack hits the guard page and is
//! reported by name, instead of dying of a bare `SIGSEGV`.
//!
//! The overflow kills the process, so the test re-executes its own binary
//! as a child (selected by [`CHILD`]) and checks how the child died and
//! what it wrote to stderr.
#![cfg(not(loom))]

use std::hint::black_box;
use std::process::Command;

use symmetry_threads::{Runtime, Strategy, yield_now};

/// Set in the child's environment: the strategy to run the overflow under,
/// and the thread's name (`<strategy>:<name>`; an empty name: unnamed).
const CHILD: &str = "SYMMETRY_THREADS_OVERFLOW_CHILD";

const TEST: &str = "stack_overflow_is_caught_by_the_guard_page_and_names_the_thread";

/// Recurses without bound; `black_box` keeps every frame (no tail call,
/// no folding), and the frame holds a small array so it grows quickly.
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let frame = [depth; 16];
    if black_box(depth) == u64::MAX {
        return 0;
    }
    let below = recurse(black_box(depth + 1));
    below.wrapping_add(black_box(&frame)[depth as usize % 16])
}

fn overflow<S: Strategy>(thread: &str) {
    let rt: Runtime<S> = Runtime::builder()
        .processors(2)
        .stack_size(64 * 1024)
        .build()
        .unwrap();
    let h = rt.handle();
    // Stacks are pooled: the overflowing thread runs on a recycled one.
    for i in 0..8u64 {
        assert_eq!(h.spawn(move || i).join().unwrap(), i);
    }
    let b = h.builder();
    let b = if thread.is_empty() { b } else { b.name(thread) };
    let r = b
        .spawn(|| {
            // Switch away and back first (possibly resuming on the other
            // processor): the report must still find this thread's guard.
            for _ in 0..10 {
                yield_now();
            }
            recurse(0)
        })
        .join();
    // Unreachable if the guard page works.
    eprintln!("child: the overflow was not caught: {r:?}");
    std::process::exit(3);
}

macro_rules! define_dispatch {
    ($($name:literal => $t:ty),* $(,)?) => {
        const STRATEGIES: &[&str] = &[$($name),*];
        fn dispatch(strategy: &str, thread: &str) {
            match strategy {
                $($name => overflow::<$t>(thread),)*
                other => panic!("unknown strategy {other}"),
            }
        }
    };
}
symmetry_threads::for_each_strategy!(define_dispatch);

/// Runs the child and returns its stderr, after checking that it died of
/// `SIGABRT` (the report's abort).
fn run_child(strategy: &str, thread: &str) -> String {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD, format!("{strategy}:{thread}"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "{strategy}: the child exited normally: {stderr}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGABRT),
            "{strategy}: the child died of {:?}: {stderr}",
            out.status
        );
    }
    stderr
}

#[test]
fn stack_overflow_is_caught_by_the_guard_page_and_names_the_thread() {
    if let Ok(spec) = std::env::var(CHILD) {
        let (strategy, thread) = spec.split_once(':').expect("strategy:thread");
        dispatch(strategy, thread);
        return;
    }
    for s in STRATEGIES {
        let stderr = run_child(s, "deep-recursion");
        assert!(
            stderr.contains("user thread 'deep-recursion'"),
            "{s}: {stderr}"
        );
        assert!(stderr.contains("overflowed its stack"), "{s}: {stderr}");
    }
    // An unnamed thread is reported as such.
    let stderr = run_child("local-readyq", "");
    assert!(stderr.contains("user thread '<unnamed>'"), "{stderr}");
    assert!(stderr.contains("overflowed its stack"), "{stderr}");
}
