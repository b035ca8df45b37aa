//! `ferry lab udp-rate` (the paced multithreaded UDP study of Syzov, Kachan and Siemens): how many
//! paced sender threads it takes to reach a rate with datagrams of a given MSS, and whether an
//! automatic pool keeps the rate when the requested rate or the CPU load changes during the run.
//!
//! For every MSS and thread setting (fixed counts, or `auto`) a `SenderPool` sends to a
//! `ReceiverPool` on loopback for `--duration` seconds. The delivered rate is counted by the
//! receivers in one-second windows (their median is the row's figure), the sent rate by the
//! senders; what was sent and not delivered is `lost`. `--rate-change` switches the requested
//! rate and `--stress N` starts N busy threads at mid-run; the manager's intervals then form a
//! timeline (rate and thread count per interval).
//!
//! With `--remote HOST[:PORT]` the receivers run in a peer process on another machine (through
//! `ferry lab agent`, see [`crate::peer`]), which counts the datagrams and times the windows on
//! its own clock: receiver counts need no common clock. Without it, both pools run in this
//! process.
//!
//! The pools are the lab's own: `pool` runs them on threads, `pacing` makes their decisions (no
//! I/O), `socket` holds their UDP sockets.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use pacing::Pacing;
use pool::{ReceiverPool, SenderPool, SenderPoolConfig, Threads};

pub mod pacing;
pub mod pool;
mod socket;

use crate::chart::{timeline_chart, xy_chart, Plot, Section, SummaryLine, XySeries};
use crate::error::{bail, note, Result};
use crate::experiment::{head, Experiment, Measured, Results};
use crate::peer::{Peer, PeerLink, Place};
use crate::stats::median;
use crate::studies::{cite, cite_first, PACED_UDP};

pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 1e3),
        Some((i, 'M' | 'm')) => (&t[..i], 1e6),
        Some((i, 'G' | 'g')) => (&t[..i], 1e9),
        Some((i, 'T' | 't')) => (&t[..i], 1e12),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("invalid rate {s:?}: use e.g. 500M or 2G (bit/s)"))?;
    let bits = v * mult;
    if !(1.0..=MAX_RATE as f64).contains(&bits) {
        return Err(format!(
            "rate {s:?} must be at least 1 bit/s and at most 10T bit/s"
        ));
    }
    Ok(bits as u64)
}

/// The sender thread counts to run: fixed counts, one run each, or an automatic pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ThreadCounts {
    /// A pool whose manager adds and removes senders (1 up to 64).
    Auto,
    /// These counts, in turn.
    Fixed(Vec<usize>),
}

/// The most sender threads a fixed count may ask for.
const MAX_THREADS: usize = 256;

impl ThreadCounts {
    /// The pool settings to run.
    fn settings(&self) -> Vec<Threads> {
        match self {
            ThreadCounts::Auto => vec![Threads::Auto { min: 1, max: 64 }],
            ThreadCounts::Fixed(counts) => counts.iter().copied().map(Threads::Fixed).collect(),
        }
    }

