//! The shared-memory hot path without process boundaries or the lab around it.
//!
//! `cargo run --release -p ferry --example shm_hot_path -- pingpong [N]`: two threads pinned to
//! CPUs 0 and 1 ping-pong N messages (default 100 000) through two reliable shared-memory topics
//! with busy-polling subscribers, for 32 B and 1 KiB and ring capacities of 4 KiB to 64 KiB
//! (64 KiB is what ferry picks for these sizes); it prints the median one-way time (round trip / 2)
//! of each. The sender writes every byte of a loan, the receiver checks every byte in place.
//!
//! `... -- default [N]`: the same with the ring ferry picks (64 KiB), beside the floor: the same
//! exchange through one flag and one reused buffer per direction (the lab's raw-spin), in seven
//! rounds, with the ratio of each round.
//!
//! `... -- floors [N]`: where ferry's ring costs over the floor: the raw exchange with its flag on
//! its own line, with the flag in the payload's first line (as a ferry record's commit word and
//! header), with that record alternating between two places, with it moving through an 8 KiB
//! window (as ferry's ring places records), and with every store, load and fence of ferry's ring
//! protocol written out in line on top of that window, beside ferry, in five rounds.
//!
//! `... -- gap [N]`: ferry beside the raw floor and ferry's protocol written out in line, in
//! `ROUNDS` (default 15) short rounds: the median over rounds of ferry / raw-floor and of ferry's
//! time over its protocol's, with their quartiles.
//!
//! `... -- work [N]`: what instructions cost where: ferry's protocol written out in line with
//! 100, 200 and 400 more register instructions on the receiver between the header check and the
//! reply, and with 200 more on the sender between the payload and the commit, beside ferry, in
//! five rounds.
//!
//! `... -- large [N]`: large messages (`SIZE` bytes, default 1 MiB): ferry's ping-pong beside the
//! raw floor with its payload at a page boundary and 16 bytes on (where a ferry record puts it),
//! in one reused buffer and in two or four taken in turn (ferry's ring for 1 MiB messages holds
//! four, less a little), and the time of the sender's `memset` alone at both offsets, in five
//! rounds; ferry also in a ring four times the one it picks (the ring of a topic whose largest
//! message is four times larger).
//!
//! `... -- single`: one thread sends a message and receives it again, two million times, at 32 B
//! and 1 KiB, reliable: the instructions of the path with no cache line crossing between CPUs,
//! beside the raw floor's flag and buffer written and checked the same way.
//! `... -- latest`: the same under latest delivery, where the subscriber copies each message out
//! (32 B, 1 KiB) or holds it in place (64 KiB).
//!
//! `... -- count SIZE N` and `... -- count-raw SIZE N`: N messages of SIZE bytes sent and received
//! on one thread, through ferry or through the raw floor's flag and buffer, with nothing else
//! done: made to run under `valgrind --tool=callgrind`, where two run lengths give the
//! instructions one message takes (the difference of the totals over the difference of N), a
//! figure that the machine's speed does not move.
//!
//! `... -- typed [N]`: the cost of a topic's type on the data path: ferry's ping-pong on untyped
//! topics and on topics whose ends declare a type (`Qos::topic_type`, a ROS 2 definition), in
//! `ROUNDS` (default 15) rounds that alternate which goes first, at 32 B and 1 KiB: the median over
//! rounds of each one-way p50, of typed / untyped and of their difference in ns, with quartiles.
//!
//! `... -- p50 [N]`: one line, `p50 32 A 1024 B`: the one-way p50 (ns) at 32 B and 1 KiB with
//! the ring ferry picks, for scripts that alternate conditions around runs.
//!
//! `... -- service [N]`: a spinning service (a request loaned and sent, its response read in
//! place) beside the ping-pong of two topics, in `ROUNDS` (default 15) rounds that alternate which
//! goes first, at 32 B and 1 KiB: the median over rounds of each one-way p50 and of service /
//! ping-pong, and the calling side's median time stamp counter ticks in each step of a round
//! trip (lend, write and send, wait, check, let go of the answer), for both.
//!
//! `... -- service-single [N]`: one thread calls a service and serves it, N calls at 32 B and
//! 1 KiB, beside the same two messages through two topics, in five rounds: what the service's
//! code adds per call with no cache line crossing between CPUs.
//!
//! Every mode pins its two threads to CPUs 0 and 1, or to the two that `PIN=A,B` names.
//!
//! Timings depend on the machine and its load; compare runs made one after another.

use std::time::{Duration, Instant};

use ferry::{Delivery, Node, Qos, Transport, WaitStrategy};

const TIMEOUT: Duration = Duration::from_secs(10);

