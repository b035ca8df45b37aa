//! `ferry_server`, a service's server, and its `ferry_request`.
//!
//! Rust's `Request<'a>` borrows its `Server` mutably; as with a subscriber's sample
//! (`subscriber.rs`), the one request a server may hold lives in a slot of the server's own heap
//! block as `Request<'static>`, under the same three rules: no other reference to the server
//! while the slot is full (every other call on it is refused), the block neither moves nor is
//! freed while the slot is full, and the slot is emptied before the server is dropped.
//!
//! A request answered later is answered by its client's id and its request id
//! (`ferry_server_respond`). Rust answers it through the `ReplyTo` the request gave, which C
//! cannot make from two integers; so a request released unanswered leaves its `ReplyTo` in a
//! table of the handle (bounded: the oldest is forgotten first), where the later answer finds
//! it. Only requests answered later pass through the table: an answer given to a held request
//! (`ferry_request_respond`) makes no look-up.

use std::cell::UnsafeCell;
use std::collections::{HashMap, VecDeque};
use std::ffi::{c_char, c_void};
use std::ptr;

use ferry::service::{Responded, ServeError, MAX_SERVICE_NAME};
use ferry::{ReplyTo, Request, Server};

use crate::args::{bytes, clear_out, free_endpoint, handle, timeout};
use crate::node::{ferry_node, new_endpoint};
use crate::qos::ferry_qos;
use crate::slot::{self, lend, take, Handle, Lent, Slot};
use crate::status::{ferry_status, guard, guard_status, nothing_received, Failure};

/// Requests released unanswered that a server remembers for `ferry_server_respond`; beyond it
/// the oldest is forgotten.
pub(crate) const MAX_UNANSWERED: usize = 65_536;

/// A service's server (opaque). Made by `ferry_server_new`, freed by `ferry_server_free`. Use it
/// from one thread at a time (it may move between threads).
pub struct ferry_server {
    /// Declared first, so that it would drop first (it is empty whenever the block is freed).
    request: ferry_request,
    /// Borrowed mutably by the request in `request.held` while there is one.
    server: UnsafeCell<Server>,
}

/// A request received by a server (opaque). It lives inside its server: at most one per server
/// at a time, valid until `ferry_request_respond` or `ferry_request_release`. Under shared
/// memory its bytes are the client's ring itself. Answering or releasing it again is refused
/// with `FERRY_INVALID_ARGUMENT` (until the server receives again: the handle is then the new
/// request).
pub struct ferry_request {
    /// The request held, borrowing the server of the enclosing `ferry_server`.
    slot: Slot<Request<'static>>,
    /// Requests released unanswered, for `ferry_server_respond`.
    unanswered: UnsafeCell<Unanswered<ReplyTo>>,
    /// The largest answer: the server's `max_message_size`.
    max_response: usize,
}

/// What C reads of a request, read once when it arrived.
#[derive(Clone, Copy)]
pub(crate) struct RequestFields {
    data: *const u8,
    len: usize,
    client: u64,
    id: u64,
}

impl Lent for Request<'static> {
    type Fields = RequestFields;
    const WHAT: &'static str = "request";
    const ENDED: &'static str = "this request was already answered or released";

    fn fields(&mut self) -> RequestFields {
        RequestFields {
            data: self.as_ptr(),
            len: self.len(),
            client: self.client().get(),
            id: self.id().get(),
        }
    }
}

impl Handle for ferry_request {
    type Lent = Request<'static>;

    fn slot(&self) -> &Slot<Request<'static>> {
        &self.slot
    }
}

/// The requests a server released unanswered (`T`: their `ReplyTo`), by client and request id,
/// oldest first, at most `limit`.
struct Unanswered<T> {
    limit: usize,
    /// Each with the number it was remembered under.
    by_key: HashMap<(u64, u64), (T, u64)>,
    /// Keys in the order remembered; an entry whose number differs from the table's (answered
    /// since, or remembered again) is stale, skipped and dropped when found.
    order: VecDeque<((u64, u64), u64)>,
    next: u64,
}

