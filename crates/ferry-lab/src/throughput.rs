//! `ferry lab throughput`: how much a publisher gets through to a subscriber in another process
//! when it sends back to back, for ferry's transports and for the plain-UDP floor and third-party
//! tools measured in the same run, in interleaved rounds.
//!
//! The main process publishes: for `--duration` it writes messages of the given size as fast as
//! the transport takes them, each with its sequence number (u64, little endian) in bytes 0..8
//! and the sequence number's pattern byte in every other byte. The peer process
//! (`ferry lab-peer`, see [`crate::peer`]) subscribes: it checks the sequence number of every
//! message (and ferry's own, where there is one) and every byte of every 64th message, and
//! counts what it got. Over the peer's control channel the peer says when it is ready, the main
//! process says when it has finished and how much it sent, and the peer reports its counts.
//!
//! Within a round (and on each link) the sizes run in turn, and at each size every transport,
//! its baselines first, so that a row and the baselines it is compared with run within seconds
//! of each other. A row whose baseline's run ended more than 10 s before its own is followed by
//! another run of that baseline (`Row::references`); each ratio is taken against the baseline's
//! run nearest in time.
//!
//! The delivered rate is taken over the interval from the publisher's first send to the
//! subscriber's last delivery (both CLOCK_MONOTONIC on this host), so that a subscriber that
//! lags behind is not credited with the publisher's speed. With `--remote` the subscriber runs on
//! another machine (through `ferry lab agent`), whose clock is not this one's: the interval is
//! then the subscriber's own, from its first delivery to its last.
//!
//! `raw-udp4` is the naive plain-socket floor: a blocking `send_to` loop against a blocking
//! `recv` loop, one datagram per message (so at most 65507 bytes), default socket buffers.
//! `iperf3` and `sockperf` run at a datagram size of min(size, 1472), the size of ferry's UDP
//! frames at MTU 1500, so that their rows compare at the same frame size; `iperf3-tcp` is
//! iperf3 over TCP, written `size` bytes at a time.
//!
//! `--hosts 2 --link-rate R1,R2` runs across a real link instead: for each rate, two network
//! namespaces joined by a veth pair with a `tc tbf` of that rate on both ends
//! ([`crate::netns::Pair`]). The publisher runs in a peer process in namespace A, the
//! subscriber in one in namespace B (iperf3's client in A, its server in B); the main process
//! coordinates and, before and after every run, reads the counters of the tbf on A's end: the
//! packets the run put on the link, set against the fewest its delivered messages need.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::os::monotonic_ns;
use ferry::{Delivery, IpVersion, Qos, WaitStrategy};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{pattern, tools, Dir, Pin, Pinning};
use crate::baseline::{baselines_first, BASELINE_GAP};
use crate::chart::{line_chart, Plot, Section, SummaryLine};
use crate::error::{bail, note, Context, Result};
use crate::experiment::{Experiment, Measured, Results};
use crate::netns::{self, LinkRate, Pair};
use crate::peer::{Peer, PeerLink, Place};
use crate::signal;
use crate::stats::median;
use crate::studies::{cite, cite_first, PACED_UDP, VORTEX_LITE};
use crate::subject::{Subject, Subjects};
use crate::table::Table;
use crate::units::format_size;

/// What this experiment measures, in the order its help lists them.
pub const SUBJECTS: Subjects = Subjects(&[
    Subject::Shm,
    Subject::Udp4,
    Subject::Udp4Key,
    Subject::Udp6,
    Subject::RawUdp4,
    Subject::Iperf3,
    Subject::Iperf3Tcp,
    Subject::Tcp,
    Subject::Sockperf,
    Subject::Iceoryx2,
    Subject::Zenoh,
    Subject::ZenohShm,
]);

/// By name, so that maps keyed by transport (a row's `ratios`) list them alphabetically.
impl Ord for Subject {
    fn cmp(&self, other: &Subject) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl PartialOrd for Subject {
    fn partial_cmp(&self, other: &Subject) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// What throughput knows of a subject: how it runs, what it is set against, what it puts on
/// the link.
trait ThroughputSubject: Copy {
    fn describe(self) -> &'static str;
    /// Whether the run's `--delivery` applies (ferry's transports and the other systems).
    fn honours_delivery(self) -> bool;
    /// Why this transport cannot run with its subscriber on another machine (`--remote`), if
    /// it cannot.
    fn remote_refusal(self) -> Option<&'static str>;
    /// UDP payload bytes of the largest datagram a `size`-byte message travels in, if UDP.
    fn datagram_bytes(self, size: usize) -> Option<usize>;
    /// Why this transport cannot run `size`, if it cannot.
    fn cannot_run(self, size: usize) -> Option<String>;
    /// The baselines a row is compared with (same size, same round, same link).
    fn baselines(self) -> &'static [Subject];
    /// Why this transport cannot run across the link of `--hosts 2`, if it cannot.
    fn link_refusal(self) -> Option<&'static str>;
    /// The fewest packets the link must carry for what this transport delivered.
    fn min_link_packets(
        self,
        size: usize,
        delivered: Option<u64>,
        bytes: Option<u64>,
    ) -> Option<u64>;
}

impl ThroughputSubject for Subject {
    fn describe(self) -> &'static str {
        match self {
            Subject::Shm => "ferry shared memory (loans, ring of 2 × size, at least 64 KiB)",
            Subject::Udp4 => "ferry UDP over IPv4 loopback, MTU 1500: 1472-byte datagrams, sent with GSO and received with GRO where the kernel has them; small messages published faster than the socket takes them share datagrams (the datagram column is the one a message travels in alone)",
            Subject::Udp4Key => "as udp4, with a domain key: every datagram authenticated and encrypted (AEGIS-128L, 36 bytes more per datagram), replays refused",
            Subject::Udp6 => "ferry UDP over IPv6 loopback, MTU 1500: 1452-byte datagrams, GSO/GRO where available",
            Subject::RawUdp4 => "plain blocking std::net::UdpSocket on 127.0.0.1: a send_to loop against a recv loop, one datagram per message (at most 65507 bytes), default socket buffers, no flow control or repair",
            Subject::Iperf3 => "iperf3 -s -1 / iperf3 -c 127.0.0.1 -u -b 0 -l min(size, 1472) -t S -J (on a link: -c B's address, -b the link rate); the receiver's counts",
            Subject::Iperf3Tcp => "iperf3 -s -1 / iperf3 -c 127.0.0.1 -l min(size, 1 MiB) -t S -J (on a link: -c B's address): TCP, written size bytes at a time; bytes and seconds of the receiver, retransmitted segments of the sender",
            Subject::Tcp => "the lab's own TCP stream (--hosts 2 only): one connection from A to B, TCP_NODELAY, Linux's default congestion control (Cubic), each message written whole (write_all) back to back or on --period's schedule, the receiver reading whole messages",
            Subject::Sockperf => "sockperf server / sockperf throughput -m min(size, 1472) -t S; sent by the client's count, delivered by the server's",
            Subject::Iceoryx2 => "iceoryx2 0.10 publish/subscribe over shared memory (its defaults, no config file), two processes of crates/ferry-peers pinned as the lab's: each message written into a loan, the subscriber's receive() polled in a spin loop; its buffer holds as many messages as ferry's shm ring (2 × size, at least 64 KiB; at least 2); reliable: safe overflow off and the publisher's backpressure RetryUntilDelivered (it waits for room), latest: safe overflow on (the oldest message in a full buffer is overwritten)",
            Subject::Zenoh => "Zenoh 1.10 publish/subscribe, two sessions in peer mode over TCP on 127.0.0.1 (no scouting), run by crates/ferry-peers: each message a fresh buffer, put by a publisher without express (Zenoh batches), the subscriber's channel polled with try_recv in a spin loop (the measuring threads pinned as the lab's, Zenoh's own threads not); reliable: reliability Reliable and CongestionControl::Block, latest: CongestionControl::Drop",
            Subject::ZenohShm => "as zenoh, with each message allocated from Zenoh's POSIX shared-memory provider (256 × size, 4 MiB to 256 MiB) and written in place, so that it travels as a reference to the segment; when the provider is full, reliable waits for a buffer the subscriber let go (1 ms sleeps, as Zenoh's BlockOn policy), latest drops the message (counted as sent, not delivered)",
            _ => "not measured by this experiment",
        }
    }

    /// Whether the run's `--delivery` applies (ferry's transports and the other systems).
    fn honours_delivery(self) -> bool {
        self.is_ferry() || self.is_peer()
    }

    /// Why this transport cannot run with its subscriber on another machine (`--remote`), if
    /// it cannot.
    fn remote_refusal(self) -> Option<&'static str> {
        match self {
            Subject::RawUdp4 | Subject::Udp4 | Subject::Udp4Key => None,
            Subject::Shm => Some("shared memory cannot reach another machine"),
            Subject::Udp6 => Some(
                "ferry's discovery finds other machines over IPv4, so udp6 runs on one machine",
            ),
            Subject::Iperf3 | Subject::Iperf3Tcp | Subject::Sockperf => {
                Some("the lab starts this tool's server on this machine only")
            }
            Subject::Tcp => Some("the lab's TCP stream runs across the link of --hosts 2 only"),
            Subject::Iceoryx2 | Subject::Zenoh | Subject::ZenohShm => {
                Some("ferry-peers runs both of its processes on this machine")
            }
            _ => Some("not measured by this experiment"),
        }
    }

    /// UDP payload bytes of the largest datagram a `size`-byte message travels in, if UDP
    /// (ferry: its frame header and the payload, cut at the MTU).
    fn datagram_bytes(self, size: usize) -> Option<usize> {
        let ferry = |max: usize| Some((size + ferry::UDP_DATA_HEADER).min(max));
        match self {
            Subject::Shm
            | Subject::Iceoryx2
            | Subject::Zenoh
            | Subject::ZenohShm
            | Subject::Iperf3Tcp
            | Subject::Tcp => None,
            Subject::Udp4 => ferry(UDP_MTU - 28),
            Subject::Udp4Key => {
                let sealed = ferry::UDP_SEAL_OVERHEAD;
                Some((size + ferry::UDP_DATA_HEADER + sealed).min(UDP_MTU - 28))
            }
            Subject::Udp6 => ferry(UDP_MTU - 48),
            Subject::RawUdp4 => Some(size),
            Subject::Iperf3 | Subject::Sockperf => Some(size.min(UDP_MTU - 28)),
            _ => None,
        }
    }

    /// Why this transport cannot run `size`, if it cannot.
    fn cannot_run(self, size: usize) -> Option<String> {
        match self {
            Subject::RawUdp4 if size > super::rawudp::MAX_DATAGRAM_V4 => Some(format!(
                "skipped: one UDP datagram holds at most {} bytes, and raw-udp4 sends one datagram per message",
                super::rawudp::MAX_DATAGRAM_V4
            )),
            Subject::Sockperf if size < SOCKPERF_MIN => Some(format!(
                "skipped: sockperf sends messages of at least {SOCKPERF_MIN} bytes"
            )),
            _ => None,
        }
    }

    /// The baselines a row is compared with (same size, same round, same link): the floors of
    /// a ferry UDP row and TCP; TCP for plain UDP and the UDP tools; for another system,
    /// ferry's shared memory, so that the ratio says how far it is from ferry.
    fn baselines(self) -> &'static [Subject] {
        if self.is_ferry_udp() {
            &[
                Subject::RawUdp4,
                Subject::Iperf3,
                Subject::Sockperf,
                Subject::Iperf3Tcp,
                Subject::Tcp,
            ]
        } else if self.is_peer() {
            &[Subject::Shm]
        } else if matches!(self, Subject::RawUdp4 | Subject::Iperf3 | Subject::Sockperf) {
            &[Subject::Iperf3Tcp]
        } else {
            &[]
        }
    }

    /// Why this transport cannot run across the link of `--hosts 2`, if it cannot.
    fn link_refusal(self) -> Option<&'static str> {
        match self {
            Subject::Udp4
            | Subject::Udp4Key
            | Subject::RawUdp4
            | Subject::Iperf3
            | Subject::Iperf3Tcp
            | Subject::Tcp => None,
            Subject::Shm => Some("shared memory cannot join two hosts"),
            Subject::Udp6 => Some("the link's namespaces have IPv4 addresses only"),
            Subject::Sockperf => Some("the lab runs sockperf on 127.0.0.1 only"),
            Subject::Iceoryx2 | Subject::Zenoh | Subject::ZenohShm => {
                Some("ferry-peers runs both of its processes in one place")
            }
            _ => Some("not measured by this experiment"),
        }
    }

    /// The fewest packets the link must carry for what this transport delivered: ferry, a
    /// datagram per 1424 payload bytes of each message (1472 less its 48-byte DATA header; 36
    /// bytes less with a domain key), or, for messages small enough to share one, a datagram per
    /// 1424 bytes of the messages and their 4-byte length prefixes; raw-udp4, one IP packet per 1480 bytes of each datagram
    /// (its UDP header included); iperf3 (UDP), a packet per datagram delivered; TCP, a segment
    /// per 1448 bytes delivered (the MSS at MTU 1500 with timestamps).
    fn min_link_packets(
        self,
        size: usize,
        delivered: Option<u64>,
        bytes: Option<u64>,
    ) -> Option<u64> {
        let per_message = |payload: usize| (size as u64).div_ceil(payload as u64);
        let ip_payload = UDP_MTU - 20;
        // ferry: messages that two of fit one datagram may share one (a batch: each takes its
        // length prefix more); larger ones take whole datagrams each.
        let ferry = |payload: usize| {
            let entry = size + ferry::UDP_BATCH_ENTRY;
            Some(if 2 * entry <= payload {
                (delivered? * entry as u64).div_ceil(payload as u64)
            } else {
                delivered? * per_message(payload)
            })
        };
        match self {
            Subject::Udp4 => ferry(UDP_MTU - 28 - ferry::UDP_DATA_HEADER),
            Subject::Udp4Key => {
                ferry(UDP_MTU - 28 - ferry::UDP_DATA_HEADER - ferry::UDP_SEAL_OVERHEAD)
            }
            Subject::RawUdp4 => Some(delivered? * (size as u64 + 8).div_ceil(ip_payload as u64)),
            Subject::Iperf3 => delivered,
            Subject::Iperf3Tcp | Subject::Tcp => Some(bytes?.div_ceil(TCP_MSS)),
            _ => None,
        }
    }
}

/// TCP's segment payload at MTU 1500 with timestamps (iperf3's `tcp_mss_default` on a veth).
const TCP_MSS: u64 = 1448;

/// A loss rate in percent: `5`, `5%`, `0.5`.
pub fn parse_loss(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let number = t.strip_suffix('%').unwrap_or(t);
    match number.trim().parse::<f64>() {
        Ok(p) if (0.0..100.0).contains(&p) => Ok(p),
        _ => Err(format!(
            "invalid loss {text:?}: expected a percentage from 0 to below 100, e.g. 5 or 0.5%"
        )),
    }
}

/// The MTU of ferry's UDP transports.
const UDP_MTU: usize = 1500;
/// sockperf's smallest message (its header).
const SOCKPERF_MIN: usize = 14;
/// Every this many messages (by sequence number) the subscriber checks every byte.
const CHECK_EVERY: u64 = 64;
/// The largest message size accepted.
const MAX_SIZE: usize = 64 << 20;
/// The longest `--duration` accepted, in seconds.
const MAX_DURATION_S: f64 = 600.0;
/// How long the peer may take to start, and to exit at the end.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// After the publisher has finished: how long the subscriber waits for more, at most.
const DRAIN_LIMIT: Duration = Duration::from_secs(20);

/// What `ferry lab throughput` is asked to measure.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Transports, in the order they run at each size, except that a baseline runs before the
    /// rows compared with it.
    pub transports: Vec<Subject>,
    /// Message sizes in bytes (at least 8: the first 8 carry the sequence number).
    pub sizes: Vec<usize>,
    /// Delivery of ferry's transports and of the other systems (iceoryx2, Zenoh).
    #[schemars(with = "crate::args::DeliverySchema")]
    pub delivery: Delivery,
    /// Loss injected by ferry on the publisher's datagrams (ferry's UDP transports only), in
    /// percent.
    pub loss: Option<f64>,
    /// Seconds the publisher sends, per transport, size and round (iperf3 and sockperf take
    /// whole seconds: rounded up).
    pub duration: f64,
    /// Interleaved rounds: every round runs every transport in turn.
    pub rounds: usize,
    /// How ferry's subscriber (and a reliable publisher) waits.
    #[schemars(with = "crate::args::WaitSchema")]
    pub wait: WaitStrategy,
    /// CPUs of the main process (publisher) and of the peer (subscriber); `None`: the first two
    /// this process may use.
    pub pin: Option<Pin>,
    /// The `ferry lab agent` (`HOST[:PORT]`) that runs the subscriber on another machine;
    /// `None`: a local peer process.
    pub remote: Option<String>,
    /// 1: both sides on this host (loopback); 2: the publisher and the subscriber in two
    /// network namespaces joined by a veth pair, one pair per link rate.
    pub hosts: u8,
    /// With `hosts` 2: the rates of the links (`100mbit`, `1gbit`), a `tc tbf` on both ends of
    /// each; every round runs every link.
    #[serde(with = "netns::rate_list")]
    #[schemars(with = "Vec<String>")]
    pub link_rates: Vec<LinkRate>,
    /// With `hosts` 2: seconds between messages, sent on an absolute schedule (message k at
    /// k × period from the first), as a camera or a lidar sends; each message carries its send
    /// time and the subscriber takes its latency. `None`: back to back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period: Option<f64>,
}

/// The transports of `--hosts 2 --period` when none are given: ferry and TCP sending the same
/// messages on the same schedule.
pub const PERIOD_TRANSPORTS: [Subject; 2] = [Subject::Udp4, Subject::Tcp];

/// The shortest `--period`, in seconds.
const MIN_PERIOD_S: f64 = 0.001;

/// The transports of `--hosts 2` when none are given: ferry and the floors on the link.
pub const LINK_TRANSPORTS: [Subject; 4] = [
    Subject::Udp4,
    Subject::RawUdp4,
    Subject::Iperf3Tcp,
    Subject::Iperf3,
];

/// The namespaces of `--hosts 2` are named after this (and the process id).
pub const NS_PREFIX: &str = "ferry-tput-";

impl Default for Config {
    fn default() -> Config {
        Config {
            transports: vec![
                Subject::Shm,
                Subject::Udp4,
                Subject::RawUdp4,
                Subject::Iperf3,
                Subject::Sockperf,
            ],
            sizes: vec![64, 1 << 10, 64 << 10],
            delivery: Delivery::Reliable,
            loss: None,
            duration: 2.0,
            rounds: 3,
            wait: WaitStrategy::Adaptive,
            pin: None,
            remote: None,
            hosts: 1,
            link_rates: Vec::new(),
            period: None,
        }
    }
}

