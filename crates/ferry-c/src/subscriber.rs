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

use ferry::MAX_TOPIC_NAME;
use ferry::{Sample, Subscriber};

use crate::args::{clear_out, free_endpoint, handle, put, timeout};
use crate::node::{ferry_node, new_endpoint};
use crate::qos::ferry_qos;
use crate::slot::{self, lend, take, Handle, Lent, Slot};
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
    slot: Slot<Sample<'static>>,
}

/// What C reads of a sample, read once when it arrived.
#[derive(Clone, Copy)]
pub(crate) struct SampleFields {
    data: *const u8,
    len: usize,
    seq: u64,
    skipped: u64,
}

impl Lent for Sample<'static> {
    type Fields = SampleFields;
    const WHAT: &'static str = "sample";
    const ENDED: &'static str = "this sample was already released";

    fn fields(&mut self) -> SampleFields {
        SampleFields {
            data: self.as_ptr(),
            len: self.len(),
            seq: self.seq(),
            skipped: self.skipped(),
        }
    }
}

impl Handle for ferry_sample {
    type Lent = Sample<'static>;

    fn slot(&self) -> &Slot<Sample<'static>> {
        &self.slot
    }
}

impl ferry_subscriber {
    fn holding(&self) -> bool {
        self.sample.slot.holding()
    }

    /// The subscriber, for a call that is not a sample's; refused while a sample is held. Lets
    /// go the kept messages given back meanwhile.
    ///
    /// # Safety
    /// As `Slot::endpoint`.
    // The content of an UnsafeCell, handed out under this function's contract.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn subscriber(&self, function: &str) -> Result<&mut Subscriber, Failure> {
        let refusal = "a sample of this subscriber is held; release it (ferry_sample_release)";
        // SAFETY: the caller's promise; the sample borrows this subscriber.
        let sub = unsafe {
            self.sample
                .slot
                .endpoint(&self.subscriber, function, refusal)
        }?;
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
                sample: ferry_sample { slot: Slot::new() },
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
        let received = match timeout(timeout_ns, "wait until a message comes", "0 (only look)")? {
            None => Some(s.recv()?),
            Some(t) if t.is_zero() => s.try_recv()?,
            Some(t) => s.recv_timeout(t)?,
        };
        let Some(sample) = received else {
            return Ok(nothing_received(timeout_ns == 0));
        };
        // SAFETY: `subscriber` is a live block; the pointer to its handle is derived from the
        // caller's pointer, so it stays valid for as long as the block lives.
        let sample_ptr = unsafe { ptr::addr_of_mut!((*subscriber).sample) };
        // SAFETY: as just said; the slot is empty (checked by `subscriber`), and `out` was
        // checked above.
        unsafe { lend(sample_ptr, sample, out) }?;
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

/// The first byte of the message, readable until the sample is released; NULL for a NULL
/// sample or one already released. (Never NULL for a held sample, even of 0 bytes.)
///
/// # Safety
/// `sample` is NULL or a sample handle whose subscriber is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_sample_data(sample: *const ferry_sample) -> *const u8 {
    // SAFETY: the caller passes a live sample handle or NULL (refused).
    unsafe { slot::read("ferry_sample_data", sample, ptr::null(), |s| s.data) }
}

/// The length of the message in bytes; 0 for a NULL sample or one already released.
///
/// # Safety
/// `sample` is NULL or a sample handle whose subscriber is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_sample_len(sample: *const ferry_sample) -> usize {
    // SAFETY: the caller passes a live sample handle or NULL (refused).
    unsafe { slot::read("ferry_sample_len", sample, 0, |s| s.len) }
}

/// The publisher's sequence number of the message (from 0 per publisher); 0 for a NULL sample
/// or one already released.
///
/// # Safety
/// `sample` is NULL or a sample handle whose subscriber is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_sample_seq(sample: *const ferry_sample) -> u64 {
    // SAFETY: the caller passes a live sample handle or NULL (refused).
    unsafe { slot::read("ferry_sample_seq", sample, 0, |s| s.seq) }
}

/// Messages this subscriber missed just before this one (latest delivery, UDP losses); 0 for a
/// NULL sample or one already released.
///
/// # Safety
/// `sample` is NULL or a sample handle whose subscriber is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_sample_skipped(sample: *const ferry_sample) -> u64 {
    // SAFETY: the caller passes a live sample handle or NULL (refused).
    unsafe { slot::read("ferry_sample_skipped", sample, 0, |s| s.skipped) }
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
        let (_, sample) = unsafe { take(sample) }?;
        drop(sample);
        Ok(())
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
        let slot = &handle.sample.slot;
        let (Some(f), Some(sample)) = (slot.fields(), slot.take()) else {
            return Err(Failure::invalid("no sample is held: receive one first"));
        };
        let room = handle.kept.get() + 1 < handle.max_held;
        match if room { sample.keep() } else { Err(sample) } {
            Ok(kept) => {
                handle.kept.set(handle.kept.get() + 1);
                let k = Box::into_raw(Box::new(ferry_kept {
                    kept,
                    data: f.data,
                    len: f.len,
                    seq: f.seq,
                }));
                // SAFETY: checked above to be valid for a write.
                unsafe { put("out", out, k) }
            }
            Err(sample) => {
                slot.fill(sample);
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
