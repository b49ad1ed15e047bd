//! CON: connected components of a distributed random lattice graph (LC98
//! §4.3, Tables 3-4: "performs a large amount of fine-grained
//! communication in a statistically well-defined pattern. The balance
//! between computation and communication depends strongly on the input
//! parameters").
//!
//! # The graph
//!
//! A 2-D or 3-D lattice: planes `x = 0..X` (the partitioned dimension) of
//! `side` (2-D) or `side x side` (3-D) nodes; node `(x, y[, z])` has global
//! id `x * plane + offset`. Each lattice edge (from a node towards `+x`,
//! `+y`, `+z`, no wrap-around) is present with probability
//! [`ConCfg::edge_pct`]%, decided by a hash of the seed and the edge, so
//! every rank and the verifier see the same graph without communicating.
//!
//! The planes are cut into slabs of [`ConCfg::slab`] planes, dealt to the
//! ranks cyclically (slab `s` to rank `s % P`), [`ConCfg::slabs_per_rank`]
//! each; a rank's nodes are numbered locally plane by plane, in global id
//! order. An edge between planes of different ranks is a *cut edge*.
//!
//! # The algorithm (Split-C style, bulk-synchronous)
//!
//! 1. **Local phase**: union-find over the rank's local edges (union by
//!    smaller index, path halving, then flattened), so each local
//!    component's root is its smallest node and its label that node's
//!    global id.
//! 2. **Global phase**, in rounds: for every local component whose label
//!    changed since it was last sent (all of them in round 0), send
//!    `(remote node, label)` across each of its cut edges to the remote
//!    node's owner, [`PAIRS_PER_MSG`] pairs per short request at most
//!    (fine-grained, as Split-C's word-sized remote accesses); the handler
//!    records the pairs that would lower a label. Each rank then tells
//!    every other how many pairs it sent and polls until it has received
//!    as many as were announced; an all-reduce (Or) of "sent anything"
//!    ends the loop when a round sent nothing; otherwise the recorded
//!    pairs lower their components' labels and the next round starts.
//!    Pair and count messages carry the round's parity, so a fast rank's
//!    next round can overlap a slow rank's all-reduce without mixing
//!    counts. Labels change only between rounds (Jacobi style, not
//!    Gauss-Seidel), so the rounds, the pairs and the messages are a
//!    function of the input alone: every claim algorithm does the same
//!    work, and a timing difference is the message layer's.
//! 3. **Relabel**: every node takes its component's label: the smallest
//!    global id of its connected component.
//!
//! # The two inputs (LC98 Table 3)
//!
//! * **CON/comm** (3-D lattice, 25% of edges): 25% is just above the bond
//!   percolation threshold of the simple cubic lattice (0.2488), so a
//!   tortuous giant component spans the ranks and labels creep across it
//!   for many rounds; slabs are 2 planes thick and dealt cyclically, so
//!   every other plane boundary is a cut: about one cut edge per 8 nodes,
//!   little local work per message, and a tail of rounds in which few
//!   labels still change (LC98: "a period of high contention and load
//!   imbalance near the end").
//! * **CON/comp** (2-D lattice, 40% of edges): below the square lattice's
//!   threshold (0.5), so components are small; each rank owns one block
//!   of rows, only its two boundary rows have cut edges, and the run is
//!   dominated by the local union-find.
//!
//! # Verification (untimed)
//!
//! Rank 0 builds the whole graph from the seed and runs a serial
//! union-find (once per input and job size in a process: thread-mode jobs
//! that run one input under every algorithm reuse it); the number of components (nodes labelled with their own
//! id, summed over ranks), the sum of all labels (the checksum) and a
//! position-keyed hash of all labels must equal the serial ones on every
//! rank.

use std::sync::Mutex;

use symmetry_am::{AmError, Claim, Config, Endpoint, Job, Msg, ReduceOp, Token};

use super::common::{Timed, all_ok, bad, hash2, mix, params};
use super::{AppOut, Size};

