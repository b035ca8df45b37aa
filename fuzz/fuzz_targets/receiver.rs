//! Sequences of datagrams into a live receiver core, with ticks, takes and verified sessions
//! between them (the input format is `ferry_fuzz::RxOp`): whatever arrives, it never panics,
//! never holds more than its buffer bound or more sessions than its limit, delivers no message
//! longer than its limit, and everything it sends is a valid NAK or STATUS of its own, to the
//! session it concerns, within a datagram.
#![no_main]

use ferry::udp::frame::{decode, Frame};
use ferry::udp::receiver::{Receiver, ReceiverConfig};
use ferry::udp::sender::{Dest, Sink};
use ferry_fuzz::{sent_frames, Bytes, RxOp, RxSetup, RECEIVER_ID, TOPIC};
use libfuzzer_sys::fuzz_target;

/// Checks every datagram the receiver sends.
struct Checked {
    max_datagram: usize,
}

impl Sink for Checked {
    fn send(&mut self, dest: Dest<'_>, data: &mut [u8], segment: usize) {
        for f in sent_frames("receiver", data, segment, self.max_datagram) {
            assert_eq!(dest, Dest::Session(f.common().session));
            match f {
                Frame::Nak { receiver, .. } | Frame::Status { receiver, .. } => {
                    assert_eq!(receiver, RECEIVER_ID)
                }
                f => panic!("a receiver sent {f:?}"),
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let setup = RxSetup::read(&mut input);
    let cfg = ReceiverConfig {
        reliable: setup.reliable,
        max_message: setup.max_message(),
        buffer_bytes: setup.buffer_bytes,
        max_sessions: setup.max_sessions,
        history: setup.history,
        ..ReceiverConfig::default()
    };
    let mut sink = Checked {
        max_datagram: cfg.max_datagram,
    };
    let mut rx = Receiver::new(RECEIVER_ID, TOPIC, cfg.clone());
    let mut now = 1_000u64;
    while let Some(op) = RxOp::read(&mut input) {
        now += 1_000;
        match op {
            RxOp::Datagram(d) => {
                if let Ok(f) = decode(d) {
                    rx.on_frame(now, &f);
                }
            }
            RxOp::Tick(us) => {
                now += u64::from(us) * 1_000;
                rx.tick(now, &mut sink);
            }
            RxOp::Take => {
                if let Some(d) = rx.take(now) {
                    assert!(d.data.len() <= cfg.max_message, "{} bytes", d.data.len());
                    rx.recycle(d.data);
                }
            }
            RxOp::Verify(session) => rx.verify(session),
        }
        assert!(
            rx.buffered() <= cfg.buffer_bytes,
            "{} bytes buffered, the bound is {}",
            rx.buffered(),
            cfg.buffer_bytes
        );
        assert!(
            rx.sessions() <= cfg.max_sessions,
            "{} sessions, the limit is {}",
            rx.sessions(),
            cfg.max_sessions
        );
    }
    // Whatever came, the application can still drain what is ready.
    while let Some(d) = rx.take(now) {
        rx.recycle(d.data);
    }
    assert_eq!(rx.ready(), 0);
});
