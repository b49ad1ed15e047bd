//! `libsymmetry_interpose.so`: KLMO91's lock-waiting-time profile, and
//! any registry lock, for programs nobody rewrote.
//!
//! Loaded with `LD_PRELOAD`, the library interposes every pthread call
//! that takes, waits on or releases a mutex (the table below). It has two
//! modes:
//!
//! - **Profile** (default): the program keeps glibc's mutexes. Each lock
//!   call first tries the real `pthread_mutex_trylock`; if that succeeds
//!   the acquisition was uncontended and nothing is recorded. Otherwise
//!   the library times the real blocking call and records the wait, in
//!   spins of this machine, in the histogram of that mutex: the same
//!   profiler, file format and `symmetry analyze` as the Rust locks use
//!   (`symmetry_locks::spin_then_block::profiler`). `symmetry profile --
//!   CMD` runs a command this way and prices every spin-or-block policy.
//! - **Replace** (`SYMMETRY_LOCK=NAME`): every normal mutex runs on lock
//!   algorithm `NAME` from the registry; recursive, error-checking,
//!   adaptive, robust, process-shared and priority-protocol mutexes stay
//!   glibc's (stderr says so once). See [`replace`].
//!
//! # Entry points
//!
//! The set audited is every `pthread_mutex_*`, `pthread_cond_*`, `mtx_*`
//! and `cnd_*` symbol glibc 2.36 exports on x86-64 (`nm -D libc.so.6`);
//! the `clock` variants exist from glibc 2.30, and on an older glibc the
//! library finds none to call (a program linked against them cannot run
//! there anyway).
//! "Marked" is a mutex replace mode runs on its lock (see [`replace`]);
//! every other mutex is glibc's in both modes.
//!
//! | entry point | profile mode | replace mode |
//! |---|---|---|
//! | `pthread_mutex_lock`, `__pthread_mutex_lock` | glibc's; a contended acquisition's wait is recorded | the algorithm's lock (marking a new mutex first) |
//! | `pthread_mutex_trylock`, `__pthread_mutex_trylock` | glibc's (never waits) | the algorithm's `try_lock`: 0 or `EBUSY` |
//! | `pthread_mutex_timedlock` | glibc's; a contended acquisition's wait is recorded | `try_lock`, then a wait until the `CLOCK_REALTIME` deadline: 0, `ETIMEDOUT` or `EINVAL` as glibc |
//! | `pthread_mutex_clocklock` (2.30) | as `timedlock`, on the caller's clock | as `timedlock`, on `CLOCK_REALTIME` or `CLOCK_MONOTONIC` (another clock: `EINVAL`, as glibc) |
//! | `pthread_mutex_unlock`, `__pthread_mutex_unlock` | glibc's; records the thread's pending wait after it | the algorithm's unlock (and a polite sleeper's wake) |
//! | `pthread_mutex_init`, `__pthread_mutex_init` | glibc's; the address loses its profile name | glibc's, which zeroes the memory and so the mark: a new mutex |
//! | `pthread_mutex_destroy`, `__pthread_mutex_destroy` | glibc's; the address loses its profile name | a held marked mutex: `EBUSY` (as glibc); else the mark is cleared, then glibc's |
//! | `pthread_cond_wait` | glibc's (its re-acquisition of the mutex is not profiled) | marked mutex: the condition wait of [`replace`] (inner glibc mutex); else glibc's |
//! | `pthread_cond_timedwait` | as `wait` | as `wait`, with glibc's deadline |
//! | `pthread_cond_clockwait` (2.30) | as `wait` | as `wait`, with glibc's clock and deadline |
//! | `pthread_cond_signal`, `_broadcast` | glibc's | glibc's, inside the inner mutex of the condition's last waiter's mutex |
//!
//! Left to glibc in both modes, and why that is right for a marked mutex:
//!
//! - `pthread_mutex_consistent` (`_np`), `pthread_mutex_getprioceiling`,
//!   `pthread_mutex_setprioceiling`: they act only on robust or
//!   priority-protection mutexes, which are never marked; on a normal
//!   mutex glibc reads only `__kind` (0, which marking leaves alone) and
//!   answers `EINVAL`, as it does without the library.
//! - `pthread_mutexattr_*`, `pthread_condattr_*`, `pthread_cond_init`,
//!   `pthread_cond_destroy`: they touch no mutex. (A condition's waiters
//!   on a marked mutex wait in glibc on an inner glibc mutex, so
//!   `pthread_cond_destroy` sees them as glibc's own.)
//! - `mtx_*` and `cnd_*` (C11 threads): glibc implements them on its own
//!   pthread functions through internal calls that no preload can see, so
//!   a `mtx_t` used only through them is glibc's from start to end, in
//!   both modes (never marked, never profiled). A program that passes one
//!   object to both `mtx_*` and `pthread_mutex_*` is not supported.
//! - The `GLIBC_2.2.5` versions of the `pthread_cond_*` calls (the
//!   condition-variable ABI before glibc 2.3.2, for binaries built before
//!   2003) are not served: the library binds the current ones.
//!
//! # Naming
//!
//! In profile mode a mutex is known by its address. At its first
//! contended acquisition it gets a name: the address of the instruction
//! after the call to `pthread_mutex_lock` (its acquisition site), written
//! as `symbol+0xOFF (object+0xOFF)` through `dladdr`, plus `#k` when several
//! mutexes were first contended at one site (a lock wrapper such as
//! pigz's `possess` is one site for every lock). `symmetry profile`
//! resolves `object+0xOFF` to a function and line with `addr2line` where
//! the object has debug information. A mutex destroyed (or initialized
//! again) loses its name, so a new mutex at the same address gets its own.
//!
//! # What is measured
//!
//! The wait is the time from the failed `trylock` to the return of the
//! real lock call: the holder's remaining hold time plus glibc's wake-up
//! path. It is recorded as not blocked (this library does not know
//! whether glibc slept). Waits are read from [`clock`]. Inside the
//! critical section the library only reads the clock and the mutex's
//! kind; the wait goes into the thread's own part of the histogram
//! ([`profiler::Shard`]) after the thread's next unlock. A wait whose
//! mutex is still held when the process exits is not recorded (at most
//! one per thread). Re-acquisitions inside `pthread_cond_wait`,
//! `_timedwait` and `_clockwait` happen inside glibc and are not seen;
//! `trylock` and `unlock` never wait. A mutex is known by its address
//! here, so a new mutex made at a reused address without
//! `pthread_mutex_init` or `_destroy` (a C++ `std::mutex` in a reused heap
//! chunk) records under the name of the first mutex there.
//!
//! # Environment
//!
//! - `SYMMETRY_LOCK_PROFILE=PATH`: where the profile is written at exit
//!   (nothing is written without it).
//! - `SYMMETRY_LOCK=NAME`: replace mode ([`replace::algorithms`] lists the
//!   names; an unknown name stops the program with the list).
//! - `SYMMETRY_LOCK_WAIT=pure|polite`: how replace mode's waiters wait
//!   ([`replace::Waiting`]); unset: `polite` for FIFO locks, `pure` for
//!   the others. `symmetry profile --lock NAME --pure` sets `pure`.
//! - `SYMMETRY_NS_PER_SPIN`, `SYMMETRY_C_OS`: the machine constants the
//!   profile is priced with (see `symmetry calibrate`); measured or
//!   defaulted otherwise.
//!
//! The entry points capture their return address in a few instructions of
//! assembly on x86-64; on other architectures every site reads
//! `(unknown site)`.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{CStr, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{OnceLock, RwLock};

