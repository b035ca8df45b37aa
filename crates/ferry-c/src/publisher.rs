//! `ferry_publisher` and its `ferry_loan`.
//!
//! Rust's `Loan<'a>` borrows its `Publisher` mutably. Here the publisher lives in a heap block
//! whose address C holds, and the one loan it may have lives in a slot of the same block: the
//! loan is kept as `Loan<'static>`, a borrow of the publisher that this module makes sound by
//! keeping three rules, checked on every call instead of by the compiler:
//!
//! 1. while the slot holds a loan, no other reference to the publisher is made (every call on
//!    the publisher is refused with `FERRY_INVALID_ARGUMENT` until the loan is sent or
//!    discarded);
//! 2. the block does not move (it is a `Box` C holds by pointer) and is not freed while the slot
//!    holds a loan (`ferry_publisher_free` is refused then);
//! 3. the slot is emptied (the loan sent or dropped) before the publisher is dropped.
//!
//! The publisher sits in an `UnsafeCell`, so that shared references to the block (made to read
//! the slot's state) do not conflict with the loan's mutable borrow of the publisher.

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_void};
use std::ptr;

use ferry::MAX_TOPIC_NAME;
use ferry::{Loan, Publisher};

use crate::args::{clear_out, free_endpoint, handle, put};
use crate::node::{ferry_node, new_endpoint};
use crate::qos::ferry_qos;
use crate::slot::{self, lend, take, Handle, Lent, Slot};
use crate::status::{ferry_status, guard, guard_value, Failure};

/// A publisher (opaque). Made by `ferry_publisher_new`, freed by `ferry_publisher_free`. Use it
/// from one thread at a time (it may move between threads).
pub struct ferry_publisher {
    /// Declared first, so that it would drop first (it is empty whenever the block is freed).
    loan: ferry_loan,
    /// Borrowed mutably by the loan in `loan.held` while there is one (rule 1).
    publisher: UnsafeCell<Publisher>,
    max_message_size: usize,
}

/// Room lent by a publisher for one message, written in place (opaque). It lives inside its
/// publisher: at most one per publisher at a time, valid until `ferry_loan_send` or
/// `ferry_loan_discard`. Sending or discarding it again is refused with
/// `FERRY_INVALID_ARGUMENT` (until the publisher lends again: the handle is then the new loan).
pub struct ferry_loan {
    /// The outstanding loan, borrowing the publisher of the enclosing `ferry_publisher`.
    slot: Slot<Loan<'static>>,
}

/// A loan's bytes, read once when it was made.
#[derive(Clone, Copy)]
pub(crate) struct LoanFields {
    data: *mut u8,
    len: usize,
}

impl Lent for Loan<'static> {
    type Fields = LoanFields;
    const WHAT: &'static str = "loan";
    const ENDED: &'static str = "this loan was already sent or discarded";

    fn fields(&mut self) -> LoanFields {
        let bytes = self.as_mut_slice();
        LoanFields {
            data: bytes.as_mut_ptr(),
            len: bytes.len(),
        }
    }
}

impl Handle for ferry_loan {
    type Lent = Loan<'static>;

    fn slot(&self) -> &Slot<Loan<'static>> {
        &self.slot
    }
}

impl ferry_publisher {
    /// Whether a loan is outstanding.
    fn lending(&self) -> bool {
        self.loan.slot.holding()
    }

    /// The publisher, for a call that is not a loan's; refused while a loan is outstanding
    /// (rule 1).
    ///
    /// # Safety
    /// As `Slot::endpoint`.
    // The content of an UnsafeCell, handed out under this function's contract.
    #[allow(clippy::mut_from_ref)]
    unsafe fn publisher(&self, function: &str) -> Result<&mut Publisher, Failure> {
        let refusal = "a loan of this publisher is outstanding; send it (ferry_loan_send) or \
                       discard it (ferry_loan_discard)";
        // SAFETY: the caller's promise; the loan borrows this publisher.
        unsafe { self.loan.slot.endpoint(&self.publisher, function, refusal) }
    }
}

