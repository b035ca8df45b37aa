//! Unit and property tests of the ring protocol, single-threaded and with real threads.

use super::*;
use proptest::prelude::*;
use std::sync::Arc;

const CAP: u64 = 256;

fn pattern(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq as u8).wrapping_mul(31).wrapping_add(i as u8))
        .collect()
}

fn write_msg(
    w: &mut Writer,
    hdr: &RingHeader,
    mem: &AtomicBytes,
    seq: u64,
    len: usize,
) -> Result<(), Full> {
    let r = w.try_reserve(hdr, mem, len as u64)?;
    mem.write(r.payload_offset(CAP), &pattern(seq, len));
    w.commit(hdr, mem, r);
    Ok(())
}

/// A ring of `CAP` bytes and its writer.
fn ring(reliable: bool) -> (RingHeader, AtomicBytes, Writer) {
    let hdr = RingHeader::new();
    let w = Writer::new(&hdr, CAP, reliable);
    (hdr, AtomicBytes::new(CAP), w)
}

/// A reader of a ring of `CAP` bytes, in reader slot `slot` with `token`.
fn join(hdr: &RingHeader, slot: usize, token: u64, reliable: bool) -> Reader {
    Reader::join(hdr, CAP, max_payload(CAP), slot, token, reliable)
}

/// A ring whose writer keeps its last `keep` messages for late joiners.
fn keeping(reliable: bool, keep: usize) -> (RingHeader, AtomicBytes, Writer) {
    let (hdr, mem, w) = ring(reliable);
    let w = w.with_history(&hdr, keep);
    (hdr, mem, w)
}

/// A ring whose reliable writer keeps small records in the first quarter of each lap.
fn windowed() -> (RingHeader, AtomicBytes, Writer) {
    let (hdr, mem, w) = ring(true);
    (hdr, mem, w.with_window(CAP / 4))
}

/// As `write_msg`, for a writer with a window: it may first give the rest of the lap back.
fn write_windowed(
    w: &mut Writer,
    hdr: &RingHeader,
    mem: &AtomicBytes,
    seq: u64,
    len: usize,
) -> Result<(), Full> {
    w.skip_to_window(hdr, mem, len as u64);
    write_msg(w, hdr, mem, seq, len)
}

/// A copy of the payload of `rec`.
fn record_bytes(mem: &AtomicBytes, rec: &Record) -> Vec<u8> {
    let mut buf = vec![0; rec.len as usize];
    mem.read(rec.offset, &mut buf);
    buf
}

/// As `write_windowed`, which must succeed, and the record `r` then finds next.
fn write_windowed_and_peek(
    w: &mut Writer,
    r: &mut Reader,
    hdr: &RingHeader,
    mem: &AtomicBytes,
    seq: u64,
    len: usize,
) -> Record {
    write_windowed(w, hdr, mem, seq, len).unwrap();
    r.peek(hdr, mem).unwrap().expect("a record")
}

/// Two reliable readers, in reader slots 0 and 1.
fn two_reliable_readers(hdr: &RingHeader) -> [Reader; 2] {
    [join(hdr, 0, 1, true), join(hdr, 1, 2, true)]
}

fn read_reliable(r: &mut Reader, hdr: &RingHeader, mem: &AtomicBytes) -> Option<(u64, Vec<u8>)> {
    let rec = r.peek(hdr, mem).expect("not corrupt")?;
    let buf = record_bytes(mem, &rec);
    r.release(hdr, rec.end);
    Some((rec.seq, buf))
}

/// Reads messages `seqs`, each of `len` bytes as written by `write_msg`, and then nothing.
fn read_all(
    r: &mut Reader,
    hdr: &RingHeader,
    mem: &AtomicBytes,
    seqs: std::ops::Range<u64>,
    len: usize,
) {
    for seq in seqs {
        assert_eq!(read_reliable(r, hdr, mem), Some((seq, pattern(seq, len))));
    }
    assert_eq!(read_reliable(r, hdr, mem), None);
}

#[test]
fn record_len_is_aligned_and_tight() {
    for len in 0..200u64 {
        let r = record_len(len);
        assert_eq!(r % 8, 0);
        assert!(r >= RECORD_HEADER + len && r < RECORD_HEADER + len + 8);
    }
}

#[test]
fn reliable_writer_stops_at_a_full_ring_and_resumes_after_release() {
    let (hdr, mem, mut w) = ring(true);
    let mut r = join(&hdr, 0, 7, true);
    // 48-byte records: five fit in 256 bytes (240), the sixth does not.
    for seq in 0..5 {
        write_msg(&mut w, &hdr, &mem, seq, 32).unwrap();
    }
    assert_eq!(write_msg(&mut w, &hdr, &mem, 5, 32), Err(Full));
    assert_eq!(w.laggards(&hdr, 32), 1, "reader 0 holds the ring");
    assert_eq!(read_reliable(&mut r, &hdr, &mem), Some((0, pattern(0, 32))));
    write_msg(&mut w, &hdr, &mem, 5, 32).unwrap();
    read_all(&mut r, &hdr, &mem, 1..6, 32);
}

#[test]
fn a_reader_that_leaves_no_longer_holds_the_writer() {
    let (hdr, mem, mut w) = ring(true);
    let mut r = join(&hdr, 3, 9, true);
    while write_msg(&mut w, &hdr, &mem, 0, 40).is_ok() {}
    r.leave(&hdr);
    for _ in 0..20 {
        write_msg(&mut w, &hdr, &mem, 0, 40).unwrap();
    }
}

#[test]
fn a_joiner_starts_from_now() {
    let (hdr, mem, mut w) = ring(true);
    for seq in 0..3 {
        write_msg(&mut w, &hdr, &mem, seq, 10).unwrap();
    }
    let mut r = join(&hdr, 1, 1, true);
    assert_eq!(read_reliable(&mut r, &hdr, &mem), None);
    write_msg(&mut w, &hdr, &mem, 3, 10).unwrap();
    assert_eq!(read_reliable(&mut r, &hdr, &mem), Some((3, pattern(3, 10))));
}

#[test]
fn abandoned_reservations_are_stepped_over_without_a_gap_in_seq() {
    let (hdr, mem, mut w) = ring(true);
    let mut r = join(&hdr, 0, 1, true);
    write_msg(&mut w, &hdr, &mem, 0, 8).unwrap();
    let res = w.try_reserve(&hdr, &mem, 20).unwrap();
    w.abandon(&hdr, &mem, res);
    write_msg(&mut w, &hdr, &mem, 1, 8).unwrap();
    assert_eq!(read_reliable(&mut r, &hdr, &mem).unwrap().0, 0);
    let rec = r.peek(&hdr, &mem).unwrap().unwrap();
    assert_eq!((rec.seq, rec.skipped), (1, 0));
}

#[test]
fn latest_reader_skips_lapped_records_and_counts_them() {
    let (hdr, mem, mut w) = ring(false);
    let mut r = join(&hdr, 0, 1, false);
    for seq in 0..50 {
        write_msg(&mut w, &hdr, &mem, seq, 24).unwrap();
    }
    let mut buf = Vec::new();
    let first = r.read_latest(&hdr, &mem, &mut buf).unwrap().unwrap();
    assert_eq!(buf, pattern(first.seq, 24));
    assert!(first.seq > 0, "the reader was lapped and jumped ahead");
    let mut seen = vec![first.seq];
    let mut skipped = first.skipped;
    while let Some(rec) = r.read_latest(&hdr, &mem, &mut buf).unwrap() {
        assert_eq!(buf, pattern(rec.seq, 24));
        skipped += rec.skipped;
        seen.push(rec.seq);
    }
    assert_eq!(*seen.last().unwrap(), 49);
    assert!(seen.windows(2).all(|p| p[1] > p[0]));
    // Everything since the reader joined is accounted for, the jump at the start included (the
    // reader took the writer's next sequence number when it joined): received + skipped = sent.
    assert_eq!(first.skipped, first.seq);
    assert_eq!(seen.len() as u64 + skipped, 50);
}

