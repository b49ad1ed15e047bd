//! `peer-messages` — LC98's two message patterns (§4.1's round trip and
//! §4.2's many-to-one stress) on symmetry-am's default claim algorithm,
//! its two best shared-ring ones, and the modern peers, in one run:
//!
//! - `am-rings` (the default, which the rules judge), `am-stamp`,
//!   `am-lock-free`: symmetry-am with the `rings`, `stamp` and
//!   `lock-free` claims ([`crate::kernels::messages::logp`]'s RTT and
//!   [`crate::kernels::messages::stress`]); ranks are threads of a thread-mode
//!   job, each mapping the named segments itself, exactly as processes do;
//! - `crossbeam-arrayqueue`: `crossbeam_queue::ArrayQueue` in one process
//!   ([`crate::peers::messages::arrayqueue_rtt_ns`],
//!   [`crate::peers::messages::arrayqueue_many_to_one`]);
//! - `unix-socket`: Unix domain sockets between processes
//!   ([`crate::peers::messages::unix_rtt_ns`] over a stream socket pair,
//!   [`crate::peers::messages::unix_many_to_one`] over a datagram socket
//!   pair; parameter `mode` says whether `fork` was allowed, else threads);
//! - `iceoryx2` (built with the `iceoryx2` feature): Eclipse iceoryx2's
//!   inter-process publish-subscribe, set up by its own latency benchmark
//!   ([`crate::peers::messages`]'s `iceoryx2_rtt_ns` and
//!   `iceoryx2_many_to_one`); without the feature its rows are absent and
//!   the claim `ahead-of-iceoryx2` is not measurable;
//! - `cacheline-pingpong` (RTT only): one cache line bounced between two
//!   cores ([`crate::kernels::messages::pingpong_rtt_ns`]), the physical limit of a
//!   shared-memory message.
//!
//! Metrics: `rtt_ns` (threads 2; parameter `rounds`: 200,000, `--quick`
//! 20,000, a tenth of that for `unix-socket`) and `ns_per_msg` of
//! many-to-one with `writers` in `1..=2*cores-1` (threads = writers + 1,
//! oversubscribed marked; parameters `writers`, `ints` (1,000,000, as
//! LC98; `--quick` 200,000), `verified`). Each point is the median of
//! [`Ctx::repeats`] runs (an oversubscribed many-to-one point of
//! `OVER_ROUNDS`), interleaved across the series so that drift hits
//! every series alike, with their spread (`lo`, `hi`, `repeats`).
//! `--threads T,...` selects many-to-one points by thread count (writers =
//! T - 1, T >= 2).

use crate::harness::prelude::*;
use crate::kernels::messages::{logp, pingpong_rtt_ns, stress};
use crate::peers::messages::{
    Mode, arrayqueue_many_to_one, arrayqueue_rtt_ns, unix_many_to_one, unix_rtt_ns,
};
#[cfg(feature = "iceoryx2")]
use crate::peers::messages::{iceoryx2_many_to_one, iceoryx2_rtt_ns};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "peer-messages",
    title: "Round trip and many-to-one: symmetry-am vs crossbeam ArrayQueue and Unix sockets",
    source: "modern peers (LC98 §4.1-4.2 workloads)",
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// Writers the many-to-one rules start at (LC98's smallest contended
/// point: 3 writers); with the receiver, each needs a core.
const CONTENDED: u32 = 3;

