//! `ferry lab idle`'s options.

use ferry::WaitStrategy;
use ferry_lab::args::parse_choice;
use ferry_lab::idle::{Config, SUBJECTS};
use ferry_lab::subject::Subject;

use super::options::options;

options! {
    pub struct IdleArgs fills Config for ferry_lab::idle::Idle {
        /// Wait strategies of the idle subscriber, comma-separated: spin, block, adaptive [default:
        /// block,adaptive,spin]
        #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_choice::<WaitStrategy>)]
        pub wait: Option<Vec<WaitStrategy>>,

        /// Transport of the idle pair: shm, udp4, or auto (the default of applications: shared
        /// memory here, UDP to other hosts) [default: shm]
        #[arg(long, value_name = "T", value_parser = |s: &str| SUBJECTS.parse(s))]
        pub transport: Option<Subject>,

        /// Seconds of idleness measured per strategy (after a settling pause of 0.5 s) [default: 2]
        #[arg(long, value_name = "S")]
        pub seconds: Option<f64>,
    }
}
