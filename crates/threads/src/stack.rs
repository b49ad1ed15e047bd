//! Stacks: slabs, guard regions, and the stack-overflow report.
//!
//! # Slabs
//!
//! A user thread's stack is carved from a *slab*: one large anonymous
//! `mmap` (reserved with `MAP_NORESERVE`, so untouched stack costs no
//! memory and no commit charge) cut into equal slots of guard region plus
//! usable stack. Slots are carved on demand, one at a time, and a stack
//! that is dropped returns its slot to the process-wide pool of its size
//! (its pages are given back to the kernel with `MADV_DONTNEED` once more
//! than [`RETAINED`] slots are free), so a later runtime reuses it. Slabs
//! are never unmapped: after a burst of a million threads the process
//! keeps the burst's address space reserved, but not its memory. The
//! runtime's strategies keep their own free lists of [`Stack`]s in front
//! of this pool (ALL89's free lists); a fresh one is the slow path. The
//! top cache lines of a slot hold its fiber (the coroutine that starts
//! one thread after another on the stack; see the `fiber` module), so a stack
//! on a free list is ready to start its next thread with one switch.
//!
//! # Guard regions
//!
//! The low [`GUARD`] bytes of every slot are a guard region. On Linux 6.13
//! and later it is installed with `madvise(MADV_GUARD_INSTALL)`, which
//! marks the pages in the page tables and creates no kernel mapping, so a
//! million stacks cost one mapping per slab instead of two per stack
//! (`vm.max_map_count`, 65,530 by default, capped the old scheme near
//! 32,000 live stacks). On older kernels, or with
//! `SYMMETRY_STACK_GUARD=mprotect` in the environment, the guard is made
//! `PROT_NONE` with `mprotect`, which splits the slab's mapping around each
//! guard; the pool then counts the mappings it creates and, before the
//! process would reach `vm.max_map_count`, refuses a new stack with
//! [`StackError::MapLimit`] (the thread fails to start and its join handle
//! says why) instead of letting the kernel abort the process.
//!
//! The guard is [`GUARD`] bytes, not one page: the slot below is another
//! thread's stack, not a hole, so a frame larger than the guard that
//! skipped it would land in a neighbour. Rust probes every page of a large
//! frame, and 64 KiB covers the frames C code makes without probes.
//!
//! # Overflow report
//!
//! A user thread that runs off the end of its stack touches its guard and
//! takes `SIGSEGV`. The handler installed here (on an alternate signal
//! stack) checks whether the faulting address lies in the guard of the
//! user thread running on this processor (the runtime registers the
//! function that names that thread when it installs the handler, so this
//! module does not reach into the runtime); if so it writes
//! `user thread '<name>' (id N) has overflowed its stack` to stderr and
//! aborts, as std does for OS threads. Any other fault goes to the handler
//! that was installed before (std's, or the default action).

use std::sync::{Mutex, Once};
use symmetry_locks::sync::{AtomicU8, AtomicUsize, Ordering};

use crate::cb::{CbRef, Switch};
use crate::fiber::{Fiber, SlotMem};

/// Bytes of guard region below every stack (see the module docs).
pub const GUARD: usize = 64 * 1024;

/// Bytes of address space per slab (reserved, not committed).
const SLAB_BYTES: usize = 256 * 1024 * 1024;

/// Free slots per size that keep their pages; beyond this, a returned
/// slot's pages go back to the kernel.
pub const RETAINED: usize = 1024;

/// Mappings left to the rest of the process when guards are made with
/// `mprotect` (malloc arenas, libraries, other runtimes' slabs).
const MAP_RESERVE: usize = 4096;

/// `MADV_GUARD_INSTALL` (Linux 6.13, `include/uapi/asm-generic/mman-common.h`).
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// The system page size (asked once).
pub(crate) fn page_size() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    // Relaxed: an idempotent cache of a constant.
    let p = PAGE.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let p = if p > 0 { p as usize } else { 4096 };
    PAGE.store(p, Ordering::Relaxed);
    p
}

/// Why no stack could be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StackError {
    /// Guards are made with `mprotect` (no `MADV_GUARD_INSTALL` on this
    /// kernel, or `SYMMETRY_STACK_GUARD=mprotect`), and another stack would
    /// take the process past `vm.max_map_count` kernel mappings.
    MapLimit {
        /// Stacks of this process alive (in use or pooled) when refused.
        live_stacks: usize,
        /// The kernel's `vm.max_map_count`.
        max_map_count: usize,
    },
    /// The kernel refused the slab or the guard (`errno` text).
    Os(String),
}

