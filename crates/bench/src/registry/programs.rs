//! The Debian programs the interposition library runs
//! (`interpose-apps`), by name, and the measurement of one of them
//! ([`ProgramRun`]): each with `threads` workers, under glibc's own
//! mutexes, the library's profile mode, the library passing every call
//! straight through, and each replacement lock.
//!
//! The programs (Debian packages, installed by CI; a missing one's row
//! says "not installed"):
//!
//! - `pigz` (parallel gzip): fast level, the smallest blocks, so its job
//!   queue's mutexes hand over often;
//! - `pbzip2` (parallel bzip2): the smallest blocks;
//! - `xz` (liblzma's threaded encoder): the fastest preset, 64 KiB blocks;
//! - `sysbench-mutex`: sysbench's mutex benchmark on one mutex (short
//!   critical sections, heavy contention: KLMO91's "spin" regime);
//! - `sysbench-threads`: sysbench's thread benchmark, one mutex held across
//!   `sched_yield` calls (long holds: the "block" regime);
//! - `kcprototest` (Kyoto Cabinet's test of its in-memory hash database):
//!   every record is set, read and removed under the database's one
//!   `pthread_rwlock_t`, written to by every worker (its record count is
//!   per worker, so a run does the same work at any thread count).
//!
//! The compressors read a generated text file (8 MiB; 64 MiB in a full
//! run; the `input_mb` parameter) and write to a pipe that is hashed.
//!
//! Per program, first one untimed profile-mode run gives the profile (kept
//! as `interpose-apps-PROGRAM.profile.csv` beside the CSV, for `symmetry
//! analyze`) and its recommendation, and one untimed glibc run gives the
//! reference output. Then every series runs once per round, so drift of
//! the machine falls on every series alike: the series the rules read
//! (`glibc`, `profile`, `passthrough`, the spin-then-block policies) as
//! many rounds as fit in 25 s (60 s in a full run), from 9 to 21 (25),
//! the others 3 (5).
//! A run that outlives 30x the reference run (at least 10 s) is killed and
//! its series stops.
//!
//! Metrics: `ms` (median of the rounds, with their spread), `vs_glibc` (a
//! series' time over `glibc`'s in the same round, the median of these
//! paired quotients), `vs_passthrough` (on `profile`: its time over
//! `passthrough`'s, paired the same way), `recommended_over` (on each
//! other spin-then-block series: the recommended policy's time over that
//! series' in the same round), `completed`
//! (1 if every run exited 0 in time; else a `status`), `identical` (1 if
//! every completed run's output matched the reference); on the `profile`
//! series also `waits` (contended waits recorded), `locks` (mutexes that
//! waited) and `recommended_vs_offline` (the recommended policy's cost
//! over the optimal off-line), with the policy in `recommended` and the C
//! it was priced with (this run's calibration, passed to every program) in
//! `c_spins`; on every priced policy's spin-then-block series (run or
//! not) `price_vs_offline` (its cost over the optimal off-line's on the
//! same profile).

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use symmetry_models::competitive::{self, Strategy};
use symmetry_models::rng::SplitMix64;

use crate::harness::{Ctx, OWN_MIN, Spread};
use crate::kernels::interpose::{self, Digest, Launch, Mode, Ran};
use crate::kernels::klmo91;
use crate::output::data::Row;

/// The program's own mutexes (no library).
pub const GLIBC: &str = "glibc";
/// Profile mode.
pub const PROFILE: &str = "profile";
/// The library loaded in pass-through (`SYMMETRY_LOCK=off`): what
/// interposing every lock call costs before anything is recorded.
pub const PASSTHROUGH: &str = "passthrough";
/// Series prefix of KLMO91's lock in replace mode.
pub const STB: &str = "spin-then-block:";
/// Metric: a series' time over `glibc`'s in the same round.
pub const VS_GLIBC: &str = "vs_glibc";
/// Metric on the `profile` series: its time over `passthrough`'s in the
/// same round (what the recording adds to interposition).
pub const VS_PASSTHROUGH: &str = "vs_passthrough";
/// Metric on a spin-then-block series: the recommended policy's time over
/// this series' in the same round.
pub const RECOMMENDED_OVER: &str = "recommended_over";
/// Metric on a spin-then-block series: the analysis' price of its policy,
/// cost over the optimal off-line's on the profiled waits.
pub const PRICE: &str = "price_vs_offline";

