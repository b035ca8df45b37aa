//! What a ferry recording holds: its channels' encoding and schemas, how a message is framed,
//! and the names of its metadata. One place, so the recorder, the player and the tests agree.
//!
//! A message is stored as ROS 2's CDR encoding of a one-field message (`uint8[] data` for raw
//! bytes, `uint32[] data` for u32 arrays): 4 bytes of encapsulation header (CDR, little endian),
//! the element count as a u32, then the payload exactly as published. So the payload is the
//! record's bytes from offset 8 on, and a viewer that knows CDR and the `ros2msg` schema
//! language (Foxglove does) shows every element.

/// The channel's message encoding (MCAP's well-known name for CDR).
pub const MESSAGE_ENCODING: &str = "cdr";
/// The schemas' encoding: ROS 2 message definitions.
pub const SCHEMA_ENCODING: &str = "ros2msg";
/// The schema of raw-byte messages.
pub const BYTES_SCHEMA: &str = "ferry_msgs/msg/Bytes";
/// The schema of u32-array messages.
pub const U32_SCHEMA: &str = "ferry_msgs/msg/U32Array";
/// The MCAP file's profile: none of the registered ones (which promise more than ferry sets).
pub const PROFILE: &str = "";
/// The name of the library that wrote the file, in its header.
pub fn library() -> String {
    format!("ferry-record {}", env!("CARGO_PKG_VERSION"))
}

/// Bytes before the payload: the encapsulation header and the element count.
pub const PREFIX: usize = 8;
/// CDR, little endian (representation identifier 0x0001), no options.
const ENCAPSULATION: [u8; 4] = [0x00, 0x01, 0x00, 0x00];

/// What the messages of a topic are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadType {
    /// Bytes, shown as a byte array.
    Bytes,
    /// Little-endian u32 values (a message's length must be a multiple of 4).
    U32,
}

impl PayloadType {
    pub fn schema_name(self) -> &'static str {
        match self {
            PayloadType::Bytes => BYTES_SCHEMA,
            PayloadType::U32 => U32_SCHEMA,
        }
    }

    /// The schema's text (a ROS 2 message definition).
    pub fn schema_text(self) -> &'static str {
        match self {
            PayloadType::Bytes => "# A ferry message's bytes, as published.\nuint8[] data\n",
            PayloadType::U32 => "# A ferry message of little-endian u32 values.\nuint32[] data\n",
        }
    }

    /// The name used in channel metadata and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            PayloadType::Bytes => "bytes",
            PayloadType::U32 => "u32",
        }
    }

    fn element(self) -> usize {
        match self {
            PayloadType::Bytes => 1,
            PayloadType::U32 => 4,
        }
    }

    /// The type a schema name stands for, if it is one of ferry's.
    pub fn from_schema_name(name: &str) -> Option<PayloadType> {
        match name {
            BYTES_SCHEMA => Some(PayloadType::Bytes),
            U32_SCHEMA => Some(PayloadType::U32),
            _ => None,
        }
    }
}

/// The 8 bytes written before a payload of `len` bytes; `None` when it cannot be framed as
/// `kind` (a u32 message whose length is not a multiple of 4, or more than u32::MAX elements).
pub fn prefix(kind: PayloadType, len: usize) -> Option<[u8; PREFIX]> {
    if len % kind.element() != 0 {
        return None;
    }
    let count = u32::try_from(len / kind.element()).ok()?;
    let mut p = [0u8; PREFIX];
    p[..4].copy_from_slice(&ENCAPSULATION);
    p[4..].copy_from_slice(&count.to_le_bytes());
    Some(p)
}

