//! Publisher events: a subscriber learns that a publisher appeared, and that it is gone and
//! why — closed, or killed (`kill -9`) — over shared memory and over UDP. Every wait has a
//! deadline; the kill test prints how long each death took to be seen, and asserts only that
//! it was seen.

use std::time::{Duration, Instant};

use ferry::{Event, Gone, Node, PublisherId, Qos, Transport, WaitStrategy};

mod common;
use common::*;

/// The children. Not a test of its own: the tests below start it with a role.
#[test]
#[ignore = "entry point of child processes started by the other tests"]
fn child_entry() {
    run_child();
}

/// Receives (draining messages) until an event matching `want` arrives or `timeout` passes;
/// returns it, with the events seen before it.
fn until_event(
    sub: &mut ferry::Subscriber,
    timeout: Duration,
    want: impl Fn(&Event) -> bool,
) -> (Option<Event>, Vec<Event>) {
    let deadline = Instant::now() + timeout;
    let mut before = Vec::new();
    while Instant::now() < deadline {
        while let Some(e) = sub.try_event() {
            if want(&e) {
                return (Some(e), before);
            }
            before.push(e);
        }
        let _ = sub.recv_timeout(Duration::from_millis(20)).unwrap();
    }
    (None, before)
}

/// Waits up to `timeout` for a publisher to appear and returns its id; panics with `never` if
/// none did.
fn until_appeared(sub: &mut ferry::Subscriber, timeout: Duration, never: &str) -> PublisherId {
    let (appeared, _) = until_event(sub, timeout, |e| matches!(e, Event::Appeared(_)));
    let Some(Event::Appeared(id)) = appeared else {
        panic!("{never}");
    };
    id
}

/// Waits up to 10 s for a publisher to be gone, which must be publisher `id`, gone `why`.
fn expect_gone(sub: &mut ferry::Subscriber, id: PublisherId, why: Gone) {
    let (gone, before) = until_event(sub, Duration::from_secs(10), |e| {
        matches!(e, Event::Gone(..))
    });
    assert_eq!(gone, Some(Event::Gone(id, why)), "{before:?}");
}

#[test]
fn a_shared_memory_publisher_appears_and_closes() {
    let dom = domain("evclose");
    let node = Node::with_domain("n", &dom).unwrap();
    let qos = Qos::default().transport(Transport::Shm);
    let mut sub = node.subscriber("t", &qos).unwrap();
    assert_eq!(sub.try_event(), None, "no publisher yet");
    let mut publ = node.publisher("t", &qos).unwrap();
    publ.send(b"hello").unwrap();
    let id = until_appeared(&mut sub, Duration::from_secs(10), "no appeared event");
    assert_eq!(id.transport(), Transport::Shm);
    drop(publ);
    expect_gone(&mut sub, id, Gone::Closed);
    assert_eq!(sub.events_dropped(), 0);
}

/// `kills` times: a publisher child (`qos`, sending every 2 ms) appears, sends, and is killed
/// with SIGKILL; `sub` waits for messages (blocked, as an application does) until it learns
/// of the death, which must be `Gone(.., why)`. Returns the time from each kill to its event,
/// sorted, and prints their median and maximum under `what`.
fn kill_times(
    sub: &mut ferry::Subscriber,
    dom: &str,
    qos: &str,
    kills: usize,
    why: Gone,
    what: &str,
) -> Vec<Duration> {
    let mut seen = Vec::new();
    for _ in 0..kills {
        let mut publ = spawn_on(
            "publisher",
            (dom, "t", qos),
            &[("PACE_US", "2000".into()), ("WAIT_SUBS", "1".into())],
        );
        let id = until_appeared(sub, Duration::from_secs(20), "the publisher never appeared");
        // A message from it, so that it runs, then the kill.
        assert!(sub.recv_timeout(Duration::from_secs(20)).unwrap().is_some());
        let killed = Instant::now();
        kill9(&mut publ);
        expect_gone(sub, id, why);
        seen.push(killed.elapsed());
    }
    seen.sort();
    println!(
        "kill -9 of a publisher seen by its subscriber ({what}): median {:.1} ms, max {:.1} ms \
         over {} kills",
        seen[seen.len() / 2].as_secs_f64() * 1e3,
        seen[seen.len() - 1].as_secs_f64() * 1e3,
        seen.len()
    );
    seen
}

#[test]
fn a_killed_publisher_is_seen_dead_every_time() {
    let dom = domain("evkill");
    let node = Node::with_domain("reader", &dom).unwrap();
    let qos = "block,latest,max=1024";
    let mut sub = node.subscriber("t", &parse_qos(qos)).unwrap();
    kill_times(
        &mut sub,
        &dom,
        qos,
        20,
        Gone::Died,
        "shared memory, blocked",
    );
}

