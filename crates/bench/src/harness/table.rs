//! The report tables most experiments print: one row per series (a lock,
//! an algorithm, a policy), its name as code in the first cell.

use crate::output::report::Table;

/// A header: `first`, then `rest`.
pub fn header(first: &str, rest: impl IntoIterator<Item = String>) -> Vec<String> {
    std::iter::once(first.to_string()).chain(rest).collect()
}

/// A table under `header` with one row per name of `series`: the name as
/// code, then `cells(name)`.
pub fn by_series<S: AsRef<str>>(
    header: &[String],
    series: &[S],
    mut cells: impl FnMut(&str) -> Vec<String>,
) -> Table {
    let mut table = Table::new(header);
    for s in series {
        let s = s.as_ref();
        table.push(&[vec![format!("`{s}`")], cells(s)].concat());
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_per_series() {
        let h = header("lock", ["1".to_string(), "2".to_string()]);
        let t = by_series(&h, &["a", "b"], |s| vec![s.len().to_string(), "n/a".into()]);
        assert_eq!(t.header, ["lock", "1", "2"]);
        assert_eq!(t.rows[1], ["`b`", "1", "n/a"]);
    }
}
