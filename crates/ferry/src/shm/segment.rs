//! Creating and opening ferry segments, with the header checks that refuse foreign, truncated or
//! other-version segments.

use std::io;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::layout::{SegmentHeader, LAYOUT_VERSION};
use crate::sys::{self, Mapping, ShmObject};
use crate::Error;

/// Owner read/write only, unless the user widens it (FERRY_SHM_MODE, octal).
pub fn segment_mode() -> u32 {
    std::env::var("FERRY_SHM_MODE")
        .ok()
        .and_then(|m| u32::from_str_radix(m.trim_start_matches("0o"), 8).ok())
        .filter(|m| *m & !0o666 == 0)
        .unwrap_or(0o600)
}

/// A mapped segment whose header part is a `T`.
pub struct Segment<T> {
    pub obj: ShmObject,
    pub map: Mapping,
    pub header_bytes: usize,
    _t: PhantomData<T>,
}

impl<T> Segment<T> {
    pub fn block(&self) -> &T {
        // SAFETY: the mapping is at least header_bytes >= size_of::<T>() long, page-aligned, and T
        // is a repr(C) type of atomics that is valid for any bytes it can hold.
        unsafe { &*self.map.as_ptr().cast::<T>() }
    }

    pub fn name(&self) -> &str {
        self.obj.name()
    }
}

fn header(map: &Mapping) -> &SegmentHeader {
    // SAFETY: the caller mapped at least size_of::<SegmentHeader>() bytes, page-aligned.
    unsafe { &*map.as_ptr().cast::<SegmentHeader>() }
}

/// What a creator fills in before the segment becomes visible.
pub fn publish_header(map: &Mapping, magic: u64, header_bytes: usize, total: u64) {
    let h = header(map);
    h.version.store(LAYOUT_VERSION, Ordering::Relaxed);
    h.header_bytes.store(header_bytes as u64, Ordering::Relaxed);
    h.total_bytes.store(total, Ordering::Relaxed);
    // Release pairs with the Acquire load in `check_header`: an opener that sees the magic sees
    // every field the creator wrote before.
    h.magic.store(magic, Ordering::Release);
}

/// The outcome of looking at a segment's header.
pub enum Checked {
    Ready {
        total: u64,
    },
    /// Magic still zero: the creator has not finished.
    Initializing,
}

/// Checks the header of an opened segment against what this build expects.
pub fn check_header(obj: &ShmObject, magic: u64, header_bytes: usize) -> Result<Checked, Error> {
    let seg = || obj.name().to_owned();
    let size = obj
        .size()
        .map_err(|e| Error::io(format!("fstat {}", obj.name()), e))?;
    if size < std::mem::size_of::<SegmentHeader>() as u64 {
        if size == 0 {
            return Ok(Checked::Initializing);
        }
        return Err(Error::Truncated {
            segment: seg(),
            size,
            expected: header_bytes as u64,
        });
    }
    let map = Mapping::map(obj, 0, std::mem::size_of::<SegmentHeader>())
        .map_err(|e| Error::io(format!("mmap {}", obj.name()), e))?;
    let h = header(&map);
    // Acquire pairs with the Release store in `publish_header`.
    let found = h.magic.load(Ordering::Acquire);
    if found == 0 {
        return Ok(Checked::Initializing);
    }
    if found != magic {
        return Err(Error::Foreign {
            segment: seg(),
            found,
        });
    }
    let version = h.version.load(Ordering::Relaxed);
    if version != LAYOUT_VERSION {
        return Err(Error::Version {
            segment: seg(),
            found: version,
            expected: LAYOUT_VERSION,
        });
    }
    let hb = h.header_bytes.load(Ordering::Relaxed);
    if hb != header_bytes as u64 {
        return Err(Error::Layout {
            segment: seg(),
            detail: format!("header of {hb} bytes, this build expects {header_bytes}"),
        });
    }
    let total = h.total_bytes.load(Ordering::Relaxed);
    if total != size || total < header_bytes as u64 {
        return Err(Error::Truncated {
            segment: seg(),
            size,
            expected: total.max(header_bytes as u64),
        });
    }
    Ok(Checked::Ready { total })
}

/// Opens an existing segment and checks it, waiting a bounded time for a creator to finish.
/// A segment whose creator never finished is stale: it is removed and `NotFound` returned.
pub fn open_checked(
    name: &str,
    magic: u64,
    header_bytes: usize,
) -> Result<Option<(ShmObject, u64)>, Error> {
    let started = Instant::now();
    loop {
        let obj = match ShmObject::open(name) {
            Ok(o) => o,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(format!("open shared memory {name}"), e)),
        };
        match check_header(&obj, magic, header_bytes)? {
            Checked::Ready { total, .. } => return Ok(Some((obj, total))),
            Checked::Initializing => {
                if started.elapsed() > Duration::from_secs(1) {
                    // A creator that has not finished in a second died half-way.
                    let _ = sys::shm_unlink(name);
                    return Ok(None);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

impl<T> Segment<T> {
    pub fn from_parts(obj: ShmObject, map: Mapping, header_bytes: usize) -> Segment<T> {
        Segment {
            obj,
            map,
            header_bytes,
            _t: PhantomData,
        }
    }
}