/// This harness's targets (no paper states them); LC98 motivates user-level
/// shared-memory messaging by the cost of operating-system involvement (its
/// Posix mutex, the one algorithm that enters the kernel, is "not
/// competitive").
const CLAIMS: &[Claim] = &[
    Claim {
        key: "rtt-vs-queue",
        paper: "Target (this harness, no paper states it): a shared-memory Active Message between processes \
                costs at most 2x a message through an in-process lock-free queue (crossbeam's `ArrayQueue`), \
                for LC98's round trip (§4.1).",
        rule: "`am-rings`'s round trip is at most 2x `crossbeam-arrayqueue`'s",
        needs: Needs::cores(2),
        judge: |d, _| rtt(d, (AM, CROSSBEAM), rule::at_most, VS_QUEUE),
    },
    Claim {
        key: "rtt-vs-socket",
        paper: "Target (this harness): at least 5x faster than a Unix domain socket, for the round trip; LC98 \
                §4.3: the algorithm that involves the operating system \"is not competitive\".",
        rule: "`unix-socket`'s round trip is at least 5x `am-rings`'s",
        needs: Needs::cores(2),
        judge: |d, _| rtt(d, (UNIX, AM), rule::at_least, VS_SOCKET),
    },
    Claim {
        key: "many-to-one-vs-queue",
        paper: "Target (this harness): at most 2x the in-process queue for LC98's many-to-one stress (§4.2).",
        rule: "at the most writers (3 or more) that leave every participant a core, `am-rings`'s time per \
               message is at most 2x `crossbeam-arrayqueue`'s",
        needs: Needs::cores(CONTENDED as usize + 1),
        judge: |d, m| contended(d, m, (AM, CROSSBEAM), rule::at_most, VS_QUEUE),
    },
    Claim {
        key: "many-to-one-vs-socket",
        paper: "Target (this harness): at least 5x faster than a Unix domain socket for LC98's many-to-one \
                stress (§4.2).",
        rule: "at the most writers (3 or more) that leave every participant a core, `unix-socket`'s time per \
               message is at least 5x `am-rings`'s",
        needs: Needs::cores(CONTENDED as usize + 1),
        judge: |d, m| contended(d, m, (UNIX, AM), rule::at_least, VS_SOCKET),
    },
    Claim {
        key: "one-writer-vs-queue",
        paper: "Target (this project's): many-to-one with one writer (LC98 §4.2's uncontended point) at most 2x \
                the in-process queue.",
        rule: "with one writer, `am-rings`'s time per message is at most 2x `crossbeam-arrayqueue`'s",
        needs: Needs::cores(2),
        judge: |d, _| {
            let (num, den) = (mto_e(d, AM, 1), mto_e(d, CROSSBEAM, 1));
            compare(
                num,
                den,
                "1 writer: am-rings / arrayqueue",
                rule::at_most,
                VS_QUEUE,
            )
        },
    },
    Claim {
        key: "ahead-of-iceoryx2",
        paper: "Target (this project's, issue 40; no paper states it): symmetry-am is ahead of iceoryx2, the \
                shared-memory channel users compare it with, run with iceoryx2's own settings for lowest \
                latency: for LC98's round trip (§4.1) and for many-to-one with one writer (§4.2).",
        rule: "`am-rings`'s round trip and its one-writer time per message are each at most `iceoryx2`'s",
        needs: Needs::cores(2),
        judge: |d, _| ahead_of_iceoryx2(d),
    },
];

/// symmetry-am's default algorithm, which the rules judge.
const AM: &str = "am-rings";
const STAMP: &str = "am-stamp";
const LOCK_FREE: &str = "am-lock-free";
const CROSSBEAM: &str = "crossbeam-arrayqueue";
const UNIX: &str = "unix-socket";
const ICEORYX2: &str = "iceoryx2";
const LINE: &str = "cacheline-pingpong";
const RTT: &str = "rtt_ns";
const MTO: &str = "ns_per_msg";
/// Runs per oversubscribed many-to-one point ([`Ctx::rounds`] of it), not
/// [`Ctx::repeats`]' two: with a writer descheduled now and then, one
/// writer count's runs fall into modes (the receiver catching up with a
/// running writer, or waiting for a descheduled one), and the median of
/// two took either. A point costs milliseconds, so nine cost the run
/// little. Points with a core per participant keep [`Ctx::repeats`]: their
/// rules read the spread from the fastest to the slowest run, which more
/// runs would only widen.
const OVER_ROUNDS: usize = 9;
/// Series of both patterns, in report order (and [`ICEORYX2`] after them
/// where it was measured).
const SERIES: [&str; 5] = [AM, STAMP, LOCK_FREE, CROSSBEAM, UNIX];
/// Targets of this harness (no paper states one): symmetry-am at most this
/// many times slower than the in-process queue ...
const VS_QUEUE: f64 = 2.0;
/// ... and at least this many times faster than the kernel's path.
const VS_SOCKET: f64 = 5.0;
/// This project's target against iceoryx2: no slower.
const VS_ICEORYX2: f64 = 1.0;

