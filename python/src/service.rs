//! `ferry.Client` and `ferry.Server`: a service's request/response, with the `ferry.Request` a
//! server receives and the `ferry.ReplyTo` that answers it later.
//!
//! ferry's `Response<'a>` and `Request<'a>` borrow their end mutably, as a `Sample` borrows its
//! subscriber. Here each is copied, while its end's lock is held, into Python objects that own
//! their bytes (`bytes`, or a `bytearray` under an array): one copy out of the ring per message
//! and no lent memory to keep track of. A body sent (request or response) is copied into a loan
//! with the GIL held, as a publisher's message is; waits release the GIL, in slices of at most
//! `WAIT_SLICE` between which signals are looked at, so Ctrl-C interrupts them.
//!
//! A Python `call` waits for its response through ferry's `recv_response`, slice by slice
//! (ferry's own `call` waits in one piece, deaf to signals). What arrives meanwhile for other
//! requests is kept for later receives; a request whose call gave up (timed out, interrupted) is
//! remembered, so that its late response or error is dropped when it comes instead of being
//! received by a later `recv_response`.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};

use crate::args::{frombuffer, lock, timeout_arg, WAIT_SLICE};
use crate::closable::closable_pymethods;
use crate::errors;
use crate::lend::with_bytes;

/// How often `Client.wait_for_server` looks for a server (with the GIL released).
const SERVER_POLL: Duration = Duration::from_micros(500);

/// The end of a wait of `timeout` (None: no end, as is a timeout past what the clock counts).
fn deadline(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| Instant::now().checked_add(t))
}

/// The next slice of a wait that ends at `deadline`; zero once it has passed.
fn next_slice(deadline: Option<Instant>) -> Duration {
    match deadline {
        Some(d) => d.saturating_duration_since(Instant::now()).min(WAIT_SLICE),
        None => WAIT_SLICE,
    }
}

/// One look for what a wait is after: before the first wait (`waited` false) with the GIL held,
/// `look(None)`; after it, a wait of at most one slice with the GIL released, `look(Some(slice))`.
/// None once `deadline` has passed.
fn look<T: Send>(
    py: Python<'_>,
    deadline: Option<Instant>,
    waited: bool,
    look: impl FnOnce(Option<Duration>) -> T + Send,
) -> Option<T> {
    if !waited {
        return Some(look(None));
    }
    let slice = next_slice(deadline);
    if slice.is_zero() {
        return None;
    }
    Some(py.detach(|| look(Some(slice))))
}

/// A copy of `bytes` that Python owns: `bytes`, or a `bytearray` (writable under an array).
fn owned<'py>(py: Python<'py>, bytes: &[u8], bytearray: bool) -> Bound<'py, PyAny> {
    if bytearray {
        PyByteArray::new(py, bytes).into_any()
    } else {
        PyBytes::new(py, bytes).into_any()
    }
}

/// The request an error of a client is about; None for an error of the client as a whole.
fn request_of(e: &ferry::CallError) -> Option<u64> {
    match e {
        ferry::CallError::ServerGone { request, .. }
        | ferry::CallError::Timeout { request, .. }
        | ferry::CallError::TooLarge { request, .. } => Some(request.get()),
        _ => None,
    }
}

/// Calls a service: sends requests (any number in flight) and receives their responses. Made by
/// `Node.client`. Responses are copies (bytes) of the server's message; requests are any
/// C-contiguous buffer (bytes, bytearray, memoryview, numpy array), copied into the ring.
#[pyclass(frozen, module = "ferry", name = "Client")]
pub struct Client {
    pub(crate) state: Mutex<ClientState>,
    service: String,
    id: u64,
    /// Sending never waits (shared memory: a commit): no need to let go of the GIL for it.
    send_never_waits: bool,
}

/// What became of a request whose response was taken while a call waited for another.
pub(crate) enum Outcome {
    Answer(Vec<u8>),
    Failed(ferry::CallError),
}

pub(crate) struct ClientState {
    /// The client; None once closed.
    client: Option<ferry::Client>,
    /// Outcomes of other requests taken while a call waited for its own, oldest first.
    pub(crate) kept: VecDeque<(u64, Outcome)>,
    /// Requests whose call gave up: their outcome is dropped when it comes.
    abandoned: HashSet<u64>,
}

