//! `ferry lab hubs` end to end: roundtrip and flood over a ring of hub processes on one host
//! (shm, udp, auto) write results JSON and lose nothing; a dead hub is reported, not waited for;
//! bad arguments are refused; with `--remote`, the odd hubs run through a `ferry lab agent` (on
//! loopback here). As root with `ip` and `tc`, a two-host run (network namespaces, a tbf link
//! rate), a run across two namespaces through an agent (the lab in one, the agent in the other,
//! made with the lab's own `ferry_lab::netns`) and a run under a cgroup CPU quota run for real;
//! elsewhere they skip with a printed reason. No timing is asserted; every run is bounded and
//! killed if it overruns.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::{read_json, tmp_path as tmp, Agent, Ended};

/// Runs `ferry lab hubs ARGS`, killed after `limit`.
fn lab_hubs(args: &[&str], limit: Duration) -> Ended {
    lab_hubs_with(ferry(), args, limit)
}

/// As `lab_hubs`, with `ferry` run by `command` (in a network namespace, say).
fn lab_hubs_with(command: Command, args: &[&str], limit: Duration) -> Ended {
    common::run_lab(command, &[&["hubs"], args].concat(), limit)
}

/// The ferry executable, to run here.
fn ferry() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
}

/// Runs `ferry lab hubs ARGS --json FILE` with `command` (killed after 300 s), which must
/// succeed (`what` names it if not); what it printed, and its results, checked against the
/// results format and the configuration of a ring of `hubs`.
fn measure(command: Command, args: &[&str], hubs: u64, what: &str) -> (Ended, Value) {
    let json = tmp("hubs.json");
    let all = [args, &["--json", json.to_str().unwrap()]].concat();
    let out = lab_hubs_with(command, &all, Duration::from_secs(300));
    out.check_success(what);
    let v = read_json(&json);
    check_contract(&v, hubs);
    (out, v)
}

/// The results format's frame and this experiment's config.
fn check_contract(v: &Value, hubs: u64) {
    assert_eq!(v["experiment"], "hubs");
    assert!(v["ferry_version"].is_string());
    assert!(v["machine"]["cpus"].as_u64().unwrap() >= 1);
    assert!(v["machine"]["kernel"].is_string());
    let config = &v["config"];
    assert_eq!(config["hubs"], hubs);
    assert_eq!(config["delivery"], "reliable");
    assert_eq!(config["placement"].as_array().unwrap().len() as u64, hubs);
    let pinning = config["pinning"]["summary"]
        .as_str()
        .expect("pinning summary");
    assert!(pinning.contains("share"), "{pinning}");
    assert!(config["topology"].as_str().unwrap().contains("hubs/edge0"));
    assert!(v["rows"].is_array());
}

/// A measured row: everything arrived intact and in order, and the figures of its mode are
/// there (their values are not judged).
fn check_row(row: &Value, messages: u64, hubs: usize) {
    assert!(row["skipped"].is_null(), "{row}");
    for key in [
        "transport",
        "mode",
        "hubs",
        "hosts",
        "size_bytes",
        "messages",
        "round",
    ] {
        assert!(!row[key].is_null(), "{key} missing in {row}");
    }
    assert!(row.get("link_rate").is_some() && row.get("cpu").is_some());
    assert_eq!(row["messages"], messages);
    assert_eq!(row["received"], messages, "{row}");
    for key in ["lost", "corrupt", "out_of_order", "duplicates"] {
        assert_eq!(row[key], 0, "{key} in {row}");
    }
    assert!(row["error"].is_null(), "{row}");
    match row["mode"].as_str() {
        Some("roundtrip") => {
            for key in [
                "lap_p50_ns",
                "lap_p90_ns",
                "lap_p99_ns",
                "lap_max_ns",
                "lap_min_ns",
            ] {
                assert!(row[key].is_u64(), "{key} in {row}");
            }
            assert!(row["lap_mean_ns"].is_number() && row["total_s"].is_number());
            assert!(row["completion_s"].is_null());
        }
        Some("flood") => {
            assert!(row["completion_s"].as_f64().unwrap() > 0.0, "{row}");
            assert!(row["messages_per_s"].as_f64().unwrap() > 0.0, "{row}");
            assert!(row["lap_p50_ns"].is_null());
        }
        other => panic!("mode {other:?}"),
    }
    let edges = row["edges"].as_array().expect("edges");
    assert_eq!(edges.len(), hubs);
    let procs = row["processes"].as_array().expect("processes");
    assert_eq!(procs.len(), hubs);
    assert_eq!(procs[0]["role"], "master");
    for p in procs {
        assert!(p["last_cpu"].is_u64() && !p["allowed_cpus"].as_array().unwrap().is_empty());
    }
}