#[test]
fn a_garbage_header_is_reported_as_corrupt_not_a_panic() {
    let (hdr, mem, mut w) = ring(true);
    let mut r = join(&hdr, 0, 1, true);
    write_msg(&mut w, &hdr, &mem, 0, 8).unwrap();
    mem.write(8, &[0xFF; 8]); // length and tag of the first record
    assert_eq!(r.peek(&hdr, &mem), Err(Corrupt { pos: 0 }));
}

/// A ring forged with positions a lap or less below 2^64: a reliable reader that joins there,
/// reads a plausible record and then polls the mark after it neither overflows nor panics.
#[test]
fn positions_near_the_top_of_u64_do_not_overflow_a_reader() {
    let hdr = RingHeader::new();
    let mem = AtomicBytes::new(CAP);
    let p = (u64::MAX - 63) & !7;
    hdr.head.next_seq.store(5, Ordering::Relaxed);
    hdr.head.end.store(p, Ordering::Relaxed);
    let mut r = join(&hdr, 0, 1, true);
    // A message of no bytes at `p`, committed as number 5, and a commit of number 6 after it.
    mem.write(p % CAP, &record_header(5, 0, false));
    mem.store_word((p + RECORD_HEADER) % CAP, 6, Ordering::Relaxed);
    hdr.head.end.store(p + RECORD_HEADER, Ordering::Release);
    let rec = r.peek(&hdr, &mem).expect("plausible").expect("a record");
    assert_eq!((rec.pos, rec.len, rec.seq), (p, 0, 5));
    r.release(&hdr, rec.end);
    // The mark after it says "committed": the reader looks no further than the ring allows.
    assert!(matches!(r.peek(&hdr, &mem), Ok(None) | Err(_)));
}

/// Runs `f` on a thread and waits for it at most 20 s: a reader that spins fails the test instead
/// of hanging it.
fn returns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(20))
        .expect("the reader returned (it must not spin on a corrupt ring)")
}

fn header(seq: u64, len: u32, kind: u32) -> [u8; 16] {
    record_header(seq, len, kind == KIND_PADDING)
}

/// Byte storage that counts the reads made of it.
struct Counting {
    mem: AtomicBytes,
    reads: std::sync::atomic::AtomicU64,
}

impl RingBytes for Counting {
    fn write(&self, offset: u64, src: &[u8]) {
        self.mem.write(offset, src)
    }
    fn read(&self, offset: u64, dst: &mut [u8]) {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.mem.read(offset, dst)
    }
    fn load_word(&self, offset: u64) -> u64 {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.mem.load_word(offset)
    }
    fn store_word(&self, offset: u64, value: u64, order: Ordering) {
        self.mem.store_word(offset, value, order)
    }
}

/// A ring of padding records only, nothing committed yet.
fn padding_everywhere() -> (Arc<RingHeader>, Arc<Counting>) {
    let hdr = Arc::new(RingHeader::new());
    let mem = Arc::new(Counting {
        mem: AtomicBytes::new(CAP),
        reads: std::sync::atomic::AtomicU64::new(0),
    });
    for at in (0..CAP).step_by(16) {
        mem.write(at, &header(0, 0, KIND_PADDING));
    }
    (hdr, mem)
}

/// What a writer would publish at `head`, the newest record starting at `last`.
fn publish(hdr: &RingHeader, head: u64, last: u64) {
    hdr.head.last.store(last, Ordering::Relaxed);
    hdr.head.end.store(head, Ordering::Relaxed);
    hdr.reserve.end.store(head, Ordering::Relaxed);
}

#[test]
fn a_reader_at_a_mark_sees_the_next_record_by_its_commit_word_alone() {
    let (hdr, mem, mut w) = ring(true);
    let mut r = join(&hdr, 0, 1, true);
    write_msg(&mut w, &hdr, &mem, 0, 10).unwrap();
    assert_eq!(read_reliable(&mut r, &hdr, &mem), Some((0, pattern(0, 10))));
    let first_end = hdr.head.end.load(Ordering::Relaxed);
    // Nothing committed after it: the word at the reader's position is the mark.
    assert_eq!(mem.load_word(first_end % CAP), NOT_COMMITTED);
    assert_eq!(read_reliable(&mut r, &hdr, &mem), None);
    // The next record committed, but `head` as if its store were not visible yet: the reader
    // finds the record by the word at its position.
    write_msg(&mut w, &hdr, &mem, 1, 20).unwrap();
    hdr.head.end.store(first_end, Ordering::Relaxed);
    assert_eq!(read_reliable(&mut r, &hdr, &mem), Some((1, pattern(1, 20))));
}

#[test]
fn a_word_that_is_neither_the_mark_nor_the_next_seq_sends_the_reader_to_head() {
    let (hdr, mem, mut w) = ring(true);
    let mut r = join(&hdr, 0, 1, true);
    for seq in 0..3 {
        write_msg(&mut w, &hdr, &mem, seq, 8).unwrap();
        assert_eq!(
            read_reliable(&mut r, &hdr, &mem),
            Some((seq, pattern(seq, 8)))
        );
    }
    let at = hdr.head.end.load(Ordering::Relaxed);
    // A stale record of an older lap (seq 1) where the next record will go, as a writer that
    // does not mark would leave it; `head` says nothing more was committed.
    mem.write(at % CAP, &header(1, 8, KIND_MESSAGE));
    assert_eq!(r.peek(&hdr, &mem), Ok(None));
    // The next sequence number there is the commit of the next record: taken without `head`.
    mem.write(at % CAP, &header(3, 8, KIND_MESSAGE));
    mem.write(at % CAP + 16, &pattern(3, 8));
    let got = r
        .peek(&hdr, &mem)
        .unwrap()
        .expect("the next seq at a mark is a record");
    assert_eq!((got.pos, got.seq), (at, 3));
}

#[test]
fn a_latest_reader_lapped_before_its_first_read_counts_what_it_missed() {
    let (hdr, mem, mut w) = ring(false);
    for seq in 0..5 {
        write_msg(&mut w, &hdr, &mem, seq, 8).unwrap();
    }
    let mut r = join(&hdr, 0, 1, false);
    // Three rings' worth before the reader looks.
    for seq in 5..5 + 3 * CAP / record_len(8) {
        write_msg(&mut w, &hdr, &mem, seq, 8).unwrap();
    }
    let mut buf = Vec::new();
    let rec = r
        .read_latest(&hdr, &mem, &mut buf)
        .unwrap()
        .expect("the newest record");
    assert!(rec.seq > 5, "lapped: {rec:?}");
    assert_eq!(
        rec.skipped,
        rec.seq - 5,
        "every message since it joined is read or skipped"
    );
}

#[test]
fn a_joining_reader_does_not_trust_the_word_at_its_position() {
    let (hdr, mem, mut w) = ring(true);
    write_msg(&mut w, &hdr, &mem, 0, 8).unwrap();
    let at = hdr.head.end.load(Ordering::Relaxed);
    // Whatever an older lap left at the joiner's position, even a plausible header.
    mem.write(at % CAP, &header(7, 8, KIND_MESSAGE));
    let mut r = join(&hdr, 0, 1, true);
    assert_eq!(r.pos, at);
    assert_eq!(
        r.peek(&hdr, &mem),
        Ok(None),
        "nothing is committed past head"
    );
}

