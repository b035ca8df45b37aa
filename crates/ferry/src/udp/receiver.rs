//! The subscriber's half of the UDP protocol: no I/O, time passed in (nanoseconds).
//!
//! Frames of each publisher session are reassembled into messages with bounded memory. Under
//! reliable delivery messages are handed out in order; gaps are NAKed after `nak_delay` (and again
//! every `nak_repeat`), heartbeats reveal a lost tail, and STATUS frames tell the publisher how far
//! the application has consumed and how much more it may send (flow control). Under latest
//! delivery complete messages are handed out at once, and everything skipped is counted as lost.
//! Nothing is lost silently: every message that will never be delivered is counted.

use std::collections::{BTreeMap, VecDeque};

use super::ids::{id_map, IdMap};

use super::frame::{
    self, Common, Frame, Kind, NakEntry, FLAG_HISTORY, FLAG_RELIABLE, FLAG_RETRANSMIT,
    MESSAGE_WINDOW, NAK_ENTRY,
};
use super::refusal::{Refusal, Refusals};
use super::sender::{Dest, Sink};
use crate::event::{Event, Events, Gone};
use crate::PublisherId;

/// Bytes every held message is charged beyond its payload (its bookkeeping), so that empty
/// messages cannot fill memory for free.
pub const MESSAGE_OVERHEAD: u64 = 64;

/// Messages beyond the next one to deliver that one tick looks at for gaps to NAK.
pub const NAK_WALK: u64 = 1024;

/// Replies to a session whose publisher is not verified (registered in the topic directory or
/// announced by discovery) are limited to this many times the bytes received from it.
pub const UNVERIFIED_REPLY_FACTOR: u64 = 3;
/// The most messages of history a receiver asks a session for (`Qos::history` above it asks
/// this many): half the message window, so that the live messages that follow the history are
/// still within the receive window.
pub const MAX_HISTORY: u64 = crate::qos::MAX_UDP_HISTORY as u64;

/// The most sessions of publishers of another type a receiver refuses by id at once.
const SHUNNED: usize = 64;

fn charge(len: usize) -> u64 {
    len as u64 + MESSAGE_OVERHEAD
}

#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    /// This subscriber wants reliable delivery (from reliable publishers).
    pub reliable: bool,
    /// Messages longer than this are refused (and counted).
    pub max_message: usize,
    /// Bytes held in reassembly and in the delivery queue, at most (every message is charged
    /// [`MESSAGE_OVERHEAD`] beyond its length).
    pub buffer_bytes: u64,
    /// Window advertised to reliable publishers (stream bytes beyond what was consumed).
    pub window: u64,
    pub max_datagram: usize,
    pub nak_delay_ns: u64,
    /// A NAK not answered is repeated after four smoothed repair round trips, within
    /// [`nak_repeat_min_ns`](Self::nak_repeat_min_ns) and this (also the value before any
    /// repair was timed).
    pub nak_repeat_ns: u64,
    pub nak_repeat_min_ns: u64,
    pub status_interval_ns: u64,
    /// A reliable session's STATUS also goes out when this many stream bytes arrived since the
    /// last one, at most once per `status_gap_ns`: the publisher's congestion control learns
    /// the path's rate and round trip from them.
    pub status_bytes: u64,
    pub status_gap_ns: u64,
    /// Latest delivery: an incomplete message older than this is given up (counted lost).
    pub give_up_ns: u64,
    /// A session not heard from for this long is gone (its publisher died).
    pub session_timeout_ns: u64,
    /// Publisher sessions tracked at once. A new one beyond it evicts a session whose publisher
    /// is not registered (one that never delivered a message first, then the least recently
    /// heard), or is refused.
    pub max_sessions: usize,
    /// Messages of history to ask each publisher that is already running when this receiver
    /// joins it (`Qos::history`, at most [`MAX_HISTORY`]): they are delivered first, in order
    /// and repaired under either delivery, then the live ones.
    pub history: u64,
    /// A session that has not learned or received its history within this long goes on
    /// without the rest (what it then never gets is counted lost).
    pub history_wait_ns: u64,
}

impl Default for ReceiverConfig {
    fn default() -> ReceiverConfig {
        ReceiverConfig {
            reliable: true,
            max_message: 1 << 20,
            buffer_bytes: 64 << 20,
            window: 4 << 20,
            max_datagram: 1472,
            nak_delay_ns: 200_000,
            nak_repeat_ns: 5_000_000,
            nak_repeat_min_ns: 500_000,
            status_interval_ns: 20_000_000,
            status_bytes: 16 << 10,
            status_gap_ns: 250_000,
            give_up_ns: 50_000_000,
            session_timeout_ns: 3_000_000_000,
            max_sessions: 64,
            history: 0,
            history_wait_ns: 1_000_000_000,
        }
    }
}

impl ReceiverConfig {
    /// Capacity of the buffers kept for reuse, at most: a few messages.
    pub fn pool_bytes(&self) -> u64 {
        (8u64 << 20).max(2 * self.max_message as u64)
    }

    /// Reassembly bytes one session may hold: what a genuine reliable publisher can have in
    /// flight (the window, plus the message that straddles its end, plus the per-message
    /// overhead of a full message window).
    pub fn session_bytes(&self) -> u64 {
        self.window
            .saturating_add(charge(self.max_message))
            .saturating_add(MESSAGE_WINDOW * MESSAGE_OVERHEAD)
    }
}

/// Counters of the receiver, as `ferry stats` shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    pub frames: u64,
    pub messages: u64,
    pub bytes: u64,
    pub duplicates: u64,
    /// Messages that will never arrive (latest skips, unrepairable gaps, dead publishers).
    pub lost: u64,
    pub naks_sent: u64,
    /// Frames dropped because the reassembly buffer was full.
    pub overflow_drops: u64,
    /// Frames and datagrams refused, by reason.
    pub refusals: Refusals,
    /// Messages held for sessions of unregistered publishers, dropped to make room (a genuine
    /// reliable publisher repairs them).
    pub evicted: u64,
    /// Replies (NAK, STATUS) not sent to an unverified publisher address, to keep within
    /// [`UNVERIFIED_REPLY_FACTOR`] times what it sent.
    pub replies_withheld: u64,
    pub sessions_started: u64,
    pub sessions_ended: u64,
    /// Sessions evicted to make room for a new one.
    pub sessions_evicted: u64,
    /// Sessions that went on without (all of) their history: the publisher did not say where
    /// it starts, or did not send it, within `history_wait_ns` (what never came is in `lost`).
    pub history_given_up: u64,
}

impl ReceiverStats {
    /// Every refusal, whatever the reason.
    #[cfg(any(test, feature = "internals"))]
    pub fn refused(&self) -> u64 {
        self.refusals.total()
    }
}

/// A delivered message.
#[derive(Debug)]
pub struct Delivered {
    pub session: u64,
    pub seq: u64,
    pub data: Vec<u8>,
    /// Messages of this session lost just before this one.
    pub lost_before: u64,
    stream_end: u64,
    /// Which life of the session id it came from (an evicted session may come back).
    incarnation: u64,
}

/// Byte ranges received of one message, disjoint and merged: start -> end. Inserting merges with
/// the neighbours only, O(log n), however many holes loss has punched.
#[derive(Debug, Default, Clone)]
struct Ranges(BTreeMap<u32, u32>);

