//! Quality of service: how a publisher or subscriber moves, waits and loses (or not) messages.

use std::time::Duration;

use crate::Error;

/// `Qos::max_ring_capacity` by default: 1 GiB.
const DEFAULT_MAX_RING: usize = 1 << 30;

/// Which transport carries a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Transport {
    /// Shared memory between processes of one host.
    Shm,
    /// UDP between hosts (IPv4 or IPv6).
    Udp,
    /// Shared memory where both ends share a host, UDP otherwise.
    #[default]
    Auto,
}

/// What happens when a subscriber is slower than its publisher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Delivery {
    /// Nothing is lost: the publisher waits (up to `Qos::send_timeout`) for the slowest live
    /// reliable subscriber.
    #[default]
    Reliable,
    /// The publisher never waits; a lapped subscriber skips ahead and counts what it skipped.
    Latest,
}

/// How a thread waits for data (subscriber) or for room (reliable publisher).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WaitStrategy {
    /// Busy loop: the lowest latency; the waiting thread never makes a system call.
    Spin,
    /// Sleep on a futex shared between processes: no busy loop at all.
    Block,
    /// Spin for `Qos::spin_window`, then block.
    #[default]
    Adaptive,
}

/// UDP data over a multicast group instead of one datagram per subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MulticastGroup {
    /// The group (e.g. 239.255.1.1 or ff02::1:2), and the port its members bind.
    pub group: std::net::IpAddr,
    pub port: u16,
    /// The interface to send and join on: an IPv4 address of it, or an IPv6 interface index.
    /// Name it: left to the kernel, traffic follows the default route.
    pub interface: crate::MulticastInterface,
    /// TTL / hop limit (1: the local network only).
    pub ttl: u32,
}

impl MulticastGroup {
    /// A group from text, as the C and Python bindings take it. `group` is `address:port`
    /// (`239.255.1.1:7400`, `[ff02::1:2]:7400`); `interface` is an IPv4 address of the interface
    /// for an IPv4 group, or an interface index for an IPv6 one (`None`: the kernel's choice, which
    /// follows the default route); `ttl` is the TTL or hop limit (1: the local network only). The
    /// group's being a multicast address is checked when an endpoint binds it.
    pub fn parse(group: &str, interface: Option<&str>, ttl: u32) -> Result<MulticastGroup, Error> {
        let at: std::net::SocketAddr = group.parse().map_err(|_| {
            Error::InvalidQos(format!(
                "multicast group {group:?} is not address:port (e.g. 239.255.1.1:7400 or \
                 [ff02::1:2]:7400)"
            ))
        })?;
        let interface = match (at.ip(), interface) {
            (std::net::IpAddr::V4(_), None) => {
                crate::MulticastInterface::V4(std::net::Ipv4Addr::UNSPECIFIED)
            }
            (std::net::IpAddr::V6(_), None) => crate::MulticastInterface::V6(0),
            (std::net::IpAddr::V4(_), Some(i)) => {
                crate::MulticastInterface::V4(i.parse().map_err(|_| {
                    Error::InvalidQos(format!(
                        "multicast interface {i:?} is not an IPv4 address (an IPv4 group is \
                         joined on the interface that has this address)"
                    ))
                })?)
            }
            (std::net::IpAddr::V6(_), Some(i)) => {
                crate::MulticastInterface::V6(i.parse().map_err(|_| {
                    Error::InvalidQos(format!(
                        "multicast interface {i:?} is not an interface index (an IPv6 group is \
                         joined on an interface named by its index, as `ip link` shows it)"
                    ))
                })?)
            }
        };
        if ttl > 255 {
            return Err(Error::InvalidQos(format!(
                "multicast ttl {ttl} must be at most 255 (0: this host only, 1: the local network)"
            )));
        }
        Ok(MulticastGroup {
            group: at.ip(),
            port: at.port(),
            interface,
            ttl,
        })
    }
}

/// Which IP version a UDP endpoint uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IpVersion {
    #[default]
    V4,
    V6,
}

