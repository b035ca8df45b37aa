//! `ferry.Publisher` and the `ferry.Loan` it lends: room in the ring to write a message in place.
//!
//! As with samples (see subscriber.rs), ferry's `Loan<'a>` borrows its publisher mutably: the
//! publisher lives behind a pointer of its own and the pending loan beside it; every call on the
//! publisher first discards a pending loan, which [`Lend`] refuses while views of it exist.

use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

use crate::args::lock;
use crate::closable::{closable_pymethods, free_detached};
use crate::errors;
use crate::lend::{unless_busy, with_bytes, Lend, Region};

/// Writes messages to a topic. Made by `Node.publisher`.
#[pyclass(frozen, module = "ferry", name = "Publisher")]
pub struct Publisher {
    state: Mutex<PubState>,
    topic: String,
    max_message_size: usize,
    /// Sending never waits (shared memory: a commit): no need to let go of the GIL for it.
    send_never_waits: bool,
    /// The codec of the type this publisher declares, for `send_message`.
    codec: Option<ferry_types::Codec>,
}

struct PubState {
    /// The loan lent to Python. Dropped before `publisher`, which it borrows.
    current: Option<CurrentLoan>,
    /// The publisher (a leaked Box, freed in Drop); None once closed.
    publisher: Option<NonNull<ferry::Publisher>>,
}

struct CurrentLoan {
    loan: ferry::Loan<'static>,
    lend: Arc<Lend>,
}

// SAFETY: PubState owns the publisher behind `publisher` (ferry::Publisher is Send) and the loan
// that borrows it; both move together, and a Mutex gives one thread at a time access.
unsafe impl Send for PubState {}

impl PubState {
    /// Discards the pending loan, unless views of it exist.
    fn discard(&mut self, py: Python<'_>, doing: &str) -> PyResult<()> {
        if let Some(c) = &self.current {
            if let Err(views) = c.lend.hand_back() {
                return Err(errors::in_use(py, "loan", views, doing));
            }
        }
        self.current = None;
        Ok(())
    }

    /// The publisher, once no loan borrows it (lifetime unbounded, as `SubState::subscriber`).
    fn publisher(
        &mut self,
        py: Python<'_>,
        doing: &str,
    ) -> PyResult<&'static mut ferry::Publisher> {
        self.discard(py, doing)?;
        let ptr = self.publisher.ok_or_else(|| errors::closed("publisher"))?;
        // SAFETY: the box lives until `close` or Drop, both of which need this state exclusively
        // and drop `current` first; no loan borrows it now (discarded above).
        Ok(unsafe { &mut *ptr.as_ptr() })
    }
}

impl Drop for PubState {
    fn drop(&mut self) {
        self.current = None;
        if let Some(ptr) = self.publisher.take() {
            // SAFETY: `publisher` came from Box::leak and is freed once (taken here); the loan
            // that borrowed it was dropped above.
            Python::attach(|py| unsafe { free_detached(py, ptr) });
        }
    }
}

/// A loan of `len` bytes: at once if the ring has room, else waiting with the GIL released.
fn loan(
    py: Python<'_>,
    p: &'static mut ferry::Publisher,
    len: usize,
) -> PyResult<ferry::Loan<'static>> {
    let p: *mut ferry::Publisher = p;
    // SAFETY: `p` is the caller's exclusive reference; the first use ends (None) before the
    // second starts.
    let first: &'static mut ferry::Publisher = unsafe { &mut *p };
    if let Some(loan) = first.try_loan(len).map_err(|e| errors::send(py, e))? {
        return Ok(loan);
    }
    // SAFETY: as above.
    let again: &'static mut ferry::Publisher = unsafe { &mut *p };
    // The wait for room looks at Python's signals every 50 ms (the GIL taken for the look
    // alone): Ctrl-C ends it with KeyboardInterrupt, as it ends a receive.
    let caught: Mutex<Option<PyErr>> = Mutex::new(None);
    let got = py.detach(|| {
        let mut keep_waiting = || {
            Python::attach(|py| match py.check_signals() {
                Ok(()) => true,
                Err(e) => {
                    *caught.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    false
                }
            })
        };
        again.loan_while(len, &mut keep_waiting)
    });
    match got {
        Ok(Some(loan)) => Ok(loan),
        Ok(None) => Err(caught
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or_else(|| errors::FerryError::new_err("the wait for room was interrupted"))),
        Err(e @ ferry::SendError::Timeout(_)) => {
            // SAFETY: as above: the wait's use of `p` ended, and no loan of it lives.
            let publisher: &ferry::Publisher = unsafe { &*p };
            let held = publisher.holding_back(len);
            let why = errors::pythonic(&e.to_string());
            Err(errors::timeout(
                py,
                if held.is_empty() {
                    why
                } else {
                    format!("{why}; held back by {}", held.join("; "))
                },
            ))
        }
        Err(e) => Err(errors::send(py, e)),
    }
}

