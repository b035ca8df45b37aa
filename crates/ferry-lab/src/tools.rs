//! Third-party baselines run inside lab experiments: `iperf3` and `sockperf`, when installed.
//! Each runs as its own server and client process on 127.0.0.1, pinned like the lab's two
//! processes (client on the main CPU, server on the peer CPU), every wait bounded; their output
//! is parsed into the same counts the lab's own transports report.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{bail, Context, Error, Result};

/// How to get the tools on Debian or Ubuntu.
pub const INSTALL_HINT: &str = "apt-get install iperf3 sockperf";

/// Where `program` lives on `PATH`, if it is there and executable.
pub fn find(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The first line `program --version` prints (either stream), for the record.
pub fn version(program: &PathBuf) -> Option<String> {
    let out = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .map(|l| l.trim())
        .find(|l| !l.is_empty())
        .map(|l| strip_ansi(l).to_owned())
}

/// sockperf colours its banner; the record keeps plain text.
fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// What one tool run measured. Counts the tool does not give are `None`.
#[derive(Debug, Clone, Default)]
pub struct ToolResult {
    pub datagrams_sent: Option<u64>,
    pub datagrams_delivered: Option<u64>,
    /// Payload bytes delivered.
    pub bytes_delivered: Option<u64>,
    /// The interval the delivered figures refer to.
    pub seconds: f64,
    /// Delivered payload bits per second as the tool reports it.
    pub delivered_bps: Option<f64>,
    pub lost: Option<u64>,
    /// TCP segments the sender retransmitted.
    pub retransmits: Option<u64>,
    /// TCP: the client's reports over the test (its `intervals`, the omitted ones included):
    /// from and to (seconds from the test's start) and the bits per second its socket took.
    pub intervals: Vec<(f64, f64, f64)>,
    pub note: String,
}

/// A child process killed (and reaped) if dropped while running; its stdout is collected.
struct Proc {
    child: Child,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
    what: String,
}

impl Proc {
    fn spawn(program: &PathBuf, args: &[String], cpu: Option<usize>) -> Result<Proc> {
        let what = format!("{} {}", program.display(), args.join(" "));
        let mut cmd = Command::new(program);
        cmd.args(args);
        Proc::spawn_command(cmd, what, cpu)
    }

    /// Starts `cmd` (already given its program and arguments; `what` says them).
    fn spawn_command(mut cmd: Command, what: String, cpu: Option<usize>) -> Result<Proc> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cpu) = cpu {
            pin_child(&mut cmd, cpu);
        }
        let mut child = super::spawn_child(&mut cmd).context(format!("cannot start {what}"))?;
        let collect = |s: Option<Box<dyn Read + Send>>| {
            s.map(|mut s| {
                std::thread::spawn(move || {
                    let mut text = String::new();
                    let _ = s.read_to_string(&mut text);
                    text
                })
            })
        };
        let stdout = collect(
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        );
        let stderr = collect(
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        );
        Ok(Proc {
            child,
            stdout,
            stderr,
            what,
        })
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits at most `timeout` for the exit; kills it after that. Returns (success, stdout,
    /// stderr).
    fn finish(mut self, timeout: Duration) -> Result<(bool, String, String)> {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait()? {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                bail!("{} did not finish within {timeout:?}; killed it", self.what);
            }
            crate::signal::check()?;
            std::thread::sleep(Duration::from_millis(5));
        };
        let out = self
            .stdout
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        let err = self
            .stderr
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        Ok((status.success(), out, err))
    }

    /// Asks it to stop (SIGINT), then finishes it.
    fn interrupt(self, timeout: Duration) -> Result<(bool, String, String)> {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) with the pid of our own child, which we have not reaped yet (so
            // the pid is not reused), and a valid signal number.
            unsafe { libc::kill(pid, libc::SIGINT) };
        }
        self.finish(timeout)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Pins the child to `cpu` between fork and exec.
fn pin_child(cmd: &mut Command, cpu: usize) {
    use std::os::unix::process::CommandExt;
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    // SAFETY: the closure runs in the forked child before exec; it only makes one system call
    // (sched_setaffinity) on a CPU set prepared before the fork, allocates nothing and takes no
    // locks.
    unsafe {
        cmd.pre_exec(move || {
            rustix::thread::sched_setaffinity(None, &set).map_err(std::io::Error::from)
        });
    }
}

/// A port on 127.0.0.1 that was free a moment ago, for TCP and UDP both (iperf3 uses both).
pub fn free_port() -> Result<u16> {
    for _ in 0..20 {
        let tcp =
            std::net::TcpListener::bind(("127.0.0.1", 0)).context("cannot find a free port")?;
        let port = tcp.local_addr()?.port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("cannot find a port free for both TCP and UDP on 127.0.0.1")
}

/// Whether a socket listens (TCP) or is bound (UDP) on local `port` in the network namespace
/// of process `pid`, from /proc/PID/net (so that a server in another namespace is seen).
fn port_open(pid: u32, port: u16, tcp: bool) -> bool {
    let files: [String; 2] = if tcp {
        ["tcp", "tcp6"].map(|f| format!("/proc/{pid}/net/{f}"))
    } else {
        ["udp", "udp6"].map(|f| format!("/proc/{pid}/net/{f}"))
    };
    files.iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|text| {
            text.lines().skip(1).any(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let port_ok = fields
                    .get(1)
                    .and_then(|l| l.rsplit_once(':'))
                    .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
                    == Some(port);
                // TCP state 0A is LISTEN; any bound UDP socket will do.
                port_ok && (!tcp || fields.get(3) == Some(&"0A"))
            })
        })
    })
}

