//! The one place that chooses between std's atomics and loom's.
//!
//! Everything the ring protocol touches concurrently comes from here, so `--cfg loom` model-checks
//! the same algorithm that runs in shared memory. Futex words are std atomics (the kernel needs
//! real addresses) and live outside the modelled structures.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// A hint inside a busy-wait loop; under loom it lets other modelled threads run.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Keeps a value on its own pair of cache lines (128 bytes: adjacent-line prefetchers pull lines
/// in pairs on x86), so that a writer's hot word never shares a line with a reader's.
#[repr(C, align(128))]
#[derive(Default)]
pub struct Padded<T>(pub T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}
