//! `ferry lab fanout`: whether one slow *latest* subscriber slows delivery to the other
//! subscribers of a UDP publisher. A latest UDP publisher leaves a subscriber that has fallen
//! behind out of the messages it cannot take yet (counted as `left_out` in the publisher's
//! statistics) instead of slowing down for it, so the others should get what they get alone.
//!
//! Each round makes two runs, one after the other: `alone` (the fast subscribers only) and
//! `with-slow` (the same plus one subscriber that sleeps `slowdown` × the publisher's period after
//! each message, so that it reads at `rate / slowdown`). The publisher, in the lab's main process
//! (`run`), sends `size`-byte messages on a fixed schedule for `seconds`; the subscribers, one
//! thread each, run in the experiment's peer process (`subscribers`) and report how many
//! messages each received. Every run has a domain of its own, so runs never see each other. The
//! goal: beside the slow subscriber, the others get at least 0.9 × what they get alone.

mod figures;
mod run;
mod subscribers;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::chart::{bar_svg, color, Bars, Plot, Section, SummaryLine, W};
use crate::error::{bail, note, Result};
use crate::experiment::{Experiment, Measured, Results};
use crate::peer::PeerLink;
use crate::table::Table;
use figures::{format_ratio, median_ratio, over_rounds, pace, rounds, GOAL};

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
    fn messages(&self) -> u64 {
        (self.seconds * self.rate).round().max(1.0) as u64
    }

    /// The publisher's period: one message every `1 / rate` seconds.
    fn period(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.rate)
    }

    /// What the slow subscriber sleeps after each message.
    fn slow_pause(&self) -> Duration {
        self.period().mul_f64(self.slowdown)
    }
}

/// How a fan-out run was made: the configuration, and what follows from it.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    size: usize,
    rate: f64,
    subscribers: usize,
    slowdown: f64,
    seconds: f64,
    rounds: usize,
    /// The publisher's period (1 / rate), in microseconds.
    period_us: f64,
    /// What the slow subscriber sleeps after each message (slowdown × period), in microseconds.
    slow_pause_us: f64,
    /// Messages the publisher sends per run.
    messages: u64,
    /// The endpoints' settings.
    qos: String,
    /// After the last message, the fast subscribers read on until this long passes without one.
    quiet_ms: u64,
}

impl Setup {
    fn of(config: &Config) -> Setup {
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
    fn of(
        round: usize,
        configuration: Configuration,
        sent: u64,
        send_seconds: f64,
        counts: Counts,
        left_out: u64,
    ) -> Row {
        let fast_fraction = figures::mean(&counts.fast).map_or(0.0, |m| m / sent.max(1) as f64);
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

const TOPIC: &str = "fanout";
/// The most fast subscribers (each a thread of the peer process).
pub const MAX_SUBSCRIBERS: usize = 8;
/// How long the peer may take to subscribe, the publisher to see its subscribers, and the peer
/// to finish at the end.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// After the last message, a fast subscriber reads on until this long passes without one.
const QUIET: Duration = Duration::from_millis(200);
/// The longest a fast subscriber reads on after the last message, whatever comes.
const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// The QoS of the publisher and of every subscriber.
fn qos(size: usize) -> ferry::Qos {
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
    domain: String,
    size: usize,
    fast: usize,
    /// What the slow subscriber sleeps after each message; `None`: no slow subscriber.
    slow_pause_ns: Option<u64>,
    /// How long the publisher sends: the peer waits this long and more for the end.
    seconds: f64,
}

/// The main side's commands.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Command {
    /// The last message has been sent: read what is left and report the counts.
    Done,
}

/// What the peer reports.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Report {
    /// Every subscriber is made and reading.
    Subscribed,
    Counts(Counts),
}

/// Messages received by each fast subscriber, and by the slow one if there was one.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Counts {
    fast: Vec<u64>,
    slow: Option<u64>,
}

// ---------------------------------------------------------------------------------------------
// The experiment

impl Experiment for Fanout {
    const NAME: &'static str = "fanout";
    const TITLE: &'static str = "Fan-out: one slow latest subscriber and the others";
    type Config = Config;
    type Setup = Setup;
    type Row = Row;
    type PeerRequest = PeerRequest;

