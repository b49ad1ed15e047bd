//! What the tests share: the workspace root, running the `symmetry`
//! binary, a fresh scratch directory per test, and reading output as text.

#![allow(dead_code)] // each test file uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root (this crate is `crates/bench`).
pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/bench is two levels below the workspace")
        .to_path_buf()
}

/// Runs the `symmetry` binary with `args` in the current directory.
pub(crate) fn symmetry(args: &[&str]) -> Output {
    symmetry_in(Path::new("."), args)
}

/// Runs the `symmetry` binary with `args` in `dir`.
pub(crate) fn symmetry_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_symmetry"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the symmetry binary runs")
}

/// A fresh, empty directory `symmetry-<suite>-<name>-<pid>` for one test's
/// files.
pub(crate) fn scratch(suite: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("symmetry-{suite}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// Output bytes as text (lossy).
pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