/// The experiment (see the module's documentation).
pub struct Throughput;

// ---------------------------------------------------------------------------------------------
// Payload

/// Writes message `seq`: its number in bytes 0..8, its pattern byte in the rest.
#[inline]
fn write_message(buf: &mut [u8], seq: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..].fill(pattern(seq, Dir::Ping));
}

/// The smallest message that carries its send time.
const STAMPED_MIN: usize = 16;

/// Writes message `seq` stamped with its send time (`--period`): its number in bytes 0..8, the
/// time (CLOCK_MONOTONIC, ns: the same clock in every namespace of this host) in 8..16, its
/// pattern byte in the rest.
fn write_stamped(buf: &mut [u8], seq: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    buf[16..].fill(pattern(seq, Dir::Ping));
    buf[8..16].copy_from_slice(&monotonic_ns().to_le_bytes());
}

/// A message's writer: stamped under `--period`.
fn writer(period: Option<Duration>) -> fn(&mut [u8], u64) {
    if period.is_some() {
        write_stamped
    } else {
        write_message
    }
}

/// What the subscriber counts.
#[derive(Debug, Default)]
struct Tally {
    size: usize,
    delivered: u64,
    bytes: u64,
    first_ns: u64,
    last_ns: u64,
    /// The highest sequence number delivered.
    last_seq: Option<u64>,
    /// Messages whose number was not above the last one's (duplicates or reordering).
    out_of_order: u64,
    /// Messages of which every byte was checked.
    checked: u64,
    /// Messages carry their send time (`--period`): bytes 8..16.
    stamped: bool,
    /// Each delivered message's latency (stamped messages), ns.
    latencies: Vec<u64>,
}

/// Per-message latency, from the publisher's send call to the subscriber's receipt, ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Latency {
    p50_ns: u64,
    p99_ns: u64,
    max_ns: u64,
}

impl Tally {
    fn new(size: usize) -> Tally {
        Tally {
            size,
            ..Tally::default()
        }
    }

    /// A tally of messages stamped with their send time (see `write_stamped`).
    fn stamped(size: usize) -> Tally {
        Tally {
            size,
            stamped: true,
            ..Tally::default()
        }
    }

    fn latency(&self) -> Option<Latency> {
        if self.latencies.is_empty() {
            return None;
        }
        let mut l = self.latencies.clone();
        l.sort_unstable();
        let at = |q: f64| l[((l.len() - 1) as f64 * q).round() as usize];
        Some(Latency {
            p50_ns: at(0.5),
            p99_ns: at(0.99),
            max_ns: l[l.len() - 1],
        })
    }

    /// Takes one message; an error if it is damaged (wrong length or content, or a sequence
    /// number that disagrees with the transport's).
    fn take(&mut self, payload: &[u8], transport_seq: Option<u64>) -> Result<()> {
        if payload.len() != self.size {
            bail!(
                "a message of {} bytes arrived, expected {}",
                payload.len(),
                self.size
            );
        }
        let mut num = [0u8; 8];
        num.copy_from_slice(&payload[..8]);
        let seq = u64::from_le_bytes(num);
        if let Some(t) = transport_seq {
            if t != seq {
                bail!("message {seq} arrived with ferry sequence number {t}");
            }
        }
        let now = monotonic_ns();
        if self.delivered == 0 {
            self.first_ns = now;
        }
        if self.last_seq.is_some_and(|l| seq <= l) {
            self.out_of_order += 1;
        } else {
            self.delivered += 1;
            self.bytes += payload.len() as u64;
            self.last_seq = Some(seq);
            self.last_ns = now;
            if self.stamped {
                num.copy_from_slice(&payload[8..16]);
                self.latencies
                    .push(now.saturating_sub(u64::from_le_bytes(num)));
            }
        }
        let body = if self.stamped { 16 } else { 8 };
        if seq % CHECK_EVERY == 0 {
            let byte = pattern(seq, Dir::Ping);
            if !super::check(&payload[body..], byte) {
                let at = body + payload[body..].iter().position(|&b| b != byte).unwrap_or(0);
                bail!(
                    "message {seq} is corrupt: byte {at} is {:#04x}, expected {byte:#04x}",
                    payload[at]
                );
            }
            self.checked += 1;
        }
        Ok(())
    }

    /// The counts for the main side (the counters the tally does not hold are filled in by the
    /// caller).
    fn counts(&self) -> Counts {
        Counts {
            delivered: self.delivered,
            bytes: self.bytes,
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            out_of_order: self.out_of_order,
            checked: self.checked,
            kernel_drops: None,
            ferry_lost: None,
            ferry_skipped: None,
            latency: self.latency(),
        }
    }
}

/// When the subscriber stops: once the publisher said how much it sent and either the last
/// message arrived or nothing came for `idle` (or the drain limit passed).
struct Ending {
    /// What the publisher sent, once it said.
    sent: Option<u64>,
    done_at: Option<Instant>,
    last_progress: Instant,
    delivered_then: u64,
    idle: Duration,
}

impl Ending {
    fn new(idle: Duration) -> Ending {
        Ending {
            sent: None,
            done_at: None,
            last_progress: Instant::now(),
            delivered_then: 0,
            idle,
        }
    }

    /// Takes the main side's commands that have come (an error once it went away).
    fn take_commands(&mut self, link: &mut PeerLink) -> Result<()> {
        while let Some(command) = link.recv::<Command>(Duration::ZERO)? {
            match command {
                Command::Done { sent } => self.sent = Some(sent),
                Command::Release => bail!("the main side let the subscriber go before its count"),
                Command::Go => bail!("the main side told a subscriber to send"),
            }
        }
        Ok(())
    }

    fn finished(&mut self, tally: &Tally) -> bool {
        let Some(sent) = self.sent else {
            return false;
        };
        let now = Instant::now();
        let done_at = *self.done_at.get_or_insert(now);
        if sent == 0 || tally.last_seq.is_some_and(|l| l.saturating_add(1) >= sent) {
            return true;
        }
        if tally.delivered != self.delivered_then {
            self.delivered_then = tally.delivered;
            self.last_progress = now;
        }
        now.duration_since(self.last_progress.max(done_at)) >= self.idle
            || now.duration_since(done_at) >= DRAIN_LIMIT
    }
}

// ---------------------------------------------------------------------------------------------
// The control messages

/// What the main side tells the peer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Command {
    /// The publisher has finished, after `sent` messages.
    Done { sent: u64 },
    /// The main side no longer needs the peer's subscriber (or publisher): it may close and
    /// exit.
    Release,
    /// A publisher peer (`--hosts 2`): start sending.
    Go,
}

/// What the peer tells the main side.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum PeerReport {
    /// The subscriber is attached (ferry), or the socket bound on `port` (raw-udp4).
    Ready { port: Option<u16> },
    /// What the subscriber got.
    Counts(Counts),
    /// A publisher peer has sent `sent` messages, the first at `start_ns` (its
    /// CLOCK_MONOTONIC, which is this host's in every namespace), for `send_ns`.
    Sent {
        sent: u64,
        start_ns: u64,
        send_ns: u64,
    },
    /// A publisher peer has closed: its counters as it last published them (`None`: not
    /// found), how long closing took, and how often a send found the device queue full.
    Closed {
        retransmitted: Option<u64>,
        kernel_drops: Option<u64>,
        close_ns: Option<u64>,
        enobufs: u64,
    },
}

/// The subscriber's counts. Times are the peer's CLOCK_MONOTONIC, in ns.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Counts {
    delivered: u64,
    bytes: u64,
    first_ns: u64,
    last_ns: u64,
    out_of_order: u64,
    checked: u64,
    /// `None`: the peer could not read it.
    kernel_drops: Option<u64>,
    ferry_lost: Option<u64>,
    ferry_skipped: Option<u64>,
    /// Stamped messages (`--period`): their latency.
    #[serde(default)]
    latency: Option<Latency>,
}

// ---------------------------------------------------------------------------------------------
// The experiment

/// What one measurement gave (counts a transport cannot give are `None`).
#[derive(Debug, Default)]
struct Measurement {
    messages_sent: Option<u64>,
    messages_delivered: Option<u64>,
    bytes_delivered: Option<u64>,
    /// The interval the rates are taken over.
    seconds: f64,
    /// Seconds the publisher spent sending (ferry, raw-udp4).
    send_seconds: Option<f64>,
    /// Delivered payload bits per second when the tool reports it itself.
    delivered_bps: Option<f64>,
    lost: Option<u64>,
    retransmitted: Option<u64>,
    kernel_drops: Option<u64>,
    out_of_order: Option<u64>,
    checked_messages: Option<u64>,
    ferry_lost: Option<u64>,
    ferry_skipped: Option<u64>,
    /// Seconds dropping the ferry publisher took.
    close_seconds: Option<f64>,
    /// Across a link: what the tbf on the sender's end passed on and dropped during the run.
    link: Option<netns::QdiscCounts>,
    /// `--period`: per-message latency.
    latency: Option<Latency>,
    note: Option<String>,
}

impl Measurement {
    fn add_note(&mut self, text: String) {
        self.note = Some(match self.note.take() {
            Some(n) => format!("{n}; {text}"),
            None => text,
        });
    }
}

/// The other machine of a `--remote` run.
struct Remote {
    /// The agent's address, as given.
    agent: String,
    /// The other machine's address (the agent's).
    ip: IpAddr,
    /// This machine's address on the way there.
    here: IpAddr,
}

impl Remote {
    fn resolve(agent: &str) -> Result<Remote> {
        let target = crate::peer::agent_address(agent)?;
        if !target.is_ipv4() {
            bail!("--remote {agent}: give an IPv4 address of the other machine (ferry's discovery and raw-udp4 run over IPv4)");
        }
        Ok(Remote {
            agent: agent.to_owned(),
            ip: target.ip(),
            here: crate::peer::local_address_towards(agent)?,
        })
    }
}

struct Ctx<'a> {
    args: &'a Config,
    duration: Duration,
    domain: String,
    pinning: &'a Pinning,
    /// Installed third-party tools, by transport.
    programs: BTreeMap<&'static str, PathBuf>,
    remote: Option<Remote>,
    run_index: usize,
    /// `--hosts 2`: one pair of namespaces per link rate, in the order of `link_rates`.
    pairs: Vec<Pair>,
}

impl Ctx<'_> {
    fn place(&self) -> Place {
        Place::remote(self.remote.as_ref().map(|r| r.agent.as_str()))
    }

    fn request(&self, transport: Subject, size: usize) -> PeerRequest {
        PeerRequest {
            transport,
            size,
            delivery: self.args.delivery,
            wait: self.args.wait,
            // A remote peer's CPUs are its machine's business.
            cpu: self.pinning.peer_cpu(),
            ferry: None,
            main: None,
            role: Role::Subscribe,
            bind: None,
            dest: None,
            duration_s: None,
            period_s: None,
        }
    }
}

/// The pairs of `--hosts 2`, with what this machine lacks for them said in terms of the
/// options.
fn make_pairs(rates: &[LinkRate]) -> Result<Vec<Pair>> {
    let mut missing = netns::missing(true);
    if !missing.is_empty() {
        if let Some(root) = missing.iter_mut().find(|m| m.starts_with("root")) {
            root.push_str("; run as root, or use --hosts 1");
        }
        bail!("--hosts 2 needs {}", missing.join("; and "));
    }
    // Made one after the other; those made are removed (dropped) if a later one fails.
    rates
        .iter()
        .map(|&rate| {
            Pair::create(&netns::Spec {
                prefix: NS_PREFIX,
                device: "ftput",
                net: 204,
                rate: Some(rate),
            })
        })
        .collect()
}

fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn impair_spec(loss: Option<f64>) -> Option<String> {
    loss.filter(|&l| l > 0.0)
        .map(|l| format!("loss={l}%,seed=1"))
}

/// The order transports run in at each size: every baseline before the rows compared with it
/// (TCP, then the UDP floors and ferry's shared memory, then ferry's UDP and the other
/// systems), otherwise as given.
fn run_order(transports: &[Subject]) -> Vec<Subject> {
    baselines_first(transports, |t| t.baselines().to_vec())
        .into_iter()
        .map(|i| transports[i])
        .collect()
}

/// Runs every round: on each link, each size in turn, and at each size every transport in
/// `run_order`, so that a row runs within seconds of its baselines. A row whose baseline's last
/// run at its size ended more than `BASELINE_GAP` before it is followed by another run of the
/// baseline (`Row::references`). Rows come back in the order of the arguments (transport, then
/// size, within each round and link).
fn measure(ctx: &mut Ctx<'_>, rows: &mut Vec<Row>) -> Result<()> {
    let args = ctx.args;
    let first = Instant::now();
    // On one host, one pass per round with no link; on two, one per link.
    let links: Vec<Option<usize>> = if ctx.pairs.is_empty() {
        vec![None]
    } else {
        (0..ctx.pairs.len()).map(Some).collect()
    };
    let order = run_order(&args.transports);
    let start = rows.len();
    for round in 0..args.rounds {
        note!("round {}/{}", round + 1, args.rounds);
        for &link in &links {
            let rate = link.and_then(|i| ctx.pairs[i].rate);
            if let Some(rate) = rate {
                note!(" the {rate} link");
            }
            for &size in &args.sizes {
                // When each transport's last run at this size (its row's or a reference's) ended.
                let mut ended: BTreeMap<Subject, Instant> = BTreeMap::new();
                for &transport in &order {
                    let mut row = run_row(ctx, link, transport, size, round, "")?;
                    if row.skipped.is_some() {
                        rows.push(row);
                        continue;
                    }
                    let now = Instant::now();
                    row.ended_s = Some(now.duration_since(first).as_secs_f64());
                    ended.insert(transport, now);
                    for &b in transport.baselines() {
                        let Some(&e) = ended.get(&b) else {
                            continue; // not in this run, or skipped: nothing to compare with
                        };
                        if now.duration_since(e) <= BASELINE_GAP {
                            continue;
                        }
                        let beside = format!(" beside {}", transport.name());
                        let again = run_row(ctx, link, b, size, round, &beside)?;
                        let now = Instant::now();
                        ended.insert(b, now);
                        if let Some(gbps) = again.delivered_gbps {
                            row.references.insert(
                                b,
                                Reference {
                                    delivered_gbps: gbps,
                                    ended_s: now.duration_since(first).as_secs_f64(),
                                },
                            );
                        }
                    }
                    rows.push(row);
                }
            }
        }
    }
    // Back in the order of the arguments.
    let at = |list: &[Subject], t: Subject| list.iter().position(|&x| x == t);
    let link_at = |bps: Option<u64>| ctx.pairs.iter().position(|p| p.rate.map(|r| r.bps) == bps);
    rows[start..].sort_by_key(|r| {
        (
            r.round,
            link_at(r.link_rate_bps),
            at(&args.transports, r.transport),
            args.sizes.iter().position(|&s| s == r.size_bytes),
        )
    });
    Ok(())
}

/// One run of `transport` at `size` (or its skip), noted with its time.
fn run_row(
    ctx: &mut Ctx<'_>,
    link: Option<usize>,
    transport: Subject,
    size: usize,
    round: usize,
    beside: &str,
) -> Result<Row> {
    let args = ctx.args;
    let rate = link.and_then(|i| ctx.pairs[i].rate);
    signal::check()?;
    let started = Instant::now();
    let skipped = transport.cannot_run(size).or_else(|| {
        transport
            .program()
            .filter(|p| !ctx.programs.contains_key(p))
            .map(|p| format!("skipped: {p} is not installed ({})", tools::INSTALL_HINT))
    });
    let m = match &skipped {
        Some(_) => None,
        None => Some(measure_one(ctx, link, transport, size).context(format!(
            "{} {}{beside} (round {}{})",
            transport.name(),
            format_size(size),
            round + 1,
            rate.map(|r| format!(", the {r} link")).unwrap_or_default()
        ))?),
    };
    ctx.run_index += 1;
    let mut row = Row::new(args, transport, size, round, m, skipped);
    if let Some(rate) = rate {
        row.link_rate = Some(rate.name());
        row.link_rate_bps = Some(rate.bps);
        if args.period.is_some() && rate.bps > 0 {
            row.serialization_ms = Some(size as f64 * 8.0 / rate.bps as f64 * 1e3);
        }
    }
    note!(
        "  {:<9} {:>9}  {}  ({:.1} s){beside}",
        transport.name(),
        format_size(size),
        row.brief(),
        started.elapsed().as_secs_f64()
    );
    Ok(row)
}

fn measure_one(
    ctx: &Ctx<'_>,
    link: Option<usize>,
    transport: Subject,
    size: usize,
) -> Result<Measurement> {
    let (main_cpu, peer_cpu) = match ctx.pinning {
        Pinning::Pinned { main_cpu, peer_cpu } => (Some(*main_cpu), Some(*peer_cpu)),
        Pinning::Remote { main_cpu } => (*main_cpu, None),
        Pinning::None { .. } => (None, None),
    };
    if let Some(pair) = link.map(|i| &ctx.pairs[i]) {
        return measure_link(ctx, pair, transport, size, (main_cpu, peer_cpu));
    }
    match transport {
        Subject::Shm | Subject::Udp4 | Subject::Udp4Key | Subject::Udp6 => {
            measure_ferry(ctx, transport, size)
        }
        Subject::RawUdp4 => measure_raw(ctx, size),
        Subject::Tcp => bail!("tcp runs across the link of --hosts 2 only"),
        Subject::Iceoryx2 | Subject::Zenoh | Subject::ZenohShm => {
            measure_peer(ctx, transport, size, main_cpu.zip(peer_cpu))
        }
        Subject::Iperf3 | Subject::Iperf3Tcp | Subject::Sockperf => {
            let program = &ctx.programs[transport.program().unwrap_or_default()];
            let len = transport.datagram_bytes(size).unwrap_or(size);
            let r = match transport {
                Subject::Iperf3 => tools::iperf3(program, len, ctx.duration, main_cpu, peer_cpu)?,
                Subject::Iperf3Tcp => tools::iperf3_run(
                    program,
                    tools::Iperf3Mode::Tcp {
                        len: size,
                        congestion: None,
                    },
                    ctx.duration,
                    main_cpu,
                    peer_cpu,
                    None,
                )?,
                _ => tools::sockperf(program, len, ctx.duration, main_cpu, peer_cpu)?,
            };
            Ok(tool_measurement(transport, size, r))
        }
        other => bail!("throughput does not measure {other}"),
    }
}

