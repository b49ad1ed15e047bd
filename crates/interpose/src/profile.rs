//! Profile mode's recording: which lock a wait belongs to, its name, and
//! where its counts go, for every kind of lock the library sees (pthread
//! mutexes, reader-writer and spin locks, futex words).
//!
//! A lock is known by its address and kind (a reader-writer lock's
//! readers and writers are two entries). It gets a profile entry at its
//! first contended acquisition, named by the first frame of that
//! acquisition's stack outside the system's lock code ([`stack`]), plus
//! `#k` when several locks were first contended at one site and
//! `[process-shared]` for a process-shared one; the entry keeps the stack.
//!
//! Costs. An uncontended acquisition adds nothing inside its critical
//! section (a reader-writer lock's is counted there); its unlock counts
//! it: one thread-local lookup and a decrement, and for one in
//! [`COUNT_EVERY`] a look-up of the lock's shard (a probe of [`KNOWN`], a
//! table read without locks; acquisitions are counted from a lock's first
//! contended acquisition on). A contended acquisition reads the clock
//! around its wait, walks the stack once per new lock, and at its unlock
//! reads the clock once more (its hold) and records, outside the critical
//! section.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{OnceLock, RwLock};

use symmetry_locks::platform::rng::{SplitMix64, mix};
use symmetry_locks::spin_then_block::calibration;
use symmetry_locks::spin_then_block::profiler::{self, Entry, LockKind, LockProfile, Shard};

use crate::stack::{self, Frames};
use crate::{BLOCKER, FUTEX_BLOCKER, clock};

/// A lock's identity: its address (or, for waits keyed by their stack, a
/// hash of it) and its kind.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Lock {
    /// The lock's address, or a stack key ([`Lock::by_stack`]).
    pub(crate) addr: usize,
    /// Its kind.
    pub(crate) kind: LockKind,
}

impl Lock {
    /// The lock at `addr`.
    pub(crate) fn at(addr: usize, kind: LockKind) -> Lock {
        Lock { addr, kind }
    }

    /// A lock known by the stack its waits are made from (a futex word
    /// that belongs to a thread rather than to a lock).
    pub(crate) fn by_stack(f: &Frames, kind: LockKind) -> Lock {
        // The frames mixed in turn; the top bit keeps the key apart from
        // every user-space address.
        let h = f.ips().iter().fold(0, |h: u64, &ip| mix(h ^ ip as u64));
        Lock {
            addr: (h | 1 << 63) as usize,
            kind,
        }
    }

    /// The key of [`KNOWN`]: never 0 (no lock is at address 0).
    fn key(self) -> u64 {
        (self.addr as u64).rotate_left(3) ^ self.kind as u64
    }
}

/// One measured wait.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wait {
    /// The lock (address 0: none).
    pub(crate) lock: Lock,
    /// The first frame of its stack outside the system's lock code (its
    /// acquisition site), or the caller's return address.
    pub(crate) site: usize,
    /// How long it waited, in [`clock`] ticks.
    pub(crate) ticks: u64,
    /// When the wait ended and the lock was taken (ticks): its hold is
    /// timed from here to the unlock.
    pub(crate) acquired_at: u64,
    /// Whether it blocked in the kernel (known only for futex waits).
    pub(crate) blocked: bool,
    /// Whether the lock is process-shared.
    pub(crate) pshared: bool,
}

impl Wait {
    /// No wait.
    pub(crate) const NONE: Wait = Wait {
        lock: Lock {
            addr: 0,
            kind: LockKind::Mutex,
        },
        site: 0,
        ticks: 0,
        acquired_at: 0,
        blocked: false,
        pshared: false,
    };
}

