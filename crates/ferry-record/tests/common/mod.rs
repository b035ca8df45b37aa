//! What both test files write: recordings of one topic made without ferry's recorder.

use std::collections::BTreeMap;
use std::io::{Seek, Write};

use ferry_record::format::{self, PayloadType};

/// Writes topic `t` of type `kind` into `w` as ferry's recorder lays it out (the type's prefix,
/// then the body): each of `messages` is a sequence number, a body and a time (its log and
/// publish time).
pub fn write_topic<W: Write + Seek>(
    w: &mut mcap::Writer<W>,
    kind: PayloadType,
    messages: impl IntoIterator<Item = (u32, Vec<u8>, u64)>,
) {
    let schema = w
        .add_schema(kind.schema_name(), "ros2msg", kind.schema_text().as_bytes())
        .unwrap();
    let ch = w.add_channel(schema, "t", "cdr", &BTreeMap::new()).unwrap();
    for (seq, body, t) in messages {
        let mut data = format::prefix(kind, body.len()).unwrap().to_vec();
        data.extend_from_slice(&body);
        let header = mcap::records::MessageHeader {
            channel_id: ch,
            sequence: seq,
            log_time: t,
            publish_time: t,
        };
        w.write_to_known_channel(&header, &data).unwrap();
    }
}
