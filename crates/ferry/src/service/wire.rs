//! The header in front of every request and response body: I/O-free, checked field by field.
//!
//! A request and a response each travel as one message on a topic of ferry's own, behind 16
//! bytes (a multiple of 8, so that a body viewed as `&[u64]` stays aligned; and no more, so that a
//! 32-byte request and its ring record fill one 64-byte cache line):
//!
//! ```text
//! 0      2         3                       4                  8                16
//! | "FS" | version | kind (low 4 bits),    | request id       | client id      | body …
//! |      |         | status (high 4 bits)  | (u32, wrapping)  | (u64)          |
//! ```
//!
//! A request id is the low 32 bits of the client's count of requests: a client tells its
//! requests apart as long as fewer than 2^31 are in flight.
//! `status` is 0 in a request; in a response it says whether the server answered (0) or refused
//! the request (1: larger than it takes; the body then holds the request's length and the
//! server's limit as little-endian u64s).
//! Any other value, another magic, version or kind, or fewer than 24 bytes is malformed: counted
//! and dropped by whoever reads it, never answered.

pub const HEADER: usize = 16;

const MAGIC: [u8; 2] = *b"FS";
const VERSION: u8 = 1;
const KIND_REQUEST: u8 = 1;
const KIND_RESPONSE: u8 = 2;

/// A response's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The server's answer.
    Answer,
    /// The request was larger than the server takes; the body holds the limit.
    TooLarge,
}

impl Status {
    fn code(self) -> u8 {
        match self {
            Status::Answer => 0,
            Status::TooLarge => 1,
        }
    }
}

/// What a header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub client: u64,
    pub request: u32,
    pub status: Status,
}

fn put(out: &mut [u8], kind: u8, status: Status, client: u64, request: u32) {
    out[..2].copy_from_slice(&MAGIC);
    out[2] = VERSION;
    out[3] = kind | status.code() << 4;
    out[4..8].copy_from_slice(&request.to_le_bytes());
    out[8..16].copy_from_slice(&client.to_le_bytes());
}

/// Writes a request's header into the first `HEADER` bytes of `out`.
pub fn put_request(out: &mut [u8], client: u64, request: u32) {
    put(out, KIND_REQUEST, Status::Answer, client, request);
}

/// Writes a response's header into the first `HEADER` bytes of `out`.
pub fn put_response(out: &mut [u8], client: u64, request: u32, status: Status) {
    put(out, KIND_RESPONSE, status, client, request);
}

fn read(msg: &[u8], kind: u8) -> Option<Header> {
    let h: &[u8; HEADER] = msg.get(..HEADER)?.try_into().ok()?;
    let [m0, m1, version, kind_status, r0, r1, r2, r3, c @ ..] = *h;
    // Magic, version, kind and status as one word against the one a well-formed header of this
    // kind has with status 0: the only other status is 1 (bit 28: the fourth byte's high half),
    // and only a response carries it.
    let first = u32::from_le_bytes([m0, m1, version, kind_status]);
    let status = match first ^ u32::from_le_bytes([MAGIC[0], MAGIC[1], VERSION, kind]) {
        0 => Status::Answer,
        x if x == 1 << 28 && kind == KIND_RESPONSE => Status::TooLarge,
        _ => return None,
    };
    Some(Header {
        client: u64::from_le_bytes(c),
        request: u32::from_le_bytes([r0, r1, r2, r3]),
        status,
    })
}

/// The body of a `TooLarge` response: the request's length and the server's limit.
pub fn too_large_body(len: usize, max: usize) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&(len as u64).to_le_bytes());
    b[8..].copy_from_slice(&(max as u64).to_le_bytes());
    b
}

/// Reads `too_large_body` (zeroes where a lying server sent less).
pub fn read_too_large(body: &[u8]) -> (usize, usize) {
    let word = |r: std::ops::Range<usize>| {
        body.get(r)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    let clamp = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    (clamp(word(0..8)), clamp(word(8..16)))
}

/// A request's header, or `None` when the message is not a well-formed request.
pub fn read_request(msg: &[u8]) -> Option<Header> {
    read(msg, KIND_REQUEST)
}

/// A response's header, or `None` when the message is not a well-formed response.
pub fn read_response(msg: &[u8]) -> Option<Header> {
    read(msg, KIND_RESPONSE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_request_and_a_response_read_back() {
        let mut m = [0u8; 20];
        put_request(&mut m, 7, 9);
        assert_eq!(
            read_request(&m),
            Some(Header {
                client: 7,
                request: 9,
                status: Status::Answer
            })
        );
        assert_eq!(read_response(&m), None, "a request is no response");
        put_response(&mut m, 7, 9, Status::TooLarge);
        assert_eq!(read_response(&m).unwrap().status, Status::TooLarge);
        assert_eq!(read_request(&m), None, "a response is no request");
    }

    #[test]
    fn short_foreign_and_unknown_headers_are_malformed() {
        let mut m = [0u8; HEADER];
        put_request(&mut m, 1, 2);
        assert_eq!(read_request(&m[..HEADER - 1]), None);
        let mut other = m;
        other[2] = VERSION + 1;
        assert_eq!(read_request(&other), None, "another version");
        let mut other = m;
        other[0] = b'X';
        assert_eq!(read_request(&other), None, "another magic");
        let mut other = m;
        other[3] |= 0x10;
        assert_eq!(read_request(&other), None, "a request carries no status");
        put_response(&mut m, 1, 2, Status::Answer);
        m[3] |= 0x90;
        assert_eq!(read_response(&m), None, "an unknown status");
    }

    /// The header read field by field, as the layout above says: what `read` must agree with.
    fn read_fields(msg: &[u8], kind: u8) -> Option<Header> {
        let h = msg.get(..HEADER)?;
        if h[..2] != MAGIC || h[2] != VERSION || h[3] & 0x0F != kind {
            return None;
        }
        let status = match h[3] >> 4 {
            0 => Status::Answer,
            1 => Status::TooLarge,
            _ => return None,
        };
        if kind == KIND_REQUEST && status != Status::Answer {
            return None;
        }
        Some(Header {
            client: u64::from_le_bytes(h[8..16].try_into().unwrap()),
            request: u32::from_le_bytes(h[4..8].try_into().unwrap()),
            status,
        })
    }

    proptest! {
        #[test]
        fn the_one_word_check_agrees_with_the_fields(
            fourth in any::<u8>(),
            flip in 0usize..5,
            rest in proptest::collection::vec(any::<u8>(), 12..20),
        ) {
            // Headers near a well-formed one (any fourth byte; magic or version changed or not),
            // where a wrong check would differ.
            let mut m = [MAGIC[0], MAGIC[1], VERSION, fourth].to_vec();
            if flip < 3 {
                m[flip] ^= 1;
            }
            m.extend_from_slice(&rest);
            for kind in [KIND_REQUEST, KIND_RESPONSE] {
                prop_assert_eq!(read(&m, kind), read_fields(&m, kind));
            }
        }

        #[test]
        fn any_bytes_read_without_panic_and_round_trip_when_well_formed(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
            client: u64,
            request: u32,
        ) {
            for kind in [KIND_REQUEST, KIND_RESPONSE] {
                prop_assert_eq!(read(&bytes, kind), read_fields(&bytes, kind));
            }
            let mut m = bytes.clone();
            m.resize(m.len().max(HEADER), 0);
            put_response(&mut m, client, request, Status::Answer);
            let h = read_response(&m).unwrap();
            prop_assert_eq!((h.client, h.request), (client, request));
        }
    }
}
