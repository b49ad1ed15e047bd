//! The per-lock view of a recorded profile that a person reads first, and
//! its JSON form for tools: per lock its kind, acquisitions, contended
//! waits, wait total and longest wait, sampled hold times, the policy
//! KLMO91's pricing recommends and opt-known's spin threshold, and its
//! first contended stack, raw and symbolized. `symmetry profile` and
//! `symmetry analyze` print it before KLMO91's tables.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use symmetry_locks::spin_then_block::profiler::{LockKind, LockRecord, Profile};
use symmetry_models::competitive::{Analysis, LockCosts, Strategy};

use super::interpose::{Frame, Symbols, recommend, recommend_lock};

/// Widest line of the table (a 100-column terminal).
pub const WIDTH: usize = 100;

/// A profile's locks, priced: the document `--json` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockReport {
    /// What was profiled (the program, or the profile file's name).
    pub label: String,
    /// Length of one spin on the recording machine, ns: waits are recorded
    /// in spins, and shown as times through it.
    pub ns_per_spin: f64,
    /// C given for every lock (`--c`), spins; `None`: each lock's own.
    pub c_override: Option<u32>,
    /// Contended waits of all locks.
    pub waits: u64,
    /// Every strategy's cost over all locks (KLMO91 Table 1), the
    /// optimal off-line first.
    pub prices: Vec<Price>,
    /// The policy to run the program on (`symmetry profile --lock`), the
    /// cheapest of those replace mode runs; `None` without waits.
    pub recommended: Option<Price>,
    /// Every lock, by total wait (longest first).
    pub locks: Vec<LockRow>,
}

/// A strategy's price.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// The strategy (`offline`, `always-block`, ..., `random-walk`).
    pub policy: String,
    /// Its synchronization cost, spins.
    pub cost_spins: f64,
    /// Its cost over the optimal off-line's; `None` when that is infinite
    /// (the off-line cost is 0 and this one is not).
    pub vs_offline: Option<f64>,
}

impl Price {
    fn new(s: Strategy, cost_spins: f64, vs_offline: f64) -> Price {
        Price {
            policy: s.name().to_owned(),
            cost_spins,
            vs_offline: vs_offline.is_finite().then_some(vs_offline),
        }
    }
}

/// One lock's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockRow {
    /// Its name, in full (the table may shorten it).
    pub name: String,
    /// Its kind (`mutex`, `rwlock-read`, `rwlock-write`, `spin`, `futex`).
    pub kind: String,
    /// Its blocker (`os`, `user`, ...).
    pub blocker: String,
    /// C priced with, spins.
    pub c_spins: u32,
    /// Acquisitions, contended or not; `None`: not seen (a futex lock is
    /// seen only when it blocks) or not recorded (as in a version-1 file).
    pub acquisitions: Option<u64>,
    /// Contended acquisitions (waits).
    pub waits: u64,
    /// Waits per 100 acquisitions; `None` when acquisitions are unknown.
    pub contended_pct: Option<f64>,
    /// Waits that blocked.
    pub blocked: u64,
    /// Total wait, spins.
    pub wait_total_spins: u64,
    /// Total wait, ns.
    pub wait_total_ns: f64,
    /// Longest wait, spins (`None`: not recorded).
    pub wait_max_spins: Option<u64>,
    /// Longest wait, ns.
    pub wait_max_ns: Option<f64>,
    /// Hold times sampled.
    pub hold_samples: u64,
    /// Mean sampled hold, ns (`None`: none sampled).
    pub hold_mean_ns: Option<f64>,
    /// Longest sampled hold, ns (`None`: none sampled).
    pub hold_max_ns: Option<u64>,
    /// The cheapest policy on this lock's waits among those replace mode
    /// runs, with its price; `None` without waits.
    pub policy: Option<Price>,
    /// opt-known's threshold, spins: spin up to it, then block (`None`
    /// without waits).
    pub spin_threshold: Option<u64>,
    /// Every strategy's price on this lock, the optimal off-line first.
    pub prices: Vec<Price>,
    /// The stack of its first contended acquisition as recorded, innermost
    /// frame first.
    pub stack: Vec<String>,
    /// That stack symbolized (inlined functions expanded, wrappers marked).
    pub frames: Vec<Frame>,
}