    fn check(&self) -> Result<()> {
        if let ThreadCounts::Fixed(counts) = self {
            if counts.is_empty() {
                bail!("--threads: give at least one thread count");
            }
            if let Some(n) = counts.iter().find(|&&n| n == 0 || n > MAX_THREADS) {
                bail!("--threads: {n} threads is out of range (1 to {MAX_THREADS})");
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for ThreadCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThreadCounts::Auto => f.write_str("auto"),
            ThreadCounts::Fixed(counts) => {
                let list: Vec<String> = counts.iter().map(usize::to_string).collect();
                f.write_str(&list.join(","))
            }
        }
    }
}

/// `--threads`: a range `1..K`, a list `1,2,4`, or `auto`.
pub fn parse_threads(spec: &str) -> Result<ThreadCounts, String> {
    let spec = spec.trim();
    if spec == "auto" {
        return Ok(ThreadCounts::Auto);
    }
    let counts: Vec<usize> = if let Some((a, b)) = spec.split_once("..") {
        match (a.parse::<usize>(), b.parse::<usize>()) {
            (Ok(a), Ok(b)) if a >= 1 && b >= a && b <= MAX_THREADS => (a..=b).collect(),
            _ => {
                return Err(format!(
                    "--threads {spec:?}: a range is A..B with 1 <= A <= B <= {MAX_THREADS}"
                ))
            }
        }
    } else {
        let mut v = Vec::new();
        for p in spec.split(',') {
            match p.trim().parse::<usize>() {
                Ok(n) if (1..=MAX_THREADS).contains(&n) => v.push(n),
                _ => {
                    return Err(format!(
                        "--threads {spec:?}: use 1..K, a list like 1,2,4, or auto"
                    ))
                }
            }
        }
        v
    };
    Ok(ThreadCounts::Fixed(counts))
}

/// The highest rate accepted, in bit/s (10T).
const MAX_RATE: u64 = 10_000_000_000_000;
/// The most busy threads `--stress` starts.
const MAX_STRESS: usize = 1024;
/// How long the peer may take to start, to hear the start, and to count at the end.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the last datagrams get to land before the receivers count.
const LAND: Duration = Duration::from_millis(100);

/// What `ferry lab udp-rate` is asked to measure.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Requested rates in bit/s.
    pub rate: Vec<u64>,
    /// Datagram payload sizes (MSS) in bytes.
    pub mss: Vec<usize>,
    /// Sender thread counts.
    pub threads: ThreadCounts,
    pub pacing: Pacing,
    /// Busy CPU threads started at mid-run.
    pub stress: usize,
    /// The requested rate switched to at mid-run, in bit/s.
    pub rate_change: Option<u64>,
    /// Seconds per configuration.
    pub duration: f64,
    /// The pools' manager interval in seconds.
    pub interval: f64,
    /// The `ferry lab agent` (`HOST[:PORT]`) whose machine receives; `None`: both pools in this
    /// process, on loopback.
    pub remote: Option<String>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            rate: vec![1_000_000_000],
            mss: vec![1024, 1472, 8972],
            threads: ThreadCounts::Fixed(vec![1, 2]),
            pacing: Pacing::CatchUp,
            stress: 0,
            rate_change: None,
            duration: 3.0,
            interval: 0.5,
            remote: None,
        }
    }
}

/// The experiment (see the module's documentation).
pub struct UdpRate;

/// The windows the delivered rate is counted in: one second, or the manager interval for runs
/// shorter than 3 s.
fn window_s(args: &Config) -> f64 {
    if args.duration >= 3.0 {
        1.0
    } else {
        args.interval
    }
}

/// How a udp-rate run was made.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    rates_bps: Vec<u64>,
    mss: Vec<usize>,
    threads: String,
    pacing: Pacing,
    duration_s: f64,
    interval_s: f64,
    stress_cpus: usize,
    rate_change_bps: Option<u64>,
    window_s: f64,
    cpus: usize,
    path: String,
}

crate::choice! {
    /// Whether a row's pool had a fixed thread count or one chosen by its manager.
    pub enum ThreadsMode: "threads mode" {
        Fixed = "fixed",
        Auto = "auto",
    }
}

/// One MSS, thread setting and requested rate.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    pub mss: usize,
    /// Sender threads at the end of the run.
    pub threads: usize,
    pub threads_mode: ThreadsMode,
    pub pacing: Pacing,
    pub requested_bps: u64,
    /// The median of the delivered rate's windows (the first left out when there are others).
    pub achieved_bps: f64,
    pub sent_bps: f64,
    pub lost: u64,
    pub kernel_drops: u64,
    pub send_errors: u64,
    /// The manager stayed behind schedule with every thread it may run (a fixed pool: its
    /// count; an automatic one: the CPUs): the rate is not reachable that way.
    pub unreachable: bool,
    pub windows_bps: Vec<f64>,
    pub timeline: Vec<Point>,
}