/// The series of both patterns this build measures: [`SERIES`], and
/// [`ICEORYX2`] with the `iceoryx2` feature.
fn measured() -> Vec<&'static str> {
    let with_iceoryx2 = cfg!(feature = "iceoryx2").then_some(ICEORYX2);
    SERIES.into_iter().chain(with_iceoryx2).collect()
}

/// The series of both patterns `rows` hold, in report order: [`SERIES`],
/// and [`ICEORYX2`] where it was measured.
fn reported(rows: &[Row]) -> Vec<&'static str> {
    let with_iceoryx2 = rows
        .iter()
        .any(|r| r.series == ICEORYX2)
        .then_some(ICEORYX2);
    SERIES.into_iter().chain(with_iceoryx2).collect()
}

/// One measured value and how it was run.
#[derive(Debug, Clone, Copy)]
struct Sample {
    value: f64,
    verified: bool,
    mode: &'static str,
}

/// Round trips timed per run: `rounds`, a tenth of it for `unix-socket`
/// (tens of microseconds each; a tenth is still thousands).
fn rounds_of(series: &str, rounds: u64) -> u64 {
    if series == UNIX { rounds / 10 } else { rounds }
}

fn rtt_sample(series: &str, rounds: u64) -> Result<Sample, String> {
    let threads = |value| Sample {
        value,
        verified: true,
        mode: Mode::Threads.name(),
    };
    Ok(match series {
        AM => threads(logp("rings", rounds)?.rtt_ns),
        STAMP => threads(logp("stamp", rounds)?.rtt_ns),
        LOCK_FREE => threads(logp("lock-free", rounds)?.rtt_ns),
        CROSSBEAM => threads(arrayqueue_rtt_ns(rounds)),
        UNIX => {
            let (v, mode) = unix_rtt_ns(rounds)?;
            Sample {
                mode: mode.name(),
                ..threads(v)
            }
        }
        LINE => threads(pingpong_rtt_ns(rounds)),
        #[cfg(feature = "iceoryx2")]
        ICEORYX2 => threads(iceoryx2_rtt_ns(rounds)?),
        _ => return Err(format!("peer-messages: unknown series `{series}`")),
    })
}

fn mto_sample(series: &str, writers: u32, ints: u64) -> Result<Sample, String> {
    let am = |alg: &str| -> Result<Sample, String> {
        let o = stress(alg, writers, ints)?;
        Ok(Sample {
            value: o.ns_per_msg,
            verified: o.verified,
            mode: Mode::Threads.name(),
        })
    };
    let peer = |o: crate::peers::messages::ManyToOne| Sample {
        value: o.ns_per_msg,
        verified: o.verified,
        mode: o.mode.name(),
    };
    match series {
        AM => am("rings"),
        STAMP => am("stamp"),
        LOCK_FREE => am("lock-free"),
        CROSSBEAM => Ok(peer(arrayqueue_many_to_one(writers, ints))),
        UNIX => Ok(peer(unix_many_to_one(writers, ints)?)),
        #[cfg(feature = "iceoryx2")]
        ICEORYX2 => Ok(peer(iceoryx2_many_to_one(writers, ints)?)),
        _ => Err(format!("peer-messages: unknown series `{series}`")),
    }
}

