//! `ferry_subscriber` and its `ferry_sample`.
//!
//! Rust's `Sample<'a>` borrows its `Subscriber` mutably; as with a publisher's loan
//! (`publisher.rs`), the one sample a subscriber may hold lives in a slot of the subscriber's
//! own heap block as `Sample<'static>`, under the same three rules: no other reference to the
//! subscriber while the slot is full (every other call on it is refused), the block neither
//! moves nor is freed while the slot is full, and the slot is emptied before the subscriber is
//! dropped. No allocation is made per message.

use std::cell::{Cell, UnsafeCell};
use std::ffi::c_char;
use std::ptr;
use std::time::Duration;

use ferry::MAX_TOPIC_NAME;
use ferry::{Sample, Subscriber};

use crate::args::{clear_out, free_endpoint, handle, put};
use crate::node::{ferry_node, new_endpoint};
use crate::qos::ferry_qos;
use crate::status::{ferry_status, guard, guard_status, guard_value, nothing_received, Failure};

/// A subscriber (opaque). Made by `ferry_subscriber_new`, freed by `ferry_subscriber_free`. Use
/// it from one thread at a time (it may move between threads).
pub struct ferry_subscriber {
    /// Declared first, so that it would drop first (it is empty whenever the block is freed).
    sample: ferry_sample,
    /// Borrowed mutably by the sample in `sample.held` while there is one.
    subscriber: UnsafeCell<Subscriber>,
    /// Kept messages given back while a sample was held: let go at the next call that has the
    /// subscriber to itself.
    let_go: UnsafeCell<Vec<ferry::Kept>>,
    /// `ferry_qos.max_held`, and the kept messages not given back yet. (ferry's own subscriber
    /// is made with twice the limit: messages given back while a sample is held still count
    /// there until they are let go.)
    max_held: usize,
    kept: Cell<usize>,
}

/// The most `ferry_qos.max_held` lets a C subscriber hold (half ferry's own limit).
const MAX_HELD: usize = ferry::MAX_HELD / 2;

/// A message kept past the next receive (opaque): made by `ferry_subscriber_keep`, read with
/// `ferry_kept_data`, `ferry_kept_len` and `ferry_kept_seq`, given back (and freed) by
/// `ferry_subscriber_let_go`.
pub struct ferry_kept {
    kept: ferry::Kept,
    data: *const u8,
    len: usize,
    seq: u64,
}

/// A received message (opaque). It lives inside its subscriber: at most one per subscriber at
/// a time, valid until `ferry_sample_release`. Under shared memory with reliable delivery its
/// bytes are the publisher's ring itself, which the publisher cannot reuse until the release.
/// Releasing it again is refused with `FERRY_INVALID_ARGUMENT` (until the subscriber receives
/// again: the handle is then the new sample).
pub struct ferry_sample {
    /// The sample held, borrowing the subscriber of the enclosing `ferry_subscriber`.
    held: UnsafeCell<Option<Sample<'static>>>,
    /// Read once when it arrived (NULL, 0, 0, 0 when none is held).
    data: Cell<*const u8>,
    len: Cell<usize>,
    seq: Cell<u64>,
    skipped: Cell<u64>,
}

impl ferry_subscriber {
    fn holding(&self) -> bool {
        // SAFETY: the slot is only touched by the calls of the one thread that uses this
        // subscriber, and none of them keeps a reference into it across calls.
        unsafe { (*self.sample.held.get()).is_some() }
    }

    /// The subscriber, for a call that is not a sample's; refused while a sample is held.
    ///
    /// # Safety
    /// The handle is used by one thread at a time, and no reference from an earlier call is
    /// live (each call drops its reference before it returns, except a sample's, checked here).
    // The content of an UnsafeCell, handed out under this function's contract.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn subscriber(&self, function: &str) -> Result<&mut Subscriber, Failure> {
        if self.holding() {
            return Err(Failure::invalid(format!(
                "a sample of this subscriber is held; release it (ferry_sample_release) before \
                 calling {function}"
            )));
        }
        // SAFETY: no sample borrows the subscriber (checked above), and the caller promises
        // that no other reference to it is live.
        let sub = unsafe { &mut *self.subscriber.get() };
        // SAFETY: as for the sample's slot: one thread per handle, no reference kept across calls.
        for kept in unsafe { &mut *self.let_go.get() }.drain(..) {
            sub.let_go(kept);
        }
        Ok(sub)
    }
}

