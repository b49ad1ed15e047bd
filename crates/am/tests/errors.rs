//! Bad input gets a clear error, never a panic (SPEC §4): foreign,
//! half-built, truncated, mis-versioned or wrong-algorithm segments;
//! handler ids, word counts, bulk sizes and ranks out of range; messages to
//! unregistered handlers; misplaced replies; bad queue sizes and job
//! descriptions; bad arguments to the `am-selftest` rank program.
//!
//! Raw segments are files under `/dev/shm` named `symmetry-am.test-<pid>-*`
//! (a name `cleanup_stale` never takes for a job of a dead launcher), removed
//! by a guard at the end of each test. `Job::from_env` reads process-global
//! variables, so it is exercised in child processes (`am-selftest
//! from-env`), never by changing this process's environment.

use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use symmetry_am::claim::{LockFree, Stamp};
use symmetry_am::segment::{self, MAGIC, Segment, VERSION};
use symmetry_am::{AmError, Claim, Config, Endpoint, Job, Msg, Token, USER_HANDLERS, job};

mod common;

use common::{CFG, SELFTEST, SHORT};

/// A unique segment name of this test process, unlinked on drop.
struct ShmName {
    name: String,
}

impl ShmName {
    fn new(tag: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Self {
            name: format!("/symmetry-am.test-{}-{tag}-{n}", std::process::id()),
        }
    }

    fn path(&self) -> PathBuf {
        PathBuf::from(format!("/dev/shm{}", self.name))
    }

    fn file(&self) -> std::fs::File {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.path())
            .unwrap()
    }

    /// Creates a valid endpoint segment for `C` and unmaps it; returns its
    /// length.
    fn create<C: Claim>(&self) -> u64 {
        drop(Segment::create::<C>(&self.name, &CFG, 0, 1).expect("create"));
        std::fs::metadata(self.path()).unwrap().len()
    }
}

impl Drop for ShmName {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.path());
    }
}

/// Writes `data` to `path` as a new file of mode 0600, as a segment of
/// this user is (an opener refuses any other mode before it reads a byte).
fn write_private(path: impl AsRef<std::path::Path>, data: impl AsRef<[u8]>) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?
        .write_all(data.as_ref())
}

/// Checks that `e`'s message names `name` and contains every `parts`.
fn says(e: &AmError, name: &str, parts: &[&str]) {
    let msg = e.to_string();
    assert!(msg.contains(name), "{msg:?} does not name {name}");
    for p in parts {
        assert!(msg.contains(p), "{msg:?} does not say {p:?}");
    }
}

// ---------------------------------------------------------------------------
// segments

#[test]
fn missing_segment_times_out() {
    let s = ShmName::new("missing");
    let start = Instant::now();
    let e = Segment::open::<Stamp>(&s.name, SHORT).unwrap_err();
    assert!(matches!(e, AmError::Timeout { .. }), "{e:?}");
    says(&e, &s.name, &["timed out", "created"]);
    // A hang guard, not a timing assertion: it did give up.
    assert!(start.elapsed() < Duration::from_secs(30));
}

#[test]
fn foreign_segment_is_bad_magic() {
    let s = ShmName::new("garbage");
    write_private(s.path(), vec![0xab; 3 * 4096]).unwrap();
    let e = Segment::open::<Stamp>(&s.name, SHORT).unwrap_err();
    assert!(
        matches!(&e, AmError::BadMagic { found, .. } if *found == 0xabab_abab_abab_abab),
        "{e:?}"
    );
    says(
        &e,
        &s.name,
        &["not a symmetry-am endpoint", &format!("{MAGIC:#018x}")],
    );

    // All zeros: a creator that never finished (the opener waits for the
    // magic, then gives up).
    let z = ShmName::new("zeros");
    write_private(z.path(), vec![0; 3 * 4096]).unwrap();
    let e = Segment::open::<Stamp>(&z.name, SHORT).unwrap_err();
    assert!(matches!(&e, AmError::BadMagic { found: 0, .. }), "{e:?}");
    says(&e, &z.name, &["expected"]);
}