/// A third-party tool's counts as a measurement.
fn tool_measurement(transport: Subject, size: usize, r: tools::ToolResult) -> Measurement {
    let mut note = r.note;
    match transport.datagram_bytes(size) {
        Some(len) if len != size => {
            note = format!("datagrams of {len} bytes (min(size, 1472)); {note}");
        }
        _ if transport == Subject::Iperf3Tcp && size > tools::IPERF3_MAX_LEN => {
            note = format!(
                "written {} at a time (iperf3's largest); {note}",
                format_size(tools::IPERF3_MAX_LEN)
            );
        }
        _ => {}
    }
    Measurement {
        messages_sent: r.datagrams_sent,
        messages_delivered: r.datagrams_delivered,
        bytes_delivered: r.bytes_delivered,
        seconds: r.seconds,
        delivered_bps: r.delivered_bps,
        lost: r.lost,
        retransmitted: r.retransmits,
        note: Some(note),
        ..Measurement::default()
    }
}

/// What passed the tbf on A's end (the sender's side) while `run` ran, with the measurement.
fn counting_link(pair: &Pair, run: impl FnOnce() -> Result<Measurement>) -> Result<Measurement> {
    let before = pair.qdisc_counts(0);
    let mut m = run()?;
    let counted = before.and_then(|b| pair.qdisc_counts(0).and_then(|a| b.until(a)));
    match counted {
        Ok(c) => m.link = Some(c),
        Err(e) => m.add_note(format!("packets on the link unknown: {e}")),
    }
    Ok(m)
}

/// One run across the link of `pair`: the publisher (or iperf3's client) in namespace A, the
/// subscriber (or iperf3's server) in B.
fn measure_link(
    ctx: &Ctx<'_>,
    pair: &Pair,
    transport: Subject,
    size: usize,
    (main_cpu, peer_cpu): (Option<usize>, Option<usize>),
) -> Result<Measurement> {
    match transport {
        Subject::Iperf3 | Subject::Iperf3Tcp => {
            let program = &ctx.programs["iperf3"];
            let mode = match transport {
                Subject::Iperf3 => tools::Iperf3Mode::Udp {
                    len: transport.datagram_bytes(size).unwrap_or(size),
                    bitrate: pair.rate.map_or(0, |r| r.bps),
                },
                _ => tools::Iperf3Mode::Tcp {
                    len: size,
                    congestion: None,
                },
            };
            counting_link(pair, || {
                let r =
                    tools::iperf3_run(program, mode, ctx.duration, main_cpu, peer_cpu, Some(pair))?;
                Ok(tool_measurement(transport, size, r))
            })
        }
        Subject::Udp4 | Subject::Udp4Key | Subject::RawUdp4 | Subject::Tcp => {
            measure_link_peers(ctx, pair, transport, size, main_cpu)
        }
        _ => bail!("{} cannot run across the link", transport.name()),
    }
}

/// Waits at most `timeout` for a report of a publisher peer that `pick` takes.
fn await_publisher<T>(
    peer: &mut Peer,
    timeout: Duration,
    what: &str,
    pick: impl FnOnce(PeerReport) -> Option<T>,
) -> Result<T> {
    let report = await_report(peer, timeout, what)?;
    let said = format!("{report:?}");
    pick(report).ok_or_else(|| {
        crate::error::Error::msg(format!("the publisher peer sent {said} instead of {what}"))
    })
}

/// ferry or raw-udp4 across the link: a subscriber peer in B, a publisher peer in A. The
/// tbf's counters are read just before the publisher starts and after it has closed (a
/// reliable publisher lingers until its subscriber has everything).
fn measure_link_peers(
    ctx: &Ctx<'_>,
    pair: &Pair,
    transport: Subject,
    size: usize,
    main_cpu: Option<usize>,
) -> Result<Measurement> {
    let topic = format!("tp{}", ctx.run_index);
    let ferry_topic = |other: Ipv4Addr| FerryTopic {
        domain: ctx.domain.clone(),
        topic: topic.clone(),
        main_host: Some(other),
    };
    let mut subscribe = ctx.request(transport, size);
    let mut publish = ctx.request(transport, size);
    publish.role = Role::Publish;
    publish.cpu = main_cpu;
    publish.duration_s = Some(ctx.args.duration);
    publish.period_s = ctx.args.period;
    subscribe.period_s = ctx.args.period;
    if transport.is_ferry_udp() {
        subscribe.ferry = Some(ferry_topic(pair.addr[0]));
        publish.ferry = Some(ferry_topic(pair.addr[1]));
    } else {
        subscribe.bind = Some(pair.addr[1]);
        publish.bind = Some(pair.addr[0]);
    }
    // Declared before the publisher, so that on an error the publisher is killed first.
    let mut subscriber = Peer::start::<Throughput>(&subscribe, &pair.place(1))?;
    let port = await_ready(&mut subscriber)?;
    if !transport.is_ferry_udp() {
        match port {
            Some(port) if port != 0 => publish.dest = Some(SocketAddr::from((pair.addr[1], port))),
            _ => bail!("the subscriber did not say which UDP port it receives on"),
        }
    }
    let mut publisher = Peer::start::<Throughput>(&publish, &pair.place(0))?;
    // The publisher waits up to START_TIMEOUT for its subscriber to match.
    await_publisher(
        &mut publisher,
        START_TIMEOUT * 2,
        "that its subscriber matched",
        |r| matches!(r, PeerReport::Ready { .. }).then_some(()),
    )?;
    let before = pair.qdisc_counts(0);
    publisher.send(&Command::Go)?;
    let (sent, start_ns, send_ns) = await_publisher(
        &mut publisher,
        ctx.duration + START_TIMEOUT,
        "what it sent",
        |r| match r {
            PeerReport::Sent {
                sent,
                start_ns,
                send_ns,
            } => Some((sent, start_ns, send_ns)),
            _ => None,
        },
    )?;
    subscriber.send(&Command::Done { sent })?;
    let mut m = Measurement {
        messages_sent: Some(sent),
        send_seconds: Some(send_ns as f64 / 1e9),
        ..Measurement::default()
    };
    let counts = await_counts(&mut subscriber)?;
    read_report(&counts, &mut m, start_ns, true);
    publisher.send(&Command::Release)?;
    let (retransmitted, kernel_drops, close_ns, enobufs) = await_publisher(
        &mut publisher,
        DRAIN_LIMIT + START_TIMEOUT,
        "that it closed",
        |r| match r {
            PeerReport::Closed {
                retransmitted,
                kernel_drops,
                close_ns,
                enobufs,
            } => Some((retransmitted, kernel_drops, close_ns, enobufs)),
            _ => None,
        },
    )?;
    let counted = before.and_then(|b| pair.qdisc_counts(0).and_then(|a| b.until(a)));
    if transport.is_ferry_udp() {
        subscriber.send(&Command::Release)?;
    }
    publisher.finish(START_TIMEOUT)?;
    subscriber.finish(START_TIMEOUT)?;
    match counted {
        Ok(c) => m.link = Some(c),
        Err(e) => m.add_note(format!("packets on the link unknown: {e}")),
    }
    if transport.is_ferry_udp() {
        m.retransmitted = retransmitted;
        if retransmitted.is_none() {
            m.add_note(
                "repairs unknown: the publisher's counters were not found in ferry's registry"
                    .to_owned(),
            );
        }
        if let Some(k) = kernel_drops {
            m.kernel_drops = Some(m.kernel_drops.unwrap_or(0) + k);
        }
        m.close_seconds = close_ns.map(|n| n as f64 / 1e9);
        if let (Some(lost), Some(skipped)) = (m.ferry_lost, m.ferry_skipped) {
            m.add_note(format!(
                "ferry's subscriber counters: lost {lost}, skipped {skipped}"
            ));
        }
    }
    if enobufs > 0 {
        m.add_note(format!(
            "send_to failed with ENOBUFS {enobufs} times (retried)"
        ));
    }
    Ok(m)
}

fn ferry_qos(transport: Subject, size: usize, delivery: Delivery, wait: WaitStrategy) -> Qos {
    let qos = Qos::default()
        .delivery(delivery)
        .wait(wait)
        .max_message_size(size);
    match transport {
        Subject::Udp4 | Subject::Udp4Key | Subject::Udp6 => qos
            .transport(ferry::Transport::Udp)
            .ip_version(if transport == Subject::Udp6 {
                IpVersion::V6
            } else {
                IpVersion::V4
            })
            .mtu(UDP_MTU),
        _ => qos.transport(ferry::Transport::Shm),
    }
}

/// Waits at most `timeout` for the peer's next report, watching it and Ctrl-C.
fn await_report(peer: &mut Peer, timeout: Duration, what: &str) -> Result<PeerReport> {
    let deadline = Instant::now() + timeout;
    loop {
        signal::check()?;
        if let Some(report) = peer.recv::<PeerReport>(Duration::from_millis(50))? {
            return Ok(report);
        }
        if let Err(e) = peer.check_alive() {
            // Its last word may have come right after the report.
            return peer.recv::<PeerReport>(Duration::ZERO)?.ok_or(e);
        }
        if Instant::now() >= deadline {
            bail!("the peer did not send {what} within {timeout:?}");
        }
    }
}

/// Waits for the peer to say that it is ready; returns the port it said (raw-udp4).
fn await_ready(peer: &mut Peer) -> Result<Option<u16>> {
    match await_report(peer, START_TIMEOUT, "that it is ready")? {
        PeerReport::Ready { port } => Ok(port),
        PeerReport::Counts(_) => bail!("the peer sent its counts before it said it was ready"),
        other => bail!("the peer sent {other:?} before it said it was ready"),
    }
}

/// Waits for the peer's counts (it has the drain limit to see the last messages come).
fn await_counts(peer: &mut Peer) -> Result<Counts> {
    match await_report(peer, DRAIN_LIMIT + START_TIMEOUT, "its counts")? {
        PeerReport::Counts(c) => Ok(c),
        PeerReport::Ready { .. } => bail!("the peer said it was ready twice"),
        other => bail!("the peer sent {other:?} instead of its counts"),
    }
}

/// The peer's counts. `same_clock`: the peer's times are on this machine's clock, so that the
/// interval can start at the publisher's first send (`start_ns`).
fn read_report(c: &Counts, m: &mut Measurement, start_ns: u64, same_clock: bool) {
    m.messages_delivered = Some(c.delivered);
    m.bytes_delivered = Some(c.bytes);
    m.out_of_order = Some(c.out_of_order);
    m.checked_messages = Some(c.checked);
    m.kernel_drops = c.kernel_drops;
    m.ferry_lost = c.ferry_lost;
    m.ferry_skipped = c.ferry_skipped;
    m.latency = c.latency;
    let from = if same_clock { start_ns } else { c.first_ns };
    m.seconds = if c.delivered > 0 && c.last_ns > from {
        (c.last_ns - from) as f64 / 1e9
    } else {
        m.send_seconds.unwrap_or(0.0)
    };
    m.lost = m.messages_sent.map(|s| s.saturating_sub(c.delivered));
}

/// Sends back to back until `duration` has passed, or with `period` one message per period on
/// an absolute schedule (message k due k periods after the first: a late send does not move the
/// ones after it); `send(seq)` sends message `seq`. Returns the count and the first send's time
/// (ns).
fn send_for(
    duration: Duration,
    size: usize,
    period: Option<Duration>,
    mut send: impl FnMut(u64) -> Result<()>,
) -> Result<(u64, u64, f64)> {
    if let Some(period) = period {
        let start_ns = monotonic_ns();
        let start = Instant::now();
        let mut seq = 0u64;
        loop {
            let due = start + period.saturating_mul(u32::try_from(seq).unwrap_or(u32::MAX));
            if due.duration_since(start) >= duration {
                break;
            }
            // Sleeps in slices, so that Ctrl-C is heard.
            while let Some(left) = due.checked_duration_since(Instant::now()) {
                signal::check()?;
                std::thread::sleep(left.min(Duration::from_millis(50)));
            }
            send(seq)?;
            seq += 1;
        }
        return Ok((seq, start_ns, start.elapsed().as_secs_f64()));
    }
    // Reading the clock after every message would cost small messages a good share of their
    // time; every 16th is within a few microseconds.
    let every = if size >= 4096 { 1 } else { 16 };
    let start_ns = monotonic_ns();
    let start = Instant::now();
    let deadline = start + duration;
    let mut seq = 0u64;
    loop {
        send(seq)?;
        seq += 1;
        if seq % every == 0 {
            if Instant::now() >= deadline {
                break;
            }
            // A relaxed load, cheaper than the clock: with it, a run of large messages stops
            // within a message or so of Ctrl-C.
            signal::check()?;
        }
    }
    Ok((seq, start_ns, start.elapsed().as_secs_f64()))
}

fn measure_ferry(ctx: &Ctx<'_>, transport: Subject, size: usize) -> Result<Measurement> {
    let args = ctx.args;
    let topic = format!("tp{}", ctx.run_index);
    let qos = ferry_qos(transport, size, args.delivery, args.wait);
    // Across two machines, each side's discovery reaches the other's.
    let (here, there) = match &ctx.remote {
        Some(r) => match (r.here.to_canonical(), r.ip.to_canonical()) {
            (IpAddr::V4(h), IpAddr::V4(t)) => (Some(h), Some(t)),
            _ => bail!("--remote {}: ferry's discovery runs over IPv4", r.agent),
        },
        None => (None, None),
    };
    let mut node = super::lab_node_reaching(
        "lab-main",
        &ctx.domain,
        transport == Subject::Udp4Key,
        super::discovery_reaching(there),
    )?;
    // The loss is injected by the publisher's node alone (a setting of that node: the peer
    // process, a node of its own, subscribes unimpaired).
    if let Some(spec) = impair_spec(args.loss).filter(|_| transport.is_ferry_udp()) {
        let config = node.config().clone();
        let impairment = ferry::Impairment::parse(&spec)?;
        node = ferry::Node::with_config(node.name(), config.with_impairment(Some(impairment)))?;
    }
    // Declared before the publisher, so that on an error or Ctrl-C the publisher closes while the
    // peer still reads (a reliable UDP publisher lingers until its subscribers confirmed all it
    // sent, and waits the longest for one that was killed), and the peer is killed after.
    let mut peer: Peer;
    let mut publisher = node.publisher(&topic, &qos)?;
    let mut request = ctx.request(transport, size);
    request.ferry = Some(FerryTopic {
        domain: ctx.domain.clone(),
        topic: topic.clone(),
        main_host: here,
    });
    peer = Peer::start::<Throughput>(&request, &ctx.place())?;
    await_ready(&mut peer)?;
    peer.wait_ready(START_TIMEOUT, || Ok(publisher.subscriber_count() >= 1))?;

    let (sent, start_ns, send_seconds) = send_for(ctx.duration, size, None, |seq| {
        let mut loan = publisher.loan(size)?;
        write_message(loan.as_mut_slice(), seq);
        loan.send()?;
        Ok(())
    })?;
    peer.send(&Command::Done { sent })?;
    let mut m = Measurement {
        messages_sent: Some(sent),
        send_seconds: Some(send_seconds),
        ..Measurement::default()
    };
    let counts = await_counts(&mut peer)?;
    read_report(&counts, &mut m, start_ns, ctx.remote.is_none());
    // The publisher's counters (retransmissions, its socket's drops) as it published them.
    if transport.is_ferry_udp() {
        std::thread::sleep(Duration::from_millis(30));
        let me = std::process::id();
        if let Some(p) = ferry::admin::topic(&ctx.domain, &topic)?
            .and_then(|t| t.publishers.into_iter().find(|p| p.pid == me))
        {
            m.retransmitted = Some(p.retransmitted);
            m.kernel_drops = Some(m.kernel_drops.unwrap_or(0) + p.kernel_drops);
        }
    }
    // A reliable UDP publisher lingers when dropped until its subscribers have reported that
    // they have everything; the peer keeps its subscriber polling meanwhile. How long that
    // takes is recorded: it is time an application waits when it closes a publisher.
    let closing = Instant::now();
    drop(publisher);
    m.close_seconds = Some(closing.elapsed().as_secs_f64());
    peer.send(&Command::Release)?;
    peer.finish(START_TIMEOUT)?;
    if let (Some(lost), Some(skipped)) = (m.ferry_lost, m.ferry_skipped) {
        m.note = Some(format!(
            "ferry's subscriber counters: lost {lost}, skipped {skipped}"
        ));
    }
    Ok(m)
}

/// Another system: `ferry-peers` publishes and subscribes in two processes of its own, the
/// payload work as ferry's; the rate is taken over the same interval (same host, same clock).
fn measure_peer(
    ctx: &Ctx<'_>,
    transport: Subject,
    size: usize,
    pin: Option<(usize, usize)>,
) -> Result<Measurement> {
    let system = transport.name();
    let bin = crate::peers::binary(&format!("{system}-throughput"))?;
    let out = crate::peers::throughput(
        &bin,
        system,
        size,
        ctx.duration,
        ctx.args.delivery.name(),
        pin,
    )?;
    let mut m = Measurement {
        messages_sent: Some(out.sent),
        send_seconds: Some(out.send_ns as f64 / 1e9),
        ..Measurement::default()
    };
    let counts = Counts {
        delivered: out.delivered,
        bytes: out.bytes,
        first_ns: out.first_delivery_ns,
        last_ns: out.last_delivery_ns,
        out_of_order: out.out_of_order,
        checked: out.checked,
        kernel_drops: None,
        ferry_lost: None,
        ferry_skipped: None,
        latency: None,
    };
    read_report(&counts, &mut m, out.first_send_ns, true);
    Ok(m)
}

fn measure_raw(ctx: &Ctx<'_>, size: usize) -> Result<Measurement> {
    let mut request = ctx.request(Subject::RawUdp4, size);
    let socket = match &ctx.remote {
        None => UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot bind a UDP socket")?,
        Some(r) => {
            let socket = UdpSocket::bind((r.here, 0))
                .context(format!("cannot bind a UDP socket on {}", r.here))?;
            // The peer takes datagrams from this socket only.
            request.main = Some(socket.local_addr()?);
            socket
        }
    };
    let mut peer = Peer::start::<Throughput>(&request, &ctx.place())?;
    let port = match await_ready(&mut peer)? {
        Some(port) if port != 0 => port,
        _ => bail!("the peer did not say which UDP port it receives on"),
    };
    let dst = match &ctx.remote {
        None => SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        // Only the port comes from the peer: the datagrams go to the machine the user named.
        Some(r) => SocketAddr::new(r.ip, port),
    };
    let mut buf = vec![0u8; size];
    let mut enobufs = 0u64;
    let (sent, start_ns, send_seconds) = send_for(ctx.duration, size, None, |seq| {
        write_message(&mut buf, seq);
        send_datagram(&socket, &buf, dst, &mut enobufs)
    })?;
    peer.send(&Command::Done { sent })?;
    let mut m = Measurement {
        messages_sent: Some(sent),
        send_seconds: Some(send_seconds),
        ..Measurement::default()
    };
    let counts = await_counts(&mut peer)?;
    read_report(&counts, &mut m, start_ns, ctx.remote.is_none());
    peer.finish(START_TIMEOUT)?;
    if enobufs > 0 {
        m.note = Some(format!(
            "send_to failed with ENOBUFS {enobufs} times (retried)"
        ));
    }
    Ok(m)
}