#[test]
fn a_ring_of_padding_with_a_lying_head_is_corrupt_after_bounded_work() {
    // `head` 2^40 bytes past a reliable reader at 0: a writer never gets more than a ring ahead
    // of a reliable reader, so the reader must not walk the padding up to there.
    let (hdr, mem) = padding_everywhere();
    let mut r = join(&hdr, 0, 1, true);
    publish(&hdr, 1 << 40, (1 << 40) - 16);
    let (h, m) = (hdr.clone(), mem.clone());
    let got = returns(move || r.peek(&h, &*m));
    assert_eq!(got, Err(Corrupt { pos: 0 }));

    // Padding a ring long, `head` right after it: stepped over with at most a ring's worth of
    // reads.
    let (hdr, mem) = padding_everywhere();
    let mut r = join(&hdr, 0, 1, true);
    publish(&hdr, CAP, CAP - 16);
    let (h, m) = (hdr.clone(), mem.clone());
    let (got, r) = returns(move || (r.peek(&h, &*m), r));
    assert_eq!(got, Ok(None));
    assert_eq!(r.pos, CAP);
    let reads = mem.reads.load(std::sync::atomic::Ordering::Relaxed);
    assert!(reads <= CAP / 16 + 2, "{reads} reads");
}

#[test]
fn a_latest_reader_of_a_ring_whose_last_record_lies_is_corrupt_not_spinning() {
    // `last` a hundred rings behind `head`: no record is that long.
    let (hdr, mem) = padding_everywhere();
    let mut r = join(&hdr, 0, 1, false);
    publish(&hdr, 1 << 20, (1 << 20) - 100 * CAP);
    let got = returns(move || r.read_latest(&hdr, &*mem, &mut Vec::new()));
    assert_eq!(
        got,
        Err(Corrupt {
            pos: (1 << 20) - 100 * CAP
        })
    );
}

#[test]
fn a_latest_reader_of_a_writer_that_died_mid_record_returns_nothing_promptly() {
    let hdr = Arc::new(RingHeader::new());
    let mem = Arc::new(AtomicBytes::new(CAP));
    let mut w = Writer::new(&hdr, CAP, false);
    let r = join(&hdr, 0, 1, false);
    // Records of 216 bytes at 0, 216 and 432; then a reservation over the last one, never
    // committed: its writer died there.
    for seq in 0..3 {
        write_msg(&mut w, &hdr, &mem, seq, 200).unwrap();
    }
    let _dead = w.try_reserve(&hdr, &*mem, 200).unwrap();
    let (got, r) = returns(move || {
        let mut r = r;
        let mut buf = Vec::new();
        let got: Vec<_> = (0..3)
            .map(|_| r.read_latest(&hdr, &*mem, &mut buf))
            .collect();
        (got, r)
    });
    assert_eq!(got, vec![Ok(None); 3]);
    assert_eq!(r.pos, 432, "waits at the newest committed record");
}

#[test]
fn lengths_past_head_or_above_the_ring_are_corrupt() {
    for (len, reliable) in [(64, true), (64, false), (u32::MAX, true), (u32::MAX, false)] {
        let hdr = RingHeader::new();
        let mem = AtomicBytes::new(CAP);
        let mut r = join(&hdr, 0, 1, reliable);
        // One 32-byte record committed, whose header says `len`.
        mem.write(0, &header(0, len, KIND_MESSAGE));
        hdr.head.end.store(32, Ordering::Relaxed);
        hdr.reserve.end.store(32, Ordering::Relaxed);
        let got = if reliable {
            r.peek(&hdr, &mem)
        } else {
            r.read_latest(&hdr, &mem, &mut Vec::new())
        };
        assert_eq!(
            got,
            Err(Corrupt { pos: 0 }),
            "len {len}, reliable {reliable}"
        );
    }
}

#[test]
fn sleepers_are_woken_once_and_cleared() {
    let (hdr, mem, mut w) = ring(false);
    let mut r = join(&hdr, 5, 1, false);
    assert!(!r.announce_sleep(&hdr));
    let res = w.try_reserve(&hdr, &mem, 4).unwrap();
    assert_eq!(w.commit(&hdr, &mem, res), 1 << 5);
    let res = w.try_reserve(&hdr, &mem, 4).unwrap();
    assert_eq!(
        w.commit(&hdr, &mem, res),
        0,
        "a woken sleeper is not woken again"
    );
}

/// Padding may be longer than a message (the window gives a lap back), but a forged padding
/// record longer than a lap, or one that runs past `head`, is corrupt, for both kinds of reader;
/// a plausible long one is stepped over to the message after it.
#[test]
fn forged_padding_longer_than_a_lap_or_past_head_is_corrupt() {
    let lap = (CAP - RECORD_HEADER - COMMIT_WORD) as u32;
    for (len, head, want_corrupt) in [
        (lap + 8, CAP, true),   // longer than a lap
        (200, 64, true),        // runs past head
        (200, 216 + 32, false), // longer than a message (max 64), then a message
    ] {
        for reliable in [true, false] {
            let hdr = RingHeader::new();
            let mem = AtomicBytes::new(CAP);
            let mut r = Reader::join(&hdr, CAP, 64, 0, 1, reliable);
            mem.write(0, &header(0, len, KIND_PADDING));
            mem.write(216, &header(0, 8, KIND_MESSAGE));
            mem.write(232, &pattern(0, 8));
            publish(&hdr, head, 216);
            let got = if reliable {
                r.peek(&hdr, &mem)
            } else {
                r.read_latest(&hdr, &mem, &mut Vec::new())
            };
            if want_corrupt {
                assert_eq!(
                    got,
                    Err(Corrupt { pos: 0 }),
                    "len {len}, reliable {reliable}"
                );
            } else {
                let rec = got.unwrap().expect("the message after the padding");
                assert_eq!((rec.pos, rec.len), (216, 8), "reliable {reliable}");
            }
        }
    }
}

#[test]
fn a_writer_keeps_small_records_in_the_window_while_its_reader_keeps_up() {
    let (hdr, mem, mut w) = windowed();
    let mut r = join(&hdr, 0, 7, true);
    for seq in 0..100 {
        let len = (seq % 17) as usize;
        let rec = write_windowed_and_peek(&mut w, &mut r, &hdr, &mem, seq, len);
        assert!(
            rec.pos % CAP + record_len(len as u64) <= CAP / 4,
            "message {seq} at offset {} left the window",
            rec.pos % CAP
        );
        assert_eq!(
            (rec.seq, record_bytes(&mem, &rec)),
            (seq, pattern(seq, len))
        );
        r.release(&hdr, rec.end);
    }
    // The positions went round the ring many times (the padding took the rest of each lap).
    assert!(w.head > 20 * CAP, "head {}", w.head);
}

#[test]
fn a_lagging_reader_keeps_the_writer_on_the_whole_ring_and_misses_nothing() {
    let (hdr, mem, mut w) = windowed();
    let mut r = join(&hdr, 0, 7, true);
    // 32-byte records: with nothing released, the writer cannot give a lap back and fills
    // the ring past the window.
    let mut seq = 0;
    while write_windowed(&mut w, &hdr, &mem, seq, 16).is_ok() {
        seq += 1;
    }
    assert!(
        w.head > CAP / 4,
        "the writer stayed in the window: head {}",
        w.head
    );
    assert_eq!(seq, 7, "a full ring of 32-byte records and a mark");
    read_all(&mut r, &hdr, &mem, 0..seq, 16);
}

