//! Finding UDP endpoints on other hosts.
//!
//! Each process runs one agent per domain (a thread, started with the first UDP endpoint). Every
//! half second, and at once when an endpoint comes or goes, it announces the process's UDP
//! publishers and subscribers on port `FERRY_DISCOVERY_PORT` (7650): by unicast to every host of
//! `FERRY_PEERS` (`ip[:port],...`), and, when `FERRY_DISCOVERY=multicast`, by multicast to
//! `FERRY_DISCOVERY_GROUP` (239.255.70.70) on the interface whose IPv4 address is
//! `FERRY_DISCOVERY_IFACE` (default: the kernel's choice). Multicast is opt-in so that ferry never
//! sends to a network nobody asked it to use. It learns the others' announcements; an
//! endpoint's address is the announcement's source address with the announced port. Entries not
//! heard for two seconds expire. Endpoints of this host find each other through the topic's
//! shared-memory directory instead; announcements from this host are ignored. The settings are
//! the node's ([`DiscoveryConfig`] in its `NodeConfig`, from those variables unless the program
//! sets them); nodes of a domain with the same key and settings share one agent.
//!
//! Unicast (`FERRY_PEERS` without multicast) reaches one socket per host and port, so one agent
//! per host (network namespace) is its **relay**: the first to bind the discovery port, which it
//! binds alone. Every other agent binds a port of its own, sends its announcements from it,
//! registers there with the relay every period (a REGISTER to 127.0.0.1), and gets every
//! announcement the relay receives forwarded (RELAY, with the original source). When the relay's
//! process ends, the next agent to find the port free takes over.
//!
//! Every datagram may be hostile (an off-path sender can put any source address on UDP), so
//! what is heard is restricted ([`DiscoveryConfig::allows_source`]): with `FERRY_PEERS` set, its
//! addresses are the only sources of announcements heard, whether they come straight or through
//! the relay, and whether multicast is on or not (ferry does not read a datagram's destination,
//! so it cannot tell multicast from unicast; with both set, multicast reaches the listed hosts
//! only). A relay message is taken only from this host's relay (loopback, the discovery port), a
//! registration only from loopback and only by a relay. Multicast without `FERRY_PEERS` hears
//! any source that reaches the group: nothing authenticates an announcement yet (that is the
//! opt-in domain key's job, a later feature). What is refused is counted ([`Agent::refusals`]).
//!
//! Every table is bounded ([`DiscoveryLimits`]): a source address at its bound makes room by
//! dropping its entry seen longest ago; with the whole table full, the source holding the most
//! entries gives one up, so a flood from a few addresses cannot keep other hosts out; the relay
//! refuses new registrations while it serves as many agents as it may. Nothing waits; what goes
//! over a bound is counted.
//!
//! ```text
//! 0 u16 magic 0x4446 ("FD")  2 u8 version  3 u8 kind (1 announce, 2 register, 3 relay)
//! announce: 4 u32 entries  8 u64 host id  16 u16 domain length, domain
//!   entry: u8 role (1 publisher, 2 subscriber)  u8 flags (1 reliable)  u16 port  u64 id
//!          u32 largest message a subscriber takes (0: a publisher, or no limit said)
//!          u16 topic length, topic
//! register: nothing more
//! relay: 4 u8[16] source IPv6 (IPv4-mapped)  20 u16 source port  22 the announcement
//! ```
//!
//! Every datagram is decoded by [`decode_message`], a pure function that checks every length
//! and value: names are valid ferry topic and domain names (at most [`MAX_NAME`] bytes), ports
//! are not 0, an announcement holds at most [`MAX_ENTRIES`] entries and at most
//! [`MAX_ANNOUNCE`] bytes, and its entry count matches the entries present, with nothing after
//! them. Flag bits other than "reliable" are ignored (reserved).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::crypto::{self, DomainKey, Opener, Sealer};
use crate::sys::udp::{Multicast, MulticastInterface, RecvBatch, SocketOptions, UdpSocket};
use crate::sys::{host_id, monotonic_ns};

const MAGIC: u16 = 0x4446;
/// 2: entries say a subscriber's largest message.
const VERSION: u8 = 2;
const KIND_ANNOUNCE: u8 = 1;
const KIND_REGISTER: u8 = 2;
const KIND_RELAY: u8 = 3;
/// Magic, version and kind.
const HEADER: usize = 4;
/// A relay message's bytes before the announcement it carries.
const RELAY_HEADER: usize = 22;
/// An entry's bytes besides its topic.
const ENTRY_FIXED: usize = 18;
/// The smallest entry: a one-byte topic.
const MIN_ENTRY: usize = ENTRY_FIXED + 1;
/// The largest discovery datagram received; longer ones arrive cut short.
const MAX_DATAGRAM: usize = 2048;
/// The longest announcement: one the relay can forward whole (with its relay header) in the
/// 2048 bytes a discovery socket receives at most. Ferry sends at most about 1400.
pub const MAX_ANNOUNCE: usize = MAX_DATAGRAM - RELAY_HEADER;
/// The most entries one announcement may hold. Ferry puts at most this many in one (about 80
/// fit in the ~1200 bytes of entries it sends per datagram); more is refused without looking
/// further.
pub const MAX_ENTRIES: usize = 128;
/// The longest topic or domain name in an announcement, in bytes: the topic directory's bound.
pub const MAX_NAME: usize = crate::shm::layout::MAX_NAME;
const PERIOD: Duration = Duration::from_millis(500);
const EXPIRY_NS: u64 = 2_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Publisher,
    Subscriber,
}

/// One endpoint in an announcement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub role: Role,
    /// A valid ferry topic name (at most [`MAX_NAME`] bytes).
    pub topic: String,
    /// Never 0.
    pub port: u16,
    pub id: u64,
    pub reliable: bool,
    /// A subscriber's largest message in bytes (a larger one is refused); 0 for a publisher.
    pub max_message: u32,
}

/// The UDP endpoints of one process in one domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    pub host: u64,
    /// A valid ferry domain name.
    pub domain: String,
    /// At most [`MAX_ENTRIES`].
    pub entries: Vec<Entry>,
}

/// A discovery datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A process's endpoints, sent to the peers or the multicast group.
    Announce(Announcement),
    /// An agent of this host asks the relay to forward announcements to it.
    Register,
    /// The relay forwards an announcement it received from `source`.
    Relay {
        /// Neither unspecified, multicast nor broadcast, and not port 0.
        source: SocketAddr,
        announcement: Announcement,
    },
}

/// Why a datagram is not a discovery message this ferry takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    #[error(
        "not a ferry discovery datagram: another program sends to the discovery port; \
         move it or ferry (FERRY_DISCOVERY_PORT) to another port"
    )]
    NotDiscovery,
    #[error(
        "discovery protocol version {0}, but this ferry speaks version {VERSION}: run the same \
         ferry release on every host"
    )]
    Version(u8),
    #[error("unknown discovery message kind {0}: run the same ferry release on every host")]
    Kind(u8),
    #[error(
        "the datagram ends inside its {0}: it was cut short on the way, or was not sent by ferry"
    )]
    Truncated(&'static str),
    #[error("{0} bytes follow the message's end: it was not sent by this ferry release")]
    Trailing(usize),
    #[error(
        "an announcement of {0} bytes, more than the {MAX_ANNOUNCE} ferry sends: it was not \
         sent by ferry"
    )]
    TooLong(usize),
    #[error(
        "an announcement of {0} entries, more than the {MAX_ENTRIES} ferry puts in one: it \
         was not sent by ferry"
    )]
    TooManyEntries(u32),
    #[error("a {what} of {len} bytes, longer than {MAX_NAME}: it was not sent by ferry")]
    NameTooLong { what: &'static str, len: usize },
    #[error("a {0} that is not a valid ferry name: it was not sent by ferry")]
    BadName(&'static str),
    #[error("role {0}, neither publisher (1) nor subscriber (2): run the same ferry release on every host")]
    Role(u8),
    #[error("an endpoint on port 0: it was not sent by ferry")]
    ZeroPort,
    #[error("a relayed source address {0} that no host sends from: it was not sent by ferry")]
    BadSource(SocketAddr),
}

/// Why a discovery datagram was refused: the counters of [`DiscoveryRefusals`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It does not decode (see [`DiscoveryError`]).
    Malformed,
    /// It came from a source discovery does not listen to.
    NotAllowed,
    /// It is more than a bound allows.
    OverLimit,
    /// The domain has a key and the datagram was not sealed with it (or was seen before).
    Unauthenticated,
}

impl DiscoveryError {
    /// Which counter a datagram refused with this error goes to.
    pub fn refusal(&self) -> Refusal {
        match self {
            DiscoveryError::TooLong(_) | DiscoveryError::TooManyEntries(_) => Refusal::OverLimit,
            _ => Refusal::Malformed,
        }
    }
}

/// An endpoint another host announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    pub role: Role,
    pub topic: String,
    pub addr: SocketAddr,
    pub id: u64,
    pub reliable: bool,
    /// A subscriber's largest message (0: not said).
    pub max_message: u32,
    pub host: u64,
    /// Bytes of the announcements that named this endpoint (each its share of its datagram):
    /// what its address sent to learn it. An unverified address is sent at most three times
    /// this (see `endpoint`).
    pub heard_bytes: u64,
    seen_ns: u64,
}

struct State {
    locals: Vec<(u64, Entry)>,
    next_key: u64,
    remotes: Remotes,
}

/// Endpoints other hosts announced, keyed by (host, role, id), bounded in total and per source
/// address (see [`DiscoveryLimits`]).
#[derive(Default)]
struct Remotes {
    map: HashMap<(u64, Role, u64), Remote>,
    /// How many entries of `map` each source address holds.
    per_source: HashMap<IpAddr, usize>,
}

/// What [`Remotes::take`] did with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Taken {
    /// Known as it is: seen again.
    Refreshed,
    /// New or changed.
    Added,
    /// A bound was reached, and the table changed: the entry made room for itself, or it
    /// moved to another source and could not be kept.
    Evicted,
    /// Not taken (a bound was reached and nothing could make room).
    Refused,
}

