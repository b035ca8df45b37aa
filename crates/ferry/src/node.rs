//! Nodes, publishers, subscribers: the API applications write against.
//!
//! The per-message methods (loan, send, receive, a sample's bytes, seq and drop) are
//! `#[inline]`: without it a caller in another crate, the C API's library above all, calls them
//! out of line and copies their results through memory (the C ping-pong took 1.2 × the Rust one
//! at 32 B; docs/RESULTS.md, "C API overhead").

use std::marker::PhantomData;
use std::time::{Duration, Instant};

use crate::pod::{self, Pod};
use crate::shm::ring::Reservation;
use crate::shm::{ShmPublisher, ShmSubscriber};
use crate::udp::{UdpPublisher, UdpSubscriber};
#[cfg(doc)]
use crate::Gone;
use crate::{DomainKey, Error, Event, NodeConfig, PodError, Qos, RecvError, SendError, Transport};
use std::sync::Arc;

use crate::deadline::Deadline;
use crate::event::{Events, PublisherId};

/// Every loaned payload starts at a multiple of this: ring records are 8-byte aligned with a
/// 16-byte header, and UDP buffers are heap allocations (16-byte aligned).
const PAYLOAD_ALIGN: usize = 8;

/// One participant, usually one process, with a name. Topics of one domain see each other;
/// domains keep test runs and separate systems apart. Its settings are a [`NodeConfig`].
#[derive(Debug, Clone)]
pub struct Node {
    name: String,
    config: Arc<NodeConfig>,
}

impl Node {
    /// A node set up as the `FERRY_*` variables say ([`NodeConfig::from_env`]): in the domain
    /// `FERRY_DOMAIN` names, or `default`, with the domain key of `FERRY_KEY_FILE` if that is
    /// set.
    pub fn new(name: &str) -> Result<Node, Error> {
        Node::with_config(name, NodeConfig::from_env()?)
    }

    /// As [`Node::new`], in an explicit domain.
    pub fn with_domain(name: &str, domain: &str) -> Result<Node, Error> {
        Node::with_config(name, NodeConfig::from_env()?.with_domain(domain))
    }

    /// As [`Node::new`], in an explicit domain, with UDP traffic (frames and discovery)
    /// authenticated and encrypted with `key` (`None`: in the clear, whatever `FERRY_KEY_FILE`
    /// says, which is not read). Every node of the domain must use the same key; datagrams
    /// without it are refused and counted.
    pub fn with_key(name: &str, domain: &str, key: Option<DomainKey>) -> Result<Node, Error> {
        let config = NodeConfig::from_env_without_key()?
            .with_domain(domain)
            .with_key(key);
        Node::with_config(name, config)
    }

    /// A node set up as `config` says, whatever the environment says. Fails if a setting is
    /// invalid (the domain's name, the shared-memory mode, a key in a build without the
    /// `domain-key` feature, discovery's addresses).
    pub fn with_config(name: &str, config: NodeConfig) -> Result<Node, Error> {
        if name.is_empty() || name.len() > crate::shm::layout::MAX_NODE_NAME || name.contains('\0')
        {
            return Err(Error::InvalidName {
                what: "node",
                name: name.to_owned(),
                reason: "must be 1 to 32 bytes without NUL",
            });
        }
        Ok(Node {
            name: name.to_owned(),
            config: Arc::new(config.validated()?),
        })
    }

