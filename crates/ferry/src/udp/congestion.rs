//! Congestion control and pacing for the UDP publisher: no I/O, time passed in (nanoseconds).
//!
//! The model is BBR's (Cardwell et al., "BBR: Congestion-Based Congestion Control", 2016): the
//! path is a bottleneck of some rate behind some round-trip time, both estimated from what the
//! receivers report, and the sender paces at a gain times the rate estimate, keeping at most a
//! few round trips' worth of data in flight. It suits ferry better than a loss-based window
//! (CUBIC, NewReno): ferry's receivers report in every STATUS how far the stream arrived and how
//! many bytes they received, which gives a delivery rate for free, and a rate is what a pacer
//! needs. It does not wait for loss to learn the link's rate, so it does not fill a deep router
//! queue (a tbf with 50 ms of queue) the way a loss-based controller must before it backs off.
//!
//! - **Delivery rate**: every run of new data sent is marked with the stream position it ends at
//!   and the delivery state at that moment; when the slowest receiver's arrived position covers
//!   it, the rate sample is the bytes that receiver received since over the longer of the send
//!   and the delivery interval (so neither a burst of reports nor a burst of sends inflates it,
//!   and lost bytes never count). The estimate is the largest
//!   sample of the last [`BW_ROUNDS`] round trips that measured the path. Samples taken while
//!   the publisher had nothing to send (application- or receiver-limited) count only when they
//!   raise it, and rounds of only such samples do not age it: a quiet spell keeps the estimate.
//! - **Round trip**: the smallest time from sending a run to the report that covers it, over the
//!   last [`MIN_RTT_WINDOW_NS`]; when it is that old, the controller keeps half the path in
//!   flight for [`PROBE_RTT_NS`] to see it again.
//! - **Phases**: Startup doubles the rate every round trip until the estimate stops growing by
//!   a quarter for three round trips, Drain empties the queue Startup built, ProbeBw cycles the
//!   gain through 5/4, 3/4 and six rounds of 1 to find more room and give it back.
//! - **Loss**: an epoch (a round trip or more, [`LOSS_EPOCH`] datagrams) that lost more than
//!   [`LOSS_THRESHOLD`] of what it delivered *and* whose fastest report took twice the minimum
//!   round trip (a queue that stands, longer than the
//!   path: not jitter, and more than the window alone can queue) is congestion: the rate is cut to
//!   7/10 of the estimate (and Startup ends). Loss without a growing queue (a noisy link,
//!   injected loss) is not congestion and changes nothing: the repairs are paced like
//!   everything else.
//! - **A standing queue** (fairness): a ProbeBw round whose fastest report still took a quarter,
//!   two pacing quanta and [`QUEUE_SLACK_NS`] more than the minimum round trip means the flows
//!   on the path send more than it carries (BBR's rate estimates of several flows add up to
//!   more than the link, and each is held by its window only). The rate is cut to 75 % of the
//!   estimate; after a cut of either kind it grows back by a datagram per round trip (as the
//!   round trip is now, queue included), the same step for every flow on the path. Flows that see the same queue back off by shares of
//!   their rates and grow by equal steps, so they converge to equal shares, as AIMD does.
//!   (Without it, two flows held 1:3 of a 100 Mbit/s link.)
//! - **Another flow's queue**: a flow that does not react to delay (a Cubic TCP whose window
//!   sits in the queue without a loss, as on a link whose qdisc pushes back on its sender) keeps
//!   its queue whatever ferry does, and a flow that backs off on it starves (ferry kept a quarter
//!   of such a link). When [`FOREIGN_STREAK`] back-offs in a row, and holding the rate they left
//!   for [`FOREIGN_HOLD_NS`], did not drain the queue, it is another flow's: ferry undoes those
//!   back-offs and counts that queue as part of the path (its window and gain cycle hold it), and
//!   may queue as much again before its own queue counts as standing — a flow that keeps a
//!   window queued and ferry then queue about as much each, and share the link about evenly.
//!   The estimate falls with any round whose queue is shorter (the other flow eased or left).
//!   Ferry's own queue drains with its back-offs, and another ferry flow's backs off too, but
//!   not always within the hold: on the lab's links a second ferry flow's Startup queue is now
//!   and then taken for foreign, and the two then share less evenly for a while (RESULTS). A
//!   minimum round trip re-taken with that queue in it keeps the allowance: the path's own round
//!   trip is the smallest of the last 30 s.
//! - **Pacing**: runs of at most a quantum (one millisecond at the pacing rate, between two
//!   datagrams and 64 KiB: also the GSO batch) leave on a schedule; repairs take their turn
//!   on the same schedule.
//! - **Bounds**: every table is fixed-size or capped ([`MAX_MARKS`]); a receiver's report is a
//!   position clamped to what was sent, so a lying receiver can make the sender faster (as
//!   with TCP's acknowledgements) but never make it loop, allocate, or send more than the
//!   user's rate cap.

