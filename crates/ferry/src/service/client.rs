//! A service's client: sends requests, any number in flight, and takes each response to the
//! request that asked for it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::wire::{self, Status, HEADER};
use super::{
    request_topic, response_topic, CallError, Counter, Counters, RequestId, SlicedWait,
    JOIN_TIMEOUT, WATCH_PERIOD,
};
use crate::node::Side;
use crate::pod::{self, Pod};
use crate::{Error, Loan, Node, PodError, Publisher, Qos, Sample, SendError, Subscriber};

/// Calls a service: sends requests and receives their responses.
///
/// ```no_run
/// # use std::time::Duration;
/// let node = ferry::Node::new("planner")?;
/// let mut client = node.client("map/tile", &ferry::Qos::default())?;
/// let response = client.call(b"tile 4 7", Duration::from_secs(1))?;
/// println!("{} bytes", response.len());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Client {
    // Field order is drop order: the counters point into `responses`' directory slot.
    counters: Counters,
    calls: Calls,
    requests: Publisher,
    responses: Subscriber,
    service: String,
    id: u64,
    max_request: usize,
    /// How long a send waits for a server to appear (0: `NoServer` at once).
    wait_for_server: Duration,
    /// A server took this client's requests when last looked at.
    server_ready: bool,
    next_watch: Instant,
}

impl Drop for Client {
    fn drop(&mut self) {
        // Its pending requests end with it: the requests' publisher goes at once instead of
        // waiting (up to its send timeout) for a server that has not read them yet.
        self.requests.no_linger();
    }
}

/// The requests in flight and the responses taken out of turn.
#[derive(Debug, Default)]
struct Calls {
    next: u64,
    pending: Pending,
    /// Requests the server's departure ended, reported one per receive.
    ended: VecDeque<u64>,
    /// Responses `call` took while it waited for another, with their status, for later
    /// receives.
    stash: VecDeque<(u64, Status, Vec<u8>)>,
}

impl Client {
    pub(super) fn create(node: &Node, service: &str, qos: &Qos) -> Result<Client, Error> {
        super::validate_service(service)?;
        let topic_qos = super::topic_qos(qos)?;
        let id =
            crate::sys::random_u64().map_err(|e| Error::io("read the OS's random source", e))?;
        // The response topic first, so that a server answering the first request finds this
        // client's subscriber there.
        let responses = node.open_subscriber(&response_topic(service, id), &topic_qos)?;
        let requests = node.open_publisher(&request_topic(service), &topic_qos)?;
        Ok(Client {
            counters: Counters::of(&responses),
            calls: Calls::default(),
            requests,
            responses,
            service: service.to_owned(),
            id,
            max_request: qos.max_message_size,
            wait_for_server: Duration::ZERO,
            server_ready: false,
            next_watch: Instant::now(),
        })
    }

    pub fn service(&self) -> &str {
        &self.service
    }

    /// This client's identity, as its server sees it.
    pub fn id(&self) -> super::ClientId {
        super::ClientId(self.id)
    }

    /// Requests sent and not yet answered (nor ended by an error).
    pub fn pending(&self) -> usize {
        self.calls.pending.len() + self.calls.ended.len() + self.calls.stash.len()
    }

    /// From now on a send waits up to `timeout` for a server to appear instead of failing at
    /// once with [`CallError::NoServer`].
    pub fn wait_for_server(&mut self, timeout: Duration) {
        self.wait_for_server = timeout;
    }

    /// Whether a server takes this client's requests now (looks at it: not per message).
    pub fn has_server(&mut self) -> bool {
        self.server_ready =
            self.requests.known_subscribers() == 1 && self.requests.ready_subscribers() >= 1;
        self.server_ready
    }

    /// Sends a copy of `body` as a request; its response comes through
    /// [`Client::recv_response`].
    pub fn send_request(&mut self, body: &[u8]) -> Result<RequestId, CallError> {
        let mut loan = self.loan_request(body.len())?;
        loan.as_mut_slice().copy_from_slice(body);
        loan.send()
    }

