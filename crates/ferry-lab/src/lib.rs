//! The performance lab: experiments that measure the transports on this machine, with same-run
//! baselines, and write results in one format for every experiment:
//! `{"ferry_version", "experiment", "machine", "config", "rows"}`.
//!
//! This module holds what experiments share: the machine description, the results writer,
//! percentile statistics, the payload pattern (written and checked alike by every transport),
//! CPU pinning, the peer process and the message channel interface. Each experiment is a
//! submodule; `raw` and `rawudp` hold the baseline channels (shared memory, plain UDP sockets),
//! `tools` runs the third-party baselines (iperf3, sockperf).

// What the everyday commands share with the lab lives below both (`ferry-cmd`); the lab's
// modules name it as their own.
pub use ferry_cmd::{bail, error, note, signal, stats, table, units};

pub mod agent;
pub mod args;
pub mod baseline;
pub mod cgroup;
pub mod chart;
pub mod cycle;
pub mod experiment;
pub mod fanout;
pub mod footprint;
pub mod hubs;
pub mod idle;
pub mod latency;
pub mod limits;
pub mod netns;
pub mod os;
pub mod peer;
pub mod peers;
pub mod raw;
pub mod rawudp;
pub mod registry;
pub mod report;
pub mod results;
pub mod sendtime;
pub mod share;
pub mod studies;
pub mod subject;
pub mod suite;
pub mod throughput;
pub mod tools;
pub mod udprate;

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Context, Result};

// ---------------------------------------------------------------------------------------------
// Machine and results

/// What the results were measured on.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Machine {
    pub hostname: String,
    pub os: String,
    pub arch: String,
    pub kernel: String,
    pub cpu_model: String,
    /// CPUs online.
    pub cpus: usize,
    /// CPUs this process may run on.
    pub allowed_cpus: Vec<usize>,
    pub memory_bytes: Option<u64>,
    pub clocksource: Option<String>,
    /// The CPU reports that it runs under a hypervisor.
    pub virtualized: bool,
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

impl Machine {
    pub fn probe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            cpuinfo.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                (key.trim() == name).then(|| value.trim().to_owned())
            })
        };
        let online = cpuinfo
            .lines()
            .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
            .count();
        let memory_bytes = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        });
        let allowed_cpus = allowed_cpus();
        Machine {
            hostname: read_trimmed("/proc/sys/kernel/hostname").unwrap_or_default(),
            os: std::env::consts::OS.to_owned(),
            arch: std::env::consts::ARCH.to_owned(),
            kernel: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_default(),
            cpu_model: field("model name")
                .or_else(|| field("Model"))
                .unwrap_or_else(|| "unknown".to_owned()),
            cpus: if online > 0 {
                online
            } else {
                allowed_cpus.len()
            },
            allowed_cpus,
            memory_bytes,
            clocksource: read_trimmed(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            ),
            virtualized: field("flags").is_some_and(|f| f.split(' ').any(|x| x == "hypervisor")),
        }
    }
}

/// A node of the lab: sealed with the lab's own domain key for the `-key` transports, in the
/// clear otherwise (whatever `FERRY_KEY_FILE` says, so that each transport measures what its
/// name says). The key is fixed: sealing costs the same whatever the key.
pub fn lab_node(name: &str, domain: &str, keyed: bool) -> Result<ferry::Node> {
    lab_node_reaching(name, domain, keyed, ferry::DiscoveryConfig::default())
}

/// The discovery port of the lab's runs across two machines (or namespaces): one per host, apart
/// from ferry's default, so that a lab run and the machine's own applications do not hear each
/// other.
pub const TWO_HOST_DISCOVERY_PORT: u16 = 7651;

/// Discovery that announces to the lab process on the machine at `other`, and hears only it;
/// with `None`, discovery reaches no other host.
pub fn discovery_reaching(other: Option<std::net::Ipv4Addr>) -> ferry::DiscoveryConfig {
    let mut config = ferry::DiscoveryConfig::default();
    if let Some(ip) = other {
        config.port = TWO_HOST_DISCOVERY_PORT;
        config.peers = vec![std::net::SocketAddr::from((ip, TWO_HOST_DISCOVERY_PORT))];
    }
    config
}

/// The two machines of a run through `ferry lab agent`, as each reaches the other.
#[derive(Debug, Clone)]
pub struct TwoMachines {
    /// The agent, as given (`HOST[:PORT]`).
    pub agent: String,
    /// The agent's machine.
    pub there: std::net::IpAddr,
    /// This machine, on the way there.
    pub here: std::net::IpAddr,
}

