//! Typed topics: the first end to declare a type gives the topic its type; an end that declares
//! another is refused with an error naming both, over either transport, publisher or subscriber;
//! an end that declares none takes the bytes; the bytes are the published bytes, typed or not.

use std::time::Duration;

use ferry::{Error, MessageEncoding, Node, Qos, TopicType, Transport};

mod common;
use common::*;

const WAIT: Duration = Duration::from_secs(10);

fn imu() -> TopicType {
    TopicType::new(
        "sensor_msgs/msg/Imu",
        MessageEncoding::Cdr,
        "std_msgs/Header header\ngeometry_msgs/Quaternion orientation\n",
    )
    .unwrap()
}

fn vector3() -> TopicType {
    TopicType::new(
        "geometry_msgs/msg/Vector3",
        MessageEncoding::Cdr,
        "float64 x\nfloat64 y\nfloat64 z\n",
    )
    .unwrap()
}

fn qos(t: Transport) -> Qos {
    blocking_qos(t, 1024)
}

fn refused_naming_both(e: Error, role: &str) {
    let text = e.to_string();
    assert!(matches!(e, Error::TypeMismatch { .. }), "{text}");
    assert!(
        text.contains("sensor_msgs/msg/Imu")
            && text.contains("geometry_msgs/msg/Vector3")
            && text.contains(role),
        "{text}"
    );
}

#[test]
fn a_subscriber_of_another_type_is_refused_naming_both_and_an_untyped_one_takes_the_bytes() {
    for t in [Transport::Shm, Transport::Udp, Transport::Auto] {
        let node = Node::with_domain("typed", &domain(&format!("typed-sub-{t:?}"))).unwrap();
        let topic = "imu";
        let mut publ = node.publisher(topic, &qos(t).topic_type(imu())).unwrap();
        let e = node
            .subscriber(topic, &qos(t).topic_type(vector3()))
            .unwrap_err();
        refused_naming_both(e, "subscriber");

        let mut typed = node.subscriber(topic, &qos(t).topic_type(imu())).unwrap();
        let mut untyped = node.subscriber(topic, &qos(t)).unwrap();
        assert_eq!(typed.topic_type().unwrap(), Some(imu()));
        assert_eq!(untyped.topic_type().unwrap(), Some(imu()));
        assert!(meet(&mut typed, &publ, WAIT), "{t:?}");
        assert!(meet(&mut untyped, &publ, WAIT), "{t:?}");
        publ.send(b"\x00\x01\x00\x00bytes as published").unwrap();
        for sub in [&mut typed, &mut untyped] {
            let got = sub.recv_timeout(WAIT).unwrap().expect("a message");
            assert_eq!(&got[..], b"\x00\x01\x00\x00bytes as published", "{t:?}");
        }
    }
}

#[test]
fn a_publisher_of_another_type_is_refused_and_a_subscriber_types_a_topic_first() {
    let node = Node::with_domain("typed", &domain("typed-pub")).unwrap();
    // The subscriber comes first: its type is the topic's.
    let _sub = node
        .subscriber("imu", &qos(Transport::Shm).topic_type(imu()))
        .unwrap();
    let e = node
        .publisher("imu", &qos(Transport::Shm).topic_type(vector3()))
        .unwrap_err();
    refused_naming_both(e, "publisher");
    // Refused, it holds no slot: the topic still has no publisher.
    let snap = ferry::admin::topic(node.domain(), "imu").unwrap().unwrap();
    assert!(snap.publishers.is_empty());
    assert_eq!(snap.topic_type.unwrap(), Some(imu()));
    // An untyped publisher writes to the typed topic.
    node.publisher("imu", &qos(Transport::Shm)).unwrap();
}

#[test]
fn a_topic_forgets_its_type_when_its_last_end_goes() {
    let node = Node::with_domain("typed", &domain("typed-gone")).unwrap();
    drop(
        node.publisher("imu", &qos(Transport::Shm).topic_type(imu()))
            .unwrap(),
    );
    node.publisher("imu", &qos(Transport::Shm).topic_type(vector3()))
        .unwrap();
}
