//! What every experiment is built from.
//!
//! An experiment is a declaration ([`Experiment`]): its id, title and
//! source, the paper's claims each with its rule in words, the rule as code
//! (`judge`) and what the rule needs of the machine ([`Claim`], [`Needs`]),
//! a `run` that measures and returns tidy rows, a `figure` drawn from rows
//! and an `assess` that describes the measurement ([`Assessment`]). The
//! harness turns the declaration and the data into the report's
//! [`Section`] ([`section`]): it judges every claim whose [`Needs`] the
//! machine in `machine.json` meets (the others are not measurable), prints
//! every rule beside its outcome, and combines the outcomes into the
//! verdict. Nothing in
//! an experiment's text may state a fact of the machine it was written on:
//! whatever depends on the machine is generated from `machine.json` and the
//! data (tested by [`testing`]).
//!
//! The runner is here too: [`run`] measures experiments in this process,
//! [`reproduce`] a whole catalogue in two passes of child processes, and
//! [`results`] writes a results directory and builds its report. Each
//! takes the catalogue it works on as a parameter.

use std::path::PathBuf;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::output::data::Row;
use crate::output::machine::Machine;
use crate::output::plot::Figure;
use crate::output::report::{Section, Table, Verdict};

pub mod draw;
pub mod fmt;
pub mod predicted;
pub mod prelude;
pub mod reproduce;
pub mod results;
pub mod rows;
pub mod rule;
pub mod run;
pub use crate::stats;
pub mod table;
pub mod testing;

pub use crate::scratch::ScratchDir;
pub use draw::{Lines, bar_panels, figure, param_panel, threads_panel};
pub use fmt::{names, ns, ratio};
pub use rows::{Data, OWN_MIN, Sel, series_names, spread_of, value};
pub use rule::{Estimate, Finding, Outcome};
pub use stats::{Spread, in_rounds, median, median_of, median_run, try_in_rounds};

/// What an experiment is run with.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// `--quick`: shorter budgets, fewer points; same code paths.
    pub quick: bool,
    /// `--threads`, if given.
    pub threads: Option<Vec<usize>>,
    /// `--locks`, if given (validated names).
    pub locks: Option<Vec<String>>,
    /// Logical CPUs available.
    pub cores: usize,
    /// Show progress bars.
    pub progress: bool,
    /// The output directory (`--out`), for experiments whose results
    /// include files besides the CSV (e.g. `cs-analytic`'s recorded lock
    /// profiles); `None`: such files are not written.
    pub out: Option<PathBuf>,
    /// This run is one of the two passes `symmetry reproduce` measures an
    /// experiment in (two processes, started a whole pass apart, whose rows
    /// are then joined): each pass takes about half the repeats
    /// ([`Ctx::rounds`]; points judged on their own interval keep
    /// [`OWN_MIN`] rounds in each, [`Ctx::own_rounds`]), so the pair costs
    /// somewhat more than one run, and the joined points' intervals hold
    /// what changes between processes and over minutes, which the
    /// repeats of one process never see.
    pub half: bool,
}

impl Ctx {
    /// A context for `cores` cores with no narrowing, no progress bars and
    /// no output directory (tests, library use).
    pub fn new(quick: bool, cores: usize) -> Ctx {
        Ctx {
            quick,
            threads: None,
            locks: None,
            cores: cores.max(1),
            progress: false,
            out: None,
            half: false,
        }
    }

    /// How many repeats to take in this process of an experiment that
    /// wants `n`: `n`, or in one of two passes ([`Ctx::half`]) half of it
    /// rounded up.
    pub fn rounds(&self, n: usize) -> usize {
        if self.half { n.div_ceil(2) } else { n }
    }

    /// [`Ctx::rounds`] for a point a rule judges on its own median
    /// interval ([`Data::estimate_own`]): never fewer than [`OWN_MIN`]
    /// where `n` is at least that, so that in each pass no single round
    /// sets an end of the interval.
    pub fn own_rounds(&self, n: usize) -> usize {
        if n >= OWN_MIN {
            self.rounds(n).max(OWN_MIN)
        } else {
            self.rounds(n)
        }
    }

