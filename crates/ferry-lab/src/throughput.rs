//! `ferry lab throughput`: how much a publisher gets through to a subscriber in another process
//! when it sends back to back, for ferry's transports and for the plain-UDP floor and third-party
//! tools measured in the same run, in interleaved rounds.
//!
//! The main process publishes: for `--duration` it writes messages of the given size as fast as
//! the transport takes them, each with its sequence number (u64, little endian) in bytes 0..8
//! and the sequence number's pattern byte in every other byte. The peer process
//! (`ferry lab-peer`, see [`crate::peer`]) subscribes: it checks the sequence number of every
//! message (and ferry's own, where there is one) and every byte of every 64th message, and
//! counts what it got. Over the peer's control channel the peer says when it is ready, the main
//! process says when it has finished and how much it sent, and the peer reports its counts.
//!
//! Within a round (and on each link) the sizes run in turn, and at each size every transport,
//! its baselines first, so that a row and the baselines it is compared with run within seconds
//! of each other. A row whose baseline's run ended more than 10 s before its own is followed by
//! another run of that baseline (`Row::references`); each ratio is taken against the baseline's
//! run nearest in time.
//!
//! The delivered rate is taken over the interval from the publisher's first send to the
//! subscriber's last delivery (both CLOCK_MONOTONIC on this host), so that a subscriber that
//! lags behind is not credited with the publisher's speed. With `--remote` the subscriber runs on
//! another machine (through `ferry lab agent`), whose clock is not this one's: the interval is
//! then the subscriber's own, from its first delivery to its last.
//!
//! `raw-udp4` is the naive plain-socket floor: a blocking `send_to` loop against a blocking
//! `recv` loop, one datagram per message (so at most 65507 bytes), default socket buffers.
//! `iperf3` and `sockperf` run at a datagram size of min(size, 1472), the size of ferry's UDP
//! frames at MTU 1500, so that their rows compare at the same frame size; `iperf3-tcp` is
//! iperf3 over TCP, written `size` bytes at a time.
//!
//! `--hosts 2 --link-rate R1,R2` runs across a real link instead: for each rate, two network
//! namespaces joined by a veth pair with a `tc tbf` of that rate on both ends
//! ([`crate::netns::Pair`]). The publisher runs in a peer process in namespace A, the
//! subscriber in one in namespace B (iperf3's client in A, its server in B); the main process
//! coordinates and, before and after every run, reads the counters of the tbf on A's end: the
//! packets the run put on the link, set against the fewest its delivered messages need.

use super::{tools, Pinning};
use crate::chart::{Section, SummaryLine};
use crate::error::{bail, note, Context, Result};
use crate::experiment::{head, Experiment, Measured, Results};
use crate::netns::LinkRate;
use crate::peer::PeerLink;
use crate::signal;
use crate::subject::Subject;
use ferry::Delivery;
use std::collections::BTreeMap;
use std::io::Read;
use std::net::{Ipv4Addr, TcpListener, UdpSocket};
use std::time::{Duration, Instant};

mod link;
mod options;
mod payload;
mod peer;
mod report;
mod results;
mod run;
mod wire;

use link::*;
pub use options::*;
use payload::*;
pub use peer::*;
use report::*;
pub use results::*;
use run::*;
use wire::*;

impl Experiment for Throughput {
    head!("throughput", "Throughput", across machines);

