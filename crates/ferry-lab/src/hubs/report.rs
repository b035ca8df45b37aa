//! What the table, the report's section and its summary share.

use super::options::Mode;
use super::results::{EdgePath, Row, Setup};
use crate::stats::median;
use crate::subject::Subject;

/// The hosts of a run, in words: "one host", "two hosts (network namespaces), link 100mbit".
pub(super) fn hosts_text(setup: &Setup) -> String {
    match (setup.hosts, &setup.remote, &setup.link_rate) {
        (2, Some(r), _) => format!(
            "two hosts (this machine and the lab agent's at {})",
            r.agent
        ),
        (2, None, Some(rate)) => format!("two hosts (network namespaces), link {rate}"),
        (2, None, None) => "two hosts (network namespaces), link not limited".to_owned(),
        _ => "one host".to_owned(),
    }
}

pub(super) fn paths(row: &Row) -> String {
    let shm = row.edges.iter().filter(|e| e.path == EdgePath::Shm).count();
    let udp = row.edges.iter().filter(|e| e.path == EdgePath::Udp).count();
    let mut parts = Vec::new();
    if shm > 0 {
        parts.push(format!("{shm} shm"));
    }
    if udp > 0 {
        parts.push(format!("{udp} udp"));
    }
    let other = row.edges.len() - shm - udp;
    if other > 0 {
        parts.push(format!("{other} other"));
    }
    parts.join(", ")
}

/// The median over the rounds of a figure of `mode` and `transport`'s measured rows.
pub(super) fn median_over_rounds(
    rows: &[Row],
    mode: Mode,
    transport: Subject,
    figure: impl Fn(&Row) -> Option<f64>,
) -> Option<f64> {
    median(
        rows.iter()
            .filter(|r| r.mode == mode && r.transport == transport && r.skipped.is_none())
            .filter_map(figure)
            .collect(),
    )
}

/// The transports of the rows, in order of first appearance (skipped ones included: their
/// place in a chart stays empty).
pub(super) fn transports_of(rows: &[Row]) -> Vec<Subject> {
    let mut out: Vec<Subject> = Vec::new();
    for r in rows {
        if !out.contains(&r.transport) {
            out.push(r.transport);
        }
    }
    out
}
