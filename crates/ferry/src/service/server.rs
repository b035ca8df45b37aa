//! A service's server: receives requests in place, with the asking client's identity, and
//! answers each, now or later, in any order.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use super::wire::{self, Status, HEADER};
use super::{
    request_topic, response_topic, ClientId, Counter, Counters, ReplyTo, RequestId, SlicedWait,
    JOIN_TIMEOUT,
};
use crate::node::Side;
use crate::pod::{self, Pod};
use crate::shm::topic::{control_name, Topic};
use crate::{
    Error, Loan, Node, PodError, Publisher, Qos, RecvError, Sample, SendError, Subscriber,
};

/// Clients a server answers at once; a new one beyond it has its responses dropped (counted)
/// until others go.
pub const MAX_CLIENTS: usize = 1024;

/// Departed clients a server remembers, so that a late answer to one is dropped at once.
const REMEMBERED_GONE: usize = 4096;

/// How often a server looks whether its clients still run.
const PRUNE_PERIOD: Duration = Duration::from_millis(100);

/// Serves a service: receives requests and answers them. It looks whether its clients still
/// run every 100 ms while it waits for requests.
///
/// ```no_run
/// let node = ferry::Node::new("map-server")?;
/// let mut server = node.server("map/tile", &ferry::Qos::default())?;
/// loop {
///     let request = server.recv()?;
///     let answer = format!("tile of {} bytes", request.len());
///     request.respond(answer.as_bytes())?;
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Server {
    // Field order is drop order: the counters point into `requests`' directory slot.
    counters: Counters,
    responders: Responders,
    requests: Subscriber,
    /// The request topic's directory, opened to hold the service's lock.
    _claim: Topic,
    service: String,
    max_request: usize,
}

/// Errors of answering a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    #[error(transparent)]
    Send(#[from] SendError),
    #[error("cannot open the response topic of client {client}: {source}")]
    Open {
        client: ClientId,
        #[source]
        source: Error,
    },
}

/// What became of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Responded {
    Sent,
    /// Its client had gone (or never took its responses): dropped and counted.
    ClientGone,
}

/// One publisher per client, made at its first request.
struct Responders {
    node: Node,
    service: String,
    qos: Qos,
    clients: HashMap<u64, Publisher>,
    /// The publisher used last, kept out of `clients`: a client that calls again and again is
    /// answered without a look-up.
    last: Option<(u64, Publisher)>,
    gone: HashSet<u64>,
    gone_order: VecDeque<u64>,
    next_prune: Instant,
    counters: Counters,
}

impl std::fmt::Debug for Responders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responders")
            .field("clients", &self.len())
            .finish()
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("service", &self.service)
            .field("clients", &self.responders.len())
            .finish()
    }
}

impl Server {
    pub(super) fn create(node: &Node, service: &str, qos: &Qos) -> Result<Server, Error> {
        super::validate_service(service)?;
        let topic_qos = super::topic_qos(qos)?;
        let topic = request_topic(service);
        let claim = Topic::open(node.domain(), &topic, node.config().shm_mode())?;
        let held = claim
            .object()
            .try_lock()
            .map_err(|e| Error::io(format!("lock {}", control_name(node.domain(), &topic)), e))?;
        if !held {
            let holder = claim.first_live_subscriber().map_or_else(
                || "a process that is still starting".to_owned(),
                |(node, pid)| format!("node {node:?} (pid {pid})"),
            );
            return Err(Error::ServiceTaken {
                service: service.to_owned(),
                holder,
            });
        }
        let requests = node.open_subscriber(&topic, &topic_qos)?;
        let counters = Counters::of(&requests);
        Ok(Server {
            counters,
            responders: Responders {
                node: node.clone(),
                service: service.to_owned(),
                qos: topic_qos,
                clients: HashMap::new(),
                last: None,
                gone: HashSet::new(),
                gone_order: VecDeque::new(),
                next_prune: Instant::now() + PRUNE_PERIOD,
                counters,
            },
            requests,
            _claim: claim,
            service: service.to_owned(),
            max_request: qos.max_message_size,
        })
    }

