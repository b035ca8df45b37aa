//! UDP publishers and subscribers: the protocol core (`sender`, `receiver`) joined to sockets.
//!
//! - A publisher sends from the application's thread (the fragments of a message leave in one
//!   GSO call where the kernel supports it). When the application publishes small messages
//!   faster than the socket takes them (it comes back sooner than a send took), they queue
//!   instead, and a flusher thread sends what has queued, batched, while the application goes
//!   on; the first message of a burst still leaves at once, and no timer holds anything back.
//!   A service thread answers NAKs, takes STATUS frames (flow control credit; it also finishes a
//!   message that was waiting for credit), sends heartbeats, and follows the topic's subscriber
//!   table.
//! - A subscriber receives in the application's thread (`recv` blocks on its socket like a plain
//!   blocking socket would), feeds the receiver core, and sends NAK and STATUS frames back to the
//!   publisher's source address.
//! - On one host, UDP endpoints find each other through the topic's shared-memory directory, in
//!   which each registers its address. The node's impairment (`NodeConfig::with_impairment`,
//!   `FERRY_IMPAIR`; see `impair`) applies on send, receive, or both.

use super::ids::{id_map, new_id, IdMap};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::crypto::{self, DomainKey, Opener, Sealer, SEAL_HEADER, SEAL_OVERHEAD, SEAL_TAG};
use super::discovery::{self, Agent, DiscoveryConfig, Entry, Role};
use super::frame::{self, Frame};
use super::impair::{DelayQueue, ImpairConfig, Impairer};
use super::receiver::{Delivered, Receiver, ReceiverConfig};
use super::refusal::Refusal;
use super::sender::{Dest, Sender, SenderConfig, Sink};
use crate::shm::topic::{
    store_discovery, store_refusals, Liveness, Topic, TRANSPORT_SHM, TRANSPORT_UDP,
};
use crate::sys::monotonic_ns;
use crate::sys::udp::{Multicast, RecvBatch, SocketOptions, UdpSocket};
use crate::{Delivery, Error, IpVersion, NodeConfig, Qos, RecvError, SendError, WaitStrategy};

/// Whether UDP endpoints must be reachable from other hosts: the node's discovery is configured
/// to reach them (peers, multicast discovery) or the QoS names a multicast group. Otherwise an
/// endpoint binds loopback only, and nothing off this host can send to it.
fn reachable_from_other_hosts(qos: &Qos, discovery: &DiscoveryConfig) -> bool {
    qos.multicast.is_some() || (qos.ip_version == IpVersion::V4 && discovery.reaches_other_hosts())
}

/// Binds a UDP socket for an endpoint. Returns it and the address this host's peers reach it
/// at. With a multicast group, a subscriber binds the group's port and joins it; a publisher
/// binds any port and sends to the group on the group's interface.
fn bind_udp(
    qos: &Qos,
    discovery: &DiscoveryConfig,
    recv_buffer: Option<usize>,
    subscriber: bool,
) -> Result<(UdpSocket, SocketAddr), Error> {
    let any: IpAddr = match (qos.ip_version, reachable_from_other_hosts(qos, discovery)) {
        (IpVersion::V4, true) => Ipv4Addr::UNSPECIFIED.into(),
        (IpVersion::V6, true) => Ipv6Addr::UNSPECIFIED.into(),
        (IpVersion::V4, false) => Ipv4Addr::LOCALHOST.into(),
        (IpVersion::V6, false) => Ipv6Addr::LOCALHOST.into(),
    };
    let multicast = qos.multicast.map(|m| Multicast {
        group: m.group,
        interface: m.interface,
        ttl_or_hops: m.ttl,
        loopback: true,
    });
    let port = match qos.multicast {
        Some(m) if subscriber => m.port,
        _ => 0,
    };
    let opts = SocketOptions {
        // Only data arrives in trains worth coalescing; a publisher hears small control frames.
        gro: subscriber,
        recv_buffer,
        send_buffer: Some(4 << 20),
        multicast,
        ..SocketOptions::default()
    };
    // A publisher chooses its port itself, so that it may connect its socket to a single
    // subscriber (sends then skip the route lookup) and disconnect without losing the port.
    let socket = if subscriber {
        UdpSocket::bind(SocketAddr::new(any, port), &opts)
    } else {
        UdpSocket::bind_chosen_port(any, &opts)
    }
    .map_err(|e| Error::io("bind a UDP socket", e))?;
    let port = socket
        .local_addr()
        .map_err(|e| Error::io("UDP socket address", e))?
        .port();
    // Same-host peers reach us on loopback.
    let local: IpAddr = match qos.ip_version {
        IpVersion::V4 => Ipv4Addr::LOCALHOST.into(),
        IpVersion::V6 => Ipv6Addr::LOCALHOST.into(),
    };
    Ok((socket, SocketAddr::new(local, port)))
}

/// The sealing side of a domain key, if the endpoint has one.
fn sealer(key: Option<&DomainKey>) -> Result<Option<Sealer>, Error> {
    key.map(Sealer::new).transpose()
}

/// The frame in `bytes`, opened where it lies first when the endpoint has a domain key; the
/// reason to count when it is refused.
fn unseal<'a>(open: Option<&mut Opener>, bytes: &'a mut [u8]) -> Result<Frame<'a>, Refusal> {
    let plain: &'a [u8] = match open {
        Some(o) => {
            let r = o.open_in_place(bytes)?;
            &bytes[r]
        }
        // A sealed datagram without a key: someone of the domain uses one, we do not.
        None if crypto::is_sealed(bytes) => return Err(Refusal::Unauthenticated),
        None => bytes,
    };
    frame::decode(plain).map_err(|_| Refusal::Malformed)
}

/// Impairments of one endpoint, with the queue of held-back datagrams.
struct Impair {
    imp: Impairer,
    queue: DelayQueue,
    on_send: bool,
    on_receive: bool,
}

impl Impair {
    fn new(cfg: ImpairConfig) -> Impair {
        let (on_send, on_receive) = (cfg.direction.on_send(), cfg.direction.on_receive());
        Impair {
            imp: Impairer::new(cfg),
            queue: DelayQueue::new(65_536, 256 << 20),
            on_send,
            on_receive,
        }
    }
}

/// Sends `data` (datagrams of `segment` bytes) to `addr` (the socket's connected peer when
/// `connected` says it is that), waiting a bounded time for socket room. Returns false if it
/// had to give up (the caller counts it).
fn send_all(
    socket: &UdpSocket,
    addr: SocketAddr,
    connected: Option<SocketAddr>,
    data: &[u8],
    segment: usize,
) -> bool {
    let mut rest = data;
    let mut deadline = None;
    while !rest.is_empty() {
        let sent = if connected == Some(addr) {
            socket.send_segments_connected(rest, segment)
        } else {
            socket.send_segments(addr, rest, segment)
        };
        match sent {
            Ok(n) => rest = &rest[(n * segment).min(rest.len())..],
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.raw_os_error() == Some(libc::ENOBUFS) =>
            {
                let now = Instant::now();
                if now > *deadline.get_or_insert(now + Duration::from_secs(1)) {
                    return false;
                }
                let _ = socket.wait_writable(Duration::from_millis(10));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// The socket as the protocol core sees it.
struct Out<'a> {
    socket: &'a UdpSocket,
    /// With multicast: data and repairs go to the group.
    group: Option<SocketAddr>,
    /// The peer the socket is connected to, if any.
    connected: Option<SocketAddr>,
    all: &'a [SocketAddr],
    by_id: &'a IdMap<SocketAddr>,
    impair: Option<&'a mut Impair>,
    seal: Option<&'a mut Sealer>,
    now: u64,
    send_failures: &'a mut u64,
}

/// The room a sealing endpoint's datagrams are written with.
fn seal_room(seal: bool) -> (usize, usize) {
    if seal {
        (SEAL_HEADER, SEAL_TAG)
    } else {
        (0, 0)
    }
}

impl Sink for Out<'_> {
    fn room(&self) -> (usize, usize) {
        seal_room(self.seal.is_some())
    }

    fn send(&mut self, dest: Dest<'_>, data: &mut [u8], segment: usize) {
        // Sealed once, where they lie, whatever the number of destinations.
        if let Some(s) = self.seal.as_deref_mut() {
            s.seal_segments(data, segment);
        }
        for addr in targets(dest, self.group, self.all, self.by_id) {
            send_to(
                self.socket,
                addr,
                self.connected,
                data,
                segment,
                self.impair.as_deref_mut(),
                self.now,
                self.send_failures,
            );
        }
    }
}

/// The addresses `dest` names: the multicast group for data, else each subscriber's address
/// (`all`) but those left out, or one receiver's or publisher's address (`by_id`).
fn targets<'a>(
    dest: Dest<'a>,
    group: Option<SocketAddr>,
    all: &'a [SocketAddr],
    by_id: &'a IdMap<SocketAddr>,
) -> impl Iterator<Item = SocketAddr> + 'a {
    let (list, one, left_out): (&[SocketAddr], Option<SocketAddr>, &[u64]) = match (dest, group) {
        (Dest::All | Dest::AllExcept(_) | Dest::Receiver(_), Some(g)) => (&[], Some(g), &[]),
        (Dest::All, None) => (all, None, &[]),
        (Dest::AllExcept(ids), None) => (all, None, ids),
        (Dest::Receiver(id) | Dest::Session(id), _) => (&[], by_id.get(&id).copied(), &[]),
    };
    let skip = move |a: &SocketAddr| left_out.iter().any(|id| by_id.get(id) == Some(a));
    one.into_iter()
        .chain(list.iter().copied().filter(move |a| !skip(a)))
}

