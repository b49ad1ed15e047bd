//! Replace mode: `SYMMETRY_LOCK=NAME` runs every normal pthread mutex of
//! the program on lock algorithm `NAME` from the registry.
//!
//! # Mutexes
//!
//! A mutex is found by its address (as LiTL does) in a fixed open-address
//! table ([`SLOTS`] entries, keys inserted with one CAS and never
//! removed). Its entry points at a `Replaced`: the algorithm's lock, the
//! token its `lock` returned (kept in the entry by the holder until
//! `unlock`), and a real glibc mutex used only around condition waits.
//! Statically initialised mutexes need nothing: the first call on an
//! address maps it. A mutex whose glibc `kind` is not the normal one
//! (recursive, error-checking, adaptive: set by `pthread_mutex_init` or a
//! static initializer) is mapped to `PASS` and stays glibc's, with its
//! semantics. `pthread_mutex_init` on a mapped address installs a fresh
//! lock (the old one is leaked: it may still be referenced by a racing
//! call of a buggy program); `_destroy` keeps the mapping, so the next
//! mutex at that address reuses the unlocked lock.
//!
//! # Condition variables
//!
//! glibc's `pthread_cond_wait` needs a glibc mutex, so a wait on a
//! replaced mutex `m` goes: lock `m`'s inner glibc mutex, record `m` as
//! the condition's mutex, release `m`'s algorithm lock, wait on the
//! condition with the inner mutex, release the inner mutex, take the
//! algorithm lock again. `pthread_cond_signal`/`_broadcast` take the
//! inner mutex of the condition's recorded mutex around the real call. A
//! signaller that changed the predicate held `m`, which the waiter only
//! released after taking the inner mutex; so the signal's inner lock
//! waits until the waiter is inside `pthread_cond_wait`, and no wake-up is
//! lost.
//!
//! # Signal handlers
//!
//! POSIX does not promise that `pthread_mutex_lock` is async-signal-safe,
//! but programs take mutexes in handlers, and glibc's mutex survives it as
//! long as the interrupted thread does not hold the handler's mutex: its
//! whole state is the lock word. The registry's algorithms keep that
//! property except `parking_lot`, whose waiters queue in process-wide
//! hash buckets behind internal locks: a handler whose mutex is contended
//! while its thread was interrupted inside a bucket's lock (the same
//! bucket, by hash) waits for itself forever. Do not run a program whose
//! signal handlers take mutexes on `parking_lot`; the tests run such a
//! program on every other algorithm.
//!
//! Nothing on a lock path waits for a one-time initialisation (a
//! `OnceLock`, a `Once`) that the interrupted thread may be running: the
//! locks read `clock_gettime` directly ([`symmetry_locks::clock`]), and the
//! constants that are decided lazily (the profile clock's source and
//! rate, spin-then-block's calibration) never make a handler wait for
//! its own thread's decision. `mcs-tp` once hung here: its clock's epoch
//! was a `OnceLock`, and a handler that took a mutex while its thread was
//! setting the epoch waited for itself.
//!
//! One narrower window remains for the queue locks (`mcs`, `clh`,
//! `graunke-thakkar` and those built on them): they take queue nodes from
//! a per-thread pool, and the pool grows (with `malloc` and a process-wide
//! mutex) only when a thread holds more locks at once than ever before. A
//! handler that interrupts its thread inside that growth, and itself needs
//! a new node, can deadlock there, as any `malloc` in a handler can. A
//! thread's first acquisitions are where this can happen; once a thread has
//! held its handler's mutex while holding its deepest nest of others, its
//! pool never grows again.

use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::mem::MaybeUninit;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use lock_api::RawMutex;

/// Entries of the address tables (mutexes; condition variables).
pub const SLOTS: usize = 1 << 20;

