//! `ferry lab share`: how a ferry flow shares a real link with one other flow, a second ferry
//! flow or one TCP flow, and whether it gets its share. The goals: beside one TCP flow, ferry
//! gets between 0.4 and 0.6 of what the two flows get; two ferry flows get about the same (the
//! smaller at least 0.8 of the larger).
//!
//! The link is the lab's two hosts on one machine, as `ferry lab throughput --hosts 2` makes them:
//! two network namespaces joined by a veth pair with a `tc tbf` of the link rate on both ends
//! ([`crate::netns::Pair`]), one pair per rate. A ferry flow is reliable UDP, 64 KiB messages
//! published back to back, on a topic of its own: its publisher runs in a peer process in
//! namespace A, its subscriber in another in namespace B (`flows`). Every one of these
//! processes mounts a /dev/shm of its own, so that the flows meet only on the link.
//!
//! A run (`run`): the first ferry flow starts; `delay` seconds later the other flow starts (the
//! second ferry flow, or iperf3's TCP client in A sending to its server in B); once the other
//! flow has run [`WARMUP`], both are measured over the same `seconds`. A ferry flow's goodput is
//! the messages its subscriber received within that interval (each message's receive time taken
//! at the subscriber on CLOCK_MONOTONIC, which both namespaces share) × 64 KiB over the
//! interval; TCP's is iperf3's receiver report over the seconds after its first [`WARMUP`]
//! (`--omit`, `end.sum_received`). Rounds interleave: every round runs every competitor on
//! every link in turn.

mod figures;
mod flows;
mod run;

use std::fmt::Write as _;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::chart::{bar_svg, color, Bars, Plot, Section, SummaryLine, W};
use crate::error::{bail, note, Result};
use crate::experiment::{Experiment, Measured, Results};
use crate::netns::{self, parse_link_rate, LinkRate, Pair};
use crate::peer::PeerLink;
use crate::table::Table;
use figures::{cases, format_share, goal, Case, FERRY_GOAL, TCP_GOAL};

crate::choice! {
    /// What shares the link with the ferry flow.
    pub enum Competitor: "competitor" {
        /// A second ferry flow, as the first: reliable UDP, 64 KiB messages back to back.
        Ferry = "ferry",
        /// One TCP flow: iperf3's client in namespace A sending to its server in B.
        Tcp = "tcp",
    }
}

impl Competitor {
    /// The other flow, in a sentence: "one TCP flow".
    fn other_flow(self) -> &'static str {
        match self {
            Competitor::Ferry => "a second ferry flow",
            Competitor::Tcp => "one TCP flow",
        }
    }

    /// The other flow's name in a table's column or a plot's legend.
    fn other_name(self) -> &'static str {
        match self {
            Competitor::Ferry => "second ferry flow",
            Competitor::Tcp => "TCP",
        }
    }

    /// How many ferry flows a run of it has.
    fn ferry_flows(self) -> usize {
        match self {
            Competitor::Ferry => 2,
            Competitor::Tcp => 1,
        }
    }
}

/// What `ferry lab share` is asked to measure.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// What shares the link with the ferry flow, each in a run of its own.
    pub competitors: Vec<Competitor>,
    /// The rates of the links (`100mbit`, `1gbit`), a `tc tbf` on both ends of each.
    #[serde(with = "netns::rate_list")]
    #[schemars(with = "Vec<String>")]
    pub link_rates: Vec<LinkRate>,
    /// Seconds of the measured interval, the same for both flows (whole seconds with `tcp`:
    /// iperf3 counts whole seconds).
    pub seconds: f64,
    /// Seconds from the start of the first ferry flow to the start of the other flow.
    pub delay: f64,
    /// Rounds: every round runs every competitor on every link.
    pub rounds: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            competitors: vec![Competitor::Ferry, Competitor::Tcp],
            link_rates: ["100mbit", "1gbit"]
                .map(|r| parse_link_rate(r).expect("a valid rate"))
                .to_vec(),
            seconds: 8.0,
            delay: 4.0,
            rounds: 1,
        }
    }
}