use std::collections::VecDeque;

/// Round trips (each at least [`BW_SLOT_MIN_NS`]) over which the bottleneck rate is the largest
/// sample.
pub const BW_ROUNDS: usize = 10;
pub const BW_SLOT_MIN_NS: u64 = 2_000_000;
/// The minimum round trip is trusted this long; then the controller probes for it again.
pub const MIN_RTT_WINDOW_NS: u64 = 5_000_000_000;
/// How long ProbeRTT keeps the path drained.
pub const PROBE_RTT_NS: u64 = 200_000_000;
/// At most this many send marks are kept; beyond it the newest mark is extended instead.
pub const MAX_MARKS: usize = 4096;
/// Datagrams delivered, at least, over which loss is judged.
pub const LOSS_EPOCH: u64 = 128;
/// Datagrams lost in one round of Startup, at least, that end it (with the loss above
/// [`LOSS_THRESHOLD`]).
const STARTUP_LOSS_DATAGRAMS: u64 = 4;
/// Loss above this fraction of a round's delivered bytes (with a growing queue) is congestion.
pub const LOSS_THRESHOLD: f64 = 0.02;
/// The pacing rate never falls below this (bytes per second: 1 Mbit/s), so a publisher whose
/// receivers fell silent still probes at a trickle.
pub const MIN_RATE: u64 = 125_000;
/// How late a sender may be and still catch up (see [`Controller::on_sent`]).
pub const PACING_SLACK_NS: u64 = 500_000;
/// A round's smallest round trip this much, a quarter and two pacing quanta (the queue a run
/// makes behind itself) above the minimum is a standing queue.
pub const QUEUE_SLACK_NS: u64 = 500_000;
/// The largest pacing quantum (and GSO run), bytes.
pub const MAX_QUANTUM: u64 = 64 << 10;

const STARTUP_GAIN: f64 = 2.885; // 2 / ln 2: doubles the delivery rate every round trip
const DRAIN_GAIN: f64 = 1.0 / STARTUP_GAIN;
const CWND_GAIN: f64 = 2.0;
const CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// Datagrams in flight before the first round trip is measured, and the first pacing rate is
/// this over [`INITIAL_RTT_NS`].
const INITIAL_WINDOW: u64 = 32;
/// How long the path's own round trip is remembered (see `Controller::base_rtt`).
const BASE_RTT_WINDOW_NS: u64 = 30_000_000_000;
/// Standing-queue back-offs in a row (the rate at 0.75^4, a third) after which the queue that
/// still stands is taken for another flow's.
pub const FOREIGN_STREAK: u32 = 4;
/// How long such a queue must stand before it is taken for another flow's: longer than another
/// ferry flow's Startup queue takes to drain.
pub const FOREIGN_HOLD_NS: u64 = 300_000_000;
/// The largest queue taken for another flow's (a receiver that delays its reports must not
/// open the window without bound).
pub const FOREIGN_QUEUE_MAX_NS: u64 = 1_000_000_000;
const INITIAL_RTT_NS: u64 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

impl Phase {
    #[cfg(any(test, feature = "internals"))]
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Startup => "startup",
            Phase::Drain => "drain",
            Phase::ProbeBw => "probe-bw",
            Phase::ProbeRtt => "probe-rtt",
        }
    }
}

/// What the controller knows and did, for `ferry stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CongestionStats {
    /// Bytes per second the pacer lets out now.
    pub pacing_rate: u64,
    /// The bottleneck rate estimate (bytes per second; 0 before the first sample).
    pub bottleneck_rate: u64,
    /// The minimum round trip seen (ns; 0 before the first sample).
    pub min_rtt_ns: u64,
    /// Bytes allowed in flight now.
    pub window: u64,
    /// Times data waited for the pacer.
    pub paced_waits: u64,
    /// Times data waited because the window was full.
    pub window_waits: u64,
    /// Round trips whose loss was taken as congestion.
    pub congestion_events: u64,
    /// Round trips whose loss was not (no queue grew).
    pub noise_loss_events: u64,
    /// Rounds that ended with a standing queue (each backs the rate off, or takes the queue for
    /// another flow's).
    pub queue_events: u64,
    /// The queue of other flows that ferry's back-offs could not drain, counted as part of the
    /// path (ns; 0: none).
    pub foreign_queue_ns: u64,
    /// Round trips counted.
    pub rounds: u64,
}

