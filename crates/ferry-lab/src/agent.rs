//! `ferry lab agent`: the lab on a second machine. It listens on TCP and, for every connection
//! from an address it was told to trust, runs the peer side of the experiment asked for in a
//! `ferry lab-peer` process of its own, relaying the control lines of [`crate::peer`] both ways.
//! The measurement itself runs over the transport under test, between the two machines; the
//! figures are round trips and receiver counts, which need no common clock.
//!
//! What it accepts: connections from the `--allow` addresses only (loopback when none is
//! given); with a domain key (`FERRY_KEY_FILE`, or `--key-file`), only a connection that
//! answers a fresh random challenge with a tag made with that key; lines of at most
//! `MAX_LINE` bytes; at most [`MAX_JOBS`] connections at once; and every wait for the other
//! side is bounded. Whatever it refuses is counted and logged, never run.

use std::io::{BufReader, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferry::DomainKey;
use serde::Serialize;

use crate::error::{Context, Error, Result};
use crate::experiment::Registry;
use crate::peer::wire::{
    hex, read_line, unhex, Greeting, Hello, Proof, Reply, HANDSHAKE_TIMEOUT, TAG_PURPOSE, VERSION,
};

/// Connections served at once; more are refused.
pub const MAX_JOBS: usize = 16;
/// How long a write to the main side may wait for it to take the bytes.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// How the agent runs.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub listen: SocketAddr,
    /// The addresses whose connections are served; empty: loopback only.
    pub allow: Vec<IpAddr>,
    /// With a key, a connection must prove that it has it.
    pub key: Option<DomainKey>,
    /// The experiments it serves (those of them whose peer may run on another machine).
    pub experiments: &'static Registry,
}

/// What the agent refused, for its log and its last words.
#[derive(Debug, Default)]
pub struct Counters {
    pub served: AtomicU64,
    pub refused_address: AtomicU64,
    pub refused_key: AtomicU64,
    pub refused_busy: AtomicU64,
    pub refused_request: AtomicU64,
}

impl Counters {
    fn describe(&self) -> String {
        // Relaxed: statistics.
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "{} served; refused: {} from other addresses, {} without the key, {} while busy, {} unreadable requests",
            get(&self.served),
            get(&self.refused_address),
            get(&self.refused_key),
            get(&self.refused_busy),
            get(&self.refused_request)
        )
    }
}

fn send_line(stream: &mut TcpStream, value: &impl Serialize) -> Result<()> {
    let mut line = serde_json::to_string(value)?;
    line.push('\n');
    stream.write_all(line.as_bytes())?;
    Ok(())
}

/// Whether the agent serves connections from `ip`.
fn allowed(allow: &[IpAddr], ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    if allow.is_empty() {
        ip.is_loopback()
    } else {
        allow.contains(&ip)
    }
}

