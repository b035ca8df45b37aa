//! `ferry lab udp-rate` (seed 002): how many paced sender threads it takes to reach a rate with
//! datagrams of a given MSS, and whether an automatic pool keeps the rate when the requested rate
//! or the CPU load changes during the run.
//!
//! For every MSS and thread setting (fixed counts, or `auto`) a `SenderPool` sends to a
//! `ReceiverPool` on loopback for `--duration` seconds. The delivered rate is counted by the
//! receivers in one-second windows (their median is the row's figure), the sent rate by the
//! senders; what was sent and not delivered is `lost`. `--rate-change` switches the requested
//! rate and `--stress N` starts N busy threads at mid-run; the manager's intervals then form a
//! timeline (rate and thread count per interval).
//!
//! The pools are the lab's own: `pool` runs them on threads, `pacing` makes their decisions (no
//! I/O), `socket` holds their UDP sockets.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use super::{Machine, Results};
use crate::error::{bail, Result};
use pacing::PacingMode;
use pool::{ReceiverPool, SenderPool, SenderPoolConfig, Threads};

pub mod pacing;
pub mod pool;
mod socket;

#[derive(Debug, Args)]
pub struct UdpRateArgs {
    /// Requested rates in bit/s, comma-separated, with K, M or G (1G = 10^9)
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_rate, default_value = "1G")]
    pub rate: Vec<u64>,

    /// Datagram payload sizes (MSS), comma-separated
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "1024,1472,8972"
    )]
    pub mss: Vec<usize>,

    /// Sender threads: a range `1..K`, a list `1,2,4`, or `auto`
    #[arg(long, value_name = "SPEC", default_value = "1..2")]
    pub threads: String,

    /// catch-up (make up for delays) or steady (never above the rate)
    #[arg(long, value_name = "MODE", value_parser = parse_pacing, default_value = "catch-up")]
    pub pacing: PacingMode,

    /// Start this many busy CPU threads at mid-run (auto pools then show the manager reacting)
    #[arg(long, value_name = "CPUS", default_value_t = 0)]
    pub stress: usize,

    /// Switch to this requested rate at mid-run
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub rate_change: Option<u64>,

    /// Seconds per configuration
    #[arg(long, value_name = "S", default_value_t = 3.0)]
    pub duration: f64,

    /// Manager interval in seconds (the study's 0.5 s)
    #[arg(long, value_name = "S", default_value_t = 0.5)]
    pub interval: f64,

    /// Write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<std::path::PathBuf>,
}

fn parse_rate(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.trim().char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 1e3),
        Some((i, 'M' | 'm')) => (&s[..i], 1e6),
        Some((i, 'G' | 'g')) => (&s[..i], 1e9),
        _ => (s, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("invalid rate {s:?}: use e.g. 500M or 2G (bit/s)"))?;
    if v.is_nan() || v <= 0.0 || v * mult > 1e13 {
        return Err(format!("rate {s:?} must be above 0 and at most 10T bit/s"));
    }
    Ok((v * mult) as u64)
}

fn parse_pacing(s: &str) -> Result<PacingMode, String> {
    match s {
        "catch-up" => Ok(PacingMode::CatchUp),
        "steady" => Ok(PacingMode::Steady),
        _ => Err(format!("unknown pacing {s:?}: use catch-up or steady")),
    }
}

/// The thread settings to run: fixed counts, or `auto` (1 up to the CPU count).
fn parse_threads(spec: &str) -> Result<Vec<Threads>> {
    if spec == "auto" {
        return Ok(vec![Threads::Auto { min: 1, max: 64 }]);
    }
    let counts: Vec<usize> = if let Some((a, b)) = spec.split_once("..") {
        let (a, b): (usize, usize) = match (a.parse(), b.parse()) {
            (Ok(a), Ok(b)) if a >= 1 && b >= a && b <= 256 => (a, b),
            _ => bail!("--threads {spec:?}: a range is 1..K with 1 <= K <= 256"),
        };
        (a..=b).collect()
    } else {
        let mut v = Vec::new();
        for p in spec.split(',') {
            match p.trim().parse::<usize>() {
                Ok(n) if (1..=256).contains(&n) => v.push(n),
                _ => bail!("--threads {spec:?}: use 1..K, a list like 1,2,4, or auto"),
            }
        }
        v
    };
    Ok(counts.into_iter().map(Threads::Fixed).collect())
}

