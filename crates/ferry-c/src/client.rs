//! `ferry_client`, a service's client, and its `ferry_response`.
//!
//! Rust's `Response<'a>` borrows its `Client` mutably; as with a subscriber's sample
//! (`subscriber.rs`), the one response a client may hold lives in a slot of the client's own
//! heap block as `Response<'static>`, under the same three rules: no other reference to the
//! client while the slot is full (every other call on it is refused), the block neither moves
//! nor is freed while the slot is full, and the slot is emptied before the client is dropped.

use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_char, c_void};
use std::ptr;
use std::time::Duration;

use ferry::service::MAX_SERVICE_NAME;
use ferry::{CallError, Client, Response};

use crate::args::{bytes, clear_out, free_endpoint, handle, put, timeout};
use crate::node::{ferry_node, new_endpoint};
use crate::qos::ferry_qos;
use crate::slot::{self, lend, take, Handle, Lent, Slot};
use crate::status::{ferry_status, guard, guard_status, nothing_received, Failure};

/// A service's client (opaque). Made by `ferry_client_new`, freed by `ferry_client_free`. Use
/// it from one thread at a time (it may move between threads).
pub struct ferry_client {
    /// Declared first, so that it would drop first (it is empty whenever the block is freed).
    response: ferry_response,
    /// Borrowed mutably by the response in `response.held` while there is one.
    client: UnsafeCell<Client>,
    /// The largest request: the client's `max_message_size`.
    max_request: usize,
    /// The request the last failed receive or call was about (`ferry_client_failed_request`).
    failed: Cell<Option<u64>>,
}

/// A response received by a client (opaque). It lives inside its client: at most one per
/// client at a time, valid until `ferry_response_release`. Under shared memory its bytes are the
/// server's ring itself (or a copy, for a response that came while a call waited for another).
/// Releasing it again is refused with `FERRY_INVALID_ARGUMENT` (until the client receives again:
/// the handle is then the new response).
pub struct ferry_response {
    /// The response held, borrowing the client of the enclosing `ferry_client`.
    slot: Slot<Response<'static>>,
}

/// What C reads of a response, read once when it arrived.
#[derive(Clone, Copy)]
pub(crate) struct ResponseFields {
    data: *const u8,
    len: usize,
    request: u64,
}

impl Lent for Response<'static> {
    type Fields = ResponseFields;
    const WHAT: &'static str = "response";
    const ENDED: &'static str = "this response was already released";

    fn fields(&mut self) -> ResponseFields {
        ResponseFields {
            data: self.as_ptr(),
            len: self.len(),
            request: self.request().get(),
        }
    }
}

impl Handle for ferry_response {
    type Lent = Response<'static>;

    fn slot(&self) -> &Slot<Response<'static>> {
        &self.slot
    }
}

impl ferry_client {
    fn holding(&self) -> bool {
        self.response.slot.holding()
    }

    /// The client, for a call that is not a response's; refused while a response is held.
    ///
    /// # Safety
    /// As `Slot::endpoint`.
    // The content of an UnsafeCell, handed out under this function's contract.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn client(&self, function: &str) -> Result<&mut Client, Failure> {
        let refusal = "a response of this client is held; release it (ferry_response_release)";
        // SAFETY: the caller's promise; the response borrows this client.
        unsafe { self.response.slot.endpoint(&self.client, function, refusal) }
    }

    /// Notes the request a failed receive or call was about, if it names one.
    fn note_failure(&self, e: &CallError) {
        match e {
            CallError::ServerGone { request, .. }
            | CallError::Timeout { request, .. }
            | CallError::TooLarge { request, .. } => self.failed.set(Some(request.get())),
            _ => {}
        }
    }
}

/// The start of a receive or a call, which may put a response in the slot: clears `*out`, reads
/// the client and the timeout (`until`: what -1 waits for), and borrows the client for as long
/// as the response it gives stays in the slot.
///
/// # Safety
/// `client` is NULL or a live client, used by this thread alone; `out` is NULL or valid for a
/// write.
unsafe fn receiving<'a>(
    client: *mut ferry_client,
    out: *mut *mut ferry_response,
    function: &str,
    timeout_ns: i64,
    until: &str,
) -> Result<(&'a ferry_client, &'static mut Client, Duration), Failure> {
    // SAFETY: the caller passes a live client or NULL, and `out` valid for a write or NULL.
    unsafe { clear_out(client, out, ferry_client::holding) }?;
    // SAFETY: the caller passes a live client or NULL (refused).
    let h = unsafe { handle("client", client) }?;
    let timeout = duration(timeout_ns, until)?;
    // SAFETY: no response is held (`client` checks), and no other reference to the client is
    // live (one thread per handle, none kept across calls); the response then stays in this
    // block's slot, the block neither moves nor is freed while it is there, and no other
    // reference to the client is made until it leaves (the rules of this module), so extending
    // the borrow to 'static never lets it outlive or alias the client.
    let c: &'static mut Client = unsafe { h.client(function) }?;
    Ok((h, c, timeout))
}