use symmetry_locks::spin_then_block::LockName;
use symmetry_locks::spin_then_block::calibration;
use symmetry_locks::spin_then_block::profiler::{self, LockProfile, Shard};

/// The blocker name under which glibc's mutexes appear in the profile.
pub const BLOCKER: &str = "glibc";

/// Environment variable naming the profile file written at exit.
pub const PROFILE_ENV: &str = "SYMMETRY_LOCK_PROFILE";

/// Environment variable that selects replace mode: the registry name of
/// the lock algorithm every normal mutex runs on (`glibc` or unset:
/// profile mode).
pub const LOCK_ENV: &str = "SYMMETRY_LOCK";

pub mod clock;
pub mod replace;

type LockFn = unsafe extern "C" fn(*mut libc::pthread_mutex_t) -> c_int;
type TimedLockFn = unsafe extern "C" fn(*mut libc::pthread_mutex_t, *const libc::timespec) -> c_int;
type InitFn =
    unsafe extern "C" fn(*mut libc::pthread_mutex_t, *const libc::pthread_mutexattr_t) -> c_int;
type CondWaitFn =
    unsafe extern "C" fn(*mut libc::pthread_cond_t, *mut libc::pthread_mutex_t) -> c_int;
type CondTimedWaitFn = unsafe extern "C" fn(
    *mut libc::pthread_cond_t,
    *mut libc::pthread_mutex_t,
    *const libc::timespec,
) -> c_int;
type CondFn = unsafe extern "C" fn(*mut libc::pthread_cond_t) -> c_int;
type ClockLockFn = unsafe extern "C" fn(
    *mut libc::pthread_mutex_t,
    libc::clockid_t,
    *const libc::timespec,
) -> c_int;
type CondClockWaitFn = unsafe extern "C" fn(
    *mut libc::pthread_cond_t,
    *mut libc::pthread_mutex_t,
    libc::clockid_t,
    *const libc::timespec,
) -> c_int;