impl Drop for ClientState {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            // A UDP publisher lingers for its subscribers (up to its send timeout): let other
            // Python threads run meanwhile.
            Python::attach(|py| py.detach(move || drop(client)));
        }
    }
}

/// A response taken, or the error of its request: (request id, body or error).
type Taken<'py> = (u64, Result<Bound<'py, PyAny>, ferry::CallError>);

impl ClientState {
    pub(crate) fn client(&mut self) -> PyResult<&mut ferry::Client> {
        self.client.as_mut().ok_or_else(|| errors::closed("client"))
    }

    /// Requests sent whose response or error has not been received, nor given up on.
    fn pending(&mut self) -> PyResult<usize> {
        let in_ferry = self.client()?.pending();
        // Given-up requests are still pending in ferry until their outcome comes (and is
        // dropped); kept outcomes are no longer.
        Ok((in_ferry + self.kept.len()).saturating_sub(self.abandoned.len()))
    }

    /// Sends a copy of `data` as a request: a loan (waiting for a server to take it and for room
    /// with the GIL released), filled with the GIL held, then sent.
    fn send(
        &mut self,
        py: Python<'_>,
        service: &str,
        data: &Bound<'_, PyAny>,
        send_never_waits: bool,
    ) -> PyResult<ferry::RequestId> {
        let client = self.client()?;
        with_bytes(data, |bytes| {
            let len = bytes.len();
            let mut loan = py
                .detach(|| client.loan_request(len))
                .map_err(|e| errors::call(py, service, e))?;
            loan.as_mut_slice().copy_from_slice(bytes);
            if send_never_waits {
                loan.send()
            } else {
                py.detach(move || loan.send())
            }
            .map_err(|e| errors::call(py, service, e))
        })
    }

    /// The outcome of request `want` (of any request when None), waiting up to `timeout` (None:
    /// no end); None when the time ran out. Errors of the client as a whole (and a signal's
    /// exception) are raised; those of one request are returned with it.
    fn next<'py>(
        &mut self,
        py: Python<'py>,
        service: &str,
        want: Option<u64>,
        timeout: Option<Duration>,
        bytearray: bool,
    ) -> PyResult<Option<Taken<'py>>> {
        let ClientState {
            client,
            kept,
            abandoned,
        } = self;
        let client = client.as_mut().ok_or_else(|| errors::closed("client"))?;
        let at = match want {
            None => (!kept.is_empty()).then_some(0),
            Some(w) => kept.iter().position(|(r, _)| *r == w),
        };
        if let Some((request, outcome)) = at.and_then(|i| kept.remove(i)) {
            let outcome = match outcome {
                Outcome::Answer(body) => Ok(owned(py, &body, bytearray)),
                Outcome::Failed(e) => Err(e),
            };
            return Ok(Some((request, outcome)));
        }
        let deadline = deadline(timeout);
        let mut waited = false;
        loop {
            let Some(got) = look(py, deadline, waited, |slice| match slice {
                Some(slice) => client.recv_response(slice),
                None => client.try_recv_response(),
            }) else {
                return Ok(None);
            };
            match got {
                Ok(Some(response)) => {
                    let request = response.request().get();
                    if abandoned.remove(&request) {
                        continue;
                    }
                    if want.map_or(true, |w| w == request) {
                        return Ok(Some((request, Ok(owned(py, &response, bytearray)))));
                    }
                    kept.push_back((request, Outcome::Answer(response.to_vec())));
                }
                Ok(None) => {
                    if waited {
                        py.check_signals()?;
                    }
                    waited = true;
                }
                Err(e) => {
                    let Some(request) = request_of(&e) else {
                        return Err(errors::call(py, service, e));
                    };
                    if abandoned.remove(&request) {
                        continue;
                    }
                    if want.map_or(true, |w| w == request) {
                        return Ok(Some((request, Err(e))));
                    }
                    kept.push_back((request, Outcome::Failed(e)));
                }
            }
        }
    }
}

