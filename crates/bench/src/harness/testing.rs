//! Test support for experiments: synthetic machines and the check that a
//! section says nothing of a machine it was not measured on.
//!
//! Every experiment's tests build rows for a small virtual machine and a
//! large machine without a hypervisor, render the section for each, and
//! call [`assert_machine_neutral`]; they also check that its rules reach
//! holds, differs and not measurable on data built for each case.

use std::path::Path;

use super::{Data, Experiment, Finding, Outcome};
use crate::output::data::Row;
use crate::output::machine::Machine;
use crate::output::report::{Verdict, section_markdown};

/// A synthetic machine: `cores` logical CPUs, virtualized (KVM) or not.
pub fn machine(cores: usize, virtualized: bool) -> Machine {
    Machine {
        cpu_model: "Synthetic CPU".into(),
        logical_cpus: cores,
        online_cpus: cores,
        kernel: "6.0.0".into(),
        os: "Synthetic OS".into(),
        virtualized,
        hypervisor: virtualized.then(|| "kvm".to_string()),
        memory_gib: 16.0,
        rustc: "rustc 1.0.0".into(),
        git_commit: "0000000".into(),
        profile: "release".into(),
        timestamp_utc: "2026-01-01T00:00:00Z".into(),
        quick: true,
        command: "symmetry reproduce --quick".into(),
    }
}

/// SMARTQ's eight locks by registry name, for the synthetic rows of the
/// `pq-*` experiments' tests.
pub const SMARTQ_LOCKS: [&str; 8] = [
    "tas",
    "tas-np",
    "mcs",
    "mcs-np",
    "handshake",
    "smart-q",
    "native",
    "native-np",
];

/// The small virtual machine of the machine-neutrality tests (2 cores, KVM).
pub fn small_vm() -> Machine {
    machine(2, true)
}

/// The large bare-metal machine of the machine-neutrality tests (64 cores).
pub fn big_metal() -> Machine {
    machine(64, false)
}

/// The small VM and the big machine, for the tests that check each.
pub fn small_and_big() -> [Machine; 2] {
    [small_vm(), big_metal()]
}

/// Phrases that state the small VM's facts.
const SMALL_FACTS: &[&str] = &[
    "2 cores",
    "2-core",
    "two cores",
    "2 logical",
    "two processors",
    "virtual machine",
    "virtualized",
    "hypervisor",
];

/// Phrases that state the big machine's facts.
const BIG_FACTS: &[&str] = &[
    "64 cores",
    "64-core",
    "64 logical",
    "bare metal",
    "bare-metal",
];

/// The section of `e` for `rows` on `m`, rendered as the report renders it.
pub fn render(e: &Experiment, rows: &[Row], m: &Machine) -> (Verdict, String) {
    let s = e.section(rows, m);
    (s.verdict, section_markdown(Path::new("."), &s))
}

/// What each claim's judge finds for `rows` on `m`, in declaration order,
/// whether or not `m` meets the claim's needs (the report would say "not
/// measurable" for those: [`Experiment::judge`]).
pub fn findings(e: &Experiment, rows: &[Row], m: &Machine) -> Vec<Finding> {
    let d = Data::new(rows);
    e.claims.iter().map(|c| (c.judge)(&d, m)).collect()
}

/// Asserts that no claim of `e` finds anything to judge in `rows` on `m`
/// ([`findings`]).
#[track_caller]
pub fn assert_nothing_judged(e: &Experiment, rows: &[Row], m: &Machine) {
    for f in findings(e, rows, m) {
        assert!(matches!(f.outcome, Outcome::NotMeasurable(_)), "{f:?}");
    }
}

/// Asserts that finding `i` of `f` came out `want`; on failure the
/// message carries the rule's evidence.
#[track_caller]
pub fn assert_outcome(f: &[Finding], i: usize, want: Outcome) {
    let f = &f[i];
    assert_eq!(f.outcome, want, "rule {i}: {}", f.evidence);
}

/// Renders `e` on the small VM with `rows_small` and on the big machine
/// with `rows_big` and panics if either text states the other machine's
/// facts (core count, virtualization), naming the phrase.
pub fn assert_machine_neutral(e: &Experiment, rows_small: &[Row], rows_big: &[Row]) {
    let (_, small) = render(e, rows_small, &small_vm());
    let (_, big) = render(e, rows_big, &big_metal());
    for f in BIG_FACTS {
        assert!(
            !small.to_lowercase().contains(f),
            "{}: the section for a 2-core VM says {f:?}:\n{small}",
            e.id
        );
    }
    for f in SMALL_FACTS {
        assert!(
            !big.to_lowercase().contains(f),
            "{}: the section for a 64-core bare-metal machine says {f:?}:\n{big}",
            e.id
        );
    }
}

/// The verdict of `e` for `rows` on `m`.
pub fn verdict(e: &Experiment, rows: &[Row], m: &Machine) -> Verdict {
    e.section(rows, m).verdict
}

/// A lock's synthetic values at 1 thread, a middle count and all cores
/// ([`Rows::curve`]).
pub type Curve = fn(&str) -> [f64; 3];

