//! Services: a named request/response endpoint that one server serves and any number of clients
//! call, over shared memory on one host and UDP across hosts.
//!
//! A service is made of topics of ferry's own, so that it moves its bytes exactly as a topic
//! does (zero-copy rings, the UDP transport with its congestion control, pacing and domain key):
//!
//! - `.srv/<service>/req`: every client publishes its requests there, the server subscribes;
//! - `.srv/<service>/rsp/<client id>`: the server publishes that client's responses there, the
//!   client subscribes. A client id is 64 random bits, drawn when the client is made.
//!
//! Each request and response carries a 16-byte header (`wire.rs`): the client's id and the
//! request's id, so that a response reaches the request that asked for it and no other.
//! Delivery is always reliable (back-pressure on shared memory, retransmission on UDP).
//!
//! One server per service: a second server on the same host is refused (an advisory lock on the
//! request topic's directory segment, which the kernel lets go when its holder ends, `kill -9`
//! included); a client that sees servers on two hosts refuses to call. A client watches its
//! server while requests are pending: every [`WATCH_PERIOD`] it looks whether the server's
//! process still runs (one host) or is still announced (other hosts, whose entries expire after
//! two seconds unheard), and whether the server's stream of this client's responses went silent
//! past the client's `Qos::lease` (its heartbeats come from a thread of their own, busy server or
//! not), and ends every pending request with [`CallError::ServerGone`] when not.

mod client;
mod server;
// The header codec is not an API; the `internals` feature opens it to the fuzz target.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod wire;
#[cfg(not(feature = "internals"))]
pub(crate) mod wire;

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use client::{Client, RequestLoan, Response};
pub use server::{Request, Responded, ResponseLoan, ServeError, Server, MAX_CLIENTS};

use crate::shm::layout::SERVICE_COUNTERS;
use crate::{Error, RecvError, SendError, Subscriber};

/// The longest service name (bytes): a topic name leaves room for ferry's prefix and a client
/// id.
pub const MAX_SERVICE_NAME: usize = 64;

/// Bytes of the header ahead of every request's and response's body (a multiple of 8, so that
/// bodies stay 8-byte aligned).
pub const HEADER_BYTES: usize = wire::HEADER;

/// How often a client with pending requests looks whether its server still runs, and a server
/// whether its clients do.
pub const WATCH_PERIOD: Duration = Duration::from_millis(10);

/// How long a client waits for a server it can see to take its requests (to attach to the
/// client's ring, or to prove its address over UDP), and a server for a new client to take
/// its responses.
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(2);

/// The prefix of every topic ferry makes for services.
const PREFIX: &str = ".srv/";

/// Checks a service name: a valid topic name of at most 64 bytes, not beginning with `.`.
pub fn validate_service(service: &str) -> Result<(), Error> {
    if service.is_empty() || service.len() > MAX_SERVICE_NAME || service.starts_with('.') {
        return Err(Error::InvalidName {
            what: "service",
            name: service.to_owned(),
            reason: "must be 1 to 64 characters of letters, digits and _ - . /, not beginning \
                     with '.'",
        });
    }
    crate::shm::topic::validate_topic(service).map_err(|e| match e {
        Error::InvalidName { reason, .. } => Error::InvalidName {
            what: "service",
            name: service.to_owned(),
            reason,
        },
        other => other,
    })?;
    Ok(())
}

/// The topic a service's requests travel on.
pub(crate) fn request_topic(service: &str) -> String {
    format!("{PREFIX}{service}/req")
}

/// The topic one client's responses travel on.
pub(crate) fn response_topic(service: &str, client: u64) -> String {
    format!("{PREFIX}{service}/rsp/{client:016x}")
}

/// What a topic of ferry's own is to a service.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServiceTopic {
    /// The service's requests: its subscriber is the server, its publishers are the clients.
    Requests { service: String },
    /// One client's responses: its subscriber is that client, its publisher the server.
    Responses { service: String, client: ClientId },
}

