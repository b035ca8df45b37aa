//! `ferry topics` and `ferry stats`: what the control segments of live topics say.

use clap::Args;
use ferry::admin::{
    DiscoveryRefusals, PublisherStats, Refusal, Refusals, SubscriberStats, TopicSnapshot,
};
use ferry::service::{ServiceCounters, ServiceTopic};
use std::collections::BTreeMap;

use serde::Serialize;

use ferry_cmd::error::{bail, note, Result};
use ferry_cmd::signal;
use ferry_cmd::table::{print_out, Table};
use ferry_cmd::units::{format_size, parse_domain};

#[derive(Debug, Args)]
pub struct TopicsArgs {
    /// Only topics of this domain [default: every domain: FERRY_DOMAIN is not read here]
    #[arg(long, value_name = "D", value_parser = parse_domain)]
    pub domain: Option<String>,

    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,

    /// Also listen this many seconds for UDP endpoints that other hosts announce (needs
    /// --domain, and discovery switched on: FERRY_DISCOVERY=multicast or FERRY_PEERS)
    #[arg(long, value_name = "S")]
    pub remote: Option<f64>,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Only this topic [default: every topic]
    pub topic: Option<String>,

    /// Only topics of this domain [default: every domain: FERRY_DOMAIN is not read here]
    #[arg(long, value_name = "D", value_parser = parse_domain)]
    pub domain: Option<String>,

    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

/// A topic as printed with `--json`.
#[derive(Serialize)]
struct TopicJson {
    domain: String,
    topic: String,
    transport: &'static str,
    /// The topic's type, when an end declared one.
    #[serde(rename = "type")]
    topic_type: Option<TypeJson>,
    /// Why the type cannot be read (a damaged record), when it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    type_error: Option<String>,
    publishers: Vec<PublisherJson>,
    subscribers: Vec<SubscriberJson>,
}

#[derive(Serialize)]
struct TypeJson {
    name: String,
    encoding: &'static str,
    schema_encoding: &'static str,
    schema_bytes: usize,
    /// The type's hash (16 hex digits), which ends compare.
    hash: String,
}

impl From<&ferry::TopicType> for TypeJson {
    fn from(t: &ferry::TopicType) -> TypeJson {
        TypeJson {
            name: t.name().to_owned(),
            encoding: t.encoding().name(),
            schema_encoding: t.encoding().schema_encoding(),
            schema_bytes: t.schema().len(),
            hash: format!("{:016x}", t.hash()),
        }
    }
}

/// A topic's type as the table shows it.
fn type_cell(t: &TopicSnapshot) -> String {
    match &t.topic_type {
        Ok(Some(ty)) => format!("{} ({})", ty.name(), ty.encoding()),
        Ok(None) => "-".to_owned(),
        Err(_) => "(damaged)".to_owned(),
    }
}

/// What the JSON of a publisher and of a subscriber begin with: its slot, who holds it, and
/// how it is reached.
#[derive(Serialize)]
struct EndJson {
    slot: usize,
    node: String,
    pid: u32,
    alive: bool,
    delivery: &'static str,
    transport: &'static str,
    /// UDP through a multicast group.
    multicast: bool,
    udp: Option<String>,
}

/// The `EndJson` of a `PublisherStats` or a `SubscriberStats` (which name these fields alike).
macro_rules! end_json {
    ($stats:expr) => {
        EndJson {
            slot: $stats.slot,
            node: $stats.node.clone(),
            pid: $stats.pid,
            alive: $stats.alive,
            delivery: delivery($stats.reliable),
            transport: $stats.transport,
            multicast: $stats.multicast,
            udp: $stats.udp.map(|a| a.to_string()),
        }
    };
}

#[derive(Serialize)]
struct PublisherJson {
    #[serde(flatten)]
    end: EndJson,
    ring_bytes: u64,
    max_message_bytes: u64,
    sent: u64,
    bytes: u64,
    waits: u64,
    timeouts: u64,
    evictions: u64,
    retransmitted: u64,
    kernel_drops: u64,
    send_errors: u64,
    /// Control datagrams refused: "total" and one count per reason.
    refused: BTreeMap<&'static str, u64>,
    repairs_deferred: u64,
    challenges_withheld: u64,
    discovery_refused: BTreeMap<&'static str, u64>,
    /// UDP: repairs apart from new data, and the congestion controller (reliable delivery)
    /// or the rate cap.
    repair_bytes: u64,
    repairs_suppressed: u64,
    pacing_rate_bytes_per_s: u64,
    bottleneck_rate_bytes_per_s: u64,
    min_rtt_ns: u64,
    /// Another flow's queue that the controller's back-offs could not drain, counted as part
    /// of the path (ns).
    foreign_queue_ns: u64,
    paced_waits: u64,
    window_waits: u64,
    congestion_events: u64,
    noise_loss_events: u64,
    queue_events: u64,
    /// UDP: data datagrams sent, and how many of them carried several messages (and how many).
    datagrams: u64,
    batches: u64,
    batched_messages: u64,
    /// UDP: messages a latest subscriber was left out of, one per message and subscriber (it
    /// read slower than the others, or sat behind a slower path).
    left_out: u64,
    /// `--deadline`: periods that passed without a send.
    deadline_missed: u64,
    /// UDP: subscribers on other hosts left out for declaring another type.
    other_type: u64,
}

#[derive(Serialize)]
struct SubscriberJson {
    #[serde(flatten)]
    end: EndJson,
    received: u64,
    bytes: u64,
    skipped: u64,
    waits: u64,
    lost: u64,
    /// Datagrams refused: "total" and one count per reason.
    refused: BTreeMap<&'static str, u64>,
    kernel_drops: u64,
    evicted: u64,
    replies_withheld: u64,
    sessions_evicted: u64,
    discovery_refused: BTreeMap<&'static str, u64>,
    /// `--deadline`: periods that passed without a message.
    deadline_missed: u64,
    /// UDP: publishers on other hosts refused for declaring another type.
    other_type: u64,
    /// When the subscriber is a service's end (the server on `.srv/<service>/req`, a client on
    /// `.srv/<service>/rsp/<id>`): its service counters.
    #[serde(skip_serializing_if = "Option::is_none")]
    service: Option<ServiceJson>,
}

/// A service end's counters (`ferry stats --json`).
#[derive(Serialize)]
struct ServiceJson {
    role: &'static str,
    service: String,
    requests: u64,
    responses: u64,
    /// Server: answers dropped because their client had gone.
    dropped: u64,
    /// Server: requests refused as larger than it takes.
    refused: u64,
    /// Client: calls that got no answer in time.
    timeouts: u64,
    /// Client: requests ended because the server went away.
    server_gone: u64,
    /// Malformed requests (server); malformed, misdirected or late responses (client).
    malformed: u64,
}

impl ServiceJson {
    fn of(topic: &str, s: &SubscriberStats) -> Option<ServiceJson> {
        let (role, service) = match ServiceTopic::parse(topic)? {
            ServiceTopic::Requests { service } => ("server", service),
            ServiceTopic::Responses { service, .. } => ("client", service),
            _ => return None,
        };
        let c = ServiceCounters::from_raw(role == "server", &s.service);
        Some(ServiceJson {
            role,
            service,
            requests: c.requests,
            responses: c.responses,
            dropped: c.dropped,
            refused: c.refused,
            timeouts: c.timeouts,
            server_gone: c.server_gone,
            malformed: c.malformed,
        })
    }
}

fn discovery_map(d: &DiscoveryRefusals) -> BTreeMap<&'static str, u64> {
    BTreeMap::from([
        ("malformed", d.malformed),
        ("not-allowed", d.not_allowed),
        ("over-limit", d.over_limit),
        ("unauthenticated", d.unauthenticated),
        ("total", d.total()),
    ])
}

