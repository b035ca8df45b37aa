//! Congestion control against simulated links: ferry's real sender and receiver on either end of
//! a bottleneck of given rate, one-way delay, drop-tail buffer and random loss, with time
//! advanced by the test from event to event (no sockets, no sleeps, deterministic).

use std::collections::VecDeque;

use super::congestion::Phase;
use super::frame::decode;
use super::impair::Rng;
use super::receiver::{Receiver, ReceiverConfig};
use super::sender::{Dest, Sender, SenderConfig, SenderStats, Sink};

const MBIT: u64 = 1_000_000 / 8;
const GBIT: u64 = 1000 * MBIT;
const MS: u64 = 1_000_000;
const START: u64 = 1_000_000_000;

/// A 1 Gbit/s link with a queue of 256 KB (what `tc tbf burst 256kb` lets through at once) and
/// 100 µs each way.
const GIGABIT: Link = Link {
    rate: GBIT,
    delay: 100_000,
    buffer: 256 << 10,
    loss: 0.0,
};

#[derive(Clone, Copy)]
struct Link {
    /// Bytes per second through the bottleneck.
    rate: u64,
    /// One way, ns.
    delay: u64,
    /// Bytes the bottleneck's queue holds (drop-tail).
    buffer: u64,
    /// Chance that a datagram is lost on the wire after the queue (not congestion).
    loss: f64,
}

/// One direction: datagrams queue at the bottleneck, are serialised at its rate, and arrive
/// `delay` later.
struct Pipe {
    link: Link,
    busy_until: u64,
    /// (when its serialisation ends, bytes): what the queue holds.
    queued: VecDeque<(u64, u64)>,
    queued_bytes: u64,
    arrivals: VecDeque<(u64, usize, Vec<u8>)>,
    rng: Rng,
    carried: u64,
    dropped: u64,
    /// Dropped at or after `late` (once the flows are past their start).
    dropped_late: u64,
    late: u64,
    lost: u64,
}

impl Pipe {
    fn new(link: Link, seed: u64) -> Pipe {
        Pipe {
            link,
            busy_until: 0,
            queued: VecDeque::new(),
            queued_bytes: 0,
            arrivals: VecDeque::new(),
            rng: Rng::new(seed),
            carried: 0,
            dropped: 0,
            dropped_late: 0,
            late: u64::MAX,
            lost: 0,
        }
    }

    fn push(&mut self, now: u64, flow: usize, d: &[u8]) {
        while self.queued.front().is_some_and(|q| q.0 <= now) {
            self.queued_bytes -= self.queued.pop_front().unwrap().1;
        }
        let len = d.len() as u64;
        if self.queued_bytes + len > self.link.buffer {
            self.dropped += 1;
            if now >= self.late {
                self.dropped_late += 1;
            }
            return;
        }
        let done = now.max(self.busy_until) + len * 1_000_000_000 / self.link.rate;
        self.busy_until = done;
        self.queued.push_back((done, len));
        self.queued_bytes += len;
        self.carried += 1;
        if self.rng.chance(self.link.loss) {
            self.lost += 1;
            return;
        }
        self.arrivals
            .push_back((done + self.link.delay, flow, d.to_vec()));
    }

    fn next(&self) -> u64 {
        self.arrivals.front().map_or(u64::MAX, |a| a.0)
    }
}

struct PipeSink<'a> {
    pipe: &'a mut Pipe,
    flow: usize,
    now: u64,
}

impl Sink for PipeSink<'_> {
    fn send(&mut self, _dest: Dest<'_>, data: &mut [u8], segment: usize) {
        for d in data.chunks(segment) {
            assert!(d.len() <= 1472, "never more than one MTU");
            self.pipe.push(self.now, self.flow, d);
        }
    }
}

struct Flow {
    tx: Sender,
    rx: Receiver,
    /// Messages offered, and delivered bytes with their times.
    offered: u64,
    /// Messages offered as a [`Trickle`].
    trickled: u64,
    /// When the sender last ran dry (with [`App::Wakes`]).
    dry: Option<u64>,
    /// When each message was offered, by sequence number.
    offered_at: Vec<u64>,
    delivered: Vec<(u64, u64)>,
    /// Each message's time from its offer to its delivery, ns.
    latency: Vec<u64>,
    next_seq: u64,
    rx_next: u64,
    tx_next: u64,
    /// Starts sending at this time.
    start: u64,
}

