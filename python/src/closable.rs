//! The `#[pymethods]` of a class that Python code closes: a publisher, a subscriber, a client
//! and a server (`close`), a loan (`discard`) and a sample (`release`). Each is a context manager
//! whose exit closes it; a loan and a sample also give `array(dtype)`, a numpy array over their
//! region.

/// Declares a class's `#[pymethods]`: its own methods, then `__enter__` and an `__exit__` that
/// calls `closed_by` and lets an exception through; with `array: DOC`, also `array(dtype)` over
/// the class's buffer (documented by DOC).
macro_rules! closable_pymethods {
    (impl $ty:ident, closed_by: $done:ident, array: $array_doc:literal; $($methods:tt)*) => {
        $crate::closable::closable_pymethods! {
            impl $ty, closed_by: $done;
            $($methods)*

            #[doc = $array_doc]
            #[pyo3(signature = (dtype=None))]
            fn array<'py>(
                slf: &Bound<'py, Self>,
                dtype: Option<&Bound<'py, PyAny>>,
            ) -> PyResult<Bound<'py, PyAny>> {
                $crate::args::frombuffer(slf.as_any(), dtype)
            }
        }
    };
    (impl $ty:ident, closed_by: $done:ident; $($methods:tt)*) => {
        #[pymethods]
        impl $ty {
            $($methods)*

            fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
                slf
            }

            #[pyo3(signature = (_exc_type=None, _exc=None, _traceback=None))]
            fn __exit__(
                &self,
                py: Python<'_>,
                _exc_type: Option<&Bound<'_, PyAny>>,
                _exc: Option<&Bound<'_, PyAny>>,
                _traceback: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<bool> {
                self.$done(py)?;
                Ok(false)
            }
        }
    };
}
pub(crate) use closable_pymethods;
