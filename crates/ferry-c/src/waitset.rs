//! `ferry_waitset`: one thread waiting on several subscribers, servers and clients at once.

use std::ffi::c_void;

use ferry::{WaitSet, Waitable};

use crate::args::{free, handle, put, timeout};
use crate::client::ferry_client;
use crate::server::ferry_server;
use crate::status::{ferry_status, guard, guard_status, Failure};
use crate::subscriber::ferry_subscriber;

/// A wait set (opaque): made by `ferry_waitset_new`, freed by `ferry_waitset_free`. It holds
/// none of the items it waits on: each `ferry_waitset_wait` is given them. Use it from one
/// thread at a time.
pub struct ferry_waitset {
    set: WaitSet,
}

/// What a `ferry_wait_item` is.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ferry_wait_kind {
    /// A `ferry_subscriber`: ready when a message waits (or a deadline passed).
    FERRY_WAIT_SUBSCRIBER = 0,
    /// A `ferry_server`: ready when a request waits.
    FERRY_WAIT_SERVER = 1,
    /// A `ferry_client`: ready when a response (or the end of a pending request) waits.
    FERRY_WAIT_CLIENT = 2,
}

/// One item of a wait: its kind (`ferry_wait_kind`) and its handle.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_wait_item {
    pub kind: i32,
    pub handle: *mut c_void,
}

/// The most items one wait takes.
const MAX_ITEMS: usize = 1024;

/// Makes a wait set. On success `*out` holds it (free it with `ferry_waitset_free`).
///
/// # Safety
/// `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_waitset_new(out: *mut *mut ferry_waitset) -> ferry_status {
    guard("ferry_waitset_new", || {
        let set = Box::into_raw(Box::new(ferry_waitset {
            set: WaitSet::new(),
        }));
        // SAFETY: the caller promises `out` is valid for a write (NULL is refused, and the
        // set is freed then).
        unsafe { put("out", out, set) }.inspect_err(|_| {
            // SAFETY: just made, never handed out.
            drop(unsafe { Box::from_raw(set) });
        })
    })
}

/// Frees a wait set. NULL is allowed and does nothing.
///
/// # Safety
/// `set` is NULL or a wait set not freed yet, not in use by another call.
#[no_mangle]
pub unsafe extern "C" fn ferry_waitset_free(set: *mut ferry_waitset) -> ferry_status {
    guard("ferry_waitset_free", || {
        // SAFETY: NULL or from Box::into_raw in ferry_waitset_new, freed once (the caller's
        // promise).
        unsafe { free(set) };
        Ok(())
    })
}

/// Waits until at least one of the `n` items is ready, then writes the indices of those ready
/// (in order) to `ready` (at most `ready_cap` of them) and their number to `*n_ready` (which
/// may exceed `ready_cap`: the rest are ready too). Nothing is taken: receive from the ready
/// items afterwards. `timeout_ns`: -1 waits as long as it takes, 0 only looks, above 0 waits at
/// most that long; `FERRY_TIMEOUT` (and `*n_ready` 0) when the time ran out with none ready.
/// Refused (`FERRY_INVALID_ARGUMENT`) for a NULL or unknown item, an item listed twice, more
/// than 1024 items, and an item that holds a sample, request or response (release it first).
///
/// # Safety
/// `set` is a live wait set; `items` points to `n` items whose handles are live and used by no
/// other thread during the call; `ready` is valid for `ready_cap` writes (NULL when
/// `ready_cap` is 0); `n_ready` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_waitset_wait(
    set: *mut ferry_waitset,
    items: *const ferry_wait_item,
    n: usize,
    timeout_ns: i64,
    ready: *mut usize,
    ready_cap: usize,
    n_ready: *mut usize,
) -> ferry_status {
    const FUNCTION: &str = "ferry_waitset_wait";
    guard_status(FUNCTION, || {
        // SAFETY: the caller promises `n_ready` is valid for a write (NULL is refused).
        unsafe { put("n_ready", n_ready, 0) }?;
        if set.is_null() {
            return Err(Failure::invalid("set is NULL"));
        }
        // SAFETY: not NULL; the caller promises a live wait set used by this call alone.
        let set = unsafe { &mut (*set).set };
        if n == 0 || n > MAX_ITEMS {
            return Err(Failure::invalid(format!(
                "n is {n}; a wait takes 1 to {MAX_ITEMS} items"
            )));
        }
        if items.is_null() {
            return Err(Failure::invalid("items is NULL"));
        }
        if ready.is_null() && ready_cap > 0 {
            return Err(Failure::invalid("ready is NULL"));
        }
        let timeout = timeout(timeout_ns, "as long as it takes", "0 (only look)")?;
        // SAFETY: the caller promises `n` readable items.
        let items = unsafe { std::slice::from_raw_parts(items, n) };
        for (i, item) in items.iter().enumerate() {
            if item.handle.is_null() {
                return Err(Failure::invalid(format!("items[{i}].handle is NULL")));
            }
            if items[..i].iter().any(|o| o.handle == item.handle) {
                return Err(Failure::invalid(format!(
                    "items[{i}] is listed twice (a handle is waited on once)"
                )));
            }
        }
        let mut lent: Vec<&mut dyn Waitable> = Vec::with_capacity(n);
        for (i, item) in items.iter().enumerate() {
            let what = format!("items[{i}]");
            let h = item.handle;
            // Each arm: the caller promises a live handle of the kind it names, used by no
            // other thread; each handle appears once (checked above), so the mutable references
            // do not alias; the item refuses while it holds a sample, request or response,
            // which would borrow it.
            let w: &mut dyn Waitable = match item.kind {
                // SAFETY: as said above, for a subscriber.
                0 => unsafe { handle(&what, h.cast::<ferry_subscriber>())?.subscriber(FUNCTION) }?,
                // SAFETY: as said above, for a server.
                1 => unsafe { handle(&what, h.cast::<ferry_server>())?.server(FUNCTION) }?,
                // SAFETY: as said above, for a client.
                2 => unsafe { handle(&what, h.cast::<ferry_client>())?.client(FUNCTION) }?,
                k => {
                    return Err(Failure::invalid(format!(
                        "items[{i}].kind is {k}; use FERRY_WAIT_SUBSCRIBER, FERRY_WAIT_SERVER \
                         or FERRY_WAIT_CLIENT"
                    )))
                }
            };
            lent.push(w);
        }
        let found = set.wait(&mut lent[..], timeout)?;
        if found.is_empty() {
            return Ok(ferry_status::FERRY_TIMEOUT);
        }
        for (k, &i) in found.iter().take(ready_cap).enumerate() {
            // SAFETY: `ready` is valid for `ready_cap` writes (the caller's promise), k < ready_cap.
            unsafe { ready.add(k).write(i) };
        }
        // SAFETY: checked valid above.
        unsafe { put("n_ready", n_ready, found.len()) }?;
        Ok(ferry_status::FERRY_OK)
    })
}