/// Across hosts a death is a silence: a UDP publisher killed is gone (`Silent`) once it has
/// not been heard from for the subscriber's lease, here 500 ms instead of the default 3 s.
/// Prints how long each took; asserts only that each came (never a time).
#[test]
fn a_killed_udp_publisher_is_gone_after_the_lease_the_subscriber_set() {
    let dom = domain("evlease");
    let node = Node::with_domain("reader", &dom).unwrap();
    let qos = "udp,block,latest,max=1024";
    let lease = Duration::from_millis(500);
    let mut sub = node.subscriber("t", &parse_qos(qos).lease(lease)).unwrap();
    kill_times(&mut sub, &dom, qos, 5, Gone::Silent, "UDP, a 500 ms lease");
}

#[test]
fn a_lease_outside_its_bounds_is_refused() {
    let node = Node::with_domain("n", &domain("evleasebad")).unwrap();
    for lease in [Duration::from_millis(299), Duration::from_secs(3601)] {
        let e = node
            .subscriber("t", &Qos::default().transport(Transport::Udp).lease(lease))
            .unwrap_err();
        assert!(
            matches!(e, ferry::Error::InvalidQos(ref m) if m.contains("lease")),
            "{e}"
        );
    }
}

#[test]
fn a_udp_publisher_appears_with_its_first_message_and_closes_with_its_goodbye() {
    let dom = domain("evudp");
    let node = Node::with_domain("n", &dom).unwrap();
    let qos = Qos::default()
        .transport(Transport::Udp)
        .wait(WaitStrategy::Block);
    let mut sub = node.subscriber("t", &qos).unwrap();
    let mut publ = node.publisher("t", &qos).unwrap();
    assert!(wait_until(Duration::from_secs(30), || publ
        .subscriber_count()
        == 1));
    publ.send(b"first").unwrap();
    let id = until_appeared(&mut sub, Duration::from_secs(10), "no appeared event");
    assert_eq!(id.transport(), Transport::Udp);
    drop(publ);
    expect_gone(&mut sub, id, Gone::Closed);
}

#[test]
fn a_subscriber_counts_the_periods_without_a_message_and_a_publisher_those_without_a_send() {
    let dom = domain("evdeadline");
    let node = Node::with_domain("n", &dom).unwrap();
    let period = Duration::from_millis(10);
    let qos = Qos::default()
        .transport(Transport::Shm)
        .wait(WaitStrategy::Block)
        .deadline(period);
    let mut sub = node.subscriber("t", &qos).unwrap();
    let mut publ = node.publisher("t", &qos).unwrap();
    // On time: nothing missed.
    publ.send(b"a").unwrap();
    assert!(sub.recv_timeout(Duration::from_secs(5)).unwrap().is_some());
    // Then 35 ms without a send: periods ended at 10, 20 and 30 ms at least.
    let quiet = Instant::now();
    std::thread::sleep(Duration::from_millis(35));
    publ.send(b"b").unwrap();
    let gap = quiet.elapsed();
    let most = (gap.as_millis() / period.as_millis() + 1) as u64;
    let snap = ferry::admin::topic(&dom, "t").unwrap().expect("topic");
    let p = snap.publishers[0].deadline_missed;
    assert!((3..=most).contains(&p), "publisher: {p} missed in {gap:?}");
    // The subscriber waits 100 ms with nothing more coming: it counts, and says so.
    let waited = Instant::now();
    let mut got = 0;
    while sub
        .recv_timeout(Duration::from_millis(100))
        .unwrap()
        .is_some()
    {
        got += 1;
    }
    assert_eq!(got, 1, "the second message");
    let missed = sub.deadline_missed();
    let bound = (waited.elapsed().as_millis() / period.as_millis() + 4) as u64;
    assert!((5..=bound).contains(&missed), "subscriber: {missed}");
    let events: Vec<Event> = std::iter::from_fn(|| sub.try_event()).collect();
    assert!(
        events.contains(&Event::DeadlineMissed(missed)),
        "{events:?}"
    );
    let snap = ferry::admin::topic(&dom, "t").unwrap().expect("topic");
    assert_eq!(snap.subscribers[0].deadline_missed, missed);
    // A deadline outside 1 ms to an hour is refused by name.
    let bad = qos.clone().deadline(Duration::ZERO);
    let e = node.subscriber("t", &bad).unwrap_err().to_string();
    assert!(e.contains("deadline"), "{e}");
}