#[test]
fn valid_segment_opens_and_header_layout_is_stable() {
    let s = ShmName::new("valid");
    let len = s.create::<Stamp>();
    assert_eq!(len as usize, CFG.segment_bytes::<Stamp>(1));
    let seg = Segment::open::<Stamp>(&s.name, SHORT).expect("open a valid segment");
    assert_eq!(seg.config(), CFG);
    assert_eq!(seg.owner_pid(), std::process::id());
    assert!(!seg.is_closed());
    // The #[repr(C)] header: magic u64 at 0, version u32 at 8.
    let f = s.file();
    let mut w = [0u8; 8];
    f.read_exact_at(&mut w, 0).unwrap();
    assert_eq!(u64::from_ne_bytes(w), MAGIC);
    let mut v = [0u8; 4];
    f.read_exact_at(&mut v, 8).unwrap();
    assert_eq!(u32::from_ne_bytes(v), VERSION);
}

#[test]
fn patched_version_is_bad_version() {
    let s = ShmName::new("version");
    s.create::<Stamp>();
    let bad = VERSION + 98;
    s.file().write_all_at(&bad.to_ne_bytes(), 8).unwrap();
    let e = Segment::open::<Stamp>(&s.name, SHORT).unwrap_err();
    assert!(
        matches!(&e, AmError::BadVersion { found, expected, .. } if *found == bad && *expected == VERSION),
        "{e:?}"
    );
    says(
        &e,
        &s.name,
        &[
            &format!("version {bad}"),
            &format!("reads version {VERSION}"),
        ],
    );
}

#[test]
fn truncated_or_extended_segment_is_bad_size() {
    let s = ShmName::new("short");
    let len = s.create::<Stamp>();
    s.file().set_len(len - 4096).unwrap();
    let e = Segment::open::<Stamp>(&s.name, SHORT).unwrap_err();
    assert!(matches!(e, AmError::BadSize { .. }), "{e:?}");
    says(
        &e,
        &s.name,
        &[&len.to_string(), &(len - 4096).to_string(), "truncated"],
    );

    let l = ShmName::new("long");
    let len = l.create::<Stamp>();
    l.file().set_len(len + 4096).unwrap();
    let e = Segment::open::<Stamp>(&l.name, SHORT).unwrap_err();
    assert!(matches!(e, AmError::BadSize { .. }), "{e:?}");
    says(&e, &l.name, &[&len.to_string(), &(len + 4096).to_string()]);

    // Smaller than the header: waited for (a creator before ftruncate),
    // then refused.
    let t = ShmName::new("tiny");
    write_private(t.path(), [0u8; 100]).unwrap();
    let e = Segment::open::<Stamp>(&t.name, SHORT).unwrap_err();
    assert!(matches!(e, AmError::BadSize { .. }), "{e:?}");
    says(&e, &t.name, &["100 bytes", "4096-byte header"]);

    let z = ShmName::new("empty");
    write_private(z.path(), []).unwrap();
    let e = Segment::open::<Stamp>(&z.name, SHORT).unwrap_err();
    assert!(matches!(e, AmError::BadSize { .. }), "{e:?}");
    says(&e, &z.name, &["0 bytes"]);
}

fn wrong_algorithm<C: Claim>() {
    if C::NAME != Stamp::NAME {
        let s = ShmName::new("alg");
        s.create::<C>();
        let e = Segment::open::<Stamp>(&s.name, SHORT).unwrap_err();
        assert!(
            matches!(&e, AmError::WrongAlgorithm { found, expected: "stamp", .. } if found == C::NAME),
            "{e:?}"
        );
        says(
            &e,
            &s.name,
            &[&format!("'{}'", C::NAME), "'stamp'", "one algorithm"],
        );
    }
    if C::NAME != LockFree::NAME {
        let s = ShmName::new("alg");
        s.create::<LockFree>();
        let e = Segment::open::<C>(&s.name, SHORT).unwrap_err();
        assert!(
            matches!(&e, AmError::WrongAlgorithm { found, expected, .. } if found == "lock-free" && *expected == C::NAME),
            "{e:?}"
        );
        says(&e, &s.name, &["'lock-free'", &format!("'{}'", C::NAME)]);
    }
}