impl<T> Unanswered<T> {
    fn new(limit: usize) -> Unanswered<T> {
        Unanswered {
            limit,
            by_key: HashMap::new(),
            order: VecDeque::new(),
            next: 0,
        }
    }

    fn remember(&mut self, key: (u64, u64), value: T) {
        let n = self.next;
        self.next += 1;
        self.by_key.insert(key, (value, n));
        self.order.push_back((key, n));
        while self.by_key.len() > self.limit {
            let Some((old, m)) = self.order.pop_front() else {
                break;
            };
            if self.by_key.get(&old).is_some_and(|&(_, n)| n == m) {
                self.by_key.remove(&old);
            }
        }
        // Entries of answered requests pile up in `order` until they reach its front: they are
        // dropped once they outnumber the live ones by 1024 (amortised constant time each).
        if self.order.len() >= 2 * self.by_key.len() + 1024 {
            let by_key = &self.by_key;
            self.order
                .retain(|(k, m)| by_key.get(k).is_some_and(|&(_, n)| n == *m));
        }
    }

    fn take(&mut self, key: (u64, u64)) -> Option<T> {
        self.by_key.remove(&key).map(|(value, _)| value)
    }
}

/// A request's key in the table: its client's id and its id.
fn key(to: &ReplyTo) -> (u64, u64) {
    (to.client.get(), to.request.get())
}

/// The status of an answer: `FERRY_OK` when sent, `FERRY_CLIENT_GONE` (not a failure) when its
/// client had gone. On a failure nothing was sent: the request is remembered again, for
/// `ferry_server_respond`.
fn answered(
    outcome: Result<Responded, ServeError>,
    unanswered: &mut Unanswered<ReplyTo>,
    to: ReplyTo,
) -> Result<ferry_status, Failure> {
    match outcome {
        Ok(Responded::Sent) => Ok(ferry_status::FERRY_OK),
        Ok(Responded::ClientGone) => Ok(ferry_status::FERRY_CLIENT_GONE),
        Err(e) => {
            unanswered.remember(key(&to), to);
            Err(e.into())
        }
    }
}

impl ferry_server {
    fn holding(&self) -> bool {
        self.request.slot.holding()
    }

    /// The server, for a call that is not a request's; refused while a request is held.
    ///
    /// # Safety
    /// As `Slot::endpoint`.
    // The content of an UnsafeCell, handed out under this function's contract.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn server(&self, function: &str) -> Result<&mut Server, Failure> {
        let refusal = "a request of this server is held; answer it (ferry_request_respond) or \
                       release it (ferry_request_release)";
        // SAFETY: the caller's promise; the request borrows this server.
        unsafe { self.request.slot.endpoint(&self.server, function, refusal) }
    }
}

/// Makes the server of `service` (1 to 64 bytes of letters, digits and `_ - . /`, not beginning
/// with `.`) with `qos` (NULL: `ferry_qos_default()`): requests larger than its
/// `max_message_size` are refused with an error their client sees (`FERRY_TOO_LARGE`), and
/// answers may be as large. Delivery is reliable whatever `qos` says. One server per service:
/// `FERRY_SERVICE_TAKEN` when the service has one on this host. On success `*out` holds it (free
/// it with `ferry_server_free`); on failure, NULL.
///
/// # Safety
/// `node` is a live node, `service` a NUL-terminated string, `qos` NULL or valid for a read,
/// `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_server_new(
    node: *const ferry_node,
    service: *const c_char,
    qos: *const ferry_qos,
    out: *mut *mut ferry_server,
) -> ferry_status {
    guard("ferry_server_new", || {
        let make = |node: &ferry::Node, service: &str, qos: ferry::Qos| {
            let server = node.server(service, &qos)?;
            Ok(ferry_server {
                request: ferry_request {
                    slot: Slot::new(),
                    unanswered: UnsafeCell::new(Unanswered::new(MAX_UNANSWERED)),
                    max_response: qos.max_message_size,
                },
                server: UnsafeCell::new(server),
            })
        };
        // SAFETY: the caller passes a live node, a C string and `out` valid for a write (NULL is
        // refused for each), and a QoS that is NULL or valid for a read.
        unsafe { new_endpoint(node, "service", service, MAX_SERVICE_NAME, qos, out, make) }
    })
}