/// A lock algorithm, type-erased: functions on a leaked lock object.
#[derive(Clone, Copy)]
pub struct Algo {
    /// Registry name.
    pub name: &'static str,
    new: fn() -> *mut (),
    lock: unsafe fn(*mut ()),
    try_lock: unsafe fn(*mut ()) -> bool,
    unlock: unsafe fn(*mut ()),
}

impl std::fmt::Debug for Algo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// A lock and the token of its current holder.
struct Held<L: RawMutex> {
    raw: L,
    token: UnsafeCell<MaybeUninit<L::Guard>>,
}

fn new_held<L: RawMutex>() -> *mut () {
    Box::into_raw(Box::new(Held::<L> {
        raw: L::INIT,
        token: UnsafeCell::new(MaybeUninit::uninit()),
    }))
    .cast()
}

/// # Safety
/// `p` came from `new_held::<L>`.
unsafe fn lock_held<L: RawMutex>(p: *mut ()) {
    // SAFETY: per the contract; the token is written only by the holder.
    unsafe {
        let h = &*(p as *const Held<L>);
        let g = h.raw.lock();
        (*h.token.get()).write(g);
    }
}

/// # Safety
/// As `lock_held`.
unsafe fn try_lock_held<L: RawMutex>(p: *mut ()) -> bool {
    // SAFETY: as in `lock_held`.
    unsafe {
        let h = &*(p as *const Held<L>);
        match h.raw.try_lock() {
            Some(g) => {
                (*h.token.get()).write(g);
                true
            }
            None => false,
        }
    }
}

/// # Safety
/// As `lock_held`, and the caller holds the lock (POSIX: the owner
/// unlocks a normal mutex).
unsafe fn unlock_held<L: RawMutex>(p: *mut ()) {
    // SAFETY: the holder wrote the token when it acquired the lock and
    // nobody else touches it until this unlock.
    unsafe {
        let h = &*(p as *const Held<L>);
        let g = (*h.token.get()).assume_init_read();
        h.raw.unlock(g);
    }
}

const fn algo<L: RawMutex + 'static>(name: &'static str) -> Algo {
    Algo {
        name,
        new: new_held::<L>,
        lock: lock_held::<L>,
        try_lock: try_lock_held::<L>,
        unlock: unlock_held::<L>,
    }
}

macro_rules! registry_algos {
    ($($name:literal => $t:ty, kind = $kind:ident, fifo = $fifo:literal;)*) => {
        /// Every registry lock that can stand in for a pthread mutex: all
        /// but those built on the pthread mutex itself (which would call
        /// back into this library).
        const REGISTRY: &[Algo] = &[$(algo::<$t>($name),)*];
    };
}
symmetry_locks::for_each_lock!(registry_algos);

macro_rules! spin_then_block_algos {
    ($($name:literal => $p:ty;)*) => {
        /// KLMO91's lock with each spin policy, blocking on a futex.
        const SPIN_THEN_BLOCK: &[Algo] = &[$(
            algo::<symmetry_locks::spin_then_block::SpinThenBlock<
                $p,
                symmetry_locks::spin_then_block::Futex,
            >>(concat!("spin-then-block:", $name)),
        )*];
    };
}
symmetry_locks::for_each_spin_policy!(spin_then_block_algos);

/// Registry locks that wrap the pthread mutex: refused in replace mode.
const WRAPS_PTHREAD: &[&str] = &["pthread", "pthread-adaptive", "native-np"];

/// The algorithms replace mode accepts.
pub fn algorithms() -> impl Iterator<Item = &'static Algo> {
    REGISTRY
        .iter()
        .filter(|a| !WRAPS_PTHREAD.contains(&a.name))
        .chain(SPIN_THEN_BLOCK.iter())
}

/// The algorithm named `name`, if replace mode accepts it.
pub fn algorithm(name: &str) -> Option<&'static Algo> {
    algorithms().find(|a| a.name == name)
}