#[test]
fn other_algorithm_is_wrong_algorithm() {
    macro_rules! each {
        ($($name:literal => $ty:ty;)*) => {$( wrong_algorithm::<$ty>(); )*};
    }
    symmetry_am::for_each_claim!(each);
}

/// A job of this process whose rank 1 segment the test forges; rank 0
/// joins it.
fn forged_job(tag: &str) -> (Job, ShmName) {
    let unique = ShmName::new(tag);
    let job = Job::new(unique.name["/symmetry-am.".len()..].to_string(), 0, 2).with_timeout(SHORT);
    let peer = ShmName {
        name: segment::segment_name(&job.name, 1),
    };
    (job, peer)
}

/// Joins as rank 0 and checks that the error leaves no segment of ours.
fn join_fails(job: &Job, cfg: &Config) -> AmError {
    let e = Endpoint::<Stamp>::join(job, cfg, ()).unwrap_err();
    let left = job::job_segments(&job.name);
    assert!(
        left.iter().all(|n| n.ends_with(".1")),
        "a failed join left its own segment: {left:?}"
    );
    e
}

#[test]
fn join_refuses_bad_peers() {
    // Missing.
    let (job, peer) = forged_job("jmissing");
    let e = join_fails(&job, &CFG);
    assert!(matches!(e, AmError::Timeout { .. }), "{e:?}");
    says(&e, &peer.name, &[]);

    // Foreign.
    let (job, peer) = forged_job("jforeign");
    write_private(peer.path(), vec![0x5a; 3 * 4096]).unwrap();
    let e = join_fails(&job, &CFG);
    assert!(matches!(e, AmError::BadMagic { .. }), "{e:?}");
    says(&e, &peer.name, &[]);

    // Another algorithm.
    let (job, peer) = forged_job("jalg");
    drop(Segment::create::<LockFree>(&peer.name, &CFG, 1, 2).unwrap());
    let e = join_fails(&job, &CFG);
    assert!(matches!(e, AmError::WrongAlgorithm { .. }), "{e:?}");
    says(&e, &peer.name, &["'lock-free'", "'stamp'"]);

    // Other queue sizes.
    let (job, peer) = forged_job("jcfg");
    let other = CFG.with_packets(8);
    drop(Segment::create::<Stamp>(&peer.name, &other, 1, 2).unwrap());
    let e = join_fails(&job, &CFG);
    assert!(matches!(e, AmError::Config { .. }), "{e:?}");
    says(&e, "rank 1", &["packets: 8", "packets: 4", "must agree"]);
}

// ---------------------------------------------------------------------------
// the API

