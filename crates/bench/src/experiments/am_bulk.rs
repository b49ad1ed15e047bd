//! `am-bulk` — LC98 §4.1's peak bulk bandwidth, per claim algorithm, beside
//! the memory copy rate measured in the same run.
//!
//! Two ranks of a thread-mode job stream `request_bulk` messages of
//! `bytes` bytes (256, 1 KiB, 4 KiB, 8 KiB: up to one 8 KiB bulk block,
//! LC98's block size) until `total` bytes (16 MiB; `--quick` 8 MiB) have
//! arrived; the receiver copies every block out of the queue, as LC98's
//! receiver does, and checks its sequence number (`verified`). The kernel
//! is [`crate::kernels::messages::bulk`]; bandwidth = bytes / time, in MB/s
//! (10^6 bytes per second, as LC98).
//!
//! Baselines, measured in the same run and interleaved with the
//! algorithms (every repeat runs every series once):
//!
//! - `memcpy`: one pinned thread copies the same total in chunks of
//!   `bytes` between two buffers laid out like the bulk ring, the faster
//!   of two placements of the destination in its page
//!   ([`crate::kernels::messages::memcpy_run`]). This is "the memory copy
//!   rate" of the claim (LC98's own figure is not specified further).
//! - `memcpy-cross-core`: the same chunks handed from one pinned thread to
//!   another through a ring of the same blocks
//!   ([`crate::kernels::messages::cross_core_run`]): both copies and the
//!   cache-line migration of a bulk message, with no claim algorithm, no
//!   packet and no dispatch; a reference for what a bulk transfer between
//!   two cores can reach (a hand-rolled baseline, not a bound).
//!
//! Rows: `bandwidth_mb_s` per (series, `bytes`), threads 2 (1 for
//! `memcpy`); `fraction_of_memcpy` and `fraction_of_cross_core` per
//! algorithm at 8 KiB. Each series runs 11 times (`--quick`: 7), repeats
//! interleaved across series; the value is the peak, the best repeat (LC98
//! reports peak bandwidth, and interference from other load only ever
//! lowers a run's bandwidth), with the range of the repeats as the spread
//! (`lo`, `hi`, `repeats`; a fraction's spread is the quotient of the two
//! ranges) and the median and the minimum as parameters (`median_mb_s`,
//! `min_mb_s`). Streams are kept short (a few ms: already hundreds of laps
//! of the bulk ring, so steady state) and repeats many, because on a
//! shared machine a longer stream is rarely left alone from start to end.

use crate::harness::prelude::*;
use crate::kernels::messages::{BulkOut, bulk, cross_core_run, memcpy_run};

/// Catalogue entry.
pub const EXPERIMENT: Experiment = Experiment {
    id: "am-bulk",
    title: "Bulk transfer bandwidth per claim algorithm vs memcpy",
    source: "LC98 §4.1",
    ..Experiment::new(CLAIMS, run, draw, assess)
};

/// LC98 §4.1's bulk-bandwidth sentence, judged at 8 KiB messages (one
/// full bulk block, LC98's peak) against the baselines of the same run.
const CLAIMS: &[Claim] = &[
    Claim {
        key: "copy-rate-80pct",
        paper: "\"Peak bandwidth using bulk transfers ... [is] roughly 80% of the memory copy rate\" \
                (LC98 §4.1: 158-166 MB/s).",
        rule: "at 8 KiB, the peak bulk bandwidth of each of LC98's six algorithms is between 65% and 95% of \
               the `memcpy` rate of the same run",
        needs: Needs::cores(2),
        judge: copy_rate_80pct,
    },
    Claim {
        key: "little-variation",
        paper: "\"Peak bandwidth using bulk transfers has less variation: the algorithms range from about \
                158 MB/s (Posix mutexes) to 166 MB/s (lockfree)\" (LC98 §4.1: 5%).",
        rule: "at 8 KiB, the fastest of LC98's six algorithms is within 1.11x of the slowest ((max - min) / \
               max at most 10%)",
        needs: Needs::cores(2),
        judge: |d, _| at_peak(d, little_variation),
    },
    Claim {
        key: "mutex-lowest-lock-free-highest",
        paper: "\"... from about 158 MB/s (Posix mutexes) to 166 MB/s (lockfree)\" (LC98 §4.1).",
        rule: "at 8 KiB, `pthread` has a lower peak bulk bandwidth than each other of LC98's six algorithms \
               and `lock-free` a higher one",
        needs: Needs::cores(2),
        judge: |d, _| at_peak(d, mutex_lowest_lock_free_highest),
    },
];