/// Puts a response in the slot of the client block `client` and its handle in `*out`.
///
/// # Safety
/// `client` is a live block whose slot is empty; `out` is valid for a write.
unsafe fn hold(
    client: *mut ferry_client,
    response: Response<'static>,
    out: *mut *mut ferry_response,
) -> Result<(), Failure> {
    // SAFETY: `client` is a live block; the pointer to its handle is derived from the caller's
    // pointer, so it stays valid for as long as the block lives.
    let response_ptr = unsafe { ptr::addr_of_mut!((*client).response) };
    // SAFETY: as just said, and the caller's promises.
    unsafe { lend(response_ptr, response, out) }
}

/// A timeout in nanoseconds as C passes it: -1 none, 0 or more that long.
fn duration(timeout_ns: i64, until: &str) -> Result<Duration, Failure> {
    let minus_one = format_args!("wait until {until}");
    Ok(timeout(timeout_ns, minus_one, "0")?.unwrap_or(Duration::MAX))
}

/// Makes a client of `service` (1 to 64 bytes of letters, digits and `_ - . /`, not beginning
/// with `.`) with `qos` (NULL: `ferry_qos_default()`): its requests may be up to its
/// `max_message_size`. Delivery is reliable whatever `qos` says. A send fails at once with
/// `FERRY_NO_SERVER` while the service has no server, unless `ferry_client_wait_for_server` said
/// to wait. On success `*out` holds it (free it with `ferry_client_free`); on failure, NULL.
///
/// # Safety
/// `node` is a live node, `service` a NUL-terminated string, `qos` NULL or valid for a read,
/// `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_client_new(
    node: *const ferry_node,
    service: *const c_char,
    qos: *const ferry_qos,
    out: *mut *mut ferry_client,
) -> ferry_status {
    guard("ferry_client_new", || {
        let make = |node: &ferry::Node, service: &str, qos: ferry::Qos| {
            let client = node.client(service, &qos)?;
            Ok(ferry_client {
                response: ferry_response { slot: Slot::new() },
                client: UnsafeCell::new(client),
                max_request: qos.max_message_size,
                failed: Cell::new(None),
            })
        };
        // SAFETY: the caller passes a live node, a C string and `out` valid for a write (NULL is
        // refused for each), and a QoS that is NULL or valid for a read.
        unsafe { new_endpoint(node, "service", service, MAX_SERVICE_NAME, qos, out, make) }
    })
}

/// Frees a client: its pending requests are forgotten (their late answers are dropped by the
/// server). Refused (`FERRY_INVALID_ARGUMENT`, nothing freed) while it holds a response. NULL is
/// allowed and does nothing.
///
/// # Safety
/// `client` is NULL or a client not freed yet.
#[no_mangle]
pub unsafe extern "C" fn ferry_client_free(client: *mut ferry_client) -> ferry_status {
    guard("ferry_client_free", || {
        // SAFETY: the caller passes NULL or a client from ferry_client_new, not freed yet.
        unsafe {
            free_endpoint(
                client,
                ferry_client::holding,
                "a response of this client is held; release it first (the client was not freed)",
            )
        }
    })
}

/// From now on a send (`ferry_client_send`, `ferry_client_call`) that finds no server waits up
/// to `timeout_ns` for one to appear, instead of failing at once with `FERRY_NO_SERVER` (the
/// default, `timeout_ns` 0); -1 waits without end. This call itself does not wait. Refused while
/// the client holds a response.
///
/// # Safety
/// `client` is a live client.
#[no_mangle]
pub unsafe extern "C" fn ferry_client_wait_for_server(
    client: *mut ferry_client,
    timeout_ns: i64,
) -> ferry_status {
    const FUNCTION: &str = "ferry_client_wait_for_server";
    guard(FUNCTION, || {
        let timeout = duration(timeout_ns, "a server appears")?;
        // SAFETY: the caller passes a live client or NULL (refused), used by this thread alone;
        // no reference to it outlives a call.
        let c = unsafe { handle("client", client)?.client(FUNCTION) }?;
        c.wait_for_server(timeout);
        Ok(())
    })
}

