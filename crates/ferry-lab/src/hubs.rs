//! `ferry lab hubs` (the DDS performance study of the DDS-Demonstrators project): the Roundtrip and
//! Flood demonstrators over a ring of hub processes — a master and `--hubs − 1` others (4 in all by
//! default, as in the study), each its own process, joined in a ring by one ferry topic per edge:
//! `hubs/edge0` (master → hub 1), `hubs/edge1` (hub 1 → hub 2), …, `hubs/edge{N−1}` (hub N−1 →
//! master). Delivery is reliable.
//!
//! - **roundtrip**: the master sends one message and waits until it has come back through every
//!   hub; a lap is the time from before the master writes the message until it has it back and
//!   has checked every byte. `--messages` recorded laps per round (after `--warmup` unrecorded).
//! - **flood**: the master pushes `--messages` messages into the ring back to back (a sender
//!   thread, held back only by ferry's reliable back-pressure) while its main thread takes them
//!   back; every hub forwards each message as soon as it has it. Completion time: from the first
//!   send until the master has every message back. Every message is checked: intact (every
//!   byte), in order, none twice; what never came back is counted as lost.
//! - Hubs copy each message into a loan of their outgoing topic and send it; they check the
//!   order of what passes through, the master checks every byte.
//! - Every process waits with `WaitStrategy::Block` by default: the processes outnumber the
//!   CPUs (4 on 2 here), and a waiter that spins holds the CPU the next hub needs.
//! - Before measuring, the master sends probes around the ring until one comes back, so every
//!   edge is known to be connected (a reliable publisher serves a subscriber from the moment it
//!   knows it).
//! - Every hub, the master included, is a peer process of the lab ([`crate::peer`]): the main
//!   process starts them, tells them to go (`go`, after moving them into the cgroup, if any) and
//!   the master to start (`start`), reads their reports (`ready`, the master's `progress` and
//!   `result`, each hub's `hub` report) and ends the run by closing their input.
//! - `--hosts 2`: two network namespaces joined by a veth pair ([`crate::netns`], a private
//!   10.203.x.0/24 inside them), the master and the even hubs in one, the odd hubs in the other
//!   (the study's "2 nodes": master and hub 2 on machine A, hubs 1 and 3 on machine B).
//!   Processes find the other side's endpoints through ferry's static peer list (`FERRY_PEERS`:
//!   the other side's address, port 7651; in each namespace one process relays the
//!   announcements to the others); multicast discovery stays off. The peer request carries the
//!   list, and each hub process sets it for itself before its first endpoint. `--link-rate` puts
//!   a `tc tbf` on both veth ends. The namespaces are removed on every exit path (error and
//!   Ctrl-C included).
//! - `--hosts 2 --remote HOST[:PORT]`: two real machines instead: the master and the even hubs
//!   run on this one, the odd hubs on the machine of the `ferry lab agent` at HOST, started
//!   through it; each side's peer list names the other machine (the agent's address, and this
//!   machine's address on the route there).
//! - `--cpu Q`: every hub process (the master included) runs in one cgroup with a CFS quota of Q
//!   CPUs, standing in for slower CPUs (the study scaled the CPU frequency).
//! - Transports run in interleaved rounds (shm udp auto shm udp auto …); each round is a row.
//! - Every wait is bounded; a hub that dies is reported by name; children are killed and
//!   reaped on every exit path.

use super::cgroup::{self};
use crate::chart::{bar_svg, color, Bars, Plot, Section, SummaryLine};
use crate::error::{bail, note, Context, Result};
use crate::experiment::{head, Experiment, Measured, Results};
pub use crate::netns::parse_link_rate;
use crate::peer::PeerLink;
use crate::signal;
use crate::studies::{cite_first, DDS_HUBS};
use crate::subject::Subject;
use crate::table::Table;
use crate::units::{format_ns, format_size};
use std::time::{Duration, Instant};

mod hub;
mod messages;
mod options;
mod report;
mod results;
mod run;
mod wire;

use hub::*;
pub use options::*;
use report::*;
pub use results::*;
use run::*;
pub use wire::*;

/// A row's figures in the terminal's table of its mode.
type Figures = fn(&Row) -> Vec<String>;

impl Experiment for Hubs {
    head!("hubs", "Roundtrip and Flood over a ring of hubs", across machines);