impl Client {
    pub fn new(inner: ferry::Client, qos: &ferry::Qos) -> Client {
        Client {
            service: inner.service().to_owned(),
            id: inner.id().get(),
            state: Mutex::new(ClientState {
                client: Some(inner),
                kept: VecDeque::new(),
                abandoned: HashSet::new(),
            }),
            send_never_waits: qos.transport == ferry::Transport::Shm,
        }
    }

    /// Sends `data` and waits for its response: bytes, or a bytearray when `bytearray`.
    fn call_into<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        timeout: Option<f64>,
        bytearray: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let t = timeout_arg(timeout)?;
        let mut st = lock(&self.state, "client")?;
        let request = st.send(py, &self.service, data, self.send_never_waits)?;
        let id = request.get();
        match st.next(py, &self.service, Some(id), t, bytearray) {
            Ok(Some((_, Ok(body)))) => Ok(body),
            Ok(Some((_, Err(e)))) => Err(errors::call(py, &self.service, e)),
            Ok(None) => {
                st.abandoned.insert(id);
                let e = ferry::CallError::Timeout {
                    service: self.service.clone(),
                    request,
                    after: t.unwrap_or_default(),
                };
                Err(errors::call(py, &self.service, e))
            }
            Err(e) => {
                // Interrupted, or the client failed: the response is no longer waited for.
                st.abandoned.insert(id);
                Err(e)
            }
        }
    }

    fn nothing_pending(&self) -> PyErr {
        errors::FerryError::new_err(format!(
            "no request of this client of service {:?} is pending: send one first \
             (Client.send_request)",
            self.service
        ))
    }
}

