//! Number formats the report uses.

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