    fn validate(args: &Config) -> Result<()> {
        super::distinct_list("--mode", &args.mode, |m| m.name().to_owned())?;
        SUBJECTS.check("--transport", &args.transport)?;
        if !(2..=MAX_HUBS).contains(&args.hubs) {
            bail!("--hubs must be between 2 and {MAX_HUBS} (the master included)");
        }
        if !(1..=MAX_MESSAGES).contains(&args.messages) {
            bail!("--messages must be between 1 and {MAX_MESSAGES}");
        }
        if args.warmup > MAX_MESSAGES {
            bail!("--warmup must be at most {MAX_MESSAGES}");
        }
        if !(HEADER..=MAX_SIZE).contains(&args.size) {
            bail!(
                "--size must be between {HEADER} bytes (the sequence header) and {}",
                format_size(MAX_SIZE)
            );
        }
        if args.rounds == 0 {
            bail!("--rounds must be at least 1");
        }
        if !(1..=2).contains(&args.hosts) {
            bail!("--hosts must be 1 or 2");
        }
        if let Some(agent) = &args.remote {
            if args.hosts != 2 {
                bail!(
                    "--remote {agent} runs the odd hubs on the agent's machine: it needs --hosts 2"
                );
            }
            if args.link_rate.is_some() {
                bail!(
                "--link-rate limits the veth link between two network namespaces; with --remote \
                 {agent} the hubs talk over the network between the machines: leave it out"
            );
            }
            if args.cpu.is_some() {
                bail!(
                    "--cpu puts every hub process in one cgroup of this machine; with --remote \
                 {agent} the odd hubs run on another machine: use --cpu none"
                );
            }
        }
        if args.link_rate.is_some() && args.hosts != 2 {
            bail!("--link-rate limits the link between two hosts: it needs --hosts 2");
        }
        if let Some(c) = args.cpu {
            if !(c.is_finite() && c > 0.0) {
                bail!("--cpu must be a positive number of CPUs, or none");
            }
            let parent = match cgroup::detect() {
            Some(cgroup::Version::V1) => "/sys/fs/cgroup/cpu",
            Some(cgroup::Version::V2) => "/sys/fs/cgroup",
            None => bail!(
                "--cpu: this machine has no cgroup CPU controller under /sys/fs/cgroup; use --cpu none"
            ),
        };
            if rustix::fs::access(parent, rustix::fs::Access::WRITE_OK).is_err() {
                bail!(
                "--cpu needs root (write access to {parent}) to create a cgroup with a CPU quota; use --cpu none"
            );
            }
        }
        Ok(())
    }

    fn run(args: &Config) -> Result<Measured<Self>> {
        let started = super::unix_time();
        let placement = placement(args);
        let remote = args.remote.as_deref().map(Remote::resolve).transpose()?;
        // Created before any process and dropped after all of them (also on error and Ctrl-C).
        let pair = match (args.hosts, &remote) {
            (2, None) => Some(make_pair(args.link_rate)?),
            _ => None,
        };
        let ctx = Ctx {
            config: args,
            pair: pair.as_ref(),
            remote: remote.as_ref(),
            placement,
        };
        note!(
        "ferry lab hubs: {} × {} in {} rounds; {} processes in a ring; {} messages of {}; {}{}{}",
        args.mode
            .iter()
            .map(|m| m.name())
            .collect::<Vec<_>>()
            .join(","),
        args.transport
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(","),
        args.rounds,
        args.hubs,
        args.messages,
        format_size(args.size),
        describe_placement(&ctx.placement),
        match (&pair, &remote) {
            (Some(h), _) => format!(
                "; two hosts: namespaces {} (A, {}) and {} (B, {})",
                h.ns[0], h.addr[0], h.ns[1], h.addr[1]
            ),
            (None, Some(r)) => format!(
                "; two hosts: this machine (A, {}) and the lab agent at {} (B, {})",
                r.here, r.agent, r.there
            ),
            (None, None) => String::new(),
        },
        match args.cpu {
            Some(c) => format!("; CPU quota {c} CPU over all of them"),
            None => String::new(),
        }
    );

        let mut rows = Vec::new();
        let mut skipped = Vec::new();
        for &t in &args.transport {
            if let Some(reason) = skip_reason(args, t) {
                note!("  {}: {reason}", t.name());
                for &mode in &args.mode {
                    let mut row = Row::empty(args, t, mode);
                    row.skipped = Some(reason.clone());
                    rows.push(row);
                }
                skipped.push(Skipped {
                    transport: t,
                    reason,
                });
            }
        }
        let mut problems = Vec::new();
        let mut run_index = 0usize;
        for round in 0..args.rounds {
            for &mode in &args.mode {
                for &transport in &args.transport {
                    if skip_reason(args, transport).is_some() {
                        continue;
                    }
                    signal::check()?;
                    let row = trial(&ctx, transport, mode, round, run_index).context(format!(
                        "{} {} (round {})",
                        transport.name(),
                        mode.name(),
                        round + 1
                    ))?;
                    run_index += 1;
                    note!("  round {}/{}: {}", round + 1, args.rounds, summarize(&row));
                    if row.lost != Some(0)
                        || row.corrupt != Some(0)
                        || row.out_of_order != Some(0)
                        || row.duplicates != Some(0)
                        || row.error.is_some()
                    {
                        problems.push(format!(
                            "{} {} round {}: {} lost, {} corrupt, {} out of order, {} duplicated{}",
                            row.transport.name(),
                            row.mode.name(),
                            round + 1,
                            row.lost.unwrap_or(0),
                            row.corrupt.unwrap_or(0),
                            row.out_of_order.unwrap_or(0),
                            row.duplicates.unwrap_or(0),
                            row.error
                                .as_ref()
                                .map_or(String::new(), |e| format!(" ({e})"))
                        ));
                    }
                    rows.push(row);
                }
            }
        }
        let setup = make_setup(&ctx, skipped, started);
        drop(pair);
        if !problems.is_empty() {
            bail!(
                "messages went missing or arrived damaged (reliable delivery promises none): {}",
                problems.join("; ")
            );
        }
        Ok(Measured { setup, rows })
    }