/// The bytes of every ferry message.
pub const MESSAGE_BYTES: usize = 64 << 10;
/// How long the other flow runs before the measured interval starts (iperf3's `--omit`: whole
/// seconds).
pub const WARMUP: Duration = Duration::from_secs(2);
/// The longest `--seconds` and `--delay`.
const MAX_SECONDS: f64 = 600.0;
/// The most rounds.
const MAX_ROUNDS: usize = 1000;
/// How long a peer may take to start (and its publisher to see its subscriber), and to end.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// The namespaces are named after this (and the process id).
const NS_PREFIX: &str = "ferry-share-";

/// How a share run was made: the configuration, and what follows from it.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    competitors: Vec<Competitor>,
    link_rates: Vec<String>,
    /// The measured interval, seconds.
    seconds: f64,
    /// From the first ferry flow's start to the other flow's, seconds.
    delay_s: f64,
    /// How long the other flow runs before the measured interval starts, seconds.
    warmup_s: f64,
    rounds: usize,
    message_bytes: usize,
    /// The ferry endpoints' settings.
    qos: String,
    /// How each flow's goodput is taken.
    measured: String,
    /// How the goals are judged.
    goals: String,
    placement: String,
    dev_shm: String,
    discovery: String,
    pinning: String,
    /// The links, one per rate.
    links: Vec<crate::throughput::Link>,
    /// iperf3's version (with the tcp competitor; null: not run, or its version unknown).
    iperf3: Option<String>,
    /// The TCP flow's congestion control (iperf3 -C): Cubic, the Linux default that most TCP
    /// traffic a ferry flow meets runs (this machine's own default may differ).
    tcp_congestion: String,
    started_unix_s: u64,
}

impl Setup {
    fn of(config: &Config, pairs: &[Pair], cpus: Cpus, iperf3: Option<String>) -> Setup {
        let warmup = WARMUP.as_secs_f64();
        Setup {
            competitors: config.competitors.clone(),
            link_rates: config.link_rates.iter().map(|r| r.name()).collect(),
            seconds: config.seconds,
            delay_s: config.delay,
            warmup_s: warmup,
            rounds: config.rounds,
            message_bytes: MESSAGE_BYTES,
            qos: format!(
                "UDP, reliable delivery, maximum message size {MESSAGE_BYTES} bytes, send timeout {} ms (a send that times out still goes, in order), the other settings ferry's defaults (publishers and subscribers alike); every flow a topic of its own",
                flows::SEND_TIMEOUT.as_millis()
            ),
            measured: format!(
                "the other flow starts {} s after the first ferry flow; the interval starts {warmup} s after it and lasts {} s, the same for both flows. A ferry flow: the messages its subscriber received within the interval (receive times taken at the subscriber, CLOCK_MONOTONIC, shared by both namespaces) × {MESSAGE_BYTES} bytes × 8 over the interval. TCP: iperf3's receiver report (end.sum_received: bytes × 8 over its seconds) of the {} s after its first {warmup} (--omit {warmup}); the interval is the ferry flow's within the time iperf3 takes to connect",
                config.delay, config.seconds, config.seconds
            ),
            goals: format!(
                "beside one TCP flow: ferry's share, ferry / (ferry + TCP), between {} and {}; two ferry flows: smaller / larger near 1 (at least {FERRY_GOAL}); with several rounds, the median of the rounds' figures",
                TCP_GOAL.0, TCP_GOAL.1
            ),
            placement: "each ferry flow: its publisher in a peer process (ferry lab-peer) in namespace A, its subscriber in another in namespace B, all started with ip netns exec; iperf3: its client in A, its server in B".to_owned(),
            dev_shm: "every ferry process mounts a /dev/shm of its own (a fresh tmpfs, in the mount namespace ip netns exec gave it): the flows meet only on the link".to_owned(),
            discovery: format!(
                "a static peer list: each side's discovery names the other's address (port {})",
                crate::TWO_HOST_DISCOVERY_PORT
            ),
            pinning: cpus.describe(),
            links: pairs.iter().filter_map(crate::throughput::Link::of).collect(),
            iperf3,
            tcp_congestion: run::TCP_CONGESTION.to_owned(),
            started_unix_s: crate::unix_time(),
        }
    }
}

