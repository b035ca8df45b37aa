//! NAK and STATUS datagrams, arbitrary and structured, into a sender core with a registered
//! receiver and retained messages, between ticks, new messages and receivers coming and going
//! (the input format is `ferry_fuzz::TxOp`): whatever arrives, it never panics, answers one
//! datagram with at most `MAX_REPAIR_FRAMES_PER_NAK` datagrams, repairs only to the receiver
//! that asked, tracks at most `max_receivers`, and every frame it sends is valid and carries the
//! bytes of the message it names.
#![no_main]

use ferry::udp::frame::{
    self, decode, Common, Frame, Kind, FLAG_HISTORY, FLAG_RELIABLE, FLAG_RETRANSMIT,
};
use ferry::udp::sender::{Dest, Sender, SenderConfig, Sink, MAX_REPAIR_FRAMES_PER_NAK};
use ferry_fuzz::{message, sent_frames, Bytes, TxOp, TxSetup, KNOWN_RECEIVER, SESSION, TOPIC};
use libfuzzer_sys::fuzz_target;

/// Checks every datagram the sender sends against the messages it was given.
struct Checked {
    max_datagram: usize,
    reliable: bool,
    /// Message `seq` and its stream position.
    messages: Vec<(Vec<u8>, u64)>,
    /// Bytes sent and their destinations since the last `clear`.
    sent: u64,
    dests: Vec<To>,
}

/// Where a send went, owned: to every subscriber (all of them, or all but latest ones left out
/// of new data), or to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum To {
    Everyone,
    Receiver(u64),
    Session(u64),
}

impl From<Dest<'_>> for To {
    fn from(dest: Dest<'_>) -> To {
        match dest {
            Dest::All | Dest::AllExcept(_) => To::Everyone,
            Dest::Receiver(id) => To::Receiver(id),
            Dest::Session(id) => To::Session(id),
        }
    }
}

impl Checked {
    fn clear(&mut self) {
        self.sent = 0;
        self.dests.clear();
    }
}

impl Sink for Checked {
    fn send(&mut self, dest: Dest<'_>, data: &mut [u8], segment: usize) {
        for f in sent_frames("sender", data, segment, self.max_datagram) {
            let c = *f.common();
            assert_eq!(c.session, SESSION);
            match f {
                Frame::Data {
                    seq,
                    msg_len,
                    offset,
                    stream_pos,
                    payload,
                    ..
                } => {
                    let (msg, pos) = self
                        .messages
                        .get(seq as usize)
                        .unwrap_or_else(|| panic!("DATA of message {seq}, never offered"));
                    assert_eq!(msg_len as usize, msg.len(), "message {seq}");
                    assert_eq!(stream_pos, *pos, "message {seq}");
                    let at = offset as usize;
                    assert_eq!(
                        payload,
                        &msg[at..at + payload.len()],
                        "message {seq} at {at}"
                    );
                    assert_eq!(c.flags & FLAG_RELIABLE != 0, self.reliable);
                    let repair = c.flags & FLAG_RETRANSMIT != 0;
                    assert_eq!(repair, matches!(dest, Dest::Receiver(_)), "{dest:?}");
                }
                Frame::Batch {
                    first_seq,
                    stream_pos,
                    messages,
                    ..
                } => {
                    // Whole messages, new data to everyone (latest receivers that fell behind
                    // left out), each where the stream has it.
                    assert_eq!(To::from(dest), To::Everyone);
                    assert_eq!(c.flags & FLAG_RETRANSMIT, 0);
                    assert!(messages.len() >= 2, "a batch of one");
                    for (i, at, bytes) in messages.iter() {
                        let seq = first_seq + i;
                        let (msg, pos) = self
                            .messages
                            .get(seq as usize)
                            .unwrap_or_else(|| panic!("batched message {seq}, never offered"));
                        assert_eq!((bytes, stream_pos + at), (&msg[..], *pos), "message {seq}");
                    }
                }
                // To everyone, or to a receiver that joined and asked for the history.
                Frame::Heartbeat { .. } => {
                    assert!(matches!(dest, Dest::All | Dest::Receiver(_)), "{dest:?}")
                }
                Frame::Bye { .. } => assert_eq!(dest, Dest::All),
                f => panic!("a sender sent {f:?}"),
            }
        }
        self.sent += data.len() as u64;
        self.dests.push(dest.into());
    }
}

fn common(kind: Kind, flags: u32) -> Common {
    Common {
        kind,
        flags,
        topic: TOPIC,
        session: SESSION,
    }
}

