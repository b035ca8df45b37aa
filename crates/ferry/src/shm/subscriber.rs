//! A subscriber's end of the shared-memory transport: it reads every publisher of its topic.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::data::{open_ring, Mapped, OpenRing};
use super::layout::DataBlock;
use super::ring::{self, Reader, Record, Step};
use super::segment::Segment;
use super::topic::{ring_doorbell, Liveness, Topic};
use super::ShmBytes;
use crate::event::{Event, Events, Gone};
use crate::sync::spin_hint;
use crate::sys;
use crate::{Delivery, Error, PublisherId, Qos, RecvError, WaitStrategy};

/// How often an idle subscriber checks that its publishers still run (a publisher killed is
/// seen dead within it).
const LIVENESS_PERIOD: Duration = Duration::from_millis(50);

/// How long a wait set may leave a subscriber without publishers unlooked at.
const IDLE_LOOK: Duration = Duration::from_millis(500);

/// One publisher this subscriber reads.
struct Source {
    reader: Reader,
    bytes: ShmBytes,
    data: Segment<DataBlock>,
    pub_slot: usize,
    pub_token: u64,
    reliable: bool,
    /// The publisher is gone: read what it left, then detach.
    departed: bool,
    /// Messages of it kept past their receive (`keep`): it stays mapped while any is.
    kept: usize,
    /// A corrupt record was found while messages of it were kept: it is read no more, and
    /// detached once they are let go.
    broken: bool,
}

/// A message kept past its receive (`ShmSubscriber::keep`), until `let_go`.
struct Kept {
    id: u64,
    /// Its publisher's token (sources are found by it: their order changes).
    token: u64,
    what: KeptWhat,
    /// Its bytes: in the ring (which the writer does not reuse while it is kept), or in `what`.
    ptr: *const u8,
    len: usize,
}

// SAFETY: `ptr` points into a ring mapping owned by the same subscriber (a source with kept
// records stays attached) or into the entry's own copy; it moves with the subscriber.
unsafe impl Send for Kept {}

enum KeptWhat {
    /// Reliable, read in place: the record's start.
    Ring { start: u64 },
    /// Latest, held in place (one per ring at a time).
    Held,
    /// Copied out.
    Copy(#[allow(dead_code)] Vec<u8>),
}

/// The message `poll` found, held by the subscriber until it is released.
#[derive(Debug, Clone, Copy)]
enum Ready {
    /// Read in place from source `source`; release `record.end` when done.
    InPlace { source: usize, record: Record },
    /// Copied into the subscriber's scratch buffer (latest delivery).
    Copied { record: Record },
    /// Held in place in source `source` (latest delivery of a large message); let go when done.
    Held { source: usize, record: Record },
}

impl Ready {
    fn record(&self) -> &Record {
        match self {
            Ready::InPlace { record, .. }
            | Ready::Copied { record }
            | Ready::Held { record, .. } => record,
        }
    }
}

pub struct ShmSubscriber {
    sources: Vec<Source>,
    topic: Topic,
    slot: usize,
    token: u64,
    reliable: bool,
    wait: WaitStrategy,
    spin_window: Duration,
    epoch: u64,
    next_liveness: Instant,
    round_robin: usize,
    /// The message `poll` handed out last, until it is released.
    current: Option<Ready>,
    scratch: Vec<u8>,
    /// Publishers whose segments were refused (slot, token), with why.
    refused: Vec<(usize, u64, String)>,
    /// Under `auto`: read only rings of publishers on this host (network namespace).
    same_host_only: bool,
    /// The largest ring this subscriber maps (`Qos::max_ring_capacity`).
    max_ring: u64,
    /// Publishers that appeared and went, until taken.
    events: Events,
    /// `Qos::history`: how many of a publisher's kept messages to take when attaching its ring.
    history: usize,
    /// Kept messages taken when attaching, with their publisher's token: handed out before
    /// anything else.
    backlog: std::collections::VecDeque<(u64, ring::Past)>,
    /// Messages kept past their receive, and the next one's id.
    kept: Vec<Kept>,
    next_kept: u64,
}

impl ShmSubscriber {
    pub fn create(
        domain: &str,
        topic_name: &str,
        node: &str,
        qos: &Qos,
        mode: u32,
    ) -> Result<ShmSubscriber, Error> {
        let topic = Topic::open(domain, topic_name, mode)?;
        let (slot, token) = topic.claim_subscriber(node, qos.topic_type.as_ref())?;
        let reliable = qos.delivery == Delivery::Reliable;
        let s = topic.subscriber(slot);
        s.reliable.store(reliable as u32, Ordering::Relaxed);
        s.wait.store(qos.wait as u32, Ordering::Relaxed);
        s.transport
            .store(super::topic::TRANSPORT_SHM, Ordering::Relaxed);
        topic.subscriber_ready(slot);
        let mut sub = ShmSubscriber {
            sources: Vec::new(),
            topic,
            slot,
            token,
            reliable,
            wait: qos.wait,
            spin_window: qos.spin_window,
            epoch: u64::MAX,
            next_liveness: Instant::now() + LIVENESS_PERIOD,
            round_robin: 0,
            current: None,
            scratch: Vec::new(),
            refused: Vec::new(),
            same_host_only: qos.transport == crate::Transport::Auto,
            max_ring: qos.max_ring_capacity as u64,
            events: Events::default(),
            history: qos.history,
            backlog: std::collections::VecDeque::new(),
            kept: Vec::new(),
            next_kept: 1,
        };
        sub.rescan();
        Ok(sub)
    }

