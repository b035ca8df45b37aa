//! What the hub processes report, and the control lines between them and the main process.

use super::options::{
    edge_topic, role_name, Mode, HEADER, MAX_HUBS, MAX_MESSAGES, MAX_PEERS, MAX_SIZE, SUBJECTS,
};
use crate::error::{bail, Result};
use crate::subject::Subject;
use ferry::WaitStrategy;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::net::SocketAddrV4;

/// Which host a process runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Host {
    /// Every process on one host.
    #[serde(rename = "local")]
    Local,
    /// The master's side of two hosts.
    A,
    /// The other side.
    B,
}

/// Where one process ran.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ProcInfo {
    pub role: String,
    pub index: usize,
    /// `local` (one host), or `A` / `B` (two hosts).
    pub host: Host,
    pub pid: u32,
    /// The CPU it was pinned to, if any.
    pub pinned_cpu: Option<usize>,
    /// The CPUs it was allowed to run on.
    pub allowed_cpus: Vec<usize>,
    /// The CPU its main thread ran on when it reported.
    pub last_cpu: usize,
    /// CPU time of the whole process (user + system, /proc/self/stat, 10 ms resolution).
    pub cpu_s: Option<f64>,
}

pub(super) fn own_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // USER_HZ, which Linux fixes at 100 for /proc.
    Some((utime + stime) as f64 / 100.0)
}

pub(super) fn process_info(args: &PeerRequest) -> ProcInfo {
    ProcInfo {
        role: role_name(args.index),
        index: args.index,
        host: args.host,
        pid: std::process::id(),
        pinned_cpu: args.cpu,
        allowed_cpus: crate::allowed_cpus(),
        last_cpu: crate::os::current_cpu(),
        cpu_s: own_cpu_seconds(),
    }
}

/// What a process's subscriber received on its incoming edge, by path (from the topic's
/// statistics): shows which transport `auto` picked.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub(super) struct EdgeCounts {
    pub(super) shm_received: u64,
    pub(super) udp_received: u64,
}

pub(super) fn edge_counts(domain: &str, edge: usize) -> EdgeCounts {
    let me = std::process::id();
    let mut c = EdgeCounts::default();
    if let Ok(Some(t)) = ferry::admin::topic(domain, &edge_topic(edge)) {
        for s in t.subscribers.iter().filter(|s| s.pid == me) {
            if s.udp.is_some() {
                c.udp_received += s.received;
            } else {
                c.shm_received += s.received;
            }
        }
    }
    c
}

/// Lap statistics, computed in the master: the laps' percentiles and their sum.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct Laps {
    #[serde(flatten)]
    pub(super) summary: crate::Summary,
    pub(super) total_ns: u64,
}

impl Laps {
    pub(super) fn of(laps: &mut [u64]) -> Laps {
        let total_ns = laps.iter().sum();
        Laps {
            summary: crate::Summary::of(laps),
            total_ns,
        }
    }
}

/// The master's result of one run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct MasterResult {
    pub(super) probes: u64,
    pub(super) laps: Option<Laps>,
    pub(super) completion_ns: Option<u64>,
    /// Recorded messages that came back (distinct, in range).
    pub(super) received: u64,
    pub(super) lost: u64,
    pub(super) corrupt: u64,
    pub(super) out_of_order: u64,
    pub(super) duplicates: u64,
    /// Messages that were not expected at that point (another phase, a stale probe).
    pub(super) unexpected: u64,
    /// Why the run stopped early, if it did.
    pub(super) aborted: Option<String>,
    pub(super) edge_in: EdgeCounts,
    pub(super) process: Option<ProcInfo>,
}

/// A hub's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct HubReport {
    pub(super) forwarded: u64,
    /// Non-probe messages that did not follow the previous one in sequence.
    pub(super) out_of_order: u64,
    pub(super) edge_in: EdgeCounts,
    pub(super) process: ProcInfo,
}

/// What the main process tells a hub process (after its peer request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Command {
    /// Attach (sent once the process is where it must be, in the cgroup for one).
    Go,
    /// The master only: measure.
    Start,
}

/// What a hub process tells the main process.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Report {
    /// Attached: its publisher knows the next process's subscriber.
    Ready,
    /// The master: so many laps or messages so far (the main process's watchdog).
    Progress(u64),
    /// The master's result.
    Result(Box<MasterResult>),
    /// A hub's report, once the main process ended the run.
    Hub(HubReport),
}

// ---------------------------------------------------------------------------------------------

/// What the main process asks of one hub process.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerRequest {
    pub(super) index: usize,
    pub(super) hubs: usize,
    pub(super) mode: Mode,
    pub(super) transport: Subject,
    pub(super) domain: String,
    pub(super) size: usize,
    pub(super) messages: u64,
    pub(super) warmup: u64,
    pub(super) wait: WaitStrategy,
    pub(super) host: Host,
    pub(super) cpu: Option<usize>,
    pub(super) exit_after: Option<u64>,
    /// On two hosts: where the other side's discovery listens; `None`: this host only.
    pub(super) discovery: Option<Discovery>,
}

impl PeerRequest {
    /// Refuses a request that no main process of this lab sends (every figure in it bounds an
    /// allocation or a loop).
    pub(super) fn check(&self) -> Result<()> {
        SUBJECTS.check("transport", &[self.transport])?;
        if !(2..=MAX_HUBS).contains(&self.hubs) || self.index >= self.hubs {
            bail!(
                "invalid hub request: index {} of {} hubs",
                self.index,
                self.hubs
            );
        }
        if !(HEADER..=MAX_SIZE).contains(&self.size) {
            bail!("invalid hub request: {} bytes per message", self.size);
        }
        if !(1..=MAX_MESSAGES).contains(&self.messages) || self.warmup > MAX_MESSAGES {
            bail!(
                "invalid hub request: {} messages after {} of warm-up",
                self.messages,
                self.warmup
            );
        }
        if let Some(d) = &self.discovery {
            if d.port == 0 || d.peers.is_empty() || d.peers.len() > MAX_PEERS {
                bail!(
                    "invalid hub request: discovery on port {} with {} peers",
                    d.port,
                    d.peers.len()
                );
            }
        }
        Ok(())
    }
}

/// The discovery settings of a hub process on two hosts: the other side's address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Discovery {
    pub(super) port: u16,
    pub(super) peers: Vec<SocketAddrV4>,
}
