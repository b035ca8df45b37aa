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
//! shared-memory directory instead; announcements from this host are ignored. The variables are
//! read once per process ([`DiscoveryConfig::global`]).
//!
//! Unicast (`FERRY_PEERS` without multicast) reaches one socket per host and port, so one agent
//! per host (network namespace) is its **relay**: the first to bind the discovery port, which it
//! binds alone. Every other agent binds a port of its own, sends its announcements from it,
//! registers there with the relay every period (a REGISTER to 127.0.0.1), and gets every
//! announcement the relay receives forwarded (RELAY, with the original source). When the relay's
//! process ends, the next agent to find the port free takes over.
//!
//! ```text
//! 0 u16 magic 0x4446 ("FD")  2 u8 version  3 u8 kind (1 announce, 2 register, 3 relay)
//! announce: 4 u32 entries  8 u64 host id  16 u16 domain length, domain
//!   entry: u8 role (1 publisher, 2 subscriber)  u8 flags (1 reliable)  u16 port  u64 id
//!          u16 topic length, topic
//! register: nothing more
//! relay: 4 u8[16] source IPv6 (IPv4-mapped)  20 u16 source port  22 the announcement
//! ```

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::sys::udp::{Multicast, MulticastInterface, RecvBatch, SocketOptions, UdpSocket};
use crate::sys::{host_id, monotonic_ns};

const MAGIC: u16 = 0x4446;
const VERSION: u8 = 1;
const KIND_ANNOUNCE: u8 = 1;
const KIND_REGISTER: u8 = 2;
const KIND_RELAY: u8 = 3;
const PERIOD: Duration = Duration::from_millis(500);
const EXPIRY_NS: u64 = 2_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Publisher,
    Subscriber,
}

/// An endpoint this process announces.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Local {
    role: Role,
    topic: String,
    port: u16,
    id: u64,
    reliable: bool,
}

/// An endpoint another host announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    pub role: Role,
    pub topic: String,
    pub addr: SocketAddr,
    pub id: u64,
    pub reliable: bool,
    pub host: u64,
    seen_ns: u64,
}

struct State {
    locals: Vec<(u64, Local)>,
    next_key: u64,
    remotes: HashMap<(u64, Role, u64), Remote>,
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
    port: u16,
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
}

/// The agent of `domain` in this process, started if needed.
pub fn agent(domain: &str) -> Arc<Agent> {
    static AGENTS: OnceLock<Mutex<HashMap<String, Weak<Agent>>>> = OnceLock::new();
    let mut agents = AGENTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(a) = agents.get(domain).and_then(Weak::upgrade) {
        return a;
    }
    let a = start(Agent::with(domain, DiscoveryConfig::global().clone()));
    agents.insert(domain.to_owned(), Arc::downgrade(&a));
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

/// How discovery is set up. The environment is read once per process ([`DiscoveryConfig::global`]);
/// [`DiscoveryConfig::from_vars`] parses any set of values, so that tests need not change the
/// environment.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// What in the environment was not understood and is ignored, each saying what to do.
    pub problems: Vec<String>,
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
            problems: Vec::new(),
        }
    }
}