/// Frees a server: the service has no server until another is made, and the pending calls of
/// its clients end with `FERRY_SERVER_GONE`. Refused (`FERRY_INVALID_ARGUMENT`, nothing freed)
/// while it holds a request. NULL is allowed and does nothing.
///
/// # Safety
/// `server` is NULL or a server not freed yet.
#[no_mangle]
pub unsafe extern "C" fn ferry_server_free(server: *mut ferry_server) -> ferry_status {
    guard("ferry_server_free", || {
        // SAFETY: the caller passes NULL or a server from ferry_server_new, not freed yet.
        unsafe {
            free_endpoint(
                server,
                ferry_server::holding,
                "a request of this server is held; answer or release it first (the server was \
                 not freed)",
            )
        }
    })
}

/// Receives the next request into `*out` (NULL unless `FERRY_OK`, except when the call is
/// refused because a request is held: `*out` is then left as it was, as it may hold that
/// request). Read it with `ferry_request_data`, `ferry_request_len`, `ferry_request_client` and
/// `ferry_request_id`; answer it with `ferry_request_respond`, or release it with
/// `ferry_request_release` and answer later with `ferry_server_respond`. `timeout_ns`: -1 waits
/// until a request comes; 0 only looks (`FERRY_WOULD_BLOCK` if none is waiting); above 0 waits
/// at most that long (`FERRY_TIMEOUT`). Neither `FERRY_WOULD_BLOCK` nor `FERRY_TIMEOUT` is a
/// failure: they leave the last error message as it is. While it waits the server looks whether
/// its clients still run, and refuses requests larger than it takes (their clients see
/// `FERRY_TOO_LARGE`). Refused while the server holds a request.
///
/// # Safety
/// `server` is a live server; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_server_recv(
    server: *mut ferry_server,
    timeout_ns: i64,
    out: *mut *mut ferry_request,
) -> ferry_status {
    const FUNCTION: &str = "ferry_server_recv";
    guard_status(FUNCTION, || {
        // SAFETY: the caller passes a live server or NULL, and `out` valid for a write or NULL.
        unsafe { clear_out(server, out, ferry_server::holding) }?;
        // SAFETY: the caller passes a live server or NULL (refused).
        let handle = unsafe { handle("server", server) }?;
        // SAFETY: no request is held (`server` checks), and no other reference to the server is
        // live (one thread per handle, none kept across calls); the request then stays in this
        // block's slot, the block neither moves nor is freed while it is there, and no other
        // reference to the server is made until it leaves (the rules of this module), so
        // extending the borrow to 'static never lets it outlive or alias the server.
        let s: &'static mut Server = unsafe { handle.server(FUNCTION) }?;
        let received = match timeout(timeout_ns, "wait until a request comes", "0 (only look)")? {
            None => Some(s.recv()?),
            Some(t) if t.is_zero() => s.try_recv_request()?,
            Some(t) => s.recv_request(t)?,
        };
        let Some(request) = received else {
            return Ok(nothing_received(timeout_ns == 0));
        };
        // SAFETY: `server` is a live block; the pointer to its handle is derived from the
        // caller's pointer, so it stays valid for as long as the block lives.
        let request_ptr = unsafe { ptr::addr_of_mut!((*server).request) };
        // SAFETY: as just said; the slot is empty (checked by `server`), and `out` was checked
        // above.
        unsafe { lend(request_ptr, request, out) }?;
        Ok(ferry_status::FERRY_OK)
    })
}