/// Makes a publisher on `topic` with `qos` (NULL: `ferry_qos_default()`). On success `*out`
/// holds it (free it with `ferry_publisher_free`); on failure, NULL.
///
/// # Safety
/// `node` is a live node, `topic` a NUL-terminated string, `qos` NULL or valid for a read, `out`
/// valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_publisher_new(
    node: *const ferry_node,
    topic: *const c_char,
    qos: *const ferry_qos,
    out: *mut *mut ferry_publisher,
) -> ferry_status {
    guard("ferry_publisher_new", || {
        let make = |node: &ferry::Node, topic: &str, qos: ferry::Qos| {
            let publisher = node.publisher(topic, &qos)?;
            Ok(ferry_publisher {
                loan: ferry_loan { slot: Slot::new() },
                max_message_size: publisher.max_message_size(),
                publisher: UnsafeCell::new(publisher),
            })
        };
        // SAFETY: the caller passes a live node, a C string and `out` valid for a write (NULL is
        // refused for each), and a QoS that is NULL or valid for a read.
        unsafe { new_endpoint(node, "topic", topic, MAX_TOPIC_NAME, qos, out, make) }
    })
}

/// Frees a publisher: it leaves the topic. Refused (`FERRY_INVALID_ARGUMENT`, nothing freed)
/// while a loan of it is outstanding. NULL is allowed and does nothing. A reliable UDP publisher
/// waits here until its live reliable subscribers have taken every message, at most its QoS's
/// `send_timeout_ns`.
///
/// # Safety
/// `publisher` is NULL or a publisher not freed yet.
#[no_mangle]
pub unsafe extern "C" fn ferry_publisher_free(publisher: *mut ferry_publisher) -> ferry_status {
    guard("ferry_publisher_free", || {
        // SAFETY: the caller passes NULL or a publisher from ferry_publisher_new, not freed yet.
        unsafe {
            free_endpoint(
                publisher,
                ferry_publisher::lending,
                "a loan of this publisher is outstanding; send or discard it first (the \
                 publisher was not freed)",
            )
        }
    })
}

/// Sends a copy of `len` bytes at `data` (NULL only when `len` is 0). `FERRY_TOO_LARGE` above
/// the QoS's `max_message_size`; `FERRY_TIMEOUT` if a reliable subscriber made no room within
/// the send timeout (nothing was sent).
///
/// # Safety
/// `publisher` is a live publisher; `data` is valid for reads of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ferry_publisher_send(
    publisher: *mut ferry_publisher,
    data: *const c_void,
    len: usize,
) -> ferry_status {
    guard("ferry_publisher_send", || {
        // SAFETY: the caller passes a live publisher or NULL (refused), used by this thread
        // alone; no reference to it outlives a call.
        let h = unsafe { handle("publisher", publisher) }?;
        // Before the slice is made: a `len` past the largest message is refused whatever `data`
        // points at (and so is one past `isize::MAX`, which no slice may have).
        if len > h.max_message_size {
            return Err(ferry::SendError::TooLarge {
                len,
                max: h.max_message_size,
            }
            .into());
        }
        // SAFETY: as above.
        let p = unsafe { h.publisher("ferry_publisher_send") }?;
        let bytes = if len == 0 {
            &[][..]
        } else if data.is_null() {
            return Err(Failure::invalid(format!("data is NULL and len is {len}")));
        } else {
            // SAFETY: not NULL; the caller promises `len` readable bytes that nothing writes
            // during the call; `len` is at most the largest message, below `isize::MAX`.
            unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }
        };
        Ok(p.send(bytes)?)
    })
}

/// Lends room for a `len`-byte message, to be written in place (`ferry_loan_data`) and sent
/// with `ferry_loan_send` or given back with `ferry_loan_discard`. Under shared memory the bytes
/// are the publisher's ring itself (zero copy); under UDP, a buffer of the publisher's that
/// becomes the retransmit copy. Either holds whatever an earlier message left there: write every
/// byte. Under reliable delivery this waits for ring space as a send does (`FERRY_TIMEOUT`). One
/// loan per publisher at a time; while it is outstanding every other call on the publisher is
/// refused. On success `*out` holds the loan; on failure NULL, except when the call is refused
/// because a loan is outstanding: `*out` is then left as it was (it may hold that loan).
///
/// # Safety
/// `publisher` is a live publisher; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_publisher_loan(
    publisher: *mut ferry_publisher,
    len: usize,
    out: *mut *mut ferry_loan,
) -> ferry_status {
    guard("ferry_publisher_loan", || {
        // SAFETY: the caller passes a live publisher or NULL, and `out` valid for a write or NULL.
        unsafe { clear_out(publisher, out, ferry_publisher::lending) }?;
        // SAFETY: the caller passes a live publisher or NULL (refused).
        let handle = unsafe { handle("publisher", publisher) }?;
        // SAFETY: no loan is outstanding (`publisher` checks), and no other reference to the
        // publisher is live (one thread per handle, none kept across calls); the loan then stays
        // in this block's slot, the block neither moves nor is freed while it is there, and no
        // other reference to the publisher is made until it leaves (rules 1–3 of this module),
        // so extending the borrow to 'static never lets it outlive or alias the publisher.
        let p: &'static mut Publisher = unsafe { handle.publisher("ferry_publisher_loan") }?;
        let loan: Loan<'static> = p.loan(len)?;
        // SAFETY: `publisher` is a live block; the pointer to its handle is derived from the
        // caller's pointer, so it stays valid for as long as the block lives.
        let loan_ptr = unsafe { ptr::addr_of_mut!((*publisher).loan) };
        // SAFETY: as just said; the slot is empty (checked by `publisher`), and `out` was
        // checked above.
        unsafe { lend(loan_ptr, loan, out) }
    })
}