    /// Whether this node's UDP traffic is sealed with a domain key.
    pub fn keyed(&self) -> bool {
        self.config.key().is_some()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn domain(&self) -> &str {
        self.config.domain()
    }

    /// The settings this node was made with.
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// A publisher on `topic`.
    pub fn publisher(&self, topic: &str, qos: &Qos) -> Result<Publisher, Error> {
        refuse_reserved(topic)?;
        self.open_publisher(topic, qos)
    }

    /// A publisher on any topic, ferry's own included (a service's request and response
    /// topics).
    pub(crate) fn open_publisher(&self, topic: &str, qos: &Qos) -> Result<Publisher, Error> {
        let deadline = qos.checked_deadline()?;
        qos.checked_history()?;
        let (c, n) = (&*self.config, &self.name);
        let (d, m) = (c.domain(), c.shm_mode());
        let inner = match qos.transport {
            Transport::Shm => PubInner::Shm(ShmPublisher::create(d, topic, n, qos, m)?),
            Transport::Udp => PubInner::Udp(UdpPublisher::create(c, topic, n, qos)?),
            Transport::Auto => PubInner::Auto(
                ShmPublisher::create(d, topic, n, qos, m)?,
                UdpPublisher::create(c, topic, n, qos)?,
            ),
        };
        Ok(Publisher {
            inner,
            topic: topic.to_owned(),
            deadline: deadline.map(|d| Deadline::new(d, Instant::now())),
        })
    }

    /// A subscriber on `topic`. It receives what is published from now on.
    pub fn subscriber(&self, topic: &str, qos: &Qos) -> Result<Subscriber, Error> {
        refuse_reserved(topic)?;
        self.open_subscriber(topic, qos)
    }

    /// A subscriber on any topic, ferry's own included.
    pub(crate) fn open_subscriber(&self, topic: &str, qos: &Qos) -> Result<Subscriber, Error> {
        let deadline = qos.checked_deadline()?;
        qos.checked_history()?;
        qos.checked_lease()?;
        let max_held = qos.checked_max_held()?;
        let (c, n) = (&*self.config, &self.name);
        let (d, m) = (c.domain(), c.shm_mode());
        let inner = match qos.transport {
            Transport::Shm => SubInner::Shm(ShmSubscriber::create(d, topic, n, qos, m)?),
            Transport::Udp => SubInner::Udp(Box::new(UdpSubscriber::create(c, topic, n, qos)?)),
            Transport::Auto => SubInner::Auto(
                ShmSubscriber::create(d, topic, n, qos, m)?,
                Box::new(UdpSubscriber::create(c, topic, n, qos)?),
            ),
        };
        Ok(Subscriber {
            inner,
            topic: topic.to_owned(),
            deadline: deadline.map(|d| Deadline::new(d, Instant::now())),
            events: Events::default(),
            event_wakeups: false,
            keeping: Keeping {
                owner: SUBSCRIBERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
                max_held,
                kept: 0,
            },
        })
    }
}

/// Topics whose name begins with `.` are ferry's own (a service's requests and responses):
/// applications reach them through [`Node::server`] and [`Node::client`].
fn refuse_reserved(topic: &str) -> Result<(), Error> {
    if topic.starts_with('.') {
        return Err(Error::InvalidName {
            what: "topic",
            name: topic.to_owned(),
            reason: "names beginning with '.' are ferry's own (services): a service is served \
                     and called with Node::server and Node::client (`ferry serve`, `ferry call`)",
        });
    }
    Ok(())
}

/// Writes messages to a topic.
#[derive(Debug)]
pub struct Publisher {
    inner: PubInner,
    topic: String,
    /// `Qos::deadline`: the periods it let pass without sending.
    deadline: Option<Deadline>,
}

// The shared-memory publisher is the latency-critical path: kept inline, not boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum PubInner {
    Shm(ShmPublisher),
    Udp(UdpPublisher),
    /// Shared memory for this host's subscribers, UDP for the others, at once.
    Auto(ShmPublisher, UdpPublisher),
}

impl Publisher {
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The largest message this publisher can send.
    pub fn max_message_size(&self) -> usize {
        match &self.inner {
            PubInner::Shm(p) | PubInner::Auto(p, _) => p.max_message(),
            PubInner::Udp(p) => p.max_message(),
        }
    }

    /// The ids a subscriber's [`Sample::publisher`] reports for this publisher's messages: one,
    /// or two for an `auto` publisher (its shared-memory token and its UDP session). A bridge
    /// that subscribes to the topics it publishes into tells its own messages apart with them.
    pub fn ids(&self) -> Vec<PublisherId> {
        let shm = |p: &ShmPublisher| PublisherId::shm(p.token());
        let udp = |p: &UdpPublisher| PublisherId::udp(p.session());
        match &self.inner {
            PubInner::Shm(p) => vec![shm(p)],
            PubInner::Udp(u) => vec![udp(u)],
            PubInner::Auto(p, u) => vec![shm(p), udp(u)],
        }
    }

    /// Subscribers currently attached (shared memory) or known (UDP).
    pub fn subscriber_count(&self) -> usize {
        match &self.inner {
            PubInner::Shm(p) => p.subscriber_count(),
            PubInner::Udp(p) => p.subscriber_count(),
            PubInner::Auto(p, u) => p.subscriber_count() + u.subscriber_count(),
        }
    }

    /// Subscribers that take what is sent now: attached to the ring (those whose process ended
    /// let go first), and over UDP those it sends to. Looks at /proc: not per message.
    pub(crate) fn ready_subscribers(&self) -> usize {
        match &self.inner {
            PubInner::Shm(p) => p.live_subscriber_count(),
            PubInner::Udp(u) => u.subscriber_count(),
            PubInner::Auto(p, u) => p.live_subscriber_count() + u.subscriber_count(),
        }
    }

    /// Processes with a live subscriber this publisher reaches: in the topic's directory (over
    /// UDP, of this host only) and, over UDP, announced by other hosts. Looks at /proc: not per
    /// message.
    pub(crate) fn known_subscribers(&self) -> usize {
        use crate::shm::topic::{TRANSPORT_SHM, TRANSPORT_UDP};
        match &self.inner {
            PubInner::Shm(p) => p.topic().live_subscriber_processes(TRANSPORT_SHM, false),
            PubInner::Udp(u) => {
                u.topic().live_subscriber_processes(TRANSPORT_UDP, true)
                    + u.remote_subscriber_count()
            }
            PubInner::Auto(p, u) => {
                p.topic()
                    .live_subscriber_processes(TRANSPORT_SHM | TRANSPORT_UDP, true)
                    + u.remote_subscriber_count()
            }
        }
    }

    /// Who holds this publisher back when a send waits (for a note to its user): the
    /// subscribers of this host whose place in the ring leaves no room for a `len`-byte
    /// message, and over UDP the subscriber furthest behind. Empty when none does (over UDP the
    /// link itself may be what holds a send back). Looks at the ring's readers and the topic's
    /// directory: for a send that waited, not per message.
    pub fn holding_back(&self, len: usize) -> Vec<String> {
        let udp = |u: &UdpPublisher| u.slowest_subscriber().into_iter();
        match &self.inner {
            PubInner::Shm(p) => p.holders(len),
            PubInner::Udp(u) => udp(u).collect(),
            PubInner::Auto(p, u) => p.holders(len).into_iter().chain(udp(u)).collect(),
        }
    }

