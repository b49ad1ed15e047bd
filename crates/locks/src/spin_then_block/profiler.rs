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
//! machine constants, then one row per lock and non-empty bucket. `symmetry
//! analyze FILE` prices every spin policy on it.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once, OnceLock};

use super::LockName;
use super::calibration;
use super::policy::{Bucket, optimal_threshold};

/// Width of a bucket, spins (KLMO91 §3).
pub const UNIT: u64 = 16;
/// Buckets: 63 units and an overflow bucket.
pub const BUCKETS: usize = 64;
/// Longest wait that is not overflow, spins.
pub const CAP: u64 = UNIT * (BUCKETS as u64 - 1);
/// First line of a profile file.
pub const MAGIC: &str = "# symmetry lock-wait profile, version 1";

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

/// A live histogram's counters per bucket: waits, their sum and the waits
/// that blocked.
#[derive(Debug)]
struct Counters {
    counts: [AtomicU64; BUCKETS],
    sums: [AtomicU64; BUCKETS],
    blocked: [AtomicU64; BUCKETS],
}

impl Counters {
    fn new() -> Self {
        Counters {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sums: std::array::from_fn(|_| AtomicU64::new(0)),
            blocked: std::array::from_fn(|_| AtomicU64::new(0)),
        }
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
    }

    fn zero(&self) {
        for a in [&self.counts, &self.sums, &self.blocked] {
            for x in a {
                x.store(0, Ordering::Relaxed);
            }
        }
    }
}

/// One lock's live histogram.
#[derive(Debug)]
pub struct LockProfile {
    name: String,
    blocker: &'static str,
    c_spins: fn() -> u32,
    counters: Counters,
}

impl LockProfile {
    fn new(name: String, blocker: &'static str, c_spins: fn() -> u32) -> Self {
        LockProfile {
            name,
            blocker,
            c_spins,
            counters: Counters::new(),
        }
    }

    /// Records one contended wait.
    #[inline]
    pub fn record(&self, waited: u64, blocked: bool) {
        // Relaxed: counters, read only by snapshots.
        self.counters.record(waited, blocked, |a, by| {
            a.fetch_add(by, Ordering::Relaxed);
        });
    }

