//! `ferry lab hubs` (seed 001): the Roundtrip and Flood demonstrators over a ring of hub
//! processes — a master and `--hubs − 1` others (4 in all by default, as in the study), each its
//! own process, joined in a ring by one ferry topic per edge: `hubs/edge0` (master → hub 1),
//! `hubs/edge1` (hub 1 → hub 2), …, `hubs/edge{N−1}` (hub N−1 → master). Delivery is reliable.
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
//! - `--hosts 2`: two network namespaces joined by a veth pair (a private 10.203.x.0/24 inside
//!   them), the master and the even hubs in one, the odd hubs in the other (the study's "2
//!   nodes": master and hub 2 on machine A, hubs 1 and 3 on machine B). Processes find the other
//!   namespace's endpoints through ferry's static peer list (`FERRY_PEERS`: the other
//!   namespace's address; in each namespace one process relays the announcements to the other);
//!   multicast discovery stays off. `--link-rate` puts a `tc tbf` on both veth
//!   ends. The namespaces are removed on every exit path (error and Ctrl-C included).
//! - `--cpu Q`: every hub process (the master included) runs in one cgroup with a CFS quota of Q
//!   CPUs, standing in for slower CPUs (the study scaled the CPU frequency).
//! - Transports run in interleaved rounds (shm udp auto shm udp auto …); each round is a row.
//! - Every wait is bounded; a hub that dies is reported by name; children are killed and
//!   reaped on every exit path.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use clap::Args;
use ferry::{Delivery, IpVersion, Node, Publisher, Qos, Subscriber, WaitStrategy};
use serde::{Deserialize, Serialize};

use super::cgroup::{self, CpuGroup};
use super::{Dir, Machine, Results, Summary};
use crate::error::{bail, note, Context, Error, Result};
use crate::signal;
use crate::table::{print_out, Table};
use crate::units::{format_ns, format_size, parse_size};

// ---------------------------------------------------------------------------------------------
// Options

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Roundtrip,
    Flood,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Roundtrip => "roundtrip",
            Mode::Flood => "flood",
        }
    }
}

fn parse_mode(text: &str) -> Result<Mode, String> {
    match text.trim() {
        "roundtrip" => Ok(Mode::Roundtrip),
        "flood" => Ok(Mode::Flood),
        other => Err(format!("unknown mode {other:?}: use roundtrip or flood")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Shm,
    Udp,
    Auto,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Shm => "shm",
            Transport::Udp => "udp",
            Transport::Auto => "auto",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Transport::Shm => "ferry shared memory on every edge",
            Transport::Udp => "ferry UDP over IPv4 on every edge (MTU 1500: 1472-byte datagrams)",
            Transport::Auto => {
                "ferry auto: shared memory where both ends of an edge share a host (network \
                 namespace), UDP where they do not"
            }
        }
    }

    fn qos(self, size: usize, wait: WaitStrategy) -> Qos {
        let q = Qos::default()
            .delivery(Delivery::Reliable)
            .wait(wait)
            .max_message_size(size)
            .send_timeout(SEND_TIMEOUT);
        match self {
            Transport::Shm => q.transport(ferry::Transport::Shm),
            Transport::Udp => q
                .transport(ferry::Transport::Udp)
                .ip_version(IpVersion::V4)
                .mtu(UDP_MTU),
            Transport::Auto => q
                .transport(ferry::Transport::Auto)
                .ip_version(IpVersion::V4)
                .mtu(UDP_MTU),
        }
    }
}

fn parse_transport(text: &str) -> Result<Transport, String> {
    match text.trim() {
        "shm" => Ok(Transport::Shm),
        "udp" | "udp4" => Ok(Transport::Udp),
        "auto" => Ok(Transport::Auto),
        other => Err(format!(
            "unknown transport {other:?}: use shm, udp (udp4) or auto"
        )),
    }
}

fn parse_wait(text: &str) -> Result<WaitStrategy, String> {
    match text.trim() {
        "spin" => Ok(WaitStrategy::Spin),
        "block" => Ok(WaitStrategy::Block),
        "adaptive" => Ok(WaitStrategy::Adaptive),
        other => Err(format!(
            "unknown wait strategy {other:?}: use spin, block or adaptive"
        )),
    }
}

fn wait_name(w: WaitStrategy) -> &'static str {
    match w {
        WaitStrategy::Spin => "spin",
        WaitStrategy::Block => "block",
        WaitStrategy::Adaptive => "adaptive",
    }
}

/// `--pin`: spread the processes over the CPUs this process may use, or leave them to the
/// scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinMode {
    Spread,
    None,
}

fn parse_pin(text: &str) -> Result<PinMode, String> {
    match text.trim() {
        "spread" => Ok(PinMode::Spread),
        "none" => Ok(PinMode::None),
        other => Err(format!(
            "unknown pinning {other:?}: use spread (process i on the i-th available CPU, round \
             robin) or none"
        )),
    }
}

/// A CPU budget over every hub process: a number of CPUs, or none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuBudget(pub Option<f64>);

fn parse_cpu_budget(text: &str) -> Result<CpuBudget, String> {
    cgroup::parse_cpu(text).map(CpuBudget)
}

/// A link rate in bits per second (`tc tbf rate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkRate {
    pub bps: u64,
}

impl LinkRate {
    /// `100mbit`, `1gbit`, `1500kbit`: the largest unit that divides the rate.
    pub fn name(self) -> String {
        let b = self.bps;
        if b % 1_000_000_000 == 0 {
            format!("{}gbit", b / 1_000_000_000)
        } else if b % 1_000_000 == 0 {
            format!("{}mbit", b / 1_000_000)
        } else if b % 1000 == 0 {
            format!("{}kbit", b / 1000)
        } else {
            format!("{b}bit")
        }
    }

    /// The tbf bucket: 2 ms of traffic, at least 32 KiB (a few full frames and small bursts).
    fn burst_bytes(self) -> u64 {
        (self.bps / 8 / 500).max(32 * 1024)
    }
}

/// The queue a tbf may hold before it drops, as tc's `latency`.
const TBF_LATENCY_MS: u64 = 50;

pub fn parse_link_rate(text: &str) -> Result<LinkRate, String> {
    let invalid = || {
        format!(
            "invalid link rate {text:?}: expected bits per second such as 100mbit, 1gbit, \
             500kbit (or 100M, 1G)"
        )
    };
    let lower = text.trim().to_ascii_lowercase();
    let body = lower.strip_suffix("bit").unwrap_or(&lower);
    let (number, scale) = match body.as_bytes().last() {
        Some(b'k') => (&body[..body.len() - 1], 1e3),
        Some(b'm') => (&body[..body.len() - 1], 1e6),
        Some(b'g') => (&body[..body.len() - 1], 1e9),
        _ => (body, 1.0),
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(invalid());
    }
    let value: f64 = number.parse().map_err(|_| invalid())?;
    let bps = value * scale;
    if !(bps.is_finite() && (8_000.0..=100e9).contains(&bps)) {
        return Err(format!(
            "link rate {text:?} is out of range (8kbit to 100gbit)"
        ));
    }
    Ok(LinkRate {
        bps: bps.round() as u64,
    })
}

