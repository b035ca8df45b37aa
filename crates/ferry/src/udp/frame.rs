//! ferry's UDP frames: a versioned 24-byte common header, then the kind's own fields.
//!
//! ```text
//! 0   u16 magic 0x4659 ("FY")     2  u8 version   3  u8 kind   4  u32 flags
//! 8   u64 topic id                16 u64 publisher session
//! DATA       24 u64 seq  32 u32 message length  36 u32 fragment offset  40 u64 stream position
//!            of the message (bytes the session sent before it)  48.. payload
//! HEARTBEAT  24 u64 next seq  32 u64 oldest retained seq  40 u64 challenge (0: none; the
//!            receiver echoes the last one in its STATUS, proving it receives at its address)
//!            48 u64 oldest seq of the history kept for late joiners (= next seq: none)
//! NAK        24 u64 receiver  32 u32 entry count  36 u32 0  40.. {u64 seq, u32 from, u32 to} ...
//! STATUS     24 u64 receiver  32 u64 consumed stream position  40 u64 window bytes
//!            48 u64 consumed seq (messages below it were taken by the application)
//!            56 u64 echo of the session's last heartbeat challenge (0: none heard)
//!            64 u64 arrived stream position (the end of the furthest fragment received, holes
//!            or not)  72 u64 payload bytes received in the session (each byte once, repairs
//!            included): the publisher's congestion control times delivery by these two
//! BYE        24 u64 next seq
//! BATCH      24 u64 seq of the first message  32 u32 message count (at least 1)  36 u32 0
//!            40 u64 stream position of the first message  48.. the messages back to back, each
//!            a u32 length and its bytes (message i + 1 has the next seq and starts in the stream
//!            where message i ends); zero bytes may follow the last one (a batch is padded to
//!            the size of the datagrams it shares a GSO send with)
//! ```
//! Flags: 1 reliable (DATA, HEARTBEAT, STATUS, NAK), 2 retransmission (DATA), 4 history (a
//! STATUS from a receiver that joined and waits for the session's history: the publisher
//! answers with a heartbeat to it; a NAK of messages older than the receiver's start).
//! All integers little-endian. Decoding checks every length and offset: a malformed datagram is
//! an error value, never a panic or an out-of-bounds read.

pub const MAGIC: u16 = 0x4659;
pub const VERSION: u8 = 5;
pub const COMMON_LEN: usize = 24;
pub const DATA_HEADER: usize = 48;
pub const NAK_ENTRY: usize = 16;
/// A BATCH frame's header, and the length prefix of each message in it.
pub const BATCH_HEADER: usize = 48;
pub const BATCH_ENTRY: usize = 4;

/// A reliable publisher sends no message more than this many sequence numbers beyond what its
/// slowest reliable receiver's application has taken, so a receiver tracks at most this many
/// messages ahead of the next one it delivers: a frame or heartbeat beyond that is not a range to
/// walk (see `receiver`).
pub const MESSAGE_WINDOW: u64 = 16_384;

/// Flag of DATA and HEARTBEAT frames: the publisher repairs losses (reliable delivery).
pub const FLAG_RELIABLE: u32 = 1;
/// Flag of DATA frames: this frame is a retransmission.
pub const FLAG_RETRANSMIT: u32 = 2;
/// Flag of STATUS frames: the receiver joined and waits to learn the session's history (the
/// publisher answers with a heartbeat to it); of NAK frames: the messages asked for are history,
/// older than the receiver's start (not losses: the publisher's congestion control ignores them).
pub const FLAG_HISTORY: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Data = 1,
    Heartbeat = 2,
    Nak = 3,
    Status = 4,
    Bye = 5,
    Batch = 6,
}

/// Fields every frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Common {
    pub kind: Kind,
    pub flags: u32,
    pub topic: u64,
    pub session: u64,
}

/// A missing piece a receiver asks for: bytes `from..to` of message `seq` (`to` is clamped to
/// the message length by the sender; `0..u32::MAX` asks for the whole message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NakEntry {
    pub seq: u64,
    pub from: u32,
    pub to: u32,
}

