//! The protocol cores against forged input: the attacks that once hung, starved or inflated a
//! subscriber, and arbitrary frame sequences, all in a debug build (overflow checks on). Each
//! test bounds memory through the cores' own accounting and bounds work by finishing at all:
//! no loop may run on a number taken from the wire.

use super::frame::{
    self, decode, Common, Kind, NakEntry, FLAG_RELIABLE, FLAG_RETRANSMIT, MESSAGE_WINDOW,
};
use super::receiver::{Receiver, ReceiverConfig, MESSAGE_OVERHEAD, UNVERIFIED_REPLY_FACTOR};
use super::refusal::Refusal;
use super::sender::{
    Dest, Sender, SenderConfig, Sink, MAX_REPAIR_FRAMES_PER_NAK, REPAIR_REFILL_NS,
};
use proptest::prelude::*;

const TOPIC: u64 = 42;
const GENUINE: u64 = 0xA11CE;

/// Counts what a core sends, per destination.
#[derive(Default)]
struct Counter {
    to_sessions: std::collections::HashMap<u64, u64>,
    to_receivers: u64,
    datagrams: u64,
}

impl Sink for Counter {
    fn send(&mut self, dest: Dest<'_>, data: &mut [u8], segment: usize) {
        self.datagrams += data.len().div_ceil(segment.max(1)) as u64;
        match dest {
            Dest::Session(id) => *self.to_sessions.entry(id).or_default() += data.len() as u64,
            _ => self.to_receivers += data.len() as u64,
        }
    }
}

fn common(kind: Kind, session: u64) -> Common {
    Common {
        kind,
        flags: FLAG_RELIABLE,
        topic: TOPIC,
        session,
    }
}

fn data(session: u64, seq: u64, msg_len: u32, offset: u32, pos: u64, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    frame::put_data(
        &mut b,
        &common(Kind::Data, session),
        seq,
        msg_len,
        offset,
        pos,
        payload,
    );
    b
}

fn heartbeat(session: u64, next: u64, oldest: u64) -> Vec<u8> {
    let mut b = Vec::new();
    frame::put_heartbeat(
        &mut b,
        &common(Kind::Heartbeat, session),
        next,
        oldest,
        0,
        next,
    );
    b
}

fn feed(rx: &mut Receiver, now: u64, bytes: &[u8]) {
    rx.on_frame(now, &decode(bytes).expect("the test builds valid frames"));
}

/// A receiver that keeps at most `max_sessions` sessions.
fn receiver_of_sessions(max_sessions: usize) -> Receiver {
    let cfg = ReceiverConfig {
        max_sessions,
        ..ReceiverConfig::default()
    };
    Receiver::new(7, TOPIC, cfg)
}

/// A receiver with a genuine session that delivered messages 0..10 of 100 bytes.
fn live_receiver(cfg: ReceiverConfig) -> Receiver {
    let mut rx = Receiver::new(7, TOPIC, cfg);
    for seq in 0..10u64 {
        feed(
            &mut rx,
            seq,
            &data(GENUINE, seq, 100, 0, seq * 100, &[seq as u8; 100]),
        );
    }
    rx.verify(GENUINE);
    let mut n = 0;
    while let Some(d) = rx.take(10) {
        rx.recycle(d.data);
        n += 1;
    }
    assert_eq!(n, 10);
    rx
}

/// The genuine session still delivers: message `seq` arrives and is handed out.
fn genuine_still_flows(rx: &mut Receiver, now: u64, seq: u64) {
    feed(rx, now, &data(GENUINE, seq, 100, 0, seq * 100, &[7; 100]));
    let d = rx.take(now).expect("the genuine message is delivered");
    assert_eq!((d.session, d.seq), (GENUINE, seq));
}