    /// Sends a slice of plain-old-data values as a request.
    pub fn send_request_slice<T: Pod>(&mut self, items: &[T]) -> Result<RequestId, CallError> {
        self.send_request(pod::as_bytes(items))
    }

    /// Lends room for a `len`-byte request, written in place (in the ring under shared memory).
    #[inline]
    pub fn loan_request(&mut self, len: usize) -> Result<RequestLoan<'_>, CallError> {
        if len > self.max_request {
            return Err(SendError::TooLarge {
                len,
                max: self.max_request,
            }
            .into());
        }
        if !self.server_ready {
            self.ensure_server()?;
        }
        let loan = self.requests.loan(HEADER + len)?;
        let request = self.calls.next;
        Ok(RequestLoan {
            loan,
            request,
            client: self.id,
            calls: &mut self.calls,
            counters: self.counters,
        })
    }

    /// Gives up on a pending request (whoever waited for it stopped): it is pending no more, its
    /// response, should it still come, is dropped and counted, and it counts as a timeout in
    /// `ferry stats`. False if it was not pending.
    pub fn abandon(&mut self, request: RequestId) -> bool {
        let calls = &mut self.calls;
        let was = calls.pending.remove(request.0)
            || calls
                .ended
                .iter()
                .position(|&r| r == request.0)
                .and_then(|i| calls.ended.remove(i))
                .is_some()
            || calls
                .stash
                .iter()
                .position(|s| s.0 == request.0)
                .and_then(|i| calls.stash.remove(i))
                .is_some();
        if was {
            self.counters.add(Counter::DroppedOrTimeouts, 1);
        }
        was
    }

    /// Sends `body` and waits up to `timeout` for its response. Responses to other pending
    /// requests that arrive meanwhile are kept (copied) for later receives.
    pub fn call(&mut self, body: &[u8], timeout: Duration) -> Result<Response<'_>, CallError> {
        let request = self.send_request(body)?;
        let found = self.next(Some(timeout), true, Some(request.0));
        if let Ok(None) = found {
            self.abandon(request);
            return Err(CallError::Timeout {
                service: self.service.clone(),
                request,
                after: timeout,
            });
        }
        let (side, id, status) = found?.expect("handled above");
        self.response(side, id, status)
    }

    /// Waits up to `timeout` for the response to any pending request; `None` when the time ran
    /// out. A request the server can no longer answer ends here as [`CallError::ServerGone`],
    /// one error per request.
    #[inline]
    pub fn recv_response(&mut self, timeout: Duration) -> Result<Option<Response<'_>>, CallError> {
        match self.next(Some(timeout), true, None)? {
            Some((side, id, status)) => self.response(side, id, status).map(Some),
            None => Ok(None),
        }
    }

    /// The response to any pending request if one is there; never waits.
    pub fn try_recv_response(&mut self) -> Result<Option<Response<'_>>, CallError> {
        match self.next(None, false, None)? {
            Some((side, id, status)) => self.response(side, id, status).map(Some),
            None => Ok(None),
        }
    }

    /// Makes a response of what `next` found, or the error its status says.
    #[inline]
    fn response(
        &mut self,
        side: Found,
        request: u64,
        status: Status,
    ) -> Result<Response<'_>, CallError> {
        let body = match side {
            Found::Ring(side) => Body::Sample(self.responses.sample(side)),
            Found::Stash(bytes) => Body::Owned(bytes),
        };
        let response = Response {
            request: RequestId(request),
            body,
        };
        match status {
            Status::Answer => Ok(response),
            Status::TooLarge => {
                let (len, max) = wire::read_too_large(&response);
                Err(CallError::TooLarge {
                    service: self.service.clone(),
                    request: RequestId(request),
                    len,
                    max,
                })
            }
        }
    }

    /// Finds the next response (`want`: only that request's; others found meanwhile are
    /// stashed), waiting until `deadline` when `block`. Watches the server meanwhile.
    #[inline]
    fn next(
        &mut self,
        timeout: Option<Duration>,
        block: bool,
        want: Option<u64>,
    ) -> Result<Option<(Found, u64, Status)>, CallError> {
        if !self.calls.ended.is_empty() || !self.calls.stash.is_empty() {
            if let Some(found) = self.take_kept(want)? {
                return Ok(Some(found));
            }
        }
        let mut wait = SlicedWait::new(timeout, WATCH_PERIOD);
        loop {
            let slice = block.then(|| wait.slice());
            if let Some(side) = self.responses.ready(slice, block)? {
                let header = wire::read_response(self.responses.peek(&side));
                let mine = header
                    .filter(|h| h.client == self.id)
                    .and_then(|h| Some((self.calls.pending.remove_wire(h.request)?, h.status)));
                if let Some((request, status)) = mine {
                    self.counters.add(Counter::Responses, 1);
                    if want.map_or(true, |w| w == request) {
                        return Ok(Some((Found::Ring(side), request, status)));
                    }
                }
                self.set_aside(side, mine);
                continue;
            }
            if let Some(found) = self.after_slice(want)? {
                return Ok(Some(found));
            }
            if !block || wait.expired() {
                return Ok(None);
            }
        }
    }

    /// A response `next` found that is not the one wanted: another pending request's (`mine`),
    /// kept as a copy for a later receive while `call` waits for its own; or one that is
    /// malformed, for another client, or for no pending request (late, after its call timed
    /// out): counted and dropped. (Out of line: not the path of a response awaited.)
    #[cold]
    #[inline(never)]
    fn set_aside(&mut self, side: Side, mine: Option<(u64, Status)>) {
        let sample = self.responses.sample(side);
        match mine {
            Some((request, status)) => {
                let bytes = sample.get(HEADER..).unwrap_or_default().to_vec();
                drop(sample);
                self.calls.stash.push_back((request, status, bytes));
            }
            None => {
                drop(sample);
                self.counters.add(Counter::Malformed, 1);
            }
        }
    }

    /// After a wait that found no response: looks whether the server still runs, and takes
    /// what that ended (or what was kept) for `want`.
    #[cold]
    #[inline(never)]
    fn after_slice(
        &mut self,
        want: Option<u64>,
    ) -> Result<Option<(Found, u64, Status)>, CallError> {
        self.watch_server()?;
        self.take_kept(want)
    }

    /// For a wait set: whether a response (or the end of a pending request) waits; looks
    /// whether the server still runs when that is due.
    pub(crate) fn look(&mut self, now: Instant, sockets: bool) -> bool {
        if now >= self.next_watch {
            // An error here is a request ended, which the next receive reports.
            let _ = self.watch_server();
        }
        !self.calls.ended.is_empty()
            || !self.calls.stash.is_empty()
            || self.responses.look(now, false, sockets)
    }

    pub(crate) fn arm(&mut self, sleep: &mut crate::waiting::Sleep) -> bool {
        if !self.calls.pending.is_empty() || self.server_ready {
            sleep.due(self.next_watch);
        }
        self.responses.arm(sleep)
    }

    pub(crate) fn disarm(&mut self, slept: bool) {
        self.responses.disarm(slept)
    }

    /// A stashed response or an ended request, if one is kept (for `want` only, if given).
    fn take_kept(&mut self, want: Option<u64>) -> Result<Option<(Found, u64, Status)>, CallError> {
        let calls = &mut self.calls;
        let ended = match want {
            None => calls.ended.pop_front(),
            Some(w) => calls
                .ended
                .iter()
                .position(|&r| r == w)
                .and_then(|i| calls.ended.remove(i)),
        };
        if let Some(request) = ended {
            return Err(CallError::ServerGone {
                service: self.service.clone(),
                request: RequestId(request),
            });
        }
        let stashed = match want {
            None => calls.stash.pop_front(),
            Some(w) => calls
                .stash
                .iter()
                .position(|s| s.0 == w)
                .and_then(|i| calls.stash.remove(i)),
        };
        Ok(stashed.map(|(request, status, bytes)| (Found::Stash(bytes), request, status)))
    }

    /// Every `WATCH_PERIOD`: whether the server still runs. When it does not, every pending
    /// request ends (reported one by one as `ServerGone`). It does not when its request
    /// subscriber is gone (its process, on this host; discovery's entry, of another host), or
    /// when the publisher of this client's responses died or — across hosts — went silent past
    /// `Qos::lease` (its heartbeats, sent by a thread of its own, stopped).
    fn watch_server(&mut self) -> Result<(), CallError> {
        let now = Instant::now();
        if now < self.next_watch {
            return Ok(());
        }
        self.next_watch = now + WATCH_PERIOD;
        let mut responder_gone = false;
        while let Some(e) = self.responses.try_event() {
            // (Not `Closed`: a server closes the response publisher of a client it evicts,
            // and opens another for its next response.)
            if let crate::Event::Gone(_, crate::Gone::Silent | crate::Gone::Died) = e {
                responder_gone = true;
            }
        }
        if self.calls.pending.is_empty() && !self.server_ready {
            return Ok(());
        }
        if !responder_gone
            && self.requests.known_subscribers() > 0
            && self.requests.ready_subscribers() > 0
        {
            return Ok(());
        }
        self.server_ready = false;
        let ended = self.calls.pending.drain();
        self.counters
            .add(Counter::RefusedOrServerGone, ended.len() as u64);
        self.calls.ended.extend(ended);
        Ok(())
    }

    /// Before a send while no server is known to take this client's requests (the caller
    /// looks at `server_ready`, which the watch clears when the server goes): a server must
    /// take them, or the request would go nowhere. (Out of line: once a server has, sends
    /// never come here.)
    #[cold]
    #[inline(never)]
    fn ensure_server(&mut self) -> Result<(), CallError> {
        let start = Instant::now();
        let appear_by = start.checked_add(self.wait_for_server);
        let mut join_by: Option<Instant> = None;
        loop {
            let known = self.requests.known_subscribers();
            if known > 1 {
                return Err(CallError::ManyServers {
                    service: self.service.clone(),
                    count: known,
                });
            }
            let now = Instant::now();
            if known == 1 {
                if self.requests.ready_subscribers() >= 1 {
                    self.server_ready = true;
                    self.next_watch = now + WATCH_PERIOD;
                    return Ok(());
                }
                // Seen, not attached yet: it attaches when it next looks for requests.
                let by = *join_by.get_or_insert(now + JOIN_TIMEOUT);
                if now >= by && appear_by.is_some_and(|d| now >= d) {
                    return Err(CallError::NoServer {
                        service: self.service.clone(),
                    });
                }
            } else if appear_by.is_some_and(|d| now >= d) {
                return Err(CallError::NoServer {
                    service: self.service.clone(),
                });
            }
            // The response subscriber looks too, so that over UDP it answers the server's
            // challenge and over shared memory it attaches to a response ring made meanwhile.
            let _ = self.responses.publisher_count();
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// The requests in flight. Ids are given out in order, so they are flags in a window that starts
/// at the oldest request still pending: no hashing per message.
#[derive(Debug, Default)]
struct Pending {
    base: u64,
    flags: VecDeque<bool>,
    count: usize,
}

impl Pending {
    /// `id` is the next id given out: one past the window's end.
    fn insert(&mut self, id: u64) {
        if self.flags.is_empty() {
            self.base = id;
        }
        debug_assert_eq!(id, self.base + self.flags.len() as u64);
        self.flags.push_back(true);
        self.count += 1;
    }

    /// The pending request whose id's low 32 bits are `wire` (as a response carries it), now
    /// no longer pending; `None` if none is.
    fn remove_wire(&mut self, wire: u32) -> Option<u64> {
        let i = wire.wrapping_sub(self.base as u32) as usize;
        let id = self.base + i as u64;
        (i < self.flags.len() && self.remove(id)).then_some(id)
    }

    /// True if `id` was pending (a response for it is expected).
    fn remove(&mut self, id: u64) -> bool {
        let Some(i) = id
            .checked_sub(self.base)
            .and_then(|i| usize::try_from(i).ok())
        else {
            return false;
        };
        match self.flags.get_mut(i) {
            Some(flag) if *flag => *flag = false,
            _ => return false,
        }
        self.count -= 1;
        while self.flags.front() == Some(&false) {
            self.flags.pop_front();
            self.base += 1;
        }
        true
    }

    fn len(&self) -> usize {
        self.count
    }

    fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Every pending id, oldest first; none is pending afterwards.
    fn drain(&mut self) -> Vec<u64> {
        let base = self.base;
        let ids = (self.flags.iter().enumerate())
            .filter(|(_, &f)| f)
            .map(|(i, _)| base + i as u64)
            .collect();
        self.flags.clear();
        self.count = 0;
        ids
    }
}

/// Where `next` found a response.
enum Found {
    Ring(Side),
    Stash(Vec<u8>),
}

/// Room for a request, written in place; `send` sends it and returns its id.
pub struct RequestLoan<'a> {
    loan: Loan<'a>,
    request: u64,
    /// This client's id, for the header written at `send`.
    client: u64,
    calls: &'a mut Calls,
    counters: Counters,
}

impl RequestLoan<'_> {
    super::body_of_loan!("request");

    /// Sends the request.
    #[inline]
    pub fn send(mut self) -> Result<RequestId, CallError> {
        // The header goes in with the commit (see `ResponseLoan::send`). Ids travel as their
        // low 32 bits (`wire`).
        wire::put_request(
            &mut self.loan.as_mut_slice()[..HEADER],
            self.client,
            self.request as u32,
        );
        self.loan.send()?;
        self.calls.pending.insert(self.request);
        self.calls.next += 1;
        self.counters.add(Counter::Requests, 1);
        Ok(RequestId(self.request))
    }
}

