//! What `ferry monitor` shows: the topics' directories read every period (the counters every
//! process already keeps in shared memory: reading them costs the processes nothing), with
//! rates over the last seconds and a history of each endpoint's rate and bandwidth for its
//! sparkline. No I/O besides reading the directories; the JSON is `/api/state`'s.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use ferry::admin::{PublisherStats, SubscriberStats, TopicSnapshot};

use super::super::topics::{delivery, refusal_map};
use serde::Serialize;

/// How many samples each endpoint's history keeps (5 minutes at the default period).
pub const HISTORY: usize = 600;
/// Rates are taken over this many periods (2 s at the default period): steady to a few percent
/// at 10 messages per second and up.
const RATE_WINDOW: usize = 4;

/// One endpoint's counters as the last samples saw them.
struct Track {
    /// (when, messages, bytes) of the last `RATE_WINDOW + 1` samples.
    recent: VecDeque<(Instant, u64, u64)>,
    rate: VecDeque<f32>,
    bandwidth: VecDeque<f32>,
    /// The sample that last saw it (endpoints not seen are forgotten).
    seen: u64,
}

/// Samples the directories and keeps what the page plots.
pub struct Sampler {
    domain: Option<String>,
    /// Discovery of the domain, when it can be listened to (or why not).
    remote: Result<ferry::admin::RemoteListener, String>,
    tracks: HashMap<String, Track>,
    samples: u64,
    period: Duration,
}

/// `/api/state`: everything the page shows.
#[derive(Serialize)]
pub struct State {
    /// Milliseconds since the Unix epoch, when the directories were read.
    pub time_ms: u64,
    /// The sampling period, and how long building this state took (ms).
    pub period_ms: u64,
    pub build_ms: f64,
    /// The domain watched (`null`: every domain).
    pub domain: Option<String>,
    pub topics: Vec<TopicState>,
    /// Directories that could not be read, with why.
    pub unreadable: Vec<String>,
    /// UDP endpoints other hosts announce in the domain (discovery), and why there are none to
    /// show when discovery cannot be listened to.
    pub remote: Vec<RemoteState>,
    pub remote_note: Option<String>,
}

#[derive(Serialize)]
pub struct RemoteState {
    pub topic: String,
    pub role: &'static str,
    /// The host (its address) and where the endpoint receives (subscriber) or sends from
    /// (publisher).
    pub host: String,
    pub address: String,
    pub delivery: &'static str,
}

#[derive(Serialize)]
pub struct TopicState {
    pub domain: String,
    pub topic: String,
    /// The topic's type, when an end declared one.
    #[serde(rename = "type")]
    pub topic_type: Option<TypeState>,
    /// A topic that carries a service's requests or responses.
    pub service: bool,
    pub endpoints: Vec<Endpoint>,
}

#[derive(Serialize)]
pub struct TypeState {
    pub name: String,
    pub encoding: &'static str,
    pub schema_bytes: usize,
    pub hash: String,
}

#[derive(Serialize)]
pub struct Endpoint {
    /// Stable while the endpoint lives: domain, topic, role, slot and token.
    pub id: String,
    pub role: &'static str,
    pub node: String,
    pub pid: u32,
    /// Running (false: its process ended without closing; `ferry clean` removes it).
    pub alive: bool,
    pub transport: &'static str,
    /// UDP through a multicast group.
    pub multicast: bool,
    /// The bridge this end belongs to (`zenoh`: the topic goes on to Zenoh or comes from it),
    /// or `null`.
    pub bridge: Option<&'static str>,
    pub delivery: &'static str,
    /// Messages and bytes per second over the last seconds (sent by a publisher, received by a
    /// subscriber); `null` until two samples saw it.
    pub rate: Option<f64>,
    pub bandwidth: Option<f64>,
    /// Totals since it started.
    pub messages: u64,
    pub bytes: u64,
    pub skipped: u64,
    pub lost: u64,
    pub retransmitted: u64,
    /// Datagrams refused, by reason, with their total.
    pub refused: BTreeMap<&'static str, u64>,
    pub kernel_drops: u64,
    pub waits: u64,
    pub timeouts: u64,
    pub deadline_missed: u64,
    pub other_type: u64,
    /// The last samples' rate and bandwidth, oldest first (at most `HISTORY`): in `/api/state`
    /// only; the event stream leaves it out (the page adds each event's rates to what it has).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<History>,
}

#[derive(Serialize)]
pub struct History {
    pub rate: Vec<f32>,
    pub bandwidth: Vec<f32>,
}

