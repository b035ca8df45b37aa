//! Reliable means delivered or an error the sender sees: a message larger than a reliable
//! subscriber takes is refused at the publisher with an error naming that subscriber (or it
//! arrives, where the subscriber takes it), and a publisher can wait for what it sent to be taken
//! before it goes, learning when it was not. Every wait has a deadline; no test asserts a timing.

use std::time::Duration;

use ferry::{Node, Publisher, SendError, Subscriber, Transport};

mod common;
use common::*;

const LONG: Duration = Duration::from_secs(30);

/// A subscriber of topic `t` on `sub_node` that takes messages of up to `sub_max` bytes and a
/// publisher on `pub_node` of up to `pub_max`, both blocking on `transport`, once they met.
fn met(
    (sub_node, sub_max): (&Node, usize),
    (pub_node, pub_max): (&Node, usize),
    transport: Transport,
) -> (Subscriber, Publisher) {
    let mut sub = sub_node
        .subscriber("t", &blocking_qos(transport, sub_max))
        .unwrap();
    let publ = pub_node
        .publisher("t", &blocking_qos(transport, pub_max))
        .unwrap();
    assert!(meet(&mut sub, &publ, LONG));
    (sub, publ)
}

#[test]
fn a_message_above_a_reliable_udp_subscribers_limit_is_an_error_naming_it() {
    let dom = domain("limit");
    let publisher_node = Node::with_domain("sender", &dom).unwrap();
    let subscriber_node = Node::with_domain("small-reader", &dom).unwrap();
    let (mut sub, mut publ) = met(
        (&subscriber_node, 64 << 10),
        (&publisher_node, 1 << 20),
        Transport::Udp,
    );
    // At the subscriber's limit: it arrives.
    publ.send(&vec![1u8; 64 << 10]).unwrap();
    let s = sub
        .recv_timeout(LONG)
        .unwrap()
        .expect("the message at the limit");
    assert_eq!(s.len(), 64 << 10);
    drop(s);
    // One byte more: refused here, naming the subscriber, whether sent or loaned.
    let err = publ.send(&vec![2u8; (64 << 10) + 1]).unwrap_err();
    assert_eq!(
        err,
        SendError::SubscriberLimit {
            len: (64 << 10) + 1,
            max: 64 << 10,
            subscriber: "node \"small-reader\" of this host".into()
        }
    );
    assert!(err.to_string().contains("small-reader"), "{err}");
    let mut loan = publ.loan((64 << 10) + 1).unwrap();
    loan.as_mut_slice().fill(3);
    assert!(matches!(
        loan.send(),
        Err(SendError::SubscriberLimit { .. })
    ));
    // Nothing was refused on arrival, and the publisher has nothing undelivered.
    publ.flush(LONG).unwrap();
    let snap = ferry::admin::topic(&dom, "t").unwrap().unwrap();
    assert_eq!(snap.subscribers[0].refused.total(), 0);
    // A subscriber that takes larger messages gets them.
    drop(sub);
    drop(publ);
    let (mut big, mut publ) = met(
        (&subscriber_node, 1 << 20),
        (&publisher_node, 1 << 20),
        Transport::Udp,
    );
    publ.send(&vec![4u8; (64 << 10) + 1]).unwrap();
    let s = big.recv_timeout(LONG).unwrap().expect("the larger message");
    assert_eq!(s.len(), (64 << 10) + 1);
    drop(s);
    publ.flush(LONG).unwrap();
}

#[test]
fn shared_memory_subscribers_take_whatever_the_ring_holds() {
    let dom = domain("limit-shm");
    let node = Node::with_domain("n", &dom).unwrap();
    let (mut sub, mut publ) = met((&node, 64 << 10), (&node, 1 << 20), Transport::Shm);
    publ.send(&vec![5u8; 1 << 20]).unwrap();
    let s = sub.recv_timeout(LONG).unwrap().expect("the large message");
    assert_eq!(s.len(), 1 << 20);
    drop(s);
    publ.flush(Duration::ZERO).unwrap();
}

#[test]
fn flush_says_when_a_reliable_subscriber_has_not_taken_everything() {
    let dom = domain("flush");
    // The subscriber's node loses every datagram it receives (ferry's own loss injection): it
    // stays alive and keeps reporting, but never has the message.
    let deaf = ferry::NodeConfig::from_env()
        .unwrap()
        .with_domain(&dom)
        .with_impairment(Some(
            ferry::Impairment::parse("loss=100%,dir=receive").unwrap(),
        ));
    let deaf = Node::with_config("deaf", deaf).unwrap();
    let node = Node::with_domain("n", &dom).unwrap();
    let q = blocking_qos(Transport::Udp, 64 << 10).send_timeout(Duration::from_secs(5));
    let mut sub = deaf.subscriber("t", &q).unwrap();
    let mut publ = node.publisher("t", &q).unwrap();
    assert!(meet(&mut sub, &publ, LONG));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let polling = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut got = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if sub
                    .recv_timeout(Duration::from_millis(5))
                    .unwrap()
                    .is_some()
                {
                    got += 1;
                }
            }
            got
        })
    };
    publ.send(&[7u8; 10_000]).unwrap();
    let outcome = publ.flush(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        polling.join().unwrap(),
        0,
        "the deaf subscriber got nothing"
    );
    match outcome {
        Err(SendError::Undelivered {
            receivers, bytes, ..
        }) => {
            assert_eq!(receivers, 1);
            assert_eq!(bytes, 10_000);
        }
        other => panic!("expected Undelivered, got {other:?}"),
    }
}

/// A publisher held back says who holds it: over shared memory the subscribers whose place in
/// the ring leaves no room (node and pid), over UDP the subscriber furthest behind (its
/// address); once they took everything, nobody.
#[test]
fn a_held_back_publisher_names_who_holds_it() {
    let dom = domain("holders");
    let publisher_node = Node::with_domain("sender", &dom).unwrap();
    let subscriber_node = Node::with_domain("slow-reader", &dom).unwrap();

    let (mut sub, mut publ) = met(
        (&subscriber_node, 1024),
        (&publisher_node, 1024),
        Transport::Shm,
    );
    assert!(publ.holding_back(1024).is_empty());
    // Fill the ring (bounded: a ring holds far fewer than this many 1 KiB messages).
    let mut sent = 0;
    while let Some(mut loan) = publ.try_loan(1024).unwrap() {
        loan.as_mut_slice().fill(7);
        loan.send().unwrap();
        sent += 1;
        assert!(sent < 1_000_000, "the ring never filled");
    }
    let held = publ.holding_back(1024);
    assert_eq!(held.len(), 1, "{held:?}");
    assert!(
        held[0].contains("\"slow-reader\"")
            && held[0].contains(&format!("pid {}", std::process::id())),
        "{held:?}"
    );
    for _ in 0..sent {
        assert!(sub.try_recv().unwrap().is_some());
    }
    assert!(publ.holding_back(1024).is_empty());
    drop((sub, publ));

    let (mut sub, mut publ) = met(
        (&subscriber_node, 1024),
        (&publisher_node, 1024),
        Transport::Udp,
    );
    publ.send(&[5u8; 1024]).unwrap();
    let held = publ.holding_back(1024);
    assert_eq!(held.len(), 1, "{held:?}");
    assert!(
        held[0].starts_with("a subscriber at ") && held[0].contains("bytes behind"),
        "{held:?}"
    );
    assert!(sub.recv_timeout(LONG).unwrap().is_some());
    assert!(
        wait_until(LONG, || publ.holding_back(1024).is_empty()),
        "{:?}",
        publ.holding_back(1024)
    );
}