/// The median of a point's samples with their spread, whether all were
/// verified, and the modes they ran in (`processes+threads` if they
/// differed).
fn summarize(series: &str, s: &[Sample]) -> Result<(Spread, bool, String), String> {
    let values: Vec<f64> = s.iter().map(|x| x.value).collect();
    let spread = Spread::of(&values)
        .ok_or_else(|| format!("peer-messages: no valid sample of `{series}`"))?;
    let mut modes: Vec<&str> = Vec::new();
    for x in s {
        if !modes.contains(&x.mode) {
            modes.push(x.mode);
        }
    }
    Ok((spread, s.iter().all(|x| x.verified), modes.join("+")))
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let rounds: u64 = if ctx.quick { 20_000 } else { 200_000 };
    let ints: u64 = if ctx.quick { 200_000 } else { 1_000_000 };
    let writers: Vec<u32> = match &ctx.threads {
        Some(t) => t
            .iter()
            .filter(|&&t| t >= 2)
            .map(|&t| t as u32 - 1)
            .collect(),
        None => (1..=(2 * ctx.cores).saturating_sub(1).max(1) as u32).collect(),
    };
    let series = measured();
    let rtt_series: Vec<&str> = std::iter::once(LINE).chain(series.clone()).collect();
    let rtt_repeats = ctx.repeats(2);
    let mto_rounds = |threads: usize| {
        if ctx.over(threads) {
            ctx.rounds(OVER_ROUNDS)
        } else {
            ctx.repeats(threads)
        }
    };
    let len = rtt_repeats * rtt_series.len()
        + writers
            .iter()
            .map(|&w| mto_rounds(w as usize + 1) * series.len())
            .sum::<usize>();
    let bar = ctx.bar(EXPERIMENT.id, len);
    let row = |s: &str, t: usize, metric: &str, spread: &Spread| {
        let (over, median) = (ctx.over(t), spread.median);
        Row::new(EXPERIMENT.id, s, t as u32, over, metric, median, "ns")
    };
    let mut rows = Vec::new();
    // Each repeat runs every series once, so that drift hits all alike.
    let samples = try_in_rounds(rtt_repeats, rtt_series.len(), |_, i| {
        let s = rtt_series[i];
        bar.set_message(format!("{s} rtt"));
        let sample = rtt_sample(s, rounds_of(s, rounds));
        bar.inc(1);
        sample
    })?;
    for (s, v) in rtt_series.iter().zip(samples) {
        let (spread, _, mode) = summarize(s, &v)?;
        rows.push(
            row(s, 2, RTT, &spread)
                .param("rounds", rounds_of(s, rounds))
                .param("mode", mode)
                .with_spread(&spread),
        );
    }
    for &w in &writers {
        let threads = w as usize + 1;
        let samples = try_in_rounds(mto_rounds(threads), series.len(), |_, i| {
            bar.set_message(format!("{} x{w} writers", series[i]));
            let sample = mto_sample(series[i], w, ints);
            bar.inc(1);
            sample
        })?;
        for (s, v) in series.iter().zip(samples) {
            let (spread, verified, mode) = summarize(s, &v)?;
            rows.push(
                row(s, threads, MTO, &spread)
                    .param("writers", w)
                    .param("ints", ints)
                    .param("verified", verified)
                    .param("mode", mode)
                    .with_spread(&spread),
            );
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let bars = rows
        .iter()
        .filter(|r| r.metric == RTT)
        .map(|r| {
            let group = match r.series.as_str() {
                AM | STAMP | LOCK_FREE => "symmetry-am",
                LINE => "physical limit",
                _ => "peer",
            };
            Bar::new(&r.series, r.value, group)
        })
        .collect();
    let rtt = Panel::Bar(BarPanel {
        title: "round trip, 2 threads / processes".into(),
        y_label: "ns per round trip (log)".into(),
        y_scale: Scale::Log,
        bars,
        reference_lines: Vec::new(),
    });
    let title = "many-to-one: writers + 1 receiver";
    let mto = Lines::new(rows, m).of(MTO, title, "ns per message (log)", Scale::Log);
    figure(
        "peer-messages: symmetry-am vs crossbeam ArrayQueue and Unix sockets (LC98 §4 workloads)",
        m,
        vec![rtt, mto],
    )
}

/// `ns_per_msg` of `series` with `writers` writers.
fn mto(rows: &[Row], series: &str, writers: u32) -> Option<f64> {
    value(rows, series, writers + 1, MTO, None)
}

fn param<'a>(rows: &'a [Row], series: &str, metric: &str, key: &str) -> Option<&'a str> {
    rows.iter()
        .find(|r| r.series == series && r.metric == metric)
        .and_then(|r| r.get_param(key))
}