impl Remotes {
    fn values(&self) -> impl Iterator<Item = &Remote> {
        self.map.values()
    }

    fn count(&self, ip: IpAddr) -> usize {
        self.per_source.get(&ip).copied().unwrap_or(0)
    }

    fn remove(&mut self, key: &(u64, Role, u64)) {
        if let Some(r) = self.map.remove(key) {
            let ip = r.addr.ip();
            match self.per_source.get_mut(&ip) {
                Some(n) if *n > 1 => *n -= 1,
                _ => {
                    self.per_source.remove(&ip);
                }
            }
        }
    }

    /// The key of the entry of `ip` seen longest ago.
    fn oldest_of(&self, ip: IpAddr) -> Option<(u64, Role, u64)> {
        self.map
            .iter()
            .filter(|(_, r)| r.addr.ip() == ip)
            .min_by_key(|(_, r)| r.seen_ns)
            .map(|(k, _)| *k)
    }

    /// Takes `r`, within `limits`. A source at its own bound makes room by dropping its entry
    /// seen longest ago (most likely one that is gone). With the table full, the source
    /// holding the most entries (counting `r`'s source with `r`) gives up its entry seen
    /// longest ago: a source with fewer entries always gets in, so one that floods the table
    /// cannot keep the others out. Work: at most a pass over the table per entry.
    fn take(&mut self, r: Remote, limits: &DiscoveryLimits) -> Taken {
        let key = (r.host, r.role, r.id);
        let ip = r.addr.ip();
        let mut moved = false;
        if let Some(old) = self.map.get_mut(&key) {
            if old.addr == r.addr
                && old.topic == r.topic
                && old.reliable == r.reliable
                && old.max_message == r.max_message
            {
                old.seen_ns = r.seen_ns;
                old.heard_bytes = old.heard_bytes.saturating_add(r.heard_bytes);
                return Taken::Refreshed;
            }
            if old.addr.ip() == ip {
                *old = r;
                return Taken::Added;
            }
            // Moved to another source: counted there, as a new entry.
            self.remove(&key);
            moved = true;
        }
        let mine = self.count(ip);
        let victim = if mine >= limits.max_per_source {
            Some(ip)
        } else if self.map.len() >= limits.max_remotes {
            let largest = self
                .per_source
                .iter()
                .filter(|(s, _)| **s != ip)
                .max_by_key(|(_, n)| **n)
                .filter(|(_, n)| **n > mine.saturating_add(1))
                .map(|(s, _)| *s);
            Some(largest.unwrap_or(ip))
        } else {
            None
        };
        let taken = match victim {
            None => Taken::Added,
            Some(v) => match self.oldest_of(v) {
                Some(k) => {
                    self.remove(&k);
                    Taken::Evicted
                }
                None if moved => return Taken::Evicted,
                None => return Taken::Refused,
            },
        };
        self.map.insert(key, r);
        *self.per_source.entry(ip).or_insert(0) += 1;
        taken
    }

    /// Drops the entries not seen since `now - EXPIRY_NS`; whether any went.
    fn expire(&mut self, now: u64) -> bool {
        let before = self.map.len();
        self.map
            .retain(|_, r| now < r.seen_ns.saturating_add(EXPIRY_NS));
        if self.map.len() == before {
            return false;
        }
        self.per_source.clear();
        for r in self.map.values() {
            *self.per_source.entry(r.addr.ip()).or_insert(0) += 1;
        }
        true
    }
}

pub struct Agent {
    domain: String,
    host: u64,
    /// The discovery port: shared by every agent (multicast), or this agent's alone (the
    /// host's relay under unicast); `None` while another agent is the relay.
    socket: Mutex<Option<Arc<UdpSocket>>>,
    /// Unicast without the discovery port: this agent's own socket (announcements out, relayed
    /// announcements in).
    private: Option<UdpSocket>,
    /// Unicast discovery: the relay role is possible (taken when the port is free).
    unicast: bool,
    /// The relay's registered agents of this host and when each last registered.
    registered: Mutex<HashMap<SocketAddr, u64>>,
    group: SocketAddr,
    config: DiscoveryConfig,
    state: Mutex<State>,
    /// Moves whenever the set of remote endpoints changes.
    generation: AtomicU64,
    wake: AtomicBool,
    stop: AtomicBool,
    /// Why multicast is not in use, if it is not.
    pub multicast_error: Option<String>,
    /// With a domain key: announcements leave sealed, and only sealed ones are heard.
    seal: Option<Mutex<Sealer>>,
    open: Option<Mutex<(Opener, Vec<u8>)>>,
    refused: Counters,
}

pub use crate::refusal::DiscoveryRefusals;

/// The counters behind [`DiscoveryRefusals`].
#[derive(Default)]
struct Counters {
    malformed: AtomicU64,
    not_allowed: AtomicU64,
    over_limit: AtomicU64,
    unauthenticated: AtomicU64,
}

/// The agent of `domain` with this key and these settings in this process, started if needed
/// (the nodes that agree on all three share it). With a domain key, its announcements are
/// sealed with it and only sealed ones are heard.
pub fn agent(domain: &str, key: Option<&DomainKey>, config: &DiscoveryConfig) -> Arc<Agent> {
    type Agents = HashMap<(String, Option<DomainKey>), Vec<(DiscoveryConfig, Weak<Agent>)>>;
    static AGENTS: OnceLock<Mutex<Agents>> = OnceLock::new();
    let mut agents = AGENTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let same = agents.entry((domain.to_owned(), key.cloned())).or_default();
    same.retain(|(_, a)| a.strong_count() > 0);
    if let Some(a) = same
        .iter()
        .find(|(c, _)| c == config)
        .and_then(|(_, a)| a.upgrade())
    {
        return a;
    }
    let mut agent = Agent::with(domain, config.clone());
    if let Some(k) = key {
        agent.set_key(k);
    }
    let a = start(agent);
    same.push((config.clone(), Arc::downgrade(&a)));
    a
}

/// Runs `agent` on its own thread (which ends when the last reference to it goes).
fn start(agent: Agent) -> Arc<Agent> {
    let a = Arc::new(agent);
    let weak = Arc::downgrade(&a);
    let _ = std::thread::Builder::new()
        .name("ferry-discovery".into())
        .spawn(move || run(weak));
    a
}

/// The discovery port every host uses unless `FERRY_DISCOVERY_PORT` says otherwise.
pub const DEFAULT_PORT: u16 = 7650;
/// The multicast group of `FERRY_DISCOVERY=multicast` unless `FERRY_DISCOVERY_GROUP` says
/// otherwise.
pub const DEFAULT_GROUP: Ipv4Addr = Ipv4Addr::new(239, 255, 70, 70);

/// How discovery finds UDP endpoints on other hosts: part of a node's configuration
/// (`NodeConfig::with_discovery`; `NodeConfig::from_env` reads it from the variables each field
/// names). `Default`: discovery reaches no other host.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DiscoveryConfig {
    /// `FERRY_DISCOVERY_PORT`: the port every host's discovery listens on.
    pub port: u16,
    /// `FERRY_PEERS`: the hosts announced to by unicast (`ip[:port],…`).
    pub peers: Vec<SocketAddr>,
    /// `FERRY_DISCOVERY=multicast`: announce to, and listen on, a multicast group.
    pub multicast: bool,
    /// `FERRY_DISCOVERY_GROUP`: the multicast group.
    pub group: Ipv4Addr,
    /// `FERRY_DISCOVERY_IFACE`: the IPv4 address of the multicast interface (unspecified: the
    /// kernel's choice).
    pub interface: Ipv4Addr,
    /// The bounds of discovery's tables.
    pub limits: DiscoveryLimits,
}

/// The bounds of an agent's tables. Over a bound, discovery makes room or refuses, and counts it
/// ([`DiscoveryRefusals::over_limit`]); it never waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DiscoveryLimits {
    /// `FERRY_DISCOVERY_MAX_REMOTES`: endpoints of other hosts remembered per domain (1024).
    pub max_remotes: usize,
    /// `FERRY_DISCOVERY_MAX_PER_SOURCE`: of those, announced from one source address (256).
    pub max_per_source: usize,
    /// `FERRY_DISCOVERY_MAX_AGENTS`: agents of this host the relay forwards to (64).
    pub max_agents: usize,
}

impl Default for DiscoveryLimits {
    fn default() -> Self {
        DiscoveryLimits {
            max_remotes: 1024,
            max_per_source: 256,
            max_agents: 64,
        }
    }
}

impl Default for DiscoveryConfig {
    /// Nothing set: discovery reaches no other host.
    fn default() -> Self {
        DiscoveryConfig {
            port: DEFAULT_PORT,
            peers: Vec::new(),
            multicast: false,
            group: DEFAULT_GROUP,
            interface: Ipv4Addr::UNSPECIFIED,
            limits: DiscoveryLimits::default(),
        }
    }
}

impl DiscoveryConfig {
    /// Whether discovery is configured to reach other hosts at all (`FERRY_PEERS` names one, or
    /// `FERRY_DISCOVERY=multicast`). When it is not, nothing outside this host can learn of an
    /// endpoint, so endpoints may bind to loopback only.
    pub fn reaches_other_hosts(&self) -> bool {
        !self.peers.is_empty() || self.multicast
    }

    /// Whether announcements from `ip` are heard. With `FERRY_PEERS` set, the peer list is the
    /// list of hosts heard, whether multicast is on or not (ferry cannot tell a datagram sent to
    /// the multicast group from one sent to this host, so multicast then reaches only the listed
    /// hosts). Without it, multicast hears any source: nothing authenticates an announcement
    /// yet, so multicast trusts everything that can reach the group.
    pub fn allows_source(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.peers.is_empty() || self.peers.iter().any(|p| p.ip() == ip)
    }
}

