//! `ferry lab hubs` (the DDS performance study of the DDS-Demonstrators project): the Roundtrip and
//! Flood demonstrators over a ring of hub processes — a master and `--hubs − 1` others (4 in all by
//! default, as in the study), each its own process, joined in a ring by one ferry topic per edge:
//! `hubs/edge0` (master → hub 1), `hubs/edge1` (hub 1 → hub 2), …, `hubs/edge{N−1}` (hub N−1 →
//! master). Delivery is reliable.
//!
//! - **roundtrip**: the master sends one message and waits until it has come back through every
//!   hub; a lap is the time from before the master writes the message until it has it back and
//!   has checked every byte. `--messages` recorded laps per round (after `--warmup` unrecorded).
//! - **flood**: the master pushes `--messages` messages into the ring back to back (a sender
//!   thread, held back only by ferry's reliable back-pressure) while its main thread takes them
//!   back; every hub forwards each message as soon as it has it. Completion time: from the first
//!   send until the master has every message back. Every message is checked: intact (every
//!   byte), in order, none twice; what never came back is counted as lost.
//! - Hubs copy each message into a loan of their outgoing topic and send it; they check the
//!   order of what passes through, the master checks every byte.
//! - Every process waits with `WaitStrategy::Block` by default: the processes outnumber the
//!   CPUs (4 on 2 here), and a waiter that spins holds the CPU the next hub needs.
//! - Before measuring, the master sends probes around the ring until one comes back, so every
//!   edge is known to be connected (a reliable publisher serves a subscriber from the moment it
//!   knows it).
//! - Every hub, the master included, is a peer process of the lab ([`crate::peer`]): the main
//!   process starts them, tells them to go (`go`, after moving them into the cgroup, if any) and
//!   the master to start (`start`), reads their reports (`ready`, the master's `progress` and
//!   `result`, each hub's `hub` report) and ends the run by closing their input.
//! - `--hosts 2`: two network namespaces joined by a veth pair ([`crate::netns`], a private
//!   10.203.x.0/24 inside them), the master and the even hubs in one, the odd hubs in the other
//!   (the study's "2 nodes": master and hub 2 on machine A, hubs 1 and 3 on machine B).
//!   Processes find the other side's endpoints through ferry's static peer list (`FERRY_PEERS`:
//!   the other side's address, port 7651; in each namespace one process relays the
//!   announcements to the others); multicast discovery stays off. The peer request carries the
//!   list, and each hub process sets it for itself before its first endpoint. `--link-rate` puts
//!   a `tc tbf` on both veth ends. The namespaces are removed on every exit path (error and
//!   Ctrl-C included).
//! - `--hosts 2 --remote HOST[:PORT]`: two real machines instead: the master and the even hubs
//!   run on this one, the odd hubs on the machine of the `ferry lab agent` at HOST, started
//!   through it; each side's peer list names the other machine (the agent's address, and this
//!   machine's address on the route there).
//! - `--cpu Q`: every hub process (the master included) runs in one cgroup with a CFS quota of Q
//!   CPUs, standing in for slower CPUs (the study scaled the CPU frequency).
//! - Transports run in interleaved rounds (shm udp auto shm udp auto …); each round is a row.
//! - Every wait is bounded; a hub that dies is reported by name; children are killed and
//!   reaped on every exit path.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, ToSocketAddrs};
use std::time::{Duration, Instant};

use ferry::{Delivery, Publisher, Qos, Subscriber, WaitStrategy};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::cgroup::{self, CpuGroup};
use super::Dir;
use crate::chart::{bar_svg, color, Bars, Plot, Section, SummaryLine};
use crate::error::{bail, note, Context, Error, Result};
use crate::experiment::{Experiment, Measured, Results};
use crate::netns::{self, LinkRate};
use crate::peer::{Peer, PeerLink, Place, MAIN_GONE};
use crate::signal;
use crate::stats::median;
use crate::studies::{cite, cite_first, DDS_HUBS};
use crate::subject::{Subject, Subjects};
use crate::table::Table;
use crate::units::{format_ns, format_size};

pub use crate::netns::parse_link_rate;

// ---------------------------------------------------------------------------------------------
// Options

crate::choice! {
    pub enum Mode: "mode" {
        Roundtrip = "roundtrip",
        Flood = "flood",
    }
}

/// What this experiment measures, in the order its help lists them.
pub const SUBJECTS: Subjects = Subjects(&[Subject::Shm, Subject::Udp4, Subject::Auto]);

/// How a ring's edges carry messages, for the report.
fn describe(transport: Subject) -> &'static str {
    match transport {
        Subject::Shm => "ferry shared memory on every edge",
        Subject::Udp4 => "ferry UDP over IPv4 on every edge (MTU 1500: 1472-byte datagrams)",
        Subject::Auto => {
            "ferry auto: shared memory where both ends of an edge share a host (network \
             namespace), UDP where they do not"
        }
        _ => "not one of this experiment's transports",
    }
}

/// ferry's QoS on every edge: reliable, the run's wait, loans of `size` bytes; UDP at MTU 1500.
fn qos(transport: Subject, size: usize, wait: WaitStrategy) -> Result<Qos> {
    let Some(q) = transport.qos(wait) else {
        bail!("hubs: {transport} is not a ferry transport");
    };
    let q = q
        .delivery(Delivery::Reliable)
        .max_message_size(size)
        .send_timeout(SEND_TIMEOUT);
    Ok(match transport.transport() {
        Some(ferry::Transport::Shm) => q,
        _ => q.mtu(UDP_MTU),
    })
}

crate::choice! {
    /// `--pin`: spread the processes over the CPUs this process may use, or leave them to the
    /// scheduler.
    pub enum PinMode: "pinning" {
        Spread = "spread",
        None = "none",
    }
}

/// A link rate in a configuration: its name (`100mbit`).
mod rate_text {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::netns::{parse_link_rate, LinkRate};

    pub fn serialize<S: Serializer>(rate: &Option<LinkRate>, s: S) -> Result<S::Ok, S::Error> {
        rate.map(LinkRate::name).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<LinkRate>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| parse_link_rate(&text).map_err(D::Error::custom))
            .transpose()
    }
}

/// What `ferry lab hubs` is asked to measure.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Modes, in the order each round runs them.
    pub mode: Vec<Mode>,
    /// Processes in the ring, the master included.
    pub hubs: usize,
    /// Recorded laps per round (roundtrip) or messages per flood.
    pub messages: u64,
    /// Message size in bytes.
    pub size: usize,
    /// Transports, in the order each round runs them.
    pub transport: Vec<Subject>,
    /// Interleaved rounds: every round runs every mode and transport once, each a fresh ring.
    pub rounds: usize,
    /// Unrecorded laps (roundtrip) or messages of an unrecorded flood before each measurement.
    pub warmup: u64,
    /// 1: every process on this host; 2: the master and the even hubs on one host, the odd hubs
    /// on another (two network namespaces, or with `remote` two machines).
    pub hosts: u8,
    /// With two namespaces: the veth link's rate (`100mbit`); `None`: not limited.
    #[serde(with = "rate_text")]
    #[schemars(with = "Option<String>")]
    pub link_rate: Option<LinkRate>,
    /// A CPU quota (in CPUs) over every hub process together; `None`: no quota.
    pub cpu: Option<f64>,
    /// How every process waits for a message.
    #[schemars(with = "crate::args::WaitSchema")]
    pub wait: WaitStrategy,
    /// Where the processes run: spread over the CPUs this process may use, or not pinned.
    pub pin: PinMode,
    /// With `hosts` 2: the `ferry lab agent` (`HOST[:PORT]`) whose machine runs the odd hubs,
    /// instead of a network namespace here.
    pub remote: Option<String>,
    /// Testing: hub 1 exits (status 3) after forwarding this many messages.
    pub fault_hub_exit_after: Option<u64>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mode: vec![Mode::Roundtrip],
            hubs: 4,
            messages: 1000,
            size: 256,
            transport: vec![Subject::Shm, Subject::Udp4],
            rounds: 3,
            warmup: 100,
            hosts: 1,
            link_rate: None,
            cpu: None,
            wait: WaitStrategy::Block,
            pin: PinMode::Spread,
            remote: None,
            fault_hub_exit_after: None,
        }
    }
}

/// The experiment (see the module's documentation).
pub struct Hubs;

/// ferry's UDP transport is given this MTU (1472-byte IPv4 datagrams).
const UDP_MTU: usize = 1500;
/// The smallest message: the 16-byte header (sequence number, phase).
const HEADER: usize = 16;
const MAX_SIZE: usize = 64 << 20;
const MAX_HUBS: usize = 16;
/// The most messages of a round (and of its warm-up).
const MAX_MESSAGES: u64 = 10_000_000;
/// How long processes may take to start, attach, find each other (across hosts: discovery
/// every 0.5 s) and pass a first probe around the ring.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the master waits for a lap, or for any progress of a flood.
const LAP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the main process lets the master run without a progress report.
const WATCHDOG: Duration = Duration::from_secs(30);
/// How long processes may take to report and exit once told to.
const EXIT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a process may take to close its ends at the end of a run.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// A reliable publisher waits at most this long for room.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one wait lasts before a waiter looks around (partner, main process, deadline).
const SLICE: Duration = Duration::from_millis(50);
/// The master sends a probe this often until one comes back.
const PROBE_EVERY: Duration = Duration::from_millis(100);
/// The master reports progress this often (the main process's watchdog).
const PROGRESS_EVERY: Duration = Duration::from_millis(500);
/// How often the main process looks at its hubs while it waits for them.
const LOOK_EVERY: Duration = Duration::from_millis(5);
/// The discovery port on two hosts (one per host or namespace).
const DISCOVERY_PORT: u16 = 7651;
/// The most addresses a peer request's peer list may hold (it holds one).
const MAX_PEERS: usize = 4;
/// The namespaces of `--hosts 2` are named after this (and the process id).
const NS_PREFIX: &str = "ferry-hubs-";

fn edge_topic(edge: usize) -> String {
    format!("hubs/edge{edge}")
}

fn role_name(index: usize) -> String {
    if index == 0 {
        "master".to_owned()
    } else {
        format!("hub {index}")
    }
}

// ---------------------------------------------------------------------------------------------
// Messages: [seq u64][phase u64][payload of the pattern byte of (phase, seq)]

