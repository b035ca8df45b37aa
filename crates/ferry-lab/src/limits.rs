//! `ferry lab limits`: the raw limits of this machine, measured without ferry, so that every
//! figure of the report can be read against them:
//!
//! - `cacheline`: two threads, pinned to two CPUs, ping-pong one atomic word (one-way = round
//!   trip / 2) — the floor of any message between two cores;
//! - `futex`: the same, but the waiter sleeps in `futex_wait` and is woken by `futex_wake` — the
//!   floor of a message to a sleeping receiver;
//! - `udp-loopback`: two threads ping-pong datagrams over blocking 127.0.0.1 sockets;
//! - `memcpy`: copy bandwidth by size, from L1 (4 KiB) to well beyond the last-level cache.

use std::hint::black_box;
use std::net::{Ipv4Addr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Summary;
use crate::chart::{bar_svg, color, line_chart, Bars, Plot, Section, W};
use crate::error::{bail, note, Context, Result};
use crate::experiment::{head, Experiment, Measured, Results};
use crate::table::Table;
use crate::units::{format_ns, format_size};

/// What `ferry lab limits` is asked to measure.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Round trips per latency measurement (cache line, futex, UDP).
    pub samples: usize,
    /// Seconds of copying per memcpy size.
    pub memcpy_seconds: f64,
    /// Largest memcpy size in bytes.
    pub memcpy_max: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            samples: 20_000,
            memcpy_seconds: 0.3,
            memcpy_max: 64 << 20,
        }
    }
}

crate::choice! {
    /// What a row measures.
    pub enum Kind: "kind" {
        /// Two threads ping-pong one atomic word.
        Cacheline = "cacheline",
        /// The same, the waiter sleeping in `futex_wait`.
        Futex = "futex",
        /// Two threads ping-pong datagrams over 127.0.0.1.
        UdpLoopback = "udp-loopback",
        /// Copy bandwidth.
        Memcpy = "memcpy",
    }
}

/// One measurement.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    pub kind: Kind,
    pub size_bytes: usize,
    /// Round trips measured (latency kinds) or copies timed (memcpy).
    pub samples: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ns: Option<u64>,
    /// memcpy: gigabytes (10^9 bytes) copied per second, the median of the trials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gbytes_per_s: Option<f64>,
    /// memcpy: the best trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gbytes_per_s_max: Option<f64>,
    /// The CPUs of the two threads (latency kinds) or of the copying thread.
    pub cpus: Vec<usize>,
}

/// How a limits run was made.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    samples: usize,
    memcpy_seconds: f64,
    memcpy_sizes: Vec<usize>,
    one_way: String,
    /// Each kind and what it does.
    kinds: Vec<(Kind, String)>,
    pinned: bool,
}

/// The experiment (see the module's documentation).
pub struct Limits;

/// The memcpy sizes: 4 KiB, then four times larger each, up to `max`.
fn memcpy_sizes(max: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut size = 4096;
    while size <= max {
        sizes.push(size);
        size *= 4;
    }
    sizes
}

fn measure(args: &Config, cpus: Option<(usize, usize)>, sizes: &[usize]) -> Result<Vec<Row>> {
    let cpu_list = cpus.map_or(Vec::new(), |(a, b)| vec![a, b]);
    let mut rows = Vec::new();
    note!(
        "ferry lab limits: cache line, futex and UDP round trips ({} each), memcpy 4K..{}",
        args.samples,
        format_size(args.memcpy_max)
    );
    let s = ping_pong(cpus, args.samples, Handoff::Spin)?;
    rows.push(latency_row(Kind::Cacheline, 8, s, &cpu_list));
    let s = ping_pong(cpus, args.samples.min(20_000), Handoff::Futex)?;
    rows.push(latency_row(Kind::Futex, 4, s, &cpu_list));
    for size in [32usize, 1024] {
        let s = udp_ping_pong(cpus, args.samples.min(20_000), size)?;
        rows.push(latency_row(Kind::UdpLoopback, size, s, &cpu_list));
    }
    if let Some((a, _)) = cpus {
        let _ = crate::os::pin_current_thread(a);
    }
    let copier = cpus.map_or(Vec::new(), |(a, _)| vec![a]);
    for &size in sizes {
        let (median, best, trials) = memcpy_bandwidth(size, args.memcpy_seconds);
        crate::signal::check()?;
        rows.push(memcpy_row(size, median, best, trials, &copier));
    }
    Ok(rows)
}