struct Outcome {
    /// Delivered bytes per flow between `from` and the end, per second.
    goodput: Vec<u64>,
    carried: u64,
    dropped: u64,
    dropped_late: u64,
    lost_on_wire: u64,
    senders: Vec<SenderStats>,
    phases: Vec<Phase>,
    /// The longest time from a message's offer to its delivery, per flow (ns).
    worst_latency: Vec<u64>,
}

fn message(seq: u64, size: usize) -> Vec<u8> {
    let mut m = vec![(seq % 251) as u8; size];
    m[..8].copy_from_slice(&seq.to_le_bytes());
    m
}

/// After a while, the application sends little: from `from` ns on, one message of `size` bytes
/// every `period` ns instead of a backlog.
#[derive(Clone, Copy)]
struct Trickle {
    from: u64,
    period: u64,
    size: usize,
}

/// How the publishers' applications offer messages.
#[derive(Clone, Copy)]
enum App {
    /// A message is always waiting.
    Backlog,
    /// Always another message, but the application's thread wakes this many ns after the
    /// sender ran dry before it offers it (a publisher that blocked on a receiver's window).
    Wakes(u64),
    /// A backlog, then a [`Trickle`].
    Trickle(Trickle),
    /// A backlog, beside a [`WindowFlow`].
    Beside(WindowFlow),
}

/// A flow that is not ferry's and does not react to delay, as a Cubic TCP flow is on the lab's
/// tbf links, where the qdisc on its own interface pushes back on its socket instead of
/// dropping: its window stops at 100–500 KB, all of it queued, for seconds without a loss. It
/// keeps `window` bytes in flight in datagrams of [`WINDOW_DATAGRAM`] bytes, each acknowledged
/// the path's delay after it arrives; one the queue drops is sent at its next chance.
#[derive(Clone, Copy)]
struct WindowFlow {
    /// From and until (ns after the start).
    start: u64,
    until: u64,
    window: u64,
    /// Loss-based instead (Reno's AIMD, the window at most `window`): slow start, then a
    /// datagram more per round trip, and the window times this on a drop (once per round trip).
    aimd: Option<f64>,
}

const WINDOW_DATAGRAM: u64 = 1500;