#[test]
fn a_writer_takes_turns_between_two_places_for_large_records_while_its_reader_keeps_up() {
    let (hdr, mem, mut w) = windowed();
    let mut r = join(&hdr, 0, 7, true);
    // Records of 40 to 104 bytes: over half the 64-byte window, and short enough that padding
    // (a header and the next record's mark) fits between each and the next half-lap boundary.
    for seq in 0..100 {
        let len = 24 + (seq % 5) as usize * 16;
        let rec = write_windowed_and_peek(&mut w, &mut r, &hdr, &mem, seq, len);
        assert_eq!(
            rec.pos % (CAP / 2),
            0,
            "message {seq} of {len} bytes not at a half-lap boundary"
        );
        assert_eq!(
            (rec.seq, record_bytes(&mem, &rec)),
            (seq, pattern(seq, len))
        );
        r.release(&hdr, rec.end);
    }
}

#[test]
fn large_records_stay_end_to_end_while_a_reader_is_behind_and_none_is_lost() {
    let (hdr, mem, mut w) = windowed();
    let mut r = join(&hdr, 0, 7, true);
    // 56-byte records, none read: each goes where the last ended, not to a half-lap boundary.
    let mut positions = Vec::new();
    let mut seq = 0;
    while write_windowed(&mut w, &hdr, &mem, seq, 40).is_ok() {
        positions.push(w.head - record_len(40));
        seq += 1;
    }
    assert_eq!(
        positions,
        [0, 56, 112, 168],
        "a full ring of records end to end"
    );
    read_all(&mut r, &hdr, &mem, 0..seq, 40);
    // Caught up. In this half lap the reader was already found behind, so the next record
    // still goes where the last ended; the one after it to the next half-lap boundary.
    for (seq, want) in [(seq, 224), (seq + 1, 384)] {
        let rec = write_windowed_and_peek(&mut w, &mut r, &hdr, &mem, seq, 40);
        assert_eq!((rec.pos, rec.seq), (want, seq));
        r.release(&hdr, rec.end);
    }
}

#[test]
fn a_latest_reader_follows_a_windowed_writer() {
    let (hdr, mem, mut w) = windowed();
    let mut r = join(&hdr, 1, 8, false);
    let mut buf = Vec::new();
    for seq in 0..50 {
        write_windowed(&mut w, &hdr, &mem, seq, 8).unwrap();
        let rec = r
            .read_latest(&hdr, &mem, &mut buf)
            .unwrap()
            .expect("a record");
        assert_eq!((rec.seq, rec.skipped, &buf), (seq, 0, &pattern(seq, 8)));
    }
}

proptest! {
    /// Any interleaving of writes of any size and partial reads by two reliable readers: the
    /// writer is refused exactly when the slowest reader holds the space, and every reader gets
    /// every message intact and in order.
    #[test]
    fn reliable_ring_model(ops in proptest::collection::vec((0u8..3, 0usize..120), 1..300)) {
        let (hdr, mem, mut w) = ring(true);
        let mut readers = two_reliable_readers(&hdr);
        let mut sent: Vec<(u64, usize)> = Vec::new();
        let mut next = [0usize; 2];
        let mut released = [0u64; 2];
        for (op, len) in ops {
            match op {
                0 => {
                    let len = len.min(max_payload(CAP) as usize);
                    let inflight = w.head - released.iter().min().unwrap();
                    let fits = inflight + record_len(len as u64) + COMMIT_WORD <= CAP;
                    let seq = sent.len() as u64;
                    let ok = write_msg(&mut w, &hdr, &mem, seq, len).is_ok();
                    prop_assert_eq!(ok, fits);
                    if ok { sent.push((seq, len)); }
                }
                k => {
                    let k = (k - 1) as usize;
                    match read_reliable(&mut readers[k], &hdr, &mem) {
                        Some((seq, data)) => {
                            let (want, len) = sent[next[k]];
                            prop_assert_eq!(seq, want);
                            prop_assert_eq!(data, pattern(want, len));
                            next[k] += 1;
                            released[k] = hdr.readers[k].cursor.load(Ordering::Relaxed);
                        }
                        None => prop_assert_eq!(next[k], sent.len()),
                    }
                }
            }
        }
    }

    /// As `reliable_ring_model`, with a writer that keeps small records in a window: every reader
    /// gets every message intact and in order, and a refused write is one the readers hold back
    /// (after they read everything, it goes through).
    #[test]
    fn reliable_ring_model_with_a_window(ops in proptest::collection::vec((0u8..3, 0usize..120), 1..300)) {
        let hdr = RingHeader::new();
        let mem = AtomicBytes::new(CAP);
        let mut w = Writer::new(&hdr, CAP, true).with_window(CAP / 2);
        let mut readers = two_reliable_readers(&hdr);
        let mut sent: Vec<(u64, usize)> = Vec::new();
        let mut next = [0usize; 2];
        let check = |k: usize, got: Option<(u64, Vec<u8>)>, sent: &[(u64, usize)], next: &mut [usize; 2]| {
            match got {
                Some((seq, data)) => {
                    let (want, len) = sent[next[k]];
                    prop_assert_eq!(seq, want);
                    prop_assert_eq!(data, pattern(want, len));
                    next[k] += 1;
                }
                None => prop_assert_eq!(next[k], sent.len()),
            }
            Ok(())
        };
        for (op, len) in ops {
            match op {
                0 => {
                    let len = len.min(max_payload(CAP) as usize);
                    let seq = sent.len() as u64;
                    if write_windowed(&mut w, &hdr, &mem, seq, len).is_err() {
                        for (k, r) in readers.iter_mut().enumerate() {
                            while next[k] < sent.len() {
                                let got = read_reliable(r, &hdr, &mem);
                                check(k, got, &sent, &mut next)?;
                            }
                        }
                        prop_assert!(write_windowed(&mut w, &hdr, &mem, seq, len).is_ok());
                    }
                    sent.push((seq, len));
                }
                k => {
                    let k = (k - 1) as usize;
                    let got = read_reliable(&mut readers[k], &hdr, &mem);
                    check(k, got, &sent, &mut next)?;
                }
            }
        }
    }

    /// A latest reader reading at any pace never returns a torn or out-of-order record, and
    /// every message is either received or counted as skipped once it has an expectation.
    #[test]
    fn latest_reader_model(ops in proptest::collection::vec((any::<bool>(), 0usize..200), 1..400)) {
        let (hdr, mem, mut w) = ring(false);
        let mut r = join(&hdr, 0, 1, false);
        let mut lens = Vec::new();
        let mut buf = Vec::new();
        let mut last: Option<u64> = None;
        for (write, len) in ops {
            if write {
                let len = len.min(max_payload(CAP) as usize);
                write_msg(&mut w, &hdr, &mem, lens.len() as u64, len).unwrap();
                lens.push(len);
            } else if let Some(rec) = r.read_latest(&hdr, &mem, &mut buf).unwrap() {
                prop_assert_eq!(&buf, &pattern(rec.seq, lens[rec.seq as usize]));
                if let Some(l) = last {
                    prop_assert!(rec.seq > l);
                    prop_assert_eq!(rec.skipped, rec.seq - l - 1);
                }
                last = Some(rec.seq);
            }
        }
    }
}

/// Real threads: one writer, two reliable readers, a small ring so it wraps thousands of times.
#[test]
fn threads_reliable_two_readers_wrap_around() {
    threads_reliable_two_readers(0);
}

#[test]
fn threads_reliable_two_readers_behind_a_windowed_writer() {
    threads_reliable_two_readers(CAP / 2);
}

