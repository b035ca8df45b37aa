//! Holding several messages (`Sample::keep`, `Qos::max_held`): a kept message stays intact while
//! the next ones are received, over shared memory (reliable in place, latest copied or held)
//! and UDP; a reliable publisher cannot write over a kept message, and goes on once it is let
//! go; past `max_held` the sample comes back unkept.

mod common;

use std::time::Duration;

use common::{blocking_qos, domain, wait_until};
use ferry::{Delivery, Node, Qos, SendError, Transport};

const WAIT: Duration = Duration::from_secs(10);

fn qos(t: Transport, d: Delivery) -> Qos {
    blocking_qos(t, 1024).delivery(d)
}

fn body(i: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| (k as u32).wrapping_mul(7).wrapping_add(i) as u8)
        .collect()
}

fn pair(dom: &str, q: &Qos) -> (Node, ferry::Subscriber, ferry::Publisher) {
    let node = Node::with_domain("keep", dom).unwrap();
    let mut sub = node.subscriber("t", q).unwrap();
    let publ = node.publisher("t", q).unwrap();
    assert!(wait_until(WAIT, || sub.publisher_count() >= 1
        && publ.subscriber_count() >= 1));
    (node, sub, publ)
}

#[test]
fn a_kept_message_stays_intact_while_the_next_ones_are_received() {
    for (t, d) in [
        (Transport::Shm, Delivery::Reliable),
        (Transport::Shm, Delivery::Latest),
        (Transport::Udp, Delivery::Reliable),
        (Transport::Udp, Delivery::Latest),
    ] {
        let dom = domain(&format!("keep-{t:?}-{d}"));
        let q = qos(t, d);
        let (_node, mut sub, mut publ) = pair(&dom, &q);
        publ.send(&body(0, 700)).unwrap();
        let first = sub.recv_timeout(WAIT).unwrap().expect("message 0");
        assert_eq!(first.seq(), 0);
        let kept = first
            .keep()
            .expect("one message kept beside the next (max_held 2)");
        assert_eq!(sub.kept_count(), 1);
        for i in 1..50u32 {
            publ.send(&body(i, 100 + i as usize)).unwrap();
            let s = sub.recv_timeout(WAIT).unwrap().expect("the next message");
            assert_eq!(&*s, &body(s.seq() as u32, 100 + s.seq() as usize)[..]);
            if i == 1 {
                // Two held (the kept one and this one): a third cannot be kept.
                let back = s.keep().expect_err("max_held 2");
                assert_eq!(back.seq(), 1);
            } else {
                drop(s);
            }
            // The kept one is as it came, however far the others went.
            assert_eq!(sub.kept(&kept).unwrap(), &body(0, 700)[..], "{t:?} {d}");
        }
        sub.let_go(kept);
        assert_eq!(sub.kept_count(), 0);
    }
}

#[test]
fn a_reliable_publisher_does_not_write_over_a_kept_message_and_goes_on_once_it_is_let_go() {
    let dom = domain("keep-full");
    let q = qos(Transport::Shm, Delivery::Reliable)
        .ring_capacity(8192)
        .send_timeout(Duration::from_millis(200));
    let (_node, mut sub, mut publ) = pair(&dom, &q);
    publ.send(&body(0, 1000)).unwrap();
    let kept = sub.recv_timeout(WAIT).unwrap().unwrap().keep().unwrap();
    // Everything after it is read at once, yet the ring fills up to the kept message.
    let mut sent = 1u32;
    let full = loop {
        match publ.send(&body(sent, 1000)) {
            Ok(()) => {
                sent += 1;
                let s = sub.recv_timeout(WAIT).unwrap().unwrap();
                assert_eq!(&*s, &body(s.seq() as u32, 1000)[..]);
                drop(s);
                assert!(
                    sent < 1000,
                    "the publisher never stopped at the kept message"
                );
            }
            Err(e) => break e,
        }
    };
    assert!(matches!(full, SendError::Timeout(..)), "{full}");
    assert_eq!(sub.kept(&kept).unwrap(), &body(0, 1000)[..]);
    sub.let_go(kept);
    publ.send(&body(sent, 1000)).unwrap();
    let s = sub.recv_timeout(WAIT).unwrap().unwrap();
    assert_eq!(&*s, &body(sent, 1000)[..]);
}

#[test]
fn max_held_sets_how_many_and_a_kept_message_belongs_to_its_subscriber() {
    let dom = domain("keep-many");
    let q = qos(Transport::Shm, Delivery::Reliable).max_held(4);
    let (node, mut sub, mut publ) = pair(&dom, &q);
    assert_eq!(sub.max_held(), 4);
    let mut kept = Vec::new();
    for i in 0..4u32 {
        publ.send(&body(i, 64)).unwrap();
        let s = sub.recv_timeout(WAIT).unwrap().unwrap();
        match s.keep() {
            Ok(k) => kept.push(k),
            Err(s) => assert_eq!(s.seq(), 3, "the fourth stays the current one"),
        }
    }
    assert_eq!(kept.len(), 3);
    for (i, k) in kept.iter().enumerate() {
        assert_eq!(sub.kept(k).unwrap(), &body(i as u32, 64)[..]);
    }
    // Another subscriber neither reads nor lets go of them.
    let mut other = node.subscriber("t", &q).unwrap();
    assert!(other.kept(&kept[0]).is_none());
    // Let go out of order: the ring's cursor follows the oldest still kept.
    let mut kept = kept.into_iter();
    let (k0, k1, k2) = (
        kept.next().unwrap(),
        kept.next().unwrap(),
        kept.next().unwrap(),
    );
    other.let_go(k1);
    assert_eq!(sub.kept_count(), 3);
    sub.let_go(k2);
    assert_eq!(sub.kept(&k0).unwrap(), &body(0, 64)[..]);
    sub.let_go(k0);
    assert_eq!(
        sub.kept_count(),
        1,
        "k1 went to the other subscriber's let_go and is lost"
    );
    for bad in [0, 1025] {
        let e = node.subscriber("t", &q.clone().max_held(bad)).unwrap_err();
        assert!(e.to_string().contains("max_held"), "{e}");
    }
}
