//! Protocol Buffers by descriptor: the schema is a `FileDescriptorSet` (what `protoc
//! --include_imports --descriptor_set_out` writes, and what MCAP's `protobuf` schema encoding
//! holds) and the type name is the message's full name (`package.Message`). prost-reflect reads
//! the descriptors and the messages; this module turns a message into a [`Value`] in the order
//! its fields are declared, and text into a message (the proto3 JSON mapping: field names or
//! their JSON names, 64-bit integers as numbers or strings, bytes as base64, enums by name or
//! number).
//!
//! Hostile input: the descriptor set is at most `ferry::MAX_SCHEMA` bytes; a message is decoded
//! by prost, which checks every length against the bytes left and nests at most 100 levels;
//! an unset message field is shown as null rather than expanded (a recursive type would expand
//! forever), so a decoded value is never larger than what the bytes hold plus the declared
//! fields of the messages they hold.

use prost_reflect::prost::Message as _;
use prost_reflect::prost_types::FileDescriptorSet;
use prost_reflect::{
    DescriptorPool, DynamicMessage, Kind, MapKey, MessageDescriptor, ReflectMessage,
};

use crate::value::Value;
use crate::TypeError;

/// Decodes and encodes the messages of one protobuf type.
#[derive(Debug, Clone)]
pub struct Protobuf {
    message: MessageDescriptor,
}

impl Protobuf {
    /// The message `name` (its full name) of the descriptor set `schema`.
    pub fn new(name: &str, schema: &[u8]) -> Result<Protobuf, TypeError> {
        if schema.len() > ferry::MAX_SCHEMA {
            return Err(TypeError::Schema(format!(
                "{} bytes, more than the {} a schema may have",
                schema.len(),
                ferry::MAX_SCHEMA
            )));
        }
        let set = FileDescriptorSet::decode(schema)
            .map_err(|e| TypeError::Schema(format!("not a protobuf FileDescriptorSet: {e}")))?;
        // prost-reflect 0.16 panics on a file of an unknown syntax (it labels the error with a
        // file it has not registered yet): refused here first.
        if let Some(f) = set
            .file
            .iter()
            .find(|f| !matches!(f.syntax.as_deref(), None | Some("proto2") | Some("proto3")))
        {
            return Err(TypeError::Schema(format!(
                "file {:?} of the descriptor set has syntax {:?}; ferry reads proto2 and proto3",
                f.name(),
                f.syntax()
            )));
        }
        // A panic left in the descriptor reader is a refusal of this schema, not the end of the
        // process (fuzzing looks for them: its panic hook aborts before this catches).
        let pool = std::panic::catch_unwind(|| DescriptorPool::from_file_descriptor_set(set))
            .map_err(|_| TypeError::Schema("the protobuf descriptor reader failed on it".into()))?
            .map_err(|e| {
                TypeError::Schema(format!(
                    "not a protobuf FileDescriptorSet ferry can use: {e}"
                ))
            })?;
        let message = pool.get_message_by_name(name).ok_or_else(|| {
            let some: Vec<String> = pool
                .all_messages()
                .take(8)
                .map(|m| m.full_name().to_owned())
                .collect();
            TypeError::Schema(format!(
                "the descriptor set has no message {name} (it has {})",
                if some.is_empty() {
                    "none".to_owned()
                } else {
                    some.join(", ")
                }
            ))
        })?;
        Ok(Protobuf { message })
    }

    pub fn decode(&self, bytes: &[u8]) -> Result<Value, TypeError> {
        let m = DynamicMessage::decode(self.message.clone(), bytes)
            .map_err(|e| TypeError::Decode(e.to_string()))?;
        Ok(message_value(&m))
    }

    pub fn encode(&self, value: &serde_json::Value) -> Result<Vec<u8>, TypeError> {
        let m = DynamicMessage::deserialize(self.message.clone(), value)
            .map_err(|e| TypeError::Encode(format!("{}: {e}", self.message.full_name())))?;
        Ok(m.encode_to_vec())
    }
}

fn message_value(m: &DynamicMessage) -> Value {
    let fields = m
        .descriptor()
        .fields()
        .map(|f| {
            // An unset message field is null: expanding its default would never end for a
            // recursive type.
            let unset_message =
                !f.is_list() && !f.is_map() && f.kind().as_message().is_some() && !m.has_field(&f);
            let v = if unset_message {
                Value::Null
            } else {
                field_value(&m.get_field(&f), &f.kind())
            };
            (f.name().to_owned(), v)
        })
        .collect();
    Value::Struct(fields)
}