fn threads_reliable_two_readers(window: u64) {
    const N: u64 = 20_000;
    let hdr = Arc::new(RingHeader::new());
    let mem = Arc::new(AtomicBytes::new(CAP));
    let readers: Vec<_> = (0..2)
        .map(|slot| {
            let r = join(&hdr, slot, slot as u64 + 1, true);
            let (hdr, mem) = (hdr.clone(), mem.clone());
            std::thread::spawn(move || {
                let mut r = r;
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                let mut expect = 0;
                while expect < N {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "reader stalled at {expect}"
                    );
                    match read_reliable(&mut r, &hdr, &mem) {
                        Some((seq, data)) => {
                            assert_eq!(seq, expect);
                            assert_eq!(data, pattern(seq, (seq % 100) as usize));
                            expect += 1;
                        }
                        None => std::thread::yield_now(),
                    }
                }
            })
        })
        .collect();
    let mut w = Writer::new(&hdr, CAP, true);
    if window != 0 {
        w = w.with_window(window);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for seq in 0..N {
        while write_windowed(&mut w, &hdr, &mem, seq, (seq % 100) as usize).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "writer stalled at {seq}"
            );
            std::thread::yield_now();
        }
    }
    for r in readers {
        r.join().unwrap();
    }
}

// Holding: a latest reader keeps a large record in place; the writer steps over it.

const HOLD_CAP: u64 = 64 * 1024;
const BIG: usize = HOLD_MIN as usize;

fn hold_ring(reliable: bool) -> (RingHeader, AtomicBytes, Writer) {
    let hdr = RingHeader::new();
    let mem = AtomicBytes::new(HOLD_CAP);
    let w = Writer::new(&hdr, HOLD_CAP, reliable);
    (hdr, mem, w)
}

fn write_big(w: &mut Writer, hdr: &RingHeader, mem: &AtomicBytes, seq: u64, len: usize) {
    let r = w.try_reserve(hdr, mem, len as u64).expect("room");
    mem.write(r.payload_offset(HOLD_CAP), &pattern(seq, len));
    w.commit(hdr, mem, r);
}

#[test]
fn a_held_record_outlives_laps_of_the_writer() {
    let (hdr, mem, mut w) = hold_ring(false);
    let mut r = Reader::join(&hdr, HOLD_CAP, BIG as u64, 0, 1, false);
    // A second latest reader copies (one reader holds at a time).
    let mut other = Reader::join(&hdr, HOLD_CAP, BIG as u64, 1, 2, false);
    write_big(&mut w, &hdr, &mem, 0, BIG);
    let mut buf = Vec::new();
    let rec = r.read_latest(&hdr, &mem, &mut buf).unwrap().unwrap();
    assert!(rec.held && buf.is_empty(), "held in place, nothing copied");
    assert!(rec.seq == 0 && record_bytes(&mem, &rec) == pattern(0, BIG));
    let got = other.read_latest(&hdr, &mem, &mut buf).unwrap().unwrap();
    assert!(!got.held && got.seq == 0 && buf == pattern(0, BIG));
    // Three records fit a lap: twenty messages lap the ring six times, each lap stepping over
    // the held record (without that, the fourth message would land on it).
    for seq in 1..=20 {
        write_big(&mut w, &hdr, &mem, seq, BIG);
        let got = other.read_latest(&hdr, &mem, &mut buf).unwrap().unwrap();
        assert!(
            !got.held && got.seq == seq && buf == pattern(seq, BIG),
            "seq {seq}"
        );
        assert!(
            record_bytes(&mem, &rec) == pattern(0, BIG),
            "written over while held"
        );
    }
    // Let go: the writer may use those bytes again, and the reader goes on from the newest.
    r.unhold(&hdr);
    for seq in 21..=24 {
        write_big(&mut w, &hdr, &mem, seq, BIG);
    }
    let next = r.read_latest(&hdr, &mem, &mut buf).unwrap().unwrap();
    assert!(next.held && next.seq > 20);
    assert!(record_bytes(&mem, &next) == pattern(next.seq, BIG));
    assert_eq!(next.skipped, next.seq - 1);
    r.unhold(&hdr);
    assert_eq!(hdr.reserve.hold.load(Ordering::Relaxed), 0);
}

#[test]
fn a_dropped_hold_is_written_over_from_the_next_lap() {
    let (hdr, mem, mut w) = hold_ring(false);
    let mut r = Reader::join(&hdr, HOLD_CAP, BIG as u64, 2, 1, false);
    write_big(&mut w, &hdr, &mem, 0, BIG);
    let mut buf = Vec::new();
    let rec = r.read_latest(&hdr, &mem, &mut buf).unwrap().unwrap();
    assert!(rec.held);
    assert_eq!(
        w.holder(),
        None,
        "nothing stepped over before the writer looks"
    );
    for seq in 1..=6 {
        write_big(&mut w, &hdr, &mem, seq, BIG);
    }
    assert!(record_bytes(&mem, &rec) == pattern(0, BIG));
    let word = hdr.reserve.hold.load(Ordering::Relaxed);
    assert_eq!(w.holder(), Some((word, 2)), "the hold of reader slot 2");
    // Its owner found the reader gone: a lap later the record is written over.
    w.drop_hold(&hdr, word);
    assert_eq!(hdr.reserve.hold.load(Ordering::Relaxed), 0);
    assert_eq!(w.holder(), None);
    for seq in 7..=12 {
        write_big(&mut w, &hdr, &mem, seq, BIG);
    }
    assert!(
        record_bytes(&mem, &rec) != pattern(0, BIG),
        "still stepped over"
    );
    // Another word (a hold taken meanwhile) is not the one dropped: it stays.
    hdr.reserve.hold.store(word + 256, Ordering::Relaxed);
    w.drop_hold(&hdr, word);
    assert_eq!(hdr.reserve.hold.load(Ordering::Relaxed), word + 256);
}

#[test]
fn a_reliable_reader_reads_every_message_past_a_held_one() {
    let (hdr, mem, mut w) = hold_ring(true);
    let mut latest = Reader::join(&hdr, HOLD_CAP, BIG as u64, 0, 1, false);
    let mut reliable = Reader::join(&hdr, HOLD_CAP, BIG as u64, 1, 2, true);
    let mut buf = Vec::new();
    write_big(&mut w, &hdr, &mem, 0, BIG);
    let held = latest.read_latest(&hdr, &mem, &mut buf).unwrap().unwrap();
    assert!(held.held);
    for seq in 0..12 {
        if seq > 0 {
            // Small and large messages mixed: both step over the held record.
            let len = if seq % 3 == 0 { 100 } else { BIG };
            write_big(&mut w, &hdr, &mem, seq, len);
        }
        let rec = reliable.peek(&hdr, &mem).unwrap().expect("a message");
        let want = if seq > 0 && seq % 3 == 0 { 100 } else { BIG };
        assert_eq!((rec.seq, rec.skipped), (seq, 0));
        assert!(record_bytes(&mem, &rec) == pattern(seq, want), "seq {seq}");
        reliable.release(&hdr, rec.end);
        assert!(
            record_bytes(&mem, &held) == pattern(0, BIG),
            "written over while held"
        );
    }
}

#[test]
fn a_record_the_writer_has_planned_over_is_not_held() {
    let (hdr, mem, mut w) = hold_ring(false);
    let mut r = Reader::join(&hdr, HOLD_CAP, BIG as u64, 0, 1, false);
    // Three records, then a fourth reserved over the first one's bytes and not yet committed.
    for seq in 0..3 {
        write_big(&mut w, &hdr, &mem, seq, BIG);
    }
    let _writing = w.try_reserve(&hdr, &mem, BIG as u64).unwrap();
    let mut buf = Vec::new();
    let rec = r.read_latest(&hdr, &mem, &mut buf).unwrap().unwrap();
    // The first is refused (and lapped); the newest is held.
    assert_eq!((rec.seq, rec.skipped, rec.held), (2, 2, true));
    assert!(record_bytes(&mem, &rec) == pattern(2, BIG));
}

