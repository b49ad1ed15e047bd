//! Replace mode: `SYMMETRY_LOCK=NAME` runs every normal pthread mutex of
//! the program on lock algorithm `NAME` from the registry.
//!
//! # Mutexes
//!
//! A mutex's identity is its memory, not its address. A replaced mutex
//! carries a mark of this library's own in its `pthread_mutex_t` bytes:
//! glibc's `__list` pair (bytes 24..40 on x86-64 and aarch64), which
//! glibc uses only for robust mutexes (never replaced) and which every
//! way of making a mutex clears: `pthread_mutex_init` (it zeroes the whole
//! object), assignment of any static initializer (`PTHREAD_MUTEX_INITIALIZER`,
//! `PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP`, ...: zeros there), and zeroed
//! memory. The first word is `MARK ^ address` (so a copy of a mutex's
//! bytes elsewhere is not taken for the original), the second points at
//! the mutex's `Replaced`: the algorithm's lock, the token its `lock`
//! returned (kept by the holder until `unlock`), the polite waiters' futex
//! and a real glibc mutex used only around condition waits. The fast path
//! of every call is two loads from the mutex itself.
//!
//! A mutex without the mark is new memory. Its kind is read from the
//! memory (glibc's `__kind`, which every initializer writes): a normal,
//! process-private, non-robust mutex without priority protocol is
//! replaced; anything else (recursive, error-checking, adaptive, robust,
//! process-shared, priority-inheritance or -protection, or destroyed)
//! goes to glibc, with glibc's semantics, and stderr says so once per
//! reason (the fail-safe rule: what replace mode cannot serve is glibc's).
//! Marking is serialized per mutex by a CAS of the mark word to a busy
//! value, so two threads that meet a new mutex agree on its lock.
//!
//! A fixed open-address table ([`SLOTS`] entries, keys never removed)
//! maps each address to the last `Replaced` made there, and a new mutex at
//! that address reuses it if its lock is free, so a program that makes
//! and drops mutexes at the same few addresses (C++ objects, heap chunks)
//! does not grow. A lock still held (its mutex's memory re-made while
//! locked) is not reused: the new mutex gets a fresh one. When the table
//! is full a new mutex gets a fresh lock that is never reused (memory
//! grows; nothing stops). `pthread_mutex_destroy` clears the mark (glibc
//! also sets `__kind` to -1: a destroyed mutex used again goes to glibc,
//! which refuses it, as without the library), and answers `EBUSY` for a
//! held mutex, as glibc does.
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
//! lost. Timed waits (`_timedwait`, `_clockwait`) are the same with the
//! real timed call; `pthread_mutex_timedlock` and `_clocklock` poll
//! `try_lock` and, politely, sleep on the lock's futex with the caller's
//! deadline (`FUTEX_WAIT_BITSET` on its clock), so a wake-up or the
//! deadline ends the wait. The condition table maps at most [`SLOTS`]
//! conditions; a wait on one more uses one inner mutex shared by all such
//! conditions (their signals take it too), slower but still without a
//! lost wake-up.
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
//! A thread marks a new mutex with every signal blocked, so a handler
//! cannot find its own thread's half-made mark and wait for it.
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
//! The queue locks (`mcs`, `clh`, `graunke-thakkar` and those built on
//! them) take queue nodes from a per-thread pool, which a handler may
//! interrupt. The pool is safe there (`symmetry-locks`' `node_pool` docs):
//! a handler leaves a busy stack alone, the pool's cold path (the shared
//! slab's mutex) runs with every signal blocked, and nodes live in memory
//! the pool maps itself, so no handler calls `malloc` (which would
//! deadlock when its thread was interrupted inside `malloc`). `clh` once
//! hung here: a handler interrupted a new thread while it drew its first
//! node from the shared list's mutex, and needed one itself.

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

    /// The value of `addr`, mapping it to `make()` if it is not mapped;
    /// `None` when the table is full.
    fn get_or_insert(
        &self,
        addr: usize,
        make: impl FnOnce() -> *mut Replaced,
    ) -> Option<*mut Replaced> {
        let mut i = Self::start(addr);
        for _ in 0..SLOTS {
            // Acquire: as in `get`.
            let k = self.keys[i].load(Ordering::Acquire);
            if k == addr {
                return Some(self.wait_val(i));
            }
            if k == 0 {
                // AcqRel: Release publishes the key; Acquire (on failure)
                // reads the winner's key.
                match self.keys[i].compare_exchange(0, addr, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        let v = make();
                        // Release: publishes the lock object to `wait_val`.
                        self.vals[i].store(v, Ordering::Release);
                        return Some(v);
                    }
                    Err(k) if k == addr => return Some(self.wait_val(i)),
                    Err(_) => {}
                }
            }
            i = (i + 1) & (SLOTS - 1);
        }
        None
    }

    /// Maps `addr` to `v`; `false` when the table is full.
    fn set(&self, addr: usize, v: *mut Replaced) -> bool {
        let Some(old) = self.get_or_insert(addr, || v) else {
            return false;
        };
        if old != v {
            let mut i = Self::start(addr);
            // Acquire: as in `get`.
            while self.keys[i].load(Ordering::Acquire) != addr {
                i = (i + 1) & (SLOTS - 1);
            }
            // Release: as in `get_or_insert`.
            self.vals[i].store(v, Ordering::Release);
        }
        true
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
    /// that a FIFO lock stops being FIFO. (A futex sleep rather than
    /// `sched_yield`: a yielder stays runnable and can wait out a CPU
    /// hog's whole time slice after each yield, where a woken sleeper is
    /// scheduled promptly.)
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

// The mark lives in bytes 24..40 (module docs).
const _: () = assert!(std::mem::size_of::<libc::pthread_mutex_t>() >= 40);
const _: () = assert!(std::mem::align_of::<libc::pthread_mutex_t>() >= 8);

/// glibc's bit of `kind` for a `PTHREAD_PROCESS_SHARED` mutex.
pub(crate) const PSHARED_BIT: c_int = 128;
/// glibc's bit of `kind` for a robust mutex.
const ROBUST_BIT: c_int = 16;
/// glibc's bits of `kind` for the priority-inheritance and -protection
/// protocols.
const PROTOCOL_BITS: c_int = 32 | 64;
/// glibc's lock-elision hints in `kind`: no semantics, ignored here.
const ELISION_BITS: c_int = 256 | 512;

/// What replace mode does not serve itself, and says once on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
enum Note {
    /// Recursive, error-checking or adaptive: left to glibc.
    Kind,
    /// Robust: left to glibc.
    Robust,
    /// Process-shared: left to glibc.
    Shared,
    /// Priority inheritance or protection: left to glibc.
    Protocol,
    /// A destroyed mutex used again: left to glibc (which refuses it).
    Destroyed,
    /// The mutex table is full: new mutexes get locks never reused.
    MutexesFull,
    /// The condition table is full: new conditions share one inner mutex.
    CondsFull,
}

impl Note {
    fn text(self) -> &'static [u8] {
        match self {
            Note::Kind => b"symmetry-interpose: a recursive, error-checking or adaptive mutex stays glibc's (replace mode runs normal mutexes)\n",
            Note::Robust => b"symmetry-interpose: a robust mutex stays glibc's\n",
            Note::Shared => b"symmetry-interpose: a process-shared mutex stays glibc's (a replacement lock lives in one process)\n",
            Note::Protocol => b"symmetry-interpose: a priority-inheritance or priority-protection mutex stays glibc's\n",
            Note::Destroyed => b"symmetry-interpose: a destroyed mutex was used; glibc answers for it, as without the library\n",
            Note::MutexesFull => b"symmetry-interpose: more than 1048576 mutex addresses; further mutexes get locks that are never reused\n",
            Note::CondsFull => b"symmetry-interpose: more than 1048576 condition variables waited on; further ones share one inner mutex\n",
        }
    }
}