    /// Publishers currently attached (departed ones with unread data included).
    pub fn publisher_count(&mut self) -> usize {
        self.refresh();
        self.sources.iter().filter(|s| !s.departed).count()
    }

    /// Its slot in the topic's directory (where its counters live).
    /// The topic's directory.
    pub fn topic(&self) -> &Topic {
        &self.topic
    }

    pub fn slot(&self) -> &super::layout::SubscriberSlot {
        self.topic.subscriber(self.slot)
    }

    /// The next publisher event, if any.
    pub fn pop_event(&mut self) -> Option<Event> {
        self.events.pop()
    }

    /// Publisher events dropped because nobody took them.
    pub fn events_dropped(&self) -> u64 {
        self.events.dropped()
    }

    /// Segments refused while attaching, with the reason.
    pub fn refused(&self) -> impl Iterator<Item = &str> {
        self.refused.iter().map(|(_, _, why)| why.as_str())
    }

    fn refresh(&mut self) {
        if self.topic.epoch() != self.epoch {
            self.rescan();
        }
    }

    /// Attaches to new publishers and marks departed ones.
    fn rescan(&mut self) {
        self.epoch = self.topic.epoch();
        let mut present = Vec::new();
        for i in 0..super::layout::MAX_PUBLISHERS {
            let p = self.topic.publisher(i);
            // Acquire pairs with the Release in `Owner::set_ready`.
            if p.owner.ready.load(Ordering::Acquire) == 0 {
                continue;
            }
            let token = p.owner.token.load(Ordering::Acquire);
            if token == 0 {
                continue;
            }
            present.push((i, token));
            let known = self
                .sources
                .iter()
                .any(|s| s.pub_slot == i && s.pub_token == token)
                || self.refused.iter().any(|r| r.0 == i && r.1 == token);
            if known {
                continue;
            }
            if p.transport.load(Ordering::Relaxed) & super::topic::TRANSPORT_SHM == 0 {
                continue; // a UDP-only publisher has no ring
            }
            if self.same_host_only && p.owner.host.load(Ordering::Relaxed) != crate::sys::host_id()
            {
                continue; // under `auto`, another host's publisher reaches us over UDP
            }
            let pub_reliable = p.reliable.load(Ordering::Relaxed) != 0;
            match self.attach(i, token, pub_reliable) {
                Ok(Some((src, past))) => {
                    self.events.push(Event::Appeared(PublisherId::shm(token)));
                    self.sources.push(src);
                    self.backlog.extend(past.into_iter().map(|p| (token, p)));
                }
                Ok(None) => {}
                Err(e) => self.refused.push((i, token, e.to_string())),
            }
        }
        for s in self.sources.iter_mut() {
            if !s.departed && !present.contains(&(s.pub_slot, s.pub_token)) {
                s.departed = true;
                self.events
                    .push(Event::Gone(PublisherId::shm(s.pub_token), Gone::Closed));
            }
        }
    }

