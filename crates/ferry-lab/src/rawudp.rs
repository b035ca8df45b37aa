//! The raw UDP baseline: two processes with plain *blocking* `std::net::UdpSocket`s on
//! 127.0.0.1, one datagram per message, no framing or protocol of any kind: the floor of a naive
//! UDP message on this machine. Also the kernel's drop counter of a UDP socket, read from
//! `/proc/net/udp` (the same number for ferry's sockets and for plain ones).

use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use super::{fill, pattern, verify, Dir, Endpoint, Watched};
use crate::error::{bail, Context, Result};

/// The largest UDP payload of one IPv4 datagram (65535 − 8 UDP − 20 IP header bytes).
pub const MAX_DATAGRAM_V4: usize = 65_507;

/// What the peer sends first, so that the main process learns its address.
const HELLO: &[u8] = b"ferry-lab-hello";

/// A blocking socket bound to 127.0.0.1 on a port the kernel picks.
pub fn bind_loopback() -> Result<UdpSocket> {
    UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot bind a UDP socket on 127.0.0.1")
}

/// Sets the receive timeout (the socket stays blocking: `recv` sleeps in the kernel).
fn set_timeout(socket: &UdpSocket, t: Duration) -> Result<()> {
    socket
        .set_read_timeout(Some(t.max(Duration::from_micros(1))))
        .context("cannot set a UDP receive timeout")
}

fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// One end of a raw UDP ping-pong: a connected blocking socket and a buffer per direction.
pub struct RawUdpEnd {
    socket: UdpSocket,
    out: Dir,
    inp: Dir,
    send_buf: Vec<u8>,
    recv_buf: Vec<u8>,
    /// The receive timeout currently set (set again only when a caller asks for another).
    timeout: Duration,
}

impl RawUdpEnd {
    fn new(socket: UdpSocket, out: Dir, max_size: usize) -> Result<RawUdpEnd> {
        let inp = match out {
            Dir::Ping => Dir::Pong,
            Dir::Pong => Dir::Ping,
        };
        let timeout = super::WAIT_SLICE;
        set_timeout(&socket, timeout)?;
        // One byte more than the largest message, so that a longer datagram shows as such
        // instead of being cut to the expected length.
        let cap = max_size.min(MAX_DATAGRAM_V4) + 1;
        Ok(RawUdpEnd {
            socket,
            out,
            inp,
            send_buf: vec![0; cap],
            recv_buf: vec![0; cap],
            timeout,
        })
    }

    /// The main side: waits (watching the peer) for the peer's hello on `socket`, then talks to
    /// the address it came from.
    pub fn accept(
        socket: UdpSocket,
        peer: &mut dyn Watched,
        max_size: usize,
        timeout: Duration,
    ) -> Result<RawUdpEnd> {
        set_timeout(&socket, Duration::from_millis(10))?;
        let mut buf = [0u8; 64];
        let mut from = None;
        peer.wait_until(timeout, &mut || {
            match socket.recv_from(&mut buf) {
                Ok((n, addr)) if &buf[..n] == HELLO => from = Some(addr),
                Ok(_) => {}
                Err(e) if timed_out(&e) => {}
                Err(e) => return Err(e.into()),
            }
            Ok(from.is_some())
        })?;
        let addr = from.expect("wait_ready returned once the hello came");
        socket
            .connect(addr)
            .context(format!("cannot connect the UDP socket to {addr}"))?;
        RawUdpEnd::new(socket, Dir::Ping, max_size)
    }

    /// The peer side: binds, talks to the main process at `main` and says hello.
    pub fn connect(main: SocketAddr, max_size: usize) -> Result<RawUdpEnd> {
        let socket = if main.ip().is_loopback() {
            bind_loopback()?
        } else {
            UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).context("cannot bind a UDP socket")?
        };
        socket
            .connect(main)
            .context(format!("cannot connect the UDP socket to {main}"))?;
        socket
            .send(HELLO)
            .context("cannot send to the main process")?;
        RawUdpEnd::new(socket, Dir::Pong, max_size)
    }
}

