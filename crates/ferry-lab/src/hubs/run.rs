//! The main process: starts the hubs of each row, gives them the go, and collects their reports.

use super::options::{
    describe, role_name, Config, Hubs, Mode, PinMode, CLOSE_TIMEOUT, DISCOVERY_PORT, EXIT_TIMEOUT,
    LAP_TIMEOUT, LOOK_EVERY, NS_PREFIX, SEND_TIMEOUT, START_TIMEOUT, WATCHDOG,
};
use super::results::{
    CgroupSetup, CgroupVersion, PinningSetup, Placement, RemoteHosts, Row, Setup, Sides, Skipped,
    Tbf, Timeouts, TwoHosts,
};
use super::wire::{Command, Discovery, Host, HubReport, MasterResult, PeerRequest, Report};
use crate::cgroup::{self, CpuGroup};
use crate::error::{bail, Context, Error, Result};
use crate::netns::{self, LinkRate};
use crate::peer::{Peer, Place};
use crate::signal;
use crate::studies::{cite, DDS_HUBS};
use crate::subject::Subject;
use crate::units::format_ns;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Which side of the two hosts process `index` runs on: the master and the even hubs on A.
pub(super) fn side_of(index: usize) -> usize {
    index % 2
}

/// The other machine of `--remote`, and how each side names the other.
#[derive(Debug, Clone)]
pub(super) struct Remote {
    /// The agent, as given (`HOST[:PORT]`).
    pub(super) agent: String,
    /// This machine's address on the route to the agent (side A).
    pub(super) here: Ipv4Addr,
    /// The agent's address (side B).
    pub(super) there: Ipv4Addr,
}

impl Remote {
    pub(super) fn resolve(agent: &str) -> Result<Remote> {
        let address = crate::peer::with_default_port(agent);
        let target = address
            .to_socket_addrs()
            .context(format!("--remote {agent}"))?
            .find_map(|a| match a {
                std::net::SocketAddr::V4(v4) => Some(v4),
                std::net::SocketAddr::V6(_) => None,
            })
            .ok_or_else(|| {
                Error::msg(format!(
                    "--remote {agent}: the hubs find each other through ferry's discovery, which \
                     runs over IPv4; give the agent's IPv4 address (or a name that has one)"
                ))
            })?;
        let here = match crate::peer::local_address_towards(&target.to_string())? {
            std::net::IpAddr::V4(v4) => v4,
            std::net::IpAddr::V6(v6) => bail!(
                "--remote {agent}: this machine reaches it from the IPv6 address {v6}, and ferry's \
                 discovery runs over IPv4"
            ),
        };
        Ok(Remote {
            agent: agent.to_owned(),
            here,
            there: *target.ip(),
        })
    }
}

pub(super) struct Ctx<'a> {
    pub(super) config: &'a Config,
    /// Two namespaces here (`--hosts 2`).
    pub(super) pair: Option<&'a netns::Pair>,
    /// Two machines (`--hosts 2 --remote`).
    pub(super) remote: Option<&'a Remote>,
    pub(super) placement: Vec<Placement>,
}

impl Ctx<'_> {
    /// The addresses of sides A and B, on two hosts.
    pub(super) fn addresses(&self) -> Option<[Ipv4Addr; 2]> {
        match (self.pair, self.remote) {
            (Some(p), _) => Some(p.addr),
            (None, Some(r)) => Some([r.here, r.there]),
            (None, None) => None,
        }
    }

    /// What process `index` is told about discovery: on two hosts, the other side's address.
    pub(super) fn discovery_of(&self, index: usize) -> Option<Discovery> {
        let addr = self.addresses()?;
        Some(Discovery {
            port: DISCOVERY_PORT,
            peers: vec![SocketAddrV4::new(addr[1 - side_of(index)], DISCOVERY_PORT)],
        })
    }

    /// Where process `index` runs.
    pub(super) fn place_of(&self, index: usize) -> Place {
        match (self.pair, self.remote) {
            (Some(p), _) => p.place(side_of(index)),
            (None, Some(r)) if side_of(index) == 1 => Place::remote(Some(&r.agent)),
            _ => Place::local(),
        }
    }
}

