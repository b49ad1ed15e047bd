//! Tidy result rows and their CSV files.
//!
//! Every experiment writes its measurements as [`Row`]s: one row per measured
//! point, in the tidy layout of SPEC §3. A CSV file starts with the seven base
//! columns
//!
//! ```text
//! experiment,series,threads,oversubscribed,metric,value,unit
//! ```
//!
//! followed by one column per experiment parameter (`cs_ns`, `work_ns`,
//! `mpl`, ...), in the order the keys were first seen across the rows. A row
//! that lacks a parameter leaves that cell empty. `oversubscribed` is written
//! as `true`/`false`, and `value` with Rust's shortest round-trip `{}`
//! formatting of `f64`, so [`read_csv`] gives back exactly what
//! [`write_csv`] was given.
//!
//! Plots and the report are drawn from these files, never from in-memory
//! state only (SPEC §1, "Results are data").

use std::path::Path;

/// The base columns every result CSV starts with, in order.
pub const BASE_COLUMNS: [&str; 7] = [
    "experiment",
    "series",
    "threads",
    "oversubscribed",
    "metric",
    "value",
    "unit",
];

/// One measured point: a tidy row of a result CSV.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Experiment id, e.g. `spin-counter`.
    pub experiment: String,
    /// The lock, strategy, policy, algorithm or peer, by its registry name.
    pub series: String,
    /// Threads (or processors) the point was measured with.
    pub threads: u32,
    /// Whether `threads` exceeds the machine's cores.
    pub oversubscribed: bool,
    /// Metric name, lower_snake_case, e.g. `elapsed_ms`.
    pub metric: String,
    /// The measured value.
    pub value: f64,
    /// Unit of `value`, e.g. `ms`, `ns/op`, `ratio`.
    pub unit: String,
    /// Experiment parameters as `(column, value)` pairs, in column order.
    pub params: Vec<(String, String)>,
}

impl Row {
    /// A row without parameters; add them with [`Row::param`].
    pub fn new(
        experiment: &str,
        series: &str,
        threads: u32,
        oversubscribed: bool,
        metric: &str,
        value: f64,
        unit: &str,
    ) -> Row {
        Row {
            experiment: experiment.to_string(),
            series: series.to_string(),
            threads,
            oversubscribed,
            metric: metric.to_string(),
            value,
            unit: unit.to_string(),
            params: Vec::new(),
        }
    }

    /// Builder: sets parameter `key` to `value`. A new key is appended as a
    /// further column; setting a key the row already has replaces its value,
    /// so a row never holds the same key twice.
    pub fn param(mut self, key: &str, value: impl ToString) -> Row {
        let value = value.to_string();
        match self.params.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.params.push((key.to_string(), value)),
        }
        self
    }

    /// Builder: records the spread of the point's repeats as the
    /// parameters `lo`, `hi` and `repeats` (read back by [`Row::spread`];
    /// the verdict rules judge differences against it).
    pub fn with_spread(self, s: &crate::stats::Spread) -> Row {
        self.param("lo", s.lo)
            .param("hi", s.hi)
            .param("repeats", s.n)
    }

    /// The `(lo, hi, repeats)` recorded with [`Row::with_spread`], if the
    /// row has all three and they parse.
    pub fn spread(&self) -> Option<(f64, f64, usize)> {
        let lo = self.get_param("lo")?.parse().ok()?;
        let hi = self.get_param("hi")?.parse().ok()?;
        let n = self.get_param("repeats")?.parse().ok()?;
        Some((lo, hi, n))
    }

    /// The value of parameter `key`, if the row has it.
    pub fn get_param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The rows whose metric is `metric`, in file order.
pub fn filter<'a>(rows: &'a [Row], metric: &str) -> impl Iterator<Item = &'a Row> + use<'a> {
    let metric = metric.to_string();
    rows.iter().filter(move |r| r.metric == metric)
}

/// The distinct series names of `rows`, in first-seen order.
pub fn series_names(rows: &[Row]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for row in rows {
        if !names.contains(&row.series.as_str()) {
            names.push(&row.series);
        }
    }
    names
}

/// The union of the parameter keys of `rows`, in first-seen order.
pub fn param_keys(rows: &[Row]) -> Vec<&str> {
    let mut keys: Vec<&str> = Vec::new();
    for row in rows {
        for (k, _) in &row.params {
            if !keys.contains(&k.as_str()) {
                keys.push(k);
            }
        }
    }
    keys
}