/// The CPUs of the two sides: the publishers and iperf3's client (A), the subscribers and
/// iperf3's server (B); `None`: not pinned.
#[derive(Debug, Clone, Copy)]
struct Cpus {
    a: Option<usize>,
    b: Option<usize>,
}

impl Cpus {
    /// The first two CPUs this process may use; with fewer, no pinning.
    fn pick() -> Cpus {
        match crate::allowed_cpus()[..] {
            [a, b, ..] => Cpus {
                a: Some(a),
                b: Some(b),
            },
            _ => Cpus { a: None, b: None },
        }
    }

    fn describe(self) -> String {
        match (self.a, self.b) {
            (Some(a), Some(b)) => format!("the publishers and iperf3's client on CPU {a}, the subscribers and iperf3's server on CPU {b}"),
            _ => "not pinned (fewer than 2 CPUs available)".to_owned(),
        }
    }
}

/// One run: a competitor beside the ferry flow on one link, in one round.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    /// The round (from 1).
    pub round: usize,
    pub competitor: Competitor,
    pub link_rate: String,
    pub link_rate_bps: u64,
    /// The measured interval, seconds.
    pub window_s: f64,
    /// The (first) ferry flow's goodput over the interval, Mbit/s.
    pub ferry_mbps: f64,
    /// The other flow's over the same interval, Mbit/s: the second ferry flow's (as the
    /// first's), or TCP's (iperf3's receiver report).
    pub other_mbps: f64,
    /// Beside TCP: ferry / (ferry + TCP); two ferry flows: the smaller / the larger. Null when
    /// neither flow got anything through.
    pub share: Option<f64>,
    /// Messages each ferry flow's subscriber received within the interval (the first flow's
    /// first).
    pub messages_in_window: Vec<u64>,
    /// Messages each ferry flow's subscriber received in all.
    pub messages_received: Vec<u64>,
    /// Each ferry flow's publisher's counters, read in its process before it closed (the first
    /// flow's first).
    pub publishers: Vec<PublisherCounters>,
    /// TCP: the seconds iperf3's receiver report covers.
    pub tcp_seconds: Option<f64>,
    /// TCP: segments the sender retransmitted (iperf3's `end.sum_sent.retransmits`).
    pub tcp_retransmits: Option<u64>,
}

impl Row {
    /// `other_mbps` and the TCP figures come from `other`: the second ferry flow's counts, or
    /// iperf3's.
    fn of(
        round: usize,
        competitor: Competitor,
        rate: LinkRate,
        window_s: f64,
        counts: &[Counts],
        publishers: Vec<PublisherCounters>,
        tcp: Option<&crate::tools::ToolResult>,
    ) -> Row {
        let mbps = |messages: u64| messages as f64 * MESSAGE_BYTES as f64 * 8.0 / window_s / 1e6;
        let ferry_mbps = counts.first().map_or(0.0, |c| mbps(c.in_window));
        let other_mbps = match tcp {
            Some(t) => t.delivered_bps.unwrap_or(0.0) / 1e6,
            None => counts.get(1).map_or(0.0, |c| mbps(c.in_window)),
        };
        Row {
            round,
            competitor,
            link_rate: rate.name(),
            link_rate_bps: rate.bps,
            window_s,
            ferry_mbps,
            other_mbps,
            share: figures::share(competitor, ferry_mbps, other_mbps),
            messages_in_window: counts.iter().map(|c| c.in_window).collect(),
            messages_received: counts.iter().map(|c| c.received).collect(),
            publishers,
            tcp_seconds: tcp.map(|t| t.seconds),
            tcp_retransmits: tcp.and_then(|t| t.retransmits),
        }
    }
}

/// A ferry publisher's counters, read in its process before it closed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct PublisherCounters {
    /// Messages it sent.
    pub sent: u64,
    /// UDP frames it sent again on a NAK. Null: its statistics were not found.
    pub retransmitted: Option<u64>,
    /// Rounds of its congestion controller that ended with a standing queue (it backed off).
    pub queue_events: Option<u64>,
    /// Loss with a growing queue that cut its rate.
    pub congestion_events: Option<u64>,
}

