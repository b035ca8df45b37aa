//! The bridge: ferry topics of one domain out to Zenoh, and Zenoh keys of that domain into
//! ferry, without sending a message back to where it came from.
//!
//! Threads:
//! - **scan** (the caller's): every `scan` interval it lists the domain's topics on this host
//!   and starts an outbound thread for each selected topic that has a publisher other than a
//!   bridge. It also ends the run (Ctrl-C, SIGTERM, `--duration`) and prints the counts.
//! - **outbound**, one per bridged topic: a ferry subscriber, and a Zenoh publisher on
//!   `ferry/<domain>/<topic>`. It forwards every message except those of publishers that are
//!   bridges (this one's own, by id; other bridges', by node name), and holds a Zenoh
//!   liveliness token `ferry-topics/<zenoh id>/<domain>/<topic>` while it runs, so that bridges
//!   elsewhere make their ferry publisher for the topic before its first message arrives.
//! - **Zenoh's receiving threads** run the subscriber's callbacks, which publish into ferry
//!   publishers (made on the first message or liveliness token of a key, up to `max_topics`).
//!   A reliable ferry subscriber that holds such a publisher back holds Zenoh's delivery back,
//!   and with it the sender: nothing is dropped on the way in.
//!
//! Zenoh delivers to a subscriber only what other sessions put (`Locality::Remote`), so the
//! bridge does not hear its own puts. Everything refused or lost is counted in [`Counts`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferry::{Delivery, Node, NodeConfig, PublisherId, Qos, Transport, WaitStrategy};
use zenoh::key_expr::KeyExpr;
use zenoh::qos::CongestionControl;
use zenoh::sample::{Locality, SampleKind};
use zenoh::{Session, Wait};

use crate::keys;

/// The node name of every bridge: a bridge never forwards to Zenoh what a node of this name
/// published (another bridge's messages came from Zenoh already).
pub const BRIDGE_NODE: &str = ferry::admin::ZENOH_BRIDGE_NODE;

/// How long a thread waits before it looks at the stop flag again.
const POLL: Duration = Duration::from_millis(100);

/// Publishers an outbound thread remembers its decision for (a topic whose publishers come and
/// go forgets them all past this, and decides again).
const MAX_PUBLISHERS_REMEMBERED: usize = 4096;

/// What a bridge does.
#[derive(Debug, Clone)]
pub struct Options {
    pub domain: String,
    /// Zenoh key expressions over topic names (`**`, `sensors/*`).
    pub patterns: Vec<String>,
    /// How the bridge's ferry subscribers read: `Latest` never holds a publisher back (a slow
    /// Zenoh side skips messages, counted); `Reliable` passes back-pressure on.
    pub delivery: Delivery,
    pub transport: Transport,
    /// The largest message carried either way; larger ones are refused, counted.
    pub max_message: usize,
    /// The most topics bridged each way.
    pub max_topics: usize,
    /// How often the domain's topics are listed for new ones.
    pub scan: Duration,
    /// To Zenoh: how many of the messages a ferry publisher kept (`Qos::history`) the bridge
    /// forwards when it finds the publisher already running, so that what was published before
    /// the bridge saw the topic still reaches Zenoh: from publishers of the bridge's host
    /// (shared memory) and of other hosts (UDP, at most 8192).
    pub history: usize,
}

/// Counts of one direction of one topic.
#[derive(Debug, Default)]
pub struct Flow {
    pub messages: AtomicU64,
    pub bytes: AtomicU64,
    /// To Zenoh: messages the bridge's subscriber missed because it fell behind (latest
    /// delivery), or that were lost over UDP. From Zenoh: messages the ferry publisher could not
    /// send (a reliable subscriber that did not take them in time).
    pub lost: AtomicU64,
    /// To Zenoh: messages not forwarded because a bridge published them (they came from Zenoh).
    pub echoes: AtomicU64,
    /// To Zenoh: puts that Zenoh refused.
    pub failed: AtomicU64,
}

