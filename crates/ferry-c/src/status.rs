//! Status codes, the per-thread message of the last failure, and the guard every entry point
//! runs in (no panic crosses into C).

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a call did. `FERRY_OK` is 0; every other value is a failure or a "not now", and
/// `ferry_last_error_message()` says more.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ferry_status {
    /// Done.
    FERRY_OK = 0,
    /// Nothing arrived within the timeout (receive), a reliable subscriber made no room
    /// within the QoS's send timeout (send, loan: nothing was sent), or a service's call got no
    /// response within its timeout.
    FERRY_TIMEOUT = 1,
    /// A receive with timeout 0 found no message waiting.
    FERRY_WOULD_BLOCK = 2,
    /// A NULL pointer, a bad enum value, a string that is not UTF-8, a handle used in a state
    /// that does not allow the call (a loan, sample, request or response already ended, an
    /// endpoint with one outstanding), or a name or QoS ferry refuses.
    FERRY_INVALID_ARGUMENT = 3,
    /// A message larger than the publisher's `max_message_size`; a request larger than its
    /// client's or its server's `max_message_size` (the server refused it), or a response larger
    /// than its server's.
    FERRY_TOO_LARGE = 4,
    /// Anything else ferry reports: the system (shared memory, sockets), a damaged or foreign
    /// segment, a publisher that wrote a malformed record (that publisher is dropped).
    FERRY_ERROR = 5,
    /// A bug in ferry: a Rust panic was caught at the boundary. The handle involved may be
    /// left in any state; free it, unless the call that failed was that handle's own `_free`
    /// (the handle is then gone or half gone: freeing it again is undefined behaviour).
    FERRY_PANIC = 6,
    /// A client's request found no server for its service (none started, or it has gone and
    /// nothing was pending): start one, or let the client wait for one
    /// (`ferry_client_wait_for_server`).
    FERRY_NO_SERVER = 7,
    /// The server of a service went away (its process ended, or it was freed) before it
    /// answered a pending request; `ferry_client_failed_request` names the request.
    FERRY_SERVER_GONE = 8,
    /// A client sees servers of its service on several hosts, and calls none of them.
    FERRY_MANY_SERVERS = 9,
    /// A service already has a server on this host (`ferry_server_new`).
    FERRY_SERVICE_TAKEN = 10,
    /// Not a failure: a response found its client gone (its process ended, or it was freed);
    /// the response was dropped. The last error message is left as it is.
    FERRY_CLIENT_GONE = 11,
}

/// A failed call: its status and what to tell the user.
pub(crate) struct Failure {
    pub status: ferry_status,
    pub message: String,
}

impl Failure {
    pub fn new(status: ferry_status, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(ferry_status::FERRY_INVALID_ARGUMENT, message)
    }
}

impl From<ferry::Error> for Failure {
    fn from(e: ferry::Error) -> Failure {
        let status = match e {
            ferry::Error::InvalidName { .. }
            | ferry::Error::InvalidQos(_)
            | ferry::Error::InvalidConfig(_)
            | ferry::Error::InvalidType(_) => ferry_status::FERRY_INVALID_ARGUMENT,
            ferry::Error::ServiceTaken { .. } => ferry_status::FERRY_SERVICE_TAKEN,
            _ => ferry_status::FERRY_ERROR,
        };
        Failure::new(status, e.to_string())
    }
}

impl From<ferry::SendError> for Failure {
    fn from(e: ferry::SendError) -> Failure {
        let status = match e {
            ferry::SendError::TooLarge { .. } => ferry_status::FERRY_TOO_LARGE,
            ferry::SendError::Timeout(_) => ferry_status::FERRY_TIMEOUT,
            _ => ferry_status::FERRY_ERROR,
        };
        Failure::new(status, e.to_string())
    }
}

impl From<ferry::RecvError> for Failure {
    fn from(e: ferry::RecvError) -> Failure {
        Failure::new(ferry_status::FERRY_ERROR, e.to_string())
    }
}

