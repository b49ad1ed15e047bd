//! LC98's Split-C applications on symmetry-am in thread mode: every app at
//! [`Size::Quick`], every claim algorithm, 1-3 ranks (the FFT at 1, 2 and
//! 4, the ranks dividing its cube side). Every rank must verify its part
//! of the result, and one input must give one checksum whatever the
//! algorithm. Nothing here asserts a time.

use symmetry_am::{AmError, Claim, job};
use symmetry_workloads::am_apps::con::{self, ConCfg};
use symmetry_workloads::am_apps::{App, AppOut, Size, run_rank};

fn ranks(app: App) -> &'static [u32] {
    match app {
        App::Fft => &[1, 2, 4],
        _ => &[1, 2, 3],
    }
}

fn run<C: Claim>(app: App, p: u32) -> Vec<AppOut> {
    job::run_threads(p, |job| run_rank::<C>(app, Size::Quick, &job))
        .into_iter()
        .enumerate()
        .map(|(r, out)| {
            out.unwrap_or_else(|e| panic!("{} {} P={p} rank {r}: {e}", app.name(), C::NAME))
        })
        .collect()
}

/// Checksums of every (app, P), for one algorithm, in a fixed order.
fn checksums<C: Claim>() -> Vec<u64> {
    let mut sums = Vec::new();
    for app in App::ALL {
        for &p in ranks(app) {
            let outs = run::<C>(app, p);
            let what = format!("{} {} P={p}", app.name(), C::NAME);
            assert_eq!(outs.len(), p as usize, "{what}");
            for (r, o) in outs.iter().enumerate() {
                assert!(o.verified, "{what}: rank {r} did not verify: {o:?}");
                assert_eq!(o.checksum, outs[0].checksum, "{what}: rank {r}");
                assert!(!o.params.is_empty(), "{what}");
                if p > 1 {
                    assert!(o.messages > 0, "{what}: rank {r} sent nothing");
                }
            }
            if app == App::Fft && p > 1 {
                assert!(outs.iter().all(|o| o.bulk_bytes > 0), "{what}");
            }
            sums.push(outs[0].checksum);
        }
    }
    sums
}

#[test]
fn every_app_every_algorithm() {
    macro_rules! each {
        ($($name:literal => $ty:ty;)*) => { vec![$(($name, checksums::<$ty>())),*] };
    }
    let all: Vec<(&str, Vec<u64>)> = symmetry_am::for_each_claim!(each);
    assert_eq!(all.len(), symmetry_am::claim::NAMES.len());
    for (name, sums) in &all {
        assert_eq!(
            sums, &all[0].1,
            "checksums of {name} differ from {}",
            all[0].0
        );
    }
}

/// The FFT's arithmetic does not depend on how the cube is cut: the same
/// output bits at 1, 2 and 4 ranks.
#[test]
fn fft_checksum_independent_of_ranks() {
    let sums: Vec<u64> = [1, 2, 4]
        .into_iter()
        .map(|p| run::<symmetry_am::claim::Stamp>(App::Fft, p)[0].checksum)
        .collect();
    assert!(sums.iter().all(|&s| s == sums[0]), "{sums:?}");
}

/// Three ranks cannot cut a 32^3 cube into equal slabs: a clear error on
/// every rank, not a hang.
#[test]
fn fft_rejects_ranks_not_dividing_n() {
    let outs = job::run_threads(3, |job| {
        run_rank::<symmetry_am::claim::Stamp>(App::Fft, Size::Quick, &job)
    });
    for o in outs {
        match o {
            Err(AmError::Config { detail }) => assert!(detail.contains("divide"), "{detail}"),
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }
}

/// Graphs whose components are known without a reference: every edge
/// present (one component, every label 0) and none (every node its own).
#[test]
fn con_extreme_graphs() {
    for (pct, p) in [(100, 3), (0, 2)] {
        let cfg = ConCfg {
            edge_pct: pct,
            ..ConCfg::comm(Size::Quick)
        };
        let outs = job::run_threads(p, |job| {
            con::run::<symmetry_am::claim::LockFree>(&cfg, &job)
        });
        let nodes = (cfg.side * cfg.side * cfg.slab * cfg.slabs_per_rank) as u64 * u64::from(p);
        for o in outs {
            let o = o.unwrap();
            let param = |k: &str| {
                o.params
                    .iter()
                    .find(|(n, _)| n == k)
                    .map(|(_, v)| v.clone())
            };
            assert!(o.verified, "{pct}%");
            if pct == 100 {
                assert_eq!(o.checksum, 0);
                assert_eq!(param("components").as_deref(), Some("1"));
            } else {
                assert_eq!(o.checksum, nodes * (nodes - 1) / 2);
                assert_eq!(param("components"), Some(nodes.to_string()));
                assert_eq!(param("rounds").as_deref(), Some("1"));
            }
        }
    }
}

#[test]
fn names_round_trip() {
    for app in App::ALL {
        assert_eq!(App::from_name(app.name()), Some(app));
    }
    assert_eq!(App::from_name("fft3d"), None);
}
