//! 3-D FFT (LC98 §4.3, Tables 3-4: "typifies regular applications that rely
//! primarily on bulk communication. The communication pattern is
//! all-to-all, but is scheduled into many one-to-one phases").
//!
//! # Data and phases
//!
//! An `n x n x n` complex array `f[x][y][z]` (`n` a power of two, `P`
//! dividing `n`) is distributed by x-planes: rank `r` owns the slab
//! `x in r*b..(r+1)*b`, `b = n / P`, stored `[x - r*b][y][z]`.
//!
//! 1. **2-D FFTs** of the rank's `b` planes (along z, then along y).
//! 2. **Transpose** to y-slabs stored `[y - r*b][x][z]`: the block of
//!    rank `s` for rank `d` (`x` in `s`'s slab, `y` in `d`'s) is
//!    `b * b * n` elements. In phase `k = 1..P`, rank `r` sends its block
//!    for `(r + k) % P` in bulk messages of at most one bulk block (512
//!    elements of 16 bytes with the default 8 KiB blocks); the handler
//!    copies each run of `z` into place. The schedule is Brewer and
//!    Kuszmaul's: in every phase each rank sends to one rank and receives
//!    from one other, so no queue has more than one sender at a time
//!    unless ranks drift apart (there is no barrier between phases; every
//!    rank knows how many chunks it receives and polls until all are in).
//!    The rank's own block is copied locally.
//! 3. **1-D FFTs** along x, now entirely local (the columns of each
//!    y-plane, gathered eight at a time).
//!
//! The result `F[kx][ky][kz] = sum f[x][y][z] e^{-2 pi i (kx x + ky y + kz z) / n}`
//! lies in y-slabs: rank `r` holds `ky in r*b..(r+1)*b`, stored
//! `[ky - r*b][kx][kz]`. The timed region is phases 1-3.
//!
//! # Input and verification
//!
//! The input is seeded noise (each element a hash of its global index, so
//! any rank can regenerate any element) plus three plane waves
//! `a_j e^{+2 pi i k_j . x / n}`, whose transforms are spikes `n^3 a_j` at
//! `k_j`. Each rank checks, outside the timed region:
//!
//! * **a direct DFT** of the whole input at sampled frequencies in its own
//!   part of the output: every plane-wave spike and the DC term it holds,
//!   plus a few seeded random frequencies. Every rank knows every rank's
//!   sample frequencies, sums the direct DFT over its own slab of the
//!   (untransformed) input, and the partial sums are added in rank order;
//! * **Parseval**: `sum |F|^2 = n^3 sum |f|^2` over the whole array (the
//!   ranks' energies are gathered as `f64` bits and added in rank order).
//!
//! The checksum hashes the output's bits. The arithmetic of every line
//! transform is the same whatever the claim algorithm (and whatever `P`),
//! so the checksum is too.

use std::ops::{Add, Mul, Sub};

use symmetry_am::{AmError, Claim, Config, Endpoint, Job, Msg, ReduceOp, Token};

use super::common::{SplitMix64, Timed, all_ok, bad, hash2, mix, params, sum_f64, unit_f64};
use super::{AppOut, Size};

/// Handler id of a transpose chunk.
const H_CHUNK: u16 = 1;
/// Bytes of one element on the wire (two little-endian `f64`).
const ELEM_BYTES: usize = 16;
/// Plane waves in the input.
const WAVES: usize = 3;
/// Seeded random frequencies each rank checks by direct DFT.
const RANDOM_SAMPLES: usize = 2;

/// Parameters of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FftCfg {
    /// Side of the cube (a power of two; the number of ranks must divide it).
    pub n: usize,
    /// Input seed.
    pub seed: u64,
}

impl FftCfg {
    /// The inputs: Quick `32^3` (512 KiB), Full `256^3` (256 MiB, LC98
    /// Table 3's own input).
    pub fn of(size: Size) -> Self {
        match size {
            Size::Quick => FftCfg {
                n: 32,
                seed: 0xFF7_0001,
            },
            Size::Full => FftCfg {
                n: 256,
                seed: 0xFF7_0001,
            },
        }
    }
}

