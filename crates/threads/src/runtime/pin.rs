//! Pinning: binds a processor's OS thread to one CPU
//! ([`Builder::pin`](super::Builder::pin)).

use symmetry_locks::platform::affinity;

/// Pins the calling OS thread to the `index`-th allowed CPU (modulo); best
/// effort: an unpinned processor still runs correctly.
pub(super) fn pin_to(index: usize) {
    let cpus = affinity::allowed_cpus();
    if let Some(&cpu) = cpus.get(index % cpus.len().max(1)) {
        let _ = affinity::pin_current(cpu);
    }
}
