//! Fault injection: senders SIGKILLed at random points never cost a live
//! sender a message (issue: "Active Messages that lose nothing").
//!
//! Each round is one job: this test process is rank 0, the receiver;
//! rank 1 is the survivor, an `am-selftest send` child that sends
//! [`SURVIVOR_K`] numbered requests; ranks 2.. are victims, children that
//! send numbered requests without end and are SIGKILLed one after another
//! at seeded random moments while everyone sends into rank 0's tiny
//! queue. So the kills land everywhere in the send path: mid-claim, between
//! claim and publish, holding a claim lock, blocked on the full queue,
//! polling while blocked. The receiver then has to deliver every one of
//! the survivor's requests exactly once, and every victim's delivered
//! requests at most once, each sender's in the order it sent them where
//! the algorithm promises that order (`Claim::SENDER_FIFO`), within the
//! hang guard.
//!
//! Rounds are seeded (the seed is printed on failure), so a failure
//! replays. `SYMMETRY_AM_FAULT_ROUNDS` raises the number of rounds per
//! algorithm for a longer soak.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use common::{CFG, GUARD, Kid, Stall, own_job};
use symmetry_am::{AmError, Claim, Endpoint, Msg, Token};
use symmetry_locks::platform::rng::SplitMix64;

/// Requests the survivor sends: enough to keep it sending until every
/// victim is dead (the 24 kills take at most 72 ms after the go; the
/// survivor's share of the queue is a few hundred thousand requests a
/// second on an idle machine, so 50,000 last 150 ms or more, and a loaded
/// machine slows the survivor as it slows the kills). More only lengthens
/// the stream after the last kill, which tests nothing more and, beside
/// CPU hogs, took minutes per algorithm.
const SURVIVOR_K: u64 = 50_000;

/// Victims per round (a job has at most 64 ranks).
const VICTIMS: u32 = 24;

/// Rounds per algorithm unless `SYMMETRY_AM_FAULT_ROUNDS` says otherwise:
/// 6 x 24 = 144 kill points per algorithm, about a thousand per run.
const ROUNDS: u64 = 6;

/// A victim's request count: more than it can send before it is killed.
const FOREVER: &str = "1000000000";

/// What rank 0 received, per source rank.
#[derive(Debug)]
struct Seen {
    /// Every `(rank, number)` delivered.
    got: std::collections::HashSet<(u32, u64)>,
    /// The last number delivered from each rank, if any.
    last: Vec<Option<u64>>,
    /// Requests delivered from the survivor.
    survivor: u64,
    /// Violations, described.
    bad: Vec<String>,
}

impl Seen {
    fn new(size: u32) -> Seen {
        Seen {
            got: Default::default(),
            last: vec![None; size as usize],
            survivor: 0,
            bad: Vec::new(),
        }
    }
}

fn on_request<C: Claim>(t: &mut Token<'_, C, Seen>, m: &Msg<'_>) -> Result<(), AmError> {
    let src = t.src();
    let seq = m.args.first().copied().unwrap_or(u64::MAX);
    let st = t.state();
    let Some(last) = st.last.get_mut(src as usize) else {
        st.bad
            .push(format!("a request from rank {src}, outside the job"));
        return Ok(());
    };
    if C::SENDER_FIFO && last.is_some_and(|l| seq <= l) {
        st.bad.push(format!(
            "rank {src}: #{seq} arrived after #{}",
            last.unwrap_or(0)
        ));
    }
    *last = Some(seq);
    if !st.got.insert((src, seq)) {
        st.bad.push(format!("rank {src}: #{seq} arrived twice"));
    }
    if src == 1 {
        if seq >= SURVIVOR_K {
            st.bad.push(format!("survivor: #{seq} was never sent"));
        }
        st.survivor += 1;
    }
    // Keep a failing round's report short.
    st.bad.truncate(20);
    Ok(())
}

/// A pause of up to `max_us` microseconds, drawn from `rng` (the kill
/// moments).
fn pause(rng: &mut SplitMix64, max_us: u64) -> Duration {
    Duration::from_micros(rng.below(max_us + 1))
}