/// One manager interval of a row's sender pool.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Point {
    pub at_s: f64,
    pub requested_bps: u64,
    pub sent_bps: f64,
    pub threads: usize,
    pub positive_lag_ms: f64,
    pub negative_lag_ms: f64,
    /// The manager's decision at the end of the interval (keep, spawn, stop, unreachable).
    pub decision: String,
}

/// What one run gave, before it becomes a row.
struct Figures {
    /// Sender threads at the end.
    threads: usize,
    sent_datagrams: u64,
    sent_bytes: u64,
    elapsed_s: f64,
    send_errors: u64,
    unreachable: bool,
    delivered_datagrams: u64,
    kernel_drops: u64,
    /// The delivered rate per window, in bit/s.
    windows: Vec<f64>,
    timeline: Vec<Point>,
}

fn build_row(mss: usize, rate: u64, pacing: Pacing, mode: ThreadsMode, f: Figures) -> Row {
    // The first window includes the start; leave it out when there are others.
    let steady: Vec<f64> = if f.windows.len() > 1 {
        f.windows[1..].to_vec()
    } else {
        f.windows.clone()
    };
    Row {
        mss,
        threads: f.threads,
        threads_mode: mode,
        pacing,
        requested_bps: rate,
        achieved_bps: median(steady).unwrap_or(0.0),
        sent_bps: if f.elapsed_s > 0.0 {
            f.sent_bytes as f64 * 8.0 / f.elapsed_s
        } else {
            0.0
        },
        lost: f.sent_datagrams.saturating_sub(f.delivered_datagrams),
        kernel_drops: f.kernel_drops,
        send_errors: f.send_errors,
        unreachable: f.unreachable,
        windows_bps: f.windows,
        timeline: f.timeline,
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

/// The other machine of a `--remote` run.
struct Remote {
    /// The agent's address, as given.
    agent: String,
    /// The other machine's address (the agent's).
    ip: IpAddr,
    /// This machine's address on the way there.
    here: IpAddr,
}

/// Where the datagrams go and who counts them.
enum Receivers {
    /// A receiver pool in this process.
    Local(ReceiverPool),
    /// A receiver pool in a peer on another machine.
    Remote { peer: Peer, dst: SocketAddr },
}

fn run_one(
    args: &Config,
    remote: Option<&Remote>,
    rate: u64,
    mss: usize,
    threads: Threads,
    window: f64,
) -> Result<Row> {
    let interval = Duration::from_secs_f64(args.interval);
    let mut rx = match remote {
        None => Receivers::Local(ReceiverPool::start(
            "127.0.0.1:0".parse().unwrap(),
            Threads::Auto { min: 1, max: 4 },
            interval,
        )?),
        Some(r) => {
            let request = PeerRequest {
                interval_s: args.interval,
                window_s: window,
                duration_s: args.duration,
                main: r.here,
            };
            let mut peer = Peer::start::<UdpRate>(&request, &Place::remote(Some(&r.agent)))?;
            let port = match peer.await_report(START_TIMEOUT, "that it is ready")? {
                PeerReport::Ready { port } if port != 0 => port,
                _ => bail!("the peer did not say which UDP port it receives on"),
            };
            // Only the port comes from the peer: the datagrams go to the machine the user named.
            Receivers::Remote {
                peer,
                dst: SocketAddr::new(r.ip, port),
            }
        }
    };
    let dst = match &rx {
        Receivers::Local(pool) => pool.local_addr(),
        Receivers::Remote { dst, .. } => *dst,
    };
    let mut cfg = SenderPoolConfig::new(dst, mss, rate);
    cfg.threads = threads;
    cfg.pacing = args.pacing;
    cfg.interval = interval;
    let pool = SenderPool::start(cfg)?;
    if let Receivers::Remote { peer, .. } = &mut rx {
        peer.send(&Command::Start)?;
    }
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(args.duration);
    let mid = start + Duration::from_secs_f64(args.duration / 2.0);
    let mut stress = None;
    let mut changed = false;
    let mut windows = Vec::new();
    let mut last = (
        Instant::now(),
        match &rx {
            Receivers::Local(pool) => pool.totals().bytes,
            Receivers::Remote { .. } => 0,
        },
    );
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
        match &mut rx {
            Receivers::Local(rx) => {
                if now.duration_since(last.0).as_secs_f64() >= window {
                    let bytes = rx.totals().bytes;
                    windows.push(
                        (bytes - last.1) as f64 * 8.0 / now.duration_since(last.0).as_secs_f64(),
                    );
                    last = (now, bytes);
                }
            }
            Receivers::Remote { peer, .. } => peer.check_alive()?,
        }
    }
    if let Receivers::Remote { peer, .. } = &mut rx {
        peer.send(&Command::Stop)?;
    }
    drop(stress);
    let (sent, sent_bytes) = pool.sent();
    let send_errors = pool.send_errors();
    let unreachable = pool.unreachable();
    let final_threads = pool.threads();
    let elapsed = start.elapsed().as_secs_f64();
    let timeline = pool.stop();
    let (delivered, kernel_drops) = match rx {
        Receivers::Local(rx) => {
            // Let the last datagrams land before counting.
            std::thread::sleep(LAND);
            let totals = rx.totals();
            (totals.datagrams, totals.kernel_drops)
        }
        Receivers::Remote { mut peer, .. } => {
            peer.send(&Command::Count)?;
            let counts = match peer.await_report(START_TIMEOUT, "its counts")? {
                PeerReport::Counts(c) => c,
                PeerReport::Ready { .. } => bail!("the peer said it was ready twice"),
            };
            peer.finish(START_TIMEOUT)?;
            windows = counts.windows_bps;
            (counts.datagrams, counts.kernel_drops)
        }
    };
    let figures = Figures {
        threads: final_threads,
        sent_datagrams: sent,
        sent_bytes,
        elapsed_s: elapsed,
        send_errors,
        unreachable,
        delivered_datagrams: delivered,
        kernel_drops,
        windows,
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
    };
    let mode = if matches!(threads, Threads::Auto { .. }) {
        ThreadsMode::Auto
    } else {
        ThreadsMode::Fixed
    };
    Ok(build_row(mss, rate, args.pacing, mode, figures))
}

// ---------------------------------------------------------------------------------------------
// The peer: the receivers on another machine

/// What the main side asks of the peer: receive on a port of its own, count in windows of
/// `window_s` from the start to the stop, and report the counts.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerRequest {
    /// The receiver pool's manager interval.
    interval_s: f64,
    window_s: f64,
    /// How long the run lasts (bounds the peer's waits).
    duration_s: f64,
    /// The main side's address, for the address family to receive on.
    main: IpAddr,
}

