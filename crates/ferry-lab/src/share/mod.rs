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
mod options;
mod run;

use crate::chart::{bar_svg, color, xy_chart, Bars, Plot, Section, SummaryLine, XySeries, W};
use crate::error::{bail, note, Result};
use crate::experiment::{head, Experiment, Measured, Results};
use crate::netns::{self, Pair};
use crate::peer::PeerLink;
use crate::table::Table;
use figures::{cases, format_share, goal, typical, Case};
pub use options::*;
use std::fmt::Write as _;

impl Experiment for Share {
    head!(
        "share",
        "Sharing a link: a ferry flow beside a second ferry flow or TCP"
    );

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
        let spec = netns::Spec {
            prefix: NS_PREFIX,
            device: "fshr",
            net: 205,
            rate: None,
        };
        let pairs = Pair::create_per_rate(&spec, &config.link_rates)?;
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
        let bars = Plot {
            file: "share.svg".to_owned(),
            svg,
            caption: format!(
                "Goodput of the ferry flow and of the other flow on the same link, over the same {} s (the other flow started {} s after the ferry flow; the interval {} s after that){}.",
                setup.seconds,
                setup.delay_s,
                setup.warmup_s,
                if setup.rounds > 1 { "; medians of the rounds" } else { "" }
            ),
        };
        let mut plots = vec![bars];
        for case in &all {
            if let Some(run) = typical(&results.rows, case) {
                plots.push(over_time(setup, case, run)?);
            }
        }
        Ok(Section {
            plots,
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

/// The goodput of every flow of `run` over time, with when the other flow started and the
/// measured interval in the caption.
fn over_time(setup: &Setup, case: &Case, run: &Row) -> Result<Plot> {
    let series: Vec<XySeries> = run
        .timeline
        .iter()
        .map(|f| {
            let name = match f.flow.as_str() {
                "ferry" => "ferry (first flow)".to_owned(),
                "TCP" => "TCP (what iperf3's socket took)".to_owned(),
                other => other.to_owned(),
            };
            let points = f.at_s.iter().zip(&f.mbps).map(|(&t, &m)| (t, m, None));
            (name, points.collect())
        })
        .collect();
    let beside = case.competitor.other_flow();
    let title = format!(
        "Goodput over time on a {} link beside {beside}, round {}",
        case.link_rate, run.round
    );
    let svg = xy_chart(
        &title,
        "seconds from the first ferry flow's start",
        &format!("Mbit/s per {} s", BIN.as_secs_f64()),
        &series,
        false,
        false,
        Some(("link rate", case.link_rate_bps as f64 / 1e6)),
    )?;
    let from = setup.delay_s + setup.warmup_s;
    Ok(Plot {
        file: format!(
            "share-{}-{}.svg",
            case.link_rate,
            case.competitor.name()
        ),
        svg,
        caption: format!(
            "Each flow's goodput per {} s in round {} on the {} link beside {beside} (of the rounds, the one whose share, {}, is nearest their median): the other flow started at {} s, the measured interval ran from {from} to {} s. A ferry flow: the messages its subscriber received; TCP: what iperf3's client socket took, which the link's queue delays by a few milliseconds.",
            BIN.as_secs_f64(),
            run.round,
            case.link_rate,
            format_share(run.share),
            setup.delay_s,
            from + setup.seconds,
        ),
    })
}

/// Results of a small made-up run, for the report's tests.
#[cfg(test)]
pub(crate) fn example() -> Results<Share> {
    let config = Config {
        rounds: 2,
        ..Config::default()
    };
    let rate = |r: &str| crate::netns::parse_link_rate(r).unwrap();
    let counters = |sent: u64, retransmitted: u64| PublisherCounters {
        sent,
        retransmitted: Some(retransmitted),
        queue_events: Some(3),
        congestion_events: Some(0),
    };
    // Each ferry flow's messages per quarter second: from its start (the first 1 s after the
    // first ferry flow's), even, and the first flow's rate halved after the other started.
    let counts = |in_window: u64, flow: usize| {
        let per_bin = (in_window / 32) as u32;
        let bins_from = 1_000_000_000 / BIN.as_nanos() as u64 * (1 + 4 * flow as u64);
        let bins = (0..56)
            .map(|i| {
                if flow == 0 && i < 16 {
                    2 * per_bin
                } else {
                    per_bin
                }
            })
            .collect();
        Counts {
            received: in_window * 2,
            in_window,
            bins_from,
            bins,
        }
    };
    let tcp = |mbps: f64| crate::tools::ToolResult {
        seconds: 8.0,
        delivered_bps: Some(mbps * 1e6),
        retransmits: Some(40),
        intervals: (0..40)
            .map(|i| (i as f64 * 0.25, (i + 1) as f64 * 0.25, mbps * 1e6))
            .collect(),
        ..Default::default()
    };
    let clock = Clock {
        first_ns: 1_000_000_000,
        tcp_ns: Some(5_000_000_000),
    };
    // 64 KiB × 8 over 8 s: a message in the interval is 0.065536 Mbit/s. Each round and link:
    // ferry's two flows, then one ferry flow beside TCP; each flow with its messages in the
    // interval and its publisher's sent and retransmitted messages, TCP with its Mbit/s.
    use Competitor::{Ferry, Tcp};
    let mut rows = Vec::new();
    for (round, tcp_mbps) in [(1, 50.0), (2, 60.0)] {
        for (competitor, link, flows, tcp_mbps) in [
            (
                Ferry,
                "100mbit",
                vec![(700, 1500, 12), (680, 1400, 9)],
                None,
            ),
            (Tcp, "100mbit", vec![(600, 1300, 20)], Some(tcp_mbps)),
            (
                Ferry,
                "1gbit",
                vec![(7000, 15000, 2), (5000, 11000, 1)],
                None,
            ),
            (Tcp, "1gbit", vec![(2000, 4000, 0)], Some(800.0)),
        ] {
            let in_window: Vec<Counts> = flows
                .iter()
                .enumerate()
                .map(|(i, f)| counts(f.0, i))
                .collect();
            let publishers = flows.iter().map(|f| counters(f.1, f.2)).collect();
            let tcp = tcp_mbps.map(tcp);
            rows.push(Row::of(
                round,
                competitor,
                rate(link),
                8.0,
                Flows {
                    counts: &in_window,
                    publishers,
                    tcp: tcp.as_ref(),
                    clock,
                },
            ));
        }
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
mod tests;