/// Refusal counters by reason, with their total, for the JSON output (and the monitor's).
pub(super) fn refusal_map(r: &Refusals) -> BTreeMap<&'static str, u64> {
    let mut m: BTreeMap<&'static str, u64> =
        Refusal::ALL.iter().map(|w| (w.name(), r.get(*w))).collect();
    m.insert("total", r.total());
    m
}

pub(super) fn delivery(reliable: bool) -> &'static str {
    if reliable {
        "reliable"
    } else {
        "latest"
    }
}

fn liveness(alive: bool) -> &'static str {
    if alive {
        "alive"
    } else {
        "dead"
    }
}

/// Who a table's row is about, under ROLE, NODE, >PID and STATE.
fn who_cells(role: &str, node: &str, pid: u32, alive: bool) -> [String; 4] {
    [
        role.to_owned(),
        node.to_owned(),
        pid.to_string(),
        liveness(alive).to_owned(),
    ]
}

/// The transports of a topic's publishers ("shm" for a topic with none yet: the only one there is).
fn transport_of(t: &TopicSnapshot) -> &'static str {
    t.publishers.first().map_or("shm", |p| p.transport)
}

impl From<&TopicSnapshot> for TopicJson {
    fn from(t: &TopicSnapshot) -> TopicJson {
        TopicJson {
            domain: t.domain.clone(),
            topic: t.topic.clone(),
            transport: transport_of(t),
            topic_type: t
                .topic_type
                .as_ref()
                .ok()
                .and_then(Option::as_ref)
                .map(TypeJson::from),
            type_error: t.topic_type.as_ref().err().cloned(),
            publishers: t.publishers.iter().map(PublisherJson::from).collect(),
            subscribers: t
                .subscribers
                .iter()
                .map(|s| SubscriberJson {
                    service: ServiceJson::of(&t.topic, s),
                    ..SubscriberJson::from(s)
                })
                .collect(),
        }
    }
}

