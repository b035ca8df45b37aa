//! `ferry lab latency`'s options.

use ferry_lab::latency::{Config, SUBJECTS};
use ferry_lab::subject::Subject;
use ferry_lab::units::parse_size;
use ferry_lab::Pin;

use super::options::options;

options! {
    pub struct LatencyArgs fills Config for ferry_lab::latency::Latency {
        /// Transports to measure, comma-separated, run in this order within each round except that
        /// a baseline runs before the rows compared with it: shm-spin,
        /// shm-block, shm (ferry, adaptive wait), udp4, udp6 (ferry over UDP, blocking wait),
        /// udp4-key (udp4 with a domain key: authenticated and encrypted),
        /// raw-spin, raw-futex, raw-udp4 (baselines), iceoryx2, iceoryx2-block (its receiver
        /// sleeps), zenoh, zenoh-shm (other systems, built on first use), iceoryx2-rr, zenoh-rr
        /// (their request/response, set against ferry's service shm-spin-rr)
        /// [default: raw-spin,shm-spin,shm,raw-futex,shm-block]
        #[arg(long = "transport", value_name = "LIST", value_delimiter = ',', value_parser = |s: &str| SUBJECTS.parse(s))]
        pub transports: Option<Vec<Subject>>,

        /// Message sizes, comma-separated, with optional K, M or G suffixes (1K = 1024) [default:
        /// 32,1K,32K,1M]
        #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_size)]
        pub sizes: Option<Vec<usize>>,

        /// Round trips recorded per transport and size, split evenly across the rounds [default:
        /// 10000]
        #[arg(long, value_name = "N")]
        pub samples: Option<usize>,

        /// Interleaved rounds: every round runs every transport in turn [default: 5]
        #[arg(long, value_name = "R")]
        pub rounds: Option<usize>,

        /// Unrecorded round trips before the recorded ones, per transport, size and round; raised
        /// where needed to write a whole ferry ring once (its first lap runs on cold caches), and
        /// after the first run of a transport other than ferry's shared memory held to what 2 s of
        /// its round trips take (not below N) [default: 200]
        #[arg(long, value_name = "N")]
        pub warmup: Option<usize>,

        /// CPUs of the main process and of the peer, as A,B, or "none" [default: the first two CPUs
        /// this process may use; none when there is only one]
        #[arg(long, value_name = "A,B|none", value_parser = ferry_lab::parse_pin)]
        pub pin: Option<Pin>,

        /// Run the peer on another machine, through the `ferry lab agent` at HOST[:PORT] (port
        /// 7447 by default); UDP transports only (udp4, udp4-key, raw-udp4)
        #[arg(long, value_name = "HOST[:PORT]")]
        pub remote: Option<String>,
    }
}
