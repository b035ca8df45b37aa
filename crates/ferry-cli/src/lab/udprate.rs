//! `ferry lab udp-rate`'s options.

use ferry_lab::args::parse_choice;
use ferry_lab::udprate::{parse_rate, parse_threads, Config, Pacing, ThreadCounts};

use super::options::options;

options! {
    pub struct UdpRateArgs fills Config for ferry_lab::udprate::UdpRate {
        /// Requested rates in bit/s, comma-separated, with K, M or G (1G = 10^9) [default: 1G]
        #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_rate)]
        pub rate: Option<Vec<u64>>,

        /// Datagram payload sizes (MSS), comma-separated [default: 1024,1472,8972]
        #[arg(long, value_name = "LIST", value_delimiter = ',')]
        pub mss: Option<Vec<usize>>,

        /// Sender threads: a range `1..K`, a list `1,2,4`, or `auto` [default: 1..2]
        #[arg(long, value_name = "SPEC", value_parser = parse_threads)]
        pub threads: Option<ThreadCounts>,

        /// catch-up (make up for delays) or steady (never above the rate) [default: catch-up]
        #[arg(long, value_name = "MODE", value_parser = parse_choice::<Pacing>)]
        pub pacing: Option<Pacing>,

        /// Start this many busy CPU threads at mid-run (auto pools then show the manager reacting)
        /// [default: 0]
        #[arg(long, value_name = "CPUS")]
        pub stress: Option<usize>,

        /// Switch to this requested rate at mid-run
        #[arg(long, value_name = "RATE", value_parser = parse_rate)]
        pub rate_change: Option<u64>,

        /// Seconds per configuration [default: 3]
        #[arg(long, value_name = "S")]
        pub duration: Option<f64>,

        /// Manager interval in seconds (the study's 0.5 s) [default: 0.5]
        #[arg(long, value_name = "S")]
        pub interval: Option<f64>,

        /// Receive on another machine: the receivers run there, through the `ferry lab agent` at
        /// HOST[:PORT] (port 7447 by default), and count the datagrams and the rate's windows on
        /// their own clock
        #[arg(long, value_name = "HOST[:PORT]")]
        pub remote: Option<String>,
    }
}