/// A replaced mutex.
struct Replaced {
    lock: *mut (),
    /// A glibc mutex used only around condition waits (module docs).
    inner: UnsafeCell<libc::pthread_mutex_t>,
}

/// Marks a mutex left to glibc (not the normal kind).
const PASS: *mut Replaced = std::ptr::dangling_mut::<Replaced>();

/// One address table: keys (0 = free) and values (null = being filled).
struct Table {
    keys: Box<[AtomicUsize]>,
    vals: Box<[AtomicPtr<Replaced>]>,
}

impl Table {
    fn new() -> Self {
        Table {
            keys: zeroed_slice(),
            vals: zeroed_slice(),
        }
    }

    fn start(addr: usize) -> usize {
        // Fibonacci hashing of the address (mutexes are 8-byte aligned).
        ((addr as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 44) as usize & (SLOTS - 1)
    }

    /// The value of `addr`, if mapped.
    #[inline]
    fn get(&self, addr: usize) -> Option<*mut Replaced> {
        let mut i = Self::start(addr);
        for _ in 0..SLOTS {
            // Acquire: pairs with the Release CAS that inserted the key.
            match self.keys[i].load(Ordering::Acquire) {
                0 => return None,
                k if k == addr => return Some(self.wait_val(i)),
                _ => i = (i + 1) & (SLOTS - 1),
            }
        }
        None
    }

    fn wait_val(&self, i: usize) -> *mut Replaced {
        loop {
            // Acquire: pairs with the Release store of the value.
            let v = self.vals[i].load(Ordering::Acquire);
            if !v.is_null() {
                return v;
            }
            std::hint::spin_loop();
        }
    }

    /// The value of `addr`, mapping it to `make()` if it is not mapped.
    fn get_or_insert(&self, addr: usize, make: impl FnOnce() -> *mut Replaced) -> *mut Replaced {
        let mut i = Self::start(addr);
        for _ in 0..SLOTS {
            // Acquire: as in `get`.
            let k = self.keys[i].load(Ordering::Acquire);
            if k == addr {
                return self.wait_val(i);
            }
            if k == 0 {
                // AcqRel: Release publishes the key; Acquire (on failure)
                // reads the winner's key.
                match self.keys[i].compare_exchange(0, addr, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        let v = make();
                        // Release: publishes the lock object to `wait_val`.
                        self.vals[i].store(v, Ordering::Release);
                        return v;
                    }
                    Err(k) if k == addr => return self.wait_val(i),
                    Err(_) => {}
                }
            }
            i = (i + 1) & (SLOTS - 1);
        }
        full()
    }

    /// Maps `addr` to `v` (a fresh lock at `pthread_mutex_init`).
    fn set(&self, addr: usize, v: *mut Replaced) {
        let old = self.get_or_insert(addr, || v);
        if old != v {
            let mut i = Self::start(addr);
            // Acquire: as in `get`.
            while self.keys[i].load(Ordering::Acquire) != addr {
                i = (i + 1) & (SLOTS - 1);
            }
            // Release: as in `get_or_insert`.
            self.vals[i].store(v, Ordering::Release);
        }
    }
}

/// `SLOTS` zeroed atomics, from zero pages: untouched entries cost no
/// memory.
fn zeroed_slice<T>() -> Box<[T]> {
    let layout = std::alloc::Layout::array::<T>(SLOTS).expect("table layout");
    // SAFETY: a non-zero layout; the result is checked for null.
    let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: `T` is `AtomicUsize` or `AtomicPtr<_>`, for which all-zero
    // bytes are a valid value (0, null); the allocation holds `SLOTS` of
    // them with `T`'s layout, and the Box frees it with that layout.
    unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, SLOTS)) }
}

#[cold]
fn full() -> ! {
    let msg = b"symmetry-interpose: more than 1048576 distinct mutex or condition addresses; replace mode cannot map more\n";
    // SAFETY: a static buffer to stderr, then abort.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::abort()
    }
}

