//! What the experiment is asked for, what it records and what its processes tell each other:
//! the types and limits every part of it shares (the bottom floor, which imports no other part).

use crate::error::Result;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

crate::choice! {
    /// Which subscribers a run has.
    pub enum Configuration: "configuration" {
        /// The fast subscribers only.
        Alone = "alone",
        /// The fast subscribers and one slow subscriber.
        WithSlow = "with-slow",
    }
}

/// What `ferry lab fanout` is asked to measure.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Bytes per message (at least 8: each message carries its number).
    pub size: usize,
    /// Messages per second the publisher sends, on a fixed schedule.
    pub rate: f64,
    /// Subscribers that read every message as it comes (the slow one comes on top of them).
    pub subscribers: usize,
    /// The slow subscriber reads at `rate / slowdown`: after each message it sleeps
    /// `slowdown` × the publisher's period.
    pub slowdown: f64,
    /// Seconds the publisher sends per run.
    pub seconds: f64,
    /// Rounds, each a run of the fast subscribers alone and one beside the slow subscriber.
    pub rounds: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            size: 8192,
            rate: 5000.0,
            subscribers: 2,
            slowdown: 10.0,
            seconds: 2.0,
            rounds: 3,
        }
    }
}

impl Config {
    /// Messages the publisher sends per run.
    pub(super) fn messages(&self) -> u64 {
        (self.seconds * self.rate).round().max(1.0) as u64
    }

    /// The publisher's period: one message every `1 / rate` seconds.
    pub(super) fn period(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.rate)
    }

    /// What the slow subscriber sleeps after each message.
    pub(super) fn slow_pause(&self) -> Duration {
        self.period().mul_f64(self.slowdown)
    }
}

/// How a fan-out run was made: the configuration, and what follows from it.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    pub(super) size: usize,
    pub(super) rate: f64,
    pub(super) subscribers: usize,
    pub(super) slowdown: f64,
    pub(super) seconds: f64,
    pub(super) rounds: usize,
    /// The publisher's period (1 / rate), in microseconds.
    pub(super) period_us: f64,
    /// What the slow subscriber sleeps after each message (slowdown × period), in microseconds.
    pub(super) slow_pause_us: f64,
    /// Messages the publisher sends per run.
    pub(super) messages: u64,
    /// The endpoints' settings.
    pub(super) qos: String,
    /// After the last message, the fast subscribers read on until this long passes without one.
    pub(super) quiet_ms: u64,
}

impl Setup {
    pub(super) fn of(config: &Config) -> Setup {
        Setup {
            size: config.size,
            rate: config.rate,
            subscribers: config.subscribers,
            slowdown: config.slowdown,
            seconds: config.seconds,
            rounds: config.rounds,
            period_us: config.period().as_secs_f64() * 1e6,
            slow_pause_us: config.slow_pause().as_secs_f64() * 1e6,
            messages: config.messages(),
            qos: format!(
                "UDP, latest delivery, maximum message size {} bytes, the other settings ferry's defaults (publisher and subscribers alike)",
                config.size
            ),
            quiet_ms: u64::try_from(QUIET.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// One run: a round's run of one configuration.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    /// The round (from 1).
    pub round: usize,
    pub configuration: Configuration,
    /// Messages the publisher sent.
    pub sent: u64,
    /// Seconds the sending took (the schedule's `seconds`; more if the publisher fell behind it).
    pub send_seconds: f64,
    /// Messages each fast subscriber received.
    pub fast_received: Vec<u64>,
    /// Messages the slow subscriber received (0 in a run without it).
    pub slow_received: u64,
    /// Messages the publisher left a subscriber out of, one per message and subscriber (its
    /// `left_out` statistic).
    pub left_out: u64,
    /// The fast subscribers' mean share of the messages sent (1 = all of them).
    pub fast_fraction: f64,
}

impl Row {
    pub(super) fn of(
        round: usize,
        configuration: Configuration,
        sent: u64,
        send_seconds: f64,
        counts: Counts,
        left_out: u64,
    ) -> Row {
        let fast_fraction = mean(&counts.fast).map_or(0.0, |m| m / sent.max(1) as f64);
        Row {
            round,
            configuration,
            sent,
            send_seconds,
            fast_received: counts.fast,
            slow_received: counts.slow.unwrap_or(0),
            left_out,
            fast_fraction,
        }
    }
}

/// The experiment (see the module's documentation).
pub struct Fanout;

pub(super) const TOPIC: &str = "fanout";
/// The most fast subscribers (each a thread of the peer process).
pub const MAX_SUBSCRIBERS: usize = 8;
/// How long the peer may take to subscribe, the publisher to see its subscribers, and the peer
/// to finish at the end.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(10);
/// After the last message, a fast subscriber reads on until this long passes without one.
pub(super) const QUIET: Duration = Duration::from_millis(200);
/// The longest a fast subscriber reads on after the last message, whatever comes.
pub(super) const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// The QoS of the publisher and of every subscriber.
pub(super) fn qos(size: usize) -> ferry::Qos {
    ferry::Qos::default()
        .transport(ferry::Transport::Udp)
        .delivery(ferry::Delivery::Latest)
        .max_message_size(size)
}

// ---------------------------------------------------------------------------------------------
// What the two sides say to each other

/// What the main side asks of the peer: `fast` subscribers (and a slow one if `slow_pause_ns`
/// is given) of the topic in `domain`.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerRequest {
    pub(super) domain: String,
    pub(super) size: usize,
    pub(super) fast: usize,
    /// What the slow subscriber sleeps after each message; `None`: no slow subscriber.
    pub(super) slow_pause_ns: Option<u64>,
    /// How long the publisher sends: the peer waits this long and more for the end.
    pub(super) seconds: f64,
}

/// The main side's commands.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Command {
    /// The last message has been sent: read what is left and report the counts.
    Done,
}

/// What the peer reports.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Report {
    /// Every subscriber is made and reading.
    Subscribed,
    Counts(Counts),
}

/// Messages received by each fast subscriber, and by the slow one if there was one.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Counts {
    pub(super) fast: Vec<u64>,
    pub(super) slow: Option<u64>,
}

// ---------------------------------------------------------------------------------------------
// The experiment

/// The mean of `counts`; `None` when empty.
pub(super) fn mean(counts: &[u64]) -> Option<f64> {
    (!counts.is_empty()).then(|| counts.iter().sum::<u64>() as f64 / counts.len() as f64)
}
