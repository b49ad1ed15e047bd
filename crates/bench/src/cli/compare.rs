//! `symmetry compare A B`: judges the results in two directories with this
//! build's rules and says where they disagree.
//!
//! Each directory is read as `symmetry report` reads it: every
//! experiment's CSV with the directory's `machine.json`. Both are judged
//! by the rules compiled into this binary, not taken from the
//! `REPORT.md` beside them, so two runs of different builds, or a run and
//! the committed `reference/`, are compared claim by claim under the same
//! rules. For every experiment in both directories it lists the two
//! verdicts, each rule whose outcome differs and how it moved, and the
//! placement probe each run recorded (the cache-line round trip between
//! CPUs 0 and 1 before and after the experiment, and in its second
//! process), which tells whether two runs measured the same machine.
//!
//! A rule moves in one of three ways ([`Move`]): it is reversed (holds in
//! one run and does not hold in the other), it moves between a decision
//! and a tie ("not distinguishable here", its interval straddled its
//! line in one run), or it was measurable in one run only (a declared
//! need the other machine does not meet, or a series that run lacks).
//!
//! Exit status: 0 when every experiment in both directories has the same
//! verdict, 1 when some differ, 2 when a directory cannot be read.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::experiments::{self, Experiment};
use crate::harness::{Finding, Outcome, verdict_of};
use crate::output::data;
use crate::output::machine::Machine;
use crate::output::provenance::{PROBE_CHANGE, Provenance};
use crate::output::report::Verdict;

/// Arguments of `symmetry compare`.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// The first result directory (e.g. `reference`).
    pub a: PathBuf,
    /// The second result directory (e.g. `results`).
    pub b: PathBuf,
    /// Also print both runs' evidence for every rule that moved.
    #[arg(long)]
    pub evidence: bool,
}

/// How a rule's outcome differs between two runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Move {
    /// It holds in one run and does not hold in the other.
    Reversed,
    /// A decision (holds, does not hold) in one run and a tie in the other.
    Tie,
    /// Judged in one run, not measurable in the other.
    Measurable,
}

impl Move {
    /// How `a` and `b` differ, or `None` if they are the same outcome (two
    /// "not measurable" findings are the same whatever their reasons).
    pub fn of(a: &Outcome, b: &Outcome) -> Option<Move> {
        use Outcome::*;
        match (a, b) {
            (NotMeasurable(_), NotMeasurable(_)) => None,
            (NotMeasurable(_), _) | (_, NotMeasurable(_)) => Some(Move::Measurable),
            _ if a == b => None,
            (Holds, Fails) | (Fails, Holds) => Some(Move::Reversed),
            _ => Some(Move::Tie),
        }
    }

    /// Words for the listing.
    pub fn label(self) -> &'static str {
        match self {
            Move::Reversed => "reversed",
            Move::Tie => "between a decision and a tie",
            Move::Measurable => "measurable in one run only",
        }
    }
}

/// A rule whose outcome differs between the two runs.
#[derive(Debug, Clone)]
pub struct Moved {
    /// The claim's key.
    pub key: &'static str,
    /// How it moved.
    pub how: Move,
    /// Its finding in each run.
    pub findings: [Finding; 2],
}

/// One experiment found in both directories.
#[derive(Debug, Clone)]
pub struct Pair {
    /// The experiment id.
    pub id: &'static str,
    /// Its verdict in each run.
    pub verdicts: [Verdict; 2],
    /// How many rules it declares.
    pub rules: usize,
    /// Its rules whose outcomes differ, in declaration order.
    pub moved: Vec<Moved>,
    /// Each run of it in words, from its provenance record: commit, mode
    /// and placement probe.
    pub runs: [String; 2],
    /// Whether both runs measured it at one placement: every probe either
    /// run recorded for it (before and after, in each process) within
    /// [`PROBE_CHANGE`] of every other. `None` where a run recorded none.
    pub same_placement: Option<bool>,
}

