//! SAMPLE: sample sort of 32-bit keys (LC98 §4.3, Tables 3-4: "represents
//! applications that perform fine-grained, all-to-all communication").
//!
//! # Phases (Split-C style, bulk-synchronous)
//!
//! Each rank starts with [`SampleCfg::keys_per_rank`] seeded random `u32`
//! keys.
//!
//! 1. **Sample**: each rank picks [`SampleCfg::samples_per_rank`] keys at
//!    seeded random positions and sends them to rank 0 in short requests.
//! 2. **Splitters**: rank 0 sorts all `P * s` samples, takes the `P - 1`
//!    at positions `i * P * s / P` (`i = 1..P`) as splitters and sends them
//!    to every rank. Bucket `b` holds the keys in `[split[b-1], split[b])`.
//! 3. **Scatter**: each rank sends every key to its bucket's owner in short
//!    requests of up to [`KEYS_PER_MSG`] keys (two per word, eight words;
//!    a second handler id marks a request whose last word holds one key),
//!    keeps its own bucket's keys locally, then tells every rank how many
//!    keys it sent it and polls until all announced keys are in.
//! 4. **Local sort** of the bucket.
//!
//! The timed region is phases 1-4.
//!
//! # Verification (untimed)
//!
//! Each rank checks that its bucket is sorted and lies between its
//! splitters, sends its smallest key to rank `r - 1`, which checks that its
//! largest key is not above it, and all ranks check by all-reduce that the
//! number of keys, their sum and a multiset hash (sum of a mix of each
//! key) are the same before and after. The checksum folds the sorted keys
//! in order, per rank, and sums over the ranks: the same for every claim
//! algorithm, since the splitters and hence the buckets are a function of
//! the seed.

use symmetry_am::{AmError, Claim, Config, Endpoint, Job, Msg, ReduceOp, Token};

use super::common::{SplitMix64, Timed, all_ok, bad, mix, params};
use super::{AppOut, Size};

/// Keys per short request at most (two 32-bit keys per word, 8 words).
pub const KEYS_PER_MSG: usize = 2 * symmetry_am::MAX_ARGS;

/// Where a batch of keys goes at the receiver.
const SAMPLES: u16 = 0;
const SPLITTERS: u16 = 1;
const BUCKET: u16 = 2;
/// Handler ids: `H_KEYS + 2 * kind + odd`.
const H_KEYS: u16 = 20;
const H_DONE: u16 = 30;
const H_MIN: u16 = 31;

/// Parameters of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleCfg {
    /// Keys each rank starts with.
    pub keys_per_rank: usize,
    /// Samples each rank sends to rank 0.
    pub samples_per_rank: usize,
    /// Key seed.
    pub seed: u64,
}

impl SampleCfg {
    /// Quick: 16,384 keys per rank; Full: 8,388,608 keys per rank (LC98:
    /// 262,144; scaled up 32x so that the run takes about a second at two
    /// ranks on a 2-core machine).
    pub fn of(size: Size) -> Self {
        match size {
            Size::Quick => SampleCfg {
                keys_per_rank: 1 << 14,
                samples_per_rank: 64,
                seed: 0x5A_0001,
            },
            Size::Full => SampleCfg {
                keys_per_rank: 1 << 23,
                samples_per_rank: 1024,
                seed: 0x5A_0001,
            },
        }
    }
}

/// Handler state.
#[derive(Debug, Default)]
struct St {
    samples: Vec<u32>,
    splitters: Vec<u32>,
    bucket: Vec<u32>,
    /// Keys received into the bucket, keys announced, count messages.
    recv: u64,
    expect: u64,
    dones: u32,
    /// The next rank's smallest key (`Some(None)`: it has none).
    next_min: Option<Option<u32>>,
}

