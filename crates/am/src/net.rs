//! Transports beyond shared memory: Active Messages between hosts.
//!
//! LC98's setting is a cluster of SMPs: shared-memory queues inside a box,
//! a network between boxes. A job whose [`Job::net`](crate::Job::net) is
//! set places each rank on a host; an [`Endpoint`](crate::Endpoint) keeps
//! the LC98 queues for the peers on its own host and sends to every other
//! peer over a [`Wire`]: one message per request or reply, carrying its
//! words and its bulk data together. The API and the meaning of handlers,
//! replies, bulk data, `barrier` and `allreduce` do not change; what
//! differs is written here.
//!
//! * **Three transports**, chosen by the host map: every rank on one host
//!   (shared memory only, `Job::net` unset), every rank its own host (wire
//!   only), and hierarchical (shared memory within a host, the wire
//!   between hosts). [`Net::hosts`] is the map.
//! * **Order.** A wire delivers one sender's messages in the order they
//!   were sent (MPI's non-overtaking rule), requests and replies together;
//!   so does every shared-memory claim algorithm that promises sender FIFO.
//!   Messages from different senders, or from the two transports, are not
//!   ordered with respect to each other, as in shared memory.
//! * **Sends never wait for the receiver.** A wire send hands its message
//!   to the wire and returns; at most [`MAX_IN_FLIGHT`] sends may be in
//!   flight, and past that a sender polls (running handlers) until the
//!   wire has finished some, as it would on a full shared-memory queue.
//! * **Failures.** A remote host that fails is the wire's to report: MPI
//!   ends the whole job (its default error handler, and `mpiexec` killing
//!   the other ranks) with a message naming the rank. A remote peer's
//!   close is not visible; `finish` (a barrier) is how SPMD programs end.
//!
//! The MPI wire is the module `net::mpi`, built with the feature `mpi`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::AmError;
use crate::layout::MAX_ARGS;

/// Most wire sends an endpoint keeps in flight before it waits (polling).
pub const MAX_IN_FLIGHT: usize = 1024;

/// Which of a receiver's two streams a wire message belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A request (its handler may reply).
    Request,
    /// A reply (its handler cannot send).
    Reply,
}

/// A point-to-point message transport of one rank (one per endpoint).
///
/// Implementations deliver every message sent to a live receiver exactly
/// once and, per sender, in the order sent. They never block a send on the
/// receiver's progress (a send that cannot complete at once stays in
/// flight, counted by [`Wire::in_flight`]).
pub trait Wire: Send {
    /// Sends the concatenation of `parts` to `dest` as one message.
    fn send(&mut self, dest: u32, kind: Kind, parts: [&[u8]; 3]) -> Result<(), AmError>;

    /// Looks at the transport once and moves the oldest message that has
    /// arrived (of `only` kind, or of either) into `buf`, replacing its
    /// contents: `Some((source, kind))`, or `None` if this look found
    /// none. One call is one look, however many messages are waiting (a
    /// look can cost a pass of the transport's progress engine, which a
    /// caller that just got its message should not pay again); call again
    /// for the next.
    fn recv(
        &mut self,
        only: Option<Kind>,
        buf: &mut Vec<u8>,
    ) -> Result<Option<(u32, Kind)>, AmError>;

    /// The number of sends not yet finished (after making progress on
    /// them).
    fn in_flight(&mut self) -> usize;

    /// Finishes the sends in flight, waiting at most `timeout` (their
    /// receivers must be polling), and releases the transport.
    fn close(&mut self, timeout: Duration) -> Result<(), AmError>;
}

/// What makes the [`Wire`] of each rank of a job.
pub trait Wiring: Send + Sync {
    /// The transport's name (for reports and errors).
    fn name(&self) -> &'static str;

    /// This rank's wire. Called once, by [`Endpoint::join`](crate::Endpoint::join);
    /// it may be collective (every rank of the job calls it at join).
    fn connect(&self) -> Result<Box<dyn Wire>, AmError>;
}

/// How the ranks of a job are spread over hosts, and the transport
/// between hosts.
#[derive(Clone)]
pub struct Net {
    hosts: Arc<[u32]>,
    wiring: Arc<dyn Wiring>,
}

impl Net {
    /// A job of `hosts.len()` ranks where rank `r` runs on host
    /// `hosts[r]` (any numbering), connected by `wiring`.
    pub fn new(hosts: Vec<u32>, wiring: Arc<dyn Wiring>) -> Self {
        Net {
            hosts: hosts.into(),
            wiring,
        }
    }

    /// The host of every rank, in rank order.
    pub fn hosts(&self) -> &[u32] {
        &self.hosts
    }

    /// Whether ranks `a` and `b` share a host (so shared memory).
    pub fn same_host(&self, a: u32, b: u32) -> bool {
        self.hosts.get(a as usize) == self.hosts.get(b as usize)
    }

