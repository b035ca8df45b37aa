//! What ferry's fuzz targets share: the input formats of the stateful targets (`receiver`,
//! `sender`: a byte stream of operations, each a tag byte and its fields) and the protocol
//! constants the targets and the seed generator (`examples/seeds.rs`) agree on.
//!
//! Every reader is total: a field cut short by the end of the input ends the stream, so any
//! bytes at all are a valid input (libFuzzer mutates freely), and the writers produce exactly
//! what the readers read (the seeds in `corpus/`).

use ferry::udp::frame::{decode, Frame, NakEntry};

/// The topic of the receiver and sender under test (frames of other topics are ignored).
pub const TOPIC: u64 = 42;
/// The sender's session.
pub const SESSION: u64 = 0xA11CE;
/// The receiver's id (in the NAK and STATUS frames it sends).
pub const RECEIVER_ID: u64 = 7;
/// The receiver the sender target registers (`expect_receiver`) before any input.
pub const KNOWN_RECEIVER: u8 = 9;

/// The datagrams of one `Sink::send` by the core under test (`who`), decoded: `segment` is within
/// `max_datagram`, and each datagram is a valid frame, exactly as long as the datagram, of
/// `TOPIC`.
pub fn sent_frames<'a>(
    who: &'static str,
    data: &'a [u8],
    segment: usize,
    max_datagram: usize,
) -> impl Iterator<Item = Frame<'a>> {
    assert!(segment > 0 && segment <= max_datagram, "segment {segment}");
    data.chunks(segment).map(move |datagram| {
        let f = decode(datagram).unwrap_or_else(|e| panic!("the {who} sends valid frames: {e:?}"));
        assert_eq!(f.wire_len(), datagram.len());
        assert_eq!(f.common().topic, TOPIC);
        f
    })
}

/// The bytes of an input, read from the front.
pub struct Bytes<'a>(pub &'a [u8]);

impl<'a> Bytes<'a> {
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }

    pub fn u8(&mut self) -> Option<u8> {
        self.array::<1>().map(|a| a[0])
    }

    pub fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_le_bytes)
    }

    pub fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    pub fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }

    /// A u16 length, then that many bytes (fewer if the input ends first).
    pub fn datagram(&mut self) -> Option<&'a [u8]> {
        let len = usize::from(self.u16()?);
        let (head, rest) = self.0.split_at(len.min(self.0.len()));
        self.0 = rest;
        Some(head)
    }
}

fn put_datagram(out: &mut Vec<u8>, d: &[u8]) {
    let len = u16::try_from(d.len()).expect("a datagram of at most 64 KiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(d);
}

/// The receiver target's configuration, from the input's first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxSetup {
    pub reliable: bool,
    /// 1 to 4.
    pub max_sessions: usize,
    pub buffer_bytes: u64,
    /// Messages of history asked of each session that was running when the receiver joined.
    pub history: u64,
}

impl RxSetup {
    const BUFFERS: [u64; 4] = [16 << 10, 256 << 10, 1 << 20, 8 << 20];
    const HISTORIES: [u64; 4] = [0, 3, 64, ferry::udp::receiver::MAX_HISTORY];

    pub fn read(b: &mut Bytes<'_>) -> RxSetup {
        let x = b.u8().unwrap_or(0);
        RxSetup {
            reliable: x & 1 == 0,
            max_sessions: 1 + usize::from(x >> 1 & 3),
            buffer_bytes: Self::BUFFERS[usize::from(x >> 3 & 3)],
            history: Self::HISTORIES[usize::from(x >> 5 & 3)],
        }
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        let buffer = Self::BUFFERS
            .iter()
            .position(|&b| b == self.buffer_bytes)
            .expect("one of the buffer sizes") as u8;
        let history = Self::HISTORIES
            .iter()
            .position(|&h| h == self.history)
            .expect("one of the histories") as u8;
        out.push(
            u8::from(!self.reliable)
                | ((self.max_sessions as u8 - 1) & 3) << 1
                | buffer << 3
                | history << 5,
        );
    }

    /// The longest message: at most 64 KiB, and at most a quarter of the buffer (the endpoint
    /// gives every receiver at least four of its longest messages' worth).
    pub fn max_message(&self) -> usize {
        (self.buffer_bytes / 4).min(64 << 10) as usize
    }
}

/// One step of the receiver target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RxOp<'a> {
    /// A datagram, decoded and (if it is a frame) handed to `on_frame`.
    Datagram(&'a [u8]),
    /// Time passes (microseconds), then `tick`.
    Tick(u32),
    /// The application takes a message.
    Take,
    /// The socket layer verifies a session's publisher.
    Verify(u64),
}

impl<'a> RxOp<'a> {
    pub fn read(b: &mut Bytes<'a>) -> Option<RxOp<'a>> {
        Some(match b.u8()? % 4 {
            0 => RxOp::Datagram(b.datagram()?),
            1 => RxOp::Tick(b.u32()?),
            2 => RxOp::Take,
            _ => RxOp::Verify(b.u64()?),
        })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            RxOp::Datagram(d) => {
                out.push(0);
                put_datagram(out, d);
            }
            RxOp::Tick(us) => {
                out.push(1);
                out.extend_from_slice(&us.to_le_bytes());
            }
            RxOp::Take => out.push(2),
            RxOp::Verify(session) => {
                out.push(3);
                out.extend_from_slice(&session.to_le_bytes());
            }
        }
    }
}

