//! The raw shared-memory baselines: the floor of a shared-memory message on this machine.
//!
//! Two processes map one shared-memory object holding, per direction, a flag word on its own
//! 128 bytes and a payload buffer. The sender writes the payload, then stores the message's
//! number in the flag (Release); the receiver waits until the flag shows that number (Acquire)
//! and reads the payload. `raw-spin` waits by spinning on the flag; `raw-futex` sleeps in
//! `futex_wait` on the flag word and the sender calls `futex_wake` after every store.
//!
//! Message `seq` shows as `seq + 1` (mod 2^32) in the flag, so that the zeroed start value means
//! "nothing yet". Each direction's buffer is reused for every message: the ping-pong protocol
//! makes the sender wait for the reply to message `n` before it writes message `n + 1`, so
//! writer and reader never touch a buffer at the same time.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::os::{self, Mapping, ShmObject};

use super::{fill, verify, Dir, Endpoint};
use crate::error::{bail, Context, Result};

/// Where things live in the shared object.
#[derive(Debug, Clone, Copy)]
struct Layout {
    page: usize,
    /// Bytes of one payload buffer, whole pages.
    buffer: usize,
}

/// Offset of the word the peer sets once it has mapped the object.
const READY: usize = 256;

impl Layout {
    fn new(max_size: usize) -> Layout {
        let page = os::page_size();
        Layout {
            page,
            buffer: max_size.max(1).div_ceil(page) * page,
        }
    }

    /// Each flag on its own 128 bytes (a pair of cache lines).
    fn flag(&self, dir: Dir) -> usize {
        match dir {
            Dir::Ping => 0,
            Dir::Pong => 128,
        }
    }

    fn buffer(&self, dir: Dir) -> usize {
        match dir {
            Dir::Ping => self.page,
            Dir::Pong => self.page + self.buffer,
        }
    }

    fn total(&self) -> usize {
        self.page + 2 * self.buffer
    }
}

fn flag_value(seq: u64) -> u32 {
    (seq as u32).wrapping_add(1)
}

/// The shared object, mapped. The creator unlinks the name once the peer has mapped it (or when
/// dropped, if that never happened).
pub struct RawChannel {
    map: Mapping,
    layout: Layout,
    /// The name while it is still linked and ours to unlink.
    name: Option<String>,
}

