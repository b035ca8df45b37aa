//! What the experiment is asked for, what it records and what its processes tell each other:
//! the types and limits every part of it shares (the bottom floor, which imports no other part).

use crate::error::Result;
use crate::netns::{self, parse_link_rate, LinkRate, Pair};
use crate::stats::ratio_f;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

crate::choice! {
    /// What shares the link with the ferry flow.
    pub enum Competitor: "competitor" {
        /// A second ferry flow, as the first: reliable UDP, 64 KiB messages back to back.
        Ferry = "ferry",
        /// One TCP flow: iperf3's client in namespace A sending to its server in B.
        Tcp = "tcp",
    }
}

impl Competitor {
    /// The other flow, in a sentence: "one TCP flow".
    pub(super) fn other_flow(self) -> &'static str {
        match self {
            Competitor::Ferry => "a second ferry flow",
            Competitor::Tcp => "one TCP flow",
        }
    }

    /// The other flow's name in a table's column or a plot's legend.
    pub(super) fn other_name(self) -> &'static str {
        match self {
            Competitor::Ferry => "second ferry flow",
            Competitor::Tcp => "TCP",
        }
    }

    /// How many ferry flows a run of it has.
    pub(super) fn ferry_flows(self) -> usize {
        match self {
            Competitor::Ferry => 2,
            Competitor::Tcp => 1,
        }
    }
}

/// What `ferry lab share` is asked to measure.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// What shares the link with the ferry flow, each in a run of its own.
    pub competitors: Vec<Competitor>,
    /// The rates of the links (`100mbit`, `1gbit`), a `tc tbf` on both ends of each.
    #[serde(with = "netns::rate_list")]
    #[schemars(with = "Vec<String>")]
    pub link_rates: Vec<LinkRate>,
    /// Seconds of the measured interval, the same for both flows (whole seconds with `tcp`:
    /// iperf3 counts whole seconds).
    pub seconds: f64,
    /// Seconds from the start of the first ferry flow to the start of the other flow.
    pub delay: f64,
    /// Rounds: every round runs every competitor on every link.
    pub rounds: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            competitors: vec![Competitor::Ferry, Competitor::Tcp],
            link_rates: ["100mbit", "1gbit"]
                .map(|r| parse_link_rate(r).expect("a valid rate"))
                .to_vec(),
            seconds: 8.0,
            delay: 4.0,
            rounds: 1,
        }
    }
}

/// The bytes of every ferry message.
pub const MESSAGE_BYTES: usize = 64 << 10;
/// How long the other flow runs before the measured interval starts (iperf3's `--omit`: whole
/// seconds).
pub const WARMUP: Duration = Duration::from_secs(2);
/// The goodput over time is counted in bins this long (and iperf3 reports at this interval).
pub const BIN: Duration = Duration::from_millis(250);
/// The longest `--seconds` and `--delay`.
pub(super) const MAX_SECONDS: f64 = 600.0;
/// The most rounds.
pub(super) const MAX_ROUNDS: usize = 1000;
/// How long a peer may take to start (and its publisher to see its subscriber), and to end.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(10);
/// The namespaces are named after this (and the process id).
pub(super) const NS_PREFIX: &str = "ferry-share-";

/// How a share run was made: the configuration, and what follows from it.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    pub(super) competitors: Vec<Competitor>,
    pub(super) link_rates: Vec<String>,
    /// The measured interval, seconds.
    pub(super) seconds: f64,
    /// From the first ferry flow's start to the other flow's, seconds.
    pub(super) delay_s: f64,
    /// How long the other flow runs before the measured interval starts, seconds.
    pub(super) warmup_s: f64,
    pub(super) rounds: usize,
    pub(super) message_bytes: usize,
    /// The ferry endpoints' settings.
    pub(super) qos: String,
    /// How each flow's goodput is taken.
    pub(super) measured: String,
    /// How the goals are judged.
    pub(super) goals: String,
    pub(super) placement: String,
    pub(super) dev_shm: String,
    pub(super) discovery: String,
    pub(super) pinning: String,
    /// The links, one per rate.
    pub(super) links: Vec<crate::throughput::Link>,
    /// iperf3's version (with the tcp competitor; null: not run, or its version unknown).
    pub(super) iperf3: Option<String>,
    /// The TCP flow's congestion control (iperf3 -C): Cubic, the Linux default that most TCP
    /// traffic a ferry flow meets runs (this machine's own default may differ).
    pub(super) tcp_congestion: String,
    pub(super) started_unix_s: u64,
}

