//! The interposition library under real C programs, compiled here with the
//! system C compiler and run with and without `LD_PRELOAD`: the output
//! must not change, and contended mutexes must show up in the profile
//! under their acquisition site.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use symmetry_locks::spin_then_block::profiler::{LockKind, Profile};

/// The cdylib cargo built beside this test binary.
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps directory");
    let lib = deps.join("libsymmetry_interpose.so");
    assert!(lib.is_file(), "{} was not built", lib.display());
    lib
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("symmetry-interpose-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch directory");
    d
}

/// Compiles `tests/c/NAME.c` into `dir`, with debug information.
fn compile(name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"));
    let out = dir.join(name);
    let st = Command::new("cc")
        .args(["-O2", "-g", "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("the C compiler `cc` runs (the Rust toolchain needs it to link)");
    assert!(st.success(), "cc {} failed", src.display());
    out
}

/// Compiles `tests/c/NAME.c` into the shared object `dir/NAME.so`.
fn compile_shared(name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"));
    let out = dir.join(format!("{name}.so"));
    let st = Command::new("cc")
        .args(["-O2", "-g", "-pthread", "-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("the C compiler `cc` runs");
    assert!(st.success(), "cc -shared {} failed", src.display());
    out
}

/// Held while a test program runs: the programs run two threads on a
/// 2-core machine, and spin locks whose waiter never yields (`tas`, and
/// the FIFO queue locks with `SYMMETRY_LOCK_WAIT=pure`) crawl when a
/// second program takes a core from the holder, so the tests' programs
/// run one at a time.
static ONE_PROGRAM: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_program() -> std::sync::MutexGuard<'static, ()> {
    ONE_PROGRAM.lock().unwrap_or_else(|e| e.into_inner())
}

/// Seconds a test program may go without writing anything (its progress
/// ticks, `tests/c/progress.h`, or its output) before it is taken to hang.
/// Progress, not wall-clock time: a loaded machine slows a program down,
/// a lost wake-up stops it.
const SILENT_SECS: u64 = 60;

/// Runs `program` under the library in replace mode with `lock` (the
/// default waiting policy for that lock), killing it when it stops making
/// progress (a lost wake-up hangs; that must fail, not stall CI).
fn run_replaced(program: &Path, args: &[&str], lock: &str) -> Output {
    let mut c = Command::new(program);
    c.args(args)
        .env("LD_PRELOAD", library())
        .env(symmetry_interpose::LOCK_ENV, lock);
    run_killed(c, &format!("{} {args:?} under {lock}", program.display()))
}

/// Copies `from` into a buffer until it ends, noting the time of each read
/// in `last` (seconds since `t0`).
fn drain(
    mut from: impl std::io::Read + Send + 'static,
    last: std::sync::Arc<std::sync::atomic::AtomicU64>,
    t0: std::time::Instant,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => return all,
                Ok(n) => {
                    all.extend_from_slice(&buf[..n]);
                    last.store(t0.elapsed().as_secs(), std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
    })
}

/// Runs command `c` (called `what` in a failure), one program at a time
/// ([`ONE_PROGRAM`]), killing it when it has written nothing for
/// [`SILENT_SECS`].
fn run_killed(c: Command, what: &str) -> Output {
    let _one = one_program();
    watched(c, what)
}

/// [`run_killed`] without taking [`ONE_PROGRAM`].
fn watched(mut c: Command, what: &str) -> Output {
    let mut child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} does not start: {e}"));
    let t0 = std::time::Instant::now();
    let last = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let out = drain(child.stdout.take().expect("piped"), last.clone(), t0);
    let err = drain(child.stderr.take().expect("piped"), last.clone(), t0);
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        let silent = t0
            .elapsed()
            .as_secs()
            .saturating_sub(last.load(std::sync::atomic::Ordering::Relaxed));
        if silent > SILENT_SECS {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} made no progress for {SILENT_SECS} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    Output {
        status,
        // A forked child that outlives its parent could hold the pipes
        // open; the test programs wait for theirs.
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

fn run(program: &Path, args: &[&str], profile: Option<&Path>) -> Output {
    let mut c = Command::new(program);
    c.args(args).env_remove("LD_PRELOAD");
    if let Some(p) = profile {
        c.env("LD_PRELOAD", library())
            .env(symmetry_interpose::PROFILE_ENV, p);
    }
    let out = run_killed(c, &program.display().to_string());
    assert!(
        out.status.success(),
        "{} failed: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn a_contended_mutex_is_profiled_by_site_and_the_output_is_unchanged() {
    let dir = scratch("contend");
    let prog = compile("contend", &dir);
    let plain = run(&prog, &["4"], None);
    let profile = dir.join("profile.csv");
    // Contention on two cores is likely but not certain in one run.
    let mut waited = None;
    for _ in 0..5 {
        let _ = std::fs::remove_file(&profile);
        let traced = run(&prog, &["4"], Some(&profile));
        assert_eq!(
            plain.stdout, traced.stdout,
            "output changed under the library"
        );
        assert_eq!(String::from_utf8_lossy(&traced.stdout).trim(), "800000");
        if profile.exists() {
            waited = Some(Profile::read(&profile).expect("the profile parses"));
            break;
        }
    }
    let p = waited.expect("four threads on one mutex waited at least once in five runs");
    assert_eq!(p.locks.len(), 1, "one mutex in the program: {p:?}");
    let l = &p.locks[0];
    assert_eq!(l.blocker, symmetry_interpose::BLOCKER);
    assert!(l.contended() > 0);
    let object = format!("{}+0x", prog.display());
    assert!(
        l.name.contains(&object),
        "the lock is named by its site in {}: {}",
        prog.display(),
        l.name
    );
    assert!(p.ns_per_spin > 0.0 && l.c_spins > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_program_that_never_waits_writes_no_profile() {
    let dir = scratch("alone");
    let prog = compile("contend", &dir);
    let profile = dir.join("profile.csv");
    let traced = run(&prog, &["1"], Some(&profile));
    assert_eq!(String::from_utf8_lossy(&traced.stdout).trim(), "200000");
    assert!(!profile.exists(), "one thread never waits");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn recursive_errorcheck_timed_and_reinitialized_mutexes_keep_their_semantics() {
    let dir = scratch("kinds");
    let prog = compile("kinds", &dir);
    let plain = run(&prog, &[], None);
    let traced = run(&prog, &[], Some(&dir.join("profile.csv")));
    assert_eq!(
        String::from_utf8_lossy(&plain.stdout),
        String::from_utf8_lossy(&traced.stdout)
    );
    let expected = "recursive lock: 0
recursive relock: 0
recursive unlock: 0 0
errorcheck lock: 0
errorcheck relock is EDEADLK: 1
errorcheck unlock: 0
errorcheck unlock again is EPERM: 1
reinitialized lock: 0 0
robust lock after its owner died is EOWNERDEAD: 1
trylock of a held mutex is EBUSY: 1
timedlock of a held mutex is ETIMEDOUT: 1
lock after release: 0
";
    assert_eq!(String::from_utf8_lossy(&traced.stdout), expected);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_replacement_lock_runs_mutexes_and_condition_variables_with_identical_output() {
    let dir = scratch("replace");
    let contend = compile("contend", &dir);
    let kinds = compile("kinds", &dir);
    let condq = compile("condq", &dir);
    // Two threads on the counter: no more than a 2-core machine has (FIFO
    // spin locks convoy behind a preempted waiter, SMARTQ's point).
    let plain: Vec<Output> = [(&contend, &["2"][..]), (&kinds, &[]), (&condq, &[])]
        .iter()
        .map(|(p, a)| run(p, a, None))
        .collect();
    let names: Vec<&str> = symmetry_interpose::replace::algorithms()
        .map(|a| a.name)
        .collect();
    assert!(names.contains(&"mcs") && names.contains(&"spin-then-block:random-walk"));
    assert!(
        !names.contains(&"pthread"),
        "a lock built on pthread would recurse"
    );
    for lock in names {
        for ((prog, args), want) in [(&contend, &["2"][..]), (&kinds, &[]), (&condq, &[])]
            .iter()
            .zip(&plain)
        {
            let out = run_replaced(prog, args, lock);
            assert!(
                out.status.success(),
                "{} under {lock}: {}",
                prog.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&want.stdout),
                "{} under {lock}",
                prog.display()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_lock_name_stops_the_program_with_the_accepted_names() {
    let dir = scratch("unknown");
    let prog = compile("contend", &dir);
    let out = run_replaced(&prog, &["1"], "no-such-lock");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no-such-lock") && err.contains("accepted: glibc") && err.contains("mcs"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_pure_waiting_policy_runs_and_an_unknown_one_is_refused() {
    let dir = scratch("waiting");
    let prog = compile("contend", &dir);
    // One thread: the paper's own waiting never waits here, so this is
    // quick on any machine.
    let mut c = Command::new(&prog);
    c.arg("1")
        .env("LD_PRELOAD", library())
        .env(symmetry_interpose::LOCK_ENV, "ticket")
        .env(symmetry_interpose::replace::WAIT_ENV, "pure");
    let out = run_killed(c, "contend under ticket, pure");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200000\n");
    let mut c = Command::new(&prog);
    c.arg("1")
        .env("LD_PRELOAD", library())
        .env(symmetry_interpose::LOCK_ENV, "ticket")
        .env(symmetry_interpose::replace::WAIT_ENV, "fast");
    let out = run_killed(c, "contend under ticket, unknown policy");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("SYMMETRY_LOCK_WAIT=fast") && err.contains("pure, polite"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fork_shared_memory_signal_handlers_and_dlclose_behave_as_under_glibc() {
    let dir = scratch("safety");
    let prog = compile("safety", &dir);
    let plugin = compile_shared("plugin", &dir);
    let plugin = plugin.to_str().expect("a UTF-8 scratch path");
    let cases: [&[&str]; 4] = [&["fork"], &["pshared"], &["signal"], &["dlclose", plugin]];
    let want = [
        "parent before fork: 200000\nround 0: parent 100000, child exit 0\n\
         round 1: parent 100000, child exit 0\nround 2: parent 100000, child exit 0\n",
        "two processes on one shared mutex: 400000, child exit 0\n",
        "counter right: 1\nhandler ran and took its mutex each time: 1\n",
        "40 loads of a plugin with a static mutex: 400000\n",
    ];
    for (args, want) in cases.iter().zip(want) {
        let plain = run(&prog, args, None);
        assert_eq!(
            String::from_utf8_lossy(&plain.stdout),
            want,
            "{args:?} under glibc"
        );
        let profile = dir.join("profile.csv");
        let _ = std::fs::remove_file(&profile);
        let traced = run(&prog, args, Some(&profile));
        assert_eq!(
            String::from_utf8_lossy(&traced.stdout),
            want,
            "{args:?} in profile mode"
        );
        if args[0] == "pshared" && profile.exists() {
            // The parent's waits (the child ends with _exit, unrecorded).
            let p = Profile::read(&profile).expect("the profile parses");
            for l in &p.locks {
                assert!(l.name.ends_with("[process-shared]"), "{}", l.name);
            }
        }
        for lock in symmetry_interpose::replace::algorithms().map(|a| a.name) {
            // parking_lot is not safe in a signal handler whose mutex is
            // contended (see the `replace` module's docs): it can hang.
            if args[0] == "signal" && lock == "parking_lot" {
                continue;
            }
            let out = run_replaced(&prog, args, lock);
            assert!(
                out.status.success(),
                "{args:?} under {lock}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                want,
                "{args:?} under {lock}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn threads_started_before_the_library_initializes_are_served() {
    let dir = scratch("early");
    let prog = compile("safety", &dir);
    let early = compile_shared("early", &dir);
    let lib = library();
    let want = "threads started before main: 200000\n";
    // Both orders of the preload list: in one of them early.so's
    // constructor, and so its threads' first mutex calls, come before the
    // library's constructor.
    for (first, second) in [(&early, &lib), (&lib, &early)] {
        let preload = format!("{}:{}", first.display(), second.display());
        for mode in ["profile", "tas", "mcs", "spin-then-block:random-walk"] {
            let profile = dir.join("early.csv");
            let _ = std::fs::remove_file(&profile);
            let mut c = Command::new(&prog);
            c.arg("early").env("LD_PRELOAD", &preload);
            if mode == "profile" {
                c.env(symmetry_interpose::PROFILE_ENV, &profile);
            } else {
                c.env(symmetry_interpose::LOCK_ENV, mode);
            }
            let what = format!("early threads under {mode} (LD_PRELOAD={preload})");
            let out = run_killed(c, &what);
            assert!(
                out.status.success(),
                "{what}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{what}");
            if mode == "profile" && profile.exists() {
                let p = Profile::read(&profile).expect("the profile parses");
                assert!(
                    p.locks.iter().all(|l| l.name.contains("early.so")),
                    "{what}: {:?}",
                    p.locks.iter().map(|l| &l.name).collect::<Vec<_>>()
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn waves_of_threads_on_many_mutexes_are_profiled_without_loss_of_output() {
    let dir = scratch("many");
    let prog = compile("many", &dir);
    let plain = run(&prog, &[], None);
    assert_eq!(String::from_utf8_lossy(&plain.stdout), "320000\n");
    let profile = dir.join("many.csv");
    let traced = run(&prog, &[], Some(&profile));
    assert_eq!(traced.stdout, plain.stdout);
    if profile.exists() {
        let p = Profile::read(&profile).expect("the profile parses");
        // One entry per mutex that waited (a mutex's waits from every
        // thread, sharded or not, under one name).
        assert!(p.locks.len() <= 12, "{} locks", p.locks.len());
        let mut names: Vec<_> = p.locks.iter().map(|l| &l.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), p.locks.len());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// One program of the idiom corpus (`tests/corpus`): how to start it.
struct Idiom {
    name: String,
    program: PathBuf,
    args: Vec<PathBuf>,
}

/// Compiles the corpus into `dir`: the C programs always, the C++ ones
/// where `g++` runs, the Python one where `python3` runs (each missing
/// tool is said on stderr; CI installs both).
fn corpus(dir: &Path) -> Vec<Idiom> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut out = Vec::new();
    let mut build = |compiler: &str, file: &str, flags: &[&str]| -> bool {
        let exe = dir.join(file.replace('.', "-"));
        let st = Command::new(compiler)
            .args(["-O2", "-g", "-pthread"])
            .args(flags)
            .arg("-o")
            .arg(&exe)
            .arg(src.join(file))
            .status();
        match st {
            Ok(st) => {
                assert!(st.success(), "{compiler} {file} failed");
                out.push(Idiom {
                    name: file.into(),
                    program: exe,
                    args: Vec::new(),
                });
                true
            }
            Err(e) => {
                eprintln!("corpus: {compiler} does not run ({e}): {file} skipped");
                false
            }
        }
    };
    for c in ["reuse.c", "clock.c"] {
        assert!(build("cc", c, &[]), "the C compiler `cc` runs");
    }
    for cpp in ["mutexes.cpp", "timed.cpp", "condvars.cpp", "reuse.cpp"] {
        if !build("g++", cpp, &["-std=c++17"]) {
            break;
        }
    }
    // The interpreter itself, not a wrapper script (pyenv's shims are
    // shell scripts).
    match Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
    {
        Ok(o) if o.status.success() => out.push(Idiom {
            name: "condition.py".into(),
            program: PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
            args: vec![src.join("condition.py")],
        }),
        _ => eprintln!("corpus: python3 does not run: condition.py skipped"),
    }
    out
}

/// The corpus's outputs that show each idiom did what it says, under
/// glibc (the reference every other run is compared with).
const CORPUS_FACTS: &[(&str, &str)] = &[
    ("reuse.c", "destroy of a held mutex is EBUSY: 1"),
    (
        "reuse.c",
        "errorcheck over normal 2: 40000; 0, EDEADLK 1, 0, EPERM 1",
    ),
    ("clock.c", "clocklock monotonic while held is ETIMEDOUT: 1"),
    ("clock.c", "cond waits that timed out: 15 of 15"),
    ("mutexes.cpp", "call_once ran: 1"),
    ("timed.cpp", "held: 15 of 15 timed tries timed out"),
    ("condvars.cpp", "timed waits that timed out: 15 of 15"),
    ("condvars.cpp", "condition_variable_any: 3"),
    ("reuse.cpp", "heap round 2: mutex 40000, recursive 40000"),
    ("condition.py", "timed out: 20 of 20"),
];

#[test]
fn the_idiom_corpus_runs_alike_under_glibc_profile_mode_and_every_lock() {
    let dir = scratch("corpus");
    let idioms = corpus(&dir);
    let lib = library();
    let command = |i: &Idiom| {
        let mut c = Command::new(&i.program);
        c.args(&i.args).env_remove("LD_PRELOAD");
        c
    };
    let reference: Vec<Output> = idioms
        .iter()
        .map(|i| {
            let out = watched(command(i), &format!("{} under glibc", i.name));
            assert!(out.status.success(), "{} under glibc: {out:?}", i.name);
            out
        })
        .collect();
    for (name, fact) in CORPUS_FACTS {
        if let Some(k) = idioms.iter().position(|i| i.name == *name) {
            let text = String::from_utf8_lossy(&reference[k].stdout);
            assert!(text.contains(fact), "{name} under glibc: {text}");
        }
    }
    // Every configuration x every idiom, two programs at a time (each runs
    // two threads: a 2-core machine, loaded, tolerates that), one test's
    // programs at a time.
    let mut configs = vec!["profile".to_string()];
    configs.extend(symmetry_interpose::replace::algorithms().map(|a| a.name.to_string()));
    let jobs: Vec<(usize, &str)> = configs
        .iter()
        .flat_map(|c| (0..idioms.len()).map(move |k| (k, c.as_str())))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    let _one = one_program();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let j = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(k, config)) = jobs.get(j) else {
                        return;
                    };
                    let idiom = &idioms[k];
                    let mut c = command(idiom);
                    c.env("LD_PRELOAD", &lib);
                    if config == "profile" {
                        c.env(
                            symmetry_interpose::PROFILE_ENV,
                            dir.join(format!("{}.csv", idiom.name)),
                        );
                    } else {
                        c.env(symmetry_interpose::LOCK_ENV, config);
                    }
                    let what = format!("{} under {config}", idiom.name);
                    let out = watched(c, &what);
                    if !out.status.success() || out.stdout != reference[k].stdout {
                        failures.lock().unwrap().push(format!(
                            "{what}: {}\n--- stdout\n{}--- glibc's\n{}--- stderr\n{}",
                            out.status,
                            String::from_utf8_lossy(&out.stdout),
                            String::from_utf8_lossy(&reference[k].stdout),
                            String::from_utf8_lossy(&out.stderr).replace('.', ""),
                        ));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} runs differ from glibc:\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rwlocks_and_spin_locks_are_profiled_readers_and_writers_apart() {
    let dir = scratch("rwspin");
    let prog = compile("rwspin", &dir);
    let plain = run(&prog, &["2"], None);
    let expected = "writes: 30000 30000
reads: 60000 torn: 0
spin steps: 90000
tryrdlock of a written rwlock is EBUSY: 1
timedrdlock of a written rwlock is ETIMEDOUT: 1
spin trylock of a held spinlock is EBUSY: 1
trywrlock of a read rwlock is EBUSY: 1
timedwrlock of a read rwlock is ETIMEDOUT: 1
tryrdlock of a read rwlock: 0
timedrdlock after the writer lets go: 0
timedwrlock after the reader lets go: 0
rdlock after the writer lets go: 0
wrlock after the reader lets go: 0
spin lock after the holder lets go: 0
";
    assert_eq!(String::from_utf8_lossy(&plain.stdout), expected);
    // Each of the three locks waits in every run: the program holds each
    // once for 20 ms while another thread asks for it.
    let profile = dir.join("rwspin.csv");
    let traced = run(&prog, &["2"], Some(&profile));
    assert_eq!(
        plain.stdout, traced.stdout,
        "output changed under the library"
    );
    let p = Profile::read(&profile).expect("the profile parses");
    for kind in [LockKind::Read, LockKind::Write, LockKind::Spin] {
        let l = p
            .locks
            .iter()
            .find(|l| l.kind == kind)
            .unwrap_or_else(|| panic!("no {kind} row in {:?}", p.locks));
        assert!(l.name.contains("rwspin"), "{kind} named {}", l.name);
        assert!(l.contended() >= 1, "{kind}: {l:?}");
        let n = l.acquisitions.expect("pthread acquisitions are counted");
        assert!(
            n >= l.contended(),
            "{kind}: {n} acquisitions, {} waits",
            l.contended()
        );
        assert!(l.wait_max.is_some_and(|w| w > 0), "{kind}: {l:?}");
        assert!(l.hold.samples >= 1, "{kind}: no hold timed in {n}");
        assert!(!l.stack.is_empty(), "{kind}: no stack");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `examples/contended_rust`, which cargo builds beside the tests.
fn contended_rust() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory");
    let prog = dir.join("examples/contended_rust");
    assert!(prog.is_file(), "{} was not built", prog.display());
    prog
}

#[test]
fn rust_locks_waiting_in_futex_are_profiled_one_entry_per_lock() {
    let prog = contended_rust();
    let plain = run(&prog, &[], None);
    let dir = scratch("futex");
    let profile = dir.join("futex.csv");
    // The std Mutex, the RwLock's readers and its writers (two futex
    // words), and parking_lot's mutex (its waiters' own parking words,
    // one entry by their common stack); the main thread's joins wait
    // inside glibc, unseen. Each lock waits in nearly every run; a run in
    // which one did not is run again.
    let mut last = Vec::new();
    for _ in 0..3 {
        let _ = std::fs::remove_file(&profile);
        let traced = run(&prog, &[], Some(&profile));
        assert_eq!(
            plain.stdout, traced.stdout,
            "output changed under the library"
        );
        last = Profile::read(&profile).expect("the profile parses").locks;
        if last.len() == 4 {
            break;
        }
    }
    let futex: Vec<_> = last.iter().filter(|l| l.kind == LockKind::Futex).collect();
    assert_eq!(futex.len(), 4, "{last:#?}");
    for l in &futex {
        assert_eq!(l.blocker, symmetry_interpose::FUTEX_BLOCKER);
        assert_eq!(l.acquisitions, None, "a futex lock's fast path is unseen");
        assert!(l.name.contains("contended_rust"), "{}", l.name);
        assert!(l.stack.len() >= 3, "{:?}", l.stack);
        assert!(l.blocked_total() >= 1, "{l:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pass_through_records_nothing_and_changes_no_output() {
    let dir = scratch("off");
    let profile = dir.join("off.csv");
    // Each program waits on its locks in every run (or nearly every run)
    // in profile mode: see the tests above.
    let programs = [
        (compile("contend", &dir), vec!["4"]),
        (compile("rwspin", &dir), vec!["2"]),
        (contended_rust(), vec![]),
    ];
    for (prog, args) in &programs {
        let plain = run(prog, args, None);
        let _ = std::fs::remove_file(&profile);
        let mut c = Command::new(prog);
        c.args(args)
            .env("LD_PRELOAD", library())
            .env(symmetry_interpose::PROFILE_ENV, &profile)
            .env(symmetry_interpose::LOCK_ENV, symmetry_interpose::OFF);
        let off = run_killed(c, &format!("{} in pass-through", prog.display()));
        assert!(
            off.status.success(),
            "{}: {}",
            prog.display(),
            String::from_utf8_lossy(&off.stderr)
        );
        assert_eq!(plain.stdout, off.stdout, "{}", prog.display());
        assert!(
            !profile.exists(),
            "{}: pass-through wrote a profile",
            prog.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