/// Makes a subscriber on `topic` with `qos` (NULL: `ferry_qos_default()`). It receives what is
/// published from now on. On success `*out` holds it (free it with `ferry_subscriber_free`);
/// on failure, NULL.
///
/// # Safety
/// `node` is a live node, `topic` a NUL-terminated string, `qos` NULL or valid for a read, `out`
/// valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_subscriber_new(
    node: *const ferry_node,
    topic: *const c_char,
    qos: *const ferry_qos,
    out: *mut *mut ferry_subscriber,
) -> ferry_status {
    guard("ferry_subscriber_new", || {
        let make = |node: &ferry::Node, topic: &str, qos: ferry::Qos| {
            let max_held = qos.max_held;
            if !(1..=MAX_HELD).contains(&max_held) {
                return Err(Failure::invalid(format!(
                    "ferry_qos.max_held is {max_held}; it must be between 1 and {MAX_HELD}"
                )));
            }
            let subscriber = node.subscriber(topic, &qos.max_held(2 * max_held))?;
            Ok(ferry_subscriber {
                sample: ferry_sample {
                    held: UnsafeCell::new(None),
                    data: Cell::new(ptr::null()),
                    len: Cell::new(0),
                    seq: Cell::new(0),
                    skipped: Cell::new(0),
                },
                subscriber: UnsafeCell::new(subscriber),
                let_go: UnsafeCell::new(Vec::new()),
                max_held,
                kept: Cell::new(0),
            })
        };
        // SAFETY: the caller passes a live node, a C string and `out` valid for a write (NULL is
        // refused for each), and a QoS that is NULL or valid for a read.
        unsafe { new_endpoint(node, "topic", topic, MAX_TOPIC_NAME, qos, out, make) }
    })
}

/// Frees a subscriber: it leaves the topic. Refused (`FERRY_INVALID_ARGUMENT`, nothing freed)
/// while it holds a sample. NULL is allowed and does nothing.
///
/// # Safety
/// `subscriber` is NULL or a subscriber not freed yet.
#[no_mangle]
pub unsafe extern "C" fn ferry_subscriber_free(subscriber: *mut ferry_subscriber) -> ferry_status {
    guard("ferry_subscriber_free", || {
        // SAFETY: the caller passes NULL or a subscriber from ferry_subscriber_new, not freed yet.
        unsafe {
            free_endpoint(
                subscriber,
                ferry_subscriber::holding,
                "a sample of this subscriber is held; release it first (the subscriber was not \
                 freed)",
            )
        }
    })
}

/// Receives the next message into `*out` (NULL unless `FERRY_OK`, except when the call is
/// refused because a sample is held: `*out` is then left as it was, as it may hold that sample). `timeout_ns`: -1 waits
/// until a message comes (in bounded slices inside ferry that look at nothing else: to stop on
/// your own condition, use a finite timeout in a loop); 0 only looks (`FERRY_WOULD_BLOCK` if
/// nothing is waiting); above 0 waits at most that long (`FERRY_TIMEOUT`). Neither
/// `FERRY_WOULD_BLOCK` nor `FERRY_TIMEOUT` is a failure: they leave the last error message as it
/// is. Refused while the subscriber holds a sample: release it first.
///
/// # Safety
/// `subscriber` is a live subscriber; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_subscriber_recv(
    subscriber: *mut ferry_subscriber,
    timeout_ns: i64,
    out: *mut *mut ferry_sample,
) -> ferry_status {
    const FUNCTION: &str = "ferry_subscriber_recv";
    guard_status(FUNCTION, || {
        // SAFETY: the caller passes a live subscriber or NULL, and `out` valid for a write or NULL.
        unsafe { clear_out(subscriber, out, ferry_subscriber::holding) }?;
        // SAFETY: the caller passes a live subscriber or NULL (refused).
        let handle = unsafe { handle("subscriber", subscriber) }?;
        // SAFETY: no sample is held (`subscriber` checks), and no other reference to the
        // subscriber is live (one thread per handle, none kept across calls); the sample then
        // stays in this block's slot, the block neither moves nor is freed while it is there,
        // and no other reference to the subscriber is made until it leaves (the rules of this
        // module), so extending the borrow to 'static never lets it outlive or alias it.
        let s: &'static mut Subscriber = unsafe { handle.subscriber(FUNCTION) }?;
        let received = match timeout_ns {
            -1 => Some(s.recv()?),
            0 => s.try_recv()?,
            t if t > 0 => s.recv_timeout(Duration::from_nanos(t as u64))?,
            t => {
                return Err(Failure::invalid(format!(
                    "timeout_ns is {t}; use -1 (wait until a message comes), 0 (only look) or \
                     a positive number of nanoseconds"
                )))
            }
        };
        let Some(sample) = received else {
            return Ok(nothing_received(timeout_ns == 0));
        };
        let slot = handle.sample.held.get();
        // SAFETY: the slot is empty and only this call touches it now (one thread per handle).
        let held = unsafe { &mut *slot }.insert(sample);
        let h = &handle.sample;
        h.data.set(held.as_ptr());
        h.len.set(held.len());
        h.seq.set(held.seq());
        h.skipped.set(held.skipped());
        // SAFETY: `subscriber` is a live block; the pointer to its slot is derived from the
        // caller's pointer, so it stays valid for as long as the block lives.
        let sample_ptr = unsafe { ptr::addr_of_mut!((*subscriber).sample) };
        // SAFETY: checked above to be valid for a write.
        unsafe { put("out", out, sample_ptr) }?;
        Ok(ferry_status::FERRY_OK)
    })
}