/// Writes to `*out` whether a server takes this client's requests now (it looks: not a cheap
/// call to make per message). Refused while the client holds a response.
///
/// # Safety
/// `client` is a live client; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_client_has_server(
    client: *mut ferry_client,
    out: *mut bool,
) -> ferry_status {
    const FUNCTION: &str = "ferry_client_has_server";
    guard(FUNCTION, || {
        if out.is_null() {
            return Err(Failure::invalid("out is NULL"));
        }
        // SAFETY: the caller passes a live client or NULL (refused), used by this thread alone;
        // no reference to it outlives a call.
        let has = unsafe { handle("client", client)?.client(FUNCTION) }?.has_server();
        // SAFETY: the caller promises `out` is valid for a write (NULL is refused).
        unsafe { put("out", out, has) }
    })
}

/// Writes to `*out` the number of requests sent and not yet answered (nor ended by a failure).
/// Refused while the client holds a response.
///
/// # Safety
/// `client` is a live client; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_client_pending(
    client: *mut ferry_client,
    out: *mut usize,
) -> ferry_status {
    const FUNCTION: &str = "ferry_client_pending";
    guard(FUNCTION, || {
        // SAFETY: the caller passes a live client or NULL (refused), used by this thread alone;
        // no reference to it outlives a call.
        let pending = unsafe { handle("client", client)?.client(FUNCTION) }?.pending();
        // SAFETY: the caller promises `out` is valid for a write (NULL is refused).
        unsafe { put("out", out, pending) }
    })
}

/// Sends a copy of `len` bytes at `data` (NULL only when `len` is 0) as a request, and writes
/// its id to `*out` (ids count from 0 per client); its response comes through
/// `ferry_client_recv`. `FERRY_NO_SERVER` when the service has no server (after waiting, if
/// `ferry_client_wait_for_server` said to), `FERRY_MANY_SERVERS` when it has several (on several
/// hosts), `FERRY_TOO_LARGE` above the client's `max_message_size`, `FERRY_TIMEOUT` when the
/// server made no room within the send timeout: nothing was sent. Refused while the client holds
/// a response.
///
/// # Safety
/// `client` is a live client; `data` is valid for reads of `len` bytes; `out` is valid for a
/// write.
#[no_mangle]
pub unsafe extern "C" fn ferry_client_send(
    client: *mut ferry_client,
    data: *const c_void,
    len: usize,
    out: *mut u64,
) -> ferry_status {
    const FUNCTION: &str = "ferry_client_send";
    guard(FUNCTION, || {
        if out.is_null() {
            return Err(Failure::invalid("out is NULL"));
        }
        // SAFETY: the caller passes a live client or NULL (refused), used by this thread alone;
        // no reference to it outlives a call.
        let h = unsafe { handle("client", client) }?;
        // SAFETY: as above.
        let c = unsafe { h.client(FUNCTION) }?;
        // SAFETY: the caller promises `len` readable bytes at `data` (checked against the
        // largest request first).
        let body = unsafe { bytes(data, len, h.max_request) }?;
        let id = c.send_request(body)?;
        // SAFETY: the caller promises `out` is valid for a write (NULL is refused).
        unsafe { put("out", out, id.get()) }
    })
}

/// Receives the response to any pending request into `*out` (NULL unless `FERRY_OK`, except
/// when the call is refused because a response is held: `*out` is then left as it was, as it may
/// hold that response). Read it with `ferry_response_data`, `ferry_response_len` and
/// `ferry_response_request_id`; release it with `ferry_response_release`. `timeout_ns`: -1 waits
/// until a response comes; 0 only looks (`FERRY_WOULD_BLOCK` if none is waiting); above 0 waits
/// at most that long (`FERRY_TIMEOUT`). Neither is a failure: they leave the last error message
/// as it is, and the requests stay pending. A pending request that will get no response ends
/// here, one per receive: `FERRY_SERVER_GONE` when its server went away, `FERRY_TOO_LARGE` when
/// the server refused it as larger than it takes; `ferry_client_failed_request` names it.
/// Refused while the client holds a response.
///
/// # Safety
/// `client` is a live client; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_client_recv(
    client: *mut ferry_client,
    timeout_ns: i64,
    out: *mut *mut ferry_response,
) -> ferry_status {
    const FUNCTION: &str = "ferry_client_recv";
    guard_status(FUNCTION, || {
        // SAFETY: the caller passes a live client (or NULL, refused) used by this thread alone,
        // and `out` valid for a write (or NULL, refused).
        let (h, c, timeout) =
            unsafe { receiving(client, out, FUNCTION, timeout_ns, "a response comes") }?;
        let received = if timeout.is_zero() {
            c.try_recv_response()
        } else {
            c.recv_response(timeout)
        };
        let received = received.inspect_err(|e| h.note_failure(e))?;
        let Some(response) = received else {
            return Ok(nothing_received(timeout.is_zero()));
        };
        // SAFETY: `client` is the live block `h` is, its slot is empty (checked by `client`),
        // and `out` was checked above.
        unsafe { hold(client, response, out) }?;
        Ok(ferry_status::FERRY_OK)
    })
}