/// glibc's functions, found with `dlsym(RTLD_NEXT, ...)`.
struct Real {
    lock: LockFn,
    trylock: LockFn,
    timedlock: TimedLockFn,
    /// glibc 2.30 and later.
    clocklock: Option<ClockLockFn>,
    init: InitFn,
    destroy: LockFn,
    unlock: LockFn,
    cond_wait: CondWaitFn,
    cond_timedwait: CondTimedWaitFn,
    /// glibc 2.30 and later.
    cond_clockwait: Option<CondClockWaitFn>,
    cond_signal: CondFn,
    cond_broadcast: CondFn,
}

static REAL: OnceLock<Real> = OnceLock::new();

/// Looks up `name` in the objects loaded after this one, or aborts: a
/// program whose mutex calls cannot reach glibc cannot go on.
fn next(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT is valid in a
    // shared object.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if p.is_null() {
        let msg = b"symmetry-interpose: cannot find the real pthread mutex functions\n";
        // SAFETY: writing a static buffer to stderr, then aborting.
        unsafe {
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::abort();
        }
    }
    p
}

/// Looks up `name` in the objects loaded after this one, if it is there
/// (functions newer than the oldest glibc supported).
fn next_opt(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

/// Looks up the current version of a condition-variable function: glibc
/// keeps an old `GLIBC_2.2.5` one beside it, which plain `dlsym` may
/// return.
fn next_cond(name: &CStr) -> *mut c_void {
    #[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
    {
        // SAFETY: dlvsym with NUL-terminated names.
        let p = unsafe { libc::dlvsym(libc::RTLD_NEXT, name.as_ptr(), c"GLIBC_2.3.2".as_ptr()) };
        if !p.is_null() {
            return p;
        }
    }
    next(name)
}

#[inline]
fn real() -> &'static Real {
    REAL.get_or_init(|| {
        // SAFETY: each symbol is glibc's function of that name, whose type
        // is the one it is transmuted to.
        unsafe {
            Real {
                lock: std::mem::transmute::<*mut c_void, LockFn>(next(c"pthread_mutex_lock")),
                trylock: std::mem::transmute::<*mut c_void, LockFn>(next(c"pthread_mutex_trylock")),
                timedlock: std::mem::transmute::<*mut c_void, TimedLockFn>(next(
                    c"pthread_mutex_timedlock",
                )),
                clocklock: next_opt(c"pthread_mutex_clocklock")
                    .map(|p| std::mem::transmute::<*mut c_void, ClockLockFn>(p)),
                init: std::mem::transmute::<*mut c_void, InitFn>(next(c"pthread_mutex_init")),
                destroy: std::mem::transmute::<*mut c_void, LockFn>(next(c"pthread_mutex_destroy")),
                unlock: std::mem::transmute::<*mut c_void, LockFn>(next(c"pthread_mutex_unlock")),
                cond_wait: std::mem::transmute::<*mut c_void, CondWaitFn>(next_cond(
                    c"pthread_cond_wait",
                )),
                cond_timedwait: std::mem::transmute::<*mut c_void, CondTimedWaitFn>(next_cond(
                    c"pthread_cond_timedwait",
                )),
                cond_clockwait: next_opt(c"pthread_cond_clockwait")
                    .map(|p| std::mem::transmute::<*mut c_void, CondClockWaitFn>(p)),
                cond_signal: std::mem::transmute::<*mut c_void, CondFn>(next_cond(
                    c"pthread_cond_signal",
                )),
                cond_broadcast: std::mem::transmute::<*mut c_void, CondFn>(next_cond(
                    c"pthread_cond_broadcast",
                )),
            }
        }
    })
}

