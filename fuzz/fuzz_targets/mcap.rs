//! Any bytes as a recording, through the reader `ferry play` uses: it yields channels, messages
//! and metadata or an error, never panics, and what it yields respects its bounds (a ferry
//! channel's payloads are the framing's count of elements exactly).
#![no_main]

use std::io::Cursor;
use std::path::Path;

use ferry_record::reader::{Decoding, Event, McapReader, ReadLimits};
use libfuzzer_sys::fuzz_target;

const LIMITS: ReadLimits = ReadLimits {
    max_record: 1 << 20,
    max_channels: 64,
};

fuzz_target!(|data: &[u8]| {
    let mut reader = McapReader::new(Path::new("fuzz.mcap"), Cursor::new(data), LIMITS);
    let mut events = 0usize;
    while let Some(ev) = reader.next_event() {
        let Ok(ev) = ev else { break };
        events += 1;
        // Every event comes from at least one record header (9 bytes) of the input, or of a
        // chunk no larger than the limit.
        assert!(events <= data.len() + LIMITS.max_record);
        match ev {
            Event::Channel(c) => assert!(c.topic.len() <= 1024),
            Event::Message(m) => {
                let ch = &reader.channels()[&m.channel];
                if let Decoding::Ferry(kind) = ch.decoding {
                    let element = if kind == ferry_record::PayloadType::U32 {
                        4
                    } else {
                        1
                    };
                    assert_eq!(m.payload.len() % element, 0);
                }
                assert!(m.payload.len() <= LIMITS.max_record);
            }
            Event::Metadata(_) => {}
        }
    }
    assert!(reader.channels().len() <= LIMITS.max_channels);
});
