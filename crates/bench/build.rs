//! Captures the toolchain and source revision for `machine.json`.
//!
//! Emits `SYMMETRY_RUSTC` (`$RUSTC --version`) and `SYMMETRY_GIT` (short
//! commit, `-dirty` when the work tree has changes, `unknown` without git).
//! Never fails: a tarball without `.git` or a machine without git still
//! builds.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let rustc_version =
        run(Command::new(rustc).arg("--version")).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SYMMETRY_RUSTC={rustc_version}");

    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    println!("cargo:rustc-env=SYMMETRY_GIT={}", git_commit(&manifest_dir));

    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSTC");
    // Rebuild when HEAD moves or the index changes (commit, checkout, add),
    // but only watch files that exist: a missing path would make cargo
    // re-run this script on every build.
    // The sources under `crates/` are watched too, so that `-dirty` follows
    // edits (cargo rebuilds this crate for most of them anyway).
    let root = manifest_dir.join("../..");
    let git_dir = root.join(".git");
    let mut watched = vec![
        git_dir.join("HEAD"),
        git_dir.join("index"),
        root.join("crates"),
        root.join("Cargo.toml"),
    ];
    if let Ok(head) = std::fs::read_to_string(git_dir.join("HEAD"))
        && let Some(reference) = head.trim().strip_prefix("ref: ")
    {
        watched.push(git_dir.join(reference));
    }
    for path in watched {
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

/// `git rev-parse --short HEAD`, plus `-dirty` when `git status --porcelain`
/// lists anything; `unknown` when git is missing or this is no repository.
fn git_commit(dir: &Path) -> String {
    let Some(commit) = run(Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(dir))
    else {
        return "unknown".into();
    };
    let dirty = run(Command::new("git")
        // No optional locks: a plain `git status` may rewrite the index,
        // which would re-trigger this script on every build.
        .args(["--no-optional-locks", "status", "--porcelain"])
        .current_dir(dir))
    .is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    }
}

/// Runs `cmd`; its trimmed stdout if it succeeded, else `None`.
fn run(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Some(text.lines().next().unwrap_or("").to_string())
}
