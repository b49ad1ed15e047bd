//! `symmetry compare A B`: judges the results in two directories with this
//! build's rules and says where they disagree.
//!
//! Each directory is read as `symmetry report` reads it: every
//! experiment's CSV with the directory's `machine.json`. Both are judged
//! by the rules compiled into this binary, not taken from the
//! `REPORT.md` beside them, so two runs of different builds, or a run and
//! the committed `reference/`, are compared claim by claim under the same
//! rules. Only experiments with results in both directories are judged;
//! the others are named. It counts the verdicts that agree and lists each
//! experiment whose verdict differs or where some rule moved: both
//! verdicts, each rule whose outcome differs and how it moved, and each
//! run's commit, mode and placement probe (the cache-line round trip
//! between CPUs 0 and 1 before and after the experiment, and in its
//! second process), from which it says whether the two runs measured it
//! at one placement ([`Placement`]).
//!
//! A rule moves in one of three ways ([`Move`]): it is reversed (holds in
//! one run and does not hold in the other), it moves between a decision
//! and a tie ("not distinguishable here", its interval straddled its
//! line in one run), or it was measurable in one run only (a declared
//! need the other machine does not meet, or a series that run lacks).
//!
//! Exit status: 0 when every experiment in both directories has the same
//! verdict, 1 when some differ, 2 when it cannot compare (a directory
//! without `machine.json`, an unreadable CSV, or no experiment in
//! common); an unreadable CSV is named and the rest still compared.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::experiments;
use crate::harness::{Finding, Outcome, verdict_of};
use crate::output::data;
use crate::output::machine::Machine;
use crate::output::provenance::{self, PROBE_CHANGE, Provenance, probe_span};
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
    /// Where the two runs measured it.
    pub placement: Placement,
}

/// Where two runs of an experiment were measured, as their provenance
/// records and the directories' `machine.json` say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The same CPU model and count, and every probe either run recorded
    /// (before and after, in each process) within [`PROBE_CHANGE`] of
    /// every other: as far as the probe can tell, one machine.
    One,
    /// The same CPU model and count, but probes further apart: the host
    /// placed the CPUs differently (two machines, in effect).
    Moved,
    /// A different CPU model or count.
    OtherMachine,
    /// A run recorded no probe.
    Unknown,
}

impl Placement {
    /// The mark after the experiment's verdicts in the listing.
    pub fn mark(self) -> &'static str {
        match self {
            Placement::One => " (one placement)",
            Placement::Moved => " (different placements)",
            Placement::OtherMachine => " (different machines)",
            Placement::Unknown => "",
        }
    }
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
    /// Experiments in both whose CSV could not be read, with the error.
    pub unreadable: Vec<(&'static str, String)>,
}

/// One run of an experiment, from its provenance record.
#[derive(Debug, Clone)]
struct Run {
    /// Commit, mode and probe, in words.
    words: String,
    /// Every probe it recorded, in ns.
    probes: Vec<f64>,
    /// The CPU model and logical CPUs it ran on.
    cpu: (String, usize),
}

/// The run of `id` that `dir` holds: its commit and mode, the placement
/// probe before and after it (and in its second process) and its CPU,
/// from its provenance record, else from `m` (`dir`'s `machine.json`). A
/// directory may hold runs of several commits and machines (the committed
/// reference does), so this is per experiment. An unreadable record is
/// said so, not an error: the verdicts do not rest on it.
fn run_of(dir: &Path, id: &str, m: &Machine) -> Run {
    let probe = |p: &Provenance| {
        if p.core_rtt_ns.is_empty() {
            "not recorded".to_string()
        } else {
            let ns: Vec<String> = p.core_rtt_ns.iter().map(|x| format!("{x:.0}")).collect();
            format!("{} ns", ns.join(" then "))
        }
    };
    let own = (m.cpu_model.clone(), m.cores());
    match Provenance::read(dir, id) {
        Err(e) => Run {
            words: format!("provenance unreadable: {e}"),
            probes: Vec::new(),
            cpu: own,
        },
        Ok(None) => Run {
            words: "no provenance record".to_string(),
            probes: Vec::new(),
            cpu: own,
        },
        Ok(Some(p)) => Run {
            words: format!(
                "commit {}, {}, probe {}{}",
                p.commit,
                p.mode,
                probe(&p),
                p.second_pass
                    .as_ref()
                    .map_or(String::new(), |q| format!(", second process {}", probe(q)))
            ),
            probes: p.probes().collect(),
            cpu: if p.cpu_model.is_empty() {
                (m.cpu_model.clone(), p.cores)
            } else {
                (p.cpu_model.clone(), p.cores)
            },
        },
    }
}

