//! `ferry.Node` and `ferry.Qos`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::args::seconds;
use crate::errors;
use crate::publisher::Publisher;
use crate::service::{Client, Server};
use crate::subscriber::Subscriber;

fn choice<T: Copy>(what: &str, given: &str, options: &[(&str, T)]) -> PyResult<T> {
    options
        .iter()
        .find(|(name, _)| *name == given)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<String> = options.iter().map(|(n, _)| format!("{n:?}")).collect();
            PyValueError::new_err(format!(
                "{what} must be one of {}, not {given:?}",
                names.join(", ")
            ))
        })
}

const TRANSPORTS: &[(&str, ferry::Transport)] = &[
    ("auto", ferry::Transport::Auto),
    ("shm", ferry::Transport::Shm),
    ("udp", ferry::Transport::Udp),
];
const DELIVERIES: &[(&str, ferry::Delivery)] = &[
    ("reliable", ferry::Delivery::Reliable),
    ("latest", ferry::Delivery::Latest),
];
const WAITS: &[(&str, ferry::WaitStrategy)] = &[
    ("spin", ferry::WaitStrategy::Spin),
    ("block", ferry::WaitStrategy::Block),
    ("adaptive", ferry::WaitStrategy::Adaptive),
];
const IP_VERSIONS: &[(&str, ferry::IpVersion)] =
    &[("v4", ferry::IpVersion::V4), ("v6", ferry::IpVersion::V6)];

