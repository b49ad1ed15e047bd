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
//!   bytes laid out as in [`crate::net`]; bulk data travels in the same
//!   message (one matched receive delivers header, words and data, so a
//!   handler's bulk slice is the receive buffer). Sends are `MPI_Isend`
//!   from a buffer the wire owns until `MPI_Test` reports it finished;
//!   receives are `MPI_Improbe` + `MPI_Mrecv` from any source, so per
//!   sender the order is MPI's non-overtaking order.
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

/// Sends in flight before `in_flight` tests them for completion.
const RETIRE_AT: usize = 32;
const TAG_REQUEST: c_int = 1;
const TAG_REPLY: c_int = 2;
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
            timeout: Duration::from_secs(30),
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
        let mut comm: ffi::MPI_Comm = self.comm;
        // SAFETY: `self.comm` is MPI_COMM_WORLD of an initialised MPI;
        // `comm` is written by the call.
        let rc = unsafe { ffi::MPI_Comm_dup(self.comm, &mut comm) };
        if rc != 0 {
            return Err(failed("MPI_Comm_dup", rc));
        }
        Ok(Box::new(MpiWire {
            comm,
            sends: VecDeque::new(),
            spare: Vec::new(),
        }))
    }
}

/// One rank's MPI wire: a private communicator and its sends in flight.
struct MpiWire {
    comm: ffi::MPI_Comm,
    /// Sends in flight, oldest first, with the buffers MPI reads.
    sends: VecDeque<(ffi::MPI_Request, Vec<u8>)>,
    /// Buffers of finished sends, for reuse.
    spare: Vec<Vec<u8>>,
}

// SAFETY: the handles are plain values; the wire is used through `&mut`
// by one thread at a time (MPI_THREAD_SERIALIZED), and the buffers of
// sends in flight are owned here, so moving the wire moves nothing MPI
// points into (a `Vec`'s heap buffer does not move with it).
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
}

impl Wire for MpiWire {
    fn send(&mut self, dest: u32, kind: Kind, parts: [&[u8]; 3]) -> Result<(), AmError> {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        for p in parts {
            buf.extend_from_slice(p);
        }
        let tag = match kind {
            Kind::Request => TAG_REQUEST,
            Kind::Reply => TAG_REPLY,
        };
        // SAFETY: RSMPI_REQUEST_NULL is a constant handle.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: `buf` stays alive and unmodified in `self.sends` until
        // MPI_Test reports the send finished (or, at close, is leaked);
        // the datatype and count describe exactly its bytes.
        let rc = unsafe {
            ffi::MPI_Isend(
                buf.as_ptr().cast(),
                buf.len() as c_int,
                ffi::RSMPI_UINT8_T,
                dest as c_int,
                tag,
                self.comm,
                &mut req,
            )
        };
        if rc != 0 {
            return Err(failed("MPI_Isend", rc));
        }
        self.sends.push_back((req, buf));
        Ok(())
    }

    fn recv(
        &mut self,
        only: Option<Kind>,
        buf: &mut Vec<u8>,
    ) -> Result<Option<(u32, Kind)>, AmError> {
        let tag = match only {
            // SAFETY: a constant of the MPI library.
            None => unsafe { ffi::RSMPI_ANY_TAG },
            Some(Kind::Request) => TAG_REQUEST,
            Some(Kind::Reply) => TAG_REPLY,
        };
        let mut flag: c_int = 0;
        // SAFETY: constant handle.
        let mut msg = unsafe { ffi::RSMPI_MESSAGE_NULL };
        let mut status = std::mem::MaybeUninit::<ffi::MPI_Status>::zeroed();
        // SAFETY: out-pointers to locals; `self.comm` is our live
        // communicator.
        let rc = unsafe {
            ffi::MPI_Improbe(
                ffi::RSMPI_ANY_SOURCE,
                tag,
                self.comm,
                &mut flag,
                &mut msg,
                status.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(failed("MPI_Improbe", rc));
        }
        if flag == 0 {
            return Ok(None);
        }
        // SAFETY: MPI_Improbe set the status (flag is true).
        let mut status = unsafe { status.assume_init() };
        let mut count: c_int = 0;
        // SAFETY: a status from MPI_Improbe; `count` is written.
        let rc = unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) };
        if rc != 0 || count < 0 {
            return Err(failed("MPI_Get_count", rc));
        }
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
        let kind = if status.MPI_TAG == TAG_REPLY {
            Kind::Reply
        } else {
            Kind::Request
        };
        Ok(Some((status.MPI_SOURCE as u32, kind)))
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
        // SAFETY: our duplicate, with no send in flight.
        let rc = unsafe { ffi::MPI_Comm_free(&mut self.comm) };
        if rc != 0 {
            return Err(failed("MPI_Comm_free", rc));
        }
        Ok(())
    }
}

impl Drop for MpiWire {
    fn drop(&mut self) {
        // Sends still in flight (close was not called, or timed out):
        // MPI may read their buffers until MPI_Finalize.
        for (_, buf) in self.sends.drain(..) {
            std::mem::forget(buf);
        }
    }
}
