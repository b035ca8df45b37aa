//! Typed ferry topics, decoded and encoded: what `ferry echo`, `ferry pub`, `ferry record` and
//! the Python front use to read and write a topic's messages by field. The library carries a
//! topic's type ([`ferry::TopicType`]: name, encoding, schema); this crate understands the
//! schemas:
//!
//! - `cdr` with a ROS 2 message definition (`ros2msg`): [`ros2msg`] parses it, [`cdr`] decodes
//!   and encodes messages by it;
//! - `protobuf` with a `FileDescriptorSet`: [`protobuf`] decodes and encodes by it;
//! - `json` (any JSON; the JSON Schema is carried, not enforced);
//! - `raw`: bytes, shown as hex.
//!
//! Rust types as typed topics: [`native`] (serde types as ROS 2 CDR with the `serde-cdr`
//! feature, prost messages as protobuf).
//!
//! Schemas and messages are hostile input: see each module for its bounds.

pub mod cdr;
pub mod native;
pub mod protobuf;
pub mod ros2msg;
pub mod text;
pub mod value;

pub use value::Value;

use ferry::{MessageEncoding, TopicType};

/// Why a schema, a message or a text cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TypeError {
    #[error("bad schema: {0}")]
    Schema(String),
    #[error("cannot decode the message: {0}")]
    Decode(String),
    #[error("cannot encode the message: {0}")]
    Encode(String),
}

/// Decodes and encodes the messages of one type.
#[derive(Debug, Clone)]
pub struct Codec {
    topic_type: TopicType,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Cdr(ros2msg::MessageSet),
    Protobuf(protobuf::Protobuf),
    Json,
    Raw,
}

/// The deepest JSON a message may nest.
const MAX_JSON_DEPTH: usize = 64;

impl Codec {
    /// A codec for `t`, its schema parsed (with bounded work).
    pub fn new(t: &TopicType) -> Result<Codec, TypeError> {
        let kind = match t.encoding() {
            MessageEncoding::Cdr => {
                let text = std::str::from_utf8(t.schema())
                    .map_err(|_| TypeError::Schema("a ROS 2 definition is UTF-8 text".into()))?;
                Kind::Cdr(ros2msg::MessageSet::parse(t.name(), text)?)
            }
            MessageEncoding::Protobuf => {
                Kind::Protobuf(protobuf::Protobuf::new(t.name(), t.schema())?)
            }
            MessageEncoding::Json => Kind::Json,
            MessageEncoding::Raw => Kind::Raw,
            other => {
                return Err(TypeError::Schema(format!(
                    "{} is encoded as {other}, which this ferry does not know",
                    t.name()
                )))
            }
        };
        Ok(Codec {
            topic_type: t.clone(),
            kind,
        })
    }

    pub fn topic_type(&self) -> &TopicType {
        &self.topic_type
    }

    /// A message's fields. A raw message is its bytes as a hex string.
    pub fn decode(&self, bytes: &[u8]) -> Result<Value, TypeError> {
        match &self.kind {
            Kind::Cdr(set) => cdr::decode(set, bytes),
            Kind::Protobuf(p) => p.decode(bytes),
            Kind::Json => {
                let v: serde_json::Value = serde_json::from_slice(bytes)
                    .map_err(|e| TypeError::Decode(format!("not JSON: {e}")))?;
                text::from_json(&v, MAX_JSON_DEPTH).map_err(TypeError::Decode)
            }
            Kind::Raw => Ok(Value::Str(hex(bytes))),
        }
    }

    /// A message from its fields (a mapping of field names to values, as `--yaml` or `--json`
    /// text gives them).
    pub fn encode(&self, value: &serde_json::Value) -> Result<Vec<u8>, TypeError> {
        match &self.kind {
            Kind::Cdr(set) => cdr::encode(set, value),
            Kind::Protobuf(p) => p.encode(value),
            Kind::Json => serde_json::to_vec(value).map_err(|e| TypeError::Encode(e.to_string())),
            Kind::Raw => Err(TypeError::Encode(format!(
                "{} is raw: its bytes have no fields to fill in",
                self.topic_type.name()
            ))),
        }
    }
}

/// Bytes as lowercase hex, two digits each.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}
