//! `ferry lab send-time` (the send time of the cpp-shm-stream experiments): how long the publish
//! call alone takes, by transport and size. For ferry over shared memory that is loan + fill +
//! send; for ferry over UDP the same through its pooled buffer; for `raw-udp4` one `send_to` of a
//! filled buffer.
//!
//! A subscriber in another process (`ferry lab-peer send-time`) drains every message, checks it,
//! and acknowledges it over a plain UDP socket; the main process sends the next message only
//! after the acknowledgement, so the ring (or the socket buffer) never fills and a send never
//! waits for room. Only the publish call is timed.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use ferry::{Delivery, Node, Qos, WaitStrategy};
use serde::Serialize;

use super::{fill, pattern, verify, Dir, Machine, Peer, Pinning, Results, Summary};
use crate::error::{bail, note, Context, Result};
use crate::signal;
use crate::table::{print_out, Table};
use crate::units::{format_ns, format_size, parse_size};

const TRANSPORTS: [&str; 3] = ["shm", "udp4", "raw-udp4"];
const MAX_DATAGRAM: usize = 65_507;
const ACK_TIMEOUT: Duration = Duration::from_secs(10);

fn parse_transport(s: &str) -> Result<String, String> {
    let s = s.trim();
    if TRANSPORTS.contains(&s) {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "unknown transport {s:?}; valid: {}",
            TRANSPORTS.join(", ")
        ))
    }
}

#[derive(Debug, Args)]
pub struct SendTimeArgs {
    /// Transports, comma-separated: shm (ferry shared memory), udp4 (ferry UDP), raw-udp4
    #[arg(long = "transport", value_name = "LIST", value_delimiter = ',', value_parser = parse_transport, default_value = "shm,udp4,raw-udp4")]
    pub transports: Vec<String>,

    /// Message sizes, comma-separated, with optional K or M suffixes
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_size, default_value = "32,1K,32K,1M")]
    pub sizes: Vec<usize>,

    /// Timed sends per transport and size
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub samples: usize,

    /// Untimed sends before the timed ones, per transport and size
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub warmup: usize,

    /// Write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
struct Row {
    transport: String,
    size_bytes: usize,
    #[serde(flatten)]
    summary: Option<Summary>,
    p25_ns: Option<u64>,
    p75_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<String>,
}

#[derive(Debug, Serialize)]
struct Config {
    transports: Vec<String>,
    sizes: Vec<usize>,
    samples: usize,
    warmup: usize,
    timed: &'static str,
    pacing: &'static str,
    pinning: Pinning,
}

fn qos(transport: &str, max_size: usize) -> Qos {
    let q = Qos::default()
        .delivery(Delivery::Reliable)
        .max_message_size(max_size);
    if transport == "udp4" {
        q.transport(ferry::Transport::Udp).wait(WaitStrategy::Block)
    } else {
        q.transport(ferry::Transport::Shm).wait(WaitStrategy::Spin)
    }
}

pub fn run(args: SendTimeArgs) -> Result<()> {
    if args.transports.is_empty() || args.sizes.is_empty() || args.samples == 0 {
        bail!("give at least one transport, one size and one sample");
    }
    if args.sizes.iter().any(|&s| s == 0 || s > 64 << 20) {
        bail!("--sizes: 1 byte to 64M");
    }
    let allowed = super::allowed_cpus();
    let pinning = Pinning::resolve(None)?;
    if let Pinning::Pinned { main_cpu, .. } = pinning {
        super::pin_to(main_cpu)?;
    }
    let max_size = args.sizes.iter().copied().max().unwrap_or(1);
    let mut rows = Vec::new();
    let outcome = (|| -> Result<()> {
        for (ti, t) in args.transports.iter().enumerate() {
            note!("send-time: {t}");
            let carried: Vec<usize> = args
                .sizes
                .iter()
                .copied()
                .filter(|&s| t != "raw-udp4" || s <= MAX_DATAGRAM)
                .collect();
            let mut per_size = if carried.is_empty() {
                Vec::new()
            } else {
                measure(t, ti, &carried, max_size, &args, &pinning)
                    .context(format!("send-time {t}"))?
            };
            for &size in &args.sizes {
                match carried.iter().position(|&s| s == size) {
                    Some(i) => {
                        let v = &mut per_size[i];
                        let summary = Summary::of(v);
                        let q = |f: f64| v[((v.len() as f64 * f) as usize).min(v.len() - 1)];
                        rows.push(Row {
                            transport: t.clone(),
                            size_bytes: size,
                            p25_ns: Some(q(0.25)),
                            p75_ns: Some(q(0.75)),
                            summary: Some(summary),
                            skipped: None,
                        });
                    }
                    None => rows.push(Row {
                        transport: t.clone(),
                        size_bytes: size,
                        summary: None,
                        p25_ns: None,
                        p75_ns: None,
                        skipped: Some(format!(
                            "one UDP datagram holds at most {MAX_DATAGRAM} bytes"
                        )),
                    }),
                }
            }
        }
        Ok(())
    })();
    super::limits::restore_affinity(&allowed);
    outcome?;

    let mut table = Table::new(&["transport", "size", "p50 send", "p99 send", "max"]);
    for r in &rows {
        let cell = |f: fn(&Summary) -> u64| {
            r.summary
                .as_ref()
                .map_or("-".into(), |s| format_ns(f(s) as f64))
        };
        table.row(vec![
            r.transport.clone(),
            format_size(r.size_bytes),
            cell(|s| s.p50_ns),
            cell(|s| s.p99_ns),
            cell(|s| s.max_ns),
        ]);
    }
    print_out(&table.render())?;
    if let Some(path) = &args.json {
        let config = Config {
            transports: args.transports.clone(),
            sizes: args.sizes.clone(),
            samples: args.samples,
            warmup: args.warmup,
            timed: "shm and udp4: Publisher::loan + filling every byte + Loan::send; raw-udp4: filling the buffer + UdpSocket::send_to",
            pacing: "the next message is sent only after the subscriber process acknowledged the last one (over a separate UDP socket), so the ring never fills",
            pinning: pinning.clone(),
        };
        Results::new("send-time", Machine::probe(), config, rows).write_json(path)?;
        note!("wrote {}", path.display());
    }
    Ok(())
}