/// A batch of keys for `KIND`; `ODD`: the last word holds one key (high
/// half).
fn on_keys<C: Claim, const KIND: u16, const ODD: bool>(
    t: &mut Token<'_, C, St>,
    m: &Msg<'_>,
) -> Result<(), AmError> {
    let st = t.state();
    let to = match KIND {
        SAMPLES => &mut st.samples,
        SPLITTERS => &mut st.splitters,
        _ => &mut st.bucket,
    };
    let before = to.len();
    for &w in m.args {
        to.push((w >> 32) as u32);
        to.push(w as u32);
    }
    if ODD {
        if m.args.is_empty() {
            return Err(bad(format!(
                "sample: empty odd key batch from rank {}",
                m.src
            )));
        }
        to.pop();
    }
    let got = (to.len() - before) as u64;
    if KIND == BUCKET {
        st.recv += got;
    }
    Ok(())
}

fn on_done<C: Claim>(t: &mut Token<'_, C, St>, m: &Msg<'_>) -> Result<(), AmError> {
    let &[count] = m.args else {
        return Err(bad(format!("sample: malformed count from rank {}", m.src)));
    };
    let st = t.state();
    st.expect += count;
    st.dones += 1;
    Ok(())
}

fn on_min<C: Claim>(t: &mut Token<'_, C, St>, m: &Msg<'_>) -> Result<(), AmError> {
    let &[has, min] = m.args else {
        return Err(bad(format!(
            "sample: malformed minimum from rank {}",
            m.src
        )));
    };
    t.state().next_min = Some((has != 0).then_some(min as u32));
    Ok(())
}

/// Sends `keys` to `dest`'s list `kind`, [`KEYS_PER_MSG`] per request.
fn send_keys<C: Claim>(
    ep: &mut Endpoint<C, St>,
    dest: u32,
    kind: u16,
    keys: &[u32],
) -> Result<(), AmError> {
    let mut words = [0u64; symmetry_am::MAX_ARGS];
    for batch in keys.chunks(KEYS_PER_MSG) {
        let mut n = 0;
        for pair in batch.chunks(2) {
            let lo = pair.get(1).copied().unwrap_or(0);
            words[n] = u64::from(pair[0]) << 32 | u64::from(lo);
            n += 1;
        }
        let odd = u16::from(batch.len() % 2 == 1);
        ep.request(dest, H_KEYS + 2 * kind + odd, &words[..n])?;
    }
    Ok(())
}

