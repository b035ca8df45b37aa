//! The agent: one thread per domain and settings, its sockets, the relay, and what it sends and
//! hears.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::sys::udp::{Multicast, MulticastInterface, RecvBatch, SocketOptions, UdpSocket};
use crate::sys::{host_id, monotonic_ns};
use crate::udp::crypto::{self, DomainKey, Opener, Sealer};

use super::codec::*;
use super::config::DiscoveryConfig;
use super::remotes::{Remote, Remotes, Taken, EXPIRY_NS};

pub(super) const PERIOD: Duration = Duration::from_millis(500);

pub(super) struct State {
    pub(super) locals: Vec<(u64, Entry)>,
    pub(super) next_key: u64,
    pub(super) remotes: Remotes,
}

pub struct Agent {
    pub(super) domain: String,
    pub(super) host: u64,
    /// The discovery port: shared by every agent (multicast), or this agent's alone (the
    /// host's relay under unicast); `None` while another agent is the relay.
    socket: Mutex<Option<Arc<UdpSocket>>>,
    /// Unicast without the discovery port: this agent's own socket (announcements out, relayed
    /// announcements in).
    private: Option<UdpSocket>,
    /// Unicast discovery: the relay role is possible (taken when the port is free).
    unicast: bool,
    /// The relay's registered agents of this host and when each last registered.
    pub(super) registered: Mutex<HashMap<SocketAddr, u64>>,
    group: SocketAddr,
    config: DiscoveryConfig,
    pub(super) state: Mutex<State>,
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
pub(super) struct Counters {
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
pub(super) fn start(agent: Agent) -> Arc<Agent> {
    let a = Arc::new(agent);
    let weak = Arc::downgrade(&a);
    let _ = std::thread::Builder::new()
        .name("ferry-discovery".into())
        .spawn(move || run(weak));
    a
}

impl Agent {
    /// An agent of `domain` set up as `config` says.
    pub(super) fn with(domain: &str, config: DiscoveryConfig) -> Agent {
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
    pub(super) fn from_parts(
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
    pub(super) fn set_key(&mut self, key: &DomainKey) {
        // An agent without its OS random source cannot seal: it then sends nothing.
        self.seal = Sealer::new(key).ok().map(Mutex::new);
        self.open = Opener::new(key).ok().map(|o| Mutex::new((o, Vec::new())));
    }

    /// Opens a sealed datagram and hands the plain one to `then`; counts a refusal otherwise.
    pub(super) fn unsealed(&self, b: &[u8], then: impl FnOnce(&[u8])) {
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

    pub(super) fn refuse(&self, why: Refusal) {
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

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The discovery port's socket, if this agent has it.
    pub(super) fn port_socket(&self) -> Option<Arc<UdpSocket>> {
        self.socket
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Unicast: becomes the host's relay if the discovery port is free.
    pub(super) fn try_take_port(&self) {
        if !self.unicast || self.port_socket().is_some() {
            return;
        }
        if let Some(s) = bind_alone(self.config.port) {
            *self.socket.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(s));
        }
    }

    /// Unicast, not the relay: tells the relay (on this host) where to forward announcements.
    pub(super) fn register(&self) {
        if let (Some(p), None) = (&self.private, self.port_socket()) {
            let relay = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), self.config.port);
            let _ = p.send_to(relay, &register_datagram());
        }
    }

    /// One datagram that came to the discovery port (to the host's relay, under unicast).
    /// Returns the relay message to forward to the registered agents, if any.
    pub(super) fn port_in(&self, src: SocketAddr, b: &[u8]) -> Option<Vec<u8>> {
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
    pub(super) fn register_agent(&self, src: SocketAddr) {
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
    pub(super) fn forward(&self, socket: &UdpSocket, relayed: &[u8]) {
        let now = monotonic_ns();
        let mut regs = self.registered.lock().unwrap_or_else(|p| p.into_inner());
        regs.retain(|_, seen| now < seen.saturating_add(EXPIRY_NS));
        for to in regs.keys() {
            let _ = socket.send_to(*to, relayed);
        }
    }

    /// A sealed announcement at the discovery port (the domain has a key): learned if it opens,
    /// and relayed as it came (the agents it goes to open it themselves).
    pub(super) fn sealed_in(&self, src: SocketAddr, b: &[u8]) -> Option<Vec<u8>> {
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
    pub(super) fn private_in(&self, src: SocketAddr, b: &[u8]) {
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

    /// Announces an endpoint until the returned key is given to `withdraw`.
    pub fn announce(&self, entry: Entry) -> u64 {
        let mut st = self.lock();
        let key = st.next_key;
        st.next_key += 1;
        st.locals.push((key, entry));
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

    pub(super) fn encode(&self, entries: &[Entry]) -> Vec<u8> {
        encode_announcement(self.host, &self.domain, entries)
    }

    pub(super) fn send_announcements(&self) {
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
    pub(super) fn chunks<'e>(&self, entries: &'e [Entry]) -> Vec<&'e [Entry]> {
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
    pub(super) fn learn_from(&self, ip: IpAddr, a: Announcement, datagram_len: usize) {
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
                type_hash: e.type_hash,
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

    pub(super) fn expire(&self) {
        let expired = self.lock().remotes.expire(monotonic_ns());
        if expired {
            // Release pairs with the Acquire load in `generation`.
            self.generation.fetch_add(1, Ordering::Release);
        }
    }
}

pub(super) fn plain_options() -> SocketOptions {
    SocketOptions {
        gso: false,
        gro: false,
        ..SocketOptions::default()
    }
}

/// The discovery port, bound by this socket alone (no SO_REUSEPORT): `None` if another agent
/// of this host has it.
pub(super) fn bind_alone(port: u16) -> Option<UdpSocket> {
    UdpSocket::bind(
        SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port),
        &plain_options(),
    )
    .ok()
}

/// The agent's thread: announce every period (or when woken), listen in between.
pub(super) fn run(agent: Weak<Agent>) {
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