// ---------------------------------------------------------------------------------------------
// The peer

/// What the main side asks of the peer: subscribe to `size`-byte messages over `transport`,
/// count them, and report.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerRequest {
    transport: Subject,
    size: usize,
    delivery: Delivery,
    wait: WaitStrategy,
    cpu: Option<usize>,
    /// ferry's transports: the domain and topic.
    ferry: Option<FerryTopic>,
    /// raw-udp4 from another machine: the main side's socket. The peer then binds every
    /// address and takes datagrams from this one only; without it, it binds 127.0.0.1 (or
    /// `bind`).
    main: Option<SocketAddr>,
    /// Which side the peer runs (`--hosts 2` runs both in peers).
    #[serde(default)]
    role: Role,
    /// raw-udp4 across a link: the address the peer's socket binds (its namespace's).
    #[serde(default)]
    bind: Option<Ipv4Addr>,
    /// A raw-udp4 publisher: where it sends.
    #[serde(default)]
    dest: Option<SocketAddr>,
    /// A publisher: how long it sends, in seconds.
    #[serde(default)]
    duration_s: Option<f64>,
    /// `--period`: seconds between messages (the publisher's schedule; messages carry their send
    /// time, which the subscriber reads).
    #[serde(default)]
    period_s: Option<f64>,
}

/// The side a peer runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Role {
    /// Subscribes and counts (every run).
    #[default]
    Subscribe,
    /// Publishes, when told to (`Go`), for `duration_s` (`--hosts 2`).
    Publish,
}

#[derive(Debug, Serialize, Deserialize)]
struct FerryTopic {
    domain: String,
    topic: String,
    /// On two machines or namespaces: the other side's host (the publisher's for a subscriber,
    /// the subscriber's for a publisher peer), which the peer's discovery reaches.
    main_host: Option<std::net::Ipv4Addr>,
}

impl PeerRequest {
    /// A ferry transport's domain and topic (the main side always sends them).
    fn ferry_topic(&self) -> Result<&FerryTopic> {
        match &self.ferry {
            Some(t) => Ok(t),
            None => bail!("a ferry transport needs its domain and topic"),
        }
    }
}

/// Whether a receive came back empty-handed (a timeout or a signal) rather than failing.
fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

/// Waits for the main side's `want` (`Go` or `Release`), at most `timeout`.
fn await_command(link: &mut PeerLink, want: &str, timeout: Duration) -> Result<Command> {
    let deadline = Instant::now() + timeout;
    loop {
        signal::check()?;
        if let Some(command) = link.recv::<Command>(Duration::from_millis(50))? {
            return Ok(command);
        }
        if Instant::now() >= deadline {
            bail!("the main side did not say {want} within {timeout:?}");
        }
    }
}

