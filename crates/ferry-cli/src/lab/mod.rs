//! `ferry lab`: the command line of the lab. Each experiment's options are read here into the
//! experiment's typed configuration (`ferry_lab::<experiment>::Config`), which the lab library
//! runs; the defaults live with the configuration, not here.

mod cycle;
mod fanout;
mod footprint;
mod hubs;
mod idle;
mod latency;
mod limits;
mod options;
mod sendtime;
mod share;
mod throughput;
mod udprate;

use std::path::PathBuf;

use clap::{Args, Subcommand};
use ferry_lab::error::{Context, Result};
use options::Run;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, after_long_help = ferry_lab::studies::help())]
pub struct LabArgs {
    /// Without an experiment: run the quick suite of every experiment and write a report
    #[command(subcommand)]
    pub experiment: Option<Experiment>,

    #[command(flatten)]
    pub suite: SuiteArgs,
}

/// The suite's options (`ferry lab` without an experiment).
#[derive(Debug, Args, Default)]
pub struct SuiteArgs {
    /// Suite: use the parameters of the published studies (10 000 samples, 5 rounds, ...): tens
    /// of minutes
    #[arg(long)]
    pub full: bool,

    /// Suite: the report directory
    #[arg(long, value_name = "DIR", default_value = "ferry-report")]
    pub out: PathBuf,

    /// Suite: tiny parameters everywhere (for tests); the figures mean nothing
    #[arg(long, hide = true)]
    pub smoke: bool,

    /// Suite: experiments to leave out, comma-separated (e.g. throughput,footprint)
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub skip: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum Experiment {
    /// One-way latency (round trip / 2) by ping-pong between two processes, against raw
    /// shared-memory baselines measured in the same run
    Latency(Run<latency::LatencyArgs>),
    /// Messages and bits per second from a publisher sending back to back to a subscriber in
    /// another process, against plain UDP, iperf3 and sockperf measured in the same run
    Throughput(Run<throughput::ThroughputArgs>),
    /// How a ferry flow shares a rate-limited link with one TCP flow or a second ferry flow
    Share(Run<share::ShareArgs>),
    /// CPU used by an idle subscriber for each wait strategy (spin, block, adaptive)
    Idle(Run<idle::IdleArgs>),
    /// What the other subscribers of a latest UDP publisher get beside one slow subscriber,
    /// against what they get alone
    Fanout(Run<fanout::FanoutArgs>),
    /// Binary size, private memory and threads of a minimal publisher and subscriber, against
    /// Vortex Lite's footprint in the Vortex Lite performance whitepaper (ADLINK)
    Footprint(Run<footprint::FootprintArgs>),
    /// Raw limits of this machine: cache-line handoff, futex wake, UDP loopback, memcpy
    Limits(Run<limits::LimitsArgs>),
    /// The time of the publish call alone, by transport and size, as in the cpp-shm-stream
    /// shared-memory stream experiments (Kenta Kabashima, MusicScience37)
    SendTime(Run<sendtime::SendTimeArgs>),
    /// Paced multithreaded UDP sending: the rate reached per thread count and MSS, and an
    /// automatic pool under rate changes and CPU stress, as in the multithreaded paced UDP study
    /// (Dmytro Syzov, Dmitry Kachan, Eduard Siemens, Anhalt University of Applied Sciences)
    UdpRate(Run<udprate::UdpRateArgs>),
    /// The largest u32 array a cyclic writer gets to a cyclic reader per cycle time under a CPU
    /// budget, as in the Dominion UDP/shared-memory study (Giuliano Scollo, TU Braunschweig and
    /// DLR): bisection, deadline misses, overloads
    Cycle(Run<cycle::CycleArgs>),
    /// Roundtrip and Flood over a ring of hub processes (a master and 3 hubs by default), on
    /// one host or two (network namespaces with an optional link rate, or another machine
    /// through a lab agent), under a CPU quota, as in the DDS Roundtrip/Flood performance study (DDS-Demonstrators project, team Hurricane, Sogeti)
    Hubs(Run<hubs::HubsArgs>),
    /// Serve the peer side of experiments to a lab on another machine (`--remote` there)
    Agent(AgentArgs),
    /// Rebuild a report from results alone, without measuring; several results (one per
    /// machine) are shown side by side
    Report(ReportArgs),
    /// Print the JSON schema of results.json and of every experiment's results
    Schema,
}

/// `ferry lab report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// results.json files, or report directories holding one; give several to compare machines
    #[arg(value_name = "RESULTS", required = true)]
    pub inputs: Vec<PathBuf>,

