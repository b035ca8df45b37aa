//! A publisher's end of the shared-memory transport.

use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::layout::{header_bytes, DataBlock, MAGIC_DATA};
use super::ring::{self, Reservation, Writer};
use super::segment::{self, publish_header, Segment};
use super::topic::{data_name, ring_doorbell, Liveness, Topic};
use super::ShmBytes;
use crate::sync::spin_hint;
use crate::sys::{self, Mapping, ProcessId, ShmObject};
use crate::{Delivery, Error, Qos, SendError, WaitStrategy};

/// How often a waiting publisher looks for dead subscribers holding it back.
const LIVENESS_PERIOD: Duration = Duration::from_millis(10);
/// How often a wait for room asks whether to go on (`reserve_while`); a blocked wait sleeps
/// at most `LIVENESS_PERIOD` at a time, so the ask is never later than this and that.
pub const CHECK_PERIOD: Duration = Duration::from_millis(50);

pub struct ShmPublisher {
    // Field order is drop order: the writer state and mapping go before the topic.
    writer: Writer,
    bytes: ShmBytes,
    data: Segment<DataBlock>,
    topic: Topic,
    slot: usize,
    token: u64,
    max_message: usize,
    wait: WaitStrategy,
    send_timeout: Duration,
    /// Whether dropping it waits (up to `send_timeout`) for its subscribers to take what it
    /// wrote; not for a service client's requests, which nobody answers once it has gone.
    linger: bool,
    spin_window: Duration,
    /// The hold this publisher steps over and since when: a hold kept for `LIVENESS_PERIOD` has
    /// its reader looked at (a process that died holding would otherwise cost every lap a
    /// padding record until its slot is taken again).
    hold_since: Option<(u64, Instant)>,
}

/// A reliable publisher's new ring counts the reliable subscribers already on the topic as
/// readers from its first record, before any of them can see the ring: each adopts its place
/// when it attaches (`Reader::join`), so that a subscriber that was there first gets the
/// publisher's first messages, however soon they are sent. Left out: subscribers not yet ready,
/// dead, latest, or of another host (network namespace): an `auto` one there takes this
/// publisher over UDP and never attaches its ring (a shared-memory one there joins as before,
/// from the moment it attaches). One that never attaches holds the publisher back as an attached one
/// would, until it is found dead or the send times out.
fn expect_subscribers(topic: &Topic, ring: &ring::RingHeader) {
    for i in 0..ring::MAX_READERS {
        let (live, token) = topic.subscriber_state(i);
        if live != super::topic::Liveness::Alive || token == 0 {
            continue;
        }
        let s = topic.subscriber(i);
        // Acquire pairs with the Release in `Owner::set_ready`.
        let ready = s.owner.ready.load(Ordering::Acquire) == 1;
        let reliable = s.reliable.load(Ordering::Relaxed) != 0;
        // A ring reader's slot says shared memory alone (the UDP half of an `auto` subscriber
        // has a slot of its own); one of another host (network namespace) may be an `auto`
        // subscriber's, which reads only its own host's rings, so it is not expected.
        let ring_reader = s.transport.load(Ordering::Relaxed) == super::topic::TRANSPORT_SHM;
        let same_host = s.owner.host.load(Ordering::Relaxed) == sys::host_id();
        if ready && reliable && ring_reader && same_host {
            ring::expect_reader(ring, i, token);
        }
    }
}

