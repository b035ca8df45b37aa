//! `ferry lab share`: two ferry flows on one 100 Mbit/s veth link between two network namespaces
//! both get through (root, `ip` and `tc`; CI has them and runs it by name), and bad options are
//! refused naming the option before anything is made. The figures are checked for presence, never
//! for speed or fairness; every run is bounded and killed if it overruns.

use std::time::Duration;

mod common;
use common::{check_namespaces_gone, lab_refuses, lab_results, root_ip_and_tc};

#[test]
#[ignore = "needs root"]
fn two_ferry_flows_both_get_through_a_rate_limited_link() {
    let ip = root_ip_and_tc("ferry lab share");
    let (out, v) = lab_results(
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
        ],
        Duration::from_secs(90),
    );
    assert!(
        out.stdout.contains("100mbit, two ferry flows:"),
        "no verdict: {}",
        out.stdout
    );
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
    // Both flows over time, from the first one's start: the second starts about a second
    // later; every bin's goodput is a number of messages of 64 KiB over a quarter second.
    let timeline = row["timeline"].as_array().expect("timeline");
    assert_eq!(timeline.len(), 2, "{row}");
    let bin_mbps = 65536.0 * 8.0 / 0.25 / 1e6;
    for (flow, name) in timeline.iter().zip(["ferry", "second ferry flow"]) {
        assert_eq!(flow["flow"], name);
        let at: Vec<f64> = flow["at_s"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect();
        let mbps = flow["mbps"].as_array().unwrap();
        assert_eq!(at.len(), mbps.len(), "{flow}");
        assert!(
            !at.is_empty() && at.windows(2).all(|w| w[1] > w[0]),
            "{flow}"
        );
        for m in mbps {
            let messages = m.as_f64().unwrap() / bin_mbps;
            assert!((messages - messages.round()).abs() < 1e-6, "{m} in {flow}");
        }
        let total: f64 = mbps.iter().map(|m| m.as_f64().unwrap() / bin_mbps).sum();
        assert!(total > 0.0, "{flow}");
    }
    // Bins are quarter seconds of the clock: the first message's began at most a quarter second
    // before it, so the middle of the first flow's first bin is at least an eighth before its start.
    let first = |i: usize| timeline[i]["at_s"][0].as_f64().unwrap();
    assert!(first(0) > -0.125 && first(0) < 1.0, "{timeline:?}");
    assert!(first(1) > 0.5 && first(1) < 2.5, "{timeline:?}");
    check_namespaces_gone(&ip, &links[0]["namespaces"]);
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
        lab_refuses("share", args, says);
    }
}
