//! `ferry lab` with no subcommand: the default suite. It runs every experiment this build has,
//! with small parameters (a few minutes on 2 CPUs; `--full` uses the published studies'
//! parameters), and
//! writes a report directory (default `ferry-report/`): `results.json` (an array with one object
//! per experiment, each in the common results format), the experiment's own JSON and a CSV per
//! experiment, SVG plots and `index.html` (see `report`).
//!
//! Experiments are called in this process through their own argument parsers, by name, so an
//! experiment that this build lacks (say `cycle`, while it is being written) is listed as "not in
//! this build" instead of breaking the suite; one that fails is recorded with its error and the
//! suite goes on.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use serde_json::Value;

use crate::error::{note, Context, Result};
use crate::experiment::{self, Experiment};
use crate::results::{self, Run, Status, Suite, SuiteResults};

/// What the suite is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub level: Level,
    /// The report directory.
    pub out: PathBuf,
    /// Steps (or experiments) to leave out.
    pub skip: Vec<String>,
}

crate::choice! {
    /// How much the suite measures.
    pub enum Level: "level" {
        /// Tiny parameters everywhere (for tests); the figures mean nothing.
        Smoke = "smoke",
        /// A few minutes on 2 CPUs.
        Quick = "quick",
        /// The studies' parameters: tens of minutes.
        Full = "full",
    }
}

/// A typed step's run: measures, prints, and returns the results as JSON.
type TypedRun = Box<dyn FnOnce() -> Result<Value>>;

/// One experiment of the suite and its typed configuration at each level.
struct Step {
    /// The experiment (`ferry lab NAME`).
    name: &'static str,
    /// Its results' file stem and heading in the report (one experiment may run twice).
    file: &'static str,
    /// Its run at a level; `None` at a level the step is left out of.
    plan: fn(Level) -> Option<TypedRun>,
}

/// A run of `E` with `config`: measures, prints its table, returns its results.
fn typed<E: Experiment>(config: E::Config) -> TypedRun {
    Box::new(move || {
        let results = experiment::measure::<E>(config)?;
        crate::table::print_out(&E::table(&results))?;
        Ok(serde_json::to_value(&results)?)
    })
}

fn limits(level: Level) -> Option<TypedRun> {
    use crate::limits::{Config, Limits};
    let config = match level {
        Level::Smoke => Config {
            samples: 200,
            memcpy_seconds: 0.01,
            memcpy_max: 1 << 20,
        },
        Level::Quick => Config {
            samples: 5000,
            memcpy_seconds: 0.1,
            ..Config::default()
        },
        Level::Full => Config::default(),
    };
    Some(typed::<Limits>(config))
}

fn latency(level: Level) -> Option<TypedRun> {
    use crate::latency::{Config, Latency};
    let config = match level {
        Level::Smoke => Config {
            samples: 20,
            rounds: 1,
            warmup: 10,
            sizes: vec![32, 1 << 10],
            ..Config::default()
        },
        Level::Quick => Config {
            samples: 2000,
            rounds: 2,
            ..Config::default()
        },
        Level::Full => Config::default(),
    };
    Some(typed::<Latency>(config))
}

/// ferry beside other systems (iceoryx2; Zenoh with and without its shared memory in the full
/// suite, a longer build), built on first use (crates/ferry-peers); not in the smoke suite. Without the build (no cargo or no source tree here) the step fails and names
/// the command.
fn latency_peers(level: Level) -> Option<TypedRun> {
    use crate::latency::{Config, Latency};
    use crate::subject::Subject;
    let config = match level {
        Level::Smoke => return None,
        Level::Quick => Config {
            transports: vec![Subject::ShmSpin, Subject::Iceoryx2],
            sizes: vec![32, 1 << 10],
            samples: 2000,
            rounds: 2,
            ..Config::default()
        },
        Level::Full => Config {
            transports: vec![
                Subject::RawSpin,
                Subject::ShmSpin,
                Subject::Iceoryx2,
                Subject::Zenoh,
                Subject::ZenohShm,
                Subject::RawFutex,
                Subject::ShmBlock,
                Subject::Iceoryx2Block,
            ],
            ..Config::default()
        },
    };
    Some(typed::<Latency>(config))
}