#[derive(Debug, Default)]
struct St {
    /// Results of the calls a handler tried, by label.
    tried: Vec<(&'static str, Result<(), AmError>)>,
    got: u64,
    replies: u64,
    self_bulk: Vec<usize>,
}

/// Request handler at rank 1: every bad reply, one good one, then a second.
fn probe<C: Claim>(t: &mut Token<'_, C, St>, m: &Msg<'_>) -> Result<(), AmError> {
    let r1 = t.reply(USER_HANDLERS, &[]);
    let r2 = t.reply(1, &[0; 9]);
    let r3 = t.reply_bulk(1, &[], &[0; CFG.bulk_bytes as usize + 1]);
    let ok = t.reply(1, &[m.args[0] + 1]);
    let twice = t.reply(1, &[]);
    let st = t.state();
    st.tried.extend([
        ("reply handler 240", r1),
        ("reply 9 words", r2),
        ("reply 1025 bulk bytes", r3),
        ("reply", ok),
        ("reply twice", twice),
    ]);
    st.got += 1;
    Ok(())
}

/// Reply handler at rank 0: replies are not allowed here.
fn answer<C: Claim>(t: &mut Token<'_, C, St>, m: &Msg<'_>) -> Result<(), AmError> {
    let r1 = t.reply(1, &[]);
    let r2 = t.reply_bulk(1, &[], &[1]);
    let st = t.state();
    st.tried.extend([
        ("reply from a reply handler", r1),
        ("bulk reply from a reply handler", r2),
    ]);
    assert_eq!(m.args, &[8]);
    st.replies += 1;
    Ok(())
}

/// Request handler at rank 0 for its own bulk request.
fn own_bulk<C: Claim>(t: &mut Token<'_, C, St>, m: &Msg<'_>) -> Result<(), AmError> {
    assert!(m.bulk.iter().all(|&b| b == 0x5c));
    t.state().self_bulk.push(m.bulk.len());
    Ok(())
}

fn tried<'a>(st: &'a St, label: &str) -> &'a Result<(), AmError> {
    &st.tried
        .iter()
        .find(|(l, _)| *l == label)
        .unwrap_or_else(|| panic!("{label} not tried: {:?}", st.tried))
        .1
}