#[test]
fn a_heartbeat_at_the_end_of_sequence_space_is_given_up_not_walked() {
    // The attack that spun a subscriber at 100 % CPU: a made-up session, one DATA frame at seq 0,
    // then a HEARTBEAT whose next and oldest seq are 2^64 - 1.
    let mut rx = live_receiver(ReceiverConfig::default());
    let forged = 0xBAD;
    feed(&mut rx, 20, &data(forged, 0, 10, 0, 0, &[1; 10]));
    feed(&mut rx, 21, &heartbeat(forged, u64::MAX, u64::MAX));
    let mut sink = Counter::default();
    for t in 0..100 {
        rx.tick(22 + t * 1_000_000, &mut sink);
        rx.check_bounds().unwrap();
    }
    assert!(rx.stats().refusals.get(Refusal::OutOfWindow) >= 1);
    assert!(rx.table_entries() < 100, "{} entries", rx.table_entries());
    assert!(
        rx.stats().lost <= 2 * MESSAGE_WINDOW,
        "a claim of 2^64 messages is not 2^64 losses: {}",
        rx.stats().lost
    );
    while let Some(d) = rx.take(30) {
        rx.recycle(d.data);
    }
    genuine_still_flows(&mut rx, 200_000_000, 10);
}

#[test]
fn frames_and_heartbeats_far_ahead_cost_nothing() {
    // Seqs near 2^40 and 2^63 once grew a subscriber past 1 GiB in two seconds.
    let mut rx = live_receiver(ReceiverConfig::default());
    let mut sink = Counter::default();
    let mut now = 100;
    for (i, seq) in [1u64 << 40, 1 << 63, (1 << 63) + 5, u64::MAX - 1, u64::MAX]
        .into_iter()
        .enumerate()
    {
        for k in 0..200u64 {
            now += 1_000;
            feed(
                &mut rx,
                now,
                &data(GENUINE, seq.wrapping_add(k), 1000, 0, 0, &[0; 1000]),
            );
            feed(&mut rx, now, &heartbeat(0xF00 + i as u64, seq, seq / 2));
            rx.tick(now, &mut sink);
            rx.check_bounds().unwrap();
        }
    }
    assert!(rx.stats().refusals.get(Refusal::OutOfWindow) > 0);
    assert!(
        rx.buffered() < 64 * MESSAGE_OVERHEAD + (1 << 20),
        "{} bytes held",
        rx.buffered()
    );
}

#[test]
fn a_flood_of_sessions_and_first_fragments_does_not_starve_the_genuine_session() {
    // 20 000 first fragments of 1 MiB messages from 20 000 made-up sessions, then 5 000 empty
    // messages out of order: bounded sessions and memory, and the genuine session still flows.
    let cfg = ReceiverConfig {
        buffer_bytes: 16 << 20,
        ..ReceiverConfig::default()
    };
    let mut rx = live_receiver(cfg.clone());
    let mut sink = Counter::default();
    let mut now = 1_000;
    let mut genuine_seq = 10;
    for i in 0..20_000u64 {
        now += 10_000;
        feed(
            &mut rx,
            now,
            &data(0x1_0000 + i, 5, 1 << 20, 0, 0, &[0; 1400]),
        );
        if i % 1000 == 0 {
            rx.tick(now, &mut sink);
            rx.check_bounds().unwrap();
            while let Some(d) = rx.take(now) {
                rx.recycle(d.data);
            }
            genuine_still_flows(&mut rx, now, genuine_seq);
            genuine_seq += 1;
        }
    }
    // Empty messages, the first in order, then the rest from the last down: all but the first
    // wait, each charged its bookkeeping.
    for seq in std::iter::once(0).chain((1..5_000u64).rev()) {
        now += 1_000;
        feed(&mut rx, now, &data(0x9999, seq, 0, 0, 0, &[]));
        rx.check_bounds().unwrap();
    }
    rx.tick(now, &mut sink);
    rx.check_bounds().unwrap();
    assert!(rx.sessions() <= cfg.max_sessions);
    assert!(rx.stats().sessions_evicted > 0);
    while let Some(d) = rx.take(now) {
        rx.recycle(d.data);
    }
    genuine_still_flows(&mut rx, now + 1, genuine_seq);
}