closable_pymethods! {
    impl Client, closed_by: close;

    #[getter]
    fn service(&self) -> &str {
        &self.service
    }

    /// This client's identity (64 random bits), as its server sees it (`Request.client`).
    #[getter]
    fn id(&self) -> u64 {
        self.id
    }

    /// Requests sent whose response (or error) has not been received yet; a call that gave up
    /// no longer counts its request.
    #[getter]
    fn pending(&self) -> PyResult<usize> {
        lock(&self.state, "client")?.pending()
    }

    /// Whether a server takes this client's requests now.
    #[getter]
    fn has_server(&self) -> PyResult<bool> {
        Ok(lock(&self.state, "client")?.client()?.has_server())
    }

    /// Waits until a server takes this client's requests (forever if `timeout` is None): True,
    /// or False when `timeout` seconds passed first. A request sent without a server raises
    /// ferry.NoServerError at once. Ctrl-C interrupts the wait.
    #[pyo3(signature = (timeout=None))]
    fn wait_for_server(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let t = timeout_arg(timeout)?;
        let mut st = lock(&self.state, "client")?;
        let client = st.client()?;
        if client.has_server() {
            return Ok(true);
        }
        let deadline = deadline(t);
        loop {
            let slice = next_slice(deadline);
            if slice.is_zero() {
                return Ok(false);
            }
            let found = py.detach(|| {
                let end = Instant::now() + slice;
                loop {
                    if client.has_server() {
                        return true;
                    }
                    if Instant::now() >= end {
                        return false;
                    }
                    std::thread::sleep(SERVER_POLL);
                }
            });
            if found {
                return Ok(true);
            }
            py.check_signals()?;
        }
    }

    /// Sends a copy of `data` (any C-contiguous buffer) as a request and returns its id; its
    /// response comes through `recv_response`. Raises ferry.NoServerError when no server takes
    /// requests, ferry.TooLargeError when `data` exceeds Qos.max_message_size.
    fn send_request(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<u64> {
        let mut st = lock(&self.state, "client")?;
        Ok(st
            .send(py, &self.service, data, self.send_never_waits)?
            .get())
    }

    /// Sends a copy of `data` (any C-contiguous buffer) and waits for its response (forever if
    /// `timeout` is None): a copy of it as bytes (a first version: responses are copied, not
    /// lent in place). Raises ferry.TimeoutError when `timeout` seconds pass first (a late
    /// response is then dropped), ferry.NoServerError without a server, ferry.ServerGoneError
    /// when the server goes away first, ferry.TooLargeError when the request is larger than the
    /// client or the server takes. Responses to other requests that arrive meanwhile are kept
    /// for `recv_response`. Ctrl-C interrupts the wait.
    #[pyo3(signature = (data, timeout=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.call_into(py, data, timeout, false)
    }

    /// As `call`, the response as a writable numpy array of `dtype` (over a copy of it; shape
    /// and dtype are not sent).
    #[pyo3(signature = (data, dtype, timeout=None))]
    fn call_array<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        dtype: &Bound<'py, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let body = self.call_into(py, data, timeout, true)?;
        frombuffer(&body, Some(dtype))
    }

    /// Waits for the response to any pending request (forever if `timeout` is None): (request
    /// id, a copy of the body as bytes). Raises ferry.TimeoutError when `timeout` seconds pass
    /// first, ferry.ServerGoneError (its `request` says which) for each request the server can
    /// no longer answer, ferry.FerryError when no request is pending. Ctrl-C interrupts it.
    #[pyo3(signature = (timeout=None))]
    fn recv_response<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<(u64, Bound<'py, PyAny>)> {
        let t = timeout_arg(timeout)?;
        let mut st = lock(&self.state, "client")?;
        if st.pending()? == 0 {
            return Err(self.nothing_pending());
        }
        match st.next(py, &self.service, None, t, false)? {
            Some((request, Ok(body))) => Ok((request, body)),
            Some((_, Err(e))) => Err(errors::call(py, &self.service, e)),
            None => Err(errors::timeout(
                py,
                format!(
                    "no response from service {:?} within {} s",
                    self.service,
                    timeout.unwrap_or_default()
                ),
            )),
        }
    }

    /// The response to any pending request if one is there, as `recv_response` gives it, else
    /// None (never waits; None too when no request is pending).
    fn try_recv_response<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Option<(u64, Bound<'py, PyAny>)>> {
        let mut st = lock(&self.state, "client")?;
        if st.pending()? == 0 {
            return Ok(None);
        }
        match st.next(py, &self.service, None, Some(Duration::ZERO), false)? {
            Some((request, Ok(body))) => Ok(Some((request, body))),
            Some((_, Err(e))) => Err(errors::call(py, &self.service, e)),
            None => Ok(None),
        }
    }

    /// Leaves the service (pending requests are given up). Later calls raise ferry.FerryError.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let mut st = lock(&self.state, "client")?;
        st.kept.clear();
        st.abandoned.clear();
        if let Some(client) = st.client.take() {
            py.detach(move || drop(client));
        }
        Ok(())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(lock(&self.state, "client")?.client.is_none())
    }

    fn __repr__(&self) -> String {
        format!(
            "ferry.Client(service={:?}, id=0x{:016x})",
            self.service, self.id
        )
    }
}

/// Serves a service: receives requests and answers each, at once or later, in any order. Made
/// by `Node.server`; one per service on a host. A server serves one thread at a time: answer
/// on the thread that receives (hand work done elsewhere back to it).
#[pyclass(frozen, module = "ferry", name = "Server")]
pub struct Server {
    pub(crate) state: Mutex<ServerState>,
    service: String,
    /// Sending never waits (shared memory: a commit): no need to let go of the GIL for it.
    send_never_waits: bool,
}

/// The server; None once closed.
pub(crate) struct ServerState(Option<ferry::Server>);

impl Drop for ServerState {
    fn drop(&mut self) {
        if let Some(server) = self.0.take() {
            // Its UDP publishers linger for their clients: let other Python threads run.
            Python::attach(|py| py.detach(move || drop(server)));
        }
    }
}

impl ServerState {
    pub(crate) fn server(&mut self) -> PyResult<&mut ferry::Server> {
        self.0.as_mut().ok_or_else(|| errors::closed("server"))
    }
}

impl Server {
    pub fn new(inner: ferry::Server, qos: &ferry::Qos) -> Server {
        Server {
            service: inner.service().to_owned(),
            state: Mutex::new(ServerState(Some(inner))),
            send_never_waits: qos.transport == ferry::Transport::Shm,
        }
    }

