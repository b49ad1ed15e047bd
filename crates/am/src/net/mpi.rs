//! Active Messages over MPI (rsmpi on the system's MPI library).
//!
//! [`Mpi::init`] initialises MPI in a process started by `mpiexec`;
//! [`Mpi::job`] turns the MPI world into a [`Job`]: its rank and size, a
//! name that rank 0 draws and broadcasts, and a host map. An endpoint
//! joined with that job uses the LC98 queues for ranks on its host and
//! this module's [`Wire`] for the others.
//!
//! * **Hosts.** Ranks that MPI puts in one shared-memory communicator
//!   (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`) share a host.
//!   [`ENV_HOSTS`]`=N` splits each real host's ranks into N emulated hosts
//!   (consecutive blocks), so the cross-host path can be tested on one
//!   machine. [`Transport`] picks shared memory within hosts
//!   (`hierarchical`, the default), the wire between every pair of ranks
//!   (`mpi`), or shared memory only (`shm`, one host).
//! * **Messages.** One MPI message per Active Message on a private
//!   duplicate of `MPI_COMM_WORLD`, tag 1 for requests and 2 for replies,
//!   bytes laid out as in [`crate::net`]; bulk data up to 16 KiB in all
//!   travels in the same message (one receive delivers header, words and
//!   data, so a handler's bulk slice is the receive buffer). A message
//!   up to 256 bytes (every request and reply without bulk data) is sent
//!   with a blocking `MPI_Send` from a reused buffer, which returns once
//!   MPI has copied it (eager: it never waits for the receiver to post a
//!   receive; if MPI's buffers towards that rank are full it waits inside
//!   MPI, which meanwhile keeps taking in what arrives); a longer one is
//!   `MPI_Isend` from a buffer the wire owns until `MPI_Test` reports it
//!   finished. Receives are kept posted (4, for any source and tag, in a
//!   ring): a look at the wire is one `MPI_Test` of the oldest, which MPI
//!   matches to the oldest arriving message, so per sender the order is
//!   MPI's non-overtaking order, and a message lands in its buffer
//!   without a probe and a copy. The receive a message completed is
//!   posted again at the start of the next look, not at once: after the
//!   handler has run and sent its reply, so the repost is not on the
//!   round trip's critical path (three stay posted meanwhile). A look
//!   delivers at most one message: a second `MPI_Test` after a delivery
//!   would, almost always, find nothing and cost a pass of MPI's progress
//!   engine before the caller sees its reply. A longer message is
//!   announced on that communicator (tags 3 and 4, its length) and sent
//!   whole on a second duplicate; the receiver takes it from there when
//!   it meets the announcement, so it keeps its place in the sender's
//!   order.
//! * **Threads.** MPI is initialised with `MPI_THREAD_SERIALIZED`: one
//!   endpoint per process, used by one thread at a time (an `Endpoint` is
//!   `&mut` for every call, which guarantees it).
//! * **Failures.** MPI's errors are fatal by default; a rank that dies
//!   makes `mpiexec` end the job, naming the rank. No wait here outlives
//!   that: closing waits at most the job's timeout for sends in flight.

use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mpi::environment::Universe;
use mpi::ffi;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{AsRaw, Communicator, CommunicatorCollectives, Root};

pub use mpi as rsmpi;

use super::{Kind, Net, Wire, Wiring};
use crate::error::AmError;
use crate::job::Job;

/// Environment variable: split each host's ranks into this many emulated
/// hosts (consecutive blocks of ranks).
pub const ENV_HOSTS: &str = "SYMMETRY_AM_HOSTS";
/// Environment variable: the transport, `hierarchical` (default), `mpi`
/// or `shm`.
pub const ENV_TRANSPORT: &str = "SYMMETRY_AM_TRANSPORT";

