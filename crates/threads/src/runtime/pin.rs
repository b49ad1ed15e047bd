//! Pinning: binds a processor's OS thread to one CPU
//! ([`Builder::pin`](super::Builder::pin)).

/// Pins the calling OS thread to the `index`-th allowed CPU (modulo).
pub(super) fn pin_to(index: usize) {
    // SAFETY: plain affinity syscalls on the calling thread with a
    // properly sized cpu_set_t.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return;
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect();
        if cpus.is_empty() {
            return;
        }
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus[index % cpus.len()], &mut one);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one);
    }
}
