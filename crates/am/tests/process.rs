//! Process tests of `symmetry-am` (SPEC §2.3, "Beyond LC98"; §4 "a dead
//! peer"): ranks are real processes running the `am-selftest` binary.
//!
//! * every claim algorithm under the SPMD launcher: an all-to-all exchange
//!   on tiny queues, every message checked and counted once, with and
//!   without bulk data, and no segment left behind;
//! * a sender killed while holding a CLAIMED packet (and bulk block) does
//!   not wedge the receiver: the receiver recovers the slot, counts it,
//!   and delivers everything sent after it;
//! * a receiver that died (or closed its endpoint) turns into
//!   `PeerDead` / `PeerClosed` at its senders instead of a hang;
//! * a rank crashing under the launcher fails the job, the other ranks
//!   are killed and the job's segments removed;
//! * `cleanup_stale` removes the segments of dead launchers and dead
//!   ranks, whatever the job is called, and nothing live.
//!
//! The tests synchronize with the children through lines on their stdout
//! and stdin (`claimed`, `joined`, `go`, `done`), never through sleeps; the
//! deadlines below are hang guards only.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use common::{CFG, GUARD, Kid, SELFTEST, Stall, assert_cleaned, own_job};

use symmetry_am::{AmError, Claim, Endpoint, Job, Msg, Token, claim::NAMES, job, segment};

/// Requests per source and destination in the launcher exchange.
const EXCHANGE_N: &str = "600";

/// Requests the surviving sender sends after a sender died holding a claim
/// (several times the ring, so that it has to wait for the recovery).
const K: u64 = 24;

// ---------------------------------------------------------------------------
// a. every algorithm under the launcher

fn exchange(bulk: bool) {
    for &alg in NAMES {
        let mut args = vec!["exchange".into(), alg.into(), EXCHANGE_N.into()];
        if bulk {
            args.push("--bulk".into());
        }
        let start = Instant::now();
        let out = job::spawn(3, Path::new(SELFTEST), &args).expect("spawn");
        eprintln!(
            "exchange {alg}{}: {:?}",
            if bulk { " --bulk" } else { "" },
            start.elapsed()
        );
        assert!(
            out.success(),
            "exchange {alg} (bulk: {bulk}) failed: {}",
            out.failures()
        );
        assert_eq!(out.cleaned, 0, "{alg}: a clean run leaves no segment");
        let left = job::job_segments(&out.job);
        assert!(left.is_empty(), "{alg}: segments left: {left:?}");
    }
}

#[test]
fn exchange_every_algorithm() {
    exchange(false);
}

#[test]
fn exchange_every_algorithm_bulk() {
    exchange(true);
}

// ---------------------------------------------------------------------------
// b. a sender dies holding a CLAIMED packet

#[derive(Debug)]
struct Count {
    bulk: bool,
    got: u64,
    seen: Vec<bool>,
    errors: Vec<String>,
}

fn count<C: Claim>(t: &mut Token<'_, C, Count>, m: &Msg<'_>) -> Result<(), AmError> {
    let st = t.state();
    let seq = m.args.first().copied().unwrap_or(u64::MAX);
    if m.src != 2 || m.args.len() != 1 || seq >= K {
        st.errors
            .push(format!("unexpected message {m:?} (only rank 2 sends)"));
        return Ok(());
    }
    let bulk_ok = if st.bulk {
        (1..=CFG.bulk_bytes as usize).contains(&m.bulk.len())
    } else {
        m.bulk.is_empty()
    };
    if !bulk_ok {
        st.errors
            .push(format!("#{seq}: {} bulk bytes", m.bulk.len()));
    }
    if std::mem::replace(&mut st.seen[seq as usize], true) {
        st.errors.push(format!("#{seq} delivered twice"));
    }
    st.got += 1;
    Ok(())
}

