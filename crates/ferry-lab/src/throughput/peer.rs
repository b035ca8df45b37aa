//! The peer process: the subscriber (or, across a link, the publisher) of a row.

use super::options::{ferry_qos, DRAIN_LIMIT, MAX_DURATION_S, MIN_PERIOD_S, START_TIMEOUT};
use super::payload::{send_for, writer, STAMPED_MIN};
use super::wire::{Command, PeerReport};
use crate::error::{bail, Context, Result};
use crate::peer::PeerLink;
use crate::signal;
use crate::subject::Subject;
use ferry::{Delivery, WaitStrategy};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// What the main side asks of the peer: subscribe to `size`-byte messages over `transport`,
/// count them, and report.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerRequest {
    pub(super) transport: Subject,
    pub(super) size: usize,
    pub(super) delivery: Delivery,
    pub(super) wait: WaitStrategy,
    pub(super) cpu: Option<usize>,
    /// ferry's transports: the domain and topic.
    pub(super) ferry: Option<FerryTopic>,
    /// raw-udp4 from another machine: the main side's socket. The peer then binds every
    /// address and takes datagrams from this one only; without it, it binds 127.0.0.1 (or
    /// `bind`).
    pub(super) main: Option<SocketAddr>,
    /// Which side the peer runs (`--hosts 2` runs both in peers).
    #[serde(default)]
    pub(super) role: Role,
    /// raw-udp4 across a link: the address the peer's socket binds (its namespace's).
    #[serde(default)]
    pub(super) bind: Option<Ipv4Addr>,
    /// A raw-udp4 publisher: where it sends.
    #[serde(default)]
    pub(super) dest: Option<SocketAddr>,
    /// A publisher: how long it sends, in seconds.
    #[serde(default)]
    pub(super) duration_s: Option<f64>,
    /// `--period`: seconds between messages (the publisher's schedule; messages carry their send
    /// time, which the subscriber reads).
    #[serde(default)]
    pub(super) period_s: Option<f64>,
}

/// The side a peer runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Role {
    /// Subscribes and counts (every run).
    #[default]
    Subscribe,
    /// Publishes, when told to (`Go`), for `duration_s` (`--hosts 2`).
    Publish,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct FerryTopic {
    pub(super) domain: String,
    pub(super) topic: String,
    /// On two machines or namespaces: the other side's host (the publisher's for a subscriber,
    /// the subscriber's for a publisher peer), which the peer's discovery reaches.
    pub(super) main_host: Option<std::net::Ipv4Addr>,
}

impl PeerRequest {
    /// A ferry transport's domain and topic (the main side always sends them).
    pub(super) fn ferry_topic(&self) -> Result<&FerryTopic> {
        match &self.ferry {
            Some(t) => Ok(t),
            None => bail!("a ferry transport needs its domain and topic"),
        }
    }
}

/// Whether a receive came back empty-handed (a timeout or a signal) rather than failing.
pub(super) fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