/// An endpoint before its rates: its identity and counters.
struct Raw {
    id: String,
    messages: u64,
    bytes: u64,
    endpoint: Endpoint,
}

/// `zenoh` for an end of the Zenoh bridge (known by its node's name).
fn bridge(node: &str) -> Option<&'static str> {
    (node == ferry::admin::ZENOH_BRIDGE_NODE).then_some("zenoh")
}

/// The `Raw` of a publisher's or a subscriber's stats (`$stats`, which name these fields alike)
/// in topic `$t`: its role, the letter of its id, and the counters that differ by role.
macro_rules! raw {
    ($t:expr, $stats:expr, $role:literal, $letter:literal, messages: $messages:expr,
     skipped: $skipped:expr, lost: $lost:expr, retransmitted: $retransmitted:expr,
     timeouts: $timeouts:expr) => {{
        let (t, s) = ($t, $stats);
        let id = format!(
            "{}/{}/{}{}/{:x}",
            t.domain, t.topic, $letter, s.slot, s.token
        );
        Raw {
            id: id.clone(),
            messages: $messages,
            bytes: s.bytes,
            endpoint: Endpoint {
                id,
                role: $role,
                node: s.node.clone(),
                pid: s.pid,
                alive: s.alive,
                transport: s.transport,
                multicast: s.multicast,
                bridge: bridge(&s.node),
                delivery: delivery(s.reliable),
                rate: None,
                bandwidth: None,
                messages: $messages,
                bytes: s.bytes,
                skipped: $skipped,
                lost: $lost,
                retransmitted: $retransmitted,
                refused: refusal_map(&s.refused),
                kernel_drops: s.kernel_drops,
                waits: s.waits,
                timeouts: $timeouts,
                deadline_missed: s.deadline_missed,
                other_type: s.other_type,
                history: None,
            },
        }
    }};
}

fn publisher(t: &TopicSnapshot, p: &PublisherStats) -> Raw {
    raw!(t, p, "publisher", "p", messages: p.sent, skipped: 0, lost: 0,
         retransmitted: p.retransmitted, timeouts: p.timeouts)
}

fn subscriber(t: &TopicSnapshot, s: &SubscriberStats) -> Raw {
    raw!(t, s, "subscriber", "s", messages: s.received, skipped: s.skipped, lost: s.lost,
         retransmitted: 0, timeouts: 0)
}

impl State {
    /// The state without the endpoints' histories (what each event carries).
    pub fn without_history(mut self) -> State {
        for t in &mut self.topics {
            for e in &mut t.endpoints {
                e.history = None;
            }
        }
        self
    }
}

impl Sampler {
    pub fn new(domain: Option<String>, period: Duration) -> Sampler {
        // Other hosts' endpoints, through discovery (which runs per domain): listened to only.
        let remote = match &domain {
            None => Err("other hosts are shown with --domain (discovery runs per domain)".into()),
            Some(d) => ferry::NodeConfig::from_env()
                .and_then(|c| ferry::admin::listen_remote(&c.with_domain(d)))
                .map_err(|e| e.to_string()),
        };
        Sampler {
            remote,
            domain,
            tracks: HashMap::new(),
            samples: 0,
            period,
        }
    }

    /// Reads every directory once and returns what the page shows.
    pub fn sample(&mut self) -> State {
        let started = Instant::now();
        let mut unreadable = Vec::new();
        let mut snapshots = Vec::new();
        match ferry::admin::list_topics(self.domain.as_deref()) {
            Ok(entries) => {
                for e in entries {
                    match e {
                        Ok(t) => snapshots.push(t),
                        Err((segment, why)) => unreadable.push(format!("{segment}: {why}")),
                    }
                }
            }
            Err(e) => unreadable.push(e.to_string()),
        }
        self.state_of(snapshots, unreadable, started)
    }

