//! Errors of the Active Messages layer: each says what was wrong and, where
//! it applies, what is accepted.

use std::fmt;
use std::io;

/// Everything that can go wrong in `symmetry-am`.
#[derive(Debug)]
#[non_exhaustive]
pub enum AmError {
    /// A system call failed.
    Io {
        /// What was being done (`shm_open /symmetry-am.x.0`, ...).
        what: String,
        /// The OS error.
        source: io::Error,
    },
    /// The segment does not start with the endpoint magic number: not an
    /// endpoint (or not yet one after the wait for its creator).
    BadMagic {
        /// Segment name.
        name: String,
        /// The word found.
        found: u64,
    },
    /// The segment was made by another version of this layout.
    BadVersion {
        /// Segment name.
        name: String,
        /// Version found.
        found: u32,
        /// Version this library speaks.
        expected: u32,
    },
    /// The segment's size disagrees with its header (truncated or foreign).
    BadSize {
        /// Segment name.
        name: String,
        /// What is wrong, with both sizes.
        detail: String,
    },
    /// The endpoint was created for another claim algorithm.
    WrongAlgorithm {
        /// Segment name.
        name: String,
        /// Algorithm in the segment.
        found: String,
        /// Algorithm of the opener.
        expected: &'static str,
    },
    /// A rank outside `0..size`.
    NoSuchRank {
        /// The rank asked for.
        rank: u32,
        /// Job size.
        size: u32,
    },
    /// A handler id outside the user range.
    HandlerOutOfRange {
        /// The id.
        id: u16,
        /// First id that is not accepted.
        limit: u16,
    },
    /// A message named a handler that was never registered at the receiver.
    NoHandler {
        /// The id.
        id: u16,
        /// Sender's rank.
        src: u32,
    },
    /// More than [`crate::layout::MAX_ARGS`] words.
    TooManyArgs {
        /// Words given.
        given: usize,
    },
    /// Bulk data larger than one bulk block.
    BulkTooLarge {
        /// Bytes given.
        given: usize,
        /// Bytes accepted (the block size).
        max: usize,
    },
    /// The peer's process is gone.
    PeerDead {
        /// Its rank.
        rank: u32,
        /// Its pid.
        pid: u32,
    },
    /// The peer closed its endpoint.
    PeerClosed {
        /// Its rank.
        rank: u32,
    },
    /// Waited too long (for a peer's segment to appear, ...).
    Timeout {
        /// What was awaited.
        what: String,
    },
    /// `reply` from a reply handler, or twice from one request handler.
    BadReply {
        /// Why.
        why: &'static str,
    },
    /// A bad endpoint configuration or job description.
    Config {
        /// What is wrong and what is accepted.
        detail: String,
    },
    /// A segment that this process will not trust: another user's, a mode
    /// other than 0600, or a header that contradicts the job (rank, size,
    /// queue sizes).
    Untrusted {
        /// Segment name.
        name: String,
        /// What is wrong.
        detail: String,
    },
    /// The name of a segment to create exists already and is not a stale
    /// segment of this user (a live endpoint, another user's object, or
    /// something that is not an endpoint).
    NameTaken {
        /// Segment name.
        name: String,
        /// What is there.
        detail: String,
    },
    /// A message in one of this endpoint's queues was malformed (a handler
    /// id, word count, bulk block or length no honest sender writes). It
    /// was dropped; the endpoint goes on, and polling again continues with
    /// the next message.
    Garbage {
        /// The rank the packet claims to come from (as written by the
        /// sender, so itself unverified).
        src: u32,
        /// What was wrong.
        detail: String,
    },
    /// A queue cannot make progress and the claim algorithm cannot repair
    /// it (a spin lock held by a process that died, for the algorithms
    /// that record no holder). Reported after a bounded wait instead of a
    /// hang.
    Wedged {
        /// The rank whose queue is wedged.
        rank: u32,
        /// What was seen.
        detail: String,
    },
    /// The transport between hosts (a [`crate::net::Wire`]) failed.
    Transport {
        /// The transport's name.
        wire: &'static str,
        /// What failed.
        detail: String,
    },
}

/// The magic number [`AmError::BadMagic`] expects.
const ENDPOINT_MAGIC: u64 = crate::layout::MAGIC;

impl AmError {
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn io(what: impl Into<String>) -> Self {
        AmError::Io {
            what: what.into(),
            source: io::Error::last_os_error(),
        }
    }
}

impl fmt::Display for AmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AmError::Io { what, source } => write!(f, "{what}: {source}"),
            AmError::BadMagic { name, found } => write!(
                f,
                "{name} is not a symmetry-am endpoint (magic {found:#018x}, expected {:#018x})",
                ENDPOINT_MAGIC
            ),
            AmError::BadVersion {
                name,
                found,
                expected,
            } => write!(
                f,
                "{name} has layout version {found}, this library reads version {expected}"
            ),
            AmError::BadSize { name, detail } => write!(f, "{name}: {detail}"),
            AmError::WrongAlgorithm {
                name,
                found,
                expected,
            } => write!(
                f,
                "{name} was created for claim algorithm '{found}', opened as '{expected}' (all ranks must use one algorithm)"
            ),
            AmError::NoSuchRank { rank, size } => {
                write!(
                    f,
                    "rank {rank} does not exist (the job has ranks 0..{size})"
                )
            }
            AmError::HandlerOutOfRange { id, limit } => {
                write!(
                    f,
                    "handler id {id} is out of range (user handlers are 0..{limit})"
                )
            }
            AmError::NoHandler { id, src } => {
                write!(
                    f,
                    "a message from rank {src} names handler {id}, which is not registered"
                )
            }
            AmError::TooManyArgs { given } => write!(
                f,
                "{given} words given, a short message carries at most {}",
                crate::layout::MAX_ARGS
            ),
            AmError::BulkTooLarge { given, max } => {
                write!(
                    f,
                    "bulk data of {given} bytes exceeds the {max}-byte bulk block"
                )
            }
            AmError::PeerDead { rank, pid } => write!(f, "rank {rank} (pid {pid}) has died"),
            AmError::PeerClosed { rank } => write!(f, "rank {rank} has closed its endpoint"),
            AmError::Timeout { what } => write!(f, "timed out waiting for {what}"),
            AmError::BadReply { why } => write!(f, "bad reply: {why}"),
            AmError::Config { detail } => write!(f, "{detail}"),
            AmError::Transport { wire, detail } => write!(f, "{wire}: {detail}"),
            AmError::Untrusted { name, detail } => {
                write!(f, "refusing segment {name}: {detail}")
            }
            AmError::NameTaken { name, detail } => {
                write!(f, "cannot create segment {name}: {detail}")
            }
            AmError::Garbage { src, detail } => write!(
                f,
                "dropped a malformed message claiming to come from rank {src}: {detail}"
            ),
            AmError::Wedged { rank, detail } => {
                write!(f, "the queue of rank {rank} is wedged: {detail}")
            }
        }
    }
}

impl std::error::Error for AmError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AmError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