fn dead_sender<C: Claim>(bulk: bool) {
    eprintln!("dead sender: {} (bulk: {bulk})", C::NAME);
    let job = own_job(3);
    let flag = |v: &mut Vec<&str>| {
        if bulk {
            v.push("--bulk");
        }
    };
    let mut a = vec!["hold-claim", C::NAME, "0"];
    flag(&mut a);
    let mut holder = Kid::start(&job, 1, &a);
    let k = K.to_string();
    let mut a = vec!["send", C::NAME, "0", k.as_str(), "--go"];
    flag(&mut a);
    let mut sender = Kid::start(&job, 2, &a);
    let state = Count {
        bulk,
        got: 0,
        seen: vec![false; K as usize],
        errors: Vec::new(),
    };
    let mut ep = Endpoint::<C, Count>::join(&job, &CFG, state).expect("join");
    ep.register(0, count::<C>).unwrap();

    // Rank 1 holds the packet at the head of our request queue; kill it.
    holder.expect("claimed");
    sender.expect("joined");
    let st = holder.kill();
    assert_eq!(st.signal(), Some(libc::SIGKILL), "holder: {st:?}");

    // Rank 2's K messages queue up behind the dead claim (and wait for it
    // on the full ring): all of them arrive once it is recovered.
    sender.say("go");
    let mut stall = Stall::new();
    while ep.state().got < K {
        // The recovery needs a few thousand polls that find the dead
        // claim at the head: poll in bursts, yield between them.
        for _ in 0..256 {
            ep.poll().expect("poll");
        }
        assert!(
            !stall.stuck(ep.state().got),
            "{}: {} of {K} delivered, then none for {GUARD:?}; stats {:?}",
            C::NAME,
            ep.state().got,
            ep.stats()
        );
        std::thread::yield_now();
    }
    sender.expect("done");
    let st = sender.wait();
    assert!(st.success(), "sender: {st:?}");

    let stats = ep.stats();
    // Under `rings` the dead claim is in the dead sender's own lane, in
    // nobody's way: nothing to recover.
    let dead_claims = u64::from(!C::PER_SENDER);
    assert_eq!(
        stats.recovered_packets,
        dead_claims,
        "{}: {stats:?}",
        C::NAME
    );
    assert_eq!(
        stats.recovered_bulk,
        u64::from(bulk),
        "{}: {stats:?}",
        C::NAME
    );
    assert_eq!(stats.delivered, K, "{}: {stats:?}", C::NAME);
    let s = ep.state();
    assert!(s.errors.is_empty(), "{}: {:?}", C::NAME, s.errors);
    assert!(s.seen.iter().all(|&x| x), "{}", C::NAME);
    drop(ep);
    assert_cleaned(&job.name);
}

#[test]
fn dead_sender_holding_a_claim_is_recovered() {
    macro_rules! each {
        ($($name:literal => $ty:ty;)*) => {$( dead_sender::<$ty>(false); )*};
    }
    symmetry_am::for_each_claim!(each);
}

#[test]
fn dead_sender_holding_a_bulk_claim_is_recovered() {
    macro_rules! each {
        ($($name:literal => $ty:ty;)*) => {$( dead_sender::<$ty>(true); )*};
    }
    symmetry_am::for_each_claim!(each);
}

// ---------------------------------------------------------------------------
// c. a dead or closed receiver

#[derive(Debug, Default)]
struct Replies {
    replies: u64,
}

/// Sends short requests to `dest` until one fails; returns how many
/// succeeded and the error. A receiver that never polls takes exactly one
/// ring of them.
fn send_until_error<C: Claim>(ep: &mut Endpoint<C, Replies>, dest: u32) -> (u64, AmError) {
    let limit = u64::from(CFG.packets) + 8;
    for i in 0..=limit {
        if let Err(e) = ep.request(dest, 0, &[i]) {
            return (i, e);
        }
    }
    panic!(
        "{}: {} requests to a receiver that is gone all succeeded",
        C::NAME,
        limit + 1
    );
}

