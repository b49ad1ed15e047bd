//! Joining a job and leaving it: [`Endpoint::join`] makes this rank's
//! segment and maps the other ranks' (checking what their headers say),
//! [`Endpoint::finish`] leaves after a barrier, and dropping the endpoint
//! closes the wire, marks the segment closed and unlinks it.

use super::{Core, Endpoint, HANDLERS, REPLIES, REQUESTS, Reduce, Remote, Route, Stall, Stats};
use crate::claim::{Claim, Hint};
use crate::error::AmError;
use crate::job::Job;
use crate::segment::{Config, Segment, segment_name};
use crate::sync::AtomicU32;

impl<C: Claim, S> Endpoint<C, S> {
    /// Creates this rank's endpoint in `job` and maps every other rank's
    /// (waiting up to `job.timeout` for them to appear).
    pub fn join(job: &Job, cfg: &Config, state: S) -> Result<Self, AmError> {
        Config::check_rank(job.rank, job.size)?;
        if let Some(net) = &job.net
            && net.hosts().len() != job.size as usize
        {
            return Err(AmError::Config {
                detail: format!(
                    "a host map of {} ranks for a job of {}",
                    net.hosts().len(),
                    job.size
                ),
            });
        }
        // The claim locks' spin budget comes from the locks crate's
        // calibration, measured once per process on first use (about a
        // millisecond): here, not inside the first contended wait.
        crate::claim::lock::spin_budget("join");
        let local = |r: u32| job.net.as_ref().is_none_or(|n| n.same_host(r, job.rank));
        let alone = !(0..job.size).any(|r| r != job.rank && local(r));
        // The wire first: connecting may be collective, and every rank
        // reaches it before anything that can time out.
        let remote = match &job.net {
            Some(net) if (0..job.size).any(|r| !local(r)) => {
                Some(Remote::connect(net.wiring(), job.timeout, alone)?)
            }
            _ => None,
        };
        let shm = job.shm_name();
        let own = Segment::create::<C>(&segment_name(&shm, job.rank), cfg, job.rank, job.size)?;
        // SAFETY: our own segment was created for `C`; the views live in
        // `core` with the mapping (see `Route`).
        let own_views = unsafe { [own.queue::<C>(REQUESTS), own.queue::<C>(REPLIES)] };
        let lanes = own_views.map(|q| {
            (0..job.size)
                .filter(|_| C::PER_SENDER)
                .map(|r| C::lane(&q, r, job.size))
                .collect::<Vec<_>>()
        });
        let lane_mask = (0..job.size)
            .filter(|&r| local(r))
            .fold(0u64, |m, r| m | 1 << r);
        let mut core = Core {
            rank: job.rank,
            size: job.size,
            pid: std::process::id(),
            own,
            peers: Vec::with_capacity(job.size as usize),
            routes: Vec::with_capacity(job.size as usize),
            own_views,
            remote,
            alone,
            self_unread: 0,
            handlers: vec![None; HANDLERS],
            stats: Stats::default(),
            stall: [Stall::default(); 2],
            head: [0; 2],
            lane_heads: lanes.each_ref().map(|l| vec![0; l.len()]),
            lanes,
            unannounced: [0; 2],
            lane_mask,
            barrier_epoch: 0,
            barrier_arrivals: vec![0; 64],
            reduce_epoch: 0,
            reduce: Reduce::default(),
            deferring: false,
            deferred: Default::default(),
            unlinked: false,
        };
        for r in 0..job.size {
            if r == job.rank || !local(r) {
                core.peers.push(None);
            } else {
                let seg = Segment::open::<C>(&segment_name(&shm, r), job.timeout)?;
                let snap = seg.snapshot();
                if snap.rank != r || snap.size != job.size {
                    return Err(AmError::Untrusted {
                        name: seg.name().to_string(),
                        detail: format!(
                            "its header says rank {} of {}, the job expects rank {r} of {}",
                            snap.rank, snap.size, job.size
                        ),
                    });
                }
                if seg.config() != *cfg {
                    return Err(AmError::Config {
                        detail: format!(
                            "rank {r} has queue sizes {:?}, rank {} has {cfg:?} (all ranks must agree)",
                            seg.config(),
                            job.rank
                        ),
                    });
                }
                core.peers.push(Some(seg));
            }
        }
        for r in 0..job.size {
            let mut route = Route {
                views: None,
                closed: None,
                bell: None,
                hints: [Hint::default(); 2],
                gone: None,
            };
            if local(r) {
                let seg = core.segment(r);
                // SAFETY: every segment was created or validated for `C`;
                // the views live in `core` with the mappings (see `Route`).
                // A sender claims in its own lane of each queue.
                route.views = Some(
                    unsafe { [seg.queue::<C>(REQUESTS), seg.queue::<C>(REPLIES)] }
                        .map(|q| C::lane(&q, job.rank, job.size)),
                );
                let closed: *const AtomicU32 = seg.closed_flag();
                // SAFETY: the flag is in the mapping, which lives as long
                // as `core` (see `Route`).
                route.closed = Some(unsafe { &*closed });
                let bell: *const AtomicU32 = seg.bell();
                // SAFETY: as for the closed flag.
                route.bell = Some(unsafe { &*bell });
            }
            core.routes.push(route);
        }
        Ok(Self { core, state })
    }

    /// Barrier, then close: the usual end of an SPMD program (no rank
    /// leaves while another may still send to it).
    pub fn finish(mut self) -> Result<Stats, AmError> {
        self.barrier()?;
        let stats = self.core.stats;
        drop(self);
        Ok(stats)
    }
}

impl<C: Claim, S> Drop for Core<C, S> {
    fn drop(&mut self) {
        if let Some(r) = self.remote.as_mut() {
            // Best effort: a send still in flight after the timeout means
            // a receiver that stopped polling (the job is failing anyway).
            let _ = r.wire.close(r.timeout);
        }
        self.own.mark_closed();
        if !self.unlinked {
            self.unlinked = true;
            // Best effort: a launcher's cleanup removes it otherwise.
            let _ = crate::segment::unlink(self.own.name());
        }
    }
}
