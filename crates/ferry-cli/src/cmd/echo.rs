//! `ferry echo`: prints the messages of one topic, or of several read in one thread through a
//! wait set, as they arrive.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use super::typed::{Decoder, TypeArgs};
use super::{delivery_words, wait_words, TransportOpt, POLL_SLICE};
use ferry_cmd::error::{bail, Context, Result};
use ferry_cmd::signal;
use ferry_cmd::table::print_out;
use ferry_cmd::units::{parse_domain, parse_max_size, parse_seconds};

#[derive(Debug, Args)]
pub struct EchoArgs {
    /// Topics to read (1 to 100 letters, digits and _ - . /); with several, one thread reads
    /// them all, each line naming its topic
    #[arg(required = true, value_name = "TOPIC")]
    pub topics: Vec<String>,

    /// Exit after N messages [default: until Ctrl-C]
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,

    /// Print one JSON object per line: {"seq", "size", "skipped", "head"} (and "time_ns" with
    /// --timestamps)
    #[arg(long)]
    pub json: bool,

    /// Show every byte of each message, not only the first 16
    #[arg(long)]
    pub full: bool,

    /// Add each message's receive time (ns since the Unix epoch)
    #[arg(long)]
    pub timestamps: bool,

    /// Also print a line when a publisher appears or is gone (closed, died, silent past the
    /// lease over UDP), as `publisher ID appeared` / `publisher ID gone: died`, and
    /// with --deadline when a period passes without a message
    #[arg(long)]
    pub events: bool,
    /// Fail when no message arrives for S seconds [default: wait forever]
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub timeout: Option<Duration>,

    #[command(flatten)]
    pub transport: TransportOpt,

    /// Delivery: reliable holds a reliable publisher back until the message is read
    #[arg(long, value_parser = delivery_words(), default_value_t = ferry::Delivery::Reliable)]
    pub delivery: ferry::Delivery,

    /// How to wait for messages (one topic; several are read through a wait set, which sleeps)
    #[arg(long, value_parser = wait_words(), default_value_t = ferry::WaitStrategy::Adaptive)]
    pub wait: ferry::WaitStrategy,

    /// The largest message taken over UDP, in bytes (K, M or G suffix); a publisher of this host
    /// is told, and refuses to send larger ones (shared memory takes what the ring holds)
    #[arg(long, value_name = "BYTES", default_value = "1M", value_parser = parse_max_size)]
    pub max_size: usize,

    /// UDP: a publisher not heard from for S seconds is gone (silent), 0.3 to 3600
    #[arg(long, value_name = "S", default_value = "3", value_parser = parse_seconds)]
    pub lease: Duration,

    /// A deadline: count each period of S seconds that passes without a message (`ferry
    /// stats`; with --events, a line for each)
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub deadline: Option<Duration>,

    /// First take the last K messages of each publisher already running, as far as it keeps
    /// them (`ferry pub --history N`), then the live ones
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub history: usize,

    /// Domain: only topics of one domain see each other [default: $FERRY_DOMAIN, else "default"]
    #[arg(long, value_name = "D", value_parser = parse_domain)]
    pub domain: Option<String>,

    /// Show a typed topic's messages as bytes too, not decoded by field
    #[arg(long)]
    pub raw: bool,

    #[command(flatten)]
    pub typed: TypeArgs,
}

/// Prints `warnings` (and forgets them, so that each is said once).
fn warn(warnings: &mut Vec<String>) {
    for w in warnings.drain(..) {
        ferry_cmd::error::note!("ferry: warning: {w}");
    }
}

/// Bytes shown of each message.
const HEAD_BYTES: usize = 16;

#[derive(Serialize)]
struct Line<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    topic: Option<&'a str>,
    seq: u64,
    size: usize,
    skipped: u64,
    /// The first bytes (every byte with --full), in hex.
    head: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    time_ns: Option<u64>,
}

/// How a line looks.
#[derive(Debug, Clone, Copy, Default)]
struct Style {
    json: bool,
    full: bool,
    timestamps: bool,
}