/// The settings of a publisher or subscriber.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Qos {
    pub transport: Transport,
    pub delivery: Delivery,
    pub wait: WaitStrategy,
    /// The largest message a publisher sends (bytes).
    pub max_message_size: usize,
    /// Bytes of a publisher's ring (a power of two, at least one record of the maximum size);
    /// 0 picks `2 × max_message_size` rounded up, at least 64 KiB.
    pub ring_capacity: usize,
    /// Shared memory: the largest publisher ring (bytes) a subscriber maps. A ring above it is
    /// refused before any of it is mapped (`Subscriber::refused_publishers` says why), and a
    /// publisher whose ring would exceed its own limit fails to be made, so that the same QoS on
    /// both ends agrees. 1 GiB by default (rings of messages up to about 512 MiB).
    pub max_ring_capacity: usize,
    /// How long a reliable publisher waits for room before `send` fails with a timeout (a
    /// century at most: `Duration::MAX` waits as good as forever).
    pub send_timeout: Duration,
    /// How long an adaptive waiter spins before it blocks.
    pub spin_window: Duration,
    /// UDP: the path MTU (1500 gives 1472-byte IPv4 datagrams; 9000 for jumbo frames). ferry
    /// cuts messages into frames that fit it and never relies on IP fragmentation.
    pub mtu: usize,
    /// UDP: IPv4 or IPv6.
    pub ip_version: IpVersion,
    /// UDP: send data to this multicast group (subscribers join it) instead of to each
    /// subscriber; repairs go to the group too, so one retransmission serves every receiver that
    /// lost the frame. Control frames (NAK, STATUS) stay unicast.
    pub multicast: Option<MulticastGroup>,
    /// UDP subscriber: publisher sessions tracked at once (64; at most 65536). A new one beyond
    /// it evicts a session whose publisher is not registered, or is refused (counted as
    /// over-limit).
    pub max_sessions: usize,
    /// UDP publisher: receivers tracked at once (256); a new one beyond it is refused (counted
    /// as over-limit).
    pub max_receivers: usize,
    /// UDP publisher: the most bits per second it puts on the wire (UDP payload: ferry's frames,
    /// repairs included), under either delivery. For users who know their link: reliable
    /// delivery finds the path's rate by itself (congestion control), latest delivery does not
    /// and sends as fast as the application publishes unless capped here.
    pub max_rate: Option<u64>,
    /// The period within which a publisher means to send, and a subscriber expects a message
    /// (`None`: no deadline). A subscriber counts each period that passed without a message
    /// (`Event::DeadlineMissed`, `ferry stats`), a publisher each period it let pass without
    /// sending. From 1 ms to an hour.
    pub deadline: Option<Duration>,
    /// History for subscribers that join later. A publisher keeps its last `history` messages
    /// (in its ring, as many of them as the ring holds: size it with `ring_capacity`; over UDP
    /// in its retransmit window, within 64 MiB); a subscriber that joins a publisher already
    /// running gets the last `history` of those it kept, oldest first, then the live ones, with
    /// no gap and no duplicate, under either delivery (over UDP the history is repaired like
    /// reliable messages, whatever the delivery). 0 (the default): none kept, none asked for.
    /// At most 65536; a UDP subscriber takes at most 8192 (a `Transport::Udp` end asking more
    /// is refused).
    pub history: usize,
    /// UDP subscriber: a publisher not heard from for this long is gone (`Event::Gone` with
    /// `Gone::Silent`): killed, cut off, or its host down. An idle publisher sends a heartbeat
    /// at least every 100 ms, so a lease of a few heartbeats rides out a few lost ones. From
    /// 300 ms to an hour; 3 s by default (`DEFAULT_LEASE`): thirty heartbeats, so that a
    /// congested path or a process paused for a moment is not taken for a death. A shared-memory
    /// publisher's death is seen by its process's end (within 100 ms), whatever the lease.
    /// The other way round, a UDP publisher stops counting a subscriber not heard from for its
    /// lease (it no longer holds a reliable publisher back, nor a closing one lingering), and a
    /// service client whose server's responses went silent for its lease ends its pending
    /// calls with `ServerGone`.
    pub lease: Duration,
    /// Subscriber: the messages it may hold at once — the one just received, and those kept
    /// past later receives with `Sample::keep` (the Python and C fronts keep a sample that
    /// still has views when the next is received). 2 by default, so that a loop that still
    /// looks at the last message while it takes the next works; 1 to 1024.
    pub max_held: usize,
    /// What the topic's messages are (`None`: bytes whose meaning only the applications know).
    /// The first end that declares a type gives the topic its type for as long as the topic
    /// exists; an end that declares another one is refused (`Error::TypeMismatch`, naming both),
    /// an end that declares none takes the topic as it is. Checked once, when the end is made.
    pub topic_type: Option<crate::TopicType>,
}

