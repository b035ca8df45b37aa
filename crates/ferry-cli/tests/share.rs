//! `ferry lab share`: two ferry flows on one 100 Mbit/s veth link between two network namespaces
//! both get through (root, `ip` and `tc`; CI has them and runs it by name), and bad options are
//! refused naming the option before anything is made. The figures are checked for presence, never
//! for speed or fairness; every run is bounded and killed if it overruns.

use std::path::PathBuf;
use std::time::Duration;

mod common;
use common::lab;

use ferry_lab::netns::{self, find_tool};

#[test]
#[ignore = "needs root"]
fn two_ferry_flows_both_get_through_a_rate_limited_link() {
    assert!(
        rustix::process::geteuid().is_root(),
        "network namespaces need root; CI runs this test as root"
    );
    let (Some(ip), Some(_)) = (find_tool("ip"), find_tool("tc")) else {
        panic!("ferry lab share needs ip and tc (iproute2); CI installs them");
    };
    let json: PathBuf =
        std::env::temp_dir().join(format!("ferry-share-test-{}.json", std::process::id()));
    let out = lab(
        "share",
        &[
            "--competitor",
            "ferry",
            "--link-rate",
            "100mbit",
            "--seconds",
            "2",
            "--delay",
            "1",
            "--json",
            json.to_str().expect("a UTF-8 path"),
        ],
        Duration::from_secs(90),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ferry lab share failed ({})\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("100mbit, two ferry flows:"),
        "no verdict: {stdout}"
    );
    let text = std::fs::read_to_string(&json).expect("results JSON written");
    let _ = std::fs::remove_file(&json);
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(v["experiment"], "share");
    let links = v["config"]["links"].as_array().expect("links");
    assert_eq!(links.len(), 1);
    assert_eq!(links[0]["link_rate"], "100mbit");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["competitor"], "ferry");
    assert_eq!(row["link_rate"], "100mbit");
    assert_eq!(row["window_s"], 2.0);
    for flow in ["ferry_mbps", "other_mbps"] {
        assert!(
            row[flow].as_f64().expect("a goodput") > 0.0,
            "{flow}: {row}"
        );
    }
    assert!(row["share"].as_f64().is_some(), "{row}");
    let publishers = row["publishers"].as_array().expect("publishers");
    assert_eq!(publishers.len(), 2, "{row}");
    for (p, received) in publishers
        .iter()
        .zip(row["messages_received"].as_array().expect("received"))
    {
        assert!(p["retransmitted"].is_u64(), "counters read: {row}");
        let (sent, received) = (p["sent"].as_u64(), received.as_u64());
        assert!(received <= sent && sent > Some(0), "{row}");
    }
    let left = netns::list(&ip).expect("ip netns list");
    for side in ["A", "B"] {
        let ns = links[0]["namespaces"][side].as_str().expect("a namespace");
        assert!(
            !left.iter().any(|l| l == ns),
            "namespace {ns} was left behind"
        );
    }
}

#[test]
fn bad_options_are_refused_naming_the_option() {
    for (args, says) in [
        (&["--seconds", "0"][..], "--seconds must be from 1"),
        (
            &["--seconds", "2.5"][..],
            "--seconds 2.5 with --competitor tcp",
        ),
        (&["--delay=-1"][..], "--delay must be from 0"),
        (&["--rounds", "0"][..], "--rounds must be from 1"),
        (
            &["--competitor", "tcp,tcp"][..],
            "--competitor: tcp is listed twice",
        ),
        (&["--competitor", "udp"][..], "unknown competitor \"udp\""),
        (&["--link-rate", "fast"][..], "invalid link rate \"fast\""),
    ] {
        let out = lab("share", args, Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should be refused");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