/// ferry's shared memory beside the other systems' delivered rates (full suite only: Zenoh's
/// build takes minutes), at the sizes of the comparison: 64 B, 1 KiB, 64 KiB.
fn throughput_peers(level: Level) -> Option<TypedRun> {
    use crate::subject::Subject;
    use crate::throughput::{Config, Throughput};
    let config = match level {
        Level::Smoke | Level::Quick => return None,
        Level::Full => Config {
            transports: vec![
                Subject::Shm,
                Subject::Iceoryx2,
                Subject::Zenoh,
                Subject::ZenohShm,
            ],
            sizes: vec![64, 1 << 10, 64 << 10],
            ..Config::default()
        },
    };
    Some(typed::<Throughput>(config))
}

fn throughput(level: Level) -> Option<TypedRun> {
    use crate::throughput::{Config, Throughput};
    let config = match level {
        Level::Smoke => Config {
            duration: 0.2,
            rounds: 1,
            sizes: vec![64],
            ..Config::default()
        },
        Level::Quick => Config {
            duration: 1.0,
            rounds: 2,
            ..Config::default()
        },
        Level::Full => Config::default(),
    };
    Some(typed::<Throughput>(config))
}

/// ferry's reliable UDP across a rate-limited link between two network namespaces, beside
/// iperf3 over TCP (and, in the full suite, plain UDP and iperf3 over UDP) in the same rounds.
/// Root only: without it the step fails and says why, as the two-host hubs step does.
fn throughput_link(level: Level) -> Option<TypedRun> {
    use crate::netns::parse_link_rate;
    use crate::subject::Subject;
    use crate::throughput::{Config, Throughput, LINK_TRANSPORTS};
    let rate = |r: &str| parse_link_rate(r).expect("a valid rate");
    let config = match level {
        Level::Smoke => return None,
        Level::Quick => Config {
            transports: vec![Subject::Udp4, Subject::Iperf3Tcp],
            sizes: vec![64 << 10],
            duration: 2.0,
            rounds: 1,
            hosts: 2,
            link_rates: vec![rate("100mbit")],
            ..Config::default()
        },
        Level::Full => Config {
            transports: LINK_TRANSPORTS.to_vec(),
            sizes: vec![1 << 10, 64 << 10],
            hosts: 2,
            link_rates: vec![rate("1gbit"), rate("100mbit")],
            ..Config::default()
        },
    };
    Some(typed::<Throughput>(config))
}

/// Periodic large messages across the link (a camera's 1 MiB at 8 Hz, two thirds of 100 Mbit/s),
/// ferry beside the lab's TCP stream sending the same messages on the same schedule: goodput,
/// packets and drops on the link, and each message's latency beside its time on the link. Root
/// only, as the step before.
fn throughput_periodic(level: Level) -> Option<TypedRun> {
    use crate::netns::parse_link_rate;
    use crate::throughput::{Config, Throughput, PERIOD_TRANSPORTS};
    let rate = |r: &str| parse_link_rate(r).expect("a valid rate");
    let periodic = Config {
        transports: PERIOD_TRANSPORTS.to_vec(),
        sizes: vec![1 << 20],
        hosts: 2,
        period: Some(0.125),
        ..Config::default()
    };
    let config = match level {
        Level::Smoke => return None,
        Level::Quick => Config {
            duration: 2.0,
            rounds: 1,
            link_rates: vec![rate("100mbit")],
            ..periodic
        },
        Level::Full => Config {
            duration: 5.0,
            link_rates: vec![rate("1gbit"), rate("100mbit")],
            ..periodic
        },
    };
    Some(typed::<Throughput>(config))
}

