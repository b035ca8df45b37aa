//! `ferry.WaitSet`: one thread waiting on many subscribers, servers and clients (ferry's
//! `WaitSet`). Each item's lock is taken (never waited for) for the whole wait; the wait itself
//! releases the GIL, in slices of at most `WAIT_SLICE` between which signals are looked at.

use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::args::{lock, timeout_arg, WAIT_SLICE};
use crate::errors;
use crate::service::{Client, ClientState, Server, ServerState};
use crate::subscriber::{SubState, Subscriber};

/// Waits on any number of subscribers, servers and clients at once and says which are ready.
/// Made with `ferry.WaitSet()`; `wait([sub_a, sub_b, server], timeout)` returns the indices of
/// the items ready (a message, a request, a response waiting), empty when the time ran out.
#[pyclass(frozen, module = "ferry", name = "WaitSet")]
pub struct WaitSet {
    inner: Mutex<ferry::WaitSet>,
}

/// An item's lock, held for the wait.
enum Guard<'a> {
    Sub(MutexGuard<'a, SubState>),
    Server(MutexGuard<'a, ServerState>),
    Client(MutexGuard<'a, ClientState>),
}

#[pymethods]
impl WaitSet {
    #[new]
    fn new() -> WaitSet {
        WaitSet {
            inner: Mutex::new(ferry::WaitSet::new()),
        }
    }

    /// Waits up to `timeout` seconds (None: as long as it takes) until at least one of `items`
    /// (Subscriber, Server, Client; each once) is ready; returns their indices, in order, or an
    /// empty list when the time ran out. A subscriber's lent sample is handed back first (as a
    /// receive does: `BufferInUseError` while views of it exist). Ready items stay ready until
    /// what they hold is taken (`try_recv`, `try_recv_request`, `try_recv_response`). Ctrl-C
    /// interrupts the wait.
    #[pyo3(signature = (items, timeout=None))]
    fn wait(
        &self,
        py: Python<'_>,
        items: Vec<Bound<'_, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<Vec<usize>> {
        let deadline = timeout_arg(timeout)?.and_then(|t| std::time::Instant::now().checked_add(t));
        let mut guards = Vec::with_capacity(items.len());
        for item in &items {
            guards.push(if let Ok(s) = item.cast::<Subscriber>() {
                Guard::Sub(lock(&s.get().state, "subscriber")?)
            } else if let Ok(s) = item.cast::<Server>() {
                Guard::Server(lock(&s.get().state, "server")?)
            } else if let Ok(c) = item.cast::<Client>() {
                Guard::Client(lock(&c.get().state, "client")?)
            } else {
                return Err(PyTypeError::new_err(format!(
                    "a WaitSet waits on Subscriber, Server and Client objects, not {}",
                    item.get_type().name()?
                )));
            });
        }
        // A Python client may hold outcomes a call took aside: those are ready now.
        let kept: Vec<usize> = (guards.iter().enumerate())
            .filter(|(_, g)| matches!(g, Guard::Client(c) if !c.kept.is_empty()))
            .map(|(i, _)| i)
            .collect();
        if !kept.is_empty() {
            return Ok(kept);
        }
        let mut targets = Vec::with_capacity(guards.len());
        for g in guards.iter_mut() {
            targets.push(match g {
                Guard::Sub(st) => Target::Sub(st.subscriber(py, "wait in a wait set")?),
                Guard::Server(st) => Target::Server(st.server()?),
                Guard::Client(st) => Target::Client(st.client()?),
            });
        }
        let mut set = lock(&self.inner, "wait set")?;
        loop {
            let slice = match deadline {
                Some(d) => d
                    .saturating_duration_since(std::time::Instant::now())
                    .min(WAIT_SLICE),
                None => WAIT_SLICE,
            };
            let set = &mut *set;
            let targets = &mut targets;
            let ready = py
                .detach(move || {
                    let mut items: Vec<&mut dyn ferry::Waitable> =
                        targets.iter_mut().map(Target::waitable).collect();
                    set.wait(&mut items, Some(slice)).map(<[usize]>::to_vec)
                })
                .map_err(errors::ferry)?;
            if !ready.is_empty() || slice.is_zero() {
                return Ok(ready);
            }
            if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                return Ok(ready);
            }
            py.check_signals()?;
        }
    }
}

/// An item, as ferry's wait set takes it.
enum Target<'a> {
    Sub(&'a mut ferry::Subscriber),
    Server(&'a mut ferry::Server),
    Client(&'a mut ferry::Client),
}

impl Target<'_> {
    fn waitable(&mut self) -> &mut dyn ferry::Waitable {
        match self {
            Target::Sub(s) => *s,
            Target::Server(s) => *s,
            Target::Client(c) => *c,
        }
    }
}
