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
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use serde_json::{json, Value};

use super::Machine;
use crate::error::{note, Context, Result};
use crate::experiment::{self, Experiment};

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

/// How much the suite measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Tiny parameters everywhere (for tests); the figures mean nothing.
    Smoke,
    /// A few minutes on 2 CPUs.
    Quick,
    /// The studies' parameters: tens of minutes.
    Full,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Smoke => "smoke",
            Level::Quick => "quick",
            Level::Full => "full",
        }
    }
}

/// A typed step's run: measures, prints, and returns the results as JSON.
type TypedRun = Box<dyn FnOnce() -> Result<Value>>;

/// One experiment of the suite, with its configuration at a level: a typed configuration, or
/// (for the experiments still read from arguments) its arguments.
struct Step {
    /// The experiment (`ferry lab NAME`).
    name: &'static str,
    /// Its results' file stem and heading in the report (one experiment may run twice).
    file: &'static str,
    smoke: &'static [&'static str],
    quick: &'static [&'static str],
    full: &'static [&'static str],
    /// The typed configuration at a level; `None` at a level the step is left out of.
    typed: Option<fn(Level) -> Option<TypedRun>>,
}

/// A run of `E` with `config`: measures, prints its table, returns its results.
fn typed<E: Experiment>(config: E::Config) -> TypedRun {
    Box::new(move || {
        let results = experiment::measure::<E>(config)?;
        crate::table::print_out(&E::table(&results))?;
        Ok(serde_json::to_value(&results)?)
    })
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
    use crate::hubs::{parse_link_rate, Config, Hubs, Mode, Transport};
    let config = Config {
        mode: vec![Mode::Roundtrip, Mode::Flood],
        hosts: 2,
        transport: vec![Transport::Udp],
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

/// Every experiment the suite knows, in the order it runs them. An experiment this build does
/// not have is skipped (hook: `cycle` and `throughput` are picked up as soon as `ferry lab
/// cycle` / `ferry lab throughput` exist and take `--json`).
const STEPS: &[Step] = &[
    Step {
        name: "limits",
        file: "limits",
        smoke: &[
            "--samples",
            "200",
            "--memcpy-seconds",
            "0.01",
            "--memcpy-max",
            "1M",
        ],
        quick: &["--samples", "5000", "--memcpy-seconds", "0.1"],
        full: &[],
        typed: None,
    },
    Step {
        name: "latency",
        file: "latency",
        smoke: &[],
        quick: &[],
        full: &[],
        typed: Some(latency),
    },
    Step {
        name: "send-time",
        file: "send-time",
        smoke: &["--samples", "20", "--warmup", "5", "--sizes", "32,1K"],
        quick: &["--samples", "2000", "--sizes", "32,1K,32K,1M"],
        full: &[],
        typed: None,
    },
    Step {
        name: "throughput",
        file: "throughput",
        smoke: &["--duration", "0.2", "--rounds", "1", "--sizes", "64"],
        quick: &["--duration", "1", "--rounds", "2"],
        full: &[],
        typed: None,
    },
    Step {
        name: "idle",
        file: "idle",
        smoke: &["--seconds", "0.2"],
        quick: &["--seconds", "1"],
        full: &[],
        typed: None,
    },
    Step {
        name: "footprint",
        file: "footprint",
        smoke: &["--seconds", "0.6"],
        quick: &["--seconds", "2", "--build"],
        full: &["--build"],
        typed: None,
    },
    // The DDS hubs (the DDS-Demonstrators performance study): a ring of 4 processes on one host,
    // then split over two network namespaces joined by a 100 Mbit/s veth (root only; without it the
    // step fails and says why).
    Step {
        name: "hubs",
        file: "hubs",
        smoke: &[],
        quick: &[],
        full: &[],
        typed: Some(hubs),
    },
    Step {
        name: "hubs",
        file: "hubs-2hosts",
        smoke: &[],
        quick: &[],
        full: &[],
        typed: Some(hubs_2hosts),
    },
    // The paced multithreaded UDP sender (the Syzov, Kachan, Siemens study); not in the smoke
    // suite.
    Step {
        name: "udp-rate",
        file: "udp-rate",
        smoke: &[],
        // A rate one thread cannot reach with small datagrams on this kind of machine, so that
        // the plot shows what a second thread adds (that study's figures 2-4).
        quick: &["--duration", "3", "--rate", "3G"],
        full: &[],
        typed: None,
    },
    // The same with an automatic pool: the rate asked for rises at mid-run beyond what one
    // thread sends, and the manager adds a sender (the timeline plot); `--full` also starts a
    // CPU stressor then.
    Step {
        name: "udp-rate",
        file: "udp-rate-auto",
        smoke: &[],
        quick: &[
            "--threads",
            "auto",
            "--mss",
            "1472",
            "--rate",
            "1G",
            "--rate-change",
            "4G",
            "--duration",
            "4",
        ],
        full: &[
            "--threads",
            "auto",
            "--mss",
            "1472",
            "--rate",
            "1G",
            "--rate-change",
            "4G",
            "--stress",
            "1",
            "--duration",
            "10",
        ],
        typed: None,
    },
    // The cyclic experiment (the Dominion study) at its headline point, 1 ms and 0.3 CPU, with
    // 1000-cycle runs (ten quota periods), both apps on one CPU and placed by the kernel; not in
    // the smoke suite (it needs cgroups). `--full` adds 5 ms and three repeats, not the
    // hours-long `--study`.
    Step {
        name: "cycle",
        file: "cycle",
        smoke: &[],
        quick: &[
            "--cycle-ms",
            "1",
            "--max-multiplicity",
            "2000000",
            "--resolution",
            "5",
        ],
        full: &["--cycle-ms", "1,5", "--repeat", "3", "--resolution", "5"],
        typed: None,
    },
];

/// What became of one experiment.
pub struct Outcome {
    pub name: &'static str,
    /// The results object (the common results format), also for a failure (rows empty, the error
    /// in config).
    pub result: Option<Value>,
    pub seconds: f64,
    pub status: String,
}

fn progress_enabled() -> bool {
    std::io::stdout().is_terminal() && std::env::var("CI").map_or(true, |v| v != "true")
}

/// Runs the suite. `run_argv` runs an experiment from its command-line arguments (the steps
/// still kept as arguments); `Ok(None)` when this build has no such experiment.
pub fn run(args: SuiteArgs, run_argv: &dyn Fn(&[String]) -> Result<Option<()>>) -> Result<()> {
    let out = &args.out;
    std::fs::create_dir_all(out).context(format!("cannot create {}", out.display()))?;
    let level_value = if args.smoke {
        Level::Smoke
    } else if args.full {
        Level::Full
    } else {
        Level::Quick
    };
    let level = level_value.name();
    let progress = progress_enabled();
    let allowed = super::allowed_cpus();
    let started = Instant::now();
    let steps: Vec<&Step> = STEPS
        .iter()
        .filter(|s| !args.skip.iter().any(|k| k == s.name || k == s.file))
        .collect();
    let mut outcomes = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let typed_run = step.typed.map(|plan| plan(level_value));
        let left_out = match &typed_run {
            Some(run) => run.is_none(),
            None => level == "smoke" && step.smoke.is_empty(),
        };
        if left_out {
            outcomes.push(Outcome {
                name: step.file,
                result: None,
                seconds: 0.0,
                status: format!("left out of the {level} suite"),
            });
            continue;
        }
        let params = match level {
            "smoke" => step.smoke,
            "full" => step.full,
            _ => step.quick,
        };
        let json_path = out.join(format!("{}.json", step.file));
        let _ = std::fs::remove_file(&json_path);
        let mut argv: Vec<String> = vec![step.name.to_owned()];
        argv.extend(params.iter().map(|s| s.to_string()));
        argv.extend(["--json".to_owned(), json_path.display().to_string()]);
        let t0 = Instant::now();
        if progress {
            println!(
                "[{}/{}] {:<11} running ({level}) ...",
                i + 1,
                steps.len(),
                step.file
            );
        }
        let outcome: Result<Option<Value>> = match typed_run.flatten() {
            Some(run) => run().and_then(|v| {
                experiment::write_json(&json_path, &v)?;
                Ok(Some(v))
            }),
            None => match run_argv(&argv) {
                Ok(None) => {
                    if progress {
                        println!(
                            "[{}/{}] {:<11} not in this build",
                            i + 1,
                            steps.len(),
                            step.file
                        );
                    }
                    outcomes.push(Outcome {
                        name: step.file,
                        result: None,
                        seconds: 0.0,
                        status: "not in this build".to_owned(),
                    });
                    continue;
                }
                Ok(Some(())) => read_json(&json_path).map(Some),
                Err(e) => Err(e),
            },
        };
        // Experiments pin this thread; give the next one every CPU again.
        super::limits::restore_affinity(&allowed);
        let seconds = t0.elapsed().as_secs_f64();
        let (result, status) = match outcome {
            Ok(v) => (v, "ok".to_owned()),
            Err(e) => {
                note!("ferry lab: {} failed: {e}", step.file);
                (
                    Some(failed(step.name, &argv, &e.to_string())),
                    format!("failed: {e}"),
                )
            }
        };
        if progress {
            println!(
                "[{}/{}] {:<11} {status} ({seconds:.1} s)",
                i + 1,
                steps.len(),
                step.file
            );
        }
        let stop = crate::signal::interrupted();
        outcomes.push(Outcome {
            name: step.file,
            result,
            seconds,
            status,
        });
        if stop {
            break;
        }
    }

    let results: Vec<Value> = outcomes.iter().filter_map(|o| o.result.clone()).collect();
    write(
        &out.join("results.json"),
        &(serde_json::to_string_pretty(&results)? + "\n"),
    )?;
    let suite = super::report::SuiteInfo {
        level,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        seconds: started.elapsed().as_secs_f64(),
        outcomes: &outcomes,
    };
    super::report::write(out, &suite)?;
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

fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path)
        .context(format!("the experiment wrote no {}", path.display()))?;
    Ok(serde_json::from_str(&text)?)
}

/// The results object of an experiment that failed: the common results format, no rows.
fn failed(name: &str, argv: &[String], error: &str) -> Value {
    json!({
        "ferry_version": env!("CARGO_PKG_VERSION"),
        "experiment": name,
        "machine": serde_json::to_value(Machine::probe()).unwrap_or(Value::Null),
        "config": { "arguments": argv, "error": error },
        "rows": [],
    })
}

pub fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).context(format!("cannot write {}", path.display()))
}