/// Message sizes, bytes.
pub const SIZES: [usize; 4] = [256, 1024, 4096, 8192];
/// The size of LC98's peak-bandwidth figure (one full bulk block).
const PEAK: usize = 8192;
const MEMCPY: &str = "memcpy";
const CROSS: &str = "memcpy-cross-core";
const METRIC: &str = "bandwidth_mb_s";
const OF_MEMCPY: &str = "fraction_of_memcpy";
const OF_CROSS: &str = "fraction_of_cross_core";
/// The LC98 algorithms (`stamp` is the modern one, not in the paper).
const LC98: [&str; 6] = ["tas", "ttas", "ticket", "anderson", "pthread", "lock-free"];
/// "roughly 80%": the band accepted around LC98's fraction.
const BAND: (f64, f64) = (0.65, 0.95);
/// "less variation": (max - min) / max across LC98's algorithms (the
/// paper's spread is (166 - 158) / 166 = 5%).
const VARIATION: f64 = 0.10;

/// The threads a series runs on.
fn threads_of(series: &str) -> u32 {
    if series == MEMCPY { 1 } else { 2 }
}

/// One repeat of `series`: a stream (or copy) per size.
fn measure(series: &str, total: u64) -> Result<Vec<BulkOut>, String> {
    let per_size =
        |f: fn(usize, u64) -> Result<BulkOut, String>| SIZES.iter().map(|&s| f(s, total)).collect();
    match series {
        MEMCPY => per_size(memcpy_run),
        CROSS => per_size(cross_core_run),
        alg => bulk(alg, &SIZES, total),
    }
    .map_err(|e| format!("am-bulk, {series}: {e}"))
}