/// A decoded frame, borrowing the datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    Data {
        common: Common,
        seq: u64,
        msg_len: u32,
        offset: u32,
        stream_pos: u64,
        payload: &'a [u8],
    },
    Heartbeat {
        common: Common,
        next_seq: u64,
        oldest_seq: u64,
        challenge: u64,
        /// The oldest message of the history kept for late joiners (`next_seq`: none kept).
        history_from: u64,
    },
    Nak {
        common: Common,
        receiver: u64,
        entries: NakEntries<'a>,
    },
    Status {
        common: Common,
        receiver: u64,
        consumed_pos: u64,
        window: u64,
        consumed_seq: u64,
        echo: u64,
        arrived_pos: u64,
        received_bytes: u64,
    },
    Bye {
        common: Common,
        next_seq: u64,
    },
    /// Several whole messages, consecutive in sequence and stream.
    Batch {
        common: Common,
        first_seq: u64,
        stream_pos: u64,
        messages: BatchMessages<'a>,
    },
}

impl Frame<'_> {
    /// The datagram's length in bytes (every kind has one encoding).
    pub fn wire_len(&self) -> usize {
        match self {
            Frame::Data { payload, .. } => DATA_HEADER + payload.len(),
            Frame::Heartbeat { .. } => 56,
            Frame::Nak { entries, .. } => 40 + entries.len() * NAK_ENTRY,
            Frame::Status { .. } => 80,
            Frame::Bye { .. } => 32,
            Frame::Batch { messages, .. } => BATCH_HEADER + messages.body.len(),
        }
    }

    pub fn common(&self) -> &Common {
        match self {
            Frame::Data { common, .. }
            | Frame::Heartbeat { common, .. }
            | Frame::Nak { common, .. }
            | Frame::Status { common, .. }
            | Frame::Bye { common, .. }
            | Frame::Batch { common, .. } => common,
        }
    }

    /// Appends the frame's encoding, the inverse of [`decode`] (a NAK's reserved word and a
    /// batch's padding written as zeroes, as senders write them): for tests and fuzzing, which
    /// check that every frame decoded encodes back to its datagram.
    #[cfg(any(test, feature = "internals"))]
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Frame::Data {
                ref common,
                seq,
                msg_len,
                offset,
                stream_pos,
                payload,
            } => put_data(out, common, seq, msg_len, offset, stream_pos, payload),
            Frame::Heartbeat {
                ref common,
                next_seq,
                oldest_seq,
                challenge,
                history_from,
            } => put_heartbeat(out, common, next_seq, oldest_seq, challenge, history_from),
            Frame::Nak {
                ref common,
                receiver,
                entries,
            } => put_nak(out, common, receiver, &entries.iter().collect::<Vec<_>>()),
            Frame::Status {
                ref common,
                receiver,
                consumed_pos,
                window,
                consumed_seq,
                echo,
                arrived_pos,
                received_bytes,
            } => put_status(
                out,
                common,
                receiver,
                consumed_pos,
                window,
                consumed_seq,
                echo,
                arrived_pos,
                received_bytes,
            ),
            Frame::Bye {
                ref common,
                next_seq,
            } => put_bye(out, common, next_seq),
            Frame::Batch {
                ref common,
                first_seq,
                stream_pos,
                messages,
            } => {
                let end = out.len() + self.wire_len();
                put_batch_header(out, common, first_seq, messages.count, stream_pos);
                for (_, _, msg) in messages.iter() {
                    put_batched(out, msg);
                }
                // The padding the datagram had.
                out.resize(end, 0);
            }
        }
    }
}

/// The entries of a NAK, decoded lazily from the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NakEntries<'a>(&'a [u8]);

impl<'a> NakEntries<'a> {
    pub fn len(&self) -> usize {
        self.0.len() / NAK_ENTRY
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = NakEntry> + 'a {
        self.0.chunks_exact(NAK_ENTRY).map(|c| NakEntry {
            seq: u64_at(c, 0),
            from: u32_at(c, 8),
            to: u32_at(c, 12),
        })
    }
}

/// The messages of a BATCH, checked when decoding and split lazily from the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMessages<'a> {
    /// The frame's body: `count` length-prefixed messages, then zero padding.
    body: &'a [u8],
    count: u32,
}

impl<'a> BatchMessages<'a> {
    /// How many messages the batch carries (at least 1; each took at least 4 bytes of the
    /// datagram, so this is bounded by its length).
    #[cfg(any(test, feature = "internals"))]
    pub fn len(&self) -> usize {
        self.count as usize
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The messages in order: the offset from the first one's seq and stream position, and the
    /// bytes.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, &'a [u8])> + 'a {
        let (mut rest, mut pos) = (self.body, 0u64);
        (0..self.count as u64).map_while(move |i| {
            // Checked by `decode`: every prefix and message lies within the body.
            let len = u32_at(rest.get(..BATCH_ENTRY)?, 0) as usize;
            let msg = rest.get(BATCH_ENTRY..BATCH_ENTRY + len)?;
            rest = &rest[BATCH_ENTRY + len..];
            let at = pos;
            pos += len as u64;
            Some((i, at, msg))
        })
    }
}

