//! `ferry play`: publishes a recording again with its recorded timing.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use ferry_record::{PlayOptions, Player, Rate};

use super::PublishOpts;
use ferry_cmd::error::{note, Context, Result};
use ferry_cmd::signal;
use ferry_cmd::units::count;

#[derive(Debug, Args)]
pub struct PlayArgs {
    /// The MCAP file to play (ferry's own recordings; other files' messages are sent as the
    /// bytes they hold)
    pub file: PathBuf,

    /// Speed: 1 keeps the recorded timing, 2 twice as fast, 0.5 half as fast, max as fast as
    /// possible
    #[arg(long, value_name = "RATE", default_value = "1", value_parser = parse_play_rate)]
    pub rate: PlayRate,

    /// Start again from the beginning at the end, until Ctrl-C
    #[arg(long = "loop")]
    pub looping: bool,

    /// Play only these topics [default: all]
    #[arg(long, value_name = "TOPIC", num_args = 1.., value_delimiter = ',')]
    pub topics: Option<Vec<String>>,

    #[command(flatten)]
    pub publish: PublishOpts,
}

/// `--rate`: a factor or `max`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlayRate(pub Rate);

fn parse_play_rate(text: &str) -> std::result::Result<PlayRate, String> {
    if text.trim() == "max" {
        return Ok(PlayRate(Rate::Max));
    }
    match text.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && f >= ferry_record::player::MIN_RATE => {
            Ok(PlayRate(Rate::Factor(f)))
        }
        _ => Err(format!(
            "invalid rate {text:?}: expected a speed factor such as 0.5, 1 or 2 (at least \
             0.000001), or max"
        )),
    }
}

/// How long one reliable send waits before the player looks at Ctrl-C again.
const SEND_TIMEOUT: Duration = Duration::from_millis(250);

pub fn run(args: PlayArgs) -> Result<()> {
    let (node, qos) = args.publish.node_and_qos("ferry-play")?;
    let qos = qos.send_timeout(SEND_TIMEOUT);
    let options = PlayOptions {
        rate: args.rate.0,
        looping: args.looping,
        topics: args.topics.clone(),
        ..PlayOptions::default()
    };
    let mut player = Player::new(&node, &qos, &args.file, options)
        .context(format!("cannot play (domain {})", node.domain()))?;
    let scan = player.scan().clone();
    let span = Duration::from_nanos(scan.last_log_time.saturating_sub(scan.first_log_time));
    note!(
        "playing {} messages of {} ({:.3} s recorded) from {} (domain {})",
        scan.messages,
        scan.topics
            .iter()
            .map(|t| format!("{} ×{}", t.topic, t.messages))
            .collect::<Vec<_>>()
            .join(", "),
        span.as_secs_f64(),
        args.file.display(),
        node.domain()
    );
    let attached = args.publish.wait_for_subscribers(
        || player.min_subscribers(),
        |n| format!("not every topic had its subscribers (the fewest: {n})"),
    )?;
    if !attached {
        return Ok(());
    }
    let report = player.play(&mut signal::interrupted)?;
    let mut line = format!(
        "sent {} in {:.3} s",
        count(report.sent, "message", "messages"),
        report.elapsed.as_secs_f64()
    );
    if report.passes > 1 {
        line.push_str(&format!(" ({} passes)", report.passes));
    }
    match report.lateness {
        Some(l) => line.push_str(&format!(
            "; late by p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs; {} of {} more than 1 ms late",
            l.p50_ns as f64 / 1e3,
            l.p99_ns as f64 / 1e3,
            l.max_ns as f64 / 1e3,
            l.over_1ms,
            l.messages
        )),
        None if report.sent > 0 => line.push_str(" (as fast as possible)"),
        None => {}
    }
    if report.stalls > 0 {
        line.push_str(&format!(
            "; held back {} by slow reliable subscribers",
            count(report.stalls, "time", "times")
        ));
    }
    note!("{line}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{parse_play_rate, PlayRate, Rate};

    #[test]
    fn rates() {
        assert_eq!(parse_play_rate("max"), Ok(PlayRate(Rate::Max)));
        assert_eq!(parse_play_rate("0.5"), Ok(PlayRate(Rate::Factor(0.5))));
        assert!(parse_play_rate("0").is_err());
        assert!(parse_play_rate("-1").is_err());
        assert!(parse_play_rate("fast").is_err());
        // So slow that a due time would pass what the clock counts (these panicked).
        assert!(parse_play_rate("1e-20").is_err());
        assert!(parse_play_rate("1e-300").is_err());
        assert_eq!(parse_play_rate("1e-6"), Ok(PlayRate(Rate::Factor(1e-6))));
    }
}
