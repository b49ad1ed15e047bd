//! Stacks: allocation, the guard page, and the stack-overflow report.
//!
//! Stacks are corosensei's [`DefaultStack`](corosensei::stack::DefaultStack):
//! an anonymous `mmap` with one `PROT_NONE` guard page at its low end. A
//! fresh one costs an `mmap` and an `mprotect` (microseconds, plus page
//! faults on first touch); a pooled one costs a list operation. That gap is
//! the reason for ALL89's free lists, and `presto-create-delete` measures it.
//!
//! A user thread that runs off the end of its stack touches the guard page
//! and takes `SIGSEGV`. The handler installed here (on an alternate signal
//! stack) checks whether the faulting address lies in the guard area of the
//! user thread running on this processor; if so it writes
//! `user thread '<name>' (id N) has overflowed its stack` to stderr and
//! aborts, as std does for OS threads. Any other fault goes to the handler
//! that was installed before (std's, or the default action).

use std::cell::Cell;
use std::sync::Once;

use corosensei::stack::Stack as _;

use crate::cb::{Cb, Stack};

/// Faults this far below the guard page still count as a stack overflow
/// (a large frame can jump past a single guard page).
const GUARD_SLACK: usize = 64 * 1024;

thread_local! {
    /// The control block running on this OS thread (null on the scheduler
    /// stack). Const-initialized and destructor-free, so the signal handler
    /// may read it.
    static RUNNING_CB: Cell<*const Cb> = const { Cell::new(std::ptr::null()) };
}

/// Records which control block runs on this processor now (for the
/// overflow report).
#[inline(always)]
pub(crate) fn set_running(cb: *const Cb) {
    RUNNING_CB.with(|c| c.set(cb));
}

/// The system page size (asked once).
pub(crate) fn page_size() -> usize {
    static PAGE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    // Relaxed: an idempotent cache of a constant.
    let p = PAGE.load(std::sync::atomic::Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let p = if p > 0 { p as usize } else { 4096 };
    PAGE.store(p, std::sync::atomic::Ordering::Relaxed);
    p
}

/// The guard area `[lo, hi)` of a stack: the guard page plus
/// [`GUARD_SLACK`] below it. corosensei's `limit()` is the lowest address
/// of the mapping, guard page included, so the guard page is
/// `[limit, limit + page)`.
pub(crate) fn guard_of(stack: &Stack) -> (usize, usize) {
    let limit = stack.limit().get();
    let hi = limit + page_size();
    let lo = limit.saturating_sub(GUARD_SLACK);
    (lo, hi)
}

/// Allocates a fresh stack of at least `size` bytes plus a guard page.
/// On failure the process aborts with a message: a processor that cannot
/// get a stack cannot start the thread it has already dequeued.
#[cold]
pub(crate) fn fresh_stack(size: usize) -> Stack {
    match Stack::new(size) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("symmetry-threads: cannot allocate a {size}-byte user-thread stack: {e}");
            std::process::abort()
        }
    }
}

static INSTALL: Once = Once::new();
static mut OLD_SEGV: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::zeroed();
static mut OLD_BUS: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::zeroed();

/// Installs the overflow handler for `SIGSEGV` and `SIGBUS` (once per
/// process), chaining to the handlers that were there before.
pub(crate) fn install_overflow_handler() {
    INSTALL.call_once(|| {
        // SAFETY: plain sigaction calls with valid, zeroed structures; the
        // OLD_* statics are written here, once, before the handler can run
        // (the handler is installed by this very call).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_fault as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(
                libc::SIGSEGV,
                &sa,
                (&raw mut OLD_SEGV).cast::<libc::sigaction>(),
            );
            libc::sigaction(
                libc::SIGBUS,
                &sa,
                (&raw mut OLD_BUS).cast::<libc::sigaction>(),
            );
        }
    });
}

/// An alternate signal stack for one processor, so the handler can run
/// when the user stack is exhausted. Removed on drop.
#[derive(Debug)]
pub(crate) struct AltStack {
    map: *mut libc::c_void,
    len: usize,
}

impl AltStack {
    /// Installs an alternate signal stack on this OS thread unless one is
    /// already there (std installs one on the threads it spawns).
    pub(crate) fn ensure() -> Option<AltStack> {
        // SAFETY: querying the current alternate stack.
        unsafe {
            let mut cur: libc::stack_t = std::mem::zeroed();
            if libc::sigaltstack(std::ptr::null(), &mut cur) == 0
                && cur.ss_flags & libc::SS_DISABLE == 0
            {
                return None;
            }
            let len = (libc::SIGSTKSZ).max(64 * 1024);
            let map = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if map == libc::MAP_FAILED {
                return None;
            }
            let st = libc::stack_t {
                ss_sp: map,
                ss_flags: 0,
                ss_size: len,
            };
            libc::sigaltstack(&st, std::ptr::null_mut());
            Some(AltStack { map, len })
        }
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        // SAFETY: disables the alternate stack we installed on this thread
        // (the processor's), then unmaps it.
        unsafe {
            let st = libc::stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            libc::sigaltstack(&st, std::ptr::null_mut());
            libc::munmap(self.map, self.len);
        }
    }
}

fn write_stderr(bytes: &[u8]) {
    // SAFETY: write(2) on fd 2 with a valid buffer; async-signal-safe.
    unsafe {
        libc::write(2, bytes.as_ptr().cast(), bytes.len());
    }
}

fn write_u64(mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    write_stderr(&buf[i..]);
}

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let cb = RUNNING_CB.with(|c| c.get());
    if !cb.is_null() {
        // SAFETY: RUNNING_CB points at the control block running on this
        // OS thread; control blocks are type-stable.
        let cb = unsafe { &*cb };
        let (lo, hi) = cb.guard.get();
        if addr >= lo && addr < hi {
            let r = crate::cb::CbRef::from_cb(cb);
            write_stderr(b"\nsymmetry-threads: user thread '");
            write_stderr(r.name().unwrap_or("<unnamed>").as_bytes());
            write_stderr(b"' (id ");
            write_u64(r.id());
            write_stderr(b") has overflowed its stack\nfatal runtime error: stack overflow\n");
            // SAFETY: abort is async-signal-safe.
            unsafe { libc::abort() };
        }
    }
    // Not ours: hand over to the previous handler.
    // SAFETY: OLD_* were written by `install_overflow_handler` before this
    // handler was installed and are never written again.
    let old = unsafe {
        if sig == libc::SIGBUS {
            OLD_BUS.assume_init()
        } else {
            OLD_SEGV.assume_init()
        }
    };
    if old.sa_sigaction == libc::SIG_DFL || old.sa_sigaction == libc::SIG_IGN {
        // Restore the default action and return: the fault repeats and the
        // process dies with the signal.
        // SAFETY: resetting a signal disposition.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    } else if old.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed as a three-argument
        // handler; we pass it the same arguments.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(old.sa_sigaction) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a one-argument handler.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(old.sa_sigaction) };
        f(sig);
    }
}
