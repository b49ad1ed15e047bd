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
//! Costs. An uncontended acquisition of a lock that has an entry counts
//! into the thread's own shard (a thread-local slot, or a probe of
//! [`KNOWN`], a table read without locks); one of a lock without an entry
//! counts nothing (acquisitions are counted from a lock's first contended
//! acquisition on). One acquisition in [`HOLD_EVERY`] of an entry's lock
//! per thread has its hold timed, to its unlock. A contended acquisition
//! also times its wait, walks the stack once per new lock, and records
//! outside the critical section.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{OnceLock, RwLock};

use symmetry_locks::spin_then_block::calibration;
use symmetry_locks::spin_then_block::profiler::{self, Entry, LockKind, LockProfile, Shard};
use symmetry_platform::rng::{SplitMix64, mix};

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
    /// Whether it blocked in the kernel (known only for futex waits).
    pub(crate) blocked: bool,
    /// Whether the lock is process-shared.
    pub(crate) pshared: bool,
    /// The stack, walked if the lock had no entry yet.
    pub(crate) frames: Frames,
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
        blocked: false,
        pshared: false,
        frames: Frames::EMPTY,
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

    fn acquired(self) {
        match self {
            Sink::Shard(s) => s.acquired(1),
            Sink::Shared(e) => e.acquired(1),
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

/// One acquisition in this many (on average: the gaps are drawn at random,
/// so a program that takes its locks in a fixed cycle has every lock
/// sampled) of a lock with an entry has its hold timed (per thread): two
/// clock reads, which on a virtual machine cost
/// tens of nanoseconds, so timing every hold would cost more than the
/// profile's budget on a program that locks often.
pub(crate) const HOLD_EVERY: u32 = 16;

/// A thread's shards; dropping it (thread exit) hands them back.
struct Shards(RefCell<Vec<&'static Shard>>);

impl Drop for Shards {
    fn drop(&mut self) {
        for s in self.0.get_mut().drain(..) {
            profiler::release_shard(s);
        }
    }
}

/// A hold being timed: the lock's address, when it was acquired, where
/// the time goes.
#[derive(Clone, Copy)]
struct Held {
    addr: usize,
    t0: u64,
    sink: Sink,
    /// Begun by a futex wait's return ([`hold_from_wait`]).
    futex: bool,
}

thread_local! {
    /// Set while this thread is inside the library's own recording, so
    /// that a lock taken there (the name table's, a futex wait of the
    /// library's own Rust locks) is passed straight through.
    static BUSY: Cell<bool> = const { Cell::new(false) };
    /// The lock this thread last counted or recorded into, its sink (or
    /// none: no entry), and the [`ERA`] then.
    static HOT: Cell<(Lock, Option<Sink>, u64)> =
        const { Cell::new((Lock { addr: 0, kind: LockKind::Mutex }, None, u64::MAX)) };
    /// This thread's shards (at most [`MAX_SHARDS`]), handed back when the
    /// thread exits.
    static SHARDS: Shards = const { Shards(RefCell::new(Vec::new())) };
    /// A wait this thread measured but has not recorded yet: recorded
    /// after the thread's next unlock (or before its next recorded wait or
    /// condition wait), outside the critical section the wait ended in.
    static PENDING: Cell<Wait> = const { Cell::new(Wait::NONE) };
    /// Acquisitions of entries' locks left before the next timed hold.
    static COUNTDOWN: Cell<u32> = const { Cell::new(1) };
    /// Draws the gaps between timed holds.
    static GAPS: Cell<u64> = const { Cell::new(0) };
    /// The hold being timed, if any.
    static HELD: Cell<Option<Held>> = const { Cell::new(None) };
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
            // is the program's race; see `record`.
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
    BUSY.try_with(Cell::get).unwrap_or(true)
}

/// Runs `f` as the library's own recording ([`in_recording`] is true
/// inside), unless this thread already is inside it (then nothing runs).
#[inline]
fn recording(f: impl FnOnce()) {
    let _ = BUSY.try_with(|b| {
        if !b.replace(true) {
            f();
            b.set(false);
        }
    });
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

/// This thread's sink for `lock`, if it has an entry (inside
/// [`recording`]).
#[inline]
fn sink(lock: Lock) -> Option<Sink> {
    // Relaxed: see `record`.
    let era = ERA.load(Ordering::Relaxed);
    let (l, s, e) = HOT.try_with(Cell::get).ok()?;
    if l == lock && e == era {
        return s;
    }
    let s = known(lock).map(sink_of);
    let _ = HOT.try_with(|h| h.set((lock, s, era)));
    s
}

/// Counts one acquisition of `lock` (just acquired, by a pthread call),
/// and starts timing its hold if this is the sampled one.
#[inline]
pub(crate) fn acquired(lock: Lock) {
    recording(|| {
        let Some(s) = sink(lock) else {
            return;
        };
        s.acquired();
        let _ = COUNTDOWN.try_with(|c| {
            let n = c.get() - 1;
            if n > 0 {
                c.set(n);
                return;
            }
            c.set(next_gap());
            // A hold begun by a futex wait whose end was not seen gives
            // way (see `futex_wait_begins`).
            let _ = HELD.try_with(|h| {
                if h.get().is_none_or(|held| held.futex) {
                    h.set(Some(Held {
                        addr: lock.addr,
                        t0: clock::ticks(),
                        sink: s,
                        futex: false,
                    }));
                }
            });
        });
    });
}

/// The next gap between timed holds: uniform in `1..2 * HOLD_EVERY`, so
/// its mean is [`HOLD_EVERY`].
fn next_gap() -> u32 {
    GAPS.try_with(|g| {
        // Each thread's sequence starts from its own storage's address.
        let seed = match g.get() {
            0 => std::ptr::from_ref(g) as u64,
            s => s,
        };
        let mut r = SplitMix64::new(seed);
        let gap = 1 + r.below(u64::from(2 * HOLD_EVERY - 1)) as u32;
        g.set(r.0 | 1);
        gap
    })
    .unwrap_or(HOLD_EVERY)
}

/// The lock at `addr` is released (by a pthread call, after it returned):
/// ends its timed hold, if any, and records the thread's pending wait.
#[inline]
pub(crate) fn released(addr: usize) {
    if let Ok(Some(h)) = HELD.try_with(Cell::get)
        && h.addr == addr
    {
        let _ = HELD.try_with(|c| c.set(None));
        let ticks = clock::ticks().saturating_sub(h.t0);
        recording(|| h.sink.hold(clock::to_ns(ticks)));
    }
    flush();
}

/// Starts timing a hold of `lock` (a futex lock whose wait just ended:
/// the thread acquires it next) until [`wake`] ends it.
pub(crate) fn hold_from_wait(lock: Lock, addr: usize, t0: u64) {
    recording(|| {
        if let Some(s) = sink(lock) {
            let held = Held {
                addr,
                t0,
                sink: s,
                futex: true,
            };
            let _ = HELD.try_with(|h| h.set(Some(held)));
        }
    });
}

/// The thread is about to wait on a futex word: a hold begun by an
/// earlier futex wait whose end was never seen (a lock released with no
/// waiter to wake) is dropped rather than stretched over this wait.
#[inline]
pub(crate) fn futex_wait_begins() {
    let _ = HELD.try_with(|h| {
        if h.get().is_some_and(|held| held.futex) {
            h.set(None);
        }
    });
}

/// The thread wakes a futex word's waiters: ends the hold begun by
/// [`hold_from_wait`] if `ends(held word)` says this wake ends it.
#[inline]
pub(crate) fn wake(ends: impl Fn(usize) -> bool) {
    if let Ok(Some(h)) = HELD.try_with(Cell::get)
        && h.futex
        && ends(h.addr)
    {
        let _ = HELD.try_with(|c| c.set(None));
        let ticks = clock::ticks().saturating_sub(h.t0);
        recording(|| h.sink.hold(clock::to_ns(ticks)));
    }
}

/// Keeps `w` to be recorded outside its critical section; records the
/// wait kept before it, if any (a thread that took a second contended
/// lock without unlocking in between).
#[inline]
pub(crate) fn defer(w: Wait) {
    let _ = PENDING.try_with(|p| {
        let old = p.replace(w);
        if old.lock.addr != 0 {
            record(old);
        }
    });
}

/// Records this thread's pending wait, if any.
#[inline]
fn flush() {
    let _ = PENDING.try_with(|p| {
        if p.get().lock.addr != 0 {
            record(p.replace(Wait::NONE));
        }
    });
}

/// The entry of `w`'s lock, made at its first contended acquisition.
#[cold]
fn entry_of(w: &Wait) -> &'static LockProfile {
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
    let frames = stack::describe_all(&w.frames);
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
    // Relaxed: see `record`.
    ERA.fetch_add(1, Ordering::Relaxed);
    e
}

/// Records wait `w` in its lock's entry.
#[cold]
pub(crate) fn record(w: Wait) {
    recording(|| {
        // Relaxed suffices for `ERA` here and everywhere: a thread waiting
        // on a lock made again at a destroyed one's address learned of it
        // through the program's own synchronization after the destroy, so
        // the increment in `forget` happens before this load and is seen
        // (read-write coherence). Only a program racing a destroy against
        // a wait on the same lock could record one wait under the old name.
        let s = match sink(w.lock) {
            Some(s) => s,
            None => {
                let s = sink_of(entry_of(&w));
                let era = ERA.load(Ordering::Relaxed);
                let _ = HOT.try_with(|h| h.set((w.lock, Some(s), era)));
                // The acquisition that named the lock found no entry to
                // count into (a futex's acquisitions are not seen at all).
                if w.lock.kind != LockKind::Futex {
                    s.acquired();
                }
                s
            }
        };
        let spins = calibration::ns_to_spins(clock::to_ns(w.ticks));
        s.record(spins, w.blocked);
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
        // Relaxed: see `record`.
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
    let first = try_lock();
    if first != libc::EBUSY {
        if first == 0 {
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
    let frames = if unnamed(lock) {
        stack::walk()
    } else {
        Frames::EMPTY
    };
    let site = match stack::first_outside(&frames) {
        0 => site,
        s => s,
    };
    let t0 = clock::ticks();
    let rc = wait();
    if rc == 0 {
        defer(Wait {
            lock,
            site,
            ticks: clock::ticks().saturating_sub(t0),
            blocked: false,
            pshared: pshared(),
            frames,
        });
        acquired(lock);
    }
    rc
}