/// The experiment (see the module's documentation).
pub struct Share;

// ---------------------------------------------------------------------------------------------
// What the main side and its peers say to each other

/// Which end of a ferry flow a peer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// In namespace A: publishes from `Go` until `Stop`.
    Publish,
    /// In namespace B: counts what arrives, and what arrives within the interval.
    Subscribe,
}

/// What the main side asks of a peer: one end of one ferry flow.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerRequest {
    role: Role,
    domain: String,
    topic: String,
    /// The other side's address, which the peer's discovery reaches.
    other: std::net::Ipv4Addr,
    cpu: Option<usize>,
    /// The lab's mount namespace: the peer mounts a /dev/shm of its own only in another.
    lab_mount_ns: u64,
    /// The longest the peer waits for the main side's next word, seconds (it ends the peer long
    /// before).
    limit_s: f64,
}

/// The main side's commands.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Command {
    /// A publisher: start sending.
    Go,
    /// A subscriber: the measured interval, CLOCK_MONOTONIC nanoseconds, from (included) to
    /// (excluded).
    Window { from_ns: u64, to_ns: u64 },
    /// A publisher: stop sending, read the counters, close and report them.
    Stop,
    /// A subscriber: its publisher has closed; report the counts.
    Done,
}

/// What a peer reports.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Report {
    /// A subscriber is made; a publisher sees its subscriber.
    Ready,
    /// A publisher stopped and closed.
    Stopped(PublisherCounters),
    /// A subscriber's counts.
    Counts(Counts),
}

/// What a subscriber received.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct Counts {
    /// Messages in all.
    received: u64,
    /// Messages within the interval.
    in_window: u64,
}

// ---------------------------------------------------------------------------------------------
// The experiment

/// What this machine lacks for `config`, each said in a few words.
fn missing(config: &Config) -> Vec<String> {
    let mut missing = netns::missing(true);
    if config.competitors.contains(&Competitor::Tcp) && crate::tools::find("iperf3").is_none() {
        missing.push(
            "iperf3 for --competitor tcp, not found in PATH (install it with `apt-get install iperf3`, or leave tcp out)".to_owned(),
        );
    }
    missing
}

impl Experiment for Share {
    const NAME: &'static str = "share";
    const TITLE: &'static str = "Sharing a link: a ferry flow beside a second ferry flow or TCP";
    type Config = Config;
    type Setup = Setup;
    type Row = Row;
    type PeerRequest = PeerRequest;

    fn validate(c: &Config) -> Result<()> {
        crate::distinct_list("--competitor", &c.competitors, |x| x.name().to_owned())?;
        crate::distinct_list("--link-rate", &c.link_rates, |r| r.name())?;
        if !(c.seconds.is_finite() && (1.0..=MAX_SECONDS).contains(&c.seconds)) {
            bail!("--seconds must be from 1 to {MAX_SECONDS}");
        }
        if c.competitors.contains(&Competitor::Tcp) && c.seconds.fract() != 0.0 {
            bail!(
                "--seconds {} with --competitor tcp: iperf3 counts whole seconds, give a whole number",
                c.seconds
            );
        }
        if !(c.delay.is_finite() && (0.0..=MAX_SECONDS).contains(&c.delay)) {
            bail!("--delay must be from 0 to {MAX_SECONDS} seconds");
        }
        if !(1..=MAX_ROUNDS).contains(&c.rounds) {
            bail!("--rounds must be from 1 to {MAX_ROUNDS}");
        }
        Ok(())
    }