impl From<&PublisherStats> for PublisherJson {
    fn from(p: &PublisherStats) -> PublisherJson {
        PublisherJson {
            end: end_json!(p),
            ring_bytes: p.capacity,
            max_message_bytes: p.max_message,
            sent: p.sent,
            bytes: p.bytes,
            waits: p.waits,
            timeouts: p.timeouts,
            evictions: p.evictions,
            retransmitted: p.retransmitted,
            kernel_drops: p.kernel_drops,
            send_errors: p.send_errors,
            refused: refusal_map(&p.refused),
            repairs_deferred: p.repairs_deferred,
            challenges_withheld: p.challenges_withheld,
            discovery_refused: discovery_map(&p.discovery_refused),
            repair_bytes: p.congestion.repair_bytes,
            repairs_suppressed: p.congestion.repairs_suppressed,
            pacing_rate_bytes_per_s: p.congestion.pacing_rate,
            bottleneck_rate_bytes_per_s: p.congestion.bottleneck_rate,
            min_rtt_ns: p.congestion.min_rtt_ns,
            foreign_queue_ns: p.congestion.foreign_queue_ns,
            paced_waits: p.congestion.paced_waits,
            window_waits: p.congestion.window_waits,
            congestion_events: p.congestion.congestion_events,
            noise_loss_events: p.congestion.noise_loss_events,
            queue_events: p.congestion.queue_events,
            datagrams: p.congestion.datagrams,
            batches: p.congestion.batches,
            batched_messages: p.congestion.batched_messages,
            left_out: p.congestion.left_out,
            deadline_missed: p.deadline_missed,
            other_type: p.other_type,
        }
    }
}

impl From<&SubscriberStats> for SubscriberJson {
    fn from(s: &SubscriberStats) -> SubscriberJson {
        SubscriberJson {
            end: end_json!(s),
            received: s.received,
            bytes: s.bytes,
            skipped: s.skipped,
            waits: s.waits,
            lost: s.lost,
            refused: refusal_map(&s.refused),
            kernel_drops: s.kernel_drops,
            evicted: s.evicted,
            replies_withheld: s.replies_withheld,
            sessions_evicted: s.sessions_evicted,
            discovery_refused: discovery_map(&s.discovery_refused),
            deadline_missed: s.deadline_missed,
            other_type: s.other_type,
            service: None,
        }
    }
}

/// Snapshots of the topics in `domain` (every domain if `None`); segments that could not be
/// read are reported on standard error.
fn snapshots(domain: Option<&str>) -> Result<Vec<TopicSnapshot>> {
    let mut topics = Vec::new();
    for entry in ferry::admin::list_topics(domain)? {
        match entry {
            Ok(t) => topics.push(t),
            Err((segment, e)) => note!("ferry: cannot read {segment}: {e}"),
        }
    }
    topics.sort_by(|a, b| (&a.domain, &a.topic).cmp(&(&b.domain, &b.topic)));
    Ok(topics)
}

/// A service's server or client, from its subscriber slots (an `auto` end holds two).
struct ServiceEnd {
    domain: String,
    service: String,
    role: &'static str,
    node: String,
    pid: u32,
    alive: bool,
    transport: &'static str,
    counters: ServiceCounters,
}

