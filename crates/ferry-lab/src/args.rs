//! Option values that the lab and the topic commands share.

use clap::ValueEnum;

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