impl ServiceTopic {
    /// Reads a topic name as a service's topic; `None` for an application's topic.
    pub fn parse(topic: &str) -> Option<ServiceTopic> {
        let rest = topic.strip_prefix(PREFIX)?;
        if let Some(service) = rest.strip_suffix("/req") {
            return Some(ServiceTopic::Requests {
                service: service.to_owned(),
            });
        }
        let (service, client) = rest.rsplit_once("/rsp/")?;
        let client = u64::from_str_radix(client, 16).ok()?;
        Some(ServiceTopic::Responses {
            service: service.to_owned(),
            client: ClientId(client),
        })
    }
}

/// A request's id, unique within its client (counted from 0). A server sees its low 32 bits,
/// which is all the header carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub(crate) u64);

impl RequestId {
    pub fn get(self) -> u64 {
        self.0
    }

    /// As the header carries it: the low 32 bits.
    fn wire(self) -> u32 {
        self.0 as u32
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A client's identity: 64 random bits drawn when it is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId(pub(crate) u64);

impl ClientId {
    pub fn get(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for ClientId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Where a response goes: the client and the request it answers. Kept by a server that answers
/// later ([`Server::respond`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReplyTo {
    pub client: ClientId,
    pub request: RequestId,
}

/// Errors of a service's client.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    #[error(
        "no server for service {service}: start one (`ferry serve {service}`), or let the client \
         wait for it (Client::wait_for_server)"
    )]
    NoServer { service: String },
    #[error(
        "the server of service {service} went away (its process ended, or it was no longer \
         heard from) before it answered request {request}"
    )]
    ServerGone { service: String, request: RequestId },
    #[error(
        "service {service} has {count} servers (on several hosts); a service has one server: \
         stop all but one"
    )]
    ManyServers { service: String, count: usize },
    #[error("request {request} of service {service} got no response within {after:?}")]
    Timeout {
        service: String,
        request: RequestId,
        after: Duration,
    },
    #[error(
        "the server of service {service} refused request {request}: its {len} bytes exceed the \
         server's limit of {max} bytes (raise the server's Qos::max_message_size)"
    )]
    TooLarge {
        service: String,
        request: RequestId,
        len: usize,
        max: usize,
    },
    #[error(transparent)]
    Send(#[from] SendError),
    #[error(transparent)]
    Recv(#[from] RecvError),
}

/// The counters of a service's end, kept in its subscriber's slot of the topic's directory so
/// that `ferry stats` reads them from outside. Indices of `SubscriberStats::service`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counter {
    /// Server: requests received; client: requests sent.
    Requests = 0,
    /// Server: responses sent; client: responses received.
    Responses = 1,
    /// Server: responses dropped because their client had gone; client: calls that timed out.
    DroppedOrTimeouts = 2,
    /// Server: requests refused as larger than it takes; client: requests ended by its server's
    /// departure.
    RefusedOrServerGone = 3,
    /// Server: malformed requests; client: malformed responses, responses for another client,
    /// and responses to no pending request (late, after a timeout).
    Malformed = 4,
}

/// A service end's counters as `ferry stats` shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServiceCounters {
    /// Server: received; client: sent.
    pub requests: u64,
    /// Server: sent; client: received.
    pub responses: u64,
    /// Server: responses dropped because their client had gone.
    pub dropped: u64,
    /// Server: requests refused as too large.
    pub refused: u64,
    /// Client: calls that timed out.
    pub timeouts: u64,
    /// Client: requests ended by the server's departure.
    pub server_gone: u64,
    /// Malformed requests (server), or malformed, misdirected or late responses (client).
    pub malformed: u64,
}

impl ServiceCounters {
    /// The counters of a server (`server` true) or a client from a slot's raw values.
    pub fn from_raw(server: bool, raw: &[u64; SERVICE_COUNTERS]) -> ServiceCounters {
        let mut c = ServiceCounters {
            requests: raw[Counter::Requests as usize],
            responses: raw[Counter::Responses as usize],
            malformed: raw[Counter::Malformed as usize],
            ..ServiceCounters::default()
        };
        let (a, b) = (
            raw[Counter::DroppedOrTimeouts as usize],
            raw[Counter::RefusedOrServerGone as usize],
        );
        if server {
            (c.dropped, c.refused) = (a, b);
        } else {
            (c.timeouts, c.server_gone) = (a, b);
        }
        c
    }
}