/// Where a thread records the counts of one lock.
#[derive(Clone, Copy)]
enum Sink {
    /// The thread's own shard of the lock's entry.
    Shard(&'static Shard),
    /// The shared entry (the thread holds [`MAX_SHARDS`] shards).
    Shared(&'static LockProfile),
}

impl Sink {
    fn record(self, spins: u64, blocked: bool) {
        match self {
            Sink::Shard(s) => s.record(spins, blocked),
            Sink::Shared(e) => e.record(spins, blocked),
        }
    }

    fn acquired(self, n: u64) {
        match self {
            Sink::Shard(s) => s.acquired(n),
            Sink::Shared(e) => e.acquired(n),
        }
    }

    fn hold(self, ns: u64) {
        match self {
            Sink::Shard(s) => s.record_hold(ns),
            Sink::Shared(e) => e.record_hold(ns),
        }
    }
}

/// Most shards one thread keeps: a thread that waits on more distinct
/// locks records the rest into their shared entries, so the memory is
/// bounded by 1.5 KiB x this x the threads alive at once (12 KiB per
/// thread). A thread hot on one lock needs one.
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

/// A futex hold being timed: the word waited on, when the wait returned,
/// where the time goes.
#[derive(Clone, Copy)]
struct Held {
    addr: usize,
    t0: u64,
    sink: Sink,
}

/// A thread's recording state, in one thread-local so that each entry
/// point reaches it with one lookup (in a shared library every
/// thread-local access is a call to `__tls_get_addr`).
struct Local {
    /// Set while this thread is inside the library's own recording, so
    /// that a lock taken there (the name table's, a futex wait of the
    /// library's own Rust locks) is passed straight through.
    busy: Cell<bool>,
    /// The lock this thread last counted or recorded into, its sink (or
    /// none: no entry), and the [`ERA`] then.
    hot: Cell<(Lock, Option<Sink>, u64)>,
    /// A wait this thread measured but has not recorded yet: recorded
    /// after the thread's next unlock (or before its next recorded wait or
    /// condition wait), outside the critical section the wait ended in.
    pending: Cell<Wait>,
    /// Whether `pending` holds a wait: the one word every unlock reads
    /// (reading `pending` itself copies the whole wait).
    is_pending: Cell<bool>,
    /// The stack this thread walked for a lock without an entry, kept
    /// (outside the small `pending`) until the wait that names the lock
    /// is recorded.
    walked: Cell<Option<(Lock, Frames)>>,
    /// The futex hold being timed, if any.
    held: Cell<Option<Held>>,
    /// Acquisitions left until the next counted one, and the gap that
    /// ends there (see [`COUNT_EVERY`]).
    countdown: Cell<(u32, u32)>,
    /// Draws the gaps between counted acquisitions.
    gaps: Cell<u64>,
}

impl Local {
    /// The sink [`Local::hot`] holds for `lock` in `era` (`None`: it holds
    /// another lock's, or an older era's).
    #[inline]
    fn hot_sink(&self, lock: Lock, era: u64) -> Option<Option<Sink>> {
        let (hot, s, e) = self.hot.get();
        (hot == lock && e == era).then_some(s)
    }
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            busy: Cell::new(false),
            hot: Cell::new((Lock { addr: 0, kind: LockKind::Mutex }, None, u64::MAX)),
            pending: Cell::new(Wait::NONE),
            is_pending: Cell::new(false),
            walked: Cell::new(None),
            held: Cell::new(None),
            countdown: Cell::new((1, 1)),
            gaps: Cell::new(0),
        }
    };
    /// This thread's shards (at most [`MAX_SHARDS`]), handed back when the
    /// thread exits.
    static SHARDS: Shards = const { Shards(RefCell::new(Vec::new())) };
}

/// Runs `f` on this thread's [`Local`] (nothing once the thread's
/// storage is being torn down, nor in a library linked into the
/// executable, [`crate::inert`]: every recording goes through here).
#[inline]
fn local<R>(f: impl FnOnce(&Local) -> R) -> Option<R> {
    if crate::inert() {
        return None;
    }
    LOCAL.try_with(f).ok()
}

/// Changes whenever an entry is made or forgotten: a thread's [`HOT`] is
/// valid only while this is unchanged.
static ERA: AtomicU64 = AtomicU64::new(0);

/// Slots of [`KNOWN`] (a power of two). A lock contended after this many
/// (less the tombstones' share) have entries still gets one, but its
/// uncontended acquisitions are not counted.
const SLOTS: usize = 1 << 14;
/// Slots probed from a key's home.
const PROBE: usize = 16;
/// A forgotten slot's key.
const TOMBSTONE: u64 = u64::MAX;