/// One `FERRY_PEERS` item: `ip` (on the discovery `port`) or `ip:port`, one host's IPv4 address.
pub(crate) fn parse_peer(item: &str, port: u16) -> Result<SocketAddr, &'static str> {
    let a = item
        .parse::<SocketAddr>()
        .ok()
        .or_else(|| {
            item.parse::<IpAddr>()
                .ok()
                .map(|ip| SocketAddr::new(ip, port))
        })
        .ok_or("it is neither an IP address nor ip:port")?;
    check_peer(a)
}

/// A peer's discovery address as discovery uses it (an IPv4-mapped IPv6 address as IPv4), or
/// why it cannot be one: it must be one host's IPv4 address, with a port.
pub(crate) fn check_peer(a: SocketAddr) -> Result<SocketAddr, &'static str> {
    let ip = match a.ip().to_canonical() {
        IpAddr::V4(v4) => v4,
        IpAddr::V6(_) => return Err("discovery runs over IPv4, so give the peer's IPv4 address"),
    };
    if a.port() == 0 {
        return Err("port 0 is no port; give the peer's discovery port, or none for the default");
    }
    if ip.is_unspecified() || ip.is_multicast() || ip.is_broadcast() {
        return Err("it is not one host's address (for multicast, set FERRY_DISCOVERY=multicast)");
    }
    Ok(SocketAddr::new(ip.into(), a.port()))
}

