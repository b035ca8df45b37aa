//! What the experiment is asked for (its options and subjects), its limits and timeouts, and
//! the settings every part of it shares: the bottom floor, which imports no other part.

use crate::rawudp::{self};
use crate::subject::{Family, Subject, Subjects};
use crate::Pin;
use ferry::{Delivery, IpVersion, Qos, WaitStrategy};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What this experiment measures, in the order its help lists them.
pub const SUBJECTS: Subjects = Subjects(&[
    Subject::RawSpin,
    Subject::ShmSpin,
    Subject::Shm,
    Subject::RawFutex,
    Subject::ShmBlock,
    Subject::ShmBlockWaitSet,
    Subject::ShmSpinRr,
    Subject::ShmBlockRr,
    Subject::RawUdp4,
    Subject::Udp4,
    Subject::Udp4Rr,
    Subject::Udp4Key,
    Subject::Udp6,
    Subject::Iceoryx2,
    Subject::Iceoryx2Block,
    Subject::Iceoryx2Rr,
    Subject::Zenoh,
    Subject::ZenohShm,
    Subject::ZenohRr,
]);

/// How a transport moves its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// ferry, with this QoS (see `Subject::ferry_qos`).
    Ferry,
    /// A ferry service (request/response), with this QoS: the main process is its client, the
    /// peer its server.
    FerryService,
    /// A raw shared buffer; `futex`: the receiver sleeps instead of spinning.
    RawShm { futex: bool },
    /// Plain blocking UDP sockets on 127.0.0.1.
    RawUdp,
    /// Another system, run by the `ferry-peers` binary (see `peers`).
    Peer,
}

/// What latency knows of a subject: its baseline, how it moves messages, ferry's QoS for it.
pub(super) trait LatencySubject: Copy {
    /// The baseline a row is set against in the same rounds.
    fn baseline(self) -> Option<Subject>;
    /// For another system, the ferry transport that waits the same way (the one the report
    /// sets it against).
    fn ferry_counterpart(self) -> Option<Subject>;
    fn kind(self) -> Kind;
    /// ferry's QoS for a ferry transport: reliable, loans of up to `max_size` bytes.
    fn ferry_qos(self, max_size: usize) -> Option<Qos>;
    /// Why this transport cannot carry a `size`-byte message, if it cannot.
    fn cannot_carry(self, size: usize) -> Option<String>;
    /// Whether it can reach a peer on another machine (`--remote`).
    fn crosses_hosts(self) -> bool;
    fn describe(self) -> &'static str;
}

impl LatencySubject for Subject {
    /// The raw baseline a ferry transport is compared with.
    fn baseline(self) -> Option<Subject> {
        match self {
            Subject::ShmSpin | Subject::Shm => Some(Subject::RawSpin),
            Subject::ShmBlock => Some(Subject::RawFutex),
            // Waiting on many: against one subscriber's own blocking receive.
            Subject::ShmBlockWaitSet => Some(Subject::ShmBlock),
            Subject::Udp4 | Subject::Udp6 => Some(Subject::RawUdp4),
            // What the domain key costs: against the same transport in the clear.
            Subject::Udp4Key => Some(Subject::Udp4),
            // A service's request and response: against the ping-pong of two topics that waits
            // the same way, so that the ratio is what a service adds to it.
            Subject::ShmSpinRr => Some(Subject::ShmSpin),
            Subject::ShmBlockRr => Some(Subject::ShmBlock),
            Subject::Udp4Rr => Some(Subject::Udp4),
            // Another system: against ferry's spinning shared memory, so that the ratio says how
            // far it is from ferry.
            Subject::Iceoryx2 | Subject::Zenoh | Subject::ZenohShm => Some(Subject::ShmSpin),
            // A receiver that sleeps: against ferry's sleeping shared memory.
            Subject::Iceoryx2Block => Some(Subject::ShmBlock),
            // Another system's request/response: against ferry's spinning service.
            Subject::Iceoryx2Rr | Subject::ZenohRr => Some(Subject::ShmSpinRr),
            // Not this experiment's (refused before anything runs).
            Subject::RawSpin | Subject::RawFutex | Subject::RawUdp4 | Subject::Auto => None,
            Subject::Iperf3 | Subject::Iperf3Tcp | Subject::Tcp | Subject::Sockperf => None,
        }
    }

    /// For another system, the ferry transport that waits the same way (the one the report
    /// sets it against).
    fn ferry_counterpart(self) -> Option<Subject> {
        match self {
            Subject::Iceoryx2 | Subject::Zenoh | Subject::ZenohShm => Some(Subject::ShmSpin),
            Subject::Iceoryx2Block => Some(Subject::ShmBlock),
            Subject::Iceoryx2Rr | Subject::ZenohRr => Some(Subject::ShmSpinRr),
            _ => None,
        }
    }

