//! Any datagram through the discovery decoder: it returns a message or an error, never panics,
//! what it returns respects every bound, and it encodes back to itself, in as many bytes (the
//! decoder takes nothing trailing; only reserved flag bits may differ).
#![no_main]

use ferry::udp::discovery::{decode_message, Message, MAX_ENTRIES, MAX_NAME};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(m) = decode_message(data) else {
        return;
    };
    match &m {
        Message::Register => {}
        Message::Announce(a)
        | Message::Relay {
            announcement: a, ..
        } => {
            assert!(a.entries.len() <= MAX_ENTRIES);
            assert!(!a.domain.is_empty() && a.domain.len() <= MAX_NAME);
            for e in &a.entries {
                assert!(e.port != 0);
                assert!(!e.topic.is_empty() && e.topic.len() <= MAX_NAME);
            }
        }
    }
    if let Message::Relay { source, .. } = &m {
        assert!(source.port() != 0 && !source.ip().is_unspecified() && !source.ip().is_multicast());
    }
    let again = m.encode();
    assert_eq!(again.len(), data.len());
    assert_eq!(decode_message(&again), Ok(m));
});