const PROBE: u64 = 1;
const WARMUP: u64 = 2;
const DATA: u64 = 3;

fn pattern_of(phase: u64, seq: u64) -> u8 {
    super::pattern(seq.wrapping_add(phase << 40), Dir::Ping)
}

fn write_message(buf: &mut [u8], phase: u64, seq: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..HEADER].copy_from_slice(&phase.to_le_bytes());
    super::fill(&mut buf[HEADER..], pattern_of(phase, seq));
}

/// (phase, seq) of a message, if it has a header.
fn header(buf: &[u8]) -> Option<(u64, u64)> {
    let seq = u64::from_le_bytes(buf.get(..8)?.try_into().ok()?);
    let phase = u64::from_le_bytes(buf.get(8..HEADER)?.try_into().ok()?);
    Some((phase, seq))
}

/// Whether every byte of message (phase, seq) is right and it has `size` bytes.
fn intact(buf: &[u8], size: usize, phase: u64, seq: u64) -> bool {
    buf.len() == size && super::check(&buf[HEADER..], pattern_of(phase, seq))
}

fn send(out: &mut Publisher, size: usize, phase: u64, seq: u64) -> Result<()> {
    let mut loan = out.loan(size)?;
    write_message(loan.as_mut_slice(), phase, seq);
    loan.send()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// What the processes report, and the control lines

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

fn own_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // USER_HZ, which Linux fixes at 100 for /proc.
    Some((utime + stime) as f64 / 100.0)
}

fn process_info(args: &PeerRequest) -> ProcInfo {
    ProcInfo {
        role: role_name(args.index),
        index: args.index,
        host: args.host,
        pid: std::process::id(),
        pinned_cpu: args.cpu,
        allowed_cpus: super::allowed_cpus(),
        last_cpu: crate::os::current_cpu(),
        cpu_s: own_cpu_seconds(),
    }
}

/// What a process's subscriber received on its incoming edge, by path (from the topic's
/// statistics): shows which transport `auto` picked.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct EdgeCounts {
    shm_received: u64,
    udp_received: u64,
}

fn edge_counts(domain: &str, edge: usize) -> EdgeCounts {
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

/// Lap statistics, computed in the master.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Laps {
    samples: usize,
    min_ns: u64,
    p50_ns: u64,
    p90_ns: u64,
    p99_ns: u64,
    max_ns: u64,
    mean_ns: f64,
    total_ns: u64,
}

impl Laps {
    fn of(laps: &mut [u64]) -> Laps {
        let total_ns = laps.iter().sum();
        let s = super::Summary::of(laps);
        Laps {
            samples: s.samples,
            min_ns: s.min_ns,
            p50_ns: s.p50_ns,
            p90_ns: s.p90_ns,
            p99_ns: s.p99_ns,
            max_ns: s.max_ns,
            mean_ns: s.mean_ns,
            total_ns,
        }
    }
}

/// The master's result of one run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct MasterResult {
    probes: u64,
    laps: Option<Laps>,
    completion_ns: Option<u64>,
    /// Recorded messages that came back (distinct, in range).
    received: u64,
    lost: u64,
    corrupt: u64,
    out_of_order: u64,
    duplicates: u64,
    /// Messages that were not expected at that point (another phase, a stale probe).
    unexpected: u64,
    /// Why the run stopped early, if it did.
    aborted: Option<String>,
    edge_in: EdgeCounts,
    process: Option<ProcInfo>,
}

/// A hub's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct HubReport {
    forwarded: u64,
    /// Non-probe messages that did not follow the previous one in sequence.
    out_of_order: u64,
    edge_in: EdgeCounts,
    process: ProcInfo,
}

/// What the main process tells a hub process (after its peer request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Command {
    /// Attach (sent once the process is where it must be, in the cgroup for one).
    Go,
    /// The master only: measure.
    Start,
}

/// What a hub process tells the main process.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Report {
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
// Results

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
    fn empty(config: &Config, transport: Subject, mode: Mode) -> Row {
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
    fn measured(
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
        if let Some(l) = master.laps {
            self.lap_p50_ns = Some(l.p50_ns);
            self.lap_p90_ns = Some(l.p90_ns);
            self.lap_p99_ns = Some(l.p99_ns);
            self.lap_max_ns = Some(l.max_ns);
            self.lap_min_ns = Some(l.min_ns);
            self.lap_mean_ns = Some(l.mean_ns);
            self.hop_p50_ns = Some(l.p50_ns as f64 / n as f64);
            self.total_s = Some(l.total_ns as f64 / 1e9);
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
// The main process

/// Which side of the two hosts process `index` runs on: the master and the even hubs on A.
fn side_of(index: usize) -> usize {
    index % 2
}

/// The other machine of `--remote`, and how each side names the other.
#[derive(Debug, Clone)]
struct Remote {
    /// The agent, as given (`HOST[:PORT]`).
    agent: String,
    /// This machine's address on the route to the agent (side A).
    here: Ipv4Addr,
    /// The agent's address (side B).
    there: Ipv4Addr,
}

impl Remote {
    fn resolve(agent: &str) -> Result<Remote> {
        let address = crate::peer::with_default_port(agent);
        let target = address
            .to_socket_addrs()
            .context(format!("--remote {agent}"))?
            .find_map(|a| match a {
                std::net::SocketAddr::V4(v4) => Some(v4),
                std::net::SocketAddr::V6(_) => None,
            })
            .ok_or_else(|| {
                Error::msg(format!(
                    "--remote {agent}: the hubs find each other through ferry's discovery, which \
                     runs over IPv4; give the agent's IPv4 address (or a name that has one)"
                ))
            })?;
        let here = match crate::peer::local_address_towards(&target.to_string())? {
            std::net::IpAddr::V4(v4) => v4,
            std::net::IpAddr::V6(v6) => bail!(
                "--remote {agent}: this machine reaches it from the IPv6 address {v6}, and ferry's \
                 discovery runs over IPv4"
            ),
        };
        Ok(Remote {
            agent: agent.to_owned(),
            here,
            there: *target.ip(),
        })
    }
}

/// The discovery settings of a hub process on two hosts: the other side's address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Discovery {
    port: u16,
    peers: Vec<SocketAddrV4>,
}

struct Ctx<'a> {
    config: &'a Config,
    /// Two namespaces here (`--hosts 2`).
    pair: Option<&'a netns::Pair>,
    /// Two machines (`--hosts 2 --remote`).
    remote: Option<&'a Remote>,
    placement: Vec<Placement>,
}

impl Ctx<'_> {
    /// The addresses of sides A and B, on two hosts.
    fn addresses(&self) -> Option<[Ipv4Addr; 2]> {
        match (self.pair, self.remote) {
            (Some(p), _) => Some(p.addr),
            (None, Some(r)) => Some([r.here, r.there]),
            (None, None) => None,
        }
    }

    /// What process `index` is told about discovery: on two hosts, the other side's address.
    fn discovery_of(&self, index: usize) -> Option<Discovery> {
        let addr = self.addresses()?;
        Some(Discovery {
            port: DISCOVERY_PORT,
            peers: vec![SocketAddrV4::new(addr[1 - side_of(index)], DISCOVERY_PORT)],
        })
    }

    /// Where process `index` runs.
    fn place_of(&self, index: usize) -> Place {
        match (self.pair, self.remote) {
            (Some(p), _) => p.place(side_of(index)),
            (None, Some(r)) if side_of(index) == 1 => Place::remote(Some(&r.agent)),
            _ => Place::local(),
        }
    }
}

/// Why transport `t` is not measured under `config`, if it is not.
fn skip_reason(config: &Config, t: Subject) -> Option<String> {
    (config.hosts == 2 && t == Subject::Shm).then(|| {
        format!(
            "skipped: shared memory cannot join processes on two hosts ({}); use udp or auto",
            match config.remote {
                None => "the namespaces stand for two machines",
                Some(_) => "this machine and the lab agent's",
            }
        )
    })
}

fn placement(args: &Config) -> Vec<Placement> {
    let allowed = super::allowed_cpus();
    (0..args.hubs)
        .map(|i| {
            let host = match args.hosts {
                2 => [Host::A, Host::B][side_of(i)],
                _ => Host::Local,
            };
            // A remote process's CPUs are its machine's business.
            let here = args.remote.is_none() || host != Host::B;
            Placement {
                role: role_name(i),
                index: i,
                host,
                cpu: match args.pin {
                    PinMode::Spread if here && !allowed.is_empty() => {
                        Some(allowed[i % allowed.len()])
                    }
                    _ => None,
                },
            }
        })
        .collect()
}