impl Experiment for Limits {
    head!("limits", "Raw limits of this machine", no peer);

    fn validate(args: &Config) -> Result<()> {
        if args.samples == 0 {
            bail!("--samples must be at least 1");
        }
        if !(args.memcpy_seconds > 0.0 && args.memcpy_seconds <= 60.0) {
            bail!("--memcpy-seconds must be between 0 and 60");
        }
        if !(4096..=1 << 30).contains(&args.memcpy_max) {
            bail!(
            "--memcpy-max must be between 4K and 1G (it copies between two buffers of that size)"
        );
        }
        crate::experiment::check_counts(args.samples, 0)
    }

    fn run(args: &Config) -> Result<Measured<Self>> {
        let allowed = super::allowed_cpus();
        // Two different CPUs when there are two; otherwise both threads share the one there is.
        let cpus: Option<(usize, usize)> = match allowed.as_slice() {
            [a, b, ..] => Some((*a, *b)),
            [a] => Some((*a, *a)),
            [] => None,
        };
        let sizes = memcpy_sizes(args.memcpy_max);
        let outcome = measure(args, cpus, &sizes);
        // Back to every allowed CPU (the suite runs more experiments in this process).
        restore_affinity(&allowed);
        let rows = outcome?;
        let setup = Setup {
        samples: args.samples,
        memcpy_seconds: args.memcpy_seconds,
        memcpy_sizes: sizes,
        one_way: "round trip / 2, timed with CLOCK_MONOTONIC around each round trip".to_owned(),
        kinds: vec![
            (Kind::Cacheline, "two threads on two CPUs ping-pong one AtomicU64 (spinning)".to_owned()),
            (Kind::Futex, "two threads ping-pong an AtomicU32; the waiter sleeps in futex_wait, the writer calls futex_wake".to_owned()),
            (Kind::UdpLoopback, "two threads, blocking std::net::UdpSockets on 127.0.0.1, one datagram each way".to_owned()),
            (Kind::Memcpy, "copy_from_slice between two buffers of the size, repeated; GB = 10^9 bytes".to_owned()),
        ],
        pinned: cpus.is_some(),
    };
        Ok(Measured { setup, rows })
    }

    fn table(results: &Results<Self>) -> String {
        let rows: &[Row] = &results.rows;
        let mut table = Table::new(&["kind", "size", "p50 one-way", "p99 one-way", "GB/s"]);
        for r in rows {
            table.row(vec![
                r.kind.name().to_owned(),
                format_size(r.size_bytes),
                r.p50_ns.map_or("-".into(), |v| format_ns(v as f64)),
                r.p99_ns.map_or("-".into(), |v| format_ns(v as f64)),
                r.gbytes_per_s.map_or("-".into(), |v| format!("{v:.1}")),
            ]);
        }
        table.render()
    }