/// A ratio rule's finding: `num / den` against `threshold` with `rule`, or
/// missing when either was not measured.
fn compare(
    num: Option<Estimate>,
    den: Option<Estimate>,
    what: &str,
    rule: fn(Estimate, f64) -> rule::Outcome,
    threshold: f64,
) -> Finding {
    match (num, den) {
        (Some(n), Some(d)) => {
            let r = n.ratio(d);
            Finding::new(rule(r, threshold), format!("{what} = {}", r.show(2)))
        }
        _ => Finding::missing(what),
    }
}

/// The many-to-one time per message of series `s` with `w` writers.
fn mto_e(d: &Data<'_>, s: &str, w: u32) -> Option<Estimate> {
    d.estimate(Sel::metric(MTO).series(s).threads(w + 1))
}

/// The name of a series in the rules' evidence.
fn short(s: &str) -> &str {
    if s == CROSSBEAM { "arrayqueue" } else { s }
}

/// `num`'s round trip over `den`'s (2 threads, each unless
/// oversubscribed) judged against `threshold` by `rule`.
fn rtt(
    d: &Data<'_>,
    (num, den): (&str, &str),
    rule: fn(Estimate, f64) -> rule::Outcome,
    threshold: f64,
) -> Finding {
    let e = |s| {
        let r = d.row(Sel::point(RTT, s, 2)).filter(|r| !r.oversubscribed);
        r.map(|r| d.estimate_of(r))
    };
    let what = format!("RTT {} / {}", short(num), short(den));
    compare(e(num), e(den), &what, rule, threshold)
}

/// `am-rings` against `iceoryx2`: the round trip and the one-writer time
/// per message each at most iceoryx2's (medians of the interleaved
/// repeats with their spread); not measurable without `iceoryx2` rows.
fn ahead_of_iceoryx2(d: &Data<'_>) -> Finding {
    if !reported(d.rows()).contains(&ICEORYX2) {
        return Finding::not_measurable(
            "no `iceoryx2` rows: the run's binary was built without the `iceoryx2` feature \
             (`cargo build --release -p symmetry-bench --features iceoryx2`)",
        );
    }
    let one_writer = compare(
        mto_e(d, AM, 1),
        mto_e(d, ICEORYX2, 1),
        "1 writer: am-rings / iceoryx2",
        rule::at_most,
        VS_ICEORYX2,
    );
    let parts = [
        rtt(d, (AM, ICEORYX2), rule::at_most, VS_ICEORYX2),
        one_writer,
    ];
    Finding::all(parts.map(|f| (f.outcome, f.evidence)), "; ")
}

/// The writer counts of the many-to-one points, ascending.
fn writers_of(d: &Data<'_>) -> Vec<u32> {
    let mut writers: Vec<u32> = d
        .select(Sel::metric(MTO))
        .map(|r| r.threads.saturating_sub(1))
        .collect();
    writers.sort_unstable();
    writers.dedup();
    writers
}

