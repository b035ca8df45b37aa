//! What the classes share in taking arguments from Python and waiting for it: seconds as
//! durations, a timeout argument, the slice a wait runs between looks at signals, a lock never
//! waited for while attached to Python, and numpy's `frombuffer`.

use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors;

/// The longest a wait runs without looking at signals (Ctrl-C) again.
pub const WAIT_SLICE: Duration = Duration::from_millis(50);

/// Seconds (a float) as a Duration, refusing what is negative or not a number.
pub fn seconds(what: &str, s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s).map_err(|_| {
        PyValueError::new_err(format!("{what} must be a number of seconds >= 0, not {s}"))
    })
}

/// `seconds` of a number that may be None (None stays None).
pub fn optional_seconds(what: &str, s: Option<f64>) -> PyResult<Option<Duration>> {
    s.map(|s| seconds(what, s)).transpose()
}

pub fn timeout_arg(timeout: Option<f64>) -> PyResult<Option<Duration>> {
    optional_seconds("timeout", timeout)
}

pub fn lock<'a, T>(m: &'a Mutex<T>, what: &str) -> PyResult<MutexGuard<'a, T>> {
    // Never block on the lock while attached to Python: its holder may be waiting for the GIL.
    match m.try_lock() {
        Ok(g) => Ok(g),
        Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
        Err(TryLockError::WouldBlock) => Err(errors::busy(what)),
    }
}

/// numpy, imported when first used (arrays are the only thing that needs it). numpy before
/// 1.23 let go of the buffer view as soon as the array was made, so the count of views that
/// keeps lent memory from being handed back (`lend.rs`) could not see its arrays: it is
/// refused.
fn numpy(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyModule>> {
    let np = py.import("numpy").map_err(|e| {
        pyo3::exceptions::PyImportError::new_err(format!(
            "arrays need numpy (pip install numpy): {e}"
        ))
    })?;
    let version: String = np.getattr("__version__")?.extract()?;
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if (major, minor) < (1, 23) {
        return Err(pyo3::exceptions::PyImportError::new_err(format!(
            "arrays over lent memory need numpy 1.23 or later (this is {version}): older \
             versions do not keep the buffer view their arrays read through"
        )));
    }
    Ok(np)
}

/// `numpy.dtype(dtype)`: a dtype numpy does not know is refused here, before anything is taken.
pub fn resolve_dtype<'py>(dtype: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    numpy(dtype.py())?.getattr("dtype")?.call1((dtype,))
}

/// `numpy.frombuffer(obj, dtype)` (uint8 without a dtype).
pub fn frombuffer<'py>(
    obj: &Bound<'py, PyAny>,
    dtype: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let np = numpy(obj.py())?;
    match dtype {
        Some(d) => np.call_method1("frombuffer", (obj, d)),
        None => np.call_method1("frombuffer", (obj, np.getattr("uint8")?)),
    }
}
