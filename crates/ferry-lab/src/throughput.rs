//! `ferry lab throughput`: how much a publisher gets through to a subscriber in another process
//! when it sends back to back, for ferry's transports and for the plain-UDP floor and third-party
//! tools measured in the same run, in interleaved rounds.
//!
//! The main process publishes: for `--duration` it writes messages of the given size as fast as
//! the transport takes them, each with its sequence number (u64, little endian) in bytes 0..8
//! and the sequence number's pattern byte in every other byte. The peer process
//! (`ferry lab-peer throughput`) subscribes: it checks the sequence number of every message
//! (and ferry's own, where there is one) and every byte of every 64th message, and counts what it
//! got. The two processes share a small control block (shared memory) through which the main
//! process says when it has finished and how much it sent, and the peer reports its counts.
//!
//! The delivered rate is taken over the interval from the publisher's first send to the
//! subscriber's last delivery (both CLOCK_MONOTONIC on this host), so that a subscriber that
//! lags behind is not credited with the publisher's speed.
//!
//! `raw-udp4` is the naive plain-socket floor: a blocking `send_to` loop against a blocking
//! `recv` loop, one datagram per message (so at most 65507 bytes), default socket buffers.
//! `iperf3` and `sockperf` run at a datagram size of min(size, 1472), the size of ferry's UDP
//! frames at MTU 1500, so that their rows compare at the same frame size.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::os::{self, monotonic_ns, Mapping, ShmObject};
use clap::Args;
use ferry::{Delivery, IpVersion, Qos, WaitStrategy};
use serde::Serialize;

use super::{pattern, tools, Dir, Machine, Peer, Pin, Pinning, Results};
use crate::args::{DeliveryArg, WaitArg};
use crate::error::{bail, note, Context, Result};
use crate::signal;
use crate::table::{print_out, Table};
use crate::units::{format_size, parse_seconds, parse_size};

/// The transports this experiment knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Shm,
    Udp4,
    Udp4Key,
    Udp6,
    RawUdp4,
    Iperf3,
    Sockperf,
}

impl Transport {
    const ALL: [Transport; 7] = [
        Transport::Shm,
        Transport::Udp4,
        Transport::Udp4Key,
        Transport::Udp6,
        Transport::RawUdp4,
        Transport::Iperf3,
        Transport::Sockperf,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Transport::Shm => "shm",
            Transport::Udp4 => "udp4",
            Transport::Udp4Key => "udp4-key",
            Transport::Udp6 => "udp6",
            Transport::RawUdp4 => "raw-udp4",
            Transport::Iperf3 => "iperf3",
            Transport::Sockperf => "sockperf",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Transport::Shm => "ferry shared memory (loans, ring of 2 × size, at least 64 KiB)",
            Transport::Udp4 => "ferry UDP over IPv4 loopback, MTU 1500: 1472-byte datagrams, sent with GSO and received with GRO where the kernel has them",
            Transport::Udp4Key => "as udp4, with a domain key: every datagram authenticated and encrypted (AEGIS-128L, 36 bytes more per datagram), replays refused",
            Transport::Udp6 => "ferry UDP over IPv6 loopback, MTU 1500: 1452-byte datagrams, GSO/GRO where available",
            Transport::RawUdp4 => "plain blocking std::net::UdpSocket on 127.0.0.1: a send_to loop against a recv loop, one datagram per message (at most 65507 bytes), default socket buffers, no flow control or repair",
            Transport::Iperf3 => "iperf3 -s -1 / iperf3 -c 127.0.0.1 -u -b 0 -l min(size, 1472) -t S -J; the receiver's counts",
            Transport::Sockperf => "sockperf server / sockperf throughput -m min(size, 1472) -t S; sent by the client's count, delivered by the server's",
        }
    }

    fn is_ferry(self) -> bool {
        matches!(
            self,
            Transport::Shm | Transport::Udp4 | Transport::Udp4Key | Transport::Udp6
        )
    }

    fn is_ferry_udp(self) -> bool {
        matches!(self, Transport::Udp4 | Transport::Udp4Key | Transport::Udp6)
    }

    /// The third-party program behind a transport.
    fn program(self) -> Option<&'static str> {
        match self {
            Transport::Iperf3 => Some("iperf3"),
            Transport::Sockperf => Some("sockperf"),
            _ => None,
        }
    }

    /// UDP payload bytes of the largest datagram a `size`-byte message travels in, if UDP
    /// (ferry: its frame header and the payload, cut at the MTU).
    fn datagram_bytes(self, size: usize) -> Option<usize> {
        let ferry = |max: usize| Some((size + ferry::UDP_DATA_HEADER).min(max));
        match self {
            Transport::Shm => None,
            Transport::Udp4 => ferry(UDP_MTU - 28),
            Transport::Udp4Key => {
                let sealed = ferry::UDP_SEAL_OVERHEAD;
                Some((size + ferry::UDP_DATA_HEADER + sealed).min(UDP_MTU - 28))
            }
            Transport::Udp6 => ferry(UDP_MTU - 48),
            Transport::RawUdp4 => Some(size),
            Transport::Iperf3 | Transport::Sockperf => Some(size.min(UDP_MTU - 28)),
        }
    }

    /// Why this transport cannot run `size`, if it cannot.
    fn cannot_run(self, size: usize) -> Option<String> {
        match self {
            Transport::RawUdp4 if size > super::rawudp::MAX_DATAGRAM_V4 => Some(format!(
                "skipped: one UDP datagram holds at most {} bytes, and raw-udp4 sends one datagram per message",
                super::rawudp::MAX_DATAGRAM_V4
            )),
            Transport::Sockperf if size < SOCKPERF_MIN => Some(format!(
                "skipped: sockperf sends messages of at least {SOCKPERF_MIN} bytes"
            )),
            _ => None,
        }
    }

    /// The baselines a ferry UDP row is compared with (same size, same round).
    fn baselines(self) -> &'static [Transport] {
        if self.is_ferry_udp() {
            &[Transport::RawUdp4, Transport::Iperf3, Transport::Sockperf]
        } else {
            &[]
        }
    }
}

pub fn parse_transport(text: &str) -> Result<Transport, String> {
    let name = text.trim();
    Transport::ALL
        .iter()
        .copied()
        .find(|t| t.name() == name)
        .ok_or_else(|| {
            let valid: Vec<&str> = Transport::ALL.iter().map(|t| t.name()).collect();
            format!(
                "unknown transport {name:?}; valid transports: {}",
                valid.join(", ")
            )
        })
}

