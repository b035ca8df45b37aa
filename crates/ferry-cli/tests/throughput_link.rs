//! `ferry lab throughput --hosts 2 --link-rate`: ferry's reliable UDP and iperf3 over TCP across
//! a 100 Mbit/s veth link between two network namespaces. Needs root, `ip`, `tc` and `iperf3`
//! (CI has them and runs it by name). The run is bounded and killed if it overruns; its figures
//! are checked for presence and plausibility, never for speed.

use std::path::PathBuf;
use std::time::Duration;

use ferry_lab::netns::find_tool;
use serde_json::Value;

mod common;
use common::{check_namespaces_gone, root_ip_and_tc, row_of};

/// Runs `ferry lab throughput ARGS --json FILE` (bounded: killed after 90 s) and returns the
/// results it wrote.
fn run_lab(args: &[&str]) -> Value {
    common::lab_results("throughput", args, Duration::from_secs(90)).1
}

/// Root, ip and tc, and iperf3 when `iperf3`; the path of ip.
fn needs_root_and_tools(iperf3: bool) -> PathBuf {
    let ip = root_ip_and_tc("--hosts 2 --link-rate");
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
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for transport in ["udp4", "iperf3-tcp"] {
        let row = row_of(rows, transport);
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
    let udp = row_of(rows, "udp4");
    assert!(udp["ratios"]["iperf3-tcp"].as_f64().unwrap() > 0.0, "{udp}");

    check_namespaces_gone(&ip, &link["links"][0]["namespaces"]);
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
        let row = row_of(rows, transport);
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
    let udp = row_of(rows, "udp4");
    assert!(udp["ratios"]["tcp"].as_f64().unwrap() > 0.0, "{udp}");
}
