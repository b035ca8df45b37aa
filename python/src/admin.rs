//! `ferry.topics()` and `ferry.stats()`: what `ferry topics --json` and `ferry stats --json`
//! print, as Python lists of dicts (the same keys).

use ferry::admin::{
    DiscoveryRefusals, PublisherStats, Refusal, Refusals, SubscriberStats, TopicSnapshot,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors;

fn delivery(reliable: bool) -> &'static str {
    if reliable {
        "reliable"
    } else {
        "latest"
    }
}

fn refusals<'py>(py: Python<'py>, r: &Refusals) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for why in Refusal::ALL {
        d.set_item(why.name(), r.get(why))?;
    }
    d.set_item("total", r.total())?;
    Ok(d)
}

fn discovery<'py>(py: Python<'py>, r: &DiscoveryRefusals) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("malformed", r.malformed)?;
    d.set_item("not-allowed", r.not_allowed)?;
    d.set_item("over-limit", r.over_limit)?;
    d.set_item("unauthenticated", r.unauthenticated)?;
    d.set_item("total", r.total())?;
    Ok(d)
}

/// A dict of what those of a publisher and of a subscriber begin with: its slot, who holds it and
/// how it is reached (`PublisherStats` and `SubscriberStats` name these fields alike).
macro_rules! end_dict {
    ($py:expr, $stats:expr) => {{
        let d = PyDict::new($py);
        d.set_item("slot", $stats.slot)?;
        d.set_item("node", &$stats.node)?;
        d.set_item("pid", $stats.pid)?;
        d.set_item("alive", $stats.alive)?;
        d.set_item("delivery", delivery($stats.reliable))?;
        d.set_item("transport", $stats.transport)?;
        d.set_item("multicast", $stats.multicast)?;
        d.set_item("udp", $stats.udp.map(|a| a.to_string()))?;
        d
    }};
}

/// Sets each field named as the item of the same name: `d[name] = from.name`.
macro_rules! set_fields {
    ($d:ident, $from:ident; $($field:ident),* $(,)?) => {
        $($d.set_item(stringify!($field), $from.$field)?;)*
    };
}

fn publisher<'py>(py: Python<'py>, p: &PublisherStats) -> PyResult<Bound<'py, PyDict>> {
    let d = end_dict!(py, p);
    d.set_item("ring_bytes", p.capacity)?;
    d.set_item("max_message_bytes", p.max_message)?;
    set_fields!(d, p; sent, bytes, waits, timeouts, evictions, deadline_missed, other_type,
        retransmitted, kernel_drops, send_errors);
    d.set_item("refused", refusals(py, &p.refused)?)?;
    set_fields!(d, p; repairs_deferred, challenges_withheld);
    d.set_item("discovery_refused", discovery(py, &p.discovery_refused)?)?;
    let c = &p.congestion;
    set_fields!(d, c; repair_bytes, repairs_suppressed);
    d.set_item("pacing_rate_bytes_per_s", c.pacing_rate)?;
    d.set_item("bottleneck_rate_bytes_per_s", c.bottleneck_rate)?;
    set_fields!(d, c; min_rtt_ns, foreign_queue_ns, paced_waits, window_waits, congestion_events,
        noise_loss_events, queue_events, datagrams, batches, batched_messages, left_out);
    Ok(d)
}

fn subscriber<'py>(py: Python<'py>, s: &SubscriberStats) -> PyResult<Bound<'py, PyDict>> {
    let d = end_dict!(py, s);
    set_fields!(d, s; received, bytes, skipped, deadline_missed, other_type, waits, lost);
    d.set_item("refused", refusals(py, &s.refused)?)?;
    set_fields!(d, s; kernel_drops, evicted, replies_withheld, sessions_evicted);
    d.set_item("discovery_refused", discovery(py, &s.discovery_refused)?)?;
    Ok(d)
}

fn type_dict<'py>(py: Python<'py>, t: &ferry::TopicType) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", t.name())?;
    d.set_item("encoding", t.encoding().name())?;
    d.set_item("schema_encoding", t.encoding().schema_encoding())?;
    d.set_item("schema_bytes", t.schema().len())?;
    d.set_item("hash", format!("{:016x}", t.hash()))?;
    Ok(d)
}

fn topic<'py>(py: Python<'py>, t: &TopicSnapshot) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("domain", &t.domain)?;
    d.set_item("topic", &t.topic)?;
    // The transports of a topic's publishers ("shm" for a topic with none yet), as the CLI says.
    d.set_item(
        "transport",
        t.publishers.first().map_or("shm", |p| p.transport),
    )?;
    // The topic's type, as `ferry topics --json` gives it (and why it cannot be read, only when
    // it cannot).
    match &t.topic_type {
        Ok(ty) => d.set_item("type", ty.as_ref().map(|ty| type_dict(py, ty)).transpose()?)?,
        Err(why) => {
            d.set_item("type", py.None())?;
            d.set_item("type_error", why)?;
        }
    }
    let pubs = t
        .publishers
        .iter()
        .map(|p| publisher(py, p))
        .collect::<PyResult<Vec<_>>>()?;
    let subs = t
        .subscribers
        .iter()
        .map(|s| subscriber(py, s))
        .collect::<PyResult<Vec<_>>>()?;
    d.set_item("publishers", pubs)?;
    d.set_item("subscribers", subs)?;
    Ok(d)
}

/// Snapshots of the live topics (of one domain, or all), sorted; segments that cannot be read
/// are skipped, as the CLI skips them (it names them on standard error).
fn snapshots(py: Python<'_>, domain: Option<&str>) -> PyResult<Vec<TopicSnapshot>> {
    let entries = py
        .detach(|| ferry::admin::list_topics(domain))
        .map_err(errors::ferry)?;
    let mut topics: Vec<TopicSnapshot> = entries.into_iter().filter_map(Result::ok).collect();
    topics.sort_by(|a, b| (&a.domain, &a.topic).cmp(&(&b.domain, &b.topic)));
    Ok(topics)
}

/// The live topics on this host (of `domain`, or of every domain) with their publishers and
/// subscribers: a list of dicts with the keys of `ferry topics --json`.
#[pyfunction]
#[pyo3(signature = (domain=None))]
pub fn topics<'py>(py: Python<'py>, domain: Option<&str>) -> PyResult<Vec<Bound<'py, PyDict>>> {
    snapshots(py, domain)?
        .iter()
        .map(|t| topic(py, t))
        .collect()
}

/// Counters per publisher and subscriber (of `topic` and/or `domain`, or of every topic), as
/// `ferry stats --json` prints them: a list of dicts, one per topic.
#[pyfunction]
#[pyo3(signature = (topic=None, domain=None))]
pub fn stats<'py>(
    py: Python<'py>,
    topic: Option<&str>,
    domain: Option<&str>,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let mut all = snapshots(py, domain)?;
    if let Some(name) = topic {
        all.retain(|t| t.topic == name);
    }
    all.iter().map(|t| self::topic(py, t)).collect()
}