/// `(node, label)` pairs per label request at most (one word each; the
/// first word of a request is the round's parity).
pub const PAIRS_PER_MSG: usize = 4;

const H_PAIRS: u16 = 10;
const H_DONE: u16 = 11;

/// The underlying lattice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lattice {
    /// Square lattice: planes are rows of `side` nodes.
    TwoD,
    /// Simple cubic lattice: planes of `side x side` nodes.
    ThreeD,
}

impl Lattice {
    fn dims(self) -> usize {
        match self {
            Lattice::TwoD => 2,
            Lattice::ThreeD => 3,
        }
    }
}

/// Parameters of one CON run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConCfg {
    /// 2-D or 3-D.
    pub lattice: Lattice,
    /// Nodes along each unpartitioned dimension.
    pub side: usize,
    /// Planes per slab.
    pub slab: usize,
    /// Slabs per rank (dealt cyclically).
    pub slabs_per_rank: usize,
    /// Percent of lattice edges present (0..=100).
    pub edge_pct: u32,
    /// Graph seed.
    pub seed: u64,
}

impl ConCfg {
    /// LC98's communication-bound input: 3-D lattice, 25% of edges,
    /// 128 x 128 planes (32 x 32 for Quick) in slabs of 2 dealt
    /// cyclically. Full has 1,048,576 nodes per rank (LC98: 512,000; at
    /// two ranks the lattice is a 128^3 cube).
    pub fn comm(size: Size) -> Self {
        let (side, slabs_per_rank) = match size {
            Size::Quick => (32, 4),
            Size::Full => (128, 32),
        };
        ConCfg {
            lattice: Lattice::ThreeD,
            side,
            slab: 2,
            slabs_per_rank,
            edge_pct: 25,
            seed: 0xC0_0001,
        }
    }

    /// LC98's computation-bound input: 2-D lattice, 40% of edges, one
    /// block of rows per rank. Full has 8,388,608 nodes per rank (2048
    /// rows of 4096): 13x LC98's 640,000, because at LC98's size the run
    /// takes a few tens of milliseconds here (the local union-find is what
    /// got faster); at this size its timed region is about as long as
    /// CON/comm's, as in LC98 Table 4.
    pub fn comp(size: Size) -> Self {
        let (side, rows) = match size {
            Size::Quick => (256, 64),
            Size::Full => (4096, 2048),
        };
        ConCfg {
            lattice: Lattice::TwoD,
            side,
            slab: rows,
            slabs_per_rank: 1,
            edge_pct: 40,
            seed: 0xC0_0002,
        }
    }
}

/// The graph as every rank sees it.
#[derive(Debug, Clone, Copy)]
struct Graph {
    dims: usize,
    side: usize,
    plane: usize,
    slab: usize,
    slabs_per_rank: usize,
    ranks: usize,
    planes: usize,
    threshold: u128,
    seed: u64,
}

impl Graph {
    fn new(cfg: &ConCfg, ranks: usize) -> Result<Self, AmError> {
        if cfg.side == 0 || cfg.slab == 0 || cfg.slabs_per_rank == 0 || cfg.edge_pct > 100 {
            return Err(bad(format!(
                "con: side {}, slab {}, slabs per rank {}, edges {}% (accepted: sizes >= 1, 0..=100%)",
                cfg.side, cfg.slab, cfg.slabs_per_rank, cfg.edge_pct
            )));
        }
        let plane = match cfg.lattice {
            Lattice::TwoD => Some(cfg.side),
            Lattice::ThreeD => cfg.side.checked_mul(cfg.side),
        };
        let planes = cfg
            .slab
            .checked_mul(cfg.slabs_per_rank)
            .and_then(|v| v.checked_mul(ranks));
        let total = plane.zip(planes).and_then(|(a, b)| a.checked_mul(b));
        let (Some(plane), Some(planes), Some(total)) = (plane, planes, total) else {
            return Err(bad("con: the graph size overflows"));
        };
        if total >= u32::MAX as usize {
            return Err(bad(format!(
                "con: {total} nodes in all (accepted: fewer than 2^32, node ids are 32-bit labels)"
            )));
        }
        // An edge is present when its 64-bit hash is below pct% of 2^64.
        let threshold = (u128::from(cfg.edge_pct) << 64) / 100;
        Ok(Graph {
            dims: cfg.lattice.dims(),
            side: cfg.side,
            plane,
            slab: cfg.slab,
            slabs_per_rank: cfg.slabs_per_rank,
            ranks,
            planes,
            threshold,
            seed: cfg.seed,
        })
    }

