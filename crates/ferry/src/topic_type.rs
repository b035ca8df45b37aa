//! A topic's type: what its bytes mean. ferry moves bytes; a publisher may say what they are — a
//! type name, the message encoding, and a schema in that encoding's own language — so that tools
//! (`ferry echo`, `ferry record`, Foxglove through a recording) decode them by field, and so that
//! two programs that disagree about a topic's layout are told so, by name, instead of reading
//! garbage. The type travels once with the topic (its shared-memory directory; a hash of it in
//! UDP discovery), never with a message: declaring one costs the data path nothing.
//!
//! This module only holds and compares types. Parsing a schema, and encoding and decoding
//! messages by it, is the `ferry-types` crate's work, outside the library.

use std::sync::Arc;

use crate::Error;

/// The longest type name (bytes).
pub const MAX_TYPE_NAME: usize = 128;
/// The largest schema (bytes): a ROS 2 message with all its dependencies, or a protobuf
/// `FileDescriptorSet`, takes a few KiB; a larger one is refused when the type is made.
pub const MAX_SCHEMA: usize = 64 * 1024;

/// How a typed topic's messages are encoded (MCAP's well-known message encodings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MessageEncoding {
    /// OMG CDR, as ROS 2 sends it (a 4-byte encapsulation header, then the fields); the schema is
    /// a ROS 2 message definition (`ros2msg`) with its dependencies.
    Cdr,
    /// Protocol Buffers; the schema is a `FileDescriptorSet` (binary) that holds the type.
    Protobuf,
    /// UTF-8 JSON; the schema is a JSON Schema (it may be empty: any JSON).
    Json,
    /// Bytes whose layout only the applications know; the schema, if any, is free text.
    Raw,
}

impl MessageEncoding {
    pub const ALL: [MessageEncoding; 4] = [
        MessageEncoding::Cdr,
        MessageEncoding::Protobuf,
        MessageEncoding::Json,
        MessageEncoding::Raw,
    ];

    /// The name MCAP and the command line use: `cdr`, `protobuf`, `json`, `raw`.
    pub fn name(self) -> &'static str {
        match self {
            MessageEncoding::Cdr => "cdr",
            MessageEncoding::Protobuf => "protobuf",
            MessageEncoding::Json => "json",
            MessageEncoding::Raw => "raw",
        }
    }

    /// The encoding of this kind of schema, as MCAP names it: `ros2msg`, `protobuf`,
    /// `jsonschema`, or empty for raw.
    pub fn schema_encoding(self) -> &'static str {
        match self {
            MessageEncoding::Cdr => "ros2msg",
            MessageEncoding::Protobuf => "protobuf",
            MessageEncoding::Json => "jsonschema",
            MessageEncoding::Raw => "",
        }
    }

    /// The number stored in shared memory (0 means no type).
    pub(crate) fn code(self) -> u32 {
        match self {
            MessageEncoding::Cdr => 1,
            MessageEncoding::Protobuf => 2,
            MessageEncoding::Json => 3,
            MessageEncoding::Raw => 4,
        }
    }

    pub(crate) fn from_code(code: u32) -> Option<MessageEncoding> {
        MessageEncoding::ALL.into_iter().find(|e| e.code() == code)
    }
}

impl std::fmt::Display for MessageEncoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for MessageEncoding {
    type Err = Error;
    fn from_str(s: &str) -> Result<MessageEncoding, Error> {
        MessageEncoding::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| {
                Error::InvalidType(format!(
                    "message encoding {s:?} is not one of cdr, protobuf, json, raw"
                ))
            })
    }
}

/// A topic's type: its name, its message encoding and its schema, with a hash of the three.
/// Cheap to clone. Two types are the same type when their hashes are equal.
#[derive(Clone)]
pub struct TopicType {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    encoding: MessageEncoding,
    schema: Vec<u8>,
    hash: u64,
}