    /// Messages sent so far.
    pub fn sent(&self) -> u64 {
        match &self.inner {
            PubInner::Shm(p) | PubInner::Auto(p, _) => p.sent(),
            PubInner::Udp(p) => p.sent(),
        }
    }

    /// Waits until every live reliable subscriber has taken everything sent so far, at most
    /// `timeout`. Over UDP a message sent is still on its way (or being repaired) when `send`
    /// returns; over shared memory it is in the ring, where a subscriber that has not attached
    /// the ring yet (it was there before this publisher, but has not looked since) has not read
    /// it. Call this before the process exits so that nothing sent is lost unreported (dropping
    /// a publisher lingers too, but only up to `Qos::send_timeout` and without a word).
    /// `SendError::Undelivered` says how many subscribers had not taken everything.
    pub fn flush(&mut self, timeout: Duration) -> Result<(), SendError> {
        match &self.inner {
            PubInner::Shm(p) => p.flush(timeout),
            PubInner::Udp(u) => u.flush(timeout),
            PubInner::Auto(p, u) => {
                let start = Instant::now();
                p.flush(timeout)?;
                u.flush(timeout.saturating_sub(start.elapsed()))
            }
        }
    }

    /// Dropping it will not wait for its subscribers to take what it sent (a service client's
    /// requests: nobody answers them once the client has gone).
    pub(crate) fn no_linger(&mut self) {
        match &mut self.inner {
            PubInner::Shm(p) => p.no_linger(),
            PubInner::Udp(u) => u.no_linger(),
            PubInner::Auto(p, u) => {
                p.no_linger();
                u.no_linger();
            }
        }
    }

    /// `Qos::deadline`: the periods that passed without a send, up to now (0 without a
    /// deadline). `ferry stats` shows the same count.
    pub fn deadline_missed(&mut self) -> u64 {
        let Some(d) = &mut self.deadline else {
            return 0;
        };
        if d.check(Instant::now()) > 0 {
            let slot = match &self.inner {
                PubInner::Shm(p) | PubInner::Auto(p, _) => p.slot(),
                PubInner::Udp(p) => p.slot(),
            };
            slot.deadline_missed
                .store(d.missed(), std::sync::atomic::Ordering::Relaxed);
        }
        d.missed()
    }

    /// Sends a copy of `bytes`.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), SendError> {
        if let PubInner::Udp(p) = &self.inner {
            if let Some(d) = &mut self.deadline {
                note_send(d, p.slot());
            }
            return p.send(bytes);
        }
        let mut loan = self.loan(bytes.len())?;
        loan.as_mut_slice().copy_from_slice(bytes);
        loan.send()
    }

    /// Sends a slice of plain-old-data values, such as `&[u32]`.
    pub fn send_slice<T: Pod>(&mut self, items: &[T]) -> Result<(), SendError> {
        self.send(pod::as_bytes(items))
    }

    /// Lends room for a `len`-byte message, to be written in place. Under reliable delivery over
    /// shared memory this waits for ring space like `send`.
    #[inline]
    pub fn loan(&mut self, len: usize) -> Result<Loan<'_>, SendError> {
        match self.lend(len, true, None)? {
            Some(loan) => Ok(loan),
            None => unreachable!("a loan that may wait always lends"),
        }
    }

    /// As [`Publisher::loan`], but never waits: `None` when reliable subscribers leave no room in
    /// the ring now. (A caller that must not block while it holds something else, such as a
    /// language binding holding its interpreter's lock, tries this first and waits with `loan`
    /// only when it has let go.)
    #[inline]
    pub fn try_loan(&mut self, len: usize) -> Result<Option<Loan<'_>>, SendError> {
        self.lend(len, false, None)
    }

    /// As [`Publisher::loan`], but while it waits for room in the ring it asks `keep_waiting`
    /// every 50 ms, and gives up (`None`) once that says no: for a caller that must see its own
    /// interrupts meanwhile, such as a language binding's Ctrl-C. The send timeout still holds.
    pub fn loan_while(
        &mut self,
        len: usize,
        keep_waiting: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Loan<'_>>, SendError> {
        self.lend(len, true, Some(keep_waiting))
    }

    #[inline]
    fn lend(
        &mut self,
        len: usize,
        wait: bool,
        keep_waiting: Option<&mut dyn FnMut() -> bool>,
    ) -> Result<Option<Loan<'_>>, SendError> {
        if let Some(d) = &mut self.deadline {
            let slot = match &self.inner {
                PubInner::Shm(p) | PubInner::Auto(p, _) => p.slot(),
                PubInner::Udp(p) => p.slot(),
            };
            note_send(d, slot);
        }
        let inner = match &mut self.inner {
            PubInner::Shm(p) => {
                let r = match keep_waiting {
                    Some(keep) => p.reserve_while(len, keep)?,
                    None => p.reserve(len, wait)?,
                };
                let Some(r) = r else {
                    return Ok(None);
                };
                LoanInner::Shm {
                    publisher: p,
                    reservation: Some(r),
                    udp: None,
                }
            }
            PubInner::Auto(p, u) => {
                let r = match keep_waiting {
                    Some(keep) => p.reserve_while(len, keep)?,
                    None => p.reserve(len, wait)?,
                };
                let Some(r) = r else {
                    return Ok(None);
                };
                let udp = u.has_destinations().then_some(&*u);
                LoanInner::Shm {
                    publisher: p,
                    reservation: Some(r),
                    udp,
                }
            }
            PubInner::Udp(p) => {
                if len > p.max_message() {
                    return Err(SendError::TooLarge {
                        len,
                        max: p.max_message(),
                    });
                }
                let buf = p.buffer_of(len);
                LoanInner::Udp {
                    publisher: p,
                    buf: Some(buf),
                }
            }
        };
        Ok(Some(Loan { inner }))
    }

    /// Lends room for `count` values of `T`: a type of 1 byte or more, aligned to at most 8
    /// bytes (`ElementType` otherwise), as a message's payload is.
    pub fn loan_slice<T: Pod>(&mut self, count: usize) -> Result<LoanSlice<'_, T>, SendError> {
        let (size, align) = (std::mem::size_of::<T>(), std::mem::align_of::<T>());
        if size == 0 || align > PAYLOAD_ALIGN {
            return Err(SendError::ElementType { size, align });
        }
        let max = self.max_message_size();
        let too_large = SendError::TooLarge {
            len: usize::MAX,
            max,
        };
        let len = count
            .checked_mul(std::mem::size_of::<T>())
            .ok_or(too_large)?;
        Ok(LoanSlice {
            loan: self.loan(len)?,
            _t: PhantomData,
        })
    }
}