impl RawChannel {
    /// Creates the object `name` for payloads of up to `max_size` bytes.
    pub fn create(name: &str, max_size: usize) -> Result<RawChannel> {
        let layout = Layout::new(max_size);
        let size = layout.total() as u64;
        let obj = match ShmObject::create(name, size, 0o600) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // Left by an earlier run that had the same process id and was killed.
                let _ = os::shm_unlink(name);
                ShmObject::create(name, size, 0o600)
            }
            r => r,
        }
        .context(format!("cannot create shared memory {name}"))?;
        let map = Mapping::map(&obj, 0, layout.total())
            .context(format!("cannot map shared memory {name}"))?;
        Ok(RawChannel {
            map,
            layout,
            name: Some(name.to_owned()),
        })
    }

    /// Opens the object the main process made, and tells it so.
    pub fn open(name: &str, max_size: usize) -> Result<RawChannel> {
        let layout = Layout::new(max_size);
        let obj = ShmObject::open(name).context(format!("cannot open shared memory {name}"))?;
        let size = obj.size()?;
        if size != layout.total() as u64 {
            bail!(
                "shared memory {name} has {size} bytes, expected {}",
                layout.total()
            );
        }
        let map = Mapping::map(&obj, 0, layout.total())
            .context(format!("cannot map shared memory {name}"))?;
        let chan = RawChannel {
            map,
            layout,
            name: None,
        };
        // Release pairs with the Acquire load in `peer_ready`: the main process unlinks the name
        // only after our mapping exists.
        chan.word(READY).store(1, Ordering::Release);
        Ok(chan)
    }

    /// Whether the peer has mapped the object.
    pub fn peer_ready(&self) -> bool {
        // Acquire pairs with the Release store in `open`.
        self.word(READY).load(Ordering::Acquire) == 1
    }

    /// Removes the name (both processes keep their mappings).
    pub fn unlink(&mut self) -> Result<()> {
        if let Some(name) = self.name.take() {
            os::shm_unlink(&name).context(format!("cannot remove shared memory {name}"))?;
        }
        Ok(())
    }

    fn word(&self, offset: usize) -> &AtomicU32 {
        debug_assert!(offset % 4 == 0 && offset + 4 <= self.layout.page);
        // SAFETY: `offset` lies in the first page of the mapping, which is page-aligned, so the
        // pointer is 4-byte aligned and in bounds; the mapping lives as long as `self`; an
        // AtomicU32 has the layout of a u32 and may be shared between processes (lock-free).
        unsafe { &*self.map.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    /// Becomes one end of the channel: the main process sends pings, the peer pongs.
    pub fn endpoint(self, out: Dir, futex: bool) -> RawEnd {
        let inp = match out {
            Dir::Ping => Dir::Pong,
            Dir::Pong => Dir::Ping,
        };
        RawEnd {
            chan: self,
            out,
            inp,
            futex,
        }
    }
}

impl Drop for RawChannel {
    fn drop(&mut self) {
        if let Some(name) = self.name.take() {
            let _ = os::shm_unlink(&name);
        }
    }
}

/// One end of a raw channel.
pub struct RawEnd {
    chan: RawChannel,
    out: Dir,
    inp: Dir,
    futex: bool,
}

impl RawEnd {
    fn flag(&self, dir: Dir) -> &AtomicU32 {
        self.chan.word(self.chan.layout.flag(dir))
    }

    fn buffer_ptr(&self, dir: Dir, len: usize) -> Result<*mut u8> {
        if len > self.chan.layout.buffer {
            bail!(
                "a {len}-byte message does not fit the {}-byte raw buffer",
                self.chan.layout.buffer
            );
        }
        // SAFETY: the buffer of `dir` lies inside the mapping (layout.total() bytes) and holds
        // `layout.buffer >= len` bytes from this offset.
        Ok(unsafe { self.chan.map.as_ptr().add(self.chan.layout.buffer(dir)) })
    }

    /// Waits up to about `slice` until the incoming flag shows `want`.
    fn wait_flag(&self, want: u32, slice: Duration) -> bool {
        let flag = self.flag(self.inp);
        let mut deadline = None;
        if self.futex {
            loop {
                // Acquire pairs with the Release store in `send`: the payload written before it
                // is visible once we see the new value.
                let now_value = flag.load(Ordering::Acquire);
                if now_value == want {
                    return true;
                }
                let now = Instant::now();
                let end = *deadline.get_or_insert(now + slice);
                if now >= end {
                    return false;
                }
                os::futex_wait(flag, now_value, Some(end - now));
            }
        } else {
            let mut spins = 0u32;
            loop {
                // Acquire: as above.
                if flag.load(Ordering::Acquire) == want {
                    return true;
                }
                std::hint::spin_loop();
                spins = spins.wrapping_add(1);
                // The clock is read only every 1024 spins, and first only after 1024: the floor
                // does no more than it must.
                if spins % 1024 == 0 {
                    let now = Instant::now();
                    if now >= *deadline.get_or_insert(now + slice) {
                        return false;
                    }
                }
            }
        }
    }
}

impl Endpoint for RawEnd {
    fn send(&mut self, seq: u64, len: usize) -> Result<()> {
        let ptr = self.buffer_ptr(self.out, len)?;
        // SAFETY: `ptr` has `len` bytes in the mapping (checked in `buffer_ptr`). Only this end
        // writes the outgoing buffer, and the other end read the previous message in it before
        // it replied, which we waited for: nobody else touches these bytes now.
        let buf = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
        fill(buf, super::pattern(seq, self.out));
        let flag = self.flag(self.out);
        // Release pairs with the receiver's Acquire load in `wait_flag`: it sees the payload.
        flag.store(flag_value(seq), Ordering::Release);
        if self.futex {
            os::futex_wake(flag);
        }
        Ok(())
    }

    fn recv(&mut self, seq: u64, len: usize, slice: Duration) -> Result<bool> {
        if !self.wait_flag(flag_value(seq), slice) {
            return Ok(false);
        }
        let ptr = self.buffer_ptr(self.inp, len)?;
        // SAFETY: `ptr` has `len` bytes in the mapping. The sender published them before its
        // Release store of the flag, which our Acquire load saw, and it will not write them again
        // before we reply.
        let buf = unsafe { std::slice::from_raw_parts(ptr, len) };
        verify(buf, seq, None, len, self.inp)?;
        Ok(true)
    }
}