impl Ranges {
    /// Adds `from..to`; returns false if it was all there already.
    fn insert(&mut self, from: u32, to: u32) -> bool {
        if from >= to {
            return false;
        }
        let (mut start, mut end) = (from, to);
        // A range starting at or before `from` that reaches it.
        if let Some((&a, &b)) = self.0.range(..=from).next_back() {
            if b >= to {
                return false;
            }
            if b >= from {
                start = a;
                end = end.max(b);
                self.0.remove(&a);
            }
        }
        // Ranges starting inside the new one are swallowed.
        while let Some((&a, &b)) = self.0.range(start..=end).next() {
            end = end.max(b);
            self.0.remove(&a);
        }
        self.0.insert(start, end);
        true
    }

    /// Bytes received from the start without a hole.
    fn prefix(&self) -> u32 {
        match self.0.first_key_value() {
            Some((&0, &b)) => b,
            _ => 0,
        }
    }

    fn covers(&self, len: u32) -> bool {
        len == 0 || self.prefix() >= len
    }

    /// The holes in `0..len`.
    fn gaps(&self, len: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        let mut at = 0;
        self.0
            .iter()
            .map(move |(&a, &b)| {
                let gap = (at, a);
                at = b;
                gap
            })
            .chain(std::iter::once((
                self.0.last_key_value().map_or(0, |(_, &b)| b),
                len,
            )))
            .filter(|(a, b)| a < b)
    }
}

struct Partial {
    data: Vec<u8>,
    have: Ranges,
    stream_pos: u64,
    first_ns: u64,
    last_nak_ns: u64,
}

struct Session {
    reliable: bool,
    next_deliver: u64,
    /// One past the highest sequence number known to exist (never more than
    /// [`MESSAGE_WINDOW`] beyond `next_deliver`).
    known_end: u64,
    /// Messages before this one were sent whole (heartbeats and BYE say so).
    sent_end: u64,
    /// One past the highest stream byte received: data before it was sent (frames go out in
    /// stream order; only repairs go back).
    highest_pos: u64,
    /// Payload bytes received, each once (repairs included): the publisher's congestion
    /// control takes its delivery rate from it.
    received_bytes: u64,
    /// Smoothed time from a NAK to its repair (0: none timed yet).
    repair_rtt_ns: u64,
    /// Oldest sequence number the publisher can still repair.
    oldest_available: u64,
    partial: BTreeMap<u64, Partial>,
    complete: BTreeMap<u64, (Vec<u8>, u64)>,
    /// Wholly missing messages: when first noticed, when last NAKed.
    missing: BTreeMap<u64, (u64, u64)>,
    /// Bytes charged for `partial` and `complete`.
    held: u64,
    /// A message of this session reached the delivery queue.
    proven: bool,
    /// Its stream position is known (from a data frame), so the byte window applies.
    anchored: bool,
    /// The publisher's address is registered (topic directory or discovery): replies to it are
    /// not limited.
    verified: bool,
    /// The last challenge the publisher's heartbeats carried, echoed in every STATUS.
    challenge: u64,
    /// Datagram bytes received from this session and replied to it (while unverified).
    bytes_in: u64,
    bytes_out: u64,
    /// Messages of this session in the delivery queue.
    queued: u64,
    /// Distinguishes this session from an earlier one of the same id (evicted, then heard
    /// again) whose messages may still be in the delivery queue.
    incarnation: u64,
    /// Stream position after the last message the application took.
    consumed_pos: u64,
    consumed_seq: u64,
    /// Stream position after the last message that completed in order.
    delivered_end: u64,
    last_status_ns: u64,
    last_status_pos: u64,
    /// `highest_pos` when the last STATUS went out.
    last_status_arrived: u64,
    last_status_seq: u64,
    last_status_window: u64,
    status_due: bool,
    last_heard_ns: u64,
    ended: Option<u64>,
    lost_pending: u64,
    /// Losses not counted yet: see `count_lost`.
    lost_unconfirmed: u64,
    /// History (a receiver that asks for it, joining a running publisher): the first live
    /// message; those before it, from where the publisher's history starts, come first.
    history_until: u64,
    /// The session waits to learn where the publisher's history starts (a heartbeat says so);
    /// nothing is delivered meanwhile.
    history_wait: bool,
    /// When the history was asked for (the whole of it is given up `history_wait_ns` later).
    history_since: u64,
}

impl Session {
    fn new(reliable: bool, start: u64, now: u64) -> Session {
        Session {
            reliable,
            next_deliver: start,
            known_end: start,
            sent_end: 0,
            highest_pos: 0,
            received_bytes: 0,
            repair_rtt_ns: 0,
            oldest_available: 0,
            partial: BTreeMap::new(),
            complete: BTreeMap::new(),
            missing: BTreeMap::new(),
            held: 0,
            proven: false,
            anchored: false,
            verified: false,
            challenge: 0,
            bytes_in: 0,
            bytes_out: 0,
            queued: 0,
            incarnation: 0,
            consumed_pos: 0,
            consumed_seq: start,
            delivered_end: 0,
            last_status_ns: 0,
            last_status_pos: 0,
            last_status_arrived: 0,
            last_status_seq: start,
            last_status_window: 0,
            status_due: true,
            last_heard_ns: now,
            ended: None,
            lost_pending: 0,
            lost_unconfirmed: 0,
            history_until: 0,
            history_wait: false,
            history_since: 0,
        }
    }

    /// Still taking the history: waiting to learn it, or delivering messages older than the
    /// first live one.
    fn filling(&self) -> bool {
        self.history_wait || self.next_deliver < self.history_until
    }

    /// Messages are delivered in order and gaps are NAKed: reliable delivery, or the history.
    fn in_order(&self) -> bool {
        self.reliable || self.filling()
    }

    /// A heartbeat said the publisher's history starts at `from`: the session delivers from
    /// there (at most `want` messages before its first live one), asking for what it lacks.
    fn learn_history(&mut self, from: u64, want: u64) {
        if !std::mem::take(&mut self.history_wait) {
            return;
        }
        let start = self
            .history_until
            .saturating_sub(want)
            .max(from)
            .min(self.history_until);
        // Unless a gap was given up meanwhile (a heartbeat beyond the window), nothing was
        // delivered while waiting: `next_deliver` is still the first live one.
        if self.next_deliver == self.history_until {
            self.next_deliver = start;
        }
    }

    /// A repair arrived `sample` ns after its NAK.
    fn time_repair(&mut self, sample: u64) {
        self.repair_rtt_ns = if self.repair_rtt_ns == 0 {
            sample
        } else {
            (7 * self.repair_rtt_ns + sample) / 8
        };
    }

    /// How long an unanswered NAK waits before it is repeated.
    fn nak_repeat_ns(&self, cfg: &ReceiverConfig) -> u64 {
        if self.repair_rtt_ns == 0 {
            cfg.nak_repeat_ns
        } else {
            (4 * self.repair_rtt_ns).clamp(cfg.nak_repeat_min_ns, cfg.nak_repeat_ns)
        }
    }

    /// Stream position up to which every byte has arrived.
    /// Enough arrived since the last STATUS to tell the publisher now: a quarter of the window,
    /// `status_bytes` once `status_gap_ns` passed, anything after four gaps (a publisher
    /// with less than `status_bytes` in flight must not wait for the slow timer).
    fn ack_due(&self, cfg: &ReceiverConfig, now: u64) -> bool {
        let received = self.received_pos();
        let since = now.saturating_sub(self.last_status_ns);
        received >= self.last_status_pos.saturating_add(cfg.window / 4)
            || (received >= self.last_status_pos.saturating_add(cfg.status_bytes)
                && since >= cfg.status_gap_ns)
            || (received > self.last_status_pos && since >= 4 * cfg.status_gap_ns)
    }