/// A loss rate in percent: `5`, `5%`, `0.5`.
fn parse_loss(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let number = t.strip_suffix('%').unwrap_or(t);
    match number.trim().parse::<f64>() {
        Ok(p) if (0.0..100.0).contains(&p) => Ok(p),
        _ => Err(format!(
            "invalid loss {text:?}: expected a percentage from 0 to below 100, e.g. 5 or 0.5%"
        )),
    }
}

/// The MTU of ferry's UDP transports.
const UDP_MTU: usize = 1500;
/// sockperf's smallest message (its header).
const SOCKPERF_MIN: usize = 14;
/// Every this many messages (by sequence number) the subscriber checks every byte.
const CHECK_EVERY: u64 = 64;
/// The largest message size accepted.
const MAX_SIZE: usize = 64 << 20;
/// How long the peer may take to start, and to exit at the end.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// After the publisher has finished: how long the subscriber waits for more, at most.
const DRAIN_LIMIT: Duration = Duration::from_secs(20);

#[derive(Debug, Args)]
pub struct ThroughputArgs {
    /// Transports, comma-separated, in the order each round runs them: shm, udp4, udp6 (ferry),
    /// raw-udp4 (plain sockets), iperf3, sockperf (when installed)
    #[arg(
        long = "transport",
        value_name = "LIST",
        value_delimiter = ',',
        value_parser = parse_transport,
        default_value = "shm,udp4,raw-udp4,iperf3,sockperf"
    )]
    pub transports: Vec<Transport>,

    /// Message sizes, comma-separated, with optional K or M suffixes (1K = 1024; at least 8
    /// bytes: the first 8 carry the sequence number)
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_size, default_value = "64,1K,64K")]
    pub sizes: Vec<usize>,

    /// Delivery of ferry's transports: reliable (nothing lost: back-pressure, retransmission) or
    /// latest (the publisher never waits)
    #[arg(long, value_enum, default_value = "reliable")]
    pub delivery: DeliveryArg,

    /// Loss injected by ferry on the publisher's datagrams (ferry's UDP transports only:
    /// FERRY_IMPAIR=loss=P%,seed=1), in percent
    #[arg(long, value_name = "PERCENT", value_parser = parse_loss)]
    pub loss: Option<f64>,

    /// How long the publisher sends, per transport, size and round (iperf3 and sockperf take
    /// whole seconds: rounded up)
    #[arg(long, value_name = "S", value_parser = parse_seconds, default_value = "2")]
    pub duration: Duration,

    /// Interleaved rounds: every round runs every transport in turn
    #[arg(long, value_name = "R", default_value_t = 3)]
    pub rounds: usize,

    /// How ferry's subscriber (and a reliable publisher) waits
    #[arg(long, value_enum, default_value = "adaptive")]
    pub wait: WaitArg,

    /// CPUs of the main process (publisher) and of the peer (subscriber), as A,B, or "none"
    /// [default: the first two CPUs this process may use]
    #[arg(long, value_name = "A,B|none", value_parser = super::parse_pin)]
    pub pin: Option<Pin>,

    /// Write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

fn delivery_name(d: DeliveryArg) -> &'static str {
    match d {
        DeliveryArg::Reliable => "reliable",
        DeliveryArg::Latest => "latest",
    }
}

fn wait_name(w: WaitArg) -> &'static str {
    match w {
        WaitArg::Spin => "spin",
        WaitArg::Block => "block",
        WaitArg::Adaptive => "adaptive",
    }
}

fn validate(args: &ThroughputArgs) -> Result<()> {
    super::distinct_list("--transport", &args.transports, |t| t.name().to_owned())?;
    if args.sizes.is_empty() {
        bail!("--sizes: give at least one size");
    }
    for (i, &s) in args.sizes.iter().enumerate() {
        if !(8..=MAX_SIZE).contains(&s) {
            bail!("--sizes: {s} bytes is out of range (8 bytes to 64M: the first 8 bytes carry the sequence number)");
        }
        if args.sizes[..i].contains(&s) {
            bail!("--sizes: {s} is listed twice");
        }
    }
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if args.duration > Duration::from_secs(600) {
        bail!("--duration must be at most 600 s");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The control block shared by the two processes

/// Words of the control block (each an AtomicU64).
mod word {
    /// The peer has attached (and, for raw-udp4, bound its socket).
    pub const READY: usize = 0;
    /// raw-udp4: the peer's port.
    pub const PORT: usize = 1;
    /// The publisher has finished; `SENT` holds the count.
    pub const DONE: usize = 2;
    pub const SENT: usize = 3;
    /// The peer has written its report.
    pub const PEER_DONE: usize = 4;
    /// The main process no longer needs the peer's subscriber: it may exit.
    pub const RELEASE: usize = 5;
    pub const DELIVERED: usize = 6;
    pub const BYTES: usize = 7;
    pub const FIRST_NS: usize = 8;
    pub const LAST_NS: usize = 9;
    pub const OUT_OF_ORDER: usize = 10;
    pub const CHECKED: usize = 11;
    /// Counts the peer could not read are `UNKNOWN`.
    pub const KERNEL_DROPS: usize = 12;
    pub const FERRY_LOST: usize = 13;
    pub const FERRY_SKIPPED: usize = 14;
    pub const COUNT: usize = 15;
}

const UNKNOWN: u64 = u64::MAX;

/// A page of shared memory holding `word::COUNT` atomic words. The creator unlinks its name once
/// the peer has attached (or when dropped).
struct Control {
    map: Mapping,
    name: Option<String>,
}

impl Control {
    fn size() -> usize {
        os::page_size().max(word::COUNT * 8)
    }

    fn create(name: &str) -> Result<Control> {
        let size = Control::size() as u64;
        let obj = match ShmObject::create(name, size, 0o600) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // Left by an earlier run with the same process id that was killed.
                let _ = os::shm_unlink(name);
                ShmObject::create(name, size, 0o600)
            }
            r => r,
        }
        .context(format!("cannot create shared memory {name}"))?;
        let map = Mapping::map(&obj, 0, Control::size())
            .context(format!("cannot map shared memory {name}"))?;
        Ok(Control {
            map,
            name: Some(name.to_owned()),
        })
    }

    fn open(name: &str) -> Result<Control> {
        let obj = ShmObject::open(name).context(format!("cannot open shared memory {name}"))?;
        if obj.size()? != Control::size() as u64 {
            bail!("shared memory {name} is not a lab control block");
        }
        let map = Mapping::map(&obj, 0, Control::size())
            .context(format!("cannot map shared memory {name}"))?;
        Ok(Control { map, name: None })
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < word::COUNT);
        // SAFETY: the mapping is page-aligned and holds at least COUNT * 8 bytes, so the pointer
        // is 8-byte aligned and in bounds; it lives as long as `self`; an AtomicU64 has the
        // layout of a u64 and is lock-free, so it may be shared between processes.
        unsafe { &*self.map.as_ptr().add(i * 8).cast::<AtomicU64>() }
    }

    /// Release: what was written before is visible to whoever sees this store.
    fn set(&self, i: usize, v: u64) {
        self.word(i).store(v, Ordering::Release);
    }

    /// Acquire: pairs with `set`.
    fn get(&self, i: usize) -> u64 {
        self.word(i).load(Ordering::Acquire)
    }

    fn unlink(&mut self) {
        if let Some(name) = self.name.take() {
            let _ = os::shm_unlink(&name);
        }
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        self.unlink();
    }
}