/// Messages up to this long (header, words and bulk data) are sent with
/// a blocking `MPI_Send` from a reused buffer: far below every MPI
/// library's eager limit, so the call returns once MPI has copied the
/// bytes (it never waits for the receiver to post a receive), and it
/// leaves no request to allocate, test and free. A request with all its
/// words is 72 bytes.
const SHORT: usize = 256;
/// Sends in flight before `in_flight` tests them for completion.
const RETIRE_AT: usize = 32;
/// Bytes of each posted receive: a message up to this long (header, words
/// and bulk data) travels as one MPI message; a longer one is announced
/// and its bytes follow on the second communicator.
const INLINE: usize = 16 * 1024;
/// Receives kept posted (each holds [`INLINE`] bytes). A few absorb a
/// short burst; more would lengthen the list of wildcard receives that
/// MPI searches for every arriving message, this process's own MPI
/// traffic included (a message that finds none waits in MPI's unexpected
/// queue and is matched by the next receive posted).
const POSTED: usize = 4;
const TAG_REQUEST: c_int = 1;
const TAG_REPLY: c_int = 2;
const TAG_REQUEST_LARGE: c_int = 3;
const TAG_REPLY_LARGE: c_int = 4;
/// Tag of payloads on the second communicator.
const TAG_PAYLOAD: c_int = 0;
const NAME: &str = "MPI";

/// How the ranks of an MPI job reach one another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Shared memory between the ranks of a host, MPI between hosts.
    Hierarchical,
    /// MPI between every pair of ranks, even on one host.
    Mpi,
    /// Shared memory only: every rank must be on one host.
    Shm,
}

impl Transport {
    /// The names accepted by [`Transport::from_name`], in order.
    pub const NAMES: [&'static str; 3] = ["hierarchical", "mpi", "shm"];

    /// The transport called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "hierarchical" => Transport::Hierarchical,
            "mpi" => Transport::Mpi,
            "shm" => Transport::Shm,
            _ => return None,
        })
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Hierarchical => "hierarchical",
            Transport::Mpi => "mpi",
            Transport::Shm => "shm",
        }
    }
}

/// MPI, initialised for this process. Drop it (which finalises MPI) only
/// after every endpoint of its jobs is dropped.
pub struct Mpi {
    world: SimpleCommunicator,
    // Last: dropping it calls MPI_Finalize.
    _universe: Universe,
}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mpi")
            .field("rank", &self.world.rank())
            .field("size", &self.world.size())
            .finish()
    }
}

