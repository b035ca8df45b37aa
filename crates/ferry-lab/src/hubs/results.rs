//! What a run records: its setup and rows.

use super::options::{edge_topic, role_name, Config, Mode, PinMode};
use super::wire::{EdgeCounts, Host, HubReport, Laps, MasterResult, ProcInfo};
use crate::netns::LinkRate;
use crate::subject::Subject;
use ferry::WaitStrategy;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a hubs run was made.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    pub modes: Vec<Mode>,
    pub hubs: usize,
    pub processes: String,
    pub messages: u64,
    pub size_bytes: usize,
    pub size_note: String,
    pub warmup: u64,
    pub rounds: usize,
    pub transports: Vec<Subject>,
    pub transport_descriptions: BTreeMap<String, String>,
    pub topology: String,
    pub delivery: String,
    #[schemars(with = "crate::args::WaitSchema")]
    pub wait: WaitStrategy,
    pub wait_note: String,
    pub roundtrip: String,
    pub flood: String,
    pub probe: String,
    pub hosts: u8,
    /// Two network namespaces on this machine (`--hosts 2` without `--remote`).
    pub two_hosts: Option<TwoHosts>,
    /// Two machines (`--hosts 2 --remote`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteHosts>,
    pub link_rate: Option<String>,
    pub cpu: Option<f64>,
    pub cgroup: CgroupSetup,
    pub placement: Vec<Placement>,
    pub pinning: PinningSetup,
    pub skipped: Vec<Skipped>,
    pub timeouts: Timeouts,
    pub clock: String,
    pub study: String,
    pub started_unix_s: u64,
}

/// One value per side of two hosts.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Sides {
    #[serde(rename = "A")]
    pub a: String,
    #[serde(rename = "B")]
    pub b: String,
}

/// The two network namespaces of `--hosts 2`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct TwoHosts {
    pub namespaces: Sides,
    pub veth: Sides,
    pub subnet: String,
    pub addresses: Sides,
    pub placement: String,
    pub discovery: String,
    pub link_rate: Option<String>,
    pub link_rate_bps: Option<u64>,
    pub tbf: Option<Tbf>,
    pub note: String,
}

/// The rate limit on the veth link.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Tbf {
    pub burst_bytes: u64,
    pub latency_ms: u64,
    pub on: String,
    pub commands: Vec<String>,
}

/// The two machines of `--hosts 2 --remote`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RemoteHosts {
    /// The lab agent that ran side B's processes.
    pub agent: String,
    /// The addresses each side's peer list names the other by.
    pub addresses: Sides,
    pub placement: String,
    pub discovery: String,
}

/// The cgroup version, as the results name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    V1,
    V2,
}

/// The CPU quota's cgroup; the details only when one was used.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct CgroupSetup {
    pub used: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<CgroupVersion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meaning: Option<String>,
}

/// How the processes were placed on CPUs.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct PinningSetup {
    pub mode: PinMode,
    pub available_cpus: Vec<usize>,
    pub summary: String,
    pub note: String,
}

/// Every bound on a wait, in seconds.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Timeouts {
    pub start_s: u64,
    pub lap_or_flood_progress_s: u64,
    pub master_watchdog_s: u64,
    pub exit_s: u64,
    pub close_s: u64,
    pub send_s: u64,
}

/// Where one process of the ring runs.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Placement {
    pub role: String,
    pub index: usize,
    pub host: Host,
    pub cpu: Option<usize>,
}

/// A transport that was not measured, and why.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Skipped {
    pub transport: Subject,
    pub reason: String,
}

/// Whether an edge joins two processes of one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum EdgeLink {
    #[serde(rename = "same host")]
    SameHost,
    #[serde(rename = "across hosts")]
    AcrossHosts,
}

/// The path an edge's messages took, from its subscriber's statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EdgePath {
    Shm,
    Udp,
    Both,
    None,
}

/// One edge of the ring in one run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EdgeRow {
    pub topic: String,
    pub from: String,
    pub to: String,
    pub link: EdgeLink,
    /// shm, udp, both or none: the path the messages took, from the subscriber's statistics.
    pub path: EdgePath,
    pub shm_received: u64,
    pub udp_received: u64,
}

