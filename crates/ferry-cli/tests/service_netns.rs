//! `ferry call` against `ferry serve` across two network namespaces ("two hosts" joined by a
//! veth pair), with a domain key: answered with the key, refused without it. Needs root; CI runs
//! it by name. Every wait is bounded.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ferry_lab::netns::Spec;

mod common;
use common::{remove_namespaces, tmp_path as tmp, Hosts};

const LONG: Duration = Duration::from_secs(60);

/// A child killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The lines of `stream`, as they come.
fn lines(stream: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    lines
}

#[test]
#[ignore = "needs root"]
fn call_and_serve_across_two_namespaces_with_a_domain_key() {
    let hosts = Hosts::new(
        &Spec {
            prefix: "ferry-svc-test-",
            device: "fsv",
            net: 206,
            rate: None,
        },
        "svcns",
    );
    let (key, other) = (tmp("key"), tmp("other-key"));
    std::fs::write(&key, [0x5au8; 32]).unwrap();
    std::fs::write(&other, [0xa5u8; 32]).unwrap();
    // `ferry ARGS` in namespace `side` with the domain key in `key`.
    let with_key = |side: usize, args: &[&str], key: &Path| {
        let mut cmd = hosts.ferry(side, args);
        cmd.env("FERRY_KEY_FILE", key);
        cmd
    };
    // `ferry call svc/echo --data DATA ARGS` in namespace A with the key in `key`.
    let call_svc = |data: &str, args: &[&str], key: &Path| {
        let args = [&["call", "svc/echo", "--data", data], args].concat();
        common::start_bounded(with_key(0, &args, key), LONG).ended(&format!("ferry {args:?}"))
    };

    // The server in namespace B, over UDP, with the key.
    let mut server = with_key(1, &["serve", "svc/echo", "--echo"], &key);
    server.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut server = Killed(server.spawn().expect("spawn ferry serve"));
    let started = lines(server.0.stderr.take().unwrap());
    let line = started.recv_timeout(LONG).expect("ferry serve starts");
    assert!(line.contains("serving"), "{line}");

    // The client in namespace A with the same key: five answers.
    let call = call_svc(
        "across",
        &["--count", "5", "--wait-server", "30", "--timeout", "10"],
        &key,
    );
    let (stdout, stderr) = (&call.stdout, &call.stderr);
    assert!(call.success(), "call with the key failed: {stderr}");
    assert_eq!(stdout.lines().count(), 5, "{stdout}");
    assert!(stdout.lines().all(|l| l.contains("\"across\"")), "{stdout}");
    assert!(stderr.contains("5 calls answered"), "{stderr}");

    // Another key: the server's announcements and frames are refused, so there is no server.
    let call = call_svc("x", &["--wait-server", "3", "--timeout", "3"], &other);
    assert!(!call.success(), "a call with another key was answered");
    assert!(
        call.stderr.contains("no server for service svc/echo"),
        "{}",
        call.stderr
    );

    drop(server);
    remove_namespaces(hosts.pair);
    let _ = ferry_in_cleanup(&hosts.domain);
}

/// A server on another host killed (SIGKILL) while a call waits for it: the call ends with
/// "went away" once the server's response stream has been silent for the client's lease
/// (`--lease 0.5`), not when discovery forgets the server. Prints how long that took.
#[test]
#[ignore = "needs root"]
fn a_call_to_a_server_killed_on_another_host_ends_within_the_lease() {
    let hosts = Hosts::new(
        &Spec {
            prefix: "ferry-svk-test-",
            device: "fsk",
            net: 214,
            rate: None,
        },
        "svkns",
    );
    // A server that answers each request after a second.
    let mut server = hosts.ferry(1, &["serve", "svc/slow", "--size", "8", "--delay", "1"]);
    server.stdout(Stdio::null()).stderr(Stdio::null());
    let mut server = Killed(server.spawn().expect("spawn ferry serve"));
    let mut client = hosts.ferry(
        0,
        &[
            "call",
            "svc/slow",
            "--count",
            "3",
            "--wait-server",
            "30",
            "--timeout",
            "30",
            "--lease",
            "0.5",
        ],
    );
    client.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut client = Killed(client.spawn().expect("spawn ferry call"));
    // The first answer: the server's response stream to this client runs. The second request
    // is then waiting out the server's delay.
    let answers = lines(client.0.stdout.take().unwrap());
    answers
        .recv_timeout(LONG)
        .expect("the first call is answered");
    std::thread::sleep(Duration::from_millis(200));
    server.0.kill().expect("kill -9 the server");
    let killed = std::time::Instant::now();
    let stderr = client.0.stderr.take().unwrap();
    let (tx, exited) = mpsc::channel();
    let mut child = std::mem::replace(
        &mut client.0,
        std::process::Command::new("true").spawn().unwrap(),
    );
    std::thread::spawn(move || {
        let status = child.wait();
        let mut err = String::new();
        let _ = BufReader::new(stderr).read_to_string(&mut err);
        let _ = tx.send((status, err));
    });
    let (status, err) = exited
        .recv_timeout(LONG)
        .expect("the call ends after its server was killed");
    let took = killed.elapsed();
    assert!(!status.unwrap().success(), "{err}");
    assert!(err.contains("went away"), "{err}");
    println!(
        "a call ended {:.0} ms after its server on another host was killed (lease 500 ms)",
        took.as_secs_f64() * 1e3
    );
    drop(server);
    drop(hosts.pair);
    let _ = ferry_in_cleanup(&hosts.domain);
}

/// Removes what the run left in /dev/shm (both namespaces share it).
fn ferry_in_cleanup(domain: &str) -> std::io::Result<std::process::Output> {
    std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["clean", "--domain", domain])
        .output()
}
