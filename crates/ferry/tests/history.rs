//! History for late joiners: a publisher keeps its last messages; a subscriber that joins after
//! they were sent gets the last of them it asks for, oldest first, then the live ones, with no
//! gap and no duplicate (sequence numbers and contents prove it).

use std::time::Duration;

use ferry::{Delivery, Node, Qos, Transport};

mod common;
use common::*;

const WAIT: Duration = Duration::from_secs(10);

/// Receives until `n` messages have come (each at most `WAIT` apart); (seq, body as u64).
fn take(sub: &mut ferry::Subscriber, n: usize) -> Vec<(u64, u64)> {
    (0..n)
        .map(|i| {
            let s = sub
                .recv_timeout(WAIT)
                .unwrap()
                .unwrap_or_else(|| panic!("message {i} of {n} did not come"));
            (s.seq(), u64::from_le_bytes(s[..8].try_into().unwrap()))
        })
        .collect()
}

fn send(publ: &mut ferry::Publisher, range: std::ops::Range<u64>) {
    for i in range {
        let mut body = [0u8; 24];
        body[..8].copy_from_slice(&i.to_le_bytes());
        publ.send(&body).unwrap();
    }
}

fn late_joiner_gets_exactly_the_last(delivery: Delivery, keep: usize, ask: usize) {
    late_joiner_over(Transport::Shm, None, delivery, keep, ask);
}

/// The publisher sends 1000 messages, then a subscriber joins over `transport` asking `ask`
/// (its node losing what `impair` says, over UDP): it gets the last min(keep, ask), then the
/// live ones.
fn late_joiner_over(
    transport: Transport,
    impair: Option<&str>,
    delivery: Delivery,
    keep: usize,
    ask: usize,
) {
    let dom = domain("hist");
    let node = Node::with_domain("n", &dom).unwrap();
    let joiner = match impair {
        None => Node::with_domain("j", &dom).unwrap(),
        Some(spec) => {
            let cfg = ferry::NodeConfig::from_env()
                .unwrap()
                .with_domain(&dom)
                .with_impairment(Some(ferry::Impairment::parse(spec).unwrap()));
            Node::with_config("j", cfg).unwrap()
        }
    };
    let qos = Qos::default()
        .transport(transport)
        .delivery(delivery)
        .max_message_size(1024);
    let mut publ = node.publisher("t", &qos.clone().history(keep)).unwrap();
    send(&mut publ, 0..1000);
    let mut sub = joiner.subscriber("t", &qos.clone().history(ask)).unwrap();
    let got = ask.min(keep) as u64;
    let past = take(&mut sub, got as usize);
    let want: Vec<(u64, u64)> = (1000 - got..1000).map(|i| (i, i)).collect();
    assert_eq!(past, want, "{delivery:?}: the last {got} first");
    assert!(
        sub.try_recv().unwrap().is_none(),
        "nothing more before live"
    );
    if impair.is_some() && delivery == Delivery::Latest {
        // Latest delivery does not repair live messages: the first that comes is a live one,
        // and its own.
        for i in 1000..2000 {
            send(&mut publ, i..i + 1);
            if let Some(s) = sub.recv_timeout(Duration::from_millis(5)).unwrap() {
                let body = u64::from_le_bytes(s[..8].try_into().unwrap());
                assert!(s.seq() >= 1000 && body == s.seq(), "{} {body}", s.seq());
                return;
            }
        }
        panic!("no live message came through 30 % loss in 1000 tries");
    }
    // Live ones, once the publisher sends to the joiner (it does from the heartbeat on that
    // told the joiner where the history starts).
    send(&mut publ, 1000..1005);
    let live = take(&mut sub, 5);
    assert_eq!(
        live,
        (1000..1005).map(|i| (i, i)).collect::<Vec<_>>(),
        "{delivery:?} over {transport:?}: live ones follow with no gap"
    );
    // A subscriber that asks for none gets none.
    let mut plain = node.subscriber("t", &qos).unwrap();
    std::thread::sleep(Duration::from_millis(if transport == Transport::Udp {
        300
    } else {
        0
    }));
    assert!(plain.try_recv().unwrap().is_none());
}

#[test]
fn a_late_joiner_asking_10_after_1000_messages_gets_the_last_10_then_live_ones_reliable() {
    late_joiner_gets_exactly_the_last(Delivery::Reliable, 10, 10);
}

#[test]
fn a_late_joiner_asking_10_after_1000_messages_gets_the_last_10_then_live_ones_latest() {
    late_joiner_gets_exactly_the_last(Delivery::Latest, 10, 10);
}

#[test]
fn a_joiner_gets_the_smaller_of_what_is_kept_and_what_it_asks() {
    late_joiner_gets_exactly_the_last(Delivery::Reliable, 3, 10);
    late_joiner_gets_exactly_the_last(Delivery::Latest, 50, 1);
}

#[test]
fn history_above_the_limit_is_refused_with_a_clear_error() {
    let dom = domain("histmax");
    let node = Node::with_domain("n", &dom).unwrap();
    let qos = Qos::default().transport(Transport::Shm).history(1 << 20);
    let e = node.publisher("t", &qos).unwrap_err().to_string();
    assert!(e.contains("history 1048576"), "{e}");
    assert!(node.subscriber("t", &qos).is_err());
}

