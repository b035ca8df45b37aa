//! The bridge on one host, with a Zenoh application beside it on loopback: the application sees
//! ferry's topics and publishes into them; nothing comes back where it came from; what Zenoh
//! sends that is not a ferry message is refused and counted.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use ferry::{Node, Qos};
use zenoh::Wait;

/// What a Zenoh subscriber heard: (key, payload) in order.
type Heard = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

fn listen(session: &zenoh::Session, key: &str) -> (Heard, zenoh::pubsub::Subscriber<()>) {
    let heard: Heard = Arc::default();
    let h = heard.clone();
    let sub = session
        .declare_subscriber(key.to_owned())
        // Not its own puts: what the bridge sends.
        .allowed_origin(zenoh::sample::Locality::Remote)
        .callback(move |s| {
            h.lock().unwrap().push((
                s.key_expr().to_string(),
                s.payload().to_bytes().into_owned(),
            ))
        })
        .wait()
        .unwrap();
    (heard, sub)
}

/// Starts the bridge of `dom`, listening on `endpoint`, with multicast scouting off and `more`
/// arguments.
fn bridge_on(dom: &str, endpoint: &str, more: &[&str]) -> BridgeProcess {
    let mut args = vec![
        "--domain",
        dom,
        "--listen",
        endpoint,
        "--no-multicast-scouting",
    ];
    args.extend_from_slice(more);
    BridgeProcess::start(&args)
}

#[test]
fn a_zenoh_application_sees_ferry_topics_and_publishes_into_them() {
    let dom = domain("loop");
    let endpoint = format!("tcp/127.0.0.1:{}", free_port());
    let bridge = bridge_on(&dom, &endpoint, &["--scan-interval", "0.1"]);
    // A plain Zenoh application: a client of the bridge's session.
    let app = zenoh_session("client", std::slice::from_ref(&endpoint), &[]);
    let (heard, _sub) = listen(&app, &format!("ferry/{dom}/**"));

    // ferry -> Zenoh: a publisher on this host; the application hears every byte.
    let node = Node::with_domain("sensor", &dom).unwrap();
    let mut publisher = node.publisher("robot/imu", &Qos::default()).unwrap();
    let key = format!("ferry/{dom}/robot/imu");
    let mut seq = 0u64;
    let reached = wait_until(Duration::from_secs(30), || {
        publisher
            .send(&payload(seq, 100 + seq as usize % 900))
            .unwrap();
        seq += 1;
        heard
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| *k == key)
            .count()
            >= 20
    });
    assert!(
        reached,
        "the Zenoh application heard ferry's topic within 30 s"
    );
    for (k, bytes) in heard.lock().unwrap().iter() {
        assert_eq!(k, &key);
        assert!(check(bytes).is_some(), "every byte as published");
    }
    // In order, once each.
    let seqs: Vec<u64> = heard
        .lock()
        .unwrap()
        .iter()
        .map(|(_, b)| check(b).unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");

    // Zenoh -> ferry: the application puts on a topic's key; a ferry subscriber reads it.
    let mut sub = Node::with_domain("controller", &dom)
        .unwrap()
        .subscriber("robot/cmd", &Qos::default())
        .unwrap();
    let cmd_key = format!("ferry/{dom}/robot/cmd");
    let mut got = Vec::new();
    let mut put = 0u64;
    let reached = wait_until(Duration::from_secs(30), || {
        app.put(cmd_key.clone(), payload(put, 64)).wait().unwrap();
        put += 1;
        while let Ok(Some(s)) = sub.try_recv() {
            got.push(check(&s).expect("every byte as put"));
        }
        got.len() >= 20
    });
    assert!(reached, "ferry heard the Zenoh application within 30 s");
    assert!(got.windows(2).all(|w| w[0] < w[1]), "{got:?}");

    // What came from Zenoh is not sent back to it.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !heard.lock().unwrap().iter().any(|(k, _)| *k == cmd_key),
        "the bridge sent robot/cmd back to Zenoh"
    );
    drop(publisher);
    drop(sub);
    let counts = bridge.stop();
    let out = &counts["to_zenoh"]["robot/imu"];
    assert!(out["messages"].as_u64().unwrap() >= 20, "{counts}");
    assert!(counts["to_zenoh"].get("robot/cmd").is_none(), "{counts}");
    let inbound = &counts["from_zenoh"]["robot/cmd"];
    assert_eq!(
        inbound["messages"].as_u64().unwrap(),
        put,
        "every put published into ferry: {counts}"
    );
}

