//! `ferry call` against `ferry serve` across two network namespaces ("two hosts" joined by a
//! veth pair), with a domain key: answered with the key, refused without it. Needs root; CI runs
//! it by name. Every wait is bounded.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ferry_lab::netns::{self, Pair, Spec};

const LONG: Duration = Duration::from_secs(60);

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ferry-svc-netns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A child killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `ferry ARGS` in namespace `side` with `env`, to completion within `LONG`.
fn ferry_in(
    pair: &Pair,
    side: usize,
    args: &[&str],
    env: &[(&str, String)],
) -> (bool, String, String) {
    let mut cmd = pair.command(side, env!("CARGO_BIN_EXE_ferry"));
    cmd.args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env_remove("FERRY_DOMAIN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawn ferry");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = rx
        .recv_timeout(LONG)
        .unwrap_or_else(|_| panic!("ferry {args:?} did not finish within {LONG:?}"))
        .expect("ferry's output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
#[ignore = "needs root"]
fn call_and_serve_across_two_namespaces_with_a_domain_key() {
    let missing = netns::missing(false);
    assert!(
        missing.is_empty(),
        "two namespaces need {missing:?}; CI runs this test as root with iproute2"
    );
    let pair = Pair::create(&Spec {
        prefix: "ferry-svc-test-",
        device: "fsv",
        net: 206,
        rate: None,
    })
    .expect("two network namespaces");
    let (a, b) = (pair.addr[0].to_string(), pair.addr[1].to_string());
    let (key, other) = (tmp("key"), tmp("other-key"));
    std::fs::write(&key, [0x5au8; 32]).unwrap();
    std::fs::write(&other, [0xa5u8; 32]).unwrap();
    let domain = format!("svcns{}", std::process::id());
    let key_env = |peer: &str, key: &std::path::Path| {
        vec![
            ("FERRY_PEERS", peer.to_owned()),
            ("FERRY_KEY_FILE", key.to_str().unwrap().to_owned()),
        ]
    };

    // The server in namespace B, over UDP, with the key.
    let mut server = pair.command(1, env!("CARGO_BIN_EXE_ferry"));
    server
        .args([
            "serve",
            "svc/echo",
            "--echo",
            "--transport",
            "udp",
            "--domain",
            &domain,
        ])
        .envs(key_env(&a, &key))
        .env_remove("FERRY_DOMAIN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut server = Killed(server.spawn().expect("spawn ferry serve"));
    let stderr = server.0.stderr.take().unwrap();
    let (tx, started) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let line = started.recv_timeout(LONG).expect("ferry serve starts");
    assert!(line.contains("serving"), "{line}");

    // The client in namespace A with the same key: five answers.
    let (ok, stdout, stderr) = ferry_in(
        &pair,
        0,
        &[
            "call",
            "svc/echo",
            "--data",
            "across",
            "--count",
            "5",
            "--wait-server",
            "30",
            "--timeout",
            "10",
            "--transport",
            "udp",
            "--domain",
            &domain,
        ],
        &key_env(&b, &key),
    );
    assert!(ok, "call with the key failed: {stderr}");
    assert_eq!(stdout.lines().count(), 5, "{stdout}");
    assert!(stdout.lines().all(|l| l.contains("\"across\"")), "{stdout}");
    assert!(stderr.contains("5 calls answered"), "{stderr}");

    // Another key: the server's announcements and frames are refused, so there is no server.
    let (ok, _, stderr) = ferry_in(
        &pair,
        0,
        &[
            "call",
            "svc/echo",
            "--data",
            "x",
            "--wait-server",
            "3",
            "--timeout",
            "3",
            "--transport",
            "udp",
            "--domain",
            &domain,
        ],
        &key_env(&b, &other),
    );
    assert!(!ok, "a call with another key was answered");
    assert!(
        stderr.contains("no server for service svc/echo"),
        "{stderr}"
    );

    drop(server);
    let ns = pair.ns.clone();
    let ip = netns::find_tool("ip").expect("ip");
    drop(pair);
    let list = netns::list(&ip).expect("ip netns list");
    for n in ns {
        assert!(!list.contains(&n), "{n} is still there: {list:?}");
    }
    let _ = ferry_in_cleanup(&domain);
}

/// A server on another host killed (SIGKILL) while a call waits for it: the call ends with
/// "went away" once the server's response stream has been silent for the client's lease
/// (`--lease 0.5`), not when discovery forgets the server. Prints how long that took.
#[test]
#[ignore = "needs root"]
fn a_call_to_a_server_killed_on_another_host_ends_within_the_lease() {
    let missing = netns::missing(false);
    assert!(
        missing.is_empty(),
        "two namespaces need {missing:?}; CI runs this test as root with iproute2"
    );
    let pair = Pair::create(&Spec {
        prefix: "ferry-svk-test-",
        device: "fsk",
        net: 214,
        rate: None,
    })
    .expect("two network namespaces");
    let (a, b) = (pair.addr[0].to_string(), pair.addr[1].to_string());
    let domain = format!("svkns{}", std::process::id());
    // A server that answers each request after a second.
    let mut server = pair.command(1, env!("CARGO_BIN_EXE_ferry"));
    server
        .args([
            "serve",
            "svc/slow",
            "--size",
            "8",
            "--delay",
            "1",
            "--transport",
            "udp",
            "--domain",
            &domain,
        ])
        .env("FERRY_PEERS", &a)
        .env_remove("FERRY_DOMAIN")
        .env_remove("FERRY_KEY_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut server = Killed(server.spawn().expect("spawn ferry serve"));
    let mut client = pair.command(0, env!("CARGO_BIN_EXE_ferry"));
    client
        .args([
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
            "--transport",
            "udp",
            "--domain",
            &domain,
        ])
        .env("FERRY_PEERS", &b)
        .env_remove("FERRY_DOMAIN")
        .env_remove("FERRY_KEY_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut client = Killed(client.spawn().expect("spawn ferry call"));
    // The first answer: the server's response stream to this client runs. The second request
    // is then waiting out the server's delay.
    let stdout = client.0.stdout.take().unwrap();
    let (tx, answers) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
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
        let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut err);
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
    drop(pair);
    let _ = ferry_in_cleanup(&domain);
}

/// Removes what the run left in /dev/shm (both namespaces share it).
fn ferry_in_cleanup(domain: &str) -> std::io::Result<std::process::Output> {
    std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["clean", "--domain", domain])
        .output()
}
