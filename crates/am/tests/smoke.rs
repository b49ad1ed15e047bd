//! Thread-mode smoke test: every algorithm, ping-pong and many-to-one.

use symmetry_am::{AmError, Claim, Config, Endpoint, Msg, Token, job};

#[derive(Default)]
struct St {
    got: u64,
    sum: u64,
    replies: u64,
}

fn ping<C: Claim>(t: &mut Token<'_, C, St>, m: &Msg<'_>) -> Result<(), AmError> {
    t.state().got += 1;
    t.state().sum += m.args[0];
    t.reply(1, &[m.args[0] + 1])
}
fn pong<C: Claim>(t: &mut Token<'_, C, St>, _m: &Msg<'_>) -> Result<(), AmError> {
    t.state().replies += 1;
    Ok(())
}

fn run<C: Claim>(n: u32) {
    let per = 5000u64;
    let out = job::run_threads(n, |job| {
        let cfg = Config::new()
            .with_packets(8)
            .with_bulk_blocks(2)
            .with_bulk_bytes(1024);
        let mut ep = Endpoint::<C, St>::join(&job, &cfg, St::default()).unwrap();
        ep.register(0, ping::<C>).unwrap();
        ep.register(1, pong::<C>).unwrap();
        ep.barrier().unwrap();
        for i in 0..per {
            for d in 0..n {
                ep.request(d, 0, &[i]).unwrap();
            }
        }
        ep.poll_until(|s| s.replies == per * u64::from(n)).unwrap();
        ep.barrier().unwrap();
        let total = ep
            .allreduce(ep.state().got, symmetry_am::ReduceOp::Sum)
            .unwrap();
        let s = (ep.state().got, ep.state().sum, total);
        ep.finish().unwrap();
        s
    });
    let n = u64::from(n);
    for (got, sum, total) in out {
        assert_eq!(got, per * n);
        assert_eq!(sum, n * per * (per - 1) / 2);
        assert_eq!(total, per * n * n);
    }
}

#[test]
fn all_algorithms() {
    macro_rules! each {
        ($($name:literal => $ty:ty;)*) => {$( eprintln!("{}", $name); run::<$ty>(3); )*};
    }
    symmetry_am::for_each_claim!(each);
}

/// A rank alone on its host skips polling its own queues until it has
/// sent itself something: requests to itself (far more than its queue
/// holds, so sends wait on the full queue), the replies to them, and a
/// barrier and a reduction of one rank must all still arrive.
#[test]
fn a_rank_alone_delivers_what_it_sends_itself() {
    macro_rules! each {
        ($($name:literal => $ty:ty;)*) => {$( eprintln!("{}", $name); run::<$ty>(1); )*};
    }
    symmetry_am::for_each_claim!(each);
}

#[test]
fn endpoints_are_send() {
    fn send<T: Send>() {}
    send::<Endpoint<symmetry_am::claim::Stamp, St>>();
    send::<Endpoint<symmetry_am::claim::PthreadClaim, St>>();
}
