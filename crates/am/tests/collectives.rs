//! Collectives complete on every rank whatever else arrives while they
//! wait: an error of another message (a handler id nobody registered, a
//! handler's own error) is kept and reported by the next poll, not by the
//! collective (which would leave the caller unable to tell whether it
//! completed).

use symmetry_am::claim::Stamp;
use symmetry_am::{AmError, Config, Endpoint, Msg, ReduceOp, Token, job};

/// Handler id that rank 0 never registers.
const UNREGISTERED: u16 = 7;
/// Handler that always fails.
const FAILING: u16 = 8;

fn failing(_t: &mut Token<'_, Stamp, ()>, m: &Msg<'_>) -> Result<(), AmError> {
    Err(AmError::Config {
        detail: format!("handler refused {}", m.args[0]),
    })
}

const ROUNDS: u64 = 200;

#[test]
fn a_peer_error_during_a_collective_is_reported_after_it() {
    let out = job::run_threads(2, |job| {
        let cfg = Config::default().with_packets(8);
        let mut ep = Endpoint::<Stamp, ()>::join(&job, &cfg, ()).unwrap();
        ep.register(FAILING, failing).unwrap();
        let (mut barriers, mut sums) = (0u64, 0u64);
        let mut errors = Vec::new();
        for i in 0..ROUNDS {
            if job.rank == 1 {
                // Sent just before the collective: rank 0 delivers it while
                // it waits for rank 1's barrier (or reduction) message.
                ep.request(0, UNREGISTERED, &[i]).unwrap();
                ep.request(0, FAILING, &[i]).unwrap();
            }
            if i % 2 == 0 {
                ep.barrier().unwrap();
                barriers += 1;
            } else {
                sums += ep.allreduce(i, ReduceOp::Sum).unwrap();
            }
            // What the collective kept comes first, one error per poll.
            while let Err(e) = ep.poll() {
                errors.push(e);
            }
        }
        // Whatever was not delivered during a collective comes now.
        if job.rank == 0 {
            while errors.len() < 2 * ROUNDS as usize {
                match ep.poll() {
                    Ok(_) => {}
                    Err(e) => errors.push(e),
                }
            }
        }
        let stats = ep.finish().unwrap();
        (barriers, sums, errors, stats.deferred)
    });
    let expect_sums: u64 = (0..ROUNDS).filter(|i| i % 2 == 1).map(|i| 2 * i).sum();
    for (barriers, sums, _, _) in &out {
        assert_eq!(*barriers, ROUNDS / 2);
        assert_eq!(*sums, expect_sums);
    }
    let (_, _, errors, deferred) = &out[0];
    assert!(*deferred > 0, "no error arrived during a collective");
    let mut no_handler = 0;
    let mut refused = 0;
    for e in errors {
        match e {
            AmError::NoHandler { id, src } => {
                assert_eq!((*id, *src), (UNREGISTERED, 1));
                no_handler += 1;
            }
            AmError::Config { detail } => {
                assert!(detail.starts_with("handler refused"), "{detail}");
                refused += 1;
            }
            other => panic!("unexpected error {other}"),
        }
    }
    assert_eq!((no_handler, refused), (ROUNDS, ROUNDS));
    assert_eq!(out[1].3, 0, "rank 1 received nothing but collectives");
}