pub(crate) struct Mode {
    algo: &'static Algo,
    mutexes: Table,
    conds: Table,
}

static MODE: OnceLock<Option<Mode>> = OnceLock::new();

/// Replace mode, if `SYMMETRY_LOCK` names an algorithm (aborting with the
/// accepted names if it names none).
pub(crate) fn mode() -> Option<&'static Mode> {
    MODE.get_or_init(|| {
        let name = std::env::var(crate::LOCK_ENV).ok()?;
        let name = name.trim();
        if name.is_empty() || name == "glibc" {
            return None;
        }
        let Some(algo) = algorithm(name) else {
            let names: Vec<&str> = algorithms().map(|a| a.name).collect();
            eprintln!(
                "symmetry-interpose: {}={name} is not a lock this library can run; accepted: glibc, {}",
                crate::LOCK_ENV,
                names.join(", ")
            );
            std::process::abort();
        };
        Some(Mode {
            algo,
            mutexes: Table::new(),
            conds: Table::new(),
        })
    })
    .as_ref()
}

/// glibc's `kind` field of a mutex (x86-64 and aarch64 layout: the fifth
/// int), 0 for a normal mutex.
pub(crate) fn glibc_kind(m: *mut libc::pthread_mutex_t) -> c_int {
    // SAFETY: a pthread_mutex_t is 40 (or more) bytes; offset 16 is inside.
    unsafe { m.cast::<u8>().add(16).cast::<c_int>().read_volatile() }
}

/// glibc's bit of `kind` for a `PTHREAD_PROCESS_SHARED` mutex.
pub(crate) const PSHARED_BIT: c_int = 128;

fn fresh(mode: &Mode) -> *mut Replaced {
    let r = Box::new(Replaced {
        lock: (mode.algo.new)(),
        inner: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
    });
    Box::into_raw(r)
}

/// The replaced mutex at `m`, or `None` for a mutex left to glibc.
#[inline]
fn replaced(mode: &Mode, m: *mut libc::pthread_mutex_t) -> Option<&'static Replaced> {
    let v = mode.mutexes.get_or_insert(m as usize, || {
        if glibc_kind(m) == 0 {
            fresh(mode)
        } else {
            PASS
        }
    });
    // SAFETY: values are leaked `Replaced`s, never freed.
    (v != PASS).then(|| unsafe { &*v })
}

/// Replace-mode `pthread_mutex_init`: glibc initializes the memory (so
/// its kind is known), then the address maps to a fresh lock or to glibc.
pub(crate) fn init(mode: &Mode, m: *mut libc::pthread_mutex_t, rc: c_int) -> c_int {
    if rc == 0 {
        let v = if glibc_kind(m) == 0 {
            fresh(mode)
        } else {
            PASS
        };
        mode.mutexes.set(m as usize, v);
    }
    rc
}

/// Replace-mode lock; `None`: left to glibc.
#[inline]
pub(crate) fn lock(mode: &Mode, m: *mut libc::pthread_mutex_t) -> Option<c_int> {
    let r = replaced(mode, m)?;
    // SAFETY: the lock object is the algorithm's own.
    unsafe { (mode.algo.lock)(r.lock) };
    Some(0)
}

/// Replace-mode trylock.
#[inline]
pub(crate) fn try_lock(mode: &Mode, m: *mut libc::pthread_mutex_t) -> Option<c_int> {
    let r = replaced(mode, m)?;
    // SAFETY: as in `lock`.
    Some(if unsafe { (mode.algo.try_lock)(r.lock) } {
        0
    } else {
        libc::EBUSY
    })
}

/// Replace-mode unlock.
#[inline]
pub(crate) fn unlock(mode: &Mode, m: *mut libc::pthread_mutex_t) -> Option<c_int> {
    let r = replaced(mode, m)?;
    // SAFETY: as in `lock`; POSIX makes the caller the holder.
    unsafe { (mode.algo.unlock)(r.lock) };
    Some(0)
}

