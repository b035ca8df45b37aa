//! `ferry.Subscriber` and the `ferry.Sample` it lends: the publisher's message in place.
//!
//! ferry's `Sample<'a>` borrows its subscriber mutably: a subscriber lends one sample at a
//! time. Here the subscriber lives behind a pointer of its own (`SubState::sub`) and the sample
//! it lent sits beside it (`SubState::current`); every call on the subscriber first hands the
//! current sample back, which [`Lend`] refuses while a memoryview or array of it exists. Such
//! a sample is then kept (`ferry::Sample::keep`, up to `Qos(max_held=)` samples held, 2 by
//! default), so that `b = np.frombuffer(sub.recv())` in a loop works: the kept ones are given
//! back once their views are gone, at a later call.

use std::ptr::NonNull;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::args::{frombuffer, lock, timeout_arg, WAIT_SLICE};
use crate::closable::{closable_pymethods, free_detached};
use crate::errors;
use crate::lend::{unless_busy, Lend, Region};

/// How long a spinning (or adaptive) shared-memory subscriber polls with the GIL held before it
/// lets go of it to wait: long enough for a prompt reply (letting go and taking the GIL back
/// costs about as much as a message), short against Python's own 5 ms switch interval.
const GIL_SPIN: Duration = Duration::from_micros(10);

/// Reads messages of a topic from every publisher on it. Made by `Node.subscriber`.
#[pyclass(frozen, module = "ferry", name = "Subscriber")]
pub struct Subscriber {
    pub(crate) state: Mutex<SubState>,
    topic: String,
    /// How long `recv` polls with the GIL held before it lets go to wait (see `GIL_SPIN`).
    gil_spin: Duration,
}

pub(crate) struct SubState {
    /// The sample lent to Python. Dropped before `sub`, which it borrows.
    current: Option<Current>,
    /// Samples lent to Python that still had views when the next was received: kept in the
    /// subscriber (`ferry::Sample::keep`) until their views are gone.
    kept: Vec<(ferry::Kept, Arc<Lend>)>,
    /// `Qos(max_held=)`: samples with views held at once, the current one included.
    max_held: usize,
    /// The subscriber armed for an event loop (`_arm`, for `recv_async`): it borrows the
    /// subscriber and `waitset`, so it is dropped (disarmed) before anything else uses them.
    armed: Option<ferry::Armed<'static>>,
    /// The wait set `_arm` arms (a leaked Box, freed in Drop), made on first use.
    waitset: Option<NonNull<ferry::WaitSet>>,
    /// The subscriber as the arming holds it (messages only: events and missed deadlines do not
    /// end an asyncio wait), a leaked Box freed once the arming is dropped.
    messages: Option<NonNull<ferry::Messages<'static>>>,
    /// The subscriber (a leaked Box, freed in Drop); None once closed.
    sub: Option<NonNull<ferry::Subscriber>>,
    /// The codec of the topic's type, once it has one (`recv_message`).
    codec: Option<ferry_types::Codec>,
}

struct Current {
    /// Held for its Drop, which hands the record back to the ring; read through `Region`.
    #[allow(dead_code)]
    sample: ferry::Sample<'static>,
    lend: Arc<Lend>,
}

// SAFETY: SubState owns the subscriber behind `sub` (ferry::Subscriber is Send) and the sample
// that borrows it; both move together, and a Mutex gives one thread at a time access.
unsafe impl Send for SubState {}

impl SubState {
    /// Hands the lent sample back to the ring or, while views of it exist, keeps it (as far as
    /// `max_held` allows; past it, an error); then gives back the kept samples whose views are
    /// gone.
    fn hand_back(&mut self, py: Python<'_>, doing: &str) -> PyResult<()> {
        self.hand_back_keeping(py, doing, true)
    }