/// The `key` of each item of `row`'s `list` (`processes` or `edges`).
fn each<'a>(row: &'a Value, list: &str, key: &str) -> Vec<&'a str> {
    row[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item[key].as_str().unwrap())
        .collect()
}

/// The path of each edge of `row`'s ring.
fn paths(row: &Value) -> Vec<&str> {
    each(row, "edges", "path")
}

#[test]
fn one_host_roundtrip_and_flood_lose_nothing() {
    let (out, v) = measure(
        ferry(),
        &[
            "--mode",
            "roundtrip,flood",
            "--transport",
            "shm,udp,auto",
            "--messages",
            "40",
            "--warmup",
            "5",
            "--rounds",
            "2",
        ],
        4,
        "lab hubs",
    );
    assert!(out.stdout.contains("Roundtrip") && out.stdout.contains("Flood"));
    assert_eq!(v["config"]["hosts"], 1);
    assert_eq!(v["config"]["messages"], 40);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2 * 3 * 2, "modes × transports × rounds");
    for row in rows {
        check_row(row, 40, 4);
        assert_eq!(row["hosts"], 1);
        assert!(row["link_rate"].is_null() && row["cpu"].is_null());
        let want = match row["transport"].as_str().unwrap() {
            "udp4" => "udp",
            _ => "shm",
        };
        assert!(paths(row).iter().all(|p| *p == want), "{row}");
    }
    // Interleaved rounds: both rounds of every transport and mode are kept.
    for t in ["shm", "udp4", "auto"] {
        for m in ["roundtrip", "flood"] {
            let mut rounds: Vec<u64> = rows
                .iter()
                .filter(|r| r["transport"] == t && r["mode"] == m)
                .map(|r| r["round"].as_u64().unwrap())
                .collect();
            rounds.sort_unstable();
            assert_eq!(rounds, [0, 1], "{t} {m}");
        }
    }
}

#[test]
fn a_short_ring_carries_large_messages() {
    // Two processes, messages that ferry's UDP cuts into many datagrams.
    let (_, v) = measure(
        ferry(),
        &[
            "--mode",
            "flood,roundtrip",
            "--hubs",
            "2",
            "--size",
            "70000",
            "--transport",
            "udp,shm",
            "--messages",
            "20",
            "--warmup",
            "2",
            "--rounds",
            "1",
            "--wait",
            "adaptive",
        ],
        2,
        "lab hubs --hubs 2 --size 70000",
    );
    assert_eq!(v["config"]["wait"], "adaptive");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for row in rows {
        check_row(row, 20, 2);
        assert_eq!(row["size_bytes"], 70000);
    }
}

#[test]
fn a_dead_hub_is_reported_not_waited_for() {
    for mode in ["roundtrip", "flood"] {
        let started = Instant::now();
        let out = lab_hubs(
            &[
                "--mode",
                mode,
                "--transport",
                "shm",
                "--messages",
                "2000",
                "--rounds",
                "1",
                "--fault-hub-exit-after",
                "150",
            ],
            Duration::from_secs(120),
        );
        assert!(!out.success(), "{mode}: a dead hub must fail the run");
        assert!(
            out.stderr.contains("hub 1") && out.stderr.contains("exited during the run"),
            "{mode}: {}",
            out.stderr
        );
        // Far below any timeout of the lab (30 s and more): it was noticed, not timed out.
        let seconds = started.elapsed().as_secs_f64();
        assert!(
            seconds < 25.0,
            "{mode}: took {seconds:.1} s\n{}",
            out.stderr
        );
    }
}

