//! A shared-memory ring whose every shared word and byte is the fuzzer's (the input format is
//! `ferry_fuzz::RingOp`): between the operations of a reader and of the writer it rewrites the
//! record bytes and the header's words (head, last, next sequence number, reserve, hold,
//! frontier, sleepers, the readers' cursors and owners, the history word), as any process that
//! maps a ring could.
//! Whatever they say, no call panics or runs without bound, a record handed out lies inside the
//! ring's double mapping and within the maximum message, and a latest reader's copy is as long
//! as its record says. The ring is a real one: a POSIX shared-memory object mapped twice in a
//! row, read and written through the same `ShmBytes` a subscriber and a publisher use.
#![no_main]

use std::sync::atomic::Ordering;

use ferry::shm::ring::{self, Reader, RingBytes, RingHeader, Step, Writer};
use ferry::shm::ShmBytes;
use ferry::sys::{shm_unlink, Mapping, ShmObject};
use ferry_fuzz::{Bytes, RingOp, RingSetup, RING_CAPACITIES};
use libfuzzer_sys::fuzz_target;

/// A ring's bytes: one shared-memory object mapped twice, made once per process and capacity.
struct Ring {
    bytes: ShmBytes,
    // Kept for the mapping's and the object's lifetimes (declared after `bytes`).
    _map: Mapping,
    _obj: ShmObject,
}

impl Ring {
    fn new(capacity: u64) -> Ring {
        let name = format!("ferry-fuzz-ring-{}-{capacity}", std::process::id());
        let _ = shm_unlink(&name);
        let obj = ShmObject::create(&name, capacity, 0o600).expect("a shared-memory object");
        let map = Mapping::map_ring(&obj, 0, capacity as usize).expect("the double mapping");
        let _ = shm_unlink(&name);
        // SAFETY: `map_ring` mapped the object's `capacity` bytes twice in a row at this
        // address; `map` stays alive beside `bytes` in this struct.
        let bytes = unsafe { ShmBytes::new(map.as_ptr(), capacity) };
        Ring {
            bytes,
            _map: map,
            _obj: obj,
        }
    }
}

thread_local! {
    static RINGS: [Ring; 2] = RING_CAPACITIES.map(Ring::new);
}