/// One run: a mode and a transport in one round (or a transport that was skipped).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    pub transport: Subject,
    pub mode: Mode,
    pub hubs: usize,
    pub hosts: u8,
    pub size_bytes: usize,
    pub messages: u64,
    pub round: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lap_p50_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lap_p90_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lap_p99_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lap_max_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lap_min_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lap_mean_ns: Option<f64>,
    /// lap p50 / hubs: one edge's share of a lap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop_p50_ns: Option<f64>,
    /// Roundtrip: the recorded laps added up; flood: the completion time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages_per_s: Option<f64>,
    /// Payload bits per second of a flood (messages_per_s × size × 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_mbit_per_s: Option<f64>,
    pub received: Option<u64>,
    pub lost: Option<u64>,
    pub corrupt: Option<u64>,
    pub out_of_order: Option<u64>,
    pub duplicates: Option<u64>,
    /// Why the run stopped early (messages lost), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub link_rate: Option<String>,
    pub cpu: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_periods: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_ms: Option<f64>,
    #[schemars(with = "crate::args::WaitSchema")]
    pub wait: WaitStrategy,
    pub probes: Option<u64>,
    pub edges: Vec<EdgeRow>,
    pub processes: Vec<ProcInfo>,
    pub seconds: Option<f64>,
}

impl Row {
    pub(super) fn empty(config: &Config, transport: Subject, mode: Mode) -> Row {
        Row {
            transport,
            mode,
            hubs: config.hubs,
            hosts: config.hosts,
            size_bytes: config.size,
            messages: config.messages,
            round: None,
            skipped: None,
            lap_p50_ns: None,
            lap_p90_ns: None,
            lap_p99_ns: None,
            lap_max_ns: None,
            lap_min_ns: None,
            lap_mean_ns: None,
            hop_p50_ns: None,
            total_s: None,
            completion_s: None,
            messages_per_s: None,
            payload_mbit_per_s: None,
            received: None,
            lost: None,
            corrupt: None,
            out_of_order: None,
            duplicates: None,
            error: None,
            link_rate: config.link_rate.map(LinkRate::name),
            cpu: config.cpu,
            throttled_periods: None,
            throttled_ms: None,
            wait: config.wait,
            probes: None,
            edges: Vec::new(),
            processes: Vec::new(),
            seconds: None,
        }
    }

    /// Fills in the figures of one run from the master's result and the hubs' reports.
    pub(super) fn measured(
        &mut self,
        master: MasterResult,
        hubs: Vec<HubReport>,
        placement: &[Placement],
        size: usize,
    ) {
        let n = placement.len();
        self.probes = Some(master.probes);
        self.received = Some(master.received);
        self.lost = Some(master.lost);
        self.corrupt = Some(master.corrupt);
        self.out_of_order =
            Some(master.out_of_order + hubs.iter().map(|h| h.out_of_order).sum::<u64>());
        self.duplicates = Some(master.duplicates);
        self.error = master.aborted.clone();
        if let Some(Laps {
            summary: s,
            total_ns,
        }) = master.laps
        {
            self.lap_p50_ns = Some(s.p50_ns);
            self.lap_p90_ns = Some(s.p90_ns);
            self.lap_p99_ns = Some(s.p99_ns);
            self.lap_max_ns = Some(s.max_ns);
            self.lap_min_ns = Some(s.min_ns);
            self.lap_mean_ns = Some(s.mean_ns);
            self.hop_p50_ns = Some(s.p50_ns as f64 / n as f64);
            self.total_s = Some(total_ns as f64 / 1e9);
        }
        if let Some(c) = master.completion_ns {
            let secs = c as f64 / 1e9;
            self.completion_s = Some(secs);
            self.total_s = Some(secs);
            if secs > 0.0 {
                let rate = master.received as f64 / secs;
                self.messages_per_s = Some(rate);
                self.payload_mbit_per_s = Some(rate * size as f64 * 8.0 / 1e6);
            }
        }
        // Edge i runs from process i to process i+1; process j reports its incoming edge j−1.
        let incoming = |j: usize| -> EdgeCounts {
            if j == 0 {
                master.edge_in
            } else {
                hubs.get(j - 1)
                    .map_or_else(EdgeCounts::default, |h| h.edge_in)
            }
        };
        self.edges = (0..n)
            .map(|e| {
                let to = (e + 1) % n;
                let c = incoming(to);
                EdgeRow {
                    topic: edge_topic(e),
                    from: role_name(e),
                    to: role_name(to),
                    link: if placement[e].host == placement[to].host {
                        EdgeLink::SameHost
                    } else {
                        EdgeLink::AcrossHosts
                    },
                    path: match (c.shm_received > 0, c.udp_received > 0) {
                        (true, false) => EdgePath::Shm,
                        (false, true) => EdgePath::Udp,
                        (true, true) => EdgePath::Both,
                        (false, false) => EdgePath::None,
                    },
                    shm_received: c.shm_received,
                    udp_received: c.udp_received,
                }
            })
            .collect();
        self.processes = master
            .process
            .into_iter()
            .chain(hubs.into_iter().map(|h| h.process))
            .collect();
    }
}

// ---------------------------------------------------------------------------------------------