impl Agent {
    /// An agent of `domain` set up as `config` says.
    fn with(domain: &str, config: DiscoveryConfig) -> Agent {
        let port = config.port;
        let wanted = config.multicast;
        let group_ip = config.group;
        let iface = config.interface;
        let bind = SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port);
        let multicast = Multicast {
            group: group_ip.into(),
            interface: MulticastInterface::V4(iface),
            ttl_or_hops: 1,
            loopback: true,
        };
        let opts = SocketOptions {
            multicast: Some(multicast),
            gso: false,
            gro: false,
            ..SocketOptions::default()
        };
        let attempt = if wanted {
            UdpSocket::bind(bind, &opts)
        } else {
            Err(std::io::Error::other(
                "off (set FERRY_DISCOVERY=multicast to use it)",
            ))
        };
        let (socket, multicast_error, unicast) = match attempt {
            Ok(s) => (Some(s), None, false),
            Err(_) if !wanted && config.peers.is_empty() => (
                None,
                Some("off: neither FERRY_DISCOVERY=multicast nor FERRY_PEERS is set".to_owned()),
                false,
            ),
            // Without multicast, unicast announcements from FERRY_PEERS: the relay holds the
            // port alone (see the module docs).
            Err(e) => (
                bind_alone(port),
                Some(format!("multicast discovery unavailable: {e}")),
                true,
            ),
        };
        // The relay needs no socket of its own (it keeps the port while it lives).
        let private = (unicast && socket.is_none())
            .then(|| {
                UdpSocket::bind(
                    SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0),
                    &plain_options(),
                )
                .ok()
            })
            .flatten();
        Agent::from_parts(domain, config, socket, private, unicast, multicast_error)
    }

    /// An agent with these sockets (none in tests that feed it datagrams by hand).
    fn from_parts(
        domain: &str,
        config: DiscoveryConfig,
        socket: Option<UdpSocket>,
        private: Option<UdpSocket>,
        unicast: bool,
        multicast_error: Option<String>,
    ) -> Agent {
        let group = SocketAddr::new(config.group.into(), config.port);
        Agent {
            domain: domain.to_owned(),
            host: host_id(),
            socket: Mutex::new(socket.map(Arc::new)),
            private,
            unicast,
            registered: Mutex::new(HashMap::new()),
            group,
            config,
            state: Mutex::new(State {
                locals: Vec::new(),
                next_key: 1,
                remotes: Remotes::default(),
            }),
            generation: AtomicU64::new(0),
            wake: AtomicBool::new(true),
            stop: AtomicBool::new(false),
            multicast_error,
            refused: Counters::default(),
            seal: None,
            open: None,
        }
    }

    /// Seals what this agent sends with `key`, and hears only what is sealed with it.
    fn set_key(&mut self, key: &DomainKey) {
        // An agent without its OS random source cannot seal: it then sends nothing.
        self.seal = Sealer::new(key).ok().map(Mutex::new);
        self.open = Opener::new(key).ok().map(|o| Mutex::new((o, Vec::new())));
    }

    /// Opens a sealed datagram and hands the plain one to `then`; counts a refusal otherwise.
    fn unsealed(&self, b: &[u8], then: impl FnOnce(&[u8])) {
        let Some(open) = &self.open else {
            return then(b);
        };
        let mut guard = open.lock().unwrap_or_else(|p| p.into_inner());
        let (opener, plain) = &mut *guard;
        match opener.open(b, plain) {
            Ok(()) => then(plain),
            Err(_) => self.refuse(Refusal::Unauthenticated),
        }
    }

    /// Discovery datagrams this agent refused so far, by reason.
    pub fn refusals(&self) -> DiscoveryRefusals {
        let c = &self.refused;
        DiscoveryRefusals {
            malformed: c.malformed.load(Ordering::Relaxed),
            not_allowed: c.not_allowed.load(Ordering::Relaxed),
            over_limit: c.over_limit.load(Ordering::Relaxed),
            unauthenticated: c.unauthenticated.load(Ordering::Relaxed),
        }
    }

    fn refuse(&self, why: Refusal) {
        let c = &self.refused;
        match why {
            Refusal::Malformed => &c.malformed,
            Refusal::NotAllowed => &c.not_allowed,
            Refusal::OverLimit => &c.over_limit,
            Refusal::Unauthenticated => &c.unauthenticated,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    /// How this agent was set up, including what in the environment it did not understand.
    pub fn config(&self) -> &DiscoveryConfig {
        &self.config
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The discovery port's socket, if this agent has it.
    fn port_socket(&self) -> Option<Arc<UdpSocket>> {
        self.socket
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Unicast: becomes the host's relay if the discovery port is free.
    fn try_take_port(&self) {
        if !self.unicast || self.port_socket().is_some() {
            return;
        }
        if let Some(s) = bind_alone(self.config.port) {
            *self.socket.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(s));
        }
    }

    /// Unicast, not the relay: tells the relay (on this host) where to forward announcements.
    fn register(&self) {
        if let (Some(p), None) = (&self.private, self.port_socket()) {
            let relay = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), self.config.port);
            let _ = p.send_to(relay, &register_datagram());
        }
    }

    /// One datagram that came to the discovery port (to the host's relay, under unicast).
    /// Returns the relay message to forward to the registered agents, if any.
    fn port_in(&self, src: SocketAddr, b: &[u8]) -> Option<Vec<u8>> {
        if self.open.is_some() && crypto::is_sealed(b) {
            return self.sealed_in(src, b);
        }
        let kind = match header(b) {
            Ok(k) => k,
            Err(e) => {
                self.refuse(e.refusal());
                return None;
            }
        };
        match kind {
            // Only agents of this host register, and only with a relay.
            KIND_REGISTER if self.unicast && src.ip().is_loopback() => {
                match decode_message(b) {
                    Ok(_) => self.register_agent(src),
                    Err(e) => self.refuse(e.refusal()),
                }
                None
            }
            // With a domain key, only sealed announcements count.
            KIND_ANNOUNCE if self.open.is_some() => {
                self.refuse(Refusal::Unauthenticated);
                None
            }
            KIND_ANNOUNCE if self.config.allows_source(src.ip()) => {
                match decode_announcement(b) {
                    Ok(a) => self.learn_from(src.ip(), a, b.len()),
                    Err(e) => {
                        self.refuse(e.refusal());
                        return None;
                    }
                }
                self.unicast.then(|| relay_datagram(src, b))
            }
            // Relay messages come from the relay, which this agent is.
            KIND_REGISTER | KIND_ANNOUNCE | KIND_RELAY => {
                self.refuse(Refusal::NotAllowed);
                None
            }
            k => {
                self.refuse(DiscoveryError::Kind(k).refusal());
                None
            }
        }
    }

    /// The relay: `src` (an agent of this host) registers. A new one is refused while
    /// [`DiscoveryLimits::max_agents`] others registered in the last [`EXPIRY_NS`]: those keep
    /// being served (agents of this host cannot be told apart from a local flood).
    fn register_agent(&self, src: SocketAddr) {
        let now = monotonic_ns();
        let mut regs = self.registered.lock().unwrap_or_else(|p| p.into_inner());
        if !regs.contains_key(&src) && regs.len() >= self.config.limits.max_agents {
            regs.retain(|_, seen| now < seen.saturating_add(EXPIRY_NS));
            if regs.len() >= self.config.limits.max_agents {
                drop(regs);
                self.refuse(Refusal::OverLimit);
                return;
            }
        }
        regs.insert(src, now);
    }

    /// The relay: sends `relayed` to every agent of this host registered in the last
    /// [`EXPIRY_NS`].
    fn forward(&self, socket: &UdpSocket, relayed: &[u8]) {
        let now = monotonic_ns();
        let mut regs = self.registered.lock().unwrap_or_else(|p| p.into_inner());
        regs.retain(|_, seen| now < seen.saturating_add(EXPIRY_NS));
        for to in regs.keys() {
            let _ = socket.send_to(*to, relayed);
        }
    }

    /// A sealed announcement at the discovery port (the domain has a key): learned if it opens,
    /// and relayed as it came (the agents it goes to open it themselves).
    fn sealed_in(&self, src: SocketAddr, b: &[u8]) -> Option<Vec<u8>> {
        if !self.config.allows_source(src.ip()) {
            self.refuse(Refusal::NotAllowed);
            return None;
        }
        let mut learned = false;
        self.unsealed(b, |plain| match decode_message(plain) {
            Ok(Message::Announce(a)) => {
                self.learn_from(src.ip(), a, b.len());
                learned = true;
            }
            Ok(_) => self.refuse(Refusal::NotAllowed),
            Err(e) => self.refuse(e.refusal()),
        });
        (learned && self.unicast).then(|| relay_datagram(src, b))
    }

    /// Not the relay: one datagram that came to this agent's own socket. Only this host's
    /// relay (loopback, the discovery port) sends here, relaying announcements from sources the
    /// configuration allows.
    fn private_in(&self, src: SocketAddr, b: &[u8]) {
        let from_relay = src.ip().is_loopback() && src.port() == self.config.port;
        match header(b) {
            Err(e) => self.refuse(e.refusal()),
            Ok(KIND_RELAY) if from_relay && self.open.is_some() => match relay_parts(b) {
                Ok((source, sealed)) if self.config.allows_source(source.ip()) => {
                    self.unsealed(sealed, |plain| match decode_message(plain) {
                        Ok(Message::Announce(a)) => self.learn_from(source.ip(), a, sealed.len()),
                        Ok(_) => self.refuse(Refusal::NotAllowed),
                        Err(e) => self.refuse(e.refusal()),
                    })
                }
                Ok(_) => self.refuse(Refusal::NotAllowed),
                Err(e) => self.refuse(e.refusal()),
            },
            Ok(KIND_RELAY) if from_relay => match decode_message(b) {
                Ok(Message::Relay {
                    source,
                    announcement,
                }) if self.config.allows_source(source.ip()) => {
                    // (The relay's 22-byte header is not what the source sent.)
                    self.learn_from(source.ip(), announcement, b.len().saturating_sub(22))
                }
                Ok(_) => self.refuse(Refusal::NotAllowed),
                Err(e) => self.refuse(e.refusal()),
            },
            Ok(KIND_REGISTER | KIND_ANNOUNCE | KIND_RELAY) => self.refuse(Refusal::NotAllowed),
            Ok(k) => self.refuse(DiscoveryError::Kind(k).refusal()),
        }
    }

    /// Announces an endpoint until the returned key is given to `withdraw`; `max_message` is a
    /// subscriber's largest message (0 for a publisher).
    pub fn announce(
        &self,
        role: Role,
        topic: &str,
        port: u16,
        id: u64,
        reliable: bool,
        max_message: u32,
    ) -> u64 {
        let mut st = self.lock();
        let key = st.next_key;
        st.next_key += 1;
        st.locals.push((
            key,
            Entry {
                role,
                topic: topic.to_owned(),
                port,
                id,
                reliable,
                max_message,
            },
        ));
        // Release pairs with the Acquire swap in `run`: the agent announces at once.
        self.wake.store(true, Ordering::Release);
        key
    }

    pub fn withdraw(&self, key: u64) {
        self.lock().locals.retain(|(k, _)| *k != key);
    }

    /// Subscribers of `topic` on other hosts.
    pub fn remote_subscribers(&self, topic: &str) -> Vec<Remote> {
        self.lock()
            .remotes
            .values()
            .filter(|r| r.role == Role::Subscriber && r.topic == topic)
            .cloned()
            .collect()
    }

    /// Every endpoint heard from other hosts.
    pub fn remotes(&self) -> Vec<Remote> {
        self.lock().remotes.values().cloned().collect()
    }

    pub fn generation(&self) -> u64 {
        // Acquire pairs with the Release increments in `learn_from`/`expire`.
        self.generation.load(Ordering::Acquire)
    }

    fn encode(&self, entries: &[Entry]) -> Vec<u8> {
        encode_announcement(self.host, &self.domain, entries)
    }

    fn send_announcements(&self) {
        let port_socket = self.port_socket();
        let Some(socket) = port_socket.as_deref().or(self.private.as_ref()) else {
            return;
        };
        let locals: Vec<Entry> = self.lock().locals.iter().map(|(_, l)| l.clone()).collect();
        // With a domain key and no way to seal, nothing goes out in the clear.
        if locals.is_empty() || (self.open.is_some() && self.seal.is_none()) {
            return;
        }
        for chunk in self.chunks(&locals) {
            let mut datagram = self.encode(chunk);
            if let Some(seal) = &self.seal {
                let mut sealed = Vec::with_capacity(datagram.len() + crypto::SEAL_OVERHEAD);
                seal.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .seal_into(&datagram, &mut sealed);
                datagram = sealed;
            }
            if !self.unicast && self.multicast_error.is_none() {
                let _ = socket.send_to(self.group, &datagram);
            }
            for p in &self.config.peers {
                let _ = socket.send_to(*p, &datagram);
            }
        }
    }

    /// `entries` split into announcements of at most ~1400 bytes and [`MAX_ENTRIES`] entries
    /// (entries of at most 1200 bytes and one more entry; names are at most 100 bytes).
    fn chunks<'e>(&self, entries: &'e [Entry]) -> Vec<&'e [Entry]> {
        let mut chunks = Vec::new();
        let (mut start, mut size) = (0, 0);
        for (i, e) in entries.iter().enumerate() {
            size += ENTRY_FIXED + e.topic.len();
            if size > 1200 || i + 1 - start == MAX_ENTRIES {
                chunks.push(&entries[start..=i]);
                (start, size) = (i + 1, 0);
            }
        }
        if start < entries.len() {
            chunks.push(&entries[start..]);
        }
        chunks
    }

    /// Takes the entries of an announcement that came from `ip`.
    fn learn_from(&self, ip: IpAddr, a: Announcement, datagram_len: usize) {
        if a.host == self.host || a.domain != self.domain {
            return;
        }
        let share = (datagram_len / a.entries.len().max(1)).max(1) as u64;
        let now = monotonic_ns();
        let limits = self.config.limits;
        let mut st = self.lock();
        let (mut changed, mut over) = (false, false);
        for e in a.entries {
            let r = Remote {
                role: e.role,
                topic: e.topic,
                addr: SocketAddr::new(ip, e.port),
                id: e.id,
                reliable: e.reliable,
                max_message: e.max_message,
                host: a.host,
                heard_bytes: share,
                seen_ns: now,
            };
            match st.remotes.take(r, &limits) {
                Taken::Refreshed => {}
                Taken::Added => changed = true,
                Taken::Evicted => (changed, over) = (true, true),
                Taken::Refused => over = true,
            }
        }
        drop(st);
        if over {
            self.refuse(Refusal::OverLimit);
        }
        if changed {
            // Release pairs with the Acquire load in `generation`.
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    fn expire(&self) {
        let expired = self.lock().remotes.expire(monotonic_ns());
        if expired {
            // Release pairs with the Acquire load in `generation`.
            self.generation.fetch_add(1, Ordering::Release);
        }
    }
}

/// Checks magic and version; returns the kind.
fn header(b: &[u8]) -> Result<u8, DiscoveryError> {
    let mut r = Reader(b);
    if r.u16("header")? != MAGIC {
        return Err(DiscoveryError::NotDiscovery);
    }
    match r.u8("header")? {
        VERSION => r.u8("header"),
        v => Err(DiscoveryError::Version(v)),
    }
}

/// Decodes one discovery datagram, checking every length and value (see the module docs).
/// Pure: no I/O, no state; any input gives a message or an error, never a panic.
pub fn decode_message(bytes: &[u8]) -> Result<Message, DiscoveryError> {
    match header(bytes)? {
        KIND_ANNOUNCE => decode_announcement(bytes).map(Message::Announce),
        KIND_REGISTER => match bytes.len().saturating_sub(HEADER) {
            0 => Ok(Message::Register),
            n => Err(DiscoveryError::Trailing(n)),
        },
        KIND_RELAY => {
            let (source, inner) = relay_parts(bytes)?;
            let announcement = decode_announcement(inner)?;
            Ok(Message::Relay {
                source,
                announcement,
            })
        }
        k => Err(DiscoveryError::Kind(k)),
    }
}

/// The original source of a RELAY message and the announcement it carries, as it came (sealed
/// when the domain has a key).
fn relay_parts(bytes: &[u8]) -> Result<(SocketAddr, &[u8]), DiscoveryError> {
    let mut r = Reader(bytes.get(HEADER..).unwrap_or_default());
    let ip = std::net::Ipv6Addr::from(r.array::<16>("relayed source")?);
    let port = r.u16("relayed source")?;
    let ip = ip.to_canonical();
    let source = SocketAddr::new(ip, port);
    let bad = match ip {
        IpAddr::V4(v4) => v4.is_unspecified() || v4.is_multicast() || v4.is_broadcast(),
        IpAddr::V6(v6) => v6.is_unspecified() || v6.is_multicast(),
    };
    if bad || port == 0 {
        return Err(DiscoveryError::BadSource(source));
    }
    Ok((source, r.0))
}

/// Decodes an announcement (the whole datagram, header included).
fn decode_announcement(bytes: &[u8]) -> Result<Announcement, DiscoveryError> {
    if bytes.len() > MAX_ANNOUNCE {
        return Err(DiscoveryError::TooLong(bytes.len()));
    }
    match header(bytes)? {
        KIND_ANNOUNCE => {}
        k => return Err(DiscoveryError::Kind(k)),
    }
    let mut r = Reader(bytes.get(HEADER..).unwrap_or_default());
    let count = r.u32("entry count")?;
    let host = r.u64("host id")?;
    let domain = r.name("domain", |d| crate::names::validate_domain(d).is_ok())?;
    // The count is checked against the bound and the bytes present before anything else: the
    // loop below runs on the bytes, never on the count.
    if count > MAX_ENTRIES as u32 {
        return Err(DiscoveryError::TooManyEntries(count));
    }
    let count = count as usize;
    if count > r.0.len() / MIN_ENTRY {
        return Err(DiscoveryError::Truncated("entries"));
    }
    let mut entries = Vec::new();
    while !r.0.is_empty() {
        if entries.len() == count {
            return Err(DiscoveryError::Trailing(r.0.len()));
        }
        let role = match r.u8("entry")? {
            1 => Role::Publisher,
            2 => Role::Subscriber,
            x => return Err(DiscoveryError::Role(x)),
        };
        let reliable = r.u8("entry")? & 1 != 0;
        let port = r.u16("entry")?;
        if port == 0 {
            return Err(DiscoveryError::ZeroPort);
        }
        let id = r.u64("entry")?;
        let max_message = r.u32("entry")?;
        let topic = r.name("topic", |t| crate::names::validate_topic(t).is_ok())?;
        entries.push(Entry {
            role,
            topic,
            port,
            id,
            reliable,
            max_message,
        });
    }
    if entries.len() != count {
        return Err(DiscoveryError::Truncated("entries"));
    }
    Ok(Announcement {
        host,
        domain,
        entries,
    })
}

/// Reads little-endian fields off the front of a datagram's bytes.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DiscoveryError> {
        let (head, rest) = self
            .0
            .split_at_checked(n)
            .ok_or(DiscoveryError::Truncated(what))?;
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DiscoveryError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, DiscoveryError> {
        Ok(self.array::<1>(what)?[0])
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, DiscoveryError> {
        self.array(what).map(u16::from_le_bytes)
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, DiscoveryError> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, DiscoveryError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A name: u16 length (at most [`MAX_NAME`]), then UTF-8 that `valid` accepts.
    fn name(
        &mut self,
        what: &'static str,
        valid: impl Fn(&str) -> bool,
    ) -> Result<String, DiscoveryError> {
        let len = usize::from(self.u16(what)?);
        if len > MAX_NAME {
            return Err(DiscoveryError::NameTooLong { what, len });
        }
        match std::str::from_utf8(self.take(len, what)?) {
            Ok(name) if valid(name) => Ok(name.to_owned()),
            _ => Err(DiscoveryError::BadName(what)),
        }
    }
}

impl Message {
    /// The datagram of this message. Its names must be valid ferry names and an
    /// announcement must hold at most [`MAX_ENTRIES`] entries, or it will not decode.
    #[cfg(any(test, feature = "internals"))]
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Message::Announce(a) => encode_announcement(a.host, &a.domain, &a.entries),
            Message::Register => register_datagram().to_vec(),
            Message::Relay {
                source,
                announcement: a,
            } => relay_datagram(*source, &encode_announcement(a.host, &a.domain, &a.entries)),
        }
    }
}

