//! What a run records (its setup and rows) and the table printed on the terminal.

use super::options::{Config, ThroughputSubject, TCP_MSS, UDP_MTU};
use super::wire::Latency;
use crate::baseline::BASELINE_GAP;
use crate::error::Result;
use crate::netns::{self, Pair};
use crate::stats::median;
use crate::subject::Subject;
use crate::table::Table;
use crate::units::format_size;
use crate::Pinning;
use ferry::{Delivery, WaitStrategy};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a throughput run was made.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    pub(super) transports: Vec<Subject>,
    pub(super) transport_descriptions: BTreeMap<String, String>,
    pub(super) sizes: Vec<usize>,
    #[schemars(with = "crate::args::DeliverySchema")]
    pub(super) delivery: Delivery,
    pub(super) loss_percent: f64,
    /// The impairment of the publisher's node, for ferry's UDP transports (as FERRY_IMPAIR
    /// would say it).
    pub(super) impair: Option<String>,
    pub(super) impair_applies_to: String,
    pub(super) duration_s: f64,
    /// iperf3 and sockperf run whole seconds.
    pub(super) tool_duration_s: u64,
    pub(super) rounds: usize,
    #[schemars(with = "crate::args::WaitSchema")]
    pub(super) wait: WaitStrategy,
    pub(super) pinning: Pinning,
    pub(super) udp_mtu: usize,
    pub(super) payload: String,
    pub(super) rate_interval: String,
    pub(super) lost: String,
    pub(super) processes: String,
    pub(super) socket_buffers: SocketBuffers,
    /// Versions of the third-party tools found (null: found, version unknown).
    pub(super) tools: BTreeMap<String, Option<String>>,
    /// `--hosts 2`: the links and how their packets were counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) link: Option<LinkSetup>,
    pub(super) started_unix_s: u64,
}

/// The links of `--hosts 2`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct LinkSetup {
    pub hosts: u8,
    /// One pair of namespaces per link rate.
    pub links: Vec<Link>,
    pub placement: String,
    pub discovery: String,
    /// How `link_packets` and `link_drops` were read.
    pub link_packets: String,
    /// How `min_link_packets` is reckoned per transport.
    pub min_link_packets: String,
    pub note: String,
}

/// One link: two namespaces, the veth pair between them, the tbf on both ends.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Link {
    pub link_rate: String,
    pub link_rate_bps: u64,
    pub namespaces: crate::hubs::Sides,
    pub veth: crate::hubs::Sides,
    pub addresses: crate::hubs::Sides,
    pub tbf: crate::hubs::Tbf,
}

impl Link {
    /// The link of `pair`, if it has a rate.
    pub(crate) fn of(pair: &Pair) -> Option<Link> {
        let sides = |v: [String; 2]| crate::hubs::Sides {
            a: v[0].clone(),
            b: v[1].clone(),
        };
        let rate = pair.rate?;
        Some(Link {
            link_rate: rate.name(),
            link_rate_bps: rate.bps,
            namespaces: sides(pair.ns.clone()),
            veth: sides(pair.dev.clone()),
            addresses: sides(pair.addr.map(|a| a.to_string())),
            tbf: crate::hubs::Tbf {
                burst_bytes: rate.burst_bytes(),
                latency_ms: netns::TBF_LATENCY_MS,
                on: "both veth ends (egress of each)".to_owned(),
                commands: pair.tc.clone(),
            },
        })
    }
}

