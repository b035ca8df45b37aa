//! `ferry lab hubs`'s options.

use ferry::WaitStrategy;
use ferry_lab::args::parse_choice;
use ferry_lab::hubs::{parse_link_rate, Config, Mode, PinMode, SUBJECTS};
use ferry_lab::netns::LinkRate;
use ferry_lab::subject::Subject;

use super::options::{options, Fill};

/// A CPU budget over every hub process: a number of CPUs, or none (clap would read an
/// `Option<Option<f64>>` as an option whose value may be left out).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuBudget(pub Option<f64>);

impl Fill<Option<f64>> for Option<CpuBudget> {
    fn fill(self, cpus: Option<f64>) -> Option<f64> {
        self.map_or(cpus, |budget| budget.0)
    }
}

fn parse_cpu_budget(text: &str) -> Result<CpuBudget, String> {
    ferry_lab::cgroup::parse_cpu(text).map(CpuBudget)
}

options! {
    pub struct HubsArgs fills Config for ferry_lab::hubs::Hubs {
        /// roundtrip (one message around the ring at a time, each lap timed) or flood (--messages
        /// back to back, timed until all are back); comma-separated to run both [default:
        /// roundtrip]
        #[arg(long, value_name = "MODE", value_delimiter = ',', value_parser = parse_choice::<Mode>)]
        pub mode: Option<Vec<Mode>>,

        /// Processes in the ring, the master included (the study: 4 — a master and 3 hubs)
        /// [default: 4]
        #[arg(long, value_name = "N")]
        pub hubs: Option<usize>,

        /// Recorded laps per round (roundtrip) or messages per flood (the study: 1000) [default:
        /// 1000]
        #[arg(long, value_name = "N")]
        pub messages: Option<u64>,

        /// Message size in bytes, with optional K, M or G (the study gives none; 256 B is a small one)
        /// [default: 256]
        #[arg(long, value_name = "BYTES", value_parser = ferry_lab::units::parse_size)]
        pub size: Option<usize>,

        /// Transports, comma-separated, in the order each round runs them: shm, udp4 (udp is read
        /// as udp4), auto [default: shm,udp4]
        #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = |s: &str| SUBJECTS.parse(s))]
        pub transport: Option<Vec<Subject>>,

        /// Interleaved rounds: every round runs every mode and transport once, each a fresh ring
        /// [default: 3]
        #[arg(long, value_name = "R")]
        pub rounds: Option<usize>,

        /// Unrecorded laps (roundtrip) or messages of an unrecorded flood before each measurement
        /// [default: 100]
        #[arg(long, value_name = "N")]
        pub warmup: Option<u64>,

        /// 1: every process on this host; 2: two network namespaces joined by a veth pair, the
        /// master and the even hubs in one, the odd hubs in the other (needs root, ip), or with
        /// --remote two machines [default: 1]
        #[arg(long, value_name = "1|2", value_parser = clap::value_parser!(u8).range(1..=2))]
        pub hosts: Option<u8>,

        /// With --hosts 2: limit the veth link to RATE (tc tbf on both ends), e.g. 100mbit, 1gbit
        #[arg(long = "link-rate", value_name = "RATE", value_parser = parse_link_rate)]
        pub link_rate: Option<LinkRate>,

        /// Put every hub process (the master included) in one cgroup with a CPU quota of Q CPUs,
        /// standing in for slower CPUs (needs root), or none [default: none]
        #[arg(long, value_name = "Q", value_parser = parse_cpu_budget)]
        pub cpu: Option<CpuBudget>,

        /// How every process waits for a message: block (the default here: the processes outnumber
        /// the CPUs, and a waiter that spins holds a CPU the next hub needs), adaptive (ferry's
        /// default: spins 100 µs, then blocks) or spin [default: block]
        #[arg(long, value_name = "W", value_parser = parse_choice::<WaitStrategy>)]
        pub wait: Option<WaitStrategy>,

        /// spread: process i runs on the i-th CPU this process may use (round robin); none: the
        /// scheduler places them [default: spread]
        #[arg(long, value_name = "spread|none", value_parser = parse_choice::<PinMode>)]
        pub pin: Option<PinMode>,

        /// With --hosts 2: run the odd hubs on another machine, through the `ferry lab agent` at
        /// HOST[:PORT] (port 7447 by default; an IPv4 address or a name that has one), instead of
        /// in a network namespace here (no root needed); the master and the even hubs run here
        #[arg(long, value_name = "HOST[:PORT]")]
        pub remote: Option<String>,

        /// Testing: hub 1 exits (status 3) after forwarding N messages, to show how a dead hub is
        /// reported
        #[arg(long = "fault-hub-exit-after", value_name = "N", hide = true)]
        pub fault_hub_exit_after: Option<u64>,
    }
}
