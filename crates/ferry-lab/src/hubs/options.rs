//! What the experiment is asked for (its options and subjects), its limits and timeouts, and
//! the settings every part of it shares: the bottom floor, which imports no other part.

use crate::error::{bail, Result};
use crate::netns::LinkRate;
use crate::subject::{Subject, Subjects};
use ferry::{Delivery, Qos, WaitStrategy};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

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
pub(super) fn describe(transport: Subject) -> &'static str {
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
pub(super) fn qos(transport: Subject, size: usize, wait: WaitStrategy) -> Result<Qos> {
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
pub(super) mod rate_text {
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
pub(super) const UDP_MTU: usize = 1500;
/// The smallest message: the 16-byte header (sequence number, phase).
pub(super) const HEADER: usize = 16;
pub(super) const MAX_SIZE: usize = 64 << 20;
pub(super) const MAX_HUBS: usize = 16;
/// The most messages of a round (and of its warm-up).
pub(super) const MAX_MESSAGES: u64 = 10_000_000;
/// How long processes may take to start, attach, find each other (across hosts: discovery
/// every 0.5 s) and pass a first probe around the ring.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the master waits for a lap, or for any progress of a flood.
pub(super) const LAP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the main process lets the master run without a progress report.
pub(super) const WATCHDOG: Duration = Duration::from_secs(30);
/// How long processes may take to report and exit once told to.
pub(super) const EXIT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a process may take to close its ends at the end of a run.
pub(super) const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// A reliable publisher waits at most this long for room.
pub(super) const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one wait lasts before a waiter looks around (partner, main process, deadline).
pub(super) const SLICE: Duration = Duration::from_millis(50);
/// The master sends a probe this often until one comes back.
pub(super) const PROBE_EVERY: Duration = Duration::from_millis(100);
/// The master reports progress this often (the main process's watchdog).
pub(super) const PROGRESS_EVERY: Duration = Duration::from_millis(500);
/// How often the main process looks at its hubs while it waits for them.
pub(super) const LOOK_EVERY: Duration = Duration::from_millis(5);
/// The discovery port on two hosts (one per host or namespace).
pub(super) const DISCOVERY_PORT: u16 = 7651;
/// The most addresses a peer request's peer list may hold (it holds one).
pub(super) const MAX_PEERS: usize = 4;
/// The namespaces of `--hosts 2` are named after this (and the process id).
pub(super) const NS_PREFIX: &str = "ferry-hubs-";

pub(super) fn edge_topic(edge: usize) -> String {
    format!("hubs/edge{edge}")
}

pub(super) fn role_name(index: usize) -> String {
    if index == 0 {
        "master".to_owned()
    } else {
        format!("hub {index}")
    }
}
