//! `ferry lab cycle`'s options.

use ferry_lab::args::parse_choice;
use ferry_lab::cycle::{parse_budget, Budget, Config, DeliveryChoice, Placement, SUBJECTS};
use ferry_lab::subject::Subject;

use super::options::options;

options! {
    pub struct CycleArgs fills Config for ferry_lab::cycle::Cycle {
        /// Transports, comma-separated: shm, udp4 (ferry over UDP; udp is read as udp4) [default:
        /// shm,udp4]
        #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = |s: &str| SUBJECTS.parse(s))]
        pub transport: Option<Vec<Subject>>,

        /// Cycle times in milliseconds, comma-separated [default: 1,10; --study: 1,2,...,10]
        #[arg(long = "cycle-ms", value_name = "LIST", value_delimiter = ',')]
        pub cycle_ms: Option<Vec<f64>>,

        /// CPU budgets over both processes (a cgroup CPU quota), comma-separated: CPUs such as
        /// 0.05, 0.3, 1.5, or none for unlimited [default: 0.3; --study: 0.3,1.5]
        #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_budget)]
        pub cpu: Option<Vec<Budget>>,

        /// Where the two apps run, comma-separated: one-cpu (both pinned to one CPU), two-cpus (one
        /// each), scheduler (not pinned, as the study's containers) [default: one-cpu,scheduler]
        #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_choice::<Placement>)]
        pub placement: Option<Vec<Placement>>,

        /// Cycles per run (the study's 1000: fewer than ten 100 ms quota periods flatter the
        /// figure) [default: 1000]
        #[arg(long, value_name = "N")]
        pub cycles: Option<u64>,

        /// Percent of cycles that must arrive complete and intact for a run to pass [default:
        /// 99.95]
        #[arg(long, value_name = "PCT")]
        pub success: Option<f64>,

        /// Bisections per (transport, cycle time, CPU budget); the transports alternate [default:
        /// 1]
        #[arg(long, value_name = "K")]
        pub repeat: Option<u32>,

        /// The largest multiplicity tried (u32 elements per cycle) [default: 4000000; --study:
        /// 1000000]
        #[arg(long = "max-multiplicity", value_name = "N")]
        pub max_multiplicity: Option<u64>,

        /// The bisection stops when its good and bad bounds are at most max(2, PCT % of the good
        /// one) apart [default: 2; --study: 0, the study's step of 2]
        #[arg(long, value_name = "PCT")]
        pub resolution: Option<f64>,

        /// Delivery: study (shm reliable: nothing lost, read in place; udp latest: no repair, as
        /// the study's plain UDP), latest (both: the writer never waits) or reliable (both)
        /// [default: study]
        #[arg(long, value_name = "D", value_parser = parse_choice::<DeliveryChoice>)]
        pub delivery: Option<DeliveryChoice>,

        /// Microseconds each app spins before a deadline instead of sleeping. Spinning is paid from
        /// the CPU budget (50 µs per cycle per app is 10 % of a CPU at 1 ms), so the lab sleeps
        /// only and counts the kernel's wake-up delay as lateness (the library's default is 50)
        /// [default: 0]
        #[arg(long = "spin-us", value_name = "US")]
        pub spin_us: Option<u64>,

        /// A run that fails within its CPU budget while the hypervisor took at least this many
        /// milliseconds of CPU from this machine (steal, /proc/stat) is void and run again, at most
        /// twice; 0: never. Every run stays in the results [default: 50]
        #[arg(long = "steal-retry-ms", value_name = "MS")]
        pub steal_retry_ms: Option<f64>,

        /// A cycle that begins later than this percentage of the period is a deadline miss
        /// [default: 10]
        #[arg(long = "tolerance-pct", value_name = "PCT")]
        pub tolerance_pct: Option<f64>,

        /// The study's parameters where not given: cycle times 1..10 ms, 0.3 and 1.5 CPU, limit
        /// 1 000 000, step 2 (long: hours)
        #[arg(long)]
        pub study: bool,
    }
}
