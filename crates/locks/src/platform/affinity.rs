//! CPU affinity: which CPUs the calling thread may run on, and pinning it
//! to one of them (`sched_getaffinity(2)`, `sched_setaffinity(2)`).
//!
//! [`pin_current`] allocates nothing, so it may be called between `fork`
//! and `exec`; [`allowed_cpus`] returns a `Vec`.

use std::io;

/// The CPUs the calling thread may run on, in ascending order. When the
/// kernel refuses to say, `0..available_parallelism()`.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain bytes (all-zero is the empty set);
    // sched_getaffinity fills at most the size we pass.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Pins the calling thread to `cpu`.
///
/// # Errors
/// The kernel's refusal, e.g. `EINVAL` for a CPU outside the allowed set,
/// or `InvalidInput` for a CPU number past `CPU_SETSIZE`.
pub fn pin_current(cpu: usize) -> io::Result<()> {
    pin_current_to(&[cpu])
}

/// Lets the calling thread run on the CPUs of `cpus` only.
///
/// # Errors
/// As [`pin_current`]; an empty list is `InvalidInput`.
pub fn pin_current_to(cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() || cpus.iter().any(|&c| c >= libc::CPU_SETSIZE as usize) {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    // SAFETY: cpu_set_t is plain bytes; every CPU number is below
    // CPU_SETSIZE (checked above), so CPU_SET stays in bounds; the kernel
    // reads exactly the size we pass and changes only this thread.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_pinned_to_an_allowed_cpu_sees_only_it() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        let last = *cpus.last().unwrap();
        std::thread::spawn(move || {
            pin_current(last).unwrap();
            assert_eq!(allowed_cpus(), vec![last]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn bad_cpus_are_errors() {
        assert!(pin_current(usize::MAX).is_err());
        assert!(pin_current_to(&[]).is_err());
    }
}