/// A send under `Qos::deadline`: counts the periods that passed without one (into the
/// publisher's slot, for `ferry stats`), and starts a new one.
#[cold]
fn note_send(d: &mut Deadline, slot: &crate::shm::layout::PublisherSlot) {
    let now = Instant::now();
    if d.check(now) > 0 {
        slot.deadline_missed
            .store(d.missed(), std::sync::atomic::Ordering::Relaxed);
    }
    d.met(now);
}

/// Room lent for one message: ring space under shared memory (written in place, no copy), a
/// buffer that becomes the retransmit copy under UDP. `send` publishes it; dropping it sends
/// nothing.
pub struct Loan<'a> {
    inner: LoanInner<'a>,
}

enum LoanInner<'a> {
    /// `udp`: under `auto`, the UDP side that also sends a copy (when it has subscribers).
    Shm {
        publisher: &'a mut ShmPublisher,
        reservation: Option<Reservation>,
        udp: Option<&'a UdpPublisher>,
    },
    Udp {
        publisher: &'a UdpPublisher,
        buf: Option<Vec<u8>>,
    },
}

impl Loan<'_> {
    pub fn len(&self) -> usize {
        match &self.inner {
            LoanInner::Shm { reservation, .. } => reservation.map_or(0, |r| r.payload_len as usize),
            LoanInner::Udp { buf, .. } => buf.as_ref().map_or(0, Vec::len),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The message bytes to fill in. They hold whatever was there before (an earlier message of
    /// this publisher, in the ring or in a pooled UDP buffer; zeroes where none was): write every
    /// byte.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        match &mut self.inner {
            LoanInner::Shm {
                publisher,
                reservation,
                ..
            } => {
                let Some(r) = reservation else { return &mut [] };
                // SAFETY: the reservation gives this publisher the payload bytes exclusively
                // until commit (readers never read past head; reliable readers have released
                // them); the double mapping makes them contiguous; the borrow of self keeps the
                // mapping alive.
                unsafe {
                    std::slice::from_raw_parts_mut(publisher.payload_ptr(r), r.payload_len as usize)
                }
            }
            LoanInner::Udp { buf, .. } => buf.as_deref_mut().unwrap_or_default(),
        }
    }

    /// Publishes the message.
    #[inline]
    pub fn send(mut self) -> Result<(), SendError> {
        match &mut self.inner {
            LoanInner::Shm {
                publisher,
                reservation,
                udp,
            } => {
                let Some(r) = reservation.take() else {
                    return Ok(());
                };
                // Under `auto`, other hosts get a copy over UDP, sent before the shared-memory
                // commit hands the bytes to readers (and a reliable ring may reuse them).
                let copied = udp.map(|u| {
                    // SAFETY: as in `as_mut_slice`: the reservation is still ours.
                    let bytes = unsafe {
                        std::slice::from_raw_parts(
                            publisher.payload_ptr(&r),
                            r.payload_len as usize,
                        )
                    };
                    u.send(bytes)
                });
                publisher.commit(r);
                copied.unwrap_or(Ok(()))
            }
            LoanInner::Udp { publisher, buf } => match buf.take() {
                Some(b) => publisher.send_owned(b),
                None => Ok(()),
            },
        }
    }
}

impl Drop for Loan<'_> {
    fn drop(&mut self) {
        if let LoanInner::Shm {
            publisher,
            reservation,
            ..
        } = &mut self.inner
        {
            if let Some(r) = reservation.take() {
                publisher.abandon(r);
            }
        }
    }
}

impl std::fmt::Debug for Loan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loan").field("len", &self.len()).finish()
    }
}

/// A loan typed as a slice of `T`.
#[derive(Debug)]
pub struct LoanSlice<'a, T: Pod> {
    loan: Loan<'a>,
    _t: PhantomData<T>,
}

