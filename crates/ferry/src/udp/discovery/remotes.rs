//! The endpoints other hosts announced: a table bounded in total and per source address. No
//! I/O.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use super::codec::Role;
use super::config::DiscoveryLimits;

/// How long an endpoint not heard of again is kept, and a relay keeps an agent that stopped
/// registering.
pub(super) const EXPIRY_NS: u64 = 2_000_000_000;

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
    /// The hash of the type the endpoint declares (0: none).
    pub type_hash: u64,
    pub host: u64,
    /// Bytes of the announcements that named this endpoint (each its share of its datagram):
    /// what its address sent to learn it. An unverified address is sent at most three times
    /// this (see `endpoint`).
    pub heard_bytes: u64,
    pub(super) seen_ns: u64,
}

/// Endpoints other hosts announced, keyed by (host, role, id), bounded in total and per source
/// address (see [`DiscoveryLimits`]).
#[derive(Default)]
pub(super) struct Remotes {
    pub(super) map: HashMap<(u64, Role, u64), Remote>,
    /// How many entries of `map` each source address holds.
    pub(super) per_source: HashMap<IpAddr, usize>,
}

/// What [`Remotes::take`] did with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Taken {
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
    pub(super) fn values(&self) -> impl Iterator<Item = &Remote> {
        self.map.values()
    }

    pub(super) fn count(&self, ip: IpAddr) -> usize {
        self.per_source.get(&ip).copied().unwrap_or(0)
    }

    pub(super) fn remove(&mut self, key: &(u64, Role, u64)) {
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
    pub(super) fn oldest_of(&self, ip: IpAddr) -> Option<(u64, Role, u64)> {
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
    pub(super) fn take(&mut self, r: Remote, limits: &DiscoveryLimits) -> Taken {
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
    pub(super) fn expire(&mut self, now: u64) -> bool {
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
