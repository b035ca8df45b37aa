//! The publisher's half of the UDP protocol: no I/O, time passed in (nanoseconds).
//!
//! A message is cut into DATA frames of `max_datagram` bytes (the last one shorter), written back
//! to back into one buffer so that the socket layer can hand it to UDP GSO in a single call.
//! Messages offered while earlier ones wait to be sent queue up (to `queue_bytes`), and
//! consecutive whole messages that fit one datagram leave together in a BATCH frame, padded to the
//! datagram size so that batches too share a GSO call. Nothing waits to fill a batch: `pump` sends
//! whatever is queued when it is called. Under
//! reliable delivery the sender keeps recent messages in a bounded retransmit window, answers NAKs
//! from it, sends heartbeats so that receivers notice a lost tail, and sends no further than every
//! live reliable receiver's advertised window (receiver-driven flow control, in stream bytes).

use std::collections::VecDeque;

use super::congestion::{CongestionConfig, CongestionStats, Controller};
use super::ids::{id_map, IdMap};

use super::frame::{
    self, Common, Frame, Kind, BATCH_ENTRY, BATCH_HEADER, DATA_HEADER, FLAG_HISTORY, FLAG_RELIABLE,
    FLAG_RETRANSMIT, MESSAGE_WINDOW,
};
use super::refusal::{Refusal, Refusals};

/// Where the socket layer should send a batch of frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest<'a> {
    /// Every subscriber of the topic (the multicast group, or each known unicast address).
    All,
    /// Every subscriber but these receivers (by id): latest receivers that fell behind and
    /// skip this message. With multicast, the group (everyone).
    AllExcept(&'a [u64]),
    /// One receiver, by the id it reports in its STATUS and NAK frames.
    Receiver(u64),
    /// The publisher of a session (receiver to publisher).
    Session(u64),
}

/// Every subscriber, or every one but `left_out`.
fn dest_of(left_out: &[u64]) -> Dest<'_> {
    if left_out.is_empty() {
        Dest::All
    } else {
        Dest::AllExcept(left_out)
    }
}

/// The socket layer, as the protocol sees it. `data` holds datagrams of `segment` bytes back to
/// back (the last one may be shorter), each with the sink's `room` around it; the sink may
/// change them in place (seal them).
pub trait Sink {
    fn send(&mut self, dest: Dest<'_>, data: &mut [u8], segment: usize);

    /// Bytes the sink wants free before and after every datagram (a domain key writes its
    /// header and tag there, sealing in place).
    fn room(&self) -> (usize, usize) {
        (0, 0)
    }
}

/// Appends the DATA frame of bytes `part` of message `seq` (`msg`, at stream position `pos`),
/// with `room` free bytes around it.
fn put_fragment(
    out: &mut Vec<u8>,
    room: (usize, usize),
    c: &Common,
    seq: u64,
    msg: &[u8],
    pos: u64,
    part: std::ops::Range<usize>,
) {
    let (len, offset) = (msg.len() as u32, part.start as u32);
    with_room(out, room, |o| {
        frame::put_data(o, c, seq, len, offset, pos, &msg[part])
    });
}

/// Appends one datagram, written by `write`, with `room` free bytes around it.
pub(crate) fn with_room(out: &mut Vec<u8>, room: (usize, usize), write: impl FnOnce(&mut Vec<u8>)) {
    out.resize(out.len() + room.0, 0);
    write(out);
    out.resize(out.len() + room.1, 0);
}

/// At most this many frames leave per `pump` call.
pub const MAX_FRAMES_PER_PUMP: usize = 256;

/// At most this many frames answer one NAK (a whole 1 MiB message is 730 frames of 1424 bytes);
/// the receiver asks again for the rest.
pub const MAX_REPAIR_FRAMES_PER_NAK: usize = 1024;

/// A latest receiver that reported no progress for this long while data was on its way to it
/// stops pacing the publisher (its application stopped reading: latest delivery does not wait
/// for it) until it reports progress again.
pub const LATEST_STALL_NS: u64 = 20_000_000;

/// A latest receiver left out of the fan-out (it has its budget in flight) that reported no
/// progress for this long is sent the next message all the same: a probe, so that a receiver
/// whose reports or last datagrams were lost is not left out for good.
pub const LATEST_PROBE_NS: u64 = 50_000_000;

/// A receiver's repair budget refills to its advertised window every this many nanoseconds
/// (repairs to one receiver are capped per round trip, whatever its NAKs ask).
pub const REPAIR_REFILL_NS: u64 = 1_000_000;

#[derive(Debug, Clone)]
pub struct SenderConfig {
    /// UDP payload bytes per datagram: 1472 for a 1500-byte MTU over IPv4, 8972 for 9000.
    pub max_datagram: usize,
    pub reliable: bool,
    /// Bytes of recent messages kept for repair.
    pub window_bytes: u64,
    /// First heartbeat after the last data (tail-loss detection); doubles up to `heartbeat_idle_ns`.
    pub heartbeat_fast_ns: u64,
    pub heartbeat_idle_ns: u64,
    /// A receiver not heard from for this long is dropped: a reliable one no longer holds the
    /// sender back (the endpoint sets it to `Qos::lease`).
    pub receiver_timeout_ns: u64,
    /// Receivers tracked at once; a STATUS from a new one beyond this is refused.
    pub max_receivers: usize,
    /// Congestion control and pacing of reliable delivery (see `congestion`).
    pub congestion: bool,
    /// The most bytes per second (datagrams on the wire, repairs included) this publisher sends,
    /// under either delivery (`u64::MAX`: no cap).
    pub rate_cap: u64,
    /// Bytes of messages that may wait to be sent behind the one in progress (`offer` refuses
    /// more); what waits leaves batched.
    pub queue_bytes: u64,
    /// Each receiver is sent its own copy (unicast): a latest receiver that falls behind is
    /// left out of messages until it catches up, instead of slowing the others. False under
    /// multicast (one copy reaches everyone).
    pub fan_out: bool,
    /// Messages kept for subscribers that join later (`Qos::history`): the last `history` sent
    /// stay in the window (within `window_bytes`), heartbeats say where they start, and a
    /// receiver that joins asks for them as it asks for repairs, under either delivery.
    pub history: u64,
}

impl Default for SenderConfig {
    fn default() -> SenderConfig {
        SenderConfig {
            max_datagram: 1472,
            reliable: true,
            window_bytes: 64 << 20,
            heartbeat_fast_ns: 1_000_000,
            heartbeat_idle_ns: 100_000_000,
            receiver_timeout_ns: 2_000_000_000,
            max_receivers: 256,
            congestion: true,
            rate_cap: u64::MAX,
            queue_bytes: 128 << 10,
            fan_out: true,
            history: 0,
        }
    }
}

/// Counters of the sender, as `ferry stats` shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    pub messages: u64,
    pub bytes: u64,
    pub frames: u64,
    pub retransmitted_frames: u64,
    pub naks_received: u64,
    /// NAKed pieces no longer in the window (the receiver will count them lost).
    pub naks_unserved: u64,
    pub heartbeats: u64,
    /// Reliable receivers dropped for silence.
    pub receivers_timed_out: u64,
    /// Times a send found no credit.
    pub flow_blocked: u64,
    /// Control frames refused, by reason.
    pub refusals: Refusals,
    /// Repair frames a NAK asked for beyond the per-NAK cap, the receiver's repair budget or
    /// the pacer's quantum (the receiver asks again).
    pub repairs_deferred: u64,
    /// Bytes of repair datagrams sent (apart from new data: `frames` counts new data only).
    pub repair_bytes: u64,
    /// NAK entries not answered because the same receiver was sent that message's repair
    /// less than a round trip ago (the repair is still on its way).
    pub repairs_suppressed: u64,
    /// BATCH frames sent, and the messages they carried (`frames` counts them too).
    pub batches: u64,
    pub batched_messages: u64,
    /// Messages not sent to a latest receiver because it had its budget in flight (one per
    /// message and receiver left out): it reads slower than the others, or its path is slower.
    pub left_out: u64,
    /// The congestion controller's state and waits.
    pub congestion: CongestionStats,
}

