//! `symmetry profile -- CMD`: real multi-threaded programs from Debian
//! run under the interposition library with byte-identical output and
//! their mutexes in the profile; a statically linked program, a missing
//! library and a program that never waits get a clear error.
//!
//! The programs (`.ci/run` installs them) are three parallel compressors:
//! each is deterministic, so "the same output" is a byte comparison, and
//! each hands blocks between threads through pthread mutexes and
//! condition variables of its own design: pigz (its `yarn` lock layer),
//! pbzip2 (a producer/consumer queue in C++) and xz (liblzma's threaded
//! encoder, so the locks live in a shared library, not the program).

mod common;

use common::{symmetry_in, text};

use std::path::Path;
use std::process::Command;

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .any(|d| d.join(program).is_file())
}

/// Compressible but not trivial input: lines of counters and words.
fn input(path: &Path) {
    let mut s = String::new();
    for i in 0..400_000u64 {
        s.push_str(&format!(
            "{i} {} lock wait spin block {}\n",
            i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 100_003,
            i % 7
        ));
    }
    std::fs::write(path, s).expect("input file");
}

#[test]
fn pigz_output_is_identical_and_its_mutexes_are_profiled() {
    if !on_path("pigz") {
        eprintln!("SKIPPED: pigz is not installed (`.ci/run` installs it: apt-get install pigz)");
        return;
    }
    let dir = common::scratch("profile", "pigz");
    let file = dir.join("input.txt");
    input(&file);
    let plain = Command::new("pigz")
        .args(["-p", "4", "-b", "32", "-c"])
        .arg(&file)
        .output()
        .expect("pigz runs");
    assert!(plain.status.success());
    let mut profiled = None;
    for attempt in 0..3 {
        let out = symmetry_in(
            &dir,
            &[
                "profile",
                "--out",
                "pigz.csv",
                "--",
                "pigz",
                "-p",
                "4",
                "-b",
                "32",
                "-c",
                "input.txt",
            ],
        );
        // The compressed bytes are exactly pigz's own, with or without
        // the library (the analysis goes to stderr).
        assert_eq!(
            out.stdout, plain.stdout,
            "attempt {attempt}: output differs"
        );
        if out.status.success() {
            profiled = Some(out);
            break;
        }
        let err = text(&out.stderr);
        assert!(err.contains("recorded no contended"), "{err}");
    }
    let out = profiled.expect("pigz with 4 threads waited on a mutex in one of three runs");
    let err = text(&out.stderr);
    assert!(
        err.contains("/pigz+0x"),
        "locks named by site in pigz: {err}"
    );
    assert!(err.contains("Table 1 (KLMO91)"), "{err}");
    let csv = std::fs::read_to_string(dir.join("pigz.csv")).expect("the profile was written");
    assert!(csv.starts_with("# symmetry lock-wait profile"), "{csv}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_static_program_a_missing_library_and_no_waits_are_clear_errors() {
    let dir = common::scratch("profile", "errors");
    // A 64-bit ELF header with no program headers: statically linked.
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2;
    h[5] = 1;
    std::fs::write(dir.join("static-prog"), &h).unwrap();
    let out = symmetry_in(&dir, &["profile", "--", "./static-prog"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("statically linked"),
        "{}",
        text(&out.stderr)
    );

    let out = symmetry_in(&dir, &["profile", "--lib", "/nonexistent.so", "--", "true"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("/nonexistent.so") && err.contains("--lib"),
        "{err}"
    );

    let out = symmetry_in(&dir, &["profile", "--", "true"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("recorded no contended"), "{err}");

    let out = symmetry_in(&dir, &["profile", "--", "no-such-program-here"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("not found in PATH"));

    let out = symmetry_in(&dir, &["profile"]);
    assert!(!out.status.success(), "a command is required");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pigz_output_is_identical_on_every_replacement_lock() {
    if !on_path("pigz") {
        eprintln!("SKIPPED: pigz is not installed (`.ci/run` installs it: apt-get install pigz)");
        return;
    }
    let dir = common::scratch("profile", "pigz-replace");
    let file = dir.join("input.txt");
    input(&file);
    // Two compression threads: no more spinning threads than a 2-core
    // machine has (FIFO spin locks convoy behind a preempted waiter).
    let args = ["-p", "2", "-b", "64", "-c", "input.txt"];
    let plain = Command::new("pigz")
        .current_dir(&dir)
        .args(args)
        .output()
        .expect("pigz runs");
    assert!(plain.status.success());
    for a in symmetry_interpose::replace::algorithms() {
        let mut cli = vec!["profile", "--lock", a.name, "--", "pigz"];
        cli.extend(args);
        let out = symmetry_in(&dir, &cli);
        assert!(out.status.success(), "{}: {}", a.name, text(&out.stderr));
        assert!(out.stdout == plain.stdout, "{}: output differs", a.name);
        assert!(text(&out.stderr).contains(&format!("ran on `{}`", a.name)));
    }
    let out = symmetry_in(&dir, &["profile", "--lock", "nope", "--", "true"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("accepted: glibc"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Debian program, the arguments that make its threads contend (more
/// threads than cores, small blocks), and the arguments for replacement
/// runs (two threads: FIFO spin locks convoy beyond the cores).
const PROGRAMS: &[(&str, &[&str], &[&str])] = &[
    (
        "pigz",
        &["-p", "4", "-b", "32", "-k", "-c", "input.txt"],
        &["-p", "2", "-k", "-c", "input.txt"],
    ),
    (
        "pbzip2",
        &["-p4", "-b1", "-k", "-c", "input.txt"],
        &["-p2", "-k", "-c", "input.txt"],
    ),
    (
        "xz",
        &["-T4", "--block-size=65536", "-0", "-k", "-c", "input.txt"],
        &["-T2", "--block-size=262144", "-0", "-k", "-c", "input.txt"],
    ),
];

#[test]
fn three_debian_programs_name_their_locks_and_keep_their_output_on_mcs_and_random_walk() {
    let dir = common::scratch("profile", "three");
    input(&dir.join("input.txt"));
    for (prog, contend, replace) in PROGRAMS {
        if !on_path(prog) {
            eprintln!("SKIPPED: {prog} is not installed (`.ci/run` installs it)");
            continue;
        }
        // Profile mode: the program's status, a profile naming a lock by
        // an object path and offset, the policy table.
        let mut named = None;
        for _ in 0..5 {
            let mut cli = vec!["profile", "--out", "p.csv", "--", prog];
            cli.extend(contend.iter());
            let out = symmetry_in(&dir, &cli);
            if out.status.success() {
                named = Some(out);
                break;
            }
            assert!(
                text(&out.stderr).contains("recorded no contended"),
                "{prog}: {}",
                text(&out.stderr)
            );
        }
        let out = named.unwrap_or_else(|| panic!("{prog}: no contended wait in five runs"));
        let err = text(&out.stderr);
        assert!(err.contains("Table 1 (KLMO91)"), "{prog}: {err}");
        let profile = std::fs::read_to_string(dir.join("p.csv")).expect("profile");
        assert!(
            profile
                .lines()
                .skip(4)
                .any(|l| l.contains("(/") && l.contains("+0x")),
            "{prog}: a lock named by object and offset: {profile}"
        );
        // Replace mode: byte-identical output on mcs and on KLMO91's
        // random-walk spin-then-block lock.
        let plain = Command::new(prog)
            .current_dir(&dir)
            .args(*replace)
            .output()
            .expect("the program runs");
        assert!(plain.status.success(), "{prog}");
        for lock in ["mcs", "spin-then-block:random-walk"] {
            let mut cli = vec!["profile", "--lock", lock, "--", prog];
            cli.extend(replace.iter());
            let out = symmetry_in(&dir, &cli);
            assert!(
                out.status.success(),
                "{prog} on {lock}: {}",
                text(&out.stderr)
            );
            assert!(
                out.stdout == plain.stdout,
                "{prog} on {lock}: output differs"
            );
        }
    }
    let out = symmetry_in(&dir, &["profile", "--", "sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7), "the program's own status");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `crates/interpose/examples/contended_rust`, built by cargo for the
/// workspace's tests (built here if this crate's tests run alone).
fn contended_rust() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let target = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory");
    let prog = target.join("examples/contended_rust");
    if !prog.is_file() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let profile = target.file_name().expect("profile directory");
        let mut c = Command::new(cargo);
        c.args([
            "build",
            "-q",
            "-p",
            "symmetry-interpose",
            "--example",
            "contended_rust",
        ]);
        if profile == "release" {
            c.arg("--release");
        }
        assert!(
            c.status().expect("cargo runs").success(),
            "cargo build --example contended_rust"
        );
    }
    prog
}

#[test]
fn a_rust_program_s_std_and_parking_lot_locks_are_named_by_its_own_lines() {
    let prog = contended_rust();
    let plain = Command::new(&prog).output().expect("contended_rust runs");
    assert!(plain.status.success());
    let dir = common::scratch("profile", "rust");
    // Each of the four locks waits in nearly every run; a run in which one
    // did not is run again.
    let mut err = String::new();
    for _ in 0..3 {
        let out = symmetry_in(
            &dir,
            &["profile", "--out", "rust.csv", "--", prog.to_str().unwrap()],
        );
        assert_eq!(out.stdout, plain.stdout, "output changed under the library");
        err = text(&out.stderr);
        assert!(out.status.success(), "{err}");
        if err.contains("4 of 4 lock(s) with waits") {
            break;
        }
    }
    // The person's table comes first: each lock by the program's own line,
    // with what its wrappers say it is.
    let table = &err[err.find("Locks by total wait").expect("the table")..];
    let table = &table[..table
        .find("Table 1 (KLMO91)")
        .expect("KLMO91's tables follow")];
    for (kind, line) in [
        ("mutex (futex)", "contended_rust.rs:39"),
        ("rwlock-write (futex)", "contended_rust.rs:46"),
        ("rwlock-read (futex)", "contended_rust.rs:55"),
        ("mutex (futex)", "contended_rust.rs:63"),
    ] {
        let row = table
            .lines()
            .find(|l| l.contains(line))
            .unwrap_or_else(|| panic!("no lock at {line} in\n{table}"));
        assert!(row.contains(&format!("  {kind}  ")), "{row}");
    }
    let profile = symmetry_locks::spin_then_block::profiler::Profile::read(&dir.join("rust.csv"))
        .expect("the symbolized profile parses");
    assert_eq!(profile.locks.len(), 4, "{:#?}", profile.locks);
    for l in &profile.locks {
        assert_eq!(l.blocker, "futex");
        assert!(l.contended() > 0 && l.wait_max.is_some(), "{l:?}");
        assert_eq!(l.acquisitions, None, "{l:?}");
    }
    // At least the mutexes' holds are seen (a hold is seen when its
    // release wakes a waiter).
    let mutex_holds = profile
        .locks
        .iter()
        .filter(|l| l.name.contains(":39") || l.name.contains(":63"))
        .filter(|l| l.hold.samples > 0)
        .count();
    assert_eq!(mutex_holds, 2, "{:#?}", profile.locks);
    // `symmetry analyze` prices the same file.
    let out = symmetry_in(&dir, &["analyze", "rust.csv"]);
    assert!(out.status.success());
    let text = text(&out.stdout);
    assert!(
        text.contains("Table 1 (KLMO91)") && text.contains("contended_rust.rs:46"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