/// Runs `flows` reliable publishers (messages of `size`, offered as `app` says) through one
/// bottleneck for `duration` ns; goodput counts from `measure_from` ns after the start. `cap`:
/// the senders' rate cap (bytes per second).
fn simulate(
    link: Link,
    starts: &[u64],
    size: usize,
    duration: u64,
    measure_from: u64,
    cap: u64,
    app: App,
) -> Outcome {
    let mut fwd = Pipe::new(link, 7);
    fwd.late = START + measure_from;
    let back = Link {
        rate: 100 * GBIT,
        loss: 0.0,
        buffer: u64::MAX,
        ..link
    };
    let mut rev = Pipe::new(back, 8);
    let mut flows: Vec<Flow> = starts
        .iter()
        .enumerate()
        .map(|(i, &start)| {
            let tx = Sender::new(
                1,
                100 + i as u64,
                SenderConfig {
                    rate_cap: cap,
                    ..SenderConfig::default()
                },
            );
            let rx = Receiver::new(
                200 + i as u64,
                1,
                ReceiverConfig {
                    max_message: size.max(1),
                    ..ReceiverConfig::default()
                },
            );
            Flow {
                tx,
                rx,
                offered: 0,
                trickled: 0,
                dry: None,
                offered_at: Vec::new(),
                delivered: Vec::new(),
                latency: Vec::new(),
                next_seq: 0,
                rx_next: 0,
                tx_next: 0,
                start: START + start,
            }
        })
        .collect();
    let end = START + duration;
    let mut now = START;
    let mut joined = vec![false; flows.len()];
    // The window flow: its index in the pipe, bytes in flight, acknowledgements due (time,
    // bytes), bytes delivered (time, bytes).
    let window_flow = flows.len();
    let mut window_in_flight = 0;
    let (mut cwnd, mut ssthresh, mut recover_until) = (10.0 * WINDOW_DATAGRAM as f64, f64::MAX, 0);
    let mut window_acks: VecDeque<(u64, u64)> = VecDeque::new();
    let mut window_delivered: Vec<(u64, u64)> = Vec::new();
    let (trace, mut trace_at) = (std::env::var_os("SIM_TRACE").is_some(), START);
    for step in 0.. {
        assert!(step < 20_000_000, "the simulation must end");
        if now >= end {
            break;
        }
        // Arrivals due.
        while fwd.next() <= now {
            let (_, i, d) = fwd.arrivals.pop_front().unwrap();
            if i == window_flow {
                window_delivered.push((now, d.len() as u64));
                window_acks.push_back((now + link.delay, d.len() as u64));
                continue;
            }
            let f = &mut flows[i];
            f.rx.on_frame(now, &decode(&d).unwrap());
            if !joined[i] {
                // The socket layer verified the publisher's address.
                f.rx.verify(100 + i as u64);
                joined[i] = true;
            }
            while let Some(m) = f.rx.take(now) {
                assert_eq!(m.seq, f.next_seq, "in order, nothing lost");
                assert_eq!(&m.data[..8], &m.seq.to_le_bytes());
                f.latency.push(now - f.offered_at[m.seq as usize]);
                f.next_seq += 1;
                f.delivered.push((now, m.data.len() as u64));
                f.rx.recycle(m.data);
            }
            f.rx_next = now;
        }
        while rev.next() <= now {
            let (_, i, d) = rev.arrivals.pop_front().unwrap();
            let f = &mut flows[i];
            let mut sink = PipeSink {
                pipe: &mut fwd,
                flow: i,
                now,
            };
            f.tx.handle(now, &decode(&d).unwrap(), &mut sink);
            f.tx_next = now;
        }
        let mut next = fwd.next().min(rev.next()).min(end);
        if let App::Beside(w) = app {
            while window_acks.front().is_some_and(|a| a.0 <= now) {
                let acked = window_acks.pop_front().unwrap().1;
                window_in_flight -= acked;
                if w.aimd.is_some() {
                    cwnd += if cwnd < ssthresh {
                        acked as f64
                    } else {
                        (WINDOW_DATAGRAM * acked) as f64 / cwnd
                    };
                    cwnd = cwnd.min(w.window as f64);
                }
            }
            let limit = match w.aimd {
                Some(_) => cwnd as u64,
                None => w.window,
            };
            if now - START >= w.until {
                // Gone.
            } else if now >= START + w.start {
                while window_in_flight + WINDOW_DATAGRAM <= limit {
                    let dropped = fwd.dropped;
                    fwd.push(now, window_flow, &[0; WINDOW_DATAGRAM as usize]);
                    if fwd.dropped != dropped {
                        if let Some(beta) = w.aimd.filter(|_| now >= recover_until) {
                            ssthresh = (cwnd * beta).max(2.0 * WINDOW_DATAGRAM as f64);
                            cwnd = ssthresh;
                            recover_until =
                                now + 2 * link.delay + fwd.queued_bytes * 1_000_000_000 / link.rate;
                        }
                        // Sent again at its next chance.
                        next = next.min(now + WINDOW_DATAGRAM * 1_000_000_000 / link.rate);
                        break;
                    }
                    window_in_flight += WINDOW_DATAGRAM;
                }
            } else {
                next = next.min(START + w.start);
            }
            next = next.min(window_acks.front().map_or(u64::MAX, |a| a.0));
        }
        for (i, f) in flows.iter_mut().enumerate() {
            if now < f.start {
                next = next.min(f.start);
                continue;
            }
            let mut sink = PipeSink {
                pipe: &mut fwd,
                flow: i,
                now,
            };
            if f.offered == 0 {
                // Discovery found the subscriber before the first message.
                f.tx.expect_receiver(200 + i as u64, true, now);
                f.tx.heartbeat_now(now, &mut sink);
            }
            match app {
                App::Trickle(t) if now >= START + t.from => {
                    let due = START + t.from + f.trickled * t.period;
                    if now >= due && f.tx.busy() {
                        // Its next message waits for the sender.
                        f.tx.publisher_waits();
                    } else if now >= due {
                        f.tx.offer(&message(f.offered, t.size)).unwrap();
                        f.offered_at.push(now);
                        f.offered += 1;
                        f.trickled += 1;
                    }
                    f.tx.pump_while_credit(now, &mut sink);
                    // The next message's time (one overdue waits for the sender's own wake-ups).
                    let due = START + t.from + f.trickled * t.period;
                    if due > now {
                        next = next.min(due);
                    }
                }
                // Backlogged: a message is always waiting (once the application woke).
                _ => {
                    for _ in 0..64 {
                        if !f.tx.busy() {
                            if let App::Wakes(wake) = app {
                                let awake = f.dry.get_or_insert(now).saturating_add(wake);
                                if now < awake {
                                    next = next.min(awake);
                                    break;
                                }
                                f.dry = None;
                            }
                            f.tx.offer(&message(f.offered, size)).unwrap();
                            f.offered_at.push(now);
                            f.offered += 1;
                        }
                        if !f.tx.pump_while_credit(now, &mut sink) {
                            // Its next message waits for the sender.
                            f.tx.publisher_waits();
                            break;
                        }
                    }
                }
            }
            if now >= f.tx_next {
                f.tx_next = f.tx.tick(now, &mut sink);
            }
            let mut back = PipeSink {
                pipe: &mut rev,
                flow: i,
                now,
            };
            if now >= f.rx_next || f.rx.status_due() {
                f.rx_next = f.rx.tick(now, &mut back);
            }
            next = next.min(f.tx_next).min(f.rx_next).min(f.tx.next_send_ns());
        }
        // `SIM_TRACE=1 cargo test … -- --nocapture`: each flow's goodput and controller state
        // every 250 ms, and the queue (for reading a case, not for asserting).
        if trace && now >= trace_at {
            let mut line = format!("{:6.2}s", (now - START) as f64 / 1e9);
            for f in &flows {
                let bytes: u64 = f
                    .delivered
                    .iter()
                    .filter(|d| d.0 + 250 * MS >= now)
                    .map(|d| d.1)
                    .sum();
                let c = f.tx.stats().congestion;
                line += &format!(
                    " | {:5.1} Mb/s {:?} bw {:5.1} pace {:5.1} min {:5.2} fq {:5.2} qe {:3}",
                    bytes as f64 * 8.0 / 0.25 / 1e6,
                    f.tx.congestion_phase(),
                    c.bottleneck_rate as f64 * 8.0 / 1e6,
                    c.pacing_rate as f64 * 8.0 / 1e6,
                    c.min_rtt_ns as f64 / 1e6,
                    c.foreign_queue_ns as f64 / 1e6,
                    c.queue_events
                );
            }
            line += &format!(
                " | queue {:.2} ms",
                fwd.queued_bytes as f64 / link.rate as f64 * 1e3
            );
            eprintln!("{line}");
            trace_at = now + 250 * MS;
        }
        // What was sent in this step arrives then, not at the next other event.
        next = next.min(fwd.next()).min(rev.next());
        now = next.max(now + 1);
    }
    let from = START + measure_from;
    let span = (end - from) as f64 / 1e9;
    let goodput = |delivered: &[(u64, u64)]| {
        let bytes: u64 = delivered.iter().filter(|d| d.0 >= from).map(|d| d.1).sum();
        (bytes as f64 / span) as u64
    };
    let mut goodputs: Vec<u64> = flows.iter().map(|f| goodput(&f.delivered)).collect();
    if let App::Beside(_) = app {
        goodputs.push(goodput(&window_delivered));
    }
    Outcome {
        goodput: goodputs,
        carried: fwd.carried,
        dropped: fwd.dropped,
        dropped_late: fwd.dropped_late,
        lost_on_wire: fwd.lost,
        senders: flows.iter().map(|f| f.tx.stats()).collect(),
        phases: flows.iter().map(|f| f.tx.congestion_phase()).collect(),
        worst_latency: flows
            .iter()
            .map(|f| f.latency.iter().copied().max().unwrap_or(0))
            .collect(),
    }
}