impl<T: Pod> LoanSlice<'_, T> {
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // Payloads start 8-byte aligned (ring records and Vec buffers), `loan_slice` took only
        // elements of 1 byte or more aligned to at most that, and the length is a whole number
        // of T (an empty one is an empty slice).
        pod::from_bytes_mut(self.loan.as_mut_slice()).expect("loaned payloads are 8-byte aligned")
    }

    pub fn send(self) -> Result<(), SendError> {
        self.loan.send()
    }
}

/// Reads messages from a topic, from every publisher on it.
#[derive(Debug)]
pub struct Subscriber {
    inner: SubInner,
    topic: String,
    /// `Qos::deadline`: the periods that passed without a message.
    deadline: Option<Deadline>,
    /// Its own events (deadlines missed), before its transports'.
    events: Events,
    /// In a wait set, publisher events make it ready too (`Subscriber::wake_on_events`).
    event_wakeups: bool,
    /// Messages kept past their receive (`Sample::keep`).
    keeping: Keeping,
}

/// What a subscriber knows of the messages it keeps (`Sample::keep`).
#[derive(Debug)]
struct Keeping {
    /// This subscriber, among all of the process's (a `Kept` names the one that made it).
    owner: u64,
    /// `Qos::max_held`: messages held at once, the one just received included.
    max_held: usize,
    kept: usize,
}

/// Subscribers made so far in this process (each `Keeping::owner` is one more).
static SUBSCRIBERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A received message kept past the next receive ([`Sample::keep`]): read it with
/// [`Subscriber::kept`], give it back with [`Subscriber::let_go`]. Until then a reliable
/// shared-memory publisher cannot write over it (its ring fills up to it), so give it back
/// soon; dropped without `let_go` it stays kept until its subscriber is dropped.
#[derive(Debug, PartialEq, Eq, Hash)]
#[must_use = "a kept message stays held until Subscriber::let_go"]
pub struct Kept {
    owner: u64,
    udp: bool,
    id: u64,
}

// The shared-memory subscriber is the latency-critical path: kept inline; the UDP one is large.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum SubInner {
    Shm(ShmSubscriber),
    Udp(Box<UdpSubscriber>),
    /// This host's publishers through shared memory, the others' through UDP.
    Auto(ShmSubscriber, Box<UdpSubscriber>),
}

/// Which transport has the next message.
pub(crate) enum Side {
    Shm,
    Udp,
}

impl Subscriber {
    /// The topic's type, if an end of this host declared one (`Qos::topic_type`): read from
    /// the topic's directory each call (once per publisher is plenty). An error says the
    /// directory's type record is damaged.
    pub fn topic_type(&self) -> Result<Option<crate::TopicType>, Error> {
        match &self.inner {
            SubInner::Shm(s) | SubInner::Auto(s, _) => s.topic().topic_type(),
            SubInner::Udp(u) => u.topic().topic_type(),
        }
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Publishers currently sending on this topic.
    pub fn publisher_count(&mut self) -> usize {
        match &mut self.inner {
            SubInner::Shm(s) => s.publisher_count(),
            SubInner::Udp(u) => u.publisher_count(),
            SubInner::Auto(s, u) => s.publisher_count() + u.publisher_count(),
        }
    }

    /// The next thing this subscriber learned of its publishers, if any: that one appeared (a
    /// ring attached, a first message over UDP) or is gone, and why ([`Gone`]: closed, died,
    /// silent past the session timeout, evicted). Events are found while the subscriber
    /// receives, waits or counts its publishers; a blocked subscriber sees a publisher of this
    /// host die within 50 ms. At most 256 wait to be taken (older ones are dropped and
    /// counted, [`Subscriber::events_dropped`]).
    pub fn try_event(&mut self) -> Option<Event> {
        if let Some(e) = self.events.pop() {
            return Some(e);
        }
        match &mut self.inner {
            SubInner::Shm(s) => s.pop_event(),
            SubInner::Udp(u) => u.pop_event(),
            SubInner::Auto(s, u) => s.pop_event().or_else(|| u.pop_event()),
        }
    }

    /// Publisher events dropped because nobody took them (see [`Subscriber::try_event`]).
    pub fn events_dropped(&self) -> u64 {
        self.events.dropped()
            + match &self.inner {
                SubInner::Shm(s) => s.events_dropped(),
                SubInner::Udp(u) => u.events_dropped(),
                SubInner::Auto(s, u) => s.events_dropped() + u.events_dropped(),
            }
    }

    /// `Qos::deadline`: the periods that passed without a message so far (0 without a deadline).
    pub fn deadline_missed(&self) -> u64 {
        self.deadline.as_ref().map_or(0, Deadline::missed)
    }

    /// Warnings a user should see: a UDP receive buffer the kernel capped below what ferry asked
    /// for (raise `net.core.rmem_max`; until then fast publishers are held back by a smaller
    /// window, and bursts may be dropped by the kernel, counted as kernel drops).
    pub fn warnings(&self) -> Vec<String> {
        match &self.inner {
            SubInner::Shm(_) => Vec::new(),
            SubInner::Udp(u) | SubInner::Auto(_, u) => u.warnings().to_vec(),
        }
    }

    /// Publishers whose segments this subscriber refused to read (foreign, damaged or of another
    /// layout version), with the reason for each.
    pub fn refused_publishers(&self) -> Vec<String> {
        match &self.inner {
            SubInner::Shm(s) | SubInner::Auto(s, _) => s.refused().map(str::to_owned).collect(),
            SubInner::Udp(_) => Vec::new(),
        }
    }

    /// What is known of the publisher `id` (from [`Sample::publisher`]): its node name while it
    /// is on this host and still publishing, and, over UDP, the address it sends from. A look-up
    /// in the topic's directory (up to 32 slots), meant for once per publisher, not per message.
    pub fn publisher_info(&self, id: PublisherId) -> PublisherInfo {
        match (&self.inner, id.udp) {
            (SubInner::Shm(s) | SubInner::Auto(s, _), false) => PublisherInfo {
                node: s.publisher_node(id.id),
                address: None,
            },
            (SubInner::Udp(u) | SubInner::Auto(_, u), true) => {
                let (address, node) = u.publisher_info(id.id);
                PublisherInfo { node, address }
            }
            _ => PublisherInfo::default(),
        }
    }

    /// Polls (`block` false) or waits up to `timeout` (forever if `None`); says which side has
    /// a message ready. Under `Qos::deadline` it also counts the periods that pass without one.
    #[inline(always)]
    pub(crate) fn ready(
        &mut self,
        timeout: Option<Duration>,
        block: bool,
    ) -> Result<Option<Side>, RecvError> {
        if self.deadline.is_none() {
            return self.ready_now(timeout, block);
        }
        self.ready_with_deadline(timeout, block)
    }

    /// `ready` under a deadline: waits in slices that end with each period, counting those
    /// that end without a message.
    #[cold]
    fn ready_with_deadline(
        &mut self,
        timeout: Option<Duration>,
        block: bool,
    ) -> Result<Option<Side>, RecvError> {
        let end = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            let now = Instant::now();
            self.count_deadline(now);
            let next = self.deadline.as_ref().map_or(now, |d| d.next());
            let until = end.map_or(next, |e| e.min(next));
            let found = self.ready_now(Some(until.saturating_duration_since(now)), block)?;
            let now = Instant::now();
            if found.is_some() {
                // Periods that ended before it came are counted (and told) first.
                self.count_deadline(now);
                if let Some(d) = &mut self.deadline {
                    d.met(now);
                }
                return Ok(found);
            }
            if !block || end.is_some_and(|e| now >= e) {
                self.count_deadline(now);
                return Ok(None);
            }
        }
    }

