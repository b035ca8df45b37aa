//! The main side: every row measured against its baselines, on one host or across links.

use super::options::{
    ferry_qos, Config, Throughput, ThroughputSubject, DRAIN_LIMIT, NS_PREFIX, START_TIMEOUT,
};
use super::payload::{send_for, write_message};
use super::peer::{send_datagram, FerryTopic, PeerRequest, Role};
use super::results::{Measurement, Reference, Row};
use super::wire::{Command, Counts, PeerReport, Received};
use crate::baseline::{baselines_first, BASELINE_GAP};
use crate::error::{bail, note, Context, Result};
use crate::netns::{self, LinkRate, Pair};
use crate::peer::{Peer, Place};
use crate::signal;
use crate::subject::Subject;
use crate::units::format_size;
use crate::{tools, Pinning, TwoMachines};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The other machine of a `--remote` run, which must be reached over IPv4.
pub(super) fn resolve_remote(agent: &str) -> Result<TwoMachines> {
    let machines = TwoMachines::resolve(agent)?;
    if !machines.there.is_ipv4() {
        bail!("--remote {agent}: give an IPv4 address of the other machine (ferry's discovery and raw-udp4 run over IPv4)");
    }
    Ok(machines)
}

pub(super) struct Ctx<'a> {
    pub(super) args: &'a Config,
    pub(super) duration: Duration,
    pub(super) domain: String,
    pub(super) pinning: &'a Pinning,
    /// Installed third-party tools, by transport.
    pub(super) programs: BTreeMap<&'static str, PathBuf>,
    pub(super) remote: Option<TwoMachines>,
    pub(super) run_index: usize,
    /// `--hosts 2`: one pair of namespaces per link rate, in the order of `link_rates`.
    pub(super) pairs: Vec<Pair>,
}

impl Ctx<'_> {
    pub(super) fn place(&self) -> Place {
        Place::remote(self.remote.as_ref().map(|r| r.agent.as_str()))
    }

    pub(super) fn request(&self, transport: Subject, size: usize) -> PeerRequest {
        PeerRequest {
            transport,
            size,
            delivery: self.args.delivery,
            wait: self.args.wait,
            // A remote peer's CPUs are its machine's business.
            cpu: self.pinning.peer_cpu(),
            ferry: None,
            main: None,
            role: Role::Subscribe,
            bind: None,
            dest: None,
            duration_s: None,
            period_s: None,
        }
    }
}

/// The pairs of `--hosts 2`, with what this machine lacks for them said in terms of the
/// options.
pub(super) fn make_pairs(rates: &[LinkRate]) -> Result<Vec<Pair>> {
    netns::check_two_hosts(true, "run as root, or use --hosts 1")?;
    let spec = netns::Spec {
        prefix: NS_PREFIX,
        device: "ftput",
        net: 204,
        rate: None,
    };
    Pair::create_per_rate(&spec, rates)
}

pub(super) fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

pub(super) fn impair_spec(loss: Option<f64>) -> Option<String> {
    loss.filter(|&l| l > 0.0)
        .map(|l| format!("loss={l}%,seed=1"))
}

/// The order transports run in at each size: every baseline before the rows compared with it
/// (TCP, then the UDP floors and ferry's shared memory, then ferry's UDP and the other
/// systems), otherwise as given.
pub(super) fn run_order(transports: &[Subject]) -> Vec<Subject> {
    baselines_first(transports, |t| t.baselines().to_vec())
        .into_iter()
        .map(|i| transports[i])
        .collect()
}