fn api_errors<C: Claim>() {
    let phase = std::sync::Barrier::new(2);
    job::run_threads(2, |job| {
        let mut ep = Endpoint::<C, St>::join(&job, &CFG, St::default()).expect("join");
        let max = CFG.bulk_bytes as usize;
        if job.rank == 1 {
            ep.register(0, probe::<C>).unwrap();
            ep.poll_until(|s| s.got == 1).unwrap();
            let st = ep.state();
            assert!(matches!(
                tried(st, "reply handler 240"),
                Err(AmError::HandlerOutOfRange {
                    id: 240,
                    limit: 240
                })
            ));
            assert!(matches!(
                tried(st, "reply 9 words"),
                Err(AmError::TooManyArgs { given: 9 })
            ));
            assert!(matches!(
                tried(st, "reply 1025 bulk bytes"),
                Err(AmError::BulkTooLarge {
                    given: 1025,
                    max: 1024
                })
            ));
            assert!(tried(st, "reply").is_ok());
            let e = tried(st, "reply twice").as_ref().unwrap_err();
            assert!(matches!(e, AmError::BadReply { .. }), "{e:?}");
            assert!(e.to_string().contains("at most once"), "{e}");
            phase.wait(); // rank 0 may now name an unregistered handler

            let start = Instant::now();
            let e = loop {
                match ep.poll() {
                    Err(e) => break e,
                    Ok(_) => {
                        assert!(start.elapsed() < Duration::from_secs(60), "no message");
                        std::thread::yield_now();
                    }
                }
            };
            assert!(matches!(e, AmError::NoHandler { id: 9, src: 0 }), "{e:?}");
            says(&e, "rank 0", &["handler 9", "not registered"]);
            // The endpoint stays usable: the barrier of `finish` runs on it.
            ep.finish().unwrap();
            return;
        }

        // Rank 0: bad calls are refused before anything is sent.
        let e = ep.register(USER_HANDLERS, answer::<C>).unwrap_err();
        assert!(
            matches!(
                e,
                AmError::HandlerOutOfRange {
                    id: 240,
                    limit: 240
                }
            ),
            "{e:?}"
        );
        says(&e, "240", &["0..240"]);
        let e = ep.register(u16::MAX, answer::<C>).unwrap_err();
        assert!(
            matches!(e, AmError::HandlerOutOfRange { id: u16::MAX, .. }),
            "{e:?}"
        );
        let e = ep.request(1, USER_HANDLERS, &[]).unwrap_err();
        assert!(
            matches!(e, AmError::HandlerOutOfRange { id: 240, .. }),
            "{e:?}"
        );
        let e = ep.request_bulk(1, u16::MAX, &[], &[1]).unwrap_err();
        assert!(matches!(e, AmError::HandlerOutOfRange { .. }), "{e:?}");
        let e = ep.request(1, 0, &[0; 9]).unwrap_err();
        assert!(matches!(e, AmError::TooManyArgs { given: 9 }), "{e:?}");
        says(&e, "9 words", &["at most 8"]);
        let e = ep.request_bulk(1, 0, &[0; 100], &[]).unwrap_err();
        assert!(matches!(e, AmError::TooManyArgs { given: 100 }), "{e:?}");
        let e = ep.request_bulk(1, 0, &[], &vec![0; max + 1]).unwrap_err();
        assert!(
            matches!(
                e,
                AmError::BulkTooLarge {
                    given: 1025,
                    max: 1024
                }
            ),
            "{e:?}"
        );
        says(&e, "1025 bytes", &["1024-byte"]);
        for rank in [2, 3, u32::MAX] {
            let e = ep.request(rank, 0, &[]).unwrap_err();
            assert!(
                matches!(e, AmError::NoSuchRank { rank: r, size: 2 } if r == rank),
                "{e:?}"
            );
            says(&e, &format!("rank {rank}"), &["ranks 0..2"]);
            let e = ep.request_bulk(rank, 0, &[], &[1]).unwrap_err();
            assert!(matches!(e, AmError::NoSuchRank { .. }), "{e:?}");
        }
        assert_eq!(ep.stats().sent, 0, "a refused call sent something");

        // A reply handler may not reply; a request handler's bad replies
        // are errors (checked at rank 1).
        ep.register(1, answer::<C>).unwrap();
        ep.register(2, own_bulk::<C>).unwrap();
        ep.request(1, 0, &[7]).unwrap();
        ep.poll_until(|s| s.replies == 1).unwrap();
        for label in [
            "reply from a reply handler",
            "bulk reply from a reply handler",
        ] {
            let e = tried(ep.state(), label).as_ref().unwrap_err();
            assert!(matches!(e, AmError::BadReply { .. }), "{label}: {e:?}");
            assert!(e.to_string().contains("reply handlers cannot send"), "{e}");
        }
        // Exactly one block is fine (to ourselves).
        ep.request_bulk(0, 2, &[], &vec![0x5c; max]).unwrap();
        ep.poll_until(|s| !s.self_bulk.is_empty()).unwrap();
        assert_eq!(ep.state().self_bulk, [max]);

        phase.wait();
        ep.request(1, 9, &[1]).unwrap();
        ep.finish().unwrap();
    });
}

#[test]
fn api_misuse_is_an_error() {
    macro_rules! each {
        ($($name:literal => $ty:ty;)*) => {$( api_errors::<$ty>(); )*};
    }
    symmetry_am::for_each_claim!(each);
}

// ---------------------------------------------------------------------------
// configurations and jobs

#[test]
fn bad_config_is_a_config_error() {
    let bad = [
        CFG.with_packets(0),
        CFG.with_packets(1),
        CFG.with_packets((1 << 20) + 1),
        CFG.with_bulk_blocks(0),
        CFG.with_bulk_blocks((1 << 16) + 1),
        CFG.with_bulk_bytes(0),
        CFG.with_bulk_bytes(100),
        CFG.with_bulk_bytes(129),
        CFG.with_bulk_bytes((1 << 24) + 128),
    ];
    for cfg in bad {
        let e = cfg.validate().unwrap_err();
        assert!(matches!(e, AmError::Config { .. }), "{cfg:?}: {e:?}");
        says(&e, "accepted", &[]);
        // Neither a segment nor an endpoint is made of it.
        let s = ShmName::new("badcfg");
        let e = Segment::create::<Stamp>(&s.name, &cfg, 0, 1).unwrap_err();
        assert!(matches!(e, AmError::Config { .. }), "{cfg:?}: {e:?}");
        assert!(!s.path().exists());
        let job = Job::new(format!("test-{}-badcfg", std::process::id()), 0, 1).with_timeout(SHORT);
        let e = Endpoint::<Stamp>::join(&job, &cfg, ()).unwrap_err();
        assert!(matches!(e, AmError::Config { .. }), "{cfg:?}: {e:?}");
        assert!(job::job_segments(&job.name).is_empty());
    }
    assert!(CFG.validate().is_ok());
    assert!(Config::default().validate().is_ok());

    let s = ShmName::new("nul");
    let e = Segment::open::<Stamp>(&format!("{}\0x", s.name), SHORT).unwrap_err();
    assert!(matches!(e, AmError::Config { .. }), "{e:?}");
}