    /// In a [`crate::WaitSet`], whether a publisher event (appeared, gone) makes this subscriber
    /// ready, as a message does; off by default. Take the events with [`Subscriber::try_event`]:
    /// one not taken keeps it ready. (A deadline missed, `Qos::deadline`, always makes it
    /// ready.)
    pub fn wake_on_events(&mut self, on: bool) {
        self.event_wakeups = on;
    }

    /// For a wait set: whether a message or (with `events`, and when it wakes on events) a
    /// publisher event or a deadline missed waits (nothing is taken); counts the deadline
    /// periods that ended.
    /// `sockets`: whether a UDP socket may hold something (else it is read only when its
    /// protocol's timers are due).
    pub(crate) fn look(&mut self, now: Instant, events: bool, sockets: bool) -> bool {
        self.count_deadline(now);
        let publisher_events = events && self.event_wakeups;
        let inner = match &mut self.inner {
            SubInner::Shm(s) => s.look(now, publisher_events),
            SubInner::Udp(u) => u.look(publisher_events, sockets),
            SubInner::Auto(s, u) => {
                s.look(now, publisher_events) | u.look(publisher_events, sockets)
            }
        };
        inner || (events && !self.events.is_empty())
    }

    /// For a wait set, before it sleeps: what wakes this subscriber, and when it must be looked
    /// at whatever happens. False when a message came meanwhile.
    pub(crate) fn arm(&mut self, sleep: &mut crate::waiting::Sleep) -> bool {
        if let Some(d) = &self.deadline {
            sleep.due(d.next());
        }
        let udp = |u: &UdpSubscriber, sleep: &mut crate::waiting::Sleep| {
            let (fd, next_ns) = u.wait_on();
            sleep.fds.push(fd);
            let left = next_ns.saturating_sub(crate::sys::monotonic_ns());
            sleep.due(Instant::now() + Duration::from_nanos(left.min(3_600_000_000_000)));
        };
        let shm = |s: &mut ShmSubscriber, sleep: &mut crate::waiting::Sleep| {
            let (bell, liveness) = s.arm();
            sleep.due(liveness);
            match bell {
                Some(b) => {
                    sleep.bells.push(b);
                    true
                }
                None => false,
            }
        };
        match &mut self.inner {
            SubInner::Shm(s) => shm(s, sleep),
            SubInner::Udp(u) => {
                udp(u, sleep);
                true
            }
            SubInner::Auto(s, u) => {
                udp(u, sleep);
                shm(s, sleep)
            }
        }
    }

    /// After a wait set's sleep (`slept`), or its look that found an item ready before it.
    pub(crate) fn disarm(&mut self, slept: bool) {
        if let SubInner::Shm(s) | SubInner::Auto(s, _) = &mut self.inner {
            s.disarm(slept);
        }
    }

