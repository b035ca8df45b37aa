//! The single-writer, multi-reader byte ring that carries one publisher's messages.
//!
//! Positions are byte counts since the ring was made (u64, never wrap in practice); the byte at
//! position `p` lives at offset `p % capacity`. Records are `[seq u64][len u32][tag u32][payload]`,
//! padded to 8 bytes, and always contiguous because the production mapping places two copies of
//! the ring side by side (see `sys::Mapping::map_ring`), so nothing is wasted on wrap-around.
//!
//! Protocol (every non-relaxed atomic names its partner below):
//! - The writer announces `reserve = end + COMMIT_WORD` for the record it is about to write,
//!   writes payload and header in place (all but the header's first word, `seq`), marks the
//!   first word of the *next* record `NOT_COMMITTED`, stores `seq` (the commit), and then
//!   publishes `head = end`. `reserve` always runs at or ahead of `head`; the bytes a writer may
//!   be scribbling on are those below `reserve`, i.e. positions `< reserve - capacity` of older
//!   laps are gone.
//! - A reliable reader that has read the message ending at `pos` knows that the word at `pos` was
//!   marked `NOT_COMMITTED` before that record was committed: it holds that mark or the commit of
//!   the next record. So the reader polls that word, on the line the record's bytes share,
//!   instead of `head`, and sees a new record with one cache line moved instead of two (the
//!   `head` line, then the record's). A reader that has read nothing yet (it just joined) polls
//!   `head`: the word at its position may be anything from an older lap. A word that is neither
//!   the mark nor the next sequence number sends the reader to `head` too, and so does padding.
//! - A reliable reader owns `cursor` in its slot: everything below it is released. The writer
//!   never reserves past `min(cursor) + capacity` over reliable readers, so a reliable reader reads
//!   in place with no check.
//! - A latest reader is never waited for. It copies a record out and then checks `reserve` again
//!   (a seqlock over positions): if the writer has reserved past `pos + capacity`, the copy may be
//!   torn, it is thrown away and the reader jumps to the newest committed record (`last` on the
//!   head line). It never returns a torn record.
//! - A reader that is about to sleep sets its bit in `sleepers` and looks at `head` again; the
//!   writer stores `head` and then looks at `sleepers`. A SeqCst fence sits between the store and
//!   the load on both sides, so at least one of them sees the other (no lost wake-up). The writer
//!   wakes only readers whose bit is set.
//! - A writer that waits for space sets `writer_waiting` and looks at the cursors again; a reader
//!   stores its cursor and then looks at `writer_waiting` (the same fenced store-then-load).
//! - A joining reader stores its slot's owner and then loads `reserve`; the writer stores
//!   `reserve` and, before it next scans the slots, fences. Either the scan sees the joiner, or
//!   the joiner starts at or after every reservation made before that scan.
//!
//! - The window (reliable writers only): while reliable readers keep up, the writer keeps its
//!   small records in the first `WINDOW` bytes of each lap. A record that would reach past the
//!   window, when the readers have released enough, is preceded by a padding record over the rest
//!   of the lap, so the writer starts again at offset 0, on lines both sides still hold in their
//!   caches, instead of walking the whole ring. The padding is an ordinary committed record (it
//!   may be longer than a message); its end must be reservable like any record's, so a lagging
//!   reader simply keeps the writer on the whole ring. The writer tries this once per lap. The
//!   cost: right after the padding, the writer's room in the new lap ends where the records a
//!   reader has not read yet (and the padding's header) lie one lap back, a window's worth at
//!   most, however large the ring, until that reader catches up.
//!   Large records (`LARGE` and up) take turns between the two halves of a lap instead: when
//!   every reliable reader has released everything, a padding record runs to the next half-lap
//!   boundary and the record starts there, so an exchange of large messages in a ring sized for
//!   larger ones uses two places, not the whole ring. A reader found behind keeps the writer
//!   where it is for the rest of that half lap. While a record may be held (below), the writer
//!   publishes how far the padding and the record reach and looks for a hold first, as any
//!   reservation does then, and steps over a held record instead.
//!
//! - Holding (latest readers, large records): a latest reader would copy a record of at least
//!   `HOLD_MIN` bytes out for nothing if the writer laps it meanwhile, so it holds the record in
//!   place instead, one reader at a time per ring: it sets `hold` (its position and slot) from 0,
//!   fences, and loads `frontier` and `reserve`. The writer, while a large record may still be in
//!   the ring (or a hold is known), stores `frontier` (the furthest it plans to write, never
//!   lowered), fences, and loads `hold` before each reservation. Either the writer sees the hold
//!   and never writes the held bytes (it commits a padding record from `head` to the held
//!   record's end, a lap on, and goes on after it, every lap until the hold is gone), or the
//!   reader sees a frontier that reaches the record and lets go (it copies instead, and a lapped
//!   copy is thrown away as always). A reader holds only where the ring has room for the writer
//!   to step over the held record with any message (`may_hold`), so an honest hold never stops
//!   the writer; the writer checks a hold's record against the header it wrote itself and
//!   ignores a hold that is not one of its records, or whose reader's slot is free.
//!
//! - History (`Writer::with_history`): the writer keeps the positions of its last messages and
//!   publishes the oldest's in `head.history`. Before it stores a `reserve` that reaches over a
//!   kept record it forgets that record and stores the new `history` first; the `reserve` store
//!   is Release, so a reader that loads `reserve` (Acquire) and then `history` gets a start that
//!   was intact at that `reserve`. A joining reader copies the records from there to where it
//!   joined (`history`), checking `reserve` after each header as a latest reader does after a
//!   copy, and keeps only copies that no reservation reached; nothing of the writer waits for it,
//!   so history costs a writer without it one branch per message.
//!
//! Readers trust nothing they read from the ring: a record header or a position that the
//! protocol rules out (a length past `head` or above the maximum, an unknown tag, a reliable
//! reader more than a ring behind `head`, a `last` more than a ring behind it) is `Corrupt`, and
//! one call looks at no more records than a ring holds (`capacity / RECORD_HEADER`) before it
//! returns, so a ring that lies can cost a reader bounded work, never a spin.

use crate::sync::{fence, AtomicU32, AtomicU64, Ordering, Padded};

/// Readers (subscribers) a ring can serve; one bit each in `sleepers`.
#[cfg(not(loom))]
pub const MAX_READERS: usize = 64;
#[cfg(loom)]
pub const MAX_READERS: usize = 3;

pub const RECORD_HEADER: u64 = 16;
/// Bytes past a record's end that its writer marks before committing it: the next record's
/// `seq` word, `NOT_COMMITTED` until that record is committed.
pub const COMMIT_WORD: u64 = 8;
/// The `seq` word of a record not yet committed (no writer reaches this sequence number).
const NOT_COMMITTED: u64 = u64::MAX;
/// The bytes at the start of a lap a reliable writer keeps small records in while its readers keep
/// up (see the protocol above): with both directions' windows, well inside a first-level cache.
pub const WINDOW: u64 = 8 * 1024;
/// Records of at least this many bytes take turns between the two halves of a lap while the
/// readers keep up (see "The window" above). Smaller ones walk the ring as before: the turns
/// were measured to gain from 1 MiB up, and at 32 KiB to lose a little (docs/RESULTS.md).
pub const LARGE: u64 = 256 * 1024;
const RECORD_ALIGN: u64 = 8;
/// Latest readers hold payloads of at least this many bytes in place instead of copying them.
#[cfg(not(loom))]
pub const HOLD_MIN: u64 = 16 * 1024;
#[cfg(loom)]
pub const HOLD_MIN: u64 = 8;
/// Room a writer keeps before a held record: the header of the padding that steps over it.
const HOLD_ROOM: u64 = RECORD_HEADER;
/// Plans a reservation makes around a hold that keeps changing before it gives up for now.
const HOLD_ROUNDS: usize = 4;
const TAG_MARK: u32 = 0xFE77_0000;
const KIND_MESSAGE: u32 = 1;
const KIND_PADDING: u32 = 2;

/// Bytes a record with `payload` bytes occupies in the ring.
#[inline]
pub fn record_len(payload: u64) -> u64 {
    (RECORD_HEADER + payload + RECORD_ALIGN - 1) & !(RECORD_ALIGN - 1)
}

/// The largest payload a ring of `capacity` bytes can hold in one record (and the mark of the
/// next record's commit word).
pub fn max_payload(capacity: u64) -> u64 {
    capacity - RECORD_HEADER - COMMIT_WORD
}

/// The shared part of a ring. Lives in shared memory (`#[repr(C)]`, all-zero is the empty ring).
#[repr(C)]
pub struct RingHeader {
    /// End of the last committed record, and beside it (same cache line) the start of that
    /// record. Written by the writer only.
    pub head: Padded<HeadLine>,
    /// What the writer reserved and plans. Written by the writer only.
    pub reserve: Padded<ReserveLine>,
    /// Bit i set: reader i is about to sleep or sleeps and wants a wake-up.
    pub sleepers: Padded<AtomicU64>,
    /// Non-zero while the writer waits for space.
    pub writer_waiting: Padded<AtomicU32>,
    pub readers: [Padded<ReaderSlot>; MAX_READERS],
}

