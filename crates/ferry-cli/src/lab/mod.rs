//! `ferry lab`: the command line of the lab. Each experiment's options are read here into the
//! experiment's typed configuration (`ferry_lab::<experiment>::Config`), which the lab library
//! runs; the defaults live with the configuration, not here.

mod hubs;
mod latency;

use std::path::PathBuf;

use clap::{Args, Subcommand};
use ferry_lab::error::{Context, Result};
use ferry_lab::experiment::run_and_print;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, after_long_help = ferry_lab::studies::help())]
pub struct LabArgs {
    /// Without an experiment: run the quick suite of every experiment and write a report
    #[command(subcommand)]
    pub experiment: Option<Experiment>,

    #[command(flatten)]
    pub suite: ferry_lab::suite::SuiteArgs,
}

#[derive(Debug, Subcommand)]
pub enum Experiment {
    /// One-way latency (round trip / 2) by ping-pong between two processes, against raw
    /// shared-memory baselines measured in the same run
    Latency(latency::LatencyArgs),
    /// Messages and bits per second from a publisher sending back to back to a subscriber in
    /// another process, against plain UDP, iperf3 and sockperf measured in the same run
    Throughput(ferry_lab::throughput::ThroughputArgs),
    /// CPU used by an idle subscriber for each wait strategy (spin, block, adaptive)
    Idle(ferry_lab::idle::IdleArgs),
    /// Binary size, private memory and threads of a minimal publisher and subscriber, against
    /// Vortex Lite's footprint in the Vortex Lite performance whitepaper (ADLINK)
    Footprint(ferry_lab::footprint::FootprintArgs),
    /// Raw limits of this machine: cache-line handoff, futex wake, UDP loopback, memcpy
    Limits(ferry_lab::limits::LimitsArgs),
    /// The time of the publish call alone, by transport and size, as in the cpp-shm-stream
    /// shared-memory stream experiments (Kenta Kabashima, MusicScience37)
    SendTime(ferry_lab::sendtime::SendTimeArgs),
    /// Paced multithreaded UDP sending: the rate reached per thread count and MSS, and an
    /// automatic pool under rate changes and CPU stress, as in the multithreaded paced UDP study
    /// (Dmytro Syzov, Dmitry Kachan, Eduard Siemens, Anhalt University of Applied Sciences)
    UdpRate(ferry_lab::udprate::UdpRateArgs),
    /// The largest u32 array a cyclic writer gets to a cyclic reader per cycle time under a CPU
    /// budget, as in the Dominion UDP/shared-memory study (Giuliano Scollo, TU Braunschweig and
    /// DLR): bisection, deadline misses, overloads
    Cycle(ferry_lab::cycle::CycleArgs),
    /// Roundtrip and Flood over a ring of hub processes (a master and 3 hubs by default), on
    /// one host or two (network namespaces with an optional link rate, or another machine
    /// through a lab agent), under a CPU quota, as in the DDS Roundtrip/Flood performance study (DDS-Demonstrators project, team Hurricane, Sogeti)
    Hubs(hubs::HubsArgs),
    /// Serve the peer side of experiments to a lab on another machine (`--remote` there)
    Agent(AgentArgs),
}

/// `ferry lab agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The TCP address to listen on
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:7447")]
    pub listen: std::net::SocketAddr,

    /// The addresses of the machines whose labs may use this agent, comma-separated [default:
    /// loopback only]
    #[arg(long, value_name = "IP,...", value_delimiter = ',')]
    pub allow: Vec<String>,

    /// A domain key file that the lab must prove it has [default: FERRY_KEY_FILE, if set]
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
}

/// The hidden `ferry lab-peer` command: the other process of an experiment. Without arguments
/// it reads its request from standard input (see `ferry_lab::peer`).
#[derive(Debug, Args)]
pub struct PeerArgs {
    #[command(subcommand)]
    pub experiment: Option<PeerExperiment>,
}

#[derive(Debug, Subcommand)]
pub enum PeerExperiment {
    Throughput(ferry_lab::throughput::PeerArgs),
    Idle(ferry_lab::idle::PeerArgs),
    SendTime(ferry_lab::sendtime::PeerArgs),
    Cycle(ferry_lab::cycle::PeerArgs),
}

pub fn run(args: LabArgs) -> Result<()> {
    match args.experiment {
        Some(experiment) => run_experiment(experiment),
        None => ferry_lab::suite::run(args.suite, &run_argv),
    }
}

/// Runs an experiment from its command-line arguments (the suite's steps that are still kept
/// as arguments).
fn run_argv(argv: &[String]) -> Result<Option<()>> {
    use clap::Parser;
    #[derive(Parser)]
    #[command(name = "lab", no_binary_name = true)]
    struct One {
        #[command(subcommand)]
        experiment: Experiment,
    }
    match One::try_parse_from(argv) {
        Ok(one) => run_experiment(one.experiment).map(Some),
        Err(e) if e.kind() == clap::error::ErrorKind::InvalidSubcommand => Ok(None),
        Err(e) => Err(ferry_lab::error::Error::msg(format!(
            "the suite's arguments were refused: {}",
            e.render().to_string().lines().next().unwrap_or("")
        ))),
    }
}

pub fn run_experiment(experiment: Experiment) -> Result<()> {
    match experiment {
        Experiment::Latency(a) => {
            let json = a.json.clone();
            run_and_print::<ferry_lab::latency::Latency>(a.into_config(), json.as_deref())
        }
        Experiment::Throughput(a) => ferry_lab::throughput::run(a),
        Experiment::Idle(a) => ferry_lab::idle::run(a),
        Experiment::Footprint(a) => ferry_lab::footprint::run(a),
        Experiment::Limits(a) => ferry_lab::limits::run(a),
        Experiment::SendTime(a) => ferry_lab::sendtime::run(a),
        Experiment::UdpRate(a) => ferry_lab::udprate::run(a),
        Experiment::Cycle(a) => ferry_lab::cycle::run(a),
        Experiment::Hubs(a) => {
            let json = a.json.clone();
            run_and_print::<ferry_lab::hubs::Hubs>(a.into_config(), json.as_deref())
        }
        Experiment::Agent(a) => {
            let key = match &a.key_file {
                Some(path) => Some(ferry::udp::crypto::DomainKey::from_file(path)?),
                None => ferry::udp::crypto::DomainKey::from_env()?,
            };
            ferry_lab::agent::serve(ferry_lab::agent::AgentConfig {
                listen: a.listen,
                allow: ferry_lab::agent::parse_allow(&a.allow)?,
                key,
            })
        }
    }
}

pub fn run_peer(args: PeerArgs) -> Result<()> {
    match args.experiment {
        None => ferry_lab::peer::serve_stdio(),
        Some(PeerExperiment::Throughput(a)) => {
            ferry_lab::throughput::run_peer(a).context("lab peer")
        }
        Some(PeerExperiment::Idle(a)) => ferry_lab::idle::run_peer(a).context("lab peer"),
        Some(PeerExperiment::SendTime(a)) => ferry_lab::sendtime::run_peer(a).context("lab peer"),
        Some(PeerExperiment::Cycle(a)) => ferry_lab::cycle::run_peer(a).context("lab peer"),
    }
}