fn register_datagram() -> [u8; HEADER] {
    let m = MAGIC.to_le_bytes();
    [m[0], m[1], VERSION, KIND_REGISTER]
}

/// The announcement of `entries` (at most [`MAX_ENTRIES`], with valid names).
fn encode_announcement(host: u64, domain: &str, entries: &[Entry]) -> Vec<u8> {
    let mut b = Vec::with_capacity(256);
    b.extend_from_slice(&MAGIC.to_le_bytes());
    b.push(VERSION);
    b.push(KIND_ANNOUNCE);
    b.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    b.extend_from_slice(&host.to_le_bytes());
    b.extend_from_slice(&(domain.len() as u16).to_le_bytes());
    b.extend_from_slice(domain.as_bytes());
    for e in entries {
        b.push(match e.role {
            Role::Publisher => 1,
            Role::Subscriber => 2,
        });
        b.push(e.reliable as u8);
        b.extend_from_slice(&e.port.to_le_bytes());
        b.extend_from_slice(&e.id.to_le_bytes());
        b.extend_from_slice(&e.max_message.to_le_bytes());
        b.extend_from_slice(&(e.topic.len() as u16).to_le_bytes());
        b.extend_from_slice(e.topic.as_bytes());
    }
    b
}

/// The relay's copy of `announcement` (its datagram), which came from `src`.
fn relay_datagram(src: SocketAddr, announcement: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(RELAY_HEADER + announcement.len());
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.push(VERSION);
    out.push(KIND_RELAY);
    let ip = match src.ip() {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    out.extend_from_slice(&ip.octets());
    out.extend_from_slice(&src.port().to_le_bytes());
    out.extend_from_slice(announcement);
    out
}

fn plain_options() -> SocketOptions {
    SocketOptions {
        gso: false,
        gro: false,
        ..SocketOptions::default()
    }
}

/// The discovery port, bound by this socket alone (no SO_REUSEPORT): `None` if another agent
/// of this host has it.
fn bind_alone(port: u16) -> Option<UdpSocket> {
    UdpSocket::bind(
        SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port),
        &plain_options(),
    )
    .ok()
}