/// The ends of every service among `topics`: servers (the subscribers of a service's request
/// topic) and clients (the subscribers of their response topics), servers first.
fn service_ends(topics: &[TopicSnapshot]) -> Vec<ServiceEnd> {
    let mut ends: Vec<ServiceEnd> = Vec::new();
    for t in topics {
        let (role, service) = match ServiceTopic::parse(&t.topic) {
            Some(ServiceTopic::Requests { service }) => ("server", service),
            Some(ServiceTopic::Responses { service, .. }) => ("client", service),
            _ => continue,
        };
        for s in &t.subscribers {
            let counters = ServiceCounters::from_raw(role == "server", &s.service);
            let same = ends.iter_mut().find(|e| {
                e.domain == t.domain && e.service == service && e.role == role && e.pid == s.pid
            });
            match same {
                // The other slot of an `auto` end: one end, its counters summed.
                Some(e) => {
                    e.transport = "auto";
                    e.counters += counters;
                }
                None => ends.push(ServiceEnd {
                    domain: t.domain.clone(),
                    service: service.clone(),
                    role,
                    node: s.node.clone(),
                    pid: s.pid,
                    alive: s.alive,
                    transport: s.transport,
                    counters,
                }),
            }
        }
    }
    ends.sort_by(|a, b| {
        (&a.domain, &a.service, a.role != "server", &a.node, a.pid).cmp(&(
            &b.domain,
            &b.service,
            b.role != "server",
            &b.node,
            b.pid,
        ))
    });
    ends
}

/// The columns both tables of services begin with: where the service is, and who the end is.
const SERVICE_COLUMNS: [&str; 6] = ["DOMAIN", "SERVICE", "ROLE", "NODE", ">PID", "STATE"];

impl ServiceEnd {
    fn who_cells(&self) -> [String; 4] {
        who_cells(self.role, &self.node, self.pid, self.alive)
    }
}

/// `ferry topics`' table of services: who serves and who calls.
fn services_table(ends: &[ServiceEnd]) -> String {
    let mut table = Table::new(&[&SERVICE_COLUMNS[..], &["TRANSPORT"]].concat());
    let mut last: Option<(&str, &str)> = None;
    for e in ends {
        let head = if last == Some((e.domain.as_str(), e.service.as_str())) {
            [String::new(), String::new()]
        } else {
            [e.domain.clone(), e.service.clone()]
        };
        last = Some((&e.domain, &e.service));
        let mut row = head.to_vec();
        row.extend(e.who_cells());
        row.push(e.transport.to_owned());
        table.row(row);
    }
    table.render()
}

/// `ferry stats`' table of services: requests, responses and what went wrong, per end.
fn services_stats_table(ends: &[ServiceEnd]) -> String {
    let counter_columns = [
        ">REQUESTS",
        ">RESPONSES",
        ">TIMEOUTS",
        ">SERVER GONE",
        ">DROPPED",
        ">REFUSED",
        ">MALFORMED",
    ];
    let mut table = Table::new(&[&SERVICE_COLUMNS[..], &counter_columns].concat());
    for e in ends {
        let c = &e.counters;
        let server = e.role == "server";
        let only = |on: bool, v: u64| if on { v.to_string() } else { "-".to_owned() };
        let mut row = vec![e.domain.clone(), e.service.clone()];
        row.extend(e.who_cells());
        row.extend([
            c.requests.to_string(),
            c.responses.to_string(),
            only(!server, c.timeouts),
            only(!server, c.server_gone),
            only(server, c.dropped),
            only(server, c.refused),
            c.malformed.to_string(),
        ]);
        table.row(row);
    }
    table.render()
}

/// Splits application topics from the topics of ferry's own that carry services.
fn split_services(topics: Vec<TopicSnapshot>) -> (Vec<TopicSnapshot>, Vec<TopicSnapshot>) {
    topics
        .into_iter()
        .partition(|t| ServiceTopic::parse(&t.topic).is_none())
}

fn print_json(topics: &[TopicSnapshot]) -> Result<()> {
    let json: Vec<TopicJson> = topics.iter().map(TopicJson::from).collect();
    print_out(&(serde_json::to_string_pretty(&json)? + "\n"))?;
    Ok(())
}