    /// Enough arrived (holes or not) since the last STATUS to tell the publisher, whose pacing
    /// times its round trips by these reports: `status_bytes` once `status_gap_ns` passed,
    /// anything after four gaps. (A hole must not hold the report back: the publisher would
    /// take the wait for a queue.)
    fn arrival_report_due(&self, cfg: &ReceiverConfig, now: u64) -> bool {
        let since = now.saturating_sub(self.last_status_ns);
        (self.highest_pos >= self.last_status_arrived.saturating_add(cfg.status_bytes)
            && since >= cfg.status_gap_ns)
            || (self.highest_pos > self.last_status_arrived && since >= 4 * cfg.status_gap_ns)
    }

    fn received_pos(&self) -> u64 {
        match self.partial.get(&self.next_deliver) {
            Some(p) => p.stream_pos + p.have.prefix() as u64,
            None => self.delivered_end,
        }
    }

    /// The first sequence number this session does not track: beyond it a frame is out of the
    /// receive window.
    fn window_end(&self) -> u64 {
        // (A joiner taking its history tracks up to `MAX_HISTORY` more.)
        self.next_deliver
            .max(self.history_until)
            .saturating_add(MESSAGE_WINDOW)
    }

    /// Learns that messages before `end` exist, within the receive window.
    fn know(&mut self, end: u64) {
        self.known_end = self.known_end.max(end.min(self.window_end()));
    }

    /// Could `len` more bytes go to this session's address (nothing counted)?
    fn may_answer(&self, len: usize) -> bool {
        self.verified
            || self.bytes_out + len as u64 <= self.bytes_in.saturating_mul(UNVERIFIED_REPLY_FACTOR)
    }

    /// May `len` more bytes go to this (unverified) session's address?
    fn may_reply(&mut self, len: usize) -> bool {
        if self.verified {
            return true;
        }
        let allowed = self.bytes_in.saturating_mul(UNVERIFIED_REPLY_FACTOR);
        if self.bytes_out + len as u64 > allowed {
            return false;
        }
        self.bytes_out += len as u64;
        true
    }
}

/// Puts the sink's room around the one datagram in `out` (control frames: small, moved once).
fn make_room(out: &mut Vec<u8>, room: (usize, usize)) {
    if room.0 > 0 {
        out.splice(0..0, std::iter::repeat(0).take(room.0));
    }
    out.resize(out.len() + room.1, 0);
}

/// Buffers kept for reuse: at most 64, and at most `limit` bytes of capacity in all. A pooled
/// buffer keeps its length: its bytes are initialized (old contents, never handed out again: a
/// message reassembled in it is delivered only once every byte of it arrived), so a reassembly
/// reusing it zeroes only what lies past that length. A forged first fragment of a large message
/// then costs a copy of its payload, not a memset of the whole message.
struct Pool {
    bufs: Vec<Vec<u8>>,
    bytes: u64,
    limit: u64,
}

impl Pool {
    /// Keeps `buf` for reuse if the pool has room; frees it otherwise.
    fn give_back(&mut self, buf: Vec<u8>) {
        let cap = buf.capacity() as u64;
        if self.bufs.len() < 64 && self.bytes + cap <= self.limit {
            self.bytes += cap;
            self.bufs.push(buf);
        }
    }

    /// A buffer for a `len`-byte message, holding old bytes (see above): a pooled one unless it
    /// is far larger than needed (a small message never pins a large buffer: memory follows what
    /// is charged).
    fn take(&mut self, len: usize) -> Vec<u8> {
        match self.bufs.pop() {
            Some(b) => {
                self.bytes -= b.capacity() as u64;
                if b.capacity() <= 2 * len + 4096 {
                    b
                } else {
                    Vec::new()
                }
            }
            None => Vec::new(),
        }
    }
}

/// Counts `n` messages of session `s` lost. Those of a session whose publisher is not
/// registered (topic directory, discovery) are claims nobody can check: they count once the
/// session is verified, and never if it is not (forged sessions do not fill `lost`).
fn count_lost(stats: &mut ReceiverStats, s: &mut Session, n: u64) {
    s.lost_pending = s.lost_pending.saturating_add(n);
    if s.verified {
        stats.lost = stats.lost.saturating_add(n);
    } else {
        s.lost_unconfirmed = s.lost_unconfirmed.saturating_add(n);
    }
}

/// The session is verified: its earlier losses count.
fn confirm_losses(stats: &mut ReceiverStats, s: &mut Session) {
    stats.lost = stats
        .lost
        .saturating_add(std::mem::take(&mut s.lost_unconfirmed));
}

/// A session delivered a message: its publisher has appeared (once).
fn prove(s: &mut Session, session: u64, events: &mut Events) {
    if !s.proven {
        s.proven = true;
        events.push(Event::Appeared(PublisherId::udp(session)));
    }
}

/// A session is forgotten: if its publisher had appeared, it is gone.
fn forget(s: &Session, session: u64, why: Gone, events: &mut Events) {
    if s.proven {
        events.push(Event::Gone(PublisherId::udp(session), why));
    }
}

/// Hands the next message in line (`s.next_deliver`, reliable) to the delivery queue.
fn deliver_next(
    s: &mut Session,
    session: u64,
    stats: &mut ReceiverStats,
    ready: &mut VecDeque<Delivered>,
    events: &mut Events,
    data: Vec<u8>,
    stream_end: u64,
) {
    let seq = s.next_deliver;
    s.next_deliver += 1;
    prove(s, session, events);
    stats.messages += 1;
    stats.bytes += data.len() as u64;
    let lost_before = std::mem::take(&mut s.lost_pending);
    // (History precedes the stream position where the session started.)
    s.delivered_end = s.delivered_end.max(stream_end);
    s.queued += 1;
    ready.push_back(Delivered {
        session,
        seq,
        data,
        lost_before,
        stream_end,
        incarnation: s.incarnation,
    });
}

pub struct Receiver {
    id: u64,
    topic: u64,
    cfg: ReceiverConfig,
    /// The time of the latest call that passed one in.
    now: u64,
    sessions: IdMap<Session>,
    /// Sessions that ended recently, with the final (consumed position, consumed seq, reliable)
    /// they confirm: their late frames are refused as stale, and a late BYE is answered with that
    /// STATUS.
    ended: VecDeque<(u64, u64, u64, bool)>,
    /// Sessions whose publisher declares another type than this subscriber (`shun`): their
    /// frames are refused. At most `SHUNNED` kept, the oldest forgotten first.
    shunned: VecDeque<u64>,
    /// Final STATUS frames to send at the next tick.
    acks_due: Vec<(u64, u64, u64)>,
    ready: VecDeque<Delivered>,
    /// Publishers that appeared (delivered a first message) and went, until taken.
    events: Events,
    /// Bytes charged for everything held: reassembly and the delivery queue.
    buffered: u64,
    pool: Pool,
    out: Vec<u8>,
    stats: ReceiverStats,
}

impl Receiver {
    pub fn new(id: u64, topic: u64, cfg: ReceiverConfig) -> Receiver {
        let pool_limit = cfg.pool_bytes();
        Receiver {
            now: 0,
            id,
            topic,
            cfg,
            sessions: id_map(),
            ended: VecDeque::new(),
            shunned: VecDeque::new(),
            acks_due: Vec::new(),
            ready: VecDeque::new(),
            events: Events::default(),
            buffered: 0,
            pool: Pool {
                bufs: Vec::new(),
                bytes: 0,
                limit: pool_limit,
            },
            out: Vec::new(),
            stats: ReceiverStats::default(),
        }
    }

    /// The next publisher event, if any.
    pub fn pop_event(&mut self) -> Option<Event> {
        self.events.pop()
    }