/// Sums the counters of two slots of one end (an `auto` end has a slot per transport).
impl std::ops::AddAssign for ServiceCounters {
    fn add_assign(&mut self, other: ServiceCounters) {
        self.requests += other.requests;
        self.responses += other.responses;
        self.dropped += other.dropped;
        self.refused += other.refused;
        self.timeouts += other.timeouts;
        self.server_gone += other.server_gone;
        self.malformed += other.malformed;
    }
}

/// The body of a request's or an answer's loan (a field `loan`, a topic's loan whose first
/// `HEADER` bytes are the service's header, written at send): `as_mut_slice`, `len` and
/// `is_empty` of what follows the header.
macro_rules! body_of_loan {
    ($what:literal) => {
        #[doc = concat!("The ", $what, "'s bytes to fill in (they hold what was there before: write every byte).")]
        pub fn as_mut_slice(&mut self) -> &mut [u8] {
            &mut self.loan.as_mut_slice()[HEADER..]
        }

        #[doc = concat!("The ", $what, "'s length in bytes.")]
        pub fn len(&self) -> usize {
            self.loan.len() - HEADER
        }

        #[doc = concat!("Whether the ", $what, " is empty.")]
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }
    };
}
use body_of_loan;

/// A service end's counters in its subscriber's directory slot.
#[derive(Clone, Copy)]
struct Counters(NonNull<[AtomicU64; SERVICE_COUNTERS]>);

// SAFETY: the counters are atomics in a shared mapping; any thread may bump them.
unsafe impl Send for Counters {}
// SAFETY: as above: only atomic operations go through the pointer.
unsafe impl Sync for Counters {}

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Counters")
    }
}

impl Counters {
    /// The counters of `sub`'s slot. The owner keeps `sub` (and so its mapping of the
    /// directory, which never moves) for as long as it uses these.
    fn of(sub: &Subscriber) -> Counters {
        Counters(NonNull::from(&sub.slot().service))
    }

    /// Adds `n`. Each end is the only writer of its slot's counters (a `Client` or `Server` is
    /// used through `&mut self`), so a load and a store do, without a locked read-modify-write on
    /// the message path; readers (`ferry stats`) see each value whole.
    fn add(&self, counter: Counter, n: u64) {
        // SAFETY: the pointer is into the directory mapping of a subscriber that the service end
        // holding these counters owns and drops after them (see `Client` and `Server`).
        let counters = unsafe { self.0.as_ref() };
        let c = &counters[counter as usize];
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }
}

impl crate::Node {
    /// The server of `service`. Requests larger than `qos.max_message_size` are refused with
    /// an error the client sees; responses may be as large. Delivery is reliable whatever `qos`
    /// says. Fails with [`Error::ServiceTaken`] when the service has a server on this host.
    pub fn server(&self, service: &str, qos: &crate::Qos) -> Result<Server, Error> {
        Server::create(self, service, qos)
    }

    /// A client of `service`. Requests may be up to `qos.max_message_size` bytes. Delivery is
    /// reliable whatever `qos` says.
    pub fn client(&self, service: &str, qos: &crate::Qos) -> Result<Client, Error> {
        Client::create(self, service, qos)
    }
}

/// A wait of at most `timeout` (none: no end) in slices of at most `max_slice`, between which the
/// caller looks after its peer. The clock is first read when the first slice has ended, so that
/// a message already there, or one that comes during the first slice, costs no clock read; the
/// wait may then run over its timeout by up to that slice.
struct SlicedWait {
    timeout: Option<Duration>,
    max_slice: Duration,
    /// When the wait (as far as it is counted) began, once the clock was read.
    started: Option<std::time::Instant>,
}

impl SlicedWait {
    #[inline]
    fn new(timeout: Option<Duration>, max_slice: Duration) -> SlicedWait {
        SlicedWait {
            timeout,
            max_slice,
            started: None,
        }
    }