/// Writes to `*out` the number of publishers currently sending on the topic. Refused while the
/// subscriber holds a sample.
///
/// # Safety
/// `subscriber` is a live subscriber; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_subscriber_publisher_count(
    subscriber: *mut ferry_subscriber,
    out: *mut usize,
) -> ferry_status {
    const FUNCTION: &str = "ferry_subscriber_publisher_count";
    guard(FUNCTION, || {
        // SAFETY: the caller passes a live subscriber or NULL (refused), used by this thread
        // alone; no reference to it outlives a call.
        let count =
            unsafe { handle("subscriber", subscriber)?.subscriber(FUNCTION) }?.publisher_count();
        // SAFETY: the caller promises `out` is valid for a write (NULL is refused).
        unsafe { put("out", out, count) }
    })
}

/// Reads a field of a held sample, or says why there is none.
///
/// # Safety
/// `sample` is NULL or a sample handle whose subscriber is live.
unsafe fn held<'a>(sample: *const ferry_sample) -> Result<&'a ferry_sample, Failure> {
    // SAFETY: the caller passes a live sample handle or NULL (refused).
    let s = unsafe { handle("sample", sample) }?;
    if s.data.get().is_null() {
        return Err(Failure::invalid("this sample was already released"));
    }
    Ok(s)
}

/// The first byte of the message, readable until the sample is released; NULL for a NULL
/// sample or one already released. (Never NULL for a held sample, even of 0 bytes.)
///
/// # Safety
/// `sample` is NULL or a sample handle whose subscriber is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_sample_data(sample: *const ferry_sample) -> *const u8 {
    guard_value("ferry_sample_data", ptr::null(), || {
        // SAFETY: the caller passes a live sample handle or NULL (refused).
        Ok(unsafe { held(sample) }?.data.get())
    })
}

/// The length of the message in bytes; 0 for a NULL sample or one already released.
///
/// # Safety
/// `sample` is NULL or a sample handle whose subscriber is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_sample_len(sample: *const ferry_sample) -> usize {
    guard_value("ferry_sample_len", 0, || {
        // SAFETY: the caller passes a live sample handle or NULL (refused).
        Ok(unsafe { held(sample) }?.len.get())
    })
}

/// The publisher's sequence number of the message (from 0 per publisher); 0 for a NULL sample
/// or one already released.
///
/// # Safety
/// `sample` is NULL or a sample handle whose subscriber is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_sample_seq(sample: *const ferry_sample) -> u64 {
    guard_value("ferry_sample_seq", 0, || {
        // SAFETY: the caller passes a live sample handle or NULL (refused).
        Ok(unsafe { held(sample) }?.seq.get())
    })
}

/// Messages this subscriber missed just before this one (latest delivery, UDP losses); 0 for a
/// NULL sample or one already released.
///
/// # Safety
/// `sample` is NULL or a sample handle whose subscriber is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_sample_skipped(sample: *const ferry_sample) -> u64 {
    guard_value("ferry_sample_skipped", 0, || {
        // SAFETY: the caller passes a live sample handle or NULL (refused).
        Ok(unsafe { held(sample) }?.skipped.get())
    })
}

/// Releases the sample: under reliable shared memory the publisher may reuse its bytes. Releasing
/// again is refused with `FERRY_INVALID_ARGUMENT`.
///
/// # Safety
/// `sample` is NULL or a sample handle whose subscriber is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_sample_release(sample: *mut ferry_sample) -> ferry_status {
    guard("ferry_sample_release", || {
        // SAFETY: the caller passes a live sample handle or NULL (refused).
        let s = unsafe { handle("sample", sample) }?;
        // SAFETY: the slot is only touched by the calls of the one thread using this
        // subscriber, none keeping a reference into it across calls.
        let taken = unsafe { &mut *s.held.get() }.take();
        s.data.set(ptr::null());
        s.len.set(0);
        s.seq.set(0);
        s.skipped.set(0);
        match taken {
            Some(sample) => {
                drop(sample);
                Ok(())
            }
            None => Err(Failure::invalid("this sample was already released")),
        }
    })
}

