//! The slot in which an endpoint keeps the one thing it lends at a time (a publisher's loan, a
//! subscriber's sample, a server's request, a client's response), with the fields C reads of it,
//! and the handle C holds of it (`ferry_loan`, `ferry_sample`, `ferry_request`,
//! `ferry_response`).
//!
//! What a slot holds borrows its endpoint, kept as `'static` under the rules each endpoint's
//! module states; the slot itself only keeps it and hands it back. It is used by one thread at a
//! time (`UnsafeCell` makes it neither `Sync` nor shareable across threads), and no reference
//! into it outlives a call of its own methods.

use std::cell::{Cell, UnsafeCell};

use crate::args::{handle, put};
use crate::status::{guard_value, Failure};

/// What a slot holds: the fields C reads of it, read once when it arrives (`fields` must not
/// touch the slot: it runs while the slot lends it out), and how C's calls name it.
pub(crate) trait Lent {
    type Fields: Copy;
    /// The name of its handle's parameter (`sample`).
    const WHAT: &'static str;
    /// Why a call on its handle is refused once it has ended (`this sample was already
    /// released`).
    const ENDED: &'static str;

    fn fields(&mut self) -> Self::Fields;
}

/// The one thing an endpoint lends, if any, and its fields.
pub(crate) struct Slot<T: Lent> {
    held: UnsafeCell<Option<T>>,
    /// `held`'s fields; `None` when it is empty.
    fields: Cell<Option<T::Fields>>,
}

impl<T: Lent> Slot<T> {
    pub(crate) fn new() -> Slot<T> {
        Slot {
            held: UnsafeCell::new(None),
            fields: Cell::new(None),
        }
    }

    pub(crate) fn holding(&self) -> bool {
        // SAFETY: one thread at a time, and no reference into the slot outlives a method of it.
        unsafe { (*self.held.get()).is_some() }
    }

    /// The fields of what the slot holds; `None` when it is empty.
    pub(crate) fn fields(&self) -> Option<T::Fields> {
        self.fields.get()
    }

    /// Puts `value` in the slot (which its endpoint found empty) and reads its fields.
    pub(crate) fn fill(&self, value: T) {
        // SAFETY: one thread at a time, no reference into the slot outlives a method of it, and
        // `Lent::fields` does not touch the slot.
        let held = unsafe { &mut *self.held.get() }.insert(value);
        self.fields.set(Some(held.fields()));
    }

    /// Empties the slot.
    pub(crate) fn take(&self) -> Option<T> {
        self.fields.set(None);
        // SAFETY: one thread at a time, and no reference into the slot outlives a method of it.
        unsafe { &mut *self.held.get() }.take()
    }

    /// The endpoint in `cell`, for a call that is not the lent thing's (`function`): refused
    /// with `refusal` (what is held and how to end it) while the slot holds one, which borrows
    /// the endpoint.
    ///
    /// # Safety
    /// `cell` is the endpoint this slot's content borrows; the handle is used by one thread at
    /// a time, and no reference to the endpoint from an earlier call is live (each call drops
    /// its reference before it returns, except what the slot holds, checked here).
    // The content of an UnsafeCell, handed out under this function's contract.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn endpoint<'a, E>(
        &self,
        cell: &'a UnsafeCell<E>,
        function: &str,
        refusal: &str,
    ) -> Result<&'a mut E, Failure> {
        if self.holding() {
            return Err(Failure::invalid(format!(
                "{refusal} before calling {function}"
            )));
        }
        // SAFETY: nothing the slot holds borrows the endpoint (checked above), and the caller
        // promises that no other reference to it is live.
        Ok(unsafe { &mut *cell.get() })
    }
}

/// A handle C holds of what an endpoint lent: `ferry_loan`, `ferry_sample`, ... It lives inside
/// its endpoint's block.
pub(crate) trait Handle {
    type Lent: Lent;

    fn slot(&self) -> &Slot<Self::Lent>;
}

/// The fields of what the handle `ptr` holds, or why it holds nothing.
///
/// # Safety
/// `ptr` is NULL or a handle whose endpoint is live.
pub(crate) unsafe fn fields<H: Handle>(
    ptr: *const H,
) -> Result<<H::Lent as Lent>::Fields, Failure> {
    // SAFETY: the caller passes a live handle or NULL (refused).
    let h = unsafe { handle(<H::Lent as Lent>::WHAT, ptr) }?;
    h.slot()
        .fields()
        .ok_or_else(|| Failure::invalid(<H::Lent as Lent>::ENDED))
}

/// The body of an accessor of a handle (`ferry_sample_len`, ...): `field` of what the handle
/// `ptr` holds; `fallback` for a NULL handle or one that has ended.
///
/// # Safety
/// `ptr` is NULL or a handle whose endpoint is live.
pub(crate) unsafe fn read<H: Handle, V>(
    function: &str,
    ptr: *const H,
    fallback: V,
    field: impl FnOnce(<H::Lent as Lent>::Fields) -> V,
) -> V {
    // SAFETY: the caller passes a live handle or NULL (refused).
    guard_value(function, fallback, || Ok(field(unsafe { fields(ptr) }?)))
}

/// Takes what the handle `ptr` holds out of its slot (to send, answer or drop it), or says it
/// has ended already; with the handle.
///
/// # Safety
/// `ptr` is NULL or a handle whose endpoint is live during `'a`.
pub(crate) unsafe fn take<'a, H: Handle>(ptr: *const H) -> Result<(&'a H, H::Lent), Failure> {
    // SAFETY: the caller passes a live handle or NULL (refused).
    let h = unsafe { handle(<H::Lent as Lent>::WHAT, ptr) }?;
    let taken = h
        .slot()
        .take()
        .ok_or_else(|| Failure::invalid(<H::Lent as Lent>::ENDED))?;
    Ok((h, taken))
}

/// Puts what an endpoint lent in the slot of its handle and the handle in `*out`.
///
/// # Safety
/// `handle` points into a live endpoint block (derived from the caller's pointer to it, so that
/// it stays valid for as long as the block lives), whose slot is empty; `out` is valid for a
/// write.
pub(crate) unsafe fn lend<H: Handle>(
    handle: *mut H,
    value: H::Lent,
    out: *mut *mut H,
) -> Result<(), Failure> {
    // SAFETY: the caller passes a live handle.
    unsafe { &*handle }.slot().fill(value);
    // SAFETY: the caller promises `out` is valid for a write.
    unsafe { put("out", out, handle) }
}
