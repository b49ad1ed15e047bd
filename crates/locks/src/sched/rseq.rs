//! `rseq`: the Linux rseq time-slice extension (Linux 7.0) as a scheduler
//! interface: the kernel's own version of Symunix's non-preemption request.
//!
//! The ABI (`include/uapi/linux/rseq.h`, `prctl.h`,
//! `Documentation/userspace-api/rseq.rst` of Linux 7.0):
//!
//! * each thread's `struct rseq` (registered by glibc, found at the thread
//!   pointer plus `__rseq_offset`) has a `slice_ctrl` word at offset 28:
//!   byte 28 `request` (written by the thread), byte 29 `granted` (written
//!   by the kernel);
//! * `flags` (offset 16) bit 4 says the kernel offers the extension;
//! * a thread opts in with `prctl(PR_RSEQ_SLICE_EXTENSION = 79,
//!   PR_RSEQ_SLICE_EXTENSION_SET = 2, PR_RSEQ_SLICE_EXT_ENABLE = 1, 0, 0)`;
//! * the protocol: `request = 1`, critical section, `request = 0`, and if
//!   `granted` is set, the `rseq_slice_yield` system call (471 on x86_64
//!   and i386) gives the processor back.
//!
//! The extension exists only if the kernel was built with
//! `CONFIG_RSEQ_SLICE_EXTENSION`, not disabled at boot, and glibc
//! registered an rseq area longer than the original 32 bytes. [`available`]
//! checks each condition at run time and says which one is missing; where
//! it is missing every hook of [`RseqSlice`] does nothing, so a lock over it
//! behaves as over [`Stock`](super::Stock).
//!
//! The kernel does not publish which threads are running, so with this
//! interface the context block never says `Preempted`: `smart-q` and
//! `mcs-np` over `rseq` skip preempted waiters by their heartbeats, as
//! over `Stock` (see `mcs_tp`), and the extension adds what only the
//! kernel can give, a holder that is not preempted inside its critical
//! section.

use core::cell::Cell;
use std::sync::OnceLock;

use super::{ContextBlock, Scheduler};

const PR_RSEQ_SLICE_EXTENSION: libc::c_int = 79;
const PR_RSEQ_SLICE_EXTENSION_SET: libc::c_ulong = 2;
const PR_RSEQ_SLICE_EXT_ENABLE: libc::c_ulong = 1;
/// `rseq_slice_yield` on x86_64 and i386.
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
const SYS_RSEQ_SLICE_YIELD: libc::c_long = 471;
/// `struct rseq` offsets.
const FLAGS: usize = 16;
const REQUEST: usize = 28;
const GRANTED: usize = 29;
/// `RSEQ_CS_FLAG_SLICE_EXT_AVAILABLE`.
const FLAG_AVAILABLE: u32 = 1 << 4;
/// The smallest registration that holds `slice_ctrl`.
const MIN_SIZE: u32 = 33;

/// Whether the extension can be used, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    /// The kernel offers it and this process enabled it.
    Available,
    /// It cannot be used here; the reason names the missing condition.
    Absent(String),
}

/// The running kernel's time-slice extension, checked once per process
/// (on the calling thread, which also enables it for itself).
pub fn available() -> &'static Availability {
    static AVAILABLE: OnceLock<Availability> = OnceLock::new();
    AVAILABLE.get_or_init(|| match area() {
        Err(why) => Availability::Absent(why),
        Ok(area) => match enable(area) {
            Ok(()) => Availability::Available,
            Err(why) => Availability::Absent(why),
        },
    })
}

/// The kernel release, for messages (`uname -r`).
fn kernel_release() -> String {
    // SAFETY: utsname is plain bytes; uname fills it.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "unknown".into();
        }
        std::ffi::CStr::from_ptr(u.release.as_ptr())
            .to_string_lossy()
            .into_owned()
    }
}

/// The calling thread's registered `struct rseq`.
fn area() -> Result<*mut u8, String> {
    // SAFETY: dlsym with RTLD_DEFAULT and NUL-terminated names; the
    // symbols, when present, are glibc's `const unsigned int __rseq_size`
    // and `const ptrdiff_t __rseq_offset`.
    let (size, offset) = unsafe {
        let size = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr());
        let offset = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr());
        if size.is_null() || offset.is_null() {
            return Err(
                "the C library does not export its rseq area (glibc 2.35 or later does)".into(),
            );
        }
        (*(size as *const u32), *(offset as *const isize))
    };
    if size == 0 {
        return Err("the C library did not register rseq for this process".into());
    }
    if size < MIN_SIZE {
        return Err(format!(
            "not available on this kernel ({}): its rseq area has {size} bytes, the time-slice \
             extension needs {MIN_SIZE} (Linux 7.0 and glibc 2.41 or later)",
            kernel_release()
        ));
    }
    let tp = thread_pointer().ok_or("no thread pointer on this architecture")?;
    Ok(tp.wrapping_offset(offset))
}

