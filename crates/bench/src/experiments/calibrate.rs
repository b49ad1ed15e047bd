//! `calibrate` — this machine's constants: uncontended atomic RMW cost, the
//! cache-line round trip between two cores, one spin-wait iteration, the
//! block+wake hand-off and C (KLMO91: the cost of blocking, in spins) for
//! OS threads (futex) and for user threads (symmetry-threads park/unpark,
//! on one processor and on two). The same code backs
//! `symmetry calibrate`.

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use symmetry_threads::{LocalReadyq, Runtime, Thread};

use crate::harness::{Ctx, Experiment, figure, ns};
use crate::kernels::locks::{allowed_cpus, pin_to, work_ns_per_iter};
use crate::output::data::Row;
use crate::output::machine::Machine;
use crate::output::plot::{Bar, BarPanel, Figure, Panel, Scale};
use crate::output::report::{Section, Table, Verdict};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "calibrate",
    title: "Machine constants: atomic RMW, cache-line round trip, block+wake of OS and user threads, C in spins",
    source: "harness (inputs to ALL89 §V, KLMO91 §5)",
    uses_locks: false,
    claims: &[],
    run,
    figure: draw,
    assess,
};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn per_op(iters: u64, f: impl Fn()) -> f64 {
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    t.elapsed().as_nanos() as f64 / iters as f64
}

/// Two pinned threads bounce one cache line: ns per round trip.
fn cacheline_rtt(cpus: (usize, usize), rounds: u64) -> f64 {
    let line = CachePadded::new(AtomicU64::new(0));
    let (elapsed, _) = crate::kernels::locks::run_threads(2, |i| {
        pin_to(if i == 0 { cpus.0 } else { cpus.1 });
        if i == 0 {
            for r in 0..rounds {
                line.store(2 * r + 1, Ordering::Release);
                while line.load(Ordering::Acquire) != 2 * r + 2 {
                    std::hint::spin_loop();
                }
            }
        } else {
            for r in 0..rounds {
                while line.load(Ordering::Acquire) != 2 * r + 1 {
                    std::hint::spin_loop();
                }
                line.store(2 * r + 2, Ordering::Release);
            }
        }
    });
    elapsed.as_nanos() as f64 / rounds as f64
}

fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: FUTEX_WAIT on a valid, aligned u32 that outlives the call;
    // spurious returns are handled by the caller's loop.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a valid, aligned u32.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        );
    }
}

/// Two threads on two cores hand a turn back and forth, each blocking in
/// the kernel until woken: ns per round trip (two block+wake hand-offs).
fn futex_rtt(cpus: (usize, usize), rounds: u64) -> f64 {
    let turn = CachePadded::new(AtomicU32::new(0));
    let (elapsed, _) = crate::kernels::locks::run_threads(2, |i| {
        pin_to(if i == 0 { cpus.0 } else { cpus.1 });
        let (mine, theirs) = if i == 0 { (0, 1) } else { (1, 0) };
        for _ in 0..rounds {
            while turn.load(Ordering::Acquire) != mine {
                futex_wait(&turn, theirs);
            }
            turn.store(theirs, Ordering::Release);
            futex_wake(&turn);
        }
    });
    elapsed.as_nanos() as f64 / rounds as f64
}

/// A turn handed back and forth between two user threads.
struct UserPingPong {
    /// Even: side 0's turn, odd: side 1's.
    turn: CachePadded<AtomicU64>,
    /// Each side's handle, for the other to unpark.
    sides: [OnceLock<Thread>; 2],
}

impl UserPingPong {
    /// One side: waits for its turn (parking), passes it on, wakes the
    /// other side. Side 0 times the rounds after `warm` up to the other
    /// side's last pass.
    fn play(&self, side: usize, warm: u64, total: u64) -> Option<Duration> {
        let me = symmetry_threads::current().expect("runs as a user thread");
        let _ = self.sides[side].set(me);
        let other = loop {
            if let Some(t) = self.sides[1 - side].get() {
                break *t;
            }
            symmetry_threads::yield_now();
        };
        let wait_for = |turn: u64| {
            // Acquire: pairs with the other side's Release store of the turn.
            while self.turn.load(Ordering::Acquire) != turn {
                symmetry_threads::park();
            }
        };
        let mut t0 = None;
        for r in 0..total {
            if side == 0 && r == warm {
                t0 = Some(Instant::now());
            }
            let mine = 2 * r + side as u64;
            wait_for(mine);
            // Release: publishes the turn to the other side's Acquire load.
            self.turn.store(mine + 1, Ordering::Release);
            other.unpark();
        }
        if side == 0 {
            wait_for(2 * total);
            t0.map(|t| t.elapsed())
        } else {
            None
        }
    }
}