impl LockRow {
    /// Whether the lock was seen through its futex waits (its fast path
    /// unseen).
    fn futex(&self) -> bool {
        self.kind == LockKind::Futex.name() || self.blocker == symmetry_interpose::FUTEX_BLOCKER
    }

    /// The kind as the table shows it: a futex lock whose wrapper told what
    /// it is says both (`mutex (futex)`).
    fn shown_kind(&self) -> String {
        if self.futex() && self.kind != LockKind::Futex.name() {
            format!("{} (futex)", self.kind)
        } else {
            self.kind.clone()
        }
    }

    fn new(rec: &LockRecord, costs: &LockCosts, ns_per_spin: f64, symbols: &Symbols) -> LockRow {
        let waits = rec.contended();
        let hold = rec.hold;
        let waited = waits > 0;
        LockRow {
            name: rec.name.clone(),
            kind: rec.kind.name().to_owned(),
            blocker: rec.blocker.clone(),
            c_spins: costs.c_spins,
            acquisitions: rec.acquisitions,
            waits,
            contended_pct: rec
                .acquisitions
                .filter(|&n| n > 0)
                // The acquisitions are a sampled estimate: a lock taken a
                // few times may read fewer acquisitions than waits.
                .map(|n| (100.0 * waits as f64 / n as f64).min(100.0)),
            blocked: rec.blocked_total(),
            wait_total_spins: rec.wait_total(),
            wait_total_ns: rec.wait_total() as f64 * ns_per_spin,
            wait_max_spins: rec.wait_max,
            wait_max_ns: rec.wait_max.map(|w| w as f64 * ns_per_spin),
            hold_samples: hold.samples,
            hold_mean_ns: hold.mean_ns(),
            hold_max_ns: (hold.samples > 0).then_some(hold.max_ns),
            policy: recommend_lock(costs).map(|(s, r)| Price::new(s, costs.cost(s), r)),
            spin_threshold: waited.then_some(costs.opt_known_threshold),
            prices: Strategy::ALL
                .iter()
                .map(|&s| Price::new(s, costs.cost(s), costs.ratio(s)))
                .collect(),
            stack: rec.stack.clone(),
            frames: symbols.stack(&rec.stack),
        }
    }
}

impl LockReport {
    /// The report of `profile` priced as `analysis` (which
    /// `competitive::analyze` made of it, so its locks are the profile's,
    /// in order), its stacks symbolized with `symbols`.
    pub fn new(
        profile: &Profile,
        analysis: &Analysis,
        label: &str,
        c_override: Option<u32>,
        symbols: &Symbols,
    ) -> LockReport {
        let mut locks: Vec<LockRow> = profile
            .locks
            .iter()
            .zip(&analysis.locks)
            .map(|(rec, costs)| LockRow::new(rec, costs, profile.ns_per_spin, symbols))
            .collect();
        locks.sort_by(|a, b| {
            b.wait_total_spins
                .cmp(&a.wait_total_spins)
                .then(b.waits.cmp(&a.waits))
                .then_with(|| a.name.cmp(&b.name))
                .then_with(|| kind_order(&a.kind).cmp(&kind_order(&b.kind)))
        });
        LockReport {
            label: label.to_owned(),
            ns_per_spin: profile.ns_per_spin,
            c_override,
            waits: analysis.waits(),
            prices: Strategy::ALL
                .iter()
                .map(|&s| Price::new(s, analysis.cost(s), analysis.cost_vs_offline(s)))
                .collect(),
            recommended: recommend(analysis).map(|(s, r)| Price::new(s, analysis.cost(s), r)),
            locks,
        }
    }

    /// The document as JSON (pretty-printed, one trailing newline).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// The locks with waits, longest total wait first.
    fn waiting(&self) -> impl Iterator<Item = &LockRow> {
        self.locks.iter().filter(|l| l.waits > 0)
    }