/// A complex number.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Cx {
    re: f64,
    im: f64,
}

impl Cx {
    const fn new(re: f64, im: f64) -> Self {
        Cx { re, im }
    }
    fn conj(self) -> Self {
        Cx::new(self.re, -self.im)
    }
    fn norm2(self) -> f64 {
        self.re * self.re + self.im * self.im
    }
}

impl Add for Cx {
    type Output = Cx;
    #[inline]
    fn add(self, o: Cx) -> Cx {
        Cx::new(self.re + o.re, self.im + o.im)
    }
}

impl Sub for Cx {
    type Output = Cx;
    #[inline]
    fn sub(self, o: Cx) -> Cx {
        Cx::new(self.re - o.re, self.im - o.im)
    }
}

impl Mul for Cx {
    type Output = Cx;
    #[inline]
    fn mul(self, o: Cx) -> Cx {
        Cx::new(
            self.re * o.re - self.im * o.im,
            self.re * o.im + self.im * o.re,
        )
    }
}

/// `w[j] = e^{-2 pi i j / n}` for `j in 0..n`.
fn roots(n: usize) -> Vec<Cx> {
    (0..n)
        .map(|j| {
            let (s, c) = (-2.0 * std::f64::consts::PI * j as f64 / n as f64).sin_cos();
            Cx::new(c, s)
        })
        .collect()
}