struct Retained {
    seq: u64,
    stream_pos: u64,
    data: Vec<u8>,
    /// The last repair of this message: to which receiver, and when (ns; 0: never).
    repaired_for: u64,
    repaired_ns: u64,
}

#[derive(Debug, Clone, Copy)]
struct ReceiverState {
    reliable: bool,
    consumed_pos: u64,
    /// The furthest stream position it received (holes or not), and its payload bytes received.
    arrived_pos: u64,
    received_bytes: u64,
    consumed_seq: u64,
    window: u64,
    last_seen_ns: u64,
    /// When `arrived_pos` last advanced; a latest receiver silent since then is `stalled`.
    progress_ns: u64,
    stalled: bool,
    /// The stream position after the last message sent to it (latest receivers can be left
    /// out of messages: what lies between it and `arrived_pos` is in flight to it), and when
    /// it was last sent one as a probe.
    sent_to: u64,
    probe_ns: u64,
    /// Repair bytes this receiver may still be sent (refilled to `window` per
    /// [`REPAIR_REFILL_NS`]), and when it was last refilled.
    repair_budget: u64,
    repair_refilled_ns: u64,
}

impl ReceiverState {
    fn new(reliable: bool, consumed_pos: u64, consumed_seq: u64, window: u64, now: u64) -> Self {
        ReceiverState {
            reliable,
            consumed_pos,
            arrived_pos: consumed_pos,
            received_bytes: 0,
            consumed_seq,
            window,
            last_seen_ns: now,
            progress_ns: now,
            stalled: false,
            sent_to: consumed_pos,
            probe_ns: 0,
            repair_budget: window,
            repair_refilled_ns: now,
        }
    }

    /// The repair bytes available now.
    fn refill(&mut self, now: u64) -> u64 {
        let elapsed = now.saturating_sub(self.repair_refilled_ns);
        if elapsed > 0 {
            let add = (self.window as u128 * elapsed as u128 / REPAIR_REFILL_NS as u128)
                .min(u64::MAX as u128) as u64;
            self.repair_budget = self.repair_budget.saturating_add(add).min(self.window);
            self.repair_refilled_ns = now;
        }
        self.repair_budget
    }
}

/// The first message not yet completely sent (those after it, to `next_seq`, wait whole).
struct InProgress {
    seq: u64,
    stream_pos: u64,
    /// Bytes of the message already sent.
    sent: usize,
}

/// The queue of messages to send is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy;

/// The longest quiet after which a message counts as the application's pace whatever the rate
/// estimate says (see `Sender::pump`): a request and its answer on a LAN take longer.
const APP_IDLE_NS: u64 = 50_000;

pub struct Sender {
    cfg: SenderConfig,
    common: Common,
    next_seq: u64,
    stream_pos: u64,
    /// Messages sent and retained for repair (reliable), then those still to send (both
    /// deliveries), in seq order.
    window: VecDeque<Retained>,
    window_bytes: u64,
    /// Bytes of the messages from `current` on (not completely sent).
    queued_bytes: u64,
    pool: Vec<Vec<u8>>,
    receivers: IdMap<ReceiverState>,
    current: Option<InProgress>,
    out: Vec<u8>,
    next_heartbeat_ns: u64,
    heartbeat_step_ns: u64,
    /// After `close`: heartbeats become BYE frames.
    closing: bool,
    stats: SenderStats,
    cc: Controller,
    /// The message in progress waits for the pacer (not for a receiver), or for either the
    /// pacer or the in-flight window.
    pacer_wait: bool,
    cc_wait: bool,
    /// When everything queued last went out (ns), and whether the publisher was blocked on this
    /// sender then (`publisher_waits`): a message that comes later than a datagram's time at the
    /// pacing rate (at most `APP_IDLE_NS`), or than a pacing quantum after a blocked publisher,
    /// is the application's pace, not the path's.
    ran_dry: Option<(u64, bool)>,
    /// The publisher is blocked on this sender (its message not all sent, or the queue full)
    /// since the last time everything went out.
    publisher_waiting: bool,
    /// The latest receivers the message in progress leaves out (see `leave_out`).
    left_out: Vec<u64>,
    /// The receiver whose reports pace a latest publisher (see `pacing_receiver`).
    pace_source: Option<u64>,
}

impl Sender {
    pub fn new(topic: u64, session: u64, cfg: SenderConfig) -> Sender {
        assert!(
            cfg.max_datagram > DATA_HEADER,
            "datagrams must hold a DATA header and payload"
        );
        let flags = if cfg.reliable { FLAG_RELIABLE } else { 0 };
        let cc = Controller::new(
            CongestionConfig {
                datagram: cfg.max_datagram as u64,
                rate_cap: cfg.rate_cap,
                seed: session,
            },
            0,
        );
        Sender {
            cc,
            pacer_wait: false,
            ran_dry: Some((0, false)),
            publisher_waiting: false,
            cc_wait: false,
            left_out: Vec::new(),
            pace_source: None,
            common: Common {
                kind: Kind::Data,
                flags,
                topic,
                session,
            },
            next_seq: 0,
            stream_pos: 0,
            window: VecDeque::new(),
            window_bytes: 0,
            queued_bytes: 0,
            pool: Vec::new(),
            receivers: id_map(),
            current: None,
            out: Vec::new(),
            next_heartbeat_ns: 0,
            heartbeat_step_ns: cfg.heartbeat_fast_ns,
            closing: false,
            stats: SenderStats::default(),
            cfg,
        }
    }

    pub fn session(&self) -> u64 {
        self.common.session
    }

    pub fn topic(&self) -> u64 {
        self.common.topic
    }

    /// Counts a datagram the socket layer refused before it reached the protocol.
    pub fn refuse(&mut self, why: Refusal) {
        self.stats.refusals.count(why);
    }

    pub fn stats(&self) -> SenderStats {
        SenderStats {
            congestion: self.cc.stats(),
            ..self.stats
        }
    }