/// One round for claim algorithm `C` with `seed`.
fn round<C: Claim>(seed: u64) {
    let size = 2 + VICTIMS;
    let job = own_job(size);
    let mut rng = SplitMix64::new(seed);
    let survivor_k = SURVIVOR_K.to_string();
    let mut survivor = Kid::start(&job, 1, &["send", C::NAME, "0", &survivor_k, "--go"]);
    let mut victims: Vec<Kid> = (2..size)
        .map(|r| Kid::start(&job, r, &["send", C::NAME, "0", FOREVER, "--go"]))
        .collect();
    let mut ep = Endpoint::<C, Seen>::join(&job, &CFG, Seen::new(job.size)).expect("rank 0 joins");
    ep.register(0, on_request::<C>).expect("register");
    survivor.expect("joined");
    for v in &mut victims {
        v.expect("joined");
    }
    // The receiver serves from its own thread while this one kills.
    let what = format!("{} seed {seed:#x}", C::NAME);
    let receiver = std::thread::scope(|s| {
        let rx = s.spawn(|| {
            let mut stall = Stall::new();
            let mut gone = Vec::new();
            loop {
                let r = ep.poll_until(|st| st.survivor >= SURVIVOR_K || stall.stuck(st.survivor));
                match r {
                    Ok(()) => break,
                    // A dead victim (or the survivor, closed after its last
                    // request) is an event; keep serving the others.
                    Err(AmError::PeerDead { rank, .. } | AmError::PeerClosed { rank }) => {
                        gone.push(rank)
                    }
                    Err(e) => panic!("{what}: the receiver failed: {e}"),
                }
            }
            (ep, gone)
        });
        survivor.say("go");
        for v in &mut victims {
            v.say("go");
        }
        for v in &mut victims {
            std::thread::sleep(pause(&mut rng, 3_000));
            v.kill();
        }
        rx.join().expect("receiver thread")
    });
    let (ep, _gone) = receiver;
    let st = ep.state();
    assert!(st.bad.is_empty(), "{what}: {:?}", st.bad);
    assert_eq!(
        st.survivor,
        SURVIVOR_K,
        "{what}: the survivor's requests stopped arriving for {GUARD:?} (stats {:?})",
        ep.stats()
    );
    if std::env::var_os("SYMMETRY_AM_FAULT_VERBOSE").is_some() {
        let victims: usize = st.got.iter().filter(|(r, _)| *r >= 2).count();
        eprintln!("{what}: {victims} victim requests, stats {:?}", ep.stats());
    }
    let status = survivor.wait();
    assert!(status.success(), "{what}: the survivor failed: {status}");
    drop(ep);
    symmetry_am::job::cleanup_job(&job.name);
}

