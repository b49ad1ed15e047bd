//! The body of one rank of the `am-clumps` measurement (feature `mpi`):
//! Active Messages over the job's transport beside MPI's own ping-pong,
//! between pairs of ranks, run under `mpiexec` as `symmetry am clumps`.
//!
//! For each pair `(a, b)` in turn (every other rank sleeps, polling every
//! 200 us, so that on a small machine it takes no processor from the pair):
//!
//! 1. **Round trip**: `a` requests, `b`'s handler replies, `a` spins on
//!    `poll` until the reply runs; blocks of `rounds` round trips, the
//!    mean of each block kept.
//! 2. **MPI's own ping-pong**: `MPI_Send`/`MPI_Recv` of one 8-byte word
//!    between `a` and `b` on `MPI_COMM_WORLD`, the same blocks, each run
//!    right after the round-trip block of the same index (1 and 2
//!    alternate), so that block `i` of each was measured in the same
//!    state of the machine: a virtual machine's vCPU placement can move
//!    between two phases of a run and change both by a factor of three,
//!    and the ratio of the two is taken block by block.
//! 3. **One-way rate**: `a` sends `burst` short requests; `b` replies to
//!    the last; time per message from the first send to that reply.
//! 4. **Bulk bandwidth**: the same with `bulk` requests of one bulk block
//!    (the endpoint's block size) each.
//!
//! Rank `a` (always rank 0) writes one JSON object per pair.

use std::time::Instant;

use serde_json::{Value, json};
use symmetry_am::claim::Stamp;
use symmetry_am::net::mpi::Mpi;
use symmetry_am::net::mpi::rsmpi::traits::{Communicator, Destination, Source};
use symmetry_am::{AmError, Config, Endpoint, Job, Msg, Token};

/// What one run measures (the same on every rank).
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Round trips per block.
    pub rounds: u32,
    /// Blocks (of round trips, and of each rate).
    pub blocks: u32,
    /// Short messages per one-way burst.
    pub burst: u32,
    /// Bulk messages per bandwidth burst.
    pub bulk: u32,
    /// The endpoint's bulk block size (bytes): the size of each bulk
    /// message, and the largest of the order check's.
    pub bulk_bytes: u32,
}

/// Messages of the order check that opens each pair.
const CHECKS: u64 = 64;

#[derive(Debug, Default)]
struct St {
    pongs: u64,
    got: u64,
    bulk_got: u64,
    bulk_bytes: u64,
    acks: u64,
    go: u64,
    phase: u64,
    checked: u64,
}

const H_PING: u16 = 0;
const H_PONG: u16 = 1;
const H_COUNT: u16 = 2;
const H_ACK: u16 = 3;
const H_BULK: u16 = 4;
const H_GO: u16 = 5;
const H_PHASE: u16 = 6;
const H_CHECK: u16 = 7;

type T<'a> = Token<'a, Stamp, St>;

fn ping(t: &mut T<'_>, _: &Msg<'_>) -> Result<(), AmError> {
    t.reply(H_PONG, &[])
}
fn pong(t: &mut T<'_>, _: &Msg<'_>) -> Result<(), AmError> {
    t.state().pongs += 1;
    Ok(())
}
fn count(t: &mut T<'_>, m: &Msg<'_>) -> Result<(), AmError> {
    t.state().got += 1;
    if t.state().got == m.args[0] {
        t.reply(H_ACK, &[])?;
    }
    Ok(())
}
fn ack(t: &mut T<'_>, _: &Msg<'_>) -> Result<(), AmError> {
    t.state().acks += 1;
    Ok(())
}
fn bulk(t: &mut T<'_>, m: &Msg<'_>) -> Result<(), AmError> {
    let s = t.state();
    s.bulk_got += 1;
    s.bulk_bytes += m.bulk.len() as u64;
    if t.state().bulk_got == m.args[0] {
        t.reply(H_ACK, &[])?;
    }
    Ok(())
}
/// The `i`-th message of the order check: its bulk length (whole blocks,
/// empty, odd sizes, one byte short of a block, so that over a wire both
/// short and long messages of one sender interleave) and its bytes.
fn check_message(i: u64, block: usize) -> Vec<u8> {
    let len = match i % 4 {
        0 => block,
        1 => 0,
        2 => (i as usize * 977) % block,
        _ => block - 1,
    };
    (0..len).map(|j| (i as usize + j * 31) as u8).collect()
}

/// Checks that the order check's messages arrive in order and whole; the
/// last is acknowledged.
fn check(t: &mut T<'_>, m: &Msg<'_>) -> Result<(), AmError> {
    let (seq, block) = (m.args[0], m.args[1] as usize);
    let want = t.state().checked;
    if seq % CHECKS != want % CHECKS || m.bulk != check_message(seq, block) {
        return Err(AmError::Config {
            detail: format!(
                "order check: message {seq} ({} bytes) arrived where message {} was due, or \
                 its bytes differ",
                m.bulk.len(),
                want % CHECKS
            ),
        });
    }
    t.state().checked += 1;
    if seq % CHECKS == CHECKS - 1 {
        t.reply(H_ACK, &[])?;
    }
    Ok(())
}
fn go(t: &mut T<'_>, m: &Msg<'_>) -> Result<(), AmError> {
    t.state().go = m.args[0];
    Ok(())
}
fn phase(t: &mut T<'_>, m: &Msg<'_>) -> Result<(), AmError> {
    t.state().phase = m.args[0];
    Ok(())
}