/// `Qos::lease` by default.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(3);
/// The shortest and longest `Qos::lease`: a few of an idle publisher's 100 ms heartbeats, and
/// an hour.
pub const MIN_LEASE: Duration = Duration::from_millis(300);
pub const MAX_LEASE: Duration = Duration::from_secs(3600);

/// The most messages `Qos::max_held` lets a subscriber hold.
pub const MAX_HELD: usize = 1024;

/// The most messages `Qos::history` keeps or asks for.
pub const MAX_HISTORY: usize = 1 << 16;

/// The most messages of history a UDP subscriber takes from a publisher (half the receive
/// window: the live messages that follow are still within it).
pub const MAX_UDP_HISTORY: usize = (crate::udp::frame::MESSAGE_WINDOW / 2) as usize;

impl Default for Qos {
    fn default() -> Qos {
        Qos {
            transport: Transport::Auto,
            delivery: Delivery::Reliable,
            wait: WaitStrategy::Adaptive,
            max_message_size: 1 << 20,
            ring_capacity: 0,
            max_ring_capacity: DEFAULT_MAX_RING,
            max_sessions: 64,
            max_receivers: 256,
            send_timeout: Duration::from_secs(5),
            spin_window: Duration::from_micros(100),
            mtu: 1500,
            ip_version: IpVersion::V4,
            multicast: None,
            max_rate: None,
            deadline: None,
            history: 0,
            lease: DEFAULT_LEASE,
            max_held: 2,
            topic_type: None,
        }
    }
}

impl Qos {
    /// Declares the topic's type (see the `topic_type` field).
    pub fn topic_type(mut self, t: crate::TopicType) -> Qos {
        self.topic_type = Some(t);
        self
    }
    pub fn transport(mut self, t: Transport) -> Qos {
        self.transport = t;
        self
    }
    pub fn delivery(mut self, d: Delivery) -> Qos {
        self.delivery = d;
        self
    }
    pub fn wait(mut self, w: WaitStrategy) -> Qos {
        self.wait = w;
        self
    }
    pub fn max_message_size(mut self, bytes: usize) -> Qos {
        self.max_message_size = bytes;
        self
    }
    pub fn ring_capacity(mut self, bytes: usize) -> Qos {
        self.ring_capacity = bytes;
        self
    }
    pub fn max_sessions(mut self, n: usize) -> Qos {
        self.max_sessions = n;
        self
    }
    pub fn max_receivers(mut self, n: usize) -> Qos {
        self.max_receivers = n;
        self
    }
    pub fn max_ring_capacity(mut self, bytes: usize) -> Qos {
        self.max_ring_capacity = bytes;
        self
    }
    /// See [`Qos::history`](struct.Qos.html#structfield.history).
    pub fn history(mut self, messages: usize) -> Qos {
        self.history = messages;
        self
    }
    /// See [`Qos::max_held`](struct.Qos.html#structfield.max_held).
    pub fn max_held(mut self, n: usize) -> Qos {
        self.max_held = n;
        self
    }
    /// See [`Qos::lease`](struct.Qos.html#structfield.lease).
    pub fn lease(mut self, lease: Duration) -> Qos {
        self.lease = lease;
        self
    }
    /// See [`Qos::deadline`](struct.Qos.html#structfield.deadline).
    pub fn deadline(mut self, period: Duration) -> Qos {
        self.deadline = Some(period);
        self
    }
    pub fn send_timeout(mut self, t: Duration) -> Qos {
        self.send_timeout = t;
        self
    }
    pub fn spin_window(mut self, t: Duration) -> Qos {
        self.spin_window = t;
        self
    }
    pub fn mtu(mut self, mtu: usize) -> Qos {
        self.mtu = mtu;
        self
    }
    pub fn ip_version(mut self, v: IpVersion) -> Qos {
        self.ip_version = v;
        self
    }
    pub fn multicast(mut self, m: MulticastGroup) -> Qos {
        self.multicast = Some(m);
        self
    }
    /// Caps the UDP publisher's rate at `bits_per_second` (see [`Qos::max_rate`]).
    pub fn max_rate(mut self, bits_per_second: u64) -> Qos {
        self.max_rate = Some(bits_per_second);
        self
    }

