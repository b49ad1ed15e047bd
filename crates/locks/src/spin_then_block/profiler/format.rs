//! The profile file: a [`Profile`] written as CSV with `#` header lines
//! and read back ([`Profile::parse`] reads the current version and
//! [`VERSION_1`]).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use super::{
    BUCKETS, CAP, HoldTimes, LockKind, LockRecord, MAGIC, Profile, UNIT, VERSION_1, bucket_upper,
};

/// Why a profile file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProfileError {
    /// 1-based line number (0: the file as a whole).
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

impl std::fmt::Display for ProfileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}

impl std::error::Error for ProfileError {}

/// Header of the histogram rows of a version-1 file.
const HEADER_1: &str = "lock,blocker,c_spins,bucket,lo_spins,hi_spins,count,sum_spins,blocked";
/// Header of the histogram rows.
const HEADER: &str = "lock,kind,blocker,c_spins,bucket,lo_spins,hi_spins,count,sum_spins,blocked";
/// Header of the per-lock rows (version 2).
const COUNTS_HEADER: &str =
    "lock,kind,blocker,acquisitions,wait_max_spins,hold_samples,hold_sum_ns,hold_max_ns,stack";
/// Separates a stack's frames in its field.
const FRAME_SEP: &str = " < ";

fn quote(s: &str) -> Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", s.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(s)
    }
}

/// Splits one CSV line (RFC 4180 quoting, no embedded newlines).
fn split_csv(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut at_start = true;
    while let Some(ch) = chars.next() {
        match (quoted, ch) {
            (false, '"') if at_start => {
                quoted = true;
                at_start = false;
            }
            (true, '"') => {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    cur.push('"');
                } else {
                    quoted = false;
                }
            }
            (false, ',') => {
                out.push(std::mem::take(&mut cur));
                at_start = true;
            }
            (_, c) => {
                cur.push(c);
                at_start = false;
            }
        }
    }
    if quoted {
        return Err("unterminated quoted field".into());
    }
    out.push(cur);
    Ok(out)
}

/// Which table of a file the parser is in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    /// Before the histogram header.
    Start,
    /// Histogram rows (of a file of the version given).
    Buckets(u8),
    /// Per-lock rows (version 2).
    Counts,
}