/// Runs every round: on each link, each size in turn, and at each size every transport in
/// `run_order`, so that a row runs within seconds of its baselines. A row whose baseline's last
/// run at its size ended more than `BASELINE_GAP` before it is followed by another run of the
/// baseline (`Row::references`). Rows come back in the order of the arguments (transport, then
/// size, within each round and link).
pub(super) fn measure(ctx: &mut Ctx<'_>, rows: &mut Vec<Row>) -> Result<()> {
    let args = ctx.args;
    let first = Instant::now();
    // On one host, one pass per round with no link; on two, one per link.
    let links: Vec<Option<usize>> = if ctx.pairs.is_empty() {
        vec![None]
    } else {
        (0..ctx.pairs.len()).map(Some).collect()
    };
    let order = run_order(&args.transports);
    let start = rows.len();
    for round in 0..args.rounds {
        note!("round {}/{}", round + 1, args.rounds);
        for &link in &links {
            let rate = link.and_then(|i| ctx.pairs[i].rate);
            if let Some(rate) = rate {
                note!(" the {rate} link");
            }
            for &size in &args.sizes {
                // When each transport's last run at this size (its row's or a reference's) ended.
                let mut ended: BTreeMap<Subject, Instant> = BTreeMap::new();
                for &transport in &order {
                    let mut row = run_row(ctx, link, transport, size, round, "")?;
                    if row.skipped.is_some() {
                        rows.push(row);
                        continue;
                    }
                    let now = Instant::now();
                    row.ended_s = Some(now.duration_since(first).as_secs_f64());
                    ended.insert(transport, now);
                    for &b in transport.baselines() {
                        let Some(&e) = ended.get(&b) else {
                            continue; // not in this run, or skipped: nothing to compare with
                        };
                        if now.duration_since(e) <= BASELINE_GAP {
                            continue;
                        }
                        let beside = format!(" beside {}", transport.name());
                        let again = run_row(ctx, link, b, size, round, &beside)?;
                        let now = Instant::now();
                        ended.insert(b, now);
                        if let Some(gbps) = again.delivered_gbps {
                            row.references.insert(
                                b,
                                Reference {
                                    delivered_gbps: gbps,
                                    ended_s: now.duration_since(first).as_secs_f64(),
                                },
                            );
                        }
                    }
                    rows.push(row);
                }
            }
        }
    }
    // Back in the order of the arguments.
    let at = |list: &[Subject], t: Subject| list.iter().position(|&x| x == t);
    let link_at = |bps: Option<u64>| ctx.pairs.iter().position(|p| p.rate.map(|r| r.bps) == bps);
    rows[start..].sort_by_key(|r| {
        (
            r.round,
            link_at(r.link_rate_bps),
            at(&args.transports, r.transport),
            args.sizes.iter().position(|&s| s == r.size_bytes),
        )
    });
    Ok(())
}

/// One run of `transport` at `size` (or its skip), noted with its time.
pub(super) fn run_row(
    ctx: &mut Ctx<'_>,
    link: Option<usize>,
    transport: Subject,
    size: usize,
    round: usize,
    beside: &str,
) -> Result<Row> {
    let args = ctx.args;
    let rate = link.and_then(|i| ctx.pairs[i].rate);
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
        None => Some(measure_one(ctx, link, transport, size).context(format!(
            "{} {}{beside} (round {}{})",
            transport.name(),
            format_size(size),
            round + 1,
            rate.map(|r| format!(", the {r} link")).unwrap_or_default()
        ))?),
    };
    ctx.run_index += 1;
    let mut row = Row::new(args, transport, size, round, m, skipped);
    if let Some(rate) = rate {
        row.link_rate = Some(rate.name());
        row.link_rate_bps = Some(rate.bps);
        if args.period.is_some() && rate.bps > 0 {
            row.serialization_ms = Some(size as f64 * 8.0 / rate.bps as f64 * 1e3);
        }
    }
    note!(
        "  {:<9} {:>9}  {}  ({:.1} s){beside}",
        transport.name(),
        format_size(size),
        row.brief(),
        started.elapsed().as_secs_f64()
    );
    Ok(row)
}

