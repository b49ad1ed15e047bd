//! Asymmetric fences: a store-then-load ordering (Dekker's pattern) whose
//! cost is paid by the rare side only, by Linux `membarrier(2)`.
//!
//! Two parties each store a flag and then load the other's: a sender
//! stores a message and loads whether the receiver sleeps; a receiver
//! stores that it sleeps and loads whether a message came. Each needs a
//! full fence between its store and its load, or both loads may miss both
//! stores (x86 lets a load pass an earlier store in the store buffer),
//! and the receiver sleeps through the message.
//!
//! When the sender's side runs on every message and the receiver's only
//! when it goes to sleep, the sender can use a compiler-only fence
//! ([`light`]) and the receiver a [`heavy`] one: `membarrier`'s global
//! expedited command makes every CPU that runs a thread of a registered
//! process execute a full barrier before the call returns (and a thread
//! that is not running has passed one, in the context switch). So either
//! the sender's load came after that barrier, and sees the receiver's
//! store (made before the call), or its own store, which precedes its load
//! in program order, came before the barrier and is visible to the
//! receiver's load after the call.
//!
//! Every process that uses [`light`] must have registered, which
//! [`asymmetric`] does (once per process) and reports: where the kernel
//! refuses (before Linux 4.16, or a seccomp filter), both sides fall back
//! to full fences, and [`light`] is one.

use std::sync::OnceLock;
use std::sync::atomic::{Ordering, compiler_fence, fence};

// From <linux/membarrier.h> (not all in the libc crate's version).
const MEMBARRIER_CMD_QUERY: libc::c_int = 0;
const MEMBARRIER_CMD_GLOBAL_EXPEDITED: libc::c_int = 1 << 1;
const MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED: libc::c_int = 1 << 2;

fn membarrier(cmd: libc::c_int) -> libc::c_long {
    // SAFETY: membarrier takes two integer arguments and touches no
    // memory of ours.
    unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            cmd,
            0 as libc::c_uint,
            0 as libc::c_int,
        )
    }
}

/// Whether this process uses asymmetric fences: the kernel offers
/// `membarrier`'s global expedited command and registered this process
/// for it (done on the first call, in every process that calls [`light`]
/// or [`heavy`]).
pub fn asymmetric() -> bool {
    static ASYM: OnceLock<bool> = OnceLock::new();
    *ASYM.get_or_init(|| {
        let cmds = membarrier(MEMBARRIER_CMD_QUERY);
        let wanted = (MEMBARRIER_CMD_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED)
            as libc::c_long;
        cmds >= 0
            && cmds & wanted == wanted
            && membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0
    })
}

/// The frequent side's fence: a compiler fence where [`asymmetric`]
/// holds (the hardware barrier comes from the other side's [`heavy`]),
/// else a full fence.
#[inline(always)]
pub fn light() {
    if asymmetric() {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The rare side's fence: a full barrier on every CPU that runs a thread
/// of a process that uses [`light`], where [`asymmetric`] holds (a system
/// call: microseconds), else a full fence of this thread.
#[inline]
pub fn heavy() {
    if !asymmetric() || membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0 {
        fence(Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_run_either_way() {
        let _ = asymmetric();
        light();
        heavy();
    }
}