impl From<ferry::CallError> for Failure {
    fn from(e: ferry::CallError) -> Failure {
        use ferry::CallError;
        let status = match e {
            CallError::NoServer { .. } => ferry_status::FERRY_NO_SERVER,
            CallError::ServerGone { .. } => ferry_status::FERRY_SERVER_GONE,
            CallError::ManyServers { .. } => ferry_status::FERRY_MANY_SERVERS,
            CallError::Timeout { .. } => ferry_status::FERRY_TIMEOUT,
            CallError::TooLarge { .. } => ferry_status::FERRY_TOO_LARGE,
            CallError::Send(e) => return e.into(),
            CallError::Recv(e) => return e.into(),
            _ => ferry_status::FERRY_ERROR,
        };
        Failure::new(status, e.to_string())
    }
}

impl From<ferry::service::ServeError> for Failure {
    fn from(e: ferry::service::ServeError) -> Failure {
        match e {
            ferry::service::ServeError::Send(e) => e.into(),
            e => Failure::new(ferry_status::FERRY_ERROR, e.to_string()),
        }
    }
}

thread_local! {
    /// The message of this thread's last failed call. Touched only on failure, so that the
    /// successful path costs no thread-local access.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Ferry's message in C's words: `Qos::send_timeout` is `ferry_qos.send_timeout_ns`,
/// `Delivery::Latest` is `FERRY_DELIVERY_LATEST`, `Node::server` is `ferry_server_new`.
fn c_words(msg: &str) -> String {
    ferry::rename_api_items(msg, |ty, name| {
        let upper = name.to_ascii_uppercase();
        Some(match (ty, name) {
            ("Qos", "send_timeout" | "spin_window" | "deadline" | "lease") => {
                format!("ferry_qos.{name}_ns")
            }
            ("Qos", "max_rate") => "ferry_qos.max_rate_bps".to_owned(),
            ("Qos", _) => format!("ferry_qos.{name}"),
            ("Delivery", _) => format!("FERRY_DELIVERY_{upper}"),
            ("Transport", _) => format!("FERRY_TRANSPORT_{upper}"),
            ("WaitStrategy", _) => format!("FERRY_WAIT_{upper}"),
            ("Node", "server" | "client") => format!("ferry_{name}_new"),
            ("Client" | "Server" | "Publisher" | "Subscriber", _) => {
                format!("ferry_{}_{name}", ty.to_ascii_lowercase())
            }
            _ => return None,
        })
    })
}

fn set_last_error(function: &str, message: &str) {
    // A message never holds NUL (ferry's own texts); if one did, it is cut there.
    let message = c_words(message);
    let text = format!("{function}: {message}");
    let text = text.split('\0').next().unwrap_or_default().to_owned();
    let c = CString::new(text).unwrap_or_default();
    // `try_with`: a call made while the thread is torn down (from an `atexit` handler, a
    // thread-local destructor) finds this thread's message gone; it still returns its status,
    // and never panics on the way out to C.
    let _ = LAST_ERROR.try_with(|last| *last.borrow_mut() = c);
}

/// Records a failure for `ferry_last_error_message` and returns its status.
pub(crate) fn fail(function: &str, failure: Failure) -> ferry_status {
    set_last_error(function, &failure.message);
    failure.status
}

/// Runs the body of entry point `function`: its result becomes the status, a failure's message
/// the thread's last error, and a panic `FERRY_PANIC` (it never unwinds into C).
pub(crate) fn guard(function: &str, body: impl FnOnce() -> Result<(), Failure>) -> ferry_status {
    guard_status(function, || body().map(|()| ferry_status::FERRY_OK))
}

/// As `guard`, for an entry point that succeeds with more than one status (a receive's
/// `FERRY_WOULD_BLOCK` and `FERRY_TIMEOUT`, an answer's `FERRY_CLIENT_GONE`): the body's.
pub(crate) fn guard_status(
    function: &str,
    body: impl FnOnce() -> Result<ferry_status, Failure>,
) -> ferry_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(status)) => status,
        Ok(Err(failure)) => fail(function, failure),
        Err(panic) => fail(function, panicked(panic)),
    }
}

/// The status of a receive that found nothing: `FERRY_WOULD_BLOCK` when it only looked,
/// `FERRY_TIMEOUT` when it waited.
pub(crate) fn nothing_received(only_looked: bool) -> ferry_status {
    if only_looked {
        ferry_status::FERRY_WOULD_BLOCK
    } else {
        ferry_status::FERRY_TIMEOUT
    }
}