pub(super) fn measure_one(
    ctx: &Ctx<'_>,
    link: Option<usize>,
    transport: Subject,
    size: usize,
) -> Result<Measurement> {
    let (main_cpu, peer_cpu) = match ctx.pinning {
        Pinning::Pinned { main_cpu, peer_cpu } => (Some(*main_cpu), Some(*peer_cpu)),
        Pinning::Remote { main_cpu } => (*main_cpu, None),
        Pinning::None { .. } => (None, None),
    };
    if let Some(pair) = link.map(|i| &ctx.pairs[i]) {
        return measure_link(ctx, pair, transport, size, (main_cpu, peer_cpu));
    }
    match transport {
        Subject::Shm | Subject::Udp4 | Subject::Udp4Key | Subject::Udp6 => {
            measure_ferry(ctx, transport, size)
        }
        Subject::RawUdp4 => measure_raw(ctx, size),
        Subject::Tcp => bail!("tcp runs across the link of --hosts 2 only"),
        Subject::Iceoryx2 | Subject::Zenoh | Subject::ZenohShm => {
            measure_peer(ctx, transport, size, main_cpu.zip(peer_cpu))
        }
        Subject::Iperf3 | Subject::Iperf3Tcp | Subject::Sockperf => {
            let program = &ctx.programs[transport.program().unwrap_or_default()];
            let len = transport.datagram_bytes(size).unwrap_or(size);
            let iperf3 =
                |mode| tools::iperf3_run(program, mode, ctx.duration, main_cpu, peer_cpu, None);
            let r = match transport {
                // Unlimited (`-b 0`), `len`-byte datagrams.
                Subject::Iperf3 => iperf3(tools::Iperf3Mode::Udp { len, bitrate: 0 })?,
                Subject::Iperf3Tcp => iperf3(tools::Iperf3Mode::Tcp {
                    len: size,
                    congestion: None,
                })?,
                _ => tools::sockperf(program, len, ctx.duration, main_cpu, peer_cpu)?,
            };
            Ok(tool_measurement(transport, size, r))
        }
        other => bail!("throughput does not measure {other}"),
    }
}

/// A third-party tool's counts as a measurement.
pub(super) fn tool_measurement(
    transport: Subject,
    size: usize,
    r: tools::ToolResult,
) -> Measurement {
    let mut note = r.note;
    match transport.datagram_bytes(size) {
        Some(len) if len != size => {
            note = format!("datagrams of {len} bytes (min(size, 1472)); {note}");
        }
        _ if transport == Subject::Iperf3Tcp && size > tools::IPERF3_MAX_LEN => {
            note = format!(
                "written {} at a time (iperf3's largest); {note}",
                format_size(tools::IPERF3_MAX_LEN)
            );
        }
        _ => {}
    }
    Measurement {
        messages_sent: r.datagrams_sent,
        messages_delivered: r.datagrams_delivered,
        bytes_delivered: r.bytes_delivered,
        seconds: r.seconds,
        delivered_bps: r.delivered_bps,
        lost: r.lost,
        retransmitted: r.retransmits,
        note: Some(note),
        ..Measurement::default()
    }
}

/// What passed the tbf on A's end (the sender's side) while `run` ran, with the measurement.
pub(super) fn counting_link(
    pair: &Pair,
    run: impl FnOnce() -> Result<Measurement>,
) -> Result<Measurement> {
    let before = pair.qdisc_counts(0);
    let mut m = run()?;
    let counted = before.and_then(|b| pair.qdisc_counts(0).and_then(|a| b.until(a)));
    match counted {
        Ok(c) => m.link = Some(c),
        Err(e) => m.add_note(format!("packets on the link unknown: {e}")),
    }
    Ok(m)
}

/// One run across the link of `pair`: the publisher (or iperf3's client) in namespace A, the
/// subscriber (or iperf3's server) in B.
pub(super) fn measure_link(
    ctx: &Ctx<'_>,
    pair: &Pair,
    transport: Subject,
    size: usize,
    (main_cpu, peer_cpu): (Option<usize>, Option<usize>),
) -> Result<Measurement> {
    match transport {
        Subject::Iperf3 | Subject::Iperf3Tcp => {
            let program = &ctx.programs["iperf3"];
            let mode = match transport {
                Subject::Iperf3 => tools::Iperf3Mode::Udp {
                    len: transport.datagram_bytes(size).unwrap_or(size),
                    bitrate: pair.rate.map_or(0, |r| r.bps),
                },
                _ => tools::Iperf3Mode::Tcp {
                    len: size,
                    congestion: None,
                },
            };
            counting_link(pair, || {
                let r =
                    tools::iperf3_run(program, mode, ctx.duration, main_cpu, peer_cpu, Some(pair))?;
                Ok(tool_measurement(transport, size, r))
            })
        }
        Subject::Udp4 | Subject::Udp4Key | Subject::RawUdp4 | Subject::Tcp => {
            measure_link_peers(ctx, pair, transport, size, main_cpu)
        }
        _ => bail!("{} cannot run across the link", transport.name()),
    }
}

