//! The shared-memory transport: one ring per publisher, a control segment per topic.

pub mod layout;
pub mod ring;
pub mod segment;
pub mod topic;

mod publisher;
mod subscriber;

pub use publisher::ShmPublisher;
pub use subscriber::ShmSubscriber;

use ring::RingBytes;

/// A ring's bytes in a double mapping: `capacity` bytes from `base`, mapped twice in a row.
pub(crate) struct ShmBytes {
    base: *mut u8,
    capacity: u64,
}

// SAFETY: the pointer refers to a shared mapping owned by the same struct that owns this value
// (publisher or subscriber source); access is governed by the ring protocol.
unsafe impl Send for ShmBytes {}

impl ShmBytes {
    /// # Safety
    /// `base` must point at `2 * capacity` mapped bytes that stay mapped while this value lives.
    pub(crate) unsafe fn new(base: *mut u8, capacity: u64) -> ShmBytes {
        ShmBytes { base, capacity }
    }

    /// Pointer to ring offset `offset` (< capacity); up to `capacity` bytes follow contiguously.
    pub(crate) fn ptr(&self, offset: u64) -> *mut u8 {
        debug_assert!(offset < self.capacity);
        // SAFETY: offset < capacity and the mapping spans 2 * capacity bytes.
        unsafe { self.base.add(offset as usize) }
    }
}

impl RingBytes for ShmBytes {
    fn write(&self, offset: u64, src: &[u8]) {
        assert!(offset < self.capacity && src.len() as u64 <= self.capacity);
        // SAFETY: bounds checked above against the double mapping; the ring protocol gives the
        // writer these bytes exclusively among writers.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr(offset), src.len()) }
    }

    fn load_word(&self, offset: u64) -> u64 {
        assert!(offset < self.capacity && offset % 8 == 0);
        // SAFETY: in bounds (checked) and 8-aligned (the mapping is page-aligned); every access
        // to a record's first word while it may change is atomic (the writer's marks and
        // commits, the readers' polls).
        let word = unsafe { &*self.ptr(offset).cast::<std::sync::atomic::AtomicU64>() };
        // Acquire: the trait's contract (pairs with the writer's Release commit).
        word.load(std::sync::atomic::Ordering::Acquire)
    }

    fn store_word(&self, offset: u64, value: u64, order: std::sync::atomic::Ordering) {
        assert!(offset < self.capacity && offset % 8 == 0);
        // SAFETY: as in `load_word`.
        let word = unsafe { &*self.ptr(offset).cast::<std::sync::atomic::AtomicU64>() };
        // Relaxed or Release as the caller says (it names the pairing).
        word.store(value, order);
    }

    fn read(&self, offset: u64, dst: &mut [u8]) {
        assert!(offset < self.capacity && dst.len() as u64 <= self.capacity);
        // SAFETY: bounds checked above. A latest reader may race with the writer here; it
        // validates the copy against `reserve` afterwards and discards it if it was overwritten.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr(offset), dst.as_mut_ptr(), dst.len()) }
    }
}