/// Which locks have entries, read without a lock on every acquisition:
/// open addressing over [`Lock::key`]s, written only under the name
/// table's write lock.
static KNOWN: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// The entry of the key in the same slot of [`KNOWN`].
static KNOWN_ENTRY: [AtomicPtr<LockProfile>; SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

fn home(key: u64) -> usize {
    (mix(key) as usize) & (SLOTS - 1)
}

/// The entry of `lock`, if it has one, without taking a lock.
#[inline]
fn known(lock: Lock) -> Option<&'static LockProfile> {
    let key = lock.key();
    let h = home(key);
    for i in 0..PROBE {
        let s = (h + i) & (SLOTS - 1);
        // Acquire; pairs with the Release store in `publish`, so the entry
        // stored before the key is seen.
        match KNOWN[s].load(Ordering::Acquire) {
            0 => return None,
            k if k == key => {
                // Relaxed: ordered after the key's Acquire load.
                let e = KNOWN_ENTRY[s].load(Ordering::Relaxed);
                // SAFETY: entries are leaked, so a published one lives for
                // the rest of the process.
                return unsafe { e.as_ref() };
            }
            _ => {}
        }
    }
    None
}

/// Makes `e` the entry [`known`] finds for `lock` (under the name table's
/// write lock, so writers never race).
fn publish(lock: Lock, e: &'static LockProfile) {
    let key = lock.key();
    let h = home(key);
    for i in 0..PROBE {
        let s = (h + i) & (SLOTS - 1);
        let k = KNOWN[s].load(Ordering::Relaxed);
        if k == 0 || k == TOMBSTONE {
            // Relaxed, then Release: a reader that sees the key sees the
            // entry (see `known`).
            KNOWN_ENTRY[s].store(std::ptr::from_ref(e).cast_mut(), Ordering::Relaxed);
            KNOWN[s].store(key, Ordering::Release);
            return;
        }
    }
}

/// Removes `lock` from [`KNOWN`] (under the name table's write lock).
fn unpublish(lock: Lock) {
    let key = lock.key();
    let h = home(key);
    for i in 0..PROBE {
        let s = (h + i) & (SLOTS - 1);
        match KNOWN[s].load(Ordering::Relaxed) {
            0 => return,
            // Relaxed: a reader racing a destroy of the lock it acquires
            // is the program's race; see `record_in`.
            k if k == key => KNOWN[s].store(TOMBSTONE, Ordering::Relaxed),
            _ => {}
        }
    }
}

/// Lock -> its entry, for locks that have waited (the authority that
/// [`KNOWN`] indexes).
static NAMES: OnceLock<RwLock<HashMap<Lock, &'static LockProfile>>> = OnceLock::new();

fn names() -> &'static RwLock<HashMap<Lock, &'static LockProfile>> {
    NAMES.get_or_init(|| RwLock::new(HashMap::new()))
}

/// Locks first contended at each site so far (for the `#k` suffix).
fn per_site() -> &'static std::sync::Mutex<HashMap<usize, u32>> {
    static SITES: OnceLock<std::sync::Mutex<HashMap<usize, u32>>> = OnceLock::new();
    SITES.get_or_init(|| std::sync::Mutex::new(HashMap::new()))
}

/// Whether this thread is inside the library's own recording.
#[inline]
pub(crate) fn in_recording() -> bool {
    local(|l| l.busy.get()).unwrap_or(true)
}

/// Runs `f` as the library's own recording ([`in_recording`] is true
/// inside), unless this thread already is inside it (then nothing runs).
#[inline]
fn recording_in(l: &Local, f: impl FnOnce()) {
    if !l.busy.replace(true) {
        f();
        l.busy.set(false);
    }
}

/// Whether `lock` has no entry yet, so a contended acquisition should walk
/// the stack to name it.
#[inline]
pub(crate) fn unnamed(lock: Lock) -> bool {
    known(lock).is_none()
}

/// Where this thread records into entry `e`.
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

/// This thread's sink for `lock`, if it has an entry.
#[inline]
fn sink(l: &Local, lock: Lock) -> Option<Sink> {
    // Relaxed: see `record_in`.
    let era = ERA.load(Ordering::Relaxed);
    l.hot_sink(lock, era)
        .unwrap_or_else(|| sink_guarded(l, lock, era))
}