impl TwoMachines {
    pub fn resolve(agent: &str) -> Result<TwoMachines> {
        Ok(TwoMachines {
            agent: agent.to_owned(),
            there: peer::agent_address(agent)?.ip(),
            here: peer::local_address_towards(agent)?,
        })
    }

    /// Both addresses as IPv4, which ferry's discovery needs.
    pub fn ipv4(&self) -> Result<(std::net::Ipv4Addr, std::net::Ipv4Addr)> {
        match (self.here.to_canonical(), self.there.to_canonical()) {
            (std::net::IpAddr::V4(here), std::net::IpAddr::V4(there)) => Ok((here, there)),
            _ => bail!(
                "--remote {}: ferry's UDP transports find each other over IPv4; give the other machine's IPv4 address",
                self.agent
            ),
        }
    }
}

/// As [`lab_node`], with discovery set to `discovery` (the other machine of a two-host run);
/// nothing of the node comes from `FERRY_*` variables, so that a run measures what it says.
pub fn lab_node_reaching(
    name: &str,
    domain: &str,
    keyed: bool,
    discovery: ferry::DiscoveryConfig,
) -> Result<ferry::Node> {
    let key = keyed.then(|| ferry::DomainKey::from_bytes(*b"ferry lab: the cost of sealing.."));
    let config = ferry::NodeConfig::default()
        .with_domain(domain)
        .with_key(key)
        .with_discovery(discovery);
    Ok(ferry::Node::with_config(name, config)?)
}

/// Runs `measure`, whose endpoints live in ferry's domain `domain` (one of the run's own), then
/// removes whatever they left there, whatever the outcome: the endpoints of a run that failed or
/// was interrupted, a killed peer's subscriber.
pub fn in_own_domain<T>(domain: &str, measure: impl FnOnce() -> T) -> T {
    let outcome = measure();
    let _ = ferry::admin::clean(Some(domain));
    outcome
}

/// Seconds since the Unix epoch, for the record.
pub fn unix_time() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

// ---------------------------------------------------------------------------------------------
// Statistics: see `stats`

pub use stats::Summary;

// ---------------------------------------------------------------------------------------------
// Payload: every transport writes and checks exactly the same bytes

/// The direction of a message in a two-process experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// From the main process to the peer.
    Ping,
    /// From the peer back to the main process.
    Pong,
}

/// The byte every payload byte of message `seq` in direction `dir` holds (never 0, so that a
/// fresh zeroed buffer never passes the check; the two directions differ).
pub fn pattern(seq: u64, dir: Dir) -> u8 {
    let shift = match dir {
        Dir::Ping => 0,
        Dir::Pong => 128,
    };
    ((seq + shift) % 255) as u8 + 1
}

/// Writes the whole payload.
#[inline]
pub fn fill(buf: &mut [u8], byte: u8) {
    buf.fill(byte);
}

/// Reads the whole payload, 8 bytes at a time, and says whether every byte equals `byte`.
#[inline]
pub fn check(buf: &[u8], byte: u8) -> bool {
    let word = u64::from_ne_bytes([byte; 8]);
    let mut chunks = buf.chunks_exact(8);
    let mut diff = 0u64;
    for chunk in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        diff |= u64::from_ne_bytes(w) ^ word;
    }
    diff == 0 && chunks.remainder().iter().all(|&b| b == byte)
}