/// Whether this process looks started by an MPI launcher (Hydra's and
/// Open MPI's environment).
pub fn launched() -> bool {
    ["PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

fn config(detail: impl Into<String>) -> AmError {
    AmError::Config {
        detail: detail.into(),
    }
}

fn failed(call: &str, code: c_int) -> AmError {
    AmError::Transport {
        wire: NAME,
        detail: format!("{call} returned error {code}"),
    }
}

impl Mpi {
    /// Initialises MPI (`MPI_THREAD_SERIALIZED`). Errors if MPI is already
    /// initialised in this process or cannot give that thread level.
    pub fn init() -> Result<Self, AmError> {
        let Some((universe, level)) = mpi::initialize_with_threading(mpi::Threading::Serialized)
        else {
            return Err(config("MPI is already initialised in this process"));
        };
        if level < mpi::Threading::Serialized {
            return Err(config(format!(
                "the MPI library offers thread level {level:?}; symmetry-am needs Serialized"
            )));
        }
        let world = universe.world();
        Ok(Mpi {
            world,
            _universe: universe,
        })
    }

    /// Ends every process of the job (`MPI_Abort`) with exit status
    /// `code`: what a rank that failed does, since its peers may be
    /// waiting for its messages.
    pub fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }

    /// `MPI_COMM_WORLD`, for MPI traffic of the program's own (the
    /// endpoints use a private duplicate, so it never mixes with theirs).
    pub fn world(&self) -> &SimpleCommunicator {
        &self.world
    }

    /// This process's rank in `MPI_COMM_WORLD`.
    pub fn rank(&self) -> u32 {
        self.world.rank() as u32
    }

    /// The number of processes in `MPI_COMM_WORLD`.
    pub fn size(&self) -> u32 {
        self.world.size() as u32
    }

    /// The job of every rank of `MPI_COMM_WORLD` with the transport and
    /// emulated hosts that [`ENV_TRANSPORT`] and [`ENV_HOSTS`] ask for.
    /// Collective: every rank calls it.
    pub fn job_from_env(&self) -> Result<Job, AmError> {
        let transport = match std::env::var(ENV_TRANSPORT) {
            Err(_) => Transport::Hierarchical,
            Ok(v) => Transport::from_name(&v).ok_or_else(|| {
                config(format!(
                    "{ENV_TRANSPORT}={v:?} (accepted: {})",
                    Transport::NAMES.join(", ")
                ))
            })?,
        };
        let split = match std::env::var(ENV_HOSTS) {
            Err(_) => 1,
            Ok(v) => v.parse::<u32>().ok().filter(|&n| n >= 1).ok_or_else(|| {
                config(format!("{ENV_HOSTS}={v:?} is not a number of hosts >= 1"))
            })?,
        };
        self.job(transport, split)
    }

    /// The job of every rank of `MPI_COMM_WORLD`: ranks share a host as
    /// MPI says, each host's ranks split into `split` emulated hosts, and
    /// `transport` between them. Collective: every rank calls it with the
    /// same arguments.
    pub fn job(&self, transport: Transport, split: u32) -> Result<Job, AmError> {
        let (rank, size) = (self.rank(), self.size());
        // Collectives first, on every rank, so that an error below is
        // reported by every rank alike rather than leaving some waiting.
        let mut name = [0u8; 64];
        if rank == 0 {
            let n = Job::new_name();
            name[..n.len()].copy_from_slice(n.as_bytes());
        }
        self.world.process_at_rank(0).broadcast_into(&mut name[..]);
        let node = self.world.split_shared(rank as c_int);
        let mut leader = rank;
        node.process_at_rank(0).broadcast_into(&mut leader);
        let (node_rank, node_size) = (node.rank() as u32, node.size() as u32);
        let mut real = vec![0u32; size as usize];
        self.world.all_gather_into(&leader, &mut real[..]);

        if size as usize > crate::MAX_RANKS {
            return Err(config(format!(
                "{size} MPI ranks (accepted: at most {})",
                crate::MAX_RANKS
            )));
        }
        let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        let name = String::from_utf8_lossy(&name[..len]).into_owned();
        let emulated = (node_rank * split.min(node_size)) / node_size.max(1);
        let mut hosts = vec![0u32; size as usize];
        self.world.all_gather_into(
            &(leader * crate::MAX_RANKS as u32 + emulated),
            &mut hosts[..],
        );
        let net = match transport {
            Transport::Hierarchical => Some(hosts),
            Transport::Mpi => Some((0..size).collect()),
            Transport::Shm => {
                if real.iter().any(|&h| h != real[0]) {
                    return Err(config(
                        "the shm transport needs every rank on one host; these ranks span several",
                    ));
                }
                None
            }
        };
        Ok(Job {
            name,
            rank,
            size,
            timeout: Job::DEFAULT_TIMEOUT,
            net: net.map(|hosts| {
                Net::new(
                    hosts,
                    Arc::new(MpiWiring {
                        comm: self.world.as_raw(),
                        connected: AtomicBool::new(false),
                    }),
                )
            }),
        })
    }
}

/// Connects the ranks of an MPI job (one wire per process).
struct MpiWiring {
    comm: ffi::MPI_Comm,
    connected: AtomicBool,
}

// SAFETY: an MPI communicator handle is a plain value naming a
// process-wide object; MPI is initialised with MPI_THREAD_SERIALIZED, and
// the handle is only used by `connect`, which runs once (checked).
unsafe impl Send for MpiWiring {}
// SAFETY: as for Send; `&self` gives no access but `connect`.
unsafe impl Sync for MpiWiring {}

impl Wiring for MpiWiring {
    fn name(&self) -> &'static str {
        NAME
    }

    fn connect(&self) -> Result<Box<dyn Wire>, AmError> {
        // Relaxed: only the once-ness matters.
        if self.connected.swap(true, Ordering::Relaxed) {
            return Err(config(
                "one endpoint per MPI process: this job's wire is already connected",
            ));
        }
        let dup = |what: &str| -> Result<ffi::MPI_Comm, AmError> {
            let mut comm: ffi::MPI_Comm = self.comm;
            // SAFETY: `self.comm` is MPI_COMM_WORLD of an initialised MPI;
            // `comm` is written by the call. Collective: every rank
            // connects, in the same order.
            let rc = unsafe { ffi::MPI_Comm_dup(self.comm, &mut comm) };
            if rc != 0 {
                return Err(failed(what, rc));
            }
            Ok(comm)
        };
        let comm = dup("MPI_Comm_dup (messages)")?;
        let large = dup("MPI_Comm_dup (large payloads)")?;
        let mut wire = MpiWire {
            comm,
            large,
            sends: VecDeque::new(),
            spare: Vec::new(),
            short: Vec::with_capacity(SHORT),
            // SAFETY: constant handle.
            reqs: [unsafe { ffi::RSMPI_REQUEST_NULL }; POSTED],
            bufs: Default::default(),
            head: 0,
            // Every slot, posted in ring order just below.
            idle: POSTED,
            stash: VecDeque::new(),
        };
        wire.repost()?;
        Ok(Box::new(wire))
    }
}

