//! A topic's control segment: the table of publishers and subscribers that every participant
//! maps, with liveness checks and the removal of what dead processes left behind.

use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::layout::{
    header_bytes, load_str, store_str, ControlBlock, DataBlock, Owner, PublisherSlot,
    SubscriberSlot, LAYOUT_VERSION, MAGIC_CONTROL, MAGIC_DATA,
};
use super::segment::{self, open_checked, publish_header, Segment};
use crate::refusal::{DiscoveryRefusals, Refusals, REASONS};
use crate::sys::{self, Mapping, Presence, ProcessId, ShmObject};
use crate::{Error, TopicType};

/// Bits of `PublisherSlot::transport` and `SubscriberSlot::transport`.
pub const TRANSPORT_SHM: u32 = 1;
pub const TRANSPORT_UDP: u32 = 2;

/// The name of a transport bit set.
pub fn transport_name(bits: u32) -> &'static str {
    match bits {
        TRANSPORT_SHM => "shm",
        TRANSPORT_UDP => "udp",
        b if b == TRANSPORT_SHM | TRANSPORT_UDP => "auto",
        _ => "unknown",
    }
}

/// Prefix of every shared-memory object ferry makes.
pub const PREFIX: &str = "ferry.";

pub use crate::names::{validate_domain, validate_topic, MAX_DOMAIN, MAX_TOPIC};

/// The name of a topic's control segment: `ferry.<domain>.<topic with / as +>`.
pub fn control_name(domain: &str, topic: &str) -> String {
    format!("{PREFIX}{domain}.{}", topic.replace('/', "+"))
}

/// The name of a publisher's data segment.
pub fn data_name(control: &str, token: u64) -> String {
    format!("{control}@{token:016x}")
}

/// Splits a control segment name into domain and topic.
pub fn parse_control_name(name: &str) -> Option<(String, String)> {
    let rest = name.strip_prefix(PREFIX)?;
    if rest.contains('@') {
        return None;
    }
    let (domain, topic) = rest.split_once('.')?;
    Some((domain.to_owned(), topic.replace('+', "/")))
}

/// The stats of each taken slot of `$slots` (whose liveness and token `$state` reads), as a
/// `Vec<$stats>`: the fields every participant's stats share, read from its slot `$s` and its
/// owner, and then the `$field`s of its own kind.
macro_rules! taken_slots {
    ($topic:ident, $slots:expr, $state:ident, $stats:ident, |$s:ident| {
        $($field:ident: $value:expr),* $(,)?
    }) => {
        $slots
            .iter()
            .enumerate()
            .filter_map(|(i, $s)| {
                let (live, token) = $topic.$state(i);
                (live != Liveness::Free).then(|| $stats {
                    slot: i,
                    token,
                    node: $s.owner.node(),
                    pid: $s.owner.pid(),
                    alive: live != Liveness::Dead,
                    other_pid_namespace: other_namespace(&$s.owner),
                    reliable: $s.reliable.load(Ordering::Relaxed) != 0,
                    transport: transport_name($s.transport.load(Ordering::Relaxed)),
                    multicast: $s.multicast.load(Ordering::Relaxed) != 0,
                    udp: $s.udp.load(),
                    $($field: $value),*
                })
            })
            .collect()
    };
}

/// An open, checked control segment.
pub struct Topic {
    seg: Segment<ControlBlock>,
    pub topic: String,
    pub domain: String,
}

/// Whether a slot's owner lives in another PID namespace than this process.
fn other_namespace(owner: &Owner) -> bool {
    let ns = owner.pid_ns.load(Ordering::Relaxed);
    ns != 0 && ns != sys::pid_namespace()
}

/// Which table a slot is in.
#[derive(Clone, Copy)]
enum Side {
    Publisher,
    Subscriber,
}

/// Where the slots' locks begin in a control segment: past its end (a lock needs no data), one
/// byte per slot. The same in every layout version since [`FIRST_LOCKED_LAYOUT`].
const LOCKS: u64 = 1 << 40;

/// The first layout version whose participants hold their slot's lock (from [`LOCKS`] on) for
/// as long as they run: a control segment of this version or later that nobody holds a lock on
/// has no participant left, whatever its layout.
const FIRST_LOCKED_LAYOUT: u32 = 12;

/// Where in the control segment a slot's lock lies.
fn lock_at(side: Side, slot: usize) -> u64 {
    match side {
        Side::Publisher => LOCKS + slot as u64,
        Side::Subscriber => LOCKS + super::layout::MAX_PUBLISHERS as u64 + slot as u64,
    }
}

/// A participant's liveness as recorded in its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    Free,
    Alive,
    Dead,
    /// In another PID namespace and holding its slot's lock (or not saying): treated as alive,
    /// never swept by liveness (`clean_forced` frees it; so does any process of its own
    /// namespace once it has ended). One whose lock is gone is `Dead` (`Topic::publisher_state`).
    Unknown,
}

