//! Discovery's settings: the port, multicast, the peers, the bounds; read from variables or set
//! by the program.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

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
/// ([`DiscoveryRefusals::over_limit`](crate::refusal::DiscoveryRefusals::over_limit)); it never
/// waits.
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