/// The judged many-to-one point: the most writers (3 or more) that leave
/// every participant a core of its own on `m`.
fn judged_writers(d: &Data<'_>, m: &Machine) -> Option<u32> {
    let cores = m.cores() as u32;
    writers_of(d)
        .iter()
        .copied()
        .filter(|&w| w >= CONTENDED && w < cores)
        .filter(|&w| {
            d.row(Sel::metric(MTO).series(AM).threads(w + 1))
                .is_none_or(|r| !r.oversubscribed)
        })
        .max()
}

/// At the judged many-to-one point ([`judged_writers`]), `num`'s time per
/// message over `den`'s judged against `threshold` by `rule`; not
/// measurable where there is no such point.
fn contended(
    d: &Data<'_>,
    m: &Machine,
    (num, den): (&str, &str),
    rule: fn(Estimate, f64) -> rule::Outcome,
    threshold: f64,
) -> Finding {
    let Some(w) = judged_writers(d, m) else {
        return Finding::not_measurable(format!(
            "no many-to-one point with {CONTENDED} or more writers where every participant has a core \
             (writers measured: {})",
            fmt::counts(&writers_of(d))
        ));
    };
    let what = format!("{w} writers: {} / {}", short(num), short(den));
    compare(mto_e(d, num, w), mto_e(d, den, w), &what, rule, threshold)
}