    /// The ends of the processor range, for experiments that compare at
    /// one processor and at all cores: `--threads` if given, else 1 and
    /// the cores (sorted, without repeats).
    pub fn ends(&self) -> Vec<usize> {
        let mut p = self.threads.clone().unwrap_or_else(|| vec![1, self.cores]);
        p.sort_unstable();
        p.dedup();
        p
    }

    /// Thread counts to sweep: `--threads`, else 1..=2*cores plus 4*cores
    /// (the 4x oversubscription point).
    pub fn sweep(&self) -> Vec<usize> {
        if let Some(t) = &self.threads {
            return t.clone();
        }
        let mut v: Vec<usize> = (1..=2 * self.cores).collect();
        v.push(4 * self.cores);
        v.dedup();
        v
    }

    /// Repeats per point: 5 where every thread has a core, and 2 for
    /// oversubscribed points (dominated by the scheduler and the most
    /// expensive to run, but never without a spread of their own). With 3
    /// repeats a point whose runs fall into two modes (a spin lock that
    /// sometimes hands over within a core's cache and sometimes not) took
    /// its median from either mode, and its rule flipped between runs.
    /// In one of two passes, [`Ctx::rounds`] of that: 3 and 1.
    pub fn repeats(&self, threads: usize) -> usize {
        self.rounds(if self.over(threads) { 2 } else { 5 })
    }

    /// Rounds at a point a rule judges: 21 (25 in a full run). Where
    /// [`Ctx::repeats`]' five runs give a median interval from the fastest
    /// to the slowest, so that one disturbed run moves an end and the
    /// rule, 21 paired rounds give [`Spread::median_interval`] from the
    /// 6th to the 16th, which a few disturbed rounds move by a rank each.
    /// Points that are only drawn take fewer (each experiment says how
    /// many; most [`Ctx::repeats`]). In one of two passes,
    /// [`Ctx::own_rounds`] of that: 11 (13).
    pub fn judged_rounds(&self) -> usize {
        self.own_rounds(if self.quick { 21 } else { 25 })
    }

    /// Whether `threads` exceeds the cores.
    pub fn over(&self, threads: usize) -> bool {
        threads > self.cores
    }

    /// Per-point time budget: `quick` or `full`.
    pub fn budget(&self, quick_ms: u64, full_ms: u64) -> Duration {
        Duration::from_millis(if self.quick { quick_ms } else { full_ms })
    }