pub(super) fn link_setup(pairs: &[Pair]) -> LinkSetup {
    LinkSetup {
        hosts: 2,
        links: pairs.iter().filter_map(Link::of).collect(),
        placement: "the publisher (a peer process) in namespace A, the subscriber (another) in B, both started with ip netns exec; iperf3's client in A, its server in B".to_owned(),
        discovery: format!("ferry: a static peer list: each side's discovery names the other's address (port {})", crate::TWO_HOST_DISCOVERY_PORT),
        link_packets: "the counters of the tbf on A's veth end (tc -s -j qdisc show, packets sent on and dropped; a GSO packet counts as its segments), read just before the publisher starts and after it has closed (iperf3: before its server starts and after its client ended); they include what else A sent meanwhile (ferry's discovery and heartbeats, ARP, iperf3's control connection)".to_owned(),
        min_link_packets: format!("the fewest packets the delivered messages need: ferry udp4, for each delivered message ceil(size / {}) datagrams ({} = 1472 − its {}-byte DATA header; udp4-key {} bytes fewer), or, for messages small enough that two share a datagram, ceil(messages × (size + 4) / {0}) (batched, each behind a 4-byte length); raw-udp4, ceil((size + 8) / 1480) IP packets per delivered datagram; iperf3 (UDP), one per datagram delivered; iperf3-tcp, ceil(bytes delivered / {TCP_MSS}) (the MSS); extra = link packets over that, in percent", UDP_MTU - 28 - ferry::UDP_DATA_HEADER, UDP_MTU - 28 - ferry::UDP_DATA_HEADER, ferry::UDP_DATA_HEADER, ferry::UDP_SEAL_OVERHEAD),
        note: "both namespaces run on this machine's CPUs: the link is a veth pair, not a wire".to_owned(),
    }
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub(super) struct SocketBuffers {
    pub(super) rmem_default: Option<u64>,
    pub(super) rmem_max: Option<u64>,
    pub(super) wmem_default: Option<u64>,
    pub(super) wmem_max: Option<u64>,
}

crate::choice! {
    /// The delivery a row ran with: ferry's, or none (plain UDP and the tools).
    pub enum RowDelivery: "delivery" / "deliveries" {
        Reliable = "reliable",
        Latest = "latest",
        None = "none",
    }
}

impl From<Delivery> for RowDelivery {
    fn from(d: Delivery) -> RowDelivery {
        match d {
            Delivery::Reliable => RowDelivery::Reliable,
            Delivery::Latest => RowDelivery::Latest,
        }
    }
}

/// One transport at one size in one round.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    pub transport: Subject,
    pub size_bytes: usize,
    /// UDP payload bytes per datagram (null for shared memory).
    pub datagram_bytes: Option<usize>,
    /// The run's delivery for ferry and the other systems; "none" for plain UDP and the tools.
    pub delivery: RowDelivery,
    /// Loss injected on this row's datagrams.
    pub loss_percent: f64,
    pub round: usize,
    pub duration_s: Option<f64>,
    pub messages_sent: Option<u64>,
    pub messages_delivered: Option<u64>,
    pub messages_per_s: Option<f64>,
    /// Payload bits delivered per second, in Gbit/s.
    pub delivered_gbps: Option<f64>,
    /// messages_sent − messages_delivered.
    pub lost: Option<u64>,
    pub retransmitted: Option<u64>,
    pub kernel_drops: Option<u64>,
    /// Seconds the publisher spent sending.
    pub send_s: Option<f64>,
    pub out_of_order: Option<u64>,
    pub checked_messages: Option<u64>,
    /// Seconds dropping the ferry publisher took after the run (a reliable UDP publisher
    /// lingers until its subscribers have reported everything received).
    pub publisher_close_s: Option<f64>,
    /// delivered_gbps over each baseline's, at the same size, in the same round (and on the same
    /// link), from the baseline's run that ended nearest in time to this one: its own row, or a
    /// run made beside a row (`references`).
    pub ratios: BTreeMap<Subject, f64>,
    /// When this run ended, in seconds from the start of the experiment's first run (null for a
    /// skipped row, and in results written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_s: Option<f64>,
    /// Baselines run again right after this row, because their run at this size in this round
    /// ended more than 10 s before this one's (the machine's speed changes within minutes).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub references: BTreeMap<Subject, Reference>,
    /// `--hosts 2`: the link's rate (`100mbit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rate_bps: Option<u64>,
    /// Packets the tbf on the sender's end passed on during the run (null on one host, or when
    /// they could not be read: see the note).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_packets: Option<u64>,
    /// Packets that tbf dropped (its queue was full).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_drops: Option<u64>,
    /// The fewest packets the delivered messages need (see the setup's `link`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_link_packets: Option<u64>,
    /// link_packets over min_link_packets, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_link_packets_percent: Option<f64>,
    /// `--period`: seconds between messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_s: Option<f64>,
    /// `--period`: the median, 99th percentile and largest per-message latency, from the
    /// publisher's send call to the subscriber's receipt of the whole message, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p99_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_max_ms: Option<f64>,
    /// `--period`: the time a message's payload takes on the link at its rate (size × 8 / rate),
    /// ms (the tbf lets its burst through at once, so a message that finds the link idle can
    /// arrive that much sooner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serialization_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A baseline's run made beside a row (see `Row::references`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Reference {
    /// Payload bits delivered per second, in Gbit/s.
    pub delivered_gbps: f64,
    /// When the run ended, on the clock of `Row::ended_s`.
    pub ended_s: f64,
}

