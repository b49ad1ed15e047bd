//! Hostile shared memory: whatever a peer writes into the segments, an
//! endpoint returns an error or goes on, never crashes or reads out of
//! bounds (issue: "trust nothing in shared memory").
//!
//! * property: random bytes written over a peer's header before `join`
//!   make the join fail with an error (or succeed, for bytes it does not
//!   use), never crash;
//! * the same while `join` runs, from another thread;
//! * a header rewritten after `join` (queue sizes, rank, size) changes
//!   nothing: the views were built from the validated copy;
//! * property: random packet bodies made READY in a live queue are
//!   dropped as `Garbage` (or refused as `NoHandler`), and a real message
//!   sent afterwards is delivered;
//! * random handshake words and tails in a live queue: polls return,
//!   errors only;
//! * another user's segment (a process run as `nobody`), a pre-created
//!   name, and a mode other than 0600 are refused with clear errors.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use symmetry_am::claim::{LockFree, Rings, Stamp};
use symmetry_am::segment::{self, HEADER_BYTES, Segment};
use symmetry_am::{AmError, Claim, Endpoint, Job, Msg, Token, job};

mod common;

use common::{CFG, GUARD, SELFTEST, SHORT};

/// A writable mapping of an existing segment, as a hostile peer has it.
struct Raw {
    base: *mut u8,
    len: usize,
}

impl Raw {
    fn map(name: &str) -> Raw {
        let path = format!("/dev/shm{name}");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("open {path}: {e}"));
        let len = file.metadata().unwrap().len() as usize;
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared mapping of an open file; nothing else is
        // affected.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED, "mmap {path}");
        Raw {
            base: base.cast(),
            len,
        }
    }

    /// Writes `bytes` at `off` (clipped to the mapping), as another
    /// process would: volatile, racing whatever the endpoint does.
    fn write(&self, off: usize, bytes: &[u8]) {
        for (i, b) in bytes.iter().enumerate() {
            if off + i < self.len {
                // SAFETY: in bounds of the mapping.
                unsafe { self.base.add(off + i).write_volatile(*b) };
            }
        }
    }

    fn write_u64(&self, off: usize, v: u64) {
        self.write(off, &v.to_ne_bytes());
    }
}

// SAFETY: the mapping is plain shared memory, written with volatile stores.
unsafe impl Send for Raw {}
// SAFETY: as above.
unsafe impl Sync for Raw {}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: we mapped exactly this range.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// A job of two ranks in this process; rank 0 is the one under test.
/// Its joins wait [`SHORT`]: the tests that use it make peers that never
/// become right.
fn job2(tag: &str) -> Job {
    Job::new(format!("{}-hostile-{tag}", Job::new_name()), 0, 2).with_timeout(SHORT)
}

/// As [`job2`], for two ranks that both join for real: their joins wait
/// for each other, which on a busy machine can take far longer than
/// [`SHORT`] (a hang guard only).
fn live_job2(tag: &str) -> Job {
    job2(tag).with_timeout(GUARD)
}

fn cleanup(job: &Job) {
    job::cleanup_job(&job.name);
}

// ---------------------------------------------------------------------------
// headers

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Bytes anywhere in a peer's header page before the join: an error
    /// or a working endpoint.
    #[test]
    fn mutated_peer_header_before_join(off in 0usize..96, bytes in prop::collection::vec(any::<u8>(), 1..16)) {
        let job = job2("pre");
        let peer = Segment::create::<Stamp>(&segment::segment_name(&job.name, 1), &CFG, 1, 2).unwrap();
        Raw::map(peer.name()).write(off, &bytes);
        match Endpoint::<Stamp>::join(&job, &CFG, ()) {
            Ok(ep) => {
                // Only bytes the join does not rely on may leave it
                // working, and then with the job's own sizes.
                prop_assert_eq!(ep.config(), CFG);
            }
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(!msg.is_empty());
            }
        }
        drop(peer);
        cleanup(&job);
    }
}

