//! The `#[pymethods]` of a class that Python code closes: a publisher, a subscriber, a client
//! and a server (`close`), a loan (`discard`) and a sample (`release`). Each is a context manager
//! whose exit closes it; a loan and a sample also lend their region through the buffer protocol
//! (lend.rs) and give `array(dtype)`, a numpy array over it.

use std::ptr::NonNull;

use pyo3::Python;

/// Frees an end kept in a leaked box (a publisher or subscriber that lent values borrow) with the
/// GIL released: a UDP publisher lingers as it goes, for reliable subscribers to take what it
/// sent (up to its send timeout), and other Python threads run meanwhile.
///
/// # Safety
/// `ptr` came from `Box::leak`, is freed once, and nothing borrows it any more.
pub unsafe fn free_detached<T: Send>(py: Python<'_>, ptr: NonNull<T>) {
    // SAFETY: the caller's promise.
    let boxed = unsafe { Box::from_raw(ptr.as_ptr()) };
    py.detach(move || drop(boxed));
}

/// Declares a class's `#[pymethods]`: its own methods, then `__enter__` and an `__exit__` that
/// calls `closed_by` and lets an exception through; with `array: DOC`, also `array(dtype)` over
/// the class's buffer (documented by DOC); with `lends: WHAT, writable: BOOL` before it, also
/// the buffer protocol over the class's `region`, counted in its `lend`, `__len__` and `views`.
macro_rules! closable_pymethods {
    (
        impl $ty:ident, closed_by: $done:ident, lends: $what:literal, writable: $writable:literal,
        array: $array_doc:literal; $($methods:tt)*
    ) => {
        $crate::closable::closable_pymethods! {
            // pyo3's wrappers of the two buffer slots call them from an unsafe fn's body, which
            // rustc lints as this crate's code when the methods are written in this macro. The
            // methods' own unsafe operations stand in unsafe blocks.
            #[allow(unsafe_op_in_unsafe_fn)]
            impl $ty, closed_by: $done, array: $array_doc;
            $($methods)*

            fn __len__(&self) -> usize {
                self.region.len()
            }

            /// Buffer views of it alive now (memoryviews, numpy arrays).
            #[getter]
            fn views(&self) -> usize {
                self.lend.views()
            }

            /// # Safety
            /// Called by CPython with a Py_buffer to fill.
            unsafe fn __getbuffer__(
                slf: Bound<'_, Self>,
                view: *mut pyo3::ffi::Py_buffer,
                flags: std::ffi::c_int,
            ) -> PyResult<()> {
                let this: *const $ty = slf.get();
                // SAFETY: `this` stays valid during the call: whoever asks for a buffer holds a
                // reference to the object for the whole call (`slf` is another). `view` comes
                // from CPython; the region belongs to the lend.
                unsafe {
                    let (lend, region) = (&(*this).lend, (*this).region);
                    $crate::lend::fill_view(
                        view,
                        flags,
                        slf.into_any(),
                        lend,
                        region,
                        $writable,
                        $what,
                    )
                }
            }

            /// # Safety
            /// Called by CPython once per view filled by `__getbuffer__`.
            unsafe fn __releasebuffer__(&self, _view: *mut pyo3::ffi::Py_buffer) {
                self.lend.unexport();
            }
        }
    };
    (
        $(#[$attr:meta])* impl $ty:ident, closed_by: $done:ident, array: $array_doc:literal;
        $($methods:tt)*
    ) => {
        $crate::closable::closable_pymethods! {
            $(#[$attr])* impl $ty, closed_by: $done;
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
    ($(#[$attr:meta])* impl $ty:ident, closed_by: $done:ident; $($methods:tt)*) => {
        // A block of its own, so that `attr` also covers what pyo3 generates.
        $(#[$attr])*
        const _: () = {
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
    };
}
pub(crate) use closable_pymethods;