/// One uncapped publisher from the start (see [`simulate`]).
fn one_flow(link: Link, size: usize, duration: u64, measure_from: u64, app: App) -> Outcome {
    simulate(link, &[0], size, duration, measure_from, u64::MAX, app)
}

/// One publisher, backlogged with 64 KiB messages until `from` ns, then sending 1 KiB every
/// 20 ms, for `duration` ns in all.
fn trickling(link: Link, from: u64, duration: u64) -> Outcome {
    let trickle = Trickle {
        from,
        period: 20 * MS,
        size: 1 << 10,
    };
    one_flow(link, 64 << 10, duration, 0, App::Trickle(trickle))
}

/// What happened, for the failure message (and `--nocapture`).
fn report(o: &Outcome, link: &Link) -> String {
    let text = format!(
        "goodput {:?} Mbit/s of {} Mbit/s; {} datagrams carried, {} dropped at the queue ({} after the start), {} lost on the wire; phases {:?}; senders {:#?}",
        o.goodput.iter().map(|g| g / MBIT).collect::<Vec<_>>(),
        link.rate / MBIT,
        o.carried,
        o.dropped,
        o.dropped_late,
        o.lost_on_wire,
        o.phases,
        o.senders.iter().map(|s| (s.frames, s.retransmitted_frames, s.congestion)).collect::<Vec<_>>()
    );
    eprintln!("{}", text.lines().next().unwrap_or_default());
    text
}