/// The bytes of the message a completed receive or probe `status`
/// describes.
fn byte_count(status: &ffi::MPI_Status) -> Result<c_int, AmError> {
    let mut count: c_int = 0;
    // SAFETY: `status` was filled by MPI for a matched message; `count` is
    // written by the call.
    let rc = unsafe { ffi::MPI_Get_count(status, ffi::RSMPI_UINT8_T, &mut count) };
    if rc != 0 || count < 0 {
        return Err(failed("MPI_Get_count", rc));
    }
    Ok(count)
}

/// One rank's MPI wire: two private communicators, its sends in flight
/// and its posted receives.
///
/// Invariants: the receive slots form a ring. Slots `head`, `head + 1`,
/// ... (mod [`POSTED`]) hold active receives, in the order they were
/// posted (so MPI matches arriving messages to them `head` first), except
/// the last `idle` of that order (the slots just before `head`), whose
/// messages were delivered and which are posted again, oldest first, at
/// the next look. The buffers of `sends` and of active receive slots are
/// owned here and neither read nor written by Rust while their requests
/// are active.
struct MpiWire {
    /// Messages (tags [`TAG_REQUEST`], [`TAG_REPLY`]) and announcements
    /// of large ones ([`TAG_REQUEST_LARGE`], [`TAG_REPLY_LARGE`]).
    comm: ffi::MPI_Comm,
    /// The payloads of announced messages, in the order announced.
    large: ffi::MPI_Comm,
    /// Sends in flight, oldest first, with the buffers MPI reads.
    sends: VecDeque<(ffi::MPI_Request, Vec<u8>)>,
    /// Buffers of finished sends, for reuse.
    spare: Vec<Vec<u8>>,
    /// Where a short message is assembled for `MPI_Send` (reused; never
    /// zeroed or reallocated on the send path).
    short: Vec<u8>,
    /// The receive slots' requests (for any source and tag).
    reqs: [ffi::MPI_Request; POSTED],
    /// The receive slots' buffers: while active, empty with capacity for
    /// [`INLINE`] bytes, which MPI writes the matched message into.
    bufs: [Vec<u8>; POSTED],
    /// The slot of the oldest active receive.
    head: usize,
    /// Slots delivered and not yet posted again (those just before
    /// `head`).
    idle: usize,
    /// Messages received while the caller wanted only the other kind,
    /// oldest first: `(source, kind, bytes)`.
    stash: VecDeque<(u32, Kind, Vec<u8>)>,
}

// SAFETY: the handles are plain values; the wire is used through `&mut`
// by one thread at a time (MPI_THREAD_SERIALIZED), and the buffers of
// sends and receives in flight are owned here, so moving the wire moves
// nothing MPI points into (a `Vec`'s heap buffer does not move with it).
unsafe impl Send for MpiWire {}

impl MpiWire {
    /// Retires finished sends from the front; how many remain.
    fn progress(&mut self) -> usize {
        while let Some((req, _)) = self.sends.front_mut() {
            let mut done: c_int = 0;
            // SAFETY: `req` is an active request of ours; MPI_Test frees
            // it and sets it to MPI_REQUEST_NULL when done.
            let rc = unsafe { ffi::MPI_Test(req, &mut done, ffi::RSMPI_STATUS_IGNORE) };
            if rc != 0 || done == 0 {
                break;
            }
            if let Some((_, buf)) = self.sends.pop_front()
                && self.spare.len() < 64
            {
                self.spare.push(buf);
            }
        }
        self.sends.len()
    }