/// The first byte of the loan's message, writable until the loan is sent or discarded; NULL
/// for a NULL loan or one already sent or discarded. (Never NULL for a live loan, even of 0
/// bytes.)
///
/// # Safety
/// `loan` is NULL or a loan handle whose publisher is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_loan_data(loan: *mut ferry_loan) -> *mut u8 {
    // SAFETY: the caller passes a live loan handle or NULL (refused).
    unsafe { slot::read("ferry_loan_data", loan, ptr::null_mut(), |l| l.data) }
}

/// The length of the loan's message in bytes (the `len` it was asked for); 0 for a NULL loan or
/// one already sent or discarded.
///
/// # Safety
/// `loan` is NULL or a loan handle whose publisher is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_loan_len(loan: *const ferry_loan) -> usize {
    guard_value("ferry_loan_len", 0, || {
        // SAFETY: the caller passes a live loan handle or NULL (refused).
        let fields = unsafe { handle("loan", loan) }?.slot.fields();
        Ok(fields.map_or(0, |l| l.len))
    })
}

/// Publishes the loan's message and ends the loan (whatever the outcome: on failure nothing was
/// sent and the room is given back). Under `auto` with subscribers on other hosts, their UDP
/// copy is sent first.
///
/// # Safety
/// `loan` is NULL or a loan handle whose publisher is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_loan_send(loan: *mut ferry_loan) -> ferry_status {
    guard("ferry_loan_send", || {
        // SAFETY: the caller passes a live loan handle or NULL (refused).
        let (_, loan) = unsafe { take(loan) }?;
        Ok(loan.send()?)
    })
}

/// Ends the loan without sending anything (readers step over the room).
///
/// # Safety
/// `loan` is NULL or a loan handle whose publisher is live.
#[no_mangle]
pub unsafe extern "C" fn ferry_loan_discard(loan: *mut ferry_loan) -> ferry_status {
    guard("ferry_loan_discard", || {
        // SAFETY: the caller passes a live loan handle or NULL (refused).
        let (_, loan) = unsafe { take(loan) }?;
        drop(loan);
        Ok(())
    })
}

/// Writes to `*out` the number of subscribers attached (shared memory) or known (UDP).
///
/// # Safety
/// `publisher` is a live publisher; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_publisher_subscriber_count(
    publisher: *mut ferry_publisher,
    out: *mut usize,
) -> ferry_status {
    guard("ferry_publisher_subscriber_count", || {
        // SAFETY: the caller passes a live publisher or NULL (refused), used by this thread
        // alone; no reference to it outlives a call.
        let p = unsafe {
            handle("publisher", publisher)?.publisher("ferry_publisher_subscriber_count")
        }?;
        let count = p.subscriber_count();
        // SAFETY: the caller promises `out` is valid for a write (NULL is refused).
        unsafe { put("out", out, count) }
    })
}

/// Writes to `*out` the largest message this publisher sends, in bytes. Allowed while a loan is
/// outstanding.
///
/// # Safety
/// `publisher` is a live publisher; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_publisher_max_message_size(
    publisher: *const ferry_publisher,
    out: *mut usize,
) -> ferry_status {
    guard("ferry_publisher_max_message_size", || {
        // SAFETY: the caller passes a live publisher or NULL (refused).
        let max = unsafe { handle("publisher", publisher) }?.max_message_size;
        // SAFETY: the caller promises `out` is valid for a write (NULL is refused).
        unsafe { put("out", out, max) }
    })
}
