//! Writes the seed corpus, `corpus/<target>/seed-*`: a handful of valid inputs per target, built
//! with ferry's own encoders, for libFuzzer to mutate from (it finds the rest of the formats by
//! itself, but much later). Run from `fuzz/` after a change to the wire formats or to the input
//! formats in `src/lib.rs`, and commit the result:
//!
//! ```sh
//! cargo run --locked --example seeds
//! ```

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

use ferry::udp::discovery::{decode_message, Announcement, Entry, Message, Role};
use ferry::udp::frame::{self, decode, Common, Kind, NakEntry, FLAG_HISTORY, FLAG_RELIABLE};
use ferry_fuzz::{
    message, Bytes, RingOp, RingSetup, RxOp, RxSetup, TxOp, TxSetup, KNOWN_RECEIVER, RECEIVER_ID,
    RING_CAPACITIES, SESSION, TOPIC,
};

fn common(kind: Kind, session: u64) -> Common {
    Common {
        kind,
        flags: FLAG_RELIABLE,
        topic: TOPIC,
        session,
    }
}

/// The DATA frames of message `seq` (at stream position `pos`), in fragments of `frag` bytes.
fn fragments(session: u64, seq: u64, pos: u64, msg: &[u8], frag: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let end = (offset + frag).min(msg.len());
        let mut b = Vec::new();
        frame::put_data(
            &mut b,
            &common(Kind::Data, session),
            seq,
            msg.len() as u32,
            offset as u32,
            pos,
            &msg[offset..end],
        );
        decode(&b).expect("a valid DATA frame");
        out.push(b);
        offset = end;
        if offset >= msg.len() {
            return out;
        }
    }
}

fn heartbeat(session: u64, next: u64, oldest: u64) -> Vec<u8> {
    history_heartbeat(session, next, oldest, next)
}

/// A heartbeat saying the session keeps history from `history_from`.
fn history_heartbeat(session: u64, next: u64, oldest: u64, history_from: u64) -> Vec<u8> {
    let mut b = Vec::new();
    let c = common(Kind::Heartbeat, session);
    frame::put_heartbeat(&mut b, &c, next, oldest, 0, history_from);
    b
}

fn bye(session: u64, next: u64) -> Vec<u8> {
    let mut b = Vec::new();
    frame::put_bye(&mut b, &common(Kind::Bye, session), next);
    b
}

fn nak(receiver: u64, entries: &[NakEntry]) -> Vec<u8> {
    let mut b = Vec::new();
    frame::put_nak(&mut b, &common(Kind::Nak, SESSION), receiver, entries);
    b
}

fn status(receiver: u64, pos: u64, window: u64, seq: u64) -> Vec<u8> {
    let mut b = Vec::new();
    frame::put_status(
        &mut b,
        &common(Kind::Status, SESSION),
        receiver,
        pos,
        window,
        seq,
        0,
        pos,
        pos,
    );
    b
}

fn whole(seq: u64) -> NakEntry {
    NakEntry {
        seq,
        from: 0,
        to: u32::MAX,
    }
}

fn frame_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let msg = message(0, 10);
    vec![
        ("data", fragments(SESSION, 3, 100, &msg, 6).remove(1)),
        ("data-empty", fragments(SESSION, 4, 110, &[], 6).remove(0)),
        ("heartbeat", heartbeat(SESSION, 10, 3)),
        (
            "nak",
            nak(
                RECEIVER_ID,
                &[
                    whole(1),
                    NakEntry {
                        seq: 4,
                        from: 1424,
                        to: 2848,
                    },
                ],
            ),
        ),
        ("status", status(RECEIVER_ID, 12, 1 << 20, 3)),
        ("bye", bye(SESSION, 99)),
        ("batch", batch(SESSION, 5, 120, &[&msg, b"", &msg[..3]], 4)),
    ]
}

/// A BATCH of `msgs` from message `seq` at stream position `pos`, with `pad` zero bytes after.
fn batch(session: u64, seq: u64, pos: u64, msgs: &[&[u8]], pad: usize) -> Vec<u8> {
    let mut b = Vec::new();
    let c = common(Kind::Batch, session);
    frame::put_batch_header(&mut b, &c, seq, msgs.len() as u32, pos);
    for m in msgs {
        frame::put_batched(&mut b, m);
    }
    b.resize(b.len() + pad, 0);
    decode(&b).expect("a valid BATCH frame");
    b
}

