//! One thread waiting on many: a wait set over shared-memory and UDP subscribers, a service's
//! server and client, and timers says which are ready, wakes on the first message of any, and
//! loses no wake-up (a randomised stress over both transports). Every wait has a timeout.

use std::time::{Duration, Instant};

use ferry::{Node, Qos, Timer, Transport, WaitSet};

mod common;
use common::*;

const WAIT: Duration = Duration::from_secs(10);

fn qos(t: Transport) -> Qos {
    blocking_qos(t, 1024)
}

/// A subscriber and a publisher of `topic` that see each other.
fn pair(node: &Node, topic: &str, t: Transport) -> (ferry::Subscriber, ferry::Publisher) {
    let mut sub = node.subscriber(topic, &qos(t)).unwrap();
    let publ = node.publisher(topic, &qos(t)).unwrap();
    assert!(
        meet(&mut sub, &publ, WAIT),
        "{topic} over {t:?} did not meet"
    );
    // The publisher's appearance is an event, which makes the subscriber ready: taken here.
    while sub.try_event().is_some() {}
    (sub, publ)
}

type Pair = (ferry::Subscriber, ferry::Publisher);

/// On one node of a fresh domain made from `tag`: a pair over shared memory (topic `s`) and a
/// pair over UDP (topic `u`).
fn both_transports(tag: &str) -> (Node, Pair, Pair) {
    let node = Node::with_domain("n", &domain(tag)).unwrap();
    let shm = pair(&node, "s", Transport::Shm);
    let udp = pair(&node, "u", Transport::Udp);
    (node, shm, udp)
}

#[test]
fn a_wait_set_says_which_subscriber_has_a_message() {
    for t in [Transport::Shm, Transport::Udp] {
        let dom = domain("ws");
        let node = Node::with_domain("n", &dom).unwrap();
        let (mut a, _pa) = pair(&node, "a", t);
        let (mut b, mut pb) = pair(&node, "b", t);
        let mut set = WaitSet::new();
        assert!(
            set.wait(&mut [&mut a, &mut b], Some(Duration::from_millis(20)))
                .unwrap()
                .is_empty(),
            "nothing sent yet"
        );
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            pb.send(b"to b").unwrap();
            pb
        });
        let ready = set
            .wait(&mut [&mut a, &mut b], Some(WAIT))
            .unwrap()
            .to_vec();
        assert_eq!(ready, vec![1], "{t:?}");
        assert_eq!(&*b.try_recv().unwrap().expect("b's message"), b"to b");
        assert!(a.try_recv().unwrap().is_none());
        let _pb = sender.join().unwrap();
        // Over UDP a publisher is announced with its first message: an event to take too.
        while b.try_event().is_some() {}
        // Taken: nothing is ready any more.
        assert!(set
            .wait(&mut [&mut a, &mut b], Some(Duration::from_millis(20)))
            .unwrap()
            .is_empty());
    }
}

#[test]
fn one_wait_set_covers_shared_memory_and_udp_together() {
    let (_node, (mut s, mut ps), (mut u, mut pu)) = both_transports("wsmix");
    let mut set = WaitSet::new();
    for round in 0..20 {
        let over_udp = round % 2 == 0;
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            if over_udp {
                pu.send(b"udp").unwrap();
            } else {
                ps.send(b"shm").unwrap();
            }
            (ps, pu)
        });
        let ready = set
            .wait(&mut [&mut s, &mut u], Some(WAIT))
            .unwrap()
            .to_vec();
        (ps, pu) = sender.join().unwrap();
        let want = if over_udp { 1 } else { 0 };
        assert_eq!(ready, vec![want], "round {round}");
        let sub = if over_udp { &mut u } else { &mut s };
        assert!(sub.try_recv().unwrap().is_some(), "round {round}");
        while sub.try_event().is_some() {}
    }
}