/// The sender target's configuration and history, from the input's first two bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxSetup {
    pub max_datagram: usize,
    pub reliable: bool,
    /// 1 to 4.
    pub max_receivers: usize,
    /// Messages sent (and, when reliable, retained) before the first operation: 0 to 7.
    pub messages: usize,
    /// Where the first message's length is in [`TxSetup::LENGTHS`] (each next message takes
    /// the next length).
    pub first_length: usize,
    /// Messages kept for late joiners (`SenderConfig::history`): 0 or 4.
    pub keep: u64,
}

impl TxSetup {
    pub const DATAGRAMS: [usize; 4] = [64, 256, 1472, 8972];
    pub const LENGTHS: [usize; 8] = [0, 1, 47, 100, 1424, 4096, 9000, 20_000];

    pub fn read(b: &mut Bytes<'_>) -> TxSetup {
        let x = b.u8().unwrap_or(0);
        let h = b.u8().unwrap_or(0);
        TxSetup {
            max_datagram: Self::DATAGRAMS[usize::from(x & 3)],
            reliable: x & 4 == 0,
            max_receivers: 1 + usize::from(x >> 3 & 3),
            messages: usize::from(h & 7),
            first_length: usize::from(h >> 3 & 7),
            keep: u64::from(h >> 6 & 1) * 4,
        }
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        let dg = Self::DATAGRAMS
            .iter()
            .position(|&d| d == self.max_datagram)
            .expect("one of the datagram sizes") as u8;
        out.push(dg | u8::from(!self.reliable) << 2 | ((self.max_receivers as u8 - 1) & 3) << 3);
        out.push(
            (self.messages as u8 & 7)
                | (self.first_length as u8 & 7) << 3
                | u8::from(self.keep > 0) << 6,
        );
    }

    /// The length of history message `k`.
    pub fn length(&self, k: usize) -> usize {
        Self::LENGTHS[(self.first_length + k) % Self::LENGTHS.len()]
    }
}

/// One step of the sender target. Receivers are named by one byte (`KNOWN_RECEIVER` is
/// registered before the first step).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxOp<'a> {
    /// A datagram, decoded and (if it is a frame) handed to `handle`.
    Datagram(&'a [u8]),
    /// A NAK of the sender's session: entries of message `seq`, bytes `from..to`.
    Nak {
        receiver: u8,
        entries: Vec<NakEntry>,
    },
    /// A STATUS of the sender's session.
    Status {
        receiver: u8,
        reliable: bool,
        consumed_pos: u64,
        window: u64,
        consumed_seq: u64,
    },
    /// Time passes (microseconds), then `tick`.
    Tick(u32),
    /// The application offers a message of this length (if the last one is sent), then pumps.
    Offer(u16),
    /// `expect_receiver`.
    Expect { receiver: u8, reliable: bool },
    /// `forget_receiver`.
    Forget(u8),
}

impl<'a> TxOp<'a> {
    pub fn read(b: &mut Bytes<'a>) -> Option<TxOp<'a>> {
        Some(match b.u8()? % 7 {
            0 => TxOp::Datagram(b.datagram()?),
            1 => {
                let receiver = b.u8()?;
                let n = b.u8()?;
                let mut entries = Vec::with_capacity(usize::from(n));
                for _ in 0..n {
                    entries.push(NakEntry {
                        seq: u64::from(b.u8()?),
                        from: b.u32()?,
                        to: b.u32()?,
                    });
                }
                TxOp::Nak { receiver, entries }
            }
            2 => TxOp::Status {
                receiver: b.u8()?,
                reliable: b.u8()? & 1 == 0,
                consumed_pos: b.u64()?,
                window: b.u64()?,
                consumed_seq: b.u64()?,
            },
            3 => TxOp::Tick(b.u32()?),
            4 => TxOp::Offer(b.u16()?),
            5 => {
                let receiver = b.u8()?;
                TxOp::Expect {
                    receiver,
                    reliable: b.u8()? & 1 == 0,
                }
            }
            _ => TxOp::Forget(b.u8()?),
        })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            TxOp::Datagram(d) => {
                out.push(0);
                put_datagram(out, d);
            }
            TxOp::Nak { receiver, entries } => {
                out.push(1);
                out.push(*receiver);
                out.push(u8::try_from(entries.len()).expect("at most 255 entries"));
                for e in entries {
                    out.push(u8::try_from(e.seq).expect("a seq below 256"));
                    out.extend_from_slice(&e.from.to_le_bytes());
                    out.extend_from_slice(&e.to.to_le_bytes());
                }
            }
            TxOp::Status {
                receiver,
                reliable,
                consumed_pos,
                window,
                consumed_seq,
            } => {
                out.push(2);
                out.push(*receiver);
                out.push(u8::from(!reliable));
                out.extend_from_slice(&consumed_pos.to_le_bytes());
                out.extend_from_slice(&window.to_le_bytes());
                out.extend_from_slice(&consumed_seq.to_le_bytes());
            }
            TxOp::Tick(us) => {
                out.push(3);
                out.extend_from_slice(&us.to_le_bytes());
            }
            TxOp::Offer(len) => {
                out.push(4);
                out.extend_from_slice(&len.to_le_bytes());
            }
            TxOp::Expect { receiver, reliable } => {
                out.push(5);
                out.push(*receiver);
                out.push(u8::from(!reliable));
            }
            TxOp::Forget(receiver) => {
                out.push(6);
                out.push(*receiver);
            }
        }
    }
}

