//! `ferry lab idle`: the CPU an idle subscriber burns, per wait strategy. After one message the
//! subscriber process waits for the next one that does not come; its CPU time is read from
//! /proc/<pid>/stat over the idle period. `spin` shows the cost of busy waiting; `block` and
//! `adaptive` (once its spin window has passed) should be close to nothing.

use std::time::{Duration, Instant};

use clap::Args;
use ferry::{Node, Qos, Transport, WaitStrategy};
use serde::Serialize;

use super::{Machine, Peer, Results};
use crate::error::{bail, Context, Result};
use crate::signal;

#[derive(Debug, Args)]
pub struct IdleArgs {
    /// Wait strategies of the idle subscriber, comma-separated: spin, block, adaptive
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_wait, default_value = "block,adaptive,spin")]
    pub wait: Vec<WaitStrategy>,

    /// Transport of the idle pair: shm, or auto (the default of applications: shared memory
    /// here, UDP to other hosts)
    #[arg(long, value_name = "T", value_parser = parse_transport, default_value = "shm")]
    pub transport: Transport,

    /// Seconds of idleness measured per strategy (after a settling pause of 0.5 s)
    #[arg(long, value_name = "S", default_value_t = 2.0)]
    pub seconds: f64,

    /// Write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct PeerArgs {
    #[arg(long)]
    domain: String,
    #[arg(long, value_parser = parse_wait)]
    wait: WaitStrategy,
    #[arg(long, value_parser = parse_transport, default_value = "shm")]
    transport: Transport,
}

fn parse_transport(s: &str) -> Result<Transport, String> {
    match s {
        "shm" => Ok(Transport::Shm),
        "auto" => Ok(Transport::Auto),
        "udp" => Ok(Transport::Udp),
        other => Err(format!("unknown transport {other:?}: use shm, auto or udp")),
    }
}

fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Shm => "shm",
        Transport::Udp => "udp",
        _ => "auto",
    }
}

fn parse_wait(s: &str) -> Result<WaitStrategy, String> {
    match s {
        "spin" => Ok(WaitStrategy::Spin),
        "block" => Ok(WaitStrategy::Block),
        "adaptive" => Ok(WaitStrategy::Adaptive),
        other => Err(format!(
            "unknown wait strategy {other:?}: use spin, block or adaptive"
        )),
    }
}

fn wait_name(w: WaitStrategy) -> &'static str {
    match w {
        WaitStrategy::Spin => "spin",
        WaitStrategy::Block => "block",
        WaitStrategy::Adaptive => "adaptive",
    }
}

#[derive(Debug, Serialize)]
struct Config {
    seconds: f64,
    settle_seconds: f64,
    spin_window_us: u128,
    clock_ticks_per_second: u64,
}

#[derive(Debug, Serialize)]
struct Row {
    transport: &'static str,
    wait: &'static str,
    seconds: f64,
    cpu_seconds: f64,
    cpu_percent: f64,
}

const TOPIC: &str = "idle";
const SETTLE: Duration = Duration::from_millis(500);

pub fn run(args: IdleArgs) -> Result<()> {
    if !(args.seconds > 0.0 && args.seconds <= 600.0) {
        bail!("--seconds must be between 0 and 600");
    }
    let ticks = rustix::param::clock_ticks_per_second();
    let domain = format!("labidle{}", std::process::id());
    let mut rows = Vec::new();
    let outcome = measure(&args, &domain, ticks, &mut rows);
    // Whatever an interrupted or failed run left in its own domain (a killed peer's subscriber).
    let _ = ferry::admin::clean(Some(&domain));
    outcome?;
    let config = Config {
        seconds: args.seconds,
        settle_seconds: SETTLE.as_secs_f64(),
        spin_window_us: Qos::default().spin_window.as_micros(),
        clock_ticks_per_second: ticks,
    };
    if let Some(path) = &args.json {
        Results::new("idle", Machine::probe(), config, rows).write_json(path)?;
    }
    Ok(())
}

/// One row per wait strategy, each with a fresh peer.
fn measure(args: &IdleArgs, domain: &str, ticks: u64, rows: &mut Vec<Row>) -> Result<()> {
    for &wait in &args.wait {
        let node = Node::with_domain("lab-idle", domain)?;
        let mut publisher = node.publisher(
            TOPIC,
            &Qos::default()
                .transport(args.transport)
                .max_message_size(64),
        )?;
        let mut peer = Peer::spawn(&[
            "idle".into(),
            "--domain".into(),
            domain.to_owned(),
            "--wait".into(),
            wait_name(wait).into(),
            "--transport".into(),
            transport_name(args.transport).into(),
        ])?;
        peer.wait_ready(Duration::from_secs(10), || {
            Ok(publisher.subscriber_count() == 1)
        })?;
        publisher.send(&[1])?;
        signal::sleep(SETTLE)?;
        peer.check_alive()?;
        let start = Instant::now();
        let cpu0 = cpu_ticks(peer.pid())?;
        signal::sleep(Duration::from_secs_f64(args.seconds))?;
        let cpu1 = cpu_ticks(peer.pid())?;
        let elapsed = start.elapsed().as_secs_f64();
        publisher.send(&[0])?;
        peer.finish(Duration::from_secs(10))?;
        let cpu_seconds = (cpu1 - cpu0) as f64 / ticks as f64;
        let row = Row {
            transport: transport_name(args.transport),
            wait: wait_name(wait),
            seconds: elapsed,
            cpu_seconds,
            cpu_percent: 100.0 * cpu_seconds / elapsed,
        };
        println!(
            "{} {:<9} idle for {:.2} s: {:.3} s of CPU = {:.2} % of one CPU",
            row.transport, row.wait, row.seconds, row.cpu_seconds, row.cpu_percent
        );
        rows.push(row);
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

pub fn run_peer(args: PeerArgs) -> Result<()> {
    let node = Node::with_domain("lab-idle-peer", &args.domain)?;
    let mut sub = node.subscriber(
        TOPIC,
        &Qos::default().transport(args.transport).wait(args.wait),
    )?;
    let mut parent_alive = super::parent_watch();
    loop {
        parent_alive()?;
        // The timeout only bounds how long a vanished parent goes unnoticed.
        if let Some(s) = sub.recv_timeout(Duration::from_secs(1))? {
            if s.first() == Some(&0) {
                return Ok(());
            }
        }
    }
}