/// Pins the calling thread to the first (`which` 0) or second (1) CPU of the run: CPUs 0 and 1,
/// or the two that `PIN=A,B` names (on a machine where 0 and 1 share a core, say).
fn pin(which: usize) {
    let cpus: Vec<usize> = std::env::var("PIN").map_or_else(
        |_| vec![0, 1],
        |p| {
            p.split(',')
                .map(|c| c.trim().parse().expect("PIN: two CPU numbers, as A,B"))
                .collect()
        },
    );
    assert_eq!(cpus.len(), 2, "PIN: two CPU numbers, as A,B");
    let cpu = cpus[which];
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it; the call only
    // reads the set it is given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Reads every byte, 8 at a time, as the lab's check does.
fn check(buf: &[u8], byte: u8) -> bool {
    let word = u64::from_ne_bytes([byte; 8]);
    let mut chunks = buf.chunks_exact(8);
    let mut diff = 0;
    for c in &mut chunks {
        diff |= u64::from_ne_bytes(c.try_into().expect("8 bytes")) ^ word;
    }
    diff == 0 && chunks.remainder().iter().all(|&b| b == byte)
}

fn qos(delivery: Delivery, max: usize, ring: usize) -> Qos {
    Qos::default()
        .transport(Transport::Shm)
        .delivery(delivery)
        .wait(WaitStrategy::Spin)
        .max_message_size(max)
        .ring_capacity(ring)
}

fn send(out: &mut ferry::Publisher, len: usize, byte: u8) {
    let mut loan = out.loan(len).expect("loan");
    loan.as_mut_slice().fill(byte);
    loan.send().expect("send");
}

fn recv_check(inp: &mut ferry::Subscriber, byte: u8) {
    let sample = inp
        .recv_timeout(TIMEOUT)
        .expect("recv")
        .expect("a message within the timeout");
    assert!(check(&sample, byte), "a corrupt message");
}

/// Median one-way time (ns) of `n` round trips of `len` bytes over rings of `ring` bytes.
fn pingpong(n: usize, len: usize, ring: usize) -> u64 {
    pingpong_typed(n, len, ring, None)
}

/// As `pingpong`, every end declaring `topic_type` when one is given.
fn pingpong_typed(n: usize, len: usize, ring: usize, topic_type: Option<ferry::TopicType>) -> u64 {
    let mut q = qos(Delivery::Reliable, len.max(1024), ring);
    q.topic_type = topic_type;
    let (mut out, mut inp, _echo) = echo_pair(n, len, q);
    let mut one_way = Vec::with_capacity(n);
    for i in 0..n as u64 {
        let t = Instant::now();
        send(&mut out, len, (i % 200) as u8);
        recv_check(&mut inp, (i % 200) as u8 + 1);
        one_way.push(t.elapsed().as_nanos() as u64 / 2);
    }
    one_way.sort_unstable();
    one_way[n / 2]
}

/// The thread of the answering side, pinned to the second CPU; joined when dropped (after the
/// calling side's ends, which are declared before it), its panic passed on.
struct Peer(Option<std::thread::JoinHandle<()>>);

impl Peer {
    fn spawn(f: impl FnOnce() + Send + 'static) -> Peer {
        Peer(Some(std::thread::spawn(move || {
            pin(1);
            f()
        })))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let failed = self.0.take().is_some_and(|t| t.join().is_err());
        if failed && !std::thread::panicking() {
            panic!("the answering thread failed");
        }
    }
}

/// The calling side of a ping-pong of `n` messages of `len` bytes over two topics of QoS `q`,
/// pinned to the first CPU, and the thread that answers each message, both attached.
fn echo_pair(n: usize, len: usize, q: Qos) -> (ferry::Publisher, ferry::Subscriber, Peer) {
    let domain = format!("hotpath{}", std::process::id());
    let node = Node::with_domain("ping", &domain).expect("node");
    let out = node.publisher("ping", &q).expect("publisher");
    let mut inp = node.subscriber("pong", &q).expect("subscriber");
    let echo = Peer::spawn(move || {
        let node = Node::with_domain("pong", &domain).expect("node");
        let mut out = node.publisher("pong", &q).expect("publisher");
        let mut inp = node.subscriber("ping", &q).expect("subscriber");
        for i in 0..n as u64 {
            recv_check(&mut inp, (i % 200) as u8);
            send(&mut out, len, (i % 200) as u8 + 1);
        }
        // Until the main side has read the last reply.
        let _ = inp.recv_timeout(Duration::from_millis(200));
    });
    pin(0);
    let start = Instant::now();
    while out.subscriber_count() < 1 || inp.publisher_count() < 1 {
        assert!(start.elapsed() < TIMEOUT, "the echo thread did not attach");
        std::thread::sleep(Duration::from_millis(1));
    }
    (out, inp, echo)
}

/// The calling side's time stamp counter ticks in each step of a round trip: lend, write and
/// send, wait for the answer, check it, let go of it.
#[derive(Default)]
struct Steps([Vec<u64>; 5]);

impl Steps {
    const NAMES: [&'static str; 5] = ["lend", "write+send", "wait", "check", "let go"];

    fn push(&mut self, marks: [u64; 6]) {
        for (i, v) in self.0.iter_mut().enumerate() {
            v.push(marks[i + 1].wrapping_sub(marks[i]));
        }
    }

    fn medians(mut self) -> [u64; 5] {
        self.0.iter_mut().for_each(|v| v.sort_unstable());
        std::array::from_fn(|i| self.0[i][self.0[i].len() / 2])
    }
}

fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc reads the time stamp counter; it has no other effect.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// One timed round trip on the calling side: `$lend` lends room for the message, which is filled
/// with `$byte` and sent; `$recv` waits for the answer, checked for `$byte + 1`, then let go.
/// `$m` gets the time stamp counter between the steps.
macro_rules! timed_round_trip {
    ($m:ident, $byte:expr, lend: $lend:expr, recv: $recv:expr) => {{
        $m[0] = ticks();
        let mut loan = $lend;
        $m[1] = ticks();
        loan.as_mut_slice().fill($byte);
        loan.send().expect("send");
        $m[2] = ticks();
        let answer = $recv;
        $m[3] = ticks();
        assert!(check(&answer, $byte + 1), "a corrupt answer");
        $m[4] = ticks();
        drop(answer);
        $m[5] = ticks();
    }};
}

/// `n` round trips made by `round` (given the byte to send and where to put its time stamps):
/// the median one-way time and the median ticks of each step.
fn timed(n: usize, mut round: impl FnMut(u8, &mut [u64; 6])) -> (u64, [u64; 5]) {
    let mut one_way = Vec::with_capacity(n);
    let mut steps = Steps::default();
    for i in 0..n as u64 {
        let mut m = [0; 6];
        let t = Instant::now();
        round((i % 200) as u8, &mut m);
        one_way.push(t.elapsed().as_nanos() as u64 / 2);
        steps.push(m);
    }
    one_way.sort_unstable();
    (one_way[n / 2], steps.medians())
}

/// As `pingpong` with the ring ferry picks, and the calling side's steps timed.
fn pingpong_steps(n: usize, len: usize) -> (u64, [u64; 5]) {
    let (mut out, mut inp, _echo) = echo_pair(n, len, qos(Delivery::Reliable, len.max(1024), 0));
    timed(n, |byte, m| {
        timed_round_trip!(m, byte,
            lend: out.loan(len).expect("loan"),
            recv: inp.recv_timeout(TIMEOUT).expect("recv").expect("a reply"))
    })
}

/// A spinning service over shared memory, the server on the second CPU: median one-way time
/// (round trip / 2) of `n` calls of `len` bytes each way, and the calling side's steps.
fn service_steps(n: usize, len: usize) -> (u64, [u64; 5]) {
    let domain = format!("hotpath{}", std::process::id());
    let q = qos(Delivery::Reliable, len.max(1024), 0);
    let node = Node::with_domain("client", &domain).expect("node");
    let mut client = node.client("echo", &q).expect("client");
    let _server = Peer::spawn(move || {
        let node = Node::with_domain("server", &domain).expect("node");
        let mut server = node.server("echo", &q).expect("server");
        for i in 0..n as u64 {
            let to = {
                let request = server
                    .recv_request(TIMEOUT)
                    .expect("recv_request")
                    .expect("a request within the timeout");
                assert!(check(&request, (i % 200) as u8), "a corrupt request");
                request.reply_to()
            };
            let mut loan = server
                .loan_response(to, len)
                .expect("loan_response")
                .expect("the client is there");
            loan.as_mut_slice().fill((i % 200) as u8 + 1);
            loan.send().expect("send");
        }
        let _ = server.recv_request(Duration::from_millis(200));
    });
    pin(0);
    client.wait_for_server(TIMEOUT);
    timed(n, |byte, m| {
        timed_round_trip!(m, byte,
            lend: client.loan_request(len).expect("loan_request"),
            recv: client.recv_response(TIMEOUT).expect("recv_response").expect("a response"))
    })
}

/// Where the raw floor keeps a message and its flag.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    /// One reused page-aligned buffer, the flag on its own lines (the lab's raw-spin).
    Apart,
    /// One reused slot: the flag in the first word and the payload 16 bytes on, on the same
    /// line, as a ferry record's commit word and header.
    Inline,
    /// As `Inline`, but messages alternate between two such slots laid end to end.
    TwoSlots,
    /// As `Inline`, but message `n` goes to the next slot of an 8 KiB window of records laid end
    /// to end, as ferry's ring places them.
    Window,
    /// As `Window`, with every other store, load and fence of ferry's ring protocol per message
    /// written out in line: the writer stores its reservation, the record's `{len, tag}` and the
    /// next record's mark before the commit, then the head line (three words), fences and looks
    /// at the sleepers; the reader checks the header, then stores its cursor, fences and looks at
    /// the waiting writer. Everything ferry's ring does for a message, with none of its layers.
    Protocol,
    /// As `Protocol`, with `100 n` more register instructions on the receiver after it has
    /// checked the header, before its reply: code on the way from a message to the answer.
    WorkBeforeReply(usize),
    /// As `Protocol`, with 200 more register instructions on the sender between the payload and
    /// the commit.
    WorkBeforeCommit,
}

impl Place {
    /// Whether the placement runs ferry's ring protocol.
    fn protocol(self) -> bool {
        matches!(
            self,
            Place::Protocol | Place::WorkBeforeReply(_) | Place::WorkBeforeCommit
        )
    }
}

/// The shared words of ferry's ring protocol that `Place::Protocol` touches, each on its own
/// line as in a ring header.
#[repr(C, align(64))]
struct Line(std::sync::atomic::AtomicU64, [u64; 7]);

impl Line {
    fn new() -> Line {
        Line(std::sync::atomic::AtomicU64::new(0), [0; 7])
    }
}

/// The head line of a ring header: the end and start of the last record and the next sequence
/// number, on one line.
#[repr(C, align(64))]
#[derive(Default)]
struct HeadLine {
    end: std::sync::atomic::AtomicU64,
    last: std::sync::atomic::AtomicU64,
    next_seq: std::sync::atomic::AtomicU64,
}

/// One direction of the raw floor: a flag on its own lines, a page-aligned buffer, and an 8 KiB
/// window of words for the in-line placements.
#[repr(C, align(4096))]
struct RawDir {
    flag: std::sync::atomic::AtomicU64,
    _pad: [u8; 4096 - 8],
    buf: std::cell::UnsafeCell<[u8; 4096]>,
    window: [std::sync::atomic::AtomicU64; 1024],
    head: HeadLine,
    reserve: Line,
    sleepers: Line,
    writer_waiting: Line,
    cursor: Line,
}

// SAFETY: the ping-pong below hands each buffer back and forth through its flag (Release store,
// Acquire load), so only one thread touches a message's bytes at a time.
unsafe impl Sync for RawDir {}

impl RawDir {
    fn new() -> Box<RawDir> {
        Box::new(RawDir {
            flag: std::sync::atomic::AtomicU64::new(0),
            _pad: [0; 4096 - 8],
            buf: std::cell::UnsafeCell::new([0; 4096]),
            window: std::array::from_fn(|_| std::sync::atomic::AtomicU64::new(0)),
            head: HeadLine::default(),
            reserve: Line::new(),
            sleepers: Line::new(),
            writer_waiting: Line::new(),
            cursor: Line::new(),
        })
    }

    /// The flag and the payload of message `n`.
    fn slot(&self, place: Place, len: usize, n: u64) -> (&std::sync::atomic::AtomicU64, *mut u8) {
        let words = (16 + len).div_ceil(8);
        let at = match place {
            Place::Apart => return (&self.flag, self.buf.get().cast()),
            Place::Inline => 0,
            // Two slots where two fit the window (every size the example uses), else one.
            Place::TwoSlots => (n as usize % (1024 / words).min(2)) * words,
            Place::Window
            | Place::Protocol
            | Place::WorkBeforeReply(_)
            | Place::WorkBeforeCommit => (n as usize % (1024 / words)) * words,
        };
        // The flag is word `at` of the window, the payload starts two words on, as in a ferry
        // record. The payload words are only ever written and read plainly, one side at a time
        // (atomics have interior mutability, so writing them through this pointer is allowed).
        let base = self.window.as_ptr().cast::<u8>();
        let flag = &self.window[at];
        // SAFETY: `at + 2 + len / 8` stays inside the 1024-word window: `at` is a multiple of
        // `words` below `(1024 / words) * words`, so at most `1024 - words`, plus `words`.
        let payload = unsafe { base.add((at + 2) * 8).cast_mut() };
        (flag, payload)
    }
}

fn raw_send(d: &RawDir, place: Place, len: usize, n: u64, byte: u8) {
    use std::sync::atomic::{fence, Ordering};
    let (flag, payload) = d.slot(place, len, n);
    if place.protocol() {
        // The reservation: Relaxed, then a Release fence, as `Writer::try_reserve`.
        d.reserve.0.store(n, Ordering::Relaxed);
        fence(Ordering::Release);
    }
    // SAFETY: the peer read the previous message in this slot before it answered, which the
    // caller waited for: nobody else touches these bytes now.
    unsafe { std::ptr::write_bytes(payload, byte, len) };
    if place == Place::WorkBeforeCommit {
        work(n, 2);
    }
    if place.protocol() {
        // The header's `{len, tag}` word just before the payload, and the next record's mark.
        // SAFETY: the word before the payload is the header's second word, in the same slot.
        unsafe {
            payload
                .sub(8)
                .cast::<u64>()
                .write(len as u64 | 0xFE77_0001 << 32)
        };
        let (next, _) = d.slot(place, len, n + 1);
        next.store(u64::MAX, Ordering::Relaxed);
    }
    // Release pairs with the Acquire load in `raw_recv`.
    flag.store(n, Ordering::Release);
    if place.protocol() {
        // The head line, then the sleeper handshake.
        d.head.last.store(n, Ordering::Relaxed);
        d.head.next_seq.store(n + 1, Ordering::Relaxed);
        // Release: as the head store of `Writer::finish`; nobody loads it here.
        d.head.end.store(n, Ordering::Release);
        fence(Ordering::SeqCst);
        // No reader ever sleeps here; the load is what the writer pays.
        if d.sleepers.0.load(Ordering::Relaxed) != 0 {
            d.sleepers.0.swap(0, Ordering::Relaxed);
        }
    }
}

/// `100 hundreds` register instructions (and a loop turn per hundred): four independent chains
/// of adds and xors, the kind of work a layer of code does, that touch no memory.
#[inline(always)]
fn work(n: u64, hundreds: usize) {
    let (mut a, mut b, mut c, mut d) = (n, n + 1, n + 2, n + 3);
    for _ in 0..hundreds {
        // SAFETY: arithmetic on four registers, nothing else.
        unsafe {
            std::arch::asm!(
                ".rept 25", "add {a}, 1", "add {b}, 3", "xor {c}, 5", "add {d}, 7", ".endr",
                a = inout(reg) a, b = inout(reg) b, c = inout(reg) c, d = inout(reg) d,
                options(nomem, nostack),
            );
        }
    }
    std::hint::black_box((a, b, c, d));
}

/// Spins until `flag` holds `value` (an Acquire load, paired with the sender's Release store),
/// failing with `what` after `TIMEOUT`. (Inlined: the floors' receive stays what it was.)
#[inline(always)]
fn spin_until(flag: &std::sync::atomic::AtomicU64, value: u64, what: &str) {
    let start = Instant::now();
    let mut spins = 0u32;
    // Acquire pairs with the Release store of the flag's sender.
    while flag.load(std::sync::atomic::Ordering::Acquire) != value {
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins % 1024 == 0 {
            assert!(start.elapsed() < TIMEOUT, "{what}");
        }
    }
}

fn raw_recv(d: &RawDir, place: Place, len: usize, n: u64, byte: u8) {
    let (flag, payload) = d.slot(place, len, n);
    // (Pairs with the Release store in `raw_send`.)
    spin_until(flag, n, "no raw message within the timeout");
    if place.protocol() {
        // The header check a reader makes (a hostile ring is refused, never trusted).
        // SAFETY: the word before the payload is the header's second word, published with it.
        let word = unsafe { payload.sub(8).cast::<u64>().read() };
        assert!(
            word >> 32 == 0xFE77_0001 && word & 0xFFFF_FFFF == len as u64,
            "a corrupt raw header"
        );
    }
    if let Place::WorkBeforeReply(hundreds) = place {
        work(n, hundreds);
    }
    // SAFETY: the writer published these bytes before its flag store and waits for our answer.
    let buf = unsafe { std::slice::from_raw_parts(payload.cast_const(), len) };
    assert!(check(buf, byte), "a corrupt raw message");
    if place.protocol() {
        use std::sync::atomic::{fence, Ordering};
        // The release and the space handshake of `Reader::release`.
        d.cursor.0.store(n, Ordering::Release);
        fence(Ordering::SeqCst);
        // No writer ever waits here; the load is what the reader pays.
        std::hint::black_box(d.writer_waiting.0.load(Ordering::Relaxed));
    }
}

/// The floor under `pingpong`: the same exchange without ferry, the message placed as `place`
/// says. Median one-way time (ns).
fn raw_pingpong(n: usize, len: usize, place: Place) -> u64 {
    let dirs = std::sync::Arc::new((RawDir::new(), RawDir::new()));
    let d2 = dirs.clone();
    let echo = std::thread::spawn(move || {
        pin(1);
        for i in 1..=n as u64 {
            raw_recv(&d2.0, place, len, i, (i % 200) as u8);
            raw_send(&d2.1, place, len, i, (i % 200) as u8 + 1);
        }
    });
    pin(0);
    let mut one_way = Vec::with_capacity(n);
    for i in 1..=n as u64 {
        let t = Instant::now();
        raw_send(&dirs.0, place, len, i, (i % 200) as u8);
        raw_recv(&dirs.1, place, len, i, (i % 200) as u8 + 1);
        one_way.push(t.elapsed().as_nanos() as u64 / 2);
    }
    echo.join().expect("echo thread");
    one_way.sort_unstable();
    one_way[n / 2]
}

/// Mean time (ns) of one message of `len` bytes (at most 4096) written, flagged, seen and
/// checked by the same thread through the raw floor's flag and buffer.
fn single_raw(n: usize, len: usize) -> f64 {
    let d = RawDir::new();
    let t = Instant::now();
    for i in 1..=n as u64 {
        let byte = (i % 200) as u8;
        // SAFETY: one thread writes and then reads the buffer; nothing else maps it.
        unsafe { std::ptr::write_bytes(d.buf.get().cast::<u8>(), byte, len) };
        // Release pairs with the Acquire load below (one thread: for the form only).
        d.flag.store(i, std::sync::atomic::Ordering::Release);
        assert_eq!(d.flag.load(std::sync::atomic::Ordering::Acquire), i);
        // SAFETY: as above; callers keep `len` within the 4096-byte buffer.
        let buf = unsafe { std::slice::from_raw_parts(d.buf.get().cast::<u8>(), len) };
        assert!(check(buf, byte), "a corrupt raw message");
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

/// Mean time (ns) of one send and one receive by the same thread.
fn single(n: usize, len: usize, delivery: Delivery) -> f64 {
    let domain = format!("hotpath-single{}", std::process::id());
    let q = qos(delivery, len.max(1024), 0);
    let node = Node::with_domain("single", &domain).expect("node");
    let mut out = node.publisher("t", &q).expect("publisher");
    let mut inp = node.subscriber("t", &q).expect("subscriber");
    pin(0);
    let t = Instant::now();
    for i in 0..n as u64 {
        send(&mut out, len, (i % 200) as u8);
        recv_check(&mut inp, (i % 200) as u8);
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

/// Mean time (ns) of one call on one thread: the client's request sent, taken and answered by
/// the server, and the response taken, with no cache line crossing between CPUs; beside it, the
/// same two messages through two topics.
fn single_service(n: usize, len: usize) -> (f64, f64) {
    let domain = format!("hotpath-single{}", std::process::id());
    let q = qos(Delivery::Reliable, len.max(1024), 0);
    let node = Node::with_domain("single", &domain).expect("node");
    let mut client = node.client("echo", &q).expect("client");
    let mut server = node.server("echo", &q).expect("server");
    pin(0);
    let mut call = |byte: u8| {
        step_request(&mut client, len, byte);
        let to = step_serve_recv(&mut server, byte);
        step_serve_answer(&mut server, to, len, byte + 1);
        step_response(&mut client, byte + 1);
    };
    // The first response opens the server's publisher for this client.
    call(0);
    let t = Instant::now();
    for i in 0..n as u64 {
        call((i % 200) as u8);
    }
    let service = t.elapsed().as_nanos() as f64 / n as f64;
    let (mut ping, mut ping_in) = (
        node.publisher("ping", &q).expect("publisher"),
        node.subscriber("ping", &q).expect("subscriber"),
    );
    let (mut pong, mut pong_in) = (
        node.publisher("pong", &q).expect("publisher"),
        node.subscriber("pong", &q).expect("subscriber"),
    );
    let t = Instant::now();
    for i in 0..n as u64 {
        let byte = (i % 200) as u8;
        step_send(&mut ping, len, byte);
        step_recv(&mut ping_in, byte);
        step_send(&mut pong, len, byte + 1);
        step_recv(&mut pong_in, byte + 1);
    }
    (service, t.elapsed().as_nanos() as f64 / n as f64)
}

// The steps of `single_service`, never inlined, so that an instruction profiler (callgrind)
// gives each its own inclusive count: a call's four steps beside a topic's two.

#[inline(never)]
fn step_request(client: &mut ferry::Client, len: usize, byte: u8) {
    let mut loan = client.loan_request(len).expect("loan_request");
    loan.as_mut_slice().fill(byte);
    loan.send().expect("send");
}

#[inline(never)]
fn step_serve_recv(server: &mut ferry::Server, byte: u8) -> ferry::ReplyTo {
    let request = server
        .recv_request(TIMEOUT)
        .expect("recv")
        .expect("a request");
    assert!(check(&request, byte), "a corrupt request");
    request.reply_to()
}

#[inline(never)]
fn step_serve_answer(server: &mut ferry::Server, to: ferry::ReplyTo, len: usize, byte: u8) {
    let mut loan = server
        .loan_response(to, len)
        .expect("loan")
        .expect("a client");
    loan.as_mut_slice().fill(byte);
    loan.send().expect("send");
}

#[inline(never)]
fn step_response(client: &mut ferry::Client, byte: u8) {
    let response = client
        .recv_response(TIMEOUT)
        .expect("recv")
        .expect("a response");
    assert!(check(&response, byte), "a corrupt response");
}

#[inline(never)]
fn step_send(out: &mut ferry::Publisher, len: usize, byte: u8) {
    send(out, len, byte);
}

#[inline(never)]
fn step_recv(inp: &mut ferry::Subscriber, byte: u8) {
    recv_check(inp, byte);
}

/// One direction of the large-message floor: a flag on its own lines and `slots` page-aligned
/// slots of `len` bytes and a page more, a message's payload `offset` bytes into its slot.
struct BigDir {
    flag: Line,
    mem: *mut u8,
    layout: std::alloc::Layout,
    stride: usize,
    slots: usize,
    offset: usize,
}

// SAFETY: as `RawDir`: the ping-pong hands the slots back and forth through the flag.
unsafe impl Sync for BigDir {}
// SAFETY: the region is owned by this value and freed once, in `drop`.
unsafe impl Send for BigDir {}

impl BigDir {
    fn new(len: usize, slots: usize, offset: usize) -> BigDir {
        let stride = (len + offset).next_multiple_of(4096) + 4096;
        let layout = std::alloc::Layout::from_size_align(stride * slots, 4096).expect("layout");
        // SAFETY: the layout's size is not zero. (The first round trips pay the page faults; the
        // medians leave them out.)
        let mem = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!mem.is_null(), "out of memory");
        BigDir {
            flag: Line::new(),
            mem,
            layout,
            stride,
            slots,
            offset,
        }
    }

    fn payload(&self, n: u64) -> *mut u8 {
        // SAFETY: slot `n % slots` lies inside the region, and `offset + len` inside its stride.
        unsafe {
            self.mem
                .add((n as usize % self.slots) * self.stride + self.offset)
        }
    }
}

impl Drop for BigDir {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed only here.
        unsafe { std::alloc::dealloc(self.mem, self.layout) };
    }
}

/// The floor under a large message: `n` round trips of `len` bytes, each written with `memset`
/// into the slot `BigDir` gives it and checked there by the peer, the flag apart. Median one-way
/// time (ns).
fn big_pingpong(n: usize, len: usize, slots: usize, offset: usize) -> u64 {
    use std::sync::atomic::Ordering;
    let dirs = std::sync::Arc::new((
        BigDir::new(len, slots, offset),
        BigDir::new(len, slots, offset),
    ));
    let send = move |d: &BigDir, i: u64, byte: u8| {
        // SAFETY: the peer read the previous message of this slot before it answered.
        unsafe { std::ptr::write_bytes(d.payload(i), byte, len) };
        // Release pairs with the Acquire load in `recv`.
        d.flag.0.store(i, Ordering::Release);
    };
    let recv = move |d: &BigDir, i: u64, byte: u8| {
        // (Pairs with the Release store in `send`.)
        spin_until(&d.flag.0, i, "no large message within the timeout");
        // SAFETY: the writer published these bytes before its flag store and waits for us.
        let buf = unsafe { std::slice::from_raw_parts(d.payload(i).cast_const(), len) };
        assert!(check(buf, byte), "a corrupt large message");
    };
    let d2 = dirs.clone();
    let echo = std::thread::spawn(move || {
        pin(1);
        for i in 1..=n as u64 {
            recv(&d2.0, i, (i % 200) as u8);
            send(&d2.1, i, (i % 200) as u8 + 1);
        }
    });
    pin(0);
    let mut one_way = Vec::with_capacity(n);
    for i in 1..=n as u64 {
        let t = Instant::now();
        send(&dirs.0, i, (i % 200) as u8);
        recv(&dirs.1, i, (i % 200) as u8 + 1);
        one_way.push(t.elapsed().as_nanos() as u64 / 2);
    }
    echo.join().expect("echo thread");
    one_way.sort_unstable();
    one_way[n / 2]
}

/// Mean time (ns) of a `memset` of `len` bytes at `offset` bytes past a page, on one thread.
fn fill_time(len: usize, offset: usize) -> f64 {
    let d = BigDir::new(len, 1, offset);
    let rounds = (256 << 20) / len;
    let t = Instant::now();
    for i in 0..rounds {
        // SAFETY: the slot holds `offset + len` bytes; nothing else touches it.
        unsafe { std::ptr::write_bytes(d.payload(0), i as u8, len) };
        std::hint::black_box(d.payload(0));
    }
    t.elapsed().as_nanos() as f64 / rounds as f64
}

/// `median unit (first-third quartile)` of the sorted `v`, with `prec` decimals (integers as
/// they are).
fn median_quartiles<T: std::fmt::Display>(v: &[T], prec: usize, unit: &str) -> String {
    let q = |i: usize| &v[i * (v.len() - 1) / 4];
    format!("{:.prec$}{unit} ({:.prec$}-{:.prec$})", q(2), q(1), q(3))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "pingpong".into());
    let n: usize = args
        .next()
        .map(|a| a.parse().expect("N: a number of messages"))
        .unwrap_or(100_000);
    match mode.as_str() {
        "default" => {
            for round in 1..=7 {
                let mut line = format!("round {round}  one-way p50, ferry / raw floor:");
                for len in [32usize, 1024] {
                    let (f, r) = (pingpong(n, len, 0), raw_pingpong(n, len, Place::Apart));
                    line += &format!("  {len:4} B {f:4} / {r:4} ns = {:.2}", f as f64 / r as f64);
                }
                println!("{line}");
            }
        }
        "typed" => {
            let rounds: usize = std::env::var("ROUNDS").map_or(15, |r| r.parse().expect("ROUNDS"));
            assert!(rounds >= 4, "ROUNDS: at least 4");
            let t = ferry::TopicType::new(
                "ferry_msgs/msg/Blob",
                ferry::MessageEncoding::Cdr,
                "# A message of bytes.\nuint8[] data\n",
            )
            .expect("a type");
            for len in [32usize, 1024] {
                let (mut plain, mut typed, mut ratio, mut diff) = (vec![], vec![], vec![], vec![]);
                for round in 0..rounds {
                    // Alternate which goes first, so that neither always meets a warmer machine.
                    let (u, ty) = if round % 2 == 0 {
                        let u = pingpong(n, len, 0);
                        (u, pingpong_typed(n, len, 0, Some(t.clone())))
                    } else {
                        let ty = pingpong_typed(n, len, 0, Some(t.clone()));
                        (pingpong(n, len, 0), ty)
                    };
                    println!("round {round:2}  {len:4} B  one-way p50: untyped {u:4} ns, typed {ty:4} ns");
                    plain.push(u);
                    typed.push(ty);
                    ratio.push(ty as f64 / u as f64);
                    diff.push(ty as i64 - u as i64);
                }
                plain.sort_unstable();
                typed.sort_unstable();
                ratio.sort_by(f64::total_cmp);
                diff.sort_unstable();
                let median = |v: &[u64]| v[(rounds - 1) / 2];
                println!(
                    "{len:4} B, {rounds} rounds: untyped {} ns, typed {} ns; typed / untyped {}, \
                     typed - untyped {}: medians (quartiles)",
                    median(&plain),
                    median(&typed),
                    median_quartiles(&ratio, 3, ""),
                    median_quartiles(&diff, 0, " ns"),
                );
            }
        }
        "service" => {
            let rounds: usize = std::env::var("ROUNDS").map_or(15, |r| r.parse().expect("ROUNDS"));
            assert!(rounds >= 4, "ROUNDS: at least 4");
            for len in [32usize, 1024] {
                let (mut topics, mut service, mut ratio) = (vec![], vec![], vec![]);
                let (mut topic_steps, mut service_steps_all) = (vec![], vec![]);
                for round in 0..rounds {
                    // Alternate which goes first, so that neither always meets a warmer machine.
                    let (p, s) = if round % 2 == 0 {
                        let p = pingpong_steps(n, len);
                        (p, service_steps(n, len))
                    } else {
                        let s = service_steps(n, len);
                        (pingpong_steps(n, len), s)
                    };
                    println!(
                        "round {round:2}  {len:4} B  one-way p50: topics {:4} ns, service {:4} ns; \
                         ticks {:?} against {:?}",
                        p.0, s.0, p.1, s.1
                    );
                    topics.push(p.0);
                    service.push(s.0);
                    ratio.push(s.0 as f64 / p.0 as f64);
                    topic_steps.push(p.1);
                    service_steps_all.push(s.1);
                }
                topics.sort_unstable();
                service.sort_unstable();
                ratio.sort_by(f64::total_cmp);
                let median = |v: &[u64]| v[(rounds - 1) / 2];
                let step_medians = |all: &[[u64; 5]]| -> Vec<String> {
                    (0..5)
                        .map(|i| {
                            let mut v: Vec<u64> = all.iter().map(|s| s[i]).collect();
                            v.sort_unstable();
                            format!("{} {}", Steps::NAMES[i], v[(v.len() - 1) / 2])
                        })
                        .collect()
                };
                println!(
                    "{len:4} B, {rounds} rounds: topics {} ns, service {} ns; service / topics {}: \
                     medians (quartiles)\n  ticks, topics:  {}\n  ticks, service: {}",
                    median(&topics),
                    median(&service),
                    median_quartiles(&ratio, 2, ""),
                    step_medians(&topic_steps).join(", "),
                    step_medians(&service_steps_all).join(", "),
                );
            }
        }
        "service-single" => {
            for round in 1..=5 {
                let mut line =
                    format!("round {round}  one call on one thread, service / two topics:");
                for len in [32usize, 1024] {
                    let (service, topics) = single_service(n, len);
                    line += &format!("  {len:4} B {service:5.1} / {topics:5.1} ns");
                }
                println!("{line}");
            }
        }
        "gap" => {
            let rounds: usize = std::env::var("ROUNDS").map_or(15, |r| r.parse().expect("ROUNDS"));
            assert!(rounds >= 4, "ROUNDS: at least 4");
            for len in [32usize, 1024] {
                let (mut ratio, mut over) = (Vec::new(), Vec::new());
                for _ in 0..rounds {
                    let raw = raw_pingpong(n, len, Place::Apart);
                    let protocol = raw_pingpong(n, len, Place::Protocol);
                    let f = pingpong(n, len, 0);
                    ratio.push(f as f64 / raw as f64);
                    over.push(f as i64 - protocol as i64);
                }
                ratio.sort_by(f64::total_cmp);
                over.sort_unstable();
                println!(
                    "{len:4} B, {rounds} rounds: ferry / raw floor {}, ferry over its protocol {}: \
                     medians (quartiles)",
                    median_quartiles(&ratio, 2, ""),
                    median_quartiles(&over, 0, " ns"),
                );
            }
        }
        "work" => {
            for round in 1..=5 {
                for len in [32usize, 1024] {
                    let protocol = raw_pingpong(n, len, Place::Protocol);
                    let mut line = format!(
                        "round {round}  {len:4} B  one-way p50: protocol {protocol:4} ns, with more \
                         instructions before the reply:"
                    );
                    for hundreds in [1, 2, 4] {
                        let t = raw_pingpong(n, len, Place::WorkBeforeReply(hundreds));
                        line += &format!(" {}00 {t:4} ns", hundreds);
                    }
                    let commit = raw_pingpong(n, len, Place::WorkBeforeCommit);
                    let f = pingpong(n, len, 0);
                    println!("{line}; 200 before the commit {commit:4} ns; ferry {f:4} ns");
                }
            }
        }
        "floors" => {
            for round in 1..=5 {
                for len in [32usize, 1024] {
                    let apart = raw_pingpong(n, len, Place::Apart);
                    let inline = raw_pingpong(n, len, Place::Inline);
                    let two = raw_pingpong(n, len, Place::TwoSlots);
                    let window = raw_pingpong(n, len, Place::Window);
                    let protocol = raw_pingpong(n, len, Place::Protocol);
                    let f = pingpong(n, len, 0);
                    println!(
                        "round {round}  {len:4} B  one-way p50: raw {apart:4} ns  flag in line \
                         {inline:4} ns  two places {two:4} ns  8 KiB window {window:4} ns  \
                         ferry's protocol {protocol:4} ns  ferry {f:4} ns"
                    );
                }
            }
        }
        "p50" => {
            // One line, for scripts that alternate conditions around it (tools/monitor-cost).
            let (small, large) = (pingpong(n, 32, 0), pingpong(n, 1024, 0));
            println!("p50 32 {small} 1024 {large}");
        }
        "pingpong" => {
            for round in 1..=3 {
                for len in [32usize, 1024] {
                    let mut line = format!("round {round}  {len:4} B  one-way p50:");
                    for ring in [4096usize, 8192, 16384, 32768, 65536] {
                        line += &format!(
                            "  ring {:2} KiB {:4} ns",
                            ring / 1024,
                            pingpong(n, len, ring)
                        );
                    }
                    println!("{line}");
                }
            }
        }
        "count" | "count-raw" => {
            let len: usize = n;
            assert!((1..=4096).contains(&len), "SIZE: 1 to 4096 bytes");
            let count: usize = args
                .next()
                .map(|a| a.parse().expect("N: a number of messages"))
                .unwrap_or(100_000);
            if mode == "count" {
                single(count, len, Delivery::Reliable);
            } else {
                single_raw(count, len);
            }
            println!("{mode}: {count} messages of {len} B");
        }
        "single" | "latest" => {
            let (delivery, sizes): (_, &[usize]) = if mode == "single" {
                (Delivery::Reliable, &[32, 1024])
            } else {
                (Delivery::Latest, &[32, 1024, 65536])
            };
            for round in 1..=3 {
                let mut line = format!("round {round}  {mode}, per message:");
                for &len in sizes {
                    let count = if len > 4096 { 100_000 } else { 2_000_000 };
                    line += &format!("  {len} B {:.1} ns", single(count, len, delivery));
                    if mode == "single" {
                        line += &format!(" (raw floor {:.1} ns)", single_raw(count, len));
                    }
                }
                println!("{line}");
            }
        }
        "large" => {
            let len: usize = std::env::var("SIZE").map_or(1 << 20, |s| s.parse().expect("SIZE"));
            for round in 1..=5 {
                // The ring ferry picks (room for two records, rounded up), and one four times
                // that (what a topic whose largest message is four times larger gets).
                let ring = (2 * (len + 32)).next_power_of_two().max(64 * 1024);
                let mut line = format!(
                    "round {round}  {len} B one-way p50: ferry {} ns, in a ring of {} KiB {} ns; \
                     raw in 1, 2, 4 buffers",
                    pingpong(n, len, ring),
                    4 * ring / 1024,
                    pingpong(n, len, 4 * ring)
                );
                for offset in [0, 16] {
                    line += &format!(", {offset} B past a page:");
                    for slots in [1, 2, 4] {
                        line += &format!(" {}", big_pingpong(n, len, slots, offset));
                    }
                    line += " ns";
                }
                line += &format!(
                    "; memset alone, 0 and 16 B past a page: {:.0}, {:.0} ns",
                    fill_time(len, 0),
                    fill_time(len, 16)
                );
                println!("{line}");
            }
        }
        other => panic!(
            "unknown mode {other:?}: pingpong, default, floors, gap, work, large, single, latest, \
             count or count-raw"
        ),
    }
}
