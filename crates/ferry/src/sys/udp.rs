//! Batched UDP sockets, IPv4 and IPv6, unicast and multicast: the only code in ferry that calls
//! the operating system for UDP (Linux). socket2 creates the socket and sets options; libc does
//! `sendmmsg`/`recvmmsg` and the control messages.
//!
//! ```text
//! SocketOptions { reuse_port, recv_buffer, send_buffer, multicast: Option<Multicast>, gso, gro }
//! Multicast { group: IpAddr, interface: MulticastInterface, ttl_or_hops: u32, loopback: bool }
//! MulticastInterface::{V4(Ipv4Addr), V6(u32 /* interface index, 0 = default */)}
//!
//! UdpSocket::bind(addr: SocketAddr, opts: &SocketOptions) -> io::Result<UdpSocket>
//! UdpSocket::bind_chosen_port(ip: IpAddr, opts: &SocketOptions) -> io::Result<UdpSocket>
//! UdpSocket::local_addr(&self) -> io::Result<SocketAddr>
//! UdpSocket::capabilities(&self) -> Capabilities   // gso, gro, max_gso_segments, rxq_ovfl, gso_disabled_errno
//! UdpSocket::buffer_report(&self) -> &BufferReport // requested vs granted, warnings naming the sysctl
//! UdpSocket::send_segments(&self, dst: SocketAddr, data: &[u8], segment: usize) -> io::Result<usize>
//! UdpSocket::connect(&self, peer: Option<SocketAddr>) -> io::Result<()>   // bound to a chosen port only
//! UdpSocket::send_segments_connected(&self, data: &[u8], segment: usize) -> io::Result<usize>
//! UdpSocket::send_many(&self, msgs: &[(SocketAddr, &[u8])]) -> io::Result<usize>
//! UdpSocket::send_to(&self, dst: SocketAddr, data: &[u8]) -> io::Result<()>
//! UdpSocket::recv_batch(&self, batch: &mut RecvBatch, timeout: Option<Duration>) -> io::Result<usize>
//! UdpSocket::wait_writable(&self, timeout: Duration) -> io::Result<bool>
//! UdpSocket::kernel_drops(&self) -> u64
//! UdpSocket::truncated(&self) -> u64
//! UdpSocket::gro_coalesced(&self) -> u64
//! impl AsFd, AsRawFd for UdpSocket
//! kernel_capabilities() -> io::Result<Capabilities>   // probed on a throwaway 127.0.0.1 socket
//!
//! RecvBatch::new(slots: usize, slot_size: usize) / RecvBatch::for_socket(&UdpSocket)
//! RecvBatch::len / is_empty / get(i) -> Option<(SocketAddr, &[u8])> / iter()
//! ```
//!
//! Behaviour:
//! - `sendmsg`, `sendmmsg` and `recvmmsg` are made as raw system calls (`libc::syscall`), not
//!   through glibc's wrappers: those are thread-cancellation points that switch asynchronous
//!   cancellation on and off around every call, which costs measurably per message (ferry never
//!   cancels threads). Errors still come back in `errno`.
//! - Every send and every receive without a timeout passes `MSG_DONTWAIT`. Sends return `WouldBlock` (EAGAIN) or ENOBUFS as errors when
//!   the kernel has no room; [`UdpSocket::wait_writable`] waits for room. Sends that get some
//!   datagrams out return how many; the caller sends the rest again (the next call reports the
//!   error, if there was one).
//! - The kernel never fragments: IPv4 sockets set `IP_MTU_DISCOVER = IP_PMTUDISC_DO`, IPv6
//!   sockets `IPV6_MTU_DISCOVER = IPV6_PMTUDISC_DO` and `IPV6_DONTFRAG`. A datagram larger than
//!   the path allows fails with EMSGSIZE.
//! - GSO (`UDP_SEGMENT`) and GRO (`UDP_GRO`) are probed at bind. A GSO send that the kernel
//!   refuses at run time (EIO, EINVAL, ENOTSUPP, EOPNOTSUPP) is retried without GSO; if the plain
//!   send then works, GSO is turned off for this socket (and the errno kept in
//!   [`Capabilities::gso_disabled_errno`]).
//! - `SO_RXQ_OVFL` is set: every received datagram may carry the socket's drop counter, and
//!   [`UdpSocket::kernel_drops`] also asks the kernel directly (`SO_MEMINFO`).
//! - IPv6 sockets are IPv6-only (`IPV6_V6ONLY`).
//! - With `multicast`, the socket joins the group on the interface, sends to it through that
//!   interface with the given TTL/hop limit and loopback, sets `SO_REUSEADDR` so that several
//!   receivers on one host may bind the group's port, and turns `IP_MULTICAST_ALL` off (it only
//!   receives the groups it joined itself).

use std::io;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use libc::c_int;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

// Linux constants that libc does not export on every target.
const UDP_SEGMENT: c_int = 103;
const UDP_GRO: c_int = 104;
#[cfg(any(target_arch = "sparc", target_arch = "sparc64"))]
const SO_RXQ_OVFL: c_int = 0x24;
#[cfg(not(any(target_arch = "sparc", target_arch = "sparc64")))]
const SO_RXQ_OVFL: c_int = 40;
#[cfg(any(target_arch = "sparc", target_arch = "sparc64"))]
const SO_MEMINFO: c_int = 0x39;
#[cfg(not(any(target_arch = "sparc", target_arch = "sparc64")))]
const SO_MEMINFO: c_int = 55;
/// `SK_MEMINFO_DROPS` and the number of words of `SO_MEMINFO` up to it.
const SK_MEMINFO_DROPS: usize = 8;
const SK_MEMINFO_VARS: usize = 9;
/// The kernel's internal "not supported" (not in libc: it never reaches user space through
/// glibc's names, but UDP GSO can return it).
const ENOTSUPP: c_int = 524;

/// Most datagrams one GSO send may carry (`UDP_MAX_SEGMENTS` of older kernels; newer ones allow
/// 128).
pub const MAX_GSO_SEGMENTS: usize = 64;
/// Largest UDP payload over IPv4 (65535 − 20 − 8).
pub const MAX_PAYLOAD_V4: usize = 65_507;
/// Largest UDP payload over IPv6 without jumbograms (65535 − 8).
#[cfg(any(test, feature = "internals"))]
pub const MAX_PAYLOAD_V6: usize = 65_527;
/// Bytes one GSO send may carry (the IPv4 limit, kept for both families).
const MAX_GSO_BYTES: usize = MAX_PAYLOAD_V4;
/// Messages per `sendmmsg` call.
const SEND_BATCH: usize = 64;
/// Most receive slots a [`RecvBatch`] has (messages per `recvmmsg` call).
pub const MAX_RECV_SLOTS: usize = 64;
/// Receive slots of [`RecvBatch::for_socket`].
pub const DEFAULT_RECV_SLOTS: usize = 32;
/// Slot size for a GRO socket: a coalesced buffer is up to 64 KiB.
pub const GRO_SLOT_SIZE: usize = 65_536;
/// Slot size without GRO: one datagram of up to a 9000-byte jumbo frame.
pub const DEFAULT_SLOT_SIZE: usize = 9_216;

/// Which interface a multicast group is joined and sent on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MulticastInterface {
    /// IPv4: the interface's address (`0.0.0.0`: the kernel's choice).
    V4(Ipv4Addr),
    /// IPv6: the interface index (0: the kernel's choice).
    V6(u32),
}

/// Multicast settings: joined at bind, and used for sending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Multicast {
    pub group: IpAddr,
    pub interface: MulticastInterface,
    /// IPv4 TTL or IPv6 hop limit of sent datagrams (1 stays on the local network).
    pub ttl_or_hops: u32,
    /// Whether this host's own members receive what this socket sends.
    pub loopback: bool,
}

/// How to set a socket up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocketOptions {
    /// `SO_REUSEPORT`: several sockets may bind the same address and port.
    pub reuse_port: bool,
    /// `SO_RCVBUF` in bytes (the kernel caps it at `net.core.rmem_max`).
    pub recv_buffer: Option<usize>,
    /// `SO_SNDBUF` in bytes (capped at `net.core.wmem_max`).
    pub send_buffer: Option<usize>,
    pub multicast: Option<Multicast>,
    /// Use UDP GSO for [`UdpSocket::send_segments`] when the kernel has it.
    pub gso: bool,
    /// Use UDP GRO on receive when the kernel has it.
    pub gro: bool,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            reuse_port: false,
            recv_buffer: None,
            send_buffer: None,
            multicast: None,
            gso: true,
            gro: true,
        }
    }
}

/// What this socket can do, as found at bind (GSO may be turned off later, at run time).
#[cfg(any(test, feature = "internals"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    pub gso: bool,
    pub gro: bool,
    /// Datagrams per send call: [`MAX_GSO_SEGMENTS`] with GSO, else 1.
    pub max_gso_segments: usize,
    /// Whether `SO_RXQ_OVFL` could be set (drop counts on received datagrams).
    pub rxq_ovfl: bool,
    /// The errno that made this socket give GSO up at run time, if that happened.
    pub gso_disabled_errno: Option<i32>,
}

