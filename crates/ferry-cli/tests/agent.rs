//! `ferry lab agent` end to end: a latency run whose peer runs through the agent, over ferry's
//! UDP (plain and with the domain key) and plain UDP sockets (on loopback, and as root between
//! two network namespaces joined by a veth pair, as two machines would be);
//! an agent refuses connections from addresses it was not told and labs that cannot prove its
//! domain key. No timing is asserted; every process is bounded and killed if it overruns.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

fn tmp(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    // Relaxed: only uniqueness matters.
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!(
        "ferry-agent-test-{}-{name}-{n}",
        std::process::id()
    ))
}

/// A running agent, killed when dropped; its log goes to a file.
struct Agent {
    child: Child,
    log: PathBuf,
    /// Where it listens, from its first line.
    address: String,
}

impl Agent {
    /// Starts `ferry lab agent ARGS` (through `prefix`, e.g. `ip netns exec NS`), and waits
    /// for it to say where it listens.
    fn start(prefix: &[&str], args: &[&str], env: &[(&str, &Path)]) -> Agent {
        let log = tmp("agent-log");
        let ferry = env!("CARGO_BIN_EXE_ferry");
        let mut cmd = match prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(ferry);
                c
            }
            None => Command::new(ferry),
        };
        cmd.args(["lab", "agent"])
            .args(args)
            .env_remove("FERRY_KEY_FILE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start the agent");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(rest) = text.split("listening on ").nth(1) {
                let address = rest
                    .split([',', ' ', '\n'])
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                return Agent {
                    child,
                    log,
                    address,
                };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the agent exited ({status}): {text}");
            }
            assert!(Instant::now() < deadline, "the agent did not start: {text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Runs `prefix ferry lab latency ARGS`, killed after `limit`.
fn lab_latency(prefix: &[&str], args: &[&str], env: &[(&str, &Path)], limit: Duration) -> Output {
    lab(prefix, "latency", args, env, limit)
}

/// Runs `prefix ferry lab EXPERIMENT ARGS`, killed after `limit`.
fn lab(
    prefix: &[&str],
    experiment: &str,
    args: &[&str],
    env: &[(&str, &Path)],
    limit: Duration,
) -> Output {
    let ferry = env!("CARGO_BIN_EXE_ferry");
    let mut cmd = match prefix.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(ferry);
            c
        }
        None => Command::new(ferry),
    };
    cmd.args(["lab", experiment])
        .args(args)
        .env_remove("FERRY_KEY_FILE")
        .env("CI", "true")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start ferry lab latency");
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ferry lab {experiment} {args:?} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let _ = child.stdout.take().map(|mut s| s.read_to_end(&mut stdout));
    let _ = child.stderr.take().map(|mut s| s.read_to_end(&mut stderr));
    Output {
        status,
        stdout,
        stderr,
    }
}

const SMALL: [&str; 8] = [
    "--sizes",
    "32,1K",
    "--samples",
    "40",
    "--rounds",
    "2",
    "--warmup",
    "5",
];

/// Checks a successful remote run's results: every transport and size measured, the peer
/// recorded as remote.
fn check_remote_results(json: &Path, transports: &[&str], agent: &str) {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(json).expect("results written"))
        .expect("results JSON");
    let _ = std::fs::remove_file(json);
    assert_eq!(v["request"]["remote"], agent);
    let processes = v["config"]["processes"].as_str().unwrap_or_default();
    assert!(processes.contains(agent), "{processes}");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), transports.len() * 2, "{rows:?}");
    for r in rows {
        assert!(transports.contains(&r["transport"].as_str().unwrap_or_default()));
        assert_eq!(r["samples"], 40, "{r}");
        assert!(r["p50_ns"].as_u64().is_some_and(|p| p > 0), "{r}");
    }
}