/// A 1 Gbit/s link with a queue of 256 KB (what `tc tbf burst 256kb` lets through at once) and
/// 100 µs each way: the sender fills it and keeps its queue short.
#[test]
fn a_gigabit_link_is_filled_without_overflowing_its_queue() {
    let link = GIGABIT;
    let o = one_flow(link, 64 << 10, 600 * MS, 200 * MS, App::Backlog);
    let why = report(&o, &link);
    assert!(o.goodput[0] as f64 >= 0.9 * link.rate as f64, "{why}");
    assert!(o.dropped as f64 <= 0.02 * o.carried as f64, "{why}");
    assert_eq!(o.phases[0], Phase::ProbeBw, "{why}");
}

/// A 1 Gbit/s link behind a deep queue (50 ms, as `ferry lab` sets its tbf links) on a veth's
/// round trip: the sender leaves Startup and keeps no standing queue. (It once stayed in Startup
/// for good: every message that waited behind the in-flight window was taken for the
/// application's pace, and Startup never ends on samples of that pace, so the window stood in
/// the queue: a round trip of 0.8 ms on a path of 0.1 ms.)
#[test]
fn a_gigabit_link_behind_a_deep_queue_is_filled_without_a_standing_queue() {
    let link = Link {
        rate: GBIT,
        delay: 50_000,
        buffer: GBIT / 20,
        loss: 0.0,
    };
    let o = one_flow(link, 64 << 10, 2000 * MS, 500 * MS, App::Backlog);
    let why = report(&o, &link);
    assert!(o.goodput[0] as f64 >= 0.9 * link.rate as f64, "{why}");
    assert_eq!(o.phases[0], Phase::ProbeBw, "{why}");
    let min_rtt = o.senders[0].congestion.min_rtt_ns;
    assert!(min_rtt <= 300_000, "a round trip of {min_rtt} ns: {why}");
}

/// A backlogged publisher whose application wakes 20 µs after the sender ran dry (as one blocked
/// on its receiver's window does) on a gigabit link behind a deep queue: that wake-up is longer
/// than a datagram takes at the link's rate (12 µs) but, the publisher having been blocked on
/// the sender, the limit is then a pacing quantum, so its messages are the path's pace, Startup
/// ends and no standing queue is kept. (With a datagram's time as the limit every message was
/// the application's, Startup never ended, and on the lab's link the publisher kept 2 MB queued
/// and took the link from TCP.)
#[test]
fn a_publisher_that_wakes_late_for_each_message_still_leaves_startup() {
    let link = Link {
        rate: GBIT,
        delay: 50_000,
        buffer: GBIT / 20,
        loss: 0.0,
    };
    let o = one_flow(link, 64 << 10, 1000 * MS, 300 * MS, App::Wakes(20_000));
    let why = report(&o, &link);
    assert_eq!(o.phases[0], Phase::ProbeBw, "{why}");
    assert!(o.goodput[0] as f64 >= 0.8 * link.rate as f64, "{why}");
}

/// A publisher whose application sends a 1 KiB message every 20 ms from its start: those
/// messages show the application's pace, not the path's, so Startup does not end on them (its
/// estimate would be the trickle's, and the first large message would leave at that rate).
/// Each message comes after the sender had nothing to send, so each is the application's.
#[test]
fn a_trickle_from_the_start_does_not_end_startup() {
    let link = Link {
        rate: 100 * MBIT,
        delay: MS,
        buffer: 256 << 10,
        loss: 0.0,
    };
    let o = trickling(link, 0, 1000 * MS);
    let why = report(&o, &link);
    assert!(o.senders[0].congestion.rounds >= 20, "{why}");
    assert_eq!(o.phases[0], Phase::Startup, "{why}");
}

/// A request and its answer, again and again (a service's client, a ping-pong): one 32-byte
/// message every 100 µs, each after the sender ran dry, on a gigabit link with 20 µs each way.
/// Each is the application's pace, and none waits for the pacer: every message arrives within
/// the path's delay and a few microseconds. (With a pacing quantum as the idle that makes a
/// message the application's, 1 ms and more at a low estimate, these small messages became the
/// path's samples, the estimate fell to the application's own rate, and its pacer held each
/// message for hundreds of microseconds: 317 µs one way over loopback in the lab, against 44.)
#[test]
fn small_messages_after_idle_are_not_held_by_the_pacer() {
    let link = Link {
        rate: GBIT,
        delay: 20_000,
        buffer: 256 << 10,
        loss: 0.0,
    };
    let trickle = Trickle {
        from: 0,
        period: 100_000,
        size: 32,
    };
    let o = one_flow(link, 32, 300 * MS, 0, App::Trickle(trickle));
    let why = report(&o, &link);
    assert!(o.senders[0].messages >= 2_900, "{why}");
    assert!(
        o.worst_latency[0] <= link.delay + 30_000,
        "a message took {} µs from its offer to its delivery: {why}",
        o.worst_latency[0] / 1000
    );
}

