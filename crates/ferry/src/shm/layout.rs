//! What lives in shared memory. Every type here is `#[repr(C)]`, holds no pointers, and is valid
//! when all-zero (a fresh segment is zero-filled by the kernel). Each segment starts with a
//! `SegmentHeader`; a mismatch of magic, layout version or sizes is refused with a clear error.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::ring::{RingHeader, MAX_READERS};
use crate::refusal::REASONS;
use crate::sync::Padded;

/// "FERRYCTL" little-endian: a topic's control segment.
pub const MAGIC_CONTROL: u64 = u64::from_le_bytes(*b"FERRYCTL");
/// "FERRYDAT" little-endian: one publisher's data segment.
pub const MAGIC_DATA: u64 = u64::from_le_bytes(*b"FERRYDAT");
/// Bumped on any change of the layouts in this file.
pub const LAYOUT_VERSION: u32 = 19;

pub const MAX_PUBLISHERS: usize = 32;
pub const MAX_NAME: usize = 128;
pub const MAX_NODE_NAME: usize = 32;
/// Counters a service's end keeps in its subscriber slot (`service::Counter`).
pub const SERVICE_COUNTERS: usize = 6;

/// The first bytes of every ferry segment.
#[repr(C)]
pub struct SegmentHeader {
    /// Stored last by the creator (Release); a reader that sees it (Acquire) sees the rest.
    pub magic: AtomicU64,
    pub version: AtomicU32,
    pub _reserved: AtomicU32,
    /// Bytes of the header part (page-rounded), where a data segment's ring starts.
    pub header_bytes: AtomicU64,
    /// Size of the whole segment file.
    pub total_bytes: AtomicU64,
}

/// A topic's directory: who publishes, who subscribes, and their statistics.
#[repr(C)]
pub struct ControlBlock {
    pub header: SegmentHeader,
    /// The topic name, UTF-8, zero-padded.
    pub topic: [AtomicU64; MAX_NAME / 8],
    /// Set while the last participant removes the segment; a newcomer that sees it retries.
    pub closing: AtomicU32,
    pub _pad: AtomicU32,
    /// Bumped whenever the publisher table changes; subscribers rescan when it moves.
    pub epoch: AtomicU64,
    /// Bumped whenever the subscriber table changes; UDP publishers rescan when it moves.
    pub sub_epoch: AtomicU64,
    /// Source of unique participant tokens.
    pub next_token: AtomicU64,
    pub publishers: [Padded<PublisherSlot>; MAX_PUBLISHERS],
    pub subscribers: [Padded<SubscriberSlot>; MAX_READERS],
    /// The topic's type, once an end declares one (last: its schema's pages are touched only
    /// on a typed topic).
    pub topic_type: TypeBlock,
}

/// A topic's type (`crate::TopicType`), written once by the first end that declares one and
/// never changed while the segment lives. Readers treat every field as hostile: the lengths
/// are bounded before use and the schema is only ever parsed with bounded work.
#[repr(C)]
pub struct TypeBlock {
    /// 0 while free; the writer's token while it writes (claimed with a compare-exchange).
    pub writer: AtomicU64,
    /// Stored (Release) once the rest is written; a reader that sees it (Acquire) sees the rest.
    pub ready: AtomicU32,
    /// `MessageEncoding::code`.
    pub encoding: AtomicU32,
    pub hash: AtomicU64,
    pub schema_len: AtomicU64,
    /// The type name, UTF-8, zero-padded.
    pub name: [AtomicU64; crate::topic_type::MAX_TYPE_NAME / 8],
    pub schema: [AtomicU64; crate::topic_type::MAX_SCHEMA / 8],
}