// ---------------------------------------------------------------------------------------------
// Payload

/// Writes message `seq`: its number in bytes 0..8, its pattern byte in the rest.
#[inline]
fn write_message(buf: &mut [u8], seq: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..].fill(pattern(seq, Dir::Ping));
}

/// What the subscriber counts.
#[derive(Debug, Default)]
struct Tally {
    size: usize,
    delivered: u64,
    bytes: u64,
    first_ns: u64,
    last_ns: u64,
    /// The highest sequence number delivered.
    last_seq: Option<u64>,
    /// Messages whose number was not above the last one's (duplicates or reordering).
    out_of_order: u64,
    /// Messages of which every byte was checked.
    checked: u64,
}

impl Tally {
    fn new(size: usize) -> Tally {
        Tally {
            size,
            ..Tally::default()
        }
    }

    /// Takes one message; an error if it is damaged (wrong length or content, or a sequence
    /// number that disagrees with the transport's).
    fn take(&mut self, payload: &[u8], transport_seq: Option<u64>) -> Result<()> {
        if payload.len() != self.size {
            bail!(
                "a message of {} bytes arrived, expected {}",
                payload.len(),
                self.size
            );
        }
        let mut num = [0u8; 8];
        num.copy_from_slice(&payload[..8]);
        let seq = u64::from_le_bytes(num);
        if let Some(t) = transport_seq {
            if t != seq {
                bail!("message {seq} arrived with ferry sequence number {t}");
            }
        }
        let now = monotonic_ns();
        if self.delivered == 0 {
            self.first_ns = now;
        }
        if self.last_seq.is_some_and(|l| seq <= l) {
            self.out_of_order += 1;
        } else {
            self.delivered += 1;
            self.bytes += payload.len() as u64;
            self.last_seq = Some(seq);
            self.last_ns = now;
        }
        if seq % CHECK_EVERY == 0 {
            let byte = pattern(seq, Dir::Ping);
            if !super::check(&payload[8..], byte) {
                let at = 8 + payload[8..].iter().position(|&b| b != byte).unwrap_or(0);
                bail!(
                    "message {seq} is corrupt: byte {at} is {:#04x}, expected {byte:#04x}",
                    payload[at]
                );
            }
            self.checked += 1;
        }
        Ok(())
    }

    fn report(&self, ctl: &Control) {
        ctl.set(word::DELIVERED, self.delivered);
        ctl.set(word::BYTES, self.bytes);
        ctl.set(word::FIRST_NS, self.first_ns);
        ctl.set(word::LAST_NS, self.last_ns);
        ctl.set(word::OUT_OF_ORDER, self.out_of_order);
        ctl.set(word::CHECKED, self.checked);
    }
}

/// When the subscriber stops: once the publisher said how much it sent and either the last
/// message arrived or nothing came for `idle` (or the drain limit passed).
struct Ending {
    done_at: Option<Instant>,
    last_progress: Instant,
    delivered_then: u64,
    idle: Duration,
}

impl Ending {
    fn new(idle: Duration) -> Ending {
        Ending {
            done_at: None,
            last_progress: Instant::now(),
            delivered_then: 0,
            idle,
        }
    }

    fn finished(&mut self, ctl: &Control, tally: &Tally) -> bool {
        if ctl.get(word::DONE) == 0 {
            return false;
        }
        let now = Instant::now();
        let done_at = *self.done_at.get_or_insert(now);
        let sent = ctl.get(word::SENT);
        if sent == 0 || tally.last_seq.is_some_and(|l| l + 1 >= sent) {
            return true;
        }
        if tally.delivered != self.delivered_then {
            self.delivered_then = tally.delivered;
            self.last_progress = now;
        }
        now.duration_since(self.last_progress.max(done_at)) >= self.idle
            || now.duration_since(done_at) >= DRAIN_LIMIT
    }
}

// ---------------------------------------------------------------------------------------------
// The experiment

/// What one measurement gave (counts a transport cannot give are `None`).
#[derive(Debug, Default)]
struct Measured {
    messages_sent: Option<u64>,
    messages_delivered: Option<u64>,
    bytes_delivered: Option<u64>,
    /// The interval the rates are taken over.
    seconds: f64,
    /// Seconds the publisher spent sending (ferry, raw-udp4).
    send_seconds: Option<f64>,
    /// Delivered payload bits per second when the tool reports it itself.
    delivered_bps: Option<f64>,
    lost: Option<u64>,
    retransmitted: Option<u64>,
    kernel_drops: Option<u64>,
    out_of_order: Option<u64>,
    checked_messages: Option<u64>,
    ferry_lost: Option<u64>,
    ferry_skipped: Option<u64>,
    /// Seconds dropping the ferry publisher took.
    close_seconds: Option<f64>,
    note: Option<String>,
}

struct Ctx<'a> {
    args: &'a ThroughputArgs,
    domain: String,
    pinning: &'a Pinning,
    /// Installed third-party tools, by transport.
    programs: BTreeMap<&'static str, PathBuf>,
    run_index: usize,
}