/// The payload of a stored message, checked: the header, and a count that matches the length
/// exactly. An error says what is wrong.
pub fn payload(kind: PayloadType, record: &[u8]) -> Result<&[u8], String> {
    if record.len() < PREFIX {
        return Err(format!(
            "{} bytes, shorter than the 8-byte header",
            record.len()
        ));
    }
    if record[..4] != ENCAPSULATION {
        return Err(format!(
            "encapsulation header {:02x?} (expected CDR little endian, 00 01 00 00)",
            &record[..4]
        ));
    }
    let count = u32::from_le_bytes(record[4..8].try_into().expect("4 bytes")) as u64;
    let body = &record[PREFIX..];
    if count * kind.element() as u64 != body.len() as u64 {
        return Err(format!(
            "says {count} {} elements but holds {} bytes",
            kind.name(),
            body.len()
        ));
    }
    Ok(body)
}

/// Metadata record names and their keys.
pub mod meta {
    /// One record: how the file was made and what its fields mean.
    pub const FERRY: &str = "ferry";
    /// One record per topic: its counts in this file.
    pub const TOPIC: &str = "ferry.topic";
    /// One record per publisher (channel): its sequence numbers and counts in this file.
    pub const PUBLISHER: &str = "ferry.publisher";

    /// What `log_time` is, written into the `ferry` record.
    pub const LOG_TIME: &str = "receive time: when the recorder took the message, ns since the \
                                Unix epoch (CLOCK_REALTIME)";
    /// What `publish_time` is.
    pub const PUBLISH_TIME: &str = "receive time, as log_time (not carried by ferry's wire \
                                    formats; MCAP asks for log_time when it is unknown)";
    /// What `sequence` is.
    pub const SEQUENCE: &str = "the low 32 bits of the publisher's u64 sequence number; a \
                                channel holds one publisher, so the full number is ferry.first_seq \
                                (channel metadata) plus the wrapping u32 steps from message to \
                                message";
}

/// Channel metadata keys.
pub mod channel {
    pub const TYPE: &str = "ferry.type";
    pub const PUBLISHER: &str = "ferry.publisher";
    pub const NODE: &str = "ferry.node";
    pub const ADDRESS: &str = "ferry.address";
    pub const TRANSPORT: &str = "ferry.transport";
    pub const FIRST_SEQ: &str = "ferry.first_seq";
}

/// Nanoseconds since the Unix epoch now (CLOCK_REALTIME).
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The full sequence number of a message whose u32 `sequence` follows the one of `previous`
/// (a full number) on the same channel: the wrapping step forward. Exact while fewer than 2^32
/// messages of one publisher go unrecorded between two recorded ones.
pub fn unwrap_sequence(previous: u64, sequence: u32) -> u64 {
    previous.wrapping_add(u64::from(sequence.wrapping_sub(previous as u32)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_round_trips_and_refuses_what_does_not_fit() {
        let data: Vec<u8> = (0..12).collect();
        for kind in [PayloadType::Bytes, PayloadType::U32] {
            let mut rec = prefix(kind, data.len()).unwrap().to_vec();
            rec.extend_from_slice(&data);
            assert_eq!(payload(kind, &rec).unwrap(), &data[..]);
        }
        let p = prefix(PayloadType::U32, 12).unwrap();
        assert_eq!(p, [0, 1, 0, 0, 3, 0, 0, 0]);
        assert_eq!(prefix(PayloadType::U32, 13), None);
        assert_eq!(
            prefix(PayloadType::Bytes, 0).unwrap(),
            [0, 1, 0, 0, 0, 0, 0, 0]
        );
        assert!(payload(PayloadType::Bytes, &[0, 1, 0]).is_err());
        assert!(payload(PayloadType::Bytes, &[0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(payload(PayloadType::Bytes, &[0, 1, 0, 0, 2, 0, 0, 0, 9]).is_err());
        // A count so large that count * 4 overflows 32 bits is refused, not wrapped.
        assert!(payload(PayloadType::U32, &[0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff]).is_err());
    }

    #[test]
    fn sequences_unwrap_across_the_u32_boundary() {
        let first = (7u64 << 32) + u32::MAX as u64 - 1;
        let next = unwrap_sequence(first, 1);
        assert_eq!(next, (8u64 << 32) + 1);
        assert_eq!(unwrap_sequence(5, 5), 5);
        assert_eq!(unwrap_sequence(5, 9), 9);
    }
}