/// The pairs measured: rank 0 with rank 1, and with the first rank on
/// another host if there is one.
pub fn pairs(job: &Job) -> Vec<(u32, u32, bool)> {
    let same = |r: u32| job.net.as_ref().is_none_or(|n| n.same_host(0, r));
    let mut p = Vec::new();
    if job.size > 1 {
        p.push((0, 1, same(1)));
    }
    if let Some(r) = (2..job.size).find(|&r| !same(r))
        && same(1)
    {
        p.push((0, r, false));
    }
    p
}

/// The `go` word that starts MPI block `blk` of pair `k` (increasing over
/// the whole run).
fn go_value(k: u64, blk: u32, plan: Plan) -> u64 {
    k * (u64::from(plan.blocks) + 1) + u64::from(blk) + 1
}

/// Polls until `done` holds (generic, so the timed loops pay no call
/// through a pointer).
#[inline]
fn spin(ep: &mut Endpoint<Stamp, St>, done: impl Fn(&St) -> bool) -> Result<(), AmError> {
    while !done(ep.state()) {
        ep.poll()?;
    }
    Ok(())
}

/// Runs this rank's part; rank 0 returns one JSON object per pair.
pub fn run(mpi: &Mpi, job: &Job, plan: Plan) -> Result<Vec<Value>, AmError> {
    let config = Config::default().with_bulk_bytes(plan.bulk_bytes);
    let mut ep = Endpoint::<Stamp, St>::join(job, &config, St::default())?;
    for (id, h) in [
        (H_PING, ping as symmetry_am::Handler<Stamp, St>),
        (H_PONG, pong),
        (H_COUNT, count),
        (H_ACK, ack),
        (H_BULK, bulk),
        (H_GO, go),
        (H_PHASE, phase),
        (H_CHECK, check),
    ] {
        ep.register(id, h)?;
    }
    let block = ep.config().bulk_bytes as usize;
    let data = vec![0x5au8; block];
    let mut out = Vec::new();
    for (k, &(a, b, same_host)) in pairs(job).iter().enumerate() {
        let k = k as u64;
        if job.rank == a {
            // The order check: one sender's messages of every size arrive
            // in order and whole over this pair's transport.
            let want = ep.state().acks + 1;
            for i in 0..CHECKS {
                let seq = k * CHECKS + i;
                let msg = check_message(seq, block);
                ep.request_bulk(b, H_CHECK, &[seq, block as u64], &msg)?;
            }
            spin(&mut ep, |s| s.acks >= want)?;
            // Round trips and MPI's ping-pong, block by block (one
            // warm-up block of each first). Before each MPI block, `b` is
            // told to leave its polling loop for MPI's receive.
            let peer = mpi.world().process_at_rank(b as i32);
            let mut word = [0u64; 1];
            let (mut rtt, mut mpi_rtt) = (Vec::new(), Vec::new());
            for blk in 0..=plan.blocks {
                let t0 = Instant::now();
                for _ in 0..plan.rounds {
                    let want = ep.state().pongs + 1;
                    ep.request(b, H_PING, &[])?;
                    spin(&mut ep, |s| s.pongs >= want)?;
                }
                let am = t0.elapsed();
                ep.request(b, H_GO, &[go_value(k, blk, plan)])?;
                let t0 = Instant::now();
                for i in 0..plan.rounds {
                    word[0] = u64::from(i);
                    peer.send(&word[..]);
                    peer.receive_into(&mut word[..]);
                }
                if blk > 0 {
                    rtt.push(am.as_nanos() as f64 / f64::from(plan.rounds));
                    mpi_rtt.push(t0.elapsed().as_nanos() as f64 / f64::from(plan.rounds));
                }
            }
            // One-way bursts of short messages, then of bulk blocks.
            let (mut oneway, mut bw) = (Vec::new(), Vec::new());
            let (mut sent, mut bulk_sent) = (0u64, 0u64);
            for _ in 0..plan.blocks {
                let want = ep.state().acks + 1;
                let t0 = Instant::now();
                sent += u64::from(plan.burst);
                for _ in 0..plan.burst {
                    ep.request(b, H_COUNT, &[sent])?;
                }
                spin(&mut ep, |s| s.acks >= want)?;
                oneway.push(t0.elapsed().as_nanos() as f64 / f64::from(plan.burst));
                let want = ep.state().acks + 1;
                let t0 = Instant::now();
                bulk_sent += u64::from(plan.bulk);
                for _ in 0..plan.bulk {
                    ep.request_bulk(b, H_BULK, &[bulk_sent], &data)?;
                }
                spin(&mut ep, |s| s.acks >= want)?;
                let secs = t0.elapsed().as_secs_f64();
                bw.push((f64::from(plan.bulk) * block as f64) / secs / 1e6);
            }
            for r in 0..job.size {
                if r != a {
                    ep.request(r, H_PHASE, &[k + 1])?;
                }
            }
            out.push(json!({
                "a": a, "b": b, "same_host": same_host,
                "rtt_ns": rtt, "oneway_ns": oneway, "bulk_mb_s": bw,
                "mpi_rtt_ns": mpi_rtt, "block_bytes": block,
            }));
        } else if job.rank == b {
            // Serve until told to do a block of MPI's ping-pong, that
            // block, and so on; then serve the rates until the next phase.
            let peer = mpi.world().process_at_rank(a as i32);
            let mut word = [0u64; 1];
            for blk in 0..=plan.blocks {
                let go = go_value(k, blk, plan);
                while ep.state().go < go {
                    ep.poll()?;
                }
                for _ in 0..plan.rounds {
                    peer.receive_into(&mut word[..]);
                    peer.send(&word[..]);
                }
            }
            while ep.state().phase <= k {
                ep.poll()?;
            }
        } else {
            while ep.state().phase <= k {
                if ep.poll()? == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
            }
        }
    }
    ep.finish()?;
    Ok(out)
}