#[derive(Debug, Clone)]
pub struct CongestionConfig {
    /// Bytes on the wire per full datagram.
    pub datagram: u64,
    /// The user's cap, bytes per second (`u64::MAX`: none).
    pub rate_cap: u64,
    /// Picks where ProbeBw's gain cycle starts (flows sharing a link should not probe in step).
    pub seed: u64,
}

/// A run of new data sent.
#[derive(Debug, Clone, Copy)]
struct Mark {
    /// Stream position the run ends at.
    end: u64,
    sent_ns: u64,
    /// Delivery state when it was sent.
    delivered: u64,
    delivered_ns: u64,
    /// The reporting receiver's received-bytes count when it was sent.
    received: u64,
    /// Send time of the newest run delivered when this one was sent.
    first_sent_ns: u64,
    app_limited: bool,
}

pub struct Controller {
    cfg: CongestionConfig,
    phase: Phase,
    // The pacer: the next run may start at `next_send_ns`.
    next_send_ns: u64,
    pacing_rate: u64,
    /// Whether a receiver reports (else the pacer runs at the rate cap alone).
    controlled: bool,
    // Delivery.
    marks: VecDeque<Mark>,
    sent: u64,
    delivered: u64,
    delivered_ns: u64,
    /// Payload bytes the reporting receiver (the slowest) received, repairs included: rate
    /// samples are differences of it, so that lost bytes never count as delivered.
    received: u64,
    /// The receiver whose reports drive the controller, and the stream position up to which
    /// runs were sent before it took over (their baselines are another receiver's).
    source: Option<u64>,
    rebase_until: u64,
    last_acked_sent_ns: u64,
    /// Non-zero: samples are application-limited until delivery passes this position.
    app_limited_until: u64,
    // Rounds.
    round: u64,
    round_end: u64,
    round_start_delivered: u64,
    /// Loss is judged over an epoch of at least one round and [`LOSS_EPOCH`] datagrams
    /// delivered (a round of a few datagrams says nothing about a rate of 2 %).
    epoch_delivered: u64,
    epoch_lost: u64,
    epoch_min_rtt: u64,
    /// Loss reported this round (Startup ends on it at once).
    round_lost: u64,
    /// The smallest round trip of this round: at twice the minimum, a queue stands that is
    /// longer than the path (jitter and reordering delay some datagrams, a full queue delays all
    /// of them, and the window alone never queues more than the path holds).
    round_min_rtt: u64,
    // Estimates.
    bw: [u64; BW_ROUNDS],
    /// The slot samples go to, and when it began: a slot holds a round trip and at least
    /// [`BW_SLOT_MIN_NS`], so that on a path of tens of microseconds (loopback, a veth) the
    /// estimate remembers more than half a millisecond of a receiver's hiccups.
    bw_slot: usize,
    bw_slot_ns: u64,
    /// This slot holds a sample of the path (one taken while the publisher had more to send):
    /// only such slots age the estimate, so that a quiet spell keeps what the path carried.
    bw_slot_measured: bool,
    /// This round took a sample of the path: only such a round can show a standing queue (a
    /// trickle's round trips hold the receiver's report delay, not a queue).
    round_measured: bool,
    bw_lo: u64,
    min_rtt: u64,
    min_rtt_stamp: u64,
    /// The queue of other flows (ns above `min_rtt`) that ferry's back-offs could not drain:
    /// a flow that does not react to delay (a TCP whose window sits queued) keeps it whatever
    /// ferry does, and a flow that yields to it starves. The window and the standing-queue limit
    /// count it as part of the path, and ferry may queue as much again.
    foreign_queue: u64,
    /// The smallest round trip of the last [`BASE_RTT_WINDOW_NS`]: the path's own, where
    /// `min_rtt`, re-taken every few seconds, may hold a queue that never drains.
    base_rtt: u64,
    base_rtt_stamp: u64,
    /// Standing-queue back-offs in a row, and the smallest round trip among their rounds.
    backoff_streak: u32,
    streak_min_rtt: u64,
    /// When the streak began, and the rate limit before its back-offs.
    streak_start: u64,
    streak_bw_lo: u64,
    /// Largest time between two reports that advanced delivery, this round and the last.
    ack_gap: [u64; 2],
    // Startup.
    full_bw: u64,
    full_bw_rounds: u32,
    filled: bool,
    // ProbeBw.
    cycle: usize,
    cycle_stamp: u64,
    // ProbeRtt.
    probe_rtt_done: u64,
    stats: CongestionStats,
}

