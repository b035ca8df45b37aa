//! Two sites that UDP cannot join, joined through Zenoh: network namespaces A and B, each with a
//! /dev/shm of its own (a directory bound over it in each process's mount namespace), so that
//! they share nothing but the links; each is linked by a veth pair to this test's namespace only,
//! where a Zenoh router runs in-process. A has no route to B. A bridge in each connects to the router; a ferry publisher
//! in A reaches a subscriber in B and B's answers reach A, every byte checked and in order; a
//! Zenoh client beside the router hears A's topic and publishes into one that a subscriber in A
//! reads. Needs root (CAP_NET_ADMIN) and `ip`; CI runs it by name.

mod common;

use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use ferry::{Delivery, Node, Qos, Transport};
use ferry_zenoh::sites::{ip, Links, Site, Sites};
use zenoh::Wait;

const ROLE: &str = "FERRY_ZENOH_TEST_ROLE";
/// Data messages the source sends once the path stands.
const MESSAGES: u64 = 300;
/// The first byte after the sequence number: a probe (until the sink answers) or data.
const PROBE: u64 = u64::MAX;

#[test]
#[ignore = "entry point of child processes started by the other tests"]
fn child_entry() {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let dom = var("FERRY_ZENOH_TEST_DOMAIN");
    match var(ROLE).as_str() {
        "source" => source(&dom),
        "sink" => sink(&dom),
        "zenoh-reader" => zenoh_reader(&dom),
        other => panic!("unknown role {other:?}"),
    }
}

fn qos() -> Qos {
    Qos::default()
        .transport(Transport::Shm)
        .delivery(Delivery::Reliable)
        .max_message_size(64 * 1024)
        .send_timeout(Duration::from_secs(30))
}

/// Site A: probes on site/data until site/ack answers, then sends the data messages.
fn source(dom: &str) {
    let node = Node::with_domain("source", dom).unwrap();
    let mut data = node.publisher("site/data", &qos()).unwrap();
    let mut ack = node.subscriber("site/ack", &qos()).unwrap();
    let end = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(Instant::now() < end, "no answer from site B within 90 s");
        data.send(&payload(PROBE, 16)).unwrap();
        if let Some(s) = ack.recv_timeout(Duration::from_millis(50)).unwrap() {
            assert!(check(&s).is_some(), "every byte of an answer");
            break;
        }
    }
    for seq in 0..MESSAGES {
        // Sizes from 8 B to 64 KiB.
        data.send(&payload(seq, 8 + (seq as usize * 7919) % (64 * 1024 - 8)))
            .unwrap();
    }
    println!("sent {MESSAGES}");
    // Stay until the sink has read everything (the bridge reads from this publisher's ring).
    std::thread::sleep(Duration::from_secs(2));
}

/// Site B: answers probes, then reads every data message in order.
fn sink(dom: &str) {
    let node = Node::with_domain("sink", dom).unwrap();
    let mut data = node.subscriber("site/data", &qos()).unwrap();
    let mut ack = node.publisher("site/ack", &qos()).unwrap();
    let mut next = 0u64;
    let end = Instant::now() + Duration::from_secs(120);
    while next < MESSAGES {
        assert!(
            Instant::now() < end,
            "only {next} of {MESSAGES} within 120 s"
        );
        // Answer at least every 50 ms while probes come (the first answers may be lost while
        // site A's bridge makes its publisher of site/ack).
        let Some(s) = data.recv_timeout(Duration::from_millis(50)).unwrap() else {
            continue;
        };
        let seq = check(&s).expect("every byte as sent");
        if seq == PROBE {
            drop(s);
            ack.send(&payload(1, 32)).unwrap();
            continue;
        }
        assert_eq!(seq, next, "in order, nothing lost, nothing twice");
        next += 1;
    }
    println!("received {next}");
}

/// Site A: reads what the Zenoh client puts on site/from-zenoh.
fn zenoh_reader(dom: &str) {
    let node = Node::with_domain("reader", dom).unwrap();
    let mut sub = node.subscriber("site/from-zenoh", &qos()).unwrap();
    let mut got = 0;
    let end = Instant::now() + Duration::from_secs(90);
    while got < 20 {
        assert!(Instant::now() < end, "{got} of 20 within 90 s");
        if let Some(s) = sub.recv_timeout(Duration::from_millis(50)).unwrap() {
            assert!(check(&s).is_some(), "every byte as put");
            got += 1;
        }
    }
    println!("read {got}");
}

fn spawn(site: &Site, role: &str, dom: &str) -> Child {
    Sites::command(site, std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_entry",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .env("FERRY_ZENOH_TEST_DOMAIN", dom)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start a child in a site")
}

