//! `ferry lab agent` end to end: a latency run whose peer runs through the agent, over ferry's
//! UDP (plain and with the domain key) and plain UDP sockets (on loopback, and as root between
//! two network namespaces joined by a veth pair, as two machines would be);
//! an agent refuses connections from addresses it was not told and labs that cannot prove its
//! domain key. No timing is asserted; every process is bounded and killed if it overruns.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::{tmp_path as tmp, Agent};

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
    let agent = Agent::here(&["--listen", "127.0.0.1:0"]);
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
    let agent = Agent::here(&["--listen", "127.0.0.1:0"]);
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
    let agent = Agent::here(&["--listen", "127.0.0.1:0", "--allow", "192.0.2.1"]);
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
    let agent = Agent::here(&[
        "--listen",
        "127.0.0.1:0",
        "--key-file",
        key.to_str().unwrap(),
    ]);
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

/// Talks to an agent as a hostile lab would: sends `hello` and returns the agent's last line.
fn ask_agent(address: &str, hello: &str) -> String {
    use std::io::{BufRead, BufReader, Write};
    let mut stream = std::net::TcpStream::connect(address).expect("connect to the agent");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut greeting = String::new();
    reader.read_line(&mut greeting).unwrap();
    assert!(greeting.contains("ferry lab agent"), "{greeting}");
    writeln!(stream, "{hello}").unwrap();
    let mut last = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return last;
        }
        last = line;
    }
}

#[test]
fn an_agent_runs_nothing_that_belongs_to_one_machine() {
    let agent = Agent::here(&["--listen", "127.0.0.1:0"]);
    // An experiment with no peer on another machine (its apps would run in this host's cgroups).
    let last = ask_agent(&agent.address, r#"{"experiment":"cycle","request":{}}"#);
    assert!(last.contains("runs on one machine"), "{last}");
    // A transport that names this machine's shared memory.
    let last = ask_agent(
        &agent.address,
        r#"{"experiment":"latency","request":{"transport":"raw-spin","sizes":[32],"counts":[1],"cpu":null,"max_size":32,"ferry":null,"shm":"some-object","udp":null}}"#,
    );
    assert!(last.contains("cannot reach another machine"), "{last}");
    // Sizes beyond every bound, and junk.
    let last = ask_agent(
        &agent.address,
        r#"{"experiment":"latency","request":{"transport":"raw-udp4","sizes":[32],"counts":[1],"cpu":null,"max_size":99999999999,"ferry":null,"shm":null,"udp":"127.0.0.1:9"}}"#,
    );
    assert!(last.contains("out of range"), "{last}");
    let last = ask_agent(&agent.address, "not json");
    assert!(last.contains("unreadable request"), "{last}");
    let log = agent.log();
    assert!(log.contains("refused"), "{log}");
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

#[test]
#[ignore = "needs root"]
fn latency_and_throughput_across_two_namespaces_through_the_agent() {
    let missing = ferry_lab::netns::missing(false);
    assert!(
        missing.is_empty(),
        "two namespaces need {missing:?}; CI runs this test as root with iproute2"
    );
    let pair = ferry_lab::netns::Pair::create(&ferry_lab::netns::Spec {
        prefix: "ferry-agent-test-",
        device: "fat",
        net: 205,
        rate: None,
    })
    .expect("two network namespaces");
    let (here, there) = (pair.addr[0].to_string(), pair.addr[1].to_string());
    let listen = format!("{there}:7447");
    let agent = Agent::start(
        pair.command(1, env!("CARGO_BIN_EXE_ferry")),
        &["--listen", &listen, "--allow", &here],
    );
    let ip = pair.ip().to_str().expect("a UTF-8 path").to_owned();
    let in_a = [ip.as_str(), "netns", "exec", pair.ns[0].as_str()];
    let json = tmp("netns.json");
    let transports = ["udp4", "udp4-key", "raw-udp4"];
    let list = transports.join(",");
    let mut args = vec!["--remote", there.as_str(), "--transport", &list];
    args.extend(SMALL);
    args.extend(["--json", json.to_str().unwrap()]);
    let out = lab_latency(&in_a, &args, &[], Duration::from_secs(180));
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
    let out = lab(&in_a, "throughput", &args, &[], Duration::from_secs(180));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\nagent: {}", agent.log());
    check_remote_throughput(&json, &["udp4", "udp4-key", "raw-udp4"], &there);
}
