//! Containers: a process with a /dev/shm of its own (a mount namespace with a fresh tmpfs, as a
//! container with a private IPC namespace on the host network has) and one of the host find
//! each other over UDP with one setting (`FERRY_PEERS=127.0.0.1` on both), whichever starts
//! first, and `auto` uses UDP between them. Needs root (`unshare --mount`); CI runs it by name.
//! Every wait is bounded.

use std::process::Command;
use std::time::Duration;

mod common;
use common::Bounded;

const LONG: Duration = Duration::from_secs(60);

/// Runs `cmd` in the background, as a user of this host would (no domain or key from the
/// environment, discovery over loopback).
fn start(mut cmd: Command) -> Bounded {
    cmd.env_remove("FERRY_DOMAIN")
        .env_remove("FERRY_KEY_FILE")
        .env("FERRY_PEERS", "127.0.0.1");
    common::start_bounded(cmd, LONG)
}

/// `ferry ARGS` in a mount namespace of its own whose /dev/shm is a fresh tmpfs.
fn in_private_shm(args: &[&str]) -> Command {
    let mut cmd = Command::new("unshare");
    let script = format!(
        "mount -t tmpfs -o size=64m tmpfs /dev/shm && exec {} \"$@\"",
        env!("CARGO_BIN_EXE_ferry")
    );
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        &script,
        "ferry",
    ])
    .args(args);
    cmd
}

fn on_host(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferry"));
    cmd.args(args);
    cmd
}

fn exchange(private_side_echoes: bool) {
    let d = format!(
        "ctr{}{}",
        std::process::id(),
        if private_side_echoes { "a" } else { "b" }
    );
    let echo_args = [
        "echo",
        "c",
        "--count",
        "5",
        "--timeout",
        "30",
        "--domain",
        &d,
    ];
    let pub_args = [
        "pub",
        "c",
        "--count",
        "5",
        "--rate",
        "20",
        "--wait-subscribers",
        "1",
        "--wait-timeout",
        "30",
        "--domain",
        &d,
    ];
    let (echo, publisher) = if private_side_echoes {
        (in_private_shm(&echo_args), on_host(&pub_args))
    } else {
        (on_host(&echo_args), in_private_shm(&pub_args))
    };
    let echo = start(echo);
    std::thread::sleep(Duration::from_millis(300));
    let p = start(publisher).ended("pub");
    assert!(p.success(), "pub: {}", p.stderr);
    let e = echo.ended("echo");
    assert!(e.success(), "echo: {}", e.stderr);
    let seqs = common::text_seqs(&e.stdout);
    assert_eq!(seqs, ["0", "1", "2", "3", "4"], "{}", e.stdout);
}

#[test]
#[ignore = "needs root"]
fn a_private_dev_shm_on_the_host_network_finds_the_host_over_udp() {
    assert!(
        Command::new("unshare").arg("--version").output().is_ok(),
        "unshare (util-linux) is needed; CI installs it"
    );
    exchange(true);
    exchange(false);
}

/// Two network namespaces sharing this /dev/shm (Docker's `--ipc=host` on bridge networks): a
/// `ferry pub` started after its `ferry echo`, without `--wait-subscribers`, delivers from its
/// first message. The shared directory shows it the subscriber of the other namespace, which it
/// cannot reach by the directory's loopback address; its first sends wait (bounded) until
/// discovery announced it (before, it sent 1024 messages to nobody and exited 0).
#[test]
#[ignore = "needs root"]
fn two_network_namespaces_sharing_dev_shm_deliver_from_the_first_message() {
    let hosts = common::Hosts::new(
        &ferry_lab::netns::Spec {
            prefix: "ferry-ctr-test-",
            device: "fct",
            net: 209,
            rate: None,
        },
        "ctrns",
    );
    let run = |side: usize, args: &[&str]| common::start_bounded(hosts.ferry(side, args), LONG);
    let echo = run(1, &["echo", "ctr", "--count", "1024", "--timeout", "20"]);
    // The subscriber is in the shared directory before the publisher starts.
    let listed = || {
        ferry::admin::topic(&hosts.domain, "ctr")
            .ok()
            .flatten()
            .is_some_and(|t| t.subscribers.iter().any(|s| s.alive))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !listed() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(listed(), "echo's subscriber is in the shared directory");
    let publisher = run(0, &["pub", "ctr", "--rate", "0", "--count", "1024"]);
    let p = publisher.ended("pub");
    assert!(p.success(), "pub: {}", p.stderr);
    let e = echo.ended("echo");
    assert!(e.success(), "echo: {}\n{}", e.stderr, e.stdout);
    assert_eq!(e.stdout.lines().count(), 1024, "{}", e.stderr);
    drop(hosts);
}
