//! Segment names that cannot be planted (SPEC §2.3; issue 40, item 5).
//!
//! `/dev/shm` is listable by every user, so a rank's segment name is
//! public once it exists. These tests play the process that reads it:
//!
//! * a watcher that, during real [`job::spawn`] runs, creates every name
//!   it can derive from the segments it sees (the other ranks' names under
//!   the old `<job>.<rank>` scheme, that is, the seen name with its rank
//!   field changed) cannot deny the job: every run succeeds;
//! * a process that knows the job's secret name (only one of the same
//!   user can: it is in the ranks' environment) and creates rank 1's name
//!   first makes rank 1 fail at once with `NameTaken` naming that
//!   segment, not hang.

mod common;

use std::collections::HashSet;
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use common::{CFG, GUARD, Kid, SELFTEST, assert_cleaned};

use symmetry_am::{AmError, Endpoint, Job, claim::Stamp, job, segment};

/// Jobs run under the watcher (the old scheme lost 5 of 5).
const RUNS: usize = 5;

/// Ranks per watched job.
const RANKS: u32 = 3;

/// The rank fields the watcher tries for every name it sees (more than
/// the job has).
const DERIVED_RANKS: u32 = 8;

/// One test at a time: the watcher plants names for every segment of this
/// process, which would include the other test's.
static SERIAL: Mutex<()> = Mutex::new(());

/// Creates `/dev/shm/<name>` as an attacker would (a few bytes, mode
/// 0600); whether it was created (not there before).
fn plant(name: &str) -> bool {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(Path::new("/dev/shm").join(name))
        .is_ok()
}

/// Watches `/dev/shm` until `stop`, planting the names derivable from
/// every segment of this process's jobs; returns the segments it saw and
/// the names it planted.
fn watch(stop: &AtomicBool) -> (HashSet<String>, Vec<String>) {
    let ours = format!("symmetry-am.{}-", std::process::id());
    let (mut seen, mut planted) = (HashSet::new(), Vec::new());
    while !stop.load(Ordering::Relaxed) {
        let Ok(dir) = std::fs::read_dir("/dev/shm") else {
            continue;
        };
        for name in dir.filter_map(|e| e.ok()?.file_name().into_string().ok()) {
            if !name.starts_with(&ours) || planted.contains(&name) || !seen.insert(name.clone()) {
                continue;
            }
            let Some((job, _rank)) = name.rsplit_once('.') else {
                continue;
            };
            for r in 0..DERIVED_RANKS {
                let guess = format!("{job}.{r}");
                if plant(&guess) {
                    planted.push(guess);
                }
            }
        }
    }
    (seen, planted)
}

/// A watcher that sees every rank's segment and plants every name it can
/// derive from them does not deny any of the jobs.
#[test]
fn a_watcher_cannot_plant_another_ranks_name() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let stop = AtomicBool::new(false);
    let (outs, (seen, planted)) = std::thread::scope(|s| {
        let watcher = s.spawn(|| watch(&stop));
        let outs: Vec<_> = (0..RUNS)
            .map(|_| {
                let args = ["exchange".into(), "stamp".into(), "600".into()];
                job::spawn(RANKS, Path::new(SELFTEST), &args)
            })
            .collect();
        stop.store(true, Ordering::Relaxed);
        (outs, watcher.join().expect("watcher"))
    });
    for name in &planted {
        let _ = std::fs::remove_file(Path::new("/dev/shm").join(name));
    }
    for (i, out) in outs.into_iter().enumerate() {
        let out = out.expect("spawn");
        assert!(
            out.success(),
            "run {i} failed under the watcher: {}",
            out.failures()
        );
        assert_cleaned(&out.job);
    }
    let real = seen.iter().filter(|n| !planted.contains(n)).count();
    assert!(real > 0, "the watcher saw no segment of the {RUNS} jobs");
    assert!(!planted.is_empty(), "the watcher planted nothing");
    eprintln!(
        "watcher: saw {real} segments, planted {} names",
        planted.len()
    );
}

/// A process that knows the job's name creates rank 1's segment name
/// first: rank 1 fails at once with `NameTaken` naming it (in process and
/// as a rank of a job), instead of waiting or joining it.
#[test]
fn a_planted_name_fails_the_job_naming_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let job = Job::new(Job::new_name(), 1, 2).with_timeout(GUARD);
    let taken = segment::segment_name(&job.name, 1);
    assert!(plant(&taken[1..]), "{taken} existed before the test");

    let e = Endpoint::<Stamp>::join(&job, &CFG, ()).unwrap_err();
    match &e {
        AmError::NameTaken { name, .. } => assert_eq!(name, &taken),
        e => panic!("rank 1 joined or failed otherwise: {e:?}"),
    }

    // The same as a job of two processes: rank 0 waits for rank 1, which
    // exits with the error (the launcher then ends rank 0).
    let rank0 = Kid::start_with(&job, 0, &["idle", "stamp"], Stdio::null());
    let mut rank1 = Command::new(SELFTEST)
        .args(["idle", "stamp"])
        .env(job::ENV_JOB, &job.name)
        .env(job::ENV_RANK, "1")
        .env(job::ENV_SIZE, "2")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rank 1");
    let start = Instant::now();
    let status = loop {
        if let Some(st) = rank1.try_wait().expect("try_wait") {
            break st;
        }
        if start.elapsed() > GUARD {
            let _ = rank1.kill();
            panic!("rank 1 hung on a planted name for {GUARD:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    };
    let stderr = std::io::read_to_string(rank1.stderr.take().expect("piped")).unwrap();
    let _ = std::fs::remove_file(Path::new("/dev/shm").join(&taken[1..]));
    assert!(!status.success(), "rank 1 succeeded on a planted name");
    assert!(
        stderr.contains(&format!("cannot create segment {taken}")),
        "rank 1's error does not name {taken}: {stderr}"
    );
    drop(rank0);
    assert_cleaned(&job.name);
}