    /// Counts the deadline periods that ended by `now` without a message.
    fn count_deadline(&mut self, now: Instant) {
        let Some(d) = &mut self.deadline else { return };
        if d.check(now) > 0 {
            let missed = d.missed();
            self.events.push(Event::DeadlineMissed(missed));
            self.slot()
                .deadline_missed
                .store(missed, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[inline(always)]
    fn ready_now(
        &mut self,
        timeout: Option<Duration>,
        block: bool,
    ) -> Result<Option<Side>, RecvError> {
        match &mut self.inner {
            SubInner::Shm(s) => {
                Ok(if block { s.wait(timeout)? } else { s.poll()? }.then_some(Side::Shm))
            }
            SubInner::Udp(u) => {
                Ok(if block { u.wait(timeout)? } else { u.poll()? }.then_some(Side::Udp))
            }
            SubInner::Auto(s, u) => auto_ready(s, u, timeout, block),
        }
    }

    /// The bytes of the message `ready` found on `side`, without taking it.
    #[inline]
    pub(crate) fn peek(&self, side: &Side) -> &[u8] {
        match (&self.inner, side) {
            (SubInner::Shm(s) | SubInner::Auto(s, _), Side::Shm) => s.payload(),
            (SubInner::Udp(u) | SubInner::Auto(_, u), Side::Udp) => {
                u.current().map_or(&[], |d| &d.data[..])
            }
            _ => &[],
        }
    }

    /// The slot in the topic's directory that holds this subscriber's counters (under `auto`,
    /// its shared-memory one).
    pub(crate) fn slot(&self) -> &crate::shm::layout::SubscriberSlot {
        match &self.inner {
            SubInner::Shm(s) | SubInner::Auto(s, _) => s.slot(),
            SubInner::Udp(u) => u.slot(),
        }
    }

    #[inline]
    pub(crate) fn sample(&mut self, side: Side) -> Sample<'_> {
        let inner = match (&mut self.inner, side) {
            (SubInner::Shm(s) | SubInner::Auto(s, _), Side::Shm) => SampleInner::Shm { sub: s },
            (SubInner::Udp(u) | SubInner::Auto(_, u), Side::Udp) => SampleInner::Udp { sub: u },
            _ => unreachable!("a side comes from this subscriber's own transports"),
        };
        Sample {
            inner,
            keeping: &mut self.keeping,
        }
    }

    /// The bytes of a message this subscriber keeps ([`Sample::keep`]); `None` for one it
    /// let go or another subscriber keeps.
    pub fn kept(&self, kept: &Kept) -> Option<&[u8]> {
        if kept.owner != self.keeping.owner {
            return None;
        }
        match (&self.inner, kept.udp) {
            (SubInner::Shm(s) | SubInner::Auto(s, _), false) => s.kept_payload(kept.id),
            (SubInner::Udp(u) | SubInner::Auto(_, u), true) => u.kept_payload(kept.id),
            _ => None,
        }
    }

    /// Gives a kept message back: its publisher may write over it again (shared memory), its
    /// memory is reused (UDP). One another subscriber keeps changes nothing here.
    pub fn let_go(&mut self, kept: Kept) {
        if kept.owner != self.keeping.owner {
            return;
        }
        let before = self.kept_count();
        match (&mut self.inner, kept.udp) {
            (SubInner::Shm(s) | SubInner::Auto(s, _), false) => s.let_go(kept.id),
            (SubInner::Udp(u) | SubInner::Auto(_, u), true) => u.let_go(kept.id),
            _ => {}
        }
        if self.kept_count() < before {
            self.keeping.kept -= 1;
        }
    }

    /// Messages this subscriber keeps now ([`Sample::keep`]).
    pub fn kept_count(&self) -> usize {
        match &self.inner {
            SubInner::Shm(s) => s.kept_count(),
            SubInner::Udp(u) => u.kept_count(),
            SubInner::Auto(s, u) => s.kept_count() + u.kept_count(),
        }
    }

    /// `Qos::max_held`: the messages it may hold at once, the one just received included.
    pub fn max_held(&self) -> usize {
        self.keeping.max_held
    }

    /// The next message if one is waiting.
    #[inline]
    pub fn try_recv(&mut self) -> Result<Option<Sample<'_>>, RecvError> {
        Ok(self.ready(None, false)?.map(|side| self.sample(side)))
    }

    /// Waits for the next message. (A publisher that goes away and comes back resumes the
    /// topic, so this waits through such gaps; use `recv_timeout` to bound the wait.)
    #[inline]
    pub fn recv(&mut self) -> Result<Sample<'_>, RecvError> {
        loop {
            if let Some(side) = self.ready(None, true)? {
                return Ok(self.sample(side));
            }
        }
    }

    /// Waits at most `timeout` for the next message; `None` when the time ran out.
    #[inline]
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<Sample<'_>>, RecvError> {
        Ok(self
            .ready(Some(timeout), true)?
            .map(|side| self.sample(side)))
    }

    /// Waits for the next message and copies it into `buf` (replacing its contents).
    pub fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<(), RecvError> {
        let sample = self.recv()?;
        buf.clear();
        buf.extend_from_slice(&sample);
        Ok(())
    }
}