impl Setup {
    pub(super) fn of(config: &Config, pairs: &[Pair], cpus: Cpus, iperf3: Option<String>) -> Setup {
        let warmup = WARMUP.as_secs_f64();
        Setup {
            competitors: config.competitors.clone(),
            link_rates: config.link_rates.iter().map(|r| r.name()).collect(),
            seconds: config.seconds,
            delay_s: config.delay,
            warmup_s: warmup,
            rounds: config.rounds,
            message_bytes: MESSAGE_BYTES,
            qos: format!(
                "UDP, reliable delivery, maximum message size {MESSAGE_BYTES} bytes, send timeout {} ms (a send that times out still goes, in order), the other settings ferry's defaults (publishers and subscribers alike); every flow a topic of its own",
                SEND_TIMEOUT.as_millis()
            ),
            measured: format!(
                "the other flow starts {} s after the first ferry flow; the interval starts {warmup} s after it and lasts {} s, the same for both flows. A ferry flow: the messages its subscriber received within the interval (receive times taken at the subscriber, CLOCK_MONOTONIC, shared by both namespaces) × {MESSAGE_BYTES} bytes × 8 over the interval. TCP: iperf3's receiver report (end.sum_received: bytes × 8 over its seconds) of the {} s after its first {warmup} (--omit {warmup}); the interval is the ferry flow's within the time iperf3 takes to connect",
                config.delay, config.seconds, config.seconds
            ),
            goals: format!(
                "beside one TCP flow: ferry's share, ferry / (ferry + TCP), between {} and {}; two ferry flows: smaller / larger near 1 (at least {FERRY_GOAL}); with several rounds, the median of the rounds' figures",
                TCP_GOAL.0, TCP_GOAL.1
            ),
            placement: "each ferry flow: its publisher in a peer process (ferry lab-peer) in namespace A, its subscriber in another in namespace B, all started with ip netns exec; iperf3: its client in A, its server in B".to_owned(),
            dev_shm: "every ferry process mounts a /dev/shm of its own (a fresh tmpfs, in the mount namespace ip netns exec gave it): the flows meet only on the link".to_owned(),
            discovery: format!(
                "a static peer list: each side's discovery names the other's address (port {})",
                crate::TWO_HOST_DISCOVERY_PORT
            ),
            pinning: cpus.describe(),
            links: pairs.iter().filter_map(crate::throughput::Link::of).collect(),
            iperf3,
            tcp_congestion: TCP_CONGESTION.to_owned(),
            started_unix_s: crate::unix_time(),
        }
    }
}

/// The CPUs of the two sides: the publishers and iperf3's client (A), the subscribers and
/// iperf3's server (B); `None`: not pinned.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cpus {
    pub(super) a: Option<usize>,
    pub(super) b: Option<usize>,
}

impl Cpus {
    /// The first two CPUs this process may use; with fewer, no pinning.
    pub(super) fn pick() -> Cpus {
        match crate::allowed_cpus()[..] {
            [a, b, ..] => Cpus {
                a: Some(a),
                b: Some(b),
            },
            _ => Cpus { a: None, b: None },
        }
    }

    pub(super) fn describe(self) -> String {
        match (self.a, self.b) {
            (Some(a), Some(b)) => format!("the publishers and iperf3's client on CPU {a}, the subscribers and iperf3's server on CPU {b}"),
            _ => "not pinned (fewer than 2 CPUs available)".to_owned(),
        }
    }
}

/// One run: a competitor beside the ferry flow on one link, in one round.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    /// The round (from 1).
    pub round: usize,
    pub competitor: Competitor,
    pub link_rate: String,
    pub link_rate_bps: u64,
    /// The measured interval, seconds.
    pub window_s: f64,
    /// The (first) ferry flow's goodput over the interval, Mbit/s.
    pub ferry_mbps: f64,
    /// The other flow's over the same interval, Mbit/s: the second ferry flow's (as the
    /// first's), or TCP's (iperf3's receiver report).
    pub other_mbps: f64,
    /// Beside TCP: ferry / (ferry + TCP); two ferry flows: the smaller / the larger. Null when
    /// neither flow got anything through.
    pub share: Option<f64>,
    /// Messages each ferry flow's subscriber received within the interval (the first flow's
    /// first).
    pub messages_in_window: Vec<u64>,
    /// Messages each ferry flow's subscriber received in all.
    pub messages_received: Vec<u64>,
    /// Each ferry flow's publisher's counters, read in its process before it closed (the first
    /// flow's first).
    pub publishers: Vec<PublisherCounters>,
    /// TCP: the seconds iperf3's receiver report covers.
    pub tcp_seconds: Option<f64>,
    /// TCP: segments the sender retransmitted (iperf3's `end.sum_sent.retransmits`).
    pub tcp_retransmits: Option<u64>,
    /// Each flow's goodput over the whole run, from the first ferry flow's start (the ferry
    /// flows first, then TCP's). Empty in results written before it was recorded.
    #[serde(default)]
    pub timeline: Vec<FlowTimeline>,
}