/// Waits at most `timeout` for a report of a publisher peer that `pick` takes.
pub(super) fn await_publisher<T>(
    peer: &mut Peer,
    timeout: Duration,
    what: &str,
    pick: impl FnOnce(PeerReport) -> Option<T>,
) -> Result<T> {
    let report = peer.await_report(timeout, what)?;
    let said = format!("{report:?}");
    pick(report).ok_or_else(|| {
        crate::error::Error::msg(format!("the publisher peer sent {said} instead of {what}"))
    })
}

/// ferry or raw-udp4 across the link: a subscriber peer in B, a publisher peer in A. The
/// tbf's counters are read just before the publisher starts and after it has closed (a
/// reliable publisher lingers until its subscriber has everything).
pub(super) fn measure_link_peers(
    ctx: &Ctx<'_>,
    pair: &Pair,
    transport: Subject,
    size: usize,
    main_cpu: Option<usize>,
) -> Result<Measurement> {
    let topic = format!("tp{}", ctx.run_index);
    let ferry_topic = |other: Ipv4Addr| FerryTopic {
        domain: ctx.domain.clone(),
        topic: topic.clone(),
        main_host: Some(other),
    };
    let mut subscribe = ctx.request(transport, size);
    let mut publish = ctx.request(transport, size);
    publish.role = Role::Publish;
    publish.cpu = main_cpu;
    publish.duration_s = Some(ctx.args.duration);
    publish.period_s = ctx.args.period;
    subscribe.period_s = ctx.args.period;
    if transport.is_ferry_udp() {
        subscribe.ferry = Some(ferry_topic(pair.addr[0]));
        publish.ferry = Some(ferry_topic(pair.addr[1]));
    } else {
        subscribe.bind = Some(pair.addr[1]);
        publish.bind = Some(pair.addr[0]);
    }
    // Declared before the publisher, so that on an error the publisher is killed first.
    let mut subscriber = Peer::start::<Throughput>(&subscribe, &pair.place(1))?;
    let port = await_ready(&mut subscriber)?;
    if !transport.is_ferry_udp() {
        match port {
            Some(port) if port != 0 => publish.dest = Some(SocketAddr::from((pair.addr[1], port))),
            _ => bail!("the subscriber did not say which UDP port it receives on"),
        }
    }
    let mut publisher = Peer::start::<Throughput>(&publish, &pair.place(0))?;
    // The publisher waits up to START_TIMEOUT for its subscriber to match.
    await_publisher(
        &mut publisher,
        START_TIMEOUT * 2,
        "that its subscriber matched",
        |r| matches!(r, PeerReport::Ready { .. }).then_some(()),
    )?;
    let before = pair.qdisc_counts(0);
    publisher.send(&Command::Go)?;
    let (sent, start_ns, send_ns) = await_publisher(
        &mut publisher,
        ctx.duration + START_TIMEOUT,
        "what it sent",
        |r| match r {
            PeerReport::Sent {
                sent,
                start_ns,
                send_ns,
            } => Some((sent, start_ns, send_ns)),
            _ => None,
        },
    )?;
    let mut m = counted_by(
        &mut subscriber,
        (sent, start_ns, send_ns as f64 / 1e9),
        true,
    )?;
    publisher.send(&Command::Release)?;
    let (retransmitted, kernel_drops, close_ns, enobufs) = await_publisher(
        &mut publisher,
        DRAIN_LIMIT + START_TIMEOUT,
        "that it closed",
        |r| match r {
            PeerReport::Closed {
                retransmitted,
                kernel_drops,
                close_ns,
                enobufs,
            } => Some((retransmitted, kernel_drops, close_ns, enobufs)),
            _ => None,
        },
    )?;
    let counted = before.and_then(|b| pair.qdisc_counts(0).and_then(|a| b.until(a)));
    if transport.is_ferry_udp() {
        subscriber.send(&Command::Release)?;
    }
    publisher.finish(START_TIMEOUT)?;
    subscriber.finish(START_TIMEOUT)?;
    match counted {
        Ok(c) => m.link = Some(c),
        Err(e) => m.add_note(format!("packets on the link unknown: {e}")),
    }
    if transport.is_ferry_udp() {
        m.retransmitted = retransmitted;
        if retransmitted.is_none() {
            m.add_note(
                "repairs unknown: the publisher's counters were not found in ferry's registry"
                    .to_owned(),
            );
        }
        if let Some(k) = kernel_drops {
            m.kernel_drops = Some(m.kernel_drops.unwrap_or(0) + k);
        }
        m.close_seconds = close_ns.map(|n| n as f64 / 1e9);
        if let (Some(lost), Some(skipped)) = (m.ferry_lost, m.ferry_skipped) {
            m.add_note(format!(
                "ferry's subscriber counters: lost {lost}, skipped {skipped}"
            ));
        }
    }
    if enobufs > 0 {
        m.add_note(format!(
            "send_to failed with ENOBUFS {enobufs} times (retried)"
        ));
    }
    Ok(m)
}