#[test]
fn a_timer_is_ready_when_due_until_taken() {
    let mut tick = Timer::new(Duration::from_millis(20));
    let mut set = WaitSet::new();
    let start = Instant::now();
    let ready = set.wait(&mut [&mut tick], Some(WAIT)).unwrap().to_vec();
    assert_eq!(ready, vec![0]);
    assert!(start.elapsed() >= Duration::from_millis(20));
    assert!(tick.take() >= 1);
    assert!(!tick.is_due());
    assert_eq!(tick.take(), 0);
}

#[test]
fn a_wait_set_times_out_with_nothing_ready() {
    let dom = domain("wsto");
    let node = Node::with_domain("n", &dom).unwrap();
    let mut sub = node.subscriber("quiet", &qos(Transport::Auto)).unwrap();
    let mut set = WaitSet::new();
    let start = Instant::now();
    assert!(set
        .wait(&mut [&mut sub], Some(Duration::from_millis(50)))
        .unwrap()
        .is_empty());
    assert!(start.elapsed() >= Duration::from_millis(50));
}

#[test]
fn a_wait_set_wakes_a_server_on_a_request_and_a_client_on_its_response() {
    let dom = domain("wssrv");
    let node = Node::with_domain("n", &dom).unwrap();
    let q = qos(Transport::Shm);
    let mut server = node.server("svc", &q).unwrap();
    let mut tick = Timer::new(Duration::from_secs(3600));
    let client_node = node.clone();
    let caller = std::thread::spawn(move || {
        let mut client = client_node.client("svc", &q).unwrap();
        client.wait_for_server(WAIT);
        client.send_request(b"ping").unwrap();
        let mut set = WaitSet::new();
        let ready = set.wait(&mut [&mut client], Some(WAIT)).unwrap().to_vec();
        assert_eq!(ready, vec![0], "the client is woken by its response");
        let r = client.try_recv_response().unwrap().expect("the response");
        assert_eq!(&*r, b"pong");
    });
    let mut set = WaitSet::new();
    let ready = set
        .wait(&mut [&mut tick, &mut server], Some(WAIT))
        .unwrap()
        .to_vec();
    assert_eq!(ready, vec![1], "the server is woken by the request");
    let request = server.try_recv_request().unwrap().expect("the request");
    assert_eq!(&*request, b"ping");
    let _ = request.respond(b"pong").unwrap();
    caller.join().unwrap();
}

#[test]
fn publisher_events_wake_only_a_subscriber_that_asked_for_them() {
    let dom = domain("wsquiet");
    let node = Node::with_domain("n", &dom).unwrap();
    let mut sub = node.subscriber("q", &qos(Transport::Shm)).unwrap();
    let publ = node.publisher("q", &qos(Transport::Shm)).unwrap();
    assert!(wait_until(WAIT, || sub.publisher_count() >= 1));
    drop(publ);
    let mut set = WaitSet::new();
    // Appeared and gone are queued, but a subscriber that did not ask is not made ready by
    // them: a loop that reads only messages sleeps.
    assert!(set
        .wait(&mut [&mut sub], Some(Duration::from_millis(100)))
        .unwrap()
        .is_empty());
    assert!(
        sub.try_event().is_some(),
        "the events are there all the same"
    );
}

#[test]
fn a_publisher_that_goes_makes_its_subscriber_ready_with_an_event_when_asked() {
    let dom = domain("wsgone");
    let node = Node::with_domain("n", &dom).unwrap();
    let (mut sub, publ) = pair(&node, "g", Transport::Shm);
    sub.wake_on_events(true);
    drop(publ);
    let mut set = WaitSet::new();
    let ready = set.wait(&mut [&mut sub], Some(WAIT)).unwrap().to_vec();
    assert_eq!(ready, vec![0]);
    assert!(matches!(sub.try_event(), Some(ferry::Event::Gone(..))));
}