impl std::fmt::Display for StackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StackError::MapLimit {
                live_stacks,
                max_map_count,
            } => write!(
                f,
                "no stack for a new user thread: {live_stacks} stacks are alive and each \
                 `mprotect` guard costs two kernel mappings, which would pass vm.max_map_count \
                 = {max_map_count} (this kernel has no MADV_GUARD_INSTALL, or \
                 SYMMETRY_STACK_GUARD=mprotect is set); raise vm.max_map_count or run on \
                 Linux 6.13 or later"
            ),
            StackError::Os(e) => write!(f, "no stack for a new user thread: {e}"),
        }
    }
}

impl std::error::Error for StackError {}

/// How guards are installed, decided at the first stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum GuardMode {
    /// `madvise(MADV_GUARD_INSTALL)`: no kernel mapping per stack.
    Madvise = 1,
    /// `mprotect(PROT_NONE)`: two kernel mappings per stack.
    Mprotect = 2,
}

/// 0 until the first guard is installed, then a [`GuardMode`].
static MODE: AtomicU8 = AtomicU8::new(0);

/// The guard mode of this process: the one in use, or the one the next
/// stack will try first.
pub fn guard_mode() -> GuardMode {
    // Relaxed: a sticky one-way latch; a stale 0 only re-runs detection.
    match MODE.load(Ordering::Relaxed) {
        2 => GuardMode::Mprotect,
        1 => GuardMode::Madvise,
        _ if forced_mprotect() => GuardMode::Mprotect,
        _ => GuardMode::Madvise,
    }
}

fn forced_mprotect() -> bool {
    std::env::var_os("SYMMETRY_STACK_GUARD").is_some_and(|v| v == "mprotect")
}

fn errno_text() -> String {
    std::io::Error::last_os_error().to_string()
}

/// `vm.max_map_count`, read once (65,530 if unreadable).
fn max_map_count() -> usize {
    static MAX: AtomicUsize = AtomicUsize::new(0);
    // Relaxed: an idempotent cache.
    let m = MAX.load(Ordering::Relaxed);
    if m != 0 {
        return m;
    }
    let m = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65_530);
    MAX.store(m, Ordering::Relaxed);
    m
}

/// Kernel mappings of this process now (`/proc/self/maps` lines).
pub fn kernel_mappings() -> Option<usize> {
    let s = std::fs::read_to_string("/proc/self/maps").ok()?;
    Some(s.lines().count())
}

/// Stacks of this process, all sizes: slots carved and not yet returned
/// to a slab (in use by a thread or held on a runtime's free list).
pub fn live_stacks() -> usize {
    // Relaxed: a statistic.
    LIVE.load(Ordering::Relaxed)
}

/// Slabs mapped by this process, all sizes.
pub fn slabs() -> usize {
    // Relaxed: a statistic.
    SLABS.load(Ordering::Relaxed)
}

static LIVE: AtomicUsize = AtomicUsize::new(0);
static SLABS: AtomicUsize = AtomicUsize::new(0);

/// The process-wide pool of one stack size. Pools live for the whole
/// process (leaked), so a [`Stack`] can point at its own.
#[derive(Debug)]
struct Pool {
    /// Usable bytes per stack.
    usable: usize,
    /// Guard plus usable bytes: the slot size.
    stride: usize,
    inner: Mutex<PoolInner>,
}

#[derive(Debug, Default)]
struct PoolInner {
    /// Low ends (guard included) of free slots, most recently freed last.
    free: Vec<usize>,
    /// Of those, how many still hold their pages (the last `hot` ones).
    hot: usize,
    /// Next uncarved slot of the newest slab, and the slab's end.
    cursor: usize,
    end: usize,
    /// Guards made by `mprotect` (each splits a mapping in two).
    protected: usize,
    /// Mappings of the process when the first `mprotect` guard was made.
    baseline_maps: usize,
}

/// Every size's pool.
static POOLS: Mutex<Vec<&'static Pool>> = Mutex::new(Vec::new());

fn pool_for(usable: usize) -> &'static Pool {
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = pools.iter().find(|p| p.usable == usable) {
        return p;
    }
    let p: &'static Pool = Box::leak(Box::new(Pool {
        usable,
        stride: usable + GUARD,
        inner: Mutex::new(PoolInner::default()),
    }));
    pools.push(p);
    p
}

/// Rounds `size` up to whole pages, at least corosensei's minimum.
fn usable_bytes(size: usize) -> usize {
    let page = page_size();
    let size = size.max(corosensei::stack::MIN_STACK_SIZE);
    size.div_ceil(page) * page
}