/// Offers message `seq` if the sender's queue takes it, then sends what credit allows.
fn offer(tx: &mut Sender, sink: &mut Checked, now: u64, len: usize) {
    if tx.can_take(len) {
        let seq = tx.next_seq();
        let pos = sink.messages.last().map_or(0, |(m, p)| p + m.len() as u64);
        sink.messages.push((message(seq, len), pos));
        let msg = &sink.messages[seq as usize].0;
        assert_eq!(tx.offer(msg), Ok(seq));
    }
    tx.pump_while_credit(now, sink);
}

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let setup = TxSetup::read(&mut input);
    let cfg = SenderConfig {
        max_datagram: setup.max_datagram,
        reliable: setup.reliable,
        max_receivers: setup.max_receivers,
        history: setup.keep,
        ..SenderConfig::default()
    };
    let mut sink = Checked {
        max_datagram: cfg.max_datagram,
        reliable: cfg.reliable,
        messages: Vec::new(),
        sent: 0,
        dests: Vec::new(),
    };
    let mut tx = Sender::new(TOPIC, SESSION, cfg.clone());
    let mut now = 0u64;
    // The history: a registered reliable receiver that grants credit and reports everything
    // arrived (so the congestion window stays open) but consumes nothing, so that everything
    // sent stays retained. Time moves a millisecond per pump: the pacer lets a run go each time.
    tx.expect_receiver(u64::from(KNOWN_RECEIVER), true, now);
    let mut status = Vec::new();
    frame::put_status(
        &mut status,
        &common(Kind::Status, FLAG_RELIABLE),
        u64::from(KNOWN_RECEIVER),
        0,
        1 << 30,
        0,
        0,
        u64::MAX,
        u64::MAX,
    );
    for k in 0..setup.messages {
        offer(&mut tx, &mut sink, now, setup.length(k));
        for _ in 0..100_000 {
            tx.handle(now, &decode(&status).unwrap(), &mut sink);
            if !tx.busy() {
                break;
            }
            now += 1_000_000;
            tx.pump_while_credit(now, &mut sink);
        }
        assert!(!tx.busy(), "the history is sent");
    }

    let cap = (MAX_REPAIR_FRAMES_PER_NAK * cfg.max_datagram) as u64;
    let mut buf = Vec::new();
    while let Some(op) = TxOp::read(&mut input) {
        now += 1_000;
        sink.clear();
        buf.clear();
        match op {
            TxOp::Datagram(d) => buf.extend_from_slice(d),
            TxOp::Nak { receiver, entries } => {
                frame::put_nak(&mut buf, &common(Kind::Nak, 0), receiver.into(), &entries)
            }
            TxOp::Status {
                receiver,
                reliable,
                consumed_pos,
                window,
                consumed_seq,
            } => frame::put_status(
                &mut buf,
                &common(Kind::Status, if reliable { FLAG_RELIABLE } else { 0 }),
                receiver.into(),
                consumed_pos,
                window,
                consumed_seq,
                0,
                consumed_pos,
                consumed_pos,
            ),
            TxOp::Tick(us) => {
                now += u64::from(us) * 1_000;
                tx.tick(now, &mut sink);
            }
            TxOp::Offer(len) => offer(&mut tx, &mut sink, now, len.into()),
            TxOp::Expect { receiver, reliable } => {
                tx.expect_receiver(receiver.into(), reliable, now)
            }
            TxOp::Forget(receiver) => tx.forget_receiver(receiver.into()),
        }
        if !buf.is_empty() {
            if let Ok(f) = decode(&buf) {
                tx.handle(now, &f, &mut sink);
                assert!(
                    sink.sent <= cap,
                    "{} bytes answered one datagram, the cap is {cap}",
                    sink.sent
                );
                match f {
                    Frame::Nak { receiver, .. } => {
                        assert!(sink.dests.iter().all(|d| *d == To::Receiver(receiver)));
                    }
                    // A joiner's STATUS: one heartbeat to that receiver, smaller than the
                    // STATUS.
                    Frame::Status {
                        common, receiver, ..
                    } if common.flags & FLAG_HISTORY != 0 => {
                        assert!(sink.dests.iter().all(|d| *d == To::Receiver(receiver)));
                        assert!(sink.sent < buf.len() as u64, "{} bytes", sink.sent);
                    }
                    _ => assert_eq!(sink.sent, 0, "only NAKs and joiners are answered"),
                }
            }
        }
        let (reliable, latest) = tx.receiver_counts();
        assert!(
            reliable + latest <= cfg.max_receivers,
            "{} receivers, the limit is {}",
            reliable + latest,
            cfg.max_receivers
        );
    }
});
