//! Any bytes as a protobuf descriptor set and a message of it, through what `ferry echo` and
//! `ferry pub` use for typed protobuf topics: the input's first two bytes give the descriptor
//! set's length, the set follows, the message is the rest, decoded as the set's first message
//! type. Reading the set and decoding end in a value or an error, never a panic or a stack
//! overflow; what decodes encodes again from its JSON.
#![no_main]

use ferry_types::protobuf::Protobuf;
use libfuzzer_sys::fuzz_target;
use prost_reflect::prost::Message as _;
use prost_reflect::prost_types::FileDescriptorSet;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let n = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
    let (schema, message) = data[2..].split_at(n);
    // The first message of the first file, named as ferry names a type (`package.Message`).
    let Ok(set) = FileDescriptorSet::decode(schema) else {
        return;
    };
    let Some((file, first)) = set
        .file
        .iter()
        .find_map(|f| f.message_type.first().map(|m| (f, m)))
    else {
        return;
    };
    let name = match file.package() {
        "" => first.name().to_owned(),
        package => format!("{package}.{}", first.name()),
    };
    let Ok(p) = Protobuf::new(&name, schema) else {
        return;
    };
    if let Ok(v) = p.decode(message) {
        let json: serde_json::Value = serde_json::from_str(&v.to_json()).expect("valid JSON");
        // Unknown enum numbers, NaN and nulls for unset messages may not read back; what does
        // is a message of the type.
        if let Ok(bytes) = p.encode(&json) {
            p.decode(&bytes).expect("what ferry encodes, it decodes");
        }
    }
});
