//! `libsymmetry_interpose.so`: KLMO91's lock-waiting-time profile, and
//! any registry lock, for programs nobody rewrote.
//!
//! Loaded with `LD_PRELOAD`, the library interposes every pthread call
//! that takes, waits on or releases a mutex (the table below), the
//! reader-writer and spin lock calls ([`rwlock`]), and libc's `syscall()`
//! for futex waits ([`futex`]: Rust's `std` locks, `parking_lot`). It has
//! two modes:
//!
//! - **Profile** (default): the program keeps glibc's locks. Each lock
//!   call first tries the real `try` call; if that succeeds the
//!   acquisition was uncontended and is only counted (sampled, for a lock
//!   that has waited before). Otherwise the library times the real
//!   blocking call and the hold after it, to the unlock, and records the
//!   wait, in spins of this machine, in the histogram of that lock: the
//!   same profiler, file format and `symmetry analyze` as the Rust locks
//!   use (`symmetry_locks::spin_then_block::profiler`). `symmetry profile
//!   -- CMD` runs a command this way, names each lock by its user's call
//!   site and prices every spin-or-block policy.
//! - **Replace** (`SYMMETRY_LOCK=NAME`): every normal mutex runs on lock
//!   algorithm `NAME` from the registry; recursive, error-checking,
//!   adaptive, robust, process-shared and priority-protocol mutexes stay
//!   glibc's (stderr says so once), and so do reader-writer locks, spin
//!   locks and futex calls. See [`replace`].
//!
//! A third setting, `SYMMETRY_LOCK=off` (pass-through), loads the library
//! but records and replaces nothing: every wrapper calls glibc's function
//! at once. It measures what interposition alone costs a program (the
//! extra call and the checks every wrapper makes), the floor under which
//! no interposing profiler can go.
//!
//! Linked into a program's executable as a Rust dependency (the
//! `symmetry` harness links it for its names and constants) instead of
//! preloaded, the library is inert: its exported wrappers only call
//! glibc's functions, so the program does not profile its own locks.
//!
//! # Entry points
//!
//! The set audited is every `pthread_mutex_*`, `pthread_cond_*`,
//! `pthread_rwlock_*`, `pthread_spin_*`, `mtx_*` and `cnd_*` symbol glibc
//! 2.36 exports on x86-64 (`nm -D libc.so.6`);
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
//! | `pthread_rwlock_rdlock`, `_wrlock`, `_timed*`, `_clock*` (2.30) | glibc's; a contended acquisition's wait is recorded, readers and writers apart | glibc's |
//! | `pthread_rwlock_tryrdlock`, `_trywrlock` | glibc's; counted when it acquires | glibc's |
//! | `pthread_rwlock_unlock` | glibc's; ends a timed hold, records the pending wait | glibc's |
//! | `pthread_rwlock_init`, `_destroy` | glibc's; the address loses its entries | glibc's |
//! | `pthread_spin_lock` | glibc's; a contended acquisition's wait (all spinning) is recorded | glibc's |
//! | `pthread_spin_trylock`, `_unlock`, `_init`, `_destroy` | as for reader-writer locks | glibc's |
//! | `syscall` | glibc's; `SYS_futex` waits are recorded, wakes end a timed hold | glibc's |
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
//! In profile mode a lock is known by its address and kind (a
//! reader-writer lock's readers and writers apart; a futex word in the
//! waiting thread's own storage by its call stack, see [`futex`]). At its
//! first contended acquisition the library walks the stack (libgcc's
//! unwinder, on that cold path only) and names the lock by the first frame
//! outside the C library, its threads library, the loader, libgcc, the C++
//! runtime and this library, written as `symbol+0xOFF (object+0xOFF)`
//! through `dladdr`, plus `#k` when several locks were first contended at
//! one site. The entry keeps the stack (16 frames at most). `symmetry
//! profile` then reads the program's debug information (`addr2line`) and
//! renames each lock by the first frame of that stack outside Rust's
//! `std`, `core` and `parking_lot` and C++'s `std` (wrappers compiled
//! into the program), as a function and line. A lock destroyed (or
//! initialized again) loses its name, so a new lock at the same address
//! gets its own.
//!
//! # What is measured
//!
//! Per lock: the contended waits (a histogram in spins, their longest),
//! the acquisitions from the lock's first contended one on (sampled, one
//! in [`COUNT_EVERY`] per thread, each sample counting for its gap: an
//! estimate; none for a futex lock, whose fast path makes no call), and
//! the holds that followed contended acquisitions, from the wait's end to
//! the unlock's return. Uncontended holds are not timed, so an
//! uncontended critical section reads no clock; a contended lock's holds
//! are the ones its waiters wait for.
//!
//! A pthread lock's wait is the time from the failed `try` call to the
//! return of the real lock call: the holder's remaining hold time plus
//! glibc's wake-up path. It is recorded as not blocked (this library does
//! not know whether glibc slept). A futex wait is the blocking call alone
//! (see [`futex`]). Waits are read from [`clock`]. Inside a critical
//! section the library only reads the clock and the mutex's kind; the
//! wait goes into the thread's own part of the histogram after the
//! thread's next unlock. A wait whose lock is still held when the process
//! exits is not recorded (at most one per thread). Re-acquisitions inside
//! `pthread_cond_wait`, `_timedwait` and `_clockwait` happen inside glibc
//! and are not seen (glibc's own futex calls do not go through
//! `syscall()`); `trylock` and `unlock` never wait. A lock is known by its
//! address here, so a new lock made at a reused address without its
//! `init` or `destroy` call (a C++ `std::mutex` in a reused heap chunk)
//! records under the name of the first lock there.
//!
//! # Environment
//!
//! - `SYMMETRY_LOCK_PROFILE=PATH`: where the profile is written at exit
//!   (nothing is written without it).
//! - `SYMMETRY_LOCK=NAME`: replace mode ([`replace::algorithms`] lists the
//!   names; an unknown name stops the program with the list); `glibc` or
//!   unset: profile mode; [`OFF`]: pass-through.
//! - `SYMMETRY_LOCK_WAIT=pure|polite`: how replace mode's waiters wait
//!   ([`replace::Waiting`]); unset: `polite` for FIFO locks, `pure` for
//!   the others. `symmetry profile --lock NAME --pure` sets `pure`.
//! - `SYMMETRY_NS_PER_SPIN`, `SYMMETRY_C_OS`: the machine constants the
//!   profile is priced with (see `symmetry calibrate`); measured or
//!   defaulted otherwise.
//!
//! The mutex entry points also capture their return address in a few
//! instructions of assembly on x86-64, the site used where the stack
//! cannot be walked.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