fn nothing_found(domain: Option<&str>) -> String {
    match domain {
        Some(d) => format!("no topics in domain {d}\n"),
        None => "no topics\n".to_owned(),
    }
}

fn dead_hint(topics: &[TopicSnapshot]) -> &'static str {
    let any_dead = topics
        .iter()
        .any(|t| t.publishers.iter().any(|p| !p.alive) || t.subscribers.iter().any(|s| !s.alive));
    if any_dead {
        "\ndead: left by a process that ended without closing; `ferry clean` removes it\n"
    } else {
        ""
    }
}

pub fn run_topics(args: TopicsArgs) -> Result<()> {
    if let Some(secs) = args.remote {
        check_remote(args.domain.as_deref(), secs)?;
    }
    let all = snapshots(args.domain.as_deref())?;
    if args.json {
        return print_json(&all);
    }
    let (topics, service_topics) = split_services(all);
    let services = service_ends(&service_topics);
    let services_text = match services.is_empty() {
        true => String::new(),
        false => format!("\nservices:\n{}", services_table(&services)),
    };
    if topics.is_empty() {
        print_out(&(nothing_found(args.domain.as_deref()) + &services_text))?;
        // Other hosts may announce topics this one has none of.
        if let Some(secs) = args.remote {
            print_remote(args.domain.as_deref(), secs)?;
        }
        return Ok(());
    }
    let mut table = Table::new(&[
        "DOMAIN",
        "TOPIC",
        "TYPE",
        "TRANSPORT",
        "ROLE",
        "NODE",
        ">PID",
        "STATE",
        "DELIVERY",
        "DETAILS",
    ]);
    for t in &topics {
        let head = |i: usize| {
            if i == 0 {
                [
                    t.domain.clone(),
                    t.topic.clone(),
                    type_cell(t),
                    transport_of(t).to_owned(),
                ]
            } else {
                Default::default()
            }
        };
        if t.publishers.is_empty() && t.subscribers.is_empty() {
            let mut row = head(0).to_vec();
            row.push("(none)".to_owned());
            table.row(row);
        }
        let publishers = t.publishers.iter().map(|p| {
            let details = match p.udp {
                Some(addr) if p.capacity == 0 => format!(
                    "{}{} at {addr}, max message {}",
                    p.transport,
                    if p.multicast { " multicast" } else { "" },
                    format_size(p.max_message as usize)
                ),
                _ => format!(
                    "{}, max message {}, ring {}",
                    p.transport,
                    format_size(p.max_message as usize),
                    format_size(p.capacity as usize)
                ),
            };
            ("publisher", &p.node, p.pid, p.alive, p.reliable, details)
        });
        let subscribers = t.subscribers.iter().map(|s| {
            let details = match s.udp {
                Some(addr) => format!(
                    "{}{} at {addr}",
                    s.transport,
                    if s.multicast { " multicast" } else { "" }
                ),
                None => s.transport.to_owned(),
            };
            ("subscriber", &s.node, s.pid, s.alive, s.reliable, details)
        });
        let ends = publishers.chain(subscribers);
        for (i, (role, node, pid, alive, reliable, details)) in ends.enumerate() {
            let mut row = head(i).to_vec();
            row.extend(who_cells(role, node, pid, alive));
            row.extend([delivery(reliable).to_owned(), details]);
            table.row(row);
        }
    }
    print_out(&(table.render() + &services_text + dead_hint(&topics)))?;
    if let Some(secs) = args.remote {
        print_remote(args.domain.as_deref(), secs)?;
    }
    Ok(())
}

/// Refuses a `--remote` without a domain, or outside 0 to 60 seconds.
fn check_remote(domain: Option<&str>, secs: f64) -> Result<()> {
    if domain.is_none() {
        bail!("--remote needs --domain (discovery runs per domain)")
    }
    if !(0.0..=60.0).contains(&secs) {
        bail!("--remote takes 0 to 60 seconds");
    }
    Ok(())
}