    fn section(results: &Results<Self>) -> Result<Section> {
        let rs: &[Row] = &results.rows;
        let mut plots = Vec::new();
        let mem: Vec<(f64, f64)> = rs
            .iter()
            .filter(|r| r.kind == Kind::Memcpy)
            .filter_map(|r| Some((r.size_bytes as f64, r.gbytes_per_s?)))
            .collect();
        if !mem.is_empty() {
            plots.push(Plot {
                file: "limits-memcpy.svg".to_owned(),
                svg: line_chart(
                    "memcpy bandwidth by size",
                    "copy size",
                    "GB/s (10^9 bytes per second)",
                    &[("memcpy (median of trials)".into(), mem.clone())],
                    &|y| format!("{y:.1}"),
                )?,
                caption: "One thread copies a buffer of the size again and again; log axes."
                    .to_owned(),
            });
        }
        let lat: Vec<&Row> = rs.iter().filter(|r| r.p50_ns.is_some()).collect();
        if !lat.is_empty() {
            let cats: Vec<String> = lat
                .iter()
                .map(|r| format!("{} {}", r.kind.name(), format_size(r.size_bytes)))
                .collect();
            let us = |f: fn(&Row) -> Option<u64>| {
                lat.iter()
                    .map(|r| f(r).map(|v| v as f64 / 1000.0))
                    .collect::<Vec<_>>()
            };
            plots.push(Plot {
            file: "limits-latency.svg".to_owned(),
            svg: bar_svg(
                &[Bars {
                    title: "Raw one-way latency between two CPUs (log scale)",
                    y_desc: "one-way latency (µs)",
                    categories: cats,
                    series: vec![
                        ("p50".into(), color(0), us(|r| r.p50_ns)),
                        ("p99".into(), color(1), us(|r| r.p99_ns)),
                    ],
                    reference: None,
                    log_y: true,
                }],
                W,
            )?,
            caption: "Two threads pinned to two CPUs: an atomic cache line, a futex wake, blocking UDP on loopback. One-way = round trip / 2.".to_owned(),
        });
        }
        let p50 = |kind: Kind| {
            rs.iter()
                .find(|r| r.kind == kind)
                .and_then(|r| r.p50_ns)
                .map(|v| v as f64)
        };
        let mut parts = Vec::new();
        if let Some(v) = p50(Kind::Cacheline) {
            parts.push(format!("cache line {}", format_ns(v)));
        }
        if let Some(v) = p50(Kind::Futex) {
            parts.push(format!("futex wake {}", format_ns(v)));
        }
        if let Some(v) = p50(Kind::UdpLoopback) {
            parts.push(format!("UDP loopback {}", format_ns(v)));
        }
        if let (Some(a), Some(b)) = (mem.iter().find(|p| p.0 >= 65536.0), mem.last()) {
            parts.push(format!(
                "memcpy {:.1} GB/s at {} and {:.1} GB/s at {}",
                a.1,
                format_size(a.0 as usize),
                b.1,
                format_size(b.0 as usize)
            ));
        }
        Ok(Section {
        plots,
        sentence: format!(
            "ferry's development machines (2 vCPU EPYC, KVM) measured: cache line 50–170 ns, futex wake ~28 µs, blocking UDP ~35 µs across CPUs (one-way), memcpy ~40 GB/s up to 1 MiB and ~10 GB/s beyond. Here (one-way p50): {}.",
            parts.join(", ")
        ),
    })
    }
}

/// Lets the calling thread run on every CPU in `cpus` again.
pub fn restore_affinity(cpus: &[usize]) {
    if cpus.is_empty() {
        return;
    }
    let mut set = rustix::thread::CpuSet::new();
    for &c in cpus {
        set.set(c);
    }
    let _ = rustix::thread::sched_setaffinity(None, &set);
}

fn latency_row(kind: Kind, size: usize, mut s: Vec<u64>, cpus: &[usize]) -> Row {
    let sum = Summary::of(&mut s);
    Row {
        kind,
        size_bytes: size,
        samples: sum.samples,
        p50_ns: Some(sum.p50_ns),
        p99_ns: Some(sum.p99_ns),
        min_ns: Some(sum.min_ns),
        gbytes_per_s: None,
        gbytes_per_s_max: None,
        cpus: cpus.to_vec(),
    }
}