fn field_value(v: &prost_reflect::Value, kind: &Kind) -> Value {
    use prost_reflect::Value as P;
    match v {
        P::Bool(b) => Value::Bool(*b),
        P::I32(i) => Value::Int((*i).into()),
        P::I64(i) => Value::Int(*i),
        P::U32(u) => Value::UInt((*u).into()),
        P::U64(u) => Value::UInt(*u),
        P::F32(f) => Value::Float((*f).into()),
        P::F64(f) => Value::Float(*f),
        P::String(s) => Value::Str(s.clone()),
        P::Bytes(b) => Value::Str(base64(b)),
        P::EnumNumber(n) => match kind.as_enum().and_then(|e| e.get_value(*n)) {
            Some(v) => Value::Str(v.name().to_owned()),
            None => Value::Int((*n).into()),
        },
        P::Message(m) => message_value(m),
        P::List(items) => Value::Seq(items.iter().map(|i| field_value(i, kind)).collect()),
        P::Map(map) => {
            let value_kind = kind
                .as_message()
                .map(|entry| entry.map_entry_value_field().kind());
            let mut entries: Vec<(String, Value)> = map
                .iter()
                .map(|(k, v)| {
                    let key = match k {
                        MapKey::Bool(b) => b.to_string(),
                        MapKey::I32(i) => i.to_string(),
                        MapKey::I64(i) => i.to_string(),
                        MapKey::U32(u) => u.to_string(),
                        MapKey::U64(u) => u.to_string(),
                        MapKey::String(s) => s.clone(),
                    };
                    let v = match &value_kind {
                        Some(k) => field_value(v, k),
                        None => Value::Null,
                    };
                    (key, v)
                })
                .collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Struct(entries)
        }
    }
}

/// Standard base64 with padding, as the proto3 JSON mapping writes bytes (and prost-reflect
/// reads them back).
fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ferry.test.Reading` (tests/data/reading.proto), as a descriptor set.
    const READING: &[u8] = include_bytes!("../tests/data/reading.pb");

    #[test]
    fn a_message_round_trips_by_field_name() {
        let p = Protobuf::new("ferry.test.Reading", READING).unwrap();
        let text = r#"{"frame_id":"imu","stamp_ns":"1700000000000000001","x":1.5,
            "values":[0.25,-2],"kind":"KIND_FAST","inner":{"label":"a","count":3},
            "tags":{"b":2,"a":1},"raw":"AAEC"}"#;
        let bytes = p.encode(&serde_json::from_str(text).unwrap()).unwrap();
        let v = p.decode(&bytes).unwrap();
        assert_eq!(
            v.to_json(),
            r#"{"frame_id":"imu","stamp_ns":1700000000000000001,"x":1.5,"values":[0.25,-2.0],"kind":"KIND_FAST","inner":{"label":"a","count":3,"next":null},"tags":{"a":1,"b":2},"raw":"AAEC"}"#
        );
    }

    #[test]
    fn bad_descriptors_names_and_messages_are_refused() {
        assert!(Protobuf::new("ferry.test.Reading", b"\xff\xff\xff").is_err());
        let e = Protobuf::new("ferry.test.Nope", READING)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ferry.test.Reading"), "{e}");
        let p = Protobuf::new("ferry.test.Reading", READING).unwrap();
        // Field 1 (a string) claiming 2^31 bytes.
        assert!(p.decode(b"\x0a\xff\xff\xff\xff\x07").is_err());
        // Inner.next nested 200 deep, past prost's limit of 100: an error, not a stack overflow.
        let mut deep: Vec<u8> = Vec::new();
        for _ in 0..200 {
            let mut outer = vec![0x1a];
            varint(deep.len() as u64, &mut outer);
            outer.extend_from_slice(&deep);
            deep = outer;
        }
        let mut top = vec![0x32];
        varint(deep.len() as u64, &mut top);
        top.extend_from_slice(&deep);
        assert!(p.decode(&top).is_err());
        let e = p
            .encode(&serde_json::json!({"nope": 1}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nope"), "{e}");
    }

    fn varint(mut n: u64, out: &mut Vec<u8>) {
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }

    #[test]
    fn a_descriptor_set_of_an_unknown_syntax_is_refused_without_a_panic() {
        use prost_reflect::prost_types::FileDescriptorProto;
        let set = FileDescriptorSet {
            file: vec![FileDescriptorProto {
                name: Some("a.proto".into()),
                syntax: Some("proto4".into()),
                ..Default::default()
            }],
        };
        let e = Protobuf::new("a.B", &set.encode_to_vec())
            .unwrap_err()
            .to_string();
        assert!(e.contains("proto4"), "{e}");
    }

    #[test]
    fn base64_pads() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"\x00"), "AA==");
        assert_eq!(base64(b"\x00\x01"), "AAE=");
        assert_eq!(base64(b"\x00\x01\x02"), "AAEC");
    }
}