/// Socket buffer sizes: what was asked for and what the kernel granted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferReport {
    pub recv_requested: Option<usize>,
    /// The usable receive buffer: Linux reports twice the size it grants (the second half is
    /// bookkeeping); this is that report halved, so that it compares with the request.
    pub recv_granted: usize,
    pub send_requested: Option<usize>,
    pub send_granted: usize,
    /// One line per buffer the kernel capped below the request, naming the sysctl to raise.
    pub warnings: Vec<String>,
}

impl BufferReport {
    /// True when a buffer is smaller than asked for.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_capped(&self) -> bool {
        !self.warnings.is_empty()
    }
}

/// A bound UDP socket with batched send and receive. See the module documentation.
#[derive(Debug)]
pub struct UdpSocket {
    sock: Socket,
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
    v6: bool,
    /// Bound to a port the caller chose (not 0): dissolving a connection keeps it then.
    port_fixed: bool,
    gso: AtomicBool,
    gso_disabled_errno: AtomicI32,
    gro: bool,
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
    rxq_ovfl: bool,
    /// The socket's drop counter, extended past the kernel's 32 bits.
    drops: AtomicU64,
    /// Set once a drop count arrived in a control message.
    drops_from_cmsg: AtomicBool,
    truncated: AtomicU64,
    /// Received GRO buffers that held more than one datagram.
    gro_coalesced: AtomicU64,
    /// The SO_RCVTIMEO set now (0: none), so that a blocking wait sets it only when it changes.
    rcvtimeo_ns: AtomicI64,
    buffers: BufferReport,
}

impl UdpSocket {
    /// As [`UdpSocket::bind`] to a free port of `ip`, chosen here rather than by the kernel, so
    /// that the socket may [`UdpSocket::connect`] and disconnect without losing it. (The port
    /// comes from a throwaway socket; another process taking it meanwhile means another try.)
    pub fn bind_chosen_port(ip: IpAddr, opts: &SocketOptions) -> io::Result<UdpSocket> {
        let mut last = None;
        for _ in 0..32 {
            let port = std::net::UdpSocket::bind(SocketAddr::new(ip, 0))?
                .local_addr()?
                .port();
            match UdpSocket::bind(SocketAddr::new(ip, port), opts) {
                Ok(s) => return Ok(s),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::ErrorKind::AddrInUse.into()))
    }

    /// Creates a socket, sets `opts`, binds `addr` and, with `opts.multicast`, joins the group.
    pub fn bind(addr: SocketAddr, opts: &SocketOptions) -> io::Result<UdpSocket> {
        let v6 = addr.is_ipv6();
        let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        // Blocking, so that a receive can wait inside `recvmmsg`; every call that must not
        // wait passes MSG_DONTWAIT.
        sock.set_nonblocking(false)?;
        if v6 {
            sock.set_only_v6(true)?;
        }
        if opts.reuse_port {
            sock.set_reuse_port(true)?;
        }
        if let Some(mc) = &opts.multicast {
            check_multicast(mc, v6)?;
            sock.set_reuse_address(true)?;
        }
        if let Some(size) = opts.recv_buffer {
            sock.set_recv_buffer_size(size)?;
        }
        if let Some(size) = opts.send_buffer {
            sock.set_send_buffer_size(size)?;
        }
        let fd = sock.as_fd();
        if v6 {
            setsockopt_int(
                fd,
                libc::IPPROTO_IPV6,
                libc::IPV6_MTU_DISCOVER,
                libc::IPV6_PMTUDISC_DO,
            )?;
            setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_DONTFRAG, 1)?;
        } else {
            setsockopt_int(
                fd,
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                libc::IP_PMTUDISC_DO,
            )?;
        }
        let rxq_ovfl = setsockopt_int(fd, libc::SOL_SOCKET, SO_RXQ_OVFL, 1).is_ok();
        // Probe GSO with a socket-wide segment size, then clear it: sends set it per call.
        let gso = opts.gso
            && setsockopt_int(fd, libc::SOL_UDP, UDP_SEGMENT, 1472).is_ok()
            && setsockopt_int(fd, libc::SOL_UDP, UDP_SEGMENT, 0).is_ok();
        let gro = opts.gro && setsockopt_int(fd, libc::SOL_UDP, UDP_GRO, 1).is_ok();

        sock.bind(&SockAddr::from(addr))?;

        if let Some(mc) = &opts.multicast {
            match (mc.group, mc.interface) {
                (IpAddr::V4(group), MulticastInterface::V4(iface)) => {
                    sock.set_multicast_if_v4(&iface)?;
                    sock.set_multicast_ttl_v4(mc.ttl_or_hops)?;
                    sock.set_multicast_loop_v4(mc.loopback)?;
                    sock.set_multicast_all_v4(false)?;
                    sock.join_multicast_v4(&group, &iface)?;
                }
                (IpAddr::V6(group), MulticastInterface::V6(index)) => {
                    sock.set_multicast_if_v6(index)?;
                    sock.set_multicast_hops_v6(mc.ttl_or_hops)?;
                    sock.set_multicast_loop_v6(mc.loopback)?;
                    sock.set_multicast_all_v6(false)?;
                    sock.join_multicast_v6(&group, index)?;
                }
                _ => unreachable!("check_multicast matched the families"),
            }
        }

        let buffers = buffer_report(&sock, opts);
        Ok(UdpSocket {
            sock,
            v6,
            port_fixed: addr.port() != 0,
            gso: AtomicBool::new(gso),
            gso_disabled_errno: AtomicI32::new(0),
            gro,
            rxq_ovfl,
            drops: AtomicU64::new(0),
            drops_from_cmsg: AtomicBool::new(false),
            truncated: AtomicU64::new(0),
            gro_coalesced: AtomicU64::new(0),
            rcvtimeo_ns: AtomicI64::new(0),
            buffers,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("socket has a non-IP local address"))
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn capabilities(&self) -> Capabilities {
        let gso = self.gso.load(Ordering::Relaxed);
        let errno = self.gso_disabled_errno.load(Ordering::Relaxed);
        Capabilities {
            gso,
            gro: self.gro,
            max_gso_segments: if gso { MAX_GSO_SEGMENTS } else { 1 },
            rxq_ovfl: self.rxq_ovfl,
            gso_disabled_errno: (errno != 0).then_some(errno),
        }
    }

    pub fn buffer_report(&self) -> &BufferReport {
        &self.buffers
    }

    /// True for an IPv6 socket.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_ipv6(&self) -> bool {
        self.v6
    }

    /// Sends the datagrams in `data` to `dst`: every one `segment` bytes long except possibly the
    /// last, which holds the rest. Uses GSO when this socket has it (up to [`MAX_GSO_SEGMENTS`]
    /// datagrams and 65507 bytes per kernel send, several such sends per `sendmmsg`), else one
    /// `sendmmsg` entry per datagram. Returns how many datagrams went out, which may be fewer
    /// than asked when the kernel ran out of room; errors only when none did. Empty `data`
    /// sends nothing (send an empty datagram with [`UdpSocket::send_many`]).
    pub fn send_segments(&self, dst: SocketAddr, data: &[u8], segment: usize) -> io::Result<usize> {
        self.segments(Some(&dst), data, segment)
    }

    /// As [`UdpSocket::send_segments`], to the peer of [`UdpSocket::connect`]: no address per
    /// send, and the kernel's cached route.
    pub fn send_segments_connected(&self, data: &[u8], segment: usize) -> io::Result<usize> {
        self.segments(None, data, segment)
    }