    fn validate(c: &Config) -> Result<()> {
        if !(8..=16 << 20).contains(&c.size) {
            bail!("--size must be between 8 bytes and 16 MiB (each message carries its number in its first 8 bytes)");
        }
        if !(1.0..=1e6).contains(&c.rate) {
            bail!("--rate must be between 1 and 1000000 messages per second");
        }
        if !(1..=MAX_SUBSCRIBERS).contains(&c.subscribers) {
            bail!("--subscribers must be between 1 and {MAX_SUBSCRIBERS} (the slow subscriber comes on top)");
        }
        if !(1.0..=10_000.0).contains(&c.slowdown) {
            bail!("--slowdown must be between 1 and 10000");
        }
        if !(0.01..=600.0).contains(&c.seconds) {
            bail!("--seconds must be between 0.01 and 600");
        }
        if !(1..=1000).contains(&c.rounds) {
            bail!("--rounds must be between 1 and 1000");
        }
        if c.seconds * c.rate < 1.0 {
            bail!("--seconds × --rate must come to at least one message");
        }
        Ok(())
    }

    fn run(config: &Config) -> Result<Measured<Self>> {
        let mut rows = Vec::new();
        for round in 1..=config.rounds {
            for &configuration in Configuration::ALL {
                note!(
                    "fanout: round {round} of {}, {}",
                    config.rounds,
                    configuration.name()
                );
                rows.push(run::one(config, round, configuration)?);
            }
        }
        Ok(Measured {
            setup: Setup::of(config),
            rows,
        })
    }

    fn run_peer(request: PeerRequest, link: &mut PeerLink) -> Result<()> {
        if link.for_agent() {
            bail!("the fanout experiment runs on one machine");
        }
        if !(1..=MAX_SUBSCRIBERS).contains(&request.fast) || request.size < 8 {
            bail!("a fanout request out of range: {request:?}");
        }
        let readers = subscribers::Readers::start(&request)?;
        link.report(&Report::Subscribed)?;
        // The main side waits for the publisher to see every subscriber, then sends.
        let limit = START_TIMEOUT * 2 + Duration::from_secs_f64(request.seconds);
        let deadline = Instant::now() + limit;
        loop {
            match link.recv::<Command>(Duration::from_millis(50))? {
                Some(Command::Done) => break,
                None => readers.check()?,
            }
            if Instant::now() >= deadline {
                bail!(
                    "the main side did not say that it had sent its last message within {limit:?}"
                );
            }
        }
        let counts = readers.finish()?;
        link.report(&Report::Counts(counts))
    }