/// Randomised: a thread sends 1 500 messages over four topics (two of each transport) in bursts
/// and trickles with random pauses; one thread waits on all four and must take every message
/// with no wait running out (a wait that ran out while a message was there is a lost wake-up).
#[test]
fn no_wake_up_is_lost_under_random_bursts_over_both_transports() {
    let dom = domain("wsstress");
    let node = Node::with_domain("n", &dom).unwrap();
    let kinds = [
        Transport::Shm,
        Transport::Udp,
        Transport::Shm,
        Transport::Udp,
    ];
    let (mut subs, pubs): (Vec<_>, Vec<_>) = kinds
        .iter()
        .enumerate()
        .map(|(i, &t)| pair(&node, &format!("s{i}"), t))
        .unzip();
    const N: usize = 1500;
    let sender = std::thread::spawn(move || {
        let mut pubs = pubs;
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut rand = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut i = 0;
        while i < N {
            let burst = 1 + (rand() % 8) as usize;
            for _ in 0..burst.min(N - i) {
                let topic = (rand() % 4) as usize;
                pubs[topic].send(&(i as u64).to_le_bytes()).unwrap();
                i += 1;
            }
            match rand() % 4 {
                0 => {}
                1 => std::thread::yield_now(),
                _ => std::thread::sleep(Duration::from_micros(rand() % 300)),
            }
        }
        pubs
    });
    let mut set = WaitSet::new();
    let mut got = vec![false; N];
    let mut taken = 0;
    let started = Instant::now();
    while taken < N {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "took {taken} of {N}"
        );
        let mut items: Vec<&mut dyn ferry::Waitable> = subs
            .iter_mut()
            .map(|s| s as &mut dyn ferry::Waitable)
            .collect();
        let ready = set.wait(&mut items, Some(WAIT)).unwrap().to_vec();
        assert!(
            !ready.is_empty(),
            "a wait ran out with {taken} of {N} taken"
        );
        for i in ready {
            // Events (a UDP publisher is announced with its first message) keep a subscriber
            // ready until taken: taken, so that the waits sleep.
            while subs[i].try_event().is_some() {}
            while let Some(s) = subs[i].try_recv().unwrap() {
                let k = u64::from_le_bytes(s[..8].try_into().unwrap()) as usize;
                assert!(!got[k], "message {k} twice");
                got[k] = true;
                taken += 1;
            }
        }
    }
    let _pubs = sender.join().unwrap();
}

/// A subscriber's `waits` (what `ferry stats` shows) counts the sleeps it took part in: one per
/// wait of a set that slept (counted when the set takes it out of the sleep, so that a set that
/// armed it but found another item ready first counts none), none for a wait that returned at
/// its first look.
#[test]
fn a_subscriber_counts_only_the_waits_that_slept() {
    let dom = domain("wscount");
    let node = Node::with_domain("n", &dom).unwrap();
    let (mut a, _pa) = pair(&node, "a", Transport::Shm);
    let (mut b, mut pb) = pair(&node, "b", Transport::Shm);
    let waits = |topic: &str| {
        ferry::admin::topic(&dom, topic)
            .unwrap()
            .expect("the topic")
            .subscribers[0]
            .waits
    };
    let (a0, b0) = (waits("a"), waits("b"));
    let mut set = WaitSet::new();
    // b has a message: the set finds it ready on its first look, and does not sleep.
    pb.send(b"ready").unwrap();
    let mut timer = Timer::new(Duration::from_secs(3600));
    let ready = set
        .wait(&mut [&mut a, &mut timer, &mut b], Some(WAIT))
        .unwrap()
        .to_vec();
    assert_eq!(ready, vec![2]);
    assert_eq!(
        (waits("a"), waits("b")),
        (a0, b0),
        "no sleep, no wait counted"
    );
    assert!(b.try_recv().unwrap().is_some());
    // Nothing to read: the set sleeps until its timeout, one wait for each.
    assert!(set
        .wait(&mut [&mut a, &mut b], Some(Duration::from_millis(20)))
        .unwrap()
        .is_empty());
    assert_eq!((waits("a"), waits("b")), (a0 + 1, b0 + 1));
}

