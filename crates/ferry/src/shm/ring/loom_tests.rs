//! Loom models of the ring protocol: every interleaving (within the preemption bound) of a
//! writer and its readers, with relaxed byte accesses that loom may reorder. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p ferry --release --lib loom`.

use super::*;
use loom::sync::Arc;
use loom::thread;

const CAP: u64 = 64;

fn pattern(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq as u8 + 1).wrapping_mul(17).wrapping_add(i as u8))
        .collect()
}

fn write_blocking(w: &mut Writer, hdr: &RingHeader, mem: &AtomicBytes, seq: u64, len: usize) {
    let r = loop {
        match w.try_reserve(hdr, mem, len as u64) {
            Ok(r) => break r,
            Err(Full) => thread::yield_now(),
        }
    };
    mem.write(r.payload_offset(w.capacity()), &pattern(seq, len));
    w.commit(hdr, mem, r);
}

/// Reads `n` messages reliably, checking order and content.
fn read_all(r: &mut Reader, hdr: &RingHeader, mem: &AtomicBytes, lens: &[usize]) {
    for (seq, &len) in lens.iter().enumerate() {
        let rec = loop {
            match r.peek(hdr, mem).expect("never corrupt") {
                Some(rec) => break rec,
                None => thread::yield_now(),
            }
        };
        assert_eq!(rec.seq, seq as u64);
        let mut buf = vec![0; rec.len as usize];
        mem.read(rec.offset, &mut buf);
        assert_eq!(buf, pattern(seq as u64, len), "torn or overwritten record");
        r.release(hdr, rec.end);
    }
}

fn setup() -> (Arc<RingHeader>, Arc<AtomicBytes>) {
    (Arc::new(RingHeader::new()), Arc::new(AtomicBytes::new(CAP)))
}

/// One reliable reader, records of 24, 32 and 24 bytes in a 64-byte ring: the writer must wait,
/// the third record wraps around the end, and the reader sees every byte intact.
#[test]
fn loom_reliable_one_reader_wraps() {
    loom::model(|| {
        let (hdr, mem) = setup();
        let lens = [8usize, 16, 8];
        let mut r = Reader::join(&hdr, CAP, max_payload(CAP), 0, 1, true);
        let (h2, m2) = (hdr.clone(), mem.clone());
        let reader = thread::spawn(move || read_all(&mut r, &h2, &m2, &lens));
        let mut w = Writer::new(&hdr, CAP, true);
        for (seq, &len) in lens.iter().enumerate() {
            write_blocking(&mut w, &hdr, &mem, seq as u64, len);
        }
        reader.join().unwrap();
    });
}