fn rate(bytes: u64, ns: u64) -> u64 {
    (bytes as u128 * 1_000_000_000 / ns.max(1) as u128).min(u64::MAX as u128) as u64
}

fn scale(x: u64, gain: f64) -> u64 {
    (x as f64 * gain).min(u64::MAX as f64) as u64
}

/// Bytes sent in `ns` at `rate` bytes per second.
fn bytes_in(rate: u64, ns: u64) -> u64 {
    (rate as u128 * ns as u128 / 1_000_000_000).min(u64::MAX as u128) as u64
}

/// Nanoseconds `bytes` take at `rate` bytes per second.
fn time_of(bytes: u64, rate: u64) -> u64 {
    (bytes as u128 * 1_000_000_000 / rate.max(1) as u128).min(u64::MAX as u128) as u64
}

impl Controller {
    pub fn new(cfg: CongestionConfig, now: u64) -> Controller {
        let datagram = cfg.datagram.max(1);
        let initial = rate(INITIAL_WINDOW * datagram, INITIAL_RTT_NS);
        let mut c = Controller {
            phase: Phase::Startup,
            next_send_ns: now,
            pacing_rate: 0,
            controlled: true,
            marks: VecDeque::new(),
            sent: 0,
            delivered: 0,
            delivered_ns: now,
            received: 0,
            source: None,
            rebase_until: 0,
            last_acked_sent_ns: now,
            app_limited_until: 0,
            round: 0,
            round_end: 0,
            round_start_delivered: 0,
            epoch_delivered: 0,
            epoch_lost: 0,
            epoch_min_rtt: u64::MAX,
            round_lost: 0,
            round_min_rtt: u64::MAX,
            bw: [0; BW_ROUNDS],
            bw_slot: 0,
            bw_slot_ns: now,
            bw_slot_measured: false,
            round_measured: false,
            bw_lo: u64::MAX,
            min_rtt: 0,
            min_rtt_stamp: now,
            foreign_queue: 0,
            base_rtt: 0,
            base_rtt_stamp: now,
            backoff_streak: 0,
            streak_min_rtt: u64::MAX,
            streak_start: now,
            streak_bw_lo: u64::MAX,
            ack_gap: [0; 2],
            full_bw: 0,
            full_bw_rounds: 0,
            filled: false,
            cycle: 0,
            cycle_stamp: now,
            probe_rtt_done: 0,
            stats: CongestionStats::default(),
            cfg,
        };
        c.pacing_rate = scale(initial, STARTUP_GAIN)
            .max(MIN_RATE)
            .min(c.cfg.rate_cap);
        c.update_stats();
        c
    }