    /// How long the next slice may wait.
    #[inline]
    fn slice(&self) -> Duration {
        let left = match (self.started, self.timeout) {
            (_, None) => return self.max_slice,
            (None, Some(t)) => t,
            (Some(s), Some(t)) => t.saturating_sub(s.elapsed()),
        };
        left.min(self.max_slice)
    }

    /// After a slice: true when the timeout has passed.
    #[inline]
    fn expired(&mut self) -> bool {
        let now = std::time::Instant::now();
        let started = *self.started.get_or_insert(now);
        self.timeout
            .is_some_and(|t| now.saturating_duration_since(started) >= t)
    }
}

/// The QoS of a service's topics: the user's, reliable, with room for the header.
fn topic_qos(qos: &crate::Qos) -> Result<crate::Qos, Error> {
    let max = qos
        .max_message_size
        .checked_add(wire::HEADER)
        .filter(|&m| m <= u32::MAX as usize - 64)
        .ok_or_else(|| {
            Error::InvalidQos(format!(
                "max_message_size {} leaves no room for a service's {}-byte header",
                qos.max_message_size,
                wire::HEADER
            ))
        })?;
    Ok(qos
        .clone()
        .delivery(crate::Delivery::Reliable)
        .max_message_size(max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counters_of_an_ends_two_slots_add_up_field_by_field() {
        let mut server = ServiceCounters::from_raw(true, &[1, 2, 3, 4, 5, 0]);
        server += ServiceCounters::from_raw(true, &[10, 20, 30, 40, 50, 0]);
        assert_eq!(
            server,
            ServiceCounters::from_raw(true, &[11, 22, 33, 44, 55, 0])
        );
        let mut client = ServiceCounters::from_raw(false, &[1, 2, 3, 4, 5, 0]);
        client += client;
        assert_eq!(
            client,
            ServiceCounters::from_raw(false, &[2, 4, 6, 8, 10, 0])
        );
        assert_eq!(
            (client.timeouts, client.server_gone, client.dropped),
            (6, 8, 0)
        );
    }

    #[test]
    fn service_topics_name_and_parse() {
        assert_eq!(request_topic("map/tile"), ".srv/map/tile/req");
        assert_eq!(
            ServiceTopic::parse(&request_topic("map/tile")),
            Some(ServiceTopic::Requests {
                service: "map/tile".into()
            })
        );
        assert_eq!(
            ServiceTopic::parse(&response_topic("a/rsp/b", 0xab)),
            Some(ServiceTopic::Responses {
                service: "a/rsp/b".into(),
                client: ClientId(0xab)
            })
        );
        assert_eq!(ServiceTopic::parse("map/tile"), None);
        assert_eq!(ServiceTopic::parse(".srv/x/rsp/nothex"), None);
        let longest = "s".repeat(MAX_SERVICE_NAME);
        validate_service(&longest).unwrap();
        crate::shm::topic::validate_topic(&response_topic(&longest, u64::MAX)).unwrap();
        assert!(validate_service(&format!("{longest}s")).is_err());
        assert!(validate_service(".hidden").is_err());
        assert!(validate_service("").is_err());
        for bad in ["/map", "map/", "map//tile"] {
            let e = validate_service(bad).unwrap_err().to_string();
            assert!(
                e.contains("invalid service name") && e.contains("empty level"),
                "{e}"
            );
        }
        let e = validate_service("a b").unwrap_err().to_string();
        assert!(
            e.contains("invalid service name") && e.contains("may hold only"),
            "{e}"
        );
    }

    #[test]
    fn counters_read_by_role() {
        let raw = [1, 2, 3, 4, 5, 0];
        let server = ServiceCounters::from_raw(true, &raw);
        assert_eq!((server.dropped, server.refused, server.timeouts), (3, 4, 0));
        let client = ServiceCounters::from_raw(false, &raw);
        assert_eq!(
            (client.timeouts, client.server_gone, client.dropped),
            (3, 4, 0)
        );
        assert_eq!(
            (client.requests, client.responses, client.malformed),
            (1, 2, 5)
        );
    }
}