    /// A progress bar over `len` points, hidden unless enabled.
    pub fn bar(&self, id: &str, len: usize) -> ProgressBar {
        let bar = if self.progress {
            ProgressBar::new(len as u64)
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(
            ProgressStyle::with_template("{prefix:>24} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix(id.to_string());
        bar
    }
}

/// What a rule needs of the machine to be judged. Compared with
/// `machine.json` by the harness; a rule whose needs are not met is "not
/// measurable here" with a reason generated from both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// Logical CPUs the rule needs (1: any machine).
    pub cores: usize,
    /// Whether the rule needs a machine that is not virtualized.
    pub bare_metal: bool,
}

impl Needs {
    /// Any machine.
    pub const NONE: Needs = Needs {
        cores: 1,
        bare_metal: false,
    };

    /// At least `n` logical CPUs.
    pub const fn cores(n: usize) -> Needs {
        Needs {
            cores: n,
            bare_metal: false,
        }
    }

    /// Also a machine that is not virtualized.
    pub const fn bare_metal(self) -> Needs {
        Needs {
            bare_metal: true,
            ..self
        }
    }

    /// The requirement in words, if there is one.
    pub fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.cores > 1 {
            parts.push(format!("{} or more cores", self.cores));
        }
        if self.bare_metal {
            parts.push("a physical machine".to_string());
        }
        (!parts.is_empty()).then(|| format!("needs {}", parts.join(" and ")))
    }

    /// Why `m` does not meet the requirement, or `None` if it does.
    pub fn unmet(&self, m: &Machine) -> Option<String> {
        let mut why = Vec::new();
        if m.cores() < self.cores {
            why.push(format!(
                "needs {} or more cores, the run had {}",
                self.cores,
                m.cores()
            ));
        }
        if self.bare_metal && m.virtualized {
            why.push(format!(
                "needs a physical machine, the run reported a hypervisor ({})",
                m.hypervisor.as_deref().unwrap_or("hypervisor unknown")
            ));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }
}

/// One claim of a paper and the rule that judges it.
#[derive(Debug, Clone, Copy)]
pub struct Claim {
    /// Short key, e.g. `ttas-gains-more`.
    pub key: &'static str,
    /// What the paper says (a quote or a close paraphrase with the number).
    pub paper: &'static str,
    /// The rule over the data, in words, printed beside the outcome.
    pub rule: &'static str,
    /// What the rule needs of the machine.
    pub needs: Needs,
    /// The rule as code: the outcome on a run's data, with its evidence.
    /// Called only where the machine meets [`Claim::needs`].
    pub judge: Judge,
}

/// A rule as code ([`Claim::judge`]).
pub type Judge = fn(&Data<'_>, &Machine) -> Finding;

/// What `assess` says about a run beside the rules' outcomes: the
/// measurement, notes and the numbers behind them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Assessment {
    /// What was measured (markdown), generated from the data.
    pub measured: String,
    /// Further explanation (markdown), generated from the data and the
    /// machine; may be empty.
    pub notes: String,
    /// The key numbers.
    pub table: Option<Table>,
}

/// One entry of the catalogue: a declaration.
#[derive(Clone, Copy)]
pub struct Experiment {
    /// Stable id (CLI, file names).
    pub id: &'static str,
    /// One-line title.
    pub title: &'static str,
    /// Paper and figure/table reproduced.
    pub source: &'static str,
    /// Whether `--locks` narrows it.
    pub uses_locks: bool,
    /// The paper's claims, each with its rule.
    pub claims: &'static [Claim],
    /// Runs the experiment.
    pub run: fn(&Ctx) -> Result<Vec<Row>, String>,
    /// Draws its figure from rows.
    pub figure: fn(&[Row], &Machine) -> Figure,
    /// Describes the measurement (the claims judge themselves).
    pub assess: fn(&[Row], &Machine) -> Assessment,
    /// How `symmetry reproduce` schedules it.
    pub schedule: Schedule,
}

/// How `symmetry reproduce` schedules an experiment: properties of the
/// experiment, declared with it.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    /// Runs after all the others: it creates and frees a million threads
    /// or more (gigabytes of stacks). After such a run the kernel's memory
    /// is in another state (free lists reordered, pages being reclaimed)
    /// and a process started next gets its memory laid out differently:
    /// `presto-atomic-int`'s `dyn` over generic ratio, steady across fresh
    /// processes, moved by tens of percent in runs started right after
    /// `tm-null-threads` and `tm-million` (notes of issue #12).
    pub last: bool,
    /// A `--quick` run measures it in one process: not in a second pass,
    /// and not again when the placement probe moved during it, because a
    /// quick run of it takes minutes (it runs Debian programs under every
    /// lock configuration). Declared rather than judged from how long a
    /// run took, so that how an experiment is measured never depends on
    /// how fast the machine was. A full run measures every experiment in
    /// two passes and retakes any whose probe moved.
    pub one_process_when_quick: bool,
    /// The environment its rows install in the experiments after it
    /// (`cs-calibrate`'s spin-then-block constants, which one process
    /// would share in memory), or `None` if the rows lack it.
    pub installs: Option<Installs>,
}

/// Environment variables a child process is given, `(name, value)`.
pub type Env = Vec<(String, String)>;

/// Reads the environment an experiment installs from its rows
/// ([`Schedule::installs`]).
pub type Installs = fn(&[Row]) -> Option<Env>;

impl Schedule {
    /// Two passes in catalogue order, installing nothing.
    pub const PLAIN: Schedule = Schedule {
        last: false,
        one_process_when_quick: false,
        installs: None,
    };
    /// [`Schedule::last`].
    pub const LAST: Schedule = Schedule {
        last: true,
        ..Self::PLAIN
    };
    /// [`Schedule::one_process_when_quick`].
    pub const ONE_PROCESS_WHEN_QUICK: Schedule = Schedule {
        one_process_when_quick: true,
        ..Self::PLAIN
    };
}

impl std::fmt::Debug for Experiment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Experiment")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Experiment {
    /// An experiment wired to its claims, run, figure and assessment, with
    /// what its declaration still names left empty: the base of a
    /// catalogue entry's struct update, `Experiment { id, title, source,
    /// ..Experiment::new(CLAIMS, run, draw, assess) }`. It is not narrowed
    /// by `--locks` and has the [`Schedule::PLAIN`] schedule unless the
    /// entry says otherwise.
    pub const fn new(
        claims: &'static [Claim],
        run: fn(&Ctx) -> Result<Vec<Row>, String>,
        figure: fn(&[Row], &Machine) -> Figure,
        assess: fn(&[Row], &Machine) -> Assessment,
    ) -> Self {
        Self {
            id: "",
            title: "",
            source: "",
            uses_locks: false,
            claims,
            run,
            figure,
            assess,
            schedule: Schedule::PLAIN,
        }
    }