impl DiscoveryConfig {
    /// This process's configuration, read from the environment the first time it is asked for.
    pub fn global() -> &'static DiscoveryConfig {
        static CONFIG: OnceLock<DiscoveryConfig> = OnceLock::new();
        CONFIG.get_or_init(DiscoveryConfig::from_env)
    }

    /// Reads the environment now (see [`DiscoveryConfig::global`] for the process's own).
    pub fn from_env() -> DiscoveryConfig {
        DiscoveryConfig::from_vars(|name| {
            std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
        })
    }

    /// Parses the variables `var` gives (`None`: unset). What cannot be understood is left out
    /// (the default is used instead) and described in `problems`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> DiscoveryConfig {
        let mut c = DiscoveryConfig::default();
        let set = |name: &str| {
            var(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        if let Some(v) = set("FERRY_DISCOVERY_PORT") {
            match v.parse::<u16>() {
                Ok(p) if p != 0 => c.port = p,
                _ => c.problems.push(format!(
                    "FERRY_DISCOVERY_PORT='{v}' is not a port number (1 to 65535), so \
                     {DEFAULT_PORT} is used; set it to the port every host's discovery uses"
                )),
            }
        }
        match set("FERRY_DISCOVERY").as_deref() {
            None => {}
            Some("multicast") => c.multicast = true,
            Some(v) => c.problems.push(format!(
                "FERRY_DISCOVERY='{v}' is not understood and is ignored; set it to multicast to \
                 find other hosts by multicast, or unset it"
            )),
        }
        if let Some(v) = set("FERRY_DISCOVERY_GROUP") {
            match v.parse::<Ipv4Addr>() {
                Ok(g) if g.is_multicast() => c.group = g,
                _ => c.problems.push(format!(
                    "FERRY_DISCOVERY_GROUP='{v}' is not an IPv4 multicast address, so \
                     {DEFAULT_GROUP} is used; give an address of 224.0.0.0/4 (239.0.0.0/8 \
                     stays within your organisation)"
                )),
            }
        }
        if let Some(v) = set("FERRY_DISCOVERY_IFACE") {
            match v.parse::<Ipv4Addr>() {
                Ok(i) => c.interface = i,
                Err(_) => c.problems.push(format!(
                    "FERRY_DISCOVERY_IFACE='{v}' is not an IPv4 address, so the kernel picks the \
                     interface; give the IPv4 address of the interface multicast should use"
                )),
            }
        }
        if let Some(v) = set("FERRY_PEERS") {
            for item in v.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                match parse_peer(item, c.port) {
                    Ok(a) if !c.peers.contains(&a) => c.peers.push(a),
                    Ok(_) => {}
                    Err(why) => c.problems.push(format!(
                        "FERRY_PEERS: '{item}' is left out: {why}; write FERRY_PEERS as \
                         ip[:port],… (for example 10.0.0.2,10.0.0.3:7650)"
                    )),
                }
            }
        }
        c
    }

    /// Whether discovery is configured to reach other hosts at all (`FERRY_PEERS` names one, or
    /// `FERRY_DISCOVERY=multicast`). When it is not, nothing outside this host can learn of an
    /// endpoint, so endpoints may bind to loopback only.
    pub fn reaches_other_hosts(&self) -> bool {
        !self.peers.is_empty() || self.multicast
    }
}

/// Whether this process's discovery is configured to reach other hosts at all (see
/// [`DiscoveryConfig::reaches_other_hosts`]).
pub fn reaches_other_hosts() -> bool {
    DiscoveryConfig::global().reaches_other_hosts()
}