    /// The send timeout publishers wait by: `send_timeout`, at most a century, so that a clock
    /// reading plus it never overflows.
    pub(crate) fn send_wait(&self) -> Duration {
        const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
        self.send_timeout.min(CENTURY)
    }

    /// The deadline, checked.
    pub(crate) fn checked_deadline(&self) -> Result<Option<Duration>, Error> {
        use crate::deadline::{MAX_DEADLINE, MIN_DEADLINE};
        match self.deadline {
            Some(d) if !(MIN_DEADLINE..=MAX_DEADLINE).contains(&d) => Err(Error::InvalidQos(
                format!("deadline {d:?} must be between {MIN_DEADLINE:?} and {MAX_DEADLINE:?}"),
            )),
            d => Ok(d),
        }
    }

    /// `max_held`, checked.
    pub(crate) fn checked_max_held(&self) -> Result<usize, Error> {
        if !(1..=MAX_HELD).contains(&self.max_held) {
            return Err(Error::InvalidQos(format!(
                "max_held {} must be between 1 and {MAX_HELD}",
                self.max_held
            )));
        }
        Ok(self.max_held)
    }

    /// The lease, checked.
    pub(crate) fn checked_lease(&self) -> Result<Duration, Error> {
        if !(MIN_LEASE..=MAX_LEASE).contains(&self.lease) {
            return Err(Error::InvalidQos(format!(
                "lease {:?} must be between {MIN_LEASE:?} and {MAX_LEASE:?}",
                self.lease
            )));
        }
        Ok(self.lease)
    }

    /// The history, checked.
    pub(crate) fn checked_history(&self) -> Result<usize, Error> {
        if self.history > MAX_HISTORY {
            return Err(Error::InvalidQos(format!(
                "history {} is above the {MAX_HISTORY} messages a publisher keeps at most",
                self.history
            )));
        }
        if self.history > MAX_UDP_HISTORY && self.transport == Transport::Udp {
            return Err(Error::InvalidQos(format!(
                "history {} over UDP is above the {MAX_UDP_HISTORY} messages a UDP subscriber \
                 takes at most (half the receive window)",
                self.history
            )));
        }
        Ok(self.history)
    }

    /// UDP payload bytes per datagram for this MTU and IP version (checked).
    pub(crate) fn max_datagram(&self) -> Result<usize, Error> {
        let headers = match self.ip_version {
            IpVersion::V4 => 28,
            IpVersion::V6 => 48,
        };
        if !(576..=65_535).contains(&self.mtu) {
            return Err(Error::InvalidQos(format!(
                "mtu {} must be between 576 and 65535",
                self.mtu
            )));
        }
        Ok(self.mtu - headers)
    }