/// Identity and liveness of a participant. `owner` is `0` when free, else the token
/// `counter << 32 | pid`, so a half-claimed slot still names its process.
#[repr(C)]
pub struct Owner {
    pub token: AtomicU64,
    /// Set (Release) once the rest of the slot is filled in.
    pub ready: AtomicU32,
    pub pid: AtomicU32,
    pub start_time: AtomicU64,
    /// The participant's host: boot id and network namespace (`sys::host_id`). Loopback UDP
    /// addresses in this directory only reach participants of the same host.
    pub host: AtomicU64,
    /// The participant's PID namespace (`sys::pid_namespace`): its pid means something only to
    /// processes of the same namespace. Stored first after the token is claimed.
    pub pid_ns: AtomicU64,
    pub node: [AtomicU64; MAX_NODE_NAME / 8],
    /// 1 while the participant holds its slot's lock in the control segment (see
    /// `Topic::publisher_state`): a process of another PID namespace, whose pid means nothing
    /// here, is known to have ended when its lock is gone. Stored before `ready`.
    pub held: AtomicU32,
    pub _pad: AtomicU32,
}

/// A UDP endpoint's address as other processes of this host reach it.
#[repr(C)]
pub struct UdpAddr {
    /// 0: none, 4: IPv4, 6: IPv6.
    pub family: AtomicU32,
    pub port: AtomicU32,
    /// The address bytes (IPv4 in the first 4).
    pub ip: [AtomicU64; 2],
}

impl UdpAddr {
    pub fn store(&self, addr: Option<std::net::SocketAddr>) {
        let (family, ip, port) = match addr {
            None => (0, [0u8; 16], 0),
            Some(std::net::SocketAddr::V4(a)) => {
                let mut ip = [0u8; 16];
                ip[..4].copy_from_slice(&a.ip().octets());
                (4, ip, a.port())
            }
            Some(std::net::SocketAddr::V6(a)) => (6, a.ip().octets(), a.port()),
        };
        self.ip[0].store(
            u64::from_le_bytes(ip[..8].try_into().unwrap()),
            Ordering::Relaxed,
        );
        self.ip[1].store(
            u64::from_le_bytes(ip[8..].try_into().unwrap()),
            Ordering::Relaxed,
        );
        self.port.store(port as u32, Ordering::Relaxed);
        self.family.store(family, Ordering::Relaxed);
    }

    pub fn load(&self) -> Option<std::net::SocketAddr> {
        let mut ip = [0u8; 16];
        ip[..8].copy_from_slice(&self.ip[0].load(Ordering::Relaxed).to_le_bytes());
        ip[8..].copy_from_slice(&self.ip[1].load(Ordering::Relaxed).to_le_bytes());
        let port = self.port.load(Ordering::Relaxed) as u16;
        match self.family.load(Ordering::Relaxed) {
            4 => Some((std::net::Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3]), port).into()),
            6 => Some((std::net::Ipv6Addr::from(ip), port).into()),
            _ => None,
        }
    }
}