/// How two runs' outputs are compared.
#[derive(Debug, Clone, Copy)]
enum Same {
    /// Every byte.
    Bytes,
    /// The first line starting with this text (the rest carries timings).
    Line(&'static str),
    /// Every line but those starting with one of these texts (they carry
    /// timings, memory use or a random seed); the output must fit in
    /// [`Digest::HEAD`].
    Except(&'static [&'static str]),
}

/// A program and how it is run.
#[derive(Debug)]
pub struct Program {
    /// Name in rows (`program`).
    pub name: &'static str,
    /// The executable, found in `PATH`.
    program: &'static str,
    /// Its arguments for `threads` workers, input file and run size.
    args: fn(usize, &Path, bool) -> Vec<String>,
    /// How outputs are compared.
    same: Same,
    /// Whether it reads the generated input.
    reads_input: bool,
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The programs, in the order they run and are reported.
pub const PROGRAMS: &[Program] = &[
    Program {
        name: "pigz",
        program: "pigz",
        args: |t, input, _| {
            let mut a = strings(&["-1", "-b", "32", "-p", &t.to_string(), "-c"]);
            a.push(input.display().to_string());
            a
        },
        same: Same::Bytes,
        reads_input: true,
    },
    Program {
        name: "pbzip2",
        program: "pbzip2",
        args: |t, input, _| {
            let mut a = strings(&["-1", "-b1", &format!("-p{t}"), "-c"]);
            a.push(input.display().to_string());
            a
        },
        same: Same::Bytes,
        reads_input: true,
    },
    Program {
        name: "xz",
        program: "xz",
        args: |t, input, _| {
            let mut a = strings(&["-0", "-T", &t.to_string(), "--block-size=64KiB", "-c"]);
            a.push(input.display().to_string());
            a
        },
        same: Same::Bytes,
        reads_input: true,
    },
    Program {
        name: "sysbench-mutex",
        program: "sysbench",
        // 2,000,000 locks in a quick run too. A run four times shorter
        // was bimodal: in some runs of every series its threads shared
        // one CPU the whole run (as under `taskset -c 0`) and finished in
        // a fraction of the time, so the paired ratios swung by more than
        // the rules' margins.
        args: |t, _, _| {
            strings(&[
                "mutex",
                &format!("--threads={t}"),
                "--mutex-num=1",
                "--mutex-locks=2000000",
                "--mutex-loops=50",
                "run",
            ])
        },
        same: Same::Line("total number of events:"),
        reads_input: false,
    },
    Program {
        name: "sysbench-threads",
        program: "sysbench",
        args: |t, _, quick| {
            let events = if quick { 20_000 } else { 80_000 };
            strings(&[
                "threads",
                &format!("--threads={t}"),
                "--thread-locks=1",
                "--thread-yields=10",
                &format!("--events={events}"),
                "--time=0",
                "run",
            ])
        },
        same: Same::Line("total number of events:"),
        reads_input: false,
    },
    Program {
        name: "kcprototest",
        program: "kcprototest",
        args: |t, _, quick| {
            let records = if quick { 250_000 } else { 500_000 };
            strings(&["order", "-th", &t.to_string(), &records.to_string()])
        },
        same: Same::Except(&["seed=", "memory:", "time:"]),
        reads_input: false,
    },
];

/// Whether the rules read `series`: `glibc`, `profile`, `passthrough`
/// and the spin-then-block policies; the other replacement locks are
/// only drawn.
fn judged(series: &str) -> bool {
    series == GLIBC || series == PROFILE || series == PASSTHROUGH || series.starts_with(STB)
}

/// How many rounds each series of one program runs.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rounds {
    /// Rounds of the series the rules read.
    judged: usize,
    /// Rounds of the series only drawn: 3 (5 in a full run).
    drawn: usize,
}