fn rounds() -> u64 {
    std::env::var("SYMMETRY_AM_FAULT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROUNDS)
}

fn every_round<C: Claim>(alg: u64) {
    for r in 0..rounds() {
        round::<C>((alg << 32) | r);
    }
}

macro_rules! tests {
    ($($test:ident => $ty:ty, $n:literal;)*) => {$(
        #[test]
        fn $test() {
            every_round::<$ty>($n);
        }
    )*};
}

tests! {
    killed_senders_lose_nothing_tas => symmetry_am::claim::TasClaim, 0;
    killed_senders_lose_nothing_ttas => symmetry_am::claim::TtasClaim, 1;
    killed_senders_lose_nothing_ticket => symmetry_am::claim::TicketClaim, 2;
    killed_senders_lose_nothing_anderson => symmetry_am::claim::AndersonClaim, 3;
    killed_senders_lose_nothing_pthread => symmetry_am::claim::PthreadClaim, 4;
    killed_senders_lose_nothing_lock_free => symmetry_am::claim::LockFree, 5;
    killed_senders_lose_nothing_stamp => symmetry_am::claim::Stamp, 6;
    killed_senders_lose_nothing_rings => symmetry_am::claim::Rings, 7;
}

// ---------------------------------------------------------------------------
// Deterministic: a holder killed inside the claim lock, and a waiter
// killed in the lock's queue behind it.

/// Rank 1 takes the claim lock of rank 0's request queue and is killed
/// holding it; rank 2 queues behind it (a ticket, for the FIFO locks) and
/// is killed waiting; rank 3 must then get every one of its requests
/// through.
fn dead_holder_and_waiter<C: Claim>() {
    const K: u64 = 64;
    let job = own_job(4);
    let mut holder = Kid::start(&job, 1, &["hold-lock", C::NAME, "0"]);
    let k = K.to_string();
    let mut waiter = Kid::start(&job, 2, &["send", C::NAME, "0", &k, "--go"]);
    let mut survivor = Kid::start(&job, 3, &["send", C::NAME, "0", &k, "--go"]);
    let mut ep = Endpoint::<C, Seen>::join(&job, &CFG, Seen::new(job.size)).expect("rank 0 joins");
    ep.register(0, on_request::<C>).expect("register");
    holder.expect("held");
    waiter.expect("joined");
    survivor.expect("joined");
    // The waiter takes its place behind the holder, then dies there.
    waiter.say("go");
    std::thread::sleep(Duration::from_millis(50));
    waiter.kill();
    holder.kill();
    survivor.say("go");
    let mut stall = Stall::new();
    let survivor_got = |st: &Seen| st.got.iter().filter(|(r, _)| *r == 3).count() as u64;
    loop {
        match ep.poll_until(|st| survivor_got(st) >= K || stall.stuck(survivor_got(st))) {
            Ok(()) => break,
            Err(AmError::PeerDead { .. } | AmError::PeerClosed { .. }) => {}
            Err(e) => panic!("{}: the receiver failed: {e}", C::NAME),
        }
    }
    let st = ep.state();
    assert!(st.bad.is_empty(), "{}: {:?}", C::NAME, st.bad);
    assert_eq!(
        survivor_got(st),
        K,
        "{}: the survivor is stuck behind a dead lock holder",
        C::NAME
    );
    assert!(survivor.wait().success(), "{}: survivor failed", C::NAME);
    drop(ep);
    symmetry_am::job::cleanup_job(&job.name);
}

#[test]
fn dead_lock_holder_and_waiter_are_got_past() {
    dead_holder_and_waiter::<symmetry_am::claim::TasClaim>();
    dead_holder_and_waiter::<symmetry_am::claim::TtasClaim>();
    dead_holder_and_waiter::<symmetry_am::claim::TicketClaim>();
    dead_holder_and_waiter::<symmetry_am::claim::AndersonClaim>();
    dead_holder_and_waiter::<symmetry_am::claim::PthreadClaim>();
}

// ---------------------------------------------------------------------------
// Receivers killed at random points: the other ranks end with an error
// within the hang guard, never hang.

fn killed_receiver<C: Claim>(alg: u64) {
    for r in 0..rounds() {
        let seed = (alg << 32) | (1 << 31) | r;
        let mut rng = SplitMix64::new(seed);
        let job = own_job(3);
        let mut ranks: Vec<Kid> = (0..3)
            .map(|rank| {
                // Quiet: the survivors' "rank N has died" is the expected
                // outcome, checked by their exit status below.
                let args = ["exchange", C::NAME, "16000000"];
                Kid::start_with(&job, rank, &args, std::process::Stdio::null())
            })
            .collect();
        for kid in &mut ranks {
            kid.expect("joined");
        }
        std::thread::sleep(pause(&mut rng, 20_000));
        let victim = rng.below(3) as usize;
        for (rank, kid) in ranks.iter_mut().enumerate() {
            assert!(
                kid.running(),
                "{} seed {seed:#x}: rank {rank} ended before the kill",
                C::NAME
            );
        }
        ranks[victim].kill();
        for (rank, kid) in ranks.iter_mut().enumerate() {
            if rank != victim {
                // `wait` panics if the rank is still running after GUARD.
                let status = kid.wait();
                assert!(
                    !status.success() && status.signal().is_none(),
                    "{} seed {seed:#x}: rank {rank} did not end with an error of its own after rank {victim} was killed ({status})",
                    C::NAME
                );
            }
        }
        symmetry_am::job::cleanup_job(&job.name);
    }
}

#[test]
fn killed_receivers_end_their_peers_with_an_error() {
    killed_receiver::<symmetry_am::claim::TasClaim>(0);
    killed_receiver::<symmetry_am::claim::TtasClaim>(1);
    killed_receiver::<symmetry_am::claim::TicketClaim>(2);
    killed_receiver::<symmetry_am::claim::AndersonClaim>(3);
    killed_receiver::<symmetry_am::claim::PthreadClaim>(4);
    killed_receiver::<symmetry_am::claim::LockFree>(5);
    killed_receiver::<symmetry_am::claim::Stamp>(6);
    killed_receiver::<symmetry_am::claim::Rings>(7);
}

// ---------------------------------------------------------------------------
// Live senders stopped (SIGSTOP) at seeded random points for 1-200 ms and
// resumed (SIGCONT), as a busy machine deschedules them: every message of
// every sender arrives exactly once (issue 43: "exactly-once under any
// scheduling"). A stop lands anywhere in the send path: holding a claim
// lock, between being handed a position and claiming its packet (where
// `lock-free` once gave the position up after 20 ms and so stranded a
// message), between claim and publish, blocked on the full queue.

/// Senders per round (ranks 1..; even ranks send bulk requests).
const STOP_SENDERS: u32 = 4;

/// Requests per sender: more than the senders get through during the
/// stops, so the stops land while everyone is sending.
const STOP_K: u64 = 20_000;

/// Stops per round, one sender at a time, each 1-200 ms long.
const STOPS: u32 = 12;

/// Rounds per algorithm (`SYMMETRY_AM_FAULT_ROUNDS` does not apply: the
/// rounds' length is the stops', not the work's).
const STOP_ROUNDS: u64 = 2;

/// The round fails if the receiver delivers nothing for this long (a
/// stop lasts at most 200 ms; a lost message stalls the count for good).
const NO_PROGRESS: Duration = Duration::from_secs(20);

/// Sends `sig` to `pid`.
fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions; `pid` is our
    // child's, not yet reaped (its `Kid` holds it).
    let r = unsafe { libc::kill(pid as libc::pid_t, sig) };
    assert_eq!(
        r,
        0,
        "kill({pid}, {sig}): {}",
        std::io::Error::last_os_error()
    );
}