/// Keeps the sample the subscriber holds past the next receive: on `FERRY_OK`, `*out` is a kept
/// message (its bytes stay where they are and as they were: under reliable shared memory the
/// publisher's ring fills up to it), and the sample handle is empty, so the subscriber may
/// receive again. A subscriber holds at most `ferry_qos.max_held` messages at once (2 by
/// default), the one it holds now included: past that, `FERRY_INVALID_ARGUMENT` and the sample
/// stays held. Refused too when no sample is held.
///
/// # Safety
/// `subscriber` is a live subscriber; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_subscriber_keep(
    subscriber: *mut ferry_subscriber,
    out: *mut *mut ferry_kept,
) -> ferry_status {
    guard("ferry_subscriber_keep", || {
        // SAFETY: the caller promises `out` is valid for a write (NULL is refused).
        unsafe { put("out", out, ptr::null_mut()) }?;
        // SAFETY: the caller passes a live subscriber or NULL (refused).
        let handle = unsafe { handle("subscriber", subscriber) }?;
        let h = &handle.sample;
        // SAFETY: the slot is only touched by the calls of the one thread using this
        // subscriber, none keeping a reference into it across calls.
        let slot = unsafe { &mut *h.held.get() };
        let Some(sample) = slot.take() else {
            return Err(Failure::invalid("no sample is held: receive one first"));
        };
        let (data, len, seq) = (h.data.get(), h.len.get(), h.seq.get());
        let room = handle.kept.get() + 1 < handle.max_held;
        match if room { sample.keep() } else { Err(sample) } {
            Ok(kept) => {
                handle.kept.set(handle.kept.get() + 1);
                h.data.set(ptr::null());
                h.len.set(0);
                h.seq.set(0);
                h.skipped.set(0);
                let k = Box::into_raw(Box::new(ferry_kept {
                    kept,
                    data,
                    len,
                    seq,
                }));
                // SAFETY: checked above to be valid for a write.
                unsafe { put("out", out, k) }
            }
            Err(sample) => {
                *slot = Some(sample);
                Err(Failure::invalid(
                    "this subscriber holds as many messages as ferry_qos.max_held lets it: give \
                     one back (ferry_subscriber_let_go) or release the sample",
                ))
            }
        }
    })
}

/// Gives a kept message back and frees `kept`: its bytes must not be read after. While the
/// subscriber holds a sample, the message is let go at its next call (its publisher's room
/// comes back then). NULL `kept` is allowed and does nothing.
///
/// # Safety
/// `subscriber` is a live subscriber; `kept` is NULL or a kept message of it, not given back yet.
#[no_mangle]
pub unsafe extern "C" fn ferry_subscriber_let_go(
    subscriber: *mut ferry_subscriber,
    kept: *mut ferry_kept,
) -> ferry_status {
    const FUNCTION: &str = "ferry_subscriber_let_go";
    guard(FUNCTION, || {
        // SAFETY: the caller passes a live subscriber or NULL (refused).
        let handle = unsafe { handle("subscriber", subscriber) }?;
        if kept.is_null() {
            return Ok(());
        }
        // SAFETY: from Box::into_raw in ferry_subscriber_keep, given back once (the caller's
        // promise).
        let k = unsafe { Box::from_raw(kept) }.kept;
        handle.kept.set(handle.kept.get().saturating_sub(1));
        if handle.holding() {
            // SAFETY: one thread per handle, no reference into the list kept across calls.
            unsafe { &mut *handle.let_go.get() }.push(k);
            return Ok(());
        }
        // SAFETY: no sample is held (checked), one thread per handle.
        unsafe { handle.subscriber(FUNCTION) }?.let_go(k);
        Ok(())
    })
}

/// The first byte of a kept message, readable until it is given back; NULL for NULL.
///
/// # Safety
/// `kept` is NULL or a kept message not given back yet, of a live subscriber.
#[no_mangle]
pub unsafe extern "C" fn ferry_kept_data(kept: *const ferry_kept) -> *const u8 {
    guard_value("ferry_kept_data", ptr::null(), || {
        // SAFETY: the caller passes a live kept message or NULL (refused).
        Ok(unsafe { handle("kept", kept) }?.data)
    })
}

/// A kept message's length in bytes; 0 for NULL.
///
/// # Safety
/// As `ferry_kept_data`.
#[no_mangle]
pub unsafe extern "C" fn ferry_kept_len(kept: *const ferry_kept) -> usize {
    guard_value("ferry_kept_len", 0, || {
        // SAFETY: as above.
        Ok(unsafe { handle("kept", kept) }?.len)
    })
}

/// A kept message's sequence number (from its publisher); 0 for NULL.
///
/// # Safety
/// As `ferry_kept_data`.
#[no_mangle]
pub unsafe extern "C" fn ferry_kept_seq(kept: *const ferry_kept) -> u64 {
    guard_value("ferry_kept_seq", 0, || {
        // SAFETY: as above.
        Ok(unsafe { handle("kept", kept) }?.seq)
    })
}