/// A publisher that filled a gigabit link, then sends a 1 KiB message every 20 ms for a second
/// (a quiet spell: each message is the application's pace, not the path's). Its estimate of the
/// link stays what the backlog measured, as BBR keeps its maximum while application-limited, so
/// that the next large message leaves at the link's rate and not at the trickle's: rounds of the
/// trickle say nothing of what the path carries and must not age the maximum out.
#[test]
fn a_quiet_spell_keeps_the_estimate_of_the_link() {
    let link = GIGABIT;
    let o = trickling(link, 500 * MS, 1500 * MS);
    let why = report(&o, &link);
    let c = &o.senders[0].congestion;
    assert!(c.rounds >= 40, "{why}");
    assert!(
        c.bottleneck_rate as f64 >= 0.8 * link.rate as f64,
        "estimate {} Mbit/s after the quiet spell: {why}",
        c.bottleneck_rate / MBIT
    );
}

/// 100 Mbit/s with a shallow queue (64 KB) and 2 ms each way: the path holds more than the queue.
#[test]
fn a_slow_link_with_a_shallow_queue_and_a_long_path() {
    let link = Link {
        rate: 100 * MBIT,
        delay: 2 * MS,
        buffer: 64 << 10,
        loss: 0.0,
    };
    let o = one_flow(link, 64 << 10, 2000 * MS, 500 * MS, App::Backlog);
    let why = report(&o, &link);
    assert!(o.goodput[0] as f64 >= 0.9 * link.rate as f64, "{why}");
    assert!(o.dropped as f64 <= 0.02 * o.carried as f64, "{why}");
}

/// Loss that is not congestion (1 % on the wire, the queue never full) does not slow the sender:
/// the repairs take their share and nothing is lost.
#[test]
fn random_loss_is_not_taken_for_congestion() {
    let link = Link {
        rate: 100 * MBIT,
        delay: 500_000,
        buffer: 1 << 20,
        loss: 0.01,
    };
    let o = one_flow(link, 16 << 10, 2000 * MS, 500 * MS, App::Backlog);
    let why = report(&o, &link);
    assert!(o.goodput[0] as f64 >= 0.85 * link.rate as f64, "{why}");
    assert!(o.senders[0].retransmitted_frames > 0, "{why}");
    // Startup may end on it (it cannot tell yet); afterwards the rate is never cut for it.
    assert!(o.senders[0].congestion.congestion_events <= 1, "{why}");
}

/// Two flows, the second starting later, share one bottleneck within 20 % and together fill it:
/// both see the queue that stands while they send more than the link carries, back off by a
/// share of their rate and grow back by the same amount per round.
#[test]
fn two_flows_share_a_link() {
    let o = two_flows_share(Link {
        rate: 200 * MBIT,
        delay: MS,
        buffer: 256 << 10,
        loss: 0.0,
    });
    assert!(
        o.dropped_late as f64 <= 0.01 * o.carried as f64,
        "{} of {} datagrams dropped after the start",
        o.dropped_late,
        o.carried
    );
}

/// Runs two flows on `link`, the second 300 ms after the first, for 12 s: from 6 s on, they get
/// within 20 % of each other and together fill the link.
fn two_flows_share(link: Link) -> Outcome {
    let o = simulate(
        link,
        &[0, 300 * MS],
        64 << 10,
        12000 * MS,
        6000 * MS,
        u64::MAX,
        App::Backlog,
    );
    let why = report(&o, &link);
    let (a, b) = (o.goodput[0] as f64, o.goodput[1] as f64);
    assert!(a.min(b) >= 0.8 * a.max(b), "{why}");
    assert!(a + b >= 0.85 * link.rate as f64, "{why}");
    o
}

/// The same behind a deep queue on a short path (the lab's tbf link: 50 ms of queue, a veth's
/// round trip): the queue, not the path, sets the round trip the flows grow by.
#[test]
fn two_flows_share_a_short_path_behind_a_deep_queue() {
    two_flows_share(Link {
        rate: 100 * MBIT,
        delay: 50_000,
        buffer: 625_000,
        loss: 0.0,
    });
}