/// How a ferry flow shares the link with one TCP flow (iperf3) and with a second ferry flow:
/// each flow's goodput over the same interval and ferry's share. Root only, as the steps
/// before.
fn share(level: Level) -> Option<TypedRun> {
    use crate::netns::parse_link_rate;
    use crate::share::{Competitor, Config, Share};
    let config = match level {
        Level::Smoke => return None,
        Level::Quick => Config {
            competitors: vec![Competitor::Tcp, Competitor::Ferry],
            link_rates: vec![parse_link_rate("100mbit").expect("a valid rate")],
            seconds: 5.0,
            ..Config::default()
        },
        Level::Full => Config::default(),
    };
    Some(typed::<Share>(config))
}

fn udp_rate(level: Level) -> Option<TypedRun> {
    use crate::udprate::{Config, UdpRate};
    let config = match level {
        Level::Smoke => return None,
        // A rate one thread cannot reach with small datagrams on this kind of machine, so that
        // the plot shows what a second thread adds (that study's figures 2-4).
        Level::Quick => Config {
            duration: 3.0,
            rate: vec![3_000_000_000],
            ..Config::default()
        },
        Level::Full => Config::default(),
    };
    Some(typed::<UdpRate>(config))
}

fn udp_rate_auto(level: Level) -> Option<TypedRun> {
    use crate::udprate::{Config, UdpRate};
    let quick = Config {
        threads: crate::udprate::ThreadCounts::Auto,
        mss: vec![1472],
        rate: vec![1_000_000_000],
        rate_change: Some(4_000_000_000),
        duration: 4.0,
        ..Config::default()
    };
    let config = match level {
        Level::Smoke => return None,
        Level::Quick => quick,
        Level::Full => Config {
            stress: 1,
            duration: 10.0,
            ..quick
        },
    };
    Some(typed::<UdpRate>(config))
}

fn cycle(level: Level) -> Option<TypedRun> {
    use crate::cycle::{Config, Cycle};
    let config = match level {
        // It needs cgroups.
        Level::Smoke => return None,
        Level::Quick => Config {
            cycle_ms: Some(vec![1.0]),
            max_multiplicity: Some(2_000_000),
            resolution: Some(5.0),
            ..Config::default()
        },
        Level::Full => Config {
            cycle_ms: Some(vec![1.0, 5.0]),
            repeat: 3,
            resolution: Some(5.0),
            ..Config::default()
        },
    };
    Some(typed::<Cycle>(config))
}

fn send_time(level: Level) -> Option<TypedRun> {
    use crate::sendtime::{Config, SendTime};
    let config = match level {
        Level::Smoke => Config {
            samples: 20,
            warmup: 5,
            sizes: vec![32, 1 << 10],
            ..Config::default()
        },
        Level::Quick => Config {
            samples: 2000,
            sizes: vec![32, 1 << 10, 32 << 10, 1 << 20],
            ..Config::default()
        },
        Level::Full => Config::default(),
    };
    Some(typed::<SendTime>(config))
}

fn idle(level: Level) -> Option<TypedRun> {
    use crate::idle::{Config, Idle};
    let config = match level {
        Level::Smoke => Config {
            seconds: 0.2,
            ..Config::default()
        },
        Level::Quick => Config {
            seconds: 1.0,
            ..Config::default()
        },
        Level::Full => Config::default(),
    };
    Some(typed::<Idle>(config))
}

/// One slow latest subscriber beside the others of a UDP publisher: what they get with it, set
/// against what they get alone.
fn fanout(level: Level) -> Option<TypedRun> {
    use crate::fanout::{Config, Fanout};
    let config = match level {
        Level::Smoke => Config {
            seconds: 0.3,
            rate: 500.0,
            rounds: 1,
            ..Config::default()
        },
        Level::Quick => Config {
            seconds: 1.0,
            rounds: 3,
            ..Config::default()
        },
        Level::Full => Config {
            rounds: 5,
            ..Config::default()
        },
    };
    Some(typed::<Fanout>(config))
}

fn footprint(level: Level) -> Option<TypedRun> {
    use crate::footprint::{Config, Footprint};
    let config = match level {
        Level::Smoke => Config {
            seconds: 0.6,
            ..Config::default()
        },
        Level::Quick => Config {
            seconds: 2.0,
            build: true,
            ..Config::default()
        },
        Level::Full => Config {
            build: true,
            ..Config::default()
        },
    };
    Some(typed::<Footprint>(config))
}