    fn validate(args: &Config) -> Result<()> {
        SUBJECTS.check("--transport", &args.transports)?;
        crate::experiment::check_sizes(
            &args.sizes,
            8..=MAX_SIZE,
            "8 bytes to 64M: the first 8 bytes carry the sequence number",
        )?;
        if let Some(loss) = args.loss {
            if !(0.0..100.0).contains(&loss) {
                bail!("--loss: invalid loss {loss}: expected a percentage from 0 to below 100");
            }
        }
        if args.rounds == 0 {
            bail!("--rounds must be at least 1");
        }
        if !(args.duration.is_finite() && args.duration > 0.0) {
            bail!("--duration must be greater than 0");
        }
        if args.duration > MAX_DURATION_S {
            bail!("--duration must be at most 600 s");
        }
        if !(1..=2).contains(&args.hosts) {
            bail!("--hosts must be 1 or 2");
        }
        if args.hosts == 2 {
            if args.link_rates.is_empty() {
                bail!("--hosts 2 needs --link-rate (e.g. 100mbit,1gbit): the packets on the link are counted by its tbf");
            }
            super::distinct_list("--link-rate", &args.link_rates, |r| r.name())?;
            if let Some(agent) = &args.remote {
                bail!("--hosts 2 runs both sides in network namespaces on this machine; --remote {agent} runs the subscriber on another machine: give one of them");
            }
            if args.loss.is_some() {
                bail!("--loss is not applied across the link of --hosts 2; leave it out");
            }
            for &t in &args.transports {
                if let Some(why) = t.link_refusal() {
                    bail!(
                    "--hosts 2: {} cannot run across the link ({why}); use udp4, udp4-key, raw-udp4, tcp, iperf3 or iperf3-tcp",
                    t.name()
                );
                }
            }
            if let Some(period) = args.period {
                if !(period.is_finite() && (MIN_PERIOD_S..=args.duration).contains(&period)) {
                    bail!(
                        "--period must be from 1 ms to --duration ({} s)",
                        args.duration
                    );
                }
                if let Some(&s) = args.sizes.iter().find(|&&s| s < STAMPED_MIN) {
                    bail!("--period: {s} bytes is too small (at least {STAMPED_MIN}: the first 16 bytes carry the sequence number and the send time)");
                }
                for &t in &args.transports {
                    if matches!(t, Subject::Iperf3 | Subject::Iperf3Tcp) {
                        bail!(
                        "--period: {} cannot send on a schedule; use udp4, udp4-key, raw-udp4 or tcp",
                        t.name()
                    );
                    }
                }
            }
        } else if !args.link_rates.is_empty() {
            bail!("--link-rate limits the link between two hosts: it needs --hosts 2");
        } else if args.period.is_some() {
            bail!(
                "--period sends periodic messages across the link of --hosts 2: it needs --hosts 2"
            );
        } else if args.transports.contains(&Subject::Tcp) {
            bail!("tcp (the lab's own TCP stream) runs across the link of --hosts 2 only; on one host, use iperf3-tcp");
        }
        if let Some(agent) = &args.remote {
            for &t in &args.transports {
                if let Some(why) = t.remote_refusal() {
                    bail!(
                    "--remote {agent}: {} cannot run with its subscriber on another machine ({why}); with --remote, use udp4, udp4-key or raw-udp4",
                    t.name()
                );
                }
            }
        }
        Ok(())
    }