/// One rank of SAMPLE on the input `cfg`.
pub fn run<C: Claim>(cfg: &SampleCfg, job: &Job) -> Result<AppOut, AmError> {
    let (r, p) = (job.rank as usize, job.size as usize);
    let (m, s) = (cfg.keys_per_rank, cfg.samples_per_rank);
    if s == 0 || s > m {
        return Err(bad(format!(
            "sample: {s} samples of {m} keys per rank (accepted: 1..=keys per rank)"
        )));
    }
    let mut g = SplitMix64::new(cfg.seed ^ mix(r as u64 + 1));
    let keys: Vec<u32> = (0..m).map(|_| (g.next_u64() >> 32) as u32).collect();
    let in_sum: u64 = keys.iter().map(|&k| u64::from(k)).sum();
    let in_hash = keys
        .iter()
        .fold(0u64, |h, &k| h.wrapping_add(mix(u64::from(k))));

    let mut ep = Endpoint::<C, St>::join(job, &Config::default(), St::default())?;
    ep.register(H_KEYS, on_keys::<C, SAMPLES, false>)?;
    ep.register(H_KEYS + 1, on_keys::<C, SAMPLES, true>)?;
    ep.register(H_KEYS + 2, on_keys::<C, SPLITTERS, false>)?;
    ep.register(H_KEYS + 3, on_keys::<C, SPLITTERS, true>)?;
    ep.register(H_KEYS + 4, on_keys::<C, BUCKET, false>)?;
    ep.register(H_KEYS + 5, on_keys::<C, BUCKET, true>)?;
    ep.register(H_DONE, on_done::<C>)?;
    ep.register(H_MIN, on_min::<C>)?;

    let timed = Timed::start(&mut ep)?;
    // 1. Samples to rank 0.
    let mine: Vec<u32> = (0..s)
        .map(|_| keys[(g.next_u64() % m as u64) as usize])
        .collect();
    if r == 0 {
        ep.state_mut().samples.extend_from_slice(&mine);
    } else {
        send_keys(&mut ep, 0, SAMPLES, &mine)?;
    }
    // 2. Splitters from rank 0.
    if r == 0 {
        ep.poll_until(|st| st.samples.len() >= s * p)?;
        let mut all = std::mem::take(&mut ep.state_mut().samples);
        all.sort_unstable();
        let split: Vec<u32> = (1..p).map(|i| all[i * all.len() / p]).collect();
        for d in 1..p {
            send_keys(&mut ep, d as u32, SPLITTERS, &split)?;
        }
        ep.state_mut().splitters = split;
    } else {
        ep.poll_until(|st| st.splitters.len() >= p - 1)?;
    }
    let split = ep.state().splitters.clone();
    if split.len() != p - 1 || !split.is_sorted() {
        return Err(bad(format!(
            "sample: rank {r} got {} splitters for {p} ranks (expected {}, sorted)",
            split.len(),
            p - 1
        )));
    }
    // 3. Scatter.
    let mut bufs: Vec<Vec<u32>> = vec![Vec::with_capacity(KEYS_PER_MSG); p];
    let mut sent = vec![0u64; p];
    for &k in &keys {
        let b = split.partition_point(|&x| x <= k);
        if b == r {
            ep.state_mut().bucket.push(k);
            continue;
        }
        let buf = &mut bufs[b];
        buf.push(k);
        if buf.len() == KEYS_PER_MSG {
            send_keys(&mut ep, b as u32, BUCKET, buf)?;
            sent[b] += KEYS_PER_MSG as u64;
            buf.clear();
        }
    }
    for (d, buf) in bufs.iter_mut().enumerate() {
        if !buf.is_empty() {
            send_keys(&mut ep, d as u32, BUCKET, buf)?;
            sent[d] += buf.len() as u64;
            buf.clear();
        }
    }
    for (d, &count) in sent.iter().enumerate() {
        if d != r {
            ep.request(d as u32, H_DONE, &[count])?;
        }
    }
    let others = (p - 1) as u32;
    ep.poll_until(|st| st.dones == others && st.recv == st.expect)?;
    // 4. Local sort.
    ep.state_mut().bucket.sort_unstable();
    let (elapsed, messages) = timed.stop(&mut ep)?;

    // Verification (untimed).
    let bucket = std::mem::take(&mut ep.state_mut().bucket);
    let sorted = bucket.is_sorted();
    let lo = if r == 0 { 0 } else { split[r - 1] };
    let in_range = bucket
        .iter()
        .all(|&k| k >= lo && (r + 1 == p || k < split[r]));
    if r > 0 {
        let first = bucket.first().copied();
        let msg = [u64::from(first.is_some()), u64::from(first.unwrap_or(0))];
        ep.request(r as u32 - 1, H_MIN, &msg)?;
    }
    let mut ordered = true;
    if r + 1 < p {
        ep.poll_until(|st| st.next_min.is_some())?;
        if let (Some(Some(next)), Some(&last)) = (ep.state().next_min, bucket.last()) {
            ordered = last <= next;
        }
    }
    let out_sum: u64 = bucket.iter().map(|&k| u64::from(k)).sum();
    let out_hash = bucket
        .iter()
        .fold(0u64, |h, &k| h.wrapping_add(mix(u64::from(k))));
    let mut same = true;
    for (a, b) in [
        (m as u64, bucket.len() as u64),
        (in_sum, out_sum),
        (in_hash, out_hash),
    ] {
        same &= ep.allreduce(a, ReduceOp::Sum)? == ep.allreduce(b, ReduceOp::Sum)?;
    }
    let verified = all_ok(&mut ep, sorted && in_range && ordered && same)?;
    let h = bucket
        .iter()
        .fold(mix(r as u64), |h, &k| mix(h ^ u64::from(k)));
    let checksum = ep.allreduce(h, ReduceOp::Sum)?;
    let largest = ep.allreduce(bucket.len() as u64, ReduceOp::Max)?;
    ep.finish()?;
    Ok(AppOut {
        elapsed,
        verified,
        checksum,
        messages,
        bulk_bytes: 0,
        params: params(&[
            ("keys_per_rank", m.to_string()),
            ("samples_per_rank", s.to_string()),
            ("keys_per_msg", KEYS_PER_MSG.to_string()),
            ("largest_bucket", largest.to_string()),
        ]),
    })
}