#[test]
fn a_subscriber_there_first_gets_everything_once_not_history_again() {
    let dom = domain("histfirst");
    let node = Node::with_domain("n", &dom).unwrap();
    let qos = Qos::default()
        .transport(Transport::Shm)
        .max_message_size(1024)
        .history(5);
    let mut sub = node.subscriber("t", &qos).unwrap();
    let mut publ = node.publisher("t", &qos).unwrap();
    send(&mut publ, 0..20);
    let got = take(&mut sub, 20);
    assert_eq!(got, (0..20).map(|i| (i, i)).collect::<Vec<_>>());
    assert!(sub.try_recv().unwrap().is_none(), "no duplicate");
}

#[test]
fn over_udp_a_late_joiner_asking_10_after_1000_gets_the_last_10_then_live_ones_reliable() {
    late_joiner_over(Transport::Udp, None, Delivery::Reliable, 10, 10);
}

#[test]
fn over_udp_a_late_joiner_asking_10_after_1000_gets_the_last_10_then_live_ones_latest() {
    late_joiner_over(Transport::Udp, None, Delivery::Latest, 10, 10);
}

#[test]
fn over_udp_a_joiner_gets_the_smaller_of_what_is_kept_and_what_it_asks() {
    late_joiner_over(Transport::Udp, None, Delivery::Reliable, 3, 10);
    late_joiner_over(Transport::Udp, None, Delivery::Latest, 50, 1);
}

/// The history is sent reliably whatever the delivery: a joiner that loses a third of what it
/// receives (ferry's own loss injection) still gets all of it, then the live ones.
#[test]
fn over_udp_a_joiner_that_loses_datagrams_still_gets_its_whole_history() {
    let lossy = "loss=30%,seed=7,dir=receive";
    late_joiner_over(Transport::Udp, Some(lossy), Delivery::Latest, 20, 20);
    late_joiner_over(Transport::Udp, Some(lossy), Delivery::Reliable, 20, 20);
}

/// A history of messages at the subscriber's size limit, each 44 datagrams: more than a
/// receiver's first repair budget (256 KiB), so the joiner's asks are served in turns; every
/// byte of each arrives, latest delivery too.
#[test]
fn over_udp_a_history_of_messages_at_the_size_limit_arrives_whole() {
    const SIZE: usize = 64 << 10;
    for delivery in [Delivery::Latest, Delivery::Reliable] {
        let dom = domain("histbig");
        let node = Node::with_domain("n", &dom).unwrap();
        let qos = Qos::default()
            .transport(Transport::Udp)
            .delivery(delivery)
            .max_message_size(SIZE);
        let mut publ = node.publisher("t", &qos.clone().history(8)).unwrap();
        let mut body = vec![0u8; SIZE];
        for seq in 0..20u64 {
            fill(seq, &mut body);
            publ.send(&body).unwrap();
        }
        let mut sub = node.subscriber("t", &qos.clone().history(8)).unwrap();
        for seq in 12..20u64 {
            let s = sub
                .recv_timeout(WAIT)
                .unwrap()
                .unwrap_or_else(|| panic!("{delivery:?}: history message {seq} did not come"));
            assert_eq!((s.seq(), s.len()), (seq, SIZE), "{delivery:?}");
            assert!(check(seq, &s), "{delivery:?}: message {seq} intact");
        }
    }
}

#[test]
fn history_over_udp_above_what_a_udp_subscriber_takes_is_refused_with_a_clear_error() {
    let dom = domain("histudp");
    let node = Node::with_domain("n", &dom).unwrap();
    let qos = Qos::default().transport(Transport::Udp).history(10_000);
    let e = node.subscriber("t", &qos).unwrap_err().to_string();
    assert!(e.contains("history 10000 over UDP"), "{e}");
}

/// The children. Not a test of its own: the tests below start it with a role.
#[test]
#[ignore = "entry point of child processes started by the other tests"]
fn child_entry() {
    run_child();
}

#[test]
fn history_crosses_processes_under_auto() {
    // The default transport: a publisher in another process that sent 1000 messages and went
    // quiet, and a subscriber that starts afterwards.
    let dom = domain("histproc");
    let mut child = spawn_on(
        "publisher",
        (&dom, "t", "auto,history=10,max=256"),
        &[
            ("MAXSIZE", "256".into()),
            ("COUNT", "1000".into()),
            ("LINGER_MS", "30000".into()),
        ],
    );
    wait_for_line(&mut child, "SENT", WAIT);
    let node = Node::with_domain("n", &dom).unwrap();
    let qos = Qos::default().max_message_size(256).history(10);
    let mut sub = node.subscriber("t", &qos).unwrap();
    for seq in 990..1000 {
        let s = sub.recv_timeout(WAIT).unwrap().expect("history message");
        assert_eq!(s.seq(), seq);
        assert!(check(seq, &s), "message {seq} intact");
    }
    assert!(
        sub.try_recv().unwrap().is_none(),
        "nothing after the last kept"
    );
    kill9(&mut child);
}