    fn attach(
        &self,
        pub_slot: usize,
        token: u64,
        pub_reliable: bool,
    ) -> Result<Option<(Source, Vec<ring::Past>)>, Error> {
        let Some(OpenRing {
            data,
            hb,
            capacity,
            max_message,
        }) = open_ring(self.topic.name(), token, self.max_ring, Mapped::ToRead)?
        else {
            return Ok(None);
        };
        let reliable = pub_reliable && self.reliable;
        let reader = Reader::join(
            &data.block().ring,
            capacity,
            max_message,
            self.slot,
            self.token,
            reliable,
        );
        // SAFETY: map_ring mapped 2 * capacity bytes after the header; `data` owns the mapping
        // and is stored beside `bytes` in the same Source, dropped after it.
        let bytes = unsafe { ShmBytes::new(data.map.as_ptr().add(hb), capacity) };
        // The messages the publisher kept from before this reader's place: read now, so that
        // the ring's live messages follow them with nothing between.
        let past = ring::history(
            &data.block().ring,
            &bytes,
            capacity,
            max_message,
            reader.position(),
            self.history,
        );
        let source = Source {
            reader,
            bytes,
            data,
            pub_slot,
            pub_token: token,
            reliable,
            departed: false,
            kept: 0,
            broken: false,
        };
        Ok(Some((source, past)))
    }

    /// Checks that attached publishers still run; frees what dead ones left.
    fn check_liveness(&mut self) {
        let mut swept = false;
        for s in self.sources.iter_mut().filter(|s| !s.departed) {
            match self.topic.publisher_liveness(s.pub_slot, s.pub_token) {
                // One of another PID namespace departs when it frees its slot.
                Liveness::Alive | Liveness::Unknown => {}
                Liveness::Free => {
                    s.departed = true;
                    self.events
                        .push(Event::Gone(PublisherId::shm(s.pub_token), Gone::Closed));
                }
                Liveness::Dead => {
                    s.departed = true;
                    swept = true;
                    self.events
                        .push(Event::Gone(PublisherId::shm(s.pub_token), Gone::Died));
                }
            }
        }
        if swept {
            self.topic.sweep();
        }
    }

    /// Looks for the next message without waiting; when there is one it becomes the current
    /// message (`payload`, `current`, `release`) and this returns true.
    #[inline]
    pub fn poll(&mut self) -> Result<bool, RecvError> {
        match self.poll_one() {
            Some(found) => Ok(found),
            None => self.poll_all(),
        }
    }

    /// `poll` for the common case, kept short because a spinning subscriber runs it from the
    /// moment a message lands to the moment it is handed out: one reliable publisher, no change
    /// in the topic, no message held. `None` leaves everything else (padding, a corrupt record,
    /// several publishers, latest delivery) to `poll_all`.
    #[inline(always)]
    fn poll_one(&mut self) -> Option<bool> {
        if self.sources.len() != 1
            || !self.backlog.is_empty()
            || matches!(self.current, Some(Ready::Held { .. }))
            || self.topic.epoch() != self.epoch
        {
            return None;
        }
        let src = &mut self.sources[0];
        if !src.reliable || src.departed {
            return None;
        }
        match src.reader.step(&src.data.block().ring, &src.bytes) {
            Step::Empty => {
                self.current = None;
                Some(false)
            }
            Step::Message(record) => {
                self.round_robin = 1;
                self.count(&record);
                self.current = Some(Ready::InPlace { source: 0, record });
                Some(true)
            }
            Step::Padding(_) | Step::Corrupt => None,
        }
    }