/// As `guard`, for the accessors that return a value: `fallback` on failure or panic.
pub(crate) fn guard_value<T>(
    function: &str,
    fallback: T,
    body: impl FnOnce() -> Result<T, Failure>,
) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => value,
        Ok(Err(failure)) => {
            fail(function, failure);
            fallback
        }
        Err(panic) => {
            fail(function, panicked(panic));
            fallback
        }
    }
}

fn panicked(panic: Box<dyn std::any::Any + Send>) -> Failure {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned());
    // A payload's own drop may panic too; that one is caught here as well (and leaked).
    if let Err(again) = catch_unwind(AssertUnwindSafe(|| drop(panic))) {
        std::mem::forget(again);
    }
    Failure::new(
        ferry_status::FERRY_PANIC,
        format!("internal error in ferry (a bug; please report it): {what}"),
    )
}

/// The message of the last failed ferry call on the calling thread, as
/// `"function: what went wrong and what to do"`; an empty string if none has failed yet.
/// Successful calls leave it as it is. The pointer stays valid until the next ferry call on
/// this thread; copy the text to keep it. Never NULL.
#[no_mangle]
pub extern "C" fn ferry_last_error_message() -> *const c_char {
    LAST_ERROR
        .try_with(|last| last.borrow().as_ptr())
        // Only while the thread is being torn down: a static empty string.
        .unwrap_or(c"".as_ptr())
}

/// The name of a status (`"FERRY_TIMEOUT"`), a static string; `"FERRY_UNKNOWN_STATUS"` for a
/// value that is none of `ferry_status`.
#[no_mangle]
pub extern "C" fn ferry_status_name(status: c_int) -> *const c_char {
    let name = match status {
        0 => c"FERRY_OK",
        1 => c"FERRY_TIMEOUT",
        2 => c"FERRY_WOULD_BLOCK",
        3 => c"FERRY_INVALID_ARGUMENT",
        4 => c"FERRY_TOO_LARGE",
        5 => c"FERRY_ERROR",
        6 => c"FERRY_PANIC",
        7 => c"FERRY_NO_SERVER",
        8 => c"FERRY_SERVER_GONE",
        9 => c"FERRY_MANY_SERVERS",
        10 => c"FERRY_SERVICE_TAKEN",
        11 => c"FERRY_CLIENT_GONE",
        _ => c"FERRY_UNKNOWN_STATUS",
    };
    name.as_ptr()
}

#[cfg(test)]
mod tests {
    #[test]
    fn ferrys_rust_names_are_said_as_c_says_them() {
        use super::c_words;
        assert_eq!(
            c_words("(raise Qos::send_timeout, or use Delivery::Latest; Qos::max_message_size)"),
            "(raise ferry_qos.send_timeout_ns, or use FERRY_DELIVERY_LATEST; \
             ferry_qos.max_message_size)"
        );
        assert_eq!(
            c_words("with Node::server and Node::client (Client::wait_for_server)"),
            "with ferry_server_new and ferry_client_new (ferry_client_wait_for_server)"
        );
        assert_eq!(
            c_words("a::b, Qos:: and std::io"),
            "a::b, Qos:: and std::io"
        );
    }

    use super::*;
    use std::ffi::CStr;

    fn last() -> String {
        // SAFETY: never NULL; copied at once.
        unsafe { CStr::from_ptr(ferry_last_error_message()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_becomes_a_status_and_a_message() {
        let status = guard("ferry_test", || panic!("boom"));
        assert_eq!(status, ferry_status::FERRY_PANIC);
        assert_eq!(
            last(),
            "ferry_test: internal error in ferry (a bug; please report it): boom"
        );
        let value = guard_value("ferry_test_value", 7u32, || panic!("{}", "formatted"));
        assert_eq!(value, 7);
        assert!(last().ends_with(": formatted"), "{}", last());
    }

    #[test]
    fn a_message_with_nul_is_cut_there() {
        let status = guard("ferry_test", || Err(Failure::invalid("before\0after")));
        assert_eq!(status, ferry_status::FERRY_INVALID_ARGUMENT);
        assert_eq!(last(), "ferry_test: before");
    }
}
