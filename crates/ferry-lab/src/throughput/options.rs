//! What the experiment is asked for (its options and subjects), its limits and timeouts, and
//! the settings every part of it shares: the bottom floor, which imports no other part.

use crate::error::Result;
use crate::netns::{self, LinkRate};
use crate::subject::{Subject, Subjects};
use crate::Pin;
use ferry::{Delivery, IpVersion, Qos, WaitStrategy};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

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
pub(super) trait ThroughputSubject: Copy {
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
            Subject::RawUdp4 if size > crate::rawudp::MAX_DATAGRAM_V4 => Some(format!(
                "skipped: one UDP datagram holds at most {} bytes, and raw-udp4 sends one datagram per message",
                crate::rawudp::MAX_DATAGRAM_V4
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
pub(super) const TCP_MSS: u64 = 1448;

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
pub(super) const UDP_MTU: usize = 1500;
/// sockperf's smallest message (its header).
pub(super) const SOCKPERF_MIN: usize = 14;
/// Every this many messages (by sequence number) the subscriber checks every byte.
pub(super) const CHECK_EVERY: u64 = 64;
/// The largest message size accepted.
pub(super) const MAX_SIZE: usize = 64 << 20;
/// The longest `--duration` accepted, in seconds.
pub(super) const MAX_DURATION_S: f64 = 600.0;
/// How long the peer may take to start, and to exit at the end.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(10);
/// After the publisher has finished: how long the subscriber waits for more, at most.
pub(super) const DRAIN_LIMIT: Duration = Duration::from_secs(20);

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
pub(super) const MIN_PERIOD_S: f64 = 0.001;

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

pub(super) fn ferry_qos(
    transport: Subject,
    size: usize,
    delivery: Delivery,
    wait: WaitStrategy,
) -> Qos {
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