pub fn run(args: ThroughputArgs) -> Result<()> {
    validate(&args)?;
    let machine = Machine::probe();
    let pinning = Pinning::resolve(args.pin)?;
    if let Pinning::Pinned { main_cpu, .. } = pinning {
        super::pin_to(main_cpu)?;
    }
    let started = super::unix_time();
    let mut programs = BTreeMap::new();
    let mut tool_versions = BTreeMap::new();
    for t in &args.transports {
        if let Some(p) = t.program() {
            match tools::find(p) {
                Some(path) => {
                    tool_versions.insert(p, tools::version(&path));
                    programs.insert(p, path);
                }
                None => note!(
                    "ferry lab throughput: {p} is not installed, so its rows are skipped; install it with `{}`",
                    tools::INSTALL_HINT
                ),
            }
        }
    }
    let mut ctx = Ctx {
        args: &args,
        domain: format!("lab{}", std::process::id()),
        pinning: &pinning,
        programs,
        run_index: 0,
    };
    note!(
        "ferry lab throughput: {} transports × {} sizes × {} rounds of {:.1} s, {} delivery{}; {}",
        args.transports.len(),
        args.sizes.len(),
        args.rounds,
        args.duration.as_secs_f64(),
        delivery_name(args.delivery),
        args.loss
            .map(|l| format!(", {l} % loss on ferry UDP"))
            .unwrap_or_default(),
        pinning.describe()
    );
    let mut rows = Vec::new();
    let outcome = measure(&mut ctx, &mut rows);
    let _ = ferry::admin::clean(Some(&ctx.domain));
    outcome?;
    add_ratios(&mut rows);
    print_out(&render_table(&args, &pinning, &rows))?;

    if let Some(path) = &args.json {
        let config = Config {
            transports: args.transports.iter().map(|t| t.name()).collect(),
            transport_descriptions: args
                .transports
                .iter()
                .map(|t| (t.name(), t.describe()))
                .collect(),
            sizes: args.sizes.clone(),
            delivery: delivery_name(args.delivery),
            loss_percent: args.loss.unwrap_or(0.0),
            impair: impair_spec(args.loss),
            impair_applies_to: "the publisher process of ferry's UDP transports (udp4, udp6); raw-udp4, iperf3 and sockperf run without injected loss",
            duration_s: args.duration.as_secs_f64(),
            tool_duration_s: tools::whole_seconds(args.duration),
            rounds: args.rounds,
            wait: wait_name(args.wait),
            pinning: pinning.clone(),
            udp_mtu: UDP_MTU,
            payload: "the publisher writes every message: its sequence number (u64 LE) in bytes 0..8 and a pattern byte in all others; the subscriber checks every sequence number (against ferry's own where there is one) and every byte of each message whose number is a multiple of 64",
            rate_interval: "from the publisher's first send to the subscriber's last delivery (CLOCK_MONOTONIC, same host); iperf3 and sockperf: the tool's own test interval",
            lost: "messages_sent − messages_delivered: messages the subscriber never got (gaps, skipped, dropped)",
            processes: "main process publishes; a re-executed peer process (ferry lab-peer throughput) subscribes; iperf3/sockperf: client on the main CPU, server on the peer CPU",
            socket_buffers: SocketBuffers {
                rmem_default: read_number("/proc/sys/net/core/rmem_default"),
                rmem_max: read_number("/proc/sys/net/core/rmem_max"),
                wmem_default: read_number("/proc/sys/net/core/wmem_default"),
                wmem_max: read_number("/proc/sys/net/core/wmem_max"),
            },
            tools: tool_versions,
            started_unix_s: started,
        };
        Results::new("throughput", machine, config, rows).write_json(path)?;
        note!("wrote {}", path.display());
    }
    Ok(())
}

fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn impair_spec(loss: Option<f64>) -> Option<String> {
    loss.filter(|&l| l > 0.0)
        .map(|l| format!("loss={l}%,seed=1"))
}

fn measure(ctx: &mut Ctx<'_>, rows: &mut Vec<Row>) -> Result<()> {
    let args = ctx.args;
    for round in 0..args.rounds {
        note!("round {}/{}", round + 1, args.rounds);
        for &transport in &args.transports {
            for &size in &args.sizes {
                signal::check()?;
                let started = Instant::now();
                let skipped = transport.cannot_run(size).or_else(|| {
                    transport
                        .program()
                        .filter(|p| !ctx.programs.contains_key(p))
                        .map(|p| format!("skipped: {p} is not installed ({})", tools::INSTALL_HINT))
                });
                let m = match &skipped {
                    Some(_) => None,
                    None => Some(measure_one(ctx, transport, size).context(format!(
                        "{} {} (round {})",
                        transport.name(),
                        format_size(size),
                        round + 1
                    ))?),
                };
                ctx.run_index += 1;
                let row = Row::new(args, transport, size, round, m, skipped);
                note!(
                    "  {:<9} {:>9}  {}  ({:.1} s)",
                    transport.name(),
                    format_size(size),
                    row.brief(),
                    started.elapsed().as_secs_f64()
                );
                rows.push(row);
            }
        }
    }
    Ok(())
}

fn measure_one(ctx: &Ctx<'_>, transport: Transport, size: usize) -> Result<Measured> {
    let (main_cpu, peer_cpu) = match ctx.pinning {
        Pinning::Pinned { main_cpu, peer_cpu } => (Some(*main_cpu), Some(*peer_cpu)),
        Pinning::None { .. } => (None, None),
    };
    match transport {
        Transport::Shm | Transport::Udp4 | Transport::Udp4Key | Transport::Udp6 => {
            measure_ferry(ctx, transport, size)
        }
        Transport::RawUdp4 => measure_raw(ctx, size),
        Transport::Iperf3 | Transport::Sockperf => {
            let program = &ctx.programs[transport.program().unwrap_or_default()];
            let len = transport.datagram_bytes(size).unwrap_or(size);
            let r = match transport {
                Transport::Iperf3 => {
                    tools::iperf3(program, len, ctx.args.duration, main_cpu, peer_cpu)?
                }
                _ => tools::sockperf(program, len, ctx.args.duration, main_cpu, peer_cpu)?,
            };
            let mut note = r.note;
            if len != size {
                note = format!("datagrams of {len} bytes (min(size, 1472)); {note}");
            }
            Ok(Measured {
                messages_sent: r.datagrams_sent,
                messages_delivered: r.datagrams_delivered,
                bytes_delivered: r.bytes_delivered,
                seconds: r.seconds,
                delivered_bps: r.delivered_bps,
                lost: r.lost,
                note: Some(note),
                ..Measured::default()
            })
        }
    }
}

fn ferry_qos(transport: Transport, size: usize, delivery: DeliveryArg, wait: WaitArg) -> Qos {
    let qos = Qos::default()
        .delivery(Delivery::from(delivery))
        .wait(WaitStrategy::from(wait))
        .max_message_size(size);
    match transport {
        Transport::Udp4 | Transport::Udp4Key | Transport::Udp6 => qos
            .transport(ferry::Transport::Udp)
            .ip_version(if transport == Transport::Udp6 {
                IpVersion::V6
            } else {
                IpVersion::V4
            })
            .mtu(UDP_MTU),
        _ => qos.transport(ferry::Transport::Shm),
    }
}