#[test]
fn old_bytes_of_a_reused_buffer_never_reach_a_message() {
    // Pooled buffers keep their old bytes (a reassembly zeroes only past them): a message
    // reassembled in one is handed out only once each of its own bytes arrived, whatever the
    // order of its fragments.
    let mut rx = live_receiver(ReceiverConfig::default());
    let mut now = 100;
    let mut pos = 1_000;
    let mut reused = None;
    // Longer, shorter, then longer than the buffer's old bytes; each message's last fragment
    // first, its middle one last.
    for (seq, len, byte) in [
        (10u64, 3_000usize, 0xAA),
        (11, 2_500, 0x55),
        (12, 2_900, 0x33),
    ] {
        let message: Vec<u8> = (0..len).map(|i| byte ^ (i as u8)).collect();
        let frags = [(2_000, &message[2_000..]), (0, &message[..1_000])];
        for (offset, part) in frags {
            now += 1;
            feed(
                &mut rx,
                now,
                &data(GENUINE, seq, len as u32, offset, pos, part),
            );
            assert!(
                rx.take(now).is_none(),
                "message {seq} handed out with a hole"
            );
        }
        now += 1;
        feed(
            &mut rx,
            now,
            &data(GENUINE, seq, len as u32, 1_000, pos, &message[1_000..2_000]),
        );
        let d = rx.take(now).expect("the message is whole");
        assert_eq!((d.seq, d.data.len()), (seq, len));
        assert!(d.data == message, "message {seq} holds other bytes");
        if seq > 10 {
            assert_eq!(
                reused,
                Some(d.data.as_ptr()),
                "the pooled buffer was reused"
            );
        }
        reused = Some(d.data.as_ptr());
        rx.recycle(d.data);
        pos += len as u64;
    }
}

#[test]
fn a_large_buffer_is_never_pinned_by_a_small_message() {
    // 1 MiB first fragments whose sessions are then evicted fill the pool with large buffers;
    // empty messages held behind a gap must not each sit in one (they are charged 64 bytes).
    let mut rx = receiver_of_sessions(4);
    let mut now = 0;
    for round in 0..20u64 {
        for i in 0..8u64 {
            now += 1_000;
            feed(
                &mut rx,
                now,
                &data(round * 100 + i, 0, 1 << 20, 0, 0, &[1; 1400]),
            );
        }
        for seq in (1..200u64).rev() {
            now += 1_000;
            feed(&mut rx, now, &data(0xE0 + round, seq, 0, 0, 0, &[]));
        }
        rx.check_bounds().unwrap();
    }
}

#[test]
fn sessions_that_cannot_be_answered_cost_no_nak_rounds() {
    // Forged sessions with gaps up to the window: their address is not registered, so a tick
    // looks at no more of their gaps than one NAK holds.
    let mut rx = live_receiver(ReceiverConfig::default());
    let mut sink = Counter::default();
    for s in 0..60u64 {
        feed(&mut rx, 1, &data(0x7000 + s, 0, 10, 0, 0, &[0; 10]));
        feed(&mut rx, 1, &heartbeat(0x7000 + s, MESSAGE_WINDOW, 0));
    }
    for t in 0..50u64 {
        rx.tick(t * 10_000_000, &mut sink);
        rx.check_bounds().unwrap();
    }
    let per_nak = (1472 - 40) / 16;
    assert!(
        rx.table_entries() <= 60 * (per_nak + 2) + 100,
        "gaps of unregistered sessions tracked: {} entries",
        rx.table_entries()
    );
}

#[test]
fn sessions_of_registered_publishers_are_never_evicted_and_forged_ones_are() {
    let cfg = ReceiverConfig {
        max_sessions: 8,
        ..ReceiverConfig::default()
    };
    let mut rx = live_receiver(cfg);
    // Seven forged sessions, each delivering a message (so none is "unproven").
    for s in 0..7u64 {
        feed(&mut rx, 100 + s, &data(0x100 + s, 0, 10, 0, 0, &[0; 10]));
    }
    while let Some(d) = rx.take(200) {
        rx.recycle(d.data);
    }
    assert_eq!(rx.sessions(), 8);
    // A new genuine publisher still gets in; the registered one is kept.
    feed(&mut rx, 300, &data(0x600D, 0, 10, 0, 0, &[0; 10]));
    assert_eq!(rx.sessions(), 8);
    assert_eq!(rx.stats().sessions_evicted, 1);
    assert_eq!(rx.take(301).map(|d| d.session), Some(0x600D));
    genuine_still_flows(&mut rx, 302, 10);
}