#[test]
fn what_zenoh_sends_that_is_not_a_ferry_message_is_refused_and_counted() {
    let dom = domain("hostile");
    let endpoint = format!("tcp/127.0.0.1:{}", free_port());
    let bridge = bridge_on(
        &dom,
        &endpoint,
        &["--max-message-size", "1K", "--max-topics", "3"],
    );
    let app = zenoh_session("client", &[endpoint], &[]);
    let mut sub = Node::with_domain("reader", &dom)
        .unwrap()
        .subscriber("ok", &Qos::default())
        .unwrap();
    let ok_key = format!("ferry/{dom}/ok");
    // Until the route stands, a good message at a time.
    let mut put = 0u64;
    assert!(wait_until(Duration::from_secs(30), || {
        app.put(ok_key.clone(), payload(put, 16)).wait().unwrap();
        put += 1;
        matches!(sub.try_recv(), Ok(Some(_)))
    }));
    // A name ferry would not take, a message over the limit, a delete, and more topics than
    // the limit allows (ok is the first of 3).
    let bad_name = format!("ferry/{dom}/with space");
    let too_long = format!("ferry/{dom}/{}", "x".repeat(101));
    for _ in 0..5 {
        app.put(bad_name.clone(), vec![1u8; 8]).wait().unwrap();
        app.put(too_long.clone(), vec![1u8; 8]).wait().unwrap();
        app.put(ok_key.clone(), vec![0u8; 1025]).wait().unwrap();
        app.delete(ok_key.clone()).wait().unwrap();
    }
    for t in 0..5 {
        app.put(format!("ferry/{dom}/many/{t}"), payload(0, 8))
            .wait()
            .unwrap();
    }
    // The good topic still flows after all of it.
    let mut after = 0;
    assert!(wait_until(Duration::from_secs(30), || {
        app.put(ok_key.clone(), payload(put, 1024)).wait().unwrap();
        put += 1;
        while let Ok(Some(s)) = sub.try_recv() {
            if s.len() == 1024 {
                assert!(check(&s).is_some());
                after += 1;
            }
        }
        after >= 3
    }));
    drop(sub);
    let counts = bridge.stop();
    let refused = &counts["refused"];
    assert_eq!(refused["bad_key"], 10, "{counts}");
    assert_eq!(refused["delete"], 5, "{counts}");
    assert_eq!(refused["too_large"], 5, "{counts}");
    // Refused names leave no entry of their own.
    let topics = counts["from_zenoh"].as_object().unwrap();
    assert_eq!(topics.len(), 3, "ok, many/0, many/1 only: {counts}");
    // ok, many/0 and many/1 fill the 3 topics; many/2..4 are refused.
    assert_eq!(refused["over_topic_limit"], 3, "{counts}");
    assert_eq!(counts["from_zenoh"]["many/0"]["messages"], 1, "{counts}");
}

#[test]
fn topics_over_the_limit_are_left_out_and_counted_once() {
    let dom = domain("limit");
    let bridge = bridge_on(
        &dom,
        &format!("tcp/127.0.0.1:{}", free_port()),
        &["--max-topics", "1", "--scan-interval", "0.05"],
    );
    let node = Node::with_domain("sensor", &dom).unwrap();
    let _a = node.publisher("a", &Qos::default()).unwrap();
    let _b = node.publisher("b", &Qos::default()).unwrap();
    let _c = node.publisher("c", &Qos::default()).unwrap();
    // Some 20 scans see the two topics beyond the limit.
    std::thread::sleep(Duration::from_secs(1));
    let counts = bridge.stop();
    assert_eq!(counts["topics_not_bridged"], 2, "{counts}");
    assert_eq!(counts["to_zenoh"].as_object().unwrap().len(), 1, "{counts}");
}

/// A ferry publisher that sends a burst the moment it starts, before the bridge has seen its
/// topic: the bridge asks for the publisher's history, so the Zenoh application hears every
/// message of the burst, in order, once each (without it, the first ones were missed).
fn a_burst_at_start_reaches_zenoh_whole(transport: ferry::Transport, word: &str) {
    let dom = domain("burst");
    let endpoint = format!("tcp/127.0.0.1:{}", free_port());
    let bridge = bridge_on(
        &dom,
        &endpoint,
        &["--scan-interval", "0.1", "--transport", word],
    );
    let app = zenoh_session("client", std::slice::from_ref(&endpoint), &[]);
    let (heard, _sub) = listen(&app, &format!("ferry/{dom}/**"));
    // The bridge's Zenoh session answers before the publisher starts.
    std::thread::sleep(Duration::from_millis(500));
    let node = Node::with_domain("config", &dom).unwrap();
    let qos = Qos::default().transport(transport).history(64);
    let mut publisher = node.publisher("robot/config", &qos).unwrap();
    for seq in 0..50u64 {
        publisher.send(&payload(seq, 200)).unwrap();
    }
    let reached = wait_until(Duration::from_secs(30), || {
        heard.lock().unwrap().len() >= 50
    });
    let seqs: Vec<u64> = heard
        .lock()
        .unwrap()
        .iter()
        .map(|(_, b)| check(b).expect("every byte as published"))
        .collect();
    assert!(reached, "{word}: heard {seqs:?}");
    assert_eq!(seqs, (0..50).collect::<Vec<u64>>(), "{word}");
    drop(publisher);
    bridge.stop();
}

#[test]
fn a_burst_sent_before_the_bridge_saw_the_topic_reaches_zenoh_whole() {
    a_burst_at_start_reaches_zenoh_whole(ferry::Transport::Shm, "shm");
}

#[test]
fn over_udp_a_burst_sent_before_the_bridge_saw_the_topic_reaches_zenoh_whole() {
    a_burst_at_start_reaches_zenoh_whole(ferry::Transport::Udp, "udp");
}