#[repr(C)]
pub struct PublisherSlot {
    pub owner: Owner,
    pub reliable: AtomicU32,
    /// `TRANSPORT_SHM`, `TRANSPORT_UDP` or both (auto).
    pub transport: AtomicU32,
    /// Where a UDP publisher takes NAK and STATUS frames (its data source address).
    pub udp: UdpAddr,
    pub capacity: AtomicU64,
    pub max_message: AtomicU64,
    pub sent: AtomicU64,
    pub bytes: AtomicU64,
    /// Sends that found the ring full and waited.
    pub waits: AtomicU64,
    pub timeouts: AtomicU64,
    /// Dead subscribers this publisher stopped waiting for.
    pub evictions: AtomicU64,
    /// UDP: frames sent again on a NAK, and datagrams the kernel dropped on our socket.
    pub retransmitted: AtomicU64,
    pub kernel_drops: AtomicU64,
    /// UDP: datagrams the kernel would not take (no room for a second, an unreachable peer).
    pub send_errors: AtomicU64,
    /// UDP: control datagrams refused, by reason (`udp::refusal::Refusal`).
    pub refused: [AtomicU64; REASONS],
    /// UDP: repair frames asked for beyond the per-NAK cap or the receiver's repair budget.
    pub repairs_deferred: AtomicU64,
    /// Discovery datagrams the process's agent refused: malformed, not allowed, over a limit,
    /// unauthenticated.
    pub discovery_refused: [AtomicU64; 4],
    /// UDP: challenges not sent to an announced address, to stay within 3× what it sent.
    pub challenges_withheld: AtomicU64,
    /// UDP: bytes of repair datagrams, and NAK entries not answered because their repair was
    /// still on its way.
    pub repair_bytes: AtomicU64,
    pub repairs_suppressed: AtomicU64,
    /// UDP congestion control: the pacing rate and bottleneck estimate (bytes/s), the minimum
    /// round trip (ns), waits for the pacer and for the in-flight window, loss taken for
    /// congestion and loss that was not.
    pub pacing_rate: AtomicU64,
    pub bottleneck_rate: AtomicU64,
    pub min_rtt_ns: AtomicU64,
    /// UDP congestion control: another flow's queue (ns) that ferry's back-offs could not
    /// drain, counted as part of the path; 0 when none is known.
    pub foreign_queue_ns: AtomicU64,
    pub paced_waits: AtomicU64,
    pub window_waits: AtomicU64,
    pub congestion_events: AtomicU64,
    pub noise_loss_events: AtomicU64,
    /// UDP congestion control: rounds that ended with a standing queue (the rate backed off).
    pub queue_events: AtomicU64,
    /// UDP: data datagrams sent (repairs apart), BATCH datagrams among them, and the messages
    /// those carried.
    pub datagrams: AtomicU64,
    pub batches: AtomicU64,
    pub batched_messages: AtomicU64,
    /// UDP: messages not sent to a latest subscriber that had its budget in flight (one per
    /// message and subscriber): it reads slower than the others, or sits behind a slower path.
    pub left_out: AtomicU64,
    /// `Qos::deadline`: periods that passed without a send.
    pub deadline_missed: AtomicU64,
    /// UDP: subscribers on other hosts left out because they declare another type for the
    /// topic (each counted once).
    pub other_type: AtomicU64,
    /// 1: a UDP publisher that sends its data to a multicast group (`Qos::multicast`).
    pub multicast: AtomicU32,
}

#[repr(C)]
pub struct SubscriberSlot {
    pub owner: Owner,
    pub reliable: AtomicU32,
    pub wait: AtomicU32,
    /// `TRANSPORT_SHM`, `TRANSPORT_UDP` or both (auto).
    pub transport: AtomicU32,
    /// 1: a UDP subscriber that receives through a multicast group (`Qos::multicast`).
    pub multicast: AtomicU32,
    /// A UDP subscriber's receive address and its receiver id.
    pub udp: UdpAddr,
    pub udp_receiver: AtomicU64,
    /// Messages a UDP subscriber will never get (lost and not repaired).
    pub lost: AtomicU64,
    /// Datagrams a UDP subscriber refused, by reason (`udp::refusal::Refusal`).
    pub refused: [AtomicU64; REASONS],
    /// Incomplete messages of unproven sessions dropped for room; replies withheld from
    /// unverified addresses; sessions evicted for a new one.
    pub evicted: AtomicU64,
    pub replies_withheld: AtomicU64,
    pub sessions_evicted: AtomicU64,
    /// Discovery datagrams the process's agent refused: malformed, not allowed, over a limit,
    /// unauthenticated.
    pub discovery_refused: [AtomicU64; 4],
    /// Datagrams the kernel dropped on a UDP subscriber's socket (its receive queue was full).
    pub kernel_drops: AtomicU64,
    /// The futex word this subscriber sleeps on; publishers bump it and wake.
    pub doorbell: Padded<AtomicU32>,
    pub received: AtomicU64,
    pub bytes: AtomicU64,
    /// Messages a latest subscriber missed because it was lapped.
    pub skipped: AtomicU64,
    /// Times the subscriber went to sleep on its futex.
    pub waits: AtomicU64,
    /// When this subscriber is a service's end, that service's counters (`service::Counter`):
    /// a server counts requests, responses, responses dropped and requests refused; a client
    /// counts requests, responses, timeouts and requests its server's departure ended.
    pub service: [AtomicU64; SERVICE_COUNTERS],
    /// A UDP subscriber's largest message (`Qos::max_message_size`): a publisher of this host
    /// refuses to send it more, with an error, rather than have it refused on arrival. 0: no
    /// limit a publisher needs to know (shared memory: a subscriber reads what the ring holds).
    pub max_message: AtomicU64,
    /// `Qos::deadline`: periods that passed without a message.
    pub deadline_missed: AtomicU64,
    /// UDP: publishers on other hosts refused because they declare another type for the
    /// topic (each counted once; their datagrams count as refused, `other-type`).
    pub other_type: AtomicU64,
}