    /// As `hand_back`; without `keep`, a sample with views is an error (closing).
    fn hand_back_keeping(&mut self, py: Python<'_>, doing: &str, keep: bool) -> PyResult<()> {
        // An arming borrows the subscriber: it ends before anything else uses it.
        self.disarm();
        // Kept samples whose views are gone are handed back now (no view can be made of them
        // after), and let go below, once no sample borrows the subscriber.
        let live = self
            .kept
            .iter()
            .filter(|(_, lend)| lend.hand_back().is_err())
            .count();
        if let Some(c) = self.current.take() {
            if let Err(views) = c.lend.hand_back() {
                let kept = match keep && live + 1 < self.max_held {
                    true => c.sample.keep(),
                    false => Err(c.sample),
                };
                match kept {
                    Ok(kept) => self.kept.push((kept, c.lend)),
                    Err(sample) => {
                        self.current = Some(Current {
                            sample,
                            lend: c.lend,
                        });
                        return Err(errors::in_use(py, "sample", views, doing));
                    }
                }
            }
        }
        if self.kept.is_empty() {
            return Ok(());
        }
        let Some(ptr) = self.sub else {
            return Ok(());
        };
        // SAFETY: no sample borrows the subscriber now (`current` is None), and the lock this
        // state is behind gives one thread at a time access.
        let sub = unsafe { &mut *ptr.as_ptr() };
        let mut i = 0;
        while i < self.kept.len() {
            if self.kept[i].1.handed_back() {
                let (kept, _) = self.kept.swap_remove(i);
                sub.let_go(kept);
            } else {
                i += 1;
            }
        }
        if !keep {
            if let Some((_, lend)) = self.kept.first() {
                return Err(errors::in_use(py, "sample", lend.views(), doing));
            }
        }
        Ok(())
    }

    /// The subscriber, once no sample borrows it.
    ///
    /// The reference's lifetime is unbounded: the caller uses it only while it holds the lock,
    /// and stores a sample made from it in `current`, which is dropped before the subscriber.
    pub(crate) fn subscriber(
        &mut self,
        py: Python<'_>,
        doing: &str,
    ) -> PyResult<&'static mut ferry::Subscriber> {
        self.hand_back(py, doing)?;
        let ptr = self.sub.ok_or_else(|| errors::closed("subscriber"))?;
        // SAFETY: the box lives until `close` or Drop, both of which need this state exclusively
        // (the lock) and drop `current` first; no sample borrows it now (handed back above), so
        // this is the only reference.
        Ok(unsafe { &mut *ptr.as_ptr() })
    }
}

impl SubState {
    /// Ends the arming for an event loop, if any (closing its descriptor).
    fn disarm(&mut self) {
        self.armed = None;
        if let Some(m) = self.messages.take() {
            // SAFETY: from Box::into_raw in `_arm`, freed once (taken here), after the arming
            // that borrowed it was dropped just above.
            drop(unsafe { Box::from_raw(m.as_ptr()) });
        }
    }
}

impl Drop for SubState {
    fn drop(&mut self) {
        self.disarm();
        if let Some(ptr) = self.waitset.take() {
            // SAFETY: from Box::into_raw, freed once (taken here); the arming that borrowed it
            // was dropped above.
            drop(unsafe { Box::from_raw(ptr.as_ptr()) });
        }
        self.current = None;
        // Every view of a kept sample holds its Sample, which holds the subscriber: none is left
        // when this runs.
        self.kept.clear();
        if let Some(ptr) = self.sub.take() {
            // SAFETY: `sub` came from Box::into_raw and is freed once (taken here).
            drop(unsafe { Box::from_raw(ptr.as_ptr()) });
        }
    }
}