#[test]
fn bad_job_is_a_config_error() {
    let name = format!("test-{}-badjob", std::process::id());
    for (rank, size) in [(0, 0), (1, 1), (5, 2), (0, 65), (u32::MAX, u32::MAX)] {
        let job = Job::new(name.clone(), rank, size).with_timeout(SHORT);
        let e = Endpoint::<Stamp>::join(&job, &CFG, ()).unwrap_err();
        assert!(matches!(e, AmError::Config { .. }), "{rank}/{size}: {e:?}");
        says(&e, &format!("rank {rank} of {size}"), &["accepted"]);
    }
    assert!(job::job_segments(&name).is_empty());

    let prog = std::path::Path::new(SELFTEST);
    for n in [0, 65] {
        let e = job::spawn(n, prog, &[]).unwrap_err();
        assert!(matches!(e, AmError::Config { .. }), "-n {n}: {e:?}");
        says(&e, &format!("-n {n}"), &["1..=64"]);
    }
    let missing = std::path::Path::new("/nonexistent/am-rank-program");
    let e = job::spawn(2, missing, &[]).unwrap_err();
    assert!(matches!(e, AmError::Io { .. }), "{e:?}");
    says(&e, "/nonexistent/am-rank-program", &["rank 0"]);
}

/// One environment variable: name and value.
type EnvVar<'a> = (&'a str, &'a std::ffi::OsStr);