    /// The ring size this QoS gives, checked.
    pub(crate) fn effective_capacity(&self, page: usize) -> Result<u64, Error> {
        const MAX_RING: u64 = 1 << 34;
        if self.max_message_size == 0 {
            return Err(Error::InvalidQos(
                "max_message_size must be at least 1 byte".into(),
            ));
        }
        if self.max_message_size as u64 > u32::MAX as u64 - 64 {
            return Err(Error::InvalidQos(format!(
                "max_message_size {} exceeds the 4 GiB a record can describe",
                self.max_message_size
            )));
        }
        // A record and the mark of the next one's commit word.
        let need = crate::shm::ring::record_len(self.max_message_size as u64)
            + crate::shm::ring::COMMIT_WORD;
        let cap = if self.ring_capacity == 0 {
            (2 * need)
                .next_power_of_two()
                .max(64 * 1024)
                .max(page as u64)
        } else {
            self.ring_capacity as u64
        };
        if !cap.is_power_of_two() || cap < page as u64 || cap > MAX_RING {
            return Err(Error::InvalidQos(format!(
                "ring_capacity {cap} must be a power of two between the page size ({page}) and {MAX_RING}"
            )));
        }
        if cap > self.max_ring_capacity as u64 {
            return Err(Error::InvalidQos(format!(
                "ring_capacity {cap} is above max_ring_capacity {}, the largest ring subscribers \
                 with this QoS map; raise Qos::max_ring_capacity on the publisher and its \
                 subscribers, or lower ring_capacity or max_message_size",
                self.max_ring_capacity
            )));
        }
        if need > cap {
            return Err(Error::InvalidQos(format!(
                "ring_capacity {cap} cannot hold one message of max_message_size {} (needs {need})",
                self.max_message_size
            )));
        }
        Ok(cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_above_max_ring_capacity_is_refused_to_its_publisher() {
        let page = 4096;
        let big = Qos::default().ring_capacity(2 << 30);
        let e = big.effective_capacity(page).unwrap_err();
        assert!(e.to_string().contains("max_ring_capacity"), "{e}");
        assert_eq!(
            big.max_ring_capacity(4 << 30)
                .effective_capacity(page)
                .unwrap(),
            2 << 30
        );
        // The default message size gets a ring well below the default limit.
        assert!(Qos::default().effective_capacity(page).unwrap() <= DEFAULT_MAX_RING as u64);
    }

    #[test]
    fn multicast_groups_parse_from_text_and_bad_text_is_named() {
        use crate::MulticastInterface;
        use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
        let g = MulticastGroup::parse("239.255.1.1:7400", Some("127.0.0.1"), 1).unwrap();
        assert_eq!(g.group, IpAddr::V4(Ipv4Addr::new(239, 255, 1, 1)));
        assert_eq!(g.port, 7400);
        assert_eq!(g.interface, MulticastInterface::V4(Ipv4Addr::LOCALHOST));
        let g = MulticastGroup::parse("239.255.1.1:7400", None, 0).unwrap();
        assert_eq!(g.interface, MulticastInterface::V4(Ipv4Addr::UNSPECIFIED));
        let g = MulticastGroup::parse("[ff02::1:2]:9", Some("3"), 4).unwrap();
        assert_eq!(
            g.group,
            IpAddr::V6("ff02::1:2".parse::<Ipv6Addr>().unwrap())
        );
        assert_eq!(
            (g.port, g.interface, g.ttl),
            (9, MulticastInterface::V6(3), 4)
        );
        assert_eq!(
            MulticastGroup::parse("[ff02::1:2]:9", None, 1)
                .unwrap()
                .interface,
            MulticastInterface::V6(0)
        );
        for (group, interface, ttl, says) in [
            ("239.255.1.1", None, 1, "is not address:port"),
            ("", None, 1, "is not address:port"),
            ("239.255.1.1:70000", None, 1, "is not address:port"),
            (
                "239.255.1.1:7400",
                Some("eth0"),
                1,
                "is not an IPv4 address",
            ),
            (
                "[ff02::1]:7400",
                Some("127.0.0.1"),
                1,
                "is not an interface index",
            ),
            ("239.255.1.1:7400", None, 256, "at most 255"),
        ] {
            let e = MulticastGroup::parse(group, interface, ttl)
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{group:?} {interface:?} {ttl}: {e}");
        }
    }
}