/// Resolves glibc's functions while the process is still single-threaded.
#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = {
    extern "C" fn init() {
        let _ = real();
        let _ = replace::mode();
        // Decided before any thread of the program reads the clock.
        let _ = clock::source();
    }
    init
};

thread_local! {
    /// Set while this thread is inside the recording path, so that a mutex
    /// taken by the recording itself is passed straight through.
    static BUSY: Cell<bool> = const { Cell::new(false) };
    /// The mutex this thread last recorded a wait on, where that wait
    /// went, and the [`FORGOTTEN`] count then: a thread that keeps waiting
    /// on one mutex (the contended case) skips the shared name table.
    static LAST: Cell<Option<(usize, Sink, u64)>> = const { Cell::new(None) };
    /// This thread's shards of the histograms it recorded into (at most
    /// [`MAX_SHARDS`]), handed back when the thread exits.
    static SHARDS: Shards = const { Shards(RefCell::new(Vec::new())) };
    /// A wait this thread measured but has not recorded yet: recorded
    /// after the thread's next unlock (or before its next recorded wait or
    /// condition wait), outside the critical section the wait ended in.
    static PENDING: Cell<Wait> = const { Cell::new(Wait::NONE) };
}

/// One measured wait.
#[derive(Clone, Copy)]
struct Wait {
    /// The mutex's address (0: none).
    m: usize,
    /// Its acquisition site.
    site: usize,
    /// How long the acquisition waited, in [`clock`] ticks.
    ticks: u64,
    /// Whether the mutex is process-shared (read while it was held).
    pshared: bool,
}

impl Wait {
    const NONE: Wait = Wait {
        m: 0,
        site: 0,
        ticks: 0,
        pshared: false,
    };
}