/// Answers a request received earlier and released unanswered (`ferry_request_release`, or an
/// answer that failed), named by its client's id and its id (`ferry_request_client`,
/// `ferry_request_id`), with a copy of `len` bytes at `data` (NULL only when `len` is 0).
/// `FERRY_OK` when sent; `FERRY_CLIENT_GONE` (not a failure) when its client has gone: the
/// answer was dropped. `FERRY_INVALID_ARGUMENT` for a request this server did not receive, has
/// answered, or forgot (it remembers the last 65536 released unanswered). On any other failure
/// (`FERRY_TOO_LARGE` above the server's `max_message_size`, `FERRY_TIMEOUT`) nothing was sent
/// and the request may be answered again. Refused while the server holds a request.
///
/// # Safety
/// `server` is a live server; `data` is valid for reads of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ferry_server_respond(
    server: *mut ferry_server,
    client: u64,
    request: u64,
    data: *const c_void,
    len: usize,
) -> ferry_status {
    const FUNCTION: &str = "ferry_server_respond";
    guard_status(FUNCTION, || {
        // SAFETY: the caller passes a live server or NULL (refused), used by this thread alone;
        // no reference to it outlives a call.
        let h = unsafe { handle("server", server) }?;
        // SAFETY: as above.
        let s = unsafe { h.server(FUNCTION) }?;
        // SAFETY: the caller promises `len` readable bytes at `data` (checked against the
        // largest answer first).
        let body = unsafe { bytes(data, len, h.request.max_response) }?;
        // SAFETY: no request is held (checked above), so no other call of this thread touches
        // the table now.
        let unanswered = unsafe { &mut *h.request.unanswered.get() };
        let Some(to) = unanswered.take((client, request)) else {
            return Err(Failure::invalid(format!(
                "client {client:016x} has no request {request} that this server received and \
                 left unanswered (answered already, never received, or forgotten: a server \
                 remembers the last {MAX_UNANSWERED})"
            )));
        };
        answered(s.respond(to, body), unanswered, to)
    })
}

/// The first byte of the request's body, readable until it is answered or released; NULL for a
/// NULL request or one already answered or released. (Never NULL for a held request, even of 0
/// bytes.)
///
/// # Safety
/// `request` is NULL or a request handle whose server is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_request_data(request: *const ferry_request) -> *const u8 {
    // SAFETY: the caller passes a live request handle or NULL (refused).
    unsafe { slot::read("ferry_request_data", request, ptr::null(), |r| r.data) }
}

/// The length of the request's body in bytes; 0 for a NULL request or one already answered or
/// released.
///
/// # Safety
/// `request` is NULL or a request handle whose server is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_request_len(request: *const ferry_request) -> usize {
    // SAFETY: the caller passes a live request handle or NULL (refused).
    unsafe { slot::read("ferry_request_len", request, 0, |r| r.len) }
}

/// The id of the client that asked (64 random bits drawn when the client was made); 0 for a
/// NULL request or one already answered or released.
///
/// # Safety
/// `request` is NULL or a request handle whose server is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_request_client(request: *const ferry_request) -> u64 {
    // SAFETY: the caller passes a live request handle or NULL (refused).
    unsafe { slot::read("ferry_request_client", request, 0, |r| r.client) }
}

/// The request's id within its client: the low 32 bits of the id `ferry_client_send` gave (all
/// that travels); 0 for a NULL request or one already answered or released.
///
/// # Safety
/// `request` is NULL or a request handle whose server is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_request_id(request: *const ferry_request) -> u64 {
    // SAFETY: the caller passes a live request handle or NULL (refused).
    unsafe { slot::read("ferry_request_id", request, 0, |r| r.id) }
}