/// Runs the agent until Ctrl-C or SIGTERM.
pub fn serve(config: AgentConfig) -> Result<()> {
    let listener =
        TcpListener::bind(config.listen).context(format!("cannot listen on {}", config.listen))?;
    listener.set_nonblocking(true)?;
    let counters = Arc::new(Counters::default());
    let active = Arc::new(AtomicUsize::new(0));
    let config = Arc::new(config);
    crate::note!(
        "ferry lab agent: listening on {}, serving {}{}",
        listener.local_addr()?,
        if config.allow.is_empty() {
            "loopback only".to_owned()
        } else {
            config
                .allow
                .iter()
                .map(IpAddr::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        },
        if config.key.is_some() {
            ", with the domain key"
        } else {
            ""
        }
    );
    loop {
        if let Err(e) = crate::signal::check() {
            crate::note!("ferry lab agent: {}", counters.describe());
            return Err(e);
        }
        let (mut stream, from) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e) => return Err(Error::msg(format!("accept: {e}"))),
        };
        // Relaxed: statistics.
        if !allowed(&config.allow, from.ip()) {
            counters.refused_address.fetch_add(1, Ordering::Relaxed);
            crate::note!("ferry lab agent: refused {from}: not an allowed address");
            let _ = stream.shutdown(Shutdown::Both);
            continue;
        }
        // AcqRel: pairs with the `fetch_sub` of a job thread that ends, so that a slot it gave
        // back is seen here.
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_JOBS {
            active.fetch_sub(1, Ordering::AcqRel);
            counters.refused_busy.fetch_add(1, Ordering::Relaxed);
            let _ = send_line(
                &mut stream,
                &Reply::Error(format!("the agent is busy ({MAX_JOBS} jobs)")),
            );
            continue;
        }
        let (config, counters, active) = (config.clone(), counters.clone(), active.clone());
        std::thread::spawn(move || {
            if let Err(e) = job(stream, &config, &counters) {
                crate::note!("ferry lab agent: {from}: {e}");
            }
            // AcqRel: pairs with the accept loop's `fetch_add`.
            active.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

/// One connection: the handshake, then a peer process whose lines are relayed both ways.
fn job(mut stream: TcpStream, config: &AgentConfig, counters: &Counters) -> Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    // A write the main side does not take within this ends the job, as does a peer machine
    // gone silent (TCP keepalive), so no connection holds a job slot for ever.
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    keepalive(&stream)?;
    // The read timeout bounds each read; this bounds the whole handshake, however slowly its
    // bytes come: past it, the connection is shut and the reads below fail.
    let (handshaken, watch) = std::sync::mpsc::channel::<()>();
    let watched = stream.try_clone()?;
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            watch.recv_timeout(HANDSHAKE_TIMEOUT)
        {
            let _ = watched.shutdown(Shutdown::Both);
        }
    });
    let mut reader = BufReader::new(stream.try_clone()?);
    let challenge = match &config.key {
        Some(_) => {
            let mut c = [0u8; 16];
            rustix::rand::getrandom(&mut c, rustix::rand::GetRandomFlags::empty())?;
            Some(c)
        }
        None => None,
    };
    send_line(
        &mut stream,
        &Greeting {
            agent: "ferry lab agent".to_owned(),
            version: VERSION,
            challenge: challenge.map(|c| hex(&c)),
        },
    )?;
    if let (Some(key), Some(challenge)) = (&config.key, challenge) {
        let proof: Option<Proof> =
            read_line(&mut reader)?.and_then(|line| serde_json::from_str(&line).ok());
        let good = proof
            .and_then(|p| unhex(&p.tag))
            .is_some_and(|tag| key.verify_tag(TAG_PURPOSE, &challenge, &tag));
        if !good {
            counters.refused_key.fetch_add(1, Ordering::Relaxed);
            let _ = send_line(
                &mut stream,
                &Reply::Error("the agent's domain key was not proven".to_owned()),
            );
            return Err(Error::msg("refused: no proof of the domain key"));
        }
    }
    let Some(line) = read_line(&mut reader)? else {
        return Ok(());
    };
    let hello: Hello = match serde_json::from_str(&line) {
        Ok(h) => h,
        Err(e) => {
            counters.refused_request.fetch_add(1, Ordering::Relaxed);
            // serde's message may quote the request: the reply stays short whatever came in.
            let e: String = e.to_string().chars().take(200).collect();
            let _ = send_line(
                &mut stream,
                &Reply::Error(format!("unreadable request: {e}")),
            );
            return Err(Error::msg(format!("refused an unreadable request: {e}")));
        }
    };
    let refusal = match config.experiments.find(&hello.experiment) {
        Err(e) => Some(e.to_string()),
        Ok(e) if !e.across_machines() => Some(format!(
            "the {} experiment runs on one machine; this agent serves {}",
            e.name(),
            config.experiments.across_machines().join(", ")
        )),
        Ok(_) => None,
    };
    if let Some(why) = refusal {
        counters.refused_request.fetch_add(1, Ordering::Relaxed);
        let _ = send_line(&mut stream, &Reply::Error(why.clone()));
        return Err(Error::msg(format!("refused: {why}")));
    }
    // The handshake is over: the watchdog leaves the connection alone.
    drop(handshaken);
    counters.served.fetch_add(1, Ordering::Relaxed);
    crate::note!(
        "ferry lab agent: {} peer for {}",
        hello.experiment,
        stream.peer_addr()?
    );
    stream.set_read_timeout(None)?;

    let exe = std::env::current_exe().context("cannot find the ferry executable")?;
    let mut child = crate::spawn_child(
        Command::new(&exe)
            .args(["lab-peer", "--for-agent"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit()),
    )
    .context("cannot start a peer process")?;
    let mut child_in = child.stdin.take().expect("a piped stdin");
    let child_out = child.stdout.take().expect("a piped stdout");
    writeln!(child_in, "{line}")?;

    // The main side's lines to the peer; the end of them (the main side went away) ends the
    // peer's input, and the peer stops.
    let input = std::thread::spawn(move || {
        while let Ok(Some(line)) = read_line(&mut reader) {
            if writeln!(child_in, "{line}").is_err() {
                break;
            }
        }
    });
    // The peer's lines to the main side, and its last word if it died without one.
    let mut out = BufReader::new(child_out);
    let mut last_word = false;
    while let Ok(Some(line)) = read_line(&mut out) {
        last_word = matches!(
            serde_json::from_str::<Reply>(&line),
            Ok(Reply::Done(()) | Reply::Error(_))
        );
        if stream.write_all(format!("{line}\n").as_bytes()).is_err() {
            break;
        }
    }
    // The peer's output ended: it is exiting. Give it a moment to finish its own cleanup.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            break child.wait()?;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    if !last_word {
        let _ = send_line(
            &mut stream,
            &Reply::Error(format!("the peer process on the agent ended ({status})")),
        );
    }
    let _ = stream.shutdown(Shutdown::Both);
    let _ = input.join();
    Ok(())
}

