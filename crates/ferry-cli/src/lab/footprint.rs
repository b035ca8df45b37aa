//! `ferry lab footprint`'s options.

use std::path::PathBuf;

use ferry_lab::footprint::{Config, SUBJECTS};
use ferry_lab::subject::Subject;

use super::options::options;

options! {
    pub struct FootprintArgs fills Config for ferry_lab::footprint::Footprint {
        /// Transports to run the pair on, comma-separated: shm, udp4 (ferry over UDP; udp is read
        /// as udp4) [default: shm,udp4]
        #[arg(long = "transport", value_name = "LIST", value_delimiter = ',', value_parser = |s: &str| SUBJECTS.parse(s))]
        pub transports: Option<Vec<Subject>>,

        /// Seconds each pair runs (memory is read near the end) [default: 2]
        #[arg(long, value_name = "S")]
        pub seconds: Option<f64>,

        /// Where min-pub and min-sub are [default: the min-size profile's directory,
        /// target/min-size]
        #[arg(long, value_name = "DIR")]
        pub bin_dir: Option<PathBuf>,

        /// Build the apps with cargo first if they are missing (when run from the source tree)
        #[arg(long)]
        pub build: bool,
    }
}
