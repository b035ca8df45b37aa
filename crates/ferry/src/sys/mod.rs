//! The only module that talks to the operating system: shared-memory objects, mappings, futexes,
//! process liveness and CPU affinity. Everything above it is plain Rust over memory.

pub mod udp;

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;
use std::sync::OnceLock;
use std::time::Duration;

use rustix::fs::Mode;
use rustix::mm::{MapFlags, ProtFlags};

/// Where POSIX shared-memory objects appear as files.
pub const SHM_DIR: &str = "/dev/shm";

pub fn page_size() -> usize {
    rustix::param::page_size()
}

/// A named shared-memory object, open read-write.
pub struct ShmObject {
    fd: OwnedFd,
    name: String,
}

impl ShmObject {
    /// Creates `name` exclusively (fails with `AlreadyExists` if it is there), owner-only by
    /// default, and sizes it.
    pub fn create(name: &str, size: u64, mode: u32) -> io::Result<ShmObject> {
        let fd = rustix::shm::open(
            shm_name(name)?.as_c_str(),
            rustix::shm::OFlags::CREATE | rustix::shm::OFlags::EXCL | rustix::shm::OFlags::RDWR,
            Mode::from_raw_mode(mode),
        )?;
        // The umask may have narrowed the mode; set it exactly as asked.
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
        if let Err(e) = rustix::fs::ftruncate(&fd, size) {
            let _ = rustix::shm::unlink(shm_name(name)?.as_c_str());
            return Err(e.into());
        }
        Ok(ShmObject {
            fd,
            name: name.to_owned(),
        })
    }

    /// Opens an existing object read-write.
    pub fn open(name: &str) -> io::Result<ShmObject> {
        let fd = rustix::shm::open(
            shm_name(name)?.as_c_str(),
            rustix::shm::OFlags::RDWR,
            Mode::empty(),
        )?;
        Ok(ShmObject {
            fd,
            name: name.to_owned(),
        })
    }

    pub fn size(&self) -> io::Result<u64> {
        Ok(rustix::fs::fstat(&self.fd)?.st_size as u64)
    }

    /// The inode, to tell whether the name still refers to this object.
    pub fn inode(&self) -> io::Result<u64> {
        Ok(rustix::fs::fstat(&self.fd)?.st_ino)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }
}

/// The inode the name refers to now, if any.
pub fn shm_inode(name: &str) -> io::Result<Option<u64>> {
    match rustix::fs::stat(format!("{SHM_DIR}/{name}")) {
        Ok(st) => Ok(Some(st.st_ino)),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

pub fn shm_unlink(name: &str) -> io::Result<()> {
    rustix::shm::unlink(shm_name(name)?.as_c_str())?;
    Ok(())
}

/// Names of shared-memory objects that start with `prefix`.
pub fn shm_list(prefix: &str) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(SHM_DIR)? {
        let entry = entry?;
        if let Some(name) = entry.file_name().to_str() {
            if name.starts_with(prefix) {
                names.push(name.to_owned());
            }
        }
    }
    names.sort();
    Ok(names)
}

fn shm_name(name: &str) -> io::Result<CString> {
    if name.is_empty() || name.contains('/') || name.len() > 250 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad shared-memory name",
        ));
    }
    CString::new(format!("/{name}"))
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in shared-memory name"))
}

/// A shared read-write mapping, unmapped on drop.
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Mapping is plain memory; every concurrent access to it goes through atomics or through
// the ring protocol, which decides who may touch which bytes.
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
                obj.fd().as_fd(),
                offset,
            )?
        };
        Ok(Mapping {
            ptr: NonNull::new(ptr.cast()).expect("mmap returned null"),
            len,
        })
    }

    /// Maps `header_len` bytes of header followed by a ring of `ring_len` bytes mapped twice in a
    /// row, so that any record of up to `ring_len` bytes is contiguous in this address space.
    /// Both lengths must be multiples of the page size.
    pub fn map_ring(obj: &ShmObject, header_len: usize, ring_len: usize) -> io::Result<Mapping> {
        let total = header_len + 2 * ring_len;
        // SAFETY: reserving fresh address space aliases nothing.
        let base = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                total,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )?
        };
        let mapping = Mapping {
            ptr: NonNull::new(base.cast()).expect("mmap returned null"),
            len: total,
        };
        let rw = ProtFlags::READ | ProtFlags::WRITE;
        // POPULATE: fault every page in now rather than on the ring's first lap, so the first
        // messages do not pay page faults in the writer and in every reader.
        let flags = MapFlags::SHARED | MapFlags::FIXED | MapFlags::POPULATE;
        // SAFETY: both fixed mappings replace pages inside the reservation made above, which this
        // function owns; nothing else can refer to them yet.
        unsafe {
            rustix::mm::mmap(base, header_len + ring_len, rw, flags, obj.fd(), 0)?;
            rustix::mm::mmap(
                base.cast::<u8>().add(header_len + ring_len).cast(),
                ring_len,
                rw,
                flags,
                obj.fd(),
                header_len as u64,
            )?;
        }
        Ok(mapping)
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

/// Sleeps while `*word == expected`, at most `timeout`. Shared between processes (no
/// FUTEX_PRIVATE_FLAG): the word lives in a shared mapping.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| rustix::thread::futex::Timespec {
        tv_sec: d.as_secs() as i64,
        tv_nsec: d.subsec_nanos() as _,
    });
    // EAGAIN (value changed), EINTR and ETIMEDOUT all mean "look again"; the caller loops.
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

/// A process as the kernel knows it: the pid and its start time in clock ticks since boot. The
/// pair survives PID reuse: a new process with the same pid has a later start time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessId {
    pub pid: u32,
    pub start_time: u64,
}

impl ProcessId {
    pub fn current() -> ProcessId {
        static ME: OnceLock<(u32, u64)> = OnceLock::new();
        // A forked child has another pid: cache per pid.
        let pid = std::process::id();
        let &(cached_pid, start) = ME.get_or_init(|| (pid, start_time_of(pid).unwrap_or(0)));
        if cached_pid == pid {
            ProcessId {
                pid,
                start_time: start,
            }
        } else {
            ProcessId {
                pid,
                start_time: start_time_of(pid).unwrap_or(0),
            }
        }
    }

    /// True while this very process runs (a zombie counts as gone).
    pub fn is_alive(&self) -> bool {
        if self.pid == 0 {
            return false;
        }
        match read_stat(self.pid) {
            Some((state, start)) => state != 'Z' && state != 'X' && start == self.start_time,
            None => false,
        }
    }
}

fn start_time_of(pid: u32) -> Option<u64> {
    read_stat(pid).map(|(_, start)| start)
}

/// Reads the state letter and the start time (field 22) of /proc/PID/stat.
fn read_stat(pid: u32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // `rest` starts at field 3; field 22 is 19 further.
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// This host as far as networking goes: the boot id and the network namespace, hashed. Two
/// network namespaces of one machine are two hosts (their loopback addresses differ).
pub fn host_id() -> u64 {
    static ID: OnceLock<u64> = OnceLock::new();
    *ID.get_or_init(|| {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        let netns = rustix::fs::stat("/proc/self/ns/net")
            .map(|s| s.st_ino)
            .unwrap_or(0);
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in boot.trim().bytes().chain(netns.to_le_bytes()) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    })
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
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
