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
//! # Waiting
//!
//! A FIFO spin lock (`ticket`, `anderson`, `mcs`, `clh`,
//! `graunke-thakkar`, and the registry's other `fifo = true` locks) hands
//! the lock to the next waiter in line, running or not; with more
//! runnable threads than cores that waiter is often descheduled, and the
//! whole queue spins until the scheduler runs it (SMARTQ's convoy): a
//! program can slow down by orders of magnitude. So by default replace
//! mode runs those locks with [`Waiting::Polite`]: acquisitions go
//! through the algorithm's `try_lock`, polled for about C spins and then
//! asleep on a futex beside the lock, woken by an unlock that sees a
//! sleeper. Exclusion is still the algorithm's; FIFO order is given up
//! (a waiter cannot keep a queue position without the algorithm's own
//! `lock`, and a position held by a descheduled waiter is the convoy).
//! `SYMMETRY_LOCK_WAIT=pure` (`symmetry profile --pure`) runs the
//! algorithm's own `lock`, as the paper measured it; `polite` applies the
//! policy to any lock. Non-FIFO locks default to `pure`: their waiters
//! hold no position, so a descheduled one holds nobody up.
//!
//! Better placed in `symmetry-locks`: a waiting hook in each queue lock
//! (as `ticket`'s `TicketWait` already is), so a waiter could sleep while
//! keeping its queue position and the policy could keep FIFO order where
//! a program wants it at the price of the convoy.
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
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering, fence};

use lock_api::RawMutex;
use symmetry_locks::backoff::ExpBackoff;
use symmetry_locks::spin_then_block::calibration;
use symmetry_locks::spin_then_block::{Blocker, Futex};

/// Entries of the address tables (mutexes; condition variables).
pub const SLOTS: usize = 1 << 20;

/// A lock algorithm, type-erased: functions on a leaked lock object.
#[derive(Clone, Copy)]
pub struct Algo {
    /// Registry name.
    pub name: &'static str,
    /// Whether the registry calls the lock FIFO: such a lock waits
    /// politely unless told to be pure (see [`Waiting`]).
    pub fifo: bool,
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

const fn algo<L: RawMutex + 'static>(name: &'static str, fifo: bool) -> Algo {
    Algo {
        name,
        fifo,
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
        const REGISTRY: &[Algo] = &[$(algo::<$t>($name, $fifo),)*];
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
            >>(concat!("spin-then-block:", $name), false),
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
    /// Polite waiters asleep or about to sleep on `seq` ([`Waiting`]).
    parked: AtomicU32,
    /// The futex word polite waiters sleep on; bumped by each wake.
    seq: AtomicU32,
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

/// How a replaced mutex's waiter waits (`SYMMETRY_LOCK_WAIT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// The algorithm's own `lock`, exactly as the paper wrote it: a FIFO
    /// spin lock hands the lock to its next waiter even when that waiter
    /// is descheduled, and everyone behind it spins through their time
    /// slices (the convoy SMARTQ describes).
    Pure,
    /// Polite waiting, KLMO91's spin-then-block with the fixed-spin-C
    /// threshold: the algorithm's `try_lock` polled with [`ExpBackoff`]
    /// for about C spins (the block+wake cost,
    /// [`calibration::c_spins_os`]), then the waiter sleeps on a futex
    /// beside the lock ([`Futex`]) and an unlock that sees a sleeper wakes
    /// one. Mutual exclusion is the algorithm's (every acquisition is its
    /// `try_lock`), but arrival order is not kept: a waiter that was
    /// descheduled does not hold up the others, which is the point on a
    /// machine with more runnable threads than cores, and the price is
    /// that a FIFO lock stops being FIFO. (`sched_yield` instead of the
    /// futex was tried and is worse under CPU hogs: a yielder stays
    /// runnable, so it waits out a hog's whole time slice, where a woken
    /// sleeper preempts the hog.)
    Polite,
}

/// Environment variable choosing [`Waiting`]: `pure` or `polite`; unset
/// or empty: `polite` for the locks the registry calls FIFO, `pure` for
/// the others (whose waiters need no queue position to make progress).
pub const WAIT_ENV: &str = "SYMMETRY_LOCK_WAIT";

/// The waiting policy for `algo` given the value of [`WAIT_ENV`]
/// (`None`: unset), or the reason the value is refused.
pub fn waiting(algo: &Algo, env: Option<&str>) -> Result<Waiting, String> {
    match env.map(str::trim) {
        None | Some("") => Ok(if algo.fifo {
            Waiting::Polite
        } else {
            Waiting::Pure
        }),
        Some("pure") => Ok(Waiting::Pure),
        Some("polite") => Ok(Waiting::Polite),
        Some(other) => Err(format!(
            "{WAIT_ENV}={other} is not a waiting policy; accepted: pure, polite"
        )),
    }
}

pub(crate) struct Mode {
    algo: &'static Algo,
    waiting: Waiting,
    /// Spins a polite waiter polls before it sleeps.
    budget: u32,
    mutexes: Table,
    conds: Table,
}

static MODE: OnceLock<Option<Mode>> = OnceLock::new();

/// Replace mode, if `SYMMETRY_LOCK` names an algorithm (aborting with the
/// accepted names if it names none, or if `SYMMETRY_LOCK_WAIT` is not a
/// policy).
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
        let waiting = match waiting(algo, std::env::var(WAIT_ENV).ok().as_deref()) {
            Ok(w) => w,
            Err(e) => {
                eprintln!("symmetry-interpose: {e}");
                std::process::abort();
            }
        };
        Some(Mode::new(algo, waiting))
    })
    .as_ref()
}

