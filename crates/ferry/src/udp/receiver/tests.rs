//! The protocol core driven end to end through a simulated network: seeded loss, duplication and
//! reordering, time advanced by the test. No sockets, no sleeps.

use super::*;
use crate::udp::frame::decode;
use crate::udp::sender::{Sender, SenderConfig, SenderStats};
use proptest::prelude::*;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 1.0 < p
    }
}

#[derive(Clone, Copy)]
struct Impair {
    loss: f64,
    dup: f64,
    reorder: f64,
}

/// The share of datagrams lost, duplicated and reordered.
const fn impair(loss: f64, dup: f64, reorder: f64) -> Impair {
    Impair { loss, dup, reorder }
}

const CLEAN: Impair = impair(0.0, 0.0, 0.0);

/// A fifth lost, some duplicated, a tenth reordered.
const LOSSY: Impair = impair(0.2, 0.05, 0.1);

/// Datagrams in flight: (deliver at, to the receiver?, bytes).
struct Net {
    rng: Rng,
    flight: Vec<(u64, bool, Vec<u8>)>,
    impair: Impair,
    now: u64,
    to_receiver: bool,
    sent: u64,
}

impl Sink for Net {
    fn send(&mut self, dest: Dest<'_>, data: &mut [u8], segment: usize) {
        let to_receiver = !matches!(dest, Dest::Session(_));
        assert_eq!(to_receiver, self.to_receiver, "frames go the right way");
        for d in data.chunks(segment) {
            self.sent += 1;
            assert!(d.len() <= 1472, "never more than one MTU");
            if self.rng.chance(self.impair.loss) {
                continue;
            }
            let copies = if self.rng.chance(self.impair.dup) {
                2
            } else {
                1
            };
            for _ in 0..copies {
                let delay = if self.rng.chance(self.impair.reorder) {
                    300_000
                } else {
                    50_000
                };
                self.flight
                    .push((self.now + delay, to_receiver, d.to_vec()));
            }
        }
    }
}

impl Net {
    /// Hands every datagram in flight to `rx` at `now`.
    fn deliver_all(&mut self, rx: &mut Receiver, now: u64) {
        for (_, _, bytes) in std::mem::take(&mut self.flight) {
            rx.on_frame(now, &decode(&bytes).unwrap());
        }
    }

    fn clean(seed: u64) -> Net {
        Net {
            rng: Rng(seed),
            flight: Vec::new(),
            impair: CLEAN,
            now: 0,
            to_receiver: true,
            sent: 0,
        }
    }
}

/// A STATUS frame with `flags` from `receiver` of `topic`, `session`: everything up to
/// `consumed_pos` arrived and was consumed.
fn status_frame(
    flags: u32,
    (topic, session): (u64, u64),
    receiver: u64,
    consumed_pos: u64,
    window: u64,
    consumed_seq: u64,
) -> Vec<u8> {
    let mut b = Vec::new();
    let c = Common {
        kind: Kind::Status,
        flags,
        topic,
        session,
    };
    frame::put_status(
        &mut b,
        &c,
        receiver,
        consumed_pos,
        window,
        consumed_seq,
        0,
        consumed_pos,
        consumed_pos,
    );
    b
}

/// A reliable STATUS frame from receiver 9 of topic 1, session 2.
fn status(consumed_pos: u64, window: u64, consumed_seq: u64) -> Vec<u8> {
    status_frame(FLAG_RELIABLE, (1, 2), 9, consumed_pos, window, consumed_seq)
}

/// A reliable STATUS frame from `receiver` of topic 42, session 1001.
fn status_for(receiver: u64, consumed_pos: u64, window: u64, consumed_seq: u64) -> Vec<u8> {
    status_frame(
        FLAG_RELIABLE,
        (42, 1001),
        receiver,
        consumed_pos,
        window,
        consumed_seq,
    )
}