/// Two user threads on a `processors`-processor `local-readyq` runtime
/// (processors pinned) hand a turn back and forth, each parking until the
/// other unparks it: ns per round trip (two block+wake hand-offs).
fn user_rtt(processors: usize, rounds: u64) -> f64 {
    let rt: Runtime<LocalReadyq> = Runtime::builder()
        .processors(processors)
        .pin(true)
        .build()
        .expect("a symmetry-threads runtime");
    let game = Arc::new(UserPingPong {
        turn: CachePadded::new(AtomicU64::new(0)),
        sides: [OnceLock::new(), OnceLock::new()],
    });
    let warm = rounds / 10 + 100;
    let players: Vec<_> = (0..2)
        .map(|side| {
            let g = Arc::clone(&game);
            rt.spawn(move || g.play(side, warm, warm + rounds))
        })
        .collect();
    let elapsed = players
        .into_iter()
        .filter_map(|p| p.join().expect("ping-pong player panicked"))
        .next()
        .expect("side 0 times the rounds");
    elapsed.as_nanos() as f64 / rounds as f64
}

/// The measured constants, in display order: (metric, value, unit, threads).
pub fn measure(quick: bool) -> Vec<(&'static str, f64, &'static str, u32)> {
    let iters: u64 = if quick { 2_000_000 } else { 20_000_000 };
    let cpus = allowed_cpus();
    let (rmw, cas, spin) = crate::kernels::locks::on_pinned_thread(|| single_thread_costs(iters));
    let mut out = vec![
        ("atomic_rmw_ns", rmw, "ns", 1),
        ("cas_ns", cas, "ns", 1),
        ("spin_iter_ns", spin, "ns", 1),
        ("work_iter_ns", work_ns_per_iter(), "ns", 1),
    ];
    if cpus.len() >= 2 {
        let pair = (cpus[0], cpus[1]);
        let rounds = if quick { 200_000 } else { 2_000_000 };
        out.push((
            "cacheline_rtt_ns",
            median((0..3).map(|_| cacheline_rtt(pair, rounds)).collect()),
            "ns",
            2,
        ));
        let frounds = if quick { 5_000 } else { 50_000 };
        let rtt = median((0..3).map(|_| futex_rtt(pair, frounds)).collect());
        out.push(("futex_rtt_ns", rtt, "ns", 2));
        out.push(("block_wake_ns", rtt / 2.0, "ns", 2));
        out.push(("c_spins_os", rtt / 2.0 / spin, "spins", 2));
    }
    // User threads: park/unpark hand-offs on one processor (a pure user
    // space switch through the ready queue) and on two (random placement
    // sends about half the woken threads to the other processor).
    let urounds = if quick { 50_000 } else { 500_000 };
    let mut user = |p: usize, names: [&'static str; 3]| {
        let rtt = median((0..3).map(|_| user_rtt(p, urounds)).collect());
        out.push((names[0], rtt, "ns", p as u32));
        out.push((names[1], rtt / 2.0, "ns", p as u32));
        out.push((names[2], rtt / 2.0 / spin, "spins", p as u32));
    };
    user(
        1,
        ["user_rtt_1p_ns", "user_block_wake_1p_ns", "c_spins_user_1p"],
    );
    if cpus.len() >= 2 {
        user(
            2,
            ["user_rtt_2p_ns", "user_block_wake_2p_ns", "c_spins_user_2p"],
        );
    }
    out
}

/// Uncontended fetch_add, CAS and spin-iteration costs (medians of 5).
fn single_thread_costs(iters: u64) -> (f64, f64, f64) {
    let word = AtomicU64::new(0);
    let rmw = median(
        (0..5)
            .map(|_| {
                per_op(iters, || {
                    black_box(black_box(&word).fetch_add(1, Ordering::AcqRel));
                })
            })
            .collect(),
    );
    let cas = median(
        (0..5)
            .map(|_| {
                per_op(iters, || {
                    let w = black_box(&word);
                    let v = w.load(Ordering::Relaxed);
                    let _ = w.compare_exchange(v, v + 1, Ordering::AcqRel, Ordering::Relaxed);
                })
            })
            .collect(),
    );
    let spin = median(
        (0..5)
            .map(|_| per_op(iters / 4, std::hint::spin_loop))
            .collect(),
    );
    (rmw, cas, spin)
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let bar = ctx.bar(EXPERIMENT.id, 1);
    let rows = measure(ctx.quick)
        .into_iter()
        .map(|(metric, v, unit, t)| Row::new(EXPERIMENT.id, "machine", t, false, metric, v, unit))
        .collect();
    bar.finish_and_clear();
    Ok(rows)
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let bars = rows
        .iter()
        .filter(|r| r.unit == "ns")
        .map(|r| Bar {
            label: r.metric.clone(),
            value: r.value,
            group: format!("{} thread(s)", r.threads),
        })
        .collect();
    figure(
        "calibrate: machine constants",
        m,
        vec![Panel::Bar(BarPanel {
            title: "cost of primitive operations".into(),
            y_label: "ns (log)".into(),
            y_scale: Scale::Log,
            bars,
            reference_lines: vec![],
        })],
    )
}