    /// The report section of this experiment for `rows` measured on `m`.
    pub fn section(&self, rows: &[Row], m: &Machine) -> Section {
        section(self, m, &Data::new(rows), (self.assess)(rows, m))
    }

    /// Each claim's finding for `rows` measured on `m`, in declaration
    /// order, as the report prints them ([`findings`]); the verdict is
    /// [`verdict_of`] their outcomes.
    pub fn judge(&self, rows: &[Row], m: &Machine) -> Vec<Finding> {
        findings(self, m, &Data::new(rows))
    }
}

/// The verdict of a list of outcomes (the not-measurable ones left out),
/// from the rules the run could decide: holds if some hold and none fails;
/// differs if some fail and none holds; partly holds if some hold and some
/// fail; not distinguishable if every judged rule is a tie; not measurable
/// if none could be judged.
///
/// A tie neither supports nor refutes a claim, so it does not move the
/// verdict between holds, partly holds and differs: a rule near its line
/// that lands on a tie in one run and on a decision in the next would
/// otherwise flip the experiment's verdict between back-to-back runs. The
/// ties stay listed with the rules and counted in the section's "why".
pub fn verdict_of(outcomes: &[Outcome]) -> Verdict {
    let judged: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| !matches!(o, Outcome::NotMeasurable(_)))
        .collect();
    let count = |x: &Outcome| judged.iter().filter(|o| **o == x).count();
    let (holds, fails, ties) = (
        count(&Outcome::Holds),
        count(&Outcome::Fails),
        count(&Outcome::Tie),
    );
    match () {
        _ if judged.is_empty() => Verdict::NotMeasurable,
        _ if ties == judged.len() => Verdict::Indistinct,
        _ if fails == 0 => Verdict::Holds,
        _ if holds == 0 => Verdict::Differs,
        _ => Verdict::Partial,
    }
}

/// One finding per claim of `e`, in declaration order: the claim's judge
/// on `d`, or "not measurable here" where `m` does not meet the claim's
/// declared needs.
pub fn findings(e: &Experiment, m: &Machine, d: &Data<'_>) -> Vec<Finding> {
    e.claims
        .iter()
        .map(|c| match c.needs.unmet(m) {
            Some(why) => Finding::not_measurable(why),
            None => (c.judge)(d, m),
        })
        .collect()
}