impl ShmPublisher {
    pub fn create(
        domain: &str,
        topic_name: &str,
        node: &str,
        qos: &Qos,
        mode: u32,
    ) -> Result<ShmPublisher, Error> {
        let page = sys::page_size();
        let capacity = qos.effective_capacity(page)?;
        let topic = Topic::open(domain, topic_name, mode)?;
        let (slot, token) = topic.claim_publisher(node, qos.topic_type.as_ref())?;
        match Self::make_ring(&topic, token, capacity, qos, mode) {
            Ok(data) => {
                let reliable = qos.delivery == Delivery::Reliable;
                let p = topic.publisher(slot);
                p.reliable.store(reliable as u32, Ordering::Relaxed);
                p.transport
                    .store(super::topic::TRANSPORT_SHM, Ordering::Relaxed);
                p.capacity.store(capacity, Ordering::Relaxed);
                p.max_message
                    .store(qos.max_message_size as u64, Ordering::Relaxed);
                let block = data.block();
                let mut writer = Writer::new(&block.ring, capacity, reliable);
                if qos.history > 0 {
                    writer = writer.with_history(&block.ring, qos.history);
                }
                if reliable {
                    expect_subscribers(&topic, &block.ring);
                }
                // SAFETY: map_ring mapped 2 * capacity bytes after the header; `data` owns the
                // mapping and outlives `bytes` (field order).
                let bytes =
                    unsafe { ShmBytes::new(data.map.as_ptr().add(data.header_bytes), capacity) };
                topic.publisher_ready(slot);
                Ok(ShmPublisher {
                    writer,
                    bytes,
                    data,
                    topic,
                    slot,
                    token,
                    max_message: qos.max_message_size,
                    wait: qos.wait,
                    send_timeout: qos.send_wait(),
                    linger: true,
                    spin_window: qos.spin_window,
                    hold_since: None,
                })
            }
            Err(e) => {
                topic.release_publisher(slot, token);
                Err(e)
            }
        }
    }