fn name_of<T: PartialEq>(options: &[(&'static str, T)], v: &T) -> &'static str {
    options.iter().find(|(_, o)| o == v).map_or("?", |(n, _)| n)
}

/// The settings of a publisher, subscriber, server or client (ferry's `Qos`). Keyword arguments
/// only; what is not given keeps ferry's default.
#[pyclass(frozen, module = "ferry", name = "Qos")]
pub struct Qos {
    pub inner: ferry::Qos,
}

#[pymethods]
impl Qos {
    #[new]
    #[pyo3(signature = (*, transport="auto", delivery="reliable", wait="adaptive",
        max_message_size=None, ring_capacity=None, max_ring_capacity=None, send_timeout=None,
        spin_window=None, mtu=None, ip_version="v4", max_sessions=None, max_receivers=None,
        max_rate=None, multicast=None, multicast_interface=None, multicast_ttl=1,
        deadline=None, history=0, lease=None, max_held=None, topic_type=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        transport: &str,
        delivery: &str,
        wait: &str,
        max_message_size: Option<usize>,
        ring_capacity: Option<usize>,
        max_ring_capacity: Option<usize>,
        send_timeout: Option<f64>,
        spin_window: Option<f64>,
        mtu: Option<usize>,
        ip_version: &str,
        max_sessions: Option<usize>,
        max_receivers: Option<usize>,
        max_rate: Option<u64>,
        multicast: Option<&str>,
        multicast_interface: Option<&str>,
        multicast_ttl: u32,
        deadline: Option<f64>,
        history: usize,
        lease: Option<f64>,
        max_held: Option<usize>,
        topic_type: Option<PyRef<'_, crate::typed::TopicType>>,
    ) -> PyResult<Qos> {
        let mut q = ferry::Qos::default()
            .transport(choice("transport", transport, TRANSPORTS)?)
            .delivery(choice("delivery", delivery, DELIVERIES)?)
            .wait(choice("wait", wait, WAITS)?)
            .ip_version(choice("ip_version", ip_version, IP_VERSIONS)?);
        if let Some(v) = max_message_size {
            q = q.max_message_size(v);
        }
        if let Some(v) = ring_capacity {
            q = q.ring_capacity(v);
        }
        if let Some(v) = max_ring_capacity {
            q = q.max_ring_capacity(v);
        }
        if let Some(v) = send_timeout {
            q = q.send_timeout(seconds("send_timeout", v)?);
        }
        if let Some(v) = spin_window {
            q = q.spin_window(seconds("spin_window", v)?);
        }
        if let Some(v) = mtu {
            q = q.mtu(v);
        }
        if let Some(v) = max_sessions {
            q = q.max_sessions(v);
        }
        if let Some(v) = max_receivers {
            q = q.max_receivers(v);
        }
        if let Some(v) = max_rate {
            q = q.max_rate(v);
        }
        if let Some(v) = deadline {
            q = q.deadline(seconds("deadline", v)?);
        }
        if let Some(v) = lease {
            q = q.lease(seconds("lease", v)?);
        }
        if let Some(v) = max_held {
            q = q.max_held(v);
        }
        q = q.history(history);
        q.topic_type = topic_type.map(|t| t.inner.clone());
        match multicast {
            Some(group) => {
                let m = ferry::MulticastGroup::parse(group, multicast_interface, multicast_ttl)
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
                q = q.multicast(m);
            }
            None if multicast_interface.is_some() => {
                return Err(PyValueError::new_err(
                    "multicast_interface is given without a multicast group",
                ))
            }
            None => {}
        }
        Ok(Qos { inner: q })
    }

    /// The type this end declares (None: it takes the topic as it is).
    #[getter]
    fn topic_type(&self) -> Option<crate::typed::TopicType> {
        self.inner
            .topic_type
            .clone()
            .map(|inner| crate::typed::TopicType { inner })
    }

    #[getter]
    fn transport(&self) -> &'static str {
        name_of(TRANSPORTS, &self.inner.transport)
    }
    #[getter]
    fn delivery(&self) -> &'static str {
        name_of(DELIVERIES, &self.inner.delivery)
    }
    #[getter]
    fn wait(&self) -> &'static str {
        name_of(WAITS, &self.inner.wait)
    }
    #[getter]
    fn max_message_size(&self) -> usize {
        self.inner.max_message_size
    }
    #[getter]
    fn ring_capacity(&self) -> usize {
        self.inner.ring_capacity
    }
    #[getter]
    fn max_ring_capacity(&self) -> usize {
        self.inner.max_ring_capacity
    }
    #[getter]
    fn send_timeout(&self) -> f64 {
        self.inner.send_timeout.as_secs_f64()
    }
    /// Messages a publisher keeps for subscribers that start later; for a subscriber, how many
    /// of them it takes first (shared memory).
    #[getter]
    fn history(&self) -> usize {
        self.inner.history
    }
    /// Subscriber: samples held at once while views of them exist (the latest included).
    #[getter]
    fn max_held(&self) -> usize {
        self.inner.max_held
    }
    /// UDP subscriber: seconds without a word from a publisher after which it is gone.
    #[getter]
    fn lease(&self) -> f64 {
        self.inner.lease.as_secs_f64()
    }
    /// The deadline period in seconds, or None.
    #[getter]
    fn deadline(&self) -> Option<f64> {
        self.inner.deadline.map(|d| d.as_secs_f64())
    }
    #[getter]
    fn spin_window(&self) -> f64 {
        self.inner.spin_window.as_secs_f64()
    }
    #[getter]
    fn mtu(&self) -> usize {
        self.inner.mtu
    }
    #[getter]
    fn ip_version(&self) -> &'static str {
        name_of(IP_VERSIONS, &self.inner.ip_version)
    }
    #[getter]
    fn max_sessions(&self) -> usize {
        self.inner.max_sessions
    }
    #[getter]
    fn max_receivers(&self) -> usize {
        self.inner.max_receivers
    }
    /// UDP: the multicast group data goes to, as "address:port", or None.
    #[getter]
    fn multicast(&self) -> Option<String> {
        self.inner
            .multicast
            .map(|m| std::net::SocketAddr::new(m.group, m.port).to_string())
    }
    /// UDP: the interface of the multicast group (an IPv4 address or an IPv6 interface index),
    /// or None where there is no group.
    #[getter]
    fn multicast_interface(&self) -> Option<String> {
        self.inner.multicast.map(|m| match m.interface {
            ferry::MulticastInterface::V4(a) => a.to_string(),
            ferry::MulticastInterface::V6(i) => i.to_string(),
        })
    }
    /// UDP: the TTL or hop limit of multicast data, or None where there is no group.
    #[getter]
    fn multicast_ttl(&self) -> Option<u32> {
        self.inner.multicast.map(|m| m.ttl)
    }
    /// UDP publisher: the most bits per second it puts on the wire, or None (no cap).
    #[getter]
    fn max_rate(&self) -> Option<u64> {
        self.inner.max_rate
    }

    fn __repr__(&self) -> String {
        format!(
            "ferry.Qos(transport={:?}, delivery={:?}, wait={:?}, max_message_size={}, \
             ring_capacity={}, send_timeout={})",
            self.transport(),
            self.delivery(),
            self.wait(),
            self.inner.max_message_size,
            self.inner.ring_capacity,
            self.send_timeout()
        )
    }
}

