//! skynet on the peers: tokio tasks and Go goroutines. The symmetry side
//! is [`crate::kernels::fanout`].

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Command;
use std::time::Duration;

use crate::harness::ScratchDir;
use crate::kernels::fanout::{FANOUT, Meter, ScaleOut, skynet_expected};

type BoxedSum = Pin<Box<dyn Future<Output = u64> + Send>>;

fn tokio_node(num: u64, size: u64) -> BoxedSum {
    Box::pin(async move {
        if size <= 1 {
            return num;
        }
        let sub = size / FANOUT;
        let children: Vec<_> = (0..FANOUT)
            .map(|i| tokio::spawn(tokio_node(num + i * sub, sub)))
            .collect();
        let mut sum = 0;
        for c in children {
            sum += c.await.unwrap_or(0);
        }
        sum
    })
}

/// skynet on a fresh multi-thread tokio runtime with `workers` workers:
/// every node a `tokio::spawn`ed task that awaits its children's join
/// handles. Runtime set-up and shutdown are outside the timing.
///
/// # Panics
/// If the runtime cannot be built.
pub fn tokio_skynet(workers: usize, leaves: u64) -> ScaleOut {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .build()
        .expect("tokio_skynet: cannot build the tokio runtime");
    let meter = Meter::start();
    let sum = rt.block_on(async { tokio::spawn(tokio_node(0, leaves)).await.unwrap_or(0) });
    let out = meter.stop(sum == skynet_expected(leaves), meter.mappings_added());
    rt.shutdown_timeout(Duration::from_secs(5));
    out
}

/// The Go program, compiled on first use.
const GO_SOURCE: &str = include_str!("../../go/skynet.go");

/// Why Go could not be measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoError {
    /// No `go` on `PATH`.
    NotInstalled,
    /// `go build` or the program failed (its stderr, shortened).
    Failed(String),
}

impl std::fmt::Display for GoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GoError::NotInstalled => f.write_str("not installed (no `go` on PATH)"),
            GoError::Failed(e) => write!(f, "failed: {e}"),
        }
    }
}

fn shorten(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let s = s.trim();
    s.chars().take(300).collect()
}

/// The `go` version, or `None` if there is no `go` on `PATH`.
pub fn go_version() -> Option<String> {
    let out = Command::new("go").arg("version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The Go skynet, built into a private scratch directory that is removed
/// (binary and all) when this is dropped.
#[derive(Debug)]
pub struct GoSkynet {
    bin: PathBuf,
    _dir: ScratchDir,
}

impl GoSkynet {
    /// Compiles the program with the `go` on `PATH`.
    pub fn build() -> Result<GoSkynet, GoError> {
        go_version().ok_or(GoError::NotInstalled)?;
        let dir = ScratchDir::new("symmetry-go-skynet").map_err(GoError::Failed)?;
        let src = dir.path().join("skynet.go");
        std::fs::write(&src, GO_SOURCE).map_err(|e| GoError::Failed(e.to_string()))?;
        let bin = dir.path().join("skynet");
        let out = Command::new("go")
            .arg("build")
            .arg("-o")
            .arg(&bin)
            .arg(&src)
            .current_dir(dir.path())
            // Never fetch a toolchain or modules: the program has none.
            .env("GOTOOLCHAIN", "local")
            .output()
            .map_err(|e| GoError::Failed(e.to_string()))?;
        if !out.status.success() {
            return Err(GoError::Failed(shorten(&out.stderr)));
        }
        Ok(GoSkynet { bin, _dir: dir })
    }

    /// skynet on goroutines with `GOMAXPROCS = procs`, as a child process;
    /// the time and memory are the Go program's own (its start-up is
    /// outside them).
    pub fn run(&self, procs: usize, leaves: u64) -> Result<ScaleOut, GoError> {
        let out = Command::new(&self.bin)
            .arg(leaves.to_string())
            .env("GOMAXPROCS", procs.max(1).to_string())
            .output()
            .map_err(|e| GoError::Failed(e.to_string()))?;
        if !out.status.success() {
            return Err(GoError::Failed(shorten(&out.stderr)));
        }
        parse_go_output(&String::from_utf8_lossy(&out.stdout), leaves)
    }
}

/// Reads the Go program's `ns=... sum=... peak_rss_bytes=...` line.
fn parse_go_output(line: &str, leaves: u64) -> Result<ScaleOut, GoError> {
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
            .and_then(|v| v.parse::<u64>().ok())
    };
    let (Some(ns), Some(sum)) = (field("ns"), field("sum")) else {
        return Err(GoError::Failed(format!(
            "unexpected output: {}",
            line.trim()
        )));
    };
    Ok(ScaleOut {
        elapsed: Duration::from_nanos(ns),
        completed: sum == skynet_expected(leaves),
        peak_rss_bytes: field("peak_rss_bytes").unwrap_or(0),
        mappings_added: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokio_skynet_sums() {
        let o = tokio_skynet(2, 1_000);
        assert!(o.completed, "{o:?}");
    }

    #[test]
    fn go_skynet_runs_and_cleans_up_or_says_why() {
        match GoSkynet::build() {
            Ok(go) => {
                let o = go.run(1, 1_000).unwrap();
                assert!(o.completed, "{o:?}");
                let dir = go.bin.parent().unwrap().to_path_buf();
                drop(go);
                assert!(!dir.exists(), "{} was left behind", dir.display());
            }
            Err(GoError::NotInstalled) => {}
            Err(e) => panic!("{e}"),
        }
    }
}