/// Why a datagram was not a valid frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("datagram of {0} bytes is shorter than a frame header")]
    Short(usize),
    #[error("not a ferry frame (magic {0:#06x})")]
    Magic(u16),
    #[error("frame version {0}, this ferry speaks {VERSION}")]
    Version(u8),
    #[error("unknown frame kind {0}")]
    Kind(u8),
    #[error("frame fields are inconsistent: {0}")]
    Invalid(&'static str),
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Decodes one datagram.
pub fn decode(b: &[u8]) -> Result<Frame<'_>, DecodeError> {
    if b.len() < COMMON_LEN {
        return Err(DecodeError::Short(b.len()));
    }
    let magic = u16_at(b, 0);
    if magic != MAGIC {
        return Err(DecodeError::Magic(magic));
    }
    if b[2] != VERSION {
        return Err(DecodeError::Version(b[2]));
    }
    let kind = match b[3] {
        1 => Kind::Data,
        2 => Kind::Heartbeat,
        3 => Kind::Nak,
        4 => Kind::Status,
        5 => Kind::Bye,
        6 => Kind::Batch,
        k => return Err(DecodeError::Kind(k)),
    };
    let common = Common {
        kind,
        flags: u32_at(b, 4),
        topic: u64_at(b, 8),
        session: u64_at(b, 16),
    };
    let need = |n: usize| {
        if b.len() < n {
            Err(DecodeError::Short(b.len()))
        } else {
            Ok(())
        }
    };
    // Control frames have one length: anything after is not ferry's.
    let exactly = |n: usize| {
        need(n)?;
        if b.len() > n {
            return Err(DecodeError::Invalid(
                "bytes after the end of a control frame",
            ));
        }
        Ok(())
    };
    Ok(match kind {
        Kind::Data => {
            need(DATA_HEADER)?;
            let (msg_len, offset) = (u32_at(b, 32), u32_at(b, 36));
            let payload = &b[DATA_HEADER..];
            if payload.is_empty() && msg_len != 0 {
                return Err(DecodeError::Invalid(
                    "empty fragment of a non-empty message",
                ));
            }
            if offset as u64 + payload.len() as u64 > msg_len as u64 {
                return Err(DecodeError::Invalid("fragment runs past the message end"));
            }
            let stream_pos = u64_at(b, 40);
            if stream_pos.checked_add(msg_len as u64).is_none() {
                return Err(DecodeError::Invalid("stream position overflows"));
            }
            Frame::Data {
                common,
                seq: u64_at(b, 24),
                msg_len,
                offset,
                stream_pos,
                payload,
            }
        }
        Kind::Heartbeat => {
            exactly(56)?;
            let (next_seq, oldest_seq) = (u64_at(b, 24), u64_at(b, 32));
            let history_from = u64_at(b, 48);
            if oldest_seq > next_seq {
                return Err(DecodeError::Invalid(
                    "oldest retained message after the next one",
                ));
            }
            if history_from > next_seq {
                return Err(DecodeError::Invalid(
                    "history starting after the next message",
                ));
            }
            Frame::Heartbeat {
                common,
                next_seq,
                oldest_seq,
                challenge: u64_at(b, 40),
                history_from,
            }
        }
        Kind::Nak => {
            need(40)?;
            let count = u32_at(b, 32) as usize;
            let body = &b[40..];
            if body.len() != count.saturating_mul(NAK_ENTRY) {
                return Err(DecodeError::Invalid(
                    "NAK entry count does not match its length",
                ));
            }
            Frame::Nak {
                common,
                receiver: u64_at(b, 24),
                entries: NakEntries(body),
            }
        }
        Kind::Status => {
            exactly(80)?;
            Frame::Status {
                common,
                receiver: u64_at(b, 24),
                consumed_pos: u64_at(b, 32),
                window: u64_at(b, 40),
                consumed_seq: u64_at(b, 48),
                echo: u64_at(b, 56),
                arrived_pos: u64_at(b, 64),
                received_bytes: u64_at(b, 72),
            }
        }
        Kind::Bye => {
            exactly(32)?;
            Frame::Bye {
                common,
                next_seq: u64_at(b, 24),
            }
        }
        Kind::Batch => {
            need(BATCH_HEADER)?;
            let (first_seq, count, stream_pos) = (u64_at(b, 24), u32_at(b, 32), u64_at(b, 40));
            if count == 0 {
                return Err(DecodeError::Invalid("a batch of no messages"));
            }
            if u32_at(b, 36) != 0 {
                return Err(DecodeError::Invalid("reserved batch field is not zero"));
            }
            if first_seq.checked_add(count as u64).is_none() {
                return Err(DecodeError::Invalid("batch sequence numbers overflow"));
            }
            let body = &b[BATCH_HEADER..];
            // The walk is bounded by the datagram: every message takes at least its prefix.
            let (mut at, mut total, mut seen) = (0usize, 0u64, 0u32);
            while seen < count {
                let Some(prefix) = body.get(at..at + BATCH_ENTRY) else {
                    return Err(DecodeError::Invalid("batch ends before its message count"));
                };
                let len = u32_at(prefix, 0) as usize;
                at += BATCH_ENTRY;
                if body.len() - at < len {
                    return Err(DecodeError::Invalid(
                        "batched message runs past the datagram",
                    ));
                }
                at += len;
                total += len as u64;
                seen += 1;
            }
            if body[at..].iter().any(|&x| x != 0) {
                return Err(DecodeError::Invalid("bytes after a batch's last message"));
            }
            if stream_pos.checked_add(total).is_none() {
                return Err(DecodeError::Invalid("stream position overflows"));
            }
            Frame::Batch {
                common,
                first_seq,
                stream_pos,
                messages: BatchMessages { body, count },
            }
        }
    })
}

