//! The other process of an experiment, and the one control protocol the lab speaks with it,
//! whether it runs on this machine (`ferry lab-peer`, a child of the lab) or on another one
//! (started there by `ferry lab agent`, see [`crate::agent`]).
//!
//! The protocol is JSON lines. The main side's first line names the experiment and carries its
//! peer request: `{"experiment": "latency", "request": {...}}`; any later lines are the
//! experiment's own commands. The peer answers with lines of its own, each one of
//! `{"report": ...}` (an experiment's message to the main side), `{"done": null}` (finished,
//! successfully) or `{"error": "..."}` (failed, and why); the last line is `done` or `error`.
//! The end of the main side's input means that the main side went away: the peer stops.
//!
//! Readiness and the measurement itself go over the transport under test, not over this
//! channel, so that its latency never enters a figure.

pub mod link;
pub mod wire;

use std::io::{BufReader, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

pub use self::link::{PeerLink, MAIN_GONE};
pub use self::wire::AGENT_PORT;
use self::wire::{reader_thread, to_line, Hello, Reply, LINES_AHEAD, MAX_QUEUED_REPORTS};
use crate::error::{Context, Error, Result};
use crate::experiment::{Experiment, Registry};

// ---------------------------------------------------------------------------------------------
// The main side

/// Where a peer runs.
#[derive(Debug, Clone, Default)]
pub struct Place {
    /// Inside this network namespace (started with `ip netns exec`): the `ip` executable and
    /// the namespace's name.
    pub netns: Option<(std::path::PathBuf, String)>,
    /// On another machine, through the `ferry lab agent` at this address (`HOST[:PORT]`).
    pub remote: Option<String>,
}

impl Place {
    pub fn local() -> Place {
        Place::default()
    }

    pub fn remote(agent: Option<&str>) -> Place {
        Place {
            netns: None,
            remote: agent.map(str::to_owned),
        }
    }
}

enum Link {
    Local {
        child: Child,
        stdin: Option<ChildStdin>,
    },
    Remote {
        stream: TcpStream,
        /// The agent's address, for messages.
        agent: String,
    },
}

/// The main side's handle on a peer: its control channel and its life. A local peer is killed
/// when this is dropped before it finished; a remote one sees its connection close, and its
/// agent ends it.
pub struct Peer {
    link: Link,
    lines: Receiver<Result<String>>,
    /// The peer's last word (`done` or `error`), once read.
    ended: Option<Result<(), String>>,
    /// Reports read while looking for something else, oldest first.
    reports: std::collections::VecDeque<Value>,
    exited: bool,
}

impl Peer {
    /// Starts the peer side of experiment `E` with `request`, where `place` says.
    pub fn start<E: Experiment>(request: &E::PeerRequest, place: &Place) -> Result<Peer> {
        let hello = Hello {
            experiment: E::NAME.to_owned(),
            request: serde_json::to_value(request)?,
        };
        let mut peer = match &place.remote {
            Some(agent) => Peer::connect(agent)?,
            None => Peer::spawn(place)?,
        };
        peer.send(&hello)?;
        Ok(peer)
    }

    fn spawn(place: &Place) -> Result<Peer> {
        let exe = std::env::current_exe().context("cannot find the ferry executable")?;
        let mut cmd = match &place.netns {
            Some((ip, ns)) => {
                let mut c = Command::new(ip);
                c.args(["netns", "exec", ns]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        cmd.arg("lab-peer")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = crate::spawn_child(&mut cmd)
            .context(format!("cannot start the peer process {}", exe.display()))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("a piped stdout");
        Ok(Peer {
            link: Link::Local { child, stdin },
            lines: reader_thread(stdout),
            ended: None,
            reports: Default::default(),
            exited: false,
        })
    }

    fn connect(agent: &str) -> Result<Peer> {
        let address = with_default_port(agent);
        let target = address
            .to_socket_addrs()
            .context(format!("--remote {agent}"))?
            .next()
            .ok_or_else(|| Error::msg(format!("--remote {agent}: no address")))?;
        let stream =
            TcpStream::connect_timeout(&target, Duration::from_secs(5)).context(format!(
                "cannot reach the lab agent at {address} (is `ferry lab agent` running there, and \
             does it allow this machine?)"
            ))?;
        stream.set_nodelay(true)?;
        let mut reader = BufReader::new(stream.try_clone()?);
        wire::client_handshake(&mut reader, &stream, &address)?;
        Ok(Peer {
            lines: reader_thread(reader),
            link: Link::Remote {
                stream,
                agent: address,
            },
            ended: None,
            reports: Default::default(),
            exited: false,
        })
    }

    /// The peer's process id, for a local peer.
    pub fn pid(&self) -> Option<u32> {
        match &self.link {
            Link::Local { child, .. } => Some(child.id()),
            Link::Remote { .. } => None,
        }
    }

    /// Whether the peer runs on another machine.
    pub fn is_remote(&self) -> bool {
        matches!(self.link, Link::Remote { .. })
    }

    /// Sends the peer one command line.
    pub fn send(&mut self, message: &impl Serialize) -> Result<()> {
        let line = to_line(message)?;
        let sent = match &mut self.link {
            Link::Local { stdin, .. } => match stdin.as_mut() {
                Some(s) => s.write_all(line.as_bytes()).and_then(|()| s.flush()),
                None => return Err(Error::msg("the peer's input is closed")),
            },
            Link::Remote { stream, .. } => stream.write_all(line.as_bytes()),
        };
        sent.map_err(|e| Error::msg(format!("cannot talk to the peer: {e}")))
    }

    /// Ends the peer's input: for experiments whose peer runs until told to stop.
    pub fn close_input(&mut self) {
        match &mut self.link {
            Link::Local { stdin, .. } => *stdin = None,
            Link::Remote { stream, .. } => {
                let _ = stream.shutdown(Shutdown::Write);
            }
        }
    }

    /// Takes one line from the peer, waiting at most `timeout`; a report is queued, the last
    /// word is kept. False when nothing came.
    fn pump(&mut self, timeout: Duration) -> Result<bool> {
        if self.ended.is_some() {
            return Ok(false);
        }
        let line = match self.lines.recv_timeout(timeout) {
            Ok(line) => line?,
            Err(RecvTimeoutError::Timeout) => return Ok(false),
            Err(RecvTimeoutError::Disconnected) => {
                self.ended = Some(Err(self.gone_without_a_word()));
                return Ok(true);
            }
        };
        let reply: Reply = serde_json::from_str(&line)
            .map_err(|e| Error::msg(format!("the peer sent a line the lab cannot read: {e}")))?;
        match reply {
            Reply::Report(_) if self.reports.len() >= MAX_QUEUED_REPORTS => {
                return Err(Error::msg(format!(
                    "the peer sent more than {MAX_QUEUED_REPORTS} reports the lab has not read yet"
                )))
            }
            Reply::Report(v) => self.reports.push_back(v),
            Reply::Done(()) => self.ended = Some(Ok(())),
            Reply::Error(e) => self.ended = Some(Err(e)),
        }
        Ok(true)
    }

    fn gone_without_a_word(&mut self) -> String {
        match &mut self.link {
            Link::Local { child, .. } => {
                // The pipe closed: the process has ended or is about to.
                let deadline = Instant::now() + Duration::from_secs(1);
                loop {
                    if let Ok(Some(status)) = child.try_wait() {
                        self.exited = true;
                        return format!("the peer process exited early ({status})");
                    }
                    if Instant::now() >= deadline {
                        return "the peer process closed its output early".to_owned();
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            Link::Remote { agent, .. } => format!("the lab agent at {agent} closed the connection"),
        }
    }

    /// Waits at most `timeout` for the peer's next report.
    pub fn recv<T: DeserializeOwned>(&mut self, timeout: Duration) -> Result<Option<T>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = self.reports.pop_front() {
                return serde_json::from_value(v)
                    .map(Some)
                    .map_err(|e| Error::msg(format!("the peer's report cannot be read: {e}")));
            }
            if let Some(Err(e)) = &self.ended {
                return Err(Error::msg(format!("the peer failed: {e}")));
            }
            if self.ended.is_some() {
                return Ok(None);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            self.pump(deadline - now)?;
        }
    }

    /// An error if the peer has ended (it must not before `finish`) or failed.
    pub fn check_alive(&mut self) -> Result<()> {
        // What has arrived, at most what can be read ahead: a peer that never stops sending
        // does not keep this call.
        for _ in 0..LINES_AHEAD {
            if !self.pump(Duration::ZERO)? {
                break;
            }
        }
        match &self.ended {
            Some(Err(e)) => Err(Error::msg(format!("the peer failed: {e}"))),
            Some(Ok(())) => Err(Error::msg("the peer ended early")),
            None => Ok(()),
        }
    }

    /// Waits at most `timeout` for the peer's next report, `what` (which an error names),
    /// watching the peer and Ctrl-C meanwhile.
    pub fn await_report<T: DeserializeOwned>(
        &mut self,
        timeout: Duration,
        what: &str,
    ) -> Result<T> {
        let late = || Error::msg(format!("the peer did not send {what} within {timeout:?}"));
        wire::poll_within(timeout, late, |slice| {
            if let Some(report) = self.recv::<T>(slice)? {
                return Ok(Some(report));
            }
            if let Err(e) = self.check_alive() {
                // Its last word may have come right after the report.
                return self.recv::<T>(Duration::ZERO)?.ok_or(e).map(Some);
            }
            Ok(None)
        })
    }

    /// Waits until `ready()` holds, at most `timeout`, watching the peer and Ctrl-C meanwhile.
    pub fn wait_ready(
        &mut self,
        timeout: Duration,
        mut ready: impl FnMut() -> Result<bool>,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if ready()? {
                return Ok(());
            }
            crate::signal::check()?;
            self.check_alive()?;
            if Instant::now() >= deadline {
                bail_not_ready(timeout)?;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Waits for the peer to finish by itself (at most `timeout`) and checks that it succeeded.
    pub fn finish(self, timeout: Duration) -> Result<()> {
        self.finish_polling(timeout, || {})
    }

    /// As `finish`, calling `poll` between looks at the peer (to keep a subscriber answering
    /// while the peer's publisher says goodbye, for instance). Ctrl-C ends the wait (and, as the
    /// peer is dropped, the peer).
    pub fn finish_polling(mut self, timeout: Duration, mut poll: impl FnMut()) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            crate::signal::check()?;
            poll();
            self.pump(Duration::from_millis(1))?;
            match self.ended.take() {
                Some(Ok(())) => break,
                Some(Err(e)) => return Err(Error::msg(format!("the peer failed: {e}"))),
                None => {}
            }
            if Instant::now() >= deadline {
                return Err(Error::msg(format!(
                    "the peer did not finish within {timeout:?}; ended it"
                )));
            }
        }
        // Its last word is said; a local process exits right after.
        if let Link::Local { child, .. } = &mut self.link {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Some(status) = child.try_wait()? {
                    self.exited = true;
                    if !status.success() {
                        return Err(Error::msg(format!("the peer process failed ({status})")));
                    }
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(())
    }
}

fn bail_not_ready(timeout: Duration) -> Result<()> {
    Err(Error::msg(format!(
        "the peer was not ready within {timeout:?}"
    )))
}

impl Drop for Peer {
    fn drop(&mut self) {
        match &mut self.link {
            Link::Local { child, stdin } => {
                *stdin = None;
                if !self.exited {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
            Link::Remote { stream, .. } => {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
    }
}

/// The address of this machine on the way to `agent` (`HOST[:PORT]`): the source address the
/// kernel picks for a route there. The peer there reaches this machine at it.
pub fn local_address_towards(agent: &str) -> Result<std::net::IpAddr> {
    let target = agent_address(agent)?;
    let any: std::net::SocketAddr = if target.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        ([0u16; 8], 0).into()
    };
    let probe = std::net::UdpSocket::bind(any)?;
    probe
        .connect(target)
        .context(format!("no route to the lab agent at {agent}"))?;
    Ok(probe.local_addr()?.ip())
}

/// The address of the lab agent at `agent` (`HOST[:PORT]`): the other machine of the run.
pub fn agent_address(agent: &str) -> Result<std::net::SocketAddr> {
    with_default_port(agent)
        .to_socket_addrs()
        .context(format!("--remote {agent}"))?
        .next()
        .ok_or_else(|| Error::msg(format!("--remote {agent}: no address")))
}

/// `HOST` → `HOST:7447`; `HOST:PORT` and `[V6]:PORT` as given.
pub fn with_default_port(agent: &str) -> String {
    let has_port = if agent.starts_with('[') {
        agent.contains("]:")
    } else {
        agent.matches(':').count() == 1
    };
    if has_port {
        agent.to_owned()
    } else if agent.starts_with('[') {
        format!("{agent}:{AGENT_PORT}")
    } else if agent.contains(':') {
        format!("[{agent}]:{AGENT_PORT}")
    } else {
        format!("{agent}:{AGENT_PORT}")
    }
}

/// `ferry lab-peer`: serves one peer request from standard input, answering on standard
/// output. The exit status says whether it succeeded; the last line says why not.
/// `for_agent`: started by `ferry lab agent` for a lab on another machine.
pub fn serve_stdio(for_agent: bool, experiments: &Registry) -> Result<()> {
    let input = reader_thread(std::io::stdin());
    let out: Box<dyn Write + Send> = Box::new(std::io::stdout());
    serve(input, out, for_agent, experiments)
}

fn serve(
    input: Receiver<Result<String>>,
    out: Box<dyn Write + Send>,
    for_agent: bool,
    experiments: &Registry,
) -> Result<()> {
    let first = match input.recv_timeout(Duration::from_secs(30)) {
        Ok(line) => line?,
        Err(_) => return Err(Error::msg("no peer request came in 30 s")),
    };
    let mut link = PeerLink::new(input, out, for_agent);
    let outcome = (|| {
        let hello: Hello =
            serde_json::from_str(&first).context("the peer request cannot be read")?;
        let experiment = experiments.find(&hello.experiment)?;
        if for_agent && !experiment.across_machines() {
            return Err(Error::msg(format!(
                "the {} experiment runs on one machine; an agent serves {}",
                experiment.name(),
                experiments.across_machines().join(", ")
            )));
        }
        experiment.serve_peer(hello.request, &mut link)
    })();
    let last = match &outcome {
        Ok(()) => Reply::Done(()),
        Err(e) => Reply::Error(e.to_string()),
    };
    link.write(&to_line(&last)?)?;
    outcome
}

#[cfg(test)]
mod tests {
    use std::sync::{mpsc, Arc};

    use super::wire::{read_line, MAX_LINE};
    use super::*;

    /// Whatever answers at `--remote` may flood the main side with reports: each look at the
    /// peer returns, and the flood ends the run with an error instead of filling memory.
    #[test]
    fn a_peer_that_floods_reports_is_an_error_not_a_memory_sink() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let flood = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let lines = "{\"report\":0}\n".repeat(1024);
            while s.write_all(lines.as_bytes()).is_ok() {}
        });
        let stream = TcpStream::connect(addr).unwrap();
        let mut peer = Peer {
            lines: reader_thread(stream.try_clone().unwrap()),
            link: Link::Remote {
                stream,
                agent: addr.to_string(),
            },
            ended: None,
            reports: Default::default(),
            exited: false,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let err = loop {
            let call = Instant::now();
            let r = peer.check_alive();
            assert!(
                call.elapsed() < Duration::from_secs(5),
                "one look took {:?}",
                call.elapsed()
            );
            match r {
                Ok(()) => assert!(Instant::now() < deadline, "no end to the flood"),
                Err(e) => break e.to_string(),
            }
        };
        assert!(err.contains("reports the lab has not read"), "{err}");
        assert!(peer.reports.len() <= MAX_QUEUED_REPORTS);
        drop(peer);
        flood.join().unwrap();
    }

    #[test]
    fn lines_are_bounded() {
        let mut ok = BufReader::new(&b"{\"a\":1}\nrest"[..]);
        assert_eq!(read_line(&mut ok).unwrap().as_deref(), Some("{\"a\":1}"));
        assert_eq!(read_line(&mut ok).unwrap().as_deref(), Some("rest"));
        assert_eq!(read_line(&mut ok).unwrap(), None);
        let long = vec![b'x'; MAX_LINE + 10];
        assert!(read_line(&mut BufReader::new(&long[..])).is_err());
        let exact = vec![b'x'; MAX_LINE];
        assert_eq!(
            read_line(&mut BufReader::new(&exact[..]))
                .unwrap()
                .map(|s| s.len()),
            Some(MAX_LINE)
        );
        assert!(read_line(&mut BufReader::new(&[0xff, b'\n'][..])).is_err());
    }

    #[test]
    fn replies_round_trip() {
        for reply in [
            Reply::Report(serde_json::json!({"x": 1})),
            Reply::Done(()),
            Reply::Error("no".to_owned()),
        ] {
            let line = serde_json::to_string(&reply).unwrap();
            let back: Reply = serde_json::from_str(&line).unwrap();
            assert_eq!(serde_json::to_string(&back).unwrap(), line);
        }
        assert_eq!(
            serde_json::to_string(&Reply::Done(())).unwrap(),
            "{\"done\":null}"
        );
    }

    #[test]
    fn agent_addresses() {
        assert_eq!(with_default_port("10.0.0.2"), "10.0.0.2:7447");
        assert_eq!(with_default_port("10.0.0.2:9000"), "10.0.0.2:9000");
        assert_eq!(with_default_port("host"), "host:7447");
        assert_eq!(with_default_port("fd00::2"), "[fd00::2]:7447");
        assert_eq!(with_default_port("[fd00::2]:9000"), "[fd00::2]:9000");
        assert_eq!(with_default_port("[::1]"), "[::1]:7447");
    }

    #[test]
    fn a_peer_request_for_no_experiment_is_refused_with_a_last_word() {
        let (tx, rx) = mpsc::channel();
        tx.send(Ok("{\"experiment\":\"nothing\",\"request\":{}}".to_owned()))
            .unwrap();
        drop(tx);
        let out = Arc::new(std::sync::Mutex::new(Vec::new()));
        struct Shared(Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let err = serve(rx, Box::new(Shared(out.clone())), false, &Registry(&[])).unwrap_err();
        assert!(err.to_string().contains("no experiment is named"), "{err}");
        let written = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        let last: Reply = serde_json::from_str(written.trim_end()).unwrap();
        assert!(matches!(last, Reply::Error(e) if e.contains("nothing")));
    }
}