    /// Associates the socket with `peer` (`connect`), or dissolves the association (`None`).
    /// While connected, sends without an address go to `peer` over a route the kernel looked
    /// up once (an unconnected send looks it up every time), and the socket takes datagrams
    /// from `peer` only. Needs a socket bound to a port chosen by the caller (not 0): the kernel
    /// releases an automatically chosen port when the association is dissolved.
    pub fn connect(&self, peer: Option<SocketAddr>) -> io::Result<()> {
        if !self.port_fixed {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "connect: the socket was bound to port 0 (bind a chosen port to connect)",
            ));
        }
        match peer {
            Some(p) => self.sock.connect(&SockAddr::from(p)),
            None => {
                // SAFETY: all-zero is a valid sockaddr; AF_UNSPEC dissolves the association.
                let mut unspec: libc::sockaddr = unsafe { mem::zeroed() };
                unspec.sa_family = libc::AF_UNSPEC as libc::sa_family_t;
                // SAFETY: a valid sockaddr of the size passed, alive across the call.
                let rc = unsafe {
                    libc::connect(
                        self.sock.as_raw_fd(),
                        &unspec,
                        mem::size_of::<libc::sockaddr>() as libc::socklen_t,
                    )
                };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            }
        }
    }

    fn segments(&self, dst: Option<&SocketAddr>, data: &[u8], segment: usize) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        if segment == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "send_segments: segment size 0",
            ));
        }
        let per_send = (MAX_GSO_BYTES / segment).min(MAX_GSO_SEGMENTS);
        let datagrams = data.len().div_ceil(segment);
        if self.gso.load(Ordering::Relaxed) && per_send >= 2 && datagrams >= 2 {
            match self.send_gso(dst, data, segment, per_send) {
                Ok(n) => return Ok(n),
                Err(e) if is_gso_refusal(&e) => {
                    // Retry without GSO; only if that works was GSO the problem.
                    let n = self.send_plain(dst, data, segment)?;
                    if n > 0 {
                        self.gso.store(false, Ordering::Relaxed);
                        self.gso_disabled_errno
                            .store(e.raw_os_error().unwrap_or(-1), Ordering::Relaxed);
                    }
                    return Ok(n);
                }
                Err(e) => return Err(e),
            }
        }
        self.send_plain(dst, data, segment)
    }

    /// Sends separate datagrams, each to its own destination, with `sendmmsg`. Returns how many
    /// went out (a prefix of `msgs`); errors only when none did.
    #[cfg(any(test, feature = "internals"))]
    pub fn send_many(&self, msgs: &[(SocketAddr, &[u8])]) -> io::Result<usize> {
        let mut sent = 0;
        for chunk in msgs.chunks(SEND_BATCH) {
            let mut arrays = SendArrays::new();
            for (i, (dst, data)) in chunk.iter().enumerate() {
                arrays.set(i, Some(dst), data, None);
            }
            match self.sendmmsg(&mut arrays, chunk.len()) {
                Ok(n) => {
                    sent += n;
                    if n < chunk.len() {
                        return Ok(sent);
                    }
                }
                Err(e) if sent == 0 => return Err(e),
                Err(_) => return Ok(sent),
            }
        }
        Ok(sent)
    }

    /// Sends one datagram.
    pub fn send_to(&self, dst: SocketAddr, data: &[u8]) -> io::Result<()> {
        self.send_one(Some(&dst), data, None)
    }

    /// One `sendmsg`: a datagram, or with `gso` one GSO send of datagrams of that size. No
    /// batch arrays to prepare: the path of a small message.
    fn send_one(&self, dst: Option<&SocketAddr>, data: &[u8], gso: Option<u16>) -> io::Result<()> {
        // SAFETY: all-zero is a valid value of this plain C union.
        let mut name: RawAddr = unsafe { mem::zeroed() };
        let name_len = dst.map_or(0, |d| std_to_raw(d, &mut name));
        let mut iov = libc::iovec {
            // The kernel only reads through a send's iovec.
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        let mut control = SendControl([0; 32]);
        let control_len = gso.map_or(0, |seg| control.put_segment(seg));
        // SAFETY: all-zero is a valid msghdr (integers and null pointers).
        let mut msg: libc::msghdr = unsafe { mem::zeroed() };
        if name_len > 0 {
            msg.msg_name = (&mut name as *mut RawAddr).cast();
            msg.msg_namelen = name_len;
        }
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if control_len > 0 {
            msg.msg_control = control.0.as_mut_ptr().cast();
            msg.msg_controllen = control_len as _;
        }
        loop {
            // SAFETY: `msg` points at `name`, `iov` (which points into `data`) and `control`,
            // all alive across the call with their true lengths; the kernel only reads them.
            // The system call itself, not glibc's cancellable wrapper (module docs).
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_sendmsg,
                    self.sock.as_raw_fd(),
                    &msg as *const libc::msghdr,
                    libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                )
            };
            if rc >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    fn send_gso(
        &self,
        dst: Option<&SocketAddr>,
        data: &[u8],
        segment: usize,
        per_send: usize,
    ) -> io::Result<usize> {
        let chunk_bytes = segment * per_send;
        if data.len() <= chunk_bytes {
            self.send_one(dst, data, Some(segment as u16))?;
            return Ok(data.len().div_ceil(segment));
        }
        let mut sent = 0;
        let mut chunks = data.chunks(chunk_bytes).peekable();
        while chunks.peek().is_some() {
            let mut arrays = SendArrays::new();
            let mut counts = [0usize; SEND_BATCH];
            let mut n = 0;
            while n < SEND_BATCH {
                let Some(chunk) = chunks.next() else { break };
                let gso = (chunk.len() > segment).then_some(segment as u16);
                arrays.set(n, dst, chunk, gso);
                counts[n] = chunk.len().div_ceil(segment);
                n += 1;
            }
            match self.sendmmsg(&mut arrays, n) {
                Ok(k) => {
                    sent += counts[..k].iter().sum::<usize>();
                    if k < n {
                        return Ok(sent);
                    }
                }
                Err(e) if sent == 0 => return Err(e),
                Err(_) => return Ok(sent),
            }
        }
        Ok(sent)
    }

    fn send_plain(
        &self,
        dst: Option<&SocketAddr>,
        data: &[u8],
        segment: usize,
    ) -> io::Result<usize> {
        if data.len() <= segment {
            return self.send_one(dst, data, None).map(|()| 1);
        }
        let mut sent = 0;
        let mut datagrams = data.chunks(segment).peekable();
        while datagrams.peek().is_some() {
            let mut arrays = SendArrays::new();
            let mut n = 0;
            while n < SEND_BATCH {
                let Some(d) = datagrams.next() else { break };
                arrays.set(n, dst, d, None);
                n += 1;
            }
            match self.sendmmsg(&mut arrays, n) {
                Ok(k) => {
                    sent += k;
                    if k < n {
                        return Ok(sent);
                    }
                }
                Err(e) if sent == 0 => return Err(e),
                Err(_) => return Ok(sent),
            }
        }
        Ok(sent)
    }

    /// `sendmmsg` of the first `n` prepared messages; retries on EINTR.
    fn sendmmsg(&self, arrays: &mut SendArrays, n: usize) -> io::Result<usize> {
        debug_assert!(n <= SEND_BATCH);
        let mut hdrs = arrays.headers(n);
        loop {
            // SAFETY: `hdrs` holds `n` initialised headers whose name, iovec and control
            // pointers point into `arrays` and into the caller's data slices, all of which
            // outlive this call; the kernel only reads them (and writes msg_len in `hdrs`).
            // The system call itself, not glibc's cancellable wrapper (module docs).
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_sendmmsg,
                    self.sock.as_raw_fd(),
                    hdrs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                )
            };
            if rc >= 0 {
                return Ok(rc as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Receives a batch into `batch` (cleared first) and returns how many datagrams it holds.
    /// A GRO buffer is split into its datagrams. `timeout`: `None` returns at once, `Some(t)`
    /// waits at most `t` for the first datagram; `Ok(0)` means nothing came (possibly sooner
    /// than `t`: a long wait blocks for a whole number of kernel ticks short of `t`, and a
    /// signal ends a wait; callers loop until their own deadline). Datagrams larger than
    /// a slot are dropped and counted in [`UdpSocket::truncated`]. A GRO socket needs slots of
    /// [`GRO_SLOT_SIZE`] bytes (as [`RecvBatch::for_socket`] makes); smaller ones are refused.
    pub fn recv_batch(
        &self,
        batch: &mut RecvBatch,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        batch.datagrams.clear();
        if self.gro && batch.slot_size < GRO_SLOT_SIZE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "recv_batch: this socket uses UDP GRO and needs {GRO_SLOT_SIZE}-byte slots, \
                     the batch has {}-byte slots (use RecvBatch::for_socket)",
                    batch.slot_size
                ),
            ));
        }
        let Some(timeout) = timeout else {
            return self.recv_once(batch, libc::MSG_DONTWAIT);
        };
        // A long wait blocks in the receive call itself (one system call per wake-up), bounded
        // by SO_RCVTIMEO; the kernel counts that timeout in scheduler ticks, so it is set a tick
        // and a margin short of the wait, and the caller's loop waits out the rest. A short
        // wait uses `ppoll`, which is exact. No clock is read here.
        if let Some(step) = rcvtimeo_step(timeout) {
            self.set_rcvtimeo(step)?;
            return self.recv_once(batch, libc::MSG_WAITFORONE);
        }
        if timeout.is_zero() || self.poll(libc::POLLIN, timeout)? {
            return self.recv_once(batch, libc::MSG_DONTWAIT);
        }
        Ok(0)
    }

    /// Sets SO_RCVTIMEO unless it already has this value.
    fn set_rcvtimeo(&self, t: Duration) -> io::Result<()> {
        let ns = t.as_nanos().min(i64::MAX as u128) as i64;
        if self.rcvtimeo_ns.load(Ordering::Relaxed) == ns {
            return Ok(());
        }
        self.sock.set_read_timeout(Some(t))?;
        self.rcvtimeo_ns.store(ns, Ordering::Relaxed);
        Ok(())
    }

    /// One `recvmmsg`: `MSG_DONTWAIT` returns at once, `MSG_WAITFORONE` waits (up to
    /// SO_RCVTIMEO) for the first datagram and takes what else is queued then. 0 when nothing
    /// (deliverable) came.
    fn recv_once(&self, batch: &mut RecvBatch, flags: c_int) -> io::Result<usize> {
        let slot_size = batch.slot_size;
        batch.rearm();
        // The kernel may write into any header offered (also on a partial failure): those are
        // the ones to restore before the next call.
        batch.used = batch.vlen;
        let rc = loop {
            // SAFETY: the batch's `slots` headers point at its own heap buffers (names, control,
            // iovecs into `buf`) with their true lengths (`rearm` restored the lengths the
            // kernel overwrote); all outlive the call, and nothing else accesses them meanwhile
            // (`batch` is borrowed mutably).
            // The system call itself, not glibc's cancellable wrapper (module docs).
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_recvmmsg,
                    self.sock.as_raw_fd(),
                    batch.hdrs.as_mut_ptr(),
                    batch.vlen as libc::c_uint,
                    flags,
                    std::ptr::null_mut::<libc::timespec>(),
                )
            };
            if rc >= 0 {
                break rc as usize;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(0),
                _ => return Err(e),
            }
        };
        // Ask for as many next time as came now, doubling while calls come back full: a
        // ping-pong asks for one (the kernel then does not look for a second datagram that is
        // not there), a stream grows to every slot within a few calls.
        batch.vlen = if rc == batch.vlen {
            (rc * 2).min(batch.slots)
        } else {
            rc.max(1)
        };
        for (i, hdr) in batch.hdrs.iter().enumerate().take(rc) {
            let len = hdr.msg_len as usize;
            let mut gro_segment = 0usize;
            // SAFETY: `hdr.msg_hdr` is the header the kernel just filled: msg_control points at
            // this slot's control buffer and msg_controllen says how much of it is valid.
            let controls = unsafe { parse_control(&hdr.msg_hdr) };
            for c in controls.iter().flatten() {
                match *c {
                    Control::Gro(seg) => gro_segment = seg,
                    Control::Drops(d) => {
                        self.drops_from_cmsg.store(true, Ordering::Relaxed);
                        self.note_drops(d);
                    }
                }
            }
            if hdr.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 || len > slot_size {
                self.truncated.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let Some(addr) = sockaddr_to_std(&batch.names[i], hdr.msg_hdr.msg_namelen) else {
                continue;
            };
            let start = i * slot_size;
            if gro_segment > 0 && gro_segment < len {
                self.gro_coalesced.fetch_add(1, Ordering::Relaxed);
                let mut off = 0;
                while off < len {
                    let l = gro_segment.min(len - off);
                    batch.datagrams.push((addr, (start + off) as u32, l as u32));
                    off += l;
                }
            } else {
                batch.datagrams.push((addr, start as u32, len as u32));
            }
        }
        Ok(batch.datagrams.len())
    }

    /// Waits until the socket can take more data, at most `timeout`; false on timeout (or a
    /// signal).
    pub fn wait_writable(&self, timeout: Duration) -> io::Result<bool> {
        self.poll(libc::POLLOUT, timeout)
    }

    /// Waits until the socket is readable, at most `timeout`; false on timeout (or a signal).
    #[cfg(any(test, feature = "internals"))]
    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        self.poll(libc::POLLIN, timeout)
    }

    /// One `ppoll`: true when ready, false on timeout or when a signal interrupted the wait
    /// (callers loop).
    fn poll(&self, events: libc::c_short, timeout: Duration) -> io::Result<bool> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().min(i32::MAX as u64) as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        let mut pfd = libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd and a valid timespec, both live across the call; no signal
        // mask is passed.
        let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if rc >= 0 {
            return Ok(rc > 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        Err(e)
    }

    /// Datagrams the kernel dropped on this socket (its receive queue was full), from the
    /// `SO_RXQ_OVFL` counts that came with received datagrams and from `SO_MEMINFO`.
    pub fn kernel_drops(&self) -> u64 {
        if let Some(raw) = meminfo_drops(self.sock.as_fd()) {
            self.note_drops(raw);
        }
        self.drops.load(Ordering::Relaxed)
    }

    /// Datagrams dropped because they did not fit a receive slot.
    #[cfg(any(test, feature = "internals"))]
    pub fn truncated(&self) -> u64 {
        self.truncated.load(Ordering::Relaxed)
    }

    /// Received buffers that GRO had coalesced from several datagrams (each was split again).
    #[cfg(any(test, feature = "internals"))]
    pub fn gro_coalesced(&self) -> u64 {
        self.gro_coalesced.load(Ordering::Relaxed)
    }

    /// Folds a reading of the kernel's 32-bit drop counter into the 64-bit running count.
    fn note_drops(&self, raw: u32) {
        let _ = self
            .drops
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
                let delta = raw.wrapping_sub(cur as u32);
                // A stale reading (from another thread, earlier) would look like a huge step.
                (delta != 0 && delta < 1 << 31).then_some(cur + delta as u64)
            });
    }
}