fn hubs(level: Level) -> Option<TypedRun> {
    use crate::hubs::{Config, Hubs, Mode};
    let both = vec![Mode::Roundtrip, Mode::Flood];
    let config = match level {
        Level::Smoke => Config {
            mode: both,
            messages: 20,
            rounds: 1,
            warmup: 5,
            ..Config::default()
        },
        Level::Quick => Config {
            mode: both,
            ..Config::default()
        },
        Level::Full => Config {
            mode: both,
            rounds: 5,
            ..Config::default()
        },
    };
    Some(typed::<Hubs>(config))
}

fn hubs_2hosts(level: Level) -> Option<TypedRun> {
    use crate::hubs::{parse_link_rate, Config, Hubs, Mode};
    use crate::subject::Subject;
    let config = Config {
        mode: vec![Mode::Roundtrip, Mode::Flood],
        hosts: 2,
        transport: vec![Subject::Udp4],
        link_rate: Some(parse_link_rate("100mbit").expect("a valid rate")),
        ..Config::default()
    };
    let config = match level {
        Level::Smoke => return None,
        Level::Quick => config,
        Level::Full => Config {
            rounds: 5,
            ..config
        },
    };
    Some(typed::<Hubs>(config))
}

/// Every step of the suite, in the order it runs them.
const STEPS: &[Step] = &[
    Step {
        name: "limits",
        file: "limits",
        plan: limits,
    },
    Step {
        name: "latency",
        file: "latency",
        plan: latency,
    },
    Step {
        name: "latency",
        file: "latency-peers",
        plan: latency_peers,
    },
    Step {
        name: "send-time",
        file: "send-time",
        plan: send_time,
    },
    Step {
        name: "throughput",
        file: "throughput",
        plan: throughput,
    },
    Step {
        name: "throughput",
        file: "throughput-peers",
        plan: throughput_peers,
    },
    // The same across a rate-limited link between two network namespaces (root only; without
    // it the step fails and says why), beside iperf3 over TCP.
    Step {
        name: "throughput",
        file: "throughput-link",
        plan: throughput_link,
    },
    Step {
        name: "throughput",
        file: "throughput-periodic",
        plan: throughput_periodic,
    },
    // How a ferry flow shares that link with TCP and with a second ferry flow (root only).
    Step {
        name: "share",
        file: "share",
        plan: share,
    },
    Step {
        name: "idle",
        file: "idle",
        plan: idle,
    },
    Step {
        name: "fanout",
        file: "fanout",
        plan: fanout,
    },
    Step {
        name: "footprint",
        file: "footprint",
        plan: footprint,
    },
    // The DDS hubs (the DDS-Demonstrators performance study): a ring of 4 processes on one host,
    // then split over two network namespaces joined by a 100 Mbit/s veth (root only; without it the
    // step fails and says why).
    Step {
        name: "hubs",
        file: "hubs",
        plan: hubs,
    },
    Step {
        name: "hubs",
        file: "hubs-2hosts",
        plan: hubs_2hosts,
    },
    // The paced multithreaded UDP sender (the Syzov, Kachan, Siemens study); not in the smoke
    // suite.
    Step {
        name: "udp-rate",
        file: "udp-rate",
        plan: udp_rate,
    },
    // The same with an automatic pool: the rate asked for rises at mid-run beyond what one
    // thread sends, and the manager adds a sender (the timeline plot); `--full` also starts a
    // CPU stressor then.
    Step {
        name: "udp-rate",
        file: "udp-rate-auto",
        plan: udp_rate_auto,
    },
    // The cyclic experiment (the Dominion study) at its headline point, 1 ms and 0.3 CPU, with
    // 1000-cycle runs (ten quota periods), both apps on one CPU and placed by the kernel; not in
    // the smoke suite (it needs cgroups). `--full` adds 5 ms and three repeats, not the
    // hours-long `--study`.
    Step {
        name: "cycle",
        file: "cycle",
        plan: cycle,
    },
];