impl Pair {
    /// Whether the two verdicts differ.
    pub fn differs(&self) -> bool {
        self.verdicts[0] != self.verdicts[1]
    }
}

/// Two directories judged by this build's rules.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The two directories, as given.
    pub dirs: [PathBuf; 2],
    /// Their machine descriptions.
    pub machines: [Machine; 2],
    /// Every experiment with results in both, in catalogue order.
    pub pairs: Vec<Pair>,
    /// Experiments with results in one directory only: `[only in a, only
    /// in b]`.
    pub only: [Vec<&'static str>; 2],
}

/// Reads `dir`'s machine description, with an error that says what the
/// directory should hold.
fn machine_of(dir: &Path) -> Result<Machine, String> {
    if !dir.join("machine.json").is_file() {
        return Err(format!(
            "{} holds no results (no machine.json): give a directory written by `symmetry run` or \
             `symmetry reproduce` (e.g. `reference`)",
            dir.display()
        ));
    }
    Machine::read_json(dir)
}

/// The run of `id` that `dir` holds, in words: its commit and mode and
/// the placement probe before and after it (and in its second process),
/// from its provenance record. A directory may hold runs of several
/// commits (the committed reference does), so this is per experiment.
fn run_of(dir: &Path, id: &str) -> Result<(String, Vec<f64>), String> {
    let probe = |p: &Provenance| match p.core_rtt_ns[..] {
        [a, b] => format!("{a:.0} then {b:.0} ns"),
        _ => "not recorded".to_string(),
    };
    Ok(match Provenance::read(dir, id)? {
        None => ("no provenance record".to_string(), Vec::new()),
        Some(p) => (
            format!(
                "commit {}, {}, probe {}{}",
                p.commit,
                p.mode,
                probe(&p),
                p.second_pass
                    .as_ref()
                    .map_or(String::new(), |q| format!(", second process {}", probe(q)))
            ),
            p.core_rtt_ns
                .iter()
                .chain(p.second_pass.iter().flat_map(|q| &q.core_rtt_ns))
                .copied()
                .collect(),
        ),
    })
}

