//! Sequences of datagrams into a live receiver core: whatever arrives, it neither panics nor
//! holds more than its buffer bound, and it keeps delivering.
#![no_main]

use ferry::udp::frame::decode;
use ferry::udp::receiver::{Receiver, ReceiverConfig};
use ferry::udp::sender::{Dest, Sink};
use libfuzzer_sys::fuzz_target;

struct Nowhere;
impl Sink for Nowhere {
    fn send(&mut self, _: Dest, _: &[u8], _: usize) {}
}

fuzz_target!(|data: &[u8]| {
    let cfg = ReceiverConfig {
        max_message: 1 << 16,
        buffer_bytes: 1 << 20,
        ..ReceiverConfig::default()
    };
    let mut rx = Receiver::new(1, 0, cfg);
    let mut now = 0u64;
    // The input is a list of datagrams, each prefixed by a one-byte length.
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let (datagram, tail) = tail.split_at((len as usize).min(tail.len()));
        rest = tail;
        now += 100_000;
        if let Ok(f) = decode(datagram) {
            rx.on_frame(now, &f);
        }
        rx.tick(now, &mut Nowhere);
        while let Some(d) = rx.take(now) {
            rx.recycle(d.data);
        }
    }
});
