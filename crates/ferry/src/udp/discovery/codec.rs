//! The discovery datagrams: ANNOUNCE, REGISTER and RELAY, encoded and decoded (hostile input:
//! every length and value checked, see the module above). No I/O.

use std::net::{IpAddr, SocketAddr};

pub(super) const MAGIC: u16 = 0x4446;
/// 2: entries say a subscriber's largest message. 3: and the hash of the type the endpoint
/// declares.
pub(super) const VERSION: u8 = 3;
pub(super) const KIND_ANNOUNCE: u8 = 1;
pub(super) const KIND_REGISTER: u8 = 2;
pub(super) const KIND_RELAY: u8 = 3;
/// Magic, version and kind.
pub(super) const HEADER: usize = 4;
/// A relay message's bytes before the announcement it carries.
pub(super) const RELAY_HEADER: usize = 22;
/// An entry's bytes besides its topic.
pub(super) const ENTRY_FIXED: usize = 26;
/// The smallest entry: a one-byte topic.
pub(super) const MIN_ENTRY: usize = ENTRY_FIXED + 1;
/// The largest discovery datagram received; longer ones arrive cut short.
pub(super) const MAX_DATAGRAM: usize = 2048;
/// The longest announcement: one the relay can forward whole (with its relay header) in the
/// 2048 bytes a discovery socket receives at most. Ferry sends at most about 1400.
pub const MAX_ANNOUNCE: usize = MAX_DATAGRAM - RELAY_HEADER;
/// The most entries one announcement may hold. Ferry puts at most this many in one (about 80
/// fit in the ~1200 bytes of entries it sends per datagram); more is refused without looking
/// further.
pub const MAX_ENTRIES: usize = 128;
/// The longest topic or domain name in an announcement, in bytes: the topic directory's bound.
pub const MAX_NAME: usize = crate::shm::layout::MAX_NAME;

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
    /// The hash of the type the endpoint declares (`TopicType::hash`); 0: none.
    pub type_hash: u64,
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

/// Why a discovery datagram was refused: the counters of
/// [`DiscoveryRefusals`](crate::refusal::DiscoveryRefusals).
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

/// Checks magic and version; returns the kind.
pub(super) fn header(b: &[u8]) -> Result<u8, DiscoveryError> {
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
pub(super) fn relay_parts(bytes: &[u8]) -> Result<(SocketAddr, &[u8]), DiscoveryError> {
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
pub(super) fn decode_announcement(bytes: &[u8]) -> Result<Announcement, DiscoveryError> {
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
        let type_hash = r.u64("entry")?;
        let topic = r.name("topic", |t| crate::names::validate_topic(t).is_ok())?;
        entries.push(Entry {
            role,
            topic,
            port,
            id,
            reliable,
            max_message,
            type_hash,
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
pub(super) struct Reader<'a>(&'a [u8]);

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

pub(super) fn register_datagram() -> [u8; HEADER] {
    let m = MAGIC.to_le_bytes();
    [m[0], m[1], VERSION, KIND_REGISTER]
}

/// The announcement of `entries` (at most [`MAX_ENTRIES`], with valid names).
pub(super) fn encode_announcement(host: u64, domain: &str, entries: &[Entry]) -> Vec<u8> {
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
        b.extend_from_slice(&e.type_hash.to_le_bytes());
        b.extend_from_slice(&(e.topic.len() as u16).to_le_bytes());
        b.extend_from_slice(e.topic.as_bytes());
    }
    b
}

/// The relay's copy of `announcement` (its datagram), which came from `src`.
pub(super) fn relay_datagram(src: SocketAddr, announcement: &[u8]) -> Vec<u8> {
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