    fn make_ring(
        topic: &Topic,
        token: u64,
        capacity: u64,
        qos: &Qos,
        mode: u32,
    ) -> Result<Segment<DataBlock>, Error> {
        let hb = header_bytes::<DataBlock>(sys::page_size());
        let name = data_name(topic.name(), token);
        let total = hb as u64 + capacity;
        let obj = match ShmObject::create(&name, total, mode) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // Left by a dead process of an earlier incarnation of this topic (removing a
                // symbolic link removes the link, never its target).
                let _ = sys::shm_unlink(&name);
                ShmObject::create(&name, total, mode)
            }
            r => r,
        }
        .map_err(|e| {
            let exists = e.kind() == io::ErrorKind::AlreadyExists;
            exists
                .then(|| segment::explain_existing(&name))
                .flatten()
                .unwrap_or_else(|| segment::create_error(&name, total, e))
        })?;
        let map = Mapping::map_ring(&obj, hb, capacity as usize)
            .map_err(|e| Error::io(format!("map ring {name}"), e))?;
        let seg: Segment<DataBlock> = Segment::from_parts(obj, map, hb);
        let b = seg.block();
        let me = ProcessId::current();
        b.publisher_token.store(token, Ordering::Relaxed);
        b.pid.store(me.pid, Ordering::Relaxed);
        b.start_time.store(me.start_time, Ordering::Relaxed);
        b.pid_ns.store(me.pid_ns, Ordering::Relaxed);
        b.capacity.store(capacity, Ordering::Relaxed);
        b.max_message
            .store(qos.max_message_size as u64, Ordering::Relaxed);
        b.reliable.store(
            (qos.delivery == Delivery::Reliable) as u32,
            Ordering::Relaxed,
        );
        publish_header(&seg.map, MAGIC_DATA, hb, total);
        Ok(seg)
    }

    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// Its token in the topic's directory (what a subscriber's `Sample::publisher` reports).
    pub fn token(&self) -> u64 {
        self.token
    }

    /// Subscribers attached to this publisher's ring.
    pub fn subscriber_count(&self) -> usize {
        let ring = &self.data.block().ring;
        // Relaxed: a count for display and start-up synchronisation only.
        ring.readers
            .iter()
            .filter(|r| r.owner.load(Ordering::Relaxed) != 0)
            .count()
    }

    /// Subscribers attached to the ring once those whose process ended were let go (each such
    /// eviction counted as a reliable publisher's are). Reads /proc per attached subscriber: for
    /// occasional looks (a service client watching its server), not per message.
    pub fn live_subscriber_count(&self) -> usize {
        let ring = &self.data.block().ring;
        (0..ring::MAX_READERS)
            .filter(|&i| {
                ring.readers[i].owner.load(Ordering::Relaxed) != 0 && !self.evict_if_gone(i)
            })
            .count()
    }

    /// The subscribers whose place in the ring leaves no room for a `len`-byte message now,
    /// each as its node and pid (names read from the topic's directory, quoted as found).
    pub fn holders(&self, len: usize) -> Vec<String> {
        let ring = &self.data.block().ring;
        let mask = self.writer.laggards(ring, len as u64);
        (0..ring::MAX_READERS)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| {
                let owner = &self.topic.subscriber(i).owner;
                format!(
                    "node {} (pid {})",
                    crate::quoted_name(&owner.node()),
                    owner.pid()
                )
            })
            .collect()
    }

    /// The topic's directory.
    pub fn topic(&self) -> &Topic {
        &self.topic
    }

    /// Its slot in the topic's directory (where its counters live).
    pub fn slot(&self) -> &super::layout::PublisherSlot {
        self.topic.publisher(self.slot)
    }

    /// Reserves room for `len` payload bytes. Where reliable subscribers leave no room, waits
    /// for them as the QoS says (`wait`), or returns `None` at once.
    #[inline]
    pub fn reserve(&mut self, len: usize, wait: bool) -> Result<Option<Reservation>, SendError> {
        if len <= self.max_message {
            if let Some(r) = self
                .writer
                .reserve_common(&self.data.block().ring, len as u64)
            {
                return Ok(Some(r));
            }
        }
        self.reserve_any(len, wait, None)
    }

    /// As `reserve` waiting for room, but asking `keep_waiting` every [`CHECK_PERIOD`] while it
    /// waits: `None` once that says no (a language binding's look for its interrupts).
    pub fn reserve_while(
        &mut self,
        len: usize,
        keep_waiting: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Reservation>, SendError> {
        self.reserve_any(len, true, Some(keep_waiting))
    }

    /// `reserve` for every case: a held record to step over, padding due, no room.
    #[inline(never)]
    fn reserve_any(
        &mut self,
        len: usize,
        wait: bool,
        keep_waiting: Option<&mut dyn FnMut() -> bool>,
    ) -> Result<Option<Reservation>, SendError> {
        if len > self.max_message {
            return Err(SendError::TooLarge {
                len,
                max: self.max_message,
            });
        }
        if let Some((word, slot)) = self.writer.holder() {
            self.watch_holder(word, slot);
        }
        let ring = &self.data.block().ring;
        let wake = self.writer.skip_to_window(ring, &self.bytes, len as u64);
        if wake != 0 {
            self.wake(wake);
        }
        if let Ok(r) = self.writer.try_reserve(ring, &self.bytes, len as u64) {
            return Ok(Some(r));
        }
        if !wait {
            return Ok(None);
        }
        self.reserve_slow(len, keep_waiting)
    }

    /// Waits for room, up to the send timeout; `None` when `keep_waiting` said no first.
    #[cold]
    fn reserve_slow(
        &mut self,
        len: usize,
        mut keep_waiting: Option<&mut dyn FnMut() -> bool>,
    ) -> Result<Option<Reservation>, SendError> {
        let slot = self.topic.publisher(self.slot);
        slot.waits.fetch_add(1, Ordering::Relaxed);
        let start = Instant::now();
        let deadline = start + self.send_timeout;
        let mut next_check = start + CHECK_PERIOD;
        let mut next_liveness = start;
        let mut spins = 0u32;
        let mut now = start;
        loop {
            if spins % 256 == 0 {
                now = Instant::now();
            }
            if now >= next_liveness {
                self.evict_dead_laggards(len);
                next_liveness = now + LIVENESS_PERIOD;
            }
            let block = self.data.block();
            if let Ok(r) = self
                .writer
                .try_reserve(&block.ring, &self.bytes, len as u64)
            {
                return Ok(Some(r));
            }
            if now >= deadline {
                slot.timeouts.fetch_add(1, Ordering::Relaxed);
                return Err(SendError::Timeout(self.send_timeout));
            }
            if let Some(keep) = keep_waiting.as_mut().filter(|_| now >= next_check) {
                next_check = now + CHECK_PERIOD;
                if !keep() {
                    return Ok(None);
                }
            }
            let block_now = match self.wait {
                WaitStrategy::Spin => false,
                WaitStrategy::Block => true,
                WaitStrategy::Adaptive => now.duration_since(start) >= self.spin_window,
            };
            if block_now {
                // Acquire pairs with the Release bump in `ring_doorbell` by a releasing reader.
                let bell = block.space_bell.load(Ordering::Acquire);
                if !self.writer.announce_wait(&block.ring, len as u64) {
                    let left = deadline.saturating_duration_since(Instant::now());
                    sys::futex_wait(&block.space_bell, bell, Some(left.min(LIVENESS_PERIOD)));
                }
                self.writer.end_wait(&block.ring);
                spins = 0;
            } else {
                spin_hint();
                spins = spins.wrapping_add(1);
            }
        }
    }

    /// Dropping it will not wait for its subscribers to take what it wrote.
    pub fn no_linger(&mut self) {
        self.linger = false;
    }

    /// Stops waiting for subscribers that hold the ring back but no longer run.
    fn evict_dead_laggards(&self, len: usize) {
        let ring = &self.data.block().ring;
        let mask = self.writer.laggards(ring, len as u64);
        for i in (0..ring::MAX_READERS).filter(|i| mask & (1 << i) != 0) {
            self.evict_if_gone(i);
        }
    }

    /// Looks at the reader that holds `word` once it has held it for `LIVENESS_PERIOD`; when that
    /// reader no longer runs, leaves its slot and lets go of its hold. One clock read per
    /// reservation while a hold is stepped over (messages of 16 KiB or more, whose copy costs
    /// far more).
    #[cold]
    fn watch_holder(&mut self, word: u64, slot: usize) {
        let now = Instant::now();
        match self.hold_since {
            Some((seen, since)) if seen == word => {
                if now.duration_since(since) < LIVENESS_PERIOD {
                    return;
                }
            }
            _ => {
                self.hold_since = Some((word, now));
                return;
            }
        }
        self.hold_since = Some((word, now));
        if self.evict_if_gone(slot) {
            self.writer.drop_hold(&self.data.block().ring, word);
            self.hold_since = None;
        }
    }

    /// Leaves ring slot `i` for its reader when that reader no longer runs (its process died, or
    /// its topic slot went to another subscriber), counting an eviction. True if it was left.
    fn evict_if_gone(&self, i: usize) -> bool {
        let ring = &self.data.block().ring;
        let owner = ring.readers[i].owner.load(Ordering::Acquire);
        if owner == 0 {
            return false;
        }
        let token = owner >> 1;
        let (live, ctl_token) = self.topic.subscriber_state(i);
        // A reader of another PID namespace (`Unknown`) is waited for like a live one.
        let stale = ctl_token != token || matches!(live, Liveness::Dead | Liveness::Free);
        // AcqRel pairs with the reader's SeqCst owner store in `Reader::join`: only the exact
        // stale owner is removed, never a reader that joined meanwhile.
        if !stale
            || ring.readers[i]
                .owner
                .compare_exchange(owner, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return false;
        }
        self.topic
            .publisher(self.slot)
            .evictions
            .fetch_add(1, Ordering::Relaxed);
        if live == Liveness::Dead {
            self.topic.evict_subscriber_if_dead(i, ctl_token);
        }
        true
    }

    /// Where the payload of `r` goes (contiguous for `r.payload_len` bytes).
    pub fn payload_ptr(&self, r: &Reservation) -> *mut u8 {
        self.bytes.ptr(r.payload_offset(self.writer.capacity()))
    }

    /// Publishes a reserved record and wakes subscribers that sleep.
    pub fn commit(&mut self, r: Reservation) {
        let len = r.payload_len;
        let wake = self.writer.commit(&self.data.block().ring, &self.bytes, r);
        let slot = self.topic.publisher(self.slot);
        // Relaxed: statistics, single writer.
        slot.sent
            .store(slot.sent.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        slot.bytes
            .store(slot.bytes.load(Ordering::Relaxed) + len, Ordering::Relaxed);
        self.wake(wake);
    }

    /// Gives a reservation back unused.
    pub fn abandon(&mut self, r: Reservation) {
        let wake = self.writer.abandon(&self.data.block().ring, &self.bytes, r);
        self.wake(wake);
    }

    fn wake(&self, mut mask: u64) {
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            ring_doorbell(&self.topic.subscriber(i).doorbell);
        }
    }

    /// Messages sent so far.
    pub fn sent(&self) -> u64 {
        self.writer.seq()
    }
}

