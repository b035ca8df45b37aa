//! `ferry lab throughput --hosts 2 --link-rate`: ferry's reliable UDP and iperf3 over TCP across
//! a 100 Mbit/s veth link between two network namespaces. Needs root, `ip`, `tc` and `iperf3`
//! (CI has them and runs it by name). The run is bounded and killed if it overruns; its figures
//! are checked for presence and plausibility, never for speed.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferry_lab::netns::{self, find_tool};
use serde_json::Value;

/// Runs `ferry lab throughput ARGS --json FILE` (bounded: killed after 90 s) and returns the
/// results it wrote.
fn run_lab(args: &[&str]) -> Value {
    let json: PathBuf = std::env::temp_dir().join(format!(
        "ferry-throughput-link-test-{}-{}.json",
        std::process::id(),
        args.join("").len()
    ));
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .env_remove("FERRY_DOMAIN")
        .args(["lab", "throughput"])
        .args(args)
        .arg("--json")
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ferry");
    let stderr = child.stderr.take().expect("piped stderr");
    let said = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let said = said.join().unwrap_or_default();
    let status = status.unwrap_or_else(|| panic!("the run overran 90 s: {said}"));
    assert!(status.success(), "ferry lab throughput failed: {said}");
    let text = std::fs::read_to_string(&json).expect("results JSON written");
    let _ = std::fs::remove_file(&json);
    serde_json::from_str(&text).expect("valid JSON")
}

/// Root, ip and tc, and iperf3 when `iperf3`; the path of ip.
fn needs_root_and_tools(iperf3: bool) -> PathBuf {
    assert!(
        rustix::process::geteuid().is_root(),
        "network namespaces need root; CI runs this test as root"
    );
    let (Some(ip), Some(_)) = (find_tool("ip"), find_tool("tc")) else {
        panic!("--hosts 2 --link-rate needs ip and tc (iproute2); CI installs them");
    };
    assert!(
        !iperf3 || find_tool("iperf3").is_some(),
        "iperf3 over TCP is the baseline; CI installs it"
    );
    ip
}

#[test]
#[ignore = "needs root"]
fn udp4_and_tcp_across_a_rate_limited_link() {
    let ip = needs_root_and_tools(true);
    let v = run_lab(&[
        "--hosts",
        "2",
        "--link-rate",
        "100mbit",
        "--transport",
        "udp4,iperf3-tcp",
        "--sizes",
        "64K",
        "--duration",
        "1",
        "--rounds",
        "1",
    ]);

    let link = &v["config"]["link"];
    assert_eq!(link["hosts"], 2);
    assert_eq!(link["links"][0]["link_rate"], "100mbit");
    assert_eq!(
        link["links"][0]["tbf"]["commands"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let namespaces = [
        link["links"][0]["namespaces"]["A"]
            .as_str()
            .unwrap()
            .to_owned(),
        link["links"][0]["namespaces"]["B"]
            .as_str()
            .unwrap()
            .to_owned(),
    ];
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for transport in ["udp4", "iperf3-tcp"] {
        let row = rows
            .iter()
            .find(|r| r["transport"] == transport)
            .unwrap_or_else(|| panic!("no {transport} row in {rows:?}"));
        assert!(row["skipped"].is_null(), "{row}");
        assert_eq!(row["link_rate"], "100mbit");
        assert!(row["delivered_gbps"].as_f64().unwrap() > 0.0, "{row}");
        let (link_packets, min) = (
            row["link_packets"].as_u64().expect("link packets counted"),
            row["min_link_packets"].as_u64().expect("a minimum"),
        );
        assert!(min > 0 && link_packets >= min, "{row}");
        assert!(row["extra_link_packets_percent"].as_f64().unwrap() >= 0.0);
        assert!(row["link_drops"].is_u64(), "{row}");
        if transport == "udp4" {
            assert_eq!(row["delivery"], "reliable");
            assert_eq!(row["lost"], 0, "reliable delivery loses nothing: {row}");
            assert!(row["retransmitted"].is_u64(), "repairs read: {row}");
        }
        assert!(row["ratios"].is_object());
    }
    let udp = rows.iter().find(|r| r["transport"] == "udp4").unwrap();
    assert!(udp["ratios"]["iperf3-tcp"].as_f64().unwrap() > 0.0, "{udp}");

    let left = netns::list(&ip).expect("ip netns list");
    for ns in &namespaces {
        assert!(
            !left.contains(ns),
            "namespace {ns} was left behind: {left:?}"
        );
    }
}

#[test]
#[ignore = "needs root"]
fn periodic_messages_across_a_rate_limited_link_with_their_latency() {
    needs_root_and_tools(false);
    // 256 KiB every 100 ms: a fifth of the 100 Mbit/s link, as a camera sends.
    let v = run_lab(&[
        "--hosts",
        "2",
        "--link-rate",
        "100mbit",
        "--period",
        "100ms",
        "--sizes",
        "256K",
        "--duration",
        "1",
        "--rounds",
        "1",
    ]);
    assert_eq!(v["request"]["period"], 0.1);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "udp4 and tcp by default: {rows:?}");
    // 256 KiB on a 100 Mbit/s link: 20.97 ms at its rate, less what the tbf's burst lets
    // through at once.
    let wire = 256.0 * 1024.0 * 8.0 / 100e6 * 1e3;
    let burst = v["config"]["link"]["links"][0]["tbf"]["burst_bytes"]
        .as_f64()
        .expect("the tbf's burst");
    let least = (256.0 * 1024.0 - burst) * 8.0 / 100e6 * 1e3;
    for transport in ["udp4", "tcp"] {
        let row = rows
            .iter()
            .find(|r| r["transport"] == transport)
            .unwrap_or_else(|| panic!("no {transport} row in {rows:?}"));
        assert!(row["skipped"].is_null(), "{row}");
        assert_eq!(row["period_s"], 0.1, "{row}");
        assert_eq!(
            row["messages_sent"], 10,
            "one per period for a second: {row}"
        );
        assert_eq!(row["lost"], 0, "{row}");
        let serial = row["serialization_ms"].as_f64().expect("time on the link");
        assert!((serial - wire).abs() < 1e-6, "{row}");
        let (p50, p99, max) = (
            row["latency_p50_ms"].as_f64().expect("p50"),
            row["latency_p99_ms"].as_f64().expect("p99"),
            row["latency_max_ms"].as_f64().expect("max"),
        );
        // No message crosses the link faster than the link lets it (a clock or stamp error
        // would); how much slower is measured, not asserted.
        assert!(
            least <= p50 && p50 <= p99 && p99 <= max,
            "{transport}: p50 {p50} p99 {p99} max {max} against at least {least} ms on the link"
        );
        assert!(row["link_packets"].as_u64().unwrap() >= row["min_link_packets"].as_u64().unwrap());
    }
    let udp = rows.iter().find(|r| r["transport"] == "udp4").unwrap();
    assert!(udp["ratios"]["tcp"].as_f64().unwrap() > 0.0, "{udp}");
}