/// The writer's publication line: read by every reader on every poll.
#[repr(C)]
pub struct HeadLine {
    /// End of the last committed record.
    pub end: AtomicU64,
    /// Start of the last committed record (a lapped latest reader resumes there).
    pub last: AtomicU64,
    /// The sequence number the next message will carry (a joining reader expects it).
    pub next_seq: AtomicU64,
    /// The start of the oldest message the writer keeps for readers that join later
    /// (`Writer::with_history`), plus one; 0: none kept.
    pub history: AtomicU64,
}

/// The writer's reservation line: read by latest readers and joiners.
#[repr(C)]
pub struct ReserveLine {
    /// End of the record being written plus `COMMIT_WORD` (> head), or 0 before the first
    /// reservation.
    pub end: AtomicU64,
    /// The furthest position the writer has planned to write below, never lowered (see
    /// "Holding" above); beside `end`, so a reader that holds loads both with one line.
    pub frontier: AtomicU64,
    /// The record a latest reader holds in place: `pos << 8 | (slot + 1)`, or 0. On this line
    /// too: the holder that sets it loads `frontier` next, and the writer that stores `frontier`
    /// loads it next.
    pub hold: AtomicU64,
}

/// One reader's place in the ring.
#[repr(C)]
pub struct ReaderSlot {
    /// 0: free. Otherwise `token << 1 | reliable`, the token naming the subscriber instance.
    pub owner: AtomicU64,
    /// Everything below this position is released by this reader.
    pub cursor: AtomicU64,
    /// 1 while the writer counts this reader as expected (`expect_reader`) and it has not
    /// joined yet: the writer's close waits for it, since it has not mapped the ring.
    pub expected: AtomicU64,
}

impl RingHeader {
    /// A fresh header in process memory (tests, models and fuzz targets; shared memory starts
    /// zeroed instead).
    #[cfg(any(test, feature = "internals"))]
    #[allow(clippy::new_without_default)]
    pub fn new() -> RingHeader {
        RingHeader {
            head: Padded(HeadLine {
                end: AtomicU64::new(0),
                last: AtomicU64::new(0),
                next_seq: AtomicU64::new(0),
                history: AtomicU64::new(0),
            }),
            reserve: Padded(ReserveLine {
                end: AtomicU64::new(0),
                frontier: AtomicU64::new(0),
                hold: AtomicU64::new(0),
            }),
            sleepers: Padded(AtomicU64::new(0)),
            writer_waiting: Padded(AtomicU32::new(0)),
            readers: std::array::from_fn(|_| {
                Padded(ReaderSlot {
                    owner: AtomicU64::new(0),
                    cursor: AtomicU64::new(0),
                    expected: AtomicU64::new(0),
                })
            }),
        }
    }
}

/// Byte storage of a ring of `capacity()` bytes (a power of two). `offset` is already reduced
/// modulo the capacity; a span may run up to `capacity()` bytes past it. Words are 8 bytes at an
/// offset that is a multiple of 8, accessed atomically.
pub trait RingBytes {
    /// Writes whole words (tests forge rings with it; the writer stores words).
    #[cfg(test)]
    fn write(&self, offset: u64, src: &[u8]);
    fn read(&self, offset: u64, dst: &mut [u8]);
    /// The record header at `offset`, read as `read` reads.
    #[inline]
    fn read_header(&self, offset: u64) -> [u8; RECORD_HEADER as usize] {
        let mut header = [0u8; RECORD_HEADER as usize];
        self.read(offset, &mut header);
        header
    }
    /// Loads the word at `offset` with Acquire ordering.
    fn load_word(&self, offset: u64) -> u64;
    /// Stores the word at `offset` with `order` (Relaxed or Release).
    fn store_word(&self, offset: u64, value: u64, order: Ordering);
}

/// The writer's process-local state.
#[derive(Debug)]
pub struct Writer {
    capacity: u64,
    head: u64,
    /// May reserve up to here without looking at the readers again.
    limit: u64,
    seq: u64,
    reliable: bool,
    /// `WINDOW` for a reliable ring large enough to gain from it, else 0 (off).
    window: u64,
    /// The start of the last lap at whose window end a skip was considered; or, for a large
    /// record, the half-lap boundary it was last refused for (the two never meet in a way that
    /// matters: at worst one look is left out).
    window_lap: u64,
    /// Records of at least this many bytes go to half-lap boundaries in tests (`LARGE`
    /// otherwise).
    #[cfg(test)]
    large: u64,
    /// Holds are looked for while `head` is below this: the end of the last large message a lap
    /// on (only large messages are held).
    hold_watch: u64,
    /// The `hold` word last seen, and the ring offset and length of its record when the hold is
    /// honoured.
    held: (u64, Option<(u64, u64)>),
    /// What `frontier` holds (only this writer stores it).
    frontier: u64,
    /// Sleepers to wake found while committing padding in `try_reserve`, handed out by the next
    /// `commit`.
    wake_later: u64,
    /// The messages kept for readers that join later.
    history: Kept,
}

/// The last messages a writer keeps in its ring for readers that join later (see "History"
/// above): where their records start. Nothing is copied; a record stays until the writer
/// reserves over it or it is no longer among the last `keep`.
#[derive(Debug, Default)]
struct Kept {
    /// How many (0: none).
    keep: usize,
    /// Their record positions, oldest first.
    starts: std::collections::VecDeque<u64>,
}

impl Kept {
    /// The `history` word for these: the oldest start plus one, or 0.
    fn word(&self) -> u64 {
        self.starts.front().map_or(0, |&p| p + 1)
    }
}

/// A reserved, not yet committed record.
#[derive(Debug, Clone, Copy)]
pub struct Reservation {
    pub pos: u64,
    pub payload_len: u64,
    end: u64,
}

impl Reservation {
    /// Ring offset of the first payload byte.
    pub fn payload_offset(&self, capacity: u64) -> u64 {
        (self.pos + RECORD_HEADER) & (capacity - 1)
    }
}

/// The ring had no room: reliable readers hold it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

impl Writer {
    /// Takes over a ring. A fresh ring is all zero; a ring is only ever written by one writer.
    pub fn new(hdr: &RingHeader, capacity: u64, reliable: bool) -> Writer {
        debug_assert!(capacity.is_power_of_two());
        // Relaxed: only this writer ever stores head.
        let head = hdr.head.end.load(Ordering::Relaxed);
        // A padding record's length must fit its u32 field.
        let window = if reliable && (2 * WINDOW..=1 << 31).contains(&capacity) {
            WINDOW
        } else {
            0
        };
        // Relaxed: only this writer ever stores it.
        let frontier = hdr.reserve.frontier.load(Ordering::Relaxed);
        Writer {
            capacity,
            head,
            limit: 0,
            seq: 0,
            reliable,
            window,
            window_lap: u64::MAX,
            #[cfg(test)]
            large: LARGE,
            // A ring taken over may hold large records: watch a lap (a fresh one holds none).
            hold_watch: if head == 0 { 0 } else { head + capacity },
            held: (0, None),
            frontier,
            wake_later: 0,
            history: Kept::default(),
        }
    }

    /// Keeps the last `keep` messages in the ring for readers that join later (as far as the
    /// ring holds them). The window is off then: it would keep small records in one place.
    pub fn with_history(mut self, hdr: &RingHeader, keep: usize) -> Writer {
        self.history.keep = keep;
        if keep > 0 {
            self.window = 0;
        }
        // A ring taken over holds no history of this writer's. Relaxed: published by the next
        // Release reserve store.
        hdr.head.history.store(0, Ordering::Relaxed);
        self
    }

    /// Before a reservation that may write below `touched`: forgets kept messages whose bytes
    /// it writes over (positions a lap below it), so that the `history` word the reservation
    /// publishes (Release) never names a record being overwritten.
    #[inline(always)]
    fn forget_overwritten(&mut self, hdr: &RingHeader, touched: u64) {
        if self.history.keep == 0 {
            return;
        }
        let gone_below = touched.saturating_sub(self.capacity);
        let before = self.history.starts.len();
        while self.history.starts.front().is_some_and(|&p| p < gone_below) {
            self.history.starts.pop_front();
        }
        if self.history.starts.len() != before {
            // Relaxed: published by the Release store of `reserve` that follows.
            hdr.head
                .history
                .store(self.history.word(), Ordering::Relaxed);
        }
    }

    /// Sets the window (tests and models use small rings; 0 turns it off).
    #[cfg(test)]
    pub fn with_window(mut self, window: u64) -> Writer {
        assert!(self.reliable && 2 * window <= self.capacity);
        self.window = window;
        // Every record over half the window is a large one here.
        self.large = window / 2 + 1;
        self
    }

