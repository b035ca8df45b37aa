//! Every experiment of the lab, on the floor above them all: the suite runs them in this order,
//! the report shows them in it, and the peer process and the agent receive this list to serve
//! the one a main side names.

use crate::experiment::{Entry, Registry};

/// Every experiment, in the order the suite runs them and the report shows them.
pub static EXPERIMENTS: Registry = Registry(&[
    &Entry::<crate::limits::Limits>::NEW,
    &Entry::<crate::latency::Latency>::NEW,
    &Entry::<crate::sendtime::SendTime>::NEW,
    &Entry::<crate::throughput::Throughput>::NEW,
    &Entry::<crate::share::Share>::NEW,
    &Entry::<crate::idle::Idle>::NEW,
    &Entry::<crate::fanout::Fanout>::NEW,
    &Entry::<crate::footprint::Footprint>::NEW,
    &Entry::<crate::hubs::Hubs>::NEW,
    &Entry::<crate::udprate::UdpRate>::NEW,
    &Entry::<crate::cycle::Cycle>::NEW,
]);

#[cfg(test)]
mod tests {
    use crate::args::tests::check;

    /// Every experiment's own choices have distinct names that round
    /// trip through JSON.
    #[test]
    fn every_experiments_choices_have_distinct_names_that_round_trip_through_json() {
        check::<crate::cycle::Placement>();
        check::<crate::cycle::DeliveryChoice>();
        check::<crate::cycle::Role>();
        check::<crate::footprint::App>();
        check::<crate::hubs::Mode>();
        check::<crate::hubs::PinMode>();
        check::<crate::limits::Kind>();
        check::<crate::throughput::RowDelivery>();
        check::<crate::udprate::Pacing>();
        check::<crate::udprate::ThreadsMode>();
    }

    #[test]
    fn names_are_distinct_and_found() {
        let names: Vec<&str> = super::EXPERIMENTS.iter().map(|e| e.name()).collect();
        for (i, name) in names.iter().enumerate() {
            assert!(!names[i + 1..].contains(name), "{name} twice");
            assert_eq!(super::EXPERIMENTS.find(name).unwrap().name(), *name);
        }
        let e = match super::EXPERIMENTS.find("nothing") {
            Ok(_) => panic!("found"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("no experiment is named \"nothing\"") && e.contains("latency"),
            "{e}"
        );
        assert!(super::EXPERIMENTS.across_machines().contains(&"hubs"));
    }
}
