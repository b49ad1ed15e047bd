//! Collectives over Active Messages: [`Endpoint::barrier`] and
//! [`Endpoint::allreduce`] send requests to handlers of their own (ids
//! above the user's) and poll until every rank they need has answered.

use symmetry_locks::spin_then_block::policy::FixedSpinC;

use super::{Core, Endpoint, Need, REQUESTS, Scope};
use crate::claim::Claim;
use crate::error::AmError;

/// Handler ids of the collectives' messages: a barrier round's arrival,
/// a contribution to the all-reduce root, and its result.
pub(super) const H_BARRIER: u16 = 255;
pub(super) const H_REDUCE: u16 = 254;
pub(super) const H_RESULT: u16 = 253;

/// Operation of [`Endpoint::allreduce`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum ReduceOp {
    /// Wrapping sum.
    Sum = 0,
    /// Maximum.
    Max = 1,
    /// Minimum.
    Min = 2,
    /// Bitwise or.
    Or = 3,
}

impl ReduceOp {
    fn from_word(w: u64) -> Option<Self> {
        Some(match w {
            0 => ReduceOp::Sum,
            1 => ReduceOp::Max,
            2 => ReduceOp::Min,
            3 => ReduceOp::Or,
            _ => return None,
        })
    }
    fn apply(self, a: u64, b: u64) -> u64 {
        match self {
            ReduceOp::Sum => a.wrapping_add(b),
            ReduceOp::Max => a.max(b),
            ReduceOp::Min => a.min(b),
            ReduceOp::Or => a | b,
        }
    }
}

impl<C: Claim, S> Endpoint<C, S> {
    /// A barrier over all ranks, built on Active Messages (dissemination:
    /// ceil(log2 size) rounds of one request each).
    ///
    /// It completes on every rank whatever other messages arrive while it
    /// waits: an error of another message (its handler's, or garbage) is
    /// kept and returned by the next [`poll`](Endpoint::poll) or
    /// [`poll_until`](Endpoint::poll_until) (module docs, "Collectives
    /// complete"). An `Err` from `barrier` itself means it did not
    /// complete: a peer is gone, or a send failed.
    pub fn barrier(&mut self) -> Result<(), AmError> {
        let state = &mut self.state;
        self.core.collective(|core| Core::barrier(core, state))
    }

    /// Combines `value` of every rank with `op`; every rank gets the
    /// result. Errors of other messages are kept for later, as for
    /// [`barrier`](Endpoint::barrier).
    pub fn allreduce(&mut self, value: u64, op: ReduceOp) -> Result<u64, AmError> {
        let state = &mut self.state;
        self.core
            .collective(|core| Core::allreduce(core, state, value, op))
    }
}

impl<C: Claim, S> Core<C, S> {
    fn barrier(core: &mut Self, state: &mut S) -> Result<(), AmError> {
        let epoch = core.barrier_epoch;
        core.barrier_epoch += 1;
        let (rank, size) = (core.rank, core.size);
        let mut round = 0usize;
        let mut dist = 1u32;
        while dist < size {
            let to = (rank + dist) % size;
            let from = (rank + size - dist) % size;
            Core::send(
                core,
                state,
                to,
                REQUESTS,
                H_BARRIER,
                &[round as u64],
                None,
                Scope::Both,
            )?;
            Core::poll_until(core, state, Need::Rank(from), &FixedSpinC, |c, _| {
                c.barrier_arrivals[round] > epoch
            })?;
            round += 1;
            dist *= 2;
        }
        Ok(())
    }

    fn allreduce(core: &mut Self, state: &mut S, value: u64, op: ReduceOp) -> Result<u64, AmError> {
        let epoch = core.reduce_epoch;
        core.reduce_epoch += 1;
        let parity = (epoch % 2) as usize;
        if core.size == 1 {
            return Ok(value);
        }
        if core.rank == 0 {
            let need = core.size - 1;
            Core::poll_until(core, state, Need::Everyone, &FixedSpinC, |c, _| {
                c.reduce.count[parity] >= need
            })?;
            let mut result = value;
            if core.reduce.count[parity] > 0 {
                result = op.apply(result, core.reduce.acc[parity]);
            }
            core.reduce.acc[parity] = 0;
            core.reduce.count[parity] = 0;
            for r in 1..core.size {
                Core::send(
                    core,
                    state,
                    r,
                    REQUESTS,
                    H_RESULT,
                    &[result],
                    None,
                    Scope::Both,
                )?;
            }
            Ok(result)
        } else {
            Core::send(
                core,
                state,
                0,
                REQUESTS,
                H_REDUCE,
                &[op as u64, value, epoch],
                None,
                Scope::Both,
            )?;
            Core::poll_until(core, state, Need::Rank(0), &FixedSpinC, |c, _| {
                c.reduce.results > epoch
            })?;
            Ok(core.reduce.result)
        }
    }

    /// Handles a collective's message (an id above the user's) from
    /// `src`; one it does not expect is garbage.
    pub(super) fn internal(&mut self, id: u16, src: u32, args: &[u64]) -> Result<(), AmError> {
        match (id, args) {
            (H_BARRIER, [round]) if (*round as usize) < self.barrier_arrivals.len() => {
                self.barrier_arrivals[*round as usize] += 1;
            }
            (H_REDUCE, [op, value, epoch]) if self.rank == 0 => {
                let op = ReduceOp::from_word(*op).ok_or_else(|| AmError::Garbage {
                    src,
                    detail: format!("all-reduce operation {op}"),
                })?;
                let p = (*epoch % 2) as usize;
                self.reduce.acc[p] = if self.reduce.count[p] == 0 {
                    *value
                } else {
                    op.apply(self.reduce.acc[p], *value)
                };
                self.reduce.count[p] += 1;
            }
            (H_RESULT, [value]) => {
                self.reduce.result = *value;
                self.reduce.results += 1;
            }
            _ => {
                return Err(AmError::Garbage {
                    src,
                    detail: format!(
                        "internal message {id} with {} words at rank {}",
                        args.len(),
                        self.rank
                    ),
                });
            }
        }
        Ok(())
    }
}
