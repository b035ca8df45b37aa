//! Timeouts longer than the clock can count (`Duration::MAX`) mean "as long as it takes", on
//! every transport: a deadline's arithmetic never panics, a receive that waits that long still
//! returns the message that comes, and a publisher that may wait that long sends and closes.

mod common;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::{domain, meet};
use ferry::{Delivery, Node, Qos, Transport};

/// How long any one step here may take before the test fails (the steps take milliseconds).
const BOUND: Duration = Duration::from_secs(30);

#[test]
fn timeouts_past_what_the_clock_counts_wait_as_long_as_it_takes() {
    for transport in [Transport::Shm, Transport::Udp, Transport::Auto] {
        let dom = domain("maxtimeout");
        let node = Node::with_domain("n", &dom).unwrap();
        let qos = Qos::default()
            .transport(transport)
            .delivery(Delivery::Reliable)
            .send_timeout(Duration::MAX);
        let mut sub = node.subscriber("t", &qos).unwrap();
        let mut publ = node.publisher("t", &qos).unwrap();
        assert!(
            meet(&mut sub, &publ, BOUND),
            "{transport:?}: the publisher and the subscriber never met"
        );

        // The receive waits in its own thread, so that a wait that never ends fails the test
        // instead of hanging it.
        let (got_tx, got) = mpsc::channel();
        let receiver = thread::spawn(move || {
            let message = sub
                .recv_timeout(Duration::MAX)
                .map(|s| s.map(|s| s.to_vec()));
            got_tx.send(format!("{message:?}")).unwrap();
            sub
        });
        // Late enough that the receive is waiting, not looking for the first time.
        thread::sleep(Duration::from_millis(50));
        publ.send(b"late").unwrap();
        let message = got
            .recv_timeout(BOUND)
            .unwrap_or_else(|_| panic!("{transport:?}: the receive did not return"));
        assert_eq!(
            message,
            format!("{:?}", Ok::<_, ()>(Some(b"late".to_vec()))),
            "{transport:?}"
        );
        let sub = receiver.join().unwrap();

        // Closing: a reliable UDP publisher lingers (up to its send timeout) until its
        // subscribers took everything, which this one did.
        let (closed_tx, closed) = mpsc::channel();
        let start = Instant::now();
        thread::spawn(move || {
            drop(publ);
            closed_tx.send(()).unwrap();
        });
        closed
            .recv_timeout(BOUND)
            .unwrap_or_else(|_| panic!("{transport:?}: the publisher did not close"));
        eprintln!("{transport:?}: closed in {:?}", start.elapsed());
        drop(sub);
    }
}

/// A publisher that goes waits (up to its send timeout) for the reliable subscribers that were
/// there before it to read what it wrote — but not for one that has left the topic meanwhile
/// without ever reading: closing it here took the whole 10 s send timeout.
#[test]
fn a_closing_publisher_does_not_wait_for_a_subscriber_that_has_left() {
    let dom = domain("leftunread");
    let node = Node::with_domain("n", &dom).unwrap();
    let qos = Qos::default()
        .transport(Transport::Shm)
        .send_timeout(Duration::from_secs(10));
    let sub = node.subscriber("t", &qos).unwrap();
    let mut publ = node.publisher("t", &qos).unwrap();
    publ.send(b"never read").unwrap();
    drop(sub);
    let start = Instant::now();
    drop(publ);
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "the publisher took {took:?} to close"
    );
}