    fn nodes(&self) -> usize {
        self.planes * self.plane
    }

    fn per_rank(&self) -> usize {
        self.slab * self.slabs_per_rank * self.plane
    }

    /// Whether the edge from global node `gid` in direction `dir` (0: +x,
    /// 1: +y, 2: +z) is present (the caller checks it stays in the lattice).
    #[inline]
    fn edge(&self, gid: usize, dir: usize) -> bool {
        u128::from(hash2(self.seed, (gid * 3 + dir) as u64)) < self.threshold
    }

    /// In-plane neighbours of `off` towards +y and +z that exist.
    #[inline]
    fn in_plane(&self, off: usize) -> impl Iterator<Item = (usize, usize)> {
        let (side, dims) = (self.side, self.dims);
        let (y, z) = if dims == 3 {
            (off / side, off % side)
        } else {
            (off, 0)
        };
        let step_y = if dims == 3 { side } else { 1 };
        let plus_y = (y + 1 < side).then_some((1, off + step_y));
        let plus_z = (dims == 3 && z + 1 < side).then_some((2, off + 1));
        plus_y.into_iter().chain(plus_z)
    }

    fn owner(&self, x: usize) -> usize {
        (x / self.slab) % self.ranks
    }

    fn local_plane(&self, x: usize) -> usize {
        (x / self.slab / self.ranks) * self.slab + x % self.slab
    }

    /// Global plane of local plane `lp` of `rank`.
    fn global_plane(&self, rank: usize, lp: usize) -> usize {
        ((lp / self.slab) * self.ranks + rank) * self.slab + lp % self.slab
    }

    fn global_id(&self, rank: usize, local: usize) -> usize {
        self.global_plane(rank, local / self.plane) * self.plane + local % self.plane
    }
}

fn find(parent: &mut [u32], mut i: u32) -> u32 {
    while parent[i as usize] != i {
        let g = parent[parent[i as usize] as usize];
        parent[i as usize] = g;
        i = g;
    }
    i
}

/// Union by smaller index: a root is the smallest node of its set.
fn union(parent: &mut [u32], a: u32, b: u32) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    if ra != rb {
        parent[ra.max(rb) as usize] = ra.min(rb);
    }
}

/// A cut edge: local node's root, destination rank, node at the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Cut {
    root: u32,
    dest: u32,
    remote: u32,
}

/// Handler state.
#[derive(Debug)]
struct St {
    /// Local node -> its root (flattened after the local phase).
    root: Vec<u32>,
    /// Label of each node, its global id at first; from the local phase
    /// on, meaningful at roots only (the smallest global id known to be
    /// in the component).
    label: Vec<u32>,
    /// Pairs received, pairs announced, count messages: by round parity.
    recv: [u64; 2],
    expect: [u64; 2],
    dones: [u32; 2],
    /// `(node, label)` pairs received, applied at the end of their round.
    pending: [Vec<(u32, u32)>; 2],
}

fn on_pairs<C: Claim>(t: &mut Token<'_, C, St>, m: &Msg<'_>) -> Result<(), AmError> {
    let src = m.src;
    let st = t.state();
    let Some((&parity, pairs)) = m.args.split_first() else {
        return Err(bad(format!("con: empty label request from rank {src}")));
    };
    let parity = (parity & 1) as usize;
    for &w in pairs {
        let (node, label) = ((w >> 32) as usize, w as u32);
        let Some(&r) = st.root.get(node) else {
            return Err(bad(format!(
                "con: rank {src} sent a label for node {node}, this rank has {}",
                st.root.len()
            )));
        };
        if label < st.label[r as usize] {
            st.pending[parity].push((node as u32, label));
        }
    }
    st.recv[parity] += pairs.len() as u64;
    Ok(())
}

