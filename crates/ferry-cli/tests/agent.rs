//! `ferry lab agent` end to end: a latency run whose peer runs through the agent, over ferry's
//! UDP (plain and with the domain key) and plain UDP sockets (on loopback, and as root between
//! two network namespaces joined by a veth pair, as two machines would be);
//! an agent refuses connections from addresses it was not told and labs that cannot prove its
//! domain key. No timing is asserted; every process is bounded and killed if it overruns.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

mod common;
use common::{read_json, tmp_path as tmp, Agent, Ended, SHORT_THROUGHPUT};

/// Runs `prefix ferry lab latency ARGS`, killed after `limit`.
fn lab_latency(prefix: &[&str], args: &[&str], env: &[(&str, &Path)], limit: Duration) -> Ended {
    lab(prefix, "latency", args, env, limit)
}

/// Runs `prefix ferry lab EXPERIMENT ARGS`, killed after `limit`.
fn lab(
    prefix: &[&str],
    experiment: &str,
    args: &[&str],
    env: &[(&str, &Path)],
    limit: Duration,
) -> Ended {
    let ferry = env!("CARGO_BIN_EXE_ferry");
    let mut cmd = match prefix.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(ferry);
            c
        }
        None => Command::new(ferry),
    };
    cmd.env_remove("FERRY_KEY_FILE").env("CI", "true");
    for (k, v) in env {
        cmd.env(k, v);
    }
    common::run_lab(cmd, &[&[experiment], args].concat(), limit)
}

/// Checks that a run through `agent` succeeded (saying what the agent logged if not).
fn check_success(out: &Ended, agent: &Agent) {
    assert!(out.success(), "{}\nagent: {}", out.stderr, agent.log());
}

/// Checks that a run failed saying `says`.
fn check_refused(out: &Ended, says: &str) {
    assert!(!out.success());
    assert!(out.stderr.contains(says), "{}", out.stderr);
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
    let v = read_json(json);
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
    check_success(&out, &agent);
    check_remote_results(&json, &["udp4", "raw-udp4"], &agent.address);
    agent.check_logged("latency peer for 127.0.0.1");
}

/// Runs a short `prefix ferry lab throughput` (1 KiB messages, 0.3 s, one round) of
/// `transports`, its subscriber through `agent` at `remote`, and checks its results: every
/// transport delivered, the peer recorded as remote.
fn remote_throughput(prefix: &[&str], remote: &str, transports: &[&str], agent: &Agent) {
    let json = tmp("throughput.json");
    let list = transports.join(",");
    let mut args = vec!["--remote", remote, "--transport", &list];
    args.extend(SHORT_THROUGHPUT);
    args.extend(["--json", json.to_str().unwrap()]);
    let out = lab(prefix, "throughput", &args, &[], Duration::from_secs(180));
    check_success(&out, agent);
    let v = read_json(&json);
    assert_eq!(v["request"]["remote"], remote);
    let rows = v["rows"].as_array().expect("rows");
    for t in transports {
        let row = common::row_of(rows, t);
        assert!(
            row["messages_delivered"].as_u64().is_some_and(|d| d > 0),
            "{row}"
        );
    }
}

#[test]
fn throughput_and_udp_rate_run_their_receivers_through_an_agent_on_loopback() {
    let agent = Agent::here(&["--listen", "127.0.0.1:0"]);
    remote_throughput(&[], &agent.address, &["udp4", "raw-udp4"], &agent);

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
    check_success(&out, &agent);
    let v = read_json(&json);
    let row = &v["rows"][0];
    assert!(
        row["achieved_bps"].as_f64().is_some_and(|b| b > 0.0),
        "{row}"
    );
    agent.check_logged("udp-rate peer for 127.0.0.1");
}

#[test]
fn an_agent_refuses_addresses_it_was_not_told() {
    let agent = Agent::here(&["--listen", "127.0.0.1:0", "--allow", "192.0.2.1"]);
    let mut args = vec!["--remote", &agent.address, "--transport", "raw-udp4"];
    args.extend(SMALL);
    let out = lab_latency(&[], &args, &[], Duration::from_secs(60));
    check_refused(&out, "lab agent");
    agent.check_logged("not an allowed address");
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
    check_refused(&none, "asks for the domain key");

    let wrong = lab_latency(
        &[],
        &args,
        &[("FERRY_KEY_FILE", &other)],
        Duration::from_secs(60),
    );
    check_refused(&wrong, "not proven");

    let json = tmp("keyed.json");
    args.extend(["--json", json.to_str().unwrap()]);
    let right = lab_latency(
        &[],
        &args,
        &[("FERRY_KEY_FILE", &key)],
        Duration::from_secs(120),
    );
    check_success(&right, &agent);
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
    check_refused(&out, "cannot reach the lab agent");
    let out = lab_latency(
        &[],
        &["--remote", "127.0.0.1", "--transport", "shm"],
        &[],
        Duration::from_secs(60),
    );
    check_refused(&out, "cannot reach another machine");
}

#[test]
#[ignore = "needs root"]
fn latency_and_throughput_across_two_namespaces_through_the_agent() {
    let (pair, agent) = Agent::across_namespaces("ferry-agent-test-", "fat", 205);
    let (here, there) = (pair.addr[0].to_string(), pair.addr[1].to_string());
    let ip = pair.ip().to_str().expect("a UTF-8 path").to_owned();
    let in_a = [ip.as_str(), "netns", "exec", pair.ns[0].as_str()];
    let json = tmp("netns.json");
    let transports = ["udp4", "udp4-key", "raw-udp4"];
    let list = transports.join(",");
    let mut args = vec!["--remote", there.as_str(), "--transport", &list];
    args.extend(SMALL);
    args.extend(["--json", json.to_str().unwrap()]);
    let out = lab_latency(&in_a, &args, &[], Duration::from_secs(180));
    check_success(&out, &agent);
    check_remote_results(&json, &transports, &there);
    agent.check_logged(&format!("latency peer for {here}"));

    remote_throughput(&in_a, &there, &transports, &agent);
}