/// Writes `rows` to `path` as a tidy CSV (see the module docs), creating the
/// parent directory if needed. An empty `rows` gives a file with the base
/// header only.
///
/// Fails, naming the file, if it cannot be written or if a parameter key is
/// empty or collides with a base column (the file could not be read back).
pub fn write_csv(path: &Path, rows: &[Row]) -> Result<(), String> {
    let shown = path.display();
    let keys = param_keys(rows);
    for key in &keys {
        if key.is_empty() {
            return Err(format!("{shown}: a row has a parameter with an empty name"));
        }
        if BASE_COLUMNS.contains(key) {
            return Err(format!(
                "{shown}: parameter `{key}` has the name of a base column ({})",
                BASE_COLUMNS.join(", ")
            ));
        }
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{}: cannot create directory: {e}", dir.display()))?;
    }
    let mut writer = csv::WriterBuilder::new()
        .from_path(path)
        .map_err(|e| format!("{shown}: cannot create file: {e}"))?;
    let write_err = |e: csv::Error| format!("{shown}: cannot write: {e}");

    let mut header: Vec<&str> = BASE_COLUMNS.to_vec();
    header.extend(keys.iter().copied());
    writer.write_record(&header).map_err(write_err)?;

    for row in rows {
        let mut record: Vec<String> = vec![
            row.experiment.clone(),
            row.series.clone(),
            row.threads.to_string(),
            row.oversubscribed.to_string(),
            row.metric.clone(),
            format!("{}", row.value),
            row.unit.clone(),
        ];
        record.extend(
            keys.iter()
                .map(|key| row.get_param(key).unwrap_or("").to_string()),
        );
        writer.write_record(&record).map_err(write_err)?;
    }
    writer
        .flush()
        .map_err(|e| format!("{shown}: cannot write: {e}"))
}