/// Whether the probes `a` and `b` of two runs were all taken at one
/// placement ([`provenance::one_placement`] over both); `None` if either
/// run recorded no positive probe.
fn one_placement(a: &[f64], b: &[f64]) -> Option<bool> {
    probe_span(a.iter().copied())?;
    probe_span(b.iter().copied())?;
    probe_span(a.iter().chain(b).copied()).map(provenance::one_placement)
}

/// Where runs `a` and `b` were measured, judged on machines `ma` and `mb`.
fn placement(a: &Run, b: &Run, ma: &Machine, mb: &Machine) -> Placement {
    if a.cpu != b.cpu || ma.cpu_model != mb.cpu_model || ma.cores() != mb.cores() {
        return Placement::OtherMachine;
    }
    match one_placement(&a.probes, &b.probes) {
        Some(true) => Placement::One,
        Some(false) => Placement::Moved,
        None => Placement::Unknown,
    }
}

/// Judges every experiment with results in both `a` and `b` and pairs
/// them; names those in one only and those whose CSV cannot be read.
pub fn compare(a: &Path, b: &Path) -> Result<Comparison, String> {
    let machines = [Machine::read_results(a)?, Machine::read_results(b)?];
    let mut pairs = Vec::new();
    let mut only: [Vec<&'static str>; 2] = Default::default();
    let mut unreadable = Vec::new();
    for e in experiments::ALL {
        let csv = |dir: &Path| dir.join(format!("{}.csv", e.id));
        match (csv(a).is_file(), csv(b).is_file()) {
            (true, true) => {}
            (true, false) => {
                only[0].push(e.id);
                continue;
            }
            (false, true) => {
                only[1].push(e.id);
                continue;
            }
            (false, false) => continue,
        }
        let (fa, fb) = match (data::read_csv(&csv(a)), data::read_csv(&csv(b))) {
            (Ok(ra), Ok(rb)) => (e.judge(&ra, &machines[0]), e.judge(&rb, &machines[1])),
            (Err(err), _) | (_, Err(err)) => {
                unreadable.push((e.id, err));
                continue;
            }
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
        let (ra, rb) = (run_of(a, e.id, &machines[0]), run_of(b, e.id, &machines[1]));
        pairs.push(Pair {
            id: e.id,
            verdicts,
            rules: e.claims.len(),
            moved,
            placement: placement(&ra, &rb, &machines[0], &machines[1]),
            runs: [ra.words, rb.words],
        });
    }
    if pairs.is_empty() && unreadable.is_empty() {
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
        unreadable,
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
            .filter(|p| p.placement == Placement::One)
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
             machine.json; only experiments with results in both are judged. Under each experiment: \
             the commit and mode of each run, and its placement probe (the cache-line round trip \
             between CPUs 0 and 1 before and after it); \"one placement\" when both ran on the same \
             CPU model and count and every probe of both runs is within {PROBE_CHANGE}x of every \
             other.\n\n",
            option_env!("SYMMETRY_GIT").unwrap_or("unknown")
        ));
        let differ = self.differing().count();
        let placed = self
            .differing()
            .filter(|p| p.placement == Placement::One)
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
                    p.placement.mark(),
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
        if !self.unreadable.is_empty() {
            out.push_str("\nNot compared, a CSV could not be read:\n");
            for (id, err) in &self.unreadable {
                out.push_str(&format!("  {id}: {err}\n"));
            }
        }
        out
    }
}