/// Two reliable readers and a writer whose second record needs the space of the first: with
/// bounded attempts on every side, whatever a reader gets is intact and in order, and the writer
/// never reuses space a reader has not released.
#[test]
fn loom_reliable_two_readers() {
    loom::model(|| {
        let (hdr, mem) = setup();
        let lens = [40usize, 16];
        let readers: Vec<_> = (0..2)
            .map(|slot| {
                let mut r = Reader::join(&hdr, CAP, max_payload(CAP), slot, slot as u64 + 1, true);
                let (h, m) = (hdr.clone(), mem.clone());
                thread::spawn(move || {
                    let mut next = 0;
                    for _ in 0..3 {
                        if let Some(rec) = r.peek(&h, &*m).expect("never corrupt") {
                            assert_eq!(rec.seq, next);
                            let mut buf = vec![0; rec.len as usize];
                            m.read(rec.offset, &mut buf);
                            assert_eq!(
                                buf,
                                pattern(next, lens[next as usize]),
                                "overwritten before release"
                            );
                            r.release(&h, rec.end);
                            next += 1;
                        } else {
                            thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let mut w = Writer::new(&hdr, CAP, true);
        let mut seq = 0;
        for _ in 0..4 {
            if seq == lens.len() {
                break;
            }
            if let Ok(r) = w.try_reserve(&hdr, &*mem, lens[seq] as u64) {
                mem.write(r.payload_offset(CAP), &pattern(seq as u64, lens[seq]));
                w.commit(&hdr, &*mem, r);
                seq += 1;
            } else {
                thread::yield_now();
            }
        }
        for r in readers {
            r.join().unwrap();
        }
    });
}

/// A latest reader racing a writer that laps it: whatever it returns is intact and in order.
#[test]
fn loom_latest_reader_never_returns_a_torn_record() {
    loom::model(|| {
        let (hdr, mem) = setup();
        let mut r = Reader::join(&hdr, CAP, max_payload(CAP), 0, 1, false);
        let (h2, m2) = (hdr.clone(), mem.clone());
        let reader = thread::spawn(move || {
            let mut buf = Vec::new();
            let mut last = None;
            for _ in 0..3 {
                if let Some(rec) = r.read_latest(&h2, &*m2, &mut buf).expect("never corrupt") {
                    assert_eq!(buf, pattern(rec.seq, 16), "torn record returned");
                    assert!(last.is_none_or(|l| rec.seq > l));
                    last = Some(rec.seq);
                }
            }
        });
        let mut w = Writer::new(&hdr, CAP, false);
        for seq in 0..3 {
            write_blocking(&mut w, &hdr, &mem, seq, 16);
        }
        reader.join().unwrap();
    });
}

/// A reader about to sleep and a committing writer: if the reader saw no data, the writer saw
/// its sleeper bit (no lost wake-up).
#[test]
fn loom_no_lost_wakeup_for_a_sleeping_reader() {
    loom::model(|| {
        let (hdr, mem) = setup();
        let mut r = Reader::join(&hdr, CAP, max_payload(CAP), 2, 1, true);
        let (h2, m2) = (hdr.clone(), mem.clone());
        let writer = thread::spawn(move || {
            let mut w = Writer::new(&h2, CAP, true);
            let res = w.try_reserve(&h2, &*m2, 8).unwrap();
            m2.write(res.payload_offset(CAP), &[1; 8]);
            w.commit(&h2, &*m2, res)
        });
        let saw_data = r.announce_sleep(&hdr);
        let woken = writer.join().unwrap();
        assert!(
            saw_data || woken & (1 << 2) != 0,
            "reader would sleep with nobody to wake it"
        );
    });
}

/// A writer about to wait for space and a releasing reader: if the writer saw no room, the
/// reader saw it waiting.
#[test]
fn loom_no_lost_wakeup_for_a_waiting_writer() {
    loom::model(|| {
        let (hdr, mem) = setup();
        let mut r = Reader::join(&hdr, CAP, max_payload(CAP), 0, 1, true);
        let mut w = Writer::new(&hdr, CAP, true);
        write_blocking(&mut w, &hdr, &mem, 0, 40); // 56 of 64 bytes
        let (h2, m2) = (hdr.clone(), mem.clone());
        let reader = thread::spawn(move || {
            let rec = r.peek(&h2, &*m2).unwrap().unwrap();
            r.release(&h2, rec.end)
        });
        let has_room = w.announce_wait(&hdr, 8);
        let saw_waiter = reader.join().unwrap();
        assert!(
            has_room || saw_waiter,
            "writer would sleep with nobody to wake it"
        );
        w.end_wait(&hdr);
    });
}

/// A reader joining while the writer runs: it starts at a record boundary and the writer never
/// overwrites what it has not released.
#[test]
fn loom_reliable_join_during_writes() {
    loom::model(|| {
        let (hdr, mem) = setup();
        let (h2, m2) = (hdr.clone(), mem.clone());
        let writer = thread::spawn(move || {
            let mut w = Writer::new(&h2, CAP, true);
            for seq in 0..3 {
                write_blocking(&mut w, &h2, &m2, seq, 24);
            }
        });
        let mut r = Reader::join(&hdr, CAP, max_payload(CAP), 1, 1, true);
        let mut buf = Vec::new();
        let mut last = None;
        for _ in 0..3 {
            match r.peek(&hdr, &*mem).expect("joined at a record boundary") {
                Some(rec) => {
                    buf.resize(rec.len as usize, 0);
                    mem.read(rec.offset, &mut buf);
                    assert_eq!(buf, pattern(rec.seq, 24));
                    assert!(
                        last.is_none_or(|l| rec.seq == l + 1),
                        "a reliable reader skipped"
                    );
                    last = Some(rec.seq);
                    r.release(&hdr, rec.end);
                }
                None => thread::yield_now(),
            }
        }
        r.leave(&hdr);
        writer.join().unwrap();
    });
}

/// A writer that gives the rest of each lap back (the window) and a reliable reader: the reader
/// steps over the padding records and gets every message, in order and intact, and the writer
/// never writes over what the reader has not released.
#[test]
fn loom_reliable_reader_behind_a_windowed_writer() {
    // 16-byte records in a 32-byte window of a 64-byte ring: the third gives a lap back.
    reader_behind_a_windowed_writer(&[0, 0, 0, 0]);
}

/// A reliable reader reading records of `lens` bytes from a writer with a 32-byte window (half
/// the ring) that calls `skip_to_window` before each.
fn reader_behind_a_windowed_writer(lens: &'static [usize]) {
    loom::model(move || {
        let (hdr, mem) = setup();
        let mut r = Reader::join(&hdr, CAP, max_payload(CAP), 0, 1, true);
        let (h2, m2) = (hdr.clone(), mem.clone());
        let reader = thread::spawn(move || read_all(&mut r, &h2, &m2, lens));
        let mut w = Writer::new(&hdr, CAP, true).with_window(CAP / 2);
        for (seq, &len) in lens.iter().enumerate() {
            w.skip_to_window(&hdr, &*mem, len as u64);
            write_blocking(&mut w, &hdr, &mem, seq as u64, len);
        }
        reader.join().unwrap();
    });
}

/// Records over half the window, which the writer moves to the next half-lap boundary when its
/// reader has released everything: whether the reader's release is seen or not, the reader gets
/// every message in order and intact, and the padding never lands on what it has not read.
#[test]
fn loom_reliable_reader_behind_a_writer_that_moves_large_records() {
    // 24-byte records, a 32-byte window: each goes to offset 0 or 32 when it may.
    reader_behind_a_windowed_writer(&[8, 8, 8]);
}

/// A latest reader's look at the newest record: held in place, its bytes must not change while
/// it reads them twice (yielding between); copied, they must be whole.
fn read_held_or_copied(r: &mut Reader, hdr: &RingHeader, mem: &AtomicBytes, len: usize) {
    let mut buf = Vec::new();
    if let Some(rec) = r.read_latest(hdr, mem, &mut buf).expect("never corrupt") {
        if rec.held {
            let mut bytes = vec![0; len];
            for _ in 0..2 {
                mem.read(rec.offset, &mut bytes);
                assert_eq!(bytes, pattern(rec.seq, len), "a held record changed");
                thread::yield_now();
            }
            r.unhold(hdr);
        } else {
            assert_eq!(buf, pattern(rec.seq, len), "torn record returned");
        }
    }
}

/// A latest reader looks at the newest record (holding it or copying it) once `before` records
/// of `HOLD_MIN` bytes are in a 128-byte ring, while the writer adds more up to `total`. With a
/// `window`, the writer is a reliable one that moves records over half of it to half-lap
/// boundaries (no reliable reader holds it back, so it does every time).
fn held_record_model(window: Option<u64>, before: u64, total: u64) {
    const HOLD_CAP: u64 = 128;
    const LEN: usize = HOLD_MIN as usize;
    loom::model(move || {
        let hdr = Arc::new(RingHeader::new());
        let mem = Arc::new(AtomicBytes::new(HOLD_CAP));
        let mut r = Reader::join(&hdr, HOLD_CAP, LEN as u64, 0, 1, false);
        let mut w = Writer::new(&hdr, HOLD_CAP, window.is_some());
        if let Some(window) = window {
            w = w.with_window(window);
        }
        let send = |w: &mut Writer, seq: u64| {
            if window.is_some() {
                w.skip_to_window(&hdr, &*mem, LEN as u64);
            }
            write_blocking(w, &hdr, &mem, seq, LEN);
        };
        for seq in 0..before {
            send(&mut w, seq);
        }
        let (h2, m2) = (hdr.clone(), mem.clone());
        let reader = thread::spawn(move || read_held_or_copied(&mut r, &h2, &m2, LEN));
        for seq in before..total {
            send(&mut w, seq);
        }
        reader.join().unwrap();
    });
}

/// A latest reader holding a record in place while the writer laps the ring around it: the held
/// bytes never change while held, whatever the interleaving, and a record the reader copies is
/// intact.
#[test]
fn loom_a_held_record_is_never_written_over() {
    // Records of 24 bytes: five fit a lap. Four are there before the reader looks; of three
    // more, the third reaches the oldest records' bytes, held or not.
    held_record_model(None, 4, 7);
}

/// As above, with a reliable writer that moves records over half its window to half-lap
/// boundaries: the padding it commits for that never lands on the held record either.
#[test]
fn loom_a_held_record_is_never_written_over_by_padding_to_a_half_lap() {
    // 24-byte records, a 32-byte window: records go to offsets 0 and 64. Of the two sent after
    // the reader looks, the second goes where the newest record was when it looked.
    held_record_model(Some(32), 2, 4);
}

/// History: a latest writer that keeps its last two messages laps them while a reader joins and
/// copies them. Whatever history the reader gets is intact, consecutive, and ends right before
/// the first message it reads live.
#[test]
fn loom_history_copied_while_the_writer_laps_it() {
    loom::model(|| {
        let (hdr, mem) = setup();
        let lens = [8usize, 16, 8, 16];
        let mut w = Writer::new(&hdr, CAP, false).with_history(&hdr, 2);
        // Two messages before the reader comes: the history it may get.
        for (seq, &len) in lens[..2].iter().enumerate() {
            write_blocking(&mut w, &hdr, &mem, seq as u64, len);
        }
        let (h2, m2) = (hdr.clone(), mem.clone());
        let reader = thread::spawn(move || {
            let mut r = Reader::join(&h2, CAP, max_payload(CAP), 0, 1, false);
            let joined = r.position();
            let past = history(&*h2, &*m2, CAP, max_payload(CAP), joined, 2);
            for pair in past.windows(2) {
                assert_eq!(pair[1].seq, pair[0].seq + 1);
            }
            for p in &past {
                assert_eq!(
                    p.bytes,
                    pattern(p.seq, lens[p.seq as usize]),
                    "torn history"
                );
            }
            // The live message where the reader joined, if it reads it, follows the history.
            let mut buf = Vec::new();
            if let (Some(last), Ok(Some(rec))) = (past.last(), r.read_latest(&h2, &*m2, &mut buf)) {
                if rec.pos == joined {
                    assert_eq!(rec.seq, last.seq + 1, "a gap or a duplicate after history");
                }
            }
        });
        for (seq, &len) in lens.iter().enumerate().skip(2) {
            write_blocking(&mut w, &hdr, &mem, seq as u64, len);
        }
        reader.join().unwrap();
    });
}