#[test]
fn latency_runs_its_peer_through_an_agent_on_loopback() {
    let agent = Agent::start(&[], &["--listen", "127.0.0.1:0"], &[]);
    let json = tmp("loopback.json");
    let mut args = vec!["--remote", &agent.address, "--transport", "udp4,raw-udp4"];
    args.extend(SMALL);
    args.extend(["--json", json.to_str().unwrap()]);
    let out = lab_latency(&[], &args, &[], Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\nagent: {}", agent.log());
    check_remote_results(&json, &["udp4", "raw-udp4"], &agent.address);
    assert!(
        agent.log().contains("latency peer for 127.0.0.1"),
        "{}",
        agent.log()
    );
}

/// Checks a remote throughput run: every transport delivered, the peer recorded as remote.
fn check_remote_throughput(json: &Path, transports: &[&str], agent: &str) {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(json).expect("results written"))
        .expect("results JSON");
    let _ = std::fs::remove_file(json);
    assert_eq!(v["request"]["remote"], agent);
    let rows = v["rows"].as_array().expect("rows");
    for t in transports {
        let row = rows
            .iter()
            .find(|r| r["transport"] == *t)
            .unwrap_or_else(|| panic!("no {t} row in {rows:?}"));
        assert!(
            row["messages_delivered"].as_u64().is_some_and(|d| d > 0),
            "{row}"
        );
    }
}