/// Everything a bridge counts; printed when it ends (`ferry stats` shows its ferry ends too).
#[derive(Debug, Default)]
pub struct Counts {
    pub to_zenoh: Mutex<BTreeMap<String, Arc<Flow>>>,
    pub from_zenoh: Mutex<BTreeMap<String, Arc<Flow>>>,
    /// Zenoh samples refused before reaching a topic, by reason.
    pub refused_keys: AtomicU64,
    pub refused_deletes: AtomicU64,
    /// Messages over the size limit (counted here, not per topic: a topic refused this way has
    /// no entry of its own, so that names from Zenoh cannot grow the counts without bound).
    pub refused_too_large: AtomicU64,
    pub refused_over_topic_limit: AtomicU64,
    pub refused_publisher: AtomicU64,
    /// Topics on this host not bridged out: over the topic limit, or names that are not keys.
    pub topics_not_bridged: AtomicU64,
}

fn flow(map: &Mutex<BTreeMap<String, Arc<Flow>>>, topic: &str) -> Arc<Flow> {
    lock(map).entry(topic.to_owned()).or_default().clone()
}

/// A poisoned lock only means another bridge thread panicked; its data (counts, id sets) is
/// still whole.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Counts {
    /// The counts as one JSON object (what `--json` prints).
    pub fn to_json(&self) -> serde_json::Value {
        let flows = |map: &Mutex<BTreeMap<String, Arc<Flow>>>| {
            let items: serde_json::Map<String, serde_json::Value> = lock(map)
                .iter()
                .map(|(topic, f)| {
                    let value = serde_json::json!({
                        "messages": f.messages.load(Ordering::Relaxed),
                        "bytes": f.bytes.load(Ordering::Relaxed),
                        "lost": f.lost.load(Ordering::Relaxed),
                        "echoes": f.echoes.load(Ordering::Relaxed),
                        "failed": f.failed.load(Ordering::Relaxed),
                    });
                    (topic.clone(), value)
                })
                .collect();
            serde_json::Value::Object(items)
        };
        serde_json::json!({
            "to_zenoh": flows(&self.to_zenoh),
            "from_zenoh": flows(&self.from_zenoh),
            "refused": {
                "bad_key": self.refused_keys.load(Ordering::Relaxed),
                "delete": self.refused_deletes.load(Ordering::Relaxed),
                "too_large": self.refused_too_large.load(Ordering::Relaxed),
                "over_topic_limit": self.refused_over_topic_limit.load(Ordering::Relaxed),
                "publisher": self.refused_publisher.load(Ordering::Relaxed),
            },
            "topics_not_bridged": self.topics_not_bridged.load(Ordering::Relaxed),
        })
    }

    /// The counts as lines for a person.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (title, map) in [
            ("ferry -> zenoh", &self.to_zenoh),
            ("zenoh -> ferry", &self.from_zenoh),
        ] {
            for (topic, f) in lock(map).iter() {
                out.push_str(&format!(
                    "{title}  {topic}: {} messages, {} bytes, {} lost, {} echoes not sent back, \
                     {} failed\n",
                    f.messages.load(Ordering::Relaxed),
                    f.bytes.load(Ordering::Relaxed),
                    f.lost.load(Ordering::Relaxed),
                    f.echoes.load(Ordering::Relaxed),
                    f.failed.load(Ordering::Relaxed),
                ));
            }
        }
        out.push_str(&format!(
            "refused from zenoh: {} keys that are not topics of the domain, {} deletes, {} \
             messages over the size limit, {} over the topic limit, {} topics ferry would not \
             publish; {} topics here not bridged\n",
            self.refused_keys.load(Ordering::Relaxed),
            self.refused_deletes.load(Ordering::Relaxed),
            self.refused_too_large.load(Ordering::Relaxed),
            self.refused_over_topic_limit.load(Ordering::Relaxed),
            self.refused_publisher.load(Ordering::Relaxed),
            self.topics_not_bridged.load(Ordering::Relaxed),
        ));
        out
    }
}

/// Shared by the bridge's threads.
struct Shared {
    options: Options,
    node: Node,
    session: Session,
    selectors: Vec<KeyExpr<'static>>,
    counts: Arc<Counts>,
    /// The ids of this bridge's ferry publishers (what their messages carry).
    own: Mutex<HashSet<PublisherId>>,
    /// The ferry publishers of topics that come from Zenoh, used by Zenoh's callbacks.
    inbound: Mutex<Inbound>,
    stop: AtomicBool,
}

