//! `ferry hz` and `ferry bw`: a topic's message rate and bandwidth over a window of recent
//! messages, printed once a second, as `ros2 topic hz` and `ros2 topic bw` print them.

use std::time::{Duration, Instant};

use clap::Args;
use ferry_record::window::{BandwidthWindow, RateWindow, BW_WINDOW, HZ_WINDOW};
use serde::Serialize;

use super::{delivery_words, wait_words, TransportOpt, POLL_SLICE};
use ferry_cmd::error::{bail, Result};
use ferry_cmd::signal;
use ferry_cmd::table::print_out;
use ferry_cmd::units::{parse_domain, parse_seconds};

#[derive(Debug, Args)]
pub struct RateArgs {
    /// Topic to watch
    pub topic: String,

    /// Window: intervals for hz [default: 10000], messages for bw [default: 100]
    #[arg(short, long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub window: Option<u64>,

    /// Print one JSON object per report instead of text
    #[arg(long)]
    pub json: bool,

    /// Stop after N messages (printing a last report) [default: until Ctrl-C]
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,

    /// Fail when no message arrives for S seconds [default: wait forever]
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub timeout: Option<Duration>,

    #[command(flatten)]
    pub transport: TransportOpt,

    /// latest never holds a publisher back; reliable may
    #[arg(long, value_parser = delivery_words(), default_value_t = ferry::Delivery::Latest)]
    pub delivery: ferry::Delivery,

    /// How to wait for messages
    #[arg(long, value_parser = wait_words(), default_value_t = ferry::WaitStrategy::Block)]
    pub wait: ferry::WaitStrategy,

    /// Domain: only topics of one domain see each other [default: $FERRY_DOMAIN, else "default"]
    #[arg(long, value_name = "D", value_parser = parse_domain)]
    pub domain: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    Hz,
    Bw,
}

#[derive(Serialize)]
struct HzLine {
    rate_hz: f64,
    min_s: f64,
    max_s: f64,
    std_dev_s: f64,
    window: usize,
}

#[derive(Serialize)]
struct BwLine {
    bytes_per_s: f64,
    messages: usize,
    mean_size: f64,
    min_size: u64,
    max_size: u64,
}

/// How often a report is printed (while messages arrive).
const EVERY: Duration = Duration::from_secs(1);

pub fn run(args: RateArgs, measure: Measure) -> Result<()> {
    let (node, mut subscriber) = super::subscriber(
        "ferry-rate",
        args.domain.as_deref(),
        &args.topic,
        // The largest message as every subscriber's default (a publisher of this host is told).
        &super::subscriber_qos(
            args.transport,
            args.delivery,
            args.wait,
            ferry::Qos::default().max_message_size,
        ),
    )?;
    let window = args.window.map(|w| w as usize);
    let mut hz = RateWindow::new(window.unwrap_or(HZ_WINDOW));
    let mut bw = BandwidthWindow::new(window.unwrap_or(BW_WINDOW));
    let origin = Instant::now();
    let ns = |t: Instant| u64::try_from(t.duration_since(origin).as_nanos()).unwrap_or(u64::MAX);
    let (mut received, mut fresh) = (0u64, false);
    let mut last = Instant::now();
    let mut next_report = Instant::now() + EVERY;
    loop {
        if signal::interrupted() || args.count.is_some_and(|c| received >= c) {
            break;
        }
        let mut slice = next_report
            .saturating_duration_since(Instant::now())
            .min(POLL_SLICE);
        if let Some(t) = args.timeout {
            slice = slice.min(t.saturating_sub(last.elapsed()));
        }
        match subscriber.recv_timeout(slice)? {
            Some(sample) => {
                let now = Instant::now();
                hz.push(ns(now));
                bw.push(ns(now), sample.len() as u64);
                received += 1;
                fresh = true;
                last = now;
            }
            None => {
                if let Some(t) = args.timeout {
                    if last.elapsed() >= t {
                        bail!(
                            "no message on topic {:?} (domain {}) for {t:?}; received {received}",
                            args.topic,
                            node.domain()
                        );
                    }
                }
            }
        }
        if Instant::now() >= next_report {
            next_report += EVERY;
            // As ros2 does: a report only when something arrived since the last one.
            if fresh && !report(measure, &hz, &bw, ns(Instant::now()), args.json)? {
                return Ok(());
            }
            fresh = false;
        }
    }
    if fresh {
        report(measure, &hz, &bw, ns(Instant::now()), args.json)?;
    }
    Ok(())
}

/// Prints a report; false when the reader of our output went away.
fn report(
    measure: Measure,
    hz: &RateWindow,
    bw: &BandwidthWindow,
    now_ns: u64,
    json: bool,
) -> Result<bool> {
    let text = match measure {
        Measure::Hz => match hz.stats() {
            None => return Ok(true),
            Some(s) if json => serde_json::to_string(&HzLine {
                rate_hz: s.rate_hz,
                min_s: s.min_s,
                max_s: s.max_s,
                std_dev_s: s.std_dev_s,
                window: s.window,
            })?,
            Some(s) => s.to_text(),
        },
        Measure::Bw => match bw.stats(now_ns) {
            None => return Ok(true),
            Some(s) if json => serde_json::to_string(&BwLine {
                bytes_per_s: s.bytes_per_s,
                messages: s.messages,
                mean_size: s.mean_size,
                min_size: s.min_size,
                max_size: s.max_size,
            })?,
            Some(s) => s.to_text(),
        },
    };
    print_out(&format!("{text}\n"))
}