fn memcpy_row(size: usize, median: f64, best: f64, trials: usize, cpus: &[usize]) -> Row {
    Row {
        kind: Kind::Memcpy,
        size_bytes: size,
        samples: trials,
        p50_ns: None,
        p99_ns: None,
        min_ns: None,
        gbytes_per_s: Some(median),
        gbytes_per_s_max: Some(best),
        cpus: cpus.to_vec(),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Handoff {
    Spin,
    Futex,
}

/// The longest any one wait may last before the measurement gives up.
const STALL: Duration = Duration::from_secs(5);

/// Ping-pongs a counter between this thread and a helper thread: this side writes odd values,
/// the helper answers with the next even one. Returns one-way latencies (ns).
fn ping_pong(cpus: Option<(usize, usize)>, samples: usize, how: Handoff) -> Result<Vec<u64>> {
    let word = Arc::new(AtomicU32::new(0));
    let word64 = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicBool::new(false));
    let warmup = (samples / 10).max(100);
    let total = (warmup + samples) as u32;
    let helper = {
        let (word, word64, failed) = (word.clone(), word64.clone(), failed.clone());
        std::thread::spawn(move || {
            if let Some((_, b)) = cpus {
                let _ = crate::os::pin_current_thread(b);
            }
            for i in 0..total {
                let want = 2 * i + 1;
                let since = Instant::now();
                match how {
                    Handoff::Spin => {
                        while word64.load(Ordering::Acquire) != want as u64 {
                            std::hint::spin_loop();
                            if failed.load(Ordering::Relaxed) || since.elapsed() > STALL {
                                return;
                            }
                        }
                        word64.store(want as u64 + 1, Ordering::Release);
                    }
                    Handoff::Futex => {
                        loop {
                            let v = word.load(Ordering::Acquire);
                            if v == want {
                                break;
                            }
                            if failed.load(Ordering::Relaxed) || since.elapsed() > STALL {
                                return;
                            }
                            crate::os::futex_wait(&word, v, Some(Duration::from_millis(100)));
                        }
                        word.store(want + 1, Ordering::Release);
                        crate::os::futex_wake(&word);
                    }
                }
            }
        })
    };
    if let Some((a, _)) = cpus {
        let _ = crate::os::pin_current_thread(a);
    }
    let mut out = Vec::with_capacity(samples);
    let mut result = Ok(());
    'outer: for i in 0..total {
        let send = 2 * i + 1;
        let since = Instant::now();
        match how {
            Handoff::Spin => {
                word64.store(send as u64, Ordering::Release);
                while word64.load(Ordering::Acquire) != send as u64 + 1 {
                    std::hint::spin_loop();
                    if since.elapsed() > STALL {
                        result = Err(crate::error::Error::msg("cache-line ping-pong stalled"));
                        break 'outer;
                    }
                }
            }
            Handoff::Futex => {
                word.store(send, Ordering::Release);
                crate::os::futex_wake(&word);
                loop {
                    let v = word.load(Ordering::Acquire);
                    if v == send + 1 {
                        break;
                    }
                    if since.elapsed() > STALL {
                        result = Err(crate::error::Error::msg("futex ping-pong stalled"));
                        break 'outer;
                    }
                    crate::os::futex_wait(&word, v, Some(Duration::from_millis(100)));
                }
            }
        }
        if i as usize >= warmup {
            out.push((since.elapsed().as_nanos() / 2) as u64);
        }
        // After the timed part; a relaxed load of a flag nobody writes while we run.
        if crate::signal::interrupted() {
            result = crate::signal::check();
            break;
        }
    }
    // The helper gives up at once (spin) or within its 100 ms futex slice.
    failed.store(true, Ordering::Relaxed);
    let _ = helper.join();
    result.map(|()| out)
}

/// Ping-pongs `size`-byte datagrams between two blocking sockets on 127.0.0.1, one per thread.
fn udp_ping_pong(cpus: Option<(usize, usize)>, samples: usize, size: usize) -> Result<Vec<u64>> {
    let a = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).context("bind a UDP socket")?;
    let b = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).context("bind a UDP socket")?;
    a.connect(b.local_addr()?)?;
    b.connect(a.local_addr()?)?;
    // Receives wait in slices (the sockets stay blocking: `recv` sleeps in the kernel), so that
    // both threads notice Ctrl-C or the other's end between them; STALL bounds the whole wait.
    a.set_read_timeout(Some(RECV_SLICE))?;
    b.set_read_timeout(Some(RECV_SLICE))?;
    let warmup = (samples / 10).max(100);
    let total = warmup + samples;
    let stop = Arc::new(AtomicBool::new(false));
    let helper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            if let Some((_, c)) = cpus {
                let _ = crate::os::pin_current_thread(c);
            }
            let mut buf = vec![0u8; size + 1];
            for _ in 0..total {
                let Ok(n) = recv_within(&b, &mut buf, &stop) else {
                    return;
                };
                if b.send(&buf[..n]).is_err() {
                    return;
                }
            }
        })
    };
    if let Some((c, _)) = cpus {
        let _ = crate::os::pin_current_thread(c);
    }
    let msg = vec![7u8; size];
    let mut buf = vec![0u8; size + 1];
    let mut out = Vec::with_capacity(samples);
    let result = (|| -> Result<()> {
        for i in 0..total {
            let t0 = Instant::now();
            a.send(&msg).context("UDP send")?;
            let n = recv_within(&a, &mut buf, &stop).context("UDP loopback ping-pong")?;
            if n != size {
                bail!("UDP loopback: {n} bytes came back, sent {size}");
            }
            if i >= warmup {
                out.push((t0.elapsed().as_nanos() / 2) as u64);
            }
        }
        Ok(())
    })();
    // Relaxed: a flag polled between receive slices; nothing else is published through it.
    stop.store(true, Ordering::Relaxed);
    let _ = helper.join();
    result.map(|()| out)
}