impl Row {
    pub(super) fn new(
        args: &Config,
        transport: Subject,
        size: usize,
        round: usize,
        m: Option<Measurement>,
        skipped: Option<String>,
    ) -> Row {
        let mut row = Row {
            transport,
            size_bytes: size,
            datagram_bytes: transport.datagram_bytes(size),
            delivery: if transport.honours_delivery() {
                args.delivery.into()
            } else {
                RowDelivery::None
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
            ended_s: None,
            references: BTreeMap::new(),
            link_rate: None,
            link_rate_bps: None,
            link_packets: None,
            link_drops: None,
            min_link_packets: None,
            extra_link_packets_percent: None,
            period_s: None,
            latency_p50_ms: None,
            latency_p99_ms: None,
            latency_max_ms: None,
            serialization_ms: None,
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
        if let Some(l) = m.latency {
            row.period_s = args.period;
            row.latency_p50_ms = Some(l.p50_ns as f64 / 1e6);
            row.latency_p99_ms = Some(l.p99_ns as f64 / 1e6);
            row.latency_max_ms = Some(l.max_ns as f64 / 1e6);
        }
        if let Some(c) = m.link {
            row.link_packets = Some(c.packets);
            row.link_drops = Some(c.drops);
            row.min_link_packets =
                transport.min_link_packets(size, m.messages_delivered, m.bytes_delivered);
            row.extra_link_packets_percent = row
                .min_link_packets
                .filter(|&min| min > 0)
                .map(|min| (c.packets as f64 - min as f64) * 100.0 / min as f64);
        }
        row.note = m.note;
        row
    }

    /// One line for the progress notes.
    pub(super) fn brief(&self) -> String {
        if let Some(s) = &self.skipped {
            return s.clone();
        }
        let latency = match (self.latency_p50_ms, self.latency_p99_ms) {
            (Some(p50), Some(p99)) => format!(", latency p50 {p50:.1} ms p99 {p99:.1} ms"),
            _ => String::new(),
        };
        format!(
            "{} Gbit/s, {} msg/s, delivered {}{latency}",
            fmt_opt(self.delivered_gbps, 2),
            fmt_rate(self.messages_per_s),
            delivered_share(self)
        )
    }
}

pub(super) fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

pub(super) fn fmt_rate(v: Option<f64>) -> String {
    match v {
        None => "-".to_owned(),
        Some(v) if v >= 1e6 => format!("{:.2} M", v / 1e6),
        Some(v) if v >= 1e3 => format!("{:.1} k", v / 1e3),
        Some(v) => format!("{v:.0}"),
    }
}

pub(super) fn delivered_share(row: &Row) -> String {
    match (row.messages_delivered, row.messages_sent) {
        (Some(d), Some(s)) if s > 0 => format!("{d}/{s} ({:.2} %)", d as f64 * 100.0 / s as f64),
        (Some(d), _) => d.to_string(),
        _ => "-".to_owned(),
    }
}

/// Ratios of each row to its baselines at the same size, in the same round and on the same link:
/// against the baseline's run that ended nearest in time to the row's, its own row's or one made
/// beside a row (`Row::references`). Rows without times (older results) have only the baseline's
/// own row to go by.
pub(super) fn add_ratios(rows: &mut [Row]) {
    type Key = (Option<u64>, Subject, usize, usize);
    // Every run of each transport with a rate: when it ended, and what it delivered.
    let mut runs: BTreeMap<Key, Vec<(Option<f64>, f64)>> = BTreeMap::new();
    for r in rows.iter() {
        let key = |t: Subject| (r.link_rate_bps, t, r.size_bytes, r.round);
        if let Some(g) = r.delivered_gbps.filter(|&g| g > 0.0) {
            runs.entry(key(r.transport))
                .or_default()
                .push((r.ended_s, g));
        }
        for (&b, reference) in &r.references {
            if reference.delivered_gbps > 0.0 {
                runs.entry(key(b))
                    .or_default()
                    .push((Some(reference.ended_s), reference.delivered_gbps));
            }
        }
    }
    for row in rows.iter_mut() {
        let Some(mine) = row.delivered_gbps else {
            continue;
        };
        for &b in row.transport.baselines() {
            let Some(candidates) = runs.get(&(row.link_rate_bps, b, row.size_bytes, row.round))
            else {
                continue;
            };
            let apart = |ended: Option<f64>| match (ended, row.ended_s) {
                (Some(e), Some(t)) => (e - t).abs(),
                _ => f64::INFINITY,
            };
            let nearest = candidates
                .iter()
                .min_by(|x, y| apart(x.0).total_cmp(&apart(y.0)));
            if let Some(&(_, base)) = nearest {
                row.ratios.insert(b, mine / base);
            }
        }
    }
}

/// The median over the rounds of `field` for `transport` at `size`, from the rows that have it
/// above zero.
pub(super) fn median_of(
    rows: &[Row],
    transport: Subject,
    size: usize,
    field: fn(&Row) -> Option<f64>,
) -> Option<f64> {
    median(
        rows.iter()
            .filter(|r| r.transport == transport && r.size_bytes == size)
            .filter_map(field)
            .filter(|v| *v > 0.0)
            .collect(),
    )
}

pub(super) fn render_table(args: &Config, pinning: &Pinning, rows: &[Row]) -> String {
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
                .filter(|r| r.transport == t && r.size_bytes == size)
                .collect();
            let Some(first) = mine.first() else { continue };
            if let Some(s) = &first.skipped {
                let mut cells = vec![t.name().to_owned(), format_size(size)];
                cells.extend(vec![String::new(); 8]);
                cells.push(s.clone());
                table.row(cells);
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
                            .filter_map(|r| r.ratios.get(b).copied())
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
    let again: usize = rows.iter().map(|r| r.references.len()).sum();
    format!(
        "\nThroughput, {} delivery{}, {:.1} s per run, {} interleaved rounds (Gbit/s and msg/s: median of rounds; delivered, lost, retransmitted, kernel drops: all rounds; ratios: median over rounds of each round's ratio to the baseline run nearest in time{}); {}.\n\n{}",
        args.delivery.name(),
        args.loss
            .map(|l| format!(", {l} % loss injected on ferry UDP"))
            .unwrap_or_default(),
        args.duration,
        args.rounds,
        match again {
            0 => String::new(),
            n => format!(
                "; {n} baseline run{} repeated right after a row whose baseline's run had ended more than {} s before it",
                if n == 1 { "" } else { "s" },
                BASELINE_GAP.as_secs()
            ),
        },
        pinning.describe(),
        table.render()
    )
}

/// What one measurement gave (counts a transport cannot give are `None`).
#[derive(Debug, Default)]
pub(super) struct Measurement {
    pub(super) messages_sent: Option<u64>,
    pub(super) messages_delivered: Option<u64>,
    pub(super) bytes_delivered: Option<u64>,
    /// The interval the rates are taken over.
    pub(super) seconds: f64,
    /// Seconds the publisher spent sending (ferry, raw-udp4).
    pub(super) send_seconds: Option<f64>,
    /// Delivered payload bits per second when the tool reports it itself.
    pub(super) delivered_bps: Option<f64>,
    pub(super) lost: Option<u64>,
    pub(super) retransmitted: Option<u64>,
    pub(super) kernel_drops: Option<u64>,
    pub(super) out_of_order: Option<u64>,
    pub(super) checked_messages: Option<u64>,
    pub(super) ferry_lost: Option<u64>,
    pub(super) ferry_skipped: Option<u64>,
    /// Seconds dropping the ferry publisher took.
    pub(super) close_seconds: Option<f64>,
    /// Across a link: what the tbf on the sender's end passed on and dropped during the run.
    pub(super) link: Option<netns::QdiscCounts>,
    /// `--period`: per-message latency.
    pub(super) latency: Option<Latency>,
    pub(super) note: Option<String>,
}

impl Measurement {
    pub(super) fn add_note(&mut self, text: String) {
        self.note = Some(match self.note.take() {
            Some(n) => format!("{n}; {text}"),
            None => text,
        });
    }
}