    fn table(results: &Results<Self>) -> String {
        let setup = &results.config;
        let mut table = Table::new(&[
            "round",
            ">sent",
            ">alone",
            ">with the slow one",
            ">ratio",
            ">slow one read",
            ">left out",
        ]);
        for r in rounds(&results.rows) {
            let count = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0}"));
            table.row(vec![
                r.round.to_string(),
                r.sent.to_string(),
                count(r.alone),
                count(r.with_slow),
                r.ratio().map_or("-".to_owned(), |x| format!("{x:.3}")),
                r.slow_received.map_or("-".to_owned(), |n| n.to_string()),
                r.left_out.map_or("-".to_owned(), |n| n.to_string()),
            ]);
        }
        let mut out = format!(
            "{} messages of {} bytes at {} msg/s for {} s; what each of {} fast subscribers received (their mean) alone and beside one latest subscriber reading at {}:\n",
            setup.messages,
            setup.size,
            setup.rate,
            setup.seconds,
            setup.subscribers,
            pace(setup.slowdown)
        );
        out.push_str(&table.render());
        let _ = writeln!(
            out,
            "the other subscribers get {} what they get alone (goal ≥ {GOAL}; {})",
            format_ratio(median_ratio(&results.rows)),
            over_rounds(&results.rows)
        );
        out
    }

    fn section(results: &Results<Self>) -> Result<Section> {
        let setup = &results.config;
        let rs = rounds(&results.rows);
        let median = |f: &dyn Fn(&figures::Round) -> Option<f64>| {
            crate::stats::median(rs.iter().filter_map(f).collect())
        };
        let svg = bar_svg(
            &[Bars {
                title: "Messages per fast subscriber, alone and beside one slow subscriber",
                y_desc: "messages received (mean of the fast subscribers)",
                categories: rs.iter().map(|r| format!("round {}", r.round)).collect(),
                series: vec![
                    (
                        "alone".into(),
                        color(0),
                        rs.iter().map(|r| r.alone).collect(),
                    ),
                    (
                        "beside the slow subscriber".into(),
                        color(1),
                        rs.iter().map(|r| r.with_slow).collect(),
                    ),
                ],
                reference: Some(("sent".to_owned(), setup.messages as f64)),
                log_y: false,
            }],
            W,
        )?;
        let count = |v: Option<f64>| v.map_or("no".to_owned(), |v| format!("{v:.0}"));
        Ok(Section {
            plots: vec![Plot {
                file: "fanout.svg".to_owned(),
                svg,
                caption: format!(
                    "Messages each fast subscriber received (their mean) per round, of {} sent; the slow subscriber sleeps {:.0} µs after each message.",
                    setup.messages, setup.slow_pause_us
                ),
            }],
            sentence: format!(
                "A latest UDP publisher sent {} messages of {} bytes at {} msg/s to {} subscribers, alone and beside one more latest subscriber reading at {}. Beside it the others got {} what they got alone ({}; the goal is at least {GOAL}): {} messages each alone, {} beside it. The slow subscriber read {} messages; the publisher left it out of {}.",
                setup.messages,
                setup.size,
                setup.rate,
                setup.subscribers,
                pace(setup.slowdown),
                format_ratio(median_ratio(&results.rows)),
                over_rounds(&results.rows),
                count(median(&|r| r.alone)),
                count(median(&|r| r.with_slow)),
                count(median(&|r| r.slow_received.map(|n| n as f64))),
                count(median(&|r| r.left_out.map(|n| n as f64))),
            ),
        })
    }

    /// One line: what the other subscribers get beside the slow one. No study gives this figure.
    fn summary(results: &Results<Self>) -> Vec<SummaryLine> {
        let Some(ratio) = median_ratio(&results.rows) else {
            return Vec::new();
        };
        vec![SummaryLine {
            what: format!(
                "messages the other subscribers get beside one latest subscriber reading at {}, UDP",
                pace(results.config.slowdown)
            ),
            ferry: format!("{ratio:.2} × what they get alone (goal ≥ {GOAL})"),
            floor: None,
            best_peer: None,
            study: None,
        }]
    }
}