fn on_done<C: Claim>(t: &mut Token<'_, C, St>, m: &Msg<'_>) -> Result<(), AmError> {
    let &[parity, count] = m.args else {
        return Err(bad(format!(
            "con: malformed count message from rank {}",
            m.src
        )));
    };
    let st = t.state();
    let p = (parity & 1) as usize;
    st.expect[p] += count;
    st.dones[p] += 1;
    Ok(())
}

/// One rank of CON on the input `cfg`.
pub fn run<C: Claim>(cfg: &ConCfg, job: &Job) -> Result<AppOut, AmError> {
    let (r, p) = (job.rank as usize, job.size as usize);
    let g = Graph::new(cfg, p)?;
    let n = g.per_rank();

    // Setup: the rank's edges (generated, not yet used).
    let mut local_edges: Vec<(u32, u32)> =
        Vec::with_capacity(n * g.dims * cfg.edge_pct as usize / 90);
    let mut cuts: Vec<Cut> = Vec::new();
    for lp in 0..n / g.plane {
        let x = g.global_plane(r, lp);
        for off in 0..g.plane {
            let u = lp * g.plane + off;
            let gid = x * g.plane + off;
            if x + 1 < g.planes && g.edge(gid, 0) {
                let (o, v) = (g.owner(x + 1), g.local_plane(x + 1) * g.plane + off);
                if o == r {
                    local_edges.push((u as u32, v as u32));
                } else {
                    cuts.push(Cut {
                        root: u as u32,
                        dest: o as u32,
                        remote: v as u32,
                    });
                }
            }
            if x > 0 && g.owner(x - 1) != r && g.edge(gid - g.plane, 0) {
                let (o, v) = (g.owner(x - 1), g.local_plane(x - 1) * g.plane + off);
                cuts.push(Cut {
                    root: u as u32,
                    dest: o as u32,
                    remote: v as u32,
                });
            }
            for (dir, o2) in g.in_plane(off) {
                if g.edge(gid, dir) {
                    local_edges.push((u as u32, (lp * g.plane + o2) as u32));
                }
            }
        }
    }
    let st = St {
        root: (0..n as u32).collect(),
        label: (0..n).map(|i| g.global_id(r, i) as u32).collect(),
        recv: [0; 2],
        expect: [0; 2],
        dones: [0; 2],
        pending: [Vec::new(), Vec::new()],
    };
    let mut ep = Endpoint::<C, St>::join(job, &Config::default(), st)?;
    ep.register(H_PAIRS, on_pairs::<C>)?;
    ep.register(H_DONE, on_done::<C>)?;

    let timed = Timed::start(&mut ep)?;
    // 1. Local phase.
    {
        let st = ep.state_mut();
        let parent = &mut st.root;
        for &(a, b) in &local_edges {
            union(parent, a, b);
        }
        for i in 0..n {
            // Parents have smaller indices, so a pass in index order
            // flattens; the root (the smallest member) keeps its global id
            // as the label. (A fast neighbour's round 0 may arrive before
            // this phase, in the barrier: it only lands in `pending`.)
            let up = parent[parent[i] as usize];
            parent[i] = up;
            let l = st.label[i];
            let root_label = &mut st.label[up as usize];
            *root_label = (*root_label).min(l);
        }
        for c in &mut cuts {
            c.root = st.root[c.root as usize];
        }
    }
    cuts.sort_unstable();
    // 2. Global phase.
    let mut sent_label: Vec<u32> = vec![u32::MAX; cuts.len()];
    let mut bufs: Vec<Vec<u64>> = vec![Vec::with_capacity(PAIRS_PER_MSG + 1); p];
    let mut rounds = 0u64;
    let mut pairs_total = 0u64;
    loop {
        let parity = rounds & 1;
        let mut sent = vec![0u64; p];
        let mut i = 0;
        while i < cuts.len() {
            let root = cuts[i].root;
            let label = ep.state().label[root as usize];
            let fresh = sent_label[i] != label;
            while i < cuts.len() && cuts[i].root == root {
                if fresh {
                    let c = cuts[i];
                    let buf = &mut bufs[c.dest as usize];
                    if buf.is_empty() {
                        buf.push(parity);
                    }
                    buf.push(u64::from(c.remote) << 32 | u64::from(label));
                    sent[c.dest as usize] += 1;
                    if buf.len() == PAIRS_PER_MSG + 1 {
                        ep.request(c.dest, H_PAIRS, buf)?;
                        buf.clear();
                    }
                    sent_label[i] = label;
                }
                i += 1;
            }
        }
        for (d, buf) in bufs.iter_mut().enumerate() {
            if !buf.is_empty() {
                ep.request(d as u32, H_PAIRS, buf)?;
                buf.clear();
            }
        }
        for (d, &count) in sent.iter().enumerate() {
            if d != r {
                ep.request(d as u32, H_DONE, &[parity, count])?;
            }
        }
        let par = parity as usize;
        let others = (p - 1) as u32;
        ep.poll_until(|s| s.dones[par] == others && s.recv[par] == s.expect[par])?;
        let mine: u64 = sent.iter().sum();
        pairs_total += mine;
        let any = ep.allreduce(u64::from(mine > 0), ReduceOp::Or)?;
        let st = ep.state_mut();
        for (node, l) in std::mem::take(&mut st.pending[par]) {
            let root_label = &mut st.label[st.root[node as usize] as usize];
            *root_label = (*root_label).min(l);
        }
        st.recv[par] = 0;
        st.expect[par] = 0;
        st.dones[par] = 0;
        rounds += 1;
        if any == 0 {
            break;
        }
    }
    // 3. Relabel.
    let labels: Vec<u32> = {
        let st = ep.state();
        st.root.iter().map(|&rt| st.label[rt as usize]).collect()
    };
    let (elapsed, messages) = timed.stop(&mut ep)?;

    // Verification (untimed).
    let mut roots = 0u64;
    let mut sum = 0u64;
    let mut hash = 0u64;
    for (i, &l) in labels.iter().enumerate() {
        let gid = g.global_id(r, i) as u64;
        roots += u64::from(u64::from(l) == gid);
        sum = sum.wrapping_add(u64::from(l));
        hash = hash.wrapping_add(label_hash(gid, l));
    }
    let roots = ep.allreduce(roots, ReduceOp::Sum)?;
    let checksum = ep.allreduce(sum, ReduceOp::Sum)?;
    let hash = ep.allreduce(hash, ReduceOp::Sum)?;
    let serial = if r == 0 {
        serial_cached(cfg, &g)
    } else {
        [0; 3]
    };
    let mut want = [0u64; 3];
    for (w, v) in want.iter_mut().zip(serial) {
        *w = ep.allreduce(v, ReduceOp::Sum)?;
    }
    let verified = all_ok(&mut ep, [roots, checksum, hash] == want)?;
    let rounds_all = ep.allreduce(rounds, ReduceOp::Max)?;
    let pairs_all = ep.allreduce(pairs_total, ReduceOp::Sum)?;
    // Each cut edge is in the lists of both its ends.
    let cuts_all = ep.allreduce(cuts.len() as u64, ReduceOp::Sum)? / 2;
    ep.finish()?;
    let lattice = match cfg.lattice {
        Lattice::TwoD => "2d",
        Lattice::ThreeD => "3d",
    };
    Ok(AppOut {
        elapsed,
        verified,
        checksum,
        messages,
        bulk_bytes: 0,
        params: params(&[
            ("lattice", lattice.to_owned()),
            ("edge_pct", cfg.edge_pct.to_string()),
            ("side", cfg.side.to_string()),
            ("slab_planes", cfg.slab.to_string()),
            ("slabs_per_rank", cfg.slabs_per_rank.to_string()),
            ("nodes_per_rank", n.to_string()),
            ("cut_edges", cuts_all.to_string()),
            ("pairs_per_msg", PAIRS_PER_MSG.to_string()),
            ("pairs_sent", pairs_all.to_string()),
            ("rounds", rounds_all.to_string()),
            ("components", roots.to_string()),
        ]),
    })
}