#[test]
fn a_ring_too_small_to_step_over_a_record_copies_it() {
    // Two of the largest records fill the ring: no room to step over one.
    let cap = 2 * record_len(BIG as u64) + 64;
    let cap = cap.next_power_of_two() / 2;
    assert!(cap < 3 * record_len(BIG as u64));
    let hdr = RingHeader::new();
    let mem = AtomicBytes::new(cap);
    let mut w = Writer::new(&hdr, cap, false);
    let mut r = Reader::join(&hdr, cap, BIG as u64, 0, 1, false);
    let res = w.try_reserve(&hdr, &mem, BIG as u64).unwrap();
    mem.write(res.payload_offset(cap), &pattern(0, BIG));
    w.commit(&hdr, &mem, res);
    let mut buf = Vec::new();
    let rec = r.read_latest(&hdr, &mem, &mut buf).unwrap().unwrap();
    assert!(!rec.held && buf == pattern(0, BIG));
}

#[test]
fn forged_holds_cost_the_writer_nothing_and_a_left_readers_hold_is_cleared() {
    let (hdr, mem, mut w) = hold_ring(false);
    let mut r = Reader::join(&hdr, HOLD_CAP, BIG as u64, 3, 1, false);
    let mut buf = Vec::new();
    let forged = [
        // Not a record start (inside a payload), of a live reader.
        (100 << 8) | 4,
        // Beyond anything written.
        (u64::MAX >> 8) << 8 | 4,
        // A slot that does not exist, and one that is free.
        0xFF,
        9,
    ];
    let mut seq = 0;
    for word in forged {
        hdr.reserve.hold.store(word, Ordering::Relaxed);
        // Laps of the ring: nothing is stepped over for a forged hold, nothing hangs.
        let live = word & 0xFF == 4;
        for _ in 0..10 {
            write_big(&mut w, &hdr, &mem, seq, BIG);
            let got = r.read_latest(&hdr, &mem, &mut buf).unwrap().unwrap();
            // One hold at a time: while a forged one of a live reader stays, this one copies.
            assert_eq!(got.held, !live, "word {word:#x}");
            let bytes = if got.held {
                record_bytes(&mem, &got)
            } else {
                buf.clone()
            };
            assert!(got.seq == seq && bytes == pattern(seq, BIG), "seq {seq}");
            r.unhold(&hdr);
            seq += 1;
        }
        assert!(w.head / HOLD_CAP >= 2, "the writer lapped the ring");
        // The holds of a free or missing slot were cleared; a live reader's stays, ignored.
        let left = hdr.reserve.hold.load(Ordering::Relaxed);
        assert_eq!(left, if live { word } else { 0 }, "word {word:#x}");
    }
    // A reader that ended holding without letting go (its process died): the next reader of
    // its slot lets go of that hold, and can hold itself.
    hdr.reserve.hold.store(0, Ordering::Relaxed);
    write_big(&mut w, &hdr, &mem, seq, BIG);
    let got = r.read_latest(&hdr, &mem, &mut buf).unwrap().unwrap();
    assert!(got.held);
    seq += 1;
    // `r` ends here without `leave` or `unhold`; the next reader takes slot 3.
    let mut r = Reader::join(&hdr, HOLD_CAP, BIG as u64, 3, 2, false);
    assert_eq!(hdr.reserve.hold.load(Ordering::Relaxed), 0);
    // A reader that leaves lets go of what it held.
    hdr.reserve.hold.store(0, Ordering::Relaxed);
    write_big(&mut w, &hdr, &mem, seq, BIG);
    let got = r.read_latest(&hdr, &mem, &mut buf).unwrap().unwrap();
    assert!(got.held);
    r.leave(&hdr);
    assert_eq!(hdr.reserve.hold.load(Ordering::Relaxed), 0);
}

proptest! {
    /// Any mix of small and large writes, latest reads (holding what they may) and lettings go,
    /// beside a reliable reader: a held record never changes while held, the latest reader sees
    /// intact records in order, and the reliable reader gets every message intact.
    #[test]
    fn holding_model(ops in proptest::collection::vec((0u8..4, any::<bool>()), 1..200)) {
        let (hdr, mem, mut w) = hold_ring(true);
        let mut latest = Reader::join(&hdr, HOLD_CAP, BIG as u64, 0, 1, false);
        let mut reliable = Reader::join(&hdr, HOLD_CAP, BIG as u64, 1, 2, true);
        let mut held: Option<Record> = None;
        let (mut seq, mut next_reliable, mut last_latest) = (0u64, 0u64, None);
        let mut lens = Vec::new();
        let mut buf = Vec::new();
        for (op, big) in ops {
            match op {
                0 | 1 => {
                    let len = if big { BIG } else { 100 + seq as usize % 50 };
                    match w.try_reserve(&hdr, &mem, len as u64) {
                        Ok(r) => {
                            mem.write(r.payload_offset(HOLD_CAP), &pattern(seq, len));
                            w.commit(&hdr, &mem, r);
                            lens.push(len);
                            seq += 1;
                        }
                        // Only the reliable reader holds the writer back.
                        Err(Full) => prop_assert!(next_reliable < seq),
                    }
                }
                2 => {
                    if held.is_none() {
                        if let Some(rec) = latest.read_latest(&hdr, &mem, &mut buf).unwrap() {
                            let len = lens[rec.seq as usize];
                            let bytes = if rec.held { record_bytes(&mem, &rec) } else { buf.clone() };
                            prop_assert!(bytes == pattern(rec.seq, len));
                            prop_assert!(last_latest.is_none_or(|l| rec.seq > l));
                            last_latest = Some(rec.seq);
                            if rec.held {
                                held = Some(rec);
                            }
                        }
                    } else {
                        latest.unhold(&hdr);
                        held = None;
                    }
                }
                _ => {
                    if let Some(rec) = reliable.peek(&hdr, &mem).unwrap() {
                        prop_assert_eq!(rec.seq, next_reliable);
                        let want = pattern(rec.seq, lens[rec.seq as usize]);
                        prop_assert!(record_bytes(&mem, &rec) == want);
                        reliable.release(&hdr, rec.end);
                        next_reliable += 1;
                    }
                }
            }
            if let Some(rec) = &held {
                let want = pattern(rec.seq, lens[rec.seq as usize]);
                prop_assert!(record_bytes(&mem, rec) == want, "a held record changed");
            }
        }
    }
}

#[test]
fn an_expected_reader_adopts_its_place_and_holds_the_writer_until_it_reads() {
    let (hdr, mem, mut w) = ring(true);
    // Slot 2's subscriber (token 7) is expected before anything is written.
    expect_reader(&hdr, 2, 7);
    assert_eq!(w.unread_by(&hdr), (0, 0));
    write_msg(&mut w, &hdr, &mem, 0, 16).unwrap();
    write_msg(&mut w, &hdr, &mem, 1, 16).unwrap();
    let (behind, bytes) = w.unread_by(&hdr);
    assert_eq!(behind, 1 << 2, "slot 2 is behind");
    assert!(bytes >= 32, "{bytes}");
    // Until it reads, the writer cannot lap it: the ring fills up.
    let mut n = 2;
    while write_msg(&mut w, &hdr, &mem, n, 16).is_ok() {
        n += 1;
        assert!(n < 64, "the writer lapped an expected reader");
    }
    // Another subscriber in another slot joins from now; the expected one reads from the first
    // record, and once it read everything the writer has nothing unread.
    let mut other = join(&hdr, 3, 9, true);
    assert!(read_reliable(&mut other, &hdr, &mem).is_none());
    let mut r = join(&hdr, 2, 7, true);
    for seq in 0..n {
        let (got, bytes) = read_reliable(&mut r, &hdr, &mem).expect("a record");
        assert_eq!((got, bytes), (seq, pattern(seq, 16)));
    }
    assert!(read_reliable(&mut r, &hdr, &mem).is_none());
    assert_eq!(w.unread_by(&hdr), (0, 0));
    // A slot expected for one token and joined by another starts from now.
    expect_reader(&hdr, 4, 11);
    let mut stranger = join(&hdr, 4, 12, true);
    assert!(read_reliable(&mut stranger, &hdr, &mem).is_none());
}