    fn kind(self) -> Kind {
        match self {
            Subject::RawSpin => Kind::RawShm { futex: false },
            Subject::RawFutex => Kind::RawShm { futex: true },
            Subject::RawUdp4 => Kind::RawUdp,
            s => match s.family() {
                Family::Ferry => Kind::Ferry,
                Family::FerryService => Kind::FerryService,
                // The lab's tools are no subject of this experiment: refused before anything
                // runs (`SUBJECTS`).
                Family::Raw | Family::Peer | Family::Tool => Kind::Peer,
            },
        }
    }

    /// ferry's QoS for a ferry transport: reliable, loans of up to `max_size` bytes.
    fn ferry_qos(self, max_size: usize) -> Option<Qos> {
        let shm = |wait| Some(ferry_qos(wait, max_size));
        let udp = |ip| {
            Some(
                Qos::default()
                    .transport(ferry::Transport::Udp)
                    .ip_version(ip)
                    .mtu(UDP_MTU)
                    .delivery(Delivery::Reliable)
                    .wait(WaitStrategy::Block)
                    .max_message_size(max_size),
            )
        };
        match self {
            Subject::ShmSpin | Subject::ShmSpinRr => shm(WaitStrategy::Spin),
            Subject::Shm => shm(WaitStrategy::Adaptive),
            Subject::ShmBlock | Subject::ShmBlockRr | Subject::ShmBlockWaitSet => {
                shm(WaitStrategy::Block)
            }
            Subject::Udp4 | Subject::Udp4Key | Subject::Udp4Rr => udp(IpVersion::V4),
            Subject::Udp6 => udp(IpVersion::V6),
            Subject::RawSpin
            | Subject::RawFutex
            | Subject::RawUdp4
            | Subject::Iceoryx2
            | Subject::Iceoryx2Block
            | Subject::Iceoryx2Rr
            | Subject::Zenoh
            | Subject::ZenohShm
            | Subject::ZenohRr
            | Subject::Auto
            | Subject::Iperf3
            | Subject::Iperf3Tcp
            | Subject::Tcp
            | Subject::Sockperf => None,
        }
    }

    /// Why this transport cannot carry a `size`-byte message, if it cannot.
    fn cannot_carry(self, size: usize) -> Option<String> {
        (self == Subject::RawUdp4 && size > rawudp::MAX_DATAGRAM_V4).then(|| {
            format!(
                "skipped: one UDP datagram holds at most {} bytes, and raw-udp4 sends one datagram per message",
                rawudp::MAX_DATAGRAM_V4
            )
        })
    }

    /// Whether it can reach a peer on another machine (`--remote`).
    fn crosses_hosts(self) -> bool {
        matches!(self, Subject::Udp4 | Subject::Udp4Key | Subject::RawUdp4)
    }