    /// Call before reserving a record of `payload_len` bytes. When the record would reach past the
    /// window and the reliable readers have released enough, commits a padding record over the
    /// rest of the lap so that the record starts the next lap at offset 0 (see the protocol
    /// above). Returns the sleeping readers to wake, as `commit` does.
    #[inline]
    pub fn skip_to_window<M: RingBytes>(
        &mut self,
        hdr: &RingHeader,
        mem: &M,
        payload_len: u64,
    ) -> u64 {
        let off = self.head & (self.capacity - 1);
        let rec = record_len(payload_len);
        if !self.past_window(off, rec) {
            return 0;
        }
        if 2 * rec > self.window {
            return self.skip_large(hdr, mem, rec);
        }
        // Not while a record may be held (the padding's mark could land in it).
        if self.watching_holds() {
            return 0;
        }
        self.skip_slow(hdr, mem, off, rec)
    }

    /// Whether a record of `rec` bytes at lap offset `off` is one the window would move: a small
    /// record (at most half the window) that would reach past the window, to the next lap
    /// (`skip_slow` then tries it once per lap), or a large one not at a half-lap boundary, to
    /// the next (`skip_large`).
    #[inline(always)]
    fn past_window(&self, off: u64, rec: u64) -> bool {
        self.window != 0
            && if 2 * rec <= self.window {
                off + rec > self.window
            } else {
                rec >= self.large() && off & (self.capacity / 2 - 1) != 0
            }
    }

    /// Records of at least this many bytes go to half-lap boundaries.
    #[cfg(not(test))]
    #[inline(always)]
    fn large(&self) -> u64 {
        LARGE
    }

    #[cfg(test)]
    #[inline(always)]
    fn large(&self) -> u64 {
        self.large
    }

    /// A large record (`LARGE`) goes to the next half-lap boundary when every reliable reader
    /// has released everything (see "The window" above), so that large messages answered one at
    /// a time take turns in two places of the ring instead of walking all of it. A reader behind
    /// is looked for once per half lap. Returns the sleeping readers to wake, as `commit` does.
    #[cold]
    fn skip_large<M: RingBytes>(&mut self, hdr: &RingHeader, mem: &M, rec: u64) -> u64 {
        let half = self.capacity / 2;
        // Checked: a head this close to 2^64 is never reached, and nothing here may wrap.
        let Some(next) = (self.head | (half - 1)).checked_add(1) else {
            return 0;
        };
        let touched = next.saturating_add(rec + COMMIT_WORD);
        if self.window_lap == next
            || next - self.head < RECORD_HEADER + COMMIT_WORD
            || touched - next > half
        {
            return 0;
        }
        if self.min_cursor(hdr) != self.head {
            self.window_lap = next;
            return 0;
        }
        self.limit = self.head.saturating_add(self.capacity);
        // As `reserve_around_hold` plans: how far the padding and the record after it reach,
        // published before the look for a hold.
        if self.watching_holds() && self.look_for_hold(hdr, mem, touched) {
            // A record held in place: the reservation steps over it as usual.
            return 0;
        }
        self.pad_to(hdr, mem, next)
    }

    #[cold]
    fn skip_slow<M: RingBytes>(&mut self, hdr: &RingHeader, mem: &M, off: u64, rec: u64) -> u64 {
        let lap = self.head - off;
        if self.window_lap == lap || self.capacity - off < RECORD_HEADER + COMMIT_WORD {
            return 0;
        }
        self.window_lap = lap;
        let next = lap + self.capacity;
        if !self.room_up_to(hdr, next + rec + COMMIT_WORD) {
            return 0;
        }
        self.pad_to(hdr, mem, next)
    }

    /// Whether the reliable readers have released enough for the writer to write below
    /// `touched` (always, without reliable readers). Looks at their cursors only when the cached
    /// limit says no.
    #[inline]
    fn room_up_to(&mut self, hdr: &RingHeader, touched: u64) -> bool {
        if !self.reliable || touched <= self.limit {
            return true;
        }
        self.limit = self.min_cursor(hdr) + self.capacity;
        touched <= self.limit
    }