use std::ffi::{CStr, c_int, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, Ordering};

use symmetry_locks::spin_then_block::profiler::LockKind;

use profile::Lock;

/// One acquisition in this many is counted, on average (see the crate
/// docs, "What is measured").
pub const COUNT_EVERY: u32 = profile::COUNT_EVERY;

/// The blocker name under which glibc's locks appear in the profile.
pub const BLOCKER: &str = "glibc";

/// The blocker name of futex waits (made through `syscall()`): the
/// kernel's futex, whatever lock or condition the program built on it.
pub const FUTEX_BLOCKER: &str = "futex";

/// Environment variable naming the profile file written at exit.
pub const PROFILE_ENV: &str = "SYMMETRY_LOCK_PROFILE";

/// Environment variable that selects replace mode: the registry name of
/// the lock algorithm every normal mutex runs on (`glibc` or unset:
/// profile mode).
pub const LOCK_ENV: &str = "SYMMETRY_LOCK";

/// The value of [`LOCK_ENV`] that selects pass-through: the library is
/// loaded, but records and replaces nothing.
pub const OFF: &str = "off";

/// Set when the library is to record and replace nothing (see
/// [`inert`]): by the search for its own image when that lies in the
/// executable, and by the decision of the mode when [`LOCK_ENV`] is
/// [`OFF`], both made by the constructor (or by a thread that calls in
/// before it). Never cleared.
pub(crate) static INERT: AtomicBool = AtomicBool::new(false);

pub mod clock;
pub mod futex;
mod profile;
pub mod replace;
pub mod rwlock;
mod stack;

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