    /// The congestion controller's phase.
    #[cfg(any(test, feature = "internals"))]
    pub fn congestion_phase(&self) -> super::congestion::Phase {
        self.cc.phase()
    }

    /// Whether sends go through the pacer: a receiver to learn the path from, or a rate cap.
    fn paced(&self) -> bool {
        self.windowed() || self.cfg.rate_cap != u64::MAX
    }

    /// Whether the in-flight window applies (a receiver reports what arrived).
    fn windowed(&self) -> bool {
        self.cfg.congestion && self.pacers().next().is_some()
    }

    /// The receivers whose reports pace this publisher: the reliable ones; with none, the
    /// latest ones that keep reporting progress (one whose application stopped reading is not
    /// waited for: latest delivery lets it skip ahead).
    fn pacers(&self) -> impl Iterator<Item = (&u64, &ReceiverState)> {
        let reliable = self.cfg.reliable && self.receivers.values().any(|r| r.reliable);
        self.receivers
            .iter()
            .filter(move |(_, r)| if reliable { r.reliable } else { !r.stalled })
    }

    /// Marks the latest receivers that reported no progress for [`LATEST_STALL_NS`] while data
    /// beyond what they reported was sent, as stalled.
    fn find_stalled(&mut self, now: u64, sent_pos: u64) {
        let fan_out = self.cfg.fan_out;
        for r in self.receivers.values_mut().filter(|r| !r.reliable) {
            // Sent its own copy: only what was sent to it is on its way.
            let sent = if fan_out {
                r.sent_to.min(sent_pos)
            } else {
                sent_pos
            };
            r.stalled = r.arrived_pos < sent && now.saturating_sub(r.progress_ns) > LATEST_STALL_NS;
        }
    }

    /// When a message in progress that waits for the pacer may go on (ns); `u64::MAX` when it
    /// waits for a receiver instead (or nothing waits).
    pub fn next_send_ns(&self) -> u64 {
        if self.current.is_some() && self.pacer_wait {
            self.cc.next_send_ns()
        } else {
            u64::MAX
        }
    }

    /// The arrived position of the receiver that paces this publisher (what the controller
    /// counts as delivered: holes are lost, not in flight, and repaired apart).
    fn pacing_pos(&mut self) -> Option<u64> {
        self.pacing_receiver().map(|(_, r)| r.arrived_pos)
    }

    /// The receiver whose reports drive the controller. With reliable receivers, or one copy
    /// for all (multicast): the slowest pacer, since each of them gets every datagram. Latest
    /// receivers each sent their own copy: the one furthest ahead that keeps reporting; the
    /// others are left out of what they cannot take (see `leave_out`) instead of slowing it.
    /// That choice sticks until another pacer is half a window further (two receivers of one
    /// speed must not take turns: each change of source restarts the controller's samples).
    fn pacing_receiver(&mut self) -> Option<(u64, ReceiverState)> {
        let reliable = self.cfg.reliable && self.receivers.values().any(|r| r.reliable);
        if reliable || !self.cfg.fan_out {
            return self
                .pacers()
                .min_by_key(|(id, r)| (r.arrived_pos, **id))
                .map(|(id, r)| (*id, *r));
        }
        let ahead = self
            .pacers()
            .max_by_key(|(id, r)| (r.arrived_pos, std::cmp::Reverse(**id)))
            .map(|(id, r)| (*id, *r))?;
        let current = self
            .pace_source
            .and_then(|id| self.receivers.get(&id).map(|r| (id, *r)))
            .filter(|(_, r)| !r.stalled && !r.reliable);
        let slack = (self.cc.window() / 2).max(self.cfg.max_datagram as u64);
        let chosen = match current {
            Some(c) if c.1.arrived_pos.saturating_add(slack) >= ahead.1.arrived_pos => c,
            _ => ahead,
        };
        self.pace_source = Some(chosen.0);
        Some(chosen)
    }

    /// Decides which latest receivers the messages from stream position `pos` to `end` leave
    /// out (into `left_out`): each sent its own copy, one that has its budget in flight (what
    /// was sent to it beyond what it reported arrived) skips them — latest delivery lets it —
    /// unless it reported nothing for [`LATEST_PROBE_NS`] (then they go as a probe). The
    /// budget is its advertised window, at most twice the controller's window while the
    /// controller paces: a receiver that reads slower than the publisher sends, or sits behind
    /// a slower path, gets what it takes at its own pace and holds no one back.
    fn leave_out(&mut self, now: u64, end: u64, messages: u64, left_out: &mut Vec<u64>) {
        left_out.clear();
        if !self.cfg.fan_out {
            return;
        }
        let dg = self.cfg.max_datagram as u64;
        let cap = if self.windowed() {
            self.cc.window().saturating_mul(2).max(dg)
        } else {
            u64::MAX
        };
        // The receiver that paces the publisher is never left out: what the controller counts
        // in flight must go to it (bytes sent to nobody would never be delivered, and a window
        // full of them would hold the publisher until the receiver timed out).
        let source = if self.windowed() {
            self.pace_source
        } else {
            None
        };
        for (&id, r) in self.receivers.iter_mut().filter(|(_, r)| !r.reliable) {
            if Some(id) == source {
                r.sent_to = end;
                continue;
            }
            let budget = r.window.min(cap);
            let behind = r.sent_to.saturating_sub(r.arrived_pos) >= budget;
            if behind && now.saturating_sub(r.progress_ns.max(r.probe_ns)) < LATEST_PROBE_NS {
                left_out.push(id);
                continue;
            }
            if behind {
                r.probe_ns = now;
            }
            r.sent_to = end;
        }
        self.stats.left_out += messages * left_out.len() as u64;
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Payload bytes per DATA frame.
    pub fn fragment_payload(&self) -> usize {
        self.cfg.max_datagram - DATA_HEADER
    }

    /// Live receivers (reliable, latest).
    pub fn receiver_counts(&self) -> (usize, usize) {
        let reliable = self.receivers.values().filter(|r| r.reliable).count();
        (reliable, self.receivers.len() - reliable)
    }

    /// Counts a subscriber the publisher knows by address (from the topic directory or discovery)
    /// as a receiver before its first STATUS arrives: it joins from now, with a conservative
    /// window, so a reliable publisher neither outruns it nor stops lingering before it reported.
    pub fn expect_receiver(&mut self, id: u64, reliable: bool, now: u64) {
        let window = (256u64 << 10).max(self.cfg.max_datagram as u64);
        if !self.receivers.contains_key(&id) && self.receivers.len() >= self.cfg.max_receivers {
            self.stats.refusals.count(Refusal::OverLimit);
            return;
        }
        let (pos, seq) = (self.stream_pos, self.next_seq);
        self.receivers
            .entry(id)
            .or_insert_with(|| ReceiverState::new(reliable, pos, seq, window, now));
    }

    /// Stops counting a receiver that left (its directory entry or announcement went away).
    pub fn forget_receiver(&mut self, id: u64) {
        if self.receivers.remove(&id).is_some() {
            self.trim_window();
            let pos = self.pacing_pos().unwrap_or(self.stream_pos);
            self.cc.skip_to(pos);
        }
    }

    /// The publisher blocks on this sender: its message is not all sent, or the queue has no
    /// room for the next. When everything goes out meanwhile, the time until its next message
    /// is its thread's wake-up, not the application's pace.
    pub fn publisher_waits(&mut self) {
        self.publisher_waiting = true;
    }

    /// True while a message is still being sent.
    pub fn busy(&self) -> bool {
        self.current.is_some()
    }

    /// Whether `offer` takes a message of `len` bytes now: nothing waits, or the queue has room.
    pub fn can_take(&self, len: usize) -> bool {
        self.current.is_none()
            || self.queued_bytes.saturating_add(len as u64) <= self.cfg.queue_bytes
    }

    /// Whether two messages of `len` bytes fit one datagram (a burst of them is worth
    /// batching).
    pub fn batchable(&self, len: usize) -> bool {
        BATCH_HEADER + 2 * (BATCH_ENTRY + len) <= self.cfg.max_datagram
    }

    /// Takes a message to send; `pump` sends it, after those queued before it. Fails when the
    /// queue is full (see [`Sender::can_take`]).
    #[cfg(any(test, feature = "internals"))]
    pub fn offer(&mut self, msg: &[u8]) -> Result<u64, Busy> {
        if !self.can_take(msg.len()) {
            return Err(Busy);
        }
        let mut data = self.buffer();
        data.extend_from_slice(msg);
        self.offer_owned(data)
    }

    /// An empty buffer from the pool, to fill and hand to `offer_owned` (no copy).
    pub fn buffer(&mut self) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b
    }

