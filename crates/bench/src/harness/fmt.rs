//! Number formats the report uses.

use super::rule::Estimate;

/// Formats a ratio like `1.23x`; `n/a` when not finite.
pub fn ratio(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}x")
    } else {
        "n/a".to_string()
    }
}

/// Formats nanoseconds compactly (`12.3 ns`, `4.56 us`, `7.89 ms`).
pub fn ns(x: f64) -> String {
    if !x.is_finite() {
        "n/a".to_string()
    } else if x >= 1e6 {
        format!("{:.2} ms", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.2} us", x / 1e3)
    } else {
        format!("{x:.1} ns")
    }
}

/// Names as a markdown list of code spans: `` `a`, `b` `` or `none`.
pub fn names<S: AsRef<str>>(names: &[S]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names
            .iter()
            .map(|n| format!("`{}`", n.as_ref()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Numbers joined by commas, or `none`.
pub fn counts(values: &[u32]) -> String {
    if values.is_empty() {
        "none".to_string()
    } else {
        values
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A value with two decimals, or `n/a`.
pub fn opt2(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.2}"))
}

/// An estimate with `digits` decimals and its unit, e.g. `12.3 [11.9,
/// 13.0] ns` ([`Estimate::show`]).
pub fn est(e: Estimate, digits: usize, unit: &str) -> String {
    format!("{} {unit}", e.show(digits))
}

/// `v` formatted by `f`, or `n/a`.
pub fn na<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map_or_else(|| "n/a".to_string(), f)
}

/// The items joined by `sep`.
pub fn join<S: AsRef<str>>(items: impl IntoIterator<Item = S>, sep: &str) -> String {
    let mut out = String::new();
    for (i, s) in items.into_iter().enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        out.push_str(s.as_ref());
    }
    out
}

/// `(name, value)` pairs from the smallest value up, as `` `a` 1.0 ns
/// <sep> `b` 2.0 ns `` with each value written by `f`; `empty` when there
/// are none.
pub fn ascending(mut v: Vec<(&str, f64)>, f: fn(f64) -> String, sep: &str, empty: &str) -> String {
    if v.is_empty() {
        return empty.to_string();
    }
    v.sort_by(|a, b| a.1.total_cmp(&b.1));
    join(v.iter().map(|(n, x)| format!("`{n}` {}", f(*x))), sep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_estimates() {
        assert_eq!(join(["a", "b", "c"], ", "), "a, b, c");
        assert_eq!(join(Vec::<String>::new(), ", "), "");
        let v = vec![("b", 2.0), ("a", 1.0)];
        assert_eq!(ascending(v, ns, " < ", "n/a"), "`a` 1.0 ns < `b` 2.0 ns");
        assert_eq!(ascending(Vec::new(), ns, " < ", "n/a"), "n/a");
        assert_eq!(
            est(Estimate::new(1.0, 0.5, 2.0), 1, "us"),
            "1.0 [0.5, 2.0] us"
        );
        assert_eq!(na(None::<f64>, ns), "n/a");
        assert_eq!(na(Some(2.0), ratio), "2.00x");
    }
}