    pub fn service(&self) -> &str {
        &self.service
    }

    /// Clients this server has answered and that are still there.
    pub fn client_count(&self) -> usize {
        self.responders.len()
    }

    /// Waits for the next request.
    pub fn recv(&mut self) -> Result<Request<'_>, RecvError> {
        loop {
            if let Some(found) = self.next(None, true)? {
                return Ok(self.request(found));
            }
        }
    }

    /// Waits up to `timeout` for the next request; `None` when the time ran out.
    #[inline]
    pub fn recv_request(&mut self, timeout: Duration) -> Result<Option<Request<'_>>, RecvError> {
        Ok(self
            .next(Some(timeout), true)?
            .map(|found| self.request(found)))
    }

    /// The next request if one is waiting; never waits.
    pub fn try_recv_request(&mut self) -> Result<Option<Request<'_>>, RecvError> {
        Ok(self.next(None, false)?.map(|found| self.request(found)))
    }

    /// Answers a request received earlier with a copy of `body`.
    pub fn respond(&mut self, to: ReplyTo, body: &[u8]) -> Result<Responded, ServeError> {
        self.responders
            .send(to.client.0, to.request.wire(), Status::Answer, body)
    }

    /// Lends room for a `len`-byte answer to a request received earlier; `None` when its
    /// client has gone (counted).
    #[inline]
    pub fn loan_response(
        &mut self,
        to: ReplyTo,
        len: usize,
    ) -> Result<Option<ResponseLoan<'_>>, ServeError> {
        self.responders
            .loan(to.client.0, to.request.wire(), Status::Answer, len)
    }

    #[inline]
    fn request(&mut self, (side, client, request): (Side, u64, u32)) -> Request<'_> {
        Request {
            sample: self.requests.sample(side),
            to: ReplyTo {
                client: ClientId(client),
                request: RequestId(request.into()),
            },
            responders: &mut self.responders,
        }
    }

    /// For a wait set: whether a request waits; lets go of departed clients when that is due.
    pub(crate) fn look(&mut self, now: Instant, sockets: bool) -> bool {
        if now >= self.responders.next_prune {
            self.responders.prune();
        }
        // The request topic's publisher events are not the server user's.
        self.requests.look(now, false, sockets)
    }

    pub(crate) fn arm(&mut self, sleep: &mut crate::waiting::Sleep) -> bool {
        sleep.due(self.responders.next_prune);
        self.requests.arm(sleep)
    }

    pub(crate) fn disarm(&mut self, slept: bool) {
        self.requests.disarm(slept)
    }

    /// Finds the next well-formed request, answering those too large with a refusal.
    #[inline]
    fn next(
        &mut self,
        timeout: Option<Duration>,
        block: bool,
    ) -> Result<Option<(Side, u64, u32)>, RecvError> {
        let mut wait = SlicedWait::new(timeout, PRUNE_PERIOD);
        loop {
            let slice = block.then(|| wait.slice());
            if let Some(side) = self.requests.ready(slice, block)? {
                let msg = self.requests.peek(&side);
                let (header, len) = (wire::read_request(msg), msg.len().saturating_sub(HEADER));
                match header {
                    Some(h) if len <= self.max_request => {
                        self.counters.add(Counter::Requests, 1);
                        return Ok(Some((side, h.client, h.request)));
                    }
                    _ => self.refuse(side, header, len),
                }
                continue;
            }
            self.responders.prune();
            if !block || wait.expired() {
                return Ok(None);
            }
        }
    }

    /// A request `next` found that is not served: one too large is answered with a refusal, a
    /// malformed one dropped; both counted. (Out of line: not the path of a request served.)
    #[cold]
    #[inline(never)]
    fn refuse(&mut self, side: Side, header: Option<wire::Header>, len: usize) {
        drop(self.requests.sample(side));
        let Some(h) = header else {
            self.counters.add(Counter::Malformed, 1);
            return;
        };
        self.counters.add(Counter::RefusedOrServerGone, 1);
        let body = wire::too_large_body(len, self.max_request);
        // A refusal that cannot be delivered is counted as a dropped response.
        let _ = self
            .responders
            .send(h.client, h.request, Status::TooLarge, &body);
    }
}

