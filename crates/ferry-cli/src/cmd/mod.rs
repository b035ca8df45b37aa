//! The commands that work with live topics: `pub`, `echo`, `record`, `play`, `hz`, `bw`,
//! `topics`, `stats`, `clean`, `monitor`.

pub mod clean;
pub mod echo;
pub mod monitor;
pub mod play;
pub mod publish;
pub mod rate;
pub mod record;
pub mod service;
pub mod topics;
pub mod typed;

use std::str::FromStr;
use std::time::Duration;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::Args;

use ferry_cmd::error::{Context, Result};
use ferry_cmd::units::{parse_domain, parse_seconds};

/// How long a blocking call waits before a command looks at Ctrl-C and its own deadlines again.
pub const POLL_SLICE: Duration = ferry_cmd::signal::POLL;

/// A clap value parser of one of ferry's vocabularies (`ferry::Transport`, `ferry::Delivery`,
/// `ferry::WaitStrategy`): the library's words, each with the help `--help` gives it, checked
/// as clap checks a value enum (a mistake lists the possible values), then read with `FromStr`.
fn words<T>(help: fn(T) -> &'static str) -> impl TypedValueParser<Value = T>
where
    T: Word,
{
    PossibleValuesParser::new(
        T::ALL
            .iter()
            .map(|&v| PossibleValue::new(v.word()).help(help(v))),
    )
    .try_map(|word| word.parse::<T>())
}

/// A value of one of ferry's vocabularies: its values and words are the library's.
pub trait Word: Copy + Send + Sync + FromStr<Err = ferry::ParseNameError> + 'static {
    const ALL: &'static [Self];
    fn word(self) -> &'static str;
}

macro_rules! word {
    ($($ty:ty),+) => {
        $(impl Word for $ty {
            const ALL: &'static [Self] = <$ty>::ALL;
            fn word(self) -> &'static str {
                self.name()
            }
        })+
    };
}
word!(ferry::Transport, ferry::Delivery, ferry::WaitStrategy);

/// `--transport`: its values and their help.
pub fn transport_words() -> impl TypedValueParser<Value = ferry::Transport> {
    words(|t| match t {
        ferry::Transport::Shm => "Shared memory (same host)",
        ferry::Transport::Udp => "UDP (any host)",
        _ => "Shared memory where both ends share a host, UDP otherwise",
    })
}

/// `--delivery`: its values and their help.
pub fn delivery_words() -> impl TypedValueParser<Value = ferry::Delivery> {
    words(|d| match d {
        ferry::Delivery::Reliable => {
            "Nothing is lost: a publisher waits for slow reliable subscribers"
        }
        ferry::Delivery::Latest => {
            "The publisher never waits; slow subscribers skip ahead and count what they skipped"
        }
    })
}

/// `--wait`: its values and their help.
pub fn wait_words() -> impl TypedValueParser<Value = ferry::WaitStrategy> {
    words(|w| match w {
        ferry::WaitStrategy::Spin => "Busy loop: lowest latency, one CPU kept busy while waiting",
        ferry::WaitStrategy::Block => "Sleep on a futex: no busy loop",
        ferry::WaitStrategy::Adaptive => "Spin for a short while, then sleep",
    })
}

/// The `--transport` option, one definition for `pub` and `echo` (same values, default and help).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct TransportOpt {
    /// How messages travel between this process and the topic's other ends
    #[arg(long, value_parser = transport_words(), default_value_t = ferry::Transport::Auto)]
    pub transport: ferry::Transport,
}

impl From<TransportOpt> for ferry::Transport {
    fn from(t: TransportOpt) -> ferry::Transport {
        t.transport
    }
}

/// Fills a message (or a response) numbered `n` (its sequence number, or the request's id): `n`
/// as u64 little endian first if it fits, then its low byte repeated.
pub fn write_numbered(buf: &mut [u8], n: u64) {
    buf.fill(n as u8);
    if let Some(head) = buf.get_mut(..8) {
        head.copy_from_slice(&n.to_le_bytes());
    }
}

/// A node in `domain`, or in `$FERRY_DOMAIN` (else `default`) when none is given.
pub fn node(name: &str, domain: Option<&str>) -> Result<ferry::Node> {
    match domain {
        Some(d) => Ok(ferry::Node::with_domain(name, d)?),
        None => ferry::Node::new(name).context("the FERRY_* environment variables"),
    }
}

