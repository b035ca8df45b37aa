//! `ferry pub`: publishes messages of a given size at a given rate.

use std::time::{Duration, Instant};

use clap::Args;
use ferry::SendError;

use super::typed::TypeArgs;
use super::{write_numbered, PublishOpts};
use ferry_cmd::error::{bail, note, Context, Result};
use ferry_cmd::signal;
use ferry_cmd::units::{count, format_size, parse_message_size, parse_rate, parse_seconds};

#[derive(Debug, Args)]
pub struct PubArgs {
    /// Topic to publish on (1 to 100 letters, digits and _ - . /)
    pub topic: String,

    /// Message size in bytes, with an optional K, M or G suffix (1K = 1024). A message of 8 bytes or
    /// more starts with its sequence number (u64, little endian); every other byte holds the
    /// sequence number's low byte
    #[arg(long, value_name = "BYTES", default_value = "64", value_parser = parse_message_size)]
    pub size: usize,

    /// Messages per second, on absolute deadlines (a late message does not shift the next);
    /// 0 sends as fast as possible
    #[arg(long, value_name = "HZ", default_value = "10", value_parser = parse_rate)]
    pub rate: f64,

    /// Stop after N messages [default: until Ctrl-C]
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,

    /// Before exiting, wait up to S seconds for every reliable subscriber to take what was sent
    /// (over UDP a message is still on its way when sent); exit non-zero if one has not
    #[arg(long, value_name = "S", default_value = "30", value_parser = parse_seconds)]
    pub flush_timeout: Duration,

    /// After the last message, stay S seconds (until Ctrl-C), so that subscribers that start
    /// meanwhile get what --history kept
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub keep_alive: Option<Duration>,

    #[command(flatten)]
    pub publish: PublishOpts,

    #[command(flatten)]
    pub typed: TypeArgs,

    /// Publish this message, written as YAML (e.g. '{header: {frame_id: imu}}'; a field not
    /// given is zero), encoded by the topic's type (--type and --schema, or the type the topic
    /// has); replaces --size
    #[arg(long, value_name = "TEXT", conflicts_with = "json")]
    pub yaml: Option<String>,

    /// As --yaml, written as JSON
    #[arg(long, value_name = "TEXT")]
    pub json: Option<String>,
}

/// The message of `--yaml` or `--json`, encoded by the declared type, or else by the type the
/// topic has; `None` without either option (then messages are `--size` bytes of a pattern).
fn encoded_message(
    args: &PubArgs,
    node: &ferry::Node,
    declared: Option<&ferry::TopicType>,
) -> Result<Option<Vec<u8>>> {
    let value = match (&args.yaml, &args.json) {
        (Some(y), _) => ferry_types::text::parse_yaml(y)?,
        (None, Some(j)) => ferry_types::text::parse_json(j)?,
        (None, None) => return Ok(None),
    };
    let found;
    let t = match declared {
        Some(t) => t,
        None => {
            found = ferry::admin::topic(node.domain(), &args.topic)?
                .and_then(|s| s.topic_type.ok().flatten());
            match &found {
                Some(t) => t,
                None => bail!(
                    "topic {:?} has no type to encode --yaml or --json by: declare one with \
                     --type NAME --schema FILE",
                    args.topic
                ),
            }
        }
    };
    let codec = ferry_types::Codec::new(t).context(format!("the type {t}"))?;
    Ok(Some(codec.encode(&value)?))
}

/// How long one reliable send may wait before the command looks at Ctrl-C and tries again. It
/// also bounds how long a UDP publisher lingers when closed for reliable subscribers to catch up,
/// so a stop by Ctrl-C or SIGTERM takes at most about twice this, whatever subscribers do.
const SEND_TIMEOUT: Duration = Duration::from_millis(250);

/// Who holds a send back, for the stall note: the subscribers the publisher names (three at
/// most), or "a reliable subscriber" when it names none.
fn holders(named: &[String]) -> String {
    match named {
        [] => "a reliable subscriber".to_owned(),
        [one] => format!("a reliable subscriber ({one})"),
        _ if named.len() <= 3 => format!("reliable subscribers ({})", named.join("; ")),
        _ => format!(
            "reliable subscribers ({}; and {} more)",
            named[..3].join("; "),
            named.len() - 3
        ),
    }
}