/// A step's run that did not measure.
fn not_run(step: &Step, status: Status, note: String) -> Run {
    Run {
        step: step.file.to_owned(),
        experiment: step.name.to_owned(),
        status,
        note: Some(note),
        seconds: 0.0,
        results: None,
    }
}

fn progress_enabled() -> bool {
    std::io::stdout().is_terminal() && std::env::var("CI").map_or(true, |v| v != "true")
}

/// Runs the suite and writes its report.
pub fn run(args: Options) -> Result<()> {
    let out = &args.out;
    std::fs::create_dir_all(out).context(format!("cannot create {}", out.display()))?;
    let level_value = args.level;
    let level = level_value.name();
    for k in &args.skip {
        if !STEPS.iter().any(|s| s.name == k || s.file == k) {
            return Err(crate::error::Error::msg(format!(
                "--skip: the suite has no step {k:?}; its steps: {}",
                STEPS.iter().map(|s| s.file).collect::<Vec<_>>().join(", ")
            )));
        }
    }
    let progress = progress_enabled();
    let allowed = super::allowed_cpus();
    let started = Instant::now();
    let started_unix_s = super::unix_time();
    let mut outcomes = Vec::new();
    for (i, step) in STEPS.iter().enumerate() {
        if args.skip.iter().any(|k| k == step.name || k == step.file) {
            outcomes.push(not_run(
                step,
                Status::LeftOut,
                "left out with --skip".to_owned(),
            ));
            continue;
        }
        let Some(run) = (step.plan)(level_value) else {
            outcomes.push(not_run(
                step,
                Status::LeftOut,
                format!("left out of the {level} suite"),
            ));
            continue;
        };
        let json_path = out.join(format!("{}.json", step.file));
        let _ = std::fs::remove_file(&json_path);
        let t0 = Instant::now();
        if progress {
            println!(
                "[{}/{}] {:<11} running ({level}) ...",
                i + 1,
                STEPS.len(),
                step.file
            );
        }
        let outcome: Result<Option<Value>> = run().and_then(|v| {
            experiment::write_json(&json_path, &v)?;
            Ok(Some(v))
        });
        // Experiments pin this thread; give the next one every CPU again.
        super::limits::restore_affinity(&allowed);
        let seconds = t0.elapsed().as_secs_f64();
        let run = match outcome {
            Ok(results) => Run {
                step: step.file.to_owned(),
                experiment: step.name.to_owned(),
                status: Status::Ok,
                note: None,
                seconds,
                results,
            },
            Err(e) => {
                note!("ferry lab: {} failed: {e}", step.file);
                Run {
                    step: step.file.to_owned(),
                    experiment: step.name.to_owned(),
                    status: Status::Failed,
                    note: Some(e.to_string()),
                    seconds,
                    results: None,
                }
            }
        };
        if progress {
            println!(
                "[{}/{}] {:<11} {} ({seconds:.1} s)",
                i + 1,
                STEPS.len(),
                step.file,
                run.describe()
            );
        }
        let stop = crate::signal::interrupted();
        outcomes.push(run);
        if stop {
            break;
        }
    }

    let document = SuiteResults::new(
        Suite {
            level: level.to_owned(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            seconds: started.elapsed().as_secs_f64(),
            started_unix_s,
        },
        outcomes,
    );
    experiment::write_json(&out.join(results::FILE), &document)?;
    super::report::write(out, std::slice::from_ref(&document))?;
    if progress {
        println!(
            "wrote {} (open {}) in {:.0} s",
            out.display(),
            out.join("index.html").display(),
            started.elapsed().as_secs_f64()
        );
    } else {
        note!("wrote {}", out.join("index.html").display());
    }
    crate::signal::check()
}

#[cfg(test)]
mod tests {
    #[test]
    fn levels_have_distinct_names_that_round_trip_through_json() {
        crate::args::tests::check::<super::Level>();
    }
}