/// Which path the mutex wrappers take, decided once by the constructor
/// after the function table, the image search and the mode: one load on
/// every lock and unlock, where the general path asks the table's, the
/// mode's and the inert flag's once-cells in turn. Values: [`GENERAL`],
/// [`PASS`], [`PROFILE`]. Stored once (Release, after [`HOT`]); never
/// changed.
static ROUTE: AtomicU8 = AtomicU8::new(GENERAL);
/// The general path: not decided yet (a thread that calls in before the
/// constructor decides there), or replace mode.
const GENERAL: u8 = 0;
/// Every call goes straight to glibc ([`inert`]).
pub(crate) const PASS: u8 = 1;
/// Profile mode.
pub(crate) const PROFILE: u8 = 2;

/// glibc's mutex lock, trylock and unlock, copied out of [`REAL`] by the
/// constructor before it publishes [`ROUTE`], for the fast paths: a load
/// each. `repr(C)`: the x86-64 `pthread_mutex_lock` jumps through `lock`,
/// the first field, from assembly.
#[repr(C)]
struct Hot {
    lock: AtomicPtr<c_void>,
    trylock: AtomicPtr<c_void>,
    unlock: AtomicPtr<c_void>,
}

static HOT: Hot = Hot {
    lock: AtomicPtr::new(core::ptr::null_mut()),
    trylock: AtomicPtr::new(core::ptr::null_mut()),
    unlock: AtomicPtr::new(core::ptr::null_mut()),
};

impl Hot {
    /// Publishes `r`'s functions and then `route` (constructor only).
    fn publish(r: &Real, route: u8) {
        // Relaxed: published by the Release store of the route.
        HOT.lock.store(r.lock as *mut c_void, Ordering::Relaxed);
        HOT.trylock
            .store(r.trylock as *mut c_void, Ordering::Relaxed);
        HOT.unlock.store(r.unlock as *mut c_void, Ordering::Relaxed);
        // Release: pairs with the Acquire load in `route`.
        ROUTE.store(route, Ordering::Release);
    }

    /// `f` as the function it was copied from.
    ///
    /// # Safety
    ///
    /// [`route`] returned [`PASS`] or [`PROFILE`] (so `f` was published,
    /// from a [`Real`] function of type [`LockFn`]).
    #[inline(always)]
    unsafe fn get(f: &AtomicPtr<c_void>) -> LockFn {
        // Relaxed: ordered after the route's Acquire load (see `publish`).
        let p = f.load(Ordering::Relaxed);
        // SAFETY: the caller's contract: a non-null pointer to glibc's
        // function of this type.
        unsafe { std::mem::transmute::<*mut c_void, LockFn>(p) }
    }
}

/// The mutex wrappers' path ([`ROUTE`]).
#[inline(always)]
pub(crate) fn route() -> u8 {
    // Acquire: pairs with the Release store in `Hot::publish`; a route
    // other than GENERAL means the hot functions are there.
    ROUTE.load(Ordering::Acquire)
}

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

/// Whether the library neither profiles nor replaces anything, its
/// wrappers only calling glibc's functions (decided by the constructor):
/// when it is linked into the program's executable instead of preloaded,
/// and in pass-through ([`OFF`]). A program that links the crate for its
/// names and constants (the `symmetry` harness) would otherwise profile
/// its own locks, from every thread and signal handler, into the profiles
/// it measures with. The crate's own unit tests exercise the recording in
/// their test executable, so there it stays on.
#[inline]
fn inert() -> bool {
    // Relaxed: stored by the constructor before the program's threads
    // exist; a thread that called in before the constructor may profile
    // a few calls before it sees the store.
    !cfg!(test) && INERT.load(Ordering::Relaxed)
}

/// Resolves glibc's functions while the process is still single-threaded.
#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = {
    extern "C" fn init() {
        let _ = real();
        let _ = rwlock::real();
        let _ = futex::real();
        // Before the mode: an inert library decides none.
        futex::find_own_image();
        let replacing = replace::mode().is_some();
        // Decided before any thread of the program reads the clock.
        let _ = clock::source();
        let route = if inert() {
            PASS
        } else if replacing {
            GENERAL
        } else {
            PROFILE
        };
        Hot::publish(real(), route);
    }
    init
};

