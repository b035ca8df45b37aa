//! `ferry_qos`: ferry's `Qos` as a plain C struct. Its enum fields are plain integers on the Rust
//! side, so that any value C stores there is checked, never undefined behaviour.

use std::ffi::c_char;
use std::time::Duration;

use ferry::{Delivery, IpVersion, MulticastGroup, Qos, Transport, WaitStrategy};

use crate::args::c_str;
use crate::status::Failure;

/// The longest multicast group or interface text read: an IPv6 address with a zone (at most
/// 61 bytes), or an interface name.
const MAX_ADDRESS_TEXT: usize = 64;

/// Which transport carries a topic (`ferry_qos.transport`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ferry_transport {
    /// Shared memory with subscribers on this host, UDP with the others (the default).
    FERRY_TRANSPORT_AUTO = 0,
    /// Shared memory between processes of one host.
    FERRY_TRANSPORT_SHM = 1,
    /// UDP between hosts (IPv4 or IPv6).
    FERRY_TRANSPORT_UDP = 2,
}

/// What happens when a subscriber is slower than its publisher (`ferry_qos.delivery`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ferry_delivery {
    /// Nothing is lost: the publisher waits, up to `send_timeout_ns`, for the slowest live
    /// reliable subscriber (the default).
    FERRY_DELIVERY_RELIABLE = 0,
    /// The publisher never waits; a lapped subscriber skips ahead and counts what it skipped.
    FERRY_DELIVERY_LATEST = 1,
}

/// How a thread waits for data or for room (`ferry_qos.wait`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ferry_wait {
    /// Spin for `spin_window_ns`, then block (the default).
    FERRY_WAIT_ADAPTIVE = 0,
    /// Busy loop: the lowest latency; the waiting thread makes no system call.
    FERRY_WAIT_SPIN = 1,
    /// Sleep on a futex shared between processes: no busy loop.
    FERRY_WAIT_BLOCK = 2,
}

/// The IP version of UDP endpoints (`ferry_qos.ip_version`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ferry_ip_version {
    FERRY_IP_V4 = 0,
    FERRY_IP_V6 = 1,
}

/// The settings of a publisher, subscriber, server or client. Start from `ferry_qos_default()`
/// and change what you need; the fields mean what the fields of ferry's Rust `Qos` mean. The strings are read
/// during the call that takes the QoS and not kept.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ferry_qos {
    /// One of `ferry_transport`.
    pub transport: i32,
    /// One of `ferry_delivery`.
    pub delivery: i32,
    /// One of `ferry_wait`.
    pub wait: i32,
    /// One of `ferry_ip_version` (UDP).
    pub ip_version: i32,
    /// The largest message a publisher sends, in bytes (1 MiB by default); a client's largest
    /// request, a server's largest request and answer.
    pub max_message_size: usize,
    /// Bytes of a publisher's ring: a power of two; 0 picks 2 × `max_message_size` rounded up,
    /// at least 64 KiB.
    pub ring_capacity: usize,
    /// The largest ring a shared-memory subscriber maps (1 GiB by default).
    pub max_ring_capacity: usize,
    /// How long a reliable publisher waits for room before a send fails with
    /// `FERRY_TIMEOUT` (5 s by default).
    pub send_timeout_ns: u64,
    /// How long an adaptive waiter spins before it blocks (100 µs by default).
    pub spin_window_ns: u64,
    /// UDP: the path MTU (1500 by default).
    pub mtu: usize,
    /// UDP subscriber: publisher sessions tracked at once (64).
    pub max_sessions: usize,
    /// UDP publisher: receivers tracked at once (256).
    pub max_receivers: usize,
    /// UDP publisher: the most bits per second it puts on the wire (its frames, repairs
    /// included), under either delivery; 0 (the default) sets no cap. A cap below 8000 is
    /// refused when the publisher is made.
    pub max_rate_bps: u64,
    /// UDP: send data to this multicast group, which subscribers join, instead of to each
    /// subscriber: "address:port" ("239.255.1.1:7400", "[ff02::1:2]:7400"), or NULL (the
    /// default). Repairs go to the group too; control frames stay unicast.
    pub multicast: *const c_char,
    /// UDP: the interface the group is joined and sent on: an IPv4 address of it for an IPv4
    /// group, an interface index for an IPv6 one; NULL (the default) leaves it to the kernel,
    /// which follows the default route.
    pub multicast_interface: *const c_char,
    /// UDP: the TTL or hop limit of multicast data (1 by default: the local network only).
    pub multicast_ttl: u32,
    /// The period within which a publisher means to send and a subscriber expects a message,
    /// in nanoseconds (1 ms to an hour); each period that passes without one is counted
    /// (`ferry stats`). 0 (the default): none.
    pub deadline_ns: u64,
    /// History for subscribers that start later: a publisher keeps its last `history` messages
    /// (in its ring; over UDP in its retransmit window, within 64 MiB), a subscriber that starts
    /// later takes the last `history` of them first, then the live ones. 0 (the default): none.
    /// At most 65536; a UDP subscriber takes at most 8192 (a FERRY_TRANSPORT_UDP end asking more
    /// is refused).
    pub history: usize,
    /// UDP subscriber: a publisher not heard from for this long, in nanoseconds, is gone
    /// (silent): 300 ms to an hour, 3 s by default. Idle publishers send a heartbeat at least
    /// every 100 ms.
    pub lease_ns: u64,
    /// Subscriber: the messages it may hold at once, the one just received and those kept
    /// (`ferry_subscriber_keep`): 1 to 1024, 2 by default.
    pub max_held: usize,
}