/// `auto`: poll both sides; block on the one that has publishers, or alternate in short slices
/// when both do (a futex and a socket cannot be waited on together).
fn auto_ready(
    s: &mut ShmSubscriber,
    u: &mut UdpSubscriber,
    timeout: Option<Duration>,
    block: bool,
) -> Result<Option<Side>, RecvError> {
    // A timeout past what the clock can count is no deadline.
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    loop {
        if s.poll()? {
            return Ok(Some(Side::Shm));
        }
        if u.poll()? {
            return Ok(Some(Side::Udp));
        }
        let now = Instant::now();
        if !block || deadline.is_some_and(|d| now >= d) {
            return Ok(None);
        }
        let left = deadline.map_or(Duration::from_millis(100), |d| d - now);
        let (shm_live, udp_live) = (s.publisher_count() > 0, u.has_sources());
        let slice = if shm_live && udp_live {
            Duration::from_millis(1)
        } else {
            Duration::from_millis(100)
        };
        let wait = Some(left.min(slice));
        if udp_live && !shm_live {
            if u.wait(wait)? {
                return Ok(Some(Side::Udp));
            }
        } else if s.wait(wait)? {
            return Ok(Some(Side::Shm));
        } else if udp_live && u.wait(wait)? {
            return Ok(Some(Side::Udp));
        }
    }
}

/// What a subscriber knows of one of its publishers ([`Subscriber::publisher_info`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PublisherInfo {
    /// The publisher's node name, when it is on this host and still holds its slot in the
    /// topic's directory (UDP discovery does not carry names from other hosts).
    pub node: Option<String>,
    /// UDP: the address its messages come from.
    pub address: Option<std::net::SocketAddr>,
}

/// A received message. Under shared memory with reliable delivery it is borrowed in place from
/// the publisher's ring (the publisher cannot reuse the bytes until the sample is dropped); under
/// latest delivery a message of 16 KiB or more is held in place the same way (the publisher steps
/// over it and goes on; one subscriber of a topic holds at a time, where the ring holds three of
/// the largest messages), and any other was copied out and checked intact; under UDP it is the
/// reassembled message.
pub struct Sample<'a> {
    inner: SampleInner<'a>,
    keeping: &'a mut Keeping,
}

enum SampleInner<'a> {
    Shm { sub: &'a mut ShmSubscriber },
    Udp { sub: &'a mut UdpSubscriber },
}

impl<'a> Sample<'a> {
    /// Keeps this message past the next receive, until [`Subscriber::let_go`]: for a loop that
    /// still uses the last message while it takes the next, or to hold a few. A subscriber
    /// holds at most `Qos::max_held` messages at once (2 by default), this one and the next
    /// included: past that the sample comes back as `Err`, unkept. Zero-copy messages stay in
    /// place (a reliable publisher's ring fills up to the oldest kept one).
    pub fn keep(self) -> Result<Kept, Sample<'a>> {
        if self.keeping.kept + 1 >= self.keeping.max_held {
            return Err(self);
        }
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped or used again, so each field is read out once and
        // moved; they are references, valid for 'a.
        let (inner, keeping) = unsafe { (std::ptr::read(&me.inner), std::ptr::read(&me.keeping)) };
        let (udp, id) = match inner {
            SampleInner::Shm { sub } => (false, sub.keep()),
            SampleInner::Udp { sub } => (true, sub.keep()),
        };
        // (A sample exists only while its subscriber has a current message.)
        let id = id.unwrap_or(0);
        keeping.kept += 1;
        Ok(Kept {
            owner: keeping.owner,
            udp,
            id,
        })
    }

    /// The publisher's sequence number of this message (from 0 per publisher).
    #[inline]
    pub fn seq(&self) -> u64 {
        match &self.inner {
            SampleInner::Shm { sub } => sub.current().map_or(0, |r| r.seq),
            SampleInner::Udp { sub } => sub.current().map_or(0, |d| d.seq),
        }
    }

    /// Messages this subscriber missed just before this one (latest delivery, UDP losses).
    #[inline]
    pub fn skipped(&self) -> u64 {
        match &self.inner {
            SampleInner::Shm { sub } => sub.current().map_or(0, |r| r.skipped),
            SampleInner::Udp { sub } => sub.current().map_or(0, |d| d.lost_before),
        }
    }

    /// Which publisher sent this message. Read from what the subscriber already knows (the ring
    /// it read, the UDP session it reassembled), nothing is carried per message for it; give it
    /// to [`Subscriber::publisher_info`] for the publisher's node name and address.
    pub fn publisher(&self) -> PublisherId {
        match &self.inner {
            SampleInner::Shm { sub } => PublisherId::shm(sub.last_source_token()),
            SampleInner::Udp { sub } => PublisherId::udp(sub.current().map_or(0, |d| d.session)),
        }
    }

    /// Views the payload as a slice of `T`.
    pub fn as_slice<T: Pod>(&self) -> Result<&[T], PodError> {
        pod::from_bytes(self)
    }
}

impl std::ops::Deref for Sample<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match &self.inner {
            SampleInner::Shm { sub } => sub.payload(),
            SampleInner::Udp { sub } => sub.current().map_or(&[], |d| &d.data[..]),
        }
    }
}

impl Drop for Sample<'_> {
    #[inline]
    fn drop(&mut self) {
        if let SampleInner::Shm { sub } = &mut self.inner {
            sub.release();
        }
    }
}

impl std::fmt::Debug for Sample<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sample")
            .field("seq", &self.seq())
            .field("len", &self.len())
            .finish()
    }
}