impl Profile {
    /// The profile as its file format (see the module docs).
    pub fn to_csv(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{MAGIC}");
        let _ = writeln!(
            s,
            "# unit_spins={UNIT} buckets={BUCKETS} ns_per_spin={:.4}",
            self.ns_per_spin
        );
        let _ = writeln!(
            s,
            "# one row per lock and non-empty bucket; bucket {} is overflow (> {CAP} spins, blocked waits included)",
            BUCKETS - 1
        );
        let _ = writeln!(s, "{HEADER}");
        for l in &self.locks {
            for j in 0..BUCKETS {
                if l.counts[j] == 0 {
                    continue;
                }
                let lo = if j == 0 { 0 } else { j as u64 * UNIT + 1 };
                let hi = if j + 1 == BUCKETS {
                    String::new()
                } else {
                    bucket_upper(j).to_string()
                };
                let _ = writeln!(
                    s,
                    "{},{},{},{},{j},{lo},{hi},{},{},{}",
                    quote(&l.name),
                    l.kind,
                    quote(&l.blocker),
                    l.c_spins,
                    l.counts[j],
                    l.sums[j],
                    l.blocked[j]
                );
            }
        }
        let _ = writeln!(
            s,
            "# one row per lock: acquisitions (empty: not seen), longest wait, sampled hold times, \
             and the stack it was first contended at (innermost frame first, frames separated by `{}`)",
            FRAME_SEP.trim()
        );
        let _ = writeln!(s, "{COUNTS_HEADER}");
        let opt = |v: Option<u64>| v.map_or_else(String::new, |v| v.to_string());
        for l in &self.locks {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{}",
                quote(&l.name),
                l.kind,
                quote(&l.blocker),
                opt(l.acquisitions),
                opt(l.wait_max),
                l.hold.samples,
                l.hold.sum_ns,
                l.hold.max_ns,
                quote(&l.stack.join(FRAME_SEP))
            );
        }
        s
    }

    /// Parses a profile file (version 2, or version 1, whose counts read
    /// as not recorded).
    pub fn parse(text: &str) -> Result<Profile, ProfileError> {
        let err = |line: usize, message: String| ProfileError { line, message };
        let mut lines = text.lines().enumerate();
        let version = match lines.next().map(|(_, l)| l.trim_end()) {
            Some(MAGIC) => 2,
            Some(VERSION_1) => 1,
            Some(l) if l.starts_with("# symmetry lock-wait profile, version ") => {
                return Err(err(
                    1,
                    format!(
                        "`{l}`: this symmetry reads versions 1 and 2 (a newer symmetry wrote the file?)"
                    ),
                ));
            }
            _ => {
                return Err(err(
                    1,
                    format!("not a symmetry lock-wait profile (the first line must be `{MAGIC}`)"),
                ));
            }
        };
        let mut ns_per_spin = None;
        let mut section = Section::Start;
        let mut locks: Vec<LockRecord> = Vec::new();
        let mut index: HashMap<(String, LockKind, String), usize> = HashMap::new();
        for (i, raw) in lines {
            let n = i + 1;
            let line = raw.trim_end();
            if line.is_empty() {
                continue;
            }
            if let Some(meta) = line.strip_prefix('#') {
                for kv in meta.split_whitespace() {
                    let Some((k, v)) = kv.split_once('=') else {
                        continue;
                    };
                    match k {
                        "ns_per_spin" => {
                            ns_per_spin = Some(v.parse::<f64>().map_err(|_| {
                                err(n, format!("ns_per_spin `{v}` is not a number"))
                            })?);
                        }
                        "unit_spins" if v != UNIT.to_string() => {
                            return Err(err(
                                n,
                                format!("unit_spins={v}, this version reads {UNIT}"),
                            ));
                        }
                        "buckets" if v != BUCKETS.to_string() => {
                            return Err(err(
                                n,
                                format!("buckets={v}, this version reads {BUCKETS}"),
                            ));
                        }
                        _ => {}
                    }
                }
                continue;
            }
            let expected = match (section, version) {
                (Section::Start, 1) => Some(HEADER_1),
                (Section::Start, _) => Some(HEADER),
                _ => None,
            };
            if let Some(h) = expected {
                if line != h {
                    return Err(err(n, format!("expected the header `{h}`")));
                }
                section = Section::Buckets(version);
                continue;
            }
            if section == Section::Buckets(2) && line == COUNTS_HEADER {
                section = Section::Counts;
                continue;
            }
            let f = split_csv(line).map_err(|m| err(n, m))?;
            let width = match section {
                Section::Buckets(1) => 9,
                Section::Buckets(_) => 10,
                _ => 9,
            };
            if f.len() != width {
                return Err(err(
                    n,
                    format!("expected {width} fields, found {}", f.len()),
                ));
            }
            let num = |k: usize, what: &str| -> Result<u64, ProfileError> {
                f[k].trim().parse::<u64>().map_err(|_| {
                    err(
                        n,
                        format!("{what} `{}` is not a non-negative integer", f[k]),
                    )
                })
            };
            let opt = |k: usize, what: &str| -> Result<Option<u64>, ProfileError> {
                if f[k].trim().is_empty() {
                    Ok(None)
                } else {
                    num(k, what).map(Some)
                }
            };
            // Version 1 has no kind column: every lock a mutex.
            let (kind, at) = if section == Section::Buckets(1) {
                (LockKind::Mutex, 1)
            } else {
                let kind = LockKind::from_name(f[1].trim()).ok_or_else(|| {
                    let known: Vec<&str> = LockKind::ALL.iter().map(|k| k.name()).collect();
                    err(
                        n,
                        format!("kind `{}` is not one of {}", f[1], known.join(", ")),
                    )
                })?;
                (kind, 2)
            };
            let key = (f[0].clone(), kind, f[at].clone());
            if section == Section::Counts {
                let Some(&i) = index.get(&key) else {
                    // A lock with counts but no wait: nothing to price;
                    // kept for its counts.
                    let mut l = LockRecord::new(f[0].clone(), f[at].clone(), 0);
                    l.kind = kind;
                    index.insert(key, locks.len());
                    locks.push(l);
                    Self::counts_into(locks.last_mut().expect("just pushed"), &f, opt, num)?;
                    continue;
                };
                Self::counts_into(&mut locks[i], &f, opt, num)?;
                continue;
            }
            let c = num(at + 1, "c_spins")?;
            let j = num(at + 2, "bucket")? as usize;
            if j >= BUCKETS {
                return Err(err(n, format!("bucket {j} out of range 0..{BUCKETS}")));
            }
            let (count, sum, blocked) = (
                num(at + 5, "count")?,
                num(at + 6, "sum_spins")?,
                num(at + 7, "blocked")?,
            );
            if blocked > count {
                return Err(err(n, format!("blocked {blocked} exceeds count {count}")));
            }
            let i = *index.entry(key).or_insert_with(|| {
                let mut l = LockRecord::new(
                    f[0].clone(),
                    f[at].clone(),
                    c.min(u64::from(u32::MAX)) as u32,
                );
                l.kind = kind;
                locks.push(l);
                locks.len() - 1
            });
            let l = &mut locks[i];
            l.counts[j] = l.counts[j].saturating_add(count);
            l.sums[j] = l.sums[j].saturating_add(sum);
            l.blocked[j] = l.blocked[j].saturating_add(blocked);
        }
        if section == Section::Start {
            let h = if version == 1 { HEADER_1 } else { HEADER };
            return Err(err(0, format!("no header line `{h}`")));
        }
        let ns_per_spin =
            ns_per_spin.ok_or_else(|| err(0, "no `# ... ns_per_spin=X` line".into()))?;
        Ok(Profile { ns_per_spin, locks })
    }

    /// Fills `l`'s counts from per-lock row `f`.
    fn counts_into(
        l: &mut LockRecord,
        f: &[String],
        opt: impl Fn(usize, &str) -> Result<Option<u64>, ProfileError>,
        num: impl Fn(usize, &str) -> Result<u64, ProfileError>,
    ) -> Result<(), ProfileError> {
        l.acquisitions = opt(3, "acquisitions")?;
        l.wait_max = opt(4, "wait_max_spins")?;
        l.hold = HoldTimes {
            samples: num(5, "hold_samples")?,
            sum_ns: num(6, "hold_sum_ns")?,
            max_ns: num(7, "hold_max_ns")?,
        };
        l.stack = f[8]
            .split(FRAME_SEP)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        Ok(())
    }

    /// Reads and parses a profile file.
    pub fn read(path: &Path) -> Result<Profile, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|e| ProfileError {
            line: 0,
            message: format!("cannot read {}: {e}", path.display()),
        })?;
        Self::parse(&text)
    }

    /// Every lock's optimal on-line threshold (for
    /// [`opt_known::install`](crate::spin_then_block::policy::opt_known::install)).
    pub fn optimal_thresholds(&self) -> Vec<(String, u32)> {
        self.locks
            .iter()
            .filter_map(|l| Some((l.name.clone(), l.optimal_threshold()?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut a = LockRecord::new("a,\"b\"", "os", 300);
        for w in [0, 5, 17, 900, 5000, 100_000] {
            a.add(w, w > 1000);
        }
        let mut b = LockRecord::new("rw", "glibc", 300);
        b.kind = LockKind::Read;
        b.add(3, false);
        b.acquisitions = Some(1000);
        b.hold = HoldTimes {
            samples: 10,
            sum_ns: 2000,
            max_ns: 900,
        };
        b.stack = vec!["f+0x1 (/bin/x+0x10)".into(), "main, \"q\"".into()];
        let mut c = b.clone();
        c.kind = LockKind::Write;
        let p = Profile {
            ns_per_spin: 12.5,
            locks: vec![a, b, c],
        };
        let q = Profile::parse(&p.to_csv()).expect("parses");
        assert_eq!(p, q);
    }

    #[test]
    fn version_1_files_are_read() {
        let v1 = format!(
            "{VERSION_1}\n# unit_spins=16 buckets=64 ns_per_spin=2.0\n{HEADER_1}\nm,glibc,300,0,0,16,4,20,0\n"
        );
        let p = Profile::parse(&v1).expect("a version-1 file parses");
        let l = &p.locks[0];
        assert_eq!(
            (l.kind, l.contended(), l.acquisitions, l.wait_max),
            (LockKind::Mutex, 4, None, None)
        );
        let e = Profile::parse("# symmetry lock-wait profile, version 9\n").unwrap_err();
        assert!(e.message.contains("reads versions 1 and 2"), "{e}");
    }

    #[test]
    fn bad_files() {
        assert!(
            Profile::parse("hello")
                .unwrap_err()
                .message
                .contains("not a symmetry")
        );
        let head = format!("{MAGIC}\n# ns_per_spin=1\n{HEADER}\n");
        let e = Profile::parse(&format!("{head}x,mutex,os,1,64,0,,1,1,0\n")).unwrap_err();
        assert!(e.message.contains("out of range"), "{e}");
        let e = Profile::parse(&format!("{head}x,mutex,os,1,2,0,,1,1,5\n")).unwrap_err();
        assert!(e.message.contains("exceeds"), "{e}");
        let e = Profile::parse(&format!("{head}x,os\n")).unwrap_err();
        assert_eq!(e.line, 4);
        let e = Profile::parse(&format!("{head}x,lock,os,1,2,0,,1,1,0\n")).unwrap_err();
        assert!(e.message.contains("kind `lock`"), "{e}");
        let e =
            Profile::parse(&format!("{head}{COUNTS_HEADER}\nx,mutex,os,z,,0,0,0,\n")).unwrap_err();
        assert!(e.message.contains("acquisitions `z`"), "{e}");
    }
}