/// A thread rewrites a peer's header with random words while rank 0
/// joins, over and over: every join returns.
#[test]
fn header_rewritten_during_join() {
    let job = job2("during");
    let peer = Segment::create::<Stamp>(&segment::segment_name(&job.name, 1), &CFG, 1, 2).unwrap();
    let raw = Raw::map(peer.name());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut x = 0x1234_5678_9abc_def0u64;
            while !stop.load(Ordering::Relaxed) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let off = 8 * ((x >> 40) as usize % 10);
                raw.write_u64(off, x);
            }
        });
        for _ in 0..200 {
            if let Ok(ep) = Endpoint::<Stamp>::join(&job, &CFG, ()) {
                drop(ep);
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    drop(peer);
    cleanup(&job);
}

fn add(t: &mut Token<'_, Stamp, u64>, m: &Msg<'_>) -> Result<(), AmError> {
    *t.state() += m.args[0];
    Ok(())
}

/// After both ranks joined, rank 1 rewrites both headers (queue sizes
/// that would put every view out of bounds, another rank and job size):
/// the exchange goes on unaffected.
#[test]
fn header_rewritten_after_join_changes_nothing() {
    let phase = Barrier::new(2);
    let name = Job::new_name();
    let sums = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|rank| {
                let (phase, name) = (&phase, &name);
                s.spawn(move || {
                    let job = Job::new(name.clone(), rank, 2);
                    let mut ep = Endpoint::<Stamp, u64>::join(&job, &CFG, 0).unwrap();
                    ep.register(0, add).unwrap();
                    phase.wait();
                    if rank == 1 {
                        for r in 0..2 {
                            let raw = Raw::map(&segment::segment_name(name, r));
                            // Version through job size (bytes 8..68);
                            // the closed flag after them is a signal a
                            // peer may forge (it ends the exchange, as
                            // closing would), not data the views use.
                            raw.write(8, &[0xff; 60]);
                        }
                    }
                    phase.wait();
                    for i in 0..1000 {
                        ep.request(1 - rank, 0, &[i]).unwrap();
                        ep.poll().unwrap();
                    }
                    let want = 999 * 1000 / 2;
                    ep.poll_until(|s| *s >= want).unwrap();
                    let got = *ep.state();
                    ep.finish().unwrap();
                    got
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert_eq!(sums, vec![999 * 1000 / 2; 2]);
    job::cleanup_job(&name);
}

// ---------------------------------------------------------------------------
// live queues

/// Byte offset of packet `i` of rank 0's request queue for `C`.
fn packet_offset<C: Claim>(i: usize) -> usize {
    HEADER_BYTES + CFG.queue_layout::<C>(2).packets + 128 * i
}

fn count(t: &mut Token<'_, Stamp, u64>, _m: &Msg<'_>) -> Result<(), AmError> {
    *t.state() += 1;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// READY packets with random bodies (and READY_BULK ones with random
    /// block numbers and lengths) in rank 0's queue: each is delivered,
    /// dropped as garbage or refused, and a real request sent afterwards
    /// arrives.
    #[test]
    fn garbage_bodies_are_dropped(bodies in prop::collection::vec((any::<bool>(), prop::collection::vec(any::<u8>(), 120)), 1..=4)) {
        let job = live_job2("bodies");
        let peer_job = job.clone().with_rank(1);
        let r = std::thread::scope(|s| {
            let peer = s.spawn(|| Endpoint::<Stamp, u64>::join(&peer_job, &CFG, 0).unwrap());
            let mut ep = Endpoint::<Stamp, u64>::join(&job, &CFG, 0).unwrap();
            ep.register(0, count).unwrap();
            let mut peer = peer.join().unwrap();
            let raw = Raw::map(&segment::segment_name(&job.name, 0));
            for (i, (bulk, body)) in bodies.iter().enumerate() {
                raw.write(packet_offset::<Stamp>(i) + 8, body);
                // READY (2) or READY_BULK (3) for lap 0, pid 0.
                raw.write_u64(packet_offset::<Stamp>(i), if *bulk { 3 } else { 2 });
            }
            let mut errors = Vec::new();
            for _ in 0..bodies.len() * 2 {
                match ep.poll() {
                    Ok(_) => {}
                    Err(e @ (AmError::Garbage { .. } | AmError::NoHandler { .. })) => errors.push(e.to_string()),
                    Err(e) => return Err(format!("unexpected error: {e}")),
                }
            }
            let before = *ep.state();
            peer.request(0, 0, &[7]).map_err(|e| e.to_string())?;
            for _ in 0..1_000_000 {
                let _ = ep.poll();
                if *ep.state() > before {
                    return Ok(errors);
                }
            }
            Err(format!("a real request after the garbage never arrived (errors: {errors:?})"))
        });
        cleanup(&job);
        prop_assert!(r.is_ok(), "{:?}", r);
    }
}

/// Random handshake words and tail bytes in rank 0's queues: polls keep
/// returning, with errors at most, for a claim algorithm with each kind of
/// tail.
fn random_words<C: Claim>() {
    let job = live_job2(&format!("words-{}", C::NAME));
    let peer_job = job.clone().with_rank(1);
    std::thread::scope(|s| {
        let peer = s.spawn(|| Endpoint::<C, u64>::join(&peer_job, &CFG, 0).unwrap());
        let mut ep = Endpoint::<C, u64>::join(&job, &CFG, 0).unwrap();
        let _peer = peer.join().unwrap();
        let raw = Raw::map(&segment::segment_name(&job.name, 0));
        let mut rng = symmetry_locks::platform::rng::SplitMix64::new(1);
        for _ in 0..2_000 {
            let x = rng.next_u64();
            let off = if x & 1 == 0 {
                packet_offset::<C>((x >> 8) as usize % CFG.ring_packets::<C>(2))
            } else {
                // The header, then the queue's tail (under `rings`, the
                // summary word and the lanes' heads).
                HEADER_BYTES + (x >> 8) as usize % (256 + core::mem::size_of::<C::Tail>())
            };
            raw.write_u64(off & !7, x);
            let _ = ep.poll();
        }
        assert!(ep.check_peers().is_ok());
    });
    cleanup(&job);
}

#[test]
fn random_words_in_live_queues() {
    random_words::<Stamp>();
    random_words::<LockFree>();
    random_words::<Rings>();
}

// ---------------------------------------------------------------------------
// ownership

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A segment of mode 0644 is refused before a byte of it is read.
#[test]
fn open_segment_of_other_mode_is_refused() {
    let job = job2("mode");
    let peer = Segment::create::<Stamp>(&segment::segment_name(&job.name, 1), &CFG, 1, 2).unwrap();
    let path = format!("/dev/shm{}", peer.name());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = Endpoint::<Stamp>::join(&job, &CFG, ()).unwrap_err();
    assert!(matches!(e, AmError::Untrusted { .. }), "{e:?}");
    assert!(e.to_string().contains("0644"), "{e}");
    drop(peer);
    cleanup(&job);
}

/// A name taken by a live endpoint is `NameTaken`, not a silent join; a
/// stale one of this user (its owner dead) is reused.
#[test]
fn taken_and_stale_names() {
    let name = format!("/symmetry-am.{}-taken.0", Job::new_name());
    let first = Segment::create::<Stamp>(&name, &CFG, 0, 1).unwrap();
    let e = Segment::create::<Stamp>(&name, &CFG, 0, 1).unwrap_err();
    assert!(matches!(e, AmError::NameTaken { .. }), "{e:?}");
    assert!(e.to_string().contains("live endpoint"), "{e}");
    // Make it look like a dead process's: rewrite the owner pid.
    let mut c = Command::new("true").spawn().unwrap();
    let dead = c.id();
    c.wait().unwrap();
    Raw::map(&name).write(68, &dead.to_ne_bytes());
    drop(first);
    let again = Segment::create::<Stamp>(&name, &CFG, 0, 1).expect("a stale name is reused");
    assert_eq!(again.owner_pid(), std::process::id());
    drop(again);
    let _ = segment::unlink(&name);
}

/// How long `a_name_removed_while_looked_at_is_created_afresh` churns.
const CHURN: Duration = Duration::from_secs(2);

/// A name whose previous endpoint removes it between a creator's failed
/// exclusive create and the creator's look at what is there is created
/// afresh: the creator is never refused with "it exists and cannot be
/// opened" for a name that no longer exists (a job run again under its
/// name while the previous run's rank is still closing).
#[test]
fn a_name_removed_while_looked_at_is_created_afresh() {
    let name = format!("/symmetry-am.{}-churn.0", Job::new_name());
    let stop = AtomicBool::new(false);
    let refused = std::thread::scope(|s| {
        // The previous owner: creates the name and removes it, again and
        // again, as endpoints that join and close do.
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(seg) = Segment::create::<Stamp>(&name, &CFG, 0, 1) {
                    let _ = segment::unlink(&name);
                    drop(seg);
                }
            }
        });
        let start = std::time::Instant::now();
        let mut refused = None;
        while refused.is_none() && start.elapsed() < CHURN {
            match Segment::create::<Stamp>(&name, &CFG, 0, 1) {
                Ok(seg) => {
                    let _ = segment::unlink(&name);
                    drop(seg);
                }
                // The other endpoint holds the name (built or being built).
                Err(AmError::NameTaken { detail, .. }) if !detail.contains("cannot be opened") => {}
                Err(e) => refused = Some(e),
            }
        }
        stop.store(true, Ordering::Relaxed);
        refused
    });
    let _ = segment::unlink(&name);
    assert!(refused.is_none(), "{refused:?}");
}

/// Runs `am-selftest idle stamp` as user `nobody` (root only), as rank
/// `rank` of `job`; returns the child once it has joined.
fn as_nobody(job: &Job, rank: u32) -> Option<std::process::Child> {
    if !is_root() {
        eprintln!("skipped: not root, cannot run a process as another user");
        return None;
    }
    let mut cmd = Command::new(SELFTEST);
    cmd.args(["idle", "stamp"])
        .env(job::ENV_JOB, &job.name)
        .env(job::ENV_RANK, rank.to_string())
        .env(job::ENV_SIZE, job.size.to_string())
        .uid(65534)
        .gid(65534)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("start am-selftest as nobody");
    // It creates its segment, then waits for ours; wait for its segment.
    let want = segment::segment_name(&job.name, rank)[1..].to_string();
    for _ in 0..2_000 {
        if job::job_segments(&job.name).contains(&want) {
            return Some(child);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the process run as nobody never created {want}");
}

/// Another user's process (`nobody`) takes part in a job: its segment is
/// refused by this user's rank, and a name it pre-created is not joined.
#[test]
fn other_users_segments_are_refused() {
    let job = job2("nobody");
    let Some(mut kid) = as_nobody(&job, 1) else {
        return;
    };
    // Opened directly: a whole join would first create rank 0's segment,
    // which the other user's process would refuse in turn and then exit,
    // removing its own segment under our feet.
    let e = Segment::open::<Stamp>(&segment::segment_name(&job.name, 1), SHORT).unwrap_err();
    assert!(matches!(e, AmError::Untrusted { .. }), "{e:?}");
    assert!(e.to_string().contains("uid 65534"), "{e}");
    let _ = kid.kill();
    let _ = kid.wait();
    cleanup(&job);

    // The other user creates rank 0's name first: our create refuses it.
    let job = job2("squat");
    let Some(mut kid) = as_nobody(&job, 0) else {
        return;
    };
    let e = Endpoint::<Stamp>::join(&job, &CFG, ()).unwrap_err();
    assert!(matches!(e, AmError::NameTaken { .. }), "{e:?}");
    assert!(e.to_string().contains("uid 65534"), "{e}");
    let _ = kid.kill();
    let _ = kid.wait();
    cleanup(&job);
}