    /// The report directory to write
    #[arg(long, value_name = "DIR", default_value = "ferry-report")]
    pub out: PathBuf,
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

/// The hidden `ferry lab-peer` command: the other process of an experiment. It reads its
/// request from standard input (see `ferry_lab::peer`).
#[derive(Debug, Args)]
pub struct PeerArgs {
    /// Started by `ferry lab agent` for a lab on another machine
    #[arg(long)]
    pub for_agent: bool,
}

pub fn run(args: LabArgs) -> Result<()> {
    match args.experiment {
        Some(experiment) => run_experiment(experiment),
        None => {
            use ferry_lab::suite::{Level, Options};
            let s = args.suite;
            ferry_lab::suite::run(Options {
                level: if s.smoke {
                    Level::Smoke
                } else if s.full {
                    Level::Full
                } else {
                    Level::Quick
                },
                out: s.out,
                skip: s.skip,
            })
        }
    }
}

pub fn run_experiment(experiment: Experiment) -> Result<()> {
    match experiment {
        Experiment::Latency(a) => a.run(),
        Experiment::Throughput(a) => a.run(),
        Experiment::Share(a) => a.run(),
        Experiment::Idle(a) => a.run(),
        Experiment::Fanout(a) => a.run(),
        Experiment::Footprint(a) => a.run(),
        Experiment::Limits(a) => a.run(),
        Experiment::SendTime(a) => a.run(),
        Experiment::UdpRate(a) => a.run(),
        Experiment::Cycle(a) => a.run(),
        Experiment::Hubs(a) => a.run(),
        Experiment::Report(a) => {
            ferry_lab::report::rebuild(&a.inputs, &a.out)?;
            ferry_lab::note!("wrote {}", a.out.join("index.html").display());
            Ok(())
        }
        Experiment::Schema => {
            let text = serde_json::to_string_pretty(&ferry_lab::results::schema())?;
            ferry_lab::table::print_out(&(text + "\n")).map(|_| ())
        }
        Experiment::Agent(a) => {
            let key = match &a.key_file {
                Some(path) => Some(ferry::DomainKey::from_file(path)?),
                None => ferry::NodeConfig::from_env()?.key().cloned(),
            };
            ferry_lab::agent::serve(ferry_lab::agent::AgentConfig {
                listen: a.listen,
                allow: ferry_lab::agent::parse_allow(&a.allow)?,
                key,
                experiments: &ferry_lab::registry::EXPERIMENTS,
            })
        }
    }
}

pub fn run_peer(args: PeerArgs) -> Result<()> {
    ferry_lab::peer::serve_stdio(args.for_agent, &ferry_lab::registry::EXPERIMENTS)
        .context("lab peer")
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use ferry_lab::subject::Subject;
    use serde_json::{json, Value};

    use super::options::{ConfigOf, Fill, Options};
    use super::{cycle, fanout, footprint, hubs, idle, latency, limits};
    use super::{sendtime, share, throughput, udprate};

    #[test]
    fn lab_help_names_the_studies_by_title_and_authors() {
        use clap::CommandFactory;
        use ferry_lab::studies::{cite, reference, ALL};
        let mut cli = crate::Cli::command();
        cli.build();
        let lab = cli
            .find_subcommand_mut("lab")
            .expect("ferry lab")
            .render_long_help()
            .to_string();
        for study in ALL {
            // An experiment's line cites it; the list at the end gives authors and title.
            for name in [cite(study), reference(study)] {
                assert!(
                    lab.contains(&name),
                    "`ferry lab --help` lacks {name:?}:\n{lab}"
                );
            }
        }
    }

    /// An experiment's options alone on a command line.
    #[derive(Debug, Parser)]
    struct Line<O: Options> {
        #[command(flatten)]
        options: O,
    }

    /// The configuration read from `args`, as JSON.
    fn config<O: Options + Fill<ConfigOf<O>>>(args: &[&str]) -> Value {
        let line = Line::<O>::try_parse_from(std::iter::once("lab").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        serde_json::to_value(line.options.into_config()).unwrap()
    }

    fn defaults<O: Options + Fill<ConfigOf<O>>>() {
        let expected = serde_json::to_value(ConfigOf::<O>::default()).unwrap();
        assert_eq!(config::<O>(&[]), expected, "{}", std::any::type_name::<O>());
    }

    #[test]
    fn without_options_an_experiment_gets_its_configurations_defaults() {
        defaults::<latency::LatencyArgs>();
        defaults::<throughput::ThroughputArgs>();
        defaults::<share::ShareArgs>();
        defaults::<idle::IdleArgs>();
        defaults::<fanout::FanoutArgs>();
        defaults::<footprint::FootprintArgs>();
        defaults::<limits::LimitsArgs>();
        defaults::<sendtime::SendTimeArgs>();
        defaults::<udprate::UdpRateArgs>();
        defaults::<cycle::CycleArgs>();
        defaults::<hubs::HubsArgs>();
    }

    #[test]
    fn options_given_replace_the_defaults_and_leave_the_others() {
        let latency = config::<latency::LatencyArgs>(&["--samples", "7", "--pin", "none"]);
        assert_eq!(latency["samples"], 7);
        assert_eq!(latency["pin"], json!("none"));
        assert_eq!(latency["rounds"], 5);

        let cycle = config::<cycle::CycleArgs>(&["--study", "--cycle-ms", "2"]);
        assert_eq!(
            (&cycle["study"], &cycle["cycle_ms"]),
            (&json!(true), &json!([2.0]))
        );
        assert_eq!(cycle["cpu"], Value::Null);

        let hubs = config::<hubs::HubsArgs>(&["--cpu", "0.5"]);
        assert_eq!(hubs["cpu"], 0.5);
        assert_eq!(
            config::<hubs::HubsArgs>(&["--cpu", "none"])["cpu"],
            Value::Null
        );

        let share = config::<share::ShareArgs>(&["--link-rate", "1gbit"]);
        assert_eq!(share["link_rates"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn throughputs_default_transports_follow_hosts_and_period() {
        let transports = |args: &[&str]| {
            let config = config::<throughput::ThroughputArgs>(args);
            serde_json::from_value::<Vec<Subject>>(config["transports"].clone()).unwrap()
        };
        let link = ["--hosts", "2", "--link-rate", "1gbit"];
        assert_eq!(transports(&link), ferry_lab::throughput::LINK_TRANSPORTS);
        assert_eq!(
            transports(&[&link[..], &["--period", "125ms"]].concat()),
            ferry_lab::throughput::PERIOD_TRANSPORTS
        );
        assert_eq!(
            transports(&[&link[..], &["--period", "1s", "--transport", "udp4"]].concat()),
            [Subject::Udp4]
        );
        let one_host = ferry_lab::throughput::Config::default().transports;
        assert_eq!(transports(&["--period", "1s"]), one_host);
        let duration = config::<throughput::ThroughputArgs>(&["--duration", "250ms"]);
        assert_eq!(duration["duration"], 0.25);
    }
}