impl Owner {
    fn claim(&self, token: u64, node: &str) -> bool {
        // Looked up before the claim (it reads /proc), so that the window in which a claimed
        // slot does not yet name its PID namespace is a few stores long.
        let me = ProcessId::current();
        // AcqRel pairs with the Release stores of `release_owner`: the new owner sees the slot
        // as the last owner left it.
        if self
            .token
            .compare_exchange(0, token, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        // First, so that the window in which another namespace's half-claimed slot is judged by
        // its pid in ours (see `liveness`) is as short as can be.
        self.pid_ns.store(me.pid_ns, Ordering::Relaxed);
        self.pid.store(me.pid, Ordering::Relaxed);
        self.start_time.store(me.start_time, Ordering::Relaxed);
        self.host.store(sys::host_id(), Ordering::Relaxed);
        store_str(&self.node, node);
        true
    }

    fn set_ready(&self) {
        // Release pairs with the Acquire load in `liveness`/readers of the slot.
        self.ready.store(1, Ordering::Release);
    }

    /// Frees the slot if `token` still owns it.
    fn release_owner(&self, token: u64) -> bool {
        self.ready.store(0, Ordering::Relaxed);
        self.held.store(0, Ordering::Relaxed);
        // Release pairs with the AcqRel claim of the next owner.
        self.token
            .compare_exchange(token, 0, Ordering::Release, Ordering::Relaxed)
            .is_ok()
    }

    /// Whether the owner holding `token` runs. A slot that is still being filled in names its
    /// process in the token's low 32 bits. An owner of another PID namespace is `Unknown`: its
    /// pid cannot be looked up here.
    pub fn liveness(&self) -> (Liveness, u64) {
        // Acquire pairs with the AcqRel claim.
        let token = self.token.load(Ordering::Acquire);
        if token == 0 {
            return (Liveness::Free, 0);
        }
        let pid_ns = self.pid_ns.load(Ordering::Relaxed);
        // Acquire pairs with `set_ready`.
        let presence = if self.ready.load(Ordering::Acquire) == 1 {
            ProcessId {
                pid: self.pid.load(Ordering::Relaxed),
                start_time: self.start_time.load(Ordering::Relaxed),
                pid_ns,
            }
            .presence()
        } else if pid_ns != 0 && pid_ns != sys::pid_namespace() {
            Presence::Unknown
        } else {
            // Being filled in. `pid_ns` is the claimer's, or 0 or the previous owner's in the few
            // instructions between the claim and its store (then the claimer is judged by its
            // pid in our namespace).
            let pid = (token & 0xFFFF_FFFF) as u32;
            if pid != 0 && std::path::Path::new(&format!("/proc/{pid}")).exists() {
                Presence::Running
            } else {
                Presence::Gone
            }
        };
        let liveness = match presence {
            Presence::Running => Liveness::Alive,
            Presence::Gone => Liveness::Dead,
            Presence::Unknown => Liveness::Unknown,
        };
        (liveness, token)
    }

    pub fn node(&self) -> String {
        load_str(&self.node)
    }

    pub fn pid(&self) -> u32 {
        self.pid.load(Ordering::Relaxed)
    }
}

impl Topic {
    /// Opens the topic's control segment, creating it (with `mode`) if needed, and removes what
    /// dead participants left in it.
    pub fn open(domain: &str, topic: &str, mode: u32) -> Result<Topic, Error> {
        validate_domain(domain)?;
        validate_topic(topic)?;
        let name = control_name(domain, topic);
        let page = sys::page_size();
        let hb = header_bytes::<ControlBlock>(page);
        for _ in 0..100 {
            match ShmObject::create(&name, hb as u64, mode) {
                Ok(obj) => {
                    let map = Mapping::map(&obj, 0, hb)
                        .map_err(|e| Error::io(format!("mmap {name}"), e))?;
                    let t = Topic {
                        seg: Segment::from_parts(obj, map, hb),
                        topic: topic.to_owned(),
                        domain: domain.to_owned(),
                    };
                    store_str(&t.block().topic, topic);
                    publish_header(&t.seg.map, MAGIC_CONTROL, hb, hb as u64);
                    return Ok(t);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(segment::create_error(&name, hb as u64, e)),
            }
            let Some((obj, _)) = open_checked(&name, MAGIC_CONTROL, hb)? else {
                continue; // removed meanwhile: create it
            };
            let map =
                Mapping::map(&obj, 0, hb).map_err(|e| Error::io(format!("mmap {name}"), e))?;
            let t = Topic {
                seg: Segment::from_parts(obj, map, hb),
                topic: topic.to_owned(),
                domain: domain.to_owned(),
            };
            let stored = load_str(&t.block().topic);
            if stored != topic {
                return Err(Error::Layout {
                    segment: name,
                    detail: format!("it belongs to topic {stored:?}, not {topic:?}"),
                });
            }
            t.sweep();
            return Ok(t);
        }
        Err(Error::Busy {
            segment: name,
            pid: 0,
        })
    }

    /// Opens an existing topic without creating it (for tools). `None` if there is none.
    pub fn open_existing(domain: &str, topic: &str) -> Result<Option<Topic>, Error> {
        let name = control_name(domain, topic);
        let hb = header_bytes::<ControlBlock>(sys::page_size());
        let Some((obj, _)) = open_checked(&name, MAGIC_CONTROL, hb)? else {
            return Ok(None);
        };
        let map = Mapping::map(&obj, 0, hb).map_err(|e| Error::io(format!("mmap {name}"), e))?;
        Ok(Some(Topic {
            seg: Segment::from_parts(obj, map, hb),
            topic: topic.to_owned(),
            domain: domain.to_owned(),
        }))
    }

    /// The control segment's shared-memory object.
    pub fn object(&self) -> &ShmObject {
        &self.seg.obj
    }

    pub fn block(&self) -> &ControlBlock {
        self.seg.block()
    }

    pub fn name(&self) -> &str {
        self.seg.name()
    }

    pub(super) fn new_token(&self) -> u64 {
        let n = self.block().next_token.fetch_add(1, Ordering::Relaxed) + 1;
        (n << 32) | std::process::id() as u64
    }

    /// Claims a publisher slot, and gives the topic the type `declared` or checks it against
    /// the topic's (`declare_type`; the slot is released when that fails). The caller fills in
    /// the rest and calls `publisher_ready`.
    pub fn claim_publisher(
        &self,
        node: &str,
        declared: Option<&TopicType>,
    ) -> Result<(usize, u64), Error> {
        let slots: Vec<&Owner> = self.block().publishers.iter().map(|p| &p.owner).collect();
        let (slot, token) = self.claim(&slots, node, "publisher")?;
        self.publisher(slot).reset();
        if let Err(e) = declared.map_or(Ok(()), |t| self.declare_type(t, "publisher")) {
            self.release_publisher(slot, token);
            return Err(e);
        }
        Ok((slot, token))
    }

    /// As `claim_publisher`, for a subscriber.
    pub fn claim_subscriber(
        &self,
        node: &str,
        declared: Option<&TopicType>,
    ) -> Result<(usize, u64), Error> {
        let slots: Vec<&Owner> = self.block().subscribers.iter().map(|s| &s.owner).collect();
        let (slot, token) = self.claim(&slots, node, "subscriber")?;
        self.subscriber(slot).reset();
        if let Err(e) = declared.map_or(Ok(()), |t| self.declare_type(t, "subscriber")) {
            self.release_subscriber(slot, token);
            return Err(e);
        }
        Ok((slot, token))
    }

    fn claim(
        &self,
        slots: &[&Owner],
        node: &str,
        what: &'static str,
    ) -> Result<(usize, u64), Error> {
        for round in 0..2 {
            for (i, owner) in slots.iter().enumerate() {
                let token = self.new_token();
                if owner.claim(token, node) {
                    // SeqCst pairs with the SeqCst `closing` store in `remove_if_unused`: either
                    // the remover sees this slot taken, or we see it closing and back off.
                    std::sync::atomic::fence(Ordering::SeqCst);
                    if self.block().closing.load(Ordering::SeqCst) != 0 {
                        owner.release_owner(token);
                        return Err(Error::Busy {
                            segment: self.name().to_owned(),
                            pid: 0,
                        });
                    }
                    return Ok((i, token));
                }
            }
            if round == 0 {
                self.sweep();
            }
        }
        Err(Error::TooMany {
            topic: self.topic.clone(),
            what,
            max: slots.len(),
        })
    }

    pub fn publisher(&self, slot: usize) -> &PublisherSlot {
        &self.block().publishers[slot]
    }

    /// The node name of the first ready publisher slot that `matches` (a look-up for tools,
    /// never on a message's path).
    pub fn publisher_node(&self, matches: impl Fn(&PublisherSlot) -> bool) -> Option<String> {
        (0..super::layout::MAX_PUBLISHERS)
            .map(|i| self.publisher(i))
            // Acquire pairs with the Release in `Owner::set_ready`.
            .find(|p| p.owner.ready.load(Ordering::Acquire) != 0 && matches(p))
            .map(|p| p.owner.node())
    }

    pub fn subscriber(&self, slot: usize) -> &SubscriberSlot {
        &self.block().subscribers[slot]
    }

    /// Makes a claimed publisher visible to subscribers and rings them so they attach at once.
    pub fn publisher_ready(&self, slot: usize) {
        self.hold(&self.publisher(slot).owner, lock_at(Side::Publisher, slot));
        self.publisher(slot).owner.set_ready();
        self.bump_epoch();
    }

    pub fn subscriber_ready(&self, slot: usize) {
        self.hold(
            &self.subscriber(slot).owner,
            lock_at(Side::Subscriber, slot),
        );
        self.subscriber(slot).owner.set_ready();
        // Release pairs with the Acquire load in `sub_epoch`.
        self.block().sub_epoch.fetch_add(1, Ordering::Release);
    }

    /// Moves whenever a subscriber joins or leaves.
    pub fn sub_epoch(&self) -> u64 {
        // Acquire pairs with the Release bumps in `subscriber_ready`/`release_subscriber`.
        self.block().sub_epoch.load(Ordering::Acquire)
    }

    /// Tells every subscriber that the publisher table changed.
    pub fn bump_epoch(&self) {
        // SeqCst pairs with the subscriber's doorbell load then epoch load before it sleeps: if it
        // missed this epoch it also missed the doorbell bump below and will not sleep through it.
        self.block().epoch.fetch_add(1, Ordering::SeqCst);
        for s in self.block().subscribers.iter() {
            if s.owner.token.load(Ordering::Relaxed) != 0 {
                ring_doorbell(&s.doorbell);
            }
        }
    }

    pub fn epoch(&self) -> u64 {
        // Acquire pairs with the SeqCst fetch_add in `bump_epoch`.
        self.block().epoch.load(Ordering::Acquire)
    }

    pub fn release_publisher(&self, slot: usize, token: u64) {
        if self.publisher(slot).owner.release_owner(token) {
            self.bump_epoch();
        }
        // After the slot is free: a lock gone while the slot is taken means its owner ended.
        let _ = self.seg.obj.unlock_byte(lock_at(Side::Publisher, slot));
    }

    pub fn release_subscriber(&self, slot: usize, token: u64) {
        if self.subscriber(slot).owner.release_owner(token) {
            // Release pairs with the Acquire load in `sub_epoch`.
            self.block().sub_epoch.fetch_add(1, Ordering::Release);
        }
        let _ = self.seg.obj.unlock_byte(lock_at(Side::Subscriber, slot));
    }

    /// A publisher leaving: frees its slot, then removes the control segment if it was the last.
    pub fn leave_publisher(&self, slot: usize, token: u64) {
        self.release_publisher(slot, token);
        self.remove_if_unused();
    }

    /// A subscriber leaving: frees its slot, then removes the control segment if it was the last.
    pub fn leave_subscriber(&self, slot: usize, token: u64) {
        self.release_subscriber(slot, token);
        self.remove_if_unused();
    }

    /// Formats a participant of this topic for `Debug`: its type's name, the topic and, where
    /// given, its slot.
    pub fn debug_participant(
        &self,
        f: &mut std::fmt::Formatter<'_>,
        name: &str,
        slot: Option<usize>,
    ) -> std::fmt::Result {
        let mut d = f.debug_struct(name);
        d.field("topic", &self.topic);
        if let Some(slot) = slot {
            d.field("slot", &slot);
        }
        d.finish()
    }

    /// Takes the lock of a slot being made ready (through this open of the control segment,
    /// which its participant keeps until it leaves) and says so in the slot. Where the lock
    /// cannot be taken the slot says nothing, and other PID namespaces keep judging it unknown.
    fn hold(&self, owner: &Owner, at: u64) {
        if self.seg.obj.lock_byte(at).is_ok() {
            owner.held.store(1, Ordering::Relaxed);
        }
    }

    /// A publisher slot's liveness and token: as `Owner::liveness` tells, except that an owner of
    /// another PID namespace whose lock is gone has ended (the kernel let go of the lock when
    /// its process ended, `kill -9` included) and is `Dead`.
    pub fn publisher_state(&self, slot: usize) -> (Liveness, u64) {
        self.state(&self.publisher(slot).owner, lock_at(Side::Publisher, slot))
    }

    /// As `publisher_state`, for a subscriber slot.
    pub fn subscriber_state(&self, slot: usize) -> (Liveness, u64) {
        self.state(
            &self.subscriber(slot).owner,
            lock_at(Side::Subscriber, slot),
        )
    }

    fn state(&self, owner: &Owner, at: u64) -> (Liveness, u64) {
        let (live, token) = owner.liveness();
        // Acquire pairs with `set_ready`, which follows the store of `held`.
        if live == Liveness::Unknown
            && owner.ready.load(Ordering::Acquire) == 1
            && owner.held.load(Ordering::Relaxed) == 1
            && self.seg.obj.byte_locked(at).ok() == Some(false)
            // Acquire pairs with the AcqRel claim: still the same owner after the look.
            && owner.token.load(Ordering::Acquire) == token
        {
            return (Liveness::Dead, token);
        }
        (live, token)
    }

    /// Processes with a subscriber on this topic that runs (or cannot be looked at: another PID
    /// namespace) and whose transport shares a bit with `transports`, on this host (network
    /// namespace) only or on any that shares /dev/shm (an `auto` subscriber holds
    /// two slots of one process: it counts once). Reads /proc for each: for occasional looks,
    /// not per message.
    pub fn live_subscriber_processes(&self, transports: u32, this_host_only: bool) -> usize {
        let here = sys::host_id();
        let mut seen: Vec<(u32, u64, u64)> = Vec::new();
        for (i, s) in self.block().subscribers.iter().enumerate() {
            if s.transport.load(Ordering::Relaxed) & transports == 0
                || (this_host_only && s.owner.host.load(Ordering::Relaxed) != here)
                || !matches!(
                    self.subscriber_state(i).0,
                    Liveness::Alive | Liveness::Unknown
                )
            {
                continue;
            }
            let who = (
                s.owner.pid(),
                s.owner.start_time.load(Ordering::Relaxed),
                s.owner.pid_ns.load(Ordering::Relaxed),
            );
            if !seen.contains(&who) {
                seen.push(who);
            }
        }
        seen.len()
    }

    /// The node name and pid of the first live subscriber (a service's server), if any.
    pub fn first_live_subscriber(&self) -> Option<(String, u32)> {
        self.block()
            .subscribers
            .iter()
            .enumerate()
            .find_map(|(i, s)| {
                matches!(
                    self.subscriber_state(i).0,
                    Liveness::Alive | Liveness::Unknown
                )
                .then(|| (s.owner.node(), s.owner.pid()))
            })
    }

    /// Frees the slots of dead publishers (removing their data segments) and dead subscribers.
    /// Returns how many it freed.
    pub fn sweep(&self) -> usize {
        self.sweep_report(&mut Vec::new(), false)
    }

    /// `sweep`, adding the data segments it removed to `removed`; with `force`, participants of
    /// other PID namespaces (`Liveness::Unknown`) count as dead too.
    pub fn sweep_report(&self, removed: &mut Vec<String>, force: bool) -> usize {
        let swept = |live| live == Liveness::Dead || (force && live == Liveness::Unknown);
        let mut freed = 0;
        for (i, p) in self.block().publishers.iter().enumerate() {
            let (live, token) = self.publisher_state(i);
            if swept(live) && p.owner.release_owner(token) {
                let name = data_name(self.name(), token);
                if sys::shm_unlink(&name).is_ok() {
                    removed.push(name);
                }
                freed += 1;
                self.bump_epoch();
            }
        }
        for (i, s) in self.block().subscribers.iter().enumerate() {
            let (live, token) = self.subscriber_state(i);
            if swept(live) && s.owner.release_owner(token) {
                freed += 1;
            }
        }
        freed
    }

    /// Frees one subscriber slot if its owner (holding `token`) is dead.
    pub fn evict_subscriber_if_dead(&self, slot: usize, token: u64) -> bool {
        let s = self.subscriber(slot);
        matches!(self.subscriber_state(slot), (Liveness::Dead, t) if t == token)
            && s.owner.release_owner(token)
    }

    /// Whether the publisher in `slot` with `token` is still there and alive.
    pub fn publisher_liveness(&self, slot: usize, token: u64) -> Liveness {
        match self.publisher_state(slot) {
            (l, t) if t == token => l,
            _ => Liveness::Free,
        }
    }

    /// Removes the control segment when no slot is taken (the last participant leaving, or
    /// `ferry clean`). Returns true if it removed it.
    pub fn remove_if_unused(&self) -> bool {
        let b = self.block();
        // SeqCst pairs with the fence + SeqCst load in `claim`.
        b.closing.store(1, Ordering::SeqCst);
        let used = b
            .publishers
            .iter()
            .any(|p| p.owner.token.load(Ordering::SeqCst) != 0)
            || b.subscribers
                .iter()
                .any(|s| s.owner.token.load(Ordering::SeqCst) != 0);
        if used {
            b.closing.store(0, Ordering::SeqCst);
            return false;
        }
        // Only unlink the name if it still refers to this segment.
        let mine = self.seg.obj.inode().ok();
        if mine.is_some() && sys::shm_inode(self.name()).ok().flatten() == mine {
            let _ = sys::shm_unlink(self.name());
            return true;
        }
        false
    }

    /// Publisher and subscriber slots in use, for tools.
    pub fn snapshot(&self) -> TopicSnapshot {
        let b = self.block();
        let publishers = taken_slots!(self, b.publishers, publisher_state, PublisherStats, |p| {
            retransmitted: p.retransmitted.load(Ordering::Relaxed),
            kernel_drops: p.kernel_drops.load(Ordering::Relaxed),
            send_errors: p.send_errors.load(Ordering::Relaxed),
            refused: load_refusals(&p.refused),
            repairs_deferred: p.repairs_deferred.load(Ordering::Relaxed),
            discovery_refused: load_discovery(&p.discovery_refused),
            challenges_withheld: p.challenges_withheld.load(Ordering::Relaxed),
            congestion: CongestionInfo {
                repair_bytes: p.repair_bytes.load(Ordering::Relaxed),
                repairs_suppressed: p.repairs_suppressed.load(Ordering::Relaxed),
                pacing_rate: p.pacing_rate.load(Ordering::Relaxed),
                bottleneck_rate: p.bottleneck_rate.load(Ordering::Relaxed),
                min_rtt_ns: p.min_rtt_ns.load(Ordering::Relaxed),
                foreign_queue_ns: p.foreign_queue_ns.load(Ordering::Relaxed),
                paced_waits: p.paced_waits.load(Ordering::Relaxed),
                window_waits: p.window_waits.load(Ordering::Relaxed),
                congestion_events: p.congestion_events.load(Ordering::Relaxed),
                noise_loss_events: p.noise_loss_events.load(Ordering::Relaxed),
                queue_events: p.queue_events.load(Ordering::Relaxed),
                datagrams: p.datagrams.load(Ordering::Relaxed),
                batches: p.batches.load(Ordering::Relaxed),
                batched_messages: p.batched_messages.load(Ordering::Relaxed),
                left_out: p.left_out.load(Ordering::Relaxed),
            },
            capacity: p.capacity.load(Ordering::Relaxed),
            max_message: p.max_message.load(Ordering::Relaxed),
            sent: p.sent.load(Ordering::Relaxed),
            bytes: p.bytes.load(Ordering::Relaxed),
            waits: p.waits.load(Ordering::Relaxed),
            timeouts: p.timeouts.load(Ordering::Relaxed),
            evictions: p.evictions.load(Ordering::Relaxed),
            deadline_missed: p.deadline_missed.load(Ordering::Relaxed),
            other_type: p.other_type.load(Ordering::Relaxed),
        });
        let subscribers = taken_slots!(self, b.subscribers, subscriber_state, SubscriberStats, |s| {
            lost: s.lost.load(Ordering::Relaxed),
            refused: load_refusals(&s.refused),
            evicted: s.evicted.load(Ordering::Relaxed),
            replies_withheld: s.replies_withheld.load(Ordering::Relaxed),
            sessions_evicted: s.sessions_evicted.load(Ordering::Relaxed),
            discovery_refused: load_discovery(&s.discovery_refused),
            kernel_drops: s.kernel_drops.load(Ordering::Relaxed),
            received: s.received.load(Ordering::Relaxed),
            bytes: s.bytes.load(Ordering::Relaxed),
            skipped: s.skipped.load(Ordering::Relaxed),
            waits: s.waits.load(Ordering::Relaxed),
            service: std::array::from_fn(|i| s.service[i].load(Ordering::Relaxed)),
            deadline_missed: s.deadline_missed.load(Ordering::Relaxed),
            other_type: s.other_type.load(Ordering::Relaxed),
        });
        TopicSnapshot {
            domain: self.domain.clone(),
            topic: self.topic.clone(),
            publishers,
            subscribers,
            topic_type: self.topic_type().map_err(|e| e.to_string()),
        }
    }
}

fn load_refusals(counters: &[AtomicU64; REASONS]) -> Refusals {
    Refusals(std::array::from_fn(|i| counters[i].load(Ordering::Relaxed)))
}

fn load_discovery(counters: &[AtomicU64; 4]) -> DiscoveryRefusals {
    let [malformed, not_allowed, over_limit, unauthenticated] =
        std::array::from_fn(|i| counters[i].load(Ordering::Relaxed));
    DiscoveryRefusals {
        malformed,
        not_allowed,
        over_limit,
        unauthenticated,
    }
}

/// Stores discovery's refusal counters into a slot (the owner is the only writer).
pub fn store_discovery(counters: &[AtomicU64; 4], r: &DiscoveryRefusals) {
    let values = [r.malformed, r.not_allowed, r.over_limit, r.unauthenticated];
    for (c, v) in counters.iter().zip(values) {
        c.store(v, Ordering::Relaxed);
    }
}

/// Stores refusal counters into a slot (the owner is the only writer).
pub fn store_refusals(counters: &[AtomicU64; REASONS], r: &Refusals) {
    for (c, v) in counters.iter().zip(r.0) {
        c.store(v, Ordering::Relaxed);
    }
}

/// Bumps a futex word and wakes whoever sleeps on it.
pub fn ring_doorbell(word: &AtomicU32) {
    // Release: the sleeper's futex_wait compares against the value it loaded before it looked for
    // work; a changed value sends it back to look again.
    word.fetch_add(1, Ordering::Release);
    sys::futex_wake(word);
}

/// A copy of a topic's tables, for `ferry topics` and `ferry stats`.
#[derive(Debug, Clone)]
pub struct TopicSnapshot {
    pub domain: String,
    pub topic: String,
    pub publishers: Vec<PublisherStats>,
    pub subscribers: Vec<SubscriberStats>,
    /// The topic's type, if an end declared one; why it cannot be read, if its record is
    /// damaged.
    pub topic_type: Result<Option<TopicType>, String>,
}

/// A UDP publisher's datagrams, batching, repairs and congestion control, as `ferry stats`
/// shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CongestionInfo {
    pub repair_bytes: u64,
    pub repairs_suppressed: u64,
    /// Bytes per second.
    pub pacing_rate: u64,
    pub bottleneck_rate: u64,
    pub min_rtt_ns: u64,
    /// Another flow's queue that back-offs could not drain, counted as part of the path (ns).
    pub foreign_queue_ns: u64,
    pub paced_waits: u64,
    pub window_waits: u64,
    pub congestion_events: u64,
    pub noise_loss_events: u64,
    /// Rounds that ended with a standing queue (the rate backed off for it).
    pub queue_events: u64,
    /// Data datagrams sent (repairs apart), BATCH datagrams among them, and the messages those
    /// carried.
    pub datagrams: u64,
    pub batches: u64,
    pub batched_messages: u64,
    /// Messages a latest subscriber was left out of (one per message and subscriber): it had
    /// its budget in flight, so that it skips instead of slowing the others.
    pub left_out: u64,
}

#[derive(Debug, Clone)]
pub struct PublisherStats {
    pub slot: usize,
    /// The transport the publisher writes with: shm, udp or auto (both).
    pub transport: &'static str,
    /// UDP: its data goes to a multicast group.
    pub multicast: bool,
    /// Its UDP address, for a UDP publisher.
    pub udp: Option<std::net::SocketAddr>,
    /// UDP frames sent again on a NAK.
    pub retransmitted: u64,
    /// Datagrams the kernel dropped on the publisher's socket.
    pub kernel_drops: u64,
    /// Datagrams the kernel would not send (no room within a second, an unreachable peer).
    pub send_errors: u64,
    /// Control datagrams refused, by reason.
    pub refused: Refusals,
    /// Repair frames deferred by the per-NAK cap or the receiver's repair budget.
    pub repairs_deferred: u64,
    /// Discovery datagrams its process refused.
    pub discovery_refused: DiscoveryRefusals,
    /// Challenges not sent to an announced subscriber address (3× what it sent).
    pub challenges_withheld: u64,
    /// UDP repairs apart from new data, and the congestion controller's state.
    pub congestion: CongestionInfo,
    pub token: u64,
    pub node: String,
    /// The pid in the participant's own PID namespace.
    pub pid: u32,
    /// Running, or of another PID namespace (then `other_pid_namespace`).
    pub alive: bool,
    /// The participant runs in another PID namespace (a container sharing /dev/shm): its pid
    /// cannot be looked up here; it counts as alive while it holds its slot's lock in the
    /// control segment, which the kernel releases when its process ends (it is then dead and
    /// swept like any other); `clean_forced` removes it either way.
    pub other_pid_namespace: bool,
    pub reliable: bool,
    pub capacity: u64,
    pub max_message: u64,
    pub sent: u64,
    pub bytes: u64,
    pub waits: u64,
    pub timeouts: u64,
    pub evictions: u64,
    /// `Qos::deadline`: periods that passed without a send.
    pub deadline_missed: u64,
    /// UDP: subscribers on other hosts left out for declaring another type.
    pub other_type: u64,
}

#[derive(Debug, Clone)]
pub struct SubscriberStats {
    pub slot: usize,
    pub transport: &'static str,
    /// UDP: it receives through a multicast group.
    pub multicast: bool,
    pub udp: Option<std::net::SocketAddr>,
    /// Messages that will never arrive (UDP losses not repaired), counted.
    pub lost: u64,
    /// Datagrams refused, by reason.
    pub refused: Refusals,
    /// Incomplete messages of sessions that never delivered one, dropped to make room.
    pub evicted: u64,
    /// Replies not sent to a publisher address not verified yet (kept within 3× what it sent).
    pub replies_withheld: u64,
    /// Sessions evicted to make room for a new one.
    pub sessions_evicted: u64,
    /// Discovery datagrams its process refused.
    pub discovery_refused: DiscoveryRefusals,
    /// Datagrams the kernel dropped on the subscriber's socket (a full receive queue).
    pub kernel_drops: u64,
    pub token: u64,
    pub node: String,
    /// The pid in the participant's own PID namespace.
    pub pid: u32,
    /// Running, or of another PID namespace (then `other_pid_namespace`).
    pub alive: bool,
    /// As `PublisherStats::other_pid_namespace`.
    pub other_pid_namespace: bool,
    pub reliable: bool,
    pub received: u64,
    pub bytes: u64,
    pub skipped: u64,
    pub waits: u64,
    /// A service's counters when this subscriber is a service's end: see
    /// [`crate::service::ServiceCounters`].
    pub service: [u64; super::layout::SERVICE_COUNTERS],
    /// `Qos::deadline`: periods that passed without a message.
    pub deadline_missed: u64,
    /// UDP: publishers on other hosts refused for declaring another type.
    pub other_type: u64,
}

/// What `clean` did.
#[derive(Debug, Default, Clone)]
pub struct CleanReport {
    pub removed: Vec<String>,
    pub freed_slots: usize,
    pub kept: Vec<String>,
    pub refused: Vec<(String, String)>,
}

/// Removes stale segments of every domain: slots of dead processes, data segments no live
/// publisher owns, and control segments nobody uses. Segments in use are kept, and so are those
/// of processes in other PID namespaces, which this process cannot tell from dead ones.
pub fn clean(domain: Option<&str>) -> Result<CleanReport, Error> {
    clean_impl(domain, false)
}

/// `clean`, also freeing the slots and removing the data segments of processes in other PID
/// namespaces (containers sharing /dev/shm), whether they run or not. Only for when those
/// processes are known to have ended: a live one loses its place in the topic.
pub fn clean_forced(domain: Option<&str>) -> Result<CleanReport, Error> {
    clean_impl(domain, true)
}

fn clean_impl(domain: Option<&str>, force: bool) -> Result<CleanReport, Error> {
    if let Some(d) = domain {
        validate_domain(d)?;
    }
    let mut report = CleanReport::default();
    let names = sys::shm_list(PREFIX).map_err(|e| Error::io("list /dev/shm", e))?;
    let hb_data = header_bytes::<DataBlock>(sys::page_size());
    for name in &names {
        let Some((dom, topic)) = parse_control_name(name) else {
            continue;
        };
        if domain.is_some_and(|d| d != dom) {
            continue;
        }
        match Topic::open_existing(&dom, &topic) {
            Ok(Some(t)) => {
                report.freed_slots += t.sweep_report(&mut report.removed, force);
                if t.remove_if_unused() {
                    report.removed.push(name.clone());
                } else {
                    report.kept.push(name.clone());
                }
            }
            Ok(None) => {}
            Err(Error::Version { found, .. }) if found >= FIRST_LOCKED_LAYOUT => {
                // Another ferry's layout: gone once no participant of it holds a lock.
                match remove_if_unlocked(name) {
                    Ok(true) => report.removed.push(name.clone()),
                    Ok(false) => report.refused.push((
                        name.clone(),
                        format!(
                            "in use by a running ferry of layout version {found} (this one \
                             speaks {LAYOUT_VERSION}): `ferry clean` removes it once that has \
                             ended"
                        ),
                    )),
                    Err(e) => report.refused.push((name.clone(), e.to_string())),
                }
            }
            Err(e) => report.refused.push((name.clone(), e.to_string())),
        }
    }
    // Data segments: remove those whose publisher is gone.
    for name in sys::shm_list(PREFIX).map_err(|e| Error::io("list /dev/shm", e))? {
        let Some((control, _)) = name.split_once('@') else {
            continue;
        };
        if let Some((dom, _)) = parse_control_name(control) {
            if domain.is_some_and(|d| d != dom) {
                continue;
            }
        }
        let alive = match open_checked(&name, MAGIC_DATA, hb_data) {
            Ok(Some((obj, _))) => match Mapping::map(&obj, 0, hb_data) {
                Ok(map) => {
                    let seg: Segment<DataBlock> = Segment::from_parts(obj, map, hb_data);
                    let b = seg.block();
                    let presence = ProcessId {
                        pid: b.pid.load(Ordering::Relaxed),
                        start_time: b.start_time.load(Ordering::Relaxed),
                        pid_ns: b.pid_ns.load(Ordering::Relaxed),
                    }
                    .presence();
                    presence == Presence::Running || (presence == Presence::Unknown && !force)
                }
                Err(_) => false,
            },
            Ok(None) => continue,
            // Another ferry's layout: its publisher is gone with its topic's control segment
            // (removed above once nobody held a lock on it).
            Err(Error::Version { found, .. })
                if found >= FIRST_LOCKED_LAYOUT
                    && matches!(sys::ShmObject::open(control), Err(e) if e.kind() == io::ErrorKind::NotFound) =>
            {
                false
            }
            Err(e) => {
                report.refused.push((name.clone(), e.to_string()));
                continue;
            }
        };
        if alive {
            report.kept.push(name);
        } else if sys::shm_unlink(&name).is_ok() {
            report.removed.push(name);
        }
    }
    Ok(report)
}

/// Removes the control segment `name` of another layout version when no open of it holds a
/// slot's lock: true if it did.
fn remove_if_unlocked(name: &str) -> Result<bool, Error> {
    let obj = match sys::ShmObject::open(name) {
        Ok(o) => o,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io(format!("open shared memory {name}"), e)),
    };
    let locked = obj
        .locked_from(LOCKS)
        .map_err(|e| Error::io(format!("look at the locks of {name}"), e))?;
    if locked {
        return Ok(false);
    }
    Ok(sys::shm_unlink(name).is_ok())
}

