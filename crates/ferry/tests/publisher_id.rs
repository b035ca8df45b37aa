//! `Sample::publisher` names the publisher each message came from, over shared memory (read in
//! place and copied out) and over UDP, and `Subscriber::publisher_info` finds its node's name.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{domain, wait_until};
use ferry::{Delivery, Node, Publisher, PublisherId, Qos, Transport};

/// A publisher on topic `t` of a node of its own, `node`.
fn publisher_of_node(dom: &str, node: &str, qos: &Qos) -> Publisher {
    Node::with_domain(node, dom)
        .unwrap()
        .publisher("t", qos)
        .unwrap()
}

/// Two publishers of two nodes send on one topic; every sample is attributed to its sender.
fn two_publishers(transport: Transport, delivery: Delivery) {
    let dom = domain("pubid");
    let qos = Qos::default().transport(transport).delivery(delivery);
    let reader = Node::with_domain("reader", &dom).unwrap();
    let mut sub = reader.subscriber("t", &qos).unwrap();
    let mut alpha = publisher_of_node(&dom, "alpha", &qos);
    let mut beta = publisher_of_node(&dom, "beta", &qos);
    // A shared-memory subscriber attaches to rings as it looks for messages; a UDP publisher
    // knows its subscriber once the subscriber's first STATUS arrives.
    assert!(wait_until(Duration::from_secs(30), || {
        sub.publisher_count() == 2 && alpha.subscriber_count() == 1 && beta.subscriber_count() == 1
    }));
    // The first byte says who sent it; under latest delivery each is read before the next.
    let mut seen: BTreeMap<u8, PublisherId> = BTreeMap::new();
    for round in 0..6u8 {
        let (p, who) = if round % 2 == 0 {
            (&mut alpha, b'a')
        } else {
            (&mut beta, b'b')
        };
        p.send(&[who, round]).unwrap();
        let s = sub
            .recv_timeout(Duration::from_secs(30))
            .unwrap()
            .expect("a message");
        let id = s.publisher();
        assert_eq!(id.transport(), transport, "{transport:?} {delivery:?}");
        let first = *seen.entry(s[0]).or_insert(id);
        assert_eq!(
            first, id,
            "one publisher, one id ({transport:?} {delivery:?})"
        );
    }
    assert_ne!(seen[&b'a'], seen[&b'b']);
    // Each publisher knows the id its messages carry.
    assert_eq!(alpha.ids(), vec![seen[&b'a']], "{transport:?} {delivery:?}");
    assert_eq!(beta.ids(), vec![seen[&b'b']], "{transport:?} {delivery:?}");
    assert_eq!(
        sub.publisher_info(seen[&b'a']).node.as_deref(),
        Some("alpha")
    );
    assert_eq!(
        sub.publisher_info(seen[&b'b']).node.as_deref(),
        Some("beta")
    );
    if transport == Transport::Udp {
        assert!(sub.publisher_info(seen[&b'a']).address.is_some());
    }
    // An id of the other transport is unknown here.
    let shown = seen[&b'a'].to_string();
    assert!(shown.starts_with(if transport == Transport::Udp {
        "udp:"
    } else {
        "shm:"
    }));
}

#[test]
fn shared_memory_reliable_samples_name_their_publisher() {
    two_publishers(Transport::Shm, Delivery::Reliable);
}

#[test]
fn shared_memory_latest_samples_name_their_publisher() {
    two_publishers(Transport::Shm, Delivery::Latest);
}

#[test]
fn udp_samples_name_their_publisher() {
    two_publishers(Transport::Udp, Delivery::Reliable);
}

/// An `auto` publisher has one id per transport; a same-host subscriber sees the first.
#[test]
fn an_auto_publisher_has_an_id_per_transport() {
    let dom = domain("pubid-auto");
    let qos = Qos::default().transport(Transport::Auto);
    let mut sub = Node::with_domain("reader", &dom)
        .unwrap()
        .subscriber("t", &qos)
        .unwrap();
    let mut publ = publisher_of_node(&dom, "writer", &qos);
    let ids = publ.ids();
    assert_eq!(ids.len(), 2);
    assert_eq!(
        (ids[0].transport(), ids[1].transport()),
        (Transport::Shm, Transport::Udp)
    );
    assert!(wait_until(Duration::from_secs(30), || {
        sub.publisher_count() >= 1
    }));
    publ.send(b"x").unwrap();
    let s = sub
        .recv_timeout(Duration::from_secs(30))
        .unwrap()
        .expect("a message");
    assert_eq!(s.publisher(), ids[0], "same host: shared memory");
}