/// Polls (for `gil_spin` at most, with the GIL held), then waits up to `timeout` (forever if
/// None) in slices, waiting with the GIL released and looking at signals between them.
fn wait(
    py: Python<'_>,
    sub: &'static mut ferry::Subscriber,
    timeout: Option<Duration>,
    gil_spin: Duration,
) -> PyResult<Option<ferry::Sample<'static>>> {
    let sub: *mut ferry::Subscriber = sub;
    // SAFETY: `sub` is the caller's exclusive reference; each use of it below ends before the
    // next starts, and only the one that returns a sample keeps its borrow.
    let first: &'static mut ferry::Subscriber = unsafe { &mut *sub };
    if let Some(s) = first.try_recv().map_err(errors::recv)? {
        return Ok(Some(s));
    }
    let start = Instant::now();
    // A timeout past what the clock can count is no deadline.
    let deadline = timeout.and_then(|t| start.checked_add(t));
    let spin = timeout.map_or(gil_spin, |t| t.min(gil_spin));
    while !spin.is_zero() && start.elapsed() < spin {
        std::hint::spin_loop();
        // SAFETY: as above.
        let s: &'static mut ferry::Subscriber = unsafe { &mut *sub };
        if let Some(sample) = s.try_recv().map_err(errors::recv)? {
            return Ok(Some(sample));
        }
    }
    loop {
        let slice = match deadline {
            Some(d) => d.saturating_duration_since(Instant::now()).min(WAIT_SLICE),
            None => WAIT_SLICE,
        };
        if slice.is_zero() {
            return Ok(None);
        }
        // SAFETY: as above.
        let s: &'static mut ferry::Subscriber = unsafe { &mut *sub };
        if let Some(sample) = py
            .detach(move || s.recv_timeout(slice))
            .map_err(errors::recv)?
        {
            return Ok(Some(sample));
        }
        py.check_signals()?;
    }
}

/// The most samples `Qos(max_held=)` lets a Python subscriber hold (half ferry's own limit).
const MAX_HELD: usize = ferry::MAX_HELD / 2;

/// `Qos(max_held=)`, checked.
pub fn checked_max_held(n: usize) -> PyResult<usize> {
    if !(1..=MAX_HELD).contains(&n) {
        return Err(errors::FerryError::new_err(format!(
            "invalid quality of service: max_held {n} must be between 1 and {MAX_HELD}"
        )));
    }
    Ok(n)
}

impl Subscriber {
    pub fn new(inner: ferry::Subscriber, qos: &ferry::Qos) -> Subscriber {
        let topic = inner.topic().to_owned();
        let gil_spin = match (qos.transport, qos.wait) {
            (ferry::Transport::Shm, ferry::WaitStrategy::Spin) => GIL_SPIN,
            (ferry::Transport::Shm, ferry::WaitStrategy::Adaptive) => qos.spin_window.min(GIL_SPIN),
            _ => Duration::ZERO,
        };
        Subscriber {
            state: Mutex::new(SubState {
                current: None,
                kept: Vec::new(),
                max_held: qos.max_held,
                armed: None,
                waitset: None,
                messages: None,
                sub: Some(NonNull::from(Box::leak(Box::new(inner)))),
                codec: None,
            }),
            topic,
            gil_spin,
        }
    }

    /// Receives into a new Sample, or None when `timeout` ran out.
    fn receive(slf: &Bound<'_, Self>, timeout: Option<Duration>) -> PyResult<Option<Sample>> {
        let py = slf.py();
        let this = slf.get();
        let mut st = lock(&this.state, "subscriber")?;
        let sub = st.subscriber(py, "receive the next sample")?;
        let Some(sample) = wait(py, sub, timeout, this.gil_spin)? else {
            return Ok(None);
        };
        let region = Region::of(&sample);
        let (seq, skipped) = (sample.seq(), sample.skipped());
        let lend = Arc::new(Lend::default());
        st.current = Some(Current {
            sample,
            lend: lend.clone(),
        });
        Ok(Some(Sample {
            subscriber: slf.clone().unbind(),
            lend,
            region,
            seq,
            skipped,
        }))
    }

    fn receive_or_timeout(slf: &Bound<'_, Self>, timeout: Option<f64>) -> PyResult<Sample> {
        let t = timeout_arg(timeout)?;
        Subscriber::receive(slf, t)?.ok_or_else(|| slf.get().timed_out(slf.py(), timeout))
    }

    fn timed_out(&self, py: Python<'_>, timeout: Option<f64>) -> PyErr {
        errors::timeout(
            py,
            format!(
                "no message on topic {:?} within {} s",
                self.topic,
                timeout.unwrap_or_default()
            ),
        )
    }
}