#[derive(Debug, Serialize)]
struct Config {
    rates_bps: Vec<u64>,
    mss: Vec<usize>,
    threads: String,
    pacing: &'static str,
    duration_s: f64,
    interval_s: f64,
    stress_cpus: usize,
    rate_change_bps: Option<u64>,
    window_s: f64,
    cpus: usize,
    path: &'static str,
}

#[derive(Debug, Serialize)]
struct Row {
    mss: usize,
    threads: usize,
    threads_mode: &'static str,
    pacing: &'static str,
    requested_bps: u64,
    achieved_bps: f64,
    sent_bps: f64,
    lost: u64,
    kernel_drops: u64,
    send_errors: u64,
    /// The manager stayed behind schedule with every thread it may run (a fixed pool: its
    /// count; an automatic one: the CPUs): the rate is not reachable that way.
    unreachable: bool,
    windows_bps: Vec<f64>,
    timeline: Vec<Point>,
}

#[derive(Debug, Serialize)]
struct Point {
    at_s: f64,
    requested_bps: u64,
    sent_bps: f64,
    threads: usize,
    positive_lag_ms: f64,
    negative_lag_ms: f64,
    decision: String,
}

fn pacing_name(p: PacingMode) -> &'static str {
    match p {
        PacingMode::CatchUp => "catch-up",
        PacingMode::Steady => "steady",
    }
}