/// A reliable NAK frame from receiver 9 of topic 42, session 1001.
fn nak(entries: &[NakEntry]) -> Vec<u8> {
    let mut b = Vec::new();
    let c = Common {
        kind: Kind::Nak,
        flags: FLAG_RELIABLE,
        topic: 42,
        session: 1001,
    };
    frame::put_nak(&mut b, &c, 9, entries);
    b
}

/// A DATA frame with `flags` of topic `topic`, session `session` (stream position 0).
fn data_frame(
    flags: u32,
    (topic, session): (u64, u64),
    seq: u64,
    msg_len: u32,
    offset: u32,
    payload: &[u8],
) -> Vec<u8> {
    let mut b = Vec::new();
    let c = Common {
        kind: Kind::Data,
        flags,
        topic,
        session,
    };
    frame::put_data(&mut b, &c, seq, msg_len, offset, 0, payload);
    b
}

fn payload(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq as usize * 7 + i * 13) as u8)
        .collect()
}

struct Outcome {
    delivered: Vec<(u64, usize)>,
    lost: u64,
    stats: ReceiverStats,
    sender: SenderStats,
}

/// Sends `sizes` from one sender to one receiver through `impair`, then heals the network and
/// lets both sides settle. Checks every delivered byte.
fn run(sizes: &[usize], reliable: bool, impair: Impair, seed: u64, window: u64) -> Outcome {
    run_offering(sizes, reliable, impair, seed, window, false)
}

/// As `run`; with `queue`, the application offers as many messages per step as the sender's
/// queue takes (a publisher faster than the network: they leave batched).
fn run_offering(
    sizes: &[usize],
    reliable: bool,
    impair: Impair,
    seed: u64,
    window: u64,
    queue: bool,
) -> Outcome {
    let scfg = SenderConfig {
        reliable,
        window_bytes: 8 << 20,
        ..SenderConfig::default()
    };
    let rcfg = ReceiverConfig {
        reliable,
        max_message: 1 << 20,
        window,
        ..ReceiverConfig::default()
    };
    let mut tx = Sender::new(42, 1001, scfg);
    let mut rx = Receiver::new(7, 42, rcfg);
    // Clean until discovery pairs the two before any data flows: the publisher's first
    // heartbeat reaches the receiver, which joins at message 0 (a subscriber receives what is
    // sent after it joined).
    let mut net = Net::clean(seed);
    tx.tick(0, &mut net);
    net.deliver_all(&mut rx, 0);
    // The socket layer finds the publisher registered at the address it sends from.
    rx.verify(1001);
    net.impair = impair;
    let mut delivered = Vec::new();
    let mut next_msg = 0;
    let mut bye_sent = false;
    let step = 20_000; // 20 µs
    let mut quiet_since = None;
    for round in 0..2_000_000u64 {
        net.now = round * step;
        let now = net.now;
        if next_msg == sizes.len() && !tx.busy() && net.flight.is_empty() && quiet_since.is_none() {
            quiet_since = Some(now);
        }
        // Heal the network once everything was offered, so the end is deterministic.
        if next_msg == sizes.len() && !tx.busy() {
            net.impair = CLEAN;
        }
        net.to_receiver = true;
        if !tx.busy() && next_msg < sizes.len() {
            tx.offer(&payload(next_msg as u64, sizes[next_msg]))
                .unwrap();
            next_msg += 1;
        }
        while queue && next_msg < sizes.len() && tx.can_take(sizes[next_msg]) {
            tx.offer(&payload(next_msg as u64, sizes[next_msg]))
                .unwrap();
            next_msg += 1;
        }
        tx.pump(now, &mut net);
        tx.tick(now, &mut net);
        if next_msg == sizes.len() && !tx.busy() && !bye_sent {
            tx.close(now, &mut net);
            bye_sent = true;
        }
        net.to_receiver = false;
        rx.tick(now, &mut net);
        // Deliver what is due.
        let (due, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut net.flight)
            .into_iter()
            .partition(|d| d.0 <= now);
        net.flight = rest;
        for (_, to_receiver, bytes) in due {
            let f = decode(&bytes).expect("valid frame");
            if to_receiver {
                rx.on_frame(now, &f);
            } else {
                net.to_receiver = true;
                tx.handle(now, &f, &mut net);
                net.to_receiver = false;
            }
        }
        if round % 64 == 0 {
            rx.check_bounds().unwrap();
        }
        while let Some(d) = rx.take(now) {
            assert_eq!(
                d.data,
                payload(d.seq, sizes[d.seq as usize]),
                "message {} intact",
                d.seq
            );
            delivered.push((d.seq, d.data.len()));
            rx.recycle(d.data);
        }
        if bye_sent && rx.sessions() == 0 && net.flight.is_empty() {
            break;
        }
        if matches!(quiet_since, Some(q) if now > q + 5_000_000_000) {
            panic!(
                "did not settle: {} delivered of {}",
                delivered.len(),
                sizes.len()
            );
        }
    }
    Outcome {
        delivered,
        lost: rx.stats().lost,
        stats: rx.stats(),
        sender: tx.stats(),
    }
}