/// Waits for the peer to say that it is ready; returns the port it said (raw-udp4).
pub(super) fn await_ready(peer: &mut Peer) -> Result<Option<u16>> {
    match peer.await_report(START_TIMEOUT, "that it is ready")? {
        PeerReport::Ready { port } => Ok(port),
        PeerReport::Counts(_) => bail!("the peer sent its counts before it said it was ready"),
        other => bail!("the peer sent {other:?} before it said it was ready"),
    }
}

/// Waits for the peer's counts (it has the drain limit to see the last messages come).
pub(super) fn await_counts(peer: &mut Peer) -> Result<Counts> {
    match peer.await_report(DRAIN_LIMIT + START_TIMEOUT, "its counts")? {
        PeerReport::Counts(c) => Ok(c),
        PeerReport::Ready { .. } => bail!("the peer said it was ready twice"),
        other => bail!("the peer sent {other:?} instead of its counts"),
    }
}

/// Tells the subscriber peer that the publisher is done, and measures with the counts it
/// answers. `sending`: as `send_for` returns it, the messages sent, the first one's time (ns) and
/// the seconds of sending; `same_clock`: see `read_report`.
pub(super) fn counted_by(
    peer: &mut Peer,
    (sent, start_ns, send_seconds): (u64, u64, f64),
    same_clock: bool,
) -> Result<Measurement> {
    peer.send(&Command::Done { sent })?;
    let mut m = Measurement {
        messages_sent: Some(sent),
        send_seconds: Some(send_seconds),
        ..Measurement::default()
    };
    let counts = await_counts(peer)?;
    read_report(&counts, &mut m, start_ns, same_clock);
    Ok(m)
}

/// The peer's counts. `same_clock`: the peer's times are on this machine's clock, so that the
/// interval can start at the publisher's first send (`start_ns`).
pub(super) fn read_report(c: &Counts, m: &mut Measurement, start_ns: u64, same_clock: bool) {
    let r = &c.received;
    m.messages_delivered = Some(r.delivered);
    m.bytes_delivered = Some(r.bytes);
    m.out_of_order = Some(r.out_of_order);
    m.checked_messages = Some(r.checked);
    m.kernel_drops = c.kernel_drops;
    m.ferry_lost = c.ferry_lost;
    m.ferry_skipped = c.ferry_skipped;
    m.latency = c.latency;
    let from = if same_clock { start_ns } else { r.first_ns };
    m.seconds = if r.delivered > 0 && r.last_ns > from {
        (r.last_ns - from) as f64 / 1e9
    } else {
        m.send_seconds.unwrap_or(0.0)
    };
    m.lost = m.messages_sent.map(|s| s.saturating_sub(r.delivered));
}