/// A publisher peer (`--hosts 2`): waits for its subscriber (ferry), says it is ready, sends
/// back to back from `Go` for the request's duration, says how much, and on `Release` reads
/// its counters, closes and says so.
pub(super) fn run_publisher(args: &PeerRequest, link: &mut PeerLink) -> Result<()> {
    if link.for_agent() {
        bail!("a publisher peer runs in a network namespace of the lab's machine only");
    }
    let duration = match args.duration_s {
        Some(s) if s.is_finite() && s > 0.0 && s <= MAX_DURATION_S => Duration::from_secs_f64(s),
        _ => bail!("a publisher peer needs a duration from 0 to {MAX_DURATION_S} s"),
    };
    let size = args.size;
    let period = match args.period_s {
        None => None,
        Some(s) if s.is_finite() && (MIN_PERIOD_S..=MAX_DURATION_S).contains(&s) => {
            Some(Duration::from_secs_f64(s))
        }
        Some(s) => bail!("a publisher peer's period of {s} s is out of range"),
    };
    if period.is_some() && size < STAMPED_MIN {
        bail!("a periodic message has at least {STAMPED_MIN} bytes");
    }
    let write = writer(period);
    let go = |link: &mut PeerLink| match link.await_command(START_TIMEOUT * 2, "go")? {
        Command::Go => Ok(()),
        other => bail!("the main side sent {other:?} before go"),
    };
    // What `send_for` measured: messages sent, when the first left (ns), seconds of sending.
    let report_sent = |link: &mut PeerLink, (sent, start_ns, send_s): (u64, u64, f64)| {
        link.report(&PeerReport::Sent {
            sent,
            start_ns,
            send_ns: (send_s * 1e9) as u64,
        })
    };
    let release = |link: &mut PeerLink| match link
        .await_command(DRAIN_LIMIT + START_TIMEOUT * 2, "release")?
    {
        Command::Release => Ok(()),
        other => bail!("the main side sent {other:?} before release"),
    };
    match args.transport {
        Subject::Udp4 | Subject::Udp4Key => {
            let FerryTopic {
                domain,
                topic,
                main_host,
            } = args.ferry_topic()?;
            let qos = ferry_qos(args.transport, size, args.delivery, args.wait);
            let node = crate::lab_node_reaching(
                "lab-pub",
                domain,
                args.transport == Subject::Udp4Key,
                crate::discovery_reaching(*main_host),
            )?;
            let mut publisher = node.publisher(topic, &qos)?;
            link.await_subscriber(&publisher, START_TIMEOUT)?;
            link.report(&PeerReport::Ready { port: None })?;
            go(link)?;
            let sent = send_for(duration, size, period, |seq| {
                let mut loan = publisher.loan(size)?;
                write(loan.as_mut_slice(), seq);
                loan.send()?;
                Ok(())
            })?;
            report_sent(link, sent)?;
            release(link)?;
            // Its counters as it published them (retransmissions, its socket's drops).
            let me = std::process::id();
            let info = ferry::admin::topic(domain, topic)?
                .and_then(|t| t.publishers.into_iter().find(|p| p.pid == me));
            let closing = Instant::now();
            drop(publisher);
            link.report(&PeerReport::Closed {
                retransmitted: info.as_ref().map(|p| p.retransmitted),
                kernel_drops: info.as_ref().map(|p| p.kernel_drops),
                close_ns: Some(closing.elapsed().as_nanos() as u64),
                enobufs: 0,
            })
        }
        Subject::RawUdp4 => {
            let Some(dest) = args.dest else {
                bail!("a raw-udp4 publisher needs the subscriber's address");
            };
            let from = args.bind.unwrap_or(Ipv4Addr::UNSPECIFIED);
            let socket = UdpSocket::bind((from, 0))
                .context(format!("cannot bind a UDP socket on {from}"))?;
            link.report(&PeerReport::Ready { port: None })?;
            go(link)?;
            let mut buf = vec![0u8; size];
            let mut enobufs = 0u64;
            let sent = send_for(duration, size, period, |seq| {
                write(&mut buf, seq);
                send_datagram(&socket, &buf, dest, &mut enobufs)
            })?;
            report_sent(link, sent)?;
            release(link)?;
            link.report(&PeerReport::Closed {
                retransmitted: None,
                kernel_drops: None,
                close_ns: None,
                enobufs,
            })
        }
        Subject::Tcp => {
            let Some(dest) = args.dest else {
                bail!("the lab's TCP stream needs the subscriber's address");
            };
            let mut stream = TcpStream::connect_timeout(&dest, START_TIMEOUT)
                .context(format!("cannot connect over TCP to {dest}"))?;
            stream.set_nodelay(true)?;
            link.report(&PeerReport::Ready { port: None })?;
            go(link)?;
            let mut buf = vec![0u8; size];
            let sent = send_for(duration, size, period, |seq| {
                write(&mut buf, seq);
                stream.write_all(&buf).context("TCP send")
            })?;
            report_sent(link, sent)?;
            // Closing lets the rest go (the kernel delivers it): the subscriber reads to the end.
            let closing = Instant::now();
            stream
                .shutdown(std::net::Shutdown::Write)
                .context("TCP shutdown")?;
            release(link)?;
            link.report(&PeerReport::Closed {
                retransmitted: None,
                kernel_drops: None,
                close_ns: Some(closing.elapsed().as_nanos() as u64),
                enobufs: 0,
            })
        }
        t => bail!("{} has no publisher peer", t.name()),
    }
}

/// Sends one datagram, again while the device queue is full for a moment (ENOBUFS: it did not
/// leave), counting those.
pub(super) fn send_datagram(
    socket: &UdpSocket,
    buf: &[u8],
    dst: SocketAddr,
    enobufs: &mut u64,
) -> Result<()> {
    loop {
        match socket.send_to(buf, dst) {
            Ok(_) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => *enobufs += 1,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => signal::check()?,
            Err(e) => return Err(e).context("UDP send_to"),
        }
    }
}
