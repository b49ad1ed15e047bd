//! Named shared-memory segments holding one endpoint's queue block.
//!
//! A segment is a POSIX shared-memory object (`shm_open`, so it shows up
//! in `/dev/shm` and can be found by name from any process) mapped
//! `MAP_SHARED`. Its first 4 KiB hold a [`SegHeader`]; the request queue
//! and the reply queue follow (layout in [`crate::layout`]).
//!
//! Creation writes everything, then publishes the segment by storing the
//! magic number last (Release); an opener waits for the magic (Acquire)
//! and then checks version, sizes and algorithm, so a half-built, foreign
//! or truncated segment is a clear error and never undefined behaviour.
//!
//! # Trust
//!
//! Every process of a job can write every byte of every segment it maps,
//! so nothing read from shared memory is trusted twice:
//!
//! * the header is copied once, when the segment is opened
//!   ([`Snapshot`]), and checked there; everything derived from it (the
//!   queue sizes, the owner's pid) comes from that copy, and the queue
//!   views are built from the copy and the real mapping length, so a peer
//!   that rewrites a header later cannot move an access out of bounds;
//! * a segment must belong to this user and have mode 0600 (`fstat`): a
//!   name pre-created by someone else is refused, never joined;
//! * creation uses `O_EXCL`, so a name that exists already is an error
//!   ([`AmError::NameTaken`], naming it) unless it is our own stale
//!   segment (its owner has died), which is removed and created afresh;
//! * names cannot be planted by another user: [`segment_name`] derives
//!   each rank's name from the job's secret name, so seeing one rank's
//!   segment in `/dev/shm` does not tell another's.
//!
//! A process of the same user is not kept out: it can read the job's name
//! (`/proc/PID/environ`), create a rank's name first, write any byte of a
//! segment or ptrace a rank. Against it the layer promises only that every
//! access stays in bounds and that hostile bytes are reported as errors.

use std::ffi::CString;
use std::time::{Duration, Instant};

use crate::claim::Claim;
use crate::error::AmError;
use crate::layout::{BulkSlot, FREE, HeadInfo, Packet, Queue, QueueLayout, word};
use crate::sync::{AtomicU32, AtomicU64, Ordering};

pub use crate::layout::MAGIC;
/// Layout version; bump on any change of the shared structures.
pub const VERSION: u32 = 3;
/// Bytes reserved for the header.
pub const HEADER_BYTES: usize = 4096;

/// Sizes of an endpoint's queues.
///
/// Start from [`Config::default`] (or the `const` [`Config::new`]) and
/// change what you need; [`Endpoint::join`](crate::Endpoint::join)
/// checks the sizes ([`Config::validate`]).
///
/// ```
/// use symmetry_am::Config;
///
/// // Short rings of small bulk blocks, e.g. for many ranks on one host.
/// const SMALL: Config = Config::new().with_packets(32).with_bulk_blocks(4).with_bulk_bytes(1024);
/// assert!(SMALL.validate().is_ok());
/// assert_eq!(Config::default().packets, 64);
/// assert!(Config::default().with_bulk_bytes(100).validate().is_err()); // not a multiple of 128
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Packets per queue (at least 2); under an algorithm with a lane per
    /// sender (`rings`), packets per sender in each queue.
    pub packets: u32,
    /// Bulk blocks per queue (at least 1).
    pub bulk_blocks: u32,
    /// Bytes per bulk block (a multiple of 128, at least 128).
    pub bulk_bytes: u32,
}

impl Default for Config {
    /// 64 packets (per sender under `rings`) and 16 bulk blocks of 8 KB
    /// (LC98's largest bulk transfer).
    ///
    /// The ring is short on purpose. In full `symmetry run peer-messages`
    /// runs on this project's two-vCPU machine, one writer streaming to a
    /// polling receiver took about half the time per message with 64
    /// packets as with 256 under `rings` and `stamp` (0.6x under
    /// `lock-free`), and the round trip did not change. A longer ring buys room for
    /// bursts, not speed.
    fn default() -> Self {
        Self::new()
    }
}

