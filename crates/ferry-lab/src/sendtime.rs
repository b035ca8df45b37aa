//! `ferry lab send-time` (the send time of the cpp-shm-stream experiments): how long the publish
//! call alone takes, by transport and size. For ferry over shared memory that is loan + fill +
//! send; for ferry over UDP the same through its pooled buffer; for `raw-udp4` one `send_to` of a
//! filled buffer.
//!
//! A subscriber in another process (the experiment's peer, see [`crate::peer`]) drains every
//! message, checks it, and acknowledges it over a plain UDP socket; the main process sends the
//! next message only after the acknowledgement, so the ring (or the socket buffer) never fills
//! and a send never waits for room. Only the publish call is timed.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use ferry::{Delivery, Node, Qos, WaitStrategy};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{fill, pattern, verify, Dir, Pinning, Summary};
use crate::chart::{Glyph, Section, SizeBoxes, SummaryLine};
use crate::error::{bail, note, Context, Result};
use crate::experiment::{head, Experiment, Measured, Results};
use crate::peer::{Peer, PeerLink, Place};
use crate::signal;
use crate::studies::{cite, cite_first, SHM_STREAM};
use crate::subject::{Subject, Subjects};
use crate::table::Table;
use crate::units::{format_ns, format_size};

/// The largest UDP datagram over IPv4: `raw-udp4` sends one per message.
const MAX_DATAGRAM: usize = 65_507;
/// The largest message size accepted.
const MAX_SIZE: usize = 64 << 20;
const ACK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the peer may take to say hello, and to finish at the end.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// What this experiment measures, in the order its help lists them.
pub const SUBJECTS: Subjects = Subjects(&[Subject::Shm, Subject::Udp4, Subject::RawUdp4]);

/// Whether `subject` can carry a `size`-byte message (raw-udp4: one datagram).
fn carries(subject: Subject, size: usize) -> bool {
    subject != Subject::RawUdp4 || size <= MAX_DATAGRAM
}

/// What `ferry lab send-time` is asked to measure.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Transports, in the order they run.
    pub transports: Vec<Subject>,
    /// Message sizes in bytes.
    pub sizes: Vec<usize>,
    /// Timed sends per transport and size.
    pub samples: usize,
    /// Untimed sends before the timed ones, per transport and size.
    pub warmup: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            transports: SUBJECTS.0.to_vec(),
            sizes: vec![32, 1 << 10, 32 << 10, 1 << 20],
            samples: 10_000,
            warmup: 100,
        }
    }
}

/// How a send-time run was made.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    transports: Vec<Subject>,
    sizes: Vec<usize>,
    samples: usize,
    warmup: usize,
    timed: String,
    pacing: String,
    pinning: Pinning,
}

/// One transport at one size.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    pub transport: Subject,
    pub size_bytes: usize,
    /// Absent when the transport cannot carry this size (see `skipped`).
    #[serde(flatten)]
    pub summary: Option<Summary>,
    pub p25_ns: Option<u64>,
    pub p75_ns: Option<u64>,
    /// Why this row has no samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl Row {
    /// The row of `transport` at `size` from its send times (ns), or a skipped row without them.
    fn of(transport: Subject, size: usize, times: Option<&mut Vec<u64>>) -> Row {
        match times {
            Some(v) if !v.is_empty() => {
                let summary = Summary::of(v);
                let q = |f: f64| v[((v.len() as f64 * f) as usize).min(v.len() - 1)];
                Row {
                    transport,
                    size_bytes: size,
                    p25_ns: Some(q(0.25)),
                    p75_ns: Some(q(0.75)),
                    summary: Some(summary),
                    skipped: None,
                }
            }
            _ => Row {
                transport,
                size_bytes: size,
                summary: None,
                p25_ns: None,
                p75_ns: None,
                skipped: Some(format!(
                    "one UDP datagram holds at most {MAX_DATAGRAM} bytes"
                )),
            },
        }
    }
}

/// The experiment (see the module's documentation).
pub struct SendTime;

fn qos(transport: Subject, max_size: usize) -> Qos {
    // The publisher's send is timed: shared memory's subscriber spins, UDP's sleeps.
    let wait = match transport.is_ferry_udp() {
        true => WaitStrategy::Block,
        false => WaitStrategy::Spin,
    };
    transport
        .qos(wait)
        .unwrap_or_default()
        .delivery(Delivery::Reliable)
        .max_message_size(max_size)
}