impl Publisher {
    pub fn new(inner: ferry::Publisher, qos: &ferry::Qos) -> Publisher {
        let topic = inner.topic().to_owned();
        let max_message_size = inner.max_message_size();
        Publisher {
            state: Mutex::new(PubState {
                current: None,
                publisher: Some(NonNull::from(Box::leak(Box::new(inner)))),
            }),
            topic,
            max_message_size,
            send_never_waits: qos.transport == ferry::Transport::Shm,
            // `TopicType` checked its schema when it was made: a codec is at hand for any type
            // but a raw one.
            codec: qos
                .topic_type
                .as_ref()
                .and_then(|t| ferry_types::Codec::new(t).ok()),
        }
    }

    /// Copies `data` (any C-contiguous buffer) into a loan and sends it: one copy, made with the
    /// GIL held; waits for room (reliable delivery) and sends with it released.
    fn send_buffer(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        with_bytes(data, |bytes| {
            let mut st = lock(&self.state, "publisher")?;
            let p = st.publisher(py, "send")?;
            let mut loan = loan(py, p, bytes.len())?;
            loan.as_mut_slice().copy_from_slice(bytes);
            self.send_loan(py, loan)
        })
    }

    fn send_loan(&self, py: Python<'_>, loan: ferry::Loan<'static>) -> PyResult<()> {
        if self.send_never_waits {
            loan.send()
        } else {
            py.detach(move || loan.send())
        }
        .map_err(|e| errors::send(py, e))
    }
}

closable_pymethods! {
    impl Publisher, closed_by: close;

    #[getter]
    fn topic(&self) -> &str {
        &self.topic
    }

    /// The largest message this publisher sends (Qos.max_message_size, as the transport allows).
    #[getter]
    fn max_message_size(&self) -> usize {
        self.max_message_size
    }

    /// Sends a copy of `data`: bytes, bytearray, memoryview or any C-contiguous buffer.
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        self.send_buffer(py, data)
    }

    /// Encodes `message` (a dict of the type's fields, as `json.dumps` takes it; a field left
    /// out is zero or empty) by the type this publisher declares (`Qos(topic_type=...)`) and
    /// sends it. Raises ValueError when it does not fit the type, naming the field.
    fn send_message(&self, py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<()> {
        let codec = self.codec.as_ref().ok_or_else(|| {
            crate::errors::FerryError::new_err(format!(
                "the publisher of {} declares no type ferry encodes: give \
                 Qos(topic_type=ferry.TopicType(...)) a cdr, protobuf or json type",
                self.topic
            ))
        })?;
        let value = crate::typed::from_python(message)?;
        let bytes = codec
            .encode(&value)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        self.send_buffer(py, pyo3::types::PyBytes::new(py, &bytes).as_any())
    }

    /// Sends a C-contiguous numpy array (any numeric dtype) as its raw bytes: one copy, into the
    /// ring. The receiver views it with `recv_array(dtype)`; shape and dtype are not sent.
    fn send_array(&self, py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<()> {
        self.send_buffer(py, array)
    }

    /// Lends room for an `n`-byte message in the ring, to be written in place and sent with
    /// `Loan.send()`. Waits for room under reliable delivery (the GIL released). Discards a
    /// pending loan (a publisher lends one at a time).
    fn loan(slf: &Bound<'_, Self>, n: usize) -> PyResult<Loan> {
        let py = slf.py();
        let mut st = lock(&slf.get().state, "publisher")?;
        let p = st.publisher(py, "make a new loan")?;
        let mut loan = loan(py, p, n)?;
        let region = Region::of_mut(loan.as_mut_slice());
        let lend = Arc::new(Lend::default());
        st.current = Some(CurrentLoan {
            loan,
            lend: lend.clone(),
        });
        Ok(Loan {
            publisher: slf.clone().unbind(),
            lend,
            region,
        })
    }

    /// Subscribers attached (shared memory) or known (UDP) now. Discards a pending loan.
    #[getter]
    fn subscriber_count(&self, py: Python<'_>) -> PyResult<usize> {
        let mut st = lock(&self.state, "publisher")?;
        Ok(st.publisher(py, "count subscribers")?.subscriber_count())
    }

    /// Messages sent so far. Discards a pending loan.
    #[getter]
    fn sent(&self, py: Python<'_>) -> PyResult<u64> {
        let mut st = lock(&self.state, "publisher")?;
        Ok(st.publisher(py, "count messages sent")?.sent())
    }

    /// Discards a pending loan and leaves the topic (a UDP publisher first waits, up to its send
    /// timeout, for reliable subscribers to take what it sent). Later calls raise.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let mut st = lock(&self.state, "publisher")?;
        st.discard(py, "close the publisher")?;
        if let Some(ptr) = st.publisher.take() {
            // SAFETY: from Box::leak; taken, so freed once; no loan borrows it (discarded).
            unsafe { free_detached(py, ptr) };
        }
        Ok(())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(lock(&self.state, "publisher")?.publisher.is_none())
    }

    fn __repr__(&self) -> String {
        format!("ferry.Publisher(topic={:?})", self.topic)
    }
}