fn dead_receiver<C: Claim>() {
    eprintln!("dead receiver: {}", C::NAME);
    let job = own_job(2);
    let mut kid = Kid::start(&job, 1, &["idle", C::NAME]);
    let mut ep = Endpoint::<C, Replies>::join(&job, &CFG, Replies::default()).expect("join");
    kid.expect("joined");
    let pid = kid.pid();
    let st = kid.kill();
    assert_eq!(st.signal(), Some(libc::SIGKILL));

    let is_dead = |e: &AmError| matches!(e, AmError::PeerDead { rank: 1, pid: p } if *p == pid);
    let (ok, err) = send_until_error(&mut ep, 1);
    assert!(is_dead(&err), "{}: {err:?}", C::NAME);
    assert_eq!(
        ok,
        u64::from(CFG.packets),
        "{}: one ring of requests fits, then PeerDead",
        C::NAME
    );
    let msg = err.to_string();
    assert!(
        msg.contains("rank 1") && msg.contains(&pid.to_string()),
        "{msg}"
    );
    let err = ep.request_bulk(1, 0, &[1], &[7; 100]).unwrap_err();
    assert!(is_dead(&err), "{}: bulk: {err:?}", C::NAME);
    // Waiting for a reply that cannot come.
    let err = ep.poll_until(|s| s.replies > 0).unwrap_err();
    assert!(is_dead(&err), "{}: poll_until: {err:?}", C::NAME);
    let err = ep.check_peers().unwrap_err();
    assert!(is_dead(&err), "{}: check_peers: {err:?}", C::NAME);
    drop(ep);
    assert_cleaned(&job.name);
}

#[test]
fn dead_receiver_is_an_error_at_the_sender() {
    macro_rules! each {
        ($($name:literal => $ty:ty;)*) => {$( dead_receiver::<$ty>(); )*};
    }
    symmetry_am::for_each_claim!(each);
}

fn closed_receiver<C: Claim>() {
    let phase = std::sync::Barrier::new(2);
    let out = job::run_threads(2, |job| {
        let mut ep = Endpoint::<C, Replies>::join(&job, &CFG, Replies::default()).expect("join");
        phase.wait(); // both joined
        if job.rank == 1 {
            drop(ep);
            phase.wait(); // closed
            return None;
        }
        phase.wait();
        let (ok, err) = send_until_error(&mut ep, 1);
        assert!(
            matches!(err, AmError::PeerClosed { rank: 1 }),
            "{}: {err:?}",
            C::NAME
        );
        // A request to a peer that has closed fails at once: nothing is
        // queued where no one will ever read it.
        assert_eq!(ok, 0, "{}", C::NAME);
        let err2 = ep.poll_until(|s| s.replies > 0).unwrap_err();
        assert!(
            matches!(err2, AmError::PeerClosed { rank: 1 }),
            "{}: {err2:?}",
            C::NAME
        );
        Some(err.to_string())
    });
    let msg = out[0].as_deref().unwrap();
    assert!(msg.contains("rank 1") && msg.contains("closed"), "{msg}");
}

#[test]
fn closed_receiver_is_an_error_at_the_sender() {
    macro_rules! each {
        ($($name:literal => $ty:ty;)*) => {$( closed_receiver::<$ty>(); )*};
    }
    symmetry_am::for_each_claim!(each);
}

/// Peers that close their endpoint and exit at once, per algorithm.
const EXITS: usize = 40;

/// A peer that closes its endpoint and exits is reported closed, never
/// dead, however the looker's reads interleave with its exit: a process
/// sets the closed flag before it exits, so a flag read after its death
/// is final (a busy machine once made a looker read the flag, lose its
/// CPU, and find the process gone).
fn closing_peer<C: Claim>() {
    for _ in 0..EXITS {
        let job = own_job(2);
        let mut kid = Kid::start(&job, 1, &["send", C::NAME, "0", "1", "--go"]);
        // Its one request stays in the queue: nothing here polls.
        let ep = Endpoint::<C>::join(&job, &CFG, ()).expect("join");
        kid.expect("joined");
        kid.say("go");
        let mut stall = Stall::new();
        let err = loop {
            if let Err(e) = ep.check_peers() {
                break e;
            }
            assert!(!stall.stuck(0), "{}: rank 1 never closed", C::NAME);
        };
        assert!(
            matches!(err, AmError::PeerClosed { rank: 1 }),
            "{}: a peer that closed and exited was reported as {err:?}",
            C::NAME
        );
        assert!(kid.wait().success(), "{}: the sender failed", C::NAME);
        drop(ep);
        job::cleanup_job(&job.name);
    }
}