    fn snapshot(&self) -> LockRecord {
        let mut r = LockRecord::new(self.name.clone(), self.blocker, (self.c_spins)());
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
#[derive(Debug)]
pub struct Shard {
    of: &'static LockProfile,
    counters: Counters,
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
        // Relaxed load and store, no read-modify-write: the taking thread
        // is the only writer, so it always reads its own last store
        // (coherence), and readers (snapshots) need no order with anything
        // else, only whole words.
        self.counters.record(waited, blocked, |a, by| {
            a.store(
                a.load(Ordering::Relaxed).wrapping_add(by),
                Ordering::Relaxed,
            );
        });
    }
}

#[derive(Default)]
struct Registry {
    by_key: HashMap<(String, &'static str), &'static LockProfile>,
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
        counters: Counters::new(),
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

/// The entry of the lock named `name` blocking through `blocker`
/// (registering it on first use).
#[cold]
pub fn entry(name: &LockName, blocker: &'static str, c_spins: fn() -> u32) -> &'static LockProfile {
    static ENV: Once = Once::new();
    ENV.call_once(|| {
        if let Some(p) = std::env::var_os("SYMMETRY_LOCK_PROFILE") {
            dump_at_exit(PathBuf::from(p));
        }
    });
    let key = name.key().into_owned();
    let mut r = registry().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = r.by_key.get(&(key.clone(), blocker)) {
        return e;
    }
    let e: &'static LockProfile =
        Box::leak(Box::new(LockProfile::new(key.clone(), blocker, c_spins)));
    r.by_key.insert((key, blocker), e);
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
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Length of one spin on the recording machine, ns.
    pub ns_per_spin: f64,
    /// One entry per lock (name and blocker).
    pub locks: Vec<LockRecord>,
}

/// One lock's histogram in a [`Profile`].
#[derive(Debug, Clone, PartialEq)]
pub struct LockRecord {
    /// The lock's name (see [`LockName::key`]).
    pub name: String,
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
}

impl LockRecord {
    /// An empty record.
    pub fn new(name: impl Into<String>, blocker: impl Into<String>, c_spins: u32) -> Self {
        LockRecord {
            name: name.into(),
            blocker: blocker.into(),
            c_spins,
            counts: [0; BUCKETS],
            sums: [0; BUCKETS],
            blocked: [0; BUCKETS],
        }
    }

    /// Adds one wait (for building profiles by hand or from a trace).
    pub fn add(&mut self, waited: u64, blocked: bool) {
        let j = bucket_of(waited);
        self.counts[j] = self.counts[j].saturating_add(1);
        self.sums[j] = self.sums[j].saturating_add(waited);
        self.blocked[j] = self.blocked[j].saturating_add(u64::from(blocked));
    }

    /// Contended acquisitions recorded (saturating).
    pub fn contended(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// Acquisitions that blocked (saturating).
    pub fn blocked_total(&self) -> u64 {
        self.blocked.iter().fold(0u64, |a, &b| a.saturating_add(b))
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

const HEADER: &str = "lock,blocker,c_spins,bucket,lo_spins,hi_spins,count,sum_spins,blocked";

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
                    "{},{},{},{j},{lo},{hi},{},{},{}",
                    quote(&l.name),
                    quote(&l.blocker),
                    l.c_spins,
                    l.counts[j],
                    l.sums[j],
                    l.blocked[j]
                );
            }
        }
        s
    }

    /// Parses a profile file.
    pub fn parse(text: &str) -> Result<Profile, ProfileError> {
        let err = |line: usize, message: String| ProfileError { line, message };
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, l)) if l.trim_end() == MAGIC => {}
            _ => {
                return Err(err(
                    1,
                    format!("not a symmetry lock-wait profile (the first line must be `{MAGIC}`)"),
                ));
            }
        }
        let mut ns_per_spin = None;
        let mut header_seen = false;
        let mut locks: Vec<LockRecord> = Vec::new();
        let mut index: HashMap<(String, String), usize> = HashMap::new();
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
            if !header_seen {
                if line != HEADER {
                    return Err(err(n, format!("expected the header `{HEADER}`")));
                }
                header_seen = true;
                continue;
            }
            let f = split_csv(line).map_err(|m| err(n, m))?;
            if f.len() != 9 {
                return Err(err(n, format!("expected 9 fields, found {}", f.len())));
            }
            let num = |k: usize, what: &str| -> Result<u64, ProfileError> {
                f[k].trim().parse::<u64>().map_err(|_| {
                    err(
                        n,
                        format!("{what} `{}` is not a non-negative integer", f[k]),
                    )
                })
            };
            let c = num(2, "c_spins")?;
            let j = num(3, "bucket")? as usize;
            if j >= BUCKETS {
                return Err(err(n, format!("bucket {j} out of range 0..{BUCKETS}")));
            }
            let (count, sum, blocked) =
                (num(6, "count")?, num(7, "sum_spins")?, num(8, "blocked")?);
            if blocked > count {
                return Err(err(n, format!("blocked {blocked} exceeds count {count}")));
            }
            let key = (f[0].clone(), f[1].clone());
            let at = *index.entry(key).or_insert_with(|| {
                locks.push(LockRecord::new(
                    f[0].clone(),
                    f[1].clone(),
                    c.min(u64::from(u32::MAX)) as u32,
                ));
                locks.len() - 1
            });
            let l = &mut locks[at];
            l.counts[j] = l.counts[j].saturating_add(count);
            l.sums[j] = l.sums[j].saturating_add(sum);
            l.blocked[j] = l.blocked[j].saturating_add(blocked);
        }
        if !header_seen {
            return Err(err(0, format!("no header line `{HEADER}`")));
        }
        let ns_per_spin =
            ns_per_spin.ok_or_else(|| err(0, "no `# ... ns_per_spin=X` line".into()))?;
        Ok(Profile { ns_per_spin, locks })
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
        let p = Profile {
            ns_per_spin: 12.5,
            locks: vec![a],
        };
        let q = Profile::parse(&p.to_csv()).expect("parses");
        assert_eq!(p, q);
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
        let e = Profile::parse(&format!("{head}x,os,1,64,0,,1,1,0\n")).unwrap_err();
        assert!(e.message.contains("out of range"), "{e}");
        let e = Profile::parse(&format!("{head}x,os,1,2,0,,1,1,5\n")).unwrap_err();
        assert!(e.message.contains("exceeds"), "{e}");
        let e = Profile::parse(&format!("{head}x,os\n")).unwrap_err();
        assert_eq!(e.line, 4);
    }
}