    /// The next request, copied, or None when `timeout` ran out (None: no end).
    fn receive(slf: &Bound<'_, Self>, timeout: Option<Duration>) -> PyResult<Option<Request>> {
        let py = slf.py();
        let mut st = lock(&slf.get().state, "server")?;
        let server = st.server()?;
        let deadline = deadline(timeout);
        let mut waited = false;
        loop {
            let Some(got) = look(py, deadline, waited, |slice| match slice {
                Some(slice) => server.recv_request(slice),
                None => server.try_recv_request(),
            }) else {
                return Ok(None);
            };
            if let Some(request) = got.map_err(errors::recv)? {
                return Ok(Some(Request {
                    server: slf.clone().unbind(),
                    body: PyBytes::new(py, &request).unbind(),
                    to: request.reply_to(),
                    answered: AtomicBool::new(false),
                }));
            }
            if waited {
                py.check_signals()?;
            }
            waited = true;
        }
    }

    fn receive_or_timeout(slf: &Bound<'_, Self>, timeout: Option<f64>) -> PyResult<Request> {
        let t = timeout_arg(timeout)?;
        Server::receive(slf, t)?.ok_or_else(|| {
            errors::timeout(
                slf.py(),
                format!(
                    "no request for service {:?} within {} s",
                    slf.get().service,
                    timeout.unwrap_or_default()
                ),
            )
        })
    }

    /// Answers `to` with a copy of `data`: a loan (waiting for a new client to take its responses,
    /// and for room, with the GIL released), filled with the GIL held, then sent. False when the
    /// client had gone.
    fn respond_to(
        &self,
        py: Python<'_>,
        to: ferry::ReplyTo,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        with_bytes(data, |bytes| {
            let mut st = lock(&self.state, "server")?;
            let server = st.server()?;
            let len = bytes.len();
            let Some(mut loan) = py
                .detach(|| server.loan_response(to, len))
                .map_err(|e| errors::serve(py, e))?
            else {
                return Ok(false);
            };
            loan.as_mut_slice().copy_from_slice(bytes);
            if self.send_never_waits {
                loan.send()
            } else {
                py.detach(move || loan.send())
            }
            .map_err(|e| errors::send(py, e))?;
            Ok(true)
        })
    }
}

closable_pymethods! {
    impl Server, closed_by: close;

    #[getter]
    fn service(&self) -> &str {
        &self.service
    }

    /// Clients this server has answered and that are still there.
    #[getter]
    fn client_count(&self) -> PyResult<usize> {
        Ok(lock(&self.state, "server")?.server()?.client_count())
    }

    /// Waits for the next request (forever if `timeout` is None) and returns it as a Request (a
    /// copy of its body, with where its answer goes); raises ferry.TimeoutError when `timeout`
    /// seconds pass first. Ctrl-C interrupts the wait.
    #[pyo3(signature = (timeout=None))]
    fn recv_request(slf: &Bound<'_, Self>, timeout: Option<f64>) -> PyResult<Request> {
        Server::receive_or_timeout(slf, timeout)
    }

    /// The next request if one is waiting, else None (never waits).
    fn try_recv_request(slf: &Bound<'_, Self>) -> PyResult<Option<Request>> {
        Server::receive(slf, Some(Duration::ZERO))
    }

    /// Answers `to` (a Request this server received, or its `reply_to`, kept to answer later)
    /// with a copy of `data` (any C-contiguous buffer): True when sent, False when the client
    /// had gone (the answer is dropped and counted). A Request is answered once.
    fn respond(
        slf: &Bound<'_, Self>,
        to: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let py = slf.py();
        if let Ok(request) = to.cast::<Request>() {
            let request = request.get();
            if request.server.as_ptr() != slf.as_ptr() {
                return Err(PyValueError::new_err(
                    "this request was received by another server: answer it there",
                ));
            }
            return request.answer(py, data);
        }
        if let Ok(reply_to) = to.cast::<ReplyTo>() {
            return slf.get().respond_to(py, reply_to.get().inner, data);
        }
        Err(PyTypeError::new_err(format!(
            "respond to a ferry.Request or a ferry.ReplyTo, not {}",
            to.get_type().name()?
        )))
    }

    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__(slf: &Bound<'_, Self>) -> PyResult<Request> {
        Server::receive_or_timeout(slf, None)
    }

    /// Stops serving (the service is free for another server). Later calls raise
    /// ferry.FerryError.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let mut st = lock(&self.state, "server")?;
        if let Some(server) = st.0.take() {
            py.detach(move || drop(server));
        }
        Ok(())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(lock(&self.state, "server")?.0.is_none())
    }

    fn __repr__(&self) -> String {
        format!("ferry.Server(service={:?})", self.service)
    }
}

