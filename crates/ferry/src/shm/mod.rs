//! The shared-memory transport: one ring per publisher, a control segment per topic.

pub mod data;
pub mod layout;
pub mod ring;
pub mod segment;
pub mod topic;
mod typed;

mod publisher;
mod subscriber;

pub use publisher::ShmPublisher;
pub use subscriber::ShmSubscriber;

use std::sync::atomic::{AtomicU64, Ordering};

use ring::RingBytes;

/// A ring's bytes in a double mapping: `capacity` bytes from `base`, mapped twice in a row.
pub struct ShmBytes {
    base: *mut u8,
    capacity: u64,
}

// SAFETY: the pointer refers to a shared mapping owned by the same struct that owns this value
// (publisher or subscriber source); access is governed by the ring protocol.
unsafe impl Send for ShmBytes {}

impl ShmBytes {
    /// # Safety
    /// `base` must point at `2 * capacity` mapped bytes that stay mapped while this value lives.
    pub unsafe fn new(base: *mut u8, capacity: u64) -> ShmBytes {
        ShmBytes { base, capacity }
    }

    /// Pointer to ring offset `offset` (< capacity); up to `capacity` bytes follow contiguously.
    pub fn ptr(&self, offset: u64) -> *mut u8 {
        debug_assert!(offset < self.capacity);
        // SAFETY: offset < capacity and the mapping spans 2 * capacity bytes.
        unsafe { self.base.add(offset as usize) }
    }
}

impl RingBytes for ShmBytes {
    /// Whole words, with relaxed atomic stores: a latest reader may be copying them (see `read`).
    #[cfg(test)]
    fn write(&self, offset: u64, src: &[u8]) {
        assert!(offset < self.capacity && src.len() as u64 <= self.capacity);
        assert!(offset % 8 == 0 && src.len() % 8 == 0);
        let dst = self.ptr(offset).cast::<AtomicU64>().cast_const();
        for (i, chunk) in src.chunks_exact(8).enumerate() {
            let word = u64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
            // SAFETY: word `i` lies inside the double mapping (offset < capacity, src.len() <=
            // capacity) and is 8-aligned; the ring protocol gives the writer these bytes
            // exclusively among writers.
            unsafe { &*dst.add(i) }.store(word, Ordering::Relaxed);
        }
    }

    /// Two relaxed loads, as `read` makes (the header of a record a latest reader copies may be
    /// rewritten meanwhile).
    #[inline]
    fn read_header(&self, offset: u64) -> [u8; 16] {
        assert!(offset < self.capacity && offset % 8 == 0);
        let src = self.ptr(offset).cast::<AtomicU64>().cast_const();
        // SAFETY: both words start below `capacity + 8`, inside the double mapping, 8-aligned
        // (offset is, and the mapping is page-aligned); AtomicU64 has u64's layout.
        let (first, second) = unsafe {
            (
                (*src).load(Ordering::Relaxed),
                (*src.add(1)).load(Ordering::Relaxed),
            )
        };
        let mut header = [0u8; 16];
        header[..8].copy_from_slice(&first.to_ne_bytes());
        header[8..].copy_from_slice(&second.to_ne_bytes());
        header
    }

    #[inline]
    fn load_word(&self, offset: u64) -> u64 {
        assert!(offset < self.capacity && offset % 8 == 0);
        // SAFETY: in bounds (checked) and 8-aligned (the mapping is page-aligned); every access
        // to a record's first word while it may change is atomic (the writer's marks and
        // commits, the readers' polls).
        let word = unsafe { &*self.ptr(offset).cast::<AtomicU64>() };
        // Acquire: the trait's contract (pairs with the writer's Release commit).
        word.load(Ordering::Acquire)
    }

    #[inline]
    fn store_word(&self, offset: u64, value: u64, order: Ordering) {
        assert!(offset < self.capacity && offset % 8 == 0);
        // SAFETY: as in `load_word`.
        let word = unsafe { &*self.ptr(offset).cast::<AtomicU64>() };
        // Relaxed or Release as the caller says (it names the pairing).
        word.store(value, order);
    }

    /// Copies with relaxed atomic loads, a word at a time: a latest reader may copy bytes the
    /// writer is rewriting (it checks `reserve` afterwards and throws such a copy away, a seqlock
    /// over positions), and plain loads racing with those writes would be a data race, which the
    /// compiler may assume away. Records start 8-aligned and are padded to 8 bytes, so the last
    /// word read, a partial one, still lies inside the record.
    fn read(&self, offset: u64, dst: &mut [u8]) {
        assert!(offset < self.capacity && dst.len() as u64 <= self.capacity && offset % 8 == 0);
        let src = self.ptr(offset).cast::<AtomicU64>().cast_const();
        let mut chunks = dst.chunks_exact_mut(8);
        let mut i = 0;
        for chunk in &mut chunks {
            // SAFETY: word `i` starts at `offset + 8 i < offset + dst.len()`, inside the double
            // mapping (offset < capacity, dst.len() <= capacity), 8-aligned (offset is, and the
            // mapping is page-aligned); AtomicU64 has u64's layout.
            let word = unsafe { &*src.add(i) }.load(Ordering::Relaxed);
            chunk.copy_from_slice(&word.to_ne_bytes());
            i += 1;
        }
        let tail = chunks.into_remainder();
        if !tail.is_empty() {
            // SAFETY: as above; the word ends at `offset + dst.len()` rounded up to 8, at most
            // `2 * capacity - 8` (offset <= capacity - 8), inside the double mapping.
            let word = unsafe { &*src.add(i) }.load(Ordering::Relaxed);
            let n = tail.len();
            tail.copy_from_slice(&word.to_ne_bytes()[..n]);
        }
    }
}
