//! A publisher's data segment as others open it: a subscriber to read its ring, a tool to look
//! at its newest message. Every field is checked before the ring is mapped (the segment may be
//! forged or damaged).

use std::sync::atomic::Ordering;

use super::layout::{header_bytes, DataBlock, MAGIC_DATA, MAX_PUBLISHERS};
use super::ring;
use super::segment::{open_checked, Segment};
use super::topic::{data_name, Topic, TRANSPORT_SHM};
use super::ShmBytes;
use crate::sys::{self, Mapping};
use crate::Error;

/// A publisher's data segment with its ring mapped.
pub(super) struct OpenRing {
    pub data: Segment<DataBlock>,
    /// Header bytes before the ring.
    pub hb: usize,
    pub capacity: u64,
    pub max_message: u64,
}

/// How the ring is mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mapped {
    /// Read and written (a reader's cursor, sleep bits and holds live in the header), every
    /// page faulted in at once: a subscriber's.
    ToRead,
    /// Read-only, pages faulted in as they are read: a look at a few records.
    ToLook,
}

/// Opens the data segment of the publisher `token` of the topic whose control segment is
/// `control`, checks it, and maps its ring; `None` when it is gone. A ring larger than
/// `max_ring` is refused before it is mapped.
pub(super) fn open_ring(
    control: &str,
    token: u64,
    max_ring: u64,
    mapped: Mapped,
) -> Result<Option<OpenRing>, Error> {
    let hb = header_bytes::<DataBlock>(sys::page_size());
    let name = data_name(control, token);
    let Some((obj, total)) = open_checked(&name, MAGIC_DATA, hb)? else {
        return Ok(None);
    };
    let head = Mapping::map(&obj, 0, hb).map_err(|e| Error::io(format!("mmap {name}"), e))?;
    let probe: Segment<DataBlock> = Segment::from_parts(obj, head, hb);
    let b = probe.block();
    let capacity = b.capacity.load(Ordering::Relaxed);
    let max_message = b.max_message.load(Ordering::Relaxed);
    let layout_err = |detail: String| Error::Layout {
        segment: name.clone(),
        detail,
    };
    if b.publisher_token.load(Ordering::Relaxed) != token {
        return Err(layout_err("it belongs to another publisher".into()));
    }
    if !capacity.is_power_of_two()
        || capacity < sys::page_size() as u64
        || hb as u64 + capacity != total
    {
        return Err(layout_err(format!(
            "ring capacity {capacity} does not match segment size {total}"
        )));
    }
    if max_message == 0 || max_message > ring::max_payload(capacity) {
        return Err(layout_err(format!(
            "maximum message {max_message} does not fit its ring"
        )));
    }
    // Checked before the ring is mapped: a reader's mapping populates every page of it, twice.
    if capacity > max_ring {
        return Err(Error::RingTooLarge {
            segment: name.clone(),
            capacity,
            max: max_ring,
        });
    }
    let Segment { obj, .. } = probe;
    let map = match mapped {
        Mapped::ToRead => Mapping::map_ring(&obj, hb, capacity as usize),
        Mapped::ToLook => Mapping::map_ring_to_look(&obj, hb, capacity as usize),
    }
    .map_err(|e| Error::io(format!("map ring {name}"), e))?;
    Ok(Some(OpenRing {
        data: Segment::from_parts(obj, map, hb),
        hb,
        capacity,
        max_message,
    }))
}

/// The newest message of one publisher of a topic on this host (`admin::last_messages`).
#[derive(Debug, Clone)]
pub struct LastMessage {
    /// The publisher's slot in the topic's directory, its token and node name.
    pub slot: usize,
    pub token: u64,
    pub node: String,
    /// Its sequence number (the publisher numbers its messages from 0).
    pub seq: u64,
    /// The message's length; `bytes` holds at most the first `limit` bytes asked for.
    pub len: u64,
    pub bytes: Vec<u8>,
}

impl Topic {
    /// The newest message of each shared-memory publisher of this topic (a UDP-only publisher
    /// has no ring to look at), at most `limit` bytes of each, read without joining its ring:
    /// the publishers and their subscribers see nothing of the look. A publisher whose newest
    /// record cannot be read now (none yet, a lap's padding, a copy lapped as it was taken) is
    /// left out; a segment that fails its checks is an error in its place. Rings larger than
    /// `max_ring` are not mapped.
    pub fn last_messages(&self, limit: usize, max_ring: u64) -> Vec<Result<LastMessage, Error>> {
        let mut out = Vec::new();
        for i in 0..MAX_PUBLISHERS {
            let p = self.publisher(i);
            // Acquire pairs with the Release in `Owner::set_ready`.
            if p.owner.ready.load(Ordering::Acquire) == 0 {
                continue;
            }
            let token = p.owner.token.load(Ordering::Acquire);
            if token == 0 || p.transport.load(Ordering::Relaxed) & TRANSPORT_SHM == 0 {
                continue;
            }
            let ring = match open_ring(self.name(), token, max_ring, Mapped::ToLook) {
                Ok(Some(r)) => r,
                Ok(None) => continue,
                Err(e) => {
                    out.push(Err(e));
                    continue;
                }
            };
            // SAFETY: the mapping holds the ring twice in a row after `hb` header bytes;
            // `ring.data` owns it and outlives `bytes`, which is only read through below.
            let bytes =
                unsafe { ShmBytes::new(ring.data.map.as_ptr().add(ring.hb), ring.capacity) };
            let found = ring::newest(
                &ring.data.block().ring,
                &bytes,
                ring.capacity,
                ring.max_message,
                limit,
            );
            if let Some(n) = found {
                out.push(Ok(LastMessage {
                    slot: i,
                    token,
                    node: p.owner.node(),
                    seq: n.seq,
                    len: n.len,
                    bytes: n.bytes,
                }));
            }
        }
        out
    }
}