// ---------------------------------------------------------------------------------------------
// History

/// Writes `n` messages of `len` bytes, seq `from..from + n`, with `reader` (reliable) keeping up.
fn write_read(
    w: &mut Writer,
    hdr: &RingHeader,
    mem: &AtomicBytes,
    reader: Option<&mut Reader>,
    from: u64,
    n: u64,
    len: usize,
) {
    let mut reader = reader;
    for seq in from..from + n {
        write_msg(w, hdr, mem, seq, len).expect("room");
        if let Some(r) = reader.as_deref_mut() {
            assert_eq!(read_reliable(r, hdr, mem).map(|m| m.0), Some(seq));
        }
    }
}

#[test]
fn a_joiner_gets_the_last_messages_kept_then_the_live_ones_with_no_gap() {
    for reliable in [true, false] {
        let (hdr, mem, mut w) = keeping(reliable, 3);
        let mut early = join(&hdr, 0, 7, true);
        // 24-byte messages (40-byte records): many laps of a 256-byte ring.
        write_read(&mut w, &hdr, &mem, Some(&mut early), 0, 100, 24);
        let mut late = join(&hdr, 1, 9, true);
        for want in [1, 2, 3, 10] {
            let past = history(&hdr, &mem, CAP, max_payload(CAP), late.position(), want);
            let seqs: Vec<u64> = past.iter().map(|p| p.seq).collect();
            let expect: Vec<u64> = (100 - want.min(3) as u64..100).collect();
            assert_eq!(seqs, expect, "reliable {reliable}, want {want}");
            for p in &past {
                assert_eq!(p.bytes, pattern(p.seq, 24));
            }
        }
        write_read(&mut w, &hdr, &mem, Some(&mut early), 100, 1, 24);
        assert_eq!(read_reliable(&mut late, &hdr, &mem).map(|m| m.0), Some(100));
    }
}

#[test]
fn history_is_only_what_the_ring_still_holds() {
    // Asks to keep 50, but a 256-byte ring holds six 40-byte records (with the next one's mark).
    let (hdr, mem, mut w) = keeping(false, 50);
    write_read(&mut w, &hdr, &mem, None, 0, 40, 24);
    let late = join(&hdr, 1, 9, true);
    let past = history(&hdr, &mem, CAP, max_payload(CAP), late.position(), 50);
    assert_eq!(past.len(), 6);
    let last = past.last().unwrap().seq;
    assert_eq!(last, 39);
    for (i, p) in past.iter().enumerate() {
        assert_eq!(p.seq, last + 1 + i as u64 - past.len() as u64);
        assert_eq!(p.bytes, pattern(p.seq, 24));
    }
}

/// A ring whose first record header read lets a writer go on: a writer that laps the oldest
/// kept record while a joiner copies the history.
struct LappedWhileRead<'a> {
    mem: &'a AtomicBytes,
    on_first_read: std::cell::RefCell<Option<Box<dyn FnOnce() + 'a>>>,
}

impl RingBytes for LappedWhileRead<'_> {
    fn write(&self, offset: u64, src: &[u8]) {
        self.mem.write(offset, src)
    }
    fn read(&self, offset: u64, dst: &mut [u8]) {
        self.mem.read(offset, dst)
    }
    fn read_header(&self, offset: u64) -> [u8; RECORD_HEADER as usize] {
        let header = self.mem.read_header(offset);
        let go_on = self.on_first_read.borrow_mut().take();
        if let Some(go_on) = go_on {
            go_on();
        }
        header
    }
    fn load_word(&self, offset: u64) -> u64 {
        self.mem.load_word(offset)
    }
    fn store_word(&self, offset: u64, value: u64, order: Ordering) {
        self.mem.store_word(offset, value, order)
    }
}

/// A writer that writes over the oldest kept record while a joiner copies it: the joiner walks
/// again from the writer's new oldest and gets the records still intact, not nothing.
#[test]
fn a_history_lapped_while_copied_is_walked_again_from_the_new_oldest() {
    // A 256-byte ring keeps six 40-byte records: 34 to 39.
    let (hdr, mem, mut w) = keeping(false, 50);
    write_read(&mut w, &hdr, &mem, None, 0, 40, 24);
    let late = join(&hdr, 1, 9, true);
    let until = late.position();
    let lapped = LappedWhileRead {
        mem: &mem,
        // Message 40 takes the room of 34, the oldest, as its header is being read.
        on_first_read: std::cell::RefCell::new(Some(Box::new(|| {
            write_read(&mut w, &hdr, &mem, None, 40, 1, 24)
        }))),
    };
    let past = history(&hdr, &lapped, CAP, max_payload(CAP), until, 50);
    let seqs: Vec<u64> = past.iter().map(|p| p.seq).collect();
    assert_eq!(seqs, (35..40).collect::<Vec<u64>>());
    for p in &past {
        assert_eq!(p.bytes, pattern(p.seq, 24));
    }
}

#[test]
fn a_writer_without_history_keeps_none_and_a_reader_asking_none_gets_none() {
    let (hdr, mem, mut w) = ring(false);
    write_read(&mut w, &hdr, &mem, None, 0, 10, 24);
    let late = join(&hdr, 1, 9, true);
    assert!(history(&hdr, &mem, CAP, max_payload(CAP), late.position(), 5).is_empty());
    let hdr = RingHeader::new();
    let mut w = Writer::new(&hdr, CAP, false).with_history(&hdr, 5);
    write_read(&mut w, &hdr, &mem, None, 0, 10, 24);
    assert!(history(&hdr, &mem, CAP, max_payload(CAP), w.head, 0).is_empty());
}

#[test]
fn a_forged_history_word_costs_bounded_work_and_gives_no_panic() {
    let (hdr, mem, mut w) = keeping(false, 4);
    write_read(&mut w, &hdr, &mem, None, 0, 12, 24);
    let until = w.head;
    for word in [
        1,
        2,
        u64::MAX,
        until + 1,
        until + 9,
        until.saturating_sub(CAP) + 1,
        until - 7,
    ] {
        hdr.head.history.store(word, Ordering::Relaxed);
        let past = history(&hdr, &mem, CAP, max_payload(CAP), until, 100);
        for p in &past {
            assert!(p.bytes.len() <= max_payload(CAP) as usize);
        }
    }
    // A ring of garbage bytes under a plausible word: nothing past the first lie is taken.
    let hdr = RingHeader::new();
    let mem = AtomicBytes::new(CAP);
    mem.write(0, &[0xAB; CAP as usize]);
    hdr.head.end.store(CAP - 8, Ordering::Relaxed);
    hdr.head.history.store(1, Ordering::Relaxed);
    hdr.reserve.end.store(CAP, Ordering::Relaxed);
    assert!(history(&hdr, &mem, CAP, max_payload(CAP), CAP - 8, 100).is_empty());
}

#[test]
fn threads_history_read_while_the_writer_laps_it_is_intact_or_left_out() {
    // A writer that never waits laps the history while a joiner copies it: every copy that comes
    // back is whole and in order. Two ring sizes: one lapped all the time, one now and then.
    for cap in [CAP, 4096] {
        history_against_a_lapping_writer(cap);
    }
}