impl Config {
    /// The default sizes ([`Config::default`]), usable in a `const`.
    pub const fn new() -> Config {
        Config {
            packets: 64,
            bulk_blocks: 16,
            bulk_bytes: 8192,
        }
    }

    /// Sets [`packets`](Config::packets).
    #[must_use]
    pub const fn with_packets(mut self, packets: u32) -> Config {
        self.packets = packets;
        self
    }

    /// Sets [`bulk_blocks`](Config::bulk_blocks).
    #[must_use]
    pub const fn with_bulk_blocks(mut self, bulk_blocks: u32) -> Config {
        self.bulk_blocks = bulk_blocks;
        self
    }

    /// Sets [`bulk_bytes`](Config::bulk_bytes).
    #[must_use]
    pub const fn with_bulk_bytes(mut self, bulk_bytes: u32) -> Config {
        self.bulk_bytes = bulk_bytes;
        self
    }

    /// Checks the sizes.
    pub fn validate(&self) -> Result<(), AmError> {
        if self.packets < 2 || self.packets > (1 << 20) {
            return Err(AmError::Config {
                detail: format!("packets = {} (accepted: 2..=1048576)", self.packets),
            });
        }
        if self.bulk_blocks < 1 || self.bulk_blocks > (1 << 16) {
            return Err(AmError::Config {
                detail: format!("bulk_blocks = {} (accepted: 1..=65536)", self.bulk_blocks),
            });
        }
        if self.bulk_bytes < 128
            || !self.bulk_bytes.is_multiple_of(128)
            || self.bulk_bytes > (1 << 24)
        {
            return Err(AmError::Config {
                detail: format!(
                    "bulk_bytes = {} (accepted: a multiple of 128 in 128..=16777216)",
                    self.bulk_bytes
                ),
            });
        }
        Ok(())
    }

    /// Checks a rank and job size: `1..=MAX_RANKS` ranks, `rank < size`
    /// (what `Endpoint::join`, `Segment::create` and the validation of a
    /// peer's header accept).
    pub fn check_rank(rank: u32, size: u32) -> Result<(), AmError> {
        if size == 0 || size as usize > crate::MAX_RANKS || rank >= size {
            return Err(AmError::Config {
                detail: format!(
                    "rank {rank} of {size} ranks (accepted: 1..={} ranks, rank < size)",
                    crate::MAX_RANKS
                ),
            });
        }
        Ok(())
    }

    /// Packets in each queue's ring for claim algorithm `C` in a job of
    /// `size` ranks: `packets`, or `packets` per sender under an
    /// algorithm with a lane per sender ([`Claim::PER_SENDER`]).
    pub fn ring_packets<C: Claim>(&self, size: u32) -> usize {
        self.packets as usize * crate::claim::lanes::<C>(size)
    }

    /// The queue layout for claim algorithm `C` in a job of `size` ranks.
    pub fn queue_layout<C: Claim>(&self, size: u32) -> QueueLayout {
        QueueLayout::new(
            core::mem::size_of::<C::Tail>(),
            self.ring_packets::<C>(size),
            self.bulk_blocks as usize,
            self.bulk_bytes as usize,
        )
    }

    /// Total segment bytes for claim algorithm `C` in a job of `size`
    /// ranks.
    pub fn segment_bytes<C: Claim>(&self, size: u32) -> usize {
        HEADER_BYTES + 2 * self.queue_layout::<C>(size).bytes
    }
}