/// The report section of `e` for data `d` and its assessment `a` on
/// machine `m`: the claims quoted, the measurement, every rule with its
/// outcome and evidence, the verdict and why.
pub fn section(e: &Experiment, m: &Machine, d: &Data<'_>, a: Assessment) -> Section {
    let mut outcomes = Vec::new();
    let mut rules = String::new();
    for (c, finding) in e.claims.iter().zip(findings(e, m, d)) {
        let needs = c
            .needs
            .describe()
            .map_or(String::new(), |n| format!(" ({n})"));
        let evidence = if finding.evidence.trim().is_empty() {
            String::new()
        } else {
            format!(": {}", finding.evidence.trim())
        };
        rules.push_str(&format!(
            "- `{}` — {}{needs} — **{}**{evidence}\n",
            c.key, c.rule, finding.outcome
        ));
        outcomes.push(finding.outcome);
    }
    let verdict = verdict_of(&outcomes);
    let claim = if e.claims.len() == 1 {
        e.claims[0].paper.to_string()
    } else {
        e.claims
            .iter()
            .map(|c| format!("- {}", c.paper))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let measured = format!(
        "{}\n\nRules, each judged with this run's measured noise (the median repeat range of each metric):\n\n{rules}",
        a.measured.trim()
    );
    let mut why = tally(&outcomes);
    if !a.notes.trim().is_empty() {
        why.push(' ');
        why.push_str(a.notes.trim());
    }
    Section {
        id: e.id.into(),
        title: e.title.into(),
        source: e.source.into(),
        claim,
        measured,
        verdict,
        why,
        table: a.table,
        svg: Some(format!("{}.svg", e.id)),
        provenance: None,
    }
}

/// "2 of 3 rules hold; 1 is not distinguishable ..." over the outcomes.
fn tally(outcomes: &[Outcome]) -> String {
    let n = outcomes.len();
    let c = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
    let holds = c(|o| *o == Outcome::Holds);
    let fails = c(|o| *o == Outcome::Fails);
    let ties = c(|o| *o == Outcome::Tie);
    let na = c(|o| matches!(o, Outcome::NotMeasurable(_)));
    let mut parts = vec![format!(
        "{holds} of {n} rule{} hold{}",
        if n == 1 { "" } else { "s" },
        if holds == 1 && n == 1 { "s" } else { "" }
    )];
    if fails > 0 {
        parts.push(format!("{fails} fail{}", if fails == 1 { "s" } else { "" }));
    }
    if ties > 0 {
        parts.push(format!(
            "{ties} {} inside the run's measured noise (not distinguishable here)",
            if ties == 1 { "is" } else { "are" }
        ));
    }
    if na > 0 {
        parts.push(format!("{na} cannot be judged on this run"));
    }
    format!("{}.", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_of_two_takes_half_the_repeats() {
        let whole = Ctx::new(true, 2);
        let half = Ctx {
            half: true,
            ..whole.clone()
        };
        assert_eq!((whole.repeats(1), whole.repeats(4)), (5, 2));
        assert_eq!((half.repeats(1), half.repeats(4)), (3, 1));
        assert_eq!((whole.judged_rounds(), half.judged_rounds()), (21, 11));
        assert_eq!((half.rounds(9), half.own_rounds(9)), (5, OWN_MIN));
        assert_eq!((half.rounds(1), half.own_rounds(1)), (1, 1));
        assert_eq!(whole.own_rounds(15), 15);
    }

    #[test]
    fn verdicts_from_outcomes() {
        use Outcome::*;
        assert_eq!(verdict_of(&[Holds, Holds]), Verdict::Holds);
        assert_eq!(verdict_of(&[Tie, Tie]), Verdict::Indistinct);
        assert_eq!(verdict_of(&[Fails, Tie]), Verdict::Differs);
        assert_eq!(verdict_of(&[Holds, Fails]), Verdict::Partial);
        assert_eq!(verdict_of(&[Holds, Tie]), Verdict::Holds);
        assert_eq!(verdict_of(&[Holds, Tie, Fails]), Verdict::Partial);
        assert_eq!(
            verdict_of(&[NotMeasurable("x".into()), Holds]),
            Verdict::Holds
        );
        assert_eq!(
            verdict_of(&[NotMeasurable("x".into())]),
            Verdict::NotMeasurable
        );
        assert_eq!(verdict_of(&[]), Verdict::NotMeasurable);
    }

    #[test]
    fn needs_are_compared_with_the_machine() {
        let small = testing::machine(2, true);
        let big = testing::machine(64, false);
        let n = Needs::cores(8).bare_metal();
        assert!(n.unmet(&small).unwrap().contains("8 or more cores"));
        assert_eq!(n.unmet(&big), None);
        assert_eq!(Needs::NONE.unmet(&small), None);
    }
}
