//! Typed payloads (`loan_slice`, `send_slice`, `Sample::as_slice`) on both transports: values
//! arrive as sent, an empty message is an empty slice, and an element type a payload cannot hold
//! (no bytes, or aligned past a payload's 8 bytes) is an error, never a panic.

mod common;

use std::time::Duration;

use common::{domain, meet};
use ferry::{pod, Delivery, Node, PodError, Qos, SendError, Transport};

const BOUND: Duration = Duration::from_secs(30);

/// An element aligned past what a payload guarantees.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Wide([u8; 32]);
// SAFETY: 32 bytes, no padding (the alignment equals the size), every bit pattern valid.
unsafe impl ferry::Pod for Wide {}

#[test]
fn typed_loans_and_samples_on_both_transports() {
    for transport in [Transport::Shm, Transport::Udp] {
        let dom = domain("pod");
        let node = Node::with_domain("n", &dom).unwrap();
        let qos = Qos::default()
            .transport(transport)
            .delivery(Delivery::Reliable)
            .max_message_size(4096);
        let mut sub = node.subscriber("t", &qos).unwrap();
        let mut publ = node.publisher("t", &qos).unwrap();
        assert!(
            meet(&mut sub, &publ, BOUND),
            "{transport:?}: the publisher and the subscriber never met"
        );

        // No element of a type a payload cannot hold is lent.
        assert_eq!(
            publ.loan_slice::<[u32; 0]>(1).err(),
            Some(SendError::ElementType { size: 0, align: 4 })
        );
        assert_eq!(
            publ.loan_slice::<Wide>(1).err(),
            Some(SendError::ElementType {
                size: 32,
                align: 32
            })
        );

        // Values, then an empty message (a fresh UDP publisher's first loan of no bytes has no
        // buffer behind it), then three bytes.
        let mut loan = publ.loan_slice::<u32>(4).unwrap();
        loan.as_mut_slice().copy_from_slice(&[1, 2, 3, 0xDEAD_BEEF]);
        loan.send().unwrap();
        let mut empty = publ.loan_slice::<u64>(0).unwrap();
        assert!(empty.as_mut_slice().is_empty(), "{transport:?}");
        empty.send().unwrap();
        publ.send(&[1, 2, 3]).unwrap();

        let s = sub.recv_timeout(BOUND).unwrap().expect("the values");
        assert_eq!(s.as_slice::<u32>().unwrap(), &[1, 2, 3, 0xDEAD_BEEF]);
        drop(s);
        let s = sub.recv_timeout(BOUND).unwrap().expect("the empty message");
        assert_eq!(s.as_slice::<u64>().unwrap(), &[] as &[u64], "{transport:?}");
        drop(s);
        let s = sub.recv_timeout(BOUND).unwrap().expect("three bytes");
        assert_eq!(
            s.as_slice::<u16>().err(),
            Some(PodError::Length { len: 3, size: 2 })
        );
    }
}

#[test]
fn no_bytes_are_no_elements_wherever_they_point() {
    let empty: Vec<u8> = Vec::new();
    assert_eq!(pod::from_bytes::<u64>(&empty).unwrap(), &[] as &[u64]);
    let mut empty: Vec<u8> = Vec::new();
    assert!(pod::from_bytes_mut::<u32>(&mut empty).unwrap().is_empty());
    // A type of no bytes has no count of elements.
    assert_eq!(
        pod::from_bytes::<[u8; 0]>(&[]).err(),
        Some(PodError::Length { len: 0, size: 0 })
    );
}