/// What the main side tells the peer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Command {
    /// The senders have started: the windows start now.
    Start,
    /// The run is over: no more windows.
    Stop,
    /// The senders have stopped: count (after the last datagrams landed) and report.
    Count,
}

/// What the peer tells the main side.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum PeerReport {
    /// The receivers are bound on `port`.
    Ready {
        port: u16,
    },
    Counts(Counts),
}

#[derive(Debug, Serialize, Deserialize)]
struct Counts {
    datagrams: u64,
    kernel_drops: u64,
    /// The delivered rate per window, in bit/s, timed on the peer's clock.
    windows_bps: Vec<f64>,
}

/// Waits at most `timeout` for the main side's next command.
fn next_command(link: &mut PeerLink, timeout: Duration, what: &str) -> Result<Command> {
    match link.recv::<Command>(timeout)? {
        Some(c) => Ok(c),
        None => bail!("the main side did not say {what} within {timeout:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Results

impl Experiment for UdpRate {
    head!("udp-rate", "Paced multithreaded UDP sending", across machines);

    fn validate(args: &Config) -> Result<()> {
        if !(0.01..=3600.0).contains(&args.duration) {
            bail!("--duration must be between 0.01 and 3600 seconds");
        }
        if !(args.interval >= 0.05 && args.interval <= 10.0) {
            bail!("--interval must be between 0.05 and 10 seconds");
        }
        if args.rate.is_empty() {
            bail!("--rate: give at least one rate");
        }
        for &r in args.rate.iter().chain(&args.rate_change) {
            if r == 0 || r > MAX_RATE {
                bail!("rate {r} must be above 0 and at most 10T bit/s");
            }
        }
        if args.mss.is_empty() {
            bail!("--mss: give at least one size");
        }
        for &m in &args.mss {
            if m == 0 || m > 65_507 {
                bail!("--mss {m}: a UDP datagram carries 1 to 65507 bytes");
            }
        }
        if args.stress > MAX_STRESS {
            bail!(
                "--stress {}: at most {MAX_STRESS} busy threads",
                args.stress
            );
        }
        args.threads.check()
    }

    fn run(args: &Config) -> Result<Measured<Self>> {
        let settings = args.threads.settings();
        let window = window_s(args);
        let remote = match &args.remote {
            None => None,
            Some(agent) => Some(Remote {
                agent: agent.clone(),
                ip: crate::peer::agent_address(agent)?.ip(),
                here: crate::peer::local_address_towards(agent)?,
            }),
        };
        let mut rows = Vec::new();
        for &rate in &args.rate {
            for &mss in &args.mss {
                for &threads in &settings {
                    let row = run_one(args, remote.as_ref(), rate, mss, threads, window)?;
                    note!(
                    "  MSS {:>5}, {} thread(s){}: {:.3} of {:.3} Gbit/s delivered, {:.3} sent, {} lost",
                    row.mss,
                    row.threads,
                    if row.threads_mode == ThreadsMode::Auto { " (auto)" } else { "" },
                    row.achieved_bps / 1e9,
                    row.requested_bps as f64 / 1e9,
                    row.sent_bps / 1e9,
                    row.lost
                );
                    rows.push(row);
                }
            }
        }
        let setup = Setup {
        rates_bps: args.rate.clone(),
        mss: args.mss.clone(),
        threads: args.threads.to_string(),
        pacing: args.pacing,
        duration_s: args.duration,
        interval_s: args.interval,
        stress_cpus: args.stress,
        rate_change_bps: args.rate_change,
        window_s: window,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        path: match &args.remote {
            None => "loopback 127.0.0.1: SenderPool (one socket per thread) -> ReceiverPool (SO_REUSEPORT)".to_owned(),
            Some(agent) => format!("SenderPool (one socket per thread) on this machine -> ReceiverPool (SO_REUSEPORT) in a peer process on the machine of the lab agent at {agent}, which counts the datagrams and times the windows on its own clock"),
        },
    };
        Ok(Measured { setup, rows })
    }

    fn run_peer(args: PeerRequest, link: &mut PeerLink) -> Result<()> {
        let in_range = (0.05..=10.0).contains(&args.interval_s)
            && args.window_s >= 0.01
            && args.window_s <= 10.0
            && args.duration_s > 0.0
            && args.duration_s <= 3600.0;
        if !in_range {
            bail!("the peer request's interval, window or duration is out of range");
        }
        let any: SocketAddr = match args.main {
            IpAddr::V4(_) => ([0, 0, 0, 0], 0).into(),
            IpAddr::V6(_) => ([0u16; 8], 0).into(),
        };
        let rx = ReceiverPool::start(
            any,
            Threads::Auto { min: 1, max: 4 },
            Duration::from_secs_f64(args.interval_s),
        )?;
        link.report(&PeerReport::Ready {
            port: rx.local_addr().port(),
        })?;
        match next_command(link, START_TIMEOUT, "that the senders started")? {
            Command::Start => {}
            other => bail!("the main side said {other:?} before the start"),
        }
        let window = args.window_s;
        // The run, and time for the main side to stop it.
        let deadline = Instant::now() + Duration::from_secs_f64(args.duration_s) + START_TIMEOUT;
        let mut windows = Vec::new();
        let mut last = (Instant::now(), rx.totals().bytes);
        loop {
            match link.recv::<Command>(Duration::from_millis(10))? {
                Some(Command::Stop) => break,
                Some(other) => bail!("the main side said {other:?} during the run"),
                None => {}
            }
            let now = Instant::now();
            if now >= deadline {
                bail!("the main side did not end the run in time");
            }
            if now.duration_since(last.0).as_secs_f64() >= window {
                let bytes = rx.totals().bytes;
                windows.push(
                    bytes.saturating_sub(last.1) as f64 * 8.0
                        / now.duration_since(last.0).as_secs_f64(),
                );
                last = (now, bytes);
            }
        }
        match next_command(link, START_TIMEOUT, "that the senders stopped")? {
            Command::Count => {}
            other => bail!("the main side said {other:?} instead of asking for the counts"),
        }
        // Let the last datagrams land before counting.
        std::thread::sleep(LAND);
        let totals = rx.totals();
        link.report(&PeerReport::Counts(Counts {
            datagrams: totals.datagrams,
            kernel_drops: totals.kernel_drops,
            windows_bps: windows,
        }))
    }

    fn table(results: &Results<Self>) -> String {
        let rows: &[Row] = &results.rows;
        let mut out = format!(
            "{:>6} {:>8} {:>9} {:>12} {:>12} {:>12} {:>8}\n",
            "MSS", "THREADS", "PACING", "REQUESTED", "DELIVERED", "SENT", "LOST"
        );
        for row in rows {
            out.push_str(&format!(
                "{:>6} {:>8} {:>9} {:>10.3}G {:>10.3}G {:>10.3}G {:>8}{}\n",
                row.mss,
                format!(
                    "{}{}",
                    row.threads,
                    if row.threads_mode == ThreadsMode::Auto {
                        " (auto)"
                    } else {
                        ""
                    }
                ),
                row.pacing.name(),
                row.requested_bps as f64 / 1e9,
                row.achieved_bps / 1e9,
                row.sent_bps / 1e9,
                row.lost,
                match (row.unreachable, row.threads_mode) {
                    (false, _) => "",
                    // A fixed pool may not add a thread: it says it stayed behind.
                    (true, ThreadsMode::Fixed) => "  behind schedule with this many threads",
                    (true, ThreadsMode::Auto) => "  rate not reachable on this machine",
                },
            ));
        }
        out
    }

    fn section(results: &Results<Self>) -> Result<Section> {
        let rows: &[Row] = &results.rows;
        let parts: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{:.2} of {:.2} Gbit/s (MSS {}, {} thread(s))",
                    r.achieved_bps / 1e9,
                    r.requested_bps as f64 / 1e9,
                    r.mss,
                    r.threads
                )
            })
            .collect();
        let sentence = format!(
        "{} paces each UDP sender thread at T = MSS·8·N/R and adds threads from the accumulated lag. Here: {}.",
        cite_first(&PACED_UDP),
        parts.join("; ")
    );
        let mut plots = Vec::new();
        // The paced UDP study's figures 2-4: achieved rate against the number of sender threads, one
        // line per MSS (and requested rate, and pacing when several were run).
        let mut rates: Vec<u64> = rows.iter().map(|r| r.requested_bps).collect();
        rates.sort_unstable();
        rates.dedup();
        let mut pacings: Vec<Pacing> = Vec::new();
        for r in rows {
            if !pacings.contains(&r.pacing) {
                pacings.push(r.pacing);
            }
        }
        let mut series: Vec<XySeries> = Vec::new();
        for r in rows.iter().filter(|r| r.threads_mode != ThreadsMode::Auto) {
            let mut key = format!("MSS {} B", r.mss);
            if rates.len() > 1 {
                key.push_str(&format!(
                    ", {:.2} Gbit/s asked",
                    r.requested_bps as f64 / 1e9
                ));
            }
            if pacings.len() > 1 {
                key.push_str(&format!(", {}", r.pacing.name()));
            }
            // The spread of the 1-second windows.
            let w = &r.windows_bps;
            let spread = (w.len() > 1).then(|| {
                let lo = w.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = w.iter().copied().fold(0.0f64, f64::max);
                (lo / 1e9, hi / 1e9)
            });
            let point = (r.threads as f64, r.achieved_bps / 1e9, spread);
            match series.iter_mut().find(|s| s.0 == key) {
                Some(s) => s.1.push(point),
                None => series.push((key, vec![point])),
            }
        }
        let reference = (rates.len() == 1)
            .then(|| rows.first().map(|r| r.requested_bps as f64 / 1e9))
            .flatten();
        let ref_label = reference.map(|r| format!("requested {r:.2} Gbit/s"));
        if !series.is_empty() {
            plots.push(Plot {
            file: "udp-rate.svg".to_owned(),
            svg: xy_chart(
                "Achieved UDP rate against sender threads",
                "sender threads",
                "delivered Gbit/s",
                &series,
                false,
                true,
                ref_label.as_deref().zip(reference),
            )?,
            caption: "Median of the 1-second windows of the delivered rate, per MSS; the bar spans the windows. Dashed: the requested rate.".to_owned(),
        });
        }
        // Timelines: runs whose thread count or requested rate changed along the way.
        for (i, r) in rows.iter().enumerate() {
            let at: Vec<f64> = r.timeline.iter().map(|p| p.at_s).collect();
            let req: Vec<f64> = r.timeline.iter().map(|p| p.requested_bps as f64).collect();
            let sent: Vec<f64> = r.timeline.iter().map(|p| p.sent_bps).collect();
            let threads: Vec<f64> = r.timeline.iter().map(|p| p.threads as f64).collect();
            let changes = |v: &[f64]| v.windows(2).any(|w| w[0] != w[1]);
            if at.len() < 2
                || !(changes(&req) || changes(&threads) || r.threads_mode == ThreadsMode::Auto)
            {
                continue;
            }
            let gb = |v: Vec<f64>| -> Vec<f64> { v.into_iter().map(|x| x / 1e9).collect() };
            plots.push(Plot {
            file: format!("udp-rate-timeline-{i}.svg"),
            svg: timeline_chart(
                &format!(
                    "Timeline: MSS {} B, {} pacing, {} threads",
                    r.mss,
                    r.pacing.name(),
                    r.threads_mode.name()
                ),
                &at,
                &gb(req),
                &gb(sent),
                &threads,
            )?,
            caption: "Per manager interval: the requested rate (dashed), the rate the senders put out, and the number of sender threads the manager ran.".to_owned(),
        });
        }
        Ok(Section { plots, sentence })
    }

    /// The paced UDP study's figures beside ferry's pools: what one sender thread reaches at MTU
    /// 1500, what several reach, and how the automatic pool follows a change. The study measured
    /// no other system, so there is no floor or peer.
    fn summary(results: &Results<Self>) -> Vec<SummaryLine> {
        let rows: &[Row] = &results.rows;
        let gbps = |v: f64| format!("{:.2} Gbit/s", v / 1e9);
        let fixed_1472 = || {
            rows.iter()
                .filter(|r| r.threads_mode == ThreadsMode::Fixed && r.mss == 1472)
        };
        let mut lines = Vec::new();
        if let Some(one) = fixed_1472()
            .filter(|r| r.threads == 1)
            .max_by(|a, b| a.achieved_bps.total_cmp(&b.achieved_bps))
        {
            lines.push(SummaryLine {
                what: "one paced sender thread, MSS 1472 (MTU 1500)".to_owned(),
                ferry: format!(
                    "{} delivered of {} asked",
                    gbps(one.achieved_bps),
                    gbps(one.requested_bps as f64)
                ),
                floor: None,
                best_peer: None,
                study: Some(format!(
                    "one sender: 3.2 Gbit/s on a 2.3 GHz Xeon, 3.9 Gbit/s on a 2.47 GHz one ({})",
                    cite(&PACED_UDP)
                )),
            });
        }
        if let Some(best) = fixed_1472()
            .filter(|r| r.threads > 1)
            .max_by(|a, b| a.achieved_bps.total_cmp(&b.achieved_bps))
        {
            lines.push(SummaryLine {
                what: "several paced sender threads, MSS 1472 (MTU 1500)".to_owned(),
                ferry: format!(
                    "{} delivered of {} asked, with {} threads",
                    gbps(best.achieved_bps),
                    gbps(best.requested_bps as f64),
                    best.threads
                ),
                floor: None,
                best_peer: None,
                study: Some(format!(
                    "10 Gbit/s, which one sender does not reach ({})",
                    cite(&PACED_UDP)
                )),
            });
        }
        if let Some(auto) = rows.iter().find(|r| r.threads_mode == ThreadsMode::Auto) {
            let asked = auto
                .timeline
                .last()
                .map_or(auto.requested_bps, |p| p.requested_bps);
            lines.push(SummaryLine {
                what: format!("automatic pool, MSS {}", auto.mss),
                ferry: format!(
                    "{} thread(s) at the end, {} delivered of {} asked",
                    auto.threads,
                    gbps(auto.achieved_bps),
                    gbps(asked as f64)
                ),
                floor: None,
                best_peer: None,
                study: Some(format!(
                "one thread added per 0.5 s interval: 1 s to reach 10 Gbit/s from one sender ({})",
                cite(&PACED_UDP)
            )),
            });
        }
        lines
    }
}