    /// `MPI_Isend` of `buf` (which the wire keeps until the send is done).
    fn isend(
        &mut self,
        buf: Vec<u8>,
        dest: u32,
        tag: c_int,
        comm: ffi::MPI_Comm,
    ) -> Result<(), AmError> {
        let count = c_int::try_from(buf.len())
            .map_err(|_| config(format!("a {}-byte message is too long for MPI", buf.len())))?;
        // SAFETY: RSMPI_REQUEST_NULL is a constant handle.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: `buf` stays alive and unmodified in `self.sends` until
        // MPI_Test reports the send finished (or, at close or drop, is
        // leaked); the datatype and count describe exactly its bytes.
        let rc = unsafe {
            ffi::MPI_Isend(
                buf.as_ptr().cast(),
                count,
                ffi::RSMPI_UINT8_T,
                dest as c_int,
                tag,
                comm,
                &mut req,
            )
        };
        if rc != 0 {
            return Err(failed("MPI_Isend", rc));
        }
        self.sends.push_back((req, buf));
        Ok(())
    }

    /// Posts the receive of slot `i` (any source, any tag) into its
    /// buffer's spare capacity (at least [`INLINE`] bytes; never zeroed:
    /// MPI writes the bytes it delivers, and only those become the
    /// vector's contents).
    fn post(&mut self, i: usize) -> Result<(), AmError> {
        let buf = &mut self.bufs[i];
        buf.clear();
        buf.reserve(INLINE);
        // SAFETY: `buf` has capacity for INLINE bytes from its (empty)
        // start, and stays, with length 0 and unread, in `self.bufs[i]`
        // while the receive is active (taken out only after MPI_Test
        // reports it complete, or after it is cancelled and waited for at
        // close; leaked by drop otherwise). `self.reqs[i]` is inactive.
        let rc = unsafe {
            ffi::MPI_Irecv(
                buf.as_mut_ptr().cast(),
                INLINE as c_int,
                ffi::RSMPI_UINT8_T,
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
                self.comm,
                &mut self.reqs[i],
            )
        };
        if rc != 0 {
            return Err(failed("MPI_Irecv", rc));
        }
        Ok(())
    }

    /// Posts the idle slots again, oldest first, so that the order of
    /// posting stays the ring's order from `head`.
    #[inline]
    fn repost(&mut self) -> Result<(), AmError> {
        while self.idle > 0 {
            let i = (self.head + POSTED - self.idle) % POSTED;
            self.post(i)?;
            self.idle -= 1;
        }
        Ok(())
    }