fn announcement(entries: usize) -> Announcement {
    let topics = ["lidar/points", "camera_front.raw", "t"];
    Announcement {
        host: 0x0123_4567_89AB_CDEF,
        domain: "default".into(),
        entries: (0..entries)
            .map(|i| Entry {
                role: if i % 2 == 0 {
                    Role::Publisher
                } else {
                    Role::Subscriber
                },
                topic: topics[i % topics.len()].into(),
                port: 40_000 + i as u16,
                id: 0xF00 + i as u64,
                reliable: i % 3 != 2,
                max_message: if i % 2 == 0 { 0 } else { 1 << 20 },
                type_hash: 0,
            })
            .collect(),
    }
}

fn discovery_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let seeds = vec![
        ("announce", Message::Announce(announcement(3))),
        ("announce-empty", Message::Announce(announcement(0))),
        ("register", Message::Register),
        (
            "relay-v4",
            Message::Relay {
                source: SocketAddr::new(Ipv4Addr::new(192, 168, 1, 20).into(), 7650),
                announcement: announcement(2),
            },
        ),
        (
            "relay-v6",
            Message::Relay {
                source: SocketAddr::new(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2).into(), 41_000),
                announcement: announcement(1),
            },
        ),
    ];
    seeds
        .into_iter()
        .map(|(name, m)| {
            let b = m.encode();
            assert_eq!(decode_message(&b), Ok(m), "{name}");
            (name, b)
        })
        .collect()
}

fn rx_input(setup: RxSetup, ops: &[RxOp<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    setup.write(&mut out);
    ops.iter().for_each(|op| op.write(&mut out));
    let mut b = Bytes(&out);
    assert_eq!(RxSetup::read(&mut b), setup);
    for op in ops {
        assert_eq!(RxOp::read(&mut b).as_ref(), Some(op));
    }
    assert!(b.0.is_empty());
    out
}

fn receiver_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let reliable = RxSetup {
        reliable: true,
        max_sessions: 2,
        buffer_bytes: 256 << 10,
        history: 0,
    };
    let latest = RxSetup {
        reliable: false,
        max_sessions: 4,
        buffer_bytes: 16 << 10,
        history: 0,
    };
    let (a, b) = (message(0, 1000), message(1, 300));
    let fa = fragments(SESSION, 0, 0, &a, 400);
    let fb = fragments(SESSION, 1, 1000, &b, 400);
    let other = fragments(0xB0B, 0, 0, &b, 100);
    let hb = heartbeat(SESSION, 2, 0);
    // Messages 0 and 1 in one batch, 3 and 4 in another; message 2 (5 bytes at 30) goes alone.
    let batched = [
        batch(SESSION, 0, 0, &[&b[..10], &b[..20]], 0),
        batch(SESSION, 3, 35, &[&b[..7], b""], 9),
    ];
    let end = bye(SESSION, 2);
    vec![
        (
            "in-order",
            rx_input(
                reliable,
                &[
                    RxOp::Datagram(&fa[0]),
                    RxOp::Datagram(&fa[1]),
                    RxOp::Datagram(&fa[2]),
                    RxOp::Verify(SESSION),
                    RxOp::Take,
                    RxOp::Datagram(&fb[0]),
                    RxOp::Tick(2_000),
                    RxOp::Take,
                    RxOp::Datagram(&end),
                    RxOp::Tick(1_000),
                ],
            ),
        ),
        (
            "loss-and-repair",
            rx_input(
                reliable,
                &[
                    RxOp::Datagram(&fa[0]),
                    RxOp::Datagram(&fa[2]),
                    RxOp::Datagram(&fb[0]),
                    RxOp::Tick(300),
                    RxOp::Tick(6_000),
                    RxOp::Datagram(&hb),
                    RxOp::Datagram(&fa[1]),
                    RxOp::Take,
                    RxOp::Take,
                    RxOp::Tick(30_000),
                ],
            ),
        ),
        (
            "batched-with-a-gap",
            rx_input(
                reliable,
                &[
                    RxOp::Datagram(&batched[0]),
                    RxOp::Verify(SESSION),
                    RxOp::Take,
                    RxOp::Datagram(&batched[1]),
                    RxOp::Tick(6_000),
                    RxOp::Take,
                    RxOp::Datagram(&fragments(SESSION, 2, 30, &b[..5], 400)[0]),
                    RxOp::Take,
                    RxOp::Take,
                ],
            ),
        ),
        (
            // A latest receiver that asks for 3 messages of history joins at message 2: the
            // heartbeat says the history starts at 0, messages 0 and 1 come as repairs, then 2.
            "joiner-takes-its-history",
            rx_input(
                RxSetup {
                    history: 3,
                    ..latest
                },
                &[
                    RxOp::Datagram(&history_heartbeat(SESSION, 2, 0, 0)),
                    RxOp::Verify(SESSION),
                    RxOp::Tick(300),
                    RxOp::Datagram(&fragments(SESSION, 2, 30, &b[..5], 400)[0]),
                    RxOp::Datagram(&fa[1]),
                    RxOp::Datagram(&fa[0]),
                    RxOp::Datagram(&fa[2]),
                    RxOp::Take,
                    RxOp::Datagram(&fragments(SESSION, 1, 1000, &b[..30], 400)[0]),
                    RxOp::Take,
                    RxOp::Take,
                    RxOp::Tick(1_100_000),
                ],
            ),
        ),
        (
            "two-sessions-latest",
            rx_input(
                latest,
                &[
                    RxOp::Datagram(&other[1]),
                    RxOp::Datagram(&fb[0]),
                    RxOp::Datagram(&other[0]),
                    RxOp::Datagram(&other[2]),
                    RxOp::Take,
                    RxOp::Tick(60_000),
                    RxOp::Datagram(&fa[1]),
                    RxOp::Take,
                    RxOp::Datagram(&end),
                    RxOp::Tick(4_000_000),
                ],
            ),
        ),
    ]
}

