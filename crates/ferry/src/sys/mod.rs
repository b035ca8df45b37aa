//! The only module that talks to the operating system: shared-memory objects, mappings, futexes,
//! process liveness, clocks and (sys::udp) sockets. Everything above it is plain Rust over memory.

pub mod udp;

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;
use std::sync::OnceLock;
use std::time::Duration;

use rustix::fs::{Mode, OFlags};
use rustix::mm::{MapFlags, ProtFlags};

/// Where POSIX shared-memory objects appear as files.
pub const SHM_DIR: &str = "/dev/shm";

/// 64 bits from the OS's random source.
pub fn random_u64() -> io::Result<u64> {
    let mut b = [0u8; 8];
    let mut filled = 0;
    while filled < b.len() {
        match rustix::rand::getrandom(&mut b[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(u64::from_le_bytes(b))
}

pub fn page_size() -> usize {
    rustix::param::page_size()
}

/// A named shared-memory object, open read-write.
pub struct ShmObject {
    fd: OwnedFd,
    name: String,
}

/// What `fstat` says about an open shared-memory object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectStat {
    /// The owner's user id.
    pub uid: u32,
    /// A regular file (not a FIFO, socket or device).
    pub regular: bool,
    /// A symbolic link (only `shm_lstat` can see one).
    pub symlink: bool,
    pub size: u64,
    pub inode: u64,
}

impl ShmObject {
    /// Creates `name` exclusively (fails with `AlreadyExists` if it is there, a symbolic link
    /// included), owner-only by default, and gives it `size` bytes of real memory now
    /// (`fallocate`): a full /dev/shm fails here with `ENOSPC` instead of killing the process
    /// with SIGBUS when it first touches a page.
    pub fn create(name: &str, size: u64, mode: u32) -> io::Result<ShmObject> {
        let fd = rustix::fs::open(
            shm_path(name)?,
            OFlags::CREATE | OFlags::EXCL | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )?;
        let obj = ShmObject {
            fd,
            name: name.to_owned(),
        };
        // The umask may have narrowed the mode; set it exactly as asked.
        let sized = rustix::fs::fchmod(&obj.fd, Mode::from_raw_mode(mode))
            .map_err(io::Error::from)
            .and_then(|()| reserve(&obj.fd, size));
        if let Err(e) = sized {
            let _ = shm_unlink(name);
            return Err(e);
        }
        Ok(obj)
    }

    /// Opens an existing object read-write. A symbolic link at the name is never followed: it
    /// fails with `ELOOP` (`sys::is_symlink_error`).
    pub fn open(name: &str) -> io::Result<ShmObject> {
        let fd = rustix::fs::open(
            shm_path(name)?,
            OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(ShmObject {
            fd,
            name: name.to_owned(),
        })
    }

    pub fn size(&self) -> io::Result<u64> {
        Ok(self.stat()?.size)
    }

    /// The inode, to tell whether the name still refers to this object.
    pub fn inode(&self) -> io::Result<u64> {
        Ok(self.stat()?.inode)
    }

    /// Owner, type, size and inode of the open object.
    pub fn stat(&self) -> io::Result<ObjectStat> {
        Ok(ObjectStat::from(&rustix::fs::fstat(&self.fd)?))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Holds a shared lock on byte `at` of the object (an open-file-description lock, which
    /// needs no data there: `at` may lie past its end) until `unlock_byte` or until this object
    /// is closed, which the kernel does when its process ends however it ends. Whether another
    /// open holds one is seen by `byte_locked` from any process that opens the object, whatever
    /// its PID namespace.
    pub fn lock_byte(&self, at: u64) -> io::Result<()> {
        self.byte_lock(libc::F_OFD_SETLK, libc::F_RDLCK, at)
            .map(drop)
    }

    /// Lets go of the lock `lock_byte` took.
    pub fn unlock_byte(&self, at: u64) -> io::Result<()> {
        self.byte_lock(libc::F_OFD_SETLK, libc::F_UNLCK, at)
            .map(drop)
    }

    /// Whether another open of the object holds a lock on byte `at` (this open's own locks do
    /// not count).
    pub fn byte_locked(&self, at: u64) -> io::Result<bool> {
        let fl = self.byte_lock(libc::F_OFD_GETLK, libc::F_WRLCK, at)?;
        Ok(i32::from(fl.l_type) != libc::F_UNLCK)
    }

    /// Whether another open of the object holds a lock on any byte from `at` on.
    pub fn locked_from(&self, at: u64) -> io::Result<bool> {
        // A length of 0: to the largest offset there is.
        let fl = self.lock_range(libc::F_OFD_GETLK, libc::F_WRLCK, at, 0)?;
        Ok(i32::from(fl.l_type) != libc::F_UNLCK)
    }

    fn byte_lock(&self, cmd: i32, kind: i32, at: u64) -> io::Result<libc::flock> {
        self.lock_range(cmd, kind, at, 1)
    }

    fn lock_range(&self, cmd: i32, kind: i32, at: u64, len: i64) -> io::Result<libc::flock> {
        use std::os::fd::AsRawFd;
        let start = i64::try_from(at).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: `flock` is plain data, for which all-zero is a valid value (l_pid must be 0 for
        // OFD locks).
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = kind as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = start;
        fl.l_len = len;
        // SAFETY: the descriptor is open for as long as `self`, and `fl` is a valid `flock` that
        // fcntl reads (and, for GETLK, writes) within this call.
        let r = unsafe { libc::fcntl(self.fd.as_raw_fd(), cmd, &mut fl) };
        if r == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(fl)
    }

    /// Takes an exclusive advisory lock on the object without waiting: `Ok(false)` when another
    /// open of it holds one. The kernel lets go when this object is closed or its process ends
    /// (a `kill -9` included), so a lock never outlives its holder.
    pub fn try_lock(&self) -> io::Result<bool> {
        match rustix::fs::flock(
            &self.fd,
            rustix::fs::FlockOperation::NonBlockingLockExclusive,
        ) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

impl From<&rustix::fs::Stat> for ObjectStat {
    fn from(st: &rustix::fs::Stat) -> ObjectStat {
        let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
        ObjectStat {
            uid: st.st_uid,
            regular: kind == rustix::fs::FileType::RegularFile,
            symlink: kind == rustix::fs::FileType::Symlink,
            size: st.st_size as u64,
            inode: st.st_ino,
        }
    }
}

/// Sizes a fresh object to `size` bytes with pages reserved now. `fallocate` on tmpfs allocates
/// (and counts against the file system's size) every page, and extends the file; a file system
/// without it gets a plain `ftruncate`.
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

/// True for the error `ShmObject::open` gives when the name is a symbolic link.
pub fn is_symlink_error(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

/// The effective user id of this process: the owner of what it creates.
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The inode the name refers to now, if any (a symbolic link's own inode: links are not
/// followed).
pub fn shm_inode(name: &str) -> io::Result<Option<u64>> {
    match rustix::fs::lstat(shm_path(name)?) {
        Ok(st) => Ok(Some(st.st_ino)),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Owner, type, size and inode of whatever has the name, without following a symbolic link;
/// `None` if nothing has it.
pub fn shm_lstat(name: &str) -> io::Result<Option<ObjectStat>> {
    match rustix::fs::lstat(shm_path(name)?) {
        Ok(st) => Ok(Some(ObjectStat::from(&st))),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Removes the name (a symbolic link itself, never its target).
pub fn shm_unlink(name: &str) -> io::Result<()> {
    rustix::fs::unlink(shm_path(name)?)?;
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

/// The file of shared-memory object `name` (what `shm_open` would use, without its following
/// of symbolic links).
fn shm_path(name: &str) -> io::Result<CString> {
    if name.is_empty() || name.contains('/') || name.len() > 250 || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad shared-memory name",
        ));
    }
    CString::new(format!("{SHM_DIR}/{name}"))
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in shared-memory name"))
}

/// A shared mapping (read-write, or read-only for a look), unmapped on drop.
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
        // POPULATE: fault every page in now rather than on the ring's first lap, so the first
        // messages do not pay page faults in the writer and in every reader.
        let flags = MapFlags::SHARED | MapFlags::FIXED | MapFlags::POPULATE;
        Mapping::map_ring_with(
            obj,
            header_len,
            ring_len,
            ProtFlags::READ | ProtFlags::WRITE,
            flags,
        )
    }

    /// As [`Mapping::map_ring`], read-only and with no page faulted in ahead: for a look at a
    /// few records of a ring this process never writes or joins (`admin::last_messages`).
    pub fn map_ring_to_look(
        obj: &ShmObject,
        header_len: usize,
        ring_len: usize,
    ) -> io::Result<Mapping> {
        let flags = MapFlags::SHARED | MapFlags::FIXED;
        Mapping::map_ring_with(obj, header_len, ring_len, ProtFlags::READ, flags)
    }

    fn map_ring_with(
        obj: &ShmObject,
        header_len: usize,
        ring_len: usize,
        prot: ProtFlags,
        flags: MapFlags,
    ) -> io::Result<Mapping> {
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
        // SAFETY: both fixed mappings replace pages inside the reservation made above, which this
        // function owns; nothing else can refer to them yet.
        unsafe {
            rustix::mm::mmap(base, header_len + ring_len, prot, flags, obj.fd(), 0)?;
            rustix::mm::mmap(
                base.cast::<u8>().add(header_len + ring_len).cast(),
                ring_len,
                prot,
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

    #[cfg(any(test, feature = "internals"))]
    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(any(test, feature = "internals"))]
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

/// `futex_waitv` is not in this kernel (before Linux 5.16).
pub(crate) struct NoWaitv;

/// Sleeps until one of `words` no longer holds the value given beside it (or was rung), or
/// `timeout` passes, or a signal comes; the caller looks again in every case. `Err` when the
/// kernel has no `futex_waitv` (before Linux 5.16).
pub(crate) fn futex_waitv(
    words: &[(*const AtomicU32, u32)],
    timeout: Option<Duration>,
) -> Result<(), NoWaitv> {
    use rustix::thread::futex::{Wait, WaitFlags, WaitPtr, WaitvFlags};
    let mut waits = [Wait::new(); 129];
    let n = words.len().min(waits.len());
    for (w, &(word, value)) in waits.iter_mut().zip(words) {
        w.val = u64::from(value);
        w.uaddr = WaitPtr::new(word as *mut std::ffi::c_void);
        w.flags = WaitFlags::SIZE_U32;
    }
    // An absolute time on the monotonic clock.
    let at = timeout.map(|d| {
        let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        let ns = now.tv_nsec as u64 + u64::from(d.subsec_nanos());
        rustix::time::Timespec {
            tv_sec: now
                .tv_sec
                .saturating_add(d.as_secs().min(i64::MAX as u64 / 2) as i64)
                .saturating_add((ns / 1_000_000_000) as i64),
            tv_nsec: (ns % 1_000_000_000) as _,
        }
    });
    match rustix::thread::futex::waitv(
        &waits[..n],
        WaitvFlags::empty(),
        at.as_ref(),
        rustix::time::ClockId::Monotonic,
    ) {
        Err(e) if e == rustix::io::Errno::NOSYS => Err(NoWaitv),
        // Woken, a value that differed already (EAGAIN), the time up, a signal: look again.
        _ => Ok(()),
    }
}

/// Sleeps until one of `fds` (or `extra`) is readable, or `timeout` passes, or a signal comes;
/// calls `readable` with the index of each of `fds` found readable.
pub(crate) fn poll_readable(
    fds: &[std::os::fd::RawFd],
    extra: Option<std::os::fd::RawFd>,
    timeout: Option<Duration>,
    readable: &mut dyn FnMut(usize),
) {
    let mut polls: Vec<libc::pollfd> = fds
        .iter()
        .chain(extra.iter())
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as _,
    });
    // SAFETY: `polls` is a valid array of `polls.len()` pollfd; the timespec, when given, lives
    // on this stack frame; no signal mask is passed.
    let n = unsafe {
        libc::ppoll(
            polls.as_mut_ptr(),
            polls.len() as libc::nfds_t,
            ts.as_ref().map_or(std::ptr::null(), |t| t as *const _),
            std::ptr::null(),
        )
    };
    if n > 0 {
        for (i, p) in polls.iter().take(fds.len()).enumerate() {
            if p.revents != 0 {
                readable(i);
            }
        }
    }
}

/// Wakes every thread sleeping on `word`, in any process.
pub fn futex_wake(word: &AtomicU32) {
    let _ =
        rustix::thread::futex::wake(word, rustix::thread::futex::Flags::empty(), i32::MAX as u32);
}

/// A process as the kernel knows it: the pid, its start time in clock ticks since boot, and the
/// PID namespace the pid belongs to. The pid and start time survive PID reuse: a new process with
/// the same pid has a later start time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessId {
    pub pid: u32,
    pub start_time: u64,
    /// `pid_namespace()` of the process; 0 where it could not be read.
    pub pid_ns: u64,
}

/// What this process can tell about another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    Running,
    /// Ended (or a zombie), or its pid now names another process.
    Gone,
    /// It lives in another PID namespace: its pid names nothing (or something else) in ours, so
    /// whether it runs cannot be told from here.
    Unknown,
}

impl ProcessId {
    pub fn current() -> ProcessId {
        static ME: OnceLock<(u32, u64)> = OnceLock::new();
        // A forked child has another pid: cache per pid.
        let pid = std::process::id();
        let &(cached_pid, start) = ME.get_or_init(|| (pid, start_time_of(pid).unwrap_or(0)));
        ProcessId {
            pid,
            start_time: if cached_pid == pid {
                start
            } else {
                start_time_of(pid).unwrap_or(0)
            },
            pid_ns: pid_namespace(),
        }
    }

    /// Whether this very process runs, as far as this process can see.
    pub fn presence(&self) -> Presence {
        if self.pid_ns != pid_namespace() {
            return Presence::Unknown;
        }
        if self.pid == 0 {
            return Presence::Gone;
        }
        match read_stat(self.pid) {
            Some((state, start)) if state != 'Z' && state != 'X' && start == self.start_time => {
                Presence::Running
            }
            _ => Presence::Gone,
        }
    }

    /// True while this very process runs, as far as this process can see: one of another PID
    /// namespace counts as running (`Presence::Unknown`).
    #[cfg(any(test, feature = "internals"))]
    pub fn is_alive(&self) -> bool {
        self.presence() != Presence::Gone
    }
}

/// This process's PID namespace: the inode of /proc/self/ns/pid (0 if it cannot be read). The
/// pids recorded in shared memory are checked against /proc only by processes of the same
/// namespace.
pub fn pid_namespace() -> u64 {
    static NS: OnceLock<(u32, u64)> = OnceLock::new();
    let read = || {
        rustix::fs::stat("/proc/self/ns/pid")
            .map(|s| s.st_ino)
            .unwrap_or(0)
    };
    // A child forked after unshare(CLONE_NEWPID) lives in another namespace: cache per pid.
    let pid = std::process::id();
    match NS.get_or_init(|| (pid, read())) {
        &(cached_pid, ns) if cached_pid == pid => ns,
        _ => read(),
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

/// This host as ferry sees it: the boot id, the network namespace and the /dev/shm, hashed. Two
/// network namespaces of one machine are two hosts (their loopback addresses differ), and so are
/// two /dev/shm on one network (a container with its own: no directory is shared, so they find
/// each other through UDP discovery, e.g. `FERRY_PEERS=127.0.0.1` on both).
pub fn host_id() -> u64 {
    static ID: OnceLock<u64> = OnceLock::new();
    *ID.get_or_init(|| {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        let netns = rustix::fs::stat("/proc/self/ns/net")
            .map(|s| s.st_ino)
            .unwrap_or(0);
        // Which /dev/shm: a container with a /dev/shm of its own on the host's network shares
        // no directory with the host's processes, so it is another host to them (they find each
        // other over UDP discovery instead of a directory they do not share).
        let shm = rustix::fs::stat("/dev/shm")
            .map(|s| (s.st_dev, s.st_ino))
            .unwrap_or((0, 0));
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in boot
            .trim()
            .bytes()
            .chain(netns.to_le_bytes())
            .chain(shm.0.to_le_bytes())
            .chain(shm.1.to_le_bytes())
        {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    })
}

/// Monotonic nanoseconds (CLOCK_MONOTONIC), for timestamps shared between processes.
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    fn unique(what: &str) -> String {
        format!("ferry-unit.{}.{what}", std::process::id())
    }

    #[test]
    fn a_created_object_has_its_pages_reserved() {
        let name = unique("reserved");
        let size = 1 << 20;
        let obj = ShmObject::create(&name, size, 0o600).unwrap();
        let st = rustix::fs::fstat(obj.fd()).unwrap();
        let _ = shm_unlink(&name);
        assert_eq!(st.st_size as u64, size);
        // ftruncate alone leaves a sparse file (no blocks); fallocate allocates every page.
        assert!(
            st.st_blocks as u64 * 512 >= size,
            "{} blocks of 512 bytes for {size} bytes",
            st.st_blocks
        );
    }

    #[test]
    fn an_object_is_created_mapped_and_removed() {
        let name = unique("mapped");
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
    fn a_process_of_another_pid_namespace_is_unknown_not_gone() {
        let me = ProcessId::current();
        assert_ne!(me.pid_ns, 0, "/proc/self/ns/pid is readable");
        assert_eq!(me.presence(), Presence::Running);
        let elsewhere = ProcessId {
            pid: 0x7FFF_FFF0,
            ..me
        };
        assert_eq!(elsewhere.presence(), Presence::Gone);
        let other_ns = ProcessId {
            pid_ns: me.pid_ns ^ 1,
            ..elsewhere
        };
        assert_eq!(other_ns.presence(), Presence::Unknown);
        assert!(other_ns.is_alive());
    }

    #[test]
    fn a_symbolic_link_is_neither_opened_nor_created_through() {
        let name = unique("link");
        let target = std::env::temp_dir().join(unique("target"));
        std::fs::write(&target, b"keep me").unwrap();
        let _ = shm_unlink(&name);
        std::os::unix::fs::symlink(&target, format!("{SHM_DIR}/{name}")).unwrap();
        let opened = ShmObject::open(&name).map(|_| ());
        let created = ShmObject::create(&name, 4096, 0o600).map(|_| ());
        let left = std::fs::read(&target).unwrap();
        let _ = shm_unlink(&name);
        let _ = std::fs::remove_file(&target);
        let e = opened.unwrap_err();
        assert!(is_symlink_error(&e), "{e}");
        assert_eq!(created.unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(left, b"keep me", "the link's target is untouched");
    }
}