/// Lists what other hosts announce (UDP discovery) in one domain.
fn print_remote(domain: Option<&str>, secs: f64) -> Result<()> {
    check_remote(domain, secs)?;
    let Some(domain) = domain else {
        bail!("--remote needs --domain (discovery runs per domain)")
    };
    let listen = std::time::Duration::from_secs_f64(secs);
    let remote = match ferry::NodeConfig::from_env()
        .and_then(|c| ferry::admin::listen_remote(&c.with_domain(domain)))
    {
        Ok(listener) => {
            signal::sleep(listen)?;
            Ok(listener.endpoints())
        }
        Err(e) => Err(e),
    };
    match remote {
        Err(why) => {
            note!("{why}");
        }
        Ok(remote) if remote.is_empty() => {
            print_out(&format!(
                "no other host announced a topic in domain {domain}\n"
            ))?;
        }
        Ok(remote) => {
            let mut table = Table::new(&["TOPIC", "ROLE", "ADDRESS", "DELIVERY"]);
            for r in remote {
                let role = if r.publisher {
                    "publisher"
                } else {
                    "subscriber"
                };
                table.row(vec![
                    r.topic,
                    format!("{role} (remote)"),
                    r.addr.to_string(),
                    delivery(r.reliable).to_owned(),
                ]);
            }
            print_out(&table.render())?;
        }
    }
    Ok(())
}

pub fn run_stats(args: StatsArgs) -> Result<()> {
    let mut topics = match (&args.topic, &args.domain) {
        (Some(topic), Some(domain)) => ferry::admin::topic(domain, topic)?.into_iter().collect(),
        _ => snapshots(args.domain.as_deref())?,
    };
    if let Some(topic) = &args.topic {
        topics.retain(|t| &t.topic == topic);
        if topics.is_empty() {
            match &args.domain {
                Some(d) => bail!("no topic {} in domain {d}", ferry::quoted_name(topic)),
                None => bail!("no topic {} in any domain", ferry::quoted_name(topic)),
            }
        }
    }
    if args.json {
        return print_json(&topics);
    }
    let services = service_ends(&topics);
    let services_text = match services.is_empty() {
        true => String::new(),
        false => format!("\nservices:\n{}", services_stats_table(&services)),
    };
    // A service's own topics are counted in its table, not listed again as topics, unless one
    // was asked for by name.
    let topics = match &args.topic {
        Some(_) => topics,
        None => split_services(topics).0,
    };
    if topics.is_empty() {
        let text = match services.is_empty() {
            true => nothing_found(args.domain.as_deref()),
            false => services_text.trim_start().to_owned(),
        };
        print_out(&text)?;
        return Ok(());
    }
    let mut table = Table::new(&[
        "DOMAIN",
        "TOPIC",
        "TRANSPORT",
        "ROLE",
        "NODE",
        ">PID",
        "STATE",
        ">SENT/RECEIVED",
        ">BYTES",
        ">WAITS",
        ">TIMEOUTS",
        ">EVICTIONS",
        ">SKIPPED",
        ">LOST",
        ">RETRANSMITTED",
        ">KERNEL DROPS",
        ">REFUSED",
        ">SEND ERRORS",
    ]);
    for t in &topics {
        let mut first = true;
        let mut head = || {
            let cells = if first {
                vec![t.domain.clone(), t.topic.clone()]
            } else {
                vec![String::new(), String::new()]
            };
            // (Under `auto` an end has a row per transport: its shared-memory and UDP slots.)
            first = false;
            cells
        };
        let publishers = t.publishers.iter().map(|p| {
            let counters = [
                Some(p.sent),
                Some(p.bytes),
                Some(p.waits),
                Some(p.timeouts),
                Some(p.evictions),
                // Messages a latest subscriber was left out of (it fell behind).
                Some(p.congestion.left_out),
                None,
                Some(p.retransmitted),
                Some(p.kernel_drops),
                Some(p.refused.total()),
                Some(p.send_errors),
            ];
            (
                "publisher",
                p.udp.is_some(),
                &p.node,
                p.pid,
                p.alive,
                counters,
            )
        });
        let subscribers = t.subscribers.iter().map(|s| {
            let counters = [
                Some(s.received),
                Some(s.bytes),
                Some(s.waits),
                None,
                None,
                Some(s.skipped),
                Some(s.lost),
                None,
                Some(s.kernel_drops),
                Some(s.refused.total()),
                None,
            ];
            (
                "subscriber",
                s.udp.is_some(),
                &s.node,
                s.pid,
                s.alive,
                counters,
            )
        });
        for (role, udp, node, pid, alive, counters) in publishers.chain(subscribers) {
            let mut row = head();
            row.push(if udp { "udp" } else { "shm" }.to_owned());
            row.extend(participant_cells(role, node, pid, alive, counters));
            table.row(row);
        }
        if t.publishers.is_empty() && t.subscribers.is_empty() {
            let mut row = head();
            row.push("(none)".to_owned());
            table.row(row);
        }
    }
    print_out(
        &(table.render()
            + &services_text
            + &refusal_notes(&topics)
            + &deadline_notes(&topics)
            + dead_hint(&topics)),
    )?;
    Ok(())
}