/// Sends a copy of `len` bytes at `data` (NULL only when `len` is 0) as a request and waits up
/// to `timeout_ns` (-1: without end) for its response, into `*out` as `ferry_client_recv` puts
/// it. Fails as `ferry_client_send` does, and with `FERRY_TIMEOUT` when no response came in
/// time (the request is then no longer pending: a late answer is dropped),
/// `FERRY_SERVER_GONE` when the server went away first, `FERRY_TOO_LARGE` when the server
/// refused the request as larger than it takes (`ferry_client_failed_request` names the request
/// in these three cases). Responses to other pending requests that come meanwhile are kept (a
/// copy) for later receives. Refused while the client holds a response.
///
/// # Safety
/// `client` is a live client; `data` is valid for reads of `len` bytes; `out` is valid for a
/// write.
#[no_mangle]
pub unsafe extern "C" fn ferry_client_call(
    client: *mut ferry_client,
    data: *const c_void,
    len: usize,
    timeout_ns: i64,
    out: *mut *mut ferry_response,
) -> ferry_status {
    const FUNCTION: &str = "ferry_client_call";
    guard(FUNCTION, || {
        // SAFETY: the caller passes a live client (or NULL, refused) used by this thread alone,
        // and `out` valid for a write (or NULL, refused).
        let (h, c, timeout) =
            unsafe { receiving(client, out, FUNCTION, timeout_ns, "the response comes") }?;
        // SAFETY: the caller promises `len` readable bytes at `data` (checked against the
        // largest request first).
        let body = unsafe { bytes(data, len, h.max_request) }?;
        let response = c.call(body, timeout).inspect_err(|e| h.note_failure(e))?;
        // SAFETY: `client` is the live block `h` is, its slot is empty (checked by `client`),
        // and `out` was checked above.
        unsafe { hold(client, response, out) }
    })
}

/// Writes to `*out` the id of the request that the client's last `FERRY_SERVER_GONE`,
/// `FERRY_TOO_LARGE` (refused by the server) or `FERRY_TIMEOUT` (of a call) from
/// `ferry_client_recv` or `ferry_client_call` was about. `FERRY_INVALID_ARGUMENT` when none has
/// been. Allowed while the client holds a response.
///
/// # Safety
/// `client` is a live client; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_client_failed_request(
    client: *const ferry_client,
    out: *mut u64,
) -> ferry_status {
    guard("ferry_client_failed_request", || {
        // SAFETY: the caller passes a live client or NULL (refused).
        let h = unsafe { handle("client", client) }?;
        let request = h.failed.get().ok_or_else(|| {
            Failure::invalid("no receive or call of this client has failed on a request yet")
        })?;
        // SAFETY: the caller promises `out` is valid for a write (NULL is refused).
        unsafe { put("out", out, request) }
    })
}

/// The first byte of the response's body, readable until it is released; NULL for a NULL
/// response or one already released. (Never NULL for a held response, even of 0 bytes.)
///
/// # Safety
/// `response` is NULL or a response handle whose client is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_response_data(response: *const ferry_response) -> *const u8 {
    // SAFETY: the caller passes a live response handle or NULL (refused).
    unsafe { slot::read("ferry_response_data", response, ptr::null(), |r| r.data) }
}

/// The length of the response's body in bytes; 0 for a NULL response or one already released.
///
/// # Safety
/// `response` is NULL or a response handle whose client is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_response_len(response: *const ferry_response) -> usize {
    // SAFETY: the caller passes a live response handle or NULL (refused).
    unsafe { slot::read("ferry_response_len", response, 0, |r| r.len) }
}

/// The id of the request this answers (as `ferry_client_send` gave it); 0 for a NULL response
/// or one already released.
///
/// # Safety
/// `response` is NULL or a response handle whose client is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_response_request_id(response: *const ferry_response) -> u64 {
    // SAFETY: the caller passes a live response handle or NULL (refused).
    unsafe { slot::read("ferry_response_request_id", response, 0, |r| r.request) }
}

/// Releases the response: under shared memory the server may reuse its bytes. Releasing again
/// is refused with `FERRY_INVALID_ARGUMENT`.
///
/// # Safety
/// `response` is NULL or a response handle whose client is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_response_release(response: *mut ferry_response) -> ferry_status {
    guard("ferry_response_release", || {
        // SAFETY: the caller passes a live response handle or NULL (refused).
        let (_, response) = unsafe { take(response) }?;
        drop(response);
        Ok(())
    })
}