fn tx_input(setup: TxSetup, ops: &[TxOp<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    setup.write(&mut out);
    ops.iter().for_each(|op| op.write(&mut out));
    let mut b = Bytes(&out);
    assert_eq!(TxSetup::read(&mut b), setup);
    for op in ops {
        assert_eq!(TxOp::read(&mut b).as_ref(), Some(op));
    }
    assert!(b.0.is_empty());
    out
}

fn sender_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let setup = TxSetup {
        max_datagram: 256,
        reliable: true,
        max_receivers: 2,
        messages: 4,
        first_length: 3,
        keep: 0,
    };
    let known = u64::from(KNOWN_RECEIVER);
    let raw_nak = nak(
        known,
        &[
            whole(0),
            NakEntry {
                seq: 2,
                from: 300,
                to: 900,
            },
            whole(0),
        ],
    );
    let raw_status = status(known, 100, 4096, 1);
    let stranger = status(0x5EED, 0, 1 << 20, 0);
    // A joiner's STATUS (it waits to learn where the history starts) and its history NAK.
    let mut joining = status(known, 0, 4096, 0);
    joining[4] |= FLAG_HISTORY as u8;
    let mut history_nak = nak(known, &[whole(1), whole(2), whole(3)]);
    history_nak[4] |= FLAG_HISTORY as u8;
    vec![
        (
            "naks",
            tx_input(
                setup,
                &[
                    TxOp::Nak {
                        receiver: KNOWN_RECEIVER,
                        entries: vec![
                            whole(1),
                            whole(3),
                            NakEntry {
                                seq: 2,
                                from: 0,
                                to: 500,
                            },
                        ],
                    },
                    TxOp::Datagram(&raw_nak),
                    TxOp::Tick(1_000),
                    TxOp::Nak {
                        receiver: KNOWN_RECEIVER,
                        entries: (0..40).map(|i| whole(i % 5)).collect(),
                    },
                ],
            ),
        ),
        (
            "status-and-naks",
            tx_input(
                TxSetup {
                    max_datagram: 64,
                    ..setup
                },
                &[
                    TxOp::Datagram(&raw_status),
                    TxOp::Offer(3000),
                    TxOp::Nak {
                        receiver: KNOWN_RECEIVER,
                        entries: vec![whole(4), whole(5)],
                    },
                    TxOp::Status {
                        receiver: KNOWN_RECEIVER,
                        reliable: true,
                        consumed_pos: 1 << 20,
                        window: 1 << 16,
                        consumed_seq: 3,
                    },
                    TxOp::Offer(10),
                    TxOp::Nak {
                        receiver: KNOWN_RECEIVER,
                        entries: vec![
                            whole(4),
                            NakEntry {
                                seq: 5,
                                from: 5,
                                to: 6,
                            },
                        ],
                    },
                ],
            ),
        ),
        (
            "receivers",
            tx_input(
                TxSetup {
                    max_datagram: 1472,
                    messages: 2,
                    first_length: 6,
                    ..setup
                },
                &[
                    TxOp::Datagram(&stranger),
                    TxOp::Expect {
                        receiver: 3,
                        reliable: false,
                    },
                    TxOp::Status {
                        receiver: 4,
                        reliable: true,
                        consumed_pos: 0,
                        window: 1 << 20,
                        consumed_seq: 0,
                    },
                    TxOp::Nak {
                        receiver: 4,
                        entries: vec![whole(0)],
                    },
                    TxOp::Forget(KNOWN_RECEIVER),
                    TxOp::Tick(2_500_000),
                    TxOp::Nak {
                        receiver: KNOWN_RECEIVER,
                        entries: vec![whole(1)],
                    },
                ],
            ),
        ),
        (
            // A latest publisher keeping 4 messages for joiners serves a joiner's history.
            "latest-history",
            tx_input(
                TxSetup {
                    max_datagram: 1472,
                    reliable: false,
                    messages: 6,
                    keep: 4,
                    ..setup
                },
                &[TxOp::Datagram(&joining), TxOp::Datagram(&history_nak)],
            ),
        ),
    ]
}

