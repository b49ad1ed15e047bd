//! Bulk transfers ([`bulk()`]).
//!
//! LC98 §4.1's peak bulk bandwidth: two ranks stream `request_bulk`
//! messages of one size, the receiver copying each block out of the queue
//! and checking its sequence number (see [`bulk`]). Its baselines, of the
//! same shape and size, are in `copy.rs` ([`memcpy_run`],
//! [`cross_core_run`]).
//!
//! [`memcpy_run`]: super::memcpy_run
//! [`cross_core_run`]: super::cross_core_run

use std::sync::Barrier;
use std::time::{Duration, Instant};

use symmetry_am::{AmError, Claim, Config, Endpoint, Msg, Token, job};

use super::{cpus, idle, pin_to_core, root_cause, run_rank};
use crate::kernels::am_job::unknown_algo;

/// Untimed bytes streamed (or copied) before each timed size.
pub const BULK_WARMUP_BYTES: u64 = 1 << 20;

/// Handler ids of the bulk benchmark: a block of the stream, and the
/// receiver's reply when a phase has arrived.
const H_BULK: u16 = 0;
const H_BULK_DONE: u16 = 1;

/// One measured bulk stream or baseline copy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BulkOut {
    /// From the first send (copy) to the reply that the last block arrived.
    pub elapsed: Duration,
    /// Bytes that arrived.
    pub bytes: u64,
    /// Whether every block arrived with the sequence number it was sent
    /// with, and all of them arrived.
    pub verified: bool,
}

impl BulkOut {
    /// Bandwidth in MB/s (10^6 bytes per second, as LC98).
    pub fn mb_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-12) / 1e6
    }
}

/// Block stride and count of the bulk ring of a default [`Config`] (the
/// shape the baselines' buffers copy).
pub fn bulk_ring_shape() -> (usize, usize) {
    let c = Config::default();
    (c.bulk_bytes as usize, c.bulk_blocks as usize)
}

/// Checks a message size of the bulk kernels: at least the 8 bytes of the
/// sequence number each block carries, at most one bulk block.
pub(super) fn check_bulk_size(size: usize) -> Result<(), String> {
    let (stride, _) = bulk_ring_shape();
    if (8..=stride).contains(&size) {
        Ok(())
    } else {
        Err(format!(
            "bulk: message size {size} B (accepted: 8..={stride} B, one bulk block)"
        ))
    }
}

/// Handler state of both bulk ranks.
struct BulkState {
    /// Receiver: the destination of the copy (one block).
    buf: Vec<u8>,
    /// Receiver: bytes of the current phase so far, and bad blocks.
    bytes: u64,
    errors: u64,
    /// Receiver: phases completed.
    phases: u64,
    /// Sender: replies received, and the last one's words.
    acks: u64,
    acked: [u64; 2],
}

/// Receiver: copy the block out, check its sequence number (`args[0]`),
/// and reply when the phase's bytes (`args[1]`) have arrived.
fn on_bulk<C: Claim>(t: &mut Token<'_, C, BulkState>, m: &Msg<'_>) -> Result<(), AmError> {
    let s = t.state();
    let n = m.bulk.len().min(s.buf.len());
    s.buf[..n].copy_from_slice(&m.bulk[..n]);
    let seq = s
        .buf
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map_or(!0, u64::from_le_bytes);
    s.errors += u64::from(seq != m.args[0] || n != m.bulk.len());
    s.bytes += n as u64;
    if s.bytes >= m.args[1] {
        let words = [s.bytes, s.errors];
        (s.bytes, s.errors) = (0, 0);
        s.phases += 1;
        t.reply(H_BULK_DONE, &words)
    } else {
        Ok(())
    }
}

/// Sender: a phase has arrived.
fn on_bulk_done<C: Claim>(t: &mut Token<'_, C, BulkState>, m: &Msg<'_>) -> Result<(), AmError> {
    let s = t.state();
    s.acks += 1;
    s.acked = [m.args[0], m.args[1]];
    Ok(())
}