/// A stall is reported once it has lasted this long, and again every time as long again.
const STALL_NOTE_EVERY: Duration = Duration::from_secs(1);

pub fn run(args: PubArgs) -> Result<()> {
    let (node, mut qos) = args.publish.node_and_qos("ferry-pub")?;
    qos.topic_type = args.typed.topic_type()?;
    let message = encoded_message(&args, &node, qos.topic_type.as_ref())?;
    let size = message.as_ref().map_or(args.size, Vec::len);
    let qos = qos.max_message_size(size.max(1)).send_timeout(SEND_TIMEOUT);
    let mut publisher = node.publisher(&args.topic, &qos).context(format!(
        "cannot publish on topic {} in domain {}",
        ferry::quoted_name(&args.topic),
        node.domain()
    ))?;

    let attached = args.publish.wait_for_subscribers(
        || publisher.subscriber_count(),
        |n| format!("only {n} subscribers attached to topic {:?}", args.topic),
    )?;
    if !attached {
        return Ok(());
    }

    let pace = if args.rate > 0.0 {
        format!("{} messages/s", args.rate)
    } else {
        "as fast as possible".to_owned()
    };
    note!(
        "publishing {} messages on {:?} (domain {}) {pace}{}",
        format_size(size),
        args.topic,
        node.domain(),
        args.count
            .map_or(String::new(), |c| format!(", {c} in all"))
    );

    let start = Instant::now();
    let mut sent = 0u64;
    let mut stalls = 0u64;
    // How long the current stall has lasted (consecutive timeouts), and when it was last told.
    let mut stalled = Duration::ZERO;
    let mut told = Duration::ZERO;
    while args.count.map_or(true, |c| sent < c) && !signal::interrupted() {
        if args.rate > 0.0 {
            // Absolute deadlines: message k is due at start + k / rate.
            let due = start + Duration::from_secs_f64(sent as f64 / args.rate);
            if !sleep_until(due) {
                break;
            }
        }
        // Under shared memory a reliable subscriber that is behind holds the loan back; under
        // UDP it holds the send back, but a send that times out still goes out, in order, as
        // the subscriber makes room: it counts as sent.
        let outcome = publisher.loan(size).and_then(|mut loan| {
            match &message {
                Some(m) => loan.as_mut_slice().copy_from_slice(m),
                None => write_numbered(loan.as_mut_slice(), sent),
            }
            sent += 1;
            loan.send()
        });
        match outcome {
            Ok(()) => {
                stalled = Duration::ZERO;
                told = Duration::ZERO;
            }
            Err(SendError::Timeout(waited)) => {
                if stalled.is_zero() {
                    stalls += 1;
                }
                stalled += waited;
                if stalled >= told + STALL_NOTE_EVERY {
                    told = stalled;
                    note!(
                        "ferry pub: {} has made no room for {:.1} s; still waiting (nothing is \
                         lost)",
                        holders(&publisher.holding_back(size)),
                        stalled.as_secs_f64()
                    );
                }
            }
            Err(SendError::SubscriberLimit {
                len,
                max,
                subscriber,
            }) => bail!(
                "a message of {} is larger than a reliable subscriber takes ({subscriber}: at \
                 most {}; `ferry echo` takes more with --max-size), which would refuse it: \
                 nothing was sent past it",
                format_size(len),
                format_size(max)
            ),
            Err(e) => return Err(e.into()),
        }
    }

    let elapsed = start.elapsed().as_secs_f64();
    let stalled = if stalls > 0 {
        format!(
            "; stalled {} on slow subscribers",
            count(stalls, "time", "times")
        )
    } else {
        String::new()
    };
    // The deadline's count, where one was set (`--deadline`).
    let stalled = match args.publish.deadline {
        Some(_) => format!(
            "{stalled}; {} without a send",
            count(
                publisher.deadline_missed(),
                "deadline period",
                "deadline periods"
            )
        ),
        None => stalled,
    };
    // What was sent must arrive before the process goes, or the exit status says it did not.
    if !signal::interrupted() {
        if let Err(e) = flush(&mut publisher, args.flush_timeout) {
            bail!(
                "sent {} in {elapsed:.3} s{stalled}, but not all arrived: {e}",
                count(sent, "message", "messages")
            );
        }
    }
    note!(
        "sent {} in {elapsed:.3} s{stalled}",
        count(sent, "message", "messages")
    );
    for warning in unreachable_subscribers(&node, &args.topic, qos.transport) {
        note!("ferry: warning: {warning}");
    }
    if let Some(keep_alive) = args.keep_alive.filter(|_| !signal::interrupted()) {
        note!("staying {keep_alive:?} for subscribers that start later");
        let until = Instant::now() + keep_alive;
        while Instant::now() < until && !signal::interrupted() {
            std::thread::sleep(
                Duration::from_millis(20).min(until.saturating_duration_since(Instant::now())),
            );
        }
    }
    Ok(())
}

