//! Any message through a service's header reader: it returns a header or nothing, never panics;
//! a header read is exactly what writing it back gives, and a refusal's body reads back whatever
//! its length.
#![no_main]

use ferry::service::wire::{
    put_request, put_response, read_request, read_response, read_too_large, HEADER,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(h) = read_request(data) {
        let mut again = [0u8; HEADER];
        put_request(&mut again, h.client, h.request);
        assert_eq!(&again[..], &data[..HEADER]);
        assert!(read_response(data).is_none(), "a request is no response");
    }
    if let Some(h) = read_response(data) {
        let mut again = [0u8; HEADER];
        put_response(&mut again, h.client, h.request, h.status);
        assert_eq!(&again[..], &data[..HEADER]);
    }
    let _ = read_too_large(data);
});