/// Whether the probes `a` and `b` of two runs are all at one placement
/// (the largest within [`PROBE_CHANGE`] of the smallest); `None` if
/// either run recorded no positive probe.
fn one_placement(a: &[f64], b: &[f64]) -> Option<bool> {
    let ok = |v: &[f64]| v.iter().any(|x| *x > 0.0);
    if !ok(a) || !ok(b) {
        return None;
    }
    let all = a.iter().chain(b).copied().filter(|x| *x > 0.0);
    let (lo, hi) = all.fold((f64::INFINITY, 0.0_f64), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    Some(hi / lo <= PROBE_CHANGE)
}

/// Judges experiment `e` on `dir`'s CSV, or `None` if `dir` has none.
fn judged(e: &Experiment, dir: &Path, m: &Machine) -> Result<Option<Vec<Finding>>, String> {
    let csv = dir.join(format!("{}.csv", e.id));
    if !csv.is_file() {
        return Ok(None);
    }
    Ok(Some(e.judge(&data::read_csv(&csv)?, m)))
}

/// Judges every experiment with results in `a` or `b` and pairs them.
pub fn compare(a: &Path, b: &Path) -> Result<Comparison, String> {
    let machines = [machine_of(a)?, machine_of(b)?];
    let mut pairs = Vec::new();
    let mut only: [Vec<&'static str>; 2] = Default::default();
    for e in experiments::ALL {
        let fa = judged(e, a, &machines[0])?;
        let fb = judged(e, b, &machines[1])?;
        let (fa, fb) = match (fa, fb) {
            (Some(fa), Some(fb)) => (fa, fb),
            (Some(_), None) => {
                only[0].push(e.id);
                continue;
            }
            (None, Some(_)) => {
                only[1].push(e.id);
                continue;
            }
            (None, None) => continue,
        };
        let outcomes = |f: &[Finding]| f.iter().map(|x| x.outcome.clone()).collect::<Vec<_>>();
        let verdicts = [verdict_of(&outcomes(&fa)), verdict_of(&outcomes(&fb))];
        let moved = e
            .claims
            .iter()
            .zip(fa.into_iter().zip(fb))
            .filter_map(|(c, (x, y))| {
                Move::of(&x.outcome, &y.outcome).map(|how| Moved {
                    key: c.key,
                    how,
                    findings: [x, y],
                })
            })
            .collect();
        let (ra, rb) = (run_of(a, e.id)?, run_of(b, e.id)?);
        pairs.push(Pair {
            id: e.id,
            verdicts,
            rules: e.claims.len(),
            moved,
            same_placement: one_placement(&ra.1, &rb.1),
            runs: [ra.0, rb.0],
        });
    }
    if pairs.is_empty() {
        return Err(format!(
            "{} and {} have no experiment in common (run the same experiments in both)",
            a.display(),
            b.display()
        ));
    }
    Ok(Comparison {
        dirs: [a.to_path_buf(), b.to_path_buf()],
        machines,
        pairs,
        only,
    })
}

impl Comparison {
    /// The experiments whose verdicts differ.
    pub fn differing(&self) -> impl Iterator<Item = &Pair> {
        self.pairs.iter().filter(|p| p.differs())
    }

    /// How many rules moved in each way, in [`Move`]'s order.
    pub fn moves(&self) -> [usize; 3] {
        let mut n = [0; 3];
        for m in self.pairs.iter().flat_map(|p| &p.moved) {
            n[m.how as usize] += 1;
        }
        n
    }

    /// How many rules were reversed in experiments that both runs
    /// measured at one placement: a claim judged the other way on what
    /// the probe says was the same machine.
    pub fn reversed_at_one_placement(&self) -> usize {
        self.pairs
            .iter()
            .filter(|p| p.same_placement == Some(true))
            .flat_map(|p| &p.moved)
            .filter(|m| m.how == Move::Reversed)
            .count()
    }

    /// The listing `symmetry compare` prints; with `evidence`, both runs'
    /// evidence under every rule that moved.
    pub fn text(&self, evidence: bool) -> String {
        let mut out = String::new();
        for (name, (dir, m)) in ["A", "B"].iter().zip(self.dirs.iter().zip(&self.machines)) {
            out.push_str(&format!(
                "{name}: {} (machine.json: {})\n",
                dir.display(),
                m.summary(),
            ));
        }
        out.push_str(&format!(
            "Both judged by this build's rules (commit {}) from each directory's CSV files and \
             machine.json. Under each experiment: the commit and mode of each run, and its placement \
             probe (the cache-line round trip between CPUs 0 and 1 before and after it); \"one \
             placement\" when every probe of both runs is within {PROBE_CHANGE}x of every other.\n\n",
            option_env!("SYMMETRY_GIT").unwrap_or("unknown")
        ));
        let differ = self.differing().count();
        let placed = self
            .differing()
            .filter(|p| p.same_placement == Some(true))
            .count();
        let rules: usize = self.pairs.iter().map(|p| p.rules).sum();
        let [reversed, tie, measurable] = self.moves();
        out.push_str(&format!(
            "Experiments in both: {}; same verdict: {}; different verdict: {differ} ({placed} of them \
             measured at one placement in both runs).\n\
             Rules in both: {rules}; moved: {} ({reversed} reversed, {} of them at one placement; \
             {tie} between a decision and a tie; {measurable} measurable in one run only).\n",
            self.pairs.len(),
            self.pairs.len() - differ,
            reversed + tie + measurable,
            self.reversed_at_one_placement()
        ));
        let list = |out: &mut String, title: &str, pairs: Vec<&Pair>| {
            if pairs.is_empty() {
                return;
            }
            out.push_str(&format!("\n{title}:\n"));
            for p in pairs {
                out.push_str(&format!(
                    "  {}: {} | {}{}\n    A: {}\n    B: {}\n",
                    p.id,
                    p.verdicts[0].label(),
                    p.verdicts[1].label(),
                    match p.same_placement {
                        Some(true) => " (one placement)",
                        Some(false) => " (different placements)",
                        None => "",
                    },
                    p.runs[0],
                    p.runs[1]
                ));
                for m in &p.moved {
                    out.push_str(&format!(
                        "    `{}`: {} | {} ({})\n",
                        m.key,
                        m.findings[0].outcome.label(),
                        m.findings[1].outcome.label(),
                        m.how.label()
                    ));
                    if evidence {
                        for (side, f) in ["A", "B"].iter().zip(&m.findings) {
                            out.push_str(&format!("      {side}: {}\n", f.evidence.trim()));
                        }
                    }
                }
            }
        };
        list(&mut out, "Different verdicts", self.differing().collect());
        list(
            &mut out,
            "Same verdict, rules moved",
            self.pairs
                .iter()
                .filter(|p| !p.differs() && !p.moved.is_empty())
                .collect(),
        );
        for (name, ids) in ["A", "B"].iter().zip(&self.only) {
            if !ids.is_empty() {
                out.push_str(&format!("\nOnly in {name}: {}\n", ids.join(", ")));
            }
        }
        out
    }
}

/// `symmetry compare`: prints the comparison; exit status 0 when every
/// verdict agrees, 1 when some differ, 2 when a directory cannot be read.
pub fn main(args: CompareArgs) -> ExitCode {
    match compare(&args.a, &args.b) {
        Ok(c) => {
            print!("{}", c.text(args.evidence));
            if c.differing().next().is_some() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::ScratchDir;

    #[test]
    fn moves_are_classified() {
        use Outcome::*;
        let na = || NotMeasurable("needs 8 or more cores".into());
        assert_eq!(Move::of(&Holds, &Holds), None);
        assert_eq!(Move::of(&Tie, &Tie), None);
        assert_eq!(Move::of(&na(), &NotMeasurable("other".into())), None);
        assert_eq!(Move::of(&Holds, &Fails), Some(Move::Reversed));
        assert_eq!(Move::of(&Fails, &Holds), Some(Move::Reversed));
        assert_eq!(Move::of(&Holds, &Tie), Some(Move::Tie));
        assert_eq!(Move::of(&Tie, &Fails), Some(Move::Tie));
        assert_eq!(Move::of(&na(), &Holds), Some(Move::Measurable));
        assert_eq!(Move::of(&Tie, &na()), Some(Move::Measurable));
    }

    #[test]
    fn placements_are_told_apart_by_the_probe_ratio() {
        assert_eq!(
            one_placement(&[45.0, 48.0], &[50.0, 44.0, 47.0, 46.0]),
            Some(true)
        );
        // The two levels this project's VMs move between.
        assert_eq!(one_placement(&[45.0, 48.0], &[405.0, 398.0]), Some(false));
        assert_eq!(one_placement(&[45.0, 400.0], &[45.0, 48.0]), Some(false));
        // No probe (one CPU, or a record from before the probe).
        assert_eq!(one_placement(&[], &[45.0, 48.0]), None);
        assert_eq!(one_placement(&[45.0], &[f64::NAN]), None);
    }

    #[test]
    fn reversals_are_counted_by_placement() {
        let dir = reference_copy(&["machine.json"]);
        let m = Machine::read_json(dir.path()).expect("reference machine");
        let moved = |how| Moved {
            key: "k",
            how,
            findings: [
                Finding::new(Outcome::Holds, ""),
                Finding::new(Outcome::Fails, ""),
            ],
        };
        let pair = |same, moved: Vec<Moved>| Pair {
            id: "x",
            verdicts: [Verdict::Holds, Verdict::Differs],
            rules: 2,
            moved,
            runs: Default::default(),
            same_placement: same,
        };
        let c = Comparison {
            dirs: Default::default(),
            machines: [m.clone(), m],
            pairs: vec![
                pair(Some(true), vec![moved(Move::Reversed), moved(Move::Tie)]),
                pair(Some(false), vec![moved(Move::Reversed)]),
                pair(None, vec![moved(Move::Reversed), moved(Move::Measurable)]),
            ],
            only: Default::default(),
        };
        assert_eq!(c.moves(), [3, 1, 1]);
        assert_eq!(c.reversed_at_one_placement(), 1);
        let text = c.text(false);
        assert!(
            text.contains("different verdict: 3 (1 of them measured at one placement"),
            "{text}"
        );
        assert!(
            text.contains("moved: 5 (3 reversed, 1 of them at one placement; 1 between"),
            "{text}"
        );
    }

    /// Copies `files` of the committed reference into a new scratch
    /// directory.
    fn reference_copy(files: &[&str]) -> ScratchDir {
        let reference = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../reference");
        let dir = ScratchDir::new("compare").expect("scratch directory");
        for f in files {
            std::fs::copy(reference.join(f), dir.path().join(f)).expect("reference file");
        }
        dir
    }

    #[test]
    fn a_run_agrees_with_itself_and_not_with_a_smaller_machine() {
        let files = [
            "machine.json",
            "am-logp.csv",
            "am-logp.provenance.json",
            "model-mva.csv",
        ];
        let a = reference_copy(&files);
        let same = compare(a.path(), a.path()).expect("comparable");
        assert_eq!(same.pairs.len(), 2);
        assert_eq!(same.differing().count(), 0);
        assert_eq!(same.moves(), [0, 0, 0]);

        // The same CSVs described as one CPU: am-logp's rules need two
        // cores, and model-mva is missing from this side.
        let b = reference_copy(&files[..3]);
        let path = b.path().join("machine.json");
        let mut m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        m["logical_cpus"] = 1.into();
        m["online_cpus"] = 1.into();
        std::fs::write(&path, m.to_string()).unwrap();
        let c = compare(a.path(), b.path()).expect("comparable");
        assert_eq!(c.only, [vec!["model-mva"], vec![]]);
        let p = c.differing().next().expect("am-logp differs");
        assert_eq!(p.id, "am-logp");
        assert_eq!(p.verdicts[1], Verdict::NotMeasurable);
        assert!(p.moved.iter().all(|m| m.how == Move::Measurable));
        let text = c.text(true);
        // Both sides hold the same provenance record: one placement.
        assert_eq!(p.same_placement, Some(true));
        assert!(
            text.contains("different verdict: 1 (1 of them measured at one placement"),
            "{text}"
        );
        assert!(
            text.contains("am-logp: partly holds | not measurable here (one placement)"),
            "{text}"
        );
        assert!(text.contains("Only in A: model-mva"), "{text}");
        assert!(
            text.contains("needs 2 or more cores, the run had 1"),
            "{text}"
        );
        // The probe comes from the provenance record; B's model-mva has
        // none, but it is not in both, so it is not listed.
        assert!(!text.contains("no provenance record"), "{text}");
    }

    #[test]
    fn directories_without_results_are_refused() {
        let empty = ScratchDir::new("compare-empty").expect("scratch directory");
        let a = reference_copy(&["machine.json", "am-logp.csv"]);
        let err = compare(a.path(), empty.path()).unwrap_err();
        assert!(err.contains("no machine.json"), "{err}");
        let b = reference_copy(&["machine.json", "model-mva.csv"]);
        let err = compare(a.path(), b.path()).unwrap_err();
        assert!(err.contains("no experiment in common"), "{err}");
    }
}