fn put_common(out: &mut Vec<u8>, c: &Common) {
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.push(VERSION);
    out.push(c.kind as u8);
    out.extend_from_slice(&c.flags.to_le_bytes());
    out.extend_from_slice(&c.topic.to_le_bytes());
    out.extend_from_slice(&c.session.to_le_bytes());
}

/// Appends 64-bit fields in wire order.
fn put_u64s(out: &mut Vec<u8>, fields: &[u64]) {
    for f in fields {
        out.extend_from_slice(&f.to_le_bytes());
    }
}

/// Appends a DATA frame.
pub fn put_data(
    out: &mut Vec<u8>,
    c: &Common,
    seq: u64,
    msg_len: u32,
    offset: u32,
    stream_pos: u64,
    payload: &[u8],
) {
    debug_assert_eq!(c.kind, Kind::Data);
    put_common(out, c);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&msg_len.to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(&stream_pos.to_le_bytes());
    out.extend_from_slice(payload);
}

/// Appends a BATCH header for `count` messages; each message follows with [`put_batched`].
pub fn put_batch_header(
    out: &mut Vec<u8>,
    c: &Common,
    first_seq: u64,
    count: u32,
    stream_pos: u64,
) {
    debug_assert_eq!(c.kind, Kind::Batch);
    put_common(out, c);
    out.extend_from_slice(&first_seq.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&stream_pos.to_le_bytes());
}

/// Appends one message of a BATCH.
pub fn put_batched(out: &mut Vec<u8>, msg: &[u8]) {
    out.extend_from_slice(&(msg.len() as u32).to_le_bytes());
    out.extend_from_slice(msg);
}

pub fn put_heartbeat(
    out: &mut Vec<u8>,
    c: &Common,
    next_seq: u64,
    oldest_seq: u64,
    challenge: u64,
    history_from: u64,
) {
    put_common(out, c);
    put_u64s(out, &[next_seq, oldest_seq, challenge, history_from]);
}

