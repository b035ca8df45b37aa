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
mod options;
mod run;
mod subscribers;

use crate::chart::{bar_svg, color, Bars, Plot, Section, SummaryLine, W};
use crate::error::{bail, note, Result};
use crate::experiment::{head, Experiment, Measured, Results};
use crate::peer::PeerLink;
use crate::table::Table;
use figures::{format_ratio, median_ratio, over_rounds, pace, rounds, GOAL};
pub use options::*;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

impl Experiment for Fanout {
    head!(
        "fanout",
        "Fan-out: one slow latest subscriber and the others"
    );

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
    // Each round: 5000 messages sent in 1 s, alone and beside the slow subscriber.
    use Configuration::{Alone, WithSlow};
    let rows = [
        (1, Alone, vec![5000, 4990], None, 0),
        (1, WithSlow, vec![4995, 4995], Some(480), 4500),
        (2, Alone, vec![5000, 5000], None, 0),
        (2, WithSlow, vec![4500, 4500], Some(490), 4490),
    ]
    .into_iter()
    .map(|(round, with, fast, slow, left_out)| {
        Row::of(round, with, 5000, 1.0, Counts { fast, slow }, left_out)
    })
    .collect();
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
mod tests;