impl ShmPublisher {
    /// Waits until every reliable subscriber the ring expected since it was made (one there
    /// before this publisher) has attached it, at most `timeout` — one attached reads what was
    /// written even after the publisher has gone; subscribers found dead meanwhile are let go.
    /// `Undelivered` says how many had not, and the bytes written since.
    pub fn flush(&self, timeout: Duration) -> Result<(), SendError> {
        let start = Instant::now();
        let deadline = start.checked_add(timeout);
        let ring = &self.data.block().ring;
        let mut next_liveness = start;
        loop {
            let (behind_mask, bytes) = self.writer.unread_by(ring);
            let behind = behind_mask.count_ones() as usize;
            if behind == 0 {
                return Ok(());
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(SendError::Undelivered {
                    receivers: behind,
                    bytes,
                    after: timeout,
                });
            }
            if now >= next_liveness {
                self.evict_dead_laggards(0);
                // A reader waited for that has gone — its process ended, or its subscriber left
                // the topic before it ever attached this ring — is waited for no more.
                for i in (0..ring::MAX_READERS).filter(|i| behind_mask & (1 << i) != 0) {
                    self.evict_if_gone(i);
                }
                next_liveness = now + LIVENESS_PERIOD;
            }
            // Readers ring the space bell only for a writer that announced a wait for room; a
            // close looks again every millisecond instead.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for ShmPublisher {
    fn drop(&mut self) {
        // A reliable publisher that goes lingers, up to its send timeout, for the reliable
        // subscribers that were there before it to attach its ring (the segment and the slot
        // stay until then): those attached read what it wrote after it has gone.
        if self.linger {
            let _ = self.flush(self.send_timeout);
        }
        let b = self.data.block();
        b.closed.store(1, Ordering::Release);
        let _ = sys::shm_unlink(self.data.name());
        self.topic.leave_publisher(self.slot, self.token);
    }
}

impl std::fmt::Debug for ShmPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.topic
            .debug_participant(f, "ShmPublisher", Some(self.slot))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::shm::ring::{record_header, RingBytes};
    use crate::shm::ShmSubscriber;
    use crate::{RecvError, Transport};

    /// What a subscriber's `wait` gives once the publisher's ring has been scribbled on by
    /// `forge`, waiting at most 20 s for the call to return (it must neither panic nor spin).
    fn recv_after(
        what: &str,
        delivery: Delivery,
        forge: impl FnOnce(&ShmPublisher),
    ) -> (Result<(), RecvError>, Vec<String>) {
        recv_after_forging(what, delivery, |_| {}, forge)
    }

    /// As `recv_after`, with the ring also scribbled on by `before_join` before the subscriber
    /// attaches to it.
    fn recv_after_forging(
        what: &str,
        delivery: Delivery,
        before_join: impl FnOnce(&ShmPublisher),
        forge: impl FnOnce(&ShmPublisher),
    ) -> (Result<(), RecvError>, Vec<String>) {
        let dom = format!("u{}-{what}", std::process::id());
        let qos = Qos::default()
            .transport(Transport::Shm)
            .delivery(delivery)
            .wait(WaitStrategy::Block)
            .max_message_size(1024);
        let mode = crate::config::DEFAULT_SHM_MODE;
        let publ = ShmPublisher::create(&dom, "data", "p", &qos, mode).unwrap();
        before_join(&publ);
        let mut sub = ShmSubscriber::create(&dom, "data", "s", &qos, mode).unwrap();
        assert_eq!(sub.publisher_count(), 1);
        forge(&publ);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let got = sub.wait(Some(Duration::from_secs(5))).map(|_| ());
            let refused = sub.refused().map(str::to_owned).collect();
            let _ = tx.send((got, refused));
        });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("recv returned (it must neither panic nor spin on a corrupt ring)")
    }

    /// Padding records over the whole ring, and `head` (and `last`) where no writer could have
    /// put them.
    fn padding_and_lies(publ: &ShmPublisher, last: u64) {
        let cap = publ.writer.capacity();
        for at in (0..cap).step_by(16) {
            publ.bytes.write(at, &record_header(0, 0, true));
        }
        let ring = &publ.data.block().ring;
        ring.head.last.store(last, Ordering::Relaxed);
        ring.reserve.end.store(1 << 40, Ordering::Relaxed);
        // Release pairs with the subscriber's Acquire load of head.
        ring.head.end.store(1 << 40, Ordering::Release);
    }

    #[test]
    fn a_ring_of_padding_with_a_lying_head_makes_recv_fail_not_spin() {
        for (delivery, name) in [(Delivery::Reliable, "padrel"), (Delivery::Latest, "padlat")] {
            // A latest reader jumps to `last`: a lie there too (a hundred rings short of head).
            let (got, refused) = recv_after(name, delivery, |p| {
                padding_and_lies(p, (1 << 40) - 100 * p.writer.capacity())
            });
            assert!(
                matches!(got, Err(RecvError::Corrupt { .. })),
                "{delivery:?}: {got:?}"
            );
            assert_eq!(refused.len(), 1, "{refused:?}");
        }
    }

    /// A ring whose `head`, `last` and `reserve` are forged to positions no record could start
    /// or end at (not multiples of 8) before the subscriber joins: the subscriber reports the
    /// ring as corrupt, as it does any other lie, and does not panic on a misaligned read.
    #[test]
    fn misaligned_positions_in_a_forged_ring_are_corrupt_not_a_panic() {
        for (delivery, name) in [(Delivery::Reliable, "oddrel"), (Delivery::Latest, "oddlat")] {
            let (got, _) = recv_after_forging(
                name,
                delivery,
                |p| {
                    let ring = &p.data.block().ring;
                    ring.head.last.store(5, Ordering::Relaxed);
                    ring.reserve.end.store(21, Ordering::Relaxed);
                    // Release pairs with the subscriber's Acquire load of head.
                    ring.head.end.store(13, Ordering::Release);
                },
                // Then a lie that there is something to read.
                |p| p.data.block().ring.head.end.store(77, Ordering::Release),
            );
            assert!(
                matches!(got, Err(RecvError::Corrupt { .. })),
                "{delivery:?}: {got:?}"
            );
        }
    }

    /// Many laps of a reliable ring through the subscriber's short path and its fallback: small
    /// messages that fill the window (padding at each lap's window end), messages too large for
    /// the window, and loans given back (padding in the middle of a lap), sent in bursts and
    /// read in between. Every message arrives once, in order, intact, and is counted. (A burst
    /// stays under 6 KiB: right after the writer has gone to the next lap's window it has about
    /// a window's room there until the reader has stepped over the padding; docs/ARCHITECTURE.md,
    /// "The window".)
    #[test]
    fn laps_of_padding_and_abandoned_loans_pass_through_the_short_path_intact() {
        let dom = format!("u{}-laps", std::process::id());
        let qos = Qos::default()
            .transport(Transport::Shm)
            .delivery(Delivery::Reliable)
            .wait(WaitStrategy::Spin)
            .max_message_size(6000)
            .ring_capacity(64 << 10);
        let mode = crate::config::DEFAULT_SHM_MODE;
        let mut publ = ShmPublisher::create(&dom, "data", "p", &qos, mode).unwrap();
        let mut sub = ShmSubscriber::create(&dom, "data", "s", &qos, mode).unwrap();
        assert_eq!(sub.publisher_count(), 1);
        let sizes = [8usize, 40, 1000, 3000, 5000, 32, 2000, 500];
        let byte = |seq: u64| (seq % 251) as u8 + 1;
        let (mut sent, mut got, mut abandoned, mut written) = (0u64, 0u64, 0u64, 0u64);
        let mut turn = 0usize;
        for burst in 0..600 {
            let mut burst_bytes = 0;
            for _ in 0..1 + burst % 5 {
                let len = sizes[turn % sizes.len()];
                burst_bytes += ring::record_len(len as u64);
                if burst_bytes > 6 << 10 {
                    break;
                }
                turn += 1;
                let r = publ.reserve(len, false).unwrap().expect("room");
                written += ring::record_len(len as u64);
                if turn % 11 == 3 {
                    publ.abandon(r);
                    abandoned += 1;
                    continue;
                }
                let at = r.payload_offset(publ.writer.capacity());
                publ.bytes.write(at, &vec![byte(sent); len.div_ceil(8) * 8]);
                publ.commit(r);
                sent += 1;
            }
            while sub.poll().unwrap() {
                let rec = *sub.current().unwrap();
                assert_eq!(rec.seq, got, "in order, none lost");
                assert!(
                    sizes.contains(&(rec.len as usize)),
                    "a length sent: {}",
                    rec.len
                );
                assert!(sub.payload().iter().all(|&b| b == byte(got)), "intact");
                sub.release();
                got += 1;
            }
        }
        assert_eq!(got, sent);
        assert!(
            abandoned > 0 && written > 4 * publ.writer.capacity(),
            "laps of both kinds"
        );
        let stats = publ.topic.snapshot();
        assert_eq!(stats.subscribers.len(), 1);
        assert_eq!(
            stats.subscribers[0].received, got,
            "every message counted once"
        );
    }

    /// The size of message a latest reader holds in place.
    const HELD: usize = ring::HOLD_MIN as usize;

    /// A publisher of messages of `HELD` bytes on a 256 KiB ring and a latest subscriber that
    /// spins, attached to it, with the subscriber's ring slot.
    fn latest_pair_of_held_size(name: &str) -> (ShmPublisher, ShmSubscriber, usize) {
        let dom = format!("u{}-{name}", std::process::id());
        let qos = Qos::default()
            .transport(Transport::Shm)
            .delivery(Delivery::Latest)
            .wait(WaitStrategy::Spin)
            .max_message_size(HELD)
            .ring_capacity(256 << 10);
        let mode = crate::config::DEFAULT_SHM_MODE;
        let publ = ShmPublisher::create(&dom, "data", "p", &qos, mode).unwrap();
        let mut sub = ShmSubscriber::create(&dom, "data", "s", &qos, mode).unwrap();
        assert_eq!(sub.publisher_count(), 1);
        let slot = {
            let ring = &publ.data.block().ring;
            (0..ring::MAX_READERS)
                .find(|&i| ring.readers[i].owner.load(Ordering::Relaxed) != 0)
                .expect("the subscriber's ring slot")
        };
        (publ, sub, slot)
    }

    /// Writes `word` into the ring's hold word, as any process that maps the ring could.
    fn forge_hold(publ: &ShmPublisher, word: u64) {
        // Relaxed: the publisher loads it after its SeqCst fence, as it would a reader's.
        publ.data
            .block()
            .ring
            .reserve
            .hold
            .store(word, Ordering::Relaxed);
    }

    /// A hold word forged to name a position no record starts at (not a multiple of 8): the
    /// publisher does not read a header there (a misaligned read made it panic) and goes on
    /// sending, and the subscriber goes on receiving.
    #[test]
    fn a_forged_hold_at_a_misaligned_position_is_ignored() {
        let (mut publ, mut sub, slot) = latest_pair_of_held_size("oddhold");
        let send = |publ: &mut ShmPublisher| {
            let r = publ.reserve(HELD, true).unwrap().unwrap();
            publ.commit(r);
        };
        for _ in 0..4 {
            send(&mut publ);
        }
        // Position 3, named by the live subscriber's slot.
        let word = 3 << 8 | (slot + 1) as u64;
        forge_hold(&publ, word);
        for _ in 0..20 {
            send(&mut publ);
        }
        assert_eq!(publ.sent(), 24);
        assert_eq!(
            publ.writer.holder(),
            None,
            "a misaligned hold is not honoured"
        );
        assert!(sub.poll().unwrap(), "the subscriber still receives");
    }

    /// A hold word forged to name a live subscriber's slot, as any process that maps the ring
    /// could write one: the publisher steps over the named record (it is one of its own, and the
    /// ring has room to step over it), looks at the named subscriber once the hold has lasted
    /// its liveness period, finds it running, and leaves it alone. Nobody is evicted, the
    /// subscriber goes on receiving intact messages, and once the word is cleared the publisher
    /// stops stepping over the record.
    #[test]
    fn a_forged_hold_naming_a_live_subscriber_evicts_nobody() {
        const LEN: usize = HELD;
        let (mut publ, mut sub, slot) = latest_pair_of_held_size("forgedhold");
        let byte = |seq: u64| (seq % 251) as u8 + 1;
        let send = |publ: &mut ShmPublisher| {
            let seq = publ.sent();
            let r = publ.reserve(LEN, true).unwrap().unwrap();
            let at = r.payload_offset(publ.writer.capacity());
            publ.bytes.write(at, &[byte(seq); LEN]);
            publ.commit(r);
        };
        // Message 0 at position 0, then enough after it that its next copy lies close enough
        // ahead for the publisher to step over it, as an honest hold's would.
        for _ in 0..4 {
            send(&mut publ);
        }
        let word = (slot + 1) as u64; // position 0
        forge_hold(&publ, word);
        let forged = Instant::now();
        let mut received = 0;
        // Past the liveness period, and three laps of the ring (16 messages each).
        while forged.elapsed() < 5 * LIVENESS_PERIOD || publ.sent() < 4 + 3 * 16 {
            assert!(
                forged.elapsed() < Duration::from_secs(30),
                "the sends stalled"
            );
            send(&mut publ);
            assert_eq!(
                publ.writer.holder(),
                Some((word, slot)),
                "the hold is honoured"
            );
            if sub.poll().unwrap() {
                let (seq, payload) = (sub.current().unwrap().seq, sub.payload());
                assert!(payload.len() == LEN && payload.iter().all(|&b| b == byte(seq)));
                received += 1;
                sub.release();
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        assert!(received > 0, "the subscriber went on receiving");
        // The publisher looked at the named subscriber after the liveness period...
        let looked = publ.hold_since.expect("the hold is watched").1;
        assert!(looked >= forged + LIVENESS_PERIOD);
        // ...and left it alone.
        let ring = &publ.data.block().ring;
        assert_eq!(
            publ.topic
                .publisher(publ.slot)
                .evictions
                .load(Ordering::Relaxed),
            0
        );
        assert_ne!(ring.readers[slot].owner.load(Ordering::Relaxed), 0);
        assert_eq!(ring.reserve.hold.load(Ordering::Relaxed), word);
        // The named record was never written over.
        let mut held = vec![0u8; LEN];
        publ.bytes.read(ring::RECORD_HEADER, &mut held);
        assert!(held.iter().all(|&b| b == byte(0)));
        // The forger lets go: the publisher takes the word in and writes the ring whole again.
        ring.reserve.hold.store(0, Ordering::Relaxed);
        send(&mut publ);
        assert_eq!(publ.writer.holder(), None);
        for _ in 0..32 {
            send(&mut publ);
        }
        publ.bytes.read(ring::RECORD_HEADER, &mut held);
        assert!(
            !held.iter().all(|&b| b == byte(0)),
            "position 0 written again"
        );
    }

    #[test]
    fn a_record_longer_than_the_maximum_makes_recv_fail() {
        for (delivery, name) in [(Delivery::Reliable, "lenrel"), (Delivery::Latest, "lenlat")] {
            let (got, _) = recv_after(name, delivery, |p| {
                p.bytes.write(0, &record_header(0, 100_000, false));
                let ring = &p.data.block().ring;
                ring.head.last.store(0, Ordering::Relaxed);
                ring.reserve.end.store(4096, Ordering::Relaxed);
                // Release pairs with the subscriber's Acquire load of head.
                ring.head.end.store(4096, Ordering::Release);
            });
            assert!(
                matches!(got, Err(RecvError::Corrupt { pos: 0, .. })),
                "{delivery:?}: {got:?}"
            );
        }
    }
}
