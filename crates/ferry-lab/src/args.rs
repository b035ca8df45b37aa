//! Values that the lab's configurations share with ferry's QoS: delivery and wait strategy, as
//! plain serde enums (the command line has its own clap enums and converts them).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// ferry's delivery, as the lab's configurations and results name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Delivery {
    /// Nothing is lost: a publisher waits for slow reliable subscribers.
    Reliable,
    /// The publisher never waits; slow subscribers skip ahead and count what they skipped.
    Latest,
}

impl Delivery {
    pub fn name(self) -> &'static str {
        match self {
            Delivery::Reliable => "reliable",
            Delivery::Latest => "latest",
        }
    }
}

impl From<Delivery> for ferry::Delivery {
    fn from(d: Delivery) -> ferry::Delivery {
        match d {
            Delivery::Reliable => ferry::Delivery::Reliable,
            Delivery::Latest => ferry::Delivery::Latest,
        }
    }
}

/// ferry's wait strategy, as the lab's configurations and results name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Wait {
    /// Busy loop: lowest latency, one CPU kept busy while waiting.
    Spin,
    /// Sleep on a futex: no busy loop.
    Block,
    /// Spin for a short while, then sleep.
    Adaptive,
}

impl Wait {
    pub fn name(self) -> &'static str {
        match self {
            Wait::Spin => "spin",
            Wait::Block => "block",
            Wait::Adaptive => "adaptive",
        }
    }
}

impl From<Wait> for ferry::WaitStrategy {
    fn from(w: Wait) -> ferry::WaitStrategy {
        match w {
            Wait::Spin => ferry::WaitStrategy::Spin,
            Wait::Block => ferry::WaitStrategy::Block,
            Wait::Adaptive => ferry::WaitStrategy::Adaptive,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_json_strings() {
        for d in [Delivery::Reliable, Delivery::Latest] {
            assert_eq!(serde_json::to_value(d).unwrap(), d.name());
        }
        for w in [Wait::Spin, Wait::Block, Wait::Adaptive] {
            assert_eq!(serde_json::to_value(w).unwrap(), w.name());
        }
    }
}