/// A participant's cells of `ferry stats`'s table after its domain and topic: its role, node, pid
/// and state, then its counters from SENT/RECEIVED on, "-" for one its role does not have.
fn participant_cells(
    role: &str,
    node: &str,
    pid: u32,
    alive: bool,
    counters: [Option<u64>; 11],
) -> Vec<String> {
    let mut cells = who_cells(role, node, pid, alive).to_vec();
    cells.extend(counters.map(|c| c.map_or_else(|| "-".to_owned(), |n| n.to_string())));
    cells
}

/// What was refused and why, one line per participant that refused anything, and what each
/// participant dropped or held back to stay within its bounds.
fn refusal_notes(topics: &[TopicSnapshot]) -> String {
    let mut out = String::new();
    for t in topics {
        for p in &t.publishers {
            let mut why = vec![p.refused.describe()];
            if p.repairs_deferred > 0 {
                why.push(format!("repairs deferred {}", p.repairs_deferred));
            }
            if p.challenges_withheld > 0 {
                why.push(format!(
                    "challenges withheld from announced addresses {}",
                    p.challenges_withheld
                ));
            }
            if p.other_type > 0 {
                why.push(format!(
                    "subscribers of another type left out {}",
                    p.other_type
                ));
            }
            why.push(discovery_note(&p.discovery_refused));
            note_line(&mut out, &t.topic, "publisher", &p.node, p.pid, why);
        }
        for s in &t.subscribers {
            let mut why = vec![s.refused.describe()];
            for (n, what) in [
                (s.evicted, "incomplete messages evicted"),
                (s.sessions_evicted, "sessions evicted"),
                (s.other_type, "publishers of another type refused"),
                (
                    s.replies_withheld,
                    "replies withheld from unverified addresses",
                ),
            ] {
                if n > 0 {
                    why.push(format!("{what} {n}"));
                }
            }
            why.push(discovery_note(&s.discovery_refused));
            note_line(&mut out, &t.topic, "subscriber", &s.node, s.pid, why);
        }
    }
    if out.is_empty() {
        out
    } else {
        format!("\nrefused (why):\n{out}")
    }
}

fn discovery_note(d: &DiscoveryRefusals) -> String {
    if d.total() == 0 {
        return String::new();
    }
    format!(
        "discovery refused {} (malformed {}, not allowed {}, over limit {}, unauthenticated {})",
        d.total(),
        d.malformed,
        d.not_allowed,
        d.over_limit,
        d.unauthenticated
    )
}

/// The periods each participant with `Qos::deadline` let pass without a message (subscriber)
/// or a send (publisher), one line each where there are any.
fn deadline_notes(topics: &[TopicSnapshot]) -> String {
    let mut out = String::new();
    for t in topics {
        let publishers = t
            .publishers
            .iter()
            .map(|p| ("publisher", &p.node, p.pid, p.deadline_missed));
        let subscribers = t
            .subscribers
            .iter()
            .map(|s| ("subscriber", &s.node, s.pid, s.deadline_missed));
        for (role, node, pid, missed) in publishers.chain(subscribers) {
            if missed > 0 {
                let why = vec![format!("{missed} deadline periods missed")];
                note_line(&mut out, &t.topic, role, node, pid, why);
            }
        }
    }
    if out.is_empty() {
        out
    } else {
        format!("\ndeadlines:\n{out}")
    }
}

fn note_line(out: &mut String, topic: &str, role: &str, node: &str, pid: u32, why: Vec<String>) {
    let why: Vec<String> = why.into_iter().filter(|w| !w.is_empty()).collect();
    if !why.is_empty() {
        out.push_str(&format!(
            "  {topic} {role} {node} (pid {pid}): {}\n",
            why.join(", ")
        ));
    }
}