fn assess(rows: &[Row], m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let cores = m.cores() as u32;
    let rtt = |s: &str| value(rows, s, 2, RTT, None);
    let writers = writers_of(&d);
    let judged = judged_writers(&d, m);

    let mut header = table::header("series", ["RTT".to_string()]);
    header.extend(writers.iter().map(|w| {
        let over = if w + 1 > cores { " (over)" } else { "" };
        format!("{w} writer{}{over}", if *w == 1 { "" } else { "s" })
    }));
    let series: Vec<&str> = std::iter::once(LINE).chain(reported(rows)).collect();
    let table = table::by_series(&header, &series, |s| {
        let cells = writers.iter().map(|&w| match mto(rows, s, w) {
            Some(v) => {
                let bad = d
                    .row(Sel::metric(MTO).series(s).threads(w + 1))
                    .is_some_and(|r| r.get_param("verified") == Some("false"));
                format!("{}{}", ns(v), if bad { " (NOT verified)" } else { "" })
            }
            None if s == LINE => String::new(),
            None => "n/a".into(),
        });
        std::iter::once(na(rtt(s), ns)).chain(cells).collect()
    });

    let q = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a / b);
    let r = |x: Option<f64>| na(x, ratio);
    let mut measured = if rows.is_empty() {
        "No rows.".to_string()
    } else {
        format!(
            "Round trip: `cacheline-pingpong` {} (the physical limit), `am-rings` {} ({} of the limit), \
             `am-stamp` {}, `am-lock-free` {}, `crossbeam-arrayqueue` {} ({} of the limit), `unix-socket` {} \
             ({}).",
            na(rtt(LINE), ns),
            na(rtt(AM), ns),
            r(q(rtt(AM), rtt(LINE))),
            na(rtt(STAMP), ns),
            na(rtt(LOCK_FREE), ns),
            na(rtt(CROSSBEAM), ns),
            r(q(rtt(CROSSBEAM), rtt(LINE))),
            na(rtt(UNIX), ns),
            param(rows, UNIX, RTT, "mode").map_or("n/a".into(), |m| format!("between {m}")),
        )
    };
    let iceoryx2 = reported(rows).contains(&ICEORYX2);
    if iceoryx2 {
        measured.push_str(&format!(
            " The same for `iceoryx2`: {} (am-rings / iceoryx2 = {}).",
            na(rtt(ICEORYX2), ns),
            r(q(rtt(AM), rtt(ICEORYX2))),
        ));
    }
    if !writers.is_empty() {
        measured.push_str("\n\nMany-to-one, time per message:\n\n");
    }
    for &w in &writers {
        let note = if w + 1 > cores {
            " (oversubscribed, not judged)"
        } else if Some(w) == judged {
            " (judged)"
        } else {
            ""
        };
        let vs_iceoryx2 = if iceoryx2 {
            let x = r(q(mto(rows, AM, w), mto(rows, ICEORYX2, w)));
            format!(", am-rings / iceoryx2 = {x}")
        } else {
            String::new()
        };
        measured.push_str(&format!(
            "- {w} writer{}{note}: am-rings / arrayqueue = {}, unix-socket / am-rings = {}, \
             am-stamp / am-rings = {}, am-lock-free / am-rings = {}{vs_iceoryx2}\n",
            if w == 1 { "" } else { "s" },
            r(q(mto(rows, AM, w), mto(rows, CROSSBEAM, w))),
            r(q(mto(rows, UNIX, w), mto(rows, AM, w))),
            r(q(mto(rows, STAMP, w), mto(rows, AM, w))),
            r(q(mto(rows, LOCK_FREE, w), mto(rows, AM, w))),
        ));
    }
    let unverified: Vec<String> = d
        .select(Sel::metric(MTO))
        .filter(|r| r.get_param("verified") == Some("false"))
        .map(|r| format!("`{}` x{}", r.series, r.get_param("writers").unwrap_or("?")))
        .collect();
    if !unverified.is_empty() {
        measured.push_str(&format!(
            "\n**Sum check failed** for {}.",
            unverified.join(", ")
        ));
    }
    let unix_mode = param(rows, UNIX, MTO, "mode")
        .or(param(rows, UNIX, RTT, "mode"))
        .unwrap_or("processes");
    let mut notes = format!(
        "The ratios are taken within one run (medians of interleaved repeats), so they do not depend on the \
         machine's absolute speed. What each message costs: a symmetry-am short message is a claim (no atomic \
         step for `rings`, whose senders each own a lane; one CAS for `stamp`, two for `lock-free`), a packet on its own cache line written and marked READY, and a poll \
         that dispatches it to a handler; an `ArrayQueue` push or pop is one CAS on a shared index and a stamped \
         slot; a Unix socket message is a system call on each side, a copy through a kernel buffer and, as the \
         waiting side sleeps in `read`/`recv`, a wake-up through the scheduler. But an `ArrayQueue` lives in one \
         process's heap: it cannot connect two processes, whereas symmetry-am's queues are named shared-memory \
         segments that separate processes map (`symmetry am spawn`); its ranks here are threads that map the \
         segments themselves, the same memory traffic as processes. The Unix-socket peers ran as {unix_mode}. \
         With {cores} cores, {} is the largest many-to-one point where every participant has a core; more \
         writers are oversubscribed and measure the scheduler as much as the queues (reported, not judged).",
        writers.iter().copied().filter(|&w| w < cores).max().map_or(
            "no point".into(),
            |w| format!("{w} writer{}", if w == 1 { "" } else { "s" })
        )
    );
    if iceoryx2 {
        notes.push_str(
            " An iceoryx2 message is a sample loaned from the publisher's shared-memory pool, written in \
             place, and its offset pushed into the subscriber's queue of that publisher; the subscriber \
             busy-polls its queues and returns the sample to the pool when done with it. iceoryx2 runs as \
             its latency benchmark sets it up (one-sample buffers for the round trip, the next sample loaned \
             before waiting), its round trip timed as symmetry-am's is (the median of blocks of 1,000 rounds, so \
             that a block in which the scheduler ran another task does not count); many-to-one gives \
             each publisher a queue of 256 samples, with safe overflow off so that a full queue makes the \
             publisher wait (iceoryx2's `Block`: it yields, then sleeps) instead of dropping a sample.",
        );
    }
    Assessment {
        measured,
        notes,
        table: Some(table),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::testing::{self, big_metal, small_vm};
    use crate::output::report::Verdict;

    /// Rows on `m`: round trips `am` (every symmetry-am series), `queue`,
    /// `unix` (ns) and the
    /// ping-pong at 50 ns; many-to-one a quarter of each at writers 1, 3,
    /// cores - 1 and 2 cores - 1; every point with a spread of `rel`.
    fn rows(m: &Machine, am: f64, queue: f64, unix: f64, rel: f64) -> Vec<Row> {
        let c = m.cores() as u32;
        let mut ws = vec![1, CONTENDED, c.saturating_sub(1).max(1), 2 * c - 1];
        ws.sort_unstable();
        ws.dedup();
        let r = testing::Rows::new(&EXPERIMENT, m).rel(rel);
        let mut v = Vec::new();
        for (s, x) in [
            (LINE, 50.0),
            (AM, am),
            (STAMP, am),
            (LOCK_FREE, am),
            (CROSSBEAM, queue),
            (UNIX, unix),
        ] {
            v.push(r.row(s, 2, RTT, x).param("mode", "processes"));
            for &w in ws.iter().filter(|_| s != LINE) {
                let row = r.row(s, w + 1, MTO, x / 4.0).param("writers", w);
                v.push(row.param("verified", "true"));
            }
        }
        v
    }

    fn holds(m: &Machine) -> Vec<Row> {
        rows(m, 300.0, 200.0, 5000.0, 0.01)
    }

    #[test]
    fn verdicts_reach_every_case() {
        for m in [small_vm(), big_metal()] {
            let v = |rows: &[Row]| testing::verdict(&EXPERIMENT, rows, &m);
            assert_eq!(v(&holds(&m)), Verdict::Holds);
            assert_eq!(v(&rows(&m, 300.0, 100.0, 600.0, 0.01)), Verdict::Differs);
            assert_eq!(v(&rows(&m, 400.0, 200.0, 2000.0, 0.1)), Verdict::Indistinct);
            assert_eq!(v(&rows(&m, 300.0, 100.0, 5000.0, 0.01)), Verdict::Partial);
            assert_eq!(v(&[]), Verdict::NotMeasurable);
        }
        // Many-to-one with every participant on a core needs 4 cores.
        let m = small_vm();
        let s = EXPERIMENT.section(&holds(&m), &m);
        testing::assert_says(&s.measured, "needs 4 or more cores");
        let one = testing::machine(1, true);
        let v = testing::verdict(&EXPERIMENT, &holds(&one), &one);
        assert_eq!(v, Verdict::NotMeasurable);
        assert_eq!(draw(&holds(&m), &m).panels.len(), 2);
    }

    #[test]
    fn iceoryx2_is_judged_where_measured() {
        let m = small_vm();
        let ahead = |rows: &[Row]| testing::findings(&EXPERIMENT, rows, &m).pop().unwrap();
        let without = ahead(&holds(&m));
        assert!(matches!(without.outcome, Outcome::NotMeasurable(_)));
        testing::assert_says(&without.evidence, "without the `iceoryx2` feature");
        // iceoryx2 at `x` ns round trip and `x / 4` per message.
        let with = |x: f64| {
            let r = testing::Rows::new(&EXPERIMENT, &m).rel(0.01);
            let mut v = holds(&m);
            v.push(r.row(ICEORYX2, 2, RTT, x));
            v.push(r.row(ICEORYX2, 2, MTO, x / 4.0).param("writers", 1));
            v
        };
        assert_eq!(ahead(&with(600.0)).outcome, Outcome::Holds);
        assert_eq!(ahead(&with(150.0)).outcome, Outcome::Fails);
        let s = EXPERIMENT.section(&with(600.0), &m);
        testing::assert_says(&s.measured, "The same for `iceoryx2`: 600.0 ns");
        let s = EXPERIMENT.section(&holds(&m), &m);
        assert!(!s.measured.contains("The same for `iceoryx2`"));
        assert_eq!(draw(&with(600.0), &m).panels.len(), 2);
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, holds);
    }
}