/// Where a thread records the waits on one mutex.
#[derive(Clone, Copy)]
enum Sink {
    /// The thread's own shard of the mutex's histogram.
    Shard(&'static Shard),
    /// The shared histogram (the thread holds [`MAX_SHARDS`] shards).
    Shared(&'static LockProfile),
}

/// Most shards one thread keeps: a thread that waits on more distinct
/// mutexes records the rest into their shared histograms, so the memory
/// is bounded by 1.5 KiB x this x the threads alive at once (12 KiB per
/// thread). A thread hot on one mutex needs one.
const MAX_SHARDS: usize = 8;

/// A thread's shards; dropping it (thread exit) hands them back.
struct Shards(RefCell<Vec<&'static Shard>>);

impl Drop for Shards {
    fn drop(&mut self) {
        for s in self.0.get_mut().drain(..) {
            profiler::release_shard(s);
        }
    }
}

/// Where this thread records waits on the mutex whose entry is `e`.
#[cold]
fn sink_of(e: &'static LockProfile) -> Sink {
    SHARDS
        .try_with(|v| {
            let mut v = v.0.borrow_mut();
            if let Some(s) = v.iter().find(|s| std::ptr::eq(s.lock(), e)) {
                return Sink::Shard(s);
            }
            if v.len() >= MAX_SHARDS {
                return Sink::Shared(e);
            }
            let s = profiler::take_shard(e);
            v.push(s);
            Sink::Shard(s)
        })
        .unwrap_or(Sink::Shared(e))
}

/// Keeps `w` to be recorded outside its critical section; records the
/// wait kept before it, if any (a thread that took a second contended
/// mutex without unlocking in between).
#[inline]
fn defer(w: Wait) {
    let _ = PENDING.try_with(|p| {
        let old = p.replace(w);
        if old.m != 0 {
            record(old);
        }
    });
}

/// Keeps the wait on `m`, acquired at `site` after waiting since tick
/// `t0`, to be recorded after the unlock. Runs inside the critical
/// section: one counter read and one load of the mutex (just acquired, so
/// in this core's cache).
#[inline]
fn acquired(m: *mut libc::pthread_mutex_t, site: usize, t0: u64) {
    defer(Wait {
        m: m as usize,
        site,
        ticks: clock::ticks().saturating_sub(t0),
        pshared: replace::glibc_kind(m) & replace::PSHARED_BIT != 0,
    });
}

/// Records this thread's pending wait, if any.
#[inline]
fn flush() {
    let _ = PENDING.try_with(|p| {
        if p.get().m != 0 {
            record(p.replace(Wait::NONE));
        }
    });
}

/// How many names [`forget`] has removed: a thread's [`LAST`] is valid
/// only while this is unchanged (a destroyed mutex's address may come back
/// as a new mutex, which gets a new name).
static FORGOTTEN: AtomicU64 = AtomicU64::new(0);

/// Mutex address -> its profile entry, for mutexes that have waited.
static NAMES: OnceLock<RwLock<HashMap<usize, &'static LockProfile>>> = OnceLock::new();

fn names() -> &'static RwLock<HashMap<usize, &'static LockProfile>> {
    NAMES.get_or_init(|| RwLock::new(HashMap::new()))
}

/// Mutexes first contended at each site so far (for the `#k` suffix).
fn per_site() -> &'static std::sync::Mutex<HashMap<usize, u32>> {
    static SITES: OnceLock<std::sync::Mutex<HashMap<usize, u32>>> = OnceLock::new();
    SITES.get_or_init(|| std::sync::Mutex::new(HashMap::new()))
}

/// `symbol+0xOFF (object+0xOFF)` for a code address, as `dladdr` sees it.
fn describe(site: usize) -> String {
    if site == 0 {
        return "(unknown site)".into();
    }
    // SAFETY: dladdr only reads the loader's tables; `info` is plain data.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::dladdr(site as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return format!("({site:#x})");
    }
    // SAFETY: dladdr filled `dli_fname` with a NUL-terminated path.
    let object = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
    // The main program's name is whatever it was started as (`pigz`,
    // `./a.out`, or empty): name it by its absolute path instead.
    let object = if object.starts_with('/') {
        object.into_owned()
    } else {
        std::fs::read_link("/proc/self/exe")
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| object.into_owned())
    };
    let base = info.dli_fbase as usize;
    let mut s = String::new();
    if !info.dli_sname.is_null() {
        // SAFETY: a non-null `dli_sname` is a NUL-terminated symbol name.
        let sym = unsafe { CStr::from_ptr(info.dli_sname) }.to_string_lossy();
        s.push_str(&format!("{sym}+{:#x} ", site - info.dli_saddr as usize));
    }
    s.push_str(&format!("({object}+{:#x})", site.wrapping_sub(base)));
    s
}

/// The entry of mutex `m`, named at its first contended acquisition.
#[cold]
fn entry_of(m: usize, site: usize, pshared: bool) -> &'static LockProfile {
    if let Some(e) = names().read().unwrap_or_else(|e| e.into_inner()).get(&m) {
        return e;
    }
    let mut map = names().write().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = map.get(&m) {
        return e;
    }
    let k = {
        let mut sites = per_site().lock().unwrap_or_else(|e| e.into_inner());
        let k = sites.entry(site).or_insert(0);
        *k += 1;
        *k
    };
    let mut name = describe(site);
    if k > 1 {
        name.push_str(&format!(" #{k}"));
    }
    // A process-shared mutex's waits are those of this process only: the
    // name says so (replace mode leaves such a mutex to glibc).
    if pshared {
        name.push_str(" [process-shared]");
    }
    let name: &'static str = Box::leak(name.into_boxed_str());
    let e = profiler::entry(&LockName::Named(name), BLOCKER, calibration::c_spins_os);
    map.insert(m, e);
    e
}

/// Records wait `w` in its mutex's histogram.
#[cold]
fn record(w: Wait) {
    let Wait {
        m,
        site,
        ticks,
        pshared,
    } = w;
    let _ = BUSY.try_with(|b| {
        if b.replace(true) {
            return;
        }
        // Relaxed suffices: a thread waiting on a mutex made again at a
        // destroyed one's address learned of it through the program's own
        // synchronization after the destroy, so the increment in `forget`
        // happens before this load and is seen (read-write coherence). Only
        // a program racing a destroy against a wait on the same mutex could
        // record one wait under the old name.
        let era = FORGOTTEN.load(Ordering::Relaxed);
        let sink = match LAST.get() {
            Some((a, sink, g)) if a == m && g == era => sink,
            _ => {
                let sink = sink_of(entry_of(m, site, pshared));
                LAST.set(Some((m, sink, era)));
                sink
            }
        };
        let spins = calibration::ns_to_spins(clock::to_ns(ticks));
        match sink {
            Sink::Shard(s) => s.record(spins, false),
            Sink::Shared(e) => e.record(spins, false),
        }
        b.set(false);
    });
}

