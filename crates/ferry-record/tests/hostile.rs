//! A recording is hostile input: every truncation, a flipped byte anywhere, the wrong magic,
//! giant lengths and a chunk that claims a giant size give an error (or, for a flip the checks
//! cannot see, a file that still reads), never a panic, a hang or a giant allocation.

mod common;

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::Path;

use ferry_record::format::PayloadType;
use ferry_record::reader::{Event, McapReader, ReadLimits};

const LIMITS: ReadLimits = ReadLimits {
    max_record: 1 << 20,
    max_channels: 64,
};

/// Every way a chunk may be compressed (or not).
const COMPRESSIONS: [Option<mcap::Compression>; 3] = [
    None,
    Some(mcap::Compression::Zstd),
    Some(mcap::Compression::Lz4),
];

/// A small valid recording in memory: two chunks (zstd, then lz4 is not mixable in one
/// writer, so zstd throughout), metadata, a summary.
fn valid(compression: Option<mcap::Compression>) -> Vec<u8> {
    let mut w = mcap::WriteOptions::new()
        .compression(compression)
        .chunk_size(Some(256))
        .create(Cursor::new(Vec::new()))
        .unwrap();
    let messages = (0..20u32).map(|seq| {
        let body: Vec<u8> = (0..seq + 1).flat_map(|v| (v * 7).to_le_bytes()).collect();
        (seq, body, seq as u64 * 1000)
    });
    common::write_topic(&mut w, PayloadType::U32, messages);
    w.write_metadata(&mcap::records::Metadata {
        name: "ferry".into(),
        metadata: BTreeMap::from([("k".to_owned(), "v".to_owned())]),
    })
    .unwrap();
    w.finish().unwrap();
    w.into_inner().into_inner()
}

/// Reads everything; the number of messages, or the error's text.
fn read(bytes: &[u8]) -> Result<usize, String> {
    let mut r = McapReader::new(Path::new("hostile.mcap"), Cursor::new(bytes), LIMITS);
    let mut messages = 0;
    // A pass ends: every event consumes input, and the input is finite.
    while let Some(ev) = r.next_event() {
        if let Event::Message(_) = ev.map_err(|e| e.to_string())? {
            messages += 1;
        }
    }
    Ok(messages)
}

#[test]
fn a_valid_file_reads_whole() {
    for c in COMPRESSIONS {
        assert_eq!(read(&valid(c)), Ok(20));
    }
}

#[test]
fn every_truncation_is_an_error() {
    for c in [None, Some(mcap::Compression::Zstd)] {
        let bytes = valid(c);
        for len in 0..bytes.len() {
            let r = read(&bytes[..len]);
            assert!(
                r.is_err(),
                "{c:?}: truncated to {len} of {} read as {r:?}",
                bytes.len()
            );
        }
    }
    let err = read(&valid(None)[..100]).unwrap_err();
    assert!(err.contains("not a usable MCAP recording"), "{err}");
}

#[test]
fn a_flipped_byte_anywhere_never_panics() {
    for c in COMPRESSIONS {
        let bytes = valid(c);
        let mut refused = 0;
        for i in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[i] ^= flip;
                if read(&b).is_err() {
                    refused += 1;
                }
            }
        }
        // CRCs, framing checks and structure catch most flips.
        assert!(refused > bytes.len(), "{c:?}: only {refused} refused");
    }
}

#[test]
fn not_mcap_is_said_plainly() {
    let err = read(b"PK\x03\x04 this is a zip file, not a recording").unwrap_err();
    assert!(err.contains("not an MCAP file"), "{err}");
    assert!(read(b"").is_err());
}

/// The magic, then a record of `opcode` whose length field says `len`, then `body`.
fn crafted(opcode: u8, len: u64, body: &[u8]) -> Vec<u8> {
    let mut b = mcap::MAGIC.to_vec();
    // A header record first, as every MCAP file has.
    b.push(0x01);
    b.extend_from_slice(&8u64.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.push(opcode);
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(body);
    b
}

#[test]
fn giant_lengths_are_refused_without_allocating_them() {
    for len in [u64::MAX, 1 << 40, (1 << 20) + 1] {
        for opcode in [0x03u8, 0x04, 0x05, 0x0c, 0x06] {
            let r = read(&crafted(opcode, len, &[0u8; 64]));
            assert!(r.is_err(), "opcode {opcode:#x} length {len}: {r:?}");
        }
    }
}

#[test]
fn a_chunk_claiming_a_giant_uncompressed_size_is_refused() {
    // Chunk: message_start, message_end, uncompressed_size, uncompressed_crc, compression,
    // compressed_size, records.
    let mut body = Vec::new();
    body.extend_from_slice(&0u64.to_le_bytes());
    body.extend_from_slice(&0u64.to_le_bytes());
    body.extend_from_slice(&(1u64 << 62).to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    body.extend_from_slice(&4u32.to_le_bytes());
    body.extend_from_slice(b"zstd");
    let records = [0x28u8, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0];
    body.extend_from_slice(&(records.len() as u64).to_le_bytes());
    body.extend_from_slice(&records);
    let r = read(&crafted(0x06, body.len() as u64, &body));
    assert!(r.is_err(), "{r:?}");
}

#[test]
fn a_ferry_message_with_a_wrong_count_is_refused() {
    let mut w = mcap::Writer::new(Cursor::new(Vec::new())).unwrap();
    let kind = PayloadType::U32;
    let schema = w
        .add_schema(kind.schema_name(), "ros2msg", kind.schema_text().as_bytes())
        .unwrap();
    let ch = w.add_channel(schema, "t", "cdr", &BTreeMap::new()).unwrap();
    let header = mcap::records::MessageHeader {
        channel_id: ch,
        sequence: 0,
        log_time: 0,
        publish_time: 0,
    };
    // Says 1000 values, holds one.
    w.write_to_known_channel(&header, &[0, 1, 0, 0, 0xe8, 0x03, 0, 0, 1, 2, 3, 4])
        .unwrap();
    w.finish().unwrap();
    let err = read(&w.into_inner().into_inner()).unwrap_err();
    assert!(
        err.contains("says 1000 u32 elements but holds 4 bytes"),
        "{err}"
    );
}

#[test]
fn a_foreign_file_plays_its_bytes_as_they_are() {
    let mut w = mcap::Writer::new(Cursor::new(Vec::new())).unwrap();
    let ch = w
        .add_channel(0, "json/topic", "json", &BTreeMap::new())
        .unwrap();
    let header = mcap::records::MessageHeader {
        channel_id: ch,
        sequence: 0,
        log_time: 5,
        publish_time: 5,
    };
    w.write_to_known_channel(&header, br#"{"a":1}"#).unwrap();
    w.finish().unwrap();
    let bytes = w.into_inner().into_inner();
    let mut r = McapReader::new(Path::new("foreign.mcap"), Cursor::new(&bytes[..]), LIMITS);
    let mut payloads = Vec::new();
    while let Some(ev) = r.next_event() {
        if let Event::Message(m) = ev.unwrap() {
            payloads.push(m.payload);
        }
    }
    assert_eq!(payloads, vec![br#"{"a":1}"#.to_vec()]);
}