    fn run(args: &Config) -> Result<Measured<Self>> {
        let pinning = Pinning::resolve_for(args.pin, args.remote.is_some())?;
        if let Some(main_cpu) = pinning.main_cpu() {
            super::pin_to(main_cpu)?;
        }
        let remote = args.remote.as_deref().map(resolve_remote).transpose()?;
        // Made before any process and dropped after all of them (also on an error and Ctrl-C).
        let pairs = if args.hosts == 2 {
            make_pairs(&args.link_rates)?
        } else {
            Vec::new()
        };
        let started = super::unix_time();
        let mut programs = BTreeMap::new();
        let mut tool_versions = BTreeMap::new();
        for t in &args.transports {
            if let Some(p) = t.program() {
                match tools::find(p) {
                Some(path) => {
                    tool_versions.insert(p.to_owned(), tools::version(&path));
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
            args,
            duration: Duration::from_secs_f64(args.duration),
            domain: format!("lab{}", std::process::id()),
            pinning: &pinning,
            programs,
            remote,
            run_index: 0,
            pairs,
        };
        note!(
        "ferry lab throughput: {} transports × {} sizes × {} rounds of {:.1} s, {} delivery{}; {}{}",
        args.transports.len(),
        args.sizes.len(),
        args.rounds,
        args.duration,
        args.delivery.name(),
        args.loss
            .map(|l| format!(", {l} % loss on ferry UDP"))
            .unwrap_or_default(),
        pinning.describe(),
        ctx.pairs
            .iter()
            .map(|p| format!(
                "; a {} link: namespaces {} (A, {}) and {} (B, {})",
                p.rate.map_or_else(|| "not limited".to_owned(), LinkRate::name),
                p.ns[0],
                p.addr[0],
                p.ns[1],
                p.addr[1]
            ))
            .collect::<String>()
    );
        let mut rows = Vec::new();
        let domain = ctx.domain.clone();
        crate::in_own_domain(&domain, || measure(&mut ctx, &mut rows))?;
        add_ratios(&mut rows);

        let setup = Setup {
        transports: args.transports.clone(),
        transport_descriptions: crate::subject::descriptions(&args.transports, ThroughputSubject::describe),
        sizes: args.sizes.clone(),
        delivery: args.delivery,
        loss_percent: args.loss.unwrap_or(0.0),
        impair: impair_spec(args.loss),
        impair_applies_to: "the publisher process of ferry's UDP transports (udp4, udp6); raw-udp4, iperf3 and sockperf run without injected loss".to_owned(),
        duration_s: args.duration,
        tool_duration_s: tools::whole_seconds(ctx.duration),
        rounds: args.rounds,
        wait: args.wait,
        pinning: pinning.clone(),
        udp_mtu: UDP_MTU,
        payload: "the publisher writes every message: its sequence number (u64 LE) in bytes 0..8 and a pattern byte in all others; the subscriber checks every sequence number (against ferry's own where there is one) and every byte of each message whose number is a multiple of 64".to_owned(),
        rate_interval: match &args.remote {
            None if args.hosts == 2 => "from the publisher's first send to the subscriber's last delivery (CLOCK_MONOTONIC: the two namespaces share this host's clock); iperf3 and iperf3-tcp: the receiver's test interval".to_owned(),
            None => "from the publisher's first send to the subscriber's last delivery (CLOCK_MONOTONIC, same host); iperf3 and sockperf: the tool's own test interval".to_owned(),
            Some(_) => "from the subscriber's first delivery to its last (the subscriber's CLOCK_MONOTONIC: the two machines' clocks are not compared)".to_owned(),
        },
        lost: "messages_sent − messages_delivered: messages the subscriber never got (gaps, skipped, dropped)".to_owned(),
        processes: match &args.remote {
            None if args.hosts == 2 => "the main process coordinates; a peer process (ferry lab-peer) publishes in namespace A on the main CPU, another subscribes in namespace B on the peer CPU, both started with ip netns exec; iperf3: client in A on the main CPU, server in B on the peer CPU".to_owned(),
            None => "main process publishes; a peer process (ferry lab-peer) subscribes; iperf3/sockperf: client on the main CPU, server on the peer CPU; iceoryx2 and Zenoh: ferry-peers publishes on the main CPU and its subscriber process runs on the peer CPU".to_owned(),
            Some(agent) => format!("main process publishes here; a peer process subscribes on the machine of the lab agent at {agent}"),
        },
        socket_buffers: SocketBuffers {
            rmem_default: read_number("/proc/sys/net/core/rmem_default"),
            rmem_max: read_number("/proc/sys/net/core/rmem_max"),
            wmem_default: read_number("/proc/sys/net/core/wmem_default"),
            wmem_max: read_number("/proc/sys/net/core/wmem_max"),
        },
        tools: tool_versions,
        link: (!ctx.pairs.is_empty()).then(|| link_setup(&ctx.pairs)),
        started_unix_s: started,
    };
        Ok(Measured { setup, rows })
    }

    fn run_peer(args: PeerRequest, link: &mut PeerLink) -> Result<()> {
        SUBJECTS.check("transport", &[args.transport])?;
        if link.for_agent() {
            if let Some(why) = args.transport.remote_refusal() {
                bail!(
                    "{} cannot serve another machine: {why}",
                    args.transport.name()
                );
            }
        }
        if let Some(cpu) = args.cpu {
            super::pin_to(cpu)?;
        }
        if !(8..=MAX_SIZE).contains(&args.size) {
            bail!("the peer request's size {} is out of range", args.size);
        }
        if args.role == Role::Publish {
            return run_publisher(&args, link);
        }
        if args.period_s.is_some() && args.size < STAMPED_MIN {
            bail!("a periodic message has at least {STAMPED_MIN} bytes");
        }
        let mut tally = if args.period_s.is_some() {
            Tally::stamped(args.size)
        } else {
            Tally::new(args.size)
        };
        // Plain UDP and latest delivery lose what they lose: a short silence ends the count. A
        // reliable subscriber may still be repairing: it gets longer.
        let reliable = args.delivery == Delivery::Reliable;
        match args.transport {
            Subject::Shm | Subject::Udp4 | Subject::Udp4Key | Subject::Udp6 => {
                let FerryTopic {
                    domain,
                    topic,
                    main_host,
                } = args.ferry_topic()?;
                let qos = ferry_qos(args.transport, args.size, args.delivery, args.wait);
                let keyed = args.transport == Subject::Udp4Key;
                let node = super::lab_node_reaching(
                    "lab-peer",
                    domain,
                    keyed,
                    super::discovery_reaching(*main_host),
                )?;
                let mut sub = node.subscriber(topic, &qos)?;
                link.report(&PeerReport::Ready { port: None })?;
                let mut ending = Ending::new(if reliable {
                    Duration::from_secs(2)
                } else {
                    Duration::from_millis(200)
                });
                ending.receive_all(link, &mut tally, |tally| {
                    match sub.recv_timeout(Duration::from_millis(10))? {
                        Some(sample) => {
                            tally.take(&sample, Some(sample.seq()))?;
                            Ok(true)
                        }
                        None => Ok(false),
                    }
                })?;
                let mut counts = tally.counts();
                // ferry's own counters, and the kernel's drops on our socket.
                let me = std::process::id();
                let info = ferry::admin::topic(domain, topic)?
                    .and_then(|t| t.subscribers.into_iter().find(|s| s.pid == me));
                if let Some(s) = info {
                    counts.ferry_lost = Some(s.lost);
                    counts.ferry_skipped = Some(s.skipped);
                    if args.transport != Subject::Shm {
                        counts.kernel_drops = s
                            .udp
                            .and_then(|a| super::rawudp::kernel_drops(a.port(), a.is_ipv6()));
                    }
                }
                link.report(&PeerReport::Counts(counts))?;
                // Keep answering until the publisher has gone (bounded).
                let deadline = Instant::now() + START_TIMEOUT;
                while Instant::now() < deadline {
                    let _ = sub.recv_timeout(Duration::from_millis(1))?;
                    match link.recv::<Command>(Duration::ZERO)? {
                        Some(Command::Release) => break,
                        Some(Command::Done { .. }) => {
                            bail!("the main side said twice that it had finished")
                        }
                        Some(Command::Go) => bail!("the main side told a subscriber to send"),
                        None => {}
                    }
                }
                Ok(())
            }
            Subject::RawUdp4 => {
                let socket = match args.main {
                    None => match args.bind {
                        None => super::rawudp::bind_loopback()?,
                        Some(ip) => UdpSocket::bind((ip, 0))
                            .context(format!("cannot bind a UDP socket on {ip}"))?,
                    },
                    Some(main) => {
                        let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
                            .context("cannot bind a UDP socket")?;
                        socket
                            .connect(main)
                            .context(format!("cannot connect the UDP socket to {main}"))?;
                        socket
                    }
                };
                let port = socket.local_addr()?.port();
                socket
                    .set_read_timeout(Some(Duration::from_millis(10)))
                    .context("cannot set a UDP receive timeout")?;
                link.report(&PeerReport::Ready { port: Some(port) })?;
                let mut buf = vec![0u8; args.size.min(super::rawudp::MAX_DATAGRAM_V4) + 1];
                let mut ending = Ending::new(Duration::from_millis(200));
                ending.receive_all(link, &mut tally, |tally| match socket.recv(&mut buf) {
                    Ok(n) => {
                        tally.take(&buf[..n], None)?;
                        Ok(true)
                    }
                    Err(e) if timed_out(&e) => Ok(false),
                    Err(e) => Err(e).context("UDP receive"),
                })?;
                let mut counts = tally.counts();
                counts.kernel_drops = super::rawudp::kernel_drops(port, false);
                link.report(&PeerReport::Counts(counts))
            }
            Subject::Tcp => {
                let Some(ip) = args.bind else {
                    bail!("the lab's TCP stream needs the address its subscriber listens on");
                };
                let listener =
                    TcpListener::bind((ip, 0)).context(format!("cannot listen for TCP on {ip}"))?;
                let port = listener.local_addr()?.port();
                link.report(&PeerReport::Ready { port: Some(port) })?;
                listener.set_nonblocking(true)?;
                let deadline = Instant::now() + START_TIMEOUT * 2;
                let mut stream = loop {
                    match listener.accept() {
                        Ok((stream, _)) => break stream,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) => return Err(e).context("TCP accept"),
                    }
                    signal::check()?;
                    link.check_main()?;
                    if Instant::now() >= deadline {
                        bail!(
                            "the TCP publisher did not connect within {:?}",
                            START_TIMEOUT * 2
                        );
                    }
                    std::thread::sleep(Duration::from_millis(2));
                };
                stream.set_nonblocking(false)?;
                stream
                    .set_read_timeout(Some(Duration::from_millis(10)))
                    .context("cannot set a TCP receive timeout")?;
                // Whole messages out of the byte stream: a read that times out keeps what it had.
                let mut buf = vec![0u8; args.size];
                let mut filled = 0;
                let mut ending = Ending::new(Duration::from_secs(2));
                let mut open = true;
                ending.receive_all(link, &mut tally, |tally| {
                    if !open {
                        std::thread::sleep(Duration::from_millis(10));
                        return Ok(false);
                    }
                    match stream.read(&mut buf[filled..]) {
                        Ok(0) => {
                            open = false;
                            Ok(false)
                        }
                        Ok(n) => {
                            filled += n;
                            if filled == buf.len() {
                                tally.take(&buf, None)?;
                                filled = 0;
                            }
                            Ok(true)
                        }
                        Err(e) if timed_out(&e) => Ok(false),
                        Err(e) => Err(e).context("TCP receive"),
                    }
                })?;
                link.report(&PeerReport::Counts(tally.counts()))
            }
            Subject::Iperf3
            | Subject::Iperf3Tcp
            | Subject::Sockperf
            | Subject::Iceoryx2
            | Subject::Zenoh
            | Subject::ZenohShm => {
                bail!("{} has no lab peer", args.transport.name())
            }
            other => bail!("throughput does not measure {other}"),
        }
    }

    fn table(results: &Results<Self>) -> String {
        if is_link_run(&results.rows) {
            render_link_table(&results.request, &results.config, &results.rows)
        } else {
            render_table(&results.request, &results.config.pinning, &results.rows)
        }
    }

    fn section(results: &Results<Self>) -> Result<Section> {
        if is_link_run(&results.rows) {
            link_section(&results.rows, results.config.link.as_ref())
        } else {
            section(&results.rows)
        }
    }

    fn summary(results: &Results<Self>) -> Vec<SummaryLine> {
        let mut lines = if is_link_run(&results.rows) {
            link_summary(&results.rows)
        } else {
            summary(&results.rows)
        };
        // A baseline that could not run says so, with what adds it.
        let missing: Vec<&str> = results
            .config
            .transports
            .iter()
            .filter_map(|t| t.program())
            .filter(|p| !results.config.tools.contains_key(*p))
            .collect();
        if !missing.is_empty() {
            lines.push(SummaryLine {
                what: format!("third-party baselines ({})", missing.join(", ")),
                ferry: "–".to_owned(),
                floor: None,
                best_peer: Some(format!(
                    "not measured: {} not installed on this machine; add them with `sudo {}`",
                    missing.join(" and "),
                    tools::INSTALL_HINT
                )),
                study: None,
            });
        }
        lines
    }
}
/// Results of a small made-up run, for the report's tests.
#[cfg(test)]
pub(crate) fn example() -> Results<Throughput> {
    let config = Config {
        transports: vec![Subject::Udp4, Subject::RawUdp4, Subject::Iperf3],
        sizes: vec![64, 1024],
        rounds: 2,
        duration: 1.0,
        ..Config::default()
    };
    let m = |delivered: u64, size: u64| Measurement {
        messages_sent: Some(delivered + 10),
        messages_delivered: Some(delivered),
        bytes_delivered: Some(delivered * size),
        seconds: 1.0,
        send_seconds: Some(1.0),
        lost: Some(10),
        ..Measurement::default()
    };
    let mut rows = Vec::new();
    for round in 0..config.rounds {
        for (t, factor) in [
            (Subject::Udp4, 4),
            (Subject::RawUdp4, 3),
            (Subject::Iperf3, 2),
        ] {
            for &size in &config.sizes {
                let delivered = 100_000 * factor + 1000 * round as u64;
                rows.push(Row::new(
                    &config,
                    t,
                    size,
                    round,
                    Some(m(delivered, size as u64)),
                    None,
                ));
            }
        }
    }
    add_ratios(&mut rows);
    let setup = Setup {
        transports: config.transports.clone(),
        transport_descriptions: BTreeMap::new(),
        sizes: config.sizes.clone(),
        delivery: config.delivery,
        loss_percent: 0.0,
        impair: None,
        impair_applies_to: String::new(),
        duration_s: config.duration,
        tool_duration_s: 1,
        rounds: config.rounds,
        wait: config.wait,
        pinning: Pinning::None {
            reason: "example".to_owned(),
        },
        udp_mtu: UDP_MTU,
        payload: String::new(),
        rate_interval: String::new(),
        lost: String::new(),
        processes: String::new(),
        socket_buffers: SocketBuffers {
            rmem_default: None,
            rmem_max: None,
            wmem_default: None,
            wmem_max: None,
        },
        tools: BTreeMap::from([("iperf3".to_owned(), Some("3.16".to_owned()))]),
        link: None,
        started_unix_s: 0,
    };
    Results::new(crate::Machine::probe(), config, Measured { setup, rows })
}

#[cfg(test)]
mod tests;