#[test]
fn closing_peer_is_never_taken_for_dead() {
    macro_rules! each {
        ($($name:literal => $ty:ty;)*) => {$( closing_peer::<$ty>(); )*};
    }
    symmetry_am::for_each_claim!(each);
}

/// How long the slow sender of `closed_peers_last_message` stays
/// descheduled after the closing peer has exited: longer than a sleeping
/// receiver's longest sleep (100 ms) and its checks' period (20 ms), so
/// that the receiver looks at the closed peer while its message is stuck.
const DESCHEDULED: std::time::Duration = std::time::Duration::from_millis(300);

/// Counts the requests of each source rank.
fn by_source<C: Claim>(t: &mut Token<'_, C, [u64; 3]>, m: &Msg<'_>) -> Result<(), AmError> {
    let src = m.src as usize;
    t.state()[src] += 1;
    Ok(())
}

/// A peer that sends its last message and closes is reported closed only
/// after that message is delivered, even when the message waits in the
/// queue behind a live sender that lost its CPU between its claim and
/// its READY store: the wait that needs the message completes instead
/// of failing with `PeerClosed` (a `barrier` in `finish` on a busy
/// machine once failed so, after its peer had completed it and left).
fn closed_peers_last_message<C: Claim>() {
    let job = own_job(3);
    let mut slow = Kid::start(&job, 1, &["slow-send", C::NAME, "0"]);
    let mut last = Kid::start(&job, 2, &["send", C::NAME, "0", "1", "--go"]);
    let mut ep = Endpoint::<C, [u64; 3]>::join(&job, &CFG, [0; 3]).expect("join");
    ep.register(0, by_source::<C>).expect("register");
    slow.expect("joined");
    last.expect("joined");
    // Rank 1 holds the position at the head of our request queue.
    slow.expect("claimed");
    // Rank 2 sends behind it, closes and exits.
    last.say("go");
    last.expect("done");
    let later = std::thread::spawn(move || {
        let ok = last.wait().success();
        std::thread::sleep(DESCHEDULED);
        slow.say("go");
        slow.expect("done");
        (ok, slow.wait().success())
    });
    let got = ep.poll_until(|s| s[2] == 1);
    let (last_ok, slow_ok) = later.join().expect("the releasing thread");
    assert!(
        got.is_ok(),
        "{}: rank 2's message, queued behind a live sender, was given up for {got:?}",
        C::NAME
    );
    assert!(last_ok && slow_ok, "{}: a sender failed", C::NAME);
    // Rank 1's message comes too; each closed peer is reported once.
    let mut stall = Stall::new();
    while ep.state()[1] == 0 {
        match ep.poll_until(|s| s[1] == 1) {
            Ok(()) | Err(AmError::PeerClosed { .. }) => {}
            Err(e) => panic!("{}: {e:?}", C::NAME),
        }
        assert!(!stall.stuck(0), "{}: rank 1's message never came", C::NAME);
    }
    assert_eq!(*ep.state(), [0, 1, 1], "{}", C::NAME);
    drop(ep);
    job::cleanup_job(&job.name);
}

#[test]
fn closed_peers_last_message_is_delivered_before_its_close() {
    macro_rules! each {
        ($($name:literal => $ty:ty;)*) => {$( closed_peers_last_message::<$ty>(); )*};
    }
    symmetry_am::for_each_claim!(each);
}