impl Rounds {
    /// The rounds for a program whose reference run took `once`, with
    /// `series` judged series: as many rounds of them as fit in 25 s (60 s
    /// in a full run), at least [`OWN_MIN`], so that their paired
    /// quotients' median interval leaves out the outermost rounds, and at
    /// most [`Ctx::judged_rounds`].
    ///
    /// With 3 rounds the interval is the full range, and one disturbed
    /// round decided `profiler-overhead`. Programs of short runs (pigz,
    /// sysbench-threads) get the most rounds, the longest the fewest.
    fn plan(ctx: &Ctx, once: Duration, series: usize) -> Rounds {
        let per_round = once.as_secs_f64() * series.max(1) as f64;
        let fit = ctx.budget(25_000, 60_000).as_secs_f64() / per_round.max(1e-3);
        Rounds {
            judged: (fit as usize).clamp(OWN_MIN, ctx.judged_rounds()),
            ..Rounds::least(ctx)
        }
    }

    /// The fewest rounds a program runs: [`OWN_MIN`] of the judged
    /// series, 3 (5 in a full run) of the others.
    fn least(ctx: &Ctx) -> Rounds {
        Rounds {
            judged: OWN_MIN,
            drawn: if ctx.quick { 3 } else { 5 },
        }
    }

    /// Rounds of `series`.
    fn of(self, series: &str) -> usize {
        if judged(series) {
            self.judged
        } else {
            self.drawn
        }
    }
}

/// Progress steps of one program at one thread count before it knows
/// its rounds: its two untimed runs and the fewest rounds of each series
/// (the recommended policy, if not among `base_locks`, counts as one more
/// spin-then-block series). A program of short runs adds its further
/// rounds to the bar once it knows them.
pub fn least_steps(ctx: &Ctx, base_locks: &[String]) -> usize {
    let least = Rounds::least(ctx);
    [GLIBC, PROFILE, PASSTHROUGH, STB]
        .into_iter()
        .chain(base_locks.iter().map(String::as_str))
        .map(|s| least.of(s))
        .sum::<usize>()
        + 2
}