/// Reads a tidy CSV written by [`write_csv`] (or by hand in the same layout).
///
/// The base columns may appear in any order; every other column is a
/// parameter, and an empty cell means the row lacks that parameter. Errors
/// name the file and, for a bad cell, the line and column.
pub fn read_csv(path: &Path) -> Result<Vec<Row>, String> {
    let shown = path.display();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_path(path)
        .map_err(|e| format!("{shown}: cannot open: {e}"))?;
    let header = reader
        .headers()
        .map_err(|e| format!("{shown}: cannot read the header row: {e}"))?
        .clone();
    if header.is_empty() || (header.len() == 1 && header[0].is_empty()) {
        return Err(format!(
            "{shown}: empty file; expected a header row starting with {}",
            BASE_COLUMNS.join(",")
        ));
    }

    let mut base_index = [0usize; 7];
    for (slot, name) in base_index.iter_mut().zip(BASE_COLUMNS) {
        *slot = header.iter().position(|h| h == name).ok_or_else(|| {
            format!(
                "{shown}: missing column `{name}` in the header row (expected columns: {})",
                BASE_COLUMNS.join(",")
            )
        })?;
    }
    let params: Vec<(usize, String)> = header
        .iter()
        .enumerate()
        .filter(|(_, h)| !BASE_COLUMNS.contains(h))
        .map(|(i, h)| (i, h.to_string()))
        .collect();

    let mut rows = Vec::new();
    for result in reader.records() {
        let record = result.map_err(|e| match e.position() {
            Some(pos) => format!("{shown}: line {}: malformed record: {e}", pos.line()),
            None => format!("{shown}: malformed record: {e}"),
        })?;
        let line = record.position().map(|p| p.line()).unwrap_or(0);
        let cell = |column: usize| record.get(base_index[column]).unwrap_or("");
        let bad = |column: usize, what: &str| {
            format!(
                "{shown}: line {line}: column `{}`: cannot parse `{}` as {what}",
                BASE_COLUMNS[column],
                cell(column)
            )
        };

        let threads: u32 = cell(2)
            .trim()
            .parse()
            .map_err(|_| bad(2, "a thread count (a non-negative integer)"))?;
        let oversubscribed = match cell(3).trim().to_ascii_lowercase().as_str() {
            "true" => true,
            "false" => false,
            _ => return Err(bad(3, "a boolean (`true` or `false`)")),
        };
        let value: f64 = cell(5).trim().parse().map_err(|_| bad(5, "a number"))?;

        let mut row = Row::new(
            cell(0),
            cell(1),
            threads,
            oversubscribed,
            cell(4),
            value,
            cell(6),
        );
        for (index, key) in &params {
            match record.get(*index) {
                Some(v) if !v.is_empty() => row.params.push((key.clone(), v.to_string())),
                _ => {}
            }
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Joins one experiment's rows from two processes (the two passes of
/// `symmetry reproduce`) into one row per point, so that a point's
/// interval holds what moved between the processes: their heap and code
/// layout, the placement of the CPUs and the host's load minutes apart,
/// which the repeats of one process share and never show.
///
/// A point is found in both passes by its series, threads,
/// oversubscription, metric, unit and *setting* parameters, such as
/// `cs_ns` or `mpl`. Which parameter columns (other than `lo`, `hi` and
/// `repeats`) are settings is read from the rows: group each pass's rows
/// by series, threads, oversubscription, metric and unit; a column is a
/// setting unless some group that holds as many rows in both passes holds
/// other values of it in one pass than in the other. A measured parameter
/// (a count of parks, a load average) differs between the passes at some
/// point and is no part of the key. Groups whose counts differ (rows an
/// experiment writes only sometimes) are left out of that test, so a
/// setting is not lost to them; a measured parameter that passes the test
/// only keeps points apart, it never pairs two different points. A column
/// that holds a word anywhere (a series name such as `fastest`, a flag
/// such as `completed`) is always a setting: a point whose reference or
/// outcome differs between the passes is two points. Rows with equal keys
/// are paired in the order they were written. For each pair:
/// - the value is the mean of the two passes' values (each the median of
///   its pass's repeats) weighted by their repeats, or the smaller or the
///   larger of the two where the row names its statistic ([`STAT`]);
/// - `repeats` counts both passes' repeats, and `lo` and `hi` span both
///   passes' intervals and values. A row written without `lo` and `hi`
///   (a computed value, a point measured once) gets none: some
///   experiments leave them out on purpose, and the rules read such rows
///   as exact;
/// - a `bool` row that is false in one pass is that pass's row (a run
///   that completed once did not complete), and so is a value that is not
///   finite in one pass;
/// - every other parameter is the first pass's.
///
/// A point written in one pass only (a row an experiment writes only when
/// a run reached its target within the budget, say) is kept as that pass
/// measured it: the first pass's in its place, the second's after all the
/// first's. [`Joined::one_pass`] counts them.
pub fn join_passes(first: &[Row], second: &[Row]) -> Joined {
    let spread_keys = ["lo", "hi", "repeats"];
    type Group = (String, u32, bool, String, String);
    fn group(r: &Row) -> Group {
        (
            r.series.clone(),
            r.threads,
            r.oversubscribed,
            r.metric.clone(),
            r.unit.clone(),
        )
    }
    fn groups(rows: &[Row]) -> std::collections::BTreeMap<Group, Vec<&Row>> {
        let mut g: std::collections::BTreeMap<Group, Vec<&Row>> = Default::default();
        for r in rows {
            g.entry(group(r)).or_default().push(r);
        }
        g
    }
    let (ga, gb) = (groups(first), groups(second));
    let same_values = |column: &str| {
        ga.iter().all(|(k, a)| match gb.get(k) {
            Some(b) if b.len() == a.len() => {
                let values = |rows: &[&Row]| {
                    let mut v: Vec<Option<String>> = rows
                        .iter()
                        .map(|r| r.get_param(column).map(str::to_string))
                        .collect();
                    v.sort_unstable();
                    v
                };
                values(a) == values(b)
            }
            _ => true,
        })
    };
    // A column holding a word anywhere (a name, `true`/`false`) is a
    // setting whatever its values: a point whose reference or outcome
    // differs between the passes is two points.
    let numeric = |column: &str| {
        first
            .iter()
            .chain(second)
            .filter_map(|r| r.get_param(column))
            .all(|v| v.parse::<f64>().is_ok())
    };
    let mut columns = param_keys(first);
    for k in param_keys(second) {
        if !columns.contains(&k) {
            columns.push(k);
        }
    }
    let settings: Vec<&str> = columns
        .into_iter()
        .filter(|k| !spread_keys.contains(k))
        .filter(|k| !numeric(k) || same_values(k))
        .collect();
    let key = |r: &Row| {
        (
            group(r),
            settings
                .iter()
                .map(|k| r.get_param(k).map(str::to_string))
                .collect::<Vec<_>>(),
        )
    };
    let mut unused: Vec<Option<&Row>> = second.iter().map(Some).collect();
    let keys: Vec<_> = second.iter().map(key).collect();
    let mut one_pass = 0;
    let mut rows: Vec<Row> = first
        .iter()
        .map(|a| {
            let k = key(a);
            let found = (0..second.len()).find(|&i| unused[i].is_some() && keys[i] == k);
            match found.and_then(|i| unused[i].take()) {
                Some(b) => join_point(a, b),
                None => {
                    one_pass += 1;
                    a.clone()
                }
            }
        })
        .collect();
    for b in unused.into_iter().flatten() {
        one_pass += 1;
        rows.push(b.clone());
    }
    Joined { rows, one_pass }
}

/// What [`join_passes`] made of two passes.
#[derive(Debug, Clone, PartialEq)]
pub struct Joined {
    /// The joined rows.
    pub rows: Vec<Row>,
    /// How many of them were written in one pass only.
    pub one_pass: usize,
}

/// The parameter that names the statistic a row's value is when it is
/// not the median of its repeats: `min` (the least disturbed repeat) or
/// `max` (a peak). [`join_passes`] joins such a value as the smaller or
/// larger of the two passes'.
pub const STAT: &str = "stat";

/// One point of [`join_passes`].
fn join_point(a: &Row, b: &Row) -> Row {
    // A pass that failed at the point (did not complete, measured no
    // finite value) stands for it, with its own parameters.
    if a.unit == "bool" {
        return if b.value == 0.0 && a.value != 0.0 {
            b.clone()
        } else {
            a.clone()
        };
    }
    if !a.value.is_finite() {
        return a.clone();
    }
    if !b.value.is_finite() {
        return b.clone();
    }
    let repeats = |r: &Row| r.get_param("repeats").and_then(|n| n.parse::<usize>().ok());
    let (na, nb) = (repeats(a).unwrap_or(1), repeats(b).unwrap_or(1));
    let value = match a.get_param(STAT) {
        Some("min") => a.value.min(b.value),
        Some("max") => a.value.max(b.value),
        _ => (a.value * na as f64 + b.value * nb as f64) / (na + nb) as f64,
    };
    let mut row = Row { value, ..a.clone() };
    let (sa, sb) = (a.spread(), b.spread());
    if repeats(a).is_some() || repeats(b).is_some() || sa.is_some() || sb.is_some() {
        row = row.param("repeats", na + nb);
    }
    if sa.is_some() || sb.is_some() {
        let ends =
            |r: &Row, s: Option<(f64, f64, usize)>| s.map_or((r.value, r.value), |s| (s.0, s.1));
        let ((alo, ahi), (blo, bhi)) = (ends(a, sa), ends(b, sb));
        // Both values are finite here, so there is a spread.
        if let Some(s) = crate::stats::Spread::of(&[alo, ahi, blo, bhi, a.value, b.value]) {
            row = row.param("lo", s.lo).param("hi", s.hi);
        }
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn temp_file(name: &str) -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        std::env::temp_dir()
            .join(format!("symmetry-data-{}-{nanos}", std::process::id()))
            .join(name)
    }

    #[test]
    fn param_builder_sets_and_replaces() {
        let row = Row::new("e", "s", 1, false, "m", 1.0, "u")
            .param("cs_ns", 100)
            .param("mpl", "2.0")
            .param("cs_ns", 200);
        assert_eq!(row.get_param("cs_ns"), Some("200"));
        assert_eq!(row.get_param("mpl"), Some("2.0"));
        assert_eq!(row.get_param("nope"), None);
        assert_eq!(row.params.len(), 2);
    }

    #[test]
    fn csv_round_trip_with_params() {
        let rows = vec![
            Row::new("spin-counter", "mcs", 1, false, "elapsed_ms", 12.5, "ms").param("cs_ns", 0),
            Row::new(
                "spin-counter",
                "tas, \"quoted\"",
                4,
                true,
                "elapsed_ms",
                0.1 + 0.2,
                "ms",
            )
            .param("work_ns", 300),
            Row::new("spin-counter", "ttas", 2, false, "ratio", f64::NAN, "x")
                .param("cs_ns", 50)
                .param("work_ns", 1e-300),
            Row::new("spin-counter", "inf", 3, true, "ratio", f64::INFINITY, ""),
        ];
        let path = temp_file("round.csv");
        write_csv(&path, &rows).unwrap();

        let text = std::fs::read_to_string(&path).unwrap();
        let header = text.lines().next().unwrap();
        assert_eq!(
            header,
            "experiment,series,threads,oversubscribed,metric,value,unit,cs_ns,work_ns"
        );

        let back = read_csv(&path).unwrap();
        assert_eq!(back.len(), rows.len());
        for (a, b) in rows.iter().zip(&back) {
            if a.value.is_nan() {
                assert!(b.value.is_nan());
                let mut b2 = b.clone();
                b2.value = a.value;
                assert_eq!(a.params, b2.params);
                assert_eq!(a.series, b2.series);
            } else {
                assert_eq!(a, b);
            }
        }
        assert_eq!(back[1].value, 0.1 + 0.2);
        assert_eq!(filter(&back, "ratio").count(), 2);
        assert_eq!(
            series_names(&back),
            vec!["mcs", "tas, \"quoted\"", "ttas", "inf"]
        );
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn empty_rows_write_base_header() {
        let path = temp_file("empty.csv");
        write_csv(&path, &[]).unwrap();
        assert!(read_csv(&path).unwrap().is_empty());
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn bad_number_reports_line_and_path() {
        let path = temp_file("bad.csv");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            "experiment,series,threads,oversubscribed,metric,value,unit\n\
             e,s,1,false,m,1.5,ms\n\
             e,s,2,false,m,abc,ms\n",
        )
        .unwrap();
        let err = read_csv(&path).unwrap_err();
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("`value`"), "{err}");
        assert!(err.contains("abc"), "{err}");
        assert!(err.contains(&path.display().to_string()), "{err}");
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn missing_column_and_bad_bool_are_errors() {
        let path = temp_file("missing.csv");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "experiment,series,threads,metric,value,unit\n").unwrap();
        let err = read_csv(&path).unwrap_err();
        assert!(err.contains("missing column `oversubscribed`"), "{err}");

        std::fs::write(
            &path,
            "experiment,series,threads,oversubscribed,metric,value,unit\ne,s,1,maybe,m,1,ms\n",
        )
        .unwrap();
        let err = read_csv(&path).unwrap_err();
        assert!(err.contains("line 2") && err.contains("maybe"), "{err}");

        std::fs::write(&path, "").unwrap();
        assert!(read_csv(&path).unwrap_err().contains("empty file"));

        let err = read_csv(&path.with_file_name("does-not-exist.csv")).unwrap_err();
        assert!(err.contains("does-not-exist.csv"), "{err}");
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn param_named_like_base_column_is_rejected() {
        let path = temp_file("clash.csv");
        let rows = [Row::new("e", "s", 1, false, "m", 1.0, "u").param("value", 3)];
        let err = write_csv(&path, &rows).unwrap_err();
        assert!(err.contains("base column"), "{err}");
    }

    #[test]
    fn two_passes_join_into_one_point_with_both_spreads() {
        use crate::stats::Spread;
        let spread = |v: f64, lo: f64, hi: f64, n: usize| Spread {
            median: v,
            lo,
            hi,
            n,
        };
        let a = vec![
            Row::new("x", "tas", 2, false, "ns", 100.0, "ns")
                .param("cs_ns", 50)
                .with_spread(&spread(100.0, 95.0, 104.0, 3)),
            Row::new("x", "tas", 4, true, "ns", 300.0, "ns"),
            Row::new("x", "model", 2, false, "speedup", 1.5, "x"),
            Row::new("x", "tas", 2, false, "completed", 1.0, "bool"),
            Row::new("x", "mcs", 2, false, "ns", f64::NAN, "ns"),
        ];
        let b = vec![
            Row::new("x", "tas", 2, false, "ns", 120.0, "ns")
                .param("cs_ns", 50)
                .with_spread(&spread(120.0, 118.0, 130.0, 1)),
            Row::new("x", "tas", 4, true, "ns", 340.0, "ns"),
            Row::new("x", "model", 2, false, "speedup", 1.5, "x"),
            Row::new("x", "tas", 2, false, "completed", 0.0, "bool"),
            Row::new("x", "mcs", 2, false, "ns", 7.0, "ns"),
        ];
        let joined = join_passes(&a, &b);
        assert_eq!(joined.one_pass, 0);
        let j = &joined.rows;
        // Weighted by repeats: (3 * 100 + 1 * 120) / 4; the interval spans
        // both passes; the other parameters are kept.
        assert_eq!(j[0].value, 105.0);
        assert_eq!(j[0].spread(), Some((95.0, 130.0, 4)));
        assert_eq!(j[0].get_param("cs_ns"), Some("50"));
        // Written without a spread: the mean, and still no spread.
        assert_eq!(j[1].value, 320.0);
        assert_eq!(j[1].spread(), None);
        // A computed value that did not move gets no spread.
        assert_eq!(j[2], a[2]);
        // Completed in one pass only: not completed.
        assert_eq!(j[3].value, 0.0);
        // Not finite in one pass: that pass's row.
        assert!(j[4].value.is_nan() && j[4].spread().is_none());
        let k = join_passes(&b[4..], &a[4..]);
        assert!(k.rows[0].value.is_nan());
        let k = join_passes(&b[3..4], &a[3..4]);
        assert_eq!(k.rows[0], b[3], "the pass that did not complete stands");
        // A peak joins as the larger, a least disturbed repeat as the
        // smaller; repeats written without lo and hi are counted.
        let peak = |v: f64| {
            Row::new("x", "memcpy", 1, false, "mb_s", v, "MB/s")
                .param(STAT, "max")
                .with_spread(&spread(v * 0.9, v * 0.8, v, 5))
        };
        let k = join_passes(&[peak(10.0)], &[peak(12.0)]);
        assert_eq!(k.rows[0].value, 12.0);
        assert_eq!(k.rows[0].spread(), Some((8.0, 12.0, 10)));
        let least = |v: f64| {
            Row::new("x", "fifo", 1, false, "ns_min", v, "ns")
                .param("repeats", 3)
                .param(STAT, "min")
        };
        // A spread in one pass only still counts both passes' repeats.
        let k = join_passes(
            &a[..1],
            &[Row::new("x", "tas", 2, false, "ns", 90.0, "ns").param("cs_ns", 50)],
        );
        assert_eq!(k.rows[0].spread(), Some((90.0, 104.0, 4)));
        let k = join_passes(&[least(7.0)], &[least(5.0)]);
        assert_eq!(k.rows[0].value, 5.0);
        assert_eq!(k.rows[0].get_param("repeats"), Some("6"));
        // A word in a column keeps points apart when it differs.
        let named = |best: &str, v: f64| {
            Row::new("x", "tas", 1, false, "ratio", v, "x").param("fastest", best)
        };
        let k = join_passes(&[named("tas", 1.0)], &[named("mcs", 1.2)]);
        assert_eq!(k.one_pass, 2);
        // A point written in one pass only is kept as measured, the
        // second pass's after the first's; a measured parameter (`parks`)
        // is no part of a point's key, a setting (`cs_ns`) is.
        let c = vec![
            a[0].clone().param("parks", 3),
            Row::new("x", "tas", 2, false, "elapsed_s", 1.0, "s"),
        ];
        let d = vec![
            Row::new("x", "tas", 2, false, "elapsed_s", 2.0, "s"),
            b[0].clone().param("parks", 9),
            Row::new("x", "tas", 4, false, "elapsed_s", 5.0, "s"),
        ];
        let joined = join_passes(&c, &d);
        assert_eq!(joined.one_pass, 1);
        assert_eq!(joined.rows.len(), 3);
        assert_eq!(joined.rows[0].value, 105.0);
        assert_eq!(joined.rows[0].get_param("parks"), Some("3"));
        assert_eq!(joined.rows[1].value, 1.5);
        assert_eq!(joined.rows[2], d[2]);
        let e = vec![b[0].clone().param("cs_ns", 80)];
        let f = vec![
            a[0].clone().param("cs_ns", 50),
            a[0].clone().param("cs_ns", 80),
        ];
        let joined = join_passes(&f, &e);
        assert_eq!(joined.one_pass, 1, "cs_ns 50 and 80 are two points");
        assert_eq!(joined.rows[0], f[0]);
        assert_eq!(joined.rows[1].spread(), Some((95.0, 130.0, 4)));
        // A count that takes the same values in both passes, but at other
        // points, is measured: the points still pair.
        let g = vec![
            a[1].clone().param("parks", 0),
            Row::new("x", "mcs", 4, true, "ns", 10.0, "ns").param("parks", 3),
        ];
        let h = vec![
            b[1].clone().param("parks", 3),
            Row::new("x", "mcs", 4, true, "ns", 12.0, "ns").param("parks", 0),
        ];
        let joined = join_passes(&g, &h);
        assert_eq!(joined.one_pass, 0);
        assert_eq!(joined.rows[1].value, 11.0);
    }
}
