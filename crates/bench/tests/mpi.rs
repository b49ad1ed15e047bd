//! Active Messages over MPI (feature `mpi`): the applications give the
//! shared-memory checksums over every transport, and a killed rank ends
//! the job with an error that names it. Runs `mpiexec` with 4 ranks on 2
//! emulated hosts (oversubscribed on a small machine, so the inputs are
//! the quick ones).
#![cfg(feature = "mpi")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use symmetry_bench::kernels::am_job::{spawn_app, spawn_app_mpi, summarize};
use symmetry_workloads::am_apps::{App, Size};

const EXE: &str = env!("CARGO_BIN_EXE_symmetry");
const LIMIT: Duration = Duration::from_secs(300);

fn have_mpiexec() -> bool {
    let ok = Command::new(symmetry_bench::kernels::am_job::mpiexec())
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED: no mpiexec on the PATH (Debian: apt-get install mpich)");
    }
    ok
}

#[test]
fn fft_con_and_sample_give_the_shared_memory_checksums_over_every_transport() {
    if !have_mpiexec() {
        return;
    }
    let exe = Path::new(EXE);
    for app in [App::Fft, App::ConComm, App::ConComp, App::Sample] {
        for algo in ["lock-free", "stamp"] {
            let shm = spawn_app(exe, 4, app, algo, Size::Quick, true).expect("the shm job runs");
            let want = summarize(&shm);
            assert!(want.verified, "{} {algo} over shm", app.name());
            for (transport, hosts) in [("hierarchical", 2), ("mpi", 1), ("shm", 1)] {
                let outs = spawn_app_mpi(exe, 4, app, algo, Size::Quick, transport, hosts, LIMIT)
                    .unwrap_or_else(|e| panic!("{e}"));
                let got = summarize(&outs);
                let what = format!(
                    "{} with {algo} over {transport} on {hosts} host(s)",
                    app.name()
                );
                assert!(got.verified, "{what} did not verify");
                assert_eq!(got.checksum, want.checksum, "{what}");
                for (o, w) in outs.iter().zip(&shm) {
                    assert_eq!(o.checksum, w.checksum, "{what}: a rank's checksum");
                }
            }
        }
    }
}

/// The pids of the processes whose environment says MPI rank `rank` and
/// whose command line runs `am rank` with `marker`.
fn rank_pids(rank: u32, marker: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let has = |hay: &[u8], needle: &[u8]| hay.split(|&b| b == 0).any(|p| p == needle);
            has(&cmd, b"rank")
                && has(&cmd, marker.as_bytes())
                && has(&env, format!("PMI_RANK={rank}").as_bytes())
        })
        .collect()
}

#[test]
fn a_rank_killed_under_mpiexec_ends_the_job_with_an_error_naming_it() {
    if !have_mpiexec() {
        return;
    }
    for transport in ["hierarchical", "mpi"] {
        // The full-size sample sort runs for seconds: long enough to be
        // killed in the middle. `ttas`, which the other test does not use,
        // tells this test's ranks apart.
        let start = Instant::now();
        let handle = std::thread::spawn(move || {
            spawn_app_mpi(
                Path::new(EXE),
                4,
                App::Sample,
                "ttas",
                Size::Full,
                transport,
                2,
                LIMIT,
            )
        });
        let mut killed = None;
        while killed.is_none() && start.elapsed() < Duration::from_secs(60) && !handle.is_finished()
        {
            std::thread::sleep(Duration::from_millis(300));
            if let Some(&pid) = rank_pids(2, "ttas").first() {
                // Past MPI's start-up (a process killed inside MPI_Init can
                // take others down first, and mpiexec names only the first
                // to end), into the sort.
                std::thread::sleep(Duration::from_millis(1500));
                // SAFETY: kill(2) on a pid we just read; at worst it is gone.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                killed = Some(pid);
            }
        }
        let result = handle.join().expect("the launcher thread");
        let pid = killed.expect("rank 2 was found and killed");
        let err = result.expect_err("a job with a killed rank fails");
        // Shown with `--nocapture`, and in the log of a failed run.
        eprintln!("{transport}: {err}");
        assert!(
            err.contains(&format!("rank 2 (pid {pid})")),
            "{transport}: the error names the rank: {err}"
        );
        assert!(
            start.elapsed() < LIMIT,
            "{transport}: ended in bounded time"
        );
    }
}

#[test]
fn one_senders_messages_of_every_size_arrive_in_order_and_whole_over_every_transport() {
    if !have_mpiexec() {
        return;
    }
    // 64 KiB bulk blocks: longer than one posted MPI receive, so over a
    // wire the order check of `am clumps` interleaves messages sent whole
    // with messages announced and sent on the second communicator; a
    // message out of order or altered fails its rank, and the job.
    for (transport, hosts) in [("mpi", 1), ("hierarchical", 2), ("shm", 1)] {
        let dir = std::env::temp_dir().join(format!(
            "symmetry-mpi-order-{}-{transport}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let out = dir.join("clumps.jsonl");
        // Plain `mpiexec`, not `mpiexec_job`: UCX's default 64-message
        // FIFOs fill here, so sends also take UCX's pending path, which
        // must keep their order too.
        let run = Command::new(symmetry_bench::kernels::am_job::mpiexec())
            .args(["-n", "4"])
            .arg(EXE)
            .args(["am", "clumps", "--rounds", "20", "--blocks", "1"])
            .args(["--burst", "50", "--bulk", "20", "--bulk-bytes", "65536"])
            .arg("--out")
            .arg(&out)
            .env("SYMMETRY_AM_TRANSPORT", transport)
            .env("SYMMETRY_AM_HOSTS", hosts.to_string())
            .output()
            .expect("mpiexec runs");
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            run.status.success(),
            "{transport} on {hosts} host(s): {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let pairs = text.lines().count();
        assert_eq!(pairs, if hosts == 2 { 2 } else { 1 }, "{transport}: {text}");
        assert!(
            text.contains("\"block_bytes\":65536"),
            "{transport}: {text}"
        );
    }
}
