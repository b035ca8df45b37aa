//! Looking at a topic's newest messages without subscribing (`admin::last_messages`, what
//! `ferry monitor` shows on a topic's page): the look sees each shared-memory publisher's
//! newest message, and the publishers and subscribers see nothing of it.

use std::time::Duration;

use ferry::admin::{self, last_messages};
use ferry::{Delivery, Node, Publisher, Qos, Transport};

mod common;
use common::*;

const WAIT: Duration = Duration::from_secs(10);
const MAX_RING: u64 = 1 << 30;

fn qos(t: Transport, d: Delivery) -> Qos {
    blocking_qos(t, 4096).delivery(d)
}

#[test]
fn the_look_finds_each_publishers_newest_message_and_changes_nothing() {
    for d in [Delivery::Reliable, Delivery::Latest] {
        let dom = domain(&format!("look-{d}"));
        let node = Node::with_domain("look", &dom).unwrap();
        let mut a = node.publisher("frames", &qos(Transport::Shm, d)).unwrap();
        let mut b = node.publisher("frames", &qos(Transport::Auto, d)).unwrap();
        let mut sub = node.subscriber("frames", &qos(Transport::Shm, d)).unwrap();
        assert!(wait_until(WAIT, || sub.publisher_count() == 2));
        // Nothing sent yet: nothing to show.
        assert!(last_messages(&dom, "frames", 64, MAX_RING)
            .unwrap()
            .is_empty());
        // Each message read as it is sent: a reliable ring holds a few of them only.
        let take = |sub: &mut ferry::Subscriber| {
            drop(
                sub.recv_timeout(WAIT)
                    .unwrap()
                    .expect("every message arrives"),
            );
        };
        for i in 0..100u32 {
            let body: Vec<u8> = (0..(i as usize * 37) % 3000 + 1)
                .map(|k| (k as u32 + i) as u8)
                .collect();
            a.send(&body).unwrap();
            take(&mut sub);
            if i % 10 == 0 {
                b.send(format!("b says {i}").as_bytes()).unwrap();
                take(&mut sub);
            }
        }
        let before = admin::topic(&dom, "frames").unwrap().unwrap();
        let mut looks = last_messages(&dom, "frames", 64, MAX_RING).unwrap();
        looks.sort_by_key(|l| l.as_ref().map(|l| l.len).unwrap_or(0));
        let looks: Vec<_> = looks.into_iter().map(|l| l.unwrap()).collect();
        assert_eq!(looks.len(), 2, "{looks:?}");
        // b's newest: all of it (shorter than the limit).
        assert_eq!(
            (looks[0].seq, looks[0].bytes.as_slice()),
            (9, &b"b says 90"[..])
        );
        assert_eq!(looks[0].len, 9);
        // a's newest, message 99: its first 64 bytes, and its whole length.
        let n = 99 * 37 % 3000 + 1;
        assert_eq!((looks[1].seq, looks[1].len), (99, n as u64));
        let first: Vec<u8> = (0..64).map(|k| (k + 99) as u8).collect();
        assert_eq!(looks[1].bytes, first);
        assert_eq!(looks[1].node, "look");
        // The look joined no ring, counted nothing, woke no one: the directory reads as before,
        // and the messages that follow reach the subscriber in order.
        let after = admin::topic(&dom, "frames").unwrap().unwrap();
        assert_eq!(before.subscribers.len(), after.subscribers.len());
        assert_eq!(
            before.subscribers[0].received,
            after.subscribers[0].received
        );
        assert_eq!(before.subscribers[0].waits, after.subscribers[0].waits);
        a.send(b"next").unwrap();
        let s = sub.recv_timeout(WAIT).unwrap().expect("the next message");
        assert_eq!(&*s, b"next");
    }
}

/// A publisher of `topic` (`t`, `d`) that sent `msg`, in a fresh domain made from `tag`.
fn one_sent(tag: &str, topic: &str, t: Transport, d: Delivery, msg: &[u8]) -> (String, Publisher) {
    let dom = domain(tag);
    let node = Node::with_domain("look", &dom).unwrap();
    let mut p = node.publisher(topic, &qos(t, d)).unwrap();
    p.send(msg).unwrap();
    (dom, p)
}

#[test]
fn a_udp_only_publisher_has_no_ring_to_look_at_and_bad_names_are_refused() {
    let (dom, _p) = one_sent(
        "look-udp",
        "u",
        Transport::Udp,
        Delivery::Reliable,
        b"over udp",
    );
    assert!(last_messages(&dom, "u", 64, MAX_RING).unwrap().is_empty());
    assert!(last_messages(&dom, "absent", 64, MAX_RING)
        .unwrap()
        .is_empty());
    assert!(last_messages("a.b", "u", 64, MAX_RING).is_err());
    assert!(last_messages(&dom, "", 64, MAX_RING).is_err());
}

#[test]
fn a_ring_larger_than_the_look_allows_is_refused_not_mapped() {
    let (dom, _p) = one_sent("look-large", "big", Transport::Shm, Delivery::Latest, b"x");
    let looks = last_messages(&dom, "big", 64, 4096).unwrap();
    assert_eq!(looks.len(), 1);
    let e = looks.into_iter().next().unwrap().unwrap_err();
    assert!(matches!(e, ferry::Error::RingTooLarge { .. }), "{e}");
}

/// A publisher that takes the slot an earlier one left starts its counters at 0.
#[test]
fn a_publisher_in_a_slot_another_left_starts_from_zero() {
    let dom = domain("look-reuse");
    let node = Node::with_domain("look", &dom).unwrap();
    let q = qos(Transport::Shm, Delivery::Latest);
    let _sub = node.subscriber("t", &q).unwrap();
    {
        let mut p = node.publisher("t", &q).unwrap();
        for _ in 0..3 {
            p.send(b"x").unwrap();
        }
    }
    let mut p = node.publisher("t", &q).unwrap();
    p.send(b"yy").unwrap();
    let t = admin::topic(&dom, "t").unwrap().unwrap();
    let counts: Vec<_> = t
        .publishers
        .iter()
        .map(|p| (p.slot, p.sent, p.bytes))
        .collect();
    assert_eq!(counts, vec![(0, 1, 2)]);
}
