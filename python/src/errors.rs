//! ferry's Python exceptions, and ferry's Rust errors turned into them (with their messages).
//!
//! `FerryError` is the base of them all. The others also derive from the built-in exception a
//! Python programmer would catch for the same trouble: `ferry.TimeoutError` is a
//! `TimeoutError`, `ferry.BufferInUseError` a `BufferError`, `ferry.ReleasedError` a
//! `ValueError` (as a released memoryview raises). A service's: `ferry.NoServerError` and
//! `ferry.ServerGoneError` are `ConnectionError`s, `ferry.TooLargeError` a `ValueError`.

use pyo3::exceptions::{
    PyBufferError, PyConnectionError, PyException, PyTimeoutError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

pyo3::create_exception!(
    ferry,
    FerryError,
    PyException,
    "An error of ferry; the message says what went wrong and what to do."
);

/// A subclass of `FerryError` and a built-in exception, made on first use.
struct Subclass {
    class: PyOnceLock<Py<PyType>>,
    name: &'static str,
    builtin: fn(Python<'_>) -> Bound<'_, PyType>,
    doc: &'static str,
}

impl Subclass {
    const fn new(
        name: &'static str,
        builtin: fn(Python<'_>) -> Bound<'_, PyType>,
        doc: &'static str,
    ) -> Subclass {
        Subclass {
            class: PyOnceLock::new(),
            name,
            builtin,
            doc,
        }
    }

    /// `class NAME(FerryError, builtin)` in module `ferry`.
    fn get(&self, py: Python<'_>) -> &Py<PyType> {
        self.class.get_or_init(py, || {
            self.make(py).expect("an exception class can be made")
        })
    }

    fn make(&self, py: Python<'_>) -> PyResult<Py<PyType>> {
        let bases = PyTuple::new(py, [py.get_type::<FerryError>(), (self.builtin)(py)])?;
        let dict = PyDict::new(py);
        dict.set_item("__module__", "ferry")?;
        dict.set_item("__doc__", self.doc)?;
        let ty = py.get_type::<PyType>().call1((self.name, bases, dict))?;
        Ok(ty.cast_into::<PyType>()?.unbind())
    }
}

static TIMEOUT: Subclass = Subclass::new(
    "TimeoutError",
    |py| py.get_type::<PyTimeoutError>(),
    "Nothing arrived, or no room was made, within the time given.",
);
static IN_USE: Subclass = Subclass::new(
    "BufferInUseError",
    |py| py.get_type::<PyBufferError>(),
    "A sample or loan cannot be handed back while memoryviews or arrays of it exist.",
);
static RELEASED: Subclass = Subclass::new(
    "ReleasedError",
    |py| py.get_type::<PyValueError>(),
    "The memory of a released sample, or of a sent or discarded loan, was used.",
);
static NO_SERVER: Subclass = Subclass::new(
    "NoServerError",
    |py| py.get_type::<PyConnectionError>(),
    "A service has no server to take a request.",
);
static SERVER_GONE: Subclass = Subclass::new(
    "ServerGoneError",
    |py| py.get_type::<PyConnectionError>(),
    "A service's server went away before it answered a request (its `request` attribute says \
     which).",
);
static TOO_LARGE: Subclass = Subclass::new(
    "TooLargeError",
    |py| py.get_type::<PyValueError>(),
    "A request or response is larger than its end takes (Qos.max_message_size).",
);

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("FerryError", py.get_type::<FerryError>())?;
    for class in [
        &TIMEOUT,
        &IN_USE,
        &RELEASED,
        &NO_SERVER,
        &SERVER_GONE,
        &TOO_LARGE,
    ] {
        m.add(class.name, class.get(py).bind(py))?;
    }
    Ok(())
}

pub fn timeout(py: Python<'_>, msg: String) -> PyErr {
    PyErr::from_type(TIMEOUT.get(py).bind(py).clone(), msg)
}

/// A `what` (sample, loan) cannot be handed back while `views` views of it exist.
pub fn in_use(py: Python<'_>, what: &str, views: usize, doing: &str) -> PyErr {
    let still = if views == 1 {
        format!("a view of the {what} (a memoryview or numpy array) still exists")
    } else {
        format!("{views} views of the {what} (memoryviews or numpy arrays) still exist")
    };
    let advice = match what {
        "loan" => {
            "writes through a view after sending would change a message subscribers are \
             reading: let the view go first (`del arr`, `view.release()`), or write through a \
             temporary (`loan.array(dtype)[:] = data`)"
        }
        _ => {
            "a subscriber holds at most Qos(max_held=...) samples with views at once (2 by \
             default), and the views read them in place: let a view go first (`del arr`, \
             `view.release()`), keep a copy (`arr.copy()`, `bytes(sample)`), or hold more \
             with a larger max_held"
        }
    };
    PyErr::from_type(
        IN_USE.get(py).bind(py).clone(),
        format!("cannot {doing}: {still}; {advice}"),
    )
}

/// The memory of a handed-back `what` was used.
pub fn released(py: Python<'_>, what: &str) -> PyErr {
    let why = if what == "loan" {
        "this loan was sent or discarded (a publisher lends one loan at a time: a later send or \
         loan discards a pending one)"
    } else {
        "this sample was released (a subscriber lends one sample at a time: the next recv \
         releases the previous one), and its bytes belong to the ring again"
    };
    PyErr::from_type(
        RELEASED.get(py).bind(py).clone(),
        format!("{why}; copy what you keep while you hold it"),
    )
}

/// An endpoint used after `close()`.
pub fn closed(what: &str) -> PyErr {
    FerryError::new_err(format!("this {what} is closed"))
}

/// Two threads at once on one endpoint.
pub fn busy(what: &str) -> PyErr {
    FerryError::new_err(format!(
        "this {what} is in use by another thread (a {what} serves one thread at a time; \
         give each thread its own)"
    ))
}

/// Ferry's message in Python's words: `Qos::send_timeout` is `Qos(send_timeout=...)`,
/// `Delivery::Latest` is `Qos(delivery="latest")`, `Node::server` is `Node.server`.
pub fn pythonic(msg: &str) -> String {
    ferry::rename_api_items(msg, |ty, name| {
        let lower = name.to_ascii_lowercase();
        Some(match ty {
            "Qos" => format!("Qos({name}=...)"),
            "Delivery" => format!("Qos(delivery=\"{lower}\")"),
            "Transport" => format!("Qos(transport=\"{lower}\")"),
            "WaitStrategy" => format!("Qos(wait=\"{lower}\")"),
            _ if ty.starts_with(|c: char| c.is_ascii_uppercase()) => format!("{ty}.{name}"),
            _ => return None,
        })
    })
}

pub fn ferry(e: ferry::Error) -> PyErr {
    FerryError::new_err(pythonic(&e.to_string()))
}

pub fn send(py: Python<'_>, e: ferry::SendError) -> PyErr {
    match e {
        ferry::SendError::Timeout(_) => timeout(py, pythonic(&e.to_string())),
        e => FerryError::new_err(pythonic(&e.to_string())),
    }
}

pub fn recv(e: ferry::RecvError) -> PyErr {
    FerryError::new_err(pythonic(&e.to_string()))
}

/// An exception of class `ty` with message `msg` and the given attributes (a service's request
/// id, the sizes of a message too large).
fn with_attrs(py: Python<'_>, ty: &Py<PyType>, msg: String, attrs: &[(&str, Py<PyAny>)]) -> PyErr {
    let err = PyErr::from_type(ty.bind(py).clone(), msg);
    let value = err.value(py);
    for (name, v) in attrs {
        if let Err(e) = value.setattr(*name, v) {
            return e;
        }
    }
    err
}

fn int(py: Python<'_>, v: u64) -> Py<PyAny> {
    match v.into_pyobject(py) {
        Ok(o) => o.into_any().unbind(),
        Err(never) => match never {},
    }
}

/// A service's client error. Those of one request (`ServerGoneError`, `TimeoutError`,
/// `TooLargeError` from the server) carry its id as `request`; a `TooLargeError` carries `len`
/// and `max`; all carry `service`.
pub fn call(py: Python<'_>, service: &str, e: ferry::CallError) -> PyErr {
    use ferry::CallError as E;
    let msg = pythonic(&e.to_string());
    let service = || -> (&str, Py<PyAny>) {
        let s = pyo3::types::PyString::new(py, service);
        ("service", s.into_any().unbind())
    };
    match e {
        E::NoServer { .. } => {
            // Said as Python says it.
            let msg = msg.replace(
                "(Client.wait_for_server)",
                "(Client.wait_for_server(timeout))",
            );
            with_attrs(py, NO_SERVER.get(py), msg, &[service()])
        }
        E::ServerGone { request, .. } => with_attrs(
            py,
            SERVER_GONE.get(py),
            msg,
            &[service(), ("request", int(py, request.get()))],
        ),
        E::Timeout { request, .. } => with_attrs(
            py,
            TIMEOUT.get(py),
            msg,
            &[service(), ("request", int(py, request.get()))],
        ),
        E::TooLarge {
            request, len, max, ..
        } => with_attrs(
            py,
            TOO_LARGE.get(py),
            msg,
            &[
                service(),
                ("request", int(py, request.get())),
                ("len", int(py, len as u64)),
                ("max", int(py, max as u64)),
            ],
        ),
        E::Send(ferry::SendError::TooLarge { len, max }) => with_attrs(
            py,
            TOO_LARGE.get(py),
            format!(
                "a request of {len} bytes exceeds this client's maximum of {max} bytes (raise \
                 Qos(max_message_size=...) of the client)"
            ),
            &[
                service(),
                ("request", py.None()),
                ("len", int(py, len as u64)),
                ("max", int(py, max as u64)),
            ],
        ),
        E::Send(e) => send(py, e),
        E::Recv(e) => recv(e),
        e => FerryError::new_err(pythonic(&e.to_string())),
    }
}

/// A service's server error while it answers.
pub fn serve(py: Python<'_>, e: ferry::service::ServeError) -> PyErr {
    match e {
        ferry::service::ServeError::Send(ferry::SendError::TooLarge { len, max }) => {
            let msg = format!(
                "a response of {len} bytes exceeds this server's maximum of {max} bytes (raise \
                 Qos(max_message_size=...) of the server)"
            );
            with_attrs(
                py,
                TOO_LARGE.get(py),
                msg,
                &[("len", int(py, len as u64)), ("max", int(py, max as u64))],
            )
        }
        ferry::service::ServeError::Send(e) => send(py, e),
        e => FerryError::new_err(pythonic(&e.to_string())),
    }
}