/// Forgets the name of mutex `m` (destroyed, or initialized again).
fn forget(m: usize) {
    // Until some mutex has waited, nothing is named: every init and
    // destroy of a program that never contends costs one load.
    let Some(names) = NAMES.get() else {
        return;
    };
    let known = names
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .contains_key(&m);
    if known {
        names.write().unwrap_or_else(|e| e.into_inner()).remove(&m);
        // Relaxed: see `record`.
        FORGOTTEN.fetch_add(1, Ordering::Relaxed);
    }
}

fn in_recording() -> bool {
    BUSY.try_with(|b| b.get()).unwrap_or(true)
}

/// `pthread_mutex_lock` with its acquisition site.
extern "C" fn lock_at(m: *mut libc::pthread_mutex_t, site: usize) -> c_int {
    let r = real();
    if let Some(mode) = replace::mode() {
        // SAFETY: as below.
        return replace::lock(mode, m).unwrap_or_else(|| unsafe { (r.lock)(m) });
    }
    // SAFETY: the caller passed its mutex to pthread_mutex_lock; glibc's
    // own functions get it unchanged.
    unsafe {
        // Only EBUSY means "would wait": any other result of trylock is
        // the lock call's own answer (0, or a robust mutex's EOWNERDEAD,
        // which also acquires it, or an error).
        let first = (r.trylock)(m);
        if first != libc::EBUSY {
            return first;
        }
        if in_recording() {
            return (r.lock)(m);
        }
        let t0 = clock::ticks();
        let rc = (r.lock)(m);
        if rc == 0 {
            acquired(m, site, t0);
        }
        rc
    }
}

/// `pthread_mutex_timedlock` with its acquisition site.
extern "C" fn timedlock_at(
    m: *mut libc::pthread_mutex_t,
    abstime: *const libc::timespec,
    site: usize,
) -> c_int {
    timed_at(m, None, abstime, site)
}

/// `pthread_mutex_clocklock` with its acquisition site.
extern "C" fn clocklock_at(
    m: *mut libc::pthread_mutex_t,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
    site: usize,
) -> c_int {
    timed_at(m, Some(clock), abstime, site)
}

/// `pthread_mutex_timedlock` (`clock` `None`: `CLOCK_REALTIME`) or
/// `_clocklock`.
fn timed_at(
    m: *mut libc::pthread_mutex_t,
    clock: Option<libc::clockid_t>,
    abstime: *const libc::timespec,
    site: usize,
) -> c_int {
    let r = real();
    // SAFETY: the caller's arguments, unchanged, to glibc's function of
    // the same name (`clocklock` exists: the program was linked to it).
    let glibc = |m| unsafe {
        match (clock, r.clocklock) {
            (None, _) => (r.timedlock)(m, abstime),
            (Some(c), Some(f)) => f(m, c, abstime),
            (Some(_), None) => libc::ENOSYS,
        }
    };
    if let Some(mode) = replace::mode() {
        let c = clock.unwrap_or(libc::CLOCK_REALTIME);
        return replace::timed_lock(mode, m, c, abstime).unwrap_or_else(|| glibc(m));
    }
    // SAFETY: as in `lock_at`.
    let first = unsafe { (r.trylock)(m) };
    // As in `lock_at`.
    if first != libc::EBUSY {
        return first;
    }
    if in_recording() {
        return glibc(m);
    }
    let t0 = clock::ticks();
    let rc = glibc(m);
    if rc == 0 {
        acquired(m, site, t0);
    }
    rc
}

/// Interposed `pthread_mutex_lock`: passes its return address on.
///
/// # Safety
/// As glibc's: `m` is a valid, initialized mutex.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_lock(m: *mut libc::pthread_mutex_t) -> c_int {
    // At entry [rsp] is the return address: the acquisition site. It goes
    // in the second argument register and `lock_at` is tail-called, so the
    // caller's frame is untouched and `lock_at` returns to it.
    core::arch::naked_asm!("mov rsi, [rsp]", "jmp {imp}", imp = sym lock_at)
}