/// Polls `fd` for readability up to `timeout` (or until `until`, if sooner); true if readable.
fn readable(fd: std::os::fd::BorrowedFd<'_>, timeout: Duration, until: Option<Instant>) -> bool {
    use std::os::fd::AsRawFd;
    let t = until.map_or(timeout, |u| {
        timeout.min(u.saturating_duration_since(Instant::now()))
    });
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on the stack; a bounded timeout.
    let n = unsafe { libc::poll(&mut p, 1, t.as_millis().min(i32::MAX as u128) as i32) };
    n > 0 && p.revents != 0
}

/// Waits on `armed`'s descriptor as an event loop does, up to its `until`; `Some(true)` when the
/// descriptor became readable, `Some(false)` when the items' own timer came first, `None`
/// when neither happened within `limit`.
fn wait_armed(armed: &ferry::Armed<'_>, limit: Duration) -> Option<bool> {
    let fd = armed.fd().expect("a descriptor");
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if readable(fd, Duration::from_millis(50), armed.until()) {
            return Some(true);
        }
        if armed.until().is_some_and(|u| Instant::now() >= u) {
            return Some(false);
        }
    }
    None
}

/// For event loops: an armed wait set's descriptor stays quiet while nothing comes (shared
/// memory: nothing rings) and becomes readable when a message does, over shared memory, UDP and
/// both in one set; once the arming is dropped the message is there to take. With a message
/// waiting already, `arm` says so and gives no descriptor.
#[test]
fn an_armed_wait_set_gives_a_descriptor_that_becomes_readable_when_a_message_comes() {
    let (_node, (mut s, mut ps), (mut u, mut pu)) = both_transports("wsfd");
    let mut set = WaitSet::new();
    // Shared memory alone: quiet until the message, then readable (an item's timer may come
    // first now and then: the loop arms again, as an event loop does).
    let mut by_fd = 0;
    for round in 0..5 {
        let mut sent = false;
        let deadline = Instant::now() + WAIT;
        loop {
            assert!(Instant::now() < deadline, "round {round}: no message seen");
            let armed = set.arm(vec![&mut s]).unwrap();
            if armed.ready() == [0] {
                assert!(sent, "round {round}: ready before anything was sent");
                break;
            }
            if !sent {
                // Quiet: 20 ms pass, or the items' own timer comes first; never readable.
                assert_ne!(
                    wait_armed(&armed, Duration::from_millis(20)),
                    Some(true),
                    "round {round}: readable while nothing comes"
                );
                ps.send(b"shm").unwrap();
                sent = true;
            }
            if wait_armed(&armed, WAIT) == Some(true) {
                by_fd += 1;
            }
        }
        assert_eq!(&*s.try_recv().unwrap().expect("the message"), b"shm");
    }
    assert!(
        by_fd > 0,
        "the descriptor never became readable for a message"
    );
    // UDP alone, and both in one set: readable, then the message is there.
    for both in [false, true] {
        pu.send(b"udp").unwrap();
        let deadline = Instant::now() + WAIT;
        loop {
            assert!(
                Instant::now() < deadline,
                "no UDP message seen (both: {both})"
            );
            let items: Vec<&mut dyn ferry::Waitable> = if both {
                vec![&mut s, &mut u]
            } else {
                vec![&mut u]
            };
            let armed = set.arm(items).unwrap();
            if !armed.ready().is_empty() {
                break;
            }
            let _ = wait_armed(&armed, WAIT);
        }
        assert_eq!(&*u.try_recv().unwrap().expect("the UDP message"), b"udp");
    }
    // Something waiting already: ready at once, no descriptor.
    ps.send(b"waiting").unwrap();
    assert!(wait_until(WAIT, || {
        let armed = set.arm(vec![&mut s, &mut u]).unwrap();
        armed.ready() == [0] && armed.fd().is_none()
    }));
}