/// Measures `transport` at each of `sizes` with its endpoints in ferry's domain `domain`.
fn measure(
    transport: Subject,
    index: usize,
    sizes: &[usize],
    max_size: usize,
    args: &Config,
    pinning: &Pinning,
    domain: &str,
) -> Result<Vec<Vec<u64>>> {
    let ack = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).context("bind the ack socket")?;
    ack.set_read_timeout(Some(Duration::from_millis(50)))?;
    let topic = format!("st{index}");
    let per_size = args.warmup + args.samples;
    let request = PeerRequest {
        transport,
        sizes: sizes.to_vec(),
        count: per_size,
        max_size,
        domain: domain.to_owned(),
        topic: topic.clone(),
        ack_port: ack.local_addr()?.port(),
        cpu: pinning.peer_cpu(),
    };
    let ferry_pub = if transport == Subject::RawUdp4 {
        None
    } else {
        let node = Node::with_domain("lab-send", domain)?;
        Some(node.publisher(&topic, &qos(transport, max_size))?)
    };
    let mut peer = Peer::start::<SendTime>(&request, &Place::local())?;
    // The peer says hello on the ack socket once its subscriber exists; for raw-udp4 the hello
    // comes from its data socket, whose address is then where data goes.
    let mut buf = [0u8; 64];
    let deadline = Instant::now() + START_TIMEOUT;
    let data_addr: SocketAddr = loop {
        match ack.recv_from(&mut buf) {
            Ok((_, from)) => break from,
            Err(_) if Instant::now() < deadline => {
                signal::check()?;
                peer.check_alive()?;
            }
            Err(e) => bail!("the peer did not say hello: {e}"),
        }
    };
    let mut publisher = ferry_pub;
    if let Some(p) = &publisher {
        peer.wait_ready(START_TIMEOUT, || Ok(p.subscriber_count() >= 1))?;
    }
    let raw = if publisher.is_none() {
        Some(UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).context("bind a UDP socket")?)
    } else {
        None
    };
    let mut scratch = vec![0u8; max_size.min(MAX_DATAGRAM)];
    let mut out = Vec::with_capacity(sizes.len());
    let mut seq = 0u64;
    for &size in sizes {
        let mut times = Vec::with_capacity(args.samples);
        for i in 0..per_size {
            signal::check()?;
            let byte = pattern(seq, Dir::Ping);
            let t0 = Instant::now();
            if let Some(p) = publisher.as_mut() {
                let mut loan = p.loan(size)?;
                fill(loan.as_mut_slice(), byte);
                loan.send()?;
            } else if let Some(s) = &raw {
                fill(&mut scratch[..size], byte);
                s.send_to(&scratch[..size], data_addr)?;
            }
            let elapsed = t0.elapsed().as_nanos() as u64;
            if i >= args.warmup {
                times.push(elapsed);
            }
            // Wait for the acknowledgement of this message.
            let deadline = Instant::now() + ACK_TIMEOUT;
            loop {
                match ack.recv(&mut buf) {
                    Ok(8) if u64::from_le_bytes(buf[..8].try_into().unwrap_or_default()) == seq => {
                        break
                    }
                    Ok(_) => {}
                    Err(_) => {
                        signal::check()?;
                        peer.check_alive()?;
                        if Instant::now() > deadline {
                            bail!("message {seq} ({size} bytes) was not acknowledged in time");
                        }
                    }
                }
            }
            seq += 1;
        }
        out.push(times);
    }
    drop(publisher);
    peer.finish(START_TIMEOUT)?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The peer

/// What the main side asks of the peer: receive and acknowledge `count` messages of each of
/// `sizes` bytes, in turn, over `transport`.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerRequest {
    transport: Subject,
    sizes: Vec<usize>,
    count: usize,
    max_size: usize,
    /// The ferry transports' domain and topic.
    domain: String,
    topic: String,
    /// The main process's acknowledgement socket, on 127.0.0.1.
    ack_port: u16,
    cpu: Option<usize>,
}