/// Runs `am-selftest from-env` with exactly the given job variables.
fn from_env(vars: &[EnvVar<'_>]) -> (Option<i32>, String) {
    let mut cmd = Command::new(SELFTEST);
    cmd.arg("from-env")
        .env_remove(job::ENV_JOB)
        .env_remove(job::ENV_RANK)
        .env_remove(job::ENV_SIZE);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run am-selftest");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    )
}

#[test]
fn job_from_env_rejects_bad_variables() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let (j, r, s) = (job::ENV_JOB, job::ENV_RANK, job::ENV_SIZE);
    let o = |s: &'static str| OsStr::new(s);

    assert_eq!(from_env(&[]), (Some(0), "none".into()));
    assert_eq!(
        from_env(&[(j, o("abc-1")), (r, o("1")), (s, o("3"))]),
        (Some(0), "job abc-1 1 3".into())
    );

    let bad: &[(&[EnvVar<'_>], &[&str])] = &[
        (
            &[(j, o("a/b")), (r, o("0")), (s, o("1"))],
            &["SYMMETRY_AM_JOB", "a/b", "accepted"],
        ),
        (
            &[(j, o("a.b")), (r, o("0")), (s, o("1"))],
            &["SYMMETRY_AM_JOB", "accepted"],
        ),
        (
            &[(j, o("")), (r, o("0")), (s, o("1"))],
            &["SYMMETRY_AM_JOB", "non-empty"],
        ),
        (
            &[(j, OsStr::from_bytes(b"a\xffb")), (r, o("0")), (s, o("1"))],
            &["SYMMETRY_AM_JOB", "UTF-8"],
        ),
        (&[(j, o("x")), (s, o("1"))], &["SYMMETRY_AM_RANK", "not"]),
        (&[(j, o("x")), (r, o("0"))], &["SYMMETRY_AM_SIZE", "not"]),
        (
            &[(j, o("x")), (r, o("one")), (s, o("2"))],
            &["SYMMETRY_AM_RANK", "not a number"],
        ),
        (
            &[(j, o("x")), (r, o("0")), (s, o("-2"))],
            &["SYMMETRY_AM_SIZE", "not a number"],
        ),
        (
            &[(j, o("x")), (r, o("2")), (s, o("2"))],
            &["rank 2 of 2", "accepted"],
        ),
        (
            &[(j, o("x")), (r, o("0")), (s, o("0"))],
            &["rank 0 of 0", "accepted"],
        ),
        (
            &[(j, o("x")), (r, o("0")), (s, o("65"))],
            &["rank 0 of 65", "64"],
        ),
    ];
    for (vars, parts) in bad {
        let (code, line) = from_env(vars);
        assert_eq!(code, Some(1), "{vars:?}: {line}");
        assert!(line.starts_with("error: "), "{vars:?}: {line}");
        for p in *parts {
            assert!(line.contains(p), "{vars:?}: {line:?} does not say {p:?}");
        }
    }
}

// ---------------------------------------------------------------------------
// the rank program's arguments

fn selftest(args: &[&str], rank_env: bool) -> Output {
    let mut cmd = Command::new(SELFTEST);
    cmd.args(args)
        .env_remove(job::ENV_JOB)
        .env_remove(job::ENV_RANK)
        .env_remove(job::ENV_SIZE);
    if rank_env {
        // A job of one rank that nothing else uses (no segment is created
        // when the arguments are refused).
        cmd.env(job::ENV_JOB, format!("test-{}-cli", std::process::id()))
            .env(job::ENV_RANK, "0")
            .env(job::ENV_SIZE, "1");
    }
    cmd.output().expect("run am-selftest")
}

#[test]
fn selftest_rejects_bad_arguments() {
    let cases: &[(&[&str], bool, &[&str])] = &[
        (&[], true, &["no mode"]),
        (&["dance"], true, &["unknown mode \"dance\"", "exchange"]),
        (&["exchange"], true, &["no claim algorithm", "lock-free"]),
        (
            &["exchange", "nope", "10"],
            true,
            &[
                "unknown claim algorithm \"nope\"",
                "tas, ttas, ticket, anderson, pthread, lock-free, stamp",
            ],
        ),
        (&["exchange", "stamp", "ten"], true, &["N = \"ten\""]),
        (&["exchange", "stamp"], true, &["expected"]),
        (
            &["exchange", "stamp", "10", "--fast"],
            true,
            &["unknown option \"--fast\""],
        ),
        (
            &["exchange", "stamp", "10"],
            false,
            &["SYMMETRY_AM_JOB is not set"],
        ),
        (&["send", "stamp", "1", "5"], true, &["DEST = 1", "0..1"]),
    ];
    for (args, rank_env, parts) in cases {
        let out = selftest(args, *rank_env);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        for p in *parts {
            assert!(err.contains(p), "{args:?}: {err:?} does not say {p:?}");
        }
        assert!(err.contains("usage:"), "{args:?}: {err}");
    }
    assert!(job::job_segments(&format!("test-{}-cli", std::process::id())).is_empty());

    // Under the launcher, a refused rank fails the job.
    let args = ["exchange".into(), "nope".into(), "10".into()];
    let out = job::spawn(2, std::path::Path::new(SELFTEST), &args).unwrap();
    assert!(!out.success());
    assert!(
        out.failures().contains("rank 0 exited with status 2")
            || out.failures().contains("rank 1 exited with status 2"),
        "{}",
        out.failures()
    );
    assert!(job::job_segments(&out.job).is_empty());
}