/// The common start of a two-process measurement: the control block and the peer.
fn start_peer(
    ctx: &Ctx<'_>,
    transport: Transport,
    size: usize,
    extra: &[String],
) -> Result<(Control, Peer)> {
    let name = format!("ferry-lab-tp.{}.{}", std::process::id(), ctx.run_index);
    let ctl = Control::create(&name)?;
    let mut peer_args = vec![
        "throughput".to_owned(),
        "--transport".to_owned(),
        transport.name().to_owned(),
        "--size".to_owned(),
        size.to_string(),
        "--control".to_owned(),
        name,
        "--delivery".to_owned(),
        delivery_name(ctx.args.delivery).to_owned(),
        "--wait".to_owned(),
        wait_name(ctx.args.wait).to_owned(),
    ];
    if let Some(cpu) = ctx.pinning.peer_cpu() {
        peer_args.extend(["--cpu".to_owned(), cpu.to_string()]);
    }
    peer_args.extend(extra.iter().cloned());
    let peer = Peer::spawn(&peer_args)?;
    Ok((ctl, peer))
}

/// Waits for the peer's report, watching it and Ctrl-C.
fn await_report(ctl: &Control, peer: &mut Peer) -> Result<()> {
    peer.wait_ready(DRAIN_LIMIT + START_TIMEOUT, || {
        Ok(ctl.get(word::PEER_DONE) == 1)
    })
}

/// The peer's counts.
fn read_report(ctl: &Control, m: &mut Measured, start_ns: u64) {
    let known = |i| Some(ctl.get(i)).filter(|&v| v != UNKNOWN);
    let delivered = ctl.get(word::DELIVERED);
    m.messages_delivered = Some(delivered);
    m.bytes_delivered = Some(ctl.get(word::BYTES));
    m.out_of_order = Some(ctl.get(word::OUT_OF_ORDER));
    m.checked_messages = Some(ctl.get(word::CHECKED));
    m.kernel_drops = known(word::KERNEL_DROPS);
    m.ferry_lost = known(word::FERRY_LOST);
    m.ferry_skipped = known(word::FERRY_SKIPPED);
    let last = ctl.get(word::LAST_NS);
    m.seconds = if delivered > 0 && last > start_ns {
        (last - start_ns) as f64 / 1e9
    } else {
        m.send_seconds.unwrap_or(0.0)
    };
    m.lost = m.messages_sent.map(|s| s.saturating_sub(delivered));
}

/// Sends back to back until `duration` has passed; `send(seq)` sends message `seq`. Returns the
/// count and the first send's time (ns).
fn send_for(
    duration: Duration,
    size: usize,
    mut send: impl FnMut(u64) -> Result<()>,
) -> Result<(u64, u64, f64)> {
    // Reading the clock after every message would cost small messages a good share of their
    // time; every 16th is within a few microseconds.
    let every = if size >= 4096 { 1 } else { 16 };
    let start_ns = monotonic_ns();
    let start = Instant::now();
    let deadline = start + duration;
    let mut seq = 0u64;
    loop {
        send(seq)?;
        seq += 1;
        if seq % every == 0 {
            if Instant::now() >= deadline {
                break;
            }
            // A relaxed load, cheaper than the clock: with it, a run of large messages stops
            // within a message or so of Ctrl-C.
            signal::check()?;
        }
    }
    Ok((seq, start_ns, start.elapsed().as_secs_f64()))
}

fn measure_ferry(ctx: &Ctx<'_>, transport: Transport, size: usize) -> Result<Measured> {
    let args = ctx.args;
    let topic = format!("tp{}", ctx.run_index);
    let qos = ferry_qos(transport, size, args.delivery, args.wait);
    let mut node = super::lab_node("lab-main", &ctx.domain, transport == Transport::Udp4Key)?;
    // The loss is injected by the publisher's node alone (a setting of that node: the peer
    // process, a node of its own, subscribes unimpaired).
    if let Some(spec) = impair_spec(args.loss).filter(|_| transport.is_ferry_udp()) {
        let config = node.config().clone();
        let impairment = ferry::Impairment::parse(&spec)?;
        node = ferry::Node::with_config(node.name(), config.with_impairment(Some(impairment)))?;
    }
    // Declared before the publisher, so that on an error or Ctrl-C the publisher closes while the
    // peer still reads (a reliable UDP publisher lingers until its subscribers confirmed all it
    // sent, and waits the longest for one that was killed), and the peer is killed after.
    let mut peer: Peer;
    let mut publisher = node.publisher(&topic, &qos)?;
    let extra = [
        "--domain".to_owned(),
        ctx.domain.clone(),
        "--topic".to_owned(),
        topic.clone(),
    ];
    let mut ctl;
    (ctl, peer) = start_peer(ctx, transport, size, &extra)?;
    peer.wait_ready(START_TIMEOUT, || {
        Ok(ctl.get(word::READY) == 1 && publisher.subscriber_count() >= 1)
    })?;
    ctl.unlink();

    let (sent, start_ns, send_seconds) = send_for(args.duration, size, |seq| {
        let mut loan = publisher.loan(size)?;
        write_message(loan.as_mut_slice(), seq);
        loan.send()?;
        Ok(())
    })?;
    ctl.set(word::SENT, sent);
    ctl.set(word::DONE, 1);
    let mut m = Measured {
        messages_sent: Some(sent),
        send_seconds: Some(send_seconds),
        ..Measured::default()
    };
    await_report(&ctl, &mut peer)?;
    read_report(&ctl, &mut m, start_ns);
    // The publisher's counters (retransmissions, its socket's drops) as it published them.
    if transport.is_ferry_udp() {
        std::thread::sleep(Duration::from_millis(30));
        let me = std::process::id();
        if let Some(p) = ferry::admin::topic(&ctx.domain, &topic)?
            .and_then(|t| t.publishers.into_iter().find(|p| p.pid == me))
        {
            m.retransmitted = Some(p.retransmitted);
            m.kernel_drops = Some(m.kernel_drops.unwrap_or(0) + p.kernel_drops);
        }
    }
    // A reliable UDP publisher lingers when dropped until its subscribers have reported that
    // they have everything; the peer keeps its subscriber polling meanwhile. How long that
    // takes is recorded: it is time an application waits when it closes a publisher.
    let closing = Instant::now();
    drop(publisher);
    m.close_seconds = Some(closing.elapsed().as_secs_f64());
    ctl.set(word::RELEASE, 1);
    peer.finish(START_TIMEOUT)?;
    if let (Some(lost), Some(skipped)) = (m.ferry_lost, m.ferry_skipped) {
        m.note = Some(format!(
            "ferry's subscriber counters: lost {lost}, skipped {skipped}"
        ));
    }
    Ok(m)
}