impl Pool {
    /// A slot: a free one if any, else a freshly carved one.
    fn take(&'static self) -> Result<usize, StackError> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(lo) = g.free.pop() {
            // The top of the list is hot whenever any slot is.
            g.hot = g.hot.saturating_sub(1);
            LIVE.fetch_add(1, Ordering::Relaxed);
            return Ok(lo);
        }
        if g.cursor == g.end {
            self.map_slab(&mut g)?;
        }
        let lo = g.cursor;
        install_guard(lo, &mut g)?;
        g.cursor += self.stride;
        LIVE.fetch_add(1, Ordering::Relaxed);
        Ok(lo)
    }

    #[cold]
    fn map_slab(&self, g: &mut PoolInner) -> Result<(), StackError> {
        let slots = (SLAB_BYTES / self.stride).max(1);
        let len = slots * self.stride;
        // SAFETY: a fresh anonymous private mapping; no existing memory is
        // touched.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(StackError::Os(format!(
                "mmap of a {len}-byte stack slab: {}",
                errno_text()
            )));
        }
        g.cursor = map as usize;
        g.end = map as usize + len;
        SLABS.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Returns a slot. Its pages are released if enough slots are hot.
    fn give(&self, lo: usize) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.free.push(lo);
        if g.hot < RETAINED {
            g.hot += 1;
            return;
        }
        // Keep the newest RETAINED slots hot: release the oldest hot one,
        // which sits just below the hot run at the top of the list.
        // The lock stays held: once released, `take` could hand the slot
        // to a thread while its pages are being dropped.
        let cold = g.free[g.free.len() - 1 - RETAINED];
        // SAFETY: `cold` is a free slot of this pool (and stays so while
        // we hold the lock): no thread runs on it and no `Stack` refers to
        // it; dropping its pages (not the guard) only zeroes memory nobody
        // owns.
        unsafe {
            libc::madvise(
                (cold + GUARD) as *mut libc::c_void,
                self.usable,
                libc::MADV_DONTNEED,
            );
        }
    }
}

/// Installs the guard of the slot at `lo`.
fn install_guard(lo: usize, g: &mut PoolInner) -> Result<(), StackError> {
    if guard_mode() == GuardMode::Madvise {
        // SAFETY: `lo .. lo + GUARD` lies in a slab this pool mapped and
        // no stack uses yet.
        let r = unsafe { libc::madvise(lo as *mut libc::c_void, GUARD, MADV_GUARD_INSTALL) };
        if r == 0 {
            // Relaxed: a one-way latch (see `guard_mode`).
            MODE.store(GuardMode::Madvise as u8, Ordering::Relaxed);
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(StackError::Os(format!("madvise(MADV_GUARD_INSTALL): {e}")));
        }
        // EINVAL: the kernel predates guard regions; fall back for good.
    }
    // Relaxed: as above.
    MODE.store(GuardMode::Mprotect as u8, Ordering::Relaxed);
    if g.protected == 0 {
        g.baseline_maps = kernel_mappings().unwrap_or(0);
    }
    // Each guard adds up to two mappings (it splits one in three).
    let max = max_map_count();
    if g.baseline_maps + 2 * (g.protected + 1) + MAP_RESERVE > max {
        return Err(StackError::MapLimit {
            live_stacks: live_stacks(),
            max_map_count: max,
        });
    }
    // SAFETY: as above; PROT_NONE on our own unused slot.
    if unsafe { libc::mprotect(lo as *mut libc::c_void, GUARD, libc::PROT_NONE) } != 0 {
        return Err(StackError::Os(format!(
            "mprotect of a stack guard: {}",
            errno_text()
        )));
    }
    g.protected += 1;
    Ok(())
}

/// A user-thread stack: a slot of a slab, guard region at its low end,
/// and at its top the fiber that runs threads on it (see the `fiber`
/// module). Dropping it returns the slot to the process-wide
/// pool of its size.
///
/// The fiber lives in the slot, not in this handle, so a `Stack` stays two
/// words: strategies move stacks through free lists and dispatch records
/// on every start and finish.
pub struct Stack {
    /// Low end of the slot (the guard's first byte).
    lo: usize,
    pool: &'static Pool,
}

/// Bytes at the top of every slot that hold its [`Fiber`] (a whole number
/// of cache lines, so the coroutine's stack below stays 16-byte aligned).
const FIBER_BYTES: usize = std::mem::size_of::<Fiber>().next_multiple_of(64);

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("lo", &format_args!("{:#x}", self.lo))
            .field("usable", &self.usable())
            .finish()
    }
}