/// Zeroes every word of `words` (Relaxed: a slot is reset before it is made ready, and the
/// `ready` store that follows is Release).
fn zero(words: &[AtomicU64]) {
    for w in words {
        w.store(0, Ordering::Relaxed);
    }
}

impl PublisherSlot {
    /// Clears everything a previous owner of this slot left, all but the owner itself: a
    /// publisher's counters start at 0, and no address or flag of another transport stays. The
    /// new owner calls it right after claiming the slot.
    pub fn reset(&self) {
        for w in [&self.reliable, &self.transport, &self.multicast] {
            w.store(0, Ordering::Relaxed);
        }
        self.udp.store(None);
        zero(&self.refused);
        zero(&self.discovery_refused);
        for w in [
            &self.capacity,
            &self.max_message,
            &self.sent,
            &self.bytes,
            &self.waits,
            &self.timeouts,
            &self.evictions,
            &self.retransmitted,
            &self.kernel_drops,
            &self.send_errors,
            &self.repairs_deferred,
            &self.challenges_withheld,
            &self.repair_bytes,
            &self.repairs_suppressed,
            &self.pacing_rate,
            &self.bottleneck_rate,
            &self.min_rtt_ns,
            &self.foreign_queue_ns,
            &self.paced_waits,
            &self.window_waits,
            &self.congestion_events,
            &self.noise_loss_events,
            &self.queue_events,
            &self.datagrams,
            &self.batches,
            &self.batched_messages,
            &self.left_out,
            &self.deadline_missed,
            &self.other_type,
        ] {
            w.store(0, Ordering::Relaxed);
        }
    }
}

impl SubscriberSlot {
    /// As `PublisherSlot::reset`; the doorbell keeps its value (a futex word only ever changes
    /// to wake its sleeper).
    pub fn reset(&self) {
        for w in [&self.reliable, &self.wait, &self.transport, &self.multicast] {
            w.store(0, Ordering::Relaxed);
        }
        self.udp.store(None);
        zero(&self.refused);
        zero(&self.discovery_refused);
        zero(&self.service);
        for w in [
            &self.udp_receiver,
            &self.lost,
            &self.evicted,
            &self.replies_withheld,
            &self.sessions_evicted,
            &self.kernel_drops,
            &self.received,
            &self.bytes,
            &self.skipped,
            &self.waits,
            &self.max_message,
            &self.deadline_missed,
            &self.other_type,
        ] {
            w.store(0, Ordering::Relaxed);
        }
    }
}

/// One publisher's ring.
#[repr(C)]
pub struct DataBlock {
    pub header: SegmentHeader,
    pub publisher_token: AtomicU64,
    pub pid: AtomicU32,
    pub reliable: AtomicU32,
    pub start_time: AtomicU64,
    /// The publisher's PID namespace, as in `Owner::pid_ns`.
    pub pid_ns: AtomicU64,
    pub capacity: AtomicU64,
    pub max_message: AtomicU64,
    /// Set when the publisher has gone away cleanly.
    pub closed: AtomicU32,
    /// The futex word a publisher waiting for space sleeps on; readers bump it and wake.
    pub space_bell: Padded<std::sync::atomic::AtomicU32>,
    pub ring: RingHeader,
}

#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<SegmentHeader>() == 32);
    assert!(std::mem::align_of::<ControlBlock>() == 128);
    assert!(std::mem::size_of::<ControlBlock>() - std::mem::size_of::<TypeBlock>() <= 64 * 1024);
    assert!(std::mem::size_of::<DataBlock>() <= 16 * 1024);
    // Four 128-byte lines in its `Padded` slot.
    assert!(std::mem::size_of::<PublisherSlot>() <= 512);
};

/// Header bytes of a segment holding `T`, rounded up to whole pages.
pub fn header_bytes<T>(page: usize) -> usize {
    std::mem::size_of::<T>().div_ceil(page) * page
}