/// ferry's default QoS: auto transport, reliable delivery, adaptive waiting, 1 MiB messages.
#[no_mangle]
pub extern "C" fn ferry_qos_default() -> ferry_qos {
    let q = Qos::default();
    ferry_qos {
        transport: ferry_transport::FERRY_TRANSPORT_AUTO as i32,
        delivery: ferry_delivery::FERRY_DELIVERY_RELIABLE as i32,
        wait: ferry_wait::FERRY_WAIT_ADAPTIVE as i32,
        ip_version: ferry_ip_version::FERRY_IP_V4 as i32,
        max_message_size: q.max_message_size,
        ring_capacity: q.ring_capacity,
        max_ring_capacity: q.max_ring_capacity,
        send_timeout_ns: nanos(q.send_timeout),
        spin_window_ns: nanos(q.spin_window),
        mtu: q.mtu,
        max_sessions: q.max_sessions,
        max_receivers: q.max_receivers,
        max_rate_bps: q.max_rate.unwrap_or(0),
        multicast: std::ptr::null(),
        multicast_interface: std::ptr::null(),
        multicast_ttl: 1,
        deadline_ns: 0,
        history: 0,
        lease_ns: nanos(q.lease),
        max_held: q.max_held,
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl ferry_qos {
    /// The Rust `Qos`, or which field holds a value that names nothing.
    ///
    /// # Safety
    /// `multicast` and `multicast_interface` are NULL or NUL-terminated strings valid for the
    /// call.
    pub(crate) unsafe fn to_qos(self) -> Result<Qos, Failure> {
        let bad = |field: &str, value: i32, allowed: &str| {
            Failure::invalid(format!(
                "ferry_qos.{field} is {value}, which is not one of {allowed}"
            ))
        };
        let transport = match self.transport {
            0 => Transport::Auto,
            1 => Transport::Shm,
            2 => Transport::Udp,
            v => {
                return Err(bad(
                    "transport",
                    v,
                    "FERRY_TRANSPORT_AUTO/SHM/UDP (0, 1, 2)",
                ))
            }
        };
        let delivery = match self.delivery {
            0 => Delivery::Reliable,
            1 => Delivery::Latest,
            v => return Err(bad("delivery", v, "FERRY_DELIVERY_RELIABLE/LATEST (0, 1)")),
        };
        let wait = match self.wait {
            0 => WaitStrategy::Adaptive,
            1 => WaitStrategy::Spin,
            2 => WaitStrategy::Block,
            v => return Err(bad("wait", v, "FERRY_WAIT_ADAPTIVE/SPIN/BLOCK (0, 1, 2)")),
        };
        let ip_version = match self.ip_version {
            0 => IpVersion::V4,
            1 => IpVersion::V6,
            v => return Err(bad("ip_version", v, "FERRY_IP_V4/V6 (0, 1)")),
        };
        let mut qos = Qos::default()
            .transport(transport)
            .delivery(delivery)
            .wait(wait)
            .ip_version(ip_version)
            .max_message_size(self.max_message_size)
            .ring_capacity(self.ring_capacity)
            .max_ring_capacity(self.max_ring_capacity)
            .send_timeout(Duration::from_nanos(self.send_timeout_ns))
            .spin_window(Duration::from_nanos(self.spin_window_ns))
            .mtu(self.mtu)
            .max_sessions(self.max_sessions)
            .max_receivers(self.max_receivers);
        if self.max_rate_bps != 0 {
            qos = qos.max_rate(self.max_rate_bps);
        }
        if self.deadline_ns != 0 {
            qos = qos.deadline(Duration::from_nanos(self.deadline_ns));
        }
        qos = qos
            .history(self.history)
            .lease(Duration::from_nanos(self.lease_ns))
            .max_held(self.max_held);
        if !self.multicast.is_null() {
            // SAFETY: not NULL; the caller promises NUL-terminated strings valid for the call.
            let group = unsafe { c_str("ferry_qos.multicast", self.multicast, MAX_ADDRESS_TEXT) }?;
            let interface = match self.multicast_interface.is_null() {
                true => None,
                // SAFETY: as above.
                false => Some(unsafe {
                    c_str(
                        "ferry_qos.multicast_interface",
                        self.multicast_interface,
                        MAX_ADDRESS_TEXT,
                    )
                }?),
            };
            let group = MulticastGroup::parse(group, interface, self.multicast_ttl)
                .map_err(|e| Failure::invalid(format!("ferry_qos.multicast: {e}")))?;
            qos = qos.multicast(group);
        } else if !self.multicast_interface.is_null() {
            return Err(Failure::invalid(
                "ferry_qos.multicast_interface is set without ferry_qos.multicast",
            ));
        }
        Ok(qos)
    }
}

/// Reads the QoS argument of an endpoint's `_new`: NULL is `ferry_qos_default()`.
///
/// # Safety
/// `qos` is NULL or valid for a read, and its strings are NULL or valid for the call.
pub(crate) unsafe fn qos_arg(qos: *const ferry_qos) -> Result<Qos, Failure> {
    let qos = if qos.is_null() {
        ferry_qos_default()
    } else {
        // SAFETY: not NULL; the caller promises it is valid for a read.
        unsafe { qos.read() }
    };
    // SAFETY: the caller promises the QoS's strings are NULL or valid for the call.
    unsafe { qos.to_qos() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `to_qos` of a QoS whose strings, if any, are C literals of the test.
    fn rust(q: ferry_qos) -> Result<Qos, Failure> {
        // SAFETY: the tests set the strings to NULL or to 'static C string literals.
        unsafe { q.to_qos() }
    }

    #[test]
    fn the_default_is_rusts_default() {
        assert_eq!(rust(ferry_qos_default()).ok(), Some(Qos::default()));
    }

    #[test]
    fn a_multicast_group_is_read_from_its_strings_and_bad_ones_are_named() {
        let mut q = ferry_qos_default();
        assert_eq!(rust(q).ok().unwrap().multicast, None);
        q.multicast = c"239.255.1.1:7400".as_ptr();
        q.multicast_interface = c"127.0.0.1".as_ptr();
        q.multicast_ttl = 2;
        let m = rust(q).ok().unwrap().multicast.unwrap();
        assert_eq!(
            m,
            MulticastGroup::parse("239.255.1.1:7400", Some("127.0.0.1"), 2).unwrap()
        );
        for (group, interface, says) in [
            (
                c"239.255.1.1".as_ptr(),
                std::ptr::null(),
                "is not address:port",
            ),
            (
                c"239.255.1.1:1".as_ptr(),
                c"lo".as_ptr(),
                "is not an IPv4 address",
            ),
            (
                c"\xff".as_ptr(),
                std::ptr::null(),
                "multicast is not valid UTF-8",
            ),
            (
                std::ptr::null(),
                c"127.0.0.1".as_ptr(),
                "set without ferry_qos.multicast",
            ),
        ] {
            let mut q = ferry_qos_default();
            q.multicast = group;
            q.multicast_interface = interface;
            let Err(e) = rust(q) else {
                panic!("{says}: accepted")
            };
            assert!(e.message.contains(says), "{}", e.message);
            assert!(
                e.message.starts_with("ferry_qos.multicast"),
                "{}",
                e.message
            );
        }
    }

    #[test]
    fn a_rate_of_zero_is_no_cap_and_any_other_is_the_cap() {
        let mut q = ferry_qos_default();
        assert_eq!(q.max_rate_bps, 0);
        assert_eq!(rust(q).ok().unwrap().max_rate, None);
        q.max_rate_bps = 40_000_000;
        assert_eq!(rust(q).ok().unwrap().max_rate, Some(40_000_000));
    }

    #[test]
    fn every_enum_value_maps_and_others_are_refused() {
        let mut q = ferry_qos_default();
        q.transport = ferry_transport::FERRY_TRANSPORT_UDP as i32;
        q.delivery = ferry_delivery::FERRY_DELIVERY_LATEST as i32;
        q.wait = ferry_wait::FERRY_WAIT_BLOCK as i32;
        q.ip_version = ferry_ip_version::FERRY_IP_V6 as i32;
        let r = rust(q).ok().unwrap();
        assert_eq!(r.transport, Transport::Udp);
        assert_eq!(r.delivery, Delivery::Latest);
        assert_eq!(r.wait, WaitStrategy::Block);
        assert_eq!(r.ip_version, IpVersion::V6);
        for (field, set) in [
            (
                "transport",
                (|q, v| q.transport = v) as fn(&mut ferry_qos, i32),
            ),
            ("delivery", |q, v| q.delivery = v),
            ("wait", |q, v| q.wait = v),
            ("ip_version", |q, v| q.ip_version = v),
        ] {
            for v in [-1, 3, i32::MAX] {
                let mut q = ferry_qos_default();
                set(&mut q, v);
                let Err(e) = rust(q) else {
                    panic!("{field} = {v} accepted")
                };
                assert!(
                    e.message.contains(&format!("ferry_qos.{field} is {v}")),
                    "{}",
                    e.message
                );
            }
        }
    }
}
