//! The commands that work with live topics: `pub`, `echo`, `record`, `play`, `hz`, `bw`,
//! `topics`, `stats`, `clean`.

pub mod clean;
pub mod echo;
pub mod play;
pub mod publish;
pub mod rate;
pub mod record;
pub mod topics;

use std::time::Duration;

use clap::{Args, ValueEnum};

use ferry_lab::error::{Context, Result};

/// How long a blocking call waits before a command looks at Ctrl-C and its own deadlines again.
pub const POLL_SLICE: Duration = ferry_lab::signal::POLL;

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

impl From<DeliveryArg> for ferry_lab::args::Delivery {
    fn from(d: DeliveryArg) -> ferry_lab::args::Delivery {
        match d {
            DeliveryArg::Reliable => ferry_lab::args::Delivery::Reliable,
            DeliveryArg::Latest => ferry_lab::args::Delivery::Latest,
        }
    }
}

impl From<DeliveryArg> for ferry::Delivery {
    fn from(d: DeliveryArg) -> ferry::Delivery {
        ferry_lab::args::Delivery::from(d).into()
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

impl From<WaitArg> for ferry_lab::args::Wait {
    fn from(w: WaitArg) -> ferry_lab::args::Wait {
        match w {
            WaitArg::Spin => ferry_lab::args::Wait::Spin,
            WaitArg::Block => ferry_lab::args::Wait::Block,
            WaitArg::Adaptive => ferry_lab::args::Wait::Adaptive,
        }
    }
}

impl From<WaitArg> for ferry::WaitStrategy {
    fn from(w: WaitArg) -> ferry::WaitStrategy {
        ferry_lab::args::Wait::from(w).into()
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
) -> Result<(ferry::Node, ferry::Subscriber)> {
    let node = node(name, domain)?;
    let qos = ferry::Qos::default()
        .transport(transport.into())
        .delivery(delivery.into())
        .wait(wait.into());
    let subscriber = node.subscriber(topic, &qos).context(format!(
        "cannot subscribe to topic {topic:?} in domain {}",
        node.domain()
    ))?;
    Ok((node, subscriber))
}
