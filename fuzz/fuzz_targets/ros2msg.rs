//! Any bytes as a ROS 2 message definition and a CDR message of it, through what `ferry echo`
//! and `ferry record` decode typed topics with: the input's first two bytes give the schema's
//! length, the schema follows, the message is the rest. Parsing and decoding end in a value or
//! an error, never a panic; a decoded message holds no more values than it had bytes (every
//! value takes at least one), and what decodes encodes again.
#![no_main]

use ferry_types::ros2msg::MessageSet;
use ferry_types::{cdr, Value};
use libfuzzer_sys::fuzz_target;

/// Leaves of a decoded value (an empty message counts as one: it takes a byte on the wire).
fn leaves(v: &Value) -> usize {
    match v {
        Value::Seq(items) => items.iter().map(leaves).sum(),
        Value::Struct(fields) if fields.is_empty() => 1,
        Value::Struct(fields) => fields.iter().map(|(_, v)| leaves(v)).sum(),
        _ => 1,
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let n = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
    let (schema, message) = data[2..].split_at(n);
    let Ok(text) = std::str::from_utf8(schema) else {
        return;
    };
    let Ok(set) = MessageSet::parse("fuzz/Msg", text) else {
        return;
    };
    if let Ok(v) = cdr::decode(&set, message) {
        assert!(leaves(&v) <= message.len());
        let json: serde_json::Value = serde_json::from_str(&v.to_json()).expect("valid JSON");
        // Strings that were not UTF-8, NaN and infinities do not come back the same; the
        // encoding is still a message of the type.
        if let Ok(bytes) = cdr::encode(&set, &json) {
            cdr::decode(&set, &bytes).expect("what ferry encodes, it decodes");
        }
    }
});