/// What this kernel offers, found with a throwaway socket on 127.0.0.1 (GSO and GRO asked for).
#[cfg(any(test, feature = "internals"))]
pub fn kernel_capabilities() -> io::Result<Capabilities> {
    let sock = UdpSocket::bind(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        &SocketOptions::default(),
    )?;
    Ok(sock.capabilities())
}

/// The kernel's count of datagrams it dropped on the socket `fd` (its receive queue was full),
/// from `SO_MEMINFO`, as the kernel keeps it (32 bits, wrapping); `None` where it cannot be read.
pub fn meminfo_drops(fd: BorrowedFd<'_>) -> Option<u32> {
    let mut info = [0u32; SK_MEMINFO_VARS];
    let mut len = mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: `info` and `len` are valid for writes and `len` is the buffer's size; the kernel
    // writes at most that much.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    (rc == 0 && len as usize > SK_MEMINFO_DROPS * 4).then_some(info[SK_MEMINFO_DROPS])
}

impl AsFd for UdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

/// The kernel's scheduler tick (CLOCK_MONOTONIC_COARSE's resolution): SO_RCVTIMEO counts in
/// these.
fn kernel_tick() -> Duration {
    static TICK: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *TICK.get_or_init(|| {
        let res = rustix::time::clock_getres(rustix::time::ClockId::MonotonicCoarse);
        let ns = res.tv_sec as u64 * 1_000_000_000 + res.tv_nsec as u64;
        // Unknown or implausible: assume the coarsest common tick (HZ = 100).
        Duration::from_nanos(if (100_000..=20_000_000).contains(&ns) {
            ns
        } else {
            10_000_000
        })
    })
}

/// The SO_RCVTIMEO to block with when `left` remains, or `None` when the wait is too short for
/// one (it then goes through `ppoll`). The kernel rounds the timeout up to ticks and may wake up
/// to a tick later still, so the step stays a tick and a millisecond short of `left`; it is a
/// tick times a power of two so that successive waits reuse the value already set.
fn rcvtimeo_step(left: Duration) -> Option<Duration> {
    let tick = kernel_tick();
    let room = left.checked_sub(tick + Duration::from_millis(1))?;
    if room < tick {
        return None;
    }
    let mut step = tick;
    while step * 2 <= room && step < Duration::from_secs(1) {
        step *= 2;
    }
    Some(step)
}

/// Preallocated receive buffers for [`UdpSocket::recv_batch`], and the datagrams received.
/// The `recvmmsg` headers are built once and point into the batch's own heap buffers (which
/// never grow, so they never move); a call only restores the lengths the kernel overwrote.
pub struct RecvBatch {
    buf: Vec<u8>,
    slots: usize,
    slot_size: usize,
    names: Vec<libc::sockaddr_in6>,
    control: Vec<ControlBuf>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    /// Headers offered to the last call (the kernel may have written into them).
    used: usize,
    /// Headers offered to the next call (1..=slots).
    vlen: usize,
    /// (source, offset in `buf`, length)
    datagrams: Vec<(SocketAddr, u32, u32)>,
}

// SAFETY: the raw pointers in `iovs` and `hdrs` point only into this batch's own heap buffers
// (`buf`, `names`, `control`, `iovs`), which move with it between threads; they are written
// through only by `recv_once`, which holds `&mut RecvBatch`.
unsafe impl Send for RecvBatch {}
// SAFETY: shared references (`get`, `iter`, `len`) read `buf` and `datagrams` only, never
// through the raw pointers.
unsafe impl Sync for RecvBatch {}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("slots", &self.slots)
            .field("slot_size", &self.slot_size)
            .field("datagrams", &self.datagrams.len())
            .finish()
    }
}

/// Control-message space per received message: a GRO segment size and a drop count.
const RECV_CONTROL: usize = 64;

#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct ControlBuf([u8; RECV_CONTROL]);

impl std::fmt::Debug for ControlBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ControlBuf")
    }
}

impl RecvBatch {
    /// `slots` messages per call (1..=[`MAX_RECV_SLOTS`]) of `slot_size` bytes each
    /// (1..=[`GRO_SLOT_SIZE`]); values outside are clamped.
    pub fn new(slots: usize, slot_size: usize) -> RecvBatch {
        let slots = slots.clamp(1, MAX_RECV_SLOTS);
        let slot_size = slot_size.clamp(1, GRO_SLOT_SIZE);
        let mut b = RecvBatch {
            buf: vec![0; slots * slot_size],
            slots,
            slot_size,
            // SAFETY: all-zero is a valid sockaddr_in6 (plain integers).
            names: vec![unsafe { mem::zeroed() }; slots],
            control: vec![ControlBuf([0; RECV_CONTROL]); slots],
            iovs: Vec::with_capacity(slots),
            hdrs: Vec::with_capacity(slots),
            used: 0,
            vlen: slots,
            datagrams: Vec::with_capacity(slots * 4),
        };
        let buf = b.buf.as_mut_ptr();
        for i in 0..slots {
            b.iovs.push(libc::iovec {
                // SAFETY: slot i lies within `buf`, which holds slots * slot_size bytes.
                iov_base: unsafe { buf.add(i * slot_size) }.cast(),
                iov_len: slot_size,
            });
        }
        for i in 0..slots {
            // SAFETY: all-zero is a valid mmsghdr (integers and null pointers).
            let mut h: libc::mmsghdr = unsafe { mem::zeroed() };
            h.msg_hdr.msg_name = (&mut b.names[i] as *mut libc::sockaddr_in6).cast();
            h.msg_hdr.msg_iov = &mut b.iovs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = b.control[i].0.as_mut_ptr().cast();
            b.hdrs.push(h);
        }
        b.used = slots;
        b.rearm();
        b
    }

