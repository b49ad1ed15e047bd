//! The lock-waiting-time profiler (KLMO91 §3).
//!
//! Every [`SpinThenBlock`](super::SpinThenBlock) records each *contended*
//! acquisition's waiting time (in spins, see the lock's docs) in a
//! histogram of its lock: 16-spin buckets `(0,16]`, `(16,32]`, ...,
//! `(992,1008]` (a zero wait goes in the first), and an overflow bucket for
//! longer waits, blocked ones included, as KLMO91 did. A zero wait (the
//! first poll found the lock already released) shares the first bucket:
//! its spin cost is exact through the bucket's sum, but a threshold of 0
//! is priced as if it had to block. Unlike KLMO91, each
//! bucket also keeps the sum of its waits and how many of them blocked, so
//! the analysis can charge waits their true length and knows the mean of
//! the overflow bucket.
//!
//! Cost. Nothing is recorded on the fast path (an uncontended acquisition
//! never reaches this module). A contended acquisition, which has already
//! waited, adds a pointer load and two or three relaxed `fetch_add`s; its
//! first one registers the lock (a mutex and a hash-map lookup, once per
//! lock). A recorder that waits often on a lock other threads also wait on
//! (the interposition library) can keep a per-thread [`Shard`] instead, so
//! the counters' lines do not move between cores. Profiling is on by
//! default; [`set_enabled`] turns it off.
//!
//! Names. Locks sharing a name share an entry: all locks created at one
//! source line (`SpinThenBlock::new`), all locks given one name
//! (`SpinThenBlock::named`), all unnamed locks (`(unnamed)`). Entries are
//! leaked (1.5 KiB each, one per distinct name and blocker), so a lock's
//! entry outlives it.
//!
//! Output. [`snapshot`] returns a [`Profile`]; [`write`](fn@write) saves it to a
//! file; [`dump_at_exit`] (or the environment variable
//! `SYMMETRY_LOCK_PROFILE=PATH`, read at the first registration) saves it
//! when the process exits. The file is CSV with `#` header lines: the
//! machine constants, then one row per lock and non-empty bucket, then one
//! row per lock with its counts (see [`LockRecord`]). `symmetry analyze
//! FILE` prices every spin policy on it.
//!
//! Kinds and counts. An entry has a [`LockKind`] (a reader-writer lock's
//! readers and writers are two entries) and, beside the histogram, the
//! counts a recorder can see: acquisitions (the interposition library sees
//! every pthread call; a lock whose fast path is inline, as a futex's,
//! counts none), the longest wait, and sampled hold times.
//!
//! Versions. Files of [`VERSION_1`] (histograms only, every lock a mutex)
//! are still read; their counts read as not recorded.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once, OnceLock};

use crossbeam_utils::CachePadded;

use super::LockName;
use super::calibration;
use super::policy::{Bucket, optimal_threshold};

mod format;
pub use format::ProfileError;

/// Width of a bucket, spins (KLMO91 §3).
pub const UNIT: u64 = 16;
/// Buckets: 63 units and an overflow bucket.
pub const BUCKETS: usize = 64;
/// Longest wait that is not overflow, spins.
pub const CAP: u64 = UNIT * (BUCKETS as u64 - 1);
/// First line of a profile file (the current version, 2).
pub const MAGIC: &str = "# symmetry lock-wait profile, version 2";
/// First line of a version-1 file (histograms only), which
/// [`Profile::parse`] still reads.
pub const VERSION_1: &str = "# symmetry lock-wait profile, version 1";

/// What kind of lock an entry is, and for a reader-writer lock which side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum LockKind {
    /// A mutual-exclusion lock (a pthread mutex, a [`SpinThenBlock`](super::SpinThenBlock)).
    #[default]
    Mutex,
    /// A reader-writer lock, taken to read.
    Read,
    /// A reader-writer lock, taken to write.
    Write,
    /// A spin lock (`pthread_spin_lock`): its waits never block.
    Spin,
    /// A futex word waited on with the futex system call: whatever lock
    /// (or condition) the program built on it, seen only when it blocks.
    Futex,
    /// A condition variable's futex word: the waits are for an event, not
    /// for a lock (what a futex entry becomes when its stack shows a
    /// condition variable's wait).
    Condvar,
}