/// Interposed `pthread_mutex_timedlock`: passes its return address on.
///
/// # Safety
/// As glibc's.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_timedlock(
    m: *mut libc::pthread_mutex_t,
    abstime: *const libc::timespec,
) -> c_int {
    // As in `pthread_mutex_lock`, with the site in the third argument.
    core::arch::naked_asm!("mov rdx, [rsp]", "jmp {imp}", imp = sym timedlock_at)
}

/// Interposed `pthread_mutex_clocklock` (glibc 2.30): passes its return
/// address on.
///
/// # Safety
/// As glibc's.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_clocklock(
    m: *mut libc::pthread_mutex_t,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
) -> c_int {
    // As in `pthread_mutex_lock`, with the site in the fourth argument.
    core::arch::naked_asm!("mov rcx, [rsp]", "jmp {imp}", imp = sym clocklock_at)
}

/// Interposed `__pthread_mutex_lock`, glibc's old exported alias (for
/// binaries linked against it): as `pthread_mutex_lock`.
///
/// # Safety
/// As glibc's.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pthread_mutex_lock(m: *mut libc::pthread_mutex_t) -> c_int {
    // As in `pthread_mutex_lock`.
    core::arch::naked_asm!("mov rsi, [rsp]", "jmp {imp}", imp = sym lock_at)
}

/// Interposed `pthread_mutex_clocklock` (no site on this architecture).
///
/// # Safety
/// As glibc's.
#[cfg(not(target_arch = "x86_64"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_clocklock(
    m: *mut libc::pthread_mutex_t,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
) -> c_int {
    clocklock_at(m, clock, abstime, 0)
}

/// Interposed `__pthread_mutex_lock` (no site on this architecture).
///
/// # Safety
/// As glibc's.
#[cfg(not(target_arch = "x86_64"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pthread_mutex_lock(m: *mut libc::pthread_mutex_t) -> c_int {
    lock_at(m, 0)
}

/// Interposed `pthread_mutex_lock` (no site on this architecture).
///
/// # Safety
/// As glibc's: `m` is a valid, initialized mutex.
#[cfg(not(target_arch = "x86_64"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_lock(m: *mut libc::pthread_mutex_t) -> c_int {
    lock_at(m, 0)
}

/// Interposed `pthread_mutex_timedlock` (no site on this architecture).
///
/// # Safety
/// As glibc's.
#[cfg(not(target_arch = "x86_64"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_timedlock(
    m: *mut libc::pthread_mutex_t,
    abstime: *const libc::timespec,
) -> c_int {
    timedlock_at(m, abstime, 0)
}

/// Interposed `pthread_mutex_init`: a mutex at a reused address starts
/// without a name.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_init(
    m: *mut libc::pthread_mutex_t,
    attr: *const libc::pthread_mutexattr_t,
) -> c_int {
    if !in_recording() {
        forget(m as usize);
    }
    // SAFETY: the caller's arguments, unchanged, to glibc, which zeroes
    // the memory (and so any mark of replace mode: a new mutex).
    unsafe { (real().init)(m, attr) }
}

/// Interposed `pthread_mutex_destroy`: the address loses its name.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_destroy(m: *mut libc::pthread_mutex_t) -> c_int {
    if !in_recording() {
        forget(m as usize);
    }
    if let Some(rc) = replace::mode().and_then(|mode| replace::destroy(mode, m)) {
        return rc;
    }
    // SAFETY: the caller's argument, unchanged, to glibc.
    unsafe { (real().destroy)(m) }
}

/// Interposed `pthread_mutex_trylock`: glibc's, or the algorithm's in
/// replace mode.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_trylock(m: *mut libc::pthread_mutex_t) -> c_int {
    let r = real();
    match replace::mode().and_then(|mode| replace::try_lock(mode, m)) {
        Some(rc) => rc,
        // SAFETY: the caller's argument, unchanged, to glibc.
        None => unsafe { (r.trylock)(m) },
    }
}