/// One participant (usually one process) with a name, in a domain: `FERRY_DOMAIN`, or
/// `default`, unless `domain` is given. The other `FERRY_*` variables apply as in Rust.
#[pyclass(frozen, module = "ferry", name = "Node")]
pub struct Node {
    inner: ferry::Node,
}

impl Node {
    /// Makes one of this node's ends with the GIL released (making one may wait: joining a
    /// group, asking the network).
    fn make<T: Send>(
        &self,
        py: Python<'_>,
        make: impl FnOnce(&ferry::Node) -> Result<T, ferry::Error> + Send,
    ) -> PyResult<T> {
        let node = &self.inner;
        py.detach(|| make(node)).map_err(errors::ferry)
    }
}

/// ferry's QoS of `qos`, its default when None.
fn qos_or_default(qos: Option<&Qos>) -> ferry::Qos {
    qos.map_or_else(ferry::Qos::default, |q| q.inner.clone())
}

#[pymethods]
impl Node {
    #[new]
    #[pyo3(signature = (name, domain=None))]
    fn new(name: &str, domain: Option<&str>) -> PyResult<Node> {
        let inner = match domain {
            Some(d) => ferry::Node::with_domain(name, d),
            None => ferry::Node::new(name),
        }
        .map_err(errors::ferry)?;
        Ok(Node { inner })
    }

    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    #[getter]
    fn domain(&self) -> &str {
        self.inner.domain()
    }

    /// Whether this node's UDP traffic is sealed with a domain key (`FERRY_KEY_FILE`).
    #[getter]
    fn keyed(&self) -> bool {
        self.inner.keyed()
    }

    /// A publisher on `topic` (ferry's default QoS when `qos` is None).
    #[pyo3(signature = (topic, qos=None))]
    fn publisher(&self, py: Python<'_>, topic: &str, qos: Option<&Qos>) -> PyResult<Publisher> {
        let qos = qos_or_default(qos);
        let p = self.make(py, |node| node.publisher(topic, &qos))?;
        Ok(Publisher::new(p, &qos))
    }

    /// A subscriber on `topic`; it receives what is published from now on.
    #[pyo3(signature = (topic, qos=None))]
    fn subscriber(&self, py: Python<'_>, topic: &str, qos: Option<&Qos>) -> PyResult<Subscriber> {
        let qos = qos_or_default(qos);
        let held = crate::subscriber::checked_max_held(qos.max_held)?;
        // Samples given back in a call are let go after the one it keeps is kept (nothing may
        // borrow the subscriber while it lets go): ferry's own count runs up to twice this.
        let inner_qos = qos.clone().max_held(2 * held);
        let s = self.make(py, |node| node.subscriber(topic, &inner_qos))?;
        Ok(Subscriber::new(s, &qos))
    }

    /// The server of `service` (ferry's default QoS when `qos` is None; its max_message_size is
    /// the largest request it takes, and response it sends). Delivery is reliable whatever
    /// `qos` says. Raises ferry.FerryError when the service has a server on this host.
    #[pyo3(signature = (service, qos=None))]
    fn server(&self, py: Python<'_>, service: &str, qos: Option<&Qos>) -> PyResult<Server> {
        let qos = qos_or_default(qos);
        let s = self.make(py, |node| node.server(service, &qos))?;
        Ok(Server::new(s, &qos))
    }

    /// A client of `service` (ferry's default QoS when `qos` is None; its max_message_size is
    /// the largest request it sends). Delivery is reliable whatever `qos` says.
    #[pyo3(signature = (service, qos=None))]
    fn client(&self, py: Python<'_>, service: &str, qos: Option<&Qos>) -> PyResult<Client> {
        let qos = qos_or_default(qos);
        let c = self.make(py, |node| node.client(service, &qos))?;
        Ok(Client::new(c, &qos))
    }

    fn __repr__(&self) -> String {
        format!(
            "ferry.Node({:?}, domain={:?})",
            self.inner.name(),
            self.inner.domain()
        )
    }
}