impl LockKind {
    /// Every kind, in file order.
    pub const ALL: [LockKind; 6] = [
        LockKind::Mutex,
        LockKind::Read,
        LockKind::Write,
        LockKind::Spin,
        LockKind::Futex,
        LockKind::Condvar,
    ];

    /// The kind's name in profile files.
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::Read => "rwlock-read",
            LockKind::Write => "rwlock-write",
            LockKind::Spin => "spin",
            LockKind::Futex => "futex",
            LockKind::Condvar => "condvar",
        }
    }

    /// The kind named `name` in a profile file.
    pub fn from_name(name: &str) -> Option<LockKind> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl std::fmt::Display for LockKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns recording on or off (on by default).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether contended waits are recorded.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The bucket of a wait of `w` spins.
#[inline]
pub fn bucket_of(w: u64) -> usize {
    if w > CAP {
        BUCKETS - 1
    } else {
        (w.div_ceil(UNIT) as usize).saturating_sub(1)
    }
}

/// Upper bound of bucket `j`, spins (`u64::MAX` for overflow).
pub fn bucket_upper(j: usize) -> u64 {
    if j + 1 >= BUCKETS {
        u64::MAX
    } else {
        (j as u64 + 1) * UNIT
    }
}

/// A live histogram's counters per bucket (waits, their sum and the waits
/// that blocked) and per lock (acquisitions, the longest wait, sampled
/// hold times).
#[derive(Debug)]
struct Counters {
    counts: [AtomicU64; BUCKETS],
    sums: [AtomicU64; BUCKETS],
    blocked: [AtomicU64; BUCKETS],
    acquisitions: AtomicU64,
    wait_max: AtomicU64,
    hold_samples: AtomicU64,
    hold_sum_ns: AtomicU64,
    hold_max_ns: AtomicU64,
}

impl Counters {
    fn new() -> Self {
        Counters {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sums: std::array::from_fn(|_| AtomicU64::new(0)),
            blocked: std::array::from_fn(|_| AtomicU64::new(0)),
            acquisitions: AtomicU64::new(0),
            wait_max: AtomicU64::new(0),
            hold_samples: AtomicU64::new(0),
            hold_sum_ns: AtomicU64::new(0),
            hold_max_ns: AtomicU64::new(0),
        }
    }

    /// The per-lock words (not the buckets).
    fn words(&self) -> [&AtomicU64; 5] {
        [
            &self.acquisitions,
            &self.wait_max,
            &self.hold_samples,
            &self.hold_sum_ns,
            &self.hold_max_ns,
        ]
    }

    /// Adds one wait of `waited` spins with `bump`, the writers' way of
    /// adding to a counter.
    #[inline]
    fn record(&self, waited: u64, blocked: bool, bump: impl Fn(&AtomicU64, u64)) {
        let j = bucket_of(waited);
        bump(&self.counts[j], 1);
        bump(&self.sums[j], waited);
        if blocked {
            bump(&self.blocked[j], 1);
        }
        // Relaxed: a counter, read only by snapshots. Not a
        // read-modify-write unless it grows, which is rare after the
        // first waits.
        if waited > self.wait_max.load(Ordering::Relaxed) {
            self.wait_max.fetch_max(waited, Ordering::Relaxed);
        }
    }

    /// Adds one hold time of `ns` with `bump`.
    #[inline]
    fn hold(&self, ns: u64, bump: impl Fn(&AtomicU64, u64)) {
        bump(&self.hold_samples, 1);
        bump(&self.hold_sum_ns, ns);
        // Relaxed: as for `wait_max`.
        if ns > self.hold_max_ns.load(Ordering::Relaxed) {
            self.hold_max_ns.fetch_max(ns, Ordering::Relaxed);
        }
    }