/// In-place iterative radix-2 forward FFT of `a` (length a power of two
/// dividing `w.len()`), with `w` from [`roots`] of the full size.
fn fft(a: &mut [Cx], w: &[Cx]) {
    let n = a.len();
    if n < 2 {
        return;
    }
    debug_assert!(n.is_power_of_two() && w.len().is_multiple_of(n));
    let shift = usize::BITS - n.trailing_zeros();
    for i in 0..n {
        let j = i.reverse_bits() >> shift;
        if j > i {
            a.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let half = len / 2;
        let step = w.len() / len;
        for block in a.chunks_exact_mut(len) {
            let (lo, hi) = block.split_at_mut(half);
            for (k, (u, v)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                let t = *v * w[k * step];
                *v = *u - t;
                *u = *u + t;
            }
        }
        len *= 2;
    }
}

/// The input: seeded noise plus plane waves.
#[derive(Debug)]
struct Input {
    n: usize,
    seed: u64,
    /// `(kx, ky, kz, amplitude)` of each plane wave.
    waves: Vec<([usize; 3], Cx)>,
    /// `e^{+2 pi i j / n}`.
    up: Vec<Cx>,
}

impl Input {
    fn new(cfg: &FftCfg, w: &[Cx]) -> Self {
        let n = cfg.n;
        let mut g = SplitMix64::new(cfg.seed ^ 0x5741_5645);
        let waves = (0..WAVES)
            .map(|j| {
                let k = [0; 3].map(|_| (g.next_u64() % n as u64) as usize);
                let amp = Cx::new(1.0 + j as f64, 0.5 * unit_f64(g.next_u64()));
                (k, amp)
            })
            .collect();
        Input {
            n,
            seed: cfg.seed,
            waves,
            up: w.iter().map(|c| c.conj()).collect(),
        }
    }

    /// `f[x][y][z]`.
    #[inline]
    fn at(&self, x: usize, y: usize, z: usize) -> Cx {
        let n = self.n;
        let gid = ((x * n + y) * n + z) as u64;
        let mut v = Cx::new(
            0.5 * unit_f64(hash2(self.seed, 2 * gid)),
            0.5 * unit_f64(hash2(self.seed, 2 * gid + 1)),
        );
        for (k, a) in &self.waves {
            v = v + *a * self.up[(k[0] * x + k[1] * y + k[2] * z) % n];
        }
        v
    }
}

/// Forward FFTs of every column of the `n x n` row-major `plane` (the
/// transforms along its first index), eight neighbouring columns at a time
/// so each gathered cache line is used whole.
fn fft_columns(plane: &mut [Cx], n: usize, w: &[Cx], scratch: &mut Vec<Cx>) {
    const GROUP: usize = 8;
    let g = GROUP.min(n);
    scratch.resize(g * n, Cx::default());
    for c0 in (0..n).step_by(g) {
        for row in 0..n {
            for j in 0..g {
                scratch[j * n + row] = plane[row * n + c0 + j];
            }
        }
        for col in scratch.chunks_exact_mut(n) {
            fft(col, w);
        }
        for row in 0..n {
            for j in 0..g {
                plane[row * n + c0 + j] = scratch[j * n + row];
            }
        }
    }
}

/// Handler state: the transposed slab being filled.
#[derive(Debug)]
struct St {
    n: usize,
    b: usize,
    /// `[y - r*b][x][z]`.
    out: Vec<Cx>,
    /// Chunks received.
    chunks: u64,
}

/// A transpose chunk: `args[0]` is the offset of its first element in the
/// sender's block, ordered `(x - s*b, y - d*b, z)`; runs of `z` land
/// contiguously in `[y - d*b][x][z]`.
fn on_chunk<C: Claim>(t: &mut Token<'_, C, St>, m: &Msg<'_>) -> Result<(), AmError> {
    let src = m.src as usize;
    let st = t.state();
    let (n, b) = (st.n, st.b);
    let block = b * b * n;
    let off = m.args.first().copied().unwrap_or(u64::MAX);
    let elems = m.bulk.len() / ELEM_BYTES;
    if !m.bulk.len().is_multiple_of(ELEM_BYTES)
        || off > block as u64
        || off as usize + elems > block
        || (src + 1) * b > n
    {
        return Err(bad(format!(
            "fft: malformed transpose chunk from rank {src} (offset {off}, {} bytes, block of {block} elements)",
            m.bulk.len()
        )));
    }
    let x0 = src * b;
    let mut k = off as usize;
    let mut bytes = m.bulk;
    while !bytes.is_empty() {
        let (xl, rest) = (k / (b * n), k % (b * n));
        let (yl, z) = (rest / n, rest % n);
        let run = (n - z).min(bytes.len() / ELEM_BYTES);
        let at = (yl * n + x0 + xl) * n + z;
        let (now, later) = bytes.split_at(run * ELEM_BYTES);
        for (dst, e) in st.out[at..at + run]
            .iter_mut()
            .zip(now.chunks_exact(ELEM_BYTES))
        {
            let (re, im) = e.split_at(8);
            *dst = Cx::new(
                f64::from_le_bytes(re.try_into().unwrap_or_default()),
                f64::from_le_bytes(im.try_into().unwrap_or_default()),
            );
        }
        bytes = later;
        k += run;
    }
    st.chunks += 1;
    Ok(())
}

/// One rank of the 3-D FFT of `cfg` (every rank of `job` calls it).
pub fn run<C: Claim>(cfg: &FftCfg, job: &Job) -> Result<AppOut, AmError> {
    let (n, p) = (cfg.n, job.size as usize);
    if !n.is_power_of_two() || n < 2 {
        return Err(bad(format!("fft: n = {n} (accepted: a power of two >= 2)")));
    }
    if p == 0 || !n.is_multiple_of(p) {
        return Err(bad(format!(
            "fft: {p} ranks do not divide n = {n} (accepted: a power of two up to {n} ranks)"
        )));
    }
    let r = job.rank as usize;
    let b = n / p;
    let plane = n * n;
    let ecfg = Config::default();
    let chunk = ecfg.bulk_bytes as usize / ELEM_BYTES;
    if chunk == 0 {
        return Err(bad("fft: bulk blocks smaller than one element"));
    }
    let block = b * b * n;
    let chunks_per_block = block.div_ceil(chunk) as u64;

    // Setup: the rank's slab of the input (kept for verification).
    let w = roots(n);
    let input = Input::new(cfg, &w);
    let mut orig = vec![Cx::default(); b * plane];
    for (i, v) in orig.iter_mut().enumerate() {
        let (xl, rest) = (i / plane, i % plane);
        *v = input.at(r * b + xl, rest / n, rest % n);
    }
    let mut data = orig.clone();
    let st = St {
        n,
        b,
        out: vec![Cx::default(); b * plane],
        chunks: 0,
    };
    let mut ep = Endpoint::<C, St>::join(job, &ecfg, st)?;
    ep.register(H_CHUNK, on_chunk::<C>)?;

    let timed = Timed::start(&mut ep)?;
    // 1. 2-D FFTs of the local planes: along z (rows), then along y.
    let mut scratch = Vec::new();
    for pl in data.chunks_exact_mut(plane) {
        for row in pl.chunks_exact_mut(n) {
            fft(row, &w);
        }
        fft_columns(pl, n, &w, &mut scratch);
    }
    // 2. Transpose: own block locally, then one destination per phase.
    {
        let out = &mut ep.state_mut().out;
        for xl in 0..b {
            for yl in 0..b {
                let from = (xl * n + r * b + yl) * n;
                let to = (yl * n + r * b + xl) * n;
                out[to..to + n].copy_from_slice(&data[from..from + n]);
            }
        }
    }
    let mut buf = Vec::with_capacity(chunk * ELEM_BYTES);
    let mut bulk_bytes = 0u64;
    for k in 1..p {
        let d = (r + k) % p;
        let mut off = 0u64;
        let mut elems = 0usize;
        for xl in 0..b {
            for yl in 0..b {
                let row = (xl * n + d * b + yl) * n;
                for c in &data[row..row + n] {
                    buf.extend_from_slice(&c.re.to_le_bytes());
                    buf.extend_from_slice(&c.im.to_le_bytes());
                    elems += 1;
                    if elems == chunk {
                        ep.request_bulk(d as u32, H_CHUNK, &[off], &buf)?;
                        bulk_bytes += buf.len() as u64;
                        off += elems as u64;
                        elems = 0;
                        buf.clear();
                    }
                }
            }
        }
        if elems > 0 {
            ep.request_bulk(d as u32, H_CHUNK, &[off], &buf)?;
            bulk_bytes += buf.len() as u64;
            buf.clear();
        }
    }
    let expect = chunks_per_block * (p as u64 - 1);
    ep.poll_until(|s| s.chunks >= expect)?;
    // 3. 1-D FFTs along x: the columns of each y-plane.
    for pl in ep.state_mut().out.chunks_exact_mut(plane) {
        fft_columns(pl, n, &w, &mut scratch);
    }
    let (elapsed, messages) = timed.stop(&mut ep)?;

    // Verification (untimed).
    drop(data);
    let out = std::mem::take(&mut ep.state_mut().out);
    let in_energy: f64 = orig.iter().map(|c| c.norm2()).sum();
    let out_energy: f64 = out.iter().map(|c| c.norm2()).sum();
    let total_in = sum_f64(&mut ep, in_energy)?;
    let total_out = sum_f64(&mut ep, out_energy)?;
    let cells = (n * n * n) as f64;
    let parseval = (total_out - cells * total_in).abs() <= 1e-9 * cells * total_in;
    // Direct DFT at every rank's sample frequencies: each rank sums over
    // its own slab of the input, the partial sums are added in rank order.
    let per_rank: Vec<Vec<[usize; 3]>> = (0..p)
        .map(|q| sample_freqs(&input, q, b, cfg.seed))
        .collect();
    let all: Vec<[usize; 3]> = per_rank.concat();
    let partial = partial_dft(&orig, r * b, n, &all, &w);
    let mut direct = Vec::with_capacity(all.len());
    for c in partial {
        direct.push(Cx::new(sum_f64(&mut ep, c.re)?, sum_f64(&mut ep, c.im)?));
    }
    let first: usize = per_rank[..r].iter().map(Vec::len).sum();
    let samples_ok = per_rank[r].iter().zip(&direct[first..]).all(|(k, want)| {
        let got = out[((k[1] - r * b) * n + k[0]) * n + k[2]];
        (got - *want).norm2().sqrt() <= 1e-9 * cells + 1e-9
    });
    let local_ok = parseval && samples_ok && ep.state().chunks == expect;
    let verified = all_ok(&mut ep, local_ok)?;
    let mut h = 0u64;
    for (i, c) in out.iter().enumerate() {
        // Keyed by the frequency, so the sum is the same for any P.
        let (yl, rest) = (i / plane, i % plane);
        let (kx, kz) = (rest / n, rest % n);
        let gid = ((kx * n + r * b + yl) * n + kz) as u64;
        h = h.wrapping_add(mix(c.re.to_bits() ^ mix(gid)) ^ c.im.to_bits().rotate_left(17));
    }
    let checksum = ep.allreduce(h, ReduceOp::Sum)?;
    ep.finish()?;
    Ok(AppOut {
        elapsed,
        verified,
        checksum,
        messages,
        bulk_bytes,
        params: params(&[
            ("n", n.to_string()),
            ("elements", (n * n * n).to_string()),
            ("array_mib", ((n * n * n * ELEM_BYTES) >> 20).to_string()),
            ("planes_per_rank", b.to_string()),
            ("chunk_bytes", (chunk * ELEM_BYTES).to_string()),
            ("checked_frequencies", all.len().to_string()),
        ]),
    })
}

/// The frequencies rank `q` checks in its part of the output (`ky` in
/// `q*b..(q+1)*b`): the plane-wave spikes and the DC term it holds, and
/// [`RANDOM_SAMPLES`] seeded ones.
fn sample_freqs(input: &Input, q: usize, b: usize, seed: u64) -> Vec<[usize; 3]> {
    let n = input.n;
    let range = q * b..(q + 1) * b;
    let mut freqs: Vec<[usize; 3]> = input
        .waves
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| range.contains(&k[1]))
        .collect();
    if q == 0 {
        freqs.push([0; 3]);
    }
    let mut g = SplitMix64::new(seed ^ 0x5A4D_504C ^ mix(q as u64));
    for _ in 0..RANDOM_SAMPLES {
        let kx = (g.next_u64() % n as u64) as usize;
        let ky = q * b + (g.next_u64() % b as u64) as usize;
        let kz = (g.next_u64() % n as u64) as usize;
        freqs.push([kx, ky, kz]);
    }
    freqs
}

