//! The lab's own calls to the operating system: CPU pinning, futexes, the monotonic clock, and
//! the shared-memory objects of its control blocks and raw baselines. The library keeps its own
//! (private) equivalents; the lab measures with these.

use std::io;
use std::os::fd::OwnedFd;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use rustix::fs::Mode;
use rustix::mm::{MapFlags, ProtFlags};
use rustix::shm::OFlags;

/// The page size.
pub fn page_size() -> usize {
    rustix::param::page_size()
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= rustix::thread::CpuSet::MAX_CPU {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "CPU {cpu} is past the {} a CPU set can name",
                rustix::thread::CpuSet::MAX_CPU
            ),
        ));
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> usize {
    rustix::thread::sched_getcpu()
}

/// Monotonic nanoseconds (CLOCK_MONOTONIC), for timestamps shared between processes.
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps while `*word == expected`, at most `timeout`. Shared between processes (no
/// FUTEX_PRIVATE_FLAG): the word may live in a shared mapping. Returns on a wake, a timeout, a
/// signal or a changed value alike: the caller looks again.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| rustix::thread::futex::Timespec {
        tv_sec: d.as_secs() as i64,
        tv_nsec: d.subsec_nanos() as _,
    });
    let _ = rustix::thread::futex::wait(
        word,
        rustix::thread::futex::Flags::empty(),
        expected,
        ts.as_ref(),
    );
}

/// Wakes every thread sleeping on `word`, in any process.
pub fn futex_wake(word: &AtomicU32) {
    let _ =
        rustix::thread::futex::wake(word, rustix::thread::futex::Flags::empty(), i32::MAX as u32);
}

/// A named POSIX shared-memory object, open read-write.
pub struct ShmObject {
    fd: OwnedFd,
}

impl ShmObject {
    /// Creates `name` exclusively (`AlreadyExists` if it is there) with exactly `mode`, and gives
    /// it `size` bytes of real memory now (a full /dev/shm fails here, not with SIGBUS later).
    pub fn create(name: &str, size: u64, mode: u32) -> io::Result<ShmObject> {
        let fd = rustix::shm::open(
            name,
            OFlags::CREATE | OFlags::EXCL | OFlags::RDWR,
            Mode::from_raw_mode(mode),
        )?;
        // The umask may have narrowed the mode; set it exactly as asked.
        let sized = rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))
            .map_err(io::Error::from)
            .and_then(|()| reserve(&fd, size));
        if let Err(e) = sized {
            let _ = shm_unlink(name);
            return Err(e);
        }
        Ok(ShmObject { fd })
    }

    /// Opens an existing object read-write.
    pub fn open(name: &str) -> io::Result<ShmObject> {
        let fd = rustix::shm::open(name, OFlags::RDWR, Mode::empty())?;
        Ok(ShmObject { fd })
    }

    pub fn size(&self) -> io::Result<u64> {
        Ok(rustix::fs::fstat(&self.fd)?.st_size as u64)
    }
}

/// Sizes a fresh object to `size` bytes with its pages allocated now (`fallocate`; a plain
/// `ftruncate` where the file system lacks it).
fn reserve(fd: &OwnedFd, size: u64) -> io::Result<()> {
    if size > 0 {
        loop {
            match rustix::fs::fallocate(fd, rustix::fs::FallocateFlags::empty(), 0, size) {
                Ok(()) => return Ok(()),
                // tmpfs gives up on a pending signal and frees what it allocated: try again.
                Err(rustix::io::Errno::INTR) => continue,
                Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::NOSYS) => break,
                Err(e) => return Err(e.into()),
            }
        }
    }
    rustix::fs::ftruncate(fd, size)?;
    Ok(())
}

/// Removes the name of a shared-memory object.
pub fn shm_unlink(name: &str) -> io::Result<()> {
    rustix::shm::unlink(name)?;
    Ok(())
}

/// A shared read-write mapping, unmapped on drop.
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Mapping is plain memory; the lab touches it only through atomics, or through the
// baseline protocols that decide which side may touch which bytes.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `obj` from `offset`.
    pub fn map(obj: &ShmObject, offset: u64, len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping at an address of the kernel's choosing aliases nothing.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &obj.fd,
                offset,
            )?
        };
        Ok(Mapping {
            ptr: NonNull::new(ptr.cast()).expect("mmap returned null"),
            len,
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe a mapping this value owns; nothing borrows it past its life.
        unsafe {
            let _ = rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn an_object_is_created_mapped_and_removed() {
        let name = format!("ferry-lab-os.{}", std::process::id());
        let page = page_size();
        let obj = ShmObject::create(&name, page as u64, 0o600).unwrap();
        assert_eq!(obj.size().unwrap(), page as u64);
        assert_eq!(
            ShmObject::create(&name, 1, 0o600).err().map(|e| e.kind()),
            Some(io::ErrorKind::AlreadyExists)
        );
        let a = Mapping::map(&obj, 0, page).unwrap();
        let b = Mapping::map(&ShmObject::open(&name).unwrap(), 0, page).unwrap();
        shm_unlink(&name).unwrap();
        // SAFETY: both mappings are `page` bytes long and page-aligned; only atomics touch them.
        let (wa, wb) = unsafe {
            (
                &*a.as_ptr().cast::<AtomicU32>(),
                &*b.as_ptr().cast::<AtomicU32>(),
            )
        };
        wa.store(7, Ordering::Relaxed);
        assert_eq!(wb.load(Ordering::Relaxed), 7, "both map the same memory");
        // A value other than the expected one returns at once.
        futex_wait(wb, 8, Some(Duration::from_secs(5)));
        futex_wake(wa);
        assert!(ShmObject::open(&name).is_err(), "the name is gone");
    }

    #[test]
    fn a_thread_pinned_to_a_cpu_runs_there() {
        let cpu = current_cpu();
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            assert_eq!(current_cpu(), cpu);
        })
        .join()
        .unwrap();
        assert!(monotonic_ns() > 0);
    }

    /// A CPU number past what a CPU set names (one from another machine's request) is an
    /// error, not a panic.
    #[test]
    fn a_cpu_past_the_set_is_an_error() {
        let e = pin_current_thread(rustix::thread::CpuSet::MAX_CPU).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(pin_current_thread(usize::MAX).is_err());
    }
}
