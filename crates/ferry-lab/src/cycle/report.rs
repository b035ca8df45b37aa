//! The table, the report's section and its summary.

use super::options::Placement;
use super::results::Row;
use crate::stats::median;
use crate::subject::Subject;

/// One line of the cycle plot: transport, CPU budget (None: unlimited), placement, cycle time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Key {
    pub(super) transport: Subject,
    pub(super) cpu: Option<f64>,
    pub(super) placement: Placement,
    pub(super) cycle_ms: f64,
}

impl Key {
    pub(super) fn placement_label(&self) -> String {
        format!(", {}", self.placement.label())
    }
}

/// A CPU budget for a label: "0.3 CPU", or "unlimited CPU".
pub(super) fn cpu_label(cpu: Option<f64>) -> String {
    cpu.map_or("unlimited CPU".to_owned(), |c| format!("{c} CPU"))
}

/// The largest multiplicities per (transport, CPU budget, placement, cycle time), over the
/// repeats, in order of first appearance.
pub(super) fn groups(rows: &[Row]) -> Vec<(Key, Vec<f64>)> {
    let mut groups: Vec<(Key, Vec<f64>)> = Vec::new();
    for r in rows {
        let key = Key {
            transport: r.transport,
            cpu: r.cpu,
            placement: r.placement,
            cycle_ms: r.cycle_ms,
        };
        let m = r.max_multiplicity as f64;
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => g.1.push(m),
            None => groups.push((key, vec![m])),
        }
    }
    groups
}

pub(super) fn median_of(values: &[f64]) -> f64 {
    median(values.to_vec()).unwrap_or(0.0)
}

pub(super) fn range_of(values: &[f64]) -> (f64, f64) {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    (lo, values.iter().copied().fold(lo, f64::max))
}