    fn run(config: &Config) -> Result<Measured<Self>> {
        let missing = missing(config);
        if !missing.is_empty() {
            bail!("ferry lab share needs {}", missing.join("; and "));
        }
        let cpus = Cpus::pick();
        let iperf3 = crate::tools::find("iperf3");
        let version = iperf3
            .as_ref()
            .filter(|_| config.competitors.contains(&Competitor::Tcp))
            .and_then(crate::tools::version);
        // Made before any process and dropped after all of them (also on an error and Ctrl-C);
        // those made are removed if a later one fails.
        let pairs = config
            .link_rates
            .iter()
            .map(|&rate| {
                Pair::create(&netns::Spec {
                    prefix: NS_PREFIX,
                    device: "fshr",
                    net: 205,
                    rate: Some(rate),
                })
            })
            .collect::<Result<Vec<Pair>>>()?;
        let ctx = run::Ctx {
            config,
            cpus,
            iperf3,
            lab_mount_ns: netns::mount_namespace()?,
        };
        let mut rows = Vec::new();
        for round in 1..=config.rounds {
            for pair in &pairs {
                let rate = pair.rate.expect("every pair has a rate");
                for &competitor in &config.competitors {
                    note!(
                        "share: round {round} of {}, {rate}, the ferry flow beside {}",
                        config.rounds,
                        competitor.other_flow()
                    );
                    rows.push(run::one(&ctx, pair, round, competitor)?);
                }
            }
        }
        Ok(Measured {
            setup: Setup::of(config, &pairs, cpus, version),
            rows,
        })
    }

    fn run_peer(request: PeerRequest, link: &mut PeerLink) -> Result<()> {
        if link.for_agent() {
            bail!("the share experiment runs on one machine");
        }
        if !(request.limit_s.is_finite() && (0.0..=4.0 * MAX_SECONDS).contains(&request.limit_s)) {
            bail!("a share request out of range: {request:?}");
        }
        netns::private_dev_shm(request.lab_mount_ns)?;
        if let Some(cpu) = request.cpu {
            crate::pin_to(cpu)?;
        }
        match request.role {
            Role::Publish => flows::publish(&request, link),
            Role::Subscribe => flows::subscribe(&request, link),
        }
    }

    fn table(results: &Results<Self>) -> String {
        let setup = &results.config;
        let mut table = Table::new(&[
            "round",
            "link",
            "beside",
            ">ferry Mbit/s",
            ">other Mbit/s",
            ">share",
            ">retransmitted",
            ">queue events",
            ">congestion events",
        ]);
        for r in &results.rows {
            let counter = |f: fn(&PublisherCounters) -> Option<u64>| {
                let each: Vec<String> = r
                    .publishers
                    .iter()
                    .map(|p| f(p).map_or("?".to_owned(), |n| n.to_string()))
                    .collect();
                if each.is_empty() {
                    "-".to_owned()
                } else {
                    each.join(" / ")
                }
            };
            table.row(vec![
                r.round.to_string(),
                r.link_rate.clone(),
                r.competitor.other_name().to_owned(),
                format!("{:.1}", r.ferry_mbps),
                format!("{:.1}", r.other_mbps),
                format_share(r.share),
                counter(|p| p.retransmitted),
                counter(|p| p.queue_events),
                counter(|p| p.congestion_events),
            ]);
        }
        let mut out = format!(
            "a ferry flow (reliable UDP, {} KiB messages back to back) and the other flow {} s after it, both measured over the same {} s from {} s after the other flow started; share: ferry / (ferry + TCP) beside TCP, smaller / larger for two ferry flows; the publishers' counters of the first ferry flow / the second:\n",
            MESSAGE_BYTES >> 10,
            setup.delay_s,
            setup.seconds,
            setup.warmup_s
        );
        out.push_str(&table.render());
        let _ = writeln!(
            out,
            "goals: beside one TCP flow, ferry's share between {} and {}; two ferry flows, smaller / larger near 1 (at least {FERRY_GOAL})",
            TCP_GOAL.0, TCP_GOAL.1
        );
        for case in cases(&results.rows) {
            let _ = writeln!(out, "{}", case.verdict());
        }
        out
    }