/// What each constant means, for the report and the CLI.
pub fn describe(metric: &str) -> &'static str {
    match metric {
        "atomic_rmw_ns" => "uncontended fetch_add on a private line",
        "cas_ns" => "uncontended load + compare_exchange",
        "spin_iter_ns" => "one spin-wait iteration (core::hint::spin_loop)",
        "work_iter_ns" => "one step of the harness's local work loop",
        "cacheline_rtt_ns" => "one cache line bounced between two cores and back",
        "futex_rtt_ns" => {
            "two threads on two cores hand a turn back and forth through futex wait/wake"
        }
        "block_wake_ns" => "one block + wake hand-off (half the futex round trip)",
        "c_spins_os" => "KLMO91's C for OS threads: block+wake cost in spin iterations",
        "user_rtt_1p_ns" => {
            "two user threads on one processor hand a turn back and forth through park/unpark"
        }
        "user_block_wake_1p_ns" => {
            "one user-thread block + wake hand-off on one processor (half the round trip)"
        }
        "c_spins_user_1p" => {
            "KLMO91's C for user threads on one processor: block+wake cost in spin iterations"
        }
        "user_rtt_2p_ns" => {
            "two user threads on a two-processor runtime hand a turn back and forth through park/unpark"
        }
        "user_block_wake_2p_ns" => {
            "one user-thread block + wake hand-off on a two-processor runtime (half the round trip)"
        }
        "c_spins_user_2p" => {
            "KLMO91's C for user threads on a two-processor runtime: block+wake cost in spin iterations"
        }
        _ => "",
    }
}

fn assess(rows: &[Row], m: &Machine) -> crate::harness::Assessment {
    crate::harness::legacy(assess_old(rows, m))
}

fn assess_old(rows: &[Row], _m: &Machine) -> Section {
    let table = Table {
        header: vec!["constant".into(), "value".into(), "meaning".into()],
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    format!("`{}`", r.metric),
                    if r.unit == "ns" {
                        ns(r.value)
                    } else {
                        format!("{:.0} {}", r.value, r.unit)
                    },
                    describe(&r.metric).into(),
                ]
            })
            .collect(),
    };
    let get = |m: &str| rows.iter().find(|r| r.metric == m).map(|r| r.value);
    let os = match (
        get("block_wake_ns"),
        get("c_spins_os"),
        get("cacheline_rtt_ns"),
    ) {
        (Some(b), Some(c), Some(l)) => Some((
            b,
            format!(
                "A futex block+wake hand-off between two cores costs {} ({c:.0} spin iterations: C for OS threads); a \
                 cache line crosses between two cores and back in {}.",
                ns(b),
                ns(l)
            ),
        )),
        _ => None,
    };
    let user1 = get("user_block_wake_1p_ns").zip(get("c_spins_user_1p"));
    let user2 = get("user_block_wake_2p_ns").zip(get("c_spins_user_2p"));
    let mut measured = os.as_ref().map(|(_, t)| t.clone()).unwrap_or_else(|| {
        "Fewer than two CPUs are available: the two-core constants are not measurable.".into()
    });
    if let Some((u, c)) = user1 {
        measured.push_str(&format!(
            " A user-thread block+wake hand-off (park/unpark on symmetry-threads, local-readyq) costs {} on one \
             processor ({c:.0} spin iterations: C for user threads)",
            ns(u)
        ));
        match user2 {
            Some((u2, c2)) => measured.push_str(&format!(
                " and {} on a two-processor runtime ({c2:.0} spin iterations; random placement keeps some hand-offs on \
                 one processor).",
                ns(u2)
            )),
            None => measured.push('.'),
        }
        if let Some((b, _)) = os {
            measured.push_str(&format!(
                " The futex hand-off costs {:.1}x the one-processor user hand-off{}.",
                b / u,
                user2.map_or(String::new(), |(u2, _)| format!(
                    " and {:.1}x the two-processor one",
                    b / u2
                ))
            ));
        }
    }
    let (verdict, why) = match (os, user1) {
        (Some((b, _)), Some((u, _))) if u < b => (
            Verdict::Holds,
            "Both Cs are measured in the same run; a user-level block+wake is cheaper than a kernel one here.",
        ),
        (Some(_), Some(_)) => (
            Verdict::Differs,
            "Both Cs are measured in the same run, and on this machine the user-level hand-off is not the cheaper one.",
        ),
        _ => (
            Verdict::NotMeasurable,
            "The OS-thread hand-off needs two CPUs; only the one-processor user-thread C is measured.",
        ),
    };
    Section {
        id: EXPERIMENT.id.into(),
        title: EXPERIMENT.title.into(),
        source: EXPERIMENT.source.into(),
        claim: "These are this machine's inputs to the models and to the spin-then-block policies (KLMO91's C is \
                \"the cost of blocking\", measured here, never assumed). The premise of user-level thread packages (ALL89, \
                PRESTO): blocking and waking a user thread costs less than blocking and waking a kernel thread."
            .into(),
        measured,
        verdict,
        why: why.into(),
        table: Some(table),
        svg: Some(format!("{}.svg", EXPERIMENT.id)),
        provenance: None,
    }
}