/// Whether every message was delivered, in order from 0 (none skipped).
fn in_order(o: &Outcome) -> bool {
    o.delivered.iter().enumerate().all(|(i, d)| d.0 == i as u64)
}

/// A sender of topic 42, session 1001, that sent its first heartbeat, and receiver 9 of the
/// topic; what the sender sent is in flight.
fn sender_and_receiver() -> (Sender, Receiver, Net) {
    let mut tx = Sender::new(42, 1001, SenderConfig::default());
    let rx = Receiver::new(9, 42, ReceiverConfig::default());
    let mut net = Net::clean(1);
    tx.tick(0, &mut net);
    (tx, rx, net)
}

#[test]
fn ranges_merge_and_find_gaps() {
    let mut r = Ranges::default();
    assert!(r.insert(10, 20));
    assert!(r.insert(30, 40));
    assert!(!r.insert(12, 18));
    assert_eq!(
        r.gaps(50).collect::<Vec<_>>(),
        vec![(0, 10), (20, 30), (40, 50)]
    );
    assert!(r.insert(0, 10));
    assert!(r.insert(15, 35));
    assert!(r.insert(40, 50));
    assert!(r.covers(50));
    assert_eq!(r.gaps(50).count(), 0);
}

#[test]
fn clean_network_delivers_everything_in_order() {
    let sizes: Vec<usize> = (0..200).map(|i| (i * 977) % 9000).collect();
    let o = run(&sizes, true, CLEAN, 1, 1 << 20);
    assert_eq!(o.delivered.len(), 200);
    assert!(in_order(&o));
    assert_eq!((o.lost, o.stats.naks_sent), (0, 0));
}

#[test]
fn queued_small_messages_share_datagrams_and_arrive_exactly() {
    // Small messages, some empty, with now and then one that needs several datagrams.
    let sizes: Vec<usize> = (0..5000)
        .map(|i| match i % 97 {
            0 => 5000,
            1 => 0,
            k => (k * 13) % 300,
        })
        .collect();
    for reliable in [true, false] {
        let o = run_offering(&sizes, reliable, CLEAN, 3, 1 << 20, true);
        assert_eq!(
            o.delivered.len(),
            sizes.len(),
            "reliable {reliable}: {:?}",
            o.stats
        );
        assert!(in_order(&o));
        assert_eq!(o.lost, 0);
        let s = o.sender;
        assert!(s.batches > 0, "{s:?}");
        assert!(
            s.batched_messages > 4 * s.batches,
            "batches carry many messages: {s:?}"
        );
        assert!(
            s.frames < sizes.len() as u64 / 4,
            "far fewer datagrams than messages: {s:?}"
        );
    }
}

