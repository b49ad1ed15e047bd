//! Axes: linear and log domains, "nice" ticks and their labels, value
//! labels with SI suffixes, and the y axis drawn with its grid.

use super::model::Scale;
use super::svg::{Area, line, text};

/// A mapped axis: domain, ticks and their labels.
#[derive(Debug, Clone)]
pub(super) struct Axis {
    pub(super) scale: Scale,
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) ticks: Vec<(f64, String)>,
    pub(super) minor: Vec<f64>,
}

impl Axis {
    /// Position of `v` in the domain, 0 at `lo` and 1 at `hi`.
    pub(super) fn frac(&self, v: f64) -> f64 {
        // Halved so that `hi - lo` cannot overflow for extreme domains.
        let (v, lo, hi) = match self.scale {
            Scale::Linear => (v * 0.5, self.lo * 0.5, self.hi * 0.5),
            Scale::Log => (v.log10(), self.lo.log10(), self.hi.log10()),
        };
        if hi > lo { (v - lo) / (hi - lo) } else { 0.5 }
    }
}

/// The 1-2-5 step giving about `target` intervals over `range`.
fn nice_step(range: f64, target: f64) -> f64 {
    let raw = range / target;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let m = if norm < 1.5 {
        1.0
    } else if norm < 3.0 {
        2.0
    } else if norm < 7.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// A linear axis over `values` (finite). `include_zero` extends the domain
/// to 0; `snap` extends it to whole steps (y axes); `integer` keeps ticks on
/// integers.
pub(super) fn linear_axis(values: &[f64], include_zero: bool, snap: bool, integer: bool) -> Axis {
    let mut lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let mut hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if include_zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    if lo == hi {
        let d = if integer || lo == 0.0 {
            1.0
        } else {
            lo.abs() * 0.5
        };
        if include_zero && lo == 0.0 {
            hi = 1.0;
        } else {
            lo -= d;
            hi += d;
        }
    }
    let mut step = nice_step(hi * 0.5 - lo * 0.5, 2.5);
    if integer {
        step = step.max(1.0).round();
    }
    if !step.is_finite() || step <= 0.0 {
        // A span too wide (or too narrow) for f64 steps: label the ends.
        return Axis {
            scale: Scale::Linear,
            lo,
            hi,
            ticks: vec![(lo, format_value(lo)), (hi, format_value(hi))],
            minor: Vec::new(),
        };
    }
    if snap {
        let (slo, shi) = ((lo / step).floor() * step, (hi / step).ceil() * step);
        if slo.is_finite() && shi.is_finite() {
            (lo, hi) = (slo, shi);
        }
    }
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    let span = hi.abs().max(lo.abs());
    let ticks = (first..=last)
        .take(1000)
        .map(|i| {
            let v = i as f64 * step;
            (v, format_linear_tick(v, step, span))
        })
        .collect();
    Axis {
        scale: Scale::Linear,
        lo,
        hi,
        ticks,
        minor: Vec::new(),
    }
}

/// Decimals needed to show multiples of `step`.
fn decimals(step: f64) -> usize {
    (-(step.log10() + 1e-9).floor()).clamp(0.0, 12.0) as usize
}

/// Labels a linear tick: SI suffixes (k, M, G, T) from 10^4 on, scientific
/// notation for tiny ranges.
fn format_linear_tick(v: f64, step: f64, span: f64) -> String {
    if v.abs() < step * 1e-6 {
        return "0".to_string();
    }
    if span >= 1e4 {
        let exp3 = ((span.log10() / 3.0).floor() as i32).clamp(1, 4);
        let div = 10f64.powi(3 * exp3);
        let suffix = ["k", "M", "G", "T"][(exp3 - 1) as usize];
        return format!("{:.*}{suffix}", decimals(step / div), v / div);
    }
    if span < 1e-3 {
        let e = span.log10().floor() as i32;
        let div = 10f64.powi(e);
        return format!("{:.*}e{e}", decimals(step / div), v / div);
    }
    format!("{:.*}", decimals(step), v)
}

/// Labels a log tick `m * 10^e`.
fn format_log_tick(m: f64, e: i32) -> String {
    let v = m * 10f64.powi(e);
    if e >= 4 {
        let exp3 = (e / 3).clamp(1, 4);
        let suffix = ["k", "M", "G", "T"][(exp3 - 1) as usize];
        if e <= 14 {
            return format!(
                "{:.*}{suffix}",
                decimals(10f64.powi(e - 3 * exp3)),
                v / 10f64.powi(3 * exp3)
            );
        }
    }
    if !(-3..=14).contains(&e) {
        return format!("{m}e{e}");
    }
    format!("{:.*}", decimals(10f64.powi(e)), v)
}

/// A log axis over `values` (finite, positive). `snap` extends the domain to
/// whole decades (y axes); otherwise it is the data range, slightly padded.
pub(super) fn log_axis(values: &[f64], snap: bool) -> Axis {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (mut llo, mut lhi) = (min.log10(), max.log10());
    if snap {
        llo = llo.floor();
        lhi = lhi.ceil();
        if lhi <= llo {
            lhi = llo + 1.0;
        }
    } else {
        if lhi - llo < 1e-9 {
            llo -= 0.3;
            lhi += 0.3;
        }
        let pad = (lhi - llo) * 0.04;
        llo -= pad;
        lhi += pad;
    }
    let decades = lhi - llo;
    let (e_lo, e_hi) = (llo.floor() as i32, lhi.ceil() as i32);
    let inside = |v: f64| v.log10() >= llo - 1e-9 && v.log10() <= lhi + 1e-9;

    let mut ticks: Vec<(f64, String)> = Vec::new();
    let mut minor = Vec::new();
    let every = (decades / 8.0).ceil().max(1.0) as i32;
    let mantissas: &[f64] = if decades <= 2.5 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    for e in e_lo..=e_hi {
        for m in 1..10 {
            let m = f64::from(m);
            let v = m * 10f64.powi(e);
            if !inside(v) {
                continue;
            }
            if mantissas.contains(&m) && (m != 1.0 || (e - e_lo) % every == 0) {
                ticks.push((v, format_log_tick(m, e)));
            } else if decades <= 5.0 {
                minor.push(v);
            }
        }
    }
    if ticks.len() < 2 {
        // Less than a few ticks inside a short span: label every mantissa,
        // and failing that the ends of the domain.
        ticks.clear();
        for e in e_lo..=e_hi {
            for m in 1..10 {
                let v = f64::from(m) * 10f64.powi(e);
                if inside(v) {
                    ticks.push((v, format_log_tick(f64::from(m), e)));
                }
            }
        }
        if ticks.len() < 2 {
            ticks = vec![(min, format_value(min)), (max, format_value(max))];
            ticks.dedup_by(|a, b| a.1 == b.1);
        }
        minor.clear();
    }
    Axis {
        scale: Scale::Log,
        lo: 10f64.powf(llo),
        hi: 10f64.powf(lhi),
        ticks,
        minor,
    }
}

/// A value with about 3 significant digits and SI suffixes, for bar labels.
pub(super) fn format_value(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".to_string();
    }
    let a = v.abs();
    if a == 0.0 {
        return "0".to_string();
    }
    if a >= 1e4 {
        let exp3 = ((a.log10() / 3.0).floor() as i32).clamp(1, 4);
        let div = 10f64.powi(3 * exp3);
        let suffix = ["k", "M", "G", "T"][(exp3 - 1) as usize];
        let scaled = v / div;
        return format!(
            "{}{suffix}",
            trim_zeros(format!("{:.*}", sig_decimals(scaled), scaled))
        );
    }
    if a < 1e-3 {
        return format!("{v:.2e}");
    }
    trim_zeros(format!("{:.*}", sig_decimals(v), v))
}