/// Replace-mode timed lock: try until `abstime` (CLOCK_REALTIME), yielding
/// between tries.
pub(crate) fn timed_lock(
    mode: &Mode,
    m: *mut libc::pthread_mutex_t,
    abstime: *const libc::timespec,
) -> Option<c_int> {
    let r = replaced(mode, m)?;
    if abstime.is_null() {
        return Some(libc::EINVAL);
    }
    // SAFETY: the caller's timespec.
    let deadline = unsafe { *abstime };
    if deadline.tv_nsec < 0 || deadline.tv_nsec >= 1_000_000_000 {
        return Some(libc::EINVAL);
    }
    loop {
        // SAFETY: as in `lock`.
        if unsafe { (mode.algo.try_lock)(r.lock) } {
            return Some(0);
        }
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid out-pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
        if (now.tv_sec, now.tv_nsec) >= (deadline.tv_sec, deadline.tv_nsec) {
            return Some(libc::ETIMEDOUT);
        }
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
}

/// Replace-mode condition wait (module docs); `wait` is the real
/// `pthread_cond_wait` or `_timedwait` on the inner mutex.
pub(crate) fn cond_wait(
    mode: &Mode,
    c: *mut libc::pthread_cond_t,
    m: *mut libc::pthread_mutex_t,
    wait: impl FnOnce(*mut libc::pthread_mutex_t) -> c_int,
) -> Option<c_int> {
    let r = replaced(mode, m)?;
    let inner = r.inner.get();
    let real = crate::real();
    // SAFETY: `inner` is a normal glibc mutex owned by this entry; the
    // algorithm lock is held by the caller (POSIX).
    unsafe {
        (real.lock)(inner);
        mode.conds
            .set(c as usize, (r as *const Replaced).cast_mut());
        (mode.algo.unlock)(r.lock);
        let rc = wait(inner);
        (real.unlock)(inner);
        (mode.algo.lock)(r.lock);
        Some(rc)
    }
}

/// Replace-mode signal or broadcast: the real call, inside the inner mutex
/// of the condition's mutex if a waiter recorded one.
pub(crate) fn cond_signal(
    mode: &Mode,
    c: *mut libc::pthread_cond_t,
    signal: impl FnOnce() -> c_int,
) -> c_int {
    match mode.conds.get(c as usize) {
        Some(r) if r != PASS => {
            // SAFETY: a leaked `Replaced` recorded by a waiter.
            let inner = unsafe { (*r).inner.get() };
            let real = crate::real();
            // SAFETY: the inner mutex is a normal glibc mutex.
            unsafe {
                (real.lock)(inner);
                let rc = signal();
                (real.unlock)(inner);
                rc
            }
        }
        _ => signal(),
    }
}

// SAFETY: `Replaced` is shared between threads only through its lock
// algorithm and the inner glibc mutex, both made for that.
unsafe impl Sync for Replaced {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every algorithm keeps a plain counter exact when C-style lock and
    /// unlock calls (token kept in the entry) come from two threads. (Not
    /// more than a 2-core machine has: FIFO spin locks convoy behind a
    /// preempted waiter, SMARTQ's point, and would take minutes.)
    #[test]
    fn every_algorithm_excludes_through_the_erased_entry_points() {
        for a in algorithms() {
            let lock = (a.new)() as usize;
            let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let count = count.clone();
                    std::thread::spawn(move || {
                        for _ in 0..20_000 {
                            // SAFETY: the lock object of `a`; each thread
                            // unlocks what it locked.
                            unsafe { (a.lock)(lock as *mut ()) };
                            let v = count.load(Ordering::Relaxed);
                            count.store(v + 1, Ordering::Relaxed);
                            // SAFETY: as above.
                            unsafe { (a.unlock)(lock as *mut ()) };
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(count.load(Ordering::Relaxed), 40_000, "{}", a.name);
        }
    }
}