impl Stack {
    /// A stack with at least `size` usable bytes (rounded up to pages)
    /// below which lies a [`GUARD`]-byte guard region.
    pub fn new(size: usize) -> Result<Stack, StackError> {
        let pool = pool_for(usable_bytes(size.saturating_add(FIBER_BYTES)));
        let s = Stack {
            lo: pool.take()?,
            pool,
        };
        // SAFETY: the header lies in the slot just taken (mapped read and
        // write, ours alone, no fiber in it yet), and is 64-byte aligned.
        unsafe { s.fiber().write(Fiber::new()) };
        Ok(s)
    }

    /// Usable bytes.
    pub fn usable(&self) -> usize {
        self.pool.usable - FIBER_BYTES
    }

    /// The guard region `[lo, hi)`.
    pub(crate) fn guard(&self) -> (usize, usize) {
        (self.lo, self.lo + GUARD)
    }

    /// The fiber header at the top of the slot.
    #[inline(always)]
    fn fiber(&self) -> *mut Fiber {
        (self.lo + self.pool.stride - FIBER_BYTES) as *mut Fiber
    }

    /// Starts `cb` on this stack's fiber, or resumes the thread in it,
    /// until it switches back (see [`Fiber::resume`]).
    #[inline(always)]
    pub(crate) fn resume(&mut self, cb: CbRef) -> corosensei::CoroutineResult<Switch, ()> {
        let top = self.fiber();
        let mem = SlotMem {
            lo: self.lo,
            top: top as usize,
        };
        // SAFETY: `new` wrote the header, and `&mut self` makes this the
        // only access to it (the fiber's coroutine runs below it and
        // never touches it).
        unsafe { (*top).resume(mem, cb) }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: as in `resume`.
        let fiber = unsafe { &mut *self.fiber() };
        if fiber.is_busy() {
            // A thread in the middle of its life: never unwound from
            // here, and its memory may still hold wait nodes that a sync
            // object points at. Leak the slot (the runtime's shutdown
            // forgets such stacks before this can happen).
            return;
        }
        fiber.reset();
        self.pool.give(self.lo);
    }
}

// SAFETY: a `Stack` is an owned address range (with the fiber in it) and a
// pointer to a pool behind a mutex. An idle fiber's frame holds no
// reference to any OS thread's state, so it may be resumed from any
// processor; a busy one is a user thread, which the runtime moves between
// processors only through its locked queues and park word (user threads
// migrate).
unsafe impl Send for Stack {}
// SAFETY: `&Stack` only reads immutable fields.
unsafe impl Sync for Stack {}

static INSTALL: Once = Once::new();
static mut OLD_SEGV: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::zeroed();
static mut OLD_BUS: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::zeroed();

/// The hook that names the user thread running on the faulting OS thread
/// (see [`install_overflow_handler`]).
pub(crate) type RunningForFault = fn() -> Option<CbRef>;

/// The registered [`RunningForFault`] hook as an address, 0 until
/// [`install_overflow_handler`] stores it. An atomic holding a plain
/// function pointer, so the handler reads it async-signal-safely.
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Installs the overflow handler for `SIGSEGV` and `SIGBUS` (once per
/// process), chaining to the handlers that were there before.
///
/// `running` tells the handler which user thread runs on the OS thread it
/// interrupted (the runtime's processor context); it must be callable from
/// a signal handler. Only the first call's `running` is kept (every
/// runtime passes the same one).
pub(crate) fn install_overflow_handler(running: RunningForFault) {
    INSTALL.call_once(|| {
        // Release: pairs with the Acquire load in `running_for_fault`.
        // Stored before the handler is installed below, so the handler
        // never sees it unset once it can run.
        RUNNING.store(running as usize, Ordering::Release);
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

/// The user thread running on this OS thread, through the hook that
/// [`install_overflow_handler`] registered (`None` if none is).
fn running_for_fault() -> Option<CbRef> {
    // Acquire: pairs with the Release store in `install_overflow_handler`.
    let p = RUNNING.load(Ordering::Acquire);
    if p == 0 {
        return None;
    }
    // SAFETY: a non-zero `RUNNING` is the address of a `RunningForFault`
    // stored by `install_overflow_handler` (never written again), so it
    // converts back to that function pointer.
    let running: RunningForFault = unsafe { std::mem::transmute::<usize, RunningForFault>(p) };
    running()
}

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    if let Some(r) = running_for_fault() {
        let cb = r.cb();
        let (lo, hi) = cb.guard.get();
        if addr >= lo && addr < hi {
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
