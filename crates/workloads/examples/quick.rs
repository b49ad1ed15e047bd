//! Times the presets of both workloads on both executors with a few locks
//! (median of three runs), optionally with each lock class's waiting-time
//! summary from the profiler.
//!
//! `cargo run --release -p symmetry-workloads --example quick [full] [profile]`
//!
//! Regsim runs one thread per processor, Hanoi four (KLMO91: threads =
//! processors for Regsim, many threads for Hanoi).

use std::time::Duration;

use symmetry_locks::spin_then_block::policy::{
    AlwaysBlock, AlwaysSpin, FixedSpinC, FixedSpinHalfC, RandomWalk,
};
use symmetry_locks::spin_then_block::{Futex, SpinThenBlock, calibration, profiler};
use symmetry_threads::sync::UserBlocker;
use symmetry_workloads::{Exec, OsThreads, UserThreads, WorkloadLock, hanoi, regsim};

/// One line per lock class: waits, how many were short, long, blocked.
fn profile_summary() -> String {
    let p = profiler::snapshot();
    let mut s = String::new();
    for l in &p.locks {
        let n = l.contended();
        let over = l.counts[profiler::BUCKETS - 1];
        let short: u64 = l.counts[..10].iter().sum();
        let sum_in_range: u64 = l.sums[..profiler::BUCKETS - 1].iter().sum();
        s += &format!(
            "\n      {:<14} {:>6} waits: {:>5.1}% <=160 spins, {:>5.1}% >1008, {:>5.1}% blocked, mean of the <=1008 ones {:.0} spins",
            l.name,
            n,
            100.0 * short as f64 / n as f64,
            100.0 * over as f64 / n as f64,
            100.0 * l.blocked_total() as f64 / n as f64,
            sum_in_range as f64 / (n - over).max(1) as f64,
        );
    }
    profiler::reset();
    s
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn one<L: WorkloadLock, E: Exec>(label: &str, exec: &E, full: bool, profile: bool) {
    let p = exec.processors();
    let rc = if full {
        regsim::RegsimCfg::full(p)
    } else {
        regsim::RegsimCfg::quick(p)
    };
    let hc = if full {
        hanoi::HanoiCfg::full(4 * p)
    } else {
        hanoi::HanoiCfg::quick(4 * p)
    };
    let want = regsim::reference_checksum(&rc);
    profiler::reset();
    let mut times = Vec::new();
    for _ in 0..3 {
        let r = regsim::run::<L, E>(&rc, exec);
        assert_eq!(r.checksum, want, "regsim {label} {}", E::NAME);
        times.push(r.elapsed);
    }
    println!(
        "regsim {label:<14} {:>4} {} threads: {:7.1} ms",
        E::NAME,
        rc.threads,
        median(times).as_secs_f64() * 1e3
    );
    if profile {
        println!("   {}", profile_summary());
    }
    let mut times = Vec::new();
    for _ in 0..3 {
        let h = hanoi::run::<L, E>(&hc, exec);
        assert!(h.valid, "hanoi {label} {}", E::NAME);
        times.push(h.elapsed);
    }
    println!(
        "hanoi  {label:<14} {:>4} {} threads: {:7.1} ms",
        E::NAME,
        hc.threads,
        median(times).as_secs_f64() * 1e3
    );
    if profile {
        println!("   {}", profile_summary());
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "full");
    let profile = std::env::args().any(|a| a == "profile");
    println!("{:?}", calibration::current());
    let os = OsThreads;
    let user = UserThreads::per_cpu();
    one::<SpinThenBlock<AlwaysBlock, Futex>, _>("always-block", &os, full, profile);
    one::<SpinThenBlock<AlwaysSpin, Futex>, _>("always-spin", &os, full, profile);
    one::<SpinThenBlock<FixedSpinHalfC, Futex>, _>("fixed-spin-c2", &os, full, profile);
    one::<SpinThenBlock<FixedSpinC, Futex>, _>("fixed-spin-c", &os, full, profile);
    one::<SpinThenBlock<RandomWalk, Futex>, _>("random-walk", &os, full, profile);
    one::<symmetry_locks::ParkingLot, _>("parking_lot", &os, full, profile);
    one::<symmetry_locks::StdMutex, _>("std", &os, full, profile);
    one::<SpinThenBlock<AlwaysBlock, UserBlocker>, _>("always-block", &user, full, profile);
    one::<SpinThenBlock<AlwaysSpin, UserBlocker>, _>("always-spin", &user, full, profile);
    one::<SpinThenBlock<FixedSpinC, UserBlocker>, _>("fixed-spin-c", &user, full, profile);
    one::<SpinThenBlock<RandomWalk, UserBlocker>, _>("random-walk", &user, full, profile);
}