/// Sends `data` (datagrams of `segment` bytes, sealed already if the endpoint has a key) to
/// `addr`, through send-side impairment if any; counts what could not be sent in `failures`.
#[allow(clippy::too_many_arguments)]
fn send_to(
    socket: &UdpSocket,
    addr: SocketAddr,
    connected: Option<SocketAddr>,
    data: &[u8],
    segment: usize,
    impair: Option<&mut Impair>,
    now: u64,
    failures: &mut u64,
) {
    let Some(imp) = impair.filter(|i| i.on_send) else {
        if !send_all(socket, addr, connected, data, segment) {
            *failures += 1;
        }
        return;
    };
    // Datagrams that go out now, once each, in a row, leave in one (GSO) send, as without
    // impairment; a drop, a copy or a delay ends the run.
    let seg = segment.max(1);
    let mut run = 0..0;
    let flush = |run: &mut std::ops::Range<usize>, failures: &mut u64| {
        if run.start < run.end && !send_all(socket, addr, connected, &data[run.clone()], seg) {
            *failures += 1;
        }
        *run = run.end..run.end;
    };
    for (i, d) in data.chunks(seg).enumerate() {
        let start = i * seg;
        let verdict = imp.imp.admit(now, d.len());
        let times = verdict.release_times();
        if let [at] = times {
            if *at <= now && run.end == start {
                run.end = start + d.len();
                continue;
            }
        }
        flush(&mut run, failures);
        for &at in times {
            if at <= now {
                if !send_all(socket, addr, connected, d, d.len()) {
                    *failures += 1;
                }
            } else if !imp.queue.push_copy(at, addr, d) {
                *failures += 1;
            }
        }
        run = start + d.len()..start + d.len();
    }
    flush(&mut run, failures);
}

/// Datagrams the protocol core produced under the lock, with their destinations resolved, to
/// be sent after the lock is released (repairs must not hold up `send`).
#[derive(Default)]
struct Collected {
    data: Vec<u8>,
    /// Batches of datagrams in `data`: where, and their segment size.
    batches: Vec<(std::ops::Range<usize>, usize)>,
    /// Which batch goes where.
    runs: Vec<(SocketAddr, usize)>,
}

impl Collected {
    /// Seals (with the sender's own sealer) and sends everything collected, then empties it.
    /// Addresses are given explicitly: the socket may be connected or disconnected meanwhile.
    fn send(
        &mut self,
        socket: &UdpSocket,
        seal: Option<&mut Sealer>,
        mut impair: Option<&mut Impair>,
        now: u64,
        failures: &mut u64,
    ) {
        if let Some(s) = seal {
            for (range, segment) in &self.batches {
                s.seal_segments(&mut self.data[range.clone()], *segment);
            }
        }
        for (addr, batch) in self.runs.drain(..) {
            let (range, segment) = self.batches[batch].clone();
            let data = &self.data[range];
            send_to(
                socket,
                addr,
                None,
                data,
                segment,
                impair.as_deref_mut(),
                now,
                failures,
            );
        }
        self.data.clear();
        self.batches.clear();
    }
}

struct Collect<'a> {
    into: &'a mut Collected,
    group: Option<SocketAddr>,
    all: &'a [SocketAddr],
    by_id: &'a IdMap<SocketAddr>,
    /// The room the service thread's sealer needs (it seals after the lock is released).
    room: (usize, usize),
}

impl Sink for Collect<'_> {
    fn room(&self) -> (usize, usize) {
        self.room
    }

    fn send(&mut self, dest: Dest<'_>, data: &mut [u8], segment: usize) {
        let targets: Vec<SocketAddr> = targets(dest, self.group, self.all, self.by_id).collect();
        if targets.is_empty() {
            return;
        }
        let start = self.into.data.len();
        self.into.data.extend_from_slice(data);
        let batch = self.into.batches.len();
        self.into
            .batches
            .push((start..self.into.data.len(), segment));
        for t in targets {
            self.into.runs.push((t, batch));
        }
    }
}

/// Sends held-back datagrams whose time has come; returns when the next one is due.
fn flush_delayed(
    socket: &UdpSocket,
    connected: Option<SocketAddr>,
    impair: &mut Option<Impair>,
    now: u64,
    failures: &mut u64,
) -> u64 {
    let Some(imp) = impair.as_mut() else {
        return u64::MAX;
    };
    while let Some(d) = imp.queue.pop_due(now) {
        if !send_all(socket, d.addr, connected, &d.data, d.data.len()) {
            *failures += 1;
        }
        imp.queue.recycle(d.data);
    }
    imp.queue.next_due().unwrap_or(u64::MAX)
}

// ---------------------------------------------------------------------------------------------
// Publisher

struct PubCore {
    sender: Sender,
    dests: Vec<SocketAddr>,
    receivers: IdMap<SocketAddr>,
    impair: Option<Impair>,
    sub_epoch: u64,
    send_failures: u64,
    next_deadline: u64,
    /// When the service thread next asks the kernel for the socket's drop count.
    next_drops_check: u64,
    /// Receivers known by address (directory or discovery): forgotten when they go away.
    expected: std::collections::HashSet<u64>,
    /// The multicast group data goes to, if any.
    group: Option<SocketAddr>,
    /// The one subscriber the socket is connected to (unicast to a single destination).
    connected: Option<SocketAddr>,
    /// Subscribers of other hosts that discovery announced but that have not yet proven they
    /// receive at their address: nothing but challenges goes there.
    pending: IdMap<Pending>,
    /// The domain key's sealing side for what the application thread and the service thread
    /// send under the lock (repairs outside it have their own).
    seal: Option<Sealer>,
    /// Challenges not sent to keep within three times what an address sent.
    challenges_withheld: u64,
    /// Subscribers of other hosts that echoed their challenge, with the address they proved.
    validated: std::collections::HashSet<(u64, SocketAddr)>,
    /// Subscribers discovery announced with another type than this publisher's: left out,
    /// each counted once (`PublisherSlot::other_type`).
    other_type: std::collections::HashSet<u64>,
    next_challenge_round: u64,
    flush: Flush,
    /// The smallest message limit of the reliable subscribers of this host it sends to, and
    /// the node of that subscriber (from the directory): a larger message is refused with an
    /// error instead of being refused on arrival.
    subscriber_limit: Option<(usize, String)>,
    /// Reliable UDP subscribers that the shared topic directory showed in another network
    /// namespace when this publisher was made (containers sharing /dev/shm on networks of their
    /// own), by receiver id: discovery has yet to announce them, and the first sends wait for
    /// them (until `awaited_until`, ns) as they would not for one that is not there yet.
    awaited: Vec<u64>,
    awaited_until: u64,
}

/// How long a new publisher's first sends wait for the reliable subscribers that the shared
/// directory shows in another network namespace: four discovery periods and a challenge.
const AWAIT_DIRECTORY_NS: u64 = 2_500_000_000;

/// Who sends the publisher's small messages: the application's thread, one send each, or the
/// flusher thread, batched.
#[derive(Default)]
struct Flush {
    /// The flusher owns the queue: messages queue for it, and nothing is sent inline until it
    /// has sent them all.
    active: bool,
    /// The flusher waits for work (a notify wakes it).
    sleeping: bool,
    /// The flusher sends frames outside the lock that the sender core counts as sent: no
    /// heartbeat may say so before they are out (a receiver would NAK them).
    sending: bool,
    /// Application threads waiting for queue room or for the flusher to finish.
    waiting: u32,
    /// When the last data send ended (ns), and what an inline send costs (ns, smoothed).
    last_send_end: u64,
    send_cost: u64,
}

impl Flush {
    /// Whether an application that publishes now, at `now`, outpaces the socket: it came back
    /// sooner after the last send than a send takes.
    fn outpaced(&self, now: u64) -> bool {
        self.last_send_end != 0 && now.saturating_sub(self.last_send_end) < self.send_cost
    }

    fn sent_inline(&mut self, start: u64, end: u64) {
        let cost = end.saturating_sub(start);
        self.send_cost = if self.send_cost == 0 {
            cost
        } else {
            (self.send_cost * 7 + cost) / 8
        };
        self.last_send_end = end;
    }
}

/// A subscriber announced by discovery, not yet validated.
struct Pending {
    addr: SocketAddr,
    /// Bytes of the announcements that named it, and challenge bytes sent to it: at most
    /// three times the first.
    heard: u64,
    sent: u64,
    next_challenge_ns: u64,
}

/// Bytes of a challenge heartbeat (unsealed).
const CHALLENGE_BYTES: u64 = 56;

/// A challenge sent at most this often to one address.
const CHALLENGE_INTERVAL_NS: u64 = 250_000_000;

impl PubCore {
    fn out<'a>(&'a mut self, socket: &'a UdpSocket, now: u64) -> (&'a mut Sender, Out<'a>) {
        (
            &mut self.sender,
            Out {
                socket,
                group: self.group,
                connected: self.connected,
                all: &self.dests,
                by_id: &self.receivers,
                impair: self.impair.as_mut(),
                seal: self.seal.as_mut(),
                now,
                send_failures: &mut self.send_failures,
            },
        )
    }
}

/// Whether two ends' type hashes (0: none declared) are of different types: an end that
/// declares none takes any.
fn other_type(mine: u64, theirs: u64) -> bool {
    mine != 0 && theirs != 0 && mine != theirs
}

struct PubShared {
    socket: UdpSocket,
    topic: Topic,
    topic_name: String,
    slot: usize,
    /// Announces this publisher to other hosts and tells it about their subscribers (IPv4).
    discovery: Option<(Arc<Agent>, u64)>,
    /// Under `auto`: subscribers of this host that read shared memory get it there, not here.
    skip_shm_readers: bool,
    /// The hash of the type this publisher declares (0: none).
    type_hash: u64,
    /// Destinations known now (read without the lock on the send path).
    dest_count: std::sync::atomic::AtomicUsize,
    core: Mutex<PubCore>,
    /// Signalled when credit may have arrived or the in-progress message finished.
    progress: Condvar,
    /// Wakes the flusher: messages queued, credit arrived, or the publisher closes.
    flush_wake: Condvar,
    stop: AtomicBool,
    /// Keys the challenges: only this process can compute the one for an address.
    secret: std::collections::hash_map::RandomState,
}