/// Answers the request with a copy of `len` bytes at `data` (NULL only when `len` is 0; the
/// request's own bytes are allowed: an echo) and ends it, whatever the outcome. `FERRY_OK` when
/// sent; `FERRY_CLIENT_GONE` (not a failure) when its client has gone: the answer was dropped.
/// On a failure (`FERRY_TOO_LARGE` above the server's `max_message_size`, `FERRY_TIMEOUT`:
/// nothing was sent) the request is kept as `ferry_request_release` keeps it, so that
/// `ferry_server_respond` may still answer it (with a smaller answer, say).
///
/// # Safety
/// `request` is NULL or a request handle whose server is live; `data` is valid for reads of
/// `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ferry_request_respond(
    request: *mut ferry_request,
    data: *const c_void,
    len: usize,
) -> ferry_status {
    guard_status("ferry_request_respond", || {
        // SAFETY: the caller passes a live request handle or NULL (refused).
        let (r, held) = unsafe { take(request) }?;
        let to = held.reply_to();
        // SAFETY: the request is out of its slot, so no other call of this thread touches the
        // table now (the request borrows the server, not the table).
        let unanswered = unsafe { &mut *r.unanswered.get() };
        // SAFETY: the caller promises `len` readable bytes at `data` (checked against the
        // largest answer first). They may be the request's own: they stay valid until `held`
        // is dropped, after the copy (`respond_with` writes the answer before it lets the
        // request go).
        let body = match unsafe { bytes(data, len, r.max_response) } {
            Ok(body) => body,
            Err(e) => {
                drop(held);
                unanswered.remember(key(&to), to);
                return Err(e);
            }
        };
        let outcome = held.respond_with(len, |_, answer| answer.copy_from_slice(body));
        answered(outcome, unanswered, to)
    })
}

/// Releases the request unanswered: under shared memory its client may reuse its bytes. The
/// server remembers it (the last 65536 released unanswered), so that `ferry_server_respond`
/// answers it later; its client waits meanwhile (until its call's timeout). Releasing again is
/// refused with `FERRY_INVALID_ARGUMENT`.
///
/// # Safety
/// `request` is NULL or a request handle whose server is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_request_release(request: *mut ferry_request) -> ferry_status {
    guard("ferry_request_release", || {
        // SAFETY: the caller passes a live request handle or NULL (refused).
        let (r, held) = unsafe { take(request) }?;
        let to = held.reply_to();
        drop(held);
        // SAFETY: the request is out of its slot; only this call of the one thread using the
        // server touches the table now.
        unsafe { &mut *r.unanswered.get() }.remember(key(&to), to);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_forgets_the_oldest_beyond_its_limit() {
        let mut t = Unanswered::new(3);
        for id in 0..5u64 {
            t.remember((7, id), id as u32);
        }
        assert_eq!(t.take((7, 0)), None, "forgotten");
        assert_eq!(t.take((7, 1)), None, "forgotten");
        assert_eq!(t.take((7, 3)), Some(3));
        assert_eq!(t.take((7, 3)), None, "answered once");
        assert_eq!(t.take((8, 4)), None, "another client's");
        // Remembered again (an answer that failed): it is the newest now, and the stale entry
        // of its first time does not make it forgotten.
        t.remember((7, 3), 33);
        t.remember((7, 5), 5);
        t.remember((7, 6), 6);
        assert_eq!(t.take((7, 2)), None, "the oldest, forgotten");
        assert_eq!(t.take((7, 3)), Some(33));
        assert_eq!(
            t.take((7, 4)),
            None,
            "forgotten after 3 was remembered again"
        );
        assert_eq!((t.take((7, 5)), t.take((7, 6))), (Some(5), Some(6)));
    }

    #[test]
    fn answered_requests_leave_no_pile_in_the_order() {
        let mut t = Unanswered::new(MAX_UNANSWERED);
        for id in 0..100_000u64 {
            t.remember((1, id), ());
            assert_eq!(t.take((1, id)), Some(()));
            assert!(t.order.len() < 2 + 1024, "{}", t.order.len());
        }
        t.remember((1, 0), ());
        assert_eq!(t.by_key.len(), 1);
    }
}