    fn describe(self) -> &'static str {
        match self {
            Subject::RawSpin => "two processes share one buffer per direction; the receiver spins on a flag",
            Subject::ShmSpin => "ferry shared memory, reliable, WaitStrategy::Spin",
            Subject::Shm => "ferry shared memory, reliable, WaitStrategy::Adaptive",
            Subject::RawFutex => "as raw-spin, but the receiver sleeps in futex_wait and the sender calls futex_wake after every message",
            Subject::ShmBlock => "ferry shared memory, reliable, WaitStrategy::Block",
            Subject::ShmBlockWaitSet => "as shm-block, but the main process waits for each reply in a WaitSet over its subscriber and 7 idle subscribers of other topics (one futex_waitv on their 8 doorbells), then takes the reply with try_recv; set against shm-block",
            Subject::RawUdp4 => "two processes with plain blocking std::net::UdpSockets on 127.0.0.1, connected, one send and one recv per message (one datagram per message: at most 65507 bytes)",
            Subject::Udp4 => "ferry UDP over IPv4 loopback, reliable, WaitStrategy::Block, MTU 1500 (messages cut into 1472-byte datagrams by ferry)",
            Subject::Udp4Key => "as udp4, with a domain key: every datagram authenticated and encrypted (AEGIS-128L), replays refused",
            Subject::Udp6 => "ferry UDP over IPv6 loopback, reliable, WaitStrategy::Block, MTU 1500 (messages cut into 1452-byte datagrams by ferry)",
            Subject::ShmSpinRr => "a ferry service over shared memory, WaitStrategy::Spin: the main process calls (a request loaned and written in place, the response read in place), the peer serves (the request read in place, the response loaned and written in place); each behind ferry's 16-byte request/response header, written with the commit",
            Subject::ShmBlockRr => "as shm-spin-rr, with WaitStrategy::Block on both ends",
            Subject::Udp4Rr => "a ferry service over UDP on IPv4 loopback (as udp4: reliable, WaitStrategy::Block, MTU 1500); the main process calls, the peer serves",
            Subject::Iceoryx2 => "iceoryx2 0.10 publish/subscribe over shared memory (its defaults, no config file), two processes of crates/ferry-peers pinned as the lab's: a loan filled with memset, receive() polled in a spin loop, every byte checked in place",
            Subject::Iceoryx2Block => "as iceoryx2, but the receiver sleeps: each direction also has an iceoryx2 event service (event ids in a counting bit set in POSIX shared memory, the sleeper woken through a Unix datagram socket); the sender calls notify() on its notifier after every send, the receiver tries receive() and, finding nothing, sleeps in its listener's timed_wait until a notification comes",
            Subject::Zenoh => "Zenoh 1.10 publish/subscribe, two sessions in peer mode over TCP on 127.0.0.1 (no scouting), express publishers with Block congestion control as its z_ping; each message a fresh buffer filled with memset, the subscriber's channel polled with try_recv in a spin loop (the measuring threads pinned as the lab's, Zenoh's own threads not), every byte checked in place",
            Subject::ZenohShm => "as zenoh, with each message allocated from Zenoh's POSIX shared-memory provider and filled in place, so that it travels as a reference to the segment",
            Subject::Iceoryx2Rr => "iceoryx2 0.10 request-response over shared memory (its defaults, no config file), two processes of crates/ferry-peers pinned as the lab's: the main process is the client (a request loaned with loan_slice_uninit and filled with memset, its pending response's receive() polled in a spin loop, every byte of the response checked in place), the peer the server (receive() polled in a spin loop, every byte of the request checked in place, answered with a loaned response of the same size filled with memset); set against shm-spin-rr",
            Subject::ZenohRr => "Zenoh 1.10 request/response, the two sessions of zenoh (peer mode over TCP on 127.0.0.1, no scouting): the peer declares a queryable, the main process calls get with the request as its payload (a fresh buffer filled with memset; express, Block congestion control, consolidation None so that the reply is handed over as it comes) and polls the reply channel with try_recv in a spin loop; the queryable's channel is polled the same way, each query's payload checked in place and answered with a reply of the same size filled with memset (the measuring threads pinned as the lab's, Zenoh's own threads not); set against shm-spin-rr",
            _ => "not measured by this experiment",
        }
    }
}

/// The MTU ferry's UDP transports are given (1472-byte IPv4 datagrams).
pub(super) const UDP_MTU: usize = 1500;

/// What `ferry lab latency` is asked to measure.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Transports, in the order each round runs them, except that a baseline runs before the
    /// rows compared with it.
    pub transports: Vec<Subject>,
    /// Message sizes in bytes.
    pub sizes: Vec<usize>,
    /// Round trips recorded per transport and size, split evenly across the rounds.
    pub samples: usize,
    /// Interleaved rounds: every round runs every transport in turn.
    pub rounds: usize,
    /// Unrecorded round trips before the recorded ones, per transport, size and round; raised
    /// where needed to write a whole ferry ring once, and after a transport's first run held to
    /// what 2 s of its round trips take, unless it writes ferry's ring (see `WARMUP_TIME`).
    pub warmup: usize,
    /// CPUs of the main process and of the peer; `None`: the first two this process may use.
    pub pin: Option<Pin>,
    /// The `ferry lab agent` (`HOST[:PORT]`) that runs the peer on another machine; `None`: a
    /// local peer process.
    pub remote: Option<String>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            transports: vec![
                Subject::RawSpin,
                Subject::ShmSpin,
                Subject::ShmSpinRr,
                Subject::Shm,
                Subject::RawFutex,
                Subject::ShmBlock,
                Subject::ShmBlockWaitSet,
                Subject::ShmBlockRr,
            ],
            sizes: vec![32, 1 << 10, 32 << 10, 1 << 20],
            samples: 10_000,
            rounds: 5,
            warmup: 200,
            pin: None,
            remote: None,
        }
    }
}

/// The experiment (see the module's documentation).
pub struct Latency;

/// The largest message size accepted (both ferry and the baseline map twice or more of it).
pub(super) const MAX_SIZE: usize = 256 << 20;
/// The most rounds a run interleaves.
pub(super) const MAX_ROUNDS: usize = 10_000;
/// How long the main process waits for one reply before it gives up.
pub(super) const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the peer waits for one message (the main process may be slow to start a size).
pub(super) const PEER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the peer may take to attach, and to exit at the end.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) fn ferry_qos(wait: WaitStrategy, max_size: usize) -> Qos {
    Qos::default()
        .transport(ferry::Transport::Shm)
        .delivery(Delivery::Reliable)
        .wait(wait)
        .max_message_size(max_size)
}