/// A request a server received: a copy of its body (`data`, `bytes(request)`), the client that
/// asked and the request's id. Answer it with `respond(data)`, now or later; or keep its
/// `reply_to` and answer with `Server.respond`.
#[pyclass(frozen, module = "ferry", name = "Request")]
pub struct Request {
    server: Py<Server>,
    body: Py<PyBytes>,
    to: ferry::ReplyTo,
    answered: AtomicBool,
}

impl Request {
    fn answer(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<bool> {
        if self.answered.swap(true, Ordering::AcqRel) {
            return Err(errors::FerryError::new_err(format!(
                "request {} of client {} was answered already (a request is answered once)",
                self.to.request, self.to.client
            )));
        }
        let sent = self.server.get().respond_to(py, self.to, data);
        if sent.is_err() {
            self.answered.store(false, Ordering::Release);
        }
        sent
    }
}

#[pymethods]
impl Request {
    /// The request's body (a copy of it).
    #[getter]
    fn data(&self, py: Python<'_>) -> Py<PyBytes> {
        self.body.clone_ref(py)
    }

    /// The id of the client that asked (`Client.id`).
    #[getter]
    fn client(&self) -> u64 {
        self.to.client.get()
    }

    /// The request's id within its client: the low 32 bits of the id `Client.send_request`
    /// returned (all the wire carries).
    #[getter]
    fn id(&self) -> u64 {
        self.to.request.get()
    }

    /// Where its answer goes, to answer later with `Server.respond`.
    #[getter]
    fn reply_to(&self) -> ReplyTo {
        ReplyTo { inner: self.to }
    }

    /// Whether `respond` answered it.
    #[getter]
    fn answered(&self) -> bool {
        self.answered.load(Ordering::Acquire)
    }

    /// Answers with a copy of `data` (any C-contiguous buffer): True when sent, False when the
    /// client had gone. Raises ferry.FerryError when answered already.
    fn respond(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.answer(py, data)
    }

    /// A read-only numpy array of `dtype` (uint8 when None) over the body (no further copy).
    #[pyo3(signature = (dtype=None))]
    fn array<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        frombuffer(self.body.bind(py).as_any(), dtype)
    }

    fn __bytes__(&self, py: Python<'_>) -> Py<PyBytes> {
        self.body.clone_ref(py)
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.body.bind(py).as_bytes().len()
    }

    /// True, even when the body is empty: `if request := server.try_recv_request():` sees
    /// every request.
    fn __bool__(&self) -> bool {
        true
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "ferry.Request(client=0x{}, id={}, len={})",
            self.to.client,
            self.to.request,
            self.__len__(py)
        )
    }
}

/// Where an answer goes: a client and one of its requests (`Request.reply_to`), kept by a server
/// that answers later with `Server.respond(reply_to, data)`. Hashable: a key of pending work.
#[pyclass(frozen, eq, hash, module = "ferry", name = "ReplyTo")]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReplyTo {
    inner: ferry::ReplyTo,
}

#[pymethods]
impl ReplyTo {
    /// The client's id (`Client.id`).
    #[getter]
    fn client(&self) -> u64 {
        self.inner.client.get()
    }

    /// The request's id (as `Request.id`).
    #[getter]
    fn request(&self) -> u64 {
        self.inner.request.get()
    }

    fn __repr__(&self) -> String {
        format!(
            "ferry.ReplyTo(client=0x{}, request={})",
            self.inner.client, self.inner.request
        )
    }
}
