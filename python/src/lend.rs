//! Memory of the ring lent to Python: a received sample (read-only) or a loan (writable), shown
//! through the buffer protocol without a copy.
//!
//! The rule that keeps it sound: a lent region is handed back to the ring (a sample released, a
//! loan sent or discarded) only while no buffer view of it exists, and no view is made after it
//! was handed back. Both sides go through one atomic word ([`Lend`]): the number of views, or
//! [`HANDED_BACK`]. A view therefore never outlives the bytes it points at, whatever Python code
//! does with it, on any thread.

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, TryLockError};

use pyo3::ffi;
use pyo3::prelude::*;

use crate::errors;

/// The state word's value once the region was handed back.
const HANDED_BACK: usize = usize::MAX;

/// The buffer views of one lent region, and whether it was handed back.
#[derive(Debug, Default)]
pub struct Lend {
    /// Views alive, or `HANDED_BACK`.
    state: AtomicUsize,
}

impl Lend {
    /// Counts a new view; false once the region was handed back.
    pub fn export(&self) -> bool {
        // AcqRel pairs with `hand_back`'s compare-exchange: a view counted here is seen there.
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n != HANDED_BACK).then(|| n + 1)
            })
            .is_ok()
    }

    /// A view ended.
    pub fn unexport(&self) {
        // Release: the view's last reads and writes happen before a hand-back that sees zero.
        let before = self.state.fetch_sub(1, Ordering::Release);
        debug_assert!(before != 0 && before != HANDED_BACK);
    }

    /// Marks the region handed back. `Ok(true)` if this call did, `Ok(false)` if it already
    /// was, `Err(views)` while views of it exist (then nothing changes).
    pub fn hand_back(&self) -> Result<bool, usize> {
        // AcqRel: pairs with `export` and `unexport` above.
        match self
            .state
            .compare_exchange(0, HANDED_BACK, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Ok(true),
            Err(HANDED_BACK) => Ok(false),
            Err(views) => Err(views),
        }
    }

    pub fn handed_back(&self) -> bool {
        self.state.load(Ordering::Acquire) == HANDED_BACK
    }

    /// Views alive now (0 once handed back).
    pub fn views(&self) -> usize {
        match self.state.load(Ordering::Acquire) {
            HANDED_BACK => 0,
            n => n,
        }
    }
}

/// Runs `f` on the state of the object that lent a region (a publisher, a subscriber), unless
/// another thread holds it now: that thread's call drops what `f` would have. A poisoned lock is
/// used as it is.
pub fn unless_busy<S>(state: &Mutex<S>, f: impl FnOnce(&mut S)) {
    let mut st = match state.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => return,
    };
    f(&mut st);
}

/// Where a lent region's bytes are. Valid while its [`Lend`] is not handed back.
#[derive(Debug, Clone, Copy)]
pub struct Region {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Region is an address and a length; every access through it is gated by its Lend
// (atomic), which makes the bytes valid on any thread until it is handed back.
unsafe impl Send for Region {}
// SAFETY: as above; shared access only reads the address.
unsafe impl Sync for Region {}

impl Region {
    /// The region of `bytes` (a dangling, never dereferenced address when empty).
    pub fn of(bytes: &[u8]) -> Region {
        Region {
            ptr: NonNull::new(bytes.as_ptr().cast_mut()).unwrap_or(NonNull::dangling()),
            len: bytes.len(),
        }
    }