/// [`lookup`] inside the recording guard (making a shard takes the
/// profile registry's lock).
#[cold]
#[inline(never)]
fn sink_guarded(l: &Local, lock: Lock, era: u64) -> Option<Sink> {
    let mut out = None;
    recording_in(l, || out = lookup(l, lock, era));
    out
}

/// This thread's sink for `lock` past [`Local::hot`] (a probe of
/// [`KNOWN`]; none for a lock without an entry, as most are never
/// contended), made hot.
fn lookup(l: &Local, lock: Lock, era: u64) -> Option<Sink> {
    let s = known(lock).map(sink_of);
    l.hot.set((lock, s, era));
    s
}

/// Acquisitions are counted by sampling: one in this many on average
/// (per thread, at gaps drawn at random, so a program that takes its
/// locks in a fixed cycle has each counted), each sample counting as its
/// gap. Counting every acquisition exactly (a lookup of the lock's shard
/// at every unlock) lengthened the gap between an unlock and the thread's
/// next lock enough to change how a hot lock is handed over: in `symmetry
/// run interpose-apps --quick`, sysbench's mutex benchmark ran 1.57x as
/// long in profile mode as under glibc with exact counts, against 1.15x
/// with the library before counting existed. A lock taken n times is
/// counted with a relative error of about `1 / sqrt(n / COUNT_EVERY)`.
pub(crate) const COUNT_EVERY: u32 = 16;

/// Counts one acquisition of `lock` (sampled; see [`COUNT_EVERY`]).
#[inline]
fn count(l: &Local, lock: Lock) {
    let (left, gap) = l.countdown.get();
    if left > 1 {
        l.countdown.set((left - 1, gap));
    } else {
        count_sample(l, lock, gap);
    }
}

/// The sampled acquisition: `lock` counts for the `gap` acquisitions that
/// led up to it, and the next gap is drawn.
#[cold]
#[inline(never)]
fn count_sample(l: &Local, lock: Lock, gap: u32) {
    if let Some(s) = sink(l, lock) {
        // No recording guard: the shard is this thread's, and a signal
        // handler's acquisition interleaved with this one can at worst
        // lose one sample.
        s.acquired(u64::from(gap));
    }
    // Each thread's sequence starts from its own storage's address.
    let seed = match l.gaps.get() {
        0 => std::ptr::from_ref(l) as u64,
        s => s,
    };
    let mut r = SplitMix64::new(seed);
    let next = 1 + r.below(u64::from(2 * COUNT_EVERY - 1)) as u32;
    l.gaps.set(r.0 | 1);
    l.countdown.set((next, next));
}

/// Counts one acquisition of `lock` (a reader-writer lock's, whose
/// unlock does not say which side it releases: counted when acquired,
/// inside the critical section).
#[inline]
pub(crate) fn acquired(lock: Lock) {
    local(|l| count(l, lock));
}

/// The lock at `addr` is released (by a pthread call, after it returned):
/// counts its acquisition as `counted` (`None`: counted when acquired),
/// and records the thread's pending wait, with the hold that followed it
/// if the wait was on this lock.
#[inline]
pub(crate) fn released(addr: usize, counted: Option<LockKind>) {
    if !crate::inert() {
        released_profiling(addr, counted);
    }
}

/// [`released`] where profile mode is decided and on (the mutex
/// wrappers' profile route).
#[inline]
pub(crate) fn released_profiling(addr: usize, counted: Option<LockKind>) {
    // A thread whose locals are gone (its exit) records nothing more.
    let _ = LOCAL.try_with(|l| {
        if let Some(kind) = counted {
            count(l, Lock::at(addr, kind));
        }
        if l.is_pending.get() {
            record_pending(l, addr);
        }
    });
}

/// Records the thread's pending wait, with its hold if `addr`, just
/// released, is the lock it waited for.
#[cold]
#[inline(never)]
fn record_pending(l: &Local, addr: usize) {
    let w = l.pending.replace(Wait::NONE);
    l.is_pending.set(false);
    let hold = (w.lock.addr == addr).then(|| clock::ticks().saturating_sub(w.acquired_at));
    record_in(l, w, hold);
}

