//! `symmetry am ...`: the SPMD launcher runs an application as separate
//! processes and reports it verified; bad arguments and a rank started
//! without its launcher fail with a message that says what is accepted;
//! a rank killed mid-run makes the launcher fail naming it; and no job
//! leaves a shared-memory segment behind.

mod common;

use common::{symmetry, text};

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const SHM: &str = "/dev/shm";

/// Segments of the jobs launched by process `pid` (job names start with
/// the launcher's pid, so other tests' and other programs' jobs are not
/// counted).
fn segments_of(pid: u32) -> Vec<String> {
    let prefix = format!("symmetry-am.{pid}-");
    std::fs::read_dir(SHM)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `symmetry args` as a launcher and returns its output and pid.
fn launch(args: &[&str]) -> (Output, u32) {
    let child = Command::new(env!("CARGO_BIN_EXE_symmetry"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the symmetry binary starts");
    let pid = child.id();
    (child.wait_with_output().expect("the launcher ends"), pid)
}

#[test]
fn spawn_runs_sample_on_two_processes() {
    let (out, pid) = launch(&[
        "am", "spawn", "-n", "2", "sample", "--algo", "stamp", "--size", "quick",
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for want in [
        "rank 0/2: sample with stamp",
        "rank 1/2: sample with stamp",
        "sample with stamp on 2 processes (size quick)",
        "verified on all 2 ranks",
    ] {
        assert!(stdout.contains(want), "missing `{want}` in:\n{stdout}");
    }
    assert!(
        segments_of(pid).is_empty(),
        "segments left: {:?}",
        segments_of(pid)
    );
}

#[test]
fn bad_arguments_say_what_is_accepted() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["am", "spawn", "-n", "2", "nosuch"],
            "fft, con-comm, con-comp, sample",
        ),
        (
            &["am", "spawn", "-n", "2", "sample", "--algo", "mcs"],
            "tas, ttas, ticket, anderson, pthread, lock-free, stamp",
        ),
        (&["am", "spawn", "-n", "0", "sample"], "1 to 64"),
        (&["am", "spawn", "-n", "65", "sample"], "1 to 64"),
        (
            &["am", "spawn", "-n", "2", "sample", "--size", "huge"],
            "quick, full",
        ),
    ];
    for (args, want) in cases {
        let (out, pid) = launch(args);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(
            stderr.contains(want),
            "{args:?}: missing `{want}` in:\n{stderr}"
        );
        assert!(segments_of(pid).is_empty());
    }
}

#[test]
fn a_rank_without_its_launcher_refuses_to_run() {
    let out = Command::new(env!("CARGO_BIN_EXE_symmetry"))
        .args(["am", "rank", "sample", "--size", "quick"])
        .env_remove("SYMMETRY_AM_JOB")
        .env_remove("SYMMETRY_AM_RANK")
        .env_remove("SYMMETRY_AM_SIZE")
        .output()
        .expect("the symmetry binary runs");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("SYMMETRY_AM_JOB"), "{stderr}");
    assert!(stderr.contains("symmetry am spawn"), "{stderr}");

    // A rank number outside the job is refused too.
    let out = Command::new(env!("CARGO_BIN_EXE_symmetry"))
        .args(["am", "rank", "sample", "--size", "quick"])
        .env("SYMMETRY_AM_JOB", "1-test")
        .env("SYMMETRY_AM_RANK", "5")
        .env("SYMMETRY_AM_SIZE", "2")
        .output()
        .expect("the symmetry binary runs");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("rank 5 of 2"), "{stderr}");
}

#[test]
fn list_and_clean() {
    let out = symmetry(&["am", "list"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success());
    for want in [
        "fft",
        "con-comm",
        "con-comp",
        "sample",
        "lock-free",
        "stamp",
        "rings",
        "pthread",
    ] {
        assert!(stdout.contains(want), "missing `{want}` in:\n{stdout}");
    }
    // The default docs/active-messages.md names.
    assert!(stdout.contains("(--algo, default rings)"), "{stdout}");
    let out = symmetry(&["am", "clean"]);
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("removed"));
}

/// The pids of `pid`'s children (Linux `/proc/PID/task/PID/children`).
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

#[test]
fn a_killed_rank_fails_the_job_and_leaves_no_segment() {
    if !Path::new(&format!("/proc/{}/task", std::process::id())).exists() {
        eprintln!("no /proc: skipped");
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_symmetry"))
        .args(["am", "spawn", "-n", "2", "fft", "--size", "full"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the symmetry binary starts");
    let pid = child.id();
    // Wait until both ranks have created their endpoints, then kill rank 1.
    let start = Instant::now();
    let mut killed = false;
    while start.elapsed() < Duration::from_secs(30) {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        let kids = children(pid);
        if kids.len() == 2 && segments_of(pid).len() == 2 {
            let status = Command::new("kill")
                .args(["-KILL", &kids[1].to_string()])
                .status()
                .expect("kill runs");
            killed = status.success();
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let out = child.wait_with_output().expect("the launcher ends");
    let stderr = text(&out.stderr);
    if !killed {
        eprintln!("the job ended before a rank could be killed; nothing to check:\n{stderr}");
    } else {
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains("killed by signal 9"), "{stderr}");
        assert!(stderr.contains("segments were removed"), "{stderr}");
    }
    assert!(
        segments_of(pid).is_empty(),
        "segments left: {:?}",
        segments_of(pid)
    );
}
