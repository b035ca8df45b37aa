//! Reliable to the last message across a slow link: `ferry pub --count N` over UDP to a `ferry
//! echo` in another network namespace, through a 100 Mbit/s `tc tbf` link, with 1 MiB messages at
//! 8 Hz (two thirds of the link). pub exits 0 only once every message arrived (before, the last
//! one could still be on the link when pub reported success and exited). Needs root; CI runs it
//! by name. Every wait is bounded.

use std::time::Duration;

use ferry_lab::netns::{parse_link_rate, Spec};

mod common;
use common::{Bounded, Hosts};

const LONG: Duration = Duration::from_secs(90);

/// Starts `ferry ARGS` over UDP in namespace `side` of `hosts` (killed after `LONG`).
fn start(hosts: &Hosts, side: usize, args: &[&str]) -> Bounded {
    common::start_bounded(hosts.ferry(side, args), LONG)
}

#[test]
#[ignore = "needs root"]
fn pub_exits_0_only_when_every_message_crossed_a_slow_link() {
    let hosts = Hosts::new(
        &Spec {
            prefix: "ferry-rel-test-",
            device: "frl",
            net: 207,
            rate: Some(parse_link_rate("100mbit").unwrap()),
        },
        "relns",
    );
    let count = "24";
    let echo = start(
        &hosts,
        1,
        &[
            "echo",
            "camera",
            "--count",
            count,
            "--timeout",
            "60",
            "--max-size",
            "2M",
        ],
    );
    let publisher = start(
        &hosts,
        0,
        &[
            "pub",
            "camera",
            "--size",
            "1M",
            "--rate",
            "8",
            "--count",
            count,
            "--wait-subscribers",
            "1",
            "--wait-timeout",
            "30",
        ],
    );
    let p = publisher.ended("pub");
    assert!(p.success(), "pub failed: {}", p.stderr);
    assert!(
        p.stderr.contains(&format!("sent {count} messages")),
        "{}",
        p.stderr
    );
    // pub exited 0: everything it sent has arrived, so echo has all of it now.
    let e = echo.ended("echo");
    assert!(e.success(), "echo: {}\n{}", e.stderr, e.stdout);
    let seqs = common::text_seqs(&e.stdout);
    let want: Vec<String> = (0..24).map(|i| i.to_string()).collect();
    assert_eq!(seqs, want, "{}", e.stdout);
    drop(hosts);
}

#[test]
#[ignore = "needs root"]
fn pub_larger_than_a_remote_subscriber_takes_fails_naming_it() {
    let hosts = Hosts::new(
        &Spec {
            prefix: "ferry-lim-test-",
            device: "flm",
            net: 208,
            rate: None,
        },
        "limns",
    );
    // The subscriber takes at most 1 MiB (echo's default); the publisher sends 2 MiB.
    let echo = start(
        &hosts,
        1,
        &["echo", "camera", "--count", "1", "--timeout", "20"],
    );
    let publisher = start(
        &hosts,
        0,
        &[
            "pub",
            "camera",
            "--size",
            "2M",
            "--count",
            "3",
            "--wait-subscribers",
            "1",
            "--wait-timeout",
            "30",
        ],
    );
    let p = publisher.ended("pub");
    assert!(!p.success(), "pub reported success: {}", p.stderr);
    assert!(
        p.stderr.contains("larger than a reliable subscriber takes")
            && p.stderr.contains(": at most 1 MiB;")
            && p.stderr
                .contains(&format!("a subscriber at {}", hosts.pair.addr[1])),
        "the error names the remote subscriber and its limit: {}",
        p.stderr
    );
    // Nothing arrived: echo times out without a message.
    let e = echo.ended("echo");
    assert!(e.stdout.is_empty(), "{}", e.stdout);
    drop(hosts);
}

#[test]
#[ignore = "needs root"]
fn echo_on_another_host_that_starts_late_gets_the_history_pub_kept() {
    let hosts = Hosts::new(
        &Spec {
            prefix: "ferry-hist-test-",
            device: "fht",
            net: 213,
            rate: None,
        },
        "histns",
    );
    // A thousand messages to nobody, the last ten kept; then quiet, for a while.
    let publisher = start(
        &hosts,
        0,
        &[
            "pub",
            "config",
            "--size",
            "64",
            "--rate",
            "0",
            "--count",
            "1000",
            "--history",
            "10",
            "--keep-alive",
            "20",
        ],
    );
    std::thread::sleep(Duration::from_secs(3));
    let echo = start(
        &hosts,
        1,
        &[
            "echo",
            "config",
            "--history",
            "10",
            "--count",
            "10",
            "--json",
            "--timeout",
            "15",
        ],
    );
    let e = echo.ended("echo");
    assert!(e.success(), "echo: {}\n{}", e.stderr, e.stdout);
    let seqs = common::json_seqs(&e.stdout);
    assert_eq!(seqs, (990..1000).collect::<Vec<u64>>(), "{}", e.stdout);
    let p = publisher.ended("pub");
    assert!(p.success(), "pub: {}", p.stderr);
    drop(hosts);
}