/// One ferry publisher (a 64 KiB backlog) beside a [`WindowFlow`] of `window` bytes (`aimd`: its
/// decrease, if it is loss-based) that starts 1 s later: ferry's share of the 8 s from 5 s
/// after that, once the link was full for them both; with what happened, for messages.
fn share_beside(link: Link, window: u64, aimd: Option<f64>) -> (Outcome, f64, String) {
    let o = simulate(
        link,
        &[0],
        64 << 10,
        14000 * MS,
        6000 * MS,
        u64::MAX,
        App::Beside(WindowFlow {
            start: 1000 * MS,
            until: u64::MAX,
            window,
            aimd,
        }),
    );
    let why = report(&o, &link);
    let (ferry, other) = (o.goodput[0] as f64, o.goodput[1] as f64);
    assert!(ferry + other >= 0.9 * link.rate as f64, "{why}");
    (o, ferry / (ferry + other), why)
}

/// Beside a flow that keeps its window queued and never backs off (Cubic on the lab's links,
/// 100–200 KB of queue), ferry takes a fair share: between 40 and 60 % once both run.
fn beside_a_window_flow(link: Link, window: u64) -> Outcome {
    let (o, share, why) = share_beside(link, window, None);
    assert!((0.4..=0.6).contains(&share), "share {share:.2}: {why}");
    // It holds because ferry counts the other flow's queue (milliseconds, where the path is
    // 0.1 ms) as part of the path: as the queue it could not drain, or in a minimum round
    // trip re-taken since.
    let c = o.senders[0].congestion;
    assert!(c.min_rtt_ns + c.foreign_queue_ns > 20 * link.delay, "{why}");
    o
}

#[test]
fn a_fair_share_beside_a_window_flow_at_100_mbit() {
    beside_a_window_flow(
        Link {
            rate: 100 * MBIT,
            delay: 50_000,
            buffer: 625_000,
            loss: 0.0,
        },
        150_000,
    );
}

#[test]
fn a_fair_share_beside_a_window_flow_at_1_gbit() {
    beside_a_window_flow(
        Link {
            rate: GBIT,
            delay: 50_000,
            buffer: 6_250_000,
            loss: 0.0,
        },
        400_000,
    );
}

/// When the other flow leaves, ferry takes the link and no longer counts its queue: the queue
/// it keeps is its own short one again.
#[test]
fn after_a_window_flow_leaves_the_link_is_filled_with_a_short_queue() {
    let link = Link {
        rate: 100 * MBIT,
        delay: 50_000,
        buffer: 625_000,
        loss: 0.0,
    };
    let o = simulate(
        link,
        &[0],
        64 << 10,
        12000 * MS,
        9000 * MS,
        u64::MAX,
        App::Beside(WindowFlow {
            start: 1000 * MS,
            until: 6000 * MS,
            window: 150_000,
            aimd: None,
        }),
    );
    let why = report(&o, &link);
    assert!(o.goodput[0] as f64 >= 0.9 * link.rate as f64, "{why}");
    let c = o.senders[0].congestion;
    assert_eq!(c.foreign_queue_ns, 0, "{why}");
    assert!(c.min_rtt_ns < MS, "{why}");
}

/// The user's cap holds on a link ten times faster.
#[test]
fn a_rate_cap_holds() {
    let link = GIGABIT;
    let cap = 100 * MBIT;
    let o = simulate(link, &[0], 64 << 10, 600 * MS, 200 * MS, cap, App::Backlog);
    let why = report(&o, &link);
    let g = o.goodput[0] as f64;
    assert!(g <= 1.02 * cap as f64, "{why}");
    assert!(g >= 0.9 * cap as f64, "{why}");
}

