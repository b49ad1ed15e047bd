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
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once, OnceLock};

use crossbeam_utils::CachePadded;

use super::LockName;
use super::calibration;
use super::policy::{Bucket, optimal_threshold};

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

/// Why a profile file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProfileError {
    /// 1-based line number (0: the file as a whole).
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

impl std::fmt::Display for ProfileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}

impl std::error::Error for ProfileError {}

/// Header of the histogram rows of a version-1 file.
const HEADER_1: &str = "lock,blocker,c_spins,bucket,lo_spins,hi_spins,count,sum_spins,blocked";
/// Header of the histogram rows.
const HEADER: &str = "lock,kind,blocker,c_spins,bucket,lo_spins,hi_spins,count,sum_spins,blocked";
/// Header of the per-lock rows (version 2).
const COUNTS_HEADER: &str =
    "lock,kind,blocker,acquisitions,wait_max_spins,hold_samples,hold_sum_ns,hold_max_ns,stack";
/// Separates a stack's frames in its field.
const FRAME_SEP: &str = " < ";

fn quote(s: &str) -> Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", s.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(s)
    }
}

use std::borrow::Cow;

/// Splits one CSV line (RFC 4180 quoting, no embedded newlines).
fn split_csv(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut at_start = true;
    while let Some(ch) = chars.next() {
        match (quoted, ch) {
            (false, '"') if at_start => {
                quoted = true;
                at_start = false;
            }
            (true, '"') => {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    cur.push('"');
                } else {
                    quoted = false;
                }
            }
            (false, ',') => {
                out.push(std::mem::take(&mut cur));
                at_start = true;
            }
            (_, c) => {
                cur.push(c);
                at_start = false;
            }
        }
    }
    if quoted {
        return Err("unterminated quoted field".into());
    }
    out.push(cur);
    Ok(out)
}

/// Which table of a file the parser is in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    /// Before the histogram header.
    Start,
    /// Histogram rows (of a file of the version given).
    Buckets(u8),
    /// Per-lock rows (version 2).
    Counts,
}