    /// Adds these counters to `r` (Relaxed loads: counters, read only
    /// whole).
    fn add_to(&self, r: &mut LockRecord) {
        for j in 0..BUCKETS {
            let add = |to: &mut u64, from: &AtomicU64| {
                *to = to.saturating_add(from.load(Ordering::Relaxed));
            };
            add(&mut r.counts[j], &self.counts[j]);
            add(&mut r.sums[j], &self.sums[j]);
            add(&mut r.blocked[j], &self.blocked[j]);
        }
        let n = self.acquisitions.load(Ordering::Relaxed);
        if n > 0 {
            r.acquisitions = Some(r.acquisitions.unwrap_or(0).saturating_add(n));
        }
        let w = self.wait_max.load(Ordering::Relaxed);
        if w > 0 || self.counts.iter().any(|c| c.load(Ordering::Relaxed) > 0) {
            r.wait_max = Some(r.wait_max.unwrap_or(0).max(w));
        }
        let h = &mut r.hold;
        h.samples = h
            .samples
            .saturating_add(self.hold_samples.load(Ordering::Relaxed));
        h.sum_ns = h
            .sum_ns
            .saturating_add(self.hold_sum_ns.load(Ordering::Relaxed));
        h.max_ns = h.max_ns.max(self.hold_max_ns.load(Ordering::Relaxed));
    }

    fn zero(&self) {
        for a in [&self.counts, &self.sums, &self.blocked] {
            for x in a {
                x.store(0, Ordering::Relaxed);
            }
        }
        for x in self.words() {
            x.store(0, Ordering::Relaxed);
        }
    }
}

/// One lock's live histogram.
#[derive(Debug)]
pub struct LockProfile {
    name: String,
    kind: LockKind,
    blocker: &'static str,
    c_spins: fn() -> u32,
    stack: Vec<String>,
    counters: Counters,
}

/// Bumps a counter that several threads write.
fn shared_bump(a: &AtomicU64, by: u64) {
    // Relaxed: counters, read only by snapshots.
    a.fetch_add(by, Ordering::Relaxed);
}

/// Bumps a counter that only its taking thread writes (a [`Shard`]'s).
fn private_bump(a: &AtomicU64, by: u64) {
    // Relaxed load and store, no read-modify-write: the taking thread is
    // the only writer, so it always reads its own last store (coherence),
    // and readers (snapshots) need no order with anything else, only
    // whole words.
    a.store(
        a.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
}

impl LockProfile {
    fn new(spec: &Entry<'_>, c_spins: fn() -> u32) -> Self {
        LockProfile {
            name: spec.name.to_owned(),
            kind: spec.kind,
            blocker: spec.blocker,
            c_spins,
            stack: spec.stack.to_vec(),
            counters: Counters::new(),
        }
    }

    /// The lock's kind.
    pub fn kind(&self) -> LockKind {
        self.kind
    }

    /// Counts `n` acquisitions (contended or not).
    #[inline]
    pub fn acquired(&self, n: u64) {
        shared_bump(&self.counters.acquisitions, n);
    }

    /// Records one (sampled) hold time, ns.
    #[inline]
    pub fn record_hold(&self, ns: u64) {
        self.counters.hold(ns, shared_bump);
    }

    /// Records one contended wait.
    #[inline]
    pub fn record(&self, waited: u64, blocked: bool) {
        self.counters.record(waited, blocked, shared_bump);
    }

    fn snapshot(&self) -> LockRecord {
        let mut r = LockRecord::new(self.name.clone(), self.blocker, (self.c_spins)());
        r.kind = self.kind;
        r.stack = self.stack.clone();
        self.counters.add_to(&mut r);
        r
    }
}

/// One thread's private part of a lock's histogram, from [`take_shard`].
///
/// A lock waited on by several threads at once has its histogram's cache
/// lines written by all of them: each recorded wait then moves two or
/// three cache lines between cores. A shard is written by one thread
/// only, so recording is a load and a store to lines that stay in that
/// thread's cache, and [`snapshot`] adds every shard to its lock.
///
/// The single writer is a contract, not a check: two threads recording
/// into one shard can lose counts (never memory safety; the words are
/// atomics). [`release_shard`] hands a shard back for reuse by the next
/// thread that takes one of the same lock; its counts stay in the profile.
///
/// A shard's counters are cache-padded, so two threads' shards never
/// share a line (each thread bumps its acquisition count at every unlock).
#[derive(Debug)]
pub struct Shard {
    of: &'static LockProfile,
    counters: CachePadded<Counters>,
}

impl Shard {
    /// The lock whose histogram this shard is part of.
    pub fn lock(&self) -> &'static LockProfile {
        self.of
    }

    /// Records one contended wait (only from the thread that took the
    /// shard).
    #[inline]
    pub fn record(&self, waited: u64, blocked: bool) {
        self.counters.record(waited, blocked, private_bump);
    }

    /// Counts `n` acquisitions (only from the thread that took the shard).
    #[inline]
    pub fn acquired(&self, n: u64) {
        private_bump(&self.counters.acquisitions, n);
    }

    /// Records one (sampled) hold time, ns (only from the thread that took
    /// the shard).
    #[inline]
    pub fn record_hold(&self, ns: u64) {
        self.counters.hold(ns, private_bump);
    }
}

