//! `symmetry report` on the committed reference snapshot: it rebuilds, and
//! rebuilt for a machine description edited to another machine it says
//! nothing of the machine the data came from (every machine word is
//! generated from `machine.json`). Also the CLI's refusals around it.

mod common;

use common::symmetry;

use std::path::{Path, PathBuf};

fn reference() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../reference")
}

/// A copy of the reference snapshot's CSV, provenance and machine files.
fn copy_reference(to: &Path) {
    for entry in std::fs::read_dir(reference()).expect("reference/ exists") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".csv") || name.ends_with(".json") {
            std::fs::copy(&path, to.join(&name)).expect("copy");
        }
    }
}

#[test]
fn report_for_a_64_core_bare_metal_machine_names_no_small_vm_fact() {
    let dir = common::scratch("report", "big");
    copy_reference(&dir);
    let path = dir.join("machine.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m["logical_cpus"] = 64.into();
    m["online_cpus"] = 64.into();
    m["virtualized"] = false.into();
    m["hypervisor"] = serde_json::Value::Null;
    std::fs::write(&path, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    let out = symmetry(&["report", "--out", dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = std::fs::read_to_string(dir.join("REPORT.md")).unwrap();
    let lower = report.to_lowercase();
    for phrase in [
        "2 cores",
        "2-core",
        "two cores",
        "virtual machine",
        "2 logical cpus,",
    ] {
        assert!(
            !lower.contains(phrase),
            "the report for a 64-core machine says {phrase:?}"
        );
    }
    assert!(report.contains("64 logical CPUs"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reference_report_rebuilds_with_provenance_per_section() {
    let dir = common::scratch("report", "same");
    copy_reference(&dir);
    let out = symmetry(&["report", "--out", dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = std::fs::read_to_string(dir.join("REPORT.md")).unwrap();
    let sections = report.matches("\n**Source:**").count();
    let data = report.matches("\n**Data:** commit `").count();
    assert!(sections > 10, "{sections} sections");
    assert_eq!(sections, data, "every section names its data's provenance");
    assert!(report.contains("Rules, each judged"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn report_on_an_empty_folder_says_to_run_first() {
    let dir = common::scratch("report", "empty");
    let out = symmetry(&["report", "--out", dir.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("run `symmetry"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cli_refuses_empty_thread_items_and_locks_without_locks() {
    let out = symmetry(&[
        "run",
        "spin-counter",
        "--threads",
        "1,,2",
        "--out",
        "/nonexistent/x",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("empty item"));
    let out = symmetry(&[
        "run",
        "tm-queue-search",
        "--locks",
        "tas",
        "--out",
        "/nonexistent/x",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--locks does not apply to tm-queue-search"),
        "{err}"
    );
}
