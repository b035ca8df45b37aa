//! The commands that work with live topics: `pub`, `echo`, `record`, `play`, `hz`, `bw`,
//! `topics`, `stats`, `clean`.

pub mod clean;
pub mod echo;
pub mod play;
pub mod publish;
pub mod rate;
pub mod record;
pub mod service;
pub mod topics;

use std::time::Duration;

use clap::{Args, ValueEnum};

use ferry_cmd::error::{Context, Result};
use ferry_cmd::units::{parse_domain, parse_seconds};

/// How long a blocking call waits before a command looks at Ctrl-C and its own deadlines again.
pub const POLL_SLICE: Duration = ferry_cmd::signal::POLL;

/// `--transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// Shared memory (same host)
    Shm,
    /// UDP (any host)
    Udp,
    /// Shared memory where both ends share a host, UDP otherwise
    Auto,
}

impl From<TransportArg> for ferry::Transport {
    fn from(t: TransportArg) -> ferry::Transport {
        match t {
            TransportArg::Shm => ferry::Transport::Shm,
            TransportArg::Udp => ferry::Transport::Udp,
            TransportArg::Auto => ferry::Transport::Auto,
        }
    }
}

/// The `--transport` option, one definition for `pub` and `echo` (same values, default and help).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct TransportOpt {
    /// How messages travel between this process and the topic's other ends
    #[arg(long, value_enum, default_value_t = TransportArg::Auto)]
    pub transport: TransportArg,
}

impl From<TransportOpt> for ferry::Transport {
    fn from(t: TransportOpt) -> ferry::Transport {
        t.transport.into()
    }
}

/// `--delivery`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DeliveryArg {
    /// Nothing is lost: a publisher waits for slow reliable subscribers
    Reliable,
    /// The publisher never waits; slow subscribers skip ahead and count what they skipped
    Latest,
}

impl From<DeliveryArg> for ferry::Delivery {
    fn from(d: DeliveryArg) -> ferry::Delivery {
        match d {
            DeliveryArg::Reliable => ferry::Delivery::Reliable,
            DeliveryArg::Latest => ferry::Delivery::Latest,
        }
    }
}

/// `--wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WaitArg {
    /// Busy loop: lowest latency, one CPU kept busy while waiting
    Spin,
    /// Sleep on a futex: no busy loop
    Block,
    /// Spin for a short while, then sleep
    Adaptive,
}

impl From<WaitArg> for ferry::WaitStrategy {
    fn from(w: WaitArg) -> ferry::WaitStrategy {
        match w {
            WaitArg::Spin => ferry::WaitStrategy::Spin,
            WaitArg::Block => ferry::WaitStrategy::Block,
            WaitArg::Adaptive => ferry::WaitStrategy::Adaptive,
        }
    }
}

/// A node in `domain`, or in `$FERRY_DOMAIN` (else `default`) when none is given.
pub fn node(name: &str, domain: Option<&str>) -> Result<ferry::Node> {
    match domain {
        Some(d) => Ok(ferry::Node::with_domain(name, d)?),
        None => ferry::Node::new(name).context("the FERRY_* environment variables"),
    }
}

/// A node (`name`, in `domain` as [`node`] takes it) and its subscriber of `topic`, with the
/// command line's transport, delivery and wait strategy.
pub fn subscriber(
    name: &str,
    domain: Option<&str>,
    topic: &str,
    transport: TransportOpt,
    delivery: DeliveryArg,
    wait: WaitArg,
    max_size: usize,
) -> Result<(ferry::Node, ferry::Subscriber)> {
    let node = node(name, domain)?;
    let qos = ferry::Qos::default()
        .transport(transport.into())
        .delivery(delivery.into())
        .wait(wait.into())
        .max_message_size(max_size.max(1));
    let subscriber = node.subscriber(topic, &qos).context(format!(
        "cannot subscribe to topic {topic:?} in domain {}",
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
    #[arg(long, value_enum, default_value_t = DeliveryArg::Reliable)]
    pub delivery: DeliveryArg,

    /// How to wait for room when reliable subscribers hold the ring back
    #[arg(long, value_enum, default_value_t = WaitArg::Adaptive)]
    pub wait: WaitArg,

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
        let qos = ferry::Qos::default()
            .transport(self.transport.into())
            .delivery(self.delivery.into())
            .wait(self.wait.into());
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