/// Asserts the cases the lock experiments' rules reach with curves: on
/// the big machine and an 8-core VM, `e` holds for the rows `rows` builds
/// from `paper`, differs for those from `opposite` and is indistinct for
/// those from `even`; on the small VM it holds for `paper`, saying
/// `small_says` (why the rest was not judged).
pub fn assert_curve_cases(
    e: &Experiment,
    rows: impl Fn(&Machine, Curve) -> Vec<Row>,
    [paper, opposite, even]: [Curve; 3],
    small_says: &str,
) {
    let cases = [
        (paper, Verdict::Holds),
        (opposite, Verdict::Differs),
        (even, Verdict::Indistinct),
    ];
    assert_verdicts(e, &[big_metal(), machine(8, true)], &rows, &cases);
    let m = small_vm();
    assert_holds_saying(e, &rows(&m, paper), &m, small_says);
}

/// Asserts, on each of `machines`, that `e` comes out as each case's
/// verdict for the rows `rows` builds from the case's input.
pub fn assert_verdicts<F: Copy>(
    e: &Experiment,
    machines: &[Machine],
    rows: impl Fn(&Machine, F) -> Vec<Row>,
    cases: &[(F, Verdict)],
) {
    for m in machines {
        for (input, want) in cases {
            assert_verdict(e, &rows(m, *input), m, *want);
        }
    }
}

/// Asserts that `e` comes out `want` for `rows` on `m`, showing the
/// measured text if not.
#[track_caller]
pub fn assert_verdict(e: &Experiment, rows: &[Row], m: &Machine, want: Verdict) {
    let s = e.section(rows, m);
    assert_eq!(
        s.verdict,
        want,
        "{} on {} cores:\n{}",
        e.id,
        m.cores(),
        s.measured
    );
}

/// Asserts that `e` holds for `rows` on `m`, and that its measured text
/// says `phrase` (typically why a rule was not judged on `m`).
#[track_caller]
pub fn assert_holds_saying(e: &Experiment, rows: &[Row], m: &Machine, phrase: &str) {
    assert_verdict(e, rows, m, Verdict::Holds);
    assert_says(&e.section(rows, m).measured, phrase);
}

/// Synthetic rows of one experiment on one machine ([`row`]): 3 repeats
/// spread 2% of the value either side, unless [`Rows::rel`] says otherwise.
#[derive(Debug, Clone, Copy)]
pub struct Rows<'a> {
    id: &'a str,
    m: &'a Machine,
    rel: f64,
}

impl<'a> Rows<'a> {
    /// Rows of `e` measured on `m`.
    pub fn new(e: &'a Experiment, m: &'a Machine) -> Rows<'a> {
        Rows {
            id: e.id,
            m,
            rel: 0.02,
        }
    }

    /// With a repeat spread of `rel` of the value either side.
    pub fn rel(self, rel: f64) -> Rows<'a> {
        Rows { rel, ..self }
    }

    /// `metric` of `series` at `threads`, oversubscribed where `threads`
    /// exceeds the machine's cores; add parameters with [`Row::param`].
    pub fn row(&self, series: &str, threads: u32, metric: &str, value: f64) -> Row {
        row(
            self.id,
            series,
            threads,
            self.m,
            metric,
            value,
            self.rel,
            &[],
        )
    }

    /// `metric` of `series` at 1, `mid` and all cores with the values `v`,
    /// and at 4x cores (oversubscribed) with the last value again; a count
    /// equal to the one before it is given once.
    pub fn curve(&self, series: &str, metric: &str, mid: u32, v: [f64; 3]) -> Vec<Row> {
        let c = self.m.cores() as u32;
        let mut ps = vec![(1, v[0]), (mid, v[1]), (c, v[2]), (4 * c, v[2])];
        ps.dedup_by_key(|(p, _)| *p);
        (ps.into_iter())
            .map(|(p, x)| self.row(series, p, metric, x))
            .collect()
    }
}

/// [`assert_machine_neutral`] with the rows `rows` builds for each machine.
pub fn assert_neutral(e: &Experiment, rows: impl Fn(&Machine) -> Vec<Row>) {
    assert_machine_neutral(e, &rows(&small_vm()), &rows(&big_metal()));
}

/// Asserts that the section, the assessment and the figure of `e` are
/// made without a panic from `rows` on `m` with every value NaN and every
/// parameter gone, and from no rows at all.
pub fn assert_hostile_rows_do_not_panic(e: &Experiment, mut rows: Vec<Row>, m: &Machine) {
    for r in &mut rows {
        r.value = f64::NAN;
        r.params.clear();
    }
    for rows in [&rows[..], &[]] {
        let _ = e.section(rows, m);
        let _ = (e.figure)(rows, m);
    }
}

/// Asserts that `text` says `phrase`, showing the text if not.
#[track_caller]
pub fn assert_says(text: &str, phrase: &str) {
    assert!(text.contains(phrase), "{phrase:?} not in:\n{text}");
}

/// A synthetic row of experiment `id` with a repeat spread of `rel` of the
/// value on each side (3 repeats) and parameters `params`.
#[allow(clippy::too_many_arguments)] // one argument per column of a row
pub fn row(
    id: &str,
    series: &str,
    threads: u32,
    m: &Machine,
    metric: &str,
    value: f64,
    rel: f64,
    params: &[(&str, &str)],
) -> Row {
    let mut r = Row::new(
        id,
        series,
        threads,
        threads as usize > m.cores(),
        metric,
        value,
        "x",
    );
    for (k, v) in params {
        r = r.param(k, v);
    }
    r.with_spread(&crate::harness::Spread {
        median: value,
        lo: value * (1.0 - rel),
        hi: value * (1.0 + rel),
        n: 3,
    })
}