/// A bulk block whose sender published its message and then exited is
/// never freed by the sweep of dead senders' blocks, however the sweep's
/// looks interleave with the exit: its message names it, and the sweep
/// that found the sender alive must not find it dead later and free the
/// block under an undelivered message. A killed rank 1 leaves a block
/// the sweep frees, so that it runs; rank 2 publishes its bulk message
/// and exits in the middle of it.
fn sender_exiting_during_a_bulk_sweep<C: Claim>() {
    let job = own_job(3);
    let mut dead = Kid::start(&job, 1, &["hold-claim", C::NAME, "0", "--bulk"]);
    let mut late = Kid::start(&job, 2, &["send", C::NAME, "0", "1", "--bulk", "--go"]);
    let mut ep = Endpoint::<C>::join(&job, &CFG, ()).expect("join");
    dead.expect("claimed");
    late.expect("joined");
    dead.kill();
    let mut late_ok = false;
    let freed = ep.debug_sweep_bulk(|| {
        late.say("go");
        late.expect("done");
        late_ok = late.wait().success();
    });
    assert!(late_ok, "{}: rank 2 failed", C::NAME);
    assert_eq!(
        freed,
        1,
        "{}: the sweep freed the block of a message still in the queue",
        C::NAME
    );
    drop(ep);
    job::cleanup_job(&job.name);
}

#[test]
fn a_published_bulk_block_is_never_swept() {
    macro_rules! each {
        ($($name:literal => $ty:ty;)*) => {$( sender_exiting_during_a_bulk_sweep::<$ty>(); )*};
    }
    symmetry_am::for_each_claim!(each);
}

// ---------------------------------------------------------------------------
// d. a crash under the launcher

#[test]
fn crash_under_the_launcher_fails_the_job() {
    for alg in ["stamp", "lock-free", "pthread"] {
        let args = ["abort-after-join".into(), alg.into()];
        let out = job::spawn(3, Path::new(SELFTEST), &args).expect("spawn");
        assert!(!out.success(), "{alg}: {out:?}");
        let f = out.failures();
        assert!(
            f.contains(&format!("rank 1 was killed by signal {}", libc::SIGABRT)),
            "{alg}: {f}"
        );
        assert_eq!(out.statuses[1].signal(), Some(libc::SIGABRT), "{alg}");
        // Ranks 0 and 2 sleep forever after joining: only the launcher
        // can have ended them.
        for r in [0, 2] {
            assert_eq!(
                out.statuses[r].signal(),
                Some(libc::SIGKILL),
                "{alg}: rank {r}: {:?}",
                out.statuses[r]
            );
        }
        let left = job::job_segments(&out.job);
        assert!(left.is_empty(), "{alg}: segments left: {left:?}");
    }
}

// ---------------------------------------------------------------------------
// e. stale segments

#[test]
fn cleanup_stale_removes_only_dead_jobs() {
    let mut c = Command::new("true").spawn().expect("spawn true");
    let dead_pid = c.id();
    c.wait().expect("wait");
    assert!(!Path::new(&format!("/proc/{dead_pid}")).exists());
    let dead = format!("/dev/shm/symmetry-am.{dead_pid}-x.0");
    let live = format!(
        "/dev/shm/symmetry-am.{}-stale{:x}.0",
        std::process::id(),
        dead_pid
    );
    std::fs::write(&dead, b"left by a killed launcher").unwrap();
    std::fs::write(&live, b"a live job").unwrap();
    job::cleanup_stale();
    let dead_left = Path::new(&dead).exists();
    let live_left = Path::new(&live).exists();
    let _ = std::fs::remove_file(&dead);
    let _ = std::fs::remove_file(&live);
    assert!(!dead_left, "{dead} of dead pid {dead_pid} was not removed");
    assert!(live_left, "{live} of a live job was removed");
}

/// A rank of a job under a custom name (no launcher pid in it) that is
/// killed leaves its segment; `cleanup_stale` removes it because its
/// creator is dead, and keeps a live endpoint's.
#[test]
fn cleanup_stale_removes_a_custom_named_jobs_dead_rank() {
    let job = Job::new(format!("my-custom-job-{}", std::process::id()), 0, 2).with_timeout(GUARD);
    let mut dead = Kid::start(&job, 1, &["idle", "stamp"]);
    let live = Endpoint::<symmetry_am::claim::Stamp>::join(&job, &CFG, ()).expect("join");
    dead.expect("joined");
    dead.kill();
    job::cleanup_stale();
    let left = job::job_segments(&job.name);
    drop(live);
    assert_eq!(
        left,
        vec![segment::segment_name(&job.name, 0)[1..].to_string()],
        "only the live rank's segment stays"
    );
    assert_cleaned(&job.name);
}