/// Writes `mb` MiB of text: words of 2-9 letters from a 5,000-word
/// vocabulary, drawn with a fixed seed (so it compresses like prose and is
/// the same on every machine).
pub fn write_input(path: &Path, mb: usize) -> Result<(), String> {
    let mut rng = SplitMix64(0x5359_4D4D_4554_5259);
    let vocab: Vec<Vec<u8>> = (0..5_000)
        .map(|_| {
            let len = rng.in_range(2, 9) as usize;
            (0..len).map(|_| b'a' + rng.below(26) as u8).collect()
        })
        .collect();
    let want = mb << 20;
    let mut text = Vec::with_capacity(want + 16);
    while text.len() < want {
        text.extend_from_slice(&vocab[rng.below(vocab.len() as u64) as usize]);
        text.push(if rng.below(10) == 0 { b'\n' } else { b' ' });
    }
    text.truncate(want);
    std::fs::write(path, &text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// What one run's output is compared by.
fn key(same: Same, d: &Digest) -> Option<(u64, u64, String)> {
    match same {
        Same::Bytes => Some((d.len, d.hash, String::new())),
        Same::Line(prefix) => d.line(prefix).map(|l| (0, 0, l.to_string())),
        Same::Except(skip) => (d.len <= Digest::HEAD as u64).then(|| {
            let kept = d.head.lines().filter(|l| {
                let l = l.trim_start();
                !skip.iter().any(|p| l.starts_with(p))
            });
            (0, 0, kept.collect::<Vec<_>>().join("\n"))
        }),
    }
}

/// One program at one thread count, and where it runs.
#[derive(Debug)]
pub struct ProgramRun<'a> {
    /// The experiment's id, for its rows and the profile's file name.
    pub id: &'a str,
    /// The program.
    pub program: &'a Program,
    /// Its worker threads.
    pub t: usize,
    /// MiB of the generated input.
    pub mb: usize,
    /// The run's options.
    pub ctx: &'a Ctx,
    /// The interposition library.
    pub lib: &'a Path,
    /// Environment every run gets (the calibration).
    pub env: &'a [(String, String)],
    /// The generated input ([`write_input`]).
    pub input: &'a Path,
    /// Where profiles are written.
    pub scratch: &'a Path,
    /// The experiment's progress bar.
    pub bar: &'a indicatif::ProgressBar,
}

/// The runs of one series.
#[derive(Default)]
struct Runs {
    ms: Vec<f64>,
    failure: Option<String>,
    differed: usize,
}

impl ProgramRun<'_> {
    fn row(&self, series: &str, metric: &str, v: f64, unit: &str) -> Row {
        let r = Row::new(
            self.id,
            series,
            self.t as u32,
            self.ctx.over(self.t),
            metric,
            v,
            unit,
        )
        .param("program", self.program.name);
        if self.program.reads_input {
            r.param("input_mb", self.mb)
        } else {
            r.param("input_mb", "-")
        }
    }

    /// The program's rows: its profile and the recommendation (on the
    /// `profile` series), each priced policy's price, and every series
    /// (`glibc`, `profile`, each of `base_locks`, the recommended policy's
    /// lock) run round-robin with the paired ratios; a row that says why
    /// where the program is not installed or a run failed.
    pub fn rows(&self, base_locks: &[String]) -> Vec<Row> {
        let Ok(program) = interpose::resolve(OsStr::new(self.program.program)) else {
            return vec![
                self.row(GLIBC, "completed", 0.0, "bool")
                    .param("status", "not installed"),
            ];
        };
        let args = (self.program.args)(self.t, self.input, self.ctx.quick);
        let launch = |mode, timeout| Launch {
            program: &program,
            args: &args,
            lib: self.lib,
            mode,
            env: self.env,
            timeout,
        };
        let long = Duration::from_secs(600);
        let failed = |series: &str, why: String| {
            vec![
                self.row(series, "completed", 0.0, "bool")
                    .param("status", why),
            ]
        };
        // The profile and its recommendation.
        let profile_path = self
            .scratch
            .join(format!("{}.profile.csv", self.program.name));
        let _ = std::fs::remove_file(&profile_path);
        let analysis_run = interpose::run(&launch(Mode::Profile(&profile_path), long));
        self.bar.inc(1);
        match analysis_run.as_ref().map(Ran::failure) {
            Ok(None) => {}
            Ok(Some(why)) => return failed(PROFILE, format!("profile run: {why}")),
            Err(e) => return failed(PROFILE, e.clone()),
        }
        let profile = match interpose::read_profile(&profile_path) {
            Ok(p) => p,
            Err(e) => return failed(PROFILE, e),
        };
        let mut rows = Vec::new();
        let analysis = profile
            .as_ref()
            .map(|p| competitive::analyze(p, None, klmo91::SEED));
        let rec = analysis.as_ref().and_then(interpose::recommend);
        let recommended = rec.map(|(s, _)| s);
        {
            let waits = analysis.as_ref().map_or(0, |a| a.waits());
            let with_waits = analysis
                .as_ref()
                .map_or(0, |a| a.locks.iter().filter(|l| l.waits > 0).count());
            let policy = rec.map_or("none".to_string(), |(s, _)| s.name().to_string());
            let c = profile.as_ref().map_or(String::new(), klmo91::c_label);
            rows.push(
                self.row(PROFILE, "waits", waits as f64, "waits")
                    .param("recommended", &policy)
                    .param("c_spins", &c),
            );
            rows.push(
                self.row(PROFILE, "locks", with_waits as f64, "locks")
                    .param("recommended", &policy),
            );
            if let Some((_, r)) = rec {
                rows.push(
                    self.row(PROFILE, "recommended_vs_offline", r, "ratio")
                        .param("recommended", &policy),
                );
            }
            // Every priced policy's cost over the optimal off-line, on the
            // series replace mode runs it as.
            if let (Some(a), Some(_)) = (&analysis, rec) {
                for s in Strategy::POLICIES {
                    if s != Strategy::OptKnown {
                        let name = interpose::spin_then_block_name(s);
                        rows.push(self.row(&name, PRICE, a.cost_vs_offline(s), "ratio"));
                    }
                }
            }
            if let (Some(p), Some(out)) = (&profile, &self.ctx.out) {
                let file = out.join(format!("{}-{}.profile.csv", self.id, self.program.name));
                let _ = std::fs::write(file, p.to_csv());
            }
        }
        // The reference output.
        let reference = interpose::run(&launch(Mode::Glibc, long));
        self.bar.inc(1);
        let reference = match reference {
            Ok(r) if r.ok() => r,
            Ok(r) => {
                rows.extend(failed(
                    GLIBC,
                    r.failure().unwrap_or_else(|| "failed".into()),
                ));
                return rows;
            }
            Err(e) => {
                rows.extend(failed(GLIBC, e));
                return rows;
            }
        };
        let want = key(self.program.same, &reference.out);
        let timeout = (reference.elapsed * 30).max(Duration::from_secs(10));
        // The series, round-robin.
        let mut series: Vec<String> = vec![GLIBC.into(), PROFILE.into(), PASSTHROUGH.into()];
        series.extend(base_locks.iter().cloned());
        if let Some(s) = recommended {
            let name = interpose::spin_then_block_name(s);
            if !series.contains(&name) {
                series.push(name);
            }
        }
        let mut runs: Vec<Runs> = series.iter().map(|_| Runs::default()).collect();
        let judged_series = series.iter().filter(|s| judged(s)).count();
        let plan = Rounds::plan(self.ctx, reference.elapsed, judged_series);
        self.bar
            .inc_length(((plan.judged - OWN_MIN) * judged_series) as u64);
        let most = series.iter().map(|s| plan.of(s)).max().unwrap_or(0);
        for round in 0..most {
            for (name, r) in series.iter().zip(runs.iter_mut()) {
                if round >= plan.of(name) {
                    continue;
                }
                self.bar.inc(1);
                if r.failure.is_some() {
                    continue;
                }
                let mode = match name.as_str() {
                    GLIBC => Mode::Glibc,
                    PROFILE => {
                        let _ = std::fs::remove_file(&profile_path);
                        Mode::Profile(&profile_path)
                    }
                    PASSTHROUGH => Mode::Passthrough,
                    lock => Mode::Replace(lock),
                };
                match interpose::run(&launch(mode, timeout)) {
                    Ok(ran) => match ran.failure() {
                        None => {
                            r.ms.push(ran.elapsed.as_secs_f64() * 1e3);
                            if key(self.program.same, &ran.out) != want || want.is_none() {
                                r.differed += 1;
                            }
                        }
                        Some(why) => r.failure = Some(why),
                    },
                    Err(e) => r.failure = Some(e),
                }
            }
        }
        rows.extend(self.paired_rows(
            plan,
            &series,
            &runs,
            recommended.map(interpose::spin_then_block_name),
        ));
        for (name, r) in series.iter().zip(&runs) {
            let completed = r.failure.is_none() && !r.ms.is_empty();
            let mut c = self.row(name, "completed", f64::from(u8::from(completed)), "bool");
            if let Some(why) = &r.failure {
                c = c.param("status", why);
            }
            rows.push(c);
            if !r.ms.is_empty() {
                rows.push(self.row(
                    name,
                    "identical",
                    f64::from(u8::from(r.differed == 0)),
                    "bool",
                ));
            }
            if completed && let Some(s) = Spread::of(&r.ms) {
                rows.push(self.row(name, "ms", s.median, "ms").with_spread(&s));
            }
        }
        rows
    }

    /// The ratios paired by round: every series that completed every
    /// round over `glibc` in the same round ([`VS_GLIBC`]), `profile`
    /// over `passthrough` ([`VS_PASSTHROUGH`]), and the
    /// recommended policy over every other spin-then-block policy in the
    /// same round ([`RECOMMENDED_OVER`], on the other policy's series).
    /// A series of fewer rounds than the other ran in the first of them.
    /// A program's time moves by 10-20% between rounds and runs here, and
    /// a slower round moves both sides of a pair alike.
    fn paired_rows(
        &self,
        plan: Rounds,
        series: &[String],
        runs: &[Runs],
        recommended: Option<String>,
    ) -> Vec<Row> {
        let full = |name: &str, r: &Runs| r.failure.is_none() && r.ms.len() == plan.of(name);
        let of = |name: &str| {
            series
                .iter()
                .position(|s| s == name)
                .map(|i| &runs[i])
                .filter(|r| full(name, r))
        };
        let mut rows = Vec::new();
        let pair = |name: &str, metric: &str, num: &Runs, den: &Runs| {
            let n = num.ms.len().min(den.ms.len());
            Spread::paired_ratio(&num.ms[..n], &den.ms[..n])
                .map(|q| self.row(name, metric, q.median, "x").with_spread(&q))
        };
        if let Some(glibc) = of(GLIBC) {
            for (name, r) in series.iter().zip(runs) {
                if name != GLIBC && full(name, r) {
                    rows.extend(pair(name, VS_GLIBC, r, glibc));
                }
            }
        }
        if let (Some(profile), Some(floor)) = (of(PROFILE), of(PASSTHROUGH)) {
            rows.extend(pair(PROFILE, VS_PASSTHROUGH, profile, floor));
        }
        if let Some((rec_name, rec)) = recommended.as_deref().and_then(|n| Some((n, of(n)?))) {
            for (name, r) in series.iter().zip(runs) {
                if name.starts_with(STB) && name != rec_name && full(name, r) {
                    rows.extend(pair(name, RECOMMENDED_OVER, rec, r));
                }
            }
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::ScratchDir;

    #[test]
    fn short_programs_get_more_rounds() {
        let ctx = Ctx::new(true, 2);
        let plan = |ms: u64| Rounds::plan(&ctx, Duration::from_millis(ms), 6).judged;
        assert_eq!(plan(200), 20);
        assert_eq!(plan(50), 21);
        assert_eq!(plan(460), OWN_MIN);
        assert_eq!(plan(2000), OWN_MIN);
        assert_eq!(plan(0), 21);
        let full = Rounds::plan(&Ctx::new(false, 2), Duration::from_millis(50), 6);
        assert_eq!((full.judged, full.drawn), (25, 5));
        assert_eq!(full.of("tas"), 5);
        assert_eq!(full.of(PROFILE), 25);
    }

    #[test]
    fn except_compares_every_line_but_the_named_ones() {
        let digest = |text: &str| Digest {
            len: text.len() as u64,
            hash: 0,
            head: text.to_string(),
        };
        let same = Same::Except(&["seed=", "time:"]);
        let a = key(same, &digest("  seed=1 rnum=9\ncount: 9\ntime: 0.1\nok\n"));
        let b = key(same, &digest("  seed=2 rnum=9\ncount: 9\ntime: 0.3\nok\n"));
        let c = key(same, &digest("  seed=1 rnum=9\ncount: 8\ntime: 0.1\nok\n"));
        assert!(a.is_some());
        assert_eq!(a, b, "seeds and timings are left out");
        assert_ne!(a, c, "every other line is compared");
        let mut long = digest("ok\n");
        long.len = Digest::HEAD as u64 + 1;
        assert_eq!(
            key(same, &long),
            None,
            "an output longer than the kept text"
        );
    }

    #[test]
    fn the_input_is_text_of_the_asked_size() {
        let dir = ScratchDir::new("symmetry-ia-test").unwrap();
        let p = dir.path().join("in.txt");
        write_input(&p, 1).unwrap();
        let b = std::fs::read(&p).unwrap();
        assert_eq!(b.len(), 1 << 20);
        assert!(
            b.iter()
                .all(|&c| c.is_ascii_lowercase() || c == b' ' || c == b'\n')
        );
        write_input(&p, 1).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b, "the same every time");
    }
}