impl PeerRequest {
    /// Refuses a request that no main side of this experiment makes.
    fn check(&self) -> Result<()> {
        SUBJECTS.check("transport", &[self.transport])?;
        if self.max_size == 0 || self.max_size > MAX_SIZE {
            bail!("the peer request's largest size is out of range");
        }
        if self.sizes.is_empty() || self.sizes.iter().any(|&s| s == 0 || s > self.max_size) {
            bail!("the peer request's sizes are out of range");
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Results

impl Experiment for SendTime {
    head!("send-time", "Send time");

    fn validate(args: &Config) -> Result<()> {
        if args.transports.is_empty() || args.sizes.is_empty() || args.samples == 0 {
            bail!("give at least one transport, one size and one sample");
        }
        SUBJECTS.check("--transport", &args.transports)?;
        if args.sizes.iter().any(|&s| s == 0 || s > MAX_SIZE) {
            bail!("--sizes: 1 byte to 64M");
        }
        super::distinct_list("--sizes", &args.sizes, |s| s.to_string())?;
        crate::experiment::check_counts(args.samples, args.warmup)
    }

    fn run(args: &Config) -> Result<Measured<Self>> {
        let allowed = super::allowed_cpus();
        let pinning = Pinning::resolve(None)?;
        if let Pinning::Pinned { main_cpu, .. } = pinning {
            super::pin_to(main_cpu)?;
        }
        let max_size = args.sizes.iter().copied().max().unwrap_or(1);
        let mut rows = Vec::new();
        let domain = format!("labst{}", std::process::id());
        let outcome = (|| -> Result<()> {
            for (ti, &t) in args.transports.iter().enumerate() {
                note!("send-time: {}", t.name());
                let carried: Vec<usize> = args
                    .sizes
                    .iter()
                    .copied()
                    .filter(|&s| carries(t, s))
                    .collect();
                let mut per_size = if carried.is_empty() {
                    Vec::new()
                } else {
                    crate::in_own_domain(&domain, || {
                        measure(t, ti, &carried, max_size, args, &pinning, &domain)
                    })
                    .context(format!("send-time {}", t.name()))?
                };
                for &size in &args.sizes {
                    let times = carried
                        .iter()
                        .position(|&s| s == size)
                        .and_then(|i| per_size.get_mut(i));
                    rows.push(Row::of(t, size, times));
                }
            }
            Ok(())
        })();
        super::limits::restore_affinity(&allowed);
        outcome?;
        let setup = Setup {
        transports: args.transports.clone(),
        sizes: args.sizes.clone(),
        samples: args.samples,
        warmup: args.warmup,
        timed: "shm and udp4: Publisher::loan + filling every byte + Loan::send; raw-udp4: filling the buffer + UdpSocket::send_to".to_owned(),
        pacing: "the next message is sent only after the subscriber process acknowledged the last one (over a separate UDP socket), so the ring never fills".to_owned(),
        pinning,
    };
        Ok(Measured { setup, rows })
    }

    fn run_peer(args: PeerRequest, link: &mut PeerLink) -> Result<()> {
        args.check()?;
        if let Some(cpu) = args.cpu {
            super::pin_to(cpu)?;
        }
        let mut main_alive = link.watch();
        let ack_to = SocketAddr::from((Ipv4Addr::LOCALHOST, args.ack_port));
        let ack = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
        let mut seq = 0u64;
        if args.transport == Subject::RawUdp4 {
            let data = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
            data.set_read_timeout(Some(Duration::from_millis(50)))?;
            data.send_to(b"hello", ack_to)?;
            let mut buf = vec![0u8; args.max_size.min(MAX_DATAGRAM) + 1];
            for &size in &args.sizes {
                for _ in 0..args.count {
                    let n = loop {
                        match data.recv(&mut buf) {
                            Ok(n) => break n,
                            Err(_) => main_alive()?,
                        }
                    };
                    verify(&buf[..n], seq, None, size, Dir::Ping)?;
                    ack.send_to(&seq.to_le_bytes(), ack_to)?;
                    seq += 1;
                }
            }
            return Ok(());
        }
        let node = Node::with_domain("lab-send-peer", &args.domain)?;
        let mut sub = node.subscriber(&args.topic, &qos(args.transport, args.max_size))?;
        ack.send_to(b"hello", ack_to)?;
        for &size in &args.sizes {
            for _ in 0..args.count {
                loop {
                    if let Some(s) = sub.recv_timeout(Duration::from_millis(50))? {
                        verify(&s, seq, None, size, Dir::Ping)?;
                        break;
                    }
                    main_alive()?;
                }
                ack.send_to(&seq.to_le_bytes(), ack_to)?;
                seq += 1;
            }
        }
        // Keep polling until the publisher is gone (a reliable UDP publisher lingers until its
        // subscribers confirmed everything).
        let deadline = Instant::now() + Duration::from_secs(5);
        while sub.publisher_count() > 0 && Instant::now() < deadline {
            let _ = sub.recv_timeout(Duration::from_millis(1))?;
            main_alive()?;
        }
        Ok(())
    }

    fn table(results: &Results<Self>) -> String {
        let rows: &[Row] = &results.rows;
        let mut table = Table::new(&["transport", "size", "p50 send", "p99 send", "max"]);
        for r in rows {
            let cell = |f: fn(&Summary) -> u64| {
                r.summary
                    .as_ref()
                    .map_or("-".into(), |s| format_ns(f(s) as f64))
            };
            table.row(vec![
                r.transport.name().to_owned(),
                format_size(r.size_bytes),
                cell(|s| s.p50_ns),
                cell(|s| s.p99_ns),
                cell(|s| s.max_ns),
            ]);
        }
        table.render()
    }

    fn section(results: &Results<Self>) -> Result<Section> {
        let cells = results.rows.iter().map(|r| {
            let glyph = r
                .summary
                .as_ref()
                .map(|s| Glyph::of_quartiles(s, r.p25_ns, r.p75_ns));
            (r.transport.name(), r.size_bytes, glyph)
        });
        BOXES.section(cells, |phrase| {
            format!(
                "{} timed the send call of 10 000 messages per size and found the shared-memory streams' sends shorter than UDP's. Here, send-time p50 {phrase}.",
                cite_first(&SHM_STREAM)
            )
        })
    }

    /// One line per size: ferry's publish call over shared memory and over UDP, against the plain
    /// UDP `send_to` of the same run. The study plots its send times without giving figures: its
    /// finding is the comparison.
    fn summary(results: &Results<Self>) -> Vec<SummaryLine> {
        let setup: &Setup = &results.config;
        let rows: &[Row] = &results.rows;
        let p50 = |t: Subject, size: usize| {
            rows.iter()
                .find(|r| r.transport == t && r.size_bytes == size)
                .and_then(|r| r.summary.as_ref())
                .map(|s| format_ns(s.p50_ns as f64))
        };
        setup
        .sizes
        .iter()
        .filter_map(|&size| {
            let ferry: Vec<String> = [Subject::Shm, Subject::Udp4]
                .into_iter()
                .filter_map(|t| Some(format!("{} {}", t.name(), p50(t, size)?)))
                .collect();
            if ferry.is_empty() {
                return None;
            }
            Some(SummaryLine {
                what: format!("publish call p50, {}", format_size(size)),
                ferry: ferry.join(", "),
                floor: p50(Subject::RawUdp4, size).map(|v| format!("raw-udp4 send_to {v}")),
                best_peer: None,
                study: Some(format!(
                    "shared memory's sends shorter than UDP's at 32 B, 1 KB, 32 KB and 1 MB, in box plots without figures ({})",
                    cite(&SHM_STREAM)
                )),
            })
        })
        .collect()
    }
}

/// The section's plot.
const BOXES: SizeBoxes = SizeBoxes {
    file: "send-time.svg",
    title: "Send time by message size (log scale)",
    y_desc: "time of the publish call",
    caption: "Box: p25 to p75, black line p50; whiskers: min and p99; dot: p99.9. The publish call alone (loan + fill + send; raw-udp4: fill + send_to).",
};

/// Results of a small made-up run, for the report's tests.
#[cfg(test)]
pub(crate) fn example() -> Results<SendTime> {
    let config = Config {
        sizes: vec![32, 1 << 20],
        samples: 4,
        warmup: 0,
        ..Config::default()
    };
    let times = |base: u64| vec![base, base * 2, base + base / 2, base * 3];
    let rows = vec![
        Row::of(Subject::Shm, 32, Some(&mut times(200))),
        Row::of(Subject::Shm, 1 << 20, Some(&mut times(90_000))),
        Row::of(Subject::Udp4, 32, Some(&mut times(2_000))),
        Row::of(Subject::Udp4, 1 << 20, Some(&mut times(900_000))),
        Row::of(Subject::RawUdp4, 32, Some(&mut times(3_000))),
        Row::of(Subject::RawUdp4, 1 << 20, None),
    ];
    let setup = Setup {
        transports: config.transports.clone(),
        sizes: config.sizes.clone(),
        samples: config.samples,
        warmup: config.warmup,
        timed: String::new(),
        pacing: String::new(),
        pinning: Pinning::None {
            reason: "example".to_owned(),
        },
    };
    Results::new(crate::Machine::probe(), config, Measured { setup, rows })
}

#[cfg(test)]
mod tests;
