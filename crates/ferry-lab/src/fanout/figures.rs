//! The figures the table, the report's section and its summary share: each round's two runs set
//! side by side, and the ratio over the rounds.

use super::options::{mean, Configuration, Row};
use crate::stats::{median, ratio_f};

/// The goal: beside the slow subscriber, the others get at least this share of what they get
/// alone.
pub(super) const GOAL: f64 = 0.9;

/// One round: the fast subscribers' messages alone and beside the slow subscriber.
pub(super) struct Round {
    pub(super) round: usize,
    /// Messages sent per run (the first of the round's runs).
    pub(super) sent: u64,
    /// The fast subscribers' mean messages alone.
    pub(super) alone: Option<f64>,
    /// The same beside the slow subscriber.
    pub(super) with_slow: Option<f64>,
    /// Messages the slow subscriber read.
    pub(super) slow_received: Option<u64>,
    /// Messages the publisher left a subscriber out of, beside the slow subscriber.
    pub(super) left_out: Option<u64>,
}

impl Round {
    /// What the fast subscribers get beside the slow one, as a share of what they get alone.
    pub(super) fn ratio(&self) -> Option<f64> {
        ratio_f(self.with_slow?, self.alone?)
    }
}

/// The rounds of `rows`, in order.
pub(super) fn rounds(rows: &[Row]) -> Vec<Round> {
    let mut numbers: Vec<usize> = rows.iter().map(|r| r.round).collect();
    numbers.sort_unstable();
    numbers.dedup();
    numbers
        .into_iter()
        .map(|round| {
            let find = |c: Configuration| {
                rows.iter()
                    .find(|r| r.round == round && r.configuration == c)
            };
            let alone = find(Configuration::Alone);
            let with_slow = find(Configuration::WithSlow);
            Round {
                round,
                sent: alone.or(with_slow).map_or(0, |r| r.sent),
                alone: alone.and_then(|r| mean(&r.fast_received)),
                with_slow: with_slow.and_then(|r| mean(&r.fast_received)),
                slow_received: with_slow.map(|r| r.slow_received),
                left_out: with_slow.map(|r| r.left_out),
            }
        })
        .collect()
}

/// The median over the rounds of [`Round::ratio`].
pub(super) fn median_ratio(rows: &[Row]) -> Option<f64> {
    median(rounds(rows).iter().filter_map(Round::ratio).collect())
}

/// Which rounds [`median_ratio`] is of: "median of 3 rounds", or "1 round".
pub(super) fn over_rounds(rows: &[Row]) -> String {
    match rounds(rows).iter().filter(|r| r.ratio().is_some()).count() {
        1 => "1 round".to_owned(),
        n => format!("median of {n} rounds"),
    }
}

/// "0.97 ×", or "? ×" without a round that measured both.
pub(super) fn format_ratio(ratio: Option<f64>) -> String {
    ratio.map_or("? ×".to_owned(), |r| format!("{r:.2} ×"))
}

/// How fast the slow subscriber reads: "1/10 of the rate".
pub(super) fn pace(slowdown: f64) -> String {
    format!("1/{slowdown} of the rate")
}