    /// Commits a padding record from `head` to `next` (room already checked). Returns the
    /// sleeping readers to wake, as `commit` does.
    fn pad_to<M: RingBytes>(&mut self, hdr: &RingHeader, mem: &M, next: u64) -> u64 {
        // Reserved as `reserve_here` does: the padding record and the mark at `next`.
        self.forget_overwritten(hdr, next + COMMIT_WORD);
        // Release: as in `reserve_here`.
        hdr.reserve.end.store(next + COMMIT_WORD, Ordering::Release);
        fence(Ordering::Release);
        let r = Reservation {
            pos: self.head,
            payload_len: next - self.head - RECORD_HEADER,
            end: next,
        };
        self.finish(hdr, mem, r, KIND_PADDING)
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Messages committed so far.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Whether a reservation must look for a held record first.
    #[inline]
    fn watching_holds(&self) -> bool {
        self.head < self.hold_watch || self.held.1.is_some()
    }

    /// `skip_to_window` and `try_reserve` in the common case, where no held record is to be
    /// looked for and no padding is due: the reservation at `head` if the readers leave room.
    /// `None` leaves the reservation to them.
    #[inline(always)]
    pub fn reserve_common(&mut self, hdr: &RingHeader, payload_len: u64) -> Option<Reservation> {
        let off = self.head & (self.capacity - 1);
        if self.past_window(off, record_len(payload_len)) || self.watching_holds() {
            return None;
        }
        self.reserve_here(hdr, payload_len).ok()
    }

    /// Reserves a record for `payload_len` bytes (which must fit: `<= max_payload(capacity)`).
    /// Where a latest reader holds a record in the way, a padding record over it is committed
    /// first (its wake-ups come with the next `commit`).
    #[inline]
    pub fn try_reserve<M: RingBytes>(
        &mut self,
        hdr: &RingHeader,
        mem: &M,
        payload_len: u64,
    ) -> Result<Reservation, Full> {
        if self.watching_holds() {
            return self.reserve_around_hold(hdr, mem, payload_len);
        }
        self.reserve_here(hdr, payload_len)
    }

    /// Plans the reservation around a held record: the message goes at `head`, or, when a held
    /// record is in its way, after that record a lap on, with padding before it. Each plan is
    /// published in `reserve.frontier` and the hold looked at again (see "Holding" above); a plan is
    /// taken when the hold it was made for is still the one there.
    #[inline(never)]
    fn reserve_around_hold<M: RingBytes>(
        &mut self,
        hdr: &RingHeader,
        mem: &M,
        payload_len: u64,
    ) -> Result<Reservation, Full> {
        let rec = record_len(payload_len);
        let mut start = self.head;
        for _ in 0..HOLD_ROUNDS {
            self.look_for_hold(hdr, mem, start + rec + COMMIT_WORD);
            let next = match self.held.1 {
                Some((offset, len)) => {
                    // The held record's next copy at or after head.
                    let copy = self.head + (offset.wrapping_sub(self.head) & (self.capacity - 1));
                    let message = self.head + rec + COMMIT_WORD;
                    if copy >= message + HOLD_ROOM {
                        self.head
                    } else if copy < self.head + COMMIT_WORD + HOLD_ROOM
                        || copy + len + rec + COMMIT_WORD > self.head + self.capacity
                    {
                        // No room to step over it: not a hold an honest reader takes
                        // (`may_hold`); it is not honoured.
                        self.held.1 = None;
                        self.head
                    } else {
                        copy + len
                    }
                }
                None => self.head,
            };
            if next == start {
                return self.place(hdr, mem, start, payload_len);
            }
            start = next;
        }
        // The hold changed under every plan: the caller tries again.
        Err(Full)
    }

    /// Publishes `touched` (how far the writer plans to write) in `frontier` and looks at the
    /// hold word: whether a record is held that the writer must step over (`held`).
    #[inline]
    fn look_for_hold<M: RingBytes>(&mut self, hdr: &RingHeader, mem: &M, touched: u64) -> bool {
        if touched > self.frontier {
            self.frontier = touched;
            // Relaxed: ordered before the hold load by the fence below.
            hdr.reserve.frontier.store(touched, Ordering::Relaxed);
        }
        // Store frontier, fence, load hold; pairs with the fence in `Reader::try_hold` (set hold,
        // fence, load frontier): a hold this load misses saw the frontier above. Acquire pairs
        // with the Release of `Reader::unhold`: the reads of a record let go come before this
        // writer writes over it.
        fence(Ordering::SeqCst);
        let word = hdr.reserve.hold.load(Ordering::Acquire);
        self.look_at_hold(hdr, mem, word);
        self.held.1.is_some()
    }

    /// Commits padding from `head` to `start` (when they differ), then reserves at `start`.
    fn place<M: RingBytes>(
        &mut self,
        hdr: &RingHeader,
        mem: &M,
        start: u64,
        payload_len: u64,
    ) -> Result<Reservation, Full> {
        if start > self.head {
            // Room for the message after the padding, or no padding either.
            if !self.room_up_to(hdr, start + record_len(payload_len) + COMMIT_WORD) {
                return Err(Full);
            }
            self.wake_later |= self.pad_to(hdr, mem, start);
        }
        self.reserve_here(hdr, payload_len)
    }

    /// The hold this writer steps over, as its `hold` word and the reader slot that set it.
    #[inline]
    pub fn holder(&self) -> Option<(u64, usize)> {
        // A word is taken in (`held.1`) only with a slot in 1..=MAX_READERS.
        self.held
            .1
            .map(|_| (self.held.0, (self.held.0 & 0xFF) as usize - 1))
    }

    /// Lets go of the hold `word` for its reader, which its owner found gone (the reader's slot
    /// is already left): its record is written over from the next lap on.
    pub fn drop_hold(&mut self, hdr: &RingHeader, word: u64) {
        // Relaxed: only this exact word is removed; a reader that joins the slot afterwards
        // takes it with no hold (and clears a stale one itself, see `Reader::join`).
        let _ = hdr
            .reserve
            .hold
            .compare_exchange(word, 0, Ordering::Relaxed, Ordering::Relaxed);
        if self.held.0 == word {
            self.held = (0, None);
        }
    }

    /// Takes in the `hold` word: whether its record is one to step over, and where it lies.
    fn look_at_hold<M: RingBytes>(&mut self, hdr: &RingHeader, mem: &M, word: u64) {
        if word == self.held.0 {
            return;
        }
        self.held = (word, None);
        if word == 0 {
            return;
        }
        let (pos, slot) = (word >> 8, (word & 0xFF) as usize);
        // A hold of a reader that left (or of no reader) is cleared.
        let owner = hdr.readers.get(slot.wrapping_sub(1)).map_or(0, |s| {
            // Relaxed: a reader that joins takes the slot with no hold.
            s.owner.load(Ordering::Relaxed)
        });
        if owner == 0 {
            // Relaxed: only this exact stale word is removed.
            let _ =
                hdr.reserve
                    .hold
                    .compare_exchange(word, 0, Ordering::Relaxed, Ordering::Relaxed);
            return;
        }
        // A hold a reader may have taken: a committed record whose next copy lies at least a
        // mark and a padding header ahead (see `Reader::try_hold`); anything else lost the race.
        let Some(copy) = pos.checked_add(self.capacity) else {
            return;
        };
        // A record starts at a multiple of 8; a word naming any other position is forged.
        if pos >= self.head || copy < self.head + COMMIT_WORD + HOLD_ROOM || pos % RECORD_ALIGN != 0
        {
            return;
        }
        // Its length from the header this writer wrote there, not from the reader.
        let header = mem.read_header(pos & (self.capacity - 1));
        let len = u32::from_le_bytes(header[8..12].try_into().unwrap()) as u64;
        let tag = u32::from_le_bytes(header[12..].try_into().unwrap());
        let len = record_len(len);
        if tag == TAG_MARK | KIND_MESSAGE && len <= self.head - pos {
            self.held.1 = Some((pos & (self.capacity - 1), len));
        }
    }

    #[inline]
    fn reserve_here(&mut self, hdr: &RingHeader, payload_len: u64) -> Result<Reservation, Full> {
        let end = self.head + record_len(payload_len);
        // The record and the next record's commit word, which `finish` marks.
        let touched = end + COMMIT_WORD;
        debug_assert!(touched - self.head <= self.capacity);
        if !self.room_up_to(hdr, touched) {
            return Err(Full);
        }
        self.forget_overwritten(hdr, touched);
        // A Release store: a reader that sees it sees the `history` word stored before it (pairs
        // with the Acquire load in `history`). Then a Release fence: the payload writes that
        // follow cannot be seen before the new `reserve` (pairs with the Acquire fence in
        // `Reader::read_latest`, `walk_history` and `newest`). The joiner handshake orders it through the SeqCst fence in
        // `min_cursor`.
        hdr.reserve.end.store(touched, Ordering::Release);
        fence(Ordering::Release);
        Ok(Reservation {
            pos: self.head,
            payload_len,
            end,
        })
    }

    /// The lowest released position over live reliable readers, or `head` when there are none.
    fn min_cursor(&self, hdr: &RingHeader) -> u64 {
        // SeqCst fence between the earlier `reserve` stores and the owner loads below; pairs with
        // the fence in `Reader::join` (store owner, fence, load reserve) and, in `announce_wait`,
        // with the fence in `Reader::release` (store cursor, fence, load writer_waiting).
        fence(Ordering::SeqCst);
        let mut min = self.head;
        for slot in hdr.readers.iter() {
            // Acquire pairs with the Release owner store in `Reader::join`: the cursor guess
            // stored before it is visible.
            let owner = slot.owner.load(Ordering::Acquire);
            if owner & 1 == 1 {
                // Acquire pairs with the Release cursor stores of `Reader::release`/`join`.
                let cursor = slot.cursor.load(Ordering::Acquire);
                if cursor < min {
                    min = cursor;
                }
            }
        }
        min
    }

    /// Expected reliable readers (`expect_reader`) that have not joined yet while something is
    /// written, as a mask of their slots, and the bytes written since the first of their
    /// places: what only they have not mapped. (A reader that joined reads what was written
    /// after the writer has gone.)
    pub fn unread_by(&self, hdr: &RingHeader) -> (u64, u64) {
        if !self.reliable {
            return (0, 0);
        }
        let mut behind = 0u64;
        let mut from = self.head;
        for (i, slot) in hdr.readers.iter().enumerate() {
            // Acquire pairs with the Release in `Reader::join`'s adoption.
            let expected = slot.expected.load(Ordering::Acquire) == 1;
            // Acquire pairs with the Release owner store of `expect_reader`.
            if expected && slot.owner.load(Ordering::Acquire) & 1 == 1 {
                let cursor = slot.cursor.load(Ordering::Relaxed);
                if cursor < self.head {
                    behind |= 1 << i;
                    from = from.min(cursor);
                }
            }
        }
        (behind, self.head - from)
    }

    /// Reliable readers whose cursor keeps a record of `payload_len` bytes out.
    pub fn laggards(&self, hdr: &RingHeader, payload_len: u64) -> u64 {
        let end = self.head + record_len(payload_len) + COMMIT_WORD;
        let mut mask = 0u64;
        for (i, slot) in hdr.readers.iter().enumerate() {
            // Acquire pairs with the Release stores in `Reader::join`.
            let owner = slot.owner.load(Ordering::Acquire);
            if owner & 1 == 1 {
                // Acquire pairs with the Release cursor stores of `Reader::release`/`join`.
                // Saturating: a reader's cursor is whatever that process wrote.
                let cursor = slot.cursor.load(Ordering::Acquire);
                if cursor.saturating_add(self.capacity) < end {
                    mask |= 1 << i;
                }
            }
        }
        mask
    }

    /// Announces that the writer is about to sleep until a reader releases space, and says
    /// whether space appeared meanwhile (then it must not sleep).
    pub fn announce_wait(&mut self, hdr: &RingHeader, payload_len: u64) -> bool {
        // Relaxed store; the SeqCst fence at the start of `min_cursor` orders it before the
        // cursor loads (pairs with the fence in `Reader::release`).
        hdr.writer_waiting.store(1, Ordering::Relaxed);
        let end = self.head + record_len(payload_len) + COMMIT_WORD;
        self.limit = self.min_cursor(hdr) + self.capacity;
        end <= self.limit
    }

    pub fn end_wait(&self, hdr: &RingHeader) {
        // Relaxed: a stale 1 only costs a reader a needless wake.
        hdr.writer_waiting.store(0, Ordering::Relaxed);
    }

    /// Writes the record header and publishes the record. Returns the mask of sleeping readers to
    /// wake (already cleared in the ring).
    pub fn commit<M: RingBytes>(&mut self, hdr: &RingHeader, mem: &M, r: Reservation) -> u64 {
        if r.payload_len >= HOLD_MIN {
            // A reader may hold this record until the writer is a lap past it.
            self.hold_watch = r.end + self.capacity;
        }
        self.finish(hdr, mem, r, KIND_MESSAGE) | std::mem::take(&mut self.wake_later)
    }

    /// Gives a reservation back: it becomes a padding record that readers step over.
    pub fn abandon<M: RingBytes>(&mut self, hdr: &RingHeader, mem: &M, r: Reservation) -> u64 {
        self.finish(hdr, mem, r, KIND_PADDING) | std::mem::take(&mut self.wake_later)
    }

    fn finish<M: RingBytes>(
        &mut self,
        hdr: &RingHeader,
        mem: &M,
        r: Reservation,
        kind: u32,
    ) -> u64 {
        debug_assert_eq!(r.pos, self.head);
        let mask = self.capacity - 1;
        // The header's second word: `{len, tag}`, little-endian, as one word. Relaxed: ordered
        // before the commit below by its Release.
        let mut rest = [0u8; 8];
        rest[..4].copy_from_slice(&(r.payload_len as u32).to_le_bytes());
        rest[4..].copy_from_slice(&(TAG_MARK | kind).to_le_bytes());
        mem.store_word(
            (r.pos + 8) & mask,
            u64::from_ne_bytes(rest),
            Ordering::Relaxed,
        );
        // Relaxed: ordered before the commit below by its Release.
        mem.store_word(r.end & mask, NOT_COMMITTED, Ordering::Relaxed);
        // The commit. Release: the record's bytes and the next record's mark are visible to a
        // reader that sees this word (pairs with the Acquire `load_word` in `Reader::committed`).
        mem.store_word(r.pos & mask, self.seq, Ordering::Release);
        if kind == KIND_MESSAGE {
            self.seq += 1;
            if self.history.keep != 0 {
                self.keep(hdr, r.pos);
            }
        }
        self.head = r.end;
        // Relaxed: published by the head store below, on the same line.
        hdr.head.last.store(r.pos, Ordering::Relaxed);
        hdr.head.next_seq.store(self.seq, Ordering::Relaxed);
        // Release: the record bytes are visible to a reader that sees this head (pairs with the
        // readers' Acquire loads of head).
        hdr.head.end.store(r.end, Ordering::Release);
        // The sleeper handshake: store head, fence, load sleepers; pairs with the fence in
        // `Reader::announce_sleep` (set bit, fence, load head).
        fence(Ordering::SeqCst);
        if hdr.sleepers.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        // Relaxed: the fence above already ordered this after the head store.
        hdr.sleepers.swap(0, Ordering::Relaxed)
    }
}

impl Writer {
    /// Keeps the message just committed at `pos` among the last `keep`.
    #[cold]
    fn keep(&mut self, hdr: &RingHeader, pos: u64) {
        self.history.starts.push_back(pos);
        if self.history.starts.len() > self.history.keep {
            self.history.starts.pop_front();
        }
        // Relaxed: published by the Release head store that follows in `finish`.
        hdr.head
            .history
            .store(self.history.word(), Ordering::Relaxed);
    }
}

/// What a reader found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Position of the record (its header).
    pub pos: u64,
    /// Ring offset of the payload.
    pub offset: u64,
    pub len: u64,
    pub seq: u64,
    /// Position of the next record.
    pub end: u64,
    /// Messages this reader missed just before this one (latest delivery only).
    pub skipped: u64,
    /// Latest delivery: the record is held in place (read it at `offset`, then `unhold`) rather
    /// than copied out.
    pub held: bool,
}