/// Checks what a reader handed out: inside the double mapping, within the maximum message.
fn check_record(rec: &ring::Record, capacity: u64, max_len: u64) {
    assert!(
        rec.len <= max_len,
        "a record of {} bytes, above {max_len}",
        rec.len
    );
    assert!(
        rec.offset < capacity && rec.offset % 8 == 0,
        "offset {}",
        rec.offset
    );
    assert!(rec.offset + rec.len <= 2 * capacity);
    assert_eq!(rec.end, rec.pos + ring::record_len(rec.len));
}

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let setup = RingSetup::read(&mut input);
    let (cap, max_len) = (setup.capacity, setup.max_len);
    RINGS.with(|rings| {
        let mem = &rings[RING_CAPACITIES.iter().position(|&c| c == cap).unwrap()].bytes;
        // SAFETY: the first mapping's `cap` bytes (the second maps the same memory); nothing
        // else in this process touches the ring now.
        unsafe { std::ptr::write_bytes(mem.ptr(0), 0, cap as usize) };
        let hdr = Box::new(RingHeader::new());
        // Half the inputs (odd maximum messages) have a writer that keeps history.
        let mut writer = Writer::new(&hdr, cap, setup.reliable);
        if max_len % 2 == 1 {
            writer = writer.with_history(&hdr, 3);
        }
        let mut reader = Reader::join(&hdr, cap, max_len, 0, 1, setup.reliable);
        let mut copy = Vec::new();
        while let Some(op) = RingOp::read(&mut input) {
            match op {
                RingOp::Scribble { word, value } => {
                    mem.store_word(word % (cap / 8) * 8, value, Ordering::Relaxed)
                }
                RingOp::Header { which, value } => {
                    let w = match which {
                        0 => &hdr.head.end,
                        1 => &hdr.head.last,
                        2 => &hdr.head.next_seq,
                        3 => &hdr.reserve.end,
                        4 => &hdr.reserve.hold,
                        5 => &hdr.reserve.frontier,
                        6 => &*hdr.sleepers,
                        7 => &hdr.readers[0].cursor,
                        8 => &hdr.readers[0].owner,
                        9 => &hdr.readers[1].cursor,
                        10 => &hdr.readers[1].owner,
                        _ => &hdr.head.history,
                    };
                    w.store(value, Ordering::Release);
                }
                RingOp::Read => {
                    let read = if setup.reliable {
                        reader.peek(&hdr, mem).map(|found| {
                            if let Some(rec) = found {
                                check_record(&rec, cap, max_len);
                                reader.release(&hdr, rec.end);
                            }
                        })
                    } else {
                        reader.read_latest(&hdr, mem, &mut copy).map(|found| {
                            if let Some(rec) = found {
                                check_record(&rec, cap, max_len);
                                if rec.held {
                                    reader.unhold(&hdr);
                                } else {
                                    assert_eq!(copy.len() as u64, rec.len);
                                }
                            }
                        })
                    };
                    // A subscriber leaves a ring it found corrupt; a new one may join it.
                    if read.is_err() {
                        reader.leave(&hdr);
                        reader = Reader::join(&hdr, cap, max_len, 0, 1, setup.reliable);
                    }
                }
                RingOp::Step => {
                    if setup.reliable {
                        match reader.step(&hdr, mem) {
                            Step::Message(rec) => {
                                check_record(&rec, cap, max_len);
                                reader.release(&hdr, rec.end);
                            }
                            Step::Padding(end) => {
                                reader.release(&hdr, end);
                            }
                            Step::Corrupt => {
                                reader.leave(&hdr);
                                reader = Reader::join(&hdr, cap, max_len, 0, 1, setup.reliable);
                            }
                            Step::Empty => {}
                        }
                    }
                }
                RingOp::Write { len, commit } => {
                    let len = len % (max_len + 1);
                    writer.skip_to_window(&hdr, mem, len);
                    if let Ok(r) = writer.try_reserve(&hdr, mem, len) {
                        assert_eq!(r.payload_len, len);
                        let at = r.payload_offset(cap);
                        assert!(at % 8 == 0 && at + len <= 2 * cap);
                        // SAFETY: inside the double mapping (checked above).
                        unsafe { std::ptr::write_bytes(mem.ptr(at), 0xA5, len as usize) };
                        if commit {
                            writer.commit(&hdr, mem, r);
                        } else {
                            writer.abandon(&hdr, mem, r);
                        }
                    }
                }
                RingOp::WriterWaits { len } => {
                    let len = len % (max_len + 1);
                    let _ = writer.laggards(&hdr, len);
                    let _ = writer.announce_wait(&hdr, len);
                    writer.end_wait(&hdr);
                    if let Some((word, _slot)) = writer.holder() {
                        writer.drop_hold(&hdr, word);
                    }
                }
                RingOp::ReaderSleeps => {
                    let _ = reader.has_data(&hdr);
                    let _ = reader.announce_sleep(&hdr);
                    reader.cancel_sleep(&hdr);
                }
                RingOp::Rejoin { slot } => {
                    reader.leave(&hdr);
                    reader = Reader::join(&hdr, cap, max_len, slot, 1, setup.reliable);
                    // What a joiner copies of the history: bounded, each copy within the
                    // maximum message, in sequence.
                    let past = ring::history(&hdr, mem, cap, max_len, reader.position(), 4);
                    assert!(past.len() <= 4);
                    for p in &past {
                        assert!(p.bytes.len() as u64 <= max_len);
                    }
                    for pair in past.windows(2) {
                        assert_eq!(pair[1].seq, pair[0].seq.wrapping_add(1));
                    }
                    // A tool's look at the newest message: bounded by the limit it asks.
                    if let Some(n) = ring::newest(&hdr, mem, cap, max_len, 40) {
                        assert!(n.bytes.len() <= 40 && n.len <= max_len);
                    }
                }
            }
        }
    });
});