pub fn run(args: EchoArgs) -> Result<()> {
    let qos = {
        let mut qos =
            super::subscriber_qos(args.transport, args.delivery, args.wait, args.max_size);
        qos.deadline = args.deadline;
        qos.lease = args.lease;
        qos.history = args.history;
        qos.topic_type = args.typed.topic_type()?;
        qos
    };
    let node = super::node("ferry-echo", args.domain.as_deref())?;
    let mut subscribers = Vec::with_capacity(args.topics.len());
    for topic in &args.topics {
        subscribers.push(node.subscriber(topic, &qos).context(format!(
            "cannot subscribe to topic {} in domain {}",
            ferry::quoted_name(topic),
            node.domain()
        ))?);
    }
    // A capped UDP receive buffer matters only to what comes over UDP: said at once when UDP is
    // all these subscribers read, else with the first message that comes over UDP; once.
    let mut udp_warnings = subscribers[0].warnings();
    if args.transport.transport == ferry::Transport::Udp {
        warn(&mut udp_warnings);
    }
    let style = Style {
        json: args.json,
        full: args.full,
        timestamps: args.timestamps,
    };
    let several = subscribers.len() > 1;
    let mut decoders: Vec<Decoder> = args
        .topics
        .iter()
        .map(|t| Decoder::new(node.domain(), t))
        .collect();
    if args.events {
        for s in &mut subscribers {
            s.wake_on_events(true);
        }
    }
    let mut set = ferry::WaitSet::new();
    let mut received = 0u64;
    let mut last = Instant::now();
    while args.count.map_or(true, |c| received < c) {
        if signal::interrupted() {
            return Ok(());
        }
        let slice = match args.timeout {
            Some(t) => t.saturating_sub(last.elapsed()).min(POLL_SLICE),
            None => POLL_SLICE,
        };
        // One topic: its subscriber's own receive, which waits as --wait says. Several: a wait
        // set, which sleeps until any of them has something.
        let (ready, mut first_wait) = if several {
            let mut items: Vec<&mut dyn ferry::Waitable> = subscribers
                .iter_mut()
                .map(|s| s as &mut dyn ferry::Waitable)
                .collect();
            (set.wait(&mut items, Some(slice))?.to_vec(), None)
        } else {
            (vec![0], Some(slice))
        };
        let mut got = 0;
        for i in ready {
            let (sub, topic) = (
                &mut subscribers[i],
                several.then_some(args.topics[i].as_str()),
            );
            loop {
                let line = if args.count.is_some_and(|c| received >= c) {
                    None
                } else {
                    let sample = match first_wait.take() {
                        Some(wait) => sub.recv_timeout(wait)?,
                        None => sub.try_recv()?,
                    };
                    match sample {
                        Some(sample) => {
                            if sample.publisher().transport() == ferry::Transport::Udp {
                                warn(&mut udp_warnings);
                            }
                            let time = style.timestamps.then(ferry_record::format::now_ns);
                            let (seq, skipped) = (sample.seq(), sample.skipped());
                            let decoded = if args.raw {
                                None
                            } else {
                                decoders[i].decode(sample.publisher(), &sample)
                            };
                            match decoded {
                                Some(Ok(v)) => {
                                    let head = Head {
                                        topic,
                                        seq,
                                        skipped,
                                        size: sample.len(),
                                        time_ns: time,
                                    };
                                    Some(format_message(&head, &v, style)?)
                                }
                                Some(Err(why)) => {
                                    let mut line =
                                        format_line(topic, seq, skipped, &sample, time, style)?;
                                    line.insert_str(
                                        line.len() - 1,
                                        &format!("  (cannot decode: {why})"),
                                    );
                                    Some(line)
                                }
                                None => {
                                    Some(format_line(topic, seq, skipped, &sample, time, style)?)
                                }
                            }
                        }
                        None => None,
                    }
                };
                // Events before the message they came with; taken whether shown or not (one
                // not taken keeps its topic ready).
                while let Some(e) = sub.try_event() {
                    if !args.events {
                        continue;
                    }
                    let node = match e {
                        ferry::Event::Appeared(id) => sub.publisher_info(id).node,
                        _ => None,
                    };
                    if !print_out(&event_line(&e, node.as_deref(), topic, style)?)? {
                        return Ok(());
                    }
                }
                let Some(line) = line else { break };
                received += 1;
                got += 1;
                if !print_out(&line)? {
                    return Ok(()); // the reader of our output went away
                }
            }
        }
        if got > 0 {
            last = Instant::now();
        } else if let Some(t) = args.timeout {
            if last.elapsed() >= t {
                bail!(
                    "no message on {} (domain {}) for {t:?}; received {received}{}",
                    match args.topics.as_slice() {
                        [one] => format!("topic {one:?}"),
                        many => format!("topics {many:?}"),
                    },
                    node.domain(),
                    args.count.map_or(String::new(), |c| format!(" of {c}"))
                );
            }
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct EventJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    topic: Option<&'a str>,
    event: &'a str,
    publisher: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<&'a str>,
}

/// The line of a publisher event (with its newline), naming its topic when given.
fn event_line(
    e: &ferry::Event,
    node: Option<&str>,
    topic: Option<&str>,
    style: Style,
) -> Result<String> {
    let (event, id, why) = match e {
        ferry::Event::Appeared(id) => ("appeared", id, None),
        ferry::Event::Gone(id, why) => ("gone", id, Some(why.as_str())),
        ferry::Event::DeadlineMissed(missed) => {
            let mut line = if style.json {
                let mut j = serde_json::json!({
                    "event": "deadline-missed",
                    "missed": missed,
                });
                if let Some(t) = topic {
                    j["topic"] = t.into();
                }
                serde_json::to_string(&j)?
            } else {
                format!("{}deadline missed ({missed} so far)", prefix(topic))
            };
            line.push('\n');
            return Ok(line);
        }
        _ => return Ok(String::new()),
    };
    let mut line = if style.json {
        serde_json::to_string(&EventJson {
            topic,
            event,
            publisher: id.to_string(),
            node,
            why,
        })?
    } else {
        let mut text = format!("{}publisher {id} {event}", prefix(topic));
        if let Some(n) = node {
            let _ = write!(text, " (node {n:?})");
        }
        if let Some(w) = why {
            let _ = write!(text, ": {w}");
        }
        text
    };
    line.push('\n');
    Ok(line)
}

/// What is said of a message besides its content.
struct Head<'a> {
    topic: Option<&'a str>,
    seq: u64,
    skipped: u64,
    size: usize,
    time_ns: Option<u64>,
}

/// A decoded message: a JSON object per line (`message` holding its fields), or its fields as
/// YAML-like text under a line that says which message it is, then `---`.
fn format_message(h: &Head<'_>, v: &ferry_types::Value, style: Style) -> Result<String> {
    if style.json {
        let mut line = String::from("{");
        if let Some(t) = h.topic {
            let _ = write!(line, "\"topic\":{},", serde_json::to_string(t)?);
        }
        let _ = write!(
            line,
            "\"seq\":{},\"size\":{},\"skipped\":{}",
            h.seq, h.size, h.skipped
        );
        if let Some(t) = h.time_ns {
            let _ = write!(line, ",\"time_ns\":{t}");
        }
        let _ = writeln!(line, ",\"message\":{}}}", v.to_json());
        return Ok(line);
    }
    let mut text = match h.time_ns {
        Some(t) => format!("{}.{:09}  ", t / 1_000_000_000, t % 1_000_000_000),
        None => String::new(),
    };
    text.push_str(&prefix(h.topic));
    let _ = write!(text, "seq {}  size {}", h.seq, h.size);
    if h.skipped > 0 {
        let _ = write!(text, "  (skipped {})", h.skipped);
    }
    text.push('\n');
    text.push_str(&v.to_yaml());
    text.push_str("---\n");
    Ok(text)
}

/// What a line of several topics starts with: its topic.
fn prefix(topic: Option<&str>) -> String {
    topic.map_or(String::new(), |t| format!("{t}  "))
}

/// One output line (with its newline), naming its topic when given.
fn format_line(
    topic: Option<&str>,
    seq: u64,
    skipped: u64,
    payload: &[u8],
    time_ns: Option<u64>,
    style: Style,
) -> Result<String> {
    let json = style.json;
    let limit = if style.full { usize::MAX } else { HEAD_BYTES };
    let shown = &payload[..payload.len().min(limit)];
    let mut head = String::with_capacity(3 * shown.len());
    for (i, byte) in shown.iter().enumerate() {
        if !json && i > 0 && i % 4 == 0 {
            head.push(' ');
        }
        let _ = write!(head, "{byte:02x}");
    }
    let mut line = if json {
        serde_json::to_string(&Line {
            topic,
            seq,
            size: payload.len(),
            skipped,
            head: &head,
            time_ns,
        })?
    } else {
        if payload.is_empty() {
            head.push_str("(empty)");
        }
        let more = if payload.len() > shown.len() {
            " …"
        } else {
            ""
        };
        let mut text = match time_ns {
            Some(t) => format!("{}.{:09}  ", t / 1_000_000_000, t % 1_000_000_000),
            None => String::new(),
        };
        text.push_str(&prefix(topic));
        let _ = write!(text, "seq {seq}  size {}  {head}{more}", payload.len());
        if skipped > 0 {
            let _ = write!(text, "  (skipped {skipped})");
        }
        text
    };
    line.push('\n');
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::{format_line, Style};

    #[test]
    fn lines() {
        let text = Style::default();
        let json = Style {
            json: true,
            ..Style::default()
        };
        // Every byte, each line with its time.
        let full = |style: Style| Style {
            full: true,
            timestamps: true,
            ..style
        };
        let payload: Vec<u8> = (0..20).collect();
        assert_eq!(
            format_line(None, 3, 0, &payload, None, text).unwrap(),
            "seq 3  size 20  00010203 04050607 08090a0b 0c0d0e0f …\n"
        );
        assert_eq!(
            format_line(None, 3, 2, &payload[..2], None, text).unwrap(),
            "seq 3  size 2  0001  (skipped 2)\n"
        );
        assert_eq!(
            format_line(None, 5, 0, &[], None, text).unwrap(),
            "seq 5  size 0  (empty)\n"
        );
        assert_eq!(
            format_line(None, 4, 0, &[0xab], None, json).unwrap(),
            "{\"seq\":4,\"size\":1,\"skipped\":0,\"head\":\"ab\"}\n"
        );
        assert_eq!(
            format_line(None, 4, 0, &payload[..18], Some(7), full(json)).unwrap(),
            "{\"seq\":4,\"size\":18,\"skipped\":0,\
             \"head\":\"000102030405060708090a0b0c0d0e0f1011\",\"time_ns\":7}\n"
        );
        assert_eq!(
            format_line(None, 4, 0, &payload[..5], Some(1_500_000_000), full(text)).unwrap(),
            "1.500000000  seq 4  size 5  00010203 04\n"
        );
    }
}
