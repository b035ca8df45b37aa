//! The lab's statistics, in one place: percentile summaries of samples, medians of ratios, and
//! ratios to a baseline.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Percentiles of a set of samples, in nanoseconds (nearest rank: the value below which the
/// given share of the samples lies).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    pub samples: usize,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
}

impl Summary {
    /// Sorts `samples` and summarises them.
    pub fn of(samples: &mut [u64]) -> Summary {
        samples.sort_unstable();
        let n = samples.len();
        let at = |q: f64| -> u64 {
            if n == 0 {
                return 0;
            }
            let rank = (q * n as f64).ceil() as usize;
            samples[rank.clamp(1, n) - 1]
        };
        let sum: u128 = samples.iter().map(|&s| s as u128).sum();
        Summary {
            samples: n,
            min_ns: samples.first().copied().unwrap_or(0),
            p50_ns: at(0.50),
            p90_ns: at(0.90),
            p99_ns: at(0.99),
            p999_ns: at(0.999),
            max_ns: samples.last().copied().unwrap_or(0),
            mean_ns: if n == 0 { 0.0 } else { sum as f64 / n as f64 },
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count); `None` when empty.
/// NaNs sort last (`total_cmp`), so one bad value cannot make the median meaningless.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// `a / b`, or `None` when the baseline `b` is zero.
pub fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// `a / b` for rates and other real figures, or `None` when `b` is not positive.
pub fn ratio_f(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a.is_finite()).then(|| a / b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let mut v: Vec<u64> = (1..=1000).rev().collect();
        let s = Summary::of(&mut v);
        assert_eq!(s.samples, 1000);
        assert_eq!((s.min_ns, s.p50_ns, s.p90_ns), (1, 500, 900));
        assert_eq!((s.p99_ns, s.p999_ns, s.max_ns), (990, 999, 1000));
        assert_eq!(s.mean_ns, 500.5);
        let one = Summary::of(&mut [7]);
        assert_eq!((one.p50_ns, one.p999_ns, one.max_ns), (7, 7, 7));
        assert_eq!(Summary::of(&mut []).samples, 0);
    }

    #[test]
    fn medians_and_ratios() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![1.0, f64::NAN, 2.0]), Some(2.0));
        assert_eq!(ratio(3, 0), None);
        assert_eq!(ratio(3, 2), Some(1.5));
        assert_eq!(ratio_f(1.0, 0.0), None);
        assert_eq!(ratio_f(f64::INFINITY, 1.0), None);
    }
}