closable_pymethods! {
    impl Subscriber, closed_by: close;

    #[getter]
    fn topic(&self) -> &str {
        &self.topic
    }

    /// Waits for the next message (forever if `timeout` is None) and lends it as a Sample;
    /// raises ferry.TimeoutError when `timeout` seconds pass first. Releases the previous sample
    /// (a subscriber lends one at a time). Ctrl-C interrupts the wait.
    #[pyo3(signature = (timeout=None))]
    fn recv(slf: &Bound<'_, Self>, timeout: Option<f64>) -> PyResult<Sample> {
        Subscriber::receive_or_timeout(slf, timeout)
    }

    /// Waits for the next message (forever if `timeout` is None) and returns a copy of it as
    /// bytes; raises ferry.TimeoutError when `timeout` seconds pass first. The quickest way to
    /// read small messages: no Sample is made and the message goes back to the ring at once.
    /// Releases the previous sample. Ctrl-C interrupts the wait.
    #[pyo3(signature = (timeout=None))]
    fn recv_bytes<'py>(
        slf: &Bound<'py, Self>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let py = slf.py();
        let this = slf.get();
        let t = timeout_arg(timeout)?;
        let mut st = lock(&this.state, "subscriber")?;
        let sub = st.subscriber(py, "receive the next message")?;
        match wait(py, sub, t, this.gil_spin)? {
            Some(sample) => Ok(PyBytes::new(py, &sample)),
            None => Err(this.timed_out(py, timeout)),
        }
    }

    /// Waits for the next message (forever if `timeout` is None) and returns it decoded by the
    /// topic's type, as a dict of its fields in their declared order; raises
    /// ferry.TimeoutError when `timeout` seconds pass first, and ferry.FerryError when the
    /// topic has no type ferry decodes or the message does not decode (saying why). The message
    /// goes back to the ring at once. Ctrl-C interrupts the wait.
    #[pyo3(signature = (timeout=None))]
    fn recv_message(slf: &Bound<'_, Self>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let this = slf.get();
        let t = timeout_arg(timeout)?;
        let mut st = lock(&this.state, "subscriber")?;
        if st.codec.is_none() {
            let sub = st.subscriber(py, "receive the next message")?;
            let found = sub.topic_type().map_err(errors::ferry)?;
            st.codec = match found {
                Some(ty) => crate::typed::codec_of(&ty)?,
                None => None,
            };
        }
        // Taken out while the subscriber is borrowed, and put back (a move, not a copy).
        let Some(codec) = st.codec.take() else {
            return Err(errors::FerryError::new_err(format!(
                "topic {} has no type ferry decodes (a publisher declares one with \
                 Qos(topic_type=...)); recv() gives its bytes",
                this.topic
            )));
        };
        let sub = st.subscriber(py, "receive the next message");
        let got = match sub {
            Ok(sub) => wait(py, sub, t, this.gil_spin).map(|sample| {
                sample.map(|sample| {
                    let seq = sample.seq();
                    codec.decode(&sample).map_err(|e| {
                        errors::FerryError::new_err(format!("message {seq}: {e}"))
                    })
                })
            }),
            Err(e) => Err(e),
        };
        st.codec = Some(codec);
        match got? {
            Some(decoded) => crate::typed::to_python(py, &decoded?),
            None => Err(this.timed_out(py, timeout)),
        }
    }

    /// For `recv_async` (an event loop's wait): when no message is waiting, gets the subscriber
    /// ready to sleep and returns `(fd, until)`: a file descriptor that becomes readable when a
    /// message may be there, and the seconds after which to look again whatever happens (None:
    /// only when it is readable). None when a message is waiting now. Any other call on the
    /// subscriber (or `_disarm`) ends the arming, and closes the descriptor.
    fn _arm(slf: &Bound<'_, Self>) -> PyResult<Option<(i32, Option<f64>)>> {
        use std::os::fd::AsRawFd;
        let py = slf.py();
        let mut st = lock(&slf.get().state, "subscriber")?;
        let sub = st.subscriber(py, "wait for the next message")?;
        let ws = match st.waitset {
            Some(ws) => ws,
            None => {
                let ws = NonNull::from(Box::leak(Box::new(ferry::WaitSet::new())));
                st.waitset = Some(ws);
                ws
            }
        };
        // SAFETY: the box lives until Drop, which drops the arming first; `armed` is None now
        // (ended in `subscriber`), so nothing else borrows it.
        let ws: &'static mut ferry::WaitSet = unsafe { &mut *ws.as_ptr() };
        let messages = NonNull::from(Box::leak(Box::new(ferry::Messages(sub))));
        st.messages = Some(messages);
        // SAFETY: the box lives until `disarm`, which drops the arming that borrows it first.
        let armed = ws
            .arm(vec![unsafe { &mut *messages.as_ptr() }])
            .map_err(errors::ferry);
        let armed = match armed {
            Ok(a) => a,
            Err(e) => {
                st.disarm();
                return Err(e);
            }
        };
        let Some(fd) = armed.fd().map(|fd| fd.as_raw_fd()) else {
            drop(armed);
            st.disarm();
            return Ok(None);
        };
        let now = Instant::now();
        let until = armed
            .until()
            .map(|u| u.saturating_duration_since(now).as_secs_f64());
        st.armed = Some(armed);
        Ok(Some((fd, until)))
    }

    /// Ends the arming `_arm` made (closing its descriptor); nothing when there is none.
    fn _disarm(&self) -> PyResult<()> {
        lock(&self.state, "subscriber")?.disarm();
        Ok(())
    }

    /// The topic's type, if an end of this host declared one.
    #[getter]
    fn topic_type(slf: &Bound<'_, Self>) -> PyResult<Option<crate::typed::TopicType>> {
        let py = slf.py();
        let mut st = lock(&slf.get().state, "subscriber")?;
        let sub = st.subscriber(py, "look at the topic's type")?;
        Ok(sub
            .topic_type()
            .map_err(errors::ferry)?
            .map(|inner| crate::typed::TopicType { inner }))
    }

    /// The next message if one is waiting, else None (never waits).
    fn try_recv(slf: &Bound<'_, Self>) -> PyResult<Option<Sample>> {
        Subscriber::receive(slf, Some(Duration::ZERO))
    }

    /// Waits for the next message and views it as a read-only numpy array of `dtype` (no copy;
    /// the array holds the sample until it is gone).
    #[pyo3(signature = (dtype, timeout=None))]
    fn recv_array<'py>(
        slf: &Bound<'py, Self>,
        dtype: &Bound<'py, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // The dtype first: one numpy does not know is refused before a message is taken.
        let dtype = crate::args::resolve_dtype(dtype)?;
        let itemsize: usize = dtype.getattr("itemsize")?.extract()?;
        let sample = Bound::new(slf.py(), Subscriber::receive_or_timeout(slf, timeout)?)?;
        let len = sample.as_any().len()?;
        if itemsize > 0 && len % itemsize != 0 {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "the message received ({len} bytes) is not a whole number of {itemsize}-byte \
                 {dtype} elements; it was taken (the next receive gets the next message)"
            )));
        }
        frombuffer(sample.as_any(), Some(&dtype))
    }

    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__(slf: &Bound<'_, Self>) -> PyResult<Sample> {
        Subscriber::receive_or_timeout(slf, None)
    }

    /// Publishers sending on this topic now (releases a sample lent before).
    #[getter]
    fn publisher_count(&self, py: Python<'_>) -> PyResult<usize> {
        let mut st = lock(&self.state, "subscriber")?;
        Ok(st.subscriber(py, "count publishers")?.publisher_count())
    }

    /// The next thing this subscriber learned of its publishers, or None: a tuple
    /// `("appeared", publisher)`, `("gone", publisher, why)` (why: "closed", "died", "silent",
    /// "evicted") or `("deadline-missed", count)`; `publisher` is its id as text
    /// (`shm:…`/`udp:…`). Events are found while the subscriber
    /// receives; 256 wait at most (older ones are dropped and counted, `events_dropped`).
    fn try_event<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let mut st = lock(&self.state, "subscriber")?;
        let event = st.subscriber(py, "take an event")?.try_event();
        let Some(event) = event else {
            return Ok(None);
        };
        let tuple = match event {
            ferry::Event::Appeared(id) => ("appeared", id.to_string()).into_pyobject(py)?,
            ferry::Event::Gone(id, why) => {
                ("gone", id.to_string(), why.as_str()).into_pyobject(py)?
            }
            ferry::Event::DeadlineMissed(n) => ("deadline-missed", n).into_pyobject(py)?,
            _ => return Ok(None),
        };
        Ok(Some(tuple))
    }

    /// Publisher events dropped because nobody took them.
    #[getter]
    fn events_dropped(&self, py: Python<'_>) -> PyResult<u64> {
        let mut st = lock(&self.state, "subscriber")?;
        Ok(st.subscriber(py, "count dropped events")?.events_dropped())
    }

    /// With a deadline: the periods that passed without a message so far.
    #[getter]
    fn deadline_missed(&self, py: Python<'_>) -> PyResult<u64> {
        let mut st = lock(&self.state, "subscriber")?;
        Ok(st
            .subscriber(py, "count missed deadlines")?
            .deadline_missed())
    }

    /// Warnings a user should see (e.g. a UDP receive buffer capped by the kernel).
    #[getter]
    fn warnings(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mut st = lock(&self.state, "subscriber")?;
        Ok(st.subscriber(py, "read warnings")?.warnings())
    }

    /// Publishers whose segments this subscriber refused to read, with the reason for each.
    #[getter]
    fn refused_publishers(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mut st = lock(&self.state, "subscriber")?;
        Ok(st
            .subscriber(py, "list refused publishers")?
            .refused_publishers())
    }

    /// Releases the lent sample and leaves the topic. Later calls raise ferry.FerryError.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let mut st = lock(&self.state, "subscriber")?;
        st.hand_back_keeping(py, "close the subscriber", false)?;
        if let Some(ptr) = st.sub.take() {
            // SAFETY: from Box::leak; taken, so freed once; no sample borrows it (handed back).
            unsafe { free_detached(py, ptr) };
        }
        Ok(())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(lock(&self.state, "subscriber")?.sub.is_none())
    }

    fn __repr__(&self) -> String {
        format!("ferry.Subscriber(topic={:?})", self.topic)
    }
}