#[test]
fn a_session_evicted_while_its_messages_wait_and_heard_again_keeps_count() {
    // Found by fuzzing: the delivery queue still held a message of an evicted session when a
    // session of the same id began again; taking it miscounted the new one.
    let mut rx = receiver_of_sessions(1);
    feed(&mut rx, 1, &data(0xA, 0, 10, 0, 0, &[1; 10]));
    // 0xB evicts 0xA (unregistered), then 0xA comes back and evicts 0xB.
    feed(&mut rx, 2, &heartbeat(0xB, 0, 0));
    feed(&mut rx, 3, &data(0xA, 5, 10, 0, 50, &[1; 10]));
    assert_eq!(rx.stats().sessions_evicted, 2);
    while let Some(d) = rx.take(4) {
        rx.recycle(d.data);
    }
    rx.check_bounds().unwrap();
    feed(&mut rx, 5, &data(0xA, 6, 10, 0, 60, &[1; 10]));
    assert_eq!(rx.take(6).map(|d| d.seq), Some(6));
}

#[test]
fn a_session_takes_its_stream_position_from_its_first_data_and_after_a_gap() {
    // Found in review: a session made by a heartbeat (a late joiner, an answered challenge)
    // kept stream position 0 and refused every frame of a publisher that had sent more than a
    // window before, for good; so did one that fell behind and gave a gap up.
    let mut rx = Receiver::new(7, TOPIC, ReceiverConfig::default());
    let mut sink = Counter::default();
    feed(&mut rx, 0, &heartbeat(GENUINE, 100, 0));
    rx.verify(GENUINE);
    let pos = 1u64 << 30;
    feed(&mut rx, 1, &data(GENUINE, 100, 10, 0, pos, &[1; 10]));
    assert_eq!(rx.take(2).map(|d| d.seq), Some(100));
    feed(&mut rx, 3, &data(GENUINE, 101, 10, 0, pos + 10, &[1; 10]));
    assert_eq!(rx.take(4).map(|d| d.seq), Some(101));
    // It falls far behind: the publisher kept nothing older than 150 000.
    feed(&mut rx, 5, &heartbeat(GENUINE, 150_000, 150_000));
    rx.tick(6, &mut sink);
    feed(
        &mut rx,
        7,
        &data(GENUINE, 150_000, 10, 0, 5 << 30, &[1; 10]),
    );
    assert_eq!(rx.take(8).map(|d| d.seq), Some(150_000));
    assert_eq!(
        rx.stats().refusals.get(Refusal::OutOfWindow),
        1,
        "the jump only"
    );
    rx.check_bounds().unwrap();
}

#[test]
fn an_unverified_address_gets_at_most_three_times_what_it_sent() {
    let mut rx = Receiver::new(7, TOPIC, ReceiverConfig::default());
    let forged = 0xBEEF;
    // One small DATA frame of a message with holes: the receiver would NAK and send STATUS
    // every 20 ms for as long as the session lives.
    let first = data(forged, 3, 60_000, 0, 0, &[0; 100]);
    feed(&mut rx, 0, &first);
    feed(&mut rx, 0, &data(forged, 9, 100, 0, 60_000, &[0; 100]));
    let came_in = (first.len() + frame::DATA_HEADER + 100) as u64;
    let mut sink = Counter::default();
    for t in 0..2_000u64 {
        rx.tick(t * 1_000_000, &mut sink);
    }
    let went_out = sink.to_sessions.get(&forged).copied().unwrap_or(0);
    assert!(went_out > 0, "some reply is allowed");
    assert!(
        went_out <= UNVERIFIED_REPLY_FACTOR * came_in,
        "{went_out} bytes out for {came_in} in"
    );
    assert!(rx.stats().replies_withheld > 0);
}