    fn run_peer(args: PeerRequest, link: &mut PeerLink) -> Result<()> {
        args.check()?;
        if let Some(cpu) = args.cpu {
            super::pin_to(cpu)?;
        }
        // The main process first moves this process into its cgroup, if any.
        expect(link, Command::Go, START_TIMEOUT, || {})?;
        let n = args.hubs;
        let i = args.index;
        // In the clear whatever FERRY_KEY_FILE says here, so that both hosts agree.
        let node = super::lab_node_reaching(
            &format!("hub{i}"),
            &args.domain,
            false,
            discovery_config(args.discovery.as_ref()),
        )?;
        let qos = qos(args.transport, args.size, args.wait)?;
        let mut input = node.subscriber(&edge_topic((i + n - 1) % n), &qos)?;
        let output = node.publisher(&edge_topic(i), &qos)?;
        let deadline = Instant::now() + START_TIMEOUT;
        // A subscriber attaches to new publishers when it looks at its topic: keep looking, so that
        // the previous process's publisher sees it.
        while {
            input.publisher_count();
            output.subscriber_count() == 0
        } {
            link.check_main()?;
            if Instant::now() >= deadline {
                bail!(
                "{}: nobody subscribed to {} within {START_TIMEOUT:?} (is {} running and reachable?)",
                role_name(i),
                edge_topic(i),
                role_name((i + 1) % n)
            );
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        link.report(&Report::Ready)?;
        let mut ends = Ends {
            input,
            output,
            size: args.size,
        };
        if i == 0 {
            master(&args, link, &mut ends)?;
        } else {
            hub(&args, link, &mut ends)?;
        }
        close(ends);
        Ok(())
    }

    fn table(results: &Results<Self>) -> String {
        let setup: &Setup = &results.config;
        let rows: &[Row] = &results.rows;
        let mut out = String::new();
        let hosts = hosts_text(setup);
        let cpu = setup
            .cpu
            .map_or("no CPU quota".to_owned(), |c| format!("CPU quota {c} CPU"));
        for &mode in &setup.modes {
            let mine: Vec<&Row> = rows.iter().filter(|r| r.mode == mode).collect();
            // The mode's columns of figures (between a row's round and its edges), and the
            // sentence above its table.
            let (columns, figures, intro): (&[&str], Figures, String) = match mode {
                Mode::Roundtrip => (
                    &[">lap p50", ">p90", ">p99", ">max", ">mean", ">hop p50", ">total", ">lost"],
                    |r| {
                        vec![
                            format_ns(r.lap_p50_ns.unwrap_or(0) as f64),
                            format_ns(r.lap_p90_ns.unwrap_or(0) as f64),
                            format_ns(r.lap_p99_ns.unwrap_or(0) as f64),
                            format_ns(r.lap_max_ns.unwrap_or(0) as f64),
                            format_ns(r.lap_mean_ns.unwrap_or(0.0)),
                            format_ns(r.hop_p50_ns.unwrap_or(0.0)),
                            format!("{:.3} s", r.total_s.unwrap_or(0.0)),
                            r.lost.unwrap_or(0).to_string(),
                        ]
                    },
                    format!(
                        "Roundtrip: one message around a ring of {} processes, {} laps of {} per row; {hosts}; {cpu}; wait {}.",
                        setup.hubs,
                        setup.messages,
                        format_size(setup.size_bytes),
                        setup.wait.name(),
                    ),
                ),
                Mode::Flood => (
                    &[">completion", ">messages/s", ">payload", ">lost", ">corrupt", ">out of order"],
                    |r| {
                        vec![
                            r.completion_s
                                .map_or("-".to_owned(), |c| format_ns(c * 1e9)),
                            r.messages_per_s
                                .map_or("-".to_owned(), |m| format!("{m:.0}")),
                            r.payload_mbit_per_s
                                .map_or("-".to_owned(), |m| format!("{m:.1} Mbit/s")),
                            r.lost.unwrap_or(0).to_string(),
                            r.corrupt.unwrap_or(0).to_string(),
                            r.out_of_order.unwrap_or(0).to_string(),
                        ]
                    },
                    format!(
                        "Flood: {} messages of {} pushed into a ring of {} processes back to back, timed until all are back; {hosts}; {cpu}; wait {}.",
                        setup.messages,
                        format_size(setup.size_bytes),
                        setup.hubs,
                        setup.wait.name(),
                    ),
                ),
            };
            let headers: Vec<&str> = ["transport", ">round"]
                .into_iter()
                .chain(columns.iter().copied())
                .chain(["edges"])
                .collect();
            let mut t = Table::new(&headers);
            for r in mine.iter().filter(|r| r.skipped.is_none()) {
                let mut cells = vec![
                    r.transport.name().to_owned(),
                    r.round.map_or(String::new(), |x| (x + 1).to_string()),
                ];
                cells.extend(figures(r));
                cells.push(paths(r));
                t.row(cells);
            }
            out.push_str(&format!(
                "\n{intro}\n{}.\n\n{}",
                setup.pinning.summary,
                t.render()
            ));
            for r in mine.iter().filter(|r| r.skipped.is_some()) {
                out.push_str(&format!(
                    "{}: {}\n",
                    r.transport.name(),
                    r.skipped.as_deref().unwrap_or_default()
                ));
            }
            // The median over the rounds, per transport.
            let mut s = Table::new(&["transport", ">rounds", "median over the rounds"]);
            for &tr in &setup.transports {
                let of = mine
                    .iter()
                    .filter(|r| r.transport == tr && r.skipped.is_none())
                    .count();
                if of == 0 {
                    continue;
                }
                let text = match mode {
                    Mode::Roundtrip => {
                        median_over_rounds(rows, mode, tr, |r| r.lap_p50_ns.map(|v| v as f64))
                            .map_or("-".to_owned(), |m| format!("lap p50 {}", format_ns(m)))
                    }
                    Mode::Flood => {
                        let c = median_over_rounds(rows, mode, tr, |r| r.completion_s);
                        let m = median_over_rounds(rows, mode, tr, |r| r.messages_per_s);
                        match (c, m) {
                            (Some(c), Some(m)) => {
                                format!("completion {} ({m:.0} messages/s)", format_ns(c * 1e9))
                            }
                            _ => "-".to_owned(),
                        }
                    }
                };
                s.row(vec![tr.name().to_owned(), of.to_string(), text]);
            }
            out.push('\n');
            out.push_str(&s.render());
        }
        out
    }

    fn section(results: &Results<Hubs>) -> Result<Section> {
        let rs = &results.rows;
        let setup = &results.config;
        let transports = transports_of(rs);
        let hubs = setup.hubs;
        let hosts = setup.hosts;
        let link = setup
            .link_rate
            .as_ref()
            .map_or(String::new(), |l| format!(", link {l}"));
        let per_t = |mode: Mode, figure: fn(&Row) -> Option<f64>, scale: f64| -> Vec<Option<f64>> {
            transports
                .iter()
                .map(|&t| median_over_rounds(rs, mode, t, figure).map(|v| v / scale))
                .collect()
        };
        let mut panels = Vec::new();
        let (mut lap, mut flood) = (Vec::new(), Vec::new());
        let roundtrip_title = format!("Roundtrip: one lap through {hubs} processes");
        if rs.iter().any(|r| r.mode == Mode::Roundtrip) {
            panels.push(Bars {
                title: &roundtrip_title,
                y_desc: "lap time (µs)",
                categories: transports.iter().map(|t| t.name().to_owned()).collect(),
                series: vec![
                    (
                        "p50".into(),
                        color(0),
                        per_t(Mode::Roundtrip, |r| r.lap_p50_ns.map(|v| v as f64), 1e3),
                    ),
                    (
                        "p90".into(),
                        color(1),
                        per_t(Mode::Roundtrip, |r| r.lap_p90_ns.map(|v| v as f64), 1e3),
                    ),
                    (
                        "p99".into(),
                        color(2),
                        per_t(Mode::Roundtrip, |r| r.lap_p99_ns.map(|v| v as f64), 1e3),
                    ),
                ],
                reference: None,
                log_y: false,
            });
            for &t in &transports {
                if let Some(v) =
                    median_over_rounds(rs, Mode::Roundtrip, t, |r| r.lap_p50_ns.map(|v| v as f64))
                {
                    lap.push(format!("{} {}", t.name(), format_ns(v)));
                }
            }
        }
        let flood_title = format!("Flood: {} messages through every hub", setup.messages);
        if rs.iter().any(|r| r.mode == Mode::Flood) {
            let completions = |t: Subject| {
                rs.iter()
                    .filter(move |r| r.mode == Mode::Flood && r.transport == t)
                    .filter_map(|r| r.completion_s)
            };
            let ext = |max: bool| -> Vec<Option<f64>> {
                transports
                    .iter()
                    .map(|&t| {
                        completions(t)
                            .reduce(if max { f64::max } else { f64::min })
                            .map(|v| v * 1e3)
                    })
                    .collect()
            };
            panels.push(Bars {
                title: &flood_title,
                y_desc: "completion (ms)",
                categories: transports.iter().map(|t| t.name().to_owned()).collect(),
                series: vec![
                    ("fastest round".into(), color(3), ext(false)),
                    (
                        "median".into(),
                        color(0),
                        per_t(Mode::Flood, |r| r.completion_s, 1e-3),
                    ),
                    ("slowest round".into(), color(1), ext(true)),
                ],
                reference: None,
                log_y: false,
            });
            for &t in &transports {
                if let Some(v) = median_over_rounds(rs, Mode::Flood, t, |r| r.completion_s) {
                    flood.push(format!("{} {:.2} ms", t.name(), v * 1e3));
                }
            }
        }
        let mut plots = Vec::new();
        if !panels.is_empty() {
            plots.push(Plot {
            file: "hubs.svg".to_owned(),
            svg: bar_svg(&panels, 1500)?,
            caption: format!(
                "{hubs} processes in a ring on {hosts} host(s){link}; median over the rounds (roundtrip: lap percentiles; flood: time until every message came back to the master)."
            ),
        });
        }
        let sentence = format!(
        "{} passes a message around a master and 3 hubs (Roundtrip) and pushes 1000 messages through every hub (Flood), on one node and on two over Ethernet and WiFi; its Flood over Ethernet saturates the network. Here, on {hosts} host(s){link}: roundtrip lap p50 {}; flood completion {}.",
        cite_first(&DDS_HUBS),
        if lap.is_empty() { "not run".to_owned() } else { lap.join(", ") },
        if flood.is_empty() { "not run".to_owned() } else { flood.join(", ") },
    );
        Ok(Section { plots, sentence })
    }

    /// The study's headline figures are its Roundtrip time and its Flood completion time, on one
    /// node and on two: one line per mode and transport measured. The study plots its times without
    /// giving a figure in its text, and no other system is measured here, so those stay empty.
    fn summary(results: &Results<Hubs>) -> Vec<SummaryLine> {
        let setup = &results.config;
        let rs = &results.rows;
        let hosts = hosts_text(setup);
        let mut lines = Vec::new();
        for &mode in &setup.modes {
            for &t in &setup.transports {
                let line = match mode {
                Mode::Roundtrip => median_over_rounds(rs, mode, t, |r| {
                    r.lap_p50_ns.map(|v| v as f64)
                })
                .map(|p50| SummaryLine {
                    what: format!(
                        "Roundtrip lap p50, a ring of {} processes, {hosts}, {}",
                        setup.hubs,
                        t.name()
                    ),
                    ferry: format_ns(p50),
                    floor: None,
                    best_peer: None,
                    study: None,
                }),
                Mode::Flood => median_over_rounds(rs, mode, t, |r| r.completion_s).map(|c| {
                    let rate = median_over_rounds(rs, mode, t, |r| r.messages_per_s);
                    SummaryLine {
                        what: format!(
                            "Flood of {} messages through a ring of {} processes, {hosts}, {}: completion",
                            setup.messages,
                            setup.hubs,
                            t.name()
                        ),
                        ferry: match rate {
                            Some(m) => format!("{} ({m:.0} messages/s)", format_ns(c * 1e9)),
                            None => format_ns(c * 1e9),
                        },
                        floor: None,
                        best_peer: None,
                        study: None,
                    }
                }),
            };
                lines.extend(line);
            }
        }
        lines
    }
}
/// Results of a small made-up run on one host, for the report's tests.
#[cfg(test)]
pub(crate) fn example() -> Results<Hubs> {
    example_with(vec![
        (Subject::Shm, Mode::Roundtrip, 0, 30_000, None),
        (Subject::Udp4, Mode::Roundtrip, 0, 60_000, None),
        (Subject::Shm, Mode::Flood, 0, 0, Some(10_000_000)),
        (Subject::Udp4, Mode::Flood, 0, 0, Some(20_000_000)),
        (Subject::Shm, Mode::Roundtrip, 1, 32_000, None),
        (Subject::Udp4, Mode::Roundtrip, 1, 64_000, None),
        (Subject::Shm, Mode::Flood, 1, 0, Some(12_000_000)),
        (Subject::Udp4, Mode::Flood, 1, 0, Some(22_000_000)),
    ])
}

/// Results of made-up runs: (transport, mode, round, lap p50 in ns, flood completion in ns),
/// built as a run builds them, from the master's result and the hubs' reports.
#[cfg(test)]
fn example_with(runs: Vec<(Subject, Mode, usize, u64, Option<u64>)>) -> Results<Hubs> {
    let mut modes = Vec::new();
    let mut transports = Vec::new();
    let mut rounds = 0;
    for &(t, m, r, _, _) in &runs {
        if !modes.contains(&m) {
            modes.push(m);
        }
        if !transports.contains(&t) {
            transports.push(t);
        }
        rounds = rounds.max(r + 1);
    }
    let config = Config {
        mode: modes,
        transport: transports,
        rounds,
        ..Config::default()
    };
    let placement = placement(&config);
    let info = |i: usize| ProcInfo {
        role: role_name(i),
        index: i,
        host: Host::Local,
        pid: 1000 + i as u32,
        pinned_cpu: placement[i].cpu,
        allowed_cpus: vec![0, 1],
        last_cpu: i % 2,
        cpu_s: Some(0.1),
    };
    let rows = runs
        .into_iter()
        .map(|(transport, mode, round, lap, completion_ns)| {
            let edge = match transport {
                Subject::Udp4 => EdgeCounts {
                    shm_received: 0,
                    udp_received: config.messages + config.warmup + 1,
                },
                _ => EdgeCounts {
                    shm_received: config.messages + config.warmup + 1,
                    udp_received: 0,
                },
            };
            // p50 = `lap`; the slowest tenth of the laps up to twice as long.
            let mut laps: Vec<u64> = (0..100)
                .map(|k: u64| lap + lap * k.saturating_sub(89) / 10)
                .collect();
            let master = MasterResult {
                probes: 1,
                laps: (mode == Mode::Roundtrip).then(|| Laps::of(&mut laps)),
                completion_ns,
                received: config.messages,
                edge_in: edge,
                process: Some(info(0)),
                ..MasterResult::default()
            };
            let hubs = (1..config.hubs)
                .map(|i| HubReport {
                    forwarded: config.messages + config.warmup + 1,
                    out_of_order: 0,
                    edge_in: edge,
                    process: info(i),
                })
                .collect();
            let mut row = Row::empty(&config, transport, mode);
            row.round = Some(round);
            row.seconds = Some(0.5);
            row.measured(master, hubs, &placement, config.size);
            row
        })
        .collect();
    let ctx = Ctx {
        config: &config,
        pair: None,
        remote: None,
        placement: placement.clone(),
    };
    let setup = make_setup(&ctx, Vec::new(), 0);
    Results::new(crate::Machine::probe(), config, Measured { setup, rows })
}

#[cfg(test)]
mod tests;
