//! The control messages between the main side and its peer process.

use serde::{Deserialize, Serialize};

/// What the main side tells the peer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Command {
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
pub(super) enum PeerReport {
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

/// What a subscriber received, as it counts the messages (its tally's, and its report's).
/// Times are its CLOCK_MONOTONIC, in ns.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub(super) struct Received {
    pub(super) delivered: u64,
    pub(super) bytes: u64,
    pub(super) first_ns: u64,
    pub(super) last_ns: u64,
    /// Messages whose number was not above the last one's (duplicates or reordering).
    pub(super) out_of_order: u64,
    /// Messages of which every byte was checked.
    pub(super) checked: u64,
}

/// The subscriber's counts. Times are the peer's CLOCK_MONOTONIC, in ns.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct Counts {
    #[serde(flatten)]
    pub(super) received: Received,
    /// `None`: the peer could not read it.
    pub(super) kernel_drops: Option<u64>,
    pub(super) ferry_lost: Option<u64>,
    pub(super) ferry_skipped: Option<u64>,
    /// Stamped messages (`--period`): their latency.
    #[serde(default)]
    pub(super) latency: Option<Latency>,
}

/// Per-message latency, from the publisher's send call to the subscriber's receipt, ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(super) struct Latency {
    pub(super) p50_ns: u64,
    pub(super) p99_ns: u64,
    pub(super) max_ns: u64,
}