/// Results of a small made-up run, for the report's tests: three fixed pools whose timelines
/// stay flat, and an automatic one that grew when the rate asked for rose.
#[cfg(test)]
pub(crate) fn example() -> Results<UdpRate> {
    let config = Config {
        rate: vec![3_000_000_000],
        mss: vec![1472, 8972],
        threads: ThreadCounts::Fixed(vec![1, 2]),
        duration: 3.0,
        ..Config::default()
    };
    let point = |at_s: f64, requested_bps: u64, sent_bps: f64, threads: usize| Point {
        at_s,
        requested_bps,
        sent_bps,
        threads,
        positive_lag_ms: 0.0,
        negative_lag_ms: 0.0,
        decision: "keep".to_owned(),
    };
    let figures = |threads: usize, achieved: f64, timeline: Vec<Point>| Figures {
        threads,
        sent_datagrams: 1000,
        sent_bytes: (achieved * 3.0 / 8.0) as u64,
        elapsed_s: 3.0,
        send_errors: 0,
        unreachable: false,
        delivered_datagrams: 990,
        kernel_drops: 10,
        windows: vec![achieved * 0.5, achieved * 0.9, achieved],
        timeline,
    };
    let flat = |threads: usize| {
        vec![
            point(0.5, 3_000_000_000, 2e9, threads),
            point(1.0, 3_000_000_000, 2e9, threads),
        ]
    };
    let pacing = config.pacing;
    let rows = vec![
        build_row(
            1472,
            3_000_000_000,
            pacing,
            ThreadsMode::Fixed,
            figures(1, 2.4e9, flat(1)),
        ),
        build_row(
            1472,
            3_000_000_000,
            pacing,
            ThreadsMode::Fixed,
            figures(2, 3.0e9, flat(2)),
        ),
        build_row(
            8972,
            3_000_000_000,
            pacing,
            ThreadsMode::Fixed,
            figures(1, 3.0e9, flat(1)),
        ),
        build_row(
            1472,
            1_000_000_000,
            pacing,
            ThreadsMode::Auto,
            figures(
                2,
                3.0e9,
                vec![
                    point(0.5, 1_000_000_000, 1e9, 1),
                    point(1.0, 4_000_000_000, 3e9, 2),
                ],
            ),
        ),
    ];
    let setup = Setup {
        rates_bps: config.rate.clone(),
        mss: config.mss.clone(),
        threads: config.threads.to_string(),
        pacing: config.pacing,
        duration_s: config.duration,
        interval_s: config.interval,
        stress_cpus: 0,
        rate_change_bps: None,
        window_s: 1.0,
        cpus: 2,
        path: String::new(),
    };
    Results::new(crate::Machine::probe(), config, Measured { setup, rows })
}

#[cfg(test)]
mod tests;