#[test]
fn bad_arguments_are_refused() {
    for (args, expect) in [
        (&["--hubs", "1"][..], "--hubs"),
        (&["--link-rate", "100mbit"][..], "--hosts 2"),
        (&["--hosts", "3"][..], "3"),
        (&["--size", "8"][..], "--size"),
        (&["--transport", "tcp"][..], "tcp"),
        (&["--mode", "ping"][..], "ping"),
        (&["--hosts", "2", "--link-rate", "100mbps"][..], "100mbps"),
        (&["--transport", "shm,shm"][..], "twice"),
        (&["--rounds", "0"][..], "--rounds"),
        (&["--remote", "127.0.0.1"][..], "--hosts 2"),
        (
            &["--hosts", "2", "--remote", "127.0.0.1", "--cpu", "0.5"][..],
            "--cpu",
        ),
        // Nothing listens on port 1: the agent cannot be reached, and the run says so.
        (
            &[
                "--hosts",
                "2",
                "--remote",
                "127.0.0.1:1",
                "--transport",
                "udp",
            ][..],
            "cannot reach the lab agent at 127.0.0.1:1",
        ),
    ] {
        let out = lab_hubs(args, Duration::from_secs(30));
        assert!(!out.success(), "{args:?} should fail");
        assert!(
            out.stderr.contains(expect),
            "{args:?}: expected {expect:?} in {}",
            out.stderr
        );
    }
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Runs a ring of 3 hubs on two hosts (`ferry lab hubs --hosts 2 --hubs 3`, both modes,
/// `messages` messages, one round) with `args` more, `ferry` run by `command`; its results.
fn two_host_ring(command: Command, args: &[&str], messages: &str, what: &str) -> Value {
    let mut all = vec![
        "--hosts",
        "2",
        "--hubs",
        "3",
        "--mode",
        "roundtrip,flood",
        "--messages",
        messages,
        "--warmup",
        "5",
        "--rounds",
        "1",
    ];
    all.extend(args);
    measure(command, &all, 3, what).1
}

/// A measured two-host row of 3 hubs (see `check_row`): the processes' hosts and the edges'
/// links and paths.
fn check_two_host_row(row: &Value, messages: u64) {
    check_row(row, messages, 3);
    assert_eq!(each(row, "processes", "host"), ["A", "B", "A"]);
    assert_eq!(
        each(row, "edges", "link"),
        ["across hosts", "across hosts", "same host"]
    );
    let want = if row["transport"] == "udp4" {
        ["udp", "udp", "udp"]
    } else {
        // auto: UDP across the hosts, shared memory within one.
        ["udp", "udp", "shm"]
    };
    assert_eq!(paths(row), want, "{row}");
}

#[test]
fn the_odd_hubs_run_through_a_lab_agent() {
    // The agent on loopback stands for another machine: the odd hubs are its processes.
    let agent = Agent::here(&["--listen", "127.0.0.1:0"]);
    let listen = agent.address.clone();
    let v = two_host_ring(
        ferry(),
        &["--remote", &listen, "--transport", "shm,udp"],
        "20",
        "lab hubs --hosts 2 --remote",
    );
    assert_eq!(v["config"]["remote"]["agent"], listen.as_str());
    assert!(v["config"]["two_hosts"].is_null());
    let rows = v["rows"].as_array().unwrap();
    let skipped: Vec<&Value> = rows.iter().filter(|r| r["transport"] == "shm").collect();
    assert_eq!(skipped.len(), 2, "one skipped shm row per mode");
    let measured: Vec<&Value> = rows.iter().filter(|r| r["transport"] == "udp4").collect();
    assert_eq!(measured.len(), 2);
    for row in measured {
        check_two_host_row(row, 20);
    }
    agent.check_logged("hubs peer for");
}

#[test]
#[ignore = "needs root"]
fn two_hosts_over_namespaces_with_a_link_rate() {
    let ip = common::root_ip_and_tc("--hosts 2 --link-rate");
    // Three processes: master and hub 2 on A, hub 1 on B — two edges cross, one stays.
    let v = two_host_ring(
        ferry(),
        &["--link-rate", "100mbit", "--transport", "shm,udp,auto"],
        "30",
        "lab hubs --hosts 2",
    );
    let two = &v["config"]["two_hosts"];
    assert_eq!(two["link_rate"], "100mbit");
    assert_eq!(two["tbf"]["commands"].as_array().unwrap().len(), 2);
    let subnet = two["subnet"].as_str().unwrap();
    assert!(
        subnet.starts_with("10.2") && subnet.ends_with("/24"),
        "{subnet}"
    );
    let rows = v["rows"].as_array().unwrap();
    let skipped: Vec<&Value> = rows.iter().filter(|r| r["transport"] == "shm").collect();
    assert_eq!(skipped.len(), 2, "one skipped shm row per mode");
    for r in &skipped {
        assert!(r["skipped"].as_str().unwrap().contains("two hosts"), "{r}");
    }
    let measured: Vec<&Value> = rows.iter().filter(|r| r["transport"] != "shm").collect();
    assert_eq!(measured.len(), 4);
    for row in measured {
        assert_eq!(row["hosts"], 2);
        assert_eq!(row["link_rate"], "100mbit");
        check_two_host_row(row, 30);
    }
    common::check_namespaces_gone(&ip, &two["namespaces"]);
}

#[test]
#[ignore = "needs root"]
fn two_hosts_through_a_lab_agent_across_namespaces() {
    // The lab in namespace A, the agent in namespace B: two hosts as far as ferry can tell.
    let (pair, agent) = Agent::across_namespaces("ferry-hubs-test-", "fht", 204);
    let (a, b) = (pair.addr[0].to_string(), pair.addr[1].to_string());
    let v = two_host_ring(
        pair.command(0, env!("CARGO_BIN_EXE_ferry")),
        &["--remote", &b, "--transport", "udp,auto"],
        "30",
        "lab hubs --hosts 2 --remote (across namespaces)",
    );
    let remote = &v["config"]["remote"];
    assert_eq!(remote["agent"], b.as_str());
    assert_eq!(remote["addresses"]["A"], a.as_str());
    assert_eq!(remote["addresses"]["B"], b.as_str());
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for row in rows {
        check_two_host_row(row, 30);
    }
    agent.check_logged("hubs peer for");
    drop(agent);
    common::remove_namespaces(pair);
}

#[test]
#[ignore = "needs root"]
fn a_cpu_quota_covers_every_hub() {
    let v1 = Path::new("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists();
    let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    assert!(
        is_root() && (v1 || v2),
        "needs root and a cgroup CPU controller (root {}, v1 {v1}, v2 {v2}); CI has both",
        is_root()
    );
    let json = tmp("quota.json");
    let out = lab_hubs(
        &[
            "--cpu",
            "0.5",
            "--mode",
            "roundtrip",
            "--transport",
            "shm",
            "--messages",
            "30",
            "--warmup",
            "5",
            "--rounds",
            "1",
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(240),
    );
    if !out.success() && out.stderr.contains("cannot create the cgroup") {
        eprintln!("skipped: the cgroup cannot be created here: {}", out.stderr);
        return;
    }
    out.check_success("lab hubs --cpu 0.5");
    let v = read_json(&json);
    check_contract(&v, 4);
    assert_eq!(v["config"]["cgroup"]["used"], true);
    assert_eq!(v["config"]["cpu"], 0.5);
    let row = &v["rows"][0];
    check_row(row, 30, 4);
    assert_eq!(row["cpu"], 0.5);
    assert!(row["throttled_periods"].is_u64(), "{row}");
    let dir = v["config"]["cgroup"]["dir"].as_str().unwrap();
    let parent = Path::new(dir).parent().unwrap();
    let prefix = Path::new(dir)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .replace("<run>", "");
    let left: Vec<String> = std::fs::read_dir(parent)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
}