/// One round for claim algorithm `C` with `seed`.
fn stopped_round<C: Claim>(seed: u64) {
    let size = 1 + STOP_SENDERS;
    let job = own_job(size);
    let mut rng = SplitMix64::new(seed);
    let k = STOP_K.to_string();
    let mut senders: Vec<Kid> = (1..size)
        .map(|r| {
            let mut args = vec!["send", C::NAME, "0", k.as_str(), "--go"];
            if r % 2 == 0 {
                args.push("--bulk");
            }
            Kid::start(&job, r, &args)
        })
        .collect();
    let mut ep = Endpoint::<C, Seen>::join(&job, &CFG, Seen::new(job.size)).expect("rank 0 joins");
    ep.register(0, on_request::<C>).expect("register");
    for s in &mut senders {
        s.expect("joined");
    }
    let want = u64::from(STOP_SENDERS) * STOP_K;
    let what = format!("{} stop seed {seed:#x}", C::NAME);
    let finished = std::sync::atomic::AtomicBool::new(false);
    let ep = std::thread::scope(|s| {
        let rx = s.spawn(|| {
            let (mut seen, mut since) = (0usize, Instant::now());
            let mut stuck = false;
            loop {
                let r = ep.poll_until(|st| {
                    if st.got.len() != seen {
                        (seen, since) = (st.got.len(), Instant::now());
                    }
                    stuck = since.elapsed() > NO_PROGRESS;
                    st.got.len() as u64 >= want || stuck
                });
                match r {
                    Ok(()) => break,
                    // A sender closes after its last request: an event.
                    Err(AmError::PeerClosed { .. }) => {}
                    Err(e) => {
                        finished.store(true, std::sync::atomic::Ordering::Relaxed);
                        panic!("{what}: the receiver failed: {e}")
                    }
                }
            }
            finished.store(true, std::sync::atomic::Ordering::Relaxed);
            (ep, stuck)
        });
        for snd in &mut senders {
            snd.say("go");
        }
        for _ in 0..STOPS {
            if finished.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(pause(&mut rng, 30_000));
            let victim = rng.below(u64::from(STOP_SENDERS)) as usize;
            if !senders[victim].running() {
                continue;
            }
            let pid = senders[victim].pid();
            signal(pid, libc::SIGSTOP);
            std::thread::sleep(Duration::from_millis(1 + rng.below(200)));
            signal(pid, libc::SIGCONT);
        }
        rx.join().expect("receiver thread")
    });
    let (ep, stuck) = ep;
    let st = ep.state();
    assert!(st.bad.is_empty(), "{what}: {:?}", st.bad);
    for r in 1..size {
        let got = (0..STOP_K).filter(|&n| st.got.contains(&(r, n))).count() as u64;
        assert_eq!(
            got,
            STOP_K,
            "{what}: rank {r} delivered {got} of {STOP_K} requests (no delivery for {NO_PROGRESS:?}: {stuck}; stats {:?})",
            ep.stats()
        );
    }
    assert_eq!(
        st.got.len() as u64,
        want,
        "{what}: requests never sent arrived"
    );
    for snd in &mut senders {
        let status = snd.wait();
        assert!(status.success(), "{what}: a sender failed: {status}");
    }
    drop(ep);
    symmetry_am::job::cleanup_job(&job.name);
}

macro_rules! stop_tests {
    ($($test:ident => $ty:ty, $n:literal;)*) => {$(
        #[test]
        fn $test() {
            for r in 0..STOP_ROUNDS {
                stopped_round::<$ty>(($n << 32) | (2 << 30) | r);
            }
        }
    )*};
}

stop_tests! {
    stopped_senders_lose_nothing_tas => symmetry_am::claim::TasClaim, 0;
    stopped_senders_lose_nothing_ttas => symmetry_am::claim::TtasClaim, 1;
    stopped_senders_lose_nothing_ticket => symmetry_am::claim::TicketClaim, 2;
    stopped_senders_lose_nothing_anderson => symmetry_am::claim::AndersonClaim, 3;
    stopped_senders_lose_nothing_pthread => symmetry_am::claim::PthreadClaim, 4;
    stopped_senders_lose_nothing_lock_free => symmetry_am::claim::LockFree, 5;
    stopped_senders_lose_nothing_stamp => symmetry_am::claim::Stamp, 6;
    stopped_senders_lose_nothing_rings => symmetry_am::claim::Rings, 7;
}