/// The header of a segment.
#[repr(C)]
#[derive(Debug)]
pub struct SegHeader {
    /// [`MAGIC`] once initialized (stored last, Release).
    pub(crate) magic: AtomicU64,
    /// [`VERSION`].
    pub(crate) version: u32,
    /// [`HEADER_BYTES`].
    pub(crate) header_bytes: u32,
    /// Total bytes of the segment.
    pub(crate) total_bytes: u64,
    /// Claim algorithm name, NUL-padded.
    pub(crate) algorithm: [u8; 16],
    /// The queue sizes.
    pub(crate) packets: u32,
    pub(crate) bulk_blocks: u32,
    pub(crate) bulk_bytes: u32,
    /// `size_of::<Packet>()` and `size_of::<C::Tail>()` of the creator.
    pub(crate) packet_bytes: u32,
    pub(crate) tail_bytes: u32,
    /// Rank and job size of the owner.
    pub(crate) rank: u32,
    pub(crate) size: u32,
    /// Pid of the receiving process.
    pub(crate) owner_pid: AtomicU32,
    /// Non-zero once the owner closed the endpoint.
    pub(crate) closed: AtomicU32,
    /// The owner's doorbell: whether it may sleep, and the futex word it
    /// sleeps on (see `crate::bell`). On the line of `closed`, which every
    /// send loads already.
    pub(crate) bell: AtomicU32,
}

/// The header of a segment as it was when the segment was opened (or
/// created): the only copy of its fields this process ever uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Snapshot {
    /// Layout version.
    pub version: u32,
    /// Header bytes.
    pub header_bytes: u32,
    /// Total bytes the header claims.
    pub total_bytes: u64,
    /// Claim algorithm name, NUL-padded.
    pub algorithm: [u8; 16],
    /// Queue sizes.
    pub config: Config,
    /// `size_of::<Packet>()` of the creator.
    pub packet_bytes: u32,
    /// `size_of::<C::Tail>()` of the creator.
    pub tail_bytes: u32,
    /// Rank of the owner.
    pub rank: u32,
    /// Job size of the owner.
    pub size: u32,
    /// Pid of the owner (the receiving process).
    pub owner_pid: u32,
}

impl Snapshot {
    /// Nothing read yet (a mapping whose header `validate` has not copied;
    /// never used for a view).
    const UNREAD: Snapshot = Snapshot {
        version: 0,
        header_bytes: 0,
        total_bytes: 0,
        algorithm: [0; 16],
        config: Config {
            packets: 0,
            bulk_blocks: 0,
            bulk_bytes: 0,
        },
        packet_bytes: 0,
        tail_bytes: 0,
        rank: 0,
        size: 0,
        owner_pid: 0,
    };

    /// Reads every plain field of the header at `h` once.
    ///
    /// # Safety
    ///
    /// `h` points to a mapped, readable header.
    unsafe fn read(h: *const SegHeader) -> Snapshot {
        // Volatile: other processes may write these words at any time; a
        // volatile read takes whatever is there once, and the copy is all
        // that is used afterwards.
        // SAFETY: in bounds of the mapped header (caller); plain integers
        // have no invalid values.
        unsafe {
            use core::ptr::read_volatile as rv;
            Snapshot {
                version: rv(&raw const (*h).version),
                header_bytes: rv(&raw const (*h).header_bytes),
                total_bytes: rv(&raw const (*h).total_bytes),
                algorithm: rv(&raw const (*h).algorithm),
                config: Config {
                    packets: rv(&raw const (*h).packets),
                    bulk_blocks: rv(&raw const (*h).bulk_blocks),
                    bulk_bytes: rv(&raw const (*h).bulk_bytes),
                },
                packet_bytes: rv(&raw const (*h).packet_bytes),
                tail_bytes: rv(&raw const (*h).tail_bytes),
                rank: rv(&raw const (*h).rank),
                size: rv(&raw const (*h).size),
                owner_pid: (*h).owner_pid.load(Ordering::Relaxed),
            }
        }
    }

    /// The algorithm name.
    pub fn algorithm(&self) -> String {
        let n = self.algorithm.iter().position(|&b| b == 0).unwrap_or(16);
        String::from_utf8_lossy(&self.algorithm[..n]).into_owned()
    }
}

/// A mapping of a segment.
#[derive(Debug)]
pub struct Segment {
    name: String,
    base: *mut u8,
    len: usize,
    /// The header as validated; see [`Snapshot`].
    snap: Snapshot,
}

