//! The UDP transport end to end over loopback sockets: publishers and subscribers in this process
//! and in child processes, with ferry's own loss injection. Every wait has a deadline.

use std::time::{Duration, Instant};

use ferry::{Delivery, IpVersion, Node, Qos, Transport, WaitStrategy};

#[allow(dead_code)]
const _DELIVERY: Delivery = Delivery::Reliable;

fn domain(tag: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "u{}-{}-{tag}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn udp() -> Qos {
    Qos::default().transport(Transport::Udp)
}

fn pattern(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq as usize).wrapping_mul(31).wrapping_add(i) as u8)
        .collect()
}

fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    cond()
}

#[test]
fn udp_roundtrip_in_one_process_every_size_and_wait() {
    for (ip, wait) in [
        (IpVersion::V4, WaitStrategy::Block),
        (IpVersion::V6, WaitStrategy::Spin),
        (IpVersion::V4, WaitStrategy::Adaptive),
    ] {
        let dom = domain("rt");
        let node = Node::with_domain("n", &dom).unwrap();
        let qos = udp().ip_version(ip).wait(wait).max_message_size(256 << 10);
        let mut sub = node.subscriber("t", &qos).unwrap();
        let mut publ = node.publisher("t", &qos).unwrap();
        assert!(wait_until(Duration::from_secs(5), || publ
            .subscriber_count()
            == 1));
        for (seq, len) in [0usize, 1, 100, 1432, 1433, 5000, 200_000]
            .into_iter()
            .enumerate()
        {
            publ.send(&pattern(seq as u64, len)).unwrap();
            let s = sub
                .recv_timeout(Duration::from_secs(5))
                .unwrap()
                .expect("message");
            assert_eq!(s.seq(), seq as u64);
            assert_eq!(
                &*s,
                &pattern(seq as u64, len)[..],
                "{ip:?} {wait:?} size {len}"
            );
        }
    }
}