/// Interposed `pthread_mutex_unlock`: glibc's, or the algorithm's in
/// replace mode.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_unlock(m: *mut libc::pthread_mutex_t) -> c_int {
    let r = real();
    match replace::mode() {
        Some(mode) => match replace::unlock(mode, m) {
            Some(rc) => rc,
            // SAFETY: the caller's argument, unchanged, to glibc.
            None => unsafe { (r.unlock)(m) },
        },
        None => {
            // SAFETY: as above.
            let rc = unsafe { (r.unlock)(m) };
            flush();
            rc
        }
    }
}

/// Interposed `pthread_cond_wait` (see [`replace`] for replace mode).
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_wait(
    c: *mut libc::pthread_cond_t,
    m: *mut libc::pthread_mutex_t,
) -> c_int {
    let r = real();
    // SAFETY: the caller's arguments to glibc (the inner mutex in replace
    // mode is a valid glibc mutex the waiter holds).
    let wait = |inner| unsafe { (r.cond_wait)(c, inner) };
    flush();
    match replace::mode().and_then(|mode| replace::cond_wait(mode, c, m, wait)) {
        Some(rc) => rc,
        // SAFETY: as above.
        None => unsafe { (r.cond_wait)(c, m) },
    }
}

/// Interposed `pthread_cond_timedwait` (see [`replace`]).
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_timedwait(
    c: *mut libc::pthread_cond_t,
    m: *mut libc::pthread_mutex_t,
    abstime: *const libc::timespec,
) -> c_int {
    let r = real();
    // SAFETY: as in `pthread_cond_wait`.
    let wait = |inner| unsafe { (r.cond_timedwait)(c, inner, abstime) };
    flush();
    match replace::mode().and_then(|mode| replace::cond_wait(mode, c, m, wait)) {
        Some(rc) => rc,
        // SAFETY: as above.
        None => unsafe { (r.cond_timedwait)(c, m, abstime) },
    }
}

/// Interposed `pthread_cond_clockwait` (glibc 2.30; see [`replace`]).
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_clockwait(
    c: *mut libc::pthread_cond_t,
    m: *mut libc::pthread_mutex_t,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
) -> c_int {
    // A program that calls it was linked against a glibc that has it.
    let Some(f) = real().cond_clockwait else {
        return libc::ENOSYS;
    };
    // SAFETY: as in `pthread_cond_wait`.
    let wait = |inner| unsafe { f(c, inner, clock, abstime) };
    flush();
    match replace::mode().and_then(|mode| replace::cond_wait(mode, c, m, wait)) {
        Some(rc) => rc,
        // SAFETY: as above.
        None => unsafe { f(c, m, clock, abstime) },
    }
}

/// Interposed `__pthread_mutex_init`, glibc's old exported alias.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pthread_mutex_init(
    m: *mut libc::pthread_mutex_t,
    attr: *const libc::pthread_mutexattr_t,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { pthread_mutex_init(m, attr) }
}

/// Interposed `__pthread_mutex_destroy`, glibc's old exported alias.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pthread_mutex_destroy(m: *mut libc::pthread_mutex_t) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { pthread_mutex_destroy(m) }
}

/// Interposed `__pthread_mutex_trylock`, glibc's old exported alias.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pthread_mutex_trylock(m: *mut libc::pthread_mutex_t) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { pthread_mutex_trylock(m) }
}

/// Interposed `__pthread_mutex_unlock`, glibc's old exported alias.
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pthread_mutex_unlock(m: *mut libc::pthread_mutex_t) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { pthread_mutex_unlock(m) }
}

/// Interposed `pthread_cond_signal` (see [`replace`]).
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_signal(c: *mut libc::pthread_cond_t) -> c_int {
    let r = real();
    // SAFETY: the caller's argument, unchanged, to glibc.
    let signal = || unsafe { (r.cond_signal)(c) };
    match replace::mode() {
        Some(mode) => replace::cond_signal(mode, c, signal),
        None => signal(),
    }
}

/// Interposed `pthread_cond_broadcast` (see [`replace`]).
///
/// # Safety
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_broadcast(c: *mut libc::pthread_cond_t) -> c_int {
    let r = real();
    // SAFETY: as in `pthread_cond_signal`.
    let signal = || unsafe { (r.cond_broadcast)(c) };
    match replace::mode() {
        Some(mode) => replace::cond_signal(mode, c, signal),
        None => signal(),
    }
}