    /// A buffer from the pool holding `len` bytes to be overwritten (a loan): the bytes an earlier
    /// message of this publisher left there, zeroes only past them, so that a steady stream of
    /// messages of one size writes each byte once, not a zero first.
    pub fn buffer_of(&mut self, len: usize) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        if b.len() >= len {
            b.truncate(len);
        } else {
            b.resize(len, 0);
        }
        b
    }

    /// Takes a message already in a buffer (from `buffer`); `pump` sends it.
    pub fn offer_owned(&mut self, data: Vec<u8>) -> Result<u64, Busy> {
        if !self.can_take(data.len()) {
            return Err(Busy);
        }
        let seq = self.next_seq;
        let msg_len = data.len();
        // Kept until sent (and, under reliable delivery, until every receiver took it).
        self.window_bytes += msg_len as u64;
        self.queued_bytes += msg_len as u64;
        self.window.push_back(Retained {
            seq,
            stream_pos: self.stream_pos,
            data,
            repaired_for: 0,
            repaired_ns: 0,
        });
        if self.current.is_none() {
            self.current = Some(InProgress {
                seq,
                stream_pos: self.stream_pos,
                sent: 0,
            });
        }
        self.next_seq += 1;
        self.stream_pos += msg_len as u64;
        self.stats.messages += 1;
        self.stats.bytes += msg_len as u64;
        Ok(seq)
    }

    /// The stream position up to which every live reliable receiver lets us send, and the
    /// first message none of them lets us send (their applications took all but
    /// [`MESSAGE_WINDOW`] messages before it).
    fn credit_limit(&self) -> (u64, u64) {
        if !self.cfg.reliable {
            // Latest delivery never waits for anyone.
            return (u64::MAX, u64::MAX);
        }
        let reliable = self.receivers.values().filter(|r| r.reliable);
        let bytes = reliable
            .clone()
            .map(|r| r.consumed_pos.saturating_add(r.window))
            .min()
            .unwrap_or(u64::MAX);
        let seq = reliable
            .map(|r| r.consumed_seq.saturating_add(MESSAGE_WINDOW))
            .min()
            .unwrap_or(u64::MAX);
        (bytes, seq)
    }

    fn message(&self, seq: u64) -> Option<(&[u8], u64)> {
        self.kept(seq).map(|r| (&r.data[..], r.stream_pos))
    }

    /// How many whole messages from `seq` (at stream position `pos`, none of it sent) fit one
    /// BATCH frame of at most `wire` bytes within the credit limits, and the stream position
    /// after them. The walk stops at the datagram's size.
    fn batch_at(&self, seq: u64, pos: u64, wire: usize, limit: u64, seq_limit: u64) -> (u32, u64) {
        let Some(first) = self.window.front().map(|r| r.seq) else {
            return (0, pos);
        };
        let (mut size, mut n, mut end) = (BATCH_HEADER, 0u32, pos);
        for r in self.window.range((seq - first) as usize..) {
            let len = r.data.len();
            if size + BATCH_ENTRY + len > wire || r.seq >= seq_limit || end + len as u64 > limit {
                break;
            }
            size += BATCH_ENTRY + len;
            end += len as u64;
            n += 1;
        }
        (n, end)
    }

    /// Sends as much of what is queued as credit and the pacer allow, at most
    /// `MAX_FRAMES_PER_PUMP` frames per call (so the caller can serve NAKs between batches):
    /// consecutive whole messages that fit one datagram share a BATCH frame, the others go as DATA
    /// fragments. Returns true when everything queued is sent.
    pub fn pump(&mut self, now: u64, sink: &mut dyn Sink) -> bool {
        let Some(cur) = self.current.as_ref() else {
            return true;
        };
        let (first_pos, first_sent) = (cur.stream_pos, cur.sent);
        let start_seq = cur.seq;
        let (mut seq, mut pos, mut sent) = (start_seq, first_pos, first_sent);
        let frag = self.fragment_payload();
        let (limit, seq_limit) = self.credit_limit();
        self.find_stalled(now, first_pos + first_sent as u64);
        // The pacer's share: at least one frame when it lets anything go.
        self.pacer_wait = false;
        self.cc_wait = false;
        let paced = self.paced();
        let windowed = self.windowed();
        self.cc.set_controlled(windowed);
        if !windowed {
            // Nobody reports delivery: nothing counts as in flight.
            self.cc.unwatched(now, first_pos + first_sent as u64);
        }
        let budget = if paced {
            let idle = self.ran_dry.take().is_some_and(|(t, waited)| {
                let quiet = if waited {
                    self.cc.quantum_ns()
                } else {
                    self.cc.datagram_ns().min(APP_IDLE_NS)
                };
                now.saturating_sub(t) > quiet
            });
            if first_sent == 0
                && idle
                && now >= self.cc.next_send_ns()
                && self.cc.in_flight() < self.cc.window()
            {
                // A message that came after the sender had nothing to send for a while finds
                // the pacer idle and the window open: the application, not the path, sets the
                // pace (what it sends now cannot show the path's rate). One that waited behind
                // the window or the pacer, or came at once, is the path's. "A while" is a
                // datagram's time at the pacing rate, at most `APP_IDLE_NS` (not more: at an
                // estimate that fell, a request and its answer would otherwise count as the
                // path's, pull the estimate down to their own rate and be held by the pacer);
                // but after a publisher that was blocked on this sender (held by a receiver's
                // window, or the pacer) it is a pacing quantum, past the time its thread takes
                // to wake (with less, at 1 Gbit/s every message after such a wake-up counted as
                // the application's, Startup never ended and kept 2 MB queued).
                self.cc.on_limited();
            }
            let allow = self.cc.allowance(now, windowed);
            self.pacer_wait = allow == 0 && now < self.cc.next_send_ns();
            self.cc_wait = allow == 0;
            if allow == 0 {
                return false;
            }
            allow as usize
        } else {
            usize::MAX
        };
        let wire = self.cfg.max_datagram;
        let room = sink.room();
        let segment = wire + room.0 + room.1;
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        let c = self.common;
        let batch_c = Common {
            kind: Kind::Batch,
            ..c
        };
        let (mut frames, mut bytes, mut flushed) = (0usize, 0usize, 0u64);
        // The last datagram in `out` is shorter than `segment`; a BATCH one may be padded.
        let mut short_batch = false;
        let mut batch_messages = (0u64, 0u64);
        // GSO needs every datagram of a send but the last to be `segment` bytes: before another
        // datagram, a short BATCH is padded with zeros and a short DATA ends the send.
        let next_datagram = |out: &mut Vec<u8>,
                             short_batch: bool,
                             sink: &mut dyn Sink,
                             dest: Dest<'_>,
                             flushed: &mut u64| {
            if out.len() % segment != 0 {
                if short_batch {
                    out.resize(out.len().next_multiple_of(segment), 0);
                } else {
                    sink.send(dest, out, segment);
                    *flushed += out.len() as u64;
                    out.clear();
                }
            }
        };
        // Who the datagrams in `out` leave out: the message in progress's choice, until the
        // next message starts.
        let mut left_out = std::mem::take(&mut self.left_out);
        let fan_out = self.cfg.fan_out && self.receivers.values().any(|r| !r.reliable);
        if !fan_out {
            left_out.clear();
        }
        while seq < self.next_seq && seq < seq_limit && frames < MAX_FRAMES_PER_PUMP {
            if frames > 0 && bytes + wire > budget {
                break;
            }
            let len = self.message(seq).expect("unsent messages are kept").0.len();
            let batch = if sent == 0 {
                self.batch_at(seq, pos, wire, limit, seq_limit)
            } else {
                (0, pos)
            };
            if sent == 0 && fan_out {
                let (messages, end) = if batch.0 >= 2 {
                    (batch.0 as u64, batch.1)
                } else {
                    (1, pos + len as u64)
                };
                let mut next = Vec::new();
                self.leave_out(now, end, messages, &mut next);
                if next != left_out {
                    // Datagrams for one set of receivers go out before those for another.
                    if !out.is_empty() {
                        sink.send(dest_of(&left_out), &mut out, segment);
                        flushed += out.len() as u64;
                        out.clear();
                    }
                    short_batch = false;
                    left_out = next;
                }
            }
            let (n, end) = batch;
            if n >= 2 {
                next_datagram(
                    &mut out,
                    short_batch,
                    sink,
                    dest_of(&left_out),
                    &mut flushed,
                );
                let at = out.len();
                out.resize(at + room.0, 0);
                frame::put_batch_header(&mut out, &batch_c, seq, n, pos);
                let first = self.window.front().expect("kept").seq;
                for r in self.window.range((seq - first) as usize..).take(n as usize) {
                    frame::put_batched(&mut out, &r.data);
                }
                bytes += out.len() - at - room.0;
                out.resize(out.len() + room.1, 0);
                short_batch = true;
                frames += 1;
                batch_messages.0 += 1;
                batch_messages.1 += n as u64;
                self.queued_bytes -= end - pos;
                seq += n as u64;
                pos = end;
                continue;
            }
            // Fragments of one message, each within every reliable receiver's window (windows
            // are at least a datagram, so this makes progress once receivers consume).
            let mut end = sent;
            let mut n = 0;
            while end < len && frames + n < MAX_FRAMES_PER_PUMP {
                let next = (end + frag).min(len);
                if pos + next as u64 > limit || (frames + n > 0 && bytes + wire > budget) {
                    break;
                }
                bytes += DATA_HEADER + next - end;
                end = next;
                n += 1;
            }
            let empty = len == 0;
            if empty {
                bytes += DATA_HEADER;
                n = 1;
            }
            if n == 0 {
                break;
            }
            next_datagram(
                &mut out,
                short_batch,
                sink,
                dest_of(&left_out),
                &mut flushed,
            );
            short_batch = false;
            let (msg, _) = self.message(seq).expect("unsent messages are kept");
            if empty {
                put_fragment(&mut out, room, &c, seq, msg, pos, 0..0);
            }
            let mut offset = sent;
            while offset < end {
                let stop = (offset + frag).min(end);
                put_fragment(&mut out, room, &c, seq, msg, pos, offset..stop);
                offset = stop;
            }
            frames += n;
            if end < len {
                sent = end;
                break;
            }
            self.queued_bytes -= len as u64;
            seq += 1;
            pos += len as u64;
            sent = 0;
        }
        if !out.is_empty() {
            sink.send(dest_of(&left_out), &mut out, segment);
        }
        self.left_out = left_out;
        let on_wire = flushed + out.len() as u64;
        self.out = out;
        if on_wire > 0 {
            if paced {
                self.cc.on_sent(now, on_wire);
            }
            if windowed {
                self.cc.on_data(now, pos + sent as u64);
            }
            self.stats.frames += frames as u64;
            self.stats.batches += batch_messages.0;
            self.stats.batched_messages += batch_messages.1;
            self.heartbeat_step_ns = self.cfg.heartbeat_fast_ns;
            self.next_heartbeat_ns = now + self.heartbeat_step_ns;
        }
        let done = seq == self.next_seq;
        if done {
            self.current = None;
            self.ran_dry = Some((now, std::mem::take(&mut self.publisher_waiting)));
        } else {
            if on_wire == 0 {
                self.stats.flow_blocked += 1;
                // Held by a receiver's window, not the path: samples now are not the path's.
                self.cc.on_limited();
            }
            self.current = Some(InProgress {
                seq,
                stream_pos: pos,
                sent,
            });
        }
        if seq != start_seq {
            self.trim_window();
        }
        done
    }

    /// Pumps until the message in progress is sent (true) or credit runs out (false).
    pub fn pump_while_credit(&mut self, now: u64, sink: &mut dyn Sink) -> bool {
        loop {
            let before = self.stats.frames;
            if self.pump(now, sink) {
                return true;
            }
            if self.stats.frames == before {
                return false;
            }
        }
    }

    /// Drops sent messages no reliable receiver still needs: at once when every reliable
    /// receiver consumed them (latest delivery: at once), and beyond `window_bytes` when there
    /// is no reliable receiver (the window then serves late joiners' first repairs). The last
    /// `history` sent stay while the window holds no more than `window_bytes`.
    fn trim_window(&mut self) {
        let unsent = self.current.as_ref().map_or(self.next_seq, |c| c.seq);
        let needed = if self.cfg.reliable {
            self.receivers
                .values()
                .filter(|r| r.reliable)
                .map(|r| r.consumed_seq)
                .min()
        } else {
            Some(unsent)
        };
        while let Some(front) = self.window.front() {
            if front.seq >= unsent {
                break;
            }
            let over = self.window_bytes > self.cfg.window_bytes;
            // The last `history` messages sent stay (for joiners), within `window_bytes`.
            let history = front.seq.saturating_add(self.cfg.history) >= unsent;
            let drop = match needed {
                Some(needed) => front.seq < needed && (!history || over),
                None => over,
            };
            if !drop {
                break;
            }
            let r = self.window.pop_front().unwrap();
            self.window_bytes -= r.data.len() as u64;
            self.pool.push(r.data);
        }
    }

    /// Handles a control frame from a receiver.
    pub fn handle(&mut self, now: u64, frame: &Frame<'_>, sink: &mut dyn Sink) {
        if frame.common().topic != self.common.topic
            || frame.common().session != self.common.session
        {
            return;
        }
        match frame {
            Frame::Status {
                common,
                receiver,
                consumed_pos,
                window,
                consumed_seq,
                arrived_pos,
                received_bytes,
                ..
            } => {
                let reliable = common.flags & FLAG_RELIABLE != 0;
                let consumed = (*consumed_pos).min(self.stream_pos);
                let consumed_seq = (*consumed_seq).min(self.next_seq);
                // A window is at least one datagram (progress) and at most ours (memory).
                let dg = self.cfg.max_datagram as u64;
                let window = (*window).min(self.cfg.window_bytes).max(dg);
                if !self.receivers.contains_key(receiver)
                    && self.receivers.len() >= self.cfg.max_receivers
                {
                    self.stats.refusals.count(Refusal::OverLimit);
                    return;
                }
                let r = self.receivers.entry(*receiver).or_insert_with(|| {
                    ReceiverState::new(reliable, consumed, consumed_seq, window, now)
                });
                r.reliable = reliable;
                r.consumed_pos = r.consumed_pos.max(consumed);
                // Arrived is at least what is held without a hole, at most what was sent.
                let arrived = r
                    .arrived_pos
                    .max((*arrived_pos).min(self.stream_pos))
                    .max(r.consumed_pos);
                if arrived > r.arrived_pos {
                    r.progress_ns = now;
                    r.stalled = false;
                }
                r.arrived_pos = arrived;
                // At most every byte sent, repairs included.
                let sent = self.stream_pos.saturating_add(self.stats.repair_bytes);
                r.received_bytes = r.received_bytes.max((*received_bytes).min(sent));
                r.consumed_seq = r.consumed_seq.max(consumed_seq);
                r.window = window;
                r.last_seen_ns = now;
                self.trim_window();
                if common.flags & FLAG_HISTORY != 0 {
                    // A joiner waits to learn where the history starts: a heartbeat tells it
                    // (smaller than the STATUS that asked, and only to the receiver's own
                    // address).
                    self.answer_joiner(*receiver, sink);
                }
                if let Some((id, r)) = self.pacing_receiver() {
                    self.cc
                        .on_delivered(now, id, r.arrived_pos, r.received_bytes);
                }
            }
            Frame::Nak {
                common,
                receiver,
                entries,
            } => {
                self.stats.naks_received += 1;
                let Some(r) = self.receivers.get_mut(receiver) else {
                    // Repairs go only to receivers we know (registered, or heard from).
                    self.stats.refusals.count(Refusal::Unknown);
                    return;
                };
                r.last_seen_ns = now;
                let budget = r.refill(now);
                // A joiner asking for history reports no loss.
                let history = common.flags & FLAG_HISTORY != 0;
                let spent = self.repair(now, entries, *receiver, budget, history, sink);
                if let Some(r) = self.receivers.get_mut(receiver) {
                    r.repair_budget -= spent.min(r.repair_budget);
                }
            }
            _ => {}
        }
    }

    /// Answers a NAK's entries: each fragment asked for once, however often the NAK repeats it,
    /// at most [`MAX_REPAIR_FRAMES_PER_NAK`] frames and `budget` bytes. Returns the bytes sent.
    /// A `history` NAK (a joiner asking for what was sent before it came) is no loss to the
    /// congestion controller. Under latest delivery only history is kept, and served.
    #[allow(clippy::too_many_arguments)]
    fn repair(
        &mut self,
        now: u64,
        entries: &frame::NakEntries<'_>,
        receiver: u64,
        budget: u64,
        history: bool,
        sink: &mut dyn Sink,
    ) -> u64 {
        let frag = self.fragment_payload();
        // Normalise to fragment-grid ranges per message, sorted and merged: the work is the
        // NAK's own length (bounded by the datagram), whatever its entries claim.
        let mut wanted: Vec<(u64, usize, usize)> = Vec::with_capacity(entries.len());
        // A repair sent to this receiver less than a round trip ago is still on its way.
        let fresh = self.cc.stats().min_rtt_ns.max(100_000);
        let mut lost = 0u64;
        for e in entries.iter() {
            // Loss the controller weighs: what this receiver asks for the first time.
            let mut first_ask = !history;
            if let Some(r) = self.kept(e.seq) {
                if r.repaired_for == receiver
                    && r.repaired_ns != 0
                    && now.saturating_sub(r.repaired_ns) < fresh
                {
                    self.stats.repairs_suppressed += 1;
                    continue;
                }
                first_ask = first_ask && r.repaired_ns == 0;
            }
            match self.message(e.seq) {
                Some((msg, _)) if self.cfg.reliable || self.cfg.history > 0 => {
                    let len = msg.len();
                    // Of the message in progress, only what went out once can be sent again
                    // (the rest follows in order, within the window).
                    let limit = match &self.current {
                        Some(cur) if cur.seq == e.seq => cur.sent.min(len),
                        // Not sent yet (a forged NAK): it goes out in order.
                        Some(cur) if cur.seq < e.seq => continue,
                        _ => len,
                    };
                    // Whole fragments on the sender's grid.
                    let from = (e.from as usize).min(len) / frag * frag;
                    let to = (e.to as usize)
                        .min(limit)
                        .div_ceil(frag)
                        .saturating_mul(frag)
                        .min(limit);
                    if from < to || len == 0 {
                        wanted.push((e.seq, from, to));
                        if first_ask {
                            lost += (to - from) as u64;
                        }
                    }
                }
                _ => self.stats.naks_unserved += 1,
            }
        }
        self.cc.on_loss(lost);
        // Repairs take their turn on the pacer: a quantum at a time, at most one ahead of it.
        let budget = if self.paced() {
            let q = self.cc.quantum();
            if now.saturating_add(self.cc.quantum_ns()) >= self.cc.next_send_ns() {
                budget.min(q)
            } else {
                0
            }
        } else {
            budget
        };
        wanted.sort_unstable();
        let mut merged: Vec<(u64, usize, usize)> = Vec::with_capacity(wanted.len());
        for (seq, from, to) in wanted {
            match merged.last_mut() {
                Some(last) if last.0 == seq && from <= last.2 => last.2 = last.2.max(to),
                _ => merged.push((seq, from, to)),
            }
        }
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        let c = Common {
            flags: self.common.flags | FLAG_RETRANSMIT,
            ..self.common
        };
        let mut frames = 0usize;
        let mut deferred = 0u64;
        let mut sent = 0u64;
        let room = sink.room();
        let segment = self.cfg.max_datagram + room.0 + room.1;
        for (seq, from, to) in merged {
            // Only the last datagram of a GSO batch may be short: one batch per message range.
            if !out.is_empty() {
                sink.send(Dest::Receiver(receiver), &mut out, segment);
                sent += out.len() as u64;
                out.clear();
            }
            let frames_before = frames;
            let (msg, pos) = self.message(seq).expect("checked above");
            let len = msg.len();
            let mut offset = from;
            // An empty message is one empty frame.
            let mut first = true;
            while offset < to || (len == 0 && first) {
                first = false;
                let stop = (offset + frag).min(to);
                let bytes = (DATA_HEADER + stop - offset) as u64;
                if frames >= MAX_REPAIR_FRAMES_PER_NAK || sent + out.len() as u64 + bytes > budget {
                    deferred += 1;
                    break;
                }
                put_fragment(&mut out, room, &c, seq, msg, pos, offset..stop);
                frames += 1;
                offset = stop;
                if len == 0 {
                    break;
                }
            }
            if frames > frames_before {
                if let Some(r) = self.kept_mut(seq) {
                    r.repaired_for = receiver;
                    r.repaired_ns = now.max(1);
                }
            }
        }
        self.stats.repairs_deferred += deferred;
        if !out.is_empty() {
            // Only the asking receiver needs it (others ask for themselves).
            sink.send(Dest::Receiver(receiver), &mut out, segment);
            sent += out.len() as u64;
        }
        self.stats.retransmitted_frames += frames as u64;
        self.stats.repair_bytes += sent;
        if sent > 0 && self.paced() {
            self.cc.on_sent(now, sent);
        }
        self.out = out;
        sent
    }

    fn kept(&self, seq: u64) -> Option<&Retained> {
        let first = self.window.front()?.seq;
        self.window.get(seq.checked_sub(first)? as usize)
    }

    fn kept_mut(&mut self, seq: u64) -> Option<&mut Retained> {
        let first = self.window.front()?.seq;
        self.window.get_mut(seq.checked_sub(first)? as usize)
    }

    /// Timers: heartbeats and receiver liveness. Returns when to call again (ns).
    pub fn tick(&mut self, now: u64, sink: &mut dyn Sink) -> u64 {
        let timeout = self.cfg.receiver_timeout_ns;
        let before = self.receivers.len();
        self.receivers
            .retain(|_, r| now.saturating_sub(r.last_seen_ns) < timeout);
        if self.receivers.len() != before {
            self.stats.receivers_timed_out += (before - self.receivers.len()) as u64;
            self.trim_window();
            let pos = self.pacing_pos().unwrap_or(self.stream_pos);
            self.cc.skip_to(pos);
        }
        self.cc.tick(now);
        if now >= self.next_heartbeat_ns && self.current.is_some() && self.cc_wait {
            // Data follows as soon as the pacer or the next report lets it: no tail to
            // announce yet.
            self.next_heartbeat_ns = self
                .cc
                .next_send_ns()
                .max(now)
                .saturating_add(self.cfg.heartbeat_fast_ns);
        }
        if now >= self.next_heartbeat_ns {
            let mut out = std::mem::take(&mut self.out);
            out.clear();
            with_room(&mut out, sink.room(), |o| {
                if self.closing {
                    let c = Common {
                        kind: Kind::Bye,
                        ..self.common
                    };
                    frame::put_bye(o, &c, self.next_seq);
                } else {
                    let c = Common {
                        kind: Kind::Heartbeat,
                        ..self.common
                    };
                    self.put_heartbeat(o, &c, 0);
                }
            });
            let len = out.len();
            sink.send(Dest::All, &mut out, len);
            self.out = out;
            self.stats.heartbeats += 1;
            self.heartbeat_step_ns = (self.heartbeat_step_ns * 2).min(self.cfg.heartbeat_idle_ns);
            self.next_heartbeat_ns = now + self.heartbeat_step_ns;
        }
        let next_timeout = self
            .receivers
            .values()
            .map(|r| r.last_seen_ns + timeout)
            .min()
            .unwrap_or(u64::MAX);
        self.next_heartbeat_ns.min(next_timeout)
    }

    /// Appends a heartbeat of this session carrying `challenge` (0: none).
    pub fn put_heartbeat(&self, out: &mut Vec<u8>, c: &Common, challenge: u64) {
        // Messages before `sent_end` went out whole: a receiver missing part of one knows it
        // is lost (the message in progress is not, yet).
        let sent_end = self.current.as_ref().map_or(self.next_seq, |c| c.seq);
        let oldest = self
            .window
            .front()
            .map_or(self.next_seq, |r| r.seq)
            .min(sent_end);
        // The history: the last `history` sent, as far as the window still holds them.
        let history_from = sent_end.saturating_sub(self.cfg.history).max(oldest);
        frame::put_heartbeat(out, c, sent_end, oldest, challenge, history_from);
    }

    /// Sends a heartbeat to one receiver (a joiner learns where the history starts).
    fn answer_joiner(&mut self, receiver: u64, sink: &mut dyn Sink) {
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        let c = Common {
            kind: Kind::Heartbeat,
            ..self.common
        };
        with_room(&mut out, sink.room(), |o| self.put_heartbeat(o, &c, 0));
        let len = out.len();
        sink.send(Dest::Receiver(receiver), &mut out, len);
        self.out = out;
        self.stats.heartbeats += 1;
    }

    /// A heartbeat of this session carrying `challenge`, for an address to prove it receives.
    pub fn challenge(&self, challenge: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(48);
        let c = Common {
            kind: Kind::Heartbeat,
            ..self.common
        };
        self.put_heartbeat(&mut out, &c, challenge);
        out
    }

    /// Sends a heartbeat now (a new subscriber learns the session's position).
    pub fn heartbeat_now(&mut self, now: u64, sink: &mut dyn Sink) {
        self.next_heartbeat_ns = now;
        self.tick(now, sink);
    }

    /// Ends the session: a BYE (telling receivers how many messages there were) goes out now and,
    /// in place of heartbeats, on every later `tick`, while the caller lingers to serve repairs.
    pub fn close(&mut self, now: u64, sink: &mut dyn Sink) {
        self.closing = true;
        self.heartbeat_step_ns = self.cfg.heartbeat_fast_ns;
        self.next_heartbeat_ns = now;
        self.tick(now, sink);
    }

    /// Live reliable receivers that have not consumed everything sent, and the most bytes any
    /// of them still has to take (a message still being sent counts as untaken).
    pub fn unconsumed(&self) -> (usize, u64) {
        self.behind()
            .fold((0, 0), |(n, most), (_, bytes)| (n + 1, most.max(bytes)))
    }

    /// The live reliable receiver furthest behind and the bytes it has yet to take; `None` when
    /// none is behind.
    pub fn slowest(&self) -> Option<(u64, u64)> {
        self.behind().max_by_key(|&(_, bytes)| bytes)
    }

    /// Each live reliable receiver that has not consumed everything sent (a message still being
    /// sent counts as untaken), with the bytes it has yet to take.
    fn behind(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.receivers
            .iter()
            .filter(|(_, r)| {
                r.reliable && (r.consumed_pos < self.stream_pos || self.current.is_some())
            })
            .map(|(&id, r)| (id, self.stream_pos.saturating_sub(r.consumed_pos)))
    }

    /// True when every live reliable receiver has consumed everything sent.
    pub fn all_consumed(&self) -> bool {
        self.current.is_none()
            && self
                .receivers
                .values()
                .filter(|r| r.reliable)
                .all(|r| r.consumed_pos >= self.stream_pos)
    }

    #[cfg(test)]
    pub(crate) fn retained(&self) -> usize {
        self.window.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loan_buffer_keeps_an_earlier_messages_bytes_and_zeroes_only_past_them() {
        let mut tx = Sender::new(1, 2, SenderConfig::default());
        // Nothing pooled yet: a fresh buffer, all zeros.
        let fresh = tx.buffer_of(16);
        assert_eq!(fresh, vec![0u8; 16]);
        // A retired 100-byte message returns to the pool; a shorter loan gets its first bytes
        // as they are, in the same allocation.
        tx.pool.push(vec![7u8; 100]);
        let shorter = tx.buffer_of(40);
        assert_eq!(shorter, vec![7u8; 40]);
        assert!(shorter.capacity() >= 100, "the pooled allocation is reused");
        // A longer loan keeps those 40 bytes and zeroes the rest: no byte it lends is
        // uninitialised, and none is written twice before the caller writes it.
        tx.pool.push(shorter);
        let longer = tx.buffer_of(60);
        assert_eq!(&longer[..40], &[7u8; 40][..]);
        assert_eq!(&longer[40..], &[0u8; 20][..]);
        // `buffer` (for a copy appended to it) still starts empty.
        tx.pool.push(longer);
        assert!(tx.buffer().is_empty());
    }

    /// Records which receivers each send leaves out.
    #[derive(Default)]
    struct Sends(Vec<Vec<u64>>);

    impl Sink for Sends {
        fn send(&mut self, dest: Dest<'_>, _data: &mut [u8], _segment: usize) {
            match dest {
                Dest::All => self.0.push(Vec::new()),
                Dest::AllExcept(ids) => self.0.push(ids.to_vec()),
                _ => {}
            }
        }
    }

    /// A latest receiver's STATUS: everything up to `arrived` arrived.
    fn status(tx: &mut Sender, now: u64, receiver: u64, arrived: u64, window: u64) {
        let c = Common {
            kind: Kind::Status,
            flags: 0,
            topic: tx.topic(),
            session: tx.session(),
        };
        let mut b = Vec::new();
        frame::put_status(
            &mut b, &c, receiver, arrived, window, 0, 0, arrived, arrived,
        );
        let f = frame::decode(&b).expect("a valid STATUS");
        tx.handle(now, &f, &mut Sends::default());
    }

    #[test]
    fn a_latest_receiver_that_falls_behind_is_left_out_and_probed_while_the_others_get_everything()
    {
        const FAST: u64 = 1;
        const SLOW: u64 = 2;
        const LEN: u64 = 8 << 10;
        let cfg = SenderConfig {
            reliable: false,
            congestion: false,
            ..SenderConfig::default()
        };
        let mut tx = Sender::new(7, 9, cfg);
        let window = 64 << 10;
        status(&mut tx, 0, FAST, 0, window);
        status(&mut tx, 0, SLOW, 0, window);
        let msg = vec![5u8; LEN as usize];
        let mut now = 0;
        let mut sends = Sends::default();
        // The slow receiver reports nothing: once its window is in flight it is left out,
        // message by message, while the fast one (reporting everything) gets each of them.
        for k in 0..20u64 {
            now += 1_000_000;
            tx.offer(&msg).unwrap();
            assert!(tx.pump(now, &mut sends), "message {k} waits for nobody");
            status(&mut tx, now, FAST, (k + 1) * LEN, window);
        }
        let left: Vec<bool> = sends.0.iter().map(|ids| ids == &[SLOW]).collect();
        assert!(sends.0.iter().all(|ids| !ids.contains(&FAST)));
        // 64 KiB in flight: the first eight messages reach it, the rest leave it out.
        assert_eq!(left.iter().filter(|l| !**l).count(), 8, "{:?}", sends.0);
        assert!(left[8..].iter().all(|l| *l));
        assert_eq!(tx.stats().left_out, 12);
        // Silent for the probe interval since its last progress: the next message reaches it.
        now += LATEST_PROBE_NS;
        sends.0.clear();
        tx.offer(&msg).unwrap();
        assert!(tx.pump(now, &mut sends));
        assert!(sends.0.iter().all(|ids| ids.is_empty()), "{:?}", sends.0);
        // ... and only that one, until it reports.
        now += 1_000_000;
        sends.0.clear();
        tx.offer(&msg).unwrap();
        assert!(tx.pump(now, &mut sends));
        assert!(sends.0.iter().all(|ids| ids == &[SLOW]), "{:?}", sends.0);
        // It reports everything it was sent (its application read it all): it is sent again.
        status(&mut tx, now, SLOW, 21 * LEN, window);
        now += 1_000_000;
        sends.0.clear();
        tx.offer(&msg).unwrap();
        assert!(tx.pump(now, &mut sends));
        assert!(sends.0.iter().all(|ids| ids.is_empty()), "{:?}", sends.0);
        assert_eq!(tx.stats().left_out, 13);
    }

    #[test]
    fn reliable_receivers_and_multicast_are_never_left_out() {
        for (reliable, fan_out) in [(true, true), (false, false)] {
            let cfg = SenderConfig {
                reliable,
                congestion: false,
                fan_out,
                ..SenderConfig::default()
            };
            let mut tx = Sender::new(7, 9, cfg);
            let c = Common {
                kind: Kind::Status,
                flags: if reliable { FLAG_RELIABLE } else { 0 },
                topic: 7,
                session: 9,
            };
            // A receiver that reports a small window and never any progress.
            let mut b = Vec::new();
            frame::put_status(&mut b, &c, 3, 0, 8 << 10, 0, 0, 0, 0);
            tx.handle(0, &frame::decode(&b).unwrap(), &mut Sends::default());
            let mut sends = Sends::default();
            for k in 0..4u64 {
                tx.offer(&[1u8; 4 << 10]).unwrap();
                // Reliable: its window holds the sender back (flow control), never leaves it out.
                tx.pump(k * 1_000_000, &mut sends);
            }
            assert!(sends.0.iter().all(|ids| ids.is_empty()), "{:?}", sends.0);
            assert_eq!(tx.stats().left_out, 0);
        }
    }
}