pub(super) fn measure_ferry(ctx: &Ctx<'_>, transport: Subject, size: usize) -> Result<Measurement> {
    let args = ctx.args;
    let topic = format!("tp{}", ctx.run_index);
    let qos = ferry_qos(transport, size, args.delivery, args.wait);
    // Across two machines, each side's discovery reaches the other's.
    let (here, there) = match &ctx.remote {
        Some(r) => match (r.here.to_canonical(), r.there.to_canonical()) {
            (IpAddr::V4(h), IpAddr::V4(t)) => (Some(h), Some(t)),
            _ => bail!("--remote {}: ferry's discovery runs over IPv4", r.agent),
        },
        None => (None, None),
    };
    let mut node = crate::lab_node_reaching(
        "lab-main",
        &ctx.domain,
        transport == Subject::Udp4Key,
        crate::discovery_reaching(there),
    )?;
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
    let mut request = ctx.request(transport, size);
    request.ferry = Some(FerryTopic {
        domain: ctx.domain.clone(),
        topic: topic.clone(),
        main_host: here,
    });
    peer = Peer::start::<Throughput>(&request, &ctx.place())?;
    await_ready(&mut peer)?;
    peer.wait_ready(START_TIMEOUT, || Ok(publisher.subscriber_count() >= 1))?;

    let sending = send_for(ctx.duration, size, None, |seq| {
        let mut loan = publisher.loan(size)?;
        write_message(loan.as_mut_slice(), seq);
        loan.send()?;
        Ok(())
    })?;
    let mut m = counted_by(&mut peer, sending, ctx.remote.is_none())?;
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
    peer.send(&Command::Release)?;
    peer.finish(START_TIMEOUT)?;
    if let (Some(lost), Some(skipped)) = (m.ferry_lost, m.ferry_skipped) {
        m.note = Some(format!(
            "ferry's subscriber counters: lost {lost}, skipped {skipped}"
        ));
    }
    Ok(m)
}

/// Another system: `ferry-peers` publishes and subscribes in two processes of its own, the
/// payload work as ferry's; the rate is taken over the same interval (same host, same clock).
pub(super) fn measure_peer(
    ctx: &Ctx<'_>,
    transport: Subject,
    size: usize,
    pin: Option<(usize, usize)>,
) -> Result<Measurement> {
    let system = transport.name();
    let bin = crate::peers::binary(&format!("{system}-throughput"))?;
    let out = crate::peers::throughput(
        &bin,
        system,
        size,
        ctx.duration,
        ctx.args.delivery.name(),
        pin,
    )?;
    let mut m = Measurement {
        messages_sent: Some(out.sent),
        send_seconds: Some(out.send_ns as f64 / 1e9),
        ..Measurement::default()
    };
    let counts = Counts {
        received: Received {
            delivered: out.delivered,
            bytes: out.bytes,
            first_ns: out.first_delivery_ns,
            last_ns: out.last_delivery_ns,
            out_of_order: out.out_of_order,
            checked: out.checked,
        },
        kernel_drops: None,
        ferry_lost: None,
        ferry_skipped: None,
        latency: None,
    };
    read_report(&counts, &mut m, out.first_send_ns, true);
    Ok(m)
}

pub(super) fn measure_raw(ctx: &Ctx<'_>, size: usize) -> Result<Measurement> {
    let mut request = ctx.request(Subject::RawUdp4, size);
    let socket = match &ctx.remote {
        None => UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot bind a UDP socket")?,
        Some(r) => {
            let socket = UdpSocket::bind((r.here, 0))
                .context(format!("cannot bind a UDP socket on {}", r.here))?;
            // The peer takes datagrams from this socket only.
            request.main = Some(socket.local_addr()?);
            socket
        }
    };
    let mut peer = Peer::start::<Throughput>(&request, &ctx.place())?;
    let port = match await_ready(&mut peer)? {
        Some(port) if port != 0 => port,
        _ => bail!("the peer did not say which UDP port it receives on"),
    };
    let dst = match &ctx.remote {
        None => SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        // Only the port comes from the peer: the datagrams go to the machine the user named.
        Some(r) => SocketAddr::new(r.there, port),
    };
    let mut buf = vec![0u8; size];
    let mut enobufs = 0u64;
    let sending = send_for(ctx.duration, size, None, |seq| {
        write_message(&mut buf, seq);
        send_datagram(&socket, &buf, dst, &mut enobufs)
    })?;
    let mut m = counted_by(&mut peer, sending, ctx.remote.is_none())?;
    peer.finish(START_TIMEOUT)?;
    if enobufs > 0 {
        m.note = Some(format!(
            "send_to failed with ENOBUFS {enobufs} times (retried)"
        ));
    }
    Ok(m)
}