/// Notes already written (bit `1 << Note`).
static NOTED: AtomicU32 = AtomicU32::new(0);

/// Writes `n` to stderr the first time it happens.
#[cold]
fn note(n: Note) {
    let bit = 1u32 << (n as u32);
    // Relaxed: only which notes were written; no data is published.
    if NOTED.fetch_or(bit, Ordering::Relaxed) & bit == 0 {
        let t = n.text();
        // SAFETY: a static buffer to stderr (write(2) takes no lock).
        unsafe { libc::write(2, t.as_ptr().cast(), t.len()) };
    }
}

/// Whether a mutex of glibc kind `kind` is replaced, or why not.
fn classify(kind: c_int) -> Result<(), Note> {
    if kind < 0 {
        return Err(Note::Destroyed);
    }
    let k = kind & !ELISION_BITS;
    // Robust first: glibc also sets the process-shared bit of a robust
    // mutex (its futex operations are shared ones).
    if k == 0 {
        Ok(())
    } else if k & ROBUST_BIT != 0 {
        Err(Note::Robust)
    } else if k & PSHARED_BIT != 0 {
        Err(Note::Shared)
    } else if k & PROTOCOL_BITS != 0 {
        Err(Note::Protocol)
    } else {
        Err(Note::Kind)
    }
}