/// One flow's goodput over time: a point per [`BIN`] (a ferry flow: the messages its
/// subscriber received in it; TCP: iperf3's sender-side intervals, what its socket took,
/// which the link's queue delays by milliseconds).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FlowTimeline {
    /// "ferry", "second ferry flow" or "TCP".
    pub flow: String,
    /// The middle of each bin, seconds from the first ferry flow's start (a ferry flow's bins are
    /// quarter seconds of CLOCK_MONOTONIC: the first flow's first may begin before its start).
    pub at_s: Vec<f64>,
    /// Goodput in each bin, Mbit/s.
    pub mbps: Vec<f64>,
}

/// What a run's flows gave: each ferry flow's subscriber's counts and publisher's counters,
/// iperf3's result (beside TCP), and when they started.
pub(super) struct Flows<'a> {
    pub(super) counts: &'a [Counts],
    pub(super) publishers: Vec<PublisherCounters>,
    pub(super) tcp: Option<&'a crate::tools::ToolResult>,
    pub(super) clock: Clock,
}

impl Row {
    /// `other_mbps` and the TCP figures come from the second ferry flow's counts, or iperf3's.
    pub(super) fn of(
        round: usize,
        competitor: Competitor,
        rate: LinkRate,
        window_s: f64,
        flows: Flows<'_>,
    ) -> Row {
        let Flows {
            counts,
            publishers,
            tcp,
            clock,
        } = flows;
        let mbps = |messages: u64| messages as f64 * MESSAGE_BYTES as f64 * 8.0 / window_s / 1e6;
        let ferry_mbps = counts.first().map_or(0.0, |c| mbps(c.in_window));
        let other_mbps = match tcp {
            Some(t) => t.delivered_bps.unwrap_or(0.0) / 1e6,
            None => counts.get(1).map_or(0.0, |c| mbps(c.in_window)),
        };
        Row {
            round,
            competitor,
            link_rate: rate.name(),
            link_rate_bps: rate.bps,
            window_s,
            ferry_mbps,
            other_mbps,
            share: share(competitor, ferry_mbps, other_mbps),
            messages_in_window: counts.iter().map(|c| c.in_window).collect(),
            messages_received: counts.iter().map(|c| c.received).collect(),
            publishers,
            tcp_seconds: tcp.map(|t| t.seconds),
            tcp_retransmits: tcp.and_then(|t| t.retransmits),
            timeline: timeline(counts, tcp, clock),
        }
    }
}

/// When a run's flows started, CLOCK_MONOTONIC nanoseconds: the first ferry flow, and
/// iperf3's client (with TCP).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Clock {
    pub(super) first_ns: u64,
    pub(super) tcp_ns: Option<u64>,
}

/// Every flow's goodput over time, from the first ferry flow's start.
fn timeline(
    counts: &[Counts],
    tcp: Option<&crate::tools::ToolResult>,
    clock: Clock,
) -> Vec<FlowTimeline> {
    let bin_ns = BIN.as_nanos() as u64;
    let bin_s = BIN.as_secs_f64();
    let since_first = |ns: u64| (ns as f64 - clock.first_ns as f64) / 1e9;
    let mut flows: Vec<FlowTimeline> = counts
        .iter()
        .zip(["ferry", "second ferry flow"])
        .map(|(c, flow)| {
            let at_s = (0..c.bins.len() as u64)
                .map(|i| {
                    since_first(c.bins_from.saturating_add(i).saturating_mul(bin_ns)) + bin_s / 2.0
                })
                .collect();
            let mbps = c
                .bins
                .iter()
                .map(|&n| n as f64 * MESSAGE_BYTES as f64 * 8.0 / bin_s / 1e6)
                .collect();
            FlowTimeline {
                flow: flow.to_owned(),
                at_s,
                mbps,
            }
        })
        .collect();
    if let (Some(t), Some(started)) = (tcp, clock.tcp_ns) {
        let start = since_first(started);
        flows.push(FlowTimeline {
            flow: "TCP".to_owned(),
            at_s: t
                .intervals
                .iter()
                .map(|i| start + (i.0 + i.1) / 2.0)
                .collect(),
            mbps: t.intervals.iter().map(|i| i.2 / 1e6).collect(),
        });
    }
    flows
}

/// A ferry publisher's counters, read in its process before it closed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct PublisherCounters {
    /// Messages it sent.
    pub sent: u64,
    /// UDP frames it sent again on a NAK. Null: its statistics were not found.
    pub retransmitted: Option<u64>,
    /// Rounds of its congestion controller that ended with a standing queue (it backed off).
    pub queue_events: Option<u64>,
    /// Loss with a growing queue that cut its rate.
    pub congestion_events: Option<u64>,
}