fn label_hash(gid: u64, label: u32) -> u64 {
    mix(gid.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(label))
}

/// Serial results already computed in this process, by input and job
/// size (thread-mode jobs run one input under every claim algorithm; the
/// reference need not be recomputed each time).
static SERIAL: Mutex<Vec<SerialEntry>> = Mutex::new(Vec::new());

/// `((input, ranks), serial results)`.
type SerialEntry = ((ConCfg, usize), [u64; 3]);

/// [`serial`] through the [`SERIAL`] cache.
fn serial_cached(cfg: &ConCfg, g: &Graph) -> [u64; 3] {
    let key = (*cfg, g.ranks);
    let hit = |v: &Vec<SerialEntry>| v.iter().find(|(k, _)| *k == key).map(|e| e.1);
    if let Some(v) = hit(&SERIAL.lock().unwrap_or_else(|e| e.into_inner())) {
        return v;
    }
    let v = serial(g);
    let mut cache = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if cache.len() >= 16 {
        cache.remove(0);
    }
    cache.push((key, v));
    v
}

/// Serial union-find of the whole graph: (components, label sum, hash).
fn serial(g: &Graph) -> [u64; 3] {
    let total = g.nodes();
    let mut parent: Vec<u32> = (0..total as u32).collect();
    for gid in 0..total {
        let (x, off) = (gid / g.plane, gid % g.plane);
        if x + 1 < g.planes && g.edge(gid, 0) {
            union(&mut parent, gid as u32, (gid + g.plane) as u32);
        }
        for (dir, o2) in g.in_plane(off) {
            if g.edge(gid, dir) {
                union(&mut parent, gid as u32, (x * g.plane + o2) as u32);
            }
        }
    }
    let mut out = [0u64; 3];
    for gid in 0..total {
        let l = find(&mut parent, gid as u32);
        out[0] += u64::from(l as usize == gid);
        out[1] = out[1].wrapping_add(u64::from(l));
        out[2] = out[2].wrapping_add(label_hash(gid as u64, l));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planes_round_trip() {
        let cfg = ConCfg {
            slab: 3,
            slabs_per_rank: 4,
            ..ConCfg::comm(Size::Quick)
        };
        let g = Graph::new(&cfg, 3).unwrap();
        let mut seen = vec![false; g.planes];
        for r in 0..3 {
            for lp in 0..cfg.slab * cfg.slabs_per_rank {
                let x = g.global_plane(r, lp);
                assert_eq!(g.owner(x), r);
                assert_eq!(g.local_plane(x), lp);
                assert!(!seen[x]);
                seen[x] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn no_edges_and_all_edges() {
        for (pct, want) in [(0, false), (100, true)] {
            let cfg = ConCfg {
                edge_pct: pct,
                ..ConCfg::comm(Size::Quick)
            };
            let g = Graph::new(&cfg, 2).unwrap();
            assert!((0..10_000).all(|i| g.edge(i, i % 3) == want), "{pct}%");
        }
        let cfg = ConCfg {
            edge_pct: 101,
            ..ConCfg::comm(Size::Quick)
        };
        assert!(matches!(Graph::new(&cfg, 2), Err(AmError::Config { .. })));
    }

    #[test]
    fn edge_density() {
        let g = Graph::new(&ConCfg::comp(Size::Quick), 1).unwrap();
        let present = (0..100_000).filter(|&i| g.edge(i, 1)).count();
        assert!((38_000..42_000).contains(&present), "{present}");
    }
}
