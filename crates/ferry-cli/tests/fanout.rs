//! `ferry lab fanout` end to end: a tiny run writes results JSON with a row per round and
//! configuration whose counts add up (no subscriber received more than was sent), and prints its
//! table; bad options are refused naming the option. No timing is asserted; every run is bounded
//! and killed if it overruns.

use std::time::Duration;

mod common;
use common::{lab_refuses, lab_results};

#[test]
fn a_tiny_run_writes_rows_whose_counts_add_up() {
    let (out, v) = lab_results(
        "fanout",
        &["--seconds", "0.3", "--rounds", "1", "--rate", "500"],
        Duration::from_secs(120),
    );
    assert!(
        out.stdout.contains("the other subscribers get"),
        "no headline: {}",
        out.stdout
    );
    assert_eq!(v["request"]["rounds"], 1);
    assert_eq!(v["config"]["messages"], 150);
    let rows = v["rows"].as_array().expect("rows");
    let configurations: Vec<&str> = rows
        .iter()
        .map(|r| r["configuration"].as_str().expect("a configuration"))
        .collect();
    assert_eq!(configurations, ["alone", "with-slow"]);
    for r in rows {
        assert_eq!(r["round"], 1, "{r}");
        let sent = r["sent"].as_u64().expect("sent");
        assert_eq!(sent, 150, "{r}");
        let fast = r["fast_received"].as_array().expect("fast_received");
        assert_eq!(fast.len(), 2, "the default two fast subscribers: {r}");
        for n in fast {
            assert!(n.as_u64().expect("a count") <= sent, "{r}");
        }
        let slow = r["slow_received"].as_u64().expect("slow_received");
        assert!(slow <= sent, "{r}");
        if r["configuration"] == "alone" {
            assert_eq!(slow, 0, "no slow subscriber alone: {r}");
        }
        assert!(r["left_out"].is_u64(), "{r}");
        let fraction = r["fast_fraction"].as_f64().expect("fast_fraction");
        assert!((0.0..=1.0).contains(&fraction), "{r}");
    }
}

#[test]
fn bad_options_are_refused_naming_the_option() {
    for (args, says) in [
        (&["--size", "4"][..], "--size must be between 8 bytes"),
        (
            &["--subscribers", "0"][..],
            "--subscribers must be between 1 and 8",
        ),
        (
            &["--subscribers", "9"][..],
            "--subscribers must be between 1 and 8",
        ),
        (&["--rate", "0"][..], "--rate must be between 1 and"),
        (
            &["--slowdown", "0.5"][..],
            "--slowdown must be between 1 and",
        ),
        (&["--seconds", "0"][..], "--seconds must be between"),
        (&["--rounds", "0"][..], "--rounds must be between"),
        (&["--size", "8Q"][..], "invalid size"),
    ] {
        lab_refuses("fanout", args, says);
    }
}
