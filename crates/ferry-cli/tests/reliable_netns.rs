//! Reliable to the last message across a slow link: `ferry pub --count N` over UDP to a `ferry
//! echo` in another network namespace, through a 100 Mbit/s `tc tbf` link, with 1 MiB messages at
//! 8 Hz (two thirds of the link). pub exits 0 only once every message arrived (before, the last
//! one could still be on the link when pub reported success and exited). Needs root; CI runs it
//! by name. Every wait is bounded.

use std::sync::mpsc;
use std::time::Duration;

use ferry_lab::netns::{self, parse_link_rate, Pair, Spec};

mod common;

const LONG: Duration = Duration::from_secs(90);

/// Starts `ferry ARGS` in namespace `side`, discovery reaching `peer`; its output comes back on
/// the returned channel when it ends (killed after `LONG`).
fn start(
    pair: &Pair,
    side: usize,
    args: &[&str],
    peer: &str,
) -> mpsc::Receiver<std::io::Result<std::process::Output>> {
    let mut cmd = pair.command(side, env!("CARGO_BIN_EXE_ferry"));
    cmd.args(args)
        .env("FERRY_PEERS", peer)
        .env_remove("FERRY_DOMAIN")
        .env_remove("FERRY_KEY_FILE");
    common::start_bounded(cmd, LONG)
}

#[test]
#[ignore = "needs root"]
fn pub_exits_0_only_when_every_message_crossed_a_slow_link() {
    let missing = netns::missing(true);
    assert!(
        missing.is_empty(),
        "two namespaces and a link rate need {missing:?}; CI runs this test as root"
    );
    let pair = Pair::create(&Spec {
        prefix: "ferry-rel-test-",
        device: "frl",
        net: 207,
        rate: Some(parse_link_rate("100mbit").unwrap()),
    })
    .expect("two network namespaces joined by a 100 Mbit/s link");
    let (a, b) = (pair.addr[0].to_string(), pair.addr[1].to_string());
    let domain = format!("relns{}", std::process::id());
    let count = "24";
    let echo = start(
        &pair,
        1,
        &[
            "echo",
            "camera",
            "--transport",
            "udp",
            "--count",
            count,
            "--timeout",
            "60",
            "--max-size",
            "2M",
            "--domain",
            &domain,
        ],
        &a,
    );
    let publisher = start(
        &pair,
        0,
        &[
            "pub",
            "camera",
            "--transport",
            "udp",
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
            "--domain",
            &domain,
        ],
        &b,
    );
    let p = publisher
        .recv_timeout(LONG)
        .expect("pub ends")
        .expect("pub's output");
    let p_err = String::from_utf8_lossy(&p.stderr);
    assert!(p.status.success(), "pub failed: {p_err}");
    assert!(p_err.contains(&format!("sent {count} messages")), "{p_err}");
    // pub exited 0: everything it sent has arrived, so echo has all of it now.
    let e = echo
        .recv_timeout(LONG)
        .expect("echo ends")
        .expect("echo's output");
    let e_out = String::from_utf8_lossy(&e.stdout);
    assert!(
        e.status.success(),
        "echo: {}\n{e_out}",
        String::from_utf8_lossy(&e.stderr)
    );
    let seqs: Vec<&str> = e_out
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    let want: Vec<String> = (0..24).map(|i| i.to_string()).collect();
    assert_eq!(seqs, want, "{e_out}");
    drop(pair);
}

#[test]
#[ignore = "needs root"]
fn pub_larger_than_a_remote_subscriber_takes_fails_naming_it() {
    let missing = netns::missing(false);
    assert!(
        missing.is_empty(),
        "two namespaces need {missing:?}; CI runs this test as root"
    );
    let pair = Pair::create(&Spec {
        prefix: "ferry-lim-test-",
        device: "flm",
        net: 208,
        rate: None,
    })
    .expect("two network namespaces joined by a link");
    let (a, b) = (pair.addr[0].to_string(), pair.addr[1].to_string());
    let domain = format!("limns{}", std::process::id());
    // The subscriber takes at most 1 MiB (echo's default); the publisher sends 2 MiB.
    let echo = start(
        &pair,
        1,
        &[
            "echo",
            "camera",
            "--transport",
            "udp",
            "--count",
            "1",
            "--timeout",
            "20",
            "--domain",
            &domain,
        ],
        &a,
    );
    let publisher = start(
        &pair,
        0,
        &[
            "pub",
            "camera",
            "--transport",
            "udp",
            "--size",
            "2M",
            "--count",
            "3",
            "--wait-subscribers",
            "1",
            "--wait-timeout",
            "30",
            "--domain",
            &domain,
        ],
        &b,
    );
    let p = publisher
        .recv_timeout(LONG)
        .expect("pub ends")
        .expect("pub's output");
    let p_err = String::from_utf8_lossy(&p.stderr);
    assert!(!p.status.success(), "pub reported success: {p_err}");
    assert!(
        p_err.contains("exceeds the limit of 1048576 bytes")
            && p_err.contains(&format!("a subscriber at {}", pair.addr[1])),
        "the error names the remote subscriber and its limit: {p_err}"
    );
    // Nothing arrived: echo times out without a message.
    let e = echo
        .recv_timeout(LONG)
        .expect("echo ends")
        .expect("echo's output");
    assert!(
        e.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&e.stdout)
    );
    drop(pair);
}

#[test]
#[ignore = "needs root"]
fn echo_on_another_host_that_starts_late_gets_the_history_pub_kept() {
    let missing = netns::missing(false);
    assert!(
        missing.is_empty(),
        "two namespaces need {missing:?}; CI runs this test as root"
    );
    let pair = Pair::create(&Spec {
        prefix: "ferry-hist-test-",
        device: "fht",
        net: 213,
        rate: None,
    })
    .expect("two network namespaces joined by a link");
    let (a, b) = (pair.addr[0].to_string(), pair.addr[1].to_string());
    let domain = format!("histns{}", std::process::id());
    // A thousand messages to nobody, the last ten kept; then quiet, for a while.
    let publisher = start(
        &pair,
        0,
        &[
            "pub",
            "config",
            "--transport",
            "udp",
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
            "--domain",
            &domain,
        ],
        &b,
    );
    std::thread::sleep(Duration::from_secs(3));
    let echo = start(
        &pair,
        1,
        &[
            "echo",
            "config",
            "--transport",
            "udp",
            "--history",
            "10",
            "--count",
            "10",
            "--json",
            "--timeout",
            "15",
            "--domain",
            &domain,
        ],
        &a,
    );
    let e = echo
        .recv_timeout(LONG)
        .expect("echo ends")
        .expect("echo's output");
    let e_out = String::from_utf8_lossy(&e.stdout);
    assert!(
        e.status.success(),
        "echo: {}\n{e_out}",
        String::from_utf8_lossy(&e.stderr)
    );
    let seqs: Vec<u64> = e_out
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, (990..1000).collect::<Vec<u64>>(), "{e_out}");
    let p = publisher
        .recv_timeout(LONG)
        .expect("pub ends")
        .expect("pub's output");
    assert!(
        p.status.success(),
        "pub: {}",
        String::from_utf8_lossy(&p.stderr)
    );
    drop(pair);
}
