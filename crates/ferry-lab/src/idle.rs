//! `ferry lab idle`: the CPU an idle subscriber burns, per wait strategy. After one message the
//! subscriber process (the experiment's peer, see [`crate::peer`]) waits for the next one that
//! does not come; its CPU time is read from `/proc/<pid>/stat` over the idle period. `spin` shows
//! the cost of busy waiting; `block` and `adaptive` (once its spin window has passed) should be
//! close to nothing.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use ferry::{Node, Qos, WaitStrategy};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::chart::{bar_svg, color, Bars, Plot, Section, SummaryLine, W};
use crate::error::{bail, note, Context, Error, Result};
use crate::experiment::{head, Experiment, Measured, Results};
use crate::peer::{Peer, PeerLink, Place};
use crate::signal;
use crate::studies::{cite, SHM_STREAM};
use crate::subject::{Subject, Subjects};

/// What the idle pair may run over.
pub const SUBJECTS: Subjects = Subjects(&[Subject::Shm, Subject::Auto, Subject::Udp4]);

/// What `ferry lab idle` is asked to measure.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Wait strategies of the idle subscriber, in the order they run.
    #[schemars(with = "Vec<crate::args::WaitSchema>")]
    pub wait: Vec<WaitStrategy>,
    /// Subject of the idle pair.
    pub transport: Subject,
    /// Seconds of idleness measured per strategy (after a settling pause of 0.5 s).
    pub seconds: f64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            wait: vec![
                WaitStrategy::Block,
                WaitStrategy::Adaptive,
                WaitStrategy::Spin,
            ],
            transport: Subject::Shm,
            seconds: 2.0,
        }
    }
}

/// How an idle run was made.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    seconds: f64,
    settle_seconds: f64,
    spin_window_us: u64,
    clock_ticks_per_second: u64,
}

/// One wait strategy.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    pub transport: Subject,
    #[schemars(with = "crate::args::WaitSchema")]
    pub wait: WaitStrategy,
    /// How long the subscriber was idle.
    pub seconds: f64,
    /// The CPU time it used meanwhile (user and system).
    pub cpu_seconds: f64,
    /// `cpu_seconds` in % of `seconds`: % of one CPU.
    pub cpu_percent: f64,
}

impl Row {
    /// The row of a subscriber that used `cpu_ticks` clock ticks while idle for `seconds`.
    fn of(
        transport: Subject,
        wait: WaitStrategy,
        seconds: f64,
        cpu_ticks: u64,
        ticks_per_s: u64,
    ) -> Row {
        let cpu_seconds = cpu_ticks as f64 / ticks_per_s.max(1) as f64;
        Row {
            transport,
            wait,
            seconds,
            cpu_seconds,
            cpu_percent: 100.0 * cpu_seconds / seconds,
        }
    }
}

/// The experiment (see the module's documentation).
pub struct Idle;

const TOPIC: &str = "idle";
const SETTLE: Duration = Duration::from_millis(500);
/// How long the peer may take to subscribe, and to finish at the end.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// One row per wait strategy, each with a fresh peer.
/// ferry's QoS for the idle pair's `transport`, waiting `wait`.
fn qos(transport: Subject, wait: WaitStrategy) -> Result<Qos> {
    transport
        .qos(wait)
        .ok_or_else(|| Error::msg(format!("idle: {transport} is not a ferry transport")))
}

fn measure(args: &Config, domain: &str, ticks: u64, rows: &mut Vec<Row>) -> Result<()> {
    for &wait in &args.wait {
        note!("idle: {} {}", args.transport.name(), wait.name());
        let node = Node::with_domain("lab-idle", domain)?;
        let mut publisher = node.publisher(
            TOPIC,
            &qos(args.transport, Qos::default().wait)?.max_message_size(64),
        )?;
        let request = PeerRequest {
            domain: domain.to_owned(),
            wait,
            transport: args.transport,
        };
        let mut peer = Peer::start::<Idle>(&request, &Place::local())?;
        let pid = peer
            .pid()
            .ok_or_else(|| Error::msg("the idle subscriber must run on this machine"))?;
        peer.wait_ready(START_TIMEOUT, || Ok(publisher.subscriber_count() == 1))?;
        publisher.send(&[1])?;
        signal::sleep(SETTLE)?;
        peer.check_alive()?;
        let start = Instant::now();
        let cpu0 = cpu_ticks(pid)?;
        signal::sleep(Duration::from_secs_f64(args.seconds))?;
        let cpu1 = cpu_ticks(pid)?;
        let elapsed = start.elapsed().as_secs_f64();
        publisher.send(&[0])?;
        peer.finish(START_TIMEOUT)?;
        rows.push(Row::of(
            args.transport,
            wait,
            elapsed,
            cpu1.saturating_sub(cpu0),
            ticks,
        ));
    }
    Ok(())
}

/// User plus system CPU ticks of a process (fields 14 and 15 of /proc/<pid>/stat).
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat =
        std::fs::read_to_string(format!("/proc/{pid}/stat")).context("read the peer's CPU time")?;
    let rest = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3: utime is field 14, stime field 15.
    let (Some(u), Some(s)) = (fields.get(11), fields.get(12)) else {
        bail!("unexpected /proc/{pid}/stat format");
    };
    Ok(u.parse::<u64>().context("utime")? + s.parse::<u64>().context("stime")?)
}

// ---------------------------------------------------------------------------------------------
// The peer

/// What the main side asks of the peer: subscribe in `domain` with `wait` over `transport`, and
/// wait until a message whose first byte is 0 comes.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerRequest {
    domain: String,
    wait: WaitStrategy,
    transport: Subject,
}