    /// The table a person reads first: the `top` locks with waits by total
    /// wait, each on two lines (its rank, kind and name, shortened in the
    /// middle to fit [`WIDTH`] columns, then its numbers), and notes on
    /// what the columns mean.
    pub fn table_text(&self, top: usize) -> String {
        let with_waits = self.waiting().count();
        let shown: Vec<&LockRow> = self.waiting().take(top).collect();
        let mut s = format!(
            "Locks by total wait: {} of {with_waits} lock(s) with waits\n\n",
            shown.len()
        );
        if shown.is_empty() {
            return s;
        }
        let headers = [
            "Acquired",
            "Waits",
            "Cont. %",
            "Total wait",
            "Max wait",
            "Mean hold",
            "Max hold",
            "Policy",
            "Spin k",
        ];
        let rows: Vec<[String; 9]> = shown.iter().map(|l| numbers(l)).collect();
        let mut width: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
        for r in &rows {
            for (w, cell) in width.iter_mut().zip(r) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[&str]| {
            let mut out = String::from("   ");
            for (i, (cell, &w)) in cells.iter().zip(&width).enumerate() {
                let pad = " ".repeat(w.saturating_sub(cell.chars().count()));
                // The policy reads left to right; numbers line up right.
                if i == 7 {
                    let _ = write!(out, "  {cell}{pad}");
                } else {
                    let _ = write!(out, "  {pad}{cell}");
                }
            }
            out.trim_end().to_owned()
        };
        let rank = shown.len().to_string().len();
        let _ = writeln!(s, "{:>rank$}  Kind  Lock", "#");
        let _ = writeln!(s, "{}", line(&headers));
        for (i, (l, r)) in shown.iter().zip(&rows).enumerate() {
            let head = format!("{:>rank$}  {}  ", i + 1, l.shown_kind());
            let room = WIDTH.saturating_sub(head.chars().count());
            let _ = writeln!(s, "{head}{}", shorten(&l.name, room));
            let cells: Vec<&str> = r.iter().map(String::as_str).collect();
            let _ = writeln!(s, "{}", line(&cells));
        }
        s.push('\n');
        for note in self.notes(&shown) {
            let _ = writeln!(s, "{note}");
        }
        s
    }

    /// The notes under the table: what its columns mean, and why a cell is
    /// `—`.
    fn notes(&self, shown: &[&LockRow]) -> Vec<String> {
        let mut notes = vec![
            format!(
                "Waits: contended acquisitions, timed in spins of {:.3} ns; Cont. %: waits per \
                 100 acquisitions.",
                self.ns_per_spin
            ),
            format!(
                "Acquired: sampled (one in {} per thread), an estimate. Holds: timed after \
                 contended acquisitions.",
                symmetry_interpose::COUNT_EVERY
            ),
            "Policy: the cheapest policy on the lock's own waits, priced as in Table 1;".to_owned(),
            "Spin k: opt-known's threshold in spins (spin up to k, then block; 0: block at once)."
                .to_owned(),
        ];
        let unseen = |futex: bool| {
            shown
                .iter()
                .any(|l| l.acquisitions.is_none() && l.futex() == futex)
        };
        if unseen(true) {
            notes.push(
                "— Acquired: a futex lock is seen only when it blocks (its fast path never \
                 enters the kernel)."
                    .to_owned(),
            );
        }
        if unseen(false) {
            notes.push(
                "— Acquired: not recorded in this profile (a version-1 file records waits only)."
                    .to_owned(),
            );
        }
        if shown.iter().any(|l| l.hold_samples == 0) {
            notes.push("— Hold: no hold time sampled.".to_owned());
        }
        notes
    }

    /// The stacks of the first `n` locks of the table: each lock's rank,
    /// kind and name, then its frames innermost first, one per line, a
    /// wrapper frame (skipped when the lock was named) marked `·`. Empty
    /// for `n` = 0.
    pub fn stacks_text(&self, n: usize) -> String {
        let shown: Vec<&LockRow> = self.waiting().take(n).collect();
        if shown.is_empty() {
            return String::new();
        }
        let mut s = format!(
            "\nStacks of the {} lock(s) with the most total wait (the first contended \
             acquisition,\ninnermost frame first; `·`: a wrapper, skipped in the name):\n",
            shown.len()
        );
        let rank = shown.len().to_string().len();
        for (i, l) in shown.iter().enumerate() {
            let _ = writeln!(s, "\n{:>rank$}  {}  {}", i + 1, l.kind, l.name);
            if l.frames.is_empty() {
                let _ = writeln!(s, "    (no stack recorded)");
            }
            for f in &l.frames {
                let mark = if f.wrapper { "  · " } else { "    " };
                let inlined = if f.inlined { " [inlined]" } else { "" };
                let _ = writeln!(s, "{mark}{}{inlined}", f.text());
            }
        }
        s
    }
}

/// The table's number cells of one lock (see [`LockReport::table_text`]).
fn numbers(l: &LockRow) -> [String; 9] {
    let dash = || "—".to_owned();
    [
        l.acquisitions.map_or_else(dash, count),
        count(l.waits),
        l.contended_pct.map_or_else(dash, |p| format!("{p:.1}%")),
        duration(l.wait_total_ns),
        l.wait_max_ns.map_or_else(dash, duration),
        l.hold_mean_ns.map_or_else(dash, duration),
        l.hold_max_ns.map_or_else(dash, |ns| duration(ns as f64)),
        l.policy.as_ref().map_or_else(dash, |p| p.policy.clone()),
        l.spin_threshold.map_or_else(dash, |k| k.to_string()),
    ]
}

/// A kind's rank in [`LockKind::ALL`] (unknown names last).
fn kind_order(name: &str) -> usize {
    LockKind::ALL
        .iter()
        .position(|k| k.name() == name)
        .unwrap_or(LockKind::ALL.len())
}

/// A count, exact below ten million, else with three significant digits
/// and `M` or `G`.
fn count(n: u64) -> String {
    match n {
        0..10_000_000 => n.to_string(),
        10_000_000..10_000_000_000 => format!("{}M", significant(n as f64 / 1e6)),
        _ => format!("{}G", significant(n as f64 / 1e9)),
    }
}

/// A time in ns, in ns, µs, ms or s, with three significant digits.
fn duration(ns: f64) -> String {
    let (v, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    format!("{} {unit}", significant(v))
}

/// `v` with three significant digits (no fewer than its integer part's).
fn significant(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// A lock's name in at most `room` characters: first its object's
/// directory becomes `…` (`(…/prog+0x1a)`), then the middle of its
/// function (the part before ` at `, so that the file and line stay), then
/// the middle of the whole.
fn shorten(name: &str, room: usize) -> String {
    let fits = |s: &str| s.chars().count() <= room;
    if fits(name) {
        return name.to_owned();
    }
    let mut s = name.to_owned();
    if let Some(open) = s.rfind("(/")
        && let Some(slash) = s[open..]
            .find(')')
            .and_then(|end| s[open..open + end].rfind('/'))
    {
        s = format!("{}(…{}", &s[..open], &s[open + slash..]);
    }
    if fits(&s) {
        return s;
    }
    // Then, where a file and line name the site, the object's offset.
    if s.contains(" at ")
        && let Some(open) = s.rfind(" (…/").or_else(|| s.rfind(" (/"))
        && let Some(close) = s[open..].find(')')
    {
        s = format!("{}{}", &s[..open], &s[open + close + 1..]);
    }
    if fits(&s) {
        return s;
    }
    // Then the source file's directory: `f at …/file.rs:12 (…/prog+0x1a)`.
    if let Some(at) = s.rfind(" at ")
        && let Some(slash) = s[at + 4..].find('/').map(|_| at + 4)
        && let Some(last) = s[slash..]
            .find(':')
            .and_then(|colon| s[slash..slash + colon].rfind('/'))
    {
        s = format!("{}…{}", &s[..slash], &s[slash + last..]);
    }
    if fits(&s) {
        return s;
    }
    if let Some(at) = s.rfind(" at ") {
        let tail = s[at..].chars().count();
        if tail + 8 <= room {
            return format!("{}{}", middle(&s[..at], room - tail), &s[at..]);
        }
    }
    middle(&s, room)
}

/// `s` in at most `room` characters, its middle replaced by `…`.
fn middle(s: &str, room: usize) -> String {
    let n = s.chars().count();
    if n <= room || room < 3 {
        return s.to_owned();
    }
    let keep = room - 1;
    let head: String = s.chars().take(keep - keep / 3).collect();
    let tail: String = s.chars().skip(n - keep / 3).collect();
    format!("{head}…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use symmetry_models::competitive;

    /// A v2 profile: a mutex, a rwlock's read and write sides, a spin lock
    /// and a futex lock, with different total waits.
    fn profile() -> Profile {
        let lock = |name: &str, kind: LockKind, waits: &[u64]| {
            let mut l = LockRecord::new(name, "glibc", 400);
            l.kind = kind;
            for &w in waits {
                l.add(w, w > 1008);
            }
            l
        };
        let mut mutex = lock("m at a.c:1 (/x+0x1)", LockKind::Mutex, &[100; 10]);
        mutex.acquisitions = Some(1000);
        mutex.hold.samples = 4;
        mutex.hold.sum_ns = 4000;
        mutex.hold.max_ns = 2500;
        let mut read = lock("rw at a.c:2 (/x+0x2)", LockKind::Read, &[20_000; 3]);
        read.acquisitions = Some(30);
        let mut write = lock("rw at a.c:2 (/x+0x2)", LockKind::Write, &[5_000; 2]);
        write.acquisitions = Some(4);
        let mut spin = lock("s at a.c:3 (/x+0x3)", LockKind::Spin, &[300; 2]);
        spin.acquisitions = Some(2);
        let mut futex = lock("f at a.rs:4 (/x+0x4)", LockKind::Futex, &[2_000_000]);
        futex.stack = vec![
            "futex_wait+0x1 (/lib/libc.so.6+0x10)".into(),
            "(/x+0x4)".into(),
        ];
        Profile::new(2.0, vec![mutex, read, write, spin, futex])
    }

    fn report(p: &Profile) -> LockReport {
        let a = competitive::analyze(p, None, 1);
        LockReport::new(p, &a, "prog", None, &Symbols::default())
    }

    #[test]
    fn the_table_lists_locks_by_total_wait_with_kinds_and_unknowns() {
        let p = profile();
        let r = report(&p);
        let order: Vec<(&str, &str)> = r
            .locks
            .iter()
            .map(|l| (l.name.as_str(), l.kind.as_str()))
            .collect();
        assert_eq!(
            order,
            [
                ("f at a.rs:4 (/x+0x4)", "futex"),
                ("rw at a.c:2 (/x+0x2)", "rwlock-read"),
                ("rw at a.c:2 (/x+0x2)", "rwlock-write"),
                ("m at a.c:1 (/x+0x1)", "mutex"),
                ("s at a.c:3 (/x+0x3)", "spin"),
            ]
        );
        let text = r.table_text(10);
        assert!(text.starts_with("Locks by total wait: 5 of 5 lock(s) with waits"));
        let lines: Vec<&str> = text.lines().collect();
        // Title, blank, two header lines, then two lines per lock.
        assert!(lines[4].starts_with("1  futex  f at a.rs:4"), "{text}");
        assert!(
            lines[6].starts_with("2  rwlock-read  rw at a.c:2"),
            "{text}"
        );
        assert!(
            lines[8].starts_with("3  rwlock-write  rw at a.c:2"),
            "{text}"
        );
        assert!(lines[10].starts_with("4  mutex  m at a.c:1"), "{text}");
        assert!(lines[12].starts_with("5  spin  s at a.c:3"), "{text}");
        // The futex: acquisitions and contended % unknown, no hold times;
        // 2,000,000 spins of 2 ns = 4 ms.
        let futex: Vec<&str> = lines[5].split_whitespace().collect();
        assert_eq!(futex[..3], ["—", "1", "—"], "{text}");
        assert_eq!(futex[3..5], ["4.00", "ms"], "{text}");
        assert_eq!(futex[7..9], ["—", "—"], "{text}");
        // The mutex: 1000 acquisitions, 10 waits = 1.0%, 1000 spins =
        // 2.00 µs in all, holds of 1 µs on average and 2.5 µs at most.
        let mutex: Vec<&str> = lines[11].split_whitespace().collect();
        assert_eq!(
            mutex[..11],
            [
                "1000", "10", "1.0%", "2.00", "µs", "200", "ns", "1.00", "µs", "2.50", "µs"
            ],
            "{text}"
        );
        assert!(
            text.contains("futex lock is seen only when it blocks"),
            "{text}"
        );
        assert!(!text.contains("version-1"), "{text}");
        for l in text.lines() {
            assert!(l.chars().count() <= WIDTH, "{l}");
        }
        // --top limits the rows.
        assert!(r.table_text(1).starts_with("Locks by total wait: 1 of 5"));
    }

    #[test]
    fn long_names_are_shortened_to_fit_keeping_the_line() {
        let mut p = profile();
        let dir = format!("/{}", "d".repeat(200));
        p.locks[0].name = format!("main at src/main.rs:7 ({dir}/prog+0x1)");
        p.locks[1].name = format!("{}::f at src/lib.rs:9 ({dir}/prog+0x2)", "q".repeat(150));
        p.locks[2].name = "x".repeat(150);
        p.locks[3].name = format!("g at /{}/src/spin.c:3 (/x/prog+0x3)", "e/".repeat(60));
        let r = report(&p);
        let text = r.table_text(10);
        let line = |head: &str| text.lines().find(|l| l.starts_with(head)).unwrap();
        assert_eq!(
            line("4  mutex"),
            "4  mutex  main at src/main.rs:7 (…/prog+0x1)"
        );
        let read = line("2  rwlock-read");
        assert_eq!(read.chars().count(), WIDTH, "{read}");
        assert!(
            read.contains("qq…qq") && read.ends_with("::f at …/lib.rs:9"),
            "{read}"
        );
        let write = line("3  rwlock-write");
        assert_eq!(write.chars().count(), WIDTH, "{write}");
        assert!(write.contains("xx…xx"), "{write}");
        // A long path keeps its file name and line, without the object.
        let spin = text.lines().find(|l| l.contains("  g at ")).unwrap();
        assert!(spin.ends_with("  g at …/spin.c:3"), "{spin}");
        // The document keeps whole names.
        assert!(r.locks.iter().any(|l| l.name == p.locks[0].name));
    }

    #[test]
    fn the_json_document_reads_back() {
        let p = profile();
        let r = report(&p);
        let back: LockReport = serde_json::from_str(&r.to_json()).expect("parses");
        assert_eq!(back, r);
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["ns_per_spin"], 2.0);
        assert_eq!(v["waits"], 18);
        let futex = &v["locks"][0];
        assert_eq!(futex["kind"], "futex");
        assert_eq!(futex["acquisitions"], serde_json::Value::Null);
        assert_eq!(futex["wait_total_ns"], 4e6);
        assert_eq!(futex["stack"][0], "futex_wait+0x1 (/lib/libc.so.6+0x10)");
        // The libc frame is a wrapper; the program's is not.
        assert_eq!(futex["frames"][0]["wrapper"], true);
        assert_eq!(futex["frames"][1]["wrapper"], false);
        assert_eq!(futex["prices"][0]["policy"], "offline");
        assert_eq!(futex["prices"].as_array().unwrap().len(), 9);
        let mutex = &v["locks"][3];
        assert_eq!(mutex["acquisitions"], 1000);
        assert_eq!(mutex["contended_pct"], 1.0);
        assert_eq!(mutex["hold_mean_ns"], 1000.0);
        assert_eq!(mutex["hold_max_ns"], 2500);
        assert!(mutex["policy"]["policy"].is_string());
        assert!(v["recommended"]["vs_offline"].as_f64().unwrap() >= 1.0);
    }

    #[test]
    fn stacks_mark_wrappers() {
        let r = report(&profile());
        assert_eq!(r.stacks_text(0), "");
        let s = r.stacks_text(1);
        assert!(s.contains("1  futex  f at a.rs:4"), "{s}");
        assert!(
            s.contains("\n  · futex_wait+0x1 (/lib/libc.so.6+0x10)\n"),
            "{s}"
        );
        assert!(s.contains("\n    (/x+0x4)\n"), "{s}");
        let s = r.stacks_text(2);
        assert!(s.contains("(no stack recorded)"), "{s}");
    }

    #[test]
    fn counts_and_times_are_short() {
        assert_eq!(count(9_999_999), "9999999");
        assert_eq!(count(12_345_678), "12.3M");
        assert_eq!(count(4_500_000_000_000), "4500G");
        assert_eq!(duration(850.0), "850 ns");
        assert_eq!(duration(1234.0), "1.23 µs");
        assert_eq!(duration(45_600_000.0), "45.6 ms");
        assert_eq!(duration(2.5e9), "2.50 s");
        assert_eq!(middle("abcdefghij", 7), "abcd…ij");
        assert_eq!(middle("abc", 7), "abc");
    }
}