    /// One look at the wire: the oldest message that has arrived, into
    /// `buf`, with its source and kind, or `None`. Tests only the oldest
    /// posted receive: MPI matches each arriving message to the oldest
    /// posted receive, so that one holds the oldest message.
    fn next(&mut self, buf: &mut Vec<u8>) -> Result<Option<(u32, Kind)>, AmError> {
        self.repost()?;
        let i = self.head;
        let mut done: c_int = 0;
        let mut status = std::mem::MaybeUninit::<ffi::MPI_Status>::zeroed();
        // SAFETY: slot `head` holds an active receive of ours (the ring
        // has no idle slot after `repost`); MPI_Test frees it and fills
        // `status` when it is complete.
        let rc = unsafe { ffi::MPI_Test(&mut self.reqs[i], &mut done, status.as_mut_ptr()) };
        if rc != 0 {
            return Err(failed("MPI_Test", rc));
        }
        if done == 0 {
            return Ok(None);
        }
        // SAFETY: the receive completed, so MPI wrote the status.
        let status = unsafe { status.assume_init() };
        // The slot is done with: it is posted again (with the caller's
        // old buffer, or this one) at the start of the next look.
        self.head = (i + 1) % POSTED;
        self.idle += 1;
        let mut got = std::mem::take(&mut self.bufs[i]);
        let count = byte_count(&status).and_then(|n| {
            if n <= INLINE as c_int {
                Ok(n)
            } else {
                Err(AmError::Transport {
                    wire: NAME,
                    detail: format!("MPI reported {n} bytes in a {INLINE}-byte receive"),
                })
            }
        });
        let count = match count {
            Ok(n) => n,
            Err(e) => {
                // The buffer may hold part of a message: never read, never
                // reused (the slot gets a new one when it is posted).
                std::mem::forget(got);
                return Err(e);
            }
        };
        // SAFETY: the receive completed, so MPI wrote `count` (at most
        // INLINE, the capacity it was given) bytes from the start of the
        // buffer, and no longer touches it.
        unsafe { got.set_len(count as usize) };
        let src = status.MPI_SOURCE as u32;
        let (kind, large) = match status.MPI_TAG {
            TAG_REQUEST => (Kind::Request, false),
            TAG_REPLY => (Kind::Reply, false),
            TAG_REQUEST_LARGE => (Kind::Request, true),
            TAG_REPLY_LARGE => (Kind::Reply, true),
            tag => {
                self.bufs[i] = got;
                return Err(AmError::Garbage {
                    src,
                    detail: format!("MPI tag {tag}"),
                });
            }
        };
        // The caller's old buffer becomes the slot's next receive.
        self.bufs[i] = std::mem::replace(buf, got);
        if large {
            let announced: [u8; 8] = buf[..].try_into().map_err(|_| AmError::Garbage {
                src,
                detail: format!("a {count}-byte announcement of a large message (8 bytes)"),
            })?;
            self.recv_large(src, u64::from_le_bytes(announced), buf)?;
        }
        Ok(Some((src, kind)))
    }

    /// Receives the payload of a large message that `src` announced with
    /// length `len` (it sent the payload right after the announcement, so
    /// it has been sent or is in flight: the wait is for the transfer).
    #[cold]
    fn recv_large(&mut self, src: u32, len: u64, buf: &mut Vec<u8>) -> Result<(), AmError> {
        // SAFETY: constant handle.
        let mut msg = unsafe { ffi::RSMPI_MESSAGE_NULL };
        let mut status = std::mem::MaybeUninit::<ffi::MPI_Status>::zeroed();
        // The size comes from MPI's own status, not from the
        // announcement: a buffer is never sized by what a peer claims.
        // SAFETY: out-pointers to locals; `self.large` is our live
        // communicator.
        let rc = unsafe {
            ffi::MPI_Mprobe(
                src as c_int,
                TAG_PAYLOAD,
                self.large,
                &mut msg,
                status.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(failed("MPI_Mprobe", rc));
        }
        // SAFETY: MPI_Mprobe returned with a matched message.
        let mut status = unsafe { status.assume_init() };
        let count = byte_count(&status)?;
        buf.clear();
        buf.resize(count as usize, 0);
        // SAFETY: `buf` holds `count` bytes, the matched message's size.
        let rc = unsafe {
            ffi::MPI_Mrecv(
                buf.as_mut_ptr().cast(),
                count,
                ffi::RSMPI_UINT8_T,
                &mut msg,
                &mut status,
            )
        };
        if rc != 0 {
            return Err(failed("MPI_Mrecv", rc));
        }
        if count as u64 != len {
            return Err(AmError::Garbage {
                src,
                detail: format!("a large message announced as {len} bytes came with {count}"),
            });
        }
        Ok(())
    }
}

impl Wire for MpiWire {
    fn send(&mut self, dest: u32, kind: Kind, parts: [&[u8]; 3]) -> Result<(), AmError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let tag = match kind {
            Kind::Request => TAG_REQUEST,
            Kind::Reply => TAG_REPLY,
        };
        if len <= SHORT {
            self.short.clear();
            for p in parts {
                self.short.extend_from_slice(p);
            }
            // SAFETY: `self.short` holds the message's `len` bytes and is
            // not touched during the call; a blocking send is done with
            // the buffer when it returns.
            let rc = unsafe {
                ffi::MPI_Send(
                    self.short.as_ptr().cast(),
                    len as c_int,
                    ffi::RSMPI_UINT8_T,
                    dest as c_int,
                    tag,
                    self.comm,
                )
            };
            return if rc == 0 {
                Ok(())
            } else {
                Err(failed("MPI_Send", rc))
            };
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        if len <= INLINE {
            for p in parts {
                buf.extend_from_slice(p);
            }
            return self.isend(buf, dest, tag, self.comm);
        }
        // Too long for a posted receive: announce it (the receiver then
        // takes the payload from the second communicator, where MPI keeps
        // this sender's payloads in the order of their announcements).
        buf.extend_from_slice(&(len as u64).to_le_bytes());
        let tag = match kind {
            Kind::Request => TAG_REQUEST_LARGE,
            Kind::Reply => TAG_REPLY_LARGE,
        };
        self.isend(buf, dest, tag, self.comm)?;
        let mut payload = Vec::with_capacity(len);
        for p in parts {
            payload.extend_from_slice(p);
        }
        self.isend(payload, dest, TAG_PAYLOAD, self.large)
    }