#[test]
fn batched_messages_are_repaired_under_loss() {
    let sizes: Vec<usize> = (0..3000).map(|i| (i * 31) % 200).collect();
    let o = run_offering(&sizes, true, LOSSY, 11, 256 << 10, true);
    assert_eq!(
        o.delivered.len(),
        sizes.len(),
        "nothing lost: {:?}",
        o.stats
    );
    assert!(in_order(&o));
    assert!(o.sender.batches > 0 && o.stats.naks_sent > 0);
    // Latest delivery under the same loss: what is delivered is intact, the rest counted.
    let o = run_offering(&sizes, false, LOSSY, 11, 256 << 10, true);
    assert_eq!(o.delivered.len() as u64 + o.lost, sizes.len() as u64);
}

#[test]
fn reliable_repairs_20_percent_loss_with_duplicates_and_reordering() {
    let sizes: Vec<usize> = (0..300).map(|i| 1 + (i * 7919) % 40_000).collect();
    let o = run(&sizes, true, LOSSY, 7, 256 << 10);
    assert_eq!(o.delivered.len(), 300, "nothing lost: {:?}", o.stats);
    assert!(in_order(&o), "in order");
    assert_eq!(o.lost, 0);
    assert!(o.stats.naks_sent > 0 && o.stats.duplicates > 0);
}

#[test]
fn a_large_message_crosses_a_small_window_under_loss() {
    // 1 MiB through a 64 KiB window: flow control paces the fragments, NAKs fill the holes.
    let o = run(
        &[1 << 20, 10, 1 << 20],
        true,
        impair(0.05, 0.0, 0.05),
        3,
        64 << 10,
    );
    assert_eq!(
        o.delivered.iter().map(|d| d.1).collect::<Vec<_>>(),
        vec![1 << 20, 10, 1 << 20]
    );
}

#[test]
fn flow_control_never_lets_the_sender_run_past_the_window() {
    // Time stands still here: the pacer would hold the sender back long before the window.
    let cfg = SenderConfig {
        congestion: false,
        ..SenderConfig::default()
    };
    let mut tx = Sender::new(1, 2, cfg);
    let mut net = Net::clean(1);
    // A receiver that consumed nothing and allows 100 000 bytes.
    let st = status(0, 100_000, 0);
    tx.handle(0, &decode(&st).unwrap(), &mut net);
    tx.offer(&vec![0u8; 1 << 20]).unwrap();
    for _ in 0..100 {
        tx.pump(0, &mut net);
    }
    let sent_bytes: usize = net
        .flight
        .iter()
        .map(|d| d.2.len() - frame::DATA_HEADER)
        .sum();
    assert!(
        sent_bytes <= 100_000,
        "sent {sent_bytes} bytes into a 100 000-byte window"
    );
    assert!(sent_bytes > 90_000, "but used the window: {sent_bytes}");
    assert!(tx.busy() && tx.stats().flow_blocked > 0);
    // The receiver consumes: the sender may go on.
    let st = status(1 << 20, 100_000, 1);
    tx.handle(0, &decode(&st).unwrap(), &mut net);
    for _ in 0..100 {
        tx.pump(0, &mut net);
    }
    assert!(!tx.busy());
}

/// Frames the receiver sent (NAKs, STATUS) while ticking at `now`, decoded.
fn rx_tick(rx: &mut Receiver, now: u64) -> Vec<Vec<u8>> {
    let mut net = Net::clean(3);
    net.to_receiver = false;
    net.now = now;
    rx.tick(now, &mut net);
    net.flight.into_iter().map(|d| d.2).collect()
}