    /// The region of `bytes`, to be written through.
    pub fn of_mut(bytes: &mut [u8]) -> Region {
        Region {
            ptr: NonNull::new(bytes.as_mut_ptr()).unwrap_or(NonNull::dangling()),
            len: bytes.len(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

/// A one-dimensional unsigned-byte buffer ("B"), as memoryview and numpy read it.
static FORMAT: &std::ffi::CStr = c"B";

/// Fills `view` with `region`, counted in `lend`; `owner` (the Python object lending it) is
/// kept alive by the view.
///
/// # Safety
/// `view` is the pointer CPython passed to `bf_getbuffer`; `region` belongs to `lend`.
pub unsafe fn fill_view(
    view: *mut ffi::Py_buffer,
    flags: c_int,
    owner: Bound<'_, PyAny>,
    lend: &Lend,
    region: Region,
    writable: bool,
    what: &str,
) -> PyResult<()> {
    if view.is_null() {
        return Err(pyo3::exceptions::PyBufferError::new_err("no view to fill"));
    }
    if !writable && flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
        return Err(pyo3::exceptions::PyBufferError::new_err(format!(
            "a {what} is read-only: it is the publisher's message in place; copy it \
             (bytes(sample), array.copy()) to change it"
        )));
    }
    if !lend.export() {
        return Err(errors::released(owner.py(), what));
    }
    // SAFETY: `view` is valid (checked non-null; CPython hands a Py_buffer to fill). The region
    // stays valid while this view is counted in `lend`, and the view holds a reference to
    // `owner`, which holds `lend`.
    unsafe {
        let v = &mut *view;
        v.obj = owner.into_ptr();
        v.buf = region.ptr.as_ptr().cast::<c_void>();
        v.len = region.len as isize;
        v.readonly = c_int::from(!writable);
        v.itemsize = 1;
        v.format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
            FORMAT.as_ptr().cast_mut()
        } else {
            std::ptr::null_mut()
        };
        v.ndim = 1;
        v.shape = if flags & ffi::PyBUF_ND == ffi::PyBUF_ND {
            &mut v.len
        } else {
            std::ptr::null_mut()
        };
        v.strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
            &mut v.itemsize
        } else {
            std::ptr::null_mut()
        };
        v.suboffsets = std::ptr::null_mut();
        v.internal = std::ptr::null_mut();
    }
    Ok(())
}

/// Calls `f` with the bytes of a caller's bytes-like object (bytes, bytearray, memoryview, a
/// numpy array), held as a C-contiguous buffer for the call; an error if it has none or is not
/// C-contiguous. The bytes are read with the GIL held (another thread may write a bytearray's
/// contents).
pub fn with_bytes<R>(obj: &Bound<'_, PyAny>, f: impl FnOnce(&[u8]) -> PyResult<R>) -> PyResult<R> {
    // On the stack, and never moved while filled: a filled view may point into itself (its
    // shape at its own `len`), so it is used in place and released here.
    let mut view = std::mem::MaybeUninit::<ffi::Py_buffer>::zeroed();
    // SAFETY: obj is a live object (we hold it); view points to writable memory of the right
    // size, which PyObject_GetBuffer fills (or leaves unfilled on failure).
    let rc = unsafe {
        ffi::PyObject_GetBuffer(obj.as_ptr(), view.as_mut_ptr(), ffi::PyBUF_C_CONTIGUOUS)
    };
    if rc != 0 {
        let err = PyErr::fetch(obj.py());
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "expected a C-contiguous bytes-like object (bytes, bytearray, memoryview, numpy \
             array; np.ascontiguousarray makes one): {err}"
        )));
    }
    /// Releases the view however `f` ends (a panic included).
    struct Release(*mut ffi::Py_buffer);
    impl Drop for Release {
        fn drop(&mut self) {
            // SAFETY: the view was filled by PyObject_GetBuffer and is released once, by the
            // thread that holds the GIL (we are inside a call from Python).
            unsafe { ffi::PyBuffer_Release(self.0) };
        }
    }
    let release = Release(view.as_mut_ptr());
    // SAFETY: filled above (rc == 0).
    let v = unsafe { view.assume_init_ref() };
    let len = usize::try_from(v.len).unwrap_or(0);
    let bytes = if len == 0 || v.buf.is_null() {
        &[][..]
    } else {
        // SAFETY: a C-contiguous buffer of `len` bytes at `buf`, alive until released (after f).
        unsafe { std::slice::from_raw_parts(v.buf.cast::<u8>(), len) }
    };
    let out = f(bytes);
    drop(release);
    out
}