/// Subscribers of this host on `topic` that a publisher over `transport` cannot reach — one
/// that listens over UDP only while it sends over shared memory only, or the other way round:
/// they got none of its messages, and nothing else would say so.
fn unreachable_subscribers(
    node: &ferry::Node,
    topic: &str,
    transport: ferry::Transport,
) -> Vec<String> {
    let Ok(Some(snapshot)) = ferry::admin::topic(node.domain(), topic) else {
        return Vec::new();
    };
    // Each subscriber process's slots: over shared memory, over UDP.
    let mut ends: std::collections::BTreeMap<(u32, &str), (bool, bool)> = Default::default();
    for s in snapshot.subscribers.iter().filter(|s| s.alive) {
        let end = ends.entry((s.pid, s.node.as_str())).or_default();
        match s.udp {
            Some(_) => end.1 = true,
            None => end.0 = true,
        }
    }
    let (theirs, fix) = match transport {
        ferry::Transport::Shm => ("over UDP only", "--transport auto or udp"),
        ferry::Transport::Udp => ("over shared memory only", "--transport auto or shm"),
        _ => return Vec::new(),
    };
    ends.into_iter()
        .filter(|(_, (shm, udp))| match transport {
            ferry::Transport::Shm => !shm && *udp,
            _ => *shm && !udp,
        })
        .map(|((pid, node), _)| {
            format!(
                "subscriber {node:?} (pid {pid}) of this host listens {theirs}: it got none of \
                 these messages ({fix} reaches it)"
            )
        })
        .collect()
}

/// Waits up to `limit` for every reliable subscriber to take what was sent, in slices that
/// honour Ctrl-C, saying so when it takes a while.
fn flush(publisher: &mut ferry::Publisher, limit: Duration) -> std::result::Result<(), SendError> {
    let start = Instant::now();
    let mut told = Duration::ZERO;
    loop {
        let left = limit.saturating_sub(start.elapsed());
        match publisher.flush(SEND_TIMEOUT.min(left)) {
            Ok(()) => return Ok(()),
            Err(SendError::Undelivered {
                receivers, bytes, ..
            }) if !left.is_zero() && !signal::interrupted() => {
                if start.elapsed() >= told + STALL_NOTE_EVERY {
                    told = start.elapsed();
                    note!(
                        "ferry pub: waiting for {receivers} reliable subscriber(s) to take the last \
                         {bytes} bytes ({:.1} s of {:.0} s)",
                        told.as_secs_f64(),
                        limit.as_secs_f64()
                    );
                }
            }
            Err(SendError::Undelivered {
                receivers, bytes, ..
            }) => {
                return Err(SendError::Undelivered {
                    receivers,
                    bytes,
                    after: start.elapsed(),
                })
            }
            Err(e) => return Err(e),
        }
    }
}

/// Sleeps until `due`, waking regularly to honour Ctrl-C. False if interrupted.
fn sleep_until(due: Instant) -> bool {
    signal::sleep(due.saturating_duration_since(Instant::now())).is_ok()
}

#[cfg(test)]
mod tests {
    use super::holders;

    #[test]
    fn the_stall_note_names_at_most_three_holders() {
        let names = |n: usize| (1..=n).map(|i| format!("s{i}")).collect::<Vec<_>>();
        assert_eq!(holders(&[]), "a reliable subscriber");
        assert_eq!(holders(&names(1)), "a reliable subscriber (s1)");
        assert_eq!(holders(&names(3)), "reliable subscribers (s1; s2; s3)");
        assert_eq!(
            holders(&names(5)),
            "reliable subscribers (s1; s2; s3; and 2 more)"
        );
    }
}
