//! `ferry lab limits`'s options.

use ferry_lab::limits::Config;
use ferry_lab::units::parse_size;

use super::options::options;

options! {
    pub struct LimitsArgs fills Config for ferry_lab::limits::Limits {
        /// Round trips per latency measurement (cache line, futex, UDP) [default: 20000]
        #[arg(long, value_name = "N")]
        pub samples: Option<usize>,

        /// Seconds of copying per memcpy size [default: 0.3]
        #[arg(long, value_name = "S")]
        pub memcpy_seconds: Option<f64>,

        /// Largest memcpy size, with an optional K, M or G suffix [default: 64M]
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        pub memcpy_max: Option<usize>,
    }
}