/// Starts timing a hold of `lock` (a futex lock whose wait just ended:
/// the thread acquires it next) until [`wake`] ends it.
pub(crate) fn hold_from_wait(lock: Lock, addr: usize, t0: u64) {
    local(|l| {
        if let Some(s) = sink(l, lock) {
            l.held.set(Some(Held { addr, t0, sink: s }));
        }
    });
}

/// The thread is about to wait on a futex word: a hold begun by an
/// earlier futex wait whose end was never seen (a lock released with no
/// waiter to wake) is dropped rather than stretched over this wait.
#[inline]
pub(crate) fn futex_wait_begins() {
    local(|l| {
        l.held.set(None);
    });
}

/// The thread wakes a futex word's waiters: ends the hold begun by
/// [`hold_from_wait`] if `ends(held word)` says this wake ends it.
#[inline]
pub(crate) fn wake(ends: impl Fn(usize) -> bool) {
    local(|l| {
        if let Some(h) = l.held.get()
            && ends(h.addr)
        {
            l.held.set(None);
            let ticks = clock::ticks().saturating_sub(h.t0);
            recording_in(l, || h.sink.hold(clock::to_ns(ticks)));
        }
    });
}

/// Keeps `w` to be recorded outside its critical section; records the
/// wait kept before it, if any (a thread that took a second contended
/// lock without unlocking in between).
#[inline]
pub(crate) fn defer(w: Wait) {
    local(|l| {
        let old = l.pending.replace(w);
        if l.is_pending.replace(true) {
            record_in(l, old, None);
        }
    });
}

/// The entry of `w`'s lock, made at its first contended acquisition.
#[cold]
fn entry_of(w: &Wait, frames: &Frames) -> &'static LockProfile {
    if let Some(e) = names()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&w.lock)
    {
        return e;
    }
    let mut map = names().write().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = map.get(&w.lock) {
        return e;
    }
    let k = {
        let mut sites = per_site().lock().unwrap_or_else(|e| e.into_inner());
        let k = sites.entry(w.site).or_insert(0);
        *k += 1;
        *k
    };
    let mut name = stack::describe(w.site);
    if k > 1 {
        name.push_str(&format!(" #{k}"));
    }
    // A process-shared lock's waits are those of this process only: the
    // name says so (replace mode leaves such a mutex to glibc).
    if w.pshared {
        name.push_str(" [process-shared]");
    }
    let frames = stack::describe_all(frames);
    let e = profiler::entry_of(
        &Entry {
            name: &name,
            kind: w.lock.kind,
            blocker: if w.lock.kind == LockKind::Futex {
                FUTEX_BLOCKER
            } else {
                BLOCKER
            },
            stack: &frames,
        },
        calibration::c_spins_os,
    );
    map.insert(w.lock, e);
    publish(w.lock, e);
    // Relaxed: see `record_in`.
    ERA.fetch_add(1, Ordering::Relaxed);
    e
}

/// Keeps `frames`, walked for `lock`, until the wait that names it is
/// recorded.
pub(crate) fn walked(lock: Lock, frames: Frames) {
    local(|l| l.walked.set(Some((lock, frames))));
}

/// Records wait `w` in its lock's entry (named, if it has none, with the
/// stack [`walked`] kept for it).
pub(crate) fn record(w: Wait) {
    local(|l| record_in(l, w, None));
}

/// [`record`], given this thread's [`Local`].
/// `hold`: the hold that followed the wait, in ticks, if it was timed.
#[cold]
fn record_in(l: &Local, w: Wait, hold: Option<u64>) {
    recording_in(l, || {
        // Relaxed suffices for `ERA` here and everywhere: a thread waiting
        // on a lock made again at a destroyed one's address learned of it
        // through the program's own synchronization after the destroy, so
        // the increment in `forget` happens before this load and is seen
        // (read-write coherence). Only a program racing a destroy against
        // a wait on the same lock could record one wait under the old name.
        let era = ERA.load(Ordering::Relaxed);
        let found = l.hot_sink(w.lock, era).flatten();
        let s = match found.or_else(|| lookup(l, w.lock, era)) {
            Some(s) => s,
            None => {
                let frames = match l.walked.take() {
                    Some((lock, f)) if lock == w.lock => f,
                    _ => Frames::EMPTY,
                };
                let s = sink_of(entry_of(&w, &frames));
                l.hot.set((w.lock, Some(s), ERA.load(Ordering::Relaxed)));
                // A reader-writer acquisition that named the lock found
                // no entry to count into (a mutex's or spin lock's is
                // counted at its unlock; a futex's are not seen).
                if counted_when_acquired(w.lock) {
                    s.acquired(1);
                }
                s
            }
        };
        let spins = calibration::ns_to_spins(clock::to_ns(w.ticks));
        s.record(spins, w.blocked);
        if let Some(h) = hold {
            s.hold(clock::to_ns(h));
        }
    });
}

