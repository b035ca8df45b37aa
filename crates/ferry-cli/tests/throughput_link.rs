//! `ferry lab throughput --hosts 2 --link-rate`: ferry's reliable UDP and iperf3 over TCP across
//! a 100 Mbit/s veth link between two network namespaces. Needs root, `ip`, `tc` and `iperf3`
//! (CI has them and runs it by name). The run is bounded and killed if it overruns; its figures
//! are checked for presence and plausibility, never for speed.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferry_lab::netns::{self, find_tool};
use serde_json::Value;

#[test]
#[ignore = "needs root"]
fn udp4_and_tcp_across_a_rate_limited_link() {
    assert!(
        rustix::process::geteuid().is_root(),
        "network namespaces need root; CI runs this test as root"
    );
    let (Some(ip), Some(_), Some(_)) = (find_tool("ip"), find_tool("tc"), find_tool("iperf3"))
    else {
        panic!("--hosts 2 --link-rate needs ip, tc (iproute2) and iperf3; CI installs them");
    };
    let json: PathBuf = std::env::temp_dir().join(format!(
        "ferry-throughput-link-test-{}.json",
        std::process::id()
    ));
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .env_remove("FERRY_DOMAIN")
        .args([
            "lab",
            "throughput",
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
            "--json",
        ])
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ferry");
    let stderr = child.stderr.take().expect("piped stderr");
    let said = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let deadline = Instant::now() + Duration::from_secs(60);
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
    let status = status.unwrap_or_else(|| panic!("the run overran 60 s: {said}"));
    assert!(status.success(), "ferry lab throughput failed: {said}");
    let text = std::fs::read_to_string(&json).expect("results JSON written");
    let _ = std::fs::remove_file(&json);
    let v: Value = serde_json::from_str(&text).expect("valid JSON");

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