/// Writes `bytes` (truncated to `dst`) into the first words of `dst`, the last one
/// zero-padded, and leaves the words after them untouched; returns how many it wrote.
pub fn store_bytes(dst: &[AtomicU64], bytes: &[u8]) -> usize {
    let bytes = &bytes[..bytes.len().min(dst.len() * 8)];
    for (word, chunk) in dst.iter().zip(bytes.chunks(8)) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        word.store(u64::from_le_bytes(w), Ordering::Relaxed);
    }
    bytes.len().div_ceil(8)
}

/// The first `len` bytes (at most the field's) of words written by `store_bytes`.
pub fn load_bytes(src: &[AtomicU64], len: usize) -> Vec<u8> {
    let mut bytes: Vec<u8> = src[..len.div_ceil(8).min(src.len())]
        .iter()
        .flat_map(|w| w.load(Ordering::Relaxed).to_le_bytes())
        .collect();
    bytes.truncate(len);
    bytes
}

/// Writes `s` (truncated to the field) into a zero-padded array of words.
pub fn store_str(dst: &[AtomicU64], s: &str) {
    let written = store_bytes(dst, s.as_bytes());
    for word in &dst[written..] {
        word.store(0, Ordering::Relaxed);
    }
}

/// Reads a string stored by `store_str`; invalid UTF-8 is replaced, never trusted.
pub fn load_str(src: &[AtomicU64]) -> String {
    let mut bytes = load_bytes(src, src.len() * 8);
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    bytes.truncate(end);
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// A slot of all ones (what any earlier owner may have left), reset: the bytes from each
    /// `(start, end)` that are not zero.
    fn reset_bytes<T>(reset: impl Fn(&T), ranges: &[(usize, usize)]) -> Vec<(usize, u8)> {
        let mut raw = Box::new(std::mem::MaybeUninit::<T>::uninit());
        // SAFETY: every field of the slots is an atomic integer (or an array or `Padded` of
        // them), for which all-ones bytes are a valid value; the padding is never read as a
        // field. `MaybeUninit<T>` has `T`'s layout, so the box's allocation fits a `Box<T>`.
        let slot: Box<T> = unsafe {
            std::ptr::write_bytes(raw.as_mut_ptr().cast::<u8>(), 0xFF, size_of::<T>());
            Box::from_raw(Box::into_raw(raw).cast::<T>())
        };
        reset(&slot);
        // SAFETY: the box holds `size_of::<T>()` initialised bytes, read while nothing writes.
        let bytes = unsafe {
            std::slice::from_raw_parts((&*slot as *const T).cast::<u8>(), size_of::<T>())
        };
        ranges
            .iter()
            .flat_map(|&(start, end)| start..end)
            .filter(|&i| bytes[i] != 0)
            .map(|i| (i, bytes[i]))
            .collect()
    }

    /// Every field after the owner is cleared (the subscriber's doorbell and the alignment
    /// padding before it apart): a field added and not reset fails here.
    #[test]
    fn a_reset_slot_keeps_nothing_of_its_last_owner() {
        let publisher = reset_bytes(
            PublisherSlot::reset,
            &[(
                offset_of!(PublisherSlot, reliable),
                offset_of!(PublisherSlot, multicast) + size_of::<AtomicU32>(),
            )],
        );
        assert_eq!(publisher, vec![], "publisher bytes left");
        let subscriber = reset_bytes(
            SubscriberSlot::reset,
            &[
                (
                    offset_of!(SubscriberSlot, reliable),
                    offset_of!(SubscriberSlot, kernel_drops) + size_of::<AtomicU64>(),
                ),
                (
                    offset_of!(SubscriberSlot, received),
                    offset_of!(SubscriberSlot, other_type) + size_of::<AtomicU64>(),
                ),
            ],
        );
        assert_eq!(subscriber, vec![], "subscriber bytes left");
        // The ranges reach each struct's last field.
        assert!(size_of::<PublisherSlot>() - offset_of!(PublisherSlot, multicast) < 16);
        assert!(size_of::<SubscriberSlot>() - offset_of!(SubscriberSlot, other_type) < 136);
    }
}