/// Whether mutex `m` is process-shared (read while it is held).
fn pshared(m: *mut libc::pthread_mutex_t) -> bool {
    replace::glibc_kind(m) & replace::PSHARED_BIT != 0
}

/// `pthread_mutex_lock` with its acquisition site.
extern "C" fn lock_at(m: *mut libc::pthread_mutex_t, site: usize) -> c_int {
    match route() {
        // SAFETY: the route says the hot functions are published; the
        // caller's mutex goes to glibc unchanged.
        PASS => return unsafe { Hot::get(&HOT.lock)(m) },
        PROFILE => {
            // SAFETY: as above.
            let (try_, wait) = unsafe { (|| Hot::get(&HOT.trylock)(m), || Hot::get(&HOT.lock)(m)) };
            return profile::acquire_profiling(mutex(m), site, try_, wait, || pshared(m));
        }
        _ => {}
    }
    let r = real();
    if let Some(mode) = replace::mode() {
        // SAFETY: as below.
        return replace::lock(mode, m).unwrap_or_else(|| unsafe { (r.lock)(m) });
    }
    // SAFETY: the caller passed its mutex to pthread_mutex_lock; glibc's
    // own functions get it unchanged. Only EBUSY from trylock means
    // "would wait": any other result is the lock call's own answer (0, or
    // a robust mutex's EOWNERDEAD, which also acquires it, or an error).
    let (try_, wait) = unsafe { (|| (r.trylock)(m), || (r.lock)(m)) };
    profile::acquire(mutex(m), site, try_, wait, || pshared(m))
}

/// The profile's identity of mutex `m`.
fn mutex(m: *mut libc::pthread_mutex_t) -> Lock {
    Lock::at(m as usize, LockKind::Mutex)
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
    let try_ = || unsafe { (r.trylock)(m) };
    profile::acquire(mutex(m), site, try_, || glibc(m), || pshared(m))
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
    // Pass-through jumps to glibc's function at once (`Hot::lock`, the
    // first field of `HOT`; x86-64 orders the two loads as the route's
    // Acquire needs).
    core::arch::naked_asm!(
        "cmp byte ptr [rip + {route}], {pass}",
        "jne 2f",
        "jmp qword ptr [rip + {hot}]",
        "2:",
        "mov rsi, [rsp]",
        "jmp {imp}",
        route = sym ROUTE,
        pass = const PASS,
        hot = sym HOT,
        imp = sym lock_at,
    )
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
    // A jump leaves the return address, the site, where it is.
    core::arch::naked_asm!("jmp {f}", f = sym pthread_mutex_lock)
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
    profile::forget(m as usize, &[LockKind::Mutex]);
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
    profile::forget(m as usize, &[LockKind::Mutex]);
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
    if matches!(route(), PASS | PROFILE) {
        // SAFETY: the route says the hot functions are published; the
        // caller's argument, unchanged, to glibc. (Counted at the unlock.)
        return unsafe { Hot::get(&HOT.trylock)(m) };
    }
    let r = real();
    // An acquisition is counted at its unlock, whichever call made it.
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
    // Pass-through is a jump to glibc; everything else is out of line, so
    // that this path saves no registers.
    if route() == PASS {
        // SAFETY: the route says the hot functions are published; the
        // caller's argument, unchanged, to glibc.
        return unsafe { Hot::get(&HOT.unlock)(m) };
    }
    unlock(m)
}

/// `pthread_mutex_unlock` in profile or replace mode (or before the
/// constructor).
#[inline(never)]
fn unlock(m: *mut libc::pthread_mutex_t) -> c_int {
    if route() == PROFILE {
        // SAFETY: the route says the hot functions are published; the
        // caller's argument, unchanged, to glibc.
        let rc = unsafe { Hot::get(&HOT.unlock)(m) };
        profile::released_profiling(m as usize, Some(LockKind::Mutex));
        return rc;
    }
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
            profile::released(m as usize, Some(LockKind::Mutex));
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
    // The wait releases the mutex: its hold ends here.
    profile::released(m as usize, Some(LockKind::Mutex));
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
    // The wait releases the mutex: its hold ends here.
    profile::released(m as usize, Some(LockKind::Mutex));
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
    // The wait releases the mutex: its hold ends here.
    profile::released(m as usize, Some(LockKind::Mutex));
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
