//! Any datagram through the frame decoder: it returns a frame or an error, never panics; a
//! decoded frame is exactly the datagram (`wire_len` is its length, and encoding it again gives
//! the same bytes but for the NAK's reserved word and a batch's zero padding), a DATA fragment
//! lies within its message, and a BATCH splits into exactly the messages it counts.
#![no_main]

use ferry::udp::frame::{decode, Frame, Kind, NakEntry, DATA_HEADER};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(f) = decode(data) else {
        return;
    };
    assert_eq!(f.wire_len(), data.len(), "{f:?}");
    let mut expected = data.to_vec();
    match f {
        Frame::Data {
            common,
            msg_len,
            offset,
            payload,
            ..
        } => {
            assert_eq!(common.kind, Kind::Data);
            assert!(offset as usize + payload.len() <= msg_len as usize);
            assert!(!payload.is_empty() || msg_len == 0);
            assert_eq!(payload, &data[DATA_HEADER..]);
        }
        Frame::Heartbeat {
            common,
            next_seq,
            oldest_seq,
            history_from,
            ..
        } => {
            assert_eq!(common.kind, Kind::Heartbeat);
            assert!(oldest_seq <= next_seq && history_from <= next_seq);
        }
        Frame::Nak {
            common, entries, ..
        } => {
            assert_eq!(common.kind, Kind::Nak);
            let list: Vec<NakEntry> = entries.iter().collect();
            assert_eq!(list.len(), entries.len());
            assert_eq!(list.is_empty(), entries.is_empty());
            // Bytes 36..40 are reserved (sent as 0, not checked on receipt).
            expected[36..40].fill(0);
        }
        Frame::Status { common, .. } => assert_eq!(common.kind, Kind::Status),
        Frame::Bye { common, .. } => assert_eq!(common.kind, Kind::Bye),
        Frame::Batch {
            common, messages, ..
        } => {
            assert_eq!(common.kind, Kind::Batch);
            let mut split = 0;
            for (i, _, _) in messages.iter() {
                assert_eq!(i, split);
                split += 1;
            }
            assert_eq!(
                split,
                messages.len() as u64,
                "every counted message splits out"
            );
        }
    }
    // Encoded again, it is the datagram (a batch's padding is zeroes: decoding checks it).
    let mut again = Vec::with_capacity(data.len());
    f.encode(&mut again);
    assert_eq!(again, expected);
});