fn run(ctx: &Ctx) -> Result<Vec<Row>, String> {
    let total: u64 = if ctx.quick { 8 << 20 } else { 16 << 20 };
    let repeats = ctx.rounds(if ctx.quick { 7 } else { 11 });
    let series: Vec<&str> = [MEMCPY, CROSS]
        .into_iter()
        .chain(symmetry_am::claim::NAMES.iter().copied())
        .collect();
    let bar = ctx.bar(EXPERIMENT.id, repeats * series.len());
    // samples[series][size]: repeats interleaved across series, so drift
    // (turbo, a noisy neighbour) hits every series alike.
    let mut samples: Vec<Vec<Vec<BulkOut>>> = vec![vec![Vec::new(); SIZES.len()]; series.len()];
    for _ in 0..repeats {
        for (i, name) in series.iter().enumerate() {
            bar.set_message(name.to_string());
            for (j, o) in measure(name, total)?.into_iter().enumerate() {
                if let Some(s) = samples[i].get_mut(j) {
                    s.push(o);
                }
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let mut rows = Vec::new();
    // The spread of each series at the peak size, for the fractions.
    let mut at_peak: Vec<(&str, f64, Spread)> = Vec::new();
    for (name, per_size) in series.iter().zip(samples) {
        let t = threads_of(name);
        let over = ctx.over(t as usize);
        for (&size, mut s) in SIZES.iter().zip(per_size) {
            s.sort_by(|a, b| a.mb_s().total_cmp(&b.mb_s()));
            let mbs: Vec<f64> = s.iter().map(BulkOut::mb_s).collect();
            let (Some(spread), Some(peak)) = (Spread::of(&mbs), s.last()) else {
                return Err(format!("am-bulk, {name} at {size} B: no repeat"));
            };
            // Peak bandwidth (LC98's quantity): the best repeat. Other load
            // on the machine can only slow a run down (a descheduled rank
            // stalls its partner), so the best run is the estimate of what
            // the two cores can do; the range of the repeats is its spread.
            rows.push(
                Row::new(EXPERIMENT.id, name, t, over, METRIC, spread.hi, "MB/s")
                    .param(crate::output::data::STAT, "max")
                    .param("bytes", size)
                    .param("total_bytes", peak.bytes)
                    .param("median_mb_s", format!("{:.1}", spread.median))
                    .param("min_mb_s", format!("{:.1}", spread.lo))
                    .param("verified", s.iter().all(|o| o.verified))
                    .with_spread(&spread),
            );
            if size == PEAK {
                at_peak.push((name, spread.hi, spread));
            }
        }
    }
    let base = |n: &str| at_peak.iter().find(|(s, _, _)| *s == n).copied();
    for &(name, bw, spread) in at_peak.iter().filter(|(n, _, _)| !is_baseline(n)) {
        for (metric, baseline) in [(OF_MEMCPY, MEMCPY), (OF_CROSS, CROSS)] {
            if let Some((_, b, b_spread)) = base(baseline) {
                rows.push(
                    Row::new(EXPERIMENT.id, name, 2, ctx.over(2), metric, bw / b, "ratio")
                        .param("bytes", PEAK)
                        .param("baseline", baseline)
                        .with_spread(&spread.ratio(b_spread)),
                );
            }
        }
    }
    Ok(rows)
}

/// `bandwidth_mb_s` of `series` at message size `bytes`.
fn bandwidth(rows: &[Row], series: &str, bytes: usize) -> Option<f64> {
    let b = bytes.to_string();
    Data::new(rows).value(
        Sel::metric(METRIC)
            .series(series)
            .params(&[("bytes", b.as_str())]),
    )
}

/// The value of `metric` (a fraction) for `series`.
fn fraction(rows: &[Row], series: &str, metric: &str) -> Option<f64> {
    Data::new(rows).value(Sel::metric(metric).series(series))
}

fn is_baseline(series: &str) -> bool {
    series == MEMCPY || series == CROSS
}

fn draw(rows: &[Row], m: &Machine) -> Figure {
    let mut series: Vec<Series> = Vec::new();
    for r in rows.iter().filter(|r| r.metric == METRIC) {
        let Some(x) = r.get_param("bytes").and_then(|b| b.parse::<f64>().ok()) else {
            continue;
        };
        let p = Point::new(x, r.value, r.oversubscribed);
        match series.iter_mut().find(|s| s.name == r.series) {
            Some(s) => s.points.push(p),
            None => series.push(Series {
                name: r.series.clone(),
                points: vec![p],
            }),
        }
    }
    let lines = Panel::Line(LinePanel {
        title: "bulk bandwidth vs message size".into(),
        x_label: "message bytes (log)".into(),
        y_label: "MB/s (log)".into(),
        x_scale: Scale::Log,
        y_scale: Scale::Log,
        series,
        x_marker: None,
    });
    let bars = |metric: &str, title: &str, reference: Vec<(String, f64)>| {
        Panel::Bar(BarPanel {
            title: title.into(),
            y_label: "fraction".into(),
            y_scale: Scale::Linear,
            bars: rows
                .iter()
                .filter(|r| r.metric == metric)
                .map(|r| {
                    let group = if LC98.contains(&r.series.as_str()) {
                        "LC98 algorithm"
                    } else {
                        "modern"
                    };
                    Bar::new(&r.series, r.value, group)
                })
                .collect(),
            reference_lines: reference,
        })
    };
    figure(
        "am-bulk: bulk bandwidth per claim algorithm vs memcpy (LC98 §4.1)",
        m,
        vec![
            lines,
            bars(
                "fraction_of_memcpy",
                "8 KiB bulk bandwidth / memcpy (same run)",
                vec![("LC98: ~80%".into(), 0.8)],
            ),
            bars(
                "fraction_of_cross_core",
                "8 KiB bulk bandwidth / cross-core copy (same run)",
                vec![("1 = cross-core copy".into(), 1.0)],
            ),
        ],
    )
}

fn mb(x: Option<f64>) -> String {
    x.map_or("n/a".into(), |v| format!("{v:.0} MB/s"))
}

fn pct(x: Option<f64>) -> String {
    x.map_or("n/a".into(), |v| format!("{:.0}%", 100.0 * v))
}

/// An estimate in percent, with its interval.
fn pct_e(e: Estimate) -> String {
    e.show_with(|v| format!("{:.0}%", 100.0 * v))
}

/// An estimate in MB/s, with its interval.
fn mb_e(e: Estimate) -> String {
    format!("{:.0} [{:.0}, {:.0}] MB/s", e.value, e.lo, e.hi)
}

/// The least and the largest of `v`, as percentages: `70% to 80%`.
fn pct_span(v: &[f64]) -> String {
    let least = v.iter().copied().fold(f64::INFINITY, f64::min);
    let most = v.iter().copied().fold(0.0, f64::max);
    format!("{} to {}", pct(Some(least)), pct(Some(most)))
}

/// The 8 KiB bandwidth of `n`.
fn bw(d: &Data<'_>, n: &str) -> Option<Estimate> {
    let peak = PEAK.to_string();
    let at_peak = [("bytes", peak.as_str())];
    d.estimate(Sel::metric(METRIC).series(n).params(&at_peak))
}

/// The 8 KiB bandwidth of each of LC98's algorithms that has one, in
/// [`LC98`]'s order.
type Bandwidths = Vec<(&'static str, Estimate)>;

/// The [`Bandwidths`] of the run.
fn lc98_bw(d: &Data<'_>) -> Bandwidths {
    LC98.iter().filter_map(|n| Some((*n, bw(d, n)?))).collect()
}

/// The lowest and the highest of `bws`.
fn extremes(bws: &Bandwidths) -> [Option<(&'static str, Estimate)>; 2] {
    let by = |a: &&(&str, Estimate), b: &&(&str, Estimate)| a.1.value.total_cmp(&b.1.value);
    [
        bws.iter().min_by(by).copied(),
        bws.iter().max_by(by).copied(),
    ]
}

/// Whether an 8 KiB stream ran with more threads than cores.
fn oversubscribed(d: &Data<'_>) -> bool {
    d.select(Sel::metric(METRIC).params(&[("bytes", PEAK.to_string().as_str())]))
        .any(|r| r.oversubscribed)
}

/// What every rule finds where [`oversubscribed`].
fn over_finding() -> Finding {
    Finding::not_measurable("the 8 KiB streams ran with more threads than cores")
}

/// The rule `judge` on the 8 KiB bandwidths of LC98's algorithms, where
/// they were all measured (`judge` finds nothing where one is missing),
/// each with a core of its own.
fn at_peak(d: &Data<'_>, judge: fn(&Bandwidths) -> Option<Finding>) -> Finding {
    let absent: Vec<&str> = LC98
        .iter()
        .copied()
        .filter(|n| bw(d, n).is_none())
        .collect();
    if oversubscribed(d) {
        return over_finding();
    }
    match judge(&lc98_bw(d)) {
        Some(f) if absent.is_empty() => f,
        _ => Finding::missing(&format!("8 KiB bandwidth of {}", names(&absent))),
    }
}

/// `copy-rate-80pct`: at 8 KiB, each of LC98's algorithms reaches between
/// 65% and 95% of `memcpy` (roughly 80% of the memory copy rate).
fn copy_rate_80pct(d: &Data<'_>, _m: &Machine) -> Finding {
    let frac = |n: &str| d.estimate(Sel::metric(OF_MEMCPY).series(n));
    let fracs: Vec<(&str, Estimate)> = LC98.iter().filter_map(|n| Some((*n, frac(n)?))).collect();
    if oversubscribed(d) {
        return over_finding();
    } else if fracs.len() < LC98.len() {
        return Finding::missing("the 8 KiB fraction of `memcpy` of every LC98 algorithm");
    }
    let band = |f: Estimate| [rule::at_least(f, BAND.0), rule::at_most(f, BAND.1)];
    let shown = fracs.iter().map(|(n, f)| format!("`{n}` {}", pct_e(*f)));
    Finding::new(
        Outcome::all(fracs.iter().flat_map(|(_, f)| band(*f))),
        format!("bulk bandwidth / `memcpy`: {}", fmt::join(shown, ", ")),
    )
}

/// `little-variation`: at 8 KiB, the fastest of LC98's algorithms within
/// 1.11x of the slowest.
fn little_variation(bws: &Bandwidths) -> Option<Finding> {
    let [Some(lo), Some(hi)] = extremes(bws) else {
        return None;
    };
    Some(Finding::new(
        rule::within_factor(hi.1, lo.1, 1.0 / (1.0 - VARIATION)),
        format!(
            "highest `{}` {}, lowest `{}` {}: ratio {}",
            hi.0,
            mb_e(hi.1),
            lo.0,
            mb_e(lo.1),
            hi.1.ratio(lo.1).show(2)
        ),
    ))
}

/// `mutex-lowest-lock-free-highest`: at 8 KiB, `pthread` below each other
/// of LC98's algorithms and `lock-free` above.
fn mutex_lowest_lock_free_highest(bws: &Bandwidths) -> Option<Finding> {
    let find = |n: &str| bws.iter().find(|(s, _)| *s == n).map(|(_, e)| *e);
    let (Some(px), Some(lf)) = (find("pthread"), find("lock-free")) else {
        return None;
    };
    let mut outcomes = Vec::new();
    for (n, e) in bws {
        if *n != "pthread" {
            outcomes.push(rule::less(px, *e));
        }
        if *n != "lock-free" {
            outcomes.push(rule::greater(lf, *e));
        }
    }
    let [lo, hi] = extremes(bws).map(|e| e.map_or("n/a", |e| e.0));
    Some(Finding::new(
        Outcome::all(outcomes),
        format!(
            "`pthread` {}, `lock-free` {}; lowest `{lo}`, highest `{hi}`",
            mb_e(px),
            mb_e(lf),
        ),
    ))
}

fn assess(rows: &[Row], _m: &Machine) -> Assessment {
    let d = Data::new(rows);
    let [lowest, highest] = extremes(&lc98_bw(&d));

    let mut header = table::header("series", SIZES.iter().map(|s| format!("{s} B")));
    header.extend(["8 KiB / memcpy".into(), "8 KiB / cross-core".into()]);
    let table = table::by_series(&header, &crate::harness::series_names(rows, METRIC), |n| {
        let mut cells: Vec<String> = SIZES.iter().map(|&s| mb(bandwidth(rows, n, s))).collect();
        let baseline = is_baseline(n);
        cells.extend([OF_MEMCPY, OF_CROSS].map(|f| {
            if baseline {
                String::new()
            } else {
                pct(fraction(rows, n, f))
            }
        }));
        cells
    });

    let mem = bandwidth(rows, MEMCPY, PEAK);
    let cross = bandwidth(rows, CROSS, PEAK);
    let cross_frac = mem.zip(cross).map(|(m, c)| c / m);
    let mut measured = if rows.is_empty() {
        "No rows.".to_string()
    } else {
        format!(
            "At 8 KiB messages (peak of the repeats): `memcpy` {}, `memcpy-cross-core` {} ({} of `memcpy`), \
             LC98's algorithms {} to {}, `stamp` {}.",
            mb(mem),
            mb(cross),
            pct(cross_frac),
            mb(lowest.map(|l| l.1.value)),
            mb(highest.map(|h| h.1.value)),
            mb(bandwidth(rows, "stamp", PEAK)),
        )
    };
    let of_cross: Vec<f64> = LC98
        .iter()
        .filter_map(|n| fraction(rows, n, OF_CROSS))
        .collect();
    if !of_cross.is_empty() {
        measured.push_str(&format!(
            " Against the cross-core copy (the same two copies and cache-line migration, without claim, \
             packet or dispatch), LC98's algorithms reach {}.",
            pct_span(&of_cross)
        ));
    }
    let steadiness: Vec<f64> = d
        .select(Sel::metric(METRIC).params(&[("bytes", PEAK.to_string().as_str())]))
        .filter(|r| r.value > 0.0)
        .filter_map(|r| Some(r.get_param("median_mb_s")?.parse::<f64>().ok()? / r.value))
        .collect();
    if !steadiness.is_empty() {
        measured.push_str(&format!(
            " Run-to-run: at 8 KiB the median repeat reached {} of the peak.",
            pct_span(&steadiness),
        ));
    }
    let unverified: Vec<String> = d
        .select(Sel::metric(METRIC))
        .filter(|r| r.get_param("verified") == Some("false"))
        .map(|r| {
            format!(
                "`{}` at {} B",
                r.series,
                r.get_param("bytes").unwrap_or("?")
            )
        })
        .collect();
    if !unverified.is_empty() {
        measured.push_str(&format!(
            "\n\n**Data check failed** (a block arrived with the wrong sequence number, or not all arrived) \
             for {}.",
            unverified.join(", ")
        ));
    }
    let notes = format!(
        "LC98's \"memory copy rate\" (about 200 MB/s on a 1998 Sun Enterprise 5000) was set by main memory, \
         and a bulk message, copied in by the sender and out by the receiver, ran at 80% of it. The baselines \
         here copy between buffers shaped like the bulk ring, which stay in a core's caches wherever the caches \
         hold the ring: `memcpy` is then one core's cached copy rate, while every byte of a bulk message must \
         also move from the sender's caches to the receiver's. `memcpy-cross-core`, that transfer without \
         the protocol, reached {} of `memcpy` in this run; the fraction of the cross-core copy is the cost of \
         the Active Messages protocol itself (claim, packet, handshake, dispatch, the receiver's poll). Each \
         bandwidth is the best of its repeats (peak bandwidth), judged with the range of the repeats.",
        pct(cross_frac)
    );
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

    /// 8 KiB rows on `m`: `memcpy` at 1000 MB/s, the cross-core copy at
    /// 900, each algorithm at `f` of `memcpy`, every point with a repeat
    /// spread of `rel` either side.
    fn rows(m: &Machine, fracs: &[(&str, f64)], rel: f64) -> Vec<Row> {
        let r = testing::Rows::new(&EXPERIMENT, m).rel(rel);
        let row = |n: &str, t, metric: &str, v: f64| r.row(n, t, metric, v).param("bytes", PEAK);
        let mut v = vec![row(MEMCPY, 1, METRIC, 1000.0), row(CROSS, 2, METRIC, 900.0)];
        for (n, f) in fracs {
            v.push(row(n, 2, METRIC, 1000.0 * f).param("verified", true));
            v.push(row(n, 2, OF_MEMCPY, *f));
        }
        v
    }

    const PAPER: [(&str, f64); 7] = [
        ("tas", 0.80),
        ("ttas", 0.80),
        ("ticket", 0.81),
        ("anderson", 0.80),
        ("pthread", 0.78),
        ("lock-free", 0.82),
        ("stamp", 0.83),
    ];

    #[test]
    fn verdicts_reach_every_case() {
        for m in [small_vm(), big_metal()] {
            let v = |fracs: &[(&str, f64)], rel| {
                testing::verdict(&EXPERIMENT, &rows(&m, fracs, rel), &m)
            };
            assert_eq!(v(&PAPER, 0.002), Verdict::Holds);
            let inverted = [
                ("tas", 0.3),
                ("ttas", 0.35),
                ("ticket", 0.4),
                ("anderson", 0.45),
                ("pthread", 0.9),
                ("lock-free", 0.2),
            ];
            assert_eq!(v(&inverted, 0.002), Verdict::Differs);
            let flat: Vec<(&str, f64)> = LC98.iter().map(|n| (*n, 0.65)).collect();
            assert_eq!(v(&flat, 0.1), Verdict::Indistinct);
            // A third of the copy rate, same order: partly.
            let low: Vec<(&str, f64)> = PAPER.iter().map(|(n, f)| (*n, f / 3.0)).collect();
            assert_eq!(v(&low, 0.002), Verdict::Partial);
            // Algorithms left out: nothing to judge.
            assert_eq!(v(&PAPER[..3], 0.002), Verdict::NotMeasurable);
        }
        let one = testing::machine(1, true);
        let v = testing::verdict(&EXPERIMENT, &rows(&one, &PAPER, 0.002), &one);
        assert_eq!(v, Verdict::NotMeasurable);
        let m = small_vm();
        assert_eq!(draw(&rows(&m, &PAPER, 0.01), &m).panels.len(), 3);
    }

    #[test]
    fn machine_neutral() {
        testing::assert_neutral(&EXPERIMENT, |m| rows(m, &PAPER, 0.01));
    }
}