/// The DFT at `freqs` of the slab `slab` (`[x - x0][y][z]`) of the input,
/// the rest of the input taken as zero.
fn partial_dft(slab: &[Cx], x0: usize, n: usize, freqs: &[[usize; 3]], w: &[Cx]) -> Vec<Cx> {
    let mut acc = vec![Cx::default(); freqs.len()];
    let mut inner = vec![Cx::default(); freqs.len()];
    for (row_index, row) in slab.chunks_exact(n).enumerate() {
        let (x, y) = (x0 + row_index / n, row_index % n);
        inner.fill(Cx::default());
        for (z, v) in row.iter().enumerate() {
            for (s, k) in inner.iter_mut().zip(freqs) {
                *s = *s + *v * w[(k[2] * z) % n];
            }
        }
        for ((a, s), k) in acc.iter_mut().zip(&inner).zip(freqs) {
            *a = *a + *s * w[(k[0] * x + k[1] * y) % n];
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fft_matches_direct_dft() {
        let n = 16;
        let w = roots(n);
        let mut g = SplitMix64::new(3);
        let a: Vec<Cx> = (0..n)
            .map(|_| Cx::new(unit_f64(g.next_u64()), unit_f64(g.next_u64())))
            .collect();
        let mut f = a.clone();
        fft(&mut f, &w);
        for (k, got) in f.iter().enumerate() {
            let want = a
                .iter()
                .enumerate()
                .fold(Cx::default(), |s, (j, v)| s + *v * w[(j * k) % n]);
            assert!((*got - want).norm2() < 1e-20, "k={k}");
        }
    }

    #[test]
    fn plane_wave_is_a_spike() {
        let n = 8;
        let w = roots(n);
        let up: Vec<Cx> = w.iter().map(|c| c.conj()).collect();
        let mut a: Vec<Cx> = (0..n).map(|x| up[(3 * x) % n]).collect();
        fft(&mut a, &w);
        for (k, v) in a.iter().enumerate() {
            let want = if k == 3 { n as f64 } else { 0.0 };
            assert!(
                (v.re - want).abs() < 1e-12 && v.im.abs() < 1e-12,
                "k={k}: {v:?}"
            );
        }
    }
}