impl PubShared {
    /// The challenge an address must echo to prove it receives what is sent there.
    fn challenge_for(&self, receiver: u64, addr: SocketAddr) -> u64 {
        use std::hash::BuildHasher;
        self.secret.hash_one((receiver, addr)).max(1)
    }

    /// Sends challenges to the subscribers discovery announced that have not proven their
    /// address: each at most every 250 ms and, in all, at most three times the bytes of the
    /// announcements that named it (an off-path sender cannot make us send a stranger more
    /// than it sent). Challenges withheld for that are counted.
    fn challenge_pending(&self, core: &mut PubCore, now: u64) {
        if core.pending.is_empty() || now < core.next_challenge_round {
            return;
        }
        core.next_challenge_round = now + 50_000_000;
        if let Some((agent, _)) = &self.discovery {
            for r in agent.remote_subscribers(&self.topic_name) {
                if let Some(p) = core.pending.get_mut(&r.id) {
                    if p.addr == r.addr {
                        p.heard = r.heard_bytes;
                    }
                }
            }
        }
        let due: Vec<(u64, SocketAddr)> = core
            .pending
            .iter()
            .filter(|(_, p)| now >= p.next_challenge_ns)
            .map(|(&id, p)| (id, p.addr))
            .collect();
        for (id, addr) in due {
            let p = core.pending.get_mut(&id).expect("listed above");
            p.next_challenge_ns = now + CHALLENGE_INTERVAL_NS;
            let bytes = CHALLENGE_BYTES
                + if core.seal.is_some() {
                    SEAL_OVERHEAD as u64
                } else {
                    0
                };
            if p.sent + bytes > 3 * p.heard {
                core.challenges_withheld += 1;
                continue;
            }
            p.sent += bytes;
            let mut datagram = core.sender.challenge(self.challenge_for(id, addr));
            if let Some(s) = core.seal.as_mut() {
                let mut sealed = Vec::with_capacity(datagram.len() + SEAL_OVERHEAD);
                s.seal_into(&datagram, &mut sealed);
                datagram = sealed;
            }
            send_to(
                &self.socket,
                addr,
                None,
                &datagram,
                datagram.len(),
                None,
                now,
                &mut core.send_failures,
            );
        }
    }

    fn lock(&self) -> MutexGuard<'_, PubCore> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Follows the subscriber table (this host) and discovery (other hosts): the UDP
    /// subscribers' addresses.
    /// Receiver ids of the ready, reliable UDP subscribers in the topic's directory whose host
    /// (network namespace) is not this one's, less those an `auto` publisher reaches over shared
    /// memory (as `refresh_dests` leaves them out).
    fn subscribers_elsewhere(&self) -> Vec<u64> {
        let here = crate::sys::host_id();
        self.topic
            .block()
            .subscribers
            .iter()
            .filter(|s| {
                // Acquire pairs with the Release in `Owner::set_ready`.
                s.owner.ready.load(Ordering::Acquire) != 0
                    && s.transport.load(Ordering::Relaxed) & TRANSPORT_UDP != 0
                    && s.reliable.load(Ordering::Relaxed) != 0
                    && s.owner.host.load(Ordering::Relaxed) != here
                    && !(self.skip_shm_readers
                        && s.transport.load(Ordering::Relaxed) & TRANSPORT_SHM != 0)
            })
            .map(|s| s.udp_receiver.load(Ordering::Relaxed))
            .collect()
    }

    fn refresh_dests(&self, core: &mut PubCore) {
        let generation = self.discovery.as_ref().map_or(0, |(a, _)| a.generation());
        let epoch = self.topic.sub_epoch() ^ generation.rotate_left(32);
        if epoch == core.sub_epoch {
            return;
        }
        core.sub_epoch = epoch;
        let now = monotonic_ns();
        if core.sender.busy() {
            // Messages queued before the change go to the subscribers there were when they
            // were published (as far as credit and the pacer let them go now): a newcomer
            // joins from the next message.
            let (sender, mut out) = core.out(&self.socket, now);
            sender.pump_while_credit(now, &mut out);
        }
        let mut dests = Vec::new();
        let mut limit: Option<(usize, String)> = None;
        let mut present = std::collections::HashSet::new();
        let here = crate::sys::host_id();
        for s in self.topic.block().subscribers.iter() {
            // Acquire pairs with the Release in `Owner::set_ready`.
            if s.owner.ready.load(Ordering::Acquire) == 0
                || s.transport.load(Ordering::Relaxed) & TRANSPORT_UDP == 0
                || s.owner.host.load(Ordering::Relaxed) != here
                || (self.skip_shm_readers
                    && s.transport.load(Ordering::Relaxed) & TRANSPORT_SHM != 0)
            {
                continue;
            }
            if let Some(addr) = s.udp.load() {
                let max = s.max_message.load(Ordering::Relaxed) as usize;
                if s.reliable.load(Ordering::Relaxed) != 0
                    && max > 0
                    && limit.as_ref().map_or(true, |(m, _)| max < *m)
                {
                    limit = Some((max, format!("node {:?} of this host", s.owner.node())));
                }
                if !dests.contains(&addr) {
                    dests.push(addr);
                }
                let id = s.udp_receiver.load(Ordering::Relaxed);
                core.receivers.insert(id, addr);
                core.sender
                    .expect_receiver(id, s.reliable.load(Ordering::Relaxed) != 0, now);
                present.insert(id);
            }
        }
        let mut announced = std::collections::HashSet::new();
        if let Some((agent, _)) = &self.discovery {
            for r in agent.remote_subscribers(&self.topic_name) {
                announced.insert(r.id);
                if other_type(self.type_hash, r.type_hash) {
                    // A subscriber of another type: never a destination (not even challenged).
                    if core.other_type.insert(r.id) {
                        self.topic
                            .publisher(self.slot)
                            .other_type
                            .fetch_add(1, Ordering::Relaxed);
                    }
                    continue;
                }
                if !core.validated.contains(&(r.id, r.addr)) {
                    // Not proven to receive there: challenge it first.
                    let p = core.pending.entry(r.id).or_insert(Pending {
                        addr: r.addr,
                        heard: 0,
                        sent: 0,
                        next_challenge_ns: now,
                    });
                    if p.addr != r.addr {
                        p.addr = r.addr;
                        p.next_challenge_ns = now;
                    }
                    p.heard = r.heard_bytes;
                    core.next_challenge_round = now;
                    continue;
                }
                if !dests.contains(&r.addr) {
                    dests.push(r.addr);
                }
                let max = r.max_message as usize;
                if r.reliable && max > 0 && limit.as_ref().map_or(true, |(m, _)| max < *m) {
                    limit = Some((max, format!("a subscriber at {}", r.addr)));
                }
                core.receivers.insert(r.id, r.addr);
                core.sender.expect_receiver(r.id, r.reliable, now);
                present.insert(r.id);
            }
        }
        core.pending.retain(|id, _| announced.contains(id));
        core.other_type.retain(|id| announced.contains(id));
        core.validated.retain(|(id, _)| announced.contains(id));
        for gone in core
            .expected
            .difference(&present)
            .copied()
            .collect::<Vec<_>>()
        {
            core.sender.forget_receiver(gone);
            core.receivers.remove(&gone);
        }
        // A new subscriber hears the session at once (it joins from the next message).
        if present.iter().any(|id| !core.expected.contains(id)) {
            let c = &mut *core;
            let (sender, mut out) = c.out(&self.socket, now);
            sender.heartbeat_now(now, &mut out);
        }
        core.expected = present;
        core.subscriber_limit = limit;
        self.dest_count.store(dests.len(), Ordering::Relaxed);
        // One unicast destination: connect to it (sends skip the route lookup). The socket then
        // hears that subscriber only, which is every subscriber that can hear us; any change
        // dissolves the association first.
        // (Not while an announced subscriber is being challenged: a connected socket would not
        // hear its answer.)
        let want = match (&dests[..], core.group) {
            ([one], None) if core.pending.is_empty() => Some(*one),
            _ => None,
        };
        if want != core.connected {
            if core.connected.is_some() {
                core.connected = None;
                if self.socket.connect(None).is_err() {
                    // Still associated with the old peer: keep sending with addresses (which
                    // works); its replies are all the socket hears until the next change.
                    core.dests = dests;
                    return;
                }
            }
            if want.is_some() && self.socket.connect(want).is_ok() {
                core.connected = want;
            }
        }
        core.dests = dests;
    }