// SAFETY: the mapping is plain shared memory; all shared fields inside are
// atomics or cells whose access the handshake protocol orders.
unsafe impl Send for Segment {}

fn c_name(name: &str) -> Result<CString, AmError> {
    CString::new(name).map_err(|_| AmError::Config {
        detail: format!("segment name {name:?} contains a NUL byte"),
    })
}

/// The segment name of `rank` in the shared-memory group `job` (a job's
/// name, or [`Job::shm_name`](crate::Job::shm_name) for one host of a
/// job on several): `/symmetry-am.<launcher>-<tag>.<rank>`.
///
/// `<launcher>` is the part of `job` before its first `-` (the launcher's
/// pid in names from [`Job::new_name`](crate::Job::new_name), which
/// [`cleanup_stale`](crate::job::cleanup_stale) reads; left out if `job`
/// has no `-`). `<tag>` is SipHash-2-4, a keyed pseudo-random function,
/// of the rank under a key derived from all of `job`: `job` is the secret
/// and appears in no name, so one rank's name (listed in `/dev/shm` for
/// every user to see) tells nothing about another's.
pub fn segment_name(job: &str, rank: u32) -> String {
    use siphasher::{sip::SipHasher24, sip128::SipHasher24 as SipHasher24x128};
    // SipHash's key is 128 bits; a name of any length is compressed to one
    // (a fixed-key hash: the name's randomness becomes the key's).
    let key = SipHasher24x128::new().hash(job.as_bytes()).as_bytes();
    let tag = SipHasher24::new_with_key(&key).hash(&rank.to_le_bytes());
    match job.split_once('-') {
        Some((launcher, _)) => format!("/symmetry-am.{launcher}-{tag:016x}.{rank}"),
        None => format!("/symmetry-am.{tag:016x}.{rank}"),
    }
}

/// Removes a segment name (its memory stays while mapped).
pub fn unlink(name: &str) -> Result<(), AmError> {
    let c = c_name(name)?;
    // SAFETY: `c` is a valid C string.
    if unsafe { libc::shm_unlink(c.as_ptr()) } != 0 {
        return Err(AmError::io(format!("shm_unlink {name}")));
    }
    Ok(())
}

/// The effective user id of this process.
fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// Checks that the object behind `fd` belongs to this user and has mode
/// 0600; returns its size.
fn check_owner(fd: i32, name: &str) -> Result<usize, AmError> {
    // SAFETY: `st` is written by fstat.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: valid descriptor and out-pointer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(AmError::io(format!("fstat {name}")));
    }
    if st.st_uid != euid() {
        return Err(AmError::Untrusted {
            name: name.to_string(),
            detail: format!(
                "it belongs to uid {}, not to this user (uid {}): another user could read and write every message",
                st.st_uid,
                euid()
            ),
        });
    }
    let mode = st.st_mode & 0o7777;
    if mode != 0o600 {
        return Err(AmError::Untrusted {
            name: name.to_string(),
            detail: format!("its mode is {mode:04o}, endpoints are created 0600"),
        });
    }
    Ok(st.st_size as usize)
}