/// The bytes of message `seq` of the sender target (a pattern, so that a repair carrying the
/// wrong bytes shows).
pub fn message(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq as usize).wrapping_mul(31).wrapping_add(i % 251) as u8)
        .collect()
}

/// The ring target's capacities: the smallest ring, and one large enough for a latest reader to
/// hold a record in place (three of the largest messages and some).
pub const RING_CAPACITIES: [u64; 2] = [4 << 10, 64 << 10];

/// The ring target's configuration, from the input's first three bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingSetup {
    /// Reliable ring (reader and writer), else latest.
    pub reliable: bool,
    /// One of `RING_CAPACITIES`.
    pub capacity: u64,
    /// The maximum message: at most what the ring takes.
    pub max_len: u64,
}

impl RingSetup {
    pub fn read(b: &mut Bytes<'_>) -> RingSetup {
        let x = b.u8().unwrap_or(0);
        let capacity = RING_CAPACITIES[usize::from(x >> 1 & 1)];
        let max = ferry::shm::ring::max_payload(capacity);
        RingSetup {
            reliable: x & 1 == 0,
            capacity,
            max_len: u64::from(b.u16().unwrap_or(64)) % (max + 1),
        }
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        let c = RING_CAPACITIES
            .iter()
            .position(|&c| c == self.capacity)
            .unwrap_or(0) as u8;
        out.push(u8::from(!self.reliable) | c << 1);
        out.extend_from_slice(&(self.max_len as u16).to_le_bytes());
    }
}

/// One step of the ring target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingOp {
    /// Store `value` into the ring's word `word` (taken modulo the ring's words).
    Scribble { word: u64, value: u64 },
    /// Store `value` into a header word: 0 head, 1 last, 2 next sequence number, 3 reserve,
    /// 4 hold, 5 frontier, 6 sleepers, 7 and 8 reader 0's cursor and owner, 9 and 10 reader 1's,
    /// 11 the oldest kept message (history).
    Header { which: u8, value: u64 },
    /// The reader looks for the next record (`peek`, or `read_latest`) and releases it.
    Read,
    /// A reliable reader takes one step (`step`) and releases what it found.
    Step,
    /// The writer reserves `len` bytes (modulo the maximum message plus one), fills them, and
    /// commits or gives them back.
    Write { len: u64, commit: bool },
    /// The writer looks at the readers holding it back, announces a wait and ends it, and lets
    /// go of a hold it steps over.
    WriterWaits { len: u64 },
    /// The reader looks for data and announces a sleep, then cancels it.
    ReaderSleeps,
    /// The reader leaves and joins again in slot `slot` (0 to 3).
    Rejoin { slot: usize },
}

impl RingOp {
    pub fn read(b: &mut Bytes<'_>) -> Option<RingOp> {
        Some(match b.u8()? % 8 {
            0 => RingOp::Scribble {
                word: u64::from(b.u16()?),
                value: b.u64()?,
            },
            1 => RingOp::Header {
                which: b.u8()? % 12,
                value: b.u64()?,
            },
            2 => RingOp::Read,
            3 => RingOp::Step,
            4 => {
                let len = u64::from(b.u16()?);
                RingOp::Write {
                    len,
                    commit: b.u8()? & 1 == 0,
                }
            }
            5 => RingOp::WriterWaits {
                len: u64::from(b.u16()?),
            },
            6 => RingOp::ReaderSleeps,
            _ => RingOp::Rejoin {
                slot: usize::from(b.u8()? % 4),
            },
        })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            RingOp::Scribble { word, value } => {
                out.push(0);
                out.extend_from_slice(&(*word as u16).to_le_bytes());
                out.extend_from_slice(&value.to_le_bytes());
            }
            RingOp::Header { which, value } => {
                out.push(1);
                out.push(*which);
                out.extend_from_slice(&value.to_le_bytes());
            }
            RingOp::Read => out.push(2),
            RingOp::Step => out.push(3),
            RingOp::Write { len, commit } => {
                out.push(4);
                out.extend_from_slice(&(*len as u16).to_le_bytes());
                out.push(u8::from(!commit));
            }
            RingOp::WriterWaits { len } => {
                out.push(5);
                out.extend_from_slice(&(*len as u16).to_le_bytes());
            }
            RingOp::ReaderSleeps => out.push(6),
            RingOp::Rejoin { slot } => {
                out.push(7);
                out.push(*slot as u8);
            }
        }
    }
}
