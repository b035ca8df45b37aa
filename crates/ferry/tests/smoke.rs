use ferry::{Delivery, Node, Qos, WaitStrategy};
use std::time::Duration;

#[test]
fn in_process_roundtrip() {
    let domain = format!("smoke{}", std::process::id());
    let node = Node::with_domain("n", &domain).unwrap();
    for wait in [
        WaitStrategy::Spin,
        WaitStrategy::Block,
        WaitStrategy::Adaptive,
    ] {
        for delivery in [Delivery::Reliable, Delivery::Latest] {
            let qos = Qos::default()
                .wait(wait)
                .delivery(delivery)
                .max_message_size(4096);
            let topic = format!("t{:?}{:?}", wait, delivery);
            let mut sub = node.subscriber(&topic, &qos).unwrap();
            let mut publ = node.publisher(&topic, &qos).unwrap();
            assert_eq!(sub.publisher_count(), 1);
            for i in 0..100u32 {
                publ.send_slice(&[i, i + 1, i + 2]).unwrap();
                let s = sub
                    .recv_timeout(Duration::from_secs(5))
                    .unwrap()
                    .expect("message");
                assert_eq!(s.as_slice::<u32>().unwrap(), &[i, i + 1, i + 2]);
            }
        }
    }
}