#[derive(Debug, Args)]
pub struct HubsArgs {
    /// roundtrip (one message around the ring at a time, each lap timed) or flood (--messages
    /// back to back, timed until all are back); comma-separated to run both
    #[arg(long, value_name = "MODE", value_delimiter = ',', value_parser = parse_mode, default_value = "roundtrip")]
    pub mode: Vec<Mode>,

    /// Processes in the ring, the master included (the study: 4 — a master and 3 hubs)
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub hubs: usize,

    /// Recorded laps per round (roundtrip) or messages per flood (the study: 1000)
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub messages: u64,

    /// Message size in bytes, with optional K or M (the study gives none; 256 B is a small one)
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "256")]
    pub size: usize,

    /// Transports, comma-separated, in the order each round runs them: shm, udp (udp4), auto
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_transport, default_value = "shm,udp")]
    pub transport: Vec<Transport>,

    /// Interleaved rounds: every round runs every mode and transport once, each a fresh ring
    #[arg(long, value_name = "R", default_value_t = 3)]
    pub rounds: usize,

    /// Unrecorded laps (roundtrip) or messages of an unrecorded flood before each measurement
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub warmup: u64,

    /// 1: every process on this host; 2: two network namespaces joined by a veth pair, the
    /// master and the even hubs in one, the odd hubs in the other (needs root, ip)
    #[arg(long, value_name = "1|2", value_parser = clap::value_parser!(u8).range(1..=2), default_value_t = 1)]
    pub hosts: u8,

    /// With --hosts 2: limit the veth link to RATE (tc tbf on both ends), e.g. 100mbit, 1gbit
    #[arg(long = "link-rate", value_name = "RATE", value_parser = parse_link_rate)]
    pub link_rate: Option<LinkRate>,

    /// Put every hub process (the master included) in one cgroup with a CPU quota of Q CPUs,
    /// standing in for slower CPUs (needs root), or none
    #[arg(long, value_name = "Q", value_parser = parse_cpu_budget, default_value = "none")]
    pub cpu: CpuBudget,

    /// How every process waits for a message: block (the default here: the processes outnumber
    /// the CPUs, and a waiter that spins holds a CPU the next hub needs), adaptive (ferry's
    /// default: spins 100 µs, then blocks) or spin
    #[arg(long, value_name = "W", value_parser = parse_wait, default_value = "block")]
    pub wait: WaitStrategy,

    /// spread: process i runs on the i-th CPU this process may use (round robin); none: the
    /// scheduler places them
    #[arg(long, value_name = "spread|none", value_parser = parse_pin, default_value = "spread")]
    pub pin: PinMode,

    /// Write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// Testing: hub 1 exits (status 3) after forwarding N messages, to show how a dead hub is
    /// reported
    #[arg(long = "fault-hub-exit-after", value_name = "N", hide = true)]
    pub fault_hub_exit_after: Option<u64>,
}

/// ferry's UDP transport is given this MTU (1472-byte IPv4 datagrams).
const UDP_MTU: usize = 1500;
/// The smallest message: the 16-byte header (sequence number, phase).
const HEADER: usize = 16;
const MAX_SIZE: usize = 64 << 20;
const MAX_HUBS: usize = 16;
/// How long processes may take to start, attach, find each other (across namespaces: discovery
/// every 0.5 s) and pass a first probe around the ring.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the master waits for a lap, or for any progress of a flood.
const LAP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the main process lets the master run without a progress line.
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
/// The discovery port under --hosts 2 (one per namespace, as one per host in practice).
const DISCOVERY_PORT: u16 = 7651;
/// Variables that would point discovery elsewhere; the lab sets its own.
const DISCOVERY_VARS: [&str; 6] = [
    "FERRY_PEERS",
    "FERRY_DISCOVERY",
    "FERRY_DISCOVERY_IFACE",
    "FERRY_DISCOVERY_GROUP",
    "FERRY_DISCOVERY_PORT",
    "FERRY_IMPAIR",
];

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
// What the processes report

/// Where one process ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ProcInfo {
    role: String,
    index: usize,
    /// `local` (one host), or namespace `A` / `B` (--hosts 2).
    host: String,
    pid: u32,
    /// The CPU it was pinned to, if any.
    pinned_cpu: Option<usize>,
    /// The CPUs it was allowed to run on.
    allowed_cpus: Vec<usize>,
    /// The CPU its main thread ran on when it reported.
    last_cpu: usize,
    /// CPU time of the whole process (user + system, /proc/self/stat, 10 ms resolution).
    cpu_s: Option<f64>,
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