    fn section(results: &Results<Self>) -> Result<Section> {
        let setup = &results.config;
        let all = cases(&results.rows);
        // One panel per link rate, in the order of the runs.
        let mut rates: Vec<(String, u64)> = Vec::new();
        for c in &all {
            if !rates.iter().any(|(r, _)| *r == c.link_rate) {
                rates.push((c.link_rate.clone(), c.link_rate_bps));
            }
        }
        let titles: Vec<String> = rates
            .iter()
            .map(|(r, _)| format!("Goodput on a {r} link"))
            .collect();
        let panels: Vec<Bars<'_>> = rates
            .iter()
            .zip(&titles)
            .map(|((rate, bps), title)| {
                let here: Vec<&Case> = all.iter().filter(|c| c.link_rate == *rate).collect();
                Bars {
                    title,
                    y_desc: "Mbit/s over the measured interval",
                    categories: here
                        .iter()
                        .map(|c| format!("beside {}", c.competitor.other_name()))
                        .collect(),
                    series: vec![
                        (
                            "ferry (first flow)".into(),
                            color(0),
                            here.iter().map(|c| c.ferry_mbps).collect(),
                        ),
                        (
                            "the other flow (TCP or the second ferry flow)".into(),
                            color(1),
                            here.iter().map(|c| c.other_mbps).collect(),
                        ),
                    ],
                    reference: Some(("link rate".to_owned(), *bps as f64 / 1e6)),
                    log_y: false,
                }
            })
            .collect();
        let svg = bar_svg(&panels, W)?;
        let verdicts: Vec<String> = all.iter().map(Case::verdict).collect();
        Ok(Section {
            plots: vec![Plot {
                file: "share.svg".to_owned(),
                svg,
                caption: format!(
                    "Goodput of the ferry flow and of the other flow on the same link, over the same {} s (the other flow started {} s after the ferry flow; the interval {} s after that){}.",
                    setup.seconds,
                    setup.delay_s,
                    setup.warmup_s,
                    if setup.rounds > 1 { "; medians of the rounds" } else { "" }
                ),
            }],
            sentence: format!(
                "A ferry flow (reliable UDP, {} KiB messages back to back) shared a rate-limited link (tbf on a veth pair between two network namespaces) with {}. The goals: beside one TCP flow ferry's share between {} and {}; two ferry flows: smaller / larger near 1 (at least {FERRY_GOAL}). {}",
                MESSAGE_BYTES >> 10,
                setup
                    .competitors
                    .iter()
                    .map(|c| c.other_flow())
                    .collect::<Vec<_>>()
                    .join(" or "),
                TCP_GOAL.0,
                TCP_GOAL.1,
                verdicts.join("; ")
            ),
        })
    }

    /// One line: ferry's share on every link and beside every competitor. No study gives this
    /// figure.
    fn summary(results: &Results<Self>) -> Vec<SummaryLine> {
        let all = cases(&results.rows);
        if all.is_empty() {
            return Vec::new();
        }
        let figures: Vec<String> = all
            .iter()
            .map(|c| {
                format!(
                    "{} beside {}: {} ({})",
                    c.link_rate,
                    c.competitor.other_flow(),
                    format_share(c.share),
                    match c.met() {
                        Some(true) => "met",
                        Some(false) => "not met",
                        None => "unknown",
                    }
                )
            })
            .collect();
        vec![SummaryLine {
            what: format!(
                "a ferry flow's share of a link (goals: beside TCP {}; two ferry flows {})",
                goal(Competitor::Tcp),
                goal(Competitor::Ferry)
            ),
            ferry: figures.join("; "),
            floor: None,
            best_peer: None,
            study: None,
        }]
    }
}

