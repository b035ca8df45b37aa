//! `ferry.Node` and `ferry.Qos`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::args::optional_seconds;
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

/// Applies each setting that was given (not None) to the Qos `q` by its method of the same
/// name; what was not given keeps ferry's default.
macro_rules! set_given {
    ($q:ident: $($setting:ident),* $(,)?) => {
        $(if let Some(v) = $setting {
            $q = $q.$setting(v);
        })*
    };
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

/// Declares Qos's `#[pymethods]`: a getter for each field listed, read from `inner` (`named`: by
/// its name in a table of choices, `copied`: as it is, `seconds`: a duration in seconds), then
/// the methods written out.
macro_rules! qos_pymethods {
    (
        named { $($named:ident in $table:ident,)* }
        copied { $($(#[$copied_doc:meta])* $copied:ident: $ty:ty,)* }
        seconds { $($(#[$seconds_doc:meta])* $seconds:ident,)* }
        $($methods:tt)*
    ) => {
        #[pymethods]
        impl Qos {
            $(
                #[getter]
                fn $named(&self) -> &'static str {
                    name_of($table, &self.inner.$named)
                }
            )*
            $(
                $(#[$copied_doc])*
                #[getter]
                fn $copied(&self) -> $ty {
                    self.inner.$copied
                }
            )*
            $(
                $(#[$seconds_doc])*
                #[getter]
                fn $seconds(&self) -> f64 {
                    self.inner.$seconds.as_secs_f64()
                }
            )*
            $($methods)*
        }
    };
}

qos_pymethods! {
    named {
        transport in TRANSPORTS,
        delivery in DELIVERIES,
        wait in WAITS,
        ip_version in IP_VERSIONS,
    }
    copied {
        max_message_size: usize,
        ring_capacity: usize,
        max_ring_capacity: usize,
        /// Messages a publisher keeps for subscribers that start later; for a subscriber, how many
        /// of them it takes first (shared memory).
        history: usize,
        /// Subscriber: samples held at once while views of them exist (the latest included).
        max_held: usize,
        mtu: usize,
        max_sessions: usize,
        max_receivers: usize,
        /// UDP publisher: the most bits per second it puts on the wire, or None (no cap).
        max_rate: Option<u64>,
    }
    seconds {
        send_timeout,
        spin_window,
        /// UDP subscriber: seconds without a word from a publisher after which it is gone.
        lease,
    }

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
        let send_timeout = optional_seconds("send_timeout", send_timeout)?;
        let spin_window = optional_seconds("spin_window", spin_window)?;
        let deadline = optional_seconds("deadline", deadline)?;
        let lease = optional_seconds("lease", lease)?;
        set_given!(q: max_message_size, ring_capacity, max_ring_capacity, send_timeout, spin_window,
            mtu, max_sessions, max_receivers, max_rate, deadline, lease, max_held);
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

    /// The deadline period in seconds, or None.
    #[getter]
    fn deadline(&self) -> Option<f64> {
        self.inner.deadline.map(|d| d.as_secs_f64())
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

    /// Makes an end under `qos` (ferry's default when None), as `make` does, and its Python
    /// class under the same QoS.
    fn end<E: Send, T>(
        &self,
        py: Python<'_>,
        qos: Option<&Qos>,
        make: impl FnOnce(&ferry::Node, &ferry::Qos) -> Result<E, ferry::Error> + Send,
        wrap: fn(E, &ferry::Qos) -> T,
    ) -> PyResult<T> {
        let qos = qos_or_default(qos);
        let end = self.make(py, |node| make(node, &qos))?;
        Ok(wrap(end, &qos))
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
        self.end(
            py,
            qos,
            |node, qos| node.publisher(topic, qos),
            Publisher::new,
        )
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
        self.end(py, qos, |node, qos| node.server(service, qos), Server::new)
    }

    /// A client of `service` (ferry's default QoS when `qos` is None; its max_message_size is
    /// the largest request it sends). Delivery is reliable whatever `qos` says.
    #[pyo3(signature = (service, qos=None))]
    fn client(&self, py: Python<'_>, service: &str, qos: Option<&Qos>) -> PyResult<Client> {
        self.end(py, qos, |node, qos| node.client(service, qos), Client::new)
    }

    fn __repr__(&self) -> String {
        format!(
            "ferry.Node({:?}, domain={:?})",
            self.inner.name(),
            self.inner.domain()
        )
    }
}
