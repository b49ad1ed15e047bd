//! An idle receiver sleeps: blocked in `poll_until` for a second with no
//! traffic it uses (almost) no CPU, and a message then wakes it; the
//! same for every spin policy and claim algorithm, and in a barrier.

use std::time::{Duration, Instant};

use symmetry_am::{AmError, Claim, Config, Endpoint, Msg, Token, job};
use symmetry_locks::spin_then_block::SpinPolicy;
use symmetry_locks::spin_then_block::policy::{AlwaysBlock, FixedSpinC, RandomWalk};

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    // SAFETY: an all-zero rusage is a valid value (plain integers).
    let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: getrusage writes the rusage we point to, which outlives it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &raw mut ru) };
    assert_eq!(rc, 0);
    let t = |v: libc::timeval| Duration::new(v.tv_sec as u64, v.tv_usec as u32 * 1000);
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn count<C: Claim>(t: &mut Token<'_, C, u64>, m: &Msg<'_>) -> Result<(), AmError> {
    *t.state() += m.args[0];
    Ok(())
}

const QUIET: Duration = Duration::from_secs(1);

/// Rank 0 waits for one message that rank 1 sends after `QUIET`; returns
/// rank 0's CPU time during the wait and the wait's length.
fn idle_wait<C: Claim, P: SpinPolicy>(policy: &'static P) -> (Duration, Duration) {
    let out = job::run_threads(2, move |job| {
        let mut ep = Endpoint::<C, u64>::join(&job, &Config::default(), 0).unwrap();
        ep.register(0, count::<C>).unwrap();
        ep.barrier().unwrap();
        let r = if job.rank == 0 {
            let (cpu, start) = (thread_cpu(), Instant::now());
            ep.poll_until_by(policy, |n| *n == 1).unwrap();
            (thread_cpu() - cpu, start.elapsed())
        } else {
            std::thread::sleep(QUIET);
            ep.request(0, 0, &[1]).unwrap();
            (Duration::ZERO, Duration::ZERO)
        };
        ep.finish().unwrap();
        r
    });
    out[0]
}

fn check(name: &str, (cpu, waited): (Duration, Duration)) {
    eprintln!("{name}: {cpu:?} CPU in a wait of {waited:?}");
    assert!(
        waited >= QUIET - Duration::from_millis(50),
        "{name}: woke early"
    );
    assert!(
        cpu < waited / 100,
        "{name}: the idle receiver used {cpu:?} of CPU in {waited:?} (more than 1%)"
    );
}

#[test]
fn an_idle_receiver_sleeps_and_a_message_wakes_it() {
    static FIXED: FixedSpinC = FixedSpinC;
    static BLOCK: AlwaysBlock = AlwaysBlock;
    static WALK: RandomWalk = RandomWalk::INIT;
    check(
        "fixed-spin-c",
        idle_wait::<symmetry_am::claim::Stamp, _>(&FIXED),
    );
    check(
        "always-block",
        idle_wait::<symmetry_am::claim::Stamp, _>(&BLOCK),
    );
    check(
        "random-walk",
        idle_wait::<symmetry_am::claim::Stamp, _>(&WALK),
    );
    macro_rules! each {
        ($($name:literal => $ty:ty;)*) => {$( check($name, idle_wait::<$ty, _>(&FIXED)); )*};
    }
    symmetry_am::for_each_claim!(each);
}

/// A rank that reaches a barrier a second before the other sleeps there.
#[test]
fn a_barrier_waits_asleep() {
    let out = job::run_threads(2, |job| {
        let mut ep =
            Endpoint::<symmetry_am::claim::Stamp, ()>::join(&job, &Config::default(), ()).unwrap();
        ep.barrier().unwrap();
        let (cpu, start) = (thread_cpu(), Instant::now());
        if job.rank == 1 {
            std::thread::sleep(QUIET);
        }
        ep.barrier().unwrap();
        let r = (thread_cpu() - cpu, start.elapsed());
        ep.finish().unwrap();
        r
    });
    check("barrier", out[0]);
}
