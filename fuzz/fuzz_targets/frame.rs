//! Any datagram through the frame decoder: it returns a frame or an error, never panics; a
//! decoded frame is exactly the datagram (`wire_len` is its length, and encoding it again gives
//! the same bytes but for the NAK's reserved word and a batch's zero padding), a DATA fragment
//! lies within its message, and a BATCH splits into exactly the messages it counts.
#![no_main]

use ferry::udp::frame::{self, decode, Frame, Kind, NakEntry, DATA_HEADER};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(f) = decode(data) else {
        return;
    };
    assert_eq!(f.wire_len(), data.len(), "{f:?}");
    let mut again = Vec::with_capacity(data.len());
    let mut expected = data.to_vec();
    match f {
        Frame::Data {
            common,
            seq,
            msg_len,
            offset,
            stream_pos,
            payload,
        } => {
            assert_eq!(common.kind, Kind::Data);
            assert!(offset as usize + payload.len() <= msg_len as usize);
            assert!(!payload.is_empty() || msg_len == 0);
            assert_eq!(payload, &data[DATA_HEADER..]);
            frame::put_data(
                &mut again, &common, seq, msg_len, offset, stream_pos, payload,
            );
        }
        Frame::Heartbeat {
            common,
            next_seq,
            oldest_seq,
            challenge,
            history_from,
        } => {
            assert_eq!(common.kind, Kind::Heartbeat);
            assert!(oldest_seq <= next_seq && history_from <= next_seq);
            frame::put_heartbeat(
                &mut again,
                &common,
                next_seq,
                oldest_seq,
                challenge,
                history_from,
            );
        }
        Frame::Nak {
            common,
            receiver,
            entries,
        } => {
            assert_eq!(common.kind, Kind::Nak);
            let list: Vec<NakEntry> = entries.iter().collect();
            assert_eq!(list.len(), entries.len());
            assert_eq!(list.is_empty(), entries.is_empty());
            frame::put_nak(&mut again, &common, receiver, &list);
            // Bytes 36..40 are reserved (sent as 0, not checked on receipt).
            expected[36..40].fill(0);
        }
        Frame::Status {
            common,
            receiver,
            consumed_pos,
            window,
            consumed_seq,
            echo,
            arrived_pos,
            received_bytes,
        } => {
            assert_eq!(common.kind, Kind::Status);
            frame::put_status(
                &mut again,
                &common,
                receiver,
                consumed_pos,
                window,
                consumed_seq,
                echo,
                arrived_pos,
                received_bytes,
            );
        }
        Frame::Bye { common, next_seq } => {
            assert_eq!(common.kind, Kind::Bye);
            frame::put_bye(&mut again, &common, next_seq);
        }
        Frame::Batch {
            common,
            first_seq,
            stream_pos,
            messages,
        } => {
            assert_eq!(common.kind, Kind::Batch);
            let count = messages.len() as u32;
            frame::put_batch_header(&mut again, &common, first_seq, count, stream_pos);
            let mut split = 0;
            for (i, _, msg) in messages.iter() {
                assert_eq!(i, split);
                split += 1;
                frame::put_batched(&mut again, msg);
            }
            assert_eq!(split, u64::from(count), "every counted message splits out");
            // What follows the last message is zero padding.
            assert!(again.len() <= data.len());
            again.resize(data.len(), 0);
        }
    }
    assert_eq!(again, expected);
});