impl std::fmt::Debug for RequestLoan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestLoan")
            .field("request", &self.request)
            .field("len", &self.len())
            .finish()
    }
}

/// A response: borrowed in place from the server's ring under shared memory (until dropped),
/// or the reassembled message under UDP.
pub struct Response<'a> {
    request: RequestId,
    body: Body<'a>,
}

enum Body<'a> {
    Sample(Sample<'a>),
    Owned(Vec<u8>),
}

impl Response<'_> {
    /// The request this answers.
    pub fn request(&self) -> RequestId {
        self.request
    }

    /// Views the body as a slice of `T`.
    pub fn as_slice<T: Pod>(&self) -> Result<&[T], PodError> {
        pod::from_bytes(self)
    }
}

impl std::ops::Deref for Response<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match &self.body {
            Body::Sample(s) => s.get(HEADER..).unwrap_or_default(),
            Body::Owned(v) => v,
        }
    }
}

impl std::fmt::Debug for Response<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("request", &self.request)
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::Pending;

    #[test]
    fn pending_requests_are_found_by_their_32_bits_across_a_wrap() {
        let mut p = Pending::default();
        let first = (1u64 << 32) - 2;
        for id in first..first + 5 {
            p.insert(id);
        }
        assert_eq!(p.len(), 5);
        // Answered out of order, ids past 2^32 included.
        assert_eq!(p.remove_wire(1), Some((1 << 32) + 1));
        assert_eq!(p.remove_wire(u32::MAX - 1), Some(first));
        assert_eq!(p.remove_wire(u32::MAX - 1), None, "answered once");
        assert_eq!(p.remove_wire(7), None, "never sent");
        assert_eq!(p.len(), 3);
        assert_eq!(p.drain(), vec![first + 1, 1 << 32, (1 << 32) + 2]);
        assert!(p.is_empty());
        assert_eq!(p.remove_wire(0), None);
    }
}
