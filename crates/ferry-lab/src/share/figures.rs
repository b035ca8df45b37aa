//! The figures the table, the report's section and its summary share: the share of one run, the
//! goals, and each link rate and competitor over the rounds.

use super::options::{Competitor, Row, FERRY_GOAL, TCP_GOAL};
use crate::stats::median;

/// Whether `share` meets the goal beside `competitor`.
pub(super) fn meets(competitor: Competitor, share: f64) -> bool {
    match competitor {
        Competitor::Tcp => (TCP_GOAL.0..=TCP_GOAL.1).contains(&share),
        Competitor::Ferry => share >= FERRY_GOAL,
    }
}

/// The goal beside `competitor`, in words.
pub(super) fn goal(competitor: Competitor) -> String {
    match competitor {
        Competitor::Tcp => format!("between {} and {}", TCP_GOAL.0, TCP_GOAL.1),
        Competitor::Ferry => format!("at least {FERRY_GOAL}"),
    }
}

/// "0.47", or "-" without one.
pub(super) fn format_share(share: Option<f64>) -> String {
    share.map_or("-".to_owned(), |s| format!("{s:.2}"))
}

/// One link rate and competitor over the rounds: the medians of its runs.
pub(super) struct Case {
    pub(super) link_rate: String,
    pub(super) link_rate_bps: u64,
    pub(super) competitor: Competitor,
    /// The runs it has.
    pub(super) rounds: usize,
    pub(super) ferry_mbps: Option<f64>,
    pub(super) other_mbps: Option<f64>,
    /// The median of the runs' shares.
    pub(super) share: Option<f64>,
}

impl Case {
    /// Whether the median share meets the goal; `None` without one.
    pub(super) fn met(&self) -> Option<bool> {
        self.share.map(|s| meets(self.competitor, s))
    }

    /// One line: the goodputs, the share, the goal and whether it was met.
    pub(super) fn verdict(&self) -> String {
        let mbps = |v: Option<f64>| v.map_or("?".to_owned(), |v| format!("{v:.1}"));
        let over = match self.rounds {
            1 => "1 round".to_owned(),
            n => format!("median of {n} rounds"),
        };
        let met = match self.met() {
            Some(true) => "met",
            Some(false) => "not met",
            None => "unknown (neither flow got anything through)",
        };
        match self.competitor {
            Competitor::Tcp => format!(
                "{}, beside one TCP flow: ferry {} Mbit/s, TCP {} Mbit/s, ferry's share {} ({over}; goal {}): {met}",
                self.link_rate,
                mbps(self.ferry_mbps),
                mbps(self.other_mbps),
                format_share(self.share),
                goal(self.competitor)
            ),
            Competitor::Ferry => format!(
                "{}, two ferry flows: {} and {} Mbit/s, smaller / larger {} ({over}; goal {}): {met}",
                self.link_rate,
                mbps(self.ferry_mbps),
                mbps(self.other_mbps),
                format_share(self.share),
                goal(self.competitor)
            ),
        }
    }
}

/// Every link rate and competitor of `rows`, in the order of their first runs.
pub(super) fn cases(rows: &[Row]) -> Vec<Case> {
    let mut keys: Vec<(&str, Competitor)> = Vec::new();
    for r in rows {
        if !keys.contains(&(r.link_rate.as_str(), r.competitor)) {
            keys.push((r.link_rate.as_str(), r.competitor));
        }
    }
    keys.into_iter()
        .map(|(rate, competitor)| {
            let runs: Vec<&Row> = rows
                .iter()
                .filter(|r| r.link_rate == rate && r.competitor == competitor)
                .collect();
            Case {
                link_rate: rate.to_owned(),
                link_rate_bps: runs[0].link_rate_bps,
                competitor,
                rounds: runs.len(),
                ferry_mbps: median(runs.iter().map(|r| r.ferry_mbps).collect()),
                other_mbps: median(runs.iter().map(|r| r.other_mbps).collect()),
                share: median(runs.iter().filter_map(|r| r.share).collect()),
            }
        })
        .collect()
}

/// The run of `case` to show over time: the one whose share is nearest the median of its runs
/// (the first of those as near: of an even number of runs, the two middle ones are), among the
/// runs that recorded their goodput over time.
pub(super) fn typical<'a>(rows: &'a [Row], case: &Case) -> Option<&'a Row> {
    let runs = rows.iter().filter(|r| {
        r.link_rate == case.link_rate && r.competitor == case.competitor && !r.timeline.is_empty()
    });
    let distance = |r: &Row| match (r.share, case.share) {
        (Some(s), Some(m)) => (s - m).abs(),
        _ => f64::INFINITY,
    };
    runs.fold(None, |best: Option<&Row>, r| match best {
        Some(b) if distance(b) <= distance(r) + 1e-9 => Some(b),
        _ => Some(r),
    })
}