fn process_info(args: &PeerArgs) -> ProcInfo {
    ProcInfo {
        role: role_name(args.index),
        index: args.index,
        host: args.host.clone(),
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
        let s = Summary::of(laps);
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

// ---------------------------------------------------------------------------------------------
// Results

#[derive(Debug, Serialize)]
struct Config {
    modes: Vec<&'static str>,
    hubs: usize,
    processes: String,
    messages: u64,
    size_bytes: usize,
    size_note: &'static str,
    warmup: u64,
    rounds: usize,
    transports: Vec<&'static str>,
    transport_descriptions: std::collections::BTreeMap<&'static str, &'static str>,
    topology: String,
    delivery: &'static str,
    wait: &'static str,
    wait_note: &'static str,
    roundtrip: &'static str,
    flood: &'static str,
    probe: &'static str,
    hosts: u8,
    two_hosts: Option<serde_json::Value>,
    link_rate: Option<String>,
    cpu: Option<f64>,
    cgroup: serde_json::Value,
    placement: Vec<Placement>,
    pinning: serde_json::Value,
    skipped: Vec<Skipped>,
    timeouts: serde_json::Value,
    clock: &'static str,
    study: &'static str,
    started_unix_s: u64,
}

#[derive(Debug, Clone, Serialize)]
struct Placement {
    role: String,
    index: usize,
    host: String,
    cpu: Option<usize>,
}

#[derive(Debug, Serialize)]
struct Skipped {
    transport: &'static str,
    reason: String,
}

#[derive(Debug, Clone, Serialize)]
struct EdgeRow {
    topic: String,
    from: String,
    to: String,
    /// `same host` or `across hosts`.
    link: &'static str,
    /// shm, udp, both or none: the path the messages took, from the subscriber's statistics.
    path: &'static str,
    shm_received: u64,
    udp_received: u64,
}

#[derive(Debug, Serialize)]
struct Row {
    transport: &'static str,
    mode: &'static str,
    hubs: usize,
    hosts: u8,
    size_bytes: usize,
    messages: u64,
    round: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lap_p50_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lap_p90_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lap_p99_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lap_max_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lap_min_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lap_mean_ns: Option<f64>,
    /// lap p50 / hubs: one edge's share of a lap.
    #[serde(skip_serializing_if = "Option::is_none")]
    hop_p50_ns: Option<f64>,
    /// Roundtrip: the recorded laps added up; flood: the completion time.
    #[serde(skip_serializing_if = "Option::is_none")]
    total_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    completion_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    messages_per_s: Option<f64>,
    /// Payload bits per second of a flood (messages_per_s × size × 8).
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_mbit_per_s: Option<f64>,
    received: Option<u64>,
    lost: Option<u64>,
    corrupt: Option<u64>,
    out_of_order: Option<u64>,
    duplicates: Option<u64>,
    /// Why the run stopped early (messages lost), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    link_rate: Option<String>,
    cpu: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    throttled_periods: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    throttled_ms: Option<f64>,
    wait: &'static str,
    probes: Option<u64>,
    edges: Vec<EdgeRow>,
    processes: Vec<ProcInfo>,
    seconds: Option<f64>,
}

impl Row {
    fn empty(ctx: &Ctx<'_>, transport: Transport, mode: Mode) -> Row {
        Row {
            transport: transport.name(),
            mode: mode.name(),
            hubs: ctx.args.hubs,
            hosts: ctx.args.hosts,
            size_bytes: ctx.args.size,
            messages: ctx.args.messages,
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
            link_rate: ctx.args.link_rate.map(LinkRate::name),
            cpu: ctx.args.cpu.0,
            throttled_periods: None,
            throttled_ms: None,
            wait: wait_name(ctx.args.wait),
            probes: None,
            edges: Vec::new(),
            processes: Vec::new(),
            seconds: None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The main process

/// Which side of the two hosts process `index` runs on: the master and the even hubs on A.
fn side_of(index: usize) -> usize {
    index % 2
}

struct Ctx<'a> {
    args: &'a HubsArgs,
    hosts: Option<&'a Hosts>,
    placement: Vec<Placement>,
}

impl Ctx<'_> {
    fn skip_reason(&self, t: Transport) -> Option<String> {
        (self.args.hosts == 2 && t == Transport::Shm).then(|| {
            "skipped: shared memory cannot join processes on two hosts (the namespaces stand \
             for two machines); use udp or auto"
                .to_owned()
        })
    }
}

fn validate(args: &HubsArgs) -> Result<()> {
    super::distinct_list("--mode", &args.mode, |m| m.name().to_owned())?;
    super::distinct_list("--transport", &args.transport, |t| t.name().to_owned())?;
    if !(2..=MAX_HUBS).contains(&args.hubs) {
        bail!("--hubs must be between 2 and {MAX_HUBS} (the master included)");
    }
    if !(1..=10_000_000).contains(&args.messages) {
        bail!("--messages must be between 1 and 10000000");
    }
    if args.warmup > 10_000_000 {
        bail!("--warmup must be at most 10000000");
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
    if args.link_rate.is_some() && args.hosts != 2 {
        bail!("--link-rate limits the link between two hosts: it needs --hosts 2");
    }
    if args.cpu.0.is_some() {
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

fn placement(args: &HubsArgs) -> Vec<Placement> {
    let allowed = super::allowed_cpus();
    (0..args.hubs)
        .map(|i| Placement {
            role: role_name(i),
            index: i,
            host: match args.hosts {
                2 => ["A", "B"][side_of(i)].to_owned(),
                _ => "local".to_owned(),
            },
            cpu: match args.pin {
                PinMode::Spread if !allowed.is_empty() => Some(allowed[i % allowed.len()]),
                _ => None,
            },
        })
        .collect()
}

fn describe_placement(placement: &[Placement]) -> String {
    let allowed = super::allowed_cpus();
    let mut by_cpu: std::collections::BTreeMap<usize, Vec<&str>> = Default::default();
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

pub fn run(args: HubsArgs) -> Result<()> {
    validate(&args)?;
    let started = super::unix_time();
    let placement = placement(&args);
    // Created before any process and dropped after all of them (also on error and Ctrl-C).
    let hosts = match args.hosts {
        2 => Some(Hosts::create(args.link_rate)?),
        _ => None,
    };
    let ctx = Ctx {
        args: &args,
        hosts: hosts.as_ref(),
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
        match &hosts {
            Some(h) => format!(
                "; two hosts: namespaces {} (A, {}) and {} (B, {})",
                h.ns[0], h.addr[0], h.ns[1], h.addr[1]
            ),
            None => String::new(),
        },
        match args.cpu.0 {
            Some(c) => format!("; CPU quota {c} CPU over all of them"),
            None => String::new(),
        }
    );

    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for &t in &args.transport {
        if let Some(reason) = ctx.skip_reason(t) {
            note!("  {}: {reason}", t.name());
            for &mode in &args.mode {
                let mut row = Row::empty(&ctx, t, mode);
                row.skipped = Some(reason.clone());
                rows.push(row);
            }
            skipped.push(Skipped {
                transport: t.name(),
                reason,
            });
        }
    }
    let mut problems = Vec::new();
    let mut run_index = 0usize;
    for round in 0..args.rounds {
        for &mode in &args.mode {
            for &transport in &args.transport {
                if ctx.skip_reason(transport).is_some() {
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
                        row.transport,
                        row.mode,
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

    print_out(&render(&ctx, &rows))?;
    if let Some(path) = &args.json {
        let config = make_config(&ctx, skipped, started);
        Results::new("hubs", Machine::probe(), config, rows).write_json(path)?;
        note!("wrote {}", path.display());
    }
    drop(hosts);
    if !problems.is_empty() {
        bail!(
            "messages went missing or arrived damaged (reliable delivery promises none): {}",
            problems.join("; ")
        );
    }
    Ok(())
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
        row.transport,
        row.mode,
        row.lost.unwrap_or(0),
        row.error
            .as_ref()
            .map_or(String::new(), |e| format!(" ({e})")),
        row.seconds.unwrap_or(0.0)
    )
}

fn make_config(ctx: &Ctx<'_>, skipped: Vec<Skipped>, started: u64) -> Config {
    let args = ctx.args;
    let n = args.hubs;
    let chain: Vec<String> = (0..=n).map(|i| role_name(i % n)).collect();
    let cgroup = match args.cpu.0 {
        None => serde_json::json!({ "used": false }),
        Some(c) => serde_json::json!({
            "used": true,
            "version": cgroup::detect(),
            "dir": match cgroup::detect() {
                Some(cgroup::Version::V1) => format!("/sys/fs/cgroup/cpu/ferry-lab-{}-hubs<run>", std::process::id()),
                _ => format!("/sys/fs/cgroup/ferry-lab-{}-hubs<run>", std::process::id()),
            },
            "period_us": cgroup::PERIOD_US,
            "quota_us": (c * cgroup::PERIOD_US as f64).round() as u64,
            "cpus": c,
            "over": format!("all {n} hub processes together (the master included); created for each run, removed after it"),
            "meaning": "stands in for slower CPUs (the study scaled the CPU frequency)",
        }),
    };
    let pinning = serde_json::json!({
        "mode": match args.pin { PinMode::Spread => "spread", PinMode::None => "none" },
        "available_cpus": super::allowed_cpus(),
        "summary": describe_placement(&ctx.placement),
        "note": "the processes outnumber the CPUs: they take turns on them, so a lap includes the scheduler's hand-overs; the rows say where each process ran (allowed_cpus, last_cpu) and how much CPU it used",
    });
    Config {
        modes: args.mode.iter().map(|m| m.name()).collect(),
        hubs: n,
        processes: format!("{n} processes: the master and {} hubs", n - 1),
        messages: args.messages,
        size_bytes: args.size,
        size_note: "the study names no message size; the default 256 B is a small message",
        warmup: args.warmup,
        rounds: args.rounds,
        transports: args.transport.iter().map(|t| t.name()).collect(),
        transport_descriptions: args
            .transport
            .iter()
            .map(|t| (t.name(), t.describe()))
            .collect(),
        topology: format!(
            "ring: {}; one topic per edge, hubs/edge0 … hubs/edge{} (edge i: process i → process i+1)",
            chain.join(" → "),
            n - 1
        ),
        delivery: "reliable",
        wait: wait_name(args.wait),
        wait_note: "the default is block, not ferry's default adaptive: with more processes than CPUs, a waiter that spins (adaptive spins 100 µs before it blocks) holds the CPU the next hub in the ring needs, and every such hand-over costs the spin (on 2 CPUs, 4 processes: shm laps about 7× longer with adaptive than with block)",
        roundtrip: "the master sends one message and waits until it has come back through every hub; a lap is the time from before the master writes the message until it has it back and has checked every byte; hubs copy each message into a loan of their outgoing topic and send it",
        flood: "the master's sender thread (on the master's CPU) pushes every message back to back (held back only by reliable back-pressure) while its main thread takes them back; every hub forwards each message as soon as it has it; completion is the time from the first send until the master has every message back; every message is checked (every byte, order, duplicates) and what never came back is counted as lost",
        probe: "before the warm-up the master sends probes around the ring (one every 100 ms) until one comes back, so every edge is connected",
        hosts: args.hosts,
        two_hosts: ctx.hosts.map(Hosts::config),
        link_rate: args.link_rate.map(LinkRate::name),
        cpu: args.cpu.0,
        cgroup,
        placement: ctx.placement.clone(),
        pinning,
        skipped,
        timeouts: serde_json::json!({
            "start_s": START_TIMEOUT.as_secs(),
            "lap_or_flood_progress_s": LAP_TIMEOUT.as_secs(),
            "master_watchdog_s": WATCHDOG.as_secs(),
            "exit_s": EXIT_TIMEOUT.as_secs(),
            "close_s": CLOSE_TIMEOUT.as_secs(),
            "send_s": SEND_TIMEOUT.as_secs(),
        }),
        clock: "CLOCK_MONOTONIC (std::time::Instant) in the master",
        study: "seed 001 (DDS performance study): Roundtrip and Flood demonstrators over 4 hubs (1 master, 3 others), floods of 1000 messages; 1 node vs 2 nodes (master and hub 2 on machine A, hubs 1 and 3 on machine B); effect of CPU speed",
        started_unix_s: started,
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

fn paths(row: &Row) -> String {
    let mut shm = 0;
    let mut udp = 0;
    for e in &row.edges {
        match e.path {
            "shm" => shm += 1,
            "udp" => udp += 1,
            _ => {}
        }
    }
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

fn render(ctx: &Ctx<'_>, rows: &[Row]) -> String {
    let args = ctx.args;
    let mut out = String::new();
    let hosts = match (args.hosts, args.link_rate) {
        (2, Some(r)) => format!("two hosts (network namespaces), link {}", r.name()),
        (2, None) => "two hosts (network namespaces), link not limited".to_owned(),
        _ => "one host".to_owned(),
    };
    let cpu = args
        .cpu
        .0
        .map_or("no CPU quota".to_owned(), |c| format!("CPU quota {c} CPU"));
    for &mode in &args.mode {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.mode == mode.name()).collect();
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
                        r.transport.to_owned(),
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
                    args.hubs,
                    args.messages,
                    format_size(args.size),
                    wait_name(args.wait),
                    describe_placement(&ctx.placement),
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
                        r.transport.to_owned(),
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
                    args.messages,
                    format_size(args.size),
                    args.hubs,
                    wait_name(args.wait),
                    describe_placement(&ctx.placement),
                    t.render()
                ));
            }
        }
        for r in mine.iter().filter(|r| r.skipped.is_some()) {
            out.push_str(&format!(
                "{}: {}\n",
                r.transport,
                r.skipped.as_deref().unwrap_or_default()
            ));
        }
        // The median over the rounds, per transport.
        let mut s = Table::new(&["transport", ">rounds", "median over the rounds"]);
        for &tr in &args.transport {
            let of: Vec<&&Row> = mine
                .iter()
                .filter(|r| r.transport == tr.name() && r.skipped.is_none())
                .collect();
            if of.is_empty() {
                continue;
            }
            let text = match mode {
                Mode::Roundtrip => median(
                    of.iter()
                        .filter_map(|r| r.lap_p50_ns.map(|v| v as f64))
                        .collect(),
                )
                .map_or("-".to_owned(), |m| format!("lap p50 {}", format_ns(m))),
                Mode::Flood => {
                    let c = median(of.iter().filter_map(|r| r.completion_s).collect());
                    let m = median(of.iter().filter_map(|r| r.messages_per_s).collect());
                    match (c, m) {
                        (Some(c), Some(m)) => {
                            format!("completion {} ({m:.0} messages/s)", format_ns(c * 1e9))
                        }
                        _ => "-".to_owned(),
                    }
                }
            };
            s.row(vec![tr.name().to_owned(), of.len().to_string(), text]);
        }
        out.push('\n');
        out.push_str(&s.render());
    }
    out
}

/// One run: a fresh ring of processes for one transport and mode.
fn trial(
    ctx: &Ctx<'_>,
    transport: Transport,
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
    transport: Transport,
    mode: Mode,
    round: usize,
    run_index: usize,
    domain: &str,
) -> Result<Row> {
    let started = Instant::now();
    let n = ctx.args.hubs;
    // Declared before the ring, so that it is removed after the processes were reaped.
    let group = ctx
        .args
        .cpu
        .0
        .map(|c| CpuGroup::create(c, &format!("hubs{run_index}")))
        .transpose()?;
    let mut ring = Ring::spawn(ctx, transport, mode, domain)?;
    if let Some(g) = &group {
        for p in &ring.procs {
            let pid = p.child.id();
            g.add(pid)
                .context(format!("cannot move {} into the cgroup", p.role))?;
            if !g.contains(pid) {
                bail!(
                    "{} (pid {pid}) is not in {} after the move",
                    p.role,
                    g.path().display()
                );
            }
        }
    }
    for p in &mut ring.procs {
        p.send("go")?;
    }
    // Every process attached, and its publisher knows its subscriber.
    let until = Instant::now() + START_TIMEOUT + Duration::from_secs(5);
    let mut ready = vec![false; n];
    while ready.iter().any(|r| !r) {
        let (i, line) = ring.next(
            until,
            "while the ring was starting",
            "the ring did not start in time",
        )?;
        if line.trim() == "ready" {
            ready[i] = true;
        } else {
            bail!("unexpected output from {}: {line:?}", ring.procs[i].role);
        }
    }
    ring.procs[0].send("start")?;
    let mut watchdog = Instant::now() + START_TIMEOUT + WATCHDOG;
    let master: MasterResult = loop {
        let (i, line) = ring.next(
            watchdog,
            "during the run",
            &format!("the master made no progress for {WATCHDOG:?}"),
        )?;
        if i == 0 {
            if line.starts_with("progress") {
                watchdog = Instant::now() + WATCHDOG;
                continue;
            }
            if let Some(json) = line.strip_prefix("result ") {
                break serde_json::from_str(json)
                    .context(format!("the master's result {json:?}"))?;
            }
        }
        bail!("unexpected output from {}: {line:?}", ring.procs[i].role);
    };
    let throttling = group.as_ref().map(CpuGroup::throttling);
    let hubs = ring.finish()?;
    drop(ring);
    drop(group);

    let mut row = Row::empty(ctx, transport, mode);
    row.round = Some(round);
    row.seconds = Some(started.elapsed().as_secs_f64());
    row.probes = Some(master.probes);
    row.received = Some(master.received);
    row.lost = Some(master.lost);
    row.corrupt = Some(master.corrupt);
    row.out_of_order = Some(master.out_of_order + hubs.iter().map(|h| h.out_of_order).sum::<u64>());
    row.duplicates = Some(master.duplicates);
    row.error = master.aborted.clone();
    row.throttled_periods = throttling.map(|t| t.throttled_periods);
    row.throttled_ms = throttling.map(|t| t.throttled_ns as f64 / 1e6);
    if let Some(l) = master.laps {
        row.lap_p50_ns = Some(l.p50_ns);
        row.lap_p90_ns = Some(l.p90_ns);
        row.lap_p99_ns = Some(l.p99_ns);
        row.lap_max_ns = Some(l.max_ns);
        row.lap_min_ns = Some(l.min_ns);
        row.lap_mean_ns = Some(l.mean_ns);
        row.hop_p50_ns = Some(l.p50_ns as f64 / n as f64);
        row.total_s = Some(l.total_ns as f64 / 1e9);
    }
    if let Some(c) = master.completion_ns {
        let secs = c as f64 / 1e9;
        row.completion_s = Some(secs);
        row.total_s = Some(secs);
        if secs > 0.0 {
            let rate = master.received as f64 / secs;
            row.messages_per_s = Some(rate);
            row.payload_mbit_per_s = Some(rate * ctx.args.size as f64 * 8.0 / 1e6);
        }
    }
    // Edge i runs from process i to process i+1; process j reports its incoming edge j−1.
    let incoming = |j: usize| -> EdgeCounts {
        if j == 0 {
            master.edge_in
        } else {
            hubs[j - 1].edge_in
        }
    };
    for e in 0..n {
        let to = (e + 1) % n;
        let c = incoming(to);
        row.edges.push(EdgeRow {
            topic: edge_topic(e),
            from: role_name(e),
            to: role_name(to),
            link: if ctx.placement[e].host == ctx.placement[to].host {
                "same host"
            } else {
                "across hosts"
            },
            path: match (c.shm_received > 0, c.udp_received > 0) {
                (true, false) => "shm",
                (false, true) => "udp",
                (true, true) => "both",
                (false, false) => "none",
            },
            shm_received: c.shm_received,
            udp_received: c.udp_received,
        });
    }
    row.processes = master
        .process
        .into_iter()
        .chain(hubs.into_iter().map(|h| h.process))
        .collect();
    Ok(row)
}

/// A child process of the ring: killed and reaped if dropped before it exited.
struct Proc {
    role: String,
    child: Child,
    stdin: Option<ChildStdin>,
    exited: Option<ExitStatus>,
}

impl Proc {
    fn send(&mut self, line: &str) -> Result<()> {
        let Some(stdin) = self.stdin.as_mut() else {
            bail!("{}'s input is already closed", self.role);
        };
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .context(format!("cannot tell {} to {line}", self.role))
    }

    fn poll(&mut self) -> Result<Option<ExitStatus>> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait()?;
        }
        Ok(self.exited)
    }

    /// The exit status, waiting at most until `until`; an error on Ctrl-C.
    fn wait_until(&mut self, until: Instant) -> Result<Option<ExitStatus>> {
        loop {
            if let Some(s) = self.poll()? {
                return Ok(Some(s));
            }
            if Instant::now() >= until {
                return Ok(None);
            }
            signal::check()?;
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn died(&mut self, what: &str) -> Error {
        let pid = self.child.id();
        let status = self
            .wait_until(Instant::now() + Duration::from_secs(1))
            .ok()
            .flatten()
            .map_or("still running, but its output closed".to_owned(), |s| {
                s.to_string()
            });
        Error::msg(format!(
            "{} (pid {pid}) exited {what} ({status}); its own message, if any, is above",
            self.role
        ))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

enum Msg {
    Line(usize, String),
    Eof(usize),
}

/// The processes of one run, and the lines they print.
struct Ring {
    procs: Vec<Proc>,
    rx: mpsc::Receiver<Msg>,
}

impl Ring {
    fn spawn(ctx: &Ctx<'_>, transport: Transport, mode: Mode, domain: &str) -> Result<Ring> {
        let args = ctx.args;
        let n = args.hubs;
        let exe = std::env::current_exe().context("cannot find the ferry executable")?;
        let (tx, rx) = mpsc::channel();
        let mut procs: Vec<Proc> = Vec::with_capacity(n);
        for (i, place) in ctx.placement.iter().enumerate() {
            let mut cmd = match ctx.hosts {
                Some(h) => {
                    let mut c = Command::new(&h.ip);
                    c.args(["netns", "exec", &h.ns[side_of(i)]]).arg(&exe);
                    c
                }
                None => Command::new(&exe),
            };
            cmd.args(["lab-peer", "hubs"])
                .args(["--index", &i.to_string()])
                .args(["--hubs", &n.to_string()])
                .args(["--mode", mode.name()])
                .args(["--transport", transport.name()])
                .args(["--domain", domain])
                .args(["--size", &args.size.to_string()])
                .args(["--messages", &args.messages.to_string()])
                .args(["--warmup", &args.warmup.to_string()])
                .args(["--wait", wait_name(args.wait)])
                .args(["--host", &place.host]);
            if let Some(cpu) = place.cpu {
                cmd.args(["--cpu", &cpu.to_string()]);
            }
            if let (1, Some(k)) = (i, args.fault_hub_exit_after) {
                cmd.args(["--exit-after", &k.to_string()]);
            }
            for var in DISCOVERY_VARS {
                cmd.env_remove(var);
            }
            if let Some(h) = ctx.hosts {
                cmd.env("FERRY_DISCOVERY_PORT", DISCOVERY_PORT.to_string())
                    .env("FERRY_PEERS", h.peers_of(i));
            }
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            let role = role_name(i);
            let mut child = super::spawn_child(&mut cmd)
                .context(format!("cannot start {role} ({})", exe.display()))?;
            let stdin = child.stdin.take();
            let stdout = child.stdout.take();
            procs.push(Proc {
                role,
                child,
                stdin,
                exited: None,
            });
            if let Some(out) = stdout {
                let tx = tx.clone();
                std::thread::Builder::new()
                    .name(format!("hubs-out-{i}"))
                    .spawn(move || {
                        for line in BufReader::new(out).lines() {
                            let Ok(line) = line else { break };
                            if tx.send(Msg::Line(i, line)).is_err() {
                                return;
                            }
                        }
                        let _ = tx.send(Msg::Eof(i));
                    })
                    .context("cannot start a thread")?;
            }
        }
        Ok(Ring { procs, rx })
    }

    /// The next line any process printed, by `until` (else the error `late`). Any process that
    /// exits meanwhile is an error (they exit only when told to, in `finish`), as is Ctrl-C.
    fn next(&mut self, until: Instant, when: &str, late: &str) -> Result<(usize, String)> {
        loop {
            signal::check()?;
            match self.rx.recv_timeout(Duration::from_millis(5)) {
                Ok(Msg::Line(i, line)) => return Ok((i, line)),
                Ok(Msg::Eof(i)) => return Err(self.procs[i].died(when)),
                Err(_) => {}
            }
            for p in &mut self.procs {
                if p.poll()?.is_some() {
                    return Err(p.died(when));
                }
            }
            if Instant::now() >= until {
                bail!("{late}; stopped every process");
            }
        }
    }

    /// Tells every process to stop (closes its input), collects the hubs' reports and checks
    /// that every process exited successfully, within EXIT_TIMEOUT.
    fn finish(&mut self) -> Result<Vec<HubReport>> {
        let n = self.procs.len();
        for p in &mut self.procs {
            p.stdin = None;
        }
        let until = Instant::now() + EXIT_TIMEOUT;
        let mut reports: Vec<Option<HubReport>> = vec![None; n];
        let mut eof = vec![false; n];
        while eof.iter().any(|e| !e) {
            signal::check()?;
            match self.rx.recv_timeout(Duration::from_millis(5)) {
                Ok(Msg::Line(i, line)) => {
                    if let Some(json) = line.strip_prefix("report ") {
                        reports[i] = Some(
                            serde_json::from_str(json)
                                .context(format!("{}'s report {json:?}", self.procs[i].role))?,
                        );
                    }
                }
                Ok(Msg::Eof(i)) => eof[i] = true,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if Instant::now() >= until {
                let late: Vec<&str> = (0..n)
                    .filter(|&i| !eof[i])
                    .map(|i| self.procs[i].role.as_str())
                    .collect();
                bail!(
                    "{} did not finish within {EXIT_TIMEOUT:?} after the run",
                    late.join(", ")
                );
            }
        }
        for p in &mut self.procs {
            match p.wait_until(until)? {
                Some(s) if s.success() => {}
                Some(s) => bail!("{} failed at the end of the run ({s})", p.role),
                None => bail!(
                    "{} did not exit within {EXIT_TIMEOUT:?} after the run",
                    p.role
                ),
            }
        }
        reports
            .into_iter()
            .enumerate()
            .skip(1)
            .map(|(i, r)| {
                r.ok_or_else(|| Error::msg(format!("{} exited without its report", role_name(i))))
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Two hosts: network namespaces joined by a veth pair

/// Two network namespaces and the veth pair between them; removed on drop.
struct Hosts {
    ip: PathBuf,
    ns: [String; 2],
    dev: [String; 2],
    /// IPv4 addresses of the two ends (without the prefix length).
    addr: [String; 2],
    subnet: String,
    /// The tc commands run, if a rate was set.
    tc: Vec<String>,
    link: Option<LinkRate>,
}

/// Finds an executable by name in PATH, then in the sbin directories root's PATH has.
fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn run_tool(tool: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context(format!("cannot run {}", tool.display()))?;
    if !out.status.success() {
        bail!(
            "{} {} failed ({}): {}",
            tool.display(),
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

const NS_PREFIX: &str = "ferry-hubs-";

impl Hosts {
    /// What --hosts 2 needs that this machine lacks, if anything.
    fn missing(link: Option<LinkRate>) -> Result<(PathBuf, Option<PathBuf>)> {
        let mut missing = Vec::new();
        if !rustix::process::geteuid().is_root() {
            missing.push(
                "root (creating network namespaces and veth pairs needs CAP_NET_ADMIN; run as root, or use --hosts 1)"
                    .to_owned(),
            );
        }
        let ip = find_tool("ip");
        if ip.is_none() {
            missing.push(
                "the ip command (iproute2), not found in PATH or /usr/sbin, /sbin".to_owned(),
            );
        }
        let tc = link.and_then(|_| find_tool("tc"));
        if link.is_some() && tc.is_none() {
            missing.push(
                "the tc command (iproute2) for --link-rate, not found in PATH or /usr/sbin, /sbin"
                    .to_owned(),
            );
        }
        match ip {
            Some(ip) if missing.is_empty() => Ok((ip, tc)),
            _ => bail!("--hosts 2 needs {}", missing.join("; and ")),
        }
    }

    fn create(link: Option<LinkRate>) -> Result<Hosts> {
        let (ip, tc) = Hosts::missing(link)?;
        sweep_stale(&ip);
        let pid = std::process::id();
        let third = pid % 250 + 1;
        let mut hosts = Hosts {
            ip,
            ns: [format!("{NS_PREFIX}{pid}-a"), format!("{NS_PREFIX}{pid}-b")],
            dev: [format!("fhub{pid}a"), format!("fhub{pid}b")],
            addr: [format!("10.203.{third}.1"), format!("10.203.{third}.2")],
            subnet: format!("10.203.{third}.0/24"),
            tc: Vec::new(),
            link,
        };
        // From here on, drop removes whatever was made.
        let ip = hosts.ip.clone();
        let ipr = |a: &[&str]| run_tool(&ip, a);
        ipr(&["netns", "add", &hosts.ns[0]])?;
        ipr(&["netns", "add", &hosts.ns[1]])?;
        // The pair is made inside namespace A with its peer in B: it never exists outside them.
        ipr(&[
            "-n",
            &hosts.ns[0],
            "link",
            "add",
            &hosts.dev[0],
            "type",
            "veth",
            "peer",
            "name",
            &hosts.dev[1],
            "netns",
            &hosts.ns[1],
        ])?;
        for s in 0..2 {
            let cidr = format!("{}/24", hosts.addr[s]);
            ipr(&[
                "-n",
                &hosts.ns[s],
                "addr",
                "add",
                &cidr,
                "dev",
                &hosts.dev[s],
            ])?;
            ipr(&["-n", &hosts.ns[s], "link", "set", &hosts.dev[s], "up"])?;
            ipr(&["-n", &hosts.ns[s], "link", "set", "lo", "up"])?;
        }
        if let (Some(rate), Some(tc)) = (link, tc) {
            for s in 0..2 {
                let args = [
                    "-n".to_owned(),
                    hosts.ns[s].clone(),
                    "qdisc".to_owned(),
                    "add".to_owned(),
                    "dev".to_owned(),
                    hosts.dev[s].clone(),
                    "root".to_owned(),
                    "tbf".to_owned(),
                    "rate".to_owned(),
                    format!("{}bit", rate.bps),
                    "burst".to_owned(),
                    rate.burst_bytes().to_string(),
                    "latency".to_owned(),
                    format!("{TBF_LATENCY_MS}ms"),
                ];
                let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                run_tool(&tc, &refs)?;
                hosts.tc.push(format!("tc {}", args.join(" ")));
            }
        }
        Ok(hosts)
    }

    /// FERRY_PEERS for process `index`: the other namespace's discovery address.
    fn peers_of(&self, index: usize) -> String {
        format!("{}:{DISCOVERY_PORT}", self.addr[1 - side_of(index)])
    }

    fn config(&self) -> serde_json::Value {
        serde_json::json!({
            "namespaces": { "A": self.ns[0], "B": self.ns[1] },
            "veth": { "A": self.dev[0], "B": self.dev[1] },
            "subnet": self.subnet,
            "addresses": { "A": self.addr[0], "B": self.addr[1] },
            "placement": "the master and the even hubs on A, the odd hubs on B (the study's 2 nodes: master and hub 2 on machine A, hubs 1 and 3 on machine B); the processes are started with ip netns exec",
            "discovery": format!("static peer list: FERRY_PEERS names the other namespace's discovery address (its address, port {DISCOVERY_PORT}); in each namespace the first process relays what it hears to the others; multicast discovery is off"),
            "link_rate": self.link.map(LinkRate::name),
            "link_rate_bps": self.link.map(|l| l.bps),
            "tbf": self.link.map(|l| serde_json::json!({
                "burst_bytes": l.burst_bytes(),
                "latency_ms": TBF_LATENCY_MS,
                "on": "both veth ends (egress of each)",
                "commands": self.tc,
            })),
            "note": "both namespaces run on this machine's CPUs: the link is a veth pair, not a wire",
        })
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        // Deleting a namespace destroys its end of the veth pair, and with it the pair.
        for ns in &self.ns {
            if let Err(e) = run_tool(&self.ip, &["netns", "del", ns]) {
                if !e.to_string().contains("No such file") {
                    note!("ferry lab hubs: cannot remove network namespace {ns}: {e}");
                }
            }
        }
    }
}

/// Removes namespaces an earlier run left (named after a process that no longer exists).
fn sweep_stale(ip: &Path) {
    let Ok(out) = Command::new(ip)
        .args(["netns", "list"])
        .stdin(Stdio::null())
        .output()
    else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(rest) = name.strip_prefix(NS_PREFIX) else {
            continue;
        };
        let Some(pid) = rest
            .strip_suffix("-a")
            .or_else(|| rest.strip_suffix("-b"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            note!("ferry lab hubs: removing network namespace {name} left by an earlier run");
            let _ = run_tool(ip, &["netns", "del", name]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The hub processes

#[derive(Debug, Args)]
pub struct PeerArgs {
    #[arg(long)]
    index: usize,
    #[arg(long)]
    hubs: usize,
    #[arg(long, value_parser = parse_mode)]
    mode: Mode,
    #[arg(long, value_parser = parse_transport)]
    transport: Transport,
    #[arg(long)]
    domain: String,
    #[arg(long)]
    size: usize,
    #[arg(long)]
    messages: u64,
    #[arg(long)]
    warmup: u64,
    #[arg(long, value_parser = parse_wait)]
    wait: WaitStrategy,
    #[arg(long)]
    host: String,
    #[arg(long)]
    cpu: Option<usize>,
    #[arg(long)]
    exit_after: Option<u64>,
}

/// Lines from the main process (stdin), read by a thread; its end is the signal to stop.
struct Control {
    rx: mpsc::Receiver<Option<String>>,
    closed: Arc<AtomicBool>,
}

impl Control {
    fn start() -> Result<Control> {
        let (tx, rx) = mpsc::channel();
        let closed = Arc::new(AtomicBool::new(false));
        let flag = closed.clone();
        std::thread::Builder::new()
            .name("hubs-control".into())
            .spawn(move || {
                for line in std::io::stdin().lock().lines() {
                    let Ok(line) = line else { break };
                    if tx.send(Some(line)).is_err() {
                        return;
                    }
                }
                // Release pairs with the Acquire load in `closed`.
                flag.store(true, Ordering::Release);
                let _ = tx.send(None);
            })
            .context("cannot start a thread")?;
        Ok(Control { rx, closed })
    }

    /// Waits (at most `timeout`) for the line `word`, calling `poll` every few milliseconds
    /// meanwhile.
    fn expect(&self, word: &str, timeout: Duration, mut poll: impl FnMut()) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            poll();
            match self.rx.recv_timeout(Duration::from_millis(2)) {
                Ok(Some(line)) if line.trim() == word => return Ok(()),
                Ok(Some(line)) => {
                    bail!("expected {word:?} from the lab's main process, got {line:?}")
                }
                Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    bail!("the lab's main process went away")
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() >= deadline {
                bail!("no {word:?} from the lab's main process within {timeout:?}");
            }
        }
    }

    /// Whether the main process closed our input (time to stop).
    fn closed(&self) -> bool {
        // Acquire pairs with the Release store in the reader thread.
        self.closed.load(Ordering::Acquire)
    }

    /// Waits (at most `timeout`) until the main process closes our input.
    fn wait_closed(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.closed() && Instant::now() < deadline {
            let _ = self.rx.recv_timeout(Duration::from_millis(50));
        }
    }
}

/// A line to the main process.
fn say(line: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .context("cannot write to the lab's main process")
}

pub fn run_peer(args: PeerArgs) -> Result<()> {
    if args.hubs < 2 || args.index >= args.hubs || args.size < HEADER {
        bail!("invalid hub arguments");
    }
    if let Some(cpu) = args.cpu {
        super::pin_to(cpu)?;
    }
    // Threads started from here on inherit the pinning.
    let control = Control::start()?;
    // The main process first moves this process into its cgroup, if any.
    control.expect("go", START_TIMEOUT, || {})?;
    let n = args.hubs;
    let i = args.index;
    let node = Node::with_domain(&format!("hub{i}"), &args.domain)?;
    let qos = args.transport.qos(args.size, args.wait);
    let mut input = node.subscriber(&edge_topic((i + n - 1) % n), &qos)?;
    let output = node.publisher(&edge_topic(i), &qos)?;
    let deadline = Instant::now() + START_TIMEOUT;
    // A subscriber attaches to new publishers when it looks at its topic: keep looking, so that
    // the previous process's publisher sees it.
    while {
        input.publisher_count();
        output.subscriber_count() == 0
    } {
        if control.closed() {
            bail!("the lab's main process went away");
        }
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
    say("ready")?;
    let mut ends = Ends {
        input,
        output,
        size: args.size,
        parent_alive: Box::new(super::parent_watch()),
    };
    if i == 0 {
        master(&args, &control, &mut ends)?;
    } else {
        hub(&args, &control, &mut ends)?;
    }
    close(ends);
    Ok(())
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
    parent_alive: Box<dyn FnMut() -> Result<()>>,
}

fn hub(args: &PeerArgs, control: &Control, ends: &mut Ends) -> Result<()> {
    let mut forwarded = 0u64;
    let mut out_of_order = 0u64;
    let mut last: Option<(u64, u64)> = None;
    while !control.closed() {
        if forwarded % 64 == 0 {
            (ends.parent_alive)()?;
        }
        let Some(sample) = ends.input.recv_timeout(SLICE)? else {
            (ends.parent_alive)()?;
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
    let report = HubReport {
        forwarded,
        out_of_order,
        edge_in: edge_counts(&args.domain, args.index - 1),
        process: process_info(args),
    };
    say(&format!("report {}", serde_json::to_string(&report)?))
}

/// Progress lines for the main process's watchdog.
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

    fn tick(&mut self) -> Result<()> {
        self.count += 1;
        let now = Instant::now();
        if now >= self.next {
            self.next = now + PROGRESS_EVERY;
            say(&format!("progress {}", self.count))?;
        }
        Ok(())
    }
}

fn master(args: &PeerArgs, control: &Control, ends: &mut Ends) -> Result<()> {
    control.expect("start", START_TIMEOUT, || {
        ends.input.publisher_count();
    })?;
    let mut r = MasterResult {
        probes: probe(ends, control)?,
        ..MasterResult::default()
    };
    let mut progress = Progress::new();
    match args.mode {
        Mode::Roundtrip => roundtrip(args, ends, control, &mut r, &mut progress)?,
        Mode::Flood => flood(args, ends, control, &mut r, &mut progress)?,
    }
    r.edge_in = edge_counts(&args.domain, args.hubs - 1);
    r.process = Some(process_info(args));
    say(&format!("result {}", serde_json::to_string(&r)?))?;
    // Keep the publisher (and its ring) until every process has reported.
    control.wait_closed(EXIT_TIMEOUT);
    Ok(())
}

/// Sends probes around the ring until one comes back (every edge connected), then waits for the
/// rest of those sent (FIFO edges: every later probe follows the one that came back).
fn probe(ends: &mut Ends, control: &Control) -> Result<u64> {
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
        if control.closed() {
            bail!("the lab's main process went away");
        }
        (ends.parent_alive)()?;
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
    args: &PeerArgs,
    ends: &mut Ends,
    control: &Control,
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
                if control.closed() {
                    bail!("the lab's main process went away");
                }
                (ends.parent_alive)()?;
            }
            progress.tick()?;
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
    args: &PeerArgs,
    ends: &mut Ends,
    control: &Control,
    r: &mut MasterResult,
    progress: &mut Progress,
) -> Result<()> {
    for (phase, count) in [(WARMUP, args.warmup), (DATA, args.messages)] {
        if count == 0 {
            continue;
        }
        let (t0, tally, sent) = one_flood(ends, control, progress, phase, count)?;
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
    control: &Control,
    progress: &mut Progress,
    phase: u64,
    count: u64,
) -> Result<(Instant, FloodTally, u64)> {
    let stop = AtomicBool::new(false);
    let size = ends.size;
    let Ends {
        input,
        output,
        parent_alive,
        ..
    } = ends;
    std::thread::scope(|s| {
        let stop = &stop;
        let sender = std::thread::Builder::new()
            .name("hubs-flood".into())
            .spawn_scoped(s, move || -> (Instant, u64, Result<()>) {
                let t0 = Instant::now();
                for seq in 0..count {
                    // Relaxed: a stop request needs no ordering with anything else.
                    if stop.load(Ordering::Relaxed) {
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
            progress.tick()?;
            if control.closed() {
                bail!("the lab's main process went away");
            }
            parent_alive()
        });
        // Relaxed: see the sender.
        stop.store(true, Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_rates() {
        assert_eq!(parse_link_rate("100mbit").unwrap().bps, 100_000_000);
        assert_eq!(parse_link_rate("1gbit").unwrap().bps, 1_000_000_000);
        assert_eq!(parse_link_rate("1G").unwrap().bps, 1_000_000_000);
        assert_eq!(parse_link_rate("500kbit").unwrap().bps, 500_000);
        assert_eq!(parse_link_rate("1.5gbit").unwrap().bps, 1_500_000_000);
        assert_eq!(parse_link_rate("100mbit").unwrap().name(), "100mbit");
        assert_eq!(parse_link_rate("1500mbit").unwrap().name(), "1500mbit");
        assert_eq!(parse_link_rate("1gbit").unwrap().name(), "1gbit");
        for bad in [
            "", "mbit", "100mbps", "-1mbit", "1x", "0", "1bit", "1000gbit",
        ] {
            assert!(parse_link_rate(bad).is_err(), "{bad:?} should be refused");
        }
        let r = parse_link_rate("100mbit").unwrap();
        assert!(r.burst_bytes() >= 32 * 1024);
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
        let hosts = Hosts {
            ip: PathBuf::from("/nonexistent/ip"),
            ns: ["x-a".into(), "x-b".into()],
            dev: ["a".into(), "b".into()],
            addr: ["10.203.1.1".into(), "10.203.1.2".into()],
            subnet: "10.203.1.0/24".into(),
            tc: Vec::new(),
            link: None,
        };
        assert_eq!(hosts.peers_of(0), format!("10.203.1.2:{DISCOVERY_PORT}"));
        assert_eq!(hosts.peers_of(3), format!("10.203.1.1:{DISCOVERY_PORT}"));
        // Dropping it tries to remove namespaces with a missing tool: quietly nothing.
        drop(hosts);
    }

    #[test]
    fn parsers() {
        assert_eq!(parse_mode("flood"), Ok(Mode::Flood));
        assert!(parse_mode("ping").is_err());
        assert_eq!(parse_transport("udp4"), Ok(Transport::Udp));
        assert_eq!(parse_transport("auto"), Ok(Transport::Auto));
        assert!(parse_transport("udp6").is_err());
        assert_eq!(parse_wait("block"), Ok(WaitStrategy::Block));
        assert_eq!(parse_pin("none"), Ok(PinMode::None));
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![]), None);
    }
}
