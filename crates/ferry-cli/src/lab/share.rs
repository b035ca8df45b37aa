//! `ferry lab share`'s options.

use ferry_lab::args::parse_choice;
use ferry_lab::netns::{parse_link_rate, LinkRate};
use ferry_lab::share::{Competitor, Config};

use super::options::options;

options! {
    pub struct ShareArgs fills Config for ferry_lab::share::Share {
        /// What shares the link with the ferry flow, comma-separated, each in a run of its own:
        /// ferry (a second ferry flow), tcp (one TCP flow, iperf3) [default: ferry,tcp]
        #[arg(long = "competitor", value_name = "LIST", value_delimiter = ',', value_parser = parse_choice::<Competitor>)]
        pub competitors: Option<Vec<Competitor>>,

        /// The link rates, comma-separated (tc tbf on both veth ends), e.g. 100mbit,1gbit; every
        /// round runs every link [default: 100mbit,1gbit]
        #[arg(long = "link-rate", value_name = "LIST", value_delimiter = ',', value_parser = parse_link_rate)]
        pub link_rates: Option<Vec<LinkRate>>,

        /// Seconds of the measured interval, the same for both flows, from 2 s after the other flow
        /// started (a whole number with tcp) [default: 8]
        #[arg(long, value_name = "S")]
        pub seconds: Option<f64>,

        /// Seconds from the start of the ferry flow to the start of the other flow [default: 4]
        #[arg(long, value_name = "S")]
        pub delay: Option<f64>,

        /// Rounds: every round runs every competitor on every link in turn [default: 1]
        #[arg(long, value_name = "N")]
        pub rounds: Option<usize>,
    }
}