/// The agent's thread: announce every period (or when woken), listen in between.
fn run(agent: Weak<Agent>) {
    let mut batch = RecvBatch::new(16, MAX_DATAGRAM);
    let mut next = Instant::now();
    loop {
        let Some(a) = agent.upgrade() else { return };
        // Acquire pairs with the Release store in `Agent::drop`.
        if a.stop.load(Ordering::Acquire) {
            return;
        }
        // Acquire pairs with the Release store in `announce`.
        if a.wake.swap(false, Ordering::Acquire) || Instant::now() >= next {
            a.try_take_port();
            a.register();
            a.send_announcements();
            a.expire();
            next = Instant::now() + PERIOD;
        }
        let wait = Some(Duration::from_millis(50));
        if let Some(socket) = a.port_socket() {
            let got = socket.recv_batch(&mut batch, wait).unwrap_or(0);
            for (src, bytes) in batch.iter().take(got) {
                if let Some(relayed) = a.port_in(src, bytes) {
                    a.forward(&socket, &relayed);
                }
            }
        } else if let Some(p) = &a.private {
            let got = p.recv_batch(&mut batch, wait).unwrap_or(0);
            for (src, bytes) in batch.iter().take(got) {
                a.private_in(src, bytes);
            }
        } else {
            drop(a);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // Release pairs with the Acquire load in `run`.
        self.stop.store(true, Ordering::Release);
    }
}

/// The discovery settings the variables `var` gives (`None`: unset or empty); what cannot be
/// understood is described in `problems`, and its setting left at the default.
pub(crate) fn config_from_vars(
    var: &dyn Fn(&str) -> Option<String>,
    problems: &mut Vec<String>,
) -> DiscoveryConfig {
    let mut c = DiscoveryConfig::default();
    if let Some(v) = var("FERRY_DISCOVERY_PORT") {
        match v.parse::<u16>() {
            Ok(p) if p != 0 => c.port = p,
            _ => problems.push(format!(
                "FERRY_DISCOVERY_PORT='{v}' is not a port number (1 to 65535); set it to the \
                 port every host's discovery uses, or unset it for {DEFAULT_PORT}"
            )),
        }
    }
    match var("FERRY_DISCOVERY").as_deref() {
        None => {}
        Some("multicast") => c.multicast = true,
        Some(v) => problems.push(format!(
            "FERRY_DISCOVERY='{v}' is not understood; set it to multicast to find other hosts \
             by multicast, or unset it"
        )),
    }
    if let Some(v) = var("FERRY_DISCOVERY_GROUP") {
        match v.parse::<Ipv4Addr>() {
            Ok(g) if g.is_multicast() => c.group = g,
            _ => problems.push(format!(
                "FERRY_DISCOVERY_GROUP='{v}' is not an IPv4 multicast address; give an address \
                 of 224.0.0.0/4 (239.0.0.0/8 stays within your organisation), or unset it for \
                 {DEFAULT_GROUP}"
            )),
        }
    }
    if let Some(v) = var("FERRY_DISCOVERY_IFACE") {
        match v.parse::<Ipv4Addr>() {
            Ok(i) => c.interface = i,
            Err(_) => problems.push(format!(
                "FERRY_DISCOVERY_IFACE='{v}' is not an IPv4 address; give the IPv4 address of \
                 the interface multicast should use, or unset it to let the kernel pick"
            )),
        }
    }
    let defaults = DiscoveryLimits::default();
    for (name, limit, default) in [
        (
            "FERRY_DISCOVERY_MAX_REMOTES",
            &mut c.limits.max_remotes,
            defaults.max_remotes,
        ),
        (
            "FERRY_DISCOVERY_MAX_PER_SOURCE",
            &mut c.limits.max_per_source,
            defaults.max_per_source,
        ),
        (
            "FERRY_DISCOVERY_MAX_AGENTS",
            &mut c.limits.max_agents,
            defaults.max_agents,
        ),
    ] {
        if let Some(v) = var(name) {
            match v.parse::<usize>() {
                Ok(n) if n > 0 => *limit = n,
                _ => problems.push(format!(
                    "{name}='{v}' is not a positive whole number; set it to the most entries to \
                     keep, or unset it for {default}"
                )),
            }
        }
    }
    if let Some(v) = var("FERRY_PEERS") {
        for item in v.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            match parse_peer(item, c.port) {
                Ok(a) if !c.peers.contains(&a) => c.peers.push(a),
                Ok(_) => {}
                Err(why) => problems.push(format!(
                    "FERRY_PEERS: '{item}': {why}; write FERRY_PEERS as ip[:port],… (for \
                     example 10.0.0.2,10.0.0.3:7650)"
                )),
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A configuration from `vars` alone (the environment is not read; `crate::config` tests
    /// the parsing).
    fn config(vars: &[(&str, &str)]) -> DiscoveryConfig {
        let mut problems = Vec::new();
        let c = config_from_vars(
            &|name| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            },
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        c
    }

    fn entry(role: Role, topic: &str, port: u16, id: u64) -> Entry {
        Entry {
            role,
            topic: topic.into(),
            port,
            id,
            reliable: role == Role::Subscriber,
            max_message: if role == Role::Subscriber { 1 << 20 } else { 0 },
        }
    }

    /// An announcement's bytes with every field as given, valid or not.
    fn raw_announcement(count: u32, domain: &[u8], entries: &[(u8, u16, &[u8])]) -> Vec<u8> {
        let mut b = vec![0x46, 0x44, VERSION, KIND_ANNOUNCE];
        b.extend_from_slice(&count.to_le_bytes());
        b.extend_from_slice(&7u64.to_le_bytes());
        b.extend_from_slice(&(domain.len() as u16).to_le_bytes());
        b.extend_from_slice(domain);
        for (role, port, topic) in entries {
            b.extend_from_slice(&[*role, 1]);
            b.extend_from_slice(&port.to_le_bytes());
            b.extend_from_slice(&9u64.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(&(topic.len() as u16).to_le_bytes());
            b.extend_from_slice(topic);
        }
        b
    }

    /// What every decoded message must respect.
    fn assert_within_bounds(m: &Message) {
        let a = match m {
            Message::Register => return,
            Message::Announce(a) => a,
            Message::Relay {
                source,
                announcement,
            } => {
                assert_ne!(source.port(), 0);
                assert!(!source.ip().is_unspecified() && !source.ip().is_multicast());
                assert_ne!(source.ip(), IpAddr::V4(Ipv4Addr::BROADCAST));
                announcement
            }
        };
        assert!(crate::names::validate_domain(&a.domain).is_ok());
        assert!(a.entries.len() <= MAX_ENTRIES);
        for e in &a.entries {
            assert_ne!(e.port, 0);
            assert!(!e.topic.is_empty() && e.topic.len() <= MAX_NAME);
            assert!(crate::names::validate_topic(&e.topic).is_ok());
        }
    }

    fn arb_entry() -> impl Strategy<Value = Entry> {
        (
            any::<bool>(),
            "[A-Za-z0-9_./-]{1,40}",
            1u16..,
            any::<u64>(),
            any::<bool>(),
            any::<u32>(),
        )
            .prop_map(
                |(publisher, topic, port, id, reliable, max_message)| Entry {
                    role: if publisher {
                        Role::Publisher
                    } else {
                        Role::Subscriber
                    },
                    topic,
                    port,
                    id,
                    reliable,
                    max_message,
                },
            )
    }

    /// A valid message: an announcement (of at most 20 entries of at most 54 bytes, so within
    /// every bound), a relay of one, or a registration.
    fn arb_message() -> impl Strategy<Value = Message> {
        let announcement = || {
            (
                any::<u64>(),
                "[A-Za-z0-9_-]{1,32}",
                proptest::collection::vec(arb_entry(), 0..20),
            )
                .prop_map(|(host, domain, entries)| Announcement {
                    host,
                    domain,
                    entries,
                })
        };
        prop_oneof![
            announcement().prop_map(Message::Announce),
            (any::<[u8; 4]>(), 1u16.., announcement()).prop_map(|(ip, port, announcement)| {
                let ip = Ipv4Addr::from(ip);
                let ip = if ip.is_unspecified() || ip.is_multicast() || ip.is_broadcast() {
                    Ipv4Addr::new(10, 0, 0, 2)
                } else {
                    ip
                };
                Message::Relay {
                    source: SocketAddr::new(ip.into(), port),
                    announcement,
                }
            }),
            Just(Message::Register),
        ]
    }

    /// Changes `b` by `op`: overwrite a byte, a u16 or a u32 anywhere; cut; insert a byte; or
    /// overwrite the entry count or the domain length (relative to the announcement's start).
    fn mutate(b: &mut Vec<u8>, (op, at, value): (u8, usize, u32), base: usize) {
        let len = b.len().max(1);
        let put = |b: &mut Vec<u8>, at: usize, bytes: &[u8]| {
            for (i, x) in bytes.iter().enumerate() {
                if let Some(slot) = b.get_mut(at + i) {
                    *slot = *x;
                }
            }
        };
        match op % 7 {
            0 => put(b, at % len, &[value as u8]),
            1 => put(b, at % len, &(value as u16).to_le_bytes()),
            2 => put(b, at % len, &value.to_le_bytes()),
            3 => b.truncate(at % (b.len() + 1)),
            4 => b.insert(at % (b.len() + 1), value as u8),
            5 => put(b, base + 4, &value.to_le_bytes()),
            _ => put(b, base + 16, &(value as u16).to_le_bytes()),
        }
    }

    /// Arbitrary bytes (0..600), bytes after a valid header, and valid messages mutated.
    fn arb_datagram() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..600),
            (0u8..5, proptest::collection::vec(any::<u8>(), 0..600)).prop_map(|(kind, tail)| {
                let mut b = vec![0x46, 0x44, VERSION, kind];
                b.extend_from_slice(&tail);
                b
            }),
            (
                arb_message(),
                proptest::collection::vec((any::<u8>(), any::<usize>(), any::<u32>()), 1..6)
            )
                .prop_map(|(m, ops)| {
                    let base = if matches!(m, Message::Relay { .. }) {
                        RELAY_HEADER
                    } else {
                        0
                    };
                    let mut b = m.encode();
                    for op in ops {
                        mutate(&mut b, op, base);
                    }
                    b
                }),
        ]
    }

    proptest! {
        /// Any datagram at all: decoding returns a message or an error, never panics (tests run
        /// with overflow checks), and whatever it returns respects every bound.
        #[test]
        fn decode_never_panics(bytes in arb_datagram()) {
            if let Ok(m) = decode_message(&bytes) {
                assert_within_bounds(&m);
                prop_assert_eq!(decode_message(&m.encode()), Ok(m));
            }
        }

        /// Every valid message decodes to itself.
        #[test]
        fn valid_messages_round_trip(m in arb_message()) {
            prop_assert_eq!(decode_message(&m.encode()), Ok(m));
        }
    }

    #[test]
    fn the_fuzzers_seeds_are_valid_messages() {
        // Fuzzing starts from these: they must speak today's version, or it explores refusals.
        let seeds: [&[u8]; 5] = [
            include_bytes!("../../../../fuzz/corpus/discovery/seed-announce"),
            include_bytes!("../../../../fuzz/corpus/discovery/seed-announce-empty"),
            include_bytes!("../../../../fuzz/corpus/discovery/seed-register"),
            include_bytes!("../../../../fuzz/corpus/discovery/seed-relay-v4"),
            include_bytes!("../../../../fuzz/corpus/discovery/seed-relay-v6"),
        ];
        for (i, seed) in seeds.iter().enumerate() {
            assert!(
                decode_message(seed).is_ok(),
                "seed {i}: {:?}",
                decode_message(seed)
            );
        }
    }

    #[test]
    fn announcements_round_trip_and_garbage_is_refused() {
        let a = Agent::with("dtest", DiscoveryConfig::default());
        let entries = vec![
            entry(Role::Publisher, "a/b", 9, 1),
            entry(Role::Subscriber, "c", 10, 2),
        ];
        let b = a.encode(&entries);
        let want = Announcement {
            host: a.host,
            domain: "dtest".into(),
            entries,
        };
        assert_eq!(decode_message(&b), Ok(Message::Announce(want.clone())));
        for cut in 0..b.len() {
            assert!(decode_message(&b[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = b.clone();
        long.push(0);
        assert_eq!(decode_message(&long), Err(DiscoveryError::Trailing(1)));
        let count = |n: u32| {
            let mut evil = b.clone();
            evil[4..8].copy_from_slice(&n.to_le_bytes());
            decode_message(&evil)
        };
        assert_eq!(
            count(u32::MAX),
            Err(DiscoveryError::TooManyEntries(u32::MAX))
        );
        assert_eq!(
            count(MAX_ENTRIES as u32 + 1).unwrap_err().refusal(),
            Refusal::OverLimit
        );
        assert_eq!(
            count(3),
            Err(DiscoveryError::Truncated("entries")),
            "a count the bytes cannot hold is refused before any entry is read"
        );
        assert_eq!(count(1), Err(DiscoveryError::Trailing(19)));
        let mut lying = b.clone();
        lying[4..8].copy_from_slice(&3u32.to_le_bytes());
        let second = b.len() - ENTRY_FIXED - 1;
        lying[second] = 9;
        assert_eq!(
            decode_message(&lying),
            Err(DiscoveryError::Truncated("entries")),
            "the count is checked before the first entry is read"
        );
        let relay = relay_datagram("10.0.0.2:7650".parse().unwrap(), &b);
        assert_eq!(
            decode_message(&relay),
            Ok(Message::Relay {
                source: "10.0.0.2:7650".parse().unwrap(),
                announcement: want,
            })
        );
        assert_eq!(decode_message(&register_datagram()), Ok(Message::Register));
        assert_eq!(
            decode_message(&[0x46, 0x44, VERSION, KIND_REGISTER, 0]),
            Err(DiscoveryError::Trailing(1))
        );
        assert_eq!(decode_message(b"FERRY"), Err(DiscoveryError::NotDiscovery));
        assert_eq!(
            decode_message(&[0x46, 0x44, 1, 1]),
            Err(DiscoveryError::Version(1)),
            "the version before subscribers said their limit"
        );
        assert_eq!(
            decode_message(&[0x46, 0x44, 3, 1]),
            Err(DiscoveryError::Version(3))
        );
        assert_eq!(
            decode_message(&[0x46, 0x44, VERSION, 9]),
            Err(DiscoveryError::Kind(9))
        );
    }

    #[test]
    fn names_ports_roles_and_sizes_are_checked() {
        let ok = raw_announcement(1, b"d", &[(2, 4000, b"t")]);
        assert!(decode_message(&ok).is_ok());
        let cases: Vec<(Vec<u8>, DiscoveryError)> = vec![
            (
                raw_announcement(1, b"d", &[(2, 4000, b"\xff\xfe")]),
                DiscoveryError::BadName("topic"),
            ),
            (
                raw_announcement(1, b"d", &[(2, 4000, b"\x1b[2J")]),
                DiscoveryError::BadName("topic"),
            ),
            (
                raw_announcement(1, b"d", &[(2, 4000, b"")]),
                DiscoveryError::Truncated("entries"),
            ),
            (
                raw_announcement(1, b"d", &[(2, 4000, &[b'a'; MAX_NAME + 1])]),
                DiscoveryError::NameTooLong {
                    what: "topic",
                    len: MAX_NAME + 1,
                },
            ),
            (
                raw_announcement(0, &[b'd'; MAX_NAME + 1], &[]),
                DiscoveryError::NameTooLong {
                    what: "domain",
                    len: MAX_NAME + 1,
                },
            ),
            (
                raw_announcement(0, b"a.b", &[]),
                DiscoveryError::BadName("domain"),
            ),
            (
                raw_announcement(1, b"d", &[(2, 0, b"t")]),
                DiscoveryError::ZeroPort,
            ),
            (
                raw_announcement(1, b"d", &[(3, 4000, b"t")]),
                DiscoveryError::Role(3),
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(decode_message(&bytes), Err(want.clone()));
            assert_eq!(want.refusal(), Refusal::Malformed);
        }
        // A topic of length 0 among longer ones: refused as a name.
        let zero = raw_announcement(2, b"d", &[(2, 4000, b""), (2, 4001, b"long-topic")]);
        assert_eq!(decode_message(&zero), Err(DiscoveryError::BadName("topic")));
        // Longer than the relay can forward whole: refused as over the limit.
        let topic = [b'a'; 100];
        let many: Vec<(u8, u16, &[u8])> = (0..18).map(|_| (2u8, 4000u16, &topic[..])).collect();
        let big = raw_announcement(18, b"d", &many);
        assert!(big.len() > MAX_ANNOUNCE);
        assert_eq!(
            decode_message(&big),
            Err(DiscoveryError::TooLong(big.len()))
        );
        assert_eq!(DiscoveryError::TooLong(0).refusal(), Refusal::OverLimit);
        // A relayed source no host sends from.
        for src in [
            "0.0.0.0:1",
            "10.0.0.2:0",
            "255.255.255.255:1",
            "239.1.1.1:1",
        ] {
            let src: SocketAddr = src.parse().unwrap();
            assert_eq!(
                decode_message(&relay_datagram(src, &ok)),
                Err(DiscoveryError::BadSource(src))
            );
        }
    }

    #[test]
    fn the_sender_splits_announcements_within_the_bounds() {
        let a = Agent::with("dsplit", DiscoveryConfig::default());
        // Many of the smallest entries: the entry cap splits them; many of the largest: the size.
        for topic in ["t".to_owned(), "t".repeat(100)] {
            let entries: Vec<Entry> = (0..500)
                .map(|i| entry(Role::Subscriber, &topic, 1000, i))
                .collect();
            let mut decoded = 0;
            for chunk in a.chunks(&entries) {
                let b = a.encode(chunk);
                assert!(b.len() <= MAX_ANNOUNCE, "{} bytes", b.len());
                let Ok(Message::Announce(got)) = decode_message(&b) else {
                    panic!("a datagram of ours does not decode");
                };
                decoded += got.entries.len();
            }
            assert_eq!(decoded, entries.len());
        }
    }

    /// An agent without sockets, fed datagrams by hand.
    fn detached(domain: &str, config: DiscoveryConfig, unicast: bool) -> Agent {
        Agent::from_parts(domain, config, None, None, unicast, None)
    }

    /// An announcement of `entries` by another host.
    fn from_elsewhere(domain: &str, entries: &[Entry]) -> Vec<u8> {
        encode_announcement(host_id() ^ 1, domain, entries)
    }

    fn addr(a: &str) -> SocketAddr {
        a.parse().unwrap()
    }

    fn refusals(malformed: u64, not_allowed: u64, over_limit: u64) -> DiscoveryRefusals {
        DiscoveryRefusals {
            malformed,
            not_allowed,
            over_limit,
            unauthenticated: 0,
        }
    }

    #[test]
    fn with_peers_only_their_addresses_are_heard() {
        let a = detached("dallow", config(&[("FERRY_PEERS", "10.0.0.2")]), true);
        let b = from_elsewhere("dallow", &[entry(Role::Subscriber, "t", 4000, 1)]);
        assert_eq!(a.port_in(addr("10.0.0.3:7650"), &b), None, "not relayed");
        assert!(
            a.remotes().is_empty(),
            "an announcement from outside FERRY_PEERS is not learned"
        );
        assert_eq!(a.refusals(), refusals(0, 1, 0));
        // A peer's, from any port of its address (IPv4-mapped too), is learned and relayed.
        let relayed = a.port_in(addr("10.0.0.2:41000"), &b).expect("relayed");
        let Ok(Message::Relay { source, .. }) = decode_message(&relayed) else {
            panic!("not a relay message");
        };
        assert_eq!(source, addr("10.0.0.2:41000"));
        assert_eq!(a.remote_subscribers("t")[0].addr, addr("10.0.0.2:4000"));
        assert!(a.port_in(addr("[::ffff:10.0.0.2]:41000"), &b).is_some());
        assert_eq!(a.refusals().total(), 1);
    }

    #[test]
    #[cfg(feature = "domain-key")]
    fn with_a_domain_key_only_sealed_announcements_are_heard_and_relayed_sealed() {
        use crate::udp::crypto::{DomainKey, Sealer};
        let key = DomainKey::from_bytes([7; 32]);
        let c = config(&[("FERRY_PEERS", "10.0.0.2")]);
        let mut a = detached("dkey", c.clone(), true);
        a.set_key(&key);
        let plain = from_elsewhere("dkey", &[entry(Role::Subscriber, "t", 4000, 1)]);
        let seal = |k: &DomainKey, b: &[u8]| {
            let mut out = Vec::new();
            Sealer::new(k).unwrap().seal_into(b, &mut out);
            out
        };
        // In the clear, or sealed with another key: refused, nothing learned.
        assert_eq!(a.port_in(addr("10.0.0.2:41000"), &plain), None);
        let other = seal(&DomainKey::from_bytes([8; 32]), &plain);
        assert_eq!(a.port_in(addr("10.0.0.2:41000"), &other), None);
        assert!(a.remotes().is_empty());
        assert_eq!(a.refusals().unauthenticated, 2);
        // Sealed with the domain key: learned, and relayed as it came.
        let sealed = seal(&key, &plain);
        let relayed = a.port_in(addr("10.0.0.2:41000"), &sealed).expect("relayed");
        assert_eq!(a.remote_subscribers("t")[0].addr, addr("10.0.0.2:4000"));
        assert_eq!(&relayed[RELAY_HEADER..], &sealed[..]);
        // A replay of it is refused.
        assert_eq!(a.port_in(addr("10.0.0.2:41000"), &sealed), None);
        assert_eq!(a.refusals().unauthenticated, 3);
        // Another agent of the host opens the relayed copy itself.
        let mut b = detached("dkey", c.clone(), true);
        b.set_key(&key);
        b.private_in(SocketAddr::new(addr("127.0.0.1:1").ip(), c.port), &relayed);
        assert_eq!(b.remote_subscribers("t").len(), 1);
        // A relayed announcement in the clear is refused.
        let clear = relay_datagram(addr("10.0.0.2:41000"), &plain);
        let mut d = detached("dkey", c.clone(), true);
        d.set_key(&key);
        d.private_in(SocketAddr::new(addr("127.0.0.1:1").ip(), c.port), &clear);
        assert!(d.remotes().is_empty());
        assert_eq!(d.refusals().unauthenticated, 1);
    }

    #[test]
    fn relay_messages_are_taken_only_from_this_hosts_relay() {
        let c = config(&[("FERRY_PEERS", "10.0.0.2")]);
        let a = detached("drel", c.clone(), true);
        let ann = from_elsewhere("drel", &[entry(Role::Subscriber, "t", 4000, 1)]);
        let good = relay_datagram(addr("10.0.0.2:41000"), &ann);
        // Not from the relay: another port of loopback, or a peer at the discovery port.
        a.private_in(addr("127.0.0.1:7651"), &good);
        a.private_in(SocketAddr::new(addr("10.0.0.2:1").ip(), c.port), &good);
        // From the relay, but relaying a source outside FERRY_PEERS.
        let forged = relay_datagram(addr("10.0.0.3:41000"), &ann);
        a.private_in(addr("127.0.0.1:7650"), &forged);
        // An announcement straight to an agent's own port (peers announce to the relay).
        a.private_in(addr("10.0.0.2:7650"), &ann);
        assert!(a.remotes().is_empty());
        assert_eq!(a.refusals(), refusals(0, 4, 0));
        a.private_in(addr("127.0.0.1:7650"), &good);
        assert_eq!(a.remote_subscribers("t")[0].addr, addr("10.0.0.2:4000"));
        assert_eq!(a.refusals(), refusals(0, 4, 0));
    }

    #[test]
    fn registrations_are_taken_only_from_this_host_and_only_by_a_relay() {
        let a = detached("dreg", config(&[("FERRY_PEERS", "10.0.0.2")]), true);
        let registered = |a: &Agent| {
            let regs = a.registered.lock().unwrap();
            regs.keys().copied().collect::<Vec<_>>()
        };
        assert_eq!(a.port_in(addr("10.0.0.2:5000"), &register_datagram()), None);
        assert!(registered(&a).is_empty(), "another host cannot register");
        a.port_in(addr("127.0.0.1:5000"), &register_datagram());
        assert_eq!(registered(&a), [addr("127.0.0.1:5000")]);
        // Relay messages come from the relay: one sent to the discovery port is refused.
        let ann = from_elsewhere("dreg", &[entry(Role::Subscriber, "t", 4000, 1)]);
        a.port_in(
            addr("127.0.0.1:7650"),
            &relay_datagram(addr("10.0.0.2:1"), &ann),
        );
        assert!(a.remotes().is_empty());
        assert_eq!(a.refusals(), refusals(0, 2, 0));
        // Under multicast nobody relays, so nobody registers.
        let m = detached("dreg", config(&[("FERRY_DISCOVERY", "multicast")]), false);
        m.port_in(addr("127.0.0.1:5000"), &register_datagram());
        assert!(registered(&m).is_empty());
        assert_eq!(m.refusals(), refusals(0, 1, 0));
    }

    #[test]
    fn multicast_alone_hears_any_source_and_with_peers_keeps_their_allowlist() {
        let b = from_elsewhere("dmc", &[entry(Role::Subscriber, "t", 4000, 1)]);
        let open = detached("dmc", config(&[("FERRY_DISCOVERY", "multicast")]), false);
        assert_eq!(
            open.port_in(addr("192.0.2.7:7650"), &b),
            None,
            "multicast relays nothing"
        );
        assert_eq!(open.remote_subscribers("t")[0].addr, addr("192.0.2.7:4000"));
        let both = detached(
            "dmc",
            config(&[
                ("FERRY_DISCOVERY", "multicast"),
                ("FERRY_PEERS", "10.0.0.2"),
            ]),
            false,
        );
        both.port_in(addr("192.0.2.7:7650"), &b);
        assert!(both.remotes().is_empty());
        assert_eq!(both.refusals(), refusals(0, 1, 0));
        both.port_in(addr("10.0.0.2:7650"), &b);
        assert_eq!(both.remote_subscribers("t")[0].addr, addr("10.0.0.2:4000"));
    }

    #[test]
    fn refusals_are_counted_by_reason() {
        let a = detached("dcount", config(&[("FERRY_PEERS", "10.0.0.2")]), true);
        let peer = addr("10.0.0.2:7650");
        let b = from_elsewhere("dcount", &[entry(Role::Subscriber, "t", 4000, 1)]);
        assert_eq!(a.refusals(), DiscoveryRefusals::default());
        a.port_in(peer, b"junk");
        a.port_in(peer, &b[..b.len() - 1]);
        a.private_in(addr("127.0.0.1:7650"), b"junk");
        let mut over = b.clone();
        over[4..8].copy_from_slice(&(MAX_ENTRIES as u32 + 1).to_le_bytes());
        assert_eq!(
            a.port_in(peer, &over),
            None,
            "what is refused is not relayed"
        );
        a.port_in(addr("10.0.0.3:7650"), &b);
        assert!(a.remotes().is_empty());
        let r = a.refusals();
        assert_eq!(r, refusals(3, 1, 1));
        assert_eq!(r.total(), 5);
    }

    fn announce_from(a: &Agent, src: &str, host: u64, ids: std::ops::Range<u64>) {
        let entries: Vec<Entry> = ids
            .map(|id| entry(Role::Subscriber, "t", 4000, id))
            .collect();
        for chunk in a.chunks(&entries) {
            a.port_in(addr(src), &encode_announcement(host, &a.domain, chunk));
        }
    }

    fn held_by(a: &Agent, ip: &str) -> usize {
        let ip: IpAddr = ip.parse().unwrap();
        a.remotes().iter().filter(|r| r.addr.ip() == ip).count()
    }

    #[test]
    fn one_source_cannot_crowd_out_the_others() {
        let a = detached(
            "dcrowd",
            config(&[("FERRY_PEERS", "10.0.0.2,10.0.0.3")]),
            true,
        );
        let limits = DiscoveryLimits::default();
        announce_from(&a, "10.0.0.2:7650", 1, 0..10);
        // A forger with a peer's address: 2000 endpoints under many host ids.
        for round in 0..20 {
            announce_from(&a, "10.0.0.3:7650", 100 + round, 0..100);
        }
        assert_eq!(
            held_by(&a, "10.0.0.2"),
            10,
            "the genuine peer keeps its entries"
        );
        assert_eq!(held_by(&a, "10.0.0.3"), limits.max_per_source);
        assert!(
            a.remotes().iter().any(|r| r.host == 119),
            "the newest entries are kept, the oldest made room"
        );
        assert!(a.refusals().over_limit > 0);
        assert_eq!(a.refusals().not_allowed + a.refusals().malformed, 0);
    }

    #[test]
    fn a_full_table_still_takes_a_new_host() {
        // Multicast hears anyone: a forger from 8 addresses fills the whole table.
        let a = detached("dfull", config(&[("FERRY_DISCOVERY", "multicast")]), false);
        let limits = DiscoveryLimits::default();
        let flood = |a: &Agent, base: u64| {
            for i in 0..8u64 {
                announce_from(a, &format!("192.0.2.{}:7650", 10 + i), base + i, 0..200);
            }
        };
        flood(&a, 100);
        assert_eq!(a.remotes().len(), limits.max_remotes);
        announce_from(&a, "10.0.0.2:7650", 1, 0..10);
        assert_eq!(held_by(&a, "10.0.0.2"), 10, "a newcomer gets in");
        flood(&a, 200);
        assert_eq!(
            held_by(&a, "10.0.0.2"),
            10,
            "and stays while the flood goes on"
        );
        assert_eq!(a.remotes().len(), limits.max_remotes);
        assert!(a.refusals().over_limit > 0);
    }

    #[test]
    fn registered_agents_are_bounded() {
        let c = config(&[
            ("FERRY_PEERS", "10.0.0.2"),
            ("FERRY_DISCOVERY_MAX_AGENTS", "2"),
        ]);
        let a = detached("dagents", c, true);
        let count = |a: &Agent| a.registered.lock().unwrap().len();
        for port in [5000, 5001, 5002] {
            a.port_in(
                SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port),
                &register_datagram(),
            );
        }
        assert_eq!(count(&a), 2);
        assert_eq!(a.refusals(), refusals(0, 0, 1));
        // Those registered renew; once one is gone, a newcomer gets its place.
        a.port_in(addr("127.0.0.1:5000"), &register_datagram());
        assert_eq!(a.refusals(), refusals(0, 0, 1));
        *a.registered
            .lock()
            .unwrap()
            .get_mut(&addr("127.0.0.1:5001"))
            .unwrap() = 0;
        a.port_in(addr("127.0.0.1:5002"), &register_datagram());
        let regs = a.registered.lock().unwrap();
        assert!(regs.contains_key(&addr("127.0.0.1:5002")) && regs.len() == 2);
    }

    proptest! {
        /// Whatever is announced from wherever: the table stays within its bounds, and its
        /// per-source counts match its entries.
        #[test]
        fn the_remote_table_keeps_its_bounds(
            max_remotes in 1usize..40,
            max_per_source in 1usize..20,
            takes in proptest::collection::vec(
                (0u8..6, 0u64..4, any::<bool>(), 0u64..300, any::<bool>(), 1u16..4),
                0..300,
            ),
        ) {
            let limits = DiscoveryLimits { max_remotes, max_per_source, max_agents: 1 };
            let mut t = Remotes::default();
            for (now, (src, host, publisher, id, long, port)) in takes.into_iter().enumerate() {
                let r = Remote {
                    role: if publisher { Role::Publisher } else { Role::Subscriber },
                    topic: if long { "a/b".into() } else { "t".into() },
                    addr: SocketAddr::new(Ipv4Addr::new(10, 0, 0, src).into(), port),
                    id,
                    reliable: false,
                    max_message: 0,
                    host,
                    heard_bytes: 1,
                    seen_ns: now as u64,
                };
                t.take(r, &limits);
                prop_assert!(t.map.len() <= max_remotes);
                let mut counts: HashMap<IpAddr, usize> = HashMap::new();
                for r in t.map.values() {
                    *counts.entry(r.addr.ip()).or_insert(0) += 1;
                }
                prop_assert_eq!(&counts, &t.per_source);
                prop_assert!(counts.values().all(|n| *n <= max_per_source));
            }
            t.expire(u64::MAX);
            prop_assert!(t.map.is_empty() && t.per_source.is_empty());
        }
    }

    #[test]
    fn every_agent_of_a_host_hears_a_unicast_peer_through_the_relay() {
        // Three agents on one free port (as three processes of one host would be); the third
        // plays another host (its host id differs) and announces a subscriber to the port.
        let port = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let peers = vec![SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port)];
        let config = DiscoveryConfig {
            port,
            peers,
            ..DiscoveryConfig::default()
        };
        let mk = || Agent::with("drelay", config.clone());
        let a = start(mk());
        let b = start(mk());
        let mut remote = mk();
        remote.host ^= 1;
        let remote = start(remote);
        assert!(a.port_socket().is_some(), "the first agent is the relay");
        assert!(b.port_socket().is_none() && remote.port_socket().is_none());
        remote.announce(Role::Subscriber, "t", 4000, 7, true, 1 << 20);
        let deadline = Instant::now() + Duration::from_secs(10);
        let heard = |x: &Agent| x.remote_subscribers("t").len() == 1;
        while !(heard(&a) && heard(&b)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(heard(&a), "the relay heard the peer");
        assert!(
            heard(&b),
            "the other agent of the host heard it through the relay"
        );
        let r = &b.remote_subscribers("t")[0];
        assert_eq!(r.addr, SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 4000));
        // The relay goes away: another agent takes the port over and the peer is still heard.
        drop(a);
        let deadline = Instant::now() + Duration::from_secs(10);
        while b.port_socket().is_none()
            && remote.port_socket().is_none()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            b.port_socket().is_some() || remote.port_socket().is_some(),
            "nobody took the discovery port over"
        );
    }

    #[test]
    fn another_hosts_subscribers_are_learned_and_expire() {
        let a = Agent::with("dtest2", DiscoveryConfig::default());
        let mut other = Agent::with("dtest2", DiscoveryConfig::default());
        other.host = a.host ^ 1;
        let b = other.encode(&[entry(Role::Subscriber, "t", 4000, 7)]);
        let g = a.generation();
        a.port_in("10.1.2.3:5555".parse().unwrap(), &b);
        let subs = a.remote_subscribers("t");
        assert_eq!(subs.len(), 1);
        assert_eq!(subs[0].addr, "10.1.2.3:4000".parse().unwrap());
        assert!(a.generation() > g);
        // Our own host's announcements are ignored (same-host peers use shared memory).
        let own = a.encode(&[entry(Role::Subscriber, "u", 1, 8)]);
        a.port_in("10.1.2.3:5555".parse().unwrap(), &own);
        assert!(a.remote_subscribers("u").is_empty());
        a.lock()
            .remotes
            .map
            .values_mut()
            .for_each(|r| r.seen_ns = 0);
        a.expire();
        assert!(a.remote_subscribers("t").is_empty());
    }
}