    /// Restores the name and control lengths of the headers the last call offered the kernel.
    fn rearm(&mut self) {
        for h in &mut self.hdrs[..self.used] {
            h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            h.msg_hdr.msg_controllen = RECV_CONTROL as _;
            h.msg_hdr.msg_flags = 0;
        }
        self.used = 0;
    }

    /// [`DEFAULT_RECV_SLOTS`] slots of [`GRO_SLOT_SIZE`] bytes for a GRO socket, of
    /// [`DEFAULT_SLOT_SIZE`] otherwise.
    pub fn for_socket(sock: &UdpSocket) -> RecvBatch {
        let size = if sock.gro {
            GRO_SLOT_SIZE
        } else {
            DEFAULT_SLOT_SIZE
        };
        RecvBatch::new(DEFAULT_RECV_SLOTS, size)
    }

    /// Datagrams received by the last call.
    #[cfg(any(test, feature = "internals"))]
    pub fn len(&self) -> usize {
        self.datagrams.len()
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.datagrams.is_empty()
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn get(&self, i: usize) -> Option<(SocketAddr, &[u8])> {
        let &(addr, off, len) = self.datagrams.get(i)?;
        Some((addr, &self.buf[off as usize..off as usize + len as usize]))
    }

    /// Datagram `i`, to change in place (e.g. decrypt).
    pub fn get_mut(&mut self, i: usize) -> Option<(SocketAddr, &mut [u8])> {
        let &(addr, off, len) = self.datagrams.get(i)?;
        Some((
            addr,
            &mut self.buf[off as usize..off as usize + len as usize],
        ))
    }

    pub fn iter(&self) -> impl Iterator<Item = (SocketAddr, &[u8])> + '_ {
        self.datagrams
            .iter()
            .map(|&(addr, off, len)| (addr, &self.buf[off as usize..off as usize + len as usize]))
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn slots(&self) -> usize {
        self.slots
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }
}

/// A socket address in the kernel's layout, big enough for either family.
#[derive(Clone, Copy)]
#[repr(C)]
union RawAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
}

#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct SendControl([u8; 32]);

impl SendControl {
    /// Writes a UDP_SEGMENT control message (GSO: cut into `seg`-byte datagrams); returns its
    /// length.
    fn put_segment(&mut self, seg: u16) -> usize {
        let buf = &mut self.0;
        // SAFETY: CMSG_SPACE/CMSG_LEN are pure arithmetic.
        let (space, len) = unsafe {
            (
                libc::CMSG_SPACE(mem::size_of::<u16>() as u32) as usize,
                libc::CMSG_LEN(mem::size_of::<u16>() as u32) as usize,
            )
        };
        debug_assert!(space <= buf.len());
        let hdr = libc::cmsghdr {
            cmsg_len: len as _,
            cmsg_level: libc::SOL_UDP,
            cmsg_type: UDP_SEGMENT,
        };
        let hdr_size = mem::size_of::<libc::cmsghdr>();
        // SAFETY: `buf` is 8-byte aligned and 32 bytes long, enough for a cmsghdr followed by
        // its u16 payload (space <= 32, checked above); the data starts where CMSG_DATA puts
        // it, right after the aligned header.
        unsafe {
            std::ptr::write(buf.as_mut_ptr().cast::<libc::cmsghdr>(), hdr);
            let data = libc::CMSG_DATA(buf.as_ptr().cast::<libc::cmsghdr>());
            debug_assert_eq!(data as usize - buf.as_ptr() as usize, hdr_size);
            std::ptr::write_unaligned(data.cast::<u16>(), seg);
        }
        space
    }
}

/// Headers' targets for one `sendmmsg`: addresses, iovecs, control messages.
struct SendArrays<'a> {
    names: [RawAddr; SEND_BATCH],
    name_lens: [libc::socklen_t; SEND_BATCH],
    iovs: [libc::iovec; SEND_BATCH],
    control: [SendControl; SEND_BATCH],
    control_lens: [usize; SEND_BATCH],
    _data: std::marker::PhantomData<&'a [u8]>,
}

impl<'a> SendArrays<'a> {
    fn new() -> Self {
        SendArrays {
            // SAFETY: all-zero is a valid value of these plain C structs (integers and null
            // pointers).
            names: unsafe { mem::zeroed() },
            name_lens: [0; SEND_BATCH],
            // SAFETY: as above.
            iovs: unsafe { mem::zeroed() },
            control: [SendControl([0; 32]); SEND_BATCH],
            control_lens: [0; SEND_BATCH],
            _data: std::marker::PhantomData,
        }
    }

