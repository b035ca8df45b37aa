//! The sentences of the report's section: services beside the ping-pong, ferry beside its peers, the machine's changes of state.

use super::options::{Kind, LatencySubject};
use super::results::Row;
use crate::subject::Subject;
use crate::units::{format_ns, format_size};
use std::fmt::Write as _;

/// " ferry's services (request and response) beside its ping-pong of two topics …": for each
/// service transport that ran, its p50 as a ratio to the ping-pong that waits the same way (the
/// median over rounds) and the nanoseconds it adds at p50, per size; empty when none ran.
pub(super) fn services_beside_ping_pong(rows: &[Row]) -> String {
    let mut parts = Vec::new();
    for t in [Subject::ShmSpinRr, Subject::ShmBlockRr, Subject::Udp4Rr] {
        let Some(base) = t.baseline() else { continue };
        let sizes: Vec<String> = rows
            .iter()
            .filter(|r| r.transport == t)
            .filter_map(|r| {
                let ratio = r.p50_ratio?;
                let own = r.summary.as_ref()?.p50_ns as f64;
                let beside = r.baseline_beside.as_ref()?.p50_ns as f64;
                Some(format!(
                    "{ratio:.2} × at {} ({} {})",
                    format_size(r.size_bytes),
                    if own >= beside { "+" } else { "−" },
                    format_ns((own - beside).abs())
                ))
            })
            .collect();
        if !sizes.is_empty() {
            parts.push(format!(
                "{} against {}: {}",
                t.name(),
                base.name(),
                sizes.join(", ")
            ));
        }
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!(
            " ferry's services (one request and its response per round trip) beside its ping-pong of two topics that waits the same way, p50 as the median ratio over rounds (and the p50 difference): {}.",
            parts.join("; ")
        ),
    }
}

/// " ferry (shm-spin) against iceoryx2, ...": for each other system that ran, where ferry's
/// shared memory that waits the same way (shm-spin; shm-block for iceoryx2-block; its spinning
/// service shm-spin-rr for the request/response of iceoryx2-rr and zenoh-rr) is ahead,
/// level or behind at p50 and p99 (each named where the two differ), with the p99.9 ratio beside
/// them, from the rows; empty when none ran beside it.
pub(super) fn versus_peers(rows: &[Row]) -> String {
    let find = |t: Subject, size: usize| {
        rows.iter()
            .find(|r| r.transport == t && r.size_bytes == size)
            .and_then(|r| r.summary.as_ref())
    };
    let mut out = String::new();
    let mut peers: Vec<Subject> = rows
        .iter()
        .map(|r| r.transport)
        .filter(|t| t.kind() == Kind::Peer)
        .collect();
    peers.dedup();
    for peer in peers {
        let Some(ferry) = peer.ferry_counterpart() else {
            continue;
        };
        // Ahead, level and behind first; then each split of the two percentiles met, in order.
        let mut groups: Vec<(String, Vec<String>)> = ["ahead", "level", "behind"]
            .map(|word| (word.to_owned(), Vec::new()))
            .into();
        for row in rows.iter().filter(|r| r.transport == peer) {
            // ferry as run beside this row (see `Row::baseline_beside`), else its own row.
            let beside = row
                .baseline_beside
                .as_ref()
                .filter(|_| row.baseline == Some(ferry));
            let (Some(theirs), Some(ours)) = (
                row.summary.as_ref(),
                beside.or_else(|| find(ferry, row.size_bytes)),
            ) else {
                continue;
            };
            // p50 as the table gives it (the median over rounds of the ratio in each round)
            // where this row ran beside ferry; p99 from the pooled samples.
            let p50 = row
                .p50_ratio
                .filter(|_| row.baseline == Some(ferry))
                .unwrap_or(theirs.p50_ns as f64 / ours.p50_ns.max(1) as f64);
            let p99 = theirs.p99_ns as f64 / ours.p99_ns.max(1) as f64;
            // Given beside the others, not judged: a few samples in a thousand set it.
            let p999 = theirs.p999_ns as f64 / ours.p999_ns.max(1) as f64;
            // Within 2 % is level. Where the two percentiles disagree, the row says both
            // (a peer faster at p50 and slower at p99 is neither ahead nor level).
            let word = |ratio: f64| match ratio {
                r if r > 1.02 => "ahead",
                r if r < 0.98 => "behind",
                _ => "level",
            };
            let group = match (word(p50), word(p99)) {
                (at50, at99) if at50 == at99 => at50.to_owned(),
                (at50, at99) => format!("{at50} at p50 and {at99} at p99"),
            };
            let i = match groups.iter().position(|(word, _)| *word == group) {
                Some(i) => i,
                None => {
                    groups.push((group, Vec::new()));
                    groups.len() - 1
                }
            };
            groups[i].1.push(format!(
                "{} ({p50:.2} × / {p99:.2} × / {p999:.2} ×)",
                format_size(row.size_bytes)
            ));
        }
        let said: Vec<String> = groups
            .iter()
            .filter(|(_, sizes)| !sizes.is_empty())
            .map(|(word, sizes)| format!("{word} at {}", sizes.join(", ")))
            .collect();
        if !said.is_empty() {
            let _ = write!(
                out,
                " ferry ({}) against {} in the same rounds ({} p50 / p99 / p99.9 over ferry's): {}.",
                ferry.name(),
                peer.name(),
                peer.name(),
                said.join("; ")
            );
        }
    }
    out
}

/// A sentence naming the rows whose rounds ran in different states of the machine (see
/// `state_changes`); empty when there are none.
pub(super) fn state_note(rows: &[Row]) -> String {
    let changed = state_changes(rows);
    if changed.is_empty() {
        return String::new();
    }
    format!(
        "Rounds far apart (one round's p50 more than {STATE_CHANGE} × another's): {}. The machine \
         changed state during the run (a shared virtual machine does), so these rows' pooled \
         figures mix two states; compare them round by round (`rounds` in the JSON), each against \
         the baseline of its own round.",
        changed.join("; ")
    )
}

/// How far apart two rounds of one row may lie (p50 over p50) before the table says that the
/// machine changed state between them. Rounds of a calm machine differ by tens of percent; the
/// development VM's swings are 3–17 ×.
pub(super) const STATE_CHANGE: f64 = 3.0;

/// "raw-spin at 1 MiB (46.5 µs to 468 µs)" for each row whose rounds' p50 lie more than
/// `STATE_CHANGE` times apart.
pub(super) fn state_changes(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .filter_map(|row| {
            let p50 = || row.rounds.iter().map(|r| r.summary.p50_ns);
            let (lo, hi) = (p50().min()?, p50().max()?);
            (hi as f64 > STATE_CHANGE * lo.max(1) as f64).then(|| {
                format!(
                    "{} at {} ({} to {})",
                    row.transport.name(),
                    format_size(row.size_bytes),
                    format_ns(lo as f64),
                    format_ns(hi as f64)
                )
            })
        })
        .collect()
}
