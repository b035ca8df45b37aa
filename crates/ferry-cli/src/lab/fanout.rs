//! `ferry lab fanout`'s options.

use ferry_lab::fanout::Config;
use ferry_lab::units::parse_size;

use super::options::options;

options! {
    pub struct FanoutArgs fills Config for ferry_lab::fanout::Fanout {
        /// Bytes per message, with an optional K, M or G suffix (at least 8) [default: 8K]
        #[arg(long, value_name = "BYTES", value_parser = parse_size)]
        pub size: Option<usize>,

        /// Messages per second the publisher sends, on a fixed schedule [default: 5000]
        #[arg(long, value_name = "N")]
        pub rate: Option<f64>,

        /// Subscribers that read every message as it comes, 1 to 8 (the slow one comes on top)
        /// [default: 2]
        #[arg(long, value_name = "N")]
        pub subscribers: Option<usize>,

        /// The slow subscriber reads at the rate divided by this: after each message it sleeps this
        /// many of the publisher's periods [default: 10]
        #[arg(long, value_name = "X")]
        pub slowdown: Option<f64>,

        /// Seconds the publisher sends per run [default: 2]
        #[arg(long, value_name = "S")]
        pub seconds: Option<f64>,

        /// Rounds, each a run of the fast subscribers alone and one beside the slow subscriber
        /// [default: 3]
        #[arg(long, value_name = "N")]
        pub rounds: Option<usize>,
    }
}