    /// Control frames (STATUS, NAK) of `batch` into the sender; true if there were any. Only a
    /// receiver registered (topic directory, discovery) at the address the frame came from is
    /// heard; everything else is refused and counted. Repairs are collected into `repairs`, to
    /// be sent once the lock is released.
    #[allow(clippy::too_many_arguments)]
    fn handle_control(
        &self,
        core: &mut PubCore,
        batch: &mut RecvBatch,
        got: usize,
        now: u64,
        repairs: &mut Collected,
        mut open: Option<&mut Opener>,
    ) -> bool {
        let mut progressed = false;
        for i in 0..got {
            let Some((src, bytes)) = batch.get_mut(i) else {
                break;
            };
            if let Some(imp) = core.impair.as_mut().filter(|i| i.on_receive) {
                if imp.imp.admit(now, bytes.len()).is_drop() {
                    continue;
                }
            }
            let f = match unseal(open.as_deref_mut(), bytes) {
                Ok(f) => f,
                Err(why) => {
                    core.sender.refuse(why);
                    continue;
                }
            };
            let ours = f.common().topic == core.sender.topic()
                && f.common().session == core.sender.session();
            match &f {
                Frame::Status { receiver, .. } | Frame::Nak { receiver, .. }
                    if ours && core.receivers.get(receiver) == Some(&src) => {}
                Frame::Status { receiver, echo, .. }
                    if ours
                        && core.pending.get(receiver).is_some_and(|p| p.addr == src)
                        && *echo == self.challenge_for(*receiver, src) =>
                {
                    // The announced subscriber proved it receives at its address: it joins at
                    // the next look at the subscribers.
                    core.pending.remove(receiver);
                    core.validated.insert((*receiver, src));
                    core.sub_epoch = u64::MAX;
                    continue;
                }
                _ => {
                    core.sender.refuse(Refusal::Unknown);
                    continue;
                }
            }
            let mut sink = Collect {
                into: repairs,
                group: core.group,
                all: &core.dests,
                by_id: &core.receivers,
                room: seal_room(core.seal.is_some()),
            };
            core.sender.handle(now, &f, &mut sink);
            progressed = true;
        }
        progressed
    }

    fn publish_stats(&self, core: &mut PubCore, now: u64) {
        let s = core.sender.stats();
        let p = self.topic.publisher(self.slot);
        p.sent.store(s.messages, Ordering::Relaxed);
        p.bytes.store(s.bytes, Ordering::Relaxed);
        p.retransmitted
            .store(s.retransmitted_frames, Ordering::Relaxed);
        p.send_errors.store(core.send_failures, Ordering::Relaxed);
        store_refusals(&p.refused, &s.refusals);
        p.repairs_deferred
            .store(s.repairs_deferred, Ordering::Relaxed);
        p.challenges_withheld
            .store(core.challenges_withheld, Ordering::Relaxed);
        let cc = &s.congestion;
        for (slot, value) in [
            (&p.repair_bytes, s.repair_bytes),
            (&p.repairs_suppressed, s.repairs_suppressed),
            (&p.pacing_rate, cc.pacing_rate),
            (&p.bottleneck_rate, cc.bottleneck_rate),
            (&p.min_rtt_ns, cc.min_rtt_ns),
            (&p.foreign_queue_ns, cc.foreign_queue_ns),
            (&p.paced_waits, cc.paced_waits),
            (&p.window_waits, cc.window_waits),
            (&p.congestion_events, cc.congestion_events),
            (&p.noise_loss_events, cc.noise_loss_events),
            (&p.queue_events, cc.queue_events),
            (&p.datagrams, s.frames),
            (&p.batches, s.batches),
            (&p.batched_messages, s.batched_messages),
            (&p.left_out, s.left_out),
        ] {
            slot.store(value, Ordering::Relaxed);
        }
        store_endpoint_counters(
            (&self.socket, &self.discovery),
            (&p.discovery_refused, &p.kernel_drops),
            now,
            &mut core.next_drops_check,
        );
    }
}

/// Stores into an endpoint's slot the refusals of its discovery and the datagrams the kernel
/// dropped on its socket. Counting drops is a system call: at most every 10 ms (after
/// `next_drops_check`), not on every wake-up of the thread that calls this.
fn store_endpoint_counters(
    (socket, discovery): (&UdpSocket, &Option<(Arc<Agent>, u64)>),
    (discovery_refused, kernel_drops): (&[AtomicU64; 4], &AtomicU64),
    now: u64,
    next_drops_check: &mut u64,
) {
    if let Some((agent, _)) = discovery {
        store_discovery(discovery_refused, &agent.refusals());
    }
    if now >= *next_drops_check {
        *next_drops_check = now + 10_000_000;
        kernel_drops.store(socket.kernel_drops(), Ordering::Relaxed);
    }
}

/// The service thread: control frames in, heartbeats out, credit handed to a waiting sender.
/// `impair` is the service thread's own (repairs leave from this thread, outside the lock).
fn publisher_service(
    shared: Arc<PubShared>,
    mut impair: Option<Impair>,
    mut seal: Option<Sealer>,
    mut open: Option<Opener>,
) {
    let mut batch = RecvBatch::for_socket(&shared.socket);
    let mut repairs = Collected::default();
    let mut repair_failures = 0u64;
    let mut repair_due = u64::MAX;
    while !shared.stop.load(Ordering::Acquire) {
        let wait = {
            let core = shared.lock();
            core.next_deadline
                .saturating_sub(monotonic_ns())
                .clamp(100_000, 10_000_000)
        };
        let got = shared
            .socket
            .recv_batch(&mut batch, Some(Duration::from_nanos(wait)))
            .unwrap_or(0);
        let now = monotonic_ns();
        let mut guard = shared.lock();
        let core = &mut *guard;
        let mut progressed =
            shared.handle_control(core, &mut batch, got, now, &mut repairs, open.as_mut());
        shared.refresh_dests(core);
        shared.challenge_pending(core, now);
        let (flushing, flushing_now) = (core.flush.active, core.flush.sending);
        let (sender, mut out) = core.out(&shared.socket, now);
        if flushing {
            if progressed {
                // Credit for what the flusher holds.
                shared.flush_wake.notify_one();
            }
        } else if sender.busy() && (progressed || now >= sender.next_send_ns()) {
            // Credit arrived, or the pacer's time came, while the application waits or after
            // its send timed out.
            progressed |= sender.pump_while_credit(now, &mut out);
        }
        let next = if flushing_now {
            // Heartbeats wait until what the flusher sends is out.
            now + 100_000
        } else {
            sender.tick(now, &mut out).min(sender.next_send_ns())
        };
        let delayed = flush_delayed(
            &shared.socket,
            core.connected,
            &mut core.impair,
            now,
            &mut core.send_failures,
        );
        core.next_deadline = next.min(delayed).min(repair_due);
        core.send_failures += std::mem::take(&mut repair_failures);
        shared.publish_stats(core, now);
        drop(guard);
        if progressed {
            shared.progress.notify_all();
        }
        // Repairs leave without the lock, so that they never hold up the application's `send`.
        repairs.send(
            &shared.socket,
            seal.as_mut(),
            impair.as_mut(),
            now,
            &mut repair_failures,
        );
        repair_due = flush_delayed(&shared.socket, None, &mut impair, now, &mut repair_failures);
    }
}

