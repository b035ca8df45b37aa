//! `ferry echo`: prints the messages of a topic as they arrive.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use clap::Args;
use ferry::Qos;
use serde::Serialize;

use super::{DeliveryArg, TransportOpt, WaitArg, POLL_SLICE};
use ferry_lab::error::{bail, Context, Result};
use ferry_lab::signal;
use ferry_lab::table::print_out;
use ferry_lab::units::{parse_domain, parse_seconds};

#[derive(Debug, Args)]
pub struct EchoArgs {
    /// Topic to read (1 to 100 letters, digits and _ - . /)
    pub topic: String,

    /// Exit after N messages [default: until Ctrl-C]
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,

    /// Print one JSON object per line: {"seq", "size", "skipped", "head"}
    #[arg(long)]
    pub json: bool,

    /// Fail when no message arrives for S seconds [default: wait forever]
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub timeout: Option<Duration>,

    #[command(flatten)]
    pub transport: TransportOpt,

    /// Delivery: reliable holds a reliable publisher back until the message is read
    #[arg(long, value_enum, default_value_t = DeliveryArg::Reliable)]
    pub delivery: DeliveryArg,

    /// How to wait for messages
    #[arg(long, value_enum, default_value_t = WaitArg::Adaptive)]
    pub wait: WaitArg,

    /// Domain: only topics of one domain see each other [default: $FERRY_DOMAIN, else "default"]
    #[arg(long, value_name = "D", value_parser = parse_domain)]
    pub domain: Option<String>,
}

/// Bytes shown of each message.
const HEAD_BYTES: usize = 16;

#[derive(Serialize)]
struct Line<'a> {
    seq: u64,
    size: usize,
    skipped: u64,
    /// The first bytes, in hex.
    head: &'a str,
}

pub fn run(args: EchoArgs) -> Result<()> {
    let node = super::node("ferry-echo", args.domain.as_deref())?;
    let qos = Qos::default()
        .transport(args.transport.into())
        .delivery(args.delivery.into())
        .wait(args.wait.into());
    let mut subscriber = node.subscriber(&args.topic, &qos).context(format!(
        "cannot subscribe to topic {:?} in domain {}",
        args.topic,
        node.domain()
    ))?;
    for w in subscriber.warnings() {
        ferry_lab::error::note!("ferry: warning: {w}");
    }

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
        let line = match subscriber.recv_timeout(slice)? {
            Some(sample) => format_line(sample.seq(), sample.skipped(), &sample, args.json)?,
            None => {
                if let Some(t) = args.timeout {
                    if last.elapsed() >= t {
                        bail!(
                            "no message on topic {:?} (domain {}) for {t:?}; received {received}{}",
                            args.topic,
                            node.domain(),
                            args.count.map_or(String::new(), |c| format!(" of {c}"))
                        );
                    }
                }
                continue;
            }
        };
        received += 1;
        last = Instant::now();
        if !print_out(&line)? {
            return Ok(()); // the reader of our output went away
        }
    }
    Ok(())
}

/// One output line (with its newline).
fn format_line(seq: u64, skipped: u64, payload: &[u8], json: bool) -> Result<String> {
    let shown = &payload[..payload.len().min(HEAD_BYTES)];
    let mut head = String::with_capacity(3 * HEAD_BYTES);
    for (i, byte) in shown.iter().enumerate() {
        if !json && i > 0 && i % 4 == 0 {
            head.push(' ');
        }
        let _ = write!(head, "{byte:02x}");
    }
    let mut line = if json {
        serde_json::to_string(&Line {
            seq,
            size: payload.len(),
            skipped,
            head: &head,
        })?
    } else {
        if payload.is_empty() {
            head.push_str("(empty)");
        }
        let more = if payload.len() > HEAD_BYTES {
            " …"
        } else {
            ""
        };
        let mut text = format!("seq {seq}  size {}  {head}{more}", payload.len());
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
    use super::format_line;

    #[test]
    fn lines() {
        let payload: Vec<u8> = (0..20).collect();
        assert_eq!(
            format_line(3, 0, &payload, false).unwrap(),
            "seq 3  size 20  00010203 04050607 08090a0b 0c0d0e0f …\n"
        );
        assert_eq!(
            format_line(3, 2, &payload[..2], false).unwrap(),
            "seq 3  size 2  0001  (skipped 2)\n"
        );
        assert_eq!(
            format_line(5, 0, &[], false).unwrap(),
            "seq 5  size 0  (empty)\n"
        );
        assert_eq!(
            format_line(4, 0, &[0xab], true).unwrap(),
            "{\"seq\":4,\"size\":1,\"skipped\":0,\"head\":\"ab\"}\n"
        );
    }
}