#[test]
fn frames_of_an_ended_session_are_counted_as_stale() {
    let mut rx = Receiver::new(7, TOPIC, ReceiverConfig::default());
    feed(&mut rx, 0, &data(GENUINE, 0, 10, 0, 0, &[1; 10]));
    rx.take(0).unwrap();
    let mut bye = Vec::new();
    frame::put_bye(&mut bye, &common(Kind::Bye, GENUINE), 1);
    feed(&mut rx, 1, &bye);
    rx.tick(2, &mut Counter::default());
    assert_eq!(rx.sessions(), 0);
    feed(&mut rx, 3, &data(GENUINE, 1, 10, 0, 10, &[1; 10]));
    assert_eq!(rx.stats().refusals.get(Refusal::Stale), 1);
    // A BYE of a session never heard of is refused too.
    let mut bye = Vec::new();
    frame::put_bye(&mut bye, &common(Kind::Bye, 0xD0D0), 5);
    feed(&mut rx, 4, &bye);
    assert_eq!(rx.stats().refusals.get(Refusal::Unknown), 1);
}

/// A sender without congestion control: these tests hold time still and look at flow control
/// and repair caps alone (`link_tests` covers the pacer).
fn unpaced() -> SenderConfig {
    SenderConfig {
        congestion: false,
        ..SenderConfig::default()
    }
}

/// A sender with one registered reliable receiver (id 9) and `n` messages of `len` bytes
/// retained.
fn sender_with_history(n: u64, len: usize) -> Sender {
    let mut tx = Sender::new(TOPIC, GENUINE, unpaced());
    tx.expect_receiver(9, true, 0);
    let mut sink = Counter::default();
    for _ in 0..n {
        tx.offer(&vec![5u8; len]).unwrap();
        assert!(tx.pump_while_credit(0, &mut sink) || tx.busy());
        // The receiver keeps granting credit but consumes nothing: everything stays retained.
        let mut st = Vec::new();
        frame::put_status(
            &mut st,
            &common(Kind::Status, GENUINE),
            9,
            0,
            1 << 30,
            0,
            0,
            0,
            0,
        );
        tx.handle(0, &decode(&st).unwrap(), &mut sink);
        while tx.busy() {
            tx.pump_while_credit(0, &mut sink);
        }
    }
    tx
}

fn nak(receiver: u64, entries: &[NakEntry]) -> Vec<u8> {
    let mut b = Vec::new();
    frame::put_nak(&mut b, &common(Kind::Nak, GENUINE), receiver, entries);
    b
}

#[test]
fn a_nak_of_repeated_whole_messages_is_answered_once_and_capped() {
    // A 9 KB NAK of {seq, 0, u32::MAX} entries once made the publisher resend whole messages
    // hundreds of times per datagram.
    let mut tx = sender_with_history(4, 1 << 20);
    let entries: Vec<NakEntry> = (0..560)
        .map(|i| NakEntry {
            seq: i % 4,
            from: 0,
            to: u32::MAX,
        })
        .collect();
    let forged = nak(9, &entries);
    let before = tx.stats().retransmitted_frames;
    let mut sink = Counter::default();
    tx.handle(REPAIR_REFILL_NS * 100, &decode(&forged).unwrap(), &mut sink);
    let frames = tx.stats().retransmitted_frames - before;
    assert!(
        frames as usize <= MAX_REPAIR_FRAMES_PER_NAK,
        "{frames} frames"
    );
    assert!(
        sink.to_receivers <= SenderConfig::default().window_bytes,
        "{} bytes",
        sink.to_receivers
    );
    assert!(tx.stats().repairs_deferred > 0);
    // The same NAK again at once: the budget is spent; it refills per round trip.
    let mut again = Counter::default();
    tx.handle(
        REPAIR_REFILL_NS * 100,
        &decode(&forged).unwrap(),
        &mut again,
    );
    assert!(again.to_receivers + sink.to_receivers <= 2 * MAX_REPAIR_FRAMES_PER_NAK as u64 * 1472);
}