    pub fn stats(&self) -> CongestionStats {
        self.stats
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The bottleneck rate estimate, bytes per second (0 before the first sample).
    pub fn bottleneck_rate(&self) -> u64 {
        self.bw.iter().copied().max().unwrap_or(0).min(self.bw_lo)
    }

    fn min_rtt_or_initial(&self) -> u64 {
        if self.min_rtt == 0 {
            INITIAL_RTT_NS
        } else {
            self.min_rtt
        }
    }

    /// Says whether a receiver reports delivery: without one, the pacer runs at the rate cap
    /// (and the window does not apply).
    pub fn set_controlled(&mut self, controlled: bool) {
        self.controlled = controlled;
    }

    /// Bytes per second the pacer lets out.
    pub fn rate(&self) -> u64 {
        if self.controlled {
            self.pacing_rate
        } else {
            self.cfg.rate_cap
        }
    }

    /// Bytes one run may carry: a millisecond at the pacing rate, two datagrams to 64 KiB.
    pub fn quantum(&self) -> u64 {
        bytes_in(self.rate(), 1_000_000).clamp(
            2 * self.cfg.datagram,
            MAX_QUANTUM.max(2 * self.cfg.datagram),
        )
    }

    /// The time a full datagram takes at the pacing rate (ns).
    pub fn datagram_ns(&self) -> u64 {
        time_of(self.cfg.datagram, self.rate())
    }

    /// The time a quantum takes at the pacing rate (ns).
    pub fn quantum_ns(&self) -> u64 {
        time_of(self.quantum(), self.rate())
    }

    fn bdp(&self) -> u64 {
        bytes_in(self.bottleneck_rate(), self.path_rtt())
    }

    /// The round trip the path has for this flow: the minimum, and the queue other flows keep
    /// standing in front of it.
    fn path_rtt(&self) -> u64 {
        self.min_rtt_or_initial() + self.foreign_queue
    }

    /// Other flows' queue that ferry may match: what it could not drain, and what the
    /// minimum round trip holds above the path's own.
    fn others_queue(&self) -> u64 {
        (self.foreign_queue + self.min_rtt.saturating_sub(self.base_rtt)).min(FOREIGN_QUEUE_MAX_NS)
    }

    /// Bytes of new data allowed in flight.
    pub fn window(&self) -> u64 {
        let floor = 4 * self.cfg.datagram;
        if self.phase == Phase::ProbeRtt {
            // Half the path: the queue drains, and the flow keeps most of its share.
            return (self.bdp() / 2).max(floor);
        }
        if self.bottleneck_rate() == 0 {
            return (INITIAL_WINDOW * self.cfg.datagram).max(2 * self.quantum());
        }
        // Reports come in bunches (a receiver answers every few datagrams, and its
        // application may be late): what arrives between two reports must fit too, up to a
        // round trip or a millisecond (a receiver silent for longer must not open the window).
        let gap = self.ack_gap[0]
            .max(self.ack_gap[1])
            .min(self.path_rtt().max(1_000_000));
        let aggregation = bytes_in(self.bottleneck_rate(), gap);
        scale(self.bdp(), CWND_GAIN)
            .saturating_add(2 * aggregation)
            .saturating_add(2 * self.quantum())
            .max(floor)
    }

    /// Bytes in flight: new data sent beyond what every receiver holds.
    pub fn in_flight(&self) -> u64 {
        self.sent.saturating_sub(self.delivered)
    }

    /// When the next run may leave (ns); at or before `now`: at once.
    pub fn next_send_ns(&self) -> u64 {
        self.next_send_ns
    }

    /// Bytes that may leave now (0: wait for [`next_send_ns`](Self::next_send_ns)). `window`:
    /// whether the in-flight limit applies (not for repairs, and not without a receiver that
    /// reports).
    pub fn allowance(&mut self, now: u64, window: bool) -> u64 {
        if now < self.next_send_ns {
            self.stats.paced_waits += 1;
            return 0;
        }
        let mut allow = self.quantum();
        if window {
            let room = self.window().saturating_sub(self.in_flight());
            if room == 0 {
                self.stats.window_waits += 1;
            }
            allow = allow.min(room);
        }
        allow
    }

    /// `bytes` (on the wire) left at `now`: the next run waits the time they take at the
    /// pacing rate. A sender that was late by up to a quantum or [`PACING_SLACK_NS`] catches up
    /// (a thread that was descheduled for a moment loses nothing); later than that, the time
    /// is gone (no burst makes up for idleness).
    pub fn on_sent(&mut self, now: u64, bytes: u64) {
        let slack = self.quantum_ns().max(PACING_SLACK_NS);
        let start = self.next_send_ns.max(now.saturating_sub(slack));
        self.next_send_ns = start.saturating_add(time_of(bytes, self.rate()));
    }

    /// New data up to stream position `end` left at `now` (after [`on_sent`](Self::on_sent)).
    pub fn on_data(&mut self, now: u64, end: u64) {
        if end <= self.sent {
            return;
        }
        if self.in_flight() == 0 {
            // Idle restart: the delivery interval starts now, not at the last report.
            self.delivered_ns = now;
            self.last_acked_sent_ns = now;
        }
        self.sent = end;
        let mark = Mark {
            end,
            sent_ns: now,
            delivered: self.delivered,
            delivered_ns: self.delivered_ns,
            received: self.received,
            first_sent_ns: self.last_acked_sent_ns,
            app_limited: self.app_limited_until != 0,
        };
        if self.marks.len() >= MAX_MARKS {
            // The newest run grows instead (a coarser sample, never an unbounded table).
            if let Some(last) = self.marks.back_mut() {
                last.end = end;
            }
        } else {
            self.marks.push_back(mark);
        }
    }

    /// The publisher ran out of data to send (the application is slower than the path) or of
    /// credit (a receiver's window): samples of what is in flight now cannot show the path's
    /// rate, so they count only when they raise the estimate.
    pub fn on_limited(&mut self) {
        self.app_limited_until = self.sent.max(1);
    }

    /// `bytes` of new data were reported lost (a NAK's first ask for them).
    pub fn on_loss(&mut self, bytes: u64) {
        self.epoch_lost = self.epoch_lost.saturating_add(bytes);
        self.round_lost = self.round_lost.saturating_add(bytes);
    }

    /// No receiver reports (none is known): the stream up to `pos` went out unwatched, and
    /// delivery starts over from there when one appears.
    pub fn unwatched(&mut self, now: u64, pos: u64) {
        self.sent = self.sent.max(pos);
        self.delivered = self.sent;
        self.delivered_ns = now;
        self.last_acked_sent_ns = now;
        self.marks.clear();
        self.source = None;
        self.ack_gap = [0; 2];
    }

    /// The receivers changed (one left, or none is left): delivery moves to `pos` without a
    /// rate sample (the jump is not the path's speed).
    pub fn skip_to(&mut self, pos: u64) {
        let pos = pos.min(self.sent);
        if pos <= self.delivered {
            return;
        }
        self.delivered = pos;
        while self.marks.front().is_some_and(|m| m.end <= pos) {
            self.marks.pop_front();
        }
    }

    /// The slowest receiver that paces the sender, `source`, reported at `now` that data
    /// arrived up to stream position `pos` (holes or not) and that it received `received` payload bytes.
    pub fn on_delivered(&mut self, now: u64, source: u64, pos: u64, received: u64) {
        if self.source != Some(source) {
            self.source = Some(source);
            self.received = received;
            self.rebase_until = self.sent;
        } else {
            self.received = self.received.max(received);
        }
        let pos = pos.min(self.sent);
        if pos <= self.delivered {
            return;
        }
        let gap = now.saturating_sub(self.delivered_ns);
        self.ack_gap[0] = self.ack_gap[0].max(gap);
        self.delivered = pos;
        self.delivered_ns = now;
        if self.app_limited_until != 0 && pos > self.app_limited_until {
            self.app_limited_until = 0;
        }
        // The newest run the report covers gives the sample.
        let mut newest = None;
        while let Some(m) = self.marks.front() {
            if m.end > pos {
                break;
            }
            newest = self.marks.pop_front();
        }
        let Some(m) = newest else {
            return;
        };
        self.last_acked_sent_ns = m.sent_ns;
        let rtt = now.saturating_sub(m.sent_ns).max(1);
        self.round_min_rtt = self.round_min_rtt.min(rtt);
        // An expired minimum takes the sample whatever it is (and the path is drained to
        // see the true one again).
        let expired =
            self.min_rtt != 0 && now.saturating_sub(self.min_rtt_stamp) > MIN_RTT_WINDOW_NS;
        if self.base_rtt == 0
            || rtt <= self.base_rtt
            || now.saturating_sub(self.base_rtt_stamp) > BASE_RTT_WINDOW_NS
        {
            self.base_rtt = rtt;
            self.base_rtt_stamp = now;
        }
        if self.min_rtt == 0 || rtt <= self.min_rtt || expired {
            // A minimum re-taken higher may hold the foreign queue: what it holds is the
            // minimum's now (`others_queue` counts both).
            if self.min_rtt != 0 && rtt > self.min_rtt {
                self.foreign_queue = (self.min_rtt + self.foreign_queue).saturating_sub(rtt);
            }
            self.min_rtt = rtt;
            self.min_rtt_stamp = now;
            if expired && self.phase != Phase::ProbeRtt {
                self.enter_probe_rtt();
            }
        }
        // Round trips: one ends when a run sent after the last round began is delivered.
        let new_round = m.delivered >= self.round_end;
        if new_round {
            self.end_round(now);
            self.round_end = self.delivered;
        }
        let interval = now
            .saturating_sub(m.delivered_ns)
            .max(m.sent_ns.saturating_sub(m.first_sent_ns));
        if interval > 0 && m.end > self.rebase_until {
            let sample = rate(self.received.saturating_sub(m.received), interval);
            let slot = self.bw_slot;
            if !m.app_limited || sample > self.bottleneck_rate() {
                self.bw[slot] = self.bw[slot].max(sample);
                self.bw_slot_measured |= !m.app_limited;
            }
            self.round_measured |= !m.app_limited;
        }
        if new_round {
            self.check_full_pipe(m.app_limited);
        }
        self.advance_phase(now);
        self.set_pacing_rate();
    }

    fn end_round(&mut self, now: u64) {
        let round_delivered = self.delivered.saturating_sub(self.round_start_delivered);
        if self.phase == Phase::Startup
            && self.round_lost >= STARTUP_LOSS_DATAGRAMS * self.cfg.datagram
            && self.round_lost as f64 > LOSS_THRESHOLD * round_delivered as f64
        {
            // Startup sends at nearly three times what arrives: loss now is its own queue
            // overflowing, and waiting for an epoch would lose a queue's worth more.
            self.filled = true;
            self.stats.congestion_events += 1;
        }
        self.round_lost = 0;
        self.epoch_delivered += round_delivered;
        self.epoch_min_rtt = self.epoch_min_rtt.min(self.round_min_rtt);
        let judged = self.epoch_delivered >= LOSS_EPOCH * self.cfg.datagram;
        let lossy = judged && self.epoch_lost as f64 > LOSS_THRESHOLD * self.epoch_delivered as f64;
        let queued = self.min_rtt != 0
            && self.epoch_min_rtt != u64::MAX
            && self.epoch_min_rtt > 2 * self.min_rtt;
        if judged {
            self.epoch_delivered = 0;
            self.epoch_lost = 0;
            self.epoch_min_rtt = u64::MAX;
        }
        let congested = lossy && queued;
        if congested {
            self.stats.congestion_events += 1;
            let bw = self.bw.iter().copied().max().unwrap_or(0);
            self.bw_lo = scale(bw.min(self.bw_lo), 0.7).max(MIN_RATE);
            if self.phase == Phase::Startup {
                self.filled = true;
            }
        } else if lossy {
            self.stats.noise_loss_events += 1;
        }
        // A queue that stood a whole round in ProbeBw: the flows sharing the path send more
        // than it carries. Each backs off by a share of its rate and grows back by the same
        // amount per round for all (a datagram per round trip): flows that see the same queue
        // converge to equal shares, as AIMD does.
        let measured = self.round_measured && self.min_rtt != 0 && self.round_min_rtt != u64::MAX;
        if measured && self.round_min_rtt < self.path_rtt() {
            // Less queue than the others kept: they keep less now (or left).
            self.foreign_queue = self.round_min_rtt.saturating_sub(self.min_rtt);
        }
        let standing = self.phase == Phase::ProbeBw
            && measured
            && self.round_min_rtt
                > self.path_rtt()
                    + self.others_queue()
                    + self.min_rtt / 4
                    + QUEUE_SLACK_NS
                    + 2 * self.quantum_ns();
        let bw_max = self.bw.iter().copied().max().unwrap_or(0);
        if standing {
            if self.backoff_streak == 0 {
                self.streak_start = now;
                self.streak_bw_lo = self.bw_lo;
            }
            self.backoff_streak += 1;
            self.streak_min_rtt = self.streak_min_rtt.min(self.round_min_rtt);
        } else if measured {
            self.backoff_streak = 0;
            self.streak_min_rtt = u64::MAX;
        }
        if congested {
            // Cut for the loss above.
        } else if standing
            && self.backoff_streak > FOREIGN_STREAK
            && now.saturating_sub(self.streak_start) >= FOREIGN_HOLD_NS
        {
            // Back-offs that took ferry's rate to a third did not drain the queue, nor did
            // holding that rate: it is another flow's. Ferry counts it as the path's and undoes
            // those back-offs.
            self.stats.queue_events += 1;
            self.foreign_queue = self
                .streak_min_rtt
                .saturating_sub(self.min_rtt)
                .min(FOREIGN_QUEUE_MAX_NS);
            self.backoff_streak = 0;
            self.streak_min_rtt = u64::MAX;
            self.bw_lo = self.streak_bw_lo;
        } else if standing && self.backoff_streak > FOREIGN_STREAK {
            // Held: the queue is drained by now if it is ferry's.
        } else if standing {
            self.stats.queue_events += 1;
            self.bw_lo = scale(bw_max.min(self.bw_lo), 0.75).max(MIN_RATE);
        } else if self.bw_lo != u64::MAX {
            // A datagram per round trip as it is now, queue included (as Reno's window grows),
            // not per the path's minimum: on a short path behind a long queue that would
            // restore the whole rate in a round and undo the back-off.
            let round_trip = match self.round_min_rtt {
                u64::MAX => self.min_rtt_or_initial(),
                r => r.max(self.min_rtt),
            };
            let step = rate(self.cfg.datagram, round_trip);
            self.bw_lo = self.bw_lo.saturating_add(step);
            if self.bw_lo >= bw_max {
                self.bw_lo = u64::MAX;
            }
        }
        self.round += 1;
        self.stats.rounds = self.round;
        // Only rounds that measured the path age the maximum (BBR's filter is not updated
        // while application-limited either): rounds of a trickle say nothing of what the path
        // carries, and the next large message must leave at the path's rate, not the trickle's.
        if self.bw_slot_measured && now.saturating_sub(self.bw_slot_ns) >= BW_SLOT_MIN_NS {
            self.bw_slot = (self.bw_slot + 1) % BW_ROUNDS;
            self.bw[self.bw_slot] = 0;
            self.bw_slot_ns = now;
            self.bw_slot_measured = false;
        }
        self.ack_gap = [0, self.ack_gap[0]];
        self.round_start_delivered = self.delivered;
        self.round_min_rtt = u64::MAX;
        self.round_measured = false;
    }

    fn check_full_pipe(&mut self, app_limited: bool) {
        if self.filled || app_limited {
            return;
        }
        let bw = self.bottleneck_rate();
        if bw >= self.full_bw.saturating_add(self.full_bw / 4) {
            self.full_bw = bw;
            self.full_bw_rounds = 0;
            return;
        }
        self.full_bw_rounds += 1;
        if self.full_bw_rounds >= 3 {
            self.filled = true;
        }
    }

    fn enter_probe_rtt(&mut self) {
        self.phase = Phase::ProbeRtt;
        self.probe_rtt_done = 0;
    }

    fn advance_phase(&mut self, now: u64) {
        let bdp = self.bdp();
        match self.phase {
            Phase::Startup if self.filled => self.phase = Phase::Drain,
            Phase::Drain if self.in_flight() <= bdp => self.enter_probe_bw(now),
            Phase::ProbeBw => {
                let gain = CYCLE[self.cycle];
                let elapsed = now.saturating_sub(self.cycle_stamp) > self.path_rtt();
                let next = if gain > 1.0 {
                    elapsed && self.in_flight() >= scale(bdp, gain)
                        || now.saturating_sub(self.cycle_stamp) > 2 * self.path_rtt()
                } else if gain < 1.0 {
                    elapsed || self.in_flight() <= bdp
                } else {
                    elapsed
                };
                if next {
                    self.cycle = (self.cycle + 1) % CYCLE.len();
                    self.cycle_stamp = now;
                }
            }
            Phase::ProbeRtt => {
                if self.probe_rtt_done == 0 {
                    if self.in_flight() <= self.window() {
                        self.probe_rtt_done = now.saturating_add(PROBE_RTT_NS).max(1);
                    }
                } else if now >= self.probe_rtt_done {
                    self.min_rtt_stamp = now;
                    if self.filled {
                        self.enter_probe_bw(now);
                    } else {
                        self.phase = Phase::Startup;
                    }
                }
            }
            _ => {}
        }
    }

    fn enter_probe_bw(&mut self, now: u64) {
        self.phase = Phase::ProbeBw;
        // Any phase but the 3/4 one, picked by the seed.
        let start = (self.cfg.seed % (CYCLE.len() as u64 - 1)) as usize;
        self.cycle = if start >= 1 { start + 1 } else { start };
        self.cycle_stamp = now;
    }

    /// The timers: ProbeRTT ends without a report.
    pub fn tick(&mut self, now: u64) {
        if self.phase == Phase::ProbeRtt {
            self.advance_phase(now);
            self.set_pacing_rate();
        }
    }

    fn set_pacing_rate(&mut self) {
        let bw = self.bottleneck_rate();
        let gain = match self.phase {
            Phase::Startup => STARTUP_GAIN,
            Phase::Drain => DRAIN_GAIN,
            Phase::ProbeBw => CYCLE[self.cycle],
            Phase::ProbeRtt => 1.0,
        };
        if bw == 0 {
            // No sample yet: the initial rate stands.
            self.update_stats();
            return;
        }
        let target = scale(bw, gain).max(MIN_RATE).min(self.cfg.rate_cap);
        // Startup only ever speeds up (a sample from a short run must not slow it).
        self.pacing_rate = if self.phase == Phase::Startup && !self.filled {
            target.max(self.pacing_rate)
        } else {
            target
        };
        self.update_stats();
    }

    fn update_stats(&mut self) {
        self.stats.pacing_rate = self.pacing_rate;
        self.stats.bottleneck_rate = self.bottleneck_rate();
        self.stats.min_rtt_ns = self.min_rtt;
        self.stats.foreign_queue_ns = self.foreign_queue;
        self.stats.window = self.window();
    }
}
