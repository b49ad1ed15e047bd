//! Thread workloads at scale: the skynet fan-out and a million blocked
//! threads, on the symmetry-threads runtime. Peers run the same shapes in
//! [`crate::peers::fanout`].
//!
//! Both report memory: the process's peak resident set over the run
//! (`VmHWM`, reset before it through `/proc/self/clear_refs`) and its
//! kernel mappings (`/proc/self/maps` lines) at the point of most threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use symmetry_threads::sync::Barrier;
use symmetry_threads::{Handle, Runtime, Strategy};

/// Children per skynet node.
pub const FANOUT: u64 = 10;

/// The skynet sum for `leaves` leaves numbered 0..leaves.
pub fn skynet_expected(leaves: u64) -> u64 {
    leaves * (leaves.saturating_sub(1)) / 2
}

/// What one fan-out or blocked-threads run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleOut {
    /// Wall-clock time of the run.
    pub elapsed: Duration,
    /// The run finished with the right answer (skynet's sum; every
    /// blocked thread released and finished).
    pub completed: bool,
    /// Peak resident bytes of the process during the run, above what it
    /// held when the run began.
    pub peak_rss_bytes: u64,
    /// Kernel mappings at the point of most threads, above the start.
    pub mappings_added: i64,
}

/// Resets the kernel's peak-RSS mark of this process (`VmHWM`); false if
/// the kernel refused (then the peak covers the whole process life).
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// `VmHWM` and `VmRSS` of this process, bytes.
pub fn rss_now_and_peak() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |key: &str| {
        s.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (kb("VmRSS:"), kb("VmHWM:"))
}

/// Kernel mappings of this process now.
pub fn mappings() -> i64 {
    symmetry_threads::stack::kernel_mappings().unwrap_or(0) as i64
}

/// The measurement around one run: wall-clock time, the peak resident
/// set above the start, and the kernel mappings gained.
#[derive(Debug)]
pub struct Meter {
    t0: Instant,
    rss0: u64,
    maps0: i64,
}

impl Meter {
    /// Resets the peak-RSS mark and starts the clock.
    pub fn start() -> Meter {
        let maps0 = mappings();
        reset_peak_rss();
        let (rss0, _) = rss_now_and_peak();
        Meter {
            t0: Instant::now(),
            rss0,
            maps0,
        }
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.t0.elapsed()
    }

    /// Kernel mappings gained since the start.
    pub fn mappings_added(&self) -> i64 {
        mappings() - self.maps0
    }

    /// Stops the clock: the run's outcome, with `mappings_added` as read
    /// at the point of most threads.
    pub fn stop(&self, completed: bool, mappings_added: i64) -> ScaleOut {
        let elapsed = self.elapsed();
        let (_, peak) = rss_now_and_peak();
        ScaleOut {
            elapsed,
            completed,
            peak_rss_bytes: peak.saturating_sub(self.rss0),
            mappings_added,
        }
    }
}

/// A runtime of strategy `S` with `processors` processors.
fn runtime<S: Strategy>(processors: usize) -> Runtime<S> {
    Runtime::builder()
        .processors(processors.max(1))
        .build()
        .expect("runtime")
}

fn node<S: Strategy>(h: &Handle<S>, num: u64, size: u64) -> u64 {
    if size <= 1 {
        return num;
    }
    let sub = size / FANOUT;
    let children: Vec<_> = (0..FANOUT)
        .map(|i| {
            let h2 = h.clone();
            h.spawn(move || node(&h2, num + i * sub, sub))
        })
        .collect();
    children.into_iter().map(|c| c.join().unwrap_or(0)).sum()
}

/// skynet on strategy `S` with `processors` processors: the root spawns
/// [`FANOUT`] children, each spawns as many, down to `leaves` leaves
/// (a power of ten); every node joins its children and returns their sum.
/// Runtime set-up and shutdown are outside the timing.
pub fn skynet<S: Strategy>(processors: usize, leaves: u64) -> ScaleOut {
    let mut rt = runtime::<S>(processors);
    let h = rt.handle();
    let meter = Meter::start();
    let sum = rt.block_on(move || node(&h, 0, leaves)).unwrap_or(0);
    let out = meter.stop(sum == skynet_expected(leaves), meter.mappings_added());
    rt.shutdown();
    out
}

/// `n` user threads on strategy `S`, all blocked on one barrier at once,
/// then all released and finished. The time covers spawning, blocking,
/// release and finish; memory and mappings are read while all `n` wait.
/// Gives up (not completed) if the threads are not all blocked or not
/// all finished within `budget`.
pub fn blocked<S: Strategy>(processors: usize, n: usize, budget: Duration) -> ScaleOut {
    let mut rt = runtime::<S>(processors);
    let h = rt.handle();
    let meter = Meter::start();
    let barrier = Arc::new(Barrier::new(n + 1));
    let done = Arc::new(AtomicUsize::new(0));
    for _ in 0..n {
        let (b, d) = (Arc::clone(&barrier), Arc::clone(&done));
        h.spawn_detached(move || {
            b.wait();
            // Relaxed: a count read after the runtime's own hand-offs.
            d.fetch_add(1, Ordering::Relaxed);
        });
    }
    let mut completed = true;
    while barrier.waiting() < n {
        if meter.elapsed() > budget {
            completed = false;
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let maps = meter.mappings_added();
    if completed {
        // The last party: an OS thread arrives without blocking.
        barrier.wait();
        while done.load(Ordering::Relaxed) < n {
            if meter.elapsed() > budget {
                completed = false;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let out = meter.stop(completed, maps);
    drop(h);
    // Threads still blocked (a run out of budget) are abandoned and
    // counted by the shutdown report.
    rt.shutdown();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use symmetry_threads::{LocalReadyq, SingleLock};

    #[test]
    fn skynet_sums_small_trees() {
        assert_eq!(skynet_expected(1_000_000), 499_999_500_000);
        let o = skynet::<LocalReadyq>(2, 1_000);
        assert!(o.completed, "{o:?}");
        let o = skynet::<SingleLock>(1, 100);
        assert!(o.completed, "{o:?}");
    }

    #[test]
    fn blocked_threads_all_finish() {
        let o = blocked::<LocalReadyq>(2, 10_000, Duration::from_secs(60));
        assert!(o.completed, "{o:?}");
    }
}
