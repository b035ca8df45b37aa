//! Why a datagram (or the state it asked for) was refused. Every refusal is counted by reason, so
//! that `ferry stats` can say what was turned away and why; nothing is dropped silently.
//!
//! The counters' types live here, apart from the UDP endpoints and discovery that count them:
//! the topic directory in shared memory (`shm`) keeps them for `ferry stats` without depending
//! on UDP.

/// The reasons, in the order their counters are kept (and stored in the topic directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Refusal {
    /// Not a ferry frame, or one whose fields contradict each other.
    Malformed = 0,
    /// A message larger than the endpoint's `max_message_size`.
    TooLarge = 1,
    /// A fragment that disagrees with earlier fragments of its message.
    Inconsistent = 2,
    /// A sequence number or stream position beyond the receive window, or a claim a genuine peer
    /// cannot make (a heartbeat past the window is a gap given up, and counted here too).
    OutOfWindow = 3,
    /// A bound was reached: sessions, receivers, reassembly memory, repair budget.
    OverLimit = 4,
    /// From an address or id this endpoint does not know (a control frame from an unregistered
    /// receiver, a session's frames from a second source).
    Unknown = 5,
    /// A frame of a session that already ended.
    Stale = 6,
    /// Failed authentication (domain key).
    Unauthenticated = 7,
    /// From a publisher that declares another type for the topic than this subscriber does.
    OtherType = 8,
}

/// Number of reasons.
pub const REASONS: usize = 9;

impl Refusal {
    pub const ALL: [Refusal; REASONS] = [
        Refusal::Malformed,
        Refusal::TooLarge,
        Refusal::Inconsistent,
        Refusal::OutOfWindow,
        Refusal::OverLimit,
        Refusal::Unknown,
        Refusal::Stale,
        Refusal::Unauthenticated,
        Refusal::OtherType,
    ];

    /// The word `ferry stats` prints.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::Malformed => "malformed",
            Refusal::TooLarge => "too-large",
            Refusal::Inconsistent => "inconsistent",
            Refusal::OutOfWindow => "out-of-window",
            Refusal::OverLimit => "over-limit",
            Refusal::Unknown => "unknown-source",
            Refusal::Stale => "stale",
            Refusal::Unauthenticated => "unauthenticated",
            Refusal::OtherType => "other-type",
        }
    }
}

/// Counters, one per reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refusals(pub [u64; REASONS]);

impl Refusals {
    pub fn count(&mut self, why: Refusal) {
        self.0[why as usize] += 1;
    }

    pub fn get(&self, why: Refusal) -> u64 {
        self.0[why as usize]
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Adds another set of counters.
    pub fn add(&mut self, other: &Refusals) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    /// The non-zero counters, by name: "out-of-window 3, stale 1".
    pub fn describe(&self) -> String {
        Refusal::ALL
            .iter()
            .filter(|r| self.get(**r) > 0)
            .map(|r| format!("{} {}", r.name(), self.get(*r)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Discovery datagrams an agent refused, by reason (an agent's `refusals()`; `ferry stats` shows
/// them per endpoint).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiscoveryRefusals {
    /// Datagrams that do not decode (see `DiscoveryError`): another program, another ferry
    /// release, damage on the way, or a forger.
    pub malformed: u64,
    /// Datagrams from a source discovery does not listen to: with `FERRY_PEERS` set, an
    /// announcement from an address not in it (list each peer by the address it sends from);
    /// a relay message not from this host's relay; a registration not from this host, or while
    /// this host does not relay.
    pub not_allowed: u64,
    /// Datagrams over a bound: an announcement longer than `MAX_ANNOUNCE` (2026) bytes or with
    /// more than `MAX_ENTRIES` (128) entries; one whose entries made room for themselves or were refused
    /// because a table was full (`DiscoveryLimits`: raise the bound if a genuine host has
    /// that many endpoints); a registration while the relay serves as many agents as it may.
    pub over_limit: u64,
    /// With a domain key: datagrams not sealed with it, or replayed.
    pub unauthenticated: u64,
}

impl DiscoveryRefusals {
    /// Every refused datagram.
    pub fn total(&self) -> u64 {
        self.malformed
            .saturating_add(self.not_allowed)
            .saturating_add(self.over_limit)
            .saturating_add(self.unauthenticated)
    }
}