/// The mark's constant ("SYMMETRY"); the mark of the mutex at `addr` is
/// `MARK ^ addr` (odd: mutexes are 8-byte aligned and `MARK` is odd).
const MARK: usize = 0x5359_4D4D_4554_5259u64 as usize;

#[inline]
fn mark_of(addr: usize) -> usize {
    MARK ^ addr
}

/// The mark word while one thread is marking the mutex (even).
#[inline]
fn busy_of(addr: usize) -> usize {
    MARK ^ addr ^ 1
}

/// The mark word and the `Replaced` pointer word of mutex `m`: glibc's
/// `__list.__prev` and `__list.__next`.
#[inline]
fn words(m: *mut libc::pthread_mutex_t) -> (&'static AtomicUsize, &'static AtomicUsize) {
    // SAFETY: a pthread_mutex_t is at least 40 bytes and 8-aligned (the
    // assertions above), so bytes 24..32 and 32..40 are aligned words
    // inside it. The program's mutex outlives each call made on it; the
    // `'static` never leaves this module's calls. glibc touches these
    // bytes only for robust mutexes, which are never marked.
    unsafe {
        let b = m.cast::<u8>();
        (
            &*b.add(24).cast::<AtomicUsize>(),
            &*b.add(32).cast::<AtomicUsize>(),
        )
    }
}

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
    let addr = m as usize;
    let (mark, ptr) = words(m);
    // Acquire: pairs with the Release store of the mark in `install`, so
    // the pointer stored before it is seen.
    if mark.load(Ordering::Acquire) == mark_of(addr) {
        // SAFETY: the marker stored this pointer to a leaked `Replaced`
        // (never freed) before the mark.
        return Some(unsafe { &*(ptr.load(Ordering::Relaxed) as *const Replaced) });
    }
    install(mode, m)
}

/// Marks mutex `m` (new memory: no mark) with a lock, or leaves it to
/// glibc by its kind (module docs).
#[cold]
fn install(mode: &Mode, m: *mut libc::pthread_mutex_t) -> Option<&'static Replaced> {
    let addr = m as usize;
    let (mark, ptr) = words(m);
    let mut waits = 0u32;
    loop {
        // The kind first: the mark words of a robust mutex are glibc's.
        if let Err(n) = classify(glibc_kind(m)) {
            note(n);
            return None;
        }
        // Acquire: as in `replaced`.
        let w = mark.load(Ordering::Acquire);
        if w == mark_of(addr) {
            // SAFETY: as in `replaced`.
            return Some(unsafe { &*(ptr.load(Ordering::Relaxed) as *const Replaced) });
        }
        if w == busy_of(addr) {
            // Another thread is marking it: a few instructions, unless
            // that thread was descheduled.
            waits += 1;
            if waits < 100 {
                std::hint::spin_loop();
            } else {
                // SAFETY: no preconditions.
                unsafe { libc::sched_yield() };
            }
            continue;
        }
        // A handler cannot interrupt its own thread while it marks a mutex
        // (and then wait for that mark).
        let _masked = symmetry_locks::SignalsBlocked::new();
        // Relaxed: the CAS only elects the marker; what it publishes goes
        // out with the Release store below.
        if mark
            .compare_exchange(w, busy_of(addr), Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        let r = lock_for(mode, addr);
        ptr.store(r as usize, Ordering::Relaxed);
        // Release: publishes the pointer, and the `Replaced` behind it, to
        // `replaced` and `install`.
        mark.store(mark_of(addr), Ordering::Release);
        // SAFETY: a leaked `Replaced`, never freed.
        return Some(unsafe { &*r });
    }
}