impl TopicType {
    /// A type named `name` (e.g. `sensor_msgs/msg/Imu`: 1 to [`MAX_TYPE_NAME`] bytes of
    /// printable ASCII without spaces) whose messages are encoded as `encoding`, described by
    /// `schema` (at most [`MAX_SCHEMA`] bytes; ROS 2 definitions and JSON Schemas are UTF-8).
    /// The schema is checked for size and text here; its content is parsed by the tools that
    /// decode with it.
    pub fn new(
        name: &str,
        encoding: MessageEncoding,
        schema: impl Into<Vec<u8>>,
    ) -> Result<TopicType, Error> {
        let schema = schema.into();
        check_name(name)?;
        if schema.len() > MAX_SCHEMA {
            return Err(Error::InvalidType(format!(
                "the schema of {name} is {} bytes, more than the {MAX_SCHEMA} a type may have",
                schema.len()
            )));
        }
        if matches!(encoding, MessageEncoding::Cdr | MessageEncoding::Json)
            && std::str::from_utf8(&schema).is_err()
        {
            return Err(Error::InvalidType(format!(
                "the {} schema of {name} is not UTF-8 text",
                encoding.schema_encoding()
            )));
        }
        let hash = type_hash(name, encoding, &schema);
        Ok(TopicType {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                encoding,
                schema,
                hash,
            }),
        })
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn encoding(&self) -> MessageEncoding {
        self.inner.encoding
    }

    pub fn schema(&self) -> &[u8] {
        &self.inner.schema
    }

    /// 64-bit FNV-1a over the encoding, the name and the schema (never 0). It tells types
    /// apart; it does not authenticate them (see docs/SECURITY.md).
    pub fn hash(&self) -> u64 {
        self.inner.hash
    }
}

impl PartialEq for TopicType {
    fn eq(&self, other: &TopicType) -> bool {
        self.inner.hash == other.inner.hash
            && self.inner.name == other.inner.name
            && self.inner.encoding == other.inner.encoding
    }
}

impl Eq for TopicType {}

impl std::fmt::Debug for TopicType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicType")
            .field("name", &self.inner.name)
            .field("encoding", &self.inner.encoding)
            .field("schema_bytes", &self.inner.schema.len())
            .field("hash", &format_args!("{:016x}", self.inner.hash))
            .finish()
    }
}

impl std::fmt::Display for TopicType {
    /// `sensor_msgs/msg/Imu (cdr, 1f2e…)`: how errors and tools name a type.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}, {:016x})",
            self.inner.name, self.inner.encoding, self.inner.hash
        )
    }
}

pub(crate) fn check_name(name: &str) -> Result<(), Error> {
    if name.is_empty() || name.len() > MAX_TYPE_NAME {
        return Err(Error::InvalidType(format!(
            "a type name has 1 to {MAX_TYPE_NAME} bytes; {name:?} has {}",
            name.len()
        )));
    }
    if let Some(c) = name.chars().find(|c| !c.is_ascii_graphic()) {
        return Err(Error::InvalidType(format!(
            "type name {name:?} holds {c:?}: a type name is printable ASCII without spaces"
        )));
    }
    Ok(())
}

/// FNV-1a, 64 bits, over `encoding`, a 0, `name`, a 0 and `schema`; 0 (no type) becomes 1.
pub(crate) fn type_hash(name: &str, encoding: MessageEncoding, schema: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let parts: [&[u8]; 5] = [
        encoding.name().as_bytes(),
        &[0],
        name.as_bytes(),
        &[0],
        schema,
    ];
    for b in parts.into_iter().flatten() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_type_is_checked_and_hashed() {
        let t = TopicType::new("std_msgs/msg/String", MessageEncoding::Cdr, "string data").unwrap();
        assert_eq!(t.name(), "std_msgs/msg/String");
        assert_eq!(t.encoding().schema_encoding(), "ros2msg");
        let same = TopicType::new("std_msgs/msg/String", MessageEncoding::Cdr, "string data");
        assert_eq!(t, same.unwrap());
        let other = TopicType::new("std_msgs/msg/String", MessageEncoding::Cdr, "string text");
        assert_ne!(t.hash(), other.as_ref().unwrap().hash());
        assert_ne!(t, other.unwrap());
        assert!(t.to_string().starts_with("std_msgs/msg/String (cdr, "));
    }

    #[test]
    fn bad_types_are_refused() {
        let big = vec![b'a'; MAX_SCHEMA + 1];
        let e = TopicType::new("a/B", MessageEncoding::Raw, big).unwrap_err();
        assert!(e.to_string().contains("more than"), "{e}");
        assert!(TopicType::new("", MessageEncoding::Raw, "").is_err());
        assert!(TopicType::new("a b", MessageEncoding::Raw, "").is_err());
        assert!(TopicType::new(&"x".repeat(MAX_TYPE_NAME + 1), MessageEncoding::Raw, "").is_err());
        assert!(TopicType::new("a/B", MessageEncoding::Cdr, vec![0xff, 0xfe]).is_err());
        assert!(TopicType::new("a/B", MessageEncoding::Protobuf, vec![0xff, 0xfe]).is_ok());
        assert!("cbor".parse::<MessageEncoding>().is_err());
        assert_eq!(
            "protobuf".parse::<MessageEncoding>().unwrap(),
            MessageEncoding::Protobuf
        );
    }
}