/// Results of a small made-up run, for the report's tests.
#[cfg(test)]
pub(crate) fn example() -> Results<Fanout> {
    let config = Config {
        seconds: 1.0,
        rounds: 2,
        ..Config::default()
    };
    let counts = |fast: Vec<u64>, slow: Option<u64>| Counts { fast, slow };
    let rows = vec![
        Row::of(
            1,
            Configuration::Alone,
            5000,
            1.0,
            counts(vec![5000, 4990], None),
            0,
        ),
        Row::of(
            1,
            Configuration::WithSlow,
            5000,
            1.0,
            counts(vec![4995, 4995], Some(480)),
            4500,
        ),
        Row::of(
            2,
            Configuration::Alone,
            5000,
            1.0,
            counts(vec![5000, 5000], None),
            0,
        ),
        Row::of(
            2,
            Configuration::WithSlow,
            5000,
            1.0,
            counts(vec![4500, 4500], Some(490)),
            4490,
        ),
    ];
    Results::new(
        crate::Machine::probe(),
        config.clone(),
        Measured {
            setup: Setup::of(&config),
            rows,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_results_read_back_and_draw() {
        let results = example();
        let value = serde_json::to_value(&results).unwrap();
        assert_eq!(value["rows"][1]["configuration"], "with-slow");
        assert_eq!(value["rows"][1]["fast_received"][1], 4995);
        assert_eq!(value["rows"][0]["fast_fraction"], 0.999);
        assert_eq!(value["config"]["period_us"], 200.0);
        assert_eq!(value["config"]["slow_pause_us"], 2000.0);
        let back = Results::<Fanout>::from_value(value).unwrap();
        assert_eq!(back.rows.len(), 4);
        // Round 1: 4995 / 4995; round 2: 4500 / 5000; the median of the two.
        let ratio = median_ratio(&back.rows).unwrap();
        assert!((ratio - 0.95).abs() < 1e-9, "{ratio}");

        let table = Fanout::table(&back);
        assert!(table.contains("the other subscribers get 0.95 × what they get alone (goal ≥ 0.9; median of 2 rounds)"), "{table}");
        assert!(table.contains("1/10 of the rate"), "{table}");
        let line = table
            .lines()
            .find(|l| l.starts_with("2 "))
            .expect("round 2's line");
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells, ["2", "5000", "5000", "4500", "0.900", "490", "4490"]);

        let section = Fanout::section(&back).unwrap();
        assert_eq!(section.plots.len(), 1);
        assert_eq!(section.plots[0].file, "fanout.svg");
        assert!(section.plots[0].svg.contains("round 2"));
        assert!(
            section
                .sentence
                .contains("the others got 0.95 × what they got alone"),
            "{}",
            section.sentence
        );
        assert!(
            section.sentence.contains("left it out of 4495"),
            "{}",
            section.sentence
        );

        let summary = Fanout::summary(&back);
        assert_eq!(summary.len(), 1);
        assert_eq!(summary[0].ferry, "0.95 × what they get alone (goal ≥ 0.9)");
        assert!(summary[0].study.is_none());
    }

    #[test]
    fn configurations_are_checked() {
        assert!(Fanout::validate(&Config::default()).is_ok());
        for (bad, option) in [
            (
                Config {
                    size: 7,
                    ..Config::default()
                },
                "--size",
            ),
            (
                Config {
                    rate: 0.0,
                    ..Config::default()
                },
                "--rate",
            ),
            (
                Config {
                    rate: f64::NAN,
                    ..Config::default()
                },
                "--rate",
            ),
            (
                Config {
                    subscribers: 0,
                    ..Config::default()
                },
                "--subscribers",
            ),
            (
                Config {
                    subscribers: MAX_SUBSCRIBERS + 1,
                    ..Config::default()
                },
                "--subscribers",
            ),
            (
                Config {
                    slowdown: 0.5,
                    ..Config::default()
                },
                "--slowdown",
            ),
            (
                Config {
                    seconds: 0.0,
                    ..Config::default()
                },
                "--seconds",
            ),
            (
                Config {
                    rounds: 0,
                    ..Config::default()
                },
                "--rounds",
            ),
            (
                Config {
                    seconds: 0.01,
                    rate: 50.0,
                    ..Config::default()
                },
                "at least one message",
            ),
        ] {
            let e = Fanout::validate(&bad).unwrap_err().to_string();
            assert!(e.contains(option), "{bad:?}: {e}");
        }
        let back: Config = serde_json::from_str("{\"rate\": 500, \"rounds\": 1}").unwrap();
        assert_eq!((back.rate, back.rounds, back.size), (500.0, 1, 8192));
        assert!(serde_json::from_str::<Config>("{\"rates\": 500}").is_err());
        assert_eq!(back.messages(), 1000);
        assert_eq!(
            Config {
                seconds: 0.3,
                rate: 500.0,
                ..Config::default()
            }
            .messages(),
            150
        );
    }

    #[test]
    fn the_two_sides_messages_read_back() {
        let line = serde_json::to_string(&Report::Counts(Counts {
            fast: vec![3, 4],
            slow: None,
        }))
        .unwrap();
        assert!(matches!(
            serde_json::from_str::<Report>(&line).unwrap(),
            Report::Counts(Counts { fast, slow: None }) if fast == [3, 4]
        ));
        let done = serde_json::to_string(&Command::Done).unwrap();
        assert!(matches!(
            serde_json::from_str::<Command>(&done).unwrap(),
            Command::Done
        ));
    }
}