/// Waits up to `limit` for a child; kills it past that. Returns success and its output.
fn finish(mut child: Child, limit: Duration) -> (bool, String) {
    let end = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut out = String::new();
            std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
            return (status.success(), out);
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return (false, "killed: ran past its time".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[ignore = "needs root"]
fn two_sites_without_a_udp_path_talk_through_a_zenoh_router() {
    assert_eq!(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() },
        0,
        "network namespaces need root: run this test as root (CI does)"
    );
    let sites = Sites::create(Links::ThroughHere, 203, std::process::id() % 10_000)
        .unwrap_or_else(|e| panic!("cannot create network namespaces: {e}"));
    // No path from A to B at all, so none for ferry's UDP.
    assert!(
        ip(&["-n", &sites.a.ns, "route", "get", &sites.b.addr]).is_err(),
        "site A must not reach site B"
    );
    let port = free_port();
    let at = |addr: &str| format!("tcp/{addr}:{port}");
    let _router = zenoh_session(
        "router",
        &[],
        &[at(&sites.a.other_end), at(&sites.b.other_end)],
    );
    let dom = domain("sites");
    let bridge = |site: &Site| {
        BridgeProcess::start_with(
            Sites::command(site, EXE),
            &[
                "--domain",
                &dom,
                "--connect",
                &at(&site.other_end),
                "--no-multicast-scouting",
                "--delivery",
                "reliable",
                "--scan-interval",
                "0.1",
            ],
        )
    };
    let bridge_a = bridge(&sites.a);
    let bridge_b = bridge(&sites.b);

    // A plain Zenoh client of the router: hears site A's topic, publishes into one.
    let client = zenoh_session("client", &[at(&sites.a.other_end)], &[]);
    let heard: Arc<Mutex<Vec<u64>>> = Arc::default();
    let _sub = {
        let heard = heard.clone();
        client
            .declare_subscriber(format!("ferry/{dom}/site/data"))
            .callback(move |s| {
                let bytes = s.payload().to_bytes();
                heard
                    .lock()
                    .unwrap()
                    .push(check(&bytes).expect("every byte as published"));
            })
            .wait()
            .unwrap()
    };

    let sink = spawn(&sites.b, "sink", &dom);
    let source = spawn(&sites.a, "source", &dom);
    let reader = spawn(&sites.a, "zenoh-reader", &dom);
    let from_zenoh = format!("ferry/{dom}/site/from-zenoh");
    // Puts until site A's reader has read 20 (the first ones may come before the bridges'
    // routes stand).
    let mut reader = reader;
    let end = Instant::now() + Duration::from_secs(90);
    let mut put = 0u64;
    while reader.try_wait().unwrap().is_none() && Instant::now() < end {
        client
            .put(from_zenoh.clone(), payload(put, 256))
            .wait()
            .unwrap();
        put += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    let (reader_ok, reader_out) = finish(reader, Duration::from_secs(30));
    let (source_ok, source_out) = finish(source, Duration::from_secs(120));
    let (sink_ok, sink_out) = finish(sink, Duration::from_secs(120));
    assert!(
        reader_ok,
        "site A reads what the Zenoh client puts: {reader_out}"
    );
    assert!(source_ok, "site A's source: {source_out}");
    assert!(
        sink_ok && sink_out.contains(&format!("received {MESSAGES}")),
        "site B's sink: {sink_out}"
    );
    // The client heard site A's data too, in order.
    let data: Vec<u64> = heard
        .lock()
        .unwrap()
        .iter()
        .copied()
        .filter(|&s| s != PROBE)
        .collect();
    assert_eq!(
        data,
        (0..MESSAGES).collect::<Vec<_>>(),
        "the Zenoh client heard site/data"
    );

    let a = bridge_a.stop();
    let b = bridge_b.stop();
    // Each message crossed once, and nothing came back where it came from.
    assert!(a["from_zenoh"].get("site/data").is_none(), "{a}");
    assert!(b["to_zenoh"].get("site/data").is_none(), "{b}");
    assert!(
        b["from_zenoh"]["site/data"]["messages"].as_u64().unwrap() >= MESSAGES,
        "{b}"
    );
    assert_eq!(b["from_zenoh"]["site/data"]["lost"], 0, "{b}");
    assert!(a["to_zenoh"].get("site/ack").is_none(), "{a}");
    assert!(
        a["from_zenoh"]["site/ack"]["messages"].as_u64().unwrap() >= 1,
        "{a}"
    );
    drop(sites);
}
