//! `/api/last`: the newest message of each shared-memory publisher of one topic, read without
//! subscribing (`admin::last_messages`: the publishers and subscribers see nothing of it), as
//! hex and, when the topic has a type, decoded by it.

use ferry::MessageEncoding;
use serde::Serialize;

/// Bytes copied of each message: a typed message up to this long is decoded whole.
pub const COPIED: usize = 64 * 1024;
/// Bytes of each message shown as hex.
pub const HEX: usize = 256;
/// Rings the monitor looks into (a subscriber maps up to 1 GiB by default; a look maps only the
/// pages it reads).
const MAX_RING: u64 = 1 << 30;

#[derive(Serialize)]
pub struct Last {
    pub messages: Vec<Message>,
    /// Publishers whose segment could not be read, with why.
    pub unreadable: Vec<String>,
    /// Why the messages are not decoded, when the topic has a type that cannot be used.
    pub type_problem: Option<String>,
}

#[derive(Serialize)]
pub struct Message {
    pub node: String,
    pub slot: usize,
    pub seq: u64,
    /// The message's length, and its first `HEX` bytes as hex.
    pub len: u64,
    pub hex: String,
    /// The message decoded by the topic's type, as JSON text with the fields in the schema's
    /// order, or why it is not decoded.
    pub decoded: Option<String>,
    pub decode_error: Option<String>,
}

/// The newest messages of `topic` in `domain`; a bad name is an error (the request's fault).
pub fn last(domain: &str, topic: &str) -> Result<Last, ferry::Error> {
    let found = ferry::admin::last_messages(domain, topic, COPIED, MAX_RING)?;
    let mut type_problem = None;
    let codec = match ferry::admin::topic_type(domain, topic) {
        Ok(Some(t)) if t.encoding() == MessageEncoding::Raw => None,
        Ok(Some(t)) => ferry_types::Codec::new(&t)
            .map_err(|e| type_problem = Some(format!("{t}: {e}")))
            .ok(),
        Ok(None) => None,
        Err(e) => {
            type_problem = Some(e.to_string());
            None
        }
    };
    let mut out = Last {
        messages: Vec::new(),
        unreadable: Vec::new(),
        type_problem,
    };
    for m in found {
        let m = match m {
            Ok(m) => m,
            Err(e) => {
                out.unreadable.push(e.to_string());
                continue;
            }
        };
        let (decoded, decode_error) = match &codec {
            None => (None, None),
            Some(_) if (m.bytes.len() as u64) < m.len => (
                None,
                Some(format!("longer than the {COPIED} bytes the monitor copies")),
            ),
            Some(c) => match c.decode(&m.bytes) {
                Ok(v) => (Some(v.to_json()), None),
                Err(e) => (None, Some(e.to_string())),
            },
        };
        out.messages.push(Message {
            node: m.node,
            slot: m.slot,
            seq: m.seq,
            len: m.len,
            hex: ferry_types::hex(&m.bytes[..m.bytes.len().min(HEX)]),
            decoded,
            decode_error,
        });
    }
    Ok(out)
}