#[derive(Default)]
struct Registry {
    by_key: HashMap<(String, LockKind, &'static str), &'static LockProfile>,
    order: Vec<&'static LockProfile>,
    /// Every shard ever made (shards are leaked, like entries).
    shards: Vec<&'static Shard>,
    /// Released shards by their lock's address, for reuse.
    free: HashMap<usize, Vec<&'static Shard>>,
}

/// A shard of `lock` for the calling thread to record into: one a thread
/// released earlier if there is one, else a new one (leaked, 1.5 KiB; a
/// lock has at most as many as threads ever held shards of it at once).
#[cold]
pub fn take_shard(lock: &'static LockProfile) -> &'static Shard {
    let mut r = registry().lock().unwrap_or_else(|e| e.into_inner());
    let key = lock as *const LockProfile as usize;
    if let Some(s) = r.free.get_mut(&key).and_then(Vec::pop) {
        return s;
    }
    let s: &'static Shard = Box::leak(Box::new(Shard {
        of: lock,
        counters: CachePadded::new(Counters::new()),
    }));
    r.shards.push(s);
    s
}

/// Hands `shard` back: the caller records into it no more. Its counts stay
/// in the profile.
pub fn release_shard(shard: &'static Shard) {
    let mut r = registry().lock().unwrap_or_else(|e| e.into_inner());
    let key = shard.of as *const LockProfile as usize;
    r.free.entry(key).or_default().push(shard);
}

fn registry() -> &'static Mutex<Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// The entry of the mutex named `name` blocking through `blocker`
/// (registering it on first use).
#[cold]
pub fn entry(name: &LockName, blocker: &'static str, c_spins: fn() -> u32) -> &'static LockProfile {
    let name = name.key();
    entry_of(
        &Entry {
            name: &name,
            kind: LockKind::Mutex,
            blocker,
            stack: &[],
        },
        c_spins,
    )
}

/// What identifies a profile entry: its name, kind and blocker, and the
/// stack it was first contended at (kept from the first registration).
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// The lock's name.
    pub name: &'a str,
    /// Its kind.
    pub kind: LockKind,
    /// Its blocker's registry name.
    pub blocker: &'static str,
    /// Frames of the stack it was first contended at, innermost first
    /// (empty: none taken).
    pub stack: &'a [String],
}