/// Results of a small made-up run, for the report's tests.
#[cfg(test)]
pub(crate) fn example() -> Results<Share> {
    let config = Config {
        rounds: 2,
        ..Config::default()
    };
    let rate = |r: &str| parse_link_rate(r).unwrap();
    let counters = |sent: u64, retransmitted: u64| PublisherCounters {
        sent,
        retransmitted: Some(retransmitted),
        queue_events: Some(3),
        congestion_events: Some(0),
    };
    let counts = |in_window: u64| Counts {
        received: in_window * 2,
        in_window,
    };
    let tcp = |mbps: f64| crate::tools::ToolResult {
        seconds: 8.0,
        delivered_bps: Some(mbps * 1e6),
        retransmits: Some(40),
        ..Default::default()
    };
    // 64 KiB × 8 over 8 s: a message in the interval is 0.065536 Mbit/s.
    let mut rows = Vec::new();
    for (round, tcp_mbps) in [(1, 50.0), (2, 60.0)] {
        rows.push(Row::of(
            round,
            Competitor::Ferry,
            rate("100mbit"),
            8.0,
            &[counts(700), counts(680)],
            vec![counters(1500, 12), counters(1400, 9)],
            None,
        ));
        rows.push(Row::of(
            round,
            Competitor::Tcp,
            rate("100mbit"),
            8.0,
            &[counts(600)],
            vec![counters(1300, 20)],
            Some(&tcp(tcp_mbps)),
        ));
        rows.push(Row::of(
            round,
            Competitor::Ferry,
            rate("1gbit"),
            8.0,
            &[counts(7000), counts(5000)],
            vec![counters(15000, 2), counters(11000, 1)],
            None,
        ));
        rows.push(Row::of(
            round,
            Competitor::Tcp,
            rate("1gbit"),
            8.0,
            &[counts(2000)],
            vec![counters(4000, 0)],
            Some(&tcp(800.0)),
        ));
    }
    Results::new(
        crate::Machine::probe(),
        config.clone(),
        Measured {
            setup: Setup::of(&config, &[], Cpus::pick(), Some("iperf 3.12".to_owned())),
            rows,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_results_read_back_and_draw() {
        let results = example();
        let value = serde_json::to_value(&results).unwrap();
        assert_eq!(value["rows"][0]["competitor"], "ferry");
        assert_eq!(value["rows"][1]["competitor"], "tcp");
        assert_eq!(value["rows"][1]["link_rate"], "100mbit");
        assert_eq!(value["request"]["link_rates"][1], "1gbit");
        assert_eq!(value["rows"][0]["publishers"][1]["retransmitted"], 9);
        let back = Results::<Share>::from_value(value).unwrap();
        assert_eq!(back.rows.len(), 8);
        // 700 messages of 64 KiB over 8 s.
        assert!((back.rows[0].ferry_mbps - 45.8752).abs() < 1e-9);
        let share = back.rows[0].share.unwrap();
        assert!((share - 680.0 / 700.0).abs() < 1e-9, "{share}");
        // Beside TCP: ferry / (ferry + TCP), 39.3216 / (39.3216 + 50).
        let share = back.rows[1].share.unwrap();
        assert!((share - 39.3216 / 89.3216).abs() < 1e-9, "{share}");

        let all = cases(&back.rows);
        assert_eq!(all.len(), 4);
        assert_eq!(all[0].rounds, 2);
        assert_eq!(all[0].met(), Some(true), "0.97 is near 1");
        // Beside TCP on 100mbit: 0.44 and 0.40, median 0.42: met.
        assert_eq!(all[1].met(), Some(true));
        // 1gbit: 5000 / 7000 = 0.71 < 0.8; beside TCP 131 / 931 = 0.14.
        assert_eq!(all[2].met(), Some(false));
        assert_eq!(all[3].met(), Some(false));

        let table = Share::table(&back);
        assert!(
            table.contains("ferry's share between 0.4 and 0.6"),
            "{table}"
        );
        assert!(table.contains("smaller / larger near 1"), "{table}");
        assert!(
            table.contains("100mbit, two ferry flows: 45.9 and 44.6 Mbit/s, smaller / larger 0.97 (median of 2 rounds; goal at least 0.8): met"),
            "{table}"
        );
        assert!(table.contains("1gbit, beside one TCP flow"), "{table}");
        let line = table
            .lines()
            .find(|l| l.starts_with("2 ") && l.contains("1gbit") && l.contains("TCP"))
            .expect("round 2's 1gbit TCP line");
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            cells,
            ["2", "1gbit", "TCP", "131.1", "800.0", "0.14", "0", "3", "0"]
        );
        let two = table
            .lines()
            .find(|l| l.starts_with("1 ") && l.contains("second ferry flow"))
            .expect("round 1's line of two ferry flows");
        assert!(
            two.contains(" 12 / 9 ") && two.contains(" 3 / 3 ") && two.ends_with(" 0 / 0"),
            "{two}"
        );

        let section = Share::section(&back).unwrap();
        assert_eq!(section.plots.len(), 1);
        assert_eq!(section.plots[0].file, "share.svg");
        assert!(section.plots[0].svg.contains("beside TCP"));
        assert!(section.plots[0].svg.contains("1gbit"));
        assert!(section.sentence.contains("not met"), "{}", section.sentence);

        let summary = Share::summary(&back);
        assert_eq!(summary.len(), 1);
        assert!(
            summary[0]
                .ferry
                .starts_with("100mbit beside a second ferry flow: 0.97 (met)"),
            "{}",
            summary[0].ferry
        );
        assert!(summary[0].what.contains("between 0.4 and 0.6"));
    }

    #[test]
    fn configurations_are_checked() {
        assert!(Share::validate(&Config::default()).is_ok());
        let rate = |r: &str| parse_link_rate(r).unwrap();
        for (bad, option) in [
            (
                Config {
                    competitors: Vec::new(),
                    ..Config::default()
                },
                "--competitor",
            ),
            (
                Config {
                    competitors: vec![Competitor::Tcp, Competitor::Tcp],
                    ..Config::default()
                },
                "--competitor: tcp is listed twice",
            ),
            (
                Config {
                    link_rates: Vec::new(),
                    ..Config::default()
                },
                "--link-rate",
            ),
            (
                Config {
                    link_rates: vec![rate("100mbit"), rate("100M")],
                    ..Config::default()
                },
                "--link-rate: 100mbit is listed twice",
            ),
            (
                Config {
                    seconds: 0.5,
                    ..Config::default()
                },
                "--seconds",
            ),
            (
                Config {
                    seconds: f64::NAN,
                    ..Config::default()
                },
                "--seconds",
            ),
            (
                Config {
                    seconds: 2.5,
                    ..Config::default()
                },
                "--seconds 2.5 with --competitor tcp",
            ),
            (
                Config {
                    delay: -1.0,
                    ..Config::default()
                },
                "--delay",
            ),
            (
                Config {
                    delay: f64::INFINITY,
                    ..Config::default()
                },
                "--delay",
            ),
            (
                Config {
                    rounds: 0,
                    ..Config::default()
                },
                "--rounds",
            ),
        ] {
            let e = Share::validate(&bad).unwrap_err().to_string();
            assert!(e.contains(option), "{bad:?}: {e}");
        }
        // Fractions of a second are fine between ferry flows alone.
        assert!(Share::validate(&Config {
            competitors: vec![Competitor::Ferry],
            seconds: 2.5,
            delay: 0.0,
            ..Config::default()
        })
        .is_ok());
        let back: Config =
            serde_json::from_str(r#"{"competitors": ["tcp"], "link_rates": ["100M"]}"#).unwrap();
        assert_eq!(back.competitors, [Competitor::Tcp]);
        assert_eq!(back.link_rates, [rate("100mbit")]);
        assert_eq!((back.seconds, back.delay, back.rounds), (8.0, 4.0, 1));
        assert!(serde_json::from_str::<Config>(r#"{"competitor": ["tcp"]}"#).is_err());
        assert!(serde_json::from_str::<Config>(r#"{"link_rates": ["fast"]}"#).is_err());
    }

    #[test]
    fn the_two_sides_messages_read_back() {
        let line = serde_json::to_string(&Command::Window {
            from_ns: 5,
            to_ns: 9,
        })
        .unwrap();
        assert!(matches!(
            serde_json::from_str::<Command>(&line).unwrap(),
            Command::Window {
                from_ns: 5,
                to_ns: 9
            }
        ));
        let line = serde_json::to_string(&Report::Stopped(PublisherCounters {
            sent: 7,
            retransmitted: None,
            queue_events: Some(2),
            congestion_events: Some(1),
        }))
        .unwrap();
        assert!(matches!(
            serde_json::from_str::<Report>(&line).unwrap(),
            Report::Stopped(PublisherCounters {
                sent: 7,
                retransmitted: None,
                queue_events: Some(2),
                ..
            })
        ));
        let line = serde_json::to_string(&Report::Counts(Counts {
            received: 3,
            in_window: 2,
        }))
        .unwrap();
        assert!(matches!(
            serde_json::from_str::<Report>(&line).unwrap(),
            Report::Counts(Counts {
                received: 3,
                in_window: 2
            })
        ));
    }
}