/// The ring target's inputs: honest streams a writer and a reader exchange, which the fuzzer
/// then corrupts.
fn ring_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let encode = |setup: RingSetup, ops: &[RingOp]| {
        let mut out = Vec::new();
        setup.write(&mut out);
        for op in ops {
            op.write(&mut out);
        }
        out
    };
    let small = RING_CAPACITIES[0];
    let large = RING_CAPACITIES[1];
    // Messages of a few sizes, each read as it comes, with a loan given back among them.
    let mut stream = Vec::new();
    for (i, len) in [8u64, 40, 300, 1000, 32, 2000, 16]
        .iter()
        .cycle()
        .take(40)
        .enumerate()
    {
        stream.push(RingOp::Write {
            len: *len,
            commit: i % 9 != 4,
        });
        stream.push(if i % 2 == 0 {
            RingOp::Read
        } else {
            RingOp::Step
        });
    }
    // Large messages a latest reader may hold, in a ring that has room for it.
    let mut held = Vec::new();
    for _ in 0..12 {
        held.push(RingOp::Write {
            len: 16 << 10,
            commit: true,
        });
        held.push(RingOp::Read);
        held.push(RingOp::WriterWaits { len: 16 << 10 });
    }
    // A stream, then lies in the header, then more reads and writes.
    let mut lies = stream[..20].to_vec();
    lies.extend([
        RingOp::Header {
            which: 0,
            value: 1 << 40,
        },
        RingOp::Read,
        RingOp::Scribble {
            word: 3,
            value: u64::MAX,
        },
        RingOp::Rejoin { slot: 1 },
        RingOp::ReaderSleeps,
        // Positions just below 2^64.
        RingOp::Header {
            which: 0,
            value: (u64::MAX - 63) & !7,
        },
        RingOp::Rejoin { slot: 2 },
        RingOp::Write {
            len: 0,
            commit: true,
        },
        RingOp::Read,
        RingOp::Read,
    ]);
    lies.extend_from_slice(&stream[20..]);
    let reliable = |capacity, max_len| RingSetup {
        reliable: true,
        capacity,
        max_len,
    };
    let latest = |capacity, max_len| RingSetup {
        reliable: false,
        capacity,
        max_len,
    };
    vec![
        ("reliable-small", encode(reliable(small, 2000), &stream)),
        ("reliable-window", encode(reliable(large, 4000), &stream)),
        ("latest-small", encode(latest(small, 2000), &stream)),
        ("latest-held", encode(latest(large, 16 << 10), &held)),
        ("reliable-lies", encode(reliable(large, 2000), &lies)),
    ]
}

fn main() -> std::io::Result<()> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (target, seeds) in [
        ("frame", frame_seeds()),
        ("discovery", discovery_seeds()),
        ("receiver", receiver_seeds()),
        ("sender", sender_seeds()),
        ("ring", ring_seeds()),
    ] {
        let dir = corpus.join(target);
        std::fs::create_dir_all(&dir)?;
        for (name, bytes) in seeds {
            let path = dir.join(format!("seed-{name}"));
            std::fs::write(&path, &bytes)?;
            println!("{} ({} bytes)", path.display(), bytes.len());
        }
    }
    Ok(())
}