/// The flusher thread: sends what the application queued, batched, outside the lock (so the
/// application keeps queueing meanwhile), until the queue is empty; then sleeps until the next
/// burst. `impair` and `seal` are its own.
fn publisher_flusher(shared: Arc<PubShared>, mut impair: Option<Impair>, mut seal: Option<Sealer>) {
    let mut batch = Collected::default();
    let mut failures = 0u64;
    let mut delayed_due = u64::MAX;
    let mut guard = shared.lock();
    while !shared.stop.load(Ordering::Acquire) {
        let now = monotonic_ns();
        let core = &mut *guard;
        core.send_failures += std::mem::take(&mut failures);
        let pause = Duration::from_nanos(delayed_due.saturating_sub(now).min(100_000_000));
        if !core.flush.active || !core.sender.busy() {
            // The burst is over: what comes next is sent inline again, until the next one.
            if core.flush.active {
                core.flush.active = false;
                if core.flush.waiting > 0 {
                    shared.progress.notify_all();
                }
            }
            core.flush.sleeping = true;
            guard = shared
                .flush_wake
                .wait_timeout(guard, pause)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            guard.flush.sleeping = false;
            delayed_due = flush_delayed(
                &shared.socket,
                None,
                &mut impair,
                monotonic_ns(),
                &mut failures,
            );
            continue;
        }
        shared.refresh_dests(core);
        let mut sink = Collect {
            into: &mut batch,
            group: core.group,
            all: &core.dests,
            by_id: &core.receivers,
            room: seal_room(seal.is_some()),
        };
        core.sender.pump_while_credit(now, &mut sink);
        if batch.runs.is_empty() {
            batch.data.clear();
            batch.batches.clear();
            // Held by the pacer or by a receiver's window (the service thread wakes us when
            // credit comes).
            let wake = core.sender.next_send_ns();
            let pace = Duration::from_nanos(wake.saturating_sub(now));
            if wake != u64::MAX && pace < PACE_SPIN {
                drop(guard);
                let until = Instant::now() + pace;
                while Instant::now() < until {
                    std::thread::yield_now();
                }
                guard = shared.lock();
            } else {
                let wait = pace.min(pause).min(Duration::from_millis(10));
                guard = shared
                    .flush_wake
                    .wait_timeout(guard, wait)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            continue;
        }
        core.flush.sending = true;
        drop(guard);
        batch.send(
            &shared.socket,
            seal.as_mut(),
            impair.as_mut(),
            now,
            &mut failures,
        );
        let end = monotonic_ns();
        delayed_due = flush_delayed(&shared.socket, None, &mut impair, end, &mut failures);
        guard = shared.lock();
        guard.flush.sending = false;
        guard.flush.last_send_end = end;
        if guard.flush.waiting > 0 {
            // Room in the queue.
            shared.progress.notify_all();
        }
    }
}

/// A pacing wait shorter than this yields instead of sleeping (a timed sleep overshoots by tens
/// of microseconds, more than a quantum takes on a fast link).
const PACE_SPIN: Duration = Duration::from_micros(200);
/// The most publisher sessions a UDP subscriber's QoS may ask it to track (`Qos::max_sessions`).
const MAX_SESSIONS: usize = 1 << 16;

pub struct UdpPublisher {
    shared: Arc<PubShared>,
    service: Option<JoinHandle<()>>,
    flusher: Option<JoinHandle<()>>,
    token: u64,
    /// The session id its frames carry (what a subscriber's `Sample::publisher` reports).
    session: u64,
    max_message: usize,
    send_timeout: Duration,
    reliable: bool,
    /// Whether dropping it waits (up to `send_timeout`) for reliable receivers to take what it
    /// sent; not for a service client's requests, which nobody answers once it has gone.
    linger: bool,
}

impl UdpPublisher {
    /// Dropping it will not wait for reliable receivers to take what it sent.
    pub fn no_linger(&mut self) {
        self.linger = false;
    }

    pub fn create(
        config: &NodeConfig,
        topic_name: &str,
        node: &str,
        qos: &Qos,
    ) -> Result<UdpPublisher, Error> {
        let (domain, key) = (config.domain(), config.key());
        // Sealed datagrams must still fit the path MTU.
        let max_datagram = qos.max_datagram()? - if key.is_some() { SEAL_OVERHEAD } else { 0 };
        if qos.max_receivers == 0 {
            return Err(Error::InvalidQos("max_receivers must be at least 1".into()));
        }
        if qos.max_rate.is_some_and(|r| r < 8_000) {
            return Err(Error::InvalidQos(
                "max_rate must be at least 8000 bits per second".into(),
            ));
        }
        if qos.max_message_size as u64 > u32::MAX as u64 {
            return Err(Error::InvalidQos(
                "max_message_size must be below 4 GiB".into(),
            ));
        }
        let reliable = qos.delivery == Delivery::Reliable;
        let impair_cfg = config.active_impairment().cloned();
        let impair = impair_cfg.clone().map(Impair::new);
        // The service thread impairs the repairs it sends with a generator of its own.
        let service_impair = impair_cfg.clone().map(|mut c| {
            c.seed ^= 0x5EED_0F4E_9A1B;
            Impair::new(c)
        });
        // And the flusher what it sends.
        let flusher_impair = impair_cfg.map(|mut c| {
            c.seed ^= 0xF1_05E5_BA7C;
            Impair::new(c)
        });
        let (socket, addr) = bind_udp(qos, config.discovery(), Some(4 << 20), false)?;
        let topic = Topic::open(domain, topic_name, config.shm_mode())?;
        let (slot, token) = topic.claim_publisher(node, qos.topic_type.as_ref())?;
        let p = topic.publisher(slot);
        p.reliable.store(reliable as u32, Ordering::Relaxed);
        p.transport.store(TRANSPORT_UDP, Ordering::Relaxed);
        p.multicast
            .store(qos.multicast.is_some() as u32, Ordering::Relaxed);
        p.max_message
            .store(qos.max_message_size as u64, Ordering::Relaxed);
        p.udp.store(Some(addr));
        let window = (64u64 << 20).max(2 * qos.max_message_size as u64);
        let cfg = SenderConfig {
            max_datagram,
            reliable,
            window_bytes: window,
            max_receivers: qos.max_receivers,
            rate_cap: qos.max_rate.map_or(u64::MAX, |bits| bits / 8),
            fan_out: qos.multicast.is_none(),
            history: qos.history as u64,
            // A subscriber not heard from for the lease is gone (as a publisher is to it): it
            // no longer holds a reliable publisher back, nor a closing one lingering.
            receiver_timeout_ns: qos.lease.as_nanos().min(u64::MAX as u128) as u64,
            ..SenderConfig::default()
        };
        let session = new_id()?;
        let sender = Sender::new(frame::topic_id(domain, topic_name), session, cfg);
        let discovery = (qos.ip_version == IpVersion::V4).then(|| {
            let agent = discovery::agent(domain, key, config.discovery());
            let entry = agent.announce(Entry {
                role: Role::Publisher,
                topic: topic_name.to_owned(),
                port: addr.port(),
                id: session,
                reliable,
                max_message: 0,
                type_hash: qos.topic_type.as_ref().map_or(0, |t| t.hash()),
            });
            (agent, entry)
        });
        let shared = Arc::new(PubShared {
            socket,
            topic,
            topic_name: topic_name.to_owned(),
            discovery,
            skip_shm_readers: qos.transport == crate::Transport::Auto,
            type_hash: qos.topic_type.as_ref().map_or(0, |t| t.hash()),
            dest_count: std::sync::atomic::AtomicUsize::new(0),
            slot,
            core: Mutex::new(PubCore {
                sender,
                dests: Vec::new(),
                receivers: id_map(),
                impair,
                sub_epoch: u64::MAX,
                send_failures: 0,
                next_deadline: 0,
                next_drops_check: 0,
                expected: Default::default(),
                group: qos.multicast.map(|m| SocketAddr::new(m.group, m.port)),
                connected: None,
                pending: id_map(),
                seal: sealer(key)?,
                validated: Default::default(),
                other_type: Default::default(),
                next_challenge_round: 0,
                subscriber_limit: None,
                challenges_withheld: 0,
                flush: Flush::default(),
                awaited: Vec::new(),
                awaited_until: 0,
            }),
            progress: Condvar::new(),
            flush_wake: Condvar::new(),
            stop: AtomicBool::new(false),
            secret: Default::default(),
        });
        {
            let mut core = shared.lock();
            // Only where discovery can find them: without peers or multicast it never would,
            // and the first sends would wait for nothing.
            if reliable && shared.discovery.is_some() && config.discovery().reaches_other_hosts() {
                core.awaited = shared.subscribers_elsewhere();
                core.awaited_until = monotonic_ns().saturating_add(AWAIT_DIRECTORY_NS);
            }
            shared.refresh_dests(&mut core);
            // Announce the session at once, so subscribers join it from its first message.
            let now = monotonic_ns();
            let (sender, mut out) = core.out(&shared.socket, now);
            sender.tick(now, &mut out);
        }
        shared.topic.publisher_ready(slot);
        let s2 = shared.clone();
        let (service_seal, service_open) = (sealer(key)?, key.map(Opener::new).transpose()?);
        let service = std::thread::Builder::new()
            .name("ferry-udp-pub".into())
            .spawn(move || publisher_service(s2, service_impair, service_seal, service_open))
            .map_err(|e| Error::io("start the UDP publisher thread", e))?;
        let s3 = shared.clone();
        let flusher_seal = sealer(key)?;
        let flusher = std::thread::Builder::new()
            .name("ferry-udp-flush".into())
            .spawn(move || publisher_flusher(s3, flusher_impair, flusher_seal));
        let flusher = match flusher {
            Ok(t) => t,
            Err(e) => {
                shared.stop.store(true, Ordering::Release);
                let _ = service.join();
                return Err(Error::io("start the UDP publisher thread", e));
            }
        };
        Ok(UdpPublisher {
            shared,
            service: Some(service),
            flusher: Some(flusher),
            token,
            session,
            max_message: qos.max_message_size,
            send_timeout: qos.send_wait(),
            reliable,
            linger: true,
        })
    }

    /// Waits (bounded) until discovery has announced, and each has proved its address, the
    /// reliable subscribers that the shared directory showed in other network namespaces when
    /// this publisher was made, so that its first messages reach them as they would reach
    /// subscribers of this host. Those still missing at the deadline are not waited for again.
    fn await_directory<'a>(&'a self, mut core: MutexGuard<'a, PubCore>) -> MutexGuard<'a, PubCore> {
        loop {
            self.shared.refresh_dests(&mut core);
            let c = &mut *core;
            let receivers = &c.receivers;
            c.awaited.retain(|id| !receivers.contains_key(id));
            if c.awaited.is_empty() || monotonic_ns() >= c.awaited_until {
                c.awaited.clear();
                return core;
            }
            drop(core);
            std::thread::sleep(Duration::from_millis(2));
            core = self.shared.lock();
        }
    }

    /// `TooLarge` for a message longer than this publisher's largest.
    fn check_size(&self, len: usize) -> Result<(), SendError> {
        if len > self.max_message {
            return Err(SendError::TooLarge {
                len,
                max: self.max_message,
            });
        }
        Ok(())
    }

    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// The session id its frames carry.
    pub fn session(&self) -> u64 {
        self.session
    }

    /// Subscribers this publisher sends to (known by address), and reliable ones heard from.
    pub fn subscriber_count(&self) -> usize {
        let mut core = self.shared.lock();
        self.shared.refresh_dests(&mut core);
        let (reliable, latest) = core.sender.receiver_counts();
        core.dests.len().max(reliable + latest)
    }

    pub fn sent(&self) -> u64 {
        self.shared.lock().sender.stats().messages
    }

    /// The topic's directory (this host's endpoints).
    pub fn topic(&self) -> &Topic {
        &self.shared.topic
    }

    /// Its slot in the topic's directory (where its counters live).
    pub fn slot(&self) -> &crate::shm::layout::PublisherSlot {
        self.shared.topic.publisher(self.shared.slot)
    }

    /// Waits until every live reliable subscriber has taken everything sent so far (what the
    /// flusher holds leaves first), at most `timeout`; `Undelivered` says how many have not.
    pub fn flush(&self, timeout: Duration) -> Result<(), SendError> {
        let started = Instant::now();
        let mut deadline = Some(started + timeout);
        let mut core = self.shared.lock();
        while core.flush.active {
            core = self.wait_flusher(core, &mut deadline)?;
        }
        drop(core);
        loop {
            let (receivers, bytes) = {
                let mut core = self.shared.lock();
                let c = &mut *core;
                self.shared.refresh_dests(c);
                // Repairs and heartbeats go on meanwhile (the service thread), and so does
                // what flow control held back.
                let now = monotonic_ns();
                let (sender, mut out) = c.out(&self.shared.socket, now);
                sender.pump_while_credit(now, &mut out);
                sender.unconsumed()
            };
            if !self.reliable || receivers == 0 {
                return Ok(());
            }
            if started.elapsed() >= timeout {
                return Err(SendError::Undelivered {
                    receivers,
                    bytes,
                    after: timeout,
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The reliable subscriber furthest behind, if one has yet to take what was sent: its
    /// address and how far behind it is.
    pub fn slowest_subscriber(&self) -> Option<String> {
        let core = self.shared.lock();
        let (id, behind) = core.sender.slowest()?;
        let at = core
            .receivers
            .get(&id)
            .map_or_else(|| "an address not yet proven".to_owned(), |a| a.to_string());
        Some(format!("a subscriber at {at}, {behind} bytes behind"))
    }

    /// Subscribers of other hosts that discovery announces on this topic (an entry not heard
    /// for its expiry is gone).
    pub fn remote_subscriber_count(&self) -> usize {
        self.shared.discovery.as_ref().map_or(0, |(a, _)| {
            a.remote_subscribers(&self.shared.topic_name).len()
        })
    }

    /// True when some subscriber gets this publisher's messages over UDP (no lock taken).
    pub fn has_destinations(&self) -> bool {
        self.shared.dest_count.load(Ordering::Relaxed) > 0
    }

    /// An empty buffer to fill for `send_owned` (from the pool: no allocation in steady state).
    pub fn buffer(&self) -> Vec<u8> {
        self.shared.lock().sender.buffer()
    }

    /// A `len`-byte buffer to overwrite for `send_owned` (a loan's): it holds what an earlier
    /// message of this publisher left in it, zeroes only past that.
    pub fn buffer_of(&self, len: usize) -> Vec<u8> {
        self.shared.lock().sender.buffer_of(len)
    }

    pub fn send(&self, msg: &[u8]) -> Result<(), SendError> {
        // Refused before the copy: a message too large is never copied.
        self.check_size(msg.len())?;
        let mut buf = self.buffer();
        buf.extend_from_slice(msg);
        self.send_owned(buf)
    }

    /// Sends a filled buffer. Under reliable delivery this waits (up to the send timeout) for
    /// every live reliable subscriber's window; a message that times out is still completed, in
    /// order, as credit arrives.
    ///
    /// A small message published sooner after the last send than a send takes (a burst) is
    /// queued for the flusher thread, which sends the queue batched, and so is any message
    /// while the flusher has work; the call then returns at once unless the queue is full.
    pub fn send_owned(&self, msg: Vec<u8>) -> Result<(), SendError> {
        let len = msg.len();
        self.check_size(len)?;
        let mut deadline = None;
        let mut core = self.shared.lock();
        if !core.awaited.is_empty() {
            core = self.await_directory(core);
        }
        // A reliable subscriber of this host that would refuse the message says so now.
        self.shared.refresh_dests(&mut core);
        if let Some((max, node)) = &core.subscriber_limit {
            if len > *max {
                return Err(SendError::SubscriberLimit {
                    len,
                    max: *max,
                    subscriber: node.clone(),
                });
            }
        }
        loop {
            // While the flusher owns the queue, any message joins it (a large one would
            // otherwise wait for a queue that other threads may keep filling).
            let burst = core.sender.batchable(len) && core.flush.outpaced(monotonic_ns());
            if core.flush.active || burst {
                while !core.sender.can_take(len) {
                    core.sender.publisher_waits();
                    core = self.wait_flusher(core, &mut deadline)?;
                }
                core.sender.offer_owned(msg).expect("room checked");
                core.flush.active = true;
                if core.flush.sleeping {
                    core.flush.sleeping = false;
                    self.shared.flush_wake.notify_one();
                }
                return Ok(());
            }
            if !core.sender.busy() {
                break;
            }
            // What was sent before and still waits for credit goes first.
            core.sender.publisher_waits();
            let wake = core.sender.next_send_ns();
            core = self.wait_progress(core, &mut deadline, wake)?;
        }
        core.sender.offer_owned(msg).expect("not busy");
        let mut first = true;
        loop {
            let now = monotonic_ns();
            let c = &mut *core;
            self.shared.refresh_dests(c);
            let (sender, mut out) = c.out(&self.shared.socket, now);
            if sender.pump_while_credit(now, &mut out) {
                if first {
                    // Sent at the first try: what a send costs.
                    c.flush.sent_inline(now, monotonic_ns());
                }
                return Ok(());
            }
            first = false;
            sender.publisher_waits();
            let wake = sender.next_send_ns();
            core = self.wait_progress(core, &mut deadline, wake)?;
        }
    }

    /// Waits (up to the send timeout) for the flusher to make room or to finish.
    fn wait_flusher<'a>(
        &'a self,
        mut core: MutexGuard<'a, PubCore>,
        deadline: &mut Option<Instant>,
    ) -> Result<MutexGuard<'a, PubCore>, SendError> {
        core.flush.waiting += 1;
        let waited = self.wait_progress(core, deadline, u64::MAX);
        // The guard is gone on a timeout: the count is taken back under a new one.
        let mut core = match waited {
            Ok(core) => core,
            Err(e) => {
                self.shared.lock().flush.waiting -= 1;
                return Err(e);
            }
        };
        core.flush.waiting -= 1;
        Ok(core)
    }

    /// Waits for credit (a receiver's STATUS) or, when `wake_ns` is not `u64::MAX`, until the
    /// pacer lets the message go on at `wake_ns` (monotonic ns).
    fn wait_progress<'a>(
        &'a self,
        core: MutexGuard<'a, PubCore>,
        deadline: &mut Option<Instant>,
        wake_ns: u64,
    ) -> Result<MutexGuard<'a, PubCore>, SendError> {
        let now = Instant::now();
        let d = *deadline.get_or_insert_with(|| {
            self.shared
                .topic
                .publisher(self.shared.slot)
                .waits
                .fetch_add(1, Ordering::Relaxed);
            now + self.send_timeout
        });
        if now >= d {
            self.shared
                .topic
                .publisher(self.shared.slot)
                .timeouts
                .fetch_add(1, Ordering::Relaxed);
            return Err(SendError::Timeout(self.send_timeout));
        }
        let mut wait = (d - now).min(Duration::from_millis(10));
        if wake_ns != u64::MAX {
            let pace = Duration::from_nanos(wake_ns.saturating_sub(monotonic_ns()));
            if pace < PACE_SPIN {
                // Shorter than a timed sleep oversleeps: give the CPU away until then, unlocked.
                drop(core);
                let until = Instant::now() + pace;
                while Instant::now() < until {
                    std::thread::yield_now();
                }
                return Ok(self.shared.lock());
            }
            wait = wait.min(pace);
        }
        let (core, _) = self
            .shared
            .progress
            .wait_timeout(core, wait)
            .unwrap_or_else(|p| p.into_inner());
        Ok(core)
    }
}

impl Drop for UdpPublisher {
    fn drop(&mut self) {
        // Say goodbye, and linger (bounded) while reliable subscribers catch up and repair.
        {
            // What the flusher holds goes first (bounded by the send timeout).
            let mut deadline = None;
            let mut core = self.shared.lock();
            while core.flush.active {
                match self.wait_flusher(core, &mut deadline) {
                    Ok(c) => core = c,
                    Err(_) => {
                        core = self.shared.lock();
                        break;
                    }
                }
            }
            let now = monotonic_ns();
            let c = &mut *core;
            let (sender, mut out) = c.out(&self.shared.socket, now);
            sender.close(now, &mut out);
        }
        // Linger until every live reliable receiver reported that it took everything (receivers
        // report when they catch up), at most the send timeout: a reliable message is not
        // abandoned while its subscriber is merely slow. A dead receiver stops counting when it
        // times out.
        let linger = Instant::now() + self.send_timeout;
        while self.reliable && self.linger && Instant::now() < linger {
            if self.shared.lock().sender.all_consumed() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.shared.stop.store(true, Ordering::Release);
        {
            // Under the lock: the flusher either saw `stop` or waits already.
            let _core = self.shared.lock();
            self.shared.flush_wake.notify_all();
        }
        if let Some(t) = self.service.take() {
            let _ = t.join();
        }
        if let Some(t) = self.flusher.take() {
            let _ = t.join();
        }
        if let Some((agent, key)) = &self.shared.discovery {
            agent.withdraw(*key);
        }
        self.shared
            .topic
            .leave_publisher(self.shared.slot, self.token);
    }
}

impl std::fmt::Debug for UdpPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shared.topic.debug_participant(f, "UdpPublisher", None)
    }
}

// ---------------------------------------------------------------------------------------------
// Subscriber

pub struct UdpSubscriber {
    socket: UdpSocket,
    /// What the kernel refused us (a receive buffer capped by net.core.rmem_max), for the user.
    warnings: Vec<String>,
    topic: Topic,
    discovery: Option<(Arc<Agent>, u64)>,
    slot: usize,
    token: u64,
    rx: Receiver,
    batch: RecvBatch,
    publishers: IdMap<SocketAddr>,
    impair: Option<Impair>,
    held: Vec<(SocketAddr, Vec<u8>)>,
    current: Option<Delivered>,
    /// Messages kept past their receive (`keep`), with their ids, and the next id.
    kept: Vec<(u64, Delivered)>,
    next_kept: u64,
    next_tick: u64,
    wait: WaitStrategy,
    spin_window: Duration,
    send_failures: u64,
    /// When `tick` next asks the kernel for the socket's drop count.
    next_drops_check: u64,
    /// Sessions heard from since the last check of their publishers' addresses, and when to
    /// check again the ones still unverified.
    unverified: bool,
    next_verify_ns: u64,
    /// The hash of the type this subscriber declares (0: none), the publishers on other hosts
    /// found to declare another (each counted once, their sessions refused), and the discovery
    /// generation they were last looked for in.
    type_hash: u64,
    other_type: std::collections::HashSet<u64>,
    types_generation: u64,
    seal: Option<Sealer>,
    open: Option<Opener>,
    /// The largest number of publisher addresses kept (sessions, live or recently ended).
    max_publishers: usize,
}

impl UdpSubscriber {
    /// The topic's directory (this host's endpoints).
    pub fn topic(&self) -> &Topic {
        &self.topic
    }

    pub fn create(
        config: &NodeConfig,
        topic_name: &str,
        node: &str,
        qos: &Qos,
    ) -> Result<UdpSubscriber, Error> {
        let (domain, key) = (config.domain(), config.key());
        let max_datagram = qos.max_datagram()? - if key.is_some() { SEAL_OVERHEAD } else { 0 };
        let impair = config.active_impairment().cloned().map(Impair::new);
        let (socket, addr) = bind_udp(qos, config.discovery(), Some(16 << 20), true)?;
        // The window must fit the socket's receive buffer (the kernel counts about twice the
        // payload for full datagrams), and hold at least a few datagrams.
        let granted = socket.buffer_report().recv_granted as u64;
        let warnings = socket.buffer_report().warnings.clone();
        let window = (granted / 2).clamp(64 * max_datagram as u64, 8 << 20);
        let reliable = qos.delivery == Delivery::Reliable;
        let id = new_id()?;
        let max_sessions = qos.max_sessions;
        if !(1..=MAX_SESSIONS).contains(&max_sessions) {
            return Err(Error::InvalidQos(format!(
                "max_sessions must be between 1 and {MAX_SESSIONS}"
            )));
        }
        // What reassembly may buffer is sized from it: a message no publisher can send is refused
        // here, not wrapped into a limit that means nothing.
        if qos.max_message_size == 0 || qos.max_message_size as u64 > u32::MAX as u64 {
            return Err(Error::InvalidQos(
                "max_message_size must be at least 1 byte and below 4 GiB".into(),
            ));
        }
        let cfg = ReceiverConfig {
            reliable,
            max_message: qos.max_message_size,
            buffer_bytes: (64u64 << 20).max(4 * qos.max_message_size as u64),
            window,
            max_datagram,
            max_sessions,
            session_timeout_ns: qos.lease.as_nanos().min(u64::MAX as u128) as u64,
            history: qos.history as u64,
            ..ReceiverConfig::default()
        };
        let rx = Receiver::new(id, frame::topic_id(domain, topic_name), cfg);
        let topic = Topic::open(domain, topic_name, config.shm_mode())?;
        let (slot, token) = topic.claim_subscriber(node, qos.topic_type.as_ref())?;
        let s = topic.subscriber(slot);
        s.reliable.store(reliable as u32, Ordering::Relaxed);
        s.wait.store(qos.wait as u32, Ordering::Relaxed);
        // Under `auto` the subscriber also reads shared memory (a separate slot): an `auto`
        // publisher of this host reaches it there and leaves it out here.
        let bits = match qos.transport {
            crate::Transport::Auto => TRANSPORT_UDP | TRANSPORT_SHM,
            _ => TRANSPORT_UDP,
        };
        s.transport.store(bits, Ordering::Relaxed);
        s.multicast
            .store(qos.multicast.is_some() as u32, Ordering::Relaxed);
        s.max_message
            .store(qos.max_message_size as u64, Ordering::Relaxed);
        s.udp.store(Some(addr));
        s.udp_receiver.store(id, Ordering::Relaxed);
        topic.subscriber_ready(slot);
        let batch = RecvBatch::for_socket(&socket);
        let discovery = (qos.ip_version == IpVersion::V4).then(|| {
            let agent = discovery::agent(domain, key, config.discovery());
            // The limit said is what fits the wire's u32 (a larger one is no limit a message meets).
            let max = u32::try_from(qos.max_message_size).unwrap_or(u32::MAX);
            let entry = agent.announce(Entry {
                role: Role::Subscriber,
                topic: topic_name.to_owned(),
                port: addr.port(),
                id,
                reliable,
                max_message: max,
                type_hash: qos.topic_type.as_ref().map_or(0, |t| t.hash()),
            });
            (agent, entry)
        });
        Ok(UdpSubscriber {
            socket,
            warnings,
            topic,
            discovery,
            slot,
            token,
            rx,
            batch,
            publishers: id_map(),
            impair,
            held: Vec::new(),
            current: None,
            kept: Vec::new(),
            next_kept: 1,
            next_tick: 0,
            wait: qos.wait,
            spin_window: qos.spin_window,
            send_failures: 0,
            next_drops_check: 0,
            unverified: false,
            next_verify_ns: u64::MAX,
            type_hash: qos.topic_type.as_ref().map_or(0, |t| t.hash()),
            other_type: Default::default(),
            types_generation: 0,
            seal: sealer(key)?,
            open: key.map(Opener::new).transpose()?,
            max_publishers: max_sessions + 64,
        })
    }

    /// UDP publishers on this topic that are alive (as the topic directory says). Looking also
    /// takes what arrived, without waiting: a publisher of another host sends a subscriber
    /// nothing but challenges until it answers one, which it does when it receives (here, or
    /// in `poll`/`wait`).
    pub fn publisher_count(&mut self) -> usize {
        if self.rx.ready() == 0 {
            self.receive(None);
        }
        self.topic
            .block()
            .publishers
            .iter()
            .filter(|p| {
                p.transport.load(Ordering::Relaxed) & TRANSPORT_UDP != 0
                    && p.owner.liveness().0 == Liveness::Alive
            })
            .count()
    }

    /// Takes datagrams from the socket (waiting at most `timeout`; `None`: do not wait);
    /// returns the time they were taken.
    fn receive(&mut self, timeout: Option<Duration>) -> u64 {
        let got = self
            .socket
            .recv_batch(&mut self.batch, timeout)
            .unwrap_or_else(|_| {
                // Counted with the refused datagrams: something arrived that could not be read.
                self.rx.refuse(Refusal::Malformed);
                0
            });
        let now = monotonic_ns();
        let mut feed_one = |src, bytes: &mut [u8]| {
            feed(
                &mut self.rx,
                &mut self.publishers,
                self.open.as_mut(),
                now,
                src,
                bytes,
            )
        };
        for i in 0..got {
            let Some((src, bytes)) = self.batch.get_mut(i) else {
                break;
            };
            // Receive-side impairment decides when (and how often) the datagram arrives.
            let verdict = self
                .impair
                .as_mut()
                .filter(|i| i.on_receive)
                .map(|imp| imp.imp.admit(now, bytes.len()));
            match verdict.as_ref().map(|v| v.release_times()) {
                None => {
                    // Opened where it lies (no copy).
                    self.unverified |= feed_one(src, bytes);
                }
                Some(times) => {
                    // Dropped, held back or duplicated: each arrival gets a copy of its own.
                    for &at in times {
                        if at <= now {
                            self.held.push((src, bytes.to_vec()));
                        } else if let Some(imp) = self.impair.as_mut() {
                            imp.queue.push_copy(at, src, bytes);
                        }
                    }
                }
            }
        }
        if let Some(imp) = self.impair.as_mut() {
            while let Some(d) = imp.queue.pop_due(now) {
                self.held.push((d.addr, d.data));
            }
        }
        for (src, mut data) in std::mem::take(&mut self.held) {
            self.unverified |= feed_one(src, &mut data);
        }
        if now >= self.next_tick || self.rx.status_due() {
            self.tick(now);
        }
        now
    }

    /// Verifies the publisher addresses of new sessions: a session whose frames come from the
    /// address a UDP publisher registered in the topic directory (this host) or announced by
    /// discovery (with this session id) may be answered freely; until then the receiver keeps
    /// its replies within 3× what the address sent. Forgets the addresses of sessions the
    /// receiver no longer knows.
    /// Refuses the publishers that other hosts announce on this topic with another type than
    /// this subscriber's, whenever discovery learned something new: each is counted once
    /// (`SubscriberSlot::other_type`) and its session's frames are refused (`other-type`).
    fn refuse_other_types(&mut self) {
        let Some((agent, _)) = &self.discovery else {
            return;
        };
        let generation = agent.generation();
        if self.type_hash == 0 || generation == self.types_generation {
            return;
        }
        self.types_generation = generation;
        let announced: Vec<u64> = agent
            .remotes()
            .into_iter()
            .filter(|r| r.role == Role::Publisher && r.topic == self.topic.topic)
            .filter(|r| other_type(self.type_hash, r.type_hash))
            .map(|r| r.id)
            .collect();
        for id in &announced {
            if self.other_type.insert(*id) {
                self.rx.shun(*id);
                self.topic
                    .subscriber(self.slot)
                    .other_type
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        // Bounded by what discovery holds now.
        self.other_type.retain(|id| announced.contains(id));
    }

    fn verify_publishers(&mut self, now: u64) {
        if self.publishers.len() > self.max_publishers {
            let rx = &self.rx;
            self.publishers.retain(|id, _| rx.knows(*id));
        }
        // At once for a new session; then every 50 ms while any is unverified (its publisher's
        // announcement may come later than its first frame).
        if !self.unverified && now < self.next_verify_ns {
            return;
        }
        self.unverified = false;
        self.next_verify_ns = now + 50_000_000;
        let pending: Vec<u64> = self.rx.unverified().collect();
        if pending.is_empty() {
            self.next_verify_ns = u64::MAX;
            return;
        }
        let here = crate::sys::host_id();
        let local: Vec<SocketAddr> = self
            .topic
            .block()
            .publishers
            .iter()
            .filter(|p| {
                // Acquire pairs with the Release in `Owner::set_ready`.
                p.owner.ready.load(Ordering::Acquire) != 0
                    && p.transport.load(Ordering::Relaxed) & TRANSPORT_UDP != 0
                    && p.owner.host.load(Ordering::Relaxed) == here
            })
            .filter_map(|p| p.udp.load())
            .collect();
        let remote = self.discovery.as_ref().map(|(a, _)| a.remotes());
        for id in pending {
            let Some(src) = self.publishers.get(&id) else {
                continue;
            };
            let registered = local.contains(src)
                || remote.iter().flatten().any(|r| {
                    r.role == Role::Publisher
                        && r.id == id
                        && r.addr == *src
                        && r.topic == self.topic.topic
                });
            if registered {
                self.rx.verify(id);
            }
        }
    }

    fn tick(&mut self, now: u64) {
        self.refuse_other_types();
        self.verify_publishers(now);
        let mut out = Out {
            socket: &self.socket,
            group: None,
            connected: None,
            all: &[],
            by_id: &self.publishers,
            impair: self.impair.as_mut(),
            seal: self.seal.as_mut(),
            now,
            send_failures: &mut self.send_failures,
        };
        // Every 50 ms while a publisher's session is open; an idle subscriber (no session)
        // only refreshes its counters, every 500 ms, so that idle subscribers cost next to
        // nothing however many a process holds.
        let idle = if self.rx.sessions() == 0 {
            500_000_000
        } else {
            50_000_000
        };
        self.next_tick = self.rx.tick(now, &mut out).min(now + idle);
        if let Some(imp) = self.impair.as_ref() {
            if let Some(d) = imp.queue.next_due() {
                self.next_tick = self.next_tick.min(d);
            }
        }
        let s = self.topic.subscriber(self.slot);
        let st = self.rx.stats();
        s.lost.store(st.lost, Ordering::Relaxed);
        store_refusals(&s.refused, &st.refusals);
        s.evicted.store(st.evicted, Ordering::Relaxed);
        s.replies_withheld
            .store(st.replies_withheld, Ordering::Relaxed);
        s.sessions_evicted
            .store(st.sessions_evicted, Ordering::Relaxed);
        store_endpoint_counters(
            (&self.socket, &self.discovery),
            (&s.discovery_refused, &s.kernel_drops),
            now,
            &mut self.next_drops_check,
        );
    }

    fn take(&mut self, now: u64) -> bool {
        if let Some(d) = self.current.take() {
            self.rx.recycle(d.data);
        }
        self.current = self.rx.take(now);
        if self.rx.status_due() {
            self.tick(now);
        }
        if let Some(d) = &self.current {
            let s = self.topic.subscriber(self.slot);
            s.received
                .store(s.received.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            s.bytes.store(
                s.bytes.load(Ordering::Relaxed) + d.data.len() as u64,
                Ordering::Relaxed,
            );
            if d.lost_before > 0 {
                s.skipped.fetch_add(d.lost_before, Ordering::Relaxed);
            }
            true
        } else {
            false
        }
    }

    /// For a wait set: takes in what the socket holds (when `socket` says it may hold
    /// something, or the protocol's timers are due) and runs those timers, and says whether a
    /// message (or, with `events`, a publisher event) is waiting, without taking it.
    pub fn look(&mut self, events: bool, socket: bool) -> bool {
        let slack = crate::waiting::SLACK.as_nanos() as u64;
        let due = || monotonic_ns().saturating_add(slack) >= self.next_tick;
        if self.rx.ready() == 0 && (socket || due()) {
            let now = self.receive(None);
            // Timers due within the slack run now (see `ShmSubscriber::look`).
            if now.saturating_add(slack) >= self.next_tick {
                self.tick(now);
            }
        }
        self.rx.ready() > 0 || (events && self.rx.has_events())
    }

    /// For a wait set: the socket to wait on, and when (`monotonic_ns`) the protocol next needs
    /// a look whatever arrives.
    pub fn wait_on(&self) -> (std::os::fd::RawFd, u64) {
        use std::os::fd::AsRawFd;
        (self.socket.as_raw_fd(), self.next_tick)
    }

    /// The next message if one is there, without waiting.
    pub fn poll(&mut self) -> Result<bool, RecvError> {
        let now = if self.rx.ready() == 0 {
            self.receive(None)
        } else {
            monotonic_ns()
        };
        Ok(self.take(now))
    }

    /// Waits at most `timeout` (forever if `None`) for the next message. A blocking wait is one
    /// receive call that returns when a datagram arrives (or a timer of the protocol is due),
    /// and the clock is read once per wake-up.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<bool, RecvError> {
        if self.rx.ready() > 0 {
            return self.poll();
        }
        let start = monotonic_ns();
        let deadline =
            timeout.map(|t| start.saturating_add(t.as_nanos().min(u64::MAX as u128) as u64));
        let mut now = start;
        loop {
            let spin = match self.wait {
                WaitStrategy::Spin => true,
                WaitStrategy::Block => false,
                WaitStrategy::Adaptive => {
                    (now.saturating_sub(start) as u128) < self.spin_window.as_nanos()
                }
            };
            let block = (!spin).then(|| {
                let mut ns = self
                    .next_tick
                    .saturating_sub(now)
                    .clamp(100_000, 50_000_000);
                if let Some(d) = deadline {
                    ns = ns.min(d.saturating_sub(now));
                }
                Duration::from_nanos(ns)
            });
            now = self.receive(block);
            if self.take(now) {
                return Ok(true);
            }
            if deadline.is_some_and(|d| now >= d) {
                return Ok(false);
            }
            if spin {
                std::hint::spin_loop();
            }
        }
    }

    /// True when a UDP publisher reaches this subscriber: one heard from (a session; a
    /// same-host UDP publisher announces itself with a heartbeat as soon as it sees us), or one
    /// another host announced. A same-host `auto` publisher reaches an `auto` subscriber through
    /// shared memory and is not counted, so an idle `auto` subscriber sleeps on its futex.
    /// The next publisher event, if any (see [`crate::Event`]).
    pub fn pop_event(&mut self) -> Option<crate::Event> {
        self.rx.pop_event()
    }

    /// Publisher events dropped because nobody took them.
    pub fn events_dropped(&self) -> u64 {
        self.rx.events_dropped()
    }

    pub fn has_sources(&mut self) -> bool {
        self.rx.sessions() > 0
            || self.discovery.as_ref().is_some_and(|(a, _)| {
                a.remotes()
                    .iter()
                    .any(|r| r.role == Role::Publisher && r.topic == self.topic.topic)
            })
    }

    /// Its slot in the topic's directory (where its counters live).
    pub fn slot(&self) -> &crate::shm::layout::SubscriberSlot {
        self.topic.subscriber(self.slot)
    }

    /// Warnings about this subscriber's socket (e.g. a receive buffer the kernel capped).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Where the session `session` sends from, and the node name of its publisher when that
    /// publisher is on this host (found by its address in the topic's directory; discovery does
    /// not carry node names from other hosts).
    pub fn publisher_info(&self, session: u64) -> (Option<SocketAddr>, Option<String>) {
        let Some(&addr) = self.publishers.get(&session) else {
            return (None, None);
        };
        let host = crate::sys::host_id();
        let node = self.topic.publisher_node(|p| {
            p.owner.host.load(Ordering::Relaxed) == host && p.udp.load() == Some(addr)
        });
        (Some(addr), node)
    }

    /// The message taken by the last successful `poll`/`wait`.
    pub fn current(&self) -> Option<&Delivered> {
        self.current.as_ref()
    }

    /// Keeps the current message past the next `poll`, until `let_go(id)` (it is the
    /// subscriber's own copy: nothing waits for it). `None` without a current message.
    pub fn keep(&mut self) -> Option<u64> {
        let d = self.current.take()?;
        let id = self.next_kept;
        self.next_kept += 1;
        self.kept.push((id, d));
        Some(id)
    }

    /// The bytes of the kept message `id`, if it is kept.
    pub fn kept_payload(&self, id: u64) -> Option<&[u8]> {
        self.kept
            .iter()
            .find(|(k, _)| *k == id)
            .map(|(_, d)| &d.data[..])
    }

    pub fn kept_count(&self) -> usize {
        self.kept.len()
    }

    /// Lets go of the kept message `id` (nothing when it is not kept).
    pub fn let_go(&mut self, id: u64) {
        if let Some(i) = self.kept.iter().position(|(k, _)| *k == id) {
            let (_, d) = self.kept.swap_remove(i);
            self.rx.recycle(d.data);
        }
    }
}

/// One datagram into the receiver core. A session's frames are taken from the address its first
/// frame came from only (a second source is refused). Returns true when a new session began.
fn feed(
    rx: &mut Receiver,
    publishers: &mut IdMap<SocketAddr>,
    open: Option<&mut Opener>,
    now: u64,
    src: SocketAddr,
    bytes: &mut [u8],
) -> bool {
    let f = match unseal(open, bytes) {
        Ok(f) => f,
        Err(why) => {
            rx.refuse(why);
            return false;
        }
    };
    if !matches!(
        f,
        Frame::Data { .. } | Frame::Batch { .. } | Frame::Heartbeat { .. } | Frame::Bye { .. }
    ) {
        // NAK and STATUS go to publishers, never to a subscriber.
        rx.refuse(Refusal::Unknown);
        return false;
    }
    let session = f.common().session;
    match publishers.get(&session) {
        Some(known) if *known != src => {
            rx.refuse(Refusal::Unknown);
            false
        }
        Some(_) => {
            rx.on_frame(now, &f);
            false
        }
        None => {
            rx.on_frame(now, &f);
            if rx.knows(session) {
                publishers.insert(session, src);
                true
            } else {
                false
            }
        }
    }
}

impl Drop for UdpSubscriber {
    fn drop(&mut self) {
        if let Some((agent, key)) = &self.discovery {
            agent.withdraw(*key);
        }
        self.topic.leave_subscriber(self.slot, self.token);
    }
}

impl std::fmt::Debug for UdpSubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.topic.debug_participant(f, "UdpSubscriber", None)
    }
}