impl Responders {
    /// The publisher of `client`'s responses, made (and waited for) at its first response;
    /// `None` when the client has gone, counted as a dropped response.
    #[inline]
    fn publisher(&mut self, client: u64) -> Result<Option<&mut Publisher>, ServeError> {
        if self.last.as_ref().is_some_and(|(c, _)| *c == client) {
            return Ok(self.last.as_mut().map(|(_, p)| p));
        }
        let publisher = match self.clients.remove(&client) {
            Some(p) => p,
            None => match self.open(client)? {
                Some(p) => p,
                None => return Ok(None),
            },
        };
        if let Some((c, p)) = self.last.take() {
            self.clients.insert(c, p);
        }
        self.last = Some((client, publisher));
        Ok(self.last.as_mut().map(|(_, p)| p))
    }

    fn len(&self) -> usize {
        self.clients.len() + usize::from(self.last.is_some())
    }

    /// Makes the publisher of a new client's responses and waits for the client to take them;
    /// `None` when the client has gone (or is one too many), counted as a dropped response.
    fn open(&mut self, client: u64) -> Result<Option<Publisher>, ServeError> {
        if self.gone.contains(&client) {
            self.counters.add(Counter::DroppedOrTimeouts, 1);
            return Ok(None);
        }
        if self.len() >= MAX_CLIENTS {
            self.next_prune = Instant::now();
            self.prune();
            if self.len() >= MAX_CLIENTS {
                self.counters.add(Counter::DroppedOrTimeouts, 1);
                return Ok(None);
            }
        }
        let topic = response_topic(&self.service, client);
        let publisher = self
            .node
            .open_publisher(&topic, &self.qos)
            .map_err(|source| ServeError::Open {
                client: ClientId(client),
                source,
            })?;
        // The client's subscriber attaches when it next looks (it is woken for it).
        let deadline = Instant::now() + JOIN_TIMEOUT;
        while publisher.subscriber_count() == 0 {
            if Instant::now() >= deadline {
                self.forget(client);
                self.counters.add(Counter::DroppedOrTimeouts, 1);
                return Ok(None);
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        Ok(Some(publisher))
    }

    #[inline]
    fn loan(
        &mut self,
        client: u64,
        request: u32,
        status: Status,
        len: usize,
    ) -> Result<Option<ResponseLoan<'_>>, ServeError> {
        let counters = self.counters;
        let Some(publisher) = self.publisher(client)? else {
            return Ok(None);
        };
        let max = publisher.max_message_size() - HEADER;
        if len > max {
            return Err(SendError::TooLarge { len, max }.into());
        }
        let loan = publisher.loan(HEADER + len)?;
        Ok(Some(ResponseLoan {
            loan,
            counters,
            header: (client, request, status),
        }))
    }

    fn send(
        &mut self,
        client: u64,
        request: u32,
        status: Status,
        body: &[u8],
    ) -> Result<Responded, ServeError> {
        match self.loan(client, request, status, body.len())? {
            Some(mut loan) => {
                loan.as_mut_slice().copy_from_slice(body);
                loan.send()?;
                Ok(Responded::Sent)
            }
            None => Ok(Responded::ClientGone),
        }
    }

    /// Every `PRUNE_PERIOD`: lets go of the publishers of clients whose process ended.
    fn prune(&mut self) {
        let now = Instant::now();
        if now < self.next_prune {
            return;
        }
        self.next_prune = now + PRUNE_PERIOD;
        let gone: Vec<u64> = self
            .clients
            .iter()
            .chain(self.last.as_ref().map(|(c, p)| (c, p)))
            .filter(|(_, p)| p.ready_subscribers() == 0)
            .map(|(&c, _)| c)
            .collect();
        for client in gone {
            if self.last.as_ref().is_some_and(|(c, _)| *c == client) {
                self.last = None;
            }
            self.clients.remove(&client);
            self.forget(client);
        }
    }

    /// Remembers `client` as gone (a bounded memory: the oldest is forgotten first).
    fn forget(&mut self, client: u64) {
        if self.gone.insert(client) {
            self.gone_order.push_back(client);
            if self.gone_order.len() > REMEMBERED_GONE {
                if let Some(old) = self.gone_order.pop_front() {
                    self.gone.remove(&old);
                }
            }
        }
    }
}

/// A request, borrowed in place (from the client's ring under shared memory) until it is
/// answered or dropped. Dropping it without an answer leaves the client waiting: keep
/// [`Request::reply_to`] to answer later with [`Server::respond`].
pub struct Request<'a> {
    sample: Sample<'a>,
    to: ReplyTo,
    responders: &'a mut Responders,
}

