//! The experiment catalogue (`symmetry list` lists it): one file per
//! experiment, each a declaration ([`crate::harness::Experiment`]) with its
//! claims and rules, a run and an assessment. Experiment files import the
//! harness, kernels, registries and peers, never each other.

pub use crate::harness::{Ctx, Experiment};

pub mod am_apps;
pub mod am_bulk;
pub mod am_clumps;
pub mod am_logp;
pub mod am_stress;
pub mod calibrate;
pub mod cs_analytic;
pub mod cs_calibrate;
pub mod cs_elapsed;
pub mod interpose_apps;
pub mod model_mva;
pub mod peer_locks;
pub mod peer_messages;
pub mod peer_skynet;
pub mod peer_threads;
pub mod pq_apps;
pub mod pq_breakdown;
pub mod pq_multiprogramming;
pub mod pq_oversubscribed;
pub mod pq_processors;
pub mod presto_atomic_int;
pub mod presto_create_delete;
pub mod presto_create_start_delete;
pub mod presto_spinlock;
pub mod spin_barrier;
pub mod spin_counter;
pub mod spin_cs_size;
pub mod tm_latency_vs_runnable;
pub mod tm_million;
pub mod tm_null_threads;
pub mod tm_queue_search;
pub mod tm_user_work;

/// The catalogue, in report order.
pub const ALL: &[Experiment] = &[
    calibrate::EXPERIMENT,
    tm_null_threads::EXPERIMENT,
    tm_user_work::EXPERIMENT,
    tm_latency_vs_runnable::EXPERIMENT,
    tm_queue_search::EXPERIMENT,
    tm_million::EXPERIMENT,
    spin_counter::EXPERIMENT,
    spin_cs_size::EXPERIMENT,
    spin_barrier::EXPERIMENT,
    model_mva::EXPERIMENT,
    presto_spinlock::EXPERIMENT,
    presto_atomic_int::EXPERIMENT,
    presto_create_delete::EXPERIMENT,
    presto_create_start_delete::EXPERIMENT,
    cs_calibrate::EXPERIMENT,
    cs_analytic::EXPERIMENT,
    cs_elapsed::EXPERIMENT,
    interpose_apps::EXPERIMENT,
    pq_multiprogramming::EXPERIMENT,
    pq_processors::EXPERIMENT,
    pq_breakdown::EXPERIMENT,
    pq_apps::EXPERIMENT,
    pq_oversubscribed::EXPERIMENT,
    am_apps::EXPERIMENT,
    am_clumps::EXPERIMENT,
    am_bulk::EXPERIMENT,
    am_logp::EXPERIMENT,
    am_stress::EXPERIMENT,
    peer_locks::EXPERIMENT,
    peer_threads::EXPERIMENT,
    peer_skynet::EXPERIMENT,
    peer_messages::EXPERIMENT,
];

/// Looks an experiment up by id.
pub fn find(id: &str) -> Option<&'static Experiment> {
    ALL.iter().find(|e| e.id == id)
}

/// Ids of the catalogue that are planned but not built yet (named in the
/// report so the gap is visible).
pub const PENDING: &[&str] = &[];

#[cfg(test)]
mod tests {
    use super::ALL;
    use crate::harness::reproduce::steps;

    /// Every entry names itself (the struct update base,
    /// `Experiment::new`, leaves id, title and source empty), and no two
    /// share an id.
    #[test]
    fn every_entry_has_its_own_id_title_and_source() {
        let mut ids: Vec<&str> = ALL.iter().map(|e| e.id).collect();
        for e in ALL {
            assert!(
                !e.id.is_empty() && !e.title.is_empty() && !e.source.is_empty(),
                "{e:?}"
            );
        }
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), ALL.len(), "duplicate ids");
    }

    /// A reproduction measures every experiment once in each pass, the
    /// ones that use a million threads last; a quick one measures those
    /// declared so in one process.
    #[test]
    fn reproduce_runs_the_catalogue_with_the_heavy_ones_last() {
        let sorted = |mut ids: Vec<&'static str>| {
            ids.sort_unstable();
            ids
        };
        for quick in [false, true] {
            let steps = steps(ALL, quick);
            for second in [false, true] {
                let pass = steps.iter().filter(|s| s.second_pass == second);
                let want = ALL
                    .iter()
                    .filter(|e| !(second && quick && e.schedule.one_process_when_quick));
                assert_eq!(
                    sorted(pass.map(|s| s.experiment.id).collect()),
                    sorted(want.map(|e| e.id).collect()),
                    "quick {quick}, second pass {second}"
                );
            }
            let heavy = ALL.iter().filter(|e| e.schedule.last).count();
            assert!(heavy > 0, "tm-million runs last");
            let tail = &steps[steps.len() - 2 * heavy..];
            assert!(tail.iter().all(|s| s.experiment.schedule.last), "{steps:?}");
        }
        assert!(ALL.iter().any(|e| e.schedule.one_process_when_quick));
    }
}