impl Mode {
    fn new(algo: &'static Algo, waiting: Waiting) -> Self {
        Mode {
            algo,
            waiting,
            // Decided here, in the library's constructor, so no lock path
            // waits for the calibration (module docs, signal handlers).
            budget: calibration::c_spins_os(),
            mutexes: Table::new(),
            conds: Table::new(),
        }
    }
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
        parked: AtomicU32::new(0),
        seq: AtomicU32::new(0),
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
    acquire(mode, r);
    Some(0)
}

/// Takes `r`'s algorithm lock with the mode's [`Waiting`] policy.
#[inline]
fn acquire(mode: &Mode, r: &Replaced) {
    match mode.waiting {
        // SAFETY: the lock object is the algorithm's own.
        Waiting::Pure => unsafe { (mode.algo.lock)(r.lock) },
        Waiting::Polite => {
            // SAFETY: as above.
            if !unsafe { (mode.algo.try_lock)(r.lock) } {
                acquire_politely(mode, r);
            }
        }
    }
}

/// [`Waiting::Polite`]'s contended path: poll `try_lock` with exponential
/// backoff for about C spins, then sleep until an unlock wakes us.
///
/// No wake-up is lost: a sleeper announces itself in `parked` and then
/// (SeqCst fence) tries the lock; [`release`] unlocks and then (SeqCst
/// fence) reads `parked`. Of two fenced store-then-load sequences at
/// least one sees the other's store: either the sleeper's `try_lock` sees
/// the unlock, or the releaser sees the sleeper and bumps `seq` before its
/// wake, so the sleeper's `FUTEX_WAIT` on the `seq` it read before trying
/// returns at once or is woken.
#[cold]
fn acquire_politely(mode: &Mode, r: &Replaced) {
    let mut backoff = ExpBackoff::new(16, 1024);
    let mut spent = 0u32;
    while spent < mode.budget {
        spent = spent.saturating_add(backoff.limit());
        backoff.wait();
        // SAFETY: the lock object is the algorithm's own.
        if unsafe { (mode.algo.try_lock)(r.lock) } {
            return;
        }
    }
    loop {
        // Relaxed: the fence below orders it before the try.
        r.parked.fetch_add(1, Ordering::Relaxed);
        // Relaxed: a stale `seq` only makes the wait return at once.
        let seen = r.seq.load(Ordering::Relaxed);
        // SeqCst: pairs with the fence in `release` (doc comment above).
        fence(Ordering::SeqCst);
        // SAFETY: as above.
        let got = unsafe { (mode.algo.try_lock)(r.lock) };
        if !got {
            Futex::wait(&(), &r.seq, seen);
        }
        // Relaxed: only a count of sleepers; an extra wake is harmless.
        r.parked.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: as above.
        if got || unsafe { (mode.algo.try_lock)(r.lock) } {
            return;
        }
    }
}

/// Releases `r`'s algorithm lock, waking a polite sleeper if any.
#[inline]
fn release(mode: &Mode, r: &Replaced) {
    // SAFETY: the caller holds the lock (POSIX makes the unlocker the
    // holder; the condition wait releases what its caller holds).
    unsafe { (mode.algo.unlock)(r.lock) };
    if mode.waiting == Waiting::Polite {
        // SeqCst: pairs with the fence in `acquire_politely`.
        fence(Ordering::SeqCst);
        if r.parked.load(Ordering::Relaxed) != 0 {
            wake(r);
        }
    }
}

#[cold]
fn wake(r: &Replaced) {
    // Relaxed: the futex call orders the word with the sleeper's check.
    r.seq.fetch_add(1, Ordering::Relaxed);
    Futex::wake_one(&(), &r.seq);
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
    release(mode, r);
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
        release(mode, r);
        let rc = wait(inner);
        (real.unlock)(inner);
        acquire(mode, r);
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

    /// Every algorithm, with its default waiting policy, keeps a plain
    /// counter exact when C-style lock and unlock calls (token kept in the
    /// entry) come from two threads. (Not more than a 2-core machine has:
    /// `tas` spins without yielding.)
    #[test]
    fn every_algorithm_excludes_through_the_erased_entry_points() {
        for a in algorithms() {
            let w = waiting(a, None).expect("the default policy");
            assert_eq!(w == Waiting::Polite, a.fifo, "{}", a.name);
            let mode: &'static Mode = Box::leak(Box::new(Mode::new(a, w)));
            // SAFETY: `fresh` returns a leaked `Replaced`, never freed.
            let r: &'static Replaced = unsafe { &*fresh(mode) };
            let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let count = count.clone();
                    std::thread::spawn(move || {
                        for _ in 0..20_000 {
                            acquire(mode, r);
                            let v = count.load(Ordering::Relaxed);
                            count.store(v + 1, Ordering::Relaxed);
                            release(mode, r);
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

    #[test]
    fn the_waiting_policy_is_read_from_its_variable() {
        let ticket = algorithm("ticket").expect("ticket");
        let tas = algorithm("tas").expect("tas");
        assert_eq!(waiting(ticket, None), Ok(Waiting::Polite));
        assert_eq!(waiting(ticket, Some("")), Ok(Waiting::Polite));
        assert_eq!(waiting(ticket, Some("pure")), Ok(Waiting::Pure));
        assert_eq!(waiting(tas, None), Ok(Waiting::Pure));
        assert_eq!(waiting(tas, Some(" polite ")), Ok(Waiting::Polite));
        let e = waiting(tas, Some("fast")).unwrap_err();
        assert!(e.contains("pure, polite"), "{e}");
    }
}