/// `symmetry compare`: prints the comparison; exit status 0 when every
/// verdict agrees, 1 when some differ, 2 when it cannot compare (see the
/// module docs).
pub fn main(args: CompareArgs) -> ExitCode {
    match compare(&args.a, &args.b) {
        Ok(c) => {
            print!("{}", c.text(args.evidence));
            if !c.unreadable.is_empty() {
                eprintln!(
                    "error: {} experiment(s) not compared: a CSV could not be read",
                    c.unreadable.len()
                );
                ExitCode::from(2)
            } else if c.differing().next().is_some() {
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
        let pair = |placement, moved: Vec<Moved>| Pair {
            id: "x",
            verdicts: [Verdict::Holds, Verdict::Differs],
            rules: 2,
            moved,
            runs: Default::default(),
            placement,
        };
        let c = Comparison {
            dirs: Default::default(),
            machines: [m.clone(), m],
            pairs: vec![
                pair(
                    Placement::One,
                    vec![moved(Move::Reversed), moved(Move::Tie)],
                ),
                pair(Placement::Moved, vec![moved(Move::Reversed)]),
                pair(
                    Placement::Unknown,
                    vec![moved(Move::Reversed), moved(Move::Measurable)],
                ),
                pair(Placement::OtherMachine, vec![moved(Move::Reversed)]),
            ],
            only: Default::default(),
            unreadable: vec![("am-bulk", "am-bulk.csv: line 3: too few columns".into())],
        };
        assert_eq!(c.moves(), [4, 1, 1]);
        assert_eq!(c.reversed_at_one_placement(), 1);
        let text = c.text(false);
        assert!(
            text.contains("different verdict: 4 (1 of them measured at one placement"),
            "{text}"
        );
        assert!(
            text.contains("moved: 6 (4 reversed, 1 of them at one placement; 1 between"),
            "{text}"
        );
        assert!(
            text.contains("x: holds | differs (different machines)"),
            "{text}"
        );
        assert!(
            text.contains("Not compared, a CSV could not be read:\n  am-bulk: am-bulk.csv: line 3"),
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
        use std::io::Write;
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
        // Both sides hold the same provenance record, but the machines
        // the rules were judged on differ.
        assert_eq!(p.placement, Placement::OtherMachine);
        assert!(
            text.contains("different verdict: 1 (0 of them measured at one placement"),
            "{text}"
        );
        assert!(
            text.contains("am-logp: partly holds | not measurable here (different machines)"),
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

        // A CSV that cannot be read is named, and the rest compared; a
        // provenance record that cannot be read is said so.
        std::fs::copy(
            a.path().join("model-mva.csv"),
            b.path().join("model-mva.csv"),
        )
        .unwrap();
        let mut bad = std::fs::OpenOptions::new()
            .append(true)
            .open(b.path().join("am-logp.csv"))
            .unwrap();
        writeln!(bad, "am-logp,not,a,row").unwrap();
        std::fs::write(b.path().join("am-logp.provenance.json"), "{").unwrap();
        std::fs::write(a.path().join("model-mva.provenance.json"), "[]").unwrap();
        let c = compare(a.path(), b.path()).expect("comparable");
        assert_eq!(c.pairs.len(), 1);
        assert_eq!(c.unreadable.len(), 1);
        assert_eq!(c.unreadable[0].0, "am-logp");
        assert!(
            c.pairs[0].runs[0].starts_with("provenance unreadable"),
            "{:?}",
            c.pairs[0].runs
        );
        assert_eq!(c.pairs[0].runs[1], "no provenance record");
    }

    #[test]
    fn directories_without_results_are_refused() {
        let empty = ScratchDir::new("compare-empty").expect("scratch directory");
        let a = reference_copy(&["machine.json", "am-logp.csv"]);
        let err = compare(a.path(), empty.path()).unwrap_err();
        assert!(err.contains("no machine.json"), "{err}");
        let err = compare(a.path(), &empty.path().join("nowhere")).unwrap_err();
        assert!(
            err.contains("does not exist or is not a directory"),
            "{err}"
        );
        let b = reference_copy(&["machine.json", "model-mva.csv"]);
        let err = compare(a.path(), b.path()).unwrap_err();
        assert!(err.contains("no experiment in common"), "{err}");
    }
}