/// Why transport `t` is not measured under `config`, if it is not.
pub(super) fn skip_reason(config: &Config, t: Subject) -> Option<String> {
    (config.hosts == 2 && t == Subject::Shm).then(|| {
        format!(
            "skipped: shared memory cannot join processes on two hosts ({}); use udp or auto",
            match config.remote {
                None => "the namespaces stand for two machines",
                Some(_) => "this machine and the lab agent's",
            }
        )
    })
}

pub(super) fn placement(args: &Config) -> Vec<Placement> {
    let allowed = crate::allowed_cpus();
    (0..args.hubs)
        .map(|i| {
            let host = match args.hosts {
                2 => [Host::A, Host::B][side_of(i)],
                _ => Host::Local,
            };
            // A remote process's CPUs are its machine's business.
            let here = args.remote.is_none() || host != Host::B;
            Placement {
                role: role_name(i),
                index: i,
                host,
                cpu: match args.pin {
                    PinMode::Spread if here && !allowed.is_empty() => {
                        Some(allowed[i % allowed.len()])
                    }
                    _ => None,
                },
            }
        })
        .collect()
}

pub(super) fn describe_placement(placement: &[Placement]) -> String {
    let allowed = crate::allowed_cpus();
    let mut by_cpu: BTreeMap<usize, Vec<&str>> = Default::default();
    for p in placement {
        if let Some(c) = p.cpu {
            by_cpu.entry(c).or_default().push(&p.role);
        }
    }
    let share = format!(
        "{} processes share {} CPU{} ({})",
        placement.len(),
        allowed.len(),
        if allowed.len() == 1 { "" } else { "s" },
        allowed
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    if by_cpu.is_empty() {
        return format!("{share}; not pinned (the scheduler places them)");
    }
    let per: Vec<String> = by_cpu
        .iter()
        .map(|(cpu, roles)| format!("CPU {cpu}: {}", roles.join(", ")))
        .collect();
    format!("{share}; pinned: {}", per.join("; "))
}

/// The two namespaces of `--hosts 2`, with what this machine lacks for them said in terms of
/// the options.
pub(super) fn make_pair(rate: Option<LinkRate>) -> Result<netns::Pair> {
    netns::check_two_hosts(
        rate.is_some(),
        "run as root, or use --hosts 1, or --remote with a lab agent on another machine",
    )?;
    netns::Pair::create(&netns::Spec {
        prefix: NS_PREFIX,
        device: "fhub",
        net: 203,
        rate,
    })
}

pub(super) fn summarize(row: &Row) -> String {
    let what = match (row.lap_p50_ns, row.completion_s) {
        (Some(p50), _) => format!(
            "lap p50 {} (p99 {}, {} hops)",
            format_ns(p50 as f64),
            format_ns(row.lap_p99_ns.unwrap_or(0) as f64),
            row.hubs
        ),
        (None, Some(c)) => format!(
            "completion {} ({:.0} messages/s)",
            format_ns(c * 1e9),
            row.messages_per_s.unwrap_or(0.0)
        ),
        _ => "no figures".to_owned(),
    };
    format!(
        "{:<5} {:<9} {what}, {} lost{}, {:.1} s",
        row.transport.name(),
        row.mode.name(),
        row.lost.unwrap_or(0),
        row.error
            .as_ref()
            .map_or(String::new(), |e| format!(" ({e})")),
        row.seconds.unwrap_or(0.0)
    )
}

pub(super) fn two_hosts_of(pair: &netns::Pair) -> TwoHosts {
    let sides = |v: &[String; 2]| Sides {
        a: v[0].clone(),
        b: v[1].clone(),
    };
    TwoHosts {
        namespaces: sides(&pair.ns),
        veth: sides(&pair.dev),
        subnet: pair.subnet.clone(),
        addresses: sides(&pair.addr.map(|a| a.to_string())),
        placement: "the master and the even hubs on A, the odd hubs on B (the study's 2 nodes: master and hub 2 on machine A, hubs 1 and 3 on machine B); the processes are started with ip netns exec".to_owned(),
        discovery: format!("static peer list: FERRY_PEERS names the other namespace's discovery address (its address, port {DISCOVERY_PORT}); in each namespace the first process relays what it hears to the others; multicast discovery is off"),
        link_rate: pair.rate.map(LinkRate::name),
        link_rate_bps: pair.rate.map(|l| l.bps),
        tbf: pair.rate.map(|l| Tbf {
            burst_bytes: l.burst_bytes(),
            latency_ms: netns::TBF_LATENCY_MS,
            on: "both veth ends (egress of each)".to_owned(),
            commands: pair.tc.clone(),
        }),
        note: "both namespaces run on this machine's CPUs: the link is a veth pair, not a wire".to_owned(),
    }
}

pub(super) fn remote_hosts_of(remote: &Remote) -> RemoteHosts {
    RemoteHosts {
        agent: remote.agent.clone(),
        addresses: Sides {
            a: remote.here.to_string(),
            b: remote.there.to_string(),
        },
        placement: format!("the master and the even hubs on this machine (A), the odd hubs on the machine of the lab agent at {} (B), started through it (the study's 2 nodes: master and hub 2 on machine A, hubs 1 and 3 on machine B)", remote.agent),
        discovery: format!("static peer list: FERRY_PEERS names the other machine's discovery address (port {DISCOVERY_PORT}): on A the agent's address, on B this machine's address on the route to the agent; on each machine the first process relays what it hears to the others; multicast discovery is off"),
    }
}

pub(super) fn make_setup(ctx: &Ctx<'_>, skipped: Vec<Skipped>, started: u64) -> Setup {
    let args = ctx.config;
    let n = args.hubs;
    let chain: Vec<String> = (0..=n).map(|i| role_name(i % n)).collect();
    let cgroup = match args.cpu {
        None => CgroupSetup {
            used: false,
            version: None,
            dir: None,
            period_us: None,
            quota_us: None,
            cpus: None,
            over: None,
            meaning: None,
        },
        Some(c) => CgroupSetup {
            used: true,
            version: cgroup::detect().map(|v| match v {
                cgroup::Version::V1 => CgroupVersion::V1,
                cgroup::Version::V2 => CgroupVersion::V2,
            }),
            dir: Some(match cgroup::detect() {
                Some(cgroup::Version::V1) => format!("/sys/fs/cgroup/cpu/ferry-lab-{}-hubs<run>", std::process::id()),
                _ => format!("/sys/fs/cgroup/ferry-lab-{}-hubs<run>", std::process::id()),
            }),
            period_us: Some(cgroup::PERIOD_US),
            quota_us: Some((c * cgroup::PERIOD_US as f64).round() as u64),
            cpus: Some(c),
            over: Some(format!("all {n} hub processes together (the master included); created for each run, removed after it")),
            meaning: Some("stands in for slower CPUs (the study scaled the CPU frequency)".to_owned()),
        },
    };
    Setup {
        modes: args.mode.clone(),
        hubs: n,
        processes: format!("{n} processes: the master and {} hubs", n - 1),
        messages: args.messages,
        size_bytes: args.size,
        size_note: "the study names no message size; the default 256 B is a small message".to_owned(),
        warmup: args.warmup,
        rounds: args.rounds,
        transports: args.transport.clone(),
        transport_descriptions: crate::subject::descriptions(&args.transport, describe),
        topology: format!(
            "ring: {}; one topic per edge, hubs/edge0 … hubs/edge{} (edge i: process i → process i+1)",
            chain.join(" → "),
            n - 1
        ),
        delivery: "reliable".to_owned(),
        wait: args.wait,
        wait_note: "the default is block, not ferry's default adaptive: with more processes than CPUs, a waiter that spins (adaptive spins 100 µs before it blocks) holds the CPU the next hub in the ring needs, and every such hand-over costs the spin (on 2 CPUs, 4 processes: shm laps about 7× longer with adaptive than with block)".to_owned(),
        roundtrip: "the master sends one message and waits until it has come back through every hub; a lap is the time from before the master writes the message until it has it back and has checked every byte; hubs copy each message into a loan of their outgoing topic and send it".to_owned(),
        flood: "the master's sender thread (on the master's CPU) pushes every message back to back (held back only by reliable back-pressure) while its main thread takes them back; every hub forwards each message as soon as it has it; completion is the time from the first send until the master has every message back; every message is checked (every byte, order, duplicates) and what never came back is counted as lost".to_owned(),
        probe: "before the warm-up the master sends probes around the ring (one every 100 ms) until one comes back, so every edge is connected".to_owned(),
        hosts: args.hosts,
        two_hosts: ctx.pair.map(two_hosts_of),
        remote: ctx.remote.map(remote_hosts_of),
        link_rate: args.link_rate.map(LinkRate::name),
        cpu: args.cpu,
        cgroup,
        placement: ctx.placement.clone(),
        pinning: PinningSetup {
            mode: args.pin,
            available_cpus: crate::allowed_cpus(),
            summary: describe_placement(&ctx.placement),
            note: "the processes outnumber the CPUs: they take turns on them, so a lap includes the scheduler's hand-overs; the rows say where each process ran (allowed_cpus, last_cpu) and how much CPU it used".to_owned(),
        },
        skipped,
        timeouts: Timeouts {
            start_s: START_TIMEOUT.as_secs(),
            lap_or_flood_progress_s: LAP_TIMEOUT.as_secs(),
            master_watchdog_s: WATCHDOG.as_secs(),
            exit_s: EXIT_TIMEOUT.as_secs(),
            close_s: CLOSE_TIMEOUT.as_secs(),
            send_s: SEND_TIMEOUT.as_secs(),
        },
        clock: "CLOCK_MONOTONIC (std::time::Instant) in the master".to_owned(),
        study: format!(
            "{}: Roundtrip and Flood demonstrators over 4 hubs (1 master, 3 others), floods of 1000 messages; 1 node vs 2 nodes (master and hub 2 on machine A, hubs 1 and 3 on machine B); effect of CPU speed",
            cite(&DDS_HUBS)
        ),
        started_unix_s: started,
    }
}

/// One run: a fresh ring of processes for one transport and mode.
pub(super) fn trial(
    ctx: &Ctx<'_>,
    transport: Subject,
    mode: Mode,
    round: usize,
    run_index: usize,
) -> Result<Row> {
    let domain = format!("hubs{}-{run_index}", std::process::id());
    crate::in_own_domain(&domain, || {
        trial_in(ctx, transport, mode, round, run_index, &domain)
    })
}

pub(super) fn trial_in(
    ctx: &Ctx<'_>,
    transport: Subject,
    mode: Mode,
    round: usize,
    run_index: usize,
    domain: &str,
) -> Result<Row> {
    let started = Instant::now();
    // Declared before the ring, so that it is removed after the processes were reaped.
    let group = ctx
        .config
        .cpu
        .map(|c| CpuGroup::create(c, &format!("hubs{run_index}")))
        .transpose()?;
    let mut ring = Ring::start(ctx, transport, mode, domain)?;
    if let Some(g) = &group {
        for m in &ring.members {
            let Some(pid) = m.peer.pid() else {
                bail!(
                    "{} runs on another machine: it cannot join this machine's cgroup",
                    m.role
                );
            };
            g.add(pid)
                .context(format!("cannot move {} into the cgroup", m.role))?;
            if !g.contains(pid) {
                bail!(
                    "{} (pid {pid}) is not in {} after the move",
                    m.role,
                    g.path().display()
                );
            }
        }
    }
    for m in &mut ring.members {
        m.peer
            .send(&Command::Go)
            .context(format!("cannot tell {} to go", m.role))?;
    }
    // Every process attached, and its publisher knows its subscriber.
    let until = Instant::now() + START_TIMEOUT + Duration::from_secs(5);
    let mut ready = vec![false; ring.members.len()];
    while ready.iter().any(|r| !r) {
        let (i, report) = ring.next(
            until,
            "while the ring was starting",
            "the ring did not start in time",
        )?;
        match report {
            Report::Ready => ready[i] = true,
            other => bail!("unexpected report from {}: {other:?}", ring.members[i].role),
        }
    }
    ring.members[0]
        .peer
        .send(&Command::Start)
        .context("cannot tell the master to start")?;
    let mut watchdog = Instant::now() + START_TIMEOUT + WATCHDOG;
    let master: MasterResult = loop {
        let (i, report) = ring.next(
            watchdog,
            "during the run",
            &format!("the master made no progress for {WATCHDOG:?}"),
        )?;
        match (i, report) {
            (0, Report::Progress(_)) => watchdog = Instant::now() + WATCHDOG,
            (0, Report::Result(r)) => break *r,
            (i, other) => bail!("unexpected report from {}: {other:?}", ring.members[i].role),
        }
    };
    let throttling = group.as_ref().map(CpuGroup::throttling);
    let hubs = ring.finish()?;
    drop(group);

    let mut row = Row::empty(ctx.config, transport, mode);
    row.round = Some(round);
    row.seconds = Some(started.elapsed().as_secs_f64());
    row.throttled_periods = throttling.map(|t| t.throttled_periods);
    row.throttled_ms = throttling.map(|t| t.throttled_ns as f64 / 1e6);
    row.measured(master, hubs, &ctx.placement, ctx.config.size);
    Ok(row)
}

/// One process of the ring: killed (or, on another machine, ended by its agent) if dropped
/// before it finished.
pub(super) struct Member {
    pub(super) role: String,
    pub(super) peer: Peer,
}

impl Member {
    /// The error for a process that ended or failed `when` (it must not before `finish`).
    pub(super) fn died(&self, when: &str, e: Error) -> Error {
        let pid = self
            .peer
            .pid()
            .map_or(String::new(), |p| format!(" (pid {p})"));
        Error::msg(format!("{}{pid} exited {when}: {e}", self.role))
    }
}

/// The processes of one run.
pub(super) struct Ring {
    pub(super) members: Vec<Member>,
}

impl Ring {
    pub(super) fn start(
        ctx: &Ctx<'_>,
        transport: Subject,
        mode: Mode,
        domain: &str,
    ) -> Result<Ring> {
        let args = ctx.config;
        let mut members = Vec::with_capacity(args.hubs);
        for (i, place) in ctx.placement.iter().enumerate() {
            let request = PeerRequest {
                index: i,
                hubs: args.hubs,
                mode,
                transport,
                domain: domain.to_owned(),
                size: args.size,
                messages: args.messages,
                warmup: args.warmup,
                wait: args.wait,
                host: place.host,
                cpu: place.cpu,
                exit_after: args.fault_hub_exit_after.filter(|_| i == 1),
                discovery: ctx.discovery_of(i),
            };
            let role = role_name(i);
            let peer = Peer::start::<Hubs>(&request, &ctx.place_of(i))
                .context(format!("cannot start {role}"))?;
            members.push(Member { role, peer });
        }
        Ok(Ring { members })
    }

    /// The next report of any process, by `until` (else the error `late`). Any process that
    /// ends meanwhile is an error (they end only when told to, in `finish`), as is Ctrl-C.
    pub(super) fn next(
        &mut self,
        until: Instant,
        when: &str,
        late: &str,
    ) -> Result<(usize, Report)> {
        loop {
            signal::check()?;
            for (i, m) in self.members.iter_mut().enumerate() {
                // Reads what has come (queueing reports), then says whether it has ended.
                if let Err(e) = m.peer.check_alive() {
                    return Err(m.died(when, e));
                }
                let report = m
                    .peer
                    .recv::<Report>(Duration::ZERO)
                    .map_err(|e| Error::msg(format!("{}: {e}", m.role)))?;
                if let Some(report) = report {
                    return Ok((i, report));
                }
            }
            if Instant::now() >= until {
                bail!("{late}; stopped every process");
            }
            std::thread::sleep(LOOK_EVERY);
        }
    }

    /// Tells every process to stop (closes its input), collects the hubs' reports and checks
    /// that every process finished successfully, within EXIT_TIMEOUT.
    pub(super) fn finish(mut self) -> Result<Vec<HubReport>> {
        for m in &mut self.members {
            m.peer.close_input();
        }
        let until = Instant::now() + EXIT_TIMEOUT;
        let mut reports = Vec::with_capacity(self.members.len().saturating_sub(1));
        for (i, mut m) in self.members.into_iter().enumerate() {
            if i > 0 {
                let left = until.saturating_duration_since(Instant::now());
                match m.peer.recv::<Report>(left) {
                    Ok(Some(Report::Hub(r))) => reports.push(r),
                    Ok(Some(other)) => bail!("unexpected report from {}: {other:?}", m.role),
                    Ok(None) if Instant::now() >= until => bail!(
                        "{} did not finish within {EXIT_TIMEOUT:?} after the run",
                        m.role
                    ),
                    Ok(None) => bail!("{} exited without its report", m.role),
                    Err(e) => bail!("{} failed at the end of the run: {e}", m.role),
                }
            }
            let left = until.saturating_duration_since(Instant::now());
            let role = m.role;
            m.peer
                .finish(left)
                .map_err(|e| Error::msg(format!("{role} failed at the end of the run: {e}")))?;
        }
        Ok(reports)
    }
}