#[test]
fn repairs_go_only_to_known_receivers() {
    let mut tx = sender_with_history(2, 3000);
    let mut sink = Counter::default();
    let forged = nak(
        0x5_7A4A_6E40,
        &[NakEntry {
            seq: 0,
            from: 0,
            to: u32::MAX,
        }],
    );
    tx.handle(1, &decode(&forged).unwrap(), &mut sink);
    assert_eq!(sink.to_receivers, 0);
    assert_eq!(tx.stats().refusals.get(Refusal::Unknown), 1);
}

#[test]
fn receivers_are_bounded() {
    let cfg = SenderConfig {
        max_receivers: 16,
        ..SenderConfig::default()
    };
    let mut tx = Sender::new(TOPIC, GENUINE, cfg);
    let mut sink = Counter::default();
    for id in 0..10_000u64 {
        let mut st = Vec::new();
        frame::put_status(
            &mut st,
            &common(Kind::Status, GENUINE),
            id,
            0,
            1 << 20,
            0,
            0,
            0,
            0,
        );
        tx.handle(id, &decode(&st).unwrap(), &mut sink);
    }
    let (r, l) = tx.receiver_counts();
    assert_eq!(r + l, 16);
    assert_eq!(tx.stats().refusals.get(Refusal::OverLimit), 10_000 - 16);
}

#[test]
fn a_publisher_never_runs_a_message_window_ahead_of_its_receivers() {
    let mut tx = Sender::new(TOPIC, GENUINE, unpaced());
    tx.expect_receiver(9, true, 0);
    let mut sink = Counter::default();
    let mut sent = 0u64;
    for _ in 0..MESSAGE_WINDOW + 10 {
        if tx.busy() && !tx.pump_while_credit(0, &mut sink) {
            break;
        }
        tx.offer(&[]).unwrap();
        if tx.pump_while_credit(0, &mut sink) {
            sent += 1;
        }
    }
    assert_eq!(
        sent, MESSAGE_WINDOW,
        "empty messages take no bytes, but window slots"
    );
}

/// One frame of an attacker's repertoire, built from a few numbers.
#[derive(Debug, Clone)]
enum Forged {
    Data {
        session: u64,
        seq: u64,
        len: u32,
        offset: u32,
        pos: u64,
        payload: u16,
        flags: u32,
    },
    Heartbeat {
        session: u64,
        next: u64,
        oldest: u64,
        /// Where the history claims to start (a receiver that asks for history believes it).
        history: u64,
    },
    Bye {
        session: u64,
        next: u64,
    },
    Tick(u64),
    Take,
}

fn interesting_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..40,
        Just(MESSAGE_WINDOW - 1),
        Just(MESSAGE_WINDOW),
        Just(MESSAGE_WINDOW + 1),
        Just(1u64 << 40),
        Just(1u64 << 63),
        Just(u64::MAX - 1),
        Just(u64::MAX),
        any::<u64>(),
    ]
}

fn forged() -> impl Strategy<Value = Forged> {
    let session = prop_oneof![Just(GENUINE), 1u64..6, any::<u64>()];
    prop_oneof![
        4 => (session.clone(), interesting_u64(), prop_oneof![0u32..3000, Just(1 << 20), any::<u32>()],
         0u32..3000, interesting_u64(), 0u16..1400, prop_oneof![Just(0), Just(FLAG_RELIABLE), Just(FLAG_RELIABLE | FLAG_RETRANSMIT)])
            .prop_map(|(session, seq, len, offset, pos, payload, flags)| Forged::Data {
                session, seq, len, offset, pos, payload, flags,
            }),
        2 => (session.clone(), interesting_u64(), interesting_u64(), interesting_u64())
            .prop_map(|(session, a, b, h)| Forged::Heartbeat {
                session, next: a.max(b), oldest: a.min(b), history: h.min(a.max(b)),
            }),
        1 => (session, interesting_u64()).prop_map(|(session, next)| Forged::Bye { session, next }),
        2 => (0u64..200_000_000).prop_map(Forged::Tick),
        1 => Just(Forged::Take),
    ]
}