/// Reads `--allow`'s addresses.
pub fn parse_allow(list: &[String]) -> Result<Vec<IpAddr>> {
    list.iter()
        .map(|a| {
            a.trim()
                .parse::<IpAddr>()
                .map_err(|_| Error::msg(format!("--allow: {a:?} is not an IP address")))
        })
        .collect()
}

/// TCP keepalive on a job's connection: a main side whose machine went away without closing it
/// is found gone within about two minutes (60 s idle, then 6 probes 10 s apart).
fn keepalive(stream: &TcpStream) -> std::io::Result<()> {
    use rustix::net::sockopt;
    sockopt::set_socket_keepalive(stream, true)?;
    sockopt::set_tcp_keepidle(stream, Duration::from_secs(60))?;
    sockopt::set_tcp_keepintvl(stream, Duration::from_secs(10))?;
    sockopt::set_tcp_keepcnt(stream, 6)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that drips its handshake a byte at a time, each within the read timeout, is cut
    /// off when the handshake's time is up: it never holds a job slot for ever.
    #[test]
    fn a_handshake_dripped_a_byte_at_a_time_ends_in_time() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let client = std::thread::spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            // A request line that never ends, a byte per 100 ms, for up to a minute.
            for _ in 0..600 {
                if c.write_all(b" ").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let (server, _) = listener.accept().unwrap();
        let config = AgentConfig {
            listen: addr,
            allow: Vec::new(),
            key: None,
            experiments: &Registry(&[]),
        };
        let start = std::time::Instant::now();
        let _ = job(server, &config, &Counters::default());
        let took = start.elapsed();
        assert!(
            took < HANDSHAKE_TIMEOUT + Duration::from_secs(5),
            "the job took {took:?}"
        );
        client.join().unwrap();
    }

    #[test]
    fn only_allowed_addresses() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert!(allowed(&[], lo));
        assert!(allowed(&[], "::1".parse().unwrap()));
        assert!(!allowed(&[], other));
        assert!(allowed(&[other], other));
        assert!(allowed(&[other], mapped));
        assert!(!allowed(&[other], lo));
    }

    #[test]
    fn hex_round_trips_and_refuses_junk() {
        assert_eq!(unhex(&hex(&[0, 1, 254, 255])), Some(vec![0, 1, 254, 255]));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex(&"00".repeat(65)), None);
    }
}