/// Forgets the entries of the locks at `addr` (destroyed, or initialized
/// again): a new lock there gets its own.
pub(crate) fn forget(addr: usize, kinds: &[LockKind]) {
    // Until some lock has waited, nothing is named: every init and
    // destroy of a program that never contends costs one load.
    let Some(names) = NAMES.get() else {
        return;
    };
    if in_recording() {
        return;
    }
    let locks = kinds.iter().map(|&k| Lock::at(addr, k));
    let known = {
        let map = names.read().unwrap_or_else(|e| e.into_inner());
        locks.clone().any(|l| map.contains_key(&l))
    };
    if known {
        let mut map = names.write().unwrap_or_else(|e| e.into_inner());
        for l in locks {
            if map.remove(&l).is_some() {
                unpublish(l);
            }
        }
        // Relaxed: see `record_in`.
        ERA.fetch_add(1, Ordering::Relaxed);
    }
}

/// One acquisition of `lock` by a pthread call, profiled: `try_lock`
/// first (0: acquired without waiting; `EBUSY`: would wait; anything else
/// is the call's own answer); on `EBUSY` the blocking call `wait` is
/// timed and, if it acquires (0), the wait is kept for recording after
/// the unlock. `site` names the lock where the stack cannot (0: none);
/// `pshared` is read once the lock is held.
#[inline]
pub(crate) fn acquire(
    lock: Lock,
    site: usize,
    try_lock: impl FnOnce() -> c_int,
    wait: impl FnOnce() -> c_int,
    pshared: impl FnOnce() -> bool,
) -> c_int {
    // A library linked into the executable passes the call through: not
    // even the `try` call first, which would change how the harness's
    // own contended locks behave.
    if crate::inert() {
        return wait();
    }
    acquire_profiling(lock, site, try_lock, wait, pshared)
}

/// [`acquire`] where profile mode is decided and on (the mutex wrappers'
/// profile route).
#[inline]
pub(crate) fn acquire_profiling(
    lock: Lock,
    site: usize,
    try_lock: impl FnOnce() -> c_int,
    wait: impl FnOnce() -> c_int,
    pshared: impl FnOnce() -> bool,
) -> c_int {
    let first = try_lock();
    if first != libc::EBUSY {
        if first == 0 && counted_when_acquired(lock) {
            acquired(lock);
        }
        return first;
    }
    if in_recording() {
        return wait();
    }
    contended(lock, site, wait, pshared)
}

#[cold]
#[inline(never)]
fn contended(
    lock: Lock,
    site: usize,
    wait: impl FnOnce() -> c_int,
    pshared: impl FnOnce() -> bool,
) -> c_int {
    // The stack is walked before the wait, not inside the critical
    // section, and only for a lock without an entry; the wait is timed
    // from after the walk.
    let site = if unnamed(lock) {
        let frames = stack::walk();
        walked(lock, frames);
        match stack::first_outside(&frames) {
            0 => site,
            s => s,
        }
    } else {
        site
    };
    let t0 = clock::ticks();
    let rc = wait();
    if rc == 0 {
        let t1 = clock::ticks();
        defer(Wait {
            lock,
            site,
            ticks: t1.saturating_sub(t0),
            acquired_at: t1,
            blocked: false,
            pshared: pshared(),
        });
        if counted_when_acquired(lock) {
            acquired(lock);
        }
    }
    rc
}

/// Whether `lock`'s acquisitions are counted when acquired (a
/// reader-writer lock's) rather than at the unlock.
#[inline]
fn counted_when_acquired(lock: Lock) -> bool {
    matches!(lock.kind, LockKind::Read | LockKind::Write)
}