    /// Counts a message handed out in the subscriber's statistics.
    #[inline(always)]
    fn count(&self, rec: &Record) {
        let s = self.topic.subscriber(self.slot);
        // Relaxed: statistics with a single writer.
        s.received
            .store(s.received.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        s.bytes
            .store(s.bytes.load(Ordering::Relaxed) + rec.len, Ordering::Relaxed);
        if rec.skipped != 0 {
            s.skipped.fetch_add(rec.skipped, Ordering::Relaxed);
        }
    }

    /// `poll` over every publisher, round robin.
    #[inline(never)]
    fn poll_all(&mut self) -> Result<bool, RecvError> {
        // A message not released (its sample leaked) is not handed out twice as current; a held
        // one is let go.
        if matches!(self.current, Some(Ready::Held { .. })) {
            self.release();
        }
        self.current = None;
        self.refresh();
        if let Some((token, past)) = self.backlog.pop_front() {
            self.hand_out_past(token, past);
            return Ok(true);
        }
        let n = self.sources.len();
        let mut i = if self.round_robin < n {
            self.round_robin
        } else {
            0
        };
        for _ in 0..n {
            let src = &mut self.sources[i];
            if src.broken {
                i = if i + 1 == n { 0 } else { i + 1 };
                continue;
            }
            let ring_hdr = &src.data.block().ring;
            let got = if src.reliable {
                src.reader
                    .peek(ring_hdr, &src.bytes)
                    .map(|r| r.map(|record| Ready::InPlace { source: i, record }))
            } else {
                src.reader
                    .read_latest(ring_hdr, &src.bytes, &mut self.scratch)
                    .map(|r| {
                        r.map(|record| match record.held {
                            true => Ready::Held { source: i, record },
                            false => Ready::Copied { record },
                        })
                    })
            };
            match got {
                Ok(Some(ready)) => {
                    self.round_robin = i + 1;
                    self.count(ready.record());
                    self.current = Some(ready);
                    return Ok(true);
                }
                Ok(None) => {}
                Err(c) => {
                    let src = &mut self.sources[i];
                    self.refused.push((
                        src.pub_slot,
                        src.pub_token,
                        format!("corrupt record at {}", c.pos),
                    ));
                    // Messages of it that are kept keep it mapped, and its writer off them,
                    // until they are let go.
                    if src.kept > 0 {
                        // (Departed too: the short path of `poll_one` passes it by.)
                        src.broken = true;
                        src.departed = true;
                    } else {
                        let mut src = self.sources.remove(i);
                        src.reader.leave(&src.data.block().ring);
                    }
                    return Err(RecvError::Corrupt {
                        topic: self.topic.topic.clone(),
                        pos: c.pos,
                    });
                }
            }
            i = if i + 1 == n { 0 } else { i + 1 };
        }
        // Every source was just read and had nothing readable: a departed publisher never will
        // have (a reader can be left before `head` only by a record the publisher died writing),
        // so detach it.
        if self.sources.iter().any(|s| s.departed || s.broken) {
            self.sources.retain_mut(|s| {
                let detach = (s.departed || s.broken) && s.kept == 0;
                if detach {
                    s.reader.leave(&s.data.block().ring);
                }
                !detach
            });
        }
        Ok(false)
    }

    /// Makes a kept message taken at attach time the current one, as a copy.
    #[cold]
    fn hand_out_past(&mut self, token: u64, past: ring::Past) {
        let record = Record {
            pos: 0,
            offset: 0,
            len: past.bytes.len() as u64,
            seq: past.seq,
            end: 0,
            skipped: 0,
            held: false,
        };
        self.scratch = past.bytes;
        // `last_source_token` names its publisher.
        self.round_robin = self
            .sources
            .iter()
            .position(|s| s.pub_token == token)
            .map_or(0, |i| i + 1);
        self.count(&record);
        self.current = Some(Ready::Copied { record });
    }

    /// The current message's record (set by `poll`, until `release`).
    pub fn current(&self) -> Option<&Record> {
        self.current.as_ref().map(Ready::record)
    }

    /// Payload of the current message (empty when there is none).
    pub fn payload(&self) -> &[u8] {
        match &self.current {
            None => &[],
            Some(Ready::InPlace { source, record } | Ready::Held { source, record }) => {
                let src = &self.sources[*source];
                // SAFETY: the record lies within the double mapping (len <= capacity), committed by
                // the writer (Acquire on head) and not released (reliable) or let go (held)
                // yet, so the writer does not touch it (see the ring's protocol).
                unsafe {
                    std::slice::from_raw_parts(src.bytes.ptr(record.offset), record.len as usize)
                }
            }
            Some(Ready::Copied { .. }) => &self.scratch,
        }
    }

    /// The token of the publisher whose message `poll` handed out last. Nothing is stored per
    /// message for it: `poll` leaves `round_robin` one past the source it read, and the sources
    /// do not change until the next `poll` (the sample borrows this subscriber until then).
    pub fn last_source_token(&self) -> u64 {
        self.round_robin
            .checked_sub(1)
            .and_then(|i| self.sources.get(i))
            .map_or(0, |s| s.pub_token)
    }

    /// The node name of the publisher with `token`, while it holds its slot in the topic.
    pub fn publisher_node(&self, token: u64) -> Option<String> {
        self.topic.publisher_node(|p| {
            // Acquire pairs with the Release in `Owner::set_ready`.
            p.owner.token.load(Ordering::Acquire) == token
        })
    }

    /// Hands the current message back (an in-place record to its publisher).
    #[inline]
    pub fn release(&mut self) {
        match self.current.take() {
            Some(Ready::InPlace { source, record }) => {
                let src = &mut self.sources[source];
                let block = src.data.block();
                if src.reader.release(&block.ring, record.end) {
                    wake_writer(block);
                }
            }
            Some(Ready::Held { source, .. }) => {
                let src = &mut self.sources[source];
                src.reader.unhold(&src.data.block().ring);
            }
            Some(Ready::Copied { .. }) | None => {}
        }
    }

    /// Keeps the current message past the next `poll`, until `let_go(id)`: a reliable one stays
    /// in the ring (its publisher cannot write over it: the ring fills up to it), a large latest
    /// one held in place stays held (the publisher steps over it), any other keeps its copy.
    /// Returns its id; `None` when there is no current message.
    pub fn keep(&mut self) -> Option<u64> {
        let ready = self.current.take()?;
        let id = self.next_kept;
        self.next_kept += 1;
        let record = *ready.record();
        let (token, what, ptr) = match ready {
            Ready::InPlace { source, record } | Ready::Held { source, record } => {
                let src = &mut self.sources[source];
                src.kept += 1;
                let what = if matches!(ready, Ready::Held { .. }) {
                    KeptWhat::Held
                } else {
                    src.reader.keep(&record);
                    KeptWhat::Ring { start: record.pos }
                };
                (
                    src.pub_token,
                    what,
                    src.bytes.ptr(record.offset).cast_const(),
                )
            }
            Ready::Copied { .. } => {
                let copy = std::mem::take(&mut self.scratch);
                let ptr = copy.as_ptr();
                (self.last_source_token(), KeptWhat::Copy(copy), ptr)
            }
        };
        self.kept.push(Kept {
            id,
            token,
            what,
            ptr,
            len: record.len as usize,
        });
        Some(id)
    }

    /// The bytes of the kept message `id`, if it is kept.
    pub fn kept_payload(&self, id: u64) -> Option<&[u8]> {
        let k = self.kept.iter().find(|k| k.id == id)?;
        // SAFETY: a kept record stays where it is until `let_go`: in the ring, whose mapping
        // its source keeps (a source with kept records is not detached) and whose writer does
        // not write over it (reliable: the cursor stays below it; held: the writer steps over
        // it), or in its own copy, owned by the entry.
        Some(unsafe { std::slice::from_raw_parts(k.ptr, k.len) })
    }

    /// Messages kept now.
    pub fn kept_count(&self) -> usize {
        self.kept.len()
    }

    /// Lets go of the kept message `id` (nothing when it is not kept).
    pub fn let_go(&mut self, id: u64) {
        let Some(i) = self.kept.iter().position(|k| k.id == id) else {
            return;
        };
        let k = self.kept.remove(i);
        let Some(src) = self.sources.iter_mut().find(|s| s.pub_token == k.token) else {
            return; // a copy whose source has gone
        };
        match k.what {
            KeptWhat::Ring { .. } | KeptWhat::Held => src.kept -= 1,
            KeptWhat::Copy(_) => return,
        }
        let block = src.data.block();
        match k.what {
            KeptWhat::Ring { start } => {
                if src.reader.let_go(&block.ring, start) {
                    wake_writer(block);
                }
            }
            KeptWhat::Held => src.reader.unhold(&block.ring),
            KeptWhat::Copy(_) => {}
        }
    }

    /// Waits for the next message at most `timeout` (forever if `None`); reads the clock only
    /// when nothing is waiting already.
    #[inline]
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<bool, RecvError> {
        if self.poll()? {
            return Ok(true);
        }
        self.wait_long(timeout)
    }

    /// `wait` once a first look found nothing: spins, sleeps, and looks again. A spinning
    /// subscriber returns from the look that finds the message, with nothing else in between.
    #[inline(never)]
    fn wait_long(&mut self, timeout: Option<Duration>) -> Result<bool, RecvError> {
        let start = Instant::now();
        // A timeout past what the clock can count is no deadline.
        let deadline = timeout.and_then(|t| start.checked_add(t));
        let mut now = start;
        let mut spins = 0u32;
        loop {
            // `now` is fresh here on the first turn, after a sleep and every 512 spins.
            if spins % 512 == 0 {
                if now >= self.next_liveness {
                    self.check_liveness();
                    self.next_liveness = now + LIVENESS_PERIOD;
                }
                if deadline.is_some_and(|d| now >= d) {
                    return self.poll();
                }
            }
            let block_now = match self.wait {
                WaitStrategy::Spin => false,
                WaitStrategy::Block => true,
                WaitStrategy::Adaptive => now.duration_since(start) >= self.spin_window,
            };
            if block_now {
                self.sleep(deadline);
                spins = 0;
            } else {
                spin_hint();
                spins = spins.wrapping_add(1);
            }
            match self.poll_one() {
                Some(true) => return Ok(true),
                Some(false) => {}
                None => {
                    if self.poll_all()? {
                        return Ok(true);
                    }
                }
            }
            if spins % 512 == 0 {
                now = Instant::now();
            }
        }
    }

    /// For a wait set: whether a message (or, with `events`, a publisher event) is waiting,
    /// without taking it; looks at the publishers' liveness when that is due.
    pub fn look(&mut self, now: Instant, events: bool) -> bool {
        // A look due within the slack is taken now: the subscribers of one wait set come to
        // share their wake-ups instead of each waking the thread on its own schedule.
        if now + crate::waiting::SLACK >= self.next_liveness {
            self.check_liveness();
            self.next_liveness = now + LIVENESS_PERIOD;
        }
        self.refresh();
        !self.backlog.is_empty()
            || (events && !self.events.is_empty())
            || self
                .sources
                .iter_mut()
                .any(|s| s.reader.has_data(&s.data.block().ring))
    }

    /// For a wait set, before it sleeps: the futex word a publisher rings for this subscriber
    /// and the value it holds now, with this subscriber announced as a sleeper on every ring
    /// (then `disarm`); `None` when a message came meanwhile (disarm all the same). Also when
    /// the next liveness look is due.
    pub fn arm(&mut self) -> (Option<(*const std::sync::atomic::AtomicU32, u32)>, Instant) {
        let me = self.topic.subscriber(self.slot);
        // SeqCst: as in `sleep`, the bell is read before the look for work.
        let bell = me.doorbell.load(Ordering::SeqCst);
        let mut ready = false;
        for s in self.sources.iter_mut() {
            ready |= s.reader.announce_sleep(&s.data.block().ring);
        }
        if ready || self.topic.epoch() != self.epoch {
            return (None, self.next_liveness);
        }
        let word: *const std::sync::atomic::AtomicU32 = &*me.doorbell;
        // With no publisher there is no liveness to look at: a publisher that comes rings the
        // doorbell.
        let due = if self.sources.is_empty() {
            Instant::now() + IDLE_LOOK
        } else {
            self.next_liveness
        };
        (Some((word, bell)), due)
    }

    /// After a wait set's sleep (`slept`: it slept, counted as one of this subscriber's
    /// waits), or the look that found another item ready first: no longer announced as a
    /// sleeper.
    pub fn disarm(&mut self, slept: bool) {
        for s in self.sources.iter() {
            s.reader.cancel_sleep(&s.data.block().ring);
        }
        if slept {
            self.topic
                .subscriber(self.slot)
                .waits
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sleeps on this subscriber's doorbell until a publisher rings it (or a bounded time, so
    /// that dead publishers are noticed).
    fn sleep(&mut self, deadline: Option<Instant>) {
        let me = self.topic.subscriber(self.slot);
        // SeqCst: read the bell before looking for work, so a ring after the look changes it.
        // Pairs with the Release bump in `ring_doorbell`.
        let bell = me.doorbell.load(Ordering::SeqCst);
        let mut ready = false;
        for s in self.sources.iter_mut() {
            ready |= s.reader.announce_sleep(&s.data.block().ring);
        }
        if !ready && self.topic.epoch() == self.epoch {
            let mut timeout = self
                .next_liveness
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
            if let Some(d) = deadline {
                timeout = timeout.min(d.saturating_duration_since(Instant::now()));
            }
            me.waits.fetch_add(1, Ordering::Relaxed);
            sys::futex_wait(&me.doorbell, bell, Some(timeout));
        }
        for s in self.sources.iter() {
            s.reader.cancel_sleep(&s.data.block().ring);
        }
    }
}

/// Wakes a publisher that waits for ring space.
#[cold]
fn wake_writer(block: &DataBlock) {
    ring_doorbell(&block.space_bell);
}

impl Drop for ShmSubscriber {
    fn drop(&mut self) {
        for s in self.sources.iter_mut() {
            let ring_hdr = &s.data.block().ring;
            s.reader.cancel_sleep(ring_hdr);
            s.reader.leave(ring_hdr);
            // A reliable publisher may be waiting for us: let it look again.
            ring_doorbell(&s.data.block().space_bell);
        }
        self.sources.clear();
        self.topic.leave_subscriber(self.slot, self.token);
    }
}

impl std::fmt::Debug for ShmSubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.topic
            .debug_participant(f, "ShmSubscriber", Some(self.slot))
    }
}