/// The experiment (see the module's documentation).
pub struct Share;

// ---------------------------------------------------------------------------------------------
// What the main side and its peers say to each other

/// Which end of a ferry flow a peer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// In namespace A: publishes from `Go` until `Stop`.
    Publish,
    /// In namespace B: counts what arrives, and what arrives within the interval.
    Subscribe,
}

/// What the main side asks of a peer: one end of one ferry flow.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerRequest {
    pub(super) role: Role,
    pub(super) domain: String,
    pub(super) topic: String,
    /// The other side's address, which the peer's discovery reaches.
    pub(super) other: std::net::Ipv4Addr,
    pub(super) cpu: Option<usize>,
    /// The lab's mount namespace: the peer mounts a /dev/shm of its own only in another.
    pub(super) lab_mount_ns: u64,
    /// The longest the peer waits for the main side's next word, seconds (it ends the peer long
    /// before).
    pub(super) limit_s: f64,
}

/// The main side's commands.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Command {
    /// A publisher: start sending.
    Go,
    /// A subscriber: the measured interval, CLOCK_MONOTONIC nanoseconds, from (included) to
    /// (excluded).
    Window { from_ns: u64, to_ns: u64 },
    /// A publisher: stop sending, read the counters, close and report them.
    Stop,
    /// A subscriber: its publisher has closed; report the counts.
    Done,
}

/// What a peer reports.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Report {
    /// A subscriber is made; a publisher sees its subscriber.
    Ready,
    /// A publisher stopped and closed.
    Stopped(PublisherCounters),
    /// A subscriber's counts.
    Counts(Counts),
}

/// What a subscriber received.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Counts {
    /// Messages in all.
    pub(super) received: u64,
    /// Messages within the interval.
    pub(super) in_window: u64,
    /// Messages per [`BIN`] of CLOCK_MONOTONIC, from the bin numbered `bins_from` (the first
    /// message's) on; at most [`max_bins`] of them.
    pub(super) bins_from: u64,
    pub(super) bins: Vec<u32>,
}

impl Counts {
    /// Counts a message received at `at_ns` (CLOCK_MONOTONIC) in its bin; one past `limit`
    /// bins from the first is counted in all but not in a bin.
    pub(super) fn bin(&mut self, at_ns: u64, limit: usize) {
        let bin = at_ns / BIN.as_nanos() as u64;
        if self.bins.is_empty() {
            self.bins_from = bin;
        }
        let Some(i) = bin
            .checked_sub(self.bins_from)
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| i < limit)
        else {
            return;
        };
        if self.bins.len() <= i {
            self.bins.resize(i + 1, 0);
        }
        self.bins[i] = self.bins[i].saturating_add(1);
    }
}

/// The most bins a subscriber keeps for a run of `limit_s` seconds.
pub(super) fn max_bins(limit_s: f64) -> usize {
    (limit_s / BIN.as_secs_f64()).ceil() as usize + 1
}

// ---------------------------------------------------------------------------------------------
// The experiment

/// What this machine lacks for `config`, each said in a few words.
pub(super) fn missing(config: &Config) -> Vec<String> {
    let mut missing = netns::missing(true);
    if config.competitors.contains(&Competitor::Tcp) && crate::tools::find("iperf3").is_none() {
        missing.push(
            "iperf3 for --competitor tcp, not found in PATH (install it with `apt-get install iperf3`, or leave tcp out)".to_owned(),
        );
    }
    missing
}

/// How long one reliable send waits for room before the publisher looks at its commands again
/// (the message still goes, in order, once there is room: it counts as sent). It also bounds
/// how long the publisher lingers when closed for its subscriber to catch up.
pub(super) const SEND_TIMEOUT: Duration = Duration::from_millis(250);

/// The TCP flow's congestion control (`iperf3 -C`): Cubic, Linux's default, whatever this
/// machine's default is (BBR here, which is no loss-based flow).
pub(super) const TCP_CONGESTION: &str = "cubic";

/// Beside TCP: ferry / (ferry + TCP); two ferry flows: the smaller / the larger. `None` when
/// neither got anything through.
pub(super) fn share(competitor: Competitor, ferry: f64, other: f64) -> Option<f64> {
    match competitor {
        Competitor::Tcp => ratio_f(ferry, ferry + other),
        Competitor::Ferry => ratio_f(ferry.min(other), ferry.max(other)),
    }
}

/// Beside one TCP flow, ferry's share of the two flows' goodput is within this.
pub(super) const TCP_GOAL: (f64, f64) = (0.4, 0.6);

/// Two ferry flows: the smaller flow's goodput is at least this share of the larger's.
pub(super) const FERRY_GOAL: f64 = 0.8;