impl Profile {
    /// The profile as its file format (see the module docs).
    pub fn to_csv(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{MAGIC}");
        let _ = writeln!(
            s,
            "# unit_spins={UNIT} buckets={BUCKETS} ns_per_spin={:.4}",
            self.ns_per_spin
        );
        let _ = writeln!(
            s,
            "# one row per lock and non-empty bucket; bucket {} is overflow (> {CAP} spins, blocked waits included)",
            BUCKETS - 1
        );
        let _ = writeln!(s, "{HEADER}");
        for l in &self.locks {
            for j in 0..BUCKETS {
                if l.counts[j] == 0 {
                    continue;
                }
                let lo = if j == 0 { 0 } else { j as u64 * UNIT + 1 };
                let hi = if j + 1 == BUCKETS {
                    String::new()
                } else {
                    bucket_upper(j).to_string()
                };
                let _ = writeln!(
                    s,
                    "{},{},{},{},{j},{lo},{hi},{},{},{}",
                    quote(&l.name),
                    l.kind,
                    quote(&l.blocker),
                    l.c_spins,
                    l.counts[j],
                    l.sums[j],
                    l.blocked[j]
                );
            }
        }
        let _ = writeln!(
            s,
            "# one row per lock: acquisitions (empty: not seen), longest wait, sampled hold times, \
             and the stack it was first contended at (innermost frame first, frames separated by `{}`)",
            FRAME_SEP.trim()
        );
        let _ = writeln!(s, "{COUNTS_HEADER}");
        let opt = |v: Option<u64>| v.map_or_else(String::new, |v| v.to_string());
        for l in &self.locks {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{}",
                quote(&l.name),
                l.kind,
                quote(&l.blocker),
                opt(l.acquisitions),
                opt(l.wait_max),
                l.hold.samples,
                l.hold.sum_ns,
                l.hold.max_ns,
                quote(&l.stack.join(FRAME_SEP))
            );
        }
        s
    }

    /// Parses a profile file (version 2, or version 1, whose counts read
    /// as not recorded).
    pub fn parse(text: &str) -> Result<Profile, ProfileError> {
        let err = |line: usize, message: String| ProfileError { line, message };
        let mut lines = text.lines().enumerate();
        let version = match lines.next().map(|(_, l)| l.trim_end()) {
            Some(MAGIC) => 2,
            Some(VERSION_1) => 1,
            Some(l) if l.starts_with("# symmetry lock-wait profile, version ") => {
                return Err(err(
                    1,
                    format!(
                        "`{l}`: this symmetry reads versions 1 and 2 (a newer symmetry wrote the file?)"
                    ),
                ));
            }
            _ => {
                return Err(err(
                    1,
                    format!("not a symmetry lock-wait profile (the first line must be `{MAGIC}`)"),
                ));
            }
        };
        let mut ns_per_spin = None;
        let mut section = Section::Start;
        let mut locks: Vec<LockRecord> = Vec::new();
        let mut index: HashMap<(String, LockKind, String), usize> = HashMap::new();
        for (i, raw) in lines {
            let n = i + 1;
            let line = raw.trim_end();
            if line.is_empty() {
                continue;
            }
            if let Some(meta) = line.strip_prefix('#') {
                for kv in meta.split_whitespace() {
                    let Some((k, v)) = kv.split_once('=') else {
                        continue;
                    };
                    match k {
                        "ns_per_spin" => {
                            ns_per_spin = Some(v.parse::<f64>().map_err(|_| {
                                err(n, format!("ns_per_spin `{v}` is not a number"))
                            })?);
                        }
                        "unit_spins" if v != UNIT.to_string() => {
                            return Err(err(
                                n,
                                format!("unit_spins={v}, this version reads {UNIT}"),
                            ));
                        }
                        "buckets" if v != BUCKETS.to_string() => {
                            return Err(err(
                                n,
                                format!("buckets={v}, this version reads {BUCKETS}"),
                            ));
                        }
                        _ => {}
                    }
                }
                continue;
            }
            let expected = match (section, version) {
                (Section::Start, 1) => Some(HEADER_1),
                (Section::Start, _) => Some(HEADER),
                _ => None,
            };
            if let Some(h) = expected {
                if line != h {
                    return Err(err(n, format!("expected the header `{h}`")));
                }
                section = Section::Buckets(version);
                continue;
            }
            if section == Section::Buckets(2) && line == COUNTS_HEADER {
                section = Section::Counts;
                continue;
            }
            let f = split_csv(line).map_err(|m| err(n, m))?;
            let width = match section {
                Section::Buckets(1) => 9,
                Section::Buckets(_) => 10,
                _ => 9,
            };
            if f.len() != width {
                return Err(err(
                    n,
                    format!("expected {width} fields, found {}", f.len()),
                ));
            }
            let num = |k: usize, what: &str| -> Result<u64, ProfileError> {
                f[k].trim().parse::<u64>().map_err(|_| {
                    err(
                        n,
                        format!("{what} `{}` is not a non-negative integer", f[k]),
                    )
                })
            };
            let opt = |k: usize, what: &str| -> Result<Option<u64>, ProfileError> {
                if f[k].trim().is_empty() {
                    Ok(None)
                } else {
                    num(k, what).map(Some)
                }
            };
            // Version 1 has no kind column: every lock a mutex.
            let (kind, at) = if section == Section::Buckets(1) {
                (LockKind::Mutex, 1)
            } else {
                let kind = LockKind::from_name(f[1].trim()).ok_or_else(|| {
                    let known: Vec<&str> = LockKind::ALL.iter().map(|k| k.name()).collect();
                    err(
                        n,
                        format!("kind `{}` is not one of {}", f[1], known.join(", ")),
                    )
                })?;
                (kind, 2)
            };
            let key = (f[0].clone(), kind, f[at].clone());
            if section == Section::Counts {
                let Some(&i) = index.get(&key) else {
                    // A lock with counts but no wait: nothing to price;
                    // kept for its counts.
                    let mut l = LockRecord::new(f[0].clone(), f[at].clone(), 0);
                    l.kind = kind;
                    index.insert(key, locks.len());
                    locks.push(l);
                    Self::counts_into(locks.last_mut().expect("just pushed"), &f, opt, num)?;
                    continue;
                };
                Self::counts_into(&mut locks[i], &f, opt, num)?;
                continue;
            }
            let c = num(at + 1, "c_spins")?;
            let j = num(at + 2, "bucket")? as usize;
            if j >= BUCKETS {
                return Err(err(n, format!("bucket {j} out of range 0..{BUCKETS}")));
            }
            let (count, sum, blocked) = (
                num(at + 5, "count")?,
                num(at + 6, "sum_spins")?,
                num(at + 7, "blocked")?,
            );
            if blocked > count {
                return Err(err(n, format!("blocked {blocked} exceeds count {count}")));
            }
            let i = *index.entry(key).or_insert_with(|| {
                let mut l = LockRecord::new(
                    f[0].clone(),
                    f[at].clone(),
                    c.min(u64::from(u32::MAX)) as u32,
                );
                l.kind = kind;
                locks.push(l);
                locks.len() - 1
            });
            let l = &mut locks[i];
            l.counts[j] = l.counts[j].saturating_add(count);
            l.sums[j] = l.sums[j].saturating_add(sum);
            l.blocked[j] = l.blocked[j].saturating_add(blocked);
        }
        if section == Section::Start {
            let h = if version == 1 { HEADER_1 } else { HEADER };
            return Err(err(0, format!("no header line `{h}`")));
        }
        let ns_per_spin =
            ns_per_spin.ok_or_else(|| err(0, "no `# ... ns_per_spin=X` line".into()))?;
        Ok(Profile { ns_per_spin, locks })
    }

    /// Fills `l`'s counts from per-lock row `f`.
    fn counts_into(
        l: &mut LockRecord,
        f: &[String],
        opt: impl Fn(usize, &str) -> Result<Option<u64>, ProfileError>,
        num: impl Fn(usize, &str) -> Result<u64, ProfileError>,
    ) -> Result<(), ProfileError> {
        l.acquisitions = opt(3, "acquisitions")?;
        l.wait_max = opt(4, "wait_max_spins")?;
        l.hold = HoldTimes {
            samples: num(5, "hold_samples")?,
            sum_ns: num(6, "hold_sum_ns")?,
            max_ns: num(7, "hold_max_ns")?,
        };
        l.stack = f[8]
            .split(FRAME_SEP)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        Ok(())
    }

    /// Reads and parses a profile file.
    pub fn read(path: &Path) -> Result<Profile, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|e| ProfileError {
            line: 0,
            message: format!("cannot read {}: {e}", path.display()),
        })?;
        Self::parse(&text)
    }

    /// Every lock's optimal on-line threshold (for
    /// [`opt_known::install`](super::policy::opt_known::install)).
    pub fn optimal_thresholds(&self) -> Vec<(String, u32)> {
        self.locks
            .iter()
            .filter_map(|l| Some((l.name.clone(), l.optimal_threshold()?)))
            .collect()
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

    #[test]
    fn round_trip() {
        let mut a = LockRecord::new("a,\"b\"", "os", 300);
        for w in [0, 5, 17, 900, 5000, 100_000] {
            a.add(w, w > 1000);
        }
        let mut b = LockRecord::new("rw", "glibc", 300);
        b.kind = LockKind::Read;
        b.add(3, false);
        b.acquisitions = Some(1000);
        b.hold = HoldTimes {
            samples: 10,
            sum_ns: 2000,
            max_ns: 900,
        };
        b.stack = vec!["f+0x1 (/bin/x+0x10)".into(), "main, \"q\"".into()];
        let mut c = b.clone();
        c.kind = LockKind::Write;
        let p = Profile {
            ns_per_spin: 12.5,
            locks: vec![a, b, c],
        };
        let q = Profile::parse(&p.to_csv()).expect("parses");
        assert_eq!(p, q);
    }

    #[test]
    fn version_1_files_are_read() {
        let v1 = format!(
            "{VERSION_1}\n# unit_spins=16 buckets=64 ns_per_spin=2.0\n{HEADER_1}\nm,glibc,300,0,0,16,4,20,0\n"
        );
        let p = Profile::parse(&v1).expect("a version-1 file parses");
        let l = &p.locks[0];
        assert_eq!(
            (l.kind, l.contended(), l.acquisitions, l.wait_max),
            (LockKind::Mutex, 4, None, None)
        );
        let e = Profile::parse("# symmetry lock-wait profile, version 9\n").unwrap_err();
        assert!(e.message.contains("reads versions 1 and 2"), "{e}");
    }

    #[test]
    fn bad_files() {
        assert!(
            Profile::parse("hello")
                .unwrap_err()
                .message
                .contains("not a symmetry")
        );
        let head = format!("{MAGIC}\n# ns_per_spin=1\n{HEADER}\n");
        let e = Profile::parse(&format!("{head}x,mutex,os,1,64,0,,1,1,0\n")).unwrap_err();
        assert!(e.message.contains("out of range"), "{e}");
        let e = Profile::parse(&format!("{head}x,mutex,os,1,2,0,,1,1,5\n")).unwrap_err();
        assert!(e.message.contains("exceeds"), "{e}");
        let e = Profile::parse(&format!("{head}x,os\n")).unwrap_err();
        assert_eq!(e.line, 4);
        let e = Profile::parse(&format!("{head}x,lock,os,1,2,0,,1,1,0\n")).unwrap_err();
        assert!(e.message.contains("kind `lock`"), "{e}");
        let e =
            Profile::parse(&format!("{head}{COUNTS_HEADER}\nx,mutex,os,z,,0,0,0,\n")).unwrap_err();
        assert!(e.message.contains("acquisitions `z`"), "{e}");
    }
}