/// LC98 §4.1's bulk stream with claim algorithm `alg`: two ranks of a
/// thread-mode job, pinned to two CPUs when there are two. For each of
/// `sizes`, rank 0 streams an untimed warm-up of [`BULK_WARMUP_BYTES`] and
/// then `total` bytes of `request_bulk` messages of that size to rank 1,
/// which copies every block out of the queue into its own buffer (one
/// block long, so the destination stays in cache), checks the sequence
/// number the sender wrote into its first word, and replies when the
/// phase's bytes have arrived; rank 0 times from its first send to that
/// reply. Rank 1 polls in a tight loop, as LC98's microbenchmarks do, and
/// yields only without a CPU of its own. One [`BulkOut`] per size.
pub fn bulk(alg: &str, sizes: &[usize], total: u64) -> Result<Vec<BulkOut>, String> {
    for &s in sizes {
        check_bulk_size(s)?;
    }
    if total == 0 {
        return Err("bulk: total must be at least 1 byte".into());
    }
    macro_rules! by_name {
        ($($name:literal => $ty:ty;)*) => {
            match alg {
                $($name => bulk_with::<$ty>(sizes, total),)*
                _ => Err(unknown_algo(alg)),
            }
        };
    }
    symmetry_am::for_each_claim!(by_name)
}

fn bulk_with<C: Claim>(sizes: &[usize], total: u64) -> Result<Vec<BulkOut>, String> {
    let pin = cpus() >= 2;
    let polite = !pin;
    let (stride, _) = bulk_ring_shape();
    let gate = Barrier::new(2);
    let results = job::run_threads(2, |job| {
        if pin {
            pin_to_core(job.rank as usize);
        }
        let state = BulkState {
            buf: vec![0; stride],
            bytes: 0,
            errors: 0,
            phases: 0,
            acks: 0,
            acked: [0; 2],
        };
        run_rank::<C, _, _>(&job, &gate, state, |ep| {
            bulk_rank(ep, job.rank, sizes, total, polite)
        })
    });
    let mut outs = None;
    let mut errors = Vec::new();
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Ok(o) if rank == 0 => outs = Some(o),
            Ok(_) => {}
            Err(e) => errors.push((rank, e)),
        }
    }
    root_cause("bulk", C::NAME, errors)?;
    outs.ok_or_else(|| format!("bulk {}: rank 0 returned no result", C::NAME))
}

/// The body of a bulk rank (rank 0 the sender, rank 1 the receiver).
fn bulk_rank<C: Claim>(
    ep: &mut Endpoint<C, BulkState>,
    rank: u32,
    sizes: &[usize],
    total: u64,
    polite: bool,
) -> Result<Vec<BulkOut>, AmError> {
    ep.register(H_BULK, on_bulk::<C>)?;
    ep.register(H_BULK_DONE, on_bulk_done::<C>)?;
    ep.barrier()?;
    let mut outs = Vec::new();
    if rank == 1 {
        let phases = 2 * sizes.len() as u64;
        let mut empty = 0u64;
        while ep.state().phases < phases {
            if ep.poll()? > 0 {
                empty = 0;
            } else {
                idle(ep, &mut empty, polite)?;
            }
        }
        return Ok(outs);
    }
    let mut src = vec![0xa5u8; ep.state().buf.len()];
    for &size in sizes {
        for (bytes, timed) in [(BULK_WARMUP_BYTES, false), (total, true)] {
            let n = bytes.div_ceil(size as u64);
            let want = n * size as u64;
            let acks = ep.state().acks;
            let start = Instant::now();
            for k in 0..n {
                src[..8].copy_from_slice(&k.to_le_bytes());
                ep.request_bulk(1, H_BULK, &[k, want], &src[..size])?;
            }
            let mut empty = 0u64;
            while ep.state().acks == acks {
                if ep.poll()? == 0 {
                    idle(ep, &mut empty, polite)?;
                }
            }
            let elapsed = start.elapsed();
            let [got, errors] = ep.state().acked;
            if timed {
                outs.push(BulkOut {
                    elapsed,
                    bytes: got,
                    verified: got == want && errors == 0,
                });
            }
        }
    }
    Ok(outs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_algorithm_streams_verified_bulk_data() {
        for alg in symmetry_am::claim::NAMES {
            let outs = bulk(alg, &[256, 8192], 1 << 18).unwrap();
            assert_eq!(outs.len(), 2, "{alg}");
            assert!(
                outs.iter().all(|o| o.verified && o.bytes == 1 << 18),
                "{alg}: {outs:?}"
            );
        }
    }

    #[test]
    fn bulk_sizes_are_checked() {
        let (stride, _) = bulk_ring_shape();
        assert!(bulk("stamp", &[4], 1024).unwrap_err().contains("accepted"));
        assert!(bulk("stamp", &[stride + 1], 1024).is_err());
        assert!(bulk("nope", &[256], 1024).unwrap_err().contains("accepted"));
    }
}