/// Busy threads that eat CPU until dropped.
struct Stress {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Stress {
    fn start(n: usize) -> Stress {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 1u64;
                    // Relaxed: a flag polled to end a busy loop; nothing else is published.
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        Stress { stop, threads }
    }
}

impl Drop for Stress {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

pub fn run(args: UdpRateArgs) -> Result<()> {
    if !(args.duration > 0.0 && args.duration <= 3600.0) {
        bail!("--duration must be between 0 and 3600 seconds");
    }
    if !(args.interval >= 0.05 && args.interval <= 10.0) {
        bail!("--interval must be between 0.05 and 10 seconds");
    }
    for &m in &args.mss {
        if m == 0 || m > 65_507 {
            bail!("--mss {m}: a UDP datagram carries 1 to 65507 bytes");
        }
    }
    let settings = parse_threads(&args.threads)?;
    let window = if args.duration >= 3.0 {
        1.0
    } else {
        args.interval
    };
    let mut rows = Vec::new();
    println!(
        "{:>6} {:>8} {:>9} {:>12} {:>12} {:>12} {:>8}",
        "MSS", "THREADS", "PACING", "REQUESTED", "DELIVERED", "SENT", "LOST"
    );
    for &rate in &args.rate {
        for &mss in &args.mss {
            for &threads in &settings {
                let row = run_one(&args, rate, mss, threads, window)?;
                println!(
                    "{:>6} {:>8} {:>9} {:>10.3}G {:>10.3}G {:>10.3}G {:>8}{}",
                    row.mss,
                    format!(
                        "{}{}",
                        row.threads,
                        if row.threads_mode == "auto" {
                            " (auto)"
                        } else {
                            ""
                        }
                    ),
                    row.pacing,
                    row.requested_bps as f64 / 1e9,
                    row.achieved_bps / 1e9,
                    row.sent_bps / 1e9,
                    row.lost,
                    match (row.unreachable, row.threads_mode) {
                        (false, _) => "",
                        // A fixed pool may not add a thread: it says it stayed behind.
                        (true, "fixed") => "  behind schedule with this many threads",
                        (true, _) => "  rate not reachable on this machine",
                    },
                );
                rows.push(row);
            }
        }
    }
    let config = Config {
        rates_bps: args.rate.clone(),
        mss: args.mss.clone(),
        threads: args.threads.clone(),
        pacing: pacing_name(args.pacing),
        duration_s: args.duration,
        interval_s: args.interval,
        stress_cpus: args.stress,
        rate_change_bps: args.rate_change,
        window_s: window,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        path:
            "loopback 127.0.0.1: SenderPool (one socket per thread) -> ReceiverPool (SO_REUSEPORT)",
    };
    if let Some(path) = &args.json {
        Results::new("udp-rate", Machine::probe(), config, rows).write_json(path)?;
    }
    Ok(())
}

fn run_one(
    args: &UdpRateArgs,
    rate: u64,
    mss: usize,
    threads: Threads,
    window: f64,
) -> Result<Row> {
    let rx_addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let rx = ReceiverPool::start(
        rx_addr,
        Threads::Auto { min: 1, max: 4 },
        Duration::from_secs_f64(args.interval),
    )?;
    let mut cfg = SenderPoolConfig::new(rx.local_addr(), mss, rate);
    cfg.threads = threads;
    cfg.pacing = args.pacing;
    cfg.interval = Duration::from_secs_f64(args.interval);
    let pool = SenderPool::start(cfg)?;
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(args.duration);
    let mid = start + Duration::from_secs_f64(args.duration / 2.0);
    let mut stress = None;
    let mut changed = false;
    let mut windows = Vec::new();
    let mut last = (Instant::now(), rx.totals().bytes);
    while Instant::now() < end {
        crate::signal::check()?;
        std::thread::sleep(Duration::from_millis(10));
        let now = Instant::now();
        if now >= mid && !changed {
            changed = true;
            if args.stress > 0 {
                stress = Some(Stress::start(args.stress));
            }
            if let Some(r) = args.rate_change {
                pool.set_rate(r);
            }
        }
        if now.duration_since(last.0).as_secs_f64() >= window {
            let bytes = rx.totals().bytes;
            windows.push((bytes - last.1) as f64 * 8.0 / now.duration_since(last.0).as_secs_f64());
            last = (now, bytes);
        }
    }
    drop(stress);
    let (sent, sent_bytes) = pool.sent();
    let send_errors = pool.send_errors();
    let unreachable = pool.unreachable();
    let final_threads = pool.threads();
    let elapsed = start.elapsed().as_secs_f64();
    let timeline = pool.stop();
    // Let the last datagrams land before counting.
    std::thread::sleep(Duration::from_millis(100));
    let totals = rx.totals();
    // The first window includes the start; leave it out when there are others.
    let mut steady: Vec<f64> = if windows.len() > 1 {
        windows[1..].to_vec()
    } else {
        windows.clone()
    };
    steady.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let median = match steady.len() {
        0 => 0.0,
        n if n % 2 == 1 => steady[n / 2],
        n => (steady[n / 2 - 1] + steady[n / 2]) / 2.0,
    };
    Ok(Row {
        mss,
        threads: final_threads,
        threads_mode: if matches!(threads, Threads::Auto { .. }) {
            "auto"
        } else {
            "fixed"
        },
        pacing: pacing_name(args.pacing),
        requested_bps: rate,
        achieved_bps: median,
        sent_bps: sent_bytes as f64 * 8.0 / elapsed,
        lost: sent.saturating_sub(totals.datagrams),
        kernel_drops: totals.kernel_drops,
        send_errors,
        unreachable,
        windows_bps: windows,
        timeline: timeline
            .iter()
            .map(|i| Point {
                at_s: i.at_s,
                requested_bps: i.requested_bps,
                sent_bps: i.achieved_bps,
                threads: i.threads,
                positive_lag_ms: i.positive_lag_ns as f64 / 1e6,
                negative_lag_ms: i.negative_lag_ns as f64 / 1e6,
                decision: format!("{:?}", i.decision).to_lowercase(),
            })
            .collect(),
    })
}
