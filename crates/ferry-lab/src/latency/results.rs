//! What a run records: its setup, and its rows with their rounds.

use super::options::Config;
use super::options::LatencySubject;
use super::run::{References, Samples, Warmed};
use crate::stats::{median, ratio};
use crate::subject::Subject;
use crate::{Pinning, Summary};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a latency run was made.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    pub(super) transports: Vec<Subject>,
    pub(super) transport_descriptions: std::collections::BTreeMap<String, String>,
    pub(super) sizes: Vec<usize>,
    pub(super) samples_per_size: usize,
    pub(super) rounds: usize,
    pub(super) warmup: Warmup,
    pub(super) pinning: Pinning,
    pub(super) one_way: String,
    pub(super) clock: String,
    pub(super) processes: String,
    pub(super) ferry: FerryConfig,
    /// Subject and size pairs that were not measured, and why.
    pub(super) skipped: Vec<Skipped>,
    pub(super) started_unix_s: u64,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub(super) struct Skipped {
    pub(super) transport: Subject,
    pub(super) size_bytes: usize,
    pub(super) reason: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub(super) struct Warmup {
    pub(super) min_round_trips: usize,
    pub(super) round_trips_per_size: Vec<usize>,
    pub(super) rule: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub(super) struct FerryConfig {
    pub(super) delivery: String,
    pub(super) max_message_size: usize,
    /// Picked by ferry (`Qos::ring_capacity(0)`).
    pub(super) ring_capacity_bytes: Option<usize>,
    /// The MTU of the UDP transports (1472-byte IPv4 / 1452-byte IPv6 datagrams).
    pub(super) udp_mtu: usize,
    pub(super) send: String,
    pub(super) receive: String,
}

/// One transport at one size.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    pub transport: Subject,
    pub size_bytes: usize,
    /// Absent when the transport cannot carry this size (see `skipped`).
    #[serde(flatten)]
    pub summary: Option<Summary>,
    /// Why this row has no samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The raw baseline of the same family, if it ran.
    pub baseline: Option<Subject>,
    /// The median over the rounds of p50 / the baseline's p50 in the same round.
    pub p50_ratio: Option<f64>,
    /// p50 / the baseline's p50 with all rounds pooled.
    pub p50_ratio_pooled: Option<f64>,
    /// The baseline as this row was compared with, all rounds pooled: in each round its own run,
    /// or the run of it made right after this row (`RoundRow::reference`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_beside: Option<Summary>,
    pub rounds: Vec<RoundRow>,
}

/// One round of a row.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RoundRow {
    pub round: usize,
    #[serde(flatten)]
    pub summary: Summary,
    /// p50 over the baseline's p50 in the same round.
    pub p50_ratio: Option<f64>,
    /// The baseline run again right after this row, because its own run in this round ended
    /// more than 10 s before this row's (the ratio is taken against this run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<Summary>,
    /// Unrecorded round trips before this round's samples (absent in results written before it
    /// was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_round_trips: Option<usize>,
}

pub(super) fn build_rows(
    args: &Config,
    samples: &mut Samples,
    references: &References,
    warmed: &Warmed,
) -> Vec<Row> {
    // Summaries first (by transport, size), then ratios against them.
    let mut overall = Vec::new();
    let mut per_round = Vec::new();
    for by_size in samples.iter_mut() {
        let mut o = Vec::new();
        let mut r = Vec::new();
        for by_round in by_size.iter_mut() {
            r.push(
                by_round
                    .iter_mut()
                    .map(|v| Summary::of(v))
                    .collect::<Vec<_>>(),
            );
            let mut all: Vec<u64> = by_round.concat();
            o.push(Summary::of(&mut all));
        }
        overall.push(o);
        per_round.push(r);
    }
    let index = |t: Subject| args.transports.iter().position(|&x| x == t);
    let mut rows = Vec::new();
    for (ti, &transport) in args.transports.iter().enumerate() {
        let base = transport
            .baseline()
            .and_then(|b| index(b).map(|bi| (b, bi)));
        for (si, &size) in args.sizes.iter().enumerate() {
            if let Some(reason) = transport.cannot_carry(size) {
                rows.push(Row {
                    transport,
                    size_bytes: size,
                    summary: None,
                    skipped: Some(reason),
                    baseline: None,
                    p50_ratio: None,
                    p50_ratio_pooled: None,
                    baseline_beside: None,
                    rounds: Vec::new(),
                });
                continue;
            }
            // A baseline that skipped this size gives no ratio.
            let base = base.filter(|(b, _)| b.cannot_carry(size).is_none());
            let summary = overall[ti][si];
            let refs = references
                .get(ti)
                .and_then(|r| r.get(si))
                .map_or(&[][..], Vec::as_slice);
            let reference = |round: usize| refs.get(round).and_then(Option::as_ref);
            let rounds: Vec<RoundRow> = per_round[ti][si]
                .iter()
                .enumerate()
                .map(|(round, s)| {
                    let reference = reference(round).map(|v| Summary::of(&mut v.clone()));
                    let beside = base.map(|(_, bi)| {
                        reference.map_or(per_round[bi][si][round].p50_ns, |r| r.p50_ns)
                    });
                    RoundRow {
                        round,
                        summary: *s,
                        p50_ratio: beside.and_then(|b| ratio(s.p50_ns, b)),
                        reference,
                        warmup_round_trips: warmed
                            .get(ti)
                            .and_then(|w| w.get(si))
                            .and_then(|w| w.get(round).copied().flatten()),
                    }
                })
                .collect();
            // The baseline's samples this row was compared with, every round pooled.
            let baseline_beside = base.map(|(_, bi)| {
                let mut pooled: Vec<u64> = (0..samples[bi][si].len())
                    .flat_map(|round| {
                        reference(round)
                            .unwrap_or(&samples[bi][si][round])
                            .iter()
                            .copied()
                    })
                    .collect();
                Summary::of(&mut pooled)
            });
            rows.push(Row {
                transport,
                size_bytes: size,
                summary: Some(summary),
                skipped: None,
                baseline: base.map(|(b, _)| b),
                p50_ratio: median(rounds.iter().filter_map(|r| r.p50_ratio).collect()),
                p50_ratio_pooled: baseline_beside.and_then(|b| ratio(summary.p50_ns, b.p50_ns)),
                baseline_beside,
                rounds,
            });
        }
    }
    rows
}