/// One `FERRY_PEERS` item: `ip` (on the discovery `port`) or `ip:port`, one host's IPv4 address.
fn parse_peer(item: &str, port: u16) -> Result<SocketAddr, &'static str> {
    let a = item
        .parse::<SocketAddr>()
        .ok()
        .or_else(|| {
            item.parse::<IpAddr>()
                .ok()
                .map(|ip| SocketAddr::new(ip, port))
        })
        .ok_or("it is neither an IP address nor ip:port")?;
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
        let group = SocketAddr::new(group_ip.into(), port);
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
        Agent {
            domain: domain.to_owned(),
            host: host_id(),
            socket: Mutex::new(socket.map(Arc::new)),
            private,
            unicast,
            port,
            registered: Mutex::new(HashMap::new()),
            group,
            config,
            state: Mutex::new(State {
                locals: Vec::new(),
                next_key: 1,
                remotes: HashMap::new(),
            }),
            generation: AtomicU64::new(0),
            wake: AtomicBool::new(true),
            stop: AtomicBool::new(false),
            multicast_error,
        }
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
        if let Some(s) = bind_alone(self.port) {
            *self.socket.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(s));
        }
    }

    /// Unicast, not the relay: tells the relay (on this host) where to forward announcements.
    fn register(&self) {
        if let (Some(p), None) = (&self.private, self.port_socket()) {
            let relay = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), self.port);
            let _ = p.send_to(
                relay,
                &[
                    MAGIC.to_le_bytes()[0],
                    MAGIC.to_le_bytes()[1],
                    VERSION,
                    KIND_REGISTER,
                ],
            );
        }
    }

    /// The relay: one datagram that came to the discovery port.
    fn relay_in(&self, socket: &UdpSocket, src: SocketAddr, b: &[u8]) {
        match kind(b) {
            Some(KIND_REGISTER) if src.ip().is_loopback() => {
                self.registered
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(src, monotonic_ns());
            }
            Some(KIND_ANNOUNCE) => {
                self.learn(src, b);
                if !self.unicast {
                    return;
                }
                let now = monotonic_ns();
                let mut regs = self.registered.lock().unwrap_or_else(|p| p.into_inner());
                regs.retain(|_, seen| now < *seen + EXPIRY_NS);
                if regs.is_empty() {
                    return;
                }
                let mut out = Vec::with_capacity(22 + b.len());
                out.extend_from_slice(&MAGIC.to_le_bytes());
                out.push(VERSION);
                out.push(KIND_RELAY);
                let ip = match src.ip() {
                    IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                    IpAddr::V6(v6) => v6,
                };
                out.extend_from_slice(&ip.octets());
                out.extend_from_slice(&src.port().to_le_bytes());
                out.extend_from_slice(b);
                for to in regs.keys() {
                    let _ = socket.send_to(*to, &out);
                }
            }
            _ => {}
        }
    }

    /// Not the relay: one datagram that came to this agent's own socket.
    fn private_in(&self, src: SocketAddr, b: &[u8]) {
        if kind(b) != Some(KIND_RELAY) || !src.ip().is_loopback() || b.len() < 22 {
            return;
        }
        let mut ip = [0u8; 16];
        ip.copy_from_slice(&b[4..20]);
        let ip = std::net::Ipv6Addr::from(ip);
        let ip: IpAddr = ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4);
        let port = u16::from_le_bytes([b[20], b[21]]);
        self.learn(SocketAddr::new(ip, port), &b[22..]);
    }

    /// Announces an endpoint until the returned key is given to `withdraw`.
    pub fn announce(&self, role: Role, topic: &str, port: u16, id: u64, reliable: bool) -> u64 {
        let mut st = self.lock();
        let key = st.next_key;
        st.next_key += 1;
        st.locals.push((
            key,
            Local {
                role,
                topic: topic.to_owned(),
                port,
                id,
                reliable,
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
        // Acquire pairs with the Release increments in `learn`/`expire`.
        self.generation.load(Ordering::Acquire)
    }

    fn encode(&self, locals: &[Local]) -> Vec<u8> {
        let mut b = Vec::with_capacity(256);
        b.extend_from_slice(&MAGIC.to_le_bytes());
        b.push(VERSION);
        b.push(KIND_ANNOUNCE);
        b.extend_from_slice(&(locals.len() as u32).to_le_bytes());
        b.extend_from_slice(&self.host.to_le_bytes());
        b.extend_from_slice(&(self.domain.len() as u16).to_le_bytes());
        b.extend_from_slice(self.domain.as_bytes());
        for l in locals {
            b.push(match l.role {
                Role::Publisher => 1,
                Role::Subscriber => 2,
            });
            b.push(l.reliable as u8);
            b.extend_from_slice(&l.port.to_le_bytes());
            b.extend_from_slice(&l.id.to_le_bytes());
            b.extend_from_slice(&(l.topic.len() as u16).to_le_bytes());
            b.extend_from_slice(l.topic.as_bytes());
        }
        b
    }

    fn send_announcements(&self) {
        let port_socket = self.port_socket();
        let Some(socket) = port_socket.as_deref().or(self.private.as_ref()) else {
            return;
        };
        let locals: Vec<Local> = self.lock().locals.iter().map(|(_, l)| l.clone()).collect();
        if locals.is_empty() {
            return;
        }
        // Announcements are small; split into datagrams of at most ~1400 bytes.
        let mut chunk = Vec::new();
        let mut size = 0;
        let flush = |chunk: &mut Vec<Local>| {
            if chunk.is_empty() {
                return;
            }
            let datagram = self.encode(chunk);
            if !self.unicast && self.multicast_error.is_none() {
                let _ = socket.send_to(self.group, &datagram);
            }
            for p in &self.config.peers {
                let _ = socket.send_to(*p, &datagram);
            }
            chunk.clear();
        };
        for l in locals {
            size += 14 + l.topic.len();
            chunk.push(l);
            if size > 1200 {
                flush(&mut chunk);
                size = 0;
            }
        }
        flush(&mut chunk);
    }

    /// Takes one announcement; malformed ones are ignored.
    fn learn(&self, src: SocketAddr, b: &[u8]) {
        let Some((host, domain, entries)) = decode(b) else {
            return;
        };
        if host == self.host || domain != self.domain {
            return;
        }
        let now = monotonic_ns();
        let mut st = self.lock();
        let mut changed = false;
        for (role, reliable, port, id, topic) in entries {
            let addr = SocketAddr::new(src.ip(), port);
            let r = Remote {
                role,
                topic,
                addr,
                id,
                reliable,
                host,
                seen_ns: now,
            };
            match st.remotes.get_mut(&(host, role, id)) {
                Some(old) if old.addr == r.addr && old.topic == r.topic => old.seen_ns = now,
                _ => {
                    st.remotes.insert((host, role, id), r);
                    changed = true;
                }
            }
        }
        if changed {
            // Release pairs with the Acquire load in `generation`.
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    fn expire(&self) {
        let now = monotonic_ns();
        let mut st = self.lock();
        let before = st.remotes.len();
        st.remotes.retain(|_, r| now < r.seen_ns + EXPIRY_NS);
        if st.remotes.len() != before {
            // Release pairs with the Acquire load in `generation`.
            self.generation.fetch_add(1, Ordering::Release);
        }
    }
}

type Entry = (Role, bool, u16, u64, String);

/// The kind of a discovery datagram of this version, if it is one.
fn kind(b: &[u8]) -> Option<u8> {
    (b.len() >= 4 && u16::from_le_bytes([b[0], b[1]]) == MAGIC && b[2] == VERSION).then(|| b[3])
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

fn decode(b: &[u8]) -> Option<(u64, String, Vec<Entry>)> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Option<&[u8]> {
        let s = b.get(at..at.checked_add(n)?)?;
        at += n;
        Some(s)
    };
    if u16::from_le_bytes(take(2)?.try_into().ok()?) != MAGIC
        || take(1)?[0] != VERSION
        || take(1)?[0] != 1
    {
        return None;
    }
    let count = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
    let host = u64::from_le_bytes(take(8)?.try_into().ok()?);
    let dlen = u16::from_le_bytes(take(2)?.try_into().ok()?) as usize;
    let domain = std::str::from_utf8(take(dlen)?).ok()?.to_owned();
    let mut entries = Vec::with_capacity(count.min(256));
    for _ in 0..count.min(1024) {
        let role = match take(1)?[0] {
            1 => Role::Publisher,
            2 => Role::Subscriber,
            _ => return None,
        };
        let reliable = take(1)?[0] & 1 != 0;
        let port = u16::from_le_bytes(take(2)?.try_into().ok()?);
        let id = u64::from_le_bytes(take(8)?.try_into().ok()?);
        let tlen = u16::from_le_bytes(take(2)?.try_into().ok()?) as usize;
        let topic = std::str::from_utf8(take(tlen)?).ok()?.to_owned();
        entries.push((role, reliable, port, id, topic));
    }
    Some((host, domain, entries))
}

/// The agent's thread: announce every period (or when woken), listen in between.
fn run(agent: Weak<Agent>) {
    let mut batch = RecvBatch::new(16, 2048);
    let mut next = Instant::now();
    loop {
        let Some(a) = agent.upgrade() else { return };
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
                a.relay_in(&socket, src, bytes);
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
        self.stop.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration from `vars` alone (the environment is not read).
    fn config(vars: &[(&str, &str)]) -> DiscoveryConfig {
        DiscoveryConfig::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn config_is_parsed_from_values_and_problems_say_what_to_do() {
        let c = config(&[]);
        assert_eq!(c, DiscoveryConfig::default());
        assert!(
            !c.reaches_other_hosts(),
            "nothing set reaches no other host"
        );

        let c = config(&[
            ("FERRY_DISCOVERY_PORT", "7700"),
            (
                "FERRY_PEERS",
                " 10.0.0.2, 10.0.0.3:7800 ,,10.0.0.2,::ffff:10.0.0.4",
            ),
        ]);
        assert_eq!(c.port, 7700);
        let want: Vec<SocketAddr> = ["10.0.0.2:7700", "10.0.0.3:7800", "10.0.0.4:7700"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        assert_eq!(c.peers, want, "the default port applies, duplicates go");
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert!(c.reaches_other_hosts());
        assert!(!c.multicast);

        let c = config(&[("FERRY_DISCOVERY", "multicast")]);
        assert!(c.multicast && c.peers.is_empty() && c.reaches_other_hosts());

        let c = config(&[
            ("FERRY_DISCOVERY_PORT", "0"),
            ("FERRY_DISCOVERY", "Multicast"),
            ("FERRY_DISCOVERY_GROUP", "10.0.0.1"),
            ("FERRY_DISCOVERY_IFACE", "eth0"),
            (
                "FERRY_PEERS",
                "host-b,10.0.0.2:0,[::1]:7650,0.0.0.0,239.1.1.1,255.255.255.255",
            ),
        ]);
        assert_eq!(c.port, DEFAULT_PORT);
        assert!(!c.multicast, "only the exact word turns multicast on");
        assert_eq!(
            (c.group, c.interface),
            (DEFAULT_GROUP, Ipv4Addr::UNSPECIFIED)
        );
        assert!(c.peers.is_empty(), "{:?}", c.peers);
        assert!(!c.reaches_other_hosts(), "no usable peer and no multicast");
        assert_eq!(c.problems.len(), 10, "{:#?}", c.problems);
        for p in &c.problems {
            assert!(p.starts_with("FERRY_"), "names the variable: {p}");
            assert!(
                p.contains("set it") || p.contains("give") || p.contains("write"),
                "says what to do: {p}"
            );
        }
    }

    #[test]
    fn announcements_round_trip_and_garbage_is_ignored() {
        let a = Agent::with("dtest", DiscoveryConfig::default());
        let locals = vec![
            Local {
                role: Role::Publisher,
                topic: "a/b".into(),
                port: 9,
                id: 1,
                reliable: true,
            },
            Local {
                role: Role::Subscriber,
                topic: "c".into(),
                port: 10,
                id: 2,
                reliable: false,
            },
        ];
        let b = a.encode(&locals);
        let (host, domain, entries) = decode(&b).unwrap();
        assert_eq!((host, domain.as_str()), (a.host, "dtest"));
        assert_eq!(entries[0], (Role::Publisher, true, 9, 1, "a/b".to_owned()));
        assert_eq!(entries[1], (Role::Subscriber, false, 10, 2, "c".to_owned()));
        for cut in 0..b.len() {
            let _ = decode(&b[..cut]);
        }
        let mut evil = b.clone();
        evil[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(
            decode(&evil).is_none(),
            "a lying entry count runs out of bytes"
        );
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
        remote.announce(Role::Subscriber, "t", 4000, 7, true);
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
        let b = other.encode(&[Local {
            role: Role::Subscriber,
            topic: "t".into(),
            port: 4000,
            id: 7,
            reliable: true,
        }]);
        let g = a.generation();
        a.learn("10.1.2.3:5555".parse().unwrap(), &b);
        let subs = a.remote_subscribers("t");
        assert_eq!(subs.len(), 1);
        assert_eq!(subs[0].addr, "10.1.2.3:4000".parse().unwrap());
        assert!(a.generation() > g);
        // Our own host's announcements are ignored (same-host peers use shared memory).
        let own = a.encode(&[Local {
            role: Role::Subscriber,
            topic: "u".into(),
            port: 1,
            id: 8,
            reliable: true,
        }]);
        a.learn("10.1.2.3:5555".parse().unwrap(), &own);
        assert!(a.remote_subscribers("u").is_empty());
        a.lock().remotes.values_mut().for_each(|r| r.seen_ns = 0);
        a.expire();
        assert!(a.remote_subscribers("t").is_empty());
    }
}