    /// The number of distinct hosts.
    pub fn host_count(&self) -> usize {
        let mut h = self.hosts.to_vec();
        h.sort_unstable();
        h.dedup();
        h.len()
    }

    /// The transport between hosts.
    pub fn wiring(&self) -> &dyn Wiring {
        &*self.wiring
    }
}

impl PartialEq for Net {
    fn eq(&self, other: &Self) -> bool {
        self.hosts == other.hosts && Arc::ptr_eq(&self.wiring, &other.wiring)
    }
}

impl Eq for Net {}

impl fmt::Debug for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Net")
            .field("wiring", &self.wiring.name())
            .field("hosts", &self.hosts)
            .finish()
    }
}

/// Bytes of a wire message's header: handler id (u16), word count (u8),
/// format version (u8), bulk length (u32), little-endian.
pub(crate) const HEADER: usize = 8;
const FORMAT: u8 = 1;

/// The header of a message with `nargs` words and `bulk_len` bulk bytes.
pub(crate) fn header(handler: u16, nargs: usize, bulk_len: usize) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..2].copy_from_slice(&handler.to_le_bytes());
    h[2] = nargs as u8;
    h[3] = FORMAT;
    h[4..].copy_from_slice(&(bulk_len as u32).to_le_bytes());
    h
}

/// A message read back from wire bytes.
#[derive(Debug)]
pub(crate) struct Decoded<'a> {
    pub(crate) handler: u16,
    pub(crate) args: [u64; MAX_ARGS],
    pub(crate) nargs: usize,
    pub(crate) bulk: &'a [u8],
}

/// Decodes a message; the error says what no honest sender writes.
pub(crate) fn decode(bytes: &[u8]) -> Result<Decoded<'_>, String> {
    if bytes.len() < HEADER {
        return Err(format!(
            "a {}-byte message (the header is {HEADER})",
            bytes.len()
        ));
    }
    let handler = u16::from_le_bytes([bytes[0], bytes[1]]);
    let nargs = bytes[2] as usize;
    if bytes[3] != FORMAT {
        return Err(format!("message format {} (this is {FORMAT})", bytes[3]));
    }
    if nargs > MAX_ARGS {
        return Err(format!("{nargs} words (at most {MAX_ARGS})"));
    }
    let bulk_len = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    let words = HEADER + 8 * nargs;
    if bytes.len() != words + bulk_len {
        return Err(format!(
            "{} bytes for {nargs} words and {bulk_len} bulk bytes",
            bytes.len()
        ));
    }
    let mut args = [0u64; MAX_ARGS];
    for (a, w) in args.iter_mut().zip(bytes[HEADER..words].chunks_exact(8)) {
        *a = u64::from_le_bytes(w.try_into().expect("chunks of 8"));
    }
    Ok(Decoded {
        handler,
        args,
        nargs,
        bulk: &bytes[words..],
    })
}

/// The words of a message as little-endian bytes (into `out`).
pub(crate) fn words(args: &[u64], out: &mut [u8; 8 * MAX_ARGS]) -> usize {
    for (w, a) in out.chunks_exact_mut(8).zip(args) {
        w.copy_from_slice(&a.to_le_bytes());
    }
    8 * args.len()
}

#[cfg(feature = "mpi")]
pub mod mpi;

#[cfg(test)]
mod tests {
    use super::*;

    fn message(handler: u16, args: &[u64], bulk: &[u8]) -> Vec<u8> {
        let mut w = [0u8; 8 * MAX_ARGS];
        let n = words(args, &mut w);
        let mut m = header(handler, args.len(), bulk.len()).to_vec();
        m.extend_from_slice(&w[..n]);
        m.extend_from_slice(bulk);
        m
    }

    #[test]
    fn messages_round_trip() {
        let m = message(7, &[1, u64::MAX, 3], b"bulk");
        let d = decode(&m).unwrap();
        assert_eq!((d.handler, d.nargs), (7, 3));
        assert_eq!(&d.args[..3], &[1, u64::MAX, 3]);
        assert_eq!(d.bulk, b"bulk");
        let empty = message(0, &[], &[]);
        let e = decode(&empty).unwrap();
        assert_eq!((e.nargs, e.bulk.len()), (0, 0));
    }

    #[test]
    fn malformed_messages_are_refused_not_trusted() {
        let good = message(1, &[5, 6], b"xyz");
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err(), "{cut} bytes");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
        let mut words = good.clone();
        words[2] = (MAX_ARGS + 1) as u8;
        assert!(decode(&words).unwrap_err().contains("words"));
        let mut format = good.clone();
        format[3] = 9;
        assert!(decode(&format).unwrap_err().contains("format"));
        let mut bulk = good;
        bulk[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&bulk).is_err());
    }
}