#[cfg(target_arch = "x86_64")]
fn thread_pointer() -> Option<*mut u8> {
    let tp: *mut u8;
    // SAFETY: on x86_64 Linux, fs:0 holds the thread control block's
    // pointer to itself (the TLS ABI); reading it has no side effect.
    unsafe {
        core::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags))
    };
    Some(tp)
}

#[cfg(target_arch = "aarch64")]
fn thread_pointer() -> Option<*mut u8> {
    let tp: *mut u8;
    // SAFETY: reading tpidr_el0 has no side effect.
    unsafe {
        core::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem, preserves_flags))
    };
    Some(tp)
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn thread_pointer() -> Option<*mut u8> {
    None
}

/// Enables the extension for the calling thread.
fn enable(area: *mut u8) -> Result<(), String> {
    // SAFETY: `area` is this thread's registered struct rseq, at least
    // MIN_SIZE bytes; the kernel writes `flags` only at registration and
    // prctl, on this thread.
    let flags = unsafe { area.add(FLAGS).cast::<u32>().read_volatile() };
    if flags & FLAG_AVAILABLE == 0 {
        return Err(format!(
            "not available on this kernel ({}): rseq does not offer the time-slice extension \
             (needs Linux 7.0 built with CONFIG_RSEQ_SLICE_EXTENSION)",
            kernel_release()
        ));
    }
    // SAFETY: prctl with integer arguments.
    let r = unsafe {
        libc::prctl(
            PR_RSEQ_SLICE_EXTENSION,
            PR_RSEQ_SLICE_EXTENSION_SET,
            PR_RSEQ_SLICE_EXT_ENABLE,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if r != 0 {
        return Err(format!(
            "not available on this kernel ({}): enabling it failed: {}",
            kernel_release(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

std::thread_local! {
    /// This thread's `struct rseq`, once enabled (null: not yet tried or
    /// unavailable; `tried` says which).
    static AREA: Cell<*mut u8> = const { Cell::new(core::ptr::null_mut()) };
    static TRIED: Cell<bool> = const { Cell::new(false) };
}

/// The calling thread's area with the extension enabled, or null.
#[inline]
fn my_area() -> *mut u8 {
    let a = AREA.with(Cell::get);
    if a.is_null() && !TRIED.with(Cell::get) {
        return first_use();
    }
    a
}

#[cold]
fn first_use() -> *mut u8 {
    TRIED.with(|t| t.set(true));
    if *available() != Availability::Available {
        return core::ptr::null_mut();
    }
    match area().and_then(|a| enable(a).map(|()| a)) {
        Ok(a) => {
            AREA.with(|c| c.set(a));
            a
        }
        Err(_) => core::ptr::null_mut(),
    }
}

/// The rseq time-slice extension as a lock's scheduler interface.
///
/// ```
/// use symmetry_locks::sched::rseq::{self, RseqSlice};
/// use symmetry_locks::{McsNp, lock_api::Mutex};
///
/// // Where the kernel lacks the extension, requests are not made and the
/// // lock falls back on time publishing, as over `Stock`.
/// println!("rseq time-slice extension: {:?}", rseq::available());
/// let m: Mutex<McsNp<RseqSlice>, Vec<u32>> = Mutex::new(Vec::new());
/// m.lock().push(1);
/// assert_eq!(*m.lock(), [1]);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct RseqSlice;

impl Scheduler for RseqSlice {
    const NAME: &'static str = "rseq";
    const SHOWS_PREEMPTION: bool = false;

    #[inline]
    fn request(_cb: &ContextBlock) {
        let a = my_area();
        if !a.is_null() {
            // SAFETY: our enabled area; `request` is ours to write.
            unsafe { a.add(REQUEST).write_volatile(1) };
            core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
        }
    }

    #[inline]
    fn relinquish(_cb: &ContextBlock) {
        let a = my_area();
        if !a.is_null() {
            core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
            // SAFETY: as in `request`.
            unsafe { a.add(REQUEST).write_volatile(0) };
        }
    }

    #[inline]
    fn warned(_cb: &ContextBlock) -> bool {
        let a = AREA.with(Cell::get);
        // SAFETY: our enabled area; the kernel writes `granted` only on
        // this thread's way back to user space.
        !a.is_null() && unsafe { a.add(GRANTED).read_volatile() } != 0
    }

    fn yield_now(_cb: &ContextBlock) {
        #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
        // SAFETY: a system call without arguments; ENOSYS where absent.
        unsafe {
            libc::syscall(SYS_RSEQ_SLICE_YIELD);
        }
    }
}