/// The QoS of a command's subscriber: the command line's transport, delivery, wait strategy
/// and largest message.
pub fn subscriber_qos(
    transport: TransportOpt,
    delivery: ferry::Delivery,
    wait: ferry::WaitStrategy,
    max_size: usize,
) -> ferry::Qos {
    ferry::Qos::default()
        .transport(transport.into())
        .delivery(delivery)
        .wait(wait)
        .max_message_size(max_size.max(1))
}

/// A node (`name`, in `domain` as [`node`] takes it) and its subscriber of `topic` with `qos`.
pub fn subscriber(
    name: &str,
    domain: Option<&str>,
    topic: &str,
    qos: &ferry::Qos,
) -> Result<(ferry::Node, ferry::Subscriber)> {
    let node = node(name, domain)?;
    let subscriber = node.subscriber(topic, qos).context(format!(
        "cannot subscribe to topic {} in domain {}",
        ferry::quoted_name(topic),
        node.domain()
    ))?;
    Ok((node, subscriber))
}

/// The options of the commands that publish (`pub`, `play`): one definition, same help.
#[derive(Debug, Args)]
pub struct PublishOpts {
    #[command(flatten)]
    pub transport: TransportOpt,

    /// What happens when a subscriber is slower than the messages sent
    #[arg(long, value_parser = delivery_words(), default_value_t = ferry::Delivery::Reliable)]
    pub delivery: ferry::Delivery,

    /// How to wait for room when reliable subscribers hold the ring back
    #[arg(long, value_parser = wait_words(), default_value_t = ferry::WaitStrategy::Adaptive)]
    pub wait: ferry::WaitStrategy,

    /// A deadline: count each period of S seconds that passes without a send (`ferry stats`)
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub deadline: Option<Duration>,

    /// Keep the last N messages for subscribers that start later (shared memory: as many as
    /// the ring holds); they get them first, then the live ones
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub history: usize,

    /// Before the first message, wait until N subscribers are attached (to every topic)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub wait_subscribers: usize,

    /// How long to wait for --wait-subscribers, in seconds
    #[arg(long, value_name = "S", default_value = "10", value_parser = parse_seconds)]
    pub wait_timeout: Duration,

    /// Domain: only topics of one domain see each other [default: $FERRY_DOMAIN, else "default"]
    #[arg(long, value_name = "D", value_parser = parse_domain)]
    pub domain: Option<String>,
}

impl PublishOpts {
    /// The node (`name`) and the QoS these options ask for.
    pub fn node_and_qos(&self, name: &str) -> Result<(ferry::Node, ferry::Qos)> {
        let node = node(name, self.domain.as_deref())?;
        let mut qos = ferry::Qos::default()
            .transport(self.transport.into())
            .delivery(self.delivery)
            .wait(self.wait);
        qos.deadline = self.deadline;
        qos.history = self.history;
        Ok((node, qos))
    }

    /// Waits, per --wait-subscribers and --wait-timeout, until `attached()` reaches N. False if
    /// Ctrl-C or SIGTERM came first; an error, saying `what` (given the count), at the timeout.
    pub fn wait_for_subscribers(
        &self,
        mut attached: impl FnMut() -> usize,
        what: impl Fn(usize) -> String,
    ) -> Result<bool> {
        if self.wait_subscribers == 0 {
            return Ok(true);
        }
        let deadline = std::time::Instant::now() + self.wait_timeout;
        loop {
            let now = attached();
            if now >= self.wait_subscribers {
                return Ok(true);
            }
            if ferry_cmd::signal::interrupted() {
                return Ok(false);
            }
            if std::time::Instant::now() >= deadline {
                ferry_cmd::error::bail!(
                    "{} within {:?} (--wait-subscribers {})",
                    what(now),
                    self.wait_timeout,
                    self.wait_subscribers
                );
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_numbered_message_starts_with_its_number() {
        let mut buf = [0u8; 10];
        super::write_numbered(&mut buf, 0x0102);
        assert_eq!(buf, [2, 1, 0, 0, 0, 0, 0, 0, 2, 2]);
        let mut small = [0u8; 3];
        super::write_numbered(&mut small, 7);
        assert_eq!(small, [7, 7, 7]);
    }
}
