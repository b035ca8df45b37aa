//! Latest delivery over shared memory holds large messages in place: a sample stays intact however
//! far the publisher goes meanwhile, and a sample that is dropped, leaked or outlived by its
//! subscriber lets the publisher have its bytes back.

mod common;

use std::time::Duration;

use common::{check, domain, fill, wait_until};
use ferry::{Delivery, Node, Qos, Transport, WaitStrategy};

const SIZE: usize = 64 * 1024;

fn latest() -> Qos {
    Qos::default()
        .transport(Transport::Shm)
        .delivery(Delivery::Latest)
        .wait(WaitStrategy::Spin)
        .max_message_size(SIZE)
}

/// A node with `n` latest subscribers and a publisher of topic "t", attached to each other.
fn attached(dom: &str, n: usize) -> (Node, Vec<ferry::Subscriber>, ferry::Publisher) {
    let node = Node::with_domain("n", dom).unwrap();
    let mut subs: Vec<_> = (0..n)
        .map(|_| node.subscriber("t", &latest()).unwrap())
        .collect();
    let publ = node.publisher("t", &latest()).unwrap();
    assert!(wait_until(Duration::from_secs(10), || {
        subs.iter_mut().all(|s| s.publisher_count() == 1) && publ.subscriber_count() == n
    }));
    (node, subs, publ)
}

fn send(p: &mut ferry::Publisher, seq: u64) {
    let mut loan = p.loan(SIZE).unwrap();
    fill(seq, loan.as_mut_slice());
    loan.send().unwrap();
}

#[test]
fn a_large_latest_sample_stays_intact_while_the_publisher_laps_the_ring() {
    let (_node, mut subs, mut publ) = attached(&domain("held"), 2);
    let (mut sub, mut other) = (subs.remove(0), subs.remove(0));
    send(&mut publ, 0);
    let _ = other.try_recv().unwrap().expect("message 0");
    {
        let sample = sub.try_recv().unwrap().expect("message 0");
        assert_eq!(sample.seq(), 0);
        // The ring holds four such messages: forty go round it ten times. The other subscriber
        // reads each one as it comes, intact.
        for seq in 1..=40 {
            send(&mut publ, seq);
            let s = other.try_recv().unwrap().expect("the newest message");
            assert!(s.seq() == seq && check(seq, &s), "message {seq} damaged");
            assert!(
                check(0, &sample),
                "a sample changed while held (after {seq})"
            );
        }
    }
    // Let go: the next sample is the newest, and what was missed is counted.
    send(&mut publ, 41);
    let s = sub.try_recv().unwrap().expect("the newest message");
    assert!(s.seq() == 41 && check(41, &s));
    assert_eq!(s.skipped(), 40);
}

#[test]
fn a_leaked_sample_or_a_dropped_subscriber_lets_go_of_what_it_held() {
    let (node, mut subs, mut publ) = attached(&domain("leak"), 1);
    let mut sub = subs.remove(0);
    // Each message is held and leaked: the next look lets go of it, so each next one can be held
    // (and is intact) and the publisher never stops.
    for seq in 0..20 {
        send(&mut publ, seq);
        let s = sub.try_recv().unwrap().expect("a message");
        assert!(s.seq() == seq && check(seq, &s), "message {seq} damaged");
        std::mem::forget(s);
    }
    let s = sub.try_recv().unwrap();
    assert!(s.is_none());
    drop(s);
    send(&mut publ, 20);
    let s = sub.try_recv().unwrap().expect("a message");
    std::mem::forget(s);
    // A subscriber that goes away with a sample held: the publisher goes on through many laps.
    drop(sub);
    let mut late = node.subscriber("t", &latest()).unwrap();
    assert!(wait_until(Duration::from_secs(10), || late
        .publisher_count()
        == 1));
    for seq in 21..60 {
        send(&mut publ, seq);
        let s = late.try_recv().unwrap().expect("a message");
        assert!(s.seq() == seq && check(seq, &s), "message {seq} damaged");
    }
}