/// `"5.20"` -> `"5.2"`, `"9.00"` -> `"9"`; integers are left alone.
fn trim_zeros(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Decimals giving 3 significant digits.
fn sig_decimals(v: f64) -> usize {
    let digits = v.abs().log10().floor() as i32 + 1;
    (3 - digits).clamp(0, 6) as usize
}

/// Draws the y axis: grid lines, ticks and labels.
pub(super) fn draw_y_axis(s: &mut String, axis: &Axis, a: Area, y_of: &dyn Fn(f64) -> f64) {
    for &v in &axis.minor {
        let y = y_of(v);
        line(s, a.left - 3.0, y, a.left, y, "#333333", 0.8, "");
    }
    for (v, label) in &axis.ticks {
        let y = y_of(*v);
        line(s, a.left, y, a.right, y, "#e6e6e6", 1.0, "");
        line(s, a.left - 5.0, y, a.left, y, "#333333", 1.0, "");
        text(
            s,
            a.left - 7.0,
            y + 3.5,
            10.0,
            "end",
            "normal",
            "#222222",
            label,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_helpers() {
        assert_eq!(nice_step(10.0, 5.0), 2.0);
        assert_eq!(nice_step(1.0, 5.0), 0.2);
        let ax = linear_axis(&[1.0, 2.0, 3.0, 4.0], false, false, true);
        let labels: Vec<&str> = ax.ticks.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["1", "2", "3", "4"]);
        let ax = linear_axis(&[0.1, 0.7], true, true, false);
        assert_eq!(ax.ticks.first().map(|t| t.1.as_str()), Some("0"));
        assert!(ax.ticks.iter().any(|t| t.1 == "0.2"), "{:?}", ax.ticks);
        let ax = log_axis(&[3.0, 2000.0], true);
        let labels: Vec<&str> = ax.ticks.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["1", "10", "100", "1000", "10k"]);
        let ax = log_axis(&[1.0, 16.0], false);
        let labels: Vec<&str> = ax.ticks.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["1", "2", "5", "10"]);
        let ax = log_axis(&[3.0, 4.0], false);
        assert!(ax.ticks.len() >= 2, "{:?}", ax.ticks);
        let ax = log_axis(&[1e-6, 1e12], true);
        assert!(ax.ticks.len() <= 10, "{:?}", ax.ticks);
        assert_eq!(format_value(1234.0), "1234");
        assert_eq!(format_value(12345.0), "12.3k");
        assert_eq!(format_value(0.5), "0.5");
        assert_eq!(format_value(120.0), "120");
        assert_eq!(format_value(12000.0), "12k");
        assert_eq!(format_value(f64::NAN), "n/a");
        assert_eq!(format_linear_tick(2e-5, 1e-5, 4e-5), "2e-5");
    }
}