/// The ferry publishers of topics that come from Zenoh.
#[derive(Default)]
struct Inbound {
    publishers: HashMap<String, (ferry::Publisher, Arc<Flow>)>,
    /// Topics ferry refused to publish (a name or limit it will not take): not tried again.
    refused: HashSet<String>,
}

/// A running bridge.
pub struct Bridge {
    shared: Arc<Shared>,
    outbound: HashMap<String, JoinHandle<()>>,
    /// Topics here left out over the topic limit, so that each is counted once, not per scan
    /// (at most 4 × `max_topics` remembered).
    left_out: HashSet<String>,
    // Kept for their lifetime: dropping them undeclares them.
    _data: zenoh::pubsub::Subscriber<()>,
    _announced: zenoh::pubsub::Subscriber<()>,
}

impl Bridge {
    /// Opens the ferry node and the Zenoh session's subscribers.
    pub fn start(options: Options, config: NodeConfig, session: Session) -> Result<Bridge, String> {
        let config = config.with_domain(&options.domain);
        let node = Node::with_config(BRIDGE_NODE, config)
            .map_err(|e| format!("cannot open the ferry node: {e}"))?;
        if options.patterns.is_empty() {
            return Err("no topic pattern: give --topics (** for every topic)".into());
        }
        let selectors = options
            .patterns
            .iter()
            .map(|p| keys::selector(&options.domain, p))
            .collect::<Result<Vec<_>, _>>()?;
        let shared = Arc::new(Shared {
            options,
            node,
            session: session.clone(),
            selectors,
            counts: Arc::default(),
            own: Mutex::default(),
            inbound: Mutex::default(),
            stop: AtomicBool::new(false),
        });
        // One subscriber for the domain's keys; the callback keeps the selected ones.
        let everything = format!("{}/{}/**", keys::ROOT, shared.options.domain);
        let data = {
            let s = shared.clone();
            session
                .declare_subscriber(everything.clone())
                .allowed_origin(Locality::Remote)
                .callback(move |sample| s.on_sample(sample))
                .wait()
                .map_err(|e| format!("cannot subscribe to {everything} in Zenoh: {e}"))?
        };
        let announcements = format!("{}/*/{}/**", keys::ANNOUNCE_ROOT, shared.options.domain);
        let announced = {
            let s = shared.clone();
            session
                .liveliness()
                .declare_subscriber(announcements.clone())
                .history(true)
                .callback(move |sample| s.on_token(sample))
                .wait()
                .map_err(|e| format!("cannot watch Zenoh liveliness on {announcements}: {e}"))?
        };
        Ok(Bridge {
            shared,
            outbound: HashMap::new(),
            left_out: HashSet::new(),
            _data: data,
            _announced: announced,
        })
    }

    /// Lists the domain's topics once and starts forwarding the new selected ones. Returns the
    /// topics that started.
    pub fn scan(&mut self) -> Vec<String> {
        let s = &self.shared;
        let domain = &s.options.domain;
        let Ok(entries) = ferry::admin::list_topics(Some(domain)) else {
            return Vec::new();
        };
        let mut started = Vec::new();
        for snap in entries.into_iter().flatten() {
            if self.outbound.contains_key(&snap.topic) {
                continue;
            }
            // Publishers other than bridges: what comes from Zenoh is not sent back.
            let has_source = snap
                .publishers
                .iter()
                .any(|p| p.alive && p.node != BRIDGE_NODE);
            if !has_source || !keys::selected(&s.selectors, domain, &snap.topic) {
                continue;
            }
            if self.outbound.len() >= s.options.max_topics {
                if self.left_out.len() < 4 * s.options.max_topics
                    && self.left_out.insert(snap.topic.clone())
                {
                    s.counts.topics_not_bridged.fetch_add(1, Ordering::Relaxed);
                }
                continue;
            }
            let (topic, shared) = (snap.topic.clone(), s.clone());
            match std::thread::Builder::new()
                .name("ferry-zenoh-out".into())
                .spawn(move || shared.outbound(&topic))
            {
                Ok(handle) => {
                    self.outbound.insert(snap.topic.clone(), handle);
                    started.push(snap.topic);
                }
                Err(e) => eprintln!("ferry-zenoh: cannot start a thread for {}: {e}", snap.topic),
            }
        }
        started
    }