/// Room for one message in the publisher's ring (under UDP, a buffer that becomes the
/// message): a writable buffer (memoryview(loan), np.frombuffer(loan, dtype), loan.array(dtype))
/// written in place, then `send()`. Sending or discarding is refused while views of it exist;
/// its memory used afterwards raises ferry.ReleasedError. A `with` block discards it unless it
/// was sent.
#[pyclass(frozen, module = "ferry", name = "Loan")]
pub struct Loan {
    publisher: Py<Publisher>,
    lend: Arc<Lend>,
    region: Region,
}

impl Loan {
    /// Drops ferry's loan (discarding it) if it is still the publisher's pending one.
    fn drop_in_publisher(&self) {
        unless_busy(&self.publisher.get().state, |st| {
            st.current.take_if(|c| Arc::ptr_eq(&c.lend, &self.lend));
        });
    }
}

closable_pymethods! {
    impl Loan, closed_by: discard, lends: "loan", writable: true, array: " A writable numpy array of `dtype` (uint8 when None) over the loan, no copy. Write through a temporary (`loan.array(np.float32)[:] = x`), or `del` the array before `send`.";

    /// Whether the loan was sent or discarded (its memory can no longer be used).
    #[getter]
    fn released(&self) -> bool {
        self.lend.handed_back()
    }

    /// Publishes the message. Raises ferry.BufferInUseError while views of the loan exist, and
    /// ferry.ReleasedError if it was already sent or discarded.
    fn send(&self, py: Python<'_>) -> PyResult<()> {
        let mut st = lock(&self.publisher.get().state, "publisher")?;
        match self.lend.hand_back() {
            Ok(true) => {}
            Ok(false) => return Err(errors::released(py, "loan")),
            Err(views) => return Err(errors::in_use(py, "loan", views, "send the loan")),
        }
        // A lend not handed back is the publisher's current loan: every path that replaces or
        // drops `current` hands its lend back first.
        let current = st
            .current
            .take()
            .filter(|c| Arc::ptr_eq(&c.lend, &self.lend))
            .ok_or_else(|| errors::released(py, "loan"))?;
        self.publisher.get().send_loan(py, current.loan)
    }

    /// Gives the room back unsent (idempotent). Raises ferry.BufferInUseError while views of it
    /// exist.
    fn discard(&self, py: Python<'_>) -> PyResult<()> {
        self.lend
            .hand_back()
            .map_err(|views| errors::in_use(py, "loan", views, "discard the loan"))?;
        self.drop_in_publisher();
        Ok(())
    }

    fn __repr__(&self) -> String {
        let state = if self.lend.handed_back() {
            ", done"
        } else {
            ""
        };
        format!("ferry.Loan(len={}{state})", self.region.len())
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        // Every view holds a reference to this object, so none is left: this cannot fail. When
        // the lend was handed back before, whoever did it also dropped ferry's value.
        if self.lend.hand_back() == Ok(true) {
            self.drop_in_publisher();
        }
    }
}
