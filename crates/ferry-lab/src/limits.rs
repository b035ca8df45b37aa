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
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use super::{Machine, Results, Summary};
use crate::error::{bail, note, Context, Result};
use crate::table::{print_out, Table};
use crate::units::{format_ns, format_size};

#[derive(Debug, Args)]
pub struct LimitsArgs {
    /// Round trips per latency measurement (cache line, futex, UDP)
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub samples: usize,

    /// Seconds of copying per memcpy size
    #[arg(long, value_name = "S", default_value_t = 0.3)]
    pub memcpy_seconds: f64,

    /// Largest memcpy size, with an optional K or M suffix
    #[arg(long, value_name = "SIZE", value_parser = crate::units::parse_size, default_value = "64M")]
    pub memcpy_max: usize,

    /// Write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct Row {
    /// `cacheline`, `futex`, `udp-loopback` or `memcpy`.
    pub kind: &'static str,
    pub size_bytes: usize,
    /// Round trips measured (latency kinds) or copies timed (memcpy).
    pub samples: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_ns: Option<u64>,
    /// memcpy: gigabytes (10^9 bytes) copied per second, the median of the trials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gbytes_per_s: Option<f64>,
    /// memcpy: the best trial.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gbytes_per_s_max: Option<f64>,
    /// The CPUs of the two threads (latency kinds) or of the copying thread.
    pub cpus: Vec<usize>,
}

#[derive(Debug, Serialize)]
struct Config {
    samples: usize,
    memcpy_seconds: f64,
    memcpy_sizes: Vec<usize>,
    one_way: &'static str,
    kinds: [(&'static str, &'static str); 4],
    pinned: bool,
}

pub fn run(args: LimitsArgs) -> Result<()> {
    if args.samples == 0 {
        bail!("--samples must be at least 1");
    }
    if !(args.memcpy_seconds > 0.0 && args.memcpy_seconds <= 60.0) {
        bail!("--memcpy-seconds must be between 0 and 60");
    }
    if args.memcpy_max < 4096 {
        bail!("--memcpy-max must be at least 4K");
    }
    let allowed = super::allowed_cpus();
    // Two different CPUs when there are two; otherwise both threads share the one there is.
    let cpus: Option<(usize, usize)> = match allowed.as_slice() {
        [a, b, ..] => Some((*a, *b)),
        [a] => Some((*a, *a)),
        [] => None,
    };
    let cpu_list = cpus.map_or(Vec::new(), |(a, b)| vec![a, b]);
    let mut rows = Vec::new();

    note!(
        "ferry lab limits: cache line, futex and UDP round trips ({} each), memcpy 4K..{}",
        args.samples,
        format_size(args.memcpy_max)
    );
    let s = ping_pong(cpus, args.samples, Handoff::Spin)?;
    rows.push(latency_row("cacheline", 8, s, &cpu_list));
    let s = ping_pong(cpus, args.samples.min(20_000), Handoff::Futex)?;
    rows.push(latency_row("futex", 4, s, &cpu_list));
    for size in [32usize, 1024] {
        let s = udp_ping_pong(cpus, args.samples.min(20_000), size)?;
        rows.push(latency_row("udp-loopback", size, s, &cpu_list));
    }
    let mut sizes = Vec::new();
    let mut size = 4096;
    while size <= args.memcpy_max {
        sizes.push(size);
        size *= 4;
    }
    if let Some((a, _)) = cpus {
        let _ = crate::os::pin_current_thread(a);
    }
    for &size in &sizes {
        let (median, best, trials) = memcpy_bandwidth(size, args.memcpy_seconds);
        crate::signal::check()?;
        rows.push(Row {
            kind: "memcpy",
            size_bytes: size,
            samples: trials,
            p50_ns: None,
            p99_ns: None,
            min_ns: None,
            gbytes_per_s: Some(median),
            gbytes_per_s_max: Some(best),
            cpus: cpus.map_or(Vec::new(), |(a, _)| vec![a]),
        });
    }
    // Back to every allowed CPU (the suite runs more experiments in this process).
    restore_affinity(&allowed);

    let mut table = Table::new(&["kind", "size", "p50 one-way", "p99 one-way", "GB/s"]);
    for r in &rows {
        table.row(vec![
            r.kind.to_owned(),
            format_size(r.size_bytes),
            r.p50_ns.map_or("-".into(), |v| format_ns(v as f64)),
            r.p99_ns.map_or("-".into(), |v| format_ns(v as f64)),
            r.gbytes_per_s.map_or("-".into(), |v| format!("{v:.1}")),
        ]);
    }
    print_out(&table.render())?;

    if let Some(path) = &args.json {
        let config = Config {
            samples: args.samples,
            memcpy_seconds: args.memcpy_seconds,
            memcpy_sizes: sizes,
            one_way: "round trip / 2, timed with CLOCK_MONOTONIC around each round trip",
            kinds: [
                ("cacheline", "two threads on two CPUs ping-pong one AtomicU64 (spinning)"),
                ("futex", "two threads ping-pong an AtomicU32; the waiter sleeps in futex_wait, the writer calls futex_wake"),
                ("udp-loopback", "two threads, blocking std::net::UdpSockets on 127.0.0.1, one datagram each way"),
                ("memcpy", "copy_from_slice between two buffers of the size, repeated; GB = 10^9 bytes"),
            ],
            pinned: cpus.is_some(),
        };
        Results::new("limits", Machine::probe(), config, rows).write_json(path)?;
        note!("wrote {}", path.display());
    }
    Ok(())
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

fn latency_row(kind: &'static str, size: usize, mut s: Vec<u64>, cpus: &[usize]) -> Row {
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