fn history_against_a_lapping_writer(cap: u64) {
    let hdr = Arc::new(RingHeader::new());
    let mem = Arc::new(AtomicBytes::new(cap));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let len = |seq: u64| 8 + (seq % 17) as usize;
    let writer = {
        let (hdr, mem, stop) = (hdr.clone(), mem.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut w = Writer::new(&hdr, cap, false).with_history(&hdr, 4);
            let mut seq = 0;
            while seq < 1000 || (!stop.load(Ordering::Relaxed) && seq < 2_000_000) {
                let r = w.try_reserve(&hdr, &*mem, len(seq) as u64).unwrap();
                mem.write(r.payload_offset(cap), &pattern(seq, len(seq)));
                w.commit(&hdr, &*mem, r);
                seq += 1;
            }
        })
    };
    let join_and_check = |slot: usize| {
        let r = Reader::join(&hdr, cap, max_payload(cap), slot % MAX_READERS, 1, false);
        let past = history(&hdr, &*mem, cap, max_payload(cap), r.position(), 4);
        for pair in past.windows(2) {
            assert_eq!(pair[1].seq, pair[0].seq + 1);
        }
        for p in &past {
            assert_eq!(p.bytes, pattern(p.seq, len(p.seq)), "seq {}", p.seq);
        }
        past
    };
    for slot in 0..2000 {
        join_and_check(slot);
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    // Once the writer rests, a joiner gets the whole history, up to the last message.
    let past = join_and_check(0);
    let next = hdr.head.next_seq.load(Ordering::Relaxed);
    assert_eq!(
        past.iter().map(|p| p.seq).collect::<Vec<_>>(),
        (next - 4..next).collect::<Vec<_>>()
    );
}

#[test]
fn newest_is_the_last_committed_message_and_the_look_writes_nothing() {
    let hdr = RingHeader::new();
    let mem = Counting {
        mem: AtomicBytes::new(CAP),
        reads: std::sync::atomic::AtomicU64::new(0),
    };
    assert_eq!(newest(&hdr, &mem, CAP, max_payload(CAP), 64), None);
    let mut w = Writer::new(&hdr, CAP, false);
    // Many laps, so the newest record wraps around the ring's end now and then.
    for seq in 0..37 {
        let len = 8 + (seq as usize * 5) % 40;
        let r = w.try_reserve(&hdr, &mem, len as u64).unwrap();
        mem.write(
            r.payload_offset(CAP),
            &pattern(seq, len.next_multiple_of(8)),
        );
        w.commit(&hdr, &mem, r);
        let before = (
            hdr.head.end.load(Ordering::Relaxed),
            hdr.reserve.end.load(Ordering::Relaxed),
            hdr.sleepers.load(Ordering::Relaxed),
        );
        let n = newest(&hdr, &mem, CAP, max_payload(CAP), 64).expect("a message");
        assert_eq!((n.seq, n.len), (seq, len as u64));
        assert_eq!(n.bytes, pattern(seq, len));
        // Only the first `limit` bytes, however long the message.
        let cut = newest(&hdr, &mem, CAP, max_payload(CAP), 10).unwrap();
        assert_eq!(cut.bytes, pattern(seq, len.min(10)));
        assert_eq!(cut.len, len as u64);
        let after = (
            hdr.head.end.load(Ordering::Relaxed),
            hdr.reserve.end.load(Ordering::Relaxed),
            hdr.sleepers.load(Ordering::Relaxed),
        );
        assert_eq!(before, after);
    }
}

#[test]
fn newest_gives_nothing_for_padding_a_lying_last_or_a_copy_the_writer_laps() {
    let hdr = RingHeader::new();
    let mem = AtomicBytes::new(CAP);
    let max = max_payload(CAP);
    // The newest record is padding (a reservation given back).
    let mut w = Writer::new(&hdr, CAP, false);
    write_msg(&mut w, &hdr, &mem, 0, 24).unwrap();
    let r = w.try_reserve(&hdr, &mem, 16).unwrap();
    w.abandon(&hdr, &mem, r);
    assert_eq!(newest(&hdr, &mem, CAP, max, 64), None);
    // `last` more than a ring behind `head`, unaligned, or at `head`.
    for (head, last) in [(CAP * 4, 0), (64, 3), (64, 64), (64, 80)] {
        let hdr = RingHeader::new();
        mem.write(0, &header(0, 8, KIND_MESSAGE));
        publish(&hdr, head, last);
        assert_eq!(newest(&hdr, &mem, CAP, max, 64), None, "{head} {last}");
    }
    // A header that claims more than the ring holds, or to end past `head`.
    for len in [u32::MAX, (max + 1) as u32, 200] {
        let hdr = RingHeader::new();
        mem.write(0, &header(0, len, KIND_MESSAGE));
        publish(&hdr, 64, 0);
        assert_eq!(newest(&hdr, &mem, CAP, max, 64), None, "{len}");
    }
    // A writer that has reserved a lap past the record since: the copy may be torn.
    let hdr = RingHeader::new();
    mem.write(0, &header(5, 8, KIND_MESSAGE));
    publish(&hdr, 24, 0);
    assert_eq!(newest(&hdr, &mem, CAP, max, 64).map(|n| n.seq), Some(5));
    hdr.reserve.end.store(CAP + 8, Ordering::Relaxed);
    assert_eq!(newest(&hdr, &mem, CAP, max, 64), None);
}

proptest! {
    /// Whatever the head line, the reservation and the bytes say, a look returns promptly with
    /// at most `limit` bytes.
    #[test]
    fn newest_of_a_forged_ring_is_bounded(
        head in any::<u64>(), last in any::<u64>(), reserve in any::<u64>(),
        words in proptest::collection::vec(any::<u64>(), (CAP / 8) as usize),
        limit in 0usize..100,
    ) {
        let hdr = RingHeader::new();
        let mem = AtomicBytes::new(CAP);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        mem.write(0, &bytes);
        hdr.head.last.store(last, Ordering::Relaxed);
        hdr.head.end.store(head, Ordering::Relaxed);
        hdr.reserve.end.store(reserve, Ordering::Relaxed);
        if let Some(n) = newest(&hdr, &mem, CAP, max_payload(CAP), limit) {
            prop_assert!(n.bytes.len() <= limit);
            prop_assert!(n.len <= max_payload(CAP));
        }
    }
}

/// A reliable reader that keeps records reads on past them, yet the writer never reaches a kept
/// one: its cursor stops at the oldest kept record, whatever order they are let go in.
#[test]
fn kept_records_hold_the_writer_back_until_each_is_let_go() {
    let (hdr, mem, mut w) = ring(true);
    let mut r = join(&hdr, 0, 1, true);
    let mut kept = Vec::new();
    for seq in 0..3 {
        write_msg(&mut w, &hdr, &mem, seq, 24).unwrap();
        let rec = r.peek(&hdr, &mem).unwrap().unwrap();
        assert_eq!(rec.seq, seq);
        r.keep(&rec);
        kept.push(rec);
    }
    // Read on without releasing: the ring fills up to the first kept record.
    let mut seq = 3;
    while write_msg(&mut w, &hdr, &mem, seq, 24).is_ok() {
        let (s, _) = read_reliable(&mut r, &hdr, &mem).unwrap();
        assert_eq!(s, seq);
        seq += 1;
        assert!(seq < 100, "the writer went over a kept record");
    }
    for k in &kept {
        let mut buf = vec![0; 24];
        mem.read(k.offset, &mut buf);
        assert_eq!(buf, pattern(k.seq, 24), "kept record {} intact", k.seq);
    }
    // Letting go of a newer one first frees nothing; the oldest frees up to the next kept.
    r.let_go(&hdr, kept[1].pos);
    assert!(write_msg(&mut w, &hdr, &mem, seq, 24).is_err());
    r.let_go(&hdr, kept[0].pos);
    r.let_go(&hdr, kept[0].pos); // again: nothing
    assert_eq!(hdr.readers[0].cursor.load(Ordering::Relaxed), kept[2].pos);
    r.let_go(&hdr, kept[2].pos);
    write_msg(&mut w, &hdr, &mem, seq, 24).expect("room once every kept record is let go");
}
