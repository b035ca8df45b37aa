//! Reading the arguments C passes: strings, handles, out-parameters. NULL is refused with
//! `FERRY_INVALID_ARGUMENT` naming the parameter.

use std::ffi::{c_char, c_void};
use std::fmt::Display;
use std::time::Duration;

use crate::status::Failure;

/// Reads a C string argument as UTF-8, of at most `max` bytes. The look for its NUL stops
/// after `max + 1` bytes, so a buffer that lacks one is read no further than that.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that stays valid for `'a`.
pub(crate) unsafe fn c_str<'a>(
    what: &str,
    ptr: *const c_char,
    max: usize,
) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    let mut len = 0;
    // SAFETY: not NULL; the caller promises a NUL-terminated string, and no byte past the
    // first NUL is read.
    while len <= max && unsafe { ptr.add(len).read() } != 0 {
        len += 1;
    }
    if len > max {
        return Err(Failure::invalid(format!(
            "{what} is longer than {max} bytes (or lacks its terminating NUL)"
        )));
    }
    // SAFETY: the `len` bytes before the NUL found above, valid for 'a as the caller promises.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    std::str::from_utf8(bytes).map_err(|_| Failure::invalid(format!("{what} is not valid UTF-8")))
}

/// Reads a handle argument.
///
/// # Safety
/// `ptr` is NULL or a live handle of type `T`, valid for `'a`.
pub(crate) unsafe fn handle<'a, T>(what: &str, ptr: *const T) -> Result<&'a T, Failure> {
    if ptr.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: not NULL; the caller promises a live handle.
    Ok(unsafe { &*ptr })
}

/// Writes `value` to the out-parameter `out`, refusing NULL.
///
/// # Safety
/// `out` is NULL or valid for a write of a `T`.
pub(crate) unsafe fn put<T>(what: &str, out: *mut T, value: T) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: not NULL, and the caller promises it is valid for a write.
    unsafe { out.write(value) };
    Ok(())
}

/// Reads a timeout in nanoseconds as C passes it: -1 none (`None`), 0 only looks, above 0 that
/// long. Any other value is refused, saying what -1 and 0 mean (`minus_one`, `zero`).
pub(crate) fn timeout(
    timeout_ns: i64,
    minus_one: impl Display,
    zero: &str,
) -> Result<Option<Duration>, Failure> {
    match timeout_ns {
        -1 => Ok(None),
        t if t >= 0 => Ok(Some(Duration::from_nanos(t as u64))),
        t => Err(Failure::invalid(format!(
            "timeout_ns is {t}; use -1 ({minus_one}), {zero} or a positive number of nanoseconds"
        ))),
    }
}

/// Clears `*out` for a receive or a call, except when the endpoint holds what it lent (a sample,
/// a request, a response): `*out` may hold it, the caller's only way to release it (the call is
/// then refused).
///
/// # Safety
/// `endpoint` is NULL or a live endpoint; `out` is NULL or valid for a write.
pub(crate) unsafe fn clear_out<E, T>(
    endpoint: *const E,
    out: *mut *mut T,
    holding: impl FnOnce(&E) -> bool,
) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::invalid("out is NULL"));
    }
    // SAFETY: the caller passes a live endpoint or NULL.
    if endpoint.is_null() || !holding(unsafe { &*endpoint }) {
        // SAFETY: not NULL, and the caller promises it is valid for a write.
        unsafe { out.write(std::ptr::null_mut()) };
    }
    Ok(())
}

/// Frees a handle from `Box::into_raw` (in its `_new`); NULL does nothing.
///
/// # Safety
/// `ptr` is NULL or a handle from `Box::into_raw`, not freed yet.
pub(crate) unsafe fn free<T>(ptr: *mut T) {
    if !ptr.is_null() {
        // SAFETY: from Box::into_raw, given back once (the caller's promise).
        drop(unsafe { Box::from_raw(ptr) });
    }
}

/// Frees the handle of an endpoint (from `Box::into_raw` in its `_new`); NULL does nothing.
/// Refused, with `refusal` and nothing freed, while the endpoint holds what it lent (a loan, a
/// sample, a request, a response), which borrows it.
///
/// # Safety
/// `endpoint` is NULL or a handle from `Box::into_raw`, not freed yet.
pub(crate) unsafe fn free_endpoint<E>(
    endpoint: *mut E,
    holding: impl FnOnce(&E) -> bool,
    refusal: &str,
) -> Result<(), Failure> {
    if endpoint.is_null() {
        return Ok(());
    }
    // SAFETY: not NULL; the caller promises a live handle.
    if holding(unsafe { &*endpoint }) {
        return Err(Failure::invalid(refusal));
    }
    // SAFETY: from Box::into_raw, given back once (the caller's promise); nothing it lent
    // borrows it (checked above).
    unsafe { free(endpoint) };
    Ok(())
}

/// Reads the `len` bytes at `data` that C passes as a message body: NULL only when `len` is 0.
/// A `len` above `max` is refused as too large before the bytes are looked at (and so is one
/// past `isize::MAX`, which no slice may have).
///
/// # Safety
/// `data` is NULL or valid for reads of `len` bytes that nothing writes during `'a`.
pub(crate) unsafe fn bytes<'a>(
    data: *const c_void,
    len: usize,
    max: usize,
) -> Result<&'a [u8], Failure> {
    if len > max {
        return Err(ferry::SendError::TooLarge { len, max }.into());
    }
    if len == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(Failure::invalid(format!("data is NULL and len is {len}")));
    }
    if len > isize::MAX as usize {
        return Err(Failure::invalid(format!(
            "len is {len}, more than any buffer"
        )));
    }
    // SAFETY: not NULL; the caller promises `len` readable bytes that nothing writes during
    // 'a; `len` is at most `isize::MAX`.
    Ok(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) })
}