    /// Publisher events dropped because nobody took them.
    pub fn events_dropped(&self) -> u64 {
        self.events.dropped()
    }

    /// Whether a publisher event waits to be taken.
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    pub fn stats(&self) -> ReceiverStats {
        self.stats
    }

    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Bytes charged for what the receiver holds (never more than `buffer_bytes`).
    #[cfg(any(test, feature = "internals"))]
    pub fn buffered(&self) -> u64 {
        self.buffered
    }

    /// Entries of every table the receiver keeps, for tests that bound its memory.
    #[cfg(test)]
    pub(crate) fn table_entries(&self) -> usize {
        self.sessions
            .values()
            .map(|s| 1 + s.partial.len() + s.complete.len() + s.missing.len())
            .sum::<usize>()
            + self.ended.len()
            + self.acks_due.len()
            + self.ready.len()
    }

    /// Whether frames of `session` are expected: a live session or one that ended recently (the
    /// socket layer keeps the publisher's address only for those).
    pub fn knows(&self, session: u64) -> bool {
        self.sessions.contains_key(&session) || self.ended.iter().any(|e| e.0 == session)
    }

    /// Sessions whose publisher address is not verified yet.
    pub fn unverified(&self) -> impl Iterator<Item = u64> + '_ {
        self.sessions
            .iter()
            .filter(|(_, s)| !s.verified)
            .map(|(&id, _)| id)
    }

    /// The socket layer found the session's publisher registered at the address it sends from:
    /// replies to it are no longer limited.
    pub fn verify(&mut self, session: u64) {
        if let Some(s) = self.sessions.get_mut(&session) {
            s.verified = true;
            confirm_losses(&mut self.stats, s);
        }
    }

    /// Refuses the frames of `session` from now on (its publisher declares another type than
    /// this subscriber), ending it if it is live. Each later frame counts as `OtherType`.
    pub fn shun(&mut self, session: u64) {
        if self.shunned.contains(&session) {
            return;
        }
        if self.shunned.len() >= SHUNNED {
            self.shunned.pop_front();
        }
        self.shunned.push_back(session);
        self.sessions.remove(&session);
    }

    /// Counts a datagram the socket layer refused before it reached the protocol.
    pub fn refuse(&mut self, why: Refusal) {
        self.stats.refusals.count(why);
    }

    /// Handles one frame addressed to this receiver's topic.
    pub fn on_frame(&mut self, now: u64, f: &Frame<'_>) {
        self.now = self.now.max(now);
        let c = *f.common();
        if c.topic != self.topic {
            return;
        }
        if !self.shunned.is_empty() && self.shunned.contains(&c.session) {
            self.stats.refusals.count(Refusal::OtherType);
            return;
        }
        if let Some(&(id, pos, seq, reliable)) = self.ended.iter().find(|e| e.0 == c.session) {
            if matches!(f, Frame::Bye { .. }) {
                // A publisher still saying goodbye did not hear our final STATUS: say it again.
                if reliable && !self.acks_due.iter().any(|a| a.0 == id) {
                    self.acks_due.push((id, pos, seq));
                }
            } else {
                self.stats.refusals.count(Refusal::Stale);
            }
            return;
        }
        if let Some(s) = self.sessions.get_mut(&c.session) {
            s.bytes_in = s.bytes_in.saturating_add(f.wire_len() as u64);
        }
        match *f {
            Frame::Data {
                seq,
                msg_len,
                offset,
                stream_pos,
                payload,
                ..
            } => {
                self.stats.frames += 1;
                self.on_data(now, c, seq, msg_len, offset, stream_pos, payload)
            }
            Frame::Batch {
                first_seq,
                stream_pos,
                messages,
                ..
            } => {
                self.stats.frames += 1;
                // Each message as if it came in a DATA frame of its own (decoding checked that
                // seqs and positions do not overflow, and the walk is the datagram's length).
                for (i, at, msg) in messages.iter() {
                    let len = msg.len() as u32;
                    self.on_data(now, c, first_seq + i, len, 0, stream_pos + at, msg);
                }
            }
            Frame::Heartbeat {
                next_seq,
                oldest_seq,
                challenge,
                history_from,
                ..
            } => {
                if !self.session(now, c, next_seq, f.wire_len()) {
                    return;
                }
                self.jump_if_beyond(c.session, next_seq);
                let want = self.cfg.history.min(MAX_HISTORY);
                let s = self.sessions.get_mut(&c.session).expect("created above");
                s.learn_history(history_from, want);
                s.know(next_seq);
                s.sent_end = s.sent_end.max(next_seq);
                // Nothing beyond what is known to exist can be given up.
                s.oldest_available = s.oldest_available.max(oldest_seq.min(s.known_end));
                if challenge != 0 {
                    // Echoed in the next STATUS, which goes out at once.
                    s.challenge = challenge;
                    s.status_due = true;
                }
            }
            Frame::Bye { next_seq, .. } => {
                if !self.sessions.contains_key(&c.session) {
                    self.stats.refusals.count(Refusal::Unknown);
                    return;
                }
                self.jump_if_beyond(c.session, next_seq);
                let s = self.sessions.get_mut(&c.session).expect("checked above");
                s.know(next_seq);
                s.sent_end = s.sent_end.max(next_seq);
                s.ended = Some(next_seq);
                s.last_heard_ns = now;
            }
            _ => {}
        }
    }

    /// A heartbeat or BYE says messages up to `end` exist. Beyond the receive window that is a
    /// gap to give up (counted), not a range to walk: the session moves on to the window's
    /// start. A genuine reliable publisher never runs that far ahead.
    fn jump_if_beyond(&mut self, session: u64, end: u64) {
        let Some(s) = self.sessions.get(&session) else {
            return;
        };
        if end > s.window_end() {
            self.stats.refusals.count(Refusal::OutOfWindow);
            self.skip_to(session, end - MESSAGE_WINDOW);
        }
    }

    /// Makes sure session `c.session` exists, created joining "from now" (at `start`) if new.
    /// A new session beyond `max_sessions` evicts the least recently heard session that never
    /// delivered a message; if every session has, the frame is refused. False if refused.
    fn session(&mut self, now: u64, c: Common, start: u64, wire_len: usize) -> bool {
        if let Some(s) = self.sessions.get_mut(&c.session) {
            s.last_heard_ns = now;
            return true;
        }
        if self.sessions.len() >= self.cfg.max_sessions {
            // Sessions of registered publishers stay; of the others, one that never delivered
            // a message goes first, then the one heard from least recently.
            let victim = self
                .sessions
                .iter()
                .filter(|(_, s)| !s.verified)
                .min_by_key(|(_, s)| (s.proven, s.last_heard_ns))
                .map(|(&id, _)| id);
            let Some(victim) = victim else {
                self.stats.refusals.count(Refusal::OverLimit);
                return false;
            };
            let s = self.sessions.remove(&victim).expect("found above");
            forget(&s, victim, Gone::Evicted, &mut self.events);
            self.release(s);
            self.stats.sessions_evicted += 1;
        }
        let reliable = self.cfg.reliable && c.flags & FLAG_RELIABLE != 0;
        let mut s = Session::new(reliable, start, now);
        if self.cfg.history > 0 && start > 0 {
            // Joining a publisher that sent before: its history first (once a heartbeat
            // tells where it starts; the first STATUS asks for one).
            s.history_until = start;
            s.history_wait = true;
            s.history_since = now;
        }
        s.bytes_in = wire_len as u64;
        s.incarnation = self.stats.sessions_started;
        self.sessions.insert(c.session, s);
        self.stats.sessions_started += 1;
        true
    }

    /// Frees everything a session held (not its messages in the delivery queue).
    fn release(&mut self, s: Session) {
        for (_, p) in s.partial {
            self.buffered -= charge(p.data.len());
            self.pool.give_back(p.data);
        }
        for (_, (d, _)) in s.complete {
            self.buffered -= charge(d.len());
            self.pool.give_back(d);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_data(
        &mut self,
        now: u64,
        c: Common,
        seq: u64,
        len: u32,
        offset: u32,
        pos: u64,
        payload: &[u8],
    ) {
        if len as usize > self.cfg.max_message {
            self.stats.refusals.count(Refusal::TooLarge);
            return;
        }
        let Some(after) = seq.checked_add(1) else {
            self.stats.refusals.count(Refusal::OutOfWindow);
            return;
        };
        // A joiner starts with the first message it can see from its start.
        let start = if offset == 0 { seq } else { after };
        let fresh = !self.sessions.contains_key(&c.session);
        if !self.session(now, c, start, frame::DATA_HEADER + payload.len()) {
            return;
        }
        if fresh && offset != 0 && !self.cfg.reliable {
            // Joining mid-message under latest delivery: that message is not ours.
            return;
        }
        let s = self.sessions.get_mut(&c.session).expect("created above");
        // `pos + len` cannot overflow (checked when decoding), nor can `offset + payload`.
        let frame_end = pos + offset as u64 + payload.len() as u64;
        // The stream position is learned from the first data frame the session takes (one that
        // made it, or the first after a heartbeat made it or after a gap was given up).
        if fresh || (!s.anchored && seq >= s.next_deliver) {
            s.consumed_pos = s
                .consumed_pos
                .max(if offset == 0 { pos } else { pos + len as u64 });
            s.delivered_end = s.delivered_end.max(s.consumed_pos);
            s.last_status_pos = s.last_status_pos.max(s.consumed_pos);
            s.last_status_arrived = s.last_status_arrived.max(s.consumed_pos);
            s.anchored = true;
        }
        if seq < s.next_deliver || s.complete.contains_key(&seq) {
            self.stats.duplicates += 1;
            return;
        }
        if s.reliable {
            // A reliable publisher sends within our windows; what lies beyond is refused (a
            // genuine frame there is repaired once the window moves).
            // (Until the session knows where in the stream it is, `session_bytes` bounds it.)
            let byte_limit = if !s.anchored {
                u64::MAX
            } else {
                s.received_pos()
                    .saturating_add(self.cfg.window)
                    .saturating_add(self.cfg.max_datagram as u64)
            };
            if seq >= s.window_end() || frame_end > byte_limit {
                self.stats.refusals.count(Refusal::OutOfWindow);
                return;
            }
        }
        s.know(after);
        s.highest_pos = s.highest_pos.max(frame_end);
        if s.arrival_report_due(&self.cfg, now) {
            s.status_due = true;
        }
        let repair = c.flags & FLAG_RETRANSMIT != 0;
        if !s.missing.is_empty() {
            if let Some((_, naked)) = s.missing.remove(&seq) {
                if repair && naked != 0 {
                    s.time_repair(now - naked.min(now));
                }
            }
        }
        let whole = offset == 0 && payload.len() == len as usize;
        if whole && !s.partial.contains_key(&seq) {
            // The common case: a message in one frame. No reassembly state.
            let Some(mut data) = self.buffer_for(c.session, seq, len) else {
                return;
            };
            if let Some(s) = self.sessions.get_mut(&c.session) {
                s.received_bytes += payload.len() as u64;
            }
            data.clear();
            data.extend_from_slice(payload);
            self.complete(c.session, seq, data, pos + len as u64);
            return;
        }
        if !s.partial.contains_key(&seq) {
            let Some(mut data) = self.buffer_for(c.session, seq, len) else {
                return;
            };
            // Old bytes stay where the pooled buffer had them; only the rest is zeroed.
            data.resize(len as usize, 0);
            let s = self.sessions.get_mut(&c.session).expect("exists");
            s.partial.insert(
                seq,
                Partial {
                    data,
                    have: Ranges::default(),
                    stream_pos: pos,
                    first_ns: now,
                    last_nak_ns: 0,
                },
            );
        }
        let s = self.sessions.get_mut(&c.session).expect("exists");
        let p = s.partial.get_mut(&seq).expect("inserted above");
        if p.data.len() != len as usize || p.stream_pos != pos {
            self.stats.refusals.count(Refusal::Inconsistent);
            return;
        }
        if repair && p.last_nak_ns != 0 {
            let sample = now.saturating_sub(p.last_nak_ns);
            s.time_repair(sample);
        }
        let p = s.partial.get_mut(&seq).expect("inserted above");
        let to = offset + payload.len() as u32;
        if len > 0 && !p.have.insert(offset, to) {
            self.stats.duplicates += 1;
            return;
        }
        p.data[offset as usize..to as usize].copy_from_slice(payload);
        s.received_bytes += payload.len() as u64;
        let p = s.partial.get_mut(&seq).expect("inserted above");
        if !p.have.covers(len) {
            if s.reliable && seq == s.next_deliver && s.ack_due(&self.cfg, now) {
                s.status_due = true;
            }
            return;
        }
        let p = s.partial.remove(&seq).expect("inserted above");
        self.complete(c.session, seq, p.data, p.stream_pos + len as u64);
    }

    /// Message `seq` of `session` arrived whole: `data` (charged to the session until it moves
    /// to the delivery queue), ending at stream position `end`.
    fn complete(&mut self, session: u64, seq: u64, data: Vec<u8>, end: u64) {
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        let len = data.len();
        if s.in_order() {
            if seq == s.next_deliver && !s.history_wait {
                // Next in line: straight to the delivery queue.
                s.held -= charge(len);
                deliver_next(
                    s,
                    session,
                    &mut self.stats,
                    &mut self.ready,
                    &mut self.events,
                    data,
                    end,
                );
            } else {
                s.complete.insert(seq, (data, end));
            }
        } else {
            s.held -= charge(len);
            // Latest: hand it out now; everything older still pending is given up.
            let newer = s.partial.split_off(&seq);
            for (_, q) in std::mem::replace(&mut s.partial, newer) {
                s.held -= charge(q.data.len());
                self.buffered -= charge(q.data.len());
                self.pool.give_back(q.data);
            }
            s.missing = s.missing.split_off(&(seq + 1));
            let lost = seq - s.next_deliver;
            s.next_deliver = seq + 1;
            prove(s, session, &mut self.events);
            count_lost(&mut self.stats, s, lost);
            let lost_before = std::mem::take(&mut s.lost_pending);
            s.queued += 1;
            self.stats.messages += 1;
            self.stats.bytes += len as u64;
            self.ready.push_back(Delivered {
                session,
                seq,
                data,
                lost_before,
                stream_end: end,
                incarnation: s.incarnation,
            });
        }
        self.drain_in_order(session);
    }

    /// A buffer (holding old bytes, see `Pool`) for a `len`-byte message of `session`, charged
    /// to the session (at most [`ReceiverConfig::session_bytes`]) and to the receiver (at most
    /// `buffer_bytes`). Room is made by giving up older latest messages, then by evicting what
    /// sessions that never delivered a message hold. `None`, counted, if there is none.
    fn buffer_for(&mut self, session: u64, seq: u64, len: u32) -> Option<Vec<u8>> {
        let cost = charge(len as usize);
        let cap = self.cfg.session_bytes();
        let held = self.sessions.get(&session).map_or(0, |s| s.held);
        if held + cost > cap && !self.give_up_older(session, seq, cap - cost.min(cap)) {
            self.stats.refusals.count(Refusal::OverLimit);
            return None;
        }
        if self.buffered + cost > self.cfg.buffer_bytes {
            // Older latest messages of this session first (as far as they go), then what
            // unregistered publishers' sessions hold.
            let over = self.buffered + cost - self.cfg.buffer_bytes;
            let held = self.sessions.get(&session).map_or(0, |s| s.held);
            self.give_up_older(session, seq, held.saturating_sub(over));
            if self.buffered + cost > self.cfg.buffer_bytes && !self.evict_unverified(session, cost)
            {
                self.stats.overflow_drops += 1;
                return None;
            }
        }
        let data = self.pool.take(len as usize);
        self.buffered += cost;
        if let Some(s) = self.sessions.get_mut(&session) {
            s.held += cost;
        }
        Some(data)
    }

    /// Latest delivery: gives up incomplete messages of `session` older than `seq` until it
    /// holds at most `target` bytes. False if that is not enough (or the session is reliable:
    /// reliable messages are never given up for room; their frames are repaired later).
    fn give_up_older(&mut self, session: u64, seq: u64, target: u64) -> bool {
        let Some(s) = self.sessions.get_mut(&session) else {
            return false;
        };
        if s.reliable {
            return false;
        }
        while s.held > target {
            let Some((&k, _)) = s.partial.range(..seq).next() else {
                return false;
            };
            let q = s.partial.remove(&k).expect("found above");
            s.held -= charge(q.data.len());
            self.buffered -= charge(q.data.len());
            self.pool.give_back(q.data);
        }
        true
    }

    /// Makes room for `need` bytes by dropping what other sessions hold whose publisher is not
    /// registered, those that never delivered a message first, then the largest holder. A
    /// genuine reliable publisher repairs it.
    fn evict_unverified(&mut self, except: u64, need: u64) -> bool {
        while self.buffered + need > self.cfg.buffer_bytes {
            let victim = self
                .sessions
                .iter()
                .filter(|(&id, s)| id != except && !s.verified && s.held > 0)
                .max_by_key(|(_, s)| (!s.proven, s.held))
                .map(|(&id, _)| id);
            let Some(victim) = victim else {
                return false;
            };
            let s = self.sessions.get_mut(&victim).expect("found above");
            let partial = std::mem::take(&mut s.partial);
            let complete = std::mem::take(&mut s.complete);
            s.held = 0;
            self.stats.evicted += (partial.len() + complete.len()) as u64;
            for (_, p) in partial {
                self.buffered -= charge(p.data.len());
                self.pool.give_back(p.data);
            }
            for (_, (d, _)) in complete {
                self.buffered -= charge(d.len());
                self.pool.give_back(d);
            }
        }
        true
    }

    /// Gives up every message of `session` before `target`: complete ones are delivered in
    /// order, the rest counted lost. The work is the entries held, never the distance.
    fn skip_to(&mut self, session: u64, target: u64) {
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        if target <= s.next_deliver {
            return;
        }
        let kept = s.partial.split_off(&target);
        for (_, p) in std::mem::replace(&mut s.partial, kept) {
            s.held -= charge(p.data.len());
            self.buffered -= charge(p.data.len());
            self.pool.give_back(p.data);
        }
        s.missing = s.missing.split_off(&target);
        let kept = s.complete.split_off(&target);
        for (seq, (data, end)) in std::mem::replace(&mut s.complete, kept) {
            let lost = seq - s.next_deliver;
            count_lost(&mut self.stats, s, lost);
            s.next_deliver = seq;
            s.held -= charge(data.len());
            deliver_next(
                s,
                session,
                &mut self.stats,
                &mut self.ready,
                &mut self.events,
                data,
                end,
            );
        }
        // A genuine publisher is never more than a message window ahead: a claim beyond it is
        // not counted as that many losses.
        let lost = (target - s.next_deliver).min(MESSAGE_WINDOW);
        count_lost(&mut self.stats, s, lost);
        s.next_deliver = target;
        s.known_end = s.known_end.max(target);
        // Flow control goes on from the first byte still to come that we know of.
        let resume = s
            .partial
            .values()
            .next()
            .map(|p| p.stream_pos)
            .or_else(|| {
                s.complete
                    .values()
                    .next()
                    .map(|(d, end)| end - d.len() as u64)
            })
            .unwrap_or(s.highest_pos);
        s.delivered_end = s.delivered_end.max(resume);
        // Nothing held from the target on: where the stream goes on is learned from the next
        // frame taken.
        if s.partial.is_empty() && s.complete.is_empty() {
            s.anchored = false;
        }
        s.status_due |= s.reliable;
        self.drain_in_order(session);
    }

    /// Moves complete messages that are next in line to the delivery queue (reliable, and the
    /// history). A latest session that finished its history hands out what it completed
    /// meanwhile, in order, counting what it lacks as lost.
    fn drain_in_order(&mut self, session: u64) {
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        if s.history_wait {
            return;
        }
        while !s.complete.is_empty() {
            // In order: the next one, if it is there; else (latest, once the history is
            // delivered) the oldest, what lies before it lost.
            let next = if s.in_order() {
                let seq = s.next_deliver;
                s.complete.remove(&seq).map(|d| (seq, d))
            } else {
                s.complete.pop_first()
            };
            let Some((seq, (data, stream_end))) = next else {
                break;
            };
            s.held -= charge(data.len());
            if seq < s.next_deliver {
                // Given up meanwhile (a gap skipped past it): not delivered out of order.
                self.stats.duplicates += 1;
                self.buffered -= charge(data.len());
                self.pool.give_back(data);
                continue;
            }
            if seq > s.next_deliver {
                count_lost(&mut self.stats, s, seq - s.next_deliver);
                s.next_deliver = seq;
            }
            deliver_next(
                s,
                session,
                &mut self.stats,
                &mut self.ready,
                &mut self.events,
                data,
                stream_end,
            );
        }
        if s.reliable && s.ack_due(&self.cfg, self.now) {
            s.status_due = true;
        }
    }

    /// The next message for the application (`now` in ns: a receiver that caught up tells its
    /// publisher, at once when the publisher is closing, else at most once a millisecond).
    pub fn take(&mut self, now: u64) -> Option<Delivered> {
        let d = self.ready.pop_front()?;
        self.buffered -= charge(d.data.len());
        let here = self.sessions.get_mut(&d.session);
        if let Some(s) = here.filter(|s| s.incarnation == d.incarnation) {
            s.queued -= 1;
            let pending_here = s.queued > 0;
            s.consumed_pos = s.consumed_pos.max(d.stream_end);
            s.consumed_seq = s.consumed_seq.max(d.seq + 1);
            let caught_up = !pending_here && s.next_deliver >= s.known_end;
            if s.reliable && caught_up && (s.ended.is_some() || now >= s.last_status_ns + 1_000_000)
            {
                s.status_due = true;
            }
            // Room came back after we had narrowed the window, or the publisher's message
            // window is a quarter used: tell the publisher soon.
            if s.reliable
                && (s.last_status_window < self.cfg.window / 2
                    || s.consumed_seq >= s.last_status_seq.saturating_add(MESSAGE_WINDOW / 4))
            {
                s.status_due = true;
            }
        }
        Some(d)
    }

    /// Gives a delivered message's buffer back for reuse.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        self.pool.give_back(buf);
    }

    /// True when a STATUS should go out now (call `tick`).
    pub fn status_due(&self) -> bool {
        !self.acks_due.is_empty() || self.sessions.values().any(|s| s.status_due)
    }

    /// Messages waiting in the delivery queue.
    pub fn ready(&self) -> usize {
        self.ready.len()
    }

    /// Sends the final STATUS frames that are due (to sessions that ended: their publishers
    /// were heard from until the end, and each such STATUS answers a BYE).
    fn send_acks(&mut self, sink: &mut dyn Sink) {
        for (session, pos, seq) in std::mem::take(&mut self.acks_due) {
            self.out.clear();
            let c = Common {
                kind: Kind::Status,
                flags: FLAG_RELIABLE,
                topic: self.topic,
                session,
            };
            frame::put_status(
                &mut self.out,
                &c,
                self.id,
                pos,
                self.cfg.window,
                seq,
                0,
                pos,
                // Not counted once the session ended (a publisher keeps the largest it heard).
                0,
            );
            make_room(&mut self.out, sink.room());
            let len = self.out.len();
            sink.send(Dest::Session(session), &mut self.out, len);
        }
    }

    /// Timers: NAKs, STATUS, giving up, dead sessions. Returns when to call again (ns).
    pub fn tick(&mut self, now: u64, sink: &mut dyn Sink) -> u64 {
        self.now = self.now.max(now);
        self.send_acks(sink);
        let mut next = u64::MAX;
        let ids: Vec<u64> = self.sessions.keys().copied().collect();
        for id in ids {
            next = next.min(self.tick_session(now, id, sink));
        }
        next
    }

    /// Sends `self.out` to the publisher of session `id`, within the reply budget of an
    /// unverified address; false (counted) if withheld.
    fn reply(&mut self, id: u64, sink: &mut dyn Sink) -> bool {
        let Some(s) = self.sessions.get_mut(&id) else {
            return false;
        };
        make_room(&mut self.out, sink.room());
        if !s.may_reply(self.out.len()) {
            self.stats.replies_withheld += 1;
            return false;
        }
        let len = self.out.len();
        sink.send(Dest::Session(id), &mut self.out, len);
        true
    }

    /// NAKs what a session that delivers in order lacks (reliable delivery, or the history of
    /// a joiner); gives up what the publisher can no longer repair, and a history not had in
    /// time. Returns when to look again (ns).
    fn nak_gaps(&mut self, now: u64, id: u64, cfg: &ReceiverConfig, sink: &mut dyn Sink) -> u64 {
        let mut next = u64::MAX;
        let s = self.sessions.get_mut(&id).expect("a live session");
        if s.filling() {
            let deadline = s.history_since.saturating_add(cfg.history_wait_ns);
            if now >= deadline {
                // The history did not come in time: go on without (what never came is lost).
                s.history_wait = false;
                let until = s.history_until;
                self.stats.history_given_up += 1;
                self.skip_to(id, until);
            } else {
                next = deadline;
            }
        }
        let s = self.sessions.get_mut(&id).expect("a live session");
        if s.history_wait {
            // Nothing to ask for before the publisher says where its history starts (the
            // STATUS asks for a heartbeat).
            return next;
        }
        let c = Common {
            kind: Kind::Nak,
            flags: if s.reliable { FLAG_RELIABLE } else { 0 },
            topic: self.topic,
            session: id,
        };
        // Messages the publisher can no longer repair are lost.
        if s.oldest_available > s.next_deliver {
            let target = s.oldest_available;
            self.skip_to(id, target);
        }
        let s = self.sessions.get_mut(&id).expect("a live session");
        // NAK what is missing: whole messages a later frame or a heartbeat proved sent, and
        // holes in partial messages below what is known to have been sent (the tail of a
        // message still in flight is not missing). At most a message window is walked.
        let repeat = s.nak_repeat_ns(cfg);
        let mut entries: Vec<NakEntry> = Vec::new();
        let per_frame = (cfg.max_datagram - 40) / NAK_ENTRY;
        // Only the oldest gaps are looked at (in-order delivery waits for them first): a
        // NAK's worth while the publisher's address is not registered, none while it may not
        // be answered at all.
        let reach = match (s.verified, s.may_answer(40 + NAK_ENTRY)) {
            (true, _) => NAK_WALK,
            (false, true) => per_frame as u64,
            (false, false) => 0,
        };
        let mut walk = s.known_end.min(s.next_deliver.saturating_add(reach));
        if !s.reliable {
            // Latest delivery asks for its history only.
            walk = walk.min(s.history_until);
        }
        for seq in s.next_deliver..walk {
            if s.complete.contains_key(&seq) {
                continue;
            }
            if entries.len() >= per_frame {
                break;
            }
            if let Some(p) = s.partial.get_mut(&seq) {
                let due = if p.last_nak_ns == 0 {
                    p.first_ns + cfg.nak_delay_ns
                } else {
                    p.last_nak_ns + repeat
                };
                if now >= due {
                    let len = p.data.len() as u32;
                    let known = if seq < s.sent_end {
                        len
                    } else {
                        s.highest_pos.saturating_sub(p.stream_pos).min(len as u64) as u32
                    };
                    let before = entries.len();
                    for (from, to) in p.have.gaps(len) {
                        // One NAK fits one datagram, however many holes a message has.
                        if entries.len() >= per_frame {
                            break;
                        }
                        let to = to.min(known);
                        if from < to {
                            entries.push(NakEntry { seq, from, to });
                        }
                    }
                    if entries.len() > before {
                        p.last_nak_ns = now;
                        next = next.min(now + repeat);
                    } else {
                        // Nothing known lost yet: look again soon.
                        next = next.min(now + cfg.nak_delay_ns);
                    }
                } else {
                    next = next.min(due);
                }
            } else {
                let (first, last) = *s.missing.entry(seq).or_insert((now, 0));
                if now >= first + cfg.nak_delay_ns && (last == 0 || now >= last + repeat) {
                    entries.push(NakEntry {
                        seq,
                        from: 0,
                        to: u32::MAX,
                    });
                    s.missing.insert(seq, (first, now));
                    next = next.min(now + repeat);
                } else {
                    next = next.min(if last == 0 {
                        first + cfg.nak_delay_ns
                    } else {
                        last + repeat
                    });
                }
            }
        }
        // History (before the first live message) and losses go in NAKs of their own: the
        // publisher weighs only losses.
        let history = entries.partition_point(|e| e.seq < s.history_until);
        for (part, flags) in [
            (&entries[..history], c.flags | FLAG_HISTORY),
            (&entries[history..], c.flags),
        ] {
            if !part.is_empty() {
                self.out.clear();
                frame::put_nak(&mut self.out, &Common { flags, ..c }, self.id, part);
                if self.reply(id, sink) {
                    self.stats.naks_sent += 1;
                }
            }
        }
        next
    }

    fn tick_session(&mut self, now: u64, id: u64, sink: &mut dyn Sink) -> u64 {
        let cfg = self.cfg.clone();
        let s = self.sessions.get_mut(&id).expect("a live session");
        // A dead or finished publisher: count what never came, forget the session.
        // Latest delivery does not wait for repairs: once the publisher said goodbye and nothing
        // incomplete is left to give up, what never came is lost.
        let finished = s.ended.is_some_and(|end| {
            if s.reliable {
                // Reliable: done once the application took everything (the publisher lingers
                // until it hears so).
                s.consumed_seq >= end
            } else {
                s.next_deliver >= end || s.partial.is_empty()
            }
        });
        if finished || now.saturating_sub(s.last_heard_ns) > cfg.session_timeout_ns {
            let s = self.sessions.remove(&id).expect("a live session");
            let why = if finished { Gone::Closed } else { Gone::Silent };
            forget(&s, id, why, &mut self.events);
            if finished && s.reliable {
                // The final STATUS: everything taken. The publisher stops lingering on it.
                self.acks_due.push((id, s.consumed_pos, s.consumed_seq));
            }
            // (At most a message window: `known_end` never runs further ahead.)
            let mut s = s;
            let never_came = s.known_end.saturating_sub(s.next_deliver);
            count_lost(&mut self.stats, &mut s, never_came);
            let record = (id, s.consumed_pos, s.consumed_seq, s.reliable);
            self.release(s);
            self.stats.sessions_ended += 1;
            if self.ended.len() == 64 {
                self.ended.pop_front();
            }
            self.ended.push_back(record);
            self.send_acks(sink);
            return u64::MAX;
        }
        let mut next = s.last_heard_ns + cfg.session_timeout_ns + 1;
        let c = Common {
            kind: Kind::Nak,
            flags: if s.reliable { FLAG_RELIABLE } else { 0 },
            topic: self.topic,
            session: id,
        };
        if s.in_order() {
            next = next.min(self.nak_gaps(now, id, &cfg, sink));
        }
        let s = self.sessions.get_mut(&id).expect("a live session");
        if s.reliable {
            // Flow control.
            let ask = s.history_wait;
            let repeat = s.nak_repeat_ns(&cfg);
            if s.status_due
                || now >= s.last_status_ns + cfg.status_interval_ns
                || s.ack_due(&cfg, now)
                || s.arrival_report_due(&cfg, now)
                || (ask && now >= s.last_status_ns + repeat)
            {
                self.out.clear();
                let sc = Common {
                    kind: Kind::Status,
                    flags: FLAG_RELIABLE | if ask { FLAG_HISTORY } else { 0 },
                    ..c
                };
                // Credit: the socket may hold `window` bytes beyond what arrived without a hole,
                // narrowed when the application leaves messages unread.
                let received = s.received_pos();
                let window = cfg
                    .window
                    .min(cfg.buffer_bytes.saturating_sub(self.buffered));
                let consumed_seq = s.consumed_seq;
                frame::put_status(
                    &mut self.out,
                    &sc,
                    self.id,
                    received,
                    window,
                    consumed_seq,
                    s.challenge,
                    s.highest_pos.max(received),
                    s.received_bytes,
                );
                // Withheld or not, the timers restart: an unverified address is not retried
                // on every datagram.
                s.status_due = false;
                s.last_status_ns = now;
                s.last_status_pos = received;
                s.last_status_arrived = s.highest_pos;
                s.last_status_seq = consumed_seq;
                s.last_status_window = window;
                self.reply(id, sink);
            }
            let s = self.sessions.get_mut(&id).expect("a live session");
            next = next.min(s.last_status_ns + cfg.status_interval_ns);
            if s.history_wait {
                next = next.min(s.last_status_ns + s.nak_repeat_ns(&cfg));
            }
            if s.received_pos() > s.last_status_pos || s.highest_pos > s.last_status_arrived {
                // Progress not told yet: at the latest after four gaps.
                next = next.min(s.last_status_ns + 4 * cfg.status_gap_ns);
            }
        } else {
            // Latest: give up incomplete messages and gaps that waited too long (not while the
            // history, delivered in order, comes first).
            let filling = s.filling();
            let stale: Vec<u64> = s
                .partial
                .iter()
                .filter(|(_, p)| !filling && now >= p.first_ns + cfg.give_up_ns)
                .map(|(&k, _)| k)
                .collect();
            let mut newest_given_up = None;
            for k in stale {
                let p = s.partial.remove(&k).expect("listed above");
                s.held -= charge(p.data.len());
                self.buffered -= charge(p.data.len());
                self.pool.give_back(p.data);
                newest_given_up = Some(k);
            }
            if let Some(k) = newest_given_up {
                if k >= s.next_deliver {
                    let lost = k + 1 - s.next_deliver;
                    s.next_deliver = k + 1;
                    count_lost(&mut self.stats, s, lost);
                }
            }
            if let Some(p) = s
                .partial
                .values()
                .map(|p| p.first_ns + cfg.give_up_ns)
                .min()
                .filter(|_| !filling)
            {
                next = next.min(p);
            }
            // Latest receivers announce themselves so publishers know who listens, at once to
            // echo a challenge, and as data arrives so that the publisher paces to the path.
            let ask = s.history_wait;
            let repeat = s.nak_repeat_ns(&cfg);
            if s.status_due
                || now >= s.last_status_ns + 10 * cfg.status_interval_ns
                || s.arrival_report_due(&cfg, now)
                || (ask && now >= s.last_status_ns + repeat)
            {
                s.status_due = false;
                self.out.clear();
                let sc = Common {
                    kind: Kind::Status,
                    flags: if ask { FLAG_HISTORY } else { 0 },
                    ..c
                };
                frame::put_status(
                    &mut self.out,
                    &sc,
                    self.id,
                    s.consumed_pos,
                    cfg.window,
                    s.consumed_seq,
                    s.challenge,
                    s.highest_pos.max(s.consumed_pos),
                    s.received_bytes,
                );
                s.last_status_ns = now;
                s.last_status_arrived = s.highest_pos;
                self.reply(id, sink);
            }
            let s = self.sessions.get_mut(&id).expect("a live session");
            next = next.min(s.last_status_ns + 10 * cfg.status_interval_ns);
            if s.history_wait {
                next = next.min(s.last_status_ns + s.nak_repeat_ns(&cfg));
            }
            if s.highest_pos > s.last_status_arrived {
                next = next.min(s.last_status_ns + 4 * cfg.status_gap_ns);
            }
        }
        self.drain_in_order(id);
        next
    }
}