fn describe_placement(placement: &[Placement]) -> String {
    let allowed = super::allowed_cpus();
    let mut by_cpu: BTreeMap<usize, Vec<&str>> = Default::default();
    for p in placement {
        if let Some(c) = p.cpu {
            by_cpu.entry(c).or_default().push(&p.role);
        }
    }
    let share = format!(
        "{} processes share {} CPU{} ({})",
        placement.len(),
        allowed.len(),
        if allowed.len() == 1 { "" } else { "s" },
        allowed
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    if by_cpu.is_empty() {
        return format!("{share}; not pinned (the scheduler places them)");
    }
    let per: Vec<String> = by_cpu
        .iter()
        .map(|(cpu, roles)| format!("CPU {cpu}: {}", roles.join(", ")))
        .collect();
    format!("{share}; pinned: {}", per.join("; "))
}

/// The two namespaces of `--hosts 2`, with what this machine lacks for them said in terms of
/// the options.
fn make_pair(rate: Option<LinkRate>) -> Result<netns::Pair> {
    let mut missing = netns::missing(rate.is_some());
    if !missing.is_empty() {
        if let Some(root) = missing.iter_mut().find(|m| m.starts_with("root")) {
            root.push_str(
                "; run as root, or use --hosts 1, or --remote with a lab agent on another machine",
            );
        }
        bail!("--hosts 2 needs {}", missing.join("; and "));
    }
    netns::Pair::create(&netns::Spec {
        prefix: NS_PREFIX,
        device: "fhub",
        net: 203,
        rate,
    })
}

fn summarize(row: &Row) -> String {
    let what = match (row.lap_p50_ns, row.completion_s) {
        (Some(p50), _) => format!(
            "lap p50 {} (p99 {}, {} hops)",
            format_ns(p50 as f64),
            format_ns(row.lap_p99_ns.unwrap_or(0) as f64),
            row.hubs
        ),
        (None, Some(c)) => format!(
            "completion {} ({:.0} messages/s)",
            format_ns(c * 1e9),
            row.messages_per_s.unwrap_or(0.0)
        ),
        _ => "no figures".to_owned(),
    };
    format!(
        "{:<5} {:<9} {what}, {} lost{}, {:.1} s",
        row.transport.name(),
        row.mode.name(),
        row.lost.unwrap_or(0),
        row.error
            .as_ref()
            .map_or(String::new(), |e| format!(" ({e})")),
        row.seconds.unwrap_or(0.0)
    )
}

fn two_hosts_of(pair: &netns::Pair) -> TwoHosts {
    let sides = |v: &[String; 2]| Sides {
        a: v[0].clone(),
        b: v[1].clone(),
    };
    TwoHosts {
        namespaces: sides(&pair.ns),
        veth: sides(&pair.dev),
        subnet: pair.subnet.clone(),
        addresses: sides(&pair.addr.map(|a| a.to_string())),
        placement: "the master and the even hubs on A, the odd hubs on B (the study's 2 nodes: master and hub 2 on machine A, hubs 1 and 3 on machine B); the processes are started with ip netns exec".to_owned(),
        discovery: format!("static peer list: FERRY_PEERS names the other namespace's discovery address (its address, port {DISCOVERY_PORT}); in each namespace the first process relays what it hears to the others; multicast discovery is off"),
        link_rate: pair.rate.map(LinkRate::name),
        link_rate_bps: pair.rate.map(|l| l.bps),
        tbf: pair.rate.map(|l| Tbf {
            burst_bytes: l.burst_bytes(),
            latency_ms: netns::TBF_LATENCY_MS,
            on: "both veth ends (egress of each)".to_owned(),
            commands: pair.tc.clone(),
        }),
        note: "both namespaces run on this machine's CPUs: the link is a veth pair, not a wire".to_owned(),
    }
}

fn remote_hosts_of(remote: &Remote) -> RemoteHosts {
    RemoteHosts {
        agent: remote.agent.clone(),
        addresses: Sides {
            a: remote.here.to_string(),
            b: remote.there.to_string(),
        },
        placement: format!("the master and the even hubs on this machine (A), the odd hubs on the machine of the lab agent at {} (B), started through it (the study's 2 nodes: master and hub 2 on machine A, hubs 1 and 3 on machine B)", remote.agent),
        discovery: format!("static peer list: FERRY_PEERS names the other machine's discovery address (port {DISCOVERY_PORT}): on A the agent's address, on B this machine's address on the route to the agent; on each machine the first process relays what it hears to the others; multicast discovery is off"),
    }
}

fn make_setup(ctx: &Ctx<'_>, skipped: Vec<Skipped>, started: u64) -> Setup {
    let args = ctx.config;
    let n = args.hubs;
    let chain: Vec<String> = (0..=n).map(|i| role_name(i % n)).collect();
    let cgroup = match args.cpu {
        None => CgroupSetup {
            used: false,
            version: None,
            dir: None,
            period_us: None,
            quota_us: None,
            cpus: None,
            over: None,
            meaning: None,
        },
        Some(c) => CgroupSetup {
            used: true,
            version: cgroup::detect().map(|v| match v {
                cgroup::Version::V1 => CgroupVersion::V1,
                cgroup::Version::V2 => CgroupVersion::V2,
            }),
            dir: Some(match cgroup::detect() {
                Some(cgroup::Version::V1) => format!("/sys/fs/cgroup/cpu/ferry-lab-{}-hubs<run>", std::process::id()),
                _ => format!("/sys/fs/cgroup/ferry-lab-{}-hubs<run>", std::process::id()),
            }),
            period_us: Some(cgroup::PERIOD_US),
            quota_us: Some((c * cgroup::PERIOD_US as f64).round() as u64),
            cpus: Some(c),
            over: Some(format!("all {n} hub processes together (the master included); created for each run, removed after it")),
            meaning: Some("stands in for slower CPUs (the study scaled the CPU frequency)".to_owned()),
        },
    };
    Setup {
        modes: args.mode.clone(),
        hubs: n,
        processes: format!("{n} processes: the master and {} hubs", n - 1),
        messages: args.messages,
        size_bytes: args.size,
        size_note: "the study names no message size; the default 256 B is a small message".to_owned(),
        warmup: args.warmup,
        rounds: args.rounds,
        transports: args.transport.clone(),
        transport_descriptions: args
            .transport
            .iter()
            .map(|t| (t.name().to_owned(), describe(*t).to_owned()))
            .collect(),
        topology: format!(
            "ring: {}; one topic per edge, hubs/edge0 … hubs/edge{} (edge i: process i → process i+1)",
            chain.join(" → "),
            n - 1
        ),
        delivery: "reliable".to_owned(),
        wait: args.wait,
        wait_note: "the default is block, not ferry's default adaptive: with more processes than CPUs, a waiter that spins (adaptive spins 100 µs before it blocks) holds the CPU the next hub in the ring needs, and every such hand-over costs the spin (on 2 CPUs, 4 processes: shm laps about 7× longer with adaptive than with block)".to_owned(),
        roundtrip: "the master sends one message and waits until it has come back through every hub; a lap is the time from before the master writes the message until it has it back and has checked every byte; hubs copy each message into a loan of their outgoing topic and send it".to_owned(),
        flood: "the master's sender thread (on the master's CPU) pushes every message back to back (held back only by reliable back-pressure) while its main thread takes them back; every hub forwards each message as soon as it has it; completion is the time from the first send until the master has every message back; every message is checked (every byte, order, duplicates) and what never came back is counted as lost".to_owned(),
        probe: "before the warm-up the master sends probes around the ring (one every 100 ms) until one comes back, so every edge is connected".to_owned(),
        hosts: args.hosts,
        two_hosts: ctx.pair.map(two_hosts_of),
        remote: ctx.remote.map(remote_hosts_of),
        link_rate: args.link_rate.map(LinkRate::name),
        cpu: args.cpu,
        cgroup,
        placement: ctx.placement.clone(),
        pinning: PinningSetup {
            mode: args.pin,
            available_cpus: super::allowed_cpus(),
            summary: describe_placement(&ctx.placement),
            note: "the processes outnumber the CPUs: they take turns on them, so a lap includes the scheduler's hand-overs; the rows say where each process ran (allowed_cpus, last_cpu) and how much CPU it used".to_owned(),
        },
        skipped,
        timeouts: Timeouts {
            start_s: START_TIMEOUT.as_secs(),
            lap_or_flood_progress_s: LAP_TIMEOUT.as_secs(),
            master_watchdog_s: WATCHDOG.as_secs(),
            exit_s: EXIT_TIMEOUT.as_secs(),
            close_s: CLOSE_TIMEOUT.as_secs(),
            send_s: SEND_TIMEOUT.as_secs(),
        },
        clock: "CLOCK_MONOTONIC (std::time::Instant) in the master".to_owned(),
        study: format!(
            "{}: Roundtrip and Flood demonstrators over 4 hubs (1 master, 3 others), floods of 1000 messages; 1 node vs 2 nodes (master and hub 2 on machine A, hubs 1 and 3 on machine B); effect of CPU speed",
            cite(&DDS_HUBS)
        ),
        started_unix_s: started,
    }
}

/// One run: a fresh ring of processes for one transport and mode.
fn trial(
    ctx: &Ctx<'_>,
    transport: Subject,
    mode: Mode,
    round: usize,
    run_index: usize,
) -> Result<Row> {
    let domain = format!("hubs{}-{run_index}", std::process::id());
    let result = trial_in(ctx, transport, mode, round, run_index, &domain);
    // Whatever a failed or interrupted run left in its own domain.
    let _ = ferry::admin::clean(Some(&domain));
    result
}

fn trial_in(
    ctx: &Ctx<'_>,
    transport: Subject,
    mode: Mode,
    round: usize,
    run_index: usize,
    domain: &str,
) -> Result<Row> {
    let started = Instant::now();
    // Declared before the ring, so that it is removed after the processes were reaped.
    let group = ctx
        .config
        .cpu
        .map(|c| CpuGroup::create(c, &format!("hubs{run_index}")))
        .transpose()?;
    let mut ring = Ring::start(ctx, transport, mode, domain)?;
    if let Some(g) = &group {
        for m in &ring.members {
            let Some(pid) = m.peer.pid() else {
                bail!(
                    "{} runs on another machine: it cannot join this machine's cgroup",
                    m.role
                );
            };
            g.add(pid)
                .context(format!("cannot move {} into the cgroup", m.role))?;
            if !g.contains(pid) {
                bail!(
                    "{} (pid {pid}) is not in {} after the move",
                    m.role,
                    g.path().display()
                );
            }
        }
    }
    for m in &mut ring.members {
        m.peer
            .send(&Command::Go)
            .context(format!("cannot tell {} to go", m.role))?;
    }
    // Every process attached, and its publisher knows its subscriber.
    let until = Instant::now() + START_TIMEOUT + Duration::from_secs(5);
    let mut ready = vec![false; ring.members.len()];
    while ready.iter().any(|r| !r) {
        let (i, report) = ring.next(
            until,
            "while the ring was starting",
            "the ring did not start in time",
        )?;
        match report {
            Report::Ready => ready[i] = true,
            other => bail!("unexpected report from {}: {other:?}", ring.members[i].role),
        }
    }
    ring.members[0]
        .peer
        .send(&Command::Start)
        .context("cannot tell the master to start")?;
    let mut watchdog = Instant::now() + START_TIMEOUT + WATCHDOG;
    let master: MasterResult = loop {
        let (i, report) = ring.next(
            watchdog,
            "during the run",
            &format!("the master made no progress for {WATCHDOG:?}"),
        )?;
        match (i, report) {
            (0, Report::Progress(_)) => watchdog = Instant::now() + WATCHDOG,
            (0, Report::Result(r)) => break *r,
            (i, other) => bail!("unexpected report from {}: {other:?}", ring.members[i].role),
        }
    };
    let throttling = group.as_ref().map(CpuGroup::throttling);
    let hubs = ring.finish()?;
    drop(group);

    let mut row = Row::empty(ctx.config, transport, mode);
    row.round = Some(round);
    row.seconds = Some(started.elapsed().as_secs_f64());
    row.throttled_periods = throttling.map(|t| t.throttled_periods);
    row.throttled_ms = throttling.map(|t| t.throttled_ns as f64 / 1e6);
    row.measured(master, hubs, &ctx.placement, ctx.config.size);
    Ok(row)
}

/// One process of the ring: killed (or, on another machine, ended by its agent) if dropped
/// before it finished.
struct Member {
    role: String,
    peer: Peer,
}

impl Member {
    /// The error for a process that ended or failed `when` (it must not before `finish`).
    fn died(&self, when: &str, e: Error) -> Error {
        let pid = self
            .peer
            .pid()
            .map_or(String::new(), |p| format!(" (pid {p})"));
        Error::msg(format!("{}{pid} exited {when}: {e}", self.role))
    }
}

/// The processes of one run.
struct Ring {
    members: Vec<Member>,
}

impl Ring {
    fn start(ctx: &Ctx<'_>, transport: Subject, mode: Mode, domain: &str) -> Result<Ring> {
        let args = ctx.config;
        let mut members = Vec::with_capacity(args.hubs);
        for (i, place) in ctx.placement.iter().enumerate() {
            let request = PeerRequest {
                index: i,
                hubs: args.hubs,
                mode,
                transport,
                domain: domain.to_owned(),
                size: args.size,
                messages: args.messages,
                warmup: args.warmup,
                wait: args.wait,
                host: place.host,
                cpu: place.cpu,
                exit_after: args.fault_hub_exit_after.filter(|_| i == 1),
                discovery: ctx.discovery_of(i),
            };
            let role = role_name(i);
            let peer = Peer::start::<Hubs>(&request, &ctx.place_of(i))
                .context(format!("cannot start {role}"))?;
            members.push(Member { role, peer });
        }
        Ok(Ring { members })
    }

    /// The next report of any process, by `until` (else the error `late`). Any process that
    /// ends meanwhile is an error (they end only when told to, in `finish`), as is Ctrl-C.
    fn next(&mut self, until: Instant, when: &str, late: &str) -> Result<(usize, Report)> {
        loop {
            signal::check()?;
            for (i, m) in self.members.iter_mut().enumerate() {
                // Reads what has come (queueing reports), then says whether it has ended.
                if let Err(e) = m.peer.check_alive() {
                    return Err(m.died(when, e));
                }
                let report = m
                    .peer
                    .recv::<Report>(Duration::ZERO)
                    .map_err(|e| Error::msg(format!("{}: {e}", m.role)))?;
                if let Some(report) = report {
                    return Ok((i, report));
                }
            }
            if Instant::now() >= until {
                bail!("{late}; stopped every process");
            }
            std::thread::sleep(LOOK_EVERY);
        }
    }

    /// Tells every process to stop (closes its input), collects the hubs' reports and checks
    /// that every process finished successfully, within EXIT_TIMEOUT.
    fn finish(mut self) -> Result<Vec<HubReport>> {
        for m in &mut self.members {
            m.peer.close_input();
        }
        let until = Instant::now() + EXIT_TIMEOUT;
        let mut reports = Vec::with_capacity(self.members.len().saturating_sub(1));
        for (i, mut m) in self.members.into_iter().enumerate() {
            if i > 0 {
                let left = until.saturating_duration_since(Instant::now());
                match m.peer.recv::<Report>(left) {
                    Ok(Some(Report::Hub(r))) => reports.push(r),
                    Ok(Some(other)) => bail!("unexpected report from {}: {other:?}", m.role),
                    Ok(None) if Instant::now() >= until => bail!(
                        "{} did not finish within {EXIT_TIMEOUT:?} after the run",
                        m.role
                    ),
                    Ok(None) => bail!("{} exited without its report", m.role),
                    Err(e) => bail!("{} failed at the end of the run: {e}", m.role),
                }
            }
            let left = until.saturating_duration_since(Instant::now());
            let role = m.role;
            m.peer
                .finish(left)
                .map_err(|e| Error::msg(format!("{role} failed at the end of the run: {e}")))?;
        }
        Ok(reports)
    }
}

// ---------------------------------------------------------------------------------------------
// Table, report section and summary

/// The hosts of a run, in words: "one host", "two hosts (network namespaces), link 100mbit".
fn hosts_text(setup: &Setup) -> String {
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

fn paths(row: &Row) -> String {
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
fn median_over_rounds(
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
fn transports_of(rows: &[Row]) -> Vec<Subject> {
    let mut out: Vec<Subject> = Vec::new();
    for r in rows {
        if !out.contains(&r.transport) {
            out.push(r.transport);
        }
    }
    out
}

impl Experiment for Hubs {
    const NAME: &'static str = "hubs";
    const TITLE: &'static str = "Roundtrip and Flood over a ring of hubs";
    const ACROSS_MACHINES: bool = true;
    type Config = Config;
    type Setup = Setup;
    type Row = Row;
    type PeerRequest = PeerRequest;

    fn validate(args: &Config) -> Result<()> {
        super::distinct_list("--mode", &args.mode, |m| m.name().to_owned())?;
        SUBJECTS.check("--transport", &args.transport)?;
        if !(2..=MAX_HUBS).contains(&args.hubs) {
            bail!("--hubs must be between 2 and {MAX_HUBS} (the master included)");
        }
        if !(1..=MAX_MESSAGES).contains(&args.messages) {
            bail!("--messages must be between 1 and {MAX_MESSAGES}");
        }
        if args.warmup > MAX_MESSAGES {
            bail!("--warmup must be at most {MAX_MESSAGES}");
        }
        if !(HEADER..=MAX_SIZE).contains(&args.size) {
            bail!(
                "--size must be between {HEADER} bytes (the sequence header) and {}",
                format_size(MAX_SIZE)
            );
        }
        if args.rounds == 0 {
            bail!("--rounds must be at least 1");
        }
        if !(1..=2).contains(&args.hosts) {
            bail!("--hosts must be 1 or 2");
        }
        if let Some(agent) = &args.remote {
            if args.hosts != 2 {
                bail!(
                    "--remote {agent} runs the odd hubs on the agent's machine: it needs --hosts 2"
                );
            }
            if args.link_rate.is_some() {
                bail!(
                "--link-rate limits the veth link between two network namespaces; with --remote \
                 {agent} the hubs talk over the network between the machines: leave it out"
            );
            }
            if args.cpu.is_some() {
                bail!(
                    "--cpu puts every hub process in one cgroup of this machine; with --remote \
                 {agent} the odd hubs run on another machine: use --cpu none"
                );
            }
        }
        if args.link_rate.is_some() && args.hosts != 2 {
            bail!("--link-rate limits the link between two hosts: it needs --hosts 2");
        }
        if let Some(c) = args.cpu {
            if !(c.is_finite() && c > 0.0) {
                bail!("--cpu must be a positive number of CPUs, or none");
            }
            let parent = match cgroup::detect() {
            Some(cgroup::Version::V1) => "/sys/fs/cgroup/cpu",
            Some(cgroup::Version::V2) => "/sys/fs/cgroup",
            None => bail!(
                "--cpu: this machine has no cgroup CPU controller under /sys/fs/cgroup; use --cpu none"
            ),
        };
            if rustix::fs::access(parent, rustix::fs::Access::WRITE_OK).is_err() {
                bail!(
                "--cpu needs root (write access to {parent}) to create a cgroup with a CPU quota; use --cpu none"
            );
            }
        }
        Ok(())
    }

    fn run(args: &Config) -> Result<Measured<Self>> {
        let started = super::unix_time();
        let placement = placement(args);
        let remote = args.remote.as_deref().map(Remote::resolve).transpose()?;
        // Created before any process and dropped after all of them (also on error and Ctrl-C).
        let pair = match (args.hosts, &remote) {
            (2, None) => Some(make_pair(args.link_rate)?),
            _ => None,
        };
        let ctx = Ctx {
            config: args,
            pair: pair.as_ref(),
            remote: remote.as_ref(),
            placement,
        };
        note!(
        "ferry lab hubs: {} × {} in {} rounds; {} processes in a ring; {} messages of {}; {}{}{}",
        args.mode
            .iter()
            .map(|m| m.name())
            .collect::<Vec<_>>()
            .join(","),
        args.transport
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(","),
        args.rounds,
        args.hubs,
        args.messages,
        format_size(args.size),
        describe_placement(&ctx.placement),
        match (&pair, &remote) {
            (Some(h), _) => format!(
                "; two hosts: namespaces {} (A, {}) and {} (B, {})",
                h.ns[0], h.addr[0], h.ns[1], h.addr[1]
            ),
            (None, Some(r)) => format!(
                "; two hosts: this machine (A, {}) and the lab agent at {} (B, {})",
                r.here, r.agent, r.there
            ),
            (None, None) => String::new(),
        },
        match args.cpu {
            Some(c) => format!("; CPU quota {c} CPU over all of them"),
            None => String::new(),
        }
    );

        let mut rows = Vec::new();
        let mut skipped = Vec::new();
        for &t in &args.transport {
            if let Some(reason) = skip_reason(args, t) {
                note!("  {}: {reason}", t.name());
                for &mode in &args.mode {
                    let mut row = Row::empty(args, t, mode);
                    row.skipped = Some(reason.clone());
                    rows.push(row);
                }
                skipped.push(Skipped {
                    transport: t,
                    reason,
                });
            }
        }
        let mut problems = Vec::new();
        let mut run_index = 0usize;
        for round in 0..args.rounds {
            for &mode in &args.mode {
                for &transport in &args.transport {
                    if skip_reason(args, transport).is_some() {
                        continue;
                    }
                    signal::check()?;
                    let row = trial(&ctx, transport, mode, round, run_index).context(format!(
                        "{} {} (round {})",
                        transport.name(),
                        mode.name(),
                        round + 1
                    ))?;
                    run_index += 1;
                    note!("  round {}/{}: {}", round + 1, args.rounds, summarize(&row));
                    if row.lost != Some(0)
                        || row.corrupt != Some(0)
                        || row.out_of_order != Some(0)
                        || row.duplicates != Some(0)
                        || row.error.is_some()
                    {
                        problems.push(format!(
                            "{} {} round {}: {} lost, {} corrupt, {} out of order, {} duplicated{}",
                            row.transport.name(),
                            row.mode.name(),
                            round + 1,
                            row.lost.unwrap_or(0),
                            row.corrupt.unwrap_or(0),
                            row.out_of_order.unwrap_or(0),
                            row.duplicates.unwrap_or(0),
                            row.error
                                .as_ref()
                                .map_or(String::new(), |e| format!(" ({e})"))
                        ));
                    }
                    rows.push(row);
                }
            }
        }
        let setup = make_setup(&ctx, skipped, started);
        drop(pair);
        if !problems.is_empty() {
            bail!(
                "messages went missing or arrived damaged (reliable delivery promises none): {}",
                problems.join("; ")
            );
        }
        Ok(Measured { setup, rows })
    }

    fn run_peer(args: PeerRequest, link: &mut PeerLink) -> Result<()> {
        args.check()?;
        if let Some(cpu) = args.cpu {
            super::pin_to(cpu)?;
        }
        // The main process first moves this process into its cgroup, if any.
        expect(link, Command::Go, START_TIMEOUT, || {})?;
        let n = args.hubs;
        let i = args.index;
        // In the clear whatever FERRY_KEY_FILE says here, so that both hosts agree.
        let node = super::lab_node_reaching(
            &format!("hub{i}"),
            &args.domain,
            false,
            discovery_config(args.discovery.as_ref()),
        )?;
        let qos = qos(args.transport, args.size, args.wait)?;
        let mut input = node.subscriber(&edge_topic((i + n - 1) % n), &qos)?;
        let output = node.publisher(&edge_topic(i), &qos)?;
        let deadline = Instant::now() + START_TIMEOUT;
        // A subscriber attaches to new publishers when it looks at its topic: keep looking, so that
        // the previous process's publisher sees it.
        while {
            input.publisher_count();
            output.subscriber_count() == 0
        } {
            link.check_main()?;
            if Instant::now() >= deadline {
                bail!(
                "{}: nobody subscribed to {} within {START_TIMEOUT:?} (is {} running and reachable?)",
                role_name(i),
                edge_topic(i),
                role_name((i + 1) % n)
            );
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        link.report(&Report::Ready)?;
        let mut ends = Ends {
            input,
            output,
            size: args.size,
        };
        if i == 0 {
            master(&args, link, &mut ends)?;
        } else {
            hub(&args, link, &mut ends)?;
        }
        close(ends);
        Ok(())
    }

    fn table(results: &Results<Self>) -> String {
        let setup: &Setup = &results.config;
        let rows: &[Row] = &results.rows;
        let mut out = String::new();
        let hosts = hosts_text(setup);
        let cpu = setup
            .cpu
            .map_or("no CPU quota".to_owned(), |c| format!("CPU quota {c} CPU"));
        for &mode in &setup.modes {
            let mine: Vec<&Row> = rows.iter().filter(|r| r.mode == mode).collect();
            match mode {
                Mode::Roundtrip => {
                    let mut t = Table::new(&[
                        "transport",
                        ">round",
                        ">lap p50",
                        ">p90",
                        ">p99",
                        ">max",
                        ">mean",
                        ">hop p50",
                        ">total",
                        ">lost",
                        "edges",
                    ]);
                    for r in &mine {
                        if r.skipped.is_some() {
                            continue;
                        }
                        t.row(vec![
                            r.transport.name().to_owned(),
                            r.round.map_or(String::new(), |x| (x + 1).to_string()),
                            format_ns(r.lap_p50_ns.unwrap_or(0) as f64),
                            format_ns(r.lap_p90_ns.unwrap_or(0) as f64),
                            format_ns(r.lap_p99_ns.unwrap_or(0) as f64),
                            format_ns(r.lap_max_ns.unwrap_or(0) as f64),
                            format_ns(r.lap_mean_ns.unwrap_or(0.0)),
                            format_ns(r.hop_p50_ns.unwrap_or(0.0)),
                            format!("{:.3} s", r.total_s.unwrap_or(0.0)),
                            r.lost.unwrap_or(0).to_string(),
                            paths(r),
                        ]);
                    }
                    out.push_str(&format!(
                    "\nRoundtrip: one message around a ring of {} processes, {} laps of {} per row; {hosts}; {cpu}; wait {}.\n{}.\n\n{}",
                    setup.hubs,
                    setup.messages,
                    format_size(setup.size_bytes),
                    setup.wait.name(),
                    setup.pinning.summary,
                    t.render()
                ));
                }
                Mode::Flood => {
                    let mut t = Table::new(&[
                        "transport",
                        ">round",
                        ">completion",
                        ">messages/s",
                        ">payload",
                        ">lost",
                        ">corrupt",
                        ">out of order",
                        "edges",
                    ]);
                    for r in &mine {
                        if r.skipped.is_some() {
                            continue;
                        }
                        t.row(vec![
                            r.transport.name().to_owned(),
                            r.round.map_or(String::new(), |x| (x + 1).to_string()),
                            r.completion_s
                                .map_or("-".to_owned(), |c| format_ns(c * 1e9)),
                            r.messages_per_s
                                .map_or("-".to_owned(), |m| format!("{m:.0}")),
                            r.payload_mbit_per_s
                                .map_or("-".to_owned(), |m| format!("{m:.1} Mbit/s")),
                            r.lost.unwrap_or(0).to_string(),
                            r.corrupt.unwrap_or(0).to_string(),
                            r.out_of_order.unwrap_or(0).to_string(),
                            paths(r),
                        ]);
                    }
                    out.push_str(&format!(
                    "\nFlood: {} messages of {} pushed into a ring of {} processes back to back, timed until all are back; {hosts}; {cpu}; wait {}.\n{}.\n\n{}",
                    setup.messages,
                    format_size(setup.size_bytes),
                    setup.hubs,
                    setup.wait.name(),
                    setup.pinning.summary,
                    t.render()
                ));
                }
            }
            for r in mine.iter().filter(|r| r.skipped.is_some()) {
                out.push_str(&format!(
                    "{}: {}\n",
                    r.transport.name(),
                    r.skipped.as_deref().unwrap_or_default()
                ));
            }
            // The median over the rounds, per transport.
            let mut s = Table::new(&["transport", ">rounds", "median over the rounds"]);
            for &tr in &setup.transports {
                let of = mine
                    .iter()
                    .filter(|r| r.transport == tr && r.skipped.is_none())
                    .count();
                if of == 0 {
                    continue;
                }
                let text = match mode {
                    Mode::Roundtrip => {
                        median_over_rounds(rows, mode, tr, |r| r.lap_p50_ns.map(|v| v as f64))
                            .map_or("-".to_owned(), |m| format!("lap p50 {}", format_ns(m)))
                    }
                    Mode::Flood => {
                        let c = median_over_rounds(rows, mode, tr, |r| r.completion_s);
                        let m = median_over_rounds(rows, mode, tr, |r| r.messages_per_s);
                        match (c, m) {
                            (Some(c), Some(m)) => {
                                format!("completion {} ({m:.0} messages/s)", format_ns(c * 1e9))
                            }
                            _ => "-".to_owned(),
                        }
                    }
                };
                s.row(vec![tr.name().to_owned(), of.to_string(), text]);
            }
            out.push('\n');
            out.push_str(&s.render());
        }
        out
    }

    fn section(results: &Results<Hubs>) -> Result<Section> {
        let rs = &results.rows;
        let setup = &results.config;
        let transports = transports_of(rs);
        let hubs = setup.hubs;
        let hosts = setup.hosts;
        let link = setup
            .link_rate
            .as_ref()
            .map_or(String::new(), |l| format!(", link {l}"));
        let per_t = |mode: Mode, figure: fn(&Row) -> Option<f64>, scale: f64| -> Vec<Option<f64>> {
            transports
                .iter()
                .map(|&t| median_over_rounds(rs, mode, t, figure).map(|v| v / scale))
                .collect()
        };
        let mut panels = Vec::new();
        let (mut lap, mut flood) = (Vec::new(), Vec::new());
        let roundtrip_title = format!("Roundtrip: one lap through {hubs} processes");
        if rs.iter().any(|r| r.mode == Mode::Roundtrip) {
            panels.push(Bars {
                title: &roundtrip_title,
                y_desc: "lap time (µs)",
                categories: transports.iter().map(|t| t.name().to_owned()).collect(),
                series: vec![
                    (
                        "p50".into(),
                        color(0),
                        per_t(Mode::Roundtrip, |r| r.lap_p50_ns.map(|v| v as f64), 1e3),
                    ),
                    (
                        "p90".into(),
                        color(1),
                        per_t(Mode::Roundtrip, |r| r.lap_p90_ns.map(|v| v as f64), 1e3),
                    ),
                    (
                        "p99".into(),
                        color(2),
                        per_t(Mode::Roundtrip, |r| r.lap_p99_ns.map(|v| v as f64), 1e3),
                    ),
                ],
                reference: None,
                log_y: false,
            });
            for &t in &transports {
                if let Some(v) =
                    median_over_rounds(rs, Mode::Roundtrip, t, |r| r.lap_p50_ns.map(|v| v as f64))
                {
                    lap.push(format!("{} {}", t.name(), format_ns(v)));
                }
            }
        }
        let flood_title = format!("Flood: {} messages through every hub", setup.messages);
        if rs.iter().any(|r| r.mode == Mode::Flood) {
            let completions = |t: Subject| {
                rs.iter()
                    .filter(move |r| r.mode == Mode::Flood && r.transport == t)
                    .filter_map(|r| r.completion_s)
            };
            let ext = |max: bool| -> Vec<Option<f64>> {
                transports
                    .iter()
                    .map(|&t| {
                        completions(t)
                            .reduce(if max { f64::max } else { f64::min })
                            .map(|v| v * 1e3)
                    })
                    .collect()
            };
            panels.push(Bars {
                title: &flood_title,
                y_desc: "completion (ms)",
                categories: transports.iter().map(|t| t.name().to_owned()).collect(),
                series: vec![
                    ("fastest round".into(), color(3), ext(false)),
                    (
                        "median".into(),
                        color(0),
                        per_t(Mode::Flood, |r| r.completion_s, 1e-3),
                    ),
                    ("slowest round".into(), color(1), ext(true)),
                ],
                reference: None,
                log_y: false,
            });
            for &t in &transports {
                if let Some(v) = median_over_rounds(rs, Mode::Flood, t, |r| r.completion_s) {
                    flood.push(format!("{} {:.2} ms", t.name(), v * 1e3));
                }
            }
        }
        let mut plots = Vec::new();
        if !panels.is_empty() {
            plots.push(Plot {
            file: "hubs.svg".to_owned(),
            svg: bar_svg(&panels, 1500)?,
            caption: format!(
                "{hubs} processes in a ring on {hosts} host(s){link}; median over the rounds (roundtrip: lap percentiles; flood: time until every message came back to the master)."
            ),
        });
        }
        let sentence = format!(
        "{} passes a message around a master and 3 hubs (Roundtrip) and pushes 1000 messages through every hub (Flood), on one node and on two over Ethernet and WiFi; its Flood over Ethernet saturates the network. Here, on {hosts} host(s){link}: roundtrip lap p50 {}; flood completion {}.",
        cite_first(&DDS_HUBS),
        if lap.is_empty() { "not run".to_owned() } else { lap.join(", ") },
        if flood.is_empty() { "not run".to_owned() } else { flood.join(", ") },
    );
        Ok(Section { plots, sentence })
    }

    /// The study's headline figures are its Roundtrip time and its Flood completion time, on one
    /// node and on two: one line per mode and transport measured. The study plots its times without
    /// giving a figure in its text, and no other system is measured here, so those stay empty.
    fn summary(results: &Results<Hubs>) -> Vec<SummaryLine> {
        let setup = &results.config;
        let rs = &results.rows;
        let hosts = hosts_text(setup);
        let mut lines = Vec::new();
        for &mode in &setup.modes {
            for &t in &setup.transports {
                let line = match mode {
                Mode::Roundtrip => median_over_rounds(rs, mode, t, |r| {
                    r.lap_p50_ns.map(|v| v as f64)
                })
                .map(|p50| SummaryLine {
                    what: format!(
                        "Roundtrip lap p50, a ring of {} processes, {hosts}, {}",
                        setup.hubs,
                        t.name()
                    ),
                    ferry: format_ns(p50),
                    floor: None,
                    best_peer: None,
                    study: None,
                }),
                Mode::Flood => median_over_rounds(rs, mode, t, |r| r.completion_s).map(|c| {
                    let rate = median_over_rounds(rs, mode, t, |r| r.messages_per_s);
                    SummaryLine {
                        what: format!(
                            "Flood of {} messages through a ring of {} processes, {hosts}, {}: completion",
                            setup.messages,
                            setup.hubs,
                            t.name()
                        ),
                        ferry: match rate {
                            Some(m) => format!("{} ({m:.0} messages/s)", format_ns(c * 1e9)),
                            None => format_ns(c * 1e9),
                        },
                        floor: None,
                        best_peer: None,
                        study: None,
                    }
                }),
            };
                lines.extend(line);
            }
        }
        lines
    }
}

// ---------------------------------------------------------------------------------------------
// The hub processes

/// What the main process asks of one hub process.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerRequest {
    index: usize,
    hubs: usize,
    mode: Mode,
    transport: Subject,
    domain: String,
    size: usize,
    messages: u64,
    warmup: u64,
    wait: WaitStrategy,
    host: Host,
    cpu: Option<usize>,
    exit_after: Option<u64>,
    /// On two hosts: where the other side's discovery listens; `None`: this host only.
    discovery: Option<Discovery>,
}

impl PeerRequest {
    /// Refuses a request that no main process of this lab sends (every figure in it bounds an
    /// allocation or a loop).
    fn check(&self) -> Result<()> {
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

/// The discovery of a hub's node: the other side's address on two hosts, this host only
/// otherwise (whatever the environment says).
fn discovery_config(discovery: Option<&Discovery>) -> ferry::DiscoveryConfig {
    let mut config = ferry::DiscoveryConfig::default();
    if let Some(d) = discovery {
        config.port = d.port;
        config.peers = d.peers.iter().map(|&p| SocketAddr::V4(p)).collect();
    }
    config
}

/// Whether the main process ended the run (closed this process's input).
fn main_gone(link: &mut PeerLink) -> Result<bool> {
    match link.check_main() {
        Ok(()) => Ok(false),
        Err(e) if e.to_string() == MAIN_GONE => Ok(true),
        Err(e) => Err(e),
    }
}

/// Waits (at most `timeout`) for command `want`, calling `poll` every few milliseconds meanwhile.
fn expect(
    link: &mut PeerLink,
    want: Command,
    timeout: Duration,
    mut poll: impl FnMut(),
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        poll();
        match link.recv::<Command>(Duration::from_millis(2))? {
            Some(c) if c == want => return Ok(()),
            Some(c) => bail!("expected {want:?} from the lab's main process, got {c:?}"),
            None => {}
        }
        if Instant::now() >= deadline {
            bail!("no {want:?} from the lab's main process within {timeout:?}");
        }
    }
}

/// Waits (at most `timeout`) until the main process ends the run.
fn wait_closed(link: &mut PeerLink, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if link.recv::<Command>(Duration::from_millis(50)).is_err() {
            return;
        }
    }
}

/// Closes a process's two ends so that neither neighbour waits: the publisher is dropped (it
/// says goodbye and, over UDP, lingers until its subscriber confirmed it took everything) on a
/// thread, while this thread keeps reading the incoming edge, which lets the subscriber answer
/// its own publisher's goodbye, until that publisher has gone; at most CLOSE_TIMEOUT. (Every
/// process of the ring closes at once; a subscriber that stopped reading would hold its
/// publisher until the other host's subscriber timed out.)
fn close(ends: Ends) {
    let Ends {
        mut input, output, ..
    } = ends;
    let closer = std::thread::Builder::new()
        .name("hubs-close".into())
        .spawn(move || drop(output));
    let deadline = Instant::now() + CLOSE_TIMEOUT;
    loop {
        let _ = input.recv_timeout(Duration::from_millis(2));
        let closed = closer.as_ref().map_or(true, |t| t.is_finished());
        if (closed && input.publisher_count() == 0) || Instant::now() >= deadline {
            break;
        }
    }
    if let Ok(t) = closer {
        if t.is_finished() {
            let _ = t.join();
        }
    }
}

struct Ends {
    input: Subscriber,
    output: Publisher,
    size: usize,
}

fn hub(args: &PeerRequest, link: &mut PeerLink, ends: &mut Ends) -> Result<()> {
    let mut forwarded = 0u64;
    let mut out_of_order = 0u64;
    let mut last: Option<(u64, u64)> = None;
    while !main_gone(link)? {
        let Some(sample) = ends.input.recv_timeout(SLICE)? else {
            continue;
        };
        if let Some((phase, seq)) = header(&sample) {
            if phase != PROBE {
                let follows = match last {
                    Some((lp, ls)) => (lp == phase && seq == ls + 1) || (lp != phase && seq == 0),
                    None => seq == 0,
                };
                if !follows {
                    out_of_order += 1;
                }
                last = Some((phase, seq));
            }
        }
        let mut loan = ends.output.loan(sample.len())?;
        loan.as_mut_slice().copy_from_slice(&sample);
        loan.send()?;
        drop(sample);
        forwarded += 1;
        if args.exit_after == Some(forwarded) {
            note!(
                "ferry lab-peer hubs: {} exits after {forwarded} messages, as asked (--fault-hub-exit-after)",
                role_name(args.index)
            );
            std::process::exit(3);
        }
    }
    link.report(&Report::Hub(HubReport {
        forwarded,
        out_of_order,
        edge_in: edge_counts(&args.domain, args.index - 1),
        process: process_info(args),
    }))
}

/// Progress reports for the main process's watchdog.
struct Progress {
    next: Instant,
    count: u64,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            next: Instant::now() + PROGRESS_EVERY,
            count: 0,
        }
    }

    fn tick(&mut self, link: &mut PeerLink) -> Result<()> {
        self.count += 1;
        let now = Instant::now();
        if now >= self.next {
            self.next = now + PROGRESS_EVERY;
            link.report(&Report::Progress(self.count))?;
        }
        Ok(())
    }
}

fn master(args: &PeerRequest, link: &mut PeerLink, ends: &mut Ends) -> Result<()> {
    expect(link, Command::Start, START_TIMEOUT, || {
        ends.input.publisher_count();
    })?;
    let mut r = MasterResult {
        probes: probe(ends, link)?,
        ..MasterResult::default()
    };
    let mut progress = Progress::new();
    match args.mode {
        Mode::Roundtrip => roundtrip(args, ends, link, &mut r, &mut progress)?,
        Mode::Flood => flood(args, ends, link, &mut r, &mut progress)?,
    }
    r.edge_in = edge_counts(&args.domain, args.hubs - 1);
    r.process = Some(process_info(args));
    link.report(&Report::Result(Box::new(r)))?;
    // Keep the publisher (and its ring) until every process has reported.
    wait_closed(link, EXIT_TIMEOUT);
    Ok(())
}

/// Sends probes around the ring until one comes back (every edge connected), then waits for the
/// rest of those sent (FIFO edges: every later probe follows the one that came back).
fn probe(ends: &mut Ends, link: &mut PeerLink) -> Result<u64> {
    let deadline = Instant::now() + START_TIMEOUT;
    let mut sent = 0u64;
    let mut next_send = Instant::now();
    let mut came_back = false;
    loop {
        let now = Instant::now();
        if !came_back && now >= next_send {
            send(&mut ends.output, ends.size, PROBE, sent)?;
            sent += 1;
            next_send = now + PROBE_EVERY;
        }
        if let Some(sample) = ends.input.recv_timeout(Duration::from_millis(10))? {
            if let Some((PROBE, seq)) = header(&sample) {
                came_back = true;
                if seq + 1 == sent {
                    return Ok(sent);
                }
            }
        }
        link.check_main()?;
        if Instant::now() >= deadline {
            bail!(
                "the ring did not close within {START_TIMEOUT:?}: {sent} probes sent, {}",
                if came_back {
                    "some came back, the last did not"
                } else {
                    "none came back (a hub does not reach the next)"
                }
            );
        }
    }
}

/// What arrived while waiting for one message.
enum Got {
    /// The message, intact or not.
    It { intact: bool },
    /// Nothing within the slice.
    Nothing,
    /// Another message (counted by the caller).
    Other(Option<(u64, u64)>),
}

fn take(ends: &mut Ends, phase: u64, seq: u64) -> Result<Got> {
    let Some(sample) = ends.input.recv_timeout(SLICE)? else {
        return Ok(Got::Nothing);
    };
    Ok(match header(&sample) {
        Some((p, s)) if p == phase && s == seq => Got::It {
            intact: intact(&sample, ends.size, phase, seq),
        },
        h => Got::Other(h),
    })
}

fn roundtrip(
    args: &PeerRequest,
    ends: &mut Ends,
    link: &mut PeerLink,
    r: &mut MasterResult,
    progress: &mut Progress,
) -> Result<()> {
    let mut laps = Vec::with_capacity(args.messages as usize);
    for (phase, count) in [(WARMUP, args.warmup), (DATA, args.messages)] {
        for seq in 0..count {
            let t0 = Instant::now();
            send(&mut ends.output, ends.size, phase, seq)?;
            let deadline = t0 + LAP_TIMEOUT;
            loop {
                match take(ends, phase, seq)? {
                    Got::It { intact } => {
                        let lap = t0.elapsed().as_nanos() as u64;
                        if phase == DATA {
                            laps.push(lap);
                            r.received += 1;
                            if !intact {
                                r.corrupt += 1;
                            }
                        } else if !intact {
                            r.corrupt += 1;
                        }
                        break;
                    }
                    Got::Other(Some((PROBE, _))) => r.unexpected += 1,
                    Got::Other(Some((p, s))) if p == phase && s < seq => r.duplicates += 1,
                    Got::Other(_) => {
                        r.unexpected += 1;
                        r.out_of_order += 1;
                    }
                    Got::Nothing => {}
                }
                if Instant::now() >= deadline {
                    let left = if phase == DATA {
                        count - seq
                    } else {
                        args.messages
                    };
                    r.lost += left;
                    r.aborted = Some(format!(
                        "{} message {seq} did not come back within {LAP_TIMEOUT:?}; the {left} laps from there on were not run",
                        if phase == DATA { "recorded" } else { "warm-up" }
                    ));
                    r.laps = (!laps.is_empty()).then(|| Laps::of(&mut laps));
                    return Ok(());
                }
                link.check_main()?;
            }
            progress.tick(link)?;
        }
    }
    r.laps = Some(Laps::of(&mut laps));
    Ok(())
}

/// What one flood's receiving side saw.
#[derive(Default)]
struct FloodTally {
    distinct: u64,
    corrupt: u64,
    out_of_order: u64,
    duplicates: u64,
    unexpected: u64,
    last_at: Option<Instant>,
    stalled: bool,
}

fn flood(
    args: &PeerRequest,
    ends: &mut Ends,
    link: &mut PeerLink,
    r: &mut MasterResult,
    progress: &mut Progress,
) -> Result<()> {
    for (phase, count) in [(WARMUP, args.warmup), (DATA, args.messages)] {
        if count == 0 {
            continue;
        }
        let (t0, tally, sent) = one_flood(ends, link, progress, phase, count)?;
        let lost = count - tally.distinct;
        r.corrupt += tally.corrupt;
        r.out_of_order += tally.out_of_order;
        r.duplicates += tally.duplicates;
        r.unexpected += tally.unexpected;
        if phase == DATA {
            r.received = tally.distinct;
            r.lost = lost;
            if let Some(last) = tally.last_at {
                r.completion_ns = Some(last.saturating_duration_since(t0).as_nanos() as u64);
            }
        }
        if tally.stalled || lost > 0 {
            let which = if phase == DATA {
                "the flood"
            } else {
                "the warm-up flood"
            };
            r.aborted = Some(format!(
                "{which}: {} of {count} messages came back ({sent} sent); nothing more came within {LAP_TIMEOUT:?}",
                tally.distinct
            ));
            if phase != DATA {
                r.lost = args.messages;
            }
            return Ok(());
        }
    }
    Ok(())
}

/// One flood of `count` messages: a sender thread pushes them, this thread takes them back.
/// Returns the time of the first send, what came back, and how many were sent.
fn one_flood(
    ends: &mut Ends,
    link: &mut PeerLink,
    progress: &mut Progress,
    phase: u64,
    count: u64,
) -> Result<(Instant, FloodTally, u64)> {
    let stop = std::sync::atomic::AtomicBool::new(false);
    let size = ends.size;
    let Ends { input, output, .. } = ends;
    std::thread::scope(|s| {
        let stop = &stop;
        let sender = std::thread::Builder::new()
            .name("hubs-flood".into())
            .spawn_scoped(s, move || -> (Instant, u64, Result<()>) {
                let t0 = Instant::now();
                for seq in 0..count {
                    // Relaxed: a stop request needs no ordering with anything else.
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        return (t0, seq, Ok(()));
                    }
                    if let Err(e) = send(output, size, phase, seq) {
                        return (t0, seq, Err(e));
                    }
                }
                (t0, count, Ok(()))
            })
            .context("cannot start the flood's sender thread")?;
        let mut tally = FloodTally::default();
        let received = receive_flood(input, size, phase, count, &mut tally, || {
            progress.tick(link)?;
            link.check_main()
        });
        // Relaxed: see the sender.
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (t0, sent, sent_result) = sender
            .join()
            .map_err(|_| Error::msg("the flood's sender thread panicked"))?;
        received?;
        if let Err(e) = sent_result {
            if tally.distinct < count {
                bail!("the flood's sender: {e}");
            }
        }
        Ok((t0, tally, sent))
    })
}

fn receive_flood(
    input: &mut Subscriber,
    size: usize,
    phase: u64,
    count: u64,
    tally: &mut FloodTally,
    mut look_around: impl FnMut() -> Result<()>,
) -> Result<()> {
    let mut seen = vec![false; count as usize];
    let mut expected = 0u64;
    let mut last_progress = Instant::now();
    while tally.distinct < count {
        let got = input.recv_timeout(SLICE)?;
        let now = Instant::now();
        match got {
            Some(sample) => {
                match header(&sample) {
                    Some((p, seq)) if p == phase && seq < count => {
                        if seen[seq as usize] {
                            tally.duplicates += 1;
                        } else {
                            seen[seq as usize] = true;
                            tally.distinct += 1;
                            if !intact(&sample, size, phase, seq) {
                                tally.corrupt += 1;
                            }
                        }
                        if seq != expected {
                            tally.out_of_order += 1;
                        }
                        expected = seq + 1;
                        tally.last_at = Some(now);
                        last_progress = now;
                    }
                    _ => tally.unexpected += 1,
                }
                if tally.distinct % 256 == 0 {
                    look_around()?;
                }
            }
            None => {
                look_around()?;
                if now - last_progress >= LAP_TIMEOUT {
                    tally.stalled = true;
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

/// Results of a small made-up run on one host, for the report's tests.
#[cfg(test)]
pub(crate) fn example() -> Results<Hubs> {
    example_with(vec![
        (Subject::Shm, Mode::Roundtrip, 0, 30_000, None),
        (Subject::Udp4, Mode::Roundtrip, 0, 60_000, None),
        (Subject::Shm, Mode::Flood, 0, 0, Some(10_000_000)),
        (Subject::Udp4, Mode::Flood, 0, 0, Some(20_000_000)),
        (Subject::Shm, Mode::Roundtrip, 1, 32_000, None),
        (Subject::Udp4, Mode::Roundtrip, 1, 64_000, None),
        (Subject::Shm, Mode::Flood, 1, 0, Some(12_000_000)),
        (Subject::Udp4, Mode::Flood, 1, 0, Some(22_000_000)),
    ])
}

/// Results of made-up runs: (transport, mode, round, lap p50 in ns, flood completion in ns),
/// built as a run builds them, from the master's result and the hubs' reports.
#[cfg(test)]
fn example_with(runs: Vec<(Subject, Mode, usize, u64, Option<u64>)>) -> Results<Hubs> {
    let mut modes = Vec::new();
    let mut transports = Vec::new();
    let mut rounds = 0;
    for &(t, m, r, _, _) in &runs {
        if !modes.contains(&m) {
            modes.push(m);
        }
        if !transports.contains(&t) {
            transports.push(t);
        }
        rounds = rounds.max(r + 1);
    }
    let config = Config {
        mode: modes,
        transport: transports,
        rounds,
        ..Config::default()
    };
    let placement = placement(&config);
    let info = |i: usize| ProcInfo {
        role: role_name(i),
        index: i,
        host: Host::Local,
        pid: 1000 + i as u32,
        pinned_cpu: placement[i].cpu,
        allowed_cpus: vec![0, 1],
        last_cpu: i % 2,
        cpu_s: Some(0.1),
    };
    let rows = runs
        .into_iter()
        .map(|(transport, mode, round, lap, completion_ns)| {
            let edge = match transport {
                Subject::Udp4 => EdgeCounts {
                    shm_received: 0,
                    udp_received: config.messages + config.warmup + 1,
                },
                _ => EdgeCounts {
                    shm_received: config.messages + config.warmup + 1,
                    udp_received: 0,
                },
            };
            // p50 = `lap`; the slowest tenth of the laps up to twice as long.
            let mut laps: Vec<u64> = (0..100)
                .map(|k: u64| lap + lap * k.saturating_sub(89) / 10)
                .collect();
            let master = MasterResult {
                probes: 1,
                laps: (mode == Mode::Roundtrip).then(|| Laps::of(&mut laps)),
                completion_ns,
                received: config.messages,
                edge_in: edge,
                process: Some(info(0)),
                ..MasterResult::default()
            };
            let hubs = (1..config.hubs)
                .map(|i| HubReport {
                    forwarded: config.messages + config.warmup + 1,
                    out_of_order: 0,
                    edge_in: edge,
                    process: info(i),
                })
                .collect();
            let mut row = Row::empty(&config, transport, mode);
            row.round = Some(round);
            row.seconds = Some(0.5);
            row.measured(master, hubs, &placement, config.size);
            row
        })
        .collect();
    let ctx = Ctx {
        config: &config,
        pair: None,
        remote: None,
        placement: placement.clone(),
    };
    let setup = make_setup(&ctx, Vec::new(), 0);
    Results::new(crate::Machine::probe(), config, Measured { setup, rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_results_read_back_and_draw() {
        let results = example();
        let value = serde_json::to_value(&results).unwrap();
        // The rows' JSON is what it was before the results were typed.
        let row = &value["rows"][0];
        assert_eq!(row["transport"], "shm");
        assert_eq!(row["mode"], "roundtrip");
        assert_eq!(row["wait"], "block");
        assert_eq!(row["lost"], 0);
        assert!(row.get("completion_s").is_none() && row.get("skipped").is_none());
        assert!(row["link_rate"].is_null() && row["cpu"].is_null());
        assert_eq!(row["edges"][0]["link"], "same host");
        assert_eq!(row["edges"][0]["path"], "shm");
        assert_eq!(row["processes"][0]["host"], "local");
        assert_eq!(value["rows"][1]["edges"][0]["path"], "udp");
        assert_eq!(
            value["config"]["cgroup"],
            serde_json::json!({"used": false})
        );
        assert!(value["config"]["two_hosts"].is_null());
        assert!(value["config"].get("remote").is_none());
        assert!(value["config"]["topology"]
            .as_str()
            .unwrap()
            .contains("hubs/edge0"));

        let back = Results::<Hubs>::from_value(value).unwrap();
        assert_eq!(back.rows.len(), 8);
        let section = Hubs::section(&back).unwrap();
        assert_eq!(section.plots.len(), 1);
        assert_eq!(section.plots[0].file, "hubs.svg");
        assert!(section.sentence.contains(&cite_first(&DDS_HUBS)));
        let table = Hubs::table(&back);
        assert!(
            table.contains("Roundtrip") && table.contains("Flood"),
            "{table}"
        );
        assert!(table.contains("4 shm"), "{table}");
        let summary = Hubs::summary(&back);
        assert_eq!(summary.len(), 4);
        assert!(summary[0].what.contains("Roundtrip") && summary[0].what.contains("shm"));
        assert!(summary
            .iter()
            .all(|l| l.study.is_none() && l.floor.is_none()));
    }

    #[test]
    fn hubs_plot_laps_and_flood_completion_per_transport() {
        let results = example_with(vec![
            (Subject::Shm, Mode::Roundtrip, 0, 30_000, None),
            (Subject::Shm, Mode::Roundtrip, 1, 32_000, None),
            (Subject::Shm, Mode::Roundtrip, 2, 34_000, None),
            (Subject::Udp4, Mode::Roundtrip, 0, 50_000, None),
            (Subject::Shm, Mode::Flood, 0, 0, Some(1_000_000)),
            (Subject::Udp4, Mode::Flood, 0, 0, Some(12_000_000)),
        ]);
        // The suite names the second run's files after its step.
        let sec = Hubs::section(&results)
            .unwrap()
            .named_after(Hubs::NAME, "hubs-2hosts");
        assert_eq!(sec.plots.len(), 1);
        assert_eq!(sec.plots[0].file, "hubs-2hosts.svg");
        for label in [
            "Roundtrip: one lap through 4 processes",
            "Flood: 1000 messages",
            "shm",
            "udp4",
            "p99",
        ] {
            assert!(sec.plots[0].svg.contains(label), "{label} missing");
        }
        // The sentence gives each transport's median lap and completion.
        assert!(
            sec.sentence.contains("shm 32.0 µs") || sec.sentence.contains("shm 32 µs"),
            "{}",
            sec.sentence
        );
        assert!(sec.sentence.contains("udp4 12.00 ms"), "{}", sec.sentence);
    }

    #[test]
    fn configurations_round_trip_with_a_link_rate() {
        let config = Config {
            hosts: 2,
            link_rate: Some(parse_link_rate("100mbit").unwrap()),
            ..Config::default()
        };
        let v = serde_json::to_value(&config).unwrap();
        assert_eq!(v["link_rate"], "100mbit");
        assert_eq!(v["transport"], serde_json::json!(["shm", "udp4"]));
        let back: Config = serde_json::from_value(v).unwrap();
        assert_eq!(back.link_rate.map(|r| r.bps), Some(100_000_000));
        let bad = serde_json::json!({"link_rate": "100mbps"});
        assert!(serde_json::from_value::<Config>(bad).is_err());
        let unknown = serde_json::json!({"hub": 3});
        assert!(serde_json::from_value::<Config>(unknown).is_err());
    }

    #[test]
    fn remote_needs_two_hosts_and_nothing_of_this_machine_only() {
        let remote = |c: Config| Config {
            remote: Some("10.0.0.2".to_owned()),
            ..c
        };
        let err = |c: Config| Hubs::validate(&c).unwrap_err().to_string();
        assert!(err(remote(Config::default())).contains("--hosts 2"));
        let two = Config {
            hosts: 2,
            ..Config::default()
        };
        assert!(Hubs::validate(&remote(Config { ..two.clone() })).is_ok());
        let e = err(remote(Config {
            link_rate: Some(parse_link_rate("1gbit").unwrap()),
            ..two.clone()
        }));
        assert!(e.contains("--link-rate"), "{e}");
        let e = err(remote(Config {
            cpu: Some(0.5),
            ..two.clone()
        }));
        assert!(e.contains("--cpu"), "{e}");
        assert!(err(Config {
            hosts: 3,
            ..Config::default()
        })
        .contains("--hosts"));
        // The shm rows of two machines say why they were skipped.
        let reason = skip_reason(&remote(two), Subject::Shm).unwrap();
        assert!(
            reason.contains("two hosts") && reason.contains("agent"),
            "{reason}"
        );
    }

    #[test]
    fn messages_check() {
        let mut buf = vec![0u8; 256];
        write_message(&mut buf, DATA, 42);
        assert_eq!(header(&buf), Some((DATA, 42)));
        assert!(intact(&buf, 256, DATA, 42));
        assert!(!intact(&buf, 256, DATA, 43));
        assert!(!intact(&buf, 256, WARMUP, 42));
        assert!(!intact(&buf[..255], 256, DATA, 42));
        buf[200] ^= 1;
        assert!(!intact(&buf, 256, DATA, 42));
        assert_eq!(header(&buf[..10]), None);
        let mut small = vec![0u8; HEADER];
        write_message(&mut small, PROBE, 0);
        assert!(intact(&small, HEADER, PROBE, 0));
    }

    #[test]
    fn two_hosts_placement_and_peers() {
        assert_eq!((0..4).map(side_of).collect::<Vec<_>>(), [0, 1, 0, 1]);
        let config = Config {
            hosts: 2,
            remote: Some("10.0.0.2:9000".to_owned()),
            ..Config::default()
        };
        let remote = Remote {
            agent: "10.0.0.2:9000".to_owned(),
            here: Ipv4Addr::new(10, 0, 0, 1),
            there: Ipv4Addr::new(10, 0, 0, 2),
        };
        let ctx = Ctx {
            config: &config,
            pair: None,
            remote: Some(&remote),
            placement: placement(&config),
        };
        let peers = |i| ctx.discovery_of(i).unwrap().peers;
        assert_eq!(
            peers(0),
            [format!("10.0.0.2:{DISCOVERY_PORT}").parse().unwrap()]
        );
        assert_eq!(
            peers(3),
            [format!("10.0.0.1:{DISCOVERY_PORT}").parse().unwrap()]
        );
        assert_eq!(ctx.place_of(1).remote.as_deref(), Some("10.0.0.2:9000"));
        assert!(ctx.place_of(2).remote.is_none() && ctx.place_of(2).netns.is_none());
        let hosts: Vec<Host> = ctx.placement.iter().map(|p| p.host).collect();
        assert_eq!(hosts, [Host::A, Host::B, Host::A, Host::B]);
        // A remote process's CPUs are its machine's business.
        assert!(ctx.placement[1].cpu.is_none() && ctx.placement[3].cpu.is_none());
        let one = Config::default();
        let ctx = Ctx {
            config: &one,
            pair: None,
            remote: None,
            placement: placement(&one),
        };
        assert_eq!(ctx.discovery_of(0), None);
    }

    #[test]
    fn peer_requests_are_bounded() {
        let good = PeerRequest {
            index: 1,
            hubs: 4,
            mode: Mode::Flood,
            transport: Subject::Udp4,
            domain: "d".to_owned(),
            size: 256,
            messages: 1000,
            warmup: 100,
            wait: WaitStrategy::Block,
            host: Host::B,
            cpu: None,
            exit_after: None,
            discovery: Some(Discovery {
                port: DISCOVERY_PORT,
                peers: vec![SocketAddrV4::new(
                    Ipv4Addr::new(10, 0, 0, 1),
                    DISCOVERY_PORT,
                )],
            }),
        };
        assert!(good.check().is_ok());
        let line = serde_json::to_string(&good).unwrap();
        let back: PeerRequest = serde_json::from_str(&line).unwrap();
        assert!(back.check().is_ok());
        for bad in [
            PeerRequest {
                index: 4,
                ..serde_json::from_str(&line).unwrap()
            },
            PeerRequest {
                hubs: 1_000_000,
                ..serde_json::from_str(&line).unwrap()
            },
            PeerRequest {
                messages: u64::MAX,
                ..serde_json::from_str(&line).unwrap()
            },
            PeerRequest {
                warmup: u64::MAX,
                ..serde_json::from_str(&line).unwrap()
            },
            PeerRequest {
                size: 1,
                ..serde_json::from_str(&line).unwrap()
            },
            PeerRequest {
                discovery: Some(Discovery {
                    port: 7651,
                    peers: vec![],
                }),
                ..serde_json::from_str(&line).unwrap()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn control_lines() {
        assert_eq!(serde_json::to_string(&Command::Go).unwrap(), "\"go\"");
        let r: Report = serde_json::from_str("\"ready\"").unwrap();
        assert!(matches!(r, Report::Ready));
        let r: Report = serde_json::from_str("{\"progress\":7}").unwrap();
        assert!(matches!(r, Report::Progress(7)));
    }

    #[test]
    fn parsers() {
        assert_eq!("flood".parse(), Ok(Mode::Flood));
        assert!("ping".parse::<Mode>().is_err());
        assert_eq!("udp4".parse(), Ok(Subject::Udp4));
        assert_eq!("auto".parse(), Ok(Subject::Auto));
        assert!(SUBJECTS.parse("udp6").is_err());
        assert_eq!("block".parse(), Ok(WaitStrategy::Block));
        assert_eq!("none".parse(), Ok(PinMode::None));
    }
}