fn measure(
    transport: &str,
    index: usize,
    sizes: &[usize],
    max_size: usize,
    args: &SendTimeArgs,
    pinning: &Pinning,
) -> Result<Vec<Vec<u64>>> {
    let domain = format!("labst{}", std::process::id());
    let outcome = measure_in(transport, index, sizes, max_size, args, pinning, &domain);
    // Whatever an interrupted or failed run left in its own domain (a killed peer's subscriber).
    let _ = ferry::admin::clean(Some(&domain));
    outcome
}

fn measure_in(
    transport: &str,
    index: usize,
    sizes: &[usize],
    max_size: usize,
    args: &SendTimeArgs,
    pinning: &Pinning,
    domain: &str,
) -> Result<Vec<Vec<u64>>> {
    let ack = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).context("bind the ack socket")?;
    ack.set_read_timeout(Some(Duration::from_millis(50)))?;
    let topic = format!("st{index}");
    let per_size = args.warmup + args.samples;
    let mut peer_args = vec![
        "send-time".to_owned(),
        "--transport".into(),
        transport.into(),
        "--sizes".into(),
        sizes
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(","),
        "--count".into(),
        per_size.to_string(),
        "--max-size".into(),
        max_size.to_string(),
        "--domain".into(),
        domain.to_owned(),
        "--topic".into(),
        topic.clone(),
        "--ack-port".into(),
        ack.local_addr()?.port().to_string(),
    ];
    if let Some(cpu) = pinning.peer_cpu() {
        peer_args.extend(["--cpu".into(), cpu.to_string()]);
    }
    let ferry_pub = if transport == "raw-udp4" {
        None
    } else {
        let node = Node::with_domain("lab-send", domain)?;
        Some(node.publisher(&topic, &qos(transport, max_size))?)
    };
    let mut peer = Peer::spawn(&peer_args)?;
    // The peer says hello on the ack socket once its subscriber exists; for raw-udp4 the hello
    // comes from its data socket, whose address is then where data goes.
    let mut buf = [0u8; 64];
    let deadline = Instant::now() + Duration::from_secs(10);
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
        peer.wait_ready(Duration::from_secs(10), || Ok(p.subscriber_count() >= 1))?;
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
    peer.finish(Duration::from_secs(10))?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The peer

#[derive(Debug, Args)]
pub struct PeerArgs {
    #[arg(long)]
    transport: String,
    #[arg(long, value_delimiter = ',', required = true)]
    sizes: Vec<usize>,
    #[arg(long)]
    count: usize,
    #[arg(long)]
    max_size: usize,
    #[arg(long)]
    domain: String,
    #[arg(long)]
    topic: String,
    #[arg(long)]
    ack_port: u16,
    #[arg(long)]
    cpu: Option<usize>,
}

pub fn run_peer(args: PeerArgs) -> Result<()> {
    if let Some(cpu) = args.cpu {
        super::pin_to(cpu)?;
    }
    let mut parent_alive = super::parent_watch();
    let ack_to = SocketAddr::from((Ipv4Addr::LOCALHOST, args.ack_port));
    let ack = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
    let mut seq = 0u64;
    if args.transport == "raw-udp4" {
        let data = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
        data.set_read_timeout(Some(Duration::from_millis(50)))?;
        data.send_to(b"hello", ack_to)?;
        let mut buf = vec![0u8; args.max_size.min(MAX_DATAGRAM) + 1];
        for &size in &args.sizes {
            for _ in 0..args.count {
                let n = loop {
                    match data.recv(&mut buf) {
                        Ok(n) => break n,
                        Err(_) => parent_alive()?,
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
    let mut sub = node.subscriber(&args.topic, &qos(&args.transport, args.max_size))?;
    ack.send_to(b"hello", ack_to)?;
    for &size in &args.sizes {
        for _ in 0..args.count {
            loop {
                if let Some(s) = sub.recv_timeout(Duration::from_millis(50))? {
                    verify(&s, seq, None, size, Dir::Ping)?;
                    break;
                }
                parent_alive()?;
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
        parent_alive()?;
    }
    Ok(())
}