fn naks(frames: &[Vec<u8>]) -> Vec<NakEntry> {
    frames
        .iter()
        .filter_map(|b| match decode(b).unwrap() {
            Frame::Nak { entries, .. } => Some(entries.iter().collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn the_unsent_tail_of_a_window_blocked_message_is_not_nacked_nor_resent() {
    // A 1 MiB message through a 100 000-byte window: the receiver has its head, the rest is not
    // sent yet. That is not loss.
    let (mut tx, mut rx, mut net) = sender_and_receiver();
    tx.handle(0, &decode(&status_for(9, 0, 100_000, 0)).unwrap(), &mut net);
    tx.offer(&payload(0, 1 << 20)).unwrap();
    while tx.pump(0, &mut net) {}
    net.deliver_all(&mut rx, 0);
    // Long past the NAK delay, with the publisher's heartbeats arriving: nothing is missing.
    for ms in 1..50u64 {
        let now = ms * 1_000_000;
        tx.tick(now, &mut net);
        net.deliver_all(&mut rx, now);
        let out = rx_tick(&mut rx, now);
        assert!(naks(&out).is_empty(), "NAKed the unsent tail at {ms} ms");
    }
    // A NAK for it anyway (say, from an older receiver) resends only what went out once.
    let b = nak(&[NakEntry {
        seq: 0,
        from: 500_000,
        to: u32::MAX,
    }]);
    tx.handle(60_000_000, &decode(&b).unwrap(), &mut net);
    assert_eq!(tx.stats().retransmitted_frames, 0, "resent data never sent");
}

#[test]
fn a_nak_for_a_queued_message_is_not_answered_before_its_turn() {
    // The receiver's window lets the first message go; two more wait in the queue.
    let cfg = SenderConfig {
        congestion: false,
        ..SenderConfig::default()
    };
    let mut tx = Sender::new(42, 1001, cfg);
    let mut net = Net::clean(1);
    tx.handle(0, &decode(&status_for(9, 0, 1472, 0)).unwrap(), &mut net);
    tx.offer(&payload(0, 1400)).unwrap();
    tx.offer(&payload(1, 100)).unwrap();
    tx.offer(&payload(2, 100)).unwrap();
    assert!(!tx.pump(0, &mut net), "the window holds the queue");
    assert_eq!(net.flight.len(), 1);
    let whole = |seq| NakEntry {
        seq,
        from: 0,
        to: u32::MAX,
    };
    let b = nak(&[whole(1), whole(2)]);
    tx.handle(1_000_000, &decode(&b).unwrap(), &mut net);
    assert_eq!(net.flight.len(), 1, "nothing jumps the queue");
    assert_eq!(tx.stats().retransmitted_frames, 0);
    // Credit comes: both leave together, once.
    tx.handle(
        2_000_000,
        &decode(&status_for(9, 1400, 1472, 1)).unwrap(),
        &mut net,
    );
    assert!(tx.pump(2_000_000, &mut net));
    let last = decode(&net.flight.last().unwrap().2).unwrap();
    assert!(
        matches!(last, Frame::Batch { first_seq: 1, messages, .. } if messages.len() == 2),
        "{last:?}"
    );
}

#[test]
fn a_latest_receiver_that_stops_reading_does_not_hold_the_publisher() {
    let cfg = SenderConfig {
        reliable: false,
        ..SenderConfig::default()
    };
    let mut tx = Sender::new(42, 1001, cfg);
    let mut net = Net::clean(1);
    // A latest receiver reports once, then its application stops reading: no more reports.
    let b = status_frame(0, (42, 1001), 9, 0, 1 << 20, 0);
    tx.handle(0, &decode(&b).unwrap(), &mut net);
    let step = 100_000;
    let sent_at = |from: u64, until: u64, tx: &mut Sender, net: &mut Net| {
        let mut now = from;
        while now < until {
            if !tx.busy() {
                tx.offer(&[7; 60_000]).unwrap();
            }
            tx.pump(now, net);
            net.flight.clear();
            now += step;
        }
        tx.stats().messages
    };
    // Its reports pace the publisher at first: the window fills, and nothing says it emptied.
    let early = sent_at(0, 15_000_000, &mut tx, &mut net);
    assert!(early < 50, "paced by what the receiver reported: {early}");
    // Past the stall limit it no longer counts: one message per step goes out.
    let later = sent_at(40_000_000, 60_000_000, &mut tx, &mut net) - early;
    assert!(later > 150, "the publisher went on: {later} in 20 ms");
}

#[test]
fn a_lost_tail_is_found_by_the_heartbeat_and_repaired() {
    let (mut tx, mut rx, mut net) = sender_and_receiver();
    net.deliver_all(&mut rx, 0);
    tx.offer(&payload(0, 10_000)).unwrap();
    assert!(tx.pump(0, &mut net));
    // The last frame is lost; nothing comes after it.
    let mut frames: Vec<Vec<u8>> = std::mem::take(&mut net.flight)
        .into_iter()
        .map(|d| d.2)
        .collect();
    frames.pop();
    for b in &frames {
        rx.on_frame(0, &decode(b).unwrap());
    }
    assert!(
        naks(&rx_tick(&mut rx, 1_000_000)).is_empty(),
        "not yet known lost"
    );
    // The next heartbeat says message 0 went out whole: its tail is NAKed and repaired.
    let mut repaired = false;
    for ms in 1..200u64 {
        let now = ms * 1_000_000;
        tx.tick(now, &mut net);
        net.deliver_all(&mut rx, now);
        for b in rx_tick(&mut rx, now) {
            let mut back = Net::clean(4);
            tx.handle(now, &decode(&b).unwrap(), &mut back);
            for (_, _, bytes) in back.flight {
                rx.on_frame(now, &decode(&bytes).unwrap());
            }
        }
        if let Some(d) = rx.take(now) {
            assert_eq!(d.data, payload(0, 10_000));
            repaired = true;
            break;
        }
    }
    assert!(repaired, "the lost tail was never repaired");
    assert_eq!(tx.stats().retransmitted_frames, 1);
}

#[test]
fn a_timed_repair_shortens_the_nak_repeat() {
    let cfg = ReceiverConfig::default();
    let mut s = Receiver::new(9, 42, cfg.clone());
    let c = Common {
        kind: Kind::Heartbeat,
        flags: FLAG_RELIABLE,
        topic: 42,
        session: 5,
    };
    s.session(0, c, 0, 40);
    let sess = s.sessions.get_mut(&5).unwrap();
    assert_eq!(
        sess.nak_repeat_ns(&cfg),
        cfg.nak_repeat_ns,
        "untimed: the configured repeat"
    );
    sess.time_repair(100_000);
    assert_eq!(
        sess.nak_repeat_ns(&cfg),
        cfg.nak_repeat_min_ns,
        "fast repairs: the floor"
    );
    for _ in 0..100 {
        sess.time_repair(800_000);
    }
    let r = sess.nak_repeat_ns(&cfg);
    assert!(
        (3_000_000..=3_300_000).contains(&r),
        "4 × a smoothed 0.8 ms: {r}"
    );
}

#[test]
fn a_silent_receiver_stops_holding_the_sender() {
    let mut tx = Sender::new(1, 2, SenderConfig::default());
    let mut net = Net::clean(1);
    let st = status(0, 10_000, 0);
    tx.handle(0, &decode(&st).unwrap(), &mut net);
    tx.offer(&[0u8; 100_000]).unwrap();
    assert!(!tx.pump(0, &mut net));
    tx.tick(3_000_000_000, &mut net);
    assert_eq!(tx.stats().receivers_timed_out, 1);
    while !tx.pump(3_000_000_000, &mut net) {}
    assert_eq!(tx.retained(), 1, "kept for late joiners within the window");
}

#[test]
fn latest_counts_every_message_it_skips() {
    let sizes: Vec<usize> = (0..500).map(|i| 1 + (i * 31) % 5000).collect();
    let o = run(&sizes, false, impair(0.1, 0.02, 0.1), 11, 1 << 20);
    assert!(o.delivered.windows(2).all(|w| w[1].0 > w[0].0), "in order");
    assert_eq!(
        o.delivered.len() as u64 + o.lost,
        500,
        "delivered + lost = sent"
    );
    assert!(o.lost > 0);
}

#[test]
fn garbage_frames_change_nothing() {
    let mut rx = Receiver::new(1, 42, ReceiverConfig::default());
    // A fragment claiming a 2 GiB message: refused, nothing allocated.
    let b = data_frame(FLAG_RELIABLE, (42, 5), 0, 2 << 30, 0, b"x");
    rx.on_frame(0, &decode(&b).unwrap());
    assert_eq!(rx.stats().refused(), 1);
    // Another topic: ignored.
    let b = data_frame(0, (43, 5), 0, 1, 0, b"x");
    rx.on_frame(0, &decode(&b).unwrap());
    assert_eq!(
        rx.stats().frames,
        1,
        "only the first frame was for this topic"
    );
    // Inconsistent fragments of one message: the second is refused.
    let b = data_frame(0, (42, 6), 3, 10, 0, b"abc");
    rx.on_frame(0, &decode(&b).unwrap());
    let b = data_frame(0, (42, 6), 3, 20, 3, b"def");
    rx.on_frame(0, &decode(&b).unwrap());
    assert_eq!(rx.stats().refused(), 2);
    assert!(rx.take(0).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Any sizes, any pattern of loss, duplication and reordering: reliable delivery gives every
    /// message exactly, in order.
    #[test]
    fn reliable_reassembly_is_exact(
        sizes in proptest::collection::vec(0usize..30_000, 1..40),
        loss in 0.0f64..0.3, dup in 0.0f64..0.2, reorder in 0.0f64..0.3, seed in any::<u64>(),
    ) {
        let o = run(&sizes, true, Impair { loss, dup, reorder }, seed, 128 << 10);
        prop_assert_eq!(o.delivered.len(), sizes.len());
        prop_assert_eq!(o.lost, 0);
    }

    /// Latest delivery: every delivered message is exact (checked in `run`), in order, and every
    /// other message is counted lost.
    #[test]
    fn latest_reassembly_is_exact_or_counted(
        sizes in proptest::collection::vec(0usize..30_000, 1..40),
        loss in 0.0f64..0.3, dup in 0.0f64..0.2, reorder in 0.0f64..0.3, seed in any::<u64>(),
    ) {
        let o = run(&sizes, false, Impair { loss, dup, reorder }, seed, 128 << 10);
        prop_assert!(o.delivered.windows(2).all(|w| w[1].0 > w[0].0));
        prop_assert_eq!(o.delivered.len() as u64 + o.lost, sizes.len() as u64);
    }
}

#[test]
fn a_shunned_session_delivers_nothing_and_its_frames_are_counted() {
    let mut tx = Sender::new(
        42,
        1001,
        SenderConfig {
            reliable: false,
            ..SenderConfig::default()
        },
    );
    let mut net = Net::clean(3);
    tx.offer(&payload(0, 3000)).unwrap();
    tx.pump(0, &mut net);
    assert!(net.flight.len() >= 3, "a message of several fragments");
    let cfg = ReceiverConfig {
        reliable: false,
        max_message: 1 << 20,
        ..ReceiverConfig::default()
    };
    let (mut shunning, mut taking) = (
        Receiver::new(9, 42, cfg.clone()),
        Receiver::new(10, 42, cfg),
    );
    shunning.shun(1001);
    for (_, _, d) in &net.flight {
        let f = decode(d).unwrap();
        shunning.on_frame(60_000, &f);
        taking.on_frame(60_000, &f);
    }
    assert!(
        taking.take(60_000).is_some(),
        "the same frames deliver elsewhere"
    );
    assert!(shunning.take(60_000).is_none());
    assert_eq!(shunning.sessions(), 0);
    assert_eq!(
        shunning.stats().refusals.get(Refusal::OtherType),
        net.flight.len() as u64
    );
}