/// How long one UDP receive waits before it looks at Ctrl-C and `stop` again.
const RECV_SLICE: Duration = Duration::from_millis(100);

/// Receives one datagram on `socket` (whose read timeout is RECV_SLICE), waiting at most STALL;
/// an error on Ctrl-C or SIGTERM, once `stop` is set, or after STALL.
fn recv_within(socket: &UdpSocket, buf: &mut [u8], stop: &AtomicBool) -> Result<usize> {
    let since = Instant::now();
    loop {
        match socket.recv(buf) {
            Ok(n) => return Ok(n),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                crate::signal::check()?;
                // Relaxed: see `udp_ping_pong`.
                if stop.load(Ordering::Relaxed) {
                    bail!("stopped");
                }
                if since.elapsed() > STALL {
                    bail!("nothing came back within {STALL:?}");
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Copies `size` bytes again and again for about `seconds`, in trials; returns the median and the
/// best trial in GB/s, and the number of trials.
fn memcpy_bandwidth(size: usize, seconds: f64) -> (f64, f64, usize) {
    let src = vec![0x5au8; size];
    let mut dst = vec![0u8; size];
    // Touch both once (page faults are not bandwidth).
    dst.copy_from_slice(&src);
    // Copies per trial: about 1 ms worth at 20 GB/s, at least one.
    let per_trial = (20_000_000 / size).max(1);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let mut rates = Vec::new();
    // Ctrl-C ends it after the first trial (the caller then stops).
    while rates.is_empty()
        || ((Instant::now() < deadline || rates.len() < 3) && !crate::signal::interrupted())
    {
        let t0 = Instant::now();
        for _ in 0..per_trial {
            dst.copy_from_slice(black_box(&src));
            black_box(&mut dst);
        }
        let secs = t0.elapsed().as_secs_f64().max(1e-9);
        rates.push((per_trial * size) as f64 / secs / 1e9);
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    let best = rates[rates.len() - 1];
    (median, best, rates.len())
}

/// Results of a small made-up run, for the report's tests.
#[cfg(test)]
pub(crate) fn example() -> Results<Limits> {
    let config = Config {
        samples: 4,
        memcpy_max: 1 << 20,
        ..Config::default()
    };
    let cpus = [0, 1];
    let rows = vec![
        latency_row(Kind::Cacheline, 8, vec![60, 80, 70, 90], &cpus),
        latency_row(Kind::Futex, 4, vec![20_000, 30_000, 25_000, 40_000], &cpus),
        latency_row(
            Kind::UdpLoopback,
            32,
            vec![30_000, 35_000, 32_000, 50_000],
            &cpus,
        ),
        latency_row(
            Kind::UdpLoopback,
            1024,
            vec![31_000, 36_000, 33_000, 52_000],
            &cpus,
        ),
        memcpy_row(4096, 60.0, 70.0, 10, &cpus[..1]),
        memcpy_row(65536, 40.0, 45.0, 10, &cpus[..1]),
        memcpy_row(1 << 20, 12.0, 14.0, 10, &cpus[..1]),
    ];
    let setup = Setup {
        samples: config.samples,
        memcpy_seconds: config.memcpy_seconds,
        memcpy_sizes: memcpy_sizes(config.memcpy_max),
        one_way: String::new(),
        kinds: Vec::new(),
        pinned: true,
    };
    Results::new(crate::Machine::probe(), config, Measured { setup, rows })
}

#[cfg(test)]
mod tests;