#[cfg(test)]
impl Receiver {
    /// Checks the accounting and the bounds: what is charged is what is held, and no table
    /// outgrows its limit. Tests call it after every step.
    pub(crate) fn check_bounds(&self) -> Result<(), String> {
        let held: u64 = self.sessions.values().map(|s| s.held).sum();
        let queued: u64 = self.ready.iter().map(|d| charge(d.data.len())).sum();
        if held + queued != self.buffered {
            return Err(format!(
                "charged {} but holds {held} in sessions and {queued} queued",
                self.buffered
            ));
        }
        if self.buffered > self.cfg.buffer_bytes {
            return Err(format!(
                "{} buffered of {}",
                self.buffered, self.cfg.buffer_bytes
            ));
        }
        if self.sessions.len() > self.cfg.max_sessions {
            return Err(format!("{} sessions", self.sessions.len()));
        }
        for (id, s) in &self.sessions {
            let own: u64 = s
                .partial
                .values()
                .map(|p| charge(p.data.len()))
                .sum::<u64>()
                + s.complete
                    .values()
                    .map(|(d, _)| charge(d.len()))
                    .sum::<u64>();
            if own != s.held || s.held > self.cfg.session_bytes() {
                return Err(format!("session {id} holds {own}, charged {}", s.held));
            }
            if s.known_end > s.window_end() || s.missing.len() as u64 > NAK_WALK {
                return Err(format!("session {id} tracks beyond its window"));
            }
            let caps: u64 = s
                .partial
                .values()
                .map(|p| p.data.capacity() as u64)
                .sum::<u64>()
                + s.complete
                    .values()
                    .map(|(d, _)| d.capacity() as u64)
                    .sum::<u64>();
            let entries = (s.partial.len() + s.complete.len()) as u64;
            if caps > 2 * s.held + 4096 * entries {
                return Err(format!(
                    "session {id} pins {caps} bytes for {} charged",
                    s.held
                ));
            }
        }
        if self.pool.bytes > self.pool.limit || self.pool.bufs.len() > 64 {
            return Err(format!("{} bytes pooled", self.pool.bytes));
        }
        if self.ended.len() > 64 {
            return Err(format!("{} ended sessions remembered", self.ended.len()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