    /// Scans every `scan` interval until `stop` says so.
    pub fn run(&mut self, stop: impl Fn() -> bool) {
        let mut next = Instant::now();
        while !stop() {
            if Instant::now() >= next {
                for topic in self.scan() {
                    eprintln!(
                        "ferry-zenoh: {topic} -> {}/{}/{topic}",
                        keys::ROOT,
                        self.shared.options.domain
                    );
                }
                next = Instant::now() + self.shared.options.scan;
            }
            std::thread::sleep(POLL.min(self.shared.options.scan));
        }
    }

    /// Stops every thread and waits for them.
    pub fn stop(mut self) -> Arc<Counts> {
        self.shared.stop.store(true, Ordering::Relaxed);
        for (_, handle) in self.outbound.drain() {
            let _ = handle.join();
        }
        self.shared.counts.clone()
    }
}

impl Shared {
    fn stopping(&self) -> bool {
        // Relaxed: a flag only; each thread looks at it at least every POLL.
        self.stop.load(Ordering::Relaxed)
    }

    /// Zenoh's callback for a data sample.
    fn on_sample(&self, sample: zenoh::sample::Sample) {
        let counts = &self.counts;
        let Some(topic) = keys::key_topic(&self.options.domain, sample.key_expr().as_str()) else {
            counts.refused_keys.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let mut inbound = lock(&self.inbound);
        // A topic with a publisher here was selected when it was made; only others are matched
        // against the patterns (which builds their key).
        if !inbound.publishers.contains_key(topic)
            && !keys::selected(&self.selectors, &self.options.domain, topic)
        {
            return;
        }
        if sample.kind() == SampleKind::Delete {
            // ferry has no deletes: a topic's messages are bytes.
            counts.refused_deletes.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let payload = sample.payload();
        if payload.len() > self.options.max_message {
            counts.refused_too_large.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // Contiguous payloads (most) are not copied here; the ferry publisher copies once.
        let bytes = payload.to_bytes();
        let Some((publisher, flow)) = self.publisher(&mut inbound, topic) else {
            return;
        };
        // Published from Zenoh's receiving thread: a reliable subscriber that holds this
        // publisher back holds Zenoh's delivery back, and with it the sender.
        match publisher.send(&bytes) {
            Ok(()) => {
                flow.messages.fetch_add(1, Ordering::Relaxed);
                flow.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            }
            Err(_) => {
                flow.lost.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Zenoh's callback for a liveliness token: another bridge publishes the topic.
    fn on_token(&self, sample: zenoh::sample::Sample) {
        if sample.kind() != SampleKind::Put {
            return;
        }
        let zid = self.session.zid().to_string();
        if let Some((from, topic)) =
            keys::announced(&self.options.domain, sample.key_expr().as_str())
        {
            // Its own tokens reach it too: those topics have their publishers here.
            if from != zid && keys::selected(&self.selectors, &self.options.domain, topic) {
                self.publisher(&mut lock(&self.inbound), topic);
            }
        }
    }

    fn qos(&self) -> Qos {
        // Blocking waits: a bridge is a gateway to a network, its threads should leave the
        // CPUs to the applications and to Zenoh's own threads rather than spin.
        Qos::default()
            .transport(self.options.transport)
            .delivery(self.options.delivery)
            .wait(WaitStrategy::Block)
            .max_message_size(self.options.max_message)
    }

    /// The QoS of the bridge's ferry subscribers: as `qos`, asking for history (over UDP at
    /// most what a UDP subscriber takes).
    fn subscriber_qos(&self) -> Qos {
        let history = match self.options.transport {
            Transport::Udp => self.options.history.min(ferry::MAX_UDP_HISTORY),
            _ => self.options.history,
        };
        self.qos().history(history)
    }

    /// The ferry publisher of a topic that comes from Zenoh: made on its first message or
    /// announcement, up to `max_topics`.
    fn publisher<'i>(
        &self,
        inbound: &'i mut Inbound,
        topic: &str,
    ) -> Option<&'i mut (ferry::Publisher, Arc<Flow>)> {
        let counts = &self.counts;
        if !inbound.publishers.contains_key(topic) {
            if inbound.refused.contains(topic) {
                counts.refused_publisher.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            if inbound.publishers.len() >= self.options.max_topics {
                counts
                    .refused_over_topic_limit
                    .fetch_add(1, Ordering::Relaxed);
                return None;
            }
            match self.node.publisher(topic, &self.qos()) {
                Ok(p) => {
                    // Before its first message: an outbound thread must know its ids before
                    // it can read one.
                    lock(&self.own).extend(p.ids());
                    eprintln!(
                        "ferry-zenoh: {}/{}/{topic} -> {topic}",
                        keys::ROOT,
                        self.options.domain
                    );
                    let flow = flow(&counts.from_zenoh, topic);
                    inbound.publishers.insert(topic.to_owned(), (p, flow));
                }
                Err(e) => {
                    eprintln!("ferry-zenoh: not publishing {topic} into ferry: {e}");
                    counts.refused_publisher.fetch_add(1, Ordering::Relaxed);
                    if inbound.refused.len() < 4 * self.options.max_topics {
                        inbound.refused.insert(topic.to_owned());
                    }
                    return None;
                }
            }
        }
        inbound.publishers.get_mut(topic)
    }

    /// An outbound thread: one ferry topic out to Zenoh.
    fn outbound(&self, topic: &str) {
        let Some(key) = keys::topic_key(&self.options.domain, topic) else {
            self.counts
                .topics_not_bridged
                .fetch_add(1, Ordering::Relaxed);
            return;
        };
        let flow = flow(&self.counts.to_zenoh, topic);
        let mut sub = match self.node.subscriber(topic, &self.subscriber_qos()) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("ferry-zenoh: cannot subscribe to {topic}: {e}");
                self.counts
                    .topics_not_bridged
                    .fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        // Block: a congested Zenoh link holds this thread back (and, under reliable delivery,
        // the ferry publisher) instead of dropping what was put.
        let publisher = match self
            .session
            .declare_publisher(key.clone())
            .congestion_control(CongestionControl::Block)
            .wait()
        {
            Ok(p) => p,
            Err(e) => {
                eprintln!("ferry-zenoh: cannot publish {key} in Zenoh: {e}");
                return;
            }
        };
        let zid = self.session.zid().to_string();
        let _token = keys::announce_key(&zid, &self.options.domain, topic)
            .map(|k| self.session.liveliness().declare_token(k).wait());
        // Whether to forward each publisher's messages, decided once per publisher.
        let mut forward: HashMap<PublisherId, bool> = HashMap::new();
        while !self.stopping() {
            let sample = match sub.recv_timeout(POLL) {
                Ok(Some(s)) => s,
                Ok(None) => continue,
                Err(e) => {
                    eprintln!("ferry-zenoh: {topic}: {e}");
                    return;
                }
            };
            flow.lost.fetch_add(sample.skipped(), Ordering::Relaxed);
            let id = sample.publisher();
            let send = match forward.get(&id) {
                Some(&send) => send,
                None => {
                    // A publisher not seen before: decide once whether its messages go out.
                    // Its node's name is looked up with the subscriber, which the sample
                    // borrows: this first message is copied out, then decided on.
                    let first = sample.to_vec();
                    drop(sample);
                    let send = !lock(&self.own).contains(&id)
                        && sub.publisher_info(id).node.as_deref() != Some(BRIDGE_NODE);
                    if forward.len() >= MAX_PUBLISHERS_REMEMBERED {
                        forward.clear();
                    }
                    forward.insert(id, send);
                    self.forward(&publisher, &flow, send, &first);
                    continue;
                }
            };
            self.forward(&publisher, &flow, send, &sample);
        }
    }

    /// Puts one message in Zenoh, or counts it as an echo not sent back.
    fn forward(
        &self,
        publisher: &zenoh::pubsub::Publisher<'_>,
        flow: &Flow,
        send: bool,
        bytes: &[u8],
    ) {
        if !send {
            flow.echoes.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match publisher.put(bytes).wait() {
            Ok(()) => {
                flow.messages.fetch_add(1, Ordering::Relaxed);
                flow.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            }
            Err(_) => {
                flow.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