#[test]
fn throughput_and_udp_rate_run_their_receivers_through_an_agent_on_loopback() {
    let agent = Agent::start(&[], &["--listen", "127.0.0.1:0"], &[]);
    let json = tmp("throughput.json");
    let args = [
        "--remote",
        &agent.address,
        "--transport",
        "udp4,raw-udp4",
        "--sizes",
        "1K",
        "--duration",
        "0.3",
        "--rounds",
        "1",
        "--json",
        json.to_str().unwrap(),
    ];
    let out = lab(&[], "throughput", &args, &[], Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\nagent: {}", agent.log());
    check_remote_throughput(&json, &["udp4", "raw-udp4"], &agent.address);

    let json = tmp("udp-rate.json");
    let args = [
        "--remote",
        &agent.address,
        "--threads",
        "1",
        "--mss",
        "1472",
        "--rate",
        "100M",
        "--duration",
        "1",
        "--json",
        json.to_str().unwrap(),
    ];
    let out = lab(&[], "udp-rate", &args, &[], Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\nagent: {}", agent.log());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let row = &v["rows"][0];
    assert!(
        row["achieved_bps"].as_f64().is_some_and(|b| b > 0.0),
        "{row}"
    );
    assert!(
        agent.log().contains("udp-rate peer for 127.0.0.1"),
        "{}",
        agent.log()
    );
}

#[test]
fn an_agent_refuses_addresses_it_was_not_told() {
    let agent = Agent::start(
        &[],
        &["--listen", "127.0.0.1:0", "--allow", "192.0.2.1"],
        &[],
    );
    let mut args = vec!["--remote", &agent.address, "--transport", "raw-udp4"];
    args.extend(SMALL);
    let out = lab_latency(&[], &args, &[], Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("lab agent"), "{stderr}");
    assert!(
        agent.log().contains("not an allowed address"),
        "{}",
        agent.log()
    );
}

#[test]
fn an_agent_with_a_key_serves_only_a_lab_that_proves_it() {
    let key = tmp("key");
    let other = tmp("other-key");
    std::fs::write(&key, [7u8; 32]).unwrap();
    std::fs::write(&other, [8u8; 32]).unwrap();
    let agent = Agent::start(
        &[],
        &[
            "--listen",
            "127.0.0.1:0",
            "--key-file",
            key.to_str().unwrap(),
        ],
        &[],
    );
    let mut args = vec!["--remote", &agent.address, "--transport", "raw-udp4"];
    args.extend(SMALL);

    let none = lab_latency(&[], &args, &[], Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&none.stderr);
    assert!(!none.status.success());
    assert!(stderr.contains("asks for the domain key"), "{stderr}");

    let wrong = lab_latency(
        &[],
        &args,
        &[("FERRY_KEY_FILE", &other)],
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(!wrong.status.success());
    assert!(stderr.contains("not proven"), "{stderr}");

    let json = tmp("keyed.json");
    args.extend(["--json", json.to_str().unwrap()]);
    let right = lab_latency(
        &[],
        &args,
        &[("FERRY_KEY_FILE", &key)],
        Duration::from_secs(120),
    );
    let stderr = String::from_utf8_lossy(&right.stderr);
    assert!(right.status.success(), "{stderr}\nagent: {}", agent.log());
    check_remote_results(&json, &["raw-udp4"], &agent.address);
    let log = agent.log();
    assert!(
        log.contains("without the key") || log.contains("no proof"),
        "{log}"
    );
    for f in [&key, &other] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn a_bad_remote_is_refused_with_a_reason() {
    let mut args = vec!["--remote", "127.0.0.1:1", "--transport", "raw-udp4"];
    args.extend(SMALL);
    let out = lab_latency(&[], &args, &[], Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("cannot reach the lab agent"), "{stderr}");
    let out = lab_latency(
        &[],
        &["--remote", "127.0.0.1", "--transport", "shm"],
        &[],
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("cannot reach another machine"), "{stderr}");
}

/// Two network namespaces joined by a veth pair: two hosts, 10.77.<n>.1 and 10.77.<n>.2.
struct TwoHosts {
    names: [String; 2],
}

impl TwoHosts {
    fn new() -> TwoHosts {
        let n = std::process::id() % 200 + 20;
        let names = [format!("ferry-ag-a{n}"), format!("ferry-ag-b{n}")];
        let ip = |args: &[&str]| {
            let out = Command::new("ip").args(args).output().expect("run ip");
            assert!(
                out.status.success(),
                "ip {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        for ns in &names {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
            ip(&["netns", "add", ns]);
        }
        let (a, b) = (&names[0], &names[1]);
        ip(&[
            "link", "add", "fag-a", "netns", a, "type", "veth", "peer", "name", "fag-b", "netns", b,
        ]);
        let hosts = TwoHosts {
            names: names.clone(),
        };
        for (ns, dev, addr) in [(a, "fag-a", 1), (b, "fag-b", 2)] {
            let cidr = format!("10.77.{n}.{addr}/24");
            ip(&["-n", ns, "addr", "add", &cidr, "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        hosts
    }

    fn address(&self, host: usize) -> String {
        format!("10.77.{}.{}", std::process::id() % 200 + 20, host + 1)
    }

    fn exec(&self, host: usize) -> [&str; 4] {
        ["ip", "netns", "exec", &self.names[host]]
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        for ns in &self.names {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

#[test]
#[ignore = "needs root"]
fn latency_and_throughput_across_two_namespaces_through_the_agent() {
    let hosts = TwoHosts::new();
    let here = hosts.address(0);
    let there = hosts.address(1);
    let listen = format!("{there}:7447");
    let agent = Agent::start(
        &hosts.exec(1),
        &["--listen", &listen, "--allow", &here],
        &[],
    );
    let json = tmp("netns.json");
    let transports = ["udp4", "udp4-key", "raw-udp4"];
    let list = transports.join(",");
    let mut args = vec!["--remote", there.as_str(), "--transport", &list];
    args.extend(SMALL);
    args.extend(["--json", json.to_str().unwrap()]);
    let out = lab_latency(&hosts.exec(0), &args, &[], Duration::from_secs(180));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\nagent: {}", agent.log());
    check_remote_results(&json, &transports, &there);
    assert!(
        agent.log().contains(&format!("latency peer for {here}")),
        "{}",
        agent.log()
    );

    let json = tmp("netns-throughput.json");
    let args = [
        "--remote",
        there.as_str(),
        "--transport",
        "udp4,udp4-key,raw-udp4",
        "--sizes",
        "1K",
        "--duration",
        "0.3",
        "--rounds",
        "1",
        "--json",
        json.to_str().unwrap(),
    ];
    let out = lab(
        &hosts.exec(0),
        "throughput",
        &args,
        &[],
        Duration::from_secs(180),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\nagent: {}", agent.log());
    check_remote_throughput(&json, &["udp4", "udp4-key", "raw-udp4"], &there);
}
