//! Creating and opening ferry segments, with the header checks that refuse foreign, truncated or
//! other-version segments.

use std::io;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::layout::{SegmentHeader, LAYOUT_VERSION};
use crate::sys::{self, Mapping, ObjectStat, ShmObject};
use crate::Error;

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

/// Refuses a segment that another user owns: whoever owns it can write anything into it.
pub fn check_owner(segment: &str, owner: u32, me: u32) -> Result<(), Error> {
    if owner != me {
        return Err(Error::NotOwner {
            segment: segment.to_owned(),
            owner,
            me,
        });
    }
    Ok(())
}

/// Checks what a name turned out to be: a regular file of this process's user.
pub fn check_file(segment: &str, stat: &ObjectStat, me: u32) -> Result<(), Error> {
    if !stat.regular {
        return Err(Error::NotAFile {
            segment: segment.to_owned(),
            what: if stat.symlink {
                "a symbolic link"
            } else {
                "a FIFO, a socket or a device"
            },
        });
    }
    check_owner(segment, stat.uid, me)
}

/// The error for a failed creation (`ShmObject::create`) of `name` with `bytes` bytes: a full
/// /dev/shm is `NoSpace`.
pub fn create_error(name: &str, bytes: u64, e: io::Error) -> Error {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        return Error::NoSpace {
            segment: name.to_owned(),
            bytes,
        };
    }
    Error::io(format!("create shared memory {name} ({bytes} bytes)"), e)
}

/// Why a name that could not be created exclusively is not ours to use, if that is why:
/// a symbolic link or another kind of file, or a file of another user.
pub fn explain_existing(name: &str) -> Option<Error> {
    let stat = sys::shm_lstat(name).ok()??;
    check_file(name, &stat, sys::effective_uid()).err()
}

/// Opens an existing segment and checks it, waiting a bounded time for a creator to finish.
/// A segment whose creator never finished is stale: it is removed and `NotFound` returned.
/// A symbolic link is never followed, and a segment of another user is refused before a byte of
/// it is read.
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
            Err(e) if sys::is_symlink_error(&e) => {
                return Err(Error::NotAFile {
                    segment: name.to_owned(),
                    what: "a symbolic link",
                })
            }
            Err(e) => return Err(Error::io(format!("open shared memory {name}"), e)),
        };
        let stat = obj
            .stat()
            .map_err(|e| Error::io(format!("fstat {name}"), e))?;
        check_file(name, &stat, sys::effective_uid())?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_of_another_user_is_refused_with_its_owner_named() {
        assert!(check_owner("ferry.d.t", 1000, 1000).is_ok());
        let e = check_owner("ferry.d.t", 65534, 1000).unwrap_err();
        assert!(
            matches!(
                e,
                Error::NotOwner {
                    owner: 65534,
                    me: 1000,
                    ..
                }
            ),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(text.contains("user id 65534"), "{text}");
        assert!(text.contains("another domain"), "{text}");
    }

    #[test]
    fn only_a_regular_file_of_this_user_passes() {
        let file = |uid, regular, symlink| ObjectStat {
            uid,
            regular,
            symlink,
            size: 4096,
            inode: 1,
        };
        assert!(check_file("s", &file(7, true, false), 7).is_ok());
        for (symlink, what) in [
            (true, "a symbolic link"),
            (false, "a FIFO, a socket or a device"),
        ] {
            let e = check_file("s", &file(7, false, symlink), 7).unwrap_err();
            assert!(matches!(e, Error::NotAFile { .. }), "{e:?}");
            assert!(
                e.to_string().contains(&format!("is {what}, not a regular")),
                "{e}"
            );
        }
        assert!(matches!(
            check_file("s", &file(8, true, false), 7),
            Err(Error::NotOwner { owner: 8, .. })
        ));
    }

    #[test]
    fn a_fifo_or_a_link_at_a_segments_name_is_refused_for_what_it_is() {
        let fifo = format!("ferry-unit.{}.fifo", std::process::id());
        let path = format!("{}/{fifo}", sys::SHM_DIR);
        rustix::fs::mkfifoat(rustix::fs::CWD, path.as_str(), rustix::fs::Mode::RWXU).unwrap();
        let opened = open_checked(&fifo, 1, 4096).map(|_| ());
        let explained = explain_existing(&fifo);
        let _ = sys::shm_unlink(&fifo);
        let e = opened.unwrap_err();
        assert!(e.to_string().contains("is a FIFO"), "{e}");
        assert!(
            matches!(explained, Some(Error::NotAFile { .. })),
            "{explained:?}"
        );

        let link = format!("ferry-unit.{}.link", std::process::id());
        std::os::unix::fs::symlink("/nonexistent", format!("{}/{link}", sys::SHM_DIR)).unwrap();
        let explained = explain_existing(&link);
        let _ = sys::shm_unlink(&link);
        let e = explained.expect("a link is not ours to use");
        assert!(e.to_string().contains("is a symbolic link"), "{e}");
    }

    #[test]
    fn a_full_dev_shm_is_no_space_naming_the_size() {
        let e = create_error(
            "ferry.d.t@1",
            1 << 20,
            io::Error::from_raw_os_error(libc::ENOSPC),
        );
        assert!(matches!(e, Error::NoSpace { bytes: 1048576, .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains("/dev/shm") && text.contains("1048576"),
            "{text}"
        );
        let other = create_error("x", 1, io::Error::from_raw_os_error(libc::EACCES));
        assert!(matches!(other, Error::Io { .. }), "{other:?}");
    }
}
