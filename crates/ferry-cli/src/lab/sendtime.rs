//! `ferry lab send-time`'s options.

use ferry_lab::sendtime::{Config, SUBJECTS};
use ferry_lab::subject::Subject;
use ferry_lab::units::parse_size;

use super::options::options;

options! {
    pub struct SendTimeArgs fills Config for ferry_lab::sendtime::SendTime {
        /// Transports, comma-separated: shm (ferry shared memory), udp4 (ferry UDP), raw-udp4
        /// [default: shm,udp4,raw-udp4]
        #[arg(long = "transport", value_name = "LIST", value_delimiter = ',', value_parser = |s: &str| SUBJECTS.parse(s))]
        pub transports: Option<Vec<Subject>>,

        /// Message sizes, comma-separated, with optional K, M or G suffixes [default: 32,1K,32K,1M]
        #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_size)]
        pub sizes: Option<Vec<usize>>,

        /// Timed sends per transport and size [default: 10000]
        #[arg(long, value_name = "N")]
        pub samples: Option<usize>,

        /// Untimed sends before the timed ones, per transport and size [default: 100]
        #[arg(long, value_name = "N")]
        pub warmup: Option<usize>,
    }
}