pub fn put_nak(out: &mut Vec<u8>, c: &Common, receiver: u64, entries: &[NakEntry]) {
    put_common(out, c);
    out.extend_from_slice(&receiver.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    for e in entries {
        out.extend_from_slice(&e.seq.to_le_bytes());
        out.extend_from_slice(&e.from.to_le_bytes());
        out.extend_from_slice(&e.to.to_le_bytes());
    }
}

/// Appends a STATUS frame: one argument per field, in wire order.
#[allow(clippy::too_many_arguments)]
pub fn put_status(
    out: &mut Vec<u8>,
    c: &Common,
    receiver: u64,
    consumed_pos: u64,
    window: u64,
    consumed_seq: u64,
    echo: u64,
    arrived_pos: u64,
    received_bytes: u64,
) {
    put_common(out, c);
    put_u64s(
        out,
        &[
            receiver,
            consumed_pos,
            window,
            consumed_seq,
            echo,
            arrived_pos,
            received_bytes,
        ],
    );
}

pub fn put_bye(out: &mut Vec<u8>, c: &Common, next_seq: u64) {
    put_common(out, c);
    out.extend_from_slice(&next_seq.to_le_bytes());
}

/// The topic id carried in frames: FNV-1a of `domain/topic`.
pub fn topic_id(domain: &str, topic: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in domain
        .bytes()
        .chain(std::iter::once(b'/'))
        .chain(topic.bytes())
    {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn common(kind: Kind) -> Common {
        Common {
            kind,
            flags: FLAG_RELIABLE,
            topic: 7,
            session: 9,
        }
    }

    /// `b` decodes to a frame of its length that encodes back to `b`.
    fn reads_back(b: &[u8]) {
        let f = decode(b).unwrap();
        assert_eq!(f.wire_len(), b.len());
        let mut again = Vec::new();
        f.encode(&mut again);
        assert_eq!(again, b, "{f:?}");
    }

    #[test]
    fn every_kind_round_trips() {
        let mut b = Vec::new();
        put_data(&mut b, &common(Kind::Data), 5, 10, 4, 1000, b"abcdef");
        assert_eq!(
            decode(&b),
            Ok(Frame::Data {
                common: common(Kind::Data),
                seq: 5,
                msg_len: 10,
                offset: 4,
                stream_pos: 1000,
                payload: b"abcdef"
            })
        );
        b.clear();
        put_heartbeat(&mut b, &common(Kind::Heartbeat), 10, 3, 0xC0FFEE, 7);
        assert_eq!(
            decode(&b),
            Ok(Frame::Heartbeat {
                common: common(Kind::Heartbeat),
                next_seq: 10,
                oldest_seq: 3,
                challenge: 0xC0FFEE,
                history_from: 7,
            })
        );
        reads_back(&b);
        b.clear();
        let entries = [
            NakEntry {
                seq: 1,
                from: 0,
                to: 1432,
            },
            NakEntry {
                seq: 4,
                from: 0,
                to: u32::MAX,
            },
        ];
        put_nak(&mut b, &common(Kind::Nak), 77, &entries);
        match decode(&b).unwrap() {
            Frame::Nak {
                receiver,
                entries: e,
                ..
            } => {
                assert_eq!(receiver, 77);
                assert_eq!(e.iter().collect::<Vec<_>>(), entries);
            }
            f => panic!("{f:?}"),
        }
        b.clear();
        put_status(
            &mut b,
            &common(Kind::Status),
            77,
            12,
            1 << 20,
            3,
            0xC0FFEE,
            40,
            40,
        );
        assert_eq!(
            decode(&b),
            Ok(Frame::Status {
                common: common(Kind::Status),
                receiver: 77,
                consumed_pos: 12,
                window: 1 << 20,
                consumed_seq: 3,
                echo: 0xC0FFEE,
                arrived_pos: 40,
                received_bytes: 40,
            })
        );
        reads_back(&b);
        b.clear();
        put_bye(&mut b, &common(Kind::Bye), 99);
        assert_eq!(
            decode(&b),
            Ok(Frame::Bye {
                common: common(Kind::Bye),
                next_seq: 99
            })
        );
    }

    #[test]
    fn malformed_frames_are_errors() {
        assert_eq!(decode(&[]), Err(DecodeError::Short(0)));
        assert_eq!(decode(&[0u8; 40]), Err(DecodeError::Magic(0)));
        let mut b = Vec::new();
        put_data(&mut b, &common(Kind::Data), 1, 4, 2, 0, b"abc");
        assert!(
            matches!(decode(&b), Err(DecodeError::Invalid(_))),
            "runs past the end"
        );
        b[2] = 9;
        assert_eq!(decode(&b), Err(DecodeError::Version(9)));
        b[2] = VERSION;
        b[3] = 42;
        assert_eq!(decode(&b), Err(DecodeError::Kind(42)));
        b.clear();
        put_bye(&mut b, &common(Kind::Bye), 3);
        b.push(0);
        assert!(
            matches!(decode(&b), Err(DecodeError::Invalid(_))),
            "a control frame with bytes after its end"
        );
        b.clear();
        put_nak(
            &mut b,
            &common(Kind::Nak),
            1,
            &[NakEntry {
                seq: 1,
                from: 0,
                to: 1,
            }],
        );
        b.pop();
        assert!(matches!(decode(&b), Err(DecodeError::Invalid(_))));
        b.clear();
        put_heartbeat(&mut b, &common(Kind::Heartbeat), 10, 3, 0, 11);
        assert!(
            matches!(decode(&b), Err(DecodeError::Invalid(_))),
            "a history that starts after the next message"
        );
    }

    /// A batch whose fields lie is refused whole: no message of it is taken.
    #[test]
    fn lying_batches_are_errors() {
        let batch = |first: u64, count: u32, msgs: &[&[u8]]| {
            let mut b = Vec::new();
            put_batch_header(&mut b, &common(Kind::Batch), first, count, 0);
            for m in msgs {
                put_batched(&mut b, m);
            }
            b
        };
        let invalid = |b: &[u8]| matches!(decode(b), Err(DecodeError::Invalid(_)));
        assert!(matches!(
            decode(&batch(0, 2, &[b"ab", b""])),
            Ok(Frame::Batch { .. })
        ));
        assert!(invalid(&batch(0, 0, &[])), "no messages");
        assert!(
            invalid(&batch(0, 3, &[b"ab", b"c"])),
            "fewer messages than counted"
        );
        assert!(
            invalid(&batch(0, u32::MAX, &[b"ab"])),
            "a count the datagram cannot hold"
        );
        assert!(invalid(&batch(u64::MAX, 2, &[b"a", b"b"])), "seq overflows");
        let mut b = batch(0, 1, &[b"abc"]);
        b[48..52].copy_from_slice(&100u32.to_le_bytes());
        assert!(invalid(&b), "a length past the datagram");
        let mut b = batch(0, 1, &[b"abc"]);
        b.extend_from_slice(&[0, 0, 7]);
        assert!(
            invalid(&b),
            "bytes after the last message that are not padding"
        );
        let mut b = batch(0, 1, &[b"abc"]);
        b[36] = 1;
        assert!(invalid(&b), "reserved field");
        let mut b = batch(0, 2, &[b"abc", b"d"]);
        b[40..48].copy_from_slice(&(u64::MAX - 2).to_le_bytes());
        assert!(invalid(&b), "stream position overflows");
    }

    proptest! {
        /// Any bytes at all: decode returns, and never reads out of bounds.
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes);
        }

        /// Valid headers with random bodies and truncations: still no panic, and a decoded DATA
        /// frame always lies within its message.
        #[test]
        fn decoded_fragments_fit_their_message(kind in 1u8..7, body in proptest::collection::vec(any::<u8>(), 0..120)) {
            let mut b = Vec::new();
            b.extend_from_slice(&MAGIC.to_le_bytes());
            b.push(VERSION);
            b.push(kind);
            b.extend_from_slice(&[0; 20]);
            // (DATA needs 48 bytes; shorter bodies exercise the length checks.)
            b.extend_from_slice(&body);
            match decode(&b) {
                Ok(Frame::Data { msg_len, offset, payload, .. }) => {
                    prop_assert!(offset as usize + payload.len() <= msg_len as usize);
                }
                Ok(Frame::Batch { messages, .. }) => {
                    // Every message the count promises is there, within the datagram.
                    let split: Vec<_> = messages.iter().collect();
                    prop_assert_eq!(split.len(), messages.len());
                    let bytes: usize = split.iter().map(|m| BATCH_ENTRY + m.2.len()).sum();
                    prop_assert!(BATCH_HEADER + bytes <= b.len());
                }
                _ => {}
            }
        }

        /// Batches of any messages round-trip, padded or not.
        #[test]
        fn batches_round_trip(
            msgs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..20),
            pad in 0usize..64,
        ) {
            let mut b = Vec::new();
            put_batch_header(&mut b, &common(Kind::Batch), 10, msgs.len() as u32, 500);
            for m in &msgs {
                put_batched(&mut b, m);
            }
            b.resize(b.len() + pad, 0);
            let Ok(Frame::Batch { first_seq, stream_pos, messages, .. }) = decode(&b) else {
                panic!("not a batch: {:?}", decode(&b));
            };
            prop_assert_eq!((first_seq, stream_pos), (10, 500));
            let mut pos = 0;
            for ((i, at, m), want) in messages.iter().zip(&msgs) {
                prop_assert_eq!(at, pos);
                prop_assert_eq!(m, &want[..]);
                pos += m.len() as u64;
                prop_assert!(i < msgs.len() as u64);
            }
            prop_assert_eq!(messages.iter().count(), msgs.len());
            reads_back(&b);
        }
    }
}