/// A receiver that repeats its NAK faster than a round trip gets the repair once: the repeat
/// is counted as suppressed, and repairs are counted apart from new data.
#[test]
fn a_repeated_nak_does_not_resend_what_is_on_its_way() {
    use super::frame::{self, Common, Kind, NakEntry, FLAG_RELIABLE};
    let mut tx = Sender::new(1, 100, SenderConfig::default());
    let mut pipe = Pipe::new(
        Link {
            rate: GBIT,
            delay: MS,
            buffer: u64::MAX,
            loss: 0.0,
        },
        1,
    );
    let c = |kind| Common {
        kind,
        flags: FLAG_RELIABLE,
        topic: 1,
        session: 100,
    };
    let mut now = START;
    let mut sink = PipeSink {
        pipe: &mut pipe,
        flow: 0,
        now,
    };
    tx.expect_receiver(200, true, now);
    tx.offer(&message(0, 8000)).unwrap();
    assert!(tx.pump_while_credit(now, &mut sink));
    let frames = tx.stats().frames;
    // A report that everything arrived gives the controller its round trip (2 ms).
    now += 2 * MS;
    let mut st = Vec::new();
    frame::put_status(&mut st, &c(Kind::Status), 200, 0, 1 << 20, 0, 0, 8000, 8000);
    sink.now = now;
    tx.handle(now, &decode(&st).unwrap(), &mut sink);
    let mut nak = Vec::new();
    let entry = NakEntry {
        seq: 0,
        from: 0,
        to: 1424,
    };
    frame::put_nak(&mut nak, &c(Kind::Nak), 200, &[entry]);
    tx.handle(now, &decode(&nak).unwrap(), &mut sink);
    let after_first = tx.stats();
    assert_eq!(after_first.retransmitted_frames, 1);
    assert_eq!(after_first.repair_bytes, 1472);
    assert_eq!(after_first.frames, frames, "repairs are not new data");
    // The same NAK again and again within the round trip: nothing more is sent.
    for k in 1..=5 {
        sink.now = now + k * 100_000;
        tx.handle(now + k * 100_000, &decode(&nak).unwrap(), &mut sink);
    }
    let s = tx.stats();
    assert_eq!(s.retransmitted_frames, 1);
    assert_eq!(s.repairs_suppressed, 5);
    // A round trip later the repair may be lost too: it is sent again.
    now += 3 * MS;
    sink.now = now;
    tx.handle(now, &decode(&nak).unwrap(), &mut sink);
    assert_eq!(tx.stats().retransmitted_frames, 2);
}

/// A receiver that lies in its STATUS (everything arrived and received, at once, again and
/// again) can make the sender faster, never past the user's cap, and never makes it send more
/// than it has: its positions are clamped to what was sent.
#[test]
fn a_lying_status_cannot_pass_the_rate_cap() {
    use super::frame::{self, Common, Kind, FLAG_RELIABLE};
    let cap = 10 * MBIT;
    let mut tx = Sender::new(
        1,
        100,
        SenderConfig {
            rate_cap: cap,
            ..SenderConfig::default()
        },
    );
    let mut pipe = Pipe::new(
        Link {
            rate: 100 * GBIT,
            delay: 0,
            buffer: u64::MAX,
            loss: 0.0,
        },
        1,
    );
    let c = Common {
        kind: Kind::Status,
        flags: FLAG_RELIABLE,
        topic: 1,
        session: 100,
    };
    let mut now = START;
    tx.expect_receiver(200, true, now);
    let mut offered = 0u64;
    let mut wire = 0u64;
    for _ in 0..20_000 {
        let mut sink = PipeSink {
            pipe: &mut pipe,
            flow: 0,
            now,
        };
        if !tx.busy() {
            tx.offer(&message(offered, 16 << 10)).unwrap();
            offered += 1;
        }
        tx.pump_while_credit(now, &mut sink);
        let mut st = Vec::new();
        let all = u64::MAX;
        frame::put_status(&mut st, &c, 200, all, all, all, 0, all, all);
        tx.handle(now, &decode(&st).unwrap(), &mut sink);
        let s = tx.stats();
        assert!(s.congestion.pacing_rate <= cap, "{:?}", s.congestion);
        now += 10_000; // 10 µs
    }
    while let Some(a) = pipe.arrivals.pop_front() {
        wire += a.2.len() as u64;
    }
    // 0.2 s at the cap, and the quantum the first run may take at once.
    let most = cap / 5 + 64 * 1024;
    assert!(
        wire <= most,
        "{wire} bytes on the wire in 0.2 s under a cap allowing {most}"
    );
    assert!(wire >= most / 2, "but the cap's worth went: {wire}");
}

/// Beside a loss-based flow (Cubic's multiplicative decrease, 0.7, with Reno's additive
/// increase) on a drop-tail queue of 10 ms — a router's buffer, where the other flow's queue
/// fills, overflows and halves again and again, unlike the lab's tbf links — ferry still takes a
/// fair share: between 35 and 65 % once both run, the link full.
fn beside_a_loss_based_flow(rate: u64) -> Outcome {
    let link = Link {
        rate,
        delay: 50_000,
        buffer: rate / 100,
        loss: 0.0,
    };
    let (o, share, why) = share_beside(link, 64 << 20, Some(0.7));
    assert!((0.35..=0.65).contains(&share), "share {share:.2}: {why}");
    assert!(o.dropped_late > 0, "the other flow met its losses: {why}");
    o
}

#[test]
fn a_fair_share_beside_a_loss_based_flow_at_100_mbit() {
    beside_a_loss_based_flow(100 * MBIT);
}

#[test]
fn a_fair_share_beside_a_loss_based_flow_at_1_gbit() {
    beside_a_loss_based_flow(GBIT);
}