impl Segment {
    /// Creates and initializes the segment `name` for algorithm `C`.
    ///
    /// The name must not exist: a segment of this user whose owner has
    /// died (a crashed job's) is removed and the name reused; any other
    /// existing object is [`AmError::NameTaken`].
    pub fn create<C: Claim>(
        name: &str,
        cfg: &Config,
        rank: u32,
        size: u32,
    ) -> Result<Self, AmError> {
        cfg.validate()?;
        Config::check_rank(rank, size)?;
        let c = c_name(name)?;
        let len = cfg.segment_bytes::<C>(size);
        let mut retried = false;
        let fd = loop {
            // SAFETY: valid C string; the flags create a new object or fail.
            let fd = unsafe {
                libc::shm_open(
                    c.as_ptr(),
                    libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                    0o600,
                )
            };
            if fd >= 0 {
                break fd;
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EEXIST) {
                return Err(AmError::Io {
                    what: format!("shm_open (create) {name}"),
                    source: err,
                });
            }
            match existing(name) {
                // Removed between our create and our look (an endpoint
                // under the name closed meanwhile): create it again.
                Existing::Gone => {}
                Existing::Stale if !retried => {
                    retried = true;
                    let _ = unlink(name);
                }
                Existing::Stale => {
                    return Err(AmError::NameTaken {
                        name: name.to_string(),
                        detail: "it reappeared after its stale copy was removed".into(),
                    });
                }
                Existing::Taken(detail) => {
                    return Err(AmError::NameTaken {
                        name: name.to_string(),
                        detail,
                    });
                }
            }
        };
        let fail = |what: String| {
            let e = AmError::io(what);
            // SAFETY: `fd` is ours; the name was created by us.
            unsafe {
                libc::close(fd);
                libc::shm_unlink(c.as_ptr());
            }
            e
        };
        // The mode given to shm_open is filtered by the umask; set it
        // exactly, since openers refuse anything but 0600.
        // SAFETY: `fd` is a valid descriptor.
        if unsafe { libc::fchmod(fd, 0o600) } != 0 {
            return Err(fail(format!("fchmod {name} to 0600")));
        }
        // SAFETY: `fd` is a valid descriptor.
        if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
            return Err(fail(format!("ftruncate {name} to {len} bytes")));
        }
        let base = match map(fd, len) {
            Some(b) => b,
            None => return Err(fail(format!("mmap {name} ({len} bytes)"))),
        };
        // SAFETY: the mapping holds its own reference to the object.
        unsafe { libc::close(fd) };
        let mut algorithm = [0u8; 16];
        algorithm[..C::NAME.len()].copy_from_slice(C::NAME.as_bytes());
        let seg = Segment {
            name: name.to_string(),
            base,
            len,
            snap: Snapshot {
                version: VERSION,
                header_bytes: HEADER_BYTES as u32,
                total_bytes: len as u64,
                algorithm,
                config: *cfg,
                packet_bytes: core::mem::size_of::<Packet>() as u32,
                tail_bytes: core::mem::size_of::<C::Tail>() as u32,
                rank,
                size,
                owner_pid: std::process::id(),
            },
        };
        // SAFETY: the fresh mapping is `len` bytes, page-aligned, zeroed,
        // and nobody else has seen the magic yet, so nobody uses it.
        unsafe { seg.init::<C>() };
        Ok(seg)
    }

    /// Writes the header (from the snapshot) and both queues.
    ///
    /// # Safety
    ///
    /// Exclusive access to a fresh mapping of `snap.total_bytes` bytes.
    unsafe fn init<C: Claim>(&self) {
        let s = self.snap;
        let cfg = s.config;
        let ql = cfg.queue_layout::<C>(s.size);
        let h = self.base.cast::<SegHeader>();
        // SAFETY: the header fits in the first page; we have exclusive
        // access (caller).
        unsafe {
            h.write(SegHeader {
                magic: AtomicU64::new(0),
                version: s.version,
                header_bytes: s.header_bytes,
                total_bytes: s.total_bytes,
                algorithm: s.algorithm,
                packets: cfg.packets,
                bulk_blocks: cfg.bulk_blocks,
                bulk_bytes: cfg.bulk_bytes,
                packet_bytes: s.packet_bytes,
                tail_bytes: s.tail_bytes,
                rank: s.rank,
                size: s.size,
                owner_pid: AtomicU32::new(s.owner_pid),
                closed: AtomicU32::new(0),
                bell: AtomicU32::new(crate::bell::AWAKE),
            });
        }
        for q in 0..2 {
            let start = self.base.wrapping_add(HEADER_BYTES + q * ql.bytes);
            // SAFETY: every part lies inside the mapping (QueueLayout sums
            // to `ql.bytes`), is suitably aligned (128-byte offsets in a
            // page-aligned mapping), and is exclusively ours.
            unsafe {
                C::init(start.cast::<C::Tail>());
                start.add(ql.head).cast::<HeadInfo>().write(HeadInfo::new());
                let packets = start.add(ql.packets).cast::<Packet>();
                for i in 0..cfg.ring_packets::<C>(s.size) {
                    packets.add(i).write(Packet::new());
                }
                let bulk = start.add(ql.bulk).cast::<BulkSlot>();
                for i in 0..cfg.bulk_blocks as usize {
                    bulk.add(i)
                        .write(BulkSlot::new(AtomicU64::new(word(0, 0, FREE))));
                }
            }
        }
        // Release: publishes all the writes above to openers, whose Acquire
        // load of the magic pairs with it.
        self.header().magic.store(MAGIC, Ordering::Release);
    }

    /// Opens the existing segment `name` for algorithm `C`, waiting up to
    /// `timeout` for it to exist and be initialized.
    ///
    /// The segment must belong to this user with mode 0600
    /// ([`AmError::Untrusted`] otherwise); its header is copied once and
    /// checked against this build (magic, version, algorithm, structure
    /// sizes, queue sizes against the real length). The caller checks the
    /// fields that depend on the job (rank, size, queue sizes) on
    /// [`Segment::snapshot`].
    pub fn open<C: Claim>(name: &str, timeout: Duration) -> Result<Self, AmError> {
        let c = c_name(name)?;
        let start = Instant::now();
        let mut pause = Duration::from_micros(50);
        let fd = loop {
            // SAFETY: valid C string.
            let fd = unsafe { libc::shm_open(c.as_ptr(), libc::O_RDWR, 0) };
            if fd >= 0 {
                break fd;
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::ENOENT) {
                return Err(AmError::Io {
                    what: format!("shm_open {name}"),
                    source: err,
                });
            }
            if start.elapsed() >= timeout {
                return Err(AmError::Timeout {
                    what: format!("segment {name} to be created"),
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
        };
        let closing = |e: AmError| {
            // SAFETY: our descriptor.
            unsafe { libc::close(fd) };
            e
        };
        let len = loop {
            let len = check_owner(fd, name).map_err(closing)?;
            if len >= HEADER_BYTES {
                break len;
            }
            // A creator between shm_open and ftruncate, or a truncated file.
            if start.elapsed() >= timeout {
                return Err(closing(AmError::BadSize {
                    name: name.to_string(),
                    detail: format!(
                        "{len} bytes, smaller than the {HEADER_BYTES}-byte header (truncated or foreign)"
                    ),
                }));
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let base = map(fd, len);
        // SAFETY: our descriptor; the mapping keeps the object alive.
        unsafe { libc::close(fd) };
        let base = base.ok_or_else(|| AmError::io(format!("mmap {name}")))?;
        let mut seg = Segment {
            name: name.to_string(),
            base,
            len,
            snap: Snapshot::UNREAD,
        };
        seg.snap = seg.validate::<C>(start, timeout)?;
        Ok(seg)
    }

    /// Waits for the magic, copies the header once and checks the copy.
    fn validate<C: Claim>(&self, start: Instant, timeout: Duration) -> Result<Snapshot, AmError> {
        let name = self.name.clone();
        let h = self.header();
        loop {
            // Acquire: pairs with the Release store of the magic in `init`.
            let m = h.magic.load(Ordering::Acquire);
            if m == MAGIC {
                break;
            }
            if m != 0 || start.elapsed() >= timeout {
                return Err(AmError::BadMagic { name, found: m });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: the mapping holds at least the header (checked in `open`).
        let s = unsafe { Snapshot::read(self.base.cast::<SegHeader>()) };
        if s.version != VERSION {
            return Err(AmError::BadVersion {
                name,
                found: s.version,
                expected: VERSION,
            });
        }
        let found = s.algorithm();
        if found != C::NAME {
            return Err(AmError::WrongAlgorithm {
                name,
                found,
                expected: C::NAME,
            });
        }
        let bad = |detail: String| AmError::BadSize {
            name: self.name.clone(),
            detail,
        };
        if s.total_bytes != self.len as u64 {
            return Err(bad(format!(
                "the header says {} bytes but the segment has {} (truncated or foreign)",
                s.total_bytes, self.len
            )));
        }
        if s.header_bytes as usize != HEADER_BYTES
            || s.packet_bytes as usize != core::mem::size_of::<Packet>()
            || s.tail_bytes as usize != core::mem::size_of::<C::Tail>()
        {
            return Err(bad(format!(
                "structure sizes header/packet/tail {}/{}/{} differ from this build's {}/{}/{}",
                s.header_bytes,
                s.packet_bytes,
                s.tail_bytes,
                HEADER_BYTES,
                core::mem::size_of::<Packet>(),
                core::mem::size_of::<C::Tail>()
            )));
        }
        let cfg = s.config;
        cfg.validate()
            .map_err(|e| bad(format!("invalid queue sizes in the header: {e}")))?;
        Config::check_rank(s.rank, s.size).map_err(|e| bad(format!("in the header: {e}")))?;
        if cfg.segment_bytes::<C>(s.size) != self.len {
            return Err(bad(format!(
                "queue sizes {cfg:?} for {} ranks need {} bytes, the segment has {}",
                s.size,
                cfg.segment_bytes::<C>(s.size),
                self.len
            )));
        }
        Ok(s)
    }

    /// The segment's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The live header, for its atomic words (magic, closed). Its plain
    /// fields may have been rewritten by any process since the segment was
    /// opened: use [`Segment::snapshot`] for them.
    pub fn header(&self) -> &SegHeader {
        // SAFETY: the mapping is at least HEADER_BYTES and page-aligned.
        unsafe { &*self.base.cast::<SegHeader>() }
    }

    /// The header as it was validated when the segment was opened.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snap
    }

    /// The queue sizes (from the validated copy of the header).
    pub fn config(&self) -> Config {
        self.snap.config
    }

    /// Pid of the owning (receiving) process (from the validated copy).
    pub fn owner_pid(&self) -> u32 {
        self.snap.owner_pid
    }

    /// Whether the owner has closed the endpoint.
    #[inline]
    pub fn is_closed(&self) -> bool {
        // Acquire: pairs with the Release store in `mark_closed`.
        self.closed_flag().load(Ordering::Acquire) != 0
    }

    /// The closed flag itself (a sender keeps a reference to check it on
    /// every send; `is_closed` reads it).
    pub(crate) fn closed_flag(&self) -> &AtomicU32 {
        &self.header().closed
    }

    /// The owner's doorbell word (see `crate::bell`; a sender keeps a
    /// reference to ring it after every send).
    pub(crate) fn bell(&self) -> &AtomicU32 {
        &self.header().bell
    }

    /// Marks the endpoint closed (its senders get `PeerClosed`).
    pub fn mark_closed(&self) {
        // Release: everything the owner did happens before a sender's
        // observation of the closed flag.
        self.header().closed.store(1, Ordering::Release);
    }

    /// Queue `which` (0 requests, 1 replies) of a segment validated for `C`,
    /// built from the validated copy of the header, never from the live
    /// header.
    ///
    /// # Safety
    ///
    /// The segment was created or validated for `C`, and the returned view
    /// must not outlive the mapping (`'a` is chosen by the caller).
    pub unsafe fn queue<'a, C: Claim>(&self, which: usize) -> Queue<'a, C::Tail> {
        let cfg = self.snap.config;
        let size = self.snap.size;
        let ql = cfg.queue_layout::<C>(size);
        assert!(
            which < 2 && HEADER_BYTES + 2 * ql.bytes <= self.len,
            "queue view outside the mapping"
        );
        let start = self.base.wrapping_add(HEADER_BYTES + which * ql.bytes);
        // SAFETY: validated layout (the assertion above bounds it by the
        // real mapping length): every part is in bounds, aligned and
        // initialized; the mapping outlives the view (caller).
        unsafe {
            Queue {
                tail: &*start.cast::<C::Tail>(),
                head: &*start.add(ql.head).cast::<HeadInfo>(),
                packets: core::slice::from_raw_parts(
                    start.add(ql.packets).cast::<Packet>(),
                    cfg.ring_packets::<C>(size),
                ),
                bulk: core::slice::from_raw_parts(
                    start.add(ql.bulk).cast::<BulkSlot>(),
                    cfg.bulk_blocks as usize,
                ),
                bulk_data: start.add(ql.data),
                bulk_bytes: cfg.bulk_bytes as usize,
                shift: crate::layout::shift_for(cfg.ring_packets::<C>(size)),
            }
        }
    }
}

/// What an existing object under a name we want to create is.
enum Existing {
    /// Nothing any more: the name was removed after the create that found
    /// it (its endpoint closed meanwhile).
    Gone,
    /// Our own endpoint segment whose owner has died: safe to remove.
    Stale,
    /// Anything else, described.
    Taken(String),
}

/// Looks at the object already under `name` without trusting it.
fn existing(name: &str) -> Existing {
    let Ok(c) = c_name(name) else {
        return Existing::Taken("the name is invalid".into());
    };
    // SAFETY: valid C string; read-only open of an existing object.
    let fd = unsafe { libc::shm_open(c.as_ptr(), libc::O_RDONLY, 0) };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ENOENT) {
            return Existing::Gone;
        }
        return Existing::Taken(format!("it exists and cannot be opened ({err})"));
    }
    let verdict = (|| {
        // SAFETY: `st` is written by fstat.
        let mut st: libc::stat = unsafe { core::mem::zeroed() };
        // SAFETY: valid descriptor and out-pointer.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Existing::Taken("it exists and cannot be inspected".into());
        }
        if st.st_uid != euid() {
            return Existing::Taken(format!(
                "it was created by uid {} (this user is uid {}); refusing to share a job with another user's segment",
                st.st_uid,
                euid()
            ));
        }
        if (st.st_size as usize) < HEADER_BYTES {
            return Existing::Taken(format!(
                "it exists ({} bytes) and is not an endpoint, or its creator is still building it",
                st.st_size
            ));
        }
        // SAFETY: a fresh read-only shared mapping of a valid descriptor.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                HEADER_BYTES,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Existing::Taken("it exists and cannot be mapped".into());
        }
        let h = p.cast::<SegHeader>();
        // SAFETY: the mapping holds the header.
        let (magic, snap) = unsafe { ((*h).magic.load(Ordering::Acquire), Snapshot::read(h)) };
        // SAFETY: we mapped exactly this range.
        unsafe { libc::munmap(p, HEADER_BYTES) };
        if magic != MAGIC {
            return Existing::Taken(
                "it exists and is not an endpoint, or its creator is still building it".into(),
            );
        }
        if pid_alive(snap.owner_pid) {
            Existing::Taken(format!(
                "it is the live endpoint of pid {} (rank {} of {}): two ranks under one job name",
                snap.owner_pid, snap.rank, snap.size
            ))
        } else {
            Existing::Stale
        }
    })();
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
    verdict
}

/// Whether the endpoint segment `name` (without the leading `/`) belongs
/// to this user and its owner has died; `false` for anything that is not
/// an initialized endpoint.
pub fn is_stale(name: &str) -> bool {
    matches!(existing(&format!("/{name}")), Existing::Stale)
}

fn map(fd: i32, len: usize) -> Option<*mut u8> {
    // SAFETY: a fresh shared mapping of a valid descriptor; no existing
    // memory is affected.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p.cast::<u8>())
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: we mapped exactly this range; views into it do not outlive
        // the segment (the `queue` contract).
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// Whether process `pid` is alive (exists and is not a zombie); pid 0
/// counts as alive.
pub use symmetry_locks::platform::proc::alive as pid_alive;
