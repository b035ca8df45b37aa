//! The pools' UDP sockets: set up through rustix (`SO_REUSEPORT`, buffer sizes, a receive
//! timeout), one `sendto` per datagram and `recvmmsg` batches, both as system calls of their own
//! (rustix's `sendto`; `recvmmsg` through `libc::syscall`) rather than glibc's cancellable
//! wrappers, as ferry's own sockets do; and a socket's drop count (`SO_MEMINFO`, read as ferry
//! reads it).

use std::io;
use std::mem;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Duration;

use rustix::net::sockopt::{self, Timeout};
use rustix::net::{ipproto, AddressFamily, SendFlags, SocketType};

/// Datagrams per `recvmmsg`.
pub const RECV_SLOTS: usize = 32;
/// Bytes per receive slot: the largest UDP payload fits.
const SLOT_SIZE: usize = 65_536;

/// How to set a socket up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `SO_REUSEPORT`: several sockets bind the same port, the kernel spreads flows over them.
    pub reuse_port: bool,
    /// `SO_RCVBUF` in bytes (the kernel caps it at `net.core.rmem_max`).
    pub recv_buffer: Option<usize>,
    /// `SO_SNDBUF` in bytes (capped at `net.core.wmem_max`).
    pub send_buffer: Option<usize>,
    /// `SO_RCVTIMEO`: the longest [`UdpSocket::recv_batch`] waits (`None`: for ever).
    pub recv_timeout: Option<Duration>,
}

/// A bound, blocking UDP socket.
#[derive(Debug)]
pub struct UdpSocket {
    fd: OwnedFd,
}

impl UdpSocket {
    /// Creates a socket, sets `opts` and binds `addr` (port 0: the kernel picks one).
    pub fn bind(addr: SocketAddr, opts: &Options) -> io::Result<UdpSocket> {
        let family = if addr.is_ipv6() {
            AddressFamily::INET6
        } else {
            AddressFamily::INET
        };
        let fd = rustix::net::socket(family, SocketType::DGRAM, Some(ipproto::UDP))?;
        if addr.is_ipv6() {
            sockopt::set_ipv6_v6only(&fd, true)?;
        }
        if opts.reuse_port {
            sockopt::set_socket_reuseport(&fd, true)?;
        }
        if let Some(size) = opts.recv_buffer {
            sockopt::set_socket_recv_buffer_size(&fd, size)?;
        }
        if let Some(size) = opts.send_buffer {
            sockopt::set_socket_send_buffer_size(&fd, size)?;
        }
        if opts.recv_timeout.is_some() {
            sockopt::set_socket_timeout(&fd, Timeout::Recv, opts.recv_timeout)?;
        }
        rustix::net::bind(&fd, &addr)?;
        Ok(UdpSocket { fd })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        SocketAddr::try_from(rustix::net::getsockname(&self.fd)?)
            .map_err(|_| io::Error::other("socket has a non-IP local address"))
    }

    /// Sends one datagram; a full send buffer is an error (`WouldBlock`), not a wait.
    pub fn send_to(&self, dst: SocketAddr, data: &[u8]) -> io::Result<()> {
        rustix::net::sendto(
            &self.fd,
            data,
            SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
            &dst,
        )?;
        Ok(())
    }

    /// Receives into `batch` what is queued, waiting up to the socket's receive timeout for the
    /// first datagram; returns how many came (0: none within the timeout, or a signal).
    pub fn recv_batch(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        batch.lens.clear();
        for ((chunk, iov), hdr) in batch
            .buf
            .chunks_mut(SLOT_SIZE)
            .zip(batch.iovs.iter_mut())
            .zip(batch.hdrs.iter_mut())
        {
            iov.iov_base = chunk.as_mut_ptr().cast();
            iov.iov_len = chunk.len();
            hdr.msg_hdr.msg_iov = iov;
            hdr.msg_hdr.msg_iovlen = 1;
            hdr.msg_hdr.msg_flags = 0;
            hdr.msg_len = 0;
        }
        // SAFETY: `hdrs` holds RECV_SLOTS headers without a name or control buffer (null, length
        // 0), each pointing at its own iovec in `iovs`, which points at its own SLOT_SIZE bytes
        // of `buf`; all of them live across the call, and nothing else touches them (`batch` is
        // borrowed mutably). The kernel writes only into those bytes and the headers' lengths.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_recvmmsg,
                self.fd.as_raw_fd(),
                batch.hdrs.as_mut_ptr(),
                RECV_SLOTS as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut::<libc::timespec>(),
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        let got = rc as usize;
        batch
            .lens
            .extend(batch.hdrs[..got].iter().map(|h| h.msg_len as usize));
        Ok(got)
    }

    /// Datagrams the kernel dropped on this socket (its receive queue was full), from
    /// `SO_MEMINFO`; 0 where that cannot be read.
    pub fn kernel_drops(&self) -> u64 {
        ferry::sys::udp::meminfo_drops(self.fd.as_fd()).map_or(0, u64::from)
    }
}

/// Receive buffers for [`UdpSocket::recv_batch`]: [`RECV_SLOTS`] datagrams of up to 64 KiB, and
/// the lengths of those the last call received.
pub struct RecvBatch {
    buf: Vec<u8>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    lens: Vec<usize>,
}

impl RecvBatch {
    pub fn new() -> RecvBatch {
        RecvBatch {
            buf: vec![0; RECV_SLOTS * SLOT_SIZE],
            iovs: (0..RECV_SLOTS)
                .map(|_| libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                })
                .collect(),
            // SAFETY: all-zero is a valid mmsghdr (integers and null pointers).
            hdrs: (0..RECV_SLOTS).map(|_| unsafe { mem::zeroed() }).collect(),
            lens: Vec::with_capacity(RECV_SLOTS),
        }
    }

    /// The slots a call may fill: a call that returns this many could not empty the socket.
    pub fn slots(&self) -> usize {
        RECV_SLOTS
    }

    /// The lengths of the datagrams the last call received.
    pub fn lens(&self) -> &[usize] {
        &self.lens
    }
}

impl Default for RecvBatch {
    fn default() -> Self {
        RecvBatch::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_arrive_in_a_batch_and_a_quiet_socket_times_out() {
        let rx = UdpSocket::bind(
            "127.0.0.1:0".parse().unwrap(),
            &Options {
                reuse_port: true,
                recv_timeout: Some(Duration::from_millis(20)),
                ..Options::default()
            },
        )
        .unwrap();
        let to = rx.local_addr().unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &Options::default()).unwrap();
        for len in [1, 1472, 9000] {
            tx.send_to(to, &vec![7; len]).unwrap();
        }
        let mut batch = RecvBatch::new();
        let mut lens = Vec::new();
        while lens.len() < 3 {
            assert!(rx.recv_batch(&mut batch).unwrap() > 0, "sent on loopback");
            lens.extend_from_slice(batch.lens());
        }
        assert_eq!(lens, [1, 1472, 9000]);
        assert_eq!(rx.recv_batch(&mut batch).unwrap(), 0, "nothing more came");
        assert_eq!(rx.kernel_drops(), 0);
    }
}