/// The lock for a new mutex at `addr`: the last one made there if it is
/// free, else a fresh one (module docs).
fn lock_for(mode: &Mode, addr: usize) -> *mut Replaced {
    let Some(r) = mode.mutexes.get_or_insert(addr, || fresh(mode)) else {
        note(Note::MutexesFull);
        return fresh(mode);
    };
    // SAFETY: a leaked `Replaced`, never freed; no mutex uses it now (its
    // last one's memory was made anew), so trying it takes nobody's lock.
    let old = unsafe { &*r };
    // SAFETY: the lock object is the algorithm's own.
    if unsafe { (mode.algo.try_lock)(old.lock) } {
        release(mode, old);
        return r;
    }
    // Held: the memory was made anew while its mutex was locked.
    let f = fresh(mode);
    mode.mutexes.set(addr, f);
    f
}

/// Replace-mode `pthread_mutex_destroy` of a marked mutex: `EBUSY` if it
/// is held (as glibc answers), else the mark is cleared and glibc
/// destroys the memory (`None`: glibc's alone).
pub(crate) fn destroy(mode: &Mode, m: *mut libc::pthread_mutex_t) -> Option<c_int> {
    let addr = m as usize;
    let (mark, ptr) = words(m);
    // Acquire: as in `replaced`.
    if mark.load(Ordering::Acquire) != mark_of(addr) {
        return None;
    }
    // SAFETY: as in `replaced`.
    let r = unsafe { &*(ptr.load(Ordering::Relaxed) as *const Replaced) };
    // SAFETY: the lock object is the algorithm's own.
    if !unsafe { (mode.algo.try_lock)(r.lock) } {
        return Some(libc::EBUSY);
    }
    release(mode, r);
    // Relaxed: a program that uses a mutex it destroyed races anyway.
    mark.store(0, Ordering::Relaxed);
    None
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

/// Replace-mode timed lock: `clock` is `CLOCK_REALTIME`
/// (`pthread_mutex_timedlock`) or the caller's (`_clocklock`), `abstime`
/// an absolute time on it. Answers as glibc: `EINVAL` for another clock,
/// or, when the lock is not free at once, for a bad `abstime`.
pub(crate) fn timed_lock(
    mode: &Mode,
    m: *mut libc::pthread_mutex_t,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
) -> Option<c_int> {
    let r = replaced(mode, m)?;
    if clock != libc::CLOCK_REALTIME && clock != libc::CLOCK_MONOTONIC {
        return Some(libc::EINVAL);
    }
    // SAFETY: the lock object is the algorithm's own.
    if unsafe { (mode.algo.try_lock)(r.lock) } {
        return Some(0);
    }
    if abstime.is_null() {
        return Some(libc::EINVAL);
    }
    // SAFETY: the caller's timespec.
    let deadline = unsafe { *abstime };
    if deadline.tv_nsec < 0 || deadline.tv_nsec >= 1_000_000_000 {
        return Some(libc::EINVAL);
    }
    Some(timed_acquire(mode, r, clock, &deadline))
}

/// Whether `clock` has reached `deadline`.
fn passed(clock: libc::clockid_t, deadline: &libc::timespec) -> bool {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; `clock` is REALTIME or MONOTONIC.
    unsafe { libc::clock_gettime(clock, &mut now) };
    (now.tv_sec, now.tv_nsec) >= (deadline.tv_sec, deadline.tv_nsec)
}

/// [`timed_lock`]'s contended path: 0 or `ETIMEDOUT`.
#[cold]
fn timed_acquire(
    mode: &Mode,
    r: &Replaced,
    clock: libc::clockid_t,
    deadline: &libc::timespec,
) -> c_int {
    let try_lock = || {
        // SAFETY: the lock object is the algorithm's own.
        unsafe { (mode.algo.try_lock)(r.lock) }
    };
    if mode.waiting == Waiting::Pure {
        // The algorithm's own `lock` cannot be abandoned at a deadline:
        // poll its `try_lock`.
        loop {
            if try_lock() {
                return 0;
            }
            if passed(clock, deadline) {
                return libc::ETIMEDOUT;
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
    let mut backoff = ExpBackoff::new(16, 1024);
    let mut spent = 0u32;
    while spent < mode.budget {
        spent = spent.saturating_add(backoff.limit());
        backoff.wait();
        if try_lock() {
            return 0;
        }
    }
    // As in `acquire_politely`, with a deadline on the sleep.
    let flags = libc::FUTEX_WAIT_BITSET
        | libc::FUTEX_PRIVATE_FLAG
        | if clock == libc::CLOCK_REALTIME {
            libc::FUTEX_CLOCK_REALTIME
        } else {
            0
        };
    loop {
        // Relaxed, SeqCst: as in `acquire_politely`.
        r.parked.fetch_add(1, Ordering::Relaxed);
        let seen = r.seq.load(Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let got = try_lock();
        if !got && deadline.tv_sec >= 0 {
            // SAFETY: FUTEX_WAIT_BITSET on a valid, aligned u32 that
            // outlives the call, with an absolute timeout on `clock`; every
            // return is re-checked below.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    r.seq.as_ptr(),
                    flags,
                    seen,
                    deadline as *const libc::timespec,
                    std::ptr::null::<u32>(),
                    u32::MAX,
                );
            }
        }
        r.parked.fetch_sub(1, Ordering::Relaxed);
        if got || try_lock() {
            return 0;
        }
        if passed(clock, deadline) {
            return libc::ETIMEDOUT;
        }
    }
}

/// The glibc mutex around condition waits whose condition did not fit in
/// the table: shared by all of them (module docs).
struct Overflow(UnsafeCell<libc::pthread_mutex_t>);
// SAFETY: a glibc mutex, made to be shared between threads.
unsafe impl Sync for Overflow {}
static OVERFLOW: Overflow = Overflow(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
/// Whether some condition wait used [`OVERFLOW`].
static CONDS_FULL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Replace-mode condition wait (module docs); `wait` is the real
/// `pthread_cond_wait`, `_timedwait` or `_clockwait` on the inner mutex.
pub(crate) fn cond_wait(
    mode: &Mode,
    c: *mut libc::pthread_cond_t,
    m: *mut libc::pthread_mutex_t,
    wait: impl FnOnce(*mut libc::pthread_mutex_t) -> c_int,
) -> Option<c_int> {
    let r = replaced(mode, m)?;
    let inner = if mode
        .conds
        .set(c as usize, (r as *const Replaced).cast_mut())
    {
        r.inner.get()
    } else {
        note(Note::CondsFull);
        // Relaxed: a signaller that changed the predicate did it under
        // `m`, which this thread releases only below.
        CONDS_FULL.store(true, Ordering::Relaxed);
        OVERFLOW.0.get()
    };
    let real = crate::real();
    // SAFETY: `inner` is a normal glibc mutex; the algorithm lock is held
    // by the caller (POSIX).
    unsafe {
        (real.lock)(inner);
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
    let inner = match mode.conds.get(c as usize) {
        // SAFETY: a leaked `Replaced` recorded by a waiter.
        Some(r) => unsafe { (*r).inner.get() },
        // Relaxed: see `cond_wait`.
        None if CONDS_FULL.load(Ordering::Relaxed) => OVERFLOW.0.get(),
        None => return signal(),
    };
    let real = crate::real();
    // SAFETY: the inner mutex is a normal glibc mutex.
    unsafe {
        (real.lock)(inner);
        let rc = signal();
        (real.unlock)(inner);
        rc
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

    /// glibc's initializers and `pthread_mutex_init` decide the kind
    /// replace mode reads; a re-made mutex loses its mark.
    #[test]
    fn kinds_are_read_from_the_memory_and_a_remade_mutex_is_new() {
        let init = |kind: Option<c_int>, pshared: bool, robust: bool| {
            // SAFETY: plain data, initialized by glibc below.
            let mut a: libc::pthread_mutexattr_t = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            let mut m: libc::pthread_mutex_t = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointers to an attribute object and a mutex
            // (glibc's functions directly: this test binary preloads
            // nothing).
            unsafe {
                libc::pthread_mutexattr_init(&mut a);
                if let Some(k) = kind {
                    libc::pthread_mutexattr_settype(&mut a, k);
                }
                if pshared {
                    libc::pthread_mutexattr_setpshared(&mut a, libc::PTHREAD_PROCESS_SHARED);
                }
                if robust {
                    libc::pthread_mutexattr_setrobust(&mut a, libc::PTHREAD_MUTEX_ROBUST);
                }
                libc::pthread_mutex_init(&mut m, &a);
            }
            classify(glibc_kind(&mut m))
        };
        assert_eq!(init(None, false, false), Ok(()));
        assert_eq!(init(Some(libc::PTHREAD_MUTEX_NORMAL), false, false), Ok(()));
        assert_eq!(
            init(Some(libc::PTHREAD_MUTEX_RECURSIVE), false, false),
            Err(Note::Kind)
        );
        assert_eq!(
            init(Some(libc::PTHREAD_MUTEX_ERRORCHECK), false, false),
            Err(Note::Kind)
        );
        assert_eq!(init(None, true, false), Err(Note::Shared));
        assert_eq!(init(None, false, true), Err(Note::Robust));
        let mut m = libc::PTHREAD_MUTEX_INITIALIZER;
        assert_eq!(classify(glibc_kind(&mut m)), Ok(()));
        let mut r = libc::PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
        assert_eq!(classify(glibc_kind(&mut r)), Err(Note::Kind));
        let mut e = libc::PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
        assert_eq!(classify(glibc_kind(&mut e)), Err(Note::Kind));
        assert_eq!(classify(-1), Err(Note::Destroyed));
        assert_eq!(classify(256), Ok(()), "an elision hint is no kind");

        // A mutex marked, then re-made by assignment of an initializer:
        // no mark, so the next call sees new memory.
        let a = algorithm("mcs").expect("mcs");
        let mode: &'static Mode = Box::leak(Box::new(Mode::new(a, Waiting::Polite)));
        let m: &'static mut libc::pthread_mutex_t =
            Box::leak(Box::new(libc::PTHREAD_MUTEX_INITIALIZER));
        let p: *mut libc::pthread_mutex_t = m;
        let r1 = replaced(mode, p).expect("a normal mutex is replaced") as *const Replaced;
        assert_eq!(words(p).0.load(Ordering::Relaxed), mark_of(p as usize));
        assert_eq!(mark_of(p as usize) & 1, 1, "marks are odd, busy words even");
        // SAFETY: `p` is this test's own mutex, not in use.
        unsafe { p.write(libc::PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP) };
        assert!(replaced(mode, p).is_none(), "a recursive one is glibc's");
        // SAFETY: as above.
        unsafe { p.write(libc::PTHREAD_MUTEX_INITIALIZER) };
        let r2 = replaced(mode, p).expect("normal again") as *const Replaced;
        assert_eq!(r1, r2, "the free lock at the address is reused");
        assert_eq!(lock(mode, p), Some(0));
        // Re-made while held: a fresh lock, not a hang.
        // SAFETY: as above.
        unsafe { p.write(libc::PTHREAD_MUTEX_INITIALIZER) };
        let r3 = replaced(mode, p).expect("normal") as *const Replaced;
        assert_ne!(r3, r1);
        assert_eq!(try_lock(mode, p), Some(0));
        assert_eq!(destroy(mode, p), Some(libc::EBUSY));
        assert_eq!(unlock(mode, p), Some(0));
        assert_eq!(destroy(mode, p), None, "then glibc's destroy");
        assert_eq!(words(p).0.load(Ordering::Relaxed), 0);
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
