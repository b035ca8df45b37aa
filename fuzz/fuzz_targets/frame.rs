//! Any datagram through the frame decoder: it returns (a frame or an error), never panics, and a
//! decoded DATA fragment always lies within its message.
#![no_main]

use ferry::udp::frame::{decode, Frame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Frame::Data {
        msg_len,
        offset,
        payload,
        ..
    }) = decode(data)
    {
        assert!(offset as usize + payload.len() <= msg_len as usize);
    }
    if let Ok(Frame::Nak { entries, .. }) = decode(data) {
        assert_eq!(entries.iter().count(), entries.len());
    }
});