/// Encodes a forged frame; `None` when the encoding is not a valid datagram (decode refuses it,
/// which other tests cover).
fn encode(f: &Forged) -> Option<Vec<u8>> {
    let mut b = Vec::new();
    match *f {
        Forged::Data {
            session,
            seq,
            len,
            offset,
            pos,
            payload,
            flags,
        } => {
            let c = Common {
                flags,
                ..common(Kind::Data, session)
            };
            let payload = vec![0xA5u8; payload as usize];
            frame::put_data(&mut b, &c, seq, len, offset, pos, &payload);
        }
        Forged::Heartbeat {
            session,
            next,
            oldest,
            history,
        } => frame::put_heartbeat(
            &mut b,
            &common(Kind::Heartbeat, session),
            next,
            oldest,
            0,
            history,
        ),
        Forged::Bye { session, next } => frame::put_bye(&mut b, &common(Kind::Bye, session), next),
        _ => return None,
    }
    let valid = decode(&b).is_ok();
    valid.then_some(b)
}

fn arbitrary_nak() -> impl Strategy<Value = Vec<NakEntry>> {
    proptest::collection::vec(
        (interesting_u64(), any::<u32>(), any::<u32>()).prop_map(|(seq, from, to)| NakEntry {
            seq: seq % 8,
            from,
            to,
        }),
        0..90,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Arbitrary frames of genuine and made-up sessions, with lying sequence numbers, lengths,
    /// positions and heartbeats: the receiver's accounting stays exact and within its bounds
    /// after every step, and every step returns.
    #[test]
    fn the_receiver_stays_bounded_under_arbitrary_frames(
        steps in proptest::collection::vec(forged(), 1..300),
        reliable in any::<bool>(),
        history in prop_oneof![Just(0u64), 1u64..20, Just(super::receiver::MAX_HISTORY)],
    ) {
        let cfg = ReceiverConfig {
            reliable,
            buffer_bytes: 8 << 20,
            max_sessions: 4,
            history,
            ..ReceiverConfig::default()
        };
        let mut rx = Receiver::new(7, TOPIC, cfg);
        let mut sink = Counter::default();
        let mut now = 0u64;
        for step in &steps {
            now += 10_000;
            match step {
                Forged::Tick(dt) => {
                    now += dt;
                    rx.tick(now, &mut sink);
                }
                Forged::Take => {
                    if let Some(d) = rx.take(now) {
                        rx.recycle(d.data);
                    }
                }
                f => {
                    if let Some(bytes) = encode(f) {
                        rx.on_frame(now, &decode(&bytes).unwrap());
                    }
                }
            }
            if let Err(e) = rx.check_bounds() {
                prop_assert!(false, "after {:?}: {}", step, e);
            }
            prop_assert!(sink.datagrams <= 64 * (steps.len() as u64 + 1) * 4);
        }
    }

    /// Arbitrary NAKs and STATUS frames at a sender with retained messages: each NAK is
    /// answered with at most the per-NAK cap, repairs to one receiver never exceed its budget
    /// (a window per refill period), and unknown receivers get nothing.
    #[test]
    fn the_sender_answers_arbitrary_naks_within_its_caps(
        naks in proptest::collection::vec((arbitrary_nak(), any::<bool>(), 0u64..3_000_000), 1..30),
    ) {
        let mut tx = sender_with_history(6, 200_000);
        let window = (1u64 << 30).min(SenderConfig::default().window_bytes);
        let mut now = 0u64;
        for (entries, known, dt) in &naks {
            now += dt;
            let mut sink = Counter::default();
            let before = tx.stats().retransmitted_frames;
            let id = if *known { 9 } else { 10 };
            tx.handle(now, &decode(&nak(id, entries)).unwrap(), &mut sink);
            let frames = tx.stats().retransmitted_frames - before;
            prop_assert!(frames as usize <= MAX_REPAIR_FRAMES_PER_NAK);
            prop_assert!(sink.to_receivers <= window);
            if !known {
                prop_assert_eq!(sink.to_receivers, 0);
            }
        }
    }
}