/// Every topic with a control segment, optionally in one domain.
/// A topic's snapshot, or the segment name and why it could not be read.
pub type TopicEntry = Result<TopicSnapshot, (String, Error)>;

pub fn list_topics(domain: Option<&str>) -> Result<Vec<TopicEntry>, Error> {
    if let Some(d) = domain {
        validate_domain(d)?;
    }
    let mut out = Vec::new();
    for name in sys::shm_list(PREFIX).map_err(|e| Error::io("list /dev/shm", e))? {
        let Some((dom, topic)) = parse_control_name(&name) else {
            continue;
        };
        if domain.is_some_and(|d| d != dom) {
            continue;
        }
        match Topic::open_existing(&dom, &topic) {
            Ok(Some(t)) => out.push(Ok(t.snapshot())),
            Ok(None) => {}
            Err(e) => out.push(Err((name, e))),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid above any pid_max: no process has it in this namespace.
    const NO_SUCH_PID: u32 = 0x7FFF_FFF0;

    fn domain(what: &str) -> String {
        format!("u{}-{what}", std::process::id())
    }

    /// A segment another ferry wrote (another layout version since the slots' locks began) is
    /// removed by `clean` once no process holds a lock on it, and kept, saying why, while one
    /// does — a ferry upgraded while an older one's processes run, or after they ended.
    #[test]
    fn clean_removes_another_layouts_segment_once_nobody_holds_its_locks() {
        use std::os::unix::fs::FileExt;
        let d = domain("oldlayout");
        let name = Topic::open(&d, "old/x", 0o600).unwrap().name().to_owned();
        let path = format!("/dev/shm/{name}");
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        // The version field follows the 8-byte magic.
        let old = LAYOUT_VERSION - 1;
        file.write_all_at(&old.to_ne_bytes(), 8).unwrap();
        assert!(matches!(
            Topic::open_existing(&d, "old/x"),
            Err(Error::Version { found, .. }) if found == old
        ));

        // A participant of that ferry still runs: it holds its slot's lock.
        let holder = ShmObject::open(&name).unwrap();
        holder.lock_byte(LOCKS + 3).unwrap();
        let report = clean(Some(&d)).unwrap();
        assert!(!report.removed.contains(&name), "{report:?}");
        let why = &report.refused.iter().find(|r| r.0 == name).unwrap().1;
        assert!(why.contains("in use by a running ferry"), "{why}");
        assert!(std::path::Path::new(&path).exists());

        // A data segment of that ferry's publisher: kept while its topic's directory is.
        let data = format!("{name}@0000000100000001");
        let mut header = vec![0u8; 4096];
        header[..8].copy_from_slice(&MAGIC_DATA.to_ne_bytes());
        header[8..12].copy_from_slice(&old.to_ne_bytes());
        std::fs::write(format!("/dev/shm/{data}"), &header).unwrap();
        let report = clean(Some(&d)).unwrap();
        assert!(report.refused.iter().any(|r| r.0 == data), "{report:?}");

        // It ended (the kernel let go of its lock): the next clean removes both segments.
        drop(holder);
        let report = clean(Some(&d)).unwrap();
        assert!(report.removed.contains(&name), "{report:?}");
        assert!(report.removed.contains(&data), "{report:?}");
        assert!(!std::path::Path::new(&path).exists());
    }

    /// Makes publisher slot 0 look owned by a process that ended, as seen from `pid_ns`.
    fn forge_publisher(t: &Topic, pid_ns: u64) -> u64 {
        let (slot, token) = t.claim_publisher("forged", None).unwrap();
        let o = &t.publisher(slot).owner;
        o.pid.store(NO_SUCH_PID, Ordering::Relaxed);
        o.pid_ns.store(pid_ns, Ordering::Relaxed);
        t.publisher_ready(slot);
        // Without the lock this open took for it (its own lock would not count against it):
        // a slot that says nothing of a lock.
        o.held.store(0, Ordering::Relaxed);
        t.seg
            .obj
            .unlock_byte(lock_at(Side::Publisher, slot))
            .unwrap();
        token
    }

    #[test]
    fn a_participant_of_another_pid_namespace_is_never_swept_by_liveness() {
        let dom = domain("pidns");
        let t = Topic::open(&dom, "data", 0o600).unwrap();
        let other = sys::pid_namespace() ^ 0x5555;
        let token = forge_publisher(&t, other);
        assert_eq!(t.publisher_liveness(0, token), Liveness::Unknown);
        assert_eq!(t.sweep(), 0, "its pid means nothing here: not swept");
        let snap = t.snapshot();
        assert!(snap.publishers[0].alive && snap.publishers[0].other_pid_namespace);
        assert_eq!(clean(Some(&dom)).unwrap().freed_slots, 0);
        // Forced, it goes, and so does the then unused control segment.
        assert_eq!(clean_forced(Some(&dom)).unwrap().freed_slots, 1);
        assert_eq!(t.publisher_liveness(0, token), Liveness::Free);

        // The same slot from this namespace is dead and swept.
        let t = Topic::open(&dom, "data", 0o600).unwrap();
        let token = forge_publisher(&t, sys::pid_namespace());
        assert_eq!(t.publisher_liveness(0, token), Liveness::Dead);
        assert_eq!(t.sweep(), 1);
        assert!(t.remove_if_unused());
    }

    #[test]
    fn another_namespaces_participant_is_dead_once_its_lock_is_gone() {
        let dom = domain("pidnslock");
        let t = Topic::open(&dom, "data", 0o600).unwrap();
        // The participant's own open of the control segment, holding its slot's lock.
        let theirs = Topic::open(&dom, "data", 0o600).unwrap();
        let token = forge_publisher(&t, sys::pid_namespace() ^ 0x5555);
        theirs.hold(&theirs.publisher(0).owner, lock_at(Side::Publisher, 0));
        assert_eq!(t.publisher(0).owner.held.load(Ordering::Relaxed), 1);
        assert_eq!(t.publisher_liveness(0, token), Liveness::Unknown);
        assert_eq!(t.sweep(), 0, "its lock is held: it runs");
        // Its process ends: the kernel closes its open, and the lock goes with it.
        drop(theirs);
        assert_eq!(t.publisher_liveness(0, token), Liveness::Dead);
        let snap = t.snapshot();
        assert!(!snap.publishers[0].alive && snap.publishers[0].other_pid_namespace);
        assert_eq!(t.sweep(), 1);
        assert_eq!(t.publisher(0).owner.held.load(Ordering::Relaxed), 0);
        // A slot that never said it holds a lock (a process that could not take one) stays
        // unknown: never swept on a lock it never had.
        let token = forge_publisher(&t, sys::pid_namespace() ^ 0x5555);
        assert_eq!(t.publisher_liveness(0, token), Liveness::Unknown);
        assert_eq!(clean_forced(Some(&dom)).unwrap().freed_slots, 1);
    }

    #[test]
    fn a_participants_own_lock_is_released_when_it_leaves() {
        let dom = domain("lockleave");
        let t = Topic::open(&dom, "data", 0o600).unwrap();
        let other = Topic::open(&dom, "data", 0o600).unwrap();
        let (slot, token) = t.claim_subscriber("me", None).unwrap();
        t.subscriber_ready(slot);
        let at = lock_at(Side::Subscriber, slot);
        assert!(other.seg.obj.byte_locked(at).unwrap());
        t.release_subscriber(slot, token);
        assert!(!other.seg.obj.byte_locked(at).unwrap());
        assert_eq!(t.subscriber(slot).owner.held.load(Ordering::Relaxed), 0);
        drop(other);
        assert!(t.remove_if_unused());
    }

    #[test]
    fn a_half_claimed_slot_of_another_pid_namespace_is_not_swept() {
        let t = Topic::open(&domain("half"), "data", 0o600).unwrap();
        let o = &t.publisher(0).owner;
        // Claimed by pid NO_SUCH_PID of another namespace, not yet ready.
        o.token
            .store(1 << 32 | NO_SUCH_PID as u64, Ordering::Relaxed);
        o.pid_ns.store(sys::pid_namespace() ^ 1, Ordering::Relaxed);
        assert_eq!(o.liveness().0, Liveness::Unknown);
        assert_eq!(t.sweep(), 0);
        o.pid_ns.store(sys::pid_namespace(), Ordering::Relaxed);
        assert_eq!(o.liveness().0, Liveness::Dead);
        assert_eq!(t.sweep(), 1);
        assert!(t.remove_if_unused());
    }
}
