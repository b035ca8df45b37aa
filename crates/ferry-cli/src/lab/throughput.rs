//! `ferry lab throughput`'s options.

use ferry_lab::netns::{parse_link_rate, LinkRate};
use ferry_lab::subject::Subject;
use ferry_lab::throughput::{parse_loss, Config, LINK_TRANSPORTS, PERIOD_TRANSPORTS, SUBJECTS};
use ferry_lab::units::{parse_seconds, parse_size};
use ferry_lab::Pin;

use crate::cmd::{delivery_words, wait_words};

use super::options::options;

options! {
    pub struct ThroughputArgs fills Config for ferry_lab::throughput::Throughput {
        /// Transports, comma-separated, run in this order at each size except that a baseline runs
        /// before the rows compared with it: shm, udp4, udp4-key,
        /// udp6 (ferry), raw-udp4 (plain sockets), iperf3, iperf3-tcp, sockperf (when installed),
        /// tcp (the lab's own TCP stream, --hosts 2 only),
        /// iceoryx2, zenoh, zenoh-shm (other systems, built on first use) [default:
        /// shm,udp4,raw-udp4,iperf3,sockperf; with --hosts 2: udp4,raw-udp4,iperf3-tcp,iperf3]
        #[arg(long = "transport", value_name = "LIST", value_delimiter = ',', value_parser = |s: &str| SUBJECTS.parse(s))]
        pub transports: Option<Vec<Subject>>,

        /// Message sizes, comma-separated, with optional K, M or G suffixes (1K = 1024; at least 8
        /// bytes: the first 8 carry the sequence number) [default: 64,1K,64K]
        #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_size)]
        pub sizes: Option<Vec<usize>>,

        /// Delivery of ferry's transports and of the other systems: reliable (nothing lost:
        /// back-pressure, retransmission) or latest (the publisher never waits) [default: reliable]
        #[arg(long, value_parser = delivery_words())]
        pub delivery: Option<ferry::Delivery>,

        /// Loss injected by ferry on the publisher's datagrams (ferry's UDP transports only, as
        /// FERRY_IMPAIR=loss=P% with the same random pattern in every run), in percent
        #[arg(long, value_name = "PERCENT", value_parser = parse_loss)]
        pub loss: Option<f64>,

        /// How long the publisher sends, per transport, size and round (iperf3 and sockperf take
        /// whole seconds: rounded up) [default: 2]
        #[arg(long, value_name = "S", value_parser = parse_seconds)]
        pub duration: Option<std::time::Duration>,

        /// Interleaved rounds: every round runs every transport in turn [default: 3]
        #[arg(long, value_name = "R")]
        pub rounds: Option<usize>,

        /// How ferry's subscriber (and a reliable publisher) waits [default: adaptive]
        #[arg(long, value_parser = wait_words())]
        pub wait: Option<ferry::WaitStrategy>,

        /// CPUs of the main process (publisher) and of the peer (subscriber), as A,B, or "none"
        /// [default: the first two CPUs this process may use]
        #[arg(long, value_name = "A,B|none", value_parser = ferry_lab::parse_pin)]
        pub pin: Option<Pin>,

        /// Run the subscriber on another machine, through the `ferry lab agent` at HOST[:PORT]
        /// (port 7447 by default); raw-udp4 only for now (ferry's nodes cannot yet be told the
        /// other machine's address)
        #[arg(long, value_name = "HOST[:PORT]")]
        pub remote: Option<String>,

        /// 1: both sides on this host (loopback); 2: the publisher and the subscriber in two
        /// network namespaces joined by a veth pair, one pair per --link-rate (needs root, ip, tc)
        /// [default: 1]
        #[arg(long, value_name = "1|2", value_parser = clap::value_parser!(u8).range(1..=2))]
        pub hosts: Option<u8>,

        /// With --hosts 2: the link rates, comma-separated (tc tbf on both veth ends), e.g.
        /// 1gbit,100mbit; every round runs every link
        #[arg(long = "link-rate", value_name = "LIST", value_delimiter = ',', value_parser = parse_link_rate)]
        pub link_rates: Option<Vec<LinkRate>>,

        /// With --hosts 2: send one message per PERIOD (e.g. 125ms) on an absolute schedule instead
        /// of back to back, as a camera or a lidar does; rows then give each message's latency
        /// (p50, p99) beside its time on the link [default transports: udp4,tcp]
        #[arg(long, value_name = "PERIOD", value_parser = parse_seconds)]
        pub period: Option<std::time::Duration>,
    }

    /// With --hosts 2 the default transports are those that cross the link (with --period,
    /// those that send on a schedule).
    fn defaults(&self) -> Config {
        let mut defaults = Config::default();
        if self.hosts.unwrap_or(defaults.hosts) == 2 {
            defaults.transports = match self.period {
                Some(_) => PERIOD_TRANSPORTS.to_vec(),
                None => LINK_TRANSPORTS.to_vec(),
            };
        }
        defaults
    }
}