/// What a reliable reader found at its position (`Reader::step`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing committed there yet.
    Empty,
    /// A message, to be read in place and released.
    Message(Record),
    /// Padding ending at the position given, to be released.
    Padding(u64),
    /// A record header that fails its checks (see `Corrupt`).
    Corrupt,
}

/// A record header failed its checks where the protocol rules out a race: the segment was
/// written by something that is not a ferry publisher of this layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt {
    pub pos: u64,
}

/// A reader's process-local state.
#[derive(Debug)]
pub struct Reader {
    slot: usize,
    capacity: u64,
    max_len: u64,
    pos: u64,
    head: u64,
    /// `pos` is the end of a record this reader read: the word there is `NOT_COMMITTED` or the
    /// commit of the record that follows (see the protocol above), so it can be polled.
    at_mark: bool,
    next_seq: Option<u64>,
    reliable: bool,
    /// The `hold` word of the record this reader holds, or 0.
    hold: u64,
    /// Reliable delivery: the starts of the records read and kept (`keep`), oldest first, and
    /// the oldest of them (`u64::MAX`: none). The cursor never passes it: the writer cannot
    /// reuse a kept record.
    kept: Vec<u64>,
    floor: u64,
}

/// The writer of a ring no reader has seen yet counts the reliable subscriber of topic slot
/// `slot` (its token `token`) as a reader from the ring's start; the subscriber adopts that place
/// when it joins. Called before the ring is published to subscribers.
pub fn expect_reader(hdr: &RingHeader, slot: usize, token: u64) {
    let s = &hdr.readers[slot];
    // Relaxed: published by the Release owner store below.
    s.cursor
        .store(hdr.head.end.load(Ordering::Relaxed), Ordering::Relaxed);
    s.expected.store(1, Ordering::Relaxed);
    // Release pairs with the Acquire owner loads in `min_cursor` and in `Reader::join`.
    s.owner.store(token << 1 | 1, Ordering::Release);
}

impl Reader {
    /// Takes slot `slot` (which the caller owns through the topic's subscriber table) and starts
    /// reading from now: the next record the writer reserves — or, when the writer counted this
    /// reliable subscriber as a reader before it published the ring (`expect_reader`), from
    /// the place it kept for it.
    pub fn join(
        hdr: &RingHeader,
        capacity: u64,
        max_len: u64,
        slot: usize,
        token: u64,
        reliable: bool,
    ) -> Reader {
        let s = &hdr.readers[slot];
        // Acquire pairs with the Release in `expect_reader`: the cursor it stored is visible.
        let expected = reliable && s.owner.load(Ordering::Acquire) == token << 1 | 1;
        let (pos, head, next_seq) = if expected {
            let pos = s.cursor.load(Ordering::Relaxed);
            // Release pairs with the Acquire load in `Writer::unread`: mapped, it reads what
            // is written even after the writer has gone.
            s.expected.store(0, Ordering::Release);
            let head = hdr.head.end.load(Ordering::Acquire);
            (pos, head, None)
        } else {
            Self::take_slot(hdr, slot, token, reliable)
        };
        Reader {
            slot,
            capacity,
            max_len,
            pos,
            head,
            at_mark: false,
            next_seq,
            reliable,
            hold: 0,
            kept: Vec::new(),
            floor: u64::MAX,
        }
    }

    /// Takes slot `slot` for a reader that no writer kept a place for: lets go of a hold the
    /// slot's previous reader left and publishes where this reader starts. Returns that
    /// position, the head it saw and, where known, the sequence number of the first record.
    fn take_slot(
        hdr: &RingHeader,
        slot: usize,
        token: u64,
        reliable: bool,
    ) -> (u64, u64, Option<u64>) {
        let s = &hdr.readers[slot];
        // A hold naming this slot was left by the slot's previous reader (one that ended without
        // letting go, such as a process that died): it is let go, so it neither keeps the writer
        // stepping over that record nor keeps every reader copying. Relaxed: nobody reads what
        // that reader held any more.
        let stale = hdr.reserve.hold.load(Ordering::Relaxed);
        if stale != 0 && stale & 0xFF == slot as u64 + 1 {
            let _ =
                hdr.reserve
                    .hold
                    .compare_exchange(stale, 0, Ordering::Relaxed, Ordering::Relaxed);
        }
        // Another subscriber of this slot was expected: this one is not, and maps the ring now.
        // Relaxed: the writer's close only waits less.
        s.expected.store(0, Ordering::Relaxed);
        // A first guess below any future reservation, so a writer that sees us early waits for us
        // rather than overrunning us. Acquire pairs with the writer's Release head store.
        let head = hdr.head.end.load(Ordering::Acquire);
        s.cursor.store(head, Ordering::Relaxed);
        // Release pairs with the Acquire owner load in `min_cursor` (publishes the guess).
        s.owner
            .store(token << 1 | reliable as u64, Ordering::Release);
        // Store owner, fence, load reserve; pairs with the fence in `min_cursor`: a scan that
        // missed us came after a reservation we see here, so the writer cannot lap `pos`.
        fence(Ordering::SeqCst);
        // `reserve` is the end of the latest reservation plus COMMIT_WORD (0 before the first).
        let pos = hdr
            .reserve
            .end
            .load(Ordering::Relaxed)
            .saturating_sub(COMMIT_WORD)
            .max(head)
            // Records start at multiples of 8: a ring whose words say otherwise lies, and the
            // reader goes to a record boundary below, where that lie shows as a corrupt record.
            & !(RECORD_ALIGN - 1);
        // Release pairs with the Acquire cursor load in `min_cursor`.
        s.cursor.store(pos, Ordering::Release);
        // With nothing being written at `pos`, the first record read carries the writer's next
        // sequence number, so a latest reader lapped before its first read counts what it
        // missed. (Relaxed: at least as new as `head`, loaded with Acquire above; a newer value
        // only undercounts.) Behind a reservation in progress it is not known: that record may
        // be a message or padding.
        let next_seq = (pos == head).then(|| hdr.head.next_seq.load(Ordering::Relaxed));
        (pos, head, next_seq)
    }