    /// Message `i`: `data` to `dst` (`None`: the connected peer), with a UDP_SEGMENT control
    /// message when `gso` is set.
    fn set(&mut self, i: usize, dst: Option<&SocketAddr>, data: &'a [u8], gso: Option<u16>) {
        self.name_lens[i] = dst.map_or(0, |d| std_to_raw(d, &mut self.names[i]));
        self.iovs[i] = libc::iovec {
            // The kernel only reads through a send's iovec.
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        self.control_lens[i] = gso.map_or(0, |seg| self.control[i].put_segment(seg));
    }

    /// The first `n` headers, pointing into `self`.
    fn headers(&mut self, n: usize) -> [libc::mmsghdr; SEND_BATCH] {
        // SAFETY: all-zero is a valid mmsghdr (integers and null pointers).
        let mut hdrs: [libc::mmsghdr; SEND_BATCH] = unsafe { mem::zeroed() };
        for (i, m) in hdrs.iter_mut().enumerate().take(n) {
            let h = &mut m.msg_hdr;
            // No address (the connected peer) must be a null name: the kernel refuses a name
            // of length 0.
            if self.name_lens[i] > 0 {
                h.msg_name = (&mut self.names[i] as *mut RawAddr).cast();
                h.msg_namelen = self.name_lens[i];
            }
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            if self.control_lens[i] > 0 {
                h.msg_control = self.control[i].0.as_mut_ptr().cast();
                h.msg_controllen = self.control_lens[i] as _;
            }
        }
        hdrs
    }
}

/// Writes `addr` in the kernel's layout; returns its length.
fn std_to_raw(addr: &SocketAddr, out: &mut RawAddr) -> libc::socklen_t {
    match addr {
        SocketAddr::V4(a) => {
            out.v4 = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(a) => {
            out.v6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo().to_be(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

/// Reads an address the kernel wrote into a `sockaddr_in6`-sized buffer.
fn sockaddr_to_std(raw: &libc::sockaddr_in6, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    match raw.sin6_family as c_int {
        libc::AF_INET if len >= mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the kernel wrote a sockaddr_in at the start of this buffer (the family
            // says so and the length covers it); sockaddr_in is smaller than sockaddr_in6 and
            // needs no stricter alignment, and every bit pattern of it is valid.
            let v4: libc::sockaddr_in =
                unsafe { std::ptr::read((raw as *const libc::sockaddr_in6).cast()) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(v4.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(v4.sin_port),
            )))
        }
        libc::AF_INET6 if len >= mem::size_of::<libc::sockaddr_in6>() => {
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(raw.sin6_addr.s6_addr),
                u16::from_be(raw.sin6_port),
                u32::from_be(raw.sin6_flowinfo),
                raw.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[derive(Clone, Copy, Debug)]
enum Control {
    Gro(usize),
    Drops(u32),
}

/// The control messages ferry understands (at most two per datagram).
///
/// # Safety
/// `hdr.msg_control` must point at a readable buffer of at least `hdr.msg_controllen` bytes (or
/// be null), filled by the kernel.
unsafe fn parse_control(hdr: &libc::msghdr) -> [Option<Control>; 2] {
    let mut out = [None, None];
    let mut n = 0;
    // msg_controllen is size_t on glibc and socklen_t on musl.
    #[allow(clippy::unnecessary_cast)]
    let control_len = hdr.msg_controllen as usize;
    if hdr.msg_control.is_null() || control_len < mem::size_of::<libc::cmsghdr>() {
        return out;
    }
    // SAFETY: the caller guarantees the control buffer; CMSG_FIRSTHDR/NXTHDR stay inside
    // msg_controllen and return null at the end.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(hdr) };
    while !c.is_null() && n < out.len() {
        // SAFETY: `c` is a non-null header inside the buffer, as CMSG_FIRSTHDR/NXTHDR checked.
        let (level, ty, len) = unsafe { ((*c).cmsg_level, (*c).cmsg_type, (*c).cmsg_len as usize) };
        // SAFETY: pure arithmetic.
        let data_len = len.saturating_sub(unsafe { libc::CMSG_LEN(0) } as usize);
        // SAFETY: CMSG_DATA is the payload right after the header, in the buffer.
        let data = unsafe { libc::CMSG_DATA(c) };
        match (level, ty) {
            (libc::SOL_UDP, UDP_GRO) if data_len >= mem::size_of::<c_int>() => {
                // SAFETY: the payload holds a c_int (length checked); it may be unaligned.
                let seg = unsafe { std::ptr::read_unaligned(data.cast::<c_int>()) };
                out[n] = Some(Control::Gro(seg.max(0) as usize));
                n += 1;
            }
            (libc::SOL_SOCKET, SO_RXQ_OVFL) if data_len >= mem::size_of::<u32>() => {
                // SAFETY: the payload holds a u32 (length checked); it may be unaligned.
                let d = unsafe { std::ptr::read_unaligned(data.cast::<u32>()) };
                out[n] = Some(Control::Drops(d));
                n += 1;
            }
            _ => {}
        }
        // SAFETY: as for CMSG_FIRSTHDR.
        c = unsafe { libc::CMSG_NXTHDR(hdr, c) };
    }
    out
}

fn is_gso_refusal(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO) | Some(libc::EINVAL) | Some(ENOTSUPP) | Some(libc::EOPNOTSUPP)
    )
}

fn check_multicast(mc: &Multicast, v6: bool) -> io::Result<()> {
    let ok = match (mc.group, mc.interface) {
        (IpAddr::V4(g), MulticastInterface::V4(_)) => !v6 && g.is_multicast(),
        (IpAddr::V6(g), MulticastInterface::V6(_)) => v6 && g.is_multicast(),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "multicast group {} on interface {:?} does not fit a socket bound to an IPv{} \
                 address (the group must be a multicast address of the socket's family, the \
                 interface an IPv4 address for IPv4 or an interface index for IPv6)",
                mc.group,
                mc.interface,
                if v6 { 6 } else { 4 }
            ),
        ))
    }
}

fn setsockopt_int(fd: BorrowedFd<'_>, level: c_int, name: c_int, value: c_int) -> io::Result<()> {
    // SAFETY: `value` is a live c_int and the length passed is its size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const c_int).cast(),
            mem::size_of::<c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
fn getsockopt_int(fd: BorrowedFd<'_>, level: c_int, name: c_int) -> io::Result<c_int> {
    let mut value: c_int = 0;
    let mut len = mem::size_of::<c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are valid for writes, `len` is the size of `value`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut value as *mut c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn read_sysctl(name: &str) -> Option<usize> {
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn buffer_report(sock: &Socket, opts: &SocketOptions) -> BufferReport {
    // Linux reports twice what it grants.
    let recv_granted = sock.recv_buffer_size().unwrap_or(0) / 2;
    let send_granted = sock.send_buffer_size().unwrap_or(0) / 2;
    let mut warnings = Vec::new();
    for (what, requested, granted, sysctl) in [
        (
            "receive",
            opts.recv_buffer,
            recv_granted,
            "net.core.rmem_max",
        ),
        ("send", opts.send_buffer, send_granted, "net.core.wmem_max"),
    ] {
        if let Some(req) = requested {
            if granted < req {
                let limit = match read_sysctl(sysctl) {
                    Some(v) => format!("{sysctl} = {v}"),
                    None => sysctl.to_owned(),
                };
                warnings.push(format!(
                    "UDP {what} buffer: asked for {req} bytes, the kernel granted {granted} \
                     (capped by {limit}); raise it with `sysctl -w {sysctl}={req}`"
                ));
            }
        }
    }
    BufferReport {
        recv_requested: opts.recv_buffer,
        recv_granted,
        send_requested: opts.send_buffer,
        send_granted,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    const V4: &str = "127.0.0.1:0";
    const V6: &str = "[::1]:0";

    fn opts(gso: bool, gro: bool) -> SocketOptions {
        SocketOptions {
            gso,
            gro,
            recv_buffer: Some(4 << 20),
            ..SocketOptions::default()
        }
    }

    fn bind(addr: &str, o: &SocketOptions) -> UdpSocket {
        UdpSocket::bind(addr.parse().unwrap(), o).unwrap()
    }

    fn v6_available() -> bool {
        match std::net::UdpSocket::bind("[::1]:0") {
            Ok(_) => true,
            Err(e) => {
                println!("skipping IPv6: {e}");
                false
            }
        }
    }

    /// Receives until `want` datagrams arrived or 5 s passed.
    fn recv_n(sock: &UdpSocket, want: usize) -> Vec<(SocketAddr, Vec<u8>)> {
        let mut batch = RecvBatch::for_socket(sock);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut got = Vec::new();
        while got.len() < want && Instant::now() < deadline {
            let n = sock
                .recv_batch(&mut batch, Some(Duration::from_millis(100)))
                .unwrap();
            assert_eq!(n, batch.len());
            got.extend(batch.iter().map(|(a, d)| (a, d.to_vec())));
        }
        got
    }

    /// Sends all of `data`, waiting for room when the kernel has none.
    fn send_all(sock: &UdpSocket, dst: SocketAddr, data: &[u8], segment: usize) -> usize {
        let total = data.len().div_ceil(segment);
        let mut sent = 0;
        let deadline = Instant::now() + Duration::from_secs(5);
        while sent < total {
            assert!(Instant::now() < deadline, "send timed out");
            match sock.send_segments(dst, &data[sent * segment..], segment) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    sock.wait_writable(Duration::from_millis(100)).unwrap();
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("send: {e}"),
            }
        }
        sent
    }

    /// `count` datagrams of `segment` bytes, the last one `last` bytes; each starts with its
    /// index and is filled with a pattern derived from it.
    fn pattern(count: usize, segment: usize, last: usize) -> (Vec<u8>, Vec<Vec<u8>>) {
        let mut expected = Vec::new();
        for i in 0..count {
            let len = if i + 1 == count { last } else { segment };
            let mut d: Vec<u8> = (0..len).map(|j| (i * 7 + j * 13) as u8).collect();
            d[..4].copy_from_slice(&(i as u32).to_le_bytes());
            expected.push(d);
        }
        (expected.concat(), expected)
    }

    fn segments_roundtrip(local: &str) {
        for (gso, gro) in [(false, false), (true, false), (false, true), (true, true)] {
            let rx = bind(local, &opts(false, gro));
            let tx = bind(local, &opts(gso, false));
            println!(
                "{local} gso={gso} gro={gro}: tx {:?}, rx {:?}",
                tx.capabilities(),
                rx.capabilities()
            );
            let dst = rx.local_addr().unwrap();
            for (count, segment, last) in [(200, 1200, 500), (3, 1472, 1472), (1, 100, 100)] {
                let (data, expected) = pattern(count, segment, last);
                assert_eq!(send_all(&tx, dst, &data, segment), count);
                let got = recv_n(&rx, count);
                assert_eq!(got.len(), count, "gso={gso} gro={gro} count={count}");
                for (i, (from, d)) in got.iter().enumerate() {
                    assert_eq!(*from, tx.local_addr().unwrap());
                    assert_eq!(d.len(), expected[i].len(), "datagram {i} size");
                    assert!(d == &expected[i], "datagram {i} content");
                }
            }
            assert_eq!(rx.truncated(), 0);
            assert_eq!(rx.kernel_drops(), 0);
            if tx.capabilities().gso && rx.capabilities().gro {
                // GSO trains arrive coalesced and are split again.
                assert!(rx.gro_coalesced() > 0);
            }
        }
    }

    #[test]
    fn send_segments_v4_all_gso_gro_combinations() {
        segments_roundtrip(V4);
    }

    #[test]
    fn send_segments_v6_all_gso_gro_combinations() {
        if v6_available() {
            segments_roundtrip(V6);
        }
    }

    #[test]
    fn capabilities_follow_options() {
        let plain = bind(V4, &opts(false, false));
        let c = plain.capabilities();
        assert!(!c.gso && !c.gro && c.max_gso_segments == 1);
        assert!(c.rxq_ovfl, "SO_RXQ_OVFL refused");
        let full = bind(V4, &opts(true, true));
        let c = full.capabilities();
        println!("kernel capabilities: {c:?}");
        if c.gso {
            assert_eq!(c.max_gso_segments, MAX_GSO_SEGMENTS);
        }
        assert_eq!(c.gso_disabled_errno, None);
    }

    #[test]
    fn send_many_to_several_destinations() {
        let a = bind(V4, &opts(false, false));
        let b = bind(V4, &opts(false, true));
        let tx = bind(V4, &opts(true, false));
        let (da, db) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let payloads: Vec<Vec<u8>> = (0..150).map(|i| vec![i as u8; i * 10]).collect();
        let msgs: Vec<(SocketAddr, &[u8])> = payloads
            .iter()
            .enumerate()
            .map(|(i, p)| (if i % 3 == 0 { db } else { da }, p.as_slice()))
            .collect();
        let mut sent = 0;
        let deadline = Instant::now() + Duration::from_secs(5);
        while sent < msgs.len() {
            assert!(Instant::now() < deadline);
            match tx.send_many(&msgs[sent..]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    tx.wait_writable(Duration::from_millis(100)).unwrap();
                }
                Err(e) => panic!("{e}"),
            }
        }
        let want_b: Vec<&Vec<u8>> = payloads.iter().step_by(3).collect();
        let want_a: Vec<&Vec<u8>> = payloads
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 3 != 0)
            .map(|(_, p)| p)
            .collect();
        let got_a = recv_n(&a, want_a.len());
        let got_b = recv_n(&b, want_b.len());
        assert_eq!(got_a.len(), want_a.len());
        assert_eq!(got_b.len(), want_b.len());
        for (got, want) in [(got_a, want_a), (got_b, want_b)] {
            for ((from, d), w) in got.iter().zip(want) {
                assert_eq!(*from, tx.local_addr().unwrap());
                assert_eq!(d, w);
            }
        }
        // An empty datagram is a datagram.
        tx.send_to(da, &[]).unwrap();
        let got = recv_n(&a, 1);
        assert_eq!(got.len(), 1);
        assert!(got[0].1.is_empty());
    }

    #[test]
    fn multicast_v4_on_loopback() {
        let group: Ipv4Addr = "239.255.42.99".parse().unwrap();
        let mc = Multicast {
            group: IpAddr::V4(group),
            interface: MulticastInterface::V4(Ipv4Addr::LOCALHOST),
            ttl_or_hops: 1,
            loopback: true,
        };
        let mk = |addr: SocketAddr| {
            UdpSocket::bind(
                addr,
                &SocketOptions {
                    multicast: Some(mc),
                    ..opts(true, false)
                },
            )
        };
        let rx1 = match mk("0.0.0.0:0".parse().unwrap()) {
            Ok(s) => s,
            Err(e) => {
                println!("skipping multicast: the kernel refused to join: {e}");
                return;
            }
        };
        let port = rx1.local_addr().unwrap().port();
        let rx2 = mk(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port)).unwrap();
        let tx = mk("127.0.0.1:0".parse().unwrap()).unwrap();
        let dst = SocketAddr::new(group.into(), port);
        let (data, expected) = pattern(10, 1000, 1000);
        if let Err(e) = tx.send_segments(dst, &data, 1000) {
            println!("skipping multicast: the kernel refused to send to {dst}: {e}");
            return;
        }
        for rx in [&rx1, &rx2] {
            let got = recv_n(rx, 10);
            if got.is_empty() {
                println!("skipping multicast: nothing arrived on loopback");
                return;
            }
            let got: Vec<Vec<u8>> = got.into_iter().map(|(_, d)| d).collect();
            assert_eq!(got, expected);
        }
    }

    #[test]
    fn multicast_v6_on_loopback() {
        if !v6_available() {
            return;
        }
        let group: Ipv6Addr = "ff15::f3:42".parse().unwrap();
        let mc = Multicast {
            group: IpAddr::V6(group),
            interface: MulticastInterface::V6(1),
            ttl_or_hops: 1,
            loopback: true,
        };
        let o = SocketOptions {
            multicast: Some(mc),
            ..opts(false, false)
        };
        let rx = match UdpSocket::bind("[::]:0".parse().unwrap(), &o) {
            Ok(s) => s,
            Err(e) => {
                println!("skipping IPv6 multicast: the kernel refused to join: {e}");
                return;
            }
        };
        let port = rx.local_addr().unwrap().port();
        let tx = UdpSocket::bind("[::1]:0".parse().unwrap(), &o).unwrap();
        let dst = SocketAddr::new(group.into(), port);
        if let Err(e) = tx.send_to(dst, b"hello v6 group") {
            println!("skipping IPv6 multicast: the kernel refused to send to {dst}: {e}");
            return;
        }
        let got = recv_n(&rx, 1);
        if got.is_empty() {
            println!("skipping IPv6 multicast: nothing arrived on loopback");
            return;
        }
        assert_eq!(got[0].1, b"hello v6 group");
    }

    #[test]
    fn multicast_family_mismatch_is_an_error() {
        let mc = Multicast {
            group: "239.1.2.3".parse().unwrap(),
            interface: MulticastInterface::V6(0),
            ttl_or_hops: 1,
            loopback: true,
        };
        let o = SocketOptions {
            multicast: Some(mc),
            ..SocketOptions::default()
        };
        let e = UdpSocket::bind(V4.parse().unwrap(), &o).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let mc = Multicast {
            group: "10.0.0.1".parse().unwrap(),
            interface: MulticastInterface::V4(Ipv4Addr::LOCALHOST),
            ..mc
        };
        let o = SocketOptions {
            multicast: Some(mc),
            ..SocketOptions::default()
        };
        assert!(UdpSocket::bind(V4.parse().unwrap(), &o).is_err());
    }

    #[test]
    fn never_fragments_and_oversize_fails_cleanly() {
        let tx = bind(V4, &opts(true, false));
        let rx = bind(V4, &opts(false, false));
        let dst = rx.local_addr().unwrap();
        assert_eq!(
            getsockopt_int(tx.as_fd(), libc::IPPROTO_IP, libc::IP_MTU_DISCOVER).unwrap(),
            libc::IP_PMTUDISC_DO
        );
        let big = vec![0u8; MAX_PAYLOAD_V4 + 1];
        let e = tx.send_to(dst, &big).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EMSGSIZE), "{e}");
        let e = tx.send_segments(dst, &big, big.len()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EMSGSIZE), "{e}");
        // The largest datagram goes through.
        tx.send_to(dst, &big[..MAX_PAYLOAD_V4]).unwrap();
        // Bad arguments are errors, not panics.
        let e = tx.send_segments(dst, &big, 0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(tx.send_segments(dst, &[], 100).unwrap(), 0);
        // A v6 destination on a v4 socket.
        assert!(tx.send_to("[::1]:9".parse().unwrap(), b"x").is_err());
        // GSO with a segment beyond the limit: an error, and GSO stays on.
        let e = tx.send_segments(dst, &vec![0u8; 140_000], 70_000);
        assert!(e.is_err());
        assert_eq!(tx.capabilities().gso_disabled_errno, None);

        if v6_available() {
            let tx = bind(V6, &opts(true, false));
            let rx = bind(V6, &opts(false, false));
            let dst = rx.local_addr().unwrap();
            assert_eq!(
                getsockopt_int(tx.as_fd(), libc::IPPROTO_IPV6, libc::IPV6_DONTFRAG).unwrap(),
                1
            );
            assert_eq!(
                getsockopt_int(tx.as_fd(), libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER).unwrap(),
                libc::IPV6_PMTUDISC_DO
            );
            let big = vec![0u8; MAX_PAYLOAD_V6 + 1];
            let e = tx.send_to(dst, &big).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EMSGSIZE), "{e}");
        }
    }

    #[test]
    fn kernel_drops_count_a_full_receive_queue() {
        let rx = bind(
            V4,
            &SocketOptions {
                recv_buffer: Some(1),
                gro: false,
                ..SocketOptions::default()
            },
        );
        let tx = bind(V4, &opts(false, false));
        let dst = rx.local_addr().unwrap();
        assert_eq!(rx.kernel_drops(), 0);
        // Nobody reads: a minimal queue overflows after a few datagrams.
        let data = vec![7u8; 1000 * 200];
        let mut sent = 0;
        let deadline = Instant::now() + Duration::from_secs(5);
        while sent < 200 && Instant::now() < deadline {
            match tx.send_segments(dst, &data[sent * 1000..], 1000) {
                Ok(n) => sent += n,
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        // Loopback delivery runs in softirq context: let it finish.
        std::thread::sleep(Duration::from_millis(50));
        let drops = rx.kernel_drops();
        println!("sent {sent}, kernel dropped {drops}");
        assert!(drops > 0);
        // Drain, then one more datagram arrives carrying the drop count (SO_RXQ_OVFL).
        let mut batch = RecvBatch::for_socket(&rx);
        let mut queued = 0;
        while rx.recv_batch(&mut batch, None).unwrap() > 0 {
            queued += batch.len();
        }
        assert_eq!(queued as u64 + drops, sent as u64);
        tx.send_to(dst, b"after").unwrap();
        let got = recv_n(&rx, 1);
        assert_eq!(got[0].1, b"after");
        assert!(rx.drops_from_cmsg.load(Ordering::Relaxed));
        assert_eq!(rx.kernel_drops(), drops);
    }

    #[test]
    fn gso_refused_at_run_time_falls_back_to_plain_sends() {
        let rx = bind(V4, &opts(false, false));
        let tx = bind(V4, &opts(true, false));
        if !tx.capabilities().gso {
            println!("skipping: no GSO in this kernel");
            return;
        }
        // Without transmit checksums the kernel refuses GSO (EINVAL) but sends plain datagrams.
        const SO_NO_CHECK: c_int = 11;
        setsockopt_int(tx.as_fd(), libc::SOL_SOCKET, SO_NO_CHECK, 1).unwrap();
        let dst = rx.local_addr().unwrap();
        let (data, expected) = pattern(10, 1000, 700);
        assert_eq!(tx.send_segments(dst, &data, 1000).unwrap(), 10);
        let c = tx.capabilities();
        assert!(!c.gso);
        assert_eq!(c.max_gso_segments, 1);
        assert_eq!(c.gso_disabled_errno, Some(libc::EINVAL));
        let got: Vec<Vec<u8>> = recv_n(&rx, 10).into_iter().map(|(_, d)| d).collect();
        assert_eq!(got, expected);
        // Later sends go plain straight away.
        assert_eq!(tx.send_segments(dst, &data, 1000).unwrap(), 10);
        assert_eq!(recv_n(&rx, 10).len(), 10);
    }

    #[test]
    fn kernel_capabilities_probe() {
        let c = kernel_capabilities().unwrap();
        println!("{c:?}");
        assert!(c.rxq_ovfl);
    }

    #[test]
    fn drop_counter_extends_past_32_bits() {
        let s = bind(V4, &opts(false, false));
        s.note_drops((1 << 31) - 1);
        s.note_drops(u32::MAX - 1);
        s.note_drops(3); // wrapped: +5
        assert_eq!(s.drops.load(Ordering::Relaxed), u32::MAX as u64 + 4);
        s.note_drops(2); // stale: ignored
        assert_eq!(s.drops.load(Ordering::Relaxed), u32::MAX as u64 + 4);
    }

    #[test]
    fn buffer_report_shows_the_cap() {
        let Some(max) = read_sysctl("net.core.rmem_max") else {
            println!("skipping: net.core.rmem_max unreadable");
            return;
        };
        let s = bind(
            V4,
            &SocketOptions {
                recv_buffer: Some(max * 2),
                send_buffer: Some(64 * 1024),
                ..SocketOptions::default()
            },
        );
        let r = s.buffer_report();
        println!("{r:?}");
        assert_eq!(r.recv_requested, Some(max * 2));
        assert_eq!(r.recv_granted, max);
        assert!(r.is_capped());
        assert_eq!(r.warnings.len(), 1);
        assert!(
            r.warnings[0].contains("net.core.rmem_max"),
            "{}",
            r.warnings[0]
        );
        assert!(r.warnings[0].contains(&format!("sysctl -w net.core.rmem_max={}", max * 2)));
        assert!(r.send_granted >= 64 * 1024);

        if max >= 4 << 20 {
            let s = bind(V4, &opts(false, false));
            assert!(!s.buffer_report().is_capped());
            assert_eq!(s.buffer_report().recv_granted, 4 << 20);
        }
    }

    #[test]
    fn recv_waits_at_most_the_timeout() {
        let s = bind(V4, &opts(false, true));
        let mut batch = RecvBatch::for_socket(&s);
        let t = Instant::now();
        assert_eq!(s.recv_batch(&mut batch, None).unwrap(), 0);
        // A caller's loop until its deadline: every call comes back empty, none overshoots by
        // more than the machine's noise, and the loop ends.
        let deadline = t + Duration::from_millis(50);
        let mut calls = 0;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            assert_eq!(s.recv_batch(&mut batch, Some(left)).unwrap(), 0);
            calls += 1;
            assert!(calls < 10_000, "the wait loop does not end");
        }
        let waited = t.elapsed();
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        assert!(batch.is_empty());
        // A GRO socket refuses slots too small for a coalesced buffer.
        let mut small = RecvBatch::new(4, 2048);
        let e = s.recv_batch(&mut small, None).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn a_connected_socket_sends_without_address_and_keeps_its_port_when_disconnected() {
        let o = opts(true, false);
        let tx = UdpSocket::bind_chosen_port("127.0.0.1".parse().unwrap(), &o).unwrap();
        let port = tx.local_addr().unwrap().port();
        let peer = bind(V4, &opts(false, false));
        let other = bind(V4, &opts(false, false));
        let peer_addr = peer.local_addr().unwrap();
        // A socket bound to port 0 refuses: it would lose its port on disconnect.
        let auto = bind(V4, &o);
        assert_eq!(
            auto.connect(Some(peer_addr)).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        tx.connect(Some(peer_addr)).unwrap();
        // One datagram, and a GSO train of several.
        assert_eq!(tx.send_segments_connected(b"one", 1472).unwrap(), 1);
        let train = vec![5u8; 1472 * 3 + 10];
        assert_eq!(tx.send_segments_connected(&train, 1472).unwrap(), 4);
        let got = recv_n(&peer, 5);
        assert_eq!(got.len(), 5);
        assert!(got.iter().all(|(a, _)| a.port() == port));
        assert_eq!(got[0].1, b"one");
        // While connected, only the peer's datagrams come in.
        let me = SocketAddr::new("127.0.0.1".parse().unwrap(), port);
        other.send_to(me, b"stranger").unwrap();
        peer.send_to(me, b"peer").unwrap();
        let got = recv_n(&tx, 1);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1, b"peer");
        // Dissolved: same port, datagrams from anyone again.
        tx.connect(None).unwrap();
        assert_eq!(tx.local_addr().unwrap().port(), port);
        other.send_to(me, b"stranger again").unwrap();
        let got = recv_n(&tx, 1);
        assert_eq!(got[0].1, b"stranger again");
        assert!(tx.send_segments_connected(b"nowhere", 1472).is_err());
    }

    #[test]
    fn blocking_steps_stay_short_of_the_wait() {
        let tick = kernel_tick();
        assert!(tick >= Duration::from_micros(100) && tick <= Duration::from_millis(20));
        for ms in [
            0u64, 1, 2, 5, 9, 10, 12, 15, 19, 20, 21, 33, 50, 100, 999, 5000, 60_000,
        ] {
            let left = Duration::from_millis(ms);
            match rcvtimeo_step(left) {
                // The kernel rounds up to a tick and may wake a tick later: still within `left`.
                Some(step) => {
                    assert!(step >= tick, "{ms} ms: {step:?}");
                    assert!(
                        step + tick + Duration::from_millis(1) <= left,
                        "{ms} ms: {step:?}"
                    );
                    let ticks = step.as_nanos() / tick.as_nanos();
                    assert!(ticks.is_power_of_two(), "{ms} ms: {ticks} ticks");
                    assert_eq!(step.as_nanos() % tick.as_nanos(), 0);
                }
                None => assert!(left < 2 * tick + Duration::from_millis(1), "{ms} ms"),
            }
        }
        // Successive waits of one tick period reuse one value (no setsockopt per wait).
        let a = rcvtimeo_step(Duration::from_millis(19));
        let b = rcvtimeo_step(Duration::from_millis(18));
        if a.is_some() && b.is_some() && tick <= Duration::from_millis(4) {
            assert_eq!(a, b);
        }
    }

    #[test]
    fn oversized_datagrams_are_counted_not_delivered() {
        let rx = bind(V4, &opts(false, false));
        let tx = bind(V4, &opts(false, false));
        let dst = rx.local_addr().unwrap();
        tx.send_to(dst, &[1u8; 3000]).unwrap();
        tx.send_to(dst, &[2u8; 100]).unwrap();
        let mut batch = RecvBatch::new(8, 2048);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut got = Vec::new();
        while got.is_empty() && Instant::now() < deadline {
            rx.recv_batch(&mut batch, Some(Duration::from_millis(100)))
                .unwrap();
            got.extend(batch.iter().map(|(_, d)| d.to_vec()));
        }
        assert_eq!(got, vec![vec![2u8; 100]]);
        assert_eq!(rx.truncated(), 1);
    }

    /// Loopback throughput of 1472-byte datagrams, ~1 s per mode. Run with
    /// `cargo test --release -p ferry --lib sys::udp -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn loopback_throughput() {
        for (name, gso, gro) in [
            ("sendmmsg + recvmmsg", false, false),
            ("GSO + recvmmsg", true, false),
            ("GSO + GRO", true, true),
        ] {
            throughput(name, gso, gro, Duration::from_secs(1));
        }
    }

    fn throughput(name: &str, gso: bool, gro: bool, run: Duration) {
        use std::sync::Arc;
        const SEG: usize = 1472;
        const PER_CALL: usize = 64;
        let rx = bind(V4, &opts(false, gro));
        let tx = Arc::new(bind(
            V4,
            &SocketOptions {
                send_buffer: Some(4 << 20),
                ..opts(gso, false)
            },
        ));
        let dst = rx.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let sender = {
            let (tx, stop) = (tx.clone(), stop.clone());
            std::thread::spawn(move || {
                let data = vec![0x5au8; SEG * PER_CALL];
                let mut sent = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    match tx.send_segments(dst, &data, SEG) {
                        Ok(n) => sent += n as u64,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            let _ = tx.wait_writable(Duration::from_millis(10));
                        }
                        Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                            std::thread::yield_now();
                        }
                        Err(e) => panic!("send: {e}"),
                    }
                }
                sent
            })
        };
        let mut batch = RecvBatch::for_socket(&rx);
        let start = Instant::now();
        let (mut datagrams, mut bytes) = (0u64, 0u64);
        while start.elapsed() < run {
            rx.recv_batch(&mut batch, Some(Duration::from_millis(10)))
                .unwrap();
            datagrams += batch.len() as u64;
            bytes += batch.iter().map(|(_, d)| d.len() as u64).sum::<u64>();
        }
        let elapsed = start.elapsed();
        stop.store(true, Ordering::Relaxed);
        let sent = sender.join().unwrap();
        println!(
            "{name:>20}: {:6.2} Gbit/s received ({datagrams} datagrams in {:.2} s, {:.0} kdatagrams/s), \
             sent {sent}, kernel drops {}, tx gso {}, rx gro {} ({} coalesced buffers)",
            bytes as f64 * 8.0 / elapsed.as_secs_f64() / 1e9,
            elapsed.as_secs_f64(),
            datagrams as f64 / elapsed.as_secs_f64() / 1e3,
            rx.kernel_drops(),
            tx.capabilities().gso,
            rx.capabilities().gro,
            rx.gro_coalesced(),
        );
    }
}