fn measure_raw(ctx: &Ctx<'_>, size: usize) -> Result<Measured> {
    let (mut ctl, mut peer) = start_peer(ctx, Transport::RawUdp4, size, &[])?;
    peer.wait_ready(START_TIMEOUT, || Ok(ctl.get(word::READY) == 1))?;
    ctl.unlink();
    let port = u16::try_from(ctl.get(word::PORT)).context("the peer reported a bad port")?;
    let dst = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot bind a UDP socket")?;
    let mut buf = vec![0u8; size];
    let mut enobufs = 0u64;
    let (sent, start_ns, send_seconds) = send_for(ctx.args.duration, size, |seq| {
        write_message(&mut buf, seq);
        loop {
            match socket.send_to(&buf, dst) {
                Ok(_) => return Ok(()),
                // The device queue was full for a moment: the datagram did not leave; try again.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => enobufs += 1,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => signal::check()?,
                Err(e) => return Err(e).context("UDP send_to"),
            }
        }
    })?;
    ctl.set(word::SENT, sent);
    ctl.set(word::DONE, 1);
    let mut m = Measured {
        messages_sent: Some(sent),
        send_seconds: Some(send_seconds),
        ..Measured::default()
    };
    await_report(&ctl, &mut peer)?;
    read_report(&ctl, &mut m, start_ns);
    ctl.set(word::RELEASE, 1);
    peer.finish(START_TIMEOUT)?;
    if enobufs > 0 {
        m.note = Some(format!(
            "send_to failed with ENOBUFS {enobufs} times (retried)"
        ));
    }
    Ok(m)
}

// ---------------------------------------------------------------------------------------------
// The peer

#[derive(Debug, Args)]
pub struct PeerArgs {
    #[arg(long, value_parser = parse_transport)]
    transport: Transport,
    #[arg(long)]
    size: usize,
    #[arg(long)]
    control: String,
    #[arg(long, value_enum)]
    delivery: DeliveryArg,
    #[arg(long, value_enum)]
    wait: WaitArg,
    #[arg(long)]
    cpu: Option<usize>,
    #[arg(long)]
    domain: Option<String>,
    #[arg(long)]
    topic: Option<String>,
}