    /// Leaves the slot; the writer stops waiting for this reader (and stepping over what it held).
    pub fn leave(&mut self, hdr: &RingHeader) {
        self.unhold(hdr);
        // Release pairs with the writer's owner scan; the cursor no longer matters.
        hdr.readers[self.slot].owner.store(0, Ordering::Release);
    }

    /// True if a committed record is waiting (one atomic load when the cached head says no).
    pub fn has_data(&mut self, hdr: &RingHeader) -> bool {
        if self.pos < self.head {
            return true;
        }
        // Acquire pairs with the Release head store in `Writer::finish`.
        self.head = hdr.head.end.load(Ordering::Acquire);
        self.pos < self.head
    }

    /// For a reliable reader: whether a committed record starts at `pos`, and if so the highest
    /// position its end may have. At a mark this is one Acquire load of the word at `pos`;
    /// otherwise it is `head`.
    #[inline(always)]
    fn committed<M: RingBytes>(&mut self, hdr: &RingHeader, mem: &M) -> Option<u64> {
        if self.pos < self.head {
            return Some(self.head);
        }
        if self.at_mark {
            // Acquire pairs with the Release commit store in `Writer::finish`.
            let word = mem.load_word(self.pos & (self.capacity - 1));
            if word == NOT_COMMITTED {
                return None;
            }
            // The next record (message or padding) carries the next sequence number. Anything
            // else is not what an honest writer leaves there: judge it against `head` instead.
            if Some(word) == self.next_seq {
                // A record and the next one's mark fit in the ring. (Saturating: positions a
                // lap below 2^64 are a forged ring's, whose record then fails its checks.)
                return Some(self.pos.saturating_add(self.capacity - COMMIT_WORD));
            }
        }
        self.has_data(hdr).then_some(self.head)
    }

    /// The fields of a record header if they are plausible for a record at `pos` ending at or
    /// before `limit`.
    #[inline(always)]
    fn decode(&self, header: &[u8; RECORD_HEADER as usize], limit: u64) -> Option<(u64, u64, u32)> {
        let seq = u64::from_le_bytes(header[..8].try_into().unwrap());
        let len = u32::from_le_bytes(header[8..12].try_into().unwrap()) as u64;
        let tag = u32::from_le_bytes(header[12..].try_into().unwrap());
        let kind = tag & 0xFFFF;
        // Padding may run to the end of a lap (the window); a message is at most `max_len`.
        let max = if kind == KIND_PADDING {
            self.capacity - RECORD_HEADER - COMMIT_WORD
        } else {
            self.max_len
        };
        let plausible = tag & 0xFFFF_0000 == TAG_MARK
            && (kind == KIND_MESSAGE || kind == KIND_PADDING)
            && len <= max
            && self
                .pos
                .checked_add(record_len(len))
                .is_some_and(|end| end <= limit);
        plausible.then_some((seq, len, kind))
    }

    #[inline(always)]
    fn count_skipped(&mut self, seq: u64) -> u64 {
        let skipped = match self.next_seq {
            Some(expected) if seq > expected => seq - expected,
            _ => 0,
        };
        self.next_seq = Some(seq.wrapping_add(1));
        skipped
    }

    /// Loop turns one call may take: as many records as a ring holds, plus a jump and a last
    /// look at `head`.
    fn record_budget(&self) -> u64 {
        self.capacity / RECORD_HEADER + 2
    }

    /// Reliable delivery: the next record, to be read in place and then released with
    /// `release(record.end)`. Padding is stepped over (and released) here.
    #[inline]
    pub fn peek<M: RingBytes>(
        &mut self,
        hdr: &RingHeader,
        mem: &M,
    ) -> Result<Option<Record>, Corrupt> {
        // Padding is stepped over at most a ring's worth of records per call: a writer that keeps
        // abandoning (or lies) cannot hold the reader here.
        for _ in 0..self.record_budget() {
            match self.step(hdr, mem) {
                Step::Empty => return Ok(None),
                Step::Message(record) => return Ok(Some(record)),
                Step::Padding(end) => {
                    self.release(hdr, end);
                }
                Step::Corrupt => return Err(Corrupt { pos: self.pos }),
            }
        }
        Ok(None)
    }

    /// Reliable delivery, one record: what lies at `pos`. Unless it is a message only cached
    /// state changes (`at_mark`, `head`), so a caller that gets padding or a corrupt record may
    /// leave it to `peek`, which finds the same record.
    #[inline(always)]
    pub fn step<M: RingBytes>(&mut self, hdr: &RingHeader, mem: &M) -> Step {
        debug_assert!(self.reliable);
        let Some(limit) = self.committed(hdr, mem) else {
            return Step::Empty;
        };
        // The writer never reserves past this reader's cursor (`pos`) plus a ring.
        if limit - self.pos > self.capacity {
            return Step::Corrupt;
        }
        let header = mem.read_header(self.pos & (self.capacity - 1));
        let Some((seq, len, kind)) = self.decode(&header, limit) else {
            return Step::Corrupt;
        };
        let end = self.pos + record_len(len);
        // Its writer marked the word at `end` before committing this record. After padding
        // the reader goes by `head` again: a ring that lies with padding can then lead it
        // no further than `head`, and honest padding (a dropped loan) is rare.
        self.at_mark = kind == KIND_MESSAGE;
        if kind == KIND_PADDING {
            return Step::Padding(end);
        }
        let skipped = self.count_skipped(seq);
        Step::Message(Record {
            pos: self.pos,
            offset: (self.pos + RECORD_HEADER) & (self.capacity - 1),
            len,
            seq,
            end,
            skipped,
            held: false,
        })
    }

    /// Releases everything below `end` (the end of the record just read). Returns true when the
    /// writer waits for space and must be woken.
    /// Records kept (`keep`) stay out of it: the cursor stops at the oldest of them.
    #[inline]
    pub fn release(&mut self, hdr: &RingHeader, end: u64) -> bool {
        self.pos = end;
        self.store_cursor(hdr, end.min(self.floor))
    }

    #[inline]
    fn store_cursor(&self, hdr: &RingHeader, cursor: u64) -> bool {
        // Release: the writer that sees this cursor (Acquire in `min_cursor`) may reuse the bytes
        // we read. Then the space handshake: store cursor, fence, load writer_waiting; pairs with
        // the fence in `min_cursor` called from `Writer::announce_wait`.
        hdr.readers[self.slot]
            .cursor
            .store(cursor, Ordering::Release);
        fence(Ordering::SeqCst);
        hdr.writer_waiting.load(Ordering::Relaxed) != 0
    }

    /// Reliable delivery: goes on past the message `record` (just read) while its reader keeps
    /// it: the cursor stays at or below its start, so the writer cannot reuse it, until `let_go`.
    pub fn keep(&mut self, record: &Record) {
        debug_assert!(self.reliable && record.pos == self.pos);
        self.pos = record.end;
        self.kept.push(record.pos);
        self.floor = self.kept[0];
    }

    /// Lets go of the kept record that starts at `start`: the cursor moves up to the oldest
    /// record still kept (or to where this reader has read). Returns true when the writer waits
    /// for space and must be woken. A start that is not kept changes nothing.
    pub fn let_go(&mut self, hdr: &RingHeader, start: u64) -> bool {
        let Some(i) = self.kept.iter().position(|&k| k == start) else {
            return false;
        };
        self.kept.remove(i);
        self.floor = self.kept.first().copied().unwrap_or(u64::MAX);
        self.store_cursor(hdr, self.pos.min(self.floor))
    }

    /// Latest delivery: the next intact record, held in place when it may be (`Record::held`,
    /// see "Holding") and otherwise copied into `buf` (resized to the payload). A record
    /// overwritten while it was copied is thrown away and the reader jumps ahead; the jump shows
    /// up as `skipped` on the next record returned.
    pub fn read_latest<M: RingBytes>(
        &mut self,
        hdr: &RingHeader,
        mem: &M,
        buf: &mut Vec<u8>,
    ) -> Result<Option<Record>, Corrupt> {
        for _ in 0..self.record_budget() {
            if !self.has_data(hdr) {
                return Ok(None);
            }
            if self.head - self.pos > self.capacity {
                self.jump_to_newest(hdr)?;
                continue;
            }
            let header = mem.read_header(self.pos & (self.capacity - 1));
            let decoded = self.decode(&header, self.head);
            if let Some((seq, len, KIND_MESSAGE)) = decoded {
                if self.try_hold(hdr, len) {
                    let pos = self.pos;
                    self.pos = pos + record_len(len);
                    let skipped = self.count_skipped(seq);
                    return Ok(Some(Record {
                        pos,
                        offset: (pos + RECORD_HEADER) & (self.capacity - 1),
                        len,
                        seq,
                        end: self.pos,
                        skipped,
                        held: true,
                    }));
                }
                buf.resize(len as usize, 0);
                mem.read((self.pos + RECORD_HEADER) & (self.capacity - 1), buf);
            }
            // Acquire fence, then the reserve load: if any byte copied above came from a write
            // made after the writer reserved past `pos + capacity`, this load sees that
            // reservation. Pairs with the Release fence in `Writer::try_reserve`.
            fence(Ordering::Acquire);
            let reserve = hdr.reserve.end.load(Ordering::Relaxed);
            if reserve > self.pos.saturating_add(self.capacity) {
                // Overwritten while we looked: skip to the newest committed record. If that is
                // where we were, the record being written overlaps it: nothing intact is there to
                // read until the writer commits (a writer that died there never will).
                let tried = self.pos;
                self.jump_to_newest(hdr)?;
                if self.pos == tried {
                    return Ok(None);
                }
                continue;
            }
            let Some((seq, len, kind)) = decoded else {
                return Err(Corrupt { pos: self.pos });
            };
            let end = self.pos + record_len(len);
            self.pos = end;
            if kind == KIND_PADDING {
                continue;
            }
            let skipped = self.count_skipped(seq);
            return Ok(Some(Record {
                pos: end - record_len(len),
                offset: (end - record_len(len) + RECORD_HEADER) & (self.capacity - 1),
                len,
                seq,
                end,
                skipped,
                held: false,
            }));
        }
        Ok(None)
    }