impl Endpoint for RawUdpEnd {
    fn send(&mut self, seq: u64, len: usize) -> Result<()> {
        if len > MAX_DATAGRAM_V4 {
            bail!("a {len}-byte message does not fit one UDP datagram ({MAX_DATAGRAM_V4} bytes at most)");
        }
        let buf = &mut self.send_buf[..len];
        fill(buf, pattern(seq, self.out));
        let sent = self.socket.send(buf).context("UDP send")?;
        if sent != len {
            bail!("UDP send took {sent} of {len} bytes");
        }
        Ok(())
    }

    fn recv(&mut self, seq: u64, len: usize, slice: Duration) -> Result<bool> {
        if slice != self.timeout {
            set_timeout(&self.socket, slice)?;
            self.timeout = slice;
        }
        match self.socket.recv(&mut self.recv_buf) {
            Ok(n) => {
                verify(&self.recv_buf[..n], seq, None, len, self.inp)?;
                Ok(true)
            }
            // A timeout, or a signal (the caller looks at Ctrl-C between slices).
            Err(e) if timed_out(&e) => Ok(false),
            Err(e) => Err(e).context("UDP receive"),
        }
    }
}

/// The kernel's count of datagrams dropped on the UDP socket bound to local `port` (its receive
/// queue was full), from the last column of `/proc/net/udp` or `/proc/net/udp6`; `None` if no
/// such socket is listed.
pub fn kernel_drops(port: u16, v6: bool) -> Option<u64> {
    let table = if v6 {
        "/proc/net/udp6"
    } else {
        "/proc/net/udp"
    };
    let text = std::fs::read_to_string(table).ok()?;
    parse_drops(&text, port)
}

fn parse_drops(table: &str, port: u16) -> Option<u64> {
    let mut total = None;
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some(local) = fields.get(1) else { continue };
        let Some((_, p)) = local.rsplit_once(':') else {
            continue;
        };
        if u16::from_str_radix(p, 16).ok() != Some(port) {
            continue;
        }
        if let Some(drops) = fields.last().and_then(|d| d.parse::<u64>().ok()) {
            *total.get_or_insert(0) += drops;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_from_proc_net_udp() {
        let table = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
  123: 0100007F:A1B2 0100007F:0035 01 00000000:00000000 00:00000000 00000000     0        0 41 2 0000000000000000 17\n\
  124: 00000000:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 42 2 0000000000000000 0\n";
        assert_eq!(parse_drops(table, 0xA1B2), Some(17));
        assert_eq!(parse_drops(table, 53), Some(0));
        assert_eq!(parse_drops(table, 1), None);
    }

    #[test]
    fn drops_of_a_live_socket() {
        let s = bind_loopback().unwrap();
        let port = s.local_addr().unwrap().port();
        assert_eq!(kernel_drops(port, false), Some(0));
    }

    #[test]
    fn ping_pong_in_one_process() {
        let main = bind_loopback().unwrap();
        let port = main.local_addr().unwrap().port();
        let mut peer_end =
            RawUdpEnd::connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port)), 100).unwrap();
        let mut buf = [0u8; 64];
        let (n, addr) = main.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], HELLO);
        main.connect(addr).unwrap();
        let mut main_end = RawUdpEnd::new(main, Dir::Ping, 100).unwrap();
        for seq in 0..3 {
            main_end.send(seq, 100).unwrap();
            assert!(peer_end.recv(seq, 100, Duration::from_secs(1)).unwrap());
            peer_end.send(seq, 100).unwrap();
            assert!(main_end.recv(seq, 100, Duration::from_secs(1)).unwrap());
        }
        // A wrong length is refused; nothing waiting is a timeout, not an error.
        main_end.send(9, 50).unwrap();
        assert!(peer_end.recv(9, 100, Duration::from_secs(1)).is_err());
        assert!(!peer_end.recv(10, 100, Duration::from_millis(5)).unwrap());
    }
}