/// A publisher peer (`--hosts 2`): waits for its subscriber (ferry), says it is ready, sends
/// back to back from `Go` for the request's duration, says how much, and on `Release` reads
/// its counters, closes and says so.
fn run_publisher(args: &PeerRequest, link: &mut PeerLink) -> Result<()> {
    if link.for_agent() {
        bail!("a publisher peer runs in a network namespace of the lab's machine only");
    }
    let duration = match args.duration_s {
        Some(s) if s.is_finite() && s > 0.0 && s <= MAX_DURATION_S => Duration::from_secs_f64(s),
        _ => bail!("a publisher peer needs a duration from 0 to {MAX_DURATION_S} s"),
    };
    let size = args.size;
    let period = match args.period_s {
        None => None,
        Some(s) if s.is_finite() && (MIN_PERIOD_S..=MAX_DURATION_S).contains(&s) => {
            Some(Duration::from_secs_f64(s))
        }
        Some(s) => bail!("a publisher peer's period of {s} s is out of range"),
    };
    if period.is_some() && size < STAMPED_MIN {
        bail!("a periodic message has at least {STAMPED_MIN} bytes");
    }
    let write = writer(period);
    let go = |link: &mut PeerLink| match await_command(link, "go", START_TIMEOUT * 2)? {
        Command::Go => Ok(()),
        other => bail!("the main side sent {other:?} before go"),
    };
    let release = |link: &mut PeerLink| match await_command(
        link,
        "release",
        DRAIN_LIMIT + START_TIMEOUT * 2,
    )? {
        Command::Release => Ok(()),
        other => bail!("the main side sent {other:?} before release"),
    };
    match args.transport {
        Subject::Udp4 | Subject::Udp4Key => {
            let FerryTopic {
                domain,
                topic,
                main_host,
            } = args.ferry_topic()?;
            let qos = ferry_qos(args.transport, size, args.delivery, args.wait);
            let node = super::lab_node_reaching(
                "lab-pub",
                domain,
                args.transport == Subject::Udp4Key,
                super::discovery_reaching(*main_host),
            )?;
            let mut publisher = node.publisher(topic, &qos)?;
            let deadline = Instant::now() + START_TIMEOUT;
            while publisher.subscriber_count() < 1 {
                signal::check()?;
                link.check_main()?;
                if Instant::now() >= deadline {
                    bail!("no subscriber matched the publisher within {START_TIMEOUT:?}");
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            link.report(&PeerReport::Ready { port: None })?;
            go(link)?;
            let (sent, start_ns, send_s) = send_for(duration, size, period, |seq| {
                let mut loan = publisher.loan(size)?;
                write(loan.as_mut_slice(), seq);
                loan.send()?;
                Ok(())
            })?;
            link.report(&PeerReport::Sent {
                sent,
                start_ns,
                send_ns: (send_s * 1e9) as u64,
            })?;
            release(link)?;
            // Its counters as it published them (retransmissions, its socket's drops).
            let me = std::process::id();
            let info = ferry::admin::topic(domain, topic)?
                .and_then(|t| t.publishers.into_iter().find(|p| p.pid == me));
            let closing = Instant::now();
            drop(publisher);
            link.report(&PeerReport::Closed {
                retransmitted: info.as_ref().map(|p| p.retransmitted),
                kernel_drops: info.as_ref().map(|p| p.kernel_drops),
                close_ns: Some(closing.elapsed().as_nanos() as u64),
                enobufs: 0,
            })
        }
        Subject::RawUdp4 => {
            let Some(dest) = args.dest else {
                bail!("a raw-udp4 publisher needs the subscriber's address");
            };
            let from = args.bind.unwrap_or(Ipv4Addr::UNSPECIFIED);
            let socket = UdpSocket::bind((from, 0))
                .context(format!("cannot bind a UDP socket on {from}"))?;
            link.report(&PeerReport::Ready { port: None })?;
            go(link)?;
            let mut buf = vec![0u8; size];
            let mut enobufs = 0u64;
            let (sent, start_ns, send_s) = send_for(duration, size, period, |seq| {
                write(&mut buf, seq);
                send_datagram(&socket, &buf, dest, &mut enobufs)
            })?;
            link.report(&PeerReport::Sent {
                sent,
                start_ns,
                send_ns: (send_s * 1e9) as u64,
            })?;
            release(link)?;
            link.report(&PeerReport::Closed {
                retransmitted: None,
                kernel_drops: None,
                close_ns: None,
                enobufs,
            })
        }
        Subject::Tcp => {
            let Some(dest) = args.dest else {
                bail!("the lab's TCP stream needs the subscriber's address");
            };
            let mut stream = TcpStream::connect_timeout(&dest, START_TIMEOUT)
                .context(format!("cannot connect over TCP to {dest}"))?;
            stream.set_nodelay(true)?;
            link.report(&PeerReport::Ready { port: None })?;
            go(link)?;
            let mut buf = vec![0u8; size];
            let (sent, start_ns, send_s) = send_for(duration, size, period, |seq| {
                write(&mut buf, seq);
                stream.write_all(&buf).context("TCP send")
            })?;
            link.report(&PeerReport::Sent {
                sent,
                start_ns,
                send_ns: (send_s * 1e9) as u64,
            })?;
            // Closing lets the rest go (the kernel delivers it): the subscriber reads to the end.
            let closing = Instant::now();
            stream
                .shutdown(std::net::Shutdown::Write)
                .context("TCP shutdown")?;
            release(link)?;
            link.report(&PeerReport::Closed {
                retransmitted: None,
                kernel_drops: None,
                close_ns: Some(closing.elapsed().as_nanos() as u64),
                enobufs: 0,
            })
        }
        t => bail!("{} has no publisher peer", t.name()),
    }
}

/// Sends one datagram, again while the device queue is full for a moment (ENOBUFS: it did not
/// leave), counting those.
fn send_datagram(socket: &UdpSocket, buf: &[u8], dst: SocketAddr, enobufs: &mut u64) -> Result<()> {
    loop {
        match socket.send_to(buf, dst) {
            Ok(_) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => *enobufs += 1,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => signal::check()?,
            Err(e) => return Err(e).context("UDP send_to"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Results

/// How a throughput run was made.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    transports: Vec<Subject>,
    transport_descriptions: BTreeMap<String, String>,
    sizes: Vec<usize>,
    #[schemars(with = "crate::args::DeliverySchema")]
    delivery: Delivery,
    loss_percent: f64,
    /// The impairment of the publisher's node, for ferry's UDP transports (as FERRY_IMPAIR
    /// would say it).
    impair: Option<String>,
    impair_applies_to: String,
    duration_s: f64,
    /// iperf3 and sockperf run whole seconds.
    tool_duration_s: u64,
    rounds: usize,
    #[schemars(with = "crate::args::WaitSchema")]
    wait: WaitStrategy,
    pinning: Pinning,
    udp_mtu: usize,
    payload: String,
    rate_interval: String,
    lost: String,
    processes: String,
    socket_buffers: SocketBuffers,
    /// Versions of the third-party tools found (null: found, version unknown).
    tools: BTreeMap<String, Option<String>>,
    /// `--hosts 2`: the links and how their packets were counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    link: Option<LinkSetup>,
    started_unix_s: u64,
}

/// The links of `--hosts 2`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct LinkSetup {
    pub hosts: u8,
    /// One pair of namespaces per link rate.
    pub links: Vec<Link>,
    pub placement: String,
    pub discovery: String,
    /// How `link_packets` and `link_drops` were read.
    pub link_packets: String,
    /// How `min_link_packets` is reckoned per transport.
    pub min_link_packets: String,
    pub note: String,
}

/// One link: two namespaces, the veth pair between them, the tbf on both ends.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Link {
    pub link_rate: String,
    pub link_rate_bps: u64,
    pub namespaces: crate::hubs::Sides,
    pub veth: crate::hubs::Sides,
    pub addresses: crate::hubs::Sides,
    pub tbf: crate::hubs::Tbf,
}

impl Link {
    /// The link of `pair`, if it has a rate.
    pub(crate) fn of(pair: &Pair) -> Option<Link> {
        let sides = |v: [String; 2]| crate::hubs::Sides {
            a: v[0].clone(),
            b: v[1].clone(),
        };
        let rate = pair.rate?;
        Some(Link {
            link_rate: rate.name(),
            link_rate_bps: rate.bps,
            namespaces: sides(pair.ns.clone()),
            veth: sides(pair.dev.clone()),
            addresses: sides(pair.addr.map(|a| a.to_string())),
            tbf: crate::hubs::Tbf {
                burst_bytes: rate.burst_bytes(),
                latency_ms: netns::TBF_LATENCY_MS,
                on: "both veth ends (egress of each)".to_owned(),
                commands: pair.tc.clone(),
            },
        })
    }
}

fn link_setup(pairs: &[Pair]) -> LinkSetup {
    LinkSetup {
        hosts: 2,
        links: pairs.iter().filter_map(Link::of).collect(),
        placement: "the publisher (a peer process) in namespace A, the subscriber (another) in B, both started with ip netns exec; iperf3's client in A, its server in B".to_owned(),
        discovery: format!("ferry: a static peer list: each side's discovery names the other's address (port {})", super::TWO_HOST_DISCOVERY_PORT),
        link_packets: "the counters of the tbf on A's veth end (tc -s -j qdisc show, packets sent on and dropped; a GSO packet counts as its segments), read just before the publisher starts and after it has closed (iperf3: before its server starts and after its client ended); they include what else A sent meanwhile (ferry's discovery and heartbeats, ARP, iperf3's control connection)".to_owned(),
        min_link_packets: format!("the fewest packets the delivered messages need: ferry udp4, for each delivered message ceil(size / {}) datagrams ({} = 1472 − its {}-byte DATA header; udp4-key {} bytes fewer), or, for messages small enough that two share a datagram, ceil(messages × (size + 4) / {0}) (batched, each behind a 4-byte length); raw-udp4, ceil((size + 8) / 1480) IP packets per delivered datagram; iperf3 (UDP), one per datagram delivered; iperf3-tcp, ceil(bytes delivered / {TCP_MSS}) (the MSS); extra = link packets over that, in percent", UDP_MTU - 28 - ferry::UDP_DATA_HEADER, UDP_MTU - 28 - ferry::UDP_DATA_HEADER, ferry::UDP_DATA_HEADER, ferry::UDP_SEAL_OVERHEAD),
        note: "both namespaces run on this machine's CPUs: the link is a veth pair, not a wire".to_owned(),
    }
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct SocketBuffers {
    rmem_default: Option<u64>,
    rmem_max: Option<u64>,
    wmem_default: Option<u64>,
    wmem_max: Option<u64>,
}

crate::choice! {
    /// The delivery a row ran with: ferry's, or none (plain UDP and the tools).
    pub enum RowDelivery: "delivery" / "deliveries" {
        Reliable = "reliable",
        Latest = "latest",
        None = "none",
    }
}

impl From<Delivery> for RowDelivery {
    fn from(d: Delivery) -> RowDelivery {
        match d {
            Delivery::Reliable => RowDelivery::Reliable,
            Delivery::Latest => RowDelivery::Latest,
        }
    }
}

/// One transport at one size in one round.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    pub transport: Subject,
    pub size_bytes: usize,
    /// UDP payload bytes per datagram (null for shared memory).
    pub datagram_bytes: Option<usize>,
    /// The run's delivery for ferry and the other systems; "none" for plain UDP and the tools.
    pub delivery: RowDelivery,
    /// Loss injected on this row's datagrams.
    pub loss_percent: f64,
    pub round: usize,
    pub duration_s: Option<f64>,
    pub messages_sent: Option<u64>,
    pub messages_delivered: Option<u64>,
    pub messages_per_s: Option<f64>,
    /// Payload bits delivered per second, in Gbit/s.
    pub delivered_gbps: Option<f64>,
    /// messages_sent − messages_delivered.
    pub lost: Option<u64>,
    pub retransmitted: Option<u64>,
    pub kernel_drops: Option<u64>,
    /// Seconds the publisher spent sending.
    pub send_s: Option<f64>,
    pub out_of_order: Option<u64>,
    pub checked_messages: Option<u64>,
    /// Seconds dropping the ferry publisher took after the run (a reliable UDP publisher
    /// lingers until its subscribers have reported everything received).
    pub publisher_close_s: Option<f64>,
    /// delivered_gbps over each baseline's, at the same size, in the same round (and on the same
    /// link), from the baseline's run that ended nearest in time to this one: its own row, or a
    /// run made beside a row (`references`).
    pub ratios: BTreeMap<Subject, f64>,
    /// When this run ended, in seconds from the start of the experiment's first run (null for a
    /// skipped row, and in results written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_s: Option<f64>,
    /// Baselines run again right after this row, because their run at this size in this round
    /// ended more than 10 s before this one's (the machine's speed changes within minutes).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub references: BTreeMap<Subject, Reference>,
    /// `--hosts 2`: the link's rate (`100mbit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rate_bps: Option<u64>,
    /// Packets the tbf on the sender's end passed on during the run (null on one host, or when
    /// they could not be read: see the note).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_packets: Option<u64>,
    /// Packets that tbf dropped (its queue was full).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_drops: Option<u64>,
    /// The fewest packets the delivered messages need (see the setup's `link`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_link_packets: Option<u64>,
    /// link_packets over min_link_packets, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_link_packets_percent: Option<f64>,
    /// `--period`: seconds between messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_s: Option<f64>,
    /// `--period`: the median, 99th percentile and largest per-message latency, from the
    /// publisher's send call to the subscriber's receipt of the whole message, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p99_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_max_ms: Option<f64>,
    /// `--period`: the time a message's payload takes on the link at its rate (size × 8 / rate),
    /// ms (the tbf lets its burst through at once, so a message that finds the link idle can
    /// arrive that much sooner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serialization_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A baseline's run made beside a row (see `Row::references`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Reference {
    /// Payload bits delivered per second, in Gbit/s.
    pub delivered_gbps: f64,
    /// When the run ended, on the clock of `Row::ended_s`.
    pub ended_s: f64,
}

impl Row {
    fn new(
        args: &Config,
        transport: Subject,
        size: usize,
        round: usize,
        m: Option<Measurement>,
        skipped: Option<String>,
    ) -> Row {
        let mut row = Row {
            transport,
            size_bytes: size,
            datagram_bytes: transport.datagram_bytes(size),
            delivery: if transport.honours_delivery() {
                args.delivery.into()
            } else {
                RowDelivery::None
            },
            loss_percent: if transport.is_ferry_udp() {
                args.loss.unwrap_or(0.0)
            } else {
                0.0
            },
            round,
            duration_s: None,
            messages_sent: None,
            messages_delivered: None,
            messages_per_s: None,
            delivered_gbps: None,
            lost: None,
            retransmitted: None,
            kernel_drops: None,
            send_s: None,
            out_of_order: None,
            checked_messages: None,
            publisher_close_s: None,
            ratios: BTreeMap::new(),
            ended_s: None,
            references: BTreeMap::new(),
            link_rate: None,
            link_rate_bps: None,
            link_packets: None,
            link_drops: None,
            min_link_packets: None,
            extra_link_packets_percent: None,
            period_s: None,
            latency_p50_ms: None,
            latency_p99_ms: None,
            latency_max_ms: None,
            serialization_ms: None,
            skipped,
            note: None,
        };
        let Some(m) = m else { return row };
        let secs = m.seconds;
        row.duration_s = Some(secs);
        row.messages_sent = m.messages_sent;
        row.messages_delivered = m.messages_delivered;
        if secs > 0.0 {
            row.messages_per_s = m.messages_delivered.map(|d| d as f64 / secs);
            row.delivered_gbps = m
                .delivered_bps
                .or_else(|| m.bytes_delivered.map(|b| b as f64 * 8.0 / secs))
                .map(|bps| bps / 1e9);
        }
        row.lost = m.lost;
        row.retransmitted = m.retransmitted;
        row.kernel_drops = m.kernel_drops;
        row.send_s = m.send_seconds;
        row.out_of_order = m.out_of_order;
        row.checked_messages = m.checked_messages;
        row.publisher_close_s = m.close_seconds;
        if let Some(l) = m.latency {
            row.period_s = args.period;
            row.latency_p50_ms = Some(l.p50_ns as f64 / 1e6);
            row.latency_p99_ms = Some(l.p99_ns as f64 / 1e6);
            row.latency_max_ms = Some(l.max_ns as f64 / 1e6);
        }
        if let Some(c) = m.link {
            row.link_packets = Some(c.packets);
            row.link_drops = Some(c.drops);
            row.min_link_packets =
                transport.min_link_packets(size, m.messages_delivered, m.bytes_delivered);
            row.extra_link_packets_percent = row
                .min_link_packets
                .filter(|&min| min > 0)
                .map(|min| (c.packets as f64 - min as f64) * 100.0 / min as f64);
        }
        row.note = m.note;
        row
    }

    /// One line for the progress notes.
    fn brief(&self) -> String {
        if let Some(s) = &self.skipped {
            return s.clone();
        }
        let latency = match (self.latency_p50_ms, self.latency_p99_ms) {
            (Some(p50), Some(p99)) => format!(", latency p50 {p50:.1} ms p99 {p99:.1} ms"),
            _ => String::new(),
        };
        format!(
            "{} Gbit/s, {} msg/s, delivered {}{latency}",
            fmt_opt(self.delivered_gbps, 2),
            fmt_rate(self.messages_per_s),
            delivered_share(self)
        )
    }
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

fn fmt_rate(v: Option<f64>) -> String {
    match v {
        None => "-".to_owned(),
        Some(v) if v >= 1e6 => format!("{:.2} M", v / 1e6),
        Some(v) if v >= 1e3 => format!("{:.1} k", v / 1e3),
        Some(v) => format!("{v:.0}"),
    }
}

fn delivered_share(row: &Row) -> String {
    match (row.messages_delivered, row.messages_sent) {
        (Some(d), Some(s)) if s > 0 => format!("{d}/{s} ({:.2} %)", d as f64 * 100.0 / s as f64),
        (Some(d), _) => d.to_string(),
        _ => "-".to_owned(),
    }
}

/// Ratios of each row to its baselines at the same size, in the same round and on the same link:
/// against the baseline's run that ended nearest in time to the row's, its own row's or one made
/// beside a row (`Row::references`). Rows without times (older results) have only the baseline's
/// own row to go by.
fn add_ratios(rows: &mut [Row]) {
    type Key = (Option<u64>, Subject, usize, usize);
    // Every run of each transport with a rate: when it ended, and what it delivered.
    let mut runs: BTreeMap<Key, Vec<(Option<f64>, f64)>> = BTreeMap::new();
    for r in rows.iter() {
        let key = |t: Subject| (r.link_rate_bps, t, r.size_bytes, r.round);
        if let Some(g) = r.delivered_gbps.filter(|&g| g > 0.0) {
            runs.entry(key(r.transport))
                .or_default()
                .push((r.ended_s, g));
        }
        for (&b, reference) in &r.references {
            if reference.delivered_gbps > 0.0 {
                runs.entry(key(b))
                    .or_default()
                    .push((Some(reference.ended_s), reference.delivered_gbps));
            }
        }
    }
    for row in rows.iter_mut() {
        let Some(mine) = row.delivered_gbps else {
            continue;
        };
        for &b in row.transport.baselines() {
            let Some(candidates) = runs.get(&(row.link_rate_bps, b, row.size_bytes, row.round))
            else {
                continue;
            };
            let apart = |ended: Option<f64>| match (ended, row.ended_s) {
                (Some(e), Some(t)) => (e - t).abs(),
                _ => f64::INFINITY,
            };
            let nearest = candidates
                .iter()
                .min_by(|x, y| apart(x.0).total_cmp(&apart(y.0)));
            if let Some(&(_, base)) = nearest {
                row.ratios.insert(b, mine / base);
            }
        }
    }
}

/// The median over the rounds of `field` for `transport` at `size`, from the rows that have it
/// above zero.
fn median_of(
    rows: &[Row],
    transport: Subject,
    size: usize,
    field: fn(&Row) -> Option<f64>,
) -> Option<f64> {
    median(
        rows.iter()
            .filter(|r| r.transport == transport && r.size_bytes == size)
            .filter_map(field)
            .filter(|v| *v > 0.0)
            .collect(),
    )
}

fn render_table(args: &Config, pinning: &Pinning, rows: &[Row]) -> String {
    let mut table = Table::new(&[
        "transport",
        ">size",
        ">datagram",
        ">Gbit/s",
        ">(range)",
        ">msg/s",
        ">delivered",
        ">lost",
        ">retransm.",
        ">kernel drops",
        "ratio (median of rounds)",
    ]);
    for &t in &args.transports {
        for &size in &args.sizes {
            let mine: Vec<&Row> = rows
                .iter()
                .filter(|r| r.transport == t && r.size_bytes == size)
                .collect();
            let Some(first) = mine.first() else { continue };
            if let Some(s) = &first.skipped {
                let mut cells = vec![t.name().to_owned(), format_size(size)];
                cells.extend(vec![String::new(); 8]);
                cells.push(s.clone());
                table.row(cells);
                continue;
            }
            let g: Vec<f64> = mine.iter().filter_map(|r| r.delivered_gbps).collect();
            let lo = g.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = g.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum = |f: fn(&Row) -> Option<u64>| -> String {
                let v: Vec<u64> = mine.iter().filter_map(|r| f(r)).collect();
                if v.is_empty() {
                    "-".to_owned()
                } else {
                    v.iter().sum::<u64>().to_string()
                }
            };
            let sent: u64 = mine.iter().filter_map(|r| r.messages_sent).sum();
            let delivered: Option<u64> = mine
                .iter()
                .map(|r| r.messages_delivered)
                .sum::<Option<u64>>();
            let share = match delivered {
                Some(d) if sent > 0 => format!("{:.2} %", d as f64 * 100.0 / sent as f64),
                _ => "-".to_owned(),
            };
            let ratios: Vec<String> = t
                .baselines()
                .iter()
                .filter_map(|b| {
                    median(
                        mine.iter()
                            .filter_map(|r| r.ratios.get(b).copied())
                            .collect(),
                    )
                    .map(|r| format!("{r:.2} × {}", b.name()))
                })
                .collect();
            table.row(vec![
                t.name().to_owned(),
                format_size(size),
                first
                    .datagram_bytes
                    .map_or_else(|| "-".to_owned(), |d| d.to_string()),
                fmt_opt(median(g.clone()), 2),
                if g.len() > 1 {
                    format!("{lo:.2}–{hi:.2}")
                } else {
                    String::new()
                },
                fmt_rate(median(
                    mine.iter().filter_map(|r| r.messages_per_s).collect(),
                )),
                share,
                sum(|r| r.lost),
                sum(|r| r.retransmitted),
                sum(|r| r.kernel_drops),
                ratios.join(", "),
            ]);
        }
    }
    let again: usize = rows.iter().map(|r| r.references.len()).sum();
    format!(
        "\nThroughput, {} delivery{}, {:.1} s per run, {} interleaved rounds (Gbit/s and msg/s: median of rounds; delivered, lost, retransmitted, kernel drops: all rounds; ratios: median over rounds of each round's ratio to the baseline run nearest in time{}); {}.\n\n{}",
        args.delivery.name(),
        args.loss
            .map(|l| format!(", {l} % loss injected on ferry UDP"))
            .unwrap_or_default(),
        args.duration,
        args.rounds,
        match again {
            0 => String::new(),
            n => format!(
                "; {n} baseline run{} repeated right after a row whose baseline's run had ended more than {} s before it",
                if n == 1 { "" } else { "s" },
                BASELINE_GAP.as_secs()
            ),
        },
        pinning.describe(),
        table.render()
    )
}

impl Experiment for Throughput {
    const NAME: &'static str = "throughput";
    const TITLE: &'static str = "Throughput";
    const ACROSS_MACHINES: bool = true;
    type Config = Config;
    type Setup = Setup;
    type Row = Row;
    type PeerRequest = PeerRequest;

    fn validate(args: &Config) -> Result<()> {
        SUBJECTS.check("--transport", &args.transports)?;
        if args.sizes.is_empty() {
            bail!("--sizes: give at least one size");
        }
        for (i, &s) in args.sizes.iter().enumerate() {
            if !(8..=MAX_SIZE).contains(&s) {
                bail!("--sizes: {s} bytes is out of range (8 bytes to 64M: the first 8 bytes carry the sequence number)");
            }
            if args.sizes[..i].contains(&s) {
                bail!("--sizes: {s} is listed twice");
            }
        }
        if let Some(loss) = args.loss {
            if !(0.0..100.0).contains(&loss) {
                bail!("--loss: invalid loss {loss}: expected a percentage from 0 to below 100");
            }
        }
        if args.rounds == 0 {
            bail!("--rounds must be at least 1");
        }
        if !(args.duration.is_finite() && args.duration > 0.0) {
            bail!("--duration must be greater than 0");
        }
        if args.duration > MAX_DURATION_S {
            bail!("--duration must be at most 600 s");
        }
        if !(1..=2).contains(&args.hosts) {
            bail!("--hosts must be 1 or 2");
        }
        if args.hosts == 2 {
            if args.link_rates.is_empty() {
                bail!("--hosts 2 needs --link-rate (e.g. 100mbit,1gbit): the packets on the link are counted by its tbf");
            }
            super::distinct_list("--link-rate", &args.link_rates, |r| r.name())?;
            if let Some(agent) = &args.remote {
                bail!("--hosts 2 runs both sides in network namespaces on this machine; --remote {agent} runs the subscriber on another machine: give one of them");
            }
            if args.loss.is_some() {
                bail!("--loss is not applied across the link of --hosts 2; leave it out");
            }
            for &t in &args.transports {
                if let Some(why) = t.link_refusal() {
                    bail!(
                    "--hosts 2: {} cannot run across the link ({why}); use udp4, udp4-key, raw-udp4, tcp, iperf3 or iperf3-tcp",
                    t.name()
                );
                }
            }
            if let Some(period) = args.period {
                if !(period.is_finite() && (MIN_PERIOD_S..=args.duration).contains(&period)) {
                    bail!(
                        "--period must be from 1 ms to --duration ({} s)",
                        args.duration
                    );
                }
                if let Some(&s) = args.sizes.iter().find(|&&s| s < STAMPED_MIN) {
                    bail!("--period: {s} bytes is too small (at least {STAMPED_MIN}: the first 16 bytes carry the sequence number and the send time)");
                }
                for &t in &args.transports {
                    if matches!(t, Subject::Iperf3 | Subject::Iperf3Tcp) {
                        bail!(
                        "--period: {} cannot send on a schedule; use udp4, udp4-key, raw-udp4 or tcp",
                        t.name()
                    );
                    }
                }
            }
        } else if !args.link_rates.is_empty() {
            bail!("--link-rate limits the link between two hosts: it needs --hosts 2");
        } else if args.period.is_some() {
            bail!(
                "--period sends periodic messages across the link of --hosts 2: it needs --hosts 2"
            );
        } else if args.transports.contains(&Subject::Tcp) {
            bail!("tcp (the lab's own TCP stream) runs across the link of --hosts 2 only; on one host, use iperf3-tcp");
        }
        if let Some(agent) = &args.remote {
            for &t in &args.transports {
                if let Some(why) = t.remote_refusal() {
                    bail!(
                    "--remote {agent}: {} cannot run with its subscriber on another machine ({why}); with --remote, use udp4, udp4-key or raw-udp4",
                    t.name()
                );
                }
            }
        }
        Ok(())
    }

    fn run(args: &Config) -> Result<Measured<Self>> {
        let pinning = Pinning::resolve_for(args.pin, args.remote.is_some())?;
        if let Some(main_cpu) = pinning.main_cpu() {
            super::pin_to(main_cpu)?;
        }
        let remote = args.remote.as_deref().map(Remote::resolve).transpose()?;
        // Made before any process and dropped after all of them (also on an error and Ctrl-C).
        let pairs = if args.hosts == 2 {
            make_pairs(&args.link_rates)?
        } else {
            Vec::new()
        };
        let started = super::unix_time();
        let mut programs = BTreeMap::new();
        let mut tool_versions = BTreeMap::new();
        for t in &args.transports {
            if let Some(p) = t.program() {
                match tools::find(p) {
                Some(path) => {
                    tool_versions.insert(p.to_owned(), tools::version(&path));
                    programs.insert(p, path);
                }
                None => note!(
                    "ferry lab throughput: {p} is not installed, so its rows are skipped; install it with `{}`",
                    tools::INSTALL_HINT
                ),
            }
            }
        }
        let mut ctx = Ctx {
            args,
            duration: Duration::from_secs_f64(args.duration),
            domain: format!("lab{}", std::process::id()),
            pinning: &pinning,
            programs,
            remote,
            run_index: 0,
            pairs,
        };
        note!(
        "ferry lab throughput: {} transports × {} sizes × {} rounds of {:.1} s, {} delivery{}; {}{}",
        args.transports.len(),
        args.sizes.len(),
        args.rounds,
        args.duration,
        args.delivery.name(),
        args.loss
            .map(|l| format!(", {l} % loss on ferry UDP"))
            .unwrap_or_default(),
        pinning.describe(),
        ctx.pairs
            .iter()
            .map(|p| format!(
                "; a {} link: namespaces {} (A, {}) and {} (B, {})",
                p.rate.map_or_else(|| "not limited".to_owned(), LinkRate::name),
                p.ns[0],
                p.addr[0],
                p.ns[1],
                p.addr[1]
            ))
            .collect::<String>()
    );
        let mut rows = Vec::new();
        let outcome = measure(&mut ctx, &mut rows);
        let _ = ferry::admin::clean(Some(&ctx.domain));
        outcome?;
        add_ratios(&mut rows);

        let setup = Setup {
        transports: args.transports.clone(),
        transport_descriptions: args
            .transports
            .iter()
            .map(|t| (t.name().to_owned(), t.describe().to_owned()))
            .collect(),
        sizes: args.sizes.clone(),
        delivery: args.delivery,
        loss_percent: args.loss.unwrap_or(0.0),
        impair: impair_spec(args.loss),
        impair_applies_to: "the publisher process of ferry's UDP transports (udp4, udp6); raw-udp4, iperf3 and sockperf run without injected loss".to_owned(),
        duration_s: args.duration,
        tool_duration_s: tools::whole_seconds(ctx.duration),
        rounds: args.rounds,
        wait: args.wait,
        pinning: pinning.clone(),
        udp_mtu: UDP_MTU,
        payload: "the publisher writes every message: its sequence number (u64 LE) in bytes 0..8 and a pattern byte in all others; the subscriber checks every sequence number (against ferry's own where there is one) and every byte of each message whose number is a multiple of 64".to_owned(),
        rate_interval: match &args.remote {
            None if args.hosts == 2 => "from the publisher's first send to the subscriber's last delivery (CLOCK_MONOTONIC: the two namespaces share this host's clock); iperf3 and iperf3-tcp: the receiver's test interval".to_owned(),
            None => "from the publisher's first send to the subscriber's last delivery (CLOCK_MONOTONIC, same host); iperf3 and sockperf: the tool's own test interval".to_owned(),
            Some(_) => "from the subscriber's first delivery to its last (the subscriber's CLOCK_MONOTONIC: the two machines' clocks are not compared)".to_owned(),
        },
        lost: "messages_sent − messages_delivered: messages the subscriber never got (gaps, skipped, dropped)".to_owned(),
        processes: match &args.remote {
            None if args.hosts == 2 => "the main process coordinates; a peer process (ferry lab-peer) publishes in namespace A on the main CPU, another subscribes in namespace B on the peer CPU, both started with ip netns exec; iperf3: client in A on the main CPU, server in B on the peer CPU".to_owned(),
            None => "main process publishes; a peer process (ferry lab-peer) subscribes; iperf3/sockperf: client on the main CPU, server on the peer CPU; iceoryx2 and Zenoh: ferry-peers publishes on the main CPU and its subscriber process runs on the peer CPU".to_owned(),
            Some(agent) => format!("main process publishes here; a peer process subscribes on the machine of the lab agent at {agent}"),
        },
        socket_buffers: SocketBuffers {
            rmem_default: read_number("/proc/sys/net/core/rmem_default"),
            rmem_max: read_number("/proc/sys/net/core/rmem_max"),
            wmem_default: read_number("/proc/sys/net/core/wmem_default"),
            wmem_max: read_number("/proc/sys/net/core/wmem_max"),
        },
        tools: tool_versions,
        link: (!ctx.pairs.is_empty()).then(|| link_setup(&ctx.pairs)),
        started_unix_s: started,
    };
        Ok(Measured { setup, rows })
    }

    fn run_peer(args: PeerRequest, link: &mut PeerLink) -> Result<()> {
        SUBJECTS.check("transport", &[args.transport])?;
        if link.for_agent() {
            if let Some(why) = args.transport.remote_refusal() {
                bail!(
                    "{} cannot serve another machine: {why}",
                    args.transport.name()
                );
            }
        }
        if let Some(cpu) = args.cpu {
            super::pin_to(cpu)?;
        }
        if !(8..=MAX_SIZE).contains(&args.size) {
            bail!("the peer request's size {} is out of range", args.size);
        }
        if args.role == Role::Publish {
            return run_publisher(&args, link);
        }
        if args.period_s.is_some() && args.size < STAMPED_MIN {
            bail!("a periodic message has at least {STAMPED_MIN} bytes");
        }
        let mut tally = if args.period_s.is_some() {
            Tally::stamped(args.size)
        } else {
            Tally::new(args.size)
        };
        // Plain UDP and latest delivery lose what they lose: a short silence ends the count. A
        // reliable subscriber may still be repairing: it gets longer.
        let reliable = args.delivery == Delivery::Reliable;
        match args.transport {
            Subject::Shm | Subject::Udp4 | Subject::Udp4Key | Subject::Udp6 => {
                let FerryTopic {
                    domain,
                    topic,
                    main_host,
                } = args.ferry_topic()?;
                let qos = ferry_qos(args.transport, args.size, args.delivery, args.wait);
                let keyed = args.transport == Subject::Udp4Key;
                let node = super::lab_node_reaching(
                    "lab-peer",
                    domain,
                    keyed,
                    super::discovery_reaching(*main_host),
                )?;
                let mut sub = node.subscriber(topic, &qos)?;
                link.report(&PeerReport::Ready { port: None })?;
                let mut ending = Ending::new(if reliable {
                    Duration::from_secs(2)
                } else {
                    Duration::from_millis(200)
                });
                let mut since_check = 0u32;
                loop {
                    let got = match sub.recv_timeout(Duration::from_millis(10))? {
                        Some(sample) => {
                            tally.take(&sample, Some(sample.seq()))?;
                            true
                        }
                        None => false,
                    };
                    since_check += 1;
                    if !got || since_check >= 256 {
                        since_check = 0;
                        ending.take_commands(link)?;
                        if ending.finished(&tally) {
                            break;
                        }
                    }
                }
                let mut counts = tally.counts();
                // ferry's own counters, and the kernel's drops on our socket.
                let me = std::process::id();
                let info = ferry::admin::topic(domain, topic)?
                    .and_then(|t| t.subscribers.into_iter().find(|s| s.pid == me));
                if let Some(s) = info {
                    counts.ferry_lost = Some(s.lost);
                    counts.ferry_skipped = Some(s.skipped);
                    if args.transport != Subject::Shm {
                        counts.kernel_drops = s
                            .udp
                            .and_then(|a| super::rawudp::kernel_drops(a.port(), a.is_ipv6()));
                    }
                }
                link.report(&PeerReport::Counts(counts))?;
                // Keep answering until the publisher has gone (bounded).
                let deadline = Instant::now() + START_TIMEOUT;
                while Instant::now() < deadline {
                    let _ = sub.recv_timeout(Duration::from_millis(1))?;
                    match link.recv::<Command>(Duration::ZERO)? {
                        Some(Command::Release) => break,
                        Some(Command::Done { .. }) => {
                            bail!("the main side said twice that it had finished")
                        }
                        Some(Command::Go) => bail!("the main side told a subscriber to send"),
                        None => {}
                    }
                }
                Ok(())
            }
            Subject::RawUdp4 => {
                let socket = match args.main {
                    None => match args.bind {
                        None => super::rawudp::bind_loopback()?,
                        Some(ip) => UdpSocket::bind((ip, 0))
                            .context(format!("cannot bind a UDP socket on {ip}"))?,
                    },
                    Some(main) => {
                        let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
                            .context("cannot bind a UDP socket")?;
                        socket
                            .connect(main)
                            .context(format!("cannot connect the UDP socket to {main}"))?;
                        socket
                    }
                };
                let port = socket.local_addr()?.port();
                socket
                    .set_read_timeout(Some(Duration::from_millis(10)))
                    .context("cannot set a UDP receive timeout")?;
                link.report(&PeerReport::Ready { port: Some(port) })?;
                let mut buf = vec![0u8; args.size.min(super::rawudp::MAX_DATAGRAM_V4) + 1];
                let mut ending = Ending::new(Duration::from_millis(200));
                let mut since_check = 0u32;
                loop {
                    let got = match socket.recv(&mut buf) {
                        Ok(n) => {
                            tally.take(&buf[..n], None)?;
                            true
                        }
                        Err(e) if timed_out(&e) => false,
                        Err(e) => return Err(e).context("UDP receive"),
                    };
                    since_check += 1;
                    if !got || since_check >= 256 {
                        since_check = 0;
                        ending.take_commands(link)?;
                        if ending.finished(&tally) {
                            break;
                        }
                    }
                }
                let mut counts = tally.counts();
                counts.kernel_drops = super::rawudp::kernel_drops(port, false);
                link.report(&PeerReport::Counts(counts))
            }
            Subject::Tcp => {
                let Some(ip) = args.bind else {
                    bail!("the lab's TCP stream needs the address its subscriber listens on");
                };
                let listener =
                    TcpListener::bind((ip, 0)).context(format!("cannot listen for TCP on {ip}"))?;
                let port = listener.local_addr()?.port();
                link.report(&PeerReport::Ready { port: Some(port) })?;
                listener.set_nonblocking(true)?;
                let deadline = Instant::now() + START_TIMEOUT * 2;
                let mut stream = loop {
                    match listener.accept() {
                        Ok((stream, _)) => break stream,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) => return Err(e).context("TCP accept"),
                    }
                    signal::check()?;
                    link.check_main()?;
                    if Instant::now() >= deadline {
                        bail!(
                            "the TCP publisher did not connect within {:?}",
                            START_TIMEOUT * 2
                        );
                    }
                    std::thread::sleep(Duration::from_millis(2));
                };
                stream.set_nonblocking(false)?;
                stream
                    .set_read_timeout(Some(Duration::from_millis(10)))
                    .context("cannot set a TCP receive timeout")?;
                // Whole messages out of the byte stream: a read that times out keeps what it had.
                let mut buf = vec![0u8; args.size];
                let mut filled = 0;
                let mut ending = Ending::new(Duration::from_secs(2));
                let mut since_check = 0u32;
                let mut open = true;
                loop {
                    let got = if open {
                        match stream.read(&mut buf[filled..]) {
                            Ok(0) => {
                                open = false;
                                false
                            }
                            Ok(n) => {
                                filled += n;
                                if filled == buf.len() {
                                    tally.take(&buf, None)?;
                                    filled = 0;
                                }
                                true
                            }
                            Err(e) if timed_out(&e) => false,
                            Err(e) => return Err(e).context("TCP receive"),
                        }
                    } else {
                        std::thread::sleep(Duration::from_millis(10));
                        false
                    };
                    since_check += 1;
                    if !got || since_check >= 256 {
                        since_check = 0;
                        ending.take_commands(link)?;
                        if ending.finished(&tally) {
                            break;
                        }
                    }
                }
                link.report(&PeerReport::Counts(tally.counts()))
            }
            Subject::Iperf3
            | Subject::Iperf3Tcp
            | Subject::Sockperf
            | Subject::Iceoryx2
            | Subject::Zenoh
            | Subject::ZenohShm => {
                bail!("{} has no lab peer", args.transport.name())
            }
            other => bail!("throughput does not measure {other}"),
        }
    }

    fn table(results: &Results<Self>) -> String {
        if is_link_run(&results.rows) {
            render_link_table(&results.request, &results.config, &results.rows)
        } else {
            render_table(&results.request, &results.config.pinning, &results.rows)
        }
    }

    fn section(results: &Results<Self>) -> Result<Section> {
        if is_link_run(&results.rows) {
            link_section(&results.rows, results.config.link.as_ref())
        } else {
            section(&results.rows)
        }
    }

    fn summary(results: &Results<Self>) -> Vec<SummaryLine> {
        let mut lines = if is_link_run(&results.rows) {
            link_summary(&results.rows)
        } else {
            summary(&results.rows)
        };
        // A baseline that could not run says so, with what adds it.
        let missing: Vec<&str> = results
            .config
            .transports
            .iter()
            .filter_map(|t| t.program())
            .filter(|p| !results.config.tools.contains_key(*p))
            .collect();
        if !missing.is_empty() {
            lines.push(SummaryLine {
                what: format!("third-party baselines ({})", missing.join(", ")),
                ferry: "–".to_owned(),
                floor: None,
                best_peer: Some(format!(
                    "not measured: {} not installed on this machine; add them with `sudo {}`",
                    missing.join(" and "),
                    tools::INSTALL_HINT
                )),
                study: None,
            });
        }
        lines
    }
}

/// The transports of `rows` in the order they first appear, and their sizes in ascending order.
fn transports_and_sizes(rows: &[Row]) -> (Vec<Subject>, Vec<usize>) {
    let mut transports: Vec<Subject> = Vec::new();
    for r in rows {
        if !transports.contains(&r.transport) {
            transports.push(r.transport);
        }
    }
    let mut sizes: Vec<usize> = rows.iter().map(|r| r.size_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    (transports, sizes)
}

fn section(rows: &[Row]) -> Result<Section> {
    let (transports, sizes) = transports_and_sizes(rows);
    let series: Vec<(String, Vec<(f64, f64)>)> = transports
        .iter()
        .map(|&t| {
            let pts: Vec<(f64, f64)> = sizes
                .iter()
                .filter_map(|&s| median_of(rows, t, s, |r| r.delivered_gbps).map(|m| (s as f64, m)))
                .collect();
            (t.name().to_owned(), pts)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    let mut plots = Vec::new();
    if !series.is_empty() {
        plots.push(Plot {
            file: "throughput.svg".to_owned(),
            svg: line_chart(
                "Throughput by message size",
                "message size",
                "delivered Gbit/s (median of rounds)",
                &series,
                &|y| format!("{y:.2}"),
            )?,
            caption: "Messages sent back to back to a subscriber in another process; median over the rounds; log axes.".to_owned(),
        });
    }
    let best: Vec<String> = series
        .iter()
        .filter_map(|(t, p)| {
            p.iter()
                .copied()
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(s, g)| format!("{t} {g:.2} Gbit/s at {}", format_size(s as usize)))
        })
        .collect();
    Ok(Section {
        plots,
        sentence: format!(
            "In {}, Vortex Lite reaches the ~950 Mbit/s of Gigabit Ethernet from messages under 2 KB (110 000 messages/s at 1 KB). Here, best delivered rates: {}.{}",
            cite(&VORTEX_LITE),
            best.join(", "),
            versus_peers(rows)
        ),
    })
}

/// " ferry (shm) against iceoryx2 in the same rounds ...": for each other system that ran beside
/// ferry's shared memory, ferry's delivered rate over the system's per size (the median over the
/// rounds of the per-round ratio); empty when none ran beside it.
fn versus_peers(rows: &[Row]) -> String {
    let (transports, sizes) = transports_and_sizes(rows);
    let mut out = String::new();
    for peer in transports.into_iter().filter(|t| t.is_peer()) {
        let said: Vec<String> = sizes
            .iter()
            .filter_map(|&size| {
                let per_round: Vec<f64> = rows
                    .iter()
                    .filter(|r| r.transport == peer && r.size_bytes == size)
                    .filter_map(|r| r.ratios.get(&Subject::Shm))
                    .filter(|&&r| r > 0.0)
                    .map(|r| 1.0 / r)
                    .collect();
                median(per_round).map(|m| format!("{m:.2} × at {}", format_size(size)))
            })
            .collect();
        if !said.is_empty() {
            out.push_str(&format!(
                " ferry (shm) against {} in the same rounds (ferry's delivered rate over {}'s): {}.",
                peer.name(),
                peer.name(),
                said.join(", ")
            ));
        }
    }
    out
}

/// The Vortex Lite whitepaper's throughput figures beside ferry's UDP, the plain-UDP floor and
/// the best tool measured in the same run: the message rate at 1 KB, and the best rate below
/// 2 KB.
fn summary(rows: &[Row]) -> Vec<SummaryLine> {
    let (transports, sizes) = transports_and_sizes(rows);
    let measured = |t: Subject| {
        rows.iter()
            .any(|r| r.transport == t && r.delivered_gbps.is_some())
    };
    let Some(ferry) = [Subject::Udp4, Subject::Udp6, Subject::Udp4Key]
        .into_iter()
        .find(|&t| transports.contains(&t) && measured(t))
    else {
        return Vec::new();
    };
    let tools = [Subject::Iperf3, Subject::Sockperf];
    let mut lines = Vec::new();

    // Messages per second at 1 KB.
    let rate_at = |t: Subject| median_of(rows, t, 1024, |r| r.messages_per_s);
    let say_rate = |t: Subject, v: f64| format!("{}: {} msg/s", t.name(), fmt_rate(Some(v)));
    if let Some(mine) = rate_at(ferry) {
        lines.push(SummaryLine {
            what: format!("messages per second, 1 KB messages, {}", ferry.name()),
            ferry: say_rate(ferry, mine),
            floor: rate_at(Subject::RawUdp4).map(|v| say_rate(Subject::RawUdp4, v)),
            best_peer: tools
                .iter()
                .filter_map(|&t| rate_at(t).map(|v| (t, v)))
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(t, v)| say_rate(t, v)),
            study: Some(format!(
                "110 000 messages/s at 1 KB across Gigabit Ethernet ({})",
                cite(&VORTEX_LITE)
            )),
        });
    }

    // The best delivered rate below 2 KB.
    let best_below_2k = |t: Subject| {
        sizes
            .iter()
            .filter(|&&s| s < 2048)
            .filter_map(|&s| median_of(rows, t, s, |r| r.delivered_gbps).map(|g| (s, g)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    };
    let say_gbps = |t: Subject, (s, g): (usize, f64)| {
        format!("{}: {g:.2} Gbit/s at {}", t.name(), format_size(s))
    };
    if let Some(mine) = best_below_2k(ferry) {
        lines.push(SummaryLine {
            what: format!("best delivered rate below 2 KB, {}", ferry.name()),
            ferry: say_gbps(ferry, mine),
            floor: best_below_2k(Subject::RawUdp4).map(|b| say_gbps(Subject::RawUdp4, b)),
            best_peer: tools
                .iter()
                .filter_map(|&t| best_below_2k(t).map(|b| (t, b)))
                .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
                .map(|(t, b)| say_gbps(t, b)),
            study: Some(format!(
                "about 950 Mbit/s, the limit of Gigabit Ethernet, from messages under 2 KB ({})",
                cite(&VORTEX_LITE)
            )),
        });
    }
    lines
}

// ---------------------------------------------------------------------------------------------
// Across a link (`--hosts 2`)

/// Whether the rows were measured across links (`--hosts 2`).
fn is_link_run(rows: &[Row]) -> bool {
    rows.iter().any(|r| r.link_rate_bps.is_some())
}

/// The links of `rows`, fastest first: (bps, name).
fn links_of(rows: &[Row]) -> Vec<(u64, String)> {
    let mut links: Vec<(u64, String)> = rows
        .iter()
        .filter_map(|r| Some((r.link_rate_bps?, r.link_rate.clone()?)))
        .collect();
    links.sort_by_key(|l| std::cmp::Reverse(l.0));
    links.dedup_by_key(|l| l.0);
    links
}

/// What the rounds of one transport at one size on one link add up to.
struct LinkCell<'a> {
    rows: Vec<&'a Row>,
}

impl<'a> LinkCell<'a> {
    fn of(rows: &'a [Row], bps: u64, t: Subject, size: usize) -> LinkCell<'a> {
        LinkCell {
            rows: rows
                .iter()
                .filter(|r| {
                    r.link_rate_bps == Some(bps) && r.transport == t && r.size_bytes == size
                })
                .collect(),
        }
    }

    fn gbps(&self) -> Option<f64> {
        median(
            self.rows
                .iter()
                .filter_map(|r| r.delivered_gbps)
                .filter(|g| *g > 0.0)
                .collect(),
        )
    }

    /// The median over the rounds of the ratio to TCP measured in the same round (iperf3's, or
    /// the lab's own stream where iperf3 did not run).
    fn to_tcp(&self) -> Option<f64> {
        let of = |t: Subject| {
            median(
                self.rows
                    .iter()
                    .filter_map(|r| r.ratios.get(&t).copied())
                    .collect(),
            )
        };
        of(Subject::Iperf3Tcp).or_else(|| of(Subject::Tcp))
    }

    /// The median over the rounds of a row's value.
    fn median_of(&self, f: fn(&Row) -> Option<f64>) -> Option<f64> {
        median(self.rows.iter().filter_map(|r| f(r)).collect())
    }

    /// The sum over the rounds; `None` if a round lacks it.
    fn sum(&self, f: fn(&Row) -> Option<u64>) -> Option<u64> {
        if self.rows.is_empty() {
            return None;
        }
        self.rows.iter().map(|r| f(r)).sum()
    }

    /// Link packets over the minimum, in percent, over all rounds.
    fn extra_percent(&self) -> Option<f64> {
        let (link, min) = (
            self.sum(|r| r.link_packets)?,
            self.sum(|r| r.min_link_packets)?,
        );
        (min > 0).then(|| (link as f64 - min as f64) * 100.0 / min as f64)
    }

    fn skipped(&self) -> Option<&str> {
        self.rows.first().and_then(|r| r.skipped.as_deref())
    }
}

fn fmt_count(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// "udp4 (reliable)" for ferry's rows, the name for the others.
fn row_name(t: Subject, rows: &[&Row]) -> String {
    match rows.first().map(|r| r.delivery) {
        Some(d @ (RowDelivery::Reliable | RowDelivery::Latest)) => {
            format!("{} ({})", t.name(), d.name())
        }
        _ => t.name().to_owned(),
    }
}

fn render_link_table(args: &Config, setup: &Setup, rows: &[Row]) -> String {
    let periodic = rows.iter().any(|r| r.period_s.is_some());
    let mut header = vec![
        "link",
        "transport",
        ">size",
        ">Gbit/s",
        if periodic {
            ">× tcp"
        } else {
            ">× iperf3-tcp"
        },
        ">delivered",
        ">lost",
        ">repairs",
        ">link pkts",
        ">minimum",
        ">extra",
        ">tbf drops",
    ];
    if periodic {
        header.extend([">p50 ms", ">p99 ms", ">on link ms"]);
    }
    let mut table = Table::new(&header);
    for (bps, name) in links_of(rows) {
        for &t in &args.transports {
            for &size in &args.sizes {
                let cell = LinkCell::of(rows, bps, t, size);
                if cell.rows.is_empty() {
                    continue;
                }
                let mut cells = vec![name.clone(), row_name(t, &cell.rows), format_size(size)];
                if let Some(s) = cell.skipped() {
                    cells.extend(vec![String::new(); 8]);
                    cells.push(s.to_owned());
                    table.row(cells);
                    continue;
                }
                let repairs = match cell.sum(|r| r.retransmitted) {
                    Some(n) => n.to_string(),
                    None if t.is_ferry_udp() || t == Subject::Iperf3Tcp => "unknown".to_owned(),
                    None => "-".to_owned(),
                };
                cells.extend([
                    fmt_opt(cell.gbps(), 3),
                    cell.to_tcp()
                        .map_or_else(|| "-".to_owned(), |r| format!("{r:.2} ×")),
                    fmt_count(cell.sum(|r| r.messages_delivered)),
                    fmt_count(cell.sum(|r| r.lost)),
                    repairs,
                    fmt_count(cell.sum(|r| r.link_packets)),
                    fmt_count(cell.sum(|r| r.min_link_packets)),
                    cell.extra_percent()
                        .map_or_else(|| "-".to_owned(), |e| format!("{e:+.1} %")),
                    fmt_count(cell.sum(|r| r.link_drops)),
                ]);
                if periodic {
                    cells.extend([
                        fmt_opt(cell.median_of(|r| r.latency_p50_ms), 1),
                        fmt_opt(cell.median_of(|r| r.latency_p99_ms), 1),
                        fmt_opt(cell.median_of(|r| r.serialization_ms), 1),
                    ]);
                }
                table.row(cells);
            }
        }
    }
    let tbf = setup.link.as_ref().map_or_else(String::new, |l| {
        l.links
            .iter()
            .map(|k| {
                format!(
                    "{}: tbf burst {} B, latency {} ms",
                    k.link_rate, k.tbf.burst_bytes, k.tbf.latency_ms
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    });
    let schedule = match args.period {
        Some(p) => format!(
            ", one message every {} ms on a fixed schedule",
            fmt_opt(Some(p * 1e3), 1)
        ),
        None => String::new(),
    };
    let latency = if periodic {
        "\np50, p99 ms: a message's latency from its send call to the whole message's arrival (median of rounds); on link ms: its payload's time on the link at the link's rate (size × 8 / rate; the tbf lets its burst through at once, so a message can arrive sooner)."
    } else {
        ""
    };
    format!(
        "\nThroughput across a link (two network namespaces, a veth pair, tc tbf on both ends; {tbf}), {:.1} s per run{schedule}, {} interleaved rounds (Gbit/s and × TCP: median of rounds; counts: all rounds); {}.\nlink pkts: sent on by the tbf of the publisher's end; minimum: what the delivered messages need (ferry: ceil(size / 1424) datagrams each; TCP: bytes / 1448).{latency}\n\n{}",
        args.duration,
        args.rounds,
        setup.pinning.describe(),
        table.render()
    )
}

/// The plots (goodput against the link rate, one per size) and a sentence per link.
fn link_section(rows: &[Row], setup: Option<&LinkSetup>) -> Result<Section> {
    let (transports, sizes) = transports_and_sizes(rows);
    let links = links_of(rows);
    let mut plots = Vec::new();
    let periodic = rows.iter().any(|r| r.period_s.is_some());
    for &size in sizes.iter().filter(|_| periodic) {
        plots.extend(latency_plot(rows, &transports, &links, size)?);
    }
    for &size in sizes.iter().filter(|_| !periodic) {
        let series = link_series(rows, &transports, &links, size, |cell| {
            let g: Vec<f64> = cell.rows.iter().filter_map(|r| r.delivered_gbps).collect();
            let lo = g.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = g.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            cell.gbps()
                .map(|m| (m * 1e3, (g.len() > 1).then_some((lo * 1e3, hi * 1e3))))
        });
        if series.is_empty() {
            continue;
        }
        plots.push(Plot {
            file: format!("throughput-goodput-{}.svg", format_size(size).replace(' ', "")),
            svg: crate::chart::xy_chart(
                &format!("Goodput across a link, {} messages", format_size(size)),
                "link rate (Mbit/s, tc tbf)",
                "delivered Mbit/s (median of rounds)",
                &series,
                false,
                false,
                None,
            )?,
            caption: "Two network namespaces joined by a veth pair with a tbf of the link's rate on both ends; the publisher in one, the subscriber in the other; median over the rounds, the bar spans them.".to_owned(),
        });
    }
    let mut said = Vec::new();
    let ferry = [Subject::Udp4, Subject::Udp4Key]
        .into_iter()
        .find(|t| transports.contains(t));
    for (bps, name) in &links {
        let Some(ferry) = ferry else { break };
        let per_size: Vec<String> = sizes
            .iter()
            .filter_map(|&size| {
                let cell = LinkCell::of(rows, *bps, ferry, size);
                let g = cell.gbps()?;
                let tcp_name = if LinkCell::of(rows, *bps, Subject::Iperf3Tcp, size)
                    .rows
                    .is_empty()
                {
                    Subject::Tcp
                } else {
                    Subject::Iperf3Tcp
                };
                let tcp_cell = LinkCell::of(rows, *bps, tcp_name, size);
                let tcp = tcp_cell.gbps();
                let ratio = cell.to_tcp().map_or_else(
                    || "TCP did not run beside it".to_owned(),
                    |r| {
                        format!(
                            "{r:.2} × {}'s {:.3} Gbit/s",
                            tcp_name.name(),
                            tcp.unwrap_or(0.0)
                        )
                    },
                );
                let latency = match (
                    cell.median_of(|r| r.latency_p50_ms),
                    cell.median_of(|r| r.latency_p99_ms),
                    cell.median_of(|r| r.serialization_ms),
                ) {
                    (Some(p50), Some(p99), Some(wire)) if wire > 0.0 => format!(
                        ", a message's latency p50 {p50:.1} ms and p99 {p99:.1} ms against its {wire:.1} ms on the link ({:.2} ×){}",
                        p99 / wire,
                        tcp_cell
                            .median_of(|r| r.latency_p99_ms)
                            .map_or_else(String::new, |t| format!(
                                " (TCP's p99 {t:.1} ms)"
                            ))
                    ),
                    _ => String::new(),
                };
                let extra = cell.extra_percent().map_or_else(
                    || "packets on the link unknown".to_owned(),
                    |e| format!("{e:+.1} % packets on the link over the minimum its messages need"),
                );
                Some(format!(
                    "{} {:.3} Gbit/s at {}, {ratio}, {extra}{latency}",
                    row_name(ferry, &cell.rows),
                    g,
                    format_size(size)
                ))
            })
            .collect();
        if !per_size.is_empty() {
            said.push(format!(
                "On the {name} link, ferry's {}.",
                per_size.join("; ")
            ));
        }
    }
    let tbf = setup.map_or_else(String::new, |l| {
        let each: Vec<String> = l
            .links
            .iter()
            .map(|k| format!("{} burst {} B", k.link_rate, k.tbf.burst_bytes))
            .collect();
        format!(
            " (tbf latency {} ms; {})",
            l.links.first().map_or(0, |k| k.tbf.latency_ms),
            each.join(", ")
        )
    });
    let beside = match rows.iter().find_map(|r| r.period_s) {
        Some(p) => format!(
            "Messages go one every {:.0} ms on a fixed schedule, as a camera or a lidar sends them, and the lab's own TCP stream sends the same messages on the same schedule in the same rounds.",
            p * 1e3
        ),
        None => "iperf3 over TCP and over UDP run in the same rounds.".to_owned(),
    };
    Ok(Section {
        plots,
        sentence: format!(
            "This follows {}, \"{}\": UDP in 1472-byte datagrams (a 1500-byte MTU) across a real link, as the base of a reliable transport that must stand beside TCP. Here the link is a veth pair between two network namespaces limited by tc tbf{tbf}. {beside} {}",
            cite_first(&PACED_UDP),
            PACED_UDP.title,
            said.join(" ")
        ),
    })
}

/// One series per transport at `size`: against the link rate in Mbit/s, the value `point` gives
/// for the transport's cell on each link (and its spread), links without one left out.
fn link_series(
    rows: &[Row],
    transports: &[Subject],
    links: &[(u64, String)],
    size: usize,
    point: impl Fn(&LinkCell<'_>) -> Option<(f64, Option<(f64, f64)>)>,
) -> Vec<crate::chart::XySeries> {
    transports
        .iter()
        .map(|&t| {
            let mut pts: Vec<_> = links
                .iter()
                .filter_map(|&(bps, _)| {
                    let (y, spread) = point(&LinkCell::of(rows, bps, t, size))?;
                    Some((bps as f64 / 1e6, y, spread))
                })
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (t.name().to_owned(), pts)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect()
}

/// `--period`: each transport's message latency against the link rate (the point its median
/// p50, the bar up to its p99), beside the message's time on the link.
fn latency_plot(
    rows: &[Row],
    transports: &[Subject],
    links: &[(u64, String)],
    size: usize,
) -> Result<Option<Plot>> {
    let mut series = link_series(rows, transports, links, size, |cell| {
        let p50 = cell.median_of(|r| r.latency_p50_ms)?;
        let p99 = cell.median_of(|r| r.latency_p99_ms)?;
        Some((p50, Some((p50, p99))))
    });
    if series.is_empty() {
        return Ok(None);
    }
    let mut wire: Vec<_> = links
        .iter()
        .map(|&(bps, _)| (bps as f64 / 1e6, size as f64 * 8.0 / bps as f64 * 1e3, None))
        .collect();
    wire.sort_by(|a, b| a.0.total_cmp(&b.0));
    series.push(("time on the link".to_owned(), wire));
    Ok(Some(Plot {
        file: format!("throughput-latency-{}.svg", format_size(size).replace(' ', "")),
        svg: crate::chart::xy_chart(
            &format!("Latency of periodic {} messages across a link", format_size(size)),
            "link rate (Mbit/s, tc tbf)",
            "ms from send to arrival (log)",
            &series,
            true,
            false,
            None,
        )?,
        caption: "Each message sent on a fixed schedule; the point is the median over the rounds of its p50 latency, the bar reaches the p99; \"time on the link\" is the message's payload at the link's rate, what it takes at the least (less the tbf's burst, which passes at once).".to_owned(),
    }))
}

/// Per link: ferry's goodput beside TCP's and plain UDP's, at the largest size measured.
fn link_summary(rows: &[Row]) -> Vec<SummaryLine> {
    let (transports, sizes) = transports_and_sizes(rows);
    let Some(ferry) = [Subject::Udp4, Subject::Udp4Key]
        .into_iter()
        .find(|t| transports.contains(t))
    else {
        return Vec::new();
    };
    let Some(&size) = sizes.last() else {
        return Vec::new();
    };
    let say = |bps: u64, t: Subject| {
        let cell = LinkCell::of(rows, bps, t, size);
        cell.gbps().map(|g| format!("{}: {g:.3} Gbit/s", t.name()))
    };
    links_of(rows)
        .into_iter()
        .filter_map(|(bps, name)| {
            let cell = LinkCell::of(rows, bps, ferry, size);
            let g = cell.gbps()?;
            let mut ferry_says = format!("{}: {g:.3} Gbit/s", ferry.name());
            if let Some(r) = cell.to_tcp() {
                ferry_says.push_str(&format!(" ({r:.2} × TCP)"));
            }
            if let Some(e) = cell.extra_percent() {
                ferry_says.push_str(&format!(", {e:+.1} % packets over the minimum"));
            }
            // Periodic messages: each one's latency beside its time on the link.
            let p99 = |t: Subject| LinkCell::of(rows, bps, t, size).median_of(|r| r.latency_p99_ms);
            let wire = cell.median_of(|r| r.serialization_ms);
            if let (Some(p), Some(w)) = (p99(ferry), wire) {
                ferry_says.push_str(&format!(
                    "; a message's p99 latency {p:.1} ms against its {w:.1} ms on the link"
                ));
            }
            let tcp_periodic = p99(Subject::Tcp).map(|p| {
                let g = LinkCell::of(rows, bps, Subject::Tcp, size).gbps();
                format!(
                    "tcp (same schedule): {} Gbit/s, p99 latency {p:.1} ms",
                    fmt_opt(g, 3)
                )
            });
            let what = if wire.is_some() {
                format!(
                    "periodic {} messages across a {name} link: goodput and latency",
                    format_size(size)
                )
            } else {
                format!(
                    "goodput across a {name} link, {} messages",
                    format_size(size)
                )
            };
            Some(SummaryLine {
                what,
                ferry: ferry_says,
                floor: say(bps, Subject::RawUdp4),
                best_peer: tcp_periodic
                    .or_else(|| say(bps, Subject::Iperf3Tcp))
                    .or_else(|| say(bps, Subject::Iperf3)),
                study: Some(format!(
                    "1472-byte UDP datagrams across a 10 Gbit/s link ({})",
                    cite(&PACED_UDP)
                )),
            })
        })
        .collect()
}

/// Results of a small made-up run, for the report's tests.
#[cfg(test)]
pub(crate) fn example() -> Results<Throughput> {
    let config = Config {
        transports: vec![Subject::Udp4, Subject::RawUdp4, Subject::Iperf3],
        sizes: vec![64, 1024],
        rounds: 2,
        duration: 1.0,
        ..Config::default()
    };
    let m = |delivered: u64, size: u64| Measurement {
        messages_sent: Some(delivered + 10),
        messages_delivered: Some(delivered),
        bytes_delivered: Some(delivered * size),
        seconds: 1.0,
        send_seconds: Some(1.0),
        lost: Some(10),
        ..Measurement::default()
    };
    let mut rows = Vec::new();
    for round in 0..config.rounds {
        for (t, factor) in [
            (Subject::Udp4, 4),
            (Subject::RawUdp4, 3),
            (Subject::Iperf3, 2),
        ] {
            for &size in &config.sizes {
                let delivered = 100_000 * factor + 1000 * round as u64;
                rows.push(Row::new(
                    &config,
                    t,
                    size,
                    round,
                    Some(m(delivered, size as u64)),
                    None,
                ));
            }
        }
    }
    add_ratios(&mut rows);
    let setup = Setup {
        transports: config.transports.clone(),
        transport_descriptions: BTreeMap::new(),
        sizes: config.sizes.clone(),
        delivery: config.delivery,
        loss_percent: 0.0,
        impair: None,
        impair_applies_to: String::new(),
        duration_s: config.duration,
        tool_duration_s: 1,
        rounds: config.rounds,
        wait: config.wait,
        pinning: Pinning::None {
            reason: "example".to_owned(),
        },
        udp_mtu: UDP_MTU,
        payload: String::new(),
        rate_interval: String::new(),
        lost: String::new(),
        processes: String::new(),
        socket_buffers: SocketBuffers {
            rmem_default: None,
            rmem_max: None,
            wmem_default: None,
            wmem_max: None,
        },
        tools: BTreeMap::from([("iperf3".to_owned(), Some("3.16".to_owned()))]),
        link: None,
        started_unix_s: 0,
    };
    Results::new(crate::Machine::probe(), config, Measured { setup, rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fewest_link_packets_count_batches_for_small_messages() {
        let udp4 = |size, n| Subject::Udp4.min_link_packets(size, Some(n), None);
        // 64-byte messages share datagrams: 68 bytes each in 1424.
        assert_eq!(udp4(64, 1000), Some((1000 * 68u64).div_ceil(1424)));
        // Too large to share: a datagram each, 47 for 64 KiB.
        assert_eq!(udp4(1000, 10), Some(10));
        assert_eq!(udp4(64 << 10, 2), Some(94));
    }

    #[test]
    fn transports_and_loss_parse() {
        for &t in SUBJECTS.0 {
            assert_eq!(SUBJECTS.parse(t.name()), Ok(t));
            assert_eq!(serde_json::to_value(t).unwrap(), t.name());
        }
        // ferry over UDP is udp4 in every experiment; "udp" reads as it.
        assert_eq!(SUBJECTS.parse("udp"), Ok(Subject::Udp4));
        assert!(SUBJECTS.parse("shm-spin").unwrap_err().contains("udp4"));
        assert_eq!(parse_loss("5"), Ok(5.0));
        assert_eq!(parse_loss("0.5%"), Ok(0.5));
        for bad in ["-1", "100", "x", ""] {
            assert!(parse_loss(bad).is_err(), "{bad:?}");
        }
        assert_eq!(impair_spec(Some(5.0)).as_deref(), Some("loss=5%,seed=1"));
        assert_eq!(impair_spec(Some(0.0)), None);
        let impairment = ferry::Impairment::parse("loss=5%,seed=1").unwrap();
        assert!(impairment.is_active());
    }

    #[test]
    fn frame_sizes() {
        assert_eq!(Subject::Udp4.datagram_bytes(65_536), Some(1472));
        assert_eq!(Subject::Udp6.datagram_bytes(65_536), Some(1452));
        assert_eq!(
            Subject::Udp4.datagram_bytes(64),
            Some(64 + ferry::UDP_DATA_HEADER)
        );
        assert_eq!(Subject::Iperf3.datagram_bytes(64), Some(64));
        assert_eq!(Subject::Iperf3.datagram_bytes(65_536), Some(1472));
        assert_eq!(Subject::Shm.datagram_bytes(64), None);
        assert!(Subject::RawUdp4.cannot_run(65_536).is_some());
        assert!(Subject::RawUdp4.cannot_run(65_507).is_none());
    }

    #[test]
    fn tally_counts_and_checks() {
        let mut t = Tally::new(100);
        let mut buf = vec![0u8; 100];
        for seq in [0, 1, 3, 2, 64] {
            write_message(&mut buf, seq);
            t.take(&buf, Some(seq)).unwrap();
        }
        assert_eq!(t.delivered, 4);
        assert_eq!(t.out_of_order, 1);
        assert_eq!(t.last_seq, Some(64));
        assert_eq!(t.checked, 2);
        write_message(&mut buf, 128);
        buf[99] ^= 1;
        assert!(t
            .take(&buf, None)
            .unwrap_err()
            .to_string()
            .contains("corrupt"));
        write_message(&mut buf, 5);
        assert!(t.take(&buf, Some(6)).is_err());
        assert!(t.take(&buf[..50], None).is_err());
    }

    #[test]
    fn the_last_possible_sequence_number_ends_the_count_without_overflow() {
        let mut t = Tally::new(8);
        t.take(&u64::MAX.to_le_bytes(), None).unwrap();
        let mut ending = Ending::new(Duration::from_secs(60));
        assert!(
            !ending.finished(&t),
            "not before the publisher said it finished"
        );
        ending.sent = Some(u64::MAX);
        assert!(ending.finished(&t));
    }

    #[test]
    fn another_system_is_set_against_ferrys_shared_memory() {
        let config = Config {
            transports: vec![Subject::Shm, Subject::Iceoryx2],
            sizes: vec![64, 1024],
            rounds: 2,
            delivery: Delivery::Latest,
            ..Config::default()
        };
        let m = |delivered: u64| Measurement {
            messages_sent: Some(delivered),
            messages_delivered: Some(delivered),
            bytes_delivered: Some(delivered * 64),
            seconds: 1.0,
            ..Measurement::default()
        };
        let mut rows = Vec::new();
        for round in 0..2 {
            for (t, delivered) in [(Subject::Shm, 4000), (Subject::Iceoryx2, 1000)] {
                rows.push(Row::new(&config, t, 64, round, Some(m(delivered)), None));
            }
        }
        add_ratios(&mut rows);
        let peer = &rows[1];
        assert_eq!(
            peer.delivery,
            RowDelivery::Latest,
            "the run's delivery applies"
        );
        assert_eq!(peer.datagram_bytes, None);
        assert_eq!(peer.ratios[&Subject::Shm], 0.25);
        assert!(rows[0].ratios.is_empty());
        assert_eq!(
            versus_peers(&rows),
            " ferry (shm) against iceoryx2 in the same rounds (ferry's delivered rate over \
             iceoryx2's): 4.00 × at 64 B."
        );
        assert_eq!(versus_peers(&example().rows), "", "no other system ran");
        assert!(Subject::Iceoryx2.remote_refusal().is_some());
    }

    #[test]
    fn baselines_run_first_at_each_size() {
        use Subject::*;
        assert_eq!(
            run_order(&[Udp4, Iperf3, Iperf3Tcp, Shm, Zenoh]),
            [Iperf3Tcp, Shm, Iperf3, Zenoh, Udp4],
            "each after its baselines, otherwise as given"
        );
        assert_eq!(
            run_order(&[Zenoh, Udp4]),
            [Zenoh, Udp4],
            "no baseline present"
        );
    }

    #[test]
    fn a_row_is_compared_with_the_baseline_run_nearest_in_time() {
        let config = Config {
            transports: vec![Subject::Shm, Subject::Iceoryx2, Subject::Zenoh],
            sizes: vec![64],
            rounds: 1,
            ..Config::default()
        };
        let row = |t: Subject, gbps: u64, ended_s: f64| {
            let m = Measurement {
                messages_sent: Some(1),
                messages_delivered: Some(1),
                bytes_delivered: Some(gbps * 1_000_000_000 / 8),
                seconds: 1.0,
                ..Measurement::default()
            };
            let mut r = Row::new(&config, t, 64, 0, Some(m), None);
            r.ended_s = Some(ended_s);
            r
        };
        let mut rows = vec![
            row(Subject::Shm, 40, 1.0),
            row(Subject::Iceoryx2, 8, 12.0),
            row(Subject::Zenoh, 10, 25.0),
            row(Subject::ZenohShm, 4, 30.0),
        ];
        // shm ran again right after zenoh, whose own shm run had ended 24 s before.
        rows[2].references.insert(
            Subject::Shm,
            Reference {
                delivered_gbps: 20.0,
                ended_s: 27.0,
            },
        );
        add_ratios(&mut rows);
        assert_eq!(
            rows[1].ratios[&Subject::Shm],
            0.2,
            "its round's shm row, 11 s away"
        );
        assert_eq!(rows[2].ratios[&Subject::Shm], 0.5, "the run beside it");
        assert_eq!(
            rows[3].ratios[&Subject::Shm],
            0.2,
            "the run beside zenoh, 3 s away"
        );
        // Results without times compare with the baseline's own row, as they did.
        for r in &mut rows {
            r.ended_s = None;
            r.ratios.clear();
        }
        add_ratios(&mut rows);
        assert_eq!(rows[2].ratios[&Subject::Shm], 0.25);
        // The references travel with the results, and are left out where there are none.
        let json = serde_json::to_value(&rows[2]).unwrap();
        assert_eq!(json["references"]["shm"]["delivered_gbps"], 20.0);
        assert!(serde_json::to_value(&rows[1])
            .unwrap()
            .get("references")
            .is_none());
        let back: Row = serde_json::from_value(json).unwrap();
        assert_eq!(back.references[&Subject::Shm].ended_s, 27.0);
    }

    #[test]
    fn ratios_pair_rounds() {
        let args = Config {
            transports: vec![Subject::Udp4, Subject::Iperf3],
            sizes: vec![1024],
            delivery: Delivery::Latest,
            duration: 1.0,
            rounds: 2,
            wait: WaitStrategy::Block,
            ..Config::default()
        };
        let m = |bytes: u64| Measurement {
            messages_sent: Some(10),
            messages_delivered: Some(10),
            bytes_delivered: Some(bytes),
            seconds: 1.0,
            ..Measurement::default()
        };
        let mut rows = vec![
            Row::new(&args, Subject::Udp4, 1024, 0, Some(m(1_000_000_000)), None),
            Row::new(&args, Subject::Iperf3, 1024, 0, Some(m(500_000_000)), None),
            Row::new(&args, Subject::Udp4, 1024, 1, Some(m(1_000_000_000)), None),
            Row::new(&args, Subject::Iperf3, 1024, 1, Some(m(250_000_000)), None),
        ];
        add_ratios(&mut rows);
        assert_eq!(rows[0].ratios[&Subject::Iperf3], 2.0);
        assert_eq!(rows[2].ratios[&Subject::Iperf3], 4.0);
        assert!(rows[1].ratios.is_empty());
        assert_eq!(rows[0].delivered_gbps, Some(8.0));
        assert_eq!(rows[0].delivery, RowDelivery::Latest);
        assert_eq!(rows[1].delivery, RowDelivery::None);
        let text = render_table(
            &args,
            &Pinning::None {
                reason: "test".into(),
            },
            &rows,
        );
        assert!(text.contains("3.00 × iperf3"), "{text}");
    }

    #[test]
    fn rows_keep_their_json() {
        let results = example();
        let row = serde_json::to_value(&results.rows[0]).unwrap();
        assert_eq!(row["transport"], "udp4");
        assert_eq!(row["delivery"], "reliable");
        assert!(row["ratios"]["raw-udp4"].is_number(), "{row}");
        assert!(row.get("skipped").is_none() && row.get("note").is_none());
        let raw = serde_json::to_value(&results.rows[2]).unwrap();
        assert_eq!(raw["transport"], "raw-udp4");
        assert_eq!(raw["delivery"], "none");
        let ratios: Vec<&String> = row["ratios"].as_object().unwrap().keys().collect();
        assert_eq!(ratios, ["iperf3", "raw-udp4"], "alphabetical, as before");
    }

    #[test]
    fn a_missing_tool_is_named_in_the_summary_with_the_command_that_adds_it() {
        let mut results = example();
        assert!(
            !Throughput::summary(&results)
                .iter()
                .any(|l| l.what.starts_with("third-party")),
            "iperf3 ran in the example"
        );
        results.config.tools.clear();
        let lines = Throughput::summary(&results);
        let line = lines
            .iter()
            .find(|l| l.what.starts_with("third-party"))
            .expect("a line for the missing tool");
        let says = line.best_peer.as_deref().unwrap_or_default();
        assert!(says.contains("iperf3 not installed"), "{says}");
        assert!(says.contains("apt-get install iperf3 sockperf"), "{says}");
    }

    #[test]
    fn example_results_read_back_and_draw() {
        let results = example();
        let value = serde_json::to_value(&results).unwrap();
        let back = Results::<Throughput>::from_value(value).unwrap();
        assert_eq!(back.rows.len(), 12);
        let section = Throughput::section(&back).unwrap();
        assert_eq!(section.plots.len(), 1);
        assert_eq!(section.plots[0].file, "throughput.svg");
        for t in ["udp4", "raw-udp4", "iperf3"] {
            assert!(section.plots[0].svg.contains(t), "{t} missing");
        }
        // The median of the two rounds, at the best size.
        assert!(
            section.sentence.contains("udp4 3.28 Gbit/s at 1 KiB"),
            "{}",
            section.sentence
        );
        assert!(section.sentence.contains(&cite(&VORTEX_LITE)));
        assert!(Throughput::table(&back).contains("× raw-udp4"));
        let summary = Throughput::summary(&back);
        assert_eq!(summary.len(), 2);
        assert_eq!(summary[0].ferry, "udp4: 400.5 k msg/s");
        assert_eq!(summary[0].floor.as_deref(), Some("raw-udp4: 300.5 k msg/s"));
        assert_eq!(
            summary[0].best_peer.as_deref(),
            Some("iperf3: 200.5 k msg/s")
        );
        assert!(summary[0].study.as_deref().unwrap().contains("110 000"));
        assert!(
            summary[1].ferry.starts_with("udp4: 3.28 Gbit/s at 1 KiB"),
            "{:?}",
            summary[1]
        );
    }

    /// Rows of a made-up run across two links (udp4 and iperf3-tcp, 64 KiB, two rounds).
    fn link_example() -> Results<Throughput> {
        let config = Config {
            transports: vec![Subject::Udp4, Subject::Iperf3Tcp],
            sizes: vec![64 << 10],
            rounds: 2,
            hosts: 2,
            link_rates: vec![
                netns::parse_link_rate("1gbit").unwrap(),
                netns::parse_link_rate("100mbit").unwrap(),
            ],
            ..Config::default()
        };
        let mut rows = Vec::new();
        for round in 0..2 {
            for rate in &config.link_rates {
                let scale = rate.bps / 100_000_000;
                for (t, delivered, bytes, packets) in [
                    (
                        Subject::Udp4,
                        Some(100 * scale),
                        100 * scale * 65_536,
                        5_000 * scale,
                    ),
                    (
                        Subject::Iperf3Tcp,
                        None,
                        200 * scale * 65_536,
                        9_100 * scale,
                    ),
                ] {
                    let m = Measurement {
                        messages_sent: delivered,
                        messages_delivered: delivered,
                        bytes_delivered: Some(bytes),
                        seconds: 1.0,
                        retransmitted: (t == Subject::Iperf3Tcp).then_some(0),
                        link: Some(netns::QdiscCounts {
                            packets,
                            bytes: packets * 1500,
                            drops: 7,
                        }),
                        ..Measurement::default()
                    };
                    let mut row = Row::new(&config, t, 65_536, round, Some(m), None);
                    row.link_rate = Some(rate.name());
                    row.link_rate_bps = Some(rate.bps);
                    rows.push(row);
                }
            }
        }
        add_ratios(&mut rows);
        let mut results = example();
        results.request = config;
        results.rows = rows;
        results
    }

    #[test]
    fn link_rows_count_packets_against_the_minimum_and_tcp() {
        let results = link_example();
        let udp = &results.rows[0];
        assert_eq!(udp.link_rate.as_deref(), Some("1gbit"));
        // 1000 messages of 64 KiB: 47 datagrams of 1424 payload bytes each.
        assert_eq!(udp.min_link_packets, Some(47_000));
        assert_eq!(udp.link_packets, Some(50_000));
        let extra = udp.extra_link_packets_percent.unwrap();
        assert!((extra - 6.383).abs() < 0.01, "{extra}");
        assert_eq!(
            udp.ratios[&Subject::Iperf3Tcp],
            0.5,
            "the same link and round"
        );
        assert_eq!(udp.retransmitted, None, "unknown, not 0");
        let tcp = &results.rows[1];
        assert_eq!(
            tcp.min_link_packets,
            Some((2000 * 65_536u64).div_ceil(1448))
        );
        let value = serde_json::to_value(udp).unwrap();
        assert_eq!(value["link_rate_bps"], 1_000_000_000u64);
        assert!(value["extra_link_packets_percent"].is_number());
        let table = Throughput::table(&results);
        assert!(
            table.contains("100mbit") && table.contains("unknown"),
            "{table}"
        );
        assert!(table.contains("0.50 ×"), "{table}");
        let section = Throughput::section(&results).unwrap();
        assert_eq!(section.plots.len(), 1);
        assert!(section.plots[0].svg.contains("iperf3-tcp"));
        assert!(
            section.sentence.contains(PACED_UDP.title),
            "{}",
            section.sentence
        );
        assert!(section.sentence.contains("Syzov"), "{}", section.sentence);
        assert!(
            section.sentence.contains("On the 100mbit link, ferry's udp4 (reliable) 0.052 Gbit/s at 64 KiB, 0.50 × iperf3-tcp's 0.105 Gbit/s, +6.4 % packets"),
            "{}",
            section.sentence
        );
        let summary = Throughput::summary(&results);
        assert_eq!(summary.len(), 2, "one line per link");
        assert!(summary[0].what.contains("1gbit"), "{:?}", summary[0]);
        assert!(summary[0].ferry.contains("0.50 × TCP"), "{:?}", summary[0]);
        let back = Results::<Throughput>::from_value(serde_json::to_value(&results).unwrap());
        assert_eq!(back.unwrap().request.link_rates.len(), 2);
    }

    #[test]
    fn periodic_link_rows_report_latency_beside_the_time_on_the_link() {
        let mut results = link_example();
        results.request.period = Some(0.125);
        for r in &mut results.rows {
            if r.transport == Subject::Iperf3Tcp {
                r.transport = Subject::Tcp;
            }
            r.period_s = Some(0.125);
            r.latency_p50_ms = Some(5.5);
            r.latency_p99_ms = Some(if r.transport == Subject::Tcp {
                6.5
            } else {
                6.0
            });
            r.latency_max_ms = Some(7.0);
            r.serialization_ms = Some(5.2);
        }
        let table = Throughput::table(&results);
        assert!(
            table.contains("p99 ms") && table.contains("on link ms") && table.contains("× tcp"),
            "{table}"
        );
        assert!(table.contains("one message every 125.0 ms"), "{table}");
        let section = Throughput::section(&results).unwrap();
        assert!(
            section.plots.iter().all(|p| p.file.contains("latency")),
            "periodic runs plot latency"
        );
        assert!(
            section
                .sentence
                .contains("p99 6.0 ms against its 5.2 ms on the link")
                && section.sentence.contains("TCP's p99 6.5 ms"),
            "{}",
            section.sentence
        );
        let summary = Throughput::summary(&results);
        assert!(summary[0].what.contains("periodic"), "{:?}", summary[0]);
        assert!(
            summary[0]
                .ferry
                .contains("p99 latency 6.0 ms against its 5.2 ms"),
            "{:?}",
            summary[0]
        );
        assert!(
            summary[0]
                .best_peer
                .as_deref()
                .is_some_and(|b| b.contains("tcp (same schedule)") && b.contains("6.5 ms")),
            "{:?}",
            summary[0]
        );
    }

    #[test]
    fn two_hosts_take_link_rates_and_link_transports() {
        let link = |transports: Vec<Subject>, rates: &[&str]| Config {
            transports,
            hosts: 2,
            link_rates: rates
                .iter()
                .map(|r| netns::parse_link_rate(r).unwrap())
                .collect(),
            ..Config::default()
        };
        assert!(
            Throughput::validate(&link(LINK_TRANSPORTS.to_vec(), &["1gbit", "100mbit"])).is_ok()
        );
        let err = |c: Config| Throughput::validate(&c).unwrap_err().to_string();
        assert!(err(link(LINK_TRANSPORTS.to_vec(), &[])).contains("--link-rate"));
        assert!(err(link(vec![Subject::Shm], &["1gbit"])).contains("shm"));
        assert!(err(link(vec![Subject::Udp4], &["1gbit", "1G"])).contains("twice"));
        let one_host = Config {
            link_rates: vec![netns::parse_link_rate("1gbit").unwrap()],
            ..Config::default()
        };
        assert!(err(one_host).contains("--hosts 2"));
        let config = serde_json::to_value(link(vec![Subject::Udp4], &["100mbit"])).unwrap();
        assert_eq!(config["link_rates"], serde_json::json!(["100mbit"]));
        let bad = serde_json::json!({"hosts": 2, "link_rates": ["100mbps"]});
        assert!(serde_json::from_value::<Config>(bad).is_err());
    }

    #[test]
    fn a_period_needs_the_link_a_schedule_and_room_for_the_send_time() {
        let periodic = |transports: Vec<Subject>, period: f64, sizes: Vec<usize>| Config {
            transports,
            sizes,
            hosts: 2,
            link_rates: vec![netns::parse_link_rate("100mbit").unwrap()],
            period: Some(period),
            ..Config::default()
        };
        assert!(
            Throughput::validate(&periodic(PERIOD_TRANSPORTS.to_vec(), 0.125, vec![1 << 20]))
                .is_ok()
        );
        let err = |c: Config| Throughput::validate(&c).unwrap_err().to_string();
        assert!(
            err(periodic(vec![Subject::Iperf3Tcp], 0.125, vec![1 << 20]))
                .contains("cannot send on a schedule")
        );
        assert!(err(periodic(vec![Subject::Udp4], 0.0001, vec![1 << 20])).contains("1 ms"));
        assert!(err(periodic(vec![Subject::Udp4], 5.0, vec![1 << 20])).contains("--duration"));
        assert!(err(periodic(vec![Subject::Udp4], f64::NAN, vec![1 << 20])).contains("1 ms"));
        assert!(err(periodic(vec![Subject::Udp4], 0.125, vec![8])).contains("16"));
        let one_host = Config {
            period: Some(0.125),
            ..Config::default()
        };
        assert!(err(one_host).contains("--hosts 2"));
        let tcp_here = Config {
            transports: vec![Subject::Tcp],
            ..Config::default()
        };
        assert!(err(tcp_here).contains("--hosts 2"));
    }

    #[test]
    fn stamped_messages_give_their_latency_and_are_checked_past_the_stamp() {
        let mut tally = Tally::stamped(64);
        let mut buf = vec![0u8; 64];
        for seq in 0..100 {
            write_stamped(&mut buf, seq);
            tally.take(&buf, Some(seq)).unwrap();
        }
        let l = tally
            .counts()
            .latency
            .expect("stamped messages have a latency");
        assert!(l.p50_ns <= l.p99_ns && l.p99_ns <= l.max_ns, "{l:?}");
        // A stamp from the future (another clock) is 0, not a wrap.
        buf[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        buf[..8].copy_from_slice(&100u64.to_le_bytes());
        buf[16..].fill(pattern(100, Dir::Ping));
        tally.take(&buf, None).unwrap();
        assert_eq!(tally.latencies.last(), Some(&0));
        // The pattern is checked past the stamp (message 128 is a checked one).
        write_stamped(&mut buf, 128);
        buf[40] ^= 1;
        let e = tally.take(&buf, None).unwrap_err().to_string();
        assert!(e.contains("byte 40"), "{e}");
        // Unstamped tallies have none.
        let mut plain = Tally::new(64);
        write_message(&mut buf, 0);
        plain.take(&buf, None).unwrap();
        assert_eq!(plain.counts().latency, None);
    }

    #[test]
    fn remote_runs_take_ipv4_udp_only() {
        let remote = |t: Subject| Config {
            transports: vec![t],
            remote: Some("10.0.0.2".to_owned()),
            ..Config::default()
        };
        for t in [Subject::RawUdp4, Subject::Udp4, Subject::Udp4Key] {
            assert!(Throughput::validate(&remote(t)).is_ok(), "{}", t.name());
        }
        let e = Throughput::validate(&remote(Subject::Udp6))
            .unwrap_err()
            .to_string();
        assert!(e.contains("over IPv4") && e.contains("raw-udp4"), "{e}");
        for t in [Subject::Shm, Subject::Iperf3, Subject::Sockperf] {
            let e = Throughput::validate(&remote(t)).unwrap_err().to_string();
            assert!(
                e.starts_with("--remote 10.0.0.2: ") && e.contains(t.name()),
                "{e}"
            );
        }
    }

    #[test]
    fn a_remote_rate_is_timed_on_the_subscriber_clock() {
        let c = Counts {
            delivered: 10,
            bytes: 640,
            first_ns: 5_000_000_000,
            last_ns: 6_000_000_000,
            out_of_order: 0,
            checked: 1,
            kernel_drops: None,
            ferry_lost: None,
            ferry_skipped: None,
            latency: None,
        };
        let mut m = Measurement {
            messages_sent: Some(12),
            ..Measurement::default()
        };
        read_report(&c, &mut m, 4_500_000_000, true);
        assert_eq!((m.seconds, m.lost), (1.5, Some(2)));
        read_report(&c, &mut m, 123, false);
        assert_eq!(m.seconds, 1.0);
    }
}