/// The entry `spec` names (registering it on first use; C of its blocker
/// is read from `c_spins` at each snapshot).
#[cold]
pub fn entry_of(spec: &Entry<'_>, c_spins: fn() -> u32) -> &'static LockProfile {
    static ENV: Once = Once::new();
    ENV.call_once(|| {
        if let Some(p) = std::env::var_os("SYMMETRY_LOCK_PROFILE") {
            dump_at_exit(PathBuf::from(p));
        }
    });
    let key = (spec.name.to_owned(), spec.kind, spec.blocker);
    let mut r = registry().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = r.by_key.get(&key) {
        return e;
    }
    let e: &'static LockProfile = Box::leak(Box::new(LockProfile::new(spec, c_spins)));
    r.by_key.insert(key, e);
    r.order.push(e);
    e
}

/// Everything recorded so far, with this process's constants.
pub fn snapshot() -> Profile {
    let r = registry().lock().unwrap_or_else(|e| e.into_inner());
    let cal = calibration::current();
    let mut locks: Vec<LockRecord> = r.order.iter().map(|e| e.snapshot()).collect();
    let index: HashMap<usize, usize> = r
        .order
        .iter()
        .enumerate()
        .map(|(i, e)| (*e as *const LockProfile as usize, i))
        .collect();
    for s in &r.shards {
        if let Some(&i) = index.get(&(s.of as *const LockProfile as usize)) {
            s.counters.add_to(&mut locks[i]);
        }
    }
    locks.retain(|l| l.contended() > 0);
    Profile {
        ns_per_spin: cal.ns_per_spin,
        locks,
    }
}

/// Clears every histogram and shard (entries stay registered). A wait
/// recorded into a shard while it is cleared may survive the reset.
pub fn reset() {
    let r = registry().lock().unwrap_or_else(|e| e.into_inner());
    for e in &r.order {
        e.counters.zero();
    }
    for s in &r.shards {
        s.counters.zero();
    }
}

/// Writes [`snapshot`] to `path`.
pub fn write(path: &Path) -> std::io::Result<()> {
    std::fs::write(path, snapshot().to_csv())
}

static EXIT_PATH: Mutex<Option<PathBuf>> = Mutex::new(None);

extern "C" fn write_at_exit() {
    let path = EXIT_PATH.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(p) = path
        && let Err(e) = write(&p)
    {
        eprintln!("symmetry: cannot write lock profile {}: {e}", p.display());
    }
}

/// Writes the profile to `path` when the process exits normally (through
/// `exit` or returning from `main`). A later call changes the path.
pub fn dump_at_exit(path: PathBuf) {
    static REGISTER: Once = Once::new();
    *EXIT_PATH.lock().unwrap_or_else(|e| e.into_inner()) = Some(path);
    REGISTER.call_once(|| {
        // SAFETY: `write_at_exit` is a plain `extern "C"` function that
        // touches only statics, which live until the process ends.
        let rc = unsafe { libc::atexit(write_at_exit) };
        if rc != 0 {
            eprintln!("symmetry: atexit failed; the lock profile will not be written at exit");
        }
    });
}

/// A saved profile: per-lock histograms and the constants to price them.
///
/// ```
/// use symmetry_locks::spin_then_block::profiler::{LockRecord, Profile};
///
/// // A profile built by hand: one lock that waited 10 spins, then 5000.
/// let mut rec = LockRecord::new("queue", "os", 1000);
/// rec.add(10, false);
/// rec.add(5000, true);
/// let p = Profile::new(2.0, vec![rec]);
/// let text = p.to_csv();
/// assert_eq!(Profile::parse(&text).unwrap(), p);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Profile {
    /// Length of one spin on the recording machine, ns.
    pub ns_per_spin: f64,
    /// One entry per lock (name, kind and blocker).
    pub locks: Vec<LockRecord>,
}

impl Profile {
    /// A profile of `locks`, recorded where a spin took `ns_per_spin` ns.
    pub fn new(ns_per_spin: f64, locks: Vec<LockRecord>) -> Profile {
        Profile { ns_per_spin, locks }
    }
}