    /// Whether this reader (latest) may hold a record of `len` payload bytes: a large one, where
    /// the writer has room to step over it with the largest message (its next copy is less than a
    /// message and a mark and a padding header ahead when it is in the way; the message after it
    /// must end before the padding's own next copy).
    fn may_hold(&self, len: u64) -> bool {
        len >= HOLD_MIN
            && record_len(len) + 2 * record_len(self.max_len) + 2 * (COMMIT_WORD + HOLD_ROOM)
                <= self.capacity
    }

    /// Holds the committed message record at `pos` (`len` payload bytes, its header already
    /// read) in place, if it may and the writer has not planned to reach it (see "Holding").
    fn try_hold(&mut self, hdr: &RingHeader, len: u64) -> bool {
        if self.hold != 0 || !self.may_hold(len) {
            return false;
        }
        let word = self.pos << 8 | (self.slot as u64 + 1);
        // Relaxed: ordered before the frontier load by the fence below. One reader holds at a
        // time: another's hold stays, and this reader copies.
        if hdr
            .reserve
            .hold
            .compare_exchange(0, word, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        // Set hold, fence, load frontier; pairs with the fence in `Writer::reserve_around_hold`
        // (store frontier, fence, load hold). The fence also orders the header read above before
        // the reserve load, as the copy's Acquire fence does (pairs with the Release fence in
        // `Writer::reserve_here`): a header overwritten meanwhile shows in `reserve`.
        fence(Ordering::SeqCst);
        let frontier = hdr.reserve.frontier.load(Ordering::Relaxed);
        let reserve = hdr.reserve.end.load(Ordering::Relaxed);
        let limit = self.pos.saturating_add(self.capacity);
        if frontier.max(reserve).saturating_add(HOLD_ROOM) <= limit {
            self.hold = word;
            return true;
        }
        // Release: nothing of the record was read (the caller copies or jumps next).
        let _ = hdr
            .reserve
            .hold
            .compare_exchange(word, 0, Ordering::Release, Ordering::Relaxed);
        false
    }

    /// Lets go of the record this reader holds (if any): the writer may write over it again.
    pub fn unhold(&mut self, hdr: &RingHeader) {
        if self.hold != 0 {
            // Release: every read of the held bytes comes before the writes of a writer that
            // sees the hold gone (pairs with the Acquire hold load in
            // `Writer::reserve_around_hold`).
            let _ = hdr.reserve.hold.compare_exchange(
                self.hold,
                0,
                Ordering::Release,
                Ordering::Relaxed,
            );
            self.hold = 0;
        }
    }

    /// Moves a lapped latest reader to the start of the newest committed record.
    fn jump_to_newest(&mut self, hdr: &RingHeader) -> Result<(), Corrupt> {
        // Acquire pairs with the Release head store in `Writer::finish`; `last` is stored before
        // it, so it is at least as new as this head: either the start of the record ending at
        // `head` (then below head) or of a later one (then head itself is a boundary to use).
        self.head = hdr.head.end.load(Ordering::Acquire);
        let last = hdr.head.last.load(Ordering::Relaxed);
        let pos = if last < self.head { last } else { self.head };
        // A record is at most a ring long, and starts at a multiple of 8.
        if self.head - pos > self.capacity || pos % RECORD_ALIGN != 0 {
            return Err(Corrupt { pos });
        }
        self.pos = pos;
        Ok(())
    }

    /// Declares that this reader is about to sleep; returns true if data arrived meanwhile (then
    /// call `cancel_sleep` and do not sleep).
    pub fn announce_sleep(&mut self, hdr: &RingHeader) -> bool {
        // Set bit, fence, load head; pairs with the fence in `Writer::finish` (store head, fence,
        // load sleepers). Acquire on head for the record bytes.
        hdr.sleepers.fetch_or(1 << self.slot, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        self.head = hdr.head.end.load(Ordering::Acquire);
        self.pos < self.head
    }

    pub fn cancel_sleep(&self, hdr: &RingHeader) {
        // Relaxed: a stale bit only costs the writer one needless wake.
        hdr.sleepers.fetch_and(!(1 << self.slot), Ordering::Relaxed);
    }
}

impl Reader {
    /// Where this reader starts (or has got to): the live messages it reads begin here.
    pub fn position(&self) -> u64 {
        self.pos
    }
}

/// A message a writer kept (`Writer::with_history`), copied out for a reader that joined later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Past {
    pub seq: u64,
    pub bytes: Vec<u8>,
}

/// How long a joiner waits for a record that was being written when it joined, so that the
/// history reaches the first record it reads live (a writer that died writing never commits it).
#[cfg(not(loom))]
const IN_PROGRESS_WAIT: std::time::Duration = std::time::Duration::from_millis(10);

/// The last `want` of the messages the writer keeps (see "History" above) that lie before
/// `until` (where a reader joined: `Reader::position`), oldest first, copied out. With the live
/// messages read from `until` on there is no gap and no duplicate. Fewer come back when the
/// writer keeps fewer, when it writes over them while they are copied (the walk then starts
/// again from the writer's new oldest record, `HISTORY_WALKS` times at most, and keeps what is
/// intact), or when the ring lies (then what was read up to the lie). Bounded: at most a ring's
/// worth of records is looked at per walk and at most `want` copies of at most `max_len` bytes
/// are held at once.
pub fn history<M: RingBytes>(
    hdr: &RingHeader,
    mem: &M,
    capacity: u64,
    max_len: u64,
    until: u64,
    want: usize,
) -> Vec<Past> {
    if want == 0 {
        return Vec::new();
    }
    // A joiner behind a reservation in progress starts after it: that record is history too,
    // once committed.
    let head = wait_for_head(hdr, until);
    let end = until.min(head);
    // A writer that laps the oldest kept record while it is copied has forgotten it, and
    // published a newer oldest: the walk starts again from there, a few times at most.
    let mut last = Vec::new();
    for _ in 0..HISTORY_WALKS {
        match walk_history(hdr, mem, capacity, max_len, end, want) {
            Walk::Whole(past) => return past,
            Walk::Torn(past) => last = past,
        }
    }
    last
}

/// Walks of the history [`history`] makes when a writer laps the records it copies.
const HISTORY_WALKS: usize = 3;

/// What one walk of the history found.
enum Walk {
    /// Every record from the oldest kept one up to `end`.
    Whole(Vec<Past>),
    /// A record was written over while it was read: the intact copies of the records before it.
    Torn(Vec<Past>),
}

/// One walk of [`history`] from the oldest record the writer keeps now up to `end`.
fn walk_history<M: RingBytes>(
    hdr: &RingHeader,
    mem: &M,
    capacity: u64,
    max_len: u64,
    end: u64,
    want: usize,
) -> Walk {
    // Acquire pairs with the Release `reserve` stores of `Writer::reserve_here` and `pad_to`: the
    // `history` word loaded next is at least the one stored before this reservation.
    let reserve = hdr.reserve.end.load(Ordering::Acquire);
    // Relaxed: ordered after the Acquire load above.
    let Some(start) = hdr.head.history.load(Ordering::Relaxed).checked_sub(1) else {
        return Walk::Whole(Vec::new());
    };
    let plausible = start < end
        && end - start <= capacity
        && start % RECORD_ALIGN == 0
        && start.saturating_add(capacity) >= reserve;
    if !plausible {
        return Walk::Whole(Vec::new());
    }
    let mask = capacity - 1;
    let mut kept: std::collections::VecDeque<(u64, Past)> = std::collections::VecDeque::new();
    let mut pos = start;
    let mut next_seq: Option<u64> = None;
    let mut torn = false;
    for _ in 0..capacity / RECORD_HEADER + 1 {
        if pos >= end {
            break;
        }
        let header = mem.read_header(pos & mask);
        // Acquire fence, then the reserve load: a header overwritten while it was read shows in
        // `reserve` (pairs with the Release fence in `Writer::reserve_here`), as for a copy in
        // `Reader::read_latest`.
        fence(Ordering::Acquire);
        if hdr.reserve.end.load(Ordering::Relaxed) > pos.saturating_add(capacity) {
            torn = true;
            break;
        }
        let seq = u64::from_le_bytes(header[..8].try_into().unwrap());
        let len = u32::from_le_bytes(header[8..12].try_into().unwrap()) as u64;
        let tag = u32::from_le_bytes(header[12..].try_into().unwrap());
        let max = match tag {
            t if t == TAG_MARK | KIND_MESSAGE => max_len,
            t if t == TAG_MARK | KIND_PADDING => capacity - RECORD_HEADER - COMMIT_WORD,
            _ => break,
        };
        let rec_end = pos.saturating_add(record_len(len.min(capacity)));
        if len > max || rec_end > end {
            break;
        }
        if tag == TAG_MARK | KIND_MESSAGE {
            // A writer numbers its messages one after another.
            if next_seq.is_some_and(|n| n != seq) {
                break;
            }
            // (u64::MAX is `NOT_COMMITTED`, no message's number.)
            let Some(after) = seq.checked_add(1) else {
                break;
            };
            next_seq = Some(after);
            let mut bytes = if kept.len() == want {
                kept.pop_front().map(|(_, p)| p.bytes).unwrap_or_default()
            } else {
                Vec::new()
            };
            bytes.resize(len as usize, 0);
            mem.read((pos + RECORD_HEADER) & mask, &mut bytes);
            kept.push_back((pos, Past { seq, bytes }));
        }
        pos = rec_end;
    }
    // The copies whose bytes no reservation reached are intact (pairs as above).
    fence(Ordering::Acquire);
    let reserve = hdr.reserve.end.load(Ordering::Relaxed);
    let intact = kept
        .into_iter()
        .filter(|(pos, _)| pos.saturating_add(capacity) >= reserve)
        .map(|(_, past)| past)
        .collect();
    if torn {
        Walk::Torn(intact)
    } else {
        Walk::Whole(intact)
    }
}

/// `head`, once it has reached `until` or a short while has passed.
fn wait_for_head(hdr: &RingHeader, until: u64) -> u64 {
    #[cfg(not(loom))]
    let started = std::time::Instant::now();
    loop {
        // Acquire pairs with the Release head store in `Writer::finish`.
        let head = hdr.head.end.load(Ordering::Acquire);
        if head >= until {
            return head;
        }
        // Models have writers that always commit: they wait as long as it takes.
        #[cfg(not(loom))]
        if started.elapsed() >= IN_PROGRESS_WAIT {
            return head;
        }
        #[cfg(not(loom))]
        std::thread::yield_now();
        #[cfg(loom)]
        loom::thread::yield_now();
    }
}

/// The newest message of a ring, as [`newest`] copies it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Newest {
    pub seq: u64,
    /// The message's length; `bytes` holds at most its first `limit` bytes.
    pub len: u64,
    pub bytes: Vec<u8>,
}