/// Waits until the server has its socket, watching that it still runs.
fn wait_port(server: &mut Proc, port: u16, tcp: bool) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let pid = server.child.id();
    while !port_open(pid, port, tcp) {
        crate::signal::check()?;
        if !server.running() {
            bail!("{} exited before it was ready", server.what);
        }
        if Instant::now() >= deadline {
            bail!("{} was not ready within 10 s", server.what);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// Whole seconds for tools that take no fractions (at least 1).
pub fn whole_seconds(d: Duration) -> u64 {
    (d.as_secs_f64().ceil() as u64).max(1)
}

/// What iperf3 sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Iperf3Mode {
    /// UDP datagrams of `len` bytes at `bitrate` bits per second (`-b`; 0: as fast as it can).
    Udp { len: usize, bitrate: u64 },
    /// TCP, written `len` bytes at a time (`-l`), under the congestion control `congestion`
    /// (`-C`, e.g. `cubic`; `None`: the machine's default, `net.ipv4.tcp_congestion_control`).
    Tcp {
        len: usize,
        congestion: Option<&'static str>,
    },
}

/// The largest write iperf3 takes (`-l`, its MAX_BLOCKSIZE).
pub const IPERF3_MAX_LEN: usize = 1 << 20;

/// iperf3 in `mode` for `duration` (whole seconds): its server (`-s -1`) on `server_cpu`, its
/// client (`-c … -J`) on `client_cpu`; on 127.0.0.1, or with `pair` the server in namespace B
/// (bound to B's address) and the client in namespace A. The counts are the receiver's
/// (`end.sum_received`), TCP's retransmissions the sender's (`end.sum_sent.retransmits`).
pub fn iperf3_run(
    program: &PathBuf,
    mode: Iperf3Mode,
    duration: Duration,
    client_cpu: Option<usize>,
    server_cpu: Option<usize>,
    pair: Option<&crate::netns::Pair>,
) -> Result<ToolResult> {
    iperf3_run_omitting(
        program,
        mode,
        0,
        None,
        duration,
        (client_cpu, server_cpu),
        pair,
        &mut || Ok(()),
    )
}

/// As [`iperf3_run`], leaving the first `omit_s` seconds of the test out of the counts (`-O`:
/// the counts are then of the `duration` after them), and calling `started` once its server
/// listens, just before its client starts (its test starts right after: within the time a
/// connection takes). `report_every`: the client's report interval (`-i`; its default, a
/// second, otherwise).
#[allow(clippy::too_many_arguments)]
pub fn iperf3_run_omitting(
    program: &PathBuf,
    mode: Iperf3Mode,
    omit_s: u64,
    report_every: Option<Duration>,
    duration: Duration,
    (client_cpu, server_cpu): (Option<usize>, Option<usize>),
    pair: Option<&crate::netns::Pair>,
    started: &mut dyn FnMut() -> Result<()>,
) -> Result<ToolResult> {
    let port = free_port()?.to_string();
    let secs = whole_seconds(duration);
    let server_addr = pair.map_or_else(|| "127.0.0.1".to_owned(), |p| p.addr[1].to_string());
    let command = |side: usize, args: &[String]| {
        let mut cmd = match pair {
            Some(p) => p.command(side, program),
            None => Command::new(program),
        };
        cmd.args(args);
        let place = pair.map_or_else(String::new, |p| format!("(in {}) ", p.ns[side]));
        (
            cmd,
            format!("{place}{} {}", program.display(), args.join(" ")),
        )
    };
    let (cmd, what) = command(
        1,
        &["-s", "-1", "-p", &port, "-B", &server_addr].map(String::from),
    );
    let mut server = Proc::spawn_command(cmd, what, server_cpu)?;
    wait_port(&mut server, port.parse().unwrap_or(0), true)?;
    let mut args: Vec<String> = ["-c", &server_addr, "-p", &port].map(String::from).to_vec();
    match mode {
        Iperf3Mode::Udp { len, bitrate } => {
            args.extend(["-u".to_owned(), "-b".to_owned(), bitrate.to_string()]);
            args.extend(["-l".to_owned(), len.to_string()]);
        }
        Iperf3Mode::Tcp { len, congestion } => {
            args.extend(["-l".to_owned(), len.min(IPERF3_MAX_LEN).to_string()]);
            if let Some(c) = congestion {
                args.extend(["-C".to_owned(), c.to_owned()]);
            }
        }
    }
    args.extend(["-t".to_owned(), secs.to_string(), "-J".to_owned()]);
    if omit_s > 0 {
        args.extend(["-O".to_owned(), omit_s.to_string()]);
    }
    if let Some(every) = report_every {
        args.extend(["-i".to_owned(), every.as_secs_f64().to_string()]);
    }
    let (cmd, what) = command(0, &args);
    started()?;
    let client = Proc::spawn_command(cmd, what, client_cpu)?;
    let (_, out, err) = client.finish(Duration::from_secs(omit_s + secs + 20))?;
    let _ = server.finish(Duration::from_secs(5));
    let parsed = match mode {
        Iperf3Mode::Udp { .. } => parse_iperf3(&out),
        Iperf3Mode::Tcp { .. } => parse_iperf3_tcp(&out),
    };
    parsed.map_err(|e| Error::msg(format!("{e}; stderr: {}", err.trim())))
}

/// The most iperf3's JSON report may hold: a line per second of a run of at most 600 s, a few
/// hundred bytes each, and the rest.
const MAX_IPERF3_JSON: usize = 8 << 20;

/// The parts of iperf3's `-J` report that are read (everything else is ignored).
#[derive(serde::Deserialize)]
struct Iperf3Json {
    #[serde(default)]
    error: Option<String>,
    end: Option<Iperf3End>,
    #[serde(default)]
    intervals: Vec<Iperf3Interval>,
}

/// One of the client's interval reports; only its sum is read.
#[derive(serde::Deserialize)]
struct Iperf3Interval {
    sum: Iperf3IntervalSum,
}

#[derive(serde::Deserialize)]
struct Iperf3IntervalSum {
    seconds: f64,
    bits_per_second: f64,
}

#[derive(serde::Deserialize)]
struct Iperf3End {
    sum_sent: Option<Iperf3Sum>,
    sum_received: Option<Iperf3Sum>,
}

/// A sum of iperf3's report. Counts are whole numbers: a fraction, a negative or a number too
/// big for 64 bits is refused.
#[derive(serde::Deserialize)]
struct Iperf3Sum {
    seconds: f64,
    bytes: u64,
    /// UDP: datagrams the receiver accounted for (received and lost).
    packets: Option<u64>,
    /// UDP: gaps in the receiver's sequence numbers.
    lost_packets: Option<u64>,
    /// TCP, the sender's sum: segments retransmitted.
    retransmits: Option<u64>,
}

/// Reads iperf3's JSON report: too long, not JSON, an error iperf3 reports, or a report without
/// the sums wanted are errors.
fn read_iperf3(json: &str) -> Result<Iperf3End> {
    read_iperf3_json(json).map(|(end, _)| end)
}

/// The client's intervals one after another (iperf3 restarts its clock after the omitted
/// ones): from, to and bits per second. An interval of no time, or of a time or rate that is
/// not a finite number of at least 0, is an error.
fn iperf3_intervals(intervals: &[Iperf3Interval]) -> Result<Vec<(f64, f64, f64)>> {
    let mut at = 0.0;
    intervals
        .iter()
        .map(|i| {
            let (seconds, bps) = (i.sum.seconds, i.sum.bits_per_second);
            if !(seconds.is_finite() && seconds > 0.0 && bps.is_finite() && bps >= 0.0) {
                bail!("iperf3 reported an interval of {seconds} s at {bps} bit/s");
            }
            let from = at;
            at += seconds;
            Ok((from, at, bps))
        })
        .collect()
}

fn read_iperf3_json(json: &str) -> Result<(Iperf3End, Vec<Iperf3Interval>)> {
    if json.len() > MAX_IPERF3_JSON {
        bail!(
            "iperf3 wrote {} bytes of JSON (at most {MAX_IPERF3_JSON} expected)",
            json.len()
        );
    }
    let v: Iperf3Json = serde_json::from_str(json)
        .context("iperf3 did not write a JSON report the lab can read")?;
    if let Some(e) = v.error {
        bail!("iperf3: {e}");
    }
    let Some(end) = v.end else {
        bail!("iperf3's JSON report has no end section");
    };
    Ok((end, v.intervals))
}

/// The receiver's interval, checked: a positive, finite number of seconds (at most a day).
fn receiver_seconds(sum: &Iperf3Sum) -> Result<f64> {
    if !(sum.seconds.is_finite() && sum.seconds > 0.0 && sum.seconds <= 86_400.0) {
        bail!(
            "iperf3's end.sum_received.seconds is {}, not a test interval",
            sum.seconds
        );
    }
    Ok(sum.seconds)
}

fn parse_iperf3(json: &str) -> Result<ToolResult> {
    let end = read_iperf3(json)?;
    let Some(r) = end.sum_received else {
        bail!("iperf3's JSON report has no end.sum_received with packets, lost_packets, bytes and seconds");
    };
    let (Some(packets), Some(lost)) = (r.packets, r.lost_packets) else {
        bail!("iperf3's end.sum_received has no packets and lost_packets (not a UDP test?)");
    };
    if lost > packets {
        bail!("iperf3's end.sum_received says {lost} of {packets} datagrams were lost");
    }
    let seconds = receiver_seconds(&r)?;
    Ok(ToolResult {
        datagrams_sent: Some(packets),
        datagrams_delivered: Some(packets - lost),
        bytes_delivered: Some(r.bytes),
        seconds,
        delivered_bps: Some(r.bytes as f64 * 8.0 / seconds),
        lost: Some(lost),
        retransmits: None,
        intervals: Vec::new(),
        note: "iperf3's receiver report (end.sum_received): packets counts what the client sent, lost_packets the gaps the server saw; rate: its bytes over its seconds".to_owned(),
    })
}

fn parse_iperf3_tcp(json: &str) -> Result<ToolResult> {
    let (end, intervals) = read_iperf3_json(json)?;
    let (Some(sent), Some(r)) = (end.sum_sent, end.sum_received) else {
        bail!("iperf3's JSON report has no end.sum_sent and end.sum_received");
    };
    let seconds = receiver_seconds(&r)?;
    Ok(ToolResult {
        datagrams_sent: None,
        datagrams_delivered: None,
        bytes_delivered: Some(r.bytes),
        seconds,
        delivered_bps: Some(r.bytes as f64 * 8.0 / seconds),
        lost: None,
        retransmits: sent.retransmits,
        intervals: iperf3_intervals(&intervals)?,
        note: "iperf3 TCP: bytes and seconds of the receiver (end.sum_received), retransmitted segments of the sender (end.sum_sent.retransmits)".to_owned(),
    })
}

/// `sockperf server` and `sockperf throughput -m LEN -t S`: the client's count of datagrams
/// sent, and the server's count of datagrams received (it prints it when interrupted).
pub fn sockperf(
    program: &PathBuf,
    len: usize,
    duration: Duration,
    client_cpu: Option<usize>,
    server_cpu: Option<usize>,
) -> Result<ToolResult> {
    let port = free_port()?.to_string();
    let secs = whole_seconds(duration);
    let mut server = Proc::spawn(
        program,
        &["server", "-i", "127.0.0.1", "-p", &port].map(String::from),
        server_cpu,
    )?;
    wait_port(&mut server, port.parse().unwrap_or(0), false)?;
    let client = Proc::spawn(
        program,
        &[
            "throughput".to_owned(),
            "-i".to_owned(),
            "127.0.0.1".to_owned(),
            "-p".to_owned(),
            port,
            "-m".to_owned(),
            len.to_string(),
            "-t".to_owned(),
            secs.to_string(),
        ],
        client_cpu,
    )?;
    let (ok, out, err) = client.finish(Duration::from_secs(secs + 20))?;
    // Let the last datagrams land before the server counts.
    std::thread::sleep(Duration::from_millis(100));
    let (_, server_out, server_err) = server.interrupt(Duration::from_secs(5))?;
    if !ok {
        bail!("sockperf throughput failed: {}", err.trim());
    }
    parse_sockperf(
        &format!("{out}\n{err}"),
        &format!("{server_out}\n{server_err}"),
        len,
    )
}

fn parse_sockperf(client: &str, server: &str, len: usize) -> Result<ToolResult> {
    // "sockperf: Total of 403163 messages sent in 1.000 sec"
    let sent = client.lines().find_map(|l| {
        let rest = l.split("Total of ").nth(1)?;
        let mut w = rest.split_whitespace();
        let n: u64 = w.next()?.parse().ok()?;
        let secs: f64 = rest
            .split(" sent in ")
            .nth(1)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Some((n, secs))
    });
    let Some((sent, seconds)) = sent else {
        bail!("sockperf's client output has no \"Total of N messages sent in T sec\" line");
    };
    // "sockperf: Total 314658 messages received and handled"
    let received = server.lines().find_map(|l| {
        let rest = l.split("Total ").nth(1)?;
        rest.contains("received")
            .then(|| rest.split_whitespace().next()?.parse::<u64>().ok())?
    });
    let (delivered, bytes, bps, note) = match received {
        // The server's count includes the client's few warm-up datagrams.
        Some(r) => {
            let r = r.min(sent);
            (
                Some(r),
                Some(r * len as u64),
                Some(r as f64 * len as f64 * 8.0 / seconds),
                "sent: the client's count over its test time; delivered: the server's count of datagrams received (printed on SIGINT; includes a few warm-up datagrams, capped at the sent count), over the client's test time",
            )
        }
        None => (
            None,
            None,
            None,
            "the server printed no count of datagrams received: only the client's send rate is known",
        ),
    };
    Ok(ToolResult {
        datagrams_sent: Some(sent),
        datagrams_delivered: delivered,
        bytes_delivered: bytes,
        seconds,
        delivered_bps: bps,
        lost: delivered.map(|d| sent - d),
        retransmits: None,
        intervals: Vec::new(),
        note: note.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_report() {
        let json = r#"{"end": {"sum_received": {"start": 0, "end": 1.0, "seconds": 1.0,
            "bytes": 1472000, "bits_per_second": 11776000, "lost_packets": 10,
            "packets": 1010, "lost_percent": 0.99}}}"#;
        let r = parse_iperf3(json).unwrap();
        assert_eq!(r.datagrams_sent, Some(1010));
        assert_eq!(r.datagrams_delivered, Some(1000));
        assert_eq!(r.lost, Some(10));
        assert_eq!(r.delivered_bps, Some(11_776_000.0));
        assert!(parse_iperf3(r#"{"error": "unable to connect"}"#)
            .unwrap_err()
            .to_string()
            .contains("unable to connect"));
        assert!(parse_iperf3("not json").is_err());
    }

    #[test]
    fn iperf3_tcp_report() {
        // As iperf 3.12 writes it (shortened): the sender's and the receiver's sums.
        let json = r#"{"start": {"tcp_mss_default": 1448}, "intervals": [],
            "end": {"streams": [], "sum_sent": {"start": 0, "end": 1.000105,
            "seconds": 1.000105, "bytes": 12924848, "bits_per_second": 103387928.2675319,
            "retransmits": 3, "sender": true}, "sum_received": {"start": 0, "end": 2.0,
            "seconds": 2.0, "bytes": 12179128, "bits_per_second": 95865055.1578384,
            "sender": true}, "cpu_utilization_percent": {}}}"#;
        let r = parse_iperf3_tcp(json).unwrap();
        assert_eq!(r.bytes_delivered, Some(12_179_128));
        assert_eq!(r.seconds, 2.0);
        assert_eq!(r.delivered_bps, Some(12_179_128.0 * 8.0 / 2.0));
        assert_eq!(r.retransmits, Some(3));
        assert_eq!(r.datagrams_delivered, None);
        assert!(
            parse_iperf3(json).is_err(),
            "a TCP report has no datagram counts"
        );
    }

    #[test]
    fn iperf3_tcp_intervals_follow_one_another() {
        // Two omitted intervals, then the clock restarts (iperf3 -O): times run on.
        let interval = |start: f64, seconds: f64, bps: f64, omitted: bool| {
            format!(
                r#"{{"streams": [], "sum": {{"start": {start}, "end": {}, "seconds": {seconds}, "bytes": 1, "bits_per_second": {bps}, "omitted": {omitted}}}}}"#,
                start + seconds
            )
        };
        let report = |intervals: &[String]| {
            format!(
                r#"{{"intervals": [{}], "end": {{"sum_sent": {{"seconds": 1, "bytes": 1}}, "sum_received": {{"seconds": 1, "bytes": 1}}}}}}"#,
                intervals.join(",")
            )
        };
        let json = report(&[
            interval(0.0, 0.25, 8e6, true),
            interval(0.25, 0.25, 4e6, true),
            interval(0.0, 0.25, 2e6, false),
        ]);
        let r = parse_iperf3_tcp(&json).unwrap();
        assert_eq!(
            r.intervals,
            [(0.0, 0.25, 8e6), (0.25, 0.5, 4e6), (0.5, 0.75, 2e6)]
        );
        for bad in [
            interval(0.0, 0.0, 1e6, false),
            interval(0.0, -1.0, 1e6, false),
            interval(0.0, 0.25, -1.0, false),
            interval(0.0, 0.25, 1e6, false).replace("\"seconds\": 0.25", "\"seconds\": 1e400"),
        ] {
            assert!(
                parse_iperf3_tcp(&report(std::slice::from_ref(&bad))).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn hostile_iperf3_reports_are_errors() {
        let good = r#"{"end": {"sum_sent": {"seconds": 1.0, "bytes": 10, "retransmits": 0},
            "sum_received": {"seconds": 1.0, "bytes": 10, "packets": 2, "lost_packets": 1}}}"#;
        assert!(parse_iperf3(good).is_ok() && parse_iperf3_tcp(good).is_ok());
        let with = |received: &str| {
            format!(
                r#"{{"end": {{"sum_sent": {{"seconds": 1, "bytes": 1}}, "sum_received": {received}}}}}"#
            )
        };
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let long = format!("{{\"x\": \"{}\"}}", "a".repeat(MAX_IPERF3_JSON));
        let bad = [
            good[..good.len() / 2].to_owned(),
            String::new(),
            "garbage".to_owned(),
            "null".to_owned(),
            "[]".to_owned(),
            "{}".to_owned(),
            r#"{"end": null}"#.to_owned(),
            r#"{"end": {}}"#.to_owned(),
            with(
                r#"{"seconds": 1, "bytes": 18446744073709551616, "packets": 1, "lost_packets": 0}"#,
            ),
            with(r#"{"seconds": 1, "bytes": -1, "packets": 1, "lost_packets": 0}"#),
            with(r#"{"seconds": 1, "bytes": 1.5, "packets": 1, "lost_packets": 0}"#),
            with(r#"{"seconds": 1e400, "bytes": 1, "packets": 1, "lost_packets": 0}"#),
            with(r#"{"seconds": 0, "bytes": 1, "packets": 1, "lost_packets": 0}"#),
            with(r#"{"seconds": 1e300, "bytes": 1, "packets": 1, "lost_packets": 0}"#),
            with(r#"{"seconds": "1", "bytes": 1, "packets": 1, "lost_packets": 0}"#),
            deep,
            long,
        ];
        for b in &bad {
            let shown = &b[..b.len().min(80)];
            assert!(parse_iperf3(b).is_err(), "UDP: {shown:?} should be refused");
            assert!(
                parse_iperf3_tcp(b).is_err(),
                "TCP: {shown:?} should be refused"
            );
        }
        let more_lost_than_sent =
            with(r#"{"seconds": 1, "bytes": 1, "packets": 1, "lost_packets": 2}"#);
        assert!(parse_iperf3(&more_lost_than_sent).is_err());
    }

    #[test]
    fn sockperf_report() {
        let client =
            "sockperf: Test ended\nsockperf: Total of 403163 messages sent in 1.000 sec\n\n\
                      sockperf: Summary: Message Rate is 402976 [msg/sec]\n";
        let server = "sockperf: Test end (interrupted by user)\n\
                      sockperf: Total 314658 messages received and handled\n";
        let r = parse_sockperf(client, server, 1472).unwrap();
        assert_eq!(r.datagrams_sent, Some(403_163));
        assert_eq!(r.datagrams_delivered, Some(314_658));
        assert_eq!(r.lost, Some(403_163 - 314_658));
        assert_eq!(r.seconds, 1.0);
        let r = parse_sockperf(client, "", 1472).unwrap();
        assert_eq!(r.datagrams_delivered, None);
        assert!(parse_sockperf("", "", 64).is_err());
    }

    #[test]
    fn plain_text_version() {
        assert_eq!(
            strip_ansi("sockperf: \u{1b}[2;35m== version #3.7 == \u{1b}[0m"),
            "sockperf: == version #3.7 == "
        );
    }
}