impl Request<'_> {
    /// The client that asked.
    pub fn client(&self) -> ClientId {
        self.to.client
    }

    /// The request's id within its client.
    pub fn id(&self) -> RequestId {
        self.to.request
    }

    /// Where its answer goes, for an answer given later.
    pub fn reply_to(&self) -> ReplyTo {
        self.to
    }

    /// Views the body as a slice of `T`.
    pub fn as_slice<T: Pod>(&self) -> Result<&[T], PodError> {
        pod::from_bytes(self)
    }

    /// Answers with a copy of `body` (the request is let go first).
    pub fn respond(self, body: &[u8]) -> Result<Responded, ServeError> {
        let Request {
            sample,
            to,
            responders,
        } = self;
        drop(sample);
        responders.send(to.client.0, to.request.wire(), Status::Answer, body)
    }

    /// Answers with `len` bytes that `write` fills in place, reading the request in place:
    /// no copy either way.
    pub fn respond_with(
        self,
        len: usize,
        write: impl FnOnce(&[u8], &mut [u8]),
    ) -> Result<Responded, ServeError> {
        let Request {
            sample,
            to,
            responders,
        } = self;
        let Some(mut loan) =
            responders.loan(to.client.0, to.request.wire(), Status::Answer, len)?
        else {
            return Ok(Responded::ClientGone);
        };
        write(
            sample.get(HEADER..).unwrap_or_default(),
            loan.as_mut_slice(),
        );
        drop(sample);
        loan.send()?;
        Ok(Responded::Sent)
    }
}

impl std::ops::Deref for Request<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.sample.get(HEADER..).unwrap_or_default()
    }
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("client", &self.to.client)
            .field("id", &self.to.request)
            .field("len", &self.len())
            .finish()
    }
}

/// Room for an answer, written in place; `send` sends it.
pub struct ResponseLoan<'a> {
    loan: Loan<'a>,
    counters: Counters,
    /// Written when the answer is sent, not when it is lent (see `send`).
    header: (u64, u32, Status),
}

impl ResponseLoan<'_> {
    super::body_of_loan!("answer");

    #[inline]
    pub fn send(mut self) -> Result<(), SendError> {
        // The header goes in now, with the commit, not when the loan was made: a spinning
        // client polls this very line, and a store made early, apart from the body's and the
        // commit's, costs one more trip of the line between the cores (measured: 70–80 ns per
        // round trip, docs/RESULTS.md).
        let (client, request, status) = self.header;
        wire::put_response(
            &mut self.loan.as_mut_slice()[..HEADER],
            client,
            request,
            status,
        );
        self.loan.send()?;
        self.counters.add(Counter::Responses, 1);
        Ok(())
    }
}

impl std::fmt::Debug for ResponseLoan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseLoan")
            .field("len", &self.len())
            .finish()
    }
}