/// Checks a received message: its length and every byte, and the transport's own sequence
/// number where it has one.
pub fn verify(
    payload: &[u8],
    seq: u64,
    transport_seq: Option<u64>,
    len: usize,
    dir: Dir,
) -> Result<()> {
    if let Some(got) = transport_seq {
        if got != seq {
            bail!("{dir:?} message {seq} arrived with sequence number {got}");
        }
    }
    if payload.len() != len {
        bail!(
            "{dir:?} message {seq} has {} bytes, expected {len}",
            payload.len()
        );
    }
    let byte = pattern(seq, dir);
    if !check(payload, byte) {
        let at = payload.iter().position(|&b| b != byte).unwrap_or(0);
        bail!(
            "{dir:?} message {seq} is corrupt: byte {at} is {:#04x}, expected {byte:#04x}",
            payload[at]
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Message channels

/// One end of a two-way message channel between the main process and the peer.
pub trait Endpoint {
    /// Writes message `seq` (`len` bytes of its pattern) and sends it.
    fn send(&mut self, seq: u64, len: usize) -> Result<()>;

    /// Waits at most about `slice` for message `seq`, then reads and checks all of it. False if
    /// it did not come in time.
    fn recv(&mut self, seq: u64, len: usize, slice: Duration) -> Result<bool>;
}

/// `flag`'s list must be non-empty and name nothing twice (`what` names an entry).
pub fn distinct_list<T: PartialEq>(
    flag: &str,
    items: &[T],
    what: impl Fn(&T) -> String,
) -> Result<()> {
    if items.is_empty() {
        bail!("{flag}: give at least one");
    }
    for (i, t) in items.iter().enumerate() {
        if items[..i].contains(t) {
            bail!("{flag}: {} is listed twice", what(t));
        }
    }
    Ok(())
}

/// How long one wait lasts before the waiter looks at its partner's health again.
pub const WAIT_SLICE: Duration = Duration::from_millis(50);

/// Waits for message `seq` up to `timeout`, calling `healthy` between slices of waiting.
pub fn await_message<E: Endpoint>(
    end: &mut E,
    seq: u64,
    len: usize,
    timeout: Duration,
    healthy: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    if end.recv(seq, len, WAIT_SLICE)? {
        return Ok(());
    }
    let deadline = Instant::now() + timeout;
    loop {
        healthy()?;
        if end.recv(seq, len, WAIT_SLICE)? {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("message {seq} ({len} bytes) did not arrive within {timeout:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Pinning

/// `--pin`: the CPUs of the main process and of the peer, or no pinning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Pin {
    None,
    Cpus { main: usize, peer: usize },
}

pub fn parse_pin(text: &str) -> Result<Pin, String> {
    if text.trim().eq_ignore_ascii_case("none") {
        return Ok(Pin::None);
    }
    let invalid = || {
        format!(
            "invalid pinning {text:?}: expected two CPU numbers A,B (main process, peer), or none"
        )
    };
    let (a, b) = text.split_once(',').ok_or_else(invalid)?;
    let cpu = |s: &str| -> Result<usize, String> {
        let s = s.trim();
        if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(invalid());
        }
        s.parse().map_err(|_| invalid())
    };
    Ok(Pin::Cpus {
        main: cpu(a)?,
        peer: cpu(b)?,
    })
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// How the two processes were placed, as stated in the results.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum Pinning {
    Pinned {
        main_cpu: usize,
        peer_cpu: usize,
    },
    /// The main process pinned; the peer runs on another machine (`--remote`), as it is placed
    /// there.
    Remote {
        main_cpu: Option<usize>,
    },
    None {
        reason: String,
    },
}

impl Pinning {
    /// Resolves `--pin` against the CPUs available: the default is the first two.
    pub fn resolve(pin: Option<Pin>) -> Result<Pinning> {
        let allowed = allowed_cpus();
        match pin {
            Some(Pin::None) => Ok(Pinning::None {
                reason: "--pin none".to_owned(),
            }),
            Some(Pin::Cpus { main, peer }) => {
                for cpu in [main, peer] {
                    if !allowed.contains(&cpu) {
                        bail!(
                            "--pin: CPU {cpu} is not available to this process (available: {})",
                            allowed
                                .iter()
                                .map(usize::to_string)
                                .collect::<Vec<_>>()
                                .join(",")
                        );
                    }
                }
                Ok(Pinning::Pinned {
                    main_cpu: main,
                    peer_cpu: peer,
                })
            }
            None if allowed.len() >= 2 => Ok(Pinning::Pinned {
                main_cpu: allowed[0],
                peer_cpu: allowed[1],
            }),
            None => Ok(Pinning::None {
                reason: format!("only {} CPU available", allowed.len()),
            }),
        }
    }

    /// Resolves `--pin` for a run whose peer may be on another machine: there only this
    /// process's CPU is this machine's business.
    pub fn resolve_for(pin: Option<Pin>, remote: bool) -> Result<Pinning> {
        let local = Pinning::resolve(pin)?;
        Ok(match (remote, local) {
            (false, local) => local,
            (true, Pinning::Pinned { main_cpu, .. }) => Pinning::Remote {
                main_cpu: Some(main_cpu),
            },
            (true, _) => Pinning::Remote { main_cpu: None },
        })
    }

    /// The CPU of this machine's main process, if pinned.
    pub fn main_cpu(&self) -> Option<usize> {
        match self {
            Pinning::Pinned { main_cpu, .. } => Some(*main_cpu),
            Pinning::Remote { main_cpu } => *main_cpu,
            Pinning::None { .. } => None,
        }
    }

    pub fn peer_cpu(&self) -> Option<usize> {
        match self {
            Pinning::Pinned { peer_cpu, .. } => Some(*peer_cpu),
            Pinning::Remote { .. } | Pinning::None { .. } => None,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Pinning::Pinned { main_cpu, peer_cpu } => {
                format!("main process on CPU {main_cpu}, peer on CPU {peer_cpu}")
            }
            Pinning::Remote {
                main_cpu: Some(cpu),
            } => {
                format!("main process on CPU {cpu}, peer on another machine")
            }
            Pinning::Remote { main_cpu: None } => {
                "main process not pinned, peer on another machine".to_owned()
            }
            Pinning::None { reason } => format!("not pinned ({reason})"),
        }
    }
}

/// Pins the calling thread (the lab runs each side on one thread) to `cpu` and checks it.
pub fn pin_to(cpu: usize) -> Result<()> {
    crate::os::pin_current_thread(cpu).context(format!("cannot pin to CPU {cpu}"))?;
    let now = crate::os::current_cpu();
    if now != cpu {
        bail!("pinned to CPU {cpu} but running on CPU {now}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The peer process

/// Starts `cmd`, a child of the lab, in a process group of its own, so that a Ctrl-C at the
/// terminal reaches only the lab's main process, which then ends the run in order: it closes its
/// own endpoints while the children still answer (a reliable UDP publisher lingers for subscribers
/// that have not confirmed everything, and waits longest for one that a signal killed), then
/// kills and reaps every child, and reports the interruption rather than children that died of
/// it. A child whose main process went away ends by itself: peers see their input end (see
/// `peer`), the tools and minimal apps run for a set time.
pub fn spawn_child(cmd: &mut Command) -> std::io::Result<Child> {
    cmd.process_group(0).spawn()
}

/// What a main side needs of its peer while it waits for something ([`peer::Peer`]; a trait so
/// that the baseline channels can be tested without one).
pub trait Watched {
    /// Waits until `ready()` holds, at most `timeout`, watching the peer and Ctrl-C meanwhile.
    fn wait_until(
        &mut self,
        timeout: Duration,
        ready: &mut dyn FnMut() -> Result<bool>,
    ) -> Result<()>;
}

impl Watched for peer::Peer {
    fn wait_until(
        &mut self,
        timeout: Duration,
        ready: &mut dyn FnMut() -> Result<bool>,
    ) -> Result<()> {
        self.wait_ready(timeout, ready)
    }
}

/// The time the hypervisor has taken from this machine's CPUs ("steal", all CPUs together), from
/// /proc/stat; `None` where the kernel does not report it. A virtual machine's figures swing with
/// it: a cyclic app whose CPU was stolen for 100 ms misses 100 deadlines of 1 ms through no fault
/// of its own.
pub fn host_steal() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse_steal(&text, rustix::param::clock_ticks_per_second())
}

fn parse_steal(stat: &str, ticks_per_second: u64) -> Option<Duration> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    // cpu user nice system idle iowait irq softirq steal ...
    let ticks: u64 = line.split_whitespace().nth(8)?.parse().ok()?;
    (ticks_per_second > 0)
        .then(|| Duration::from_nanos(ticks.saturating_mul(1_000_000_000) / ticks_per_second))
}

/// The CPU time this process has used (all its threads, user and system).
pub fn process_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_the_eighth_figure_of_the_cpu_line() {
        let stat = "cpu  10 0 5 100 1 0 2 250 0 0\ncpu0 5 0 2 50 0 0 1 125 0 0\n";
        assert_eq!(parse_steal(stat, 100), Some(Duration::from_millis(2500)));
        assert_eq!(parse_steal("cpu0 1 2 3\n", 100), None);
        assert_eq!(parse_steal("cpu  1 2 3\n", 100), None);
    }

    #[test]
    fn payload_check() {
        for len in [0, 1, 7, 8, 9, 32, 1000] {
            let mut buf = vec![0u8; len];
            let b = pattern(42, Dir::Ping);
            fill(&mut buf, b);
            assert!(check(&buf, b));
            assert!(verify(&buf, 42, Some(42), len, Dir::Ping).is_ok());
            if len > 0 {
                assert!(verify(&buf, 42, None, len, Dir::Pong).is_err());
                buf[len - 1] ^= 1;
                assert!(!check(&buf, b));
            }
        }
        assert!(verify(&[1, 1], 0, Some(1), 2, Dir::Ping).is_err());
        for seq in 0..1000 {
            assert_ne!(pattern(seq, Dir::Ping), 0);
            assert_ne!(pattern(seq, Dir::Pong), 0);
            assert_ne!(pattern(seq, Dir::Ping), pattern(seq, Dir::Pong));
            assert_ne!(pattern(seq, Dir::Ping), pattern(seq + 1, Dir::Ping));
        }
    }

    #[test]
    fn pins() {
        assert_eq!(parse_pin("none"), Ok(Pin::None));
        assert_eq!(parse_pin("0,1"), Ok(Pin::Cpus { main: 0, peer: 1 }));
        for bad in ["", "0", "0,", "a,b", "0,1,2", "-1,0"] {
            assert!(parse_pin(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