    /// The state of `snapshots` (read at `started`), rates and history updated.
    pub fn state_of(
        &mut self,
        mut snapshots: Vec<TopicSnapshot>,
        unreadable: Vec<String>,
        started: Instant,
    ) -> State {
        self.samples += 1;
        let now = started;
        snapshots.sort_by(|a, b| (&a.domain, &a.topic).cmp(&(&b.domain, &b.topic)));
        let mut topics = Vec::with_capacity(snapshots.len());
        for t in &snapshots {
            let raws = t
                .publishers
                .iter()
                .map(|p| publisher(t, p))
                .chain(t.subscribers.iter().map(|s| subscriber(t, s)));
            let mut endpoints = Vec::new();
            for raw in raws {
                endpoints.push(self.rated(raw, now));
            }
            topics.push(TopicState {
                domain: t.domain.clone(),
                topic: t.topic.clone(),
                topic_type: t
                    .topic_type
                    .as_ref()
                    .ok()
                    .and_then(Option::as_ref)
                    .map(|ty| TypeState {
                        name: ty.name().to_owned(),
                        encoding: ty.encoding().name(),
                        schema_bytes: ty.schema().len(),
                        hash: format!("{:016x}", ty.hash()),
                    }),
                service: ferry::service::ServiceTopic::parse(&t.topic).is_some(),
                endpoints,
            });
        }
        let samples = self.samples;
        self.tracks.retain(|_, tr| tr.seen == samples);
        let (remote, remote_note) = match &self.remote {
            Ok(listener) => {
                let mut r: Vec<RemoteState> = listener
                    .endpoints()
                    .into_iter()
                    .map(|e| RemoteState {
                        topic: e.topic,
                        role: if e.publisher {
                            "publisher"
                        } else {
                            "subscriber"
                        },
                        host: e.addr.ip().to_string(),
                        address: e.addr.to_string(),
                        delivery: delivery(e.reliable),
                    })
                    .collect();
                r.sort_by(|a, b| {
                    (&a.topic, a.role, &a.address).cmp(&(&b.topic, b.role, &b.address))
                });
                (r, None)
            }
            Err(why) => (Vec::new(), Some(why.clone())),
        };
        State {
            remote,
            remote_note,
            time_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            period_ms: self.period.as_millis() as u64,
            build_ms: started.elapsed().as_secs_f64() * 1e3,
            domain: self.domain.clone(),
            topics,
            unreadable,
        }
    }

    /// The endpoint with its rate over the last `RATE_WINDOW` samples, and its history.
    fn rated(&mut self, raw: Raw, now: Instant) -> Endpoint {
        let samples = self.samples;
        let track = self.tracks.entry(raw.id).or_insert_with(|| Track {
            recent: VecDeque::new(),
            rate: VecDeque::new(),
            bandwidth: VecDeque::new(),
            seen: samples,
        });
        track.seen = samples;
        track.recent.push_back((now, raw.messages, raw.bytes));
        while track.recent.len() > RATE_WINDOW + 1 {
            track.recent.pop_front();
        }
        let mut e = raw.endpoint;
        if let (Some(first), Some(last)) = (track.recent.front(), track.recent.back()) {
            let secs = last.0.duration_since(first.0).as_secs_f64();
            if secs > 0.0 {
                let rate = last.1.saturating_sub(first.1) as f64 / secs;
                let bandwidth = last.2.saturating_sub(first.2) as f64 / secs;
                e.rate = Some(rate);
                e.bandwidth = Some(bandwidth);
                track.rate.push_back(rate as f32);
                track.bandwidth.push_back(bandwidth as f32);
                while track.rate.len() > HISTORY {
                    track.rate.pop_front();
                    track.bandwidth.pop_front();
                }
            }
        }
        e.history = Some(History {
            rate: track.rate.iter().copied().collect(),
            bandwidth: track.bandwidth.iter().copied().collect(),
        });
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_come_from_the_counters_over_the_window() {
        let node = ferry::Node::with_domain("mon", &format!("mon{}", std::process::id())).unwrap();
        let qos = ferry::Qos::default().transport(ferry::Transport::Shm);
        let mut sub = node.subscriber("t", &qos).unwrap();
        let mut publ = node.publisher("t", &qos).unwrap();
        let mut s = Sampler::new(Some(node.domain().to_owned()), Duration::from_millis(100));
        let first = s.sample();
        assert_eq!(first.topics.len(), 1);
        assert_eq!(first.topics[0].endpoints.len(), 2);
        assert!(first.topics[0].endpoints.iter().all(|e| e.rate.is_none()));
        for _ in 0..10 {
            publ.send(b"0123456789").unwrap();
            sub.recv_timeout(Duration::from_secs(5)).unwrap().unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        let second = s.sample();
        let e = &second.topics[0].endpoints;
        let p = e.iter().find(|e| e.role == "publisher").unwrap();
        assert_eq!((p.messages, p.bytes), (10, 100));
        let rate = p.rate.unwrap();
        assert!(rate > 0.0 && rate <= 10.0 / 0.1, "{rate}");
        assert_eq!(p.history.as_ref().unwrap().rate.len(), 1);
        // Gone endpoints are forgotten.
        drop(publ);
        drop(sub);
        let third = s.sample();
        assert!(third.topics.is_empty());
        assert!(s.tracks.is_empty());
    }
}