pub fn run_peer(args: PeerArgs) -> Result<()> {
    if let Some(cpu) = args.cpu {
        super::pin_to(cpu)?;
    }
    let mut parent_alive = super::parent_watch();
    let ctl = Control::open(&args.control)?;
    let mut tally = Tally::new(args.size);
    // Plain UDP and latest delivery lose what they lose: a short silence ends the count. A
    // reliable subscriber may still be repairing: it gets longer.
    let reliable = args.delivery == DeliveryArg::Reliable;
    match args.transport {
        Transport::Shm | Transport::Udp4 | Transport::Udp4Key | Transport::Udp6 => {
            let (Some(domain), Some(topic)) = (&args.domain, &args.topic) else {
                bail!("a ferry transport needs --domain and --topic");
            };
            let qos = ferry_qos(args.transport, args.size, args.delivery, args.wait);
            let keyed = args.transport == Transport::Udp4Key;
            let node = super::lab_node("lab-peer", domain, keyed)?;
            let mut sub = node.subscriber(topic, &qos)?;
            ctl.set(word::READY, 1);
            let mut ending = Ending::new(if reliable {
                Duration::from_secs(2)
            } else {
                Duration::from_millis(200)
            });
            let mut since_check = 0u32;
            loop {
                let got = match sub.recv_timeout(Duration::from_millis(10))? {
                    Some(sample) => {
                        tally.take(&sample, Some(sample.seq()))?;
                        true
                    }
                    None => false,
                };
                since_check += 1;
                if !got || since_check >= 256 {
                    since_check = 0;
                    if ending.finished(&ctl, &tally) {
                        break;
                    }
                    if !got {
                        parent_alive()?;
                    }
                }
            }
            tally.report(&ctl);
            // ferry's own counters, and the kernel's drops on our socket.
            let me = std::process::id();
            let info = ferry::admin::topic(domain, topic)?
                .and_then(|t| t.subscribers.into_iter().find(|s| s.pid == me));
            let (lost, skipped, drops) = match info {
                Some(s) => (
                    s.lost,
                    s.skipped,
                    s.udp
                        .and_then(|a| super::rawudp::kernel_drops(a.port(), a.is_ipv6())),
                ),
                None => (UNKNOWN, UNKNOWN, None),
            };
            ctl.set(word::FERRY_LOST, lost);
            ctl.set(word::FERRY_SKIPPED, skipped);
            ctl.set(
                word::KERNEL_DROPS,
                if args.transport == Transport::Shm {
                    UNKNOWN
                } else {
                    drops.unwrap_or(UNKNOWN)
                },
            );
            ctl.set(word::PEER_DONE, 1);
            // Keep answering until the publisher has gone (bounded).
            let deadline = Instant::now() + START_TIMEOUT;
            while ctl.get(word::RELEASE) == 0 && Instant::now() < deadline {
                let _ = sub.recv_timeout(Duration::from_millis(1))?;
                parent_alive()?;
            }
            Ok(())
        }
        Transport::RawUdp4 => {
            let socket = super::rawudp::bind_loopback()?;
            let port = socket.local_addr()?.port();
            socket
                .set_read_timeout(Some(Duration::from_millis(10)))
                .context("cannot set a UDP receive timeout")?;
            ctl.set(word::PORT, port as u64);
            ctl.set(word::READY, 1);
            let mut buf = vec![0u8; args.size.min(super::rawudp::MAX_DATAGRAM_V4) + 1];
            let mut ending = Ending::new(Duration::from_millis(200));
            let mut since_check = 0u32;
            loop {
                let got = match socket.recv(&mut buf) {
                    Ok(n) => {
                        tally.take(&buf[..n], None)?;
                        true
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock
                                | std::io::ErrorKind::TimedOut
                                | std::io::ErrorKind::Interrupted
                        ) =>
                    {
                        false
                    }
                    Err(e) => return Err(e).context("UDP receive"),
                };
                since_check += 1;
                if !got || since_check >= 256 {
                    since_check = 0;
                    if ending.finished(&ctl, &tally) {
                        break;
                    }
                    if !got {
                        parent_alive()?;
                    }
                }
            }
            tally.report(&ctl);
            ctl.set(
                word::KERNEL_DROPS,
                super::rawudp::kernel_drops(port, false).unwrap_or(UNKNOWN),
            );
            ctl.set(word::FERRY_LOST, UNKNOWN);
            ctl.set(word::FERRY_SKIPPED, UNKNOWN);
            ctl.set(word::PEER_DONE, 1);
            Ok(())
        }
        Transport::Iperf3 | Transport::Sockperf => {
            bail!("{} has no lab peer", args.transport.name())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Results

#[derive(Debug, Serialize)]
struct Config {
    transports: Vec<&'static str>,
    transport_descriptions: BTreeMap<&'static str, &'static str>,
    sizes: Vec<usize>,
    delivery: &'static str,
    loss_percent: f64,
    /// The impairment of the publisher's node, for ferry's UDP transports (as FERRY_IMPAIR
    /// would say it).
    impair: Option<String>,
    impair_applies_to: &'static str,
    duration_s: f64,
    /// iperf3 and sockperf run whole seconds.
    tool_duration_s: u64,
    rounds: usize,
    wait: &'static str,
    pinning: Pinning,
    udp_mtu: usize,
    payload: &'static str,
    rate_interval: &'static str,
    lost: &'static str,
    processes: &'static str,
    socket_buffers: SocketBuffers,
    /// Versions of the third-party tools found (null: found, version unknown).
    tools: BTreeMap<&'static str, Option<String>>,
    started_unix_s: u64,
}

#[derive(Debug, Serialize)]
struct SocketBuffers {
    rmem_default: Option<u64>,
    rmem_max: Option<u64>,
    wmem_default: Option<u64>,
    wmem_max: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct Row {
    transport: &'static str,
    size_bytes: usize,
    /// UDP payload bytes per datagram (null for shared memory).
    datagram_bytes: Option<usize>,
    /// ferry's delivery; "none" for plain UDP and the tools.
    delivery: &'static str,
    /// Loss injected on this row's datagrams.
    loss_percent: f64,
    round: usize,
    duration_s: Option<f64>,
    messages_sent: Option<u64>,
    messages_delivered: Option<u64>,
    messages_per_s: Option<f64>,
    /// Payload bits delivered per second, in Gbit/s.
    delivered_gbps: Option<f64>,
    /// messages_sent − messages_delivered.
    lost: Option<u64>,
    retransmitted: Option<u64>,
    kernel_drops: Option<u64>,
    /// Seconds the publisher spent sending.
    send_s: Option<f64>,
    out_of_order: Option<u64>,
    checked_messages: Option<u64>,
    /// Seconds dropping the ferry publisher took after the run (a reliable UDP publisher
    /// lingers until its subscribers have reported everything received).
    publisher_close_s: Option<f64>,
    /// delivered_gbps over each baseline's in the same round and at the same size.
    ratios: BTreeMap<&'static str, f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

impl Row {
    fn new(
        args: &ThroughputArgs,
        transport: Transport,
        size: usize,
        round: usize,
        m: Option<Measured>,
        skipped: Option<String>,
    ) -> Row {
        let ferry = transport.is_ferry();
        let mut row = Row {
            transport: transport.name(),
            size_bytes: size,
            datagram_bytes: transport.datagram_bytes(size),
            delivery: if ferry {
                delivery_name(args.delivery)
            } else {
                "none"
            },
            loss_percent: if transport.is_ferry_udp() {
                args.loss.unwrap_or(0.0)
            } else {
                0.0
            },
            round,
            duration_s: None,
            messages_sent: None,
            messages_delivered: None,
            messages_per_s: None,
            delivered_gbps: None,
            lost: None,
            retransmitted: None,
            kernel_drops: None,
            send_s: None,
            out_of_order: None,
            checked_messages: None,
            publisher_close_s: None,
            ratios: BTreeMap::new(),
            skipped,
            note: None,
        };
        let Some(m) = m else { return row };
        let secs = m.seconds;
        row.duration_s = Some(secs);
        row.messages_sent = m.messages_sent;
        row.messages_delivered = m.messages_delivered;
        if secs > 0.0 {
            row.messages_per_s = m.messages_delivered.map(|d| d as f64 / secs);
            row.delivered_gbps = m
                .delivered_bps
                .or_else(|| m.bytes_delivered.map(|b| b as f64 * 8.0 / secs))
                .map(|bps| bps / 1e9);
        }
        row.lost = m.lost;
        row.retransmitted = m.retransmitted;
        row.kernel_drops = m.kernel_drops;
        row.send_s = m.send_seconds;
        row.out_of_order = m.out_of_order;
        row.checked_messages = m.checked_messages;
        row.publisher_close_s = m.close_seconds;
        row.note = m.note;
        row
    }

    /// One line for the progress notes.
    fn brief(&self) -> String {
        if let Some(s) = &self.skipped {
            return s.clone();
        }
        format!(
            "{} Gbit/s, {} msg/s, delivered {}",
            fmt_opt(self.delivered_gbps, 2),
            fmt_rate(self.messages_per_s),
            delivered_share(self)
        )
    }
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

fn fmt_rate(v: Option<f64>) -> String {
    match v {
        None => "-".to_owned(),
        Some(v) if v >= 1e6 => format!("{:.2} M", v / 1e6),
        Some(v) if v >= 1e3 => format!("{:.1} k", v / 1e3),
        Some(v) => format!("{v:.0}"),
    }
}

fn delivered_share(row: &Row) -> String {
    match (row.messages_delivered, row.messages_sent) {
        (Some(d), Some(s)) if s > 0 => format!("{d}/{s} ({:.2} %)", d as f64 * 100.0 / s as f64),
        (Some(d), _) => d.to_string(),
        _ => "-".to_owned(),
    }
}

/// Ratios of each ferry UDP row to the baselines of the same size and round.
fn add_ratios(rows: &mut [Row]) {
    let gbps: BTreeMap<(&str, usize, usize), f64> = rows
        .iter()
        .filter_map(|r| {
            r.delivered_gbps
                .filter(|&g| g > 0.0)
                .map(|g| ((r.transport, r.size_bytes, r.round), g))
        })
        .collect();
    for row in rows.iter_mut() {
        let Some(t) = Transport::ALL.iter().find(|t| t.name() == row.transport) else {
            continue;
        };
        let Some(mine) = row.delivered_gbps else {
            continue;
        };
        for b in t.baselines() {
            if let Some(base) = gbps.get(&(b.name(), row.size_bytes, row.round)) {
                row.ratios.insert(b.name(), mine / base);
            }
        }
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

fn render_table(args: &ThroughputArgs, pinning: &Pinning, rows: &[Row]) -> String {
    let mut table = Table::new(&[
        "transport",
        ">size",
        ">datagram",
        ">Gbit/s",
        ">(range)",
        ">msg/s",
        ">delivered",
        ">lost",
        ">retransm.",
        ">kernel drops",
        "ratio (median of rounds)",
    ]);
    for &t in &args.transports {
        for &size in &args.sizes {
            let mine: Vec<&Row> = rows
                .iter()
                .filter(|r| r.transport == t.name() && r.size_bytes == size)
                .collect();
            let Some(first) = mine.first() else { continue };
            if let Some(s) = &first.skipped {
                table.row(vec![
                    t.name().to_owned(),
                    format_size(size),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    s.clone(),
                ]);
                continue;
            }
            let g: Vec<f64> = mine.iter().filter_map(|r| r.delivered_gbps).collect();
            let lo = g.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = g.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum = |f: fn(&Row) -> Option<u64>| -> String {
                let v: Vec<u64> = mine.iter().filter_map(|r| f(r)).collect();
                if v.is_empty() {
                    "-".to_owned()
                } else {
                    v.iter().sum::<u64>().to_string()
                }
            };
            let sent: u64 = mine.iter().filter_map(|r| r.messages_sent).sum();
            let delivered: Option<u64> = mine
                .iter()
                .map(|r| r.messages_delivered)
                .sum::<Option<u64>>();
            let share = match delivered {
                Some(d) if sent > 0 => format!("{:.2} %", d as f64 * 100.0 / sent as f64),
                _ => "-".to_owned(),
            };
            let ratios: Vec<String> = t
                .baselines()
                .iter()
                .filter_map(|b| {
                    median(
                        mine.iter()
                            .filter_map(|r| r.ratios.get(b.name()).copied())
                            .collect(),
                    )
                    .map(|r| format!("{r:.2} × {}", b.name()))
                })
                .collect();
            table.row(vec![
                t.name().to_owned(),
                format_size(size),
                first
                    .datagram_bytes
                    .map_or_else(|| "-".to_owned(), |d| d.to_string()),
                fmt_opt(median(g.clone()), 2),
                if g.len() > 1 {
                    format!("{lo:.2}–{hi:.2}")
                } else {
                    String::new()
                },
                fmt_rate(median(
                    mine.iter().filter_map(|r| r.messages_per_s).collect(),
                )),
                share,
                sum(|r| r.lost),
                sum(|r| r.retransmitted),
                sum(|r| r.kernel_drops),
                ratios.join(", "),
            ]);
        }
    }
    format!(
        "\nThroughput, {} delivery{}, {:.1} s per run, {} interleaved rounds (Gbit/s and msg/s: median of rounds; delivered, lost, retransmitted, kernel drops: all rounds); {}.\n\n{}",
        delivery_name(args.delivery),
        args.loss
            .map(|l| format!(", {l} % loss injected on ferry UDP"))
            .unwrap_or_default(),
        args.duration.as_secs_f64(),
        args.rounds,
        pinning.describe(),
        table.render()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transports_and_loss_parse() {
        for t in Transport::ALL {
            assert_eq!(parse_transport(t.name()), Ok(t));
        }
        assert!(parse_transport("tcp").unwrap_err().contains("iperf3"));
        assert_eq!(parse_loss("5"), Ok(5.0));
        assert_eq!(parse_loss("0.5%"), Ok(0.5));
        for bad in ["-1", "100", "x", ""] {
            assert!(parse_loss(bad).is_err(), "{bad:?}");
        }
        assert_eq!(impair_spec(Some(5.0)).as_deref(), Some("loss=5%,seed=1"));
        assert_eq!(impair_spec(Some(0.0)), None);
        let impairment = ferry::Impairment::parse("loss=5%,seed=1").unwrap();
        assert!(impairment.is_active());
    }

    #[test]
    fn frame_sizes() {
        assert_eq!(Transport::Udp4.datagram_bytes(65_536), Some(1472));
        assert_eq!(Transport::Udp6.datagram_bytes(65_536), Some(1452));
        assert_eq!(
            Transport::Udp4.datagram_bytes(64),
            Some(64 + ferry::UDP_DATA_HEADER)
        );
        assert_eq!(Transport::Iperf3.datagram_bytes(64), Some(64));
        assert_eq!(Transport::Iperf3.datagram_bytes(65_536), Some(1472));
        assert_eq!(Transport::Shm.datagram_bytes(64), None);
        assert!(Transport::RawUdp4.cannot_run(65_536).is_some());
        assert!(Transport::RawUdp4.cannot_run(65_507).is_none());
    }

    #[test]
    fn tally_counts_and_checks() {
        let mut t = Tally::new(100);
        let mut buf = vec![0u8; 100];
        for seq in [0, 1, 3, 2, 64] {
            write_message(&mut buf, seq);
            t.take(&buf, Some(seq)).unwrap();
        }
        assert_eq!(t.delivered, 4);
        assert_eq!(t.out_of_order, 1);
        assert_eq!(t.last_seq, Some(64));
        assert_eq!(t.checked, 2);
        write_message(&mut buf, 128);
        buf[99] ^= 1;
        assert!(t
            .take(&buf, None)
            .unwrap_err()
            .to_string()
            .contains("corrupt"));
        write_message(&mut buf, 5);
        assert!(t.take(&buf, Some(6)).is_err());
        assert!(t.take(&buf[..50], None).is_err());
    }

    #[test]
    fn ratios_pair_rounds() {
        let args = ThroughputArgs {
            transports: vec![Transport::Udp4, Transport::Iperf3],
            sizes: vec![1024],
            delivery: DeliveryArg::Latest,
            loss: None,
            duration: Duration::from_secs(1),
            rounds: 2,
            wait: WaitArg::Block,
            pin: None,
            json: None,
        };
        let m = |bytes: u64| Measured {
            messages_sent: Some(10),
            messages_delivered: Some(10),
            bytes_delivered: Some(bytes),
            seconds: 1.0,
            ..Measured::default()
        };
        let mut rows = vec![
            Row::new(
                &args,
                Transport::Udp4,
                1024,
                0,
                Some(m(1_000_000_000)),
                None,
            ),
            Row::new(
                &args,
                Transport::Iperf3,
                1024,
                0,
                Some(m(500_000_000)),
                None,
            ),
            Row::new(
                &args,
                Transport::Udp4,
                1024,
                1,
                Some(m(1_000_000_000)),
                None,
            ),
            Row::new(
                &args,
                Transport::Iperf3,
                1024,
                1,
                Some(m(250_000_000)),
                None,
            ),
        ];
        add_ratios(&mut rows);
        assert_eq!(rows[0].ratios["iperf3"], 2.0);
        assert_eq!(rows[2].ratios["iperf3"], 4.0);
        assert!(rows[1].ratios.is_empty());
        assert_eq!(rows[0].delivered_gbps, Some(8.0));
        let text = render_table(
            &args,
            &Pinning::None {
                reason: "test".into(),
            },
            &rows,
        );
        assert!(text.contains("3.00 × iperf3"), "{text}");
    }
}