// ---------------------------------------------------------------------------------------------
// Results

impl Experiment for Idle {
    head!("idle", "CPU of an idle subscriber");

    fn validate(args: &Config) -> Result<()> {
        SUBJECTS.check("--transport", &[args.transport])?;
        if args.wait.is_empty() {
            bail!("--wait: give at least one");
        }
        if !(0.01..=600.0).contains(&args.seconds) {
            bail!("--seconds must be between 0.01 and 600");
        }
        Ok(())
    }

    fn run(args: &Config) -> Result<Measured<Self>> {
        let ticks = rustix::param::clock_ticks_per_second();
        let domain = format!("labidle{}", std::process::id());
        let mut rows = Vec::new();
        crate::in_own_domain(&domain, || measure(args, &domain, ticks, &mut rows))?;
        let setup = Setup {
            seconds: args.seconds,
            settle_seconds: SETTLE.as_secs_f64(),
            spin_window_us: u64::try_from(Qos::default().spin_window.as_micros())
                .unwrap_or(u64::MAX),
            clock_ticks_per_second: ticks,
        };
        Ok(Measured { setup, rows })
    }

    fn run_peer(args: PeerRequest, link: &mut PeerLink) -> Result<()> {
        SUBJECTS.check("transport", &[args.transport])?;
        let node = Node::with_domain("lab-idle-peer", &args.domain)?;
        let mut sub = node.subscriber(TOPIC, &qos(args.transport, args.wait)?)?;
        let mut main_alive = link.watch();
        loop {
            main_alive()?;
            // The timeout only bounds how long a vanished main side goes unnoticed.
            if let Some(s) = sub.recv_timeout(Duration::from_secs(1))? {
                if s.first() == Some(&0) {
                    return Ok(());
                }
            }
        }
    }

    fn table(results: &Results<Self>) -> String {
        let mut out = String::new();
        for row in &results.rows {
            let _ = writeln!(
                out,
                "{} {:<9} idle for {:.2} s: {:.3} s of CPU = {:.2} % of one CPU",
                row.transport.name(),
                row.wait.name(),
                row.seconds,
                row.cpu_seconds,
                row.cpu_percent
            );
        }
        out
    }

    fn section(results: &Results<Self>) -> Result<Section> {
        let rs = &results.rows;
        // One bar per wait strategy (its first row).
        let mut waits: Vec<WaitStrategy> = Vec::new();
        for r in rs {
            if !waits.contains(&r.wait) {
                waits.push(r.wait);
            }
        }
        let vals: Vec<Option<f64>> = waits
            .iter()
            .map(|&w| rs.iter().find(|r| r.wait == w).map(|r| r.cpu_percent))
            .collect();
        let svg = bar_svg(
            &[Bars {
                title: "CPU of an idle subscriber by wait strategy",
                y_desc: "CPU (% of one CPU)",
                categories: waits.iter().map(|w| w.name().to_owned()).collect(),
                series: vec![("shm subscriber".into(), color(0), vals.clone())],
                reference: None,
                log_y: false,
            }],
            W,
        )?;
        let parts: Vec<String> = waits
            .iter()
            .zip(&vals)
            .filter_map(|(w, v)| Some(format!("{} {:.1} %", w.name(), (*v)?)))
            .collect();
        Ok(Section {
            plots: vec![Plot {
                file: "idle.svg".to_owned(),
                svg,
                caption: "CPU time of a subscriber that waits for a message that does not come, from /proc/PID/stat.".to_owned(),
            }],
            sentence: format!(
                "In {}, the wait-free stream spins (faster, but it loads a CPU) while the blocking stream waits without a busy loop. Here an idle ferry subscriber uses {} of one CPU.",
                cite(&SHM_STREAM),
                parts.join(", ")
            ),
        })
    }

    /// One line per wait strategy measured. The study says what a spinning and a blocking wait
    /// cost, without figures.
    fn summary(results: &Results<Self>) -> Vec<SummaryLine> {
        let rows: &[Row] = &results.rows;
        rows.iter()
            .map(|r| SummaryLine {
                what: format!(
                    "CPU of an idle subscriber, {} wait, {}",
                    r.wait.name(),
                    r.transport.name()
                ),
                ferry: format!("{:.2} % of one CPU", r.cpu_percent),
                floor: None,
                best_peer: None,
                study: match r.wait {
                    WaitStrategy::Spin => Some(format!(
                        "the wait-free stream's busy loop loads a CPU, no figure given ({})",
                        cite(&SHM_STREAM)
                    )),
                    WaitStrategy::Block => Some(format!(
                        "the blocking stream waits without a busy loop, no figure given ({})",
                        cite(&SHM_STREAM)
                    )),
                    WaitStrategy::Adaptive => None,
                },
            })
            .collect()
    }
}

/// Results of a small made-up run, for the report's tests.
#[cfg(test)]
pub(crate) fn example() -> Results<Idle> {
    let config = Config {
        seconds: 1.0,
        ..Config::default()
    };
    let rows = vec![
        Row::of(Subject::Shm, WaitStrategy::Block, 1.0, 0, 100),
        Row::of(Subject::Shm, WaitStrategy::Adaptive, 1.0, 1, 100),
        Row::of(Subject::Shm, WaitStrategy::Spin, 1.0, 99, 100),
    ];
    let setup = Setup {
        seconds: config.seconds,
        settle_seconds: SETTLE.as_secs_f64(),
        spin_window_us: 50,
        clock_ticks_per_second: 100,
    };
    Results::new(crate::Machine::probe(), config, Measured { setup, rows })
}

#[cfg(test)]
mod tests;