    fn recv(
        &mut self,
        only: Option<Kind>,
        buf: &mut Vec<u8>,
    ) -> Result<Option<(u32, Kind)>, AmError> {
        let wanted = |k: Kind| only.is_none_or(|o| o == k);
        if let Some(i) = self.stash.iter().position(|&(_, k, _)| wanted(k))
            && let Some((src, kind, bytes)) = self.stash.remove(i)
        {
            *buf = bytes;
            return Ok(Some((src, kind)));
        }
        match self.next(buf)? {
            None => Ok(None),
            Some((src, kind)) if wanted(kind) => Ok(Some((src, kind))),
            Some((src, kind)) => {
                // Kept for a later call that wants this kind, in arrival
                // order; this call has had its look.
                self.stash.push_back((src, kind, std::mem::take(buf)));
                Ok(None)
            }
        }
    }

    fn in_flight(&mut self) -> usize {
        // Every MPI call runs MPI's progress engine (hundreds of ns with
        // UCX): retire finished sends only once some have gathered, not
        // before every send.
        if self.sends.len() >= RETIRE_AT {
            self.progress();
        }
        self.sends.len()
    }

    fn close(&mut self, timeout: Duration) -> Result<(), AmError> {
        let start = Instant::now();
        while self.progress() > 0 {
            if start.elapsed() > timeout {
                let n = self.sends.len();
                // MPI may still read these buffers: never free them.
                for (_, buf) in self.sends.drain(..) {
                    std::mem::forget(buf);
                }
                return Err(AmError::Timeout {
                    what: format!("{n} MPI sends to finish at close"),
                });
            }
            std::thread::yield_now();
        }
        // The posted receives: cancelled (a message already matched to
        // one completes it instead, and is dropped with the wire, as
        // every message that arrives after close is).
        while self.idle < POSTED {
            let i = self.head;
            // SAFETY: slot `head` is active while `idle < POSTED`; after
            // MPI_Cancel, MPI_Wait returns once it is cancelled or
            // complete, and MPI no longer writes its buffer.
            let rc = unsafe {
                let rc = ffi::MPI_Cancel(&mut self.reqs[i]);
                if rc == 0 {
                    ffi::MPI_Wait(&mut self.reqs[i], ffi::RSMPI_STATUS_IGNORE)
                } else {
                    rc
                }
            };
            if rc != 0 {
                // Drop must not free the buffer MPI may still write.
                return Err(failed("MPI_Cancel", rc));
            }
            self.head = (i + 1) % POSTED;
            self.idle += 1;
        }
        for comm in [&mut self.comm, &mut self.large] {
            // SAFETY: our duplicates, with no send or receive active.
            let rc = unsafe { ffi::MPI_Comm_free(comm) };
            if rc != 0 {
                return Err(failed("MPI_Comm_free", rc));
            }
        }
        Ok(())
    }
}

impl Drop for MpiWire {
    fn drop(&mut self) {
        // Sends and receives still active (close was not called, or
        // failed): MPI may use their buffers until MPI_Finalize.
        for (_, buf) in self.sends.drain(..) {
            std::mem::forget(buf);
        }
        for k in 0..POSTED - self.idle {
            std::mem::forget(std::mem::take(&mut self.bufs[(self.head + k) % POSTED]));
        }
    }
}
