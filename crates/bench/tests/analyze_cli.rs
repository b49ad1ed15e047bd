//! `symmetry analyze PROFILE`: prices a recorded lock-wait profile (the
//! per-lock table, KLMO91 Tables 1-2, per-lock thresholds; version-2 and
//! version-1 files, and `--json`), and refuses a bad file with the
//! parser's line number and a non-zero exit, never a panic. Also checks
//! that `symmetry calibrate` prints the `export ...` line of the
//! spin-then-block constants.

mod common;

use common::{symmetry, text};

use symmetry_locks::spin_then_block::profiler::{LockRecord, Profile};

/// Two locks: one whose waits are all short (should spin), one whose
/// waits are all far longer than C (should block at once).
fn demo_profile() -> Profile {
    let mut short = LockRecord::new("demo.short", "os", 400);
    for w in 0..2_000u64 {
        short.add(w % 40, false);
    }
    let mut long = LockRecord::new("demo.long", "os", 400);
    for w in 0..500u64 {
        long.add(50_000 + w, true);
    }
    Profile::new(10.0, vec![short, long])
}

#[test]
fn analyze_prints_tables_and_thresholds() {
    let dir = common::scratch("analyze", "ok");
    let path = dir.join("demo.profile.csv");
    std::fs::write(&path, demo_profile().to_csv()).unwrap();
    let out = symmetry(&["analyze", path.to_str().unwrap(), "--top", "5"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for want in [
        "Table 1",
        "Table 2",
        "demo.short",
        "demo.long",
        "2 lock(s), 2500 contended wait(s)",
    ] {
        assert!(stdout.contains(want), "missing `{want}` in:\n{stdout}");
    }
    // The long lock costs more off-line, so it is listed first.
    assert!(
        stdout.find("demo.long").unwrap() < stdout.find("demo.short").unwrap(),
        "{stdout}"
    );
    // --top limits the list; --c replaces every lock's C.
    let out = symmetry(&[
        "analyze",
        path.to_str().unwrap(),
        "--top",
        "1",
        "--c",
        "100",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("100 spins for every lock"), "{stdout}");
    let listed = stdout
        .lines()
        .filter(|l| l.starts_with("demo.short") || l.starts_with("demo.long"))
        .count();
    assert_eq!(listed, 1, "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn analyze_refuses_bad_input_without_panicking() {
    let dir = common::scratch("analyze", "bad");
    // A row with too few fields on line 5 (magic, meta, comment, header,
    // then the row).
    let good = demo_profile().to_csv();
    let mut lines: Vec<&str> = good.lines().take(4).collect();
    lines.push("demo.short,os,400");
    let bad = dir.join("bad.profile.csv");
    std::fs::write(&bad, lines.join("\n")).unwrap();
    let out = symmetry(&["analyze", bad.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "a bad file must fail");
    assert!(stderr.contains("line 5"), "{stderr}");
    assert!(stderr.contains("bad.profile.csv"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // Not a profile at all.
    let foreign = dir.join("foreign.csv");
    std::fs::write(&foreign, "a,b,c\n1,2,3\n").unwrap();
    let out = symmetry(&["analyze", foreign.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("line 1") && stderr.contains("not a symmetry lock-wait profile"),
        "{stderr}"
    );

    // Missing file, and a C of zero.
    let out = symmetry(&["analyze", dir.join("missing.csv").to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("cannot read"),
        "{}",
        text(&out.stderr)
    );
    let good_path = dir.join("good.csv");
    std::fs::write(&good_path, good).unwrap();
    let out = symmetry(&["analyze", good_path.to_str().unwrap(), "--c", "0"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("at least 1 spin"),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn analyze_reads_version_1_files_with_unknown_counts() {
    let dir = common::scratch("analyze", "v1");
    let path = dir.join("old.csv");
    std::fs::write(
        &path,
        "# symmetry lock-wait profile, version 1\n# unit_spins=16 buckets=64 ns_per_spin=2.0\n\
         lock,blocker,c_spins,bucket,lo_spins,hi_spins,count,sum_spins,blocked\n\
         old.lock,glibc,400,63,1009,,10,50000,10\n",
    )
    .unwrap();
    let out = symmetry(&["analyze", path.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("1  mutex  old.lock"), "{stdout}");
    assert!(stdout.contains("not recorded in this profile"), "{stdout}");
    assert!(stdout.contains("Table 1 (KLMO91)"), "{stdout}");
    // --json: one document, the unknown counts null.
    let out = symmetry(&["analyze", path.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let lock = &v["locks"][0];
    assert_eq!(lock["name"], "old.lock");
    assert_eq!(lock["kind"], "mutex");
    assert!(lock["acquisitions"].is_null() && lock["wait_max_spins"].is_null());
    assert_eq!(lock["wait_total_ns"], 100_000.0);
    assert_eq!(v["ns_per_spin"], 2.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn analyze_of_an_empty_profile_says_so() {
    let dir = common::scratch("analyze", "empty");
    let path = dir.join("empty.csv");
    let empty = Profile::new(12.0, vec![]);
    std::fs::write(&path, empty.to_csv()).unwrap();
    let out = symmetry(&["analyze", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("No contended waits"),
        "{}",
        text(&out.stdout)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn calibrate_prints_the_export_line() {
    let dir = common::scratch("analyze", "calibrate");
    let out = symmetry(&[
        "calibrate",
        "--quick",
        "--no-progress",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let line = stdout
        .lines()
        .find(|l| l.starts_with("export SYMMETRY_NS_PER_SPIN="))
        .unwrap_or_else(|| panic!("no export line in:\n{stdout}"));
    for var in ["SYMMETRY_C_OS=", "SYMMETRY_C_USER="] {
        assert!(line.contains(var), "{line}");
    }
    // Every value parses as a positive number.
    for kv in line.trim_start_matches("export ").split_whitespace() {
        let (_, v) = kv.split_once('=').unwrap();
        assert!(v.parse::<f64>().is_ok_and(|x| x > 0.0), "{line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