/// A received message, lent in place (zero copy): a read-only buffer (memoryview(s),
/// np.frombuffer(s, dtype), bytes(s)) until it is released — by `release()`, the end of a
/// `with` block, the subscriber's next call, or when it is gone. Release is refused while views
/// of it exist; its memory used after release raises ferry.ReleasedError.
#[pyclass(frozen, module = "ferry", name = "Sample")]
pub struct Sample {
    subscriber: Py<Subscriber>,
    lend: Arc<Lend>,
    region: Region,
    seq: u64,
    skipped: u64,
}

impl Sample {
    /// Drops ferry's sample if it is still the subscriber's current one (after the lend was
    /// handed back). When the subscriber is busy on another thread, that thread's call already
    /// dropped it.
    fn drop_in_subscriber(&self) {
        unless_busy(&self.subscriber.get().state, |st| {
            st.current.take_if(|c| Arc::ptr_eq(&c.lend, &self.lend));
        });
    }
}

closable_pymethods! {
    impl Sample, closed_by: release, lends: "sample", writable: false, array: " A numpy array of `dtype` (uint8 when None) viewing the sample, read-only, no copy.";

    /// The publisher's sequence number of this message (from 0 per publisher).
    #[getter]
    fn seq(&self) -> u64 {
        self.seq
    }

    /// Messages missed just before this one (latest delivery, UDP losses).
    #[getter]
    fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Whether the sample went back to the ring (its memory can no longer be used).
    #[getter]
    fn released(&self) -> bool {
        self.lend.handed_back()
    }

    /// Hands the sample back to the ring (idempotent). Raises ferry.BufferInUseError while
    /// memoryviews or arrays of it exist.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        self.lend
            .hand_back()
            .map_err(|views| errors::in_use(py, "sample", views, "release the sample"))?;
        self.drop_in_subscriber();
        Ok(())
    }

    fn __repr__(&self) -> String {
        let state = if self.lend.handed_back() {
            ", released"
        } else {
            ""
        };
        format!(
            "ferry.Sample(seq={}, len={}{state})",
            self.seq,
            self.region.len()
        )
    }
}

impl Drop for Sample {
    fn drop(&mut self) {
        // Every view holds a reference to this object, so none is left: this cannot fail. When
        // the lend was handed back before, whoever did it also dropped ferry's value.
        if self.lend.hand_back() == Ok(true) {
            self.drop_in_subscriber();
        }
    }
}