/// Sampled hold times of one lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HoldTimes {
    /// Acquisitions whose hold was timed (0: none).
    pub samples: u64,
    /// Sum of the timed holds, ns.
    pub sum_ns: u64,
    /// Longest timed hold, ns.
    pub max_ns: u64,
}

impl HoldTimes {
    /// The mean timed hold, ns, if any was timed.
    pub fn mean_ns(&self) -> Option<f64> {
        (self.samples > 0).then(|| self.sum_ns as f64 / self.samples as f64)
    }
}

/// One lock's histogram and counts in a [`Profile`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LockRecord {
    /// The lock's name (see [`LockName::key`]).
    pub name: String,
    /// Its kind ([`LockKind::Mutex`] in a version-1 file).
    pub kind: LockKind,
    /// Its blocker's registry name (`os`, `user`, ...).
    pub blocker: String,
    /// C of that blocker when the profile was taken, spins.
    pub c_spins: u32,
    /// Waits per bucket (see [`bucket_of`]).
    pub counts: [u64; BUCKETS],
    /// Sum of the waits per bucket, spins.
    pub sums: [u64; BUCKETS],
    /// Waits per bucket that blocked.
    pub blocked: [u64; BUCKETS],
    /// Acquisitions, contended or not, where the recorder sees them all
    /// (`None`: not seen, as for a futex, whose fast path never calls the
    /// kernel, and in a version-1 file).
    pub acquisitions: Option<u64>,
    /// The longest wait, spins (`None`: not recorded, as in a version-1
    /// file; the histogram's overflow bucket keeps only a sum).
    pub wait_max: Option<u64>,
    /// Sampled hold times.
    pub hold: HoldTimes,
    /// The stack the lock was first contended at, innermost frame first
    /// (empty: none taken).
    pub stack: Vec<String>,
}

impl LockRecord {
    /// An empty record of a mutex.
    pub fn new(name: impl Into<String>, blocker: impl Into<String>, c_spins: u32) -> Self {
        LockRecord {
            name: name.into(),
            kind: LockKind::Mutex,
            blocker: blocker.into(),
            c_spins,
            counts: [0; BUCKETS],
            sums: [0; BUCKETS],
            blocked: [0; BUCKETS],
            acquisitions: None,
            wait_max: None,
            hold: HoldTimes::default(),
            stack: Vec::new(),
        }
    }

    /// Adds one wait (for building profiles by hand or from a trace).
    pub fn add(&mut self, waited: u64, blocked: bool) {
        let j = bucket_of(waited);
        self.counts[j] = self.counts[j].saturating_add(1);
        self.sums[j] = self.sums[j].saturating_add(waited);
        self.blocked[j] = self.blocked[j].saturating_add(u64::from(blocked));
        self.wait_max = Some(self.wait_max.unwrap_or(0).max(waited));
    }

    /// Contended acquisitions recorded (saturating).
    pub fn contended(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// Acquisitions that blocked (saturating).
    pub fn blocked_total(&self) -> u64 {
        self.blocked.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// Total wait, spins (saturating).
    pub fn wait_total(&self) -> u64 {
        self.sums.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// The histogram as [`Bucket`]s.
    pub fn buckets(&self) -> Vec<Bucket> {
        (0..BUCKETS)
            .map(|j| Bucket {
                upper: bucket_upper(j),
                count: self.counts[j],
                sum: self.sums[j],
            })
            .collect()
    }

    /// KLMO91's optimal on-line threshold for this lock (spins), or `None`
    /// if it never waited.
    pub fn optimal_threshold(&self) -> Option<u32> {
        optimal_threshold(&self.buckets(), u64::from(self.c_spins)).map(|(k, _)| k as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(16), 0);
        assert_eq!(bucket_of(17), 1);
        assert_eq!(bucket_of(1008), 62);
        assert_eq!(bucket_of(1009), 63);
        assert_eq!(bucket_upper(62), 1008);
        assert_eq!(bucket_upper(63), u64::MAX);
    }
}