/// Copies of the newest record [`newest`] makes when the writer laps the one before.
const NEWEST_TRIES: usize = 3;

/// The newest message the writer committed, its first `limit` bytes copied out, without
/// joining the ring: a look that stores nothing in the ring's memory and that the writer never
/// waits for or wakes (for tools that watch a topic, `admin::last_messages`). The copy is
/// checked as a latest reader's is (a seqlock over positions) and thrown away when the writer
/// reserved over it meanwhile. `None` when nothing is committed yet, when the newest record is
/// padding (a reservation given back, a lap's end), when the writer lapped each of a few copies,
/// or when the ring lies; never more than `limit` bytes, whatever the ring says.
pub fn newest<M: RingBytes>(
    hdr: &RingHeader,
    mem: &M,
    capacity: u64,
    max_len: u64,
    limit: usize,
) -> Option<Newest> {
    let mask = capacity - 1;
    for _ in 0..NEWEST_TRIES {
        // Acquire pairs with the Release head store in `Writer::finish`; `last` is stored before
        // it (see `Reader::jump_to_newest`): below `head`, it starts the record ending there.
        let head = hdr.head.end.load(Ordering::Acquire);
        let last = hdr.head.last.load(Ordering::Relaxed);
        if last >= head {
            // Nothing committed yet, or a newer record committed between the two loads.
            if head == 0 {
                return None;
            }
            continue;
        }
        if head - last > capacity || last % RECORD_ALIGN != 0 {
            return None;
        }
        let header = mem.read_header(last & mask);
        let seq = u64::from_le_bytes(header[..8].try_into().unwrap());
        let len = u32::from_le_bytes(header[8..12].try_into().unwrap()) as u64;
        let tag = u32::from_le_bytes(header[12..].try_into().unwrap());
        let message = tag == TAG_MARK | KIND_MESSAGE
            && len <= max_len
            && last.saturating_add(record_len(len)) <= head
            && seq != NOT_COMMITTED;
        let mut bytes = Vec::new();
        if message {
            bytes.resize(len.min(limit as u64) as usize, 0);
            mem.read((last + RECORD_HEADER) & mask, &mut bytes);
        }
        // Acquire fence, then the reserve load: a header or a byte copied above that the writer
        // rewrote shows in `reserve` (pairs with the Release fence in `Writer::reserve_here`),
        // as for a latest reader's copy in `Reader::read_latest`.
        fence(Ordering::Acquire);
        if hdr.reserve.end.load(Ordering::Relaxed) > last.saturating_add(capacity) {
            continue;
        }
        return message.then_some(Newest { seq, len, bytes });
    }
    None
}

/// A record header as a writer writes it (`padding`: a reservation given back), for tests that
/// forge rings.
#[cfg(all(test, not(loom)))]
pub(crate) fn record_header(seq: u64, len: u32, padding: bool) -> [u8; RECORD_HEADER as usize] {
    let kind = if padding { KIND_PADDING } else { KIND_MESSAGE };
    let mut h = [0u8; RECORD_HEADER as usize];
    h[..8].copy_from_slice(&seq.to_le_bytes());
    h[8..12].copy_from_slice(&len.to_le_bytes());
    h[12..].copy_from_slice(&(TAG_MARK | kind).to_le_bytes());
    h
}

/// A ring's bytes held in atomic words, for tests and loom models: every byte access is a relaxed
/// atomic, so a model checker sees (and may reorder) each one.
#[cfg(test)]
pub struct AtomicBytes {
    words: Vec<AtomicU64>,
}

#[cfg(test)]
impl AtomicBytes {
    pub fn new(capacity: u64) -> AtomicBytes {
        assert!(capacity.is_power_of_two() && capacity >= 8);
        AtomicBytes {
            words: (0..capacity / 8).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn capacity(&self) -> u64 {
        self.words.len() as u64 * 8
    }
}

#[cfg(test)]
impl RingBytes for AtomicBytes {
    fn write(&self, offset: u64, src: &[u8]) {
        let cap = self.capacity();
        let mut i = 0;
        while i < src.len() {
            let at = (offset + i as u64) % cap;
            let word = &self.words[(at / 8) as usize];
            // Relaxed: only the writer stores; ordering comes from the ring protocol's fences.
            if at % 8 == 0 && src.len() - i >= 8 {
                word.store(
                    u64::from_le_bytes(src[i..i + 8].try_into().unwrap()),
                    Ordering::Relaxed,
                );
                i += 8;
            } else {
                let shift = (at % 8) * 8;
                let old = word.load(Ordering::Relaxed);
                word.store(
                    (old & !(0xFF << shift)) | ((src[i] as u64) << shift),
                    Ordering::Relaxed,
                );
                i += 1;
            }
        }
    }

    fn load_word(&self, offset: u64) -> u64 {
        debug_assert!(offset % 8 == 0);
        // Acquire: the trait's contract (pairs with a Release `store_word`).
        self.words[(offset % self.capacity() / 8) as usize].load(Ordering::Acquire)
    }

    fn store_word(&self, offset: u64, value: u64, order: Ordering) {
        debug_assert!(offset % 8 == 0);
        // Relaxed or Release as the caller says (it names the pairing).
        self.words[(offset % self.capacity() / 8) as usize].store(value, order);
    }

    fn read(&self, offset: u64, dst: &mut [u8]) {
        let cap = self.capacity();
        let mut i = 0;
        while i < dst.len() {
            let at = (offset + i as u64) % cap;
            // Relaxed: see `write`.
            let word = self.words[(at / 8) as usize].load(Ordering::Relaxed);
            if at % 8 == 0 && dst.len() - i >= 8 {
                dst[i..i + 8].copy_from_slice(&word.to_le_bytes());
                i += 8;
            } else {
                dst[i] = (word >> ((at % 8) * 8)) as u8;
                i += 1;
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;
